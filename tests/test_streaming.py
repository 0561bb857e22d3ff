"""Output a user does not lose (issue: piped stdout is block-buffered, so ``| tee`` showed
nothing until the end and a Ctrl-C lost the lines already "printed").

``batch`` and ``tune`` print each row's line as soon as the row has finished, flushed:

* in-process, with workers that only record their jobs: every row's line reaches the
  ``emit`` callback before the next row's first job starts (and before the function
  returns, which returns only the summary);
* in a real process with stdout a pipe: the first row's line arrives while the second row
  hangs in its worker, and after a SIGINT (exit 130) it is still in the output.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import ROOT
from driver import tune_cmd, workers
from driver.batch_cmd import BatchOptions, batch_file
from driver.tune_cmd import TuneOptions, tune_line
from miopen_solver import prng
from miopen_solver.command import parse
from miopen_solver.perfdb import ENV_VAR as PERFDB_ENV
from miopen_solver.solver import DgradSolver
from miopen_solver.target import get_target

NHWC = "--in_layout NHWC --out_layout NHWC --fil_layout NHWC"
FAULTS = os.path.join(ROOT, "tests", "worker_faults.py")


def line(n):
    return f"convfp16 -n {n} -c 4 -H 5 -W 5 -k 8 -y 3 -x 3 -p 1 -q 1 -F 2 -t 1 -i 2 {NHWC}"


@pytest.fixture(autouse=True)
def env(monkeypatch, tmp_path):
    for name in (prng.SEED_ENV, workers.CRASH_ENV, workers.PRELOAD_ENV, workers.TIMEOUT_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(PERFDB_ENV, str(tmp_path / "perfdb.sqlite"))


@pytest.fixture
def events(monkeypatch):
    """Workers that start no process: each job is recorded as ("job", role, N or config)
    and answered with a plain record; ``emit`` records ("line", text) in the same list."""
    log = []

    def run(self, job):
        log.append(("job", job.role, job.solution["spec"]["problem"]["N"], job.perf_config))
        if job.role == "timing":
            return workers.WorkerResult(ok=True, record={"times_ms": [0.5, 0.25, 0.25], "compile_ms": 0.0})
        return workers.WorkerResult(ok=True, record={"verdict": {"ok": True, "error": 1e-6, "tolerance": 0.082},
                                                     "reference": "CPU"})
    monkeypatch.setattr(workers.Worker, "run", run)
    return log


def test_batch_rows_arrive_as_each_line_finishes(events, tmp_path):
    path = tmp_path / "lines.txt"
    path.write_text("".join(line(n) + "\n" for n in (1, 2, 3)))
    status, rest = batch_file(str(path), BatchOptions(backend="cpu"), emit=lambda text: events.append(("line", text)))
    assert status == 0 and rest == ["Summary: 3 ok"]          # only the summary comes back at the end
    said = [e[1] for e in events if e[0] == "line"]
    assert said[0].startswith(f"Batch {path}: 3 commands on cpu") and said[1].split()[:2] == ["line", "problem_key"]
    # row n's line comes after its own jobs and before the next row's first job
    order = [("line", int(e[1].split()[0])) if e[0] == "line" else ("job", e[2])
             for e in events if e[0] == "job" or e[1].split()[0].isdigit()]
    assert order == [("job", 1), ("job", 1), ("line", 1), ("job", 2), ("job", 2), ("line", 2),
                     ("job", 3), ("job", 3), ("line", 3)]
    # without emit, the same lines come back in the same order
    events.clear()
    status, lines = batch_file(str(path), BatchOptions(backend="cpu"))
    assert lines[:len(said)] == said and lines[len(said):] == ["Summary: 3 ok"]


def test_tune_rows_arrive_as_each_config_finishes(events):
    tokens = line(2).split()
    p = parse(tokens).problem
    configs = [c.serialize() for c in tune_cmd.select_configs(list(DgradSolver().search(p, get_target("cpu"))), 3)]
    status, rest = tune_line(tokens, TuneOptions(backend="cpu", max_configs=3, verify_top=2, store=False),
                             emit=lambda text: events.append(("line", text)))
    assert status == 0
    order = [(e[1], e[3]) if e[0] == "job" else ("line", e[1].split()[0], e[1].split()[1].rstrip(":"))
             for e in events if e[0] == "job" or e[1].startswith(("Timed ", "Verified "))]
    timed = [("timing", c) for c in configs]
    assert order[:6] == [x for c in configs for x in (("timing", c), ("line", "Timed", c))] and timed
    # the two fastest are verified (all equal times: sweep order), each line after its job
    assert order[6:] == [("verification", configs[0]), ("line", "Verified", configs[0]),
                         ("verification", configs[1]), ("line", "Verified", configs[1])]
    said = [e[1] for e in events if e[0] == "line"]
    assert said[0].startswith("MIOpenDriver convfp16") and said[2].startswith("Tuning ")
    assert rest[0] == "Timed 3 configs in " + rest[0].split("Timed 3 configs in ")[1] and rest[-1].startswith("Winner ")
    assert not any(x.startswith(("Timed 1", "Failed ", "Verified 1")) for x in rest)     # nothing printed twice


def test_json_tune_prints_one_record_at_the_end(events):
    status, lines = tune_line(line(2).split(), TuneOptions(backend="cpu", max_configs=2, verify_top=1, store=False,
                                                           as_json=True), emit=lambda text: events.append(("line", text)))
    assert status == 0 and len(lines) == 1 and lines[0].startswith("{")
    assert not any(e[0] == "line" for e in events)


def test_a_row_clears_the_progress_line_first(events, tmp_path):
    """stderr and stdout on one terminal: the \\r progress line is erased before a row is
    printed, so the row does not land in the middle of it."""
    import io
    path = tmp_path / "lines.txt"
    path.write_text(line(1) + "\n")
    both = io.StringIO()

    def say(text):
        both.write(text + "\n")
    batch_file(str(path), BatchOptions(backend="cpu", progress=True), stderr=both, emit=say)
    text = both.getvalue()
    before = text[:text.index("   1  ")].split("\r")       # the row starts at the beginning of the line
    assert before[-3].startswith("batch [0/1] failed 0") and before[-2] == " " * len(before[-3]) and before[-1] == ""


# ------------------------------------------------------------------ a real pipe and Ctrl-C
def _default_config(text):
    p = parse(text.split()).problem
    return DgradSolver().get_default_performance_config(p, get_target("cpu")).serialize()


def _interrupt_after(args, env, tmp_path, wanted):
    """Start the driver with stdout a pipe, wait for a stdout line satisfying ``wanted``,
    send SIGINT, and return (exit status, every stdout line, stderr)."""
    proc = subprocess.Popen([sys.executable, "-m", "driver", *args], env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    lines = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout], daemon=True)
    reader.start()
    seen = []
    try:
        deadline = time.time() + 120
        while not any(wanted(x) for x in seen):
            assert time.time() < deadline and proc.poll() is None, (seen, proc.poll())
            try:
                seen.append(lines.get(timeout=0.5).rstrip("\n"))
            except queue.Empty:
                pass
        proc.send_signal(signal.SIGINT)
        err = proc.stderr.read()
        proc.wait(timeout=60)
        reader.join(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    while not lines.empty():
        seen.append(lines.get().rstrip("\n"))
    return proc.returncode, seen, err


@pytest.mark.parametrize("mode", ["batch", "tune"])
def test_ctrl_c_keeps_the_rows_already_printed(tmp_path, mode):
    """The second row hangs in its timing worker; the first row's line has reached the
    pipe by then, and stays in the output after the SIGINT (exit 130)."""
    first, second = line(1), line(1).replace("-c 4", "-c 64").replace("-k 8", "-k 64")
    env = dict(os.environ, PYTHONPATH=ROOT, DGRAD_WORKER_PRELOAD=FAULTS, DGRAD_TEST_FAULT="hang",
               DGRAD_TEST_FAULT_IN="time", **{PERFDB_ENV: str(tmp_path / "p.sqlite")})
    if mode == "batch":
        assert _default_config(first) != _default_config(second)
        env["DGRAD_TEST_FAULT_CONFIG"] = _default_config(second)
        (tmp_path / "lines.txt").write_text(f"{first}\n{second}\n")
        args = ["batch", "lines.txt", "--backend", "cpu", "--no-verify"]

        def wanted(x):
            return x.split()[:1] == ["1"]
    else:
        p = parse(first.split()).problem
        configs = tune_cmd.select_configs(list(DgradSolver().search(p, get_target("cpu"))), 2)
        env["DGRAD_TEST_FAULT_CONFIG"] = configs[1].serialize()
        args = ["tune", *first.split(), "--backend", "cpu", "--max-configs", "2", "--no-perfdb"]

        def wanted(x):
            return x.startswith(f"Timed {configs[0].serialize()}: ")
    status, out, err = _interrupt_after(args, env, tmp_path, wanted)
    assert status == 130 and err.splitlines() == ["dgrad-driver: interrupted"]
    row = [x for x in out if wanted(x)]
    assert len(row) == 1 and (row[0].split()[-1] == "ok" if mode == "batch" else " ms (median " in row[0])
    assert not any(x.startswith("Summary:") or x.startswith("Timed 2 configs") for x in out)


# ------------------------------------------------------------------ a plain run's header
RUN_FORMS = {"time_and_verify": f"-t 1 -V 1 {NHWC}", "time_only": f"-t 1 -V 0 {NHWC}",
             "verify_only": f"-t 0 -V 1 {NHWC}", "immediate": f"-t 1 -V 1 -S 0 {NHWC}", "nchw": "-t 1 -V 1"}


@pytest.fixture
def run_events(events, monkeypatch):
    """:func:`events` with the records a plain run reads (a full verdict, the worker's pid)."""
    def run(self, job):
        events.append(("job", job.role, job.solution["spec"]["problem"]["N"], job.perf_config))
        if job.role == "timing":
            return workers.WorkerResult(ok=True, record={"times_ms": [0.5, 0.25, 0.25], "compile_ms": 0.0,
                                                         "method": "wall", "wall_ms": 0.3, "launches": 3})
        verdict = {"ok": True, "error": 1e-6, "tolerance": 0.082, "elements": 1, "nonfinite": 0, "max_abs_diff": 0.0}
        return workers.WorkerResult(ok=True, record={"verdict": verdict, "reference": "CPU", "pid": 1, "dumps": [],
                                                     "launches": 1})
    monkeypatch.setattr(workers.Worker, "run", run)
    return events


@pytest.mark.parametrize("form", sorted(RUN_FORMS))
def test_a_runs_header_is_emitted_before_any_worker_starts(run_events, form):
    from driver.run_cmd import RunOptions, run_line
    events = run_events
    tokens = (line(2).replace("-t 1 ", "").replace(NHWC, "") + " " + RUN_FORMS[form]).split()
    status, rest = run_line(tokens, RunOptions(backend="cpu", use_perfdb=False),
                            emit=lambda text: events.append(("line", text)))
    assert status == 0
    first_job = next(i for i, e in enumerate(events) if e[0] == "job")
    said = [e[1] for e in events[:first_job]]
    assert all(e[0] == "job" for e in events[first_job:])                # nothing emitted once workers run
    assert said[0].startswith("MIOpenDriver convfp16") and said[1].startswith("PRNG seed: ")
    if "-t 1" in RUN_FORMS[form]:
        assert said[2].startswith("Timestamp: ")
    if form == "nchw":
        assert any(x.startswith("Layout: ") for x in said)
    assert not any(x.startswith(("GPU Kernel Time", "Backward Convolution Data", "stats:")) for x in said)
    events.clear()                      # without emit: the same lines, in the same order
    status, whole = run_line(tokens, RunOptions(backend="cpu", use_perfdb=False))
    assert whole == said + rest


def test_a_run_that_fails_its_checks_emits_nothing(events, tmp_path):
    from driver.options import UserError
    from driver.run_cmd import RunOptions, run_line
    tokens = line(2).split() + ["-D", str(tmp_path / "missing.bin")]
    with pytest.raises(UserError):
        run_line(tokens, RunOptions(backend="cpu"), emit=lambda text: events.append(("line", text)))
    assert events == []


def test_compile_only_emits_the_header_before_compiling(monkeypatch, no_workers):
    from driver import run_cmd
    said = []

    def fake_compile(solution):
        said.append("compiling")
        return 0, ["Kernel: k"], {}
    monkeypatch.setattr(workers, "gpu_device_nodes", lambda: [])
    monkeypatch.setattr(run_cmd, "compile_only", fake_compile)
    status, rest = run_cmd.run_line(line(2).split(), run_cmd.RunOptions(arch="gfx942", use_perfdb=False),
                                    emit=said.append)
    assert status == 0 and said[0].startswith("MIOpenDriver ") and said[-1] == "compiling" and rest == ["Kernel: k"]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_killed_run_keeps_its_header(tmp_path, sig):
    """The timing worker hangs; the header lines have reached the pipe, and stay after
    Ctrl-C (exit 130) or SIGTERM."""
    env = dict(os.environ, PYTHONPATH=ROOT, DGRAD_WORKER_PRELOAD=FAULTS, DGRAD_TEST_FAULT="hang",
               DGRAD_TEST_FAULT_IN="time", **{PERFDB_ENV: str(tmp_path / "p.sqlite")})
    proc = subprocess.Popen([sys.executable, "-m", "driver", *line(1).split(), "--backend", "cpu"], env=env,
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        head = [proc.stdout.readline().rstrip("\n") for _ in range(3)]     # they arrive while the worker hangs
        assert head[0].startswith("MIOpenDriver convfp16"), (head, proc.poll())
        assert head[1].startswith("PRNG seed: ") and head[2].startswith("Timestamp: "), head
        proc.send_signal(sig)
        out = proc.stdout.read()
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    lines = head + out.splitlines()
    assert not any(x.startswith("GPU Kernel Time") for x in lines)
    if sig == signal.SIGINT:
        assert proc.returncode == 130
