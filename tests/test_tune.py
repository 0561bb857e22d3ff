"""``dgrad-driver tune`` on the CPU engine: sweep, failed rows, ranking, verification,
CSV, perf-db, and a later plain run that picks the winner."""

from __future__ import annotations

import csv
import io
import json
import os
import re

import pytest

from conftest import ROOT
from driver import workers
from driver.cli import main
from miopen_solver.config import KernelSchedule
from driver.tune_cmd import CSV_FIELDS, Progress, TuneOptions, select_configs, tune_line
from miopen_solver import SOLVER_NAME, prng
from miopen_solver.command import parse
from miopen_solver.perfdb import ENV_VAR as PERFDB_ENV, PerfDb
from miopen_solver.solver import DgradSolver
from miopen_solver.target import get_target

FAULTS = os.path.join(ROOT, "tests", "worker_faults.py")
LINE = ("convfp16 -n 2 -c 8 -H 9 -W 7 -k 12 -y 3 -x 3 -p 1 -q 1 -u 2 -v 1 -F 2 -i 3 "
        "--in_layout NHWC --out_layout NHWC --fil_layout NHWC")
PROBLEM = parse(LINE).problem
CPU = get_target("cpu")
CANDIDATES = list(DgradSolver().search(PROBLEM, CPU))


def picked(n):
    return select_configs(CANDIDATES, n)


@pytest.fixture(autouse=True)
def env(monkeypatch, tmp_path):
    for name in (prng.SEED_ENV, workers.CRASH_ENV, workers.PRELOAD_ENV, workers.TIMEOUT_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(PERFDB_ENV, str(tmp_path / "default-perfdb.sqlite"))


def run(capsys, *args):
    status = main(list(args))
    out, err = capsys.readouterr()
    return status, out.splitlines(), err.splitlines()


def read_csv(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


# ------------------------------------------------------------------ selection
def test_select_configs_keeps_the_default_and_samples_every_schedule():
    assert select_configs(CANDIDATES, None) == CANDIDATES
    assert select_configs(CANDIDATES, len(CANDIDATES)) == CANDIDATES
    assert select_configs(CANDIDATES, 1) == CANDIDATES[:1]
    # sm_90: the search holds several schedules; a sample of as many configs as there are
    # schedules reaches each of them (the campaign's stratified sample), in search order
    p = parse("convfp16 -n 2 -c 128 -H 14 -W 14 -k 128 -y 3 -x 3 -p 1 -q 1 -F 2 "
              "--in_layout NHWC --out_layout NHWC --fil_layout NHWC").problem
    cands = list(DgradSolver().search(p, get_target("sm_90")))
    schedules = {c.schedule for c in cands}
    assert KernelSchedule.WGMMA_TMA_PINGPONG in schedules
    got = select_configs(cands, len(schedules))
    assert got[0] == cands[0] and {c.schedule for c in got} == schedules
    assert got == sorted(got, key=cands.index)


def test_list_prints_the_sweep(capsys):
    status, out, _ = run(capsys, "tune", *LINE.split(), "--backend", "cpu", "--max-configs", "7", "--list")
    assert status == 0 and out == [c.serialize() for c in picked(7)]
    assert out[0] == DgradSolver().get_default_performance_config(PROBLEM, CPU).serialize()


# ------------------------------------------------------------------ the sweep
def test_sweep_with_a_crash_csv_perfdb_and_a_plain_run_that_uses_the_winner(capsys, monkeypatch, tmp_path):
    crash = picked(5)[1].serialize()
    monkeypatch.setenv(workers.CRASH_ENV, crash)
    db, out_csv = tmp_path / "perfdb.sqlite", tmp_path / "sweep.csv"
    status, out, err = run(capsys, "tune", *LINE.split(), "--backend", "cpu", "--max-configs", "5",
                           "--csv", str(out_csv), "--perfdb", str(db))
    assert status == 0 and err == []                    # not a terminal: no progress line
    assert f"5 of {len(CANDIDATES)} valid configs" in out[2]
    # one line per config as it was timed, in sweep order (printed as they finish), then the
    # three verified ones, then the summary
    timed = out[3:8]
    assert [x.split()[1].rstrip(":") for x in timed] == [c.serialize() for c in picked(5)]
    assert all(re.fullmatch(r"Timed \S+: \d+\.\d{6} ms \(median \d+\.\d{6}, min \d+\.\d{6}\)", x)
               for x in timed if not x.startswith("Failed "))
    failed = [x for x in out if x.startswith("Failed ")]
    assert len(failed) == 1 and failed[0].startswith(f"Failed {crash}: timing worker (pid ")
    assert "killed by SIGABRT (exit status -6)" in failed[0]
    assert all(x.startswith("Verified ") and " OK on CPU reference (" in x for x in out[8:11])
    assert "Timed 5 configs in " in out[11] and out[11].endswith(": 4 ok, 1 failed")
    assert out[12] == "Verified the top 3 on CPU reference: 3 OK, 0 FAILED"

    rows = read_csv(out_csv)
    assert list(rows[0].keys()) == list(CSV_FIELDS) and len(rows) == 5
    assert {r["perf_config"] for r in rows} == {c.serialize() for c in picked(5)}
    bad = [r for r in rows if r["status"] == "failed"]
    assert len(bad) == 1 and bad[0]["perf_config"] == crash and bad[0]["signal"] == "SIGABRT"
    assert bad[0]["exit_code"] == "-6" and bad[0]["failure"] == "crashed" and bad[0]["rank"] == ""
    ok = [r for r in rows if r["status"] == "ok"]
    assert [int(r["rank"]) for r in ok] == [1, 2, 3, 4]
    avgs = [float(r["average_ms"]) for r in ok]
    assert avgs == sorted(avgs) and all(a > 0 for a in avgs)
    assert [r["verified"] for r in ok] == ["OK", "OK", "OK", ""]
    for r in ok:   # names and resolved fields match the solver's own solution of that config
        sol = DgradSolver().get_solution(PROBLEM, CPU, next(c for c in CANDIDATES if c.serialize() == r["perf_config"]))
        assert r["kernel_name"] == sol.kernel_name and int(r["split_k"]) == sol.spec.split_k
        assert float(r["gflops"]) == pytest.approx(PROBLEM.flops / float(r["average_ms"]) / 1e6)

    # the winner: the fastest verified row, in the perf-db under this problem key and arch
    winner = ok[0]
    with PerfDb(db) as d:
        rec = d.get(PROBLEM.problem_key(), "cpu", SOLVER_NAME)
    assert rec.values == winner["perf_config"] and rec.time_ms == pytest.approx(float(winner["average_ms"]))
    assert out[-1] == (f"Perf-db: stored {winner['perf_config']} ({float(winner['average_ms']):.6f} ms) for "
                       f"{PROBLEM.miopen_db_key()} on cpu in {db}")
    table = out[out.index("Top 4 (ms: MIOpen average, median, min):") + 1:]
    assert table[0].split() == ["rank", "average_ms", "median_ms", "min_ms", "GFLOPs", "verified", "perf_config",
                                "kernel_name"]
    assert table[1].split()[0] == "1" and table[1].split()[-2] == winner["perf_config"]

    # a later plain run of the same line uses it and says so; --no-perfdb does not
    monkeypatch.delenv(workers.CRASH_ENV)
    status, out, _ = run(capsys, *LINE.split(), "-t", "1", "--backend", "cpu", "--perfdb", str(db))
    assert status == 0
    assert out[3] == (f"Using perf-db config {winner['perf_config']} (tuned {float(winner['average_ms']):.6f} ms) "
                      f"from {db}")
    assert out[-1].startswith("Backward Convolution Data Verifies OK on CPU reference")
    status, out, _ = run(capsys, *LINE.split(), "--backend", "cpu", "--perfdb", str(db), "--print-name-only")
    assert out == [winner["kernel_name"]]
    status, out, _ = run(capsys, *LINE.split(), "--backend", "cpu", "--perfdb", str(db), "--no-perfdb")
    assert status == 0 and not any(x.startswith("Using perf-db") for x in out)


def test_csv_top_and_no_perfdb(capsys, tmp_path):
    out_csv = tmp_path / "top.csv"
    status, out, _ = run(capsys, "tune", *LINE.split(), "--backend", "cpu", "--max-configs", "4", "--csv", str(out_csv),
                         "--csv-top", "2", "--no-perfdb", "--verify-top", "1", "--top", "2")
    rows = read_csv(out_csv)
    assert status == 0 and [r["rank"] for r in rows] == ["1", "2"] and f"Wrote 2 rows to {out_csv}" in out
    assert out[-1].endswith("perf-db not written (--no-perfdb)")
    assert not os.path.exists(os.environ[PERFDB_ENV])
    assert "Top 2 (ms: MIOpen average, median, min):" in out


@pytest.mark.parametrize("args,needle", [
    (["--csv-top", "0", "--csv", "x.csv"], "--csv-top 0: allowed: an integer from 1 to 2147483647"),
    (["--csv-top", "2"], "--csv-top 2: needs --csv PATH"),
    (["--top", "0"], "--top 0"),
    (["--verify-top", "-1"], "--verify-top -1"),
    (["--max-configs", "0"], "--max-configs 0"),
    (["--time-budget", "0"], "--time-budget 0: allowed: a finite number of seconds > 0"),
    (["--time-budget", "inf"], "--time-budget inf: allowed: a finite number of seconds > 0"),
    (["--time-budget", "-inf"], "--time-budget -inf: allowed: a finite number of seconds > 0"),
    (["--time-budget", "nan"], "--time-budget nan: allowed: a finite number of seconds > 0"),
    (["--csv", "/nonexistent/dir/x.csv"], "--csv /nonexistent/dir/x.csv"),
    (["--arch", "gfx942"], "tune needs a device"),
    (["--backend", "cpu", "--arch", "gfx1234"], "--arch gfx1234"),
])
def test_bad_options_fail_before_the_sweep(capsys, monkeypatch, args, needle):
    if args[:2] == ["--arch", "gfx942"] and workers.gpu_device_nodes():
        pytest.skip("a GPU is present")

    def no(*a, **k):
        raise AssertionError("a worker was started")
    monkeypatch.setattr(workers.Worker, "start", no)
    status, out, err = run(capsys, "tune", *LINE.split(), *args)
    assert status == 2 and out == [] and len(err) == 1 and err[0].startswith("dgrad-driver: error: ")
    assert needle in err[0] and "Traceback" not in "".join(err)


def test_not_applicable_and_bad_line(capsys):
    status, _, err = run(capsys, "tune", *LINE.replace("--in_layout NHWC ", "--in_layout CHWN ").split(), "--backend", "cpu")
    assert status == 2 and "LAYOUT" in err[0]
    status, _, err = run(capsys, "tune", "conv", "-n", "2", "-F", "1", "--backend", "cpu")
    assert status == 2 and "-F '1'" in err[0]


def test_time_budget_stops_the_sweep(capsys):
    status, out, _ = run(capsys, "tune", *LINE.split(), "--backend", "cpu", "--max-configs", "6",
                         "--time-budget", "0.001", "--no-perfdb")
    assert status == 0 and "Time budget 0.001 s reached: timed 1 of 6 configs" in out
    assert any(x.startswith("Timed 1 configs in ") for x in out)


def test_csv_rows_say_what_ran_and_the_kouter_the_kernel_runs(capsys, tmp_path):
    """After the time budget the rows never started are "skipped" with the reason (a
    fresh-user trial found them left "pending"), and lds_k_outer is the value the kernel runs
    (-1 resolved by the solver; a direct config's 2 stays 2, not a bool)."""
    csv_path = tmp_path / "t.csv"
    status, out, _ = run(capsys, "tune", *LINE.split(), "--backend", "cpu", "--max-configs", "6",
                         "--time-budget", "0.001", "--no-perfdb", "--csv", str(csv_path))
    rows = read_csv(csv_path)
    assert status == 0 and [r["status"] for r in rows] == ["ok"] + ["skipped"] * 5
    assert {r["reason"] for r in rows[1:]} == {"not timed: --time-budget 0.001 s reached"}
    solver = DgradSolver()
    for r in rows:
        cfg = solver.get_solution(PROBLEM, CPU, r["perf_config"])
        want = cfg.perf_config.lds_k_outer if cfg.perf_config.lds_k_outer >= 0 else int(cfg.spec.lds_k_outer)
        assert r["lds_k_outer"] == str(want) and r["lds_k_outer"] in ("0", "1", "2")
    dw = "convfp16 -n 2 -c 16 -H 9 -W 9 -k 16 -g 16 -y 3 -x 3 -p 1 -q 1 -F 2 -i 1"
    stage32 = "16,16,8,1,1,4,1,1,0,8,1,2,1,4"                     # lds_k_outer 2: the fp32-staged window
    assert DgradSolver().is_valid_performance_config(parse(dw).problem, CPU, stage32)[0]
    status, lines = tune_line(dw.split(), TuneOptions(backend="cpu", max_configs=200, verify_top=0, store=False,
                                                      as_json=True))
    kouters = {row["perf_config"].split(",")[11]: row["lds_k_outer"] for row in json.loads(lines[0])["rows"]}
    assert kouters.get("2") == 2 and kouters.get("1") == 1, kouters


def test_a_hanging_config_times_out_and_the_sweep_goes_on(capsys, monkeypatch):
    hang = picked(3)[2].serialize()
    monkeypatch.setenv(workers.PRELOAD_ENV, FAULTS)
    monkeypatch.setenv("DGRAD_TEST_FAULT", "hang")
    monkeypatch.setenv("DGRAD_TEST_FAULT_CONFIG", hang)
    # the timeout covers a worker's start-up too: 1 s failed the verification workers of a
    # busy 2-core machine, so the hanging config costs 10 s here
    status, out, _ = run(capsys, "tune", *LINE.split(), "--backend", "cpu", "--max-configs", "3", "--timeout", "10",
                         "--no-perfdb", "--json")
    rec = json.loads(out[0])
    assert status == 0 and rec["timed"] == 3
    bad = [r for r in rec["rows"] if r["status"] == "failed"]
    assert len(bad) == 1 and bad[0]["perf_config"] == hang and bad[0]["failure"] == "timeout"
    assert "timed out after 10 s" in bad[0]["reason"] and bad[0]["signal"] == "SIGKILL"
    assert rec["winner"]["perf_config"] != hang and rec["winner"]["verified"] is True


def test_failed_verification_means_no_winner(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv(workers.PRELOAD_ENV, FAULTS)
    monkeypatch.setenv("DGRAD_TEST_FAULT", "zeros")
    db = tmp_path / "p.sqlite"
    status, out, _ = run(capsys, "tune", *LINE.split(), "--backend", "cpu", "--max-configs", "3",
                         "--verify-top", "2", "--perfdb", str(db))
    assert status == 1 and out[-1] == "No winner: no config timed and verified successfully"
    assert "Verified the top 2 on CPU reference: 0 OK, 2 FAILED" in out
    assert sum(x.startswith("Not verified ") and "verification FAILED: " in x for x in out) == 2
    assert not db.exists()
    # --verify-top 0: the fastest timed config wins unverified
    status, out, _ = run(capsys, "tune", *LINE.split(), "--backend", "cpu", "--max-configs", "3",
                         "--verify-top", "0", "--perfdb", str(db), "--json")
    rec = json.loads(out[0])
    fastest = min((r for r in rec["rows"] if r["status"] == "ok"), key=lambda r: r["average_ms"])
    assert status == 0 and rec["winner"]["perf_config"] == fastest["perf_config"] and rec["winner"]["verified"] is None


def test_perfdb_keeps_a_faster_record(capsys, tmp_path):
    db = tmp_path / "p.sqlite"
    keep = CANDIDATES[-1].serialize()
    with PerfDb(db) as d:
        d.update(PROBLEM.problem_key(), "cpu", SOLVER_NAME, keep, 1e-9)
    status, out, _ = run(capsys, "tune", *LINE.split(), "--backend", "cpu", "--max-configs", "2",
                         "--verify-top", "1", "--perfdb", str(db))
    assert status == 0 and out[-1].startswith(f"Perf-db: kept {keep} (0.000000 ms), as fast as or faster than the winner ")
    with PerfDb(db) as d:
        assert d.get(PROBLEM.problem_key(), "cpu", SOLVER_NAME).values == keep


def test_simulated_target_tunes_into_its_own_arch_key(capsys, tmp_path):
    db = tmp_path / "p.sqlite"
    status, out, _ = run(capsys, "tune", *LINE.split(), "--backend", "cpu", "--arch", "gfx942", "--max-configs", "2",
                         "--verify-top", "1", "--perfdb", str(db))
    assert status == 0 and out[-1].split(" on ")[-1].startswith("gfx942@cpu in ")
    with PerfDb(db) as d:
        assert [r.arch for r in d.records()] == ["gfx942@cpu"]


# ------------------------------------------------------------------ progress
def test_progress_line():
    buf = io.StringIO()
    p = Progress(buf, 12, True)
    p.update(0, 0, None, "a,b")
    p.update(3, 1, 0.25, "c")
    p.finish()
    text = buf.getvalue()
    assert text.startswith("\rtune [ 0/12] failed 0  best -  a,b")
    assert "\rtune [ 3/12] failed 1  best 0.250000 ms  c" in text and text.endswith("\n")
    quiet = io.StringIO()
    q = Progress(quiet, 12, False)
    q.update(1, 0, None)
    q.finish()
    assert quiet.getvalue() == ""


def test_progress_through_tune_and_quiet(tmp_path):
    tokens = LINE.split()
    buf = io.StringIO()
    status, _ = tune_line(tokens, TuneOptions(backend="cpu", max_configs=2, verify_top=1, store=False, progress=True),
                          stderr=buf)
    assert status == 0 and re.search(r"\rtune \[2/2\] failed 0  best \d+\.\d{6} ms", buf.getvalue())
    buf = io.StringIO()
    tune_line(tokens, TuneOptions(backend="cpu", max_configs=2, verify_top=1, store=False, progress=True, quiet=True),
              stderr=buf)
    assert buf.getvalue() == ""


@pytest.mark.parametrize("flags, said", [
    ("-s 1", ["'-s 1' ignored: tune times every selected config itself"]),
    ("-o 1", ["'-o 1' ignored: tune writes no dump files"]),
    ("--verify 0", ["'--verify 0' ignored: tune verifies its --verify-top best configs"]),
    ("-w 2 -t 1", ["'-w 2' ignored: tune times every config by the method its heading names"]),
    ("-b 1 -s 1", ["'-s 1' ignored", "'-b 1' is not honoured: backward bias"]),
    ("-V 1 -s 0 -o 0 -w 0", []),
])
def test_tune_names_every_line_flag_it_does_not_honour(flags, said):
    """A fresh-user trial found tune silent on -s 1, -o 1, -V 0 and -w 1 where run and batch
    say so: one Info line each (the order of the line's flags does not matter), in the text
    and in --json's info list; none for the flags' defaults."""
    tokens = (LINE + " " + flags).split()
    status, lines = tune_line(tokens, TuneOptions(backend="cpu", max_configs=1, verify_top=1, store=False))
    info = [line for line in lines if line.startswith("Info: ")]
    assert status == 0 and len(info) == len(said) and all(want in got for want, got in zip(said, info)), info
    status, lines = tune_line(tokens, TuneOptions(backend="cpu", max_configs=1, verify_top=0, store=False,
                                                  as_json=True))
    assert json.loads(lines[0])["info"] == info


@pytest.mark.parametrize("arch", ["sm_90", "gfx942"])
def test_list_needs_no_device(capsys, arch):
    """--list on a machine without that device prints the target's configs (a fresh-user
    review found it refused); a real sweep still needs the device."""
    status, out, err = run(capsys, "tune", *LINE.split(), "--arch", arch, "--max-configs", "5", "--list")
    t = get_target(arch)
    want = [c.serialize() for c in select_configs(list(DgradSolver().search(PROBLEM, t)), 5)]
    assert status == 0 and out == want and err == []
    status, out, err = run(capsys, "tune", *LINE.split(), "--arch", arch, "--max-configs", "5")
    assert status == 2 and out == [] and "needs a device to time on" in err[0] and "--list" in err[0]


@pytest.mark.parametrize("campaign", [False, True])
@pytest.mark.parametrize("flag", [None, "0", "1"])
def test_the_lines_use_hip_graph_flag_sets_how_every_config_is_timed(capsys, timing_graph_flags, tmp_path, campaign, flag):
    """MIOpenDriver's ``-J 1`` (``--use_hip_graph 1``) on a tuned line makes every timing job
    replay a captured graph (as ``run -t 1`` times it, and as bench/compare.py times both
    libraries), in a single-line sweep and in a campaign over a file; without it (or -J 0)
    the configs are timed as plain launches. The CPU engine captures no graphs and says so."""
    seen = timing_graph_flags
    line = LINE + ("" if flag is None else f" -J {flag}")
    args = ["--backend", "cpu", "--max-configs", "2", "--no-perfdb", "--verify-top", "0", "--quiet"]
    if campaign:
        f = tmp_path / "lines.txt"
        f.write_text(line + "\n")
        status, out, _ = run(capsys, "tune", "--file", str(f), *args)
    else:
        status, out, _ = run(capsys, "tune", *line.split(), *args)
    assert status == 0 and len(seen) == 2 and set(seen) == {flag == "1"}
    if not campaign:
        assert any(("graph replays (-J 1)" in x) == (flag == "1") for x in out if x.startswith("Tuning "))
        assert any("'-J 1' is ignored on the cpu engine" in x for x in out) == (flag == "1")   # as typed
        # --json says how the times were taken: the CPU engine's wall clock after its warm-up
        # launches whatever -J says (a GPU engine: "graph" and warm-up 0 with -J 1, else "events")
        status, out, _ = run(capsys, "tune", *line.split(), *args, "--json")
        rec = json.loads(out[0])
        assert status == 0 and rec["method"] == "wall" and rec["warmup"] == 1
    else:   # a campaign says it too (it said "warm-up 1" and nothing about graphs)
        head = next(x for x in out if x.startswith("Configs: "))
        assert ("graph replays (-J 1)" in head) == (flag == "1") and ("warm-up" in head) == (flag != "1"), head
        assert any("'--use_hip_graph 1' is ignored on the cpu engine" in x for x in out) == (flag == "1")


def test_a_resumed_campaign_refuses_a_log_timed_the_other_way(capsys, tmp_path):
    """A campaign log of plain launches resumed with -J 1 lines (h200_check's zoo_tune with a
    ZOO_TUNE_LOG of an event-timed session), or the reverse, ranked both kinds together:
    graphs hide the launch latency, so graph-timed configs won. --resume refuses it in one
    line naming the log, the problem and its line; nothing is timed or appended."""
    f = tmp_path / "lines.txt"
    f.write_text(LINE + "\n")
    log = tmp_path / "log.jsonl"
    args = ["tune", "--file", str(f), "--backend", "cpu", "--max-configs", "2", "--no-perfdb", "--verify-top", "0",
            "--quiet", "--results", str(log)]
    status, _, _ = run(capsys, *args)
    assert status == 0
    recs = [json.loads(x) for x in log.read_text().splitlines()]
    # as a GPU session of -J 1 lines would have written it, stopped before its verdict
    log.write_text("".join(json.dumps({**r, "method": "graph"} if r["type"] == "timing" else r) + "\n"
                           for r in recs if r["type"] != "verdict"))
    before = log.read_bytes()
    status, out, err = run(capsys, *args, "--resume")
    assert status == 2 and out == [] and len(err) == 1, (out, err)
    assert f"--resume {log}: the log timed 2 configs of " in err[0] and "as graph replays (-J 1)" in err[0], err[0]
    assert "line 1 asks plain launches" in err[0] and "allowed: " in err[0], err[0]
    assert log.read_bytes() == before
    log.write_text("".join(json.dumps(r) + "\n" for r in recs if r["type"] != "verdict"))
    status, out, _ = run(capsys, *args, "--resume")      # the same method: resumed
    assert status == 0 and any("resumed: 2 configs" in x for x in out), out


def test_list_with_csv_is_refused_as_it_writes_nothing(capsys, tmp_path):
    """``tune --list --csv PATH`` exited 0 and silently wrote no CSV."""
    path = tmp_path / "l.csv"
    status, out, err = run(capsys, "tune", "--list", *LINE.split(), "--csv", str(path))
    assert status == 2 and out == [] and len(err) == 1
    assert err[0].startswith(f"dgrad-driver: error: --csv {path}: --list times nothing") and "allowed: " in err[0]
    assert not path.exists()


def test_a_setting_a_target_cannot_take_says_what_is_allowed(capsys):
    """``--kouter on`` where the target has no transposing LDS read named the rule but not
    what to do instead (no ``allowed:``)."""
    status, out, err = run(capsys, *LINE.split(), "--backend", "cpu", "--kouter", "on")
    assert status == 2 and len(err) == 1 and err[0].startswith("dgrad-driver: error: --kouter on: ")
    assert "allowed: --kouter as this problem and target take it" in err[0]
