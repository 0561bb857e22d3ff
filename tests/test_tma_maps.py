"""The tensor maps of the TMA schedules against the rules of ``cuTensorMapEncodeTiled`` and
the H200 (``miopen_solver.tma.map_reason``): each rule refuses a map that breaks it, and the
schedules' own rules already keep every map they build inside them -- a config the spec
accepts never reaches the driver with a map it refuses (on random problems, every TMA
config of the search)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from miopen_solver.config import KernelSchedule
from miopen_solver.errors import PerfConfigError
from miopen_solver.heuristics import search_space
from miopen_solver.kernels.emit import TensorMapDesc
from miopen_solver.problem import ConvProblem
from miopen_solver.spec import launch_spec
from miopen_solver.target import get_target
from miopen_solver.tma import map_reason

SM90 = get_target("sm_90")
GOOD = TensorMapDesc("dy", "fp16", (64, 56, 56, 32), (128, 128 * 56, 128 * 56 * 56), (64, 8, 8, 2))


@pytest.mark.parametrize("change,why", [
    (dict(dims=(64, 56)), "rank 2 with 4 box sides and 3 strides"),
    (dict(dims=(0, 56, 56, 32)), "extent 0 of dim 0 is outside 1 .. 2^32"),
    (dict(dims=(64, 56, 56, 1 << 33)), "extent 8589934592 of dim 3"),
    (dict(strides=(120, 128 * 56, 128 * 56 * 56)), "the byte stride 120 of dim 1 is not a multiple of 16"),
    (dict(strides=(128, 128 * 56, 1 << 40)), "the byte stride 1099511627776 of dim 3"),
    (dict(box=(64, 8, 300, 2)), "box side 300 of dim 2 is outside 1 .. 256"),
    (dict(box=(60, 8, 8, 2)), "its box rows are 120 bytes, not a multiple of 16"),
    (dict(box=(72, 8, 8, 2)), "its box rows are 144 bytes, more than the 128-byte swizzle span"),
])
def test_each_rule_refuses_a_map_that_breaks_it(change, why):
    assert map_reason(GOOD, 2) is None
    bad = TensorMapDesc(**{**GOOD.__dict__, **change})
    assert why in map_reason(bad, 2)


def test_unswizzled_rows_may_pass_the_swizzle_span():
    """The NCHW TMA schedule's staging rows: 72 columns (144 bytes), no swizzle."""
    assert map_reason(TensorMapDesc(**{**GOOD.__dict__, "box": (72, 1, 64, 1), "swizzle": 0}), 2) is None


@st.composite
def tma_problems(draw):
    layout = draw(st.sampled_from(["NHWC", "NCHW"]))
    f = draw(st.sampled_from([1, 2, 3, 5]))        # 2 with stride 2, no padding: a patch layer
    G = draw(st.sampled_from([1, 1, 2]))
    try:
        return ConvProblem(N=draw(st.integers(1, 4)), C=G * 8 * draw(st.integers(1, 24)), K=G * 64 * draw(st.integers(1, 4)),
                           G=G, Hi=draw(st.integers(1, 40)), Wi=8 * draw(st.integers(1, 12)), Y=f, X=draw(st.sampled_from([1, f])),
                           pH=draw(st.integers(0, f // 2)), pW=draw(st.integers(0, f // 2)), sH=draw(st.integers(1, 2)),
                           sW=draw(st.integers(1, 2)), dtype=draw(st.sampled_from(["fp16", "bf16"])),
                           in_layout=layout, out_layout=layout, fil_layout=layout)
    except ValueError:      # the filter does not fit the padded input
        assume(False)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tma_problems())
def test_every_tma_config_the_rules_accept_has_maps_the_driver_takes(p):
    """Random problems, every TMA config of the search: a config is either refused by a rule
    that is not about tensor maps, or its maps pass ``map_reason`` (then nothing new refuses
    it at the launch)."""
    tma = (KernelSchedule.WGMMA_TMA, KernelSchedule.PATCH_GEMM_TMA, KernelSchedule.NCHW_TMA)
    cfgs = [c for c in search_space(p, SM90) if c.schedule in tma]
    assume(cfgs)
    for c in cfgs:
        try:
            spec = launch_spec(p, SM90, c)
        except PerfConfigError as e:
            assert "tensor map" not in str(e), (c.serialize(), str(e))
            continue
        maps = spec.emit().tensor_maps
        for m in maps:
            assert map_reason(m, p.elem_bytes) is None
