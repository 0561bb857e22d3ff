"""GPU correctness: our kernels against the float64 reference, on the live device.

Run on a GPU machine with ``pytest tests/test_gpu.py`` (``DGRAD_GPU_BACKEND=hip`` selects
ROCm; default cuda). Skipped where no GPU runtime exists. dX is poisoned with NaN before
every launch and each example draws fresh random inputs, so an unwritten element fails.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from miopen_solver.command import parse
from miopen_solver.config import KernelSchedule
from miopen_solver.errors import PerfConfigError, RuntimeUnavailable
from miopen_solver.layouts import storage_dtype
from miopen_solver.problem import ConvProblem
from miopen_solver.reference import dgrad_reference, verify
from miopen_solver.spec import PerfConfig, make_spec

BACKEND = os.environ.get("DGRAD_GPU_BACKEND", "cuda")


@pytest.fixture(scope="module")
def engine():
    from miopen_solver.runtime import get_engine
    try:
        return get_engine(BACKEND)
    except RuntimeUnavailable as e:
        pytest.skip(str(e))


pytestmark = pytest.mark.gpu

# Configs that exercise every kernel path: atoms per warp, stages 1..4, k-outer and
# m-outer B tiles, narrow vector caps, split-K.
CONFIGS_16 = [
    PerfConfig(128, 64, 32, 2, 2, 64, 32, stages=3),
    PerfConfig(64, 64, 32, 2, 2, 32, 32, stages=2, lds_k_outer=0),
    PerfConfig(128, 128, 32, 2, 2, 64, 64, stages=4),
    PerfConfig(32, 32, 16, 1, 1, 32, 32, stages=1),
    PerfConfig(64, 32, 64, 2, 1, 32, 32, stages=3, vector_size_a=2, vector_size_b=1),
    PerfConfig(64, 64, 32, 2, 2, 32, 32, split_k=3, stages=2),
    PerfConfig(64, 64, 32, 2, 2, 32, 32, split_k=2, lds_k_outer=0, vector_size_b=2),
]
# Warpgroup MMA (sm_90a wgmma; other targets reject these and the tests skip them): one
# and two warpgroups along M and N, two m64 instructions per warpgroup, N = 64/128/256,
# tile_k 64 and 128 (one and two swizzled K blocks), stages 1..4, split-K.
CONFIGS_WG = [
    PerfConfig(128, 128, 64, 2, 1, 64, 128, stages=4, schedule=1),
    PerfConfig(128, 256, 64, 2, 1, 64, 256, stages=3, schedule=1),
    PerfConfig(128, 128, 64, 1, 1, 128, 128, stages=3, schedule=1),
    PerfConfig(128, 128, 64, 1, 2, 128, 64, stages=3, schedule=1),
    PerfConfig(64, 64, 128, 1, 1, 64, 64, stages=2, schedule=1),
    PerfConfig(64, 128, 64, 1, 1, 64, 128, stages=1, schedule=1),
    PerfConfig(128, 128, 64, 2, 1, 64, 128, split_k=2, stages=3, schedule=1),
    PerfConfig(128, 256, 64, 2, 1, 64, 256, stages=3, schedule=2),
    PerfConfig(64, 64, 64, 1, 1, 64, 64, stages=2, schedule=2),
    PerfConfig(128, 256, 64, 2, 1, 64, 256, stages=4, schedule=3),
    PerfConfig(128, 128, 64, 1, 1, 128, 128, stages=3, schedule=3),
    PerfConfig(64, 64, 64, 1, 1, 64, 64, stages=2, schedule=3),
    PerfConfig(256, 128, 64, 2, 1, 128, 128, stages=4, schedule=3),  # the strided default
]
CONFIGS_32 = [
    PerfConfig(64, 64, 16, 2, 2, 32, 32, stages=3),
    PerfConfig(64, 32, 8, 2, 1, 32, 32, stages=2, lds_k_outer=0),
    PerfConfig(32, 32, 8, 1, 1, 32, 32, stages=1, vector_size_a=1),
    PerfConfig(64, 64, 16, 2, 2, 32, 32, split_k=2, stages=2),
]


def _inputs(p: ConvProblem, rng):
    dt = storage_dtype(p.dtype)
    dy = rng.uniform(-1, 1, (p.N, p.Ho, p.Wo, p.K)).astype(dt)
    w = rng.uniform(-1, 1, (p.K, p.Y, p.X, p.cpg)).astype(dt)
    return dy, w


def _check(engine, p, cfg, rng, target=None):
    try:
        spec = make_spec(p, target or engine.target, cfg)
    except PerfConfigError:
        return None
    dy, w = _inputs(p, rng)
    dx = engine.run(spec, dy, w)
    ref = dgrad_reference(p, dy, w)
    v = verify(p, dx, ref)
    assert v.nonfinite == 0, f"{v.nonfinite} dX elements never written by {spec.kernel_name}"
    assert v.ok, f"{spec.kernel_name}: err {v.error} >= {v.tolerance}"
    return v


def _nhwc_problem(dtype: str, flags: str) -> ConvProblem:
    """The NHWC problem of MIOpenDriver ``flags`` (no base) in ``dtype``."""
    base = {"fp16": "convfp16", "bf16": "convbfp16", "fp32": "conv"}[dtype]
    return parse(f"{base} {flags} -F 2 --in_layout NHWC --out_layout NHWC --fil_layout NHWC").problem


SUITE = [
    "-n 2 -c 64 -H 56 -W 56 -k 256 -y 1 -x 1 -p 0 -q 0 -u 1 -v 1",
    "-n 2 -c 256 -H 56 -W 56 -k 64 -y 1 -x 1 -p 0 -q 0 -u 1 -v 1",
    "-n 2 -c 64 -H 56 -W 56 -k 64 -y 3 -x 3 -p 1 -q 1 -u 1 -v 1",
    "-n 2 -c 256 -H 56 -W 56 -k 512 -y 1 -x 1 -p 0 -q 0 -u 2 -v 2",
    "-n 2 -c 128 -H 56 -W 56 -k 128 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2",
    "-n 2 -c 256 -H 28 -W 28 -k 256 -y 3 -x 3 -p 1 -q 1 -g 32",
    "-n 1 -c 256 -H 64 -W 64 -k 256 -y 3 -x 3 -p 2 -q 2 -l 2 -j 2",
]


@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32"])
@pytest.mark.parametrize("line", SUITE)
def test_suite_shapes_verify(engine, dtype, line):
    p = _nhwc_problem(dtype, line)
    rng = np.random.default_rng(7)
    cfgs = CONFIGS_32 if dtype == "fp32" else CONFIGS_16
    assert any(_check(engine, p, c, rng) for c in cfgs[:2])


@pytest.mark.parametrize("cfg", CONFIGS_WG, ids=lambda c: c.serialize())
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("line", SUITE)
def test_suite_shapes_verify_wgmma(engine, dtype, line, cfg):
    if not engine.target.wgmma:
        pytest.skip(f"{engine.target.arch} has no warpgroup MMA")
    base = {"fp16": "convfp16", "bf16": "convbfp16"}[dtype]
    p = parse(f"{base} {line} -F 2 --in_layout NHWC --out_layout NHWC --fil_layout NHWC").problem
    if _check(engine, p, cfg, np.random.default_rng(11)) is None:
        pytest.skip("config not valid for this problem")


@pytest.mark.parametrize("cfg", [c for c in CONFIGS_WG if c.schedule == 2], ids=lambda c: c.serialize())
@pytest.mark.parametrize("line", SUITE)
def test_persistent_blocks_walk_many_tiles(engine, line, cfg):
    """wgmma=2 with the grid sized for a 3-SM device: every block loops over many tiles
    (the next tile's copies overlap the previous epilogue), zero-fill blocks included."""
    if not engine.target.wgmma:
        pytest.skip(f"{engine.target.arch} has no warpgroup MMA")
    p = parse(f"convfp16 {line} -F 2 --in_layout NHWC --out_layout NHWC --fil_layout NHWC").problem
    small = engine.target.with_(num_cus=3)
    try:
        spec = make_spec(p, small, cfg)
    except PerfConfigError:
        pytest.skip("config not valid for this problem")
    assert spec.tile_blocks <= 3 * 4
    if _check(engine, p, cfg, np.random.default_rng(5), target=small) is None:
        pytest.skip("config not valid for this problem")


# Narrow warpgroup tiles (64-byte swizzled rows, PTX ISA "Shared Memory Matrix Layout"):
# tile_k 32 (A rows of 32 dY channels: kpg 32, one tap per k-tile) and warp_tile_n 32
# (m64n32k16, B rows of 32 W channels: cpg 32), on the plain and persistent schedules, over
# the zoo layers they are for (DenseNet-121 3x3 k32, the YOLOv5s stem 3x3/s2 c32, the
# MobileNetV2 1x1 c32 expand) at a small N, and their tails, groups and splits.
NARROW_LINES = [
    "-n 2 -c 128 -H 56 -W 56 -k 32 -y 3 -x 3 -p 1 -q 1 -u 1 -v 1",      # DenseNet 3x3, kpg 32
    "-n 4 -c 128 -H 14 -W 14 -k 32 -y 3 -x 3 -p 1 -q 1 -u 1 -v 1",
    "-n 2 -c 32 -H 320 -W 320 -k 64 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2",     # YOLOv5s stem, cpg 32
    "-n 4 -c 32 -H 28 -W 28 -k 192 -y 1 -x 1 -p 0 -q 0 -u 1 -v 1",     # MobileNetV2 expand, cpg 32
    "-n 2 -c 32 -H 17 -W 19 -k 32 -y 3 -x 3 -p 1 -q 1 -u 1 -v 1",       # both 32, GemmM tail
    "-n 2 -c 64 -H 15 -W 15 -k 64 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 -g 2",  # groups of 32 and 32
    "-n 2 -c 30 -H 13 -W 11 -k 48 -y 3 -x 3 -p 1 -q 1 -u 1 -v 1",       # k-tiles across taps, odd cpg
    "-n 2 -c 32 -H 14 -W 14 -k 96 -y 1 -x 1 -p 0 -q 0 -u 2 -v 2",       # zero-fill blocks
]
CONFIGS_NARROW = [
    PerfConfig(128, 128, 32, 2, 1, 64, 128, stages=4, schedule=1),     # tile_k 32
    PerfConfig(256, 128, 32, 2, 1, 128, 128, stages=4, schedule=1),
    PerfConfig(128, 64, 32, 2, 1, 64, 64, stages=1, schedule=1),
    PerfConfig(128, 128, 32, 2, 1, 64, 128, split_k=3, stages=4, schedule=1),
    PerfConfig(128, 32, 64, 2, 1, 64, 32, stages=4, schedule=1),       # warp_tile_n 32
    PerfConfig(256, 32, 64, 2, 1, 128, 32, stages=3, schedule=1),
    PerfConfig(128, 32, 32, 2, 1, 64, 32, stages=4, schedule=1),       # both
    PerfConfig(128, 64, 32, 2, 2, 64, 32, stages=2, schedule=1),
    PerfConfig(128, 32, 32, 2, 1, 64, 32, split_k=2, stages=3, schedule=1, split_k_reduce=2),
    PerfConfig(128, 128, 32, 2, 1, 64, 128, stages=3, schedule=2),     # persistent
    PerfConfig(128, 32, 64, 2, 1, 64, 32, stages=3, schedule=2),
    PerfConfig(64, 32, 32, 1, 1, 64, 32, stages=2, schedule=2),
]


@pytest.mark.parametrize("cfg", CONFIGS_NARROW, ids=lambda c: c.serialize())
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("line", NARROW_LINES)
def test_narrow_wgmma_tiles_verify(engine, dtype, line, cfg):
    """tile_k 32 / warp_tile_n 32 warpgroup kernels (64-byte swizzle) against the float64
    reference, NaN-poisoned dX."""
    if not engine.target.wgmma:
        pytest.skip(f"{engine.target.arch} has no warpgroup MMA")
    p = _nhwc_problem(dtype, line)
    if _check(engine, p, cfg, np.random.default_rng(13)) is None:
        pytest.skip("config not valid for this problem")


def _random_problem(data, dtype: str, g: int, cpg: int, kpg: int, hw_max: int, n_max: int) -> ConvProblem:
    """The NHWC problem of ``g`` groups of ``cpg``/``kpg`` channels with a drawn geometry:
    1..n_max images of 3..hw_max pixels a side, a 1x1 or 3x3 filter (3x3 padded 0 or 1),
    strides 1-2."""
    f = data.draw(st.sampled_from([1, 3]))
    pad = data.draw(st.integers(0, 1)) if f == 3 else 0
    u, v = data.draw(st.integers(1, 2)), data.draw(st.integers(1, 2))
    h, w = data.draw(st.integers(3, hw_max)), data.draw(st.integers(3, hw_max))
    n = data.draw(st.integers(1, n_max))
    return _nhwc_problem(dtype, f"-n {n} -c {g * cpg} -H {h} -W {w} -k {g * kpg} -y {f} -x {f} -p {pad} -q {pad} "
                                f"-u {u} -v {v} -g {g}")


def _check_on_three_sms(engine, line, cfg, seed):
    """``cfg`` on the fp16 NHWC ``line`` with the grid sized for a 3-SM device (persistent
    blocks loop over many tiles), against the reference; skips without warpgroup MMA or where
    the config is not valid for the line."""
    if not engine.target.wgmma:
        pytest.skip(f"{engine.target.arch} has no warpgroup MMA")
    p = _nhwc_problem("fp16", line)
    small = engine.target.with_(num_cus=3)
    try:
        make_spec(p, small, cfg)
    except PerfConfigError:
        pytest.skip("config not valid for this problem")
    assert _check(engine, p, cfg, np.random.default_rng(seed), target=small) is not None


@pytest.mark.parametrize("cfg", [c for c in CONFIGS_NARROW if c.schedule == 2], ids=lambda c: c.serialize())
@pytest.mark.parametrize("line", NARROW_LINES)
def test_narrow_persistent_blocks_walk_many_tiles(engine, line, cfg):
    """The narrow persistent kernels with the grid sized for a 3-SM device: every block
    loops over many tiles."""
    _check_on_three_sms(engine, line, cfg, 19)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_narrow_wgmma_search_configs_match_reference(engine, data):
    """Random kpg-32 / cpg-32 problems (1x1 and 3x3, strides 1-2, pads, groups, fp16/bf16),
    each on a random narrow warpgroup config of ``search()``."""
    if not engine.target.wgmma:
        pytest.skip(f"{engine.target.arch} has no warpgroup MMA")
    from miopen_solver.solver import DgradSolver
    dtype = data.draw(st.sampled_from(["fp16", "bf16"]))
    g = data.draw(st.sampled_from([1, 1, 2]))
    side = data.draw(st.sampled_from(["k", "c", "both"]))
    other = data.draw(st.sampled_from([16, 24, 40, 64, 96, 128]))
    cpg, kpg = (32 if side != "k" else other), (32 if side != "c" else other)
    p = _random_problem(data, dtype, g, cpg, kpg, hw_max=40, n_max=3)
    configs = [c for c in DgradSolver().search(p, engine.target)
               if c.schedule.warpgroup and 32 in (c.tile_k, c.warp_tile_n)]
    assume(configs)
    cfg = configs[data.draw(st.integers(0, len(configs) - 1))]
    assert _check(engine, p, cfg, np.random.default_rng(data.draw(st.integers(0, 2 ** 31)))) is not None


# The short-K default (heuristics.short_k_config: 64x64x32 on one warpgroup) on the zoo's six
# short pointwise layers at small N, and kpg 16 (GemmK under one k-tile), column and pixel tails,
# NCHW tensors around it. Select with ``-k short_k``.
SHORT_K_LINES = [
    "-n 2 -c 64 -H 56 -W 56 -k 64 -y 1 -x 1 -p 0 -q 0 -u 1 -v 1",       # ResNet-50 layer1.0.conv1
    "-n 2 -c 144 -H 56 -W 56 -k 24 -y 1 -x 1 -p 0 -q 0 -u 1 -v 1",      # MobileNetV2 project, kpg 24
    "-n 4 -c 576 -H 14 -W 14 -k 96 -y 1 -x 1 -p 0 -q 0 -u 1 -v 1",
    "-n 2 -c 240 -H 28 -W 28 -k 40 -y 1 -x 1 -p 0 -q 0 -u 1 -v 1",
    "-n 2 -c 192 -H 35 -W 35 -k 48 -y 1 -x 1 -p 0 -q 0 -u 1 -v 1",      # Inception, odd image
    "-n 2 -c 128 -H 80 -W 80 -k 80 -y 1 -x 1 -p 0 -q 0 -u 1 -v 1",      # YOLOv8, two k-tiles of 32 + 16
    "-n 9 -c 200 -H 13 -W 11 -k 16 -y 1 -x 1 -p 0 -q 0 -u 1 -v 1",      # kpg 16, column and row tails
    "-n 4 -c 96 -H 27 -W 21 -k 72 -y 1 -x 1 -p 0 -q 0 -u 1 -v 1 -g 2",  # groups of 48 x 36
]


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("line", SHORT_K_LINES)
def test_short_k_default_verifies(engine, dtype, line):
    """Each line's default is the short-K tile (where the target has warpgroup MMA) and runs
    against the float64 reference with NaN-poisoned dX, in NHWC and in MIOpen's NCHW."""
    if not engine.target.wgmma:
        pytest.skip(f"{engine.target.arch} has no warpgroup MMA")
    from miopen_solver.heuristics import SHORT_K_DEFAULT
    _default_and_nchw_verify(engine, dtype, line, lambda cfg: cfg == SHORT_K_DEFAULT, seed=29)


def _default_and_nchw_verify(engine, dtype: str, line: str, expected, seed: int):
    """The NHWC default of MIOpenDriver ``line`` in ``dtype`` satisfies ``expected`` and runs
    against the float64 reference with NaN-poisoned dX; the line in MIOpen's NCHW runs its own
    default through the whole launch plan."""
    from miopen_solver.heuristics import default_performance_config
    from miopen_solver.solver import DgradSolver
    p = _nhwc_problem(dtype, line)
    cfg = default_performance_config(p, engine.target)
    assert expected(cfg), cfg.serialize()
    assert _check(engine, p, cfg, np.random.default_rng(seed)) is not None
    base = {"fp16": "convfp16", "bf16": "convbfp16"}[dtype]
    _verify_solution(engine, DgradSolver().find_solution(parse(f"{base} {line} -F 2").problem, engine.target),
                     seed=seed + 2)


# grids under one wave (miopen_solver.sub_wave): SE 1x1 layers on 1x1 images at a small N,
# split_k 16 with slices that straddle k-tiles, an odd cpg (split 1, column tail), a batch-1
# 1x1, a 1x1 stride 2 (zero-filled rows), NCHW, bf16. Select with ``-k sub_wave``.
SUB_WAVE_LINES = [
    "-n 8 -c 28 -H 1 -W 1 -k 672 -y 1 -x 1 -p 0 -q 0 -u 1 -v 1",
    "-n 5 -c 48 -H 1 -W 1 -k 1152 -y 1 -x 1 -p 0 -q 0 -u 1 -v 1",
    "-n 3 -c 27 -H 1 -W 1 -k 640 -y 1 -x 1 -p 0 -q 0 -u 1 -v 1",
    "-n 1 -c 2048 -H 7 -W 7 -k 512 -y 1 -x 1 -p 0 -q 0 -u 1 -v 1",
    "-n 2 -c 64 -H 28 -W 28 -k 640 -y 1 -x 1 -p 0 -q 0 -u 2 -v 2",
]


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("line", SUB_WAVE_LINES)
def test_sub_wave_default_verifies(engine, dtype, line):
    """Each line's default is the sub-wave tile at the model's split (where the target has
    warpgroup MMA) and runs against the float64 reference with NaN-poisoned dX, in NHWC and
    in MIOpen's NCHW."""
    if not engine.target.wgmma:
        pytest.skip(f"{engine.target.arch} has no warpgroup MMA")
    from miopen_solver.heuristics import default_performance_config
    from miopen_solver.sub_wave import sub_wave_config
    p = _nhwc_problem(dtype, line)
    cfg = default_performance_config(p, engine.target)
    assert cfg == sub_wave_config(p, engine.target), cfg.serialize()
    assert _check(engine, p, cfg, np.random.default_rng(41)) is not None
    from miopen_solver.solver import DgradSolver
    base = {"fp16": "convfp16", "bf16": "convbfp16"}[dtype]
    _verify_solution(engine, DgradSolver().find_solution(parse(f"{base} {line} -F 2").problem, engine.target), seed=43)


# warp_tile_n 96 and 192 (m64n96k16 with W in 64-byte swizzled 32-wide blocks and 32-wide TMA
# boxes; m64n192k16 in 128-byte swizzled 64-wide blocks), tile_n not a power of two, on the
# plain, persistent and TMA schedules, the TMA schedule at 7-8 stages: the zoo's small-image
# 1x1 layers they are for (ResNet-50 layer4.1.conv3 / layer3.1.conv3, MobileNetV2
# features.18) at a small N, and column tails (cpg 200, 400 per group), 3x3, strides, groups.
# Select with ``-k n96``.
N96_LINES = [
    "-n 4 -c 512 -H 7 -W 7 -k 2048 -y 1 -x 1 -p 0 -q 0 -u 1 -v 1",       # layer4.1.conv3
    "-n 4 -c 256 -H 14 -W 14 -k 1024 -y 1 -x 1 -p 0 -q 0 -u 1 -v 1",     # layer3.1.conv3
    "-n 4 -c 320 -H 7 -W 7 -k 1280 -y 1 -x 1 -p 0 -q 0 -u 1 -v 1",       # features.18
    "-n 2 -c 200 -H 13 -W 11 -k 192 -y 3 -x 3 -p 1 -q 1 -u 1 -v 1",      # column tails, 3x3
    "-n 2 -c 400 -H 15 -W 15 -k 256 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 -g 2", # groups of 200, strided
    "-n 2 -c 96 -H 14 -W 14 -k 128 -y 1 -x 1 -p 0 -q 0 -u 2 -v 2",       # zero-fill blocks
]
CONFIGS_N96 = [
    PerfConfig(128, 96, 64, 2, 1, 64, 96, stages=4, schedule=1),
    PerfConfig(128, 96, 64, 2, 1, 64, 96, stages=6, schedule=1),
    PerfConfig(128, 192, 64, 2, 1, 64, 192, stages=4, schedule=1),
    PerfConfig(64, 96, 64, 1, 1, 64, 96, stages=3, schedule=1),
    PerfConfig(128, 192, 64, 2, 2, 64, 96, stages=4, schedule=1),      # two 96-wide warpgroups along N
    PerfConfig(128, 96, 64, 2, 1, 64, 96, split_k=3, stages=4, schedule=1),
    PerfConfig(128, 192, 64, 2, 1, 64, 192, split_k=2, stages=4, schedule=1, split_k_reduce=2),
    PerfConfig(128, 96, 64, 2, 1, 64, 96, stages=4, schedule=2),       # persistent
    PerfConfig(128, 192, 64, 2, 1, 64, 192, stages=3, schedule=2),
    PerfConfig(128, 96, 64, 2, 1, 64, 96, stages=4, schedule=3),       # TMA
    PerfConfig(128, 96, 64, 2, 1, 64, 96, stages=7, schedule=3),
    PerfConfig(128, 96, 64, 2, 1, 64, 96, stages=8, schedule=3),
    PerfConfig(128, 192, 64, 2, 1, 64, 192, stages=4, schedule=3),
    PerfConfig(128, 192, 64, 2, 1, 64, 192, stages=5, schedule=3),
]


@pytest.mark.parametrize("cfg", CONFIGS_N96, ids=lambda c: "n96-" + c.serialize())
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("line", N96_LINES)
def test_n96_wgmma_tiles_verify(engine, dtype, line, cfg):
    """warp_tile_n 96 / 192 warpgroup kernels against the float64 reference, NaN-poisoned dX."""
    if not engine.target.wgmma:
        pytest.skip(f"{engine.target.arch} has no warpgroup MMA")
    p = _nhwc_problem(dtype, line)
    if _check(engine, p, cfg, np.random.default_rng(17)) is None:
        pytest.skip("config not valid for this problem")


@pytest.mark.parametrize("cfg", [c for c in CONFIGS_N96 if c.schedule in (2, 3)], ids=lambda c: "n96-" + c.serialize())
@pytest.mark.parametrize("line", N96_LINES)
def test_n96_persistent_blocks_walk_many_tiles(engine, line, cfg):
    """The n96/n192 persistent and TMA kernels with the grid sized for a 3-SM device: every
    block loops over many tiles (the mbarrier stages wrap across tiles)."""
    _check_on_three_sms(engine, line, cfg, 23)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_n96_wgmma_search_configs_match_reference(engine, data):
    """Random many-channel problems (cpg 72..400, 1x1 and 3x3, strides 1-2, pads, groups,
    fp16/bf16), each on a random warp_tile_n 96/160/192/224 config of ``search()``."""
    if not engine.target.wgmma:
        pytest.skip(f"{engine.target.arch} has no warpgroup MMA")
    from miopen_solver.solver import DgradSolver
    dtype = data.draw(st.sampled_from(["fp16", "bf16"]))
    g = data.draw(st.sampled_from([1, 1, 2]))
    cpg = data.draw(st.sampled_from([72, 96, 100, 192, 200, 320, 400, 512]))
    kpg = data.draw(st.sampled_from([64, 128, 192, 256, 512]))
    p = _random_problem(data, dtype, g, cpg, kpg, hw_max=30, n_max=4)
    configs = [c for c in DgradSolver().search(p, engine.target)
               if c.schedule.warpgroup and c.warp_tile_n in (96, 160, 192, 224)]
    assume(configs)
    cfg = configs[data.draw(st.integers(0, len(configs) - 1))]
    assert _check(engine, p, cfg, np.random.default_rng(data.draw(st.integers(0, 2 ** 31)))) is not None


# warp_tile_n 160 and 224 (m64n160k16 / m64n224k16, W in 5 or 7 64-byte swizzled 32-wide
# blocks, 32-wide TMA boxes) on the plain, persistent, TMA and ping-pong schedules: the zoo
# layers whose channels they fit (Inception-v3 Mixed_6c's 1x7 and 7x1 at 160, DenseNet-121's
# 1x1 at 224, EfficientNet-B0's 1x1 at 672 = 3 x 224) at a small N, column tails (cpg 200 =
# 160 + 40, 480 = 2 x 224 + 32), strides, groups, NCHW. Select with ``-k wide``.
WIDE_LINES = [
    "-n 4 -c 160 -H 17 -W 17 -k 160 -y 1 -x 7 -p 0 -q 3 -u 1 -v 1",      # Mixed_6c 1x7
    "-n 4 -c 160 -H 17 -W 17 -k 192 -y 7 -x 1 -p 3 -q 0 -u 1 -v 1",      # Mixed_6c 7x1
    "-n 2 -c 224 -H 28 -W 28 -k 128 -y 1 -x 1 -p 0 -q 0 -u 1 -v 1",      # denselayer conv1
    "-n 4 -c 672 -H 14 -W 14 -k 112 -y 1 -x 1 -p 0 -q 0 -u 1 -v 1",      # features.5.1.project
    "-n 2 -c 200 -H 13 -W 11 -k 192 -y 3 -x 3 -p 1 -q 1 -u 1 -v 1",      # column tails, 3x3
    "-n 2 -c 960 -H 15 -W 15 -k 256 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 -g 2", # groups of 480, strided
]
CONFIGS_WIDE = [
    PerfConfig(128, 160, 64, 2, 1, 64, 160, stages=4, schedule=1),
    PerfConfig(128, 224, 64, 2, 1, 64, 224, stages=4, schedule=1),
    PerfConfig(128, 320, 64, 2, 2, 64, 160, stages=3, schedule=1),     # two 160-wide warpgroups along N
    PerfConfig(128, 160, 64, 2, 1, 64, 160, split_k=3, stages=4, schedule=1),
    PerfConfig(128, 224, 64, 2, 1, 64, 224, stages=3, schedule=2),     # persistent
    PerfConfig(128, 160, 64, 2, 1, 64, 160, stages=4, schedule=3),     # TMA
    PerfConfig(128, 160, 64, 2, 1, 64, 160, stages=6, schedule=3),
    PerfConfig(128, 224, 64, 2, 1, 64, 224, stages=5, schedule=3),
    PerfConfig(64, 160, 64, 1, 1, 64, 160, stages=8, schedule=20),     # ping-pong
    PerfConfig(64, 224, 64, 1, 1, 64, 224, stages=6, schedule=20),
]


@pytest.mark.parametrize("cfg", CONFIGS_WIDE, ids=lambda c: "wide-" + c.serialize())
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("line", WIDE_LINES)
def test_wide_wgmma_tiles_verify(engine, dtype, line, cfg):
    """warp_tile_n 160 / 224 warpgroup kernels against the float64 reference, NaN-poisoned dX,
    NHWC and (fp16) all-NCHW through the whole launch plan."""
    if not engine.target.wgmma:
        pytest.skip(f"{engine.target.arch} has no warpgroup MMA")
    p = _nhwc_problem(dtype, line)
    if _check(engine, p, cfg, np.random.default_rng(29)) is None:
        pytest.skip("config not valid for this problem")
    if dtype == "fp16":
        from miopen_solver.solver import DgradSolver
        sol = DgradSolver().find_solution(parse(f"convfp16 {line} -F 2").problem, engine.target, perf_config=cfg)
        _verify_solution(engine, sol, seed=31)


@pytest.mark.parametrize("cfg", [c for c in CONFIGS_WIDE if c.schedule in (2, 3, 20)],
                         ids=lambda c: "wide-" + c.serialize())
@pytest.mark.parametrize("line", WIDE_LINES[:4])
def test_wide_persistent_blocks_walk_many_tiles(engine, line, cfg):
    """The n160/n224 persistent, TMA and ping-pong kernels with the grid sized for a 3-SM
    device: every block loops over many tiles (the mbarrier stages wrap across tiles)."""
    _check_on_three_sms(engine, line, cfg, 37)


# Split-K on the TMA schedule (dgrad.cu's tmask sections): work units of one k-slice of
# one tile; partial sums added into dX (packed atomics, dX zeroed) or stored into the fp32
# workspace and summed by the reduction kernel. The small-image lines the split serves
# (layer4.1.conv3, sd15's 3x3 c1280 at 8x8), uneven slices (k-tiles not a multiple of
# split_k), tilde sub-GEMMs of different K (stride 2), zero-fill pixels (1x1 stride 2), an
# NCHW dX (atomics one element at a time, or stored by the reduction), groups.
TMASK_LINES = [
    "-n 4 -c 512 -H 7 -W 7 -k 2048 -y 1 -x 1 -p 0 -q 0",
    "-n 2 -c 256 -H 8 -W 8 -k 320 -y 3 -x 3 -p 1 -q 1",
    "-n 2 -c 128 -H 9 -W 14 -k 448 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2",
    "-n 2 -c 64 -H 14 -W 14 -k 512 -y 1 -x 1 -p 0 -q 0 -u 2 -v 2",
    "-n 2 -c 256 -H 10 -W 12 -k 512 -y 3 -x 3 -p 1 -q 1 -g 2",
]
CONFIGS_TMASK = [
    PerfConfig(128, 128, 64, 2, 1, 64, 128, split_k=2, stages=4, schedule=3),
    PerfConfig(128, 128, 64, 2, 1, 64, 128, split_k=3, stages=4, schedule=3, split_k_reduce=2),
    PerfConfig(128, 256, 64, 2, 1, 64, 256, split_k=4, stages=4, schedule=3),
    PerfConfig(64, 128, 64, 1, 1, 64, 128, split_k=5, stages=6, schedule=3, split_k_reduce=2),
    PerfConfig(128, 64, 64, 2, 1, 64, 64, split_k=2, stages=8, schedule=3),
    PerfConfig(128, 96, 64, 2, 1, 64, 96, split_k=2, stages=7, schedule=3),     # cuBLAS's 1x1 tile, split
]


def _tma_solution(engine, dtype: str, layout: str, line: str, cfg):
    """The solution of ``cfg`` (every pair given is valid) on ``line`` in ``dtype``, NHWC or
    all-NCHW; skips without warpgroup MMA."""
    if not engine.target.wgmma:
        pytest.skip(f"{engine.target.arch} has no warpgroup MMA")
    p = _nhwc_problem(dtype, line)
    if layout == "NCHW":
        base = {"fp16": "convfp16", "bf16": "convbfp16"}[dtype]
        p = parse(f"{base} {line} -F 2".split()).problem
    from miopen_solver.solver import DgradSolver
    return DgradSolver().find_solution(p, engine.target, perf_config=cfg.serialize())


@pytest.mark.parametrize("cfg", CONFIGS_TMASK, ids=lambda c: "tmask-" + c.serialize())
@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("line", TMASK_LINES)
def test_tma_split_k_verifies(engine, dtype, layout, line, cfg):
    """TMA split-K kernels against the float64 reference (NaN-poisoned dX where no memset
    zeroes it), NHWC and all-NCHW (dY through the transform, dX by the atomic NCHW epilogue or
    the reduction)."""
    sol = _tma_solution(engine, dtype, layout, line, cfg)
    assert sol.spec.tma and sol.spec.split_k == cfg.split_k
    _verify_solution(engine, sol, 29)


@pytest.mark.parametrize("cfg", CONFIGS_TMASK, ids=lambda c: "tmask-" + c.serialize())
@pytest.mark.parametrize("line", TMASK_LINES[:3])
def test_tma_split_k_blocks_walk_many_units(engine, line, cfg):
    """TMA split-K with the grid sized for a 3-SM device: every block walks many work units
    of different tiles and k-slices (the mbarrier stages wrap across units)."""
    if engine.target.wgmma:
        make_spec(_nhwc_problem("fp16", line), engine.target.with_(num_cus=3), cfg)   # valid: never a skip
    _check_on_three_sms(engine, line, cfg, 31)


STREAM_K_LINES = [
    "-n 4 -c 512 -H 7 -W 7 -k 2048 -y 1 -x 1 -p 0 -q 0",
    "-n 2 -c 256 -H 8 -W 8 -k 320 -y 3 -x 3 -p 1 -q 1",
    "-n 3 -c 264 -H 9 -W 11 -k 200 -y 1 -x 1 -p 0 -q 0",
    "-n 2 -c 64 -H 14 -W 14 -k 512 -y 1 -x 1 -p 0 -q 0 -u 2 -v 2",
    "-n 2 -c 128 -H 15 -W 9 -k 192 -y 3 -x 3 -p 2 -q 2 -l 2 -j 2",
    "-n 1 -c 64 -H 5 -W 300 -k 64 -y 1 -x 3 -p 0 -q 1",
]
CONFIGS_STREAM_K = [
    PerfConfig(128, 128, 64, 2, 1, 64, 128, split_k=1, stages=4, schedule=3, split_k_reduce=3),
    PerfConfig(128, 256, 64, 2, 1, 64, 256, split_k=1, stages=4, schedule=3, split_k_reduce=3),
    PerfConfig(64, 128, 64, 1, 1, 64, 128, split_k=-1, stages=4, schedule=3, split_k_reduce=3),
    PerfConfig(64, 64, 64, 1, 1, 64, 64, split_k=1, stages=4, schedule=3, split_k_reduce=3),
    PerfConfig(256, 128, 64, 2, 1, 128, 128, split_k=1, stages=3, schedule=3, split_k_reduce=3),
]


@pytest.mark.parametrize("cfg", CONFIGS_STREAM_K, ids=lambda c: "stream_k-" + c.serialize())
@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("line", STREAM_K_LINES)
def test_stream_k_verifies(engine, dtype, layout, line, cfg):
    """Stream-K kernels (runs of k-tiles per block, cut tiles summed in the kernel) against
    the float64 reference with NaN-poisoned dX and NaN-poisoned slots, NHWC and all-NCHW."""
    sol = _tma_solution(engine, dtype, layout, line, cfg)
    assert sol.spec.stream_k and sol.kernels[0].source.workspace_cleared
    _verify_solution(engine, sol, 37)


@pytest.mark.parametrize("cfg", CONFIGS_STREAM_K[:3], ids=lambda c: "stream_k-" + c.serialize())
@pytest.mark.parametrize("line", STREAM_K_LINES[:3])
def test_stream_k_on_three_sms(engine, line, cfg):
    """Stream-K with the grid sized for a 3-SM device: every block's run crosses many tiles,
    most tiles whole, the cut ones summed from up to two other blocks."""
    if engine.target.wgmma:
        make_spec(_nhwc_problem("fp16", line), engine.target.with_(num_cus=3), cfg)   # valid: never a skip
    _check_on_three_sms(engine, line, cfg, 41)


# Shapes for the TMA kernel. Pointwise (flat GEMM rows): GemmM, cpg and K tails
# (boxes that leave the tensor read zeros), one tile, groups, the suite's 1x1 lines at small
# N. With filter taps (dX pixel boxes): whole rows with an H tail, whole images with an N
# tail, part of a row; dilation, no padding (dY smaller than dX), a padded 1x1 filter,
# groups, a K tail, a non-square filter.
PW = "-y 1 -x 1 -p 0 -q 0"
TMA_LINES = [
    f"-n 1 -c 72 -H 5 -W 7 -k 40 {PW}",
    f"-n 3 -c 264 -H 9 -W 11 -k 200 {PW}",
    f"-n 2 -c 128 -H 7 -W 7 -k 128 -g 2 {PW}",
    f"-n 2 -c 512 -H 8 -W 8 -k 256 -g 2 {PW}",
    f"-n 2 -c 256 -H 56 -W 56 -k 64 {PW}",
    f"-n 2 -c 64 -H 56 -W 56 -k 256 {PW}",
    f"-n 2 -c 1024 -H 14 -W 14 -k 256 {PW}",
    "-n 2 -c 128 -H 16 -W 16 -k 128 -y 3 -x 3 -p 1 -q 1",
    "-n 3 -c 64 -H 7 -W 7 -k 72 -y 3 -x 3 -p 2 -q 2 -l 2 -j 2",
    "-n 2 -c 128 -H 14 -W 14 -k 128 -y 3 -x 3 -p 1 -q 1 -g 2",
    "-n 1 -c 64 -H 5 -W 300 -k 64 -y 1 -x 3 -p 0 -q 1",
    "-n 2 -c 256 -H 9 -W 9 -k 256 -y 5 -x 5 -p 0 -q 0",
    "-n 2 -c 64 -H 8 -W 8 -k 64 -y 1 -x 1 -p 1 -q 1",
    "-n 2 -c 256 -H 28 -W 28 -k 256 -y 3 -x 3 -p 1 -q 1",
    # strided: tilde sub-GEMMs of different K in one persistent launch, zero-fill blocks
    "-n 2 -c 128 -H 15 -W 15 -k 128 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2",
    "-n 2 -c 64 -H 14 -W 14 -k 64 -y 1 -x 1 -p 0 -q 0 -u 2 -v 2",
    "-n 2 -c 64 -H 17 -W 17 -k 72 -y 5 -x 5 -p 2 -q 2 -u 3 -v 3",
    "-n 2 -c 128 -H 16 -W 16 -k 128 -y 3 -x 3 -p 2 -q 2 -u 2 -v 2 -l 2 -j 2",
    "-n 1 -c 64 -H 10 -W 130 -k 64 -y 2 -x 2 -p 0 -q 0 -u 2 -v 2",
]


@pytest.mark.parametrize("cfg", [c for c in CONFIGS_WG if c.schedule == 3], ids=lambda c: c.serialize())
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("cus", [None, 3])
@pytest.mark.parametrize("line", TMA_LINES)
def test_tma_verifies(engine, line, cus, dtype, cfg):
    """wgmma=3 (producer warp + TMA boxes + mbarrier pipeline) on the device's own grid and
    on a grid sized for 3 SMs, where each block walks many tiles and the stage barriers
    wrap their phase many times; with taps the dY box is shifted per tap and TMA's zero
    fill outside dY is the padding."""
    if not engine.target.wgmma:
        pytest.skip(f"{engine.target.arch} has no warpgroup MMA")
    base = {"fp16": "convfp16", "bf16": "convbfp16"}[dtype]
    p = parse(f"{base} {line} -F 2 --in_layout NHWC --out_layout NHWC --fil_layout NHWC").problem
    target = engine.target.with_(num_cus=cus) if cus else None
    if _check(engine, p, cfg, np.random.default_rng(13), target=target) is None:
        pytest.skip("config not valid for this problem")


CONFIGS_PINGPONG = [
    PerfConfig(128, 128, 64, 1, 1, 128, 128, stages=6, schedule=20),
    PerfConfig(64, 256, 64, 1, 1, 64, 256, stages=5, schedule=20),
    PerfConfig(64, 128, 64, 1, 1, 64, 128, stages=8, schedule=20),
    PerfConfig(128, 64, 64, 1, 1, 128, 64, stages=2, schedule=20),
    PerfConfig(128, 96, 64, 1, 1, 128, 96, stages=7, schedule=20),
]


@pytest.mark.parametrize("cfg", CONFIGS_PINGPONG, ids=lambda c: "pingpong-" + c.serialize())
@pytest.mark.parametrize("cus", [None, 3])
@pytest.mark.parametrize("line", TMA_LINES)
def test_pingpong_verifies(engine, line, cus, cfg):
    """The ping-pong schedule (two warpgroups owning whole tiles in turn, turn barriers) on
    the TMA kernel's shapes, fp16, on the device's own grid and on a grid sized for 3 SMs
    (each block hands many tiles to its warpgroups in turn, the stage phases wrap across
    tiles of different k-loops), NaN-poisoned dX against the float64 reference."""
    if not engine.target.wgmma:
        pytest.skip(f"{engine.target.arch} has no warpgroup MMA")
    p = _nhwc_problem("fp16", line)
    target = engine.target.with_(num_cus=cus) if cus else None
    if _check(engine, p, cfg, np.random.default_rng(47), target=target) is None:
        pytest.skip("config not valid for this problem")


# Problems whose default is the ping-pong form of a one-warpgroup TMA tile
# (miopen_solver.heuristics.pingpong_form): a 1x1 at 64x128 (8 stages), a 1x7 and a 1x3 (TMA
# boxes of asymmetric windows), 3x3 at 128x128 (7 stages) on 20x20 and 33x33 images (row tails),
# a 7x1, a dilated 3x3 on a 24x16 image. Select with ``-k pingpong_default``.
PINGPONG_DEFAULT_LINES = [
    "-n 48 -c 128 -H 28 -W 28 -k 512 -y 1 -x 1 -p 0 -q 0 -u 1 -v 1",
    "-n 64 -c 128 -H 17 -W 17 -k 128 -y 1 -x 7 -p 0 -q 3 -u 1 -v 1",
    "-n 48 -c 384 -H 8 -W 8 -k 384 -y 1 -x 3 -p 0 -q 1 -u 1 -v 1",
    "-n 8 -c 512 -H 20 -W 20 -k 128 -y 3 -x 3 -p 1 -q 1 -u 1 -v 1",
    "-n 4 -c 256 -H 33 -W 33 -k 256 -y 3 -x 3 -p 1 -q 1 -u 1 -v 1",
    "-n 64 -c 160 -H 17 -W 17 -k 192 -y 7 -x 1 -p 3 -q 0 -u 1 -v 1",
    "-n 16 -c 144 -H 24 -W 16 -k 144 -y 3 -x 3 -p 2 -q 2 -u 1 -v 1 -l 2 -j 2",
]


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("line", PINGPONG_DEFAULT_LINES)
def test_pingpong_default_verifies(engine, dtype, line):
    """Each line's NHWC default is a ping-pong tile (on targets with warpgroup MMA) and runs
    against the float64 reference with NaN-poisoned dX; the same line in MIOpen's NCHW runs
    its own default through the whole launch plan."""
    if not engine.target.wgmma:
        pytest.skip(f"{engine.target.arch} has no warpgroup MMA")
    _default_and_nchw_verify(engine, dtype, line, lambda cfg: cfg.schedule is KernelSchedule.WGMMA_TMA_PINGPONG,
                             seed=59)


@pytest.mark.parametrize("cfg", CONFIGS_PINGPONG[:3], ids=lambda c: "pingpong-" + c.serialize())
@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
@pytest.mark.parametrize("line", TMA_LINES[4:8] + TMA_LINES[13:15])
def test_pingpong_bf16_and_nchw_verify(engine, line, layout, cfg):
    """bf16 ping-pong kernels, NHWC and all-NCHW (dY through the transform, dX stored NCHW by
    the epilogue), through the solution's whole launch plan with NaN-poisoned dX."""
    try:
        sol = _tma_solution(engine, "bf16", layout, line, cfg)
    except PerfConfigError:
        pytest.skip("config not valid for this problem")
    assert sol.spec.schedule.pingpong
    _verify_solution(engine, sol, 53)


@settings(max_examples=int(os.environ.get("DGRAD_GPU_EXAMPLES", "120")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_problems_match_reference(engine, data):
    dtype = data.draw(st.sampled_from(["fp16", "bf16", "fp32"]))
    G = data.draw(st.sampled_from([1, 1, 1, 2, 3, 4]))
    cpg = data.draw(st.integers(1, 40))
    kpg = data.draw(st.integers(1, 40))
    Y, X = data.draw(st.integers(1, 8)), data.draw(st.integers(1, 8))
    sH, sW = data.draw(st.integers(1, 5)), data.draw(st.integers(1, 5))
    dH, dW = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4))
    pH, pW = data.draw(st.integers(0, 4)), data.draw(st.integers(0, 4))
    Hi, Wi = data.draw(st.integers(1, 20)), data.draw(st.integers(1, 20))
    N = data.draw(st.integers(1, 3))
    try:
        p = ConvProblem(N=N, C=G * cpg, Hi=Hi, Wi=Wi, K=G * kpg, Y=Y, X=X, pH=pH, pW=pW, sH=sH, sW=sW,
                        dH=dH, dW=dW, G=G, dtype=dtype, in_layout="NHWC", out_layout="NHWC", fil_layout="NHWC")
    except ValueError:
        assume(False)
        return
    cfg = data.draw(st.sampled_from(CONFIGS_32 if dtype == "fp32" else CONFIGS_16 + CONFIGS_WG))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    assume(_check(engine, p, cfg, rng) is not None)


@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32"])
def test_gpu_reference_matches_float64(engine, dtype):
    p = ConvProblem(N=2, C=12, Hi=9, Wi=7, K=10, Y=3, X=2, pH=1, pW=1, sH=2, sW=1, dH=1, dW=2, G=2,
                    dtype=dtype, in_layout="NHWC", out_layout="NHWC", fil_layout="NHWC")
    dy, w = _inputs(p, np.random.default_rng(3))
    v = verify(p, engine.reference(p, dy, w), dgrad_reference(p, dy, w), tolerance=1e-5)
    assert v.ok, v


def test_second_build_hits_binary_cache(engine, tmp_path):
    from miopen_solver.runtime.cache import BinaryCache
    from miopen_solver.runtime.gpu import GpuEngine
    p = parse("convfp16 -n 1 -c 16 -H 8 -W 8 -k 16 -y 3 -x 3 -p 1 -q 1 -F 2 --in_layout NHWC "
              "--out_layout NHWC --fil_layout NHWC").problem
    spec = make_spec(p, engine.target, CONFIGS_16[1])
    first = GpuEngine(engine.rt, BinaryCache(tmp_path)).build(spec)
    second = GpuEngine(engine.rt, BinaryCache(tmp_path)).build(spec)
    assert not first.cache_hit and first.compile_ms > 0
    assert second.cache_hit and second.compile_ms == 0


# The direct schedule (depthwise and small-cpg grouped layers): the solver's default and
# every candidate of its search space on real layer shapes (cut to batch 2) and on
# edge shapes: odd channel counts, strides past the filter, dilation, asymmetric filters,
# a depthwise multiplier, no padding, C=3.
DIRECT_LINES = [
    "-n 2 -c 144 -H 56 -W 56 -k 144 -g 144 -y 3 -x 3 -p 1 -q 1",             # MobileNetV2 dw s1
    "-n 2 -c 96 -H 112 -W 112 -k 96 -g 96 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2",    # MobileNetV2 dw s2
    "-n 2 -c 240 -H 28 -W 28 -k 240 -g 240 -y 5 -x 5 -p 2 -q 2 -u 2 -v 2",   # EfficientNet 5x5 s2
    "-n 2 -c 96 -H 56 -W 56 -k 96 -g 96 -y 7 -x 7 -p 3 -q 3",                # ConvNeXt 7x7
    "-n 2 -c 128 -H 56 -W 56 -k 128 -g 32 -y 3 -x 3 -p 1 -q 1",              # ResNeXt cpg 4
    "-n 2 -c 3 -H 33 -W 31 -k 3 -g 3 -y 3 -x 3 -p 1 -q 1",                   # C=3, odd sizes
    "-n 3 -c 35 -H 17 -W 19 -k 70 -g 35 -y 4 -x 4 -p 1 -q 2 -u 3 -v 3",      # multiplier 2, stride 3
    "-n 2 -c 64 -H 20 -W 21 -k 64 -g 64 -y 3 -x 3 -p 2 -q 2 -l 2 -j 2",      # dilation 2
    "-n 2 -c 24 -H 15 -W 16 -k 24 -g 8 -y 1 -x 7 -p 0 -q 3",                 # cpg 3, 1x7
    "-n 2 -c 16 -H 9 -W 9 -k 16 -g 16 -y 2 -x 2 -u 4 -v 4",                  # stride > filter
]


@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32"])
@pytest.mark.parametrize("line", DIRECT_LINES)
def test_direct_schedule_verifies(engine, dtype, line):
    from miopen_solver.config import KernelSchedule
    from miopen_solver.solver import DgradSolver
    p = _nhwc_problem(dtype, line)
    solver, rng = DgradSolver(), np.random.default_rng(11)
    default = solver.get_default_performance_config(p, engine.target)
    cfgs = [c for c in solver.search(p, engine.target) if c.schedule is KernelSchedule.DIRECT]
    assert cfgs
    if engine.target.vendor == "nvidia":
        assert default.schedule is KernelSchedule.DIRECT and cfgs[0] == default
    for cfg in cfgs[:8]:
        assert _check(engine, p, cfg, rng) is not None


@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32"])
@pytest.mark.parametrize("line", DIRECT_LINES)
def test_direct_lean_body_verifies(engine, dtype, line):
    """The direct schedule's lean body (``vector_size_a`` 1: whole-vector dY zeroing, filter
    staged by fixed lanes) on the searched configs that take it."""
    from miopen_solver.config import KernelSchedule
    from miopen_solver.solver import DgradSolver
    p = _nhwc_problem(dtype, line)
    rng = np.random.default_rng(12)
    cfgs = [c for c in DgradSolver().search(p, engine.target)
            if c.schedule is KernelSchedule.DIRECT and c.vector_size_a == 1]
    assert cfgs
    for cfg in cfgs[:4]:
        assert _check(engine, p, cfg, rng) is not None


@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32"])
@pytest.mark.parametrize("line", DIRECT_LINES)
def test_direct_stage32_verifies(engine, dtype, line):
    """The direct schedule with dY staged in shared memory as fp32 (``lds_k_outer`` 2, kernel
    section ``stage32``) on the searched configs that take it, and the named lds32 policies."""
    from miopen_solver.config import KernelSchedule
    from miopen_solver.direct import POLICIES, is_valid_direct_config, policy_config
    from miopen_solver.solver import DgradSolver
    p = _nhwc_problem(dtype, line)
    rng = np.random.default_rng(13)
    cfgs = [c for c in DgradSolver().search(p, engine.target)
            if c.schedule is KernelSchedule.DIRECT and c.lds_k_outer == 2]
    pols = [policy_config(p, engine.target, POLICIES[n]) for n in POLICIES if "lds32" in n]
    pols = [c for c in pols if is_valid_direct_config(p, engine.target, c)[0] and c not in cfgs[:4]]
    assert cfgs
    for cfg in cfgs[:4] + pols:
        assert _check(engine, p, cfg, rng) is not None


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("line", DIRECT_LINES)
def test_direct_mma_body_verifies(engine, dtype, line):
    """The direct schedule's mma body (``vector_size_a`` 2: banded-W MMAs on tensor cores)
    on every searched tile, where it applies (depthwise, C a multiple of 8, NVIDIA)."""
    from miopen_solver.config import KernelSchedule
    from miopen_solver.direct import MMA_BODIES, mma_reason
    from miopen_solver.solver import DgradSolver
    p = _nhwc_problem(dtype, line)
    if mma_reason(p, engine.target) is not None:
        pytest.skip(mma_reason(p, engine.target))
    rng = np.random.default_rng(14)
    cfgs = [c for c in DgradSolver().search(p, engine.target)
            if c.schedule is KernelSchedule.DIRECT and c.vector_size_a in MMA_BODIES]
    assert cfgs
    assert sum(_check(engine, p, cfg, rng) is not None for cfg in cfgs) >= 1


@pytest.mark.parametrize("seed", range(int(os.environ.get("DGRAD_GPU_EXAMPLES", "12"))))
def test_direct_mma_body_random_problems(engine, seed):
    """Random depthwise problems (strides 1-5, dilations 1-4, pads, odd image sizes, fp16 and
    bf16) on a random searched mma tile, dX NaN-poisoned, against the float64 reference."""
    import random
    from miopen_solver.direct import MMA_TILES, is_valid_direct_config, mma_config, mma_reason
    R = random.Random(9000 + seed)
    while True:
        Y, X, C = R.randint(1, 7), R.randint(1, 7), 8 * R.randint(1, 12)
        try:
            p = ConvProblem(N=R.randint(1, 4), C=C, K=C, G=C, Hi=R.randint(1, 70), Wi=R.randint(1, 70), Y=Y, X=X,
                            pH=R.randint(0, Y), pW=R.randint(0, X), sH=R.randint(1, 5), sW=R.randint(1, 5),
                            dH=R.randint(1, 4), dW=R.randint(1, 4), dtype=R.choice(["fp16", "bf16"]),
                            in_layout="NHWC", out_layout="NHWC", fil_layout="NHWC")
        except ValueError:
            continue
        if mma_reason(p, engine.target) is None:
            break
        if engine.target.vendor != "nvidia":
            pytest.skip(mma_reason(p, engine.target))
    tiles = [t for t in MMA_TILES if is_valid_direct_config(p, engine.target, mma_config(*t))[0]]
    assert tiles
    cfg = mma_config(*R.choice(tiles), persistent=R.random() < 0.5)
    # persistent blocks sized for a 1-3 SM device: every block walks many tiles, across phases
    target = engine.target.with_(num_cus=R.randint(1, 3)) if cfg.vector_size_a == 3 else None
    assert _check(engine, p, cfg, np.random.default_rng(seed), target=target) is not None


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("line", DIRECT_LINES)
def test_direct_mma_persistent_blocks_walk_many_tiles(engine, dtype, line):
    """The mma body on persistent blocks (``vector_size_a`` 3) with the grid sized for a
    3-SM device: each block walks many dX tiles (and the W phases of strided lines, building
    its band table again for each), NaN-poisoned dX against the float64 reference."""
    from miopen_solver.direct import MMA_TILES, is_valid_direct_config, mma_config, mma_reason
    p = _nhwc_problem(dtype, line)
    if mma_reason(p, engine.target) is not None:
        pytest.skip(mma_reason(p, engine.target))
    small = engine.target.with_(num_cus=3)
    cfgs = [mma_config(*t, persistent=True) for t in MMA_TILES]
    cfgs = [c for c in cfgs if is_valid_direct_config(p, small, c)[0]]
    assert cfgs
    for i, cfg in enumerate(cfgs[:3]):
        assert _check(engine, p, cfg, np.random.default_rng(40 + i), target=small) is not None


@pytest.mark.parametrize("lay", [("NCHW", "NCHW", "NCHW"), ("NHWC", "NCHW", "NCHW"), ("NCHW", "NHWC", "NHWC")])
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("line", DIRECT_LINES)
def test_direct_nchw_verifies(engine, dtype, line, lay):
    """``DIRECT_NCHW`` (the mma body reading dY and writing dX in their own layouts, no
    transform) on every searched tile, where it applies."""
    from miopen_solver.config import KernelSchedule
    from miopen_solver.direct import mma_reason
    from miopen_solver.solver import DgradSolver
    p = _nhwc_problem(dtype, line).replace(in_layout=lay[0], out_layout=lay[1], fil_layout=lay[2])
    if mma_reason(p, engine.target, native=True) is not None:
        pytest.skip(mma_reason(p, engine.target, native=True))
    solver = DgradSolver()
    cfgs = [c for c in solver.search(p, engine.target) if c.schedule is KernelSchedule.DIRECT_NCHW]
    assert cfgs
    for i, cfg in enumerate(cfgs):
        if solver.is_valid_performance_config(p, engine.target, cfg)[0]:
            _verify_solution(engine, solver.get_solution(p, engine.target, cfg), seed=15 + i)   # inputs in p's layouts


@pytest.mark.parametrize("fil", ["NCHW", "NHWC"])
@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32"])
@pytest.mark.parametrize("line", DIRECT_LINES)
def test_direct_plane_verifies(engine, dtype, line, fil):
    """``DIRECT_PLANE`` (NCHW dY and dX in place, W in either order) on its default and the
    first searched configs, where it applies."""
    from miopen_solver.direct_plane import plane_reason
    from miopen_solver.solver import DgradSolver
    p = _nhwc_problem(dtype, line).replace(in_layout="NCHW", out_layout="NCHW", fil_layout=fil)
    if plane_reason(p, engine.target) is not None:
        pytest.skip(plane_reason(p, engine.target))
    solver = DgradSolver()
    cfgs = [c for c in solver.search(p, engine.target) if c.schedule is KernelSchedule.DIRECT_PLANE]
    assert cfgs
    checked = 0
    for i, cfg in enumerate(cfgs[:6]):
        if solver.is_valid_performance_config(p, engine.target, cfg)[0]:
            _verify_solution(engine, solver.get_solution(p, engine.target, cfg), seed=25 + i)
            checked += 1
    assert checked >= 1


@pytest.mark.parametrize("line", ["convfp16 -n 64 -c 960 -H 7 -W 7 -k 960 -y 3 -x 3 -p 1 -q 1 -g 960",
                                  "convbfp16 -n 65 -c 577 -H 14 -W 13 -k 577 -y 5 -x 5 -p 2 -q 2 -u 2 -v 2 -g 577",
                                  "conv -n 64 -c 250 -H 9 -W 9 -k 250 -y 7 -x 7 -p 3 -q 3 -g 250"])
def test_direct_plane_persistent_blocks_walk_many_plane_blocks(engine, line):
    """Whole planes on persistent blocks (``stages`` 2): grids of fewer blocks than blocks of
    planes, each block walking several with the next one's loads in flight, the last partial."""
    from miopen_solver.solver import DgradSolver
    p = parse(f"{line} -F 2").problem
    solver = DgradSolver()
    cfg = solver.get_default_performance_config(p, engine.target).replace(stages=2)
    sol = solver.get_solution(p, engine.target, cfg)
    assert sol.spec.persistent_blocks and sol.spec.pblocks > sol.spec.persistent_blocks
    _verify_solution(engine, sol, seed=31)


@pytest.mark.parametrize("seed", range(int(os.environ.get("DGRAD_GPU_EXAMPLES", "12"))))
def test_direct_plane_random_problems(engine, seed):
    """Random depthwise and small-cpg problems in NCHW (strides 1-5, dilations 1-4, pads, odd
    sizes and channel counts, multipliers, fp16/bf16/fp32) on a random searched plane config,
    dX NaN-poisoned, against the float64 reference."""
    import random
    from miopen_solver.direct_plane import plane_reason
    from miopen_solver.solver import DgradSolver
    R = random.Random(9500 + seed)
    while True:
        Y, X, G = R.randint(1, 7), R.randint(1, 7), R.randint(1, 40)
        cpg, kpg = R.choice([1, 1, 1, 2, 3, 4, 8]), R.choice([1, 1, 2, 3])
        try:
            p = ConvProblem(N=R.randint(1, 4), C=G * cpg, K=G * kpg, G=G, Hi=R.randint(1, 70), Wi=R.randint(1, 70),
                            Y=Y, X=X, pH=R.randint(0, Y), pW=R.randint(0, X), sH=R.randint(1, 5), sW=R.randint(1, 5),
                            dH=R.randint(1, 4), dW=R.randint(1, 4), dtype=R.choice(["fp16", "bf16", "fp32"]),
                            in_layout="NCHW", out_layout="NCHW", fil_layout=R.choice(["NCHW", "NHWC"]))
        except ValueError:
            continue
        if plane_reason(p, engine.target) is None:
            break
    solver = DgradSolver()
    cfgs = [c for c in solver.search(p, engine.target) if c.schedule is KernelSchedule.DIRECT_PLANE
            and solver.is_valid_performance_config(p, engine.target, c)[0]]
    assert cfgs
    _verify_solution(engine, solver.get_solution(p, engine.target, R.choice(cfgs)), seed=seed)


# ------------------------------------------------------------------ split-N (issue 16)
SPLIT_LINES = [   # (line, config or None for the default): 3 launches of 2 images each, forced
    ("convfp16 -n 6 -c 64 -H 28 -W 28 -k 64 -y 3 -x 3 -p 1 -q 1", None),
    ("convfp16 -n 6 -c 64 -H 28 -W 28 -k 64 -y 3 -x 3 -p 1 -q 1", "64,64,32,2,2,32,32,0,0,0,3,-1,2"),   # split-K
    ("convfp16 -n 6 -c 256 -H 9 -W 9 -k 128 -y 1 -x 1", "128,256,64,2,1,64,256,0,0,0,1,-1,4,3"),       # TMA
    ("convfp16 -n 6 -c 128 -H 40 -W 40 -k 128 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2", "128,128,64,2,1,64,128,0,0,0,1,-1,4,1"),
    ("conv -n 6 -c 32 -H 12 -W 12 -k 32 -y 3 -x 3 -p 1 -q 1 -g 32", None),      # direct on sm_90
    ("convbfp16 -n 9 -c 48 -H 10 -W 10 -k 32 -y 1 -x 1 -u 2 -v 2", None),       # zero-fill blocks, 3 x 3
]


@pytest.mark.parametrize("line,cfg", SPLIT_LINES)
def test_split_n_forced_chunks_verify(engine, monkeypatch, line, cfg):
    """The 2^31-1 limit lowered to two (three) images: three launches of one kernel with
    offset pointers, checked against the float64 reference (MIOpen's split-N was wrong past
    two chunks, rocm-libraries #10627); timed plainly and through one graph."""
    from miopen_solver import applicability as ap
    from miopen_solver.solver import DgradSolver
    p = parse(f"{line} -F 2 --in_layout NHWC --out_layout NHWC --fil_layout NHWC".split()).problem
    per_image = max(p.dy_elems, p.dx_elems) // p.N * p.elem_bytes
    monkeypatch.setattr(ap, "TENSOR_BYTES_LIMIT", (p.N // 3) * per_image)
    try:
        sol = DgradSolver().find_solution(p, engine.target, perf_config=cfg)
    except PerfConfigError as e:
        pytest.skip(f"{cfg} not valid on {engine.target.arch}: {e}")
    assert sol.n_chunks == 3
    _verify_and_time(engine, sol, seed=11)


# NCHW and mixed layouts (issue 16): the user's bytes are uploaded as they lie, transposed
# into the workspace by the transpose kernel, and dX is transposed back; the default
# solution of each problem, checked against the float64 reference with NaN-poisoned dX
# (and workspace).
NCHW_LINES = [
    "-n 2 -c 64 -H 28 -W 28 -k 128 -y 3 -x 3 -p 1 -q 1",                 # ResNet 3x3
    "-n 3 -c 256 -H 14 -W 14 -k 64 -y 1 -x 1",                            # 1x1 (W is KYXC already)
    "-n 2 -c 96 -H 17 -W 15 -k 40 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2",         # strided, odd sizes
    "-n 2 -c 66 -H 9 -W 11 -k 33 -y 1 -x 7 -p 0 -q 3",                    # 1x7, odd channels
    "-n 2 -c 64 -H 20 -W 20 -k 64 -y 3 -x 3 -p 1 -q 1 -g 64",             # depthwise (direct on sm_90)
    "-n 2 -c 128 -H 12 -W 12 -k 128 -y 3 -x 3 -p 1 -q 1 -g 32",           # grouped cpg 4
    "-n 70 -c 3 -H 8 -W 8 -k 5 -y 3 -x 3 -p 1 -q 1",                      # C=3: transposes of 3-wide rows
]
NCHW_COMBOS = [("NCHW", "NCHW", "NCHW"), ("NCHW", "NHWC", "NCHW"), ("NHWC", "NCHW", "NHWC"),
               ("NHWC", "NHWC", "NCHW")]     # (in, out, fil)


@pytest.mark.parametrize("combo", NCHW_COMBOS, ids=lambda c: "-".join(c))
@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32"])
@pytest.mark.parametrize("line", NCHW_LINES)
def test_nchw_and_mixed_layouts_verify(engine, line, dtype, combo):
    from miopen_solver.solver import DgradSolver
    base = {"fp16": "convfp16", "bf16": "convbfp16", "fp32": "conv"}[dtype]
    p = parse(f"{base} {line} -F 2 --in_layout {combo[0]} --out_layout {combo[1]} "
              f"--fil_layout {combo[2]}".split()).problem
    sol = DgradSolver().find_solution(p, engine.target)
    dy, w = _verify_solution(engine, sol)
    assert len(engine.time_graph(sol, dy, w, launches=2, replays=2).times_ms) == 2


def _verify_and_time(engine, sol, seed):
    """:func:`_verify_solution`, then two plain timed runs and a two-launch graph (every
    chunk and transform of a run in each)."""
    dy, w = _verify_solution(engine, sol, seed)
    assert len(engine.time(sol, dy, w, iters=2).times_ms) == 2
    assert len(engine.time_graph(sol, dy, w, launches=2, replays=2).times_ms) == 2


def _verify_solution(engine, sol, seed=17):
    """One run of ``sol`` on random inputs in the problem's layouts (dX NaN-poisoned by the
    engine) checked against the float64 reference; returns the inputs ``(dy, w)``."""
    from miopen_solver import layouts
    p = sol.problem
    rng = np.random.default_rng(seed)
    dt = storage_dtype(p.dtype)
    dy = rng.uniform(-1, 1, layouts.dy_shape(p)).astype(dt)
    w = rng.uniform(-1, 1, layouts.w_shape(p)).astype(dt)
    v = verify(p, engine.run(sol, dy, w), dgrad_reference(p, dy, w))
    assert v.nonfinite == 0, f"{v.nonfinite} dX elements never written by {sol.kernel_name}"
    assert v.ok, (sol.kernel_name, v)
    return dy, w


# Runs of several launches (programmatic dependent launch on sm_90: each launch after the
# first overlaps the one before it): the layout transforms, the split-K reduction, the
# sub-pixel W pack, the NCHW pointwise W^T -- plain and from a graph of three runs.
PDL_LINES = [   # (line, config or None for the default)
    ("convfp16 -n 4 -c 64 -H 28 -W 28 -k 128 -y 3 -x 3 -p 1 -q 1 -F 2", None),                   # dY+W pair
    ("convfp16 -n 4 -c 96 -H 17 -W 15 -k 40 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 -F 2", None),          # + dX
    ("convbfp16 -n 4 -c 256 -H 14 -W 14 -k 128 -y 1 -x 1 -F 2", None),                            # W^T
    ("convfp16 -n 2 -c 64 -H 7 -W 7 -k 256 -y 3 -x 3 -p 1 -q 1 -F 2", "64,64,64,1,1,64,64,0,0,0,3,-1,3,1,2"),
    ("convfp16 -n 2 -c 64 -H 14 -W 14 -k 64 -y 3 -x 3 -p 1 -q 1 -F 2 --in_layout NHWC --out_layout NHWC "
     "--fil_layout NHWC", "64,64,64,1,1,64,64,0,0,0,4,-1,3,1,2"),                                 # reduction
    ("convfp16 -n 4 -c 64 -H 40 -W 40 -k 64 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 -F 2 --in_layout NHWC "
     "--out_layout NHWC --fil_layout NHWC", "128,128,64,2,1,64,128,0,0,0,1,-1,4,16"),              # W' pack
    ("convbfp16 -n 4 -c 64 -H 40 -W 40 -k 64 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 -F 2 --in_layout NHWC "
     "--out_layout NHWC --fil_layout NHWC", "128,128,64,2,1,64,128,0,0,0,1,-1,4,17"),             # W', TMA
]


@pytest.mark.parametrize("line,cfg", PDL_LINES)
def test_overlapped_launches_verify_plain_and_in_a_graph(engine, line, cfg):
    from miopen_solver.solver import DgradSolver
    try:
        sol = DgradSolver().find_solution(parse(line).problem, engine.target, perf_config=cfg)
    except PerfConfigError as e:
        pytest.skip(f"{cfg} not valid on {engine.target.arch}: {e}")
    dy, w = _verify_solution(engine, sol, seed=23)
    p = sol.problem
    v = verify(p, engine.run(sol, dy, w, graph_runs=3), dgrad_reference(p, dy, w))
    assert v.nonfinite == 0 and v.ok, (sol.kernel_name, v)


@pytest.mark.parametrize("form", ["tile", "band"])
@pytest.mark.parametrize("eb", [2, 4])
@pytest.mark.parametrize("batch,rows,cols", [(1, 64, 64), (3, 128, 192), (2, 65, 63), (5, 1, 7), (4, 7, 1),
                                             (2, 300, 17), (70000, 3, 5), (1, 2, 4096 * 3), (32, 512, 49),
                                             (512, 512, 9), (300, 64, 9), (3, 136, 49), (32, 49, 2048),
                                             (3, 49, 1001), (2, 196, 520), (512, 512, 2), (384, 384, 4)])
def test_transpose_kernel_is_bit_exact(engine, eb, batch, rows, cols, form):
    """Each transpose form alone on random bits (the band form where it takes the shape):
    whole and partial tiles and bands, whole matrices to a block, odd and even row lengths
    (16-byte, 4-byte and scalar paths), more than 65535 matrices (grid y strided)."""
    from miopen_solver.transpose import LayoutTransform
    try:
        t = LayoutTransform("dY", "NCHW", "NHWC", batch, rows, cols, eb, 0, form=form)
    except ValueError:
        pytest.skip(f"the {form} form does not take {rows} x {cols}")
    k = engine.load(t.emit(engine.rt.vendor, engine.target.arch))
    rng = np.random.default_rng(batch * rows + cols)
    a = rng.integers(0, 1 << (8 * eb), size=batch * rows * cols, dtype=np.uint64).astype(f"u{eb}")
    out = np.empty_like(a)
    src, dst = engine.rt.alloc(a.nbytes), engine.rt.alloc(a.nbytes)
    try:
        engine.rt.copy_to_device(src, a)
        engine.rt.memset(dst, 0xFF, a.nbytes)
        engine.rt.launch(k.func, t.grid, t.block, 0, (src, dst, batch, rows, cols))
        engine.rt.synchronize()
        engine.rt.copy_to_host(out, dst)
    finally:
        engine.rt.free(src)
        engine.rt.free(dst)
    assert np.array_equal(out, a.reshape(batch, rows, cols).transpose(0, 2, 1).reshape(-1))


@pytest.mark.parametrize("eb", [2, 4])
@pytest.mark.parametrize("shapes", [((2, 40, 3136), (16, 8, 9)), ((70, 64, 9), (2, 65, 63)), ((2, 65, 63), (1, 64, 64)),
                                    ((5, 3, 9), (4, 300, 17)), ((2, 512, 49), (3, 7, 1)), ((70000, 3, 64), (512, 512, 9)),
                                    ((32, 256, 3136), (256, 256, 9))],
                         ids=lambda s: "+".join("x".join(map(str, x)) for x in s))
def test_transpose_pair_kernel_is_bit_exact(engine, eb, shapes):
    """Two transforms in one launch of the pair kernel (dY's and W's before the kernel), each
    in the form its shape takes: both outputs exactly their transposed inputs, every element
    written (a poisoned buffer), nothing past them (the gap between them keeps its poison);
    more than 65535 matrices (grid y strided inside a job)."""
    from miopen_solver.transpose import LayoutTransform, TransposeLaunch
    rng = np.random.default_rng(sum(map(sum, shapes)))
    ts, arrays, offset = [], [], 0
    for tensor, (batch, rows, cols) in zip(("dY", "W"), shapes):
        ts.append(LayoutTransform(tensor, "NCHW", "NHWC", batch, rows, cols, eb, offset))
        arrays.append(rng.integers(0, 1 << (8 * eb), size=batch * rows * cols, dtype=np.uint64).astype(f"u{eb}"))
        offset += -(-ts[-1].nbytes // 256) * 256 + 256
    launch = TransposeLaunch(tuple(ts))
    k = engine.load(launch.emit(engine.rt.vendor, engine.target.arch))
    srcs = [engine.rt.alloc(a.nbytes) for a in arrays]
    dst = engine.rt.alloc(offset)
    out = np.empty(offset, dtype=np.uint8)
    try:
        for p_, a in zip(srcs, arrays):
            engine.rt.copy_to_device(p_, a)
        engine.rt.memset(dst, 0xFF, offset)
        engine.rt.launch(k.func, launch.grid, launch.block, 0, launch.args([(s_, dst + t.offset) for s_, t in zip(srcs, ts)]))
        engine.rt.synchronize()
        engine.rt.copy_to_host(out, dst)
    finally:
        for p_ in srcs + [dst]:
            engine.rt.free(p_)
    for t, a in zip(ts, arrays):
        got = out[t.offset:t.offset + t.nbytes].view(f"u{eb}")
        assert np.array_equal(got, a.reshape(t.batch, t.rows, t.cols).transpose(0, 2, 1).reshape(-1)), t.kernel_form
        end = -(-(t.offset + t.nbytes) // 256) * 256 + 256
        assert (out[t.offset + t.nbytes:end] == 0xFF).all(), "a pair job wrote past its output"


# ------------------------------------------------------------------ patch GEMM (issue 14)
# Stride = filter, no padding: the default (the patch GEMM on sm_80/sm_90), every main
# loop's candidate tiles, and random patch problems: odd cpg, H/W not multiples of the
# stride (uncovered border rows/columns must be zeros: dX is NaN-poisoned), groups.
PATCH_LINES = [
    "-n 2 -c 3 -H 224 -W 224 -k 768 -y 16 -x 16 -u 16 -v 16",      # ViT-B/16
    "-n 2 -c 3 -H 224 -W 224 -k 1024 -y 14 -x 14 -u 14 -v 14",     # ViT-L/14
    "-n 2 -c 3 -H 226 -W 223 -k 96 -y 4 -x 4 -u 4 -v 4",           # ConvNeXt stem, borders
    "-n 2 -c 96 -H 56 -W 56 -k 192 -y 2 -x 2 -u 2 -v 2",           # downsampling
    "-n 2 -c 5 -H 31 -W 17 -k 40 -y 3 -x 5 -u 3 -v 5",             # odd cpg, non-square
    "-n 3 -c 12 -H 11 -W 13 -k 24 -y 2 -x 2 -u 2 -v 2 -g 3",       # groups, odd H/W
]
PATCH_CONFIGS = [
    "128,128,64,2,1,64,128,0,0,0,1,-1,4,6",
    "128,256,64,2,1,64,256,0,0,0,1,-1,4,6",
    "64,64,64,1,1,64,64,0,0,0,1,-1,2,6",
    "128,64,32,2,2,64,32,0,0,0,1,-1,3,5",
    "64,32,16,2,1,32,32,0,0,0,1,0,2,5",
    "64,64,16,2,2,32,32,0,0,0,1,-1,3,5",
]


@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32"])
@pytest.mark.parametrize("line", PATCH_LINES)
def test_patch_gemm_verifies(engine, dtype, line):
    p = _nhwc_problem(dtype, line)
    default = _default_then_configs_verify(engine, p, PATCH_CONFIGS, seed=17)
    assert default.schedule.patch or not (engine.target.vendor == "nvidia" and p.kpg > 8)


def _default_then_configs_verify(engine, p, configs, seed):
    """The default of ``p`` verifies, and so does at least one of ``configs`` (those the
    problem takes); returns the default config."""
    from miopen_solver.solver import DgradSolver
    default = DgradSolver().get_default_performance_config(p, engine.target)
    rng = np.random.default_rng(seed)
    assert _check(engine, p, default, rng) is not None
    assert [c for c in configs if _check(engine, p, PerfConfig.parse(c), rng) is not None]
    return default


@settings(max_examples=int(os.environ.get("DGRAD_GPU_EXAMPLES", "120")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_patch_problems_match_reference(engine, data):
    dtype = data.draw(st.sampled_from(["fp16", "bf16", "fp32"]))
    G = data.draw(st.sampled_from([1, 1, 1, 2, 3]))
    cpg, kpg = data.draw(st.integers(1, 24)), data.draw(st.integers(1, 80))
    Y = data.draw(st.sampled_from([1, 2, 3, 4, 5, 14, 16]))
    X = data.draw(st.sampled_from([2, 3, 4, 5, 14, 16] if Y == 1 else [1, Y, Y, 2, 4]))
    Hi = Y * data.draw(st.integers(1, 6)) + data.draw(st.integers(0, Y - 1))
    Wi = X * data.draw(st.integers(1, 6)) + data.draw(st.integers(0, X - 1))
    N = data.draw(st.integers(1, 3))
    p = ConvProblem(N=N, C=G * cpg, Hi=Hi, Wi=Wi, K=G * kpg, Y=Y, X=X, sH=Y, sW=X, G=G, dtype=dtype,
                    in_layout="NHWC", out_layout="NHWC", fil_layout="NHWC")
    cfg = PerfConfig.parse(data.draw(st.sampled_from(PATCH_CONFIGS)))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    assume(_check(engine, p, cfg, rng) is not None)


# ------------------------------------------------------------------ sub-pixel GEMM (issue 15)
# Strided problems as one stride-1 GEMM over dY whose columns are the stride phases x
# channels (miopen_solver.subpixel): W' packed on the device first, the phase-scattering
# epilogue on every main loop; dX NaN-poisoned (rows/columns of the last phase past Hi/Wi,
# uncovered rows zeroed by the memset), against float64.
SUBPIXEL_LINES = [
    "-n 2 -c 32 -H 64 -W 64 -k 64 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2",        # YOLOv5s stem shape
    "-n 2 -c 640 -H 32 -W 32 -k 640 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2",      # SD1.5 downsampler
    "-n 2 -c 288 -H 35 -W 35 -k 384 -y 3 -x 3 -u 2 -v 2",                # Inception Mixed_6a (pad 0, odd H)
    "-n 2 -c 64 -H 29 -W 30 -k 128 -y 5 -x 5 -p 2 -q 2 -u 2 -v 2",       # 5x5/s2, odd H
    "-n 2 -c 64 -H 20 -W 17 -k 64 -y 3 -x 3 -p 1 -q 0 -u 3 -v 2",        # stride 3x2: uncovered rows
    "-n 2 -c 128 -H 28 -W 28 -k 128 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 -g 2", # groups
]
SUBPIXEL_CONFIGS = [
    "128,128,64,2,1,64,128,0,0,0,1,-1,4,17",
    "256,128,64,2,1,128,128,0,0,0,1,-1,4,17",
    "128,256,64,2,1,64,256,0,0,0,1,-1,4,17",
    "128,64,64,2,1,64,64,0,0,0,1,-1,4,17",
    "128,128,64,2,1,64,128,0,0,0,1,-1,4,16",
    "64,64,64,1,1,64,64,0,0,0,1,-1,3,16",
    "128,64,32,2,2,64,32,0,0,0,1,-1,3,15",
    "64,32,16,2,1,32,32,0,0,0,1,0,2,15",
]


@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32"])
@pytest.mark.parametrize("line", SUBPIXEL_LINES)
def test_subpixel_gemm_verifies(engine, dtype, line):
    p = _nhwc_problem(dtype, line)
    rng = np.random.default_rng(23)
    ran = [c for c in SUBPIXEL_CONFIGS if _check(engine, p, PerfConfig.parse(c), rng) is not None]
    assert ran, "some sub-pixel config serves the line"


PINGPONG_TILES = ["128,128,64,1,1,128,128,0,0,0,1,-1,7", "64,128,64,1,1,64,128,0,0,0,1,-1,8",
                  "128,64,64,1,1,128,64,0,0,0,1,-1,8", "64,256,64,1,1,64,256,0,0,0,1,-1,5"]
"""One-warpgroup tiles at their deepest stages, for the families on the ping-pong main loop."""


@pytest.mark.parametrize("dtype,cus", [("fp16", None), ("fp16", 3), ("bf16", 3)])
@pytest.mark.parametrize("schedule,line", [(21, ln) for ln in PATCH_LINES] + [(22, ln) for ln in SUBPIXEL_LINES])
def test_patch_and_subpixel_pingpong_verify(engine, dtype, schedule, line, cus):
    """The patch (21) and sub-pixel (22) GEMMs on the ping-pong main loop: every tile the line
    takes on a grid of 3 blocks whose two warpgroups take several tiles each, two of them on
    the device's grid; NaN-poisoned dX against float64. The patch lines whose rows are not whole
    16-byte chunks are refused by every TMA form (ViT-L/14, the ConvNeXt stem, odd cpg)."""
    if not engine.target.wgmma:
        pytest.skip(f"{engine.target.arch} has no warpgroup MMA")
    from miopen_solver.patch import store_run
    p = _nhwc_problem(dtype, line)
    target = engine.target.with_(num_cus=cus) if cus else None
    rng = np.random.default_rng(61)
    ran = [t for t in (PINGPONG_TILES if cus else PINGPONG_TILES[:2]) if _check(engine, p, PerfConfig.parse(f"{t},{schedule}"), rng, target) is not None]
    if schedule == 21 and store_run(p) % 8:
        assert not ran
        pytest.skip("patch rows are not whole 16-byte chunks (the TMA forms refuse them)")
    assert ran, f"no ping-pong config of schedule {schedule} took {line}"


SUBPIXEL_DEFAULT_LINES = [   # 32-channel strided layers whose default is the sub-pixel GEMM
    "-n 2 -c 32 -H 320 -W 320 -k 64 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2",      # YOLOv5s stem
    "-n 2 -c 32 -H 417 -W 415 -k 64 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2",      # odd sizes
    "-n 3 -c 32 -H 160 -W 160 -k 96 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2",
]


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("line", SUBPIXEL_DEFAULT_LINES)
def test_subpixel_default_verifies(engine, dtype, line):
    from miopen_solver.solver import DgradSolver
    p = _nhwc_problem(dtype, line)
    default = DgradSolver().get_default_performance_config(p, engine.target)
    if engine.target.wgmma:
        assert default.schedule.subpixel, default
    assert _check(engine, p, default, np.random.default_rng(29)) is not None


@settings(max_examples=int(os.environ.get("DGRAD_GPU_EXAMPLES", "120")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_subpixel_problems_match_reference(engine, data):
    dtype = data.draw(st.sampled_from(["fp16", "bf16", "fp32"]))
    G = data.draw(st.sampled_from([1, 1, 1, 2]))
    cpg = data.draw(st.sampled_from([8, 16, 24, 32, 40, 64, 5, 12]))
    kpg = data.draw(st.sampled_from([16, 32, 64, 72, 128]))
    sH, sW = data.draw(st.sampled_from([(2, 2), (2, 2), (3, 3), (2, 1), (4, 4), (5, 5)]))
    Y = data.draw(st.integers(sH, sH + 4))
    X = data.draw(st.integers(sW, sW + 4))
    pH, pW = data.draw(st.integers(0, Y - 1)), data.draw(st.integers(0, X - 1))
    Hi, Wi = data.draw(st.integers(Y, 40)), data.draw(st.integers(X, 40))
    p = ConvProblem(N=data.draw(st.integers(1, 3)), C=G * cpg, Hi=Hi, Wi=Wi, K=G * kpg, Y=Y, X=X, pH=pH, pW=pW,
                    sH=sH, sW=sW, G=G, dtype=dtype, in_layout="NHWC", out_layout="NHWC", fil_layout="NHWC")
    cfg = PerfConfig.parse(data.draw(st.sampled_from(SUBPIXEL_CONFIGS)))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    assume(_check(engine, p, cfg, rng) is not None)


# ------------------------------------------------------------------ group packing
# Narrow groups packed into one tile with a block-diagonal W (miopen_solver.group_pack):
# the default of ResNeXt-like grouped layers, every main loop's packed tiles, random packed
# problems (strides, 1x1, odd sizes, NCHW), dX NaN-poisoned, against float64.
PACK_LINES = [
    "-n 2 -c 256 -H 28 -W 28 -k 256 -y 3 -x 3 -p 1 -q 1 -g 32",               # cpg 8 (the suite's grp32)
    "-n 2 -c 256 -H 56 -W 56 -k 256 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 -g 32",     # cpg 8, stride 2
    "-n 2 -c 512 -H 14 -W 14 -k 512 -y 3 -x 3 -p 1 -q 1 -g 32",               # cpg 16
    "-n 2 -c 1024 -H 7 -W 7 -k 1024 -y 3 -x 3 -p 1 -q 1 -g 32",               # cpg 32
    "-n 3 -c 64 -H 9 -W 11 -k 64 -y 1 -x 1 -g 8",                             # 1x1, odd sizes
]
PACK_CONFIGS = ["128,64,64,2,1,64,64,0,0,0,1,-1,4,12", "128,64,32,2,2,64,32,0,0,0,1,-1,4,11",
                "64,32,32,2,1,32,32,0,0,0,1,-1,3,11", "128,128,64,1,1,128,128,0,0,0,1,-1,3,12",
                "64,16,16,2,1,32,16,0,0,0,1,0,2,11"]


@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32"])
@pytest.mark.parametrize("line", PACK_LINES)
def test_group_pack_verifies(engine, dtype, line):
    p = _nhwc_problem(dtype, line)
    default = _default_then_configs_verify(engine, p, PACK_CONFIGS, seed=23)
    assert default.schedule.group_pack is (dtype != "fp32")      # FFMA keeps the dense rules


@pytest.mark.parametrize("combo", [("NCHW", "NCHW", "NCHW"), ("NCHW", "NHWC", "NCHW")])
def test_group_pack_default_in_nchw_verifies(engine, combo):
    """An NCHW grouped line on its default: the packed kernel stores dX NCHW itself at stride
    1, through the dX transform at stride 2."""
    from miopen_solver.solver import DgradSolver
    for line in PACK_LINES[:2]:
        p = parse(f"convfp16 {line} -F 2 --in_layout {combo[0]} --out_layout {combo[1]} "
                  f"--fil_layout {combo[2]}").problem
        sol = DgradSolver().find_solution(p, engine.target)
        assert sol.schedule.group_pack
        _verify_and_time(engine, sol, seed=31)


@settings(max_examples=int(os.environ.get("DGRAD_GPU_EXAMPLES", "120")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_group_pack_problems_match_reference(engine, data):
    dtype = data.draw(st.sampled_from(["fp16", "bf16", "fp32"]))
    cpg, kpg = data.draw(st.sampled_from([2, 4, 8, 16, 32])), data.draw(st.sampled_from([4, 8, 16, 24, 32]))
    cfg = PerfConfig.parse(data.draw(st.sampled_from(PACK_CONFIGS)))
    if cfg.tile_n % cpg or cfg.tile_n < 2 * cpg:
        cpg = cfg.tile_n // 2
    G = cfg.tile_n // cpg * data.draw(st.integers(1, 3))
    Y, X = data.draw(st.sampled_from([(1, 1), (3, 3), (5, 5), (1, 7), (3, 1)]))
    s = data.draw(st.sampled_from([1, 1, 2]))
    p = ConvProblem(N=data.draw(st.integers(1, 3)), C=G * cpg, Hi=data.draw(st.integers(3, 19)),
                    Wi=data.draw(st.integers(3, 19)), K=G * kpg, Y=Y, X=X, pH=Y // 2, pW=X // 2, sH=s, sW=s, G=G,
                    dtype=dtype, in_layout="NHWC", out_layout="NHWC", fil_layout="NHWC")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    assume(_check(engine, p, cfg, rng) is not None)


# ------------------------------------------------------------------ NCHW dX from the epilogue
# The warp-MMA, wgmma and persistent wgmma kernels store an NCHW dX themselves
# (transpose.nchw_dx_rule): no dX transform; NaN-poisoned dX, odd sizes, split-K (16-bit
# pair atomics where Hi*Wi is even, the dX transform where it is odd), zero-fill blocks.
NCHW_DX_LINES = [
    "-n 2 -c 64 -H 28 -W 28 -k 128 -y 3 -x 3 -p 1 -q 1",                 # ResNet 3x3
    "-n 3 -c 72 -H 13 -W 11 -k 40 -y 1 -x 1",                             # pointwise, odd planes
    "-n 2 -c 96 -H 17 -W 15 -k 40 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2",         # strided, odd sizes
    "-n 2 -c 64 -H 16 -W 14 -k 64 -y 3 -x 3 -p 1 -q 1",                   # even planes (16-bit split-K)
    "-n 2 -c 256 -H 14 -W 14 -k 128 -y 1 -x 1 -u 2 -v 2",                 # 1x1 stride 2: zero-fill blocks
    "-n 2 -c 48 -H 13 -W 13 -k 32 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 -l 2 -j 2",   # gcd(s, d) = 2: zero-fill blocks
    "-n 2 -c 128 -H 12 -W 12 -k 128 -y 3 -x 3 -p 1 -q 1 -g 32",           # grouped, cpg 4
    "-n 2 -c 66 -H 9 -W 11 -k 34 -y 1 -x 7 -p 0 -q 3",                    # 1x7, odd planes
]
NCHW_DX_CONFIGS = [None, "128,64,32,2,2,64,32,0,0,0,1,-1,3", "64,64,32,2,2,32,32,0,0,0,3,-1,2",
                   "32,32,16,1,1,32,32,0,0,0,1,-1,1",
                   "128,128,64,2,1,64,128,0,0,0,1,-1,3,1", "128,128,64,2,1,64,128,0,0,0,2,-1,3,1",
                   "128,256,64,2,1,64,256,0,0,0,1,-1,3,2"]
NCHW_DX_FP32 = {"128,64,32,2,2,64,32,0,0,0,1,-1,3": "64,64,16,2,2,32,32,0,0,0,1,-1,3",
                "64,64,32,2,2,32,32,0,0,0,3,-1,2": "64,64,16,2,2,32,32,0,0,0,3,-1,2",
                "32,32,16,1,1,32,32,0,0,0,1,-1,1": "32,32,8,1,1,32,32,0,0,0,1,-1,1"}


def _nchw_dx_solution(engine, line, dtype, combo, cfg):
    from miopen_solver.solver import DgradSolver
    p = parse(f"{BASE_OF[dtype]} {line} -F 2 --in_layout {combo[0]} --out_layout {combo[1]} "
              f"--fil_layout {combo[2]}".split()).problem
    if dtype == "fp32" and cfg is not None:
        cfg = NCHW_DX_FP32.get(cfg, cfg)
    try:
        return p, DgradSolver().find_solution(p, engine.target, perf_config=cfg)
    except PerfConfigError as e:
        pytest.skip(f"{cfg} not valid for {dtype} on {engine.target.arch}: {e}")


BASE_OF = {"fp16": "convfp16", "bf16": "convbfp16", "fp32": "conv"}


@pytest.mark.parametrize("cfg,combo", [(c, ("NCHW", "NCHW", "NCHW")) for c in NCHW_DX_CONFIGS]
                         + [(None, ("NCHW", "NHWC", "NHWC"))], ids=lambda c: "-".join(c) if isinstance(c, tuple)
                         else (c or "default"))
@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32"])
@pytest.mark.parametrize("line", NCHW_DX_LINES)
def test_nchw_dx_from_the_epilogue_verifies(engine, line, dtype, cfg, combo):
    from miopen_solver import layouts
    from miopen_solver.transpose import writes_nchw_dx
    p, sol = _nchw_dx_solution(engine, line, dtype, combo, cfg)
    assert writes_nchw_dx(sol.spec) is ("_dxnchw" in sol.kernel_name)
    if sol.schedule.nchw_pointwise:           # 1x1 NCHW default: dY and dX in place, W^T alone
        assert [t.tensor for t in sol.transforms] == ["W"]
    else:
        assert ("dX" in [t.tensor for t in sol.transforms]) is not writes_nchw_dx(sol.spec)
    rng = np.random.default_rng(23)
    dt = storage_dtype(p.dtype)
    dy = rng.uniform(-1, 1, layouts.dy_shape(p)).astype(dt)
    w = rng.uniform(-1, 1, layouts.w_shape(p)).astype(dt)
    dx = engine.run(sol, dy, w)                       # dX NaN-poisoned before the run
    v = verify(p, dx, dgrad_reference(p, dy, w))
    assert v.ok and v.nonfinite == 0, (sol.kernel_name, v)


NCHW_RUN_LINES = [
    "-n 2 -c 64 -H 16 -W 16 -k 128 -y 3 -x 3 -p 1 -q 1",                 # 16-byte aligned rows
    "-n 3 -c 72 -H 33 -W 33 -k 64 -y 1 -x 1",                             # odd planes
    "-n 2 -c 64 -H 7 -W 7 -k 256 -y 3 -x 3 -p 1 -q 1",                    # a tile row spans dX rows
    "-n 2 -c 128 -H 3 -W 4 -k 64 -y 1 -x 1",                              # tile rows cross images
    "-n 2 -c 128 -H 9 -W 12 -k 64 -y 3 -x 3 -p 2 -q 2 -l 2 -j 2",         # dilation: box rows of 12
]
NCHW_RUN_CONFIGS = ["128,64,64,2,1,64,64,0,0,0,1,-1,4,3", "128,256,64,2,1,64,256,0,0,0,1,-1,4,3",
                    "256,128,64,2,1,128,128,0,0,0,1,-1,4,3", "128,128,64,1,1,128,128,0,0,0,1,-1,7,20"]


@pytest.mark.parametrize("cfg", NCHW_RUN_CONFIGS)
@pytest.mark.parametrize("line", NCHW_RUN_LINES)
def test_tma_nchw_dx_verifies_element_by_element(engine, line, cfg):
    """The TMA and ping-pong schedules' NCHW dX epilogue (stores from the fragment): fp16,
    NaN-poisoned dX, every element within 0.25 of the float64 reference (MIOpen's rms
    tolerance alone would pass a few wrong pixels)."""
    from miopen_solver import layouts
    p, sol = _nchw_dx_solution(engine, line, "fp16", ("NCHW", "NCHW", "NCHW"), cfg)
    assert sol.spec.tma and sol.spec.nchw_dx
    rng = np.random.default_rng(31)
    dy = rng.uniform(-1, 1, layouts.dy_shape(p)).astype(np.float16)
    w = rng.uniform(-1, 1, layouts.w_shape(p)).astype(np.float16)
    v = verify(p, engine.run(sol, dy, w), dgrad_reference(p, dy, w))
    assert v.ok and v.nonfinite == 0 and v.max_abs_diff < 0.25, (sol.kernel_name, v)


@pytest.mark.parametrize("cfg", ["64,64,32,2,2,32,32,0,0,0,1,-1,2", "64,64,32,2,2,32,32,0,0,0,3,-1,2",
                                 "128,128,64,2,1,64,128,0,0,0,1,-1,3,1", "128,256,64,2,1,64,256,0,0,0,1,-1,3,2",
                                 "128,64,64,2,1,64,64,0,0,0,1,-1,4,3"])
def test_nchw_dx_split_n_forced_chunks_verify(engine, monkeypatch, cfg):
    """Three launches, each storing its images of the user's NCHW dX at its offset; timed
    plainly and through one graph."""
    from miopen_solver import applicability as ap
    p = parse("convbfp16 -n 6 -c 64 -H 14 -W 12 -k 16 -y 3 -x 3 -p 1 -q 1 -F 2".split()).problem   # all NCHW
    monkeypatch.setattr(ap, "TENSOR_BYTES_LIMIT", 2 * p.dx_elems // p.N * p.elem_bytes)
    p, sol = _nchw_dx_solution(engine, "-n 6 -c 64 -H 14 -W 12 -k 16 -y 3 -x 3 -p 1 -q 1", "bf16",
                               ("NCHW", "NCHW", "NCHW"), cfg)
    assert sol.n_chunks == 3 and sol.spec.nchw_dx is (sol.schedule is not KernelSchedule.WGMMA_PERSISTENT)
    _verify_and_time(engine, sol, seed=29)


# ------------------------------------------------------------------ NCHW pointwise (issue 16)
# 1x1 stride-1 unpadded problems with dY and dX NCHW: per-(image, group) GEMMs W_g^T x dY[n, g]
# written straight into NCHW dX (schedules 7, 8 and 18), W^T the only transform. The default
# and the candidate tiles of both main loops, NaN-poisoned dX (the engine poisons it), the
# suite's 1x1 layers in NCHW, odd H*W (scalar pixel vectors), odd channels, groups.
NCHW_PW_LINES = [
    "-n 32 -c 64 -H 56 -W 56 -k 256 -y 1 -x 1",          # r50 c64->k256
    "-n 32 -c 256 -H 56 -W 56 -k 64 -y 1 -x 1",          # r50 c256->k64
    "-n 32 -c 1024 -H 14 -W 14 -k 256 -y 1 -x 1",        # r50 c1024->k256
    "-n 32 -c 2048 -H 7 -W 7 -k 512 -y 1 -x 1",          # r50 c2048->k512, P = 49
    "-n 3 -c 33 -H 7 -W 9 -k 17 -y 1 -x 1",              # odd P, cpg, kpg
    "-n 4 -c 96 -H 14 -W 14 -k 192 -y 1 -x 1 -g 3",      # groups
    "-n 2 -c 30 -H 5 -W 5 -k 12 -y 1 -x 1 -g 6 -l 2 -j 2 --fil_layout NHWC",   # cpg 5, kpg 2, dilation
]
NCHW_PW_CONFIGS = [
    "128,128,64,2,1,64,128,0,0,0,1,-1,4,8",
    "64,256,64,1,1,64,256,0,0,0,1,-1,4,8",
    "128,64,64,2,1,64,64,0,0,0,1,-1,3,8",
    "64,128,32,2,2,32,64,0,0,0,1,-1,3,7",
    "64,64,16,2,2,32,32,0,0,0,1,0,2,7",
    "32,64,32,1,2,32,32,0,0,0,1,-1,1,7",
    "128,256,64,2,1,64,256,0,0,0,1,-1,3,18",
    "64,128,64,1,1,64,128,0,0,0,1,-1,3,18",
]


def _nchw_pw_run(engine, p, cfg):
    """The NCHW pointwise solution of ``p`` with ``cfg``, verified; None where ``cfg`` is not
    valid. ``cfg`` None: the family's own default tile (the solver's default only where the
    pixel vectors are 8 bytes or wider: heuristics.NCHW_PW_MIN_VECTOR_BYTES)."""
    from miopen_solver.heuristics import nchw_pw_config
    from miopen_solver.solver import DgradSolver
    cfg = cfg if cfg is not None else nchw_pw_config(p, engine.target)
    try:
        sol = DgradSolver().find_solution(p, engine.target, perf_config=cfg)
    except PerfConfigError:
        return None
    assert sol.schedule.nchw_pointwise and [t.tensor for t in sol.transforms] == ["W"]
    _verify_solution(engine, sol, seed=23)
    return sol




@settings(max_examples=int(os.environ.get("DGRAD_GPU_EXAMPLES", "120")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_nchw_pointwise_problems_match_reference(engine, data):
    dtype = data.draw(st.sampled_from(["fp16", "bf16", "fp32"]))
    G = data.draw(st.sampled_from([1, 1, 2, 3]))
    cpg, kpg = data.draw(st.integers(2, 70)), data.draw(st.integers(1, 90))
    p = ConvProblem(N=data.draw(st.integers(1, 3)), C=G * cpg, K=G * kpg, G=G, Y=1, X=1, dtype=dtype,
                    Hi=data.draw(st.integers(1, 17)), Wi=data.draw(st.integers(2, 17)),
                    in_layout="NCHW", out_layout="NCHW", fil_layout=data.draw(st.sampled_from(["NCHW", "NHWC"])))
    assume(p.K > 1)
    assume(_nchw_pw_run(engine, p, data.draw(st.sampled_from(NCHW_PW_CONFIGS + [None]))) is not None)



NCHW_PATCH_LINES = [
    "-n 8 -c 3 -H 224 -W 224 -k 768 -y 16 -x 16 -u 16 -v 16",      # ViT-B/16 stem
    "-n 8 -c 3 -H 224 -W 224 -k 96 -y 4 -x 4 -u 4 -v 4",           # ConvNeXt stem
    "-n 8 -c 96 -H 56 -W 56 -k 192 -y 2 -x 2 -u 2 -v 2",           # ConvNeXt downsampling
    "-n 4 -c 3 -H 56 -W 42 -k 64 -y 14 -x 14 -u 14 -v 14",         # ViT-L/14: runs of 2
    "-n 2 -c 512 -H 1 -W 3124 -k 512 -y 1 -x 2 -u 1 -v 2",         # wav2vec2 k2/s2, odd Ho*Wo
    "-n 2 -c 36 -H 12 -W 9 -k 24 -y 2 -x 3 -u 2 -v 3 -g 3",        # groups, odd channels
]


@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32"])
@pytest.mark.parametrize("line", NCHW_PW_LINES + NCHW_PATCH_LINES)
def test_nchw_pointwise_verifies(engine, dtype, line):
    """1x1 and patch filters with dY and dX NCHW on the NCHW pointwise schedules (the family's
    default tile, then every listed tile on the small lines), NaN-poisoned dX."""
    from miopen_solver.nchw_pw import is_patch
    p = parse(f"{BASE_OF[dtype]} {line} -F 2".split()).problem
    sol = _nchw_pw_run(engine, p, None)
    assert sol is not None and sol.spec.patch is is_patch(p)
    if p.N <= 4:            # the small lines: every main loop's tiles too
        assert [c for c in NCHW_PW_CONFIGS if _nchw_pw_run(engine, p, c) is not None]


@settings(max_examples=int(os.environ.get("DGRAD_GPU_EXAMPLES", "120")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_nchw_patch_problems_match_reference(engine, data):
    dtype = data.draw(st.sampled_from(["fp16", "bf16", "fp32"]))
    G = data.draw(st.sampled_from([1, 1, 2, 3]))
    cpg, kpg = data.draw(st.integers(2, 40)), data.draw(st.integers(2, 90))
    y, x = data.draw(st.integers(1, 8)), data.draw(st.integers(1, 8))
    assume(y * x > 1)
    p = ConvProblem(N=data.draw(st.integers(1, 3)), C=G * cpg, K=G * kpg, G=G, Y=y, X=x, sH=y, sW=x, dtype=dtype,
                    Hi=y * data.draw(st.integers(1, 9)), Wi=x * data.draw(st.integers(1, 9)),
                    in_layout="NCHW", out_layout="NCHW", fil_layout="NCHW")
    assume(_nchw_pw_run(engine, p, data.draw(st.sampled_from(NCHW_PW_CONFIGS + [None]))) is not None)


@pytest.mark.parametrize("cfg", [c for c in NCHW_PW_CONFIGS if c.endswith(",18")])
@pytest.mark.parametrize("line", NCHW_PW_LINES[:2] + NCHW_PW_LINES[4:6])
def test_nchw_pointwise_persistent_rows_walk_many_tiles(engine, line, cfg):
    """Schedule 18 with the grid sized for a 3-SM device: one block per (image, group) row,
    each walking every tile of its GEMM, against the float64 reference."""
    from miopen_solver.solver import DgradSolver
    if not engine.target.wgmma:
        pytest.skip(f"{engine.target.arch} has no warpgroup MMA")
    p = parse(f"convfp16 {line} -F 2".split()).problem
    try:
        sol = DgradSolver().find_solution(p, engine.target.with_(num_cus=3), perf_config=cfg)
    except PerfConfigError as e:
        pytest.skip(f"{cfg} not valid for {line}: {e}")
    assert sol.spec.tile_blocks == 1 and sol.kernels[0].source.grid == (1, p.N * p.G, 1)
    _verify_and_time(engine, sol, seed=31)


# ------------------------------------------------------------------ NCHW on the TMA schedule
# Stride-1 problems with dY and dX NCHW in memory on schedule 13 (miopen_solver/nchw_tma.py):
# W^T is the only transform; dX is NaN-poisoned, so a pixel no tile stores fails.
NCHW_TMA_CONFIGS = [
    "64,256,64,1,1,64,256,0,0,0,1,-1,4,13",
    "128,256,64,2,1,64,256,0,0,0,1,-1,4,13",
    "128,128,64,2,1,64,128,0,0,0,1,-1,3,13",
    "64,64,64,1,1,64,64,0,0,0,1,-1,2,13",
    "128,192,64,2,1,64,192,0,0,0,1,-1,4,13",
]
NCHW_TMA_LINES = [
    "-n 2 -c 64 -H 56 -W 56 -k 256 -y 1 -x 1",                           # the ResNet-50 1x1 shape
    "-n 2 -c 72 -H 9 -W 72 -k 64 -y 3 -x 1 -p 0 -q 0",                   # Wi past one 64-column row, cpg past a tile
    "-n 2 -c 128 -H 16 -W 16 -k 256 -y 3 -x 3 -p 2 -q 8 -l 2 -j 8 -g 2", # column shifts of 8, dilated, grouped
    "-n 1 -c 32 -H 12 -W 24 -k 40 -y 7 -x 1 -p 3 -q 0",                  # 7x1, kpg not a multiple of 64
    "-n 3 -c 48 -H 7 -W 8 -k 96 -y 1 -x 1",                              # 1x1 on a 7x8 plane
    # the shifting producer (column shifts that are not multiples of 8)
    "-n 2 -c 64 -H 56 -W 56 -k 64 -y 3 -x 3 -p 1 -q 1",                  # the ResNet-50 3x3 shape
    "-n 2 -c 40 -H 9 -W 72 -k 72 -y 3 -x 3 -p 1 -q 1",                   # Wi past one 64-column row
    "-n 1 -c 32 -H 12 -W 24 -k 40 -y 1 -x 7 -p 0 -q 3",                  # 1x7: residues 3, 2, 1, 0, 7, 6, 5
    "-n 2 -c 64 -H 16 -W 16 -k 128 -y 3 -x 3 -p 2 -q 4 -l 2 -j 4 -g 2",  # residue 4, dilated, grouped
]


def _nchw_tma_run(engine, p, cfg):
    """The NCHW TMA solution of ``p`` with ``cfg`` (None: the family's default tile),
    verified; None where ``cfg`` is not valid for ``p``. Skips without warpgroup MMA."""
    from miopen_solver.heuristics import nchw_tma_config
    from miopen_solver.solver import DgradSolver
    if not engine.target.wgmma:
        pytest.skip(f"{engine.target.arch} has no warpgroup MMA")
    cfg = cfg if cfg is not None else nchw_tma_config(p, engine.target)
    try:
        sol = DgradSolver().find_solution(p, engine.target, perf_config=cfg)
    except PerfConfigError:
        return None
    assert sol.schedule is KernelSchedule.NCHW_TMA and [t.tensor for t in sol.transforms] == ["W"]
    _verify_solution(engine, sol, seed=29)
    return sol


@pytest.mark.parametrize("fil", ["NCHW", "NHWC"])
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("line", NCHW_TMA_LINES)
def test_nchw_tma_verifies(engine, line, dtype, fil):
    """Every NCHW TMA config that is valid for the line verifies (at least one is)."""
    base = {"fp16": "convfp16", "bf16": "convbfp16"}[dtype]
    p = parse(f"{base} {line} -F 2 --fil_layout {fil}".split()).problem
    assert [c for c in NCHW_TMA_CONFIGS + [None] if _nchw_tma_run(engine, p, c) is not None]


@settings(max_examples=int(os.environ.get("DGRAD_GPU_EXAMPLES", "120")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_nchw_tma_problems_match_reference(engine, data):
    dtype = data.draw(st.sampled_from(["fp16", "bf16"]))
    G = data.draw(st.sampled_from([1, 1, 1, 2]))
    cpg = data.draw(st.integers(1, 160))
    kpg = 64 * data.draw(st.integers(1, 3)) if G > 1 else 8 * data.draw(st.integers(1, 24))
    Y, X = data.draw(st.integers(1, 7)), data.draw(st.sampled_from([1, 1, 2, 3, 5]))
    dH = data.draw(st.integers(1, 3))
    dW = data.draw(st.sampled_from([1, 2, 3, 8]))   # 8: column shifts of 8 (tensor copies) when pW is too
    pH, pW = data.draw(st.integers(0, (Y - 1) * dH)), data.draw(st.integers(0, (X - 1) * dW))
    Hi = data.draw(st.integers(max(1, (Y - 1) * dH + 1 - 2 * pH), 20))
    Wo = 8 * data.draw(st.integers(1, 12))
    Wi = Wo - 2 * pW + (X - 1) * dW                 # stride 1: Wo = Wi + 2pW - dW(X-1)
    assume(Wi >= 1 and Wi % 8 == 0)
    try:
        p = ConvProblem(N=data.draw(st.integers(1, 3)), C=G * cpg, K=G * kpg, G=G, Y=Y, X=X, pH=pH, pW=pW,
                        dH=dH, dW=dW, Hi=Hi, Wi=Wi, dtype=dtype, in_layout="NCHW", out_layout="NCHW",
                        fil_layout=data.draw(st.sampled_from(["NCHW", "NHWC"])))
    except ValueError:
        assume(False)
        return
    assume(_nchw_tma_run(engine, p, data.draw(st.sampled_from(NCHW_TMA_CONFIGS + [None]))) is not None)


def test_nchw_tma_blocks_walk_many_tiles(engine):
    """The NCHW TMA grid sized for a 3-SM device: every persistent block loops over many
    (image, channel tile, row tile) tiles."""
    if not engine.target.wgmma:
        pytest.skip(f"{engine.target.arch} has no warpgroup MMA")
    p = parse("convfp16 -n 3 -c 160 -H 20 -W 64 -k 64 -y 3 -x 1 -p 1 -q 0 -F 2".split()).problem
    small = engine.target.with_(num_cus=3)
    from miopen_solver.solver import DgradSolver
    sol = DgradSolver().find_solution(p, small, perf_config="128,128,64,2,1,64,128,0,0,0,1,-1,3,13")
    assert sol.schedule is KernelSchedule.NCHW_TMA and sol.spec.tile_blocks == 3
    _verify_solution(engine, sol, seed=31)


# ------------------------------------------------------------------ split-K through the workspace
# The dgrad kernel's splits store fp32 partial sums into the workspace slices, the reduction
# kernel sums them in order and stores dX (NHWC or NCHW; zeros where no sub-GEMM writes). dX
# and the slices are NaN-poisoned; two runs must give the same bits (no atomics).
SKWS_LINES = [
    "-n 2 -c 33 -H 7 -W 7 -k 256 -y 3 -x 3 -p 1 -q 1",                   # odd cpg, 3x3 on 7x7
    "-n 2 -c 256 -H 14 -W 14 -k 256 -y 3 -x 3 -p 1 -q 1",                 # small grid, many channels
    "-n 2 -c 512 -H 7 -W 7 -k 2048 -y 1 -x 1",                            # 1x1 on 7x7, deep K
    "-n 2 -c 35 -H 14 -W 14 -k 256 -y 1 -x 1 -u 2 -v 2",                  # 1x1 s2: 3/4 zeros by the reduction
    "-n 2 -c 48 -H 13 -W 13 -k 64 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 -l 2 -j 2",   # gcd(s, d) = 2
    "-n 3 -c 96 -H 9 -W 11 -k 96 -y 3 -x 3 -p 1 -q 1 -g 3",               # grouped, odd cpg
]
SKWS_CONFIGS = {   # dtype class -> configs (split_k_reduce 2: the workspace wherever atomics are allowed too)
    "16": ["64,64,32,2,2,32,32,0,0,0,2,-1,3,0,2", "128,64,32,2,2,64,32,0,0,0,4,-1,4,0,2",
           "64,32,64,2,1,32,32,0,0,0,3,0,2,0,2", "128,128,64,2,1,64,128,0,0,0,2,-1,4,1,2",
           "128,256,64,2,1,64,256,0,0,0,4,-1,3,1,2"],
    "fp32": ["64,64,16,2,2,32,32,0,0,0,2,-1,3,0,2", "64,64,16,2,2,32,32,0,0,0,5,-1,2,0,2"],
}


def _skws_solution(engine, line, dtype, cfg, combo=("NHWC",) * 3):
    from miopen_solver.solver import DgradSolver
    p = parse(f"{BASE_OF[dtype]} {line} -F 2 --in_layout {combo[0]} --out_layout {combo[1]} "
              f"--fil_layout {combo[2]}".split()).problem
    try:
        sol = DgradSolver().find_solution(p, engine.target, perf_config=cfg)
    except PerfConfigError:
        return None
    assert sol.reduce is not None and "_skws_" in sol.kernel_name
    return sol


def _skws_verify(engine, sol, seed=29):
    """:func:`_verify_solution`, then a second run that must give the same bits."""
    from miopen_solver import layouts
    dy, w = _verify_solution(engine, sol, seed)
    p = sol.problem
    rng = np.random.default_rng(seed)
    dt = storage_dtype(p.dtype)
    dy = rng.uniform(-1, 1, layouts.dy_shape(p)).astype(dt)
    w = rng.uniform(-1, 1, layouts.w_shape(p)).astype(dt)
    first = engine.run(sol, dy, w)
    assert np.array_equal(first.view(np.uint8), engine.run(sol, dy, w).view(np.uint8)), \
        f"{sol.kernel_name}: two runs differ"
    return dy, w


@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32"])
@pytest.mark.parametrize("line", SKWS_LINES)
def test_split_k_workspace_verifies_and_is_deterministic(engine, dtype, line):
    cfgs = SKWS_CONFIGS["fp32" if dtype == "fp32" else "16"]
    sols = [s for s in (_skws_solution(engine, line, dtype, c) for c in cfgs) if s is not None]
    assert sols
    for sol in sols:
        _skws_verify(engine, sol)


@pytest.mark.parametrize("combo", [("NCHW",) * 3, ("NCHW", "NHWC", "NCHW")], ids=lambda c: "-".join(c))
@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32"])
@pytest.mark.parametrize("line", ["-n 2 -c 33 -H 7 -W 7 -k 64 -y 3 -x 3 -p 1 -q 1",       # Hi*Wi = 49, odd
                                  "-n 70 -c 5 -H 5 -W 3 -k 8 -y 3 -x 3 -p 1 -q 1",        # many images, C=5
                                  "-n 2 -c 256 -H 14 -W 14 -k 128 -y 1 -x 1 -u 2 -v 2"])  # zero fill, W-stride 2
def test_split_k_workspace_stores_an_nchw_dx(engine, line, dtype, combo):
    cfg = SKWS_CONFIGS["fp32" if dtype == "fp32" else "16"][0]
    sol = _skws_solution(engine, line, dtype, cfg, combo)
    assert sol is not None and sol.reduce.layout == "NCHW" and "dX" not in [t.tensor for t in sol.transforms]
    dy, w = _skws_verify(engine, sol)
    assert len(engine.time_graph(sol, dy, w, launches=2, replays=2).times_ms) == 2


def test_split_k_workspace_split_n_forced_chunks_verify(engine, monkeypatch):
    from miopen_solver import applicability as ap
    from miopen_solver.solver import DgradSolver
    p = parse("convfp16 -n 6 -c 63 -H 14 -W 14 -k 16 -y 3 -x 3 -p 1 -q 1 -F 2".split()).problem    # all NCHW
    monkeypatch.setattr(ap, "TENSOR_BYTES_LIMIT", 2 * max(p.dy_elems, p.dx_elems) // p.N * p.elem_bytes)
    sol = DgradSolver().find_solution(p, engine.target, split_k=3)
    assert sol.n_chunks == 3 and sol.reduce is not None
    _verify_and_time(engine, sol, seed=31)


@settings(max_examples=int(os.environ.get("DGRAD_GPU_EXAMPLES", "120")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_split_k_workspace_problems_match_reference(engine, data):
    """Random problems (odd channels, strides, dilations, pads, groups, NCHW and mixed
    layouts), split 2..8 through the workspace, NaN-poisoned dX and slices."""
    from miopen_solver.solver import DgradSolver
    dtype = data.draw(st.sampled_from(["fp16", "bf16", "fp32"]))
    G = data.draw(st.sampled_from([1, 1, 1, 2, 3]))
    cpg, kpg = data.draw(st.integers(1, 40)), data.draw(st.integers(8, 96))
    Y, X = data.draw(st.integers(1, 5)), data.draw(st.integers(1, 5))
    sH, sW = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4))
    dH, dW = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))
    pH, pW = data.draw(st.integers(0, 3)), data.draw(st.integers(0, 3))
    Hi, Wi = data.draw(st.integers(1, 20)), data.draw(st.integers(1, 20))
    lay = data.draw(st.sampled_from(["NHWC", "NCHW"]))
    try:
        p = ConvProblem(N=data.draw(st.integers(1, 3)), C=G * cpg, Hi=Hi, Wi=Wi, K=G * kpg, Y=Y, X=X, pH=pH, pW=pW,
                        sH=sH, sW=sW, dH=dH, dW=dW, G=G, dtype=dtype, in_layout=lay,
                        out_layout=data.draw(st.sampled_from([lay, "NHWC"])), fil_layout=lay)
    except ValueError:
        assume(False)
        return
    split = data.draw(st.integers(2, 8))
    cfg = PerfConfig.parse(data.draw(st.sampled_from(SKWS_CONFIGS["fp32" if dtype == "fp32" else "16"])))
    try:     # a config or problem the solver refuses (NotApplicableError is a ValueError)
        sol = DgradSolver().find_solution(p, engine.target, perf_config=cfg.replace(split_k=split))
    except (PerfConfigError, ValueError):
        assume(False)
        return
    _verify_solution(engine, sol, seed=data.draw(st.integers(0, 2**32 - 1)))
