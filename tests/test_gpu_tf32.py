"""GPU correctness of TF32 math (MIOpenDriver ``-M 0``; :mod:`miopen_solver.tf32`) on the live
device, in tests/test_gpu.py's style: skipped without a GPU runtime, dX poisoned with NaN
before every launch, fresh random inputs per example.

Three checks per launch: the float64 reference of the *unrounded* inputs within MIOpen's TF32
tolerance (8.2e-2); the CPU engine's TF32 result (the same rounding, ``round_tf32``, before
the same sub-GEMMs) within the fp32 tolerance -- so the kernel rounds both operands exactly
as ``cvt.rna`` does, and differs from the CPU only in the order of its fp32 sums; and, on
inputs that use every mantissa bit, an error against the unrounded reference above the fp32
tolerance -- so the kernel really computes TF32, not IEEE fp32.

Run on a GPU machine with ``pytest tests/test_gpu_tf32.py`` (``bench/h200_check.sh``'s
``tf32`` step; ``DGRAD_GPU_BACKEND=hip`` for ROCm, where nothing has run yet).
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from conftest import draw_problem
from miopen_solver.command import parse
from miopen_solver.errors import PerfConfigError, RuntimeUnavailable
from miopen_solver.heuristics import default_performance_config
from miopen_solver.layouts import dy_shape, w_shape
from miopen_solver.problem import ConvProblem
from miopen_solver.reference import default_tolerance, dgrad_reference, rms_range, verify
from miopen_solver.runtime.cpu import CpuEngine
from miopen_solver.solver import DgradSolver
from miopen_solver.spec import PerfConfig, launch_spec, make_spec

BACKEND = os.environ.get("DGRAD_GPU_BACKEND", "cuda")
FP32_TOL = default_tolerance("fp32")
TF32_TOL = default_tolerance("tf32")
NHWC = "-F 2 --in_layout NHWC --out_layout NHWC --fil_layout NHWC"


@pytest.fixture(scope="module")
def engine():
    from miopen_solver.runtime import get_engine
    try:
        eng = get_engine(BACKEND)
    except RuntimeUnavailable as e:
        pytest.skip(str(e))
    if not eng.target.atoms_for("tf32"):
        pytest.skip(f"{eng.target.arch} has no TF32 matrix instruction")
    return eng


pytestmark = pytest.mark.gpu

# TF32 configs over the kernel paths: one to four warps along M and N, 1..8 atoms per warp
# along N, tile_k 8/16/32 (one to four k8 steps), stages 1..4, k-outer and m-outer B tiles
# (8-byte and single-word fragment loads), narrow vector caps, split-K.
CONFIGS = [
    PerfConfig(128, 64, 16, 2, 2, 64, 32, stages=4),
    PerfConfig(128, 128, 32, 2, 2, 64, 64, stages=3),
    PerfConfig(64, 64, 16, 2, 2, 32, 32, stages=2, lds_k_outer=0),
    PerfConfig(32, 16, 8, 1, 1, 32, 16, stages=1),
    PerfConfig(128, 8, 16, 4, 1, 32, 8, stages=3),
    PerfConfig(64, 32, 32, 2, 1, 32, 32, stages=3, vector_size_a=1, vector_size_b=2),
    PerfConfig(64, 64, 16, 2, 2, 32, 32, split_k=3, stages=2),
    PerfConfig(64, 64, 16, 2, 2, 32, 32, split_k=2, lds_k_outer=0, stages=4),
    # warpgroup TF32 (sm_90a: wgmma m64nNk8 .tf32, rounding register-staged loaders, K-major B)
    PerfConfig(128, 64, 32, 2, 1, 64, 64, stages=4, schedule=1),
    PerfConfig(128, 128, 32, 2, 1, 64, 128, stages=3, schedule=1),
    PerfConfig(64, 256, 32, 1, 1, 64, 256, stages=3, schedule=1),
    PerfConfig(128, 64, 32, 2, 1, 64, 64, split_k=2, stages=3, schedule=1),
]
SUITE = [
    "-n 2 -c 64 -H 56 -W 56 -k 256 -y 1 -x 1",
    "-n 2 -c 256 -H 56 -W 56 -k 64 -y 1 -x 1",
    "-n 2 -c 64 -H 56 -W 56 -k 64 -y 3 -x 3 -p 1 -q 1",
    "-n 2 -c 256 -H 56 -W 56 -k 512 -y 1 -x 1 -u 2 -v 2",
    "-n 2 -c 128 -H 56 -W 56 -k 128 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2",
    "-n 2 -c 256 -H 28 -W 28 -k 256 -y 3 -x 3 -p 1 -q 1 -g 32",
    "-n 1 -c 256 -H 64 -W 64 -k 256 -y 3 -x 3 -p 2 -q 2 -l 2 -j 2",
]
FAMILY = [  # patch GEMM (stride = filter) and NCHW pointwise GEMMs: their TF32 defaults
    "conv -n 2 -c 3 -H 224 -W 224 -k 768 -y 16 -x 16 -u 16 -v 16 -M 0 " + NHWC,
    "conv -n 2 -c 96 -H 30 -W 30 -k 192 -y 2 -x 2 -u 2 -v 2 -M 0 " + NHWC,
    "conv -n 2 -c 256 -H 28 -W 28 -k 64 -y 1 -x 1 -M 0 -F 2",
    "conv -n 3 -c 64 -H 14 -W 16 -k 256 -y 1 -x 1 -g 2 -M 0 -F 2",
]


def _inputs(p: ConvProblem, rng):
    """dY and W in the problem's layouts, uniform in (-1, 1): every mantissa bit in use, so
    TF32's rounding shows against the unrounded reference."""
    dy = rng.uniform(-1, 1, dy_shape(p)).astype(np.float32)
    w = rng.uniform(-1, 1, w_shape(p)).astype(np.float32)
    return dy, w


def _check(engine, work, rng, *, strict: bool = True):
    """One launch of ``work`` (a spec or solution of a TF32 problem) against the float64
    reference and the CPU engine; returns the reference verdict."""
    p = work.problem
    dy, w = _inputs(p, rng)
    dx = engine.run(work, dy, w)
    v = verify(p, dx, dgrad_reference(p, dy, w))
    assert v.tolerance == TF32_TOL
    assert v.nonfinite == 0, f"{v.nonfinite} dX elements never written by {work.kernel_name}"
    assert v.ok, f"{work.kernel_name}: err {v.error} >= {v.tolerance}"
    same = rms_range(CpuEngine(engine.target).run(work, dy, w).astype(np.float64), dx.astype(np.float64))
    assert same < FP32_TOL, f"{work.kernel_name}: GPU and CPU TF32 differ by {same} (rounding not cvt.rna's?)"
    if strict:
        assert v.error > FP32_TOL, f"{work.kernel_name}: err {v.error}: IEEE-accurate, not TF32"
    return v


def _spec(engine, p, cfg):
    try:
        return make_spec(p, engine.target, cfg)
    except PerfConfigError:
        return None


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: ("wgmma:" if c.schedule.warpgroup else "") + c.serialize())
@pytest.mark.parametrize("line", SUITE)
def test_suite_shapes_verify_tf32(engine, line, cfg):
    p = parse(f"conv {line} -M 0 {NHWC}").problem
    spec = _spec(engine, p, cfg)
    if spec is None:
        pytest.skip("config not valid for this problem")
    assert spec.math == "tf32" and "_tf32_" in spec.kernel_name
    _check(engine, spec, np.random.default_rng())


@pytest.mark.parametrize("line", SUITE)
def test_default_solutions_verify_tf32(engine, line):
    p = parse(f"conv {line} -M 0 {NHWC}").problem
    sol = DgradSolver().get_solution(p, engine.target)
    assert sol.math == "tf32" and sol.tolerance == TF32_TOL
    _check(engine, sol, np.random.default_rng())


@pytest.mark.parametrize("line", FAMILY)
def test_patch_and_nchw_pointwise_tf32(engine, line):
    p = parse(line).problem
    sol = DgradSolver().get_solution(p, engine.target)
    assert sol.math == "tf32" and (sol.schedule.virtual_gemm or not engine.target.is_gpu), sol.kernel_name
    _check(engine, sol, np.random.default_rng())


def test_depthwise_direct_default_runs_ieee(engine):
    """The direct schedule has no matrix instruction: a -M 0 depthwise line runs IEEE fp32
    and is verified with the fp32 tolerance."""
    p = parse(f"conv -n 2 -c 64 -H 20 -W 21 -k 64 -g 64 -y 3 -x 3 -p 1 -q 1 -M 0 {NHWC}").problem
    sol = DgradSolver().get_solution(p, engine.target)
    if sol.schedule.slug != "direct":
        pytest.skip("the direct schedule is not this target's default")
    assert sol.math == "fp32" and sol.tolerance == FP32_TOL
    dy, w = _inputs(p, np.random.default_rng())
    v = verify(p, engine.run(sol, dy, w), dgrad_reference(p, dy, w), sol.tolerance)
    assert v.ok, v


@settings(max_examples=int(os.environ.get("DGRAD_GPU_EXAMPLES", "60")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_tf32_problems_match_reference(engine, data):
    """Strided, dilated, grouped, padded problems with odd channel counts, TF32 configs."""
    p = draw_problem(data, tf32=True)
    assume(p is not None)
    spec = _spec(engine, p, data.draw(st.sampled_from(CONFIGS)))
    assume(spec is not None)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    # the TF32 error is clear of fp32's where every dX pixel sums many products (stride 1,
    # GemmK >= 64); elsewhere (mostly-zero dX, a few products) only the first two checks
    _check(engine, spec, rng, strict=p.sH == p.sW == 1 and max(s.gemm_k for s in spec.sub_gemms) >= 64)


def test_default_configs_of_the_suite_are_tf32_kernels(engine):
    """What the bench times: every suite line's -M 0 default on this target is a TF32 kernel."""
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    for raw in (root / "bench" / "suite.txt").read_text().splitlines():
        if raw.strip() and not raw.startswith("#"):
            line = raw.split("#")[0].split()
            p = parse(" ".join(["conv"] + line[1:] + ["-M", "0"])).problem
            spec = launch_spec(p, engine.target, default_performance_config(p, engine.target))
            assert spec.math == "tf32", spec.kernel_name
