"""The ``subpixel`` kernel schedules: a strided dgrad as one stride-1 GEMM over dY.

Pure Python (no printing, no GPU). Tensors are NHWC: dY ``(N, Ho, Wo, K)``, W
``(K, Y, X, cpg)``, dX ``(N, Hi, Wi, C)``.

A stride-``s`` dgrad splits dX into ``sH*sW`` phases (``i = sH*a + ry``, ``j = sW*b + rx``)
whose taps differ (:mod:`miopen_solver.tilde` runs one sub-GEMM per phase, 1 to 4 taps each
for a 3x3 stride-2 filter). The dgrad relation ``i = o*sH - pH + ky`` gives, per phase ``ry``,
``o = a + e`` with ``e = (ry + pH - ky) / sH`` for the taps ``ky`` of that phase; over all
phases ``e`` spans ``[lo, hi]`` (:func:`offsets`). So with ``Y' = hi - lo + 1`` every phase is
a stride-1 dgrad over dY with a ``Y' x X'`` filter, and all phases together are *one*
stride-1 dgrad of ``sH*sW*cpg`` channels per group (the phases are channels, as in a
pixel shuffle)::

    dX'[n, a', b', g, (ry, rx, c)] = sum_{ty, tx, k} dY[n, a' - ty, b' - tx, g, k] * W'[g, k, ty, tx, (ry, rx, c)]
    W'[k, ty, tx, ry, rx, c] = W[k, ry + pH + sH*(ty - hiH), rx + pW + sW*(tx - hiW), c]   (0 outside the filter)
    dX[n, sH*(a' - hiH) + ry, sW*(b' - hiW) + rx, g*cpg + c] = dX'[n, a', b', g, (ry, rx, c)]   (inside dX)

that is the pad-0, stride-1 problem :func:`virtual_problem` (dY unchanged, ``Hi' = Ho + Y' - 1``),
whose W' is packed into the workspace before the kernel (:class:`PackW`, ``kernels/
subpixel_pack.cu``) and whose epilogue scatters each 16-byte run of a row's columns into
its phase's dX pixel (the ``subpix`` section of ``kernels/dgrad.cu``). It is the transposed
convolution's sub-pixel form (Shi et al., "Real-Time Single Image and Video Super-Resolution
Using an Efficient Sub-Pixel Convolutional Neural Network", CVPR 2016, section 2.2): one
uniform GEMM of ``N*Hi'*Wi'`` rows, ``sH*sW*cpg`` columns and ``Y'*X'*kpg`` deep instead of
``sH*sW`` unequal ones, at the price of the MMAs on W''s zero taps (``Y'*X'*sH*sW`` products
for ``Y*X`` taps: 16 for 9 on a 3x3 stride-2 filter). dX rows or columns no ``a'`` reaches
get no contribution (a tap offset range that does not cover them): dX is zeroed before
such a launch (``zero_fill = "memset"``, :func:`uncovered`).

Schedules and config slots: :attr:`KernelSchedule.SUBPIXEL` (15) runs the
:attr:`~KernelSchedule.WARP_MMA` main loop, ``SUBPIXEL_WGMMA`` (16) the ``WGMMA`` one and
``SUBPIXEL_TMA`` (17) the ``WGMMA_TMA`` one and ``SUBPIXEL_PINGPONG`` (22) the ping-pong one
(sm_90a); the 13 other fields mean what they
mean for that main loop on the virtual problem, e.g. ``128,128,64,2,1,64,128,0,0,0,1,-1,4,17``.
Rules beyond the main loop's: ``split_k`` 1 or -1 (each dX element is written once); the dX
store width ``vector_size_c`` is clamped (never refused) to a power of two dividing cpg; the
TMA forms (16-bit, like their main loops) store 16-byte chunks, so they need ``cpg % 8 == 0``;
dY, W and dX NHWC in memory (no layout transform runs around these schedules).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from . import vectors
from .config import KernelSchedule, PerfConfig
from .errors import require
from .problem import ConvProblem
from .spec import ZERO_FILL_TAGS, arch_tag
from .target import Target
from .transpose import memory_order
from .virtual_gemm import VirtualGemmSpec, make_virtual_spec, virtual_gemm_reason

MAIN_LOOP = {KernelSchedule.SUBPIXEL: KernelSchedule.WARP_MMA,
             KernelSchedule.SUBPIXEL_WGMMA: KernelSchedule.WGMMA,
             KernelSchedule.SUBPIXEL_TMA: KernelSchedule.WGMMA_TMA,
             KernelSchedule.SUBPIXEL_PINGPONG: KernelSchedule.WGMMA_TMA_PINGPONG}
"""The GEMM schedule whose main loop each sub-pixel schedule runs."""
SUBPIXEL_OF = {loop: sched for sched, loop in MAIN_LOOP.items()}
"""The sub-pixel schedule of each main loop."""
PACK_BLOCK = (256, 1, 1)
"""Threads of a W' pack block (one W' element each, a grid-stride loop)."""
PACK_MAX_BLOCKS = 1024
"""Blocks of the W' pack launch at most (W' is a filter: kilobytes to a few megabytes)."""


# ----------------------------------------------------------------------------- geometry
def offsets(pad: int, stride: int, filt: int) -> tuple:
    """``(lo, hi)``: the least and greatest ``e = o - a`` over the phases of one axis: every
    ``(r, k)`` with ``r`` in ``[0, stride)``, ``k`` in ``[0, filt)`` and ``(r + pad - k) % stride
    == 0`` has ``e = (r + pad - k) // stride``."""
    es = [(r + pad - k) // stride for r in range(stride) for k in range(filt) if (r + pad - k) % stride == 0]
    return min(es), max(es)


def virtual_filter(problem: ConvProblem) -> tuple:
    """``(Y', X', hiH, hiW)``: the stride-1 filter over dY that holds every phase's taps, and
    the offsets its tap 0 has (``o = a' - t``; real row ``a = a' - hiH``)."""
    p = problem
    loH, hiH = offsets(p.pH, p.sH, p.Y)
    loW, hiW = offsets(p.pW, p.sW, p.X)
    return hiH - loH + 1, hiW - loW + 1, hiH, hiW


def virtual_problem(problem: ConvProblem) -> ConvProblem:
    """The stride-1, pad-0 problem whose dgrad the sub-pixel launch runs: dY unchanged, the
    ``Y' x X'`` filter of :func:`virtual_filter`, ``sH*sW*cpg`` channels per group, dX' of
    ``(Ho + Y' - 1) x (Wo + X' - 1)`` pixels (all NHWC)."""
    p = problem
    yv, xv, _, _ = virtual_filter(p)
    return ConvProblem(N=p.N, C=p.G * p.sH * p.sW * p.cpg, Hi=p.Ho + yv - 1, Wi=p.Wo + xv - 1, K=p.K, Y=yv, X=xv,
                       G=p.G, dtype=p.dtype, in_layout="NHWC", out_layout="NHWC", fil_layout="NHWC", tf32=p.tf32)


def _axis_rows(hi_real: int, stride: int, size_v: int, top: int) -> tuple:
    """Real rows ``[first, last)`` of one axis that some virtual row reaches (``a' in [0,
    size_v)``, ``i = stride*(a' - top) + r``), clipped to ``[0, hi_real)``."""
    first = max(0, -stride * top)
    last = min(hi_real, stride * (size_v - top))
    return first, last


def uncovered(problem: ConvProblem) -> bool:
    """Whether some dX pixel lies outside every virtual row or column (then dX is zeroed
    before the launch: those pixels get no tap)."""
    p = problem
    v = virtual_problem(p)
    _, _, hiH, hiW = virtual_filter(p)
    rows = _axis_rows(p.Hi, p.sH, v.Hi, hiH)
    cols = _axis_rows(p.Wi, p.sW, v.Wi, hiW)
    return rows != (0, p.Hi) or cols != (0, p.Wi)


def mma_overhead(problem: ConvProblem) -> float:
    """MMA work of the sub-pixel GEMM over the real taps' (``Y'*X'*sH*sW / (Y*X)``)."""
    p = problem
    yv, xv, _, _ = virtual_filter(p)
    return yv * xv * p.sH * p.sW / (p.Y * p.X)


# ----------------------------------------------------------------------------- rules
def subpixel_reason(problem: ConvProblem, target: Target) -> str | None:
    """Why the sub-pixel schedules cannot serve ``problem`` on ``target`` at all, or None."""
    p = problem
    why = virtual_gemm_reason(p, target, "the sub-pixel schedules")
    if why is not None:
        return why
    if p.sH == 1 and p.sW == 1:
        return "stride 1x1 has one phase: the tilde GEMM is that GEMM already"
    if p.dH != 1 or p.dW != 1:
        return f"dilation {p.dH}x{p.dW} is not 1"
    if p.Y < p.sH or p.X < p.sW:
        return (f"filter {p.Y}x{p.X} is narrower than stride {p.sH}x{p.sW}: phases without taps would "
                f"multiply zeros")
    if (p.sH, p.sW) == (p.Y, p.X) and not (p.pH or p.pW):
        patch = ", ".join(str(int(k)) for k in KernelSchedule if k.patch)
        return f"stride equal to the filter without padding is the patch GEMM (schedules {patch})"
    orders = {t: memory_order(p, t) for t in ("dY", "W", "dX")}
    if any(o != "NHWC" for o in orders.values()):
        shown = ", ".join(f"{t} {o or 'neither NHWC nor NCHW'}" for t, o in orders.items())
        return (f"{shown} in memory: the sub-pixel schedules read dY and W and store dX NHWC, with no "
                f"layout transform")
    return None


def gemm_config(problem: ConvProblem, config: PerfConfig) -> PerfConfig:
    """The main loop's config of a sub-pixel ``config``: its schedule, ``split_k`` 1 and the
    store width capped to a power of two dividing cpg (an invalid value is passed on for the
    GEMM rules to name)."""
    vc = config.vector_size_c
    if vc >= 0 and vc & (vc - 1) == 0:
        vc = vectors.pow2_divisor(problem.cpg, vc or vectors.max_vector(problem.elem_bytes))
    return config.replace(schedule=MAIN_LOOP[config.schedule], split_k=1, vector_size_c=vc)


# ----------------------------------------------------------------------------- W' pack
def pack_w(problem: ConvProblem, w: np.ndarray) -> np.ndarray:
    """W' of the virtual problem from the real KYXC ``w`` (``(K, Y, X, cpg)``, any dtype;
    bits kept): ``(K, Y', X', sH*sW*cpg)``, zero where a virtual tap is outside the filter.
    What ``kernels/subpixel_pack.cu`` stores."""
    p = problem
    yv, xv, hiH, hiW = virtual_filter(p)
    w = np.asarray(w).reshape(p.K, p.Y, p.X, p.cpg)
    out = np.zeros((p.K, yv, xv, p.sH, p.sW, p.cpg), dtype=w.dtype)
    for ty in range(yv):
        for ry in range(p.sH):
            ky = ry + p.pH + p.sH * (ty - hiH)
            if not 0 <= ky < p.Y:
                continue
            for tx in range(xv):
                for rx in range(p.sW):
                    kx = rx + p.pW + p.sW * (tx - hiW)
                    if 0 <= kx < p.X:
                        out[:, ty, tx, ry, rx, :] = w[:, ky, kx, :]
    return out.reshape(p.K, yv, xv, p.sH * p.sW * p.cpg)


@dataclass(frozen=True)
class PackW:
    """The W -> W' pack before a sub-pixel kernel: one launch of ``subpixel_pack.cu`` from
    the user's W into the workspace at ``offset`` (a transform of the solution, like the
    layout transforms of :mod:`miopen_solver.transpose`, and its own launch)."""

    problem: ConvProblem
    offset: int = 0

    tensor = "W"
    src = "KYXC"
    dst = "subpixel"
    kernel_form = "subpixel-pack"
    before = True

    @property
    def transforms(self) -> tuple:
        """The launch runs this one transform."""
        return (self,)

    @property
    def elems(self) -> int:
        v = virtual_problem(self.problem)
        return v.K * v.Y * v.X * v.cpg

    @property
    def nbytes(self) -> int:
        return self.elems * self.problem.elem_bytes

    @property
    def dst_shape(self) -> tuple:
        v = virtual_problem(self.problem)
        return (v.K, v.Y, v.X, v.cpg)

    @property
    def kernel_name(self) -> str:
        """``dgrad_subpixel_pack_<problem>``: the sizes are defines, one binary per problem."""
        return f"dgrad_subpixel_pack_{self.problem.short_tag()}"

    @property
    def label(self) -> str:
        return "W KYXC->subpixel"

    @property
    def grid(self) -> tuple:
        return (max(1, min(PACK_MAX_BLOCKS, -(-self.elems // PACK_BLOCK[0]))), 1, 1)

    @property
    def block(self) -> tuple:
        return PACK_BLOCK

    def args(self, ptrs) -> tuple:
        """``(w, w')`` device pointers: ``ptrs`` is one ``(src, dst)`` pair."""
        (src, dst), = ptrs
        return (src, dst)

    def emit(self, vendor: str, arch: str):
        from .kernels.emit import emit_subpixel_pack
        return emit_subpixel_pack(self.problem, vendor, arch, self.kernel_name, self.grid, self.block)

    def to_record(self) -> dict:
        return {"tensor": self.tensor, "src": self.src, "dst": self.dst, "elems": self.elems,
                "elem_bytes": self.problem.elem_bytes, "offset": self.offset}

    def apply(self, flat):
        """The pack on host bytes (numpy): ``flat`` holds W; returns W' flat."""
        return pack_w(self.problem, flat).reshape(-1)


# ----------------------------------------------------------------------------- spec
@dataclass(frozen=True)
class SubpixelSpec(VirtualGemmSpec):
    """A validated sub-pixel config for one problem and target: ``gemm`` is the resolved
    :class:`~miopen_solver.spec.DgradSpec` of :func:`virtual_problem` on the config's main
    loop; ``problem`` and ``config`` are the real ones."""

    record_key = "subpixel"

    @property
    def zero_fill(self) -> str:
        """``"memset"`` where some dX pixel is outside every virtual row or column
        (:func:`uncovered`), else ``"none"``."""
        return "memset" if uncovered(self.problem) else "none"

    @cached_property
    def kernel_name(self) -> str:
        """``dgrad_subpixel_<arch>_<math>_<tile tag>[_tma[pp]<blocks>][_zfm]_<problem>`` (the main
        loop's :attr:`DgradSpec.loop_tag`)."""
        p, gemm = self.problem, self.gemm
        return (f"dgrad_subpixel_{arch_tag(self.target)}_{self.math}_{gemm.tile_tag}{gemm.loop_tag}"
                f"{ZERO_FILL_TAGS[self.zero_fill]}_{p.short_tag()}")

    def transforms(self, whole: ConvProblem) -> tuple:
        """The W' pack of a run over the ``whole`` batch (W does not depend on N)."""
        return (PackW(whole.replace(N=self.problem.N)),)

    def defines(self) -> list:
        """The ``DG_SP_*`` defines: the real dX the epilogue scatters into and the row and
        column offsets of virtual tap 0."""
        p = self.problem
        _, _, hiH, hiW = virtual_filter(p)
        return [("DG_SP_HI", p.Hi), ("DG_SP_WI", p.Wi), ("DG_SP_C", p.C), ("DG_SP_CPG", p.cpg),
                ("DG_SP_SH", p.sH), ("DG_SP_SW", p.sW), ("DG_SP_TOP", hiH), ("DG_SP_LEFT", hiW)]

    def emit(self):
        """``dgrad.cu`` for the virtual problem's GEMM with its ``subpix`` section (the
        phase-scattering epilogue) and the ``DG_SP_*`` defines."""
        from .kernels.emit import emit_gemm
        return emit_gemm(self.gemm, name=self.kernel_name, extra=tuple(self.defines()), sections=("subpix",),
                         memset=self.zero_fill == "memset")

    def as_dict(self) -> dict:
        """Plain data (JSON-ready): the main loop's resolved values, with the real problem,
        the config, the GEMM's shape and the MMA overhead of W''s zero taps."""
        return self.gemm_dict(zero_fill=self.zero_fill, mma_overhead=round(mma_overhead(self.problem), 4))


def make_subpixel_spec(problem: ConvProblem, target: Target, config: PerfConfig) -> SubpixelSpec:
    """Validate the sub-pixel ``config`` for ``problem`` on ``target`` and resolve everything.

    Raises:
        PerfConfigError: the problem is not served (:func:`subpixel_reason`), ``split_k`` is
            not 1 or -1, the TMA forms' 16-byte dX chunks do not divide cpg, or the main
            loop's first broken rule on the virtual problem, as one sentence.
    """
    chunk = vectors.max_vector(problem.elem_bytes)
    if config.schedule.tma and config.schedule.subpixel and subpixel_reason(problem, target) is None:
        require(problem.cpg % chunk == 0,
                f"{config.schedule.label} stores dX in 16-byte chunks of {chunk} elements of one phase; "
                f"cpg {problem.cpg} is not a multiple of {chunk}")
    return make_virtual_spec(SubpixelSpec, problem, target, config, why=subpixel_reason(problem, target),
                             virtual=virtual_problem, gemm_config=gemm_config,
                             gemm_shape="[N*Hi'*Wi', Y'*X'*K] x [Y'*X'*K, sH*sW*cpg]")


# ----------------------------------------------------------------------------- CPU engine
def scatter(problem: ConvProblem, dxv: np.ndarray, dx: np.ndarray) -> None:
    """The epilogue's scatter on the CPU: NHWC virtual ``dxv`` ``(N, Hi', Wi', C')`` into
    the NHWC view ``dx`` ``(N, Hi, Wi, C)`` (pixels no virtual row reaches left as they are)."""
    p = problem
    v = virtual_problem(p)
    _, _, hiH, hiW = virtual_filter(p)
    d = dxv.reshape(p.N, v.Hi, v.Wi, p.G, p.sH, p.sW, p.cpg)
    for ry in range(p.sH):
        for rx in range(p.sW):
            # virtual rows a' whose real row sH*(a' - hiH) + ry is inside dX
            a0 = max(0, -(-(hiH * p.sH - ry) // p.sH))
            a1 = min(v.Hi, (p.Hi - 1 - ry) // p.sH + hiH + 1)
            b0 = max(0, -(-(hiW * p.sW - rx) // p.sW))
            b1 = min(v.Wi, (p.Wi - 1 - rx) // p.sW + hiW + 1)
            if a0 >= a1 or b0 >= b1:
                continue
            i0, j0 = p.sH * (a0 - hiH) + ry, p.sW * (b0 - hiW) + rx
            dst = dx[:, i0:p.sH * (a1 - 1 - hiH) + ry + 1:p.sH, j0:p.sW * (b1 - 1 - hiW) + rx + 1:p.sW]
            dst[...] = d[:, a0:a1, b0:b1, :, ry, rx, :].reshape(dst.shape)


__all__ = ["MAIN_LOOP", "PACK_BLOCK", "PackW", "SUBPIXEL_OF", "SubpixelSpec", "gemm_config", "make_subpixel_spec",
           "mma_overhead", "offsets", "pack_w", "scatter", "subpixel_reason", "uncovered", "virtual_filter",
           "virtual_problem"]
