"""A compile pool on the cpu engine, for Ctrl-C tests of a campaign.

Imported by the driver's process before it runs (``python -c "import compile_gate; ..."``):
the cpu engine then "compiles" (:func:`miopen_solver.runtime.precompile.compiles`), so
``--compile-pool N`` starts a real process pool, and its compile is :func:`gated_precompile`.
``DGRAD_TEST_COMPILE_GATE=<dir>`` and ``DGRAD_TEST_COMPILE_GATE_PASS=<n>``: the first n
compiles of all pool processes together (counted by ``ticket-N`` files created in <dir>)
return at once, later ones wait until ``<dir>/open`` exists (at most :data:`WAIT_S`). So a
test knows that a pool process is busy, and one idle, when it interrupts the campaign.
"""

import os
import time

from miopen_solver.runtime import precompile as _precompile

GATE = os.environ.get("DGRAD_TEST_COMPILE_GATE", "")
PASS = int(os.environ.get("DGRAD_TEST_COMPILE_GATE_PASS", "0") or 0)
WAIT_S = 300.0
"""A bound for a test that never opens the gate (no process waits forever)."""


def _ticket() -> int:
    """A number unique across processes: the first free ``ticket-N`` file created."""
    n = 0
    while True:
        try:
            os.close(os.open(os.path.join(GATE, f"ticket-{n}"), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            return n
        except FileExistsError:
            n += 1


def gated_precompile(backend: str, arch: str, source: dict) -> dict:
    """A compile that waits at the gate (see module docstring); nothing is cached."""
    if GATE and _ticket() >= PASS:
        deadline = time.monotonic() + WAIT_S
        while not os.path.exists(os.path.join(GATE, "open")) and time.monotonic() < deadline:
            time.sleep(0.05)
    return {"key": source.get("sha256"), "cache_hit": False, "compile_ms": 0.0}


_precompile.compiles = lambda backend: True
_precompile.precompile = gated_precompile
