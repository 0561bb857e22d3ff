"""The ``direct`` schedule (miopen_solver/direct.py, kernels/direct.cu), CPU only: its rules,
its launch geometry, offline builds of the emitted source, its numpy engine and (where g++
exists) the emitted kernel itself run on host threads, against the float64 reference."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from miopen_solver import layouts
from miopen_solver.direct import (FIXED_SLOTS, MAX_ACC, MMA_BODIES, POLICIES, DirectSpec, default_direct_config,
                                  default_policy, direct_reason, direct_search_space, is_valid_direct_config,
                                  make_direct_spec, policy_config, run_direct_cpu)
from miopen_solver.errors import PerfConfigError
from miopen_solver.kernels import offline
from miopen_solver.problem import ConvProblem
from miopen_solver.reference import default_tolerance, dgrad_reference, rms_range
from miopen_solver.solver import Solution, solution_of
from miopen_solver.spec import PerfConfig
from miopen_solver.target import get_target

import kernel_emu

SM90 = get_target("sm_90")
NHWC = dict(in_layout="NHWC", out_layout="NHWC", fil_layout="NHWC")


def dw(**kw) -> ConvProblem:
    base = dict(N=2, C=16, Hi=9, Wi=10, K=16, Y=3, X=3, pH=1, pW=1, G=16, dtype="fp16")
    base.update(kw)
    return ConvProblem(**base, **NHWC)


def cfg(**kw) -> PerfConfig:
    """A valid direct config for ``dw()`` with fields overridden."""
    base = dict(tile_m=8, tile_n=16, tile_k=4, warp_m=1, warp_n=1, warp_tile_m=4, warp_tile_n=2,
                vector_size_a=0, vector_size_b=0, vector_size_c=4, split_k=1, lds_k_outer=0, stages=1)
    base.update(kw)
    return PerfConfig(**base)


def random_problem(R: random.Random, small=True) -> ConvProblem | None:
    cpg, kpg = R.choice([1, 1, 2, 3, 4, 5, 8]), R.choice([1, 1, 2, 3])
    G = R.randint(1, 6)
    Y, X = R.randint(1, 7), R.randint(1, 7)
    try:
        return ConvProblem(N=R.randint(1, 2), C=cpg * G, Hi=R.randint(1, 13 if small else 24),
                           Wi=R.randint(1, 13 if small else 24), K=kpg * G, Y=Y, X=X, pH=R.randint(0, Y),
                           pW=R.randint(0, X), sH=R.randint(1, 4), sW=R.randint(1, 4), dH=R.randint(1, 3),
                           dW=R.randint(1, 3), G=G, dtype=R.choice(["fp16", "bf16", "fp32"]), **NHWC)
    except ValueError:  # the filter does not fit the padded input
        return None


def served_problems(seed: int, count: int, small=True, target=SM90):
    """``count`` random problems the direct schedule serves on ``target``."""
    R = random.Random(seed)
    out = []
    while len(out) < count:
        p = random_problem(R, small)
        if p is not None and direct_reason(p, target) is None:
            out.append(p)
    return out


def fresh_inputs(p: ConvProblem, rng):
    st = layouts.storage_dtype(p.dtype)
    dy = rng.standard_normal((p.N, p.Ho, p.Wo, p.K)).astype(np.float32).astype(st)
    w = rng.standard_normal((p.K, p.Y, p.X, p.cpg)).astype(np.float32).astype(st)
    return dy, w


def tolerance(dtype: str) -> float:
    return default_tolerance(dtype, implicit_gemm=False) if dtype != "fp32" else 1e-5


# ----------------------------------------------------------------------------- rules
def test_served_problem_has_no_reason():
    assert direct_reason(dw(), SM90) is None
    assert direct_reason(dw(), get_target("gfx942")) is None
    assert direct_reason(dw(), get_target("cpu")) is None


@pytest.mark.parametrize("problem, target, words", [
    (dw(spatial_dim=3, Di=4, Z=1), SM90, "3-D"),
    (dw(mode="trans"), SM90, "transposed"),
    (ConvProblem(N=1, C=16, Hi=8, Wi=8, K=16, Y=3, X=3, pH=1, pW=1, G=16, dtype="fp16"), SM90, "NHWC"),
    (dw(dtype="int8"), SM90, "data type int8"),
    (dw(C=64, K=64, G=1), SM90, "cpg=64"),
    (dw(C=16, K=16 * 9, G=16), SM90, "kpg=9"),
    (dw(X=17, Wi=40, pW=0), SM90, "filter width X=17"),
    (dw(Y=17, X=16, Hi=40, Wi=40, pH=0, pW=0), SM90, "272 taps"),
    (dw(sW=9, Wi=20), SM90, "9 W phases"),
    (dw(), get_target("sm_90").with_(vendor="xpu"), "vendor"),
])
def test_each_reason(problem, target, words):
    why = direct_reason(problem, target)
    assert why is not None and words in why, why


def test_w_phase_limit_counts_only_phases_that_exist():
    # stride 9 over a 5-wide image has only 5 W phases
    assert direct_reason(dw(sW=9, Wi=5, X=1, pW=0), SM90) is None


@pytest.mark.parametrize("changes, field", [
    (dict(warp_m=2), "warp_m"), (dict(warp_n=0), "warp_n"), (dict(vector_size_a=8), "vector_size_a"),
    (dict(vector_size_a=-1), "vector_size_a"),
    (dict(vector_size_b=1), "vector_size_b"), (dict(split_k=2), "split_k"), (dict(split_k=-1), "split_k"),
    (dict(tile_m=0), "tile_m"), (dict(tile_n=-4), "tile_n"), (dict(tile_k=0), "tile_k"),
    (dict(warp_tile_m=0), "warp_tile_m"), (dict(warp_tile_n=0), "warp_tile_n"),
    (dict(vector_size_c=-1), "vector_size_c"), (dict(lds_k_outer=-1), "lds_k_outer"),
    (dict(lds_k_outer=3), "lds_k_outer"), (dict(stages=3), "stages"), (dict(stages=0), "stages"),
    (dict(tile_m=6), "tile_m=6 must be a multiple of warp_tile_m"),
    (dict(tile_k=3), "tile_k=3 must be a multiple of warp_tile_n"),
    (dict(vector_size_c=3), "vector_size_c=3 must divide C"),
    (dict(tile_n=10), "tile_n=10 must be a multiple of vector_size_c"),
    (dict(tile_m=64, tile_k=64, warp_tile_m=1, warp_tile_n=1), "threads exceeds"),
    (dict(warp_tile_m=8, warp_tile_n=4, tile_m=8, tile_k=4), "accumulators per thread"),
])
def test_each_config_rule_names_its_field(changes, field):
    ok, why = is_valid_direct_config(dw(), SM90, cfg(**changes))
    assert not ok and field in why, why
    with pytest.raises(PerfConfigError):
        make_direct_spec(dw(), SM90, cfg(**changes))


def test_group_nesting_rules():
    p = dw(C=24, K=4, G=4)                        # cpg 6, kpg 1
    ok, why = is_valid_direct_config(p, SM90, cfg(vector_size_c=4, tile_n=8))
    assert not ok and "vector_size_c=4 must divide C" not in why and "cpg=6" in why, why
    ok, why = is_valid_direct_config(p, SM90, cfg(vector_size_c=2, tile_n=8))
    assert not ok and "tile_n=8 and cpg=6" in why, why
    assert is_valid_direct_config(p, SM90, cfg(vector_size_c=6, tile_n=12))[0]
    q = dw(C=8, K=40, G=8)                        # kpg 5: V*kpg <= 32
    ok, why = is_valid_direct_config(q, SM90, cfg(vector_size_c=8, tile_n=8))
    assert not ok and "weights per tap" in why, why


def test_window_shared_memory_and_grid_rules():
    p = dw(X=7, pW=3, Wi=40, dW=3, pH=1)         # W span 18: a wide register window
    ok, why = is_valid_direct_config(p, SM90, cfg(vector_size_c=8, tile_n=16, warp_tile_m=8, warp_tile_n=1,
                                                  tile_m=8, tile_k=4))
    assert not ok and "dY window" in why, why
    small = SM90.with_(lds_bytes=2048)
    ok, why = is_valid_direct_config(dw(), small, cfg(lds_k_outer=1))
    assert not ok and "shared memory" in why, why
    ok, why = is_valid_direct_config(dw(), SM90.with_(max_grid=(3, 65535, 65535)), cfg())
    assert not ok and "grid limit" in why, why


def test_not_applicable_problem_raises_config_error():
    with pytest.raises(PerfConfigError, match="does not apply"):
        make_direct_spec(dw(dtype="int8"), SM90, cfg())
    with pytest.raises(PerfConfigError, match="does not apply"):
        default_direct_config(dw(dtype="int8"), SM90)


def test_unused_slots_are_documented_fixed_values():
    assert dict(FIXED_SLOTS) == {"warp_m": 1, "warp_n": 1, "vector_size_b": 0, "split_k": 1}
    bodies = set()
    for c in direct_search_space(dw(), SM90):
        if c.vector_size_a in MMA_BODIES:          # the mma body: warp_m counts warps
            assert (c.warp_n, c.vector_size_b, c.split_k) == (1, 0, 1) and c.warp_m in (4, 8)
        else:
            assert all(getattr(c, k) == v for k, v in FIXED_SLOTS)
        bodies.add(c.vector_size_a)
    assert bodies == {0, 1, 2, 3}                  # tune and search() reach the lean and mma bodies
    assert {c.vector_size_a for c in direct_search_space(dw(dtype="fp32"), get_target("gfx942"))} == {0, 1}


def test_auto_vector_is_widest_valid_up_to_16_bytes():
    s = make_direct_spec(dw(C=48, K=48, G=48), SM90, cfg(vector_size_c=0, tile_n=16))
    assert s.vec == 8                              # fp16: 16 bytes
    s = make_direct_spec(dw(C=18, K=18, G=6), SM90, cfg(vector_size_c=0, tile_n=6))
    assert s.vec == 6                              # cpg 3: a multiple of cpg dividing C and tile_n
    s = make_direct_spec(dw(dtype="fp32"), SM90, cfg(vector_size_c=0, tile_n=16))
    assert s.vec == 4


def test_defaults_and_search_space_are_valid():
    for p in served_problems(7, 120, small=False):
        for t in (SM90, get_target("gfx942")):
            assert is_valid_direct_config(p, t, default_direct_config(p, t)) == (True, "")
        space = list(direct_search_space(p, SM90))
        assert 12 <= len(space) <= 200 and len(set(space)) == len(space)
        assert sum(is_valid_direct_config(p, SM90, c)[0] for c in space) >= 1


def test_default_rule_branches():
    assert default_policy(dw(C=3, K=3, G=3)) == "v8_p2x2_t256_l1_s1"
    assert default_policy(dw(C=32, K=32, G=32)) == "v8_p4x2_t256_l1_s1"
    assert default_policy(dw(sH=2, sW=2)) == "v8_p8x1_t128_l1_s1"
    assert default_policy(dw(Y=5, X=5, pH=2, pW=2)) == "v8_p8x1_t128_l1_s1"
    assert default_policy(dw(C=32, K=32, G=8)) == "v8_p8x1_t128_l1_s1"


def test_spec_fields_name_and_dict():
    s = make_direct_spec(dw(), SM90, cfg())
    assert isinstance(s, DirectSpec)
    assert (s.split_k, s.zero_fill, s.workspace_bytes, s.sub_gemms) == (1, "none", 0, ())
    assert s.kernel_name.startswith("dgrad_direct_sm_90_fp16_t8x16x4_p4x2_v4")
    assert s.kernel_name.endswith(dw().short_tag())
    names = {make_direct_spec(dw(), SM90, c).kernel_name
             for c in (cfg(), cfg(lds_k_outer=1), cfg(stages=2), cfg(vector_size_c=8), cfg(tile_m=16))}
    assert len(names) == 5
    d = json.loads(json.dumps(s.as_dict()))
    assert d["kernel_name"] == s.kernel_name and d["threads"] == s.block_threads == 16 // 4 * 2 * 2
    assert d["lds_bytes"] == s.lds_bytes and d["grid"] == list(s.grid)
    src = s.emit()
    assert src.name == s.kernel_name and src.grid == s.grid and src.block == (s.block_threads, 1, 1)
    assert src.shared_bytes == s.lds_bytes and not src.pre_memset and src.tensor_maps == ()
    assert ("DD_TPW", 4) in src.defines and ("DG_KPG", 1) in src.defines
    assert s.emit().sha256 == src.sha256


# ----------------------------------------------------------------------------- geometry
def coverage(s: DirectSpec) -> np.ndarray:
    """How many times each dX element is written, from the documented mapping alone:
    block b -> (channel block, phase, tile along W, tile along H, image), channel block
    fastest; thread t -> (chunk, thread column, thread row), chunk fastest; each thread
    writes TPH x TPW pixels of its phase x V channels where they fall inside dX."""
    p = s.problem
    count = np.zeros((p.N, p.Hi, p.Wi, p.C), dtype=np.int32)
    tpw, tph, v = s.config.warp_tile_m, s.config.warp_tile_n, s.vec
    tqw, tqh, tn = s.config.tile_m, s.config.tile_k, s.config.tile_n
    ct, twt = tn // v, tqw // tpw
    nph_h, nph_w = min(p.sH, p.Hi), min(p.sW, p.Wi)
    tiles_w = -(-(-(-p.Wi // p.sW)) // tqw)
    tiles_h = -(-(-(-p.Hi // p.sH)) // tqh)
    cb_count = -(-p.C // tn)
    assert s.grid == (p.N * tiles_h * tiles_w * nph_h * nph_w * cb_count, 1, 1)
    b = np.arange(s.grid[0])[:, None, None, None, None]
    t = np.arange(s.block_threads)[None, :, None, None, None]
    j = np.arange(tph)[None, None, :, None, None]
    q = np.arange(tpw)[None, None, None, :, None]
    i = np.arange(v)[None, None, None, None, :]
    cb, r = b % cb_count, b // cb_count
    ph, r = r % (nph_h * nph_w), r // (nph_h * nph_w)
    tw, r = r % tiles_w, r // tiles_w
    th, n = r % tiles_h, r // tiles_h
    rh, rw = ph // nph_w, ph % nph_w
    chunk, tcol, trow = t % ct, (t // ct) % twt, t // (ct * twt)
    hi = rh + p.sH * (th * tqh + trow * tph + j)
    wi = rw + p.sW * (tw * tqw + tcol * tpw + q)
    ch = cb * tn + chunk * v + i
    shape = np.broadcast_shapes(hi.shape, wi.shape, ch.shape, n.shape)
    n, hi, wi, ch = (np.broadcast_to(a, shape).ravel() for a in (n, hi, wi, ch))
    keep = (hi < p.Hi) & (wi < p.Wi) & (ch < p.C)
    np.add.at(count, (n[keep], hi[keep], wi[keep], ch[keep]), 1)
    return count


def test_grid_covers_every_dx_element_exactly_once():
    R = random.Random(11)
    checked = 0
    for p in served_problems(11, 200, small=False):
        if checked == 60:
            break
        space = [c for c in direct_search_space(p, SM90) if is_valid_direct_config(p, SM90, c)[0]]
        c = R.choice(space)
        s = make_direct_spec(p, SM90, c)
        if s.grid[0] * s.block_threads * c.warp_tile_m * c.warp_tile_n * s.vec > 4_000_000:
            continue
        cov = coverage(s)
        assert cov.min() == 1 and cov.max() == 1, (p.short_tag(), c.serialize())
        checked += 1


# ----------------------------------------------------------------------------- offline builds
BUILD_CASES = [
    (dw(N=32, C=144, Hi=56, Wi=56, K=144, G=144), None),
    (dw(N=8, C=96, Hi=28, Wi=28, K=96, G=96, Y=7, X=7, pH=3, pW=3), None),
    (dw(N=8, C=128, Hi=28, Wi=28, K=128, G=32, sH=2, sW=2), None),
    (dw(N=4, C=3, Hi=30, Wi=31, K=6, Y=4, X=4, pH=1, pW=2, sH=3, sW=3, G=3), "stage"),
]


@pytest.mark.skipif(not offline.shutil.which("nvcc"), reason="nvcc not on PATH")
@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32"])
@pytest.mark.parametrize("case", range(len(BUILD_CASES)))
def test_nvcc_builds_emitted_source(dtype, case, tmp_path):
    p, extra = BUILD_CASES[case]
    p = p.replace(dtype=dtype)
    c = default_direct_config(p, SM90)
    if extra == "stage":
        c = c.replace(lds_k_outer=1, stages=1)
    elif dtype == "bf16":
        c = c.replace(stages=2)
    b = offline.inspect_nvidia(make_direct_spec(p, SM90, c).emit().text, "sm_90", tmp_path, "k")
    assert 0 < b.registers <= 255
    assert b.count("ld.global.nc") > 0


@pytest.mark.skipif(offline.find_amd_clang() is None, reason="no clang with AMDGPU targets")
@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32"])
def test_clang_builds_emitted_source_for_gfx942(dtype, tmp_path):
    t = get_target("gfx942")
    for p, _ in BUILD_CASES[:2]:
        p = p.replace(dtype=dtype)
        co = offline.compile_amd(make_direct_spec(p, t, default_direct_config(p, t)).emit().text, "gfx942", tmp_path)
        assert co.data


# ----------------------------------------------------------------------------- numerics
def test_cpu_engine_matches_float64_reference():
    rng = np.random.default_rng()
    for p in served_problems(3, 80, target=get_target("cpu")):
        s = make_direct_spec(p, get_target("cpu"), default_direct_config(p, get_target("cpu")))
        dy, w = fresh_inputs(p, rng)
        out = run_direct_cpu(s, dy, w)
        assert out.dtype == layouts.storage_dtype(p.dtype) and out.shape == (p.N, p.Hi, p.Wi, p.C)
        assert np.isfinite(out.astype(np.float32)).all()
        err = rms_range(dgrad_reference(p, dy, w), out)
        assert err < tolerance(p.dtype), (p.short_tag(), p.dtype, err)


def test_cpu_engine_zero_where_no_tap_reaches():
    p = dw(Y=1, X=1, pH=0, pW=0, sH=2, sW=2, Hi=7, Wi=6)     # 1x1 stride 2: odd pixels get no tap
    s = make_direct_spec(p, SM90, default_direct_config(p, SM90))
    dy, w = fresh_inputs(p, np.random.default_rng())
    out = run_direct_cpu(s, dy, w).astype(np.float32)
    assert (out[:, 1::2] == 0).all() and (out[:, :, 1::2] == 0).all()
    assert np.abs(out[:, ::2, ::2]).sum() > 0


EMU_CASES = [
    (dw(C=16, K=16, G=16, Hi=9, Wi=11), dict()),
    (dw(C=24, K=24, G=24, Hi=11, Wi=10, Y=5, X=5, pH=2, pW=2, sH=2, sW=2, dtype="bf16"), dict(stages=2)),
    (dw(C=16, K=32, G=4, Hi=13, Wi=12), dict(lds_k_outer=1)),
    (dw(C=3, K=6, G=3, Hi=10, Wi=11, Y=4, X=4, pH=1, pW=2, sH=3, sW=3, dtype="fp32"), dict()),
    (dw(C=8, K=8, G=8, Hi=12, Wi=9, Y=3, X=2, pH=2, pW=1, dH=2, dW=3, dtype="fp32"), dict(stages=2)),
    (dw(C=18, K=36, G=6, Hi=8, Wi=9, Y=2, X=3, pH=0, pW=2, sH=1, sW=2, dtype="bf16"), dict(lds_k_outer=1)),
]


@pytest.mark.skipif(not kernel_emu.available(), reason="clang++ not on PATH")
@pytest.mark.parametrize("vendor", ["amd", "nvidia"])
@pytest.mark.parametrize("case", range(len(EMU_CASES)))
def test_emulated_kernel_matches_float64_reference(case, vendor, tmp_path):
    """The kernel text of both vendor flavours (NVIDIA: its PTX conversions and read-only
    loads emulated) against the float64 reference and the CPU engine."""
    p, changes = EMU_CASES[case]
    c = default_direct_config(p, SM90).replace(**changes)
    s = make_direct_spec(p, SM90, c)
    dy, w = fresh_inputs(p, np.random.default_rng())
    out = kernel_emu.run_direct(s, dy, w, tmp_path, vendor=vendor)
    assert np.isfinite(out.astype(np.float32)).all(), "a dX element was not written"
    ref = dgrad_reference(p, dy, w)
    assert rms_range(ref, out) < tolerance(p.dtype)
    cpu = run_direct_cpu(s, dy, w)
    assert rms_range(ref, cpu) < tolerance(p.dtype)


def test_policies_are_valid_for_bench_layers():
    for p in (dw(N=64, C=144, Hi=56, Wi=56, K=144, G=144), dw(N=4, C=3, Hi=224, Wi=224, K=3, G=3),
              dw(N=8, C=128, Hi=56, Wi=56, K=128, G=32)):
        for name, pol in POLICIES.items():
            c = policy_config(p, SM90, pol)
            assert is_valid_direct_config(p, SM90, c) == (True, ""), name
            s = make_direct_spec(p, SM90, c)
            assert s.config.warp_tile_n * s.config.warp_tile_m * s.vec <= MAX_ACC


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 40), st.integers(1, 60), st.integers(1, 6), st.integers(1, 9), st.integers(1, 80))
def test_tap_phases_equal_the_phases_with_taps(pad, stride, dil, filt, size):
    """The direct geometry visits only phases with a tap (O(filt), not O(stride)); the set
    equals brute-force enumeration of every phase."""
    from miopen_solver.direct import axis_taps, tap_phases
    want = [r for r in range(min(stride, size)) if axis_taps(r, pad, stride, dil, filt)]
    assert tap_phases(pad, stride, dil, filt, size) == want


# ----------------------------------------------------------------------------- the lean body
def test_lean_body_is_a_section_of_the_same_source():
    """vector_size_a=1 keeps the kernel's ``lean`` sections (and drops the ``!lean`` ones);
    the original body's text is the source with every lean section removed, and the kernel
    names differ."""
    p = dw(Y=7, X=7, pH=3, pW=3)
    c = default_direct_config(p, SM90).replace(vector_size_a=0)   # the default is the lean body now
    orig, lean = make_direct_spec(p, SM90, c), make_direct_spec(p, SM90, c.replace(vector_size_a=1))
    assert not orig.lean and lean.lean and lean.kernel_name == orig.kernel_name.replace(
        f"_{p.short_tag()}", f"_lean_{p.short_tag()}")
    assert "dd_load_or_zero" in lean.emit().text and "dd_load_or_zero" not in orig.emit().text
    assert "#section" not in lean.emit().text and "#section" not in orig.emit().text
    assert lean.as_dict()["body"] == "lean" and orig.as_dict()["body"] == "original"
    assert Solution.from_record(solution_of(lean).to_record()).spec == lean      # a worker's round trip


def lean_problems(seed: int, count: int):
    """Random problems for the lean body: strides 1-3, dilations 1-2, odd channel counts,
    cpg/kpg up to 3, filters up to 7x7 (5x5 and 7x7 often), with a random valid lean config
    (its tile from the search space, so threads that are and are not a multiple of
    tile_n*kpg both occur)."""
    R = random.Random(seed)
    out = []
    while len(out) < count:
        cpg, kpg = R.choice([1, 1, 1, 3]), R.choice([1, 1, 2, 3])
        G = R.choice([1, 3, 5, 7, 12, 20, 36])
        Y = R.choice([5, 7, 3, 2])
        X = R.choice([5, 7, 3, 1])
        d = R.choice([1, 1, 2])
        try:
            p = ConvProblem(N=R.randint(1, 2), C=cpg * G, Hi=R.randint(3, 16), Wi=R.randint(3, 16), K=kpg * G,
                            Y=Y, X=X, pH=R.randint(0, Y // 2 * d), pW=R.randint(0, X // 2 * d),
                            sH=R.randint(1, 3), sW=R.randint(1, 3), dH=d, dW=R.choice([1, d]), G=G,
                            dtype=R.choice(["fp16", "bf16", "fp32"]), **NHWC)
        except ValueError:
            continue
        if direct_reason(p, SM90) is not None:
            continue
        space = [c for c in direct_search_space(p, SM90) if c.vector_size_a == 1]
        space = [c for c in space if is_valid_direct_config(p, SM90, c)[0]]
        if space:
            out.append((p, R.choice(space)))
    return out


def _emulated_matches_reference(s, seed, vendor, tmp_path):
    """Run the direct spec ``s`` on the kernel emulator with fresh inputs into a NaN-poisoned
    dX: every element written, within MIOpen's tolerance of the float64 reference."""
    p, c = s.problem, s.config
    dy, w = fresh_inputs(p, np.random.default_rng(seed))
    out = kernel_emu.run_direct(s, dy, w, tmp_path, vendor=vendor)
    assert np.isfinite(out.astype(np.float32)).all(), ("a dX element was not written", p.short_tag(), c.serialize())
    assert rms_range(dgrad_reference(p, dy, w), out) < tolerance(p.dtype), (p.short_tag(), p.dtype, c.serialize())


LEAN_FIXED = [   # a padded last channel block (lanes past C), 7x7 s1, 5x5 s2, kpg 2 with dilation
    (dw(C=20, K=20, G=20, Hi=11, Wi=13, Y=7, X=7, pH=3, pW=3), "16,16,4,1,1,8,2,1,0,4,1,0,1,4"),
    (dw(C=12, K=12, G=12, Hi=13, Wi=12, Y=5, X=5, pH=2, pW=2, sH=2, sW=2, dtype="bf16"),
     "16,8,4,1,1,8,2,1,0,4,1,0,1,4"),
    (dw(C=6, K=12, G=6, Hi=10, Wi=9, Y=5, X=5, pH=4, pW=3, dH=2, dW=2, dtype="fp32"),
     "8,6,4,1,1,4,2,1,0,2,1,1,1,4"),
]


@pytest.mark.skipif(not kernel_emu.available(), reason="clang++ not on PATH")
@pytest.mark.parametrize("vendor", ["amd", "nvidia"])
@pytest.mark.parametrize("case", range(8 + len(LEAN_FIXED)))
def test_emulated_lean_body_matches_float64_reference(case, vendor, tmp_path):
    """The lean body over fixed and random problems, both vendor flavours, dX NaN-poisoned
    (every element must be written), against the float64 reference."""
    if case < len(LEAN_FIXED):
        p, c = LEAN_FIXED[case][0], PerfConfig.parse(LEAN_FIXED[case][1])
    else:
        p, c = lean_problems(case + 100 * (vendor == "nvidia"), 1)[0]
    s = make_direct_spec(p, SM90, c)
    assert s.lean
    _emulated_matches_reference(s, case, vendor, tmp_path)


LEAN_LAYERS = [   # the H200 table's large-filter layers, with the lean 8x2 tile
    (dict(N=64, C=96, Hi=56, Wi=56, K=96, G=96, Y=7, X=7, pH=3, pW=3), "16,32,16,1,1,8,2,1,0,4,1,0,1,4"),
    (dict(N=64, C=240, Hi=28, Wi=28, K=240, G=240, Y=5, X=5, pH=2, pW=2), "16,32,16,1,1,8,2,1,0,4,1,0,1,4"),
    (dict(N=64, C=144, Hi=56, Wi=56, K=144, G=144, Y=5, X=5, pH=2, pW=2, sH=2, sW=2),
     "16,32,16,1,1,8,2,1,0,4,1,0,1,4"),
]


@pytest.mark.skipif(offline.find_amd_clang() is None, reason="no clang with AMDGPU targets")
@pytest.mark.parametrize("arch", ["gfx90a", "gfx942"])
@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32"])
def test_clang_builds_lean_body_without_scratch(arch, dtype, tmp_path):
    t = get_target(arch)
    for kw, text in LEAN_LAYERS:
        p = dw(**kw).replace(dtype=dtype)
        c = PerfConfig.parse(text)
        if dtype == "fp32":
            c = c.replace(vector_size_c=0)
        co = offline.compile_amd(make_direct_spec(p, t, c).emit().text, arch, tmp_path)
        assert co.data and co.resources.get("ScratchSize [bytes/lane]", 0) == 0, co.resources


# ----------------------------------------------------------------------------- dY staged as fp32
def test_stage32_is_a_section_of_the_same_source():
    """lds_k_outer=2 keeps the kernel's ``stage32`` sections (dY staged as fp32) and drops the
    ``!stage32`` ones; the name says ``lds32``; prefetch is refused, and a window that does
    not fit shared memory is refused naming the fp32 staging."""
    p = dw(Y=7, X=7, pH=3, pW=3)
    c = default_direct_config(p, SM90).replace(lds_k_outer=1)
    raw, f32 = make_direct_spec(p, SM90, c), make_direct_spec(p, SM90, c.replace(lds_k_outer=2))
    assert raw.stage and not raw.stage32 and f32.stage and f32.stage32 and f32.lyg > 0
    assert f32.kernel_name == raw.kernel_name.replace("_lds_", "_lds32_")
    assert "dd_sts_f" in f32.emit().text and "dd_sts_f" not in raw.emit().text
    assert "#section" not in f32.emit().text and ("DD_LYG", f32.lyg) in f32.defines()
    assert f32.lds_bytes - f32.ws_bytes == 2 * (raw.lds_bytes - raw.ws_bytes)        # fp16 -> fp32
    assert f32.as_dict()["dy_path"] == "lds32" and Solution.from_record(solution_of(f32).to_record()).spec == f32
    ok, why = is_valid_direct_config(p, SM90, c.replace(lds_k_outer=2, stages=2))
    assert not ok and "stages=1" in why
    big = dw(N=1, C=256, K=256, G=256, Hi=64, Wi=64, Y=7, X=7, pH=3, pW=3)
    ok, why = is_valid_direct_config(big, SM90, cfg(tile_m=64, tile_n=64, tile_k=16, warp_tile_m=8,
                                                    warp_tile_n=2, vector_size_c=4, lds_k_outer=2))
    assert not ok and "in fp32" in why and "shared memory" in why
    names = [n for n in POLICIES if "lds32" in n]
    assert names and all(policy_config(p, SM90, POLICIES[n]).lds_k_outer == 2 for n in names)
    # measured slower than the lean body everywhere (bench/RESULTS.md): not searched
    assert not any(c.lds_k_outer == 2 for c in direct_search_space(p, SM90))


def stage32_problems(seed: int, count: int):
    """Random problems as :func:`lean_problems`, with a random valid stage32 config: a
    staged config of the search space with lds_k_outer=2 (lean or original body)."""
    R = random.Random(seed)
    out = []
    for p, _ in lean_problems(seed, 4 * count):
        space = [c.replace(lds_k_outer=2) for c in direct_search_space(p, SM90) if c.lds_k_outer == 1]
        space = [c for c in space if is_valid_direct_config(p, SM90, c)[0]]
        if space:
            c = R.choice(space)
            out.append((p, c.replace(vector_size_a=R.choice([0, 1])) if R.random() < 0.3 else c))
        if len(out) == count:
            break
    return out


STAGE32_FIXED = [   # a padded last channel block, 7x7 s1 8x2, 5x5 s2, kpg 2 with dilation, cpg 3, fp32
    (dw(C=20, K=20, G=20, Hi=11, Wi=13, Y=7, X=7, pH=3, pW=3), "16,16,4,1,1,8,2,1,0,4,1,2,1,4"),
    (dw(C=24, K=24, G=24, Hi=13, Wi=17, Y=7, X=7, pH=3, pW=3), "16,8,8,1,1,8,2,1,0,4,1,2,1,4"),
    (dw(C=12, K=12, G=12, Hi=13, Wi=12, Y=5, X=5, pH=2, pW=2, sH=2, sW=2, dtype="bf16"),
     "16,8,4,1,1,8,2,1,0,4,1,2,1,4"),
    (dw(C=6, K=12, G=6, Hi=10, Wi=9, Y=5, X=5, pH=4, pW=3, dH=2, dW=2, dtype="fp32"),
     "8,6,4,1,1,4,2,1,0,2,1,2,1,4"),
    (dw(C=9, K=9, G=3, Hi=9, Wi=11, Y=5, X=5, pH=2, pW=2, dtype="fp16"), "8,9,4,1,1,4,1,0,0,9,1,2,1,4"),
    (dw(C=40, K=40, G=40, Hi=14, Wi=14, Y=5, X=5, pH=2, pW=2, dtype="fp32"), "8,8,8,1,1,8,1,1,0,4,1,2,1,4"),
]


@pytest.mark.skipif(not kernel_emu.available(), reason="clang++ not on PATH")
@pytest.mark.parametrize("vendor", ["amd", "nvidia"])
@pytest.mark.parametrize("case", range(8 + len(STAGE32_FIXED)))
def test_emulated_stage32_matches_float64_reference(case, vendor, tmp_path):
    """dY staged as fp32 (stage32) over fixed and random problems (strides, dilation, odd
    channels, cpg/kpg > 1, 5x5/7x7, three types), both vendor flavours, dX NaN-poisoned
    (every element must be written), against the float64 reference."""
    if case < len(STAGE32_FIXED):
        p, c = STAGE32_FIXED[case][0], PerfConfig.parse(STAGE32_FIXED[case][1])
    else:
        p, c = stage32_problems(case + 100 * (vendor == "nvidia"), 1)[0]
    s = make_direct_spec(p, SM90, c)
    assert s.stage32
    _emulated_matches_reference(s, case, vendor, tmp_path)


STAGE32_LAYERS = [   # the H200 table's large-filter layers, dY staged as fp32 (8x2 and 8x1 tiles)
    (dict(N=64, C=96, Hi=56, Wi=56, K=96, G=96, Y=7, X=7, pH=3, pW=3), "16,32,16,1,1,8,2,1,0,4,1,2,1,4"),
    (dict(N=64, C=96, Hi=56, Wi=56, K=96, G=96, Y=7, X=7, pH=3, pW=3), "16,32,8,1,1,8,1,1,0,4,1,2,1,4"),
    (dict(N=64, C=240, Hi=28, Wi=28, K=240, G=240, Y=5, X=5, pH=2, pW=2), "16,32,16,1,1,8,2,1,0,4,1,2,1,4"),
    (dict(N=64, C=144, Hi=56, Wi=56, K=144, G=144, Y=5, X=5, pH=2, pW=2, sH=2, sW=2),
     "16,32,16,1,1,8,2,1,0,4,1,2,1,4"),
]


@pytest.mark.skipif(not offline.shutil.which("nvcc"), reason="nvcc not on PATH")
@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32"])
@pytest.mark.parametrize("case", range(len(LEAN_LAYERS) + len(STAGE32_LAYERS)))
def test_nvcc_builds_lean_and_stage32_bodies_without_spills(dtype, case, tmp_path):
    kw, text = (LEAN_LAYERS + STAGE32_LAYERS)[case]
    p = dw(**kw).replace(dtype=dtype)
    c = PerfConfig.parse(text)
    if dtype == "fp32":
        c = c.replace(vector_size_c=0)
    b = offline.inspect_nvidia(make_direct_spec(p, SM90, c).emit().text, "sm_90", tmp_path, "k")
    assert 0 < b.registers <= 255 and b.spill_store_bytes == 0 and b.spill_load_bytes == 0 and b.stack_bytes == 0


@pytest.mark.skipif(offline.find_amd_clang() is None, reason="no clang with AMDGPU targets")
@pytest.mark.parametrize("arch", ["gfx90a", "gfx942"])
@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32"])
def test_clang_builds_stage32_without_scratch(arch, dtype, tmp_path):
    """The layers whose fp32 window fits the 64 KiB LDS (the 16x16-pixel 7x7 window does not:
    refused, naming the fp32 staging) build without scratch."""
    t = get_target(arch)
    built = 0
    for kw, text in STAGE32_LAYERS:
        p = dw(**kw).replace(dtype=dtype)
        c = PerfConfig.parse(text)
        if dtype == "fp32":
            c = c.replace(vector_size_c=0)
        ok, why = is_valid_direct_config(p, t, c)
        if not ok:
            assert "in fp32" in why and "shared memory" in why, why
            continue
        co = offline.compile_amd(make_direct_spec(p, t, c).emit().text, arch, tmp_path)
        assert co.data and co.resources.get("ScratchSize [bytes/lane]", 0) == 0, co.resources
        built += 1
    assert built >= 2
