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

Phases with taps, directly: ``YDotSlice(i) = ceil((Y - i)/YTilde) > 0`` iff ``i < Y``, and
the shared HTildeSlice does not depend on ``i``. So the phases with taps of an axis are
``range(min(YTilde, Y))`` when HTildeSlice > 0 (none otherwise): with a stride far above the
filter (``-u 100000 -y 3``: YTilde = 100000) only the first Y phases have taps.

Sub-GEMMs are only the pairs of a row phase and a column phase that each write at least one
dX row (:meth:`AxisTilde.writing_phases`): a phase whose rows all fall outside dX (a pad or
dilation far past the image) has no sub-GEMM, so GemmM sums to at most ``N*Hi*Wi`` whatever
the pads, strides and dilations. Phase ``i`` writes iff its least row >= 0 over all
``htilde``, ``(dH*i - pH) mod sH``, is < Hi and ``i`` lies in the span of phases whose rows
over ``[HBegin, HEnd)`` reach dX (:meth:`AxisTilde._writing_span`); the writing phases are
counted in O(log) with a floor sum, whatever the number of phases
(:meth:`AxisTilde.writing_count`), and listed in O(count * log^2). A problem whose dX no tap reaches (no phase of one axis
writes) runs one placeholder sub-GEMM of phase (0, 0) over one row and one column
(GemmM = N), which writes nothing; the zero fill writes all of dX.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from math import gcd

from .errors import PerfConfigError
from .problem import ConvProblem, valid_range


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _floor_sum(n: int, m: int, a: int, b: int) -> int:
    """``sum(floor((a*i + b) / m) for i in range(n))`` in O(log(m) + log(a)) (the Euclid-like
    reduction of AtCoder Library's ``floor_sum``); ``n >= 0``, ``m >= 1``, any ``a``, ``b``."""
    ans = (n * (n - 1) // 2) * (a // m) + n * (b // m)
    a, b = a % m, b % m
    while True:
        if a >= m:
            ans += (n * (n - 1) // 2) * (a // m)
            a %= m
        if b >= m:
            ans += n * (b // m)
            b %= m
        y_max = a * n + b
        if y_max < m:
            return ans
        n, b = y_max // m, y_max % m
        m, a = a, m


_DIRECT_SPAN = 16
"""Phases :meth:`AxisTilde.writing_phases` tests one by one (:meth:`AxisTilde.rows_written`)
where some but not all of them write; it bisects longer spans."""


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
        its first row. O(1). ``slice`` is :meth:`rows_written`: 0, with the shared begin, for a
        phase that writes no row (such a phase has no sub-GEMM)."""
        t0, t1 = valid_range(self.dx_offset(i), self.stride, self.slice, self.size_in)
        if t1 == t0:
            return self.begin, 0, self.dx_offset(i)
        return self.begin + t0, t1 - t0, self.dx_offset(i) + self.stride * t0

    def rows_written(self, i: int) -> int:
        """How many dX rows (``0 <= hi < Hi``) phase ``i`` writes (O(1))."""
        t0, t1 = valid_range(self.dx_offset(i), self.stride, self.slice, self.size_in)
        return t1 - t0

    def _writing_span(self) -> tuple:
        """``(lo, hi)``: the phases of :meth:`phases` outside ``[lo, hi)`` write nothing (dX rows
        grow with ``i``: below ``lo`` even the row of ``htilde = HEnd - 1`` is < 0, from ``hi``
        on even the row of ``htilde = HBegin`` is >= Hi); inside, phase ``i`` writes iff
        ``(dH*i - pH) mod sH < Hi`` (:meth:`_count_writing`). O(1)."""
        n = len(self.phases())
        if n == 0:
            return 0, 0
        s, d, p = self.stride, self.dilation, self.pad
        lo = max(0, _ceil_div(p - (self.end - 1) * s, d))       # a row of htilde < HEnd is >= 0
        hi = min(n, (self.size_in - 1 + p - self.begin * s) // d + 1)   # a row of htilde >= HBegin is < Hi
        return lo, max(lo, hi)

    def _count_writing(self, lo: int, hi: int) -> int:
        """Phases in ``[lo, hi)`` (within :meth:`_writing_span`) that write a row: those with
        ``(dH*i - pH) mod sH < Hi``, as ``floor(x/sH) - floor((x - Hi)/sH)`` summed (1 iff
        ``x mod sH < Hi``, for ``Hi <= sH``) with :func:`_floor_sum`. O(log)."""
        n, s = hi - lo, self.stride
        if n <= 0:
            return 0
        if self.size_in >= s:
            return n
        b = self.dilation * lo - self.pad
        return _floor_sum(n, s, self.dilation, b) - _floor_sum(n, s, self.dilation, b - self.size_in)

    def writing_count(self) -> int:
        """How many phases write at least one dX row (``len(writing_phases())``), in O(log)
        however many phases there are (at most ``min(Hi, len(phases()))``: phases write
        disjoint rows)."""
        return self._count_writing(*self._writing_span())

    def writing_phases(self) -> tuple:
        """The phases ``i`` of :meth:`phases` that write at least one dX row, ascending: the
        row (or column) phases of the sub-GEMMs. O(count * log^2): bisection on
        :meth:`_count_writing` takes a span of phases that all write, or none, whole, so a
        stride or dilation's magnitude costs nothing; call it where the count is bounded
        (:data:`MAX_SUB_GEMMS`)."""
        out = []
        todo = [self._writing_span()]
        while todo:
            lo, hi = todo.pop()
            n = self._count_writing(lo, hi)
            if n == hi - lo:
                out += range(lo, hi)
            elif hi - lo <= _DIRECT_SPAN:
                out += [i for i in range(lo, hi) if self.rows_written(i) > 0]
            elif n > 0:
                mid = (lo + hi) // 2
                todo += [(mid, hi), (lo, mid)]              # lo half popped first: ascending
        return tuple(out)

    def covers_all(self, phases) -> bool:
        """Whether the phases ``phases`` (those :meth:`writing_phases` lists, bounded by the
        kernel's table) together write every dX row. Phases write disjoint rows (``dH*i mod sH``
        differs for every ``i < YTilde``), so counting them is exact: O(phases), not O(Hi)."""
        return sum(self.rows_written(i) for i in phases) == self.size_in


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

    index: int          # position in the list of sub-GEMMs
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
    """The sub-GEMMs of a problem (one per pair of writing phases, or the one placeholder:
    see :func:`sub_gemm_phases`) plus the zero-fill verdict."""

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


def sub_gemm_phases(h: AxisTilde, w: AxisTilde) -> tuple | None:
    """``(row phases, column phases)``: the sub-GEMMs are their pairs, ``i_ytilde`` outer.

    Normally the phases that write at least one dX row (:meth:`AxisTilde.writing_phases`).
    Where no pair writes (no phase of one axis writes: dX no tap reaches), ``((0,), (0,))``:
    the one placeholder sub-GEMM a launch runs, over one row and one column (GemmM = N),
    writing nothing (:func:`decompose`). ``((), ())`` when an axis has no phase with taps and
    rows. None when the pairs are more than :data:`MAX_SUB_GEMMS` (:func:`too_many_sub_gemms`
    says so); the lists are then not built. O(log) counting, then O(pairs * log^2)."""
    if not h.phases() or not w.phases():
        return (), ()
    nh, nw = h.writing_count(), w.writing_count()
    if nh == 0 or nw == 0:
        return (0,), (0,)
    if nh * nw > MAX_SUB_GEMMS:
        return None
    return h.writing_phases(), w.writing_phases()


def placeholder(h: AxisTilde, w: AxisTilde) -> bool:
    """Whether the sub-GEMMs are the one placeholder of a problem whose dX no tap reaches
    (:func:`sub_gemm_phases`). O(log)."""
    return bool(h.phases()) and bool(w.phases()) and (h.writing_count() == 0 or w.writing_count() == 0)


def _axis_rows(a: AxisTilde, phases: tuple, stand_in: bool) -> list:
    """``[(i, YDotSlice, begin, slice, dx_offset)]`` of the phases ``phases`` of axis ``a``: each
    phase's own rows (:meth:`AxisTilde.phase_slice`), or with ``stand_in`` the placeholder's
    one row, the shared slice's first (its dX row lies outside dX on one axis at least)."""
    if stand_in:
        return [(i, a.dot_slice(i), a.begin, 1, a.dx_offset(i)) for i in phases]
    return [(i, a.dot_slice(i)) + a.phase_slice(i) for i in phases]


def rows_per_image(h: AxisTilde, w: AxisTilde) -> tuple:
    """``(rows, cols)``: the most HTildeSlice and WTildeSlice of any sub-GEMM, so that
    ``N * rows * cols`` bounds every sub-GEMM's GemmM: the largest rows actually written by a
    writing phase (at most ``Hi``; ``(1, 1)`` for the placeholder). Where the pairs are more
    than :data:`MAX_SUB_GEMMS` (not applicable), a bound instead of the phases' maximum:
    ``min(HTildeSlice, ceil(Hi/sH))``, as a phase's rows are ``sH`` apart. O(log) counting,
    then O(pairs * log^2)."""
    phases = sub_gemm_phases(h, w)
    if phases is None:
        return tuple(min(a.slice, _ceil_div(a.size_in, a.stride)) for a in (h, w))
    if placeholder(h, w):
        return 1, 1
    return tuple(max((a.rows_written(i) for i in ph), default=0) for a, ph in zip((h, w), phases))


def too_many_sub_gemms(h: AxisTilde, w: AxisTilde) -> str | None:
    """Why the axes ``h``, ``w`` make more sub-GEMMs (pairs of writing phases) than a kernel
    takes, or None. O(log)."""
    nh, nw = h.writing_count(), w.writing_count()
    if nh * nw <= MAX_SUB_GEMMS:
        return None
    head = (f"{nh} x {nw} = {nh * nw} tilde sub-GEMMs (filter -y/-x {h.filt}x{w.filt}, stride -u/-v "
            f"{h.stride}x{w.stride}, dilation -l/-j {h.dilation}x{w.dilation}); a kernel takes at most "
            f"{MAX_SUB_GEMMS} (one 76-byte record each in 64 KiB of constant memory); allowed: ")
    if all(a.stride == a.filt and a.pad == 0 and a.dilation == 1 for a in (h, w)):   # a patch filter already
        return head + ("a schedule with no sub-GEMM table: the patch GEMM's (5, 6, 9, 10, 21) or, with dY and "
                       "dX NCHW, the NCHW pointwise ones (7, 8, 18)")
    return head + (f"at most {MAX_SUB_GEMMS}, or a stride equal to the filter with no padding and dilation 1 "
                   f"(-p 0 -q 0: the patch GEMM, which has no sub-GEMM table)")


def decompose(problem: ConvProblem) -> Decomposition:
    """Split a 2-D backward-data problem into its tilde sub-GEMMs.

    Phases are enumerated ``i_ytilde`` outer, ``i_xtilde`` inner; only the pairs of phases
    that write dX rows are visited (:func:`sub_gemm_phases`), each over its own rows
    (:meth:`AxisTilde.phase_slice`), so the work is O(sub-GEMMs), never O(YTilde * XTilde),
    and GemmM sums to at most ``N*Hi*Wi``. A problem whose dX no tap reaches gets the one
    placeholder sub-GEMM (GemmM = N, writing nothing) and ``needs_zero_fill``.

    Raises:
        ValueError: for a 3-D problem (this solver is 2-D only).
        PerfConfigError: more than :data:`MAX_SUB_GEMMS` sub-GEMMs, so no config can run the
            problem (:func:`too_many_sub_gemms` says so in O(log); applicability reports it as
            ``TOO_MANY_SUB_GEMMS`` before any config is asked for).
    """
    if problem.is_3d:
        raise ValueError("tilde decomposition is implemented for 2-D problems only")
    p = problem
    h, w = axes(p)
    phases = sub_gemm_phases(h, w)
    if phases is None:
        raise PerfConfigError(too_many_sub_gemms(h, w))
    stand_in = placeholder(h, w)
    rows, cols = _axis_rows(h, phases[0], stand_in), _axis_rows(w, phases[1], stand_in)
    subs = []
    for iy, yds, hb, hs, hoff in rows:
        for ix, xds, wb, ws, woff in cols:
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
    # iff its row is written by a writing row phase and its column by a writing column phase
    # (every pair of them is a sub-GEMM), so the covered pixels are (rows) x (columns); the
    # placeholder covers none.
    covered = not stand_in and h.covers_all(phases[0]) and w.covers_all(phases[1])
    return Decomposition(h, w, tuple(subs), not covered)


cached_decompose = lru_cache(maxsize=256)(decompose)
"""Memoised :func:`decompose` (problems are frozen, and so is the result): search and
validation call it once per config."""
