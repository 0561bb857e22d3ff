"""Vector widths: caps, not demands (research: CK IsSupportedArgument, rocKE choose_vec).

* A (dY) vectorises along k: width <= largest power of two dividing ``kpg``.
* B (W) and C (dX) vectorise along c: width <= largest power of two dividing ``cpg``.
* At most 16 bytes per access (8 fp16/bf16, 4 fp32).
* Each width is then halved until the tile spreads evenly over the block's threads:
  the tile's run axis is divisible by v, and ``tile_elems / v`` is a positive multiple of
  the thread count (:func:`clamp_to_tile`).

The same clamp serves both B-tile layouts (k-outer and m-outer): the global access runs
along c in both, only the shared-memory store differs.
"""

from __future__ import annotations


def pow2_divisor(n: int, limit: int) -> int:
    """Largest power of two ``<= limit`` that divides ``n``."""
    v = 1
    while v * 2 <= limit and n % (v * 2) == 0:
        v *= 2
    return v


def max_vector(elem_bytes: int) -> int:
    """Widest access in elements: 16 bytes."""
    return 16 // elem_bytes


def clamp_to_tile(cap: int, run_len: int, other_len: int, threads: int) -> int:
    """Halve ``cap`` until a ``run_len x other_len`` tile loaded in vectors of v along the
    run axis spreads evenly over ``threads`` (v divides run_len; tile/v is a multiple of
    threads). Returns 0 when even v=1 does not spread evenly (the config is invalid)."""
    v = max(1, cap)
    while v >= 1:
        if run_len % v == 0:
            n = run_len * other_len // v
            if n >= threads and n % threads == 0:
                return v
        v //= 2
    return 0


def choose(cap: int | None, channels: int, elem_bytes: int) -> int:
    """The problem-side width for a cap (None or 0 = as wide as allowed):
    ``min(cap, 16 bytes, pow2 dividing channels)``."""
    limit = max_vector(elem_bytes)
    if cap:
        limit = min(limit, cap)
    return pow2_divisor(channels, limit)
