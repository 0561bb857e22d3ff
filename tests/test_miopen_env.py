"""MIOpenDriver's ``-s 1`` and MIOpen's environment variables (issue 17, items B and C).

Every bad value is one error line naming the variable, the value and what is allowed,
exit 2, nothing run.
"""

from __future__ import annotations

import json

import pytest

from conftest import run_cli
from miopen_solver import SOLVER_NAME
from miopen_solver.perfdb import ENV_VAR, PerfDb
from miopen_solver.runtime.cache import BinaryCache
from miopen_solver.target import get_target

NHWC = "--in_layout NHWC --out_layout NHWC --fil_layout NHWC"
LINE = f"convfp16 -n 1 -c 8 -H 5 -W 5 -k 8 -y 3 -x 3 -p 1 -q 1 -F 2 -t 1 -i 1 -V 0 {NHWC}"
XKEY = "2x8x5x5x1x3x3x1x8x1x1x1x0x1x1x0x1x1x0x0x1xNHWCxFP16xB"     # LINE's MIOpen key, by hand
OTHER = "32,16,16,2,1,16,16,0,0,0,1,-1,2"


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "perfdb.udb"))
    monkeypatch.setenv("MIOPEN_DGRAD_CACHE_DIR", str(tmp_path / "kernels"))
    monkeypatch.setenv("MIOPEN_DEBUG_DRIVER_PRNG_SEED", "7")
    for var in ("MIOPEN_LOG_LEVEL", "MIOPEN_ENABLE_LOGGING_CMD", "MIOPEN_FIND_ENFORCE", "MIOPEN_FIND_MODE",
                "MIOPEN_DEBUG_FIND_ONLY_SOLVER", "MIOPEN_CUSTOM_CACHE_DIR", "MIOPEN_DISABLE_CACHE",
                "MIOPEN_DGRAD_PDL"):
        monkeypatch.delenv(var, raising=False)


def run_json(capsys, *extra):
    status, out, err = run_cli(capsys, *LINE.split(), *extra, "--backend", "cpu", "--json")
    return status, (json.loads(out[0]) if out else None), err


def stored(tmp_path):
    with PerfDb(tmp_path / "perfdb.udb") as db:
        return db.get(XKEY, "cpu", SOLVER_NAME)


# ------------------------------------------------------------------ -s 1
def test_search_writes_the_perfdb_then_runs_the_winner(capsys, tmp_path):
    status, rec, err = run_json(capsys, "-s", "1")
    assert status == 0, err
    winner = rec["search"]["winner"]
    assert rec["search"]["reason"] == "-s 1" and rec["search"]["timed"] >= 1
    assert stored(tmp_path).values == winner and stored(tmp_path).time_ms == rec["search"]["winner_ms"]
    assert rec["config_source"] == "perfdb" and rec["perf_config"] == winner
    # MIOpen's default enforce: a problem with a record is not searched again
    status, out, _ = run_cli(capsys, *LINE.split(), "-s", "1", "--backend", "cpu")
    assert status == 0 and any(line.startswith("Info: '-s 1': the perf-db already has") for line in out)
    assert not any(line.startswith("Search") for line in out)


@pytest.mark.parametrize("value", ["2", "-1", "5", "2147483647"])
@pytest.mark.parametrize("mode", ["run", "config", "applicable", "tune"])
def test_search_flag_takes_0_or_1(capsys, tmp_path, mode, value):
    # MIOpenDriver searches only for exactly -s 1 (`GetValueInt("search") == 1`); any other
    # value must not start a search (which would time every config and write the perf-db)
    args = [*LINE.split(), "-s", value, "--backend", "cpu"]
    status, out, err = run_cli(capsys, *([mode] if mode != "run" else []), *args)
    assert status == 2 and out == [] and len(err) == 1, (out, err)
    assert err[0].startswith(f"dgrad-driver: error: -s '{value}'") and "0 or 1" in err[0]
    assert not (tmp_path / "perfdb.udb").exists()


def test_search_without_a_perfdb_runs_the_winner(capsys, tmp_path):
    status, rec, err = run_json(capsys, "-s", "1", "--no-perfdb")
    assert status == 0 and rec["config_source"] == "perf-config" and rec["perf_config"] == rec["search"]["winner"]
    assert not (tmp_path / "perfdb.udb").exists()


@pytest.mark.parametrize("asked,enforce,why", [(["-s", "1"], None, "-s 1"),
                                              ([], "SEARCH", "MIOPEN_FIND_ENFORCE=SEARCH"),
                                              ([], "4", "MIOPEN_FIND_ENFORCE=SEARCH_DB_UPDATE")])
def test_a_searchs_winner_run_without_a_perfdb_is_named_as_such(capsys, tmp_path, monkeypatch, asked, enforce, why):
    """The trial's ``-s 1 --no-perfdb`` printed ``Using --perf-config ...`` though no
    --perf-config was given: whatever asked for the search, the note names the search."""
    if enforce:
        monkeypatch.setenv("MIOPEN_FIND_ENFORCE", enforce)
    status, out, _ = run_cli(capsys, *LINE.split(), *asked, "--no-perfdb", "--backend", "cpu")
    search = next(line for line in out if line.startswith(f"Search ({why}): "))
    winner = search.split("; winner ")[1].split()[0]        # whichever config timed fastest this time
    assert status == 0 and f"Using the {why} search's winner {winner}" in out
    assert not any("--perf-config" in line for line in out), out
    assert not (tmp_path / "perfdb.udb").exists()


def test_find_enforce_db_update_searches_again_and_replaces(capsys, tmp_path, monkeypatch):
    with PerfDb(tmp_path / "perfdb.udb") as db:
        db.update(XKEY, "cpu", SOLVER_NAME, OTHER, 0.0)          # faster than anything timed
    monkeypatch.setenv("MIOPEN_FIND_ENFORCE", "db_update")       # any case
    status, rec, _ = run_json(capsys, "-s", "1")
    assert status == 0 and rec["search"] is not None and stored(tmp_path).values == rec["search"]["winner"]
    monkeypatch.setenv("MIOPEN_FIND_ENFORCE", "2")               # numeric form, no -s 1: no search
    status, rec, _ = run_json(capsys)
    assert status == 0 and "search" not in rec


@pytest.mark.parametrize("value", ["SEARCH", "3", "SEARCH_DB_UPDATE", "4"])
def test_find_enforce_search_searches_without_s(capsys, tmp_path, monkeypatch, value):
    monkeypatch.setenv("MIOPEN_FIND_ENFORCE", value)
    status, rec, _ = run_json(capsys)
    assert status == 0 and rec["search"]["reason"] == f"MIOPEN_FIND_ENFORCE={value if not value.isdigit() else {'3': 'SEARCH', '4': 'SEARCH_DB_UPDATE'}[value]}"
    assert stored(tmp_path).values == rec["search"]["winner"]


LEGACY_KEY = "8-5-5-3x3-8-5-5-1-1x1-1x1-1x1-0-NHWC-NHWC-NHWC-FP16-B"     # LINE's key in MIOpen's old - spelling


def _import_legacy(capsys, tmp_path) -> None:
    """LINE's record under the legacy key, as `perfdb import` of a MIOpen text db files it."""
    text = tmp_path / "legacy.txt"
    text.write_text(f"{LEGACY_KEY}={SOLVER_NAME}:{OTHER}\n")
    status, _, err = run_cli(capsys, "perfdb", "import", str(text), "--arch", "cpu")
    assert status == 0, err
    with PerfDb(tmp_path / "perfdb.udb") as db:
        assert [r.problem_key for r in db.records("cpu")] == [LEGACY_KEY]


def test_a_legacy_key_record_counts_for_search_and_db_clean_as_it_does_for_the_run(capsys, tmp_path, monkeypatch):
    """A record under the legacy ``-`` key was used by runs but not seen by ``-s 1`` (it
    searched) nor by DB_CLEAN (which said "no record" while the same run used it)."""
    _import_legacy(capsys, tmp_path)
    status, out, _ = run_cli(capsys, *LINE.split(), "-s", "1", "--backend", "cpu")
    assert status == 0 and any(line.startswith("Info: '-s 1': the perf-db already has") for line in out)
    assert any(line.startswith(f"Using perf-db config {OTHER}") for line in out)
    monkeypatch.setenv("MIOPEN_FIND_ENFORCE", "DB_CLEAN")
    status, out, _ = run_cli(capsys, *LINE.split(), "--backend", "cpu")
    assert status == 0 and "Info: MIOPEN_FIND_ENFORCE=DB_CLEAN: removed the perf-db record of this problem for cpu" in out
    assert not any(line.startswith("Using perf-db") for line in out)
    with PerfDb(tmp_path / "perfdb.udb") as db:
        assert db.get(LEGACY_KEY, "cpu", SOLVER_NAME) is None


@pytest.mark.parametrize("values", ["64,16", "128,128,64,2,1,64,128,0,0,0,1,-1,4,3"])
def test_search_runs_where_the_record_is_one_the_run_would_ignore(capsys, tmp_path, values):
    """A malformed record, or one the target cannot run (a TMA config on the CPU engine),
    is ignored by the run; -s 1 said "already has this problem's config" and never searched."""
    with PerfDb(tmp_path / "perfdb.udb") as db:
        db.update(XKEY, "cpu", SOLVER_NAME, values, 1e-9)          # "faster" than anything timed
    status, rec, err = run_json(capsys, "-s", "1")
    assert status == 0 and rec["search"] is not None, err
    assert stored(tmp_path).values == rec["search"]["winner"]


@pytest.mark.parametrize("value", ["DB_CLEAN", "5"])
def test_find_enforce_db_clean_removes_the_record_and_blocks_search(capsys, tmp_path, monkeypatch, value):
    with PerfDb(tmp_path / "perfdb.udb") as db:
        db.update(XKEY, "cpu", SOLVER_NAME, OTHER, 1.0)
        db.update(XKEY, "cpu", "OtherSolver", "1", 1.0)
    monkeypatch.setenv("MIOPEN_FIND_ENFORCE", value)
    status, out, _ = run_cli(capsys, *LINE.split(), "-s", "1", "--backend", "cpu")
    assert status == 0 and "Info: MIOPEN_FIND_ENFORCE=DB_CLEAN: removed the perf-db record of this problem for " \
        "cpu; '-s 1' is not honoured (DB_CLEAN blocks searching)" in out
    assert stored(tmp_path) is None and not any(line.startswith(("Search", "Using perf-db")) for line in out)
    with PerfDb(tmp_path / "perfdb.udb") as db:
        assert db.get(XKEY, "cpu", "OtherSolver").values == "1"     # other solvers' records stay


@pytest.mark.parametrize("asked,env", [(["-s", "1"], None), ([], "SEARCH"), ([], "SEARCH_DB_UPDATE")])
def test_a_search_on_a_compile_only_run_says_it_did_not_run(capsys, tmp_path, monkeypatch, asked, env):
    """'-s 1 --arch sm_90' without an sm_90 device printed the compile-only result and not a
    word about the search: an Info line says why none ran (--json: "search" with "ran":
    false and the line); no config is timed, the perf-db is not written."""
    from driver import run_cmd, tune_cmd, workers
    monkeypatch.setattr(workers, "gpu_device_nodes", lambda: [])                # no GPU: compile-only
    monkeypatch.setattr(run_cmd, "compile_only", lambda solution: (0, ["Compile-only run (stub)"], {}))

    def no_search(*a, **k):
        raise AssertionError("a search ran")
    monkeypatch.setattr(tune_cmd, "tune_line", no_search)
    if env:
        monkeypatch.setenv("MIOPEN_FIND_ENFORCE", env)
    why = "-s 1" if asked else f"MIOPEN_FIND_ENFORCE={env}"
    want = (f"Info: '{why}' is not honoured: the search times the candidate configs on a sm_90 device and there is "
            f"no sm_90 device here (compile-only run: the perf-db or default config is compiled); search where "
            f"that device is, or with --backend cpu on the CPU engine (a simulation)")
    status, out, err = run_cli(capsys, *LINE.split(), *asked, "--arch", "sm_90")
    assert status == 0 and want in out and out[-1] == "Compile-only run (stub)" and err == []
    status, out, err = run_cli(capsys, *LINE.split(), *asked, "--arch", "sm_90", "--json")
    assert status == 0 and json.loads(out[0])["search"] == {"ran": False, "notes": [want]}
    assert not (tmp_path / "perfdb.udb").exists()
    # nothing asked: no line, no "search" record
    monkeypatch.delenv("MIOPEN_FIND_ENFORCE", raising=False)
    status, out, err = run_cli(capsys, *LINE.split(), "--arch", "sm_90", "--json")
    assert status == 0 and "search" not in json.loads(out[0])


def test_find_mode_fast_does_not_search_unless_enforced(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("MIOPEN_FIND_MODE", "FAST")
    status, out, _ = run_cli(capsys, *LINE.split(), "-s", "1", "--backend", "cpu")
    assert status == 0 and "Info: '-s 1' is not honoured with MIOPEN_FIND_MODE=FAST (no search; the perf-db or " \
        "default config runs)" in out and stored(tmp_path) is None
    monkeypatch.setenv("MIOPEN_FIND_ENFORCE", "SEARCH")           # MIOpen falls back to NORMAL
    status, rec, _ = run_json(capsys)
    assert status == 0 and rec["search"]["winner"] == stored(tmp_path).values


# ------------------------------------------------------------------ logging
def test_log_level_info_shows_perfdb_key_matches(capsys, tmp_path, monkeypatch):
    with PerfDb(tmp_path / "perfdb.udb") as db:
        db.update(XKEY, "cpu", SOLVER_NAME, OTHER, 1.0)
    monkeypatch.setenv("MIOPEN_LOG_LEVEL", "5")
    status, out, err = run_cli(capsys, *LINE.split(), "--backend", "cpu")
    assert status == 0
    assert f"MIOpen(HIP): Info [FindRecordUnsafe] Key match: {XKEY}" in err
    assert f"MIOpen(HIP): Info [FindRecordUnsafe] Contents found: {SOLVER_NAME}:{OTHER}" in err
    assert not any(line.startswith("MIOpen(HIP)") for line in out)    # logs go to stderr only
    for quiet in ("4", "1", "0"):
        monkeypatch.setenv("MIOPEN_LOG_LEVEL", quiet)
        status, out, err = run_cli(capsys, *LINE.split(), "--backend", "cpu")
        assert status == 0 and not any("Key match" in line for line in err)


def test_logging_cmd_prints_the_driver_line_as_miopen_logs_it(capsys, monkeypatch):
    monkeypatch.setenv("MIOPEN_ENABLE_LOGGING_CMD", "1")
    line = "conv -n 2 -c 6 -H 9 -W 7 -k 4 -y 3 -x 1 -p 1 -q 0 -u 2 -v 1 -l 1 -j 2 -g 2 -F 2 -V 0"
    status, out, err = run_cli(capsys, *line.split(), "--backend", "cpu")
    assert status == 0
    # ConvArgsForMIOpenDriver: dX's n c H W, then k y x p q u v l j, non-NCHW layouts (in, fil,
    # out), -m conv -g G -F 2 -t 1; Find mode: the Find call's line, then the call's
    args = ("./bin/MIOpenDriver conv -n 2 -c 6 -H 9 -W 7 -k 4 -y 3 -x 1 -p 1 -q 0 -u 2 -v 1 -l 1 -j 2 "
            "-m conv -g 2 -F 2 -t 1")
    assert err[:2] == [f"MIOpen(HIP): Command [LogCmdFindConvolution] {args}",
                       f"MIOpen(HIP): Command [LogCmdConvolution] {args}"]
    # immediate mode: one line, -S 0 whatever solution is asked (convolution_api.cpp)
    for sol in ("1000", "0", "ConvDgradImplicitGemmTilde"):
        status, out, err = run_cli(capsys, *LINE.split(), "-S", sol, "--backend", "cpu")
        assert status == 0 and err[0].endswith("--fil_layout NHWC --out_layout NHWC -m conv -g 1 -F 2 -t 1 -S 0")
        assert err[0].startswith("MIOpen(HIP): Command [LogCmdConvolution] ./bin/MIOpenDriver convfp16 -n 1 -c 8 ")
        assert not any("LogCmdFindConvolution" in e for e in err)
    monkeypatch.setenv("MIOPEN_ENABLE_LOGGING_CMD", "0")
    status, out, err = run_cli(capsys, *LINE.split(), "--backend", "cpu")
    assert status == 0 and not any("Command" in line for line in err)


# ------------------------------------------------------------------ solver restriction, cache
@pytest.mark.parametrize("value", ["1000", "ConvDgradImplicitGemmTilde", "86;1000"])
def test_find_only_solver_ours_runs(capsys, monkeypatch, value):
    monkeypatch.setenv("MIOPEN_DEBUG_FIND_ONLY_SOLVER", value)
    status, out, err = run_cli(capsys, *LINE.split(), "--backend", "cpu")
    assert status == 0 and err == []


def test_kernel_cache_variables(monkeypatch, tmp_path):
    monkeypatch.delenv("MIOPEN_DGRAD_CACHE_DIR")
    monkeypatch.setenv("MIOPEN_CUSTOM_CACHE_DIR", str(tmp_path / "mc"))
    cache = BinaryCache()
    assert cache.dir == tmp_path / "mc" / "miopen-dgrad" and cache.enabled
    assert cache.put("k" * 64, b"code") is not None and cache.get("k" * 64) == b"code"
    monkeypatch.setenv("MIOPEN_DISABLE_CACHE", "1")
    off = BinaryCache()
    assert not off.enabled and off.get("k" * 64) is None and off.put("j" * 64, b"x") is None
    assert off.warnings == []
    monkeypatch.setenv("MIOPEN_DGRAD_CACHE_DIR", str(tmp_path / "own"))   # ours still overrides
    monkeypatch.delenv("MIOPEN_DISABLE_CACHE")
    assert BinaryCache().dir == tmp_path / "own"


# ------------------------------------------------------------------ bad values
@pytest.mark.parametrize("var,value,allowed", [
    ("MIOPEN_LOG_LEVEL", "9", "allowed: an integer 0-7"),
    ("MIOPEN_LOG_LEVEL", "info", "allowed: an integer 0-7"),
    ("MIOPEN_ENABLE_LOGGING_CMD", "maybe", "allowed: 1, yes, true"),
    ("MIOPEN_FIND_ENFORCE", "6", "allowed: NONE (1), DB_UPDATE (2), SEARCH (3), SEARCH_DB_UPDATE (4), DB_CLEAN (5)"),
    ("MIOPEN_FIND_ENFORCE", "CLEAN", "allowed: NONE (1)"),
    ("MIOPEN_FIND_MODE", "0", "allowed: NORMAL (1), FAST (2), HYBRID (3), 4 (deprecated FAST_HYBRID, by number only), "
                               "DYNAMIC_HYBRID (5), TRUST_VERIFY (6), TRUST_VERIFY_FULL (7)"),
    ("MIOPEN_FIND_MODE", "QUICK", "allowed: NORMAL (1)"),
    ("MIOPEN_DEBUG_FIND_ONLY_SOLVER", "86", "allowed: 1000 or ConvDgradImplicitGemmTilde"),
    ("MIOPEN_DEBUG_FIND_ONLY_SOLVER", "ConvDirectNaiveConvBwd", "allowed: 1000 or ConvDgradImplicitGemmTilde"),
    ("MIOPEN_DISABLE_CACHE", "2", "allowed: 1, yes, true"),
    ("MIOPEN_DGRAD_PDL", "maybe", "allowed: 1, yes, true"),
])
def test_bad_values_are_one_error_line(capsys, tmp_path, monkeypatch, var, value, allowed):
    monkeypatch.setenv(var, value)
    status, out, err = run_cli(capsys, *LINE.split(), "-s", "1", "--backend", "cpu")
    assert status == 2 and out == [] and len(err) == 1
    assert err[0].startswith(f"dgrad-driver: error: {var} '{value}': ") and allowed in err[0]
    assert not (tmp_path / "perfdb.udb").exists()


HUGE = "1" * 5000        # past Python's 4300-digit int conversion limit
ENV_VARS = ("MIOPEN_LOG_LEVEL", "MIOPEN_ENABLE_LOGGING_CMD", "MIOPEN_FIND_ENFORCE", "MIOPEN_FIND_MODE",
            "MIOPEN_DEBUG_FIND_ONLY_SOLVER", "MIOPEN_DISABLE_CACHE", "MIOPEN_DGRAD_PDL",
            "MIOPEN_DRIVER_USE_GPU_REFERENCE")


@pytest.mark.parametrize("value", [HUGE, "0" * 5000 + "2", "１"])
@pytest.mark.parametrize("var", ENV_VARS)
def test_any_number_is_read_without_python_conversion_messages(capsys, monkeypatch, var, value):
    """Every variable given a 5000-digit number (no variable takes one), a number with 5000
    leading zeros or a non-ASCII digit: either its value, or one error line naming the variable
    and what is allowed; never Python's own conversion message."""
    monkeypatch.setenv(var, value)
    status, out, err = run_cli(capsys, *LINE.split(), "-V", "0", "-i", "1", "--backend", "cpu")
    assert all("set_int_max_str_digits" not in e and "invalid literal" not in e for e in err), err
    if status:
        assert status == 2 and len(err) == 1 and err[0].startswith(f"dgrad-driver: error: {var} ") and "allowed" in err[0]


def test_find_mode_takes_every_value_miopen_takes_and_says_so(monkeypatch):
    """MIOpen's FindMode::Values run from Begin_ = 1 to TrustVerifyFull = 7, 4 being
    DeprecatedFastHybrid (no name; its GetFindModeValueImpl2 takes any number in
    [Begin_, End_)). Exactly those numbers are taken, and the error's allowed list and the
    README's table list exactly those."""
    import re
    from pathlib import Path
    from driver import miopen_env
    from driver.options import UserError
    miopen_numbers = set(range(1, 8))
    for n in range(0, 10):
        if n in miopen_numbers:
            assert miopen_env.read({"MIOPEN_FIND_MODE": str(n)}).find_mode == n
        else:
            with pytest.raises(UserError) as info:
                miopen_env.read({"MIOPEN_FIND_MODE": str(n)})
            allowed = str(info.value).split("allowed: ")[1]
            assert {int(x) for x in re.findall(r"\b(\d)\b", allowed)} == miopen_numbers
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    row = next(line for line in readme.splitlines() if line.startswith("| `MIOPEN_FIND_MODE` |"))
    values = row.split("|")[2]
    assert {int(x) for x in re.findall(r"\b(\d)\b", values)} == miopen_numbers


def test_custom_cache_dir_that_is_a_file_is_refused(capsys, tmp_path, monkeypatch):
    (tmp_path / "f").write_text("x")
    monkeypatch.setenv("MIOPEN_CUSTOM_CACHE_DIR", str(tmp_path / "f"))
    status, out, err = run_cli(capsys, *LINE.split(), "--backend", "cpu")
    assert status == 2 and len(err) == 1 and err[0].startswith("dgrad-driver: error: MIOPEN_CUSTOM_CACHE_DIR '/")
    assert err[0].endswith("': is not a directory; allowed: a directory (created when missing)")   # value cut to 60


@pytest.mark.parametrize("value,want", [(None, "gpu"), ("", "gpu"), ("1", "gpu"), ("on", "gpu"), ("0", "cpu"),
                                        ("false", "cpu"), ("OFF", "cpu")])
def test_use_gpu_reference_variable_picks_the_auto_reference(value, want):
    """MIOpenDriver verifies on the GPU reference unless MIOPEN_DRIVER_USE_GPU_REFERENCE is set
    off (conv_driver.hpp UseGPUReference); --ref gpu/cpu still decide alone, and the CPU
    engine has only the CPU reference."""
    from driver.run_cmd import Device, resolve_reference
    env = {} if value is None else {"MIOPEN_DRIVER_USE_GPU_REFERENCE": value}
    gpu = Device("cuda", get_target("sm_90"), "H200")
    assert resolve_reference("auto", gpu, env) == want
    assert resolve_reference("gpu", gpu, env) == "gpu" and resolve_reference("cpu", gpu, env) == "cpu"
    assert resolve_reference("auto", Device("cpu", get_target("cpu"), "cpu"), env) == "cpu"


def test_use_gpu_reference_variable_bad_value_is_one_error_line(capsys, monkeypatch):
    monkeypatch.setenv("MIOPEN_DRIVER_USE_GPU_REFERENCE", "maybe")
    status, out, err = run_cli(capsys, *LINE.split(), "--backend", "cpu")
    assert status == 2 and out == [] and len(err) == 1
    assert err[0].startswith("dgrad-driver: error: MIOPEN_DRIVER_USE_GPU_REFERENCE 'maybe': allowed: ")


@pytest.mark.parametrize("extra", [["--print-name-only"], ["--arch", "sm_90"], ["--perf-config", "1,2,3"]])
def test_logging_cmd_logs_no_call_that_is_not_made(capsys, monkeypatch, extra):
    """A name-only or compile-only run launches nothing, and a refused config never gets to
    the call: no [LogCmd...] line (with the refusal, stderr stays one error line)."""
    monkeypatch.setenv("MIOPEN_ENABLE_LOGGING_CMD", "1")
    status, out, err = run_cli(capsys, *LINE.split(), *extra, *([] if "--arch" in extra else ["--backend", "cpu"]))
    assert not any("Command [LogCmd" in line for line in err)
    if "--perf-config" in extra:
        assert status == 2 and len(err) == 1 and err[0].startswith("dgrad-driver: error: --perf-config")
    else:
        assert status == 0


def test_db_update_search_replaces_a_legacy_key_record_instead_of_adding_one(capsys, tmp_path, monkeypatch):
    """DB_UPDATE's search stored the winner under the x key beside the legacy ``-`` record, so
    the problem held two records (``perfdb list`` showed both)."""
    _import_legacy(capsys, tmp_path)
    monkeypatch.setenv("MIOPEN_FIND_ENFORCE", "DB_UPDATE")
    status, rec, err = run_json(capsys, "-s", "1")
    assert status == 0 and rec["search"] is not None, err
    with PerfDb(tmp_path / "perfdb.udb") as db:
        mine = [r for r in db.records("cpu") if r.solver == SOLVER_NAME]
    assert [(r.problem_key, r.values) for r in mine] == [(XKEY, rec["search"]["winner"])]
