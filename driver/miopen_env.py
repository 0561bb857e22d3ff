"""MIOpen's environment variables, as far as they apply to one solver.

Read once per run (:func:`read`), checked before anything runs: a value MIOpen would not
take is one error line naming the variable, the value and what is allowed (exit 2).

* ``MIOPEN_LOG_LEVEL`` (``logger.hpp`` ``LoggingLevel``, ``logger.cpp``, rocm-libraries
  ``0bd46f84``/``10a476ee``): 0 default (Warning, as a release build), 1 quiet, 2 fatal,
  3 error, 4 warning, 5 info, 6 info2, 7 trace. The library's :mod:`logging` records go
  to stderr as MIOpen prints its log: ``MIOpen(HIP): <Level> [<function>] <message>`` --
  e.g. the perf-db's ``Key match: <key>`` at Info (5), as ``src/db.cpp`` logs it.
* ``MIOPEN_ENABLE_LOGGING_CMD`` (boolean): the MIOpenDriver line of the call on stderr,
  ``MIOpen(HIP): Command [LogCmdConvolution] ./bin/MIOpenDriver ...``, built as
  ``ConvArgsForMIOpenDriver`` builds it (``src/driver_arguments.cpp``): dX's N, C, H, W,
  then K, Y, X, pads, strides, dilations, the layouts that are not NCHW (in, fil, out),
  ``-m conv -g G -F 2 -t 1`` and ``-S <id>`` in immediate mode.
* ``MIOPEN_FIND_ENFORCE`` (``find_controls.cpp``/``.hpp``, ``3566bfc5``/``1c6b8f87``):
  ``NONE`` 1 (default), ``DB_UPDATE`` 2, ``SEARCH`` 3, ``SEARCH_DB_UPDATE`` 4, ``DB_CLEAN``
  5, names in any case or the numbers. For this solver: NONE -- ``-s 1`` searches only when
  the perf-db has no record of the problem; DB_UPDATE -- ``-s 1`` searches even then and
  replaces the record; SEARCH -- searches without ``-s 1`` when there is no record;
  SEARCH_DB_UPDATE -- searches on every run and replaces the record; DB_CLEAN -- removes
  this solver's record of the problem from the perf-db and never searches.
* ``MIOPEN_FIND_MODE`` (``FindMode::Values``): ``NORMAL`` 1, ``FAST`` 2, ``HYBRID`` 3, 4
  (``DeprecatedFastHybrid``: no name, taken by number as MIOpen takes it), ``DYNAMIC_HYBRID``
  5 (default), ``TRUST_VERIFY`` 6, ``TRUST_VERIFY_FULL`` 7. With one solver and no find-db
  only FAST changes anything: it takes the perf-db or default config without searching
  (``-s 1`` is not honoured, with a line saying so), unless an enforce action asks for a
  search, where MIOpen falls back to NORMAL (``FindMode::IsEnabled``).
* ``MIOPEN_DEBUG_FIND_ONLY_SOLVER``: ``;``-separated solver ids or names; ours (1000, its
  name, or the old 200) runs; a list without it is refused (this driver has no other).
* ``MIOPEN_CUSTOM_CACHE_DIR`` / ``MIOPEN_DISABLE_CACHE``: the kernel cache
  (:mod:`miopen_solver.runtime.cache`) -- checked here, used there.
* ``MIOPEN_DGRAD_PDL`` (ours, boolean, default on): overlapped launches on CUDA sm_90+
  (:mod:`miopen_solver.runtime.gpu`) -- checked here, used there.
"""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass

from miopen_solver import LEGACY_SOLVER_IDS, SOLVER_ID, SOLVER_NAME

from .options import UserError

FIND_ENFORCE = {"NONE": 1, "DB_UPDATE": 2, "SEARCH": 3, "SEARCH_DB_UPDATE": 4, "DB_CLEAN": 5}
FIND_MODE = {"NORMAL": 1, "FAST": 2, "HYBRID": 3, "DYNAMIC_HYBRID": 5, "TRUST_VERIFY": 6, "TRUST_VERIFY_FULL": 7}
FIND_MODE_DEPRECATED = 4
"""MIOpen's ``FindMode::Values::DeprecatedFastHybrid``: it has no name MIOpen reads, but
``GetFindModeValueImpl2`` takes any number from ``Begin_`` (1) below ``End_``, 4 included;
so do we (by number only), and say so where the values are listed."""
FIND_MODE_EXTRA = {FIND_MODE_DEPRECATED: "4 (deprecated FAST_HYBRID, by number only)"}
LOG_LEVELS = {0: "Default", 1: "Quiet", 2: "Fatal", 3: "Error", 4: "Warning", 5: "Info", 6: "Info2", 7: "Trace"}
TRUE = ("1", "yes", "true", "enable", "enabled", "on")
FALSE = ("0", "no", "false", "disable", "disabled", "off")

INFO2, TRACE = 15, 5
"""Python levels of MIOpen's Info2 and Trace (between INFO and DEBUG, and below DEBUG)."""
_PY_LEVEL = {1: logging.CRITICAL + 10, 2: logging.CRITICAL, 3: logging.ERROR, 4: logging.WARNING,
             5: logging.INFO, 6: INFO2, 7: TRACE}
_NAMES = {logging.CRITICAL: "Fatal", logging.ERROR: "Error", logging.WARNING: "Warning", logging.INFO: "Info",
          INFO2: "Info2", TRACE: "Trace", logging.DEBUG: "Info2"}
PREFIX = "MIOpen(HIP): "


@dataclass(frozen=True)
class MiopenEnv:
    """The variables' values (defaults: as MIOpen without them)."""

    log_level: int = 0
    logging_cmd: bool = False
    find_enforce: int = 1
    find_mode: int = 5
    only_solver: tuple | None = None

    @property
    def enforce_name(self) -> str:
        return next(n for n, v in FIND_ENFORCE.items() if v == self.find_enforce)

    @property
    def mode_name(self) -> str:
        return next((n for n, v in FIND_MODE.items() if v == self.find_mode), "DEPRECATED_FAST_HYBRID")


def _shown(value: str) -> str:
    return repr(value[:60] + ("..." if len(value) > 60 else ""))


def _bool(env, name: str) -> bool:
    value = env.get(name)
    if value is None or value.strip() == "":
        return False
    v = value.strip().lower()
    if v in TRUE:
        return True
    if v in FALSE:
        return False
    raise UserError(f"{name} {_shown(value)}: allowed: {', '.join(TRUE)} (on) or {', '.join(FALSE)} (off)")


def _small_decimal(v: str) -> int | None:
    """The value of ``v`` when it is ASCII decimal digits of at most 18 significant digits
    (every number these variables take is small: a longer one, past Python's 4300-digit
    conversion limit included, is just not allowed), else None."""
    digits = v.lstrip("0") or "0"
    if v.isdigit() and v.isascii() and len(digits) <= 18:
        return int(digits)
    return None


def _choice(env, name: str, table: dict, default: int, extra: dict | None = None) -> int:
    """``name``'s value: a name of ``table`` in any case or its number, or a number of
    ``extra`` (number -> how the allowed list shows it), else the default when unset.

    Raises:
        UserError: anything else, listing every allowed value in numeric order.
    """
    extra = extra or {}
    value = env.get(name)
    if value is None or value.strip() == "":
        return default
    v = value.strip().upper()
    if v in table:
        return table[v]
    n = _small_decimal(v)
    if n is not None and (n in table.values() or n in extra):
        return n
    shown = {i: f"{n} ({i})" for n, i in table.items()} | extra
    allowed = ", ".join(shown[i] for i in sorted(shown))
    raise UserError(f"{name} {_shown(value)}: allowed: {allowed} (a name in any case or its number)")


def _log_level(env) -> int:
    value = env.get("MIOPEN_LOG_LEVEL")
    if value is None or value.strip() == "":
        return 0
    n = _small_decimal(value.strip())
    if n in LOG_LEVELS:
        return n
    raise UserError(f"MIOPEN_LOG_LEVEL {_shown(value)}: allowed: an integer 0-7 "
                    f"({', '.join(f'{i} {n}' for i, n in LOG_LEVELS.items())})")


def _only_solver(env) -> tuple | None:
    value = env.get("MIOPEN_DEBUG_FIND_ONLY_SOLVER")
    if value is None or value.strip() == "":
        return None
    ours = {str(SOLVER_ID), SOLVER_NAME} | {str(i) for i in LEGACY_SOLVER_IDS}
    items = tuple(x.strip() for x in value.split(";") if x.strip())
    if not any(x in ours for x in items):
        raise UserError(f"MIOPEN_DEBUG_FIND_ONLY_SOLVER {_shown(value)}: names no solver this driver has; "
                        f"allowed: {SOLVER_ID} or {SOLVER_NAME} (the only solver here), or unset")
    return items


def gpu_reference(environ=None) -> bool:
    """``MIOPEN_DRIVER_USE_GPU_REFERENCE``: MIOpenDriver verifies on its GPU reference unless
    the variable is set off (``!env::disabled(...)`` in conv_driver.hpp ``UseGPUReference``).

    Raises:
        UserError: a value that is neither on nor off.
    """
    env = os.environ if environ is None else environ
    value = env.get("MIOPEN_DRIVER_USE_GPU_REFERENCE")
    return value is None or value.strip() == "" or _bool(env, "MIOPEN_DRIVER_USE_GPU_REFERENCE")


def check_own(environ=None) -> None:
    """Our own variable ``MIOPEN_DGRAD_PDL``, checked before any subcommand runs (the GPU
    engine reads it: :func:`miopen_solver.runtime.gpu.pdl_from_env`).

    Raises:
        UserError: a value that is neither on nor off, as MIOpen's boolean variables take them.
    """
    _bool(os.environ if environ is None else environ, "MIOPEN_DGRAD_PDL")


def read(environ=None) -> MiopenEnv:
    """The variables of ``environ`` (default ``os.environ``), checked.

    Raises:
        UserError: a value MIOpen would not take, naming the variable, the value and what
            is allowed.
    """
    env = os.environ if environ is None else environ
    out = MiopenEnv(log_level=_log_level(env), logging_cmd=_bool(env, "MIOPEN_ENABLE_LOGGING_CMD"),
                    find_enforce=_choice(env, "MIOPEN_FIND_ENFORCE", FIND_ENFORCE, 1),
                    find_mode=_choice(env, "MIOPEN_FIND_MODE", FIND_MODE, 5, extra=FIND_MODE_EXTRA),
                    only_solver=_only_solver(env))
    _bool(env, "MIOPEN_DISABLE_CACHE")
    gpu_reference(env)
    check_own(env)
    cache_dir = env.get("MIOPEN_CUSTOM_CACHE_DIR")
    if cache_dir is not None and cache_dir.strip() and os.path.exists(os.path.expanduser(cache_dir)) \
            and not os.path.isdir(os.path.expanduser(cache_dir)):
        raise UserError(f"MIOPEN_CUSTOM_CACHE_DIR {_shown(cache_dir)}: is not a directory; allowed: a directory "
                        f"(created when missing)")
    return out


class _Formatter(logging.Formatter):
    def format(self, record):
        name = _NAMES.get(record.levelno, record.levelname)
        return f"{PREFIX}{name} [{record.funcName}] {record.getMessage()}"


class _Stderr(logging.StreamHandler):
    """Writes to the ``sys.stderr`` of the moment (a test's capture, a redirected stream)."""

    def emit(self, record):
        self.stream = sys.stderr
        super().emit(record)


_HANDLER = None


def configure_logging(env: MiopenEnv) -> None:
    """Send the library's log records (logger ``miopen_solver``) to stderr at the level
    ``MIOPEN_LOG_LEVEL`` asks for (0: Warning). Calling it again replaces the handler."""
    global _HANDLER
    logging.addLevelName(INFO2, "Info2")
    logging.addLevelName(TRACE, "Trace")
    logger = logging.getLogger("miopen_solver")
    if _HANDLER is not None:
        logger.removeHandler(_HANDLER)
    _HANDLER = _Stderr()
    _HANDLER.setFormatter(_Formatter())
    logger.addHandler(_HANDLER)
    logger.setLevel(_PY_LEVEL.get(env.log_level or 4, logging.WARNING))
    logger.propagate = False


def log(level: int, fn: str, message: str) -> None:
    """One driver-side log line at MIOpen level ``level`` (5 Info, ...), through the same
    logger, attributed to ``fn`` (MIOpen's function name)."""
    logger = logging.getLogger("miopen_solver.driver")
    py = _PY_LEVEL[level]
    if logger.isEnabledFor(py):
        logger.handle(logger.makeRecord(logger.name, py, fn, 0, message, (), None, func=fn))


def driver_command_line(problem, dtype_base: str, solution_id: int | None = None) -> str:
    """``ConvArgsForMIOpenDriver`` for a backward-data call (x is dX, y is dY)."""
    p = problem
    parts = [dtype_base, f"-n {p.N} -c {p.C} -H {p.Hi} -W {p.Wi} -k {p.K} -y {p.Y} -x {p.X} -p {p.pH} -q {p.pW} "
                         f"-u {p.sH} -v {p.sW} -l {p.dH} -j {p.dW}"]
    for flag, lay in (("--in_layout", p.in_layout), ("--fil_layout", p.fil_layout), ("--out_layout", p.out_layout)):
        if lay != "NCHW":
            parts.append(f"{flag} {lay}")
    parts.append(f"-m conv -g {p.G} -F 2 -t 1")
    if solution_id is not None:
        parts.append(f"-S {solution_id}")
    return " ".join(parts)


def command_log_lines(problem, dtype_base: str, immediate: bool) -> list:
    """The lines ``MIOPEN_ENABLE_LOGGING_CMD`` prints for a run (``MIOPEN_LOG_DRIVER_CMD``):
    in Find mode the Find call's ``[LogCmdFindConvolution]`` line, then the backward-data
    call's ``[LogCmdConvolution]`` line; in immediate mode that line with ``-S 0``, which
    MIOpen writes for every immediate call whatever solution runs (``convolution_api.cpp``:
    ``is_immediate ? std::optional(0) : std::nullopt``). MIOpen logs each backward-data call;
    a run logs its call once, not each timed launch."""
    head = f"{PREFIX}Command [{{}}] ./bin/MIOpenDriver "
    if immediate:
        return [head.format("LogCmdConvolution") + driver_command_line(problem, dtype_base, 0)]
    line = driver_command_line(problem, dtype_base)
    return [head.format("LogCmdFindConvolution") + line, head.format("LogCmdConvolution") + line]


__all__ = ["FIND_ENFORCE", "FIND_MODE", "FIND_MODE_EXTRA", "MiopenEnv", "command_log_lines", "configure_logging",
           "driver_command_line", "gpu_reference", "log", "read"]
