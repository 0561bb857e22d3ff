"""Specialise the one dgrad kernel source for a :class:`~miopen_solver.spec.DgradSpec`.

The source (``dgrad.cu``) is written once for CUDA and HIP; every problem and config value
arrives as a ``DG_*`` define (MIOpen's static solvers pass ``CK_PARAM_*`` defines the same
way). :func:`emit` prepends the defines and returns a :class:`KernelSource` whose
``sha256`` identifies the exact text, and whose launch geometry the runtimes use.

Nothing here touches a GPU.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache
from math import gcd
from pathlib import Path

from ..problem import ConvProblem
from ..tma import tma_box_tiles

_HERE = Path(__file__).resolve().parent
WIDE_32_BLOCKS = (96, 160, 224)
"""warp_tile_n values whose W tile is 32-wide blocks in the 64-byte swizzle (``dgrad.cu``'s
``wgb32`` sections: 3, 5 or 7 blocks a warpgroup, one 32-wide TMA box each)."""

ATOM_CODES = {"mma16816": 0, "mfma32x32x8": 1, "mfma16x16x16": 2, "mma1688tf32": 5, "mfma16x16x8xf32": 6}
"""``DG_ATOM`` values; every FFMA lane-grid atom (``fma4x8``, ``fma8x8``) is 3, every
warpgroup atom (``wgmma64xNx16``) 4. The TF32 atoms (5, 6) live in the ``tf32`` section of
``dgrad.cu``, kept only in their kernels' text."""


def _atom_code(name: str) -> int:
    if name.startswith("wgmma"):
        return 4
    return ATOM_CODES.get(name, 3)

DTYPE_CODES = {"fp32": 0, "fp16": 1, "bf16": 2}

WGMMA_EMIT = "// #emit dg_wgmma\n"
"""The line of ``dgrad.cu`` that :func:`wgmma_wrapper`'s text replaces (nothing in a kernel
without warpgroup MMA)."""


def wgmma_wrapper(n: int, dtype: str, math: str) -> str:
    """CUDA text of ``dg_wgmma(d, a_desc, b_desc)``: one warpgroup MMA of 64 x ``n`` (PTX ISA
    9.7.15, ``wgmma.mma_async``) accumulating into the fp32 fragment ``d`` (``n / 2`` registers
    a thread), its operands in shared memory by descriptor. 16-bit ``dtype``: ``m64nNk16``,
    A K-major and B MN-major (imm-trans-b 1); ``math`` ``"tf32"`` (fp32 data): ``m64nNk8``
    ``.tf32``, both operands K-major (the only form ``.tf32`` takes). scale-d comes from a
    predicate set from a register that is always 1 (accumulate), as the instruction takes
    scale-d only as a predicate.

    Raises:
        ValueError: ``n`` is not a multiple of 8 in 8..256, or a 16-bit ``dtype`` is not
            fp16/bf16.
    """
    if not (8 <= n <= 256 and n % 8 == 0):
        raise ValueError(f"wgmma N must be a multiple of 8 in 8..256, got {n}")
    regs = n // 2
    if math == "tf32":
        shape, suffix = f"m64n{n}k8.f32.tf32.tf32", ""
    elif dtype in ("fp16", "bf16"):
        ab = {"fp16": "f16", "bf16": "bf16"}[dtype]
        shape, suffix = f"m64n{n}k16.f32.{ab}.{ab}", ", 0, 1"
    else:
        raise ValueError(f"wgmma takes fp16 or bf16 (or fp32 as tf32), got {dtype}")

    pad = " " * 17
    # the accumulator registers, 16 a line of the instruction's string, 8 a line of operands
    reg_lines = [", ".join(f"%{i}" for i in range(j, min(j + 16, regs))) for j in range(0, regs, 16)]
    reg_text = f", \"\n{pad}\"".join(reg_lines)
    acc_lines = [", ".join(f'"+f"(d[{i}])' for i in range(j, min(j + 8, regs))) for j in range(0, regs, 8)]
    acc_text = f",\n{pad}  ".join(acc_lines)
    return (
        "DG_DEVICE void dg_wgmma(float* d, unsigned long long a_desc, unsigned long long b_desc) {\n"
        '    asm volatile("{\\n"\n'
        f'{pad}".reg .pred p;\\n"\n'
        f'{pad}"setp.ne.b32 p, %{regs + 2}, 0;\\n"\n'
        f'{pad}"wgmma.mma_async.sync.aligned.{shape} "\n'
        f'{pad}"{{{reg_text}}}, %{regs}, %{regs + 1}, p, 1, 1{suffix};\\n"\n'
        f'{pad}"}}\\n"\n'
        f"{pad}: {acc_text}\n"
        f'{pad}: "l"(a_desc), "l"(b_desc), "r"(1)\n'
        f'{pad}: "memory");\n'
        "}\n")


SUB_FIELDS = ("block_start", "n_tiles", "gemm_m", "gemm_k", "h_slice", "w_slice", "x_dot_slice",
              "dy_h_coeff", "dy_w_coeff", "y_stride", "y_offset", "x_stride", "x_offset",
              "h_begin", "w_begin", "dx_h_stride", "dx_h_offset", "dx_w_stride", "dx_w_offset")
"""Order of one record of ``DG_SUB_TABLE`` (the kernel's ``struct dg_sub``)."""



SECTION = re.compile(r"^// #section (!?\w+(?:\|\w+)*)\n(.*?)^// #end \1\n", re.M | re.S)
"""An optional block of a kernel source: ``// #section NAME`` ... ``// #end NAME`` lines;
``!NAME`` marks the block that section ``NAME`` replaces (kept unless ``NAME`` is asked).
A tag may list alternatives, ``A|B``: the block is kept when any of them is asked, and a
``!A|B`` block unless any of them is (blocks do not nest)."""
BLOCK = re.compile(r"^// #block (\w+)\n(.*?)^// #end block \1\n", re.M | re.S)
"""A shared block of a kernel source: ``// #block NAME`` ... ``// #end block NAME`` lines; it is
kept in place (marker lines dropped), and another source takes the same text with a line
``// #include-block FILE NAME`` (one definition of, e.g., the fp32 -> storage rounding)."""
INCLUDE = re.compile(r"^// #include-block (\S+) (\w+)\n", re.M)


@lru_cache(maxsize=None)
def _block(name: str, tag: str) -> str:
    """The text of block ``tag`` of kernel source ``name`` (without its marker lines).

    Raises:
        ValueError: the source has no such block.
    """
    for m in BLOCK.finditer((_HERE / name).read_text()):
        if m.group(1) == tag:
            return m.group(2)
    raise ValueError(f"kernel source {name} has no block {tag!r}")


@lru_cache(maxsize=None)
def _read(name: str, sections: frozenset = frozenset()) -> str:
    """The text of kernel source ``name`` with its ``// #include-block`` lines replaced by
    those blocks (:data:`BLOCK`), the blocks of the named ``sections`` kept (their marker
    lines dropped) and every other section removed, and each ``!NAME`` block kept unless
    ``NAME`` is asked (what a family's section replaces), so a kernel's text holds only the
    code of its own schedule family and a family that adds a section leaves every other
    kernel's text byte-identical."""
    text = INCLUDE.sub(lambda m: _block(m.group(1), m.group(2)), (_HERE / name).read_text())

    def keep(m) -> str:
        tag = m.group(1)
        asked = any(name in sections for name in tag.lstrip("!").split("|"))
        wanted = not asked if tag.startswith("!") else asked
        return m.group(2) if wanted else ""
    return BLOCK.sub(lambda m: m.group(2), SECTION.sub(keep, text))


@dataclass(frozen=True)
class TensorMapDesc:
    """How to build one TMA tensor map (CUDA ``cuTensorMapEncodeTiled``) for a kernel
    argument once its device pointer is known.

    ``operand`` is ``"dy"`` or ``"w"`` (which buffer), ``dims`` the tensor's extents in
    elements, innermost first, ``strides`` the byte strides of dims 1.. (dim 0 is
    contiguous), ``box`` the tile one copy moves (elements, innermost first), ``dtype``
    ``"fp16"`` or ``"bf16"``; ``swizzle`` the shared-memory swizzle in bytes (128, or 64 for
    the 32-wide W boxes of warp_tile_n 96, 160 and 224: the wgmma operand layouts; 0, none, for the NCHW
    TMA schedule's staging rows), and elements
    outside the tensor read as zero.
    """

    operand: str
    dtype: str
    dims: tuple
    strides: tuple
    box: tuple
    swizzle: int = 128


@dataclass(frozen=True)
class KernelSource:
    """A specialised kernel: its entry-point name, defines, full text and launch geometry.

    ``grid`` is (x, y, z) blocks, ``block`` (threads, 1, 1), ``shared_bytes`` the dynamic
    shared memory per block (bytes). ``pre_memset`` means dX must be zeroed before the
    launch (split-K accumulates atomically). ``workspace_arg``: bytes of the kernel's own
    workspace (stream-K's flags and partial sums), passed as a fourth pointer after dX; 0:
    no such argument. ``workspace_cleared``: its first bytes (the flags) zeroed before every
    launch. ``tensor_maps`` lists the TMA tensor maps the kernel takes after its pointers
    (dY, W, dX, and the workspace when there is one), in order (empty for all but wgmma=3).
    """

    name: str
    vendor: str
    arch: str
    defines: tuple
    text: str
    sha256: str
    grid: tuple
    block: tuple
    shared_bytes: int
    pre_memset: bool = False
    tensor_maps: tuple = ()
    workspace_arg: int = 0
    workspace_cleared: int = 0

    def to_record(self) -> dict:
        """Plain data (the text included) for a worker process
        (:meth:`~miopen_solver.solver.Solution.from_record` emits the source again and compares)."""
        return {"name": self.name, "vendor": self.vendor, "arch": self.arch,
                "defines": [list(d) for d in self.defines], "text": self.text, "sha256": self.sha256,
                "grid": list(self.grid), "block": list(self.block), "shared_bytes": self.shared_bytes,
                "pre_memset": self.pre_memset, "workspace_arg": self.workspace_arg,
                "workspace_cleared": self.workspace_cleared,
                "tensor_maps": [dataclasses.asdict(m) for m in self.tensor_maps]}

    @property
    def define_flags(self) -> list:
        """The defines as compiler flags (``-DNAME=VALUE``), for tools that want them."""
        return [f"-D{k}={v}" for k, v in self.defines]


def _make(name: str, vendor: str, arch: str, defines: list, body: str, grid, block, shared, memset=False,
          tensor_maps=(), workspace=(0, 0)):
    header = [f"// generated by miopen_solver.kernels.emit for {arch}: {name}"]
    if vendor == "amd":
        header.append("#define DG_VENDOR_AMD 1")
    header += [f"#define {k} {v}" for k, v in defines]
    text = "\n".join(header) + "\n" + body
    return KernelSource(name=name, vendor=vendor, arch=arch, defines=tuple(defines), text=text,
                        sha256=hashlib.sha256(text.encode()).hexdigest(), grid=tuple(grid),
                        block=tuple(block), shared_bytes=shared, pre_memset=memset, tensor_maps=tuple(tensor_maps),
                        workspace_arg=workspace[0], workspace_cleared=workspace[1])


def _problem_defines(p: ConvProblem) -> list:
    return [("DG_N", p.N), ("DG_C", p.C), ("DG_K", p.K), ("DG_G", p.G), ("DG_HI", p.Hi), ("DG_WI", p.Wi),
            ("DG_HO", p.Ho), ("DG_WO", p.Wo), ("DG_Y", p.Y), ("DG_X", p.X), ("DG_PH", p.pH), ("DG_PW", p.pW),
            ("DG_SH", p.sH), ("DG_SW", p.sW), ("DG_DH", p.dH), ("DG_DW", p.dW), ("DG_CPG", p.cpg),
            ("DG_KPG", p.kpg), ("DG_DTYPE", DTYPE_CODES[p.dtype])]


def sub_gemm_records(spec) -> list:
    """One record (ints in :data:`SUB_FIELDS` order) per sub-GEMM, with cumulative block
    starts over ``ceil(GemmM/tile_m) * ceil(cpg/tile_n)`` tiles each (N fastest); for a TMA
    kernel with pixel boxes, over the boxes that cover each sub-GEMM's pixel grid."""
    c = spec.config
    start = 0
    rows = []
    box = spec.tma_box
    for s in spec.sub_gemms:
        n_tiles = -(-s.gemm_n // c.tile_n)
        m_tiles = -(-s.gemm_m // c.tile_m) if box is None else tma_box_tiles(spec.problem, s, box)
        rec = dict(block_start=start, n_tiles=n_tiles, gemm_m=s.gemm_m, gemm_k=s.gemm_k,
                   h_slice=s.h_slice, w_slice=s.w_slice, x_dot_slice=s.x_dot_slice,
                   dy_h_coeff=s.dy_h_coeff, dy_w_coeff=s.dy_w_coeff, y_stride=s.y_stride,
                   y_offset=s.y_offset, x_stride=s.x_stride, x_offset=s.x_offset,
                   h_begin=s.h_begin, w_begin=s.w_begin, dx_h_stride=s.dx_h_stride,
                   dx_h_offset=s.dx_h_offset, dx_w_stride=s.dx_w_stride, dx_w_offset=s.dx_w_offset)
        rows.append([rec[f] for f in SUB_FIELDS])
        start += m_tiles * n_tiles
    return rows


def emit(spec) -> KernelSource:
    """The specialised implicit-GEMM dgrad kernel for ``spec`` (a validated DgradSpec).

    Grid: x = tiles over all sub-GEMMs, or the persistent blocks (``spec.tile_blocks``),
    (+ zero-fill blocks), y = G, z = split_k.
    """
    if spec.schedule.direct or spec.schedule.virtual_gemm:     # their own emitters
        return spec.emit()
    return emit_gemm(spec)


def emit_gemm(spec, *, name: str | None = None, extra: tuple = (), sections: tuple = (),
              memset: bool | None = None, grid: tuple | None = None, maps: tuple | None = None,
              tile_blocks: int | None = None) -> KernelSource:
    """``dgrad.cu`` specialised for the DgradSpec ``spec``: :func:`emit`'s kernel, or with
    ``name`` (the entry point), ``extra`` defines appended, the ``sections`` of the source
    kept, ``memset`` (dX zeroed before the launch) set and the launch ``grid`` (default
    ``spec.grid``), a schedule's kernel built on ``spec``'s main loop
    (:mod:`miopen_solver.patch`, :mod:`miopen_solver.nchw_pw`). A spec that stores dX NCHW
    (``spec.nchw_dx``) keeps the ``nchw_dx`` sections and defines ``DG_DX_NCHW``; one whose
    split-K goes through the workspace (``spec.workspace_reduce``) keeps the ``skws`` sections
    and defines ``DG_WS_SLICE`` (fp32 elements from one slice to the next); a spec on a TF32
    atom (``spec.math == "tf32"``) keeps the ``tf32`` sections (its atom and A/B row padding);
    a 16-bit warpgroup spec with tile_k 32 keeps the ``wgk32`` sections (A in 64-byte
    swizzled rows), one with warp_tile_n 32 the ``wgn32`` sections (B in 64-byte swizzled
    rows, the m64n32k16 instruction), warp_tile_n 96, 160 or 224 the ``wgb32`` sections (B in
    64-byte swizzled 32-wide blocks, 32-wide TMA boxes), warp_tile_n 192 the ``wgn192``
    sections (three 128-byte swizzled 64-wide blocks); every warpgroup kernel gets its
    instruction from :func:`wgmma_wrapper` (m64nNk16, N = warp_tile_n), a TMA spec of 7 or 8 stages the ``st8`` sections and a TMA spec
    with split_k > 1 the ``tmask`` sections (work units of one k-slice, the split epilogue),
    the ping-pong schedule the ``pingpong`` sections (two warpgroups taking tiles in turn), a
    TMA spec with a producer warpgroup (``spec.producer_warpgroup``) the ``pwg`` sections
    (``setmaxnreg`` moving registers to the consumers),
    and a stream-K spec (``spec.stream_k``) the ``tmsk`` sections (runs of k-tiles, the
    in-kernel fixup; its workspace is the kernel's fourth argument, flags cleared before each
    launch), so every other kernel's text is unchanged. ``maps``: the TMA tensor maps, when a family's
    operands are not ``spec``'s (default :func:`tensor_maps` of ``spec``). ``tile_blocks``: a
    family's own count of the blocks walking one grid row's tiles (``DG_TILE_BLOCKS``; default
    ``spec.tile_blocks``), where its grid has more rows than ``spec``'s groups."""
    p, t, c = spec.problem, spec.target, spec.config
    vendor = "amd" if t.vendor == "amd" else "nvidia"
    recs = sub_gemm_records(spec)
    d = _problem_defines(p)
    name = name or spec.kernel_name
    d += [("DG_KERNEL_NAME", name), ("DG_THREADS", spec.threads), ("DG_WAVE", t.wave_size),
          ("DG_ASYNC", int(vendor == "nvidia" and t.async_copy)),
          ("DG_TILE_M", c.tile_m), ("DG_TILE_N", c.tile_n), ("DG_TILE_K", c.tile_k),
          ("DG_WARP_M", c.warp_m), ("DG_WARP_N", c.warp_n),
          ("DG_ATOM", _atom_code(spec.atom.name)), ("DG_ATOM_M", spec.atom.m), ("DG_ATOM_N", spec.atom.n),
          ("DG_MMA_M", spec.mma_m), ("DG_MMA_N", spec.mma_n),
          ("DG_WGMMA", int(spec.wgmma)), ("DG_WG_N", c.warp_tile_n if spec.wgmma else 0),
          ("DG_VEC_A", spec.vec_a), ("DG_VEC_B", spec.vec_b), ("DG_VEC_C", spec.vec_c), ("DG_VEC_Z", spec.zero_vector),
          ("DG_SPLIT_K", spec.split_k), ("DG_K_OUTER", int(spec.lds_k_outer)), ("DG_STAGES", c.stages),
          ("DG_LDS_PAD", spec.lds_pad), ("DG_A_L1", int(spec.problem.Y * spec.problem.X > 1)), ("DG_POINTWISE", int(spec.pointwise)),
          ("DG_YTILDE", spec.decomposition.h.tilde), ("DG_XTILDE", spec.decomposition.w.tilde),
          ("DG_GCD_H", gcd(p.sH, p.dH)), ("DG_GCD_W", gcd(p.sW, p.dW)),
          ("DG_NSUB", len(recs)), ("DG_TILES", spec.tiles_per_group), ("DG_ZF_BLOCKS", spec.zero_fill_blocks),
          ("DG_PERSIST", int(spec.persistent)), ("DG_TMA", int(spec.tma)), ("DG_TILE_BLOCKS", tile_blocks or spec.tile_blocks)]
    if spec.tma:
        box = spec.tma_box or (1, 1, c.tile_m)
        d += [("DG_TMA_RECT", int(spec.tma_box is not None)), ("DG_BOX_N", box[0]), ("DG_BOX_H", box[1]),
              ("DG_BOX_W", box[2]), ("DG_BOX_ROWS", box[0] * box[1] * box[2]),
              ("DG_A_BOX_ELEMS", box[0] * box[1] * box[2] * c.tile_k)]
    if len(recs) == 1:
        d.append(("DG_SUB0", ", ".join(map(str, recs[0]))))
    else:
        d.append(("DG_SUB_TABLE", ", ".join("{" + ", ".join(map(str, r)) + "}" for r in recs)))
    if spec.nchw_dx:     # dX stored NCHW by the epilogues (transpose.nchw_dx_rule)
        d += [("DG_DX_NCHW", 1), ("DG_NCHW_VEC", spec.nchw_dx_vector)]
        sections = tuple(sections) + ("nchw_dx",)
    if spec.workspace_reduce:     # split-K partial sums into the fp32 workspace (splitk.py)
        d.append(("DG_WS_SLICE", spec.workspace_slice_elems))
        sections = tuple(sections) + ("skws",)
    if spec.math == "tf32":     # the TF32 atom and its shared-memory rows
        sections = tuple(sections) + ("tf32",)
        if spec.wgmma:          # wgmma .tf32: fp32 swizzled rows, K-major B, rounding loaders
            sections = tuple(sections) + ("wgtf32",)
    elif spec.wgmma:            # narrow 16-bit warpgroup tiles in the 64-byte swizzle
        if c.tile_k == 32:
            sections = tuple(sections) + ("wgk32",)
        if c.warp_tile_n == 32:
            sections = tuple(sections) + ("wgn32",)
        if c.warp_tile_n in WIDE_32_BLOCKS:   # B in 64-byte swizzled 32-wide blocks
            sections = tuple(sections) + ("wgb32",)
        elif c.warp_tile_n == 192:            # three 128-byte swizzled 64-wide blocks
            sections = tuple(sections) + ("wgn192",)
    if spec.tma and c.stages > 6:       # 7-8 mbarrier stages (the TMA schedule only)
        sections = tuple(sections) + ("st8",)
    if spec.schedule.pingpong:          # two warpgroups owning whole tiles in turn
        sections = tuple(sections) + ("pingpong",)
    if spec.producer_warpgroup and "ntshift" not in sections:   # registers handed to the consumers
        sections = tuple(sections) + ("pwg",)
        from ..tma import WARPGROUP_REGISTERS
        d += [("DG_PWG_PRODUCER_REGS", WARPGROUP_REGISTERS[0]), ("DG_PWG_CONSUMER_REGS", WARPGROUP_REGISTERS[1])]
    if spec.tma and spec.split_k > 1:   # split-K work units of the TMA schedule
        sections = tuple(sections) + ("tmask",)
        from ..spec import tma_min_k_tiles
        d.append(("DG_MIN_KTILES", tma_min_k_tiles(p, c.tile_k)))
    workspace = (0, 0)
    if getattr(spec, "stream_k", False):    # stream-K runs of k-tiles, the in-kernel fixup
        sections = tuple(sections) + ("tmsk",)
        d += [("DG_SK_KT", spec.stream_k_tiles), ("DG_SK_ITERS", f"{spec.tiles_per_group * spec.stream_k_tiles}ll"),
              ("DG_SK_FLAGS", spec.stream_k_flag_words)]
        workspace = (spec.workspace_bytes, spec.stream_k_flag_words * 4)
    d += list(extra)
    memset = spec.zero_fill == "memset" if memset is None else memset
    body = _read("dgrad.cu", frozenset(sections))
    body = body.replace(WGMMA_EMIT, wgmma_wrapper(c.warp_tile_n, p.dtype, spec.math) if spec.wgmma else "")
    return _make(name, vendor, t.arch, d, body, grid or spec.grid, spec.block,
                 spec.lds_bytes, memset=memset, tensor_maps=tensor_maps(spec) if maps is None else maps,
                 workspace=workspace)


def tensor_maps(spec) -> tuple:
    """The TMA tensor maps a wgmma=3 kernel takes, or ``()``.

    dY: pointwise, the GemmM x K matrix (row = dY pixel n*Ho*Wo + ho*Wo + wo, K contiguous)
    in boxes of tile_m rows x 64 channels; with a filter, the NHWC tensor (K, Wo, Ho, N
    innermost first) in boxes of 64 channels x the tile's pixel box (``spec.tma_box``),
    placed per filter tap so that pixels outside dY read as zero (the padding). W: the
    (cpg, Y*X, K) view of the (K, Y, X, cpg) filter in boxes of 64 c x one tap x 64 k (32 c in
    the 64-byte swizzle for warp_tile_n 96, 160 and 224). Both
    land in the 128-byte swizzled layouts of ``dgrad.cu`` (A K-major, B MN-major).
    """
    if not spec.tma:
        return ()
    p, c = spec.problem, spec.config
    eb = p.elem_bytes
    taps = p.Y * p.X
    if c.warp_tile_n in WIDE_32_BLOCKS:     # 32-wide W blocks in the 64-byte swizzle (dgrad.cu wgb32)
        w = TensorMapDesc("w", p.dtype, (p.cpg, taps, p.K), (p.cpg * eb, taps * p.cpg * eb), (32, 1, c.tile_k), 64)
    else:
        w = TensorMapDesc("w", p.dtype, (p.cpg, taps, p.K), (p.cpg * eb, taps * p.cpg * eb), (64, 1, c.tile_k))
    if spec.tma_box is None:
        dy = TensorMapDesc("dy", p.dtype, (p.K, p.N * p.Ho * p.Wo), (p.K * eb,), (c.tile_k, c.tile_m))
    else:
        bn, bh, bw = spec.tma_box
        dy = TensorMapDesc("dy", p.dtype, (p.K, p.Wo, p.Ho, p.N), (p.K * eb, p.Wo * p.K * eb, p.Ho * p.Wo * p.K * eb),
                           (c.tile_k, bw, bh, bn))
    return (dy, w)


REFERENCE_THREADS = 256


def emit_reference(problem: ConvProblem, vendor: str, arch: str) -> KernelSource:
    """The direct (naive) GPU reference, like MIOpen's ConvDirectNaiveConvBwd: one thread
    per dX element (NHWC), fp32 accumulation over (k, y, x) with the stride/dilation
    divisibility test, output written as fp32 (one more digit than the storage type)."""
    p = problem
    name = f"dgrad_naive_ref_{p.dtype}_{p.short_tag()}"
    d = _problem_defines(p) + [("DG_KERNEL_NAME", name), ("DG_THREADS", REFERENCE_THREADS)]
    blocks = -(-p.dx_elems // REFERENCE_THREADS)
    return _make(name, "amd" if vendor == "amd" else "nvidia", arch, d, _read("naive_ref.cu"),
                 (blocks, 1, 1), (REFERENCE_THREADS, 1, 1), 0)


TRANSPOSE_KERNELS = {2: "dgrad_transpose_b16", 4: "dgrad_transpose_b32"}
"""The layout-transform kernel of each element width, tile form (:mod:`miopen_solver.transpose`)."""
TRANSPOSE_BAND_KERNELS = {2: "dgrad_transpose_band_b16", 4: "dgrad_transpose_band_b32"}
"""The same, band form (few columns or small matrices)."""
TRANSPOSE_PAIR_KERNELS = {2: "dgrad_transpose_pair_b16", 4: "dgrad_transpose_pair_b32"}
"""Two transforms of one width in one launch, each in its own form
(:class:`~miopen_solver.transpose.TransposeLaunch`)."""
TRANSPOSE_FORMS = {"tile": TRANSPOSE_KERNELS, "band": TRANSPOSE_BAND_KERNELS, "pair": TRANSPOSE_PAIR_KERNELS}


def emit_transpose(elem_bytes: int, vendor: str, arch: str, grid, block, form: str = "tile") -> KernelSource:
    """The batched 2-D transpose (``transpose.cu``) for ``elem_bytes``-byte elements, its
    ``form`` (``"tile"``, ``"band"`` or ``"pair"``: the entry point); its sizes are kernel
    arguments -- ``(src, dst, batch, rows, cols)`` (the last three 64-bit), for the pair
    ``(src, dst, batch, rows, cols, gx, gy, form)`` per transform -- so the text and binary
    depend only on the width, form, vendor and arch. ``grid``/``block``: the launch
    (:class:`~miopen_solver.transpose.TransposeLaunch`).

    Raises:
        ValueError: ``elem_bytes`` is not 2 or 4, or an unknown form.
    """
    if elem_bytes not in TRANSPOSE_KERNELS:
        raise ValueError(f"no transpose kernel for {elem_bytes}-byte elements; allowed: 2, 4")
    if form not in TRANSPOSE_FORMS:
        raise ValueError(f"transpose form {form!r}; allowed: {', '.join(TRANSPOSE_FORMS)}")
    d = [("DT_KERNEL_NAME", TRANSPOSE_KERNELS[elem_bytes]), ("DT_BAND_KERNEL_NAME", TRANSPOSE_BAND_KERNELS[elem_bytes]),
         ("DT_PAIR_KERNEL_NAME", TRANSPOSE_PAIR_KERNELS[elem_bytes]), ("DT_EB", elem_bytes)]
    return _make(TRANSPOSE_FORMS[form][elem_bytes], "amd" if vendor == "amd" else "nvidia", arch, d,
                 _read("transpose.cu"), grid, block, 0)


def emit_subpixel_pack(problem, vendor: str, arch: str, name: str, grid, block) -> KernelSource:
    """The W -> W' pack of the sub-pixel schedules (``subpixel_pack.cu``) for ``problem``
    (:class:`~miopen_solver.subpixel.PackW`): its sizes are defines, arguments ``(w, w')``.
    ``grid``/``block``: the launch (``block`` 256 threads)."""
    from ..subpixel import virtual_filter
    p = problem
    yv, xv, top, left = virtual_filter(p)
    d = [("DP_KERNEL_NAME", name), ("DP_EB", p.elem_bytes), ("DP_K", p.K), ("DP_Y", p.Y), ("DP_X", p.X),
         ("DP_CPG", p.cpg), ("DP_SH", p.sH), ("DP_SW", p.sW), ("DP_PH", p.pH), ("DP_PW", p.pW), ("DP_YV", yv),
         ("DP_XV", xv), ("DP_TOP", top), ("DP_LEFT", left), ("DP_BLOCKS", grid[0])]
    return _make(name, "amd" if vendor == "amd" else "nvidia", arch, d, _read("subpixel_pack.cu"), grid, block, 0)


def emit_splitk_reduce(dtype: str, layout: str, vendor: str, arch: str, grid, block) -> KernelSource:
    """The split-K reduction (``splitk_reduce.cu``) for dX of ``dtype`` stored ``layout``
    (``"NHWC"`` or ``"NCHW"``); its sizes are kernel arguments (:class:`~miopen_solver.splitk.SplitKReduce`),
    so the text and binary depend only on the dtype, layout, vendor and arch. ``grid``/``block``:
    the launch of one reduction.

    Raises:
        ValueError: an unknown dtype or layout.
    """
    if dtype not in DTYPE_CODES or layout not in ("NHWC", "NCHW"):
        raise ValueError(f"no split-K reduction for {dtype} {layout}; allowed: {', '.join(DTYPE_CODES)} "
                         f"x NHWC, NCHW")
    name = f"dgrad_splitk_reduce_{dtype}_{layout.lower()}"
    d = [("DR_KERNEL_NAME", name), ("DG_DTYPE", DTYPE_CODES[dtype]), ("DR_NCHW", int(layout == "NCHW"))]
    return _make(name, "amd" if vendor == "amd" else "nvidia", arch, d, _read("splitk_reduce.cu"), grid, block, 0)
