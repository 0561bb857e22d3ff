"""The ``direct-plane`` kernel schedule (19): depthwise and small-cpg grouped backward data on
NCHW planes, no GEMM tiles and no layout transform.

Pure Python (no printing, no GPU). Kernel source: ``kernels/direct_plane.cu`` (its header
comment describes the algorithm). dY ``(N, K, Ho, Wo)`` and dX ``(N, C, Hi, Wi)`` are NCHW in
memory (whatever their flags, where the NCHW and NHWC bytes coincide); W is ``(K, cpg, Y, X)`` (NCHW) or ``(K, Y, X, cpg)`` (NHWC), read in its own order.

In NCHW every (image, channel) pair is a contiguous plane, and a depthwise dX plane depends
on one dY plane: a block stages the dY window of a tile of each of its planes in shared
memory (fp32) and each thread sums the taps of its own dX pixels from it, its columns
consecutive in memory. The stride phases are resolved at compile time (a thread's pixels
start on a multiple of the stride and cover whole phases), as the ``direct`` schedule does
per phase (:mod:`miopen_solver.direct`), but the pixels a thread owns are consecutive in dX,
so NCHW stores coalesce at every stride.

Config slots (the 14th field is :attr:`KernelSchedule.DIRECT_PLANE`, 19):

==================  ===================================================================
slot                meaning for ``direct-plane``
==================  ===================================================================
``tile_m``          TW: dX columns of a block's tile in each plane (a multiple of
                    ``warp_tile_m``)
``tile_k``          TH: dX rows of the tile (a multiple of ``warp_tile_n``)
``tile_n``          PB: planes (consecutive ``n*C + c``) per block
``warp_tile_m``     TPW: consecutive dX columns per thread, a multiple of ``sW``
``warp_tile_n``     TPH: consecutive dX rows per thread, a multiple of ``sH``
``lds_k_outer``     how the dY window is staged: 1 = row by row (any tile); 2 = whole planes
                    (depthwise, kpg 1, a tile covering the plane: the block's dY planes read
                    as one contiguous run, its dX planes written as one through a
                    plane-shaped output buffer in shared memory)
``stages``          whole planes: 1 = a block per block of planes; 2 = persistent blocks
                    (as many as are resident at once) walking the blocks of planes, the
                    next one's dY loads and taps in flight while this one is computed;
                    rows: 1
others              unused, fixed: ``warp_m`` 1, ``warp_n`` 1, ``vector_size_a`` 0,
                    ``vector_size_b`` 0, ``vector_size_c`` 0 (widths are resolved from the
                    problem), ``split_k`` 1
==================  ===================================================================

Threads per block ``PB * (TW/TPW) * (TH/TPH)``; grid x ``ceil(N*C/PB) * ceil(Hi/TH) *
ceil(Wi/TW)`` (tile along W fastest, then along H, then the block of planes), or on persistent
blocks the blocks resident at once (estimated with :data:`PERSISTENT_REGISTERS`). Shared memory:
``PB * WR * pitch`` floats, WR the window rows and pitch its columns rounded for aligned reads
(:class:`PlaneSpec`), and with whole planes ``PB * Hi * Wi`` storage elements after them (from a
16-byte boundary).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from math import gcd

import numpy as np

from .config import KernelSchedule, PerfConfig
from .direct import BLOCK_RESERVED_LDS, FmaSpec, _pow2_div, direct_nhwc, limits_reason
from .errors import PerfConfigError
from .kernels.emit import KernelSource, _make, _problem_defines, _read
from .problem import ConvProblem
from .spec import family_reason, spec_identity
from .target import Target
from .transpose import has_order, memory_order

SCHEDULE = KernelSchedule.DIRECT_PLANE
MAX_TAPS = 81
"""Largest Y*X: a thread holds its plane's taps in registers."""
MAX_ACC = 64
"""Most fp32 accumulators per thread (TPH*TPW)."""
MAX_ROW = 32
"""Most dY columns a thread holds of one window row (its read width rounded up)."""
MAX_LOADS = 32
"""Most staging loads per thread per dY plane (issued before the shared stores)."""
WHOLE_MAX_PIXELS = 1024
"""Largest plane (Hi*Wi) the default stages whole: on the H200 whole planes ran faster on the
zoo's 7x7, 14x14 and 28x28 depthwise layers and slower on its 56x56 ones (bench/RESULTS.md)."""
BLOCK_THREADS = 256
"""Threads per block the default aims at."""
MAX_TILE_THREADS_W = 32
"""Most threads along a tile row in the default (a tile wider than 32 threads' columns is split)."""
FIXED_SLOTS = (("warp_m", 1), ("warp_n", 1), ("vector_size_a", 0), ("vector_size_b", 0), ("vector_size_c", 0),
               ("split_k", 1))
PERSISTENT_REGISTERS = (44, 2)
"""``(base, per tap)``: the registers a thread of a persistent plane kernel is assumed to take
when its grid is sized, ``base + per_tap * Y*X`` (it holds this and the next plane block's
taps; ptxas gave 60, 72 and 124 to 3x3, 5x5 and 7x7 defaults). An overestimate leaves a
multiprocessor a block short; an underestimate would queue the last blocks behind a second
wave."""
ROWS, WHOLE = 1, 2
"""``lds_k_outer`` codes: the dY window staged row by row, or as whole planes."""
"""Slots the plane schedule does not use and the one value each must hold."""


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def window_rows(pad: int, stride: int, dil: int, filt: int, pixels: int) -> tuple:
    """``(offset, count)`` along one axis: the dY index of a thread's first window row (column)
    relative to ``first_pixel/stride`` is ``offset = floor((pad - (filt-1)*dil)/stride)``, and
    ``pixels`` consecutive dX pixels starting on a multiple of ``stride`` read ``count`` dY rows
    from there (every tap's ``(i + pad - t*dil)/stride`` over ``0 <= i < pixels``)."""
    off = (pad - (filt - 1) * dil) // stride
    return off, (pixels - 1 + pad) // stride - off + 1


# ----------------------------------------------------------------------------- rules
def plane_reason(problem: ConvProblem, target: Target) -> str | None:
    """Why the plane schedule cannot serve ``problem`` on ``target`` at all, or None: dY and
    dX NCHW in memory (W NCHW or NHWC), the direct families' data types, cpg and kpg
    (:func:`~miopen_solver.direct.limits_reason`), at most :data:`MAX_TAPS` taps, and one thread of one phase per axis fits
    the register limits."""
    p, t = problem, target
    why = family_reason(p, t, SCHEDULE.label)
    if why is not None:
        return why
    for name, flag in (("dY", "--out_layout"), ("dX", "--in_layout"), ("W", "--fil_layout")):
        if not (has_order(p, name, "NCHW") or (name == "W" and memory_order(p, name) is not None)):
            return (f"{SCHEDULE.label} reads dY and writes dX NCHW in memory (W NCHW or NHWC); {name} "
                    f"({flag} {p.tensor_layouts()[name]}) is not")
    why = limits_reason(p, SCHEDULE.label)
    if why is not None:
        return why
    if p.Y * p.X > MAX_TAPS:
        return f"filter of {p.Y}x{p.X}={p.Y * p.X} taps exceeds {MAX_TAPS} (a thread holds them in registers)"
    if p.sH * p.sW > MAX_ACC:
        return f"strides {p.sH}x{p.sW} need {p.sH * p.sW} accumulators a thread, more than {MAX_ACC}"
    cols = _row_width(p, p.sW)
    if cols > MAX_ROW:
        return (f"one thread's dY window row is {cols} columns (filter {p.X}, dilation {p.dW}, stride {p.sW}), "
                f"more than {MAX_ROW}")
    return None


def _read_width(q: int) -> int:
    """Floats per shared read: 4, 2 or 1, dividing a thread's ``q`` phase-local columns."""
    return 4 if q % 4 == 0 else 2 if q % 2 == 0 else 1


def _row_width(p: ConvProblem, tpw: int) -> int:
    """Floats a thread of ``tpw`` columns loads from one window row (its columns rounded up to
    its read width)."""
    vr = _read_width(tpw // p.sW)
    return _cdiv(window_rows(p.pW, p.sW, p.dW, p.X, tpw)[1], vr) * vr


# ----------------------------------------------------------------------------- spec
@dataclass(frozen=True)
class PlaneSpec(FmaSpec):
    """A validated plane config for one problem and target, every derived value resolved."""

    RECORD_KEY = "direct_plane"

    problem: ConvProblem
    target: Target
    config: PerfConfig
    tw: int                  # dX columns per tile
    th: int                  # dX rows per tile
    pb: int                  # planes per block
    tpw: int                 # dX columns per thread
    tph: int                 # dX rows per thread
    twt: int                 # threads along a tile row
    tht: int                 # threads along a tile column
    off_r: int               # dY row of window row 0, relative to the tile's first row / sH
    off_c: int               # dY column of window column 0, relative to the tile's first column / sW
    rt: int                  # window rows a thread reads
    ct: int                  # window columns a thread reads
    ctv: int                 # ct rounded up to vr
    wr: int                  # window rows of a plane
    wc: int                  # window columns of a plane
    pitch: int               # floats per staged window row
    vr: int                  # floats per shared read
    vs: int                  # dX elements per store
    loads: int               # staging loads per thread per dY plane
    whole: bool              # whole planes: contiguous dY loads, dX through the output buffer
    lv: int                  # dY elements per load (rows: aligned vectors along a window row)
    out_offset: int          # whole planes: byte offset of the output buffer (0 otherwise)
    tiles_w: int
    tiles_h: int
    pblocks: int
    w_nchw: bool             # W read as (K, cpg, Y, X), else (K, Y, X, cpg)
    lds_bytes: int
    idx64: bool              # 64-bit offsets (a tensor over 2^31-1 elements)
    persistent_blocks: int = 0   # whole planes with stages 2: the grid (0: a block per plane block)
    split_k: int = 1
    zero_fill: str = "none"
    workspace_bytes: int = 0
    sub_gemms: tuple = field(default=())

    @property
    def schedule(self) -> KernelSchedule:
        return SCHEDULE

    def transforms(self, whole: ConvProblem) -> tuple:
        """None: dY and dX are read and written NCHW in place, W in its own order."""
        return ()

    @property
    def lds_k_outer(self) -> bool:
        """The dY window is staged in shared memory (by rows or as whole planes)."""
        return True

    @property
    def block_threads(self) -> int:
        return self.pb * self.twt * self.tht

    @property
    def grid(self) -> tuple:
        return (self.persistent_blocks or self.pblocks * self.tiles_h * self.tiles_w, 1, 1)

    @property
    def kernel_name(self) -> str:
        """Spells every parameter that changes the code: arch, dtype, tile (TW x TH x planes),
        thread tile, shared read and dX store widths, threads, W order, index width and the
        problem (``short_tag``)."""
        p = self.problem
        arch = re.sub(r"\W", "_", self.target.base_arch)
        return (f"dgrad_plane_{arch}_{p.dtype}_t{self.tw}x{self.th}x{self.pb}_p{self.tpw}x{self.tph}"
                f"_r{self.vr}_s{self.vs}_l{self.lv}{'_whole' if self.whole else ''}"
                f"{f'_pg{self.persistent_blocks}' if self.persistent_blocks else ''}_th{self.block_threads}"
                f"_w{'kcyx' if self.w_nchw else 'kyxc'}"
                f"{'_i64' if self.idx64 else ''}_{p.short_tag()}")

    def as_dict(self) -> dict:
        """Plain data (JSON-ready) describing the resolved spec."""
        return spec_identity(self) | {
            "grid": list(self.grid),
            "block_tile": {"rows": self.th, "columns": self.tw, "planes": self.pb},
            "thread_tile": {"rows": self.tph, "columns": self.tpw},
            "window": {"rows": self.wr, "columns": self.wc, "pitch_floats": self.pitch,
                       "staged": "whole planes" if self.whole else "rows"},
            "vector_dy": self.lv,
            "shared_read_floats": self.vr,
            "vector_dx": self.vs,
            "w_order": "KCYX" if self.w_nchw else "KYXC",
            "lds_bytes": self.lds_bytes,
            "accumulators_per_thread": self.tph * self.tpw,
            "split_k": self.split_k,
            "zero_fill": self.zero_fill,
            "sub_gemms": 0,
            "workspace_bytes": 0,
            "index_bits": 64 if self.idx64 else 32,
        }

    def defines(self) -> list:
        """The ``DP_*`` defines of ``kernels/direct_plane.cu`` (and the ``DD_*`` ones its
        shared vendor block reads), problem ``DG_*`` defines apart."""
        return [("DD_THREADS", self.block_threads), ("DD_IDX64", int(self.idx64)),
                ("DP_TW", self.tw), ("DP_TH", self.th), ("DP_PB", self.pb), ("DP_TPW", self.tpw),
                ("DP_TPH", self.tph), ("DP_TWT", self.twt), ("DP_THT", self.tht), ("DP_OR", self.off_r),
                ("DP_OC", self.off_c), ("DP_RT", self.rt), ("DP_CT", self.ct), ("DP_CTV", self.ctv),
                ("DP_WR", self.wr), ("DP_WC", self.wc), ("DP_PITCH", self.pitch), ("DP_VR", self.vr),
                ("DP_VS", self.vs), ("DP_LOADS", self.loads), ("DP_TILES_W", self.tiles_w),
                ("DP_TILES_H", self.tiles_h), ("DP_W_NCHW", int(self.w_nchw)), ("DP_WHOLE", int(self.whole)),
                ("DP_LV", self.lv), ("DP_OUT_OFFSET", self.out_offset), ("DP_CMOD", self.off_c % self.lv),
                ("DP_PBLOCKS", self.pblocks), ("DP_GRID", self.grid[0]), ("DP_PIPE", int(bool(self.persistent_blocks))),
                ("DP_NV", _cdiv(self.off_c % self.lv + self.wc, self.lv))]

    def emit(self) -> KernelSource:
        """The specialised ``direct_plane.cu`` as a KernelSource (pointer args dY, W, dX; the
        window's shared memory dynamic)."""
        p, t = self.problem, self.target
        vendor = "amd" if t.vendor == "amd" else "nvidia"
        d = _problem_defines(p) + [("DG_KERNEL_NAME", self.kernel_name)] + self.defines()
        return _make(self.kernel_name, vendor, t.arch, d, _read("direct_plane.cu"), self.grid,
                     self.block, self.lds_bytes)


def _check(cond: bool, reason: str):
    if not cond:
        raise PerfConfigError(reason)


def make_plane_spec(problem: ConvProblem, target: Target, config: PerfConfig) -> PlaneSpec:
    """Validate ``config`` for ``problem`` on ``target`` and resolve everything.

    Raises:
        PerfConfigError: the problem is not served (:func:`plane_reason`), or the first rule
            the config breaks, as one sentence naming the field.
    """
    p, t, c = problem, target, config
    why = plane_reason(p, t)
    _check(why is None, f"{SCHEDULE.label} does not apply: {why}")
    for name, want in FIXED_SLOTS:
        got = getattr(c, name)
        _check(got == want, f"{name} must be {want} for {SCHEDULE.label} (unused slot), got {got}")
    for name in ("tile_m", "tile_n", "tile_k", "warp_tile_m", "warp_tile_n"):
        _check(getattr(c, name) >= 1, f"{name} must be >= 1, got {getattr(c, name)}")
    _check(c.lds_k_outer in (ROWS, WHOLE),
           f"lds_k_outer must be {ROWS} (dY window staged row by row) or {WHOLE} (whole planes) for {SCHEDULE.label}, "
           f"got {c.lds_k_outer}")
    tpw, tph = c.warp_tile_m, c.warp_tile_n
    _check(tpw % p.sW == 0, f"warp_tile_m={tpw} (columns per thread) must be a multiple of the W stride {p.sW}")
    _check(tph % p.sH == 0, f"warp_tile_n={tph} (rows per thread) must be a multiple of the H stride {p.sH}")
    _check(c.tile_m % tpw == 0, f"tile_m={c.tile_m} must be a multiple of warp_tile_m={tpw} (columns per thread)")
    _check(c.tile_k % tph == 0, f"tile_k={c.tile_k} must be a multiple of warp_tile_n={tph} (rows per thread)")
    _check(tph * tpw <= MAX_ACC, f"warp_tile_n x warp_tile_m = {tph * tpw} accumulators per thread exceeds {MAX_ACC}")
    _check(c.stages in (1, 2), f"stages must be 1 (a block per block of planes) or 2 (persistent blocks, whole "
                               f"planes) for {SCHEDULE.label}, got {c.stages}")
    whole = c.lds_k_outer == WHOLE
    _check(whole or c.stages == 1, "stages=2 (persistent blocks) needs lds_k_outer=2 (whole planes)")
    if whole:
        _check(p.cpg == 1 and p.kpg == 1, f"lds_k_outer=2 (whole planes) needs a depthwise problem with kpg 1 (its "
                                          f"dY planes consecutive); got cpg={p.cpg}, kpg={p.kpg}")
        _check(c.tile_m >= p.Wi and c.tile_k >= p.Hi, f"lds_k_outer=2 (whole planes) needs a tile covering the "
                                                      f"plane: tile_m={c.tile_m} >= Wi={p.Wi} and tile_k={c.tile_k} "
                                                      f">= Hi={p.Hi}")
    twt, tht, pb = c.tile_m // tpw, c.tile_k // tph, c.tile_n
    threads = pb * twt * tht
    _check(threads <= t.max_threads,
           f"tile_n x tile_m/warp_tile_m x tile_k/warp_tile_n = {threads} threads exceeds {t.max_threads}")
    off_r, rt = window_rows(p.pH, p.sH, p.dH, p.Y, tph)
    off_c, ct = window_rows(p.pW, p.sW, p.dW, p.X, tpw)
    q = tpw // p.sW
    vr = _read_width(q)
    ctv = _cdiv(ct, vr) * vr
    _check(ctv <= MAX_ROW, f"warp_tile_m={tpw} reads {ctv} dY columns a window row, more than {MAX_ROW}")
    wr = (tht - 1) * (tph // p.sH) + rt
    wc = (twt - 1) * q + ct
    pitch = _cdiv((twt - 1) * q + ctv, vr) * vr
    if pitch * (tph // p.sH) % 32 == 0 and twt < 8:   # rows read by one warp phase on distinct banks
        pitch += vr
    win_bytes = pb * wr * pitch * 4
    cap = 16 // p.elem_bytes
    if whole:
        # the run of the block's planes and an image's (a split-N launch starts on one) are
        # whole vectors
        lv = _pow2_div(gcd(pb * p.Ho * p.Wo, p.C * p.Ho * p.Wo), cap)
        vs = _pow2_div(gcd(pb * p.Hi * p.Wi, p.C * p.Hi * p.Wi), cap)
        loads = _cdiv(pb * p.Ho * p.Wo, threads * lv)
        out_offset = _cdiv(win_bytes, 16) * 16
        lds = out_offset + pb * p.Hi * p.Wi * p.elem_bytes
    else:
        lv, vs, out_offset = _pow2_div(gcd(p.Wo, c.tile_m // p.sW), cap), _pow2_div(gcd(tpw, p.Wi), cap), 0
        loads = _cdiv(pb * wr * _cdiv(off_c % lv + wc, lv), threads)
        lds = win_bytes
    _check(loads <= MAX_LOADS, f"the window of {pb} planes x {wr} x {wc} needs {loads} staging loads a thread, "
                               f"more than {MAX_LOADS}; lower tile_n, tile_m or tile_k, or warp_tile_m or "
                               f"warp_tile_n (more threads share the window)")
    _check(lds <= t.lds_bytes, f"{lds} bytes of shared memory (the dY window{' and dX' if whole else ''} of {pb} "
                               f"planes) exceed {t.arch}'s {t.lds_bytes}; lower tile_n, tile_m or tile_k")
    tiles_w, tiles_h, pblocks = _cdiv(p.Wi, c.tile_m), _cdiv(p.Hi, c.tile_k), _cdiv(p.N * p.C, pb)
    blocks = tiles_w * tiles_h * pblocks
    _check(blocks <= t.max_grid[0], f"{blocks} blocks exceed the grid limit {t.max_grid[0]}; raise tile_m, "
                                    f"tile_k or tile_n")
    if t.max_grid_work_items is not None:
        _check(blocks * threads <= t.max_grid_work_items,
               f"{blocks} blocks x {threads} threads exceed {t.max_grid_work_items} work-items")
    persistent = 0
    if c.stages == 2:
        by_smem = (t.lds_bytes + BLOCK_RESERVED_LDS) // (lds + BLOCK_RESERVED_LDS)
        base, per_tap = PERSISTENT_REGISTERS
        by_regs = t.regs_per_cu // (threads * (base + per_tap * p.Y * p.X))
        persistent = min(pblocks, t.num_cus * max(1, min(by_smem, by_regs)))
    idx64 = max(p.dy_elems, p.dx_elems, p.w_elems) > 2**31 - 1
    return PlaneSpec(problem=p, target=t, config=c, tw=c.tile_m, th=c.tile_k, pb=pb, tpw=tpw, tph=tph, twt=twt,
                     tht=tht, off_r=off_r, off_c=off_c, rt=rt, ct=ct, ctv=ctv, wr=wr, wc=wc, pitch=pitch, vr=vr,
                     vs=vs, loads=loads, whole=whole, lv=lv, out_offset=out_offset, tiles_w=tiles_w, tiles_h=tiles_h, pblocks=pblocks,
                     w_nchw=memory_order(p, "W") == "NCHW", lds_bytes=lds, idx64=idx64,
                     persistent_blocks=persistent)


# ----------------------------------------------------------------------------- configs
def plane_config(problem: ConvProblem, target: Target, q: int = 4, m: int = 2,
                 threads: int = BLOCK_THREADS, whole: bool = True, persistent: bool = False) -> PerfConfig:
    """The config of ``q`` phase-local columns and ``m`` phase-local rows per thread (``TPW =
    q*sW``, ``TPH = m*sH``) and about ``threads`` threads a block (constant time; not
    validated): a tile row of at most :data:`MAX_TILE_THREADS_W` threads split evenly over
    the image width, rows up to the thread budget split evenly over the height, and as many
    planes per block as fill the rest; staged as whole planes (``lds_k_outer`` 2) where
    ``whole`` and the problem and tile allow (on persistent blocks, ``stages`` 2, where
    ``persistent``), else row by row."""
    p = problem
    tpw, tph = q * p.sW, m * p.sH
    cols = _cdiv(p.Wi, tpw)
    twt = _cdiv(cols, _cdiv(cols, MAX_TILE_THREADS_W))
    rows = _cdiv(p.Hi, tph)
    max_tht = max(1, threads // twt)
    tht = _cdiv(rows, _cdiv(rows, max_tht))
    pb = max(1, min(threads // (twt * tht), p.N * p.C))
    covers = p.cpg == 1 and p.kpg == 1 and twt * tpw >= p.Wi and tht * tph >= p.Hi
    return PerfConfig(tile_m=twt * tpw, tile_n=pb, tile_k=tht * tph, warp_m=1, warp_n=1, warp_tile_m=tpw,
                      warp_tile_n=tph, vector_size_a=0, vector_size_b=0, vector_size_c=0, split_k=1,
                      lds_k_outer=WHOLE if whole and covers else ROWS, stages=2 if persistent and whole and covers else 1,
                      schedule=SCHEDULE)


def _fits(problem: ConvProblem, target: Target, cfg: PerfConfig) -> bool:
    try:
        make_plane_spec(problem, target, cfg)
    except PerfConfigError:
        return False
    return True


def default_plane_config(problem: ConvProblem, target: Target) -> PerfConfig:
    """The default config (constant time): 4 phase-local columns (2 at W strides 3-4, 1 above)
    and 2 phase-local rows (1 at H strides above 2) a thread, 256 threads, whole planes where
    the tile covers them and they hold at most :data:`WHOLE_MAX_PIXELS` pixels (:func:`plane_config`), shrinking the thread tile and then the block
    until it validates.

    Raises:
        PerfConfigError: the problem is not served (:func:`plane_reason`), naming why, or no
            config fits the target's limits.
    """
    why = plane_reason(problem, target)
    if why is not None:
        raise PerfConfigError(f"{SCHEDULE.label} does not apply: {why}")
    p = problem
    q = 4 if p.sW <= 2 else 2 if p.sW <= 4 else 1
    m = 2 if p.sH <= 2 else 1
    for qq, mm, th in ((q, m, BLOCK_THREADS), (max(1, q // 2), m, BLOCK_THREADS), (1, 1, BLOCK_THREADS),
                       (1, 1, 64), (1, 1, 1)):
        for whole in (p.Hi * p.Wi <= WHOLE_MAX_PIXELS, False):
            cfg = plane_config(p, target, qq, mm, th, whole)
            if _fits(p, target, cfg):
                return cfg
    raise PerfConfigError(f"no default {SCHEDULE.label} config fits {p.short_tag()} on {target.arch}")


def plane_search_space(problem: ConvProblem, target: Target):
    """Candidate configs (unvalidated, no duplicates; none where :func:`plane_reason` refuses):
    the default, then 1, 2, 4 or 8 phase-local columns x 1, 2 or 4 phase-local rows a thread
    x 128, 256 or 512 threads, each staged as whole planes where it can be (a block per block
    of planes, and persistent) and row by row."""
    if plane_reason(problem, target) is not None:
        return
    seen = set()
    try:
        first = default_plane_config(problem, target)
    except PerfConfigError:         # nothing fits the target's limits: the others are refused too
        return
    seen.add(first)
    yield first
    for q in (1, 2, 4, 8):
        for m in (1, 2, 4):
            for th in (128, 256, 512):
                for whole, persistent in ((True, False), (True, True), (False, False)):
                    cfg = plane_config(problem, target, q, m, th, whole, persistent)
                    if cfg not in seen:
                        seen.add(cfg)
                        yield cfg


# ----------------------------------------------------------------------------- CPU engine
def plane_run(spec: PlaneSpec, dy: np.ndarray, w: np.ndarray, dx: np.ndarray) -> None:
    """One launch of a plane spec on the CPU, as its kernel reads and writes: ``dy`` the
    launch's NCHW dY bytes, ``w`` W's bytes in its own order, ``dx`` a C-contiguous array
    of the launch's dX elements written NCHW in place; the arithmetic is
    :func:`~miopen_solver.direct.direct_nhwc`'s.

    Raises:
        ValueError: ``dx`` is not C-contiguous (it could not be written through a view).
    """
    p = spec.problem
    if not dx.flags.c_contiguous:
        raise ValueError("the direct plane engine writes dX through a view: pass a C-contiguous array")
    src = np.asarray(dy).reshape(p.N, p.K, p.Ho, p.Wo).transpose(0, 2, 3, 1)
    wk = np.asarray(w)
    wk = wk.reshape(p.K, p.cpg, p.Y, p.X).transpose(0, 2, 3, 1) if spec.w_nchw else wk.reshape(p.K, p.Y, p.X, p.cpg)
    out = direct_nhwc(p, src, wk).transpose(0, 3, 1, 2)
    np.copyto(dx.reshape(p.N, p.C, p.Hi, p.Wi), out, casting="unsafe")   # rounded once, no storage-type copy


__all__ = ["MAX_ACC", "MAX_LOADS", "MAX_ROW", "MAX_TAPS", "PlaneSpec", "default_plane_config", "make_plane_spec",
           "plane_config", "plane_reason", "plane_run", "plane_search_space", "window_rows"]
