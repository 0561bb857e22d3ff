"""The ``patch-gemm`` kernel schedules: backward data of patch embeddings as one dense GEMM.

Pure Python (no printing, no GPU). Tensors are NHWC: dY ``(N, Ho, Wo, K)``, W
``(K, Y, X, cpg)``, dX ``(N, Hi, Wi, C)``.

Problems served (:func:`patch_reason`): stride equal to the filter (``sH == Y``, ``sW == X``),
no padding, dilation 1, a filter larger than 1x1 -- ViT 16x16/s16 and 14x14/s14 patch
embeddings, the ConvNeXt 4x4/s4 stem, 2x2/s2 downsampling. Every dY pixel then feeds a
disjoint ``Y x X`` patch of dX, so per group ``g``::

    D[m, j] = sum_k dY[n, ho, wo, g*kpg + k] * W[g*kpg + k, y, x, c]
    dX[n, ho*Y + y, wo*X + x, g*cpg + c] = D[m, j]

with row ``m = (n*Ho + ho)*Wo + wo`` and column ``j = (y*X + x)*cpg + c``: A is dY as
``[N*Ho*Wo, K]`` and B is W's bytes unchanged as ``[K, Y*X*cpg]``. That is the pointwise GEMM
of a *virtual* problem (:func:`virtual_problem`: dY unchanged, a ``1x1`` filter of
``C' = G*Y*X*cpg`` channels, dX' of ``Ho x Wo`` pixels), so a :class:`PatchSpec` holds the
:class:`~miopen_solver.spec.DgradSpec` of that problem (every tile rule, main loop and launch
shape is the GEMM schedule's) and only the epilogue's dX address is remapped (the
``patch`` section of ``kernels/dgrad.cu``). dX rows ``>= Ho*Y`` and columns ``>= Wo*X``
(``Hi % Y`` or ``Wi % X`` not 0) get no contribution: dX is zeroed before such a launch
(``zero_fill = "memset"``).

Schedules and config slots: :attr:`KernelSchedule.PATCH_GEMM` (5) runs the
:attr:`~KernelSchedule.WARP_MMA` main loop, :attr:`KernelSchedule.PATCH_GEMM_WGMMA` (6) the
:attr:`~KernelSchedule.WGMMA` one (sm_90a), ``PATCH_GEMM_PERSISTENT`` (9),
``PATCH_GEMM_TMA`` (10) and ``PATCH_GEMM_PINGPONG`` (21) the persistent, TMA and ping-pong
ones; the 13 other fields mean what they mean for that
main loop, on the virtual problem, e.g. ``128,128,64,2,1,64,128,0,0,0,1,-1,4,6``. Rules beyond
the main loop's: ``split_k`` 1 or -1 (each dX element is written once), and the dX store
width ``vector_size_c`` is clamped (never refused) to a power of two dividing one
contiguous, aligned run of a patch row (``gcd(X*cpg, Wi*C)`` when ``G == 1``, else ``cpg``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from math import gcd

import numpy as np

from . import vectors
from .config import KernelSchedule, PerfConfig
from .errors import require
from .problem import ConvProblem
from .spec import ZERO_FILL_TAGS, arch_tag
from .target import Target
from .virtual_gemm import VirtualGemmSpec, make_virtual_spec, virtual_gemm_reason

MAIN_LOOP = {KernelSchedule.PATCH_GEMM: KernelSchedule.WARP_MMA,
             KernelSchedule.PATCH_GEMM_WGMMA: KernelSchedule.WGMMA,
             KernelSchedule.PATCH_GEMM_PERSISTENT: KernelSchedule.WGMMA_PERSISTENT,
             KernelSchedule.PATCH_GEMM_TMA: KernelSchedule.WGMMA_TMA,
             KernelSchedule.PATCH_GEMM_PINGPONG: KernelSchedule.WGMMA_TMA_PINGPONG}
"""The GEMM schedule whose main loop each patch schedule runs."""
PATCH_SEARCH_OF = {loop: patch for patch, loop in MAIN_LOOP.items()}
"""The patch schedule of each main loop, for the search (every form is tried; the default
takes :data:`PATCH_OF`)."""
PATCH_OF = {KernelSchedule.WARP_MMA: KernelSchedule.PATCH_GEMM, KernelSchedule.WGMMA: KernelSchedule.PATCH_GEMM_WGMMA,
            KernelSchedule.WGMMA_PERSISTENT: KernelSchedule.PATCH_GEMM_WGMMA,
            KernelSchedule.WGMMA_TMA: KernelSchedule.PATCH_GEMM_WGMMA}
"""The patch schedule that runs a GEMM default's tile (persistent and TMA tiles on the plain
warpgroup main loop, as measured on the H200; their own patch forms are in the search
until measured)."""
CHUNK_BYTES = 16 << 20
"""CPU engine: fp32 GEMM output per chunk of images, bytes (at least one image)."""


# ----------------------------------------------------------------------------- rules
def patch_reason(problem: ConvProblem, target: Target) -> str | None:
    """Why the patch schedules cannot serve ``problem`` on ``target`` at all, or None."""
    p = problem
    why = virtual_gemm_reason(p, target, "the patch schedules")
    if why is not None:
        return why
    if p.Y * p.X == 1:
        return "a 1x1 filter is the pointwise GEMM already"
    if (p.sH, p.sW) != (p.Y, p.X):
        return f"stride {p.sH}x{p.sW} differs from the filter {p.Y}x{p.X} (patches would overlap or leave gaps)"
    if p.pH or p.pW:
        return f"padding {p.pH}x{p.pW} is not 0"
    if (p.Y > 1 and p.dH != 1) or (p.X > 1 and p.dW != 1):
        return f"dilation {p.dH}x{p.dW} is not 1"
    return None


def virtual_problem(problem: ConvProblem) -> ConvProblem:
    """The pointwise problem whose GEMM the patch problem is: dY unchanged, a 1x1 filter of
    ``G*Y*X*cpg`` channels (W's bytes), dX' of ``N x Ho x Wo`` pixels (all NHWC)."""
    p = problem
    return ConvProblem(N=p.N, C=p.G * p.Y * p.X * p.cpg, Hi=p.Ho, Wi=p.Wo, K=p.K, Y=1, X=1, G=p.G,
                       dtype=p.dtype, in_layout="NHWC", out_layout="NHWC", fil_layout="NHWC", tf32=p.tf32)


def store_run(problem: ConvProblem) -> int:
    """Elements of dX one vector store may cover: a contiguous run of a patch row whose start
    stays aligned, ``gcd(X*cpg, Wi*C)`` when ``G == 1`` (a patch row is X*cpg consecutive
    elements; rows are Wi*C apart), else ``cpg`` (groups interleave within a pixel)."""
    p = problem
    return gcd(p.X * p.cpg, p.Wi * p.C) if p.G == 1 else p.cpg


def store_run_why(problem: ConvProblem) -> str:
    """Where :func:`store_run` comes from, for a message: ``gcd(X*cpg = 48, Wi*C = 99)`` or
    ``cpg = 3 (G = 2: groups interleave within a pixel)``."""
    p = problem
    if p.G == 1:
        return f"gcd(X*cpg = {p.X * p.cpg}, Wi*C = {p.Wi * p.C}) (patch rows start Wi*C elements apart)"
    return f"cpg = {p.cpg} (G = {p.G}: groups interleave within a pixel)"


def gemm_config(problem: ConvProblem, config: PerfConfig) -> PerfConfig:
    """The main loop's config of a patch ``config``: its schedule, ``split_k`` 1 and the
    store width capped to :func:`store_run` (an invalid cap is passed on for the GEMM rules
    to name)."""
    vc = config.vector_size_c
    if vc >= 0 and vc & (vc - 1) == 0:
        vc = vectors.pow2_divisor(store_run(problem), vc or vectors.max_vector(problem.elem_bytes))
    return config.replace(schedule=MAIN_LOOP[config.schedule], split_k=1, vector_size_c=vc)


# ----------------------------------------------------------------------------- spec
@dataclass(frozen=True)
class PatchSpec(VirtualGemmSpec):
    """A validated patch config for one problem and target: ``gemm`` is the resolved
    :class:`~miopen_solver.spec.DgradSpec` of :func:`virtual_problem` on the config's main
    loop (tiles, vectors, launch geometry); ``problem`` and ``config`` are the real ones."""

    record_key = "patch"

    @property
    def zero_fill(self) -> str:
        """``"memset"`` when dX has rows or columns no patch covers (``Hi % Y`` or ``Wi % X``
        not 0), else ``"none"``."""
        p = self.problem
        return "memset" if p.Hi % p.Y or p.Wi % p.X else "none"

    @cached_property
    def kernel_name(self) -> str:
        """``dgrad_patch_gemm_<arch>_<math>_<tile tag>[_pb<blocks>|_tma[pp]<blocks>][_zfm]_<problem>``:
        the main loop's tile tag and loop tag (:attr:`DgradSpec.tile_tag`,
        :attr:`DgradSpec.loop_tag`: ``tmapp`` is the ping-pong main loop), and the real
        problem's ``short_tag``."""
        p, gemm = self.problem, self.gemm
        return (f"dgrad_patch_gemm_{arch_tag(self.target)}_{self.math}_{gemm.tile_tag}{gemm.loop_tag}"
                f"{ZERO_FILL_TAGS[self.zero_fill]}_{p.short_tag()}")

    def defines(self) -> list:
        """The ``DG_PATCH_*`` defines: the real dX the epilogue scatters into."""
        p = self.problem
        return [("DG_PATCH_HI", p.Hi), ("DG_PATCH_WI", p.Wi), ("DG_PATCH_C", p.C), ("DG_PATCH_CPG", p.cpg),
                ("DG_PATCH_Y", p.Y), ("DG_PATCH_X", p.X)]

    def emit(self):
        """``dgrad.cu`` for the virtual problem's GEMM with its ``patch`` section (the
        remapped epilogue) and the ``DG_PATCH_*`` defines."""
        from .kernels.emit import emit_gemm
        return emit_gemm(self.gemm, name=self.kernel_name, extra=tuple(self.defines()), sections=("patch",),
                         memset=self.zero_fill == "memset")

    def as_dict(self) -> dict:
        """Plain data (JSON-ready): the main loop's resolved values, with the real problem,
        the patch config and the GEMM's shape."""
        return self.gemm_dict(zero_fill=self.zero_fill)


def make_patch_spec(problem: ConvProblem, target: Target, config: PerfConfig) -> PatchSpec:
    """Validate the patch ``config`` for ``problem`` on ``target`` and resolve everything.

    Raises:
        PerfConfigError: the problem is not a patch problem, ``split_k`` is not 1 or -1, the
            TMA forms' 16-byte dX chunks do not fit a patch row run (:func:`store_run`), or
            the main loop's first broken rule on the virtual problem, as one sentence.
    """
    chunk = vectors.max_vector(problem.elem_bytes)
    if config.schedule.tma and config.schedule.patch and patch_reason(problem, target) is None:
        require(store_run(problem) % chunk == 0,
                f"{config.schedule.label} stores dX in 16-byte chunks of {chunk} elements; a contiguous "
                f"patch row run here is {store_run(problem)}, {store_run_why(problem)}")
    return make_virtual_spec(PatchSpec, problem, target, config, why=patch_reason(problem, target),
                             virtual=virtual_problem, gemm_config=gemm_config,
                             gemm_shape="[N*Ho*Wo, K] x [K, Y*X*cpg]")


# ----------------------------------------------------------------------------- CPU engine
def patch_nhwc(spec: PatchSpec, dy: np.ndarray, w: np.ndarray, dx: np.ndarray) -> None:
    """One launch of ``spec`` on the CPU, as the kernel does it: per group the GEMM
    ``[N*Ho*Wo, kpg] x [kpg, Y*X*cpg]`` in fp32 (chunks of images of about
    :data:`CHUNK_BYTES`), each row scattered into its dX patch in the storage type; with
    ``zero_fill == "memset"`` dX is zeroed first (the uncovered border).

    Args:
        dy: NHWC ``(N, Ho, Wo, K)``; w: KYXC ``(K, Y, X, cpg)``; dx: the NHWC ``(N, Hi, Wi, C)``
            view written in place (storage dtype).
    """
    p = spec.problem
    G, kpg, cpg, Ho, Wo = p.G, p.kpg, p.cpg, p.Ho, p.Wo
    if spec.zero_fill == "memset":
        dx[...] = 0
    b = np.asarray(w, dtype=np.float32).reshape(G, kpg, p.Y * p.X * cpg)
    per_image = 4 * Ho * Wo * p.Y * p.X * p.C
    step = max(1, CHUNK_BYTES // per_image)
    for n0 in range(0, p.N, step):
        n1 = min(p.N, n0 + step)
        a = np.asarray(dy[n0:n1], dtype=np.float32).reshape((n1 - n0) * Ho * Wo, G, kpg)
        d = np.matmul(a.transpose(1, 0, 2), b)                       # (G, M, Y*X*cpg)
        d = d.reshape(G, n1 - n0, Ho, Wo, p.Y, p.X, cpg).transpose(1, 2, 4, 3, 5, 0, 6)
        dx[n0:n1, :Ho * p.Y, :Wo * p.X] = d.reshape(n1 - n0, Ho * p.Y, Wo * p.X, p.C).astype(dx.dtype)


__all__ = ["MAIN_LOOP", "PATCH_OF", "PATCH_SEARCH_OF", "PatchSpec", "gemm_config", "make_patch_spec", "patch_nhwc", "patch_reason",
           "store_run", "virtual_problem"]
