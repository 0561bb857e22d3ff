"""MIOpenDriver-compatible inputs: the LCG, jump-ahead, seed, value ranges and fill order.

The oracle is a scalar loop over ``x = (1103515245*x + 12345) mod 2^31`` with each C++ step
rounded by numpy scalars -- independent of the vectorised doubling in prng.py."""

from __future__ import annotations


import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from miopen_solver import layouts, prng
from miopen_solver.problem import ConvProblem


def scalar_stream(seed, n):
    x = seed % 2**31
    out = []
    for _ in range(n):
        x = (1103515245 * x + 12345) % 2**31
        out.append(x)
    return out


def canon(x):
    return np.float32(np.float32(x) * np.float32(2.0 ** -31))


def gen_0_to_b(x, b, T):
    """T(canonical * float(T(b)))"""
    return T(np.float32(canon(x) * np.float32(T(b))))


def gen_a_to_b(x, a, b, T):
    """gen_0_to_B(T(b) - T(a)) + T(a), each step in T"""
    width = T(np.float32(T(b)) - np.float32(T(a)))
    return T(np.float32(gen_0_to_b(x, np.float32(width), T)) + np.float32(T(a)))


TYPES = {"fp32": np.float32, "fp16": np.float16, "bf16": ml_dtypes.bfloat16}


def expected_inputs(problem, seed, bias=False):
    T = TYPES[problem.dtype]
    skip = 2 * problem.K if bias else 0
    n = problem.dy_elems + skip + problem.dx_elems + problem.w_elems
    xs = scalar_stream(seed, n)
    dy = [gen_0_to_b(x, 0.01, T) for x in xs[:problem.dy_elems]]
    lo = -1.0 / 3.0 if problem.dtype == "fp16" else -0.5
    w0 = problem.dy_elems + skip + problem.dx_elems
    w = [T(np.float32(T(0.01)) * np.float32(gen_a_to_b(x, lo, 0.5, T))) for x in xs[w0:]]
    return np.array(dy, dtype=T), np.array(w, dtype=T)


def test_raw_matches_scalar_loop():
    assert prng.Lcg(12345678).raw(1000).tolist() == scalar_stream(12345678, 1000)
    assert prng.Lcg(12345678).raw(1)[0] == (1103515245 * 12345678 + 12345) % 2**31


@given(st.integers(0, 2**32 - 1), st.lists(st.integers(0, 300), min_size=1, max_size=5))
def test_raw_in_pieces_continues_the_stream(seed, sizes):
    g = prng.Lcg(seed)
    got = np.concatenate([g.raw(n) for n in sizes]).tolist()
    assert got == scalar_stream(seed, sum(sizes))


@given(st.integers(0, 2**32 - 1), st.integers(0, 5000), st.integers(1, 50))
def test_skip_equals_drawing(seed, skip, take):
    g = prng.Lcg(seed)
    g.skip(skip)
    assert g.raw(take).tolist() == scalar_stream(seed, skip + take)[skip:]


def test_jump_matches_stepping():
    a, c = prng.jump(10)
    x = 987654
    assert (a * x + c) % 2**31 == scalar_stream(x, 10)[-1]
    assert prng.jump(0) == (1, 0)


def test_seed_is_taken_mod_2_31():
    assert prng.Lcg(2**31 + 5).raw(3).tolist() == prng.Lcg(5).raw(3).tolist()


def test_canonical_is_fp32_scaled():
    g = prng.Lcg(42)
    c = g.canonical(100)
    assert c.dtype == np.float32
    assert c.tolist() == [float(canon(x)) for x in scalar_stream(42, 100)]
    assert (c >= 0).all() and (c <= 1).all()


def test_big_tensor_takes_log_n_vector_steps(monkeypatch):
    """Work in Python steps is O(log n) (doubling), counted rather than timed."""
    steps = []
    compose = prng._compose
    monkeypatch.setattr(prng, "_compose", lambda *a: steps.append(a) or compose(*a))
    x = prng.Lcg(1).raw(5_000_000)
    assert len(steps) == (5_000_000 - 1).bit_length()           # 23 doublings: 1 -> 2^23 >= 5e6
    assert x[-1] == (prng.jump(5_000_000)[0] * 1 + prng.jump(5_000_000)[1]) % 2**31


def test_resolve_seed(monkeypatch):
    monkeypatch.delenv(prng.SEED_ENV, raising=False)
    assert prng.resolve_seed() == 12345678
    assert prng.resolve_seed({prng.SEED_ENV: "42"}) == 42
    assert prng.resolve_seed({prng.SEED_ENV: ""}) == 12345678
    assert prng.resolve_seed({prng.SEED_ENV: str(2**32 - 1)}) == 2**32 - 1
    for too_big in (2**32, 2**32 + 7, 2**64):   # 32-bit seeds: out of range is an error, not a wrap to 0/7
        with pytest.raises(ValueError, match="out of range"):
            prng.resolve_seed({prng.SEED_ENV: str(too_big)})
    seeds = {prng.resolve_seed({prng.SEED_ENV: "0"}) for _ in range(4)}
    assert all(0 < s < 2**32 for s in seeds) and len(seeds) > 1      # 0 = a random seed
    for bad in ("abc", "-3", "1.5"):
        with pytest.raises(ValueError, match=prng.SEED_ENV):
            prng.resolve_seed({prng.SEED_ENV: bad})
    monkeypatch.setenv(prng.SEED_ENV, "77")
    assert prng.resolve_seed() == 77


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("bias", [False, True])
def test_fill_order_dy_bias_x_w(dtype, bias):
    p = ConvProblem(N=1, C=2, Hi=3, Wi=3, K=4, Y=2, X=2, G=2, dtype=dtype)
    got = prng.generate_inputs(p, 12345678, bias=bias)
    dy, w = expected_inputs(p, 12345678, bias)
    st_ = layouts.storage_dtype(dtype)
    assert got.dy.dtype == st_ and got.w.dtype == st_
    assert got.dy.shape == layouts.dy_shape(p) and got.w.shape == layouts.w_shape(p)
    assert got.dy.ravel().view(np.uint8).tobytes() == dy.view(np.uint8).tobytes()
    assert got.w.ravel().view(np.uint8).tobytes() == w.view(np.uint8).tobytes()


def test_buffers_fill_in_memory_order_of_their_layout():
    nchw = ConvProblem(N=2, C=3, Hi=4, Wi=5, K=6, Y=3, X=2, dtype="fp16")
    nhwc = nchw.replace(in_layout="NHWC", out_layout="NHWC", fil_layout="NHWC")
    a, b = prng.generate_inputs(nchw, 9), prng.generate_inputs(nhwc, 9)
    assert np.array_equal(a.dy.ravel(), b.dy.ravel()) and np.array_equal(a.w.ravel(), b.w.ravel())
    assert a.dy.shape == (2, 6, 2, 4) and b.dy.shape == (2, 2, 4, 6)
    assert a.w.shape == (6, 3, 3, 2) and b.w.shape == (6, 3, 2, 3)


@pytest.mark.parametrize("dtype,w_lo", [("fp32", -0.005), ("bf16", -0.005), ("fp16", -0.01 / 3)])
def test_value_ranges(dtype, w_lo):
    p = ConvProblem(N=4, C=16, Hi=16, Wi=16, K=32, Y=3, X=3, dtype=dtype)
    inp = prng.generate_inputs(p)
    dy, w = inp.dy.astype(np.float64), inp.w.astype(np.float64)
    tol = 1e-4
    assert dy.min() >= 0 and dy.max() <= 0.01 + tol and dy.mean() == pytest.approx(0.005, rel=0.05)
    assert w.min() >= w_lo - tol and w.max() <= 0.005 + tol
    assert w.min() < w_lo * 0.9 and w.max() > 0.0045     # the whole range is used


def test_given_tensors_draw_no_numbers():
    p = ConvProblem(N=1, C=2, Hi=3, Wi=3, K=2, Y=2, X=2)
    full = prng.generate_inputs(p, 5)
    own_dy = np.ones(layouts.dy_shape(p), np.float32)
    part = prng.generate_inputs(p, 5, dy=own_dy)
    assert part.dy is own_dy
    g = prng.Lcg(5)
    g.skip(p.dx_elems)                     # dY read from a file: W follows x directly
    w = (np.float32(0.01) * (g.canonical(p.w_elems) * np.float32(1.0) + np.float32(-0.5))).astype(np.float32)
    assert np.array_equal(part.w.ravel(), w)
    assert not np.array_equal(part.w, full.w)
    own_w = np.zeros(layouts.w_shape(p), np.float32)
    assert np.array_equal(prng.generate_inputs(p, 5, w=own_w).dy, full.dy)


def test_rejects_unsupported_dtype():
    with pytest.raises(ValueError):
        prng.generate_inputs(ConvProblem(N=1, C=1, Hi=3, Wi=3, K=1, Y=1, X=1, dtype="int8"))


@pytest.mark.parametrize("raw,why", [("abc", "not an integer"), ("1_000", "not an integer"), ("１２", "not an integer"),
                                     ("1.5", "not an integer"), ("-1", "negative"), (str(2**32), "out of range"),
                                     ("9" * 5000, "out of range")])
def test_bad_seeds_say_what_is_allowed(raw, why):
    with pytest.raises(ValueError) as info:
        prng.resolve_seed({prng.SEED_ENV: raw})
    msg = str(info.value)
    assert msg.startswith(f"{prng.SEED_ENV}=") and f": {why}; allowed: an integer from 0 " in msg
    assert msg.endswith(f"to {2**32 - 1}") and len(msg) < 200
