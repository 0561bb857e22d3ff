"""``dgrad-driver replay``: replay regression fixtures and report what moved.

Usage::

    dgrad-driver replay [PATHS...] [--backend cpu|cuda|hip] [--only PATTERN] [--update-golden]
                        [--failures-only]

PATHS are fixture files (``*.jsonl``) or directories searched for them (default
``fixtures``). Every fixture is recomputed (:func:`miopen_solver.fixtures.replay`) and
judged against its golden; a table shows each one as passed, drifted (with every field
that moved, golden -> now) or failed (with why), then a summary.

``--backend cpu`` (default) runs the numerics on the CPU engine and checks the rms error
against the golden's band; ``cuda``/``hip`` run them on the GPU (NHWC problems only; the
others are skipped with a note) and check them against the tolerance. GPU numerics run in a
*verification* worker process, as a run's do (``--timeout`` per fixture; a crash or a hang
fails that fixture, and the next one gets a fresh worker); the driver opens no GPU context.
CPU numerics run in the driver's process, so ``--timeout`` with ``--backend cpu`` bounds
nothing: an ``Info:`` line says it is ignored.
``--update-golden`` (CPU only) writes the new expectations of drifted fixtures into their
files and prints what moved; failed fixtures are never written.

Exit status: 0 everything passed (or, with ``--update-golden``, every drift was written);
1 a fixture failed or drifted; 2 bad input (missing path, malformed fixture file, no
fixture matching ``--only``, unavailable backend), reported as one line
``dgrad-driver: error: ...`` on stderr. The regenerate hint names the paths (and
``--only``) this replay was given.
"""

from __future__ import annotations

import shlex
import time

import click

from miopen_solver import fixtures as fx
from miopen_solver.errors import FileError, RuntimeUnavailable, shown_path
from miopen_solver.fileio import check_writable
from miopen_solver.reference import Verdict
from miopen_solver.runtime import get_engine

from . import workers
from .options import Command, UserError, error_line, timeout_option
DEFAULT_PATH = "fixtures"
CPU_TIMEOUT_NOTE = ("Info: '--timeout {timeout}' is ignored with --backend cpu: the CPU numerics run in this "
                    "process; --timeout bounds the verification worker of --backend cuda or hip, per fixture")
HASH_WIDTH = 12


class WorkerNumerics:
    """The numerics of fixtures on a GPU, run in a verification worker (``name``,
    ``target`` and ``verify`` as :class:`~miopen_solver.runtime.base.Engine` has them)."""

    def __init__(self, backend: str, timeout: float):
        from .run_cmd import resolve_device
        device = resolve_device(backend, None, timeout)
        self.name, self.target = device.backend, device.target
        self._worker = workers.Worker("verification", timeout=timeout)

    def verify(self, solution, seed: int) -> Verdict:
        """One launch verified against the CPU reference in the worker.

        Raises:
            RuntimeError: the worker raised, crashed or timed out (its reason).
        """
        res = self._worker.run(workers.make_job("verification", solution=solution, backend=self.name, seed=seed,
                                                verify=True, reference="cpu"))
        if not res.ok:
            raise RuntimeError(res.reason)
        return Verdict(**res.record["verdict"])

    def close(self) -> None:
        self._worker.close()


def _engine(backend: str, timeout: float | None):
    """The CPU engine in this process, or a GPU's numerics through a worker."""
    if backend == "cpu":
        return get_engine("cpu")
    return WorkerNumerics(backend, workers.job_timeout(timeout))


def _fail(message: str) -> None:
    click.echo(error_line(message), err=True)
    raise SystemExit(2)


def _elide(a: str, b: str) -> tuple:
    """Two long strings cut down to where they differ, one token of context each side
    (tokens split on spaces, or on ``_`` for kernel names)."""
    sep = " " if " " in a or " " in b else "_"
    ta, tb = a.split(sep), b.split(sep)
    pre = 0
    while pre < min(len(ta), len(tb)) and ta[pre] == tb[pre]:
        pre += 1
    suf = 0
    while suf < min(len(ta), len(tb)) - pre and ta[-1 - suf] == tb[-1 - suf]:
        suf += 1

    def cut(t):
        lo, hi = max(0, pre - 1), len(t) - max(0, suf - 1)
        return ("..." + sep if lo > 0 else "") + sep.join(t[lo:hi]) + (sep + "..." if hi < len(t) else "")
    return cut(ta), cut(tb)


def _show_pair(expected, actual, key: str) -> str:
    a, b = _show(expected, key), _show(actual, key)
    if (isinstance(expected, str) and isinstance(actual, str) and not key.endswith("sha256")
            and max(len(a), len(b)) > 60):
        a, b = _elide(a, b)
    return f"{a} -> {b}"


def _show(value, key: str) -> str:
    if value is None:
        return "(absent)"
    if isinstance(value, str) and key.endswith("sha256"):
        return value[:HASH_WIDTH]
    if isinstance(value, str):
        return value
    return str(value).replace("'", '"') if isinstance(value, (list, dict)) else repr(value)


def drift_lines(result) -> list:
    """Readable lines for one result: failures, then each drift (golden -> now), then notes."""
    out = [f"FAIL {msg}" for msg in result.failures]
    for d in result.drifts:
        if d.kind == "missing":
            out.append("no golden yet")
        elif d.kind == "numeric":
            out.append(f"{d.path}: {d.expected} -> {d.actual} (outside the band: "
                       f"x{fx.BAND_RATIO.get(fx.dtype_of(result.fixture.command), 4.0)} of the golden)")
        else:
            out.append(f"{d.path}: {_show_pair(d.expected, d.actual, d.path)}")
    out += [f"note: {n}" for n in result.notes]
    return out


def _table(results, failures_only: bool) -> list:
    width = max([len(r.fixture.id) for r in results] + [7])
    lines = [f"{'FIXTURE':<{width}}  {'STATUS':<7}  {'SEC':>5}  WHAT CHANGED"]
    for r in results:
        if failures_only and r.status == fx.PASSED:
            continue
        details = drift_lines(r) if r.status != fx.PASSED else [n for n in r.notes]
        first = details[0] if details else ""
        lines.append(f"{r.fixture.id:<{width}}  {r.status:<7}  {r.seconds:5.2f}  {first}".rstrip())
        pad = " " * (width + 2 + 7 + 2 + 5 + 2)
        lines += [pad + d for d in details[1:]]
    return lines


def regenerate_command(paths, pattern: str | None = None) -> str:
    """The ``--update-golden`` command for the same paths (and ``--only``) as this replay."""
    only = f" --only {shlex.quote(pattern)}" if pattern else ""
    return f"dgrad-driver replay {' '.join(shlex.quote(str(p)) for p in paths)}{only} --update-golden"


def summary_lines(results, backend: str, seconds: float, n_files: int, command: str | None = None) -> list:
    """The summary: counts, and the regenerate hint (``command``, default
    :data:`miopen_solver.fixtures.REGENERATE_COMMAND`) when something drifted."""
    command = command or fx.REGENERATE_COMMAND
    count = {s: sum(r.status == s for r in results) for s in (fx.PASSED, fx.DRIFTED, fx.FAILED)}
    lines = [f"replayed {len(results)} fixtures from {n_files} file(s) on {backend} in {seconds:.1f} s: "
             f"{count[fx.PASSED]} passed, {count[fx.DRIFTED]} drifted, {count[fx.FAILED]} failed"]
    moved = fx.moved_fields(results)
    if moved:
        lines.append("moved: " + ", ".join(f"{path} ({n})" for path, n in moved))
    if fx.only_kernel_body_moved(results):
        lines.append("Only source_sha256 moved (defines, names, configs, verdicts and numerics are unchanged): "
                     "a kernel text (miopen_solver/kernels/*.cu) changed. If that is intended, regenerate the golden with: "
                     f"{command}")
    elif fx.only_hashes_moved(results):
        moved = sorted({r.fixture.id for r in results
                        if any(d.path.endswith("defines_sha256") for d in r.drifts)})
        lines.append(f"Only emission hashes moved; the emitted defines changed for {len(moved)} fixture(s) "
                     f"(check that the change was meant to touch exactly these kernels). If intended, "
                     f"regenerate the golden with: {command}")
    else:
        if count[fx.FAILED]:
            lines.append(f"{count[fx.FAILED]} fixture(s) failed: the code computes wrong or worse results for "
                         f"them; fix it (--update-golden never writes a failed fixture).")
        if count[fx.DRIFTED]:
            lines.append(f"If every drift above is intended, regenerate the golden with: {command}")
    return lines


UPDATE_ALLOWED = "fixture files that can be replaced (writable, in a writable directory), or no --update-golden"


def _check_rewritable(paths) -> None:
    """``--update-golden`` rewrites every file of the chosen fixtures: each must be
    replaceable (:func:`miopen_solver.fileio.check_writable`), checked before anything is
    replayed, so one read-only file neither costs a whole replay nor leaves the others
    rewritten and it not (exit 2, nothing written)."""
    for path in paths:
        try:
            check_writable(path)
        except FileError as e:
            _fail(f"--update-golden {shown_path(path)}: {e.reason}; allowed: {UPDATE_ALLOWED}")


@click.command("replay", cls=Command)
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--backend", type=click.Choice(("cpu", "cuda", "hip")), default="cpu", show_default=True,
              help="Engine for the numerics: cpu (checked against the golden band) or a GPU "
                   "(NHWC problems, checked against the tolerance).")
@click.option("--only", "pattern", default=None, metavar="PATTERN",
              help="Replay fixtures whose id matches: a shell pattern (*, ?, []) or a substring.")
@click.option("--update-golden", "update", is_flag=True,
              help="Write the new expectations of drifted fixtures into their files (CPU only) "
                   "and print what moved.")
@click.option("--failures-only", is_flag=True, help="List only fixtures that did not pass.")
@timeout_option
def replay_cmd(paths, backend, pattern, update, failures_only, timeout):
    """Replay regression fixtures (default: ./fixtures) and exit non-zero on any drift.

    Exit 0 all passed (or all drifts written with --update-golden), 1 failed or drifted,
    2 bad input.
    """
    paths = list(paths) or [DEFAULT_PATH]
    if pattern is not None and not pattern.strip():     # '' would match every id, as no --only does
        _fail(f"--only {pattern!r}: an empty pattern; allowed: a substring of a fixture id, or a shell pattern "
              f"(*, ?, []), or no --only for every fixture")
    if update and backend != "cpu":
        _fail(f"--update-golden needs --backend cpu: the golden numerics are CPU results (got {backend})")
    try:
        files = fx.fixture_files(paths)
        fixtures = fx.load(paths)
    except fx.FixtureError as e:
        _fail(str(e))
    chosen = fx.select(fixtures, pattern)
    if not chosen:
        where = ", ".join(str(f) for f in files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
        if not pattern:
            _fail(f"{where}: no fixtures; allowed: fixture files of JSON Lines, one fixture per line "
                  "(fixtures/README.md)")
        if not fixtures:
            _fail(f"no fixture id matches {pattern!r} in {where}")
        _fail(f"--only {pattern!r}: no fixture id matches in {where}; allowed: a substring of a fixture id, or a "
              f"shell pattern (*, ?, []) matching a whole id (e.g. {fixtures[0].id!r})")
    if update:
        _check_rewritable(sorted({f.path for f in chosen}))
    try:
        engine = _engine(backend, timeout)
    except (RuntimeUnavailable, UserError, ValueError) as e:
        _fail(str(e))
    if timeout is not None and backend == "cpu":
        click.echo(CPU_TIMEOUT_NOTE.format(timeout=f"{timeout:g}"))

    t0 = time.perf_counter()
    try:
        results = [fx.replay(f, engine) for f in chosen]
    finally:
        if isinstance(engine, WorkerNumerics):
            engine.close()
    elapsed = time.perf_counter() - t0
    n_files = len({r.fixture.path for r in results}) if results else len(files)

    if not update:
        for line in _table(results, failures_only):
            click.echo(line)
        click.echo("")
        for line in summary_lines(results, engine.name, elapsed, n_files, regenerate_command(paths, pattern)):
            click.echo(line)
        bad = any(r.status != fx.PASSED for r in results)
        raise SystemExit(1 if bad else 0)

    try:  # write first: what is printed after can no longer stop the update half-way
        updated, kept = fx.update_golden(results)
    except (fx.FixtureError, ValueError) as e:
        _fail(str(e))
    if not updated and not kept:
        click.echo(f"golden up to date: {len(results)} fixtures replayed on {engine.name} in {elapsed:.1f} s, "
                   f"nothing moved")
        raise SystemExit(0)
    for group, title in ((updated, f"updated the golden of {len(updated)} fixture(s):"),
                         (kept, f"NOT updated, {len(kept)} fixture(s) failed (fix them first; "
                                f"their golden is kept):")):
        if group:
            click.echo(title)
        for r in group:
            click.echo(f"  {r.fixture.id} ({r.fixture.path}:{r.fixture.line})")
            click.echo("".join(f"    {line}\n" for line in drift_lines(r) if not line.startswith("note:")),
                       nl=False)
    moved = fx.moved_fields(updated)
    if moved:
        click.echo("moved: " + ", ".join(f"{path} ({n})" for path, n in moved))
    click.echo(f"{len(results)} fixtures replayed on {engine.name} in {elapsed:.1f} s: {len(updated)} updated, "
               f"{len(kept)} failed, {len(results) - len(updated) - len(kept)} unchanged")
    raise SystemExit(1 if kept else 0)


__all__ = ["drift_lines", "regenerate_command", "replay_cmd", "summary_lines"]
