"""Tilde decomposition of backward data into dense sub-GEMMs.

Formulas from CK ``transform_conv_bwd_data_to_gemm_v1.hpp`` (also MIOpen
``ConvHipImplicitGemmBwdDataV4R1::CalculateGemmSize``), per spatial dim (H shown)::

    GcdH        = gcd(sH, dH)
    YTilde      = sH / GcdH                           filter phases
    HTilde      = Ho + ceil(dH*(Y-1) / sH)
    HBegin      = floor(max(0, pH - dH*(YTilde-1)) / sH)
    HEnd        = min(HTilde, ceil((pH + Hi - 1) / sH) + 1)
    YDotSlice   = ceil((Y - i_ytilde) / YTilde)       (NOT MIOpen V4R1's older formula, #575)

Sub-GEMM (i_ytilde, i_xtilde) in NHWC orientation, over its phase's own rows (the shared
slice trimmed to the ``htilde`` whose dX row lies in ``[0, Hi)``: :meth:`AxisTilde.phase_slice`;
HBegin and HTildeSlice below are the phase's)::

    GemmM = N * HTildeSlice * WTildeSlice     row m -> (n, htl, wtl), htilde = HBegin + htl
    GemmN = cpg                               column c
    GemmK = YDotSlice * XDotSlice * kpg       k_gemm -> (ydot, xdot, k), k innermost
    y  = ydot*YTilde + i_ytilde               W row
    ho = htilde - ydot*(dH/GcdH)              dY row, valid iff 0 <= ho < Ho
    hi = sH*htilde + dH*i_ytilde - pH         dX row, written iff 0 <= hi < Hi

Phases write disjoint dX pixels; pixels with ``(hi+pH) % GcdH != 0`` or in a phase with
``YDotSlice == 0`` belong to no sub-GEMM and must be zero-filled.

Non-empty phases, directly: ``YDotSlice(i) = ceil((Y - i)/YTilde) > 0`` iff ``i < Y``, and
HTildeSlice does not depend on ``i``. So the non-empty phases of an axis are
``range(min(YTilde, Y))`` when HTildeSlice > 0 (none otherwise): with a stride far above the
filter (``-u 100000 -y 3``: YTilde = 100000) only the first Y phases have taps, and the work
here is bounded by the filter, never by the stride's magnitude.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from math import gcd

from .errors import PerfConfigError
from .problem import ConvProblem, valid_range


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class AxisTilde:
    """The tilde quantities of one spatial axis (H or W)."""

    stride: int
    dilation: int
    pad: int
    filt: int
    size_in: int     # Hi (dX)
    size_out: int    # Ho (dY)
    gcd: int
    tilde: int       # YTilde
    dot: int         # YDot
    htilde: int      # HTilde
    begin: int       # IHTildeSliceBegin
    end: int         # IHTildeSliceEnd

    @property
    def slice(self) -> int:
        """HTildeSlice = end - begin (may be <= 0 for degenerate shapes)."""
        return max(0, self.end - self.begin)

    @property
    def dy_coeff(self) -> int:
        """dY row step per ydot: ``dH / GcdH`` (subtracted)."""
        return self.dilation // self.gcd

    def phases(self) -> range:
        """The phases ``i`` with taps and rows: ``range(min(YTilde, Y))``, or an empty range
        when HTildeSlice is 0 (see the module docstring); O(1), whatever the stride."""
        return range(min(self.tilde, self.filt)) if self.slice > 0 else range(0)

    def dot_slice(self, i: int) -> int:
        """YDotSlice for phase ``i``: ``ceil((Y - i) / YTilde)``, 0 when ``i >= Y``."""
        return max(0, _ceil_div(self.filt - i, self.tilde))

    def dx_offset(self, i: int) -> int:
        """dX coordinate of ``htl == 0`` in phase i: ``dH*i + sH*HBegin - pH``."""
        return self.dilation * i + self.stride * self.begin - self.pad

    def phase_slice(self, i: int) -> tuple:
        """``(begin, slice, dx_offset)`` of phase ``i``'s own rows: HTildeSlice trimmed to the
        ``htilde`` whose dX row ``sH*htilde + dH*i - pH`` lies in ``[0, Hi)`` (the shared slice
        also holds rows of other phases' range: 17 for 16 with a 3x3/s2/p1 filter, a GEMM row
        in 17 computed and dropped, and TMA boxes that fit 16-row grids badly), the dX row of
        its first row. O(1). A phase that writes no row keeps the shared slice (its sub-GEMM
        writes nothing, as a problem whose dX no tap reaches needs one to run)."""
        t0, t1 = valid_range(self.dx_offset(i), self.stride, self.slice, self.size_in)
        if t1 == t0:
            return self.begin, self.slice, self.dx_offset(i)
        return self.begin + t0, t1 - t0, self.dx_offset(i) + self.stride * t0

    def rows_written(self, i: int) -> int:
        """How many dX rows (``0 <= hi < Hi``) phase ``i`` writes (O(1))."""
        t0, t1 = valid_range(self.dx_offset(i), self.stride, self.slice, self.size_in)
        return t1 - t0

    def covers_all(self) -> bool:
        """Whether the non-empty phases together write every dX row. Phases write disjoint
        rows (``dH*i mod sH`` differs for every ``i < YTilde``), so counting them is exact:
        O(phases), not O(Hi)."""
        return sum(self.rows_written(i) for i in self.phases()) == self.size_in


def axis_tilde(size_in: int, size_out: int, filt: int, pad: int, stride: int, dilation: int) -> AxisTilde:
    """Tilde quantities of one axis (formulas in the module docstring)."""
    g = gcd(stride, dilation)
    tilde = stride // g
    dot = _ceil_div(filt, tilde)
    htilde = size_out + _ceil_div(dilation * (filt - 1), stride)
    begin = max(0, pad - dilation * (tilde - 1)) // stride
    end = min(htilde, _ceil_div(pad + size_in - 1, stride) + 1)
    return AxisTilde(stride, dilation, pad, filt, size_in, size_out, g, tilde, dot, htilde, begin, end)


@dataclass(frozen=True)
class SubGemm:
    """One dense sub-GEMM of the decomposition (per group; the grid adds the group index).

    GEMM view: ``dX_phase[GemmM, GemmN] = dY_gathered[GemmM, GemmK] x W_phase[GemmK, GemmN]``.
    """

    index: int          # position in the list of non-empty sub-GEMMs
    i_ytilde: int
    i_xtilde: int
    gemm_m: int         # N * h_slice * w_slice
    gemm_n: int         # cpg
    gemm_k: int         # y_dot_slice * x_dot_slice * kpg
    h_slice: int
    w_slice: int
    h_begin: int
    w_begin: int
    y_dot_slice: int
    x_dot_slice: int
    dy_h_coeff: int     # ho = htilde - ydot*dy_h_coeff
    dy_w_coeff: int
    y_stride: int       # y = ydot*y_stride + y_offset
    y_offset: int
    x_stride: int
    x_offset: int
    dx_h_stride: int    # hi = htl*dx_h_stride + dx_h_offset
    dx_h_offset: int
    dx_w_stride: int
    dx_w_offset: int

    @property
    def taps(self) -> int:
        return self.y_dot_slice * self.x_dot_slice

    @property
    def macs(self) -> int:
        """Multiply-accumulates per group (including masked halo rows)."""
        return self.gemm_m * self.gemm_n * self.gemm_k


@dataclass(frozen=True)
class Decomposition:
    """All non-empty sub-GEMMs of a problem plus the zero-fill verdict."""

    h: AxisTilde
    w: AxisTilde
    sub_gemms: tuple
    needs_zero_fill: bool
    """True when some dX pixels belong to no sub-GEMM (1x1 stride 2, gcd(s,d) > 1, ...).
    Split-K needs dX zeroed for its own reason; that is the spec's business."""

    @property
    def num_phases(self) -> int:
        """YTilde * XTilde: every phase, empty or not (a number, never enumerated)."""
        return self.h.tilde * self.w.tilde


MAX_SUB_GEMMS = 65536 // (19 * 4)
"""The most sub-GEMMs one kernel takes (862): the kernel keeps one record of 19 32-bit
ints per sub-GEMM in a ``__constant__`` table, and constant memory is 64 KiB."""


def axes(problem: ConvProblem) -> tuple:
    """``(h, w)``: the :class:`AxisTilde` of both axes (O(1))."""
    p = problem
    return (axis_tilde(p.Hi, p.Ho, p.Y, p.pH, p.sH, p.dH), axis_tilde(p.Wi, p.Wo, p.X, p.pW, p.sW, p.dW))


def too_many_sub_gemms(h: AxisTilde, w: AxisTilde) -> str | None:
    """Why the axes ``h``, ``w`` make more sub-GEMMs than a kernel takes, or None."""
    nh, nw = len(h.phases()), len(w.phases())
    if nh * nw <= MAX_SUB_GEMMS:
        return None
    return (f"{nh} x {nw} = {nh * nw} tilde sub-GEMMs (filter -y/-x {h.filt}x{w.filt}, stride -u/-v "
            f"{h.stride}x{w.stride}, dilation -l/-j {h.dilation}x{w.dilation}); a kernel takes at most "
            f"{MAX_SUB_GEMMS} (one 76-byte record each in 64 KiB of constant memory); allowed: at most "
            f"{MAX_SUB_GEMMS}, or a stride equal to the filter with no padding and dilation 1 (-p 0 -q 0: "
            f"the patch GEMM, which has no sub-GEMM table)")


def decompose(problem: ConvProblem) -> Decomposition:
    """Split a 2-D backward-data problem into its tilde sub-GEMMs.

    Phases are enumerated ``i_ytilde`` outer, ``i_xtilde`` inner; only the non-empty ones
    (``YDotSlice * XDotSlice > 0`` and non-empty tilde slices, :meth:`AxisTilde.phases`) are
    visited, so the work is O(sub-GEMMs), never O(YTilde * XTilde).

    Raises:
        ValueError: for a 3-D problem (this solver is 2-D only).
        PerfConfigError: more than :data:`MAX_SUB_GEMMS` sub-GEMMs, so no config can run the
            problem (:func:`too_many_sub_gemms` says so in O(1); applicability reports it as
            ``TOO_MANY_SUB_GEMMS`` before any config is asked for).
    """
    if problem.is_3d:
        raise ValueError("tilde decomposition is implemented for 2-D problems only")
    p = problem
    h, w = axes(p)
    too_many = too_many_sub_gemms(h, w)
    if too_many:
        raise PerfConfigError(too_many)
    subs = []
    for iy in h.phases():
        yds = h.dot_slice(iy)
        hb, hs, hoff = h.phase_slice(iy)
        for ix in w.phases():
            xds = w.dot_slice(ix)
            wb, ws, woff = w.phase_slice(ix)
            subs.append(SubGemm(
                index=len(subs), i_ytilde=iy, i_xtilde=ix,
                gemm_m=p.N * hs * ws, gemm_n=p.cpg, gemm_k=yds * xds * p.kpg,
                h_slice=hs, w_slice=ws, h_begin=hb, w_begin=wb,
                y_dot_slice=yds, x_dot_slice=xds,
                dy_h_coeff=h.dy_coeff, dy_w_coeff=w.dy_coeff,
                y_stride=h.tilde, y_offset=iy, x_stride=w.tilde, x_offset=ix,
                dx_h_stride=h.stride, dx_h_offset=hoff,
                dx_w_stride=w.stride, dx_w_offset=woff,
            ))
    # Zero-fill verdict, exact for any stride/dilation/pad, in O(phases): a pixel is covered
    # iff its row is written by a non-empty row phase and its column by a non-empty column
    # phase (every pair of them is a sub-GEMM), so the covered pixels are (rows) x (columns).
    return Decomposition(h, w, tuple(subs), not (h.covers_all() and w.covers_all()))


cached_decompose = lru_cache(maxsize=256)(decompose)
"""Memoised :func:`decompose` (problems are frozen, and so is the result): search and
validation call it once per config."""
