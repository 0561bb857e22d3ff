"""Default performance configs: MIOpen's GetDefaultPerformanceConfig.

:func:`default_performance_config` is a constant-time heuristic that always returns a config
:func:`~miopen_solver.spec.make_spec` accepts (or raises when none of its short fixed
fallback list does either). NVIDIA rules were fitted to configuration sweeps on an H200; the
sweeps and the measurements behind each branch are in bench/RESULTS.md.
"""

from __future__ import annotations

import itertools
from typing import Iterator

from . import cost_model, nchw_tma, subpixel, vectors
from .config import KernelSchedule, PerfConfig
from .direct import default_direct_config, direct_reason, direct_search_space, mma_search_space
from .direct_plane import default_plane_config, plane_reason, plane_search_space
from .errors import PerfConfigError
from .group_pack import PACK_OF, pack_reason
from .group_pack import virtual_problem as pack_virtual
from .nchw_pw import NCHW_PW_OF, gemm_twin, is_patch, nchw_pw_reason
from .nchw_pw import virtual_problem as nchw_pw_virtual
from .patch import PATCH_OF, PATCH_SEARCH_OF, patch_reason, virtual_problem
from .problem import ConvProblem
from .sub_wave import sub_wave_config
from .spec import (WGMMA_N_WIDE, WGMMA_NARROW, count_tiles, is_valid_performance_config, launch_spec,
                   split_k_atomics_reason, stream_k_rules)
from .target import Target
from .tilde import axes, cached_decompose, too_many_sub_gemms
from .tma import TMA_MAX_STAGES, TMA_MIN_FILL, tma_fill, tma_reason
from .transpose import native_problem, nchw_dx_rule

TMA_DEFAULT = PerfConfig(128, 256, 64, 2, 1, 64, 256, 0, 0, 0, 1, -1, 4, 3)
"""The warp-specialised TMA tile the default takes for large stride-1 problems."""
TMA_TAPS_DEFAULT = PerfConfig(128, 128, 64, 1, 1, 128, 128, 0, 0, 0, 1, -1, 4, 3)
"""The TMA tile the default takes for mid-sized stride-1 problems with filter taps."""
TMA_STRIDED_DEFAULT = PerfConfig(256, 128, 64, 2, 1, 128, 128, 0, 0, 0, 1, -1, 4, 3)
"""The TMA tile the default takes for strided problems with filter taps."""


def _tma_fits(p: ConvProblem, t: Target, c: PerfConfig) -> bool:
    """The default may take the TMA config ``c``: its rules hold and its pixel box fills at
    least :data:`TMA_MIN_FILL` of the tile's rows."""
    return tma_reason(p, t, c) is None and tma_fill(p, c.tile_m) >= TMA_MIN_FILL


# ------------------------------------------------------------------- default config
FALLBACK_CONFIGS = (
    PerfConfig(64, 64, 32, 2, 2, 32, 32, 0, 0, 0, 1, -1, 2),
    PerfConfig(32, 32, 16, 1, 1, 32, 32, 0, 0, 0, 1, -1, 1),
    PerfConfig(16, 16, 16, 1, 1, 16, 16, 0, 0, 0, 1, -1, 1),
)
"""Tried in order when the heuristic's pick does not validate (smaller tiles, one warp,
fewer stages). Every entry divides by every preset's atoms."""


def measured_nvidia_config(problem: ConvProblem, target: Target) -> PerfConfig:
    """The default for NVIDIA targets, fitted to configuration sweeps on an H200
    (bench/sweep.py over the 14 suite rows, recorded in bench/RESULTS.md):

    fp16/bf16 on a target with warpgroup MMA (sm_90a), cpg > 32 and kpg >= 64:
    :func:`wgmma_config`; 32 channels on one side: :func:`narrow_wgmma_config`. Otherwise,
    fp16/bf16 (mma.sync atoms):

    * cpg <= 16 (grouped, depthwise-like): one narrow column tile (8 or 16) and four warps
      stacked along M; when the whole GemmK fits one tile (<= 128), tile_k covers it and
      the loop has a single stage.
    * multi-tap filters with fewer than 2 waves of 128x128 tiles, or cpg <= 64:
      128x64x32 tiles, 2x2 warps of 64x32, 4 stages; split_k 2 when even 128x64 tiles give
      less than 2 waves and GemmK >= 1024 (r50 3x3 at 14x14 and 7x7).
    * otherwise 128x128 tiles, 2x2 warps of 64x64: tile_k 64 / 3 stages for 1x1 filters,
      tile_k 32 / 4 stages for multi-tap filters; shallow GemmK (<= 64) prefers 2x4 warps.

    fp32 (FFMA): 128x128x16 for large problems, 128x64x16 for strided ones, else 64x64x16
    with split_k 4 when GemmK >= 1024 and fewer than 8 waves of tiles. fp32 with TF32 math:
    :func:`tf32_nvidia_config` (not measured).
    """
    p, t = problem, target
    subs = cached_decompose(p).sub_gemms
    max_k = max(s.gemm_k for s in subs)
    waves = 2 * t.num_cus
    taps = p.Y * p.X
    split_ok = split_k_atomics_reason(p, t) is None
    if p.tf32:
        return tf32_nvidia_config(p, t)
    if p.dtype in ("fp16", "bf16") and t.wgmma and p.cpg > 32 and p.kpg >= 64:
        return wgmma_config(p, t)
    if p.dtype in ("fp16", "bf16") and t.wgmma:
        narrow = narrow_wgmma_config(p, t)
        if narrow is not None:
            return narrow
    if p.dtype in ("fp16", "bf16"):
        if p.cpg <= 16:
            tn = 8 if p.cpg <= 8 else 16
            if max_k <= 128:
                tk = -(-max_k // 16) * 16
                return PerfConfig(128, tn, tk, 4, 1, 32, tn, 0, 0, 0, 1, -1, 1)
            return PerfConfig(128, tn, 32, 4, 1, 32, tn, 0, 0, 0, 1, -1, 3)
        if p.cpg <= 64 or (taps > 1 and count_tiles(subs, 128, 128, p.G) < waves):
            split = 2 if (split_ok and count_tiles(subs, 128, 64, p.G) < waves and max_k >= 1024) else 1
            return PerfConfig(128, 64, 32, 2, 2, 64, 32, 0, 0, 0, split, -1, 4)
        if taps == 1:
            if max_k <= 64:
                return PerfConfig(128, 128, 32, 2, 4, 64, 32, 0, 0, 0, 1, -1, 4)
            return PerfConfig(128, 128, 64, 2, 2, 64, 64, 0, 0, 0, 1, -1, 3)
        return PerfConfig(128, 128, 32, 2, 2, 64, 64, 0, 0, 0, 1, -1, 4)
    if p.cpg <= 16:
        return PerfConfig(128, 16, 16, 4, 1, 32, 16, 0, 0, 0, 1, -1, 3)
    if count_tiles(subs, 128, 128, p.G) >= 4 * waves:
        return PerfConfig(128, 128, 16, 2, 2, 64, 64, 0, 0, 0, 1, -1, 3)
    if p.sH > 1 or p.sW > 1:
        return PerfConfig(128, 64, 16, 2, 2, 64, 32, 0, 0, 0, 1, -1, 3)
    split = 4 if (split_ok and max_k >= 1024 and count_tiles(subs, 64, 64, p.G) < 4 * waves) else 1
    return PerfConfig(64, 64, 16, 2, 2, 32, 32, 0, 0, 0, split, -1, 3)


def tf32_nvidia_config(problem: ConvProblem, target: Target) -> PerfConfig:
    """The NVIDIA default for fp32 with TF32 math (``mma.sync.m16n8k8`` TF32 on the warp-MMA
    main loop). **Not measured**: reasoned from the atom and the fp16 rules of
    :func:`measured_nvidia_config` (the same schedule with a 16x8x8 atom instead of 16x8x16).

    * A 64x64 warp tile is 4x8 atoms: 128 accumulators (the safe bound) and, per k8 step, 8
      eight-byte A loads and 16 (k-outer) B words for 32 MMAs, the fewest shared loads per
      MMA a warp tile within that bound gets; 64x32 (64 accumulators) where fp16 takes it.
    * tile_k 16 fp32 elements (64-byte rows, as fp16's 32), 32 for pointwise problems with
      GemmK >= 64 (fp16's 64; a strided 1x1 filter's sub-GEMM records leave no room for it: ptxas spilled
      such a kernel at 255 registers, and gave an NCHW pointwise 128x64x16 tile 128 registers
      and a 12-byte spill where 128x64x32 takes 166 and none); k-outer W tiles
      (``lds_k_outer`` auto: ``cp.async`` for both operands).
    * Branches as fp16's: cpg <= 16: one column tile of 8 or 16 (the atom's n is 8) and four
      warps along M, tile_k covering GemmK (in multiples of 16, so the tiles spread evenly over
      the threads) in one stage when it is at most 128; cpg <= 64 or
      a filter with taps and fewer than two waves of 128x128 tiles: 128x64 tiles, split_k 2
      where fp16 splits; otherwise 128x128 tiles, 4 stages (3 with tile_k 32).
    """
    p, t = problem, target
    subs = cached_decompose(p).sub_gemms
    max_k = max(s.gemm_k for s in subs)
    waves = 2 * t.num_cus
    taps = p.Y * p.X
    deep_pw = p.is_pointwise and max_k >= 64           # tile_k 32: see the docstring
    if p.cpg <= 16:
        tn = 8 if p.cpg <= 8 else 16
        if max_k <= 128:
            return PerfConfig(128, tn, -(-max_k // 16) * 16, 4, 1, 32, tn, 0, 0, 0, 1, -1, 1)
        return PerfConfig(128, tn, 16, 4, 1, 32, tn, 0, 0, 0, 1, -1, 3)
    if p.cpg <= 64 or (taps > 1 and count_tiles(subs, 128, 128, p.G) < waves):
        split = 2 if (count_tiles(subs, 128, 64, p.G) < waves and max_k >= 1024) else 1
        return PerfConfig(128, 64, 32 if deep_pw else 16, 2, 2, 64, 32, 0, 0, 0, split, -1, 4)
    if deep_pw:
        return PerfConfig(128, 128, 32, 2, 2, 64, 64, 0, 0, 0, 1, -1, 3)
    return PerfConfig(128, 128, 16, 2, 2, 64, 64, 0, 0, 0, 1, -1, 4)


def tf32_wgmma_config(problem: ConvProblem, target: Target) -> PerfConfig | None:
    """A warpgroup TF32 config (``wgmma`` m64nNk8 .tf32 on the plain main loop, both tiles
    staged through registers and rounded there) for fp32 data with TF32 math on sm_90a, where
    the fp16 rules would take warpgroup MMA (cpg > 32, kpg >= 64): 128 x (64 for cpg <= 64,
    else 128) x 32 (128-byte rows of fp32), two warpgroups along M, 4 stages; None elsewhere.
    **Not the default**: timed on the H200 it lost to the ``mma.sync`` TF32 default
    (:func:`tf32_nvidia_config`; bench/RESULTS.md, eighth session); ``bench/tf32_h200.py
    --wgmma`` times it."""
    p, t = problem, target
    if not (p.tf32 and t.wgmma and p.cpg > 32 and p.kpg >= 64 and not p.is_3d):
        return None
    tn = 64 if p.cpg <= 64 else 128
    return PerfConfig(128, tn, 32, 2, 1, 64, tn, 0, 0, 0, 1, -1, 4, KernelSchedule.WGMMA)


NARROW_K_DEFAULT = PerfConfig(128, 128, 32, 2, 1, 64, 128, 0, 0, 0, 1, -1, 4, 1)
"""The warpgroup tile for kpg 32 (cpg > 32): tile_k 32, one filter tap per k-tile (64-byte
swizzled A rows)."""
NARROW_N_DEFAULT = PerfConfig(128, 32, 64, 2, 1, 64, 32, 0, 0, 0, 1, -1, 4, 1)
"""The warpgroup tile for cpg 32 (kpg >= 64): m64n32k16 instructions, a 32-wide column tile
(64-byte swizzled B rows)."""


SHORT_K_DEFAULT = PerfConfig(64, 64, 32, 1, 1, 64, 64, 0, 0, 0, 1, -1, 3, 1)
"""The warpgroup tile for short 1x1 GEMMs (:func:`short_k_config`): 64x64x32 on one warpgroup,
3 stages."""
SHORT_K_MAX_GEMM_K = 96
"""GemmK (= kpg for a 1x1 filter) up to which :func:`short_k_config` applies: where 64-deep
k-tiles give one k-tile or two with padding (kpg 80: 128 deep for 80), 32-deep ones give
more k-tiles to overlap loads with MMAs and less padding; at 112 and 128 they only add
k-loop overhead."""


def short_k_config(problem: ConvProblem, target: Target) -> PerfConfig | None:
    """The sm_90a default for fp16/bf16 pointwise layers (1x1, stride 1) with cpg > 32 and a
    short GEMM K: 16 <= kpg <= :data:`SHORT_K_MAX_GEMM_K`, kpg != 32 (that one keeps
    :data:`NARROW_K_DEFAULT`) and not where :func:`wgmma_config` takes the persistent schedule
    (cpg >= 256, one k-tile, two waves of 128x256 tiles: measured there): :data:`SHORT_K_DEFAULT`
    where it validates, else None.

    Judged on the H200 against the previous defaults on every zoo layer with GemmK <= 512
    (bench/RESULTS.md, fifteenth session): faster on five of the six with GemmK <= 96 (the
    sixth 4 % slower), a tie at 112, slower from 128."""
    p = problem
    if not (target.wgmma and p.dtype in ("fp16", "bf16") and not p.tf32 and p.is_pointwise and p.cpg > 32
            and 16 <= p.kpg <= SHORT_K_MAX_GEMM_K and p.kpg != 32):
        return None
    if p.kpg >= 64 and wgmma_config(p, target).schedule == KernelSchedule.WGMMA_PERSISTENT:
        return None     # the measured one-k-tile rule for wide layers on many tiles
    return SHORT_K_DEFAULT if is_valid_performance_config(p, target, SHORT_K_DEFAULT)[0] else None


def narrow_wgmma_config(problem: ConvProblem, target: Target) -> PerfConfig | None:
    """The sm_90a default for fp16/bf16 layers with 32 channels on one side, where the
    128-byte-swizzled warpgroup tiles do not serve them: kpg 32 with cpg > 32 takes
    :data:`NARROW_K_DEFAULT`, cpg 32 with kpg >= 64 :data:`NARROW_N_DEFAULT`; None elsewhere
    or where the tile does not validate (the mma.sync rules then). On the H200 they ran
    DenseNet-121's two 3x3 k32 layers 1.40-1.41x, MobileNetV2's 1x1 c32 1.44x and YOLOv5s's
    3x3/s2 c32 stem 1.16x faster than the mma.sync defaults (bench/RESULTS.md); cpg = kpg = 32
    is not measured and keeps those rules."""
    p = problem
    if p.kpg == 32 and p.cpg > 32:
        cfg = NARROW_K_DEFAULT
    elif p.cpg == 32 and p.kpg >= 64:
        cfg = NARROW_N_DEFAULT
    else:
        return None
    return cfg if is_valid_performance_config(p, target, cfg)[0] else None


def wgmma_config(problem: ConvProblem, target: Target) -> PerfConfig:
    """The sm_90a warpgroup-MMA default for fp16/bf16 with cpg > 32 and kpg >= 64. Each
    branch was chosen by an H200 sweep of the suite rows; the sweeps and their times are in
    bench/RESULTS.md (warpgroup-MMA and TMA sections).

    * cpg <= 64: 128x64x64 tiles, 2 warpgroups of 64x64, 4 stages;
    * strided filters with taps, at any size: the TMA schedule with 256x128 tiles
      (:data:`TMA_STRIDED_DEFAULT`: its persistent blocks even out the tilde sub-GEMMs'
      different K lengths; the plain schedule's 128x256 tiles ran seven large stride-2 3x3
      zoo layers at 0.49-0.70 of cuDNN where this one runs the smaller ones at 0.94-1.04);
    * cpg >= 256, GemmK >= 256 and at least 1.5 waves of 128x256 tiles: 128x256x64, 2
      warpgroups of 64x256, 4 stages, in the TMA schedule (:data:`TMA_DEFAULT`) at stride 1
      where its rules hold, else the plain warpgroup schedule;
    * fewer than half a wave of 128x128 tiles and GemmK >= 1024: 128x128x64 with split_k 2;
    * strided 1x1 filters: 256x128x64, 4 warpgroups of 64x128, 4 stages;
    * strided filters with taps where the TMA tile does not fit: 128x128x64 on one
      warpgroup, 3 stages (4 warpgroups spill at 512 threads once four sub-GEMM records are
      live: tests/test_nvidia_build.py);
    * 1x1 stride 1, cpg >= 256, one k-tile (GemmK <= 64) and two waves of 128x256 tiles:
      the persistent schedule, 128x256x64, 3 stages (the next tile's load overlaps this
      tile's epilogue);
    * other filters with taps at stride 1: the TMA schedule on one 128x128 warpgroup, 4
      stages (:data:`TMA_TAPS_DEFAULT`);
    * the TMA forms only where their pixel box fills at least :data:`TMA_MIN_FILL` of the
      tile's rows (:func:`~miopen_solver.tma.tma_fill`);
    * otherwise 128x128x64, 2 warpgroups of 64x128: 4 stages with taps, 3 for 1x1.
    """
    p, t = problem, target
    subs = cached_decompose(p).sub_gemms
    max_k = max(s.gemm_k for s in subs)
    if p.cpg <= 64:
        return PerfConfig(128, 64, 64, 2, 1, 64, 64, 0, 0, 0, 1, -1, 4, 1)
    strided_taps = (p.sH > 1 or p.sW > 1) and p.Y * p.X > 1
    if strided_taps and _tma_fits(p, t, TMA_STRIDED_DEFAULT):
        return TMA_STRIDED_DEFAULT
    if p.cpg >= 256 and max_k >= 256 and 2 * count_tiles(subs, 128, 256, p.G) >= 3 * t.num_cus:
        if p.sH == 1 and p.sW == 1 and _tma_fits(p, t, TMA_DEFAULT):
            return TMA_DEFAULT
        return PerfConfig(128, 256, 64, 2, 1, 64, 256, 0, 0, 0, 1, -1, 4, 1)
    if (2 * count_tiles(subs, 128, 128, p.G) <= t.num_cus and max_k >= 1024
            and split_k_atomics_reason(p, t) is None):
        return PerfConfig(128, 128, 64, 2, 1, 64, 128, 0, 0, 0, 2, -1, 4, 1)
    if strided_taps:
        return PerfConfig(128, 128, 64, 1, 1, 128, 128, 0, 0, 0, 1, -1, 3, 1)
    if p.sH > 1 or p.sW > 1:
        return PerfConfig(256, 128, 64, 4, 1, 64, 128, 0, 0, 0, 1, -1, 4, 1)
    if p.is_pointwise and p.cpg >= 256 and max_k <= 64 and count_tiles(subs, 128, 256, p.G) >= 2 * t.num_cus:
        return PerfConfig(128, 256, 64, 2, 1, 64, 256, 0, 0, 0, 1, -1, 3, 2)
    if p.Y * p.X > 1 and _tma_fits(p, t, TMA_TAPS_DEFAULT):
        return TMA_TAPS_DEFAULT
    return PerfConfig(128, 128, 64, 2, 1, 64, 128, 0, 0, 0, 1, -1, 4 if p.Y * p.X > 1 else 3, 1)


DIRECT_DEFAULT_MAX_CPG = 4
"""cpg at or below which the NVIDIA default takes the direct schedule where it applies (depthwise,
depthwise multipliers and small-cpg grouped layers): on the H200 it ran every such measured layer
(cpg 1 and 4) many times faster than the GEMM schedules, whose GemmN = cpg tiles are mostly
padding (bench/RESULTS.md). Larger cpg keeps the GEMM default until measured."""


PATCH_PINGPONG_DEFAULT = PerfConfig(128, 128, 64, 1, 1, 128, 128, 0, 0, 0, 1, -1, 7, KernelSchedule.PATCH_GEMM_PINGPONG)
"""The patch GEMM's default where its warpgroup form would run and the ping-pong form serves the
problem: a 128x128 tile a warpgroup, two warpgroups taking tiles in turn, 7 stages. On the H200
it ran 11 of 12 patch layers (ViT, DeiT, CLIP, Swin and ConvNeXt) 1.05-1.36x faster than the
plain warpgroup default, one (ConvNeXt-T's 2x2 merge of 96 channels, K 192) 5 % slower
(bench/RESULTS.md, twenty-sixth session)."""


def patch_config(problem: ConvProblem, target: Target) -> PerfConfig:
    """The default of a patch problem (:mod:`miopen_solver.patch`): the GEMM default of its
    virtual pointwise problem (:func:`heuristic_config`; on NVIDIA the H200-fitted
    pointwise rules), its tile run by the patch schedule with the same main loop (a
    persistent or TMA tile on the plain warpgroup one: :data:`~miopen_solver.patch.PATCH_OF`),
    ``split_k`` 1; where that is the plain warpgroup form and the ping-pong form serves the
    problem (16-bit, sm_90a, patch rows of whole 16-byte chunks), :data:`PATCH_PINGPONG_DEFAULT`."""
    base = heuristic_config(virtual_problem(problem), target, allow_direct=False, allow_patch=False,
                            allow_pack=False, allow_model=False)
    config = base.replace(schedule=PATCH_OF[base.schedule], split_k=1)
    if (config.schedule is KernelSchedule.PATCH_GEMM_WGMMA
            and is_valid_performance_config(problem, target, PATCH_PINGPONG_DEFAULT)[0]):
        return PATCH_PINGPONG_DEFAULT
    return config


PACK_WIDTH = 64
"""Channels of a packed group the default aims at: the column tile the GEMM rules give a
dense problem of cpg 64 (128x64 on every target)."""
PACK_MAX_CPG = 32
"""cpg and kpg at or below which the GPU default packs groups (above
:data:`DIRECT_DEFAULT_MAX_CPG`, which the direct schedule serves on NVIDIA)."""


def pack_config(problem: ConvProblem, target: Target) -> PerfConfig | None:
    """The default of a grouped problem whose groups are narrower than a tile
    (:mod:`miopen_solver.group_pack`): ``P = PACK_WIDTH / cpg`` groups as one where cpg and
    kpg are at most :data:`PACK_MAX_CPG`, cpg divides :data:`PACK_WIDTH` and P divides G;
    the GEMM default (:func:`heuristic_config`; on NVIDIA the H200-fitted rules) of the packed
    problem, run by the group-pack schedule with the same main loop (persistent and TMA tiles
    on the plain warpgroup one), ``split_k`` 1 -- where that default's tile is one packed
    group wide; else None (the problem keeps the dense rules). Matrix instructions only
    (fp16, bf16, fp32 with TF32 math): IEEE fp32 runs on FFMA, where the zeros cost as much
    as the work.

    Why: those rules give such a group a tile ``cpg`` columns wide (8 or 16: loads and MMA
    issue per useful FLOP several times a 64-wide tile's) or pad it to 64 columns; the packed
    tile is the dense one, its zeros cost MMA work the narrow tiles spend anyway. Not yet
    measured on a GPU (bench/RESULTS.md)."""
    p = problem
    if not (DIRECT_DEFAULT_MAX_CPG < p.cpg <= PACK_MAX_CPG and p.kpg <= PACK_MAX_CPG and PACK_WIDTH % p.cpg == 0):
        return None
    if p.dtype not in ("fp16", "bf16") and not p.tf32:     # FFMA pays the zeros at its own rate
        return None
    pack = PACK_WIDTH // p.cpg
    if p.G % pack or pack_reason(p, target) is not None:
        return None
    base = heuristic_config(pack_virtual(p, pack), target, allow_direct=False, allow_patch=False,
                            allow_nchw_pw=False, allow_pack=False, allow_model=False)
    if base.tile_n != pack * p.cpg or base.schedule not in PACK_OF:
        return None
    return base.replace(schedule=PACK_OF[base.schedule], split_k=1)


NCHW_PW_PATCH_ELEM_BYTES = 2
"""Patch filters in NCHW take the NCHW pointwise default only in 16-bit storage: on the H100
(bench/RESULTS.md, twenty-ninth session) it ran the ConvNeXt-T stem 2.6x and its 96-channel
2x2 merge 1.7x faster than the patch GEMM between transposes, ViT-B/16 1.10x, while the fp32
ViT-B/16 stem (FFMA, compute-bound) ran 5-20 % slower on every fp32 tile timed."""
NCHW_PW_MIN_VECTOR_BYTES = 8
"""The NCHW pointwise schedule is the default only where its loads and stores along the
pixels (the largest power of two dividing H*W elements -- Ho*Wo dY pixels for a patch
filter --, at most 16 bytes) are at least this wide. At 2-byte vectors its per-image GEMM issues 8 times the memory instructions of the
16-byte NHWC path: measured on the H200 (fp16, bench/RESULTS.md), H*W = 49 ran at 42.0 us
against 22.2 us through transposes, H*W = 196 (8-byte vectors) at 17.9 against 22.8 us."""


def nchw_pw_vector_bytes(problem: ConvProblem) -> int:
    """Bytes of the widest vector along the pixels of an NCHW dY plane: the largest power of
    two dividing ``Ho*Wo`` elements (``Hi*Wi`` for a 1x1 filter), times the element size, at
    most 16."""
    eb = problem.elem_bytes
    return vectors.pow2_divisor(problem.Ho * problem.Wo, vectors.max_vector(eb)) * eb


def nchw_pw_config(problem: ConvProblem, target: Target) -> PerfConfig:
    """The default of an NCHW pointwise problem (:mod:`miopen_solver.nchw_pw`): the GEMM
    default (:func:`heuristic_config`; on NVIDIA the H200-fitted rules) of
    :func:`~miopen_solver.nchw_pw.gemm_twin` (the per-image, per-group GEMM, its N*G
    launches counted as groups), its tile run by the NCHW pointwise schedule with the same
    main loop (:data:`~miopen_solver.nchw_pw.NCHW_PW_OF`: TMA tiles on the plain warpgroup
    one), ``split_k`` 1; rows
    (channels) halved down to 64 while a tile holds two or more times the power of two
    covering the GEMM's rows, cpg (cpg*Y*X for a patch filter; half of a 128-row tile would
    be padding when they are <= 64)."""
    twin = gemm_twin(problem)
    base = heuristic_config(twin, target, allow_direct=False, allow_patch=False, allow_nchw_pw=False,
                            allow_pack=False, allow_model=False)
    cfg = base.replace(schedule=NCHW_PW_OF[base.schedule], split_k=1)
    cover = 16
    while cover < twin.Wi:      # the GEMM's rows: cpg, or cpg*Y*X for a patch filter
        cover *= 2
    while cfg.tile_m > 64 and cfg.tile_m >= 2 * cover:
        if cfg.warp_m > 1:
            cfg = cfg.replace(tile_m=cfg.tile_m // 2, warp_m=cfg.warp_m // 2)
        else:
            cfg = cfg.replace(tile_m=cfg.tile_m // 2, warp_tile_m=cfg.warp_tile_m // 2)
    return cfg


def nchw_tma_config(problem: ConvProblem, target: Target) -> PerfConfig:
    """The first NCHW TMA config of the search (:mod:`miopen_solver.nchw_tma`; no problem's
    default: on the H200 it beat the NCHW default on 3 of 12 layers, bench/RESULTS.md): ``tile_m`` 64
    channels (one warpgroup) when cpg <= 64 or B comes from the shifting producer
    (:func:`~miopen_solver.nchw_tma.shift_loads`), else 128 (two); ``tile_n`` 64 x the most dX rows
    of 4, 2, 1 whose row tiles are at least 9/10 dX rows (Hi = 7: 1 row; 14: 2; 56: 4), at
    most 2 with the shifting producer (whose staging rows share the shared memory);
    4 stages (48 KB each at 128 x 256), split_k 1."""
    p = problem
    tile_m = 64 if p.cpg <= 64 or nchw_tma.shift_loads(p) else 128
    rows = next(b for b in (4, 2, 1) if p.Hi / (-(-p.Hi // b) * b) >= 0.9)
    if nchw_tma.shift_loads(p):     # its staging rows: 4 stages of 64 x 256 do not fit
        rows = min(rows, 2)
    tile_n = 64 * rows
    return PerfConfig(tile_m=tile_m, tile_n=tile_n, tile_k=64, warp_m=tile_m // 64, warp_n=1, warp_tile_m=64,
                      warp_tile_n=tile_n, vector_size_a=0, vector_size_b=0, vector_size_c=0, split_k=1,
                      lds_k_outer=-1, stages=4, schedule=KernelSchedule.NCHW_TMA)


def pingpong_form(problem: ConvProblem, target: Target, config: PerfConfig) -> PerfConfig:
    """``config`` on the ping-pong schedule (20) where it is a one-warpgroup tile of the TMA
    schedule (``warp_m = warp_n = 1``, ``split_k`` 1, not stream-K) of a stride-1 problem, and
    the ping-pong block keeps at least as many warpgroups multiplying on a multiprocessor as
    the one-warpgroup blocks do; else ``config`` unchanged.

    The ping-pong kernel runs the same tile with two consumer warpgroups a block that own
    tiles in turn, one's epilogue under the other's MMAs (CUTLASS's ping-pong kernel), at the
    deepest stage count (at most :data:`~miopen_solver.tma.TMA_MAX_STAGES`) that validates.
    Its register hand-off (:data:`~miopen_solver.tma.WARPGROUP_REGISTERS`) fits one such block
    on a multiprocessor: 2 consumer warpgroups. One-warpgroup blocks of the TMA schedule fit
    :attr:`~miopen_solver.spec.DgradSpec.resident_blocks` of them (3 at 64x64, 2 at 64x128 and
    128x64, 1 at 128x128 and 64x256 on sm_90), so the form is taken at 2 or fewer. Strided
    problems keep the tile (they ran slower as ping-pong). The tile stays the one the rules or
    the cost model chose. Measured in bench/RESULTS.md, twenty-third session."""
    c = config
    if not (c.schedule is KernelSchedule.WGMMA_TMA and c.warp_m == 1 and c.warp_n == 1
            and c.split_k in (1, -1) and c.split_k_reduce != STREAM_K):
        return config
    if problem.sH > 1 or problem.sW > 1:
        return config
    try:
        one_wg = launch_spec(problem, target, c).resident_blocks
    except PerfConfigError:
        return config
    if one_wg > PINGPONG_CONSUMERS:
        return config
    for stages in range(TMA_MAX_STAGES, c.stages - 1, -1):
        cfg = c.replace(schedule=KernelSchedule.WGMMA_TMA_PINGPONG, stages=stages)
        if is_valid_performance_config(problem, target, cfg)[0]:
            return cfg
    return config


def cooperative_form(config: PerfConfig) -> PerfConfig:
    """The one-warpgroup TMA tile a ping-pong ``config`` is the form of (:func:`pingpong_form`'s
    inverse for the defaults): the same tile on the TMA schedule at the stage count the rules and
    the cost model give TMA tiles (:data:`TMA_DEFAULT`'s); what a setting the ping-pong schedule
    cannot take (split-K, stream-K) starts from. ``config`` unchanged on other schedules."""
    if config.schedule is not KernelSchedule.WGMMA_TMA_PINGPONG:
        return config
    return config.replace(schedule=KernelSchedule.WGMMA_TMA, stages=TMA_DEFAULT.stages)


PINGPONG_CONSUMERS = 2
"""Consumer warpgroups of a ping-pong block, one block a multiprocessor (its register hand-off
takes 64512 of the 65536 registers): the most one-warpgroup TMA blocks a multiprocessor may
hold for :func:`pingpong_form` to take the ping-pong form."""


def heuristic_config(problem: ConvProblem, target: Target, *, allow_direct: bool = True,
                     allow_patch: bool = True, allow_nchw_pw: bool = True, allow_pack: bool = True,
                     allow_model: bool = True, coefficients=None) -> PerfConfig:
    """The tile choice behind :func:`default_performance_config`, before validation.

    GPU targets take an NCHW pointwise schedule for the 1x1 problems it serves (dY and dX
    NCHW in memory: :func:`nchw_pw_config`, no dY/dX transposes) where its pixel vectors
    are at least :data:`NCHW_PW_MIN_VECTOR_BYTES` wide (the NCHW TMA schedule is in the search
    only), and NVIDIA targets the plane schedule for depthwise problems (cpg 1) whose dY and dX
    are NCHW (:func:`~miopen_solver.direct_plane.default_plane_config`; grouped cpg 4 measured
    slower on it than between transposes, bench/RESULTS.md); every other choice is made
    on the problem with dY and W NHWC (:func:`~miopen_solver.transpose.native_problem`: the
    kernel between the layout transforms). NVIDIA targets take the direct schedule for depthwise and small-cpg grouped problems it
    serves (cpg <= :data:`DIRECT_DEFAULT_MAX_CPG`; :func:`~miopen_solver.direct.default_direct_config`);
    then GPU targets take the NCHW pointwise schedule for the 16-bit patch filters it serves
    (:data:`NCHW_PW_PATCH_ELEM_BYTES`), by the 1x1 rule (:func:`~miopen_solver.nchw_pw.is_patch`:
    NCHW dY and dX, KCYX W, whole patches);
    GPU targets take a patch schedule for the patch problems it serves (stride = filter, no
    padding: :func:`patch_config`, one dense GEMM instead of Y*X tilde sub-GEMMs of GemmN =
    cpg), and a group-pack schedule for grouped problems with narrow groups
    (:func:`pack_config`); else NVIDIA takes :func:`~miopen_solver.sub_wave.sub_wave_config` where the
    grid is under one wave (a latency model), then :func:`short_k_config` for short pointwise GEMMs
    (measured on the zoo), then :func:`measured_nvidia_config` (fitted to H200 sweeps),
    replaced on the problems the warpgroup cost model times (:func:`cost_model.modelled
    <miopen_solver.cost_model.modelled>`, on the kernel's problem: dY and W NHWC) by
    :func:`~miopen_solver.cost_model.default_config` (the model's pick where it expects the
    rules' config to be clearly slower; with dX NCHW in memory, among the kernels that store
    it so, where any can), and all-NHWC strided problems
    by :func:`~miopen_solver.cost_model.subpixel_config` (all stride phases as one GEMM where the
    tilde GEMM's groups are too narrow for the model's tiles or the model expects it clearly
    faster; a one-warpgroup TMA tile takes its ping-pong form, :func:`pingpong_form`; ``allow_model=False``
    keeps the rules and skips the short-K rule and the ping-pong form: the virtual problems of the patch, group-pack and
    NCHW pointwise families, whose kernels the model was not fitted on; ``coefficients`` replaces the model's shipped
    :data:`~miopen_solver.cost_model.H200` weights, for judging a refit). Other
    targets (AMD, where nothing has been measured yet) use these rules, constant time in
    the problem size (they read sub-GEMM sizes, not data):

    * tile_n: the smallest power of two >= cpg, between 16 and 128 (columns past cpg are
      wasted MMA work, so small groups get narrow tiles);
    * tile_m: 128, or 64 when 128-row tiles would leave compute units idle
      (``G * tiles < num_cus``);
    * tile_k: 32 for fp16/bf16, 16 for fp32 (the same 64 bytes per row); halved for fp32
      when no sub-GEMM's GemmK (taps x kpg) reaches it; 16-bit atoms need k >= 16;
    * warp grid 2x2 when tile_n >= 64, else warps stacked along M (4x1 at tile_m 128,
      2x1 at 64), one warp tile per warp;
    * stages 3 where copies are asynchronous (cp.async), else 2 (double buffer);
    * split_k 1 (deterministic, plain stores; search explores split-K), vector caps and
      lds_k_outer automatic.
    """
    p, t = problem, target
    nchw_pw = (allow_nchw_pw and t.is_gpu and nchw_pw_reason(p, t) is None
               and nchw_pw_vector_bytes(p) >= NCHW_PW_MIN_VECTOR_BYTES)
    if nchw_pw and not is_patch(p):
        return nchw_pw_config(p, t)
    if allow_direct and t.vendor == "nvidia" and p.cpg == 1 and plane_reason(p, t) is None:
        try:
            return default_plane_config(p, t)
        except PerfConfigError:     # no plane tile fits the launch limits: the NHWC direct default
            pass
    given, p = p, native_problem(p)
    if allow_direct and t.vendor == "nvidia" and p.cpg <= DIRECT_DEFAULT_MAX_CPG and direct_reason(p, t) is None:
        try:
            return default_direct_config(p, t)
        except PerfConfigError:     # no direct tile fits the launch limits: the GEMM default
            pass
    if nchw_pw and given.elem_bytes == NCHW_PW_PATCH_ELEM_BYTES:   # a 16-bit patch filter in NCHW
        return nchw_pw_config(given, t)
    if allow_patch and patch_reason(p, t) is None and (t.is_gpu or _too_many_sub_gemms(p)):
        return patch_config(p, t)
    if allow_pack and t.is_gpu and not p.is_3d:
        packed = pack_config(p, t)
        if packed is not None:
            return packed
    if t.vendor == "nvidia" and not p.is_3d and p.dtype in ("fp16", "bf16", "fp32"):
        sub_wave = sub_wave_config(p, t) if allow_model else None
        if sub_wave is not None:  # less than one wave: a latency model, not the throughput one
            return sub_wave
        short = short_k_config(p, t) if allow_model else None
        if short is not None:   # before the model, which does not see what 32-deep k-tiles gain
            return short
        rules = measured_nvidia_config(p, t)
        coeffs = cost_model.H200 if coefficients is None else coefficients
        if allow_model and cost_model.modelled(p, t):
            # dX NCHW: only kernels that store it so, where any can (else all add the transform)
            own_dx = not p.all_nhwc and nchw_dx_rule(p, KernelSchedule.WGMMA, 1)
            rules = cost_model.default_config(p, t, rules, coeffs, nchw_dx=own_dx)
        if allow_model and p.all_nhwc:     # strided: all phases as one GEMM where the model says so
            rules = cost_model.subpixel_config(problem, t, rules, coeffs) or rules   # in its own layouts
        return pingpong_form(problem, t, rules) if allow_model else rules
    subs = cached_decompose(p).sub_gemms if not p.is_3d else ()
    tile_n = 16
    while tile_n < min(p.cpg, 128):
        tile_n *= 2
    tiles_128 = count_tiles(subs, 128, tile_n, p.G)
    tile_m = 128 if tiles_128 >= t.num_cus else 64
    tile_k = 32 if p.dtype in ("fp16", "bf16") else 16
    max_gemm_k = max((s.gemm_k for s in subs), default=tile_k)
    if p.dtype == "fp32" and max_gemm_k <= tile_k // 2:
        tile_k //= 2
    if tile_n >= 64:
        warp_m, warp_n = 2, 2
    else:
        warp_m, warp_n = (4 if tile_m >= 128 else 2), 1
    return PerfConfig(tile_m=tile_m, tile_n=tile_n, tile_k=tile_k, warp_m=warp_m, warp_n=warp_n,
                      warp_tile_m=tile_m // warp_m, warp_tile_n=tile_n // warp_n,
                      vector_size_a=0, vector_size_b=0, vector_size_c=0, split_k=1,
                      lds_k_outer=-1, stages=3 if t.async_copy else 2)


def default_performance_config(problem: ConvProblem, target: Target, *, allow_direct: bool = True,
                               allow_patch: bool = True, allow_nchw_pw: bool = True,
                               allow_pack: bool = True, allow_model: bool = True) -> PerfConfig:
    """MIOpen's GetDefaultPerformanceConfig: :func:`heuristic_config`, or the first of
    :data:`FALLBACK_CONFIGS` that validates (for a patch or NCHW pointwise default, first
    those tiles on its warp-MMA schedule). ``allow_direct=False``, ``allow_patch=False`` and
    ``allow_nchw_pw=False`` ask for the default of the tilde GEMM schedules only (what a
    setting the direct, patch or NCHW pointwise schedule cannot take falls back to).

    Raises:
        PerfConfigError: no candidate validates; the message gives each candidate's reason,
            once for the candidates that share it.
    """
    reasons = {}                    # reason -> the candidates refused for it, in order
    first = heuristic_config(problem, target, allow_direct=allow_direct, allow_patch=allow_patch,
                             allow_nchw_pw=allow_nchw_pw, allow_pack=allow_pack, allow_model=allow_model)
    fallbacks = FALLBACK_CONFIGS
    own = KernelSchedule.PATCH_GEMM if first.schedule.patch else \
        KernelSchedule.NCHW_POINTWISE if first.schedule.nchw_pointwise else None
    if own is not None:             # the family's GEMM at the fallback tiles before the tilde GEMM
        fallbacks = tuple(c.replace(schedule=own) for c in FALLBACK_CONFIGS) + fallbacks
    for cfg in (first,) + fallbacks:
        ok, why = is_valid_performance_config(problem, target, cfg)
        if ok:
            return cfg
        reasons.setdefault(why, []).append(cfg.serialize())
    if len(reasons) == 1:
        ((why, cfgs),) = reasons.items()
        raise PerfConfigError(f"no default config is valid: each of the {len(cfgs)} candidates "
                              f"(the first {cfgs[0]}): {why}")
    raise PerfConfigError("no default config is valid: " + "; ".join(
        f"{' and '.join(cfgs)}: {why}" for why, cfgs in reasons.items()))


# ------------------------------------------------------------------- search space
_TILE_M = (32, 64, 128, 256)
_TILE_N = (16, 32, 64, 128, 256)
_TILE_K = {"fp16": (16, 32, 64), "bf16": (16, 32, 64), "fp32": (8, 16, 32)}
_WARPS = ((1, 1), (2, 1), (1, 2), (2, 2), (4, 1), (1, 4), (4, 2), (2, 4))
_SPLIT_K = (1, 2, 4, 8, 16)
_WGMMA_N = (64, 128, 256)
STREAM_K = cost_model.STREAM_K
"""The ``split_k_reduce`` code of stream-K."""
TMA_SEARCH_SPLITS = cost_model.TMA_SPLITS
"""split_k the search gives the TMA schedule (at 4 stages), the cost model's candidates': its
persistent blocks already even out the tiles, a split only has to fill the last wave of a
grid of few, long tiles."""


def _cover_n(problem: ConvProblem) -> int:
    """The power of two covering cpg (at least 16): wider column tiles only add padding."""
    n = 16
    while n < problem.cpg:
        n *= 2
    return n


def _warpgroup_candidates(p: ConvProblem, t: Target, splits: tuple, max_k: int) -> Iterator[PerfConfig]:
    """The warpgroup schedules (sm_90a, fp16/bf16): warpgroups stacked along M, one
    warpgroup tile of 64 x tile_n each or two m64 instructions per warpgroup; the persistent
    and TMA forms where they may run (the persistent form without split K; TMA loads 64-wide
    k boxes). fp16/bf16 also
    get the narrow tiles of the plain and persistent schedules (64-byte swizzled rows,
    :data:`~miopen_solver.spec.WGMMA_NARROW`): tile_k 32 where kpg is not a multiple of 64
    (kpg 32: one filter tap per k-tile, where a 64-wide one would pad), and one 32-wide
    warpgroup tile where cpg <= 32 (where a 64-wide one would pad). fp16/bf16 also get
    warp_tile_n 96, 160, 192 and 224 (:data:`~miopen_solver.spec.WGMMA_N_WIDE`: the vendor
    libraries' 128x96 / 128x192 tiles on small images with many channels, and tiles of 160 or
    224 channels where 128 and 256 pad) on every warpgroup schedule,
    and the TMA schedule 6 to 8 stages (its limit, where shared memory holds them) and, at 4
    stages, split_k :data:`TMA_SEARCH_SPLITS` (work units of one k-slice of one tile) and
    stream-K (``split_k_reduce`` 3, one group); every one-warpgroup TMA tile (64 or 128 rows)
    also on the ping-pong schedule, at the same depths."""
    tf32 = p.compute_type == "tf32"     # fp32 with TF32 math: k8 instructions, the plain main loop
    if not (t.wgmma and (p.dtype in ("fp16", "bf16") or tf32)):
        return
    cover_n = _cover_n(p)
    tile_ks = (32, 64) if tf32 else (64, 128) if p.kpg % 64 == 0 else (32, 64, 128)
    tile_ns = _WGMMA_N if tf32 or cover_n > 32 else (32,) + _WGMMA_N
    if not tf32:
        tile_ns = tile_ns + WGMMA_N_WIDE
    for tm, tn, tk, st, sk in itertools.product((64, 128, 256), tile_ns, tile_ks, (3, 4, 5), splits):
        if tn > max(64, cover_n) or (sk > 1 and sk * tk > max_k):
            continue
        narrow = not tf32 and (tk == 32 or tn == 32)
        for wm in {tm // 64, max(1, tm // 128)}:
            base = PerfConfig(tm, tn, tk, wm, 1, tm // wm, tn, 0, 0, 0, sk, -1, st, KernelSchedule.WGMMA)
            yield base
            if tf32:
                continue
            if sk == 1:
                yield base.replace(schedule=KernelSchedule.WGMMA_PERSISTENT)
            if sk == 1 and tk == 64 and not narrow:
                # a one-warpgroup tile also on the ping-pong schedule (two warpgroups in turn)
                tmas = (KernelSchedule.WGMMA_TMA,) + ((KernelSchedule.WGMMA_TMA_PINGPONG,) if wm == 1 else ())
                for sched in tmas:
                    yield base.replace(schedule=sched)
                    if st == 5:     # deeper mbarrier pipelines (the TMA schedules only)
                        for deep in range(6, TMA_MAX_STAGES + 1):
                            yield base.replace(schedule=sched, stages=deep)
                if st == 4:     # work units of one k-slice; stream-K (runs of k-tiles per block)
                    for split in TMA_SEARCH_SPLITS:
                        if split * tk <= max_k:
                            yield base.replace(schedule=KernelSchedule.WGMMA_TMA, split_k=split)
                    if p.G == 1:
                        yield base.replace(schedule=KernelSchedule.WGMMA_TMA, split_k_reduce=STREAM_K)


def _warp_mma_candidates(p: ConvProblem, t: Target, splits: tuple, max_k: int) -> Iterator[PerfConfig]:
    """The warp-MMA schedule: tiles, warp grids with one warp tile per warp, stages and both
    B layouts, tile_n at most the power of two covering cpg."""
    cover_n = _cover_n(p)
    tile_ns = [n for n in _TILE_N if n <= cover_n]
    stages = (2, 3, 4) if t.async_copy else (1, 2)
    for tm, tn, tk, (wm, wn), st, ko, sk in itertools.product(
            _TILE_M, tile_ns, _TILE_K.get(p.dtype, (16,)), _WARPS, stages, (0, 1), splits):
        if tm % wm or tn % wn or (sk > 1 and sk * tk > max_k):
            continue
        yield PerfConfig(tm, tn, tk, wm, wn, tm // wm, tn // wn, 0, 0, 0, sk, ko, st)


def _direct_candidates(p: ConvProblem, t: Target, splits: tuple, max_k: int) -> Iterator[PerfConfig]:
    """The direct schedule's candidates where it serves the problem."""
    if direct_reason(p, t) is None:
        yield from direct_search_space(p, t)


def _virtual_candidates(v: ConvProblem, t: Target, family: dict,
                        loops=(KernelSchedule.WARP_MMA, KernelSchedule.WGMMA)) -> Iterator[PerfConfig]:
    """The warpgroup and warp-MMA tiles of the virtual problem ``v`` (pointwise for the patch
    and NCHW pointwise families, tilde for group packing) without split K whose main loop is
    one of ``loops`` (not stream-K: the plain TMA schedule's alone), on that loop's schedule
    in ``family``."""
    for cfg in itertools.chain(_warpgroup_candidates(v, t, (1,), v.kpg), _warp_mma_candidates(v, t, (1,), v.kpg)):
        if cfg.schedule in loops and not _narrow_warpgroup(v, cfg) and cfg.split_k_reduce != STREAM_K:
            yield cfg.replace(schedule=family[cfg.schedule])


def _narrow_warpgroup(p: ConvProblem, cfg: PerfConfig) -> bool:
    """A 16-bit warpgroup tile with a 32-wide side (tile_k or warp_tile_n: the 64-byte
    swizzle) or a wide warp_tile_n (96, 160, 192, 224), which the virtual-GEMM families' searches leave
    out (their kernels were not verified on it)."""
    return cfg.schedule.warpgroup and p.compute_type != "tf32" and (
        WGMMA_NARROW in (cfg.tile_k, cfg.warp_tile_n) or cfg.warp_tile_n in WGMMA_N_WIDE)


def _patch_candidates(p: ConvProblem, t: Target, splits: tuple, max_k: int) -> Iterator[PerfConfig]:
    """The patch schedules' candidates where they serve the problem (:func:`_virtual_candidates`)."""
    if patch_reason(p, t) is None:
        yield from _virtual_candidates(virtual_problem(p), t, PATCH_SEARCH_OF, tuple(PATCH_SEARCH_OF))


def _subpixel_candidates(p: ConvProblem, t: Target, splits: tuple, max_k: int) -> Iterator[PerfConfig]:
    """The sub-pixel schedules' candidates where they serve the problem: the warp-MMA,
    warpgroup and TMA tiles of its virtual stride-1 problem (:func:`_virtual_candidates`)."""
    if subpixel.subpixel_reason(p, t) is None:
        yield from _virtual_candidates(subpixel.virtual_problem(p), t, subpixel.SUBPIXEL_OF, tuple(subpixel.SUBPIXEL_OF))


def _pack_candidates(p: ConvProblem, t: Target, splits: tuple, max_k: int) -> Iterator[PerfConfig]:
    """The group-pack schedules' candidates where they serve the problem: for each pack
    ``P >= 2`` dividing G whose packed width ``P*cpg`` is one of the generators' column
    tiles, the warpgroup and warp-MMA tiles of the packed problem exactly one packed group
    wide, without split K."""
    if pack_reason(p, t) is not None:
        return
    widths = set(_TILE_N) | set(_WGMMA_N)          # the column tiles the generators below make
    for pack in range(2, p.G + 1):
        if p.G % pack or pack * p.cpg not in widths:
            continue
        yield from (c for c in _virtual_candidates(pack_virtual(p, pack), t, PACK_OF) if c.tile_n == pack * p.cpg)


def _nchw_pw_candidates(p: ConvProblem, t: Target, splits: tuple, max_k: int) -> Iterator[PerfConfig]:
    """The NCHW pointwise schedules' candidates where they serve the problem (its own
    layouts: dY and dX NCHW; :func:`_virtual_candidates` of one image's GEMM on the warp-MMA,
    warpgroup and persistent warpgroup main loops: schedules 7, 8 and 18)."""
    if nchw_pw_reason(p, t) is None:
        yield from _virtual_candidates(nchw_pw_virtual(p), t, NCHW_PW_OF,
                                       (KernelSchedule.WARP_MMA, KernelSchedule.WGMMA, KernelSchedule.WGMMA_PERSISTENT))


def _nchw_tma_candidates(p: ConvProblem, t: Target, splits: tuple, max_k: int) -> Iterator[PerfConfig]:
    """The NCHW TMA schedule's candidates where it serves the problem (its own layouts) with B
    by tensor copies: its first config, then tile_m 64/128 x tile_n 64/128/256 (1, 2, 4 dX
    rows) at 3-4 stages. Problems whose column shifts need the shifting producer get none: it
    ran 1.9-4.2x slower than the transposing default on the H200 (bench/RESULTS.md), so it is
    reachable by ``--perf-config`` only."""
    if nchw_tma.nchw_tma_reason(p, t) is not None or nchw_tma.shift_loads(p):
        return
    first = nchw_tma_config(p, t)
    yield first
    for tile_m in (64, 128):
        for tile_n in (256, 128, 64):
            for stages in (4, 3):
                c = first.replace(tile_m=tile_m, warp_m=tile_m // 64, tile_n=tile_n, warp_tile_n=tile_n, stages=stages)
                if c != first:
                    yield c


def _direct_nchw_candidates(p: ConvProblem, t: Target, splits: tuple, max_k: int) -> Iterator[PerfConfig]:
    """The direct schedule's mma body on tensors in their own layouts (``DIRECT_NCHW``), where
    dY or dX is NCHW in memory and it serves the problem."""
    yield from mma_search_space(p, t, native=True)


def _plane_candidates(p: ConvProblem, t: Target, splits: tuple, max_k: int) -> Iterator[PerfConfig]:
    """The NCHW plane schedule (``DIRECT_PLANE``), where dY and dX are NCHW in memory and it
    serves the problem."""
    yield from plane_search_space(p, t)


SEARCH_SPACES = (_nchw_pw_candidates, _nchw_tma_candidates, _plane_candidates, _direct_nchw_candidates,
                 _direct_candidates, _patch_candidates, _pack_candidates, _subpixel_candidates,
                 _warpgroup_candidates, _warp_mma_candidates)
"""Each schedule family's candidate generator, fastest family first. The NCHW TMA, NCHW
pointwise, plane and direct NCHW ones see the problem in its own layouts, the others the problem with dY and W NHWC
(:func:`~miopen_solver.transpose.native_problem`) their kernel runs between the layout
transforms."""


def _too_many_sub_gemms(p: ConvProblem) -> bool:
    """More tilde sub-GEMMs than a kernel's table holds (:func:`~miopen_solver.tilde.too_many_sub_gemms`):
    only the dense GEMMs (patch, NCHW pointwise) can run the problem."""
    return not p.is_3d and too_many_sub_gemms(*axes(p)) is not None


def search_space(problem: ConvProblem, target: Target) -> Iterator[PerfConfig]:
    """Candidate configs (unvalidated) of every schedule, pruned to what can matter here:
    split_k at most the k-tiles of the deepest sub-GEMM (split-K sums by atomics where they
    are allowed, else through the fp32 workspace: ``split_k_reduce`` auto,
    :func:`~miopen_solver.spec.split_k_reduce_mode`). A problem with more tilde sub-GEMMs
    than a kernel holds gets the dense GEMMs' candidates alone (the families that run it: the
    NCHW pointwise schedules in its own layouts where they serve it, the patch schedules)."""
    if _too_many_sub_gemms(problem):
        yield from _nchw_pw_candidates(problem, target, (1,), 0)
        yield from _patch_candidates(native_problem(problem), target, (1,), 0)
        return
    max_k = max(s.gemm_k for s in cached_decompose(problem).sub_gemms)
    splits = _SPLIT_K
    native = native_problem(problem)
    for space in SEARCH_SPACES:
        own = space in (_nchw_tma_candidates, _nchw_pw_candidates, _plane_candidates, _direct_nchw_candidates,
                        _subpixel_candidates)
        yield from space(problem if own else native, target, splits, max_k)


def max_search_split_k(problem: ConvProblem, target: Target) -> int:
    """The widest split :func:`search_space` offers for ``problem`` (one launch's) that sums
    through the fp32 workspace (where atomics are refused: :func:`~miopen_solver.spec.split_k_atomics_reason`),
    or 0 when none does (no split-K, atomic split-K, or only the patch schedules): the
    largest of its split degrees whose slices keep a k-tile of the narrowest tile_k in the
    deepest sub-GEMM. Constant time in the problem's size."""
    if problem.is_3d or _too_many_sub_gemms(problem) or split_k_atomics_reason(problem, target) is None:
        return 0
    max_k = max(s.gemm_k for s in cached_decompose(problem).sub_gemms)
    fits = [s for s in _SPLIT_K if s > 1 and s * min(_TILE_K.get(problem.dtype, (16,))) <= max_k]
    return max(fits, default=0)


def stream_k_reason(problem: ConvProblem, target: Target) -> str | None:
    """Why no stream-K config of :func:`search_space` can run ``problem`` (a whole problem;
    its launch's is checked) on ``target``: the first rule broken of stream-K's own
    (:func:`~miopen_solver.spec.stream_k_rules`) or of the TMA schedule on its 128x128 tile,
    or None."""
    launch = native_problem(problem)
    probe = PerfConfig(128, 128, 64, 2, 1, 64, 128, 0, 0, 0, 1, -1, 4, KernelSchedule.WGMMA_TMA, STREAM_K)
    try:
        stream_k_rules(launch, probe)
    except PerfConfigError as e:
        return str(e)
    if not (target.wgmma and launch.dtype in ("fp16", "bf16")):
        return f"stream-K runs on the TMA schedule: fp16/bf16 on a target with warpgroup MMA ({launch.dtype} on {target.arch})"
    return tma_reason(launch, target, probe)


def max_stream_k_workspace(problem: ConvProblem, target: Target) -> int:
    """The most workspace a stream-K config of :func:`search_space` or of the cost model's
    candidates (a default may be one, in either stage count) needs for ``problem`` (one
    launch's), bytes (0: none is valid): the stream-K tiles' specs (a fixed few, whatever the
    problem's size)."""
    if problem.is_3d or problem.G != 1 or _too_many_sub_gemms(problem):
        return 0
    max_k = max(s.gemm_k for s in cached_decompose(problem).sub_gemms)
    model = [f for c in cost_model.candidates(problem) if c.split_k_reduce == STREAM_K
             for f in cost_model.stage_forms(c)]
    most = 0
    for cfg in [*_warpgroup_candidates(problem, target, (1,), max_k), *model]:
        if cfg.split_k_reduce == STREAM_K:
            try:
                most = max(most, launch_spec(problem, target, cfg).workspace_bytes)
            except PerfConfigError:
                continue
    return most


# ------------------------------------------------------------------- sampling
def _spread_order(count: int) -> list:
    """Indices ``0..count-1`` in an order that covers the range evenly from the start: 0,
    then the middle, then the quarters, ... (positions 0, 1/2, 1/4, 3/4, 1/8 ... of the
    range, duplicates skipped; the rest in order once the halvings stop adding any)."""
    order, seen, denom = [0] if count else [], {0}, 2
    while len(order) < count and denom <= 2 * count:
        for num in range(1, denom, 2):
            i = num * count // denom
            if i not in seen:
                seen.add(i)
                order.append(i)
        denom *= 2
    order.extend(i for i in range(count) if i not in seen)
    return order


def sample_configs(candidates, max_configs: int | None) -> list:
    """A sample of ``max_configs`` of ``candidates`` (a search order, the default first) that
    covers the space: the default, then one config at a time from the kernel schedule
    (:class:`~miopen_solver.config.KernelSchedule`) with the fewest picks so far, within it
    from the tile shape (``tile_m x tile_n``) with the fewest picks -- strata (schedule, tile
    shape) not yet sampled first -- each shape's members taken evenly spread over its search
    order (ties: first seen first). So N >= the number of schedules reaches every schedule,
    and N >= the number of (schedule, tile shape) strata reaches every stratum.

    Returns the picks in search order (the default first); all of ``candidates`` when
    ``max_configs`` is None or covers them.
    """
    cands = list(candidates)
    if max_configs is None or max_configs >= len(cands):
        return cands
    if max_configs <= 0 or not cands:
        return []
    strata: dict = {}                          # schedule -> {(tile_m, tile_n): [candidate index]}
    for i, c in enumerate(cands):
        strata.setdefault(c.schedule, {}).setdefault((c.tile_m, c.tile_n), []).append(i)
    queues = {sched: {shape: [members[j] for j in _spread_order(len(members)) if members[j] != 0]
                      for shape, members in shapes.items()} for sched, shapes in strata.items()}
    first = cands[0]
    by_sched = {sched: 0 for sched in queues}
    by_shape = {(sched, shape): 0 for sched, shapes in queues.items() for shape in shapes}
    by_sched[first.schedule] += 1
    by_shape[(first.schedule, (first.tile_m, first.tile_n))] += 1
    picked = [0]
    scheds = list(queues)                      # first seen first
    while len(picked) < max_configs:
        open_scheds = [s for s in scheds if any(queues[s].values())]
        if not open_scheds:
            break
        uncovered = [s for s in open_scheds if any(lst and not by_shape[(s, sh)] for sh, lst in queues[s].items())]
        sched = min(uncovered or open_scheds, key=lambda s: (by_sched[s], scheds.index(s)))
        shapes = [sh for sh, lst in queues[sched].items() if lst]
        if uncovered:                          # every stratum once before any twice
            shapes = [sh for sh in shapes if not by_shape[(sched, sh)]]
        shape = min(shapes, key=lambda sh: by_shape[(sched, sh)])  # min keeps the first of ties
        picked.append(queues[sched][shape].pop(0))
        by_sched[sched] += 1
        by_shape[(sched, shape)] += 1
    return [cands[i] for i in sorted(picked)]
