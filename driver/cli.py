"""``dgrad-driver``: an MIOpenDriver-compatible command line for the dgrad solver.

Usage::

    dgrad-driver convfp16 -n 32 -c 64 -H 56 -W 56 -k 64 -y 3 -x 3 -p 1 -q 1 -u 1 -v 1 \\
        -l 1 -j 1 -g 1 -F 2 -t 1 -V 1 --in_layout NHWC --out_layout NHWC --fil_layout NHWC
    dgrad-driver tune  <line> [--max-configs N] [--time-budget S] [--csv PATH] ...
    dgrad-driver batch FILE   [--batch-size N] [--csv PATH] ...

A first token that is not a subcommand (``conv``, ``convfp16``, ``./bin/MIOpenDriver`` ...)
runs the line (the ``run`` subcommand, :mod:`driver.run_cmd`). Our own options are
long-form and may stand anywhere in the line (MIOpenDriver has none of these names).

What a run prints is what MIOpenDriver prints for ``-F 2`` (see :mod:`driver.report`).
Timing and verification each run in their own worker process (:mod:`driver.workers`), on
every backend, so they never share a GPU context with each other or with the driver.
Exit status: 0 success; 1 verification failed (MIOpen exits 0 there: its 0x200 error code
wraps to 0 -- we do not); 2 a user error (bad line, invalid perf config, unavailable
backend, not applicable), reported as ONE line ``dgrad-driver: error: ...`` on stderr;
3 a worker crashed, timed out or raised, or a compile-only build failed; 130 interrupted
(Ctrl-C; the workers are killed and reaped first); 141 stdout's reader went away (a closed
pipe, ``| head``: EPIPE; nothing more is printed, as a writer killed by SIGPIPE ends). With
``--json`` too, errors are that one stderr line and nothing on stdout. Stdout that cannot
be written (a full disk, ``> /dev/full``, EIO) is a user error: ``dgrad-driver: error:
stdout: cannot write (No space left on device)``, exit 2. Click's own usage errors (an
unknown option or subcommand, a missing value) are one line too, saying what is allowed
(:func:`usage_error_line`).
"""

from __future__ import annotations

import os
import sys

import click

from miopen_solver import __version__
from miopen_solver.command import BASE_DTYPES, REJECTED_BASES
from miopen_solver.errors import MiopenCommandError
from miopen_solver.fileio import EXIT_BROKEN_PIPE, GuardedStdout, StdoutError, run_guarding_stdout

from . import miopen_env
from .options import (EXIT_INTERRUPTED, EXIT_USER_ERROR, LINE_SETTINGS, PROG, Group, Integer, UserError, arch_option,
                      backend_option, error_line, json_option, perfdb_options, ref_option, run_and_print, split_line,
                      timeout_option, warmup_option)
from .run_cmd import KOUTER, SPLIT_K_REDUCE, RunOptions, check_split_k, run_line

__all__ = ["cli", "main", "run_line", "RunOptions", "EXIT_BROKEN_PIPE", "GuardedStdout", "StdoutError"]


class DefaultRunGroup(Group):
    """A group whose default action is ``run``: an unknown first token starts the line."""

    def parse_args(self, ctx, args):
        """Prepend ``run`` when the first token is not a subcommand or a group option (``-h``
        alone is ``--help``, as MIOpenDriver's ``-h``; ``-h`` inside a line stays the line's)."""
        if list(args) == ["-h"]:
            args = ["--help"]
        elif len(args) == 2 and args[0] in self.commands and args[1] == "-h":     # `config -h`
            args = [args[0], "--help"]
        if args and args[0] not in self.commands and args[0] not in ("--help", "--version"):
            args = ["run"] + list(args)
            ctx.meta[IMPLICIT_RUN] = True
        return super().parse_args(ctx, args)


IMPLICIT_RUN = "dgrad_driver.implicit_run"
"""``ctx.meta`` key: the line's first word named no subcommand, so ``run`` was put before it."""


def unknown_first_word(word: str) -> MiopenCommandError:
    """The error for a first word that names neither a subcommand nor a base argument
    (``dgrad-driver tnue conv ...``: a mistyped subcommand as likely as a mistyped base)."""
    commands = ", ".join(cli.list_commands(None))
    return MiopenCommandError("<base>", word, f"a subcommand ({commands}) or an MIOpenDriver base "
                                              f"({', '.join(BASE_DTYPES)})", "unknown subcommand or base argument")


def _run_first_word(tokens, opts, emit=None):
    """:func:`run_line` for a line without ``run`` before it: an unknown base argument is
    reported by :func:`unknown_first_word`."""
    try:
        return run_line(tokens, opts, emit=emit)
    except MiopenCommandError as e:
        if e.flag == "<base>" and e.value is not None and e.value not in BASE_DTYPES and e.value not in REJECTED_BASES:
            raise unknown_first_word(e.value) from None
        raise


@click.group(PROG, cls=DefaultRunGroup)
@click.version_option(version=__version__, prog_name=PROG)
def cli():
    """MIOpen-compatible backward-data convolution solver.

    Run an MIOpenDriver line: dgrad-driver convfp16 -n 32 -c 64 ... -F 2 -t 1 -V 1
    """
    try:                                # every subcommand: our variable is checked first
        miopen_env.check_own()
    except UserError as e:
        raise click.UsageError(str(e)) from None


@cli.command("run", context_settings=LINE_SETTINGS)
@backend_option
@arch_option
@json_option
@click.option("--perf-config", "perf_config", default=None, metavar="\"a,b,...\"",
              help="Run this serialised PerfConfig instead of the perf-db's or the default.")
@click.option("--kouter", type=click.Choice(tuple(KOUTER)), default=None,
              help="B tile k-outer in LDS (lds_k_outer): auto = the solver's policy.")
@click.option("--split-k", "split_k", type=Integer(lambda flag, value: check_split_k(value)), default=None,
              help="Split-K degree: N from 1 to 64, or -1 to let the solver choose (the choice is printed).")
@click.option("--split-k-reduce", "split_k_reduce", type=click.Choice(SPLIT_K_REDUCE), default=None,
              help="How split-K slices are summed: atomic adds into dX, or an fp32 workspace and a "
                   "reduction kernel (deterministic); auto = atomics where allowed; stream = stream-K on a "
                   "TMA config (schedule 3).")
@click.option("--print-name-only", is_flag=True, help="Print the kernel name and exit (nothing is launched).")
@ref_option
@warmup_option
@timeout_option
@perfdb_options
@click.argument("line", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def run_cmd(ctx, backend, arch, as_json, perf_config, kouter, split_k, split_k_reduce, print_name_only, ref, warmup,
            timeout, perfdb, no_perfdb, line):
    """Run an MIOpenDriver conv line (backward data, -F 2) and print what MIOpenDriver prints."""
    opts = RunOptions(backend=backend, arch=arch, as_json=as_json, perf_config=perf_config, kouter=kouter,
                      split_k=split_k, split_k_reduce=split_k_reduce, print_name_only=print_name_only, ref=ref,
                      timeout=timeout,
                      warmup=warmup, perfdb=perfdb, use_perfdb=not no_perfdb)
    run_and_print(ctx, _run_first_word if ctx.meta.get(IMPLICIT_RUN) else run_line, split_line(line), opts, stream=True)


from .tune_cmd import tune_cmd  # noqa: E402
from .batch_cmd import batch_cmd  # noqa: E402

cli.add_command(tune_cmd)
cli.add_command(batch_cmd)

try:  # solver subcommands (applicable, config) live in their own module
    from .solver_cmds import applicable_cmd, config_cmd
except ImportError:  # pragma: no cover - only while that module is absent
    pass
else:
    cli.add_command(applicable_cmd)
    cli.add_command(config_cmd)

from .perfdb_cmd import perfdb_group  # noqa: E402

cli.add_command(perfdb_group)

try:  # fixture replay (replay) lives in its own module
    from .replay_cmd import replay_cmd
except ImportError:  # pragma: no cover - only while that module is absent
    pass
else:
    cli.add_command(replay_cmd)


HELP_TOKENS = ("-h", "--help", "-?")
"""MIOpenDriver's help flags (``InputFlags``: ``-h``/``--help``, and ``-?``)."""
COMPLETE_VAR = "_DGRAD_DRIVER_COMPLETE"
"""Click's shell-completion variable for ``dgrad-driver`` (``bash_source``, ``zsh_source`` ...)."""


def _flag_default(f) -> str:
    if f.default == "":
        return '""'
    return str(f.default)


def conv_help_lines(base: str) -> list:
    """MIOpenDriver's help for a conv base argument: every flag with its short form, long
    form, default and meaning (:data:`miopen_solver.command.FLAGS`), in MIOpen's
    ``AddCmdLineArgs`` order, then our own long options."""
    from miopen_solver.command import FLAGS
    rows = [(f"-{f.short}", f"--{f.long}", _flag_default(f), f.help) for f in FLAGS]
    rows.append(("-h", "--help", "", "print this help and exit (also -?)"))
    w = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(("short", "long", "default"))]
    out = [f"MIOpenDriver {base}: backward-data (-F 2) flags of this solver",
           "", f"{'short':<{w[0]}}  {'long':<{w[1]}}  {'default':<{w[2]}}  meaning"]
    out += [f"{a:<{w[0]}}  {b:<{w[1]}}  {c:<{w[2]}}  {d}".rstrip() for a, b, c, d in rows]
    out += ["", "A flag's value is the next token. Our own long options (--backend, --arch, --json, ...): "
            f"{PROG} run --help."]
    return out


def _wants_conv_help(args) -> bool:
    """A line (not a subcommand) holding MIOpenDriver's -h/--help/-?."""
    return bool(args) and args[0] not in cli.commands and args[0] not in ("--help", "--version") \
        and any(a in HELP_TOKENS for a in args[1:])


def main(argv=None) -> int:
    """Console entry point; returns the exit status. Stdout is written through
    :class:`~miopen_solver.fileio.GuardedStdout` (:func:`~miopen_solver.fileio.run_guarding_stdout`):
    a closed pipe ends quietly with :data:`EXIT_BROKEN_PIPE`, any other failed write (disk
    full, EIO) is one error line naming stdout, exit 2."""
    return run_guarding_stdout(lambda: _main(argv),
                               lambda why: click.echo(error_line(f"stdout: cannot write ({why})"), err=True),
                               EXIT_USER_ERROR)


def _param_form(param, ctx) -> str:
    """How a parameter is written: ``--results PATH``, ``--backend [auto|cpu|cuda|hip]``,
    ``--json``, ``FILE``."""
    try:
        metavar = param.make_metavar(ctx)
    except TypeError:                   # click < 8.2: make_metavar() takes no context
        metavar = param.make_metavar()
    if isinstance(param, click.Argument):
        return metavar
    return "/".join(param.opts) + ("" if getattr(param, "is_flag", False) else f" {metavar}")


def usage_error_line(e: click.UsageError) -> str:
    """Click's usage error as one line that also says what is allowed: the command's
    options (an unknown option), its subcommands (an unknown subcommand), the option's form
    (a missing or bad value), else its usage -- each with ``see <command> --help``. A
    message of ours that already says what is allowed is kept as it is."""
    message = e.format_message().strip()
    ctx = e.ctx
    if ctx is None or "allowed: " in message:
        return error_line(message)
    command, path = ctx.command, ctx.command_path
    see = f"see {path} --help"
    name = getattr(e, "option_name", None)
    param = getattr(e, "param", None)
    if param is None and name:
        param = next((p for p in command.get_params(ctx) if name in p.opts + p.secondary_opts), None)
    if isinstance(e, click.NoSuchOption):
        opts = [max(p.opts, key=len) for p in command.get_params(ctx) if isinstance(p, click.Option)]
        allowed = f"the options of {path}: {', '.join(opts)} ({see})"
    elif isinstance(command, click.Group) and message.startswith("No such command"):
        allowed = f"the commands of {path}: {', '.join(command.list_commands(ctx))} ({see})"
    elif param is not None:
        allowed = f"{_param_form(param, ctx)} ({see})"
    else:
        allowed = f"{path} {' '.join(command.collect_usage_pieces(ctx))} ({see})"
    return error_line(f"{message.rstrip('.')}; allowed: {allowed}")


def _main(argv=None) -> int:
    """:func:`main` without the guard on stdout (click usage errors become one line)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if os.environ.get(COMPLETE_VAR):          # shell completion: click prints the script
        try:
            cli.main(args=args, prog_name=PROG, complete_var=COMPLETE_VAR)
        except SystemExit as e:
            return e.code if isinstance(e.code, int) else 0
        return 0
    if _wants_conv_help(args):
        base = next((a for a in args if not a.startswith("-") and "MIOpenDriver" not in a), args[0])
        if base not in BASE_DTYPES:    # MIOpenDriver: "Incorrect BaseArg"; the error a run of the line gives
            error = (MiopenCommandError("<base>", base, ", ".join(BASE_DTYPES), REJECTED_BASES[base])
                     if base in REJECTED_BASES else unknown_first_word(base))
            click.echo(error_line(error), err=True)
            return EXIT_USER_ERROR
        click.echo("\n".join(conv_help_lines(base)))
        return 0
    if not args:
        click.echo(cli.get_help(click.Context(cli, info_name=PROG)))
        return 0
    try:
        rv = cli.main(args=args, prog_name=PROG, standalone_mode=False)
    except click.exceptions.Exit as e:
        return e.exit_code
    except click.UsageError as e:
        click.echo(usage_error_line(e), err=True)
        return e.exit_code
    except click.ClickException as e:
        click.echo(error_line(e.format_message()), err=True)
        return e.exit_code
    except click.exceptions.Abort as e:
        if isinstance(e.__cause__, KeyboardInterrupt):
            click.echo(f"{PROG}: interrupted", err=True)
            return EXIT_INTERRUPTED
        click.echo(f"{PROG}: error: aborted", err=True)
        return 1
    except KeyboardInterrupt:
        click.echo(f"{PROG}: interrupted", err=True)
        return EXIT_INTERRUPTED
    except SystemExit as e:  # subcommands that exit directly
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return rv if isinstance(rv, int) else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
