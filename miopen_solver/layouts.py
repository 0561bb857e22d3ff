"""Host tensor shapes per layout, conversions to and from the NHWC working form, storage dtypes.

A 2-D layout string is a permutation of the letters ``N C H W`` (MIOpenDriver accepts
``NCHW``, ``NHWC`` and ``CHWN``). The letters name the memory order, outermost first, of
a tensor whose canonical dimensions are:

=========  ==========================  =========================
tensor     canonical (N, C, H, W)      NHWC working form
=========  ==========================  =========================
dX         (N, C, Hi, Wi)              (N, Hi, Wi, C)
dY         (N, K, Ho, Wo)              (N, Ho, Wo, K)
W          (K, cpg, Y, X)              (K, Y, X, cpg)  = KYXC
=========  ==========================  =========================

So an NHWC dX has shape ``(N, Hi, Wi, C)``, an NCHW W has shape ``(K, cpg, Y, X)``
and an NHWC ("KYXC") W has shape ``(K, Y, X, cpg)``, as in
:mod:`miopen_solver.runtime.base`. Channel ``g*cpg + c`` of dX and ``g*kpg + k`` of dY
and W belong to group ``g`` (MIOpen's grouped-convolution convention).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from .problem import ConvProblem, same_memory

CANONICAL = "NCHW"

STORAGE_TYPES = ("fp32", "fp16", "bf16")
"""Data type names with a numpy storage type here."""


@lru_cache(maxsize=None)
def storage_dtype(dtype: str) -> np.dtype:
    """The numpy dtype that stores ``dtype`` (``fp32``, ``fp16``, ``bf16``: ``ml_dtypes.bfloat16``,
    imported on first use: its import costs about a second of CPU, which queries that
    allocate nothing should not pay).

    Raises:
        ValueError: a data type without a numpy storage type here (int8, fp8, bf8).
    """
    if dtype == "fp32":
        return np.dtype(np.float32)
    if dtype == "fp16":
        return np.dtype(np.float16)
    if dtype == "bf16":
        import ml_dtypes
        return np.dtype(ml_dtypes.bfloat16)
    raise ValueError(f"no host storage type for {dtype!r}; supported: {', '.join(STORAGE_TYPES)}")


def _check_layout(layout: str) -> str:
    if sorted(layout) != sorted(CANONICAL):
        raise ValueError(f"layout {layout!r} is not a 2-D layout (a permutation of NCHW)")
    return layout


def permutation(src: str, dst: str) -> tuple:
    """Axes that turn an array in layout ``src`` into layout ``dst`` (for ``np.transpose``)."""
    _check_layout(src)
    _check_layout(dst)
    return tuple(src.index(letter) for letter in dst)


def shape_in(canonical: tuple, layout: str) -> tuple:
    """The shape of a tensor with canonical ``(N, C, H, W)`` dims stored in ``layout``."""
    _check_layout(layout)
    return tuple(canonical[CANONICAL.index(letter)] for letter in layout)


def convert(a: np.ndarray, src: str, dst: str) -> np.ndarray:
    """``a`` (layout ``src``) as a C-contiguous array in layout ``dst``: a view of ``a``'s
    bytes when the two layouts hold the same bytes for its shape (equal, or differing only
    in where dims of length 1 sit: :func:`~miopen_solver.problem.same_memory`), else a
    transposed copy."""
    perm = permutation(src, dst)
    if src == dst:
        return np.ascontiguousarray(a)
    lens = dict(zip(src, a.shape))
    if same_memory(lens, src, dst):
        return np.ascontiguousarray(a).reshape(tuple(lens[x] for x in dst))
    return np.ascontiguousarray(np.transpose(a, perm))


# ----------------------------------------------------------------- per-tensor shapes
def dx_canonical(p: ConvProblem) -> tuple:
    return (p.N, p.C, p.Hi, p.Wi)


def dy_canonical(p: ConvProblem) -> tuple:
    return (p.N, p.K, p.Ho, p.Wo)


def w_canonical(p: ConvProblem) -> tuple:
    return (p.K, p.cpg, p.Y, p.X)


def dx_shape(p: ConvProblem) -> tuple:
    """dX's host shape in ``p.in_layout``."""
    return shape_in(dx_canonical(p), p.in_layout)


def dy_shape(p: ConvProblem) -> tuple:
    """dY's host shape in ``p.out_layout``."""
    return shape_in(dy_canonical(p), p.out_layout)


def w_shape(p: ConvProblem) -> tuple:
    """W's host shape in ``p.fil_layout``."""
    return shape_in(w_canonical(p), p.fil_layout)


def check_inputs(p: ConvProblem, dy: np.ndarray, w: np.ndarray) -> None:
    """Raise ValueError unless dY and W are numpy arrays of the problem's shapes and storage
    dtype."""
    want = storage_dtype(p.dtype)
    for name, a, shape, lay in (("dY", dy, dy_shape(p), p.out_layout),
                                ("W", w, w_shape(p), p.fil_layout)):
        if not isinstance(a, np.ndarray):
            raise ValueError(f"{name} is a {type(a).__name__}; allowed: a numpy array of shape {shape}, dtype {want}")
        if tuple(a.shape) != shape:
            raise ValueError(f"{name} has shape {tuple(a.shape)}; {lay} {p.dtype} problem needs {shape}")
        if a.dtype != want:
            raise ValueError(f"{name} has dtype {a.dtype}; {p.dtype} storage is {want}")


def dy_to_nhwc(p: ConvProblem, dy: np.ndarray) -> np.ndarray:
    """dY as ``(N, Ho, Wo, K)``."""
    return convert(dy, p.out_layout, "NHWC")


def w_to_kyxc(p: ConvProblem, w: np.ndarray) -> np.ndarray:
    """W as ``(K, Y, X, cpg)`` (KYXC; the filter's "NHWC")."""
    return convert(w, p.fil_layout, "NHWC")


def dx_from_nhwc(p: ConvProblem, dx: np.ndarray) -> np.ndarray:
    """dX ``(N, Hi, Wi, C)`` -> ``p.in_layout``."""
    return convert(dx, "NHWC", p.in_layout)


def dx_to_nhwc(p: ConvProblem, dx: np.ndarray) -> np.ndarray:
    """dX in ``p.in_layout`` -> ``(N, Hi, Wi, C)``."""
    return convert(dx, p.in_layout, "NHWC")
