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
``FindSolution`` (db, default)  :meth:`~DgradSolver.find_solution`
=============================  =====================================================

:meth:`DgradSolver.find_solution` is the one config policy: a given perf config, else the
perf-db's record when it validates, else the default; a run's ``lds_k_outer``/``split_k``/
``split_k_reduce`` settings on top; ``split_k = -1`` resolved. It returns a :class:`Solution` with its notes and
warnings as data (the driver prints them); :meth:`Solution.to_record` carries it to worker
processes, which build nothing anew. Everything here runs without a GPU.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
from dataclasses import dataclass, field
from functools import cached_property
from typing import Iterator

from . import SOLVER_ID, SOLVER_NAME
from .applicability import NotApplicableError, Verdict, check, is_applicable, launch_problem
from .config import SPLIT_K_REDUCE, KernelSchedule, PerfConfig, as_perf_config
from .errors import ArgumentError, PerfConfigError, PerfDbError, RecordError, TargetError, shown_value
from .heuristics import (PINGPONG_CONSUMERS, cooperative_form, default_performance_config, max_search_split_k,
                         max_stream_k_workspace, search_space)
from .nchw_pw import nchw_pw_reason, wt_transform
from .nchw_tma import nchw_tma_reason
from .nchw_tma import wt_transform as nchw_tma_wt
from .problem import ConvProblem
from .records import NO_FIELD, check_int, check_list, check_optional, check_str, fields_of, first_difference
from .spec import (DgradSpec, MAX_SPLIT_K, is_valid_performance_config, launch_spec, make_spec,
                   split_k_atomics_reason)
from .splitk import SplitKReduce
from .subpixel import PackW, subpixel_reason
from .target import PRESETS, Target, get_target
from .tf32 import math_note
from .transpose import (WORKSPACE_ALIGN, LayoutTransform, layout_transforms, memory_order, transform_launches,
                        workspace_bytes, writes_nchw_dx)

ALGORITHM = "miopenConvolutionBwdDataAlgoImplicitGEMM"
"""MIOpen's algorithm name for implicit-GEMM backward data (enum value 5)."""

KOUTER = {"auto": -1, "on": 1, "off": 0}
"""Names of the ``lds_k_outer`` setting (a run's ``--kouter``) -> the PerfConfig field."""
SPLIT_K_REDUCE_CODES = {name: code for code, name in enumerate(SPLIT_K_REDUCE)}
"""Names of the ``split_k_reduce`` setting (a run's ``--split-k-reduce``) -> the PerfConfig field."""


@dataclass(frozen=True)
class KernelLaunch:
    """One kernel of a solution: its name, launch shape and its source, emitted once.

    Attributes:
        name: the kernel name (``DgradSpec.kernel_name``).
        grid: blocks along x, y, z (:attr:`DgradSpec.grid`).
        block: threads per block along x, y, z.
        lds_bytes: shared memory per block, bytes.
        spec: the resolved spec the kernel is emitted from.
    """

    name: str
    grid: tuple
    block: tuple
    lds_bytes: int
    spec: DgradSpec

    @cached_property
    def source(self):
        """The emitted :class:`~miopen_solver.kernels.KernelSource` (``.text``, ``.sha256``,
        the launch geometry), emitted at most once per launch."""
        return self.spec.emit()

    def as_dict(self) -> dict:
        return {"name": self.name, "grid": list(self.grid), "block": list(self.block),
                "lds_bytes": self.lds_bytes}


@dataclass(frozen=True)
class ZeroFill:
    """How dX pixels no sub-GEMM writes become zero.

    Attributes:
        kind: ``"memset"`` (the whole of dX is zeroed before the kernel; split-K
            accumulates atomically), ``"blocks"`` (extra blocks of the same launch write the
            zeros), ``"reduce"`` (the split-K reduction stores them) or ``"none"``.
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
    """MIOpen's ConvSolution as data: what to launch, in order, what it needs, and why this
    config (decided once, by :meth:`DgradSolver.find_solution` or :meth:`~DgradSolver.get_solution`).

    Attributes:
        solver_id: the solver db id (:data:`miopen_solver.SOLVER_NAME`).
        solution_id: the numeric id (:data:`miopen_solver.SOLVER_ID`).
        algorithm: MIOpen's algorithm name.
        perf_config: the config the spec was built from (``split_k`` -1 only when it was
            not resolved; ``spec.split_k`` is what is launched).
        spec: the validated spec.
        zero_fill: the zero-fill step, before or inside the launch.
        kernels: the dgrad kernel's launch (one: all sub-GEMMs share one kernel).
        workspace_bytes: device workspace needed, bytes: the layout transforms' copies, then
            the split-K slices (:attr:`reduce`).
        source: where the config came from: ``"perf-config"``, ``"perfdb"`` or ``"default"``.
        notes: lines about the choice (given config, perf-db use, fallbacks, resolved split-K).
        warnings: lines about inputs that could not be used (an unusable perf-db).
        tuned_ms: the perf-db record's time, when the config came from there and runs as
            recorded (None when a setting such as ``split_k`` changed it).
        perfdb_path: the perf-db consulted (None when none was).
        images: the whole problem's N; 0 (or ``spec.problem.N``) when one launch takes the
            whole batch. Otherwise the batch is split along N (split-N): ``spec`` is the
            problem of one chunk (its N images per launch), and :attr:`chunks` lists the
            launches, each of the one kernel with pointers offset to its first image.
        layouts: the problem's ``(in_layout, out_layout, fil_layout)`` flags; () when they
            are the spec's. ``spec.problem`` is the launch problem: for the NCHW pointwise
            schedules (:mod:`miopen_solver.nchw_pw`) in the problem's own layouts, for every
            other schedule :func:`~miopen_solver.transpose.native_problem` (dY and W NHWC, dX
            NCHW when it is NCHW in memory, else NHWC).
        transforms: the :class:`~miopen_solver.transpose.LayoutTransform` launches around
            the kernel, in order (dY, W before it; dX after it unless the kernel stores dX
            NCHW itself, :func:`~miopen_solver.transpose.writes_nchw_dx`), each over the
            whole batch; their copies (NHWC; W^T for the NCHW pointwise schedules) fill the first
            :func:`~miopen_solver.transpose.workspace_bytes` of the workspace.
        reduce: split-K through the fp32 workspace (:mod:`miopen_solver.splitk`): the
            reduction launched after each chunk's dgrad kernel, whose slices follow the
            transforms' copies in the workspace; None otherwise (no split-K, or atomic).
    """

    solver_id: str
    solution_id: int
    algorithm: str
    perf_config: PerfConfig
    spec: DgradSpec
    zero_fill: ZeroFill
    kernels: tuple
    workspace_bytes: int
    source: str = "default"
    notes: tuple = ()
    warnings: tuple = ()
    tuned_ms: float | None = None
    perfdb_path: str | None = None
    images: int = 0
    layouts: tuple = ()
    transforms: tuple = ()
    reduce: SplitKReduce | None = None

    @cached_property
    def problem(self) -> ConvProblem:
        """The whole problem (all N images, its own layout flags); ``spec.problem`` is one
        launch's (dY and W NHWC)."""
        p = self.spec.problem
        if self.images not in (0, p.N):
            p = p.replace(N=self.images)
        if self.layouts:
            p = p.replace(**dict(zip(("in_layout", "out_layout", "fil_layout"), self.layouts)))
        return p

    @property
    def chunk_images(self) -> int:
        """Images per launch (the kernel's N)."""
        return self.spec.problem.N

    @property
    def chunks(self) -> tuple:
        """The launches along N, ``((n0, n), ...)`` in order: each covers images
        ``n0 .. n0+n-1``; together every image once. ``((0, N),)`` without a split."""
        n = self.chunk_images
        return tuple((n0, n) for n0 in range(0, self.problem.N, n))

    @property
    def n_chunks(self) -> int:
        """How many launches one run of the solution makes (1 without a split)."""
        return self.problem.N // self.chunk_images

    @property
    def target(self) -> Target:
        return self.spec.target

    @property
    def kernel_name(self) -> str:
        """The dgrad kernel's name, with ``+pack_w`` when the sub-pixel schedules' W' pack runs
        before it and ``+transpose_<tensors>`` when layout transforms run around it (e.g.
        ``..._dxnchw_...+transpose_dy`` for an NCHW problem with a 1x1 filter whose kernel
        stores dX NCHW)."""
        layout = [t.tensor.lower() for t in self.transforms if isinstance(t, LayoutTransform)]
        packs = "+pack_w" if len(layout) < len(self.transforms) else ""
        return self.spec.kernel_name + packs + (f"+transpose_{'_'.join(layout)}" if layout else "")

    @property
    def kernel_workspace_offset(self) -> int:
        """Where the kernel's own workspace (split-K slices, stream-K's flags and slots)
        starts, bytes: after the layout transforms' copies."""
        return workspace_bytes(self.transforms)

    @property
    def transform_launches(self) -> tuple:
        """The launches of :attr:`transforms`, in order
        (:func:`~miopen_solver.transpose.transform_launches`: dY's and W's as one pair where
        that rule holds on the target)."""
        return transform_launches(self.transforms, self.target)

    @property
    def schedule(self) -> KernelSchedule:
        return self.spec.config.schedule

    @property
    def math(self) -> str:
        """The math the kernel runs (``spec.math``): ``"tf32"`` (operands rounded to TF32,
        fp32 accumulation; :mod:`miopen_solver.tf32`) or the storage type. A TF32 problem on
        the direct schedule runs ``"fp32"``."""
        return self.spec.math

    @property
    def tolerance(self) -> float:
        """MIOpen's backward-data tolerance for :attr:`math` (implicit GEMM:
        :func:`~miopen_solver.reference.default_tolerance`), what a run is verified with."""
        from .reference import default_tolerance
        return default_tolerance(self.math)

    def as_dict(self) -> dict:
        return {"solver_id": self.solver_id, "solution_id": self.solution_id,
                "algorithm": self.algorithm, "perf_config": self.perf_config.serialize(),
                "math": self.math, "tolerance": self.tolerance,
                "zero_fill": self.zero_fill.as_dict(),
                "kernels": [k.as_dict() for k in self.kernels],
                "split_n": {"images": self.problem.N, "images_per_launch": self.chunk_images,
                            "launches": self.n_chunks},
                "layout_transforms": [{"tensor": t.tensor, "from": t.src, "to": t.dst, "form": t.kernel_form,
                                       "launch": i, "kernel": launch.kernel_name, "grid": list(launch.grid),
                                       "block": list(launch.block), "bytes": t.nbytes, "workspace_offset": t.offset}
                                      for i, launch in enumerate(self.transform_launches)
                                      for t in launch.transforms],
                "split_k_reduce": self.split_k_reduce,
                "workspace_bytes": self.workspace_bytes, "spec": self.spec.as_dict()}

    @property
    def split_k_reduce(self) -> dict:
        """How split-K partial sums meet: ``{"mode": "none"|"atomic"}``, for the workspace
        the reduction's kernel, launch and workspace share
        (:meth:`~miopen_solver.splitk.SplitKReduce.as_dict`), for stream-K its blocks,
        k-tiles per tile and the kernel's workspace: ``flag_bytes`` (zeroed before every
        launch) then one fp32 slot of ``slot_bytes`` per block."""
        if self.reduce is not None:
            return self.reduce.as_dict()
        if getattr(self.spec, "stream_k", False):
            s = self.spec
            return {"mode": "stream", "blocks": s.tile_blocks, "tiles": s.tiles_per_group,
                    "k_tiles_per_tile": s.stream_k_tiles, "flag_bytes": 4 * s.stream_k_flag_words,
                    "slot_bytes": 4 * s.config.tile_m * s.config.tile_n,
                    "kernel_workspace_bytes": self.kernels[0].source.workspace_arg}
        return {"mode": getattr(self.spec, "split_k_reduce", "none")}

    def to_record(self) -> dict:
        """Plain data for a worker process: the spec with every resolved value, the kernels'
        launch shapes and their emitted sources, so the worker compiles and launches what was
        decided here without validating, choosing or emitting."""
        return {"perf_config": self.perf_config.serialize(), "spec": self.spec.to_record(),
                "zero_fill": self.zero_fill.as_dict(), "workspace_bytes": self.workspace_bytes,
                "kernels": [{**k.as_dict(), "source": k.source.to_record()} for k in self.kernels],
                "source": self.source, "notes": list(self.notes), "warnings": list(self.warnings),
                "tuned_ms": self.tuned_ms, "perfdb_path": self.perfdb_path, "images": self.problem.N,
                "layouts": list(self.layouts), "transforms": [t.to_record() for t in self.transforms],
                "reduce": self.reduce.to_record() if self.reduce is not None else None}

    @classmethod
    def from_record(cls, rec: dict) -> "Solution":
        """Inverse of :meth:`to_record`, checked; nothing is chosen. The spec is made from
        the problem, target and config the record names (``make_spec``: one validation, the
        one the driver made) and the rest derived from it as :func:`solution_of` does: the
        kernel's launch and emitted source, the zero fill, the layout transforms, the split-K
        reduction and the workspace. Every field of the record must equal what they resolve
        to (a record that lost its transforms would leave dX in the wrong layout); the
        provenance fields (``source``, ``notes``, ``warnings``, ``tuned_ms``,
        ``perfdb_path``) must be of their types.

        Raises:
            RecordError: ``rec`` is not a dict; a field is missing, unknown, of the wrong
                type or out of range; the config is not valid for the problem and target;
                or a field differs from what they resolve to. The message names the field's
                path, the value and what is allowed.
        """
        return _solution_from_record(rec)


RECORD_FIELDS = ("perf_config", "spec", "zero_fill", "workspace_bytes", "kernels", "source", "notes", "warnings",
                 "tuned_ms", "perfdb_path", "images", "layouts", "transforms", "reduce")
"""The fields of :meth:`Solution.to_record`, every one required by :meth:`Solution.from_record`."""
SOURCES = ("default", "perf-config", "perfdb")
"""Where a solution's config came from (:attr:`Solution.source`)."""


def _solution_from_record(rec) -> Solution:
    """:meth:`Solution.from_record`: the record's identity (problem, target, config, images,
    layouts) read and checked, the solution rebuilt from it, every other field compared."""
    fields_of(rec, RECORD_FIELDS, "solution", what="a Solution.to_record() dict, with the fields "
              + ", ".join(RECORD_FIELDS))
    spec_rec = rec["spec"]
    if not isinstance(spec_rec, dict):
        raise RecordError("solution", "spec", spec_rec, "a spec's to_record() dict (problem, target, config, ...)")
    for name in ("problem", "target", "config"):        # the spec's other fields are compared below
        if name not in spec_rec:
            raise RecordError("solution", f"spec.{name}", RecordError.MISSING, "a spec's to_record() dict")
    problem = _problem_of(spec_rec["problem"])
    try:
        target = Target.from_record(spec_rec["target"])
    except RecordError as e:
        raise e.within("solution", "spec.target") from None
    text = check_str(spec_rec["config"], "solution", "spec.config", allowed="a perf config's text")
    try:
        config = PerfConfig.parse(text)
    except PerfConfigError as e:
        raise RecordError("solution", "spec.config", text, "a perf config's text", str(e)) from None
    images = rec["images"]
    if check_int(images, "solution", "images", problem.N) % problem.N:
        raise RecordError("solution", "images", images, f"a multiple of spec.problem.N ({problem.N})")
    lays = check_list(rec["layouts"], "solution", "layouts", allowed="[] or [in_layout, out_layout, fil_layout]")
    if len(lays) not in (0, 3):
        raise RecordError("solution", "layouts", rec["layouts"], "[] or [in_layout, out_layout, fil_layout]")
    try:
        whole = problem.replace(N=images, **dict(zip(("in_layout", "out_layout", "fil_layout"), lays)))
    except ValueError as e:
        raise RecordError("solution", "layouts", rec["layouts"], "three layout names", str(e)) from None
    verdict = check(whole, target)
    if not verdict.ok:
        raise RecordError("solution", "spec.problem", spec_rec["problem"], "a problem applicable on spec.target",
                          "not applicable: " + "; ".join(str(r) for r in verdict.reasons))
    try:
        spec = make_spec(problem, target, config)
    except PerfConfigError as e:
        raise RecordError("solution", "spec.config", text, "a config valid for spec.problem on spec.target",
                          str(e)) from None
    try:
        sol = solution_of(spec, images=images, problem=whole)
    except ValueError as e:             # the kernel stores dX NCHW; the layouts say otherwise
        raise RecordError("solution", "layouts", rec["layouts"], "the layouts the spec's kernel runs",
                          str(e)) from None
    want = sol.to_record()
    for name in RECORD_FIELDS:
        diff = None if name in _PROVENANCE else first_difference(rec[name], want[name], name)
        if diff:
            path, got, expected = diff
            raise RecordError("solution", path, got, _shown_expected(expected),
                              "differs from what its problem, target and config resolve to")
    notes, warnings = (tuple(check_str(line, "solution", f"{name}[{i}]", allowed="a string")
                             for i, line in enumerate(check_list(rec[name], "solution", name,
                                                                 allowed="a list of strings")))
                       for name in ("notes", "warnings"))
    return dataclasses.replace(sol, source=check_str(rec["source"], "solution", "source", SOURCES),
                               notes=notes, warnings=warnings,
                               tuned_ms=check_optional(rec["tuned_ms"], "solution", "tuned_ms", "ms"),
                               perfdb_path=check_optional(rec["perfdb_path"], "solution", "perfdb_path", "text"))


_PROVENANCE = ("source", "notes", "warnings", "tuned_ms", "perfdb_path")


def _problem_of(rec) -> ConvProblem:
    """The spec record's problem: every :class:`ConvProblem` field, validated by it.

    Raises:
        RecordError: a missing or unknown field, or a value ConvProblem refuses.
    """
    names = tuple(f.name for f in dataclasses.fields(ConvProblem))
    fields_of(rec, names, "solution", "spec.problem", "a ConvProblem.as_dict() dict, with the fields "
              + ", ".join(names))
    try:
        return ConvProblem.from_dict(rec)
    except (TypeError, ValueError) as e:
        raise RecordError("solution", "spec.problem", rec, "a valid ConvProblem.as_dict()", str(e)) from None


def _shown_expected(value) -> str:
    """What a compared field should have been, for a message: long text by its length."""
    if value is NO_FIELD:
        return "no such field"
    if isinstance(value, str) and len(value) > 200:
        return f"the {len(value)}-character text they give"
    return shown_value(value)


@dataclass
class _Choice:
    """The config policy's working state (see :meth:`DgradSolver.find_solution`)."""

    config: PerfConfig | None = None
    source: str = "default"
    notes: list = field(default_factory=list)
    warnings: list = field(default_factory=list)
    tuned_ms: float | None = None
    perfdb_path: str | None = None


def _check_split_k_reduce(value) -> None:
    """A ``split_k_reduce`` setting of :meth:`DgradSolver.find_solution` and
    :meth:`DgradSolver.search`: None or a name of :data:`SPLIT_K_REDUCE_CODES`.

    Raises:
        PerfConfigError: anything else, naming the value and the names allowed.
    """
    if value is not None and (not isinstance(value, str) or value not in SPLIT_K_REDUCE_CODES):
        raise PerfConfigError(f"--split-k-reduce {value!r}: allowed: {', '.join(SPLIT_K_REDUCE)}")


def as_problem(problem) -> ConvProblem:
    """``problem`` when it is a :class:`~miopen_solver.problem.ConvProblem`.

    Raises:
        TypeError: anything else (a line of text, say), naming what is allowed.
    """
    if isinstance(problem, ConvProblem):
        return problem
    raise TypeError(f"problem {shown_value(problem)}: allowed: a miopen_solver.problem.ConvProblem, e.g. "
                    f"miopen_solver.command.parse(line).problem")


def as_target(target) -> Target:
    """``target`` as a :class:`Target`: a Target as it is, or a preset's name (``"gfx942"``,
    ``"sm_90"``; :func:`miopen_solver.target.get_target`).

    Raises:
        TargetError: an unknown name, or anything else (naming the known names).
    """
    if isinstance(target, Target):
        return target
    if isinstance(target, str):
        return get_target(target)
    known = ", ".join(sorted(PRESETS))
    raise TargetError(f"target {shown_value(target)}: allowed: a miopen_solver.target.Target or an arch name: "
                      f"{known}", target, known)


def _check_find_arguments(perfdb_arch, perfdb_label, perf_config_label, resolve_split_k) -> None:
    """:meth:`DgradSolver.find_solution`'s arguments that have one type.

    Raises:
        ArgumentError: the first that does not, naming it, its value and what is allowed.
    """
    if perfdb_arch is not None:
        from .perfdb import _check_field
        _check_field("arch", perfdb_arch)          # as the perf-db checks the arch it files under
    for name, value, none in (("perfdb_label", perfdb_label, True), ("perf_config_label", perf_config_label, False)):
        if not (value is None and none) and (not isinstance(value, str) or not value.strip()):
            raise ArgumentError(name, value, "a non-empty string" + (" or None" if none else ""))
    if not isinstance(resolve_split_k, bool):
        raise ArgumentError("resolve_split_k", resolve_split_k, "True or False")


class DgradSolver:
    """Implicit-GEMM backward data by tilde decomposition, NHWC, one launch.

    Stateless; every verb takes the problem and the target. Nothing here needs a GPU.
    Every verb raises TypeError for a problem that is not a ConvProblem (:func:`as_problem`)
    and TargetError for a target that is neither a Target nor a preset's name
    (:func:`as_target`).
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
        problem, target = as_problem(problem), as_target(target)
        return is_applicable(problem, target, forw=forw)

    def get_default_performance_config(self, problem: ConvProblem, target: Target) -> PerfConfig:
        """A config that validates, chosen in constant time
        (:func:`miopen_solver.heuristics.default_performance_config`).

        Raises:
            PerfConfigError: no default validates (the problem is then not applicable:
                ``NO_VALID_CONFIG``).
        """
        problem, target = as_problem(problem), as_target(target)
        return default_performance_config(launch_problem(problem), target)

    def is_valid_performance_config(self, problem: ConvProblem, target: Target,
                                    config: PerfConfig | str) -> tuple:
        """``(True, "")`` or ``(False, reason)``; used to vet perf-db records too. ``config``:
        a :class:`PerfConfig` or its text (text that does not parse is ``(False, why)``). A
        split batch is asked about one launch's problem
        (:func:`~miopen_solver.applicability.launch_problem`).

        Raises:
            PerfConfigError: ``config`` is neither a PerfConfig nor text.
            TargetError: ``target`` is neither a Target nor a preset's name.
        """
        problem, target = as_problem(problem), as_target(target)
        if isinstance(config, str):
            try:
                config = PerfConfig.parse(config)
            except PerfConfigError as e:
                return False, str(e)
        return is_valid_performance_config(launch_problem(problem), target, as_perf_config(config))

    def get_workspace_size(self, problem: ConvProblem, target: Target,
                           config: PerfConfig | str | None = None) -> int:
        """Device workspace in bytes for ``config``: the copies its layout transforms write
        (each slot 256-byte aligned; MIOpen's NHWC solvers size theirs the same way,
        ``GetWorkspaceSizeLayoutTransformConv``): the NHWC copies of the tensors stored NCHW
        (0 for a problem NHWC in memory; no dX copy when the kernel stores dX NCHW itself),
        or for an NCHW pointwise or NCHW TMA config W^T alone, for a sub-pixel config its packed W'
        (:class:`~miopen_solver.subpixel.PackW`); plus the kernel's own: split-K through the
        fp32 workspace needs ``split_k`` slices of one launch's dX (``N*Hi*Wi*C`` fp32
        elements each, 256-byte aligned; reused by every split-N launch), atomic split-K none.
        Without a config, the most the default or any config :meth:`search` offers needs
        (MIOpen sizes a solver's workspace per problem, not per config): every NCHW tensor
        copied, plus the widest split of the search space where it offers split-K through
        the workspace, or the largest stream-K flags and slots it offers; a given config that
        asks for more reports it here with the config.
        ``config``: a :class:`PerfConfig` or its text.

        Raises:
            NotApplicableError: the problem is not applicable on ``target`` (MIOpen asks a
                solver's workspace only of problems it is applicable to): every reason, as
                :meth:`is_applicable` gives them (without a config, ``NO_VALID_CONFIG`` too).
            PerfConfigError: ``config`` is given and malformed, invalid or of another type.
            TargetError: ``target`` is neither a Target nor a preset's name.
        """
        problem, target = as_problem(problem), as_target(target)
        config = None if config is None else as_perf_config(config)
        verdict = check(problem, target) if config is not None else is_applicable(problem, target)
        if not verdict.ok:
            raise NotApplicableError(verdict)
        if config is None:
            launch = launch_problem(problem)
            splits = max_search_split_k(launch, target)
            copies = workspace_bytes(layout_transforms(problem))
            sizes = [copies + splits * _slice_bytes(launch), copies + max_stream_k_workspace(launch, target)]
            if nchw_pw_reason(launch, target) is None:
                sizes.append(workspace_bytes((wt_transform(problem),)))
            if nchw_tma_reason(launch, target) is None:                       # W^T of every tap
                sizes.append(workspace_bytes((nchw_tma_wt(problem),)))
            if subpixel_reason(launch, target) is None:                       # the sub-pixel W'
                sizes.append(workspace_bytes((PackW(problem),)))
            return max(sizes)
        spec = launch_spec(launch_problem(problem), target, config)
        return workspace_bytes(run_transforms(spec, problem)) + spec.workspace_bytes

    def lookup_performance_config(self, problem: ConvProblem, target: Target, perfdb,
                                  arch: str | None = None) -> tuple:
        """The perf-db record for ``problem`` under ``arch`` (default ``target.base_arch``:
        the arch without feature suffixes such as ``:sramecc+``) and this solver, checked
        against ``target``.

        Returns:
            ``(config, record, reason)``: ``(None, None, "")`` when there is no record;
            ``(None, record, reason)`` when the record does not parse or is not valid here;
            ``(config, record, "")`` otherwise.

        Raises:
            PerfDbError: the perf-db cannot be read.
        """
        problem, target = as_problem(problem), as_target(target)
        from .perfdb import PerfDb
        if not isinstance(perfdb, PerfDb):
            raise TypeError(f"perfdb {shown_value(perfdb)}: allowed: a miopen_solver.perfdb.PerfDb")
        rec = perfdb.get(problem.problem_key(), target.base_arch if arch is None else arch, self.solver_db_id())
        if rec is None:
            return None, None, ""
        try:
            cfg = PerfConfig.parse(rec.values)
        except PerfConfigError as e:
            return None, rec, str(e)
        ok, why = is_valid_performance_config(launch_problem(problem), target, cfg)
        return (cfg, rec, "") if ok else (None, rec, why)

    def get_solution(self, problem: ConvProblem, target: Target,
                     config: PerfConfig | str | None = None) -> Solution:
        """What to launch for ``problem`` with ``config`` (a :class:`PerfConfig` or its text;
        the default config when None): MIOpen's GetSolution, no perf-db and no settings (see
        :meth:`find_solution` for those).

        Raises:
            NotApplicableError: a structural guard fails (layout, dtype, ...).
            PerfConfigError: ``config`` is malformed, invalid or of another type (or no
                default is valid).
            TargetError: ``target`` is neither a Target nor a preset's name.
        """
        problem, target = as_problem(problem), as_target(target)
        config = None if config is None else as_perf_config(config)
        verdict = check(problem, target)
        if not verdict.ok:
            raise NotApplicableError(verdict)
        choice = _Choice(config=config, source="perf-config" if config is not None else "default")
        return self._solution(problem, target, choice)

    def find_solution(self, problem: ConvProblem, target: Target, *, perf_config=None, perfdb=None,
                      perfdb_arch: str | None = None, perfdb_label: str | None = None,
                      kouter: str | None = None, split_k: int | None = None,
                      split_k_reduce: str | None = None, resolve_split_k: bool = True,
                      perf_config_label: str = "--perf-config") -> Solution:
        """The solution a run launches, decided once (MIOpen's FindSolution for one solver).

        Policy: ``perf_config`` (a :class:`PerfConfig` or its text) when given; else the
        perf-db record for this problem under ``perfdb_arch`` (default ``target.base_arch``) when
        it validates on ``target`` (a record that does not is ignored with a note); else the
        default. Then the settings: ``kouter`` (``auto``/``on``/``off``: ``lds_k_outer``),
        ``split_k`` (-1 or 1..64) and ``split_k_reduce`` (``auto``/``atomic``/``workspace``:
        how a split-K launch sums its slices, or ``stream``: stream-K on the TMA schedule;
        :func:`~miopen_solver.spec.split_k_reduce_mode`;
        it sets the config's field where split_k is not 1). A setting that a default or perf-db config of a
        warpgroup schedule cannot take moves to the nearest config that can (the plain
        warpgroup form, else the warp-MMA default), with a note; a given config is kept as
        given, so its broken rule is the error. With ``resolve_split_k``, ``split_k = -1`` is
        resolved to the degree the spec chooses.

        Args:
            perfdb: a :class:`~miopen_solver.perfdb.PerfDb`, a path to one, or None (no lookup).
                A perf-db that cannot be read is a warning (the default is used), not an error.
            perfdb_label: how to name the perf-db in warnings (default ``perf-db PATH``).
            perf_config_label: where ``perf_config`` came from, as its note and errors name
                it (``Using --perf-config ...``; a search's winner: ``the -s 1 search's winner``).

        Raises:
            NotApplicableError: the problem is not applicable on ``target``.
            PerfConfigError: the given config is malformed or invalid, or the settings make
                it invalid; the message starts with the options given.
            ArgumentError: ``perfdb_arch`` not None or a perf-db field (a non-empty string),
                ``perfdb_label`` not None or a non-empty string, ``perf_config_label`` not a
                non-empty string, ``resolve_split_k`` not a bool.
        """
        problem, target = as_problem(problem), as_target(target)
        _check_find_arguments(perfdb_arch, perfdb_label, perf_config_label, resolve_split_k)
        verdict = check(problem, target)
        if not verdict.ok:
            raise NotApplicableError(verdict)
        if split_k is not None and (isinstance(split_k, bool) or not isinstance(split_k, int)
                                    or not (split_k == -1 or 1 <= split_k <= MAX_SPLIT_K)):
            raise PerfConfigError(f"--split-k {shown_value(split_k)}: allowed: -1 (choose) or an integer from 1 to "
                                  f"{MAX_SPLIT_K}")
        if kouter is not None and (not isinstance(kouter, str) or kouter not in KOUTER):
            raise PerfConfigError(f"--kouter {shown_value(kouter)}: allowed: {', '.join(KOUTER)}")
        _check_split_k_reduce(split_k_reduce)
        settings = _Settings(kouter, split_k, split_k_reduce)
        given = ([f"{perf_config_label} {str(perf_config)!r}"] if perf_config is not None else []) + settings.flags
        choice = _Choice()
        launch = launch_problem(problem)        # configs and kernels are one launch's
        try:
            choice = self._choose(problem, target, perf_config, perfdb, perfdb_arch, perfdb_label, perf_config_label)
            self._apply_settings(launch, target, choice, settings, resolve_split_k)
            return self._solution(problem, target, choice)
        except PerfConfigError as e:
            refused = e.config or choice.config
            if not given or str(e).startswith(("--", perf_config_label)):
                raise PerfConfigError(str(e), refused) from None
            why = f"{' '.join(given)}: {e}"
            if "allowed:" not in why:       # a rule's sentence: say what would do instead
                names = " or ".join(g.split(" ", 1)[0] for g in given)
                why += f"; allowed: {names} as this problem and target take it (tune --list lists its configs)"
            raise PerfConfigError(why, refused) from None

    def _choose(self, problem, target, perf_config, perfdb, perfdb_arch, perfdb_label,
                perf_config_label: str = "--perf-config") -> _Choice:
        choice = _Choice()
        if perf_config is not None:
            cfg = as_perf_config(perf_config, perf_config_label)
            choice.config, choice.source = cfg, "perf-config"
            choice.notes.append(f"Using {perf_config_label} {cfg.serialize()}")
            return choice
        if perfdb is not None:
            self._lookup(problem, target, perfdb, perfdb_arch, perfdb_label, choice)
        if choice.config is None:
            choice.config = self.get_default_performance_config(problem, target)
        return choice

    def _lookup(self, problem, target, perfdb, arch, label, choice: _Choice) -> None:
        from .perfdb import PerfDb
        if not isinstance(perfdb, (PerfDb, str, os.PathLike)):
            raise TypeError(f"perfdb {shown_value(perfdb)}: allowed: a miopen_solver.perfdb.PerfDb, a path, or None")
        db = perfdb if isinstance(perfdb, PerfDb) else PerfDb(os.fspath(perfdb))
        choice.perfdb_path = str(db.path)
        label = label or f"perf-db {db.path}"
        try:
            with db:
                cfg, rec, why = self.lookup_performance_config(problem, target, db, arch=arch)
        except PerfDbError as e:
            choice.warnings.append(f"{label} unusable: {e.reason}; using the default config")
            return
        if rec is not None and cfg is None:
            choice.notes.append(f"Ignoring perf-db config {rec.values} from {db.path}: {why}")
        elif cfg is not None:
            choice.config, choice.source, choice.tuned_ms = cfg, "perfdb", rec.time_ms
            shown = f"tuned {rec.time_ms:.6f} ms" if rec.time_ms is not None else "imported, no time"
            choice.notes.append(f"Using perf-db config {cfg.serialize()} ({shown}) from {db.path}")

    def _apply_settings(self, problem, target, choice: _Choice, settings: "_Settings", resolve: bool) -> None:
        """``--kouter``/``--split-k``/``--split-k-reduce`` on top of the chosen config. A default or perf-db config
        that cannot take a setting moves to the nearest config that can, with a note: a
        ping-pong tile to its cooperative TMA form (:func:`~miopen_solver.heuristics.cooperative_form`), a
        warpgroup schedule to its plain form, else to the warp-MMA default (``stream``: the
        tile on the TMA schedule, unsplit, and nothing else); the direct schedule
        (one write per dX element, its ``lds_k_outer`` slot means something else) to the GEMM
        default, except for ``auto`` and ``-1``/``1``, which it already is; a patch or NCHW
        pointwise wgmma schedule first to its own family's warp-MMA default (``--kouter``),
        then (no split K in those families) to the tilde warp-MMA default. A given config is
        kept as given, so its broken rule is the error."""
        cfg = choice.config
        asked = settings.apply(cfg)
        flags = " ".join(settings.flags)
        kind = "warpgroup-MMA" if cfg.schedule.warpgroup and not cfg.schedule.virtual_gemm else cfg.schedule.slug
        whose = {"default": f"the {kind} default", "perfdb": "the perf-db config"}.get(choice.source)
        moved = False
        if whose and asked != cfg and (cfg.schedule.warpgroup or cfg.schedule.virtual_gemm
                                       or cfg.schedule.direct):
            ok, why = is_valid_performance_config(problem, target, asked)
            fallbacks = []
            stream = settings.split_k_reduce == "stream"
            tma = cfg.schedule is KernelSchedule.WGMMA_TMA
            # a ping-pong tile (no split-K, no k-inner W) falls back as its cooperative TMA form would
            base = cooperative_form(cfg)
            if (stream and cfg.schedule.warpgroup and not cfg.schedule.virtual_gemm and settings.split_k in (None, -1, 1)
                    and not (tma and cfg.split_k in (-1, 1))):      # stream-K: the tile on TMA, unsplit
                fallbacks.append(("the unsplit form" if tma else "the TMA form",
                                  base.replace(schedule=KernelSchedule.WGMMA_TMA, split_k=1)))
            if base is not cfg and not (fallbacks and stream):     # (its unsplit stream form is above)
                fallbacks.append(("the cooperative TMA form", base))
            if base.schedule in (KernelSchedule.WGMMA_PERSISTENT, KernelSchedule.WGMMA_TMA) \
                    and settings.split_k_reduce != "stream":
                plain = "the non-persistent form" if base.schedule is KernelSchedule.WGMMA_PERSISTENT \
                    else "the form without TMA"
                fallbacks.append((plain, base.replace(schedule=KernelSchedule.WGMMA)))
            if cfg.schedule.warpgroup and cfg.schedule.virtual_gemm:     # the family's own warp-MMA twin
                twin = default_performance_config(problem, target.with_(wgmma=False), allow_direct=False)
                if twin.schedule.virtual_gemm:
                    fallbacks.append((f"the {twin.schedule.slug} default", twin))
            if not stream:                  # stream-K runs on the TMA schedule alone
                fallbacks.append(("the warp-MMA default", self._gemm_default(problem, target.with_(wgmma=False))))
            tried = []
            for label, base in fallbacks if not ok else ():
                alt = settings.apply(base)
                alt_ok, alt_why = is_valid_performance_config(problem, target, alt)
                if alt_ok:
                    choice.notes.append(f"{flags}: not possible with {whose} {cfg.serialize()} ({why}); "
                                        f"using {label} with the setting, {alt.serialize()}")
                    asked, moved = alt, True
                    break
                tried.append(f"{label} {alt.serialize()}: {alt_why}")
            if not ok and not moved:
                raise PerfConfigError(f"not possible with {whose} {cfg.serialize()} ({why})"
                                      + "".join(f", nor with {t}" for t in tried), asked)
        if asked != cfg and not moved:      # a given config too: say what runs, not only what was typed
            choice.notes.append(f"{flags}: running {asked.serialize()} "
                                f"({whose or 'the given config'} {cfg.serialize()} with the setting)")
        if asked != cfg:                    # the tuned time was not measured for what now runs
            choice.tuned_ms = None
        choice.config = asked
        if resolve and asked.split_k == -1:      # resolved before anything is packed or launched
            chosen = launch_spec(problem, target, asked).split_k
            choice.config = asked.replace(split_k=chosen)
            choice.notes.append(f"Split-K: -1 resolved to {chosen}")
        elif settings.split_k == -1 and asked.split_k != -1:   # the config's own split is the choice
            chosen = getattr(launch_spec(problem, target, choice.config), "split_k", 1)
            choice.notes.append(f"Split-K: -1 resolved to {chosen} ({whose or 'the given config'}'s own)")
        if settings.split_k_reduce not in (None, "stream") and getattr(launch_spec(problem, target, choice.config),
                                                                       "split_k", 1) == 1:
            choice.notes.append(f"--split-k-reduce {settings.split_k_reduce}: split_k is 1, nothing to reduce")

    @staticmethod
    def _gemm_default(problem, target) -> PerfConfig:
        return default_performance_config(problem, target, allow_direct=False, allow_patch=False,
                                          allow_nchw_pw=False, allow_pack=False)

    def _solution(self, problem, target, choice: _Choice) -> Solution:
        """The Solution of ``choice`` for a problem its caller has checked (structural guards)."""
        cfg = choice.config if choice.config is not None else self.get_default_performance_config(problem, target)
        choice.config = cfg
        launch = launch_problem(problem)
        if launch.N != problem.N:
            choice.notes.append(
                f"Split-N: N={problem.N} runs as {problem.N // launch.N} launches of {launch.N} images (dY "
                f"{launch.dy_elems * launch.elem_bytes} and dX {launch.dx_elems * launch.elem_bytes} bytes each, "
                f"within 32-bit offsets), one kernel, pointers offset per launch")
        spec = launch_spec(launch, target, cfg)
        narrowed = [f"{name} {asked} -> {got}" for name, asked, got in
                    (("vector_size_a", cfg.vector_size_a, getattr(spec, "vec_a", None)),
                     ("vector_size_b", cfg.vector_size_b, getattr(spec, "vec_b", None)),
                     ("vector_size_c", cfg.vector_size_c, getattr(spec, "vec_c", None)))
                    if asked and got is not None and got < asked]
        if choice.source == "default" and spec.schedule is KernelSchedule.WGMMA_TMA_PINGPONG:
            choice.notes.append(
                f"Default: the one-warpgroup TMA tile {cfg.tile_m}x{cfg.tile_n} runs as ping-pong (two consumer "
                f"warpgroups a block owning tiles in turn, one's epilogue under the other's MMAs) at "
                f"{cfg.stages} stages, where at most {PINGPONG_CONSUMERS} one-warpgroup blocks fit on a "
                f"multiprocessor (heuristics.pingpong_form)")
        if narrowed:        # caps, not demands: a wider vector than the problem allows is clamped
            choice.notes.append(f"Vector widths narrowed to what the problem allows: {', '.join(narrowed)}")
        transforms = run_transforms(spec, problem)
        if spec.schedule is KernelSchedule.DIRECT_NCHW:
            choice.notes.append(
                f"Layout: dY read as {memory_order(problem, 'dY')} and dX written as {memory_order(problem, 'dX')} "
                f"in place by the direct schedule's mma body (W: the same bytes in either order); no transform")
        elif spec.schedule is KernelSchedule.DIRECT_PLANE:
            choice.notes.append(
                f"Layout: dY read and dX written NCHW in place, plane by plane, W read as "
                f"{'KCYX' if spec.w_nchw else 'KYXC'}{' (the same bytes at cpg 1)' if problem.cpg == 1 else ''}; "
                f"no transform")
        elif spec.schedule.subpixel:
            choice.notes.append(
                f"Layout: dY, W and dX NHWC in place; W packed into the sub-pixel GEMM's W' (the stride "
                f"phases' taps) by one launch before the kernel through a {workspace_bytes(transforms)}-byte "
                f"workspace")
        elif spec.schedule.nchw_native:
            choice.notes.append(
                f"Layout: dY and dX read and written in NCHW by per-image GEMMs; {transforms[0].label} (W^T "
                f"per group) through a {workspace_bytes(transforms)}-byte workspace")
        elif transforms:
            launches = transform_launches(transforms, target)
            shown = "; ".join(f"{' + '.join(t.tensor for t in x.transforms)} {x.kernel_name} grid "
                              f"{'x'.join(map(str, x.grid))}" for x in launches)
            choice.notes.append(
                f"Layout: {', '.join(t.label for t in transforms)} by batched transposes through a "
                f"{workspace_bytes(transforms)}-byte workspace around the NHWC kernel, in "
                f"{len(launches)} launch{'es' if len(launches) != 1 else ''} ({shown})")
        if writes_nchw_dx(spec):
            choice.notes.append("Layout: the kernel stores dX NCHW from its epilogue (no dX transform)")
        if spec.schedule.group_pack:
            choice.notes.append(
                f"Groups: {spec.pack} groups of cpg={launch.cpg}, kpg={launch.kpg} packed into one of "
                f"{spec.pack * launch.cpg} channels ({launch.G // spec.pack} packed "
                f"group{'s' if launch.G // spec.pack != 1 else ''}); W is read "
                f"block-diagonal (zeros off its groups: {spec.pack}x the MMA work, the same memory traffic)")
        sol = solution_of(spec, choice, images=problem.N, problem=problem)
        notes = []
        if sol.reduce is not None:
            r = sol.reduce
            why = "" if cfg.split_k_reduce else f"; atomics refused: {split_k_atomics_reason(launch, target)}"
            notes.append(f"Split-K: {r.split_k} slices of fp32 partial sums in {r.nbytes} bytes of the workspace, "
                         f"summed in order by {r.kernel_name} (no atomics, deterministic){why}")
        if getattr(spec, "stream_k", False):
            sk = sol.split_k_reduce
            notes.append(f"Stream-K: {sk['tiles']} tiles of {sk['k_tiles_per_tile']} k-tiles over {sk['blocks']} "
                         f"resident blocks; {sk['kernel_workspace_bytes']} bytes of the workspace: {sk['flag_bytes']} of "
                         f"flags (zeroed before every launch), then one fp32 slot of {sk['slot_bytes']} bytes "
                         f"per block")
        note = math_note(sol)
        if note:        # a TF32 problem: which math runs, and its tolerance
            notes.append(note)
        if notes:
            sol = dataclasses.replace(sol, notes=sol.notes + tuple(notes))
        return sol

    def search(self, problem: ConvProblem, target: Target, *,
               split_k_reduce: str | None = None) -> Iterator[PerfConfig]:
        """Valid configs for ``problem``, default first, one per distinct kernel (configs
        that resolve to the same kernel name are yielded once). A generator: the tuner
        times what it takes. Yields nothing for a problem that is not applicable.
        Split-K candidates sum by atomics where they are allowed, else through the fp32
        workspace; ``split_k_reduce`` (``auto``/``atomic``/``workspace``, for comparisons)
        sets every split-K candidate's reduction instead (those it makes invalid are left out);
        ``stream`` keeps only the stream-K candidates after the default.

        Raises:
            PerfConfigError: an unknown ``split_k_reduce``.
        """
        _check_split_k_reduce(split_k_reduce)
        problem, target = as_problem(problem), as_target(target)
        if not self.is_applicable(problem, target):
            return
        seen = set()
        launch = launch_problem(problem)        # a split batch: one launch's configs
        first = self.get_default_performance_config(problem, target)
        for i, cfg in enumerate(itertools.chain((first,), search_space(launch, target))):
            if split_k_reduce == "stream":      # the default, then the stream-K candidates alone
                if i and cfg.reduce != "stream":
                    continue
            elif split_k_reduce is not None and cfg.split_k != 1:
                cfg = cfg.replace(split_k_reduce=SPLIT_K_REDUCE_CODES[split_k_reduce])
            try:
                name = launch_spec(launch, target, cfg).kernel_name
            except PerfConfigError:
                continue
            if name not in seen:
                seen.add(name)
                yield cfg


def solution_of(spec: DgradSpec, choice: _Choice | None = None, images: int = 0,
                problem: ConvProblem | None = None) -> Solution:
    """The :class:`Solution` that launches a validated ``spec`` (no applicability check, no
    choice: what an engine runs when handed a spec). ``images``: the whole batch when it is
    split into launches of ``spec.problem.N`` images (a multiple of it), else 0. ``problem``:
    the whole problem in its own layouts when they are not the spec's (its NCHW tensors
    get :func:`~miopen_solver.transpose.layout_transforms`, dX none when the kernel or the
    split-K reduction stores it NCHW); default: the spec's.

    Raises:
        ValueError: ``images`` is not a positive multiple of the spec's N, or the kernel
            stores dX NCHW and ``problem``'s dX is not NCHW in memory.
    """
    choice = choice or _Choice(config=spec.config, source="perf-config")
    p = spec.problem
    if images and (images < p.N or images % p.N):
        raise ValueError(f"a batch of {images} images does not split into launches of {p.N}")
    if spec.zero_fill == "memset":    # per launch: each launch zeroes its own images of dX
        zf = ZeroFill("memset", bytes=p.dx_elems * p.elem_bytes)
    else:
        zf = ZeroFill(spec.zero_fill, blocks=spec.zero_fill_blocks)
    launch = KernelLaunch(name=spec.kernel_name, grid=spec.grid, block=spec.block, lds_bytes=spec.lds_bytes, spec=spec)
    whole = (problem or p).replace(N=images or p.N)
    if writes_nchw_dx(spec) and memory_order(whole, "dX") != "NCHW":
        raise ValueError(f"{spec.kernel_name} stores dX NCHW; the problem's dX is {whole.in_layout}")
    transforms = run_transforms(spec, whole)
    reduce = None
    if getattr(spec, "workspace_reduce", False):     # the slices follow the transforms' copies
        reduce = SplitKReduce.of(spec, "NCHW" if memory_order(whole, "dX") == "NCHW" else "NHWC",
                                 workspace_bytes(transforms))
    lays = (whole.in_layout, whole.out_layout, whole.fil_layout)
    return Solution(solver_id=SOLVER_NAME, solution_id=SOLVER_ID, algorithm=ALGORITHM, perf_config=spec.config,
                    spec=spec, zero_fill=zf, kernels=(launch,),
                    workspace_bytes=workspace_bytes(transforms) + spec.workspace_bytes,
                    source=choice.source, notes=tuple(choice.notes), warnings=tuple(choice.warnings),
                    tuned_ms=choice.tuned_ms, perfdb_path=choice.perfdb_path, images=images,
                    layouts=lays if lays != (p.in_layout, p.out_layout, p.fil_layout) else (),
                    transforms=transforms, reduce=reduce)


def run_transforms(spec, whole: ConvProblem) -> tuple:
    """The layout transforms a run of ``spec`` over the ``whole`` problem (all N images, its
    own layouts) launches: W^T alone for the NCHW pointwise schedules
    (:meth:`~miopen_solver.nchw_pw.NchwPwSpec.transforms`) and the NCHW TMA schedule
    (:meth:`~miopen_solver.nchw_tma.NchwTmaSpec.transforms`), else the NHWC copies of its
    NCHW tensors (:func:`~miopen_solver.transpose.layout_transforms`), without dX's when the
    kernel stores dX NCHW itself or the split-K reduction stores dX (in its own layout)."""
    if spec.schedule.nchw_native or spec.schedule.subpixel:
        return spec.transforms(whole)
    return layout_transforms(whole, nchw_dx=writes_nchw_dx(spec) or getattr(spec, "workspace_reduce", False))


def _slice_bytes(problem: ConvProblem) -> int:
    """Bytes of one split-K workspace slice of a launch of ``problem`` (fp32 dX, 256-byte
    aligned; :attr:`~miopen_solver.spec.DgradSpec.workspace_slice_elems`)."""
    return -(-problem.dx_elems * 4 // WORKSPACE_ALIGN) * WORKSPACE_ALIGN


@dataclass(frozen=True)
class _Settings:
    """A run's ``--kouter``, ``--split-k`` and ``--split-k-reduce`` (None: not given)."""

    kouter: str | None = None
    split_k: int | None = None
    split_k_reduce: str | None = None

    @property
    def flags(self) -> list:
        """The settings as the options that give them, for notes and errors."""
        return [f"--{name} {value}" for name, value in (("kouter", self.kouter), ("split-k", self.split_k),
                                                        ("split-k-reduce", self.split_k_reduce))
                if value is not None]

    def apply(self, cfg: PerfConfig) -> PerfConfig:
        """``cfg`` with the settings' fields. A direct-schedule config already is what
        ``auto`` and split-K ``-1``/``1`` ask for (its own dY path, one write per dX
        element), so those leave it unchanged; a config that already splits (a default or
        perf-db record with split_k > 1: the TMA schedule's work units, the sub-wave model's
        split, a rule's split) keeps its own split for ``-1`` -- that split is the solver's
        choice; the reduction is set only where the config may split (split_k not 1), and
        ``stream`` (stream-K, which splits no config's K: split_k stays 1 or -1) always. On a
        stream-K config any ``--split-k-reduce`` replaces its reduction, and ``--split-k N``
        (N > 1) alone makes it a split-K config (the rule's reduction)."""
        kouter, split_k = self.kouter, self.split_k
        if cfg.schedule.direct:
            kouter = None if kouter == "auto" else kouter
            split_k = None if split_k in (-1, 1) else split_k
        if split_k == -1 and cfg.split_k > 1:
            split_k = None
        if kouter is not None:
            cfg = cfg.replace(lds_k_outer=KOUTER[kouter])
        if split_k is not None:
            cfg = cfg.replace(split_k=split_k)
        stream = cfg.reduce == "stream"
        if stream and self.split_k_reduce is None and split_k is not None and split_k > 1:
            cfg = cfg.replace(split_k_reduce=0)     # --split-k N on stream-K: split K instead
        if self.split_k_reduce is not None and (cfg.split_k != 1 or self.split_k_reduce == "stream" or stream):
            cfg = cfg.replace(split_k_reduce=SPLIT_K_REDUCE_CODES[self.split_k_reduce])
        return cfg


__all__ = ["ALGORITHM", "DgradSolver", "KOUTER", "KernelLaunch", "SPLIT_K_REDUCE_CODES", "Solution", "ZeroFill",
           "run_transforms", "solution_of"]
