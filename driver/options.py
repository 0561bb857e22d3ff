"""What every ``dgrad-driver`` mode shares: exit codes, the user-error type, line splitting
and the click options that run, tune and batch have in common."""

from __future__ import annotations


import click

from miopen_solver.command import split_command
from miopen_solver.errors import MiopenCommandError, PerfConfigError, RuntimeUnavailable
from miopen_solver.runtime import BACKENDS

PROG = "dgrad-driver"
EXIT_OK = 0
EXIT_VERIFY_FAILED = 1
"""Verification failed (MIOpenDriver prints FAILED and exits 0: its 0x200 code wraps; we do not)."""
EXIT_USER_ERROR = 2
EXIT_WORKER_FAILED = 3
"""A timing or verification worker crashed, timed out or raised."""


class UserError(Exception):
    """A mistake in what the user asked for; one line on stderr, exit 2."""


USER_ERRORS = (UserError, MiopenCommandError, PerfConfigError, RuntimeUnavailable, ValueError)
"""Exceptions that mean bad input (the CLI prints one line and exits 2)."""


def one_line(message) -> str:
    """``message`` with all whitespace runs collapsed to single spaces."""
    return " ".join(str(message).split())


def split_line(line) -> list:
    """Tokens of an MIOpenDriver line given as argv tokens, or as one quoted argument."""
    tokens = list(line)
    if len(tokens) == 1 and any(ch.isspace() for ch in tokens[0]):
        try:
            tokens = split_command(tokens[0])
        except MiopenCommandError as e:
            click.echo(f"{PROG}: error: {one_line(e)}", err=True)
            raise click.exceptions.Exit(EXIT_USER_ERROR) from None
    return tokens


def run_and_print(ctx, fn, *args) -> None:
    """Call ``fn(*args) -> (status, lines)``; print the lines and exit with the status, or
    print a user error as one line and exit 2."""
    try:
        status, lines = fn(*args)
    except USER_ERRORS as e:
        click.echo(f"{PROG}: error: {one_line(e)}", err=True)
        ctx.exit(EXIT_USER_ERROR)
    for text in lines:
        click.echo(text)
    if status:
        ctx.exit(status)


LINE_SETTINGS = dict(ignore_unknown_options=True, allow_interspersed_args=True)
"""Click settings of a command that takes an MIOpenDriver line with our options anywhere."""


def backend_option(f):
    """``--backend auto|cpu|cuda|hip``."""
    return click.option("--backend", type=click.Choice(BACKENDS), default="auto", show_default=True,
                        help="Engine: auto picks hip, then cuda, then cpu.")(f)


def arch_option(f):
    """``--arch ARCH``."""
    return click.option("--arch", default=None,
                        help="Target arch preset. With --backend cpu: simulate that target on the CPU "
                             "engine. With auto and no such device: compile only.")(f)


def timeout_option(f):
    """``--timeout SECONDS`` (> 0) per worker job."""
    return click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=None,
                        help="Seconds a worker may take per job before it is killed "
                             "(default $DGRAD_WORKER_TIMEOUT or 300).")(f)


def perfdb_options(f):
    """``--perfdb PATH`` and ``--no-perfdb``."""
    f = click.option("--no-perfdb", "no_perfdb", is_flag=True, help="Ignore the perf-db.")(f)
    return click.option("--perfdb", "perfdb", default=None, metavar="PATH",
                        help="Perf-db file (default $MIOPEN_DGRAD_PERFDB, else the user cache dir).")(f)


def ref_option(f):
    """``--ref auto|gpu|cpu``: the verification reference."""
    return click.option("--ref", type=click.Choice(("auto", "gpu", "cpu")), default="auto", show_default=True,
                        help="Verification reference: the naive GPU kernel or the float64 CPU one "
                             "(auto: GPU on a GPU).")(f)


def json_option(f):
    """``--json``: one JSON record instead of text."""
    return click.option("--json", "as_json", is_flag=True, help="Print one JSON record instead of text.")(f)


def warmup_option(f):
    """``--warmup N`` (>= 0) untimed launches."""
    return click.option("--warmup", type=click.IntRange(min=0), default=1, show_default=True,
                        help="Untimed launches before the -i timed ones.")(f)
