"""The runtime interface every backend implements (cpu, cuda, hip).

An :class:`Engine` runs a :class:`~miopen_solver.spec.DgradSpec` on host arrays:

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

import statistics
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np


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


class Engine(Protocol):
    """A backend that can run and time a dgrad spec (see module docstring for layouts)."""

    name: str

    def run(self, spec, dy: np.ndarray, w: np.ndarray) -> np.ndarray:
        """Compute dX once into a NaN-poisoned buffer and return it."""
        ...

    def time(self, spec, dy: np.ndarray, w: np.ndarray, iters: int, warmup: int = 1) -> Timing:
        """Run ``warmup`` untimed then ``iters`` timed launches; no verification."""
        ...
