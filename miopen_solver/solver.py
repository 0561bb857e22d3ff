"""The dgrad solver with MIOpen's verbs (``src/include/miopen/conv/solvers.hpp``).

=============================  =====================================================
MIOpen                          here (:class:`DgradSolver`)
=============================  =====================================================
``SolverDbId()``                :meth:`~DgradSolver.solver_db_id`
``IsApplicable``                :meth:`~DgradSolver.is_applicable`
``GetDefaultPerformanceConfig`` :meth:`~DgradSolver.get_default_performance_config`
``IsValidPerformanceConfig``    :meth:`~DgradSolver.is_valid_performance_config`
``GetWorkspaceSize``            :meth:`~DgradSolver.get_workspace_size`
``GetSolution``                 :meth:`~DgradSolver.get_solution`
``Search``                      :meth:`~DgradSolver.search` (candidates; timing is the tuner's)
``FindSolution`` (db, default)  :meth:`~DgradSolver.find_performance_config`
=============================  =====================================================

Everything here runs without a GPU. Kernel source comes from
:func:`miopen_solver.kernels.emit`, imported only when a source is asked for.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import cached_property
from typing import Iterator

from . import SOLVER_ID, SOLVER_NAME
from .applicability import NotApplicableError, Verdict, check, is_applicable
from .errors import PerfConfigError
from .problem import ConvProblem
from .spec import (DgradSpec, PerfConfig, cached_decompose, default_performance_config,
                   is_valid_performance_config, make_spec, split_k_atomics_reason)
from .target import Target

ALGORITHM = "miopenConvolutionBwdDataAlgoImplicitGEMM"
"""MIOpen's algorithm name for implicit-GEMM backward data (enum value 5)."""


def zero_fill_block_count(spec: DgradSpec) -> int:
    """Extra blocks per group that write zeros when ``spec.zero_fill == "blocks"``, else 0.

    The kernels package decides this when it defines ``zero_fill_blocks(spec)``; otherwise
    the count is one block per ``tile_m`` consecutive dX pixels of a group,
    ``ceil(N*Hi*Wi / tile_m)``: each such block zeroes the uncovered pixels among its rows
    for all cpg channels.
    """
    if spec.zero_fill != "blocks":
        return 0
    try:
        from .kernels import zero_fill_blocks
    except ImportError:
        p = spec.problem
        return -(-(p.N * p.Hi * p.Wi) // spec.config.tile_m)
    return int(zero_fill_blocks(spec))


@dataclass(frozen=True)
class KernelLaunch:
    """One kernel of a solution: its name, launch shape and (lazily) its source.

    Attributes:
        name: the kernel name (``DgradSpec.kernel_name``).
        grid: blocks along x, y, z: x = tiles per group or persistent blocks (+ zero-fill blocks), y = G,
            z = split_k.
        block: threads per block along x, y, z.
        lds_bytes: static shared memory per block, bytes.
        spec: the resolved spec the kernel is emitted from.
    """

    name: str
    grid: tuple
    block: tuple
    lds_bytes: int
    spec: DgradSpec

    @cached_property
    def source(self):
        """The emitted :class:`~miopen_solver.kernels.KernelSource` (``.text``, ``.sha256``).

        Raises:
            ImportError: the kernels package is not available.
        """
        from .kernels import emit
        return emit(self.spec)

    def as_dict(self) -> dict:
        return {"name": self.name, "grid": list(self.grid), "block": list(self.block),
                "lds_bytes": self.lds_bytes}


@dataclass(frozen=True)
class ZeroFill:
    """How dX pixels no sub-GEMM writes become zero.

    Attributes:
        kind: ``"memset"`` (the whole of dX is zeroed before the kernel; split-K
            accumulates), ``"blocks"`` (extra blocks of the same launch write the zeros) or
            ``"none"``.
        bytes: bytes the memset clears (``"memset"`` only, else 0).
        blocks: extra blocks per group (``"blocks"`` only, else 0).
    """

    kind: str
    bytes: int = 0
    blocks: int = 0

    def as_dict(self) -> dict:
        return {"kind": self.kind, "bytes": self.bytes, "blocks": self.blocks}


@dataclass(frozen=True)
class Solution:
    """MIOpen's ConvSolution as data: what to launch, in order, and what it needs.

    Attributes:
        solver_id: the solver db id (:data:`miopen_solver.SOLVER_NAME`).
        solution_id: the numeric id (:data:`miopen_solver.SOLVER_ID`).
        algorithm: MIOpen's algorithm name.
        perf_config: the config the spec was built from (``split_k`` may be -1 there;
            ``spec.split_k`` is the resolved value that is launched).
        spec: the validated spec.
        zero_fill: the zero-fill step, before or inside the launch.
        kernels: the launches, in order (one: all sub-GEMMs share one kernel).
        workspace_bytes: device workspace needed, bytes.
    """

    solver_id: str
    solution_id: int
    algorithm: str
    perf_config: PerfConfig
    spec: DgradSpec
    zero_fill: ZeroFill
    kernels: tuple
    workspace_bytes: int

    def as_dict(self) -> dict:
        return {"solver_id": self.solver_id, "solution_id": self.solution_id,
                "algorithm": self.algorithm, "perf_config": self.perf_config.serialize(),
                "zero_fill": self.zero_fill.as_dict(),
                "kernels": [k.as_dict() for k in self.kernels],
                "workspace_bytes": self.workspace_bytes, "spec": self.spec.as_dict()}


# ------------------------------------------------------------------- search space
_TILE_M = (32, 64, 128, 256)
_TILE_N = (16, 32, 64, 128, 256)
_TILE_K = {"fp16": (16, 32, 64), "bf16": (16, 32, 64), "fp32": (8, 16, 32)}
_WARPS = ((1, 1), (2, 1), (1, 2), (2, 2), (4, 1), (1, 4), (4, 2), (2, 4))
_SPLIT_K = (1, 2, 4, 8, 16)


_WGMMA_N = (64, 128, 256)


def _search_space(problem: ConvProblem, target: Target) -> Iterator[PerfConfig]:
    """Candidate configs (unvalidated): tiles, warp grids with one warp tile per warp,
    stages, both B layouts and split-K degrees, pruned to what can matter here: tile_n
    at most the power of two covering cpg (min 16); split_k at most the k-tiles of the
    deepest sub-GEMM, and only where atomics are allowed."""
    p, t = problem, target
    cover_n = 16
    while cover_n < p.cpg:
        cover_n *= 2
    tile_ns = [n for n in _TILE_N if n <= cover_n]
    max_k = max(s.gemm_k for s in cached_decompose(p).sub_gemms)
    stages = (2, 3, 4) if t.async_copy else (1, 2)
    splits = (1,) if split_k_atomics_reason(p, t) else _SPLIT_K
    if t.wgmma and p.dtype in ("fp16", "bf16"):
        # Warpgroup MMA first (the faster family on sm_90a): warpgroups stacked along M,
        # one warpgroup tile of 64 x tile_n each, or two m64 instructions per warpgroup.
        for tm, tn, tk, st, sk in itertools.product((64, 128, 256), _WGMMA_N, (64, 128), (3, 4, 5), splits):
            if tn > max(64, cover_n) or (sk > 1 and sk * tk > max_k):
                continue
            for wm in {tm // 64, max(1, tm // 128)}:
                yield PerfConfig(tm, tn, tk, wm, 1, tm // wm, tn, 0, 0, 0, sk, -1, st, 1)
                if sk == 1:
                    yield PerfConfig(tm, tn, tk, wm, 1, tm // wm, tn, 0, 0, 0, 1, -1, st, 2)
                if sk == 1 and tk == 64:  # warp-specialised TMA
                    yield PerfConfig(tm, tn, tk, wm, 1, tm // wm, tn, 0, 0, 0, 1, -1, st, 3)
    for tm, tn, tk, (wm, wn), st, ko, sk in itertools.product(
            _TILE_M, tile_ns, _TILE_K.get(p.dtype, (16,)), _WARPS, stages, (0, 1), splits):
        if tm % wm or tn % wn or (sk > 1 and sk * tk > max_k):
            continue
        yield PerfConfig(tm, tn, tk, wm, wn, tm // wm, tn // wn, 0, 0, 0, sk, ko, st)


class DgradSolver:
    """Implicit-GEMM backward data by tilde decomposition, NHWC, one launch.

    Stateless; every verb takes the problem and the target. Nothing here needs a GPU.
    """

    def solver_db_id(self) -> str:
        """MIOpen's SolverDbId: the name perf-db records are filed under."""
        return SOLVER_NAME

    @property
    def solution_id(self) -> int:
        """The numeric solution id (MIOpen's ``miopenConvSolution_t.solution_id``)."""
        return SOLVER_ID

    def is_applicable(self, problem: ConvProblem, target: Target, *, forw: int = 2) -> Verdict:
        """Every reason the problem is not applicable (see :mod:`miopen_solver.applicability`)."""
        return is_applicable(problem, target, forw=forw)

    def get_default_performance_config(self, problem: ConvProblem, target: Target) -> PerfConfig:
        """A config that validates, chosen in constant time
        (:func:`miopen_solver.spec.default_performance_config`).

        Raises:
            PerfConfigError: no default validates (the problem is then not applicable:
                ``NO_VALID_CONFIG``).
        """
        return default_performance_config(problem, target)

    def is_valid_performance_config(self, problem: ConvProblem, target: Target,
                                    config: PerfConfig) -> tuple:
        """``(True, "")`` or ``(False, reason)``; used to vet perf-db records too."""
        return is_valid_performance_config(problem, target, config)

    def get_workspace_size(self, problem: ConvProblem, target: Target,
                           config: PerfConfig | None = None) -> int:
        """Device workspace in bytes: 0. NHWC is native (no transposes) and split-K adds
        straight into dX with atomics (no fp32 staging buffer).

        Raises:
            PerfConfigError: ``config`` is given and invalid.
        """
        if config is None:
            return 0
        return make_spec(problem, target, config).workspace_bytes

    def find_performance_config(self, problem: ConvProblem, target: Target,
                                perfdb=None) -> tuple:
        """The config MIOpen's FindSolution would use: the perf-db record for this problem,
        arch and solver when it exists and validates, else the default.

        Args:
            perfdb: a :class:`miopen_solver.perfdb.PerfDb`, or None for no lookup.

        Returns:
            ``(config, source)`` with source ``"perfdb"`` or ``"default"``.

        Raises:
            PerfConfigError: no default validates.
        """
        if perfdb is not None:
            cfg, _, _ = self.lookup_performance_config(problem, target, perfdb)
            if cfg is not None:
                return cfg, "perfdb"
        return self.get_default_performance_config(problem, target), "default"

    def lookup_performance_config(self, problem: ConvProblem, target: Target, perfdb,
                                  arch: str | None = None) -> tuple:
        """The perf-db record for ``problem`` under ``arch`` (default ``target.arch``) and
        this solver, checked against ``target``.

        Returns:
            ``(config, record, reason)``: ``(None, None, "")`` when there is no record;
            ``(None, record, reason)`` when the record does not parse or is not valid here
            (``reason`` says why, so callers can say the record was ignored);
            ``(config, record, "")`` otherwise.
        """
        rec = perfdb.get(problem.problem_key(), arch or target.arch, self.solver_db_id())
        if rec is None:
            return None, None, ""
        try:
            cfg = PerfConfig.parse(rec.values)
        except PerfConfigError as e:
            return None, rec, str(e)
        ok, why = is_valid_performance_config(problem, target, cfg)
        return (cfg, rec, "") if ok else (None, rec, why)

    def get_solution(self, problem: ConvProblem, target: Target,
                     config: PerfConfig | None = None) -> Solution:
        """What to launch for ``problem`` with ``config`` (default config when None).

        Grid: x = tiles per group, or persistent blocks (+ :func:`zero_fill_block_count`), y = G,
        z = resolved split_k; block = (threads, 1, 1). Source is emitted lazily
        (:attr:`KernelLaunch.source`).

        Raises:
            NotApplicableError: a structural guard fails (layout, dtype, ...).
            PerfConfigError: ``config`` is invalid (or no default is valid).
        """
        verdict = check(problem, target)
        if not verdict.ok:
            raise NotApplicableError(verdict)
        cfg = config if config is not None else self.get_default_performance_config(problem, target)
        spec = make_spec(problem, target, cfg)
        if spec.zero_fill == "memset":
            zf = ZeroFill("memset", bytes=problem.dx_elems * problem.elem_bytes)
        elif spec.zero_fill == "blocks":
            zf = ZeroFill("blocks", blocks=zero_fill_block_count(spec))
        else:
            zf = ZeroFill("none")
        launch = KernelLaunch(name=spec.kernel_name,
                              grid=(spec.tile_blocks + zf.blocks, problem.G, spec.split_k),
                              block=(spec.block_threads, 1, 1), lds_bytes=spec.lds_bytes, spec=spec)
        return Solution(solver_id=self.solver_db_id(), solution_id=self.solution_id,
                        algorithm=ALGORITHM, perf_config=cfg, spec=spec, zero_fill=zf,
                        kernels=(launch,), workspace_bytes=spec.workspace_bytes)

    def search(self, problem: ConvProblem, target: Target) -> Iterator[PerfConfig]:
        """Valid configs for ``problem``, default first, one per distinct kernel (configs
        that resolve to the same kernel name are yielded once). A generator: the tuner
        times what it takes. Yields nothing for a problem that is not applicable.
        """
        if not self.is_applicable(problem, target):
            return
        seen = set()
        first = self.get_default_performance_config(problem, target)
        for cfg in itertools.chain((first,), _search_space(problem, target)):
            try:
                name = make_spec(problem, target, cfg).kernel_name
            except PerfConfigError:
                continue
            if name not in seen:
                seen.add(name)
                yield cfg


__all__ = ["ALGORITHM", "DgradSolver", "KernelLaunch", "Solution", "ZeroFill",
           "zero_fill_block_count"]
