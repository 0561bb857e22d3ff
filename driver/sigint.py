"""Ctrl-C is the driver's alone: every child process it starts ignores SIGINT.

A terminal's Ctrl-C, or ``timeout -s INT``, signals the driver's whole process group. The
driver answers with one line and exit status 130 and ends its children itself; a child
that took the signal too would print a ``KeyboardInterrupt`` traceback of its own, or die
in the middle of a job. So:

* the compile pool (:class:`driver.executors.CompilePool`) starts its processes inside
  :func:`sigint_blocked`: a child starts with SIGINT blocked, so a Ctrl-C that comes before
  it is set up waits instead of raising; the pool's initializer :func:`ignore_sigint` then
  ignores it (which drops a pending one) and unblocks it;
* a Dask ``LocalCluster`` is made inside :func:`sigint_blocked`: its loop's thread starts
  the Dask worker processes, so they keep SIGINT blocked for life;
* the timing, verification and provenance processes run in sessions of their own (the
  terminal's and ``timeout``'s SIGINT never reaches them) and call :func:`ignore_sigint`
  first thing, so a SIGINT sent to them by hand is ignored too.
"""

from __future__ import annotations

import contextlib
import signal
from multiprocessing import resource_tracker

_SIGINT = {signal.SIGINT}


def ignore_sigint() -> None:
    """Ignore SIGINT in this process (a pending one is dropped) and unblock it: the
    initializer of every pool process, and the first call of every worker."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGINT)


@contextlib.contextmanager
def sigint_blocked():
    """SIGINT blocked in the calling thread for the block: a process (or thread) started
    inside inherits the block. In the main thread a Ctrl-C meanwhile is raised on exit.
    The multiprocessing resource tracker is started first: starting it unblocks SIGINT."""
    resource_tracker.ensure_running()
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _SIGINT)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


__all__ = ["ignore_sigint", "sigint_blocked"]
