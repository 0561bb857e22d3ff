"""Tilde decomposition of backward data into dense sub-GEMMs.

Formulas from CK ``transform_conv_bwd_data_to_gemm_v1.hpp`` (also MIOpen
``ConvHipImplicitGemmBwdDataV4R1::CalculateGemmSize``), per spatial dim (H shown)::

    GcdH        = gcd(sH, dH)
    YTilde      = sH / GcdH                           filter phases
    HTilde      = Ho + ceil(dH*(Y-1) / sH)
    HBegin      = floor(max(0, pH - dH*(YTilde-1)) / sH)
    HEnd        = min(HTilde, ceil((pH + Hi - 1) / sH) + 1)
    YDotSlice   = ceil((Y - i_ytilde) / YTilde)       (NOT MIOpen V4R1's older formula, #575)

Sub-GEMM (i_ytilde, i_xtilde) in NHWC orientation::

    GemmM = N * HTildeSlice * WTildeSlice     row m -> (n, htl, wtl), htilde = HBegin + htl
    GemmN = cpg                               column c
    GemmK = YDotSlice * XDotSlice * kpg       k_gemm -> (ydot, xdot, k), k innermost
    y  = ydot*YTilde + i_ytilde               W row
    ho = htilde - ydot*(dH/GcdH)              dY row, valid iff 0 <= ho < Ho
    hi = sH*htilde + dH*i_ytilde - pH         dX row, written iff 0 <= hi < Hi

Phases write disjoint dX pixels; pixels with ``(hi+pH) % GcdH != 0`` or in a phase with
``YDotSlice == 0`` belong to no sub-GEMM and must be zero-filled.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from math import gcd

from .problem import ConvProblem


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

    def dot_slice(self, i: int) -> int:
        """YDotSlice for phase ``i``: ``ceil((Y - i) / YTilde)``, 0 when ``i >= Y``."""
        return max(0, _ceil_div(self.filt - i, self.tilde))

    def dx_offset(self, i: int) -> int:
        """dX coordinate of ``htl == 0`` in phase i: ``dH*i + sH*HBegin - pH``."""
        return self.dilation * i + self.stride * self.begin - self.pad


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
        return self.h.tilde * self.w.tilde


def decompose(problem: ConvProblem) -> Decomposition:
    """Split a 2-D backward-data problem into its tilde sub-GEMMs.

    Phases are enumerated ``i_ytilde`` outer, ``i_xtilde`` inner; phases with
    ``YDotSlice * XDotSlice == 0`` (or an empty tilde slice) are skipped.

    Raises:
        ValueError: for a 3-D problem (this solver is 2-D only).
    """
    if problem.is_3d:
        raise ValueError("tilde decomposition is implemented for 2-D problems only")
    p = problem
    h = axis_tilde(p.Hi, p.Ho, p.Y, p.pH, p.sH, p.dH)
    w = axis_tilde(p.Wi, p.Wo, p.X, p.pW, p.sW, p.dW)
    subs = []
    for iy in range(h.tilde):
        yds = h.dot_slice(iy)
        for ix in range(w.tilde):
            xds = w.dot_slice(ix)
            if yds * xds <= 0 or h.slice <= 0 or w.slice <= 0:
                continue
            subs.append(SubGemm(
                index=len(subs), i_ytilde=iy, i_xtilde=ix,
                gemm_m=p.N * h.slice * w.slice, gemm_n=p.cpg, gemm_k=yds * xds * p.kpg,
                h_slice=h.slice, w_slice=w.slice, h_begin=h.begin, w_begin=w.begin,
                y_dot_slice=yds, x_dot_slice=xds,
                dy_h_coeff=h.dy_coeff, dy_w_coeff=w.dy_coeff,
                y_stride=h.tilde, y_offset=iy, x_stride=w.tilde, x_offset=ix,
                dx_h_stride=h.stride, dx_h_offset=h.dx_offset(iy),
                dx_w_stride=w.stride, dx_w_offset=w.dx_offset(ix),
            ))
    return Decomposition(h, w, tuple(subs), _needs_zero_fill(p, subs))


def _needs_zero_fill(p: ConvProblem, subs) -> bool:
    """Whether some dX pixel is written by no sub-GEMM.

    Exact for any stride/dilation/pad combination, in O(sub-GEMMs x (Hi + Wi)): a pixel is
    covered iff its row is reached by a phase's row map and its column by the same phase's
    column map. The non-empty phases are a product set ``{i_ytilde: YDotSlice > 0} x
    {i_xtilde: XDotSlice > 0}`` and a phase's rows depend on ``i_ytilde`` alone (its columns
    on ``i_xtilde`` alone), so the covered pixels are (union of rows) x (union of columns).
    """
    rows, cols = set(), set()
    for s in subs:
        rows.update(r for r in range(s.dx_h_offset, s.dx_h_offset + s.dx_h_stride * s.h_slice, s.dx_h_stride)
                    if 0 <= r < p.Hi)
        cols.update(c for c in range(s.dx_w_offset, s.dx_w_offset + s.dx_w_stride * s.w_slice, s.dx_w_stride)
                    if 0 <= c < p.Wi)
    return len(rows) * len(cols) < p.Hi * p.Wi


cached_decompose = lru_cache(maxsize=256)(decompose)
"""Memoised :func:`decompose` (problems are frozen, and so is the result): search and
validation call it once per config."""
