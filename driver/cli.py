"""``dgrad-driver``: an MIOpenDriver-compatible command line for the dgrad solver.

Usage::

    dgrad-driver convfp16 -n 32 -c 64 -H 56 -W 56 -k 64 -y 3 -x 3 -p 1 -q 1 -u 1 -v 1 \\
        -l 1 -j 1 -g 1 -F 2 -t 1 -V 1 --in_layout NHWC --out_layout NHWC --fil_layout NHWC

A first token that is not a subcommand (``conv``, ``convfp16``, ``./bin/MIOpenDriver`` ...)
runs the line (the ``run`` subcommand). Our own options are long-form and may stand anywhere
in the line (MIOpenDriver has none of these names): ``--backend auto|cpu|cuda|hip``,
``--arch ARCH``, ``--json``, ``--perf-config "a,b,..."``, ``--print-name-only``.

What it prints is what MIOpenDriver prints for ``-F 2`` (see :mod:`driver.report`).
Timing and verification never share a GPU context: on a GPU backend the timed launches run
in a separate (spawned) worker process; the CPU engine has no device state and times in
process.
Exit status: 0 success; 1 verification failed (MIOpen exits 0 there: its 0x200 error code
wraps to 0 -- we do not); 2 a user error (bad line, invalid perf config, unavailable
backend, not applicable), reported as ONE line ``dgrad-driver: error: ...`` on stderr.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import time

import click
import numpy as np

from miopen_solver import __version__, layouts, prng, reference
from miopen_solver.command import DriverCommand, parse
from miopen_solver.errors import MiopenCommandError, PerfConfigError, RuntimeUnavailable
from miopen_solver.runtime import BACKENDS, get_engine
from miopen_solver.spec import PerfConfig, make_spec
from miopen_solver.target import get_target

from . import report

PROG = "dgrad-driver"
EXIT_VERIFY_FAILED = 1
EXIT_USER_ERROR = 2
USER_ERRORS = (MiopenCommandError, PerfConfigError, RuntimeUnavailable, ValueError)


class UserError(Exception):
    """A mistake in what the user asked for; one line on stderr, exit 2."""


def _one_line(message) -> str:
    return " ".join(str(message).split())


def _default_config(problem, target) -> PerfConfig:
    """The solver's default config when the solver module is there, else PerfConfig()
    (with stages capped at 2 on targets without asynchronous copies)."""
    try:
        from miopen_solver.solver import DgradSolver
    except ImportError:
        cfg = PerfConfig()
        return cfg if target.async_copy else cfg.replace(stages=min(cfg.stages, 2))
    return DgradSolver().get_default_performance_config(problem, target)


def _check_applicable(problem, target) -> None:
    """Raise UserError with every reason when the solver says not applicable."""
    try:
        from miopen_solver.solver import DgradSolver
    except ImportError:
        return
    verdict = DgradSolver().is_applicable(problem, target)
    if not verdict.ok:
        reasons = "; ".join(f"{r.code}: {r.message}" for r in verdict.reasons)
        raise UserError(f"not applicable on {target.arch}: {reasons}")


def _check_unsupported_flags(cmd: DriverCommand) -> None:
    f = cmd.flags
    if cmd.problem.mode != "conv":
        raise UserError("-m trans: backward data of a transposed convolution is a forward "
                        "convolution in MIOpen; this solver runs -m conv only")
    for name in ("in_cast_type", "out_cast_type", "wei_cast_type"):
        if str(f[name]) != "-1":
            raise UserError(f"--{name} {f[name]}: cast types are not supported (allowed: -1)")


def _read_tensor(path: str, shape: tuple, dtype, flag: str) -> np.ndarray:
    """A raw buffer in memory order (MIOpen's ``readBufferFromFile``), strictly sized."""
    count = int(np.prod(shape))
    try:
        data = np.fromfile(path, dtype=dtype, count=count)
    except OSError as e:
        raise UserError(f"{flag} {path}: cannot read ({e.strerror or e})") from None
    if data.size != count:
        raise UserError(f"{flag} {path}: holds {data.size} elements of {np.dtype(dtype).name}; "
                        f"the problem needs {count}")
    return data.reshape(shape)


def _dump(path: str, a: np.ndarray, lines: list) -> None:
    np.ascontiguousarray(a).tofile(path)
    lines.append(f"Wrote output to file {path}")


def _timing_worker(backend: str, spec, dy: np.ndarray, w: np.ndarray, iters: int):
    """Worker-process entry: a fresh engine (its own GPU context) times ``iters`` launches.
    Returns ``(Timing, wall_ms_per_iteration)``."""
    engine = get_engine(backend)
    t0 = time.perf_counter()
    timing = engine.time(spec, dy, w, iters=iters, warmup=0)
    wall_ms = (time.perf_counter() - t0) * 1e3 / iters
    timing.extra["worker_pid"] = os.getpid()
    return timing, wall_ms


def time_engine(engine, spec, dy, w, iters: int, *, isolate: bool | None = None):
    """``(Timing, wall ms per iteration)`` for ``iters`` timed runs, no warm-up (MIOpen drops
    the first iteration from its average instead). ``isolate`` (default: any non-cpu engine)
    runs them in a spawned worker process so timing never shares the verification's context."""
    if isolate is None:
        isolate = engine.name != "cpu"
    if not isolate:
        t0 = time.perf_counter()
        timing = engine.time(spec, dy, w, iters=iters, warmup=0)
        return timing, (time.perf_counter() - t0) * 1e3 / iters
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(_timing_worker, engine.name, spec, dy, w, iters).result()


def _split_line(line) -> list:
    tokens = list(line)
    if len(tokens) == 1 and any(ch.isspace() for ch in tokens[0]):
        tokens = shlex.split(tokens[0])      # the whole line given as one quoted argument
    return tokens


def run_line(tokens, *, backend="auto", arch=None, as_json=False, perf_config=None,
             print_name_only=False, environ=None) -> tuple:
    """Run one MIOpenDriver line. Returns ``(exit_status, stdout_lines)``.

    Raises:
        UserError, MiopenCommandError, PerfConfigError, RuntimeUnavailable, ValueError:
            user mistakes (the CLI prints one line and exits 2).
    """
    if not tokens:
        raise UserError("missing the MIOpenDriver line (e.g. convfp16 -n 32 -c 64 ... -F 2)")
    cmd = parse(tokens)
    _check_unsupported_flags(cmd)
    problem = cmd.problem

    t_aux = time.perf_counter()
    engine = get_engine(backend)
    target = get_target(arch) if arch else getattr(engine, "target", None) or get_target("cpu")
    _check_applicable(problem, target)
    config = PerfConfig.parse(perf_config) if perf_config else _default_config(problem, target)
    spec = make_spec(problem, target, config)
    aux_ms = (time.perf_counter() - t_aux) * 1e3

    if print_name_only:
        return 0, [spec.kernel_name]

    lines = [report.echo_line(cmd.argv)]
    seed = prng.resolve_seed(environ)
    lines.append(report.seed_line(seed))
    st = layouts.storage_dtype(problem.dtype)
    dy_file, w_file = cmd.flags["dout_data"], cmd.flags["weights"]
    dy = _read_tensor(dy_file, layouts.dy_shape(problem), st, "-D") if dy_file else None
    w = _read_tensor(w_file, layouts.w_shape(problem), st, "-e") if w_file else None
    bias = str(cmd.flags["bias"]).strip() not in ("", "0")
    inputs = prng.generate_inputs(problem, seed, bias=bias, dy=dy, w=w)
    dump = int(cmd.flags["dump_output"]) != 0
    if dump:
        _dump("dump_wei.bin", inputs.w, lines)
        _dump("dump_dout.bin", inputs.dy, lines)

    dx = engine.run(spec, inputs.dy, inputs.w)
    if dump:
        _dump("dump_bwd_din_gpu.bin", dx, lines)

    timing = avg_ms = wall_ms = None
    if cmd.time:
        timing, wall_ms = time_engine(engine, spec, inputs.dy, inputs.w, cmd.iters)
        avg_ms = report.miopen_average_ms(timing.times_ms)
        if cmd.wall:
            lines.append(report.wall_line(wall_ms, aux_ms, 0.0))
        lines.append(report.algorithm_line())
        lines.append(report.kernel_time_line(avg_ms))
        lines.extend(report.stats_lines(problem, avg_ms))
    elif cmd.wall:
        lines.append(report.wall_ignored_line(cmd.wall))

    verdict = None
    if cmd.verify:
        ref = reference.dgrad_reference(problem, inputs.dy, inputs.w)
        verdict = reference.verify(problem, dx, ref)
        lines.append(report.verify_line(verdict))
    status = 0 if verdict is None or verdict.ok else EXIT_VERIFY_FAILED

    if as_json:
        rec = report.json_record(command=cmd.command_line(), problem=problem, spec=spec,
                                 backend=engine.name, seed=seed, timing=timing, avg_ms=avg_ms,
                                 wall_ms=wall_ms, verdict=verdict,
                                 status="ok" if status == 0 else "verify_failed")
        lines = [json.dumps(rec, sort_keys=True)]
    return status, lines


class DefaultRunGroup(click.Group):
    """A group whose default action is ``run``: an unknown first token starts the line."""

    def parse_args(self, ctx, args):
        if args and args[0] not in self.commands and args[0] not in ("--help", "--version"):
            args = ["run"] + list(args)
        return super().parse_args(ctx, args)


@click.group(PROG, cls=DefaultRunGroup)
@click.version_option(version=__version__, prog_name=PROG)
def cli():
    """MIOpen-compatible backward-data convolution solver.

    Run an MIOpenDriver line: dgrad-driver convfp16 -n 32 -c 64 ... -F 2 -t 1 -V 1
    """


@cli.command("run", context_settings=dict(ignore_unknown_options=True, allow_interspersed_args=True))
@click.option("--backend", type=click.Choice(BACKENDS), default="auto", show_default=True,
              help="Engine: auto picks hip, then cuda, then cpu.")
@click.option("--arch", default=None, help="Target arch preset (default: the engine's device; cpu for cpu).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON record instead of MIOpen's text.")
@click.option("--perf-config", "perf_config", default=None, help="Serialised PerfConfig \"a,b,...\".")
@click.option("--print-name-only", is_flag=True, help="Print the kernel name and exit.")
@click.argument("line", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def run_cmd(ctx, backend, arch, as_json, perf_config, print_name_only, line):
    """Run an MIOpenDriver conv line (backward data, -F 2) and print what MIOpenDriver prints."""
    try:
        status, lines = run_line(_split_line(line), backend=backend, arch=arch, as_json=as_json,
                                 perf_config=perf_config, print_name_only=print_name_only)
    except (UserError,) + USER_ERRORS as e:
        click.echo(f"{PROG}: error: {_one_line(e)}", err=True)
        ctx.exit(EXIT_USER_ERROR)
    for text in lines:
        click.echo(text)
    if status:
        ctx.exit(status)


try:  # solver subcommands (applicable, config) live in their own module
    from .solver_cmds import applicable_cmd, config_cmd
except ImportError:  # pragma: no cover - only while that module is absent
    pass
else:
    cli.add_command(applicable_cmd)
    cli.add_command(config_cmd)

try:  # fixture replay (replay) lives in its own module
    from .replay_cmd import replay_cmd
except ImportError:  # pragma: no cover - only while that module is absent
    pass
else:
    cli.add_command(replay_cmd)


def main(argv=None) -> int:
    """Console entry point; returns the exit status (click usage errors become one line)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        click.echo(cli.get_help(click.Context(cli, info_name=PROG)))
        return 0
    try:
        rv = cli.main(args=args, prog_name=PROG, standalone_mode=False)
    except click.exceptions.Exit as e:
        return e.exit_code
    except click.ClickException as e:
        click.echo(f"{PROG}: error: {_one_line(e.format_message())}", err=True)
        return e.exit_code
    except click.exceptions.Abort:
        click.echo(f"{PROG}: error: aborted", err=True)
        return 1
    except SystemExit as e:  # subcommands that exit directly
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return rv if isinstance(rv, int) else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
