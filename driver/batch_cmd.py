"""``dgrad-driver batch FILE``: run every MIOpenDriver line of a file, one summary row each.

FILE may be a MIOpen perf-model file (lines start with ``./bin/MIOpenDriver``) or a log
with ``MIOPEN_ENABLE_LOGGING_CMD`` output: everything on a line before the base argument
(``conv``, ``convfp16``, ``convbfp16`` ...) is ignored, a trailing comment (whitespace,
then ``#`` to the end of the line: ``bench/suite.txt``'s row labels) is dropped, and lines
without a base argument (blank lines, ``#`` comments, other log output) are skipped and
counted. FILE must be a regular UTF-8 text file of at most :data:`MAX_FILE_BYTES`; a byte-order
mark is dropped and lines end at "\\n" only (:func:`miopen_solver.text.text_lines`). Lines that ask for
another direction than backward data (``-F``/``--forw`` other than 2) are skipped with a
note; ``-S`` is ignored (the line runs with this solver whatever MIOpen used), and so are
``-s 1`` (no search) and ``-o 1`` (no dumps), each with a note in the line's row. A line
that cannot be split (an unclosed quote) is an ``error`` row with ``run``'s message.

Every runnable line is timed (its ``-i``, or ``--iters``) in one timing worker and, unless
its ``-V 0`` or ``--no-verify``, verified in one verification worker; both workers live for
the whole file and are restarted after a failure, which becomes that line's row.
``--batch-size N`` replaces every line's ``-n`` so a big file runs quickly on a CPU. A
plain run's config choice applies (perf-db winner, else the default; an unusable perf-db
is one warning line on stderr and the defaults are used). ``--max-lines N`` stops after N
lines have run (been timed); skipped, not-applicable and error rows are listed but do not
count. Before a line's workers start, their host memory (:mod:`miopen_solver.memory`) is
compared with what the host has; a line that cannot fit is an ``error`` row naming the
numbers and what would fit (``--batch-size``, ``--no-verify``).

Output: a heading (the file's command count), the table's header, then each line's row as
soon as the line has finished (flushed: a pipe shows it at once, a Ctrl-C keeps it), then
the summary. A row is aligned to the rows before it (a kernel name longer than the ones
before shifts the columns after it); ``--csv`` has every field.

Row status: ``ok``, ``verify-failed``, ``failed`` (a worker crashed, timed out or raised),
``not-applicable`` (e.g. NCHW or mixed layouts on a GPU target), ``skipped`` (not ``-F 2``)
and ``error`` (the line does not parse, its flags cannot be honoured, or it does not fit
the host's memory).
Exit status: 0 no row ``failed``/``verify-failed``/``error``; 1 otherwise; 2 bad input
(also a ``--csv`` file that cannot be written at the end: the rows are printed first).
"""

from __future__ import annotations

import re
import sys
from dataclasses import asdict, dataclass, replace

import click

from miopen_solver import memory
from miopen_solver.command import (BASE_DTYPES, INT_MAX, MAX_LAUNCHES, REJECTED_BASES, describe_directions,
                                   is_conv_flag, is_driver_program, parse, split_command)
from miopen_solver.errors import FileError, MiopenCommandError, PerfConfigError, PerfDbError
from miopen_solver.fileio import read_text
from miopen_solver.perfdb import PerfDb
from miopen_solver.solver import DgradSolver
from miopen_solver.text import text_lines

from . import report, workers
from .options import (EXIT_OK, EXIT_VERIFY_FAILED, Command, OutputError, UserError, arch_option, backend_option,
                      check_count, check_not_kept, check_not_stdout, check_output_file, count_option, file_error,
                      one_line, perfdb_label, perfdb_options, ref_option, run_and_print, timeout_option,
                      warmup_option, warn, write_csv_or_error)
from .run_cmd import (RunOptions, check_input_files, check_line, find_solution, for_target, nonfinite_input_notes,
                      resolve_device, resolve_reference, timing_summary, with_note)
from .tune_cmd import Progress

CSV_FIELDS = ("line", "status", "problem_key", "applicable", "kernel_name", "time_ms", "median_ms", "min_ms",
              "verified", "verify_error", "perf_config", "config_source", "note")
FAILING = ("failed", "verify-failed", "error")
TABLE = ("line", "problem_key", "applicable", "kernel_name", "time_ms", "verified", "status", "note")
"""The columns of a row's line."""
RAN = ("ok", "verify-failed", "failed")
"""Row states of a line that was timed (what ``--max-lines`` counts)."""
MAX_FILE_BYTES = 64 << 20
"""The largest FILE batch reads (64 MiB; MIOpen's perf-model files are a few KiB)."""
_TRAILING_COMMENT = re.compile(r"\s#.*$")
_BASE_WORD = re.compile(r"(?:^|\s)(" + "|".join(map(re.escape, sorted({*BASE_DTYPES, *REJECTED_BASES}, key=len,
                                                                       reverse=True))) + r")(?=\s|$)")
"""A base argument as a whitespace-separated word: where a line that cannot be split whole is
split from."""


@dataclass(slots=True)
class BatchRow:
    """One line of the file and what happened to it (see module docstring for status)."""

    line: int
    status: str
    problem_key: str = ""
    applicable: str = "-"            # yes | no | -
    kernel_name: str = ""
    time_ms: float | None = None
    median_ms: float | None = None
    min_ms: float | None = None
    verified: str = "-"              # OK | FAILED | off | -
    verify_error: float | None = None
    perf_config: str = ""
    config_source: str = ""
    note: str = ""

    def as_dict(self) -> dict:
        """Plain data (CSV-ready)."""
        return asdict(self)


@dataclass
class BatchOptions:
    """The options of ``dgrad-driver batch``."""

    backend: str = "auto"
    arch: str | None = None
    batch_size: int | None = None
    iters: int | None = None
    verify: bool = True
    csv: str | None = None
    timeout: float | None = None
    warmup: int = 1
    perfdb: str | None = None
    use_perfdb: bool = True
    ref: str = "auto"
    max_lines: int | None = None
    quiet: bool = False
    progress: bool | None = None


FIND_LOG_TAG = "[LogCmdFindConvolution]"
"""The tag of MIOpen's log line for a Find call: in Find mode the same problem's
``[LogCmdConvolution]`` line follows it, so the Find line is not run again."""


def command_tokens(text: str) -> list | None:
    """The tokens of a line from its base argument on, without a trailing ``# comment``
    (whitespace, then ``#`` onward), ``-S``/``--solution`` and its value; None when the
    line holds no MIOpenDriver conv command, or is a Find call's log line
    (:data:`FIND_LOG_TAG`). The line is split as ``run`` splits it
    (:func:`~miopen_solver.command.split_command`); what comes before the base argument is
    ignored, so a quote there (log text) does not matter.

    Raises:
        MiopenCommandError: the command itself cannot be split (an unclosed quote, a
            trailing backslash): ``run``'s error for the same line.
    """
    text = _TRAILING_COMMENT.sub("", text)
    base = _BASE_WORD.search(text)
    if base is not None and FIND_LOG_TAG in text[:base.start(1)]:     # however the prefix splits
        return None
    try:
        tokens = split_command(text)
    except MiopenCommandError:
        base = _BASE_WORD.search(text)
        if base is None:
            return None
        tokens = split_command(text[base.start(1):])
    start = next((i for i, t in enumerate(tokens) if t in BASE_DTYPES or t in REJECTED_BASES), None)
    if start is None:
        start = _mistyped_base(tokens)
        if start is None:
            return None
    tokens = tokens[start:]
    out, i = [], 0
    while i < len(tokens):
        if tokens[i] in ("-S", "--solution"):
            i += 2
            continue
        out.append(tokens[i])
        i += 1
    return out


_CONV_WORD = re.compile(r"conv\w*", re.IGNORECASE)


def _mistyped_base(tokens: list) -> int | None:
    """Where a line's conv command starts when its base argument is no known one: a ``conv...``
    word (any case) right after the MIOpenDriver program, or first on the line and followed by
    a conv flag. Such a line is a command with a bad base (``run`` refuses it; in a batch it is an
    error row), not a line without a command; other MIOpenDriver bases (``pool``, ``gemm``)
    and words in log text are not conv commands."""
    for i, t in enumerate(tokens[:-1]):
        if is_driver_program(t) and _CONV_WORD.fullmatch(tokens[i + 1]):
            return i + 1
    if len(tokens) > 1 and _CONV_WORD.fullmatch(tokens[0]) and is_conv_flag(tokens[1]):
        return 0
    return None


def file_commands(text: str) -> tuple:
    """``([(line number, tokens)], ignored)``: the conv commands of a file's text
    (:func:`command_tokens`), and the count of lines that hold none (blank lines and ``#``
    comments are not counted). A command that cannot be split has its
    :class:`MiopenCommandError` in place of the tokens (:func:`parse_tokens` raises it)."""
    commands, ignored = [], 0
    for n, raw in enumerate(text_lines(text), 1):
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        try:
            tokens = command_tokens(stripped)
        except MiopenCommandError as e:
            commands.append((n, e))
            continue
        if tokens is None:
            ignored += 1
            continue
        commands.append((n, [sys.intern(t) for t in tokens]))   # one copy of each distinct word: a
    return commands, ignored                                       # 64 MiB file's lines held at once


def parse_tokens(tokens, o: BatchOptions | None = None):
    """:func:`~miopen_solver.command.parse` of a :func:`file_commands` entry (any direction),
    with ``--batch-size`` and ``--iters`` applied when ``o`` is given.

    Raises:
        MiopenCommandError: the line's error (also one that could not be split).
    """
    if isinstance(tokens, MiopenCommandError):
        raise tokens
    return parse(_line_tokens(tokens, o) if o is not None else tokens, allow_any_direction=True)


def ignored_flag_notes(cmd) -> list:
    """A row's notes for the line's flags batch does not honour (``-S`` is dropped as the line
    is read): ``-s 1`` (no search: ``run`` searches first, ``tune`` tunes) and ``-o 1`` (no
    dump files), each as the line wrote it."""
    out = []
    if int(cmd.flags["search"]):
        out.append(f"'{cmd.given('search')}' ignored: batch runs no search (run or tune the line)")
    if int(cmd.flags["dump_output"]):
        out.append(f"'{cmd.given('dump_output')}' ignored: batch writes no dump files")
    return out


def _check_options(o: BatchOptions) -> None:
    # --batch-size and --iters become every line's -n and -i: MIOpenDriver's 32-bit int range,
    # launches bounded
    check_count("--batch-size", o.batch_size, 1)
    check_count("--iters", o.iters, 1, MAX_LAUNCHES)
    check_count("--max-lines", o.max_lines, 1)
    check_count("--warmup", o.warmup, 0, MAX_LAUNCHES)
    if o.csv is not None:
        check_output_file("--csv", o.csv)
        check_not_stdout("--csv", o.csv, "the batch table")


def read_batch_file(path: str, flag: str = "FILE") -> str:
    """The text of a file of command lines (``flag``: how the user gave it, ``FILE`` for
    ``batch``, ``--file`` for a campaign): a regular file of at most :data:`MAX_FILE_BYTES`, UTF-8.

    Raises:
        UserError: naming ``flag``, the path and what is allowed (a device such as /dev/zero
            or a FIFO would be read forever, so only regular files are opened).
    """
    try:
        return read_text(path, MAX_FILE_BYTES)
    except FileError as e:
        raise file_error(flag, e) from None


def _usable_perfdb(o: BatchOptions) -> bool:
    """Whether to look configs up in the perf-db: an unusable one is one warning, once."""
    if not o.use_perfdb:
        return False
    try:
        with PerfDb(o.perfdb) as db:
            db.check()
    except PerfDbError as e:
        warn(f"{perfdb_label(o.perfdb)} unusable: {e.reason}; using the default config")
        return False
    return True


def _line_tokens(tokens: list, o: BatchOptions) -> list:
    """A line's tokens with ``--batch-size`` and ``--iters`` applied."""
    if o.batch_size is not None:
        tokens = tokens + ["-n", str(o.batch_size)]
    if o.iters is not None:
        tokens = tokens + ["-i", str(o.iters)]
    return tokens


class _RowLines:
    """Rows printed one by one, aligned: a column is as wide as its header and its widest
    value so far; the line numbers, problem keys and kernel names are known before the
    first row (the lines are parsed and their solutions found up front, a few ms a line;
    :attr:`solutions` keeps them, by line number, for the rows to run), times as they come."""

    def __init__(self, commands: list, o: BatchOptions, device=None):
        self.line = max((n for n, _ in commands), default=0)
        self.key, self.kernel, self.time = 1, 1, 99999.0   # times below 1e5 ms keep the column
        self.solutions = {}
        for n, tokens in commands:
            try:
                cmd = parse_tokens(tokens, o)
                self.key = max(self.key, len(cmd.problem.problem_key()))
                if device is not None and cmd.flags["forw"] == 2:
                    cmd, _ = for_target(cmd, device.target)
                    sol = find_solution(cmd.problem, device, RunOptions(perfdb=o.perfdb, use_perfdb=o.use_perfdb))
                    self.solutions[n] = sol
                    self.kernel = max(self.kernel, len(sol.kernel_name))
            except (MiopenCommandError, PerfConfigError, UserError, ValueError):
                continue

    def _table(self, rows: list) -> list:
        widest = (self.line, "-" * self.key, "", "-" * self.kernel, self.time, "", "", "")
        return report.format_table(TABLE, [widest] + rows)

    def header(self) -> str:
        return self._table([])[0]

    def __call__(self, row: BatchRow) -> str:
        self.kernel = max(self.kernel, len(row.kernel_name))
        self.time = max(self.time, row.time_ms or 0.0)
        return self._table([(row.line, row.problem_key or "-", row.applicable, row.kernel_name or "-", row.time_ms,
                             row.verified, row.status, row.note)])[2]


def _memory_refusal(problem, solution, device, ref_kind, verify: bool, files: tuple, held: dict) -> tuple:
    """``(refusal, timing need, verification need)`` of one line: the refusal (None when it
    fits) names the memory needed and available and what fits (``--batch-size``,
    ``--no-verify``). Both workers live for the whole file: while the line is timed, the
    verification worker still holds the last line's inputs; while it is verified, the timing
    worker holds this line's. ``held``: what each worker holds now (given back as they move
    to this line)."""
    plan = memory.engine_plan(solution.spec)

    def needs_for(n, verify_it):
        p = problem.replace(N=n)
        t = memory.timing_need(p, plan, device.backend, files)
        needs, peaks = [t], [memory.Peak(t, (("verification worker between jobs", held["verification"]),))]
        if verify_it:
            needs.append(memory.verification_need(p, plan, device.backend, ref_kind, files=files))
            peaks.append(memory.Peak(needs[-1], (("timing worker between jobs", t.resident),)))
        return memory.side_by_side(peaks), needs
    refusal = workers.memory_refusal(needs_for, problem.N, n_flag="--batch-size",
                                     verify_flag="--no-verify" if verify else None, held=sum(held.values()))
    needs = needs_for(problem.N, verify)[1]
    return refusal, needs[0], needs[-1]


def _run_row(row: BatchRow, tokens: list, o: BatchOptions, device, ref_kind, timing_w, verify_w, seed,
             held: dict, known=None) -> None:
    """Run one line into ``row``; ``held``: host bytes each worker holds now (updated);
    ``known``: the line's solution when it was found already (:class:`_RowLines`)."""
    try:
        cmd = parse_tokens(tokens, o)
    except MiopenCommandError as e:
        row.status, row.note = "error", one_line(e)
        return
    problem = cmd.problem
    forw = int(cmd.flags["forw"])
    if forw != 2:
        row.status, row.note = "skipped", f"-F {forw}: {describe_directions(forw)}, not backward data"
        return
    cmd, math_note = for_target(cmd, device.target)     # -M 0 where there is no TF32: IEEE fp32
    problem = cmd.problem
    row.problem_key = problem.problem_key()
    try:
        check_line(cmd)
        check_input_files(cmd)
    except UserError as e:
        row.status, row.note = "error", one_line(e)
        return
    verdict = DgradSolver().is_applicable(problem, device.target)
    if not verdict.ok:
        row.status, row.applicable = "not-applicable", "no"
        row.note = "; ".join(f"{r.code}: {r.message}" for r in verdict.reasons)
        return
    row.applicable = "yes"
    try:
        solution = with_note(known or find_solution(problem, device,
                                                    RunOptions(perfdb=o.perfdb, use_perfdb=o.use_perfdb)), math_note)
    except (PerfConfigError, ValueError) as e:
        row.status, row.note = "error", one_line(e)
        return
    for text in solution.warnings:
        warn(text)
    row.kernel_name, row.perf_config = solution.kernel_name, solution.perf_config.serialize()
    nonfinite = nonfinite_input_notes(cmd) if o.verify and cmd.verify else []
    notes = [x for x in (math_note, *ignored_flag_notes(cmd), *nonfinite) if x]
    if notes:                       # a failure below replaces them with its reason
        row.note = "; ".join(notes)
    row.config_source = solution.source
    f = cmd.flags
    job_args = dict(solution=solution.to_record(), backend=device.backend,
                    seed=seed, bias=cmd.bias, dy_file=f["dout_data"] or None,
                    w_file=f["weights"] or None)
    verify = bool(o.verify and cmd.verify)
    refusal, t_need, v_need = _memory_refusal(problem, solution, device, ref_kind, verify,
                                              (bool(job_args["dy_file"]), bool(job_args["w_file"])), held)
    if refusal:
        row.status, row.note = "error", one_line(refusal)
        return
    graph = int(f["use_hip_graph"]) != 0      # the line's -J 1: graph replays, as run -t 1 times it
    res = timing_w.run(workers.make_job("timing", **job_args, iters=cmd.iters, warmup=o.warmup, graph=graph))
    held["timing"] = t_need.resident if res.ok else 0       # a failed worker is gone
    if not res.ok:
        row.status, row.note = "failed", res.reason
        return
    s = timing_summary(res.record)
    row.time_ms, row.median_ms, row.min_ms = s["average_ms"], s["median_ms"], s["min_ms"]
    if not verify:
        row.status, row.verified = "ok", "off"
        return
    res = verify_w.run(workers.make_job("verification", **job_args, verify=True, reference=ref_kind))
    held["verification"] = v_need.resident if res.ok else 0
    if not res.ok:
        row.status, row.note = "failed", res.reason
        return
    v = res.record["verdict"]
    row.verify_error = float(v["error"])
    if v["ok"]:
        row.status, row.verified = "ok", "OK"
    else:
        row.status, row.verified = "verify-failed", "FAILED"
        row.note = "; ".join([f"{report.cpp_float(v['error'])} > {report.cpp_float(v['tolerance'])} on "
                              f"{res.record['reference']} reference", *nonfinite])


def _failing(counts: dict) -> int:
    """How many rows so far are ``failed``, ``verify-failed`` or ``error`` (``counts``: rows
    per status)."""
    return sum(counts.get(k, 0) for k in FAILING)


def batch_file(path: str, opts: BatchOptions | None = None, *, stderr=None, emit=None, **kw) -> tuple:
    """Run every MIOpenDriver line of ``path``. Returns ``(exit_status, stdout_lines)``.

    With ``emit`` (a callable taking one line), the heading, the table's header and each
    line's row go to ``emit`` as soon as they are final -- a pipe or a Ctrl-C keeps them --
    and the returned lines are the rest (the summary, the CSV line); without it every line
    is returned, in the same order.

    Raises:
        UserError, RuntimeUnavailable, ValueError: bad input (unreadable file, bad option,
            unavailable backend), before any line runs.
    """
    from miopen_solver import prng
    o = opts or BatchOptions(**kw)
    _check_options(o)
    check_not_kept("--csv", o.csv, {"FILE, the lines being run": path, "the perf-db": PerfDb(o.perfdb).path})
    # a bad $DGRAD_WORKER_TIMEOUT or $DGRAD_WORKER_STARTUP_TIMEOUT is bad input, before any line
    o = replace(o, timeout=workers.job_timeout(o.timeout))
    text = read_batch_file(path)
    device = resolve_device(o.backend, o.arch, o.timeout)
    if device.compile_only:
        raise UserError(f"--arch {o.arch}: batch needs a device to run on and there is no {o.arch} device here; "
                        f"use --backend cpu to run the lines on the CPU engine")
    ref_kind = resolve_reference(o.ref, device)
    seed = prng.resolve_seed()
    o = replace(o, use_perfdb=_usable_perfdb(o))

    commands, ignored = file_commands(text)

    err = stderr if stderr is not None else sys.stderr
    show = (o.progress if o.progress is not None else getattr(err, "isatty", lambda: False)()) and not o.quiet
    limit = o.max_lines if o.max_lines is not None else len(commands)
    progress = Progress(err, min(limit, len(commands)), show, label="batch")
    row_line = _RowLines(commands, o, device)
    lines = []
    say = emit if emit is not None else lines.append
    say(f"Batch {path}: {len(commands)} commands on {device.target.arch} ({device.backend}, {device.name})"
        + (f", -n {o.batch_size}" if o.batch_size else "") + (f", --max-lines {o.max_lines}" if o.max_lines else ""))
    say(row_line.header())
    # the counts are kept as the rows come: a per-row pass over the rows so far made a file's
    # time grow with the square of its length
    rows, ran, held, counts = [], 0, {"timing": 0, "verification": 0}, {}
    with workers.Worker("timing", timeout=o.timeout) as tw, workers.Worker("verification", timeout=o.timeout) as vw:
        for n, tokens in commands:
            if ran >= limit:
                break
            progress.update(ran, _failing(counts), None, f"line {n}")
            row = BatchRow(line=n, status="pending")
            _run_row(row, tokens, o, device, ref_kind, tw, vw, seed, held, row_line.solutions.get(n))
            rows.append(row)
            counts[row.status] = counts.get(row.status, 0) + 1
            ran += row.status in RAN
            progress.clear()
            say(row_line(row))
        progress.update(ran, _failing(counts), None)
    progress.finish()

    summary = ", ".join(f"{counts[k]} {k}" for k in ("ok", "verify-failed", "failed", "not-applicable",
                                                      "skipped", "error") if counts.get(k))
    lines.append(f"Summary: {summary or 'no commands'}"
                 + (f"; {ignored} lines without a MIOpenDriver conv command (or a Find call's log line) ignored"
                    if ignored else ""))
    if o.csv is not None:
        errors = []
        n = write_csv_or_error(o.csv, CSV_FIELDS, [r.as_dict() for r in rows], errors)
        if errors:
            raise OutputError(errors[0], lines)
        lines.append(f"Wrote {n} rows to {o.csv}")
    status = EXIT_VERIFY_FAILED if _failing(counts) else EXIT_OK
    return status, lines


@click.command("batch", cls=Command)
@backend_option
@arch_option(without_device="an error (batch runs every line; use --backend cpu to simulate the target)")
@count_option("--batch-size", 1, default=None, help=f"Replace every line's -n with N (1 to {INT_MAX}).")
@count_option("--iters", 1, MAX_LAUNCHES, default=None, help=f"Replace every line's -i with N (1 to {MAX_LAUNCHES}).")
@click.option("--no-verify", "no_verify", is_flag=True, help="Time only (as if every line had -V 0).")
@click.option("--csv", "csv_path", default=None, metavar="PATH", help="Write the rows to a CSV file.")
@count_option("--max-lines", 1, default=None,
              help="Stop after N lines have run (skipped, not-applicable and error lines do not count).")
@ref_option
@click.option("--quiet", is_flag=True, help="No progress line on stderr.")
@warmup_option
@timeout_option
@perfdb_options
@click.argument("file", metavar="FILE")
@click.pass_context
def batch_cmd(ctx, backend, arch, batch_size, iters, no_verify, csv_path, max_lines, ref, quiet, warmup,
              timeout, perfdb, no_perfdb, file):
    """Run every MIOpenDriver line of FILE (perf-model file or MIOPEN_ENABLE_LOGGING_CMD log)."""
    opts = BatchOptions(backend=backend, arch=arch, batch_size=batch_size, iters=iters, verify=not no_verify,
                        csv=csv_path, timeout=timeout, warmup=warmup, perfdb=perfdb, use_perfdb=not no_perfdb,
                        ref=ref, max_lines=max_lines, quiet=quiet)
    run_and_print(ctx, batch_file, file, opts, stream=True)


__all__ = ["BatchOptions", "BatchRow", "batch_file", "batch_cmd", "command_tokens", "file_commands", "parse_tokens"]
