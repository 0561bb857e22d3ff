"""Vector widths are caps: bounded by kpg (A) / cpg (B, C), 16 bytes, and an even spread of
the tile over the block's threads (research dgrad_kernels.md section 3.4)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from miopen_solver import vectors
from miopen_solver.problem import ConvProblem
from miopen_solver.spec import PerfConfig, make_spec
from miopen_solver.target import get_target


def _largest_pow2_dividing(n, limit):
    """Reference by enumeration: the largest of 1, 2, 4, ... <= limit that divides n."""
    return max(v for v in (1, 2, 4, 8, 16, 32, 64, 128) if v <= limit and n % v == 0)


@pytest.mark.parametrize("n,limit,want", [(12, 8, 4), (7, 8, 1), (64, 8, 8), (6, 4, 2), (16, 2, 2),
                                          (419, 8, 1), (194, 8, 2), (1, 8, 1), (96, 16, 16)])
def test_pow2_divisor_table(n, limit, want):
    assert vectors.pow2_divisor(n, limit) == want


@given(st.integers(1, 10_000), st.sampled_from([1, 2, 4, 8, 16]))
def test_pow2_divisor_matches_enumeration(n, limit):
    assert vectors.pow2_divisor(n, limit) == _largest_pow2_dividing(n, limit)


def test_max_vector_is_16_bytes():
    assert vectors.max_vector(2) == 8 and vectors.max_vector(4) == 4 and vectors.max_vector(1) == 16


@pytest.mark.parametrize("cap,channels,eb,want", [
    (None, 64, 2, 8), (0, 64, 2, 8), (4, 64, 2, 4), (64, 64, 2, 8),   # oversized cap -> 16 bytes
    (1024, 64, 4, 4), (0, 6, 4, 2), (0, 419, 2, 1), (2, 128, 4, 2)])
def test_choose(cap, channels, eb, want):
    assert vectors.choose(cap, channels, eb) == want


@pytest.mark.parametrize("cap,run,other,threads,want", [
    (8, 32, 128, 256, 8),    # 32*128/8 = 512 = 2*256
    (8, 32, 16, 256, 2),     # v=8: 64, v=4: 128 (< 256); v=2: 256
    (8, 16, 8, 256, 0),      # 128 elements cannot cover 256 threads
    (8, 12, 64, 64, 4),      # 12 % 8 != 0; v=4: 192 = 3*64
    (4, 24, 24, 96, 2),      # v=4: 144 % 96 != 0; v=2: 288 = 3*96
])
def test_clamp_to_tile_table(cap, run, other, threads, want):
    assert vectors.clamp_to_tile(cap, run, other, threads) == want


def _spreads(v, run, other, threads):
    return run % v == 0 and run * other // v >= threads and (run * other // v) % threads == 0


@given(st.sampled_from([1, 2, 4, 8, 16]), st.sampled_from([8, 12, 16, 24, 32, 48, 64, 128]),
       st.sampled_from([8, 16, 32, 64, 128, 256]), st.sampled_from([32, 64, 128, 256, 512]))
def test_clamp_to_tile_is_the_widest_even_spread(cap, run, other, threads):
    v = vectors.clamp_to_tile(cap, run, other, threads)
    widths = [w for w in (1, 2, 4, 8, 16) if w <= cap and _spreads(w, run, other, threads)]
    assert v == (max(widths) if widths else 0)


# ---------------------------------------------------------------- through the spec
def _nhwc(**kw):
    base = dict(N=2, C=64, Hi=8, Wi=8, K=64, Y=3, X=3, pH=1, pW=1, dtype="fp16",
                in_layout="NHWC", out_layout="NHWC", fil_layout="NHWC")
    base.update(kw)
    return ConvProblem(**base)


CFG = PerfConfig(64, 64, 32, 2, 2, 32, 32, 0, 0, 0, 1, -1, 2)


@pytest.mark.parametrize("C,K,G,va,vb", [(64, 64, 1, 8, 8), (48, 40, 1, 8, 8), (12, 20, 1, 4, 4),
                                         (6, 10, 1, 2, 2), (21, 35, 1, 1, 1), (64, 48, 4, 4, 8),
                                         (24, 24, 3, 8, 8), (24, 48, 8, 2, 1)])
def test_spec_widths_follow_kpg_and_cpg(C, K, G, va, vb):
    # A along k: pow2 dividing kpg = K/G; B along c: pow2 dividing cpg = C/G; <= 8 fp16 elements.
    spec = make_spec(_nhwc(C=C, K=K, G=G), get_target("sm_90"), CFG)
    assert (spec.vec_a, spec.vec_b) == (va, vb)
    assert spec.vec_c == vb      # C along c: the same bound; the 64x64 C tile spreads at 8


def test_fp32_widths_cap_at_16_bytes():
    spec = make_spec(_nhwc(dtype="fp32"), get_target("gfx942"), PerfConfig(64, 64, 16, 2, 2, 32, 32, 0, 0, 0, 1, -1, 2))
    assert spec.vec_a == 4 and spec.vec_b == 4


def test_caps_below_the_problem_width_are_honoured():
    spec = make_spec(_nhwc(), get_target("sm_90"), CFG.replace(vector_size_a=2, vector_size_b=4, vector_size_c=1))
    assert (spec.vec_a, spec.vec_b, spec.vec_c) == (2, 4, 1)


@pytest.mark.parametrize("arch", ["sm_90", "gfx942", "gfx950"])
def test_oversized_caps_clamp_and_build(arch):
    spec = make_spec(_nhwc(), get_target(arch), CFG.replace(vector_size_a=1024, vector_size_b=64, vector_size_c=32))
    assert spec.vec_a == 8 and spec.vec_b == 8 and spec.vec_c <= 8
    emit = pytest.importorskip("miopen_solver.kernels", reason="kernels package not importable").emit
    src = emit(spec)
    assert src.text and spec.kernel_name in src.text


def test_tile_spread_clamps_vectors():
    # A tile 16x16 fp16 on 128 threads (4 warps x 32): 256 elements -> at most 2 per thread.
    cfg = PerfConfig(16, 64, 16, 1, 4, 16, 16, 0, 0, 0, 1, -1, 2)
    spec = make_spec(_nhwc(), get_target("sm_90"), cfg)
    assert spec.threads == 128
    assert spec.vec_a == 2          # 16*16/2 = 128 = threads
    assert spec.vec_b == 8          # 64*16/8 = 128


@pytest.mark.parametrize("cap", [0, 2, 8, 64])
def test_both_b_layouts_clamp_alike(cap):
    t = get_target("sm_90")
    for cfg in (CFG, PerfConfig(32, 16, 16, 1, 1, 32, 16, 0, 0, 0, 1, -1, 2)):
        k_outer = make_spec(_nhwc(C=24), t, cfg.replace(vector_size_b=cap, lds_k_outer=1))
        m_outer = make_spec(_nhwc(C=24), t, cfg.replace(vector_size_b=cap, lds_k_outer=0))
        assert k_outer.lds_k_outer and not m_outer.lds_k_outer
        assert k_outer.vec_b == m_outer.vec_b


@settings(max_examples=60, deadline=None)
@given(C=st.integers(1, 96), K=st.integers(1, 96), dtype=st.sampled_from(["fp16", "bf16", "fp32"]),
       cap_a=st.sampled_from([0, 1, 2, 4, 8, 16, 64]), cap_b=st.sampled_from([0, 1, 2, 4, 8, 16, 64]),
       arch=st.sampled_from(["sm_90", "gfx942", "gfx950"]))
def test_widths_never_exceed_their_bounds(C, K, dtype, cap_a, cap_b, arch):
    eb = 4 if dtype == "fp32" else 2
    tk = 16 if dtype == "fp32" else 32
    cfg = PerfConfig(64, 32, tk, 2, 1, 32, 32, cap_a, cap_b, 0, 1, -1, 2)
    spec = make_spec(_nhwc(C=C, K=K, dtype=dtype), get_target(arch), cfg)
    limit = 16 // eb

    def widest(cap, channels, run, other):
        ok = [w for w in (1, 2, 4, 8, 16) if w <= min(limit, cap or limit) and channels % w == 0
              and _spreads(w, run, other, spec.threads)]
        return max(ok)

    assert spec.vec_a == widest(cap_a, K, tk, 64)      # A tile: 64 rows x tk along k
    assert spec.vec_b == widest(cap_b, C, 32, tk)      # B tile: tk rows x 32 along c
    assert spec.vec_c == widest(0, C, 32, 64)          # C tile: 64 rows x 32 along c
