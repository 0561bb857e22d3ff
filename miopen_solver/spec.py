"""Performance configs and the validated kernel spec.

``PerfConfig`` is the tunable part (MIOpen's PerformanceConfig): plain integers serialised
as MIOpen does, comma-separated in field order::

    tile_m,tile_n,tile_k,warp_m,warp_n,warp_tile_m,warp_tile_n,
    vector_size_a,vector_size_b,vector_size_c,split_k,lds_k_outer,stages

``vector_size_*`` are caps (0 = as wide as allowed), ``split_k`` is -1 (choose) or >= 1,
``lds_k_outer`` is -1 (auto), 0 (off, B tile stored m-outer) or 1 (on, k-outer).

``DgradSpec`` = problem + target + config with every derived value resolved (block size,
atom, accumulators per lane, clamped vector widths, resolved split_k and lds_k_outer, LDS
bytes, sub-GEMM list). :func:`make_spec` builds one or raises :class:`PerfConfigError`
with the reason; :func:`is_valid_performance_config` returns ``(ok, reason)``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cached_property

from . import vectors
from .errors import PerfConfigError
from .problem import ConvProblem
from .target import MmaAtom, Target
from .tilde import Decomposition, decompose

FIELDS = ("tile_m", "tile_n", "tile_k", "warp_m", "warp_n", "warp_tile_m", "warp_tile_n",
          "vector_size_a", "vector_size_b", "vector_size_c", "split_k", "lds_k_outer", "stages")

MAX_SPLIT_K = 64
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

    def serialize(self) -> str:
        """MIOpen's perf-db VALUES form: fields joined by ``,``."""
        return ",".join(str(getattr(self, f)) for f in FIELDS)

    @classmethod
    def parse(cls, text: str) -> "PerfConfig":
        """Inverse of :meth:`serialize`.

        Raises:
            PerfConfigError: wrong field count or a non-integer field, naming it.
        """
        parts = [p.strip() for p in str(text).strip().strip('"').split(",")]
        if len(parts) != len(FIELDS):
            raise PerfConfigError(
                f"perf config {text!r} has {len(parts)} fields; expected {len(FIELDS)}: {','.join(FIELDS)}")
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


def resolve_split_k(problem: ConvProblem, target: Target, cfg: PerfConfig, decomp: Decomposition) -> int:
    """``split_k = -1`` -> a concrete degree: split only when the output tiles fill less than
    half the machine and each slice keeps at least 4 k-tiles; never where atomics are not
    allowed (see :func:`split_k_atomics_reason`)."""
    if cfg.split_k != -1:
        return cfg.split_k
    if split_k_atomics_reason(problem, target) is not None:
        return 1
    tiles = sum(-(-s.gemm_m // cfg.tile_m) * -(-s.gemm_n // cfg.tile_n) for s in decomp.sub_gemms) * problem.G
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
    flag = target.packed_fp16_atomics if problem.dtype == "fp16" else target.packed_bf16_atomics
    if not flag:
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
    def threads(self) -> int:
        return self.config.warp_m * self.config.warp_n * self.target.wave_size

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
        return self.config.tile_n // (self.config.warp_n * self.atom.n)

    @property
    def accumulators_per_lane(self) -> int:
        return self.mma_m * self.mma_n * self.atom.accumulators_per_lane(self.target.wave_size)

    @property
    def lds_pad(self) -> int:
        return LDS_PAD_BYTES // self.problem.elem_bytes

    @property
    def lds_bytes(self) -> int:
        """Shared memory per block: stages x (A tile + B tile), rows padded."""
        c, pad = self.config, self.lds_pad
        a = c.tile_m * (c.tile_k + pad)
        b = c.tile_k * (c.tile_n + pad) if self.lds_k_outer else c.tile_n * (c.tile_k + pad)
        return c.stages * (a + b) * self.problem.elem_bytes

    @property
    def tiles_per_group(self) -> int:
        c = self.config
        return sum(-(-s.gemm_m // c.tile_m) * -(-s.gemm_n // c.tile_n) for s in self.sub_gemms)

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
        identifies one binary (CUTLASS naming discipline), e.g.
        ``dgrad_fp16_t128x128x32_w2x2_a64x64_mma16816_v8v8v2_sk1_ko_s3_tilde4_n32c64h56...``."""
        c, p = self.config, self.problem
        path = "pw" if self.pointwise else f"tilde{len(self.sub_gemms)}"
        zf = {"memset": "_zfm", "blocks": "_zfb", "none": ""}[self.zero_fill]
        return (f"dgrad_{p.dtype}_t{c.tile_m}x{c.tile_n}x{c.tile_k}_w{c.warp_m}x{c.warp_n}"
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
            "threads": self.threads,
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
            "workspace_bytes": self.workspace_bytes,
        }


def make_spec(problem: ConvProblem, target: Target, config: PerfConfig) -> DgradSpec:
    """Validate ``config`` for ``problem`` on ``target`` and resolve every derived value.

    Raises:
        PerfConfigError: the first rule the config breaks, as a sentence.
    """
    c, p, t = config, problem, target
    _check(not p.is_3d, "3-D problems are not supported")
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
    atom = _pick_atom(t, p.dtype, c)
    threads = c.warp_m * c.warp_n * t.wave_size
    _check(threads <= t.max_threads, f"block of {threads} threads exceeds {t.arch}'s {t.max_threads}")
    if not t.async_copy:
        _check(c.stages <= 2, f"stages {c.stages} > 2 needs asynchronous copies, which {t.arch} lacks")
    _check(c.stages <= 6, f"stages must be <= 6, got {c.stages}")

    decomp = decompose(p)
    _check(len(decomp.sub_gemms) > 0, "the problem has no non-empty sub-GEMM")

    if c.split_k > 1:
        why = split_k_atomics_reason(p, t)
        _check(why is None, why or "")
    split = resolve_split_k(p, t, c, decomp)

    if c.lds_k_outer == -1:
        k_outer = default_lds_k_outer(p, t, c)
    else:
        k_outer = bool(c.lds_k_outer)
        if k_outer and p.dtype != "fp32" and not t.transposed_lds_read:
            raise PerfConfigError(
                f"lds_k_outer=1 needs a transposing LDS fragment read for {p.dtype}, which {t.arch} lacks")

    eb = p.elem_bytes
    va = vectors.clamp_to_tile(vectors.choose(c.vector_size_a, p.kpg, eb), c.tile_k, c.tile_m, threads)
    vb = vectors.clamp_to_tile(vectors.choose(c.vector_size_b, p.cpg, eb), c.tile_n, c.tile_k, threads)
    _check(va > 0, f"the {c.tile_m}x{c.tile_k} A tile does not spread evenly over {threads} threads")
    _check(vb > 0, f"the {c.tile_k}x{c.tile_n} B tile does not spread evenly over {threads} threads")
    # The direct epilogue stores the atom's lane fragment: at most 2 adjacent c per store.
    vc = vectors.choose(c.vector_size_c, p.cpg, eb)
    if atom.name.startswith("mma"):
        vc = min(vc, 2)
    elif atom.name.startswith("mfma"):
        vc = 1
    else:  # FFMA: a lane owns warp_tile_n / atom.n adjacent columns
        vc = min(vc, vectors.pow2_divisor(c.warp_tile_n // atom.n, 4))
    if split > 1 and p.dtype != "fp32":
        vc = 2  # packed 2-wide atomics (cpg is even, checked above)
    elif split > 1:
        vc = 1

    spec = DgradSpec(problem=p, target=t, config=c, atom=atom, split_k=split, lds_k_outer=k_outer,
                     vec_a=va, vec_b=vb, vec_c=vc, decomposition=decomp)
    _check(spec.accumulators_per_lane <= t.max_accumulators,
           f"{spec.accumulators_per_lane} accumulators per lane exceed {t.arch}'s safe bound {t.max_accumulators}")
    _check(spec.lds_bytes <= t.lds_bytes,
           f"{spec.lds_bytes} bytes of shared memory exceed {t.arch}'s {t.lds_bytes}")
    return spec


def is_valid_performance_config(problem: ConvProblem, target: Target, config: PerfConfig) -> tuple:
    """MIOpen's IsValidPerformanceConfig: ``(True, "")`` or ``(False, reason)``."""
    try:
        make_spec(problem, target, config)
    except PerfConfigError as e:
        return False, str(e)
    return True, ""
