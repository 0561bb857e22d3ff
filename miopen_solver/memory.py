"""How much host and device memory a run's worker processes need, before anything is allocated.

A pure estimate: from the problem, what the CPU engine allocates for the solution
(:func:`engine_plan`) and what the run does, each worker's peak (:class:`Need`), counted from
the code that allocates:

* inputs (every worker): dY and W in the storage type; while MIOpenDriver's PRNG generates
  a tensor it holds :data:`GENERATE_BYTES` per element (``prng.generate_inputs``: 8-byte
  raw draws and their fp32 values at once); ``-D``/``-e`` files are read as they are;
* the CPU engine (``runtime/cpu.py``, ``direct.py``'s ``run_direct_cpu``) beside them: its
  dX, the zero-padded fp32 dY and fp32 W of the GEMM path and a few chunks of at most
  ``CHUNK_BYTES`` (or one padded row), the zero fill's mask of a band of rows
  (``cpu.zero_fill_bytes``), layout conversions, split-K's fp32 workspace slices and the
  reduction's fp32 temporaries and mask (one launch's); or the direct schedule's fp32 dY,
  W and dX, two phase grids and a bool per row and column; a GPU run holds its host dX
  only. No step allocates index arrays (int64 per pixel): masked stores and strided slices;
* the verification worker's reference (``reference.py``): a CPU reference bigger than one
  block is computed and compared block by block (:func:`~miopen_solver.reference.block_bytes`),
  a smaller one is kept whole between jobs (8 bytes per dX element); the GPU reference is
  a float32 dX; ``-o 1`` copies the tensor it writes;
* :data:`PROCESS_BYTES` for the interpreter, numpy and BLAS of each process.

Device: dY, W and dX (or the float32 dX of the GPU reference) at once, each rounded up to
:data:`DEVICE_GRANULE`.

:func:`host_memory` reads what the host can give (``/proc/meminfo`` MemAvailable, the
cgroup's memory limit, ``RLIMIT_AS`` less what a worker maps before its tensors) and
:func:`shortfall` says, as data, why needs do not fit, naming the tighter of the two limits.
The library never prints; the driver refuses.
"""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass, replace

from . import reference
from .problem import ConvProblem

PROCESS_BYTES = 128 << 20
"""Host bytes of a worker before any tensor: interpreter, numpy, BLAS (about 80 MiB resident
measured, rounded up)."""
GENERATE_BYTES = 12
"""Host bytes per element while ``prng.generate_inputs`` generates a tensor (uint64 raw
draws, then their fp32 values)."""
UFUNC_BUFFER_BYTES = 256 << 10
"""numpy's iterator buffers for an in-place add or a masked store over strided operands
(8192 elements of each operand; about 60 KiB measured, rounded up)."""
DEVICE_GRANULE = 2 << 20
"""Device allocations are counted in whole 2 MiB pages."""
UNLIMITED = 1 << 60
"""A cgroup limit at or above this is no limit (cgroup v1 writes 2^63 rounded to pages)."""
THREAD_MAP_BYTES = 64 << 20
"""Address space a worker maps per thread beyond this process's size and its counted needs:
OpenBLAS's buffer of each of its threads (32 MiB) and malloc's per-thread arena. 40 MiB per
thread measured (VmPeak of a verification worker against its estimate, OpenBLAS 0.3.31, one
and two threads), rounded up: a hint that just fitted RLIMIT_AS by this process's size alone
let the worker die in OpenBLAS."""


def format_bytes(n: int) -> str:
    """``n`` bytes for a message: ``9.31 GiB``, ``4.5 MiB``, ``1.1 KiB`` or ``12 bytes``."""
    for unit, size, fmt in (("GiB", 1 << 30, "%.2f"), ("MiB", 1 << 20, "%.1f"), ("KiB", 1 << 10, "%.1f")):
        if n >= size:
            return f"{fmt % (n / size)} {unit}"
    return f"{n} bytes"


def format_apart(needed: int, available: int) -> tuple:
    """:func:`format_bytes` of a need and what is available, with the exact byte counts
    added when the two would read the same (``6.0 MiB (6291456 bytes)``)."""
    a, b = format_bytes(needed), format_bytes(available)
    if a == b and needed != available:
        a, b = f"{a} ({needed} bytes)", f"{b} ({available} bytes)"
    return a, b


# --------------------------------------------------------------------- the estimate
@dataclass(frozen=True)
class EnginePlan:
    """What the CPU engine allocates beside the tensors for one solution: the direct
    schedule's phases (``direct``), the patch GEMM's chunks of images (``patch``), the NCHW
    pointwise GEMMs' chunks of images (``nchw_pw``), the NCHW TMA schedule's chunks of padded
    images (``nchw_tma``), or the GEMM path's fp32 dY padded by ``pad_rows`` rows and
    ``pad_cols`` columns in all (none without sub-GEMMs: ``gemm`` False), with ``split_k_bytes``
    for split-K through the workspace (its slices and the reduction's fp32 temporaries, one
    launch's: reused by every split-N launch). Independent of N.
    ``tf32``: the operands are rounded to TF32 first (in place on the GEMM path's copies, in
    chunks; the patch and NCHW pointwise GEMMs take rounded fp32 copies of dY and W).
    ``packed_w_bytes``: the group-pack schedules' block-diagonal W' and its fp32 copy."""

    direct: bool = False
    gemm: bool = True
    patch: bool = False
    nchw_pw: bool = False
    nchw_tma: bool = False
    pad_rows: int = 0
    pad_cols: int = 0
    split_k_bytes: int = 0
    tf32: bool = False
    packed_w_bytes: int = 0


def engine_plan(spec) -> EnginePlan:
    """The :class:`EnginePlan` of a spec (a :class:`~miopen_solver.solver.Solution`'s
    ``spec``): the padding follows the dY rows and columns its live taps read
    (:func:`~miopen_solver.runtime.cpu.read_bounds`), as the engine pads; O(taps of one
    axis), nothing per tap."""
    from .runtime.cpu import read_bounds
    if spec.schedule.direct:
        return EnginePlan(direct=True)
    tf32 = spec.math == "tf32"
    if spec.schedule.patch:
        return EnginePlan(patch=True, tf32=tf32)
    if spec.schedule.nchw_pointwise:
        return EnginePlan(nchw_pw=True, tf32=tf32)
    if spec.schedule.nchw_native:
        return EnginePlan(nchw_tma=True)
    if spec.schedule.group_pack:      # the packed problem's GEMM path over W' (pack x W's elements)
        p = spec.problem
        return replace(engine_plan(spec.gemm), packed_w_bytes=(p.elem_bytes + 4) * spec.pack * p.w_elems)
    p = spec.problem
    if not spec.sub_gemms:
        return EnginePlan(gemm=False)
    ho_lo, ho_hi, wo_lo, wo_hi = read_bounds(p, spec.sub_gemms)
    # the reduction (splitk.SplitKReduce.apply): its fp32 sum, the cast, an NCHW copy, the
    # covered mask (a bool per pixel, from lists of a bool per row and column)
    reduce = (4 + 2 * p.elem_bytes) * p.dx_elems + p.Hi * p.Wi + 9 * (p.Hi + p.Wi)
    split_k = spec.workspace_bytes + reduce if getattr(spec, "workspace_reduce", False) else 0
    return EnginePlan(pad_rows=ho_hi - ho_lo + 1 - p.Ho, pad_cols=wo_hi - wo_lo + 1 - p.Wo,
                      split_k_bytes=split_k, tf32=tf32)


@dataclass(frozen=True)
class Need:
    """One worker process's memory.

    Attributes:
        role: ``timing``, ``verification`` or ``launch`` (the timing worker launching once,
            untimed: ``-t 0 -V 0``).
        host: host bytes at its peak (:data:`PROCESS_BYTES` included).
        resident: host bytes it keeps between jobs (its inputs, a kept reference).
        device: device bytes at its peak (0 on the CPU engine).
        parts: ``((what, bytes), ...)``: what the peak is made of beside the process.
    """

    role: str
    host: int
    resident: int
    device: int
    parts: tuple

    def describe(self, process: int = PROCESS_BYTES) -> str:
        """``verification worker: process 128.0 MiB + dY 1.00 GiB + ...`` (the peak's parts,
        ``process`` bytes for the process itself)."""
        return Peak(self).describe(process)


@dataclass(frozen=True)
class Peak:
    """The host bytes of workers at their joint peak: one worker at its own peak (``need``)
    and what is held beside it then (``beside``: ``((what, bytes), ...)``, e.g. the other
    worker's inputs kept between jobs). ``host`` is their sum, and :meth:`describe` lists
    every part of it."""

    need: Need
    beside: tuple = ()

    @property
    def host(self) -> int:
        return self.need.host + _total(self.beside)

    def parts(self, process: int = PROCESS_BYTES) -> tuple:
        """``((what, bytes), ...)`` adding up to :attr:`host` (with ``process`` bytes for
        the worker's process itself in place of :data:`PROCESS_BYTES`)."""
        own = ((f"{self.need.role} worker: process", process),) + tuple(self.need.parts)
        return own + tuple(self.beside)

    def describe(self, process: int = PROCESS_BYTES) -> str:
        """``timing worker: process 128.0 MiB + generating dY 42.06 GiB + verification
        worker holding 7.13 GiB``: every part of the peak."""
        return " + ".join(f"{what} {format_bytes(b)}" for what, b in self.parts(process) if b)


def _tensors(p: ConvProblem) -> tuple:
    """Storage bytes of dY, W and dX."""
    return p.dy_elems * p.elem_bytes, p.w_elems * p.elem_bytes, p.dx_elems * p.elem_bytes


def _inputs(p: ConvProblem, files: tuple) -> tuple:
    """``(held, generating)``: the parts of dY and W once made, and the parts while the PRNG
    generates them (dY first, then W beside it); a tensor read from a file is its bytes."""
    dy, w, _ = _tensors(p)
    gen_dy = dy if files[0] else GENERATE_BYTES * p.dy_elems
    gen_w = w if files[1] else GENERATE_BYTES * p.w_elems
    held = (("dY", dy), ("W", w))
    generating = max(((("generating dY", gen_dy),), (("dY", dy), ("generating W", gen_w))), key=_total)
    return held, generating


def _total(parts) -> int:
    return sum(b for _, b in parts)


def cpu_engine_bytes(p: ConvProblem, plan: EnginePlan) -> int:
    """Peak host bytes of one CPU-engine run beside its inputs, its dX included."""
    from .runtime.cpu import CHUNK_BYTES, zero_fill_bytes
    from .tf32 import ROUND_TEMP_BYTES
    s, (_, _, dx) = p.elem_bytes, _tensors(p)
    relayout = dx if p.in_layout != "NHWC" else 0
    if plan.direct:
        widen = 0 if s == 4 else 4 * (p.dy_elems + p.w_elems)            # fp32 copies of dY and W
        phase = 4 * p.N * -(-p.Hi // p.sH) * -(-p.Wi // p.sW) * p.C
        from .transpose import memory_order
        dy_copy = p.dy_elems * s if memory_order(p, "dY") == "NCHW" else 0   # the dY transform's copy
        idle = p.Hi + p.Wi                          # a bool per row and column: the phases no tap reaches
        return widen + 4 * p.dx_elems + 2 * phase + dx + dy_copy + relayout + idle + UFUNC_BUFFER_BYTES
    if plan.patch:      # fp32 W; per chunk of images: fp32 dY, the GEMM output, its transpose and cast
        from .patch import CHUNK_BYTES as PATCH_CHUNK
        per_image = 4 * p.Ho * p.Wo * p.Y * p.X * p.C
        images = min(p.N, max(1, PATCH_CHUNK // per_image))
        rounded = 4 * (p.dy_elems + p.w_elems) if plan.tf32 else 0         # TF32-rounded copies
        return dx + relayout + 4 * p.w_elems + images * (4 * p.dy_elems // p.N + 3 * per_image) + rounded
    if plan.nchw_pw:    # W^T and its fp32 copy; per chunk of images: fp32 dY, the GEMM output, its cast
        from .nchw_pw import CHUNK_BYTES as NCHW_PW_CHUNK     # (and a patch filter's scatter copy)
        per_image = 4 * p.C * p.Hi * p.Wi
        images = min(p.N, max(1, NCHW_PW_CHUNK // per_image))
        rounded = 4 * (p.dy_elems + p.w_elems) if plan.tf32 else 0         # TF32-rounded copies
        scatter = dx // p.N if p.Y * p.X > 1 else 0
        return dx + 5 * p.w_elems + images * (4 * p.dy_elems // p.N + per_image + dx // p.N + scatter) + rounded
    if plan.nchw_tma:   # W^T and its fp32 copy; per chunk of images: fp32 dY, a tap's window and product,
        from .nchw_tma import CHUNK_BYTES as NCHW_TMA_CHUNK     # the sum, its cast (no padding)
        per_image = 4 * p.C * p.Hi * p.Wi
        images = min(p.N, max(1, NCHW_TMA_CHUNK // per_image))
        window = 4 * p.K * (p.Ho * p.Wo + p.Hi * p.Wi)
        return dx + 5 * p.w_elems + images * (window + 2 * per_image + dx // p.N)
    if not plan.gemm:
        return dx + relayout + zero_fill_bytes(p)
    wp = p.Wo + plan.pad_cols
    padded = 4 * p.N * (p.Ho + plan.pad_rows) * wp * p.K
    chunks = 6 * max(CHUNK_BYTES, 4 * p.C * wp)
    converts = max(p.dy_elems * s if p.out_layout != "NHWC" else 0, p.w_elems * s if p.fil_layout != "NHWC" else 0,
                   relayout, chunks)
    rounding = ROUND_TEMP_BYTES if plan.tf32 else 0                        # in place, in chunks
    return (dx + padded + 4 * p.w_elems + converts + zero_fill_bytes(p) + rounding + plan.split_k_bytes
            + plan.packed_w_bytes)


def device_bytes(*buffers) -> int:
    """Device bytes of buffers of these sizes, each rounded up to :data:`DEVICE_GRANULE`."""
    return sum(-(-b // DEVICE_GRANULE) * DEVICE_GRANULE for b in buffers)


def _need(role: str, phases, resident, device: int) -> Need:
    peak = tuple(max(phases, key=_total))
    return Need(role, PROCESS_BYTES + _total(peak), PROCESS_BYTES + _total(resident), device, peak)


def timing_need(p: ConvProblem, plan: EnginePlan, backend: str, files: tuple = (False, False)) -> Need:
    """The timing worker: its inputs, and the CPU engine's run beside them (a GPU holds the
    three tensors on the device and nothing more on the host)."""
    held, generating = _inputs(p, files)
    dy, w, dx = _tensors(p)
    if backend == "cpu":
        return _need("timing", (generating, held + (("CPU engine", cpu_engine_bytes(p, plan)),)), held, 0)
    return _need("timing", (generating, held), held, device_bytes(dy, w, dx))


def verification_need(p: ConvProblem, plan: EnginePlan, backend: str, reference_kind: str | None,
                      dump: bool = False, files: tuple = (False, False)) -> Need:
    """The verification worker: inputs, one run, ``-o 1`` dumps and the reference
    (``reference_kind`` ``cpu``, ``gpu`` or None for none) with its comparison."""
    held, generating = _inputs(p, files)
    dy, w, dx = _tensors(p)
    run = cpu_engine_bytes(p, plan) if backend == "cpu" else dx
    out = held + (("dX", dx),)
    phases = [generating, held + (("CPU engine" if backend == "cpu" else "dX", run),)]
    if dump:
        phases += [held + (("dump copy", max(dy, w)),), out + (("dump copy", dx),)]
    kept = ()
    nb, hb = reference.block_shape(p)
    block = reference.block_bytes(p, nb * hb * p.Wi)
    if reference_kind == "gpu":
        kept = (("GPU reference", 4 * p.dx_elems),)
        phases.append(out + kept + (("comparison block", block),))
    elif reference_kind == "cpu" and (nb, hb) == (p.N, p.Hi):
        kept = (("float64 reference", 8 * p.dx_elems),)
        phases.append(out + kept + (("reference block", block),))
    elif reference_kind == "cpu":
        phases.append(out + (("float64 reference block", block),))
    device = 0
    if backend != "cpu":
        device = max(device_bytes(dy, w, dx), device_bytes(dy, w, 4 * p.dx_elems) if reference_kind == "gpu" else 0)
    return _need("verification", phases, held + kept, device)


def run_needs(p: ConvProblem, plan: EnginePlan, backend: str, *, time: bool, verify: bool,
              reference_kind: str | None, dump: bool = False, files: tuple = (False, False)) -> list:
    """The workers a plain run starts, one after the other: timing (``-t 1``), then
    verification (to verify or to dump); with neither (``-t 0 -V 0``, no ``-o 1``) the
    timing worker launches the kernel once, untimed (a ``launch`` need: no reference)."""
    needs = []
    if time:
        needs.append(timing_need(p, plan, backend, files))
    elif not verify and not dump:
        needs.append(replace(timing_need(p, plan, backend, files), role="launch"))
    if verify or dump:
        needs.append(verification_need(p, plan, backend, reference_kind if verify else None, dump, files))
    return needs


def one_after_another(needs) -> tuple:
    """``(total, needs)`` of workers that run one after the other (each ends before the next
    starts): the total is the largest peak (:func:`shortfall` describes that worker's)."""
    needs = list(needs)
    return max(n.host for n in needs), needs


def side_by_side(peaks) -> Peak:
    """The largest of the :class:`Peak` s workers that live at the same time reach (each
    worker at its own peak, the others holding what they keep): the joint peak that
    :func:`shortfall` describes part by part."""
    return max(peaks, key=lambda p: p.host)


# --------------------------------------------------------------------- what the host has
@dataclass(frozen=True)
class HostMemory:
    """What the host can give the workers.

    Attributes:
        available: bytes new allocations can take (None: unknown): the smaller of
            MemAvailable and the headroom under the cgroup's memory limit.
        source: where ``available`` comes from (``MemAvailable`` or the cgroup file).
        address_space: ``RLIMIT_AS`` (each process's virtual size), None when unlimited.
        baseline: this process's virtual size now -- a worker's before its tensors.
        mapped: what a worker maps beyond ``baseline`` and its counted needs
            (:data:`THREAD_MAP_BYTES` per thread of this process, which has loaded the same
            BLAS with its threads).
    """

    available: int | None
    source: str
    address_space: int | None
    baseline: int
    mapped: int = 0

    @property
    def process(self) -> int:
        """A worker's address space before its tensors: ``baseline + mapped``."""
        return self.baseline + self.mapped


def _read(path: str) -> str | None:
    try:
        with open(path) as fh:
            return fh.read()
    except (OSError, UnicodeDecodeError):
        return None


def _field(text: str | None, name: str) -> int | None:
    """The number after ``name`` on its line (``MemAvailable:  123 kB`` -> 123, times 1024
    when the line says kB), or None."""
    for line in (text or "").splitlines():
        parts = line.replace(":", " ").split()
        if len(parts) >= 2 and parts[0] == name and parts[1].isdigit():
            return int(parts[1]) * (1024 if parts[2:3] == ["kB"] else 1)
    return None


def _cgroup_headroom(proc: str, root: str) -> tuple:
    """``(bytes, file)``: the least headroom under a memory limit of this process's cgroup
    and its ancestors (limit - (usage - inactive file cache)), v2 or v1; ``(None, "")``
    when no limit is set or readable."""
    best, where = None, ""
    for line in (_read(os.path.join(proc, "self", "cgroup")) or "").splitlines():
        fields = line.split(":", 2)
        if len(fields) != 3:
            continue
        if fields[0] == "0" and fields[1] == "":
            base, files = root, ("memory.max", "memory.current", "inactive_file")
        elif "memory" in fields[1].split(","):
            base, files = os.path.join(root, "memory"), ("memory.limit_in_bytes", "memory.usage_in_bytes",
                                                           "total_inactive_file")
        else:
            continue
        rel = fields[2].strip("/")
        while True:
            d = os.path.join(base, rel) if rel else base
            limit = (_read(os.path.join(d, files[0])) or "").strip()
            usage = (_read(os.path.join(d, files[1])) or "").strip()
            if limit.isdigit() and usage.isdigit() and int(limit) < UNLIMITED:
                cache = _field(_read(os.path.join(d, "memory.stat")), files[2]) or 0
                room = int(limit) - max(0, int(usage) - cache)
                if best is None or room < best:
                    best, where = room, os.path.join(d, files[0])
            if not rel:
                break
            rel = os.path.dirname(rel)
    return best, where


def host_memory(proc: str = "/proc", cgroup_root: str = "/sys/fs/cgroup") -> HostMemory:
    """What this host can give now (see :class:`HostMemory`); paths for tests."""
    avail = _field(_read(os.path.join(proc, "meminfo")), "MemAvailable")
    source = "MemAvailable"
    room, where = _cgroup_headroom(proc, cgroup_root)
    if room is not None and (avail is None or room < avail):
        avail, source = max(0, room), f"cgroup limit {where}"
    status = _read(os.path.join(proc, "self", "status"))
    baseline = _field(status, "VmSize") or 0
    threads = _field(status, "Threads") or os.cpu_count() or 1
    return HostMemory(avail, source, address_space_limit(), baseline, THREAD_MAP_BYTES * threads)


def address_space_limit() -> int | None:
    """``RLIMIT_AS`` (``ulimit -v``) in bytes, None when unlimited."""
    soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    return None if soft == resource.RLIM_INFINITY else soft


def shortfall(host: HostMemory, total, needs, held: int = 0) -> str | None:
    """Why worker processes needing ``total`` host bytes at their joint peak (``needs``: each
    one's :class:`Need`) do not fit ``host``, as one sentence with the numbers; None when
    they fit. ``held``: bytes the workers hold now and give back (already not available).
    Both limits apply: the joint peak under what is available, and each worker's address
    space (:attr:`HostMemory.process` and its needs) under ``RLIMIT_AS``; when both are
    exceeded the sentence names the tighter one.

    ``total`` is a :class:`Peak` (workers side by side: :func:`side_by_side`), or bytes; the
    sentence lists the parts that make it up (bytes beyond the largest worker's own peak are
    named ``other memory beside it``), so they always add up to the total."""
    worst = max(needs, key=lambda n: n.host)
    if not isinstance(total, Peak):
        rest = total - worst.host
        total = Peak(worst, (("other memory beside it", rest),) if rest > 0 else ())
    memory = space = None
    if host.available is not None and total.host > host.available + held:
        need, have = format_apart(total.host, host.available + held)
        also = f" plus {format_bytes(held)} the workers hold now" if held else ""
        memory = f"host memory: needs {need} ({total.describe()}); {have} available ({host.source}{also})"
    if host.address_space is not None:
        n = max(needs, key=lambda n: n.host)
        size = host.process + n.host - PROCESS_BYTES
        if size > host.address_space:
            need, have = format_apart(size, host.address_space)
            space = (f"address space: needs {need} ({n.describe(host.process)}); "
                     f"RLIMIT_AS (ulimit -v) allows {have}")
    if memory and space:        # the tighter limit: the host bytes a worker may take under each
        tighter = host.address_space - host.process + PROCESS_BYTES < host.available + held
        return space if tighter else memory
    return memory or space
