"""Tuning campaigns (``dgrad-driver tune --file``) on the CPU engine: the fake multi-GPU setup
(CPU timing workers pinned with CUDA_VISIBLE_DEVICES), the results log, SIGKILL and
``--resume``, the Dask engine on a LocalCluster, the stratified sample, the scheduling queue,
the compile pool and bad input."""

from __future__ import annotations

import collections
import concurrent.futures
import csv
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import ROOT, run_cli
from driver import workers
from driver.executors import CompilePool, ProblemQueue, Task, parse_gpus
from driver.options import UserError
from miopen_solver import SOLVER_NAME, prng
from miopen_solver.command import parse
from miopen_solver.config import KernelSchedule
from miopen_solver.errors import FileError
from miopen_solver.heuristics import sample_configs
from miopen_solver.perfdb import ENV_VAR as PERFDB_ENV, PerfDb
from miopen_solver.results_log import ResultsLog, read_log
from miopen_solver.solver import DgradSolver
from miopen_solver.target import get_target

LAYOUT = "--in_layout NHWC --out_layout NHWC --fil_layout NHWC"
LINES = [
    f"convfp16 -n 2 -c 8 -H 9 -W 7 -k 12 -y 3 -x 3 -p 1 -q 1 -u 2 -v 1 -F 2 -i 3 {LAYOUT}",
    f"convfp16 -n 1 -c 16 -H 6 -W 6 -k 8 -y 1 -x 1 -p 0 -q 0 -u 1 -v 1 -F 2 -i 3 {LAYOUT}",
    f"conv -n 1 -c 4 -H 5 -W 5 -k 4 -y 3 -x 3 -p 1 -q 1 -u 1 -v 1 -F 2 -i 2 {LAYOUT}",
]
MODEL = "\n".join([
    "# a perf-model file with log noise",
    f"./bin/MIOpenDriver {LINES[0]}",
    f"./bin/MIOpenDriver {LINES[1]}",
    f"./bin/MIOpenDriver {LINES[0].replace('-i 3', '-i 5')}",          # the same problem again
    "MIOpen(HIP): Info [Something] not a command",
    f"MIOpen(HIP): Command [LogCmdConvolution] ./bin/MIOpenDriver {LINES[2]}",
    f"./bin/MIOpenDriver {LINES[1].replace('-F 2', '-F 1')}",          # forward: skipped
]) + "\n"
CPU = get_target("cpu")
KEYS = [parse(line.split()).problem.problem_key() for line in LINES]


def expected_configs(max_configs: int) -> dict:
    """{problem key: set of configs} the campaign times (the sample is tested on its own)."""
    out = {}
    for line in LINES:
        problem = parse(line.split()).problem
        cands = list(DgradSolver().search(problem, CPU))
        out[problem.problem_key()] = {c.serialize() for c in sample_configs(cands, max_configs)}
    return out


@pytest.fixture(autouse=True)
def env(monkeypatch, tmp_path):
    for name in (prng.SEED_ENV, workers.CRASH_ENV, workers.PRELOAD_ENV, workers.TIMEOUT_ENV,
                 "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(PERFDB_ENV, str(tmp_path / "default-perfdb.sqlite"))


@pytest.fixture
def model(tmp_path):
    path = tmp_path / "model.txt"
    path.write_text(MODEL)
    return path


def records(path, kind=None) -> list:
    recs = read_log(path).records
    return [r for r in recs if kind is None or r["type"] == kind]


# ------------------------------------------------------------------ the campaign
def test_file_campaign_on_two_fake_gpus(capsys, tmp_path, model):
    log, db, out_csv = tmp_path / "log.jsonl", tmp_path / "db.sqlite", tmp_path / "c.csv"
    status, out, err = run_cli(capsys, "tune", "--file", model, "--backend", "cpu", "--gpus", "0,1",
                               "--max-configs", "3", "--results", log, "--perfdb", db, "--csv", out_csv)
    assert status == 0, (out, err)
    want = expected_configs(3)
    assert out[0] == f"Campaign {model}: 3 problems on cpu (cpu, cpu (numpy engine)); 2 lines skipped; " \
                     f"1 lines without a conv command ignored"
    assert out[1] == "Engine local: 2 CPU worker slots"
    assert "Skipped line 4: same problem as line 2" in out
    assert "Skipped line 7: -F 1: forward, not backward data" in out

    timing = records(log, "timing")
    assert collections.Counter((t["problem_key"], t["perf_config"]) for t in timing) == \
        collections.Counter((k, c) for k, cs in want.items() for c in cs)          # each config once
    assert all(t["status"] == "ok" and t["median_ms"] > 0 for t in timing)
    # each worker reports the device it was pinned to, and both workers timed something
    assert {t["visible_devices"] for t in timing} == {"0", "1"}
    assert all(t["visible_devices"] == t["gpu"] for t in timing)
    for t in timing:
        ts = sorted(t["times_ms"])
        assert t["median_ms"] == pytest.approx((ts[(len(ts) - 1) // 2] + ts[len(ts) // 2]) / 2)
    defaults = {parse(line.split()).problem.problem_key():
                DgradSolver().get_default_performance_config(parse(line.split()).problem, CPU).serialize()
                for line in LINES}
    assert {(t["problem_key"], t["perf_config"]) for t in timing if t["default"]} == set(defaults.items())

    # provenance: one worker record per slot, from the pinned process
    wrk = records(log, "worker")
    assert sorted(w["provenance"]["visible_devices"] for w in wrk) == ["0", "1"]
    for w in wrk:
        p = w["provenance"]
        assert p["device"] == "cpu (numpy engine)" and p["arch"] == "cpu" and p["num_cus"] == os.cpu_count()
        assert p["product_version"] and p["runtime"].startswith("numpy-") and p["date"]
    (session,) = records(log, "session")
    assert session["backend"] == "cpu" and session["problems"] == 3 and session["tasks"] == 9

    # verdicts: the fastest by median among the verified, speed-up over the default
    verdicts = {v["problem_key"]: v for v in records(log, "verdict")}
    assert set(verdicts) == set(KEYS)
    for key, v in verdicts.items():
        mine = sorted((t for t in timing if t["problem_key"] == key), key=lambda t: t["median_ms"])
        assert [x["perf_config"] for x in v["verified"]] == [t["perf_config"] for t in mine[:3]]
        assert v["winner"] == mine[0]["perf_config"] and v["default"] == defaults[key]
        d = next(t for t in mine if t["perf_config"] == defaults[key])
        assert v["speedup"] == pytest.approx(d["median_ms"] / mine[0]["median_ms"])
        head = next(x for x in out if x.startswith("Problem ") and key in x)
        assert out[out.index(head) + 1].endswith(f"speed-up {v['speedup']:.2f}x")
    total = [x for x in out if x.startswith("Total over 3 problems:")]
    dsum = sum(v["default_median_ms"] for v in verdicts.values())
    wsum = sum(v["winner_median_ms"] for v in verdicts.values())
    assert len(total) == 1 and f"speed-up {dsum / wsum:.2f}x" in total[0]
    assert any(x.startswith("Timed 9 configs in ") and "on 2 workers: 0 failed" in x for x in out)

    # the CSV and the perf-db come from the log
    with open(out_csv, newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 9 and {(r["problem_key"], r["perf_config"]) for r in rows} == \
        {(t["problem_key"], t["perf_config"]) for t in timing}
    assert sum(r["default"] == "yes" for r in rows) == 3
    for key in KEYS:
        mine = [r for r in rows if r["problem_key"] == key]
        assert [int(r["rank"]) for r in mine] == [1, 2, 3]
        assert [float(r["median_ms"]) for r in mine] == sorted(float(r["median_ms"]) for r in mine)
    with PerfDb(db) as d:
        for key, v in verdicts.items():
            rec = d.get(key, "cpu", SOLVER_NAME)
            assert rec.values == v["winner"] and rec.time_ms == pytest.approx(v["winner_median_ms"])   # what it ranked by
    # not a terminal: one plain progress line per problem
    assert sorted(x.split(" done ")[0] for x in err) == [f"tune: problem {i}/3" for i in (1, 2, 3)]

    # the same log again without --resume: refused, nothing run
    status, out, err = run_cli(capsys, "tune", "--file", model, "--backend", "cpu", "--results", log)
    assert status == 2 and out == [] and len(err) == 1
    assert err[0].startswith(f"dgrad-driver: error: --results {log}: holds ") and "--resume" in err[0]
    # --resume of a finished campaign times nothing and prints the same verdicts
    status, out, err = run_cli(capsys, "tune", "--file", model, "--backend", "cpu", "--gpus", "0,1",
                               "--max-configs", "3", "--results", log, "--resume", "--no-perfdb")
    assert status == 0 and any(x.startswith("Timed 0 configs") for x in out)
    assert f"Results log: {log} (resumed: 9 configs and 3 problems were done)" in out
    assert len(records(log, "timing")) == 9 and len(records(log, "verdict")) == 3


def test_a_crashing_config_is_a_failed_record_and_the_campaign_goes_on(capsys, tmp_path, monkeypatch):
    problem = parse(LINES[1].split()).problem
    cfgs = [c.serialize() for c in sample_configs(list(DgradSolver().search(problem, CPU)), 4)]
    monkeypatch.setenv(workers.CRASH_ENV, cfgs[2])
    log = tmp_path / "log.jsonl"
    status, out, _ = run_cli(capsys, "tune", *LINES[1].split(), "--backend", "cpu", "--gpus", "2",
                             "--max-configs", "4", "--results", log, "--no-perfdb", "--quiet")
    assert status == 0
    timing = {t["perf_config"]: t for t in records(log, "timing")}
    assert sorted(timing) == sorted(cfgs)
    bad = timing[cfgs[2]]
    assert bad["status"] == "failed" and bad["failure"] == "crashed" and bad["signal"] == "SIGABRT"
    assert all(timing[c]["status"] == "ok" for c in cfgs if c != cfgs[2])
    assert f"  Failed {cfgs[2]}: {bad['reason']}" in out and "killed by SIGABRT" in bad["reason"]
    (v,) = records(log, "verdict")
    assert v["ok"] == 3 and v["failed"] == 1 and v["winner"] != cfgs[2]


def test_single_line_campaign_and_compile_pool_on_the_cpu(capsys, tmp_path):
    status, out, _ = run_cli(capsys, "tune", *LINES[1].split(), "--backend", "cpu", "--max-configs", "2",
                             "--compile-pool", "1", "--no-perfdb", "--verify-top", "0")
    assert status == 0
    assert out[0].startswith("Campaign one line: 1 problems on cpu")
    assert "Compile pool: off (the cpu engine compiles nothing; --compile-pool ignored)" in out
    assert any(x.startswith("Results log: (temporary) ") for x in out)
    assert any(x.startswith("Timed 2 configs in ") for x in out)


def test_resumed_progress_lines_number_problems_out_of_the_whole_file(capsys, tmp_path):
    """A resumed campaign numbered its progress lines out of the problems left to do:
    ``tune: problem 2/1 done`` after the first of two problems was in the log."""
    first, both = tmp_path / "first.txt", tmp_path / "both.txt"
    first.write_text(LINES[2] + "\n")
    both.write_text(LINES[2] + "\n" + LINES[1] + "\n")
    log = tmp_path / "log.jsonl"
    common = ["--backend", "cpu", "--max-configs", "1", "--verify-top", "0", "--results", log, "--no-perfdb"]
    status, _, _ = run_cli(capsys, "tune", "--file", first, *common)
    assert status == 0
    status, out, err = run_cli(capsys, "tune", "--file", both, *common, "--resume")
    assert status == 0 and "(resumed: 1 configs and 1 problems were done)" in " ".join(out)
    assert [x.split(" done ")[0] for x in err] == ["tune: problem 2/2"], err


# ------------------------------------------------------------------ crash and resume
def test_sigkill_midway_then_resume_times_nothing_twice_and_loses_nothing(tmp_path, model):
    gate = tmp_path / "gate"
    gate.mkdir()
    log = tmp_path / "log.jsonl"
    args = [sys.executable, "-m", "driver", "tune", "--file", str(model), "--backend", "cpu", "--gpus", "2",
            "--max-configs", "3", "--results", str(log), "--perfdb", str(tmp_path / "db.sqlite"), "--quiet"]
    env = dict(os.environ, DGRAD_WORKER_PRELOAD=os.path.join(ROOT, "tests", "campaign_gate.py"),
               DGRAD_TEST_GATE=str(gate), DGRAD_TEST_GATE_PASS="4")
    proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 300      # a bound for a stuck test, not a speed assumption
        while len(records(log, "timing")) < 4:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the campaign did not log 4 configs"
            time.sleep(0.05)
        # 4 configs passed the gate; the workers' next ones wait at it: the campaign cannot end
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
    first = records(log, "timing")
    assert len(first) == 4 and len(records(log, "verdict")) <= 1     # 3 configs a problem: at most one done

    done = subprocess.run(args + ["--resume"], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={k: v for k, v in os.environ.items() if k != workers.PRELOAD_ENV})
    assert done.returncode == 0, done.stderr
    want = expected_configs(3)
    timing = records(log, "timing")
    assert collections.Counter((t["problem_key"], t["perf_config"]) for t in timing) == \
        collections.Counter((k, c) for k, cs in want.items() for c in cs)     # nothing twice, nothing lost
    assert timing[:4] == first                                            # the first session's records kept
    sessions = records(log, "session")
    assert len(sessions) == 2 and sessions[1]["resume"] and sessions[1]["tasks"] == 9 - 4
    assert {t["session"] for t in timing[4:]} == {sessions[1]["session"]}
    verdicts = collections.Counter(v["problem_key"] for v in records(log, "verdict"))
    assert verdicts == collections.Counter(KEYS)                          # one verdict per problem
    assert f"Results log: {log} (resumed: 4 configs and " in done.stdout


def test_log_survives_a_torn_last_line(tmp_path):
    path = tmp_path / "log.jsonl"
    with ResultsLog(path) as log:
        log.append({"type": "timing", "n": 1})
        log.append({"type": "timing", "n": 2})
    with open(path, "ab") as fh:
        fh.write(b'{"type": "timing", "n": 3, "trunc')       # a crash in the middle of a write
    got = read_log(path)
    assert [r["n"] for r in got.records] == [1, 2] and got.torn == len(b'{"type": "timing", "n": 3, "trunc')
    with ResultsLog(path) as log:                             # reopening cuts the torn line
        log.append({"type": "verdict", "n": 4})
    text = path.read_text()
    assert text.count("\n") == 3 and "trunc" not in text
    assert [json.loads(x)["n"] for x in text.splitlines()] == [1, 2, 4]
    assert all(json.loads(x)["log_format"] == 1 for x in text.splitlines())


def test_log_appends_are_fsynced_one_by_one(tmp_path, monkeypatch):
    synced = []
    real = os.fsync
    path = tmp_path / "log.jsonl"

    def spy(fd):
        synced.append(os.fstat(fd).st_size)
        return real(fd)
    with ResultsLog(path) as log:
        monkeypatch.setattr(os, "fsync", spy)
        log.append({"a": 1})
        log.append({"b": 2})
        monkeypatch.setattr(os, "fsync", real)
    lens = [len(x) + 1 for x in path.read_text().splitlines()]
    assert synced == [lens[0], lens[0] + lens[1]]              # each record on disk before the next


@pytest.mark.parametrize("make,why", [
    (lambda p: p.mkdir(), "is a directory"),
    (lambda p: os.mkfifo(p), "is not a regular file"),
])
def test_log_refuses_what_is_not_a_regular_file(tmp_path, make, why):
    path = tmp_path / "x"
    make(path)
    with pytest.raises(FileError, match=why):
        ResultsLog(path).open()


# ------------------------------------------------------------------ dask
def test_dask_local_cluster_gives_the_same_log(capsys, tmp_path, model):
    pytest.importorskip("distributed")
    logs = {}
    environ = dict(os.environ)
    for engine in ("local", "dask"):
        logs[engine] = tmp_path / f"{engine}.jsonl"
        status, out, err = run_cli(capsys, "tune", "--file", model, "--backend", "cpu", "--gpus", "0,1",
                                   "--max-configs", "3", "--results", logs[engine], "--engine", engine,
                                   "--no-perfdb", "--quiet")
        assert status == 0, (out, err)
    assert out[1] == "Engine dask on a LocalCluster: 2 workers"
    assert dict(os.environ) == environ          # the cluster's nannies' variables do not stay behind

    def shape(path):
        t = sorted((r["problem_key"], r["arch"], r["perf_config"], r["kernel_name"], r["schedule"], r["default"],
                    r["status"], r["iters"]) for r in records(path, "timing"))
        v = sorted((r["problem_key"], r["arch"], r["default"], r["configs"], r["ok"], r["lines"], r["command"],
                    r["reference"], len(r["verified"])) for r in records(path, "verdict"))
        seen = {r["visible_devices"] for r in records(path, "timing")}
        prov = sorted(r["provenance"]["visible_devices"] for r in records(path, "worker"))
        return t, v, seen, prov
    assert shape(logs["dask"]) == shape(logs["local"])
    assert shape(logs["dask"])[2] == {"0", "1"} and shape(logs["dask"])[3] == ["0", "1"]


# ------------------------------------------------------------------ pieces
def test_sample_covers_schedules_and_tile_shapes():
    problem = parse(f"convfp16 -n 4 -c 256 -H 14 -W 14 -k 256 -y 3 -x 3 -p 1 -q 1 -F 2 {LAYOUT}".split()).problem
    target = get_target("sm_90")
    cands = list(DgradSolver().search(problem, target))
    schedules = {c.schedule for c in cands}
    strata = {(c.schedule, c.tile_m, c.tile_n) for c in cands}
    assert len(schedules) >= 3 and KernelSchedule.WARP_MMA in schedules
    for n in (1, 2, len(schedules), len(schedules) + 3, len(strata), len(strata) + 7):
        got = sample_configs(cands, n)
        assert len(got) == n and len({c.serialize() for c in got}) == n
        assert got[0] == cands[0]                                        # the default first
        order = [cands.index(c) for c in got]
        assert order == sorted(order)                                    # search order
        if n >= len(schedules):
            assert {c.schedule for c in got} == schedules
        if n >= len(strata):
            assert {(c.schedule, c.tile_m, c.tile_n) for c in got} == strata
    assert sample_configs(cands, None) == cands and sample_configs(cands, len(cands) + 1) == cands


def _task(problem, i, kind="timing"):
    return Task(kind, problem, f"cfg{i}", workers.make_job(kind, backend="cpu"))


def test_queue_is_problem_major_per_slot():
    q = ProblemQueue(2)
    for p, n in (("A", 3), ("B", 2), ("C", 4)):
        for i in range(n):
            q.add(_task(p, i))
    # slot 0 starts on A, slot 1 on the first problem nobody is on (B)
    assert (q.take(0).problem, q.take(1).problem) == ("A", "B")
    assert [q.take(0).problem for _ in range(2)] == ["A", "A"]           # stays on its problem
    assert q.take(0).problem == "C"                                      # A is done: C is free
    q.add(_task("A", 9, "verification"))
    assert q.take(1).kind == "verification"                              # verification first
    assert q.take(1).problem == "B"
    assert q.take(1).problem == "C"                                      # nothing free: the largest left
    assert q.upcoming("C", 5) == [_task("C", 2), _task("C", 3)]
    assert [q.take(0).perf_config, q.take(1).perf_config, q.take(0)] == ["cfg2", "cfg3", None]


def test_compile_pool_cancels_what_has_not_started_and_waits_for_what_has():
    release = threading.Event()
    started = []

    def fake(backend, arch, src):
        started.append(src["sha256"])
        release.wait(10)
        return {"cache_hit": False}

    def task(i):
        sol = {"kernels": [{"source": {"sha256": f"k{i}", "text": "", "name": f"k{i}"}}], "perf_config": f"c{i}"}
        return Task("timing", "P", f"c{i}", workers.Job(role="timing", solution=sol))
    pool = CompilePool(1, "cuda", "sm_90", fn=fake, executor=concurrent.futures.ThreadPoolExecutor(1))
    pool.ahead([task(0), task(1), task(0)])
    assert pool.stats["queued"] == 2                                     # k0 once
    while not started:
        time.sleep(0.01)
    pool.claim(task(1))                                                  # not started: cancelled
    assert pool.stats["cancelled"] == 1
    threading.Timer(0.05, release.set).start()
    pool.claim(task(0))                                                  # running: waited for
    assert pool.stats["waited"] + pool.stats["ready"] == 1 and started == ["k0"]
    pool.claim(task(7))
    assert pool.stats["not_queued"] == 1
    pool.close()


def test_parse_gpus(monkeypatch):
    assert parse_gpus(None, "cpu") == [None]
    assert parse_gpus("3", "cpu") == ["0", "1", "2"]
    assert parse_gpus("0,2,5", "cuda") == ["0", "2", "5"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,6")
    assert parse_gpus("all", "cuda") == ["4", "6"]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert parse_gpus("all", "cpu") == [str(i) for i in range(os.cpu_count())]
    for bad in ("0", "-1", "1,1", "a,b", "2,", "", "all,1"):
        with pytest.raises(UserError, match="allowed: all, a count N from 1 to 4096 .*, or a list of two or more GPU ids"):
            parse_gpus(bad, "cpu")


@pytest.mark.parametrize("count", ["4097", "99999999999", "00004097", "9" * 5000, "1" + "0" * 40])
def test_a_gpu_count_past_4096_is_out_of_range(capsys, tmp_path, model, count, no_workers):
    """``--gpus 99999999999`` said "a single number is a count of GPUs, not an id": the
    wrong reason for a count past the limit (a 5000-digit one must not reach int())."""
    status, out, err = run_cli(capsys, "tune", "--file", model, "--backend", "cpu", "--gpus", count)
    assert status == 2 and out == [] and len(err) == 1
    shown = count if len(count) <= 80 else f"{count[:60]}... ({len(count)} characters)"
    assert err[0] == (f"dgrad-driver: error: --gpus {shown}: a count of GPUs is out of range 1..4096; allowed: all, "
                      f"a count N from 1 to 4096 (GPUs 0..N-1), or a list of two or more GPU ids such as 0,2,5 (no "
                      f"repeats; one GPU by its id: CUDA_VISIBLE_DEVICES=ID with --gpus all)")


def test_gpu_counts_up_to_4096_are_gpus_0_to_n_minus_1():
    for text, n in (("1", 1), ("4096", 4096), ("0004096", 4096), ("07", 7)):
        assert parse_gpus(text, "cpu") == [str(i) for i in range(n)]
    for bad in ("\u0663", "\u0663,\u0664", "+3", "3,+4"):            # ASCII digits only
        with pytest.raises(UserError, match="allowed: all, a count N from 1 to 4096"):
            parse_gpus(bad, "cpu")


@pytest.mark.parametrize("extra,needle", [
    (["--gpus", "0,0"], "--gpus 0,0: allowed: all, a count N from 1 to 4096"),
    (["--gpus", "0"], "--gpus 0: a single number is a count of GPUs, not an id; allowed: all, a count N from 1 to 4096 "
                      "(GPUs 0..N-1), or a list of two or more GPU ids such as 0,2,5 (no repeats; one GPU by its id: "
                      "CUDA_VISIBLE_DEVICES=ID with --gpus all)"),
    (["--resume"], "--resume: needs --results PATH"),
    (["--address", "tcp://127.0.0.1:1"], "--address tcp://127.0.0.1:1: needs --engine dask"),
    (["--engine", "dask", "--address", "tcp://127.0.0.1:1", "--gpus", "2"], "--gpus 2: with --address"),
    (["--compile-pool", "-1"], f"--compile-pool -1: allowed: an integer from 0 (off) to {os.cpu_count()} (the CPU count)"),
    (["--time-budget", "5"], "--time-budget: not available in a campaign"),
    (["--results", "{tmp}"], "is a directory"),
    (["convfp16", "-n", "1"], "a campaign takes FILE or one line, not both (line 'convfp16 -n 1' given too); "
                              "allowed: --file FILE without a line (each line's -i sets its iterations), or one line"),
    (["-i", "3"], "a campaign takes FILE or one line, not both (line '-i 3' given too)"),   # a tune -i after --file
    (["-n"] + ["1"] * 500, "a campaign takes FILE or one line, not both (line '-n 1 1 1"),
])
def test_bad_campaign_input_is_one_line_and_exit_2(capsys, tmp_path, model, extra, needle, no_workers):
    extra = [x.replace("{tmp}", str(tmp_path)) for x in extra]
    status, out, err = run_cli(capsys, "tune", "--file", model, "--backend", "cpu", *extra)
    assert status == 2 and out == [] and len(err) == 1
    assert err[0].startswith("dgrad-driver: error: ") and needle in err[0]


@pytest.mark.parametrize("pool", ["5", "1000", str(2**31), "100000000000"])
def test_a_compile_pool_larger_than_the_cpu_count_is_refused_up_front(capsys, tmp_path, model, pool, no_workers,
                                                                      monkeypatch):
    """``--compile-pool N`` had no upper bound: on a GPU host N past 2^31 raised OverflowError
    in the process pool (a traceback), and a large N started one process per queued kernel.
    It is now at most the CPU count, checked with the other options (on every engine)."""
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    status, out, err = run_cli(capsys, "tune", "--file", model, "--backend", "cpu", "--compile-pool", pool,
                               "--no-perfdb")
    assert status == 2 and out == [] and len(err) == 1, err
    assert err[0] == (f"dgrad-driver: error: --compile-pool {pool}: more compile processes than this host has "
                      f"CPUs; allowed: an integer from 0 (off) to 4 (the CPU count)")


@pytest.mark.parametrize("address", ["tls://127.0.0.1:8786", "ucx://host:13337", "inproc://x", "", "garbage",
                                     "tcp://:8786", "tcp://host:0", "tcp://host:99999", "host:8786x",
                                     "tcp://host:8786/path", "x" * 200])
def test_a_dask_address_that_is_not_tcp_host_port_is_refused_up_front(capsys, tmp_path, model, address, no_workers):
    """``--address`` other than ``tcp://HOST:PORT`` reached Dask: TLS and UCX raised a
    traceback, others an error line that named no option (``missing port number in address
    ''``, ``not enough values to unpack``) or waited a minute for a host named ''."""
    status, out, err = run_cli(capsys, "tune", "--file", model, "--backend", "cpu", "--engine", "dask",
                               "--address", address, "--no-perfdb")
    assert status == 2 and out == [] and len(err) == 1, err
    assert err[0].startswith("dgrad-driver: error: --address ") and \
        err[0].endswith("allowed: tcp://HOST:PORT of a running 'dask scheduler' (PORT 1-65535)") and len(err[0]) < 200


def test_an_executor_that_cannot_start_leaves_no_results_log(capsys, tmp_path, model, monkeypatch):
    """A campaign whose executor fails to start (a Dask scheduler that cannot be reached: exit
    2 after the connect timeout) started nothing: it must not leave a results log holding a
    session record, which made the same command without --address refuse to run (--resume)."""
    import driver.campaign as campaign
    from driver.options import UserError

    def unreachable(*args, **kwargs):
        raise UserError("--address tcp://127.0.0.1:1: cannot reach the Dask scheduler (refused)")
    monkeypatch.setattr(campaign, "_make_executor", unreachable)
    log = tmp_path / "r.jsonl"
    status, out, err = run_cli(capsys, "tune", "--file", model, "--backend", "cpu", "--max-configs", "1",
                               "--no-perfdb", "--results", str(log))
    assert status == 2 and err[-1].startswith("dgrad-driver: error: --address tcp://127.0.0.1:1: cannot reach")
    assert not log.exists()
    monkeypatch.undo()
    status, out, err = run_cli(capsys, "tune", "--file", model, "--backend", "cpu", "--max-configs", "1",
                               "--no-perfdb", "--results", str(log))
    assert status == 0, err


def test_a_dask_scheduler_without_workers_is_one_line(keep_environ):
    """A scheduler no worker joins raised distributed's WorkerStartTimeoutError as a
    traceback after the connect timeout."""
    distributed = pytest.importorskip("distributed")
    import logging
    from driver.executors import DaskExecutor
    with distributed.LocalCluster(n_workers=0, dashboard_address=None, silence_logs=logging.ERROR) as empty:
        with pytest.raises(UserError, match=f"--address {empty.scheduler_address}: no Dask worker joined the "
                                            f"scheduler within 1 s .*dask worker {empty.scheduler_address} "
                                            f"--nthreads 1 --resources GPU=1"):
            DaskExecutor(empty.scheduler_address, [None], 60.0, "cpu", connect_timeout=1.0)


def test_a_file_without_a_tunable_line_is_bad_input(capsys, tmp_path, no_workers):
    path = tmp_path / "none.txt"
    path.write_text(f"# nothing\n./bin/MIOpenDriver {LINES[1].replace('-F 2', '-F 4')}\n")
    status, out, err = run_cli(capsys, "tune", "--file", path, "--backend", "cpu")
    assert status == 2 and out == [] and err == [f"dgrad-driver: error: --file {path}: no applicable -F 2 line to "
                                                  f"tune on cpu (1 lines skipped, 0 without a conv command or a Find call's log line)"]
    status, out, err = run_cli(capsys, "tune", "--file", tmp_path, "--backend", "cpu")
    assert status == 2 and len(err) == 1 and "is a directory" in err[0]


class FakeCompiler:
    """A device-free compiler stand-in: records what it compiles."""

    def __init__(self):
        self.compiled = []

    def compiler_id(self):
        return "fakec-1.0"

    def compile_options(self, arch):
        return [f"--arch={arch}", "-O3"]

    def compile(self, text, name, arch):
        self.compiled.append(name)
        return f"binary of {name} for {arch}".encode()


def test_precompile_fills_the_cache_under_the_engines_key(tmp_path, monkeypatch):
    from miopen_solver.runtime import cache as cache_mod, precompile as pre
    monkeypatch.setenv(cache_mod.ENV_VAR, str(tmp_path / "kc"))
    fake = FakeCompiler()
    monkeypatch.setattr(pre, "_COMPILERS", {"cuda": fake})
    src = {"text": "__global__ void k() {}\n", "name": "k"}
    first = pre.precompile("cuda", "sm_90", src)
    again = pre.precompile("cuda", "sm_90", src)
    assert (first["cache_hit"], again["cache_hit"]) == (False, True) and fake.compiled == ["k"]
    # the key a GPU engine computes for the same source, arch, compiler and options (gpu.GpuEngine.load)
    import hashlib
    h = hashlib.sha256()
    for part in (src["text"], "sm_90", "fakec-1.0", "--arch=sm_90 -O3"):
        h.update(part.encode() + b"\0")
    assert first["key"] == h.hexdigest()
    assert cache_mod.BinaryCache().get(h.hexdigest()) == b"binary of k for sm_90"
    assert not pre.compiles("cpu") and pre.compiles("cuda") and pre.compiles("hip")


def test_local_executor_asks_the_compile_pool_for_what_comes_next(tmp_path):
    from driver.executors import LocalExecutor
    problem = parse(LINES[1].split()).problem
    cfgs = sample_configs(list(DgradSolver().search(problem, CPU)), 5)
    sols = [DgradSolver().get_solution(problem, CPU, c) for c in cfgs]
    calls = []
    lock = threading.Lock()

    def fake(backend, arch, src):
        with lock:
            calls.append(src["sha256"])
        return {"cache_hit": False}
    pool = CompilePool(1, "cuda", "sm_90", fn=fake, executor=concurrent.futures.ThreadPoolExecutor(1))
    ex = LocalExecutor([None], 60, "cpu", pool)
    try:
        for c, s in zip(cfgs, sols):
            ex.submit(Task("timing", "P", c.serialize(), workers.make_job("timing", backend="cpu", solution=s, iters=1)))
        ex.start()
        got = [ex.results.get(timeout=120) for _ in cfgs]
    finally:
        ex.close()
    assert [t.perf_config for t, _ in got] == [c.serialize() for c in cfgs]      # one slot: in order
    assert all(r["ok"] and r["slot"] == "local" for _, r in got)
    shas = [s.kernels[0].source.sha256 for s in sols]
    assert set(calls) <= set(shas[1:]) and shas[0] not in calls      # the first is the worker's own
    st = pool.stats
    assert st["queued"] == len(set(shas[1:])) and st["not_queued"] == 1
    assert st["ready"] + st["waited"] + st["cancelled"] + st["failed"] == len(cfgs) - 1


@pytest.fixture
def keep_environ():
    """A LocalCluster made here sets variables in os.environ (BLAS threads ...): undo that."""
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)


def test_dask_address_uses_the_clusters_gpu_workers_and_refuses_untagged_ones(capsys, tmp_path, model,
                                                                             keep_environ):
    distributed = pytest.importorskip("distributed")
    import logging
    kw = dict(threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=logging.ERROR)
    with distributed.LocalCluster(n_workers=1, **kw) as plain:
        status, out, err = run_cli(capsys, "tune", "--file", model, "--backend", "cpu", "--engine", "dask",
                                   "--address", plain.scheduler_address, "--no-perfdb", "--quiet")
    assert status == 2 and out == [] and len(err) == 1
    assert "no Dask worker offers the resource GPU" in err[0] and "--resources GPU=1" in err[0]
    log = tmp_path / "log.jsonl"
    with distributed.LocalCluster(n_workers=2, resources={"GPU": 1}, **kw) as cluster:
        status, out, err = run_cli(capsys, "tune", "--file", model, "--backend", "cpu", "--engine", "dask",
                                   "--address", cluster.scheduler_address, "--max-configs", "2",
                                   "--results", log, "--no-perfdb", "--quiet")
    assert status == 0, (out, err)
    assert out[1] == f"Engine dask on {cluster.scheduler_address}: 2 workers"
    want = expected_configs(2)
    assert sorted((t["problem_key"], t["perf_config"]) for t in records(log, "timing")) == \
        sorted((k, c) for k, cs in want.items() for c in cs)
    assert len(records(log, "verdict")) == 3


# ------------------------------------------------------------------ what --results may name
def _not_logs(tmp_path) -> dict:
    """Files that are not a campaign log, each as its bytes."""
    import random
    rng = random.Random(7)
    return {"text": b"hello\nworld\n", "csv": b"rank,status\n1,ok\n",
            "binary": bytes(rng.randrange(256) for _ in range(512)),
            "binary_lines": b"\x00\xff\n\x89PNG\n",
            "not_json_line": b'{"log_format":1,"type":"session"}\nnot json\n',
            "json_not_object": b"[1, 2]\n",
            "other_json": b'{"a": 1}\n{"b": 2}\n',
            "other_format": b'{"log_format":2,"type":"session"}\n',
            "unknown_type": b'{"log_format":1,"type":"session"}\n{"log_format":1,"type":"row"}\n',
            "no_session_first": b'{"log_format":1,"type":"timing"}\n',
            "torn_only_text": b"no newline at all",
            # hand-edited times: a string and a negative median, a null time, a verdict's ratio
            "time_not_a_number": b'{"log_format":1,"type":"session"}\n{"log_format":1,"type":"timing","status":"ok",'
                                 b'"median_ms":"fast","average_ms":1.0,"min_ms":1.0,"times_ms":[1.0]}\n',
            "negative_time": b'{"log_format":1,"type":"session"}\n{"log_format":1,"type":"timing","status":"ok",'
                             b'"median_ms":-5.0,"average_ms":1.0,"min_ms":1.0,"times_ms":[1.0]}\n',
            "times_not_a_list": b'{"log_format":1,"type":"session"}\n{"log_format":1,"type":"timing","status":"ok",'
                                b'"median_ms":1.0,"average_ms":1.0,"min_ms":1.0,"times_ms":"1.0"}\n',
            "verdict_nan": b'{"log_format":1,"type":"session"}\n{"log_format":1,"type":"verdict","speedup":NaN}\n',
            # a failed timing's time, a verdict's winner, its winner's time and its verified list
            "failed_time_junk": b'{"log_format":1,"type":"session"}\n{"log_format":1,"type":"timing",'
                                b'"status":"failed","median_ms":"junk"}\n',
            "winner_not_a_config": b'{"log_format":1,"type":"session"}\n{"log_format":1,"type":"verdict",'
                                   b'"winner":"hello","winner_median_ms":1.0,"winner_average_ms":1.0}\n',
            "winner_a_number": b'{"log_format":1,"type":"session"}\n{"log_format":1,"type":"verdict","winner":5}\n',
            "winner_without_time": b'{"log_format":1,"type":"session"}\n{"log_format":1,"type":"verdict",'
                                   b'"winner":"128,128,16,2,2,64,64,0,0,0,1,-1,2","winner_median_ms":null}\n',
            "verified_not_a_list": b'{"log_format":1,"type":"session"}\n{"log_format":1,"type":"verdict",'
                                   b'"winner":null,"verified":"x"}\n'}


@pytest.mark.parametrize("resume", [False, True])
@pytest.mark.parametrize("kind", sorted(_not_logs(None)))
def test_results_that_is_not_a_campaign_log_is_refused_and_left_untouched(capsys, tmp_path, model, kind, resume,
                                                                            no_workers):
    path = tmp_path / f"file.{kind}"
    data = _not_logs(tmp_path)[kind]
    path.write_bytes(data)
    status, out, err = run_cli(capsys, "tune", "--file", model, "--backend", "cpu", "--results", path,
                               *(["--resume"] if resume else []))
    assert status == 2 and out == [] and len(err) == 1, (out, err)
    assert err[0].startswith(f"dgrad-driver: error: --results {path}: ") and "not a campaign log" in err[0]
    assert "allowed: " in err[0]
    assert path.read_bytes() == data


@pytest.mark.parametrize("name", ["new.jsonl", "sub/../new.jsonl", "NEW LOG.jsonl"])
def test_resume_of_a_results_log_that_does_not_exist_is_refused(capsys, tmp_path, model, name, no_workers):
    """``--resume --results NEW.jsonl`` (a mistyped log) started a fresh campaign silently:
    it is one error line naming the path, exit 2, and nothing is created; an empty file
    (a campaign killed before its first record) still resumes as nothing done."""
    (tmp_path / "sub").mkdir()
    path = tmp_path / name
    status, out, err = run_cli(capsys, "tune", "--file", model, "--backend", "cpu", "--results", path, "--resume")
    assert status == 2 and out == [] and err == [
        f"dgrad-driver: error: --resume needs an existing results log; --results {path} does not exist; allowed: "
        f"the log of an earlier campaign, or a new file without --resume"]
    assert not os.path.exists(path)


@pytest.mark.parametrize("option,first,then", [("--max-configs", "2", "1"), ("--verify-top", "0", "1")])
def test_resume_with_other_options_is_refused(capsys, tmp_path, option, first, then):
    """--resume with another --max-configs ranked a different set of configs in the table and
    CSV than the verdicts and the perf-db held (and a larger one timed nothing more): refused,
    naming the option and both values, the log left as it was."""
    lines = tmp_path / "one.txt"
    lines.write_text(LINES[2] + "\n")
    log = tmp_path / "log.jsonl"
    base = {"--max-configs": "1", "--verify-top": "0"}
    args = ["tune", "--file", lines, "--backend", "cpu", "--results", log, "--no-perfdb"]
    status, _, err = run_cli(capsys, *args, *[x for k, v in {**base, option: first}.items() for x in (k, v)])
    assert status == 0, err
    data = log.read_bytes()
    status, out, err = run_cli(capsys, *args, "--resume", *[x for k, v in {**base, option: then}.items() for x in (k, v)])
    assert status == 2 and out == [] and err == [
        f"dgrad-driver: error: --resume {log}: the campaign ran {option} {first} and this run asks {then}; allowed: "
        f"{option} as the log's first session ran it, or a new --results log"]
    assert log.read_bytes() == data


def test_a_results_log_in_use_or_read_only_is_refused(tmp_path):
    """Two campaigns on one new log both appended (duplicated timings); a 0444 log was
    appended to by root: the log is locked while a campaign writes it, and a read-only one
    is refused (also for root), each naming the path."""
    from miopen_solver.errors import FileError
    path = tmp_path / "log.jsonl"
    with ResultsLog(path) as log:
        log.append({"type": "session", "session": "s"})
        with pytest.raises(FileError, match="is the log of a campaign running now"):
            ResultsLog(path).open()
    with ResultsLog(path) as log:                  # released when the first closes
        log.append({"type": "worker"})
    path.chmod(0o444)
    with pytest.raises(FileError, match=r"is read-only \(mode 0444\)"):
        ResultsLog(path).open()
    assert len(path.read_text().splitlines()) == 2


def test_a_log_a_running_campaign_holds_is_refused_with_or_without_resume(capsys, tmp_path, model, no_workers):
    path = tmp_path / "log.jsonl"
    with ResultsLog(path) as log:
        log.append({"type": "session", "session": "s"})
        for extra in ([], ["--resume"]):
            status, out, err = run_cli(capsys, "tune", "--file", model, "--backend", "cpu", "--results", path, *extra)
            assert status == 2 and out == [] and err == [
                f"dgrad-driver: error: --results {path}: is the log of a campaign running now (locked); allowed: "
                f"--resume once that campaign has ended, or another file"]


def test_a_new_log_another_campaign_wrote_since_the_check_is_refused(capsys, tmp_path, model, monkeypatch):
    """Two campaigns started together on one new log both passed the "new or empty" check,
    then both appended: the check is made again under the log's lock, before anything runs,
    and the log the other wrote is left as it was."""
    import driver.campaign as campaign
    path = tmp_path / "log.jsonl"
    real = campaign.read_problems

    def other_campaign_writes_first(*args, **kwargs):
        with ResultsLog(path) as log:
            log.append({"type": "session", "session": "other"})
        return real(*args, **kwargs)
    monkeypatch.setattr(campaign, "read_problems", other_campaign_writes_first)
    status, out, err = run_cli(capsys, "tune", "--file", model, "--backend", "cpu", "--max-configs", "1",
                               "--no-perfdb", "--results", path)
    assert status == 2 and err[-1] == (f"dgrad-driver: error: --results {path}: holds 1 records of another campaign; "
                                       f"allowed: --resume to continue it, or a new file")
    assert [json.loads(line)["session"] for line in path.read_text().splitlines()] == ["other"]


def test_resume_of_an_empty_results_file_is_taken(tmp_path):
    from driver.campaign import CampaignOptions, _check_results
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"")
    _check_results(CampaignOptions(results=str(path), resume=True))      # nothing to refuse


def test_results_log_without_resume_is_refused_untouched(capsys, tmp_path, model, no_workers):
    path = tmp_path / "log.jsonl"
    with ResultsLog(path) as log:
        log.append({"type": "session", "session": "s"})
    data = path.read_bytes()
    status, out, err = run_cli(capsys, "tune", "--file", model, "--backend", "cpu", "--results", path)
    assert status == 2 and out == [] and len(err) == 1
    assert "holds 1 records of an earlier campaign; allowed: --resume" in err[0]
    assert path.read_bytes() == data


@pytest.mark.parametrize("content", [b"", b'{"log_format":1,"type":"session","session":"s"}\n',
                                     b'{"log_format":1,"type":"session","session":"s"}\n{"log_format":1,"ty',
                                     b'{"log_format":1,"ty'])
def test_check_log_takes_empty_files_and_logs_torn_or_whole(tmp_path, content):
    from miopen_solver.results_log import check_log
    path = tmp_path / "log.jsonl"
    path.write_bytes(content)
    got = check_log(path)
    assert len(got.records) == content.count(b"\n")
    assert check_log(tmp_path / "new.jsonl").records == []


def test_empty_results_file_is_a_new_log(capsys, tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"")
    status, out, err = run_cli(capsys, "tune", *LINES[1].split(), "--backend", "cpu", "--max-configs", "1",
                               "--verify-top", "0", "--no-perfdb", "--quiet", "--results", path)
    assert status == 0, (out, err)
    assert records(path, "session") and records(path, "timing")


@pytest.mark.parametrize("kind", ["binary", "missing", "directory", "fifo"])
def test_an_unreadable_campaign_file_is_named_by_its_flag(capsys, tmp_path, kind):
    """A campaign's command file is given as ``--file``; every way it cannot be read is one
    line naming ``--file`` (not ``batch``'s ``FILE``), the path and what is allowed, exit 2;
    ``batch`` names its argument ``FILE``."""
    path = tmp_path / "lines.txt"
    if kind == "binary":
        path.write_bytes(b"\x00\xff\xfe")
    elif kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    status, out, err = run_cli(capsys, "tune", "--file", path, "--max-configs", "1")
    assert status == 2 and len(err) == 1 and "Traceback" not in "\n".join(err)
    assert err[0].startswith(f"dgrad-driver: error: --file {path}: ") and "allowed:" in err[0]
    status, out, err = run_cli(capsys, "batch", path)
    assert status == 2 and len(err) == 1 and err[0].startswith(f"dgrad-driver: error: FILE {path}: ")


def test_a_nan_time_in_a_log_is_named_as_written(tmp_path):
    from miopen_solver.errors import FileError
    from miopen_solver.results_log import check_log
    path = tmp_path / "log.jsonl"
    path.write_bytes(b'{"log_format":1,"type":"session"}\n{"log_format":1,"type":"timing","status":"ok",'
                     b'"median_ms":NaN,"average_ms":1.0,"min_ms":1.0,"times_ms":[1.0]}\n')
    with pytest.raises(FileError, match=r"record 2 \(timing\) has median_ms nan, not a number of ms >= 0"):
        check_log(path)


@pytest.mark.parametrize("value,shown", [('"1,2,3"', '"1,2,3"'), ("null", "null"), ("7", "7")])
def test_a_timing_record_of_no_perf_config_is_refused(tmp_path, value, shown):
    """--resume ranked, verified and filed timings by their perf_config without checking it
    (a verdict's winner was checked): a timing whose perf_config is no perf config is named."""
    from miopen_solver.errors import FileError
    from miopen_solver.results_log import check_log
    path = tmp_path / "log.jsonl"
    path.write_text('{"log_format":1,"type":"session"}\n{"log_format":1,"type":"timing","status":"ok",'
                    '"median_ms":1.0,"average_ms":1.0,"min_ms":1.0,"times_ms":[1.0],"perf_config":' + value + '}\n')
    with pytest.raises(FileError, match=rf"record 2 \(timing\) has perf_config {re.escape(shown)}, not a perf config"):
        check_log(path)


def test_the_worker_count_is_the_slots_that_ran(capsys, tmp_path, model):
    # 16 slots and two configs of one problem: the summary counts the slots that took a task
    # (each starts its workers with its first), not the 16 asked for.
    line = tmp_path / "one.txt"
    line.write_text("convfp16 -n 1 -c 8 -H 6 -W 6 -k 8 -y 3 -x 3 -p 1 -q 1 -F 2\n")
    status, out, err = run_cli(capsys, "tune", "--file", line, "--backend", "cpu", "--gpus", "16", "--max-configs",
                               "2", "--results", tmp_path / "log.jsonl", "--perfdb", tmp_path / "db.sqlite")
    assert status == 0, (out, err)
    assert out[1] == "Engine local: 16 CPU worker slots"
    (timed,) = [x for x in out if x.startswith("Timed 2 configs in ")]
    used = int(re.search(r" on (\d+) workers:", timed).group(1))
    workers_logged = {r.get("slot") for r in records(tmp_path / "log.jsonl", "worker")}
    assert 1 <= used <= 4 and used == len(workers_logged), (timed, workers_logged)
