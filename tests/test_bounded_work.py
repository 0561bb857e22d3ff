"""Work is bounded by the problem's size, never by a value's magnitude (design.md rule).

A stride of 10^5 with a 3x3 filter has YTilde = 10^5 tilde phases per axis, of which only
the first Y have taps: the decomposition, applicability, default config, kernel records,
the CPU engine and the float64 reference must all see 3 x 3 sub-GEMMs, not 10^10 phases.
Likewise a pad or dilation of 10^6 around a 1-pixel image must not allocate a 10^6-row
buffer. Work is measured by counting Python and C function calls (the same on any machine,
however busy) and memory by tracemalloc (numpy reports its buffers to it), never by the
clock.
"""

from __future__ import annotations

import tracemalloc
from math import gcd

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import count_calls, cpu_spec, naive_dgrad, random_inputs
from miopen_solver import applicability as ap
from miopen_solver.errors import PerfConfigError
from miopen_solver.problem import ConvProblem
from miopen_solver.reference import dgrad_reference, verify
from miopen_solver.runtime.cpu import CpuEngine
from miopen_solver.solver import DgradSolver
from miopen_solver.spec import cached_decompose, is_valid_performance_config, PerfConfig
from miopen_solver.target import get_target
from miopen_solver.tilde import MAX_SUB_GEMMS, decompose

ARCHS = ("gfx90a", "gfx942", "sm_80", "sm_90", "cpu")
INT_MAX = 2**31 - 1


def nhwc(**kw) -> ConvProblem:
    base = dict(N=2, C=16, Hi=14, Wi=14, K=16, Y=3, X=3, pH=1, pW=1, dtype="fp16",
                in_layout="NHWC", out_layout="NHWC", fil_layout="NHWC")
    return ConvProblem(**{**base, **kw})


# ------------------------------------------------------------------ the tilde phases
def _ceil(a, b):
    return -(-a // b)


def brute_force_axis(size_in, size_out, filt, pad, stride, dil):
    """Every tilde phase of one axis, by the definitions (CK's transform, module docstring
    of miopen_solver.tilde), enumerated one by one: ``[(i, YDotSlice, slice, begin, dX
    offset)]`` for the phases with taps that write a dX row, each slice trimmed row by row to
    the rows whose dX row lies inside dX; and the same for phase 0 over the shared slice's
    first row, the placeholder's where no pair of phases writes."""
    tilde = stride // gcd(stride, dil)
    htilde = size_out + _ceil(dil * (filt - 1), stride)
    begin = max(0, pad - dil * (tilde - 1)) // stride
    end = min(htilde, _ceil(pad + size_in - 1, stride) + 1)
    out = []
    for i in range(tilde):
        dot_slice = max(0, _ceil(filt - i, tilde))
        if dot_slice > 0 and end - begin > 0:
            base = dil * i + stride * begin - pad
            inside = [t for t in range(end - begin) if 0 <= base + stride * t < size_in]   # the phase's own rows
            if inside:
                out.append((i, dot_slice, len(inside), begin + inside[0], base + stride * inside[0]))
    first = (0, max(0, _ceil(filt, tilde)), 1, begin, stride * begin - pad)
    return out, first


def brute_force_sub_gemms(p):
    rows, row0 = brute_force_axis(p.Hi, p.Ho, p.Y, p.pH, p.sH, p.dH)
    cols, col0 = brute_force_axis(p.Wi, p.Wo, p.X, p.pW, p.sW, p.dW)
    if not rows or not cols:            # no tap reaches dX: the one placeholder, writing nothing
        rows, cols = [row0], [col0]
    return [(iy, ix, p.N * hs * ws, yds * xds * p.kpg, hb, wb, ho, wo)
            for iy, yds, hs, hb, ho in rows for ix, xds, ws, wb, wo in cols]


def ours(p):
    return [(s.i_ytilde, s.i_xtilde, s.gemm_m, s.gemm_k, s.h_begin, s.w_begin, s.dx_h_offset, s.dx_w_offset)
            for s in decompose(p).sub_gemms]


@st.composite
def axis(draw, max_stride=12):
    filt, stride, dil, pad = (draw(st.integers(1, 8)), draw(st.integers(1, max_stride)),
                              draw(st.integers(1, 6)), draw(st.integers(0, 8)))
    lo = max(1, dil * (filt - 1) + 1 - 2 * pad)
    return filt, stride, dil, pad, draw(st.integers(lo, lo + 20))


@settings(max_examples=300, deadline=None)
@given(axis(), axis(), st.integers(1, 3))
def test_phases_equal_the_brute_force_enumeration(ha, wa, n):
    (Y, sH, dH, pH, Hi), (X, sW, dW, pW, Wi) = ha, wa
    p = ConvProblem(N=n, C=4, Hi=Hi, Wi=Wi, K=6, Y=Y, X=X, pH=pH, pW=pW, sH=sH, sW=sW, dH=dH, dW=dW)
    assert ours(p) == brute_force_sub_gemms(p)


@pytest.mark.parametrize("stride", [10**4, 10**5, 2**20 + 7])
def test_huge_strides_equal_the_brute_force_per_axis(stride):
    # The brute force walks all YTilde phases of one axis (10^5 is fine); the 2-D product
    # of 10^10 phases is what the solver must never walk. One row per phase lies near dX:
    # row phase i's is 2*i - 1 (dilation 2, pad 1), so phases 1 and 2 write; column phase
    # j's is j - 2 (pad 2), so phases 2, 3 and 4 write: 2 x 3 sub-GEMMs, not 3 x 5.
    p = nhwc(sH=stride, sW=stride - 1, dH=2, Y=3, X=5, pW=2)
    assert ours(p) == brute_force_sub_gemms(p)
    assert len(decompose(p).sub_gemms) == 2 * 3


@pytest.mark.parametrize("stride", [10**5, 10**9, INT_MAX - 100])
def test_a_huge_stride_costs_what_a_small_one_costs(stride):
    """is_applicable, the default config, the solution and its kernel source: as many calls
    at stride 10^9 as at stride Y + 1 (3 x 3 sub-GEMMs there; 2 x 2 here, as phase 0's only
    row and column, dX row -1 by the pad, write nothing), on every arch."""
    def work(p, arch):
        cached_decompose.cache_clear()
        t = get_target(arch)
        verdict = DgradSolver().is_applicable(p, t)
        assert verdict.ok, verdict
        sol = DgradSolver().get_solution(p, t)
        return len(sol.spec.sub_gemms), len(sol.kernels[0].source.text)

    for arch in ARCHS:
        work(nhwc(sH=4, sW=4), arch)                                     # warm caches and imports
        (subs_small, _), small = count_calls(lambda: work(nhwc(sH=4, sW=4), arch))
        (subs_huge, _), huge = count_calls(lambda: work(nhwc(sH=stride, sW=stride, Hi=3, Wi=3), arch))
        assert (subs_small, subs_huge) == (9, 4)
        assert huge <= 1.5 * small, (arch, small, huge)


def test_the_zero_fill_verdict_is_counted_not_enumerated():
    # Rows per phase are counted in O(1); a 2^30-row image costs nothing more than a small one.
    small, n_small = count_calls(lambda: decompose(nhwc(Hi=30, Wi=30, sH=3, sW=3, Y=1, X=1, pH=0, pW=0)))
    big, n_big = count_calls(lambda: decompose(nhwc(N=1, C=1, K=1, Hi=2**30, Wi=7, sH=3, sW=3, Y=1, X=1,
                                                    pH=0, pW=0)))
    assert small.needs_zero_fill and big.needs_zero_fill
    assert n_big <= 1.5 * n_small


# ------------------------------------------------------------------ TOO_MANY_SUB_GEMMS
@pytest.mark.parametrize("arch", ARCHS)
def test_too_many_sub_gemms_is_a_reason_found_without_decomposing(arch):
    # 30 x 30 filter with stride 30 and pad 1: 900 sub-GEMMs > 862 (64 KiB of 76-byte
    # records). (Without the pad it is a patch embedding, which the patch GEMM runs.)
    p = nhwc(Y=30, X=30, sH=30, sW=30, Hi=60, Wi=60, pH=1, pW=1, C=8, K=8)
    v, calls = count_calls(lambda: DgradSolver().is_applicable(p, get_target(arch)))
    assert v.codes == ("TOO_MANY_SUB_GEMMS",)
    assert "30 x 30 = 900 tilde sub-GEMMs" in v.reasons[0].message and str(MAX_SUB_GEMMS) in v.reasons[0].message
    assert calls < 2000
    with pytest.raises(PerfConfigError, match="900 tilde sub-GEMMs"):
        decompose(p)
    ok, why = is_valid_performance_config(p, get_target(arch), PerfConfig(stages=2))   # never raises
    assert not ok and "sub-GEMMs" in why
    # 29 x 29 = 841 <= 862: applicable, and its kernel takes every record.
    q = p.replace(Y=29, X=29, sH=29, sW=29)
    assert DgradSolver().is_applicable(q, get_target(arch)).ok
    assert len(decompose(q).sub_gemms) == 29 * 29 <= MAX_SUB_GEMMS
    # a huge filter with stride 1 is one sub-GEMM: the limit is on phases, not taps
    assert len(decompose(p.replace(sH=1, sW=1, Hi=30, Wi=30)).sub_gemms) == 1


def test_the_limit_is_the_constant_table():
    from miopen_solver.kernels.emit import SUB_FIELDS
    assert MAX_SUB_GEMMS == 65536 // (len(SUB_FIELDS) * 4)


# ------------------------------------------------------------------ INDEX_OVERFLOW of coordinates
@pytest.mark.parametrize("arch", ARCHS)
def test_coordinates_past_int32_are_not_applicable(arch):
    t = get_target(arch)
    # each value fits an int, the arithmetic the kernels do on them would not
    cases = [
        (nhwc(sH=INT_MAX, Hi=3), "2*(Hi + 2*pH) + sH = 2147483657"),
        (nhwc(sW=INT_MAX - 5, Wi=1), "2*(Wi + 2*pW) + sW = 2147483648"),
        (nhwc(pH=2**29, Hi=1, Y=1), "2*(Hi + 2*pH) + sH = 2147483651"),
    ]
    for p, needle in cases:
        v = DgradSolver().is_applicable(p, t)
        assert "INDEX_OVERFLOW" in v.codes and needle in str(v.reasons[0])
    # just inside: 2*(Hi + 2*pH) + sH = 2^31 - 1
    assert "INDEX_OVERFLOW" not in ap.check(nhwc(sH=INT_MAX - 2 * (3 + 2), Hi=3), t).codes
    # The dilation halo is no GemmM: a 1-pixel dX that no tap reaches (the shared slices are
    # 50002 rows, as the refusal "HTildeSlice*WTildeSlice = 50002*50002" once said) runs the
    # one placeholder sub-GEMM of N rows in one launch, and its zero fill.
    halo = nhwc(N=2, Hi=1, Wi=1, Y=2, X=2, sH=2, sW=2, dH=200001, dW=200001, pH=100001, pW=100001)
    assert ap.check(halo, t).ok and ap.batch_chunks(halo) == ((0, 2),)
    d = decompose(halo)
    assert [s.gemm_m for s in d.sub_gemms] == [2] and d.needs_zero_fill


def test_gemm_m_past_the_limit_names_the_rows_written(monkeypatch):
    """GemmM of one image is the largest sub-GEMM's rows written (per-phase slices), not the
    shared slices: the 3x3/s2/p1 problem on 20x20 has 10x10 rows per phase (shared slices
    11x11). With the limits lowered (1600 elements, a tile's headroom 1300 rows), 3 images
    fit a launch (3 * 100 + 1300 <= 1600; the shared slices gave 2); with 1550 rows of
    headroom not one does, and the refusal names 10*10."""
    monkeypatch.setattr(ap, "INDEX_LIMIT", 1600)
    monkeypatch.setattr(ap, "GEMM_M_HEADROOM", 1300)
    p = nhwc(N=6, C=1, K=1, Hi=20, Wi=20, sH=2, sW=2)
    t = get_target("gfx942")
    assert ap.check(p, t).ok and ap.images_per_launch(p) == 3 and ap.batch_chunks(p) == ((0, 3), (3, 3))
    monkeypatch.setattr(ap, "GEMM_M_HEADROOM", 1550)
    v = ap.check(p, t)
    assert v.codes == ("INDEX_OVERFLOW",)
    assert "GemmM of one image = HTildeSlice*WTildeSlice = 10*10 = 100 (+1550 rows of a tile)" in v.reasons[0].message


@settings(max_examples=300, deadline=None)
@given(axis(max_stride=40), st.integers(1, 40))
def test_every_coordinate_the_kernels_form_is_within_the_bound(a, size):
    """The bound 2*(Hi + 2*pH) + sH covers every row index the kernels compute: dX rows
    ``htl*sH + dx_offset`` (and the product ``htl*sH``), dY rows ``htilde - ydot*coeff``,
    the naive reference's ``hi + pH - y*dH`` and the zero fill's ``hi + pH - dH*i``."""
    filt, stride, dil, pad, _ = a
    lo = max(1, dil * (filt - 1) + 1 - 2 * pad)
    p = ConvProblem(N=1, C=1, Hi=lo + size, Wi=1, K=1, Y=filt, X=1, pH=pad, sH=stride, dH=dil)
    bound = 2 * (p.Hi + 2 * p.pH) + p.sH
    values = []
    for s in decompose(p).sub_gemms:
        for htl in range(s.h_slice):
            values += [htl * s.dx_h_stride, htl * s.dx_h_stride + s.dx_h_offset]
            values += [s.h_begin + htl - yd * s.dy_h_coeff for yd in range(s.y_dot_slice)]
    for hi in range(p.Hi):
        values += [hi + p.pH - y * p.dH for y in range(p.Y)]
    assert max(abs(v) for v in values) <= bound


# ------------------------------------------------------------------ CPU engine and reference
def _memory_bound(p):
    """What a run may allocate at the peak: a few float64 copies of the three tensors, plus
    a megabyte of chunks and bookkeeping -- nothing that grows with a pad or dilation."""
    return (1 << 20) + 16 * 8 * (p.dy_elems + p.dx_elems + p.w_elems)


def _peak_bytes(fn):
    tracemalloc.start()
    try:
        result = fn()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("kw", [
    dict(Y=3, X=3, pH=10**6, pW=10**6, dH=10**6, dW=10**6, Hi=1, Wi=1),        # dilation and pad
    dict(Y=1, X=1, pH=10**6, pW=10**6, sH=10**6, sW=10**6, Hi=1, Wi=1),        # pad and stride
    dict(Y=3, X=2, pH=10**6, pW=3, sH=3, sW=10**6, dH=999_999, dW=2, Hi=9, Wi=7),
    dict(Y=2, X=2, pH=10**5 + 1, pW=1, sH=2, sW=1, dH=2 * 10**5 + 1, dW=1, Hi=1, Wi=4),   # phase 0 writes nothing
])
def test_engine_and_reference_with_huge_pads_and_dilations(kw):
    """Equal to the textbook loops (conftest.naive_dgrad), in memory of the tensors' size
    (the old code padded dY by the dilation and dX by the pad: 600 GiB here)."""
    p = nhwc(N=2, C=3, K=2, dtype="fp32", **kw)
    dy, w = random_inputs(p, seed=7)
    want = naive_dgrad(p, dy, w)
    ref, peak_ref = _peak_bytes(lambda: dgrad_reference(p, dy, w))
    np.testing.assert_allclose(ref, want, rtol=1e-12, atol=1e-12)
    spec = cpu_spec(p)
    dx, peak_engine = _peak_bytes(lambda: CpuEngine().run(spec, dy, w))
    np.testing.assert_allclose(dx.astype(np.float64), want, rtol=1e-5, atol=1e-6)
    assert peak_ref < _memory_bound(p) and peak_engine < _memory_bound(p), (peak_ref, peak_engine)


@pytest.mark.parametrize("kw", [
    dict(Y=3, X=1, pH=10**5, dH=10**5, Hi=2, Wi=8),                         # row pad and dilation
    dict(Y=1, X=3, pW=8 * 10**5, dW=8 * 10**5, Hi=2, Wi=8),                 # column shifts, multiples of 8
    dict(Y=3, X=1, pH=10**5 - 1, dH=10**5, Hi=4, Wi=8),                     # the first tap reads padding only
])
def test_nchw_tma_engine_with_huge_pads_and_dilations(kw):
    """The NCHW TMA schedule's CPU engine (nchw_tma_run) sums each tap over the dX rows and
    columns whose dY reads are inside dY: equal to the float64 reference in memory of the
    tensors' size, and the host-memory estimate says so too (it padded dY by the pad and the
    dilation: 3 GB and 15 s for a 3x1 filter with pad and dilation 10^5)."""
    from miopen_solver.memory import cpu_engine_bytes, engine_plan
    from miopen_solver.nchw_tma import nchw_tma_reason
    sm90 = get_target("sm_90")
    p = ConvProblem(N=2, C=8, K=64, dtype="fp16", in_layout="NCHW", out_layout="NCHW", fil_layout="NCHW", **kw)
    assert nchw_tma_reason(p, sm90) is None
    sol = DgradSolver().find_solution(p, sm90, perf_config="64,64,64,1,1,64,64,0,0,0,1,-1,4,13")
    dy, w = random_inputs(p, seed=3)
    dx, peak = _peak_bytes(lambda: CpuEngine(sm90).run(sol, dy, w))
    v = verify(p, dx, dgrad_reference(p, dy, w))
    assert v.ok and v.nonfinite == 0, v
    assert peak < _memory_bound(p), peak
    assert cpu_engine_bytes(p, engine_plan(sol.spec)) < _memory_bound(p)


@st.composite
def far_problems(draw):
    """Small tensors, with pads, strides and dilations up to far past the image."""
    big = st.one_of(st.integers(1, 4), st.integers(5, 10**6))
    Y, X = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    sH, sW, dH, dW = draw(big), draw(big), draw(big), draw(big)
    pH, pW = draw(st.one_of(st.integers(0, 3), st.integers(4, 10**6))), draw(st.integers(0, 3))
    Hi = max(1, dH * (Y - 1) + 1 - 2 * pH) + draw(st.integers(0, 3))
    Wi = max(1, dW * (X - 1) + 1 - 2 * pW) + draw(st.integers(0, 3))
    if Hi > 12 or Wi > 12:
        Hi, pH = 1 + draw(st.integers(0, 3)), (dH * (Y - 1) + 1) // 2 + draw(st.integers(0, 3))
        Wi, pW = 1 + draw(st.integers(0, 3)), (dW * (X - 1) + 1) // 2 + draw(st.integers(0, 3))
    return ConvProblem(N=1, C=2, Hi=Hi, Wi=Wi, K=2, Y=Y, X=X, pH=pH, pW=pW, sH=sH, sW=sW, dH=dH, dW=dW,
                       in_layout="NHWC", out_layout="NHWC", fil_layout="NHWC")


@settings(max_examples=120, deadline=None)
@given(far_problems())
def test_engine_and_reference_far_values_property(p):
    dy, w = random_inputs(p, seed=1)
    want = naive_dgrad(p, dy, w)
    ref, peak = _peak_bytes(lambda: dgrad_reference(p, dy, w))
    np.testing.assert_allclose(ref, want, rtol=1e-12, atol=1e-12)
    dx, peak_engine = _peak_bytes(lambda: CpuEngine().run(cpu_spec(p), dy, w))
    np.testing.assert_allclose(dx.astype(np.float64), want, rtol=1e-5, atol=1e-6)
    assert peak < _memory_bound(p) and peak_engine < _memory_bound(p)


# ------------------------------------------------------------------ the driver, end to end
HUGE_STRIDE = ("convfp16 -n 1 -c 8 -H 14 -W 14 -k 8 -y 3 -x 3 -p 1 -q 1 -u 100000 -v 100000 -l 1 -j 1 -g 1 "
               "-F 2 -t 1 -i 2 --in_layout NHWC --out_layout NHWC --fil_layout NHWC")


def test_a_huge_stride_line_runs_applies_and_batches(capsys, tmp_path, monkeypatch):
    """The issue's reproducers: applicable answered in 51 s (-u 10000), a run with --timeout 1
    and -u 100000 never finished and one such line stalled a whole batch. The worker
    timeout here is generous (this is not a speed test); the library's share is counted
    above."""
    from driver.cli import main
    monkeypatch.setenv("MIOPEN_DGRAD_PERFDB", str(tmp_path / "perfdb.sqlite"))
    assert main(["applicable", *HUGE_STRIDE.split()]) == 0
    assert "applicable" in capsys.readouterr().out
    assert main([*HUGE_STRIDE.split(), "--backend", "cpu", "--timeout", "120"]) == 0
    out = capsys.readouterr().out
    assert "Verifies OK on CPU reference" in out and "stats: bwdd-conv3x3u100000" in out
    path = tmp_path / "lines.txt"
    path.write_text(HUGE_STRIDE + "\n" + HUGE_STRIDE.replace("100000", "2") + "\n")
    assert main(["batch", str(path), "--backend", "cpu", "--timeout", "120"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == "Summary: 2 ok"


# ------------------------------------------------------------------ a file's lines
FILE_LINES = (
    "convfp16 -n 2 -c 16 -H 8 -W 8 -k 16 -y 3 -x 3 -F 1",                     # skipped (not -F 2)
    "convfp16 -n 2 -c 16 -H 8 -W 8 -k 16 -y 3 -x 3 -g 3 -F 2",                   # error (its flags)
    "convint8 -n 2 -c 16 -H 8 -W 8 -k 16 -y 3 -x 3 -F 2",                      # error (its base)
    "convfp16 -n 2 -c 16 -H 8 -W 8 -k 16 -y 3 -x 3 -g 16 -u 40000 -H 70000 -W 70000 -F 2",  # not applicable
    "MIOpen(HIP): Info [Find] not a command",                                 # ignored
    "# a comment",
)


def _increments(run, sizes=(40, 80, 120)) -> tuple:
    """The calls ``run(k)`` makes for k copies of :data:`FILE_LINES`, as the increments
    from one size to the next (one warm-up run first: imports and caches)."""
    run(1)
    counts = [count_calls(lambda: run(k))[1] for k in sizes]
    return counts[1] - counts[0], counts[2] - counts[1]


def _lines_file(tmp_path, k) -> str:
    path = tmp_path / f"lines{k}.txt"
    path.write_text("\n".join(FILE_LINES * k) + "\n")
    return str(path)


@pytest.mark.parametrize("args", [dict(backend="cpu"), dict(backend="cpu", arch="gfx942", csv="rows.csv")])
def test_batch_work_per_line_does_not_grow_with_the_file(tmp_path, monkeypatch, args):
    """A batch of 32,000 lines took 11x the time of 8,000 (each row counted the failing rows
    so far for the progress line): the calls of each equal step of lines must be equal --
    a pass over the rows so far per row, a re-read or a rebuilt report makes the second step
    cost more than the first."""
    from driver.batch_cmd import batch_file
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MIOPEN_DGRAD_PERFDB", str(tmp_path / "perfdb.sqlite"))

    def run(k):
        status, lines = batch_file(_lines_file(tmp_path, k), emit=lambda line: None, **args)
        assert status == 1 and lines[0].startswith(f"Summary: {k} not-applicable, {k} skipped, {2 * k} error")
    first, second = _increments(run)
    assert second <= 1.01 * first, (first, second)


def test_tune_file_work_per_line_does_not_grow_with_the_file(tmp_path):
    """``tune --file`` reads its lines as batch does (skips, errors, the same problem twice):
    equal steps of lines, equal calls."""
    from driver.campaign import CampaignOptions, read_problems
    from driver.run_cmd import resolve_device
    device = resolve_device("cpu", None)
    tune = "convfp16 -n 1 -c 8 -H 6 -W 6 -k 8 -y 3 -x 3 -p 1 -q 1 -F 2"

    def run(k):
        path = _lines_file(tmp_path, k)
        with open(path, "a") as fh:
            fh.write(f"{tune}\n" * (k + 1))             # the first is tuned, the rest are "same problem"
        problems, skipped, ignored = read_problems(CampaignOptions(file=path, max_configs=2), device, 1)
        assert len(problems) == 1 and len(skipped) == 5 * k and ignored == k
    first, second = _increments(run)
    assert second <= 1.01 * first, (first, second)


@pytest.mark.parametrize("y,x", [(5000, 5000), (20000, 20000), (1, 40000)])
def test_a_filter_of_millions_of_taps_plans_without_memory_per_tap(y, x):
    """The memory plan (memory.engine_plan) and the CPU engine's k-slices look at the taps by
    axis: a 20000 x 20000 filter (4e8 taps, W under 2 GiB) is planned in O(Y + X) memory, as a
    3x3 one, not in a record per tap (a fresh user's run reached 5.5 GB before any check)."""
    from miopen_solver.memory import engine_plan
    from miopen_solver.runtime.cpu import split_k_pieces
    p = ConvProblem(N=1, C=1, K=1, Hi=y, Wi=x, Y=y, X=x, dtype="fp16", in_layout="NHWC", out_layout="NHWC",
                    fil_layout="NHWC")
    spec = cpu_spec(p)
    tracemalloc.start()
    try:
        plan = engine_plan(spec)
        s = spec.sub_gemms[0]
        taps = s.y_dot_slice * s.x_dot_slice
        pieces = split_k_pieces(spec, taps, p.kpg)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (plan.pad_rows, plan.pad_cols) == (2 * (y - 1), 2 * (x - 1))     # dY is one pixel
    assert taps == y * x and sum(len(z) for z in pieces) == taps
    assert pieces[0][0] == (0, 0, 1) and pieces[-1][-1] == (taps - 1, 0, 1)
    assert peak < 4 * (y + x) * 200 + (1 << 20), peak


@pytest.mark.parametrize("kpg,taps,tile_k,split", [(40, 9, 32, 3), (64, 1, 64, 4), (3, 49, 16, 5), (128, 4, 64, 1)])
def test_k_pieces_by_index_are_the_listed_pieces(kpg, taps, tile_k, split):
    """KPieces computes the (tap, k0, k1) pieces of a k-slice by index: the same pieces, in the
    same order, as listing every tap of the slice's GemmK range, with every (tap, k) once."""
    from miopen_solver.runtime.cpu import KPieces, split_k_slices
    seen = []
    for k0, k1 in split_k_slices(taps * kpg, tile_k, split):
        listed = [(t, max(k0, t * kpg) - t * kpg, min(k1, (t + 1) * kpg) - t * kpg)
                  for t in range(taps) if t * kpg < k1 and (t + 1) * kpg > k0]
        got = KPieces(taps, kpg, k0, k1)
        assert list(got) == listed and len(got) == len(listed) and got[-1] == listed[-1]
        seen += [(t, k) for t, a, b in got for k in range(a, b)]
    assert seen == [(t, k) for t in range(taps) for k in range(kpg)]


@given(taps=st.integers(1, 60), kpg=st.integers(1, 70), tile_k=st.sampled_from([0, 16, 32, 64]),
       split=st.integers(1, 5), data=st.data())
@settings(max_examples=200, deadline=None)
def test_k_pieces_live_are_the_filtered_pieces_in_order(taps, kpg, tile_k, split, data):
    """KPieces.live visits only the live taps yet yields exactly the pieces of a filtered walk,
    in the same order (the CPU engine's sums keep their order, so its numbers do not move)."""
    from miopen_solver.runtime.cpu import KPieces, split_k_slices
    live = sorted(data.draw(st.sets(st.integers(0, taps - 1))))
    if tile_k:
        kt = -(-kpg // tile_k) * taps
        slices = [KPieces(taps, kpg, z * kt // split, (z + 1) * kt // split, tile_k) for z in range(split)]
    else:
        slices = [KPieces(taps, kpg, k0, k1) for k0, k1 in split_k_slices(taps * kpg, 16, split)]
    for piece in slices:
        assert list(piece.live(live)) == [x for x in piece if x[0] in set(live)]


def test_a_huge_filter_over_a_small_image_costs_its_live_taps():
    """8x8 dX under a filter padded to reach it: only the taps that meet the image read dY.
    The CPU engine walked every tap (a 5000x5000 filter took 34 s a launch); its work now
    follows the live taps: a 3000x3000 filter costs what a 300x300 one does (calls counted),
    and the result is the float64 reference's."""
    def problem(f):
        return ConvProblem(N=1, C=2, K=2, Hi=8, Wi=8, Y=f, X=f, pH=(f - 8) // 2, pW=(f - 8) // 2, dtype="fp16",
                           in_layout="NHWC", out_layout="NHWC", fil_layout="NHWC")
    work = {}
    for f in (300, 3000):
        p = problem(f)
        spec = cpu_spec(p)
        dy, w = random_inputs(p, seed=3)
        out, work[f] = count_calls(lambda: CpuEngine().run(spec, dy, w))
        if f == 300:
            assert verify(p, np.asarray(out), dgrad_reference(p, dy, w)).ok
    assert work[3000] <= 1.5 * work[300], work
