"""Float64 reference backward data, MIOpen's error metric and tolerances, and the verdict.

Reference definition (research/dgrad_kernels.md §1)::

    dX[n, hi, wi, g*cpg + c] = sum over k < kpg, y < Y, x < X of
                               dY[n, ho, wo, g*kpg + k] * W[g*kpg + k, y, x, c]
    with hi = ho*sH - pH + y*dH and wi = wo*sW - pW + x*dW, 0 <= hi < Hi, 0 <= wi < Wi.

It is computed in the forward-map ("scatter") direction, independently of the tilde
decomposition: for each filter tap (y, x) the product ``dY . W[:, y, x, :]`` (one float64
GEMM per group, every output pixel at once) is added into dX at rows ``ho*sH + y*dH - pH``
and columns ``wo*sW + x*dW - pW`` (strided slices), for the ``ho``/``wo`` that land inside dX
(computed, not padded for: memory stays the tensors' size whatever the pads, strides and
dilations). Pixels no (ho, y) pair reaches stay exactly 0.

Error metric: MIOpen ``miopen::rms_range`` (test/verify.hpp)::

    sqrt(sum (ref - out)^2) / (sqrt(n) * max(max|ref|, max|out|, DBL_MIN))

Tolerances: MIOpenDriver ``GetDefaultTolerance`` -- fp32 1.5e-6, fp16 8.2e-3, bf16 8.2e-3 x 8
= 6.56e-2 -- times 10 for backward data when the algorithm is implicit GEMM (ours is).
"""

from __future__ import annotations

import math
import sys
from dataclasses import asdict, dataclass

import numpy as np

from . import layouts
from .problem import ConvProblem, valid_range

BASE_TOLERANCE = {"fp32": 1.5e-6, "fp16": 8.2e-3, "bf16": 8.2e-3 * 8}
"""MIOpenDriver's default tolerance per data type (before the implicit-GEMM factor)."""

IGEMM_BWD_FACTOR = 10
"""MIOpenDriver multiplies the backward-data tolerance by 10 for ImplicitGEMM (algo 5)."""


def default_tolerance(dtype: str, implicit_gemm: bool = True) -> float:
    """MIOpenDriver's backward-data tolerance for ``dtype`` (``fp32``/``fp16``/``bf16``).

    Raises:
        ValueError: a data type without a tolerance here.
    """
    if dtype not in BASE_TOLERANCE:
        raise ValueError(f"no tolerance for {dtype!r}; known: {', '.join(BASE_TOLERANCE)}")
    tol = BASE_TOLERANCE[dtype]
    return tol * IGEMM_BWD_FACTOR if implicit_gemm else tol


def dgrad_reference(problem: ConvProblem, dy: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Direct backward data in float64.

    Args:
        problem: a 2-D convolution (mode ``conv``).
        dy: dY in ``problem.out_layout`` (any float dtype; widened to float64).
        w: W in ``problem.fil_layout``.

    Returns:
        dX as float64 in ``problem.in_layout``: NHWC ``(N, Hi, Wi, C)`` or NCHW ``(N, C, Hi, Wi)``.

    Raises:
        ValueError: wrong shapes, a 3-D or transposed problem.
    """
    p = problem
    if p.is_3d or p.mode != "conv":
        raise ValueError("the reference covers 2-D convolutions in mode 'conv' only")
    if tuple(dy.shape) != layouts.dy_shape(p) or tuple(w.shape) != layouts.w_shape(p):
        raise ValueError(f"dY {tuple(dy.shape)} / W {tuple(w.shape)} do not match the problem: "
                         f"want {layouts.dy_shape(p)} / {layouts.w_shape(p)}")
    G, kpg, cpg = p.G, p.kpg, p.cpg
    # dY as (G, N*Ho*Wo, kpg) and W as (G, kpg, Y, X, cpg), float64.
    dy64 = layouts.dy_to_nhwc(p, dy).astype(np.float64)
    dy_g = dy64.reshape(p.N * p.Ho * p.Wo, G, kpg).transpose(1, 0, 2)
    w_g = layouts.w_to_kyxc(p, w).astype(np.float64).reshape(G, kpg, p.Y, p.X, cpg)

    dx = np.zeros((p.N, p.Hi, p.Wi, G, cpg), dtype=np.float64)
    for y in range(p.Y):
        ho0, ho1 = valid_range(y * p.dH - p.pH, p.sH, p.Ho, p.Hi)     # hi = ho*sH + y*dH - pH
        for x in range(p.X):
            wo0, wo1 = valid_range(x * p.dW - p.pW, p.sW, p.Wo, p.Wi)
            if ho1 <= ho0 or wo1 <= wo0:
                continue                                        # the tap lands outside dX
            part = np.matmul(dy_g, w_g[:, :, y, x, :])          # (G, N*Ho*Wo, cpg)
            part = part.transpose(1, 0, 2).reshape(p.N, p.Ho, p.Wo, G, cpg)
            h0, w0 = ho0 * p.sH + y * p.dH - p.pH, wo0 * p.sW + x * p.dW - p.pW
            dx[:, h0:h0 + (ho1 - ho0 - 1) * p.sH + 1:p.sH,
               w0:w0 + (wo1 - wo0 - 1) * p.sW + 1:p.sW] += part[:, ho0:ho1, wo0:wo1]
    return layouts.dx_from_nhwc(p, dx.reshape(p.N, p.Hi, p.Wi, p.C))


def rms_range(ref: np.ndarray, out: np.ndarray) -> float:
    """MIOpen's ``rms_range`` over whole buffers (float64); NaN when ``out`` holds a NaN,
    ``sys.float_info.max`` when the sizes differ (as MIOpen returns DBL_MAX)."""
    r = np.asarray(ref, dtype=np.float64).ravel()
    o = np.asarray(out, dtype=np.float64).ravel()
    if r.size != o.size:
        return sys.float_info.max
    if r.size == 0:
        return 0.0
    diff = r - o
    square_difference = float(np.dot(diff, diff))
    mag = max(float(np.max(np.abs(r))), float(np.max(np.abs(o))), sys.float_info.min)
    return math.sqrt(square_difference) / (math.sqrt(r.size) * mag)


@dataclass(frozen=True)
class Verdict:
    """Outcome of comparing a computed dX with the reference.

    Attributes:
        ok: ``error < tolerance`` (False for any NaN/inf in the output).
        error: :func:`rms_range` value.
        tolerance: the bound used.
        elements: number of dX elements compared.
        nonfinite: output elements that are NaN or infinite (e.g. never written).
        max_abs_diff: largest elementwise |ref - out| over finite elements.
    """

    ok: bool
    error: float
    tolerance: float
    elements: int
    nonfinite: int
    max_abs_diff: float

    def as_dict(self) -> dict:
        return asdict(self)


def verify(problem: ConvProblem, dx: np.ndarray, dx_ref: np.ndarray,
           tolerance: float | None = None) -> Verdict:
    """Compare ``dx`` (any float dtype, ``problem.in_layout``) with ``dx_ref``.

    ``tolerance`` defaults to :func:`default_tolerance` for the problem's dtype (implicit
    GEMM). Raises ValueError when the shapes differ.
    """
    if tuple(dx.shape) != tuple(dx_ref.shape):
        raise ValueError(f"dX shape {tuple(dx.shape)} differs from the reference's {tuple(dx_ref.shape)}")
    tol = default_tolerance(problem.dtype) if tolerance is None else float(tolerance)
    out = np.asarray(dx, dtype=np.float64)
    ref = np.asarray(dx_ref, dtype=np.float64)
    finite = np.isfinite(out)
    nonfinite = int(out.size - np.count_nonzero(finite))
    err = rms_range(ref, out)
    max_diff = float(np.max(np.abs(ref - out), where=finite, initial=0.0)) if out.size else 0.0
    ok = nonfinite == 0 and math.isfinite(err) and err < tol
    return Verdict(ok=ok, error=err, tolerance=tol, elements=int(out.size), nonfinite=nonfinite,
                   max_abs_diff=max_diff)
