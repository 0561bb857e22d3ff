"""Tilde phases that write no dX row (pads, strides and dilations far past a tiny image).

Such a phase once kept the shared slice (HTildeSlice = HEnd - HBegin, which grows with the
pad or dilation): its sub-GEMM wrote nothing over up to 10^5 rows, the grid grew with a
flag's magnitude, and tiny problems were refused as ``INDEX_OVERFLOW`` (GemmM of the shared
slices) or ``TOO_MANY_SUB_GEMMS`` (every phase with taps counted). Now only pairs of phases
that write rows are sub-GEMMs, so GemmM sums to at most ``N*Hi*Wi``; a problem whose dX no
tap reaches runs one placeholder sub-GEMM of N rows that writes nothing, and the zero fill
writes all of dX. Brute force here is by dX rows (at most a few per axis), independent of
:meth:`~miopen_solver.tilde.AxisTilde.phase_slice` and its ``valid_range``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kernel_emu
from conftest import count_calls, cpu_spec
from miopen_solver import applicability as ap
from miopen_solver.command import parse
from miopen_solver.problem import ConvProblem
from miopen_solver.solver import DgradSolver
from miopen_solver.target import get_target
from miopen_solver.tilde import MAX_SUB_GEMMS, axes, axis_tilde, decompose, too_many_sub_gemms
from test_cpu_engine import check_against_reference

NHWC = "--in_layout NHWC --out_layout NHWC --fil_layout NHWC"
HEAD = "convfp16 -n 2 -c 8 -k 8 -g 1 -F 2 -t 1 -V 1"

# (line flags, sub-GEMMs, whether dX is all zeros): the fresh-user trial's kind, each once
# refused or run over a grid that grew with the pad, dilation or stride (gfx942, fp16)
REPRODUCTIONS = [
    # no tap reaches dX: the placeholder. Was "INDEX_OVERFLOW: GemmM of one image =
    # HTildeSlice*WTildeSlice = 333335*333335" (the shared slices)
    ("-H 2 -W 2 -y 2 -x 2 -p 1000000 -q 1000000 -u 3 -v 3 -l 2000000 -j 2000000", 1, True),
    # phase 0 writes dX row 0 (its taps read only dY's padding), phase 1 nothing: the same refusal
    ("-H 2 -W 2 -y 2 -x 2 -p 999999 -q 999999 -u 3 -v 3 -l 1999999 -j 1999999", 1, True),
    # the middle tap reaches pixel (0, 0): phase 1 of 3 writes on each axis; the same refusal
    ("-H 2 -W 2 -y 3 -x 3 -p 1000000 -q 1000000 -u 3 -v 3 -l 1000000 -j 1000000", 1, False),
    # applicable, but row phase 1's sub-GEMM ran 2 x 333335 x 2 rows: a grid of 10419 blocks
    ("-H 2 -W 2 -y 2 -x 1 -p 999999 -q 0 -u 3 -v 1 -l 1999999 -j 1", 1, True),
    # applicable, 6 sub-GEMMs and a grid of 52089 blocks; now 2 and 3
    ("-H 2 -W 5 -y 3 -x 3 -p 1000000 -q 1 -u 3 -v 2 -l 1000000 -j 1", 2, False),
    # "TOO_MANY_SUB_GEMMS: 999 x 999 = 998001" for a 2x2 image: 2 x 2 phases write
    ("-H 2 -W 2 -y 1000 -x 1000 -p 500 -q 500 -u 999 -v 999 -l 1 -j 1", 4, False),
    # "TOO_MANY_SUB_GEMMS: 1451 x 1 = 1451" for a 1x3 image that no tap reaches
    ("-H 1 -W 3 -y 1451 -x 1 -p 1000000 -q 0 -u 622207 -v 1 -l 999 -j 999", 1, True),
]


def _line(flags: str) -> str:
    return f"{HEAD} {flags} {NHWC}"


def brute_writing_phases(size, filt, pad, stride, dil, begin, end) -> list:
    """``[(i, rows)]``: the phases ``i < min(YTilde, Y)`` and the dX rows each writes, by
    walking dX's rows: row ``hi`` is phase ``i``'s iff ``sH*htilde = hi + pH - dH*i`` for an
    ``htilde`` in ``[HBegin, HEnd)``."""
    from math import gcd
    tilde = stride // gcd(stride, dil)
    out = []
    for i in range(min(tilde, filt)):
        rows = [hi for hi in range(size) if (hi + pad - dil * i) % stride == 0
                and begin <= (hi + pad - dil * i) // stride < end]
        if rows:
            out.append((i, rows))
    return out


def brute_pairs(p) -> tuple:
    """``(row phases, column phases)`` that write, with their rows, by brute force."""
    h, w = axes(p)
    return (brute_writing_phases(p.Hi, p.Y, p.pH, p.sH, p.dH, h.begin, h.end),
            brute_writing_phases(p.Wi, p.X, p.pW, p.sW, p.dW, w.begin, w.end))


@st.composite
def far_axis(draw, max_filt=3):
    """``(size, filt, pad, stride, dil)`` of one axis: an image of 1-3 rows, a stride and a
    dilation up to 10^6, the least pad that gives Ho >= 1 plus up to three strides (dY of a
    few rows), so pads reach 10^6 too."""
    big = st.one_of(st.integers(1, 4), st.integers(5, 10**6))
    size, filt = draw(st.integers(1, 3)), draw(st.integers(1, max_filt))
    stride = draw(big)
    dil = min(draw(big), max(1, 2 * 10**6 // max(1, filt - 1)))   # coordinates within ~10^7
    need = max(0, -(-(dil * (filt - 1) + 1 - size) // 2))
    pad = need + draw(st.one_of(st.integers(0, 3), st.integers(0, 3 * stride)))
    return size, filt, pad, stride, dil


def far_problem(ha, wa, n=2, dtype="fp32", C=3, K=2):
    (Hi, Y, pH, sH, dH), (Wi, X, pW, sW, dW) = ha, wa
    return ConvProblem(N=n, C=C, Hi=Hi, Wi=Wi, K=K, Y=Y, X=X, pH=pH, pW=pW, sH=sH, sW=sW, dH=dH, dW=dW,
                       dtype=dtype, in_layout="NHWC", out_layout="NHWC", fil_layout="NHWC")


def check_decomposition(p):
    """The sub-GEMMs are the pairs of writing phases, each over exactly its rows (or the one
    placeholder); GemmM sums to at most N*Hi*Wi; the zero-fill verdict is exact."""
    rows, cols = brute_pairs(p)
    d = decompose(p)
    subs = d.sub_gemms
    assert sum(s.gemm_m for s in subs) <= p.N * p.Hi * p.Wi
    if not rows or not cols:                      # no tap reaches dX: one placeholder, GemmM = N
        assert len(subs) == 1 and subs[0].gemm_m == p.N and (subs[0].i_ytilde, subs[0].i_xtilde) == (0, 0)
        assert d.needs_zero_fill
        return d
    assert [(s.i_ytilde, s.i_xtilde) for s in subs] == [(i, j) for i, _ in rows for j, _ in cols]
    for s in subs:
        hrows = dict(rows)[s.i_ytilde]
        wcols = dict(cols)[s.i_xtilde]
        assert [s.dx_h_offset + t * s.dx_h_stride for t in range(s.h_slice)] == hrows
        assert [s.dx_w_offset + t * s.dx_w_stride for t in range(s.w_slice)] == wcols
        assert s.gemm_m == p.N * len(hrows) * len(wcols)
    covered = sum(len(r) for _, r in rows) * sum(len(c) for _, c in cols)
    assert sum(s.gemm_m for s in subs) == p.N * covered
    assert d.needs_zero_fill == (covered < p.Hi * p.Wi)
    return d


# ------------------------------------------------------------------ the trial's lines
@pytest.mark.parametrize("flags,n_subs,zeros", REPRODUCTIONS)
def test_the_trial_s_lines_are_applicable_and_bounded(flags, n_subs, zeros):
    p = parse(_line(flags).split()).problem
    for arch in ("gfx942", "sm_90", "cpu"):
        v = DgradSolver().is_applicable(p, get_target(arch))
        assert v.ok, (arch, v)
    d = check_decomposition(p)
    assert len(d.sub_gemms) == n_subs
    assert ap.images_per_launch(p) >= p.N and ap.batch_chunks(p) == ((0, p.N),)
    sol = DgradSolver().find_solution(p, get_target("gfx942"))
    if not sol.spec.schedule.direct and not sol.spec.schedule.subpixel:
        assert sol.spec.tiles_per_group <= n_subs * -(-p.cpg // sol.spec.config.tile_n)   # one tile each
    dx = check_against_reference(p, cpu_spec(p), seed=4)
    assert (dx.astype(np.float64) == 0).all() == zeros


# ------------------------------------------------------------------ the whole kind
@settings(max_examples=200, deadline=None)
@given(far_axis(max_filt=1200), far_axis(max_filt=1200), st.integers(1, 3))
def test_far_values_decompose_into_the_writing_pairs(ha, wa, n):
    """Tiny images with pads, strides and dilations up to 10^6 and filters up to 1200: never
    TOO_MANY_SUB_GEMMS or INDEX_OVERFLOW (the tensors, coordinates and rows written are
    small), one sub-GEMM per pair of phases that write rows, GemmM summing to <= N*Hi*Wi."""
    p = far_problem(ha, wa, n=n, dtype="fp16")
    v = ap.check(p, get_target("gfx942"))
    assert v.ok, v
    h, w = axes(p)
    assert too_many_sub_gemms(h, w) is None
    assert h.writing_count() * w.writing_count() <= p.Hi * p.Wi <= 9
    check_decomposition(p)


@settings(max_examples=80, deadline=None)
@given(far_axis(max_filt=3), far_axis(max_filt=3), st.integers(1, 2), st.sampled_from(["fp32", "fp16"]))
def test_far_values_run_on_the_cpu_engine(ha, wa, n, dtype):
    """The CPU engine (NaN-poisoned dX) equals the float64 reference; where no tap reaches
    dX, every element is 0."""
    p = far_problem(ha, wa, n=n, dtype=dtype)
    d = check_decomposition(p)
    dx = check_against_reference(p, cpu_spec(p), seed=n)
    rows, cols = brute_pairs(p)
    if not rows or not cols:
        assert (dx.astype(np.float64) == 0).all() and d.needs_zero_fill


@pytest.mark.parametrize("split_k", [2, 3])
def test_the_placeholder_with_split_k(split_k):
    """Split-K zeroes dX first (memset) and adds the placeholder's nothing: still zeros."""
    p = parse(_line(REPRODUCTIONS[0][0]).split()).problem
    spec = cpu_spec(p, split_k=split_k)
    assert spec.split_k == split_k and spec.zero_fill == "memset"
    dx = check_against_reference(p, spec, seed=1)
    assert (dx.astype(np.float64) == 0).all()


# ------------------------------------------------------------------ counting the phases
@st.composite
def long_axis(draw):
    """One axis with up to 5000 phases with taps (stride and filter both large) of which few
    write: a tiny image, or a large one with a dilation that scatters the phases."""
    size = draw(st.one_of(st.integers(1, 5), st.integers(6, 400)))
    filt, stride = draw(st.integers(65, 5000)), draw(st.integers(65, 5000))
    dil = draw(st.integers(1, 5000))
    need = max(0, -(-(dil * (filt - 1) + 1 - size) // 2))
    pad = need + draw(st.integers(0, 2 * stride))
    return size, filt, pad, stride, dil


@settings(max_examples=200, deadline=None)
@given(long_axis())
def test_writing_phases_equal_the_brute_force(a):
    size, filt, pad, stride, dil = a
    out = (size + 2 * pad - dil * (filt - 1) - 1) // stride + 1
    ax = axis_tilde(size, out, filt, pad, stride, dil)
    want = [i for i, _ in brute_writing_phases(size, filt, pad, stride, dil, ax.begin, ax.end)]
    assert list(ax.writing_phases()) == want and ax.writing_count() == len(want)
    assert [i for i in ax.phases() if ax.rows_written(i) > 0] == want
    for i in want:                                 # each writing phase's slice is its rows
        begin, rows, off = ax.phase_slice(i)
        assert rows == ax.rows_written(i) > 0 and 0 <= off and off + (rows - 1) * stride < size


def test_counting_phases_costs_nothing_per_phase():
    """2^31 - 2 phases with taps on each axis, every one writing one dX row: TOO_MANY_SUB_GEMMS
    is counted (O(log)), not walked; and of 10^9 phases of a 1-row image, the one that writes
    (phase 5*10^8: 2*i - 10^9 = 0) is found by bisection."""
    big = 2**31 - 2
    h = axis_tilde(2**31 - 1, 1, big, 0, big, 1)
    assert len(h.phases()) == big
    why, calls = count_calls(lambda: too_many_sub_gemms(h, h))
    assert why.startswith(f"{big} x {big} = {big * big} tilde sub-GEMMs") and calls < 100
    far = axis_tilde(1, 1, 10**9, 10**9, 10**9 + 1, 2)      # rows far from the 1-row image
    assert len(far.phases()) == 10**9
    (n, phases), calls = count_calls(lambda: (far.writing_count(), far.writing_phases()))
    assert phases == (5 * 10**8,) and n == 1 and calls < 2000
    assert MAX_SUB_GEMMS == 862


# ------------------------------------------------------------------ the kernels, emulated
EMU_CASES = [
    # (line, arch, perf config or None): no tap reaches dX (the placeholder); row phases 0
    # and 2 write nothing beside phase 1, which writes row 0 from the middle tap, stride-2
    # columns (zero fill blocks for row 1); both on the TMA schedule too (a box from the
    # phases' own slices)
    (f"convfp16 -n 2 -c 16 -k 16 -H 2 -W 2 -y 2 -x 2 -p 1000000 -q 1000000 -u 3 -v 3 -l 2000000 -j 2000000 -F 2 {NHWC}",
     "gfx942", None),
    (f"convfp16 -n 2 -c 16 -k 16 -H 2 -W 5 -y 3 -x 3 -p 1000000 -q 1 -u 3 -v 2 -l 1000000 -j 1 -F 2 {NHWC}",
     "gfx942", None),
    (f"convfp16 -n 2 -c 64 -k 64 -H 2 -W 5 -y 3 -x 3 -p 1000000 -q 1 -u 3 -v 2 -l 1000000 -j 1 -F 2 {NHWC}",
     "sm_90", "128,64,64,2,1,64,64,0,0,0,1,-1,4,3"),
    (f"convfp16 -n 2 -c 64 -k 64 -H 2 -W 2 -y 2 -x 2 -p 1000000 -q 1000000 -u 3 -v 3 -l 2000000 -j 2000000 -F 2 {NHWC}",
     "sm_90", "128,64,64,2,1,64,64,0,0,0,1,-1,4,3"),
]


@pytest.mark.skipif(not kernel_emu.available(), reason="clang++ not on PATH")
@pytest.mark.parametrize("line,arch,cfg", EMU_CASES)
def test_the_emulated_kernel_with_far_phases(tmp_path, line, arch, cfg):
    from test_gemm_emu import run_emulated
    p = parse(line.split()).problem
    sol, v = run_emulated(p, arch, tmp_path, perf_config=cfg, seed=2)
    assert v.ok and v.nonfinite == 0, (sol.kernel_name, v)
    assert sol.spec.zero_fill == "blocks"
