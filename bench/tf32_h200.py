"""TF32 math (MIOpenDriver ``-M 0``) against cuDNN with TF32 allowed, and IEEE fp32 against
cuDNN with TF32 off, on one NVIDIA GPU (H200).

Rows: the lines of ``bench/suite.txt`` re-based to fp32 (``conv``) and the fp32 lines of
``bench/zoo.txt`` as written. Each row runs twice:

* ``tf32``: our default solution for the line with ``-M 0`` (``mma.sync.m16n8k8`` TF32,
  :mod:`miopen_solver.tf32`) against cuDNN's dgrad with ``torch.backends.cudnn.allow_tf32 =
  True``;
* ``ieee``: our default for the line as written (FFMA) against cuDNN with
  ``allow_tf32 = False``.

Both sides are captured in CUDA graphs (``bench/compare.py``'s ``time_ours``/``time_cudnn``,
``cudnn.benchmark=True``): median per-launch time of ``--replays`` replays of ``--launches``
launches. The report gives per row ours and cuDNN in each mode, cuDNN/ours, and our TF32
speed-up over our IEEE kernel; per mode the geometric mean of cuDNN/ours. Correctness of
the TF32 kernels is tests/test_gpu_tf32.py's (``bench/h200_check.sh`` runs both in its
``tf32`` step).

``--dry-run`` needs no GPU and no torch: it prints the plan, each row's problem key, math,
kernel and config as the solver picks them for ``--arch`` (default sm_90), so the plan is
checked before a device session (tests/test_bench_tf32.py runs it).

Usage (on the GPU machine, from the repo root)::

    PYTHONPATH=. python bench/tf32_h200.py --out tf32.md --json tf32.json
    PYTHONPATH=. python bench/tf32_h200.py --dry-run
    PYTHONPATH=. python bench/tf32_h200.py --wgmma --out tf32_wgmma.md   # warpgroup TF32 where it applies
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from compare import (BASES, BadInput, OneLineParser, _reason, check_outputs, geomean, git_commit,  # noqa: E402
                     gpu, ours_or_error, read_suite, split_label, time_cudnn)
from miopen_solver.command import parse  # noqa: E402
from miopen_solver.text import json_text  # noqa: E402
from miopen_solver.fileio import write_text  # noqa: E402

MODES = ("tf32", "ieee")
"""``tf32``: ours with ``-M 0`` vs cuDNN with TF32 allowed; ``ieee``: ours as written vs cuDNN with TF32 off."""


def plan(suite: Path, zoo: Path) -> list:
    """``[{"label", "source", "cmd"}]``: every suite line re-based to ``conv`` (fp32), then
    the zoo's ``conv`` lines as written (labels without their ``class=`` tag)."""
    rows = []
    for label, cmd in read_suite(suite):
        words = cmd.split()
        words[0] = BASES["fp32"]
        rows.append({"label": label, "source": "suite", "cmd": " ".join(words)})
    for label, cmd in read_suite(zoo):
        if cmd.split()[0] == BASES["fp32"]:
            rows.append({"label": split_label(label)[0], "source": "zoo", "cmd": cmd})
    return rows


def mode_line(cmd: str, mode: str) -> str:
    """The line a mode runs: ``-M 0`` appended for ``tf32`` (the last repeat of a flag wins,
    as in MIOpenDriver), as written for ``ieee``."""
    return f"{cmd} -M 0" if mode == "tf32" else cmd


def dry_run(rows, arch: str, wgmma: bool = False) -> list:
    """One text line per row and mode: label, mode, problem key, math, kernel and config the
    solver picks on the ``arch`` preset (no device, no torch), or with ``wgmma`` the
    warpgroup TF32 config where it applies; refusals say why."""
    from miopen_solver.solver import DgradSolver
    from miopen_solver.target import get_target
    from miopen_solver.tf32 import resolve
    solver, target = DgradSolver(), get_target(arch)
    out = []
    for r in rows:
        for mode in MODES:
            p, note = resolve(parse(mode_line(r["cmd"], mode)).problem, target)
            verdict = solver.is_applicable(p, target)
            if not verdict.ok:
                out.append(f"{r['label']} {mode}: refused: {'; '.join(str(x) for x in verdict.reasons)}")
                continue
            config = _wgmma_config(p, target) if wgmma and mode == "tf32" else None
            sol = solver.find_solution(p, target, perf_config=config)
            out.append(f"{r['label']} {mode}: {p.problem_key()} math={sol.math} tolerance={sol.tolerance:g} "
                       f"config={sol.perf_config.serialize()} kernel={sol.kernel_name}"
                       + (f" ({note})" if note else ""))
    return out


def _wgmma_config(p, target) -> str | None:
    """``--wgmma``: the warpgroup TF32 config of the problem the kernel computes
    (:func:`miopen_solver.heuristics.tf32_wgmma_config`), or None (the default runs)."""
    from miopen_solver.heuristics import tf32_wgmma_config
    from miopen_solver.transpose import native_problem
    cfg = tf32_wgmma_config(native_problem(p), target)
    return cfg.serialize() if cfg is not None else None


def run_row(torch, eng, r, args) -> dict:
    """Both modes of one row: ``{mode: {ours_ms, cudnn_ms, ratio, config, errors}}``; failures
    are recorded in the row, never raised."""
    row = {"label": r["label"], "source": r["source"], "line": r["cmd"]}
    for mode in MODES:
        res = {}
        p = parse(mode_line(r["cmd"], mode)).problem
        torch.backends.cudnn.allow_tf32 = mode == "tf32"
        config = None
        if mode == "tf32" and getattr(args, "wgmma", False):
            config = _wgmma_config(p, eng.target)
        res.update(ours_or_error(eng, p, args.launches, args.replays, config))
        try:
            res["cudnn_ms"] = time_cudnn(torch, p, args.launches, args.replays)
        except Exception as e:  # noqa: BLE001 - cuDNN has no algorithm, out of memory, ...
            res["cudnn_error"] = _reason(e)
        if res.get("ours_ms") and res.get("cudnn_ms"):
            res["ratio"] = res["cudnn_ms"] / res["ours_ms"]
        row[mode] = res
    t, i = row["tf32"].get("ours_ms"), row["ieee"].get("ours_ms")
    row["tf32_speedup"] = i / t if t and i else None
    return row


def render(rows, header: str) -> str:
    """The markdown report: one table row per line (both modes), then per mode the geometric
    mean of cuDNN/ours and of our TF32 speed-up over IEEE."""
    def us(v):
        return "n/a" if v is None else f"{v * 1e3:.1f}"

    def ratio(v):
        return "n/a" if v is None else f"{v:.2f}"
    md = [header, "| line | ours tf32 us | cuDNN tf32 us | cuDNN/ours tf32 | ours ieee us | cuDNN ieee us | "
                  "cuDNN/ours ieee | ours ieee/tf32 | tf32 config |",
          "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        t, i = r["tf32"], r["ieee"]
        errors = "; ".join(f"{m} {k}: {r[m][k]}" for m in MODES for k in ("ours_error", "cudnn_error") if r[m].get(k))
        md.append(f"| {r['label']} | {us(t.get('ours_ms'))} | {us(t.get('cudnn_ms'))} | {ratio(t.get('ratio'))} | "
                  f"{us(i.get('ours_ms'))} | {us(i.get('cudnn_ms'))} | {ratio(i.get('ratio'))} | "
                  f"{ratio(r.get('tf32_speedup'))} | `{t.get('config', '')}`{' ' + errors if errors else ''} |")
    md.append("")
    for mode in MODES:
        ok = [r[mode]["ratio"] for r in rows if r[mode].get("ratio")]
        md.append(f"{mode}: geometric-mean ratio cuDNN/ours = **{geomean(ok):.2f}** over {len(ok)} rows"
                  + (f"; min {min(ok):.2f}" if ok else ""))
    sp = [r["tf32_speedup"] for r in rows if r.get("tf32_speedup")]
    md.append(f"ours: TF32 speed-up over IEEE fp32, geometric mean **{geomean(sp):.2f}** over {len(sp)} rows"
              if sp else "ours: no TF32 speed-up measured")
    return "\n".join(md) + "\n"


def main(argv=None) -> int:
    ap = OneLineParser(prog="tf32_h200.py", description=__doc__.splitlines()[0])
    ap.add_argument("--suite", default=str(ROOT / "bench" / "suite.txt"))
    ap.add_argument("--zoo", default=str(ROOT / "bench" / "zoo.txt"))
    ap.add_argument("--only", default="", help="substring filter on row labels")
    ap.add_argument("--launches", type=int, default=10)
    ap.add_argument("--replays", type=int, default=10)
    ap.add_argument("--arch", default="sm_90", help="--dry-run: the target preset to plan for")
    ap.add_argument("--dry-run", action="store_true", help="print the plan (no GPU, no torch) and exit")
    ap.add_argument("--wgmma", action="store_true",
                    help="tf32 mode: run the warpgroup TF32 config (heuristics.tf32_wgmma_config) where it "
                         "applies instead of the mma.sync default, to time one against the other")
    ap.add_argument("--out", default=None, help="write the markdown report here")
    ap.add_argument("--json", default=None, help="write every row here")
    args = ap.parse_args(argv)
    try:
        return _main(args)
    except BadInput as e:
        print(f"tf32_h200.py: {e}", file=sys.stderr)
        return 2


def _checked_rows(args) -> list:
    """The planned rows after every check that needs no GPU (files, ``--only``, ``--arch``
    with ``--wgmma``, outputs), each failure a :class:`~compare.BadInput` naming the flag."""
    from miopen_solver.errors import FileError
    from miopen_solver.target import get_target
    for flag, value in (("--launches", args.launches), ("--replays", args.replays)):
        if value < 1:
            raise BadInput(f"{flag} {value}: allowed: an integer >= 1")
    try:
        target = get_target(args.arch)
    except ValueError as e:
        raise BadInput(f"--arch {e}") from None
    if args.wgmma and not target.wgmma:
        raise BadInput(f"--wgmma: {args.arch} has no warpgroup MMA; allowed: an sm_90 target (--arch sm_90)")
    try:
        rows = plan(Path(args.suite), Path(args.zoo))
    except FileError as e:
        raise BadInput(f"--suite/--zoo {e}") from None
    chosen = [r for r in rows if args.only in r["label"]]
    if not chosen:
        raise BadInput(f"--only {args.only!r}: matches no row label ({len(rows)} rows); allowed: a substring of "
                       f"one, e.g. {rows[0]['label']!r}" if rows else "--suite/--zoo: no fp32 rows to run")
    check_outputs(out=args.out, json=args.json)
    return chosen


def _main(args) -> int:
    rows = _checked_rows(args)
    if args.dry_run:
        print("\n".join(dry_run(rows, args.arch, args.wgmma)))
        return 0

    torch, eng = gpu()
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = False
    header = (f"## tf32_h200.py: {eng.rt.device_name()} ({eng.target.arch}), torch {torch.__version__}, "
              f"cuDNN {torch.backends.cudnn.version()}, commit {git_commit()}\n\n"
              f"CUDA graphs of {args.launches} launches, median of {args.replays} replays, per launch; "
              f"tf32 = ours -M 0 vs cuDNN allow_tf32=True, ieee = ours as written vs cuDNN allow_tf32=False\n")
    results = []
    for r in rows:
        results.append(run_row(torch, eng, r, args))
        last = results[-1]
        print(f"{r['label']}: tf32 ours {last['tf32'].get('ours_ms')} cuDNN {last['tf32'].get('cudnn_ms')}; "
              f"ieee ours {last['ieee'].get('ours_ms')} cuDNN {last['ieee'].get('cudnn_ms')}", flush=True)
        if args.json:
            write_text(args.json, json_text({"header": header, "rows": results}, indent=1))
    text = render(results, header)
    print(text)
    if args.out:
        write_text(args.out, text)
    return 0 if all(math.isfinite(r["tf32"].get("ours_ms") or math.nan) for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
