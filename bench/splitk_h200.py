"""Split-K on one NVIDIA GPU (H200): no split, atomic split-K and split-K through the fp32
workspace (``_skws``: plain stores of fp32 partial sums, then the reduction kernel), against
cuDNN, on the small-grid lines where splitting K should fill the machine.

Lines (:func:`rows`): the zoo's (``bench/zoo.txt``) dense 1x1 and 3x3 layers (G = 1,
stride 1, dilation 1) on images of 7x7 to 16x16 (7x7 and 14x14, and the 8x8/16x16
small-image lines) with 256 or more channels on one side, then every ``bench/suite.txt``
line and data type whose default config splits K on the target (the 3x3 ResNet-50 lines
on 7x7 .. 28x28).

Per line (:func:`variants`; each a Solution from ``DgradSolver.find_solution``, so the
library decides every config): ``default``; ``sk1`` (``--split-k 1``); ``atomic2``,
``atomic4`` (``--split-k 2|4 --split-k-reduce atomic``, where atomics are allowed) and
``ws2``, ``ws4`` (``--split-k 2|4 --split-k-reduce workspace``). A variant that resolves to
the kernel of one timed before is not timed again. Ours and cuDNN's dgrad (PyTorch,
channels_last, ``cudnn.benchmark``, TF32 off) are each captured in a CUDA graph of
``--launches`` launches and replayed ``--replays`` times (``bench/compare.py``'s timing);
the figure is the median per-run time, every kernel of a run counted (a split-K reduction
included). The table gives each variant's time and cuDNN/ours (> 1: ours faster).

The sweep stops starting lines after ``--max-seconds`` (default 250: the whole run stays
under 5 minutes on an H200, compiles included); the rest are rows marked not run.

Usage (on the GPU machine, from the repo root; torch, cuda-python, numpy)::

    PYTHONPATH=. python bench/splitk_h200.py --json splitk.json --out splitk.md
    PYTHONPATH=. python bench/splitk_h200.py --dry-run     # the plan for sm_90, no GPU needed
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from compare import (BASES, BadInput, OneLineParser, check_outputs, count_arg, gpu, number_arg,  # noqa: E402
                     _reason, git_commit, read_suite, split_label, time_cudnn,  # noqa: E402
                     time_solution)
from miopen_solver.command import parse  # noqa: E402
from miopen_solver.errors import FileError  # noqa: E402
from miopen_solver.text import json_text, shorten  # noqa: E402

VARIANTS = (("default", {}), ("sk1", {"split_k": 1}),
            ("atomic2", {"split_k": 2, "split_k_reduce": "atomic"}),
            ("atomic4", {"split_k": 4, "split_k_reduce": "atomic"}),
            ("ws2", {"split_k": 2, "split_k_reduce": "workspace"}),
            ("ws4", {"split_k": 4, "split_k_reduce": "workspace"}))
"""``(name, find_solution settings)`` timed per line, in table order."""
MIN_SIDE, MAX_SIDE = 7, 16
"""Image sides of the zoo lines taken (7x7 and 14x14, and the 8x8/16x16 small images)."""
MIN_CHANNELS = 256
"""Fewest channels on the larger side (C or K) of a zoo line taken."""


def rows(zoo: Path, suite: Path, target) -> list:
    """``[(label, line)]``: the zoo's small-grid dense lines, then the suite lines (in each
    data type) whose default splits K on ``target`` (module docstring)."""
    from miopen_solver.solver import DgradSolver
    out = []
    for label, line in read_suite(zoo):
        p = parse(line).problem
        name, _ = split_label(label)
        if (p.G == 1 and p.sH == p.sW == p.dH == p.dW == 1 and p.Y == p.X and p.Y in (1, 3)
                and MIN_SIDE <= min(p.Hi, p.Wi) and max(p.Hi, p.Wi) <= MAX_SIDE and max(p.C, p.K) >= MIN_CHANNELS):
            out.append((name, line))
    solver = DgradSolver()
    for label, line in read_suite(suite):
        for dtype, base in BASES.items():
            text = " ".join([base] + line.split()[1:])
            if solver.find_solution(parse(text).problem, target).spec.split_k > 1:
                out.append((f"suite/{label}_{dtype}", text))
    return out


def variants(problem, target) -> list:
    """``[(name, Solution or None, why not)]`` for :data:`VARIANTS` (None where the solver
    refuses the settings, with its reason)."""
    from miopen_solver.errors import PerfConfigError
    from miopen_solver.solver import DgradSolver
    solver, out = DgradSolver(), []
    for name, settings in VARIANTS:
        try:
            out.append((name, solver.find_solution(problem, target, **settings), ""))
        except PerfConfigError as e:
            out.append((name, None, str(e)))
    return out


def plan(zoo: Path, suite: Path, target) -> list:
    """Every line's variants as plain data (no timing): label, line, dtype and per variant
    the config, kernel name (``_skws``: the workspace), split-K reduction and workspace bytes,
    or why the solver refused it."""
    out = []
    for label, line in rows(zoo, suite, target):
        p = parse(line).problem
        row = {"label": label, "line": line, "dtype": p.dtype, "variants": {}}
        for name, sol, why in variants(p, target):
            if sol is None:
                row["variants"][name] = {"error": f"refused: {why}"}
                continue
            sol.kernels[0].source                              # emitted: what the GPU run compiles
            if sol.reduce is not None:
                sol.reduce.emit("nvidia", target.arch)
            row["variants"][name] = {"config": sol.perf_config.serialize(), "kernel": sol.kernel_name,
                                     "split_k": sol.spec.split_k, "reduce": sol.split_k_reduce["mode"],
                                     "workspace_bytes": sol.workspace_bytes}
        out.append(row)
    return out


def measure(torch, eng, row: dict, args, timed: dict) -> None:
    """Time ``row``'s variants and cuDNN into it; failures are recorded, never raised.
    ``timed`` maps kernel names already timed (this line) to their figures."""
    p = parse(row["line"]).problem
    for name, sol, why in variants(p, eng.target):
        v = row["variants"].setdefault(name, {})
        if sol is None:
            v["error"] = f"refused: {why}"
            continue
        v.update(config=sol.perf_config.serialize(), kernel=sol.kernel_name, reduce=sol.split_k_reduce["mode"],
                 workspace_bytes=sol.workspace_bytes)
        if sol.kernel_name in timed:
            v["ms"] = timed[sol.kernel_name]
            continue
        try:
            v["ms"] = timed[sol.kernel_name] = time_solution(eng, sol, args.launches, args.replays)["ours_ms"]
        except Exception as e:  # noqa: BLE001 - a failing kernel is a cell, not a dead run
            v["error"] = f"failed: {_reason(e)}"
    try:
        row["cudnn_ms"] = time_cudnn(torch, p, args.launches, args.replays)
    except Exception as e:  # noqa: BLE001 - no algorithm, out of memory, ...
        row["cudnn_error"] = _reason(e)
        torch.cuda.empty_cache()


def _cell(row: dict, name: str) -> str:
    v = row["variants"].get(name, {})
    if "ms" not in v:
        return "n/a" if "error" in v or not v else "-"
    ratio = f" ({row['cudnn_ms'] / v['ms']:.2f})" if row.get("cudnn_ms") else ""
    return f"{v['ms'] * 1e3:.1f}{ratio}"


def markdown(results: list) -> str:
    """Times in us per variant, cuDNN/ours in brackets; the best workspace split against the
    best atomic one (> 1: the workspace is faster)."""
    names = [n for n, _ in VARIANTS]
    head = ["| line | dtype | cuDNN us | " + " | ".join(names) + " | ws/atomic |",
            "|---|---|---|" + "---|" * len(names) + "---|"]
    body = []
    for r in results:
        best = {k: min((v["ms"] for n, v in r["variants"].items() if n.startswith(k) and "ms" in v), default=None)
                for k in ("atomic", "ws")}
        vs = f"{best['atomic'] / best['ws']:.2f}" if best["atomic"] and best["ws"] else "n/a"
        cudnn = f"{r['cudnn_ms'] * 1e3:.1f}" if r.get("cudnn_ms") else "n/a"
        body.append(f"| {r['label']} | {r['dtype']} | {cudnn} | " + " | ".join(_cell(r, n) for n in names)
                    + f" | {vs} |")
    return "\n".join(head + body) + "\n"


def _plan_text(rows_: list) -> str:
    lines = []
    for r in rows_:
        lines.append(f"{r['label']} ({r['dtype']}): {r['line']}")
        for name, v in r["variants"].items():
            what = v.get("error") or f"{v['config']} {v['reduce']} ws={v['workspace_bytes']} {v['kernel']}"
            lines.append(f"  {name:8s} {what}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = OneLineParser(prog="splitk_h200.py", description=__doc__.splitlines()[0])
    ap.add_argument("--zoo", default=str(ROOT / "bench" / "zoo.txt"))
    ap.add_argument("--suite", default=str(ROOT / "bench" / "suite.txt"))
    ap.add_argument("--only", default="", help="substring filter on labels")
    ap.add_argument("--launches", type=count_arg, default=20)
    ap.add_argument("--replays", type=count_arg, default=15)
    ap.add_argument("--max-seconds", type=number_arg(1e-9, math.inf, "a finite number of seconds > 0"),
                    default=250.0, help="start no new line after this many seconds (the run stays under 5 minutes)")
    ap.add_argument("--json", default=None, help="write the rows and the run's context here")
    ap.add_argument("--out", default=None, help="write the markdown table here")
    ap.add_argument("--dry-run", action="store_true",
                    help="print every line's variants (configs, kernels, workspaces) for sm_90; no GPU")
    args = ap.parse_args(argv)
    from miopen_solver.target import get_target
    try:
        for flag in ("zoo", "suite"):
            try:
                read_suite(getattr(args, flag))
            except FileError as e:
                raise BadInput(f"--{flag} {e}") from None
        labels = [label for label, _ in rows(Path(args.zoo), Path(args.suite), get_target("sm_90"))]
        if not any(args.only in label for label in labels):
            raise BadInput(f"--only {shorten(args.only)!r}: selects no line; allowed: a substring of a line's label"
                           + (f" (e.g. {labels[0]!r})" if labels else ""))
        if not args.dry_run:
            check_outputs(json=args.json, out=args.out)
            torch, eng = gpu()
    except (BadInput, ValueError) as e:
        print(f"splitk_h200.py: {e}", file=sys.stderr)
        return 2

    if args.dry_run:
        rows_ = [r for r in plan(Path(args.zoo), Path(args.suite), get_target("sm_90")) if args.only in r["label"]]
        print(_plan_text(rows_))
        print(f"\n{len(rows_)} lines, {sum(len(r['variants']) for r in rows_)} variants planned for sm_90")
        return 0

    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    t0, results = time.monotonic(), []
    for label, line in rows(Path(args.zoo), Path(args.suite), eng.target):
        if args.only not in label:
            continue
        row = {"label": label, "line": line, "dtype": parse(line).problem.dtype, "variants": {}}
        if time.monotonic() - t0 > args.max_seconds:
            row["skipped"] = f"--max-seconds {args.max_seconds:g} reached"
        else:
            measure(torch, eng, row, args, {})
        results.append(row)
        print(markdown(results[-1:]).splitlines()[2], flush=True)
    text = markdown(results)
    head = f"## splitk_h200.py on {eng.rt.device_name()} ({eng.target.arch}), commit {git_commit()}\n\n"
    print(f"\n{head}{text}")
    if args.out:
        Path(args.out).write_text(head + text)
    if args.json:
        meta = {"device": eng.rt.device_name(), "arch": eng.target.arch, "commit": git_commit(),
                "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
                "launches": args.launches, "replays": args.replays, "seconds": time.monotonic() - t0}
        Path(args.json).write_text(json_text({"meta": meta, "rows": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
