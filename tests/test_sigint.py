"""Ctrl-C is the driver's alone (:mod:`driver.sigint`): every child process it starts -- the
compile pool's, the timing and verification workers, the provenance probe, a Dask
LocalCluster's workers -- ignores SIGINT, and an interrupted campaign ends its children at
once: one ``dgrad-driver: interrupted`` line, exit status 130, no traceback, a valid log.

A campaign with ``--gpus all --compile-pool 12`` stopped by ``timeout -s INT`` printed one
``KeyboardInterrupt`` traceback per pool process and was still running 30 s later."""

from __future__ import annotations

import concurrent.futures
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import ROOT
from driver import workers
from driver.executors import CompilePool, SlotRunner, Task, slot_provenance
from driver.sigint import ignore_sigint, sigint_blocked

LAYOUT = "--in_layout NHWC --out_layout NHWC --fil_layout NHWC"
LINES = [
    f"convfp16 -n 2 -c 8 -H 9 -W 7 -k 12 -y 3 -x 3 -p 1 -q 1 -u 2 -v 1 -F 2 -i 3 {LAYOUT}",
    f"convfp16 -n 1 -c 16 -H 6 -W 6 -k 8 -y 1 -x 1 -p 0 -q 0 -u 1 -v 1 -F 2 -i 3 {LAYOUT}",
]
BOUND_S = 60.0
"""How long an interrupted campaign may take to exit: a bound for a busy machine, not a speed."""
LAUNCH = "import sys, compile_gate; from driver.entry import main; sys.exit(main())"


def _sigint_state():
    """(SIGINT ignored, SIGINT blocked) in this process (a pool's job)."""
    return (signal.getsignal(signal.SIGINT) == signal.SIG_IGN,
            signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, []))


def _interrupt_self(backend, arch, source):
    """A compile that sends itself SIGINT, then says how the process took it."""
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(0.2)                                   # a KeyboardInterrupt would be raised by now
    with open(source["name"], "w") as fh:
        fh.write(json.dumps(_sigint_state()))
    return {}


def _task(sha: str, name: str) -> Task:
    sol = {"kernels": [{"source": {"sha256": sha, "text": "", "name": name}}], "perf_config": sha}
    return Task("timing", "P", sha, workers.Job(role="timing", solution=sol))


# ------------------------------------------------------------------ the children ignore it
def test_compile_pool_processes_ignore_sigint(tmp_path):
    out = tmp_path / "state.json"
    pool = CompilePool(1, "cuda", "sm_90", fn=_interrupt_self)
    try:
        pool.ahead([_task("k0", str(out))])
        deadline = time.monotonic() + BOUND_S
        while not out.exists() or not out.read_text():
            assert time.monotonic() < deadline, "the pool process did not report"
            time.sleep(0.05)
    finally:
        pool.close(kill=True)
    assert json.loads(out.read_text()) == [True, False]       # ignored, not blocked: it lived on


def test_a_process_started_with_sigint_blocked_keeps_it_until_its_initializer():
    """A pool process started inside :func:`sigint_blocked` (as :meth:`CompilePool.ahead` and
    a Dask LocalCluster start theirs) starts with SIGINT blocked: a Ctrl-C before its
    initializer ran waits, and the initializer drops it."""
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=ctx) as bare, sigint_blocked():
        assert bare.submit(_sigint_state).result(timeout=BOUND_S) == (False, True)
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=ctx, initializer=ignore_sigint) as pool, \
            sigint_blocked():
        assert pool.submit(_sigint_state).result(timeout=BOUND_S) == (True, False)
    assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, [])    # the block was undone


def _sigint_blocked_here() -> bool:
    return signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, [])


def test_the_dask_local_cluster_workers_keep_sigint_blocked():
    pytest.importorskip("distributed")
    from driver.executors import DaskExecutor
    ex = DaskExecutor(None, [None], BOUND_S, "cpu")
    try:
        assert list(ex.client.run(_sigint_blocked_here).values()) == [True]
    finally:
        ex.close()
    assert not _sigint_blocked_here()


def test_a_worker_ignores_sigint():
    with workers.Worker("probe", timeout=BOUND_S) as w:
        job = workers.make_job("probe", backend="cpu")
        assert w.run(job).ok
        pid = w.pid
        os.kill(pid, signal.SIGINT)
        res = w.run(job)
        assert res.ok and res.pid == pid, res.reason


def test_the_provenance_probe_has_a_session_of_its_own():
    """A Ctrl-C to the driver's process group never reaches the probe (it ignores SIGINT too)."""
    seen = []
    rec = slot_provenance("cpu", started=lambda proc: seen.append(os.getsid(proc.pid) == proc.pid))
    assert seen == [True] and "error" not in rec, rec


def test_a_killed_slot_runner_runs_no_queued_job_and_refuses_new_ones():
    runner = SlotRunner("t", None, BOUND_S, None, "cpu")
    runner.close(kill=True)
    got, job = [], workers.make_job("probe", backend="cpu")
    caller = threading.Thread(target=lambda: got.append(runner.call("timing", job)),
                              daemon=True)                # (it waited for ever: the runner's thread had ended)
    caller.start()
    caller.join(timeout=BOUND_S)
    assert got and not got[0]["ok"] and "closed before the job ran" in got[0]["reason"]
    assert all(w.pid is None for w in runner._workers)


# ------------------------------------------------------------------ a real campaign
def _group_alive(pgid: int) -> list:
    """The processes of group ``pgid`` that are not zombies."""
    alive = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            alive.append(int(d))
    return alive


def _timings(log) -> int:
    """Timing records in the log so far (its complete lines)."""
    lines = log.read_bytes().split(b"\n")[:-1] if log.exists() else []
    return sum(json.loads(ln)["type"] == "timing" for ln in lines)


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc")
def test_sigint_to_a_campaign_with_a_compile_pool_ends_it_with_one_line(tmp_path):
    """SIGINT to the whole process group (a terminal's Ctrl-C, ``timeout -s INT``) while one
    pool process compiles and one idles: one line, exit 130, the log valid, no process left."""
    (tmp_path / "zoo.txt").write_text("\n".join(LINES) + "\n")
    gate, log = tmp_path / "gate", tmp_path / "log.jsonl"
    gate.mkdir()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.path.join(ROOT, "tests")]),
               DGRAD_TEST_COMPILE_GATE=str(gate), DGRAD_TEST_COMPILE_GATE_PASS="1")
    args = [sys.executable, "-c", LAUNCH, "tune", "--file", "zoo.txt", "--backend", "cpu", "--gpus", "2",
            "--compile-pool", "2", "--max-configs", "6", "--verify-top", "1", "--quiet", "--results", str(log),
            "--no-perfdb"]
    proc = subprocess.Popen(args, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 300      # a bound for a stuck test, not a speed assumption
        while len(os.listdir(gate)) < 2 or _timings(log) < 1:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the campaign did not start compiling and timing"
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)
        t0 = time.monotonic()
        out, err = proc.communicate(timeout=BOUND_S)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert err.splitlines() == ["dgrad-driver: interrupted"], err
    assert proc.returncode == 130 and took < BOUND_S
    assert "Interrupted: " in out
    data = log.read_bytes()
    assert data.endswith(b"\n")
    recs = [json.loads(ln) for ln in data.decode().splitlines()]
    assert recs[0]["type"] == "session" and any(r["type"] == "timing" for r in recs)
    deadline = time.monotonic() + 10
    while _group_alive(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _group_alive(proc.pid) == []


def test_the_ctrl_c_tests_hold_in_a_run_started_with_sigint_ignored(tmp_path):
    """CI started from a non-interactive shell's background job (or nohup) starts pytest with
    SIGINT ignored; every Ctrl-C test then failed, testing only the inheritance (the
    fifteenth session's CI). conftest's ``pytest_configure`` gives the run Python's handler:
    a Ctrl-C test passes in such a run, and the pool tests that rely on an ignored SIGINT in
    their children still do."""
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    launch = ("import signal, subprocess, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
              "sys.exit(subprocess.call([sys.executable, '-m', 'pytest', '-q', '-p', 'no:cacheprovider', "
              "'--rootdir', sys.argv[1], "
              "sys.argv[1] + '/tests/test_driver_errors.py::test_ctrl_c_exits_130_and_ends_the_workers', "
              "sys.argv[1] + '/tests/test_sigint.py::test_compile_pool_processes_ignore_sigint']))")
    r = subprocess.run([sys.executable, "-c", launch, ROOT], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=20 * BOUND_S)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert " passed" in r.stdout and "failed" not in r.stdout
