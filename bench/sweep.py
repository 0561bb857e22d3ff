"""Time a list of perf configs on chosen suite rows (CUDA-graph timing, in-process).

A kernel-development tool for the H200: it shows which tile shapes the kernel likes, so
the default heuristic can learn from measurement. ``dgrad-driver tune`` is the user-facing
sweep (isolated workers, perf-db); this one is quicker to read and to hack.

    python bench/sweep.py --rows r50_3x3_c64_56,big_3x3 --dtype fp16 [--configs FILE] [--top 8]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.compare import BASES, read_suite  # noqa: E402
from miopen_solver.command import parse  # noqa: E402
from miopen_solver.errors import PerfConfigError  # noqa: E402
from miopen_solver.layouts import storage_dtype  # noqa: E402
from miopen_solver.spec import PerfConfig, make_spec  # noqa: E402

CONFIG_DIR = ROOT / "bench" / "configs"
"""Default candidate lists, one perf config per line: ``fp16_dev.txt`` (also used for bf16)
and ``fp32_dev.txt``."""


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", required=True, help="comma-separated substrings of suite labels")
    ap.add_argument("--dtype", default="fp16")
    ap.add_argument("--configs", default=None, help="file with one perf config per line")
    ap.add_argument("--top", type=int, default=6)
    ap.add_argument("--replays", type=int, default=7)
    ap.add_argument("--csv", default=None, help="append every timed row here (label,dtype,config,us)")
    args = ap.parse_args(argv)
    from miopen_solver.runtime import get_engine
    eng = get_engine("cuda")
    default = CONFIG_DIR / ("fp32_dev.txt" if args.dtype == "fp32" else "fp16_dev.txt")
    text = Path(args.configs or default).read_text()
    cfgs = [PerfConfig.parse(x) for x in text.split() if x.strip()]
    wanted = args.rows.split(",")
    for label, cmd in read_suite(ROOT / "bench" / "suite.txt"):
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


if __name__ == "__main__":
    main()
