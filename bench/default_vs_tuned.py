"""Is every default within reach of the best config? The table of a tuning campaign over a
suite file (the zoo): per layer the default config's median time, the best of the configs
the campaign timed, their ratio, and whether the default is within ``--within`` (10%) of
the best; per class and in total, how many are.

The campaign is ``dgrad-driver tune --file SUITE --max-configs 40 --results LOG ...`` (on the
H200: ``STEPS=zoo_tune bench/h200_check.sh``, resumable across device calls); this script
reads its JSON Lines log(s) (gzip allowed: a ``.jsonl.gz`` fetched from a device) -- the
``verdict`` record of each problem, joined to the suite's lines by the problem key -- and
needs no GPU::

    python bench/default_vs_tuned.py zoo_tune.jsonl --suite bench/zoo.txt --out default_vs_tuned.md

Times are the campaign's medians (ms); ``default/best`` is >= 1 (1 = the default is the best
timed). A problem the log has no verdict for (not reached, nothing timed) is ``n/a``.

Which default: ``--defaults current`` (the default) judges the default the solver picks *now*
for the campaign's target (the ``arch`` of its session record) -- after a default changed, a
campaign run before the change still answers, from the time its tune recorded for that
config; a current default the campaign never timed is ``n/a (not timed)``.
``--defaults logged`` judges the default the campaign itself ran.
"""

from __future__ import annotations

import gzip
import io
import json
import math
import sys
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.compare import (AS_WRITTEN, CLASSES, UNTAGGED, OneLineParser, _write, check_outputs, geomean,  # noqa: E402
                           guarded_main, number_arg, plan_rows, positive_number)
from miopen_solver.command import parse  # noqa: E402
from miopen_solver.errors import FileError, TargetError  # noqa: E402
from miopen_solver.fileio import read_bytes, read_text, stat_regular  # noqa: E402
from miopen_solver.results_log import parse_log  # noqa: E402
from miopen_solver.target import get_target  # noqa: E402
from miopen_solver.text import json_text, shorten  # noqa: E402


LOG_ALLOWED = "a dgrad-driver tune --results log (JSON Lines, gzip allowed, a session record first)"
LOG_WHAT = LOG_ALLOWED[len("a "):]
MAX_LOG_BYTES = 1 << 30
TIMES = ("default_median_ms", "winner_median_ms")


def log_bytes(path) -> bytes:
    """The bytes of a campaign log, gunzipped when they are gzip data (a log fetched from a
    device as ``.jsonl.gz``), at most :data:`MAX_LOG_BYTES` either way.

    Raises:
        FileError: unreadable, a truncated or corrupt gzip file, a file named ``.gz`` that
            is not gzip data, too large.
    """
    data = read_bytes(path, MAX_LOG_BYTES, LOG_WHAT)
    if data[:2] != b"\x1f\x8b":
        if str(path).endswith(".gz"):
            raise FileError(path, "named .gz but not gzip data", LOG_ALLOWED)
        return data
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as f:
            data = f.read(MAX_LOG_BYTES + 1)
    except (EOFError, OSError, zlib.error) as e:
        raise FileError(path, f"not a whole gzip file ({shorten(e)})", LOG_ALLOWED) from None
    if len(data) > MAX_LOG_BYTES:
        raise FileError(path, f"too large unpacked (more than {MAX_LOG_BYTES} bytes)", LOG_ALLOWED)
    return data


def _binary(data: bytes):
    """Why ``data`` is binary, not text (a NUL byte, or bytes that are not UTF-8), or None."""
    at = data.find(b"\0")
    try:
        data[:at if at >= 0 else None].decode("utf-8")
    except UnicodeDecodeError as e:
        at = e.start
    return None if at < 0 else f"binary data, not JSON Lines text (byte 0x{data[at]:02x} at offset {at})"


def _not_a_record(line: bytes) -> str:
    """Why a complete line of text is not a record (a line :func:`parse_log` set aside)."""
    try:
        value = json.loads(line.decode("utf-8"))
    except ValueError as e:
        return f"not JSON ({shorten(getattr(e, 'msg', e))})"
    return f"a JSON {type(value).__name__}, not an object"


def log_records(path) -> list:
    """``(line number, record)`` per record of the campaign log at ``path`` (gzip allowed:
    :func:`log_bytes`), in file order, read as the campaign's ``--resume`` reads it
    (:func:`~miopen_solver.results_log.parse_log`): a torn last line (a campaign killed
    mid-write, no newline) is skipped. Only read: a read-only log is fine.

    Raises:
        FileError: see :func:`log_bytes`; binary data (a NUL byte or bytes that are not
            UTF-8, where the file is not a log), a complete line that is not a JSON object
            (not JSON or another JSON value: the first one named), no complete record, or a
            first record that is not the ``session`` record.
    """
    data = log_bytes(path)
    contents = parse_log(data)
    if (contents.bad or not contents.records) and _binary(data):
        raise FileError(path, _binary(data), LOG_ALLOWED)
    if contents.bad:
        n = contents.bad[0]
        raise FileError(path, f"line {n} is {_not_a_record(data.splitlines()[n - 1])}", LOG_ALLOWED)
    if not contents.records:
        why = f"{contents.torn} bytes without a newline" if contents.torn else "blank lines" if data else "an empty file"
        raise FileError(path, f"no complete record ({why})", LOG_ALLOWED)
    if contents.records[0].get("type") != "session":
        raise FileError(path, f"line {contents.lines[0]}, its first record, is not a session record", LOG_ALLOWED)
    return list(zip(contents.lines, contents.records))


def shown_field(rec: dict, key: str) -> str:
    """A record's field as an error message quotes it: its JSON, shortened, or ``missing``."""
    return "missing" if key not in rec else shorten(json.dumps(rec[key]))


def read_logs(paths) -> list:
    """``(path, records)`` per campaign log, its :func:`log_records` read once (every reader
    below takes these).

    Raises:
        FileError: see :func:`log_records`.
    """
    return [(path, log_records(path)) for path in paths]


def ok_timings(path, records):
    """``(line number, record)`` per ``ok`` timing record of ``records`` (:func:`log_records`
    of the campaign log at ``path``), each checked: a ``problem_key`` and a ``perf_config``
    string, a ``median_ms`` that is a finite number > 0.

    Raises:
        FileError: a record that is not so, naming the log, the line and the field.
    """
    for n, r in records:
        if r.get("type") != "timing" or r.get("status") != "ok":
            continue
        for key in ("problem_key", "perf_config"):
            if not isinstance(r.get(key), str):
                raise FileError(path, f"line {n}: an ok timing record without a {key} string ({key}: {shown_field(r, key)})",
                                LOG_ALLOWED)
        if not positive_number(r.get("median_ms")):
            raise FileError(path, f"line {n}: an ok timing record without a median_ms time, a finite number > 0 "
                                  f"(median_ms: {shown_field(r, 'median_ms')})", LOG_ALLOWED)
        yield n, r


def read_verdicts(path, records) -> list:
    """The ``verdict`` records of ``records`` (:func:`log_records` of the campaign log at
    ``path``), in file order.

    Raises:
        FileError: a verdict has no string ``problem_key`` or a time that is not a finite
            number >= 0 (or null). The message names the log and the line.
    """
    out = []
    for n, rec in records:
        if rec.get("type") != "verdict":
            continue
        if not isinstance(rec.get("problem_key"), str):
            raise FileError(path, f"line {n}: a verdict without a problem_key string", LOG_ALLOWED)
        for f in TIMES:
            v = rec.get(f)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))
                                  or not math.isfinite(v) or v < 0):
                raise FileError(path, f"line {n}: {f} {shorten(v)} is not a time (a number >= 0 or null)",
                                LOG_ALLOWED)
        for f in ("default", "winner"):
            if rec.get(f) is not None and not isinstance(rec[f], str):
                raise FileError(path, f"line {n}: a verdict whose {f} is not a perf config string ({f}: "
                                      f"{shown_field(rec, f)})", LOG_ALLOWED)
        out.append(rec)
    return out


METHOD_NAMES = {"graph": "graph replays (-J 1)", "events": "single launches (CUDA events)",
                "wall": "the CPU engine's wall clock"}
"""How a timing record's ``method`` says its times were taken (the campaign worker's)."""


def timing_methods(logs) -> str:
    """One line saying how the ok timing records of ``logs`` (:func:`read_logs`) were timed,
    e.g. ``Timing: 1000 configs as graph replays (-J 1)``: a table of event-timed launches is
    not the benchmark's (below ~30 us launch latency reorders configs)."""
    counts = {}
    for _, records in logs:
        for _, rec in records:
            if rec.get("type") == "timing" and rec.get("status") == "ok":
                m = rec.get("method")
                counts[m] = counts.get(m, 0) + 1
    if not counts:
        return "Timing: no timed config in the logs"
    parts = [f"{n} configs as {METHOD_NAMES.get(m, 'an unrecorded method' if m is None else str(m))}"
             for m, n in sorted(counts.items(), key=lambda kv: -kv[1])]
    return "Timing: " + ", ".join(parts)


def verdicts(logs) -> dict:
    """problem key -> the last ``verdict`` record over ``logs`` (:func:`read_logs`, in order: a
    resumed campaign's later verdict wins). Raises FileError as :func:`read_verdicts`."""
    out = {}
    for path, records in logs:
        for rec in read_verdicts(path, records):
            out[rec["problem_key"]] = rec
    return out


SUITE_ALLOWED = "the suite file the campaign tuned (one MIOpenDriver line a row, '# label class=...' after it)"
MAX_SUITE_BYTES = 64 << 20


def read_plan(path) -> list:
    """:func:`bench.compare.plan_rows` of the suite file at ``path`` (as written), each row
    with its command already parsed.

    Raises:
        ValueError: the file cannot be read, has no lines, or a line is not a
            ``conv``/``convfp16``/``convbfp16`` line dgrad-driver takes; the message names
            the suite and the line.
    """
    plan = []
    try:
        text = read_text(path, MAX_SUITE_BYTES, "suite file")
    except FileError as e:
        raise ValueError(f"--suite {e}") from None
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        cmd, _, label = line.partition("#")
        try:
            [item] = plan_rows([(label.strip(), cmd.strip())], AS_WRITTEN)
            problem = parse(item["cmd"].split()).problem
            item["key"] = problem.problem_key()
            if problem.tf32:            # -M 0: its own key and kernels; not the fp32 row of the layer
                item["dtype"] = "tf32"
        except ValueError as e:
            why = shorten(str(e).removeprefix(": "), 200)   # a message that already says what is allowed
            raise ValueError(f"--suite {str(path)!r}: line {n}: {why}" + ("" if "allowed" in why else
                                                                           f"; allowed: {SUITE_ALLOWED}")) from None
        plan.append(item)
    if not plan:
        raise ValueError(f"--suite {str(path)!r}: no lines; allowed: {SUITE_ALLOWED}")
    return plan


def timed_configs(logs) -> dict:
    """problem key -> {perf config -> median ms} of the ok timing records of ``logs``
    (:func:`read_logs`; a later record of the same config wins). Raises FileError as
    :func:`ok_timings`."""
    out = {}
    for path, records in logs:
        for _, rec in ok_timings(path, records):
            out.setdefault(rec["problem_key"], {})[rec["perf_config"]] = float(rec["median_ms"])
    return out


def campaign_arch(logs) -> str:
    """The ``arch`` of the session records of ``logs`` (:func:`read_logs`; the target the
    campaign tuned for).

    Raises:
        FileError: a session record's arch is not a known arch name (naming the log and line).
        ValueError: no session record names an arch, or two logs name different ones."""
    arches = set()
    for path, records in logs:
        for n, rec in records:
            if rec.get("type") != "session" or rec.get("arch") is None:
                continue
            arch = rec["arch"]
            try:
                get_target(arch)
            except TargetError as e:
                raise FileError(path, f"line {n}: the session record's arch {shown_field(rec, 'arch')} is not an arch name "
                                      f"({shorten(e)})", LOG_ALLOWED) from None
            arches.add(arch)
    if len(arches) != 1:
        why = "no session record names an arch" if not arches else f"the logs name {len(arches)} arches: " + \
            ", ".join(sorted(map(str, arches)))
        raise ValueError(f"--defaults current: {why}; allowed: --defaults logged, or logs of one target")
    return arches.pop()


def current_defaults(plan, arch: str) -> dict:
    """problem key -> the serialized default config the solver picks now on ``arch``
    (:meth:`~miopen_solver.solver.DgradSolver.get_default_performance_config`)."""
    from miopen_solver.solver import DgradSolver
    solver, target = DgradSolver(), get_target(arch)
    out = {}
    for item in plan:
        problem = parse(item["cmd"].split()).problem
        out[problem.problem_key()] = solver.get_default_performance_config(problem, target).serialize()
    return out


def rows(plan, found: dict, within: float, *, defaults: dict | None = None, timed: dict | None = None) -> list:
    """One dict per suite line: ``label, cls, dtype, configs, default, default_ms, best,
    best_ms, ratio`` (default/best), ``ok`` (ratio <= 1 + within); ``ratio`` is None without
    a verdict with both times. With ``defaults`` (key -> the current default) and ``timed``
    (:func:`timed_configs`), the default is the current one, its time the campaign's for that
    config (``changed``: it is not the default the campaign ran; ``default_ms`` None where the
    campaign never timed it)."""
    out = []
    for item in plan:
        key = item.get("key") or parse(item["cmd"].split()).problem.problem_key()
        v = found.get(key) or {}
        d, b, default = v.get("default_median_ms"), v.get("winner_median_ms"), v.get("default")
        changed = False
        if defaults is not None and v:
            now = defaults.get(key, default)
            changed = now != default
            if changed:
                default, d = now, (timed or {}).get(key, {}).get(now)
        ratio = d / b if d and b else None
        out.append({"label": item["label"], "cls": item["cls"], "dtype": item["dtype"], "key": key,
                    "configs": v.get("ok"), "default": default, "default_ms": d, "changed": changed,
                    "best": v.get("winner"), "best_ms": b, "ratio": ratio,
                    "ok": None if ratio is None else ratio <= 1 + within})
    return out


def summary(table: list, within: float) -> list:
    """Markdown lines: per class (the zoo's order) and in total, layers, timed, within,
    geomean and worst default/best."""
    lines = [f"| class | layers | timed | default within {within:.0%} of best | geomean default/best | worst |",
             "|---|---|---|---|---|---|"]
    order = [c for c in CLASSES + (UNTAGGED,) if any(r["cls"] == c for r in table)]
    order += sorted({r["cls"] for r in table} - set(order))
    for cls in order + ["**total**"]:
        part = table if cls == "**total**" else [r for r in table if r["cls"] == cls]
        timed = [r for r in part if r["ratio"] is not None]
        ratios = [r["ratio"] for r in timed]
        lines.append(f"| {cls} | {len(part)} | {len(timed)} | {sum(r['ok'] for r in timed)} | "
                     f"{geomean(ratios):.3f} | {max(ratios):.3f} |" if timed else
                     f"| {cls} | {len(part)} | 0 | 0 | n/a | n/a |")
    return lines


def layer_table(table: list) -> list:
    """Markdown lines, one row per layer, worst ratio first."""
    lines = ["| layer | class | dtype | configs | default ms | best ms | default/best | default | best |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(table, key=lambda r: -(r["ratio"] or 0)):
        now = " (changed since the campaign)" if r.get("changed") else ""
        if r["ratio"] is None:
            why = "n/a (not timed)" if r.get("changed") else "n/a"
            shown = f"`{r['default']}`{now}" if r.get("changed") else ""
            lines.append(f"| {r['label']} | {r['cls']} | {r['dtype']} | n/a | | | {why} | {shown} | |")
            continue
        mark = "" if r["ok"] else " **"
        lines.append(f"| {r['label']} | {r['cls']} | {r['dtype']} | {r['configs']} | {r['default_ms'] * 1e3:.1f} us | "
                     f"{r['best_ms'] * 1e3:.1f} us | {r['ratio']:.3f}{mark} | `{r['default']}`{now} | `{r['best']}` |")
    return lines


within_arg = number_arg(0, 10, "a number, 0 <= value < 10")
"""``--within`` (a fraction of the best time) of this script and of ``bench/fit_cost_model.py``."""
WITHIN_DEFAULT = 0.10


def main(argv=None) -> int:
    return guarded_main("default_vs_tuned", _main, argv)


def _main(argv=None) -> int:
    ap = OneLineParser(prog="default_vs_tuned", description=__doc__.split("\n\n")[0])
    ap.add_argument("logs", nargs="+", help="campaign results logs (JSON Lines, gzip allowed), in the order they were "
                                            "written")
    ap.add_argument("--suite", default="bench/zoo.txt", help="the suite file the campaign tuned")
    ap.add_argument("--within", type=within_arg, default=WITHIN_DEFAULT,
                    help="the default counts as good within this fraction of the best (default 0.10)")
    ap.add_argument("--defaults", choices=("current", "logged"), default="current",
                    help="judge the default the solver picks now (current, the default) or the one the campaign ran")
    ap.add_argument("--out", help="write the markdown here (else stdout)")
    ap.add_argument("--json", help="also write the rows as JSON here")
    a = ap.parse_args(argv)
    try:
        for path in a.logs:             # each log a readable file, before anything else
            try:
                stat_regular(path, LOG_WHAT)
            except FileError as e:
                raise ValueError(f"log {e}") from None
        # refused before any work: a log given twice, an output that is an input or another output
        check_outputs([("log", p) for p in a.logs] + [("--suite", a.suite)], out=a.out, json=a.json)
        plan = read_plan(a.suite)
        try:
            logs = read_logs(a.logs)
            found = verdicts(logs)
            if found and not any(item["key"] in found for item in plan):
                raise ValueError(f"--suite {a.suite!r}: none of its {len(plan)} lines has a verdict in the logs "
                                 f"(they hold {len(found)}, all for other problems); allowed: {SUITE_ALLOWED}")
            timing = timing_methods(logs)
            now = timed = None
            if a.defaults == "current" and found:
                now, timed = current_defaults(plan, campaign_arch(logs)), timed_configs(logs)
        except FileError as e:
            raise ValueError(f"log {e}") from None
        table = rows(plan, found, a.within, defaults=now, timed=timed)
        text = "\n".join([timing, ""] + summary(table, a.within) + [""] + layer_table(table)) + "\n"
        if a.out:
            _write("--out", a.out, text)
        else:
            sys.stdout.write(text)
        if a.json:
            _write("--json", a.json, json_text(table, indent=1) + "\n")
    except (OSError, ValueError) as e:     # FileError, BadInput, MiopenCommandError are ValueErrors
        print(f"default_vs_tuned: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
