"""The default for GEMMs whose whole grid is less than one wave (issue 15).

A backward-data GEMM with a batch-sized M and a long K -- the squeeze-and-excitation 1x1
convolutions on 1x1 images of EfficientNet and MobileNetV3, ``M = N`` -- launches a handful
of blocks on a machine of ``num_cus`` multiprocessors. Nothing then hides latency: the time
is the longest block's serial k-loop. The narrowest warpgroup tile (64 x 32 x 32, one
warpgroup) gives the most blocks and the shortest k-step, and split-K (:mod:`~miopen_solver.spec`)
cuts the chain into ``split_k`` slices that run side by side, at the price of zero-filling dX
and adding into it atomically. A three-term latency model picks the split::

    time_us = BASE_US + SPLIT_US * (split_k > 1) + STEP_US * ceil(k_tiles / split_k) * waves

with ``k_tiles = ceil(GemmK / 32)`` of the deepest tilde sub-GEMM, ``blocks`` the 64 x 32
output tiles of every sub-GEMM and group, and ``waves = ceil(blocks * split_k / num_cus)``.
The three constants are a least-squares fit to H200 graph-replay times of that tile at split_k
1-16 on the zoo's seven SE layers (N = 64; bench/RESULTS.md, sixteenth session; relative
rms error 0.12); on the same layers at N = 16 and 256 (held out, ``bench/se_heldout.txt``)
its pick was within 7 % of the best split on all 14.

Only 1x1 filters (any stride): on held-out sub-wave lines with taps
(``bench/subwave_heldout.txt``) the tile won on six and lost on four (0.81-0.95 of the
previous default: long tap chains, where 64-deep k-steps and wider tiles do better than
the model's 32-deep steps), so filters with taps keep the other rules.
"""

from __future__ import annotations

from .config import KernelSchedule, PerfConfig
from .problem import ConvProblem
from .spec import count_tiles, is_valid_performance_config, split_k_atomics_reason
from .target import Target
from .tilde import cached_decompose

SUB_WAVE_TILE = PerfConfig(64, 32, 32, 1, 1, 64, 32, 0, 0, 0, 1, -1, 4, KernelSchedule.WGMMA)
"""The tile of :func:`sub_wave_config` (``split_k`` set per problem): 64 x 32 x 32 on one
warpgroup (m64n32k16), 4 stages."""
SPLITS = (1, 2, 4, 8, 16)
"""The ``split_k`` degrees the model chooses among."""
BASE_US = 2.02
"""Launch, prologue and epilogue of one block, microseconds (graph-replayed, H200)."""
SPLIT_US = 1.46
"""What split-K adds: the zero-fill of dX and the atomic adds into it, microseconds."""
STEP_US = 0.137
"""One 32-deep k-step of a 64 x 32 tile, microseconds: the serial chain's unit."""


def grid_shape(problem: ConvProblem) -> tuple:
    """``(blocks, k_tiles)`` of :data:`SUB_WAVE_TILE` on ``problem`` (its launch problem,
    NHWC): 64 x 32 output tiles over every tilde sub-GEMM and group, and 32-deep k-tiles of the
    deepest sub-GEMM."""
    subs = cached_decompose(problem).sub_gemms
    tile = SUB_WAVE_TILE
    blocks = count_tiles(subs, tile.tile_m, tile.tile_n, problem.G)
    k_tiles = -(-max(s.gemm_k for s in subs) // tile.tile_k)
    return blocks, k_tiles


def estimate_us(blocks: int, k_tiles: int, split_k: int, num_cus: int) -> float:
    """The model's time of :data:`SUB_WAVE_TILE` at ``split_k`` (module docstring), microseconds."""
    waves = -(-(blocks * split_k) // num_cus)
    return BASE_US + SPLIT_US * (split_k > 1) + STEP_US * -(-k_tiles // split_k) * waves


def applies(problem: ConvProblem, target: Target) -> bool:
    """Whether :func:`sub_wave_config` chooses the default: fp16/bf16 (not TF32, not 3-D) on a
    target with warpgroup MMA, a 1x1 filter (any stride), cpg > 16 (narrower groups take the
    direct and warp-MMA schedules), kpg >= 16 (one m64n32k16 step), and fewer 64 x 32
    output tiles than multiprocessors (less than one wave at split_k 1)."""
    p = problem
    if not (target.wgmma and p.dtype in ("fp16", "bf16") and not p.tf32 and not p.is_3d
            and p.Y == 1 and p.X == 1 and p.cpg > 16 and p.kpg >= 16):
        return False
    return grid_shape(p)[0] < target.num_cus


def sub_wave_config(problem: ConvProblem, target: Target) -> PerfConfig | None:
    """The default of a problem :func:`applies` to: :data:`SUB_WAVE_TILE` at the ``split_k``
    of :data:`SPLITS` the model (:func:`estimate_us`) expects fastest, the smaller on a tie;
    split_k 1 where split-K may not add by atomics (an odd cpg:
    :func:`~miopen_solver.spec.split_k_atomics_reason`; the model has no term for the
    workspace reduction). None where the rule does not apply or the tile does not validate."""
    p, t = problem, target
    if not applies(p, t):
        return None
    blocks, k_tiles = grid_shape(p)
    splits = SPLITS if split_k_atomics_reason(p, t) is None else (1,)
    best = min((s for s in splits if s <= k_tiles or s == 1),
               key=lambda s: (round(estimate_us(blocks, k_tiles, s, t.num_cus), 9), s))
    cfg = SUB_WAVE_TILE.replace(split_k=best)
    return cfg if is_valid_performance_config(p, t, cfg)[0] else None


__all__ = ["BASE_US", "SPLITS", "SPLIT_US", "STEP_US", "SUB_WAVE_TILE", "applies", "estimate_us", "grid_shape",
           "sub_wave_config"]
