"""Counts spec constructions in a process (loaded through ``$DGRAD_WORKER_PRELOAD`` in
workers, imported directly in the driver's process by tests/test_solution.py).

Every :class:`~miopen_solver.spec.DgradSpec` built (validated by ``make_spec`` or rebuilt
from a record) appends ``<pid> <perf config>`` to ``$DGRAD_TEST_SPEC_LOG``.
"""

import os

from miopen_solver.spec import DgradSpec

LOG = os.environ.get("DGRAD_TEST_SPEC_LOG", "")
_real_init = getattr(DgradSpec.__init__, "real", DgradSpec.__init__)   # once, also on reload


def _counting_init(self, *args, **kw):
    _real_init(self, *args, **kw)
    if LOG:
        with open(LOG, "a") as fh:
            fh.write(f"{os.getpid()} {self.config.serialize()}\n")


_counting_init.real = _real_init
DgradSpec.__init__ = _counting_init
