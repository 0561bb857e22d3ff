"""Float64 reference dgrad, MIOpen's rms_range metric, tolerances and the verdict."""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import naive_dgrad, random_inputs
from miopen_solver import layouts
from miopen_solver.problem import ConvProblem
from miopen_solver.reference import default_tolerance, dgrad_reference, rms_range, verify


@st.composite
def tiny_problems(draw):
    G = draw(st.integers(1, 2))
    Y, X = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    sH, sW, dH, dW = (draw(st.integers(1, 3)) for _ in range(4))
    pH, pW = draw(st.integers(0, 3)), draw(st.integers(0, 3))
    min_h, min_w = max(1, dH * (Y - 1) + 1 - 2 * pH), max(1, dW * (X - 1) + 1 - 2 * pW)
    Hi = draw(st.integers(min_h, min_h + 5))
    Wi = draw(st.integers(min_w, min_w + 5))
    lay = draw(st.sampled_from(["NHWC", "NCHW"]))
    return ConvProblem(N=draw(st.integers(1, 2)), C=G * draw(st.integers(1, 3)), Hi=Hi, Wi=Wi,
                       K=G * draw(st.integers(1, 3)), Y=Y, X=X, pH=pH, pW=pW, sH=sH, sW=sW,
                       dH=dH, dW=dW, G=G, in_layout=lay, out_layout=draw(st.sampled_from(["NHWC", "NCHW"])),
                       fil_layout=draw(st.sampled_from(["NHWC", "NCHW"])))


@given(tiny_problems(), st.integers(0, 1000))
def test_reference_equals_the_loop_definition(problem, seed):
    dy, w = random_inputs(problem, seed)
    got = dgrad_reference(problem, dy, w)
    assert got.dtype == np.float64 and got.shape == layouts.dx_shape(problem)
    np.testing.assert_allclose(layouts.dx_to_nhwc(problem, got), naive_dgrad(problem, dy, w),
                               rtol=1e-12, atol=1e-12)


def test_reference_hand_example():
    # 1x1 input channel/filter, Hi=3, Y=2, stride 1, pad 0 -> Ho=2:
    # dX[0] = dy0*w0, dX[1] = dy0*w1 + dy1*w0, dX[2] = dy1*w1
    p = ConvProblem(N=1, C=1, Hi=3, Wi=1, K=1, Y=2, X=1)
    dy = np.array([2.0, 3.0], dtype=np.float32).reshape(1, 1, 2, 1)
    w = np.array([5.0, 7.0], dtype=np.float32).reshape(1, 1, 2, 1)
    assert dgrad_reference(p, dy, w).ravel().tolist() == [10.0, 14.0 + 15.0, 21.0]


def test_reference_adjoint_of_forward():
    """<dY, conv(x, W)> == <dgrad(dY, W), x> with the forward convolution by loops."""
    p = ConvProblem(N=2, C=4, Hi=7, Wi=6, K=6, Y=3, X=2, pH=1, pW=1, sH=2, sW=1, dH=1, dW=2, G=2,
                    in_layout="NHWC", out_layout="NHWC", fil_layout="NHWC")
    rng = np.random.default_rng(1)
    x = rng.standard_normal((p.N, p.Hi, p.Wi, p.C))
    dy, w = random_inputs(p, 2)
    dy, w = dy.astype(np.float64), w.astype(np.float64)
    y = np.zeros((p.N, p.Ho, p.Wo, p.K))
    for n in range(p.N):
        for ho in range(p.Ho):
            for wo in range(p.Wo):
                for k in range(p.K):
                    g = k // p.kpg
                    for yy in range(p.Y):
                        for xx in range(p.X):
                            hi, wi = ho * p.sH - p.pH + yy * p.dH, wo * p.sW - p.pW + xx * p.dW
                            if 0 <= hi < p.Hi and 0 <= wi < p.Wi:
                                y[n, ho, wo, k] += w[k, yy, xx] @ x[n, hi, wi, g * p.cpg:(g + 1) * p.cpg]
    lhs = float(np.sum(dy * y))
    rhs = float(np.sum(dgrad_reference(p, dy, w) * x))
    assert math.isclose(lhs, rhs, rel_tol=1e-12)


def test_reference_rejects_bad_input():
    p = ConvProblem(N=1, C=2, Hi=4, Wi=4, K=2, Y=3, X=3)
    dy, w = random_inputs(p)
    with pytest.raises(ValueError):
        dgrad_reference(p, dy[:, :1], w)
    with pytest.raises(ValueError):
        dgrad_reference(p.replace(mode="trans"), dy, w)


def test_rms_range_by_hand():
    # sqrt(1) / (sqrt(3) * max(3, 4))
    assert rms_range([1, 2, 3], [1, 2, 4]) == pytest.approx(1 / (math.sqrt(3) * 4), rel=1e-15)
    assert rms_range([1, -5], [1, -5]) == 0.0
    assert rms_range([0.0, 0.0], [0.0, 0.0]) == 0.0              # DBL_MIN guards the division
    assert rms_range([1, 2], [1, 2, 3]) == sys.float_info.max
    assert math.isnan(rms_range([1.0, 2.0], [1.0, float("nan")]))
    assert rms_range([-8.0], [0.0]) == pytest.approx(1.0)       # magnitude is |max_abs|


def test_default_tolerances_are_miopens():
    assert default_tolerance("fp32", implicit_gemm=False) == 1.5e-6
    assert default_tolerance("fp16", implicit_gemm=False) == 8.2e-3
    assert default_tolerance("bf16", implicit_gemm=False) == pytest.approx(6.56e-2)
    assert default_tolerance("fp32") == pytest.approx(1.5e-5)       # x10 igemm bwd (#1206)
    assert default_tolerance("fp16") == pytest.approx(8.2e-2)
    assert default_tolerance("bf16") == pytest.approx(6.56e-1)
    with pytest.raises(ValueError):
        default_tolerance("int8")


def test_verdict_ok_fail_nan():
    p = ConvProblem(N=1, C=2, Hi=4, Wi=4, K=2, Y=3, X=3, dtype="fp16")
    ref = np.linspace(-1, 1, 32).reshape(1, 2, 4, 4)
    ok = verify(p, ref.astype(np.float16), ref)
    assert ok.ok and ok.nonfinite == 0 and ok.tolerance == pytest.approx(8.2e-2) and ok.elements == 32
    bad = verify(p, -ref, ref)
    assert not bad.ok and bad.error > bad.tolerance and bad.max_abs_diff == pytest.approx(2.0)
    poisoned = ref.copy()
    poisoned[0, 1, 2, 3] = np.nan
    v = verify(p, poisoned, ref)
    assert not v.ok and v.nonfinite == 1 and math.isnan(v.error)
    assert v.max_abs_diff == pytest.approx(0.0)             # the 31 finite elements match exactly
    for fill in (np.nan, np.inf):                          # nothing finite: nothing compared, no max
        none = verify(p, np.full_like(ref, fill), ref)
        assert not none.ok and none.nonfinite == 32 and none.max_abs_diff is None
    assert verify(p, ref * 1.001, ref, tolerance=1e-6).ok is False
    assert set(ok.as_dict()) == {"ok", "error", "tolerance", "elements", "nonfinite", "max_abs_diff"}
    with pytest.raises(ValueError):
        verify(p, ref[:, :1], ref)
