"""Worker processes: timing and verification each run in their own process.

Timing and verification never share a process, and so never share a GPU context, with each
other or with the driver. The driver (parent) sends a :class:`Job` -- plain data: the
decided solution (:meth:`~miopen_solver.solver.Solution.to_record`: the spec with every
resolved value and the emitted kernel source), the backend name and the input recipe (PRNG
seed, bias, ``-D``/``-e`` files) -- and gets a plain record back. A worker validates,
chooses and emits nothing: it rebuilds the solution from its record, builds its own engine
(its own GPU context), regenerates the inputs from the recipe and caches them (and the
reference) across jobs of the same problem.

Start-up is bounded apart from the jobs: a new worker imports what it needs and says it is
ready (within :data:`STARTUP_TIMEOUT_S`, or ``$DGRAD_WORKER_STARTUP_TIMEOUT``); a job's
timeout counts from the moment the job is sent to a ready worker, so a slow interpreter
start on a busy machine never eats a job's time.

Roles (a worker serves one role only; a job of another role is refused):

``timing``        compile, warm up, time ``iters`` launches (GPU events, CPU wall clock);
                  never verifies.
``verification``  one launch into a NaN-poisoned dX, optional ``-o`` dumps, the reference
                  (GPU naive kernel or CPU float64) and MIOpen's verdict; never times. A
                  CPU reference bigger than one block (:data:`miopen_solver.reference.
                  BLOCK_BYTES`) is computed and compared block by block and not kept.
``probe``         which backend ``auto`` resolves to and the device's target; launches
                  nothing.

Failure handling (:class:`Worker`). A worker that

* raises: the job's result is failed with ``"<ExceptionType>: <message>"``;
* crashes (segfault, abort, GPU fault) or exits: failed with the exit signal or status and
  the most telling line of its stderr (``Fatal Python error: ...``);
* hangs past the timeout (:data:`DEFAULT_TIMEOUT_S`, or ``$DGRAD_WORKER_TIMEOUT``), or does
  not come up within the start-up bound: its whole process group is killed with SIGKILL and
  the result is failed as timed out.

After any failure the process is reaped and the next job starts a fresh one, so a crash
loses only the job that crashed. The driver never dies with a worker and never leaves one
running: workers are closed by context managers, killed at interpreter exit, run in their
own session and ignore SIGINT (a terminal's Ctrl-C reaches the driver, which kills them;
:mod:`driver.sigint`) and ask the kernel to SIGKILL them if the driver itself dies
(``PR_SET_PDEATHSIG``).

Test hooks (environment, read by the worker per job):

``DGRAD_WORKER_CRASH_CONFIG=<perf config>``
    the timing worker calls :func:`os.abort` when asked to time that config (a crash that
    the driver must survive; usable on a GPU too).
``DGRAD_WORKER_PRELOAD=<module or file.py>``
    imported by the worker before it serves (fault injection in tests).
"""

from __future__ import annotations

import atexit
import faulthandler
import fcntl
import importlib
import importlib.util
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import weakref
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import Connection

from .sigint import ignore_sigint

ROLES = ("timing", "verification", "probe")
DEFAULT_TIMEOUT_S = 300.0
"""Seconds a worker may take for one job (start-up not included) before it is killed."""
STARTUP_TIMEOUT_S = 120.0
"""Seconds a new worker may take to import its modules and say it is ready."""
TIMEOUT_ENV = "DGRAD_WORKER_TIMEOUT"
STARTUP_ENV = "DGRAD_WORKER_STARTUP_TIMEOUT"
CRASH_ENV = "DGRAD_WORKER_CRASH_CONFIG"
PRELOAD_ENV = "DGRAD_WORKER_PRELOAD"
CLOSE_GRACE_S = 5.0
"""Seconds a worker gets to exit after being asked to, before it is killed."""

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _env_seconds(name: str, default: float) -> float:
    """``$<name>`` as seconds when set (:func:`driver.options.check_timeout`), else ``default``.

    Raises:
        ValueError: set but not a finite number of seconds in (0, MAX_TIMEOUT_S]; one line
            naming the variable, its value and what is allowed.
    """
    from .options import UserError, check_timeout
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return check_timeout(raw, name, sep="=")
    except UserError as e:
        raise ValueError(str(e)) from None


def default_timeout() -> float:
    """``$DGRAD_WORKER_TIMEOUT`` when set, else :data:`DEFAULT_TIMEOUT_S`.

    Raises:
        ValueError: the variable is set but is not a finite number of seconds in
            (0, :data:`~driver.options.MAX_TIMEOUT_S`]; one line naming it and what is allowed.
    """
    return _env_seconds(TIMEOUT_ENV, DEFAULT_TIMEOUT_S)


def startup_timeout() -> float:
    """``$DGRAD_WORKER_STARTUP_TIMEOUT`` when set, else :data:`STARTUP_TIMEOUT_S`.

    Raises:
        ValueError: as :func:`default_timeout` does for its variable.
    """
    return _env_seconds(STARTUP_ENV, STARTUP_TIMEOUT_S)


def job_timeout(given: float | None = None) -> float:
    """The per-job timeout of a command (``--timeout``, else :func:`default_timeout`), with
    ``$DGRAD_WORKER_STARTUP_TIMEOUT`` checked too: both variables are read before any worker
    starts, so a bad value is bad input up front, never a failure midway.

    Raises:
        ValueError: a bad ``$DGRAD_WORKER_TIMEOUT`` (when ``given`` is None) or
            ``$DGRAD_WORKER_STARTUP_TIMEOUT``.
    """
    startup_timeout()
    return given if given is not None else default_timeout()


# --------------------------------------------------------------------- plain data


@dataclass(frozen=True)
class Job:
    """One job for a worker, as plain data (it crosses a process boundary).

    Attributes:
        role: ``timing``, ``verification`` or ``probe``.
        solution: :meth:`Solution.to_record` of the decided solution (None for a probe).
        backend: ``cpu``, ``cuda``, ``hip`` (or ``auto`` for a probe).
        seed, bias, dy_file, w_file: the input recipe (MIOpenDriver's PRNG, ``-b``,
            ``-D``, ``-e``; files are read by the worker).
        iters, warmup, graph: timing only (``graph``: time replays of a captured graph).
        verify, reference, dump: verification only (``reference`` ``"gpu"`` or ``"cpu"``;
            ``dump`` writes MIOpen's ``dump_*.bin`` files in the working directory).
    """

    role: str
    solution: dict | None = None
    backend: str = "cpu"
    seed: int = 0
    bias: bool = False
    dy_file: str | None = None
    w_file: str | None = None
    iters: int = 10
    warmup: int = 1
    graph: bool = False
    verify: bool = True
    reference: str = "cpu"
    dump: bool = False

    @property
    def perf_config(self) -> str:
        """The solution's perf config (``""`` for a probe)."""
        return self.solution["perf_config"] if self.solution else ""


def make_job(role: str, *, solution=None, backend: str, seed: int = 0, bias: bool = False,
             dy_file: str | None = None, w_file: str | None = None, iters: int = 10, warmup: int = 1,
             graph: bool = False, verify: bool = True, reference: str = "cpu", dump: bool = False) -> Job:
    """A :class:`Job` for a worker of ``role``; ``solution`` is a
    :class:`~miopen_solver.solver.Solution` (sent as its record, source included) or its record.

    Raises:
        ValueError: an unknown role (a programming error).
    """
    if role not in ROLES:
        raise ValueError(f"unknown worker role {role!r}; known: {', '.join(ROLES)}")
    rec = solution if solution is None or isinstance(solution, dict) else solution.to_record()
    return Job(role=role, solution=rec, backend=backend, seed=int(seed), bias=bool(bias), dy_file=dy_file,
               w_file=w_file, iters=int(iters), warmup=int(warmup), graph=bool(graph), verify=bool(verify),
               reference=reference, dump=bool(dump))


@dataclass
class WorkerResult:
    """What came back for one job.

    Attributes:
        ok: the worker replied with a record.
        record: the worker's reply (plain data); empty when failed.
        failure: ``""``, ``"raised"``, ``"crashed"`` (died: signal or exit status) or
            ``"timeout"``.
        reason: one line saying what went wrong (empty when ok).
        exit_code: the worker's exit status when it died (negative: killed by a signal).
        signal: the signal's name (``"SIGABRT"``) when it was killed by one.
        pid: the worker process that ran the job.
        seconds: wall time from sending the job to the reply (or the failure).
        traceback: the worker's traceback when it raised.
    """

    ok: bool
    record: dict = field(default_factory=dict)
    failure: str = ""
    reason: str = ""
    exit_code: int | None = None
    signal: str | None = None
    pid: int | None = None
    seconds: float = 0.0
    traceback: str = ""

    @property
    def error_type(self) -> str:
        """The exception class name when the worker raised, else ``""``."""
        return self.reason.split(":", 1)[0] if self.failure == "raised" else ""

    def as_dict(self) -> dict:
        """Plain data (JSON-ready), without the traceback."""
        d = asdict(self)
        d.pop("traceback")
        return d


def _signal_name(code: int | None) -> str | None:
    if code is None or code >= 0:
        return None
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def _stderr_summary(text: str) -> str:
    """The most telling line of a dead worker's stderr: a ``Fatal Python error`` line, else
    the last non-blank line (shortened)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in lines:
        if ln.startswith("Fatal Python error"):
            return ln[:300]
    return lines[-1][:300] if lines else ""


# --------------------------------------------------------------------- parent side
def kill_group(proc) -> None:
    """SIGKILL a child started in a session of its own: its process group (it and anything
    it started), else the child alone."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            proc.kill()
        except ProcessLookupError:
            pass


_LIVE: "weakref.WeakSet[Worker]" = weakref.WeakSet()


@atexit.register
def _kill_all() -> None:  # pragma: no cover - exercised at interpreter exit
    for w in list(_LIVE):
        w.close(kill=True)



def _pipe() -> tuple:
    """``os.pipe()`` with both descriptors above 2: where the driver runs with stdin, stdout
    or stderr closed (``>&-``), a pipe would take that number and the child's
    ``stdout=``/``stderr=`` redirection would overwrite its end."""
    fds = os.pipe()
    if min(fds) > 2:
        return fds
    high = tuple(fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3) for fd in fds)
    for fd in fds:
        os.close(fd)
    return high

class Worker:
    """One worker process of one role, serving jobs one at a time; (re)started on demand.

    Use as a context manager (``with Worker("timing") as w: w.run(job)``) or call
    :meth:`close`. A failed job (raised, crashed, timed out) ends the process; the next
    :meth:`run` starts a fresh one.

    Args:
        role: ``timing``, ``verification`` or ``probe``.
        timeout: seconds per job, start-up included (default :func:`default_timeout`).
        env: variables set (value str) or removed (value None) in the child's environment,
            e.g. ``{"CUDA_VISIBLE_DEVICES": "2"}`` to pin it to one GPU.
    """

    def __init__(self, role: str, *, timeout: float | None = None, env: dict | None = None):
        if role not in ROLES:
            raise ValueError(f"unknown worker role {role!r}; known: {', '.join(ROLES)}")
        self.role = role
        self.timeout = float(timeout) if timeout is not None else default_timeout()
        self.env = dict(env or {})
        self._proc = None
        self._tx = self._rx = None
        self._err = None
        self._lock = threading.Lock()
        self.started = 0
        """How many processes this worker has started (restarts after failures count)."""
        _LIVE.add(self)

    # ------------------------------------------------------------- lifecycle
    @property
    def pid(self) -> int | None:
        """The live process's id, or None."""
        return self._proc.pid if self._proc is not None else None

    def start(self) -> None:
        """Start the process if none is running."""
        if self._proc is not None:
            return
        env = dict(os.environ)
        for name, value in self.env.items():
            if value is None:
                env.pop(name, None)
            else:
                env[name] = str(value)
        env["PYTHONPATH"] = os.pathsep.join([_ROOT] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
        with self._lock:                # a kill from another thread sees the whole process or none of it
            self._spawn(env)

    def _spawn(self, env: dict) -> None:
        r_child, w_parent = _pipe()
        r_parent, w_child = _pipe()
        self._err = tempfile.TemporaryFile()
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "driver.workers", self.role, str(r_child), str(w_child), str(os.getpid())],
                pass_fds=(r_child, w_child), stdin=subprocess.DEVNULL, stdout=self._err, stderr=self._err,
                env=env, start_new_session=True, close_fds=True)
        except BaseException:
            for fd in (w_parent, r_parent):
                os.close(fd)
            self._err.close()
            self._err = None
            raise
        finally:
            os.close(r_child)
            os.close(w_child)
        self._tx = Connection(w_parent, readable=False)
        self._rx = Connection(r_parent, writable=False)
        self.started += 1

    def _read_stderr(self) -> str:
        if self._err is None:
            return ""
        try:
            self._err.seek(0)
            return self._err.read()[-20000:].decode("utf-8", "replace")
        except (OSError, ValueError):
            return ""

    def _reap(self, kill: bool) -> int | None:
        """End the process (SIGKILL to its group when ``kill`` or when it will not exit),
        wait for it, close the pipes; returns its exit status (None when another thread
        reaps it: a Ctrl-C's kill and the runner's own may race)."""
        with self._lock:
            proc, conns, err = self._proc, (self._tx, self._rx), self._err
            self._proc = self._tx = self._rx = self._err = None
        code = None
        if proc is not None:
            if kill and proc.poll() is None:
                kill_group(proc)
            try:
                code = proc.wait(timeout=CLOSE_GRACE_S)
            except subprocess.TimeoutExpired:
                kill_group(proc)
                code = proc.wait()
        for conn in conns:
            if conn is not None:
                conn.close()
        if err is not None:
            err.close()
        return code

    def close(self, kill: bool = False) -> None:
        """Ask the process to exit (kill it when ``kill``, or when it does not exit within
        :data:`CLOSE_GRACE_S`) and reap it. Safe to call twice."""
        if self._proc is None:
            return
        if not kill:
            try:
                self._tx.send(None)
            except (OSError, ValueError):
                kill = True
        self._reap(kill)

    def __enter__(self) -> "Worker":
        return self

    def __exit__(self, *exc) -> None:
        self.close(kill=exc[0] is not None)

    def __del__(self):  # pragma: no cover - best effort
        try:
            self.close(kill=True)
        except Exception:
            pass

    # ------------------------------------------------------------- one job
    def run(self, job: Job) -> WorkerResult:
        """Send one job and wait (at most :attr:`timeout` seconds) for its record.

        Never raises for what the worker does: a raise, a crash or a hang comes back as a
        failed :class:`WorkerResult` and the process is gone afterwards.

        Raises:
            ValueError: the job is for another role (a programming error).
        """
        if job.role != self.role:
            raise ValueError(f"a {self.role} worker does not run {job.role!r} jobs")
        t0 = time.perf_counter()
        fresh = self._proc is None
        try:
            self.start()
        except OSError as e:
            return WorkerResult(ok=False, failure="crashed", seconds=time.perf_counter() - t0,
                                reason=f"{self.role} worker could not start: {e}")
        pid = self.pid
        try:
            if fresh:                      # the job's clock starts once the worker is ready
                limit = startup_timeout()
                if not self._rx.poll(limit):
                    code = self._reap(kill=True)
                    return WorkerResult(
                        ok=False, failure="timeout", exit_code=code, signal=_signal_name(code), pid=pid,
                        seconds=time.perf_counter() - t0,
                        reason=f"{self.role} worker (pid {pid}) did not start within {limit:g} s "
                               f"(${STARTUP_ENV}); killed with SIGKILL")
                self._rx.recv()            # the ready message
            self._tx.send(job)
            if not self._rx.poll(self.timeout):
                code = self._reap(kill=True)
                _remove_dump_temps(job, pid)
                return WorkerResult(
                    ok=False, failure="timeout", exit_code=code, signal=_signal_name(code), pid=pid,
                    seconds=time.perf_counter() - t0,
                    reason=f"{self.role} worker (pid {pid}) timed out after {self.timeout:g} s; killed with SIGKILL")
            reply = self._rx.recv()
        except (EOFError, OSError):
            result = self._died(pid, t0)
            _remove_dump_temps(job, pid)
            return result
        seconds = time.perf_counter() - t0
        if reply.get("ok"):
            return WorkerResult(ok=True, record=reply["record"], pid=pid, seconds=seconds)
        self._reap(kill=True)      # a fresh process for the next job (a GPU error may be sticky)
        return WorkerResult(ok=False, failure="raised", reason=reply.get("error", "unknown error"),
                            traceback=reply.get("traceback", ""), pid=pid, seconds=seconds)

    def _died(self, pid: int, t0: float) -> WorkerResult:
        stderr = self._read_stderr()
        code = self._reap(kill=False)
        sig = _signal_name(code)
        how = f"killed by {sig} (exit status {code})" if sig else f"exited with status {code} without replying"
        tail = _stderr_summary(stderr)
        reason = f"{self.role} worker (pid {pid}) {how}" + (f"; stderr: {tail}" if tail else "")
        return WorkerResult(ok=False, failure="crashed", reason=reason, exit_code=code, signal=sig,
                            pid=pid, seconds=time.perf_counter() - t0)


def run_one(job: Job, *, timeout: float | None = None) -> WorkerResult:
    """Run one job in a fresh worker of the job's role and end it."""
    with Worker(job.role, timeout=timeout) as w:
        return w.run(job)


def probe(backend: str, *, timeout: float | None = None) -> WorkerResult:
    """Ask a probe worker what ``backend`` resolves to. Its record: ``backend`` (``cpu``,
    ``cuda`` or ``hip``), ``target`` (:meth:`Target.to_record`) and ``device`` (a name)."""
    job = make_job("probe", backend=backend)
    return run_one(job, timeout=timeout)


def memory_refusal(needs_for, n: int, *, n_flag: str = "-n", verify_flag: str | None = None, held: int = 0,
                   host=None) -> str | None:
    """Why the workers of a run would not fit this host's memory, and what would, as one line
    (``host memory: needs 9.31 GiB (...); 7.80 GiB available (MemAvailable); allowed: -n 24
    or smaller, or -V 0``); None when they fit. Checked before any worker starts.

    Args:
        needs_for: ``(N, verify) -> (total, needs)``: the workers' joint host peak (bytes,
            or a :class:`~miopen_solver.memory.Peak` of workers side by side, whose parts the
            line lists) and each worker's :class:`~miopen_solver.memory.Need` for the problem
            with ``-n N``, verifying or not.
        n: the problem's N; ``n_flag`` names the option that changes it.
        verify_flag: the option that turns verification off (None: it is off already).
        held: bytes the workers hold now and give back (counted as available).
        host: :class:`~miopen_solver.memory.HostMemory` (default: read now).
    """
    from miopen_solver import memory
    host = host or memory.host_memory()

    def why(count, verify):
        return memory.shortfall(host, *needs_for(count, verify), held=held)
    reason = why(n, True)
    if reason is None:
        return None
    allowed = []
    if n > 1 and why(1, True) is None:
        lo, hi = 1, n - 1                          # the largest N that fits (the need grows with N)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if why(mid, True) is None else (lo, mid - 1)
        allowed.append(f"{n_flag} {lo} or smaller")
    if verify_flag and why(n, False) is None:
        allowed.append(verify_flag)
    if not allowed:
        allowed.append(f"a smaller problem (even {n_flag} 1 does not fit)")
    return f"{reason}; allowed: {', or '.join(allowed)}"


def gpu_device_nodes() -> list:
    """Signs of a GPU on this machine that need no driver call: device nodes
    (``/dev/kfd``, ``/dev/nvidiactl``, ``/dev/nvidia0``) or a vendor tool on PATH
    (``nvidia-smi``, ``rocminfo``). With none, ``auto`` is the cpu engine without a probe."""
    import shutil
    found = [p for p in ("/dev/kfd", "/dev/nvidiactl", "/dev/nvidia0") if os.path.exists(p)]
    found += [t for t in ("nvidia-smi", "rocminfo") if shutil.which(t)]
    return found


# --------------------------------------------------------------------- worker side
class _State:
    """What a worker keeps between jobs: engines, the last problem's inputs and reference."""

    def __init__(self):
        self.engines = {}
        self.inputs_key = self.inputs = None
        self.ref_key = self.ref = None

    def engine(self, backend: str):
        """The engine for ``backend``, created once per worker (one GPU context)."""
        if backend not in self.engines:
            from miopen_solver.runtime import get_engine
            self.engines[backend] = get_engine(backend)
        return self.engines[backend]

    def problem_inputs(self, job: dict, problem):
        """dY and W of the job's input recipe, regenerated only when the recipe changes."""
        key = (repr(problem), job.seed, job.bias, job.dy_file, job.w_file)
        if key != self.inputs_key:
            from miopen_solver import layouts, prng
            self.inputs_key = self.inputs = self.ref_key = self.ref = None   # freed before the new ones
            st = layouts.storage_dtype(problem.dtype)
            dy = w = None
            if job.dy_file:
                dy = _read_tensor(job.dy_file, layouts.dy_shape(problem), st, "-D")
            if job.w_file:
                w = _read_tensor(job.w_file, layouts.w_shape(problem), st, "-e")
            self.inputs = prng.generate_inputs(problem, job.seed, bias=job.bias, dy=dy, w=w)
            self.inputs_key = key
        return self.inputs


def _read_tensor(path: str, shape: tuple, dtype, flag: str):
    import numpy as np
    from miopen_solver.fileio import read_bytes
    count = 1
    for s in shape:
        count *= s
    data = np.frombuffer(read_bytes(path, count * np.dtype(dtype).itemsize, "raw tensor file"), dtype=dtype)
    if data.size != count:
        raise ValueError(f"{flag} {path}: holds {data.size} elements; the problem needs {count}")
    return data.reshape(shape)


def _solution(job: Job):
    """The decided solution from its record (:meth:`Solution.from_record`: checked against what
    the problem, target and config it names resolve to; nothing is chosen)."""
    from miopen_solver.solver import Solution
    return Solution.from_record(job.solution)


def _check_device(engine, spec) -> None:
    """A GPU engine must be the device the job was resolved for."""
    if engine.name == "cpu":
        return
    have = engine.target.arch
    if have != spec.target.arch:
        raise RuntimeError(f"the {engine.name} device is {have}; the job was built for {spec.target.arch}")


def _crash_hook(perf_config: str) -> None:
    """``$DGRAD_WORKER_CRASH_CONFIG``: abort when asked to time that config (test hook)."""
    want = os.environ.get(CRASH_ENV, "").strip()
    if not want:
        return
    from miopen_solver.config import PerfConfig
    from miopen_solver.errors import PerfConfigError
    try:
        hit = PerfConfig.parse(want) == PerfConfig.parse(perf_config)
    except PerfConfigError:
        hit = want == perf_config
    if hit:
        sys.stderr.write(f"{CRASH_ENV}={want}: aborting on purpose\n")
        sys.stderr.flush()
        os.abort()


GRAPH_RUNS = 20
"""Runs captured in the graph a ``-J 1`` timing replays (each replay's time / GRAPH_RUNS is one
entry; the wall-clock average divides by every run the timing made)."""


def _do_timing(job: Job, state: _State) -> dict:
    sol = _solution(job)
    spec = sol.spec
    engine = state.engine(job.backend)
    _check_device(engine, spec)
    _crash_hook(job.perf_config)
    inp = state.problem_inputs(job, sol.problem)        # the whole batch (spec: one launch's)
    iters, warmup = job.iters, job.warmup
    built = engine.build(sol)                    # compile outside the wall-clock window
    t0 = time.perf_counter()
    if job.graph and engine.supports_graphs:
        timing = engine.time_graph(sol, inp.dy, inp.w, launches=GRAPH_RUNS, replays=iters)
        launches = 1 + GRAPH_RUNS * (iters + 1)     # one eager run, a warm replay, the timed replays
    else:
        timing = engine.time(sol, inp.dy, inp.w, iters=iters, warmup=warmup)
        launches = iters + warmup
    wall_ms = (time.perf_counter() - t0) * 1e3 / max(1, launches)
    return {"kernel_name": sol.kernel_name, "times_ms": [float(t) for t in timing.times_ms],
            "method": timing.method, "compile_ms": float(timing.compile_ms),
            "cache_hit": bool(timing.cache_hit), "wall_ms": wall_ms, "iters": iters, "launches": launches,
            "warmup": 0 if job.graph and engine.supports_graphs else warmup, "backend": engine.name,
            "pid": os.getpid(), "resources": built.resources, "warnings": list(timing.warnings),
            "visible_devices": _visible_devices()}


def _visible_devices() -> str | None:
    """The GPUs this process may see (``$CUDA_VISIBLE_DEVICES``, else ``$HIP_VISIBLE_DEVICES``)."""
    return os.environ.get("CUDA_VISIBLE_DEVICES", os.environ.get("HIP_VISIBLE_DEVICES"))


DUMP_DIR_ALLOWED = "a writable working directory"
"""Where ``-o 1``'s ``dump_*.bin`` files go (MIOpenDriver writes them into the working
directory), as an error's ``allowed:`` phrase says it."""


def dump_names(verify: bool, reference: str | None) -> tuple:
    """The ``dump_*.bin`` files a verification job with ``dump`` writes, in order (MIOpen's
    names; the CPU reference's dX only when it verifies on the CPU reference)."""
    return ("dump_wei.bin", "dump_dout.bin", "dump_bwd_din_gpu.bin") + \
        (("dump_bwd_din_cpu.bin",) if verify and reference == "cpu" else ())


def _remove_dump_temps(job: Job, pid: int | None) -> None:
    """The temporary files of ``-o 1`` dump writes that worker ``pid`` did not finish (it was
    killed or died): removed from the working directory, where the dumps go."""
    if pid is not None and job.dump:
        from miopen_solver.fileio import remove_temps
        remove_temps(os.getcwd(), dump_names(bool(job.verify), job.reference), pid)


def _do_verification(job: Job, state: _State) -> dict:
    import numpy as np
    from miopen_solver.fileio import write_bytes
    from miopen_solver import reference as ref_mod
    sol = _solution(job)
    spec = sol.spec
    problem = sol.problem                           # the whole batch (spec: one launch's)
    engine = state.engine(job.backend)
    _check_device(engine, spec)
    inp = state.problem_inputs(job, problem)
    dumps = []

    def dump(path, arr):
        from miopen_solver.errors import FileError
        try:
            write_bytes(path, np.ascontiguousarray(arr).tobytes())
        except FileError as e:      # -o 1 always writes into the working directory
            raise FileError(e.path, e.reason, f"-o 0, or room for the dump_*.bin files in {DUMP_DIR_ALLOWED}",
                            e.errno) from None
        dumps.append(path)
    names = dump_names(bool(job.verify), job.reference)
    if job.dump:
        dump(names[0], inp.w)
        dump(names[1], inp.dy)
    dx = engine.run(sol, inp.dy, inp.w)
    if job.dump:
        dump(names[2], dx)
    rec = {"kernel_name": sol.kernel_name, "dumps": dumps, "backend": engine.name, "pid": os.getpid(),
           "verdict": None, "reference": None, "launches": 1}
    if job.verify:
        kind = job.reference
        if kind == "cpu" and not job.dump and ref_mod.block_shape(problem) != (problem.N, problem.Hi):
            # too big to hold beside the tensors: computed and compared block by block, per job
            state.ref_key = state.ref = None
            verdict = ref_mod.verify_reference(problem, dx, inp.dy, inp.w, sol.tolerance)
        else:                   # (-o 1 dumps the whole reference, so it is computed whole)
            if state.ref_key != kind:
                state.ref_key = state.ref = None
                if kind == "gpu":
                    state.ref = engine.reference(problem, inp.dy, inp.w)
                else:
                    state.ref = ref_mod.dgrad_reference(problem, inp.dy, inp.w)
                state.ref_key = kind
            verdict = ref_mod.verify(problem, dx, state.ref, sol.tolerance)
        if job.dump and kind == "cpu":
            # MIOpen RunBackwardDataCPU: dumpBufferToFile<Tref> of din_host, i.e. float32 (Tref
            # of conv/convfp16/convbfp16) in dX's descriptor layout, as the reference holds it
            dump(names[3], np.asarray(state.ref, dtype=np.float32))
        rec["verdict"] = verdict.as_dict()
        rec["reference"] = "GPU" if kind == "gpu" else "CPU"
    return rec


def _do_probe(job: Job, state: _State) -> dict:
    engine = state.engine(job.backend)
    if engine.name == "cpu":
        return {"backend": "cpu", "target": engine.target.to_record(), "device": "cpu (numpy engine)"}
    return {"backend": engine.name, "target": engine.target.to_record(), "device": engine.rt.device_name()}


_HANDLERS = {"timing": _do_timing, "verification": _do_verification, "probe": _do_probe}


def _die_with_parent(parent_pid: int) -> None:
    """Linux: SIGKILL this process when the driver dies (best effort elsewhere)."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL))          # PR_SET_PDEATHSIG
    except Exception:  # pragma: no cover - not Linux
        pass
    if os.getppid() != parent_pid:                   # the driver died before prctl
        os._exit(1)


def _preload(what: str) -> None:
    """Import ``what``: a module name, or a ``.py`` file path (test hook)."""
    if not what:
        return
    if what.endswith(".py"):
        spec = importlib.util.spec_from_file_location("_dgrad_worker_preload", what)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    else:
        importlib.import_module(what)


def serve(role: str, rfd: int, wfd: int, parent_pid: int) -> int:
    """The worker's loop: receive a job, reply with ``{"ok": True, "record": ...}`` or
    ``{"ok": False, "error": "Type: message", "traceback": ...}``; exit on ``None`` or when
    the driver's end of the pipe closes. SIGINT is ignored: a Ctrl-C is the driver's."""
    ignore_sigint()
    _die_with_parent(parent_pid)
    os.dup2(2, 1)                  # stray prints go to the captured stderr, never the driver's stdout
    faulthandler.enable()
    rx = Connection(rfd, writable=False)
    tx = Connection(wfd, readable=False)
    _preload(os.environ.get(PRELOAD_ENV, "").strip())
    importlib.import_module("miopen_solver.solver")  # the heavy imports happen before "ready"
    if role != "probe":
        importlib.import_module("miopen_solver.runtime.cpu")
    state = _State()
    handler = _HANDLERS[role]
    tx.send({"ready": os.getpid()})
    while True:
        try:
            job = rx.recv()
        except (EOFError, OSError):
            return 0
        if job is None:
            return 0
        try:
            if job.role != role:
                raise ValueError(f"a {role} worker does not run {job.role!r} jobs")
            reply = {"ok": True, "record": handler(job, state)}
        except Exception as e:  # every failure goes back as data
            reply = {"ok": False, "error": f"{type(e).__name__}: {' '.join(str(e).split())}",
                     "traceback": traceback.format_exc(limit=20)}
        tx.send(reply)


if __name__ == "__main__":
    sys.exit(serve(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])))
