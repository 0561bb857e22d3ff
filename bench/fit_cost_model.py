"""Fit and judge :mod:`miopen_solver.cost_model` on H200 timings (no GPU needed).

Data: the timing records of ``dgrad-driver tune`` campaign logs (JSON Lines, gzip allowed;
CUDA-event times of single launches, or graph replays where a record says `method: graph`, a -J 1 line) joined to a suite file's lines by problem key, and the
rows of ``bench/compare.py --json`` reports (CUDA-graph times of default configs). Only
NHWC fp16/bf16 rows of the modelled warpgroup schedules count.

The fit is non-negative least squares on relative error (each row divided by its measured
time; one intercept per timing method, since an event-timed launch carries the launch
latency a graph hides). The judgement is leave-one-layer-out over the campaign's layers:
refit without the layer, rank the layer's timed configs by the model, and ask whether the
model's first is within ``--within`` of the best timed -- beside the same question for the
current default. Where two reports timed a layer at different configs (the rules' default in
the earlier file, the model's pick in the later), the same refit judges the pair: does the
model rank the faster first, and what would switching at each margin gain::

    python bench/fit_cost_model.py --log zoo_tune.jsonl.gz --suite bench/zoo.txt \\
        --report zoo_1of2.json,zoo_2of2.json --out fit.md

It prints the coefficients as the Python literal ``cost_model.H200`` takes.
"""

from __future__ import annotations

import json
import math
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.compare import (REPORT_ALLOWED, OneLineParser, _write, check_outputs, guarded_main,  # noqa: E402
                           positive_number, read_report, row_problem)
from bench.default_vs_tuned import (LOG_ALLOWED, MAX_LOG_BYTES, WITHIN_DEFAULT, log_records, ok_timings, read_plan,  # noqa: E402
                                    shown_field, within_arg)
from miopen_solver import cost_model, heuristics  # noqa: E402
from miopen_solver.command import parse  # noqa: E402
from miopen_solver.config import PerfConfig  # noqa: E402
from miopen_solver.errors import FileError, PerfConfigError, shown_path  # noqa: E402
from miopen_solver.fileio import read_text  # noqa: E402
from miopen_solver.text import shorten  # noqa: E402
from miopen_solver.spec import make_spec  # noqa: E402
from miopen_solver.target import PRESETS, get_target  # noqa: E402

METHODS = ("graph", "events")


def _timings(path, plan: dict):
    """``(record, plan item or None)`` per ``ok`` timing record of the log at ``path`` (the
    item of ``plan`` its problem key names, None where no suite line has it); every ``ok``
    timing record is checked (a ``problem_key`` and ``perf_config`` string, a ``median_ms``
    > 0). Raises FileError naming the line (and see
    :func:`bench.default_vs_tuned.log_records`)."""
    for _, r in ok_timings(path, log_records(path)):
        yield r, plan.get(r["problem_key"])


def _report_rows(path):
    """``(row number, row, problem)`` per row of a compare.py ``--json`` file with a time
    and a config. Raises FileError: see :func:`bench.compare.read_report`; a timed row whose
    line is not one dgrad-driver takes."""
    for n, r in enumerate(read_report(path)[1], 1):
        if r.get("ours_ms") is None or r.get("config") is None:
            continue
        yield n, r, _line_problem(path, n, r["line"], REPORT_ALLOWED)


def _line_problem(path, n: int, line: str, allowed: str):
    """The problem of row ``n``'s MIOpenDriver ``line``. Raises FileError naming the row."""
    try:
        return row_problem(line)
    except ValueError as e:
        raise FileError(path, f"row {n}: line {shorten(line)!r} does not parse ({shorten(e, 160)})", allowed) from None


CONFIGS_ALLOWED = ("a time_configs.py --json file (a JSON list of row objects with line, label and config "
                   "strings and ours_ms a positive finite number or null)")


def _configs_rows(path):
    """``(row number, row, problem)`` per timed row of a ``bench/time_configs.py --json`` file
    (several configs of one line, CUDA-graph times like compare.py's). Raises FileError: not
    such a file, naming the row at fault."""
    text = read_text(path, MAX_LOG_BYTES, CONFIGS_ALLOWED[len("a "):])
    try:
        data = json.loads(text)
    except ValueError as e:
        raise FileError(path, f"not JSON ({shorten(e)})", CONFIGS_ALLOWED) from None
    if not isinstance(data, list):
        raise FileError(path, f"a JSON {type(data).__name__}, not a list of rows", CONFIGS_ALLOWED)
    for n, r in enumerate(data, 1):
        if not isinstance(r, dict) or not all(isinstance(r.get(k), str) for k in ("line", "label")):
            raise FileError(path, f"row {n} is not an object with line and label strings", CONFIGS_ALLOWED)
        if r.get("ours_ms") is None or r.get("config") is None:
            continue
        if not isinstance(r["config"], str) or not positive_number(r["ours_ms"]):
            raise FileError(path, f"row {n}: config {shown_field(r, 'config')} / ours_ms {shown_field(r, 'ours_ms')} is not "
                                  "a string / a positive finite number", CONFIGS_ALLOWED)
        yield n, r, _line_problem(path, n, r["line"], CONFIGS_ALLOWED)


def _row(problem, config: str, us: float, method: str, layer: str, default: bool, target, source: str = "report"):
    if not cost_model.modelled(problem, target) or not problem.all_nhwc:
        return None
    try:
        cfg = PerfConfig.parse(config)
        spec = make_spec(problem, target, cfg)
        f = cost_model.features(spec)
    except (PerfConfigError, ValueError):
        return None
    return {"layer": layer, "config": cfg, "us": us, "method": method, "default": default, "f": f, "source": source,
            "problem": problem}


def load(logs, suite: str, reports, target, configs=()) -> list:
    """Rows ``{layer, config, us, method, default, f}`` from campaign logs, compare reports
    and ``time_configs.py`` files (``configs``: each row its own config, ``default`` where the
    row says its config is the default).

    Raises:
        ValueError: a suite, log or report that cannot be read or is not one (the message
            names the flag, the file, the line or row, and what is allowed); a log without an
            ok timing record, or none of whose records is of a suite line (not the suite the
            campaign tuned); no modelled row in all the inputs.
    """
    rows, timed = [], 0
    if logs:
        plan = {item["key"]: item for item in read_plan(suite)}
        for path in logs:
            ok = joined = 0
            try:
                for r, item in _timings(path, plan):
                    ok += 1
                    if item is None:
                        continue
                    joined += 1
                    p = parse(item["cmd"].split()).problem
                    method = "graph" if r.get("method") == "graph" else "events"   # a -J 1 campaign: graphs
                    rows.append(_row(p, r["perf_config"], r["median_ms"] * 1e3, method, item["label"],
                                     bool(r.get("default")), target, "campaign"))
            except FileError as e:
                raise ValueError(f"--log {e}") from None
            if not ok:
                raise ValueError(f"--log {shown_path(path)}: no ok timing record (nothing timed); allowed: "
                                 f"{LOG_ALLOWED} with timed configs")
            if not joined:
                raise ValueError(f"--log {shown_path(path)}: none of its {ok} ok timing records is of a line of "
                                 f"--suite {shown_path(suite)} ({len(plan)} lines; the log is of other problems); "
                                 f"allowed: a --suite that is the suite file the campaign tuned")
            timed += joined
    for flag, paths, read in (("--report", reports, _report_rows), ("--configs", configs, _configs_rows)):
        for path in paths or ():
            try:
                for _, r, p in read(path):
                    timed += 1
                    default = True if flag == "--report" else r.get("config_source") == "default"
                    rows.append(_row(p, r["config"], r["ours_ms"] * 1e3, "graph", "report:" + r["label"], default,
                                     target))
            except FileError as e:
                raise ValueError(f"{flag} {e}") from None
    rows = [r for r in rows if r]
    if not rows:
        raise ValueError(f"no modelled rows: none of the {timed} timed rows of the inputs is an NHWC fp16/bf16 problem "
                         f"with a config on a warpgroup schedule the cost model covers on {target.name} (cpg > 32, "
                         "kpg >= 64, 2-D); allowed: inputs that time such problems (e.g. bench/zoo.txt's)")
    return rows


def design(rows) -> np.ndarray:
    """Columns: an intercept per (timing method, schedule), an MMA weight per schedule, one
    weight per shared feature."""
    sched = cost_model.MODELLED
    out = []
    for r in rows:
        f = r["f"]
        x = [1.0 if r["method"] == m and f.schedule is s else 0.0 for m in METHODS for s in sched]
        x += [f.mma if f.schedule is s else 0.0 for s in sched]
        x += [getattr(f, n) for n in cost_model.SHARED]
        out.append(x)
    return np.array(out)


def fit(rows, method: str = "graph") -> cost_model.Coefficients:
    """Non-negative least squares of relative error over ``rows``; the coefficients with the
    intercepts of timing ``method``."""
    return coefficients_of(solve(rows), method)


def solve(rows) -> np.ndarray:
    """The weights of :func:`design`'s columns: non-negative least squares of relative error."""
    from scipy.optimize import nnls
    y = np.array([r["us"] for r in rows])
    return nnls(design(rows) / y[:, None], np.ones_like(y))[0]


def coefficients_of(theta, method: str = "graph") -> cost_model.Coefficients:
    """:func:`solve`'s weights as the model's coefficients, with the intercepts of timing ``method``."""
    sched = cost_model.MODELLED
    k = len(METHODS) * len(sched)
    m = METHODS.index(method) * len(sched)
    return cost_model.Coefficients(
        intercept={s: float(theta[m + i]) for i, s in enumerate(sched)},
        mma={s: float(theta[k + i]) for i, s in enumerate(sched)},
        shared=tuple(float(v) for v in theta[k + len(sched):]))


def rms_relative_error(coef, rows) -> float:
    errs = [(coef.time_us(r["f"]) - r["us"]) / r["us"] for r in rows if r["method"] == "graph"]
    return math.sqrt(sum(e * e for e in errs) / len(errs)) if errs else float("nan")


def layer_of(label: str) -> str:
    """The layer a row times, whatever its data type (a zoo label's ``_bf16``/``_fp32``
    suffix names the type): leave-one-out leaves the layer out in every type."""
    for suffix in ("_bf16", "_fp32", "_fp16"):
        label = label.removesuffix(suffix)
    return label.removeprefix("report:")


def source_of(row: dict) -> str:
    """Where a row came from: ``campaign`` (a tune log: many configs of a layer, timed as
    events or, on a ``-J 1`` line, as graph replays) or ``report`` (compare.py and
    time_configs.py files). Rows built without it: by method, as before graph-timed logs."""
    return row.get("source") or ("campaign" if row["method"] == "events" else "report")


def model_default(problem, target, coef) -> PerfConfig:
    """The solver's default for ``problem`` were the model's weights ``coef``
    (:func:`heuristics.heuristic_config` with them)."""
    return heuristics.heuristic_config(problem, target, coefficients=coef)


def judge(rows, min_configs: int = 5, target=None) -> list:
    """Leave-one-layer-out over the campaign's layers: per layer (in every type) the best
    timed config, the default's time, the model's first pick among the timed configs, and
    the default the refitted model would make (``refit``: :func:`model_default` over all
    candidates, its time None where the campaign did not time it -- the pick among timed
    configs alone flatters a model whose real pick is a config nobody timed), with the
    model refitted on the other layers' rows."""
    target = target or get_target("sm_90")
    layers = defaultdict(list)
    for r in rows:
        if source_of(r) == "campaign":       # event- or graph-timed (a -J 1 campaign): by source, not method
            layers[(r["layer"], r["method"])].append(r)
    out = []
    for (label, method), rs in sorted(layers.items()):
        if len(rs) < min_configs:
            continue
        theta = solve([r for r in rows if layer_of(r["layer"]) != layer_of(label)])
        coef = coefficients_of(theta, method)
        best = min(rs, key=lambda r: r["us"])
        pick = min(rs, key=lambda r: coef.time_us(r["f"]))
        dflt = [r for r in rs if r["default"]]
        # the solver's default is made with the graph intercepts (those the shipped weights carry)
        refit = model_default(rs[0]["problem"], target, coefficients_of(theta, "graph"))
        timed = {r["config"]: r["us"] for r in rs}
        out.append({"layer": label, "configs": len(rs), "best_us": best["us"], "best": str(best["config"]),
                    "model_us": pick["us"], "model": str(pick["config"]),
                    "default_us": dflt[0]["us"] if dflt else None,
                    "refit": str(refit), "refit_us": timed.get(refit)})
    return out


MARGINS = (0.0, 0.05, 0.1, 0.2, 0.3)
"""The predicted gains :func:`judge_pairs` tries as :data:`cost_model.MIN_GAIN`."""


def judge_pairs(rows, margins=MARGINS) -> dict:
    """Leave-one-layer-out over the layers that reports timed at different configs: the
    baseline is the config of the earliest ``--report`` file (the rules' default), paired with
    each other config a later file timed; the model, refitted without the layer, takes the other config where it
    predicts the baseline at least ``margin`` slower. Returns ``{"pairs": n, "correct": the
    pairs whose faster config the model ranks first, "oracle": geomean of baseline / faster,
    margin: (pairs switched, geomean baseline / chosen, worst baseline / chosen)}``."""
    first = {}
    pairs, seen = [], set()
    for r in rows:
        if source_of(r) != "report":          # compare.py / time_configs.py rows only
            continue
        base = first.setdefault(r["layer"], r)
        if base["config"] != r["config"] and (r["layer"], r["config"]) not in seen:
            seen.add((r["layer"], r["config"]))
            pairs.append((base, r))
    out = {"pairs": len(pairs), "correct": 0, "oracle": 1.0}
    if not pairs:
        return out
    preds = []
    for base, other in pairs:
        coef = fit([r for r in rows if layer_of(r["layer"]) != layer_of(base["layer"])])
        ratio = coef.time_us(base["f"]) / coef.time_us(other["f"])
        out["correct"] += (ratio > 1) == (base["us"] > other["us"])
        preds.append((ratio, base["us"], other["us"]))
    out["oracle"] = math.exp(sum(math.log(b / min(b, o)) for _, b, o in preds) / len(preds))
    for m in margins:
        gains = [b / (o if ratio >= 1 + m else b) for ratio, b, o in preds]
        out[m] = (sum(ratio >= 1 + m for ratio, _, _ in preds),
                  math.exp(sum(map(math.log, gains)) / len(gains)), min(gains))
    return out


def coefficients_literal(c: cost_model.Coefficients) -> str:
    def per(d):
        return "{" + ", ".join(f"KernelSchedule.{s.name}: {v:.4g}" for s, v in d.items()) + "}"
    shared = ", ".join(f"{v:.4g}" for v in c.shared)
    return (f"H200 = Coefficients(\n    intercept={per(c.intercept)},\n    mma={per(c.mma)},\n"
            f"    shared=({shared}),\n    strided_plain=STRIDED_PLAIN,\n)")


MODELLED_ARCHS = tuple(name for name, t in PRESETS.items() if t.wgmma)
"""The ``--arch`` values the cost model covers (:func:`cost_model.modelled`: warpgroup MMA)."""
DEFAULT_SUITE = "bench/zoo.txt"


def _paths(flag: str, text, allowed: str) -> list:
    """The paths of a comma list option (none when not given). Raises ValueError: a list
    with an empty name (``--report ,``)."""
    if text is None:
        return []
    paths = text.split(",")
    if not all(p.strip() for p in paths):
        raise ValueError(f"{flag} {shorten(text)!r}: an empty name in the comma list; allowed: a comma list of paths, "
                         f"each {allowed}")
    return paths


def main(argv=None) -> int:
    return guarded_main("fit_cost_model.py", _main, argv)


def _main(argv=None) -> int:
    ap = OneLineParser(prog="fit_cost_model.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--log", action="append", default=[], help="a tune campaign log, gzip allowed (repeatable)")
    ap.add_argument("--suite", default=None, help="the suite file the campaign tuned (with --log; default "
                                                   f"{DEFAULT_SUITE})")
    ap.add_argument("--report", default=None, help="comma list of compare.py --json files")
    ap.add_argument("--configs", default=None, help="comma list of time_configs.py --json files")
    ap.add_argument("--within", type=within_arg, default=WITHIN_DEFAULT,
                    help="a pick counts as good within this fraction of the best timed (default 0.10)")
    ap.add_argument("--arch", default="sm_90",
                    help="the target whose schedules and tiles the rows are modelled on (default sm_90, the H200; "
                         f"the cost model covers {', '.join(MODELLED_ARCHS)}: warpgroup MMA)")
    ap.add_argument("--out", default=None, help="write the markdown here too")
    args = ap.parse_args(argv)
    try:
        if not (args.log or args.report is not None or args.configs is not None):
            raise ValueError("no inputs; allowed: at least one of --log, --report, --configs")
        reports = _paths("--report", args.report, REPORT_ALLOWED)
        configs = _paths("--configs", args.configs, CONFIGS_ALLOWED)
        if args.suite is not None and not args.log:
            raise ValueError(f"--suite {shorten(args.suite)!r}: read only with --log (it joins a campaign's records "
                             "to layers); allowed: --suite with one or more --log")
        suite = args.suite or DEFAULT_SUITE
        # refused before the work: an input given twice, an output that is an input
        check_outputs([("--log", p) for p in args.log] + ([("--suite", suite)] if args.log else [])
                      + [("--report", p) for p in reports] + [("--configs", p) for p in configs], out=args.out)
        try:
            target = get_target(args.arch)
        except ValueError as e:
            raise ValueError(f"--arch: {e}") from None
        if not target.wgmma:
            raise ValueError(f"--arch {shorten(args.arch)!r}: no warpgroup MMA, so no schedule the cost model covers; "
                             f"allowed: {', '.join(MODELLED_ARCHS)}")
        rows = load(args.log, suite, reports, target, configs)
    except (OSError, ValueError) as e:
        print(f"fit_cost_model.py: {e}", file=sys.stderr)
        return 2
    coef = fit(rows)
    lines = [f"rows: {len(rows)} ({sum(source_of(r) == 'campaign' for r in rows)} campaign, "
             f"{sum(source_of(r) == 'report' for r in rows)} report; "
             f"{sum(r['method'] == 'graph' for r in rows)} graph-timed)",
             f"rms relative error on graph-timed rows: {rms_relative_error(coef, rows):.3f}", "",
             "```python", coefficients_literal(coef), "```", ""]
    table = judge(rows, target=target)
    if table:
        lines += ["| layer | configs | best us | default/best | model/best (left out) | model pick "
                  "| refit default/best (left out) | refit default |",
                  "|---|---|---|---|---|---|---|---|"]
        m_ok = d_ok = d_n = r_ok = r_untimed = 0
        for t in table:
            mr = t["model_us"] / t["best_us"]
            dr = t["default_us"] / t["best_us"] if t["default_us"] else None
            rr = t["refit_us"] / t["best_us"] if t["refit_us"] else None
            m_ok += mr <= 1 + args.within
            if dr is not None:
                d_n += 1
                d_ok += dr <= 1 + args.within
            r_untimed += rr is None
            r_ok += rr is not None and rr <= 1 + args.within
            lines.append(f"| {t['layer']} | {t['configs']} | {t['best_us']:.1f} | "
                         f"{'n/a' if dr is None else f'{dr:.3f}'} | {mr:.3f} | `{t['model']}` | "
                         f"{'untimed' if rr is None else f'{rr:.3f}'} | `{t['refit']}` |")
        gm = math.exp(sum(math.log(t["model_us"] / t["best_us"]) for t in table) / len(table))
        lines += ["", f"model's pick among the timed configs within {args.within:.0%} of the best timed: "
                      f"{m_ok}/{len(table)} (geomean model/best {gm:.3f}); the refit's default: {r_ok}/{len(table)} "
                      f"({r_untimed} untimed); the shipped default: {d_ok}/{d_n}"]
    pairs = judge_pairs(rows)
    if pairs["pairs"]:
        lines += ["", f"pairs of report rows at two configs (baseline: the earlier --report file): {pairs['pairs']}; "
                      f"the model (left out) orders {pairs['correct']} right; picking the faster of each would gain "
                      f"{pairs['oracle']:.3f} (geomean)", "",
                  "| margin (MIN_GAIN) | switched | geomean baseline/chosen | worst |", "|---|---|---|---|"]
        lines += [f"| {m:.2f} | {pairs[m][0]} | {pairs[m][1]:.3f} | {pairs[m][2]:.2f} |" for m in MARGINS]
    text = "\n".join(lines)
    if args.out is not None:            # the file first: a reader of stdout that goes away does not cut it short
        try:
            _write("--out", args.out, text + "\n")
        except ValueError as e:
            print(f"fit_cost_model.py: {e}", file=sys.stderr)
            return 2
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
