"""The ``group-pack`` kernel schedules: narrow groups packed into tile-wide ones.

Pure Python (no printing, no GPU). Tensors are NHWC: dY ``(N, Ho, Wo, K)``, W
``(K, Y, X, cpg)``, dX ``(N, Hi, Wi, C)``.

A grouped problem with ``cpg`` channels per group leaves a GEMM tile of ``tile_n`` columns
mostly empty when ``cpg < tile_n`` (ResNeXt's cpg 4-32, grouped 3x3 layers). Groups are
consecutive channel ranges of dY, W and dX, so ``P = tile_n / cpg`` consecutive groups are
one group of the *virtual* problem with ``G' = G / P`` groups (:func:`virtual_problem`:
``cpg' = P*cpg``, ``kpg' = P*kpg``, every tensor's bytes unchanged) whose filter is
block-diagonal::

    W'[g', k', y, x, c'] = W[g'*P*kpg + k', y, x, c' % cpg]   if k' // kpg == c' // cpg
                         = 0                                   otherwise

The virtual problem runs on a GEMM main loop as any dense grouped problem (its tilde
sub-GEMMs, tiles, vectors and launch shape: a :class:`~miopen_solver.spec.DgradSpec`); only
the B loader changes (the ``group_pack`` section of ``kernels/dgrad.cu``): it reads W in its
real layout (rows of ``cpg``) and zero-fills the off-diagonal blocks. The MMA work grows by
``P`` (the zeros), the memory traffic does not: dY, W and dX are read and written once, in
tile-wide coalesced rows, at tensor-core rates instead of tiles ``cpg`` columns wide.

Schedules and config slots: :attr:`KernelSchedule.GROUP_PACK` (11) runs the
:attr:`~KernelSchedule.WARP_MMA` main loop, :attr:`KernelSchedule.GROUP_PACK_WGMMA` (12) the
:attr:`~KernelSchedule.WGMMA` one (sm_90a); the 13 other fields mean what they mean for that
main loop, on the virtual problem, e.g. ``128,64,64,2,1,64,64,0,0,0,1,-1,4,12``. Rules
beyond the main loop's (:func:`pack_factor`): ``tile_n`` a multiple of cpg, at least twice
it, dividing ``G*cpg``; ``split_k`` 1 or -1; the W vector width ``vector_size_b`` is clamped
(never refused) to a power of two dividing cpg (a vector never crosses a group).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from . import vectors
from .config import KernelSchedule, PerfConfig
from .errors import PerfConfigError
from .problem import ConvProblem
from .spec import ZERO_FILL_TAGS, arch_tag
from .target import Target
from .virtual_gemm import VirtualGemmSpec, make_virtual_spec, virtual_gemm_reason

MAIN_LOOP = {KernelSchedule.GROUP_PACK: KernelSchedule.WARP_MMA,
             KernelSchedule.GROUP_PACK_WGMMA: KernelSchedule.WGMMA}
"""The GEMM schedule whose main loop each group-pack schedule runs."""
PACK_OF = {KernelSchedule.WARP_MMA: KernelSchedule.GROUP_PACK, KernelSchedule.WGMMA: KernelSchedule.GROUP_PACK_WGMMA,
           KernelSchedule.WGMMA_PERSISTENT: KernelSchedule.GROUP_PACK_WGMMA,
           KernelSchedule.WGMMA_TMA: KernelSchedule.GROUP_PACK_WGMMA}
"""The group-pack schedule that runs a GEMM config's tile (persistent and TMA tiles on the
plain warpgroup main loop: their loaders do not mask W)."""


# ----------------------------------------------------------------------------- rules
def pack_reason(problem: ConvProblem, target: Target) -> str | None:
    """Why the group-pack schedules cannot serve ``problem`` on ``target`` at all, or None:
    the virtual-GEMM guards and at least two groups."""
    why = virtual_gemm_reason(problem, target, "the group-pack schedules")
    if why is None and problem.G < 2:
        why = "one group: nothing to pack"
    return why


def pack_factor(problem: ConvProblem, config: PerfConfig) -> int:
    """Groups per packed group: ``tile_n / cpg``.

    Raises:
        PerfConfigError: ``tile_n`` is not a multiple of cpg, is below twice it, or does not
            divide ``G*cpg`` (the packed groups must tile the channels), naming the schedule.
    """
    p, label = problem, config.schedule.label
    tn = config.tile_n
    if tn < 1:
        raise PerfConfigError(f"tile_n must be >= 1, got {tn}")
    if tn < 2 * p.cpg or tn % p.cpg:
        raise PerfConfigError(f"{label} packs tile_n / cpg groups into one tile: tile_n={tn} must be a "
                              f"multiple of cpg={p.cpg} and at least 2*cpg={2 * p.cpg}")
    pack = tn // p.cpg
    if p.G % pack:
        raise PerfConfigError(f"{label}: tile_n={tn} packs {pack} groups of cpg={p.cpg}, which do not "
                              f"divide G={p.G}; allowed tile_n: multiples of cpg that divide G*cpg={p.G * p.cpg}")
    return pack


def virtual_problem(problem: ConvProblem, pack: int) -> ConvProblem:
    """The dense grouped problem ``pack`` groups at a time make: ``G / pack`` groups, every
    tensor and the filter window unchanged."""
    return problem.replace(G=problem.G // pack)


def gemm_config(problem: ConvProblem, config: PerfConfig) -> PerfConfig:
    """The main loop's config of a group-pack ``config``: its schedule, ``split_k`` 1 and the W
    vector width capped to a power of two dividing cpg (an invalid cap is passed on for the
    GEMM rules to name)."""
    vb = config.vector_size_b
    if vb >= 0 and vb & (vb - 1) == 0:
        vb = vectors.pow2_divisor(problem.cpg, vb or vectors.max_vector(problem.elem_bytes))
    return config.replace(schedule=MAIN_LOOP[config.schedule], split_k=1, vector_size_b=vb)


# ----------------------------------------------------------------------------- spec
@dataclass(frozen=True)
class GroupPackSpec(VirtualGemmSpec):
    """A validated group-pack config: ``gemm`` is the resolved
    :class:`~miopen_solver.spec.DgradSpec` of :func:`virtual_problem` on the config's main
    loop; ``problem`` and ``config`` are the real ones."""

    record_key = "group_pack"

    @property
    def pack(self) -> int:
        """Groups per packed group."""
        return self.problem.G // self.gemm.problem.G

    @property
    def zero_fill(self) -> str:
        """The main loop's (dX pixels no tap reaches, for strides above the filter)."""
        return self.gemm.zero_fill

    @property
    def zero_fill_blocks(self) -> int:
        return self.gemm.zero_fill_blocks

    @property
    def nchw_dx(self) -> bool:
        """The main loop's epilogue stores dX NCHW (:func:`~miopen_solver.transpose.nchw_dx_rule`
        holds for the real problem exactly when it holds for the packed one)."""
        return self.gemm.nchw_dx

    @cached_property
    def kernel_name(self) -> str:
        """``dgrad_group_pack<P>_<arch>_<math>_<tile tag>[_zf..][_dxnchw]_<problem>``: the pack
        factor, the main loop's tile tag and the real problem's ``short_tag``."""
        g = self.gemm
        return (f"dgrad_group_pack{self.pack}_{arch_tag(self.target)}_{self.math}_{g.tile_tag}"
                f"{ZERO_FILL_TAGS[self.zero_fill]}{'_dxnchw' if self.nchw_dx else ''}_{self.problem.short_tag()}")

    def defines(self) -> list:
        """``DG_PACK_CPG``/``DG_PACK_KPG``: the real groups' widths W's rows and blocks have."""
        return [("DG_PACK_CPG", self.problem.cpg), ("DG_PACK_KPG", self.problem.kpg)]

    def emit(self):
        """``dgrad.cu`` for the virtual problem with its ``group_pack`` section (the masked W
        loader) and the ``DG_PACK_*`` defines."""
        from .kernels.emit import emit_gemm
        return emit_gemm(self.gemm, name=self.kernel_name, extra=tuple(self.defines()), sections=("group_pack",))

    def as_dict(self) -> dict:
        """Plain data (JSON-ready): the main loop's resolved values, with the real problem,
        the config, the pack factor and the GEMM's shape."""
        d = self.gemm_dict(zero_fill=self.zero_fill, pack=self.pack)
        d["gemm"]["groups"] = self.gemm.problem.G
        return d


def make_group_pack_spec(problem: ConvProblem, target: Target, config: PerfConfig) -> GroupPackSpec:
    """Validate the group-pack ``config`` for ``problem`` on ``target`` and resolve everything.

    Raises:
        PerfConfigError: the problem has one group, the tile does not pack whole groups
            (:func:`pack_factor`), ``split_k`` is not 1 or -1, or the main loop's first broken
            rule on the virtual problem, as one sentence.
    """
    why = pack_reason(problem, target)
    pack = pack_factor(problem, config) if why is None else 1
    return make_virtual_spec(GroupPackSpec, problem, target, config, why=why,
                             virtual=lambda p: virtual_problem(p, pack), gemm_config=gemm_config,
                             gemm_shape=f"{pack} groups of cpg={problem.cpg} as one of {pack * problem.cpg}")


# ----------------------------------------------------------------------------- CPU engine
def packed_w(problem: ConvProblem, pack: int, w: np.ndarray) -> np.ndarray:
    """The block-diagonal W' of the virtual problem, ``(K, Y, X, pack*cpg)`` in W's dtype:
    row ``k`` holds W's row ``k`` in the column block of its group within the pack, zeros
    elsewhere (what the kernel's masked loader reads)."""
    p = problem
    w4 = np.asarray(w).reshape(p.K, p.Y, p.X, p.cpg)
    out = np.zeros((p.K, p.Y, p.X, pack * p.cpg), dtype=w4.dtype)
    j = (np.arange(p.K) // p.kpg) % pack                 # each row's group within its pack
    for b in range(pack):
        rows = j == b
        out[rows, :, :, b * p.cpg:(b + 1) * p.cpg] = w4[rows]
    return out


__all__ = ["GroupPackSpec", "MAIN_LOOP", "PACK_OF", "gemm_config", "make_group_pack_spec", "pack_factor",
           "pack_reason", "packed_w", "virtual_problem"]
