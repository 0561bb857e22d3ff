"""Exception types. User mistakes raise one of these; the CLI prints one line and exits 2.

Values echoed in messages go through :func:`~miopen_solver.text.shorten` (a flag value can
be megabytes)."""

from .text import shorten


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
        msg = f"{shorten(flag)}{shown}: {detail + '; ' if detail else ''}allowed: {allowed}"
        super().__init__(msg)


class PerfConfigError(ValueError):
    """A performance-config string or value that is malformed or invalid for a problem."""


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
