"""Exception types. User mistakes raise one of these; the CLI prints one line and exits 2."""


class MiopenCommandError(ValueError):
    """A MIOpenDriver command line that cannot be accepted.

    Attributes:
        flag: the flag as the user wrote it (``-F``, ``--in_layout``), or the base argument.
        value: the offending value (``None`` when the value is missing).
        allowed: a short phrase saying what would be accepted.
    """

    def __init__(self, flag: str, value, allowed: str, detail: str = ""):
        self.flag = flag
        self.value = value
        self.allowed = allowed
        self.detail = detail
        shown = "<missing>" if value is None else repr(value)
        msg = f"{flag} {shown}: {detail + '; ' if detail else ''}allowed: {allowed}"
        super().__init__(msg)


class PerfConfigError(ValueError):
    """A performance-config string or value that is malformed or invalid for a problem."""


class RuntimeUnavailable(RuntimeError):
    """A GPU runtime (ROCm or CUDA) is not installed or sees no device. The message is one
    sentence that says which and why."""
