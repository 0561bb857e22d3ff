"""Launch one dgrad kernel once (for ncu / compute-sanitizer), e.g.

    ncu --clock-control none -k regex:dgrad_sm --section SpeedOfLight python bench/profile_one.py \\
        "convfp16 -n 64 -c 256 -H 64 -W 64 -k 256 -y 3 -x 3 -p 1 -q 1 -F 2 --in_layout NHWC \\
         --out_layout NHWC --fil_layout NHWC" [--perf-config "..."]
"""

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from miopen_solver.command import parse  # noqa: E402
from miopen_solver.layouts import storage_dtype  # noqa: E402
from miopen_solver.runtime import get_engine  # noqa: E402
from miopen_solver.spec import PerfConfig, make_spec
from miopen_solver.heuristics import default_performance_config  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("line")
ap.add_argument("--perf-config", default=None)
ap.add_argument("--backend", default="cuda")
a = ap.parse_args()
p = parse(a.line).problem
eng = get_engine(a.backend)
cfg = PerfConfig.parse(a.perf_config) if a.perf_config else default_performance_config(p, eng.target)
spec = make_spec(p, eng.target, cfg)
rng = np.random.default_rng(0)
dt = storage_dtype(p.dtype)
dy = rng.uniform(0, 0.01, (p.N, p.Ho, p.Wo, p.K)).astype(dt)
w = rng.uniform(-0.005, 0.005, (p.K, p.Y, p.X, p.cpg)).astype(dt)
eng.run(spec, dy, w)
print(spec.kernel_name)
