"""The validated kernel spec: a problem, a target and a config with every derived value.

``DgradSpec`` = problem + target + :class:`~miopen_solver.config.PerfConfig` with every
derived value resolved (block size, atom, accumulators per lane, clamped vector widths,
resolved split_k and lds_k_outer, LDS bytes, sub-GEMM list, launch geometry).
:func:`make_spec` builds one or raises :class:`PerfConfigError` with the reason;
:func:`is_valid_performance_config` returns ``(ok, reason)``. A DgradSpec that exists is
valid and builds.

Rules common to every GEMM schedule (sources: rocKE ``DgradConvSpec.validate``, research
notes dgrad_kernels.md section 3.3; CUDA/HIP launch limits):

* tile_m divisible by warp_m*warp_tile_m, tile_n by warp_n*warp_tile_n; warp tile and
  tile_k divisible by a matrix atom that exists for the dtype on the target;
* block size <= the target's max threads;
* accumulators per lane <= the target's safe bound (a spilled accumulator file gave wrong
  dX in rocKE); on NVIDIA also accumulators + :data:`REGISTER_RESERVE` <= the registers a
  thread of the block may have (:func:`register_cap`);
* shared memory <= the target's capacity (:attr:`DgradSpec.lds_bytes`);
* the A, B and C tiles each spread evenly over the block's threads at width 1 at least;
* stages > 2 only with asynchronous copies;
* split_k in {-1} and [1, 64]; 0 is invalid; a split-K launch (split_k > 1) sums its slices
  by atomics into dX (fp16/bf16: an even cpg and a packed atomic on the target) or through
  an fp32 workspace and a reduction kernel (the warp-MMA, plain wgmma and TMA schedules;
  any cpg): :func:`split_k_reduce_mode`; the TMA schedule splits through work units of
  its persistent grid (grid z 1), the others through grid z;
* lds_k_outer=1 on a 16-bit dtype needs a transposing LDS fragment read;
* vector caps 0 or powers of two, clamped (never rejected) when too wide;
* the launch grid fits the target (x: tiles, y: G, z: split_k; 1 on the TMA schedule).

Each :class:`~miopen_solver.config.KernelSchedule` adds its own rules
(:data:`SCHEDULE_RULES`): the warpgroup schedules need sm_90a ``wgmma.mma_async`` shapes and
the 128-byte swizzle layout (PTX ISA; the 64-byte one for the narrow tiles, tile_k 32 or
warp_tile_n 32 on fp16/bf16 and the plain or persistent schedule), the persistent one a
single K slice, the TMA one the tensor-map rules of :mod:`miopen_solver.tma` and k-slices
that are never empty.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from functools import cached_property, lru_cache

from . import vectors
from .config import SPLIT_K_REDUCE, KernelSchedule, PerfConfig
from .errors import PerfConfigError, require
from .problem import ConvProblem
from .target import TF32_ATOMS, MmaAtom, Target
from .tilde import Decomposition, cached_decompose
from .tma import (TMA_MAX_STAGES, TMA_PRODUCER_THREADS, WARPGROUP_PRODUCER_THREADS, WARPGROUP_REGISTERS, check_tma,
                  tma_box, tma_box_tiles, tma_tile_k_rule)
from .transpose import WORKSPACE_ALIGN, native_problem, nchw_dx_rule

WGMMA_N = (64, 128, 256)
"""warp_tile_n values a warpgroup config may use (the instruction's N) on every warpgroup
schedule and dtype."""
WGMMA_NARROW = 32
"""The narrow tile side of the 16-bit plain and persistent warpgroup schedules: tile_k 32 (a
K-major A row of 64 bytes) and warp_tile_n 32 (an MN-major B row of 64 bytes, m64n32k16),
both in the 64-byte swizzle (PTX ISA, "Shared Memory Matrix Layout")."""
WGMMA_N_WIDE = (96, 160, 192, 224)
"""warp_tile_n values of the 16-bit warpgroup schedules (plain, persistent and TMA) beyond
:data:`WGMMA_N`, tile_n not a power of two: m64n96k16, m64n160k16 and m64n224k16 (W in
64-byte swizzled blocks of 32 columns, 3, 5 or 7 per warpgroup; 32-wide TMA boxes) and
m64n192k16 (three 128-byte swizzled blocks of 64 columns). tile_k is a multiple of 64 with
them. 160 and 224 cover 160- and 224-channel groups (and 320, 480, 672) in one or a few
column tiles without padding, where 128 and 256 pad."""
NARROW_SCHEDULES = frozenset({KernelSchedule.WGMMA, KernelSchedule.WGMMA_PERSISTENT})
"""The warpgroup schedules whose cp.async loaders store the 64-byte swizzle (the TMA one's
tensor maps are built for 128-byte rows and 64-wide boxes)."""
WGMMA_GROUP = 128
"""Threads of one warpgroup."""
REGISTER_RESERVE = 40
"""Registers a thread needs beside its accumulators (addresses, loop state, load staging):
ptxas gave 4-warpgroup wgmma kernels with 64 accumulators 96-128 registers, and refused
128 accumulators in a 512-thread block (C7602). At the cap ptxas may still park a few
scalars in local memory; accumulators never spill."""

MAX_SPLIT_K = 64
"""Largest accepted split-K degree (a bound on atomic and workspace traffic, not a hardware limit)."""
MAX_STAGES = 6
MAX_ZERO_FILL_BLOCKS = 2048
"""Most zero-fill blocks a launch appends (each loops over its share of dX)."""
LDS_PAD_BYTES = 16
"""Row padding of every shared-memory tile, bytes (one 16-byte access width: spreads rows
over banks)."""


ZERO_FILL_TAGS = {"memset": "_zfm", "blocks": "_zfb", "reduce": "", "none": ""}
"""How a kernel name spells its zero-fill kind (``reduce``: the name's ``_skws`` says it)."""
WORKSPACE_SCHEDULES = frozenset({KernelSchedule.WARP_MMA, KernelSchedule.WGMMA, KernelSchedule.WGMMA_TMA})
"""The schedules whose split-K launches may sum through the fp32 workspace (the persistent
cp.async schedule does not split K)."""
SPLIT_PERSISTENT = frozenset({KernelSchedule.WGMMA_TMA})
"""Persistent schedules that split K (:func:`_persistent_rules`): their blocks walk
``tiles x split_k`` work units, one k-slice of one tile each (``dgrad.cu``'s ``tmask``
sections), instead of a grid z of slices."""
SKWS_TAG = "_skws"
"""How a kernel name says that its split-K partial sums go to the workspace."""
STREAM_K_TAG = "_skst"
"""How a kernel name says stream-K (:attr:`DgradSpec.stream_k`)."""


def arch_tag(target: Target) -> str:
    """The target's arch as a C identifier (feature suffixes such as ``:sramecc+`` dropped)."""
    return re.sub(r"\W", "_", target.base_arch)


def spec_identity(spec) -> dict:
    """The first keys of every spec's ``as_dict`` (any spec type): its kernel name, schedule,
    problem key, math, arch, perf config and threads per block."""
    return {"kernel_name": spec.kernel_name, "schedule": spec.schedule.slug, "problem_key": spec.problem.problem_key(),
            "math": spec.math, "arch": spec.target.arch, "perf_config": spec.config.serialize(),
            "threads": spec.block_threads}


def family_reason(problem: ConvProblem, target: Target, family: str) -> str | None:
    """The guards every kernel family with its own rules starts with (``family`` names it in
    the sentence, e.g. ``"the direct schedule"``): a known vendor, a 2-D problem, mode conv."""
    if target.vendor not in ("nvidia", "amd", "cpu"):
        return f"target vendor {target.vendor!r} is not nvidia, amd or cpu"
    if problem.is_3d:
        return f"3-D problems are not supported by {family}"
    if problem.mode != "conv":
        return "transposed-mode problems (-m trans) are forward convolutions in MIOpen"
    return None


def _pick_atom(target: Target, dtype: str, cfg: PerfConfig) -> MmaAtom:
    """The first atom for ``dtype`` (a problem's ``compute_type``: ``tf32`` picks the TF32
    instruction) whose shape divides the warp tile and tile_k."""
    atoms = target.atoms_for(dtype)
    require(bool(atoms), f"no matrix atom for {dtype} on {target.arch}")
    for a in atoms:
        if cfg.warp_tile_m % a.m == 0 and cfg.warp_tile_n % a.n == 0 and cfg.tile_k % a.k == 0:
            return a
    shapes = ", ".join(f"{a.m}x{a.n}x{a.k}" for a in atoms)
    raise PerfConfigError(
        f"warp tile {cfg.warp_tile_m}x{cfg.warp_tile_n} with tile_k {cfg.tile_k} is not a multiple "
        f"of any {dtype} atom on {target.arch} ({shapes})")


def count_tiles(subs, tile_m: int, tile_n: int, groups: int = 1) -> int:
    """Output tiles of ``tile_m x tile_n`` over the sub-GEMMs ``subs``, times ``groups``."""
    return groups * sum(-(-s.gemm_m // tile_m) * -(-s.gemm_n // tile_n) for s in subs)


def resolve_split_k(problem: ConvProblem, target: Target, cfg: PerfConfig, decomp: Decomposition) -> int:
    """``split_k = -1`` -> a concrete degree (>= 1); any other value is returned as is.

    Split only when the output tiles fill less than half the machine (``num_cus``) and each
    slice keeps at least 4 k-tiles; powers of two up to :data:`MAX_SPLIT_K`; never where
    atomics are not allowed (see :func:`split_k_atomics_reason`: the workspace reduction is
    not chosen by ``-1``, only asked for by a split_k > 1)."""
    if cfg.split_k != -1:
        return cfg.split_k
    if split_k_atomics_reason(problem, target) is not None:
        return 1
    tiles = count_tiles(decomp.sub_gemms, cfg.tile_m, cfg.tile_n, problem.G)
    k_tiles = max(-(-s.gemm_k // cfg.tile_k) for s in decomp.sub_gemms)
    if tiles * 2 >= target.num_cus:
        return 1
    split = 1
    while split * 2 <= MAX_SPLIT_K and tiles * split * 2 <= target.num_cus and k_tiles // (split * 2) >= 4:
        split *= 2
    return split


def split_k_atomics_reason(problem: ConvProblem, target: Target) -> str | None:
    """Why split-K by atomic accumulation into dX is impossible here, or None.

    fp16/bf16 use a packed 2-wide atomic, so cpg must be even (the pair must stay inside
    one group's channel slab) and the target must have the packed atomic."""
    if problem.dtype == "fp32":
        return None
    if problem.cpg % 2:
        return f"split_k > 1 with {problem.dtype} needs an even cpg (packed 2-wide atomics); cpg={problem.cpg}"
    if not target.packed_atomics(problem.dtype):
        return f"{target.arch} has no packed {problem.dtype} atomic add, needed for split_k > 1"
    return None


def split_k_reduce_mode(problem: ConvProblem, target: Target, config: PerfConfig, split: int) -> str:
    """How a launch of ``config`` with the resolved split-K degree ``split`` sums its GemmK
    slices: ``"none"`` (split 1), ``"atomic"`` (every split adds into dX atomically, dX
    zeroed first) or ``"workspace"`` (every split stores fp32 partial sums into its slice of
    the workspace, a reduction kernel sums them: :mod:`miopen_solver.splitk`). The one rule:

    * ``split_k_reduce`` auto (0): atomics wherever they are allowed
      (:func:`split_k_atomics_reason`: fp32, or fp16/bf16 with an even cpg and the target's
      packed atomic), else the workspace (16-bit with an odd cpg, sm_80/gfx90a bf16);
    * atomic (1): atomics, refused where they are not allowed;
    * workspace (2): the workspace, on the schedules of :data:`WORKSPACE_SCHEDULES`;
    * stream (3): ``"stream"``, stream-K on the TMA schedule with split_k 1 or -1
      (:func:`stream_k_rules`), whatever ``split`` would have been.

    An NCHW dX keeps today's atomic path under auto (the kernel stores NCHW where
    :func:`~miopen_solver.transpose.nchw_dx_rule` allows, else NHWC through the dX
    transform); the workspace reduction stores an NCHW dX itself, with no Hi*Wi parity rule.

    Raises:
        PerfConfigError: the asked reduction cannot run here, as a sentence.
    """
    asked = SPLIT_K_REDUCE[config.split_k_reduce]
    if asked == "stream":           # on the TMA schedule alone: make_spec refuses it on the others first
        require(split <= 1, f"stream-K divides the k-tiles over the blocks itself; split_k must be 1 or -1, "
                            f"got {config.split_k}")
        stream_k_rules(problem, config)
        return "stream"
    if split <= 1:
        return "none"
    why = split_k_atomics_reason(problem, target)
    if asked == "atomic":
        require(why is None, f"{why}; split_k_reduce 2 (workspace) has no such rule")
        return "atomic"
    if asked == "workspace":
        require(config.schedule in WORKSPACE_SCHEDULES,
                f"{config.schedule.label} has no split-K workspace reduction (split_k_reduce 2)")
        return "workspace"
    if why is None:
        return "atomic"
    require(config.schedule in WORKSPACE_SCHEDULES, why or "")
    return "workspace"


def stream_k_rules(problem: ConvProblem, config: PerfConfig) -> None:
    """Stream-K's own rules (``dgrad.cu`` ``tmsk``): one group (the persistent blocks of one
    grid row share the k-tiles), and every tile the same k-tiles (``ceil(kpg / tile_k)``
    chunks of the same taps: one sub-GEMM, or sub-GEMMs of equal taps), so a block's run of
    k-tiles maps onto tiles by one division.

    Raises:
        PerfConfigError: the first rule broken, as a sentence.
    """
    require(problem.G == 1, f"stream-K runs one group; the problem has G={problem.G}")
    taps = {sg.y_dot_slice * sg.x_dot_slice for sg in cached_decompose(problem).sub_gemms}
    require(len(taps) == 1, "stream-K needs every tile to have the same k-tiles; the sub-GEMMs have "
                            f"{', '.join(map(str, sorted(taps)))} taps")


def default_lds_k_outer(problem: ConvProblem, target: Target, cfg: PerfConfig) -> bool:
    """The ``lds_k_outer=auto`` policy (rocKE ``default_lds_k_outer``, adapted).

    k-outer stores the W tile as it lies in memory (rows of k, c contiguous) and needs a
    transposing fragment read for 16-bit matrix atoms: on when the target has one and cpg is
    even (odd cpg loads W one element at a time, so the transpose read would only add cost);
    always on for fp32 (FFMA reads either layout without a transpose)."""
    if problem.dtype == "fp32":
        return True
    return target.transposed_lds_read and problem.cpg % 2 == 0 and cfg.warp_tile_n % 8 == 0


@dataclass(frozen=True)
class DgradSpec:
    """A problem, a target and a config with every derived value resolved and validated.

    Build with :func:`make_spec`; a DgradSpec that exists is valid and builds.
    """

    problem: ConvProblem
    target: Target
    config: PerfConfig
    atom: MmaAtom
    split_k: int
    lds_k_outer: bool
    vec_a: int
    vec_b: int
    vec_c: int
    decomposition: Decomposition
    split_k_reduce: str = "none"

    # --------------------------------------------------------------- derived values
    @property
    def schedule(self) -> KernelSchedule:
        """The kernel family (:class:`~miopen_solver.config.KernelSchedule`)."""
        return self.config.schedule

    @property
    def wgmma(self) -> bool:
        """Warpgroup MMA (sm_90a ``wgmma``): warps are counted in warpgroups."""
        return self.schedule.warpgroup

    @property
    def persistent(self) -> bool:
        """:attr:`KernelSchedule.WGMMA_PERSISTENT`: persistent blocks that loop over output
        tiles and issue the next tile's first copies before the current tile's epilogue (own
        dX staging tile)."""
        return self.schedule is KernelSchedule.WGMMA_PERSISTENT

    @property
    def tma(self) -> bool:
        """:attr:`KernelSchedule.WGMMA_TMA`: warp-specialised persistent blocks fed by
        tensor-memory copies (a producer beside the warpgroups, :func:`producer_threads`)."""
        return self.schedule.tma

    @property
    def block_threads(self) -> int:
        """Threads per block: :attr:`threads` (the ones that multiply), plus a TMA kernel's
        producer (:func:`producer_threads`)."""
        return self.threads + producer_threads(self.schedule, self.threads)

    @property
    def producer_warpgroup(self) -> bool:
        """A TMA block whose producer is a warpgroup handing registers to two consumer
        warpgroups (:func:`producer_threads`)."""
        return self.block_threads - self.threads == WARPGROUP_PRODUCER_THREADS

    @property
    def tile_blocks(self) -> int:
        """Blocks per group that compute tiles (grid x before zero-fill blocks): every tile
        its own block, or for a persistent kernel as many blocks as fit on the device at
        once (shared memory and an estimate of registers, accumulators + 88 per thread:
        ptxas gave 188-222 registers to 128-accumulator tiles, 118-147 to 64),
        split over the G groups, never more than the work units (the tiles; tiles x split_k
        on the TMA schedule)."""
        if not (self.persistent or self.tma):
            return self.tiles_per_group
        if self.stream_k:       # every resident block takes a run of k-tiles, none empty
            return max(1, min(self.tiles_per_group * self.stream_k_tiles, self.slots_per_row(1)))
        units = self.tiles_per_group * (self.split_k if self.config.schedule in SPLIT_PERSISTENT else 1)
        return max(1, min(units, self.slots_per_row(self.problem.G)))

    def slots_per_row(self, rows: int) -> int:
        """The blocks that fit on the device at once (:attr:`resident_blocks` on every
        multiprocessor) shared out over ``rows`` rows of a persistent grid (the G groups; a
        family's own rows, e.g. the NCHW pointwise schedule's N*G); may be 0."""
        return self.target.num_cus * self.resident_blocks // rows

    @property
    def stream_k(self) -> bool:
        """Stream-K (:func:`split_k_reduce_mode` ``"stream"``): the launch's k-tiles divided
        evenly over the persistent blocks, cut tiles summed in the kernel through the
        workspace."""
        return self.split_k_reduce == "stream"

    @property
    def stream_k_tiles(self) -> int:
        """k-tiles of every tile (stream-K's rule: all equal): the channel chunks of kpg
        times the taps."""
        return tma_min_k_tiles(self.problem, self.config.tile_k)

    @property
    def stream_k_flag_words(self) -> int:
        """32-bit flags at the start of the stream-K workspace, one per block, rounded up to
        256 bytes (the partial-sum slots after them stay aligned)."""
        return -(-self.tile_blocks // 64) * 64 if self.stream_k else 0

    @property
    def resident_blocks(self) -> int:
        """Blocks per multiprocessor a persistent grid is sized for: by shared memory, and by
        registers at an estimate of accumulators + 88 per thread (at least 1;
        :func:`check_binary` holds the built binary to it)."""
        return resident_blocks(self.target, self.lds_bytes, self.block_threads, self.accumulators_per_lane)

    @property
    def threads(self) -> int:
        """Threads that multiply (:func:`consumer_threads`)."""
        return consumer_threads(self.config, self.target)

    @property
    def sub_gemms(self) -> tuple:
        return self.decomposition.sub_gemms

    @property
    def pointwise(self) -> bool:
        """The direct-offset fast path: 1x1, stride 1, pad 0, any group count."""
        return self.problem.is_pointwise

    @property
    def mma_m(self) -> int:
        """Atoms per warp along M (covering tile_m / warp_m rows)."""
        return self.config.tile_m // (self.config.warp_m * self.atom.m)

    @property
    def mma_n(self) -> int:
        """Atoms per warp along N; for wgmma, 8-column chunks of the warpgroup's
        accumulator fragment (each laid out like an m16n8 C fragment per warp)."""
        if self.wgmma:
            return self.config.tile_n // (self.config.warp_n * 8)
        return self.config.tile_n // (self.config.warp_n * self.atom.n)

    @property
    def accumulators_per_lane(self) -> int:
        if self.wgmma:  # a 64xN fp32 fragment over 128 threads: N/2 per instruction
            return self.mma_m * self.mma_n * 4
        return self.mma_m * self.mma_n * self.atom.accumulators_per_lane(self.target.wave_size)

    @property
    def lds_pad(self) -> int:
        return LDS_PAD_BYTES // self.problem.elem_bytes

    @property
    def math(self) -> str:
        """The math the kernel runs: ``"tf32"`` on a TF32 atom (:data:`~miopen_solver.target.TF32_ATOMS`:
        operands rounded to TF32, fp32 accumulation), else the storage type."""
        return "tf32" if self.atom.name in TF32_ATOMS or self.atom.name.endswith("tf32") else self.problem.dtype

    @property
    def a_pad(self) -> int:
        """Padding of an A-tile row, elements: :attr:`lds_pad`; twice that on a TF32 atom,
        whose fragments read two consecutive k of a row as one 8-byte load (a row stride of
        8 words modulo 32 banks keeps those loads conflict-free)."""
        return 2 * self.lds_pad if self.math == "tf32" and not self.wgmma else self.lds_pad

    @property
    def b_pad(self) -> int:
        """Padding of a B-tile row, elements: as :attr:`a_pad` when B is stored m-outer
        (rows of k, read like A); :attr:`lds_pad` when k-outer (a TF32 fragment then reads
        single words of rows 2t and 2t+1, conflict-free at a row stride of 4 words)."""
        return self.lds_pad if self.lds_k_outer else self.a_pad

    @cached_property
    def nchw_dx(self) -> bool:
        """The kernel stores dX NCHW (``dx[((n*C + c)*Hi + hi)*Wi + wi]``) rather than NHWC:
        :func:`~miopen_solver.transpose.nchw_dx_rule`."""
        return nchw_dx_rule(self.problem, self.schedule, self.split_k, self.workspace_reduce)

    @property
    def workspace_reduce(self) -> bool:
        """Split-K through the fp32 workspace (:func:`split_k_reduce_mode`): the kernel stores
        partial sums, the reduction kernel stores dX (:mod:`miopen_solver.splitk`)."""
        return self.split_k_reduce == "workspace"

    @property
    def nchw_dx_vector(self) -> int:
        """Pixels per store of the staged epilogue's NCHW dX (``DG_NCHW_VEC``): the widest
        power of two of at most 16 bytes dividing the dX row (Wi; Hi*Wi for pointwise
        problems, whose GEMM rows run through whole images), so aligned runs never cross a
        row; runs the sub-GEMM breaks are stored element by element. 1 when dX is NHWC."""
        if not self.nchw_dx:
            return 1
        p = self.problem
        return vectors.pow2_divisor(p.Hi * p.Wi if self.pointwise else p.Wi, vectors.max_vector(p.elem_bytes))

    @property
    def staged_epilogue(self) -> bool:
        """dX tiles go through shared memory for row-wise vector stores (split_k == 1, not the
        TMA schedules); split-K stores straight from the registers (atomic adds into dX, or
        fp32 partial sums into the workspace), and the TMA schedules' warpgroups store their
        accumulators directly (``dg_epilogue_direct``: no shared memory after the stages)."""
        return self.split_k == 1 and not self.tma

    @property
    def lds_bytes(self) -> int:
        """Shared memory per block: the larger of the main loop's stages x (A tile + B
        tile) and the staged epilogue's C tile (it reuses the same memory), rows padded.
        wgmma tiles are swizzled instead of padded and need 1024-byte alignment (1024
        bytes of slack are added)."""
        c = self.config
        if self.wgmma:
            main = c.stages * (c.tile_m * c.tile_k + c.tile_k * c.tile_n) * self.problem.elem_bytes
            if self.tma:  # no dX staging; a full and an empty barrier (8 bytes each) per stage
                order = 16 if self.schedule.pingpong else 0   # the warpgroups' two turn barriers
                return main + 16 * c.stages + order + 1024
            epi = self.epilogue_bytes
            if self.persistent:  # the epilogue tile sits after the stages (they are refilling)
                return main + epi + 1024
            return max(main, epi) + 1024
        a = c.tile_m * (c.tile_k + self.a_pad)
        b = c.tile_k * (c.tile_n + self.b_pad) if self.lds_k_outer else c.tile_n * (c.tile_k + self.b_pad)
        main = c.stages * (a + b) * self.problem.elem_bytes
        return max(main, self.epilogue_bytes)

    @property
    def epilogue_bytes(self) -> int:
        """Shared memory of the staged epilogue's C tile: tile_m rows of tile_n channels, rows
        padded, or for an NCHW dX (:attr:`nchw_dx`) transposed, tile_n columns of tile_m
        pixels; 0 without a staged epilogue (split-K)."""
        c, pad = self.config, self.lds_pad
        if not self.staged_epilogue:
            return 0
        elems = c.tile_n * (c.tile_m + pad) if self.nchw_dx else c.tile_m * (c.tile_n + pad)
        return elems * self.problem.elem_bytes

    @property
    def tiles_per_group(self) -> int:
        c = self.config
        box = self.tma_box
        if box is not None:
            return sum(tma_box_tiles(self.problem, s, box) for s in self.sub_gemms) * -(-self.problem.cpg // c.tile_n)
        return count_tiles(self.sub_gemms, c.tile_m, c.tile_n)

    @property
    def tma_box(self) -> tuple | None:
        """The pixel box ``(images, rows, columns)`` of a sub-GEMM's (n, htilde, wtilde) grid
        one output tile of a TMA kernel covers when the problem is not pointwise: whole
        images when one fits in tile_m rows, else whole rows, else part of a row; at most
        tile_m pixels (the rest of the tile's rows are computed and not stored); one box for
        every sub-GEMM, sized by the largest slices. None for pointwise problems (flat
        GemmM rows) and other kernels."""
        if not self.tma or self.pointwise:
            return None
        return tma_box(self.problem, self.config.tile_m)

    @property
    def zero_fill(self) -> str:
        """How dX pixels no block writes become zero: ``"memset"`` (split-K accumulates
        atomically, so all of dX is zeroed first), ``"blocks"`` (extra blocks of the same
        launch write zeros to pixels no sub-GEMM covers), ``"reduce"`` (split-K through the
        workspace: the reduction kernel stores zeros there, reading no slice), or ``"none"``."""
        if self.split_k > 1 and not self.workspace_reduce:
            return "memset"
        if not self.decomposition.needs_zero_fill:
            return "none"
        return "reduce" if self.workspace_reduce else "blocks"

    @property
    def zero_fill_blocks(self) -> int:
        """Blocks appended to grid x that write zeros where no sub-GEMM writes (0 unless
        :attr:`zero_fill` is ``"blocks"``): one ``zero_vector``-wide store per thread and
        unit of ``N*Hi*Wi*C/zero_vector``, at most :data:`MAX_ZERO_FILL_BLOCKS` blocks (they
        loop)."""
        if self.zero_fill != "blocks":
            return 0
        p = self.problem
        units = p.N * p.Hi * p.Wi * (p.C // self.zero_vector)
        return max(1, min(MAX_ZERO_FILL_BLOCKS, -(-units // self.threads)))

    @property
    def zero_vector(self) -> int:
        """Elements per zero-fill store: the widest power of two (<= 16 bytes) dividing C;
        1 for an NCHW dX (element by element, pixels fastest)."""
        p = self.problem
        if self.nchw_dx:
            return 1
        return vectors.pow2_divisor(p.C, vectors.max_vector(p.elem_bytes))

    @property
    def grid(self) -> tuple:
        """Blocks along x, y, z: tile blocks (every tile, or the persistent blocks) plus the
        zero-fill blocks, G, the resolved split_k. The one place the launch shape is
        computed; the emitter and the solution take it from here."""
        z = 1 if self.config.schedule in SPLIT_PERSISTENT else self.split_k
        return (self.tile_blocks + self.zero_fill_blocks, self.problem.G, z)

    @property
    def block(self) -> tuple:
        """Threads per block along x, y, z."""
        return (self.block_threads, 1, 1)

    @property
    def workspace_slice_elems(self) -> int:
        """fp32 elements from one split-K workspace slice to the next: the launch's dX
        elements rounded up to a 256-byte multiple (0 without the workspace reduction)."""
        if not self.workspace_reduce:
            return 0
        return -(-self.problem.dx_elems * 4 // WORKSPACE_ALIGN) * WORKSPACE_ALIGN // 4

    @property
    def workspace_bytes(self) -> int:
        """The kernel's own device workspace, bytes: ``split_k`` fp32 slices of the launch's dX
        (:attr:`workspace_slice_elems` each) with the workspace reduction; with stream-K
        :attr:`stream_k_flag_words` flags and a tile_m x tile_n fp32 slot per block; else 0
        (NHWC is native, atomic split-K adds straight into dX). A split-N run reuses it per
        launch."""
        if self.stream_k:       # the flags, then one slot of fp32 partial sums per block
            return (self.stream_k_flag_words + self.tile_blocks * self.config.tile_m * self.config.tile_n) * 4
        return self.split_k * self.workspace_slice_elems * 4

    @cached_property
    def kernel_name(self) -> str:
        """A name that spells every parameter that changes the emitted code, so it
        identifies one binary (CUTLASS naming discipline): the target arch (wave size,
        vendor and async copies follow from it), dtype, tiles, warp grid and warp tile,
        atom, resolved vector widths, resolved split-K, B layout, stages, path (pointwise
        or number of tilde sub-GEMMs), zero-fill kind, ``_skws`` when split-K goes through the
        workspace (:attr:`workspace_reduce`), ``_dxnchw`` when it stores dX NCHW
        (:attr:`nchw_dx`) and the problem's compiled sizes (the dtype slot says ``tf32`` for
        TF32 math: :attr:`math`), e.g.
        ``dgrad_sm_90_fp16_t128x128x32_w2x2_a64x64_mma16816_v8v8v2_sk1_ko_s3_tilde4_n32c64h56...``.
        A valid C identifier (arch feature suffixes such as ``:sramecc+`` are dropped)."""
        p = self.problem
        path = "pw" if self.pointwise else f"tilde{len(self.sub_gemms)}"
        zf = ZERO_FILL_TAGS[self.zero_fill]
        path += self.loop_tag
        dx = "_dxnchw" if self.nchw_dx else ""
        ws = SKWS_TAG if self.workspace_reduce else STREAM_K_TAG if self.stream_k else ""
        return f"dgrad_{arch_tag(self.target)}_{self.math}_{self.tile_tag}_{path}{zf}{ws}{dx}_{p.short_tag()}"

    @property
    def loop_tag(self) -> str:
        """The main loop's part of :attr:`kernel_name` (and of the virtual-GEMM families' names
        built on this spec): ``_pb<blocks>`` persistent, ``_tma<blocks>`` TMA, ``_tmapp<blocks>``
        the ping-pong TMA main loop, else empty."""
        if self.persistent:
            return f"_pb{self.tile_blocks}"
        if self.tma:
            return f"_tma{'pp' if self.schedule.pingpong else ''}{self.tile_blocks}"
        return ""

    @property
    def tile_tag(self) -> str:
        """The tile part of :attr:`kernel_name`: tiles, warp grid and warp tile, atom,
        resolved vector widths, split-K, B layout and stages, e.g.
        ``t128x128x32_w2x2_a64x64_mma16816_v8v8v2_sk1_ko_s3``."""
        return self.tag_with()

    def tag_with(self, vec_c: int | None = None) -> str:
        """:attr:`tile_tag` with ``vec_c`` as the dX store width (a family whose epilogue
        stores dX at another width than the GEMM's C vectors, e.g. the NCHW patch runs)."""
        c = self.config
        vc = self.vec_c if vec_c is None else vec_c
        return (f"t{c.tile_m}x{c.tile_n}x{c.tile_k}_w{c.warp_m}x{c.warp_n}"
                f"_a{c.warp_tile_m}x{c.warp_tile_n}_{self.atom.name}_v{self.vec_a}v{self.vec_b}v{vc}"
                f"_sk{self.split_k}_{'ko' if self.lds_k_outer else 'mo'}_s{c.stages}")

    def emit(self):
        """The specialised ``dgrad.cu`` (:func:`miopen_solver.kernels.emit.emit`)."""
        from .kernels.emit import emit
        return emit(self)

    def to_record(self) -> dict:
        """The spec as plain data, every resolved value included, for a worker process
        (:meth:`~miopen_solver.solver.Solution.from_record` remakes the spec from its problem,
        target and config and compares it with this)."""
        d = self.decomposition
        return {"problem": self.problem.as_dict(), "target": self.target.to_record(),
                "config": self.config.serialize(), "atom": [self.atom.name, self.atom.m, self.atom.n, self.atom.k],
                "split_k": self.split_k, "split_k_reduce": self.split_k_reduce, "lds_k_outer": self.lds_k_outer,
                "vec": [self.vec_a, self.vec_b, self.vec_c],
                "decomposition": {"h": dataclasses.asdict(d.h), "w": dataclasses.asdict(d.w),
                                  "sub_gemms": [dataclasses.asdict(s) for s in d.sub_gemms],
                                  "needs_zero_fill": d.needs_zero_fill}}

    def as_dict(self) -> dict:
        """Plain data (JSON-ready) describing the resolved spec."""
        return spec_identity(self) | {
            "atom": self.atom.name,
            "accumulators_per_lane": self.accumulators_per_lane,
            "lds_bytes": self.lds_bytes,
            "vector_size_a": self.vec_a,
            "vector_size_b": self.vec_b,
            "vector_size_c": self.vec_c,
            "split_k": self.split_k,
            "split_k_reduce": self.split_k_reduce,
            "lds_k_outer": self.lds_k_outer,
            "stages": self.config.stages,
            "pointwise": self.pointwise,
            "zero_fill": self.zero_fill,
            "sub_gemms": len(self.sub_gemms),
            "tiles_per_group": self.tiles_per_group,
            "grid": list(self.grid),
            "tma_box": list(self.tma_box) if self.tma_box else None,
            "workspace_bytes": self.workspace_bytes,
        }


def make_spec(problem: ConvProblem, target: Target, config: PerfConfig) -> DgradSpec:
    """Validate ``config`` for ``problem`` on ``target`` and resolve every derived value.

    Specs and refusals are memoised per (problem, target, config): a process builds each spec
    once, however many verbs ask (default, validity, solution, search), and does not rebuild a
    config it refused (a rule checked on the built spec refuses after construction). The spec
    holds ``problem`` as given, layout flags included (see :func:`launch_spec` for the problem
    of a launch).

    Raises:
        PerfConfigError: the first rule the config breaks, as a sentence (a fresh exception
            each call, so a caller's ``config`` attribute never leaks into the next).
    """
    built = _cached_spec(problem, target, config)
    if isinstance(built, PerfConfigError):
        raise PerfConfigError(str(built), built.config)
    return built


def launch_spec(problem: ConvProblem, target: Target, config: PerfConfig):
    """:func:`make_spec` for the kernel a launch of ``problem`` (one launch's, in its own
    layouts) runs: the NCHW pointwise schedules read the layouts (:mod:`miopen_solver.nchw_pw`:
    dY and dX NCHW in place); every other schedule runs between layout transforms on the
    problem with dY and W NHWC (:func:`~miopen_solver.transpose.native_problem`; dX stays NCHW
    when it is NCHW in memory), which its spec holds.

    Raises:
        PerfConfigError: the first rule the config breaks, as a sentence.
    """
    return make_spec(problem if config.schedule.own_layouts else native_problem(problem), target, config)


def _build_spec(problem: ConvProblem, target: Target, config: PerfConfig):
    require(config.reduce != "stream" or config.schedule is KernelSchedule.WGMMA_TMA,
            f"stream-K (split_k_reduce 3) runs on {KernelSchedule.WGMMA_TMA.label} only; the config's "
            f"schedule is {config.schedule.label}")
    if config.schedule is KernelSchedule.DIRECT_PLANE:   # no GEMM tiles, NCHW planes in place
        from .direct_plane import make_plane_spec
        return make_plane_spec(problem, target, config)
    if config.schedule.direct:                       # no GEMM tiles: its own spec type and rules
        from .direct import make_direct_spec
        return make_direct_spec(problem, target, config)
    if config.schedule.patch:                        # a GEMM spec of a virtual problem inside
        from .patch import make_patch_spec
        return make_patch_spec(problem, target, config)
    if config.schedule.nchw_pointwise:               # likewise, batched over images in NCHW
        from .nchw_pw import make_nchw_pw_spec
        return make_nchw_pw_spec(problem, target, config)
    if config.schedule is KernelSchedule.NCHW_TMA:   # the TMA GEMM per image and tap in NCHW
        from .nchw_tma import make_nchw_tma_spec
        return make_nchw_tma_spec(problem, target, config)
    if config.schedule.subpixel:                     # every stride phase in one stride-1 GEMM
        from .subpixel import make_subpixel_spec
        return make_subpixel_spec(problem, target, config)
    if config.schedule.group_pack:                   # narrow groups packed, W block-diagonal
        from .group_pack import make_group_pack_spec
        return make_group_pack_spec(problem, target, config)
    return _build_gemm_spec(problem, target, config)



def _build_gemm_spec(problem: ConvProblem, target: Target, config: PerfConfig) -> DgradSpec:
    c, p, t = config, problem, target
    require(not p.is_3d, "3-D problems are not supported")
    require(p.mode == "conv", "transposed-mode problems (-m trans) are forward convolutions in MIOpen")
    for name in ("tile_m", "tile_n", "tile_k", "warp_m", "warp_n", "warp_tile_m", "warp_tile_n", "stages"):
        require(getattr(c, name) >= 1, f"{name} must be >= 1, got {getattr(c, name)}")
    for name in ("vector_size_a", "vector_size_b", "vector_size_c"):
        v = getattr(c, name)
        require(v >= 0 and (v & (v - 1)) == 0, f"{name} must be 0 (auto) or a power of two, got {v}")
    require(c.split_k == -1 or c.split_k >= 1,
           f"split_k must be -1 (choose) or >= 1, got {c.split_k}")
    require(c.split_k <= MAX_SPLIT_K, f"split_k must be <= {MAX_SPLIT_K}, got {c.split_k}")
    require(c.lds_k_outer in (-1, 0, 1), f"lds_k_outer must be -1 (auto), 0 or 1, got {c.lds_k_outer}")
    require(c.tile_m % (c.warp_m * c.warp_tile_m) == 0,
           f"tile_m {c.tile_m} is not a multiple of warp_m*warp_tile_m = {c.warp_m * c.warp_tile_m}")
    require(c.tile_n % (c.warp_n * c.warp_tile_n) == 0,
           f"tile_n {c.tile_n} is not a multiple of warp_n*warp_tile_n = {c.warp_n * c.warp_tile_n}")
    for rule in SCHEDULE_RULES[c.schedule]:
        rule(p, t, c)
    if c.schedule.warpgroup and p.compute_type == "tf32":
        atom = MmaAtom(f"wgmma64x{c.warp_tile_n}x8tf32", 64, c.warp_tile_n, 8)
    elif c.schedule.warpgroup:
        atom = MmaAtom(f"wgmma64x{c.warp_tile_n}x16", 64, c.warp_tile_n, 16)
    else:
        atom = _pick_atom(t, p.compute_type, c)
    threads = consumer_threads(c, t)
    block = threads + producer_threads(c.schedule, threads)
    require(block <= t.max_threads, f"block of {block} threads exceeds {t.arch}'s {t.max_threads}")
    if not t.async_copy:
        require(c.stages <= 2, f"stages {c.stages} > 2 needs asynchronous copies, which {t.arch} lacks")
    if c.schedule.tma:      # mbarrier stages: no cp.async group counts to bound them
        require(c.stages <= TMA_MAX_STAGES, f"{c.schedule.label} stages must be <= {TMA_MAX_STAGES}, got {c.stages}")
    else:
        more = f" ({KernelSchedule.WGMMA_TMA.label} takes up to {TMA_MAX_STAGES})" if c.stages <= TMA_MAX_STAGES else ""
        require(c.stages <= MAX_STAGES, f"stages must be <= {MAX_STAGES}, got {c.stages}{more}")

    decomp = cached_decompose(p)
    require(len(decomp.sub_gemms) > 0, "the problem has no non-empty sub-GEMM")

    if c.schedule in SPLIT_PERSISTENT:    # only an explicit split_k > 1 splits a persistent grid
        split = max(1, c.split_k)
    else:
        split = 1 if c.schedule.persistent else resolve_split_k(p, t, c, decomp)
    reduce = split_k_reduce_mode(p, t, c, split)

    if c.schedule.warpgroup:
        k_outer = p.compute_type != "tf32"        # .tf32 wgmma operands are K-major only
    elif c.lds_k_outer == -1:
        k_outer = default_lds_k_outer(p, t, c)
    else:
        k_outer = bool(c.lds_k_outer)
        if k_outer and p.dtype != "fp32" and not t.transposed_lds_read:
            raise PerfConfigError(
                f"lds_k_outer=1 needs a transposing LDS fragment read for {p.dtype}, which {t.arch} lacks")

    eb = p.elem_bytes
    if c.schedule.tma:
        # TMA moves whole boxes and the epilogue stores 16-byte chunks (K, cpg % 8 == 0 is a
        # rule), or with an NCHW dX single elements: the widths are fixed, the caps do not
        # apply, no tile spreads over threads.
        va = vb = vc = 16 // eb
        if split > 1:       # the split epilogue adds or stores adjacent column pairs
            vc = 2
        if nchw_dx_rule(p, c.schedule, split, reduce == "workspace"):
            vc = 1
    else:
        va = vectors.clamp_to_tile(vectors.choose(c.vector_size_a, p.kpg, eb), c.tile_k, c.tile_m, threads)
        vb = vectors.clamp_to_tile(vectors.choose(c.vector_size_b, p.cpg, eb), c.tile_n, c.tile_k, threads)
        require(va > 0, f"the {c.tile_m}x{c.tile_k} A tile does not spread evenly over {threads} threads")
        require(vb > 0, f"the {c.tile_k}x{c.tile_n} B tile does not spread evenly over {threads} threads")
        # dX store width. split_k == 1: the epilogue stages the tile in shared memory and
        # stores rows of c in vectors (16 bytes at most, along c, bounded by cpg), clamped so
        # the tile spreads evenly over the threads. split_k > 1: atomics straight from the
        # accumulators -- packed pairs for fp16/bf16 (cpg even, checked above), scalars for fp32;
        # through the workspace, fp32 pairs of adjacent columns where the atom holds them
        # (mma.sync, wgmma) and cpg is even, else scalars.
        # A kernel that stores dX NCHW (nchw_dx_rule) stores one element at a time.
        nchw = nchw_dx_rule(p, c.schedule, split, reduce == "workspace")
        if reduce == "workspace":
            vc = 2 if paired_accumulators(atom) and p.cpg % 2 == 0 else 1
        elif split > 1:
            vc = 1 if p.dtype == "fp32" or nchw else 2
        else:
            cap = 1 if nchw else vectors.choose(c.vector_size_c, p.cpg, eb)
            vc = vectors.clamp_to_tile(cap, c.tile_n, c.tile_m, threads)
            require(vc > 0, f"the {c.tile_m}x{c.tile_n} C tile does not spread evenly over {threads} threads")

    spec = DgradSpec(problem=p, target=t, config=c, atom=atom, split_k=split, lds_k_outer=k_outer,
                     vec_a=va, vec_b=vb, vec_c=vc, decomposition=decomp, split_k_reduce=reduce)
    require(spec.accumulators_per_lane <= t.max_accumulators,
           f"{spec.accumulators_per_lane} accumulators per lane exceed {t.arch}'s safe bound {t.max_accumulators} "
           f"(warp_tile_m x warp_tile_n = {c.warp_tile_m}x{c.warp_tile_n} over one "
           f"{'warpgroup' if c.schedule.warpgroup else 'warp'}'s threads); use a smaller warp tile, "
           f"or more warps along warp_m / warp_n")
    if t.vendor == "nvidia":
        cap = WARPGROUP_REGISTERS[1] if spec.producer_warpgroup else register_cap(t, block)
        require(spec.accumulators_per_lane + REGISTER_RESERVE <= cap,
               f"{spec.accumulators_per_lane} accumulators per thread plus about {REGISTER_RESERVE} registers for "
               f"addresses and loads exceed the {cap} registers a thread of a {block}-thread block may use "
               f"({t.regs_per_cu} per multiprocessor in 4 partitions, 255 per thread)")
    if c.schedule.tma and spec.lds_bytes > t.lds_bytes:
        per = (c.tile_m * c.tile_k + c.tile_k * c.tile_n) * eb + 16
        fixed = spec.lds_bytes - c.stages * per        # alignment slack, and ping-pong's turn barriers
        turns = " and 16 bytes of the warpgroups' turn barriers" if fixed > 1024 else ""
        raise PerfConfigError(
            f"{c.schedule.label}: {c.stages} stages of {per} bytes (A {c.tile_m}x{c.tile_k}, B {c.tile_k}x{c.tile_n} "
            f"and two mbarriers) plus 1024 bytes of alignment slack{turns} need {spec.lds_bytes} bytes of shared "
            f"memory, more than {t.arch}'s {t.lds_bytes}; at most {max(0, (t.lds_bytes - fixed) // per)} stages of "
            f"this tile fit")
    require(spec.lds_bytes <= t.lds_bytes,
           f"{spec.lds_bytes} bytes of shared memory exceed {t.arch}'s {t.lds_bytes}")
    if spec.tma:            # the maps the runtime will encode: refused here, not at the launch
        from .kernels.emit import tensor_maps
        from .tma import check_maps
        check_maps(tensor_maps(spec), eb, c.schedule.label)
    gx, gy, gz = t.max_grid
    require(spec.tiles_per_group <= gx,
           f"{spec.tiles_per_group} tiles per group exceed {t.arch}'s grid limit {gx} along x")
    limit = t.max_grid_work_items
    require(limit is None or spec.tiles_per_group * threads <= limit,
           f"{spec.tiles_per_group} tiles x {threads} threads exceed {t.arch}'s {limit} work-items along x")
    require(p.G <= gy, f"G={p.G} groups exceed {t.arch}'s grid limit {gy} along y")
    require(split <= gz, f"split_k={split} exceeds {t.arch}'s grid limit {gz} along z")
    return spec


def consumer_threads(config: PerfConfig, target: Target) -> int:
    """Threads of a block that multiply: ``warp_m x warp_n`` warps (warpgroups on the
    warpgroup schedules), twice that on the ping-pong schedule (two warpgroups, each owning
    whole tiles in turn)."""
    group = WGMMA_GROUP if config.schedule.warpgroup else target.wave_size
    return config.warp_m * config.warp_n * group * (2 if config.schedule.pingpong else 1)


def producer_threads(schedule: KernelSchedule, threads: int) -> int:
    """Threads beside the ``threads`` that multiply: on a TMA schedule with two consumer
    warpgroups (the ping-pong schedule, and 256-thread tiles) a producer warpgroup that hands
    its registers to them (:data:`~miopen_solver.tma.WARPGROUP_PRODUCER_THREADS`,
    :data:`~miopen_solver.tma.WARPGROUP_REGISTERS`), on the other TMA blocks a producer warp,
    else 0."""
    if schedule.tma and threads == 2 * WGMMA_GROUP:
        return WARPGROUP_PRODUCER_THREADS
    return TMA_PRODUCER_THREADS if schedule.tma else 0


def resident_blocks(target: Target, lds_bytes: int, block_threads: int, accumulators_per_lane: int) -> int:
    """Blocks of ``block_threads`` threads and ``lds_bytes`` of shared memory that fit on one
    multiprocessor of ``target`` at once: by shared memory (1024 bytes of slack each) and by
    registers at an estimate of ``accumulators_per_lane`` + 88 per thread (ptxas gave 188-222
    registers to 128-accumulator wgmma tiles, 118-147 to 64); at least 1."""
    by_smem = (target.lds_bytes + 1024) // (lds_bytes + 1024)
    by_regs = target.regs_per_cu // (block_threads * (accumulators_per_lane + 88))
    return max(1, min(by_smem, by_regs))


def paired_accumulators(atom: MmaAtom) -> bool:
    """Whether a lane's accumulators ``e`` and ``e + 1`` are adjacent columns of one row
    (``DG_ACC_PAIRED`` in ``dgrad.cu``): the mma.sync m16n8k16 and m16n8k8 (TF32) and the wgmma
    fragments."""
    return atom.name in ("mma16816", "mma1688tf32") or atom.name.startswith("wgmma")


def _warpgroup_rules(p: ConvProblem, t: Target, c: PerfConfig) -> None:
    """The warpgroup schedules: sm_90a ``wgmma.mma_async`` m64nNk16 from 128-byte-swizzled
    shared memory; ``warp_m x warp_n`` warpgroups of ``warp_tile_m x warp_tile_n``. For
    fp16/bf16 the plain and persistent schedules (:data:`NARROW_SCHEDULES`) also take the
    narrow side :data:`WGMMA_NARROW` as tile_k and as warp_tile_n, whose 64-byte rows use the
    64-byte swizzle. fp16/bf16 on every warpgroup schedule also take warp_tile_n 96 and 192
    (:data:`WGMMA_N_WIDE`)."""
    s = c.schedule.label
    require(t.wgmma, f"{s} needs warpgroup MMA (sm_90a wgmma), which {t.arch} lacks")
    tf32 = p.compute_type == "tf32"
    if tf32:        # fp32 data with TF32 math (-M 0): k8 instructions on the plain main loop
        require(c.schedule is KernelSchedule.WGMMA,
                f"{s} needs fp16 or bf16 data; fp32 with TF32 math (-M 0) runs on schedule 1 (wgmma) only")
        require(c.tile_k % 32 == 0, f"{s} with TF32 needs tile_k a multiple of 32 (128-byte rows of fp32), "
                                    f"got {c.tile_k}")
        require(c.lds_k_outer != 1, f"{s} with TF32 reads W K-major (.tf32 operands are K-major only); "
                                    f"lds_k_outer must be -1 or 0")
    else:
        require(p.dtype in ("fp16", "bf16"),
                f"{s} needs fp16 or bf16 data (or fp32 with TF32 math, -M 0, on schedule 1), got {p.dtype}")
    if c.schedule.tma:      # before the swizzle rules below, which admit other widths on other schedules
        tma_tile_k_rule(c, s)
    require(c.warp_tile_m % 64 == 0, f"{s} needs warp_tile_m a multiple of 64 (m64 instructions), "
                                     f"got {c.warp_tile_m}")
    narrow_ok = not tf32 and c.schedule in NARROW_SCHEDULES
    if c.warp_tile_n == WGMMA_NARROW:
        # m64n32k16: a k row of the warpgroup's 32 columns of W is 64 bytes, stored and read in
        # the 64-byte swizzle; the cp.async loaders of the plain and persistent main loops store it.
        require(narrow_ok, f"{s} takes warp_tile_n {WGMMA_NARROW} (64-byte swizzled W rows) only for fp16/bf16 "
                           f"on the plain or persistent warpgroup schedule (1, 2)")
    elif c.warp_tile_n in WGMMA_N_WIDE:
        # m64n96k16, m64n160k16, m64n224k16 (W in 64-byte swizzled 32-wide blocks) and
        # m64n192k16 (128-byte swizzled 64-wide blocks): 16-bit operands, k-tiles of
        # 128-byte swizzled dY rows.
        require(not tf32, f"{s} takes warp_tile_n {c.warp_tile_n} only for fp16/bf16 "
                          f"(TF32 runs m64nNk8 with N in {{{', '.join(map(str, WGMMA_N))}}})")
        require(c.tile_k % 64 == 0, f"{s} with warp_tile_n {c.warp_tile_n} needs tile_k a multiple of 64 "
                                    f"(128-byte swizzled dY rows), got {c.tile_k}")
    else:
        wide = "" if tf32 else f", or {', '.join(map(str, WGMMA_N_WIDE))} for fp16/bf16"
        require(c.warp_tile_n in WGMMA_N,
                f"{s} needs warp_tile_n in {{{', '.join(map(str, WGMMA_N))}}}{wide}"
                f"{f' (or {WGMMA_NARROW} for fp16/bf16 on schedules 1 and 2)' if narrow_ok else ''}, "
                f"got {c.warp_tile_n}")
    # One instruction spans the warpgroup's whole column range (its N is warp_tile_n),
    # so the warpgroups along N must cover tile_n exactly.
    require(c.tile_n == c.warp_n * c.warp_tile_n,
            f"{s} needs tile_n = warp_n*warp_tile_n (one instruction spans a warpgroup's columns); "
            f"got tile_n {c.tile_n}, warp_n*warp_tile_n {c.warp_n * c.warp_tile_n}")
    if not tf32:
        # tile_k 32: one 64-byte swizzled dY row per pixel, and with kpg 32 one filter tap per
        # k-tile (the tap-uniform K loop); wider k-tiles are 128-byte swizzled rows.
        require(c.tile_k % 64 == 0 or (c.tile_k == WGMMA_NARROW and narrow_ok),
                f"{s} needs tile_k a multiple of 64 (128-byte swizzled rows)"
                f"{f' or {WGMMA_NARROW} (one 64-byte swizzled row)' if narrow_ok else ''}, got {c.tile_k}")
        require(c.lds_k_outer != 0, f"{s} reads W k-outer (MN-major B operand); lds_k_outer must be -1 or 1")


def tma_min_k_tiles(p: ConvProblem, tile_k: int) -> int:
    """k-tiles of the TMA kernel's shortest sub-GEMM: its K loop runs ``ceil(kpg / tile_k)``
    channel chunks of every tap (``dgrad.cu``: ``chunks * taps``), so a sub-GEMM of
    ``y_dot_slice * x_dot_slice`` taps has that many times the chunks (``DG_MIN_KTILES``)."""
    chunks = -(-p.kpg // tile_k)
    return min(sg.y_dot_slice * sg.x_dot_slice * chunks for sg in cached_decompose(p).sub_gemms)


def _persistent_rules(p: ConvProblem, t: Target, c: PerfConfig) -> None:
    """The persistent schedules overlap a tile's loads with the previous tile's epilogue (at
    least two stages). The cp.async one stores each tile once (no split K); the TMA one
    (:data:`SPLIT_PERSISTENT`) walks ``tiles x split_k`` work units, k-slice z of a tile
    holding k-tiles ``[z*kt/split_k, (z+1)*kt/split_k)`` of its ``kt``, so ``split_k`` may not
    exceed the k-tiles of the shortest sub-GEMM (every slice non-empty)."""
    s = c.schedule.label
    if c.schedule in SPLIT_PERSISTENT:
        if c.split_k > 1:
            shortest = tma_min_k_tiles(p, c.tile_k)
            require(c.split_k <= shortest,
                    f"{s}: split_k {c.split_k} exceeds the {shortest} k-tiles of the shortest sub-GEMM "
                    f"(its taps x ceil(kpg / tile_k)); every k-slice must be non-empty")
    else:
        require(c.split_k in (-1, 1), f"{s} stores each dX tile once; split_k must be 1 or -1, got {c.split_k}")
    require(c.stages >= 2, f"{s} prefetches the next tile; stages must be >= 2, got {c.stages}")


PINGPONG_TILE_M = (64, 128)
"""tile_m of a ping-pong tile: one or two m64 wgmma instructions a warpgroup (the tiles its
search offers and its tests run)."""


def _pingpong_rules(p: ConvProblem, t: Target, c: PerfConfig) -> None:
    """The ping-pong schedule: each of the two consumer warpgroups owns a whole tile, so the
    tile is one warpgroup's (``warp_m = warp_n = 1``: ``tile_m = warp_tile_m``, ``tile_n =
    warp_tile_n``); :func:`_persistent_rules` keeps ``split_k`` at 1 or -1 and
    :func:`_build_spec` refuses stream-K, so a tile is never split over k."""
    s = c.schedule.label
    require(c.warp_m == 1 and c.warp_n == 1,
            f"{s}: each warpgroup owns a whole tile; warp_m and warp_n must be 1, got {c.warp_m}x{c.warp_n}")
    require(c.tile_m == c.warp_tile_m,
            f"{s}: the tile is one warpgroup's; tile_m must equal warp_tile_m, got {c.tile_m} and {c.warp_tile_m}")
    require(c.tile_m in PINGPONG_TILE_M, f"{s}: tile_m must be 64 or 128 (one or two m64 instructions a "
                                         f"warpgroup), got {c.tile_m}")


SCHEDULE_RULES = {
    KernelSchedule.WARP_MMA: (),
    KernelSchedule.WGMMA: (_warpgroup_rules,),
    KernelSchedule.WGMMA_PERSISTENT: (_warpgroup_rules, _persistent_rules),
    KernelSchedule.WGMMA_TMA: (_warpgroup_rules, check_tma, _persistent_rules),   # tile_k 64 before k-tiles
    KernelSchedule.WGMMA_TMA_PINGPONG: (_warpgroup_rules, _pingpong_rules, check_tma, _persistent_rules),
    KernelSchedule.DIRECT: (),          # its own spec and rules: miopen_solver.direct
    KernelSchedule.DIRECT_NCHW: (),
    KernelSchedule.DIRECT_PLANE: (),    # its own spec and rules: miopen_solver.direct_plane
    KernelSchedule.PATCH_GEMM: (),      # its own rules (miopen_solver.patch), then its main loop's
    KernelSchedule.PATCH_GEMM_WGMMA: (),
    KernelSchedule.PATCH_GEMM_PERSISTENT: (),
    KernelSchedule.PATCH_GEMM_TMA: (),
    KernelSchedule.PATCH_GEMM_PINGPONG: (),
    KernelSchedule.NCHW_POINTWISE: (),  # its own rules (miopen_solver.nchw_pw), then its main loop's
    KernelSchedule.NCHW_POINTWISE_WGMMA: (),
    KernelSchedule.NCHW_POINTWISE_PERSISTENT: (),
    KernelSchedule.GROUP_PACK: (),      # its own rules (miopen_solver.group_pack), then its main loop's
    KernelSchedule.GROUP_PACK_WGMMA: (),
    KernelSchedule.NCHW_TMA: (),        # its own rules (miopen_solver.nchw_tma), then its main loop's
    KernelSchedule.SUBPIXEL: (),        # its own rules (miopen_solver.subpixel), then its main loop's
    KernelSchedule.SUBPIXEL_WGMMA: (),
    KernelSchedule.SUBPIXEL_TMA: (),
    KernelSchedule.SUBPIXEL_PINGPONG: (),
}
"""Each schedule's rules beyond the common ones, in order (the first broken one is the
reason); every schedule has an entry (test_spec checks)."""


def _spec_or_refusal(problem: ConvProblem, target: Target, config: PerfConfig):
    try:
        return _build_spec(problem, target, config)
    except PerfConfigError as e:
        return e


_cached_spec = lru_cache(maxsize=1024)(_spec_or_refusal)


def register_cap(target: Target, block_threads: int) -> int:
    """Registers one thread of a ``block_threads`` block may use on an NVIDIA target: the
    register file is four 16 K partitions, one per SM sub-partition, and a block's warps
    are spread over them, so the busiest partition holds ceil(warps / 4) warps; allocation
    is in steps of 8 per thread, 255 at most (CUDA occupancy rules; ptxas gave a 9-warp TMA
    block 168, not 65536 / 288 = 227)."""
    warps = -(-block_threads // 32)
    per_partition = target.regs_per_cu // 4
    return min(255, per_partition // (-(-warps // 4) * 32) // 8 * 8)


def check_binary(spec, resources: dict | None) -> str | None:
    """Why a built binary does not match what ``spec`` assumed, or None (also when the
    runtime reports no ``resources``).

    ``resources`` holds ``registers`` per thread and ``static_shared`` bytes (the runtime's
    function attributes). Checked: the registers fit the block (the :func:`register_cap` the
    rules assumed), static plus the spec's dynamic shared memory fit the target, and for a
    persistent grid the blocks per multiprocessor it was sized for (:attr:`DgradSpec.resident_blocks`)
    are resident with the real register count (else the grid's last blocks would wait for a
    second wave: a silent slow launch).
    """
    if not resources:
        return None
    t = spec.target
    regs, static = int(resources.get("registers", 0)), int(resources.get("static_shared", 0))
    threads = spec.block_threads
    if t.vendor == "nvidia":
        cap = register_cap(t, threads)
        if regs > cap:
            return f"the binary uses {regs} registers per thread; a {threads}-thread block may use {cap}"
    if static + spec.lds_bytes > t.lds_bytes:
        return (f"the binary needs {static} static + {spec.lds_bytes} dynamic bytes of shared memory; "
                f"{t.arch} has {t.lds_bytes}")
    if spec.schedule.persistent and regs:
        by_smem = (t.lds_bytes + 1024) // (spec.lds_bytes + static + 1024)
        resident = min(by_smem, t.regs_per_cu // (threads * (-(-regs // 8) * 8)))
        if resident < spec.resident_blocks:
            return (f"the persistent grid was sized for {spec.resident_blocks} resident blocks per "
                    f"multiprocessor; the binary ({regs} registers per thread) allows {resident}")
    return None


def is_valid_performance_config(problem: ConvProblem, target: Target, config: PerfConfig) -> tuple:
    """MIOpen's IsValidPerformanceConfig: ``(True, "")`` or ``(False, reason)`` where
    ``reason`` is the first rule :func:`launch_spec` found broken (``problem`` is a launch's,
    in its own layouts). Never raises for a :class:`PerfConfig`."""
    try:
        launch_spec(problem, target, config)
    except PerfConfigError as e:
        return False, str(e)
    return True, ""
