"""The ``nchw-tma`` kernel schedule: stride-1 problems whose dY and dX are NCHW in memory, run
on the warp-specialised TMA main loop with no dY or dX transform.

Pure Python (no printing, no GPU). Problems served (:func:`nchw_tma_reason`): stride 1, any
filter, padding and dilation, dY and dX NCHW in memory, W either way, 16-bit storage on a
target with tensor-memory copies. Per image ``n``, group ``g`` and filter tap ``(y, x)``, with
``P = Hi*Wi`` dX pixels (contiguous in NCHW)::

    dX[n, g*cpg:(g+1)*cpg, hi, wi] += W_gyx^T (cpg x kpg) x dY[n, g*kpg:(g+1)*kpg, hi + ph - y*dh, wi + pw - x*dw]
    W_gyx = W[g*kpg:(g+1)*kpg, :, y, x]  (kpg x cpg), dY zero outside its Ho x Wo plane

(the stride-1 case of the dgrad sum; MIOpen's and CK's implicit GEMM read it with dY's pixels
as GEMM rows). Here the GEMM's rows are the channels c (GemmM = cpg per image), its columns the
dX pixels, its reduction (k, tap) (GemmK = Y*X*kpg): the TMA schedule's GEMM with the
operands' roles swapped, as :mod:`miopen_solver.nchw_pw` swaps them for 1x1 problems. A =
W^T must be k-contiguous, so W is transposed once per run into the workspace
(:func:`wt_transform`, ``(G, kpg, cpg*Y*X) -> (G, cpg*Y*X, kpg)`` as the batched 2-D
transpose of either filter order); B is dY as it lies: a dY row of 64 pixels is one 128-byte
swizzled row of the MN-major B tile, which is how the TMA schedule holds W's channels. A
block tile is ``tile_m`` channels x ``tile_n / 64`` dX rows of 64 columns; for each tap its
B boxes start at the tap's dY offset, so the tensor map's zero fill is the padding, and the
direct epilogue stores 16-byte runs of 8 pixels of one channel (dX NCHW). A copy's first
column must be 16-byte aligned (:data:`BOX_ALIGN`): where a filter column shifts dY by a
number of columns that is not a multiple of 8 (:func:`shift_loads`), the copies bring each
window row from the aligned column below it into a staging buffer, and a producer warpgroup
shifts it into B (the ``ntshift`` section).

The main loop's tiles, shared memory and grid are those of the :class:`~miopen_solver.spec.
DgradSpec` of :func:`virtual_problem` (a pointwise GEMM of ``N * ceil(cpg/tile_m) * tile_m``
rows and ``ceil(Hi/bh) * ceil(Wi/64) * tile_n`` columns per group, whose tiles are the real
ones); the ``nchw_tma`` section of ``kernels/dgrad.cu`` changes where the producer's boxes
come from and where the epilogue stores. Config: the TMA schedule's 15 fields on that GEMM
(tile_m over channels, tile_n over pixels, a multiple of 64; split_k 1), schedule 13, e.g.
``64,256,64,1,1,64,256,0,0,0,1,-1,4,13``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from .config import KernelSchedule, PerfConfig
from .errors import require
from .problem import ConvProblem
from .spec import arch_tag, resident_blocks
from .tma import check_maps
from .target import Target
from .transpose import LayoutTransform, memory_order
from .virtual_gemm import VirtualGemmSpec, make_virtual_spec, virtual_gemm_reason

_S = KernelSchedule.NCHW_TMA.label

BLOCK_W = 64
"""dX columns per B block: one 128-byte swizzled row of 16-bit dY pixels."""
BOX_ALIGN = 8
"""A box's first dY column must be a multiple of this many 16-bit elements (16 bytes): on the
H200 a tensor copy whose innermost start coordinate is not 16-byte aligned stops the kernel
with an illegal-instruction error (measured, bench/RESULTS.md). Where every filter column's
shift ``pad_w - x*dilation_w`` is a multiple of it (1x1 and Yx1 filters with pad_w 0,
dilation_w and pad_w multiples of 8) B arrives by tensor copies; otherwise by the shifting
producer (:func:`shift_loads`)."""
PRODUCERS = 128
"""Threads of the shifting producer (one warpgroup beside the consumer warpgroups)."""
STAGING_W = 72
"""dY columns per staging row of the shifting producer: the 64 of the window and the 8 below
its first, from the aligned column that starts the tensor copy (144 bytes, 16-byte chunks)."""
SHIFT_MAX_BLOCK_THREADS = 256
"""The shifting producer's blocks hold at most this many threads (consumers + producers): at
384 a thread may keep 168 registers, too few for a 64x256 accumulator and its addressing."""
DTYPES = ("fp16", "bf16")
"""Storage types: wgmma reads an MN-major B of 16-bit elements only."""
CHUNK_BYTES = 16 << 20
"""CPU engine: fp32 output per chunk of images, bytes (at least one image)."""


# ----------------------------------------------------------------------------- rules
def nchw_tma_reason(problem: ConvProblem, target: Target) -> str | None:
    """Why the NCHW TMA schedule cannot serve ``problem`` (one launch's) on ``target`` at all,
    or None."""
    p = problem
    why = virtual_gemm_reason(p, target, "the NCHW TMA schedule")
    if why is not None:
        return why
    if target.vendor != "nvidia" or not target.wgmma:
        return f"it needs warpgroup MMA and tensor-memory copies (sm_90a), which {target.arch} lacks"
    if p.dtype not in DTYPES:
        return f"data type {p.dtype} is not fp16 or bf16 (wgmma reads an MN-major B of 16-bit elements only)"
    if (p.sH, p.sW) != (1, 1):
        return f"stride {p.sH}x{p.sW} is not 1x1 (a dY row must be a contiguous run of dX columns)"
    for tensor in ("dY", "dX"):
        order = memory_order(p, tensor)
        if order != "NCHW":
            return f"{tensor} is {order or 'neither NCHW nor NHWC'} in memory, not NCHW"
    if p.Wo % 8 or p.Wi % 8:
        return (f"Wo={p.Wo} and Wi={p.Wi} must be multiples of 8 (16-byte dY row strides for the tensor map, "
                f"16-byte dX runs)")
    if p.kpg % 8:
        return f"kpg={p.kpg} is not a multiple of 8 (16-byte W^T rows for the tensor map)"
    if p.G > 1 and p.kpg % 64:
        return f"G={p.G} needs kpg a multiple of 64 (a dY box of 64 k must not cross groups), got kpg={p.kpg}"
    return None


def shift_loads(problem: ConvProblem) -> bool:
    """Some filter column shifts dY by ``pad_w - x*dilation_w`` columns that are not a multiple
    of :data:`BOX_ALIGN`: then the tensor copies land in a staging buffer from the aligned
    column below each window row, and a producer warpgroup shifts them into B (the ``ntshift``
    section of ``dgrad.cu``)."""
    p = problem
    return any((p.pW - x * p.dW) % BOX_ALIGN for x in range(p.X))


def tile_rows(config: PerfConfig) -> int:
    """dX rows per tile: ``tile_n / 64``."""
    return config.tile_n // BLOCK_W


def column_fill(problem: ConvProblem, config: PerfConfig) -> float:
    """Share of a tile's columns that are dX pixels, over the whole grid of tiles."""
    p, bh = problem, tile_rows(config)
    return (p.Hi * p.Wi) / (-(-p.Hi // bh) * bh * -(-p.Wi // BLOCK_W) * BLOCK_W)


def virtual_problem(problem: ConvProblem, config: PerfConfig) -> ConvProblem:
    """The pointwise problem whose GEMM tiles the persistent blocks walk: one image of
    ``N * ceil(cpg / tile_m) * tile_m`` pixels (every image's channel tiles) with
    ``G * ceil(Hi / bh) * ceil(Wi / 64) * tile_n`` channels (its pixel tiles; bh = tile_n/64
    rows each), ``G * kpg`` dY channels, G groups (all NHWC)."""
    p = problem
    bh = max(1, tile_rows(config))
    m_tiles = -(-p.cpg // max(1, config.tile_m))
    cols = -(-p.Hi // bh) * -(-p.Wi // BLOCK_W) * max(1, config.tile_n)
    return ConvProblem(N=1, C=p.G * cols, Hi=1, Wi=p.N * m_tiles * max(1, config.tile_m), K=p.G * p.kpg, Y=1, X=1,
                       G=p.G, dtype=p.dtype, in_layout="NHWC", out_layout="NHWC", fil_layout="NHWC", tf32=p.tf32)


def wt_transform(problem: ConvProblem) -> LayoutTransform:
    """The one transform of an NCHW TMA run: W per group ``(kpg, cpg*Y*X)`` (KCYX or KYXC in
    memory) -> W^T ``(cpg*Y*X, kpg)`` at the start of the workspace, before the kernel."""
    p = problem
    src = "KCYX" if w_cyx(p) else "KYXC"
    return LayoutTransform("W", src, src[1:] + "K", p.G, p.kpg, p.cpg * p.Y * p.X, p.elem_bytes, 0)


def w_cyx(problem: ConvProblem) -> bool:
    """W^T in the workspace is ``[G][cpg][Y*X][kpg]`` (W KCYX in memory), else ``[G][Y*X][cpg][kpg]``."""
    return memory_order(problem, "W") == "NCHW"


def gemm_config(problem: ConvProblem, config: PerfConfig) -> PerfConfig:
    """The main loop's config: the TMA schedule, ``split_k`` 1."""
    return config.replace(schedule=KernelSchedule.WGMMA_TMA, split_k=1)


# ----------------------------------------------------------------------------- spec
@dataclass(frozen=True)
class NchwTmaSpec(VirtualGemmSpec):
    """A validated NCHW TMA config for one launch's problem (its NCHW layout flags kept) and
    target: ``gemm`` is the resolved :class:`~miopen_solver.spec.DgradSpec` of
    :func:`virtual_problem` on the TMA main loop."""

    record_key = "nchw_tma"
    zero_fill = "none"

    @property
    def shifting(self) -> bool:
        """B by the shifting producer warpgroup (:func:`shift_loads`), not by tensor copies."""
        return shift_loads(self.problem)

    @property
    def block_threads(self) -> int:
        """The consumer warpgroups plus the producer: one warp issuing copies, or the shifting
        producer's :data:`PRODUCERS` threads."""
        return self.gemm.threads + (PRODUCERS if self.shifting else self.gemm.block_threads - self.gemm.threads)

    @property
    def block(self) -> tuple:
        return (self.block_threads, 1, 1)

    @property
    def staging_elems(self) -> int:
        """Elements of one stage's staging buffer (the shifting producer; 0 otherwise):
        64 k x :data:`STAGING_W` columns per tile row."""
        return 64 * STAGING_W * tile_rows(self.config) if self.shifting else 0

    @property
    def lds_bytes(self) -> int:
        """The TMA main loop's shared memory, plus with the shifting producer a staging
        buffer and a barrier per stage."""
        extra = self.config.stages * (self.staging_elems * self.problem.elem_bytes + 8) if self.shifting else 0
        return self.gemm.lds_bytes + extra

    @property
    def workspace_bytes(self) -> int:
        """The kernel's own workspace: none (W^T's slot is the transform's)."""
        return 0

    @cached_property
    def kernel_name(self) -> str:
        """``dgrad_nchw_tma_<arch>_<math>_<tile tag>_tma<blocks>[_shift]_<problem>`` (``_shift``:
        B by the shifting producer)."""
        p, gemm = self.problem, self.gemm
        return (f"dgrad_nchw_tma_{arch_tag(self.target)}_{self.math}_{gemm.tile_tag}_tma{gemm.tile_blocks}"
                f"{'_shift' if self.shifting else ''}_{p.short_tag()}")

    def transforms(self, whole: ConvProblem) -> tuple:
        """The layout transforms of a run over the ``whole`` batch: W -> W^T only."""
        return (wt_transform(whole),)

    def defines(self) -> list:
        """The ``DG_NT_*`` defines: the real launch problem and its tiling."""
        p, c = self.problem, self.config
        return [("DG_NT_N", p.N), ("DG_NT_C", p.C), ("DG_NT_G", p.G), ("DG_NT_CPG", p.cpg), ("DG_NT_KPG", p.kpg),
                ("DG_NT_HI", p.Hi), ("DG_NT_WI", p.Wi), ("DG_NT_WO", p.Wo), ("DG_NT_Y", p.Y), ("DG_NT_X", p.X),
                ("DG_NT_PH", p.pH), ("DG_NT_PW", p.pW), ("DG_NT_DH", p.dH), ("DG_NT_DW", p.dW),
                ("DG_NT_BH", tile_rows(c)), ("DG_NT_MT", -(-p.cpg // c.tile_m)),
                ("DG_NT_PTH", -(-p.Hi // tile_rows(c))), ("DG_NT_PTW", -(-p.Wi // BLOCK_W)),
                ("DG_NT_W_CYX", int(w_cyx(p)))] + \
            ([("DG_NT_PRODUCERS", PRODUCERS), ("DG_NT_SW", STAGING_W), ("DG_NT_S_STAGE", self.staging_elems)]
             if self.shifting else [])

    def tensor_maps(self) -> tuple:
        """dY NCHW as ``(Wo, Ho, K, N)`` in boxes of 64 columns x 1 row x 64 k (one MN-major
        block of B; with the shifting producer :data:`STAGING_W` columns, unswizzled, into the
        staging buffer); W^T as ``(kpg, Y*X, cpg, G)`` (from KCYX) or ``(kpg, cpg, Y*X, G)``
        (from KYXC) in boxes of 64 k x tile_m channels of one tap (K-major A rows). Both
        128-byte swizzled, zero outside the tensor (the padding; k past kpg)."""
        from .kernels.emit import TensorMapDesc
        p, c = self.problem, self.config
        eb, taps = p.elem_bytes, p.Y * p.X
        box, swizzle = ((STAGING_W, 1, c.tile_k, 1), 0) if self.shifting else ((BLOCK_W, 1, c.tile_k, 1), 128)
        dy = TensorMapDesc("dy", p.dtype, (p.Wo, p.Ho, p.K, p.N),
                           (p.Wo * eb, p.Ho * p.Wo * eb, p.K * p.Ho * p.Wo * eb), box, swizzle)
        row, grp = p.kpg * eb, p.cpg * taps * p.kpg * eb
        if w_cyx(p):
            w = TensorMapDesc("w", p.dtype, (p.kpg, taps, p.cpg, p.G), (row, taps * row, grp), (c.tile_k, 1, c.tile_m, 1))
        else:
            w = TensorMapDesc("w", p.dtype, (p.kpg, p.cpg, taps, p.G), (row, p.cpg * row, grp), (c.tile_k, c.tile_m, 1, 1))
        return (dy, w)

    def emit(self):
        """``dgrad.cu`` for the virtual GEMM with its ``nchw_tma`` section and the
        ``DG_NT_*`` defines, with this schedule's tensor maps."""
        from .kernels.emit import emit_gemm
        src = emit_gemm(self.gemm, name=self.kernel_name, extra=tuple(self.defines()),
                        sections=("nchw_tma", "ntshift") if self.shifting else ("nchw_tma",),
                        memset=False, maps=self.tensor_maps())
        return dataclasses.replace(src, block=self.block, shared_bytes=self.lds_bytes)

    def as_dict(self) -> dict:
        """Plain data (JSON-ready): the main loop's resolved values, with the real problem,
        the config, the GEMM's shape and the column fill; the block's threads and shared memory
        are the kernel's (with the shifting producer more than the main loop's)."""
        d = self.gemm_dict(zero_fill=self.zero_fill)
        d.update(threads=self.block_threads, lds_bytes=self.lds_bytes)
        p = self.problem
        d["gemm"] = {"m": p.cpg, "n": p.Hi * p.Wi, "k": p.Y * p.X * p.kpg, "groups": p.G, "images": p.N}
        d["column_fill"] = round(column_fill(p, self.config), 4)
        return d


def make_nchw_tma_spec(problem: ConvProblem, target: Target, config: PerfConfig) -> NchwTmaSpec:
    """Validate the NCHW TMA ``config`` for ``problem`` (one launch's, layouts as given) on
    ``target`` and resolve everything.

    Raises:
        PerfConfigError: the problem is not served (:func:`nchw_tma_reason`), tile_n is not a
            multiple of 64 or warp_tile_n not 64, 128, 192 or 256, ``split_k`` is not 1 or -1,
            or the TMA main loop's first broken rule on the virtual problem, as one sentence.
    """
    why = nchw_tma_reason(problem, target)
    if why is None:
        threads = config.warp_m * config.warp_n * 128 + PRODUCERS
        require(not shift_loads(problem) or threads <= SHIFT_MAX_BLOCK_THREADS,
                f"{_S}: this filter shifts dY by columns that are not multiples of {BOX_ALIGN}, so a producer "
                f"warpgroup loads B; with it a block of warp_m*warp_n = {config.warp_m * config.warp_n} "
                f"warpgroups has {threads} threads, allowed: at most {SHIFT_MAX_BLOCK_THREADS} (one consumer "
                f"warpgroup)")
        require(config.tile_n % BLOCK_W == 0 and config.tile_n > 0,
                f"{_S}: a tile's columns are whole dX rows of {BLOCK_W}; tile_n must be a multiple of {BLOCK_W}, "
                f"got {config.tile_n}")
        require(config.warp_tile_n in (64, 128, 192, 256),
                f"{_S}: B is read in 64-wide blocks; warp_tile_n must be 64, 128, 192 or 256, got {config.warp_tile_n}")
        require(config.tile_m > 0, f"{_S}: tile_m must be positive, got {config.tile_m}")
    def build(t: Target) -> NchwTmaSpec:
        return make_virtual_spec(NchwTmaSpec, problem, t, config, why=why,
                                 virtual=lambda p: virtual_problem(p, config), gemm_config=gemm_config,
                                 gemm_shape="[cpg, Y*X*kpg] x [Y*X*kpg, Hi*Wi] per image and group")
    spec = build(target)
    check_maps(spec.tensor_maps(), problem.elem_bytes, _S)
    if not spec.shifting:
        return spec
    require(spec.lds_bytes <= target.lds_bytes,
            f"{_S}: {config.stages} stages of A, B and the shifting producer's staging rows need "
            f"{spec.lds_bytes} bytes of shared memory, allowed: {target.lds_bytes} on {target.arch} (fewer stages)")
    # The persistent grid is sized by the main loop's blocks per multiprocessor, which see neither
    # the staging rows nor the producer warpgroup's threads: the blocks the whole block allows (by
    # shared memory, and by registers at the main loop's estimate, accumulators + 88 per thread)
    # are given to the main loop as its target's shared memory. The spec keeps the real target:
    # the built binary is checked against it (spec.check_binary).
    blocks = resident_blocks(target, spec.lds_bytes, spec.block_threads, spec.accumulators_per_lane)
    return dataclasses.replace(build(target.with_(lds_bytes=blocks * (spec.gemm.lds_bytes + 1024) - 1024)),
                               target=target)


# ----------------------------------------------------------------------------- CPU engine
def nchw_tma_run(spec: NchwTmaSpec, dy: np.ndarray, wt: np.ndarray, dx: np.ndarray) -> None:
    """One launch of ``spec`` on the CPU, as the kernel does it: per image, group and tap the
    GEMM ``W_gyx^T [cpg, kpg] x dY window [kpg, Hi*Wi]`` (zero outside dY) summed in fp32
    (chunks of images of about :data:`CHUNK_BYTES`), stored into NCHW dX in the storage type.

    Args:
        dy: the launch's images of dY, NCHW bytes (any shape of ``N*K*Ho*Wo`` elements);
        wt: W^T, ``(G, cpg, Y*X, kpg)`` or ``(G, Y*X, cpg, kpg)`` bytes (:func:`wt_transform`,
            :func:`w_cyx`); dx: the launch's images of dX, a C-contiguous array of
            ``N*C*Hi*Wi`` elements written in place as NCHW.

    Raises:
        ValueError: ``dx`` is not C-contiguous (it could not be written through a view).
    """
    p = spec.problem
    G, kpg, cpg, taps = p.G, p.kpg, p.cpg, p.Y * p.X
    if not dx.flags.c_contiguous:
        raise ValueError("the NCHW TMA engine writes dX through a view: pass a C-contiguous array")
    out = dx.reshape(p.N, G, cpg, p.Hi * p.Wi)
    a = np.asarray(wt, dtype=np.float32)
    a = a.reshape(G, cpg, taps, kpg).transpose(0, 2, 1, 3) if w_cyx(p) else a.reshape(G, taps, cpg, kpg)
    b = np.asarray(dy).reshape(p.N, G, kpg, p.Ho, p.Wo)
    # each tap reads dY row hi + pH - y*dH and column wi + pW - x*dW: only the dX rows and
    # columns whose reads fall inside dY are summed (the rest is the copy's zero fill), so no
    # buffer grows with a pad or a dilation
    windows = []
    for tap in range(taps):
        y, x = divmod(tap, p.X)
        oh, ow = p.pH - y * p.dH, p.pW - x * p.dW
        h0, h1 = max(0, -oh), min(p.Hi, p.Ho - oh)
        w0, w1 = max(0, -ow), min(p.Wi, p.Wo - ow)
        if h0 < h1 and w0 < w1:
            windows.append((tap, oh, ow, h0, h1, w0, w1))
    step = max(1, CHUNK_BYTES // (4 * p.C * p.Hi * p.Wi))
    for n0 in range(0, p.N, step):
        n1 = min(p.N, n0 + step)
        bf = b[n0:n1].astype(np.float32)
        acc = np.zeros((n1 - n0, G, cpg, p.Hi, p.Wi), dtype=np.float32)
        for tap, oh, ow, h0, h1, w0, w1 in windows:
            win = bf[..., h0 + oh:h1 + oh, w0 + ow:w1 + ow].reshape(n1 - n0, G, kpg, (h1 - h0) * (w1 - w0))
            acc[..., h0:h1, w0:w1] += np.matmul(a[:, tap], win).reshape(n1 - n0, G, cpg, h1 - h0, w1 - w0)
        acc = acc.reshape(n1 - n0, G, cpg, p.Hi * p.Wi)
        out[n0:n1] = acc.astype(dx.dtype)


__all__ = ["BLOCK_W", "BOX_ALIGN", "CHUNK_BYTES", "DTYPES", "NchwTmaSpec", "PRODUCERS", "SHIFT_MAX_BLOCK_THREADS",
           "STAGING_W", "column_fill", "gemm_config", "make_nchw_tma_spec", "nchw_tma_reason", "nchw_tma_run",
           "shift_loads", "tile_rows", "virtual_problem", "w_cyx", "wt_transform"]
