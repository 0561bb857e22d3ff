"""The perf-db on storage that cannot be written, and tables written by other tools.

Read-only storage is real here, also for root: ``chattr +i`` makes a file (or a
directory's entries) immutable (skipped where chattr or the file system cannot).

* ``tune``'s pre-check fails exactly when the later store would (no sweep first);
* readers on read-only storage see every record, also those still in the ``-wal`` file
  (``immutable=1`` alone silently left them out);
* rows whose values have the wrong type are skipped with a warning (list, export) or make
  a run warn and take the default config -- no traceback, no "Unknown format code".
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, run_cli
from miopen_solver import SOLVER_NAME
from miopen_solver.command import parse
from miopen_solver.errors import PerfDbError
from miopen_solver.perfdb import ENV_VAR, PerfDb
from miopen_solver.solver import DgradSolver
from miopen_solver.target import get_target

NHWC = "--in_layout NHWC --out_layout NHWC --fil_layout NHWC"
LINE = f"convfp16 -n 1 -c 8 -H 5 -W 5 -k 8 -y 3 -x 3 -p 1 -q 1 -F 2 -t 1 -i 1 {NHWC}"
KEY = parse(LINE).problem.problem_key()
XKEY = "2x8x5x5x1x3x3x1x8x1x1x1x0x1x1x0x1x1x0x0x1xNHWCxFP16xB"   # KEY as MIOpen's x-key (by hand)
TUNED = "32,16,16,2,1,16,16,0,0,0,1,-1,2"
DEFAULT = DgradSolver().get_default_performance_config(parse(LINE).problem, get_target("cpu")).serialize()


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "default.sqlite"))


@pytest.fixture
def immutable():
    """``make(path)``: ``chattr +i path`` (undone at teardown)."""
    done = []

    def make(path):
        if shutil.which("chattr") is None:
            pytest.skip("no chattr")
        r = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True)
        if r.returncode != 0:
            pytest.skip(f"chattr +i not possible here: {r.stderr.strip()}")
        done.append(path)
    yield make
    for path in reversed(done):
        subprocess.run(["chattr", "-i", str(path)], check=True)


def make_db(path, records=((KEY, TUNED, 1.5),)):
    with PerfDb(path) as db:
        for key, values, ms in records:
            db.update(key, "cpu", SOLVER_NAME, values, ms)
    return path


def leave_in_wal(path, key, values, ms):
    """Write one record from a process that dies before closing: the record stays in the
    -wal file (no checkpoint) and the -wal and -shm files stay."""
    code = ("import os, sys; from miopen_solver.perfdb import PerfDb; "
            f"db = PerfDb({str(path)!r}); db.update({key!r}, 'cpu', {SOLVER_NAME!r}, {values!r}, {ms!r}); "
            "os._exit(0)")
    subprocess.run([sys.executable, "-c", code], check=True, env=dict(os.environ, PYTHONPATH=ROOT), timeout=120)
    assert os.path.getsize(f"{path}-wal") > 0


# ------------------------------------------------------------------ the tune pre-check
def storage(kind, tmp_path, immutable):
    d = tmp_path / "store"
    d.mkdir()
    db = make_db(d / "p.sqlite")
    if kind == "read-only file":
        immutable(db)
    elif kind == "read-only directory":
        immutable(d)
    return db


@pytest.mark.parametrize("kind", ["writable", "read-only file", "read-only directory"])
def test_write_check_fails_exactly_when_the_store_would(tmp_path, immutable, kind):
    db = storage(kind, tmp_path, immutable)
    try:
        with PerfDb(db) as d:
            d.check(write=True)
        checked = None
    except PerfDbError as e:
        checked = e.reason
    try:
        with PerfDb(db) as d:
            d.update("OTHER-KEY", "cpu", SOLVER_NAME, TUNED, 1.0)
        stored = None
    except PerfDbError as e:
        stored = e.reason
    assert (checked is None) == (stored is None) == (kind == "writable"), (checked, stored)
    with PerfDb(db) as d:                       # and it is still read
        assert d.get(KEY, "cpu", SOLVER_NAME).values == TUNED


@pytest.mark.parametrize("kind,why", [("read-only file", "cannot be written (attempt to write a readonly database)"),
                                      ("read-only directory", "cannot create files in ")])
def test_tune_on_a_read_only_perfdb_fails_before_the_sweep(capsys, tmp_path, immutable, no_workers, kind, why):
    db = storage(kind, tmp_path, immutable)
    status, out, err = run_cli(capsys, "tune", *LINE.split(), "--backend", "cpu", "--perfdb", db)
    assert status == 2 and out == [] and len(err) == 1
    assert err[0].startswith(f"dgrad-driver: error: --perfdb {db}: {why}"), err[0]


@pytest.mark.parametrize("command", ["tune", "search", "import", "enforce-search", "db-clean"])
def test_a_perfdb_without_write_permission_is_refused_for_writes_also_for_root(capsys, tmp_path, no_workers,
                                                                                monkeypatch, command):
    """A perf-db of mode 0444 was refused only where the OS refused the write: root's writes
    pass the permission bits, so tune, ``-s 1``, ``perfdb import`` and the find-enforce
    actions changed a perf-db its owner had made read-only (every other file the user names
    is refused without write permission also for root). Now every write refuses it before
    anything runs, one line, exit 2, the file as it was; runs still read it."""
    db = make_db(tmp_path / "p.sqlite")
    os.chmod(db, 0o444)
    before = db.read_bytes()
    records = tmp_path / "records.txt"
    records.write_text(f"{XKEY}=1000:{DEFAULT}\n")
    line = [*LINE.split(), "--backend", "cpu", "--perfdb", str(db)]
    args = {"tune": ["tune", *line, "--max-configs", "1"], "search": [*line, "-s", "1"],
            "import": ["perfdb", "import", str(records), "--arch", "cpu", "--perfdb", str(db)],
            "enforce-search": line, "db-clean": line}[command]
    if command == "search":       # -s 1 searches with a record there only with DB_UPDATE
        monkeypatch.setenv("MIOPEN_FIND_ENFORCE", "DB_UPDATE")
    elif command == "enforce-search":
        monkeypatch.setenv("MIOPEN_FIND_ENFORCE", "SEARCH_DB_UPDATE")
    elif command == "db-clean":
        monkeypatch.setenv("MIOPEN_FIND_ENFORCE", "DB_CLEAN")
    status, out, err = run_cli(capsys, *args)
    assert status == 2 and out == [] and len(err) == 1, (out, err)
    assert err[0].startswith("dgrad-driver: error: ") and f"{db}: is read-only (mode 0444)" in err[0], err[0]
    assert "; allowed: " in err[0], err[0]
    assert db.read_bytes() == before
    with pytest.raises(PerfDbError, match=r"is read-only \(mode 0444\)"):
        PerfDb(db).update("OTHER-KEY", "cpu", SOLVER_NAME, TUNED, 1.0)
    monkeypatch.delenv("MIOPEN_FIND_ENFORCE", raising=False)
    status, out, err = run_cli(capsys, *line, "--print-name-only")
    assert status == 0 and err == []
    with PerfDb(db) as d:
        assert d.get(KEY, "cpu", SOLVER_NAME).values == TUNED


# ------------------------------------------------------------------ WAL on read-only storage
@pytest.mark.parametrize("shm", ["kept", "gone"])
def test_records_in_the_wal_are_read_on_read_only_storage(capsys, tmp_path, immutable, shm):
    """With -shm: sqlite reads the -wal read-only. Without it (and no way to create it):
    the file and its -wal are read from a temporary copy. Either way nothing is lost."""
    d = tmp_path / "store"
    d.mkdir()
    db = make_db(d / "p.sqlite")
    leave_in_wal(db, "WAL-KEY", TUNED, 2.5)
    if shm == "gone":
        os.remove(f"{db}-shm")
    immutable(d)
    status, out, err = run_cli(capsys, "perfdb", "list", "--perfdb", db)
    assert status == 0 and err == []
    assert out == [f"cpu {XKEY} {SOLVER_NAME} {TUNED} 1.500000 ms", f"cpu WAL-KEY {SOLVER_NAME} {TUNED} 2.500000 ms"]
    with PerfDb(db) as p:
        assert p.get("WAL-KEY", "cpu", SOLVER_NAME).time_ms == 2.5
    assert sorted(os.listdir(d)) == sorted(["p.sqlite", "p.sqlite-wal"] + (["p.sqlite-shm"] if shm == "kept" else []))


class _FailingStorage:
    """A connection on storage that fails under sqlite (a full file system: no -shm can be
    made): every statement raises what sqlite raises there."""

    def __init__(self, msg):
        self.msg = msg

    def execute(self, *a):
        raise sqlite3.OperationalError(self.msg)

    def close(self):
        pass


@pytest.mark.parametrize("msg", ["disk I/O error", "database or disk is full", "unable to open database file"])
def test_a_reader_on_failing_storage_reads_as_on_read_only_storage(capsys, tmp_path, monkeypatch, msg):
    """A fresh-user trial filled the perf-db's file system: list failed with "disk I/O
    error" and a run dropped the tuned record. A reader whose plain connection fails that way
    reads through the read-only path (here the -wal copy); a writer's error says the storage
    failed, not that the file is not a perf-db."""
    db = make_db(tmp_path / "p.sqlite")
    leave_in_wal(db, "WAL-KEY", TUNED, 2.5)
    real = PerfDb._sqlite
    monkeypatch.setattr(PerfDb, "_sqlite", lambda self, target, uri=False:
                        _FailingStorage(msg) if not uri and str(target) == str(db) else real(self, target, uri))
    status, out, err = run_cli(capsys, "perfdb", "list", "--perfdb", db)
    assert status == 0 and err == [] and f"cpu WAL-KEY {SOLVER_NAME} {TUNED} 2.500000 ms" in out
    with pytest.raises(PerfDbError) as e:
        PerfDb(db).update("NEW", "cpu", SOLVER_NAME, TUNED, 1.0)
    full = f"its storage failed ({msg}): the file system may be full"      # not said for CANTOPEN (permissions)
    assert (full in str(e.value)) == (msg != "unable to open database file") and msg in str(e.value)


def test_a_clean_perfdb_on_read_only_storage_is_read(capsys, tmp_path, immutable):
    d = tmp_path / "store"
    d.mkdir()
    db = make_db(d / "p.sqlite")
    assert not os.path.exists(f"{db}-wal")
    immutable(d)
    status, out, err = run_cli(capsys, *LINE.split(), "--backend", "cpu", "--perfdb", db)
    assert status == 0 and err == [] and f"Using perf-db config {TUNED} (tuned 1.500000 ms) from {db}" in out


# ------------------------------------------------------------------ foreign column types
def foreign_db(path):
    """The perf_db table as another tool might write it: right column names, loose types."""
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE perf_db (problem_key, arch, solver, params, time_ms, updated, "
                "PRIMARY KEY (problem_key, arch, solver))")
    con.executemany("INSERT INTO perf_db VALUES (?, ?, ?, ?, ?, 0)", [
        (KEY, "cpu", SOLVER_NAME, TUNED, "fast"),                   # text time
        ("K-BLOB", "cpu", SOLVER_NAME, b"\x01\x02", 1.0),           # blob params
        (7, "cpu", SOLVER_NAME, TUNED, 1.0),                        # integer key
        ("K-NEG", "cpu", SOLVER_NAME, TUNED, -3.0),                 # negative time
        ("K-SEMI", "cpu", SOLVER_NAME, "1;2", 1.0),                 # a record separator inside
        ("K-GOOD", "cpu", SOLVER_NAME, TUNED, 2),                   # an integer time is a time
        ("K-NULL", "cpu", SOLVER_NAME, TUNED, None),
    ])
    con.commit()
    con.close()
    return path


def test_list_and_export_skip_rows_of_the_wrong_type_with_one_warning(capsys, tmp_path):
    db = foreign_db(tmp_path / "f.sqlite")
    status, out, err = run_cli(capsys, "perfdb", "list", "--perfdb", db, "--json")
    assert status == 0 and [(r["problem_key"], r["time_ms"]) for r in json.loads(out[0])] == \
        [("K-GOOD", 2.0), ("K-NULL", None)]
    assert len(err) == 1 and err[0].startswith(f"dgrad-driver: warning: {db}: skipped 5 record(s) of the wrong type: ")
    assert "(and 4 more)" in err[0]
    status, out, err = run_cli(capsys, "perfdb", "list", "--perfdb", db)
    assert status == 0 and out == [f"cpu K-GOOD {SOLVER_NAME} {TUNED} 2.000000 ms",
                                   f"cpu K-NULL {SOLVER_NAME} {TUNED} (no time)"]
    status, out, err = run_cli(capsys, "perfdb", "export", "--arch", "cpu", "--perfdb", db)
    assert status == 0 and out == [f"K-GOOD={SOLVER_NAME}:{TUNED}", f"K-NULL={SOLVER_NAME}:{TUNED}"]
    assert len(err) == 1 and "skipped 5 record(s)" in err[0]


@pytest.mark.parametrize("column,value,why", [
    ("in_channels", "abc", "in_channels is text 'abc', not an integer"),
    ("batchsize", 2.5, "batchsize is a real 2.5, not an integer"),
    ("in_h", b"\x05", "in_h is a blob"),
    ("layout", b"\x00", "layout is a blob b'\\x00', not text"),
    ("data_type", "", "perf-db data_type '': allowed: a non-empty string"),
    ("direction", "B;F", "contains ';'"),
])
def test_list_and_export_skip_miopen_config_rows_of_the_wrong_type(capsys, tmp_path, column, value, why):
    """MIOpen's ``config`` table takes any type in any column too: a row with a value of
    the wrong type was listed and exported under a key built from it (``...xb'\\x00'xFP16xB``,
    ``2xabcx...``); it is skipped and named in the one warning, as a perf_db row is."""
    db = make_db(tmp_path / "p.sqlite", records=((KEY, TUNED, 1.5), (XKEY.replace("2x8x5x5x", "2x8x9x9x"), TUNED, 2.0)))
    con = sqlite3.connect(db)
    con.execute(f"UPDATE config SET {column} = ? WHERE id = (SELECT MIN(id) FROM config)", (value,))
    con.commit()
    con.close()
    for sub in (["list"], ["export", "--arch", "cpu"]):
        status, out, err = run_cli(capsys, "perfdb", *sub, "--perfdb", db)
        assert status == 0 and len(out) == 1 and "x9x9x" in out[0] and "b'" not in out[0], out
        assert len(err) == 1 and err[0].startswith(f"dgrad-driver: warning: {db}: skipped 1 record(s) of the wrong "
                                                   f"type: config row ") and why in err[0], err


@pytest.mark.parametrize("value,why", [("fast", "time_ms is text 'fast', not a number or NULL"),
                                       (b"\x00", "time_ms is a blob"), (float("inf"), "not a finite number")])
def test_a_run_warns_about_a_record_of_the_wrong_type_and_uses_the_default(capsys, tmp_path, value, why):
    db = tmp_path / "f.sqlite"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE perf_db (problem_key, arch, solver, params, time_ms, updated)")
    con.execute("INSERT INTO perf_db VALUES (?, 'cpu', ?, ?, ?, 0)", (KEY, SOLVER_NAME, TUNED, value))
    con.commit()
    con.close()
    status, out, err = run_cli(capsys, *LINE.split(), "--backend", "cpu", "--perfdb", db)
    assert status == 0 and not any("perf-db config" in x for x in out)
    assert len(err) == 1 and err[0].startswith(f"dgrad-driver: warning: --perfdb {db} unusable: record (")
    assert why in err[0] and err[0].endswith("using the default config")
    status, out, _ = run_cli(capsys, "config", *LINE.split(), "--arch", "cpu", "--perfdb", db)
    assert status == 0 and DEFAULT in " ".join(out)


def test_write_check_refuses_another_database(tmp_path):
    """An SQLite file with other tables and no perf_db is someone else's database: refused
    by the check (one reason), not written."""
    path = tmp_path / "p.udb"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (x TEXT)")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    with pytest.raises(PerfDbError, match="wrong schema: an SQLite database without a perf_db table"):
        with PerfDb(path) as d:
            d.check(write=True)
    assert path.read_bytes() == before


@pytest.mark.parametrize("contents", ["empty file", "sqlite without tables"])
def test_write_check_of_a_file_without_the_perf_db_table(tmp_path, contents):
    """An existing file that holds no table yet (an empty file, a fresh sqlite file) passes
    the write check (the schema is created and rolled back: this path raised NameError
    before) and then takes a record; the check itself leaves nothing behind."""
    path = tmp_path / "p.udb"
    if contents == "empty file":
        path.write_bytes(b"")
    else:
        conn = sqlite3.connect(path)
        conn.execute("PRAGMA user_version = 1")         # a real, table-less database file
        conn.commit()
        conn.close()
    with PerfDb(path) as d:
        d.check(write=True)
    conn = sqlite3.connect(path)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    conn.close()
    assert "perf_db" not in tables                       # the check wrote nothing
    key = parse("convfp16 -n 2 -c 8 -H 8 -W 8 -k 8 -y 3 -x 3 -p 1 -q 1 -F 2".split()).problem.problem_key()
    with PerfDb(path) as d:
        d.update(key, "sm_90", SOLVER_NAME, "64,64,32,2,2,32,32,0,0,0,1,-1,2", 0.5)
        assert d.get(key, "sm_90", SOLVER_NAME).time_ms == 0.5


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux /proc (a directory no one creates files in)")
def test_a_missing_directory_is_checked_before_a_tune_by_where_it_would_be_created(tmp_path, capsys, monkeypatch):
    """A perf-db whose directory does not exist yet (the built-in ~/.config/miopen on a fresh
    machine) is created on the first write; the write check says up front when it cannot be,
    not after a tune's sweep: an ancestor that is a file, or one that takes no new files (HOME
    under /proc, where even root creates nothing); a creatable one passes, creating nothing."""
    blocker = tmp_path / "home"
    blocker.write_text("a file where a directory would go")
    with pytest.raises(PerfDbError, match="home, which is not a directory"):
        PerfDb(blocker / ".config" / "miopen" / "x.udb", make_parents=True).check(write=True)
    with pytest.raises(PerfDbError, match=r"cannot create the directory /proc/dgrad-no-such/.config/miopen \(/proc: "):
        PerfDb(Path("/proc/dgrad-no-such/.config/miopen/x.udb"), make_parents=True).check(write=True)
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    for where in (tmp_path / "dangling", tmp_path / "dangling" / "sub"):
        with pytest.raises(PerfDbError, match="dangling is a symbolic link to .*nowhere.*, which does not exist"):
            PerfDb(where / "x.udb", make_parents=True).check(write=True)
    PerfDb(tmp_path / "fresh" / ".config" / "miopen" / "x.udb", make_parents=True).check(write=True)
    assert not (tmp_path / "fresh").exists()
    monkeypatch.setenv("MIOPEN_USER_DB_PATH", "/proc/dgrad-no-such/.config/miopen")   # the built-in location
    monkeypatch.delenv(ENV_VAR, raising=False)
    status, out, err = run_cli(capsys, "tune", "conv", "-n", "1", "-c", "4", "-H", "4", "-W", "4", "-k", "4",
                               "-y", "1", "-x", "1", "-F", "2", "--backend", "cpu", "--max-configs", "2")
    assert status == 2 and len(err) == 1 and "cannot create the directory /proc/dgrad-no-such" in err[0], err
    assert not any(" OK " in line for line in out), out


def test_an_empty_home_is_the_accounts_home_not_the_root_directory(monkeypatch):
    """HOME='' made '~' expand to nothing: the built-in perf-db went to /.config/miopen (a tune
    created it there). An empty HOME counts as unset, as for a shell's '~'."""
    import pwd
    from miopen_solver.miopen_db import user_db_dir
    monkeypatch.delenv("MIOPEN_USER_DB_PATH", raising=False)
    monkeypatch.setenv("HOME", "")
    assert user_db_dir() == Path(pwd.getpwuid(os.getuid()).pw_dir) / ".config" / "miopen"
    monkeypatch.setenv("HOME", "/somewhere")
    assert user_db_dir() == Path("/somewhere/.config/miopen")
