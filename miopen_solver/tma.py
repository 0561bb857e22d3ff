"""Rules and geometry of the warp-specialised TMA schedule (:attr:`KernelSchedule.WGMMA_TMA`).

A producer (a warp, or a warpgroup beside two consumer warpgroups) issues tensor-memory copies (``cp.async.bulk.tensor``)
of whole A/B tiles onto mbarrier stages. Pointwise problems take flat GemmM rows; other
problems take boxes of a tilde sub-GEMM's (n, htilde, wtilde) pixel grid (:func:`tma_box`),
and TMA's zero fill outside dY is the padding. Sources: CUDA driver API
``cuTensorMapEncodeTiled`` (global strides multiples of 16 bytes, box sides <= 256), PTX ISA
``cp.async.bulk.tensor`` and the 128-byte swizzle (rows of 64 fp16/bf16 elements).
"""

from __future__ import annotations

from .config import KernelSchedule, PerfConfig
from .errors import PerfConfigError, require
from .problem import ConvProblem
from .target import Target
from .tilde import cached_decompose

_S = KernelSchedule.WGMMA_TMA.label

TMA_PRODUCER_THREADS = 32
"""The producer warp of a TMA block."""
WARPGROUP_PRODUCER_THREADS = 128
"""The producer of a TMA block with two consumer warpgroups (the ping-pong schedule's, and the
TMA schedules' 256-thread tiles): a whole warpgroup (one thread issues the copies), since
``setmaxnreg`` reallocates registers per warpgroup."""
WARPGROUP_REGISTERS = (40, 232)
"""Registers a thread of such a block's producer and consumer warpgroups holds after
``setmaxnreg`` (PTX ISA; CUTLASS's warp-specialised kernels use the same split): 40 x 128 +
232 x 256 = 64512 of a multiprocessor's 65536, so one block is resident and each consumer
thread has 232 registers where a 384-thread block would give it 168 (and a block with a
producer warp, 288 threads, also 168)."""
TMA_BOX_K = 64
"""k extent of a TMA box: one 128-byte swizzled row of fp16/bf16."""
TMA_MAX_STAGES = 8
"""Most pipeline stages of the TMA schedule (mbarrier pairs; the cp.async schedules stop at
:data:`miopen_solver.spec.MAX_STAGES`), where shared memory holds them."""
TMA_MAX_BOX = 256
"""Largest box side a tensor map takes (CUDA driver API, cuTensorMapEncodeTiled)."""


TMA_MIN_FILL = 0.75
"""Least share of a TMA tile's rows that hold dX pixels for the default to take it."""


def tma_fill(problem: ConvProblem, tile_m: int) -> float:
    """Share of a TMA tile's tile_m GEMM rows that hold box pixels: 1 for pointwise problems
    (flat rows), else box pixels / tile_m (:func:`tma_box`)."""
    if problem.is_pointwise:
        return 1.0
    bn, bh, bw = tma_box(problem, tile_m)
    return bn * bh * bw / tile_m


def tma_box(problem: ConvProblem, tile_m: int) -> tuple:
    """``(images, rows, columns)`` of the (n, htilde, wtilde) pixel grid per TMA output tile
    (see :attr:`DgradSpec.tma_box`), for the largest sub-GEMM slices."""
    p = problem
    subs = cached_decompose(p).sub_gemms
    h = max(s.h_slice for s in subs)
    w = max(s.w_slice for s in subs)
    if h * w <= tile_m:
        return (min(p.N, tile_m // (h * w)), h, w)
    if w <= tile_m:
        return (1, min(h, tile_m // w), w)
    return (1, 1, tile_m)


def tma_box_tiles(problem: ConvProblem, sub, box: tuple) -> int:
    """Boxes covering one sub-GEMM's (n, htilde, wtilde) grid (per column tile)."""
    bn, bh, bw = box
    return -(-problem.N // bn) * -(-sub.h_slice // bh) * -(-sub.w_slice // bw)


TMA_MAX_DIM = 1 << 32
"""Largest tensor extent a tensor map takes (elements, cuTensorMapEncodeTiled)."""
TMA_MAX_STRIDE = 1 << 40
"""Byte strides of a tensor map are below this and multiples of 16."""
TMA_ALIGN = 16
"""Byte multiple of a tensor map's strides, of a box's innermost extent and -- measured on the
H200, where a copy breaking it stops the kernel with an illegal-instruction error -- of the
innermost start coordinate of every copy."""


def map_reason(desc, elem_bytes: int) -> str | None:
    """Why the CUDA driver or the hardware would refuse the tensor map ``desc`` (a
    :class:`~miopen_solver.kernels.emit.TensorMapDesc` of ``elem_bytes``-byte elements), the
    first rule broken, or None. The rules of ``cuTensorMapEncodeTiled`` (CUDA driver API):
    rank 1-5; extents 1 .. 2^32; strides multiples of 16 bytes below 2^40; box sides 1 .. 256,
    the innermost a multiple of 16 bytes and, with a swizzle, at most its span (32, 64 or 128
    bytes)."""
    dims, strides, box = tuple(desc.dims), tuple(desc.strides), tuple(desc.box)
    name = f"the {desc.operand} tensor map"
    if not 1 <= len(dims) <= 5 or len(box) != len(dims) or len(strides) != len(dims) - 1:
        return f"{name} has rank {len(dims)} with {len(box)} box sides and {len(strides)} strides (rank 1-5)"
    for i, d in enumerate(dims):
        if not 1 <= d <= TMA_MAX_DIM:
            return f"{name}: extent {d} of dim {i} is outside 1 .. 2^32"
    for i, st in enumerate(strides, start=1):
        if st % TMA_ALIGN or not 0 < st < TMA_MAX_STRIDE:
            return f"{name}: the byte stride {st} of dim {i} is not a multiple of {TMA_ALIGN} below 2^40"
    for i, b in enumerate(box):
        if not 1 <= b <= TMA_MAX_BOX:
            return f"{name}: box side {b} of dim {i} is outside 1 .. {TMA_MAX_BOX}"
    inner = box[0] * elem_bytes
    if inner % TMA_ALIGN:
        return f"{name}: its box rows are {inner} bytes, not a multiple of {TMA_ALIGN}"
    swizzle = getattr(desc, "swizzle", 128)
    if swizzle and inner > swizzle:
        return f"{name}: its box rows are {inner} bytes, more than the {swizzle}-byte swizzle span"
    return None


def check_maps(maps, elem_bytes: int, label: str) -> None:
    """Raise PerfConfigError (``label``: the schedule) with the first :func:`map_reason` of
    ``maps``."""
    for m in maps:
        why = map_reason(m, elem_bytes)
        require(why is None, f"{label}: {why}")


def tma_reason(p: ConvProblem, t: Target, c: PerfConfig) -> str | None:
    """Why the TMA schedule cannot run ``c`` on ``p`` (the first rule broken), or None."""
    try:
        check_tma(p, t, c)
    except PerfConfigError as e:
        return str(e)
    return None


def tma_tile_k_rule(c: PerfConfig, s: str) -> None:
    """tile_k of a TMA config is one box of :data:`TMA_BOX_K` (``s`` names the schedule):
    :func:`check_tma`'s rule, which the warpgroup rules also apply first on a TMA schedule
    (before their swizzle rules, which admit other widths elsewhere)."""
    require(c.tile_k == TMA_BOX_K, f"{s} loads 64-element (128-byte) swizzled rows; tile_k must be "
                                  f"{TMA_BOX_K}, got {c.tile_k}")


def check_tma(p: ConvProblem, t: Target, c: PerfConfig) -> None:
    """The rules of the TMA schedule beyond the warpgroup and persistent ones (see module
    docstring); messages name the ping-pong schedule where ``c`` is one, else the TMA schedule
    (the main loop the TMA families run on)."""
    s = c.schedule.label if c.schedule.pingpong else _S
    require(t.vendor == "nvidia", f"{s} needs tensor-memory copies (TMA), which {t.arch} lacks")
    tma_tile_k_rule(c, s)
    require(c.tile_m <= TMA_MAX_BOX, f"{s} loads the A tile in one box of at most {TMA_MAX_BOX} rows; "
                                    f"tile_m {c.tile_m} is larger")
    require(p.K % 8 == 0 and p.cpg % 8 == 0,
           f"{s} needs K and cpg multiples of 8 (16-byte tensor strides), got K={p.K}, cpg={p.cpg}")
    require(p.G == 1 or p.kpg % TMA_BOX_K == 0,
           f"{s} with G > 1 needs kpg a multiple of {TMA_BOX_K} (a box must not cross groups), "
           f"got kpg={p.kpg}")
