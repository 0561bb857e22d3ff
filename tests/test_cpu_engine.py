"""CpuEngine runs the tilde sub-GEMMs and must equal the float64 reference, write every dX
element (NaN poison), and zero the pixels no sub-GEMM covers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from conftest import cpu_spec, naive_dgrad, random_inputs
from miopen_solver import layouts
from miopen_solver.problem import ConvProblem
from miopen_solver.reference import dgrad_reference
from miopen_solver.runtime import get_engine
from miopen_solver.runtime.base import Timing
from miopen_solver.runtime.cpu import CpuEngine, coverage_mask, split_k_slices

EPS = {"fp32": 2.0 ** -24, "fp16": 2.0 ** -11, "bf16": 2.0 ** -8}
"""Unit roundoff of each storage type (round to nearest)."""
TINY = {"fp32": 2.0 ** -149, "fp16": 2.0 ** -24, "bf16": 2.0 ** -133}
"""Spacing of each storage type's subnormals: below the normal range rounding is absolute."""


def check_against_reference(problem, spec=None, seed=0):
    """Run the engine; assert every element was written, matches the float64 reference to
    storage rounding plus fp32 accumulation error, and is exactly 0 where no term exists."""
    spec = spec or cpu_spec(problem)
    dy, w = random_inputs(problem, seed)
    dx = CpuEngine().run(spec, dy, w)
    assert dx.shape == layouts.dx_shape(problem)
    assert dx.dtype == layouts.storage_dtype(problem.dtype)
    out = dx.astype(np.float64)
    assert np.isfinite(out).all(), "some dX element was never written (NaN poison survived)"
    ref = dgrad_reference(problem, dy, w)
    magnitude = dgrad_reference(problem, np.abs(dy.astype(np.float64)), np.abs(w.astype(np.float64)))
    gemm_k = problem.kpg * problem.Y * problem.X
    # one rounding to storage (+1 per split-K partial) and fp32 accumulation over GemmK terms
    roundings = 1 + max(0, spec.split_k - 1)
    bound = (2 * roundings * EPS[problem.dtype] * np.abs(ref)
             + (gemm_k + 2) * 2.0 ** -24 * magnitude * (1 + roundings * EPS[problem.dtype])
             + roundings * TINY[problem.dtype])
    if spec.split_k > 1:  # partial sums are rounded to storage before they are added
        bound = bound + 2 * roundings * EPS[problem.dtype] * magnitude
    bad = np.abs(out - ref) > bound
    assert not bad.any(), f"{bad.sum()} elements off; worst {np.max(np.abs(out - ref))}"
    assert (out[magnitude == 0] == 0).all(), "pixels without any term must be exactly 0"
    return dx


@st.composite
def problems(draw):
    G = draw(st.integers(1, 3))
    cpg = draw(st.integers(1, 5))
    kpg = draw(st.integers(1, 5))
    Y, X = draw(st.integers(1, 8)), draw(st.integers(1, 8))
    sH, sW = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    dH, dW = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    pH, pW = draw(st.integers(0, 4)), draw(st.integers(0, 4))
    min_h = max(1, dH * (Y - 1) + 1 - 2 * pH)
    min_w = max(1, dW * (X - 1) + 1 - 2 * pW)
    Hi = draw(st.integers(min_h, min_h + 9))
    Wi = draw(st.integers(min_w, min_w + 9))
    assume(Hi <= 24 and Wi <= 24)
    lay = draw(st.sampled_from(["NHWC", "NCHW"]))
    fil = draw(st.sampled_from([lay, "NHWC", "NCHW"]))
    return ConvProblem(N=draw(st.integers(1, 3)), C=G * cpg, Hi=Hi, Wi=Wi, K=G * kpg, Y=Y, X=X,
                       pH=pH, pW=pW, sH=sH, sW=sW, dH=dH, dW=dW, G=G,
                       dtype=draw(st.sampled_from(["fp32", "fp16", "bf16"])),
                       in_layout=lay, out_layout=draw(st.sampled_from([lay, "NHWC", "NCHW"])),
                       fil_layout=fil)


@given(problems(), st.integers(0, 2**16))
def test_engine_equals_reference_property(problem, seed):
    check_against_reference(problem, seed=seed)


@pytest.mark.parametrize("kw", [
    dict(Y=4, X=1, sH=3, sW=1, Hi=14, Wi=5),              # YDotSlice legacy formula differs (#575)
    dict(Y=7, X=4, sH=3, sW=3, Hi=17, Wi=13),
    dict(Y=5, X=6, sH=4, sW=4, Hi=16, Wi=18),
    dict(Y=1, X=1, sH=2, sW=2, Hi=8, Wi=8),               # 1x1 s2: 3/4 of dX zero-filled
    dict(Y=1, X=1, sH=2, sW=2, Hi=7, Wi=9),               # odd sizes: trailing row unreached
    dict(Y=3, X=3, sH=2, sW=2, dH=2, dW=2, pH=2, pW=2, Hi=9, Wi=10),  # gcd(s,d)=2: odd rows zero
    dict(Y=3, X=3, sH=1, sW=1, dH=2, dW=3, pH=2, pW=3, Hi=9, Wi=11),  # s1 dilated: one sub-GEMM
    dict(Y=3, X=3, pH=1, pW=1, Hi=1, Wi=6),               # H of 1
    dict(Y=1, X=3, pW=1, Hi=5, Wi=1),                     # W of 1
    dict(Y=2, X=2, sH=5, sW=5, Hi=11, Wi=12, pH=4, pW=0),  # stride > filter, big pad
    dict(Y=2, X=2, sH=2, sW=2, dH=3, dW=3, pH=1, pW=1, Hi=2, Wi=5),  # d > s: row 0 needs htilde < 0
])
@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
def test_explicit_cases(kw, dtype, layout):
    base = dict(N=2, C=6, K=4, G=1, dtype=dtype, in_layout=layout, out_layout=layout, fil_layout=layout)
    base.update(kw)
    check_against_reference(ConvProblem(**base))


@pytest.mark.parametrize("G,C,K", [(2, 6, 4), (3, 3, 3), (4, 8, 12)])
def test_groups_and_depthwise(G, C, K):
    p = ConvProblem(N=2, C=C, Hi=7, Wi=6, K=K, Y=3, X=3, pH=1, pW=1, sH=2, sW=1, G=G,
                    dtype="fp32", in_layout="NHWC", out_layout="NHWC", fil_layout="NHWC")
    check_against_reference(p)


def test_matches_naive_loop_definition():
    p = ConvProblem(N=1, C=4, Hi=7, Wi=5, K=6, Y=3, X=2, pH=1, pW=2, sH=2, sW=3, dH=2, dW=1, G=2,
                    dtype="fp32", in_layout="NCHW", out_layout="NHWC", fil_layout="NCHW")
    dy, w = random_inputs(p, 3)
    dx = CpuEngine().run(cpu_spec(p), dy, w)
    np.testing.assert_allclose(layouts.dx_to_nhwc(p, dx), naive_dgrad(p, dy, w), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype,split", [("fp32", 2), ("fp32", 5), ("fp16", 3), ("bf16", 4)])
def test_split_k_accumulates_and_zeroes(dtype, split):
    p = ConvProblem(N=2, C=4, Hi=9, Wi=8, K=8, Y=3, X=3, pH=1, pW=1, sH=2, sW=2, dtype=dtype,
                    in_layout="NHWC", out_layout="NHWC", fil_layout="NHWC")
    spec = cpu_spec(p, split_k=split, tile_k=16)
    assert spec.split_k == split and spec.zero_fill == "memset"
    check_against_reference(p, spec)


def test_split_k_slices():
    assert split_k_slices(100, 32, 1) == [(0, 100)]
    assert split_k_slices(100, 16, 2) == [(0, 64), (64, 100)]
    assert split_k_slices(72, 16, 4) == [(0, 32), (32, 64), (64, 72)]   # empty slice dropped
    for gk, tk, sk in [(9, 4, 3), (576, 32, 7), (5, 1, 5)]:
        sl = split_k_slices(gk, tk, sk)
        assert sl[0][0] == 0 and sl[-1][1] == gk
        assert all(a[1] == b[0] for a, b in zip(sl, sl[1:]))


def test_coverage_mask_1x1_stride2():
    p = ConvProblem(N=1, C=2, Hi=6, Wi=6, K=2, Y=1, X=1, sH=2, sW=2)
    mask = coverage_mask(p, cpu_spec(p).sub_gemms)
    expect = np.zeros((6, 6), bool)
    expect[::2, ::2] = True
    assert (mask == expect).all()


def test_every_run_is_poisoned_afresh(monkeypatch):
    """A zero-fill that silently failed would leave NaN; a stale buffer would hide it."""
    p = ConvProblem(N=1, C=2, Hi=6, Wi=6, K=2, Y=1, X=1, sH=2, sW=2)
    spec = cpu_spec(p)
    dy, w = random_inputs(p)
    engine = CpuEngine()
    first = engine.run(spec, dy, w)
    second = engine.run(spec, dy, w)
    assert first is not second and np.array_equal(first, second)
    import miopen_solver.runtime.cpu as cpu
    monkeypatch.setattr(cpu, "coverage_mask", lambda *a: np.ones((p.Hi, p.Wi), bool))
    assert np.isnan(engine.run(spec, dy, w).astype(np.float64)).sum() == (36 - 9) * 2


@pytest.mark.parametrize("chunk", [1, 300, 5000, 1 << 30])
def test_chunking_does_not_change_result(monkeypatch, chunk):
    import miopen_solver.runtime.cpu as cpu
    p = ConvProblem(N=3, C=4, Hi=9, Wi=7, K=6, Y=3, X=2, pH=1, pW=1, sH=2, sW=1, G=2)
    dy, w = random_inputs(p, 5)
    want = CpuEngine().run(cpu_spec(p), dy, w)
    monkeypatch.setattr(cpu, "CHUNK_BYTES", chunk)
    got = CpuEngine().run(cpu_spec(p), dy, w)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


def test_rejects_wrong_shapes_and_dtypes():
    p = ConvProblem(N=1, C=2, Hi=5, Wi=5, K=2, Y=3, X=3, in_layout="NHWC", out_layout="NHWC",
                    fil_layout="NHWC")
    dy, w = random_inputs(p)
    spec = cpu_spec(p)
    with pytest.raises(ValueError, match="dY has shape"):
        CpuEngine().run(spec, dy.reshape(1, 2, 3, 3), w)
    with pytest.raises(ValueError, match="W has dtype"):
        CpuEngine().run(spec, dy, w.astype(np.float16))


def test_time_returns_wall_timing():
    p = ConvProblem(N=1, C=2, Hi=5, Wi=5, K=2, Y=3, X=3)
    dy, w = random_inputs(p)
    t = CpuEngine().time(cpu_spec(p), dy, w, iters=3, warmup=1)
    assert isinstance(t, Timing) and t.method == "wall"
    assert len(t.times_ms) == 3 and all(x > 0 for x in t.times_ms)
    with pytest.raises(ValueError):
        CpuEngine().time(cpu_spec(p), dy, w, iters=0)


def test_get_engine_cpu():
    e = get_engine("cpu")
    assert isinstance(e, CpuEngine) and e.name == "cpu" and e.target.arch == "cpu"


@pytest.mark.parametrize("line,cfg", [
    ("convfp16 -n 2 -c 64 -H 6 -W 5 -k 96 -y 3 -x 3 -p 1 -q 1", "128,64,64,2,1,64,64,0,0,0,4,-1,4,3"),
    ("convbfp16 -n 2 -c 128 -H 9 -W 14 -k 192 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2", "128,128,64,1,1,128,128,0,0,0,3,-1,4,3,2"),
    ("convfp16 -n 2 -c 64 -H 4 -W 8 -k 256 -y 1 -x 1", "128,64,64,2,1,64,64,0,0,0,3,-1,4,3"),
])
def test_tma_split_k_pieces_are_the_kernels_k_tiles(line, cfg):
    """On the TMA schedule the CPU engine cuts GemmK as the kernel's work units do: slice z
    holds k-tiles [z*kt/S, (z+1)*kt/S) of kt = ceil(kpg/64) * taps, k-tile j being channel
    chunk j // taps of tap j % taps; every (tap, channel) lands in exactly one slice, and the
    engine's dX on the simulated sm_90 config matches the reference."""
    from miopen_solver.command import parse
    from miopen_solver.runtime.cpu import split_k_pieces
    from miopen_solver.spec import PerfConfig, make_spec
    from miopen_solver.target import get_target
    p = parse(f"{line} -F 2 --in_layout NHWC --out_layout NHWC --fil_layout NHWC".split()).problem
    spec = make_spec(p, get_target("sm_90"), PerfConfig.parse(cfg))
    for s in spec.sub_gemms:
        taps = s.y_dot_slice * s.x_dot_slice
        slices = split_k_pieces(spec, taps, p.kpg)
        assert len(slices) == spec.split_k and all(slices)
        kt = -(-p.kpg // 64) * taps
        assert [len(z) for z in slices] == [(z + 1) * kt // spec.split_k - z * kt // spec.split_k
                                            for z in range(spec.split_k)]
        seen = sorted((t, k) for z in slices for t, a, b in z for k in range(a, b))
        assert seen == [(t, k) for t in range(taps) for k in range(p.kpg)]
        assert slices[0][0] == (0, 0, min(64, p.kpg)) and (taps == 1 or slices[0][1][0] == 1)
    check_against_reference(p, spec)


@pytest.mark.parametrize("bad", ["x", None, 5, {"problem": 1}])
def test_an_engine_refuses_what_is_no_solution(bad):
    """run("x", dy, w) raised AttributeError from inside the engine: work that is neither a
    Solution nor a spec is a ValueError naming it."""
    with pytest.raises(ValueError, match="allowed: a Solution \\(DgradSolver.find_solution\\) or a validated spec"):
        CpuEngine().run(bad, np.zeros(1, np.float32), np.zeros(1, np.float32))
