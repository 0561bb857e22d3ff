"""MIOpen-compatible backward-data convolution (dgrad) solver.

Data flows one way::

    command.parse -> ConvProblem -> applicability -> DgradSpec -> tilde sub-GEMMs
        -> kernels.emit -> runtime (cuda | hip | cpu) -> verify / time -> report

The library never prints; the ``driver`` package does.
"""

__version__ = "0.1.0"

SOLVER_NAME = "ConvDgradImplicitGemmTilde"
"""Solver db id (MIOpen's SolverDbId is the class name)."""

SOLVER_ID = 200
"""Numeric solution id. MIOpen's registered ids end below 200; we take 200 so it never
collides with a real MIOpen solver in a perf-db or a ``-S`` argument."""
