"""Tuning campaigns: ``dgrad-driver tune --file MODEL.txt`` (and a single line with
``--results``, ``--gpus``, ``--engine`` or ``--compile-pool``).

1. **Problems.** Every line of FILE is read as ``batch`` reads it (perf-model files,
   ``MIOPEN_ENABLE_LOGGING_CMD`` logs, bench suites: :func:`driver.batch_cmd.command_tokens`);
   each ``-F 2`` line applicable on the target is a problem, and lines with the same problem
   key are one problem (the first line's ``-i`` and input flags are used). Other lines are
   listed as skipped, with the reason.
2. **Configs.** Per problem, :meth:`DgradSolver.search`'s candidates; ``--max-configs N``
   samples N of them across kernel schedules and tile shapes
   (:func:`miopen_solver.heuristics.sample_configs`), the default always in.
3. **Timing.** Every (problem, config) is a task for an executor
   (:mod:`driver.executors`): one timing worker per ``--gpus`` entry on this host
   (``--engine local``), or one Dask worker per GPU (``--engine dask``). ``--compile-pool N``
   compiles the next configs into the kernel cache in N CPU processes while the GPUs time.
   When a problem's configs are all timed, its fastest ``--verify-top`` (by median) are
   verified, each in a verification worker, and the problem's verdict is the fastest that
   verified.
4. **The log.** Every timed config and every verdict is appended to the results log
   (``--results PATH``; a temporary one without it) as it arrives, with the slot (host, GPU,
   what the worker saw) and, once per slot and session, its provenance (device, arch, CUs,
   runtime and compiler versions, product version, date). ``--resume`` skips configs and
   problems the log holds. The table, the CSV and the perf-db are made from the log, so a
   crash or Ctrl-C loses at most the configs in flight.

Exit status: 0 every problem has a winner; 1 some problem has none, or a line of FILE is an
error (it does not parse, or its flags or input files cannot be honoured: the lines ``batch``
lists as ``error`` rows, and exits 1 for), after the rest has run; 2 bad input (before
anything runs) or a CSV/perf-db write failing at the end (results printed first); 130
interrupted (what was logged is written to the CSV and the perf-db first).
"""

from __future__ import annotations

import math
import os
import queue
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, replace

import click

from miopen_solver import SOLVER_NAME, prng
from miopen_solver.command import MAX_LAUNCHES
from miopen_solver.errors import FileError, MiopenCommandError, PerfConfigError, PerfDbError, shown_path
from miopen_solver.heuristics import sample_configs
from miopen_solver.perfdb import PerfDb
from miopen_solver.provenance import host_provenance, now
from miopen_solver.results_log import NOT_A_LOG, ResultsLog, check_log, in_use, read_log
from miopen_solver.solver import DgradSolver
from miopen_solver.text import shorten

from . import report, workers
from .executors import CompilePool, DaskExecutor, LocalExecutor, Task, check_address, parse_gpus
from .options import (EXIT_INTERRUPTED, EXIT_OK, EXIT_VERIFY_FAILED, OutputError, UserError, check_count,
                      check_not_kept, check_not_stdout, check_output_file, file_error, one_line, perfdb_label,
                      write_csv_or_error)
from .campaign_cli import ENGINES, check_compile_pool
from .run_cmd import (check_input_files, check_line, for_target, graph_on_cpu_note, resolve_device,
                      resolve_reference)
from .tune_cmd import TuneOptions, _check_perfdb

CSV_FIELDS = ("problem", "problem_key", "lines", "rank", "default", "status", "median_ms", "average_ms", "min_ms",
              "gflops", "speedup_vs_default", "verified", "verify_error", "perf_config", "schedule", "kernel_name",
              "compile_ms", "cache_hit", "host", "slot", "gpu", "visible_devices", "failure", "reason")


@dataclass
class CampaignOptions(TuneOptions):
    """The options of a campaign: ``tune``'s (:class:`driver.tune_cmd.TuneOptions`; its
    ``time_budget``, ``as_json`` and ``list_only`` are a single line's only) and the
    campaign's own (:func:`driver.campaign_cli.campaign_options`)."""

    file: str | None = None
    line: list | None = None
    results: str | None = None
    resume: bool = False
    gpus: str | None = None
    engine: str = "local"
    address: str | None = None
    compile_pool: int = 0


@dataclass
class Problem:
    """One problem of the campaign: the first line that asked for it and the configs to time."""

    number: int
    key: str
    lines: list
    cmd: object
    candidates: int
    configs: list                     # serialized, the default first
    default: str
    solutions: dict                   # perf_config -> Solution
    job_args: dict
    flops: float = 0.0
    graph: bool = False               # the line's -J 1: timing jobs replay a captured graph


@dataclass
class Skipped:
    line: int
    reason: str
    error: bool = False               # the line is bad input (batch's error row): the campaign exits 1


# --------------------------------------------------------------------- problems
def _line_sources(o: CampaignOptions) -> tuple:
    """``[(line number, tokens)]`` and the count of lines without a conv command."""
    from .batch_cmd import file_commands, read_batch_file
    if o.file is None:
        return [(1, list(o.line))], 0
    return file_commands(read_batch_file(o.file, "--file"))


def read_problems(o: CampaignOptions, device, seed: int) -> tuple:
    """The campaign's problems and the lines skipped (with reasons); the lines without a
    conv command are counted. Returns ``(problems, skipped, ignored)``."""
    from miopen_solver.command import describe_directions
    from .batch_cmd import parse_tokens
    solver = DgradSolver()
    target = device.target
    problems, skipped, by_key = [], [], {}
    sources, ignored = _line_sources(o)
    for n, tokens in sources:
        try:
            cmd = parse_tokens(tokens)
        except MiopenCommandError as e:
            if o.file is None:
                raise
            skipped.append(Skipped(n, f"error: {one_line(e)}", error=True))
            continue
        forw = int(cmd.flags["forw"])
        if forw != 2:
            skipped.append(Skipped(n, f"-F {forw}: {describe_directions(forw)}, not backward data"))
            continue
        try:
            check_line(cmd)
            check_input_files(cmd)
        except UserError as e:
            if o.file is None:
                raise
            skipped.append(Skipped(n, f"error: {one_line(e)}", error=True))
            continue
        cmd, _ = for_target(cmd, target)        # -M 0 where there is no TF32: IEEE fp32 (its key too)
        problem = cmd.problem
        key = problem.problem_key()
        if key in by_key:
            by_key[key].lines.append(n)
            skipped.append(Skipped(n, f"same problem as line {by_key[key].lines[0]}"))
            continue
        verdict = solver.is_applicable(problem, target)
        if not verdict.ok:
            why = "; ".join(f"{r.code}: {r.message}" for r in verdict.reasons)
            if o.file is None:
                raise UserError(f"not applicable on {target.arch}: {why}")
            skipped.append(Skipped(n, f"not applicable on {target.arch}: {why}"))
            continue
        candidates = list(solver.search(problem, target))
        picked = sample_configs(candidates, o.max_configs)
        solutions = {}
        for cfg in picked:
            try:
                solutions[cfg.serialize()] = solver.get_solution(problem, target, cfg)
            except (PerfConfigError, ValueError):
                continue
        f = cmd.flags
        job_args = dict(backend=device.backend, seed=seed, bias=cmd.bias,
                        dy_file=f["dout_data"] or None, w_file=f["weights"] or None)
        graph = int(f["use_hip_graph"]) != 0     # the line's -J 1: its configs timed as graph replays
        p = Problem(number=len(problems) + 1, key=key, lines=[n], cmd=cmd, candidates=len(candidates),
                    configs=list(solutions), default=picked[0].serialize(), solutions=solutions,
                    job_args=job_args, flops=float(problem.flops), graph=graph)
        problems.append(p)
        by_key[key] = p
    return problems, skipped, ignored


# --------------------------------------------------------------------- records
def _summary(times) -> tuple:
    return (float(statistics.median(times)), report.miopen_average_ms(times), float(min(times)))


def timing_record(session: str, arch: str, p: Problem, cfg: str, res: dict) -> dict:
    """The log record of one timed config (``res``: an executor's result)."""
    sol = p.solutions[cfg]
    rec = {"type": "timing", "session": session, "problem_key": p.key, "arch": arch, "perf_config": cfg,
           "schedule": int(sol.schedule), "kernel_name": sol.kernel_name, "default": cfg == p.default,
           "host": res.get("host"), "slot": res.get("slot"), "gpu": res.get("gpu"), "pid": res.get("pid"),
           "date": now(), "seconds": res.get("seconds")}
    r = res.get("record") or {}
    if res.get("ok") and r.get("times_ms"):
        med, avg, mn = _summary(r["times_ms"])
        rec.update(status="ok", median_ms=med, average_ms=avg, min_ms=mn, times_ms=r["times_ms"],
                   compile_ms=r.get("compile_ms"), cache_hit=r.get("cache_hit"),
                   visible_devices=r.get("visible_devices"), iters=r.get("iters"), warmup=r.get("warmup"),
                   method=r.get("method"))
    else:
        rec.update(status="failed", failure=res.get("failure") or "raised", reason=res.get("reason", ""),
                   exit_code=res.get("exit_code"), signal=res.get("signal"))
    return rec


def rank(timings: list) -> list:
    """The ok timing records of one problem, fastest median first (then average, config)."""
    ok = [t for t in timings if t.get("status") == "ok"]
    return sorted(ok, key=lambda t: (t["median_ms"], t["average_ms"], t["perf_config"]))


def verdict_record(session: str, arch: str, p: Problem, timings: list, verified: dict, ref_kind) -> dict:
    """The log record of a problem's verdict: the winner (the fastest by median that
    verified; the fastest with ``--verify-top 0``), the default's time and the speed-up."""
    ranked = rank(timings)
    if ref_kind is None:
        winner = ranked[0] if ranked else None
    else:
        winner = next((t for t in ranked if verified.get(t["perf_config"], {}).get("ok")), None)
    default = next((t for t in ranked if t["perf_config"] == p.default), None)
    speedup = None
    if winner is not None and default is not None and winner["median_ms"] > 0:
        speedup = default["median_ms"] / winner["median_ms"]
    return {"type": "verdict", "session": session, "problem_key": p.key, "arch": arch, "lines": p.lines,
            "command": p.cmd.command_line(), "configs": len(timings), "ok": len(ranked),
            "failed": len(timings) - len(ranked), "candidates": p.candidates, "default": p.default,
            "default_median_ms": default["median_ms"] if default else None,
            "winner": winner["perf_config"] if winner else None,
            "winner_median_ms": winner["median_ms"] if winner else None,
            "winner_average_ms": winner["average_ms"] if winner else None, "speedup": speedup,
            "reference": ref_kind.upper() if ref_kind else None,
            "verified": [{"perf_config": t["perf_config"], **verified[t["perf_config"]]}
                         for t in ranked if t["perf_config"] in verified], "date": now()}


def _verify_outcome(res: dict) -> dict:
    if not res.get("ok"):
        return {"ok": False, "error": None, "reason": f"verification worker failed: {res.get('reason', '')}"}
    v = (res.get("record") or {}).get("verdict") or {}
    out = {"ok": bool(v.get("ok")), "error": v.get("error"), "tolerance": v.get("tolerance")}
    if not v.get("ok"):
        out["reason"] = f"verification FAILED: {v.get('error')} > {v.get('tolerance')}"
    return out


# --------------------------------------------------------------------- progress
class CampaignProgress:
    """A click progress bar (ETA, position, configs/s) on a terminal; plain lines (one per
    finished problem) when stderr is not one; nothing when disabled."""

    def __init__(self, stream, total: int, problems: int, mode: str):
        self.stream, self.total, self.problems, self.mode = stream, total, problems, mode
        self.done, self.t0, self._bar = 0, time.perf_counter(), None
        if mode == "bar" and total:
            self._bar = click.progressbar(length=total, label="tune", show_eta=True, show_pos=True,
                                          item_show_func=lambda s: s, file=stream)
            self._bar.__enter__()

    def rate(self) -> float:
        dt = time.perf_counter() - self.t0
        return self.done / dt if dt > 0 else 0.0

    def eta(self) -> str:
        r = self.rate()
        if not r or self.done >= self.total:
            return "00:00:00"
        s = int((self.total - self.done) / r)
        return f"{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"

    def advance(self, n: int = 1) -> None:
        self.done += n
        if self._bar is not None:
            self._bar.update(n, f"{self.rate():.2f} configs/s")

    def problem_done(self, number: int, key: str, verdict: dict) -> None:
        if self.mode != "lines":
            return
        win = verdict.get("winner") or "none"
        self.stream.write(f"tune: problem {number}/{self.problems} done ({key}: winner {win}); "
                          f"{self.done}/{self.total} configs, {self.rate():.2f} configs/s, ETA {self.eta()}\n")
        self.stream.flush()

    def finish(self) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)
            self._bar = None


# --------------------------------------------------------------------- the run
def _check_options(o: CampaignOptions) -> None:
    for flag, value, low in (("--top", o.top, 1), ("--verify-top", o.verify_top, 0),
                             ("--csv-top", o.csv_top, 1), ("--max-configs", o.max_configs, 1),
                             ("--compile-pool", o.compile_pool, 0)):
        check_count(flag, value, low)
    check_compile_pool("--compile-pool", o.compile_pool)
    check_count("--warmup", o.warmup, 0, MAX_LAUNCHES)
    if o.file is not None and o.line:
        raise UserError(f"--file {shown_path(o.file)}: a campaign takes FILE or one line, not both (line "
                        f"{shorten(' '.join(o.line))!r} given too); allowed: --file FILE without a line (each "
                        f"line's -i sets its iterations), or one line without --file")
    if o.file is None and not o.line:
        raise UserError("tune: no line given; allowed: an MIOpenDriver line, or --file FILE")
    if o.engine not in ENGINES:
        raise UserError(f"--engine {o.engine}: allowed: {', '.join(ENGINES)}")
    if o.address is not None and o.engine != "dask":
        raise UserError(f"--address {o.address}: needs --engine dask")
    if o.address is not None:
        check_address(o.address)
    if o.address is not None and o.gpus is not None:
        raise UserError(f"--gpus {o.gpus}: with --address the cluster's workers are the GPUs (one Dask worker "
                        f"per GPU); allowed: --gpus without --address (a LocalCluster), or no --gpus")
    if o.resume and o.results is None:
        raise UserError("--resume: needs --results PATH (the log to continue)")
    if o.csv_top is not None and o.csv is None:
        raise UserError(f"--csv-top {o.csv_top}: needs --csv PATH")
    kept = {"the perf-db": PerfDb(o.perfdb).path, "--file, the lines being tuned": o.file}
    if o.csv is not None:
        check_output_file("--csv", o.csv)
        check_not_stdout("--csv", o.csv, "the campaign report")
        check_not_kept("--csv", o.csv, {**kept, "the --results log": o.results})
    if o.results is not None:
        check_not_kept("--results", o.results, kept)
        _check_results(o)


def _check_results(o: CampaignOptions) -> None:
    """``--results PATH``: a new or empty file; with ``--resume`` an existing one, an earlier
    campaign's log (:func:`~miopen_solver.results_log.check_log`) or empty. Anything else -- a
    text file, a CSV, binary data, a log without ``--resume``, a missing file with it -- is
    refused before anything is written to it.

    Raises:
        UserError: naming ``--results``, the path, why and what is allowed.
    """
    if in_use(o.results):           # with or without --resume: wait for it, or another log
        raise UserError(f"--results {shown_path(o.results)}: is the log of a campaign running now (locked); allowed: "
                        f"--resume once that campaign has ended, or another file")
    try:
        existing = check_log(o.results)
    except FileError as e:
        if o.resume or not e.reason.startswith(NOT_A_LOG):
            raise file_error("--results", e) from None
        raise UserError(f"--results {shown_path(o.results)}: exists and {e.reason}; allowed: a new or empty "
                        f"file (an existing one is appended to only with --resume, and only when it is an "
                        f"earlier campaign's log)") from None
    if not o.resume and (existing.records or existing.torn):
        raise UserError(f"--results {shown_path(o.results)}: holds {len(existing.records)} records of an earlier "
                        f"campaign; allowed: --resume to continue it, or a new file")
    if o.resume and not os.path.exists(o.results):      # a mistyped log would start over silently
        raise UserError(f"--resume needs an existing results log; --results {shown_path(o.results)} does not "
                        f"exist; allowed: the log of an earlier campaign, or a new file without --resume")


def _make_executor(o: CampaignOptions, device, slots: list):
    if o.engine == "dask":
        note = "Compile pool: not with --engine dask (each Dask worker compiles its own)" if o.compile_pool else None
        return DaskExecutor(o.address, slots, o.timeout, device.backend), note
    pool = None
    note = None
    if o.compile_pool:
        from miopen_solver.runtime.precompile import compiles
        if compiles(device.backend):
            pool = CompilePool(o.compile_pool, device.backend, device.target.arch)
            note = f"Compile pool: {o.compile_pool} processes compile the next configs into the kernel cache"
        else:
            note = f"Compile pool: off (the {device.backend} engine compiles nothing; --compile-pool ignored)"
    return LocalExecutor(slots, o.timeout, device.backend, pool), note


class _Run:
    """The state of one session of a campaign (the driver loop)."""

    def __init__(self, o, device, problems, log, session, arch, ref_kind, done_timing, done_verdicts):
        self.o, self.device, self.problems, self.log = o, device, problems, log
        self.session, self.arch, self.ref_kind = session, arch, ref_kind
        self.by_key = {p.key: p for p in problems}
        self.timings = {p.key: [t for t in done_timing.get(p.key, {}).values()] for p in problems}
        self.left = {p.key: sum(1 for c in p.configs if c not in done_timing.get(p.key, {})) for p in problems}
        self.done_verdicts = done_verdicts
        self.verifying: dict = {}
        self.verified: dict = {}
        self.seen_slots: set = set()
        self.timed_now = self.failed_now = self.cache_hits = 0

    def log_slot(self, res: dict) -> None:
        ident = (res.get("host"), res.get("slot"))
        if ident in self.seen_slots or res.get("provenance") is None:
            return
        self.seen_slots.add(ident)
        self.log.append({"type": "worker", "session": self.session, "host": res.get("host"),
                         "slot": res.get("slot"), "gpu": res.get("gpu"), "provenance": res.get("provenance"),
                         "date": now()})

    def start_verification(self, p: Problem, submit) -> bool:
        """Submit the verification of the problem's top configs; False when there is none
        to run (the verdict can be written now)."""
        chosen = rank(self.timings[p.key])[:self.o.verify_top] if self.ref_kind else []
        if not chosen:
            return False
        self.verifying[p.key] = len(chosen)
        self.verified[p.key] = {}
        for t in chosen:
            cfg = t["perf_config"]
            job = workers.make_job("verification", **p.job_args, solution=p.solutions[cfg], verify=True,
                                   reference=self.ref_kind)
            submit(Task("verification", p.key, cfg, job))
        return True

    def write_verdict(self, p: Problem, progress) -> None:
        rec = verdict_record(self.session, self.arch, p, self.timings[p.key], self.verified.get(p.key, {}),
                             self.ref_kind)
        self.log.append(rec)
        self.done_verdicts[p.key] = rec
        progress.problem_done(p.number, p.key, rec)


def _index(records: list, arch: str) -> tuple:
    """From a log's records: ``{problem key: {config: timing record}}`` (the first record of
    each) and ``{problem key: verdict}`` (the last), for ``arch``."""
    timing, verdicts = {}, {}
    for r in records:
        if r.get("arch") != arch:
            continue
        if r.get("type") == "timing":
            timing.setdefault(r.get("problem_key"), {}).setdefault(r.get("perf_config"), r)
        elif r.get("type") == "verdict":
            verdicts[r.get("problem_key")] = r
    return timing, verdicts


def run_campaign(o: CampaignOptions, *, stderr=None) -> tuple:
    """Run a campaign. Returns ``(exit status, stdout lines)``.

    Raises:
        UserError, MiopenCommandError, PerfConfigError, RuntimeUnavailable, ValueError: bad
            input, before anything is timed.
        OutputError: the CSV or perf-db could not be written at the end (lines carried).
    """
    _check_options(o)
    o = replace(o, timeout=workers.job_timeout(o.timeout))
    device = resolve_device(o.backend, o.arch, o.timeout)
    if device.compile_only:
        raise UserError(f"--arch {o.arch}: tune needs a device to time on and there is no {o.arch} device here; "
                        f"use --backend cpu to tune on the CPU engine")
    slots = parse_gpus(o.gpus, device.backend)
    ref_kind = resolve_reference(o.ref, device, o.environ) if o.verify_top else None
    _check_perfdb(o)
    seed = prng.resolve_seed(o.environ)
    problems, skipped, ignored = read_problems(o, device, seed)
    if not problems:
        raise UserError(f"--file {o.file}: no applicable -F 2 line to tune on {device.target.arch} "
                        f"({len(skipped)} lines skipped, {ignored} without a conv command or a Find call's log line)")
    arch = device.perfdb_arch

    tmpdir = None
    log_path = o.results
    if log_path is None:
        tmpdir = tempfile.TemporaryDirectory(prefix="dgrad-campaign-")
        log_path = os.path.join(tmpdir.name, "results.jsonl")
    try:
        return _run(o, device, slots, ref_kind, problems, skipped, ignored, arch, log_path, stderr)
    finally:
        if tmpdir is not None:
            tmpdir.cleanup()


def _check_resumed_methods(o, device, problems, done_timing) -> None:
    """``--resume``: the log's ok timings of each problem were taken as its line asks now
    (graph replays for ``-J 1`` on a GPU engine, plain launches otherwise). A log of plain
    launches resumed with ``-J 1`` lines (or the reverse) would rank the two kinds together:
    graphs hide the launch latency, so the configs timed as graphs would win.

    Raises:
        UserError: naming --resume, the log, the problem and its line, and what is allowed.
    """
    for p in problems:
        want = p.graph and device.backend != "cpu"
        other = [t for t in done_timing.get(p.key, {}).values()
                 if t.get("status") == "ok" and (t.get("method") == "graph") != want]
        if other:
            got = "graph replays (-J 1)" if not want else f"{other[0].get('method') or 'plain'} launches"
            asks = "graph replays (-J 1)" if want else "plain launches (no -J 1)"
            raise UserError(f"--resume {shown_path(o.results)}: the log timed {len(other)} configs of {p.key} as {got}, "
                            f"and line {p.lines[0]} asks {asks}; allowed: the lines' -J as in the earlier sessions, "
                            f"or a new --results log")


RESUMED_OPTIONS = (("max_configs", "--max-configs"), ("verify_top", "--verify-top"), ("reference", "--ref"))
"""The session record's options that decide what a campaign times and how its winners are
chosen: a resumed campaign must ask what the log's first session asked."""


def _check_resumed_options(o, records: list, ref_kind) -> None:
    """``--resume``: the options of :data:`RESUMED_OPTIONS` as the log's first session ran
    them. A different ``--max-configs`` made the table and CSV rank another set of configs
    than the verdicts and the perf-db (and a larger one timed nothing more).

    Raises:
        UserError: naming the option, both values and what is allowed.
    """
    first = next((r for r in records if r.get("type") == "session"), None)
    if first is None:
        return
    now = {"max_configs": o.max_configs, "verify_top": o.verify_top, "reference": ref_kind}
    for key, flag in RESUMED_OPTIONS:
        if key in first and first[key] != now[key]:
            raise UserError(f"--resume {shown_path(o.results)}: the campaign ran {flag} {_shown_option(first[key])} "
                            f"and this run asks {_shown_option(now[key])}; allowed: {flag} as the log's first session "
                            f"ran it, or a new --results log")


def _shown_option(value) -> str:
    return "(not set)" if value is None else str(value)


def _run(o, device, slots, ref_kind, problems, skipped, ignored, arch, log_path, stderr) -> tuple:
    # the log first, locked: a second campaign on the same new log is refused here, not after
    # both have checked it was empty; what this run created stays only once it writes to it
    created = not os.path.exists(log_path)
    try:
        log = ResultsLog(log_path).open()
    except FileError as e:
        raise file_error("--results", e) from None
    try:
        before = read_log(log_path)
        if not o.resume and (before.records or before.torn):     # written since the options were checked
            raise UserError(f"--results {shown_path(o.results)}: holds {len(before.records)} records of another "
                            f"campaign; allowed: --resume to continue it, or a new file")
        prepared = _prepare(o, device, slots, ref_kind, problems, arch, before if o.resume else None)
    except BaseException:
        log.close()
        if created and os.path.exists(log_path) and os.path.getsize(log_path) == 0:
            os.unlink(log_path)
        raise
    return _run_logged(o, device, problems, skipped, ignored, arch, log_path, stderr, ref_kind, log, prepared)


def _prepare(o, device, slots, ref_kind, problems, arch, before) -> tuple:
    """What a session runs, from the log so far (``before``; None: a new campaign): the
    timing tasks, the problems only left to verify, what was resumed, and the executor."""
    if before:
        _check_resumed_options(o, before.records, ref_kind)
    done_timing, done_verdicts = _index(before.records, arch) if before else ({}, {})
    _check_resumed_methods(o, device, problems, done_timing)
    tasks, to_verify = [], []
    for p in problems:
        if p.key in done_verdicts:
            continue
        todo = [c for c in p.configs if c not in done_timing.get(p.key, {})]
        for cfg in todo:
            job = workers.make_job("timing", **p.job_args, solution=p.solutions[cfg], iters=p.cmd.iters,
                                   warmup=o.warmup, graph=p.graph)
            tasks.append(Task("timing", p.key, cfg, job))
        if not todo:
            to_verify.append(p)
    keys = {p.key for p in problems}     # a set: a scan of the problems per logged key grew as their square
    resumed_configs = sum(len(v) for k, v in done_timing.items() if k in keys)
    resumed_problems = sum(1 for p in problems if p.key in done_verdicts)
    executor, pool_note = _make_executor(o, device, slots) if (tasks or to_verify) else (None, None)
    return tasks, to_verify, done_timing, done_verdicts, resumed_configs, resumed_problems, executor, pool_note


def _run_logged(o, device, problems, skipped, ignored, arch, log_path, stderr, ref_kind, log, prepared) -> tuple:
    tasks, to_verify, done_timing, done_verdicts, resumed_configs, resumed_problems, executor, pool_note = prepared
    session = uuid.uuid4().hex[:12]
    err = stderr if stderr is not None else sys.stderr
    interrupted = False
    t0 = time.perf_counter()
    with log:
        log.append({"type": "session", "session": session, "engine": o.engine, "gpus": o.gpus,
                    "backend": device.backend, "arch": arch, "target": device.target.arch, "device": device.name,
                    "file": o.file, "max_configs": o.max_configs, "verify_top": o.verify_top,
                    "reference": ref_kind, "resume": o.resume, "problems": len(problems), "tasks": len(tasks),
                    "argv": sys.argv[1:], **host_provenance()})
        run = _Run(o, device, problems, log, session, arch, ref_kind, done_timing, dict(done_verdicts))
        show = not o.quiet
        is_tty = getattr(err, "isatty", lambda: False)()
        mode = ("bar" if (o.progress if o.progress is not None else is_tty) else "lines") if show else "off"
        progress = CampaignProgress(err, len(tasks), len(problems), mode)   # problems are numbered in the file
        try:
            if executor is not None:
                for t in tasks:
                    executor.submit(t)
                executor.start()
                for p in to_verify:
                    if not run.start_verification(p, executor.submit):
                        run.write_verdict(p, progress)
                _loop(run, executor, progress)
        except KeyboardInterrupt:
            interrupted = True
        finally:
            progress.finish()
            if executor is not None:
                executor.close(kill=interrupted)
        seconds = time.perf_counter() - t0
    records = read_log(log_path).records
    return _report(o, device, problems, skipped, ignored, records, arch, run, executor,
                   pool_note if executor else None, seconds, log_path, resumed_configs, resumed_problems,
                   interrupted)


def _loop(run: _Run, executor, progress) -> None:
    pending = set(k for k in run.by_key if k not in run.done_verdicts)
    while pending:
        try:
            task, res = executor.results.get(timeout=0.5)   # a timeout keeps Ctrl-C responsive
        except queue.Empty:
            continue
        p = run.by_key[task.problem]
        run.log_slot(res)
        if task.kind == "timing":
            rec = timing_record(run.session, run.arch, p, task.perf_config, res)
            run.log.append(rec)
            run.timings[p.key].append(rec)
            run.left[p.key] -= 1
            run.timed_now += 1
            run.failed_now += rec["status"] == "failed"
            run.cache_hits += bool(rec.get("cache_hit"))
            progress.advance()
            if run.left[p.key] == 0 and not run.start_verification(p, executor.submit):
                run.write_verdict(p, progress)
                pending.discard(p.key)
        else:
            run.verified[p.key][task.perf_config] = _verify_outcome(res)
            run.verifying[p.key] -= 1
            if run.verifying[p.key] == 0:
                run.write_verdict(p, progress)
                pending.discard(p.key)


# --------------------------------------------------------------------- report
def _fmt_speedup(x) -> str:
    return "-" if x is None else f"{x:.2f}x"


def _report(o, device, problems, skipped, ignored, records, arch, run, executor, pool_note, seconds, log_path,
            resumed_configs, resumed_problems, interrupted) -> tuple:
    timing, verdicts = _index(records, arch)
    where = o.file if o.file is not None else "one line"
    lines = [f"Campaign {where}: {len(problems)} problems on {device.target.arch} ({device.backend}, {device.name})"
             + (f"; {len(skipped)} lines skipped" if skipped else "")
             + (f"; {ignored} lines without a conv command ignored" if ignored else "")]
    if executor is not None:
        lines.append(executor.describe())
    if pool_note:
        lines.append(pool_note)
    sampled = f"up to {o.max_configs} configs per problem, sampled across schedules and tile shapes " \
              f"(the default always in)" if o.max_configs else "every valid config"
    n_graph = sum(p.graph for p in problems)
    how = (f"warm-up {o.warmup}" if not n_graph else "graph replays (-J 1)" if n_graph == len(problems) else
           f"warm-up {o.warmup}; graph replays (-J 1) on {n_graph} of {len(problems)} problems")
    lines.append(f"Configs: {sampled}; -i from each line, {how}")
    if n_graph and device.backend == "cpu":
        lines.append(graph_on_cpu_note())
    lines.append(f"Results log: {o.results if o.results is not None else '(temporary) ' + log_path}"
                 + (f" (resumed: {resumed_configs} configs and {resumed_problems} problems were done)"
                    if o.resume else ""))
    for s in skipped:
        lines.append(f"Skipped line {s.line}: {s.reason}")

    csv_rows, total_default, total_tuned, ratios, no_winner = [], 0.0, 0.0, [], 0
    for p in problems:
        ts = list(timing.get(p.key, {}).values())
        ts = [t for t in ts if t["perf_config"] in p.solutions]
        ranked = rank(ts)
        v = verdicts.get(p.key)
        ver = {x["perf_config"]: x for x in (v or {}).get("verified", [])}
        default = next((t for t in ranked if t["perf_config"] == p.default), None)
        n_failed = sum(1 for t in ts if t.get("status") != "ok")
        head = (f"Problem {p.number}/{len(problems)} (line{'s' if len(p.lines) > 1 else ''} "
                f"{', '.join(map(str, p.lines))}) {p.key}: {len(ts)} of {len(p.configs)} configs timed "
                f"({p.candidates} valid), {len(ranked)} ok, {n_failed} failed")
        lines.append(head)
        if v is None:
            lines.append("  No verdict yet (interrupted; --resume continues)")
            no_winner += 1
        elif v.get("winner") is None:
            lines.append("  No winner: no config " + ("timed and verified" if v.get("reference") else "timed"))
            no_winner += 1
        else:
            dm = v.get("default_median_ms")
            lines.append(f"  Winner {v['winner']}: median {v['winner_median_ms']:.6f} ms; default {p.default}: "
                         + (f"median {dm:.6f} ms; speed-up {_fmt_speedup(v.get('speedup'))}"
                            if dm is not None else "not timed ok; speed-up -"))
            if dm is not None:
                total_default += dm
                total_tuned += v["winner_median_ms"]
                if v.get("speedup"):
                    ratios.append(v["speedup"])
        if ranked:
            header = ("rank", "median_ms", "average_ms", "min_ms", "default", "verified", "perf_config", "kernel_name")
            shown = ranked[:o.top]
            if default is not None and default not in shown:
                shown = shown + [default]
            table = [(ranked.index(t) + 1, t["median_ms"], t["average_ms"], t["min_ms"],
                      "*" if t["perf_config"] == p.default else "", _verified_text(ver.get(t["perf_config"])),
                      t["perf_config"], t["kernel_name"]) for t in shown]
            lines.extend("  " + x for x in report.format_table(header, table))
        for t in ts:
            if t.get("status") != "ok":
                lines.append(f"  Failed {t['perf_config']}: {t.get('reason', '')}")
        rows = []
        for i, t in enumerate(ranked, 1):
            rows.append(_csv_row(p, t, i, default, ver))
        if o.csv_top is not None:
            rows = rows[:o.csv_top]
        else:
            rows += [_csv_row(p, t, None, default, ver) for t in ts if t.get("status") != "ok"]
        csv_rows.extend(rows)

    if total_tuned > 0:
        geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios)) if ratios else None
        lines.append(f"Total over {len(ratios)} problems: default {total_default:.6f} ms, tuned {total_tuned:.6f} ms: "
                     f"speed-up {total_default / total_tuned:.2f}x (geomean {_fmt_speedup(geo)})")
    rate = run.timed_now / seconds if seconds > 0 else 0.0
    lines.append(f"Timed {run.timed_now} configs in {seconds:.1f} s ({rate:.2f} configs/s) on "
                 f"{getattr(executor, 'used', executor.size) if executor else 0} workers: {run.failed_now} failed, "
                 f"{run.cache_hits} found their kernel in the cache")
    if executor is not None and getattr(executor, "compile_pool", None) is not None:
        st = executor.compile_pool.stats
        lines.append(f"Compile pool: {st['queued']} queued, {st['ready']} compiled before their turn, "
                     f"{st['waited']} finished while waited for, {st['cancelled']} left to the timing worker")

    errors = []
    if o.csv is not None:
        n = write_csv_or_error(o.csv, CSV_FIELDS, csv_rows, errors)
        if n is not None:
            lines.append(f"Wrote {n} rows to {o.csv}")
    if o.store:
        lines.append(_store(o, problems, verdicts, arch, errors))
    lost = [s.line for s in skipped if s.error]
    status = EXIT_OK if no_winner == 0 and not lost else EXIT_VERIFY_FAILED
    if lost:        # the exit status says a line was lost; say which, after the table
        lines.append(f"Lines with errors, not tuned: {', '.join(map(str, lost))} of {where} "
                     f"(their 'Skipped line N: error' above); exit status 1")
    if interrupted:
        lines.append(f"Interrupted: {run.timed_now} configs of this session are in the log; --resume continues")
        click.echo("dgrad-driver: interrupted", err=True)
        status = EXIT_INTERRUPTED
    if errors:
        raise OutputError("; ".join(errors), lines)
    return status, lines


def _verified_text(v) -> str:
    if v is None:
        return "-"
    return "OK" if v.get("ok") else "FAILED"


def _csv_row(p: Problem, t: dict, rank_no, default, ver) -> dict:
    v = ver.get(t["perf_config"])
    speed = None
    if rank_no is not None and default is not None and t.get("median_ms"):
        speed = default["median_ms"] / t["median_ms"]
    gflops = p.flops / t["median_ms"] / 1e6 if t.get("median_ms") else None
    return {**t, "problem": p.number, "lines": " ".join(map(str, p.lines)), "rank": rank_no,
            "default": "yes" if t["perf_config"] == p.default else "", "gflops": gflops,
            "speedup_vs_default": speed, "verified": "" if v is None else ("OK" if v.get("ok") else "FAILED"),
            "verify_error": None if v is None else v.get("error")}


def _store(o, problems, verdicts, arch, errors) -> str:
    """The verdicts' winners into the perf-db (the faster of an existing record and the
    winner is kept); the summary line."""
    winners = [(p, verdicts[p.key]) for p in problems if verdicts.get(p.key, {}).get("winner")]
    if not winners:
        return "Perf-db: nothing to store (no winner)"
    db = PerfDb(o.perfdb)
    stored = kept = 0
    try:
        with db:
            for p, v in winners:
                # the time the campaign ranked by (the median), so the perf-db keeps what it chose
                if db.update(p.key, arch, SOLVER_NAME, v["winner"], v["winner_median_ms"]):
                    stored += 1
                else:
                    kept += 1
    except PerfDbError as e:
        errors.append(f"{perfdb_label(o.perfdb)}: cannot store the winners: {e.reason}")
        return "Perf-db: not written (error below)"
    return f"Perf-db: stored {stored} winners for {arch} in {db.path}" + \
        (f" (kept {kept} records as fast or faster)" if kept else "")


__all__ = ["CSV_FIELDS", "CampaignOptions", "read_problems", "run_campaign", "timing_record", "verdict_record"]
