"""Split-K through an fp32 workspace with a separate reduction (no atomics): the mode rule,
the workspace it needs, the CPU engine's two steps against the float64 reference, the GPU
engine's launch sequence on a fake device that executes it from the launch pointers, and
what the emitted kernels compile to (nvcc, clang-19; skipped where a compiler is missing).

Every expected value is computed here from the problem (sizes by hand, the reference in
float64, coverage from the convolution's definition), never taken from the code under test.
"""

from __future__ import annotations

import itertools
import json
import re
import shlex
import shutil

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from conftest import random_inputs
from test_cpu_engine import EPS, TINY, problems
from test_spec import problems as nhwc_problems
from test_split_n import ComputingRuntime, tap_mask
from miopen_solver import applicability as ap
from miopen_solver.command import parse
from miopen_solver.config import PerfConfig
from miopen_solver.errors import PerfConfigError
from miopen_solver.heuristics import default_performance_config, max_stream_k_workspace
from miopen_solver.kernels.emit import _read, emit_splitk_reduce
from miopen_solver.problem import ConvProblem
from miopen_solver.reference import dgrad_reference, verify
from miopen_solver.runtime.cache import BinaryCache
from miopen_solver.runtime.cpu import CpuEngine, coverage_mask
from miopen_solver.runtime.gpu import POISON_BYTE, GpuEngine
from miopen_solver.solver import DgradSolver, Solution
from miopen_solver.spec import launch_spec, make_spec, register_cap, resolve_split_k, split_k_reduce_mode
from miopen_solver.splitk import SplitKReduce, axis_covered
from miopen_solver.target import PRESETS, get_target

SOLVER = DgradSolver()
CPU, SM80, SM90, GFX90A, GFX942 = (get_target(a) for a in ("cpu", "sm_80", "sm_90", "gfx90a", "gfx942"))
NHWC = "-F 2 --in_layout NHWC --out_layout NHWC --fil_layout NHWC"
WS = PerfConfig(64, 64, 16, 2, 2, 32, 32, split_k=2, stages=2, split_k_reduce=2)
"""A warp-MMA tile valid on every preset (tile_k 16: deep enough splits on small problems)."""


def _p(line):
    return parse(shlex.split(line)).problem


# ------------------------------------------------------------------ the mode rule
@pytest.mark.parametrize("line,target,asked,mode", [
    ("conv -n 2 -c 33 -H 7 -W 7 -k 16 -y 3 -x 3 -p 1 -q 1", SM90, 0, "atomic"),         # fp32: scalar atomics
    ("convfp16 -n 2 -c 32 -H 7 -W 7 -k 16 -y 3 -x 3 -p 1 -q 1", SM90, 0, "atomic"),     # even cpg, f16x2
    ("convfp16 -n 2 -c 33 -H 7 -W 7 -k 16 -y 3 -x 3 -p 1 -q 1", SM90, 0, "workspace"),  # odd cpg
    ("convbfp16 -n 2 -c 32 -H 7 -W 7 -k 16 -y 3 -x 3 -p 1 -q 1", SM80, 0, "workspace"),  # no bf16x2 atomic
    ("convbfp16 -n 2 -c 32 -H 7 -W 7 -k 16 -y 3 -x 3 -p 1 -q 1", GFX90A, 0, "workspace"),
    ("convbfp16 -n 2 -c 32 -H 7 -W 7 -k 16 -y 3 -x 3 -p 1 -q 1", GFX942, 0, "atomic"),
    ("convfp16 -n 2 -c 32 -H 7 -W 7 -k 16 -y 3 -x 3 -p 1 -q 1", SM90, 2, "workspace"),  # asked for
    ("conv -n 2 -c 33 -H 7 -W 7 -k 16 -y 3 -x 3 -p 1 -q 1", GFX942, 2, "workspace"),
    ("convfp16 -n 2 -c 32 -H 7 -W 7 -k 16 -y 3 -x 3 -p 1 -q 1", SM90, 1, "atomic"),
])
def test_the_rule_picks_atomics_where_allowed_else_the_workspace(line, target, asked, mode):
    p = _p(f"{line} {NHWC}")
    cfg = WS.replace(split_k_reduce=asked)
    assert split_k_reduce_mode(p, target, cfg, 2) == mode
    assert split_k_reduce_mode(p, target, cfg, 1) == "none"             # nothing to reduce
    spec = make_spec(p, target, cfg)
    assert spec.split_k_reduce == mode and ("_skws_" in spec.kernel_name) == (mode == "workspace")
    assert spec.zero_fill == ("memset" if mode == "atomic" else "none")


@pytest.mark.parametrize("line,target,needle", [
    ("convfp16 -n 2 -c 33 -H 7 -W 7 -k 16 -y 3 -x 3 -p 1 -q 1", SM90, "needs an even cpg (packed 2-wide atomics); cpg=33"),
    ("convbfp16 -n 2 -c 32 -H 7 -W 7 -k 16 -y 3 -x 3 -p 1 -q 1", SM80, "sm_80 has no packed bf16 atomic add"),
    ("convbfp16 -n 2 -c 32 -H 7 -W 7 -k 16 -y 3 -x 3 -p 1 -q 1", GFX90A, "gfx90a has no packed bf16 atomic add"),
])
def test_atomics_asked_for_where_refused_say_why_and_what_works(line, target, needle):
    p = _p(f"{line} {NHWC}")
    with pytest.raises(PerfConfigError, match=re.escape(needle)) as e:
        make_spec(p, target, WS.replace(split_k_reduce=1))
    assert "split_k_reduce 2 (workspace) has no such rule" in str(e.value)


def test_schedules_without_the_workspace_refuse_it():
    p = _p(f"convfp16 -n 2 -c 256 -H 9 -W 9 -k 128 -y 1 -x 1 {NHWC}")
    for cfg, needle in [("128,256,64,2,1,64,256,0,0,0,2,-1,3,2,2", "split_k must be 1 or -1"),   # persistent
                        ("64,64,32,2,2,32,32,0,0,0,2,-1,3,7,2", "split_k must be 1 or -1")]:     # nchw-pw
        with pytest.raises(PerfConfigError, match=needle):
            launch_spec(p.replace(in_layout="NCHW", out_layout="NCHW") if cfg.endswith(",7,2") else p, SM90,
                        PerfConfig.parse(cfg))
    # with split 1 the field is read by nobody: the same kernel as without it
    plain = PerfConfig.parse("128,256,64,2,1,64,256,0,0,0,1,-1,4,3")
    assert make_spec(p, SM90, plain.replace(split_k_reduce=2)).kernel_name == make_spec(p, SM90, plain).kernel_name


def test_minus_one_never_picks_the_workspace():
    """``split_k = -1`` resolves as before: 1 where atomics are refused, whatever the field."""
    p = _p(f"convfp16 -n 1 -c 255 -H 7 -W 7 -k 1024 -y 3 -x 3 -p 1 -q 1 {NHWC}")     # tiny grid, deep K
    for reduce in (0, 2):
        cfg = WS.replace(split_k=-1, split_k_reduce=reduce)
        assert resolve_split_k(p, SM90, cfg, make_spec(p, SM90, cfg.replace(split_k=1)).decomposition) == 1
    even = p.replace(C=256)                                  # atomics allowed: the old rule splits
    assert make_spec(even, SM90, WS.replace(split_k=-1)).split_k > 1


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_defaults_never_use_the_workspace(data):
    """No default (nor its resolution of -1) starts using split-K where it did not: the
    workspace reduction appears only where a config asks for split_k > 1."""
    problem = data.draw(nhwc_problems())
    t = get_target(data.draw(st.sampled_from(sorted(PRESETS))))
    cfg = default_performance_config(problem, t)
    spec = launch_spec(problem, t, cfg)
    assert cfg.split_k_reduce == 0 and not getattr(spec, "workspace_reduce", False)


def test_search_offers_workspace_split_k_only_where_atomics_are_refused():
    odd = _p(f"convfp16 -n 2 -c 33 -H 7 -W 7 -k 256 -y 3 -x 3 -p 1 -q 1 {NHWC}")
    specs = [launch_spec(odd, SM90, c) for c in SOLVER.search(odd, SM90)]
    assert {s.split_k_reduce for s in specs if s.split_k > 1} == {"workspace"}
    assert {s.schedule.slug for s in specs if s.split_k > 1} == {"warp-mma", "wgmma"}
    forced = [launch_spec(odd, SM90, c) for c in SOLVER.search(odd, SM90, split_k_reduce="atomic")]
    assert forced and all(s.split_k == 1 for s in forced)       # every atomic split-K config is invalid
    even = odd.replace(C=24)          # (cpg 32 takes the narrow warpgroup tile, which does not split)
    default = SOLVER.get_default_performance_config(even, SM90)
    assert (default.split_k, default.split_k_reduce) == (2, 0)    # the measured small-grid rule: atomics
    assert next(SOLVER.search(even, SM90)) == default
    assert next(SOLVER.search(even, SM90, split_k_reduce="workspace")) == default.replace(split_k_reduce=2)
    ws = [c for c in SOLVER.search(even, SM90, split_k_reduce="workspace") if c.split_k > 1]
    assert ws and all(c.split_k_reduce == 2 and c.serialize().endswith(",2") for c in ws)
    with pytest.raises(PerfConfigError, match="--split-k-reduce 'fast': allowed: auto, atomic, workspace"):
        next(SOLVER.search(even, SM90, split_k_reduce="fast"))


# ------------------------------------------------------------------ the workspace, by hand
def test_workspace_sizes_by_hand():
    # fp16 N=2, C=33, 7x7: one launch's dX is 2*7*7*33 = 3234 elements; fp32 slices of
    # 12936 bytes, rounded up to 13056 (51 x 256); split 3 -> 39168 bytes.
    p = _p(f"convfp16 -n 2 -c 33 -H 7 -W 7 -k 64 -y 3 -x 3 -p 1 -q 1 {NHWC}")
    cfg = WS.replace(split_k=3, split_k_reduce=0)
    spec = make_spec(p, SM90, cfg)
    assert (spec.workspace_slice_elems, spec.workspace_bytes) == (3264, 39168)
    sol = SOLVER.get_solution(p, SM90, cfg)
    assert sol.workspace_bytes == 39168 == SOLVER.get_workspace_size(p, SM90, cfg)
    assert (sol.reduce.offset, sol.reduce.nbytes, sol.reduce.slice_elems) == (0, 39168, 3264)
    assert sol.as_dict()["split_k_reduce"]["bytes"] == 39168
    # no config: the widest split search offers here (16: 16 x 16 <= GemmK 9*64), 16 slices
    assert SOLVER.get_workspace_size(p, SM90) == 16 * 13056
    # atomics where allowed: no workspace for the config; without one, what the search's
    # stream-K configs need (their flags and slots), and nothing where it offers none (fp32)
    even = p.replace(C=32, K=64)
    assert SOLVER.get_workspace_size(even, SM90, cfg) == 0
    assert SOLVER.get_workspace_size(even, SM90) == max_stream_k_workspace(even, SM90) > 0
    assert SOLVER.get_workspace_size(even.replace(dtype="fp32"), SM90) == 0


def test_slices_follow_the_layout_copies_and_an_nchw_dx_needs_no_transform():
    # all NCHW fp16, 3x3 on 7x5 (Hi*Wi = 35, odd): dY (2, 16, 35) = 2240 bytes -> 2304; W
    # (16, 33, 9) = 9504 bytes -> 9728; no dX copy: the reduction stores dX NCHW.
    p = _p("convfp16 -n 2 -c 33 -H 7 -W 5 -k 16 -y 3 -x 3 -p 1 -q 1 -F 2")
    sol = SOLVER.find_solution(p, SM90, perf_config=WS)
    assert [t.tensor for t in sol.transforms] == ["dY", "W"] and not sol.spec.nchw_dx
    slice_bytes = -(-2 * 7 * 5 * 33 * 4 // 256) * 256                   # 9240 -> 9472
    assert sol.reduce.offset == 2304 + 9728 and sol.reduce.layout == "NCHW"
    assert sol.workspace_bytes == 2304 + 9728 + 2 * slice_bytes == SOLVER.get_workspace_size(p, SM90, WS)
    assert sol.kernel_name.endswith("+transpose_dy_w") and "_skws_" in sol.kernel_name
    # the atomic path of the same line (16-bit, odd Hi*Wi) keeps its dX transform, unchanged
    atomic = SOLVER.find_solution(p.replace(C=32), SM90, perf_config=WS.replace(split_k_reduce=0))
    assert atomic.spec.split_k_reduce == "atomic" and [t.tensor for t in atomic.transforms] == ["dY", "W", "dX"]


def test_split_n_reuses_one_launch_s_slices(monkeypatch):
    p = _p(f"convfp16 -n 6 -c 33 -H 7 -W 7 -k 4 -y 3 -x 3 -p 1 -q 1 {NHWC}")
    monkeypatch.setattr(ap, "TENSOR_BYTES_LIMIT", 2 * 7 * 7 * 33 * 2)       # two images per launch
    sol = SOLVER.find_solution(p, SM90, perf_config=WS)
    assert sol.n_chunks == 3 and sol.reduce.images == 2
    assert sol.workspace_bytes == 2 * (-(-2 * 7 * 7 * 33 * 4 // 256) * 256)   # one launch's, not 6 images'


def test_the_solution_says_what_runs_and_travels_as_data():
    p = _p(f"convbfp16 -n 3 -c 36 -H 9 -W 7 -k 40 -y 1 -x 1 -u 2 -v 2 {NHWC}")     # 1x1 s2: zero fill
    sol = SOLVER.find_solution(p, SM80, split_k=2)
    assert sol.spec.split_k_reduce == "workspace" and sol.zero_fill.kind == "reduce"
    assert sol.zero_fill.bytes == 0 and sol.spec.grid[0] == sol.spec.tiles_per_group   # no zero-fill blocks
    note = [n for n in sol.notes if n.startswith("Split-K: 2 slices of fp32 partial sums")]
    assert note and "dgrad_splitk_reduce_bf16_nhwc" in note[0] and "sm_80 has no packed bf16 atomic" in note[0]
    assert sol.reduce.cover == (0, 2, 1, 1, 2, 1, 0, 2, 1, 1, 2, 1)
    back = Solution.from_record(json.loads(json.dumps(sol.to_record())))
    assert back.reduce == sol.reduce and back.spec.split_k_reduce == "workspace"
    assert back.kernels[0].source.text == sol.kernels[0].source.text


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 40), st.integers(0, 6), st.integers(1, 6), st.integers(1, 5), st.integers(1, 8))
def test_the_reduction_s_coverage_is_the_decomposition_s(v, pad, stride, dil, filt):
    """The terms the reduction gets cover exactly the pixels the sub-GEMMs write (CPU
    engine's coverage_mask) and those some filter tap reaches (the convolution's definition)."""
    size = v + 1
    try:
        p = ConvProblem(N=1, C=2, Hi=size, Wi=3, K=2, Y=filt, X=1, pH=pad, pW=0, sH=stride, sW=1, dH=dil, dW=1,
                        dtype="fp32", in_layout="NHWC", out_layout="NHWC", fil_layout="NHWC")
    except ValueError:                      # the filter does not fit the padded input
        assume(False)
        return
    spec = make_spec(p, CPU, WS.replace(split_k_reduce=2, tile_k=8))
    red = SplitKReduce.of(spec, "NHWC", 0)
    mask = coverage_mask(p, spec.sub_gemms)
    assert np.array_equal(red.covered(), mask)
    assert np.array_equal(mask, tap_mask(p.Hi, p.Wi, (p.pH, p.sH, p.dH, p.Y), (p.pW, p.sW, p.dW, p.X)))
    assert bool(red.cover) == (not mask.all())
    if red.cover:
        assert [axis_covered(h, *red.cover[:6]) for h in range(size)] == list(mask[:, 0])


# ------------------------------------------------------------------ the CPU engine's two steps
def _check(problem, work, seed):
    """One CPU run of ``work`` (a spec or solution) into NaN-poisoned dX (and workspace): every element written,
    within one rounding to storage and fp32 accumulation (GemmK products, then split_k slice
    sums) of the float64 reference, exactly 0 where no term exists."""
    spec = getattr(work, "spec", work)
    dy, w = random_inputs(problem, seed)
    dx = CpuEngine(spec.target).run(work, dy, w)
    out = dx.astype(np.float64)
    assert np.isfinite(out).all(), "some dX element was never written (NaN poison survived)"
    ref = dgrad_reference(problem, dy, w)
    mag = dgrad_reference(problem, np.abs(dy.astype(np.float64)), np.abs(w.astype(np.float64)))
    terms = problem.kpg * problem.Y * problem.X + spec.split_k
    bound = 2 * EPS[problem.dtype] * np.abs(ref) + (terms + 2) * 2.0 ** -24 * mag * 1.01 + TINY[problem.dtype]
    assert not (np.abs(out - ref) > bound).any(), f"worst {np.max(np.abs(out - ref))}"
    assert (out[mag == 0] == 0).all(), "pixels without any term must be exactly 0"
    assert verify(problem, dx, ref).ok
    return dx, dy, w


@settings(max_examples=120, deadline=None)
@given(problems(), st.sampled_from([2, 3, 4, 7]), st.sampled_from(["cpu", "sm_90", "gfx942", "sm_80"]),
       st.integers(0, 2**16))
def test_cpu_engine_workspace_mode_matches_the_reference(problem, split, arch, seed):
    """Random problems (odd cpg, every dtype, strides, dilations, zero fill, groups, NCHW and
    mixed layouts), every split forced through the workspace, on the CPU engine."""
    t = get_target(arch)
    try:
        spec = make_spec(problem, t, WS.replace(split_k=split, stages=1 if t.vendor == "amd" else 2))
    except PerfConfigError:
        assume(False)
        return
    assert spec.workspace_reduce and spec.split_k == split
    dx, dy, w = _check(problem, spec, seed)
    assert np.array_equal(CpuEngine(t).run(spec, dy, w), dx)          # deterministic, bit for bit


@pytest.mark.parametrize("line", [
    "convfp16 -n 2 -c 33 -H 7 -W 7 -k 40 -y 3 -x 3 -p 1 -q 1",                # odd cpg
    "convbfp16 -n 2 -c 35 -H 9 -W 7 -k 24 -y 1 -x 1 -u 2 -v 2",               # 1x1 s2: 3/4 zero fill
    "conv -n 3 -c 12 -H 11 -W 9 -k 20 -y 3 -x 2 -p 2 -q 1 -u 2 -v 3 -l 2 -j 1 -g 2",   # strided, dilated, grouped
    "convfp16 -n 2 -c 27 -H 9 -W 10 -k 30 -y 3 -x 3 -p 2 -q 2 -u 2 -v 2 -l 2 -j 2 -g 3",  # gcd(s, d) = 2
    "convbfp16 -n 2 -c 5 -H 13 -W 1 -k 7 -y 5 -x 1 -p 2 -q 0",                # W of 1
])
@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
def test_cpu_engine_explicit_cases(line, layout):
    p = _p(f"{line} -F 2 --in_layout {layout} --out_layout {layout} --fil_layout {layout}")
    for split in (2, 5):
        sol = SOLVER.find_solution(p, SM90, perf_config=WS.replace(split_k=split))
        assert sol.reduce is not None and sol.reduce.layout == layout
        _check(p, sol, seed=split)


@pytest.mark.parametrize("chunks", [3, 6])
@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
def test_cpu_engine_split_n_chunks(monkeypatch, chunks, layout):
    p = _p(f"convfp16 -n 6 -c 15 -H 9 -W 7 -k 6 -y 3 -x 3 -p 1 -q 1 -u 2 -v 1 -F 2 --in_layout {layout} "
           f"--out_layout {layout} --fil_layout {layout}")
    whole = SOLVER.find_solution(p, SM90, perf_config=WS.replace(split_k=3))
    dx, dy, w = _check(p, whole, seed=4)
    monkeypatch.setattr(ap, "TENSOR_BYTES_LIMIT", (6 // chunks) * 9 * 7 * 15 * 2)
    sol = SOLVER.find_solution(p, SM90, perf_config=WS.replace(split_k=3))
    assert sol.n_chunks == chunks and sol.reduce.images == 6 // chunks
    assert np.array_equal(CpuEngine(SM90).run(sol, dy, w), dx)           # the same sums, image by image


def test_the_host_reduction_sums_in_slice_order_and_rounds_once():
    """Slices chosen so that the order matters in fp32: (1 + 2^-24) + ... kept or lost."""
    red = SplitKReduce(dtype="fp32", layout="NHWC", split_k=3, images=1, hi=1, wi=1, c=1, slice_elems=64, offset=0)
    ws = np.full((3, 64), np.nan, dtype=np.float32)
    ws[:, 0] = [1.0, 2.0 ** -24, 2.0 ** -24]
    assert red.apply(ws)[0, 0, 0, 0] == np.float32(1.0)                   # (1 + e) + e: each add rounds to 1
    ws[:, 0] = [2.0 ** -24, 2.0 ** -24, 1.0]
    assert red.apply(ws)[0, 0, 0, 0] == np.float32(1.0 + 2.0 ** -23)      # (e + e) + 1
    half = SplitKReduce(dtype="fp16", layout="NCHW", split_k=2, images=1, hi=1, wi=2, c=1, slice_elems=64, offset=0)
    ws[:2, :2] = [[1.0, 0.25], [2.0 ** -11, 2.0 ** -12]]                  # one rounding: 1 + 2^-11 -> 1 (ties even)
    assert half.apply(ws[:2]).tolist() == [[[[1.0, np.float16(0.25 + 2.0 ** -12)]]]]


# ------------------------------------------------------------------ the GPU engine, on a fake device
def _fake_run(tmp_path, sol, dy, w, rt=None):
    rt = rt or ComputingRuntime(sol)
    dx = GpuEngine(rt, BinaryCache(tmp_path)).run(sol, dy, w)
    return dx, rt


@pytest.mark.parametrize("line,layout", [
    ("convfp16 -n 2 -c 33 -H 7 -W 7 -k 40 -y 3 -x 3 -p 1 -q 1", ("NHWC",) * 3),
    ("convbfp16 -n 2 -c 35 -H 9 -W 7 -k 24 -y 1 -x 1 -u 2 -v 2", ("NHWC",) * 3),    # zero fill by the reduction
    ("convfp16 -n 2 -c 33 -H 7 -W 5 -k 16 -y 3 -x 3 -p 1 -q 1", ("NCHW",) * 3),     # NCHW dX, Hi*Wi odd
    ("conv -n 3 -c 12 -H 11 -W 9 -k 20 -y 3 -x 2 -p 2 -q 1 -u 2 -v 3 -l 2 -g 2", ("NCHW", "NHWC", "NCHW")),
])
def test_fake_device_runs_the_kernel_then_the_reduction(tmp_path, line, layout):
    p = _p(f"{line} -F 2 --in_layout {layout[0]} --out_layout {layout[1]} --fil_layout {layout[2]}")
    sol = SOLVER.find_solution(p, SM90, perf_config=WS.replace(split_k=3))
    dy, w = random_inputs(p, 9)
    dx, rt = _fake_run(tmp_path, sol, dy, w)
    v = verify(p, dx, dgrad_reference(p, dy, w))
    assert v.ok and v.nonfinite == 0, v
    assert np.array_equal(dx, CpuEngine(SM90).run(sol, dy, w))           # the same bits as the CPU engine
    launches = [c for c in rt.calls if c[0] == "launch"]
    names = [c[1] for c in launches]
    pre = [t.kernel_name for t in sol.transform_launches]
    assert names == pre + [sol.spec.kernel_name, f"dgrad_splitk_reduce_{p.dtype}_{layout[0].lower()}"]
    allocs = {c[2]: c[1] for c in rt.calls if c[0] == "alloc"}
    ws, dx_ptr = allocs[sol.workspace_bytes], [c[1] for c in rt.calls if c[0] == "alloc"][2]
    gemm, red = launches[len(pre)], launches[len(pre) + 1]
    assert gemm[5][2] == ws + sol.reduce.offset and gemm[2] == (sol.spec.tiles_per_group, p.G, 3)
    assert red[5][:2] == (ws + sol.reduce.offset, dx_ptr) and red[2] == sol.reduce.grid
    assert red[5][2:9] == (sol.reduce.slice_elems, 3, p.N, p.Hi, p.Wi, p.C, int(bool(sol.reduce.cover)))
    # no atomics, so no zeroing: the only memsets are the NaN poison of dX and of the slices
    assert {c[2] for c in rt.calls if c[0] == "memset"} == {POISON_BYTE}
    assert ("memset", ws + sol.reduce.offset, POISON_BYTE, sol.reduce.nbytes) in rt.calls


def test_fake_device_split_n_launches_kernel_and_reduction_per_chunk(monkeypatch, tmp_path):
    p = _p("convfp16 -n 6 -c 15 -H 9 -W 7 -k 6 -y 3 -x 3 -p 1 -q 1 -u 2 -v 1 -F 2")         # all NCHW
    monkeypatch.setattr(ap, "TENSOR_BYTES_LIMIT", 2 * 9 * 7 * 15 * 2)
    sol = SOLVER.find_solution(p, SM90, perf_config=WS.replace(split_k=4))
    assert sol.n_chunks == 3
    dy, w = random_inputs(p, 5)
    dx, rt = _fake_run(tmp_path, sol, dy, w)
    assert verify(p, dx, dgrad_reference(p, dy, w)).ok
    launches = [c for c in rt.calls if c[0] == "launch"]
    names = [c[1] for c in launches]
    assert names == ["dgrad_transpose_pair_b16"] + [sol.spec.kernel_name, "dgrad_splitk_reduce_fp16_nchw"] * 3
    assert len(sol.transforms) == 2                                              # dY and W, in one launch
    allocs = [c[1] for c in rt.calls if c[0] == "alloc"]
    img = 9 * 7 * 15 * 2
    slices = allocs[3] + sol.reduce.offset
    assert [c[5][2] for c in launches[1::2]] == [slices] * 3                     # one launch's slices, reused
    assert [c[5][:2] for c in launches[2::2]] == [(slices, allocs[2] + n0 * img) for n0 in (0, 2, 4)]
    rt2 = ComputingRuntime(sol)                                                  # bitwise deterministic
    assert np.array_equal(_fake_run(tmp_path, sol, dy, w, rt2)[0], dx)


def test_an_unwritten_slice_shows_in_dx(tmp_path):
    """A dgrad kernel that writes nothing leaves the NaN poison of the slices, and the
    reduction reads it (the fake reduction refuses to, so this one reads the raw bytes)."""
    p = _p(f"convfp16 -n 2 -c 33 -H 7 -W 7 -k 40 -y 3 -x 3 -p 1 -q 1 {NHWC}")
    sol = SOLVER.find_solution(p, SM90, perf_config=WS)

    class Idle(ComputingRuntime):
        def launch(self, func, grid, block, shared, args):
            if func[1] == self.sol.spec.kernel_name:
                return
            if func[1].startswith("dgrad_splitk_reduce_"):
                ws = self.floats(args[0], 2 * args[2]).reshape(2, -1)[:, :p.dx_elems]
                self.put(args[1], (ws[0] + ws[1]).astype(np.float16))
                return
            super().launch(func, grid, block, shared, args)
    dx, _ = _fake_run(tmp_path, sol, *random_inputs(p, 1), rt=Idle(sol))
    assert np.isnan(dx.astype(np.float32)).all()


def test_timing_counts_the_reduction(tmp_path):
    p = _p(f"convfp16 -n 2 -c 33 -H 7 -W 7 -k 40 -y 3 -x 3 -p 1 -q 1 {NHWC}")
    sol = SOLVER.find_solution(p, SM90, perf_config=WS)
    rt = ComputingRuntime(sol)
    rt.elapsed_ms = lambda a, b: 1.0
    GpuEngine(rt, BinaryCache(tmp_path)).time(sol, *random_inputs(p, 2), iters=2, warmup=1)
    names = [c[1] for c in rt.calls if c[0] == "launch"]
    assert names == [sol.spec.kernel_name, "dgrad_splitk_reduce_fp16_nhwc"] * 3


# ------------------------------------------------------------------ the sources
def test_sections_keep_every_other_kernel_byte_identical():
    """The workspace code lives in ``skws`` sections: a kernel without it has none of it, and
    one with it has no atomic call, no memset and no zero-fill blocks."""
    p = _p(f"convfp16 -n 2 -c 32 -H 7 -W 7 -k 40 -y 3 -x 3 -p 1 -q 1 {NHWC}")
    atomic = make_spec(p, SM90, WS.replace(split_k_reduce=1)).emit()
    ws = make_spec(p, SM90, WS).emit()
    for text in ("dg_store_f32x2", "DG_WS_SLICE", "#block", "#section", "#include-block"):
        assert text not in atomic.text
    assert "dg_atomic_add2(p, acc[i][j][e], acc[i][j][e + 1])" in atomic.text and atomic.pre_memset
    assert "dg_store_f32x2(p, acc[i][j][e], acc[i][j][e + 1]);\n" in ws.text
    # in the workspace kernel the store comes first and ends the iteration: no add is reached
    stored, added = ws.text.index("dg_store_f32x2(p, acc[i][j][e]"), ws.text.index("dg_atomic_add2(p, acc[i][j][e]")
    assert stored < ws.text.index("continue;", stored) < added
    assert not ws.pre_memset and ("DG_WS_SLICE", 3136) in ws.defines and ("DG_ZF_BLOCKS", 0) in ws.defines
    assert 'static_assert(DG_ZF_BLOCKS == 0, "the reduction kernel stores the zeros' in ws.text
    # the reduction rounds with the dgrad epilogue's own text
    convert = _read("dgrad.cu").split("DG_DEVICE dg_t dg_from_float(float f) {")[1].split("}")[0]
    red = emit_splitk_reduce("bf16", "NCHW", "amd", "gfx942", (1, 1, 1), (32, 8, 1))
    assert red.text.count(convert) == 1 and "dg_axis_covered" in red.text and "#include-block" not in red.text


def test_reduction_source_depends_only_on_dtype_layout_and_arch():
    a = SplitKReduce("fp16", "NHWC", 2, 1, 3, 3, 8, 128, 0).emit("nvidia", "sm_90")
    b = SplitKReduce("fp16", "NHWC", 7, 9, 30, 31, 40, 99968, 4096).emit("nvidia", "sm_90")
    assert a.sha256 == b.sha256 and a.name == "dgrad_splitk_reduce_fp16_nhwc"
    names = {emit_splitk_reduce(d, lay, "nvidia", "sm_90", (1, 1, 1), (256, 1, 1)).name
             for d, lay in itertools.product(("fp32", "fp16", "bf16"), ("NHWC", "NCHW"))}
    assert len(names) == 6
    with pytest.raises(ValueError, match="allowed: fp32, fp16, bf16 x NHWC, NCHW"):
        emit_splitk_reduce("fp16", "CHWN", "nvidia", "sm_90", (1, 1, 1), (256, 1, 1))


def test_reduction_grids_by_hand():
    # NHWC, C % 4 == 0: 2*7*7*32 = 3136 elements in 784 vectors of 4 -> 4 blocks of 256
    assert SplitKReduce("fp16", "NHWC", 2, 2, 7, 7, 32, 3136, 0).grid == (4, 1, 1)
    # NHWC, odd C: 2*7*7*33 = 3234 elements one by one -> 13 blocks
    assert SplitKReduce("fp16", "NHWC", 2, 2, 7, 7, 33, 3264, 0).grid == (13, 1, 1)
    # NCHW: Hi*Wi = 35 -> 2 pixel tiles, C = 33 -> 2 channel tiles; 2 images
    red = SplitKReduce("fp16", "NCHW", 2, 2, 7, 5, 33, 2368, 0)
    assert (red.grid, red.block) == ((4, 2, 1), (32, 8, 1))
    big = SplitKReduce("fp32", "NHWC", 2, 1, 16384, 16384, 7, 0, 0)       # grid x stops at 65535, loops
    assert big.grid == (65535, 1, 1)
    args = SplitKReduce("fp16", "NCHW", 3, 2, 7, 5, 33, 2368, 512, (0, 2, 1, 1, 2, 1, 0, 2, 1, 1, 2, 1)).args(4096, 8192)
    assert args == (4096, 8192, 2368, 3, 2, 7, 5, 33, 1, 0, 2, 1, 1, 2, 1, 0, 2, 1, 1, 2, 1)


def test_one_launch_past_2_31_elements_is_refused():
    p = ConvProblem(N=1, C=1, Hi=32768, Wi=65536, K=1, Y=1, X=1, dtype="fp32", in_layout="NHWC",
                    out_layout="NHWC", fil_layout="NHWC")
    spec = make_spec(p, CPU, WS.replace(tile_k=8))
    with pytest.raises(ValueError, match="32-bit offsets"):
        SplitKReduce.of(spec, "NHWC", 0)


# ------------------------------------------------------------------ what they compile to
COMPILE_CASES = [   # (line, config): every main loop with the workspace, and atomics beside them
    ("convfp16 -n 4 -c 33 -H 7 -W 7 -k 256 -y 3 -x 3 -p 1 -q 1", "64,64,32,2,2,32,32,0,0,0,2,-1,2"),
    ("convfp16 -n 4 -c 256 -H 7 -W 7 -k 256 -y 3 -x 3 -p 1 -q 1", "128,64,32,2,2,64,32,0,0,0,2,-1,4,0,2"),
    ("convfp16 -n 4 -c 256 -H 7 -W 7 -k 256 -y 3 -x 3 -p 1 -q 1", "128,64,32,2,2,64,32,0,0,0,2,-1,4,0,1"),
    ("convbfp16 -n 4 -c 512 -H 7 -W 7 -k 512 -y 3 -x 3 -p 1 -q 1", "128,64,32,2,2,64,32,0,0,0,4,-1,4"),
    ("conv -n 4 -c 256 -H 14 -W 14 -k 256 -y 1 -x 1 -u 2 -v 2", "64,64,16,2,2,32,32,0,0,0,4,-1,3,0,2"),
    ("convfp16 -n 4 -c 255 -H 14 -W 14 -k 512 -y 1 -x 1 -p 0 -q 0", "128,64,32,2,2,64,32,0,0,0,2,-1,3"),
]
WGMMA_CASES = [
    ("convfp16 -n 4 -c 512 -H 7 -W 7 -k 512 -y 3 -x 3 -p 1 -q 1", "128,128,64,2,1,64,128,0,0,0,2,-1,4,1,2"),
    ("convbfp16 -n 4 -c 257 -H 7 -W 7 -k 512 -y 3 -x 3 -p 1 -q 1", "128,128,64,2,1,64,128,0,0,0,2,-1,4,1"),
    ("convfp16 -n 4 -c 512 -H 14 -W 14 -k 256 -y 1 -x 1", "128,256,64,2,1,64,256,0,0,0,2,-1,3,1,2"),
]
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc on this machine")


def _amd():
    from miopen_solver.kernels.offline import find_amd_clang
    return find_amd_clang() is not None


needs_clang = pytest.mark.skipif(not _amd(), reason="no clang with AMDGPU targets (install clang-19 lld-19)")


@needs_nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("line,cfg", COMPILE_CASES + WGMMA_CASES)
def test_gemm_kernels_compile_for_nvidia_without_spills(tmp_path, arch, line, cfg):
    from miopen_solver.kernels.offline import inspect_nvidia
    target = get_target(arch)
    try:
        spec = make_spec(_p(f"{line} {NHWC}"), target, PerfConfig.parse(cfg))
    except PerfConfigError as e:
        assert arch == "sm_80" and ("warpgroup" in str(e) or "bf16 atomic" in str(e)), e
        return
    b = inspect_nvidia(spec.emit().text, arch, tmp_path, "k")
    assert b.spill_store_bytes == b.spill_load_bytes == 0, (spec.kernel_name, b.registers)
    assert b.registers <= register_cap(target, spec.block_threads), (spec.kernel_name, b.registers)
    if spec.workspace_reduce:
        assert b.count("red.global") == 0 and b.count("atom.") == 0       # plain stores only
        assert b.count("st.global.f32") + b.count("st.global.v2.f32") >= 1
        if spec.vec_c == 2:
            assert b.count("st.global.v2.f32") >= 1
    else:
        assert b.count("red.global.add") >= 1


@needs_clang
@pytest.mark.parametrize("arch", ["gfx90a", "gfx942"])
@pytest.mark.parametrize("line,cfg", COMPILE_CASES)
def test_gemm_kernels_compile_for_amd_without_scratch(tmp_path, arch, line, cfg):
    from miopen_solver.kernels.offline import compile_amd
    target = get_target(arch)
    cfg = PerfConfig.parse(cfg).replace(stages=2)             # no async copies on AMD
    try:
        spec = make_spec(_p(f"{line} {NHWC}"), target, cfg)
    except PerfConfigError as e:
        assert arch == "gfx90a" and "bf16 atomic" in str(e), e
        return
    co = compile_amd(spec.emit().text, arch, tmp_path, "k")
    r = co.resources
    assert r["ScratchSize [bytes/lane]"] == 0 and r["VGPRs Spill"] == 0 and r["SGPRs Spill"] == 0, (spec.kernel_name, r)
    if spec.workspace_reduce:
        assert co.count("global_atomic") == 0 and co.count("global_store") >= 1
    else:
        assert co.count("global_atomic") >= 1


@pytest.mark.parametrize("arch", ["sm_80", "sm_90", "gfx90a", "gfx942"])
@pytest.mark.parametrize("dtype,layout", list(itertools.product(("fp32", "fp16", "bf16"), ("NHWC", "NCHW"))))
def test_reduction_compiles_for_every_target_without_spills_or_scratch(tmp_path, arch, dtype, layout):
    from miopen_solver.kernels.offline import compile_amd, inspect_nvidia
    amd = arch.startswith("gfx")
    if not (_amd() if amd else shutil.which("nvcc")):
        pytest.skip(f"no compiler for {arch} on this machine")
    src = emit_splitk_reduce(dtype, layout, "amd" if amd else "nvidia", arch, (1, 1, 1), (256, 1, 1))
    if amd:
        co = compile_amd(src.text, arch, tmp_path, src.name)
        r = co.resources
        assert co.data[:4] == b"\x7fELF" and co.count("global_atomic") == 0
        assert r["ScratchSize [bytes/lane]"] == 0 and r["VGPRs Spill"] == 0 and r["SGPRs Spill"] == 0, (src.name, r)
        return
    b = inspect_nvidia(src.text, arch, tmp_path, src.name)
    assert b.spill_store_bytes == b.spill_load_bytes == b.stack_bytes == 0, (src.name, b.registers)
    assert b.registers <= 64 and b.count("atom") == 0 and b.count("red.") == 0
    if layout == "NHWC":
        assert b.count("ld.global.nc.v4.f32") >= 1                     # 16-byte slice loads where C % 4 == 0
    else:
        assert b.count("st.shared.f32") >= 1 and b.count("bar.sync") >= 1


# ------------------------------------------------------------------ the driver
from conftest import run_cli  # noqa: E402

ODD = f"convfp16 -n 2 -c 33 -H 7 -W 7 -k 40 -y 3 -x 3 -p 1 -q 1 {NHWC}"


@pytest.mark.parametrize("args", [
    ["run", *ODD.split(), "--split-k-reduce", "fast"],
    [*ODD.split(), "--backend", "cpu", "--split-k-reduce", "Workspace"],
    ["config", *ODD.split(), "--split-k-reduce", "fast"],
    ["config", *ODD.split(), "--split-k-reduce=fast"],
    ["tune", *ODD.split(), "--list", "--split-k-reduce", "fast"],
])
def test_a_bad_value_is_one_line_naming_the_flag_and_what_is_allowed(capsys, args):
    status, out, err = run_cli(capsys, *args)
    value = "Workspace" if "Workspace" in args else "fast"
    assert status == 2 and out == [] and len(err) == 1 and "Traceback" not in "".join(err)
    assert err[0].startswith("dgrad-driver: error: ") and "--split-k-reduce" in err[0] and value in err[0]
    assert "auto" in err[0] and "atomic" in err[0] and "workspace" in err[0]


def test_applicable_and_campaigns_refuse_the_setting(capsys, tmp_path):
    status, out, err = run_cli(capsys, "applicable", *ODD.split(), "--split-k-reduce", "atomic")
    assert status == 2 and len(err) == 1 and "--split-k-reduce: applicable answers for the problem" in err[0]
    lines = tmp_path / "lines.txt"
    lines.write_text(ODD + "\n")
    status, out, err = run_cli(capsys, "tune", "--file", str(lines), "--split-k-reduce", "atomic", "--backend", "cpu")
    assert status == 2 and len(err) == 1 and "--split-k-reduce: not available in a campaign" in err[0]


def test_a_run_on_the_cpu_engine_splits_through_the_workspace_and_verifies(capsys):
    status, out, err = run_cli(capsys, *ODD.split(), "--backend", "cpu", "--split-k", "3", "-S", "1000", "-V", "1")
    assert status == 0, err
    slices = 3 * (-(-2 * 7 * 7 * 33 * 4 // 256) * 256)                     # 3 x 13056 bytes
    assert any(line.startswith(f"Split-K: 3 slices of fp32 partial sums in {slices} bytes of the workspace, "
                               "summed in order by dgrad_splitk_reduce_fp16_nhwc (no atomics, deterministic); "
                               "atomics refused: split_k > 1 with fp16 needs an even cpg") for line in out)
    assert f"- id: 1000 algo: 5, time: -1 ms, ws: {slices}, name: ConvDgradImplicitGemmTilde" in out
    assert out[-1].startswith("Backward Convolution Data Verifies OK on CPU reference")
    status, out, err = run_cli(capsys, *ODD.split(), "--arch", "sm_90", "--split-k", "3", "--print-name-only")
    assert status == 0 and "_sk3_" in out[0] and "_skws_" in out[0]


def test_run_and_config_json_report_the_reduction(capsys):
    even = ODD.replace("-c 33", "-c 32")
    status, out, _ = run_cli(capsys, *even.split(), "--backend", "cpu", "--split-k", "2", "--split-k-reduce",
                             "workspace", "--json")
    rec = json.loads(out[-1])
    assert status == 0 and rec["verify"]["ok"] and rec["split_k_reduce"]["mode"] == "workspace"
    assert rec["workspace_bytes"] == rec["split_k_reduce"]["bytes"] == 2 * 12544     # 2*7*7*32*4 = 12544
    assert PerfConfig.parse(rec["perf_config"]).split_k_reduce == 2
    status, out, _ = run_cli(capsys, "config", *even.split(), "--arch", "sm_90", "--split-k", "2", "--json")
    doc = json.loads("\n".join(out))
    assert status == 0 and doc["split_k_reduce"] == {"mode": "atomic"} and doc["workspace_bytes"] == 0
    status, out, _ = run_cli(capsys, "config", *even.split(), "--arch", "sm_90", "--split-k", "2",
                             "--split-k-reduce", "workspace")
    assert status == 0 and any(line.startswith("split-K reduction: dgrad_splitk_reduce_fp16_nhwc") for line in out)
    status, out, _ = run_cli(capsys, "config", *even.split(), "--arch", "sm_90", "--split-k-reduce", "workspace")
    assert status == 0 and "note: --split-k-reduce workspace: split_k is 1, nothing to reduce" in out


def test_tune_lists_workspace_candidates_on_request(capsys):
    even = ODD.replace("-c 33", "-c 32")
    status, plain, _ = run_cli(capsys, "tune", *even.split(), "--arch", "sm_90", "--list")
    status2, ws, _ = run_cli(capsys, "tune", *even.split(), "--arch", "sm_90", "--list", "--split-k-reduce",
                             "workspace")
    assert status == status2 == 0 and len(plain) == len(ws)
    split = [PerfConfig.parse(c) for c in ws if PerfConfig.parse(c).split_k > 1]
    assert split and all(c.split_k_reduce == 2 for c in split)
    assert [c for c in plain if PerfConfig.parse(c).split_k == 1] == [c for c in ws if PerfConfig.parse(c).split_k == 1]


# ------------------------------------------------------------------ the bench script, without a GPU
def test_the_splitk_bench_plans_every_variant_without_a_gpu(capsys):
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))
    import splitk_h200 as bench
    assert bench.main(["--dry-run"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1].endswith("variants planned for sm_90")
    labels = [line.split(" (")[0] for line in out if line and not line.startswith(" ") and "planned" not in line]
    assert "suite/r50_3x3_c512_7_fp32" in labels and "resnet50/layer4.1.conv3_1x1_c512_k2048_7" in labels
    assert not any(label.startswith("efficientnet_b0/features.5.1.se") for label in labels)   # 1x1 images: no
    cells = [line.split() for line in out if line.startswith("  ")]
    ws = [c for c in cells if c[0] in ("ws2", "ws4")]
    assert ws and all("_skws_" in c[-1] and c[2] == "workspace" for c in ws)
    assert all("_skws" not in c[-1] for c in cells if c[0].startswith("atomic") or c[0] == "sk1")
    for bad in (["--launches", "0"], ["--max-seconds", "0"], ["--nope"]):
        with pytest.raises(SystemExit) as e:
            bench.main(bad)
        assert e.value.code == 2


def test_host_memory_counts_the_cpu_engine_s_slices():
    """The CPU engine holds one launch's slices and the reduction's temporaries beside dX
    (memory.engine_plan): 2 x 13056 bytes of slices; the fp32 sum, the fp16 cast and an NCHW
    copy of 3234 elements (4 + 2 + 2 bytes each); the covered mask, a bool per pixel (7 x 7)
    from lists of a bool per row and column (9 bytes each, 7 + 7). No index arrays: the
    masked sums of the slices are stores and adds with ``where=``."""
    from miopen_solver import memory
    p = _p(f"convfp16 -n 2 -c 33 -H 7 -W 7 -k 40 -y 3 -x 3 -p 1 -q 1 {NHWC}")
    ws, plain = (SOLVER.get_solution(p, SM90, WS.replace(split_k=s)).spec for s in (2, 1))
    want = 2 * 13056 + (4 + 2 + 2) * 3234 + 7 * 7 + 9 * (7 + 7)
    assert memory.engine_plan(ws).split_k_bytes == want
    assert memory.engine_plan(plain).split_k_bytes == 0
    assert (memory.cpu_engine_bytes(p, memory.engine_plan(ws)) - memory.cpu_engine_bytes(p, memory.engine_plan(plain))
            == want)
