"""A gate for campaign tests (loaded in workers through ``$DGRAD_WORKER_PRELOAD``).

``DGRAD_TEST_GATE=<dir>`` and ``DGRAD_TEST_GATE_PASS=<n>``: the first n CpuEngine.time calls
of all workers together (counted by files created in <dir>) run; later ones wait until
``<dir>/open`` exists. So a test knows exactly how many configs a killed campaign logged,
without depending on how fast anything runs.
"""

import os
import time as _clock

from miopen_solver.runtime.cpu import CpuEngine

GATE = os.environ.get("DGRAD_TEST_GATE", "")
PASS = int(os.environ.get("DGRAD_TEST_GATE_PASS", "0") or 0)
_real_time = CpuEngine.time


def _ticket() -> int:
    """A number unique across processes: the first free ``ticket-N`` file created."""
    n = 0
    while True:
        try:
            fd = os.open(os.path.join(GATE, f"ticket-{n}"), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            os.close(fd)
            return n
        except FileExistsError:
            n += 1


def _gated_time(self, *a, **kw):
    if GATE and _ticket() >= PASS:
        while not os.path.exists(os.path.join(GATE, "open")):
            _clock.sleep(0.05)
    return _real_time(self, *a, **kw)


CpuEngine.time = _gated_time
