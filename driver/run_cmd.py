"""A plain run of one MIOpenDriver line (``dgrad-driver convfp16 ... -F 2``).

Steps, each in the process named:

1. parse the line, pick the device (driver; a *probe* worker asks a GPU runtime which
   device it has, so the driver itself never opens a GPU context);
2. check applicability and ask the solver for the solution
   (:meth:`~miopen_solver.solver.DgradSolver.find_solution`: ``--perf-config``, else the
   perf-db winner for this problem and arch, else the default; ``--kouter``/``--split-k``/
   ``--split-k-reduce`` on top; ``split_k = -1`` resolved) -- decided once, in the library, and sent to the
   workers as a record (driver); the workers' host memory (:mod:`miopen_solver.memory`) is
   compared with what the host has, and a run that cannot fit is refused with the numbers
   before any worker starts (driver);
3. with ``-t 1``: warm-up, then ``-i`` timed launches (*timing* worker);
4. with ``-V 1`` (or ``-o 1``): one launch into a NaN-poisoned dX, the reference and
   MIOpen's verdict (*verification* worker). With ``-V 0`` and no ``-o 1`` it does not
   start: the timed launches were the run, and without ``-t 1`` the timing worker launches
   the kernel once, untimed (MIOpenDriver runs the backward pass whatever ``-t`` and ``-V``
   say; ``--json`` counts the launches);
5. print MIOpenDriver's lines (driver): the header (echo, seed, ``Timestamp``, notes) as soon
   as every check has passed, before step 3 (flushed: a Ctrl-C keeps it), the rest at the end.

``--arch`` picks the target. With ``--backend cpu`` the CPU engine runs that target's
decomposition and tiles (a simulation); with ``auto`` and no device of that arch the run is
compile-only: the kernel is emitted and, where a compiler is installed, compiled offline
(``clang`` for gfx*, ``nvcc`` for sm_*), and the code object's size (and MFMA count) is
printed. With an explicit ``--backend cuda|hip`` the device must be that arch.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import tempfile

import click
import time
from dataclasses import dataclass

from miopen_solver import LEGACY_SOLVER_IDS, SOLVER_ID, SOLVER_NAME, layouts, memory, prng
from miopen_solver.applicability import SPATIAL_DIM
from miopen_solver.command import INT_MAX, INT_MIN, MAX_LAUNCHES, DriverCommand, check_supported, parse, parse_int
from miopen_solver.errors import FileError, MiopenCommandError, RuntimeUnavailable
from miopen_solver.fileio import check_writable
from miopen_solver.perfdb import default_path
from miopen_solver.reference import Verdict
from miopen_solver.config import SPLIT_K_REDUCE
from miopen_solver.solver import KOUTER, MAX_SPLIT_K, DgradSolver
from miopen_solver.target import Target, get_target
from miopen_solver.text import json_text, shorten, without_bytes_reprs
from miopen_solver.tf32 import ENV_OVERRIDES, MATH_DEFAULT
from miopen_solver.tf32 import resolve as resolve_tf32

from . import miopen_env, report, workers
from .options import (EXIT_OK, EXIT_VERIFY_FAILED, EXIT_WORKER_FAILED, UserError, arch_target, check_count,
                      check_writable_dir, input_file_size, perfdb_label, warn, PERFDB_ALLOWED)

SOLUTION_NOT_SET = "-1"
SIMULATED_NOTE = ("Info: --backend cpu simulates {arch}: the numpy engine runs this config's decomposition "
                  "(its sub-GEMMs, or the direct schedules' phases and taps, not their tiling); no {arch} "
                  "kernel runs, so its timing and numerics are not the kernel's")
GRAPH_ON_CPU_NOTE = ("Info: '{given}' is ignored on the cpu engine (no graph capture); "
                     "the timed launches are plain launches")
"""Printed for ``-J 1 -t 1`` on the CPU engine (GPU engines time replays of a captured graph),
``given`` the flag and value as the line typed them (:func:`graph_on_cpu_note`)."""


def graph_on_cpu_note(cmd: DriverCommand | None = None) -> str:
    """:data:`GRAPH_ON_CPU_NOTE` echoing ``cmd``'s ``-J`` as typed (``--use_hip_graph 1``
    without a line: a campaign's lines)."""
    given = cmd.given("use_hip_graph") if cmd else "--use_hip_graph 1"
    return GRAPH_ON_CPU_NOTE.format(given=given)
SOLUTION_FASTEST = "0"


# --------------------------------------------------------------------- the device
def perfdb_arch(target, backend: str | None) -> str:
    """The arch a perf-db record of ``target`` run on ``backend`` is filed under: the arch
    without features such as ``:sramecc+`` (``Target.base_arch``); on the CPU engine ``cpu``,
    or ``<arch>@cpu`` for a simulated target, so CPU timings never pose as a GPU's."""
    arch = target.base_arch
    return f"{arch}@cpu" if backend == "cpu" and arch != "cpu" else arch


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
        """The perf-db's arch field of this device (:func:`perfdb_arch`)."""
        return perfdb_arch(self.target, self.backend)


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
        raise RuntimeUnavailable(f"--backend {backend}: {without_bytes_reprs(detail)}")
    rec = res.record
    found = Target.from_record(rec["target"])
    if rec["backend"] == "cpu":
        return Device(None, want, "") if want is not None else Device("cpu", cpu, rec["device"])
    if want is not None and want.name != found.name:
        if backend == "auto":
            return Device(None, want, "")
        raise UserError(f"--arch {arch}: the {rec['backend']} device is {found.arch} ({rec['device']}); "
                        f"allowed with --backend {backend}: {found.name}; use --backend auto for a "
                        f"compile-only run or --backend cpu to simulate {want.name}")
    return Device(rec["backend"], found, rec["device"])


# --------------------------------------------------------------------- the settings
SPLIT_K_ALLOWED = f"allowed: -1 (choose) or an integer from 1 to {MAX_SPLIT_K}"


def check_split_k(value: int | None) -> None:
    """``--split-k``: -1 (choose) or 1..MAX_SPLIT_K.

    Raises:
        UserError: anything else, naming the value and what is allowed.
    """
    if value is not None and not (isinstance(value, int) and (value == -1 or 1 <= value <= MAX_SPLIT_K)):
        raise UserError(f"--split-k {shorten(value)}: {SPLIT_K_ALLOWED}")


def check_kouter(value: str | None) -> None:
    """``--kouter``: one of :data:`KOUTER`'s names (or None: not given).

    Raises:
        UserError: anything else, naming the value and what is allowed.
    """
    if value is not None and value not in KOUTER:
        raise UserError(f"--kouter {value}: allowed: {', '.join(KOUTER)}")


def check_split_k_reduce(value: str | None) -> None:
    """``--split-k-reduce``: one of :data:`~miopen_solver.config.SPLIT_K_REDUCE`'s names (or
    None: not given).

    Raises:
        UserError: anything else, naming the value and what is allowed.
    """
    if value is not None and value not in SPLIT_K_REDUCE:
        raise UserError(f"--split-k-reduce {value}: allowed: {', '.join(SPLIT_K_REDUCE)}")


def find_solution(problem, device: Device, o) -> object:
    """The solver's solution for a run's options (``o`` has ``perf_config``, ``kouter``,
    ``split_k``, ``split_k_reduce``, ``perfdb``, ``use_perfdb``): the library decides; this
    only names the perf-db and the device's perf-db arch.

    Raises:
        PerfConfigError: the given config or settings are not valid for the problem.
        UserError: a bad ``--split-k``, ``--kouter`` or ``--split-k-reduce``.
    """
    check_split_k(o.split_k)
    check_kouter(o.kouter)
    check_split_k_reduce(getattr(o, "split_k_reduce", None))
    db = (o.perfdb if o.perfdb is not None else default_path()) if o.use_perfdb else None
    return DgradSolver().find_solution(problem, device.target, perf_config=o.perf_config, perfdb=db,
                                       perfdb_arch=device.perfdb_arch, perfdb_label=perfdb_label(o.perfdb),
                                       kouter=o.kouter, split_k=o.split_k,
                                       split_k_reduce=getattr(o, "split_k_reduce", None),
                                       perf_config_label=getattr(o, "perf_config_label", "--perf-config"))


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
                        "convolution in MIOpen, which this solver does not run; allowed: -m conv")
    check_solution(cmd)


def solution_number(cmd: DriverCommand) -> int | None:
    """``-S`` as the integer MIOpenDriver reads (``strtol``: sign, digits, leading zeros and
    surrounding blanks allowed), or None when it is not a plain integer (a solver name).

    Raises:
        UserError: an integer outside C ``int``, which MIOpenDriver cannot hold.
    """
    sol = cmd.solution.strip()
    if re.fullmatch(r"[+-]?[0-9]+", sol) is None:
        return None
    try:
        return parse_int("-S", sol)       # the integer flags' own rule: digits, sign, C int range
    except MiopenCommandError:
        raise UserError(f"-S {shorten(cmd.solution)!r}: allowed: an integer from {INT_MIN} to {INT_MAX} "
                        f"(MIOpenDriver reads -S as a 32-bit int) or this solver's name {SOLVER_NAME}") from None


def find_mode(cmd: DriverCommand) -> bool:
    """True when ``-S`` asks for MIOpen's Find mode: not set (-1) or any negative integer
    (MIOpenDriver's ``ParseCmdLineArgs`` takes immediate mode only for a solution >= 0)."""
    number = solution_number(cmd)
    return number is not None and number < 0


def _after_seed(lines: list) -> int:
    """The index after the ``PRNG seed:`` line (the end when there is none): where
    MIOpenDriver's buffer-allocation lines go."""
    return next((i + 1 for i, text in enumerate(lines) if text.startswith("PRNG seed: ")), len(lines))


def check_solution(cmd: DriverCommand) -> None:
    """``-S``: not set (-1, or any negative integer: Find mode), 0 (fastest: immediate mode
    with ours) or this solver's id or name.

    Raises:
        UserError: any other solution, naming the value and what is allowed.
    """
    sol, number = cmd.solution.strip(), solution_number(cmd)
    # MIOpenDriver: -S 0 is immediate mode with the fastest solution, which here is ours.
    ours = (int(SOLUTION_FASTEST), SOLVER_ID) + tuple(LEGACY_SOLVER_IDS)
    if not (number is not None and (number < 0 or number in ours)) and sol != SOLVER_NAME:
        raise UserError(f"-S {shorten(cmd.solution)!r}: not a solution of this solver; allowed: {SOLUTION_NOT_SET} "
                        f"or any negative integer (not set: Find mode), {SOLUTION_FASTEST} (fastest), {SOLVER_ID} "
                        f"or {SOLVER_NAME}")


def legacy_id_note(cmd: DriverCommand) -> str | None:
    """The note for ``-S 200``: our old id, accepted (in MIOpen 200 is another solver)."""
    number = solution_number(cmd)
    if number in LEGACY_SOLVER_IDS:
        return (f"Info: -S {number} is this solver's old id; its id is now {SOLVER_ID} ({SOLVER_NAME}); "
                f"in MIOpen 3.5 id {number} is another solver")
    return None


def for_target(cmd: DriverCommand, target) -> tuple:
    """``(cmd, note)``: the line's problem resolved for ``target`` (MIOpen's
    ``SetupComputeType``, :func:`miopen_solver.tf32.resolve`): a ``-M 0`` fp32 line on a
    target without a TF32 matrix instruction becomes the IEEE fp32 problem, and ``note`` says
    so (None otherwise). Every subcommand asks this once it knows the target, before keys,
    perf-db records or configs are looked at."""
    problem, note = resolve_tf32(cmd.problem, target)
    if problem is cmd.problem:
        return cmd, None
    return dataclasses.replace(cmd, problem=problem), note


def with_note(solution, note: str | None):
    """``solution`` with ``note`` (e.g. :func:`for_target`'s) first among its notes, so the
    note travels with it (text output, ``--json``, workers); unchanged when ``note`` is None."""
    return solution if not note else dataclasses.replace(solution, notes=(note,) + tuple(solution.notes))


def unhonoured_flag_notes(cmd: DriverCommand, environ=None) -> list:
    """One ``Info:`` line per MIOpenDriver flag that is set but that this driver does not
    honour as MIOpenDriver does (never silence):

    * ``-b 1``: MIOpenDriver also runs and verifies backward bias; we run backward data only
      (the bias buffer still takes its random numbers, so dY and W match MIOpen's);
    * ``-C DIR``: MIOpen reads/writes cached reference results there; we always compute the
      reference;
    * ``-M 0`` on a ``convfp16``/``convbfp16`` line: TF32 math is for fp32 data only (as in
      MIOpen, whose key and kernels ignore it for 16-bit types), so it changes nothing;
    * ``MIOPEN_TF32_OVERRIDE``/``NVIDIA_TF32_OVERRIDE`` set (``environ``, default the
      process's): MIOpen's ``EnvEnableTF32`` reads them; here only ``-M 0`` selects TF32
      (:mod:`miopen_solver.tf32`);
    * ``-N 0``/``-N 1``: MIOpen fills dX with NaN before a launch only with ``-N 1``; we
      always do (an unwritten pixel must fail verification).
    """
    f = cmd.flags
    env = os.environ if environ is None else environ
    out = []

    if cmd.bias:
        out.append(f"Info: '{cmd.given('bias')}' is not honoured: backward bias is not run or verified "
                   "(backward data only; the bias buffer still draws its random numbers)")
    if str(f["verification_cache"]).strip():
        out.append(f"Info: '{cmd.given('verification_cache')}' is not honoured: the reference is always "
                   "computed, never read from or written to a verification cache")
    if int(f["math_type"]) == MATH_DEFAULT and cmd.problem.dtype != "fp32":
        out.append(f"Info: '{cmd.given('math_type')}' changes nothing for {cmd.base}: TF32 math is for fp32 data "
                   f"only, as in MIOpen")
    overrides = [name for name in ENV_OVERRIDES if str(env.get(name, "")).strip() not in ("", "0")]
    if overrides:
        out.append(f"Info: {' and '.join(overrides)} set: not honoured (MIOpen's EnvEnableTF32 reads them); "
                   f"only '-M 0' selects TF32 math here")
    if int(f["init_output_nan"]) == 0 and "init_output_nan" in cmd.written and cmd.verify:
        out.append(f"Info: '{cmd.given('init_output_nan')}' is not honoured: dX is always filled with NaN before the "
                   "verification launch")
    return out


# The exponent bits of a 16-bit storage word that mark Inf or NaN (fp16: 5 bits, bf16: 8).
_NONFINITE_EXPONENT = {"fp16": 0x7C00, "bf16": 0x7F80}


def nonfinite_input_notes(cmd: DriverCommand) -> list:
    """One line for each ``-D``/``-e`` file that holds NaN or Inf elements (read whole: the
    file has the problem's size, checked before by :func:`check_input_files`): dX and the
    reference are then NaN wherever such an element reaches, so a failed verification is
    the data's, not the kernel's."""
    import numpy as np
    out = []
    dtype = cmd.problem.dtype
    for name in ("dout_data", "weights"):
        path = cmd.flags[name]
        if not path:
            continue
        if dtype == "fp32":
            bad = ~np.isfinite(np.fromfile(path, dtype=np.float32))
        else:
            mask = _NONFINITE_EXPONENT[dtype]
            bad = (np.fromfile(path, dtype=np.uint16) & mask) == mask
        n = int(np.count_nonzero(bad))
        if n:
            out.append(f"{cmd.flag_text(name)} {path} holds {n} NaN or Inf element(s) of {bad.size}: dX and the "
                       f"reference are NaN wherever they reach, so verification cannot pass")
    return out


def info_lines(cmd: DriverCommand, device, target, environ=None) -> list:
    """The run's ``Info:`` lines, in the order the text report prints them: an old ``-S`` id
    (:func:`legacy_id_note`), flags not honoured (:func:`unhonoured_flag_notes`), a graph
    flag on the CPU engine, the CPU engine simulating a GPU target. ``--json`` carries the
    same lines as its ``info`` list."""
    out = []
    note = legacy_id_note(cmd)
    if note:
        out.append(note)
    out.extend(unhonoured_flag_notes(cmd, environ))
    if cmd.time and int(cmd.flags["use_hip_graph"]) != 0 and device.backend == "cpu":
        out.append(graph_on_cpu_note(cmd))
    if device.backend == "cpu" and target.vendor != "cpu":
        out.append(SIMULATED_NOTE.format(arch=target.arch))
    return out


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


REASON_ALLOWED = {SPATIAL_DIM: "2-D lines (-_ 2, or no --spatial_dim)"}
"""What a line must be instead, for a reason the line's flags alone decide (its error says so)."""


def check_applicable(problem, target) -> None:
    """Raise UserError with every reason when the solver says not applicable (and what is
    allowed, for the reasons of :data:`REASON_ALLOWED`)."""
    verdict = DgradSolver().is_applicable(problem, target)
    if not verdict.ok:
        reasons = "; ".join(f"{r.code}: {r.message}" for r in verdict.reasons)
        allowed = [REASON_ALLOWED[r.code] for r in verdict.reasons if r.code in REASON_ALLOWED]
        raise UserError(f"not applicable on {target.arch}: {reasons}" + "".join(f"; allowed: {a}" for a in allowed))


def check_input_file(path: str, shape: tuple, dtype, flag: str) -> None:
    """A ``-D``/``-e`` file must exist and hold exactly the problem's element count."""
    import numpy as np
    count = 1
    for s in shape:
        count *= s
    size = input_file_size(flag, path)
    item = np.dtype(dtype).itemsize
    if size != count * item:
        name = np.dtype(dtype).name
        raise UserError(f"{flag} {path}: {size} bytes; allowed: exactly {count * item} bytes, the problem's "
                        f"{count} {name} elements ({'x'.join(map(str, shape))} in the line's layout), raw binary")


def check_input_files(cmd: DriverCommand) -> tuple:
    """The line's ``-D`` (dY) and ``-e`` (W) files, each checked by :func:`check_input_file`
    against the line's problem before any worker starts (``run``, ``tune``, each ``batch``
    line and each campaign line), so a missing or wrong-sized file is a user error and not
    a worker failure per config.

    Returns:
        ``(dy_file, w_file)``, each None when not given.

    Raises:
        UserError: naming the flag, the path and what is allowed.
    """
    problem, f = cmd.problem, cmd.flags
    st = layouts.storage_dtype(problem.dtype)
    dy_file, w_file = f["dout_data"] or None, f["weights"] or None
    if dy_file:
        check_input_file(dy_file, layouts.dy_shape(problem), st, cmd.flag_text("dout_data"))
    if w_file:
        check_input_file(w_file, layouts.w_shape(problem), st, cmd.flag_text("weights"))
    return dy_file, w_file


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


def check_dump_files(verify: bool, reference: str | None) -> None:
    """Each ``dump_*.bin`` file ``-o 1`` will write (:func:`driver.workers.dump_names`) can
    be replaced: an existing one that is read-only, a directory, a FIFO or a socket is
    refused before any worker starts, not after the run (exit 3, the dumps half written).

    Raises:
        UserError: naming ``-o 1``, the file and why.
    """
    for name in workers.dump_names(verify, reference):
        try:
            check_writable(name)
        except FileError as e:
            raise UserError(f"-o 1: {e.path}: {e.reason}; allowed: -o 0, or run where {e.path} can be "
                            f"replaced") from None


def resolve_reference(ref: str, device: Device, environ=None) -> str:
    """``--ref auto|gpu|cpu`` -> ``gpu`` or ``cpu`` (auto: the GPU reference on a GPU, unless
    ``MIOPEN_DRIVER_USE_GPU_REFERENCE`` is set off, as MIOpenDriver reads it)."""
    if ref == "auto":
        return "cpu" if device.backend == "cpu" or not miopen_env.gpu_reference(environ) else "gpu"
    if ref == "gpu" and device.backend == "cpu":
        raise UserError("--ref gpu: the cpu backend has no GPU reference; allowed here: auto, cpu")
    return ref


# --------------------------------------------------------------------- compile only
def compile_only(solution) -> tuple:
    """Emit the kernel and compile it offline where a compiler exists.

    Returns:
        ``(status, lines, record)``: status 0 (built, or no compiler: emitted only) or 3
        (:data:`EXIT_WORKER_FAILED`: the compiler rejected it, a failed build like a failed
        worker; 1 stays "verification failed"); ``record`` for ``--json``.
    """
    from miopen_solver.kernels.offline import CompileError, compile_amd, find_amd_clang, inspect_nvidia
    from miopen_solver.runtime.cache import BinaryCache
    import shutil

    spec = solution.spec
    t = spec.target
    src = solution.kernels[0].source
    lines = [f"Compile-only run for {t.arch}: no {t.arch} device here, nothing is launched",
             f"Kernel: {solution.kernel_name}"]
    rec = {"arch": t.arch, "kernel_name": solution.kernel_name, "source_sha256": src.sha256,
           "compiled": False, "compiler": None, "code_object_bytes": None, "mfma_count": None, "error": None}
    status = EXIT_OK
    cache = BinaryCache()                       # a second run of the same kernel does not compile
    with tempfile.TemporaryDirectory(prefix="dgrad-compile-") as tmp:
        try:
            if t.vendor == "amd":
                if find_amd_clang() is None:
                    lines.append("Code object: not built (no clang with AMDGPU targets found; "
                                 "install clang-19 and lld-19)")
                else:
                    co = compile_amd(src.text, t.arch, tmp, "dgrad", cache=cache)
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
                    b = inspect_nvidia(src.text, t.arch, tmp, "dgrad", cache=cache)
                    rec.update(compiled=True, compiler="nvcc", code_object_bytes=len(b.cubin),
                               resources={"registers": b.registers, "spill_store_bytes": b.spill_store_bytes,
                                          "spill_load_bytes": b.spill_load_bytes, "stack_bytes": b.stack_bytes})
                    lines.append(f"Cubin: {len(b.cubin)} bytes")
                    lines.append(f"Resources: {b.registers} registers, {b.spill_store_bytes} bytes spill stores, "
                                 f"{b.stack_bytes} bytes stack")
            if rec["compiled"] and solution.reduce is not None:     # split-K's reduction kernel too
                red = solution.reduce.emit(t.vendor, t.arch)
                size = (len(compile_amd(red.text, t.arch, tmp, "reduce", cache=cache).data) if t.vendor == "amd"
                        else len(inspect_nvidia(red.text, t.arch, tmp, "reduce", cache=cache).cubin))
                rec["reduce_code_object_bytes"] = size
                lines.append(f"Split-K reduction {red.name}: {size} bytes")
        except CompileError as e:
            first = _compile_cause(str(e))
            rec["error"] = str(e)
            lines.append(f"Compile FAILED: {first.strip()}")
            status = EXIT_WORKER_FAILED
    for text in cache.warnings:                 # e.g. the kernel cache was unusable
        warn(text)
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
    split_k_reduce: str | None = None
    print_name_only: bool = False
    ref: str = "auto"
    timeout: float | None = None
    warmup: int = 1
    perfdb: str | None = None
    use_perfdb: bool = True
    environ: dict | None = None
    perf_config_label: str = "--perf-config"
    """Where ``perf_config`` came from, as the run's note names it: the option, or a search's
    winner that runs without the perf-db (:func:`search_first`)."""


DTYPE_BASE = {"fp32": "conv", "fp16": "convfp16", "bf16": "convbfp16"}
"""MIOpenDriver's base argument of a data type (``ConvDataType`` in driver_arguments.cpp)."""
ENFORCE_NONE, ENFORCE_DB_UPDATE, ENFORCE_SEARCH, ENFORCE_SEARCH_DB_UPDATE, ENFORCE_DB_CLEAN = 1, 2, 3, 4, 5
FIND_MODE_FAST = 2


def search_first(tokens, cmd, device, o: RunOptions, menv) -> tuple:
    """MIOpenDriver's ``-s 1`` (exhaustive search) and ``MIOPEN_FIND_ENFORCE``/``MIOPEN_FIND_MODE``
    as they apply to this solver (see :mod:`driver.miopen_env`): search -- run ``tune`` on
    the line with its defaults, storing the winner in the perf-db -- when asked, then let
    the run read the perf-db as usual.

    Returns:
        ``(notes, record, options)``: lines for the output, the search's record for
        ``--json`` (None when none ran), and the run's options (with ``--no-perfdb`` the
        winner becomes the run's config, its note naming the search, not ``--perf-config``).
    """
    from miopen_solver.errors import PerfDbError
    from miopen_solver.perfdb import PerfDb
    from .options import OutputError
    from .tune_cmd import TuneOptions, tune_line

    problem = cmd.problem
    asked = int(cmd.flags["search"]) != 0
    enforce, mode = menv.find_enforce, menv.find_mode
    miopen_env.log(5, "GetFindModeValue", f"MIOPEN_FIND_MODE = {menv.mode_name}({mode})")
    if menv.only_solver:
        miopen_env.log(5, "GetEnvFindOnlySolver", f"{SOLVER_ID}")
    if o.print_name_only:
        return [], None, o
    if device.compile_only:         # asked for a search that needs a device: say so, run none
        if not asked and enforce not in (ENFORCE_SEARCH, ENFORCE_SEARCH_DB_UPDATE):
            return [], None, o
        why = "-s 1" if asked else f"MIOPEN_FIND_ENFORCE={menv.enforce_name}"
        arch = device.target.arch
        return [f"Info: '{why}' is not honoured: the search times the candidate configs on a {arch} device and "
                f"there is no {arch} device here (compile-only run: the perf-db or default config is compiled); "
                f"search where that device is, or with --backend cpu on the CPU engine (a simulation)"], None, o
    # the key as the run looks it up (problem_key: both MIOpen's x spelling and the legacy - one)
    key, arch = problem.problem_key(), device.perfdb_arch
    if enforce == ENFORCE_DB_CLEAN:
        removed = False
        if o.use_perfdb:
            try:
                with PerfDb(o.perfdb) as db:
                    removed = db.remove(key, arch, SOLVER_NAME)
            except PerfDbError as e:
                raise UserError(f"MIOPEN_FIND_ENFORCE=DB_CLEAN: {perfdb_label(o.perfdb)}: {e.reason}; "
                                f"{PERFDB_ALLOWED}, or --no-perfdb") from None
        miopen_env.log(5, "RemoveRecordUnsafe", f"Removing record: {problem.miopen_db_key()}")
        notes = [f"Info: MIOPEN_FIND_ENFORCE=DB_CLEAN: {'removed the' if removed else 'no'} perf-db record of this "
                 f"problem for {arch}" + ("; '-s 1' is not honoured (DB_CLEAN blocks searching)" if asked else "")]
        return notes, None, o
    if not asked and enforce not in (ENFORCE_SEARCH, ENFORCE_SEARCH_DB_UPDATE):
        return [], None, o
    why = "-s 1" if asked else f"MIOPEN_FIND_ENFORCE={menv.enforce_name}"
    if o.perf_config is not None:
        return [f"Info: '{why}' is not honoured: --perf-config names the config"], None, o
    if mode == FIND_MODE_FAST:
        if enforce == ENFORCE_NONE:
            return [f"Info: '{why}' is not honoured with MIOPEN_FIND_MODE=FAST (no search; the perf-db or "
                    f"default config runs)"], None, o
        miopen_env.log(5, "IsEnabled", "MIOPEN_FIND_MODE is set to NORMAL due to unsafe combination with "
                                       "MIOPEN_FIND_ENFORCE")
    has = unusable = None
    if o.use_perfdb:                    # a record the run would use: one it would ignore is none
        try:
            with PerfDb(o.perfdb) as db:
                cfg, rec, _ = DgradSolver().lookup_performance_config(problem, device.target, db, arch=arch)
                has, unusable = (rec, None) if cfg is not None else (None, rec)
        except PerfDbError:
            has = None                  # the run warns about it
    # an unusable record is replaced by the winner, however fast its time says it was
    force = enforce in (ENFORCE_DB_UPDATE, ENFORCE_SEARCH_DB_UPDATE) or unusable is not None
    if has is not None and not force:
        shown = f"tuned {has.time_ms:.6f} ms" if has.time_ms is not None else "imported"
        again = "DB_UPDATE" if asked else "SEARCH_DB_UPDATE"     # DB_UPDATE alone searches only with -s 1
        return [f"Info: '{why}': the perf-db already has this problem's config ({shown}); not searching "
                f"(MIOPEN_FIND_ENFORCE={again} searches again)"], None, o
    topts = TuneOptions(backend=o.backend, arch=o.arch, timeout=o.timeout, warmup=o.warmup, perfdb=o.perfdb,
                        store=o.use_perfdb, ref=o.ref, quiet=True, progress=False, as_json=True,
                        environ=o.environ, force_store=force)
    try:
        _, out = tune_line(tokens, topts)
    except OutputError as e:
        raise UserError(f"'{why}': the search ran but {e}") from None
    rec = json.loads(out[0])
    winner = rec["winner"]
    summary = {"reason": why, "timed": rec["timed"], "candidates": rec["candidates"],
               "winner": winner["perf_config"] if winner else None,
               "winner_ms": winner["average_ms"] if winner else None, "perfdb": rec["perfdb"]}
    if winner is None:
        return [f"Search ({why}): timed {rec['timed']} configs; none timed and verified, the default runs"], summary, o
    where = f"stored in {rec['perfdb']['path']}" if rec["perfdb"] and rec["perfdb"]["written"] else \
        ("perf-db not written (--no-perfdb)" if not o.use_perfdb else "the perf-db kept its faster record")
    note = (f"Search ({why}): timed {rec['timed']} of {rec['candidates']} configs; winner {winner['perf_config']} "
            f"({winner['average_ms']:.6f} ms), {where}")
    if not o.use_perfdb:
        from dataclasses import replace as _replace
        o = _replace(o, perf_config=winner["perf_config"], perf_config_label=f"the {why} search's winner")
    return [note], summary, o


def timing_summary(rec: dict) -> dict:
    """MIOpen's average plus median and min (ms) of a timing worker's record."""
    import statistics
    t = rec["times_ms"]
    return {"average_ms": report.miopen_average_ms(t), "median_ms": float(statistics.median(t)),
            "min_ms": float(min(t))}


def _failed_line(result) -> str:
    return f"RunBackwardGPU() FAILED, {result.reason}"


def run_line(tokens, opts: RunOptions | None = None, *, emit=None, **kw) -> tuple:
    """Run one MIOpenDriver line. Returns ``(exit_status, stdout_lines)``.

    ``opts`` (or keyword arguments naming :class:`RunOptions` fields) are our options.
    With ``emit`` (a callable taking one line) the text lines known before any worker
    starts or any compiler runs (the ``MIOpenDriver ...`` echo, ``PRNG seed``, the
    ``Timestamp`` line, the notes) go to ``emit`` then -- after every check of the input,
    so a user error still leaves stdout empty -- and the returned lines are the rest; a
    Ctrl-C or SIGTERM during the run keeps them. ``--json`` output is never split.
    Exit status: 0 ok, 1 verification failed, 3 a worker (or a compile-only build) failed.

    Raises:
        UserError, MiopenCommandError, PerfConfigError, RuntimeUnavailable, ValueError:
            user mistakes (the CLI prints one line and exits 2).
    """
    o = opts or RunOptions(**kw)
    check_count("--warmup", o.warmup, 0, MAX_LAUNCHES)
    menv = miopen_env.read(o.environ)
    miopen_env.configure_logging(menv)
    timeout = workers.job_timeout(o.timeout)
    cmd = parse_line(tokens)
    problem = cmd.problem
    dump = int(cmd.flags["dump_output"]) != 0
    if dump and not o.print_name_only:
        check_dump_dir()

    device = resolve_device(o.backend, o.arch, timeout)
    t_aux = time.perf_counter()         # MIOpen's "auxiliary API calls": applicability, config, spec
    target = device.target
    cmd, math_fallback = for_target(cmd, target)       # -M 0 where there is no TF32: IEEE fp32
    problem = cmd.problem
    check_applicable(problem, target)
    ref_kind = resolve_reference(o.ref, device, o.environ) if not device.compile_only else None
    if dump and not o.print_name_only and not device.compile_only:
        check_dump_files(bool(cmd.verify), ref_kind)
    immediate = not find_mode(cmd)      # -S >= 0: MIOpen's immediate mode
    search_notes, search_rec, o = search_first(tokens, cmd, device, o, menv)
    solution = with_note(find_solution(problem, device, o), math_fallback)
    for text in solution.warnings:
        warn(text)
    spec = solution.spec
    aux_ms = (time.perf_counter() - t_aux) * 1e3
    if o.print_name_only:
        if int(cmd.flags["search"]):
            source = {"perf-config": "--perf-config", "perfdb": "perf-db"}.get(solution.source, solution.source)
            warn(f"'{cmd.given('search')}' not honoured with --print-name-only: no "
                 f"search is run; the name is the {source} config's")
        return EXIT_OK, [json_text({"kernel_name": solution.kernel_name}) if o.as_json else solution.kernel_name]

    base = dict(command=cmd.command_line(), problem=problem, solution=solution)
    lines = [report.echo_line(cmd.argv)]
    more_infos = info_lines(cmd, device, target, o.environ)
    # --json's "info": every Info: line the text prints, in its order (the search's first)
    infos = [n for n in search_notes if n.startswith("Info: ")] + more_infos
    if device.compile_only:
        known = lines + search_notes + list(solution.notes) + more_infos
        if immediate:       # the solution list needs no launch (its workspace is the solution's)
            known += report.immediate_lines(solution.tuned_ms, solution.workspace_bytes)
        if emit is not None and not o.as_json:
            for text in known:
                emit(text)
        status, more, crec = compile_only(solution)
        if o.as_json:
            rec = report.json_record(**base, backend=None, seed=None, status="ok" if status == 0 else "compile_failed",
                                     compile_only=crec, immediate=immediate)
            if search_notes:
                rec["search"] = {"ran": False, "notes": search_notes}
            rec["info"] = infos
            return status, [json_text(rec, sort_keys=True)]
        return status, (known if emit is None else []) + more

    seed = prng.resolve_seed(o.environ)
    lines.append(report.seed_line(seed))
    if cmd.time:                    # MIOpenDriver 3.5 main.cpp: SysInfo after the buffers
        lines.append(report.sysinfo_line(device.name if device.backend != "cpu" else None,
                                          report.stamp_time(o.environ)))
    lines.extend(search_notes)
    lines.extend(solution.notes)
    f = cmd.flags
    graph = int(f["use_hip_graph"]) != 0
    lines.extend(more_infos)
    dy_file, w_file = check_input_files(cmd)
    if cmd.verify:
        for text in nonfinite_input_notes(cmd):
            warn(text)
    # MIOpenDriver reads -e, then -D, while allocating its buffers, after the seed line
    at = _after_seed(lines)
    lines[at:at] = [report.read_file_line(path) for path in (w_file, dy_file) if path]
    plan = memory.engine_plan(spec)

    def needs_for(n, verify):
        return memory.one_after_another(memory.run_needs(
            problem.replace(N=n), plan, device.backend, time=cmd.time, verify=verify and bool(cmd.verify),
            reference_kind=ref_kind, dump=dump, files=(bool(dy_file), bool(w_file))))
    refusal = workers.memory_refusal(needs_for, problem.N, verify_flag="-V 0" if cmd.verify else None)
    if refusal:
        raise UserError(refusal)
    job_args = dict(solution=solution.to_record(), backend=device.backend,
                    seed=seed, bias=cmd.bias, dy_file=dy_file, w_file=w_file)
    if emit is not None and not o.as_json and not dump:      # every check passed: what is known is final
        for text in lines:
            emit(text)
        lines = []
    if menv.logging_cmd:                # the call is made now (not on a compile-only or name-only run)
        for text in miopen_env.command_log_lines(problem, DTYPE_BASE[problem.dtype], immediate):
            click.echo(text, err=True)

    timing = summary = failure = None
    launches = 0
    # MIOpenDriver always runs the backward pass: with -t 1 the timed launches are that run;
    # with neither -t 1, -V 1 nor -o 1 the timing worker launches the kernel once, untimed
    # (nothing printed); the verification worker starts only to verify or to dump.
    launch_once = not cmd.time and not cmd.verify and not dump
    if cmd.time or launch_once:
        job = workers.make_job("timing", **job_args, iters=cmd.iters if cmd.time else 1,
                               warmup=o.warmup if cmd.time else 0, graph=graph and cmd.time)
        res = workers.run_one(job, timeout=timeout)
        if res.ok:
            launches += res.record["launches"]
            if cmd.time:
                timing, summary = res.record, timing_summary(res.record)
            for text in res.record.get("warnings", ()):      # e.g. the kernel cache was unusable
                warn(text)
        else:
            failure = ("timing", res)
    vrec = None
    if failure is None and (cmd.verify or dump):
        job = workers.make_job("verification", **job_args, verify=bool(cmd.verify), reference=ref_kind, dump=dump)
        res = workers.run_one(job, timeout=timeout)
        if res.ok:
            vrec = res.record
            launches += vrec["launches"]
        elif dump and res.error_type == "FileError":     # a dump_*.bin write failed: the user's disk
            raise UserError(f"-o 1: {res.reason.split(': ', 1)[1]}")
        else:
            failure = ("verification", res)

    verdict = Verdict(**vrec["verdict"]) if vrec and vrec["verdict"] else None
    if failure is not None:
        status, state = EXIT_WORKER_FAILED, "worker_failed"
    elif verdict is not None and not verdict.ok:
        status, state = EXIT_VERIFY_FAILED, "verify_failed"
    else:
        status, state = EXIT_OK, "ok"

    if o.as_json:
        rec = report.json_record(**base, backend=device.backend, seed=seed, status=state, timing=timing,
                                 immediate=immediate, launches=launches,
                                 verdict=verdict, reference=vrec["reference"] if vrec else None,
                                 verify_pid=vrec["pid"] if vrec else None,
                                 failure={"worker": failure[0], **failure[1].as_dict()} if failure else None)
        if search_rec is not None:
            rec["search"] = {"ran": True, **search_rec}
        elif search_notes:          # asked, and not run: why
            rec["search"] = {"ran": False, "notes": search_notes}
        rec["info"] = infos
        return status, [json_text(rec, sort_keys=True)]

    # -o 1 (its lines are not streamed): MIOpenDriver writes dY and W while allocating the
    # buffers (after the seed line, before the Timestamp), dX of the run after its stats and
    # the CPU reference's dX while verifying, before the verdict
    wrote = {p: f"Wrote output to file {p}" for p in (vrec["dumps"] if vrec else [])}
    at = _after_seed(lines)
    while at < len(lines) and lines[at].startswith(report.READ_FILE):
        at += 1
    lines[at:at] = [wrote[p] for p in ("dump_wei.bin", "dump_dout.bin") if p in wrote]
    if immediate:
        lines.extend(report.immediate_lines(solution.tuned_ms, solution.workspace_bytes))
    if timing is not None:
        if cmd.wall:
            lines.append(report.wall_line(timing["wall_ms"], aux_ms, 0.0))
        lines.append(report.algorithm_line())     # MIOpenDriver 3.5: Find and immediate paths
        lines.append(report.kernel_time_line(summary["average_ms"]))
        lines.extend(report.stats_lines(problem, summary["average_ms"]))
    elif cmd.wall and not cmd.time:
        lines.append(report.wall_ignored_line(cmd.wall))
    lines.extend(wrote[p] for p in ("dump_bwd_din_gpu.bin", "dump_bwd_din_cpu.bin") if p in wrote)
    if failure is not None:
        lines.append(_failed_line(failure[1]))
    elif verdict is not None:
        lines.append(report.verify_line(verdict, vrec["reference"]))
    return status, lines
