"""A plain run of one MIOpenDriver line (``dgrad-driver convfp16 ... -F 2``).

Steps, each in the process named:

1. parse the line, pick the device (driver; a *probe* worker asks a GPU runtime which
   device it has, so the driver itself never opens a GPU context);
2. check applicability, choose the config: ``--perf-config``, else the perf-db winner
   for this problem and arch (``dgrad-driver tune`` writes it; ``--no-perfdb`` skips the
   lookup), else the solver's default; ``--kouter`` and ``--split-k`` override one field
   each, and ``split_k = -1`` is resolved to a concrete degree here, before anything is
   packed or launched (driver);
3. with ``-t 1``: warm-up, then ``-i`` timed launches (*timing* worker);
4. one launch into a NaN-poisoned dX and, with ``-V 1``, the reference and MIOpen's
   verdict (*verification* worker; not started for ``-t 1 -V 0`` without ``-o``, where the
   timed launches were the run);
5. print MIOpenDriver's lines (driver).

``--arch`` picks the target. With ``--backend cpu`` the CPU engine runs that target's
decomposition and tiles (a simulation); with ``auto`` and no device of that arch the run is
compile-only: the kernel is emitted and, where a compiler is installed, compiled offline
(``clang`` for gfx*, ``nvcc`` for sm_*), and the code object's size (and MFMA count) is
printed. With an explicit ``--backend cuda|hip`` the device must be that arch.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import dataclass, field

from miopen_solver import SOLVER_ID, SOLVER_NAME, layouts, prng
from miopen_solver.command import DriverCommand, check_supported, parse
from miopen_solver.errors import MiopenCommandError, PerfConfigError, PerfDbError, RuntimeUnavailable
from miopen_solver.perfdb import PerfDb, default_path
from miopen_solver.reference import Verdict
from miopen_solver.solver import DgradSolver
from miopen_solver.spec import MAX_SPLIT_K, PerfConfig, is_valid_performance_config, make_spec
from miopen_solver.target import get_target

from . import report, workers
from .options import (EXIT_OK, EXIT_VERIFY_FAILED, EXIT_WORKER_FAILED, UserError, arch_target,
                      check_writable_dir, perfdb_label, warn)

KOUTER = {"auto": -1, "on": 1, "off": 0}
"""``--kouter`` values -> ``PerfConfig.lds_k_outer``."""
SOLUTION_NOT_SET = "-1"
SIMULATED_NOTE = ("Info: --backend cpu simulates {arch}: the numpy engine runs this config's sub-GEMMs; "
                  "no {arch} kernel runs, so its timing and numerics are not the kernel's")
GRAPH_ON_CPU_NOTE = ("Info: '--use_hip_graph 1' is ignored on the cpu engine (no graph capture); "
                     "the timed launches are plain launches")
"""Printed for ``-J 1 -t 1`` on the CPU engine (GPU engines time replays of a captured graph)."""
SOLUTION_FASTEST = "0"


# --------------------------------------------------------------------- the device
@dataclass(frozen=True)
class Device:
    """Where a line runs.

    Attributes:
        backend: ``cpu``, ``cuda`` or ``hip``; None for a compile-only run.
        target: the target the kernel is built for.
        name: the device's name (``cpu (numpy engine)`` for the CPU engine).
    """

    backend: str | None
    target: object
    name: str

    @property
    def compile_only(self) -> bool:
        """No device of the target's arch: emit and compile, launch nothing."""
        return self.backend is None

    @property
    def perfdb_arch(self) -> str:
        """The perf-db's arch field: the device arch (features such as ``:sramecc+``
        dropped); on the CPU engine ``cpu``, or ``<arch>@cpu`` for a simulated target, so
        CPU timings never pose as a GPU's."""
        arch = self.target.arch.split(":")[0]
        if self.backend == "cpu" and arch != "cpu":
            return f"{arch}@cpu"
        return arch


def resolve_device(backend: str, arch: str | None, timeout: float | None = None) -> Device:
    """The device for ``--backend``/``--arch`` (see module docstring).

    GPU runtimes are asked in a probe worker, never in this process.

    Raises:
        UserError: an unknown arch, or an explicit GPU backend whose device is another arch.
        RuntimeUnavailable: an explicit ``cuda``/``hip`` that is not there.
    """
    want = arch_target(arch) if arch is not None else None
    cpu = get_target("cpu")
    if backend == "cpu":
        return Device("cpu", want or cpu, "cpu (numpy engine)")
    if backend == "auto":
        if want is not None and not want.is_gpu:
            return Device("cpu", want, "cpu (numpy engine)")
        if not workers.gpu_device_nodes():
            return Device(None, want, "") if want is not None else Device("cpu", cpu, "cpu (numpy engine)")
    res = workers.probe(backend, timeout=timeout)
    if not res.ok:
        detail = res.reason.split(": ", 1)[1] if res.error_type == "RuntimeUnavailable" else res.reason
        raise RuntimeUnavailable(f"--backend {backend}: {detail}")
    rec = res.record
    found = workers.target_from_record(rec["target"])
    if rec["backend"] == "cpu":
        return Device(None, want, "") if want is not None else Device("cpu", cpu, rec["device"])
    if want is not None and want.name != found.name:
        if backend == "auto":
            return Device(None, want, "")
        raise UserError(f"--arch {arch}: the {rec['backend']} device is {found.arch} ({rec['device']}); "
                        f"allowed with --backend {backend}: {found.name}; use --backend auto for a "
                        f"compile-only run or --backend cpu to simulate {want.name}")
    return Device(rec["backend"], found, rec["device"])


# --------------------------------------------------------------------- the config
@dataclass
class ConfigChoice:
    """The config a run uses and where it came from.

    Attributes:
        config: the PerfConfig to launch (``split_k`` resolved, never -1).
        source: ``"perf-config"`` (the option), ``"perfdb"`` or ``"default"``.
        notes: lines to print about the choice (given config, perf-db use, resolved split-K).
        tuned_ms: the perf-db record's time, when the config came from there.
        perfdb_path: the perf-db file consulted (None when skipped).
        warnings: stderr lines (an unusable perf-db: the default config is used instead).
    """

    config: PerfConfig
    source: str
    notes: list = field(default_factory=list)
    tuned_ms: float | None = None
    perfdb_path: str | None = None
    warnings: list = field(default_factory=list)


SPLIT_K_ALLOWED = f"allowed: -1 (choose) or an integer from 1 to {MAX_SPLIT_K}"


def check_split_k(value: int | None) -> None:
    """``--split-k``: -1 (choose) or 1..MAX_SPLIT_K.

    Raises:
        UserError: anything else, naming the value and what is allowed.
    """
    if value is not None and not (value == -1 or 1 <= value <= MAX_SPLIT_K):
        raise UserError(f"--split-k {value}: {SPLIT_K_ALLOWED}")


def check_kouter(value: str | None) -> None:
    """``--kouter``: one of :data:`KOUTER`'s names (or None: not given).

    Raises:
        UserError: anything else, naming the value and what is allowed.
    """
    if value is not None and value not in KOUTER:
        raise UserError(f"--kouter {value}: allowed: {', '.join(KOUTER)}")


def lookup_perfdb(problem, device: Device, path: str | None):
    """``(PerfConfig, PerfRecord, note)`` for the perf-db record of this problem on this
    device, or ``(None, None, note)``; ``note`` explains an ignored record ("" otherwise).

    Raises:
        PerfDbError: the perf-db cannot be read (not SQLite, a directory, wrong schema...).
    """
    db_path = path if path is not None else default_path()
    with PerfDb(db_path) as db:
        cfg, rec, why = DgradSolver().lookup_performance_config(problem, device.target, db,
                                                                arch=device.perfdb_arch)
    if rec is None:
        return None, None, ""
    if cfg is None:
        return None, None, f"Ignoring perf-db config {rec.values} from {db_path}: {why}"
    return cfg, rec, ""


def choose_config(problem, device: Device, *, perf_config: str | None = None, kouter: str | None = None,
                  split_k: int | None = None, perfdb: str | None = None,
                  use_perfdb: bool = True) -> ConfigChoice:
    """The config for a run (see module docstring for the order).

    An unusable perf-db is not an error here: the default config is used and
    :attr:`ConfigChoice.warnings` says why.

    Raises:
        PerfConfigError: ``--perf-config`` malformed or invalid for the problem, or the
            overrides make the config invalid; the message starts with the options given
            (``--perf-config '<value>': ...``).
        UserError: a bad ``--split-k`` or ``--kouter``.
    """
    check_split_k(split_k)
    check_kouter(kouter)
    given = ([f"--perf-config {perf_config!r}"] if perf_config is not None else []) + \
        ([f"--kouter {kouter}"] if kouter is not None else []) + \
        ([f"--split-k {split_k}"] if split_k is not None else [])
    try:
        return _choose_config(problem, device, perf_config, kouter, split_k, perfdb, use_perfdb)
    except PerfConfigError as e:
        if not given or str(e).startswith("--"):
            raise
        raise PerfConfigError(f"{' '.join(given)}: {e}") from None


def _choose_config(problem, device, perf_config, kouter, split_k, perfdb, use_perfdb) -> ConfigChoice:
    target = device.target
    notes, warnings = [], []
    tuned_ms = db_path = None
    if perf_config is not None:
        try:
            cfg, source = PerfConfig.parse(perf_config), "perf-config"
        except PerfConfigError as e:
            raise PerfConfigError(f"--perf-config {perf_config!r}: {e}") from None
        notes.append(f"Using --perf-config {cfg.serialize()}")
    else:
        cfg = None
        if use_perfdb:
            db_path = str(perfdb if perfdb is not None else default_path())
            try:
                cfg, rec, note = lookup_perfdb(problem, device, perfdb)
            except PerfDbError as e:
                cfg, note = None, ""
                warnings.append(f"{perfdb_label(perfdb)} unusable: {e.reason}; using the default config")
            if note:
                notes.append(note)
            if cfg is not None:
                tuned_ms = rec.time_ms
                shown = f"tuned {tuned_ms:.6f} ms" if tuned_ms is not None else "imported, no time"
                notes.append(f"Using perf-db config {cfg.serialize()} ({shown}) from {db_path}")
        source = "perfdb" if cfg is not None else "default"
        if cfg is None:
            cfg = DgradSolver().get_default_performance_config(problem, target)
    cfg, more = apply_settings(problem, target, cfg, source, kouter, split_k)
    notes.extend(more)
    make_spec(problem, target, cfg)               # PerfConfigError names the broken rule
    return ConfigChoice(cfg, source, notes, tuned_ms, db_path, warnings)


def apply_settings(problem, target, cfg: PerfConfig, source: str, kouter: str | None,
                   split_k: int | None, *, resolve: bool = True) -> tuple:
    """``cfg`` with ``--kouter``/``--split-k`` applied, and the note lines about it.

    A setting that a warpgroup-MMA default or perf-db record cannot take (it reads W k-outer;
    its persistent and TMA forms do not split K) switches to the nearest config that can:
    the plain warpgroup-MMA form, else the warp-MMA default; the user asked for a setting,
    not for wgmma. A config given with ``--perf-config`` (``source == "perf-config"``) is kept as
    given, so :func:`make_spec` then names the broken rule. With ``resolve`` (a run),
    ``split_k = -1`` is resolved to the degree the spec chooses.

    Returns:
        ``(config, notes)``.
    """
    notes = []
    asked = _overrides(cfg, kouter, split_k)
    if source in ("default", "perfdb") and cfg.wgmma and asked != cfg:
        ok, why = is_valid_performance_config(problem, target, asked)
        plain = {2: "the non-persistent form", 3: "the form without TMA"}
        fallbacks = ([(plain[cfg.wgmma], cfg.replace(wgmma=1))] if cfg.wgmma in plain else []) + \
            [("the warp-MMA default", DgradSolver().get_default_performance_config(problem, target.with_(wgmma=False)))]
        for label, base in fallbacks if not ok else ():
            alt = _overrides(base, kouter, split_k)
            if is_valid_performance_config(problem, target, alt)[0]:
                flags = " ".join(([f"--kouter {kouter}"] if kouter is not None else []) +
                                 ([f"--split-k {split_k}"] if split_k is not None else []))
                whose = "the warpgroup-MMA default" if source == "default" else "the perf-db config"
                notes.append(f"{flags}: not possible with {whose} {cfg.serialize()} ({why}); "
                             f"using {label} with the setting, {alt.serialize()}")
                asked = alt
                break
    cfg = asked
    if resolve and cfg.split_k == -1:             # resolve before anything is packed or launched
        chosen = make_spec(problem, target, cfg).split_k
        cfg = cfg.replace(split_k=chosen)
        notes.append(f"Split-K: -1 resolved to {chosen}")
    return cfg, notes


def _overrides(cfg: PerfConfig, kouter: str | None, split_k: int | None) -> PerfConfig:
    """``cfg`` with the ``--kouter`` and ``--split-k`` settings applied."""
    if kouter is not None:
        cfg = cfg.replace(lds_k_outer=KOUTER[kouter])
    if split_k is not None:
        cfg = cfg.replace(split_k=split_k)
    return cfg


def _compile_cause(message: str) -> str:
    """The line of a compiler's output that says why the build failed: the first diagnostic
    with a code or an ``error``, skipping the generic 'aborted due to errors' epilogue
    (ptxas: ``ptxas fatal : (C7602) Insufficient registers ...``), else the first line."""
    lines = [ln.strip() for ln in message.splitlines() if ln.strip()]
    body = lines[1:] or lines
    for want in (lambda ln: "error" in ln.lower() and "aborted due to errors" not in ln,
                 lambda ln: "fatal" in ln.lower() and "aborted due to errors" not in ln,
                 lambda ln: "error" in ln.lower() or "fatal" in ln.lower()):
        hit = next((ln for ln in body if want(ln)), None)
        if hit is not None:
            return hit
    return lines[0] if lines else message


# --------------------------------------------------------------------- line checks
def check_line(cmd: DriverCommand) -> None:
    """Flags this driver cannot honour.

    Raises:
        UserError: ``-m trans``, ``-S`` naming another solver, or what
            :func:`miopen_solver.command.check_supported` refuses (vectorized tensors
            ``-Z``/``-L``, cast types, ``-G 1`` with ``-V 1``).
    """
    try:
        check_supported(cmd)
    except MiopenCommandError as e:
        raise UserError(str(e)) from None
    if cmd.problem.mode != "conv":
        raise UserError("-m trans: backward data of a transposed convolution is a forward "
                        "convolution in MIOpen; this solver runs -m conv only")
    check_solution(cmd)


def check_solution(cmd: DriverCommand) -> None:
    """``-S``: not set (-1), 0 (fastest: immediate mode with ours) or this solver's id or name.

    Raises:
        UserError: any other solution, naming the value and what is allowed.
    """
    sol = cmd.solution.strip()
    # MIOpenDriver: -S 0 is immediate mode with the fastest solution, which here is ours.
    if sol not in (SOLUTION_NOT_SET, SOLUTION_FASTEST, str(SOLVER_ID), SOLVER_NAME):
        shown = sol if sol and sol.isprintable() and " " not in sol else repr(sol)
        raise UserError(f"-S {shown}: not a solution of this solver; allowed: {SOLUTION_NOT_SET} (not set), "
                        f"{SOLUTION_FASTEST} (fastest), {SOLVER_ID} or {SOLVER_NAME}")


def parse_line(tokens) -> DriverCommand:
    """Parse a ``-F 2`` line and refuse the flags this driver cannot honour.

    Raises:
        UserError, MiopenCommandError: no line, a bad line or an unsupported flag.
    """
    if not tokens:
        raise UserError("missing the MIOpenDriver line (e.g. convfp16 -n 32 -c 64 ... -F 2)")
    cmd = parse(tokens)
    check_line(cmd)
    return cmd


def check_applicable(problem, target) -> None:
    """Raise UserError with every reason when the solver says not applicable."""
    verdict = DgradSolver().is_applicable(problem, target)
    if not verdict.ok:
        reasons = "; ".join(f"{r.code}: {r.message}" for r in verdict.reasons)
        raise UserError(f"not applicable on {target.arch}: {reasons}")


def check_input_file(path: str, shape: tuple, dtype, flag: str) -> None:
    """A ``-D``/``-e`` file must exist and hold exactly the problem's element count."""
    import numpy as np
    count = 1
    for s in shape:
        count *= s
    try:
        size = os.path.getsize(path)
    except OSError as e:
        raise UserError(f"{flag} {path}: cannot read ({e.strerror or e})") from None
    item = np.dtype(dtype).itemsize
    if size != count * item:
        raise UserError(f"{flag} {path}: holds {size // item} elements of {np.dtype(dtype).name}; "
                        f"the problem needs {count}")


def check_dump_dir() -> None:
    """``-o 1`` writes MIOpen's ``dump_*.bin`` files into the working directory: it must
    exist and be writable, checked before anything runs (a worker failing to dump would
    lose the verification result).

    Raises:
        UserError: naming ``-o 1``, the directory and why.
    """
    try:
        cwd = os.getcwd()
    except OSError as e:
        raise UserError(f"-o 1: the working directory is unusable ({e.strerror or e}); allowed: -o 0, "
                        f"or run from a writable directory") from None
    check_writable_dir("-o 1", cwd, "-o 0, or run from a writable directory (the dump_*.bin files go there)")


def resolve_reference(ref: str, device: Device) -> str:
    """``--ref auto|gpu|cpu`` -> ``gpu`` or ``cpu`` (auto: the GPU reference on a GPU)."""
    if ref == "auto":
        return "cpu" if device.backend == "cpu" else "gpu"
    if ref == "gpu" and device.backend == "cpu":
        raise UserError("--ref gpu: the cpu backend has no GPU reference; allowed here: auto, cpu")
    return ref


# --------------------------------------------------------------------- compile only
def compile_only(spec) -> tuple:
    """Emit the kernel and compile it offline where a compiler exists.

    Returns:
        ``(status, lines, record)``: status 0 (built, or no compiler: emitted only) or 3
        (:data:`EXIT_WORKER_FAILED`: the compiler rejected it, a failed build like a failed
        worker; 1 stays "verification failed"); ``record`` for ``--json``.
    """
    from miopen_solver.kernels import emit
    from miopen_solver.kernels.offline import OfflineCompileError, compile_amd, find_amd_clang, inspect_nvidia
    import shutil

    t = spec.target
    src = emit(spec)
    lines = [f"Compile-only run for {t.arch}: no {t.arch} device here, nothing is launched",
             f"Kernel: {spec.kernel_name}"]
    rec = {"arch": t.arch, "kernel_name": spec.kernel_name, "source_sha256": src.sha256,
           "compiled": False, "compiler": None, "code_object_bytes": None, "mfma_count": None, "error": None}
    status = EXIT_OK
    with tempfile.TemporaryDirectory(prefix="dgrad-compile-") as tmp:
        try:
            if t.vendor == "amd":
                if find_amd_clang() is None:
                    lines.append("Code object: not built (no clang with AMDGPU targets found; "
                                 "install clang-19 and lld-19)")
                else:
                    co = compile_amd(src.text, t.arch, tmp, "dgrad")
                    mfma = co.count("v_mfma")
                    rec.update(compiled=True, compiler="clang", code_object_bytes=len(co.data), mfma_count=mfma,
                               resources=co.resources)
                    r = co.resources
                    lines.append(f"Code object: {len(co.data)} bytes, {mfma} MFMA instructions")
                    if r:
                        lines.append(f"Resources: {r.get('VGPRs')} VGPRs, {r.get('AGPRs')} AGPRs, "
                                     f"scratch {r.get('ScratchSize [bytes/lane]')} bytes/lane, "
                                     f"occupancy {r.get('Occupancy [waves/SIMD]')} waves/SIMD")
            elif t.vendor == "nvidia":
                if shutil.which("nvcc") is None:
                    lines.append("Cubin: not built (nvcc not found on PATH)")
                else:
                    b = inspect_nvidia(src.text, t.arch, tmp, "dgrad")
                    rec.update(compiled=True, compiler="nvcc", code_object_bytes=len(b.cubin),
                               resources={"registers": b.registers, "spill_store_bytes": b.spill_store_bytes,
                                          "spill_load_bytes": b.spill_load_bytes, "stack_bytes": b.stack_bytes})
                    lines.append(f"Cubin: {len(b.cubin)} bytes")
                    lines.append(f"Resources: {b.registers} registers, {b.spill_store_bytes} bytes spill stores, "
                                 f"{b.stack_bytes} bytes stack")
        except OfflineCompileError as e:
            first = _compile_cause(str(e))
            rec["error"] = str(e)
            lines.append(f"Compile FAILED: {first.strip()}")
            status = EXIT_WORKER_FAILED
    return status, lines, rec


# --------------------------------------------------------------------- the run
@dataclass
class RunOptions:
    """Our options of a plain run (the CLI's long options)."""

    backend: str = "auto"
    arch: str | None = None
    as_json: bool = False
    perf_config: str | None = None
    kouter: str | None = None
    split_k: int | None = None
    print_name_only: bool = False
    ref: str = "auto"
    timeout: float | None = None
    warmup: int = 1
    perfdb: str | None = None
    use_perfdb: bool = True
    environ: dict | None = None


def timing_summary(rec: dict) -> dict:
    """MIOpen's average plus median and min (ms) of a timing worker's record."""
    import statistics
    t = rec["times_ms"]
    return {"average_ms": report.miopen_average_ms(t), "median_ms": float(statistics.median(t)),
            "min_ms": float(min(t))}


def _failed_line(result) -> str:
    return f"RunBackwardGPU() FAILED, {result.reason}"


def run_line(tokens, opts: RunOptions | None = None, **kw) -> tuple:
    """Run one MIOpenDriver line. Returns ``(exit_status, stdout_lines)``.

    ``opts`` (or keyword arguments naming :class:`RunOptions` fields) are our options.
    Exit status: 0 ok, 1 verification failed, 3 a worker (or a compile-only build) failed.

    Raises:
        UserError, MiopenCommandError, PerfConfigError, RuntimeUnavailable, ValueError:
            user mistakes (the CLI prints one line and exits 2).
    """
    o = opts or RunOptions(**kw)
    timeout = o.timeout if o.timeout is not None else workers.default_timeout()
    cmd = parse_line(tokens)
    problem = cmd.problem
    dump = int(cmd.flags["dump_output"]) != 0
    if dump and not o.print_name_only:
        check_dump_dir()

    device = resolve_device(o.backend, o.arch, timeout)
    t_aux = time.perf_counter()         # MIOpen's "auxiliary API calls": applicability, config, spec
    target = device.target
    check_applicable(problem, target)
    ref_kind = resolve_reference(o.ref, device) if not device.compile_only else None
    choice = choose_config(problem, device, perf_config=o.perf_config, kouter=o.kouter, split_k=o.split_k,
                           perfdb=o.perfdb, use_perfdb=o.use_perfdb)
    for text in choice.warnings:
        warn(text)
    spec = make_spec(problem, target, choice.config)
    aux_ms = (time.perf_counter() - t_aux) * 1e3
    if o.print_name_only:
        return EXIT_OK, [json.dumps({"kernel_name": spec.kernel_name}) if o.as_json else spec.kernel_name]

    base = dict(command=cmd.command_line(), problem=problem, spec=spec, config_source=choice.source,
                perfdb_path=choice.perfdb_path, tuned_ms=choice.tuned_ms)
    lines = [report.echo_line(cmd.argv)]
    if device.compile_only:
        status, more, crec = compile_only(spec)
        if o.as_json:
            rec = report.json_record(**base, backend=None, seed=None, status="ok" if status == 0 else "compile_failed",
                                     compile_only=crec)
            return status, [json.dumps(rec, sort_keys=True)]
        return status, lines + choice.notes + more

    seed = prng.resolve_seed(o.environ)
    lines.append(report.seed_line(seed))
    lines.extend(choice.notes)
    f = cmd.flags
    graph = int(f["use_hip_graph"]) != 0
    if cmd.time and graph and device.backend == "cpu":
        lines.append(GRAPH_ON_CPU_NOTE)
    if device.backend == "cpu" and target.vendor != "cpu":
        lines.append(SIMULATED_NOTE.format(arch=target.arch))
    st = layouts.storage_dtype(problem.dtype)
    dy_file, w_file = f["dout_data"] or None, f["weights"] or None
    if dy_file:
        check_input_file(dy_file, layouts.dy_shape(problem), st, "-D")
    if w_file:
        check_input_file(w_file, layouts.w_shape(problem), st, "-e")
    job_args = dict(problem=problem, target=target, perf_config=choice.config.serialize(), backend=device.backend,
                    seed=seed, bias=str(f["bias"]).strip() not in ("", "0"), dy_file=dy_file, w_file=w_file)

    timing = summary = failure = None
    if cmd.time:
        job = workers.make_job("timing", **job_args, iters=cmd.iters, warmup=o.warmup, graph=graph)
        res = workers.run_one(job, timeout=timeout)
        if res.ok:
            timing, summary = res.record, timing_summary(res.record)
        else:
            failure = ("timing", res)
    vrec = None
    # MIOpenDriver always launches once; with -t 1 the timed launches were that run, so a
    # verification worker is needed only to verify, to dump, or when nothing was timed.
    if failure is None and (cmd.verify or dump or not cmd.time):
        job = workers.make_job("verification", **job_args, verify=bool(cmd.verify), reference=ref_kind, dump=dump)
        res = workers.run_one(job, timeout=timeout)
        if res.ok:
            vrec = res.record
        else:
            failure = ("verification", res)

    verdict = Verdict(**vrec["verdict"]) if vrec and vrec["verdict"] else None
    if failure is not None:
        status, state = EXIT_WORKER_FAILED, "worker_failed"
    elif verdict is not None and not verdict.ok:
        status, state = EXIT_VERIFY_FAILED, "verify_failed"
    else:
        status, state = EXIT_OK, "ok"

    immediate = cmd.solution.strip() != SOLUTION_NOT_SET     # -S given: MIOpen's immediate mode
    if o.as_json:
        rec = report.json_record(**base, backend=device.backend, seed=seed, status=state, timing=timing,
                                 immediate=immediate,
                                 verdict=verdict, reference=vrec["reference"] if vrec else None,
                                 verify_pid=vrec["pid"] if vrec else None,
                                 failure={"worker": failure[0], **failure[1].as_dict()} if failure else None)
        return status, [json.dumps(rec, sort_keys=True)]

    dumps = vrec["dumps"] if vrec else []
    lines.extend(f"Wrote output to file {p}" for p in dumps if p != "dump_bwd_din_gpu.bin")
    lines.extend(f"Wrote output to file {p}" for p in dumps if p == "dump_bwd_din_gpu.bin")
    if immediate:
        lines.extend(report.immediate_lines(choice.tuned_ms, spec.workspace_bytes))
    if timing is not None:
        if cmd.wall:
            lines.append(report.wall_line(timing["wall_ms"], aux_ms, 0.0))
        if not immediate:                                       # the Find path names its pick
            lines.append(report.algorithm_line())
        lines.append(report.kernel_time_line(summary["average_ms"]))
        lines.extend(report.stats_lines(problem, summary["average_ms"]))
    elif cmd.wall and not cmd.time:
        lines.append(report.wall_ignored_line(cmd.wall))
    if failure is not None:
        lines.append(_failed_line(failure[1]))
    elif verdict is not None:
        lines.append(report.verify_line(verdict, vrec["reference"]))
    return status, lines
