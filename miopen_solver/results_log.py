"""An append-only results log: one JSON object per line (JSON Lines), made to survive a crash.

A tuning campaign writes one record per timed config and one per problem verdict, as each
arrives, so a campaign that is killed (Ctrl-C, SIGKILL, a lost host) loses at most what was
in flight; ``--resume`` reads the log back and skips what it holds, and the CSV and the
perf-db are written from it.

How it is written: the file is opened with ``O_APPEND``; each record is serialised to one
line, written with a single ``write`` and ``fsync``'ed before :meth:`ResultsLog.append`
returns. So the log is never rewritten and a reader sees whole lines -- except the last line
after a crash in the middle of a write, which has no newline (or is not JSON): reading skips
it (counted in :attr:`LogContents.torn`), and opening for append cuts it off first, so the
next record starts on a line of its own.

The path must be a regular file (or a new file in an existing, writable directory); a FIFO,
directory or device is refused, as for every file the user names. :func:`check_log` says
whether an existing file is such a log (every line a record of this format, the first a
``session`` record) before anything is appended to it: a campaign never appends to a file
that is not its own kind of log.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import stat
from dataclasses import dataclass, field

from .config import PerfConfig
from .errors import FileError, PerfConfigError
from .text import json_text, shorten

ALLOWED = "a regular file, or a new file in an existing, writable directory"
FORMAT = 1
"""The log format version (every record has ``"log_format"``)."""
RECORD_TYPES = ("session", "worker", "timing", "verdict")
"""The ``"type"`` of every record a campaign writes; a log starts with a ``session`` record."""
LOG_ALLOWED = "a new file, an empty file, or the JSON Lines log of an earlier dgrad-driver tune campaign"


@dataclass
class LogContents:
    """What a log held: ``records`` (dicts, in file order) and ``lines`` (the line number of
    each), ``torn`` (trailing bytes of a partial last line) and ``bad`` (line numbers of
    complete lines that are not a JSON object; they are skipped)."""

    records: list = field(default_factory=list)
    torn: int = 0
    bad: list = field(default_factory=list)
    lines: list = field(default_factory=list)


def _check_path(path: str) -> bool:
    """Whether ``path`` exists (as a regular file); raise :class:`FileError` when it cannot
    be a log."""
    if not str(path).strip():
        raise FileError(path, "empty (no file named)", ALLOWED)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        parent = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(parent):
            why = "is not a directory" if os.path.exists(parent) else "does not exist"
            raise FileError(path, f"directory {parent} {why}", ALLOWED) from None
        if not os.access(parent, os.W_OK | os.X_OK):
            raise FileError(path, f"directory {parent} is not writable", ALLOWED) from None
        return False
    except OSError as e:
        raise FileError(path, f"cannot read ({e.strerror or e})", ALLOWED, e.errno) from None
    if stat.S_ISDIR(st.st_mode):
        raise FileError(path, "is a directory", ALLOWED)
    if not stat.S_ISREG(st.st_mode):
        raise FileError(path, "is not a regular file", ALLOWED)
    if not os.access(path, os.R_OK | os.W_OK):
        raise FileError(path, "is not readable and writable", ALLOWED)
    return True


def read_log(path) -> LogContents:
    """The records of the log at ``path`` (none when it does not exist).

    Raises:
        FileError: the path is not a regular file or cannot be read.
    """
    out = LogContents()
    if not _check_path(str(path)):
        return out
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as e:
        raise FileError(path, f"cannot read ({e.strerror or e})", ALLOWED, e.errno) from None
    return parse_log(data)


def parse_log(data: bytes) -> LogContents:
    """The records of a log's bytes: complete lines that are JSON objects, in order; the
    line numbers of complete lines that are not in :attr:`LogContents.bad`, a partial last
    line's length in :attr:`LogContents.torn`."""
    out = LogContents()
    end = data.rfind(b"\n") + 1
    out.torn = len(data) - end
    for n, raw in enumerate(data[:end].splitlines(), 1):
        if not raw.strip():
            continue
        try:
            rec = json.loads(raw)
        except ValueError:
            rec = None
        if isinstance(rec, dict):
            out.records.append(rec)
            out.lines.append(n)
        else:
            out.bad.append(n)
    return out


NOT_A_LOG = "is not a campaign log"
"""How :func:`check_log`'s reason starts when the file is readable but holds something else."""


def _not_a_log(path, why: str) -> FileError:
    return FileError(path, f"{NOT_A_LOG} ({why})", LOG_ALLOWED)


def check_log(path) -> LogContents:
    """The records of the log at ``path`` (none when it does not exist or is empty), after
    checking that it is a log a campaign wrote: every complete line a JSON object with
    ``"log_format"`` :data:`FORMAT` and a ``"type"`` of :data:`RECORD_TYPES`, the first a
    ``session`` record; a torn last line (a crash mid-write) must start as a record does
    (``{``). Reads the file once; writes nothing.

    Raises:
        FileError: the path cannot be a log (see :func:`read_log`), or the file holds
            anything else (text, CSV, binary data, another format), naming the first line
            at fault.
    """
    out = read_log(path)
    if out.bad:
        raise _not_a_log(path, f"line {out.bad[0]} is not a JSON object")
    for n, rec in enumerate(out.records, 1):
        if rec.get("log_format") != FORMAT:
            raise _not_a_log(path, f"record {n} has log_format {shorten(rec.get('log_format'))}, "
                                   f"not {FORMAT}")
        if rec.get("type") not in RECORD_TYPES:
            raise _not_a_log(path, f"record {n} has type {shorten(rec.get('type'))}, not one of "
                                   f"{', '.join(RECORD_TYPES)}")
    if out.records and out.records[0].get("type") != "session":
        raise _not_a_log(path, "its first record is not a session record")
    for n, rec in enumerate(out.records, 1):
        bad = _bad_field(rec)
        if bad:
            raise _not_a_log(path, f"record {n} ({rec['type']}) has {bad}")
    if out.torn and not out.records:
        with open(path, "rb") as fh:
            head = fh.read(2)
        if head != b'{"':
            raise _not_a_log(path, "no complete line, and it does not start as a JSON record")
    return out


TIMES = {"timing": ("median_ms", "average_ms", "min_ms"),
         "verdict": ("default_median_ms", "winner_median_ms", "winner_average_ms", "speedup")}
"""The times (ms) and ratios of each record type: a finite number >= 0 where present (a
verdict's are null where it has no winner or no timed default)."""


def _bad_field(rec: dict) -> str | None:
    """What is wrong with a record's fields the report and the perf-db read (None: nothing):
    a ``timing`` record's ``perf_config`` (a perf config) and times (all three, and
    ``times_ms`` a list of them, when ``ok``); a ``verdict``'s times, its ``winner`` (null or a perf config) with the winner's times, and
    ``verified`` (a list of records naming a config)."""
    def time(v) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0

    def shown(v) -> str:                # a NaN or an infinity as written, not as JSON's null
        return repr(v) if isinstance(v, float) else shorten(json_text(v))

    def config(v) -> bool:
        try:
            return isinstance(v, str) and PerfConfig.parse(v) is not None
        except PerfConfigError:
            return False
    kind = rec.get("type")
    if kind == "timing":
        ok = rec.get("status") == "ok"
        for name in TIMES["timing"]:
            if (ok or rec.get(name) is not None) and not time(rec.get(name)):
                return f"{name} {shown(rec.get(name))}, not a number of ms >= 0"
        times = rec.get("times_ms")
        if ok and (not isinstance(times, list) or not times or not all(time(t) for t in times)):
            return "times_ms that is not a list of numbers of ms >= 0"
        if not config(rec.get("perf_config")):     # ranked, verified and filed by it
            return f"perf_config {shown(rec.get('perf_config'))}, not a perf config"
    if kind == "verdict":
        for name in TIMES["verdict"]:
            if rec.get(name) is not None and not time(rec[name]):
                return f"{name} {shown(rec[name])}, not a number >= 0 or null"
        winner = rec.get("winner")
        if winner is not None:
            if not config(winner):
                return f"winner {shown(winner)}, not a perf config or null"
            for name in ("winner_median_ms", "winner_average_ms"):
                if not time(rec.get(name)):
                    return f"winner {winner} with {name} {shown(rec.get(name))}, not a number of ms >= 0"
        verified = rec.get("verified", [])
        if not isinstance(verified, list) or not all(isinstance(v, dict) and isinstance(v.get("perf_config"), str)
                                                     for v in verified):
            return f"verified {shown(verified)}, not a list of records naming a perf config"
    return None


def in_use(path) -> bool:
    """True when a campaign holds the log at ``path`` now (:class:`ResultsLog` locks it while
    open); False for a free, missing or unreadable file."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


class ResultsLog:
    """An open log: :meth:`append` one record at a time (durable when it returns).

    Use as a context manager. ``ResultsLog(path).open()`` creates the file or opens it for
    appending (a torn last line is cut off first).

    Raises:
        FileError: the path cannot be a log (see module docstring) or a write failed.
    """

    def __init__(self, path):
        self.path = str(path)
        self._fd = None

    def open(self) -> "ResultsLog":
        _check_path(self.path)
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0), 0o666)
        except OSError as e:
            raise FileError(self.path, f"cannot open for appending ({e.strerror or e})", ALLOWED, e.errno) from None
        try:
            mode = os.fstat(fd).st_mode
            if not stat.S_ISREG(mode):
                raise FileError(self.path, "is not a regular file", ALLOWED)
            if not mode & 0o222:            # refused also for root, as every file we write
                raise FileError(self.path, f"is read-only (mode {stat.S_IMODE(mode):04o})", ALLOWED)
            try:                            # one campaign at a time: held until close
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise FileError(self.path, "is the log of a campaign running now (locked)",
                                "a log no other campaign is writing") from None
            self._cut_torn_tail(fd)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return self

    def _cut_torn_tail(self, fd: int) -> None:
        size = os.fstat(fd).st_size
        if not size:
            return
        keep, pos, chunk = None, size, 1 << 16
        while pos > 0 and keep is None:
            start = max(0, pos - chunk)
            block = os.pread(fd, pos - start, start)
            i = block.rfind(b"\n")
            if i >= 0:
                keep = start + i + 1
            pos = start
        keep = keep or 0
        if keep != size:
            os.ftruncate(fd, keep)
            os.fsync(fd)

    def append(self, record: dict) -> None:
        """Write ``record`` as one line and fsync it.

        Raises:
            FileError: the write failed (disk full ...); the log holds whole lines before it.
        """
        if self._fd is None:
            raise ValueError("the log is not open")
        line = json_text({"log_format": FORMAT, **record}, sort_keys=True, separators=(",", ":"),
                         default=str) + "\n"
        data = line.encode()
        try:
            n = os.write(self._fd, data)
            while n < len(data):                   # a short write (rare on regular files)
                n += os.write(self._fd, data[n:])
            os.fsync(self._fd)
        except OSError as e:
            raise FileError(self.path, f"cannot append ({e.strerror or e})", ALLOWED, e.errno) from None

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> "ResultsLog":
        return self if self._fd is not None else self.open()

    def __exit__(self, *exc) -> None:
        self.close()


__all__ = ["ALLOWED", "FORMAT", "LOG_ALLOWED", "NOT_A_LOG", "RECORD_TYPES", "LogContents", "ResultsLog", "check_log",
           "in_use", "read_log"]
