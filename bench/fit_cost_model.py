"""Fit and judge :mod:`miopen_solver.cost_model` on H200 timings (no GPU needed).

Data: the timing records of ``dgrad-driver tune`` campaign logs (JSON Lines, gzip allowed;
CUDA-event times of single launches) joined to a suite file's lines by problem key, and the
rows of ``bench/compare.py --json`` reports (CUDA-graph times of default configs). Only
NHWC fp16/bf16 rows of the modelled warpgroup schedules count.

The fit is non-negative least squares on relative error (each row divided by its measured
time; one intercept per timing method, since an event-timed launch carries the launch
latency a graph hides). The judgement is leave-one-layer-out over the campaign's layers:
refit without the layer, rank the layer's timed configs by the model, and ask whether the
model's first is within ``--within`` of the best timed -- beside the same question for the
current default::

    python bench/fit_cost_model.py --log zoo_tune.jsonl.gz --suite bench/zoo.txt \\
        --report zoo_1of2.json,zoo_2of2.json --out fit.md

It prints the coefficients as the Python literal ``cost_model.H200`` takes.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.default_vs_tuned import read_plan  # noqa: E402
from miopen_solver import cost_model  # noqa: E402
from miopen_solver.command import parse  # noqa: E402
from miopen_solver.config import PerfConfig  # noqa: E402
from miopen_solver.errors import PerfConfigError  # noqa: E402
from miopen_solver.fileio import write_text  # noqa: E402
from miopen_solver.spec import make_spec  # noqa: E402
from miopen_solver.target import get_target  # noqa: E402

METHODS = ("graph", "events")


def _records(path: Path):
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                raise ValueError(f"--log {str(path)!r}: line {n} is not JSON; allowed: a dgrad-driver tune --results log") from None


def _row(problem, config: str, us: float, method: str, layer: str, default: bool, target):
    if not cost_model.modelled(problem, target) or not problem.all_nhwc:
        return None
    try:
        cfg = PerfConfig.parse(config)
        spec = make_spec(problem, target, cfg)
        f = cost_model.features(spec)
    except (PerfConfigError, ValueError):
        return None
    return {"layer": layer, "config": cfg, "us": us, "method": method, "default": default, "f": f}


def load(logs, suite: str, reports, target) -> list:
    """Rows ``{layer, config, us, method, default, f}`` from campaign logs and compare reports."""
    rows = []
    if logs:
        plan = {item["key"]: item for item in read_plan(suite)}
        for path in logs:
            for r in _records(Path(path)):
                if r.get("type") != "timing" or r.get("status") != "ok" or r.get("problem_key") not in plan:
                    continue
                item = plan[r["problem_key"]]
                p = parse(item["cmd"].split()).problem
                row = _row(p, r["perf_config"], r["median_ms"] * 1e3, "events", item["label"], bool(r.get("default")), target)
                if row:
                    rows.append(row)
    for path in reports or ():
        try:
            report = json.loads(Path(path).read_text())["rows"]
        except (json.JSONDecodeError, KeyError, TypeError):
            raise ValueError(f"--report {str(path)!r}: not a compare.py --json file "
                             "(a JSON object with rows); allowed: compare.py --json output") from None
        for r in report:
            if not r.get("ours_ms") or not r.get("config"):
                continue
            p = parse(r["line"].split()).problem
            row = _row(p, r["config"], r["ours_ms"] * 1e3, "graph", "report:" + r["label"], True, target)
            if row:
                rows.append(row)
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
    from scipy.optimize import nnls
    y = np.array([r["us"] for r in rows])
    theta, _ = nnls(design(rows) / y[:, None], np.ones_like(y))
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


def judge(rows, min_configs: int = 5) -> list:
    """Leave-one-layer-out over the campaign's layers: per layer (in every type) the best
    timed config, the default's time and the model's first pick among the timed configs,
    with the model refitted on the other layers' rows."""
    layers = defaultdict(list)
    for r in rows:
        if r["method"] == "events":
            layers[r["layer"]].append(r)
    out = []
    for label, rs in sorted(layers.items()):
        if len(rs) < min_configs:
            continue
        coef = fit([r for r in rows if layer_of(r["layer"]) != layer_of(label)], "events")
        best = min(rs, key=lambda r: r["us"])
        pick = min(rs, key=lambda r: coef.time_us(r["f"]))
        dflt = [r for r in rs if r["default"]]
        out.append({"layer": label, "configs": len(rs), "best_us": best["us"], "best": str(best["config"]),
                    "model_us": pick["us"], "model": str(pick["config"]),
                    "default_us": dflt[0]["us"] if dflt else None})
    return out


def coefficients_literal(c: cost_model.Coefficients) -> str:
    def per(d):
        return "{" + ", ".join(f"KernelSchedule.{s.name}: {v:.4g}" for s, v in d.items()) + "}"
    shared = ", ".join(f"{v:.4g}" for v in c.shared)
    return (f"H200 = Coefficients(\n    intercept={per(c.intercept)},\n    mma={per(c.mma)},\n"
            f"    shared=({shared}),\n)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--log", action="append", default=[], help="a tune campaign log (repeatable)")
    ap.add_argument("--suite", default="bench/zoo.txt", help="the suite file the campaign tuned")
    ap.add_argument("--report", default="", help="comma list of compare.py --json files")
    ap.add_argument("--within", type=float, default=0.10)
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--out", default=None, help="write the markdown here too")
    args = ap.parse_args(argv)
    try:
        target = get_target(args.arch)
        rows = load(args.log, args.suite, [p for p in args.report.split(",") if p], target)
    except (OSError, ValueError, KeyError) as e:
        why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        name = f" {e.filename!r}" if isinstance(e, OSError) and e.filename else ""
        print(f"fit_cost_model.py:{name} {why}", file=sys.stderr)
        return 2
    if not rows:
        print("fit_cost_model.py: no modelled rows in the inputs", file=sys.stderr)
        return 2
    coef = fit(rows)
    lines = [f"rows: {len(rows)} ({sum(r['method'] == 'events' for r in rows)} campaign, "
             f"{sum(r['method'] == 'graph' for r in rows)} report)",
             f"rms relative error on report rows: {rms_relative_error(coef, rows):.3f}", "",
             "```python", coefficients_literal(coef), "```", ""]
    table = judge(rows)
    if table:
        lines += ["| layer | configs | best us | default/best | model/best (left out) | model pick |",
                  "|---|---|---|---|---|---|"]
        m_ok = d_ok = d_n = 0
        for t in table:
            mr = t["model_us"] / t["best_us"]
            dr = t["default_us"] / t["best_us"] if t["default_us"] else None
            m_ok += mr <= 1 + args.within
            if dr is not None:
                d_n += 1
                d_ok += dr <= 1 + args.within
            lines.append(f"| {t['layer']} | {t['configs']} | {t['best_us']:.1f} | "
                         f"{'n/a' if dr is None else f'{dr:.3f}'} | {mr:.3f} | `{t['model']}` |")
        gm = math.exp(sum(math.log(t["model_us"] / t["best_us"]) for t in table) / len(table))
        lines += ["", f"model's pick within {args.within:.0%} of the best timed: {m_ok}/{len(table)} "
                      f"(geomean model/best {gm:.3f}); default: {d_ok}/{d_n}"]
    text = "\n".join(lines)
    print(text)
    if args.out:
        try:
            write_text(args.out, text + "\n")
        except ValueError as e:
            print(f"fit_cost_model.py: --out {e}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
