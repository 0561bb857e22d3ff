"""The plane schedule (``DIRECT_PLANE``, 19: depthwise and small-cpg grouped dgrad on NCHW
planes in place): its rules and their messages, the resolved spec, the default and the
search, the grid's coverage, the emitted kernel run by the CPU emulator (both vendor
flavours) against the float64 reference, offline builds (ptxas without spills, clang for
gfx90a/gfx942 without scratch) and the solver and CPU engine around it."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from miopen_solver import layouts
from miopen_solver.config import KernelSchedule, PerfConfig
from miopen_solver.direct_plane import (MAX_ACC, MAX_ROW, WHOLE_MAX_PIXELS, default_plane_config, make_plane_spec,
                                        plane_config, plane_reason, plane_search_space, window_rows)
from miopen_solver.errors import PerfConfigError
from miopen_solver.heuristics import default_performance_config
from miopen_solver.kernels import offline
from miopen_solver.problem import ConvProblem
from miopen_solver.reference import default_tolerance, dgrad_reference, rms_range
from miopen_solver.runtime.cpu import CpuEngine
from miopen_solver.solver import DgradSolver, Solution
from miopen_solver.target import get_target

import kernel_emu
from test_direct_mma import emulated_matches_reference   # one check: NaN-poisoned dX, float64 reference

SM90 = get_target("sm_90")
NCHW = dict(in_layout="NCHW", out_layout="NCHW", fil_layout="NCHW")
PLANE = KernelSchedule.DIRECT_PLANE


def dw(**kw) -> ConvProblem:
    base = dict(N=2, C=16, Hi=9, Wi=10, K=16, Y=3, X=3, pH=1, pW=1, G=16, dtype="fp16")
    base.update(kw)
    lay = dict(NCHW)
    lay.update({k: base.pop(k) for k in list(base) if k.endswith("_layout")})
    return ConvProblem(**base, **lay)


def cfg(**kw) -> PerfConfig:
    """A valid rows-staged plane config for ``dw()`` with fields overridden."""
    base = dict(tile_m=12, tile_n=4, tile_k=10, warp_m=1, warp_n=1, warp_tile_m=4, warp_tile_n=2, vector_size_a=0,
                vector_size_b=0, vector_size_c=0, split_k=1, lds_k_outer=1, stages=1, schedule=PLANE)
    base.update(kw)
    return PerfConfig(**base)


def served(R: random.Random, *, hw: int = 70, g: int = 40) -> ConvProblem:
    """A random problem the plane schedule serves (strides 1-5, dilations 1-4, pads, cpg and
    kpg from 1 to 8, odd sizes, every data type, W NCHW or NHWC)."""
    while True:
        Y, X, G = R.randint(1, 7), R.randint(1, 7), R.randint(1, g)
        cpg, kpg = R.choice([1, 1, 1, 2, 3, 4, 8]), R.choice([1, 1, 2, 3])
        try:
            p = ConvProblem(N=R.randint(1, 3), C=G * cpg, K=G * kpg, G=G, Hi=R.randint(1, hw), Wi=R.randint(1, hw),
                            Y=Y, X=X, pH=R.randint(0, Y), pW=R.randint(0, X), sH=R.randint(1, 5), sW=R.randint(1, 5),
                            dH=R.randint(1, 4), dW=R.randint(1, 4), dtype=R.choice(["fp16", "bf16", "fp32"]),
                            in_layout="NCHW", out_layout="NCHW", fil_layout=R.choice(["NCHW", "NHWC"]))
        except ValueError:
            continue
        if plane_reason(p, SM90) is None:
            return p


def valid(p: ConvProblem, c: PerfConfig) -> bool:
    try:
        make_plane_spec(p, SM90, c)
    except PerfConfigError:
        return False
    return True


# ----------------------------------------------------------------------------- rules
@pytest.mark.parametrize("kw", [
    dict(Hi=7, Wi=7, Y=7, X=7, pH=0, pW=0, C=8, K=8, G=8),                  # a 1x1 dY: its bytes are both orders'
    dict(C=1, K=4, G=1),                                                      # C = 1: dX's bytes are both
    dict(Hi=7, Wi=7, Y=7, X=7, pH=0, pW=0, C=8, K=8, G=8, out_layout="NHWC"),  # an NHWC flag on the same bytes
])
def test_tensors_whose_bytes_are_nchw_under_any_flag_are_served(kw, tmp_path):
    """A tensor whose NCHW and NHWC bytes coincide (H*W = 1, or C = 1) is NCHW in memory
    whatever its flag says: served, run in place, against float64."""
    p = dw(**kw)
    assert plane_reason(p, SM90) is None
    sol = DgradSolver().find_solution(p, SM90)
    assert sol.spec.schedule is PLANE and sol.transforms == ()
    rng = np.random.default_rng(3)
    dy = rng.uniform(-1, 1, layouts.dy_shape(p)).astype(np.float16)
    w = rng.uniform(-1, 1, layouts.w_shape(p)).astype(np.float16)
    ref = dgrad_reference(p, dy, w)
    assert rms_range(ref, CpuEngine(SM90).run(sol, dy, w)) < default_tolerance("fp16", implicit_gemm=False)
    if kernel_emu.available():
        emulated_matches_reference(sol.spec, 3, "amd", tmp_path)


def test_served_problem_has_no_reason():
    assert plane_reason(dw(), SM90) is None
    assert plane_reason(dw(fil_layout="NHWC"), SM90) is None
    assert plane_reason(dw(C=32, K=64, G=8, dtype="fp32"), SM90) is None       # cpg 4, kpg 8


@pytest.mark.parametrize("problem,words", [
    (dw(in_layout="NHWC", out_layout="NHWC", fil_layout="NHWC"), "reads dY and writes dX NCHW"),
    (dw(out_layout="NHWC"), "dY (--out_layout NHWC) is not"),
    (dw(in_layout="NHWC"), "dX (--in_layout NHWC) is not"),
    (dw(C=66, K=66, G=2), "cpg=33 exceeds"),
    (dw(C=4, K=36, G=4), "kpg=9 exceeds"),
    (dw(Hi=20, Wi=20, Y=9, X=10, pH=4, pW=4), "9x10=90 taps exceeds 81"),
    (dw(Wi=200, X=7, pW=3, dW=6), "window row is 37 columns"),
])
def test_each_reason(problem, words):
    why = plane_reason(problem, SM90)
    assert why is not None and words in why, why
    with pytest.raises(PerfConfigError, match="does not apply"):
        make_plane_spec(problem, SM90, cfg())


@pytest.mark.parametrize("changes,words", [
    (dict(warp_m=2), "warp_m must be 1"),
    (dict(vector_size_c=4), "vector_size_c must be 0"),
    (dict(split_k=2), "split_k must be 1"),
    (dict(stages=3), "stages must be 1 (a block per block of planes) or 2"),
    (dict(stages=2), "stages=2 (persistent blocks) needs lds_k_outer=2"),
    (dict(lds_k_outer=0), "lds_k_outer must be 1 (dY window staged row by row) or 2"),
    (dict(tile_m=0), "tile_m must be >= 1"),
    (dict(tile_m=10), "tile_m=10 must be a multiple of warp_tile_m=4"),
    (dict(tile_k=9), "tile_k=9 must be a multiple of warp_tile_n=2"),
    (dict(tile_m=72, warp_tile_m=72, tile_k=2), "accumulators per thread exceeds 64"),
    (dict(tile_n=100), "1500 threads exceeds 1024"),
    (dict(lds_k_outer=2, tile_m=8), "tile_m=8 >= Wi=10"),
])
def test_each_config_rule_names_its_field(changes, words):
    with pytest.raises(PerfConfigError, match=words.replace("(", r"\(").replace(")", r"\)")):
        make_plane_spec(dw(), SM90, cfg(**changes))


def test_stride_rules_and_whole_planes_need_depthwise():
    p = dw(sH=2, sW=3, Hi=12, Wi=12)
    with pytest.raises(PerfConfigError, match="warp_tile_m=4 .* multiple of the W stride 3"):
        make_plane_spec(p, SM90, cfg(tile_m=12, warp_tile_m=4, tile_k=4, warp_tile_n=2))
    with pytest.raises(PerfConfigError, match="warp_tile_n=3 .* multiple of the H stride 2"):
        make_plane_spec(p, SM90, cfg(tile_m=12, warp_tile_m=6, tile_k=6, warp_tile_n=3))
    assert valid(p, cfg(tile_m=12, warp_tile_m=6, tile_k=4, warp_tile_n=2))
    grouped = dw(C=32, K=32, G=8)
    with pytest.raises(PerfConfigError, match="needs a depthwise problem with kpg 1"):
        make_plane_spec(grouped, SM90, cfg(lds_k_outer=2))
    assert valid(grouped, cfg())


def test_shared_memory_and_loads_bounds():
    odd = dw(N=4, C=4, K=4, G=4, Hi=63, Wi=63, dtype="fp32")          # Wo odd: one element a load
    with pytest.raises(PerfConfigError, match="needs 69 staging loads a thread, more than 32"):
        make_plane_spec(odd, SM90, cfg(tile_m=64, warp_tile_m=8, tile_k=64, warp_tile_n=8, tile_n=1))
    p = dw(N=64, C=64, K=64, G=64, Hi=64, Wi=64)
    with pytest.raises(PerfConfigError, match="exceed sm_90's .*lower tile_n"):
        make_plane_spec(p, SM90, cfg(tile_m=64, warp_tile_m=8, tile_k=64, warp_tile_n=8, tile_n=16, lds_k_outer=2))


@given(pad=st.integers(0, 9), stride=st.integers(1, 6), dil=st.integers(1, 5), filt=st.integers(1, 9),
       pixels=st.integers(1, 24))
@settings(max_examples=300, deadline=None)
def test_window_rows_are_the_rows_the_taps_read(pad, stride, dil, filt, pixels):
    """``(offset, count)`` spans exactly the dY rows (relative to ``first/stride``) that the
    taps of ``pixels`` consecutive dX rows starting on a multiple of the stride read."""
    pixels = -(-pixels // stride) * stride
    read = [(i + pad - t * dil) // stride for i in range(pixels) for t in range(filt)
            if (i + pad - t * dil) % stride == 0]
    off, count = window_rows(pad, stride, dil, filt, pixels)
    assert off <= min(read) and max(read) == off + count - 1
    assert off == (pad - (filt - 1) * dil) // stride


# ----------------------------------------------------------------------------- spec
def test_spec_fields_name_and_dict():
    p = dw(N=64, C=32, K=32, G=32, Hi=112, Wi=112)
    c = default_plane_config(p, SM90)
    assert c.serialize() == "112,1,16,1,1,4,2,0,0,0,1,1,1,19"
    s = make_plane_spec(p, SM90, c)
    assert (s.twt, s.tht, s.pb, s.block_threads) == (28, 8, 1, 224)
    assert s.grid == (64 * 32 * 7, 1, 1) and s.lv == 8 and s.vs == 4 and s.vr == 4 and not s.whole
    assert (s.off_r, s.rt, s.off_c, s.ct) == (-1, 4, -1, 6)
    assert (s.wr, s.wc) == (7 * 2 + 4, 27 * 4 + 6)
    assert s.kernel_name == ("dgrad_plane_sm_90_fp16_t112x16x1_p4x2_r4_s4_l8_th224_wkyxc_"
                             "n64c32h112w112k32y3x3p1x1s1x1d1x1g32")
    d = s.as_dict()
    assert d["schedule"] == "direct-plane" and d["window"]["staged"] == "rows" and d["workspace_bytes"] == 0
    assert s.transforms(p) == () and s.zero_fill == "none" and s.math == "fp16"
    names = dict(s.defines())
    assert names["DP_WHOLE"] == 0 and names["DP_NV"] == 16 and names["DP_CMOD"] == 7   # -1 mod 8; ceil(121/8)


def test_whole_planes_spec():
    p = dw(N=64, C=960, K=960, G=960, Hi=7, Wi=7)
    c = default_plane_config(p, SM90)
    assert c.lds_k_outer == 2 and c.tile_m >= 7 and c.tile_k >= 7
    s = make_plane_spec(p, SM90, c)
    assert s.whole and s.pb == 32 and s.lv == 8 and s.vs == 8      # 32 x 49 planes: whole 16-byte runs
    assert s.out_offset % 16 == 0 and s.lds_bytes == s.out_offset + 32 * 49 * 2
    assert "_whole_" in s.kernel_name
    odd = dw(N=1, C=3, K=3, G=3, Hi=7, Wi=7)                        # a 3 x 49 run: single elements
    assert make_plane_spec(odd, SM90, default_plane_config(odd, SM90)).lv == 1


def test_default_stages_whole_planes_up_to_the_threshold():
    small = dw(N=8, C=64, K=64, G=64, Hi=32, Wi=32)
    big = dw(N=8, C=64, K=64, G=64, Hi=33, Wi=32)
    assert small.Hi * small.Wi == WHOLE_MAX_PIXELS
    assert default_plane_config(small, SM90).lds_k_outer == 2
    assert default_plane_config(big, SM90).lds_k_outer == 1


def test_defaults_and_search_space_are_valid():
    R = random.Random(3)
    for _ in range(120):
        p = served(R)
        c = default_plane_config(p, SM90)
        assert valid(p, c), (p.short_tag(), c.serialize())
        space = list(plane_search_space(p, SM90))
        assert space[0] == c and len(space) == len(set(space)) <= 1 + 4 * 3 * 3 * 3
        assert sum(valid(p, x) for x in space) >= 1


def test_the_nvidia_default_of_nchw_depthwise_is_the_plane_schedule():
    p = dw(N=64, C=144, K=144, G=144, Hi=56, Wi=56)
    assert default_performance_config(p, SM90).schedule is PLANE
    nhwc = p.replace(in_layout="NHWC", out_layout="NHWC", fil_layout="NHWC")
    assert default_performance_config(nhwc, SM90).schedule is KernelSchedule.DIRECT
    grouped = dw(N=64, C=128, K=128, G=32, Hi=56, Wi=56)            # cpg 4: the transposing direct default
    assert default_performance_config(grouped, SM90).schedule is KernelSchedule.DIRECT
    assert default_performance_config(p, get_target("gfx942")).schedule is not PLANE
    assert any(c.schedule is PLANE for c in DgradSolver().search(grouped, SM90))


def coverage(s) -> np.ndarray:
    """How many times the launch of spec ``s`` writes each dX element (block by block, as the
    kernel indexes: tile along W fastest, then along H, then the block of planes)."""
    p = s.problem
    cov = np.zeros((p.N * p.C, p.Hi, p.Wi), dtype=np.int32)
    for b in range(s.grid[0]):
        tw, th, pb = b % s.tiles_w, b // s.tiles_w % s.tiles_h, b // (s.tiles_w * s.tiles_h)
        h0, w0 = th * s.th, tw * s.tw
        for tp in range(s.pb):
            plane = pb * s.pb + tp
            if plane < p.N * p.C:
                cov[plane, h0:h0 + s.th, w0:w0 + s.tw] += 1
    return cov


def test_grid_covers_every_dx_element_exactly_once():
    R = random.Random(5)
    for _ in range(60):
        p = served(R, hw=40, g=12)
        space = [c for c in plane_search_space(p, SM90) if valid(p, c)]
        s = make_plane_spec(p, SM90, R.choice(space))
        cov = coverage(s)
        assert cov.min() == 1 and cov.max() == 1, (p.short_tag(), s.config.serialize())


# ----------------------------------------------------------------------------- the kernel, emulated
EMU_CASES = [      # (problem, config changes or None for the default)
    (dw(), None),                                                                          # whole planes
    (dw(N=3, C=17, K=17, G=17, Hi=11, Wi=10), dict(lds_k_outer=1)),                         # rows, partial blocks
    (dw(C=24, K=24, G=24, Hi=11, Wi=16, Y=5, X=5, pH=2, pW=2, sH=2, sW=2, dtype="bf16"), None),
    (dw(C=16, K=32, G=4, Hi=13, Wi=12), None),                                              # cpg 4, kpg 8, KCYX
    (dw(C=16, K=32, G=4, Hi=13, Wi=12, fil_layout="NHWC"), None),                           # the same, KYXC
    (dw(N=1, C=3, K=6, G=3, Hi=10, Wi=11, Y=4, X=4, pH=1, pW=2, sH=3, sW=3, dtype="fp32"), None),
    (dw(C=8, K=8, G=8, Hi=12, Wi=9, Y=3, X=2, pH=2, pW=1, dH=2, dW=3, dtype="fp32"), None),
    (dw(N=1, C=18, K=36, G=6, Hi=8, Wi=9, Y=2, X=3, pH=0, pW=2, sW=2, dtype="bf16"), None),
    (dw(N=2, C=5, K=5, G=5, Hi=7, Wi=7), dict(tile_n=3)),                                   # 49-pixel tail
]


@pytest.mark.skipif(not kernel_emu.available(), reason="clang++ not on PATH")
@pytest.mark.parametrize("vendor", ["amd", "nvidia"])
@pytest.mark.parametrize("case", range(len(EMU_CASES)))
def test_emulated_kernel_matches_float64_reference(case, vendor, tmp_path):
    p, changes = EMU_CASES[case]
    c = default_plane_config(p, SM90)
    if changes:
        c = c.replace(**changes)
    emulated_matches_reference(make_plane_spec(p, SM90, c), case, vendor, tmp_path)


@pytest.mark.skipif(not kernel_emu.available(), reason="clang++ not on PATH")
@pytest.mark.parametrize("seed", range(8))
def test_emulated_random_problems_and_configs(seed, tmp_path):
    """Random served problems on a random valid searched config (whole planes where one is)."""
    R = random.Random(700 + seed)
    p = served(R, hw=24, g=6)
    space = [c for c in plane_search_space(p, SM90) if valid(p, c)]
    whole = [c for c in space if c.lds_k_outer == 2]
    c = R.choice(whole if whole and seed % 2 else space)
    emulated_matches_reference(make_plane_spec(p, SM90, c), seed, R.choice(["amd", "nvidia"]), tmp_path)


@pytest.mark.skipif(not kernel_emu.available(), reason="clang++ not on PATH")
@pytest.mark.parametrize("seed", range(4))
def test_emulated_persistent_blocks_walk_every_plane_block(seed, tmp_path):
    """Whole planes on persistent blocks (``stages`` 2) on a target sized so that two blocks
    walk every block of planes (the last partial), the next one's loads in flight."""
    t = SM90.with_(num_cus=2, regs_per_cu=4096)          # one resident block per multiprocessor
    R = random.Random(800 + seed)
    while True:
        p = served(R, hw=12, g=40)
        p = p.replace(C=p.G, K=p.G, fil_layout="NCHW")     # depthwise, kpg 1
        cfgs = [c.replace(stages=2) for c in plane_search_space(p, t) if c.lds_k_outer == 2]
        cfgs = [c for c in cfgs if valid(p, c) and make_plane_spec(p, t, c).pblocks > 2]
        if cfgs:
            break
    s = make_plane_spec(p, t, R.choice(cfgs))
    assert s.grid == (2, 1, 1) and "_pg2_" in s.kernel_name
    emulated_matches_reference(s, seed, ("amd", "nvidia")[seed % 2], tmp_path)


# ----------------------------------------------------------------------------- offline builds
ZOO_DW = [   # the zoo's depthwise shapes in NCHW (batch cut: the code does not depend on it but for offsets)
    dict(C=32, K=32, G=32, Hi=112, Wi=112), dict(C=96, K=96, G=96, Hi=112, Wi=112, sH=2, sW=2),
    dict(C=576, K=576, G=576, Hi=14, Wi=14, sH=2, sW=2), dict(C=1152, K=1152, G=1152, Hi=7, Wi=7, Y=5, X=5, pH=2, pW=2),
    dict(C=96, K=96, G=96, Hi=56, Wi=56, Y=7, X=7, pH=3, pW=3), dict(C=768, K=768, G=768, Hi=7, Wi=7, Y=7, X=7, pH=3, pW=3),
]


@pytest.mark.skipif(not offline.shutil.which("nvcc"), reason="nvcc not on PATH")
@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32"])
def test_nvcc_builds_zoo_defaults_without_spills(dtype, tmp_path):
    for kw in ZOO_DW:
        p = dw(N=64, dtype=dtype, **kw)
        s = make_plane_spec(p, SM90, default_plane_config(p, SM90))
        b = offline.inspect_nvidia(s.emit().text, "sm_90", tmp_path, "k")
        assert 0 < b.registers <= 128 and b.spill_store_bytes == 0 and b.spill_load_bytes == 0, (kw, b.registers)
        assert b.count("ld.global.nc") > 0 and b.count("fma.rn.f32") > 0


@pytest.mark.skipif(offline.find_amd_clang() is None, reason="no clang with AMDGPU targets")
@pytest.mark.parametrize("arch", ["gfx90a", "gfx942"])
def test_clang_builds_without_scratch(arch, tmp_path):
    t = get_target(arch)
    for kw, dtype in zip(ZOO_DW, ("fp16", "bf16", "fp32", "fp16", "bf16", "fp32")):
        p = dw(N=64, dtype=dtype, **kw)
        co = offline.compile_amd(make_plane_spec(p, t, default_plane_config(p, t)).emit().text, arch, tmp_path)
        assert co.data and co.resources.get("ScratchSize [bytes/lane]", 0) == 0, (kw, co.resources)


# ----------------------------------------------------------------------------- solver and CPU engine
def test_solution_has_no_transform_and_round_trips():
    p = dw(N=4, C=48, K=48, G=48, Hi=20, Wi=21, sH=2, sW=2)
    solver = DgradSolver()
    sol = solver.find_solution(p, SM90)
    assert sol.spec.schedule is PLANE and sol.transforms == () and sol.workspace_bytes == 0
    assert sol.kernel_name.startswith("dgrad_plane_sm_90_fp16_")
    assert any(n.startswith("Layout: dY read and dX written NCHW in place, plane by plane") for n in sol.notes)
    assert solver.get_workspace_size(p, SM90, sol.perf_config) == 0
    assert Solution.from_record(json.loads(json.dumps(sol.to_record()))).spec == sol.spec


@pytest.mark.parametrize("seed", range(6))
def test_cpu_engine_runs_the_schedule_against_float64(seed):
    """The CPU engine's plane launch (NCHW bytes in and out, W in its own order) on random
    served problems, dX poisoned by the engine, split into chunks of images where asked."""
    R = random.Random(40 + seed)
    p = served(R, hw=30, g=10)
    c = default_plane_config(p, SM90)
    sol = DgradSolver().get_solution(p, SM90, c)
    rng = np.random.default_rng(seed)
    st_ = layouts.storage_dtype(p.dtype)
    dy = rng.uniform(-1, 1, layouts.dy_shape(p)).astype(st_)
    w = rng.uniform(-1, 1, layouts.w_shape(p)).astype(st_)
    out = CpuEngine(SM90).run(sol, dy, w)
    assert np.isfinite(out.astype(np.float32)).all()
    tol = default_tolerance(p.dtype, implicit_gemm=False) if p.dtype != "fp32" else 1e-5
    assert rms_range(dgrad_reference(p, dy, w), out) < tol, (p.short_tag(), c.serialize())


def test_limits_are_what_the_docstring_says():
    assert MAX_ACC == 64 and MAX_ROW == 32
    c = plane_config(dw(Hi=5, Wi=5), SM90, q=1, m=1, threads=64)
    assert c.schedule is PLANE and c.lds_k_outer == 2 and c.warp_tile_m == 1
