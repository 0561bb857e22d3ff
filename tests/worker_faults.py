"""Fault injection inside worker processes (loaded through ``$DGRAD_WORKER_PRELOAD``).

Environment:

``DGRAD_TEST_FAULT``        ``segv`` (a real segmentation fault), ``hang`` (sleep for an
                            hour), ``raise`` (RuntimeError), ``exit`` (``os._exit(7)``),
                            ``strand_exit``/``strand_hang`` (an atomic write of
                            ``dump_bwd_din_gpu.bin`` in the working directory begun, as a
                            killed write leaves it, then ``exit``/``hang``),
                            ``stdout`` (print to stdout, then work normally), ``zeros``
                            (dX all zeros) or ``nan1`` (one dX element left NaN);
``DGRAD_TEST_FAULT_IN``     ``time`` or ``run``: which CpuEngine method misbehaves
                            (default: both; ``zeros``/``nan1`` always act on ``run``);
``DGRAD_TEST_FAULT_CONFIG`` only for the spec whose config serialises to this;
``DGRAD_TEST_CALL_LOG``     append ``<pid> <method>`` for every engine ``time``/``run`` and
                            every CPU reference computed, to this file.
"""

import ctypes
import os
import time as _clock

import numpy as np

from miopen_solver import reference
from miopen_solver.runtime.base import as_solution
from miopen_solver.runtime.cpu import CpuEngine

FAULT = os.environ.get("DGRAD_TEST_FAULT", "")
WHERE = os.environ.get("DGRAD_TEST_FAULT_IN", "")
ONLY = os.environ.get("DGRAD_TEST_FAULT_CONFIG", "")
LOG = os.environ.get("DGRAD_TEST_CALL_LOG", "")

_real_time, _real_run, _real_ref = CpuEngine.time, CpuEngine.run, reference.dgrad_reference


def _log(what):
    if LOG:
        with open(LOG, "a") as fh:
            fh.write(f"{os.getpid()} {what}\n")


def _applies(work, method):
    if ONLY and as_solution(work).perf_config.serialize() != ONLY:
        return False
    return not WHERE or WHERE == method


def _misbehave(spec, method):
    if not _applies(spec, method):
        return
    if FAULT == "segv":
        ctypes.string_at(0)
    elif FAULT == "hang":
        _clock.sleep(3600)
    elif FAULT == "raise":
        raise RuntimeError("injected fault")
    elif FAULT == "exit":
        os._exit(7)
    elif FAULT.startswith("strand_"):
        from miopen_solver import fileio
        fileio._create_temp(os.getcwd(), "dump_bwd_din_gpu.bin")
        open(os.path.join(os.getcwd(), "stranded"), "w").close()       # the test knows it got here
        if FAULT == "strand_exit":
            os._exit(7)
        _clock.sleep(3600)
    elif FAULT == "stdout":
        print("stray worker output on stdout", flush=True)


def _time(self, spec, dy, w, iters, warmup=1):
    _log("time")
    _misbehave(spec, "time")
    return _real_time(self, spec, dy, w, iters, warmup)


def _run(self, spec, dy, w):
    _log("run")
    _misbehave(spec, "run")
    dx = _real_run(self, spec, dy, w)
    if _applies(spec, "run") and FAULT == "zeros":
        dx = np.zeros_like(dx)
    elif _applies(spec, "run") and FAULT == "nan1":
        dx.reshape(-1)[3] = np.nan
    return dx


def _ref(problem, dy, w):
    _log("reference")
    return _real_ref(problem, dy, w)


CpuEngine.time = _time
CpuEngine.run = _run
reference.dgrad_reference = _ref
