"""What every ``dgrad-driver`` mode shares: exit codes, the user-error type, line splitting
and the click options that run, tune and batch have in common."""

from __future__ import annotations

import math
import os
import re
import tempfile

import click

from miopen_solver.command import INT_MAX, MAX_LAUNCHES, split_command
from miopen_solver.errors import FileError, MiopenCommandError, PerfConfigError, RuntimeUnavailable, shown_path
from miopen_solver.fileio import check_writable, output_target, stat_regular
from miopen_solver.perfdb import ENV_VAR as PERFDB_ENV, default_path
from miopen_solver.runtime import BACKENDS
from miopen_solver.target import PRESETS, Target, get_target
from miopen_solver.text import cut_values, shorten

PROG = "dgrad-driver"
EXIT_OK = 0
EXIT_VERIFY_FAILED = 1
"""Verification failed (MIOpenDriver prints FAILED and exits 0: its 0x200 code wraps; we do not)."""
EXIT_USER_ERROR = 2
EXIT_WORKER_FAILED = 3
"""A timing or verification worker crashed, timed out or raised, or a compile-only build failed."""
EXIT_INTERRUPTED = 130
"""Ctrl-C (SIGINT): 128 + 2, as a shell reports a process killed by SIGINT."""
MAX_TIMEOUT_S = 1e6
"""The largest ``--timeout`` (about 11.5 days): beyond it the OS's wait calls overflow."""


class UserError(Exception):
    """A mistake in what the user asked for; one line on stderr, exit 2."""


class OutputError(UserError):
    """A user error found after results were produced (e.g. the ``--csv`` file cannot be
    written): ``lines`` are printed to stdout first, then the one error line; exit 2."""

    def __init__(self, message: str, lines=()):
        super().__init__(message)
        self.lines = list(lines)


USER_ERRORS = (UserError, MiopenCommandError, PerfConfigError, RuntimeUnavailable, ValueError)
"""Exceptions that mean bad input (the CLI prints one line and exits 2)."""


def one_line(message) -> str:
    """``message`` with all whitespace runs collapsed to single spaces and every runaway
    value cut (:func:`miopen_solver.text.cut_values`): what every error and warning line
    shows."""
    return cut_values(" ".join(str(message).split()))


def split_line(line) -> list:
    """Tokens of an MIOpenDriver line given as argv tokens, or as one quoted argument with
    more flags after it (as the solver commands take it)."""
    tokens = list(line)
    if tokens and any(ch.isspace() for ch in tokens[0]):
        try:
            tokens = split_command(tokens[0]) + tokens[1:]
        except MiopenCommandError as e:
            click.echo(error_line(e), err=True)
            raise click.exceptions.Exit(EXIT_USER_ERROR) from None
    return tokens


def error_line(message) -> str:
    """The one stderr line of a user error: ``dgrad-driver: error: <message>``."""
    return f"{PROG}: error: {one_line(message)}"


def warn(message) -> None:
    """One line ``dgrad-driver: warning: <message>`` on stderr."""
    click.echo(f"{PROG}: warning: {one_line(message)}", err=True)


def emit_line(text: str) -> None:
    """Print one line on stdout now, flushed (``click.echo`` flushes): a row that is final
    reaches a pipe at once and survives a Ctrl-C."""
    click.echo(text)


def misplaced_option(ctx, e) -> str | None:
    """For a line's unknown ``--name`` that is an option of other ``dgrad-driver`` commands
    (``tune ... --perf-config``): the message naming the commands that take it; None for
    any other error."""
    if not (isinstance(e, MiopenCommandError) and e.detail == "unknown flag" and str(e.flag).startswith("--")):
        return None
    group = ctx.parent.command if ctx.parent is not None else None
    owners = [name for name, c in sorted(getattr(group, "commands", {}).items())
              if name != ctx.command.name and any(e.flag in p.opts for p in c.params)]
    if not owners:
        return None
    return (f"{e.flag}: an option of dgrad-driver {' and '.join(owners)}, not of {ctx.command.name}; allowed: "
            f"{ctx.command.name}'s options (dgrad-driver {ctx.command.name} --help) and MIOpenDriver conv flags")


def run_and_print(ctx, fn, *args, stream: bool = False) -> None:
    """Call ``fn(*args) -> (status, lines)``; print the lines and exit with the status, or
    print a user error as one line and exit 2 (an :class:`OutputError`'s lines first).
    With ``stream``, ``fn`` also gets ``emit=`` :func:`emit_line` and prints the lines that
    are final as it goes (batch and tune rows); the lines it returns come after them.
    Ctrl-C exits 130 (workers are ended by their context managers on the way out), the
    lines printed so far kept."""
    try:
        status, lines = fn(*args, **({"emit": emit_line} if stream else {}))
    except OutputError as e:
        for text in e.lines:
            click.echo(text)
        click.echo(error_line(e), err=True)
        ctx.exit(EXIT_USER_ERROR)
    except USER_ERRORS as e:
        click.echo(error_line(misplaced_option(ctx, e) or e), err=True)
        ctx.exit(EXIT_USER_ERROR)
    except KeyboardInterrupt:
        click.echo(f"{PROG}: interrupted", err=True)
        ctx.exit(EXIT_INTERRUPTED)
    for text in lines:
        click.echo(text)
    if status:
        ctx.exit(status)


class Command(click.Command):
    """A click command whose usage errors carry its context: click's parser raises some
    (``Option '--csv' requires an argument.``) without one, and the CLI needs it to say
    what the command allows (:func:`driver.cli.usage_error_line`). Every ``dgrad-driver``
    command is one (``cls=Command``), every group a :class:`Group`."""

    def parse_args(self, ctx, args):
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as e:
            if e.ctx is None:
                e.ctx = ctx
            raise


class Group(Command, click.Group):
    """A click group whose usage errors carry its context, and whose subcommands are
    :class:`Command` (``@group.command``) or :class:`Group`."""

    command_class = Command


Group.group_class = Group


LINE_SETTINGS = dict(ignore_unknown_options=True, allow_interspersed_args=True)
"""Click settings of a command that takes an MIOpenDriver line with our options anywhere."""


def backend_option(f):
    """``--backend auto|cpu|cuda|hip``."""
    return click.option("--backend", type=click.Choice(BACKENDS), default="auto", show_default=True,
                        help="Engine: auto picks hip, then cuda, then cpu.")(f)


def arch_option(f=None, *, without_device: str = "compile only"):
    """``--arch ARCH``; ``without_device`` says what the command does when the backend is
    auto and no such device exists (``run``: compile only; ``tune``/``batch``: refuse)."""
    def deco(fn):
        return click.option("--arch", default=None,
                            help="Target arch preset. With --backend cpu: simulate that target on the CPU "
                                 f"engine. With auto and no such device: {without_device}.")(fn)
    return deco(f) if f is not None else deco


def shown_text(value: str) -> str:
    """A typed value as a message shows it: cut by :func:`~miopen_solver.text.shorten`,
    quoted (``repr``) when it is empty or blank."""
    return shorten(value) if value.strip() else repr(value)


def check_seconds(raw, name: str, high: float | None = None, sep: str = " ") -> float:
    """``raw`` (text as typed, or a number) as a finite number of seconds > 0 and at most
    ``high`` (None: no bound).

    Raises:
        UserError: ``<name><sep><raw>: allowed: a finite number of seconds > 0[ and <= high]``,
            ``raw`` as typed (:func:`shown_text`): ``--timeout inf``, ``DGRAD_WORKER_TIMEOUT=inf``.
    """
    try:
        value = float(raw)
    except (TypeError, ValueError, OverflowError):
        value = math.nan
    if not (math.isfinite(value) and 0 < value and (high is None or value <= high)):
        shown = shown_text(raw) if isinstance(raw, str) else shorten(raw)
        bound = "" if high is None else f" and <= {high:g}"
        raise UserError(f"{name}{sep}{shown}: allowed: a finite number of seconds > 0{bound}")
    return value


def check_timeout(raw, name: str, sep: str = " ") -> float:
    """``raw`` as a finite number of seconds in (0, :data:`MAX_TIMEOUT_S`]
    (:func:`check_seconds`; ``name`` and ``sep`` as the user gave it: ``--timeout``,
    ``DGRAD_WORKER_TIMEOUT`` with ``=``)."""
    return check_seconds(raw, name, MAX_TIMEOUT_S, sep)


def seconds_callback(check):
    """A click callback refusing, up front, a value ``check(value, flag)`` refuses."""
    def callback(ctx, param, value):
        try:
            return None if value is None else check(value, max(param.opts, key=len))
        except UserError as e:
            raise click.UsageError(str(e), ctx) from None
    return callback


def timeout_option(f):
    """``--timeout SECONDS``: finite, > 0 and <= :data:`MAX_TIMEOUT_S`, per worker job."""
    return click.option("--timeout", default=None, metavar="SECONDS", callback=seconds_callback(check_timeout),
                        help="Seconds a worker may take per job before it is killed: finite, > 0, "
                             "<= 1e6 (default $DGRAD_WORKER_TIMEOUT or 300).")(f)


def perfdb_label(path) -> str:
    """How the user named the perf-db: ``--perfdb PATH``, ``MIOPEN_DGRAD_PERFDB=PATH`` or
    ``perf-db PATH`` (the built-in location)."""
    if path is not None:
        return f"--perfdb {path if str(path).strip() else repr(str(path))}"
    if os.environ.get(PERFDB_ENV):
        return f"{PERFDB_ENV}={os.environ[PERFDB_ENV]}"
    return f"perf-db {default_path()}"


PERFDB_ALLOWED = ("allowed: a perf-db file written by dgrad-driver tune or a MIOpen user perf-db, or a new "
                  "file in an existing, writable directory")


def file_error(flag: str, e: FileError) -> UserError:
    """A :class:`~miopen_solver.errors.FileError` as the user error naming ``flag``:
    ``<flag> <path>: <reason>; allowed: <allowed>``."""
    return UserError(f"{flag} {e}")


def check_output_file(flag: str, path: str) -> None:
    """An output file given by ``flag`` (``--csv``, ``-o``) can be written
    (:func:`miopen_solver.fileio.check_writable`: nothing is left behind).

    Raises:
        UserError: naming the flag, the path and what is allowed.
    """
    try:
        check_writable(path)
    except FileError as e:
        raise file_error(flag, e) from None


def check_not_stdout(flag: str, path: str, report: str) -> None:
    """An output file given by ``flag`` (``--csv``) is not this command's standard output
    (``-``, ``/dev/stdout``, ``/dev/fd/1``), which carries its ``report``: the two would
    interleave, and neither could be read back.

    Raises:
        UserError: naming the flag, the path and what is allowed.
    """
    if path is None:
        return
    try:
        kind, where = output_target(path)
    except FileError:
        return                  # check_output_file names that fault
    if kind == "stdout" or (kind == "descriptor" and where == 1):
        raise UserError(f"{flag} {path}: standard output carries {report}; allowed: a file path, "
                        f"or /dev/stderr")


PERFDB_SIDE_FILES = ("", "-wal", "-shm", "-journal")
"""A perf-db's own files: the database and sqlite's files beside it."""


def check_not_kept(flag: str, path: str, kept: dict) -> None:
    """An output file given by ``flag`` (written whole: a temporary file renamed over it) is
    none of the files the command reads or keeps -- ``kept`` maps what each is (``"the
    perf-db"``, ``"FILE, the lines being run"``) to its path, a perf-db with its sqlite
    files (:data:`PERFDB_SIDE_FILES`) -- where the rename would replace a perf-db of tuned
    records or the input file with a CSV. ``-``, descriptors and devices write nothing
    there; symlinks are followed.

    Raises:
        UserError: ``<flag> <path>: is <what> (<its path>); allowed: another file``.
    """
    if path is None or path == "-" or not os.path.exists(os.path.dirname(os.path.abspath(path))):
        return
    target = os.path.realpath(path)
    if target.startswith(("/dev/", "/proc/")):
        return
    for what, other in kept.items():
        if other is None:
            continue
        other = str(other)
        sides = PERFDB_SIDE_FILES if "perf-db" in what else ("",)
        if target in {os.path.realpath(other + s) for s in sides}:
            raise UserError(f"{flag} {shown_path(path)}: is {what} ({shown_path(other)}); allowed: another file")


def input_file_size(flag: str, path: str) -> int:
    """The size of an input file given by ``flag`` (``-D``, ``-e``), which must be a regular
    file (:func:`miopen_solver.fileio.stat_regular`: a directory or device is refused here,
    before any worker starts).

    Raises:
        UserError: naming the flag, the path and what is allowed.
    """
    try:
        return stat_regular(path, "file of the tensor's raw elements").st_size
    except FileError as e:
        raise file_error(flag, e) from None


def write_csv_or_error(path: str, fieldnames, rows, errors: list) -> int | None:
    """:func:`driver.report.write_csv`; when it fails (disk full, removed directory...)
    append ``--csv PATH: cannot write (why)`` to ``errors`` and return None."""
    from .report import write_csv
    try:
        return write_csv(path, fieldnames, rows)
    except FileError as e:
        errors.append(f"--csv {shown_path(path)}: {e.reason}; the results are printed above")
    except OSError as e:
        errors.append(f"--csv {shown_path(path)}: cannot write ({e.strerror or e}); the results are printed above")
    return None


def check_writable_dir(what: str, directory: str, allowed: str) -> None:
    """Files can be created in ``directory`` (probed with a temporary file, nothing is left).

    Raises:
        UserError: ``<what>: cannot create files in <directory> (<why>); allowed: <allowed>``.
    """
    try:
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as e:
        raise UserError(f"{what}: cannot create files in {directory} ({e.strerror or e}); "
                        f"allowed: {allowed}") from None


def perfdb_options(f):
    """``--perfdb PATH`` and ``--no-perfdb``."""
    f = click.option("--no-perfdb", "no_perfdb", is_flag=True, help="Ignore the perf-db.")(f)
    return click.option("--perfdb", "perfdb", default=None, metavar="PATH",
                        help="Perf-db file (default $MIOPEN_DGRAD_PERFDB, else MIOpen's user db directory, ~/.config/miopen). "
                             "Read: an unusable one is a warning and the default config; tune writes it "
                             "and refuses an unwritable one.")(f)


def ref_option(f):
    """``--ref auto|gpu|cpu``: the verification reference."""
    return click.option("--ref", type=click.Choice(("auto", "gpu", "cpu")), default="auto", show_default=True,
                        help="Verification reference: the naive GPU kernel or the float64 CPU one "
                             "(auto: GPU on a GPU).")(f)


def json_option(f):
    """``--json``: one JSON record instead of text."""
    return click.option("--json", "as_json", is_flag=True, help="Print one JSON record instead of text.")(f)


def check_count(flag: str, value, low: int, high: int | None = INT_MAX) -> None:
    """A count option (``--warmup``, ``--batch-size``, ``--iters`` ...): an integer from
    ``low`` to ``high`` (default :data:`~miopen_solver.command.INT_MAX`, the C ``int`` every
    MIOpenDriver count is read into, so a launch count never outgrows its type and the work
    stays bounded like ``-i``'s); None (not given) passes.

    Raises:
        UserError: ``<flag> <value>: allowed: an integer from <low> to <high>``.
    """
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        allowed = f"an integer from {low} to {high}" if high is not None else f"an integer >= {low}"
        raise UserError(f"{flag} {shorten(value)}: allowed: {allowed}")


_DECIMAL = re.compile(r"\s*[+-]?[0-9]+\s*")


class Integer(click.types.IntParamType):
    """The type of every integer option: click's ``int``, then ``check(flag, value)``, the
    option's own range check (raising :class:`UserError`; it must refuse text), so a bad value is refused up
    front, before anything runs. Every option's range lies within C ``int``, so a decimal
    integer of more digits than :data:`~miopen_solver.command.INT_MAX` has is given to
    ``check`` as the text typed, unconverted (work bounded by the length; Python converts
    at most 4300 digits, and click called more 'not a valid integer'): out of range, with
    the allowed range."""

    def __init__(self, check):
        self.check = check

    def convert(self, value, param, ctx):
        flag = max(param.opts, key=len) if param is not None else "value"
        decimal = isinstance(value, str) and _DECIMAL.fullmatch(value)
        try:
            if decimal:
                text = value.strip()
                sign = text[0] if text[0] in "+-" else ""
                digits = text.lstrip("+-").lstrip("0")
                if len(digits) > len(str(INT_MAX)):
                    self.check(flag, text)
                value = sign + (digits or "0")          # leading zeros cut: Python converts 4300 digits
            value = super().convert(value, param, ctx)
            self.check(flag, value)
        except UserError as e:
            raise click.UsageError(str(e), ctx) from None
        return value


def count_type(low: int, high: int = INT_MAX) -> Integer:
    """The click type of a count from ``low`` to ``high`` (:func:`check_count`)."""
    return Integer(lambda flag, value: check_count(flag, value, low, high))


def count_option(name: str, low: int, high: int = INT_MAX, **kw):
    """A click option taking a count from ``low`` to ``high`` (default INT_MAX;
    :func:`check_count`), refused up front, before anything runs."""
    return click.option(name, type=count_type(low, high), **kw)


def warmup_option(f):
    """``--warmup N`` (0 to :data:`~miopen_solver.command.MAX_LAUNCHES`) untimed launches."""
    return count_option("--warmup", 0, MAX_LAUNCHES, default=1, show_default=True,
                        help=f"Untimed launches before the -i timed ones (0 to {MAX_LAUNCHES}).")(f)


def arch_target(arch: str) -> Target:
    """The preset for an ``--arch`` value.

    Raises:
        UserError: an empty or unknown arch, naming ``--arch``, the value and the known ones.
    """
    if not arch.strip():
        raise UserError(f"--arch {arch!r}: empty; allowed: {', '.join(sorted(PRESETS))}")
    try:
        return get_target(arch)
    except ValueError as e:
        raise UserError(f"--arch {shorten(arch)}: {e}") from None
