"""Input tensors generated the way MIOpenDriver generates them.

Source (facts, not code): MIOpen ``driver/random.hpp`` and ``ConvDriver::AllocateBuffersAndCopy``
in ``driver/conv_driver.hpp`` (research/miopen.md §1.8):

* generator: ``std::linear_congruential_engine<uint32, 1103515245, 12345, 2^31>``
  (glibc's ``rand`` constants), ``x[i+1] = (1103515245*x[i] + 12345) mod 2^31``, seeded with
  ``seed mod 2^31``;
* seed: 12345678, overridable by ``MIOPEN_DEBUG_DRIVER_PRNG_SEED`` (0 = a random seed);
* canonical value: ``float(x) * 2^-31`` computed in fp32 (so it can round up to 1.0);
* ``gen_0_to_B(B) = canonical * B``, ``gen_A_to_B(A, B) = gen_0_to_B(B - A) + A``, with every
  step rounded to the storage type (half/bfloat16 arithmetic goes through fp32);
* fill order: dY, then the bias (``-b``: two numbers per output channel), then x, then W --
  and every buffer consumes its numbers even when its direction does not run, so x is drawn
  (and discarded) for backward data;
* values: ``dY = gen_0_to_B(0.01)``, ``x = gen_0_to_B(0.01)``,
  ``W = 0.01 * gen_A_to_B(-0.5, 0.5)``; fp16 W uses ``gen_A_to_B(-1/3, 0.5)`` (MIOpen shifts
  the fp16 distribution towards positive numbers), still scaled by 0.01.

Buffers are filled in memory order, i.e. in the tensor's layout (NHWC dY is filled n, ho,
wo, k with k fastest). Generation is vectorised: the LCG's n-step map is itself affine, so a
block of values is extended by doubling (``x[i+L] = A_L*x[i] + C_L``) in uint64 arithmetic,
and skipped buffers advance the state in O(log n).

Rounding note: half arithmetic here rounds to nearest even (numpy); MIOpen's half_float
build may differ in the last bit of some fp16 values.
"""

from __future__ import annotations

import os
import re
import secrets
from dataclasses import dataclass

import numpy as np

from . import layouts
from .problem import ConvProblem
from .text import shorten

LCG_A = 1103515245
LCG_C = 12345
LCG_M = 1 << 31
_MASK = LCG_M - 1

DEFAULT_SEED = 12345678
SEED_ENV = "MIOPEN_DEBUG_DRIVER_PRNG_SEED"

DATA_SCALE = 0.01
W_RANGE = {"fp32": (-0.5, 0.5), "bf16": (-0.5, 0.5), "fp16": (-1.0 / 3.0, 0.5)}
"""``gen_A_to_B`` bounds of W per storage type (before the 0.01 scale)."""


def resolve_seed(environ=None) -> int:
    """The seed MIOpenDriver would use: ``MIOPEN_DEBUG_DRIVER_PRNG_SEED`` if set (0 means
    a fresh random seed), else 12345678. Seeds are 32-bit (MIOpen stores the seed in
    ``std::random_device::result_type``); a larger value is an error, not truncated.

    Raises:
        ValueError: the variable is not an integer in [0, 2^32).
    """
    env = os.environ if environ is None else environ
    raw = env.get(SEED_ENV, "")
    if raw.strip() == "":
        return DEFAULT_SEED
    text = raw.strip()
    shown = f"{SEED_ENV}={shorten(raw)!r}"
    allowed = f"allowed: an integer from 0 (a fresh random seed) to {(1 << 32) - 1}"
    if not re.fullmatch(r"[+-]?[0-9]+", text):      # ASCII decimal only: no '1_000', no other digits
        raise ValueError(f"{shown}: not an integer; {allowed}")
    digits = text.lstrip("+-").lstrip("0") or "0"
    value = int(digits, 10) if len(digits) <= 10 else 1 << 32      # refused by its length, never converted
    if text.startswith("-") and value:
        raise ValueError(f"{shown}: negative; {allowed}")
    if value >= 1 << 32:
        raise ValueError(f"{shown}: out of range; {allowed}")
    if value == 0:
        return secrets.randbits(32) or 1
    return value


def _compose(a1: int, c1: int, a2: int, c2: int) -> tuple:
    """The affine map ``x -> a2*(a1*x + c1) + c2`` (mod 2^31) as ``(a, c)``."""
    return (a2 * a1) & _MASK, (a2 * c1 + c2) & _MASK


def jump(n: int) -> tuple:
    """``(A, C)`` with ``x[i+n] = (A*x[i] + C) mod 2^31`` (binary powering, O(log n))."""
    acc_a, acc_c = 1, 0
    base_a, base_c = LCG_A, LCG_C
    while n:
        if n & 1:
            acc_a, acc_c = _compose(acc_a, acc_c, base_a, base_c)
        base_a, base_c = _compose(base_a, base_c, base_a, base_c)
        n >>= 1
    return acc_a, acc_c


class Lcg:
    """MIOpenDriver's generator: ``minstd``-style LCG with glibc constants, modulus 2^31.

    ``state`` is the last value produced (initially the seed mod 2^31)."""

    def __init__(self, seed: int = DEFAULT_SEED):
        self.seed = int(seed)
        self.state = self.seed % LCG_M

    def raw(self, n: int) -> np.ndarray:
        """The next ``n`` outputs as uint64 values in ``[0, 2^31)``; advances the state."""
        n = int(n)
        out = np.empty(n, dtype=np.uint64)
        if n == 0:
            return out
        out[0] = (LCG_A * self.state + LCG_C) & _MASK
        length, step_a, step_c = 1, LCG_A, LCG_C
        while length < n:
            take = min(length, n - length)
            np.multiply(out[:take], np.uint64(step_a), out=out[length:length + take])
            out[length:length + take] += np.uint64(step_c)
            out[length:length + take] &= np.uint64(_MASK)
            step_a, step_c = _compose(step_a, step_c, step_a, step_c)
            length += take
        self.state = int(out[-1])
        return out

    def skip(self, n: int) -> None:
        """Advance by ``n`` outputs without materialising them."""
        a, c = jump(int(n))
        self.state = (a * self.state + c) & _MASK

    def canonical(self, n: int) -> np.ndarray:
        """``n`` values ``float32(x) * 2^-31`` (fp32, in ``[0, 1]``)."""
        return self.raw(n).astype(np.float32) * np.float32(2.0 ** -31)


def gen_0_to_b(rng: Lcg, n: int, b: float, dtype: np.dtype) -> np.ndarray:
    """MIOpen ``gen_0_to_B<T>(T(b))``: ``T(canonical * float(T(b)))``."""
    bt = np.float32(np.array(b, dtype=dtype).astype(np.float32))
    return (rng.canonical(n) * bt).astype(dtype)


def gen_a_to_b(rng: Lcg, n: int, a: float, b: float, dtype: np.dtype) -> np.ndarray:
    """MIOpen ``gen_A_to_B<T>(T(a), T(b))``: ``gen_0_to_B(T(b) - T(a)) + T(a)`` in T."""
    at = np.array(a, dtype=dtype).astype(np.float32)
    bt = np.array(b, dtype=dtype).astype(np.float32)
    width = (bt - at).astype(dtype)  # T - T, rounded to T
    return (gen_0_to_b(rng, n, width, dtype).astype(np.float32) + at).astype(dtype)


@dataclass
class DriverInputs:
    """dY and W as MIOpenDriver generates them, in the problem's layouts and storage type."""

    dy: np.ndarray
    w: np.ndarray
    seed: int


def generate_inputs(problem: ConvProblem, seed: int = DEFAULT_SEED, *, bias: bool = False,
                    dy: np.ndarray | None = None, w: np.ndarray | None = None) -> DriverInputs:
    """dY (``problem.out_layout``) and W (``problem.fil_layout``) for a backward-data run.

    Args:
        problem: the convolution (fp32, fp16 or bf16).
        seed: the PRNG seed (see :func:`resolve_seed`).
        bias: MIOpenDriver's ``-b``: the bias buffers draw 2*K numbers between dY and x.
        dy, w: tensors read from files (``-D``/``-e``); given ones draw no numbers, as in
            MIOpen, where a buffer read from a file is not generated.

    Raises:
        ValueError: an unsupported data type.
    """
    st = layouts.storage_dtype(problem.dtype)
    rng = Lcg(seed)
    scale = np.array(DATA_SCALE, dtype=st)
    if dy is None:
        dy = gen_0_to_b(rng, problem.dy_elems, DATA_SCALE, st).reshape(layouts.dy_shape(problem))
    if bias:
        rng.skip(2 * problem.K)
    rng.skip(problem.dx_elems)  # x: drawn and discarded (backward data does not read it)
    if w is None:
        lo, hi = W_RANGE[problem.dtype]
        raw = gen_a_to_b(rng, problem.w_elems, lo, hi, st)
        w = (raw.astype(np.float32) * scale.astype(np.float32)).astype(st).reshape(layouts.w_shape(problem))
    return DriverInputs(dy=dy, w=w, seed=seed)
