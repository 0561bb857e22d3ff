"""MIOpen-compatible backward-data convolution (dgrad) solver.

Data flows one way::

    command.parse -> ConvProblem -> applicability -> DgradSpec -> tilde sub-GEMMs
        -> kernels.emit -> runtime (cuda | hip | cpu) -> verify / time -> report

The library never prints; the ``driver`` package does.
"""

__version__ = "0.1.0"

SOLVER_NAME = "ConvDgradImplicitGemmTilde"
"""Solver db id (MIOpen's SolverDbId is the class name)."""

SOLVER_ID = 1000
"""Numeric solution id, chosen so that no MIOpen release uses it.

MIOpen numbers solvers in ``SolverRegistrar`` (``src/solver.cpp``): every registration, and
every removed solver's placeholder, takes ``++id`` from 0, so an id is the position in that
list. Counting the ``++id`` of ROCm/MIOpen ``2d1fd997`` (2024-10-24) gives 179 ids (the last
the CK MHA solver); ROCm/rocm-libraries ``projects/miopen/src/solver.cpp`` at ``00a55ad9``
(2026) goes on to 217 (``ConvWinoRageRxS<2,3>`` = 180 ... ``ConvHipDirectFwd`` = 217), so
our old id 200 is ``TransposedConvWinograd3x3MultipassWrW<3,6>`` there. The list grows by
about 20 ids a year; 1000 leaves decades of room. Recount before a release:
``tests/test_solver.py::test_solution_id_is_past_miopens_registry`` names the count."""

LEGACY_SOLVER_IDS = (200,)
"""Ids this solver used before (200 until 2026-12). Accepted on input -- perf-db text records
``KEY=200:...`` are filed under :data:`SOLVER_NAME`, ``-S 200`` selects this solver with a
note -- and never written."""

MIOPEN_MAX_SOLVER_ID = 217
"""The highest id in MIOpen's registry at rocm-libraries ``00a55ad9`` (see :data:`SOLVER_ID`)."""
