"""Each line of a suite (NCHW) on its plane default and on named variants of it, timed as
compare.py times (CUDA graphs), in one process: python plane_variants.py SUITE OUT.json"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from bench.compare import gpu, ours_or_error, read_suite, time_cudnn  # noqa: E402
from miopen_solver.command import parse  # noqa: E402
from miopen_solver.heuristics import default_performance_config  # noqa: E402

torch, eng = gpu()
rows = []
for label, cmd in read_suite(sys.argv[1]):
    p = parse(cmd.replace("NHWC", "NCHW").split()).problem
    d = default_performance_config(p, eng.target)
    variants = {"default": d}
    if d.lds_k_outer == 2:
        variants["persistent"] = d.replace(stages=2)
        variants["rows"] = d.replace(lds_k_outer=1)
    r = {"label": label, "cudnn_ms": time_cudnn(torch, p, 20, 15)}
    for name, c in variants.items():
        r[name] = {"config": c.serialize(), **ours_or_error(eng, p, 20, 15, c.serialize())}
    rows.append(r)
    print(label, {k: (v.get("ours_ms"), v.get("ours_error")) for k, v in r.items() if isinstance(v, dict)}, flush=True)
Path(sys.argv[2]).write_text(json.dumps(rows, indent=1))
