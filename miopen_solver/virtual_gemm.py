"""The schedule interface of a kernel built on the pointwise GEMM of a *virtual* problem.

Pure Python. The patch GEMM (:mod:`miopen_solver.patch`) and the NCHW pointwise GEMMs
(:mod:`miopen_solver.nchw_pw`) each run the tilde-GEMM main loop of a pointwise problem
that is not the user's (its tiles, vectors, shared memory and launch shape are those of a
:class:`~miopen_solver.spec.DgradSpec`) and change only where the operands and dX lie (a
``// #section`` of ``kernels/dgrad.cu``). :class:`VirtualGemmSpec` holds the real problem,
the target, the real config and that inner spec, and answers everything the engines,
solver and reports ask of a spec by the inner one; a family adds its name, its defines,
its grid and its epilogue rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .config import KernelSchedule, PerfConfig
from .errors import PerfConfigError
from .problem import ConvProblem
from .spec import DgradSpec, family_reason, make_spec
from .target import Target

DTYPES = ("fp32", "fp16", "bf16")
"""Storage types every virtual-GEMM schedule takes (the GEMM main loops')."""


def virtual_gemm_reason(problem: ConvProblem, target: Target, family: str) -> str | None:
    """The guards every virtual-GEMM family starts with (``family`` names it in the
    sentence): :func:`~miopen_solver.spec.family_reason`, then a storage type in
    :data:`DTYPES`; None when they pass."""
    why = family_reason(problem, target, family)
    if why is None and problem.dtype not in DTYPES:
        why = f"data type {problem.dtype} is not one of {', '.join(DTYPES)}"
    return why


@dataclass(frozen=True)
class VirtualGemmSpec:
    """A validated config of a virtual-GEMM schedule: ``gemm`` is the resolved
    :class:`~miopen_solver.spec.DgradSpec` of the virtual problem on the config's main loop
    (tiles, vectors, launch geometry); ``problem`` and ``config`` are the real ones.
    Subclasses name their record slot (:attr:`record_key`)."""

    problem: ConvProblem
    target: Target
    config: PerfConfig
    gemm: DgradSpec

    record_key = "virtual_gemm"
    split_k = 1
    pointwise = False
    zero_fill_blocks = 0
    workspace_bytes = 0

    @property
    def schedule(self) -> KernelSchedule:
        return self.config.schedule

    @property
    def persistent(self) -> bool:
        """The main loop's blocks are persistent (they loop over the GEMM's tiles)."""
        return self.gemm.persistent

    @property
    def tma(self) -> bool:
        return self.gemm.tma

    @property
    def staged_epilogue(self) -> bool:
        """The main loop's epilogue stages dX in shared memory (:attr:`DgradSpec.staged_epilogue`)."""
        return self.gemm.staged_epilogue

    @property
    def tma_box(self):
        return self.gemm.tma_box

    @property
    def sub_gemms(self) -> tuple:
        """The virtual problem's one pointwise sub-GEMM."""
        return self.gemm.sub_gemms

    @property
    def wgmma(self) -> bool:
        return self.gemm.wgmma

    @property
    def atom(self):
        return self.gemm.atom

    @property
    def math(self) -> str:
        """The main loop's math (:attr:`DgradSpec.math`: ``tf32`` on a TF32 atom)."""
        return self.gemm.math

    @property
    def lds_k_outer(self) -> bool:
        return self.gemm.lds_k_outer

    @property
    def vec_a(self) -> int:
        return self.gemm.vec_a

    @property
    def vec_b(self) -> int:
        return self.gemm.vec_b

    @property
    def vec_c(self) -> int:
        return self.gemm.vec_c

    @property
    def threads(self) -> int:
        return self.gemm.threads

    @property
    def block_threads(self) -> int:
        return self.gemm.block_threads

    @property
    def block(self) -> tuple:
        return self.gemm.block

    @property
    def grid(self) -> tuple:
        """Blocks along x (GEMM tiles), y (G), z (1)."""
        return self.gemm.grid

    @property
    def lds_bytes(self) -> int:
        return self.gemm.lds_bytes

    @property
    def tiles_per_group(self) -> int:
        return self.gemm.tiles_per_group

    @property
    def tile_blocks(self) -> int:
        return self.gemm.tile_blocks

    @property
    def resident_blocks(self) -> int:
        return self.gemm.resident_blocks

    @property
    def accumulators_per_lane(self) -> int:
        return self.gemm.accumulators_per_lane

    @property
    def mma_m(self) -> int:
        return self.gemm.mma_m

    @property
    def mma_n(self) -> int:
        return self.gemm.mma_n

    def to_record(self) -> dict:
        """Plain data for a worker (every resolved value; checked by
        :meth:`~miopen_solver.solver.Solution.from_record`)."""
        return {"problem": self.problem.as_dict(), "target": self.target.to_record(),
                "config": self.config.serialize(), self.record_key: {"gemm": self.gemm.to_record()}}

    def gemm_dict(self, **extra) -> dict:
        """The main loop's :meth:`DgradSpec.as_dict` with the real problem, the config, the
        GEMM's shape and ``extra`` (JSON-ready)."""
        d = self.gemm.as_dict()
        s = self.sub_gemms[0]
        d.update(kernel_name=self.kernel_name, schedule=self.schedule.slug, problem_key=self.problem.problem_key(),
                 perf_config=self.config.serialize(), main_loop=self.gemm.schedule.slug, **extra,
                 pointwise=False, gemm={"m": s.gemm_m, "n": s.gemm_n, "k": s.gemm_k, "groups": self.problem.G})
        return d


def make_virtual_spec(spec_cls, problem: ConvProblem, target: Target, config: PerfConfig, *, why: str | None,
                      virtual: Callable, gemm_config: Callable, gemm_shape: str):
    """Validate a virtual-GEMM ``config`` and build ``spec_cls`` from it: the family's
    reason ``why`` it cannot serve the problem (None when it can), ``split_k`` 1 or -1
    (each dX element is written once), then the main loop's rules on ``virtual(problem)``
    with ``gemm_config(problem, config)``.

    Raises:
        PerfConfigError: the first broken rule as one sentence starting with the schedule's
            label (the main loop's rules name it and ``gemm_shape``, the GEMM it runs).
    """
    label = config.schedule.label
    if why is not None:
        raise PerfConfigError(f"{label} does not apply: {why}")
    if config.split_k not in (-1, 1):
        raise PerfConfigError(f"{label} writes each dX element once; split_k must be 1 or -1, got {config.split_k}")
    inner = gemm_config(problem, config)
    try:
        gemm = make_spec(virtual(problem), target, inner)
    except PerfConfigError as e:
        raise PerfConfigError(f"{label} (the {inner.schedule.slug} main loop over {gemm_shape}): {e}") from None
    return spec_cls(problem=problem, target=target, config=config, gemm=gemm)


__all__ = ["DTYPES", "VirtualGemmSpec", "make_virtual_spec", "virtual_gemm_reason"]
