"""The ``direct`` kernel schedule: depthwise and small-cpg grouped backward data without GEMM tiles.

Pure Python (no printing, no GPU). Kernel source: ``kernels/direct.cu`` (its header comment
describes the algorithm). Tensors are NHWC: dY ``(N, Ho, Wo, K)``, W ``(K, Y, X, cpg)``,
dX ``(N, Hi, Wi, C)``.

Phases. dX pixel (hi, wi) is in phase ``(hi mod sH, wi mod sW)`` with phase-local
coordinates ``(hi div sH, wi div sW)``; in phase ``r`` along an axis the valid taps are the
``t`` with ``(r + pad - t*dil) % stride == 0``, each reading dY at phase-local index plus
``(r + pad - t*dil) // stride`` (:func:`axis_taps`). Blocks own pixels of one phase, so
the kernel never tests a tap's divisibility in its inner loop.

Config slots. The schedule travels as a :class:`~miopen_solver.config.PerfConfig` whose
14th field is :attr:`KernelSchedule.DIRECT` (4); the other 13 slots mean:

==================  ===================================================================
slot                meaning for ``direct``
==================  ===================================================================
``tile_m``          TQW: phase-local dX columns per block (a multiple of ``warp_tile_m``)
``tile_n``          TN: dX channels per block (a multiple of the channel vector; nests
                    with cpg: ``TN % cpg == 0`` or ``cpg % TN == 0``)
``tile_k``          TQH: phase-local dX rows per block (a multiple of ``warp_tile_n``)
``warp_tile_m``     TPW: dX columns per thread (consecutive in the phase)
``warp_tile_n``     TPH: dX rows per thread (consecutive in the phase)
``vector_size_c``   V: consecutive dX channels per thread, 0 = auto (widest valid V of at
                    most 16 bytes); V divides C and nests with cpg (``V % cpg == 0`` or
                    ``cpg % V == 0``); need not be a power of two (odd cpg)
``lds_k_outer``     dY path: 0 = read through the read-only cache (L1/L2), 1 = stage the
                    block's dY window in shared memory (storage type; each thread converts
                    its window), 2 = stage it in shared memory already converted to fp32
                    (kernel ``stage32`` section: one conversion per dY element per block,
                    16-byte staging loads where ``K`` and the block's dY channels allow, the
                    row loop reads fp32 columns with 128-bit shared loads and tests no
                    bounds); 2 needs ``stages`` 1 and twice the 16-bit staging bytes
``stages``          dY rows in flight per thread: 1 = load a row, then compute it;
                    2 = load row r+1 into registers while row r is computed
``warp_m``          unused, must be 1 (the mma body: warps per block)
``warp_n``          unused, must be 1
``vector_size_a``   body form: 0 = the original body; 1 = the lean body, the same
                    arithmetic in the same order with fewer issued non-FMA instructions
                    (kernel ``lean`` section): each dY vector of the register window is
                    zeroed whole before its predicated load (no per-element merge of the
                    out-of-range columns), and, where the threads are a multiple of
                    ``tile_n*kpg``, the filter is staged by fixed (channel, k) lanes over
                    unrolled taps (no division per staged element); 2 = the mma body
                    (below); 3 = the mma body on persistent blocks (below)
``vector_size_b``   unused, must be 0
``split_k``         unused, must be 1 (every dX element is written once by one thread)
==================  ===================================================================

Threads per block = ``(TN/V) * (TQW/TPW) * (TQH/TPH)``. Grid: x = ``N * tiles_h * tiles_w *
phases * channel_blocks`` (channel block fastest, then phase, tile along W, tile along H,
image), y = z = 1; ``tiles_h = ceil(ceil(Hi/sH)/TQH)``, ``tiles_w = ceil(ceil(Wi/sW)/TQW)``,
phases ``min(sH, Hi) * min(sW, Wi)``, channel blocks ``ceil(C/TN)``.

The mma body (``vector_size_a`` 2, kernel ``direct_mma.cu``): depthwise (cpg = kpg = 1),
fp16/bf16, C a multiple of 8, on targets with ``mma.sync.m16n8k16`` (NVIDIA sm_80+; units of
16 dX columns x 8 rows) or ``v_mfma_f32_16x16x16`` (AMD CDNA; units of 16 x 16, waves of
64). Per channel and valid filter row, each unit is one MMA per 16 k-columns: A is the
banded (Toeplitz) matrix of the row's W taps (``A[m][k] = W[y, x]`` where ``k = m + off(x)
- min_off``), B the unit's staged dY rows of that channel, so the taps run on tensor cores
instead of FP32 FMAs. Its slots: ``tile_m`` dX columns (a multiple of 16), ``tile_k`` dX
rows (a multiple of the unit's rows, :func:`unit_rows`), ``tile_n`` channels (a multiple of
8), ``warp_tile_m`` 16 and ``warp_tile_n`` the unit's rows, ``vector_size_c`` 0 or 8
(16-byte groups of 8 channels), ``lds_k_outer`` 1 (the window is staged channel-major in
shared memory), ``stages`` 1, ``warp_m`` the warps (waves) per block, 1 to
min(:data:`MAX_MMA_WARPS`, ``tile_n``) (each takes every ``warp_m``-th channel of the
block). K spans ``16 + spanx`` columns: ``ceil((16 + spanx)/16)`` k-steps, at most :data:`MAX_MMA_KSTEPS`.
``vector_size_a`` 3 runs the same body on persistent blocks (:func:`mma_persistent_blocks`):
as many blocks as the device holds at once, each taking one run of nearly equal length of the
dX tiles in the order channel block, W phase, H phase, image, tile, and building the band table
again only where its run enters another channel block or W phase (not once per tile);
grid x = those blocks.

Shared memory (all dynamic, passed at launch as the KernelSource's ``shared_bytes``): the
block's filter taps in fp32, ``Y*X`` rows of ``TN*kpg`` floats rounded up to 4, plus 4, then with
``lds_k_outer`` 1 or 2 the staged dY window, ``(TQH + spany) x (TQW + spanx) x TNY`` storage
elements (1) or floats (2) (span = the largest tap-offset spread over the phases, TNY = the
block's dY channels). A config whose total exceeds the target's shared memory is refused.
The mma body: the band table, ``Y x tile_n`` rows of ``16*k-steps + 16`` 32-bit pairs of A's
diagonals (the phase's W taps by offset, zeros off the band) and :data:`BAND_PAD` words of pad
each, then one dY plane per channel, ``(tile_k + spany) x pitch`` with
``pitch = tile_m + 16*(k-steps - 1) + 8`` (an odd number of 16-byte units: ldmatrix's 8 row
addresses hit 8 bank groups), then one output plane per channel: for an NHWC dX ``tile_m`` columns of ``tile_k + 8`` (``+ 16`` when
``tile_k`` is an odd multiple of 8) rows, rows consecutive; for an NCHW dX (schedule 14)
``tile_k`` rows of ``tile_m + 8`` columns, columns consecutive; inside the channel's dY plane
where it fits (only the warp that reads a plane writes its output there), else after the
dY planes.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, replace, field
from math import gcd

import numpy as np

from . import layouts
from .transpose import memory_order
from .errors import PerfConfigError
from .kernels.emit import KernelSource, _make, _problem_defines, _read
from .problem import ConvProblem
from .spec import family_reason, spec_identity
from .config import KernelSchedule, PerfConfig
from .target import Target

MAX_CPG = 32
"""Largest cpg served: each thread holds V channels x kpg weights per tap in registers."""
MAX_KPG = 8
"""Largest kpg (depthwise multiplier) served."""
MAX_X = 16
"""Largest filter width: the W taps are unrolled at compile time."""
MAX_TAPS = 256
"""Largest Y*X: the block's taps sit in shared memory."""
MAX_W_PHASES = 8
"""Most W phases (``min(sW, Wi)``): each is one compiled instantiation of the body."""
MAX_ACC = 64
"""Most fp32 accumulators per thread (TPH*TPW*V; the mma body: 4 per MMA unit)."""
MAX_MMA_KSTEPS = 4
"""Most k-steps of 16 dY columns one banded A spans in the mma body (spanx <= 48)."""
MAX_MMA_WARPS = 16
"""Most warps per block in the mma body."""
MMA_MIN_REGISTERS = 128
"""Registers a thread of the mma body may always use (its largest tiles take about 100)."""
BLOCK_RESERVED_LDS = 1024
"""Shared memory the CUDA runtime reserves per block on sm_80+ (bytes)."""
MMA_ATOMS = {"nvidia": "mma16816", "amd": "mfma16x16x16"}
"""The matrix atom of the mma body per vendor (``cpu``: NVIDIA's form)."""
MMA_BODY = 2
"""``vector_size_a`` of the mma body."""
MMA_PERSISTENT_BODY = 3
"""``vector_size_a`` of the mma body on persistent blocks."""
MMA_BODIES = (MMA_BODY, MMA_PERSISTENT_BODY)
BAND_PAD = 4
"""Words of pad after each band-table row of the mma body (a row pitch that puts the 16-byte
stores of 8 neighbouring rows, built by neighbouring threads, in 8 different bank groups)."""
MAX_WIN = 96
"""Most fp32 dY window registers per thread (used window columns x dY channels)."""
MAX_VK = 32
"""Most weights per tap per thread (V*kpg)."""
WS_PAD_FLOATS = 4
"""Pad of each tap row of the staged filter, floats (keeps 16-byte alignment)."""
FIXED_SLOTS = (("warp_m", 1), ("warp_n", 1), ("vector_size_b", 0),
               ("split_k", 1))
"""Slots the direct schedule does not use and the one value each must hold."""
DTYPES = ("fp32", "fp16", "bf16")


# ----------------------------------------------------------------------------- geometry
def axis_taps(r: int, pad: int, stride: int, dil: int, filt: int) -> tuple:
    """Valid taps of phase ``r`` along one axis: ``((t, off), ...)`` with ``t`` ascending and
    ``off = (r + pad - t*dil) // stride`` exact (the dY index is the phase-local dX index
    plus ``off``)."""
    return tuple((t, (r + pad - t * dil) // stride) for t in range(filt) if (r + pad - t * dil) % stride == 0)


def tap_phases(pad: int, stride: int, dil: int, filt: int, size: int) -> list:
    """The phases ``r < min(stride, size)`` that have a valid tap, ascending: ``r`` has tap
    ``t`` iff ``r = (t*dil - pad) mod stride``, so at most ``filt`` of them, found in
    O(filt) however large the stride (every other phase is all zeros)."""
    nph = min(stride, size)
    return sorted({r for r in ((t * dil - pad) % stride for t in range(filt)) if r < nph})


def axis_span(r: int, pad: int, stride: int, dil: int, filt: int) -> tuple:
    """``(min_off, span)`` of phase ``r``'s tap offsets (``(0, 0)`` when no tap is valid)."""
    offs = [o for _, o in axis_taps(r, pad, stride, dil, filt)]
    if not offs:
        return 0, 0
    return min(offs), max(offs) - min(offs)


def used_columns(r: int, pad: int, stride: int, dil: int, filt: int, tpw: int) -> int:
    """dY window columns a thread of W phase ``r`` owning ``tpw`` pixels actually reads
    (the kernel's ``dd_col_used``)."""
    taps = axis_taps(r, pad, stride, dil, filt)
    if not taps:
        return 0
    lo = min(o for _, o in taps)
    return len({p + o - lo for _, o in taps for p in range(tpw)})


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _pow2_div(n: int, limit: int) -> int:
    v = 1
    while v * 2 <= limit and n % (v * 2) == 0:
        v *= 2
    return v


def _nests(a: int, b: int) -> bool:
    return a % b == 0 or b % a == 0


def valid_vectors(problem: ConvProblem) -> list:
    """Channel vectors V (ascending) the problem allows: V divides C, nests with cpg and
    ``V*kpg <= MAX_VK``."""
    p = problem
    return [v for v in range(1, MAX_VK + 1) if p.C % v == 0 and _nests(v, p.cpg) and v * p.kpg <= MAX_VK]


# ----------------------------------------------------------------------------- rules
def limits_reason(problem: ConvProblem, family: str) -> str | None:
    """The limits every direct family shares (``family`` names it in the sentence): the data
    type (:data:`DTYPES`), cpg <= :data:`MAX_CPG` and kpg <= :data:`MAX_KPG`; None within them."""
    p = problem
    if p.dtype not in DTYPES:
        return f"data type {p.dtype} is not one of {', '.join(DTYPES)}"
    if p.cpg > MAX_CPG:
        return f"cpg={p.cpg} exceeds {family}'s limit of {MAX_CPG} channels per group"
    if p.kpg > MAX_KPG:
        return f"kpg={p.kpg} exceeds {family}'s limit of {MAX_KPG} output channels per group"
    return None


def direct_reason(problem: ConvProblem, target: Target) -> str | None:
    """Why the direct family cannot serve ``problem`` on ``target`` at all, or None."""
    p, t = problem, target
    why = family_reason(p, t, "the direct schedule")
    if why is not None:
        return why
    if memory_order(p, "dY") != "NHWC" or memory_order(p, "W") != "NHWC" or memory_order(p, "dX") is None:
        # an NCHW dX is the NHWC kernel's output transposed after it (transpose.py)
        return (f"the direct schedule reads dY and W NHWC in memory (dX NHWC or NCHW); got dX {p.in_layout}, "
                f"dY {p.out_layout}, W {p.fil_layout}")
    why = limits_reason(p, "the direct schedule")
    if why is not None:
        return why
    if p.X > MAX_X:
        return f"filter width X={p.X} exceeds {MAX_X} (the W taps are unrolled)"
    if p.Y * p.X > MAX_TAPS:
        return f"filter of {p.Y}x{p.X}={p.Y * p.X} taps exceeds {MAX_TAPS}"
    if min(p.sW, p.Wi) > MAX_W_PHASES:
        return f"W stride {p.sW} gives {min(p.sW, p.Wi)} W phases, more than {MAX_W_PHASES}"
    vs = valid_vectors(p)
    if not vs:
        return f"no channel vector fits: cpg={p.cpg} x kpg={p.kpg} needs more than {MAX_VK} weights per tap"
    v = vs[0]
    win = max((used_columns(r, p.pW, p.sW, p.dW, p.X, 1) for r in tap_phases(p.pW, p.sW, p.dW, p.X, p.Wi)),
              default=0) * max(v // p.cpg, 1) * p.kpg
    if win > MAX_WIN:
        return f"the dY register window ({win} values) exceeds {MAX_WIN} even at one pixel and V={v}"
    if p.Y * p.X * v * p.kpg * 4 + 16 > t.lds_bytes:
        return f"the filter taps of one channel vector do not fit {t.arch}'s shared memory"
    return None


def phase_spans(problem: ConvProblem) -> tuple:
    """``(spany, spanx)``: the largest spread of tap offsets over the phases that have taps."""
    p = problem
    spanx = max((axis_span(r, p.pW, p.sW, p.dW, p.X)[1] for r in tap_phases(p.pW, p.sW, p.dW, p.X, p.Wi)),
                default=0)
    spany = max((axis_span(r, p.pH, p.sH, p.dH, p.Y)[1] for r in tap_phases(p.pH, p.sH, p.dH, p.Y, p.Hi)),
                default=0)
    return spany, spanx


def _all_nhwc(p: ConvProblem) -> ConvProblem:
    return p.replace(in_layout="NHWC", out_layout="NHWC", fil_layout="NHWC")


def mma_reason(problem: ConvProblem, target: Target, native: bool = False) -> str | None:
    """Why the mma body (``vector_size_a`` 2) cannot serve ``problem`` on ``target``, or None;
    ``native``: on the ``DIRECT_NCHW`` schedule, which reads dY and writes dX in their own
    memory order (NCHW or NHWC, at least one of them NCHW) and W in either."""
    p, t = problem, target
    if native:
        orders = {x: memory_order(p, x) for x in ("dY", "W", "dX")}
        if None in orders.values() or p.is_3d:
            return (f"the direct NCHW schedule reads 2-D NCHW or NHWC tensors; got dX {p.in_layout}, "
                    f"dY {p.out_layout}, W {p.fil_layout}")
        if orders["dY"] != "NCHW" and orders["dX"] != "NCHW":
            return "the direct NCHW schedule serves a dY or dX that is NCHW in memory; both are NHWC here"
        p = _all_nhwc(p)                # the same arithmetic; the rest of the rules are the layout's twin's
    why = direct_reason(p, t)
    if why is not None:
        return why
    if p.dtype not in ("fp16", "bf16"):
        return f"the mma body takes fp16 or bf16 data; got {p.dtype}"
    if t.atom(p.dtype, MMA_ATOMS["amd" if t.vendor == "amd" else "nvidia"]) is None:
        return (f"the mma body needs mma.sync.m16n8k16 (NVIDIA sm_80+) or v_mfma_f32_16x16x16 (AMD CDNA) "
                f"for {p.dtype}; {t.arch} has neither")
    if p.cpg != 1 or p.kpg != 1:
        return f"the mma body serves depthwise problems (cpg = kpg = 1); got cpg={p.cpg}, kpg={p.kpg}"
    if p.C % 8:
        return f"the mma body moves 16-byte groups of 8 channels; C={p.C} is not a multiple of 8"
    spanx = phase_spans(p)[1]
    if _cdiv(16 + spanx, 16) > MAX_MMA_KSTEPS:
        return (f"the W taps of a phase span {spanx} dY columns; the mma body takes at most "
                f"{16 * MAX_MMA_KSTEPS - 16} ({MAX_MMA_KSTEPS} k-steps of 16)")
    return None


# ----------------------------------------------------------------------------- spec
class FmaSpec:
    """What the specs of the direct families share (:class:`DirectSpec`,
    :class:`~miopen_solver.direct_plane.PlaneSpec`): fp32 FMAs, one write per dX element, a 1-D
    block of ``block_threads``, and their records."""

    RECORD_KEY = "direct"
    """The key of the resolved values in :meth:`to_record`."""

    @property
    def math(self) -> str:
        """The storage type: each thread sums its taps in fp32 FMAs (the mma body: fp32
        accumulators of 16-bit products), with no TF32 instruction, so a TF32 problem
        (:mod:`miopen_solver.tf32`) runs IEEE fp32 here."""
        return self.problem.dtype

    @property
    def zero_fill_blocks(self) -> int:
        """Every dX element is written by its thread (zeros where no tap reaches)."""
        return 0

    @property
    def threads(self) -> int:
        return self.block_threads

    @property
    def block(self) -> tuple:
        return (self.block_threads, 1, 1)

    def to_record(self) -> dict:
        """Plain data for a worker (every resolved value; checked by
        :meth:`~miopen_solver.solver.Solution.from_record`)."""
        rec = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
               if f.name not in ("problem", "target", "config", "sub_gemms")}
        return {"problem": self.problem.as_dict(), "target": self.target.to_record(),
                "config": self.config.serialize(), self.RECORD_KEY: rec}


@dataclass(frozen=True)
class DirectSpec(FmaSpec):
    """A validated direct config for one problem and target, every derived value resolved."""

    problem: ConvProblem
    target: Target
    config: PerfConfig
    vec: int                 # V: dX channels per thread
    tn: int                  # dX channels per block
    tqw: int                 # phase-local dX columns per block
    tqh: int                 # phase-local dX rows per block
    tpw: int                 # dX columns per thread
    tph: int                 # dX rows per thread
    stage: bool              # dY window staged in shared memory
    ct: int                  # chunk threads (TN/V)
    twt: int                 # thread columns (TQW/TPW)
    tht: int                 # thread rows (TQH/TPH)
    ny: int                  # dY channels per thread per pixel
    tny: int                 # dY channels per block
    ly: int                  # dY global vector width, elements
    lys: int                 # dY shared-memory vector width, elements
    lx: int                  # dX store vector width, elements
    nph_h: int
    nph_w: int
    tiles_h: int
    tiles_w: int
    cblocks: int
    ws_pitch: int            # floats per staged filter tap
    ws_bytes: int
    stage_cols: int
    lds_bytes: int
    idx64: bool              # 64-bit offsets (a tensor over 2^31-1 elements: split-N keeps every
                             # launch below that, so False for every solution today)
    lean: bool = False       # the lean body (vector_size_a=1; the kernel's ``lean`` section)
    stage32: bool = False    # dY staged as fp32 (lds_k_outer=2; the kernel's ``stage32`` section)
    lyg: int = 0             # dY staging load width with stage32, elements (0 otherwise)
    dy_nchw: bool = False    # DIRECT_NCHW: dY read NCHW in place
    dx_nchw: bool = False    # DIRECT_NCHW: dX written NCHW in place
    mma: bool = False        # the mma body (vector_size_a=2; kernel direct_mma.cu)
    warps: int = 0           # mma body: warps per block
    ksteps: int = 0          # mma body: k-steps of 16 dY columns per banded A
    plane_rows: int = 0      # mma body: rows of a channel's dY plane (tile_k + spany)
    plane_width: int = 0     # mma body: columns the k-steps read (tile_m + 16*(ksteps-1))
    plane_pitch: int = 0     # mma body: elements per plane row (odd 16-byte units)
    out_pitch: int = 0       # mma body: elements per output-plane column (its rows consecutive)
    plane_bytes: int = 0     # mma body: bytes of the dY planes
    out_in_plane: bool = False   # mma body: each output plane lives in its channel's dY plane
    pblocks: int = 0         # mma body: persistent blocks in all (0: one dX tile a block)
    split_k: int = 1
    zero_fill: str = "none"
    workspace_bytes: int = 0
    sub_gemms: tuple = field(default=())

    # ------------------------------------------------------------ the schedule interface
    @property
    def schedule(self) -> KernelSchedule:
        """``DIRECT``, or ``DIRECT_NCHW`` (the mma body on tensors in their own layouts)."""
        return self.config.schedule

    def transforms(self, whole: ConvProblem) -> tuple:
        """``DIRECT_NCHW``'s layout transforms: none (dY and dX in place; depthwise W is the
        same bytes in either order)."""
        return ()

    @property
    def lds_k_outer(self) -> bool:
        """The ``lds_k_outer`` slot's meaning here: the dY window is staged in shared memory."""
        return self.stage

    @property
    def min_blocks(self) -> int:
        """mma body: the blocks per multiprocessor its shared memory allows (each block also
        reserves :data:`BLOCK_RESERVED_LDS` bytes), at most what leaves
        :data:`MMA_MIN_REGISTERS` registers a thread; ``__launch_bounds__``' second argument."""
        fit = self.target.lds_bytes // (self.lds_bytes + BLOCK_RESERVED_LDS)
        return max(1, min(fit, self.target.regs_per_cu // (MMA_MIN_REGISTERS * self.block_threads)))

    @property
    def block_threads(self) -> int:
        return self.target.wave_size * self.warps if self.mma else self.ct * self.twt * self.tht

    @property
    def grid(self) -> tuple:
        p = self.problem
        if self.pblocks:
            return (self.pblocks, 1, 1)
        return (p.N * self.tiles_h * self.tiles_w * self.nph_h * self.nph_w * self.cblocks, 1, 1)

    @property
    def kernel_name(self) -> str:
        """Spells every parameter that changes the code: arch, dtype, block tile
        (TQW x TN x TQH), thread tile (TPW x TPH), channel vector and the resolved access
        widths, threads, dY path, index width and the problem (``short_tag``)."""
        p = self.problem
        arch = re.sub(r"\W", "_", self.target.base_arch)
        if self.mma:
            native = (f"_dy{'NCHW' if self.dy_nchw else 'NHWC'}_dx{'NCHW' if self.dx_nchw else 'NHWC'}"
                      if self.schedule is KernelSchedule.DIRECT_NCHW else "")
            walk = f"_pb{self.pblocks}" if self.pblocks else ""
            return (f"dgrad_direct_mma_{arch}_{p.dtype}_t{self.tqw}x{self.tn}x{self.tqh}_w{self.warps}"
                    f"_k{self.ksteps}{walk}{native}{'_i64' if self.idx64 else ''}_{p.short_tag()}")
        path = ("lds32" if self.stage32 else "lds") if self.stage else "l1"
        return (f"dgrad_direct_{arch}_{p.dtype}_t{self.tqw}x{self.tn}x{self.tqh}_p{self.tpw}x{self.tph}"
                f"_v{self.vec}_y{self.ly}x{self.lx}_th{self.block_threads}_{path}_s{self.config.stages}"
                f"{'_i64' if self.idx64 else ''}{'_lean' if self.lean else ''}_{p.short_tag()}")

    def as_dict(self) -> dict:
        """Plain data (JSON-ready) describing the resolved spec."""
        return spec_identity(self) | {
            "grid": list(self.grid),
            "block_tile": {"rows": self.tqh, "columns": self.tqw, "channels": self.tn},
            "thread_tile": None if self.mma else {"rows": self.tph, "columns": self.tpw, "channels": self.vec},
            "vector_dy": self.ly,
            "vector_dx": self.lx,
            "dy_path": ("lds32" if self.stage32 else "lds") if self.stage else "l1",
            "dy_rows_in_flight": self.config.stages,
            "body": ("mma-persistent" if self.pblocks else "mma") if self.mma else "lean" if self.lean else "original",
            "phases": [self.nph_h, self.nph_w],
            "lds_bytes": self.lds_bytes,
            "accumulators_per_thread": (self.tqh // self.tph) * (self.tqw // 16) * 4 if self.mma
            else self.tph * self.tpw * self.vec,
            "split_k": self.split_k,
            "zero_fill": self.zero_fill,
            "sub_gemms": len(self.sub_gemms),
            "workspace_bytes": self.workspace_bytes,
            "index_bits": 64 if self.idx64 else 32,
        } | ({"mma": {"atom": "m16n8k16" if self.tph == 8 else "mfma16x16x16", "unit": {"rows": self.tph, "columns": 16},
                      "channels_per_warp_pass": 1, "warps": self.warps, "k_steps": self.ksteps,
                      "persistent_blocks": self.pblocks,
                      "plane_rows": self.plane_rows, "plane_pitch": self.plane_pitch,
                      "dy_order": "NCHW" if self.dy_nchw else "NHWC",
                      "dx_order": "NCHW" if self.dx_nchw else "NHWC"}} if self.mma else {})

    def defines(self) -> list:
        """The ``DD_*`` defines of ``kernels/direct.cu`` (problem ``DG_*`` defines apart);
        ``DD_LYG`` (the fp32 staging's load width) only with ``stage32``; the mma body's
        (``kernels/direct_mma.cu``) its own."""
        if self.mma:
            return [("DD_THREADS", self.block_threads), ("DD_WARPS", self.warps), ("DD_TN", self.tn),
                    ("DD_TQW", self.tqw), ("DD_TQH", self.tqh), ("DD_RB", self.tqh // self.tph), ("DD_CBW", self.tqw // 16),
                    ("DD_KS", self.ksteps), ("DD_PR", self.plane_rows), ("DD_PW", self.plane_width),
                    ("DD_PP", self.plane_pitch), ("DD_OPR", self.out_pitch), ("DD_BW", self.ws_pitch),
                    ("DD_NPH_H", self.nph_h), ("DD_NPH_W", self.nph_w), ("DD_TILES_H", self.tiles_h),
                    ("DD_TILES_W", self.tiles_w), ("DD_CB", self.cblocks), ("DD_BAND_BYTES", self.ws_bytes),
                    ("DD_PLANE_BYTES", self.plane_bytes), ("DD_OUT_IN_PLANE", int(self.out_in_plane)),
                    ("DD_IDX64", int(self.idx64)), ("DD_MIN_BLOCKS", self.min_blocks),
                    ("DD_DY_NCHW", int(self.dy_nchw)), ("DD_DX_NCHW", int(self.dx_nchw)),
                    ("DD_PBLOCKS", self.pblocks), ("DD_BP", self.ws_pitch + BAND_PAD)]
        return [("DD_THREADS", self.block_threads), ("DD_TN", self.tn), ("DD_V", self.vec),
                ("DD_TQW", self.tqw), ("DD_TQH", self.tqh), ("DD_TPW", self.tpw), ("DD_TPH", self.tph),
                ("DD_CT", self.ct), ("DD_TWT", self.twt), ("DD_THT", self.tht),
                ("DD_NY", self.ny), ("DD_TNY", self.tny), ("DD_LY", self.ly), ("DD_LYS", self.lys),
                ("DD_LX", self.lx), ("DD_STAGE", int(self.stage)), ("DD_SC", max(self.stage_cols, 1)),
                ("DD_NPH_H", self.nph_h), ("DD_NPH_W", self.nph_w), ("DD_TILES_H", self.tiles_h),
                ("DD_TILES_W", self.tiles_w), ("DD_CB", self.cblocks), ("DD_WSP", self.ws_pitch),
                ("DD_WS_BYTES", self.ws_bytes), ("DD_IDX64", int(self.idx64)),
                ("DD_PREFETCH", int(self.config.stages == 2))] + ([("DD_LYG", self.lyg)] if self.stage32 else [])

    def emit(self) -> KernelSource:
        """The specialised ``direct.cu`` as a KernelSource (pointer args dY, W, dX; all shared
        memory dynamic)."""
        p, t = self.problem, self.target
        vendor = "amd" if t.vendor == "amd" else "nvidia"
        d = _problem_defines(p) + [("DG_KERNEL_NAME", self.kernel_name)] + self.defines()
        if self.mma:
            return _make(self.kernel_name, vendor, t.arch, d, _read("direct_mma.cu"), self.grid,
                         (self.block_threads, 1, 1), self.lds_bytes)
        return _make(self.kernel_name, vendor, t.arch, d,
                     _read("direct.cu", frozenset({"lean"} if self.lean else ()) | frozenset(
                         {"stage32"} if self.stage32 else ())), self.grid,
                     (self.block_threads, 1, 1), self.lds_bytes)


def _check(cond: bool, reason: str):
    if not cond:
        raise PerfConfigError(reason)


def resolve_vector(problem: ConvProblem, tile_n: int, cap: int) -> int:
    """The channel vector for ``vector_size_c == 0``: the widest valid V (:func:`valid_vectors`)
    dividing ``tile_n`` of at most 16 bytes, else the narrowest valid one dividing it; 0 if
    none divides ``tile_n``."""
    vs = [v for v in valid_vectors(problem) if tile_n % v == 0]
    if not vs:
        return 0
    fit = [v for v in vs if v * problem.elem_bytes <= cap]
    return fit[-1] if fit else vs[0]


def make_direct_spec(problem: ConvProblem, target: Target, config: PerfConfig) -> DirectSpec:
    """Validate ``config`` for ``problem`` on ``target`` and resolve everything.

    Raises:
        PerfConfigError: the problem is not served, or the first rule the config breaks,
            as one sentence naming the field.
    """
    p, t, c = problem, target, config
    if c.schedule is KernelSchedule.DIRECT_NCHW:
        _check(c.vector_size_a in MMA_BODIES,
               f"vector_size_a must be 2 (the mma body) or 3 (on persistent blocks) for schedule 14 (direct-nchw), "
               f"got {c.vector_size_a}")
        return _make_mma_spec(p, t, c, native=True)
    why = direct_reason(p, t)
    _check(why is None, f"the direct schedule does not apply: {why}")
    _check(c.vector_size_a in (0, 1) + MMA_BODIES,      # first: it decides what the other slots mean
           f"vector_size_a must be 0 (original body), 1 (lean body), 2 (mma body) or 3 (mma body on persistent "
           f"blocks) for the direct schedule, got {c.vector_size_a}")
    if c.vector_size_a in MMA_BODIES:
        return _make_mma_spec(p, t, c)
    for name, want in FIXED_SLOTS:
        got = getattr(c, name)
        _check(got == want, f"{name} must be {want} for the direct schedule (unused slot), got {got}")
    for name in ("tile_m", "tile_n", "tile_k", "warp_tile_m", "warp_tile_n"):
        _check(getattr(c, name) >= 1, f"{name} must be >= 1, got {getattr(c, name)}")
    _check(c.vector_size_c >= 0, f"vector_size_c must be 0 (auto) or >= 1, got {c.vector_size_c}")
    _check(c.lds_k_outer in (0, 1, 2),
           f"lds_k_outer must be 0 (dY through L1), 1 (dY staged in shared memory) or 2 (dY staged in shared "
           f"memory as fp32), got {c.lds_k_outer}")
    _check(c.stages in (1, 2), f"stages must be 1 (no dY row prefetch) or 2 (prefetch one row), got {c.stages}")
    _check(not (c.lds_k_outer == 2 and c.stages == 2),
           "lds_k_outer=2 (dY staged as fp32) needs stages=1: the row prefetch holds raw dY rows in registers")
    _check(c.tile_m % c.warp_tile_m == 0,
           f"tile_m={c.tile_m} must be a multiple of warp_tile_m={c.warp_tile_m} (columns per thread)")
    _check(c.tile_k % c.warp_tile_n == 0,
           f"tile_k={c.tile_k} must be a multiple of warp_tile_n={c.warp_tile_n} (rows per thread)")
    _check(_nests(c.tile_n, p.cpg),
           f"tile_n={c.tile_n} and cpg={p.cpg} must nest (one a multiple of the other)")
    if c.vector_size_c:
        v = c.vector_size_c
        _check(p.C % v == 0, f"vector_size_c={v} must divide C={p.C}")
        _check(_nests(v, p.cpg), f"vector_size_c={v} and cpg={p.cpg} must nest (one a multiple of the other)")
        _check(v * p.kpg <= MAX_VK, f"vector_size_c={v} x kpg={p.kpg} exceeds {MAX_VK} weights per tap")
        _check(c.tile_n % v == 0, f"tile_n={c.tile_n} must be a multiple of vector_size_c={v}")
    else:
        v = resolve_vector(p, c.tile_n, 16)
        _check(v > 0, f"vector_size_c=0 (auto) finds no channel vector dividing tile_n={c.tile_n} and C={p.C}")
    tpw, tph = c.warp_tile_m, c.warp_tile_n
    ct, twt, tht = c.tile_n // v, c.tile_m // tpw, c.tile_k // tph
    threads = ct * twt * tht
    _check(threads <= t.max_threads,
           f"tile_n/V x tile_m/warp_tile_m x tile_k/warp_tile_n = {threads} threads exceeds {t.max_threads}")
    _check(tph * tpw * v <= MAX_ACC,
           f"warp_tile_n x warp_tile_m x V = {tph * tpw * v} accumulators per thread exceeds {MAX_ACC}")
    ny = max(v // p.cpg, 1) * p.kpg
    tny = max(c.tile_n // p.cpg, 1) * p.kpg
    nph_h, nph_w = min(p.sH, p.Hi), min(p.sW, p.Wi)
    cols = max((used_columns(r, p.pW, p.sW, p.dW, p.X, tpw) for r in tap_phases(p.pW, p.sW, p.dW, p.X, p.Wi)),
               default=0)
    _check(cols * ny <= MAX_WIN,
           f"warp_tile_m={tpw} needs a dY window of {cols * ny} registers per thread, more than {MAX_WIN}")
    eb = p.elem_bytes
    cap = 16 // eb
    ly = _pow2_div(gcd(ny, p.K), cap)
    lys = _pow2_div(ny, cap)
    lx = _pow2_div(gcd(v, p.C), cap)
    spany, spanx = phase_spans(p)
    ws_pitch = _cdiv(c.tile_n * p.kpg, 4) * 4 + WS_PAD_FLOATS
    ws_bytes = p.Y * p.X * ws_pitch * 4
    stage = bool(c.lds_k_outer)
    stage32 = c.lds_k_outer == 2
    lyg = _pow2_div(gcd(tny, p.K), cap) if stage32 else 0
    srows, scols = (c.tile_k + spany, c.tile_m + spanx) if stage else (0, 0)
    stage_bytes = srows * scols * tny * (4 if stage32 else eb)
    lds = ws_bytes + _cdiv(stage_bytes, 16) * 16
    _check(lds <= t.lds_bytes, f"{lds} bytes of shared memory (filter taps {ws_bytes}, staged dY "
                               f"{stage_bytes}{' in fp32' if stage32 else ''}) exceed {t.arch}'s {t.lds_bytes}; "
                               f"lower tile_n, tile_m or tile_k")
    tiles_h = _cdiv(_cdiv(p.Hi, p.sH), c.tile_k)
    tiles_w = _cdiv(_cdiv(p.Wi, p.sW), c.tile_m)
    cblocks = _cdiv(p.C, c.tile_n)
    blocks = p.N * tiles_h * tiles_w * nph_h * nph_w * cblocks
    _check(blocks <= t.max_grid[0], f"{blocks} blocks exceed the grid limit {t.max_grid[0]}; raise tile_m or tile_k")
    if t.max_grid_work_items is not None:
        _check(blocks * threads <= t.max_grid_work_items,
               f"{blocks} blocks x {threads} threads exceed {t.max_grid_work_items} work-items")
    idx64 = max(p.dy_elems, p.dx_elems, p.w_elems) > 2**31 - 1
    return DirectSpec(problem=p, target=t, config=c, vec=v, tn=c.tile_n, tqw=c.tile_m, tqh=c.tile_k,
                      tpw=tpw, tph=tph, stage=stage, ct=ct, twt=twt, tht=tht, ny=ny, tny=tny, ly=ly,
                      lys=lys, lx=lx, nph_h=nph_h, nph_w=nph_w, tiles_h=tiles_h, tiles_w=tiles_w,
                      cblocks=cblocks, ws_pitch=ws_pitch, ws_bytes=ws_bytes,
                      stage_cols=scols, lds_bytes=lds, idx64=idx64, lean=bool(c.vector_size_a),
                      stage32=stage32, lyg=lyg)


def unit_rows(target: Target) -> int:
    """dX rows of one MMA unit (16 columns wide): 8 for ``mma.sync.m16n8k16``, 16 for AMD's
    ``v_mfma_f32_16x16x16``."""
    return 16 if target.vendor == "amd" else 8


def _make_mma_spec(p: ConvProblem, t: Target, c: PerfConfig, native: bool = False) -> DirectSpec:
    """:func:`make_direct_spec` for the mma body (``vector_size_a`` 2, or 3 on persistent
    blocks: :func:`mma_persistent_blocks`; ``native``: on the ``DIRECT_NCHW`` schedule,
    tensors in their own memory order)."""
    why = mma_reason(p, t, native)
    _check(why is None, f"{KernelSchedule.DIRECT_NCHW.label}: {why}" if native
           else f"vector_size_a={c.vector_size_a} (mma body): {why}")
    dy_nchw = native and memory_order(p, "dY") == "NCHW"
    dx_nchw = native and memory_order(p, "dX") == "NCHW"
    rows = unit_rows(t)
    for name, want in (("warp_n", 1), ("vector_size_b", 0), ("split_k", 1), ("warp_tile_m", 16),
                       ("warp_tile_n", rows), ("lds_k_outer", 1), ("stages", 1)):
        got = getattr(c, name)
        _check(got == want, f"{name} must be {want} for the direct schedule's mma body on {t.arch}, got {got}")
    _check(c.vector_size_c in (0, 8),
           f"vector_size_c must be 0 (auto) or 8 for the mma body (16-byte groups of 8 channels), got {c.vector_size_c}")
    _check(c.tile_m >= 16 and c.tile_m % 16 == 0, f"tile_m={c.tile_m} must be a positive multiple of 16 (mma body)")
    _check(c.tile_k >= rows and c.tile_k % rows == 0,
           f"tile_k={c.tile_k} must be a positive multiple of {rows} (mma body on {t.arch})")
    _check(c.tile_n >= 8 and c.tile_n % 8 == 0, f"tile_n={c.tile_n} must be a positive multiple of 8 (mma body)")
    _check(1 <= c.warp_m <= min(MAX_MMA_WARPS, c.tile_n),
           f"warp_m={c.warp_m} (warps per block) must be 1 to min({MAX_MMA_WARPS}, tile_n={c.tile_n}) for the "
           f"mma body")
    _check(c.warp_m * t.wave_size <= t.max_threads,
           f"warp_m={c.warp_m} waves of {t.wave_size} exceed {t.max_threads} threads on {t.arch}")
    units = (c.tile_k // rows) * (c.tile_m // 16)
    _check(units * 4 <= MAX_ACC,
           f"tile_k/{rows} x tile_m/16 = {units} units of 16 x {rows} need {units * 4} accumulators per thread, "
           f"more than {MAX_ACC}")
    spany, spanx = phase_spans(p)
    ksteps = _cdiv(16 + spanx, 16)
    eb = p.elem_bytes
    plane_rows = c.tile_k + spany
    plane_width = c.tile_m + 16 * (ksteps - 1)
    plane_pitch = plane_width + 8
    if dx_nchw:         # rows of tile_m columns (NCHW rows stored as they lie): 16-bit fragment stores
        out_pitch = c.tile_m + 8
    else:               # columns of tile_k rows, 32-bit fragment stores; words = 4 mod 8: no bank conflict
        out_pitch = c.tile_k + (8 if c.tile_k % 16 == 0 else 16)
    band_width = 16 * ksteps + 16
    ws_bytes = p.Y * c.tile_n * (band_width + BAND_PAD) * 4
    plane_bytes = c.tile_n * plane_rows * plane_pitch * eb
    out_in_plane = (c.tile_k if dx_nchw else c.tile_m) * out_pitch <= plane_rows * plane_pitch
    lds = ws_bytes + plane_bytes + (0 if out_in_plane else c.tile_n * c.tile_m * out_pitch * eb)
    _check(lds <= t.lds_bytes, f"{lds} bytes of shared memory (band table {ws_bytes}, dY planes {plane_bytes}, "
                               f"output planes {lds - ws_bytes - plane_bytes}) exceed {t.arch}'s {t.lds_bytes}; "
                               f"lower tile_n, tile_m or tile_k")
    nph_h, nph_w = min(p.sH, p.Hi), min(p.sW, p.Wi)
    tiles_h = _cdiv(_cdiv(p.Hi, p.sH), c.tile_k)
    tiles_w = _cdiv(_cdiv(p.Wi, p.sW), c.tile_m)
    cblocks = _cdiv(p.C, c.tile_n)
    blocks = p.N * tiles_h * tiles_w * nph_h * nph_w * cblocks
    _check(blocks <= t.max_grid[0], f"{blocks} blocks exceed the grid limit {t.max_grid[0]}; raise tile_m or tile_k")
    idx64 = max(p.dy_elems, p.dx_elems, p.w_elems) > 2**31 - 1
    spec = DirectSpec(problem=p, target=t, config=c, vec=8, tn=c.tile_n, tqw=c.tile_m, tqh=c.tile_k,
                      tpw=16, tph=rows, stage=True, ct=c.tile_n // 8, twt=c.tile_m // 16, tht=c.tile_k // rows,
                      ny=1, tny=c.tile_n, ly=8, lys=8, lx=8, nph_h=nph_h, nph_w=nph_w, tiles_h=tiles_h,
                      tiles_w=tiles_w, cblocks=cblocks, ws_pitch=band_width, ws_bytes=ws_bytes,
                      stage_cols=plane_width, lds_bytes=lds, idx64=idx64, mma=True, warps=c.warp_m,
                      ksteps=ksteps, plane_rows=plane_rows, plane_width=plane_width, plane_pitch=plane_pitch,
                      out_pitch=out_pitch, plane_bytes=plane_bytes, out_in_plane=out_in_plane,
                      dy_nchw=dy_nchw, dx_nchw=dx_nchw)
    if c.vector_size_a == MMA_PERSISTENT_BODY:
        spec = replace(spec, pblocks=mma_persistent_blocks(spec))
    return spec


def mma_persistent_blocks(spec: DirectSpec) -> int:
    """Persistent blocks of the mma body on persistent blocks: the blocks the device holds at
    once (:attr:`DirectSpec.min_blocks` per multiprocessor x ``target.num_cus``), at most the
    dX tiles (the grid of ``spec`` without persistence, a tile a block); each takes a run of
    nearly equal length of the tiles."""
    return max(1, min(spec.grid[0], spec.min_blocks * spec.target.num_cus))


def mma_config(tile_m: int, tile_n: int, tile_k: int, warps: int, rows: int = 8,
               persistent: bool = False) -> PerfConfig:
    """The mma body's config of a ``tile_k x tile_m`` dX tile of ``tile_n`` channels,
    ``warps`` warps (waves) and units of ``rows`` dX rows (:func:`unit_rows`), on persistent
    blocks with ``persistent`` (not validated)."""
    return PerfConfig(tile_m=tile_m, tile_n=tile_n, tile_k=tile_k, warp_m=warps, warp_n=1, warp_tile_m=16,
                      warp_tile_n=rows, vector_size_a=MMA_PERSISTENT_BODY if persistent else MMA_BODY,
                      vector_size_b=0, vector_size_c=8, split_k=1,
                      lds_k_outer=1, stages=1, schedule=KernelSchedule.DIRECT)


MMA_TILES = ((32, 16, 16, 4), (32, 32, 16, 8), (64, 16, 8, 4), (32, 32, 8, 8), (16, 32, 16, 8),
             (64, 16, 16, 8), (32, 16, 32, 8), (64, 32, 16, 8))
"""The mma body's searched tiles on NVIDIA, ``(tile_m, tile_n, tile_k, warps)``: 256 to 1024
dX pixels of 16 or 32 channels per block, 4 or 8 warps."""
AMD_MMA_TILES = ((32, 16, 16, 4), (16, 16, 16, 4), (32, 8, 16, 2), (64, 8, 16, 2), (32, 8, 32, 2), (16, 8, 16, 2))
"""The mma body's searched tiles on AMD (units of 16 rows, waves of 64, 64 KiB of LDS)."""


def mma_tiles(target: Target) -> tuple:
    """The searched mma tiles of ``target``'s vendor."""
    return AMD_MMA_TILES if target.vendor == "amd" else MMA_TILES


def mma_search_space(problem: ConvProblem, target: Target, native: bool = False):
    """The mma body's candidate configs (unvalidated; none where :func:`mma_reason` refuses):
    every tile of :func:`mma_tiles`, then each on persistent blocks; on the ``DIRECT_NCHW``
    schedule with ``native``."""
    if mma_reason(problem, target, native) is not None:
        return
    for persistent in (False, True):
        for tile in mma_tiles(target):
            cfg = mma_config(*tile, rows=unit_rows(target), persistent=persistent)
            yield cfg.replace(schedule=KernelSchedule.DIRECT_NCHW) if native else cfg


def is_valid_direct_config(problem: ConvProblem, target: Target, config: PerfConfig) -> tuple:
    """``(ok, reason)`` for ``config`` (reason ``""`` when valid)."""
    try:
        make_direct_spec(problem, target, config)
    except PerfConfigError as e:
        return False, str(e)
    return True, ""


# ----------------------------------------------------------------------------- configs
@dataclass(frozen=True)
class Policy:
    """A rule that turns a problem into a config (constant time): channel-vector bytes,
    thread tile, target threads per block, largest tile_n, dY path (``lds_k_outer``: 0 L1,
    1 staged, 2 staged as fp32), dY rows in flight and body form (``vector_size_a``: 0
    original, 1 lean)."""

    vbytes: int = 16
    tpw: int = 4
    tph: int = 1
    threads: int = 256
    tn_max: int = 64
    stage: int = 0
    stages: int = 1
    body: int = 0


def _policies() -> dict:
    out = {}
    for vb, tpw, tph, th, st, sg in ((8, 4, 2, 256, 0, 1), (8, 8, 1, 128, 0, 1), (16, 2, 2, 256, 1, 1),
                                     (8, 4, 4, 256, 0, 1), (8, 4, 1, 256, 1, 1), (8, 8, 1, 256, 0, 1),
                                     (8, 4, 2, 128, 0, 1), (8, 2, 2, 256, 0, 1), (8, 8, 1, 128, 1, 1),
                                     (8, 4, 2, 256, 0, 2)):
        out[f"v{vb}_p{tpw}x{tph}_t{th}_{'lds' if st else 'l1'}_s{sg}"] = Policy(vb, tpw, tph, th, 64, st, sg)
    for vb, tpw, tph, th, st, sg in ((8, 4, 2, 256, 0, 1), (8, 8, 1, 128, 0, 1), (8, 8, 2, 128, 0, 1)):
        out[f"v{vb}_p{tpw}x{tph}_t{th}_{'lds' if st else 'l1'}_s{sg}_lean"] = Policy(vb, tpw, tph, th, 64, st, sg, 1)
    for vb, tpw, tph, th in ((8, 8, 1, 128), (8, 8, 2, 128), (8, 4, 2, 256)):   # dY staged as fp32
        out[f"v{vb}_p{tpw}x{tph}_t{th}_lds32_s1_lean"] = Policy(vb, tpw, tph, th, 64, 2, 1, 1)
    return out


POLICIES = _policies()
"""Named policies the benchmark times on every layer (bench/direct_h200.py). Name:
channel-vector bytes, thread tile TPWxTPH, threads per block, dY path (``l1``, ``lds``, or
``lds32``: staged as fp32, ``lds_k_outer=2``), dY rows in flight, and ``_lean`` for the lean
body (``vector_size_a=1``)."""

TINY_C_BYTES = 16
"""Below this many bytes of channels per pixel (C x element size) one thread's channel
vector is the whole pixel, so neighbouring lanes own neighbouring pixels."""


def default_policy(problem: ConvProblem) -> str:
    """The default policy's name, by the problem's structure (constant time):

    * ``C*elem_bytes < 16`` (e.g. C=3): ``v8_p2x2_t256_l1_s1`` -- one thread's channel
      vector is the whole pixel, so lanes own pixels: small 2x2 thread tiles keep the lanes
      of a warp on nearby pixels;
    * plain depthwise (cpg = kpg = 1), stride 1, no dilation, filter of at most 9 taps:
      ``v8_p4x2_t256_l1_s1`` -- 4x2 pixels per thread reuse each dY load over the taps;
    * everything else (strides, dilations, larger filters, cpg or kpg > 1):
      ``v8_p8x1_t128_l1_s1`` -- 8 pixels of one phase per thread, 128 threads.

    Chosen by measurement on the H200 across all 14 layers x fp16/bf16 of
    bench/direct_h200.py (bench/DIRECT_RESULTS.md): each branch's policy is the one with the
    best geometric-mean time over its class of layers, not fitted to one layer."""
    p = problem
    if p.C * p.elem_bytes < TINY_C_BYTES:
        return "v8_p2x2_t256_l1_s1"
    dense = p.sH == p.sW == p.dH == p.dW == 1 and p.cpg == p.kpg == 1 and p.Y * p.X <= 9
    return "v8_p4x2_t256_l1_s1" if dense else "v8_p8x1_t128_l1_s1"


def _pick_vector(p: ConvProblem, vbytes: int) -> int:
    vs = valid_vectors(p)
    fit = [v for v in vs if v * p.elem_bytes <= vbytes]
    return fit[-1] if fit else vs[0]


def _pick_tn(p: ConvProblem, v: int, tn_max: int) -> int:
    """tile_n: V times a power of two, nesting with cpg, at most max(tn_max, V); the largest
    whose padding of C (last channel block) stays within 1/8 of C, else the one with the
    least padding."""
    cands = []
    ct = 1
    while v * ct <= max(tn_max, v) and ct <= 1024:
        tn = v * ct
        if _nests(tn, p.cpg):
            cands.append(tn)
        if tn >= p.C:
            break
        ct *= 2
    if not cands:
        return v
    pad = {tn: _cdiv(p.C, tn) * tn - p.C for tn in cands}
    ok = [tn for tn in cands if pad[tn] * 8 <= p.C]
    return max(ok) if ok else min(cands, key=lambda tn: (pad[tn], -tn))


def policy_config(problem: ConvProblem, target: Target, policy: Policy) -> PerfConfig:
    """The config ``policy`` gives ``problem`` (constant time; not validated). Thread tile
    shrinks so the accumulators and window fit; the pixel threads split into a roughly square
    block tile, clipped to the phase-local image."""
    p = problem
    v = _pick_vector(p, policy.vbytes)
    tpw, tph = policy.tpw, policy.tph
    while tph * tpw * v > MAX_ACC and tph > 1:
        tph //= 2
    while tph * tpw * v > MAX_ACC and tpw > 1:
        tpw //= 2
    ny = max(v // p.cpg, 1) * p.kpg
    while tpw > 1 and max((used_columns(r, p.pW, p.sW, p.dW, p.X, tpw)
                           for r in tap_phases(p.pW, p.sW, p.dW, p.X, p.Wi)), default=0) * ny > MAX_WIN:
        tpw //= 2
    tn = _pick_tn(p, v, policy.tn_max)
    ct = tn // v
    pix = max(1, policy.threads // ct)
    hq, wq = _cdiv(p.Hi, p.sH), _cdiv(p.Wi, p.sW)
    # thread columns: a power of two near sqrt(pix * tph / tpw) (square pixel tile), <= what W needs
    twt = 1
    while twt * 2 <= pix and (twt * 2) * (twt * 2) * tpw <= pix * tph * 2 and twt * tpw < wq:
        twt *= 2
    tht = max(1, pix // twt)
    while tht > 1 and (tht // 2) * tph >= hq:
        tht //= 2
    cfg = PerfConfig(tile_m=twt * tpw, tile_n=tn, tile_k=tht * tph, warp_m=1, warp_n=1,
                     warp_tile_m=tpw, warp_tile_n=tph, vector_size_a=policy.body, vector_size_b=0,
                     vector_size_c=v, split_k=1, lds_k_outer=policy.stage, stages=policy.stages,
                     schedule=KernelSchedule.DIRECT)
    return cfg


def _fits(problem, target, cfg) -> bool:
    return is_valid_direct_config(problem, target, cfg)[0]


def default_direct_config(problem: ConvProblem, target: Target) -> PerfConfig:
    """The default config (constant time): the policy :func:`default_policy` names in the
    lean body (``vector_size_a`` 1: on the H200 1.2-1.8x the original body's speed on all
    eight depthwise layers of bench/direct_h200.py with the same tiles, bench/RESULTS.md),
    falling back to its original body, to a staging-free one-row version of it, to one pixel per thread and then to one
    channel per thread, so that every problem :func:`direct_reason` accepts gets a valid
    config.

    Raises:
        PerfConfigError: the problem is not served (``direct_reason``), naming why.
    """
    why = direct_reason(problem, target)
    if why is not None:
        raise PerfConfigError(f"the direct schedule does not apply: {why}")
    pol = replace(POLICIES[default_policy(problem)], body=1)
    tries = (pol, replace(pol, body=0), Policy(pol.vbytes, pol.tpw, 1, pol.threads, pol.tn_max, 0, 1),
             Policy(pol.vbytes, 1, 1, 64, pol.tn_max, 0, 1), Policy(2, 1, 1, 64, 1, 0, 1))
    for tr in tries:
        cfg = policy_config(problem, target, tr)
        if _fits(problem, target, cfg):
            return cfg
    raise PerfConfigError(f"no default direct config fits {problem.short_tag()} on {target.arch}")


def direct_search_space(problem: ConvProblem, target: Target):
    """Candidate configs (unvalidated, at most a few hundred, no duplicates): the named
    policies and their variations over channel-vector bytes, thread tile, threads per
    block, dY path and dY rows in flight; then the lean body (``vector_size_a=1``) over the
    thread tiles of 4 or more pixels (where its leaner loads and filter staging pay), one
    dY row in flight, dY through L1 or staged. The dY window staged as fp32
    (``lds_k_outer=2``, the ``stage32`` kernel) is reachable by ``--perf-config`` and the
    ``lds32`` policies but not searched: on the H200 it lost to the lean body on all 30
    depthwise rows it was timed on (bench/RESULTS.md, 2026-12-02 ninth session)."""
    seen = set()
    pols = [q for q in POLICIES.values() if q.stage != 2]
    for vb in (8, 16):
        for tpw, tph in ((1, 1), (2, 1), (4, 1), (8, 1), (2, 2), (4, 2), (4, 4)):
            for th in (128, 256):
                for st, sg in ((0, 1), (0, 2), (1, 1)):
                    pols.append(Policy(vb, tpw, tph, th, 64, st, sg))
    for vb in (8, 16):
        for tpw, tph in ((4, 1), (8, 1), (4, 2), (8, 2), (4, 4)):
            for th in (128, 256):
                for st in (0, 1):
                    pols.append(Policy(vb, tpw, tph, th, 64, st, 1, 1))
    for pol in pols:
        cfg = policy_config(problem, target, pol)
        if cfg not in seen:
            seen.add(cfg)
            yield cfg
    yield from mma_search_space(problem, target)


# ----------------------------------------------------------------------------- CPU engine
def direct_native_run(spec: DirectSpec, dy: np.ndarray, w: np.ndarray, dx: np.ndarray) -> None:
    """One launch of a ``DIRECT_NCHW`` spec on the CPU, as its kernel reads and writes: ``dy``
    the launch's dY bytes in their memory order (NCHW or NHWC), ``w`` W's bytes (depthwise:
    the same in either order), ``dx`` a C-contiguous array of the launch's dX elements
    written in place in dX's memory order; the arithmetic is :func:`direct_nhwc`'s.

    Raises:
        ValueError: ``dx`` is not C-contiguous (it could not be written through a view).
    """
    p = spec.problem
    if not dx.flags.c_contiguous:
        raise ValueError("the direct NCHW engine writes dX through a view: pass a C-contiguous array")
    src = np.asarray(dy)
    src = src.reshape(p.N, p.K, p.Ho, p.Wo).transpose(0, 2, 3, 1) if spec.dy_nchw else src.reshape(p.N, p.Ho, p.Wo, p.K)
    out = direct_nhwc(p, src, np.asarray(w).reshape(p.K, p.Y, p.X, p.cpg))
    if spec.dx_nchw:
        out = out.transpose(0, 3, 1, 2)
    dx.reshape(-1)[:] = out.astype(dx.dtype).reshape(-1)


def run_direct_cpu(spec: DirectSpec, dy: np.ndarray, w: np.ndarray) -> np.ndarray:
    """dX from the schedule's own phase/tap structure, in numpy (:func:`direct_nhwc`).

    Args:
        spec: a :class:`DirectSpec` (only its problem is read).
        dy: dY in ``out_layout``, w: W in ``fil_layout`` (NHWC in memory), storage dtype.

    Returns:
        dX in ``in_layout`` (NHWC in memory), storage dtype.
    """
    p = spec.problem
    layouts.check_inputs(p, dy, w)
    dx = direct_nhwc(p, layouts.dy_to_nhwc(p, dy), layouts.w_to_kyxc(p, w))
    return layouts.dx_from_nhwc(p, dx.astype(layouts.storage_dtype(p.dtype)))


def direct_nhwc(p: ConvProblem, dy: np.ndarray, w: np.ndarray) -> np.ndarray:
    """dX ``(N, Hi, Wi, C)`` in fp32 from dY ``(N, Ho, Wo, K)`` and W ``(K, Y, X, cpg)``:
    for every phase (rh, rw) and every valid tap pair of it (:func:`axis_taps`), the
    phase's dX pixels accumulate ``dY[qh + offy, qw + offx] . W[:, y, x]`` per group in
    fp32 (over kpg too); each phase sub-grid of dX is then written once. Pixels with no
    valid tap get 0. Vectorised over pixels and channels; loops over phases and taps only.
    """
    G, kpg, cpg = p.G, p.kpg, p.cpg
    dyf = np.asarray(dy, dtype=np.float32)
    wf = np.asarray(w, dtype=np.float32).reshape(G, kpg, p.Y, p.X, cpg)
    dx = np.full((p.N, p.Hi, p.Wi, p.C), np.nan, dtype=np.float32)
    rows_h, rows_w = tap_phases(p.pH, p.sH, p.dH, p.Y, p.Hi), tap_phases(p.pW, p.sW, p.dW, p.X, p.Wi)
    # phases no tap reaches: zero, through a bool per row and per column and a masked store
    # (index arrays of the rows, int64, were 8 bytes per row or column for each of several
    # temporaries)
    for axis, size, stride, phases in ((1, p.Hi, p.sH, rows_h), (2, p.Wi, p.sW, rows_w)):
        idle = np.ones(size, dtype=bool)
        for r in phases:
            idle[r::stride] = False
        np.copyto(dx, 0, where=idle.reshape((1, size, 1, 1) if axis == 1 else (1, 1, size, 1)))
    for rh in rows_h:
        hq = len(range(rh, p.Hi, p.sH))
        ytaps = axis_taps(rh, p.pH, p.sH, p.dH, p.Y)
        for rw in rows_w:
            wq = len(range(rw, p.Wi, p.sW))
            xtaps = axis_taps(rw, p.pW, p.sW, p.dW, p.X)
            acc = np.zeros((G, p.N, hq, wq, cpg), dtype=np.float32)
            for y, oy in ytaps:
                q0, q1 = max(0, -oy), min(hq, p.Ho - oy)
                if q1 <= q0:
                    continue
                for x, ox in xtaps:
                    r0, r1 = max(0, -ox), min(wq, p.Wo - ox)
                    if r1 <= r0:
                        continue
                    src = dyf[:, q0 + oy:q1 + oy, r0 + ox:r1 + ox, :]          # (N, h, w, K)
                    src = src.reshape(p.N, q1 - q0, r1 - r0, G, kpg).transpose(3, 0, 1, 2, 4)
                    acc[:, :, q0:q1, r0:r1, :] += np.matmul(src, wf[:, None, None, :, y, x, :])
            dx[:, rh::p.sH, rw::p.sW, :] = acc.transpose(1, 2, 3, 0, 4).reshape(p.N, hq, wq, p.C)
    return dx
