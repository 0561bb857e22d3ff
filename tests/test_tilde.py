"""Tilde decomposition (research dgrad_kernels.md §2 worked examples, miopen.md §3.3)."""

from __future__ import annotations

from math import ceil, gcd

import pytest
from hypothesis import given
from hypothesis import strategies as st

from miopen_solver.problem import ConvProblem
from miopen_solver.tilde import axis_tilde, decompose


def square(Hi, Y, p=0, s=1, d=1, C=8, K=16, N=2, G=1):
    return ConvProblem(N=N, C=C, Hi=Hi, Wi=Hi, K=K, Y=Y, X=Y, pH=p, pW=p, sH=s, sW=s, dH=d, dW=d, G=G)


def test_3x3_s2_p1_hi56():
    p = square(56, 3, p=1, s=2)
    assert p.Ho == 28
    h = axis_tilde(56, 28, 3, 1, 2, 1)
    assert (h.gcd, h.tilde, h.dot, h.htilde, h.begin, h.end, h.slice) == (1, 2, 2, 29, 0, 29, 29)
    d = decompose(p)
    assert [(s.i_ytilde, s.i_xtilde) for s in d.sub_gemms] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    kpg = p.kpg
    assert [s.gemm_k for s in d.sub_gemms] == [4 * kpg, 2 * kpg, 2 * kpg, 1 * kpg]
    assert sum(s.gemm_k for s in d.sub_gemms) == 9 * kpg          # 9 taps per pixel in all
    s0, s3 = d.sub_gemms[0], d.sub_gemms[3]
    # phase 0: y in {0, 2}, hi = 2*htilde - 1: the shared slice's htilde = 0 (hi = -1) is
    # trimmed, so its rows start at htilde 1 (hi = 1) and end at htilde 28 (hi = 55)
    assert [yd * s0.y_stride + s0.y_offset for yd in range(s0.y_dot_slice)] == [0, 2]
    assert (s0.dx_h_stride, s0.dx_h_offset, s0.h_begin, s0.h_slice) == (2, 1, 1, 28)
    # phase 1: y = 1, hi = 2*htilde: htilde = 28 (hi = 56) is trimmed, rows 0 .. 54
    assert [yd * s3.y_stride + s3.y_offset for yd in range(s3.y_dot_slice)] == [1]
    assert (s3.dx_h_stride, s3.dx_h_offset, s3.h_begin, s3.h_slice) == (2, 0, 0, 28)
    assert s3.dx_h_offset + (s3.h_slice - 1) * s3.dx_h_stride == 54
    assert all(s.gemm_m == 2 * 28 * 28 and s.gemm_n == p.cpg for s in d.sub_gemms)   # 29*29 untrimmed
    assert all(s.dy_h_coeff == 1 for s in d.sub_gemms)
    assert not d.needs_zero_fill


def test_1x1_s2_skips_empty_phase_and_needs_zero_fill():
    p = square(56, 1, s=2)
    h = axis_tilde(56, p.Ho, 1, 0, 2, 1)
    assert (h.tilde, h.dot, h.htilde) == (2, 1, 28)
    assert h.dot_slice(0) == 1 and h.dot_slice(1) == 0                  # ceil(0/2) = 0
    d = decompose(p)
    assert len(d.sub_gemms) == 1 and d.num_phases == 4
    s = d.sub_gemms[0]
    assert (s.i_ytilde, s.i_xtilde, s.gemm_k, s.dx_h_stride, s.dx_h_offset) == (0, 0, p.kpg, 2, 0)
    assert d.needs_zero_fill                                             # 3/4 of dX


def test_s1_d2_is_one_sub_gemm():
    p = square(20, 3, p=2, d=2)
    d = decompose(p)
    assert len(d.sub_gemms) == 1
    s = d.sub_gemms[0]
    assert (s.y_stride, s.dy_h_coeff, s.y_dot_slice) == (1, 2, 3)        # ho = htilde - 2*ydot
    assert not d.needs_zero_fill


def test_s2_d2_one_sub_gemm_odd_rows_uncovered():
    p = square(16, 3, p=2, s=2, d=2)
    h = axis_tilde(16, p.Ho, 3, 2, 2, 2)
    assert (h.gcd, h.tilde) == (2, 1)
    d = decompose(p)
    assert len(d.sub_gemms) == 1 and d.sub_gemms[0].dy_h_coeff == 1
    assert d.needs_zero_fill


def legacy_ydot_slice(i, Y, s):
    """MIOpen V4R1's formula: (i+1)*YDot <= Y ? YDot : Y % YDot (issue #575)."""
    ydot = ceil(Y / s)
    return ydot if (i + 1) * ydot <= Y else Y % ydot


def test_ydot_slice_y4_s3_differs_from_legacy():
    h = axis_tilde(14, 4, 4, 0, 3, 1)
    ours = [h.dot_slice(i) for i in range(h.tilde)]
    assert ours == [2, 1, 1]                        # y = {0, 3}, {1}, {2}
    assert [legacy_ydot_slice(i, 4, 3) for i in range(3)] == [2, 2, 0]
    p = ConvProblem(N=1, C=2, Hi=14, Wi=3, K=2, Y=4, X=1, sH=3)
    assert [s.y_dot_slice for s in decompose(p).sub_gemms] == [2, 1, 1]


@pytest.mark.parametrize("Y,s", [(7, 3), (5, 4), (6, 4), (8, 5)])
def test_ydot_slice_other_legacy_failures(Y, s):
    h = axis_tilde(40, (40 - Y) // s + 1, Y, 0, s, 1)
    ours = [h.dot_slice(i) for i in range(h.tilde)]
    assert ours == [ceil((Y - i) / s) for i in range(s)]
    assert sum(ours) == Y
    assert ours != [legacy_ydot_slice(i, Y, s) for i in range(s)]


def test_decompose_rejects_3d():
    p = ConvProblem(N=1, C=1, Hi=4, Wi=4, K=1, Y=1, X=1, spatial_dim=3, Di=4, Z=1,
                    in_layout="NCDHW", out_layout="NCDHW", fil_layout="NCDHW")
    with pytest.raises(ValueError, match="2-D"):
        decompose(p)


def test_indices_are_contiguous_after_skipping():
    p = ConvProblem(N=1, C=2, Hi=12, Wi=12, K=2, Y=2, X=1, sH=3, sW=3)
    d = decompose(p)
    assert [s.index for s in d.sub_gemms] == list(range(len(d.sub_gemms)))
    assert len(d.sub_gemms) == 2 and d.num_phases == 9


axis_params = st.tuples(st.integers(1, 30), st.integers(1, 8), st.integers(0, 5), st.integers(1, 6),
                        st.integers(1, 5)).filter(lambda t: t[0] + 2 * t[2] - t[4] * (t[1] - 1) - 1 >= 0)


def rows_by_definition(Hi, Y, p, s, d):
    """dX rows that receive at least one term (exists y, 0 <= ho < Ho with hi = ho*s - p + y*d)."""
    Ho = (Hi + 2 * p - d * (Y - 1) - 1) // s + 1
    return {ho * s - p + y * d for ho in range(Ho) for y in range(Y)} & set(range(Hi))


def covered_rows(Hi, Y, p, s, d):
    h = axis_tilde(Hi, (Hi + 2 * p - d * (Y - 1) - 1) // s + 1, Y, p, s, d)
    rows = set()
    for i in range(h.tilde):
        if h.dot_slice(i) > 0:
            rows |= {h.dx_offset(i) + t * s for t in range(h.slice)}
    return rows & set(range(Hi)), h


@given(axis_params)
def test_axis_taps_partition_the_filter(params):
    Hi, Y, p, s, d = params
    h = axis_tilde(Hi, (Hi + 2 * p - d * (Y - 1) - 1) // s + 1, Y, p, s, d)
    taps = [yd * h.tilde + i for i in range(h.tilde) for yd in range(h.dot_slice(i))]
    assert sorted(taps) == list(range(Y))                     # every filter row exactly once


@given(axis_params)
def test_axis_covers_every_row_with_a_term(params):
    Hi, Y, p, s, d = params
    rows, h = covered_rows(Hi, Y, p, s, d)
    assert rows_by_definition(Hi, Y, p, s, d) <= rows
    # a covered row satisfies (hi + p) % gcd(s, d) == 0 and its phase i (d*i == hi + p mod s,
    # 0 <= i < s/gcd) has a filter row (i < Y). The converse fails: with d > s a row can need
    # htilde < 0 (Hi=2, Y=2, p=1, s=2, d=3: row 0), so it is uncovered although it passes
    # both tests -- it gets no term, so the zero-fill must write it (needs_zero_fill below).
    g = gcd(s, d)
    possible = {hi for hi in range(Hi) if (hi + p) % g == 0
                and next(i for i in range(s // g) if (d * i - hi - p) % s == 0) < Y}
    assert rows <= possible


@given(axis_params)
def test_phases_write_disjoint_rows(params):
    Hi, Y, p, s, d = params
    h = axis_tilde(Hi, (Hi + 2 * p - d * (Y - 1) - 1) // s + 1, Y, p, s, d)
    seen = set()
    for i in range(h.tilde):
        if h.dot_slice(i):
            rows = {h.dx_offset(i) + t * s for t in range(h.slice)} & set(range(Hi))
            assert not rows & seen
            seen |= rows


@given(axis_params, axis_params)
def test_needs_zero_fill_iff_some_pixel_uncovered(hp, wp):
    Hi, Y, pH, sH, dH = hp
    Wi, X, pW, sW, dW = wp
    p = ConvProblem(N=1, C=2, Hi=Hi, Wi=Wi, K=2, Y=Y, X=X, pH=pH, pW=pW, sH=sH, sW=sW, dH=dH, dW=dW)
    rows, _ = covered_rows(Hi, Y, pH, sH, dH)
    cols, _ = covered_rows(Wi, X, pW, sW, dW)
    d = decompose(p)
    assert d.needs_zero_fill == (len(rows) < Hi or len(cols) < Wi)
    for s in d.sub_gemms:
        assert s.gemm_m == p.N * s.h_slice * s.w_slice
        assert s.gemm_n == p.cpg and s.gemm_k == s.taps * p.kpg
        assert s.dx_h_stride == sH and s.dy_h_coeff == dH // gcd(sH, dH)


@given(Hi=st.integers(1, 40), Y=st.integers(1, 9), s=st.integers(1, 6), d=st.integers(1, 4), data=st.data())
def test_phase_slices_hold_exactly_the_phase_rows_inside_dx(Hi, Y, s, d, data):
    """Each phase's own slice (AxisTilde.phase_slice) is the shared HTildeSlice trimmed to the
    rows whose dX row lies in [0, Hi): the same dX rows, none outside, in the same order (a
    phase with no row inside has an empty slice, and no sub-GEMM)."""
    p = data.draw(st.integers(0, 2 * Y))
    Ho = (Hi + 2 * p - d * (Y - 1) - 1) // s + 1
    if Ho < 1:
        return
    h = axis_tilde(Hi, Ho, Y, p, s, d)
    for i in h.phases():
        begin, count, off = h.phase_slice(i)
        shared = [h.dx_offset(i) + s * t for t in range(h.slice)]
        inside = [r for r in shared if 0 <= r < Hi]
        assert [off + s * t for t in range(count)] == inside and count == h.rows_written(i)
        assert off == h.dilation * i + s * begin - p                     # the dX row of htilde = begin
