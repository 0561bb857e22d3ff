"""``dgrad-driver tune <line>``: sweep valid configs, rank them, verify the best, store the winner.

1. The candidates are :meth:`DgradSolver.search` (valid configs, one per distinct kernel,
   the default first; ``--split-k-reduce atomic|workspace`` sets every split-K candidate's
   reduction, to compare the two; ``--split-k-reduce stream`` keeps the stream-K candidates,
   refused where none is valid). ``--max-configs N`` keeps the default plus N-1 configs
   evenly spaced over the search order, so a bounded sweep still spans every tile shape.
2. Each candidate is compiled and timed (warm-up, then ``-i`` launches) in the *timing*
   worker: one process times them one after another and is restarted after a failure,
   so a crash, a hang (``--timeout``) or an exception loses only that config, which
   becomes a failed row with its reason. ``--time-budget S`` stops starting new configs
   after S seconds. A progress line goes to stderr when it is a terminal (not with
   ``--quiet``).
3. The fastest ``--verify-top N`` (MIOpen's average) are verified in the *verification*
   worker, after the timing worker has ended. The winner is the fastest config that
   verified (the fastest timed one with ``--verify-top 0``).
4. The top ``--top N`` are printed; ``--csv PATH`` writes every row (or the top
   ``--csv-top N``); the winner goes to the perf-db (``--perfdb PATH``; ``--no-perfdb``
   skips it), where a later plain run of the same line finds it. The perf-db keeps the
   faster of an existing record and the new winner.

Text output is printed as it happens: the heading before the sweep, one line per config
when it has been timed (``Timed <config>: ...`` or ``Failed <config>: <reason>``) and when
it has been verified (``Verified ...`` / ``Not verified ...``), flushed, so a pipe shows
them at once and a Ctrl-C keeps them; then the summary, the table and the winner.

Exit status: 0 a winner was found; 1 no config timed and verified; 2 bad input (checked
before the sweep starts: options, the line, a ``--csv`` path that cannot be written, a
perf-db that cannot be written, workers that would not fit the host's memory), or the CSV
or perf-db write failing after the sweep (the results are printed first, then one error
line); 3 never (worker failures are rows).
"""

from __future__ import annotations

import sys
import time
from dataclasses import asdict, dataclass, replace

import click

from miopen_solver import SOLVER_NAME, memory, prng
from miopen_solver.command import MAX_LAUNCHES
from miopen_solver.config import SPLIT_K_REDUCE
from miopen_solver.errors import PerfDbError
from miopen_solver.heuristics import sample_configs, stream_k_reason
from miopen_solver.perfdb import PerfDb
from miopen_solver.solver import DgradSolver
from miopen_solver.text import json_text

from . import report, workers
from .campaign_cli import campaign_options, wants_campaign
from .options import (EXIT_OK, EXIT_VERIFY_FAILED, LINE_SETTINGS, PERFDB_ALLOWED, Command, OutputError, UserError,
                      arch_option, backend_option, check_count, check_not_kept, check_not_stdout, check_output_file,
                      check_seconds, count_type, json_option, perfdb_label, perfdb_options, ref_option, run_and_print,
                      seconds_callback, split_line, timeout_option, warmup_option, warn, write_csv_or_error)
from .run_cmd import (check_applicable, check_input_files, for_target, graph_on_cpu_note, nonfinite_input_notes,
                      parse_line, resolve_device, resolve_reference, unhonoured_flag_notes)

CSV_FIELDS = ("rank", "status", "average_ms", "median_ms", "min_ms", "gflops", "verified", "verify_error",
              "perf_config", "split_k", "split_k_reduce", "lds_k_outer", "kernel_name", "compile_ms", "failure",
              "exit_code", "signal", "reason")


@dataclass
class TuneRow:
    """One swept config and what happened to it (times in ms; None = not measured)."""

    index: int
    perf_config: str
    kernel_name: str
    split_k: int
    lds_k_outer: int                 # the value the kernel runs (-1 resolved; 2 = the direct stage32 path)
    split_k_reduce: str = "none"      # none | atomic | workspace
    schedule: str = ""               # the kernel schedule's slug (config --json's spec.schedule)
    status: str = "pending"          # "ok" | "failed" | "skipped" (not started: the time budget ran out)
    average_ms: float | None = None
    median_ms: float | None = None
    min_ms: float | None = None
    gflops: float | None = None
    compile_ms: float | None = None
    failure: str = ""                # raised | crashed | timeout
    exit_code: int | None = None
    signal: str | None = None
    reason: str = ""
    verified: bool | None = None
    verify_error: float | None = None
    rank: int | None = None

    def as_dict(self) -> dict:
        """Plain data (JSON- and CSV-ready)."""
        return asdict(self)


def select_configs(candidates: list, max_configs: int | None) -> list:
    """``candidates`` (a search order, the default first) when ``max_configs`` is None or
    covers them all, else the stratified sample a campaign takes
    (:func:`~miopen_solver.heuristics.sample_configs`): the default, then round-robin over
    the kernel schedules and their tile shapes, in search order."""
    return sample_configs(list(candidates), max_configs)


class Progress:
    """A one-line progress display on a stream (``\\r``-rewritten); silent when disabled."""

    def __init__(self, stream, total: int, enabled: bool, label: str = "tune"):
        self.stream, self.total, self.enabled, self.label = stream, total, enabled, label
        self._width = 0

    def update(self, done: int, failed: int, best_ms: float | None, current: str = "") -> None:
        """Rewrite the line: ``done`` of ``total``, failures so far, best time, current item."""
        if not self.enabled:
            return
        best = f"best {best_ms:.6f} ms" if best_ms is not None else "best -"
        text = f"{self.label} [{done:>{len(str(self.total))}}/{self.total}] failed {failed}  {best}  {current}"
        pad = max(0, self._width - len(text))
        self._width = len(text)
        self.stream.write("\r" + text + " " * pad)
        self.stream.flush()

    def clear(self) -> None:
        """Erase the line (before a row is printed on the same terminal); the next
        :meth:`update` draws it again."""
        if self.enabled and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0

    def finish(self) -> None:
        """End the line (a newline) when anything was shown."""
        if self.enabled and self._width:
            self.stream.write("\n")
            self.stream.flush()


@dataclass
class TuneOptions:
    """The options of ``dgrad-driver tune`` (see module docstring)."""

    backend: str = "auto"
    arch: str | None = None
    top: int = 5
    verify_top: int = 3
    csv: str | None = None
    csv_top: int | None = None
    max_configs: int | None = None
    time_budget: float | None = None
    quiet: bool = False
    progress: bool | None = None      # None: when stderr is a terminal
    timeout: float | None = None
    warmup: int = 1
    perfdb: str | None = None
    store: bool = True
    ref: str = "auto"
    as_json: bool = False
    list_only: bool = False
    environ: dict | None = None
    force_store: bool = False         # replace the perf-db record even when it is faster (MIOpen's DB_UPDATE)
    split_k_reduce: str | None = None  # every split-K candidate's reduction (None: the solver's rule)


def _check_options(o: TuneOptions) -> None:
    """Everything that can be wrong with the options, before the sweep starts."""
    for flag, value, low in (("--top", o.top, 1), ("--verify-top", o.verify_top, 0),
                             ("--csv-top", o.csv_top, 1), ("--max-configs", o.max_configs, 1)):
        check_count(flag, value, low)
    check_count("--warmup", o.warmup, 0, MAX_LAUNCHES)
    if o.split_k_reduce is not None and o.split_k_reduce not in SPLIT_K_REDUCE:
        raise UserError(f"--split-k-reduce {o.split_k_reduce}: allowed: {', '.join(SPLIT_K_REDUCE)}")
    if o.time_budget is not None:
        check_seconds(o.time_budget, "--time-budget")
    if o.csv_top is not None and o.csv is None:
        raise UserError(f"--csv-top {o.csv_top}: needs --csv PATH")
    if o.list_only and o.csv is not None:      # it wrote nothing, silently
        raise UserError(f"--csv {o.csv}: --list times nothing, so there is no CSV to write; allowed: --csv "
                        f"without --list (--list --json prints the configs as JSON)")
    if o.csv is not None:
        check_output_file("--csv", o.csv)
        check_not_stdout("--csv", o.csv, "the tuning report")
        check_not_kept("--csv", o.csv, {"the perf-db": PerfDb(o.perfdb).path})


def _check_perfdb(o: TuneOptions) -> None:
    """The perf-db the winner goes to can be written (checked before the sweep)."""
    if not o.store:
        return
    try:
        with PerfDb(o.perfdb) as db:
            db.check(write=True)
    except PerfDbError as e:
        raise UserError(f"{perfdb_label(o.perfdb)}: {e.reason}; {PERFDB_ALLOWED}") from None


def _store(o: TuneOptions, problem, device, winner) -> dict:
    """Write the winner to the perf-db under MIOpen's key (:meth:`ConvProblem.miopen_db_key`;
    given as :meth:`ConvProblem.problem_key`, so a record under the legacy ``-`` spelling that
    runs also read is replaced, not kept beside it), with its time, the device and the
    product version; the record of what happened (``error`` set when the write failed)."""
    from miopen_solver.provenance import product_version
    db = PerfDb(o.perfdb)
    key = problem.problem_key()
    try:
        with db:
            wrote = db.update(key, device.perfdb_arch, SOLVER_NAME, winner.perf_config, winner.average_ms,
                              force=o.force_store, device=device.name, product_version=product_version())
            rec = db.get(key, device.perfdb_arch, SOLVER_NAME)
    except PerfDbError as e:
        return {"path": str(db.path), "written": False, "arch": device.perfdb_arch, "perf_config": None,
                "time_ms": None, "error": f"{perfdb_label(o.perfdb)}: cannot store the winner: {e.reason}"}
    return {"path": str(db.path), "written": wrote, "arch": device.perfdb_arch, "perf_config": rec.values,
            "time_ms": rec.time_ms, "error": None}


def _time_configs(rows, solutions, job_args, iters, o: TuneOptions, problem, progress, say,
                  graph: bool = False) -> tuple:
    """Time every row in one (restarted on failure) timing worker (``graph``: replays of a
    captured graph, the line's ``-J 1``, where the engine captures graphs); ``say`` gets each
    row's line as it finishes. Returns ``(timed, budget_hit, seconds)``."""
    t0 = time.perf_counter()
    timed, budget_hit, failed, best = 0, False, 0, None
    flops = problem.flops
    with workers.Worker("timing", timeout=o.timeout) as w:
        for row in rows:
            if timed and o.time_budget is not None and time.perf_counter() - t0 >= o.time_budget:
                budget_hit = True
                break
            progress.update(timed, failed, best, row.perf_config)
            job = workers.make_job("timing", **job_args, solution=solutions[row.perf_config], iters=iters,
                                   warmup=o.warmup, graph=graph)
            res = w.run(job)
            timed += 1
            if res.ok:
                s = _summary(res.record["times_ms"])
                row.status = "ok"
                row.average_ms, row.median_ms, row.min_ms = s
                row.gflops = flops / s[0] / 1e6 if s[0] > 0 else None
                row.compile_ms = res.record.get("compile_ms")
                best = row.average_ms if best is None else min(best, row.average_ms)
            else:
                failed += 1
                row.status, row.failure, row.reason = "failed", res.failure, res.reason
                row.exit_code, row.signal = res.exit_code, res.signal
            progress.clear()
            say(_timed_line(row))
        progress.update(timed, failed, best)
    progress.finish()
    return timed, budget_hit, time.perf_counter() - t0


def _check_memory(problem, solutions, device, o: TuneOptions, ref_kind, files) -> None:
    """The sweep's workers (the timing worker, then the verification worker) fit the host's
    memory for every config, checked before the sweep (:func:`driver.workers.memory_refusal`).

    Raises:
        UserError: naming the memory needed and available and what fits.
    """
    plans = {memory.engine_plan(sol.spec) for sol in solutions.values()}

    def needs_for(n, verify):
        p = problem.replace(N=n)
        needs = [max((memory.timing_need(p, plan, device.backend, files) for plan in plans), key=lambda x: x.host)]
        if verify and o.verify_top:
            needs.append(max((memory.verification_need(p, plan, device.backend, ref_kind, files=files)
                              for plan in plans), key=lambda x: x.host))
        return memory.one_after_another(needs)
    refusal = workers.memory_refusal(needs_for, problem.N, verify_flag="--verify-top 0" if o.verify_top else None)
    if refusal:
        raise UserError(refusal)


def _timed_line(row: TuneRow) -> str:
    """The line of a timed row: ``Timed <config>: <average> ms (median ..., min ...)`` or
    ``Failed <config>: <reason>``."""
    if row.status != "ok":
        return f"Failed {row.perf_config}: {row.reason}"
    return f"Timed {row.perf_config}: {row.average_ms:.6f} ms (median {row.median_ms:.6f}, min {row.min_ms:.6f})"


def _summary(times) -> tuple:
    import statistics
    return report.miopen_average_ms(times), float(statistics.median(times)), float(min(times))


def _verify_top(ranked, solutions, job_args, o: TuneOptions, ref_kind: str, say) -> list:
    """Verify the first ``--verify-top`` ranked rows (``say`` gets each one's line as it
    finishes); returns the verified rows."""
    chosen = ranked[:o.verify_top]
    if not chosen:
        return []
    with workers.Worker("verification", timeout=o.timeout) as w:
        for row in chosen:
            res = w.run(workers.make_job("verification", **job_args, solution=solutions[row.perf_config],
                                         verify=True, reference=ref_kind))
            if res.ok:
                v = res.record["verdict"]
                row.verified, row.verify_error = bool(v["ok"]), float(v["error"])
                if not v["ok"]:
                    row.reason = f"verification FAILED: {report.cpp_float(v['error'])} > {report.cpp_float(v['tolerance'])}"
                else:
                    say(f"Verified {row.perf_config}: OK on {ref_kind.upper()} reference "
                        f"({report.cpp_float(v['error'])} < {report.cpp_float(v['tolerance'])})")
            else:
                row.verified = False
                row.reason = f"verification worker failed: {res.reason}"
            if not row.verified:
                say(f"Not verified {row.perf_config}: {row.reason}")
    return chosen


def tune_flag_notes(cmd, environ=None) -> list:
    """One ``Info:`` line per flag of the line that ``tune`` does not honour (never
    silence): ``-s 1`` (tune is the search), ``-o 1`` (no dump files), ``-V 0`` (tune
    verifies its ``--verify-top`` best configs), ``-w 1``/``2`` (tune times every config its
    own way), each as the line wrote it; then the flags no run honours
    (:func:`~driver.run_cmd.unhonoured_flag_notes`)."""
    f = cmd.flags

    out = []
    if int(f["search"]):
        out.append(f"Info: '{cmd.given('search')}' ignored: tune times every selected config itself (it is the search)")
    if int(f["dump_output"]):
        out.append(f"Info: '{cmd.given('dump_output')}' ignored: tune writes no dump files")
    if int(f["verify"]) == 0:
        out.append(f"Info: '{cmd.given('verify')}' ignored: tune verifies its --verify-top best configs (--verify-top 0 verifies none)")
    if int(f["wall"]):
        out.append(f"Info: '{cmd.given('wall')}' ignored: tune times every config by the method its heading names, not by wall clock "
                   f"per layer")
    return out + unhonoured_flag_notes(cmd, environ)


def tune_line(tokens, opts: TuneOptions | None = None, *, stderr=None, emit=None, **kw) -> tuple:
    """Tune one MIOpenDriver line. Returns ``(exit_status, stdout_lines)``.

    With ``emit`` (a callable taking one line) and text output, the heading and each row's
    line (a config timed or failed, then verified or not) go to ``emit`` as soon as they are
    final -- a pipe or a Ctrl-C keeps them -- and the returned lines are the rest (the
    summary and the table); without it every line is returned, in the same order.

    Raises:
        UserError, MiopenCommandError, PerfConfigError, RuntimeUnavailable, ValueError:
            bad input, before anything is timed.
    """
    o = opts or TuneOptions(**kw)
    _check_options(o)
    # a bad $DGRAD_WORKER_TIMEOUT or $DGRAD_WORKER_STARTUP_TIMEOUT is bad input, before the sweep
    o = replace(o, timeout=workers.job_timeout(o.timeout))
    cmd = parse_line(tokens)
    device = resolve_device(o.backend, o.arch, o.timeout)
    target = device.target
    cmd, math_note = for_target(cmd, target)       # -M 0 where there is no TF32: IEEE fp32
    problem = cmd.problem
    check_applicable(problem, target)
    candidates = list(DgradSolver().search(problem, target, split_k_reduce=o.split_k_reduce))
    if o.split_k_reduce == "stream" and not any(c.reduce == "stream" for c in candidates[1:]):
        raise UserError(f"--split-k-reduce stream: no stream-K config is valid for this problem on {target.arch} "
                        f"({stream_k_reason(problem, target)}); allowed: one group, every tile the same k-tiles, "
                        f"fp16/bf16 on a target with the TMA schedule")
    picked = select_configs(candidates, o.max_configs)
    if o.list_only:  # needs no device: the configs depend only on the problem and the target
        listed = [c.serialize() for c in picked]
        return EXIT_OK, [json_text(listed)] if o.as_json else listed
    if device.compile_only:
        raise UserError(f"--arch {o.arch}: tune needs a device to time on and there is no {o.arch} device here; "
                        f"use --backend cpu to tune on the CPU engine, or --list to print the configs")
    ref_kind = resolve_reference(o.ref, device, o.environ) if o.verify_top else None
    dy_file, w_file = check_input_files(cmd)
    if o.verify_top:
        for text in nonfinite_input_notes(cmd):
            warn(text)
    _check_perfdb(o)

    solver = DgradSolver()
    solutions, rows = {}, []
    for i, cfg in enumerate(picked, 1):
        sol = solver.get_solution(problem, target, cfg)
        solutions[cfg.serialize()] = sol
        kouter = cfg.lds_k_outer if cfg.lds_k_outer >= 0 else int(sol.spec.lds_k_outer)
        rows.append(TuneRow(i, cfg.serialize(), sol.kernel_name, sol.spec.split_k, kouter,
                            getattr(sol.spec, "split_k_reduce", "none"), sol.spec.schedule.slug))

    seed = prng.resolve_seed(o.environ)
    f = cmd.flags
    graph = int(f["use_hip_graph"]) != 0    # MIOpenDriver's -J 1: time replays of a captured graph
    job_args = dict(backend=device.backend, seed=seed,
                    bias=cmd.bias, dy_file=dy_file, w_file=w_file)
    _check_memory(problem, solutions, device, o, ref_kind, (bool(job_args["dy_file"]), bool(job_args["w_file"])))
    lines = []
    say = emit if emit is not None and not o.as_json else lines.append
    say(report.echo_line(cmd.argv))
    say(report.seed_line(seed))
    say(f"Tuning {SOLVER_NAME} on {target.arch} ({device.backend}, {device.name}): problem "
        f"{problem.problem_key()}, {len(rows)} of {len(candidates)} valid configs, -i {cmd.iters}, "
        + ("graph replays (-J 1)" if graph else f"warm-up {o.warmup}"))
    info = tune_flag_notes(cmd, o.environ)
    for line in info:
        say(line)
    if graph and device.backend == "cpu":
        say(graph_on_cpu_note(cmd))
    if math_note:
        say(math_note)
    err = stderr if stderr is not None else sys.stderr
    show = (o.progress if o.progress is not None else getattr(err, "isatty", lambda: False)()) and not o.quiet
    progress = Progress(err, len(rows), show)
    timed, budget_hit, seconds = _time_configs(rows, solutions, job_args, cmd.iters, o, problem, progress, say,
                                               graph)

    for r in rows:
        if budget_hit and r.status == "pending":      # never started: the budget ran out first
            r.status, r.reason = "skipped", f"not timed: --time-budget {o.time_budget:g} s reached"
    ok_rows = sorted((r for r in rows if r.status == "ok"), key=lambda r: (r.average_ms, r.median_ms, r.index))
    for rank, r in enumerate(ok_rows, 1):
        r.rank = rank
    failed_rows = [r for r in rows if r.status == "failed"]
    verified = _verify_top(ok_rows, solutions, job_args, o, ref_kind, say) if o.verify_top else []
    if o.verify_top:
        winner = next((r for r in ok_rows[:o.verify_top] if r.verified), None)
    else:
        winner = ok_rows[0] if ok_rows else None

    stored = _store(o, problem, device, winner) if winner is not None and o.store else None
    errors = [stored["error"]] if stored and stored["error"] else []

    csv_rows = None
    if o.csv is not None:
        chosen = ok_rows[:o.csv_top] if o.csv_top is not None else ok_rows + failed_rows + \
            [r for r in rows if r.status == "skipped"]
        csv_rows = write_csv_or_error(o.csv, CSV_FIELDS, [{**r.as_dict(), "verified": _verified_text(r, "")}
                                                          for r in chosen], errors)

    status = EXIT_OK if winner is not None else EXIT_VERIFY_FAILED
    replayed = graph and device.backend != "cpu"       # the CPU engine captures no graphs
    method = "graph" if replayed else ("wall" if device.backend == "cpu" else "events")
    if o.as_json:
        rec = {"command": cmd.command_line(), "solver": SOLVER_NAME, "problem_key": problem.problem_key(),
               "backend": device.backend, "device": device.name, "arch": target.arch,
               "perfdb_arch": device.perfdb_arch, "seed": seed, "iterations": cmd.iters,
               "warmup": 0 if replayed else o.warmup, "method": method,
               "candidates": len(candidates), "selected": len(rows), "timed": timed, "budget_hit": budget_hit,
               "seconds": seconds, "reference": ref_kind.upper() if ref_kind else None, "info": info,
               "rows": [r.as_dict() for r in ok_rows + failed_rows],
               "winner": winner.as_dict() if winner else None, "perfdb": stored,
               "csv": {"path": o.csv, "rows": csv_rows} if o.csv else None}
        return _finish(status, [json_text(rec, sort_keys=True)], errors)

    if budget_hit:
        lines.append(f"Time budget {o.time_budget:g} s reached: timed {timed} of {len(rows)} configs")
    lines.append(f"Timed {timed} configs in {seconds:.1f} s: {len(ok_rows)} ok, {len(failed_rows)} failed")
    if verified:
        n_ok = sum(1 for r in verified if r.verified)
        lines.append(f"Verified the top {len(verified)} on {ref_kind.upper()} reference: {n_ok} OK, "
                     f"{len(verified) - n_ok} FAILED")
    if ok_rows:
        lines.append(f"Top {min(o.top, len(ok_rows))} (ms: MIOpen average, median, min):")
        header = ("rank", "average_ms", "median_ms", "min_ms", "GFLOPs", "verified", "perf_config", "kernel_name")
        table = [(r.rank, r.average_ms, r.median_ms, r.min_ms,
                  None if r.gflops is None else round(r.gflops), _verified_text(r), r.perf_config, r.kernel_name)
                 for r in ok_rows[:o.top]]
        lines.extend(report.format_table(header, table))
    if csv_rows is not None:
        lines.append(f"Wrote {csv_rows} rows to {o.csv}")
    if winner is None:
        lines.append("No winner: no config " + ("timed and verified" if o.verify_top else "timed") + " successfully")
    elif stored is None:
        lines.append(f"Winner {winner.perf_config} ({winner.average_ms:.6f} ms); perf-db not written (--no-perfdb)")
    elif stored["error"]:
        lines.append(f"Winner {winner.perf_config} ({winner.average_ms:.6f} ms); perf-db not written (error below)")
    elif stored["written"]:
        lines.append(f"Perf-db: stored {winner.perf_config} ({winner.average_ms:.6f} ms) for "
                     f"{problem.miopen_db_key()} on {device.perfdb_arch} in {stored['path']}")
    else:
        lines.append(f"Perf-db: kept {stored['perf_config']} ({stored['time_ms']:.6f} ms), as fast as or faster "
                     f"than the winner {winner.perf_config} ({winner.average_ms:.6f} ms), in {stored['path']}")
    return _finish(status, lines, errors)


def _finish(status: int, lines: list, errors: list) -> tuple:
    """``(status, lines)``, or an OutputError carrying the lines when a write failed."""
    if errors:
        raise OutputError("; ".join(errors), lines)
    return status, lines


def _verified_text(row: TuneRow, unknown: str = "-") -> str:
    return {None: unknown, True: "OK", False: "FAILED"}[row.verified]


@click.command("tune", cls=Command, context_settings=LINE_SETTINGS)
@backend_option
@arch_option(without_device="an error, except with --list (the configs need no device)")
@click.option("--top", type=count_type(1), default=5, show_default=True, help="Rows to print.")
@click.option("--verify-top", "verify_top", type=count_type(0), default=3, show_default=True,
              help="Verify the fastest N (0: none; the fastest timed config wins).")
@click.option("--csv", "csv_path", default=None, metavar="PATH", help="Write the rows to a CSV file.")
@click.option("--csv-top", "csv_top", type=count_type(1), default=None,
              help="Write only the top N rows (N >= 1).")
@click.option("--max-configs", "max_configs", type=count_type(1), default=None,
              help="Sweep at most N configs (the default plus N-1 evenly spaced).")
@click.option("--time-budget", "time_budget", default=None, metavar="SECONDS", callback=seconds_callback(check_seconds),
              help="Stop starting new configs after this many seconds.")
@click.option("--quiet", is_flag=True, help="No progress line on stderr.")
@ref_option
@json_option
@click.option("--list", "list_only", is_flag=True, help="Print the configs the sweep would time, and exit.")
@click.option("--split-k-reduce", "split_k_reduce", type=click.Choice(SPLIT_K_REDUCE), default=None,
              help="Every split-K candidate sums through atomics or the fp32 workspace (default: the "
                   "solver's rule, atomics where allowed); stream: time the stream-K candidates (after the default).")
@warmup_option
@timeout_option
@perfdb_options
@campaign_options
@click.argument("line", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def tune_cmd(ctx, backend, arch, top, verify_top, csv_path, csv_top, max_configs, time_budget, quiet, ref,
             as_json, list_only, split_k_reduce, warmup, timeout, perfdb, no_perfdb, line, **campaign):
    """Sweep valid configs for an MIOpenDriver line (or every line of --file FILE: a campaign,
    see driver/campaign.py), rank them, store the winners in the perf-db."""
    if wants_campaign(**campaign):
        from .campaign import CampaignOptions, run_campaign
        for flag, given in (("--time-budget", time_budget is not None), ("--json", as_json), ("--list", list_only),
                            ("--split-k-reduce", split_k_reduce is not None)):
            if given:
                ctx.fail(f"{flag}: not available in a campaign (--file, --results, --gpus, --engine, --compile-pool)")
        opts = CampaignOptions(line=split_line(line), backend=backend, arch=arch, top=top, verify_top=verify_top,
                               csv=csv_path, csv_top=csv_top, max_configs=max_configs, quiet=quiet, timeout=timeout,
                               warmup=warmup, perfdb=perfdb, store=not no_perfdb, ref=ref, **campaign)
        run_and_print(ctx, run_campaign, opts)
        return
    opts = TuneOptions(backend=backend, arch=arch, top=top, verify_top=verify_top, csv=csv_path, csv_top=csv_top,
                       max_configs=max_configs, time_budget=time_budget, quiet=quiet, timeout=timeout,
                       warmup=warmup, perfdb=perfdb, store=not no_perfdb, ref=ref, as_json=as_json,
                       list_only=list_only, split_k_reduce=split_k_reduce)
    run_and_print(ctx, tune_line, split_line(line), opts, stream=True)


__all__ = ["TuneOptions", "TuneRow", "select_configs", "tune_line", "tune_cmd", "Progress"]
