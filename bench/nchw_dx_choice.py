"""Where a kernel stores an NCHW dX itself, time that against the same config storing NHWC
dX into the workspace and transposing it (the other design of issue 16), on every line of a
suite run with all three tensors NCHW (MIOpen's default layout, whatever the line's layout
flags say), in CUDA graphs as
``bench/compare.py`` times them -- to decide :func:`miopen_solver.transpose.nchw_dx_rule`
by measurement::

    python bench/nchw_dx_choice.py --suite bench/zoo.txt --out nchw_dx.md --json nchw_dx.json

Lines whose default does not store NCHW dX (direct, patch, pointwise NCHW, split-K through
the workspace) are skipped; a line that fails is a row saying why (not an error).
"""

from __future__ import annotations

import sys
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.compare import (AS_WRITTEN, BadInput, OneLineParser, check_outputs, count_arg, gpu,  # noqa: E402
                           row_problem, select, shard_arg, stream_table, suite_plan, time_solution)
from miopen_solver import spec as spec_module, transpose  # noqa: E402
from miopen_solver.solver import DgradSolver  # noqa: E402
from miopen_solver.transpose import writes_nchw_dx  # noqa: E402

HEADER = ["| layer | dtype | Hi x Wi | NCHW store (pixels) | config | kernel stores NCHW us | "
          "NHWC + dX transform us | transform / kernel |", "|---|---|---|---|---|---|---|---|"]


def _never(*_args, **_kw) -> bool:
    return False


def _rows(eng, chosen, args):
    solver = DgradSolver()
    for item in chosen:
        p = row_problem(item["cmd"] + " [NCHW]")
        r = {"label": item["label"], "dtype": item["dtype"], "line": item["cmd"] + " [NCHW]"}
        try:
            sol = solver.find_solution(p, eng.target)
            if not writes_nchw_dx(sol.spec):
                continue
            r.update(config=sol.perf_config.serialize(), hw=f"{p.Hi}x{p.Wi}", nchw_vec=getattr(sol.spec, "nchw_dx_vector", "?"),
                     nchw_ms=time_solution(eng, sol, args.launches, args.replays)["ours_ms"])
            with mock.patch.object(transpose, "nchw_dx_rule", _never), mock.patch.object(spec_module, "nchw_dx_rule", _never):
                alt = solver.find_solution(p, eng.target, perf_config=sol.perf_config)
                assert not writes_nchw_dx(alt.spec)
                r["transform_ms"] = time_solution(eng, alt, args.launches, args.replays)["ours_ms"]
        except Exception as e:  # noqa: BLE001 - one line's failure is its row, the sweep goes on
            r["error"] = f"{type(e).__name__}: {e}"[:200]
            yield r, [f"| {r['label']} | {r['dtype']} | | | | {r['error']} | | |"]
            continue
        yield r, [f"| {r['label']} | {r['dtype']} | {r['hw']} | {r['nchw_vec']} | `{r['config']}` | "
                  f"{r['nchw_ms'] * 1e3:.1f} | {r['transform_ms'] * 1e3:.1f} | {r['transform_ms'] / r['nchw_ms']:.2f} |"]


def main(argv=None) -> int:
    ap = OneLineParser(prog="nchw_dx_choice.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", default="bench/zoo.txt")
    ap.add_argument("--only", default="", help="label substring filter")
    ap.add_argument("--shard", type=shard_arg, default=None, help="K/N: every N-th selected line from the K-th")
    ap.add_argument("--launches", type=count_arg, default=20)
    ap.add_argument("--replays", type=count_arg, default=15)
    ap.add_argument("--out", default=None, help="markdown table here")
    ap.add_argument("--json", default=None, help="rows here")
    args = ap.parse_args(argv)
    try:
        check_outputs(out=args.out, json=args.json)
        plan = suite_plan(args.suite, AS_WRITTEN)
        chosen = select(plan, args.only, shard=args.shard or "")
        if not chosen:
            raise BadInput(f"--only {args.only!r}: selects no line of {args.suite}; allowed: a label substring "
                           f"(e.g. {plan[0]['label']!r})")
        _torch, eng = gpu()
    except BadInput as e:
        print(f"nchw_dx_choice.py: {e}", file=sys.stderr)
        return 2
    stream_table(_rows(eng, chosen, args), HEADER, args.json, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
