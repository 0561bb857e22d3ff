"""MIOpen's layout equivalences (issue 16, part 1).

A packed tensor's bytes depend only on the order of its dims longer than 1, so a 1x1
filter stored NCHW *is* KYXC, and a C=1 or H=W=1 tensor is NCHW and NHWC at once. Such
tensors count as NHWC for applicability and for the GPU kernel (no data moves), and the
problem key is the one MIOpen builds (rocm-libraries ``conv::ProblemDescription::
HeuristicUpdateLayouts``, 12b22cd0, over ``TensorDescriptor::IsPossibleLayout`` /
``GetLayout_str``, ``src/tensor.cpp`` 0c3ff24a). Expected keys below are derived by hand
from MIOpenDriver's packed strides (``tensor_layout_to_strides``), each in its comment.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from miopen_solver import applicability as ap
from miopen_solver import layouts
from miopen_solver.command import parse
from miopen_solver.problem import inferred_layout, packed_strides, possible_layout, same_memory
from miopen_solver.reference import dgrad_reference, verify
from miopen_solver.runtime.cpu import CpuEngine
from miopen_solver.solver import DgradSolver
from miopen_solver.target import get_target
from miopen_solver.transpose import writes_nchw_dx

GPUS = ("gfx90a", "gfx942", "sm_80", "sm_90")


def _p(line):
    return parse(line.split()).problem


# ------------------------------------------------------------------ the key, by hand
@pytest.mark.parametrize("line,key_layouts,nhwc,nchw", [
    # 1x1 W in NCHW: strides K:64 C:1 Y:1 X:1. dY/dX NHWC. Own names: dY NHWC, W NCHW (C's
    # length 64 sorts it before Y, X), dX NHWC: they differ. NCHW strictly: dY's strides in
    # NCHW order (N:2048 K:1 H:256 W:32) increase -> no. NHWC strictly: dY, dX yes, W (K:64
    # Y:1 X:1 C:1) yes -> all NHWC.
    ("convfp16 -n 2 -c 64 -H 8 -W 8 -k 32 -y 1 -x 1 -F 2 --in_layout NHWC --out_layout NHWC --fil_layout NCHW",
     ("NHWC",) * 3, True, False),
    # 1x1 W in NHWC (K:64 C:1 Y:64 X:64), dY/dX NCHW. Strictly nothing fits all three (W's
    # NCHW order K:64 C:1 Y:64 rises; dY is not NHWC); ignoring length-1 dims W is K, C in
    # NCHW order -> all NCHW (ROCm 6.2's MIOpen, without that second pass, kept NCHW-NHWC-NCHW).
    ("convfp16 -n 2 -c 64 -H 8 -W 8 -k 32 -y 1 -x 1 -F 2 --in_layout NCHW --out_layout NCHW --fil_layout NHWC",
     ("NCHW",) * 3, False, True),
    # a 3x3 W in NCHW is not KYXC: no layout fits all three, each keeps its own name
    ("convfp16 -n 2 -c 64 -H 8 -W 8 -k 32 -y 3 -x 3 -p 1 -q 1 -F 2 --in_layout NHWC --out_layout NHWC "
     "--fil_layout NCHW", ("NHWC", "NCHW", "NHWC"), False, False),
    # perf-model style (only --out_layout NHWC) on a fully connected layer, H=W=1: dY (N:32 K:1
    # H:32 W:32) NHWC; W (K:64 C:1 1 1) and dX (N:64 C:1 1 1) pass NHWC strictly -> all NHWC
    ("convfp16 -n 2 -c 64 -H 1 -W 1 -k 32 -y 1 -x 1 -F 2 --out_layout NHWC", ("NHWC",) * 3, True, True),
    # the same layer all NCHW: the three own names agree (NCHW) and MIOpen keeps them
    ("convfp16 -n 2 -c 64 -H 1 -W 1 -k 32 -y 1 -x 1 -F 2", ("NCHW",) * 3, True, True),
    # all NHWC, dX C=1 and W=1: dX's own name is NHCW (strides N:5 C:1 H:1 W:1; H's length 5
    # sorts it first among the 1-strides, C before W by position), so the names differ; NCHW
    # strictly fails on dY (K:1 W:32 ...), NHWC strictly holds for all three
    ("convfp16 -n 2 -c 1 -H 5 -W 1 -k 32 -y 3 -x 1 -F 2 --in_layout NHWC --out_layout NHWC --fil_layout NHWC",
     ("NHWC",) * 3, True, False),
])
def test_key_layouts_follow_miopen(line, key_layouts, nhwc, nchw):
    p = _p(line)
    assert p.key_layouts() == key_layouts
    assert (p.nhwc_memory, p.nchw_memory) == (nhwc, nchw)
    token = "NCHW" if key_layouts == ("NCHW",) * 3 else "-".join(key_layouts)
    assert p.problem_key().endswith(f"-0-{token}-FP16-B")
    assert p.miopen_db_fields()["layout"] == key_layouts[0]


def test_keys_of_the_documented_examples():
    p = _p("convfp16 -n 2 -c 64 -H 8 -W 8 -k 32 -y 1 -x 1 -F 2 --in_layout NHWC --out_layout NHWC --fil_layout NCHW")
    assert p.problem_key() == "32-8-8-1x1-64-8-8-2-0x0-1x1-1x1-0-NHWC-NHWC-NHWC-FP16-B"
    assert p.miopen_db_key() == "2x32x8x8x1x1x1x1x64x2x0x0x0x1x1x0x1x1x0x0x1xNHWCxFP16xB"
    # the same problem with every flag NHWC has the same key: MIOpen finds one perf-db record
    assert p.problem_key() == p.replace(fil_layout="NHWC").problem_key()


def test_inferred_layout_is_a_stable_sort_by_stride_then_length():
    lens = dict(N=2, C=1, H=5, W=1)
    st_ = packed_strides(lens, "NHWC")
    assert st_ == dict(C=1, W=1, H=1, N=5)                 # products of the lengths after each
    assert inferred_layout(lens, st_, "NCHW") == "NHCW"
    assert inferred_layout(dict(N=2, C=3, H=4, W=5), packed_strides(dict(N=2, C=3, H=4, W=5), "CHWN"), "NCHW") == "CHWN"


# ------------------------------------------------------------------ same bytes, by brute force
LENS = st.fixed_dictionaries({x: st.integers(1, 3) for x in "NCHW"})
LAYOUT = st.sampled_from(["".join(t) for t in itertools.permutations("NCHW")])


@settings(max_examples=300, deadline=None)
@given(LENS, LAYOUT, LAYOUT)
def test_same_memory_is_byte_identity(lens, a, b):
    """same_memory against the bytes themselves: element (n, c, h, w) = its canonical index,
    stored in a and in b."""
    canon = np.arange(int(np.prod([lens[x] for x in "NCHW"]))).reshape([lens[x] for x in "NCHW"])
    in_a = np.ascontiguousarray(np.transpose(canon, ["NCHW".index(x) for x in a]))
    in_b = np.ascontiguousarray(np.transpose(canon, ["NCHW".index(x) for x in b]))
    assert same_memory(lens, a, b) == (in_a.tobytes() == in_b.tobytes())
    # MIOpen's IgnoreDegenerateStrides check of a packed `a` tensor against `b` is the same test
    assert possible_layout(lens, packed_strides(lens, a), b, True) == same_memory(lens, a, b)
    # convert() moves no data exactly then
    out = layouts.convert(in_a, a, b)
    assert np.array_equal(out, in_b)
    assert np.shares_memory(out, in_a) == same_memory(lens, a, b)


# ------------------------------------------------------------------ applicability
@pytest.mark.parametrize("line,ok", [
    ("convfp16 -n 2 -c 64 -H 8 -W 8 -k 32 -y 1 -x 1 -F 2 --in_layout NHWC --out_layout NHWC --fil_layout NCHW", True),
    ("convfp16 -n 2 -c 64 -H 8 -W 8 -k 32 -y 1 -x 1 -F 2 --in_layout NCHW --out_layout NCHW --fil_layout NHWC", True),
    ("convfp16 -n 2 -c 64 -H 1 -W 1 -k 32 -y 1 -x 1 -F 2", True),
    ("convfp16 -n 2 -c 64 -H 1 -W 1 -k 32 -y 1 -x 1 -F 2 --out_layout NHWC", True),
    ("convfp16 -n 2 -c 64 -H 8 -W 8 -k 32 -y 1 -x 1 -F 2 --out_layout NHWC", True),      # mixed: transforms
    ("convfp16 -n 2 -c 64 -H 8 -W 8 -k 32 -y 3 -x 3 -p 1 -q 1 -F 2 --in_layout NHWC --out_layout NHWC "
     "--fil_layout NCHW", True),
    # CHWN with N=1 and H=W=1 is C alone: NHWC and NCHW
    ("convfp16 -n 1 -c 64 -H 1 -W 1 -k 32 -y 1 -x 1 -F 2 --in_layout CHWN --out_layout CHWN --fil_layout NHWC",
     True),
    # CHWN with N, C and H*W > 1 is neither
    ("convfp16 -n 2 -c 64 -H 8 -W 8 -k 32 -y 1 -x 1 -F 2 --in_layout CHWN --out_layout NHWC --fil_layout NHWC",
     False),
])
def test_applicability_counts_the_bytes(line, ok):
    """Every target takes any mix of NCHW and NHWC bytes; the transforms are exactly the
    tensors that are not NHWC in memory, but an NCHW dX the kernel stores itself, and
    except where dY and dX are both NCHW in a 1x1 stride-1 line: the nchw-pointwise GEMMs
    read them in place and transpose W alone."""
    p = _p(line)
    for arch in GPUS + ("cpu",):
        v = ap.is_applicable(p, get_target(arch))
        assert v.ok is ok and v.codes == (() if ok else ("LAYOUT",)), arch
    if ok:
        sol = DgradSolver().find_solution(p, get_target("sm_90"))
        moved = [t for t, lay in (("dY", "NHWC"), ("W", "NHWC"), ("dX", "NHWC"))
                 if not same_memory(p.tensor_lengths()[t], p.tensor_layouts()[t], lay)]
        if sol.schedule.nchw_pointwise:
            assert {"dY", "dX"} <= set(moved) and [t.tensor for t in sol.transforms] == ["W"]
        else:
            nchw_dx = writes_nchw_dx(sol.spec)          # the kernel stores an NCHW dX itself
            assert not nchw_dx or "dX" in moved
            assert [t.tensor for t in sol.transforms] == [t for t in moved if not (t == "dX" and nchw_dx)]


# ------------------------------------------------------------------ numerics
EQUIVALENT = [
    "convfp16 -n 2 -c 24 -H 6 -W 5 -k 16 -y 1 -x 1 -F 2 --in_layout NHWC --out_layout NHWC --fil_layout NCHW",
    "conv -n 3 -c 16 -H 1 -W 1 -k 8 -y 1 -x 1 -F 2",                                  # all NCHW, FC
    "conv -n 3 -c 16 -H 1 -W 1 -k 8 -y 1 -x 1 -F 2 --out_layout NHWC",
    "convbfp16 -n 2 -c 1 -H 7 -W 6 -k 8 -y 3 -x 3 -p 1 -q 1 -F 2 --in_layout NCHW --out_layout NHWC "
    "--fil_layout NHWC",                                                               # C=1 dX
    "convfp16 -n 2 -c 8 -H 9 -W 9 -k 8 -y 3 -x 3 -p 1 -q 1 -g 8 -F 2 --in_layout NHWC --out_layout NHWC "
    "--fil_layout NCHW",                                                               # depthwise: cpg=1
]


@pytest.mark.parametrize("line", EQUIVALENT)
@pytest.mark.parametrize("arch", ["sm_90", "gfx942"])
def test_equivalent_lines_run_and_verify(line, arch):
    """The GPU target's solution (GEMM or direct schedule) on the CPU engine, inputs in the
    flags' layouts, against the float64 reference computed from those layouts."""
    p = _p(line)
    assert p.nhwc_memory
    t = get_target(arch)
    sol = DgradSolver().find_solution(p, t)
    rng = np.random.default_rng(7)
    st_ = layouts.storage_dtype(p.dtype)
    dy = rng.uniform(-1, 1, layouts.dy_shape(p)).astype(st_)
    w = rng.uniform(-1, 1, layouts.w_shape(p)).astype(st_)
    dx = CpuEngine(t).run(sol, dy, w)
    assert dx.shape == layouts.dx_shape(p)
    v = verify(p, dx, dgrad_reference(p, dy, w))
    assert v.ok, v


def test_gpu_engine_moves_no_data_for_equivalent_layouts(tmp_path):
    """A 1x1 filter given in NCHW goes to the device as it lies (its bytes are KYXC); dX
    comes back in the in_layout's shape; the launch computes the right dX (a fake runtime
    whose kernel is the CPU engine on the device bytes)."""
    from test_split_n import ComputingRuntime
    from miopen_solver.runtime.cache import BinaryCache
    from miopen_solver.runtime.gpu import GpuEngine
    p = _p("convfp16 -n 2 -c 32 -H 6 -W 5 -k 16 -y 1 -x 1 -F 2 --in_layout NHWC --out_layout NHWC --fil_layout NCHW")
    sol = DgradSolver().find_solution(p, get_target("sm_90"))
    rt = ComputingRuntime(sol)
    rng = np.random.default_rng(3)
    dy = rng.uniform(-1, 1, layouts.dy_shape(p)).astype(np.float16)
    w = rng.uniform(-1, 1, layouts.w_shape(p)).astype(np.float16)       # (K, cpg, 1, 1)
    dx = GpuEngine(rt, BinaryCache(tmp_path)).run(sol, dy, w)
    assert rt.uploads[1] == w.tobytes()                                   # W's bytes, untouched
    assert dx.shape == (2, 6, 5, 32)
    assert verify(p, dx, dgrad_reference(p, dy, w)).ok


def test_a_tensor_that_is_not_nhwc_in_memory_is_transposed_on_the_device(tmp_path):
    """A 3x3 filter given in NCHW is not KYXC: it goes to the device as it lies and a
    transpose into the workspace feeds the kernel; dY and dX (NHWC) are not moved."""
    from test_split_n import ComputingRuntime
    from miopen_solver.runtime.cache import BinaryCache
    from miopen_solver.runtime.gpu import GpuEngine
    p = _p("convfp16 -n 2 -c 16 -H 6 -W 6 -k 16 -y 3 -x 3 -p 1 -q 1 -F 2 --in_layout NHWC --out_layout NHWC "
           "--fil_layout NCHW")
    sol = DgradSolver().find_solution(p, get_target("sm_90"))
    assert [t.label for t in sol.transforms] == ["W NCHW->NHWC"] and sol.kernel_name.endswith("+transpose_w")
    rt = ComputingRuntime(sol)
    rng = np.random.default_rng(4)
    dy = rng.uniform(-1, 1, layouts.dy_shape(p)).astype(np.float16)
    w = rng.uniform(-1, 1, layouts.w_shape(p)).astype(np.float16)       # (K, cpg, 3, 3)
    dx = GpuEngine(rt, BinaryCache(tmp_path)).run(sol, dy, w)
    assert rt.uploads[1] == w.tobytes()
    launched = [c[1] for c in rt.calls if c[0] == "launch"]
    assert launched == ["dgrad_transpose_band_b16", sol.spec.kernel_name]    # (K, cpg, 9): the band form
    assert verify(p, dx, dgrad_reference(p, dy, w)).ok
