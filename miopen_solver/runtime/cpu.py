"""CPU engine: runs a DgradSpec's tilde sub-GEMMs with numpy (the direct, patch and NCHW
pointwise schedules: their own decompositions, :mod:`miopen_solver.direct`,
:mod:`miopen_solver.patch`, :mod:`miopen_solver.nchw_pw`).

It executes the same decomposition the GPU kernels execute (``spec.sub_gemms``, formulas in
:mod:`miopen_solver.tilde`), so a CPU run checks the decomposition itself, not just the
convolution. Per group ``g`` and sub-GEMM ``s``::

    A[m, k_gemm]  = dY[n, ho, wo, g*kpg + k]     m -> (n, htl, wtl), k_gemm -> (ydot, xdot, k),
                                                 k innermost; ho = h_begin + htl - ydot*dy_h_coeff
                                                 (zero unless 0 <= ho < Ho; wo likewise)
    B[k_gemm, c]  = W[g*kpg + k, y, x, c]        y = ydot*y_stride + y_offset (x likewise)
    D = A @ B     (fp32 accumulation)
    dX[n, hi, wi, g*cpg + c] = D[m, c]           hi = htl*dx_h_stride + dx_h_offset, written
                                                 iff 0 <= hi < Hi (wi likewise)

dX is NaN-poisoned before every run; pixels no sub-GEMM covers are then zero-filled the way
the spec says (``zero_fill``: ``blocks`` writes zeros to uncovered pixels, ``memset`` zeroes
all of dX first). With ``split_k > 1`` GemmK is cut into ``split_k`` slices as the kernel
cuts it (:func:`split_k_pieces`: ``ceil(GemmK/(tile_k*split_k))*tile_k`` contiguous columns,
or the TMA schedule's k-tile ranges) and each slice's fp32 partial is added into dX in
the storage type, as the GPU's atomic adds do; with split-K through the workspace
(:mod:`miopen_solver.splitk`) the two GPU steps run as they are: each slice's fp32 partial
is stored into its slice of a NaN-poisoned fp32 workspace (covered pixels only, zeros from
slices with no k-tile), then :meth:`~miopen_solver.splitk.SplitKReduce.apply` sums the
slices in order, rounds once and stores dX (NHWC or NCHW).

Vectorisation: dY is converted to fp32 once and zero-padded so that every tap of every phase
reads a contiguous run of padded pixels (``ho`` and ``wo`` step by one within a phase). GemmK
is walked one tap (a kpg-deep block) at a time, ``D += A_tap @ B_tap``, where A_tap is a
strided view of the padded dY -- no gather copy; D is a cache-sized chunk of output pixels,
written to dX through strided slices. Python loops run over sub-GEMMs, taps and chunks only.
Only pixels that land in dX are computed (the GPU also computes halo rows and masks their
stores, which writes the same values).

TF32 math (a spec whose ``math`` is ``"tf32"``: :mod:`miopen_solver.tf32`): dY and W are
rounded to TF32 as ``cvt.rna.tf32.f32`` rounds them (:func:`~miopen_solver.tf32.round_tf32`)
before the same sub-GEMMs, which then multiply exactly (11-bit significands) and accumulate
in fp32 as the tensor-core atoms do; the padded dY copy is rounded in place, W's copy too
(the patch and NCHW pointwise GEMMs get rounded copies of their operands).

Layouts and shapes are those of :mod:`miopen_solver.runtime.base`; storage fp32, fp16 or
bf16 (``ml_dtypes.bfloat16``), output rounded to the storage type.
"""

from __future__ import annotations

import bisect
import time as _time
from collections.abc import Sequence

import numpy as np

from .. import layouts
from ..config import KernelSchedule
from ..problem import valid_range
from ..target import Target, get_target
from ..tf32 import round_tf32, round_tf32_
from ..transpose import writes_nchw_dx
from .base import BuildInfo, Engine, Timing, as_solution, check_count

CHUNK_BYTES = 1 << 20
"""Target size of one chunk's fp32 output block (all groups), bytes: small enough to stay in
cache while the taps accumulate into it."""


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _dx_slice(offset: int, stride: int, t0: int, t1: int) -> slice:
    """dX coordinates ``t*stride + offset`` for ``t`` in ``[t0, t1)`` (non-empty) as a slice."""
    return slice(offset + t0 * stride, offset + (t1 - 1) * stride + 1, stride)


class KPieces(Sequence):
    """The ``(tap, k0, k1)`` pieces of one k-slice, computed by index (no list: a filter of
    millions of taps costs no memory per tap). With ``tile_k`` (the TMA schedule's work
    units) the slice is the k-tiles ``j`` in ``range(lo, hi)``, k-tile ``j`` being channel
    chunk ``j // n_taps`` of tap ``j % n_taps``; without, the GemmK range ``[lo, hi)`` of a
    k-innermost GemmK = n_taps x kpg."""

    def __init__(self, n_taps: int, kpg: int, lo: int, hi: int, tile_k: int = 0):
        self.n_taps, self.kpg, self.lo, self.hi, self.tile_k = n_taps, kpg, lo, hi, tile_k
        self.t0 = lo if tile_k else lo // kpg                  # first k-tile, or first tap
        self.count = hi - lo if tile_k else max(0, -(-hi // kpg) - self.t0)

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self.count))]
        if not -self.count <= i < self.count:
            raise IndexError(i)
        j = self.t0 + (i % self.count)
        if self.tile_k:
            tk = self.tile_k
            return (j % self.n_taps, (j // self.n_taps) * tk, min(self.kpg, (j // self.n_taps + 1) * tk))
        return (j, max(self.lo, j * self.kpg) - j * self.kpg, min(self.hi, (j + 1) * self.kpg) - j * self.kpg)

    def live(self, taps: list):
        """The pieces whose tap is in ``taps`` (sorted tap indices), in this slice's order,
        visiting only those taps: work follows the taps that read dY, not the filter's size
        (a 5000 x 5000 filter over an 8 x 8 image has a few hundred)."""
        if self.tile_k:                 # k-tile j = chunk * n_taps + tap, chunk-major
            n = self.n_taps
            for chunk in range(self.lo // n, (self.hi - 1) // n + 1 if self.hi > self.lo else 0):
                for t in taps:
                    j = chunk * n + t
                    if self.lo <= j < self.hi:
                        yield self[j - self.lo]
            return
        for t in taps[bisect.bisect_left(taps, self.t0):]:
            if t >= self.t0 + self.count:
                return
            yield self[t - self.t0]


def split_k_pieces(spec, n_taps: int, kpg: int) -> list:
    """The pieces (:class:`KPieces`) of each k-slice of one sub-GEMM of ``n_taps`` taps, as
    the kernel cuts them: contiguous GemmK ranges (:func:`split_k_slices`, GemmK = taps x
    kpg, k innermost), or on the TMA schedule (:data:`~miopen_solver.spec.SPLIT_PERSISTENT`)
    its work units' k-tiles ``[z*kt/S, (z+1)*kt/S)`` of ``kt = ceil(kpg/tile_k) * taps``,
    k-tile j being channel chunk ``j // taps`` of tap ``j % taps`` (``dgrad.cu``'s K loop)."""
    from ..spec import SPLIT_PERSISTENT
    tk, split = spec.config.tile_k, spec.split_k
    if spec.config.schedule in SPLIT_PERSISTENT and split > 1:
        kt = -(-kpg // tk) * n_taps
        return [KPieces(n_taps, kpg, z * kt // split, (z + 1) * kt // split, tk) for z in range(split)]
    return [KPieces(n_taps, kpg, k0, k1) for k0, k1 in split_k_slices(n_taps * kpg, tk, split)]


def split_k_slices(gemm_k: int, tile_k: int, split_k: int) -> list:
    """GemmK ranges ``[(k0, k1), ...]`` of a split-K launch: slice j owns
    ``[j*q, (j+1)*q)`` clipped to GemmK, ``q = ceil(GemmK/(tile_k*split_k))*tile_k``;
    empty slices are dropped."""
    if split_k <= 1:
        return [(0, gemm_k)]
    q = _ceil_div(gemm_k, tile_k * split_k) * tile_k
    return [(j * q, min((j + 1) * q, gemm_k)) for j in range(split_k) if j * q < gemm_k]


def live_reads(p, s) -> tuple | None:
    """The live taps of sub-GEMM ``s`` by axis: ``({ydot: (ho_lo, ho_hi)}, {xdot: (wo_lo,
    wo_hi)})`` (inclusive dY ranges), tap ``(yd, xd)`` being live when both are there -- it
    reads some dY pixel inside the tensor for a dX pixel inside dX; every other tap reads
    only dY's zero padding (a dilation or pad far past the image) and adds nothing. None
    when the sub-GEMM has no dX pixel. O(YDotSlice + XDotSlice): nothing per tap."""
    h0, h1 = valid_range(s.dx_h_offset, s.dx_h_stride, s.h_slice, p.Hi)
    w0, w1 = valid_range(s.dx_w_offset, s.dx_w_stride, s.w_slice, p.Wi)
    if h1 <= h0 or w1 <= w0:
        return None
    return (_live_reads(s.h_begin, h0, h1, s.y_dot_slice, s.dy_h_coeff, p.Ho),
            _live_reads(s.w_begin, w0, w1, s.x_dot_slice, s.dy_w_coeff, p.Wo))


def read_bounds(p, subs) -> tuple:
    """``(ho_lo, ho_hi, wo_lo, wo_hi)``: the dY rows and columns (inclusive) that the live taps
    of sub-GEMMs ``subs`` read, widened to cover dY itself -- the padding the engine adds."""
    ho_lo = wo_lo = 0
    ho_hi, wo_hi = p.Ho - 1, p.Wo - 1
    for s in subs:
        reads = live_reads(p, s)
        if reads is None or not reads[0] or not reads[1]:
            continue
        rows, cols = reads
        ho_lo, ho_hi = min([ho_lo] + [lo for lo, _ in rows.values()]), max([ho_hi] + [hi for _, hi in rows.values()])
        wo_lo, wo_hi = min([wo_lo] + [lo for lo, _ in cols.values()]), max([wo_hi] + [hi for _, hi in cols.values()])
    return ho_lo, ho_hi, wo_lo, wo_hi


def _live_reads(begin: int, t0: int, t1: int, dots: int, coeff: int, size: int) -> dict:
    """``{dot: (lo, hi)}``: the dY index range ``begin + t - dot*coeff`` for ``t`` in
    ``[t0, t1)``, for the ``dot < dots`` whose range meets ``[0, size)``."""
    out = {}
    for dot in range(dots):
        lo, hi = begin + t0 - dot * coeff, begin + t1 - 1 - dot * coeff
        if hi >= 0 and lo < size:
            out[dot] = (lo, hi)
    return out


def coverage_mask(problem, sub_gemms, r0: int = 0, r1: int | None = None) -> np.ndarray:
    """``(r1 - r0, Wi)`` bool: True where some sub-GEMM writes the pixel, for dX rows
    ``[r0, r1)`` (all rows by default)."""
    r1 = problem.Hi if r1 is None else r1
    mask = np.zeros((r1 - r0, problem.Wi), dtype=bool)
    for s in sub_gemms:
        h0, h1 = valid_range(s.dx_h_offset, s.dx_h_stride, s.h_slice, problem.Hi)
        w0, w1 = valid_range(s.dx_w_offset, s.dx_w_stride, s.w_slice, problem.Wi)
        # the phase's rows t in [h0, h1) whose dX row offset + t*stride is in [r0, r1)
        h0 = max(h0, _ceil_div(r0 - s.dx_h_offset, s.dx_h_stride))
        h1 = min(h1, _ceil_div(r1 - s.dx_h_offset, s.dx_h_stride))
        if h1 > h0 and w1 > w0:
            mask[_dx_slice(s.dx_h_offset - r0, s.dx_h_stride, h0, h1),
                 _dx_slice(s.dx_w_offset, s.dx_w_stride, w0, w1)] = True
    return mask


def zero_fill_rows(problem) -> int:
    """dX rows one step of the zero fill masks (:func:`zero_fill_uncovered`): a mask of at
    most :data:`CHUNK_BYTES` bools, one row at least."""
    return max(1, min(problem.Hi, CHUNK_BYTES // max(1, problem.Wi)))


def zero_fill_bytes(problem) -> int:
    """Host bytes the zero fill allocates (one step's mask)."""
    return zero_fill_rows(problem) * problem.Wi


def zero_fill_uncovered(problem, sub_gemms, dx: np.ndarray) -> None:
    """Zeros into the pixels of the NHWC ``dx`` that no sub-GEMM writes, a band of
    :func:`zero_fill_rows` rows at a time: a mask of the band and a masked store
    (``np.copyto(where=)``) -- no index arrays, whose 16 bytes per uncovered pixel were 8x
    an fp16 dX of one channel."""
    rows = zero_fill_rows(problem)
    for r0 in range(0, problem.Hi, rows):
        r1 = min(problem.Hi, r0 + rows)
        mask = coverage_mask(problem, sub_gemms, r0, r1)
        np.logical_not(mask, out=mask)
        np.copyto(dx[:, r0:r1], 0, where=mask[None, :, :, None])


class CpuEngine(Engine):
    """numpy implementation of :class:`~miopen_solver.runtime.base.Engine` (``name == "cpu"``):
    no graphs, no GPU reference."""

    name = "cpu"

    def __init__(self, target: Target | None = None):
        self._target = target or get_target("cpu")

    @property
    def target(self) -> Target:
        return self._target

    # ------------------------------------------------------------------ Engine API
    def build(self, work) -> BuildInfo:
        """Nothing to compile: the numpy engine runs the spec's sub-GEMMs directly."""
        return BuildInfo()

    def run(self, work, dy: np.ndarray, w: np.ndarray) -> np.ndarray:
        """dX for the solution (or spec) ``work`` from dY and W (see module docstring); a
        new array in the problem's ``in_layout`` and storage type. A batch split along N
        (:attr:`Solution.chunks <miopen_solver.solver.Solution.chunks>`) is computed one
        chunk at a time with the chunk's spec, each into its own images of dX, as the GPU
        engines launch it. A kernel that stores dX NCHW (``spec.nchw_dx``) is run into an
        NHWC array converted on the host; otherwise the solution's dX transform runs.

        Raises:
            ValueError: dY/W shape or dtype does not match the problem, or the problem is 3-D.
        """
        sol = as_solution(work)
        spec, p = sol.spec, sol.problem
        if p.is_3d:
            raise ValueError("the CPU engine runs 2-D problems only")
        layouts.check_inputs(p, dy, w)
        native = {"dY": dy.reshape(p.N, p.Ho, p.Wo, p.K), "W": w.reshape(p.K, p.Y, p.X, p.cpg)}  # NHWC bytes
        for t in sol.transforms:          # the layout transforms, as the device runs them
            if t.before:
                shape = getattr(t, "dst_shape", native[t.tensor].shape)   # a W' pack has its own
                native[t.tensor] = t.apply({"dY": dy, "W": w}[t.tensor]).reshape(shape)
        red = sol.reduce
        if red is not None:               # split-K through the workspace: partials, then the reduction
            ws = np.full((red.split_k, red.slice_elems), np.nan, dtype=np.float32)      # poison, reused per chunk
            shape = (p.N, p.C, p.Hi, p.Wi) if red.layout == "NCHW" else (p.N, p.Hi, p.Wi, p.C)
            out = np.full(shape, np.nan, dtype=layouts.storage_dtype(p.dtype))
            for n0, n in sol.chunks:
                self.run_partials(spec, native["dY"][n0:n0 + n], native["W"], ws)
                out[n0:n0 + n] = red.apply(ws)
            return out.reshape(layouts.dx_shape(p))
        dx = np.full((p.N, p.Hi, p.Wi, p.C), np.nan, dtype=layouts.storage_dtype(p.dtype))   # poison
        for n0, n in sol.chunks:
            self._run_launch(spec, native["dY"][n0:n0 + n], native["W"], dx[n0:n0 + n])
        for t in sol.transforms:
            if not t.before:
                dx = t.apply(dx)
        if writes_nchw_dx(spec):          # the kernel's own NCHW stores
            dx = np.ascontiguousarray(dx.transpose(0, 3, 1, 2))
        return dx.reshape(layouts.dx_shape(p))

    def run_partials(self, spec, dy: np.ndarray, w: np.ndarray, ws: np.ndarray) -> None:
        """The dgrad kernel of a split-K launch through the workspace (``spec.workspace_reduce``):
        NHWC ``dy`` (the launch's images) and KYXC ``w``; split z's fp32 partial sums into
        slice z of ``ws`` (``(split_k, slice_elems)`` float32, each slice's first elements the
        launch's NHWC dX), every pixel some sub-GEMM covers written once per slice, the others
        left as they are (the GPU kernel does not write them)."""
        p = spec.problem
        view = ws[:, :p.dx_elems].reshape(spec.split_k, p.N, p.Hi, p.Wi, p.C)
        dy_pad, pad_h, pad_w, w_kyxc = self._gemm_operands(spec, dy, w)
        for s in spec.sub_gemms:
            self._run_sub_gemm(p, spec, s, dy_pad, pad_h, pad_w, w_kyxc, None, ws=view)

    def _gemm_operands(self, spec, dy: np.ndarray, w: np.ndarray) -> tuple:
        """``(dy_pad, pad_h, pad_w, w_kyxc)``: the GEMM path's fp32 operands (the padded dY of
        :meth:`_padded_dy`, a copy of W), rounded to TF32 in place for TF32 math."""
        dy_pad, pad_h, pad_w = self._padded_dy(spec.problem, dy, spec.sub_gemms)
        w_kyxc = np.array(w, dtype=np.float32, order="C")          # a copy
        if spec.math == "tf32":
            round_tf32_(dy_pad)
            round_tf32_(w_kyxc)
        return dy_pad, pad_h, pad_w, w_kyxc

    def _run_launch(self, spec, dy: np.ndarray, w: np.ndarray, dx: np.ndarray) -> None:
        """One launch of ``spec`` (its problem's N images): NHWC ``dy``, KYXC ``w`` into the
        NHWC view ``dx`` (poisoned), as a kernel writes its buffer; for the NCHW pointwise
        schedules and the NCHW TMA one the same buffers hold NCHW dY, W^T and NCHW dX
        (:func:`~miopen_solver.nchw_pw.nchw_pw_run`, :func:`~miopen_solver.nchw_tma.nchw_tma_run`)."""
        p = spec.problem
        tf32 = spec.math == "tf32"                     # operands rounded to TF32 first
        if spec.schedule is KernelSchedule.DIRECT:     # the direct schedule's own phases and taps
            from ..direct import direct_nhwc
            dx[...] = direct_nhwc(p, dy, w)
            return
        if spec.schedule.subpixel:                     # the virtual stride-1 GEMM, then the phase scatter
            from ..subpixel import scatter, virtual_problem
            v = virtual_problem(p)
            dxv = np.full((v.N, v.Hi, v.Wi, v.C), np.nan, dtype=dx.dtype)
            self._run_launch(spec.gemm, dy, w, dxv)
            if spec.zero_fill == "memset":
                dx[...] = 0
            scatter(p, dxv, dx)
            return
        if spec.schedule is KernelSchedule.DIRECT_PLANE:  # NCHW planes in and out, W in its own order
            from ..direct_plane import plane_run
            plane_run(spec, dy, w, dx)
            return
        if spec.schedule is KernelSchedule.DIRECT_NCHW:   # the same, dY and dX bytes in their own order
            from ..direct import direct_native_run
            direct_native_run(spec, dy, w, dx)
            return
        if spec.schedule.patch:                        # one GEMM scattered into dX patches
            from ..patch import patch_nhwc
            patch_nhwc(spec, round_tf32(dy) if tf32 else dy, round_tf32(w) if tf32 else w, dx)
            return
        if spec.schedule.nchw_pointwise:               # NCHW bytes in and out, W^T for W
            from ..nchw_pw import nchw_pw_run
            nchw_pw_run(spec, round_tf32(dy) if tf32 else dy, round_tf32(w) if tf32 else w, dx)
            return
        if spec.schedule is KernelSchedule.NCHW_TMA:   # NCHW bytes in and out, W^T for W, per tap
            from ..nchw_tma import nchw_tma_run
            nchw_tma_run(spec, dy, w, dx)
            return
        if spec.schedule.group_pack:                   # the packed problem with a block-diagonal W
            from ..group_pack import packed_w
            self._run_launch(spec.gemm, dy, packed_w(p, spec.pack, w), dx)
            return
        if spec.zero_fill == "memset":
            dx[...] = 0
        subs = spec.sub_gemms
        if subs:
            dy_pad, pad_h, pad_w, w_kyxc = self._gemm_operands(spec, dy, w)
            for s in subs:
                self._run_sub_gemm(p, spec, s, dy_pad, pad_h, pad_w, w_kyxc, dx)
        if spec.zero_fill == "blocks":
            zero_fill_uncovered(p, subs, dx)

    def time(self, work, dy: np.ndarray, w: np.ndarray, iters: int, warmup: int = 1) -> Timing:
        """Wall-clock time of ``iters`` runs (after ``warmup`` untimed ones), ms per run."""
        sol = as_solution(work)
        iters, warmup = check_count("iters", iters, 1), check_count("warmup", warmup, 0)
        for _ in range(warmup):
            self.run(sol, dy, w)
        times = []
        for _ in range(iters):
            t0 = _time.perf_counter()
            self.run(sol, dy, w)
            times.append((_time.perf_counter() - t0) * 1e3)
        return Timing(times_ms=times, method="wall")

    # ------------------------------------------------------------------ internals
    @staticmethod
    def _padded_dy(p, dy, subs):
        """dY (NHWC) as fp32 ``(N, Ho + pads, Wo + pads, K)`` with zero rows/columns wide enough that
        every live tap slice (:func:`live_reads`) of every sub-GEMM is in bounds; returns it
        with the pads. A live tap reads some dY row inside ``[0, Ho)`` over the sub-GEMM's
        ``nh`` dX rows, so a pad is below ``nh <= Hi`` (likewise for columns): memory is
        bounded by the tensors, not by how large a dilation or pad is."""
        ho_lo, ho_hi, wo_lo, wo_hi = read_bounds(p, subs)
        pad_h = (-ho_lo, ho_hi - (p.Ho - 1))
        pad_w = (-wo_lo, wo_hi - (p.Wo - 1))
        out = np.zeros((p.N, p.Ho + sum(pad_h), p.Wo + sum(pad_w), p.K), dtype=np.float32)
        out[:, pad_h[0]:pad_h[0] + p.Ho, pad_w[0]:pad_w[0] + p.Wo] = dy
        return out, pad_h, pad_w

    @staticmethod
    def _run_sub_gemm(p, spec, s, dy_pad, pad_h, pad_w, w_kyxc, dx, ws=None):
        """One sub-GEMM, all groups. GemmK is walked tap by tap (each tap a kpg-deep block of
        the k-innermost GemmK, as the GPU's K loop walks it): ``D += A_tap @ B_tap``. With
        ``ws`` (``(split_k, N, Hi, Wi, C)`` float32) split z's partial goes to ``ws[z]``
        instead of into ``dx``.

        A_tap needs no gather: in the padded NHWK dY, the rows ``ho`` of one tap are
        consecutive within a phase, so the pixels ``(n, htl, wtl)`` of a chunk read the flat
        pixel sequence ``n*Hp*Wp + (ho0 + htl)*Wp + wo0 + wtl`` -- one strided 2-D view
        (``Wp - nw`` junk columns per row are computed and dropped)."""
        G, kpg, cpg = p.G, p.kpg, p.cpg
        h0, h1 = valid_range(s.dx_h_offset, s.dx_h_stride, s.h_slice, p.Hi)
        w0, w1 = valid_range(s.dx_w_offset, s.dx_w_stride, s.w_slice, p.Wi)
        if h1 <= h0 or w1 <= w0:
            return
        # Only rows htl in [h0, h1) and columns wtl in [w0, w1) land in dX; the GPU computes
        # the halo rows too and masks their stores, which changes nothing written.
        live_rows, live_cols = live_reads(p, s)            # the other taps read only zeros
        cols = _dx_slice(s.dx_w_offset, s.dx_w_stride, w0, w1)
        if not live_rows or not live_cols:  # every tap reads padding (dY may be narrower than the rows: no view)
            if ws is not None:                             # every split stores its zeros
                ws[:, :, _dx_slice(s.dx_h_offset, s.dx_h_stride, h0, h1), cols] = 0
            elif spec.split_k == 1:                        # split-K adds into a zeroed dX
                dx[:, _dx_slice(s.dx_h_offset, s.dx_h_stride, h0, h1), cols] = 0
            return
        nh, nw = h1 - h0, w1 - w0
        _, hp, wp, _ = dy_pad.shape
        img = hp * wp
        flat = dy_pad.reshape(p.N * img, G, kpg)
        w_g = w_kyxc.reshape(G, kpg, p.Y, p.X, cpg)
        # GemmK split into split_k slices; each slice as (tap, k0, k1) pieces, tap t being
        # (t // XDotSlice, t % XDotSlice); nothing is built per tap (a filter may have millions)
        pieces = split_k_pieces(spec, s.y_dot_slice * s.x_dot_slice, kpg)
        live = sorted(yd * s.x_dot_slice + xd for yd in live_rows for xd in live_cols)
        row_bytes = G * wp * cpg * 4                       # one output row (all groups), fp32
        rows_per = max(1, CHUNK_BYTES // row_bytes)
        if rows_per >= hp:                                 # whole images per chunk
            nb, rows_per = max(1, min(p.N, rows_per // hp)), nh
        else:
            nb = 1
        st = dx.dtype if dx is not None else np.float32
        for n0 in range(0, p.N, nb):
            n1 = min(p.N, n0 + nb)
            for r0 in range(h0, h1, rows_per):
                r1 = min(h1, r0 + rows_per)
                nr = r1 - r0
                length = (n1 - n0 - 1) * img + (nr - 1) * wp + nw      # flat pixels touched
                alloc = (n1 - n0) * img if n1 - n0 > 1 else nr * wp
                rows = _dx_slice(s.dx_h_offset, s.dx_h_stride, r0, r1)
                if ws is not None:                         # splits with no k-tile store zeros
                    ws[len(pieces):, n0:n1, rows, cols] = 0
                for z, piece in enumerate(pieces):
                    d = np.empty((G, alloc, cpg), dtype=np.float32)   # rows >= length: unused
                    tmp = np.empty((G, length, cpg), dtype=np.float32)
                    first = True
                    for t, ka, kb in piece.live(live):
                        yd, xd = divmod(t, s.x_dot_slice)
                        b_t = w_g[:, ka:kb, yd * s.y_stride + s.y_offset, xd * s.x_stride + s.x_offset, :]
                        start = (n0 * img + (s.h_begin + r0 - yd * s.dy_h_coeff + pad_h[0]) * wp
                                 + s.w_begin + w0 - xd * s.dy_w_coeff + pad_w[0])
                        a_t = flat[start:start + length, :, ka:kb]           # (L, G, k)
                        out = d[:, :length] if first else tmp
                        if G == 1:
                            np.matmul(a_t[:, 0], b_t[0], out=out[0])
                        else:
                            np.matmul(a_t.transpose(1, 0, 2), b_t, out=out)
                        if not first:
                            d[:, :length] += tmp
                        first = False
                    if first:                                         # no live tap: zeros
                        d[:, :length] = 0
                    if n1 - n0 > 1:
                        d = d.reshape(G, n1 - n0, hp, wp, cpg)[:, :, :nr, :nw]
                    else:
                        d = d.reshape(G, 1, nr, wp, cpg)[:, :, :, :nw]
                    d = np.moveaxis(d, 0, 3).reshape(n1 - n0, nr, nw, p.C)
                    if ws is not None:     # this split's partial sums into its slice
                        ws[z, n0:n1, rows, cols] = d
                        continue
                    if spec.split_k > 1:   # accumulate in the storage type, like atomic adds
                        d = dx[n0:n1, rows, cols].astype(np.float32) + d
                    dx[n0:n1, rows, cols] = d.astype(st)
