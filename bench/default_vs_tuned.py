"""Is every default within reach of the best config? The table of a tuning campaign over a
suite file (the zoo): per layer the default config's median time, the best of the configs
the campaign timed, their ratio, and whether the default is within ``--within`` (10%) of
the best; per class and in total, how many are.

The campaign is ``dgrad-driver tune --file SUITE --max-configs 40 --results LOG ...`` (on the
H200: ``STEPS=zoo_tune bench/h200_check.sh``, resumable across device calls); this script
reads its JSON Lines log(s) -- the ``verdict`` record of each problem, joined to the suite's
lines by the problem key -- and needs no GPU::

    python bench/default_vs_tuned.py zoo_tune.jsonl --suite bench/zoo.txt --out default_vs_tuned.md

Times are the campaign's medians (ms); ``default/best`` is >= 1 (1 = the default is the best
timed). A problem the log has no verdict for (not reached, nothing timed) is ``n/a``.
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.compare import AS_WRITTEN, CLASSES, UNTAGGED, OneLineParser, geomean, number_arg, plan_rows  # noqa: E402
from miopen_solver.command import parse  # noqa: E402
from miopen_solver.errors import FileError  # noqa: E402
from miopen_solver.fileio import check_writable, read_bytes, read_text, write_text  # noqa: E402
from miopen_solver.results_log import parse_log  # noqa: E402
from miopen_solver.text import shorten  # noqa: E402


LOG_ALLOWED = "a dgrad-driver tune --results log (JSON Lines, a session record first)"
MAX_LOG_BYTES = 1 << 30
TIMES = ("default_median_ms", "winner_median_ms")


def _bad_log(path, why: str) -> ValueError:
    return ValueError(f"log {str(path)!r}: {why}; allowed: {LOG_ALLOWED}")


def read_verdicts(path) -> list:
    """The ``verdict`` records of the campaign log at ``path``, in file order. Only read
    (a read-only log, e.g. one fetched from a device, is fine); a torn last line (a
    campaign killed mid-write) is skipped as a campaign's ``--resume`` skips it.

    Raises:
        ValueError: the file cannot be read (:class:`FileError`), or it is not a campaign
            log: a complete line that is not a JSON object, no ``session`` record first, a
            verdict without a string ``problem_key`` or with a time that is not a finite
            number >= 0 (or null). The message names the log and the line.
    """
    contents = parse_log(read_bytes(path, MAX_LOG_BYTES, "dgrad-driver tune --results log"))
    if contents.bad:
        raise _bad_log(path, f"line {contents.bad[0]} is not a JSON object")
    if not contents.records:
        raise _bad_log(path, "no complete record")
    if contents.records[0].get("type") != "session":
        raise _bad_log(path, f"line {contents.lines[0]}, its first record, is not a session record")
    out = []
    for n, rec in zip(contents.lines, contents.records):
        if rec.get("type") != "verdict":
            continue
        if not isinstance(rec.get("problem_key"), str):
            raise _bad_log(path, f"line {n}: a verdict without a problem_key string")
        for f in TIMES:
            v = rec.get(f)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))
                                  or not math.isfinite(v) or v < 0):
                raise _bad_log(path, f"line {n}: {f} {shorten(v)} is not a time (a number >= 0 or null)")
        out.append(rec)
    return out


METHOD_NAMES = {"graph": "graph replays (-J 1)", "events": "single launches (CUDA events)",
                "wall": "the CPU engine's wall clock"}
"""How a timing record's ``method`` says its times were taken (the campaign worker's)."""


def timing_methods(paths) -> str:
    """One line saying how the ok timing records of the logs ``paths`` were timed, e.g.
    ``Timing: 1000 configs as graph replays (-J 1)``: a table of event-timed launches is not
    the benchmark's (below ~30 us launch latency reorders configs). Raises ValueError as
    :func:`read_verdicts` (the logs are read again, only their timing records counted)."""
    counts = {}
    for path in paths:
        for rec in parse_log(read_bytes(path, MAX_LOG_BYTES, "dgrad-driver tune --results log")).records:
            if rec.get("type") == "timing" and rec.get("status") == "ok":
                m = rec.get("method")
                counts[m] = counts.get(m, 0) + 1
    if not counts:
        return "Timing: no timed config in the logs"
    parts = [f"{n} configs as {METHOD_NAMES.get(m, 'an unrecorded method' if m is None else str(m))}"
             for m, n in sorted(counts.items(), key=lambda kv: -kv[1])]
    return "Timing: " + ", ".join(parts)


def verdicts(paths) -> dict:
    """problem key -> the last ``verdict`` record over the logs ``paths`` (in order: a resumed
    campaign's later verdict wins). Raises ValueError for a log that is not a campaign's
    (see :func:`read_verdicts`)."""
    out = {}
    for path in paths:
        for rec in read_verdicts(path):
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


def rows(plan, found: dict, within: float) -> list:
    """One dict per suite line: ``label, cls, dtype, configs, default, default_ms, best,
    best_ms, ratio`` (default/best), ``ok`` (ratio <= 1 + within); ``ratio`` is None without
    a verdict with both times."""
    out = []
    for item in plan:
        key = item.get("key") or parse(item["cmd"].split()).problem.problem_key()
        v = found.get(key) or {}
        d, b = v.get("default_median_ms"), v.get("winner_median_ms")
        ratio = d / b if d and b else None
        out.append({"label": item["label"], "cls": item["cls"], "dtype": item["dtype"], "key": key,
                    "configs": v.get("ok"), "default": v.get("default"), "default_ms": d,
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
        if r["ratio"] is None:
            lines.append(f"| {r['label']} | {r['cls']} | {r['dtype']} | n/a | | | n/a | | |")
            continue
        mark = "" if r["ok"] else " **"
        lines.append(f"| {r['label']} | {r['cls']} | {r['dtype']} | {r['configs']} | {r['default_ms'] * 1e3:.1f} us | "
                     f"{r['best_ms'] * 1e3:.1f} us | {r['ratio']:.3f}{mark} | `{r['default']}` | `{r['best']}` |")
    return lines


_within = number_arg(0, 10, "a number, 0 <= value < 10")


def main(argv=None) -> int:
    ap = OneLineParser(prog="default_vs_tuned", description=__doc__.split("\n\n")[0])
    ap.add_argument("logs", nargs="+", help="campaign results logs (JSON Lines), in the order they were written")
    ap.add_argument("--suite", default="bench/zoo.txt", help="the suite file the campaign tuned")
    ap.add_argument("--within", type=_within, default=0.10, help="the default counts as good within this fraction")
    ap.add_argument("--out", help="write the markdown here (else stdout)")
    ap.add_argument("--json", help="also write the rows as JSON here")
    a = ap.parse_args(argv)
    missing = [p for p in a.logs if not Path(p).is_file()]
    if missing:
        print(f"default_vs_tuned: log {missing[0]!r}: not a file; allowed: a dgrad-driver tune --results log",
              file=sys.stderr)
        return 2
    try:
        for flag, path in (("--out", a.out), ("--json", a.json)):
            if path is not None:        # refused before any work, as every output the user names
                try:
                    if check_writable(path) == "file":
                        kept = [p for p in [*a.logs, a.suite] if Path(p).is_file()
                                and os.path.samefile(p, os.path.realpath(path))] if os.path.exists(path) else []
                        if kept:
                            raise FileError(path, f"is the input {kept[0]}", "a file that is not a log or the suite")
                except FileError as e:
                    raise ValueError(f"{flag} {e}") from None
        plan = read_plan(a.suite)
        found = verdicts(a.logs)
        table = rows(plan, found, a.within)
        if found and not any(r["key"] in found for r in table):
            raise ValueError(f"--suite {a.suite!r}: none of its {len(table)} lines has a verdict in the logs "
                             f"(they hold {len(found)}, all for other problems); allowed: {SUITE_ALLOWED}")
        text = "\n".join([timing_methods(a.logs), ""] + summary(table, a.within) + [""] + layer_table(table)) + "\n"
        if a.out:
            write_text(a.out, text)
        else:
            sys.stdout.write(text)
        if a.json:
            write_text(a.json, json.dumps(table, indent=1) + "\n")
    except (OSError, ValueError) as e:     # FileError, MiopenCommandError are ValueErrors
        print(f"default_vs_tuned: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
