"""The ``nchw-pointwise`` kernel schedules: 1x1 and patch-filter problems whose dY and dX are
NCHW in memory, run with no dY or dX transform.

Pure Python (no printing, no GPU). Problems served (:func:`nchw_pw_reason`): a 1x1 filter,
stride 1, no padding (any dilation), dY and dX NCHW in memory (:func:`~miopen_solver.transpose.memory_order`),
W either way (a 1x1 filter has the same bytes in NCHW and NHWC). Per image ``n`` and group
``g``, with ``P = H*W`` pixels (contiguous in NCHW)::

    dX[n, g*cpg:(g+1)*cpg, :] (cpg x P) = W_g^T (cpg x kpg) x dY[n, g*kpg:(g+1)*kpg, :] (kpg x P)
    W_g = W[g*kpg:(g+1)*kpg, :]  (kpg x cpg)

That is the NHWC pointwise GEMM with the operands' roles swapped: the GEMM's rows are the
channels c (GemmM = cpg), its columns the pixels (GemmN = P), its reduction k (GemmK = kpg).
A = W_g^T must be k-contiguous, so W is transposed once per run into the workspace
(:func:`wt_transform`: ``(G, kpg, cpg) -> (G, cpg, kpg)``, tiny beside dY and dX); B is dY
of one image and group as it lies (p contiguous: how the pointwise kernel reads W, rows of
k with ``C' = P`` channels); the staged epilogue stores rows of p, which is dX NCHW. So the
GEMM is that of :func:`virtual_problem` (one image of ``cpg`` pixels with ``P`` channels,
``K' = kpg``, one group) and a :class:`NchwPwSpec` holds its
:class:`~miopen_solver.spec.DgradSpec`; the ``nchw_pw`` section of ``kernels/dgrad.cu``
adds only the batching: grid y = N*G blocks (image ``y / G``, group ``y % G``), each offsetting
A by ``g*cpg*kpg``, B by ``(n*K + g*kpg)*P`` and dX by ``(n*C + g*cpg)*P`` elements (64-bit).

Patch filters (:func:`is_patch`: stride = filter ``Y x X``, no padding, dilation 1, dX a whole
number of patches, W KCYX) are the same GEMM with ``cpg*Y*X`` rows: every dY pixel feeds its
own patch, so per image and group ``D (cpg*Y*X x Ho*Wo) = W_g^T x dY[n, g] (kpg x Ho*Wo)``
with W^T's rows ``(c, y, x)`` (KCYX bytes through the same transform), and the ``nchw_patch``
section stores ``D[(c, y, x), (ho, wo)]`` at ``dX[n, g*cpg + c, ho*Y + y, wo*X + x]`` in runs
of :func:`patch_vector` consecutive ``x`` (the virtual problem's ``Wi`` is ``cpg*Y*X``, its
``C`` is ``Ho*Wo``).

Schedules and config slots: :attr:`KernelSchedule.NCHW_POINTWISE` (7) runs the
:attr:`~KernelSchedule.WARP_MMA` main loop, :attr:`KernelSchedule.NCHW_POINTWISE_WGMMA` (8)
the :attr:`~KernelSchedule.WGMMA` one (sm_90a); the 13 other fields mean what they mean for
that main loop on the virtual problem (tile_m over channels, tile_n over pixels), e.g.
``128,128,64,2,1,64,128,0,0,0,1,-1,4,8``; :attr:`KernelSchedule.NCHW_POINTWISE_PERSISTENT`
(18) the :attr:`~KernelSchedule.WGMMA_PERSISTENT` one, each row of the grid (one image and
group) holding :attr:`NchwPwSpec.tile_blocks` persistent blocks that walk its GEMM's tiles.
Rules beyond the main loop's: ``split_k`` 1 or -1
(each dX element is written once) and N*G within the grid's y limit (split-N cuts N per
launch; past the limit the family is refused and the transposing path runs). Vector widths
follow the virtual problem: dY loads and dX stores along p, at most the largest power of two
dividing P (1 for P = 49), W^T loads along k (dividing kpg).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from math import gcd

import numpy as np

from . import vectors
from .config import KernelSchedule, PerfConfig
from .problem import ConvProblem
from .spec import arch_tag
from .target import Target
from .transpose import LayoutTransform, has_order, memory_order
from .virtual_gemm import VirtualGemmSpec, make_virtual_spec, virtual_gemm_reason

MAIN_LOOP = {KernelSchedule.NCHW_POINTWISE: KernelSchedule.WARP_MMA,
             KernelSchedule.NCHW_POINTWISE_WGMMA: KernelSchedule.WGMMA,
             KernelSchedule.NCHW_POINTWISE_PERSISTENT: KernelSchedule.WGMMA_PERSISTENT}
"""The GEMM schedule whose main loop each NCHW pointwise schedule runs."""
NCHW_PW_OF = {KernelSchedule.WARP_MMA: KernelSchedule.NCHW_POINTWISE,
              KernelSchedule.WGMMA: KernelSchedule.NCHW_POINTWISE_WGMMA,
              KernelSchedule.WGMMA_PERSISTENT: KernelSchedule.NCHW_POINTWISE_PERSISTENT,
              KernelSchedule.WGMMA_TMA: KernelSchedule.NCHW_POINTWISE_WGMMA}
"""The NCHW pointwise schedule that runs a GEMM config's tile, in the search and for the
default (TMA tiles on the plain warpgroup main loop): the NCHW problem runs its GEMM
default's tile on the main loop that default chose (schedule 18 measured, bench/RESULTS.md,
twentieth session)."""
CHUNK_BYTES = 16 << 20
"""CPU engine: fp32 GEMM output per chunk of images, bytes (at least one image)."""


# ----------------------------------------------------------------------------- rules
def nchw_pw_reason(problem: ConvProblem, target: Target) -> str | None:
    """Why the NCHW pointwise schedules cannot serve ``problem`` (one launch's: N is the
    images per launch) on ``target`` at all, or None."""
    p = problem
    why = virtual_gemm_reason(p, target, "the NCHW pointwise schedules")
    if why is not None:
        return why
    if not p.is_pointwise and not is_patch(p):
        return (f"a {p.Y}x{p.X} filter with stride {p.sH}x{p.sW}, padding {p.pH}x{p.pW} and dilation "
                f"{p.dH}x{p.dW} is neither pointwise (1x1, stride 1, no padding) nor a patch filter "
                f"(stride = filter, no padding, dilation 1); allowed: -y/-x 1 with -u/-v 1 and -p/-q 0, "
                f"or -u/-v equal to -y/-x with -p/-q 0 and -l/-j 1")
    if is_patch(p):
        if p.Hi % p.Y or p.Wi % p.X:
            return (f"dX {p.Hi}x{p.Wi} (-H/-W) is not a whole number of {p.Y}x{p.X} (-y/-x) patches (its border "
                    f"rows and columns get no patch); allowed: -H a multiple of -y and -W of -x")
        if not has_order(p, "W", "NCHW"):
            return ("W is not NCHW (KCYX) in memory: a patch filter's W^T rows must be (c, y, x); "
                    "allowed: --fil_layout NCHW")
    for tensor, flag in (("dY", "--out_layout"), ("dX", "--in_layout")):
        order = memory_order(p, tensor)
        if order == "NHWC" and has_order(p, tensor, "NCHW"):     # both orders' bytes (one channel or pixel)
            return (f"{tensor} has the bytes of NHWC as well as NCHW (one channel or a one-pixel plane): the "
                    f"NHWC kernels read it in place; allowed here: a {tensor} of more than one channel and pixel")
        if order != "NCHW":
            return f"{tensor} is {order or 'neither NCHW nor NHWC'} in memory, not NCHW; allowed: {flag} NCHW"
    most = target.max_grid[1]
    if p.N * p.G > most:
        return (f"N*G = {p.N}*{p.G} = {p.N * p.G} (image, group) blocks exceed {target.arch}'s grid "
                f"limit {most} along y; allowed: N*G (-n times -g) at most {most} a launch")
    return None


def is_patch(problem: ConvProblem) -> bool:
    """Whether ``problem`` has a patch filter: larger than 1x1, stride equal to the filter, no
    padding, dilation 1 (every dY pixel feeds its own ``Y x X`` patch of dX)."""
    p = problem
    return (p.Y * p.X > 1 and (p.sH, p.sW) == (p.Y, p.X) and (p.pH, p.pW) == (0, 0) and (p.dH, p.dW) == (1, 1)
            and not p.is_3d)


def virtual_problem(problem: ConvProblem) -> ConvProblem:
    """The pointwise problem whose GEMM one (image, group) is: one image of ``cpg*Y*X``
    pixels (the rows of W^T: ``(c, y, x)``) with ``Ho*Wo`` channels (dY's pixels; dX's too
    for a 1x1 filter), ``kpg`` dY channels, one group (all NHWC)."""
    p = problem
    return ConvProblem(N=1, C=p.Ho * p.Wo, Hi=1, Wi=p.cpg * p.Y * p.X, K=p.kpg, Y=1, X=1, G=1, dtype=p.dtype,
                       in_layout="NHWC", out_layout="NHWC", fil_layout="NHWC", tf32=p.tf32)


def patch_vector(problem: ConvProblem, tile_m: int) -> int:
    """Elements per dX store of a patch problem's epilogue (``tile_m`` rows a tile): the
    largest power of two dividing the filter width X and ``tile_m``, at most 16 bytes (the
    run of one patch row those rows are); 1 for a 1x1 filter."""
    p = problem
    if not is_patch(p):
        return 1
    return vectors.pow2_divisor(gcd(p.X, tile_m), vectors.max_vector(p.elem_bytes))


def gemm_twin(problem: ConvProblem) -> ConvProblem:
    """:func:`virtual_problem` with its ``N*G`` GEMMs counted as groups: the same per-group
    GEMM shape and the same number of blocks as a launch, for heuristics that count tiles
    (never emitted: the kernel's A does not advance with the image)."""
    p, v = problem, virtual_problem(problem)
    ng = p.N * p.G
    return v.replace(C=ng * v.C, K=ng * v.K, G=ng)


def wt_transform(problem: ConvProblem) -> LayoutTransform:
    """The one transform of an NCHW pointwise run: W ``(G, kpg, cpg*Y*X)`` (KC per group for
    a 1x1 filter, whose bytes are the same in NCHW and NHWC; KCYX for a patch filter) -> W^T
    ``(G, cpg*Y*X, kpg)`` at the start of the workspace, before the kernel."""
    p = problem
    src, dst = ("KCYX", "CYXK") if is_patch(p) else ("KC", "CK")
    return LayoutTransform("W", src, dst, p.G, p.kpg, p.cpg * p.Y * p.X, p.elem_bytes, 0)


def gemm_config(problem: ConvProblem, config: PerfConfig) -> PerfConfig:
    """The main loop's config of an NCHW pointwise ``config`` (any ``problem``): its
    schedule, ``split_k`` 1."""
    return config.replace(schedule=MAIN_LOOP[config.schedule], split_k=1)


# ----------------------------------------------------------------------------- spec
@dataclass(frozen=True)
class NchwPwSpec(VirtualGemmSpec):
    """A validated NCHW pointwise config for one launch's problem (its NCHW layout flags
    kept) and target: ``gemm`` is the resolved :class:`~miopen_solver.spec.DgradSpec` of
    :func:`virtual_problem` on the config's main loop."""

    record_key = "nchw_pw"
    zero_fill = "none"

    @property
    def tile_blocks(self) -> int:
        """Blocks along x per (image, group): every tile of that GEMM its own block, or on the
        persistent main loop the blocks that fit on the device at once shared out over the
        ``N*G`` rows of the grid (at least one a row, never more than the tiles)."""
        gemm = self.gemm
        if not gemm.persistent:
            return gemm.tile_blocks
        return max(1, min(gemm.tiles_per_group, gemm.slots_per_row(self.problem.N * self.problem.G)))

    @property
    def grid(self) -> tuple:
        """Blocks along x (:attr:`tile_blocks`: tiles of one image's GEMM), y (N*G:
        image-major), z (1)."""
        return (self.tile_blocks, self.problem.N * self.problem.G, 1)

    @property
    def workspace_bytes(self) -> int:
        """The kernel's own workspace: none (W^T's slot is the transform's)."""
        return 0

    @cached_property
    def kernel_name(self) -> str:
        """``dgrad_nchw_pw_<arch>_<math>_<tile tag>_<problem>``: the main loop's tile tag
        (:attr:`DgradSpec.tile_tag`; for a patch filter its dX store width is
        :attr:`patch_vector`, as ``as_dict`` reports it) and the launch problem's ``short_tag``."""
        p = self.problem
        loop = f"_pb{self.tile_blocks}" if self.gemm.persistent else ""
        tag = self.gemm.tag_with(self.patch_vector if self.patch else None)
        return f"dgrad_nchw_pw_{arch_tag(self.target)}_{self.math}_{tag}{loop}_{p.short_tag()}"

    def transforms(self, whole: ConvProblem) -> tuple:
        """The layout transforms of a run over the ``whole`` batch: W -> W^T only."""
        return (wt_transform(whole),)

    @property
    def patch(self) -> bool:
        """A patch filter (:func:`is_patch`): the epilogue scatters W^T rows (c, y, x) into
        the patches of dX (the ``nchw_patch`` section)."""
        return is_patch(self.problem)

    @property
    def patch_vector(self) -> int:
        """Elements per dX store of the patch epilogue (:func:`patch_vector`; 1 for 1x1)."""
        return patch_vector(self.problem, self.gemm.config.tile_m)

    def defines(self) -> list:
        """The ``DG_NCHW_*`` defines: the real launch problem the section batches over (``C``:
        W^T's rows of all groups, ``C*Y*X``), and for a patch filter its patch (``PY``, ``PX``),
        dX plane (``HI``, ``WI``), dY width (``WO``) and store vector (``PV``)."""
        p = self.problem
        out = [("DG_NCHW_N", p.N), ("DG_NCHW_G", p.G), ("DG_NCHW_K", p.K), ("DG_NCHW_C", p.C * p.Y * p.X)]
        if self.patch:
            out += [("DG_NCHW_PY", p.Y), ("DG_NCHW_PX", p.X), ("DG_NCHW_HI", p.Hi), ("DG_NCHW_WI", p.Wi),
                    ("DG_NCHW_WO", p.Wo), ("DG_NCHW_PV", self.patch_vector)]
        return out

    def emit(self):
        """``dgrad.cu`` for the virtual problem's GEMM with its ``nchw_pw`` section (the
        per-(image, group) operand offsets), for a patch filter the ``nchw_patch`` section
        (its epilogue), and the ``DG_NCHW_*`` defines, on :attr:`grid`."""
        from .kernels.emit import emit_gemm
        sections = ("nchw_pw", "nchw_patch") if self.patch else ("nchw_pw",)
        return emit_gemm(self.gemm, name=self.kernel_name, extra=tuple(self.defines()), sections=sections,
                         memset=False, grid=self.grid, tile_blocks=self.tile_blocks)

    def as_dict(self) -> dict:
        """Plain data (JSON-ready): the main loop's resolved values, with the real problem,
        the config, the GEMM's shape and the launch grid; for a patch filter
        ``vector_size_c`` is the patch epilogue's dX store (:attr:`patch_vector`)."""
        d = self.gemm_dict(zero_fill=self.zero_fill)
        d["grid"] = list(self.grid)
        if self.patch:
            d["vector_size_c"] = self.patch_vector
        return d


def make_nchw_pw_spec(problem: ConvProblem, target: Target, config: PerfConfig) -> NchwPwSpec:
    """Validate the NCHW pointwise ``config`` for ``problem`` (one launch's, layouts as
    given) on ``target`` and resolve everything.

    Raises:
        PerfConfigError: the problem is not served (:func:`nchw_pw_reason`), ``split_k`` is not
            1 or -1, or the main loop's first broken rule on the virtual problem, as one sentence.
    """
    return make_virtual_spec(NchwPwSpec, problem, target, config, why=nchw_pw_reason(problem, target),
                             virtual=virtual_problem, gemm_config=gemm_config,
                             gemm_shape=("[cpg*Y*X, kpg] x [kpg, Ho*Wo]" if is_patch(problem)
                                         else "[cpg, kpg] x [kpg, H*W]") + " per image and group")


# ----------------------------------------------------------------------------- CPU engine
def nchw_pw_run(spec: NchwPwSpec, dy: np.ndarray, wt: np.ndarray, dx: np.ndarray) -> None:
    """One launch of ``spec`` on the CPU, as the kernel does it: per image and group the GEMM
    ``W_g^T [cpg*Y*X, kpg] x dY[n, g] [kpg, Ho*Wo]`` in fp32 (chunks of images of about
    :data:`CHUNK_BYTES`), stored into NCHW dX in the storage type.

    Args:
        dy: the launch's images of dY, NCHW bytes (any shape of ``N*K*Ho*Wo`` elements);
        wt: W^T, ``(G, cpg*Y*X, kpg)`` bytes (:func:`wt_transform`); dx: the launch's images of
            dX, a C-contiguous array of ``N*C*Hi*Wi`` elements written in place as NCHW (each
            W^T row ``(c, y, x)`` into its patches for a patch filter).

    Raises:
        ValueError: ``dx`` is not C-contiguous (it could not be written through a view).
    """
    p = spec.problem
    G, kpg, rows, P = p.G, p.kpg, p.cpg * p.Y * p.X, p.Ho * p.Wo
    if not dx.flags.c_contiguous:
        raise ValueError("the NCHW pointwise engine writes dX through a view: pass a C-contiguous array")
    # dX as (N, G, cpg, Ho, Y, Wo, X): row (c, y, x) and column (ho, wo) of each image's GEMM
    out = dx.reshape(p.N, G, p.cpg, p.Ho, p.Y, p.Wo, p.X)
    b = np.asarray(dy).reshape(p.N, G, kpg, P)
    a = np.asarray(wt, dtype=np.float32).reshape(G, rows, kpg)
    step = max(1, CHUNK_BYTES // (4 * p.C * p.Hi * p.Wi))
    for n0 in range(0, p.N, step):
        n1 = min(p.N, n0 + step)
        d = np.matmul(a, b[n0:n1].astype(np.float32)).astype(dx.dtype)
        out[n0:n1] = d.reshape(n1 - n0, G, p.cpg, p.Y, p.X, p.Ho, p.Wo).transpose(0, 1, 2, 5, 3, 6, 4)


__all__ = ["CHUNK_BYTES", "MAIN_LOOP", "NCHW_PW_OF", "NchwPwSpec", "gemm_config", "gemm_twin", "is_patch",
           "make_nchw_pw_spec", "nchw_pw_reason", "nchw_pw_run", "patch_vector", "virtual_problem", "wt_transform"]
