"""Float64 reference backward data, MIOpen's error metric and tolerances, and the verdict.

Reference definition (research/dgrad_kernels.md §1)::

    dX[n, hi, wi, g*cpg + c] = sum over k < kpg, y < Y, x < X of
                               dY[n, ho, wo, g*kpg + k] * W[g*kpg + k, y, x, c]
    with hi = ho*sH - pH + y*dH and wi = wo*sW - pW + x*dW, 0 <= hi < Hi, 0 <= wi < Wi.

It is computed in the forward-map ("scatter") direction, independently of the tilde
decomposition: for each filter tap (y, x) the product ``dY . W[:, y, x, :]`` (float64 GEMMs
per group over the dY pixels that land inside dX) is added into dX at rows
``ho*sH + y*dH - pH`` and columns ``wo*sW + x*dW - pW`` (strided slices). Pixels no (ho, y)
pair reaches stay exactly 0. Memory stays the tensors' size whatever the pads, strides and
dilations.

Blocks. The reference of a big problem does not fit beside the tensors (8 bytes per dX
element), so :func:`verify_reference` computes and compares it one block at a time --
whole images, or rows of one image when an image alone is too big
(:func:`reference_blocks`, at most :data:`BLOCK_BYTES` each) -- and never holds the whole
float64 dX. The values do not depend on the blocking: every GEMM covers a fixed slab of
rows of one image (:data:`SLAB_PIXELS` dY pixels, counted from the tap's first row), a
block computes whole slabs (and drops the rows outside it), and BLAS then sees the same
shapes and operands for every dX value; the taps add in the same order.

Error metric: MIOpen ``miopen::rms_range`` (test/verify.hpp)::

    sqrt(sum (ref - out)^2) / (sqrt(n) * max(max|ref|, max|out|, DBL_MIN))

accumulated over blocks: the count, the maxima (a NaN anywhere stays NaN, as one
``np.max`` over the whole buffer gives) and the sum of squares. The sum adds units of
:data:`SUM_UNIT` consecutive squares (in NHWC order, whatever the blocks) exactly
(``math.fsum``), so a blockwise comparison gives bit for bit the value of a whole-buffer
one (and a sum at least as accurate as one ``numpy.dot``).

Tolerances: MIOpenDriver ``GetDefaultTolerance`` -- fp32 1.5e-6, fp16 8.2e-3, bf16 8.2e-3 x 8
= 6.56e-2, fp32 with TF32 math 8.2e-3 (:mod:`miopen_solver.tf32`) -- times 10 for backward
data when the algorithm is implicit GEMM (ours is). The reference itself is always the
float64 result of the unrounded inputs, whatever the math of the kernel it judges.
"""

from __future__ import annotations

import math
import sys
from dataclasses import asdict, dataclass

import numpy as np

from . import layouts
from .problem import ConvProblem, valid_range
from .tf32 import TOLERANCE as TF32_TOLERANCE

BASE_TOLERANCE = {"fp32": 1.5e-6, "fp16": 8.2e-3, "bf16": 8.2e-3 * 8, "tf32": TF32_TOLERANCE}
"""MIOpenDriver's default tolerance per data type, and for fp32 computed with TF32 math
(``tf32``), before the implicit-GEMM factor."""

IGEMM_BWD_FACTOR = 10
"""MIOpenDriver multiplies the backward-data tolerance by 10 for ImplicitGEMM (algo 5)."""

BLOCK_BYTES = 64 << 20
"""What one block of the blockwise reference and comparison may allocate (bytes; see
:func:`block_bytes`): bounds the host memory of a verification whatever the problem size."""

SLAB_PIXELS = 256
"""dY pixels (whole rows of one image) per float64 GEMM of the reference."""

SUM_UNIT = 1 << 16
"""Consecutive squared differences summed together before the exact sum of the units."""


def default_tolerance(dtype: str, implicit_gemm: bool = True) -> float:
    """MIOpenDriver's backward-data tolerance for ``dtype`` (``fp32``/``fp16``/``bf16``, or
    ``tf32`` for fp32 computed with TF32 math: a problem's ``compute_type``, a solution's
    ``math``).

    Raises:
        ValueError: a data type without a tolerance here.
    """
    if dtype not in BASE_TOLERANCE:
        raise ValueError(f"no tolerance for {dtype!r}; known: {', '.join(BASE_TOLERANCE)}")
    tol = BASE_TOLERANCE[dtype]
    return tol * IGEMM_BWD_FACTOR if implicit_gemm else tol


# --------------------------------------------------------------------- the reference
def _check_inputs(p: ConvProblem, dy: np.ndarray, w: np.ndarray) -> None:
    if p.is_3d or p.mode != "conv":
        raise ValueError("the reference covers 2-D convolutions in mode 'conv' only")
    if not isinstance(dy, np.ndarray) or not isinstance(w, np.ndarray):
        raise ValueError(f"dY {type(dy).__name__} / W {type(w).__name__}: allowed: numpy arrays of shapes "
                         f"{layouts.dy_shape(p)} / {layouts.w_shape(p)}")
    if tuple(dy.shape) != layouts.dy_shape(p) or tuple(w.shape) != layouts.w_shape(p):
        raise ValueError(f"dY {tuple(dy.shape)} / W {tuple(w.shape)} do not match the problem: "
                         f"want {layouts.dy_shape(p)} / {layouts.w_shape(p)}")


def _nhwc(a: np.ndarray, layout: str) -> np.ndarray:
    """A view of ``a`` (stored in ``layout``) with the axes in NHWC order (no copy)."""
    return np.transpose(a, layouts.permutation(layout, "NHWC"))


def _rows(first: int, step: int, count: int) -> slice:
    """Indices ``first + i*step`` for ``i < count`` (count >= 1) as a slice."""
    return slice(first, first + (count - 1) * step + 1, step)


def _reference_block(p: ConvProblem, dy_v: np.ndarray, w_v: np.ndarray, n0: int, n1: int, h0: int,
                     h1: int) -> np.ndarray:
    """dX images ``[n0, n1)``, rows ``[h0, h1)`` as float64 ``(n, h, Wi, C)``, from NHWC views
    of dY and W (any float storage type). See the module docstring for the slabs."""
    G, kpg, cpg = p.G, p.kpg, p.cpg
    nb, hb = n1 - n0, h1 - h0
    dx = np.zeros((nb, hb, p.Wi, G, cpg), dtype=np.float64)
    for y in range(p.Y):
        off_h = y * p.dH - p.pH                                   # hi = ho*sH + off_h
        t0, t1 = valid_range(off_h, p.sH, p.Ho, p.Hi)             # the tap's rows in a whole image
        b0, b1 = valid_range(off_h - h0, p.sH, p.Ho, hb)          # those that land in this block
        if b1 <= b0:
            continue
        for x in range(p.X):
            off_w = x * p.dW - p.pW
            u0, u1 = valid_range(off_w, p.sW, p.Wo, p.Wi)
            if u1 <= u0:
                continue
            nw = u1 - u0
            slab = max(1, SLAB_PIXELS // nw)                       # rows per GEMM, from row t0
            e0 = t0 + (b0 - t0) // slab * slab
            e1 = min(t1, t0 + -(-(b1 - t0) // slab) * slab)
            full = e0 + (e1 - e0) // slab * slab
            wt = np.asarray(w_v[:, y, x, :], dtype=np.float64).reshape(G, 1, kpg, cpg)
            for r0, r1, step in ((e0, full, slab), (full, e1, e1 - full)):
                lo, hi = max(r0, b0), min(r1, b1)
                if hi <= lo:
                    continue
                a = np.asarray(dy_v[n0:n1, r0:r1, u0:u1], dtype=np.float64, order="C")
                count = (r1 - r0) // step
                prod = np.matmul(a.reshape(nb * count, step * nw, G, kpg).transpose(2, 0, 1, 3), wt)
                del a
                prod = prod.transpose(1, 2, 0, 3).reshape(nb, r1 - r0, nw, G, cpg)
                dx[:, _rows(lo * p.sH + off_h - h0, p.sH, hi - lo), _rows(u0 * p.sW + off_w, p.sW, nw)] += \
                    prod[:, lo - r0:hi - r0]
                del prod                       # before the next piece's rows are converted
    return dx.reshape(nb, hb, p.Wi, p.C)


def dgrad_reference(problem: ConvProblem, dy: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Direct backward data in float64, whole (:func:`verify_reference` compares big problems
    block by block instead; the values are the same).

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
    _check_inputs(p, dy, w)
    dx = _reference_block(p, _nhwc(dy, p.out_layout), _nhwc(w, p.fil_layout), 0, p.N, 0, p.Hi)
    return layouts.dx_from_nhwc(p, dx)


def pixel_bytes(problem: ConvProblem) -> int:
    """Bytes a block allocates per dX pixel (all C channels) at its peak: the float64 block
    (8C) plus either a tap's float64 dY rows and their GEMM product (8K + 8C) or the product
    and its transposed copy (16C); the comparison after it (a float64 copy of dX and a
    finite mask, 9C) fits in the same room."""
    return 8 * problem.C + 8 * max(problem.K + problem.C, 2 * problem.C)


def block_bytes(problem: ConvProblem, pixels: int) -> int:
    """Peak bytes of a block of ``pixels`` dX pixels: :func:`pixel_bytes` each, plus the rows
    of slabs computed past the block's edges and one tap of W in float64."""
    p = problem
    return pixels * pixel_bytes(p) + 2 * SLAB_PIXELS * 8 * (p.K + p.C) + 8 * p.K * p.cpg


def block_shape(problem: ConvProblem, budget: int | None = None) -> tuple:
    """``(images, rows)`` of the blocks :func:`reference_blocks` cuts: as many whole images as
    fit in ``budget`` bytes (:func:`pixel_bytes`; default :data:`BLOCK_BYTES`), else rows of
    one image (at least one row). ``(N, Hi)`` is the whole dX in one block."""
    p = problem
    pixels = max(1, (BLOCK_BYTES if budget is None else budget) // pixel_bytes(p))
    image = p.Hi * p.Wi
    if pixels >= image:
        return min(p.N, pixels // image), p.Hi
    return 1, max(1, pixels // p.Wi)


def reference_blocks(problem: ConvProblem, budget: int | None = None):
    """The blocks ``(n0, n1, h0, h1)`` of dX, in NHWC order, that :func:`verify_reference`
    computes one at a time (:func:`block_shape`); a generator."""
    p = problem
    nb, hb = block_shape(p, budget)
    for n in range(0, p.N, nb):
        for h in range(0, p.Hi, hb):
            yield n, min(p.N, n + nb), h, min(p.Hi, h + hb)


# --------------------------------------------------------------------- the metric
@dataclass(frozen=True)
class Verdict:
    """Outcome of comparing a computed dX with the reference.

    Attributes:
        ok: ``error < tolerance`` (False for any NaN/inf in the output).
        error: :func:`rms_range` value.
        tolerance: the bound used.
        elements: number of dX elements compared.
        nonfinite: output elements that are NaN or infinite (e.g. never written).
        max_abs_diff: largest elementwise |ref - out| over finite output elements; None when
            there is none (every output element NaN or infinite: nothing was compared).
    """

    ok: bool
    error: float
    tolerance: float
    elements: int
    nonfinite: int
    max_abs_diff: float | None

    def as_dict(self) -> dict:
        return asdict(self)


def _max(a: float | None, b: float) -> float:
    """The larger of two maxima, NaN when either is NaN (as one ``np.max`` over both)."""
    if a is None:
        return b
    return math.nan if math.isnan(a) or math.isnan(b) else max(a, b)


def _abs_max(a: np.ndarray) -> float:
    """``np.max(np.abs(a))`` without the temporary (NaN when ``a`` holds one)."""
    return float(np.maximum(a.max(), -a.min()))


class Comparison:
    """MIOpen's metric accumulated over consecutive blocks of the NHWC element order (see
    the module docstring): :meth:`add` each block, then :meth:`error` / :meth:`verdict`."""

    def __init__(self):
        self.elements = self.nonfinite = 0
        self.max_ref = self.max_out = None
        self.max_diff = 0.0
        self._units = []
        self._carry = np.empty(0)

    def add(self, out: np.ndarray, ref: np.ndarray) -> None:
        """Compare the next block: ``out`` (any float dtype) with ``ref``, a C-contiguous
        float64 array of the same shape that this call overwrites."""
        if ref.size == 0:
            return
        o = np.array(out, dtype=np.float64, order="C")
        finite = np.isfinite(o)
        self.nonfinite += o.size - int(np.count_nonzero(finite))
        self.max_ref = _max(self.max_ref, _abs_max(ref))
        self.max_out = _max(self.max_out, _abs_max(o))
        np.subtract(ref, o, out=ref)
        np.abs(ref, out=o)
        self.max_diff = _max(self.max_diff, float(np.max(o, where=finite, initial=0.0)))
        del o, finite
        np.multiply(ref, ref, out=ref)
        self._add_squares(ref.reshape(-1))
        self.elements += ref.size

    def _add_squares(self, sq: np.ndarray) -> None:
        """Sum ``sq`` in units of :data:`SUM_UNIT` elements counted from the first block's
        first element; a unit split between blocks is completed from the next one."""
        if self._carry.size:
            take = SUM_UNIT - self._carry.size
            self._carry = np.concatenate((self._carry, sq[:take]))
            sq = sq[take:]
            if self._carry.size < SUM_UNIT:
                return
            self._units.append(np.add.reduce(self._carry.reshape(1, SUM_UNIT), axis=1))
        whole = sq.size // SUM_UNIT * SUM_UNIT
        if whole:
            self._units.append(np.add.reduce(sq[:whole].reshape(-1, SUM_UNIT), axis=1))
        self._carry = sq[whole:].copy()

    def error(self) -> float:
        """The rms_range value of everything added (0 for nothing)."""
        if self.elements == 0:
            return 0.0
        sums = [float(s) for part in self._units for s in part]
        if self._carry.size:
            sums.append(float(np.add.reduce(self._carry.reshape(1, -1), axis=1)[0]))
        try:
            total = math.fsum(sums)
        except OverflowError:               # finite units whose sum overflows
            total = math.inf
        mag = max(self.max_ref, self.max_out, sys.float_info.min)
        return math.sqrt(total) / (math.sqrt(self.elements) * mag)

    def verdict(self, tolerance: float) -> Verdict:
        err = self.error()
        ok = self.nonfinite == 0 and math.isfinite(err) and err < tolerance
        compared = self.elements > self.nonfinite
        return Verdict(ok=ok, error=err, tolerance=tolerance, elements=self.elements, nonfinite=self.nonfinite,
                       max_abs_diff=self.max_diff if compared else None)


def rms_range(ref: np.ndarray, out: np.ndarray) -> float:
    """MIOpen's ``rms_range`` over whole buffers (float64, in their memory order); NaN when
    ``out`` holds a NaN, ``sys.float_info.max`` when the sizes differ (as MIOpen returns
    DBL_MAX)."""
    r = np.array(ref, dtype=np.float64).ravel()
    o = np.asarray(out, dtype=np.float64).ravel()
    if r.size != o.size:
        return sys.float_info.max
    cmp = Comparison()
    cmp.add(o, r)
    return cmp.error()


def _tolerance(problem: ConvProblem, tolerance) -> float:
    return default_tolerance(problem.compute_type) if tolerance is None else float(tolerance)


def verify(problem: ConvProblem, dx: np.ndarray, dx_ref: np.ndarray, tolerance: float | None = None,
           *, budget: int | None = None) -> Verdict:
    """Compare ``dx`` (any float dtype, ``problem.in_layout``) with ``dx_ref`` block by block
    (:func:`reference_blocks` of ``budget`` bytes: the float64 copies of one block at a time).

    ``tolerance`` defaults to :func:`default_tolerance` for the problem's compute type (implicit
    GEMM). Raises ValueError when the shapes differ.
    """
    if tuple(dx.shape) != tuple(dx_ref.shape):
        raise ValueError(f"dX shape {tuple(dx.shape)} differs from the reference's {tuple(dx_ref.shape)}")
    dx, dx_ref = np.asarray(dx), np.asarray(dx_ref)
    if tuple(dx.shape) == layouts.dx_shape(problem):
        out, ref = _nhwc(dx, problem.in_layout), _nhwc(dx_ref, problem.in_layout)
        blocks = reference_blocks(problem, budget)
    else:                                   # another shape: one block in its own order
        out, ref = dx.reshape(1, 1, 1, -1), dx_ref.reshape(1, 1, 1, -1)
        blocks = [(0, 1, 0, 1)]
    cmp = Comparison()
    for n0, n1, h0, h1 in blocks:
        cmp.add(out[n0:n1, h0:h1], np.array(ref[n0:n1, h0:h1], dtype=np.float64, order="C"))
    return cmp.verdict(_tolerance(problem, tolerance))


def verify_reference(problem: ConvProblem, dx: np.ndarray, dy: np.ndarray, w: np.ndarray,
                     tolerance: float | None = None, *, budget: int | None = None) -> Verdict:
    """``verify(problem, dx, dgrad_reference(problem, dy, w))`` -- the same verdict, bit for
    bit -- with the reference computed and compared one block of at most ``budget`` bytes at
    a time (:func:`reference_blocks`), so the whole float64 reference is never held.

    Raises:
        ValueError: dX, dY or W do not have the problem's shapes; a 3-D or transposed problem.
    """
    p = problem
    _check_inputs(p, dy, w)
    if tuple(dx.shape) != layouts.dx_shape(p):
        raise ValueError(f"dX shape {tuple(dx.shape)} is not the problem's {layouts.dx_shape(p)}")
    out, dy_v, w_v = _nhwc(dx, p.in_layout), _nhwc(dy, p.out_layout), _nhwc(w, p.fil_layout)
    cmp = Comparison()
    for n0, n1, h0, h1 in reference_blocks(p, budget):
        cmp.add(out[n0:n1, h0:h1], _reference_block(p, dy_v, w_v, n0, n1, h0, h1))
    return cmp.verdict(_tolerance(p, tolerance))
