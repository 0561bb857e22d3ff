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
* ``atomics``: split-K's read-modify-write of dX (and its zero fill), 0 without split-K;
* ``issue``: thousands of load and store instructions one thread of the busiest
  multiprocessor issues: the A and B tiles at their vector widths over the k-loop (none for
  the TMA schedule, whose copies one thread starts) and the dX tile once. Narrow vectors
  (odd channel counts) multiply it; such a kernel waits on issue, not on bytes;
* ``capped``: ``mma`` again for blocks of more than :data:`CAPPED_THREADS` threads (four
  warpgroups), whose threads the register file caps at 128 registers (the H200 ran them
  slower than the other weights predicted: 0.71-0.73 of their time).

The intercept and the MMA weight (a reciprocal efficiency: 1 = the nominal rate) are per
schedule, the other weights shared; all are >= 0, so more work never looks cheaper. Only fp16/bf16 on targets with warpgroup MMA are modelled
(:func:`modelled`); other problems keep :mod:`~miopen_solver.heuristics`' rules.

The model sets the default (:func:`default_config`) only where it expects the rules' config
to be at least :data:`MIN_GAIN` slower than its own pick: its relative error on the H200 rows
is about 0.15 (rms), so a smaller predicted gain is within its noise. It was fitted on
all-NHWC launches; it also ranks the kernels of problems whose dX is NCHW (the kernel between
the layout transforms stores it NCHW: the same tiles and loads, another store pattern the
features count as the same bytes), where it moved 37 lines' defaults 1.16x faster in geomean
on the H100 (bench/RESULTS.md, twenty-eighth session).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from .config import SPLIT_K_REDUCE, KernelSchedule, PerfConfig
from .errors import PerfConfigError
from .problem import ConvProblem
from .spec import DgradSpec, make_spec, split_k_atomics_reason
from .target import Target
from .tilde import cached_decompose
from .tma import tma_box_tiles
from .transpose import writes_nchw_dx

NOMINAL_SM_FLOPS = 739e12 / 132
"""Nominal MMA rate of one multiprocessor, FLOP/s: the H200's measured fp16 dense ceiling
(739 TFLOP/s over 132 SMs, bench/RESULTS.md) -- a unit, the fitted coefficients carry the
efficiency of each schedule."""
NOMINAL_SM_BYTES = 2.72e12 / 132
"""Nominal bytes per second of one multiprocessor (the H200's measured copy bandwidth over
132 SMs): the unit of ``loads`` and ``stores``."""
NOMINAL_DEVICE_BYTES = 2.72e12
"""Device bandwidth, bytes/s (the H200's measured copy rate): the unit of ``traffic``."""

CAPPED_THREADS = 256
"""Blocks with more threads than this (512: four warpgroups) get at most 128 registers a
thread on sm_90 (:func:`~miopen_solver.spec.register_cap`); the ``capped`` feature."""

MODELLED = (KernelSchedule.WGMMA, KernelSchedule.WGMMA_PERSISTENT, KernelSchedule.WGMMA_TMA)
"""The schedules the model times."""
SHARED = ("loads", "stores", "waves", "steps", "traffic", "atomics", "issue", "capped")
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
    issue: float
    capped: float
    phases: int = 1
    """Tilde sub-GEMMs of the launch (stride phases with taps); not a weighted feature: it
    selects :attr:`Coefficients.strided_plain`."""
    stream_k: bool = False
    """A stream-K launch; not a weighted feature: it selects :attr:`Coefficients.stream_k_scale`
    and :attr:`Coefficients.stream_k_us`."""


@dataclass(frozen=True)
class Coefficients:
    """Fitted weights: per schedule an ``intercept`` (us) and an ``mma`` weight, and one
    weight per :data:`SHARED` feature (``shared``, in that order); ``strided_plain`` scales
    the whole time of the plain and persistent schedules (cp.async gathers) on launches of
    more than one sub-GEMM (1: none; see :data:`H200`); a stream-K launch's time is
    ``stream_k_scale`` times the fitted one plus ``stream_k_us`` (1 and 0: none; see
    :data:`STREAM_K_US`)."""

    intercept: dict
    mma: dict
    shared: tuple
    strided_plain: float = 1.0
    stream_k_scale: float = 1.0
    stream_k_us: float = 0.0

    def time_us(self, f: Features) -> float:
        us = (self.intercept[f.schedule] + self.mma[f.schedule] * f.mma
              + sum(w * getattr(f, name) for w, name in zip(self.shared, SHARED)))
        us *= self.strided_plain if strided_plain(f) else 1.0
        return us * self.stream_k_scale + self.stream_k_us if f.stream_k else us


def strided_plain(f: Features) -> bool:
    """A launch of the plain or persistent schedule (cp.async gathers) over more than one
    tilde sub-GEMM: the launches :attr:`Coefficients.strided_plain` scales."""
    return f.phases > 1 and f.schedule is not KernelSchedule.WGMMA_TMA


STRIDED_PLAIN = 1.67
"""The H200's :attr:`Coefficients.strided_plain`, measured apart from the fit (seventeenth
session): on the 10 strided rows of the plain schedule within the model's domain (9 layers of
the zoo and bench/strided_heldout.txt, bench/results/2026-12-03_s17) the unscaled times were
1.31-2.40x optimistic, geomean 1.67, where they are 1.04 on stride-1 rows and 1.2 for the TMA
schedule on strided ones. It scales the fitted time; the fit (``bench/fit_cost_model.py``)
does not see it (put into the fit as a given factor, it moved 20 zoo and suite defaults,
stride-1 ones among them, that no run has judged)."""


STREAM_K_US = 2.42
"""The H200's :attr:`Coefficients.stream_k_us`: what a stream-K launch pays beyond its
features, with :data:`STREAM_K_SCALE`, fitted apart from the main fit by
``bench/fit_stream_k.py`` (relative least squares) on 344 H200 rows of bench/stream_k_lines.txt
as stream-K at four tiles (bench/results/2026-12-03_s19; the fit is in bench/RESULTS.md).
It stands for the graph's second node (the flags' memset, like :data:`SUBPIXEL_PACK_US`'s
pack launch) and the hand-offs' fences and waits; a term in the fp32 slot bytes the fixup
moves fitted to about zero and is left out."""
STREAM_K_SCALE = 1.109
"""The H200's :attr:`Coefficients.stream_k_scale` (see :data:`STREAM_K_US`): a stream-K
launch ran 11% slower, beyond that fixed cost, than the features of its runs predict."""


H200 = Coefficients(
    intercept={KernelSchedule.WGMMA: 1.519, KernelSchedule.WGMMA_PERSISTENT: 2.109, KernelSchedule.WGMMA_TMA: 2.662},
    mma={KernelSchedule.WGMMA: 0.8596, KernelSchedule.WGMMA_PERSISTENT: 0.9475, KernelSchedule.WGMMA_TMA: 0.6881},
    shared=(0.0699, 0.2465, 0.5309, 0.0202, 0.2381, 0.6455, 9.82, 0.1922),
    strided_plain=STRIDED_PLAIN,
    stream_k_scale=STREAM_K_SCALE,
    stream_k_us=STREAM_K_US,
)
"""The H200 fit (``bench/fit_cost_model.py`` over the H200 timings of
bench/results/2026-12-01_s7 and 2026-12-02_s8: a tune campaign slice, the zoo's default rows
of both sessions, the first model's picks and the zoo at its defaults (``zoo_ebd190c.json``); the fit and its judgements are in
bench/RESULTS.md), refitted on the per-phase tilde slices of the seventeenth session, with
:data:`STRIDED_PLAIN` applied on top."""


MAX_SUB_GEMMS = 16
"""The most tilde sub-GEMMs a modelled problem has: strides up to 4x4, the range of the
H200 data the model is fitted on (and its ranking stays a few milliseconds)."""


def modelled(problem: ConvProblem, target: Target) -> bool:
    """Whether the model picks this problem's default: fp16/bf16, not 3-D, on a target with
    warpgroup MMA, with the channel counts the warpgroup tiles serve (cpg > 32 and kpg >= 64:
    narrower groups take the direct or warp-MMA schedules, :mod:`~miopen_solver.heuristics`)
    and at most :data:`MAX_SUB_GEMMS` tilde sub-GEMMs."""
    p = problem
    return (target.wgmma and p.dtype in ("fp16", "bf16") and not p.is_3d and not p.tf32
            and p.cpg > 32 and p.kpg >= 64 and len(cached_decompose(p).sub_gemms) <= MAX_SUB_GEMMS)


def features(spec: DgradSpec) -> Features:
    """:class:`Features` of the launch ``spec`` describes (a GEMM spec of a
    :data:`MODELLED` schedule).

    Raises:
        ValueError: ``spec``'s schedule is not modelled.
    """
    if spec.schedule not in MODELLED:
        raise ValueError(f"schedule {spec.schedule.name} is not modelled; allowed: "
                         + ", ".join(s.name for s in MODELLED))
    if getattr(spec, "stream_k", False):
        return _stream_k_features(spec)
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
    per_step = 0 if spec.tma else (c.tile_m * c.tile_k / spec.vec_a + c.tile_k * c.tile_n / spec.vec_b)
    issue = busiest * (per_step * mean_k + c.tile_m * c.tile_n / spec.vec_c) / spec.threads / 1e3
    return Features(spec.schedule, mma, loads, stores, float(-(-blocks // slots)), steps, traffic, atomics, issue,
                    mma if spec.threads > CAPPED_THREADS else 0.0, len(spec.sub_gemms))


def _stream_k_features(spec: DgradSpec) -> Features:
    """:class:`Features` of a stream-K launch (``dgrad.cu`` ``tmsk``): its ``tile_blocks``
    blocks, all resident (one wave), each a run of ``ceil(tiles x k-tiles / blocks)``
    k-tiles; the busiest multiprocessor runs ``ceil(blocks / num_cus)`` of them. A run covers
    at most ``run / k-tiles + 2`` tiles, whose dX it stores (``stores``), and its fixup moves
    two fp32 tiles through L2 (its own slot written, one read back by an owner). The
    :class:`Coefficients` add what a stream-K launch pays beyond these (:data:`STREAM_K_US`)."""
    p, t, c = spec.problem, spec.target, spec.config
    kt = spec.stream_k_tiles
    blocks = spec.tile_blocks
    run = -(-spec.tiles_per_group * kt // blocks)
    per_sm = -(-blocks // t.num_cus)
    eb = p.elem_bytes
    us = 1e6
    tiles = run / kt + 2
    mma = per_sm * 2.0 * c.tile_m * c.tile_n * c.tile_k * run / NOMINAL_SM_FLOPS * us
    loads = per_sm * (c.tile_m + c.tile_n) * c.tile_k * eb * run / NOMINAL_SM_BYTES * us
    stores = per_sm * c.tile_m * c.tile_n * (eb * tiles + 2 * 4) / NOMINAL_SM_BYTES * us
    traffic = (p.dx_elems + p.dy_elems + p.w_elems) * eb / NOMINAL_DEVICE_BYTES * us
    steps = per_sm * run / min(spec.resident_blocks, per_sm)
    issue = per_sm * tiles * c.tile_m * c.tile_n / spec.vec_c / spec.threads / 1e3
    return Features(spec.schedule, mma, loads, stores, 1.0, steps, traffic, 0.0, issue,
                    mma if spec.threads > CAPPED_THREADS else 0.0, len(spec.sub_gemms), stream_k=True)


def estimate_us(problem: ConvProblem, target: Target, config: PerfConfig,
                coefficients: Coefficients = H200) -> float:
    """The model's time of ``config`` on ``problem``, microseconds.

    Raises:
        PerfConfigError: ``config`` does not build a spec for ``problem`` on ``target``.
        ValueError: its schedule is not modelled.
    """
    return coefficients.time_us(features(make_spec(problem, target, config)))


TILES = ((64, 64, 1, 64), (128, 64, 2, 64), (64, 128, 1, 64), (128, 128, 1, 128), (128, 128, 2, 64), (128, 160, 2, 64),
         (64, 256, 1, 64), (128, 256, 2, 64), (256, 128, 2, 128), (256, 128, 4, 64), (256, 64, 2, 128))
"""``(tile_m, tile_n, warpgroups along M, warpgroup tile_m)`` of the candidate tiles: every
warpgroup 64 or 128 rows by the tile's columns, tile_k 64 -- the shapes the H200 sweeps and
tune campaigns timed, and 128x160 (two warpgroups of m64n160): the model counts the padded
columns of a tile, so it takes 160 where 128- and 256-wide tiles leave columns idle (groups of
160 and 320 channels) or where fewer, wider column tiles cut the A reloads; on the H200 the
defaults it moved ran 1.23x faster over 35 layers, 20 of them held out, none more than 1 %
slower (bench/RESULTS.md, twenty-sixth session)."""


STREAM_K = SPLIT_K_REDUCE.index("stream")
"""The ``split_k_reduce`` code of stream-K."""

TMA_SPLITS = (2, 3, 4)
"""split_k of the TMA schedule's split candidates (work units of one k-slice, ``dgrad.cu``'s
``tmask``), here and in the search (:data:`~miopen_solver.heuristics.TMA_SEARCH_SPLITS`): a
persistent grid needs no power of two, 3 fills the last wave of grids of 1-1.5 waves of long
tiles."""


def candidates(problem: ConvProblem) -> tuple:
    """The configs the model chooses among: every :data:`TILES` entry in each modelled
    schedule, split_k 1, plus split_k 2 and 4 on the plain warpgroup schedule,
    :data:`TMA_SPLITS` on the TMA schedule (its work units; the features count a unit as a
    block of one k-slice) and stream-K on every TMA tile. The model has
    no term for the pipeline depth, so the stage count is the rules': 4 for filters with
    taps and for the TMA schedule, 3 for 1x1 on the others
    (:func:`~miopen_solver.heuristics.wgmma_config`; on the H200 the TMA schedule ran five
    1x1 zoo layers 4-23% faster at 4 stages than at 3, bench/RESULTS.md); :func:`ranked`
    falls back to the other count where that one does not build."""
    taps = problem.Y * problem.X > 1
    out = []
    for tm, tn, wm, wtm in TILES:
        for sched in MODELLED:
            stages = 4 if taps or sched is KernelSchedule.WGMMA_TMA else 3
            out.append(PerfConfig(tm, tn, 64, wm, 1, wtm, tn, 0, 0, 0, 1, -1, stages, sched))
    out += [c.replace(split_k=s) for c in out if c.schedule is KernelSchedule.WGMMA for s in (2, 4)]
    tma = [c for c in out if c.schedule is KernelSchedule.WGMMA_TMA]
    out += [c.replace(split_k=s) for c in tma for s in TMA_SPLITS]
    out += [c.replace(split_k_reduce=STREAM_K) for c in tma]
    return tuple(out)


def stage_forms(config: PerfConfig) -> tuple:
    """``config`` in its own stage count, then in the other of 3 and 4 (7 minus it): the
    forms :func:`ranked` tries in order, the first that builds a spec being the one it times."""
    return config, config.replace(stages=7 - config.stages)


def ranked(problem: ConvProblem, target: Target, coefficients: Coefficients = H200,
           pool: tuple | None = None, estimate=None, keep=None) -> list:
    """``(estimate_us, config)`` of every candidate (``pool``, default :func:`candidates`)
    that builds a spec for ``problem`` -- in its own stage count, else in 7 minus it --
    cheapest first (ties keep candidate order). Split-K candidates only where split-K may
    reduce by atomics (:func:`~miopen_solver.spec.split_k_atomics_reason`): the workspace
    reduction's cost is not modelled. ``estimate``: the time of one config (default
    :func:`estimate_us`; :func:`subpixel_estimate_us` for the sub-pixel schedules).
    ``keep``: a predicate on the built spec; a candidate whose spec fails it is left out."""
    estimate = estimate or estimate_us
    out = []
    splits = split_k_atomics_reason(problem, target) is None
    for i, c in enumerate(pool if pool is not None else candidates(problem)):
        if c.split_k > 1 and not splits:      # the atomics feature is the only split-K cost modelled
            continue
        for cfg in stage_forms(c):
            try:
                if keep is not None and not keep(make_spec(problem, target, cfg)):
                    break                     # the other stage count keeps schedule and split
                out.append((estimate(problem, target, cfg, coefficients), i, cfg))
                break
            except (PerfConfigError, ValueError):
                continue
    out.sort(key=lambda r: (r[0], r[1]))
    return [(us, c) for us, _, c in out]


def model_config(problem: ConvProblem, target: Target, coefficients: Coefficients = H200,
                 nchw_dx: bool = False) -> PerfConfig | None:
    """The cheapest candidate by the model, or None when none builds a spec (with the shipped
    :data:`H200` weights, ranked once per problem, target and ``nchw_dx``: a failed
    candidate's spec is not cached, so a second ranking would build it again). ``nchw_dx``:
    only the candidates whose kernel stores dX NCHW itself
    (:func:`~miopen_solver.transpose.writes_nchw_dx`); the others add a dX transform the
    model does not time."""
    if coefficients is H200:
        return _h200_pick(problem, target, nchw_dx)
    r = ranked(problem, target, coefficients, keep=writes_nchw_dx if nchw_dx else None)
    return r[0][1] if r else None


@lru_cache(maxsize=1024)
def _h200_pick(problem: ConvProblem, target: Target, nchw_dx: bool) -> PerfConfig | None:
    r = ranked(problem, target, H200, keep=writes_nchw_dx if nchw_dx else None)
    return r[0][1] if r else None


MIN_GAIN = 0.10
"""The predicted gain (rules' time / pick's time - 1) below which :func:`default_config`
keeps the rules' config. Judged leave-one-layer-out on 104 pairs of configs the H200 timed
on one zoo layer (``bench/fit_cost_model.py``, bench/RESULTS.md): 0.10 kept the gain of 0.05
(1.13 geomean over the rules' configs) with a better worst case (0.78 against 0.59)."""


def default_config(problem: ConvProblem, target: Target, rules: PerfConfig,
                   coefficients: Coefficients = H200, nchw_dx: bool = False) -> PerfConfig:
    """The default of a :func:`modelled` problem: the model's pick (with ``nchw_dx``, among
    the candidates whose kernel stores dX NCHW itself: :func:`model_config`) where it
    predicts ``rules`` (the rules' config) at least :data:`MIN_GAIN` slower, else ``rules``
    (also when ``rules`` is not a modelled schedule or builds no spec, or no candidate
    builds)."""
    pick = model_config(problem, target, coefficients, nchw_dx)
    if pick is None or pick == rules:
        return rules
    try:
        ours = estimate_us(problem, target, rules, coefficients)
    except (PerfConfigError, ValueError):
        return rules
    return pick if ours >= (1 + MIN_GAIN) * estimate_us(problem, target, pick, coefficients) else rules


SUBPIXEL_PACK_US = 2.5
"""The sub-pixel schedules' W' pack: one more launch in a CUDA graph (2.5-3 us on the H200,
bench/RESULTS.md, twelfth session), added to the model's time of their main loop."""


def subpixel_estimate_us(problem: ConvProblem, target: Target, config: PerfConfig,
                         coefficients: Coefficients = H200) -> float:
    """The model's time of a sub-pixel ``config`` (schedules 16 and 17) on ``problem``: its
    main loop's launch on the virtual stride-1 problem plus :data:`SUBPIXEL_PACK_US`.

    Raises:
        PerfConfigError: ``config`` does not build a spec for ``problem`` on ``target``.
        ValueError: its main loop is not modelled.
    """
    return coefficients.time_us(features(make_spec(problem, target, config).gemm)) + SUBPIXEL_PACK_US


def subpixel_config(problem: ConvProblem, target: Target, tilde: PerfConfig,
                    coefficients: Coefficients = H200) -> PerfConfig | None:
    """The sub-pixel default of a strided problem, or None to keep ``tilde`` (the tilde
    GEMM's default). The sub-pixel GEMM (:mod:`miopen_solver.subpixel`) is one stride-1 GEMM of
    ``sH*sW*cpg`` columns with the MMAs of W''s zero taps (16 for 9 on a 3x3 stride-2 filter);
    the tilde GEMM runs each phase with ``cpg`` columns. Where the virtual problem is
    :func:`modelled`, the model ranks the :data:`TILES` on its plain and TMA main loops
    (schedules 16 and 17, :func:`subpixel_estimate_us`), and the pick is the default

    * where the problem itself is not modelled because its groups are narrow (``cpg <= 32``,
      which the model's warpgroup tiles do not serve and the tilde GEMM runs with 32-column
      tiles), or
    * where the model expects ``tilde`` at least :data:`MIN_GAIN` slower than the pick.

    Only fp16/bf16 on warpgroup-MMA targets; None where the sub-pixel schedules do not serve
    the problem."""
    from .subpixel import SUBPIXEL_OF, subpixel_reason, virtual_problem
    if subpixel_reason(problem, target) is not None:
        return None
    v = virtual_problem(problem)
    if not modelled(v, target):
        return None
    pool = tuple(c.replace(schedule=SUBPIXEL_OF[c.schedule]) for c in candidates(v)
                 if c.split_k == 1 and c.schedule in SUBPIXEL_OF)
    r = ranked(problem, target, coefficients, pool, estimate=subpixel_estimate_us)
    if not r:
        return None
    best = r[0]
    if not modelled(problem, target):
        return best[1] if problem.cpg <= 32 else None
    try:
        ours = estimate_us(problem, target, tilde, coefficients)
    except (PerfConfigError, ValueError):
        return None
    return best[1] if ours >= (1 + MIN_GAIN) * best[0] else None


__all__ = ["Coefficients", "Features", "H200", "CAPPED_THREADS", "MAX_SUB_GEMMS", "MIN_GAIN", "MODELLED", "NOMINAL_DEVICE_BYTES",
           "NOMINAL_SM_BYTES", "NOMINAL_SM_FLOPS", "SHARED", "estimate_us", "features",
           "candidates", "default_config", "model_config", "modelled", "ranked", "SUBPIXEL_PACK_US",
           "subpixel_config", "subpixel_estimate_us", "TILES", "TMA_SPLITS"]
