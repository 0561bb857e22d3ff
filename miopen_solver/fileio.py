"""Reading and writing files the user names (``-o``, ``--csv``, fixture files, FILE, ``-D``).

Writes (:func:`write_bytes`, :func:`write_text`; :func:`check_writable` checks first and
writes nothing):

* ``-`` is standard output, and a path naming an open descriptor of this process
  (``/dev/stdout``, ``/dev/stderr``, ``/dev/fd/N``, ``/proc/self/fd/N``) is written
  through that descriptor, whatever it is (a terminal, a pipe, a file the shell opened):
  never replaced, never reopened.
* A character device (``/dev/null``, a terminal) is opened for writing (no create, no
  truncate) and written through.
* A regular file, or a new one, is replaced atomically: symlinks are followed to their
  target (the link stays a link), the bytes go to a temporary file in the target's
  directory, are flushed and fsync'ed, and ``os.replace`` puts them in place; an existing
  file keeps its mode (and, where allowed, its owner), a new one gets ``0666`` less the
  umask. A failed write leaves the old file as it was and no temporary file behind. A file
  without write permission (no ``w`` bit, or not writable by this user) is refused, also
  for root. Hard links to the old file keep the old content.
* A directory, FIFO, socket or block device is refused (a FIFO would block until a reader
  comes); the type is taken with ``os.stat`` before anything is opened.

Reads (:func:`read_bytes`, :func:`read_text`, :func:`stat_regular`): regular files only
(a device such as ``/dev/zero`` or a FIFO would be read forever or block), at most a given
number of bytes, opened non-blocking and checked again on the open descriptor, so a file
swapped for a FIFO between the check and the open cannot hang the reader.

A command's stdout (:func:`run_guarding_stdout`, dgrad-driver's and the bench scripts'): a
closed pipe ends the command quietly with :data:`EXIT_BROKEN_PIPE`, another failed write is
one error line naming stdout.

Every refusal or OS error raises :class:`~miopen_solver.errors.FileError` with the path,
one reason and what is allowed; nothing here prints.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import secrets
import stat
import sys

from .errors import FileError

STDOUT = "-"
"""The path that means standard output."""

WRITE_ALLOWED = ("a file path in an existing, writable directory (replaced whole), a character device "
                 "such as /dev/null or /dev/stdout, or '-' for stdout")
"""What an output path may be (the ``allowed`` of a write's :class:`FileError`)."""

TEMP_SUFFIX = ".tmp"
"""Temporary files of an atomic write are ``.<name>.<pid>-<random>.tmp`` beside the target
(``<pid>``: the writing process, so what a killed process left can be found,
:func:`remove_temps`)."""

_DESCRIPTOR = re.compile(r"/dev/fd/(\d+)|/proc/(?:self|thread-self|(\d+))/fd/(\d+)|/dev/(stdin|stdout|stderr)")
_STD_FD = {"stdin": 0, "stdout": 1, "stderr": 2}
_MAX_LINKS = 40


def _why(e: OSError) -> str:
    return e.strerror or str(e)


def _kind(mode: int) -> str:
    """What a non-regular file is, as a message says it."""
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISCHR, "a character device")):
        if test(mode):
            return name
    return "not a regular file"


def _size(n: int) -> str:
    return f"{n / 2**20:g} MiB" if n >= 2**20 else f"{n} bytes"


# ------------------------------------------------------------------ reading
def _refuse_special(path, mode: int, allowed: str) -> None:
    if stat.S_ISDIR(mode):
        raise FileError(path, "is a directory", allowed)
    if not stat.S_ISREG(mode):
        raise FileError(path, f"is not a regular file ({_kind(mode)})", allowed)


def stat_regular(path, what: str = "file") -> os.stat_result:
    """``os.stat`` of ``path``, which must be a regular file (symlinks followed).

    Raises:
        FileError: missing or unreadable (``cannot read (...)``), a directory, or another
            kind of file; ``allowed`` names a regular ``what``.
    """
    allowed = f"a regular {what}"
    if not str(path).strip():
        raise FileError(path, "empty (no file named)", allowed)
    try:
        st = os.stat(path)
    except OSError as e:
        raise FileError(path, f"cannot read ({_why(e)})", allowed, e.errno) from None
    _refuse_special(path, st.st_mode, allowed)
    return st


def read_bytes(path, max_bytes: int, what: str = "file") -> bytes:
    """The bytes of the regular file ``path``, at most ``max_bytes`` of them.

    Raises:
        FileError: see :func:`stat_regular`; also a file larger than ``max_bytes``
            (``too large (...)``) or a read error.
    """
    allowed = f"a regular {what} of at most {_size(max_bytes)}"
    try:
        st = stat_regular(path, what)
        if st.st_size > max_bytes:
            raise FileError(path, f"too large ({st.st_size} bytes > {max_bytes})", allowed)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "rb") as fh:
            _refuse_special(path, os.fstat(fh.fileno()).st_mode, allowed)   # swapped since the stat?
            data = fh.read(max_bytes + 1)
    except FileError as e:
        raise FileError(path, e.reason, allowed, e.errno) from None
    except OSError as e:
        raise FileError(path, f"cannot read ({_why(e)})", allowed, e.errno) from None
    if len(data) > max_bytes:
        raise FileError(path, f"too large (more than {max_bytes} bytes)", allowed)
    return data


def read_text(path, max_bytes: int, what: str = "UTF-8 text file", encoding: str = "utf-8") -> str:
    """:func:`read_bytes` decoded; a decoding error names the first bad byte and offset."""
    data = read_bytes(path, max_bytes, what)
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as e:
        raise FileError(path, f"not {encoding.upper()} text (byte 0x{data[e.start]:02x} at offset {e.start})",
                        f"a regular {what} of at most {_size(max_bytes)}") from None


# ------------------------------------------------------------------ writing
def _descriptor(path: str) -> int | None:
    """The descriptor number when ``path`` (or a symlink on the way to its target) names an
    open descriptor of this process: ``/dev/stdout``, ``/dev/fd/N``, ``/proc/self/fd/N``."""
    p = os.path.abspath(path)
    for _ in range(_MAX_LINKS):
        m = _DESCRIPTOR.fullmatch(p)
        if m:
            if m.group(4):
                return _STD_FD[m.group(4)]
            if m.group(2) is None or int(m.group(2)) == os.getpid():
                return int(m.group(1) or m.group(3))
        try:
            link = os.readlink(p)
        except OSError:
            return None
        if link.startswith(("pipe:", "socket:", "anon_inode:")):
            return None
        p = os.path.normpath(os.path.join(os.path.dirname(p), link))
    return None


def output_target(path) -> tuple:
    """Where a write to ``path`` goes, without writing: ``("stdout", None)`` for ``-``,
    ``("descriptor", fd)``, ``("device", device path)`` or ``("file", target path)``
    (symlinks resolved; the file need not exist yet).

    Raises:
        FileError: an empty path, a missing directory, a read-only file, a directory,
            FIFO, socket or block device, a descriptor that is not open (see
            :data:`WRITE_ALLOWED`).
    """
    path = str(path)
    if path == STDOUT:
        return "stdout", None
    if not path.strip():
        raise FileError(path, "empty (no file named)", WRITE_ALLOWED)
    fd = _descriptor(path)
    if fd is not None:
        try:
            mode = fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE
        except OSError as e:
            raise FileError(path, f"names descriptor {fd}, which is not open ({_why(e)})", WRITE_ALLOWED,
                            e.errno) from None
        if mode not in (os.O_WRONLY, os.O_RDWR):
            raise FileError(path, f"names descriptor {fd}, which is open for reading only", WRITE_ALLOWED)
        return "descriptor", fd
    target = os.path.realpath(path)
    parent = os.path.dirname(target)
    if not os.path.isdir(parent):
        why = "is not a directory" if os.path.exists(parent) else "does not exist"
        raise FileError(path, f"directory {parent} {why}", WRITE_ALLOWED)
    try:
        st = os.stat(target)
    except FileNotFoundError:
        return "file", target
    except OSError as e:
        raise FileError(path, f"not writable ({_why(e)})", WRITE_ALLOWED, e.errno) from None
    if stat.S_ISREG(st.st_mode):
        if not st.st_mode & 0o222 or not os.access(target, os.W_OK):
            raise FileError(path, f"is read-only (mode {stat.S_IMODE(st.st_mode):04o})", WRITE_ALLOWED)
        return "file", target
    if stat.S_ISCHR(st.st_mode):
        if not os.access(target, os.W_OK):
            raise FileError(path, "not writable (a character device without write permission)", WRITE_ALLOWED)
        try:        # opened as the write will open it: a terminal device with no terminal (ENXIO) fails here
            os.close(os.open(target, os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY))
        except OSError as e:
            raise FileError(path, f"not writable ({_why(e)})", WRITE_ALLOWED, e.errno) from None
        return "device", target
    if stat.S_ISDIR(st.st_mode):
        raise FileError(path, "is a directory", WRITE_ALLOWED)
    raise FileError(path, f"is {_kind(st.st_mode)}, not a regular file or a character device", WRITE_ALLOWED)


def _temp_prefix(name: str, pid: int) -> str:
    return f".{name[:100]}.{pid}-"


def _create_temp(directory: str, name: str) -> tuple:
    """A new empty file ``.<name>.<pid>-<random>.tmp`` in ``directory`` (mode 0666 less the
    umask); ``(fd, path)``."""
    while True:
        tmp = os.path.join(directory, f"{_temp_prefix(name, os.getpid())}{secrets.token_hex(6)}{TEMP_SUFFIX}")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666), tmp
        except FileExistsError:
            continue


def remove_temps(directory, names, pid: int) -> list:
    """Remove the temporary files that process ``pid`` left in ``directory`` while writing
    files called ``names`` (a write it did not finish: the process was killed); returns
    their paths. Best effort: a file that cannot be removed stays, and is not listed."""
    prefixes = tuple(_temp_prefix(n, pid) for n in names)
    gone = []
    try:
        entries = os.listdir(directory)
    except OSError:
        return gone
    for entry in entries:
        if entry.startswith(prefixes) and entry.endswith(TEMP_SUFFIX):
            path = os.path.join(directory, entry)
            try:
                os.unlink(path)
                gone.append(path)
            except OSError:
                pass
    return gone


def check_writable(path) -> str:
    """Raise :class:`FileError` now for what a write to ``path`` would refuse or fail on
    before writing (see :func:`output_target`; for a file, a temporary file is created in
    its directory and removed). Writes nothing. Returns the kind (:func:`output_target`)."""
    kind, where = output_target(path)
    if kind == "file":
        try:
            fd, tmp = _create_temp(os.path.dirname(where), os.path.basename(where))
            os.close(fd)
            os.unlink(tmp)
        except OSError as e:
            raise FileError(path, f"not writable ({_why(e)})", WRITE_ALLOWED, e.errno) from None
    return kind


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _write_file(path: str, target: str, data: bytes) -> None:
    directory, name = os.path.split(target)
    try:
        old = os.stat(target)
    except FileNotFoundError:
        old = None
    except OSError as e:
        raise FileError(path, f"not writable ({_why(e)})", WRITE_ALLOWED, e.errno) from None
    tmp = None
    try:
        fd, tmp = _create_temp(directory, name)
        try:
            if old is not None:
                os.fchmod(fd, stat.S_IMODE(old.st_mode))
                if (old.st_uid, old.st_gid) != (os.geteuid(), os.getegid()):
                    try:
                        os.fchown(fd, old.st_uid, old.st_gid)
                    except OSError:
                        pass                   # not allowed to give it away: keep our own
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
        tmp = None
    except OSError as e:
        left = "the file was left as it was" if old is not None else "no file was created"
        raise FileError(path, f"cannot write ({_why(e)}); {left}", WRITE_ALLOWED, e.errno) from None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
    try:                                       # the rename itself survives a crash
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


def _write_stream(path: str, fd: int, data: bytes) -> None:
    for stream in (sys.stdout, sys.stderr):    # what was printed before comes first
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass
    try:
        _write_all(fd, data)
    except OSError as e:
        raise FileError(path, f"cannot write ({_why(e)})", WRITE_ALLOWED, e.errno) from None


def _write_device(path: str, device: str, data: bytes) -> None:
    try:
        fd = os.open(device, os.O_WRONLY | os.O_NOCTTY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise FileError(path, f"cannot write ({_why(e)})", WRITE_ALLOWED, e.errno) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISCHR(st.st_mode):       # swapped since output_target looked
            raise FileError(path, f"is {_kind(st.st_mode)}, not a regular file or a character device",
                            WRITE_ALLOWED)
        os.set_blocking(fd, True)
        _write_all(fd, data)
    except OSError as e:
        raise FileError(path, f"cannot write ({_why(e)})", WRITE_ALLOWED, e.errno) from None
    finally:
        os.close(fd)


def write_bytes(path, data: bytes) -> str:
    """Write ``data`` to ``path`` (see the module docstring); returns the kind of
    destination (``stdout``, ``descriptor``, ``device`` or ``file``).

    Raises:
        FileError: the path is refused, or the write failed (a file is then left as it was).
    """
    path = str(path)
    kind, where = output_target(path)
    if kind == "stdout":
        sys.stdout.flush()
        buffer = getattr(sys.stdout, "buffer", None)
        try:
            if buffer is not None:
                buffer.write(data)
                buffer.flush()
            else:
                sys.stdout.write(data.decode("utf-8", "replace"))
                sys.stdout.flush()
        except OSError as e:
            raise FileError(path, f"cannot write ({_why(e)})", WRITE_ALLOWED, e.errno) from None
    elif kind == "descriptor":
        _write_stream(path, where, data)
    elif kind == "device":
        _write_device(path, where, data)
    else:
        _write_file(path, where, data)
    return kind


def write_text(path, text: str, encoding: str = "utf-8") -> str:
    """:func:`write_bytes` of ``text`` encoded."""
    return write_bytes(path, text.encode(encoding))


# ------------------------------------------------------------------ a command's stdout
EXIT_BROKEN_PIPE = 141
"""stdout's reader went away (EPIPE): 128 + SIGPIPE, the status a shell reports for a writer
that SIGPIPE ends (Python ignores the signal, so the write fails instead)."""


class StdoutError(Exception):
    """Writing or flushing stdout failed: raised in place of the :class:`OSError` (whose
    ``errno`` and ``strerror`` it keeps), so that nothing on the way out -- click's own EPIPE
    handling (exit 1, the verification-failed status), an ``except OSError`` around another
    file's write -- takes it for something else; :func:`run_guarding_stdout` reports it."""

    def __init__(self, err: OSError):
        super().__init__(err.strerror or str(err))
        self.errno, self.strerror = err.errno, err.strerror or str(err)


class GuardedStdout:
    """``sys.stdout`` while :func:`run_guarding_stdout` runs a command: the real stream, whose
    failed writes and flushes raise :class:`StdoutError`. Everything else (``encoding``,
    ``isatty``, ``fileno``...) is the stream's, so click and argparse write to it as it is."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text):
        try:
            return self.stream.write(text)
        except OSError as e:
            raise StdoutError(e) from None

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    def flush(self):
        try:
            return self.stream.flush()
        except OSError as e:
            raise StdoutError(e) from None

    def __getattr__(self, name):
        return getattr(self.stream, name)


class BestEffortStderr:
    """``sys.stderr`` while :func:`run_guarding_stdout` runs a command: the real stream, whose
    failed writes and flushes (``2> /dev/full``) are dropped -- the channel for errors has no
    channel of its own to report that on, and a warning that cannot be shown must not change
    the command's outcome or exit status. Everything else is the stream's."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text):
        try:
            return self.stream.write(text)
        except OSError:
            return len(text)

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    def flush(self):
        try:
            self.stream.flush()
        except OSError:
            discard_stdout(self.stream)          # nothing buffered fails again at exit

    def __getattr__(self, name):
        return getattr(self.stream, name)


def discard_stdout(stream) -> None:
    """Point ``stream``'s descriptor at /dev/null once it cannot be written: what is still
    buffered, and the flush at interpreter exit, then go nowhere (no ``Exception ignored
    ... BrokenPipeError`` at shutdown). A stream without a descriptor is left alone."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, fd)
    finally:
        os.close(null)


def run_guarding_stdout(run, cannot_write, status: int = 2) -> int:
    """``run()`` -- a command's body, returning its exit status -- with ``sys.stdout`` a
    :class:`GuardedStdout`; returns its status. When stdout's reader went away (EPIPE, a
    closed pipe: ``| head``) :data:`EXIT_BROKEN_PIPE`, nothing more printed; when another
    write or flush of stdout failed (a full disk, ``> /dev/full``, EIO), ``cannot_write``
    is called with the OS's reason (it prints the command's one error line naming stdout)
    and ``status`` is returned. Stderr is a :class:`BestEffortStderr` meanwhile. ``sys.stdout``
    and ``sys.stderr`` are the real streams again afterwards."""
    real, real_err = sys.stdout, sys.stderr
    if real_err is not None:
        sys.stderr = BestEffortStderr(real_err)
    if real is None:                    # no stdout at all (fd 1 closed): nothing is written
        try:
            return run()
        finally:
            sys.stderr = real_err
    sys.stdout = guarded = GuardedStdout(real)
    try:
        result = run()
        guarded.flush()                 # what is buffered fails here, not at interpreter exit
        return result
    except StdoutError as e:
        discard_stdout(real)
        if e.errno == errno.EPIPE:
            return EXIT_BROKEN_PIPE
        cannot_write(e.strerror)
        return status
    finally:
        if sys.stdout is guarded:
            sys.stdout = real
        sys.stderr = real_err


__all__ = ["EXIT_BROKEN_PIPE", "STDOUT", "TEMP_SUFFIX", "WRITE_ALLOWED", "BestEffortStderr", "GuardedStdout", "StdoutError", "check_writable",
           "discard_stdout", "output_target", "read_bytes", "read_text", "remove_temps", "run_guarding_stdout",
           "stat_regular", "write_bytes", "write_text"]
