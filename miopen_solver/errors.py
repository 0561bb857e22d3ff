"""Exception types. User mistakes raise one of these; the CLI prints one line and exits 2.

Values echoed in messages go through :func:`~miopen_solver.text.shorten` (a flag value can
be megabytes)."""

from .text import shorten


def short_text(text: str, limit: int = 120) -> str:
    """``text`` cut to ``limit`` characters for a message (a perf-db line or a path can be
    megabytes): :func:`~miopen_solver.text.shorten` with a wider default."""
    return shorten(text, limit)


def shown_path(path) -> str:
    """A path as a message shows it: cut when long, quoted (``repr``) when empty or when it
    holds spaces at its ends or control characters."""
    text = str(path)
    if not text.strip() or text != text.strip() or any(not c.isprintable() for c in text):
        return short_text(repr(text))
    return short_text(text)


def shown_value(value) -> str:
    """A value as a message shows it: an int bare, text quoted (``repr``), anything else as
    its ``repr`` with its type (``None (NoneType)``, ``b'..' (bytes)``); cut when long."""
    if isinstance(value, int) and not isinstance(value, bool):
        return shorten(value)
    if isinstance(value, str):
        return repr(shorten(value))
    return f"{short_text(repr(value), 80)} ({type(value).__name__})"


class ArgumentError(ValueError):
    """An argument of a library call of the wrong type or out of range (a perf-db key that
    is not text, a time given as text, ...). The message is one line,
    ``NAME VALUE: [DETAIL; ]allowed: ALLOWED`` (the value through :func:`shown_value`;
    ``<missing>`` for :attr:`MISSING`).

    Attributes:
        name: the argument as the caller knows it (``perf-db problem key``, ``perf-db time_ms``).
        value: the value given (:attr:`MISSING` when there is none).
        allowed: a short phrase saying what would be accepted.
        detail: why the value is refused, when its type alone does not say (may be empty).
    """

    MISSING = object()
    """Pass as ``value`` when the value is absent (a record without the field)."""

    def __init__(self, name: str, value, allowed: str, detail: str = ""):
        self.name = name
        self.value = value
        self.allowed = allowed
        self.detail = detail
        shown = "<missing>" if value is self.MISSING else shown_value(value)
        super().__init__(f"{name} {shown}: {detail + '; ' if detail else ''}allowed: {allowed}")


class TargetError(ValueError):
    """A target that is neither a :class:`~miopen_solver.target.Target` nor a preset's name
    (:func:`~miopen_solver.target.get_target`): ``unknown arch 'NAME'; known: ...`` for an
    unknown name, ``target VALUE (TYPE): allowed: ...`` for anything else.

    Attributes:
        value: what was given.
        allowed: the preset names, comma-separated.
    """

    def __init__(self, message: str, value, allowed: str):
        self.value = value
        self.allowed = allowed
        super().__init__(message)


class RecordError(ArgumentError):
    """A record (plain data that crosses a process boundary: a solution as a worker
    receives it, :meth:`~miopen_solver.solver.Solution.to_record`; a target,
    :meth:`~miopen_solver.target.Target.to_record`) that cannot be used: a missing or unknown
    field, a value of the wrong type or out of range, or one that differs from what the
    problem, target and config it names resolve to. The message names the field's path:
    ``solution record kernels[0].grid [1, 2]: ...``.

    Attributes:
        record: what the record is (``solution``, ``target``).
        field: the field's path in it (``spec.target.wave_size``; ``""`` for the record itself).
    """

    def __init__(self, record: str, field: str, value, allowed: str, detail: str = ""):
        self.record = record
        self.field = field
        super().__init__(f"{record} record{' ' + field if field else ''}", value, allowed, detail)

    def within(self, record: str, path: str) -> "RecordError":
        """The same fault as a field of an enclosing ``record`` that holds this one at ``path``."""
        return RecordError(record, f"{path}.{self.field}" if self.field else path, self.value, self.allowed,
                           self.detail)


class MiopenCommandError(ValueError):
    """A MIOpenDriver command line that cannot be accepted.

    Attributes:
        flag: the flag as the user wrote it (``-F``, ``--in_layout``), or the base argument.
        value: the offending value; ``None`` when the token itself is at fault (an unknown
            flag) or the value is missing (:attr:`MISSING` was passed). The message shows
            a string quoted and an int bare, both cut by :func:`shorten`, and the flag cut too.
        allowed: a short phrase saying what would be accepted.
    """

    MISSING = object()
    """Pass as ``value`` when the flag's value is absent: the message shows ``<missing>``."""

    def __init__(self, flag: str, value, allowed: str, detail: str = ""):
        self.flag = flag
        self.value = None if value is self.MISSING else value
        self.allowed = allowed
        self.detail = detail
        if value is self.MISSING:
            shown = " <missing>"
        elif value is None:  # the token itself is the problem (unknown flag, stray value)
            shown = ""
        elif isinstance(value, int):
            shown = f" {value}"
        else:
            shown = " " + repr(shorten(value))
        text = str(flag)            # quoted: control bytes (never raw), and an empty or blank token
        flag_shown = shorten(text) if text.isprintable() and text.strip() == text != "" else repr(shorten(text))
        msg = f"{flag_shown}{shown}: {detail + '; ' if detail else ''}allowed: {allowed}"
        super().__init__(msg)


class PerfConfigError(ValueError):
    """A performance-config string or value that is malformed or invalid for a problem.

    Attributes:
        config: the :class:`~miopen_solver.config.PerfConfig` that was refused, when there
            was one (``DgradSolver.find_solution`` sets it; None for text that did not parse).
    """

    def __init__(self, message: str, config=None):
        super().__init__(message)
        self.config = config


class CompileError(RuntimeError):
    """A kernel compiler (NVRTC, hiprtc, nvcc or clang) rejected a kernel or is missing; the
    message names the compiler and carries its log."""


def require(cond: bool, reason: str) -> None:
    """Raise :class:`PerfConfigError` with ``reason`` unless ``cond`` holds (one validation
    rule, stated as the sentence a user reads)."""
    if not cond:
        raise PerfConfigError(reason)


class RuntimeUnavailable(RuntimeError):
    """A GPU runtime (ROCm or CUDA) is not installed or sees no device. The message is one
    sentence that says which and why."""


class PerfDbError(ValueError):
    """A perf-db file that cannot be used: a directory, a path under a regular file, a file
    that is not SQLite or has another schema, a missing parent directory (writes), or an
    SQLite/OS error while reading or writing it.

    Attributes:
        path: the perf-db path as given.
        reason: why it cannot be used (one phrase, without the path).
    """

    def __init__(self, path, reason: str):
        self.path = str(path)
        self.reason = reason
        super().__init__(f"perf-db {self.path}: {reason}")


class FileError(ValueError):
    """A user-named file that cannot be read or written as asked: a directory, a FIFO,
    socket or device where a regular file is needed, a file too large, a read-only file, a
    missing directory, or an OS error while reading or writing (:mod:`miopen_solver.fileio`).

    Attributes:
        path: the path as given.
        reason: why (one phrase, without the path).
        allowed: what would be accepted (a short phrase).
        errno: the OS error number behind it, when there is one.
    """

    def __init__(self, path, reason: str, allowed: str, errno: int | None = None):
        self.path = str(path)
        self.reason = reason
        self.allowed = allowed
        self.errno = errno
        super().__init__(f"{shown_path(self.path)}: {reason}; allowed: {allowed}")
