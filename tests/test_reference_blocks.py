"""The blockwise reference and comparison (issue: a verification of a problem near the 2 GiB
tensor limit held 8 bytes per dX element of float64 reference, and more for the comparison).

* a blockwise verdict equals the whole-buffer one bit for bit, for any block size and slab
  size, on random problems in every layout (NaN, inf and empty blocks included);
* the error is MIOpen's rms_range computed here independently (exact sums over every
  element with ``math.fsum``, the textbook loops as the reference);
* the host memory of a blockwise verification stays within its block budget
  (``tracemalloc`` sees numpy's allocations), where the whole reference does not.
"""

from __future__ import annotations

import math
import sys
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import naive_dgrad, random_inputs
from test_reference import tiny_problems
from miopen_solver import layouts, reference
from miopen_solver.problem import ConvProblem
from miopen_solver.reference import (Comparison, block_bytes, dgrad_reference, pixel_bytes, reference_blocks,
                                     rms_range, verify, verify_reference)

LAYOUTS = ("NHWC", "NCHW", "CHWN")


@st.composite
def problems(draw):
    """test_reference's tiny problems in any of MIOpenDriver's layouts, fp32 or fp16."""
    lay = st.sampled_from(LAYOUTS)
    return draw(tiny_problems()).replace(dtype=draw(st.sampled_from(["fp32", "fp16"])), in_layout=draw(lay),
                                         out_layout=draw(lay), fil_layout=draw(lay))


def rms_by_definition(ref, out) -> float:
    """sqrt(sum (ref - out)^2) / (sqrt(n) * max(max|ref|, max|out|, DBL_MIN)), the sum exact."""
    r, o = np.asarray(ref, np.float64).ravel(), np.asarray(out, np.float64).ravel()
    total = math.fsum(float(d) * float(d) for d in r - o)
    return math.sqrt(total) / (math.sqrt(r.size) * max(np.abs(r).max(), np.abs(o).max(), sys.float_info.min))


def same(a, b) -> bool:
    """Verdicts equal field by field, a NaN equal to a NaN (repr round-trips every float)."""
    return repr(a) == repr(b)


def noisy(ref, problem, seed):
    """A computed dX: the reference rounded to storage with noise of about 1e-3."""
    rng = np.random.default_rng(seed)
    return (ref + rng.standard_normal(ref.shape) * 1e-3).astype(layouts.storage_dtype(problem.dtype))


@settings(max_examples=120, deadline=None)
@given(problems(), st.integers(0, 1000), st.sampled_from([1, 3, 7, 256]), st.integers(0, 3))
def test_blockwise_equals_whole_bit_for_bit(problem, seed, slab, poison):
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(reference, "SLAB_PIXELS", slab)
        mp.setattr(reference, "SUM_UNIT", 5)                      # units straddle the blocks
        check_blockwise(problem, seed, poison)


def check_blockwise(p, seed, poison):
    dy, w = random_inputs(p, seed)
    ref = dgrad_reference(p, dy, w)
    np.testing.assert_allclose(layouts.dx_to_nhwc(p, ref), naive_dgrad(p, dy, w), rtol=1e-12, atol=1e-12)
    dx = noisy(ref, p, seed)
    flat = dx.reshape(-1)
    if poison == 1:
        flat[-1] = np.nan                                          # in the last block
    elif poison == 2:
        flat[flat.size // 2] = np.inf
    whole = verify(p, dx, ref, budget=1 << 40)
    assert list(reference_blocks(p, 1 << 40)) == [(0, p.N, 0, p.Hi)]
    for budget in (1, pixel_bytes(p) * 2, pixel_bytes(p) * p.Wi * 3 + 1, 1 << 40):
        assert same(verify(p, dx, ref, budget=budget), whole), budget
        assert same(verify_reference(p, dx, dy, w, budget=budget), whole), budget
    # the verdict's numbers, computed here from their definitions
    assert whole.elements == dx.size and whole.nonfinite == (poison in (1, 2))
    if poison == 1:
        assert math.isnan(whole.error) and not whole.ok
    elif poison == 2:
        assert math.isnan(whole.error) and not whole.ok
        # over the finite elements; None when the poisoned one was the only element
        assert whole.max_abs_diff is None if dx.size == 1 else whole.max_abs_diff < math.inf
    else:
        assert whole.error == pytest.approx(rms_by_definition(ref, dx), rel=1e-13, abs=1e-300)
        finite = np.isfinite(dx.astype(np.float64))
        assert whole.max_abs_diff == float(np.abs(ref - dx.astype(np.float64))[finite].max())


def test_blocks_cover_dx_once_in_nhwc_order():
    p = ConvProblem(N=3, C=4, Hi=5, Wi=6, K=2, Y=1, X=1)
    per = pixel_bytes(p)
    assert per == 8 * 4 + 8 * max(2 + 4, 8)                         # float64 block + product and its copy
    for budget, want in ((per * 60, [(0, 2, 0, 5), (2, 3, 0, 5)]),   # two images of 30 pixels
                         (per * 13, [(n, n + 1, h, min(5, h + 2)) for n in range(3) for h in (0, 2, 4)]),
                         (1, [(n, n + 1, h, h + 1) for n in range(3) for h in range(5)])):
        assert list(reference_blocks(p, budget)) == want
    big = block_bytes(p, 60)
    assert big == 60 * per + 2 * reference.SLAB_PIXELS * 8 * (2 + 4) + 8 * 2 * 4


def test_comparison_streams_units_across_blocks():
    rng = np.random.default_rng(3)
    ref, out = rng.standard_normal(1000), rng.standard_normal(1000)
    whole = Comparison()
    whole.add(out, ref.copy())
    for cuts in ([1, 2, 997], [499, 1, 500], [10] * 100):
        parts, start = Comparison(), 0
        for n in cuts:
            parts.add(out[start:start + n], ref[start:start + n].copy())
            start += n
        assert parts.error() == whole.error() and parts.max_diff == whole.max_diff
    assert whole.error() == pytest.approx(rms_by_definition(ref, out), rel=1e-14)
    assert rms_range(ref, out) == whole.error()
    assert rms_range([], []) == 0.0


def test_overflowing_sums_are_infinite_not_an_error():
    cmp = Comparison()
    cmp._units.append(np.array([1e308, 1e308]))
    cmp.elements, cmp.max_ref, cmp.max_out = 2, 1.0, 1.0
    assert cmp.error() == math.inf


def _peak(fn):
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_blockwise_verification_memory_is_bounded():
    """dX of 1.5M elements: the whole float64 reference is 12 MiB; block by block the
    verification allocates about its 2 MiB budget (plus the block's slab edges)."""
    p = ConvProblem(N=6, C=16, Hi=128, Wi=128, K=8, Y=3, X=3, pH=1, pW=1, in_layout="NHWC", out_layout="NHWC",
                    fil_layout="NHWC")
    dy, w = random_inputs(p, 1)
    ref_bytes = 8 * p.dx_elems
    dx = np.zeros(layouts.dx_shape(p), np.float32)
    budget = 2 << 20
    pixels = max((n1 - n0) * (h1 - h0) * p.Wi for n0, n1, h0, h1 in reference_blocks(p, budget))
    assert pixels * pixel_bytes(p) <= budget
    peak = _peak(lambda: verify_reference(p, dx, dy, w, budget=budget))
    assert peak <= block_bytes(p, pixels) + (64 << 10), (peak, block_bytes(p, pixels))
    assert peak < ref_bytes / 4
    whole = _peak(lambda: verify(p, dx, dgrad_reference(p, dy, w), budget=budget))
    assert whole > ref_bytes                  # the whole reference, for contrast
