"""The runtime interface every backend implements (cpu, cuda, hip).

An :class:`Engine` runs a :class:`~miopen_solver.solver.Solution` on host arrays:

* ``dy``: dY in the problem's ``out_layout`` -- NHWC ``(N, Ho, Wo, K)`` or NCHW ``(N, K, Ho, Wo)``
* ``w``:  W in ``fil_layout`` -- NHWC ``(K, Y, X, cpg)`` (KYXC) or NCHW ``(K, cpg, Y, X)``
* returns dX in ``in_layout`` -- NHWC ``(N, Hi, Wi, C)`` or NCHW ``(N, C, Hi, Wi)``

Arrays hold the storage type (``numpy.float32``, ``numpy.float16``, ``ml_dtypes.bfloat16``);
accumulation is fp32. Engines poison dX (NaN) before every run so an unwritten element
fails verification.

Timing (:meth:`Engine.time`) returns per-iteration milliseconds; on GPUs these come from
device events. MIOpenDriver's reported average is ``(total - first) / (iters - 1)``.
"""

from __future__ import annotations

import abc
import statistics
from dataclasses import dataclass, field

import numpy as np

from ..errors import shown_value


@dataclass
class Timing:
    """Per-iteration kernel times in ms, plus how they were taken."""

    times_ms: list
    method: str = "events"     # "events" | "wall" | "graph"
    compile_ms: float = 0.0    # 0 when the binary came from the cache
    cache_hit: bool = False
    extra: dict = field(default_factory=dict)
    warnings: list = field(default_factory=list)   # e.g. the binary cache was unusable

    @property
    def miopen_average_ms(self) -> float:
        """MIOpenDriver's average: ``(total - first)/(iter - 1)``, or the one time."""
        t = self.times_ms
        if len(t) > 1:
            return (sum(t) - t[0]) / (len(t) - 1)
        return t[0]

    @property
    def median_ms(self) -> float:
        return statistics.median(self.times_ms)

    @property
    def min_ms(self) -> float:
        return min(self.times_ms)


@dataclass(frozen=True)
class BuildInfo:
    """What a build did: ``compile_ms`` (0 on a cache hit), ``cache_hit`` and the binary's
    ``resources`` (``registers``, ``static_shared``, ``local`` bytes; None where the runtime
    does not report them)."""

    compile_ms: float = 0.0
    cache_hit: bool = False
    resources: dict | None = None


def check_count(name: str, value, least: int) -> int:
    """``value`` as a launch count of at least ``least`` (``iters``, ``warmup``, a graph's
    ``launches`` and ``replays``).

    Raises:
        ValueError: not an integer (bool included), or below ``least``; the message names
            ``name``, the value and what is allowed.
    """
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
        raise ValueError(f"{name} {value!r}: allowed: an integer >= {least}")
    return int(value)


def as_solution(work):
    """The :class:`~miopen_solver.solver.Solution` an engine runs: ``work`` itself, or the
    solution of a validated :class:`~miopen_solver.spec.DgradSpec` (its own config; nothing
    is chosen).

    Raises:
        ValueError: ``work`` is neither (a spec of every family has a problem and a config).
    """
    from ..solver import Solution, solution_of
    if isinstance(work, Solution):
        return work
    if not (hasattr(work, "problem") and hasattr(work, "config") and hasattr(work, "target")):
        raise ValueError(f"work {shown_value(work)}: allowed: a Solution (DgradSolver.find_solution) or a "
                         f"validated spec")
    return solution_of(work)


class Engine(abc.ABC):
    """A backend that builds, runs and times a solution (see module docstring for layouts).

    Every method that takes ``work`` takes a :class:`~miopen_solver.solver.Solution` (or a
    validated spec, see :func:`as_solution`); an engine launches what the solution says and
    decides nothing.
    """

    name: str = ""
    supports_graphs: bool = False
    """Whether :meth:`time_graph` replays captured graphs (else it times plain launches)."""
    has_gpu_reference: bool = False
    """Whether :meth:`reference` runs the naive reference kernel on the device."""

    @property
    @abc.abstractmethod
    def target(self):
        """The :class:`~miopen_solver.target.Target` this engine runs."""

    @abc.abstractmethod
    def build(self, work) -> BuildInfo:
        """Compile (or fetch) and load what ``work`` launches, outside any timed region."""

    @abc.abstractmethod
    def run(self, work, dy: np.ndarray, w: np.ndarray) -> np.ndarray:
        """Compute dX once into a NaN-poisoned buffer and return it."""

    @abc.abstractmethod
    def time(self, work, dy: np.ndarray, w: np.ndarray, iters: int, warmup: int = 1) -> Timing:
        """Run ``warmup`` untimed then ``iters`` timed launches; no verification."""

    def time_graph(self, work, dy: np.ndarray, w: np.ndarray, launches: int = 20, replays: int = 15) -> Timing:
        """Per-launch times from replays of a captured graph; engines without graphs
        (:attr:`supports_graphs` False) time ``replays`` plain launches instead."""
        return self.time(work, dy, w, iters=replays, warmup=1)

    def verify(self, work, seed: int):
        """One launch of ``work`` on the inputs of MIOpenDriver's PRNG ``seed`` into a
        NaN-poisoned dX, judged against the float64 CPU reference with MIOpen's rms metric
        and the tolerance of the math the solution runs (``Solution.tolerance``).

        Returns:
            a :class:`~miopen_solver.reference.Verdict`.
        """
        from .. import prng, reference
        sol = as_solution(work)
        inputs = prng.generate_inputs(sol.problem, seed)
        dx = self.run(sol, inputs.dy, inputs.w)
        return reference.verify(sol.problem, dx, reference.dgrad_reference(sol.problem, inputs.dy, inputs.w),
                                sol.tolerance)

    def reference(self, problem, dy: np.ndarray, w: np.ndarray) -> np.ndarray:
        """dX (float32, NHWC) from the device's naive reference kernel.

        Raises:
            ValueError: the engine has none (:attr:`has_gpu_reference` False).
        """
        raise ValueError(f"the {self.name} engine has no GPU reference; use the CPU reference")
