"""Where a tuning campaign's jobs run: one timing worker per GPU on this host, or one Dask
worker per GPU on many hosts.

A *slot* is one GPU (or, with ``--backend cpu``, one CPU timing worker posing as one): a
:class:`SlotRunner` owns that slot's timing worker and its verification worker
(:class:`driver.workers.Worker`, so crash and timeout isolation are the single-line tune's),
both pinned to the GPU with ``CUDA_VISIBLE_DEVICES``/``HIP_VISIBLE_DEVICES``. Timing and
verification stay in different processes. The runner's thread lives as long as the runner:
the workers ask to be killed when the thread that started them ends (``PR_SET_PDEATHSIG``),
so they are started and closed by that thread only.

Executors take :class:`Task` s and put ``(task, result)`` pairs on :attr:`results` as each
ends (the campaign is the single writer of the log and the perf-db):

* :class:`LocalExecutor` -- one runner per ``--gpus`` entry on this host. Scheduling is
  problem-major per slot: a slot keeps taking configs of the problem it is on (its worker
  keeps that problem's inputs), and when that problem runs out it moves to a problem no other
  slot is on (else the one with most configs left). Verification jobs go first. An optional
  :class:`CompilePool` compiles the next configs of each slot's problem into the kernel
  cache while the GPUs time.
* :class:`DaskExecutor` -- tasks go to a Dask cluster (``distributed``): one Dask worker per
  GPU, each offering the resource ``GPU=1``, and every task asks for it, so a worker times
  one config at a time; each Dask worker process runs one :class:`SlotRunner`. Without an
  address a :class:`distributed.LocalCluster` is started with one worker per ``--gpus``
  entry, each pinned to its GPU by a worker plugin (:class:`driver.dask_plugin.PinGpu`).
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import itertools
import json
import os
import queue
import re
import shutil
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass

from miopen_solver.text import json_text, shorten

from . import workers
from .options import UserError
from .sigint import ignore_sigint, sigint_blocked

PIN_VARS = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES")
GPU_RESOURCE = "GPU"
PROVENANCE_TIMEOUT_S = 120.0


def pin_env(gpu: str | None) -> dict:
    """The environment that pins a worker to ``gpu`` (nothing for None)."""
    return {} if gpu is None else {v: str(gpu) for v in PIN_VARS}


def available_gpus(backend: str) -> list:
    """The GPU ids ``--gpus all`` means: ``$CUDA_VISIBLE_DEVICES``/``$HIP_VISIBLE_DEVICES``
    when set, else the devices found without opening one (``/dev/nvidiaN``; the KFD topology
    nodes with a GPU; ``nvidia-smi -L``); on the cpu engine one per CPU core."""
    for var in PIN_VARS:
        raw = os.environ.get(var)
        if raw is not None and raw.strip():
            return [p.strip() for p in raw.split(",") if p.strip()]
    if backend == "cpu":
        return [str(i) for i in range(os.cpu_count() or 1)]
    found = []
    if os.path.isdir("/dev"):
        found = sorted(int(n[6:]) for n in os.listdir("/dev") if n.startswith("nvidia") and n[6:].isdigit())
    if not found and os.path.isdir("/sys/class/kfd/kfd/topology/nodes"):
        nodes = "/sys/class/kfd/kfd/topology/nodes"
        for n in sorted(os.listdir(nodes), key=lambda s: int(s) if s.isdigit() else 0):
            try:
                with open(os.path.join(nodes, n, "gpu_id")) as fh:
                    if fh.read().strip() not in ("", "0"):
                        found.append(len(found))
            except OSError:
                continue
    if not found and shutil.which("nvidia-smi"):
        try:
            listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
            found = [i for i, ln in enumerate(ln for ln in listed.splitlines() if ln.startswith("GPU "))]
        except (OSError, subprocess.TimeoutExpired):
            pass
    return [str(i) for i in found]


def parse_gpus(spec: str | None, backend: str) -> list:
    """``--gpus all|N|0,2,5`` -> the GPU ids, one slot each; None -> ``[None]`` (one slot,
    the environment as it is).

    Raises:
        UserError: anything else, or ``all`` with no GPU found.
    """
    if spec is None:
        return [None]
    allowed = ("allowed: all, a count N from 1 to 4096 (GPUs 0..N-1), or a list of two or more GPU ids such as "
               "0,2,5 (no repeats; one GPU by its id: CUDA_VISIBLE_DEVICES=ID with --gpus all)")
    text = spec.strip()
    if text == "all":
        ids = available_gpus(backend)
        if not ids:
            raise UserError(f"--gpus all: no GPU found on this host; {allowed} (with --backend cpu: CPU workers)")
        return ids
    if re.fullmatch(r"[0-9]+", text):
        shown = shorten(text)
        if len(text.lstrip("0")) > 4 or int(text) > 4096:      # by its length first: 5000 digits
            raise UserError(f"--gpus {shown}: a count of GPUs is out of range 1..4096; {allowed}")
        if int(text) == 0:
            raise UserError(f"--gpus {shown}: a single number is a count of GPUs, not an id; {allowed}")
        return [str(i) for i in range(int(text))]
    parts = [p.strip() for p in text.split(",")]
    if len(parts) < 2 or not all(re.fullmatch(r"[0-9]{1,6}", p) for p in parts) or len(set(map(int, parts))) != len(parts):
        raise UserError(f"--gpus {shorten(spec) if text else repr(spec)}: {allowed}")
    return [str(int(p)) for p in parts]


_ADDRESS = re.compile(r"(?:tcp://)?(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):(?P<port>[0-9]{1,5})\Z")
ADDRESS_ALLOWED = "allowed: tcp://HOST:PORT of a running 'dask scheduler' (PORT 1-65535)"


def check_address(address: str) -> str:
    """``--address``: a Dask scheduler's ``tcp://HOST:PORT`` (``HOST:PORT`` is the same;
    the TLS, UCX and in-process transports need settings this driver does not pass).

    Raises:
        UserError: anything else, naming the value and what is allowed.
    """
    m = _ADDRESS.match(address)
    if m is None or not 1 <= int(m["port"]) <= 65535:
        shown = address if address and len(address) <= 60 else repr(address[:57] + "..." if address else address)
        raise UserError(f"--address {shown}: {ADDRESS_ALLOWED}")
    return address


def slot_provenance(backend: str, env: dict | None = None, timeout: float = PROVENANCE_TIMEOUT_S,
                    started=None) -> dict:
    """:func:`miopen_solver.provenance.device_provenance` as seen by a process with ``env``
    (pinned to the slot's GPU): run in a child process, so the driver opens no GPU context.
    The child has a session of its own (a Ctrl-C is the driver's); ``started`` is called
    with its :class:`subprocess.Popen` (a runner kills it when interrupted). A failure is a
    record with ``"error"``."""
    child_env = dict(os.environ)
    for name, value in (env or {}).items():
        child_env[name] = str(value)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    child_env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in child_env.get("PYTHONPATH", "").split(os.pathsep) if p])
    try:
        proc = subprocess.Popen([sys.executable, "-m", "driver.executors", "provenance", backend],
                                env=child_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    except OSError as e:
        return {"error": f"provenance probe failed: {e}"}
    if started is not None:
        started(proc)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as e:
        workers.kill_group(proc)
        proc.communicate()
        return {"error": f"provenance probe failed: {e}"}
    if proc.returncode != 0:
        tail = (err.strip().splitlines() or ["no output"])[-1]
        return {"error": f"provenance probe exited with status {proc.returncode}: {tail[:300]}"}
    try:
        return json.loads(out)
    except ValueError:
        return {"error": "provenance probe printed no JSON"}


@dataclass(frozen=True)
class Task:
    """One job of a campaign: ``kind`` ``timing`` or ``verification``, the problem's key, the
    config and the worker job (:class:`driver.workers.Job`: plain data)."""

    kind: str
    problem: str
    perf_config: str
    job: workers.Job

    @property
    def kernel_sha(self) -> str | None:
        k = (self.job.solution or {}).get("kernels") or [{}]
        src = k[0].get("source") or {}
        return src.get("sha256")


# --------------------------------------------------------------------- one slot
class SlotRunner:
    """One slot's timing and verification workers, pinned with ``env``, served by one thread.

    :meth:`call` (from any thread) runs a job and returns the result as plain data:
    :meth:`WorkerResult.as_dict` plus ``slot``, ``host``, ``gpu`` and ``provenance`` (the
    slot's :func:`slot_provenance`, taken once, in the runner's thread, before the first job).
    """

    KILL_ROUNDS = 60
    """Half-second rounds :meth:`close` with ``kill`` waits for the thread, killing again."""

    def __init__(self, slot: str, gpu: str | None, timeout: float, env: dict | None, backend: str):
        self.slot, self.gpu, self.timeout, self.env, self.backend = slot, gpu, timeout, dict(env or {}), backend
        self.host = socket.gethostname()
        self.provenance = None
        self._inbox: queue.Queue = queue.Queue()
        self._workers = []
        self._probe = None
        self._lock = threading.Lock()
        self._closed = self._killed = False
        self._thread = threading.Thread(target=self._serve, name=f"slot-{slot}", daemon=True)
        self._thread.start()

    def call(self, kind: str, job: workers.Job) -> dict:
        """Run ``job``; after :meth:`close` it fails at once, unrun."""
        fut: concurrent.futures.Future = concurrent.futures.Future()
        with self._lock:
            closed = self._closed
            if not closed:
                self._inbox.put((kind, job, fut))
        return self._closed_result() if closed else fut.result()

    def _closed_result(self) -> dict:
        res = workers.WorkerResult(ok=False, failure="raised",
                                   reason=f"RuntimeError: slot {self.slot} closed before the job ran").as_dict()
        res.update(slot=self.slot, host=self.host, gpu=self.gpu, provenance=self.provenance)
        return res

    def _probe_started(self, proc) -> None:
        with self._lock:
            self._probe = proc
            killed = self._killed
        if killed:
            workers.kill_group(proc)

    def _serve(self) -> None:
        try:
            self.provenance = slot_provenance(self.backend, self.env, started=self._probe_started)
        except Exception as e:  # provenance is information: never a reason to stop the slot
            self.provenance = {"error": f"{type(e).__name__}: {e}"}
        tw = workers.Worker("timing", timeout=self.timeout, env=self.env)
        vw = workers.Worker("verification", timeout=self.timeout, env=self.env)
        self._workers = [tw, vw]
        try:
            while (item := self._inbox.get()) is not None:
                kind, job, fut = item
                if self._killed:
                    fut.set_result(self._closed_result())
                else:
                    fut.set_result(self._run(tw if kind == "timing" else vw, job))
        finally:
            tw.close(kill=True)
            vw.close(kill=True)

    def _run(self, worker: workers.Worker, job: workers.Job) -> dict:
        try:
            res = worker.run(job).as_dict()
        except BaseException as e:  # a programming error: the job fails, the slot goes on
            res = workers.WorkerResult(ok=False, failure="raised", reason=f"{type(e).__name__}: {e}").as_dict()
        res.update(slot=self.slot, host=self.host, gpu=self.gpu, provenance=self.provenance)
        return res

    def _kill_children(self) -> None:
        with self._lock:
            probe = self._probe
        if probe is not None and probe.poll() is None:
            workers.kill_group(probe)
        for w in list(self._workers):
            w.close(kill=True)       # a job in flight comes back as failed

    def close(self, kill: bool = False) -> None:
        """End the workers and the thread. With ``kill`` (Ctrl-C) the probe and the workers
        are killed, a job in flight comes back as failed and no queued job starts (a worker
        started in the meantime is killed on the next round)."""
        with self._lock:
            self._closed = True
            self._killed = self._killed or kill
            self._inbox.put(None)
        if not kill:
            self._thread.join(timeout=30)
            return
        for _ in range(self.KILL_ROUNDS):
            self._kill_children()
            self._thread.join(timeout=0.5)
            if not self._thread.is_alive():
                return


# --------------------------------------------------------------------- compile pool
class CompilePool:
    """Compiles kernels into the kernel cache in ``size`` CPU processes
    (:class:`concurrent.futures.ProcessPoolExecutor`) ahead of the timing workers.

    :meth:`ahead` queues kernels not queued before; :meth:`claim` is called when a task is
    handed to a GPU: a compile not started yet is cancelled (the timing worker compiles it
    itself rather than wait for a queue), one in progress is waited for (it finishes sooner
    than a fresh compile would), a finished one is a cache hit. :attr:`stats` counts them.
    The processes ignore SIGINT (:mod:`driver.sigint`): on Ctrl-C the driver ends them
    (:meth:`close` with ``kill``).
    """

    def __init__(self, size: int, backend: str, arch: str, fn=None, executor=None):
        import multiprocessing
        from miopen_solver.runtime.precompile import precompile
        self.size, self.backend, self.arch = size, backend, arch
        self._fn = fn or precompile
        self._pool = executor or concurrent.futures.ProcessPoolExecutor(
            max_workers=size, mp_context=multiprocessing.get_context("spawn"), initializer=ignore_sigint)
        self._futures: dict = {}
        self._lock = threading.Lock()
        self._closed = False
        self.stats = collections.Counter()

    def ahead(self, tasks) -> None:
        with self._lock, sigint_blocked():      # a process started here ignores SIGINT from birth
            for t in tasks:
                sha = t.kernel_sha
                if self._closed or t.kind != "timing" or sha is None or sha in self._futures:
                    continue
                src = t.job.solution["kernels"][0]["source"]
                try:
                    self._futures[sha] = self._pool.submit(self._fn, self.backend, self.arch, src)
                except RuntimeError:            # shut down, or broken (a process died): compile no more
                    self._closed = True
                    continue
                self.stats["queued"] += 1

    def claim(self, task) -> None:
        with self._lock:
            fut = self._futures.get(task.kernel_sha)
        if fut is None:
            self.stats["not_queued"] += 1
            return
        if fut.cancel():
            self.stats["cancelled"] += 1
            return
        was_done = fut.done()
        try:
            fut.result()
            self.stats["ready" if was_done else "waited"] += 1
        except BaseException:           # (a drive thread: a Ctrl-C is raised in the main thread only)
            self.stats["failed"] += 1      # the timing worker reports the compile error

    def close(self, kill: bool = False) -> None:
        """Queue nothing more and cancel the compiles not started; with ``kill`` (Ctrl-C)
        also kill the processes, so the compiles in progress end now (a claim waiting for
        one returns). Safe to call twice."""
        with self._lock:               # (the executor's process table: no public kill before Python 3.14)
            self._closed = True
            procs = list((getattr(self._pool, "_processes", None) or {}).values())
        self._pool.shutdown(wait=False, cancel_futures=True)
        if kill:
            for p in procs:
                with contextlib.suppress(ValueError, OSError):     # ended (and closed) already
                    p.kill()


# --------------------------------------------------------------------- local
class ProblemQueue:
    """The local executor's queue, problem-major per slot: :meth:`take` gives a slot a
    verification job when one waits, else the next config of the problem the slot is on,
    else the first problem (in submission order) that no other slot is on, else the one with
    most configs left. Not thread-safe (the executor holds its lock)."""

    def __init__(self, slots: int):
        self.timing: "collections.OrderedDict[str, collections.deque]" = collections.OrderedDict()
        self.verify: collections.deque = collections.deque()
        self.current = [None] * slots

    def add(self, task: Task) -> None:
        if task.kind == "verification":
            self.verify.append(task)
        else:
            self.timing.setdefault(task.problem, collections.deque()).append(task)

    def take(self, slot: int):
        if self.verify:
            return self.verify.popleft()
        cur = self.current[slot]
        if cur is not None and self.timing.get(cur):
            return self.timing[cur].popleft()
        others = {p for j, p in enumerate(self.current) if j != slot}
        left = [(p, dq) for p, dq in self.timing.items() if dq]
        if not left:
            return None
        free = [p for p, _ in left if p not in others]
        p = free[0] if free else max(left, key=lambda x: len(x[1]))[0]
        self.current[slot] = p
        return self.timing[p].popleft()

    def upcoming(self, problem: str, count: int) -> list:
        """The next ``count`` configs of ``problem`` (what a compile pool should build)."""
        return list(itertools.islice(self.timing.get(problem, ()), count))


class LocalExecutor:
    """One :class:`SlotRunner` per GPU id on this host (see module docstring)."""

    engine = "local"

    def __init__(self, gpus: list, timeout: float, backend: str, compile_pool: CompilePool | None = None):
        self.gpus = list(gpus)
        self.backend = backend
        self.results: queue.Queue = queue.Queue()
        self.compile_pool = compile_pool
        self._lookahead = 2 * compile_pool.size if compile_pool else 0
        self._cond = threading.Condition()
        self._queue = ProblemQueue(len(self.gpus))
        self._first = [None] * len(self.gpus)
        self._closed = False
        self.runners = [SlotRunner("local" if g is None else f"gpu{g}", g, timeout, pin_env(g), backend)
                        for g in self.gpus]
        self._threads = []
        self._ran = set()           # the slots that have taken a task

    @property
    def size(self) -> int:
        return len(self.runners)

    @property
    def used(self) -> int:
        """Slots that have run at least one task (a slot's workers start with its first)."""
        return len(self._ran)

    def describe(self) -> str:
        if self.gpus == [None]:
            return "Engine local: 1 worker"
        if self.backend == "cpu":       # --gpus N on the CPU engine: N CPU workers, no device to pin
            return f"Engine local: {len(self.gpus)} CPU worker slots"
        return f"Engine local: {len(self.gpus)} worker slots (visible device {', '.join(self.gpus)})"

    def submit(self, task: Task) -> None:
        with self._cond:
            self._queue.add(task)
            self._cond.notify_all()

    def start(self) -> None:
        """Hand each slot its first task (so every slot has work when there is enough), then
        start the slots' threads."""
        with self._cond:
            for i in range(self.size):
                self._first[i] = self._queue.take(i)
            if self.compile_pool is not None:
                for t in self._first:
                    if t is not None:
                        self.compile_pool.ahead(self._queue.upcoming(t.problem, self._lookahead))
        for i in range(self.size):
            t = threading.Thread(target=self._drive, args=(i,), name=f"drive-{i}", daemon=True)
            self._threads.append(t)
            t.start()

    def _drive(self, i: int) -> None:
        runner = self.runners[i]
        task = self._first[i]
        while True:
            if task is None:
                with self._cond:
                    while not self._closed and (task := self._queue.take(i)) is None:
                        self._cond.wait()
                    if self._closed:
                        return
            if self.compile_pool is not None and task.kind == "timing":
                with self._cond:
                    upcoming = self._queue.upcoming(task.problem, self._lookahead)
                self.compile_pool.ahead(upcoming)
                self.compile_pool.claim(task)
            self._ran.add(i)
            res = runner.call(task.kind, task.job)
            self.results.put((task, res))
            task = None

    def close(self, kill: bool = False) -> None:
        """End the slots and the compile pool; with ``kill`` (Ctrl-C) the pool's processes
        and the workers are killed first, so no slot waits for a compile or a job."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self.compile_pool is not None and kill:
            self.compile_pool.close(kill=True)
        for r in self.runners:
            r.close(kill=kill)
        for t in self._threads:
            t.join(timeout=30)
        if self.compile_pool is not None:
            self.compile_pool.close()


# --------------------------------------------------------------------- dask
_DASK_RUNNER: SlotRunner | None = None
_DASK_LOCK = threading.Lock()


def run_on_dask_worker(task: Task, timeout: float) -> dict:
    """The Dask task: run ``task`` on this Dask worker's :class:`SlotRunner` (one per
    worker process, pinned by the environment the worker was started with)."""
    global _DASK_RUNNER
    with _DASK_LOCK:
        if _DASK_RUNNER is None:
            try:
                from distributed import get_worker
                name = str(get_worker().name)
            except (ImportError, ValueError):
                name = "dask"
            from miopen_solver.provenance import visible_devices
            _DASK_RUNNER = SlotRunner(name, visible_devices(), timeout, None, task.job.backend)
        runner = _DASK_RUNNER
    return runner.call(task.kind, task.job)


class DaskExecutor:
    """Tasks on a Dask cluster (see module docstring). ``address`` None starts a
    :class:`distributed.LocalCluster` with one worker per entry of ``gpus``."""

    engine = "dask"

    def __init__(self, address: str | None, gpus: list, timeout: float, backend: str,
                 connect_timeout: float = 60.0):
        try:
            import distributed
        except ImportError:
            raise UserError("--engine dask: the distributed package is not installed; "
                            "allowed: pip install -e \".[dask]\", or --engine local") from None
        import logging
        self.timeout, self.backend, self.address = timeout, backend, address
        self.results: queue.Queue = queue.Queue()
        self.cluster = None
        self._futures = []
        self._n = itertools.count()
        self._environ = dict(os.environ)   # a LocalCluster's nannies set variables here (BLAS threads ...)
        if address is None:
            self.gpus = list(gpus)
            with sigint_blocked():      # its loop's thread, and so every worker process, keeps SIGINT blocked
                self.cluster = distributed.LocalCluster(
                    n_workers=len(self.gpus), threads_per_worker=1, processes=True,
                    resources={GPU_RESOURCE: 1}, dashboard_address=None, silence_logs=logging.ERROR)
            self.client = distributed.Client(self.cluster)
            if self.gpus != [None]:
                from .dask_plugin import PinGpu
                self.client.register_plugin(PinGpu({i: g for i, g in enumerate(self.gpus)}))
        else:
            check_address(address)
            try:
                self.client = distributed.Client(address, timeout=connect_timeout)
            except Exception as e:          # OSError, TimeoutError, or a transport's own error
                raise UserError(f"--address {address}: cannot reach the Dask scheduler ({e}); "
                                f"{ADDRESS_ALLOWED}") from None
            try:
                self.client.wait_for_workers(1, timeout=connect_timeout)
            except Exception as e:          # distributed's WorkerStartTimeoutError
                self.client.close()
                raise UserError(f"--address {address}: no Dask worker joined the scheduler within "
                                f"{connect_timeout:g} s ({e}); start one worker per GPU: dask worker {address} "
                                f"--nthreads 1 --resources {GPU_RESOURCE}=1") from None
            ws = self.client.scheduler_info().get("workers", {})
            tagged = [w for w in ws.values() if w.get("resources", {}).get(GPU_RESOURCE)]
            if not tagged:
                self.client.close()
                raise UserError(f"--address {address}: no Dask worker offers the resource {GPU_RESOURCE}; "
                                f"start one worker per GPU with --nthreads 1 --resources {GPU_RESOURCE}=1")
            self.gpus = [w.get("name") for w in tagged]

    @property
    def size(self) -> int:
        return len(self.gpus)

    def describe(self) -> str:
        where = self.address or "a LocalCluster"
        return f"Engine dask on {where}: {self.size} workers"

    def submit(self, task: Task) -> None:
        n = next(self._n)
        prio = 1_000_000 if task.kind == "verification" else -n   # problem-major, verification first
        fut = self.client.submit(run_on_dask_worker, task, self.timeout, resources={GPU_RESOURCE: 1},
                                 pure=False, priority=prio)
        self._futures.append(fut)

        def done(f, task=task):
            try:
                res = f.result()
            except BaseException as e:  # the Dask worker died twice over, the task was cancelled ...
                res = workers.WorkerResult(ok=False, failure="crashed",
                                           reason=f"dask: {type(e).__name__}: {e}").as_dict()
                res.update(slot=None, host=None, gpu=None, provenance=None)
            self.results.put((task, res))
        fut.add_done_callback(done)

    def start(self) -> None:
        pass

    def close(self, kill: bool = False) -> None:
        try:
            if kill and self._futures:
                self.client.cancel(self._futures)
            self.client.close()
        finally:
            if self.cluster is not None:
                self.cluster.close()
            os.environ.clear()
            os.environ.update(self._environ)


def _main(argv) -> int:
    ignore_sigint()                   # the provenance probe: a Ctrl-C is the driver's
    if len(argv) == 2 and argv[0] == "provenance":
        from miopen_solver.provenance import device_provenance
        print(json_text(device_provenance(argv[1]), sort_keys=True))
        return 0
    print("usage: python -m driver.executors provenance BACKEND", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))


__all__ = ["CompilePool", "DaskExecutor", "LocalExecutor", "SlotRunner", "Task", "available_gpus",
           "parse_gpus", "pin_env", "run_on_dask_worker", "slot_provenance"]
