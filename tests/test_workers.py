"""Worker processes (driver.workers) on the CPU engine: plain data in and out, separate
processes, and what happens when a worker raises, crashes, hangs or exits."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import ROOT
from driver import workers
from miopen_solver import prng, reference
from miopen_solver.command import parse
from miopen_solver.runtime.cpu import CpuEngine
from miopen_solver.config import PerfConfig
from miopen_solver.solver import DgradSolver, Solution
from miopen_solver.spec import make_spec
from miopen_solver.target import get_target

FAULTS = os.path.join(ROOT, "tests", "worker_faults.py")
LINE = ("convfp16 -n 2 -c 8 -H 9 -W 7 -k 12 -y 3 -x 3 -p 1 -q 1 -u 2 -v 1 -F 2 "
        "--in_layout NHWC --out_layout NHWC --fil_layout NHWC")
PROBLEM = parse(LINE).problem
CPU = get_target("cpu")
CONFIG = DgradSolver().get_default_performance_config(PROBLEM, CPU).serialize()


def solution(perf_config: str = CONFIG):
    return DgradSolver().get_solution(PROBLEM, CPU, PerfConfig.parse(perf_config))


def job(role, perf_config: str = CONFIG, **kw):
    args = dict(solution=solution(perf_config), backend="cpu", seed=prng.DEFAULT_SEED)
    args.update(kw)
    return workers.make_job(role, **args)


def corrupt_job(role):
    """A job whose solution record was damaged on the way (its kernel text is no longer the
    text its problem, target and config emit): the worker refuses it."""
    rec = solution().to_record()
    rec["kernels"][0]["source"]["text"] += "\n// changed"
    return workers.make_job(role, solution=rec, backend="cpu", seed=prng.DEFAULT_SEED)


def children() -> set:
    """Process ids whose parent is this process (from /proc)."""
    me, out = os.getpid(), set()
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == me and fields[0] != "Z":
            out.add(int(d))
    return out


def gone(pid: int) -> bool:
    """The process no longer runs (absent, or a zombie waiting for a reaper)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in (workers.CRASH_ENV, workers.PRELOAD_ENV, workers.TIMEOUT_ENV, prng.SEED_ENV,
                 "DGRAD_TEST_FAULT", "DGRAD_TEST_FAULT_IN", "DGRAD_TEST_FAULT_CONFIG", "DGRAD_TEST_CALL_LOG"):
        monkeypatch.delenv(name, raising=False)
    before = children()
    yield
    assert children() <= before, "a worker process was left running"


def fault(monkeypatch, kind, **more):
    monkeypatch.setenv(workers.PRELOAD_ENV, FAULTS)
    monkeypatch.setenv("DGRAD_TEST_FAULT", kind)
    for k, v in more.items():
        monkeypatch.setenv(f"DGRAD_TEST_FAULT_{k.upper()}", v)


# ------------------------------------------------------------------ plain data
def test_jobs_are_plain_data_and_carry_the_decided_solution():
    for role in ("timing", "verification"):
        j = job(role)
        d = dataclasses.asdict(j)
        assert json.loads(json.dumps(d)) == d
        assert j.perf_config == CONFIG and j.role == role
        back = Solution.from_record(json.loads(json.dumps(j.solution)))
        want = solution()
        assert back.spec == want.spec and back.kernels[0].source.sha256 == want.kernels[0].source.sha256
    with pytest.raises(ValueError, match="unknown worker role"):
        workers.make_job("both", backend="cpu")


def test_default_timeout(monkeypatch):
    assert workers.default_timeout() == workers.DEFAULT_TIMEOUT_S
    monkeypatch.setenv(workers.TIMEOUT_ENV, "2.5")
    assert workers.default_timeout() == 2.5
    assert workers.Worker("timing").timeout == 2.5
    for bad in ("0", "-1", "soon"):
        monkeypatch.setenv(workers.TIMEOUT_ENV, bad)
        with pytest.raises(ValueError, match=workers.TIMEOUT_ENV):
            workers.default_timeout()


def test_stderr_summary():
    text = "noise\nFatal Python error: Segmentation fault\n\nCurrent thread 0x1:\n  File \"x.py\", line 3\n"
    assert workers._stderr_summary(text) == "Fatal Python error: Segmentation fault"
    assert workers._stderr_summary("a\n  last line  \n\n") == "last line"
    assert workers._stderr_summary("") == ""


# ------------------------------------------------------------------ normal jobs
def test_timing_worker_times_in_another_process():
    res = workers.run_one(job("timing", iters=4, warmup=2))
    assert res.ok and res.failure == "" and res.pid != os.getpid()
    rec = res.record
    assert json.loads(json.dumps(rec)) == rec                       # plain data back
    assert rec["pid"] == res.pid and rec["backend"] == "cpu" and rec["method"] == "wall"
    assert len(rec["times_ms"]) == 4 and all(t > 0 for t in rec["times_ms"])
    assert rec["iters"] == 4 and rec["warmup"] == 2 and rec["wall_ms"] > 0
    assert rec["kernel_name"] == make_spec(PROBLEM, CPU, DgradSolver().get_default_performance_config(PROBLEM, CPU)).kernel_name


def test_verification_worker_matches_an_in_process_verdict():
    res = workers.run_one(job("verification", reference="cpu"))
    assert res.ok and res.pid != os.getpid()
    rec = res.record
    assert rec["reference"] == "CPU" and rec["dumps"] == []
    # the same numbers computed here, without any worker
    spec = make_spec(PROBLEM, CPU, DgradSolver().get_default_performance_config(PROBLEM, CPU))
    inp = prng.generate_inputs(PROBLEM, prng.DEFAULT_SEED)
    want = reference.verify(PROBLEM, CpuEngine().run(spec, inp.dy, inp.w),
                            reference.dgrad_reference(PROBLEM, inp.dy, inp.w))
    assert rec["verdict"] == want.as_dict()


def test_verification_without_verify_runs_once_and_dumps(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = workers.run_one(job("verification", verify=False, dump=True))
    assert res.ok and res.record["verdict"] is None and res.record["reference"] is None
    assert res.record["dumps"] == ["dump_wei.bin", "dump_dout.bin", "dump_bwd_din_gpu.bin"]
    inp = prng.generate_inputs(PROBLEM, prng.DEFAULT_SEED)
    import numpy as np
    assert np.array_equal(np.fromfile(tmp_path / "dump_dout.bin", np.float16), inp.dy.ravel())
    assert (tmp_path / "dump_bwd_din_gpu.bin").stat().st_size == PROBLEM.dx_elems * 2


def test_gpu_reference_on_the_cpu_engine_is_an_error():
    res = workers.run_one(job("verification", reference="gpu"))
    assert not res.ok and res.failure == "raised" and "no GPU reference" in res.reason


def test_roles_are_separate(tmp_path, monkeypatch):
    """The timing process never computes a reference; the verification process never times."""
    log = tmp_path / "calls.log"
    monkeypatch.setenv(workers.PRELOAD_ENV, FAULTS)
    monkeypatch.setenv("DGRAD_TEST_CALL_LOG", str(log))
    with workers.Worker("timing") as tw, workers.Worker("verification") as vw:
        with pytest.raises(ValueError, match="does not run 'verification' jobs"):
            tw.run(job("verification"))
        t = tw.run(job("timing", iters=2))
        v = vw.run(job("verification"))
    assert t.ok and v.ok and t.pid != v.pid
    calls = {}
    for ln in log.read_text().splitlines():
        pid, what = ln.split()
        calls.setdefault(int(pid), set()).add(what)
    assert calls[t.pid] == {"time", "run"}
    assert calls[v.pid] == {"run", "reference"}


def test_one_worker_serves_many_jobs_and_caches_inputs():
    with workers.Worker("timing") as w:
        pids = {w.run(job("timing", iters=1, perf_config=c.serialize())).pid
                for c in list(DgradSolver().search(PROBLEM, CPU))[:3]}
        assert len(pids) == 1 and w.started == 1


def test_probe_auto():
    res = workers.probe("auto")
    assert res.ok and res.record["backend"] in ("cpu", "cuda", "hip")
    if not workers.gpu_device_nodes():
        assert res.record["backend"] == "cpu" and res.record["target"] == CPU.to_record()


# ------------------------------------------------------------------ failures
def test_exception_is_a_failed_result_and_the_next_job_gets_a_fresh_worker():
    with workers.Worker("timing") as w:
        bad = w.run(corrupt_job("timing"))
        assert not bad.ok and bad.failure == "raised" and bad.error_type == "RecordError"
        assert "solution record kernels[0].source.text" in bad.reason and "differs from what" in bad.reason
        assert "Traceback" in bad.traceback
        assert bad.exit_code is None and gone(bad.pid)
        good = w.run(job("timing", iters=1))
        assert good.ok and good.pid != bad.pid and w.started == 2


def test_crash_hook_aborts_only_that_config(monkeypatch):
    monkeypatch.setenv(workers.CRASH_ENV, CONFIG)
    with workers.Worker("timing") as w:
        res = w.run(job("timing", iters=1))
        assert not res.ok and res.failure == "crashed"
        assert res.exit_code == -signal.SIGABRT and res.signal == "SIGABRT"
        assert "killed by SIGABRT" in res.reason and "Fatal Python error: Aborted" in res.reason
        assert gone(res.pid)
        other = next(c.serialize() for c in DgradSolver().search(PROBLEM, CPU) if c.serialize() != CONFIG)
        assert w.run(job("timing", iters=1, perf_config=other)).ok
    # the hook is the timing worker's only: verification of that config still runs
    assert workers.run_one(job("verification")).ok


def test_segfault(monkeypatch):
    fault(monkeypatch, "segv")
    res = workers.run_one(job("timing", iters=1))
    assert not res.ok and res.failure == "crashed" and res.signal == "SIGSEGV"
    assert res.exit_code == -signal.SIGSEGV and "Segmentation fault" in res.reason


def test_exit_without_reply(monkeypatch):
    fault(monkeypatch, "exit", **{"in": "run"})
    res = workers.run_one(job("verification"))
    assert not res.ok and res.failure == "crashed" and res.exit_code == 7 and res.signal is None
    assert "exited with status 7 without replying" in res.reason


def test_hang_is_killed_at_the_timeout(monkeypatch):
    fault(monkeypatch, "hang")
    t0 = time.perf_counter()
    res = workers.run_one(job("timing", iters=1), timeout=1.0)
    assert time.perf_counter() - t0 < 60          # killed at 1 s; 60 s of slack for a busy machine
    assert not res.ok and res.failure == "timeout" and res.signal == "SIGKILL"
    assert "timed out after 1 s" in res.reason and gone(res.pid)


@pytest.mark.parametrize("how", ["strand_exit", "strand_hang"])
def test_a_dying_worker_leaves_no_dump_temp_files(monkeypatch, tmp_path, how):
    """-o 1: a verification worker that dies (or is killed at the timeout) in the middle of a
    dump_*.bin write leaves its temporary file; the driver removes it, and only its."""
    monkeypatch.chdir(tmp_path)
    other = tmp_path / ".dump_bwd_din_gpu.bin.1-0123456789ab.tmp"       # pid 1's: not this worker's
    other.write_bytes(b"x")
    fault(monkeypatch, how, **{"in": "run"})
    res = workers.run_one(job("verification", dump=True), timeout=5.0 if how == "strand_hang" else None)
    assert not res.ok and res.failure == ("timeout" if how == "strand_hang" else "crashed")
    left = sorted(p.name for p in tmp_path.iterdir())
    assert [n for n in left if n.endswith(".tmp")] == [other.name], left
    if "stranded" not in left:          # a hang killed (5 s) before its write began: nothing was tested
        assert how == "strand_hang"
        pytest.skip("the worker was killed before it began the dump write (a busy machine)")
    assert left == sorted([other.name, "dump_wei.bin", "dump_dout.bin", "stranded"])


def test_worker_stdout_never_reaches_ours(monkeypatch, capfd):
    fault(monkeypatch, "stdout")
    assert workers.run_one(job("timing", iters=1)).ok
    out, _ = capfd.readouterr()
    assert "stray worker output" not in out


def test_worker_dies_with_its_driver():
    """A driver that dies without closing its worker (SIGKILL, os._exit) takes it along."""
    code = ("import os, sys; sys.path.insert(0, %r); from driver import workers; "
            "w = workers.Worker('timing'); w.start(); print(w.pid, flush=True); os._exit(0)" % ROOT)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    pid = int(proc.stdout.strip())
    deadline = time.time() + 10
    while time.time() < deadline and not gone(pid):
        time.sleep(0.05)
    assert gone(pid)


def test_a_worker_that_cannot_start(monkeypatch):
    monkeypatch.setattr(workers.sys, "executable", "/nonexistent/python")
    res = workers.run_one(job("timing"))
    assert not res.ok and res.failure == "crashed" and res.reason.startswith("timing worker could not start: ")


def test_no_file_descriptors_leak(monkeypatch):
    def fds():
        return len(os.listdir("/proc/self/fd"))
    workers.run_one(job("timing", iters=1))            # warm imports
    before = fds()
    monkeypatch.setenv(workers.CRASH_ENV, CONFIG)
    with workers.Worker("timing") as w:
        for _ in range(3):
            assert not w.run(job("timing", iters=1)).ok
        assert not w.run(corrupt_job("timing")).ok
    assert fds() == before


def test_preload_takes_a_module_name_too(monkeypatch, tmp_path):
    """``$DGRAD_WORKER_PRELOAD=<module>`` imports the module by name (it raised
    UnboundLocalError: a function-local ``import importlib.util`` shadowed ``importlib``)."""
    (tmp_path / "dgrad_preload_probe.py").write_text(
        "import os\nopen(os.environ['DGRAD_TEST_PRELOAD_MARK'], 'w').write('loaded')\n")
    mark = tmp_path / "mark"
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    monkeypatch.setenv("DGRAD_TEST_PRELOAD_MARK", str(mark))
    monkeypatch.setenv(workers.PRELOAD_ENV, "dgrad_preload_probe")
    assert workers.run_one(job("timing", iters=1)).ok
    assert mark.read_text() == "loaded"


def test_graph_timing_wall_clock_average_divides_by_every_run(monkeypatch):
    """A -J 1 timing replays a graph of GRAPH_RUNS runs: its wall-clock average is the
    elapsed time over every run it made (one eager run, a warm replay, ``iters`` timed
    replays), not over the replays (which made it GRAPH_RUNS times too large)."""
    from miopen_solver.runtime.base import Timing
    calls = {}

    class Engine:
        name, supports_graphs = "cpu", True

        def build(self, sol):
            return type("Built", (), {"resources": None})()

        def time_graph(self, sol, dy, w, launches, replays):
            calls.update(launches=launches, replays=replays)
            return Timing([0.5] * replays, method="graph")

    class State:
        def engine(self, backend):
            return Engine()

        def problem_inputs(self, job, problem):
            return type("Inputs", (), {"dy": None, "w": None})()

    clock = iter([0.0, 0.081])
    monkeypatch.setattr(workers.time, "perf_counter", lambda: next(clock))
    j = dataclasses.replace(job("timing", iters=3), graph=True)
    rec = workers._do_timing(j, State())
    assert calls == {"launches": workers.GRAPH_RUNS, "replays": 3}
    assert rec["method"] == "graph" and rec["warmup"] == 0
    assert rec["wall_ms"] == pytest.approx(81.0 / (1 + workers.GRAPH_RUNS * 4))
