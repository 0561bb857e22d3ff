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

from .config import KernelSchedule, PerfConfig
from .problem import ConvProblem
from .spec import DgradSpec
from .target import Target


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
    persistent = False
    tma = False
    tma_box = None
    pointwise = False
    staged_epilogue = True
    zero_fill_blocks = 0
    workspace_bytes = 0

    @property
    def schedule(self) -> KernelSchedule:
        return self.config.schedule

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
        """Plain data for a worker (every resolved value); :meth:`from_record` inverts it."""
        return {"problem": self.problem.as_dict(), "target": self.target.to_record(),
                "config": self.config.serialize(), self.record_key: {"gemm": self.gemm.to_record()}}

    @classmethod
    def from_record(cls, rec: dict):
        """Inverse of :meth:`to_record` (no validation)."""
        gemm = DgradSpec.from_record(rec[cls.record_key]["gemm"])
        return cls(problem=ConvProblem.from_dict(rec["problem"]), target=gemm.target,
                   config=PerfConfig.parse(rec["config"]), gemm=gemm)

    def gemm_dict(self, **extra) -> dict:
        """The main loop's :meth:`DgradSpec.as_dict` with the real problem, the config, the
        GEMM's shape and ``extra`` (JSON-ready)."""
        d = self.gemm.as_dict()
        s = self.sub_gemms[0]
        d.update(kernel_name=self.kernel_name, schedule=self.schedule.slug, problem_key=self.problem.problem_key(),
                 perf_config=self.config.serialize(), main_loop=self.gemm.schedule.slug, **extra,
                 pointwise=False, gemm={"m": s.gemm_m, "n": s.gemm_n, "k": s.gemm_k, "groups": self.problem.G})
        return d


__all__ = ["VirtualGemmSpec"]
