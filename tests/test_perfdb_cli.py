"""``dgrad-driver perfdb import/export/list``: MIOpen's text form in and out of the sqlite
perf-db, and every bad input as one error line with exit status 2 that writes nothing."""

from __future__ import annotations

import json

import pytest

from driver.cli import main
from miopen_solver import SOLVER_NAME
from miopen_solver.command import parse
from miopen_solver.perfdb import ENV_VAR, PerfDb
from miopen_solver.solver import DgradSolver
from miopen_solver.target import get_target

LINE = ("convfp16 -n 2 -c 16 -H 9 -W 9 -k 16 -y 3 -x 3 -p 1 -q 1 -u 1 -v 1 -l 1 -j 1 -g 1 -F 2 -t 1 -V 1 -i 2 "
        "--in_layout NHWC --out_layout NHWC --fil_layout NHWC")
KEY = parse(LINE).problem.problem_key()
ZKEY = "64-56-56-1x1-256-56-56-32-0x0-1x1-1x1-0-NHWC-NHWC-NHWC-FP16-B"
"""A second MIOpen problem key (records stored under it are exported after KEY's)."""
XKEY = parse(LINE).problem.miopen_db_key()
TUNED = "32,16,16,2,1,16,16,0,0,0,1,-1,2"


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "default.sqlite"))
    monkeypatch.setenv("MIOPEN_DEBUG_DRIVER_PRNG_SEED", "7")


def run(capsys, *args):
    status = main(list(args))
    out, err = capsys.readouterr()
    return status, out.splitlines(), err.splitlines()


def records_file(tmp_path, text):
    p = tmp_path / "gfx942.HIP.udb.txt"
    p.write_text(text)
    return str(p)


def test_import_export_round_trip_and_list(capsys, tmp_path):
    db = str(tmp_path / "db.sqlite")
    text = (f"{KEY}={SOLVER_NAME}:{TUNED};ConvOclDirectFwd:16,16,8,1\n"
            f"\n"
            f"{ZKEY}={SOLVER_NAME}:64,64,32,2,2,32,32,0,0,0,1,-1,2\n")
    status, out, err = run(capsys, "perfdb", "import", records_file(tmp_path, text), "--arch", "cpu", "--perfdb", db)
    assert status == 0 and err == []
    assert out == [f"Imported 3 record(s) (2 for {SOLVER_NAME}) for cpu from {tmp_path / 'gfx942.HIP.udb.txt'} "
                   f"into {db}"]
    # export: one line per key, solvers in name order, blank line dropped -- MIOpen's form
    status, out, err = run(capsys, "perfdb", "export", "--arch", "cpu", "--perfdb", db)
    assert status == 0 and out == [f"{KEY}={SOLVER_NAME}:{TUNED};ConvOclDirectFwd:16,16,8,1",
                                   f"{ZKEY}={SOLVER_NAME}:64,64,32,2,2,32,32,0,0,0,1,-1,2"]
    # export of another arch is empty; export to a file
    assert run(capsys, "perfdb", "export", "--arch", "sm_90", "--perfdb", db)[:2] == (0, [])
    dest = tmp_path / "out.txt"
    status, out, _ = run(capsys, "perfdb", "export", "--arch", "cpu", "--perfdb", db, "-o", str(dest))
    assert status == 0 and out == [f"Exported 2 line(s) for cpu to {dest}"]
    assert dest.read_text().splitlines()[1] == f"{ZKEY}={SOLVER_NAME}:64,64,32,2,2,32,32,0,0,0,1,-1,2"
    # list, text and JSON
    status, out, _ = run(capsys, "perfdb", "list", "--perfdb", db, "--json")
    recs = json.loads(out[0])
    assert status == 0 and len(recs) == 3 and all(r["time_ms"] is None and r["arch"] == "cpu" for r in recs)
    status, out, _ = run(capsys, "perfdb", "list", "--perfdb", db, "--arch", "cpu")
    assert f"cpu {KEY} {SOLVER_NAME} {TUNED} (no time)" in out


def test_an_imported_record_is_used_by_a_run(capsys, tmp_path):
    db = str(tmp_path / "db.sqlite")
    assert DgradSolver().get_default_performance_config(parse(LINE).problem, get_target("cpu")).serialize() != TUNED
    run(capsys, "perfdb", "import", records_file(tmp_path, f"{KEY}={SOLVER_NAME}:{TUNED}\n"), "--arch", "cpu",
        "--perfdb", db)
    status, out, _ = run(capsys, *LINE.split(), "--backend", "cpu", "--perfdb", db)
    assert status == 0 and f"Using perf-db config {TUNED} (imported, no time) from {db}" in out


def test_non_config_values_of_this_solver_are_stored_with_a_warning(capsys, tmp_path):
    db = str(tmp_path / "db.sqlite")
    status, out, err = run(capsys, "perfdb", "import", records_file(tmp_path, f"{KEY}={SOLVER_NAME}:1,2\n"),
                           "--arch", "cpu", "--perfdb", db)
    assert status == 0 and len(err) == 1 and err[0].startswith("dgrad-driver: warning: 1 ")
    assert "line 1" in err[0] and "has 2 fields" in err[0]
    status, out, _ = run(capsys, *LINE.split(), "--backend", "cpu", "--perfdb", db)
    assert status == 0 and any(l.startswith("Ignoring perf-db config 1,2") for l in out)


@pytest.mark.parametrize("make_args,needle", [
    (lambda t: ["import", str(t / "missing.txt"), "--arch", "cpu"], "cannot read (No such file"),
    (lambda t: ["import", str(t), "--arch", "cpu"], "is a directory"),
    (lambda t: ["import", records_file(t, "ok-key=S:1\nno equals sign\n"), "--arch", "cpu"],
     "line 2: perf-db record 'no equals sign' is not KEY=SolverId:VALUES"),
    (lambda t: ["import", records_file(t, "k=S:1;T\n"), "--arch", "cpu"], "line 1: perf-db entry 'T' is not"),
    (lambda t: ["import", records_file(t, "k=S:1\n"), "--arch", "a=b"], "--arch 'a=b': not usable"),
    (lambda t: ["import", records_file(t, "k=S:1\n"), "--arch", " "], "--arch ' ': not usable"),
    (lambda t: ["import", records_file(t, "k=S:1\n"), "--arch", "cpu", "--perfdb", str(t)], "is a directory"),
    (lambda t: ["export", "--arch", "cpu", "-o", str(t / "no" / "x.txt")], "-o "),
    (lambda t: ["export", "--arch", "cpu", "-o", str(t)], "is a directory"),
])
def test_bad_input_is_one_line_and_writes_nothing(capsys, tmp_path, make_args, needle):
    db = tmp_path / "db.sqlite"
    args = make_args(tmp_path)
    if "--perfdb" not in args:
        args += ["--perfdb", str(db)]
    status, out, err = run(capsys, "perfdb", *args)
    assert status == 2 and out == [] and len(err) == 1 and err[0].startswith("dgrad-driver: error: ")
    assert needle in err[0], err[0]
    with PerfDb(db) as d:
        assert d.records() == []


def test_malformed_file_writes_nothing_even_after_good_lines(capsys, tmp_path):
    db = tmp_path / "db.sqlite"
    with PerfDb(db) as d:
        d.update(KEY, "cpu", SOLVER_NAME, TUNED, 1.5)
    text = f"{KEY}={SOLVER_NAME}:64,64,32,2,2,32,32,0,0,0,1,-1,2\nbroken\n"
    status, _, err = run(capsys, "perfdb", "import", records_file(tmp_path, text), "--arch", "cpu",
                         "--perfdb", str(db))
    assert status == 2 and "line 2" in err[0]
    with PerfDb(db) as d:
        rec = d.get(KEY, "cpu", SOLVER_NAME)
    assert rec.values == TUNED and rec.time_ms == 1.5


def test_bare_group_prints_its_help(capsys):
    status, out, err = run(capsys, "perfdb")
    assert status == 0 and err == [] and out[0].startswith("Usage: ") and any("import" in l for l in out)


# ------------------------------------------------------------------ third review
def test_bom_spaces_and_numeric_id_are_normalised(capsys, tmp_path):
    """A byte-order mark, spaces around '=' and ':' and this solver's numeric id (200) would
    store keys and solvers that never match a lookup: they are normalised on import; the
    last entry of a repeated (key, solver) wins and is counted once."""
    db = str(tmp_path / "db.sqlite")
    text = (f"\ufeff{KEY} = {SOLVER_NAME} : 64,64,32,2,2,32,32,0,0,0,1,-1,2 ; 200:{TUNED}\n"
            f"{ZKEY}=200:{TUNED}\n")
    status, out, err = run(capsys, "perfdb", "import", records_file(tmp_path, text), "--arch", "cpu", "--perfdb", db)
    assert status == 0 and err == [] and out[0].startswith(f"Imported 2 record(s) (2 for {SOLVER_NAME})")
    with PerfDb(db) as d:
        assert d.get(KEY, "cpu", SOLVER_NAME).values == TUNED
        assert d.get(ZKEY, "cpu", SOLVER_NAME).values == TUNED
    status, out, _ = run(capsys, *LINE.split(), "--backend", "cpu", "--perfdb", db)
    assert status == 0 and f"Using perf-db config {TUNED} (imported, no time) from {db}" in out


@pytest.mark.parametrize("arch", ["cpu ", " cpu", "cpu\nx", "c\tpu", ""])
def test_arch_with_spaces_or_control_characters_is_refused(capsys, tmp_path, arch):
    db = tmp_path / "db.sqlite"
    for args in (["import", records_file(tmp_path, f"{KEY}={SOLVER_NAME}:{TUNED}\n")], ["export"], ["list"]):
        status, out, err = run(capsys, "perfdb", *args, "--arch", arch, "--perfdb", str(db))
        assert status == 2 and out == [] and "--arch" in err[0] and "not usable as a perf-db arch" in err[0]
    assert not db.exists()


@pytest.mark.parametrize("suffix", ["", "-wal", "-shm"])
def test_export_never_overwrites_the_perfdb(capsys, tmp_path, suffix):
    db = tmp_path / "db.sqlite"
    with PerfDb(db) as d:
        d.update(KEY, "cpu", SOLVER_NAME, TUNED, 1.0)
    status, out, err = run(capsys, "perfdb", "export", "--arch", "cpu", "--perfdb", str(db), "-o", f"{db}{suffix}")
    assert status == 2 and out == [] and "is the perf-db being exported" in err[0]
    with PerfDb(db) as d:
        assert d.get(KEY, "cpu", SOLVER_NAME).values == TUNED


def test_a_failed_export_leaves_the_old_file(capsys, tmp_path, monkeypatch):
    import os
    db, dest = tmp_path / "db.sqlite", tmp_path / "out.txt"
    dest.write_text("old contents\n")
    with PerfDb(db) as d:
        d.update(KEY, "cpu", SOLVER_NAME, TUNED, 1.0)

    def full_disk(*a, **k):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "replace", full_disk)
    status, out, err = run(capsys, "perfdb", "export", "--arch", "cpu", "--perfdb", str(db), "-o", str(dest))
    assert status == 2 and "No space left on device" in err[0] and "left as it was" in err[0]
    assert dest.read_text() == "old contents\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["db.sqlite", "out.txt"]   # no temp file left


def test_missing_perfdb_is_a_warning_for_readers(capsys, tmp_path):
    db = tmp_path / "none.sqlite"
    for args in (["list"], ["export", "--arch", "cpu"]):
        status, out, err = run(capsys, "perfdb", *args, "--perfdb", str(db))
        assert status == 0 and out == [] and err == [f"dgrad-driver: warning: --perfdb {db}: no perf-db file there yet; "
                                                     f"nothing to read"]
    assert not db.exists()
    status, _, err = run(capsys, "perfdb", "list", "--perfdb", "")
    assert status == 2 and err[0].startswith("dgrad-driver: error: --perfdb '': is empty")


def test_a_perfdb_under_a_file_is_one_error_for_readers(capsys, tmp_path, monkeypatch):
    """A perf-db path under a regular file (as flag, through the environment, and deeper
    below it): one error line naming that file, no "not there yet" warning before it."""
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    for args, env in (((["--perfdb", str(plain / "db.sqlite")]), None), ((["--perfdb", str(plain / "a" / "b.udb")]), None),
                      ([], str(plain))):
        if env:                         # MIOpen's user perf-db directory, a file here
            monkeypatch.delenv(ENV_VAR)
            monkeypatch.setenv("MIOPEN_USER_DB_PATH", env)
        for cmd in (["list"], ["export", "--arch", "cpu"]):
            status, out, err = run(capsys, "perfdb", *cmd, *args)
            assert status == 2 and out == [] and len(err) == 1, (cmd, args, err)
            assert err[0].startswith("dgrad-driver: error: ") and f"is under {plain}, which is not a directory" in err[0]


def test_a_perfdb_on_read_only_storage_can_be_read(capsys, tmp_path, monkeypatch):
    """A WAL perf-db on storage that cannot be written (no -shm file possible) is read as
    immutable. (Tests run as root, where permissions do not stop writes, so the check that
    decides is made to answer 'not writable'.)"""
    import os
    db = tmp_path / "db.sqlite"
    with PerfDb(db) as d:
        d.update(KEY, "cpu", SOLVER_NAME, TUNED, 1.0)
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, *a, **k: False if mode == os.W_OK else real(p, mode, *a, **k))
    status, out, err = run(capsys, "perfdb", "list", "--perfdb", str(db))
    assert status == 0 and err == [] and out == [f"cpu {XKEY} {SOLVER_NAME} {TUNED} 1.000000 ms"]
    status, out, _ = run(capsys, *LINE.split(), "--backend", "cpu", "--perfdb", str(db))
    assert status == 0 and any(l.startswith(f"Using perf-db config {TUNED}") for l in out)


# ------------------------------------------------------------------ archs and counts nothing can use
BAD_ARCHS = ["bogus", "sm_90a", "gfx908", "GFX942", "cpu@cpu", "bogus@cpu", "gfx942@gpu"]


@pytest.mark.parametrize("arch", BAD_ARCHS)
@pytest.mark.parametrize("cmd", ["import", "export", "list"])
def test_perfdb_refuses_an_arch_no_run_reads(capsys, tmp_path, arch, cmd):
    db = tmp_path / "db.sqlite"
    good = records_file(tmp_path, f"{KEY}={SOLVER_NAME}:{TUNED}\n")
    args = {"import": ["import", good], "export": ["export"], "list": ["list"]}[cmd]
    status, out, err = run(capsys, "perfdb", *args, "--arch", arch, "--perfdb", str(db))
    assert status == 2 and out == [] and len(err) == 1, (out, err)
    assert err[0].startswith(f"dgrad-driver: error: --arch '{arch}': ") and "allowed: cpu, gfx90a" in err[0]
    assert not db.exists() or not PerfDb(str(db)).records()           # nothing filed


@pytest.mark.parametrize("arch", ["gfx942", "sm_90", "cpu", "sm_90@cpu", "gfx950@cpu"])
def test_perfdb_import_takes_every_arch_a_run_reads(capsys, tmp_path, arch):
    db = str(tmp_path / "db.sqlite")
    status, _, err = run(capsys, "perfdb", "import", records_file(tmp_path, f"{KEY}={SOLVER_NAME}:{TUNED}\n"),
                         "--arch", arch, "--perfdb", db)
    assert status == 0, err
    with PerfDb(db) as d:
        assert [r.arch for r in d.records()] == [arch]


def test_perfdb_export_and_list_still_reach_records_of_an_old_arch(capsys, tmp_path):
    """Records filed before archs were checked stay reachable by their arch."""
    db = str(tmp_path / "db.sqlite")
    with PerfDb(db) as d:
        d.update(XKEY, "gfx908", SOLVER_NAME, TUNED, 1.0)
    status, out, _ = run(capsys, "perfdb", "export", "--arch", "gfx908", "--perfdb", db)
    assert status == 0 and out == [f"{XKEY}={SOLVER_NAME}:{TUNED}"]
    status, out, _ = run(capsys, "perfdb", "list", "--arch", "gfx908", "--perfdb", db)
    assert status == 0 and len(out) == 1


@pytest.mark.parametrize("arch", [a for a in BAD_ARCHS[:4] if a != "gfx908"] + ["sm_90", "cpu", "", "gfx942 ", "gfx1030"])
def test_perfdb_name_refuses_what_is_not_an_amd_arch(capsys, arch):
    status, out, err = run(capsys, "perfdb", "name", "--arch", arch, "--cus", "304")
    assert status == 2 and out == [] and len(err) == 1
    assert err[0].startswith("dgrad-driver: error: --arch ") and "allowed: gfx906, gfx908, gfx90a, gfx942, gfx950" in err[0]


@pytest.mark.parametrize("cus", ["0", "-1", "2147483648", "99999999999"])
def test_perfdb_name_refuses_a_cu_count_out_of_range(capsys, cus):
    status, out, err = run(capsys, "perfdb", "name", "--arch", "gfx942", "--cus", cus)
    assert status == 2 and out == [] and err == [f"dgrad-driver: error: --cus {cus}: allowed: an integer from 1 "
                                                 f"to 2147483647"]


@pytest.mark.parametrize("suffix", ["HIP.3_5_1_dabb6df2b9", "HIP.3_5_1", "x"])
def test_perfdb_name_refuses_a_suffix_without_text(capsys, suffix):
    """--suffix names MIOpen's text user db only; without --text it was dropped silently
    and the sqlite name printed as if the suffix had been taken."""
    status, out, err = run(capsys, "perfdb", "name", "--arch", "gfx942", "--cus", "304", "--suffix", suffix)
    assert status == 2 and out == [] and len(err) == 1
    assert err[0].startswith(f"dgrad-driver: error: --suffix '{suffix}': needs --text")
    status, out, _ = run(capsys, "perfdb", "name", "--arch", "gfx942", "--cus", "304", "--suffix", suffix, "--text")
    assert status == 0 and out[0].endswith(f"gfx942130.{suffix}.udb.txt")


@pytest.mark.parametrize("arch", ["gfx942", "gfx90a:sramecc+:xnack-", "gfx950", "gfx906", "gfx908:sramecc-"])
def test_perfdb_name_takes_amd_archs_with_features(capsys, arch):
    status, out, _ = run(capsys, "perfdb", "name", "--arch", arch, "--cus", "2147483647")
    assert status == 0 and out[0].endswith(".udb")


@pytest.mark.parametrize("arch,cus,name", [("gfx908:sramecc-", 120, "gfx908_nosramecc78_1.1.0.udb"),
                                           ("gfx908:sramecc+", 120, "gfx90878_1.1.0.udb"),
                                           ("gfx906:sramecc-:xnack+", 60, "gfx906_nosramecc_xnack_60_1.1.0.udb")])
def test_perfdb_name_of_the_archs_miopen_names_nosramecc(capsys, arch, cus, name):
    """The README's `_nosramecc` rule (``Handle::GetDbBasename``) for gfx906/gfx908, which
    ``perfdb name`` refused although it names a device MIOpen keeps a perf-db for."""
    status, out, _ = run(capsys, "perfdb", "name", "--arch", arch, "--cus", str(cus))
    assert status == 0 and out[0].endswith("/" + name)


def test_importing_a_perf_db_of_ours_for_an_arch_it_has_no_records_of_is_an_error(capsys, tmp_path):
    """A perf-db this tool wrote says which arch each record is for: importing it under an
    --arch it holds nothing for is one error line naming the archs it holds (was: "Imported 0
    record(s)", exit 0), writing nothing; under an arch it holds, the others' records are
    named in a warning."""
    src, dest = str(tmp_path / "src.sqlite"), str(tmp_path / "dest.sqlite")
    text = f"{KEY}={SOLVER_NAME}:{TUNED}\n"
    assert run(capsys, "perfdb", "import", records_file(tmp_path, text), "--arch", "cpu", "--perfdb", src)[0] == 0
    status, out, err = run(capsys, "perfdb", "import", src, "--arch", "gfx942", "--perfdb", dest)
    assert (status, out) == (2, []) and err == [
        f"dgrad-driver: error: FILE {src}: holds records for cpu, none for --arch gfx942; allowed: --arch cpu, "
        f"or a perf-db with gfx942's records"]
    assert PerfDb(dest).records() == []
    assert run(capsys, "perfdb", "import", records_file(tmp_path, text), "--arch", "sm_90", "--perfdb", src)[0] == 0
    status, out, err = run(capsys, "perfdb", "import", src, "--arch", "sm_90", "--perfdb", dest)
    assert status == 0 and out[0].startswith(f"Imported 1 record(s) (1 for {SOLVER_NAME}) for sm_90")
    assert err == [f"dgrad-driver: warning: 1 record(s) of {src} for cpu not imported (--arch sm_90)"]
    assert [(r.arch, r.values) for r in PerfDb(dest).records()] == [("sm_90", TUNED)]


def test_export_of_an_arch_without_records_names_the_archs_the_db_holds(capsys, tmp_path):
    """``tune --backend cpu --arch gfx942`` files records under ``gfx942@cpu``; ``perfdb export
    --arch gfx942`` then printed nothing and exited 0 without saying why."""
    db = tmp_path / "p.udb"
    with PerfDb(db) as d:
        d.update(XKEY, "gfx942@cpu", SOLVER_NAME, TUNED, 1.0)
    status, out, err = run(capsys, "perfdb", "export", "--arch", "gfx942", "--perfdb", str(db))
    assert status == 0 and out == [] and len(err) == 1
    assert "holds no records for gfx942; it holds records for gfx942@cpu" in err[0]


def test_export_of_nothing_never_empties_an_existing_file(capsys, tmp_path):
    """An --arch without records (a typo) emptied the -o file it was to replace: refused in one
    line, exit 2, the file unchanged; an empty or new file is still written (empty)."""
    db = tmp_path / "p.udb"
    with PerfDb(db) as d:
        d.update(XKEY, "gfx942", SOLVER_NAME, TUNED, 1.0)
    old = tmp_path / "old.txt"
    old.write_text("kept\n")
    status, out, err = run(capsys, "perfdb", "export", "--arch", "sm_90", "--perfdb", str(db), "-o", str(old))
    assert status == 2 and out == [] and old.read_text() == "kept\n"
    assert err[-1] == (f"dgrad-driver: error: -o {old}: no sm_90 records to export, and the file holds 5 bytes; "
                       "allowed: an --arch the perf-db holds records for, or another file (the file is unchanged)")
    for fresh in (tmp_path / "new.txt", tmp_path / "empty.txt"):
        if fresh.name == "empty.txt":
            fresh.write_text("")
        status, _, _ = run(capsys, "perfdb", "export", "--arch", "sm_90", "--perfdb", str(db), "-o", str(fresh))
        assert status == 0 and fresh.read_text() == ""
    status, _, _ = run(capsys, "perfdb", "export", "--arch", "gfx942", "--perfdb", str(db), "-o", str(old))
    assert status == 0 and old.read_text().startswith(XKEY)


@pytest.mark.parametrize("arch", ["gfx908:sramecc", "gfx908:foo", "gfx908:", "gfx908:::", "gfx908:sramecc-:sramecc+",
                                  "gfx90a:xnack+:xnack+", "gfx942:SRAMECC+"])
def test_perfdb_name_refuses_malformed_target_features(capsys, arch):
    """A feature without + or -, an unknown one, an empty one or one given twice was read as a
    guess (gfx908:sramecc as ECC off) and named a file."""
    status, out, err = run(capsys, "perfdb", "name", "--arch", arch, "--cus", "120")
    assert status == 2 and out == [] and len(err) == 1
    assert "target features are sramecc+ or sramecc-, xnack+ or xnack-, each at most once" in err[0]


def test_import_warns_of_records_no_run_can_use(capsys, tmp_path):
    """Keys that are no MIOpen problem key (never looked up) and this solver's values that are
    no perf config (ignored by runs) are imported as given, each kind named in one warning,
    from a text file and from a sqlite perf-db alike."""
    text = (f"hello world={SOLVER_NAME}:{TUNED}\nnotakey=Foo:1\n{KEY}={SOLVER_NAME}:12345\n"
            f"{ZKEY}={SOLVER_NAME}:{TUNED}\n")
    db = tmp_path / "a.udb"
    status, out, err = run(capsys, "perfdb", "import", records_file(tmp_path, text), "--arch", "gfx942",
                           "--perfdb", str(db))
    assert status == 0 and out[0].startswith("Imported 4 record(s)")
    assert err == ["dgrad-driver: warning: 2 record(s) have keys that are not MIOpen problem keys and no problem "
                   "will look them up: line 1 'hello world'; line 2 'notakey'",
                   f"dgrad-driver: warning: 1 {SOLVER_NAME} record(s) are not perf configs and will be ignored by "
                   f"runs: line 3 {KEY}: " + err[1].split(f"line 3 {KEY}: ", 1)[1]]
    status, out, err = run(capsys, "perfdb", "import", str(db), "--arch", "gfx942", "--perfdb", str(tmp_path / "b.udb"))
    assert status == 0 and len(err) == 2 and "row 'hello world'; row 'notakey'" in err[0]
    assert f"are not perf configs and will be ignored by runs: row {KEY}: " in err[1]
