"""Perf-db: location, best-of semantics, MIOpen's text record form, concurrent writers."""

import multiprocessing as mp
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from miopen_solver import SOLVER_NAME
from miopen_solver.errors import ArgumentError
from miopen_solver.perfdb import ENV_VAR, PerfDb, PerfRecord, default_path, parse_record_line

KEY = "64-56-56-1x1-256-56-56-32-0x0-1x1-1x1-0-NHWC-NHWC-NHWC-FP16-B"
XKEY = "2x64x56x56x1x1x1x1x256x32x0x0x0x1x1x0x1x1x0x0x1xNHWCxFP16xB"
"""KEY as MIOpen's x-key, by hand: 2-D; dY 64 channels 56x56 (depth 1); filter 1x1 (depth 1);
dX 256 channels; N 32; pads 0,0,0; strides 1,1,0; dilations 1,1,0; bias 0; G 1; NHWC FP16 B."""
CFG = "128,64,32,2,2,64,32,0,0,0,1,-1,3"


# ------------------------------------------------------------------ location
def test_default_path_env_then_miopen_user_db_dir(monkeypatch, tmp_path):
    """MIOPEN_DGRAD_PERFDB overrides; else MIOpen's user db dir: $MIOPEN_USER_DB_PATH, else
    ~/.config/miopen (db_path.cpp.in), never a cache dir."""
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "x.sqlite"))
    monkeypatch.setenv("MIOPEN_USER_DB_PATH", str(tmp_path / "udb"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_path() == tmp_path / "x.sqlite"
    monkeypatch.delenv(ENV_VAR)
    assert default_path() == tmp_path / "udb" / "miopen-dgrad_1.1.0.udb"
    monkeypatch.delenv("MIOPEN_USER_DB_PATH")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_path() == tmp_path / "home" / ".config" / "miopen" / "miopen-dgrad_1.1.0.udb"
    assert PerfDb().path == default_path()
    assert PerfDb(tmp_path / "given.sqlite").path == tmp_path / "given.sqlite"


def test_lookups_never_create_the_file(tmp_path):
    path = tmp_path / "sub" / "db.sqlite"
    with PerfDb(path) as db:
        assert db.get(KEY, "gfx942", SOLVER_NAME) is None
        assert db.records() == [] and db.export_text("gfx942") == ""
        assert db.remove(KEY, "gfx942", SOLVER_NAME) is False
    assert not path.exists()


# ------------------------------------------------------------------ records
def test_update_keeps_the_best(tmp_path):
    with PerfDb(tmp_path / "db.sqlite") as db:
        assert db.update(KEY, "gfx942", SOLVER_NAME, CFG, 0.50)
        assert db.get(KEY, "gfx942", SOLVER_NAME) == PerfRecord(XKEY, "gfx942", SOLVER_NAME, CFG, 0.50)
        assert db.get(XKEY, "gfx942", SOLVER_NAME) == PerfRecord(XKEY, "gfx942", SOLVER_NAME, CFG, 0.50)
        assert not db.update(KEY, "gfx942", SOLVER_NAME, "other", 0.60)      # slower: kept
        assert db.update(KEY, "gfx942", SOLVER_NAME, "faster", 0.40)
        assert db.get(KEY, "gfx942", SOLVER_NAME).values == "faster"
        assert db.update(KEY, "gfx942", SOLVER_NAME, "forced", 9.0, force=True)
        assert db.get(KEY, "gfx942", SOLVER_NAME).time_ms == 9.0
        assert db.update(KEY, "gfx942", SOLVER_NAME, "untimed", None, force=True)
        assert db.update(KEY, "gfx942", SOLVER_NAME, "timed", 1.0)           # beats an unknown time
        # arch and solver are part of the key
        assert db.get(KEY, "sm_90", SOLVER_NAME) is None
        db.update(KEY, "gfx942", "OtherSolver", "x", 0.1)
        assert len(db.records()) == 2 and len(db.records("gfx942")) == 2 and db.records("sm_90") == []
        assert db.remove(KEY, "gfx942", "OtherSolver") and len(db.records()) == 1


@pytest.mark.parametrize("field", ["key", "arch", "solver", "values"])
@pytest.mark.parametrize("bad", ["a=b", "a;b", "a:b", ""])
def test_fields_reject_record_separators(tmp_path, field, bad):
    args = dict(key=KEY, arch="gfx942", solver=SOLVER_NAME, values=CFG)
    args[field] = bad
    with PerfDb(tmp_path / "db.sqlite") as db, pytest.raises(ValueError):
        db.update(args["key"], args["arch"], args["solver"], args["values"], 1.0)


def test_negative_time_rejected(tmp_path):
    with PerfDb(tmp_path / "db.sqlite") as db, pytest.raises(ArgumentError, match=">= 0"):
        db.update(KEY, "gfx942", SOLVER_NAME, CFG, -1.0)


FIELD_NAMES = {"key": "problem key", "arch": "arch", "solver": "solver id", "values": "values"}


@pytest.mark.parametrize("field", ["key", "arch", "solver"])
@pytest.mark.parametrize("bad", [None, b"gfx942", 5, "", "a=b", " gfx942", ["gfx942"]])
def test_get_update_and_remove_refuse_a_key_field_that_is_no_field(tmp_path, field, bad):
    """``get(None, ...)`` and ``update(None, ...)`` were TypeErrors from the key's regex;
    ``get(key, None, ...)`` answered None. Each names the field and what it takes."""
    args = dict(key=KEY, arch="gfx942", solver=SOLVER_NAME)
    args[field] = bad
    match = rf"^perf-db {FIELD_NAMES[field]} .*allowed: a non-empty string without any of '=;:'"
    with PerfDb(tmp_path / "db.sqlite") as db:
        db.update(KEY, "gfx942", SOLVER_NAME, CFG, 1.0)
        for call in (lambda: db.get(*args.values()), lambda: db.update(*args.values(), CFG, 1.0),
                     lambda: db.remove(*args.values())):
            with pytest.raises(ArgumentError, match=match):
                call()
        assert db.get(KEY, "gfx942", SOLVER_NAME).time_ms == 1.0 and len(db.records()) == 1


@pytest.mark.parametrize("bad", [None, b"1,2", 5, ""])
def test_update_refuses_values_that_are_not_text(tmp_path, bad):
    with PerfDb(tmp_path / "db.sqlite") as db, pytest.raises(ArgumentError, match="^perf-db values .*allowed: "):
        db.update(KEY, "gfx942", SOLVER_NAME, bad, 1.0)


@pytest.mark.parametrize("bad", ["3.5", b"3.5", True, False, float("nan"), float("inf"), -0.5, [1.0], 1 + 2j])
def test_update_refuses_a_time_that_is_not_a_finite_number(tmp_path, bad):
    """A time given as text was converted with float() and stored; a bool was stored as 1."""
    with PerfDb(tmp_path / "db.sqlite") as db:
        with pytest.raises(ArgumentError, match=r"^perf-db time_ms .*: allowed: a finite number >= 0 "
                                                r"\(milliseconds: an int or a float, not text\) or None$"):
            db.update(KEY, "gfx942", SOLVER_NAME, CFG, bad)
        assert db.get(KEY, "gfx942", SOLVER_NAME) is None


@pytest.mark.parametrize("good", [0, 3, 2.5, np.float32(1.5), np.int64(4)])
def test_update_takes_a_time_of_any_real_number_type(tmp_path, good):
    with PerfDb(tmp_path / "db.sqlite") as db:
        assert db.update(KEY, "gfx942", SOLVER_NAME, CFG, good)
        got = db.get(KEY, "gfx942", SOLVER_NAME).time_ms
        assert got == float(good) and type(got) is float


@pytest.mark.parametrize("field", ["device", "product_version"])
def test_update_refuses_provenance_that_is_not_text(tmp_path, field):
    with PerfDb(tmp_path / "db.sqlite") as db, pytest.raises(ArgumentError, match=f"^perf-db {field} 5: allowed: "
                                                                               f"a string or None$"):
        db.update(KEY, "gfx942", SOLVER_NAME, CFG, 1.0, **{field: 5})


def test_wal_mode(tmp_path):
    with PerfDb(tmp_path / "db.sqlite") as db:
        db.update(KEY, "gfx942", SOLVER_NAME, CFG, 1.0)
    con = sqlite3.connect(tmp_path / "db.sqlite")
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    con.close()


# ------------------------------------------------------------------ MIOpen text form
MIOPEN_TEXT = (
    "576-4-4-1x1-192-4-4-8-1x1-2x2-3x3-0-NCHW-FP32-F=ConvAsm1x1U:1,16,1,64,2,2,1,4\n"
    f"{KEY}=ConvHipImplicitGemmGroupBwdXdlops:DeviceGroupedConvBwdDataMultipleD_Xdl_CShuffle_v1<256, 128, 256>+1;"
    f"{SOLVER_NAME}:{CFG}\n"
    "\n"
)


def test_parse_record_line():
    assert parse_record_line(f"{KEY}=A:1,2;B:3") == [(KEY, "A", "1,2"), (KEY, "B", "3")]
    for bad in ("no-equals", "=A:1", f"{KEY}=A", f"{KEY}=A:", f"{KEY}=:1", f"{KEY}=A:1;", f"{KEY}=A:1:2"):
        with pytest.raises(ValueError):
            parse_record_line(bad, 7)
    with pytest.raises(ValueError, match="line 7"):
        parse_record_line("junk", 7)


def test_import_export_round_trip(tmp_path):
    with PerfDb(tmp_path / "db.sqlite") as db:
        assert db.import_text(MIOPEN_TEXT, "gfx942") == 3
        rec = db.get(KEY, "gfx942", SOLVER_NAME)
        assert rec.values == CFG and rec.time_ms is None
        out = db.export_text("gfx942")
        # MIOpen's records come back as the same bytes: lines and entries in file order
        assert out == MIOPEN_TEXT.rstrip("\n") + "\n"
        assert db.export_text("sm_90") == ""
    with PerfDb(tmp_path / "copy.sqlite") as db2:
        db2.import_text(out, "gfx942")
        assert db2.export_text("gfx942") == out


@pytest.mark.parametrize("text,back", [
    (f"\ufeff{KEY}=A:1\n", f"{KEY}=A:1\n"),                                   # the byte-order mark
    (f"{KEY} = A : 1 ; B : 2\n", f"{KEY}=A:1;B:2\n"),                          # spaces around = : ;
    (f"{KEY}=A:1\r\n{KEY}x=B:2", f"{KEY}=A:1\n{KEY}x=B:2\n"),                 # CRLF, no final newline
    (f"{KEY}=A:1\n\n{KEY}x=C:3\n{KEY}=B:2\n", f"{KEY}=A:1;B:2\n{KEY}x=C:3\n"),  # a key on two lines
    (f"{KEY}=A:1;A:2\n", f"{KEY}=A:2\n"),                                      # a (key, solver) twice
    (f"{KEY}=1000:{CFG};200:{CFG}\n", f"{KEY}={SOLVER_NAME}:{CFG}\n"),        # our ids, filed by name
])
def test_import_export_comes_back_in_exports_form(tmp_path, text, back):
    """README: imported into an empty perf-db and exported, MIOpen text is the same bytes
    only when it is in export's own form; these forms come back normalised."""
    from driver.perfdb_cmd import ALIASES
    with PerfDb(tmp_path / "db.sqlite") as db:
        db.import_text(text, "gfx942", ALIASES)
        assert db.export_text("gfx942") == back
    with PerfDb(tmp_path / "again.sqlite") as db:                  # export's form is a fixed point
        db.import_text(back, "gfx942", ALIASES)
        assert db.export_text("gfx942") == back


def test_import_is_all_or_nothing(tmp_path):
    with PerfDb(tmp_path / "db.sqlite") as db:
        with pytest.raises(ValueError, match="line 2"):
            db.import_text(f"{KEY}={SOLVER_NAME}:{CFG}\nbroken line\n", "gfx942")
        assert db.records() == []


# ------------------------------------------------------------------ concurrency
N_WRITES = 1500


def _writer(path: str, worker: int, start) -> None:
    start.wait(30)
    with PerfDb(path) as db:
        for i in range(N_WRITES):
            db.update(f"key-{worker}-{i}", "gfx942", SOLVER_NAME, f"{worker},{i}", float(i))
            db.update("shared", "gfx942", SOLVER_NAME, f"{worker},{i}", 10000.0 - i - worker / 10)
            if i % 250 == 0:
                db.import_text("".join(f"imp-{worker}-{i}-{j}={SOLVER_NAME}:{j}\n" for j in range(20)), "sm_90")


def test_two_processes_writing_at_once(tmp_path):
    path = str(tmp_path / "db.sqlite")
    ctx = mp.get_context("spawn")
    start = ctx.Event()
    procs = [ctx.Process(target=_writer, args=(path, w, start)) for w in (0, 1)]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0]
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.close()
    with PerfDb(path) as db:
        recs = db.records("gfx942")
        assert len(recs) == 2 * N_WRITES + 1
        assert {r.problem_key for r in recs} >= {f"key-{w}-{i}" for w in (0, 1) for i in range(N_WRITES)}
        best = db.get("shared", "gfx942", SOLVER_NAME)
        # the lowest time any writer offered: 10000 - (N_WRITES-1) - 0.1, by worker 1
        assert best.time_ms == pytest.approx(10000.0 - (N_WRITES - 1) - 0.1) and best.values == f"1,{N_WRITES - 1}"
        assert len(db.records("sm_90")) == 2 * (N_WRITES // 250) * 20
    assert Path(path).exists()


def _first_writer(path: str, worker: int, start) -> None:
    start.wait(30)
    with PerfDb(path) as db:
        db.update(f"key-{worker}", "gfx942", SOLVER_NAME, f"{worker},1", 1.0)


@pytest.mark.parametrize("round_", range(6))
def test_processes_creating_the_same_perfdb_at_once(tmp_path, round_):
    """Four processes make the same new file at once (two tune runs starting together): the
    WAL switch and the schema creation must wait for each other instead of failing with
    'database is locked' (seen once in CI with two writers)."""
    path = str(tmp_path / "new.sqlite")
    ctx = mp.get_context("spawn")
    start = ctx.Event()
    procs = [ctx.Process(target=_first_writer, args=(path, w, start)) for w in range(4)]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    with PerfDb(path) as db:
        assert sorted(r.problem_key for r in db.records()) == [f"key-{w}" for w in range(4)]


@pytest.mark.parametrize("arch", ["gfx942:sramecc+:xnack-", "gfx90a:xnack+", "gfx942"])
def test_a_target_with_feature_suffixes_reads_its_base_archs_records(tmp_path, arch):
    """A target from from_device with features (``gfx942:sramecc+``, as HIP names a device)
    looks its perf-db record up under the arch without them, as the driver does (was: an
    ArgumentError, ':' not allowed in a perf-db arch)."""
    from miopen_solver.command import parse
    from miopen_solver.solver import DgradSolver
    from miopen_solver.target import from_device
    p = parse("convfp16 -n 2 -c 16 -H 8 -W 8 -k 16 -y 3 -x 3 -p 1 -q 1 -F 2".split()).problem
    t = from_device("amd", arch)
    assert t.base_arch == arch.split(":")[0]
    cfg = "64,16,32,2,1,32,16,0,0,0,1,-1,2"
    db = PerfDb(tmp_path / "db.sqlite")
    db.update(p.problem_key(), t.base_arch, SOLVER_NAME, cfg, 0.5)
    sol = DgradSolver().find_solution(p, t, perfdb=db)
    assert sol.perf_config.serialize() == cfg and sol.tuned_ms == 0.5


@pytest.mark.parametrize("bad", [None, 5, "", "a:b", "x=y", " gfx942", b"gfx942"])
def test_export_and_listing_take_only_an_arch_a_record_could_have(tmp_path, bad):
    """export_text(None) mixed every arch's records in one MIOpen text (a key's solver twice);
    an arch no record can be filed under (not text, empty, holding =;:) gave an empty answer
    as if there were no records. Both are get()'s ArgumentError; records(None) stays 'all'."""
    db = PerfDb(tmp_path / "p.udb")
    db.update("k1", "cpu", "s", "1,2")
    db.update("k1", "gfx942", "s", "3,4")
    with pytest.raises(ArgumentError, match="perf-db arch"):
        db.export_text(bad)
    if bad is not None:
        with pytest.raises(ArgumentError, match="perf-db arch"):
            db.records(bad)
    assert [r.arch for r in db.records(None)] == ["cpu", "gfx942"]
    assert db.export_text("gfx942") == "k1=s:3,4\n"


@pytest.mark.parametrize("kwargs,says", [
    (dict(path=5), "perf-db path 5: allowed: a path (str or os.PathLike) or None"),
    (dict(path=b"/tmp/x.udb"), "perf-db path b'/tmp/x.udb' (bytes): allowed: a path"),
    (dict(path="/tmp/a\0b"), "allowed: a path without NUL characters"),
    (dict(path="x.udb", make_parents="no"), "perf-db make_parents 'no': allowed: True, False or None"),
    (dict(path="x.udb", miopen_arch="a:b"), "perf-db miopen_arch 'a:b': contains ':'"),
    (dict(path="x.udb", miopen_arch=5), "perf-db miopen_arch 5"),
])
def test_a_perfdb_of_wrong_arguments_is_refused_when_made(kwargs, says):
    """Raw TypeError/ValueError from os and sqlite, a truthy string taken as make_parents=True
    (a directory tree made), an arch stored that no record could carry: each is refused
    when the PerfDb is made, naming the argument and what is allowed."""
    with pytest.raises(ArgumentError) as e:
        PerfDb(**kwargs)
    assert says in str(e.value)


@pytest.mark.parametrize("bad", [None, 5, b"k=s:1"])
def test_a_record_line_that_is_not_text_is_refused(bad):
    with pytest.raises(ArgumentError, match="perf-db record line"):
        parse_record_line(bad)


@pytest.mark.parametrize("aliases,says", [(5, "perf-db aliases 5"), ({"1000": "a:b"}, "perf-db solver id 'a:b'"),
                                          ({"": "S"}, "perf-db solver id alias ''"), ({"1000": 7}, "solver id 7")])
def test_import_aliases_that_would_file_unreadable_records_are_refused(tmp_path, aliases, says):
    """An alias to 'a:b' wrote a row no lookup could read (and read back as 'skipped'); other
    kinds raised AttributeError. Refused before anything is written."""
    db = PerfDb(tmp_path / "a.udb")
    with pytest.raises(ArgumentError) as e:
        db.import_text("x=1000:1,2\n", "cpu", aliases=aliases)
    assert says in str(e.value) and not (tmp_path / "a.udb").exists()
