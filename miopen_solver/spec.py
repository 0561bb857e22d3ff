"""Performance configs and the validated kernel spec.

``PerfConfig`` is the tunable part (MIOpen's PerformanceConfig): plain integers serialised
as MIOpen does, comma-separated in field order::

    tile_m,tile_n,tile_k,warp_m,warp_n,warp_tile_m,warp_tile_n,
    vector_size_a,vector_size_b,vector_size_c,split_k,lds_k_outer,stages[,wgmma]

The 14th field ``wgmma`` is optional and written only when it is not 0, so every 13-field
config (perf-db records, fixtures) keeps its meaning: 0 = warp-level MMA (``mma.sync`` /
MFMA / FFMA), 1 = warpgroup MMA (sm_90a ``wgmma.mma_async``), 2 = the same with persistent
blocks (each loops over output tiles and issues the next tile's first copies before the
current tile's epilogue; split_k 1, stages >= 2), 3 = warp-specialised persistent blocks fed
by tensor-memory copies (TMA, ``cp.async.bulk.tensor``): one
producer warp beside the warpgroups issues whole A/B tiles onto shared-memory barriers and
the warpgroups store dX straight from their accumulators (tile_k 64, split_k 1, stages >= 2,
kpg a multiple of 64 when G > 1, K and cpg multiples of 8 for the 16-byte tensor strides;
pointwise tiles are flat GemmM rows, other problems take boxes of a tilde sub-GEMM's
pixel grid, :func:`tma_box`).
With ``wgmma`` 1, 2 or 3,
``warp_m x warp_n`` counts warpgroups (128 threads each) and ``warp_tile_m x
warp_tile_n`` is one warpgroup's tile: ``warp_tile_m`` a multiple of 64 (one m64
instruction per 64 rows), ``warp_tile_n`` 64, 128 or 256 (the instruction's N) with
``tile_n = warp_n * warp_tile_n``,
``tile_k`` a multiple of 64 (128-byte swizzled rows), B stored k-outer.

``vector_size_*`` are caps (0 = as wide as allowed), ``split_k`` is -1 (choose) or >= 1,
``lds_k_outer`` is -1 (auto), 0 (off, B tile stored m-outer) or 1 (on, k-outer).

``DgradSpec`` = problem + target + config with every derived value resolved (block size,
atom, accumulators per lane, clamped vector widths, resolved split_k and lds_k_outer, LDS
bytes, sub-GEMM list). :func:`make_spec` builds one or raises :class:`PerfConfigError`
with the reason; :func:`is_valid_performance_config` returns ``(ok, reason)``.

:func:`default_performance_config` is MIOpen's GetDefaultPerformanceConfig: a constant-time
heuristic that always returns a config :func:`make_spec` accepts (or raises when none of
its short fixed fallback list does either).

Validation rules and their sources (rocKE ``DgradConvSpec.validate``, research notes
dgrad_kernels.md section 3.3; CUDA/HIP launch limits):

* tile_m divisible by warp_m*warp_tile_m, tile_n by warp_n*warp_tile_n; warp tile and
  tile_k divisible by a matrix atom that exists for the dtype on the target;
* block size (warp_m*warp_n*wave) <= the target's max threads;
* accumulators per lane <= the target's safe bound (a spilled accumulator file gave wrong
  dX in rocKE); on NVIDIA also accumulators + :data:`REGISTER_RESERVE` <= the registers a
  thread of the block may have (:func:`register_cap`: 16 K per SM sub-partition over the
  busiest partition's warps, at most 255);
* shared memory <= the target's capacity: the larger of stages x (padded A + B tiles) and,
  when split_k == 1, the staged epilogue's padded C tile (it reuses the same memory);
* the A, B and C tiles each spread evenly over the block's threads at width 1 at least;
* stages > 2 only with asynchronous copies;
* split_k in {-1} and [1, 64]; 0 is invalid; split_k > 1 with fp16/bf16 needs an even cpg
  and a packed atomic on the target;
* lds_k_outer=1 on a 16-bit dtype needs a transposing LDS fragment read;
* vector caps 0 or powers of two, clamped (never rejected) when too wide;
* the launch grid fits the target (x: tiles, y: G, z: split_k);
* wgmma=1 only on a target with warpgroup MMA (sm_90a), for fp16/bf16, with the tile
  shapes above (PTX ISA ``wgmma.mma_async`` shapes and the 128-byte swizzle layout);
  wgmma=3 also needs tensor-memory copies (CUDA driver ``cuTensorMapEncodeTiled``: global
  strides multiples of 16 bytes, box sides <= 256, 128-byte swizzle rows of 64 elements).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from functools import cached_property, lru_cache

from . import vectors
from .errors import PerfConfigError
from .problem import ConvProblem
from .target import MmaAtom, Target
from .tilde import Decomposition, decompose

FIELDS = ("tile_m", "tile_n", "tile_k", "warp_m", "warp_n", "warp_tile_m", "warp_tile_n",
          "vector_size_a", "vector_size_b", "vector_size_c", "split_k", "lds_k_outer", "stages", "wgmma")
OPTIONAL_FIELDS = 1
"""Trailing fields that may be left out (then 0): ``wgmma``."""
WGMMA_N = (64, 128, 256)
"""warp_tile_n values a wgmma config may use (the instruction's N)."""
WGMMA_GROUP = 128
"""Threads of one warpgroup."""
REGISTER_RESERVE = 40
"""Registers a thread needs beside its accumulators (addresses, loop state, load staging):
ptxas gave 4-warpgroup wgmma kernels with 64 accumulators 96-128 registers, and refused
128 accumulators in a 512-thread block (cap 128: "Insufficient registers", C7602). At the
cap ptxas may still park a few scalars in local memory: a TMA block of two 128x128
warpgroups (128 accumulators at 168 registers) spills 12 bytes; accumulators never spill."""

TMA_PRODUCER_THREADS = 32
"""The producer warp of a wgmma=3 block."""
TMA_BOX_K = 64
"""k extent of a TMA box: one 128-byte swizzled row of fp16/bf16."""
TMA_MAX_BOX = 256
"""Largest box side a tensor map takes (CUDA driver API, cuTensorMapEncodeTiled)."""

MAX_SPLIT_K = 64
"""Largest accepted split-K degree (a bound on atomic traffic, not a hardware limit)."""
MAX_STAGES = 6
LDS_PAD_BYTES = 16
"""Row padding of every shared-memory tile, bytes (one 16-byte access width: spreads rows
over banks)."""


@dataclass(frozen=True)
class PerfConfig:
    """Tuning parameters of the implicit-GEMM dgrad kernel (see module docstring)."""

    tile_m: int = 128
    tile_n: int = 128
    tile_k: int = 32
    warp_m: int = 2
    warp_n: int = 2
    warp_tile_m: int = 64
    warp_tile_n: int = 64
    vector_size_a: int = 0
    vector_size_b: int = 0
    vector_size_c: int = 0
    split_k: int = 1
    lds_k_outer: int = -1
    stages: int = 3
    wgmma: int = 0

    def __post_init__(self):
        for name in FIELDS:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int):
                raise PerfConfigError(f"perf config field {name} must be an integer, got {v!r}")

    def serialize(self) -> str:
        """MIOpen's perf-db VALUES form: fields joined by ``,`` (13 fields, or 14 when
        ``wgmma`` is not 0)."""
        names = FIELDS if self.wgmma else FIELDS[:len(FIELDS) - OPTIONAL_FIELDS]
        return ",".join(str(getattr(self, f)) for f in names)

    @classmethod
    def parse(cls, text: str) -> "PerfConfig":
        """Inverse of :meth:`serialize`.

        Only the syntax is checked here; whether the values suit a problem is
        :func:`is_valid_performance_config`'s question.

        Raises:
            PerfConfigError: an empty string, a wrong field count or a non-integer field,
                naming it and listing the expected fields.
        """
        if not isinstance(text, str):
            raise PerfConfigError(f"perf config must be a string, got {type(text).__name__}")
        body = text.strip().strip('"').strip("'").strip()
        required = len(FIELDS) - OPTIONAL_FIELDS
        if not body:
            raise PerfConfigError(f"perf config is empty; expected {required} comma-separated "
                                  f"integers: {','.join(FIELDS[:required])}[,{','.join(FIELDS[required:])}]")
        parts = [p.strip() for p in body.split(",")]
        if not required <= len(parts) <= len(FIELDS):
            raise PerfConfigError(
                f"perf config {text!r} has {len(parts)} fields; expected {required} or {len(FIELDS)}: "
                f"{','.join(FIELDS[:required])}[,{','.join(FIELDS[required:])}]")
        vals = {}
        for name, p in zip(FIELDS, parts):
            try:
                vals[name] = int(p, 10)
            except ValueError:
                raise PerfConfigError(f"perf config field {name}={p!r} is not an integer") from None
        return cls(**vals)

    def replace(self, **kw) -> "PerfConfig":
        return dataclasses.replace(self, **kw)

    def __str__(self) -> str:
        return self.serialize()


def _check(cond: bool, reason: str):
    if not cond:
        raise PerfConfigError(reason)


def _pick_atom(target: Target, dtype: str, cfg: PerfConfig) -> MmaAtom:
    atoms = target.atoms_for(dtype)
    _check(bool(atoms), f"no matrix atom for {dtype} on {target.arch}")
    for a in atoms:
        if cfg.warp_tile_m % a.m == 0 and cfg.warp_tile_n % a.n == 0 and cfg.tile_k % a.k == 0:
            return a
    shapes = ", ".join(f"{a.m}x{a.n}x{a.k}" for a in atoms)
    raise PerfConfigError(
        f"warp tile {cfg.warp_tile_m}x{cfg.warp_tile_n} with tile_k {cfg.tile_k} is not a multiple "
        f"of any {dtype} atom on {target.arch} ({shapes})")


cached_decompose = lru_cache(maxsize=256)(decompose)
"""Memoised :func:`~miopen_solver.tilde.decompose` (problems are frozen; the result too):
search and validation call it once per config."""


def count_tiles(subs, tile_m: int, tile_n: int, groups: int = 1) -> int:
    """Output tiles of ``tile_m x tile_n`` over the sub-GEMMs ``subs``, times ``groups``."""
    return groups * sum(-(-s.gemm_m // tile_m) * -(-s.gemm_n // tile_n) for s in subs)


def resolve_split_k(problem: ConvProblem, target: Target, cfg: PerfConfig, decomp: Decomposition) -> int:
    """``split_k = -1`` -> a concrete degree (>= 1); any other value is returned as is.

    Split only when the output tiles fill less than half the machine (``num_cus``) and each
    slice keeps at least 4 k-tiles; powers of two up to :data:`MAX_SPLIT_K`; never where
    atomics are not allowed (see :func:`split_k_atomics_reason`)."""
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
    """Why split-K (atomic accumulation into dX) is impossible here, or None.

    fp16/bf16 use a packed 2-wide atomic, so cpg must be even (the pair must stay inside
    one group's channel slab) and the target must have the packed atomic."""
    if problem.dtype == "fp32":
        return None
    if problem.cpg % 2:
        return f"split_k > 1 with {problem.dtype} needs an even cpg (packed 2-wide atomics); cpg={problem.cpg}"
    if not target.packed_atomics(problem.dtype):
        return f"{target.arch} has no packed {problem.dtype} atomic add, needed for split_k > 1"
    return None


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

    # --------------------------------------------------------------- derived values
    @property
    def wgmma(self) -> bool:
        """Warpgroup MMA (sm_90a ``wgmma``): warps are counted in warpgroups."""
        return bool(self.config.wgmma)

    @property
    def persistent(self) -> bool:
        """wgmma=2: persistent blocks that loop over output tiles and issue the next tile's
        first copies before the current tile's epilogue (own dX staging tile)."""
        return self.config.wgmma == 2

    @property
    def tma(self) -> bool:
        """wgmma=3: warp-specialised persistent blocks fed by tensor-memory copies (one
        producer warp beside the warpgroups)."""
        return self.config.wgmma == 3

    @property
    def block_threads(self) -> int:
        """Threads per block: :attr:`threads` (the ones that multiply), plus the producer
        warp of a TMA kernel."""
        return self.threads + (TMA_PRODUCER_THREADS if self.tma else 0)

    @property
    def tile_blocks(self) -> int:
        """Blocks per group that compute tiles (grid x before zero-fill blocks): every tile
        its own block, or for a persistent kernel as many blocks as fit on the device at
        once (shared memory and an estimate of registers, accumulators + 88 per thread:
        ptxas gave 188-222 registers to 128-accumulator tiles, 118-147 to 64),
        split over the G groups, never more than the tiles."""
        if not (self.persistent or self.tma):
            return self.tiles_per_group
        t = self.target
        by_smem = (t.lds_bytes + 1024) // (self.lds_bytes + 1024)
        by_regs = t.regs_per_cu // (self.block_threads * (self.accumulators_per_lane + 88))
        slots = t.num_cus * max(1, min(by_smem, by_regs))
        return max(1, min(self.tiles_per_group, slots // self.problem.G))

    @property
    def threads(self) -> int:
        group = WGMMA_GROUP if self.wgmma else self.target.wave_size
        return self.config.warp_m * self.config.warp_n * group

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
    def staged_epilogue(self) -> bool:
        """dX tiles go through shared memory for row-wise vector stores (split_k == 1);
        split-K accumulates atomically straight from the registers."""
        return self.split_k == 1

    @property
    def lds_bytes(self) -> int:
        """Shared memory per block: the larger of the main loop's stages x (A tile + B
        tile) and the staged epilogue's C tile (it reuses the same memory), rows padded.
        wgmma tiles are swizzled instead of padded and need 1024-byte alignment (1024
        bytes of slack are added)."""
        c, pad = self.config, self.lds_pad
        if self.wgmma:
            main = c.stages * (c.tile_m * c.tile_k + c.tile_k * c.tile_n) * self.problem.elem_bytes
            if self.tma:  # no dX staging; a full and an empty barrier (8 bytes each) per stage
                return main + 16 * c.stages + 1024
            epi = c.tile_m * (c.tile_n + pad) * self.problem.elem_bytes if self.staged_epilogue else 0
            if self.persistent:  # the epilogue tile sits after the stages (they are refilling)
                return main + epi + 1024
            return max(main, epi) + 1024
        a = c.tile_m * (c.tile_k + pad)
        b = c.tile_k * (c.tile_n + pad) if self.lds_k_outer else c.tile_n * (c.tile_k + pad)
        main = c.stages * (a + b) * self.problem.elem_bytes
        epi = c.tile_m * (c.tile_n + pad) * self.problem.elem_bytes if self.staged_epilogue else 0
        return max(main, epi)

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
        """How dX pixels no block writes become zero: ``"memset"`` (split-K accumulates, so
        all of dX is zeroed first), ``"blocks"`` (extra blocks of the same launch write zeros
        to pixels no sub-GEMM covers), or ``"none"``."""
        if self.split_k > 1:
            return "memset"
        return "blocks" if self.decomposition.needs_zero_fill else "none"

    @property
    def workspace_bytes(self) -> int:
        """No workspace: NHWC is native and split-K accumulates straight into dX."""
        return 0

    @cached_property
    def kernel_name(self) -> str:
        """A name that spells every parameter that changes the emitted code, so it
        identifies one binary (CUTLASS naming discipline): the target arch (wave size,
        vendor and async copies follow from it), dtype, tiles, warp grid and warp tile,
        atom, resolved vector widths, resolved split-K, B layout, stages, path (pointwise
        or number of tilde sub-GEMMs), zero-fill kind and the problem's compiled sizes, e.g.
        ``dgrad_sm_90_fp16_t128x128x32_w2x2_a64x64_mma16816_v8v8v2_sk1_ko_s3_tilde4_n32c64h56...``.
        A valid C identifier (arch feature suffixes such as ``:sramecc+`` are dropped)."""
        c, p = self.config, self.problem
        arch = re.sub(r"\W", "_", self.target.arch.split(":")[0])
        path = "pw" if self.pointwise else f"tilde{len(self.sub_gemms)}"
        zf = {"memset": "_zfm", "blocks": "_zfb", "none": ""}[self.zero_fill]
        if self.persistent:
            path += f"_pb{self.tile_blocks}"
        if self.tma:
            path += f"_tma{self.tile_blocks}"
        return (f"dgrad_{arch}_{p.dtype}_t{c.tile_m}x{c.tile_n}x{c.tile_k}_w{c.warp_m}x{c.warp_n}"
                f"_a{c.warp_tile_m}x{c.warp_tile_n}_{self.atom.name}_v{self.vec_a}v{self.vec_b}v{self.vec_c}"
                f"_sk{self.split_k}_{'ko' if self.lds_k_outer else 'mo'}_s{c.stages}_{path}{zf}"
                f"_{p.short_tag()}")

    def as_dict(self) -> dict:
        """Plain data (JSON-ready) describing the resolved spec."""
        return {
            "kernel_name": self.kernel_name,
            "problem_key": self.problem.problem_key(),
            "arch": self.target.arch,
            "perf_config": self.config.serialize(),
            "threads": self.block_threads,
            "atom": self.atom.name,
            "accumulators_per_lane": self.accumulators_per_lane,
            "lds_bytes": self.lds_bytes,
            "vector_size_a": self.vec_a,
            "vector_size_b": self.vec_b,
            "vector_size_c": self.vec_c,
            "split_k": self.split_k,
            "lds_k_outer": self.lds_k_outer,
            "stages": self.config.stages,
            "pointwise": self.pointwise,
            "zero_fill": self.zero_fill,
            "sub_gemms": len(self.sub_gemms),
            "tiles_per_group": self.tiles_per_group,
            "tma_box": list(self.tma_box) if self.tma_box else None,
            "workspace_bytes": self.workspace_bytes,
        }


def make_spec(problem: ConvProblem, target: Target, config: PerfConfig) -> DgradSpec:
    """Validate ``config`` for ``problem`` on ``target`` and resolve every derived value.

    Raises:
        PerfConfigError: the first rule the config breaks, as a sentence.
    """
    c, p, t = config, problem, target
    _check(not p.is_3d, "3-D problems are not supported")
    _check(p.mode == "conv", "transposed-mode problems (-m trans) are forward convolutions in MIOpen")
    for name in ("tile_m", "tile_n", "tile_k", "warp_m", "warp_n", "warp_tile_m", "warp_tile_n", "stages"):
        _check(getattr(c, name) >= 1, f"{name} must be >= 1, got {getattr(c, name)}")
    for name in ("vector_size_a", "vector_size_b", "vector_size_c"):
        v = getattr(c, name)
        _check(v >= 0 and (v & (v - 1)) == 0, f"{name} must be 0 (auto) or a power of two, got {v}")
    _check(c.split_k == -1 or c.split_k >= 1,
           f"split_k must be -1 (choose) or >= 1, got {c.split_k}")
    _check(c.split_k <= MAX_SPLIT_K, f"split_k must be <= {MAX_SPLIT_K}, got {c.split_k}")
    _check(c.lds_k_outer in (-1, 0, 1), f"lds_k_outer must be -1 (auto), 0 or 1, got {c.lds_k_outer}")
    _check(c.tile_m % (c.warp_m * c.warp_tile_m) == 0,
           f"tile_m {c.tile_m} is not a multiple of warp_m*warp_tile_m = {c.warp_m * c.warp_tile_m}")
    _check(c.tile_n % (c.warp_n * c.warp_tile_n) == 0,
           f"tile_n {c.tile_n} is not a multiple of warp_n*warp_tile_n = {c.warp_n * c.warp_tile_n}")
    _check(c.wgmma in (0, 1, 2, 3),
           f"wgmma must be 0 (warp-level MMA), 1 (warpgroup MMA), 2 (persistent warpgroup MMA) or 3 (warp-specialised "
           f"TMA warpgroup MMA), got {c.wgmma}")
    if c.wgmma:
        _check(t.wgmma, f"wgmma={c.wgmma} needs warpgroup MMA (sm_90a wgmma), which {t.arch} lacks")
        _check(p.dtype in ("fp16", "bf16"), f"wgmma={c.wgmma} needs fp16 or bf16 data, got {p.dtype}")
        _check(c.warp_tile_m % 64 == 0,
               f"wgmma={c.wgmma} needs warp_tile_m a multiple of 64 (m64 instructions), got {c.warp_tile_m}")
        _check(c.warp_tile_n in WGMMA_N,
               f"wgmma={c.wgmma} needs warp_tile_n in {{{', '.join(map(str, WGMMA_N))}}}, got {c.warp_tile_n}")
        # One instruction spans the warpgroup's whole column range (its N is warp_tile_n),
        # so the warpgroups along N must cover tile_n exactly.
        _check(c.tile_n == c.warp_n * c.warp_tile_n,
               f"wgmma={c.wgmma} needs tile_n = warp_n*warp_tile_n (one instruction spans a warpgroup's "
               f"columns); got tile_n {c.tile_n}, warp_n*warp_tile_n {c.warp_n * c.warp_tile_n}")
        _check(c.tile_k % 64 == 0,
               f"wgmma={c.wgmma} needs tile_k a multiple of 64 (128-byte swizzled rows), got {c.tile_k}")
        _check(c.lds_k_outer != 0, f"wgmma={c.wgmma} reads W k-outer (MN-major B operand); lds_k_outer must be -1 or 1")
        if c.wgmma == 2:
            _check(c.split_k in (-1, 1), f"wgmma=2 (persistent) stages dX through shared memory; split_k must be "
                                         f"1 or -1, got {c.split_k}")
            _check(c.stages >= 2, f"wgmma=2 (persistent) prefetches the next tile; stages must be >= 2, got {c.stages}")
        if c.wgmma == 3:
            _check_tma(p, t, c)
        atom = MmaAtom(f"wgmma64x{c.warp_tile_n}x16", 64, c.warp_tile_n, 16)
    else:
        atom = _pick_atom(t, p.dtype, c)
    threads = c.warp_m * c.warp_n * (WGMMA_GROUP if c.wgmma else t.wave_size)
    block = threads + (TMA_PRODUCER_THREADS if c.wgmma == 3 else 0)
    _check(block <= t.max_threads, f"block of {block} threads exceeds {t.arch}'s {t.max_threads}")
    if not t.async_copy:
        _check(c.stages <= 2, f"stages {c.stages} > 2 needs asynchronous copies, which {t.arch} lacks")
    _check(c.stages <= MAX_STAGES, f"stages must be <= {MAX_STAGES}, got {c.stages}")

    decomp = cached_decompose(p)
    _check(len(decomp.sub_gemms) > 0, "the problem has no non-empty sub-GEMM")

    if c.split_k > 1:
        why = split_k_atomics_reason(p, t)
        _check(why is None, why or "")
    split = 1 if c.wgmma in (2, 3) else resolve_split_k(p, t, c, decomp)

    if c.wgmma:
        k_outer = True
    elif c.lds_k_outer == -1:
        k_outer = default_lds_k_outer(p, t, c)
    else:
        k_outer = bool(c.lds_k_outer)
        if k_outer and p.dtype != "fp32" and not t.transposed_lds_read:
            raise PerfConfigError(
                f"lds_k_outer=1 needs a transposing LDS fragment read for {p.dtype}, which {t.arch} lacks")

    eb = p.elem_bytes
    if c.wgmma == 3:
        # TMA moves whole boxes and the epilogue stores 16-byte chunks (K, cpg % 8 == 0 is a
        # rule): the widths are fixed, the caps do not apply, no tile spreads over threads.
        va = vb = vc = 16 // eb
    else:
        va = vectors.clamp_to_tile(vectors.choose(c.vector_size_a, p.kpg, eb), c.tile_k, c.tile_m, threads)
        vb = vectors.clamp_to_tile(vectors.choose(c.vector_size_b, p.cpg, eb), c.tile_n, c.tile_k, threads)
        _check(va > 0, f"the {c.tile_m}x{c.tile_k} A tile does not spread evenly over {threads} threads")
        _check(vb > 0, f"the {c.tile_k}x{c.tile_n} B tile does not spread evenly over {threads} threads")
        # dX store width. split_k == 1: the epilogue stages the tile in shared memory and
        # stores rows of c in vectors (16 bytes at most, along c, bounded by cpg), clamped so
        # the tile spreads evenly over the threads. split_k > 1: atomics straight from the
        # accumulators -- packed pairs for fp16/bf16 (cpg even, checked above), scalars for fp32.
        if split > 1:
            vc = 1 if p.dtype == "fp32" else 2
        else:
            vc = vectors.clamp_to_tile(vectors.choose(c.vector_size_c, p.cpg, eb), c.tile_n, c.tile_m, threads)
            _check(vc > 0, f"the {c.tile_m}x{c.tile_n} C tile does not spread evenly over {threads} threads")

    spec = DgradSpec(problem=p, target=t, config=c, atom=atom, split_k=split, lds_k_outer=k_outer,
                     vec_a=va, vec_b=vb, vec_c=vc, decomposition=decomp)
    _check(spec.accumulators_per_lane <= t.max_accumulators,
           f"{spec.accumulators_per_lane} accumulators per lane exceed {t.arch}'s safe bound {t.max_accumulators}")
    if t.vendor == "nvidia":
        cap = register_cap(t, block)
        _check(spec.accumulators_per_lane + REGISTER_RESERVE <= cap,
               f"{spec.accumulators_per_lane} accumulators per thread plus about {REGISTER_RESERVE} registers for "
               f"addresses and loads exceed the {cap} registers a thread of a {block}-thread block may use "
               f"({t.regs_per_cu} per multiprocessor in 4 partitions, 255 per thread)")
    _check(spec.lds_bytes <= t.lds_bytes,
           f"{spec.lds_bytes} bytes of shared memory exceed {t.arch}'s {t.lds_bytes}")
    gx, gy, gz = t.max_grid
    _check(spec.tiles_per_group <= gx,
           f"{spec.tiles_per_group} tiles per group exceed {t.arch}'s grid limit {gx} along x")
    limit = t.max_grid_work_items
    _check(limit is None or spec.tiles_per_group * threads <= limit,
           f"{spec.tiles_per_group} tiles x {threads} threads exceed {t.arch}'s {limit} work-items along x")
    _check(p.G <= gy, f"G={p.G} groups exceed {t.arch}'s grid limit {gy} along y")
    _check(split <= gz, f"split_k={split} exceeds {t.arch}'s grid limit {gz} along z")
    return spec


def register_cap(target: Target, block_threads: int) -> int:
    """Registers one thread of a ``block_threads`` block may use on an NVIDIA target: the
    register file is four 16 K partitions, one per SM sub-partition, and a block's warps
    are spread over them, so the busiest partition holds ceil(warps / 4) warps; allocation
    is in steps of 8 per thread, 255 at most (CUDA occupancy rules; ptxas gave a 9-warp TMA
    block 168, not 65536 / 288 = 227)."""
    warps = -(-block_threads // 32)
    per_partition = target.regs_per_cu // 4
    return min(255, per_partition // (-(-warps // 4) * 32) // 8 * 8)


TMA_MIN_FILL = 0.75
"""Least share of a TMA tile's rows that hold dX pixels for the default to take it."""


def tma_fill(problem: ConvProblem, tile_m: int) -> float:
    """Share of a TMA tile's tile_m GEMM rows that hold box pixels: 1 for pointwise problems
    (flat rows), else box pixels / tile_m (:func:`tma_box`)."""
    if problem.is_pointwise:
        return 1.0
    bn, bh, bw = tma_box(problem, tile_m)
    return bn * bh * bw / tile_m


def tma_box(problem: ConvProblem, tile_m: int) -> tuple:
    """``(images, rows, columns)`` of the (n, htilde, wtilde) pixel grid per TMA output tile
    (see :attr:`DgradSpec.tma_box`), for the largest sub-GEMM slices."""
    p = problem
    subs = cached_decompose(p).sub_gemms
    h = max(s.h_slice for s in subs)
    w = max(s.w_slice for s in subs)
    if h * w <= tile_m:
        return (min(p.N, tile_m // (h * w)), h, w)
    if w <= tile_m:
        return (1, min(h, tile_m // w), w)
    return (1, 1, tile_m)


def tma_box_tiles(problem: ConvProblem, sub, box: tuple) -> int:
    """Boxes covering one sub-GEMM's (n, htilde, wtilde) grid (per column tile)."""
    bn, bh, bw = box
    return -(-problem.N // bn) * -(-sub.h_slice // bh) * -(-sub.w_slice // bw)


TMA_DEFAULT = PerfConfig(128, 256, 64, 2, 1, 64, 256, 0, 0, 0, 1, -1, 4, 3)
"""The warp-specialised TMA tile the default takes for large stride-1 problems."""
TMA_TAPS_DEFAULT = PerfConfig(128, 128, 64, 1, 1, 128, 128, 0, 0, 0, 1, -1, 4, 3)
"""The TMA tile the default takes for mid-sized stride-1 problems with filter taps."""
TMA_STRIDED_DEFAULT = PerfConfig(256, 128, 64, 2, 1, 128, 128, 0, 0, 0, 1, -1, 4, 3)
"""The TMA tile the default takes for strided problems with filter taps."""


def tma_reason(p: ConvProblem, t: Target, c: PerfConfig) -> str | None:
    """Why wgmma=3 cannot run ``c`` on ``p`` (the first rule broken), or None."""
    try:
        _check_tma(p, t, c)
    except PerfConfigError as e:
        return str(e)
    return None


def _tma_fits(p: ConvProblem, t: Target, c: PerfConfig) -> bool:
    """The default may take the TMA config ``c``: its rules hold and its pixel box fills at
    least :data:`TMA_MIN_FILL` of the tile's rows."""
    return tma_reason(p, t, c) is None and tma_fill(p, c.tile_m) >= TMA_MIN_FILL


def _check_tma(p: ConvProblem, t: Target, c: PerfConfig) -> None:
    """The rules of wgmma=3 beyond those of wgmma=1 (see module docstring)."""
    _check(t.vendor == "nvidia", f"wgmma=3 needs tensor-memory copies (TMA), which {t.arch} lacks")
    _check(c.tile_k == TMA_BOX_K, f"wgmma=3 (TMA) loads 64-element (128-byte) swizzled rows; tile_k must be "
                                  f"{TMA_BOX_K}, got {c.tile_k}")
    _check(c.tile_m <= TMA_MAX_BOX, f"wgmma=3 (TMA) loads the A tile in one box of at most {TMA_MAX_BOX} rows; "
                                    f"tile_m {c.tile_m} is larger")
    _check(c.split_k in (-1, 1), f"wgmma=3 (TMA) stores dX from the registers once; split_k must be 1 or -1, "
                                 f"got {c.split_k}")
    _check(c.stages >= 2, f"wgmma=3 (TMA) overlaps loads with the multiply; stages must be >= 2, got {c.stages}")
    _check(p.K % 8 == 0 and p.cpg % 8 == 0,
           f"wgmma=3 (TMA) needs K and cpg multiples of 8 (16-byte tensor strides), got K={p.K}, cpg={p.cpg}")
    _check(p.G == 1 or p.kpg % TMA_BOX_K == 0,
           f"wgmma=3 (TMA) with G > 1 needs kpg a multiple of {TMA_BOX_K} (a box must not cross groups), "
           f"got kpg={p.kpg}")


def is_valid_performance_config(problem: ConvProblem, target: Target, config: PerfConfig) -> tuple:
    """MIOpen's IsValidPerformanceConfig: ``(True, "")`` or ``(False, reason)`` where
    ``reason`` is the first rule :func:`make_spec` found broken. Never raises for a
    :class:`PerfConfig`."""
    try:
        make_spec(problem, target, config)
    except PerfConfigError as e:
        return False, str(e)
    return True, ""


# ------------------------------------------------------------------- default config
FALLBACK_CONFIGS = (
    PerfConfig(64, 64, 32, 2, 2, 32, 32, 0, 0, 0, 1, -1, 2),
    PerfConfig(32, 32, 16, 1, 1, 32, 32, 0, 0, 0, 1, -1, 1),
    PerfConfig(16, 16, 16, 1, 1, 16, 16, 0, 0, 0, 1, -1, 1),
)
"""Tried in order when the heuristic's pick does not validate (smaller tiles, one warp,
fewer stages). Every entry divides by every preset's atoms."""


def measured_nvidia_config(problem: ConvProblem, target: Target) -> PerfConfig:
    """The default for NVIDIA targets, fitted to configuration sweeps on an H200
    (bench/sweep.py over the 14 suite rows, recorded in bench/RESULTS.md):

    fp16/bf16 on a target with warpgroup MMA (sm_90a), cpg > 32 and kpg >= 64:
    :func:`wgmma_config`. Otherwise, fp16/bf16 (mma.sync atoms):

    * cpg <= 16 (grouped, depthwise-like): one narrow column tile (8 or 16) and four warps
      stacked along M; when the whole GemmK fits one tile (<= 128), tile_k covers it and
      the loop has a single stage.
    * multi-tap filters with fewer than 2 waves of 128x128 tiles, or cpg <= 64:
      128x64x32 tiles, 2x2 warps of 64x32, 4 stages; split_k 2 when even 128x64 tiles give
      less than 2 waves and GemmK >= 1024 (r50 3x3 at 14x14 and 7x7).
    * otherwise 128x128 tiles, 2x2 warps of 64x64: tile_k 64 / 3 stages for 1x1 filters,
      tile_k 32 / 4 stages for multi-tap filters; shallow GemmK (<= 64) prefers 2x4 warps.

    fp32 (FFMA): 128x128x16 for large problems, 128x64x16 for strided ones, else 64x64x16
    with split_k 4 when GemmK >= 1024 and fewer than 8 waves of tiles.
    """
    p, t = problem, target
    subs = cached_decompose(p).sub_gemms
    max_k = max(s.gemm_k for s in subs)
    waves = 2 * t.num_cus
    taps = p.Y * p.X
    split_ok = split_k_atomics_reason(p, t) is None
    if p.dtype in ("fp16", "bf16") and t.wgmma and p.cpg > 32 and p.kpg >= 64:
        return wgmma_config(p, t)
    if p.dtype in ("fp16", "bf16"):
        if p.cpg <= 16:
            tn = 8 if p.cpg <= 8 else 16
            if max_k <= 128:
                tk = -(-max_k // 16) * 16
                return PerfConfig(128, tn, tk, 4, 1, 32, tn, 0, 0, 0, 1, -1, 1)
            return PerfConfig(128, tn, 32, 4, 1, 32, tn, 0, 0, 0, 1, -1, 3)
        if p.cpg <= 64 or (taps > 1 and count_tiles(subs, 128, 128, p.G) < waves):
            split = 2 if (split_ok and count_tiles(subs, 128, 64, p.G) < waves and max_k >= 1024) else 1
            return PerfConfig(128, 64, 32, 2, 2, 64, 32, 0, 0, 0, split, -1, 4)
        if taps == 1:
            if max_k <= 64:
                return PerfConfig(128, 128, 32, 2, 4, 64, 32, 0, 0, 0, 1, -1, 4)
            return PerfConfig(128, 128, 64, 2, 2, 64, 64, 0, 0, 0, 1, -1, 3)
        return PerfConfig(128, 128, 32, 2, 2, 64, 64, 0, 0, 0, 1, -1, 4)
    if p.cpg <= 16:
        return PerfConfig(128, 16, 16, 4, 1, 32, 16, 0, 0, 0, 1, -1, 3)
    if count_tiles(subs, 128, 128, p.G) >= 4 * waves:
        return PerfConfig(128, 128, 16, 2, 2, 64, 64, 0, 0, 0, 1, -1, 3)
    if p.sH > 1 or p.sW > 1:
        return PerfConfig(128, 64, 16, 2, 2, 64, 32, 0, 0, 0, 1, -1, 3)
    split = 4 if (split_ok and max_k >= 1024 and count_tiles(subs, 64, 64, p.G) < 4 * waves) else 1
    return PerfConfig(64, 64, 16, 2, 2, 32, 32, 0, 0, 0, split, -1, 3)


def wgmma_config(problem: ConvProblem, target: Target) -> PerfConfig:
    """The sm_90a warpgroup-MMA default for fp16/bf16 with cpg > 32 and kpg >= 64, fitted
    to sweeps of the 14 suite rows on an H200 (bench/RESULTS.md, warpgroup-MMA sections):

    * cpg <= 64: 128x64x64 tiles, 2 warpgroups of 64x64, 4 stages;
    * cpg >= 256, GemmK >= 256 and at least 1.5 waves of 128x256 tiles (the big rows): 128x256x64,
      2 warpgroups of 64x256 (128 accumulators), 4 stages, in the warp-specialised TMA form
      (:data:`TMA_DEFAULT`, wgmma=3) where its rules hold (stride 1; H200 sweeps:
      big_1x1_c512_k512_64 303.6 -> 254.0 us, big_3x3_c256_k256_64 506.4 -> 445.2 us,
      dil2_3x3_c256_64 60.9 -> 55.3 us), else wgmma=1;
    * fewer than half a wave of 128x128 tiles and GemmK >= 1024: 128x128x64 with split_k 2;
    * strided 1x1 filters: 256x128x64, 4 warpgroups of 64x128, 4 stages; strided filters
      with several taps: the TMA form with 256x128 tiles, 2 warpgroups of 128x128, 4 stages
      (:data:`TMA_STRIDED_DEFAULT`; its persistent blocks even out the tilde sub-GEMMs'
      different K lengths: H200 sweep, r50_3x3_s2_c128_56 37.8 -> 25.2 us), else 128x128x64,
      one warpgroup of 128x128 (two m64 instructions), 3 stages (the 4-warpgroup tile, 0.8
      us slower there, spills at 512 threads' 128 registers once the four tilde sub-GEMM
      records are live: tests/test_nvidia_build.py);
    * 1x1 stride 1, cpg >= 256 and a single k-tile (GemmK <= 64) over at least two waves of
      128x256 tiles: persistent 128x256x64 (wgmma=2), 3 stages -- each tile is one load and
      one epilogue, and the persistent block overlaps the next tile's load with this tile's
      epilogue (H200 sweep, r50_1x1_c256_k64_56: 26.4 -> 21.5 us; every other suite row
      measured slower persistent);
    * otherwise, filters with taps at stride 1: the TMA form with one warpgroup of 128x128
      (two m64 instructions), 4 stages (:data:`TMA_TAPS_DEFAULT`; H200 sweep:
      r50_3x3_c128_28 21.9 -> 17.9 us, r50_3x3_c256_14 20.4 -> 16.2 us);
    * the TMA forms only where their pixel box fills at least :data:`TMA_MIN_FILL` of the
      tile's rows (:func:`tma_fill`; the measured lines filled 0.77-1.0; a 65-wide image
      would fill 0.51 and multiply half-empty tiles);
    * otherwise 128x128x64, 2 warpgroups of 64x128: 4 stages for multi-tap filters,
      3 (two blocks per SM) for 1x1.
    """
    p, t = problem, target
    subs = cached_decompose(p).sub_gemms
    max_k = max(s.gemm_k for s in subs)
    if p.cpg <= 64:
        return PerfConfig(128, 64, 64, 2, 1, 64, 64, 0, 0, 0, 1, -1, 4, 1)
    if p.cpg >= 256 and max_k >= 256 and 2 * count_tiles(subs, 128, 256, p.G) >= 3 * t.num_cus:
        if p.sH == 1 and p.sW == 1 and _tma_fits(p, t, TMA_DEFAULT):
            return TMA_DEFAULT
        return PerfConfig(128, 256, 64, 2, 1, 64, 256, 0, 0, 0, 1, -1, 4, 1)
    if (2 * count_tiles(subs, 128, 128, p.G) <= t.num_cus and max_k >= 1024
            and split_k_atomics_reason(p, t) is None):
        return PerfConfig(128, 128, 64, 2, 1, 64, 128, 0, 0, 0, 2, -1, 4, 1)
    if (p.sH > 1 or p.sW > 1) and p.Y * p.X > 1:
        if _tma_fits(p, t, TMA_STRIDED_DEFAULT):
            return TMA_STRIDED_DEFAULT
        return PerfConfig(128, 128, 64, 1, 1, 128, 128, 0, 0, 0, 1, -1, 3, 1)
    if p.sH > 1 or p.sW > 1:
        return PerfConfig(256, 128, 64, 4, 1, 64, 128, 0, 0, 0, 1, -1, 4, 1)
    if p.is_pointwise and p.cpg >= 256 and max_k <= 64 and count_tiles(subs, 128, 256, p.G) >= 2 * t.num_cus:
        return PerfConfig(128, 256, 64, 2, 1, 64, 256, 0, 0, 0, 1, -1, 3, 2)
    if p.Y * p.X > 1 and _tma_fits(p, t, TMA_TAPS_DEFAULT):
        return TMA_TAPS_DEFAULT
    return PerfConfig(128, 128, 64, 2, 1, 64, 128, 0, 0, 0, 1, -1, 4 if p.Y * p.X > 1 else 3, 1)


def heuristic_config(problem: ConvProblem, target: Target) -> PerfConfig:
    """The tile choice behind :func:`default_performance_config`, before validation.

    NVIDIA targets take :func:`measured_nvidia_config` (fitted to H200 sweeps). Other
    targets (AMD, where nothing has been measured yet) use these rules, constant time in
    the problem size (they read sub-GEMM sizes, not data):

    * tile_n: the smallest power of two >= cpg, between 16 and 128 (columns past cpg are
      wasted MMA work, so small groups get narrow tiles);
    * tile_m: 128, or 64 when 128-row tiles would leave compute units idle
      (``G * tiles < num_cus``);
    * tile_k: 32 for fp16/bf16, 16 for fp32 (the same 64 bytes per row); halved for fp32
      when no sub-GEMM's GemmK (taps x kpg) reaches it; 16-bit atoms need k >= 16;
    * warp grid 2x2 when tile_n >= 64, else warps stacked along M (4x1 at tile_m 128,
      2x1 at 64), one warp tile per warp;
    * stages 3 where copies are asynchronous (cp.async), else 2 (double buffer);
    * split_k 1 (deterministic, plain stores; search explores split-K), vector caps and
      lds_k_outer automatic.
    """
    p, t = problem, target
    if t.vendor == "nvidia" and not p.is_3d and p.dtype in ("fp16", "bf16", "fp32"):
        return measured_nvidia_config(p, t)
    subs = cached_decompose(p).sub_gemms if not p.is_3d else ()
    tile_n = 16
    while tile_n < min(p.cpg, 128):
        tile_n *= 2
    tiles_128 = count_tiles(subs, 128, tile_n, p.G)
    tile_m = 128 if tiles_128 >= t.num_cus else 64
    tile_k = 32 if p.dtype in ("fp16", "bf16") else 16
    max_gemm_k = max((s.gemm_k for s in subs), default=tile_k)
    if p.dtype == "fp32" and max_gemm_k <= tile_k // 2:
        tile_k //= 2
    if tile_n >= 64:
        warp_m, warp_n = 2, 2
    else:
        warp_m, warp_n = (4 if tile_m >= 128 else 2), 1
    return PerfConfig(tile_m=tile_m, tile_n=tile_n, tile_k=tile_k, warp_m=warp_m, warp_n=warp_n,
                      warp_tile_m=tile_m // warp_m, warp_tile_n=tile_n // warp_n,
                      vector_size_a=0, vector_size_b=0, vector_size_c=0, split_k=1,
                      lds_k_outer=-1, stages=3 if t.async_copy else 2)


def default_performance_config(problem: ConvProblem, target: Target) -> PerfConfig:
    """MIOpen's GetDefaultPerformanceConfig: :func:`heuristic_config`, or the first of
    :data:`FALLBACK_CONFIGS` that validates.

    Raises:
        PerfConfigError: no candidate validates; the message gives each candidate's reason.
    """
    reasons = []
    for cfg in (heuristic_config(problem, target),) + FALLBACK_CONFIGS:
        ok, why = is_valid_performance_config(problem, target, cfg)
        if ok:
            return cfg
        reasons.append(f"{cfg.serialize()}: {why}")
    raise PerfConfigError("no default config is valid: " + "; ".join(reasons))
