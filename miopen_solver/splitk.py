"""Split-K through an fp32 workspace, summed by a separate reduction kernel (no atomics).

A split-K launch (``split_k > 1``) cuts every sub-GEMM's GemmK into ``split_k`` slices of
``ceil(k_tiles / split_k)`` k-tiles; grid z = split z multiplies one slice. The TMA schedule
instead walks ``tiles x split_k`` work units in its persistent grid, unit ``z*tiles + t``
multiplying k-tiles ``[z*kt/split_k, (z+1)*kt/split_k)`` of tile t (``dgrad.cu``'s ``tmask``
sections); slice z of the workspace is its units' z, as grid z is the others'. How the slices'
partial sums meet is :func:`~miopen_solver.spec.split_k_reduce_mode`'s decision (the config's
``split_k_reduce`` field, :data:`~miopen_solver.config.SPLIT_K_REDUCE`):

* ``atomic``: every split adds its fp32 partials into dX (fp32 scalars, fp16/bf16 packed
  pairs: cpg even and the target's packed atomic), dX zeroed before the launch. The order of
  the adds varies from run to run.
* ``workspace`` (kernel names tagged ``_skws``): split z stores its partials with plain fp32
  stores into **slice z** of the workspace, then :class:`SplitKReduce` launches the reduction
  kernel (``kernels/splitk_reduce.cu``), which sums slice 0, + slice 1, ... in that fixed
  order in fp32, rounds once as the GEMM epilogue does and stores dX. No atomics, no memset:
  the same bits on every run, any cpg, any target.

Slice layout: each slice is the launch's dX (one split-N chunk, N images) in NHWC order, fp32,
``N*Hi*Wi*C`` elements rounded up to a 256-byte multiple
(:attr:`~miopen_solver.spec.DgradSpec.workspace_slice_elems`). NHWC is how the GEMM's
accumulators lie (a lane holds adjacent channels; a warp's stores fill whole 32-byte sectors),
whatever dX's layout: the reduction stores an NCHW dX itself, reading the slices along c and
writing dX along the pixels through a shared-memory tile, so split-K with an NCHW dX needs
neither the Hi*Wi parity rule of the atomic NCHW epilogue nor a dX transform.

Zero fill: pixels no sub-GEMM covers (strided problems whose filter misses some rows or
columns: odd rows and columns of a 1x1 stride-2 layer, 3/4 of dX) are never written to the
workspace; the reduction tests each pixel with the GEMM kernel's own zero-fill rule
(``dg_axis_covered``, its terms passed as arguments) and stores zeros there without reading
a slice. Zero-fill blocks writing zeros into every slice would cost ``2 * split_k * 4`` bytes
per uncovered element (write, then read) and a second zero-fill path in the GEMM kernel;
every element the reduction reads is written exactly once by exactly one split.

Workspace: the layout transforms' copies first (:func:`~miopen_solver.transpose.workspace_bytes`),
then ``split_k`` slices at :attr:`SplitKReduce.offset` (256-byte aligned). A split-N run
reuses the slices for every launch: the GEMM kernel of chunk i writes them and the reduction
of chunk i reads them before chunk i + 1's kernel starts (one stream).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import gcd

REDUCE_THREADS = 256
"""Threads of a reduction block: 256 along x (NHWC), or 32 x 8 (NCHW, a 32 x 32 tile)."""
MAX_REDUCE_BLOCKS = 65535
"""Blocks along grid x (and images along grid y for NCHW); the kernel strides past them."""
NCHW_TILE = 32
"""Pixels x channels of one NCHW reduction block's tile."""


@dataclass(frozen=True)
class SplitKReduce:
    """The reduction launch of a split-K solution through the workspace (module docstring):
    one per split-N chunk, after that chunk's GEMM kernel.

    Attributes:
        dtype: dX's storage type (``fp32``, ``fp16``, ``bf16``).
        layout: dX's memory order, ``"NHWC"`` or ``"NCHW"`` (the slices are always NHWC).
        split_k: slices to sum.
        images, hi, wi, c: one launch's dX sizes (N of a split-N chunk, Hi, Wi, C).
        slice_elems: fp32 elements from one slice to the next (a multiple of 64).
        offset: byte offset of slice 0 in the solution's workspace.
        cover: ``()`` when every dX pixel is covered by a sub-GEMM, else the zero-fill terms
            ``(pH, sH, dH, gcd(sH, dH), tilde_H, Y, pW, sW, dW, gcd(sW, dW), tilde_W, X)``.
    """

    dtype: str
    layout: str
    split_k: int
    images: int
    hi: int
    wi: int
    c: int
    slice_elems: int
    offset: int
    cover: tuple = ()

    @classmethod
    def of(cls, spec, layout: str, offset: int) -> "SplitKReduce":
        """The reduction of ``spec`` (a :class:`~miopen_solver.spec.DgradSpec` with
        ``workspace_reduce``) into a dX stored ``layout``, its slices at byte ``offset``.

        Raises:
            ValueError: the spec does not reduce through the workspace, or one launch's dX
                has 2^31 elements or more (the split-N rule keeps it below).
        """
        if not getattr(spec, "workspace_reduce", False):
            raise ValueError(f"{spec.kernel_name} does not sum split-K through the workspace")
        p = spec.problem
        if p.dx_elems >= 2**31:
            raise ValueError(f"one launch's dX has {p.dx_elems} elements; the reduction indexes a slice "
                             f"with 32-bit offsets (allowed: below 2^31)")
        cover = ()
        if spec.decomposition.needs_zero_fill:
            d = spec.decomposition
            cover = (p.pH, p.sH, p.dH, gcd(p.sH, p.dH), d.h.tilde, p.Y,
                     p.pW, p.sW, p.dW, gcd(p.sW, p.dW), d.w.tilde, p.X)
        return cls(dtype=p.dtype, layout=layout, split_k=spec.split_k, images=p.N, hi=p.Hi, wi=p.Wi, c=p.C,
                   slice_elems=spec.workspace_slice_elems, offset=offset, cover=cover)

    @property
    def elems(self) -> int:
        """dX elements of one launch."""
        return self.images * self.hi * self.wi * self.c

    @property
    def nbytes(self) -> int:
        """Bytes of the ``split_k`` slices."""
        return self.split_k * self.slice_elems * 4

    @property
    def kernel_name(self) -> str:
        """One kernel per dtype and layout: ``dgrad_splitk_reduce_fp16_nhwc`` and the like."""
        return f"dgrad_splitk_reduce_{self.dtype}_{self.layout.lower()}"

    @property
    def grid(self) -> tuple:
        """NHWC: blocks of 256 threads over the elements (4 per thread when C % 4 == 0);
        NCHW: ``(32 x 32 tiles of one image, images, 1)``; each axis at most
        :data:`MAX_REDUCE_BLOCKS` (the kernel strides past it)."""
        if self.layout == "NCHW":
            tiles = -(-self.hi * self.wi // NCHW_TILE) * -(-self.c // NCHW_TILE)
            return (min(tiles, MAX_REDUCE_BLOCKS), min(self.images, MAX_REDUCE_BLOCKS), 1)
        units = self.elems // 4 if self.c % 4 == 0 else self.elems
        return (max(1, min(-(-units // REDUCE_THREADS), MAX_REDUCE_BLOCKS)), 1, 1)

    @property
    def block(self) -> tuple:
        return (NCHW_TILE, REDUCE_THREADS // NCHW_TILE, 1) if self.layout == "NCHW" else (REDUCE_THREADS, 1, 1)

    def args(self, ws: int, dx: int) -> tuple:
        """The kernel's arguments for slice 0 at device address ``ws`` and the launch's dX at
        ``dx``: ``(ws, dx, slice, split_k, n, hi, wi, c, cover, *terms)``, every one passed as
        8 bytes."""
        terms = self.cover or (0,) * 12
        return (ws, dx, self.slice_elems, self.split_k, self.images, self.hi, self.wi, self.c,
                int(bool(self.cover))) + tuple(terms)

    def emit(self, vendor: str, arch: str):
        """The kernel's :class:`~miopen_solver.kernels.KernelSource` (shape-independent: one
        binary per dtype and layout)."""
        from .kernels.emit import emit_splitk_reduce
        return emit_splitk_reduce(self.dtype, self.layout, vendor, arch, self.grid, self.block)

    def covered(self):
        """``(Hi, Wi)`` bool numpy array: the pixels the reduction reads (some sub-GEMM writes
        them), by the kernel's rule."""
        import numpy as np
        if not self.cover:
            return np.ones((self.hi, self.wi), dtype=bool)
        h, w = self.cover[:6], self.cover[6:]
        rows = np.array([axis_covered(v, *h) for v in range(self.hi)], dtype=bool)
        cols = np.array([axis_covered(v, *w) for v in range(self.wi)], dtype=bool)
        return rows[:, None] & cols[None, :]

    def apply(self, ws):
        """The reduction on the host (numpy), as the kernel does it: ``ws`` holds the
        ``split_k`` slices (``(split_k, slice_elems)`` float32, NHWC partials); returns the
        launch's dX in :attr:`layout` and the storage type (float32 sums in slice order,
        one rounding, zeros where no sub-GEMM writes; uncovered workspace elements are not
        read)."""
        import numpy as np
        from .layouts import storage_dtype
        parts = np.asarray(ws, dtype=np.float32).reshape(self.split_k, self.slice_elems)[:, :self.elems]
        parts = parts.reshape(self.split_k, self.images, self.hi, self.wi, self.c)
        # masked stores and adds (no index arrays, no gathered copies): the covered pixels
        # take slice 0, then each next slice's sum; the others stay 0
        mask = self.covered()[None, :, :, None]
        total = np.zeros((self.images, self.hi, self.wi, self.c), dtype=np.float32)
        np.copyto(total, parts[0], where=mask)
        for z in range(1, self.split_k):
            np.add(total, parts[z], out=total, where=mask)
        out = total.astype(storage_dtype(self.dtype))
        return np.ascontiguousarray(out.transpose(0, 3, 1, 2)) if self.layout == "NCHW" else out

    def to_record(self) -> dict:
        return {"dtype": self.dtype, "layout": self.layout, "split_k": self.split_k, "images": self.images,
                "hi": self.hi, "wi": self.wi, "c": self.c, "slice_elems": self.slice_elems, "offset": self.offset,
                "cover": list(self.cover)}

    def as_dict(self) -> dict:
        """Plain data for reports: the kernel, its launch and its share of the workspace."""
        return {"mode": "workspace", "kernel": self.kernel_name, "grid": list(self.grid), "block": list(self.block),
                "layout": self.layout, "slices": self.split_k, "slice_bytes": self.slice_elems * 4,
                "workspace_offset": self.offset, "bytes": self.nbytes, "zero_fill": bool(self.cover)}


def axis_covered(v: int, pad: int, stride: int, dil: int, gcd_sd: int, tilde: int, filt: int) -> bool:
    """The GEMM kernel's zero-fill rule for one dX row (or column) ``v``: some tilde phase
    ``i < min(tilde, filt)`` has ``(v + pad - dil*i) % stride == 0`` with ``(v + pad) % gcd ==
    0`` (``dg_axis_covered`` in ``dgrad.cu``)."""
    t = v + pad
    if t % gcd_sd:
        return False
    return any(t - dil * i >= 0 and (t - dil * i) % stride == 0 for i in range(min(tilde, filt)))


__all__ = ["MAX_REDUCE_BLOCKS", "NCHW_TILE", "REDUCE_THREADS", "SplitKReduce", "axis_covered"]
