"""A cost model of the warpgroup-MMA GEMM schedules: the default config as the cheapest
candidate, not as a branch fitted to suite lines (issue 15).

The model is linear in a handful of machine quantities of a launch (:class:`Features`), each
computed from the spec a candidate config builds (tiles, resident blocks, the k-loop of the
tilde sub-GEMMs, split-K), and weighted per schedule by coefficients fitted once to H200
timings (``bench/fit_cost_model.py``; data and fit in bench/RESULTS.md)::

    time_us = intercept[schedule] + mma_weight[schedule] * mma + sum_j weight_j * x_j

* ``mma``: MMA work of the busiest multiprocessor, in microseconds at the nominal rate
  (:data:`NOMINAL_SM_FLOPS`): blocks are dealt to the ``num_cus`` multiprocessors, so the
  busiest one runs ``ceil(blocks / num_cus)`` of them (wave quantisation at block grain);
* ``loads``: the A and B tile bytes those blocks stream through shared memory, at the
  nominal per-multiprocessor bandwidth (:data:`NOMINAL_SM_BYTES`);
* ``stores``: their dX tile bytes at the same bandwidth;
* ``waves``: ``ceil(blocks / (num_cus * resident_blocks))``, the pipeline fills and drains
  a launch pays that resident blocks do not hide;
* ``steps``: k-loop iterations of the busiest multiprocessor, over the blocks it runs at
  once (each iteration's barrier and issue latency, overlapped across resident blocks);
* ``traffic``: unique dY, W and dX bytes at the device bandwidth (the memory floor);
* ``atomics``: split-K's read-modify-write of dX (and its zero fill), 0 without split-K.

The intercept and the MMA weight (a reciprocal efficiency: 1 = the nominal rate) are per
schedule, the other weights shared; all are >= 0, so more work never looks cheaper. Only fp16/bf16 on targets with warpgroup MMA are modelled
(:func:`modelled`); other problems keep :mod:`~miopen_solver.heuristics`' rules.
"""

from __future__ import annotations

from dataclasses import dataclass

from .config import KernelSchedule, PerfConfig
from .errors import PerfConfigError
from .problem import ConvProblem
from .spec import DgradSpec, make_spec
from .target import Target
from .tma import tma_box_tiles

NOMINAL_SM_FLOPS = 739e12 / 132
"""Nominal MMA rate of one multiprocessor, FLOP/s: the H200's measured fp16 dense ceiling
(739 TFLOP/s over 132 SMs, bench/RESULTS.md) -- a unit, the fitted coefficients carry the
efficiency of each schedule."""
NOMINAL_SM_BYTES = 2.72e12 / 132
"""Nominal bytes per second of one multiprocessor (the H200's measured copy bandwidth over
132 SMs): the unit of ``loads`` and ``stores``."""
NOMINAL_DEVICE_BYTES = 2.72e12
"""Device bandwidth, bytes/s (the H200's measured copy rate): the unit of ``traffic``."""

MODELLED = (KernelSchedule.WGMMA, KernelSchedule.WGMMA_PERSISTENT, KernelSchedule.WGMMA_TMA)
"""The schedules the model times."""
SHARED = ("loads", "stores", "waves", "steps", "traffic", "atomics")
"""The features with one weight for every schedule (``mma`` has one per schedule)."""


@dataclass(frozen=True)
class Features:
    """The machine quantities of one launch (microseconds at the nominal rates; ``waves`` is
    a count)."""

    schedule: KernelSchedule
    mma: float
    loads: float
    stores: float
    waves: float
    steps: float
    traffic: float
    atomics: float


@dataclass(frozen=True)
class Coefficients:
    """Fitted weights: per schedule an ``intercept`` (us) and an ``mma`` weight, and one
    weight per :data:`SHARED` feature (``shared``, in that order)."""

    intercept: dict
    mma: dict
    shared: tuple

    def time_us(self, f: Features) -> float:
        return (self.intercept[f.schedule] + self.mma[f.schedule] * f.mma
                + sum(w * getattr(f, name) for w, name in zip(self.shared, SHARED)))


H200 = Coefficients(
    intercept={KernelSchedule.WGMMA: 0.5731, KernelSchedule.WGMMA_PERSISTENT: 0, KernelSchedule.WGMMA_TMA: 2.704},
    mma={KernelSchedule.WGMMA: 0.9194, KernelSchedule.WGMMA_PERSISTENT: 1.062, KernelSchedule.WGMMA_TMA: 0.4701},
    shared=(0.1209, 0.3377, 0.6297, 0, 0.2397, 0.7054),
)
"""The H200 fit (``bench/fit_cost_model.py`` over the H200 timings of
bench/results/2026-12-01_s7; the fit and its leave-one-layer-out judgement are in
bench/RESULTS.md)."""


def modelled(problem: ConvProblem, target: Target) -> bool:
    """Whether the model picks this problem's default: fp16/bf16, not 3-D, on a target with
    warpgroup MMA, with the channel counts the warpgroup tiles serve (cpg > 32 and kpg >= 64:
    narrower groups take the direct or warp-MMA schedules, :mod:`~miopen_solver.heuristics`)."""
    p = problem
    return (target.wgmma and p.dtype in ("fp16", "bf16") and not p.is_3d and not p.tf32
            and p.cpg > 32 and p.kpg >= 64)


def features(spec: DgradSpec) -> Features:
    """:class:`Features` of the launch ``spec`` describes (a GEMM spec of a
    :data:`MODELLED` schedule).

    Raises:
        ValueError: ``spec``'s schedule is not modelled.
    """
    if spec.schedule not in MODELLED:
        raise ValueError(f"schedule {spec.schedule.name} is not modelled; allowed: "
                         + ", ".join(s.name for s in MODELLED))
    p, t, c = spec.problem, spec.target, spec.config
    split = spec.split_k
    box = spec.tma_box
    col_tiles = -(-p.cpg // c.tile_n)
    tiles = k_steps = 0
    for s in spec.sub_gemms:
        n_tiles = (tma_box_tiles(p, s, box) if box is not None else -(-s.gemm_m // c.tile_m)) * col_tiles
        k_per_split = -(-s.gemm_k // split)
        tiles += n_tiles
        k_steps += n_tiles * -(-k_per_split // c.tile_k)
    blocks = tiles * p.G * split
    mean_k = k_steps / tiles
    busiest = -(-blocks // t.num_cus)
    slots = t.num_cus * spec.resident_blocks
    eb = p.elem_bytes
    us = 1e6
    mma = busiest * 2.0 * c.tile_m * c.tile_n * c.tile_k * mean_k / NOMINAL_SM_FLOPS * us
    loads = busiest * (c.tile_m + c.tile_n) * c.tile_k * eb * mean_k / NOMINAL_SM_BYTES * us
    stores = busiest * c.tile_m * c.tile_n * eb / NOMINAL_SM_BYTES * us
    traffic = (p.dx_elems + p.dy_elems + p.w_elems) * eb / NOMINAL_DEVICE_BYTES * us
    atomics = 0.0 if split == 1 else (2 * split + 1) * p.dx_elems * eb / NOMINAL_DEVICE_BYTES * us
    steps = busiest * mean_k / min(spec.resident_blocks, busiest)
    return Features(spec.schedule, mma, loads, stores, float(-(-blocks // slots)), steps, traffic, atomics)


def estimate_us(problem: ConvProblem, target: Target, config: PerfConfig,
                coefficients: Coefficients = H200) -> float:
    """The model's time of ``config`` on ``problem``, microseconds.

    Raises:
        PerfConfigError: ``config`` does not build a spec for ``problem`` on ``target``.
        ValueError: its schedule is not modelled.
    """
    return coefficients.time_us(features(make_spec(problem, target, config)))


TILES = ((64, 64, 1, 64), (128, 64, 2, 64), (64, 128, 1, 64), (128, 128, 1, 128), (128, 128, 2, 64),
         (64, 256, 1, 64), (128, 256, 2, 64), (256, 128, 2, 128), (256, 128, 4, 64), (256, 64, 2, 128))
"""``(tile_m, tile_n, warpgroups along M, warpgroup tile_m)`` of the candidate tiles: every
warpgroup 64 or 128 rows by the tile's columns, tile_k 64 -- the shapes the H200 sweeps and
tune campaigns timed."""


def candidates(problem: ConvProblem) -> tuple:
    """The configs the model chooses among: every :data:`TILES` entry in each modelled
    schedule, split_k 1, plus split_k 2 and 4 on the plain warpgroup schedule. The model has
    no term for the pipeline depth, so the stage count is the rules': 4 for filters with
    taps, 3 for 1x1 (:func:`~miopen_solver.heuristics.wgmma_config`); :func:`ranked` falls
    back to the other count where that one does not build."""
    stages = 4 if problem.Y * problem.X > 1 else 3
    out = []
    for tm, tn, wm, wtm in TILES:
        for sched in MODELLED:
            out.append(PerfConfig(tm, tn, 64, wm, 1, wtm, tn, 0, 0, 0, 1, -1, stages, sched))
    out += [c.replace(split_k=s) for c in out if c.schedule is KernelSchedule.WGMMA for s in (2, 4)]
    return tuple(out)


def ranked(problem: ConvProblem, target: Target, coefficients: Coefficients = H200,
           pool: tuple | None = None) -> list:
    """``(estimate_us, config)`` of every candidate (``pool``, default :func:`candidates`)
    that builds a spec for ``problem`` -- in its own stage count, else in 7 minus it --
    cheapest first (ties keep candidate order)."""
    out = []
    for i, c in enumerate(pool if pool is not None else candidates(problem)):
        for cfg in (c, c.replace(stages=7 - c.stages)):
            try:
                out.append((estimate_us(problem, target, cfg, coefficients), i, cfg))
                break
            except (PerfConfigError, ValueError):
                continue
    out.sort(key=lambda r: (r[0], r[1]))
    return [(us, c) for us, _, c in out]


def model_config(problem: ConvProblem, target: Target, coefficients: Coefficients = H200) -> PerfConfig | None:
    """The cheapest candidate by the model, or None when none builds a spec."""
    r = ranked(problem, target, coefficients)
    return r[0][1] if r else None


__all__ = ["Coefficients", "Features", "H200", "MODELLED", "NOMINAL_DEVICE_BYTES",
           "NOMINAL_SM_BYTES", "NOMINAL_SM_FLOPS", "SHARED", "estimate_us", "features",
           "candidates", "model_config", "modelled", "ranked", "TILES"]
