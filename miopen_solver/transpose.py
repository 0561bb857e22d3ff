"""Layout transforms around the kernel: NCHW (and mixed NCHW/NHWC) problems on the GPU.

The dgrad kernels read dY NHWC and W KYXC. A tensor stored NCHW is moved through a device
workspace, as MIOpen's NHWC solvers do for NCHW problems (the CK-based solvers'
``GetWorkspaceSizeLayoutTransformConv``: the workspace holds the transposed tensors): before
the kernel, dY ``(N, K, Ho*Wo) -> (N, Ho*Wo, K)`` and W ``(K, cpg, Y*X) -> (K, Y*X, cpg)``;
after it, when the kernel writes an NHWC copy of an NCHW dX, ``(N, Hi*Wi, C) -> (N, C,
Hi*Wi)``. Each is a batched 2-D transpose (``kernels/transpose.cu``): ``batch`` row-major
``rows x cols`` matrices become ``cols x rows``; dY's and W's run in one launch
(:func:`transform_launches`: the pair kernel runs both grids' blocks). A tensor already NHWC
in memory (its flag, or one that differs only where dims of length 1 sit, e.g. a 1x1 filter
in NCHW) is read in place.

An NCHW problem runs in one of three ways, decided by its config's schedule:

* the NCHW pointwise schedules (:mod:`miopen_solver.nchw_pw`; 1x1, stride 1, unpadded, dY
  and dX NCHW) read dY and write dX in place; W^T is their only transform;
* the warp-MMA and wgmma schedules store an NCHW dX themselves where :func:`nchw_dx_rule`
  holds (:func:`writes_nchw_dx`: the staged epilogue stores ``dx[((n*C + c)*Hi + hi)*Wi +
  wi]`` with consecutive threads on consecutive pixels, split-K's atomic epilogue likewise),
  so only dY and W are transposed; with split-K through the workspace
  (:mod:`miopen_solver.splitk`) the reduction kernel stores the NCHW dX and the GEMM kernel
  stores NHWC partial sums (no dX transform either);
* every other schedule (persistent wgmma, TMA, direct, patch) runs its NHWC kernel between
  all the transforms.

How a kernel learns it: a launch's problem keeps the line's layouts
(:func:`~miopen_solver.applicability.launch_problem`); :func:`~miopen_solver.spec.launch_spec`
hands the NCHW pointwise schedules that problem and every other schedule
:func:`native_problem` -- dY and W NHWC (the kernel reads their copies), ``in_layout``
``"NCHW"`` when dX is NCHW in memory. A spec of that problem is a different kernel when
:func:`writes_nchw_dx` holds (its name ends ``_dxnchw``, its source keeps the ``nchw_dx``
sections of ``dgrad.cu``); otherwise it is the same NHWC kernel as for the all-NHWC problem
and the solution adds the dX transform (:func:`layout_transforms` with ``nchw_dx=False``).

Only NCHW and NHWC memory orders take part; other orders (CHWN with N, C and H*W > 1) are
not applicable (:func:`memory_order` returns None for them).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import gcd

from .config import KernelSchedule
from .problem import ConvProblem, same_memory

WORKSPACE_ALIGN = 256
"""Byte alignment of each tensor's slot in the workspace (every vector width and TMA base)."""

TRANSPOSE_BLOCK = (32, 8, 1)
"""Threads of a transpose block: 32 lanes x 8 rows (``kernels/transpose.cu``)."""
BAND_BYTES = 8192
"""Bytes a band-form transpose block moves (``transpose.cu``'s ``DT_BAND_BYTES``)."""
BAND_MAX_COLS = 64
"""The widest rows the band form takes by default (:attr:`LayoutTransform.kernel_form`): a block moves a
band of rows (src's run contiguous) or whole matrices, with dst runs of at least 64 elements,
where the tile form's 64 x 64 tiles would hold only ``cols`` columns."""
MAX_GRID_Y = 65535
"""Matrices along grid y; more are strided over by the kernel."""

ORDERS = ("NHWC", "NCHW")
"""The memory orders a GPU problem's tensors may have."""


def memory_order(problem: ConvProblem, tensor: str) -> str | None:
    """``"NHWC"`` or ``"NCHW"``: the packed order whose bytes ``tensor`` (``"dY"``, ``"W"``
    or ``"dX"``) has under its layout flag (NHWC first: a tensor with the bytes of both needs
    no transform); None for any other order."""
    lens, flag = problem.tensor_lengths()[tensor], problem.tensor_layouts()[tensor]
    if sorted(flag) != sorted(lens):
        return None
    return next((o for o in ORDERS if same_memory(lens, flag, o)), None)


def has_order(problem: ConvProblem, tensor: str, order: str) -> bool:
    """Whether ``tensor``'s bytes under its layout flag are those of the packed ``order``
    (``"NCHW"`` or ``"NHWC"``), also where they are both's (:func:`memory_order` names NHWC
    first)."""
    lens, flag = problem.tensor_lengths()[tensor], problem.tensor_layouts()[tensor]
    return sorted(flag) == sorted(lens) and same_memory(lens, flag, order)


def native_problem(problem: ConvProblem) -> ConvProblem:
    """``problem`` with dY and W NHWC, and dX NCHW when it is NCHW in memory, else NHWC:
    what the kernel between the transforms computes (the perf-db key stays the given
    problem's)."""
    if problem.is_3d or problem.all_nhwc:
        return problem
    dx = "NCHW" if memory_order(problem, "dX") == "NCHW" else "NHWC"
    return problem.replace(in_layout=dx, out_layout="NHWC", fil_layout="NHWC")


NCHW_DX_SCHEDULES = frozenset({KernelSchedule.WARP_MMA, KernelSchedule.WGMMA, KernelSchedule.WGMMA_TMA,
                               KernelSchedule.WGMMA_TMA_PINGPONG, KernelSchedule.GROUP_PACK,
                               KernelSchedule.GROUP_PACK_WGMMA})
"""The schedules whose epilogues store dX NCHW (the staged epilogue, split-K's atomic one and
the TMA schedule's direct epilogue; the group-pack schedules run the first two on a problem
that differs only in G, so their kernels store what those store). The direct and patch schedules store NHWC and keep the
dX transform, and so does the persistent wgmma schedule: its grid is sized for the blocks its
NHWC binary keeps resident, and with the NCHW store loop nvrtc gives the binary up to 245
registers (2-3 blocks of 128 threads instead of 4; found by the H200 run's binary check).
The TMA epilogue joined after it beat the dX transform on every suite line it serves on the
H200 (bench/RESULTS.md, seventh session); the ping-pong schedule runs the same epilogue (each
warpgroup's own tile, under the other's MMAs) and joined after it beat its dX transform on 34 of
35 NCHW lines (twenty-fourth session)."""


def writes_nchw_dx(spec) -> bool:
    """Whether the kernel of ``spec`` (any spec type) stores dX NCHW itself
    (:func:`nchw_dx_rule` over its problem, schedule and resolved split-K)."""
    return spec.schedule in NCHW_DX_SCHEDULES and nchw_dx_rule(
        spec.problem, spec.schedule, spec.split_k, getattr(spec, "workspace_reduce", False))


def nchw_dx_rule(problem: ConvProblem, schedule: KernelSchedule, split_k: int, workspace: bool = False) -> bool:
    """The one rule deciding that a kernel stores dX NCHW: not split-K through the workspace
    (``workspace``: the kernel stores NHWC partial sums, the reduction kernel stores dX), the
    launch problem's dX is NCHW in memory, ``schedule`` is in :data:`NCHW_DX_SCHEDULES`,
    consecutive GEMM rows of every
    sub-GEMM are consecutive dX columns (``sW / gcd(sW, dW) == 1``: the stores along W
    coalesce; with a W-stride of 2 or more they scatter, and the 1x1 stride-2 ResNet-50 line
    ran 16% slower than through the dX transform on the H200), and with split-K (> 1) on a
    16-bit type ``Hi*Wi`` is even (each element is added as half of a 4-byte-aligned packed
    pair whose other half gets +0; the pair must stay inside dX; ``dgrad.cu``'s ``nchw_dx``
    section asserts this one, the others are choices, not limits of the kernel)."""
    p = problem
    if workspace or p.is_3d or schedule not in NCHW_DX_SCHEDULES or memory_order(p, "dX") != "NCHW":
        return False
    if p.sW // gcd(p.sW, p.dW) != 1:
        return False
    return split_k == 1 or p.elem_bytes == 4 or (p.Hi * p.Wi) % 2 == 0


@dataclass(frozen=True)
class LayoutTransform:
    """One batched 2-D transpose between a user tensor and its NHWC copy in the workspace.

    Attributes:
        tensor: ``"dY"`` or ``"W"`` (before the kernel: user bytes -> workspace) or ``"dX"``
            (after it: workspace -> user bytes).
        src, dst: memory orders, e.g. ``"NCHW"`` -> ``"NHWC"``.
        batch, rows, cols: ``batch`` row-major ``rows x cols`` matrices (src) become
            ``cols x rows`` (dst).
        elem_bytes: bytes per element (2 or 4); elements move as raw bits.
        offset: byte offset of the NHWC copy in the workspace.
        form: ``"tile"``, ``"band"`` or empty (chosen by shape: :attr:`kernel_form`).

    Raises:
        ValueError: an unknown form, or the band form for a shape it cannot take.
    """

    tensor: str
    src: str
    dst: str
    batch: int
    rows: int
    cols: int
    elem_bytes: int
    offset: int
    form: str = ""

    def __post_init__(self):
        if self.form not in ("", "tile", "band"):
            raise ValueError(f"transpose form {self.form!r}; allowed: tile, band (or empty: chosen by shape)")
        if self.kernel_form == "band" and self.band_mode != "whole" and self.band_width < 8:
            raise ValueError(f"band transpose of {self.rows} x {self.cols}: a band must hold 8 rows or columns "
                             f"(the shorter side <= {self.band_elems // 8}) or whole matrices")

    @property
    def before(self) -> bool:
        """Runs before the kernel (dY, W) rather than after it (dX)."""
        return self.tensor != "dX"

    @property
    def nbytes(self) -> int:
        return self.batch * self.rows * self.cols * self.elem_bytes

    @property
    def band_elems(self) -> int:
        return BAND_BYTES // self.elem_bytes

    @property
    def band_mode(self) -> str:
        """How a band-form block cuts the batch (``transpose.cu``'s ``mode``): ``"whole"``
        matrices where one holds at most a band of elements, else ``"rows"`` (bands of rows,
        where cols <= rows) or ``"cols"`` (bands of columns)."""
        if self.rows * self.cols <= self.band_elems:
            return "whole"
        return "rows" if self.cols <= self.rows else "cols"

    @property
    def band_width(self) -> int:
        """Rows (or columns) of one band: as many as a band holds of the other side, a
        multiple of 8 (``transpose.cu``'s ``DT_BAND_ROWS``)."""
        other = self.cols if self.band_mode == "rows" else self.rows
        return (self.band_elems // other) & ~7

    @property
    def kernel_form(self) -> str:
        """``form``, else the band form where it moves whole matrices or bands of rows of at
        most :data:`BAND_MAX_COLS` columns that are odd or shorter than one 32-byte sector,
        the tile form otherwise. The tile form reads a src row per warp row: a row of a few
        bytes uses a fraction of the sector it is read from (a 2-tap filter's 4 bytes: 1/8),
        and an odd row straddles sectors; the band form reads src's run whole. Its gather
        reads shared memory with a stride of ``cols`` elements, which an even stride
        serialises on few banks, so wider even rows take tiles. Both forms timed
        (bench/RESULTS.md): odd widths, eleventh session (W 512x9: 15.4 -> 6.1 us; dY of 7x7
        images tied); 2- and 4-tap filters' W, twenty-eighth session (tile 15.4 / 17.4 us,
        band 3.0 / 5.0); even rows of 32 bytes and more (16-tap W, 64- to 4096-wide dY) and
        odd rows past 64 (289: band 5x slower) run faster as tiles."""
        if self.form:
            return self.form
        narrow = self.cols % 2 == 1 or self.cols * self.elem_bytes < 32
        return "band" if narrow and self.cols <= BAND_MAX_COLS and self.band_mode != "cols" else "tile"

    @property
    def kernel_name(self) -> str:
        """One kernel per element width and form: ``dgrad_transpose_b16``,
        ``dgrad_transpose_band_b16`` and the like."""
        return f"dgrad_transpose_{'band_' if self.kernel_form == 'band' else ''}b{8 * self.elem_bytes}"

    @property
    def tile(self) -> int:
        """Elements per side of a tile-form block's tile (128 bytes of a row per warp row)."""
        return 32 * (4 // self.elem_bytes)

    @property
    def grid(self) -> tuple:
        """Tile form: ``(tiles of one matrix, matrices up to 65535, 1)``; band form: ``(groups
        of whole matrices, 1, 1)`` where a matrix fits a band, else ``(bands of one matrix,
        matrices up to 65535, 1)`` (:attr:`band_mode`)."""
        if self.kernel_form == "band":
            if self.band_mode == "whole":
                return (-(-self.batch // (self.band_elems // (self.rows * self.cols))), 1, 1)
            extent = self.rows if self.band_mode == "rows" else self.cols
            return (-(-extent // self.band_width), min(self.batch, MAX_GRID_Y), 1)
        t = self.tile
        return (-(-self.rows // t) * -(-self.cols // t), min(self.batch, MAX_GRID_Y), 1)

    @property
    def block(self) -> tuple:
        return TRANSPOSE_BLOCK

    @property
    def label(self) -> str:
        """``dY NCHW->NHWC`` and the like, for notes and reports."""
        return f"{self.tensor} {self.src}->{self.dst}"

    def emit(self, vendor: str, arch: str):
        """The kernel's :class:`~miopen_solver.kernels.KernelSource` (shape-independent: the
        sizes are kernel arguments, so one binary serves every transform of an element width)."""
        from .kernels.emit import emit_transpose
        return emit_transpose(self.elem_bytes, vendor, arch, self.grid, self.block, self.kernel_form)

    def to_record(self) -> dict:
        """Plain data (``form`` only where one is forced)."""
        return {"tensor": self.tensor, "src": self.src, "dst": self.dst, "batch": self.batch, "rows": self.rows,
                "cols": self.cols, "elem_bytes": self.elem_bytes, "offset": self.offset,
                **({"form": self.form} if self.form else {})}

    def apply(self, flat):
        """The transform on host bytes (numpy, any dtype): ``flat`` holds the src tensor;
        returns the dst tensor as a flat C-contiguous array. What the kernel does, for the
        CPU engine and tests."""
        import numpy as np
        a = np.asarray(flat).reshape(self.batch, self.rows, self.cols)
        return np.ascontiguousarray(a.transpose(0, 2, 1)).reshape(-1)


PAIR_REGISTERS = 64
"""Registers a thread of the pair and band kernels may use (``transpose.cu``: at least 4 blocks
of 256 threads per multiprocessor; the tile kernel alone takes 32)."""
PAIR_MAX_WAVES = 4
"""A pair with a tile-form transform runs only where its blocks fit in this many waves of
resident blocks (:func:`transform_launches`). On the H200 (bench/RESULTS.md, thirteenth
session) pairs of 3.0 and 3.2 waves ran faster than their two launches apart, pairs of 4.4
waves and more slower."""
PAIR_MAX_BLOCKS = 1 << 26
"""Blocks a pair launch may have (its grid is one-dimensional): within NVIDIA's grid x limit
(2^31 - 1) and AMD's (2^32 work-items, blocks of 256). Past it the two transforms launch
apart."""


@dataclass(frozen=True)
class TransposeLaunch:
    """One launch of ``transpose.cu``: one transform in its own form, or two (``"pair"``:
    dY's and W's before the kernel) whose grids run one after the other in a single grid, each
    block running the block of its transform's own launch.

    Attributes:
        transforms: the one or two :class:`LayoutTransform` it runs (one element width).
    """

    transforms: tuple

    def __post_init__(self):
        if len(self.transforms) not in (1, 2) or len({t.elem_bytes for t in self.transforms}) != 1:
            raise ValueError("a transpose launch runs one transform or two of one element width")

    @property
    def form(self) -> str:
        """``"pair"``, or the one transform's kernel form."""
        return "pair" if len(self.transforms) == 2 else self.transforms[0].kernel_form

    @property
    def blocks(self) -> int:
        """Blocks of the launch (for a pair: the two grids' blocks together)."""
        return sum(t.grid[0] * t.grid[1] for t in self.transforms)

    @property
    def kernel_name(self) -> str:
        """``dgrad_transpose_pair_b16`` and the like for a pair, else the transform's own."""
        if self.form != "pair":
            return self.transforms[0].kernel_name
        return f"dgrad_transpose_pair_b{8 * self.transforms[0].elem_bytes}"

    @property
    def grid(self) -> tuple:
        return (self.blocks, 1, 1) if self.form == "pair" else self.transforms[0].grid

    @property
    def block(self) -> tuple:
        return TRANSPOSE_BLOCK

    @property
    def before(self) -> bool:
        return self.transforms[0].before

    def args(self, ptrs) -> tuple:
        """The kernel's arguments (8 bytes each), ``ptrs`` one ``(src, dst)`` device pointer
        pair per transform: ``(src, dst, batch, rows, cols)``, or for a pair ``(src, dst,
        batch, rows, cols, gx, gy, form)`` per transform (form 0 tile, 1 band)."""
        if self.form != "pair":
            t, (src, dst) = self.transforms[0], ptrs[0]
            return (src, dst, t.batch, t.rows, t.cols)
        return tuple(a for t, (src, dst) in zip(self.transforms, ptrs)
                     for a in (src, dst, t.batch, t.rows, t.cols, t.grid[0], t.grid[1], int(t.kernel_form == "band")))

    def emit(self, vendor: str, arch: str):
        """The kernel's :class:`~miopen_solver.kernels.KernelSource` (shape-independent)."""
        from .kernels.emit import emit_transpose
        return emit_transpose(self.transforms[0].elem_bytes, vendor, arch, self.grid, self.block, self.form)


def pair_resident_blocks(target) -> int:
    """Pair (and band) blocks resident on one multiprocessor of ``target``: by registers at
    :data:`PAIR_REGISTERS` a thread (``transpose.cu``'s launch bound), at least 1."""
    return max(1, target.regs_per_cu // (PAIR_REGISTERS * TRANSPOSE_BLOCK[0] * TRANSPOSE_BLOCK[1]))


def transform_launches(transforms, target) -> tuple:
    """The launches that run ``transforms`` (:func:`layout_transforms` order) on ``target``, in
    launch order: the two transforms before the kernel (dY's and W's) in one pair launch, else
    one launch each; the dX transform after the kernel alone.

    A pair saves a launch (2.5-3 us in a CUDA graph on the H200, bench/RESULTS.md) but runs every block at the band form's register budget (:data:`PAIR_REGISTERS`):
    a tile-form transform, 32 registers alone, keeps half as many blocks resident in the pair.
    So two transforms pair where both take the band form (the same budget alone), or where
    the pair's blocks fit in :data:`PAIR_MAX_WAVES` waves of resident blocks
    (:func:`pair_resident_blocks` on each of ``target.num_cus`` multiprocessors): a short
    transform, whose time is mostly the launch. Never past :data:`PAIR_MAX_BLOCKS`."""
    own = tuple(t for t in transforms if not isinstance(t, LayoutTransform))   # their own launch (a W' pack)
    transforms = [t for t in transforms if isinstance(t, LayoutTransform)]
    before = [t for t in transforms if t.before]
    after = tuple(TransposeLaunch((t,)) for t in transforms if not t.before)
    if own:
        return own + tuple(TransposeLaunch((t,)) for t in before) + after
    if len(before) == 2:
        pair = TransposeLaunch(tuple(before))
        waves = PAIR_MAX_WAVES * pair_resident_blocks(target) * target.num_cus
        both_band = all(t.kernel_form == "band" for t in before)
        if pair.blocks <= PAIR_MAX_BLOCKS and (both_band or pair.blocks <= waves):
            return (pair,) + after
    return tuple(TransposeLaunch((t,)) for t in before) + after


def _align(n: int) -> int:
    return -(-n // WORKSPACE_ALIGN) * WORKSPACE_ALIGN


def layout_transforms(problem: ConvProblem, nchw_dx: bool = False) -> tuple:
    """The transforms a GPU run of ``problem`` (the whole batch) needs, in launch order: dY
    and W before the kernel, dX after it unless the kernel writes dX NCHW itself
    (``nchw_dx``: :func:`writes_nchw_dx` of its spec); none for a problem NHWC in memory.

    Raises:
        ValueError: a tensor is neither NHWC nor NCHW in memory (the applicability check
            refuses such problems first: ``LAYOUT``).
    """
    if problem.is_3d:
        return ()
    eb = problem.elem_bytes
    p = problem
    shapes = {  # tensor: (NCHW matrices as batch, rows, cols; NCHW -> NHWC direction)
        "dY": (p.N, p.K, p.Ho * p.Wo),
        "W": (p.K, p.cpg, p.Y * p.X),
        "dX": (p.N, p.Hi * p.Wi, p.C),     # after the kernel: NHWC (N, P, C) -> NCHW
    }
    out, offset = [], 0
    for tensor in ("dY", "W", "dX"):
        order = memory_order(p, tensor)
        if order is None:
            raise ValueError(f"{tensor} layout {p.tensor_layouts()[tensor]} is neither NHWC nor NCHW in memory")
        if order == "NHWC" or (tensor == "dX" and nchw_dx):
            continue
        batch, rows, cols = shapes[tensor]
        src, dst = ("NHWC", "NCHW") if tensor == "dX" else ("NCHW", "NHWC")
        t = LayoutTransform(tensor, src, dst, batch, rows, cols, eb, offset)
        out.append(t)
        offset += _align(t.nbytes)
    return tuple(out)


def workspace_bytes(transforms) -> int:
    """Bytes of the workspace the transforms' NHWC copies need (each slot 256-byte aligned)."""
    return sum(_align(t.nbytes) for t in transforms)


__all__ = ["LayoutTransform", "MAX_GRID_Y", "NCHW_DX_SCHEDULES", "ORDERS", "PAIR_MAX_BLOCKS", "PAIR_MAX_WAVES",
           "PAIR_REGISTERS", "TRANSPOSE_BLOCK", "TransposeLaunch", "WORKSPACE_ALIGN", "layout_transforms", "memory_order",
           "native_problem", "nchw_dx_rule", "pair_resident_blocks", "transform_launches", "workspace_bytes",
           "writes_nchw_dx"]
