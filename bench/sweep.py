"""Time a list of perf configs on chosen suite rows (CUDA-graph timing, in-process).

A kernel-development tool for the H200: it shows which tile shapes the kernel likes, so
the default heuristic can learn from measurement. ``dgrad-driver tune`` is the user-facing
sweep (isolated workers, perf-db); this one is quicker to read and to hack.

    python bench/sweep.py --rows r50_3x3_c64_56,big_3x3 --dtype fp16 [--configs FILE] [--top 8]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.compare import (BASES, BadInput, OneLineParser, check_outputs, count_arg, cuda_engine,  # noqa: E402
                           label_filter, read_suite)
from miopen_solver.command import parse  # noqa: E402
from miopen_solver.errors import FileError, PerfConfigError, shown_path  # noqa: E402
from miopen_solver.fileio import read_text  # noqa: E402
from miopen_solver.layouts import storage_dtype  # noqa: E402
from miopen_solver.spec import PerfConfig, make_spec  # noqa: E402
from miopen_solver.text import shorten  # noqa: E402

CONFIG_DIR = ROOT / "bench" / "configs"
"""Default candidate lists, one perf config per line: ``fp16_dev.txt`` (also used for bf16)
and ``fp32_dev.txt``."""
SUITE = ROOT / "bench" / "suite.txt"
MAX_CONFIG_BYTES = 16 << 20


def main(argv=None):
    ap = OneLineParser(prog="sweep.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", required=True, help="comma-separated substrings of suite labels")
    ap.add_argument("--dtype", default="fp16", choices=sorted(BASES))
    ap.add_argument("--configs", default=None, help="file with one perf config per line")
    ap.add_argument("--top", type=count_arg, default=6)
    ap.add_argument("--replays", type=count_arg, default=7)
    ap.add_argument("--csv", default=None, help="append every timed row here (label,dtype,config,us)")
    args = ap.parse_args(argv)
    try:
        check_outputs(csv=args.csv)
        default = CONFIG_DIR / ("fp32_dev.txt" if args.dtype == "fp32" else "fp16_dev.txt")
        path = args.configs or default
        try:
            text = read_text(path, MAX_CONFIG_BYTES, "perf-config file")
        except FileError as e:
            raise BadInput(f"--configs {e}") from None
        cfgs = []
        for x in text.split():
            try:
                cfgs.append(PerfConfig.parse(x))
            except PerfConfigError as e:
                raise BadInput(f"--configs {shown_path(path)} entry {shorten(x)!r}: {e}") from None
        if not cfgs:
            raise BadInput(f"--configs {shown_path(path)}: no perf configs; allowed: a file of perf configs, "
                           "one a line")
        suite = read_suite(SUITE)
        wanted = label_filter("--rows", args.rows, (label for label, _ in suite), "bench/suite.txt",
                              drop_empty=False)
        eng = cuda_engine()
    except BadInput as e:
        print(f"sweep.py: {e}", file=sys.stderr)
        return 2
    for label, cmd in suite:
        if not any(w in label for w in wanted):
            continue
        words = cmd.split()
        words[0] = BASES[args.dtype]
        p = parse(" ".join(words)).problem
        dt = storage_dtype(args.dtype)
        rng = np.random.default_rng(0)
        dy = rng.uniform(0, 0.01, (p.N, p.Ho, p.Wo, p.K)).astype(dt)
        w = rng.uniform(-0.005, 0.005, (p.K, p.Y, p.X, p.cpg)).astype(dt)
        rows = []
        for cfg in cfgs:
            try:
                spec = make_spec(p, eng.target, cfg)
            except PerfConfigError as e:
                rows.append((float("inf"), cfg.serialize(), f"invalid: {e}"))
                continue
            t0 = time.perf_counter()
            try:
                ms = eng.time_graph(spec, dy, w, 20, args.replays).median_ms
                regs = eng.rt.function_registers(eng.build(spec).func)
                rows.append((ms, cfg.serialize(), f"regs {regs} build+time {time.perf_counter() - t0:.1f}s"))
            except Exception as e:
                rows.append((float("inf"), cfg.serialize(), f"FAILED {type(e).__name__}: {str(e)[:80]}"))
        rows.sort()
        if args.csv:
            with open(args.csv, "a") as f:
                for ms, c, note in rows:
                    f.write(f"{label},{args.dtype},\"{c}\",{ms * 1e3:.2f}\n")
        print(f"\n== {label} {args.dtype}  ({p.flops / 1e9:.1f} GFLOP)")
        for ms, c, note in rows[: args.top]:
            print(f"  {ms * 1e3:8.1f} us  {p.flops / ms / 1e9:6.0f} TF/s  {c}  {note}")
        bad = [r for r in rows if r[0] == float("inf")]
        for _, c, note in bad[:3]:
            print(f"  -- {c}: {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
