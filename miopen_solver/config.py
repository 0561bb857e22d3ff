"""The tunable part of a solution: a kernel schedule beside a pure tile config.

``PerfConfig`` is MIOpen's PerformanceConfig: plain integers serialised as MIOpen does,
comma-separated in field order::

    tile_m,tile_n,tile_k,warp_m,warp_n,warp_tile_m,warp_tile_n,
    vector_size_a,vector_size_b,vector_size_c,split_k,lds_k_outer,stages[,schedule[,split_k_reduce]]

The 14th field is the :class:`KernelSchedule`'s code, the 15th how a split-K launch sums its
slices (:data:`SPLIT_K_REDUCE`: 0 auto, 1 atomic, 2 workspace). Both are optional and
written only when they are not 0 (the schedule then as ``0`` when only the reduction is set),
so every 13-field config (perf-db records, fixtures) keeps its meaning, and the 14-field
records written before the schedule had a name (its field was called ``wgmma``) read the same.

``vector_size_*`` are caps (0 = as wide as allowed), ``split_k`` is -1 (choose) or >= 1,
``lds_k_outer`` is -1 (auto), 0 (off, B tile stored m-outer) or 1 (on, k-outer),
``split_k_reduce`` a :data:`SPLIT_K_REDUCE` code (:mod:`miopen_solver.splitk`). What each field
means for a schedule, and which values it takes, is the schedule's rule set
(:mod:`miopen_solver.spec` for the GEMM schedules, :mod:`miopen_solver.tma`,
:mod:`miopen_solver.direct`, :mod:`miopen_solver.patch`, :mod:`miopen_solver.nchw_pw`).

Text forms of the schedules beside the tilde GEMM (examples; every field as above):

* ``patch-gemm`` (stride = filter, no padding): ``128,64,32,2,2,64,32,0,0,0,1,-1,3,5`` (a
  warp-MMA tile of the one dense GEMM ``[N*Ho*Wo, K] x [K, Y*X*cpg]``);
  ``patch-gemm-wgmma``: ``128,128,64,2,1,64,128,0,0,0,1,-1,4,6`` (a warpgroup tile of it,
  sm_90a); ``patch-gemm-persistent``: ``128,256,64,2,1,64,256,0,0,0,1,-1,3,9`` and
  ``patch-gemm-tma``: ``128,256,64,2,1,64,256,0,0,0,1,-1,4,10`` and
  ``patch-gemm-pingpong``: ``128,128,64,1,1,128,128,0,0,0,1,-1,7,21`` (its persistent, TMA
  and ping-pong forms, with those schedules' rules; the TMA forms also need patch rows of a
  multiple of 16 bytes).
  ``split_k`` must be 1 or -1 (each dX element is written once).
* ``nchw-pointwise`` (1x1, stride 1, no padding, dY and dX NCHW in memory):
  ``64,128,32,2,2,32,64,0,0,0,1,-1,3,7`` (a warp-MMA tile of the per-image, per-group GEMM
  ``W_g^T [cpg, kpg] x dY[n, g] [kpg, H*W]`` written straight into NCHW dX: tile_m runs over
  the channels c, tile_n over the pixels); ``nchw-pointwise-wgmma``:
  ``128,128,64,2,1,64,128,0,0,0,1,-1,4,8`` (a warpgroup tile of it, sm_90a);
  ``nchw-pointwise-persistent``: ``128,256,64,2,1,64,256,0,0,0,1,-1,3,18`` (its persistent
  form, sm_90a). ``split_k`` must be 1 or -1.
* ``group-pack`` (grouped problems with cpg below the tile's columns):
  ``128,64,32,2,2,64,32,0,0,0,1,-1,4,11`` (a warp-MMA tile of the problem with
  ``tile_n / cpg`` groups packed into one, W block-diagonal); ``group-pack-wgmma``:
  ``128,64,64,2,1,64,64,0,0,0,1,-1,4,12`` (a warpgroup tile of it, sm_90a). ``tile_n``
  must be a multiple of cpg, at least twice it, and divide ``G*cpg``; ``split_k`` 1 or -1.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from dataclasses import dataclass

from .command import INT_MAX, INT_MIN
from .errors import PerfConfigError, shown_value


class KernelSchedule(enum.IntEnum):
    """A kernel family: how a block is organised, loads and multiplies. The value is the
    perf-config code (the 14th field).

    * ``WARP_MMA`` (0): warp-level matrix atoms (``mma.sync`` / MFMA / FFMA) fed by a
      multistage ``cp.async`` (or plain-load) pipeline; split-K by atomics.
    * ``WGMMA`` (1): sm_90a warpgroup MMA (``wgmma.mma_async``) from swizzled shared memory;
      ``warp_m x warp_n`` counts warpgroups of 128 threads.
    * ``WGMMA_PERSISTENT`` (2): the same with persistent blocks that load the next tile
      during the current tile's epilogue.
    * ``WGMMA_TMA`` (3): warp-specialised persistent blocks: a producer warp (a warpgroup
      handing its registers to two consumer warpgroups) issues
      tensor-memory copies (TMA) onto mbarrier stages, the warpgroups multiply and store.
      ``split_k`` > 1 (at most the k-tiles of the shortest sub-GEMM) makes the blocks walk
      ``tiles x split_k`` work units, one k-slice of one tile each, their partial sums added
      into dX or stored into the fp32 workspace (``split_k_reduce``), e.g.
      ``128,256,64,2,1,64,256,0,0,0,3,-1,4,3``; ``-1`` does not split.
    * ``DIRECT`` (4): no GEMM tiles: each thread owns dX pixels x a vector of channels of one
      stride phase and sums its valid taps in fp32 (depthwise and small-cpg grouped
      problems; :mod:`miopen_solver.direct` maps the config fields).
    * ``PATCH_GEMM`` (5): patch embeddings (stride = filter, no padding, dilation 1): the
      whole dgrad is one dense GEMM ``[N*Ho*Wo, K] x [K, Y*X*cpg]`` per group, run by the
      ``WARP_MMA`` main loop; the epilogue scatters each row into its disjoint dX patch
      (:mod:`miopen_solver.patch`).
    * ``PATCH_GEMM_WGMMA`` (6): the same GEMM on the ``WGMMA`` main loop (sm_90a).
    * ``NCHW_POINTWISE`` (7): 1x1 stride-1 unpadded problems whose dY and dX are NCHW in
      memory: per image n and group g the GEMM ``dX[n, g] (cpg x H*W) = W_g^T (cpg x kpg) x
      dY[n, g] (kpg x H*W)``, the ``WARP_MMA`` main loop with the operands' roles swapped
      (W^T, transposed once into the workspace, is A; dY is B; dX is stored NCHW by the
      staged epilogue), grid y = N*G (:mod:`miopen_solver.nchw_pw`).
    * ``NCHW_POINTWISE_WGMMA`` (8): the same GEMMs on the ``WGMMA`` main loop (sm_90a).
    * ``PATCH_GEMM_PERSISTENT`` (9): the patch GEMM on the ``WGMMA_PERSISTENT`` main loop
      (its staged epilogue scatters each tile into the dX patches while the next tile loads).
    * ``PATCH_GEMM_TMA`` (10): the patch GEMM on the ``WGMMA_TMA`` main loop (its direct
      epilogue stores 16-byte chunks of patch rows from the accumulators).
    * ``GROUP_PACK`` (11): grouped problems whose groups are narrower than a tile: ``P =
      tile_n / cpg`` consecutive groups run as one group of ``P*cpg`` channels whose W is
      block-diagonal (the B loader reads zeros off the diagonal), on the ``WARP_MMA`` main
      loop (:mod:`miopen_solver.group_pack`).
    * ``GROUP_PACK_WGMMA`` (12): the same on the ``WGMMA`` main loop (sm_90a).
    * ``NCHW_TMA`` (13): stride-1 problems whose dY and dX are NCHW in memory: per image n,
      group g and tap, ``dX[n, g] (cpg x Hi*Wi) += W_yx^T (cpg x kpg) x dY[n, g]`` shifted by
      the tap, on the ``WGMMA_TMA`` main loop with the operands' roles swapped (W^T in the
      workspace is A; dY rows of 64 pixels are B's MN-major blocks; dX stored NCHW by the
      direct epilogue), sm_90a, 16-bit (:mod:`miopen_solver.nchw_tma`).
    * ``DIRECT_NCHW`` (14): the ``DIRECT`` schedule's mma body (``vector_size_a`` 2, or 3 on
      persistent blocks) reading dY
      and writing dX in their own memory order, NCHW or NHWC, in place: its dY planes are
      channel-major, so an NCHW dY row is copied as it lies and an NCHW dX row stored as it
      lies; depthwise W is the same bytes in either order. No transform, no workspace
      (:mod:`miopen_solver.direct`).
    * ``SUBPIXEL`` (15): strided problems as one stride-1 GEMM over dY whose columns are the
      stride phases x channels (a pixel shuffle): W' (the phases' taps, zeros where a phase has
      none) packed into the workspace, the ``WARP_MMA`` main loop on that virtual problem, an
      epilogue storing each column run into its phase's dX pixel (:mod:`miopen_solver.subpixel`).
    * ``SUBPIXEL_WGMMA`` (16) and ``SUBPIXEL_TMA`` (17): the same on the ``WGMMA`` and
      ``WGMMA_TMA`` main loops (sm_90a).
    * ``NCHW_POINTWISE_PERSISTENT`` (18): the ``NCHW_POINTWISE`` GEMMs on the
      ``WGMMA_PERSISTENT`` main loop (sm_90a): per image and group a row of persistent
      blocks walks that GEMM's tiles, loading the next tile during the current one's epilogue.
    * ``DIRECT_PLANE`` (19): depthwise and small-cpg grouped problems whose dY and dX are NCHW in
      memory, on the planes as they lie: a block stages the dY window of a tile of several
      (image, channel) planes in shared memory and each thread sums the taps of consecutive
      dX pixels of one plane in fp32; no GEMM tiles, no transform
      (:mod:`miopen_solver.direct_plane`).
    * ``WGMMA_TMA_PINGPONG`` (20): the ``WGMMA_TMA`` producer and stages with two consumer
      warpgroups that own whole tiles in turn (CUTLASS's "ping-pong" warp-specialised kernel):
      the block's tiles go to warpgroup 0, 1, 0, ..., each warpgroup's main loop starts when
      the other's has taken its last stage, so one warpgroup's epilogue runs while the other
      multiplies. ``warp_m = warp_n = 1``: the tile is one warpgroup's (``tile_m =
      warp_tile_m``, ``tile_n = warp_tile_n``), the block has 256 consumer threads and a
      producer warpgroup that hands registers to them (``setmaxnreg``), e.g.
      ``128,128,64,1,1,128,128,0,0,0,1,-1,6,20``; ``split_k`` 1 or -1.
    * ``PATCH_GEMM_PINGPONG`` (21): the patch GEMM on the ``WGMMA_TMA_PINGPONG`` main loop
      (each warpgroup's direct epilogue scatters its tile into the dX patches while the other
      multiplies).
    * ``SUBPIXEL_PINGPONG`` (22): the sub-pixel GEMM on the ``WGMMA_TMA_PINGPONG`` main loop.
    """

    WARP_MMA = 0
    WGMMA = 1
    WGMMA_PERSISTENT = 2
    WGMMA_TMA = 3
    DIRECT = 4
    PATCH_GEMM = 5
    PATCH_GEMM_WGMMA = 6
    NCHW_POINTWISE = 7
    NCHW_POINTWISE_WGMMA = 8
    PATCH_GEMM_PERSISTENT = 9
    PATCH_GEMM_TMA = 10
    GROUP_PACK = 11
    GROUP_PACK_WGMMA = 12
    NCHW_TMA = 13
    DIRECT_NCHW = 14
    SUBPIXEL = 15
    SUBPIXEL_WGMMA = 16
    SUBPIXEL_TMA = 17
    NCHW_POINTWISE_PERSISTENT = 18
    DIRECT_PLANE = 19
    WGMMA_TMA_PINGPONG = 20
    PATCH_GEMM_PINGPONG = 21
    SUBPIXEL_PINGPONG = 22

    @property
    def warpgroup(self) -> bool:
        """Warps are counted in warpgroups of 128 threads (``wgmma`` instructions)."""
        return self in (KernelSchedule.WGMMA, KernelSchedule.WGMMA_PERSISTENT, KernelSchedule.WGMMA_TMA,
                        KernelSchedule.PATCH_GEMM_WGMMA, KernelSchedule.NCHW_POINTWISE_WGMMA,
                        KernelSchedule.PATCH_GEMM_PERSISTENT, KernelSchedule.PATCH_GEMM_TMA,
                        KernelSchedule.GROUP_PACK_WGMMA, KernelSchedule.NCHW_TMA, KernelSchedule.SUBPIXEL_WGMMA,
                        KernelSchedule.SUBPIXEL_TMA, KernelSchedule.NCHW_POINTWISE_PERSISTENT,
                        KernelSchedule.WGMMA_TMA_PINGPONG, KernelSchedule.PATCH_GEMM_PINGPONG,
                        KernelSchedule.SUBPIXEL_PINGPONG)

    @property
    def patch(self) -> bool:
        """One dense GEMM whose rows scatter into disjoint dX patches (stride = filter)."""
        return self in (KernelSchedule.PATCH_GEMM, KernelSchedule.PATCH_GEMM_WGMMA, KernelSchedule.PATCH_GEMM_PERSISTENT,
                        KernelSchedule.PATCH_GEMM_TMA, KernelSchedule.PATCH_GEMM_PINGPONG)

    @property
    def nchw_pointwise(self) -> bool:
        """Per-image pointwise GEMMs that read dY and write dX in NCHW (no dY/dX transform)."""
        return self in (KernelSchedule.NCHW_POINTWISE, KernelSchedule.NCHW_POINTWISE_WGMMA,
                        KernelSchedule.NCHW_POINTWISE_PERSISTENT)

    @property
    def nchw_native(self) -> bool:
        """Reads dY and writes dX in NCHW in place (no dY/dX transform; W^T its only one, or
        none for ``DIRECT_NCHW`` and ``DIRECT_PLANE``): the NCHW pointwise schedules, ``NCHW_TMA``,
        ``DIRECT_NCHW`` and ``DIRECT_PLANE``."""
        return self.nchw_pointwise or self in (KernelSchedule.NCHW_TMA, KernelSchedule.DIRECT_NCHW,
                                               KernelSchedule.DIRECT_PLANE)

    @property
    def direct(self) -> bool:
        """No GEMM tiles: the direct schedules' specs and rules (:mod:`miopen_solver.direct`,
        :mod:`miopen_solver.direct_plane`)."""
        return self in (KernelSchedule.DIRECT, KernelSchedule.DIRECT_NCHW, KernelSchedule.DIRECT_PLANE)

    @property
    def group_pack(self) -> bool:
        """Several narrow groups packed into one with a block-diagonal W."""
        return self in (KernelSchedule.GROUP_PACK, KernelSchedule.GROUP_PACK_WGMMA)

    @property
    def subpixel(self) -> bool:
        """All stride phases as one stride-1 GEMM over dY (:mod:`miopen_solver.subpixel`)."""
        return self in (KernelSchedule.SUBPIXEL, KernelSchedule.SUBPIXEL_WGMMA, KernelSchedule.SUBPIXEL_TMA,
                        KernelSchedule.SUBPIXEL_PINGPONG)

    @property
    def own_layouts(self) -> bool:
        """Runs on the problem in its own layouts, with no layout transform of dY, dX (and W
        for the sub-pixel schedules, whose only transform is the W' pack): :attr:`nchw_native`
        and :attr:`subpixel`."""
        return self.nchw_native or self.subpixel

    @property
    def virtual_gemm(self) -> bool:
        """Runs a GEMM main loop on a virtual problem with its own operand or epilogue
        addressing (:attr:`patch`, :attr:`nchw_native`, :attr:`group_pack`, :attr:`subpixel`):
        its own spec and rules, then the main loop's."""
        return (self.patch or self.nchw_pointwise or self is KernelSchedule.NCHW_TMA or self.group_pack
                or self.subpixel)

    @property
    def persistent(self) -> bool:
        """The grid holds as many blocks as fit at once; each loops over output tiles."""
        return self in (KernelSchedule.WGMMA_PERSISTENT, KernelSchedule.WGMMA_TMA, KernelSchedule.PATCH_GEMM_PERSISTENT,
                        KernelSchedule.PATCH_GEMM_TMA, KernelSchedule.SUBPIXEL_TMA, KernelSchedule.NCHW_POINTWISE_PERSISTENT,
                        KernelSchedule.WGMMA_TMA_PINGPONG, KernelSchedule.PATCH_GEMM_PINGPONG,
                        KernelSchedule.SUBPIXEL_PINGPONG)

    @property
    def tma(self) -> bool:
        """Tiles arrive by tensor-memory copies issued by a producer warp or warpgroup."""
        return self in (KernelSchedule.WGMMA_TMA, KernelSchedule.PATCH_GEMM_TMA, KernelSchedule.SUBPIXEL_TMA,
                        KernelSchedule.WGMMA_TMA_PINGPONG, KernelSchedule.PATCH_GEMM_PINGPONG,
                        KernelSchedule.SUBPIXEL_PINGPONG)

    @property
    def pingpong(self) -> bool:
        """Two consumer warpgroups own whole tiles in turn (``WGMMA_TMA_PINGPONG`` and the patch
        and sub-pixel GEMMs on it)."""
        return self in (KernelSchedule.WGMMA_TMA_PINGPONG, KernelSchedule.PATCH_GEMM_PINGPONG,
                        KernelSchedule.SUBPIXEL_PINGPONG)

    @property
    def slug(self) -> str:
        """The schedule's name in text and JSON: ``warp-mma``, ``wgmma-tma``, ``direct``,
        ``patch-gemm``."""
        return self.name.lower().replace("_", "-")

    @property
    def label(self) -> str:
        """The name used in messages: ``schedule 3 (wgmma-tma)``."""
        return f"schedule {int(self)} ({self.slug})"

    @classmethod
    def from_code(cls, code) -> "KernelSchedule":
        """The schedule for a perf-config code.

        Raises:
            PerfConfigError: not a known code, listing them.
        """
        try:
            return cls(code)
        except ValueError:
            known = ", ".join(f"{int(s)} ({s.slug})" for s in cls)
            raise PerfConfigError(f"perf config field schedule={code!r} is not a kernel schedule; "
                                  f"allowed: {known}") from None


_INTEGER = re.compile(r"-?[0-9]+")
INT32_ALLOWED = f"an integer from {INT_MIN} to {INT_MAX} (MIOpen's perf-config fields are 32-bit int)"
"""The range of every perf-config field: MIOpen's PerformanceConfig fields are C ``int``."""

FIELDS = ("tile_m", "tile_n", "tile_k", "warp_m", "warp_n", "warp_tile_m", "warp_tile_n",
          "vector_size_a", "vector_size_b", "vector_size_c", "split_k", "lds_k_outer", "stages", "schedule",
          "split_k_reduce")
OPTIONAL_FIELDS = 2
"""Trailing fields that may be left out (then 0): ``schedule``, ``split_k_reduce``."""

SPLIT_K_REDUCE = ("auto", "atomic", "workspace", "stream")
"""The ``split_k_reduce`` field's codes 0-3 by name (a run's ``--split-k-reduce``):
``auto`` lets :func:`~miopen_solver.spec.split_k_reduce_mode` choose, ``atomic`` adds every
split's partial sums into dX atomically, ``workspace`` stores them in an fp32 workspace that
a reduction kernel sums (:mod:`miopen_solver.splitk`); codes 0-2 are read only by a split-K
launch (split_k > 1). ``stream`` is stream-K on the TMA schedule (split_k 1 or -1): the
launch's k-tiles divided evenly over the persistent blocks, a tile cut between blocks summed
in the kernel through the fp32 workspace (``dgrad.cu``'s ``tmsk`` sections; Osama et al.,
"Stream-K: Work-centric Parallel Decomposition for Dense Matrix-Matrix Multiplication on the
GPU", PPoPP 2023)."""


@dataclass(frozen=True)
class PerfConfig:
    """Tuning parameters of a dgrad kernel (see module docstring).

    Raises:
        PerfConfigError: a field that is not an integer, or an unknown schedule code.
    """

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
    schedule: KernelSchedule = KernelSchedule.WARP_MMA
    split_k_reduce: int = 0

    def __post_init__(self):
        for name in FIELDS:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int):
                raise PerfConfigError(f"perf config field {name} must be an integer, got {v!r}")
            if not INT_MIN <= v <= INT_MAX:     # an integer too long to print is shown by its size
                shown = int(v) if v.bit_length() <= 96 else f"<an integer of {v.bit_length()} bits>"
                raise PerfConfigError(f"perf config field {name}={shown} is out of range; allowed: {INT32_ALLOWED}")
        object.__setattr__(self, "schedule", KernelSchedule.from_code(self.schedule))
        if not 0 <= self.split_k_reduce < len(SPLIT_K_REDUCE):
            known = ", ".join(f"{i} ({name})" for i, name in enumerate(SPLIT_K_REDUCE))
            raise PerfConfigError(f"perf config field split_k_reduce={self.split_k_reduce!r} is not a split-K "
                                  f"reduction; allowed: {known}")

    @property
    def reduce(self) -> str:
        """The ``split_k_reduce`` field's name (:data:`SPLIT_K_REDUCE`)."""
        return SPLIT_K_REDUCE[self.split_k_reduce]

    def serialize(self) -> str:
        """MIOpen's perf-db VALUES form: fields joined by ``,`` (13 fields; 14 when the
        schedule is not 0; 15 when the split-K reduction is not 0)."""
        count = len(FIELDS) - OPTIONAL_FIELDS
        if self.split_k_reduce:
            count = len(FIELDS)
        elif self.schedule:
            count = len(FIELDS) - 1
        return ",".join(str(int(getattr(self, f))) for f in FIELDS[:count])

    @classmethod
    def parse(cls, text: str) -> "PerfConfig":
        """Inverse of :meth:`serialize`.

        Only the syntax is checked here; whether the values suit a problem is
        :func:`~miopen_solver.spec.is_valid_performance_config`'s question.

        Raises:
            PerfConfigError: an empty string, a wrong field count, a field that is not
                ``-?[0-9]+`` (a space, quote, ``+`` or non-ASCII digit around or in it), a
                field outside a 32-bit int (:data:`INT32_ALLOWED`) or an unknown schedule,
                naming it and listing the expected fields or the allowed range.
        """
        if not isinstance(text, str):
            raise PerfConfigError(f"perf config must be a string, got {type(text).__name__}")
        required = len(FIELDS) - OPTIONAL_FIELDS
        expected = ",".join(FIELDS[:required]) + "".join(f"[,{f}" for f in FIELDS[required:]) + "]" * OPTIONAL_FIELDS
        counts = f"{required} to {len(FIELDS)}"
        if not text:
            raise PerfConfigError(f"perf config is empty; expected {counts} comma-separated integers: {expected}")
        parts = text.split(",")                 # no spaces or quotes around a field: MIOpen writes none
        vals = {}
        for name, p in zip(FIELDS, parts):      # a field that is not a number is the first thing to say
            if not _INTEGER.fullmatch(p):       # MIOpen reads decimal ASCII: no '+', '_', space or other digits
                shown = repr(p) if len(p) <= 20 else f"{p[:20]!r}..."
                raise PerfConfigError(f"perf config field {name}={shown} is not an integer; expected {counts} "
                                      f"comma-separated integers: {expected}")
            digits = p.lstrip("-").lstrip("0") or "0"       # leading zeros are harmless
            if len(digits) > len(str(INT_MAX)):          # refused by its length, before any conversion
                shown = p if len(p) <= 20 else f"{p[:20]}..."
                raise PerfConfigError(f"perf config field {name}={shown} is out of range; allowed: {INT32_ALLOWED}")
            vals[name] = int("-" + digits if p.startswith("-") else digits, 10)   # no 4300-digit limit
        if not required <= len(parts) <= len(FIELDS):
            raise PerfConfigError(f"perf config has {len(parts)} fields; expected {counts}: {expected}")
        return cls(**vals)

    def replace(self, **kw) -> "PerfConfig":
        return dataclasses.replace(self, **kw)

    def __str__(self) -> str:
        return self.serialize()


def as_perf_config(config, name: str = "config") -> PerfConfig:
    """``config`` as a :class:`PerfConfig`: a PerfConfig as it is, or its text
    (:meth:`PerfConfig.parse`, ``"64,64,32,2,2,32,32,0,0,0,1,-1,3"``). ``name`` is how
    messages name the argument (``config``, ``--perf-config``).

    Raises:
        PerfConfigError: text that does not parse (``NAME 'TEXT': why``), or a value of any
            other type (``NAME VALUE (TYPE): allowed: ...``).
    """
    if isinstance(config, PerfConfig):
        return config
    if isinstance(config, str):
        try:
            return PerfConfig.parse(config)
        except PerfConfigError as e:
            raise PerfConfigError(f"{name} {shown_value(config)}: {e}") from None
    raise PerfConfigError(f"{name} {shown_value(config)}: allowed: a miopen_solver.config.PerfConfig or its "
                          f"text ({len(FIELDS) - OPTIONAL_FIELDS} to {len(FIELDS)} comma-separated integers, "
                          f"e.g. '64,64,32,2,2,32,32,0,0,0,1,-1,3')")


__all__ = ["FIELDS", "INT32_ALLOWED", "KernelSchedule", "OPTIONAL_FIELDS", "PerfConfig", "SPLIT_K_REDUCE",
           "as_perf_config"]
