"""Compile time and warm first-launch latency of the default kernel per suite row.

Each measurement runs in a fresh process (so nothing is loaded yet), with the CUDA context
created before the clock starts and the tensors allocated outside the timed region:

* ``cold``: empty binary cache -> emit + NVRTC compile + cache write (``compile_ms``), then
  module load + first launch + synchronize;
* ``warm``: the same cache, a second process -> emit + cache read + module load + first
  launch + synchronize (``first_launch_ms``), no compilation (``cache_hit`` must be true).

    python bench/first_launch.py [--dtype fp16] [--rows big_3x3,r50_1x1]

Prints one markdown row per suite line. Times are milliseconds (host wall clock).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.compare import BASES, BadInput, OneLineParser, label_filter, read_suite  # noqa: E402
from miopen_solver.errors import RuntimeUnavailable  # noqa: E402
from miopen_solver.text import shorten  # noqa: E402

SUITE = ROOT / "bench" / "suite.txt"


def child(line: str) -> dict:
    import numpy as np

    from miopen_solver.command import parse
    from miopen_solver.layouts import dx_shape, dy_shape, storage_dtype, w_shape
    from miopen_solver.runtime import get_engine
    from miopen_solver.solver import DgradSolver

    eng = get_engine("cuda")
    eng.rt.synchronize()  # context up before the clock starts
    p = parse(line).problem
    sol = DgradSolver().get_solution(p, eng.target)
    spec = sol.spec
    dt = storage_dtype(p.dtype)
    dy, w = np.zeros(dy_shape(p), dt), np.zeros(w_shape(p), dt)
    dx_bytes = int(np.prod(dx_shape(p))) * np.dtype(dt).itemsize
    with eng._device_tensors(dy, w, dx_bytes, workspace=sol.workspace_bytes) as (pdy, pw, pdx, pws):
        eng.rt.synchronize()
        t0 = time.perf_counter()
        k = eng.load(spec.emit())
        eng._run_once(eng.launches(sol, k, pdy, pw, pdx, pws))
        eng.rt.synchronize()
        total = (time.perf_counter() - t0) * 1e3
    return {"kernel": spec.kernel_name, "cache_hit": k.cache_hit, "compile_ms": k.compile_ms, "total_ms": total}


NEEDS_GPU = 2
"""The child's exit status when there is no CUDA runtime or device (its stderr says why)."""
HEAD = ("| row | cold: compile ms | cold: compile + load + first launch ms | warm: first launch ms (cache hit) |\n"
        "|---|---|---|---|")


def main(argv=None):
    ap = OneLineParser(prog="first_launch.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--dtype", default="fp16", choices=sorted(BASES))
    ap.add_argument("--rows", default="", help="comma-separated substrings of suite labels")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        try:
            print(json.dumps(child(a.child)))
        except RuntimeUnavailable as e:
            print(f"first_launch.py: needs a CUDA GPU ({shorten(str(e), 200)})", file=sys.stderr)
            return NEEDS_GPU
        return 0
    suite = read_suite(SUITE)
    try:
        wanted = label_filter("--rows", a.rows, (label for label, _ in suite), "bench/suite.txt") if a.rows else []
    except BadInput as e:
        print(f"first_launch.py: {e}", file=sys.stderr)
        return 2
    worst, head = 0.0, HEAD
    for label, cmd in suite:
        if wanted and not any(w in label for w in wanted):
            continue
        line = " ".join([BASES[a.dtype]] + cmd.split()[1:])
        with tempfile.TemporaryDirectory() as cache:
            env = {**__import__("os").environ, "MIOPEN_DGRAD_CACHE_DIR": cache}
            runs = []
            for phase in ("cold", "warm"):
                r = subprocess.run([sys.executable, __file__, "--child", line], env=env,
                                   capture_output=True, text=True)
                if r.returncode != 0:
                    last = (r.stderr.strip().splitlines() or ["no output"])[-1]
                    if r.returncode == NEEDS_GPU and last.startswith("first_launch.py: needs "):
                        print(last, file=sys.stderr)
                        return 2
                    print(f"first_launch.py: {label} ({phase}): the measuring process failed: {last}",
                          file=sys.stderr)
                    return 1
                runs.append(json.loads(r.stdout.strip().splitlines()[-1]))
        cold, warm = runs
        assert not cold["cache_hit"] and warm["cache_hit"], (label, cold, warm)
        worst = max(worst, warm["total_ms"])
        if head:
            print(head)
            head = ""
        print(f"| {label} | {cold['compile_ms']:.0f} | {cold['total_ms']:.0f} | {warm['total_ms']:.1f} |")
    if head:
        print(head)
    print(f"\nworst warm first launch: {worst:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
