"""Launch one dgrad kernel once (for ncu / compute-sanitizer), e.g.

    ncu --clock-control none -k regex:dgrad_sm --section SpeedOfLight python bench/profile_one.py \\
        "convfp16 -n 64 -c 256 -H 64 -W 64 -k 256 -y 3 -x 3 -p 1 -q 1 -F 2 --in_layout NHWC \\
         --out_layout NHWC --fil_layout NHWC" [--perf-config "..."]

The line's solution runs as the solver builds it (its layout transforms too), on inputs in
the line's own layouts. A bad line, perf config or backend, a config the solver refuses for
the line, or no GPU runtime is one line on stderr and exit 2 (the line and the config are
checked before a runtime is loaded).
"""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.compare import BadInput, OneLineParser  # noqa: E402
from miopen_solver.command import parse  # noqa: E402
from miopen_solver.errors import PerfConfigError, RuntimeUnavailable  # noqa: E402
from miopen_solver import layouts  # noqa: E402
from miopen_solver.layouts import storage_dtype  # noqa: E402
from miopen_solver.runtime import BACKENDS, get_engine  # noqa: E402
from miopen_solver.solver import DgradSolver  # noqa: E402
from miopen_solver.spec import PerfConfig  # noqa: E402
from miopen_solver.text import shorten  # noqa: E402


def main(argv=None) -> int:
    ap = OneLineParser(prog="profile_one.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("line")
    ap.add_argument("--perf-config", default=None)
    ap.add_argument("--backend", default="cuda", choices=[b for b in BACKENDS if b != "auto"])
    a = ap.parse_args(argv)
    try:
        try:
            p = parse(a.line).problem
        except ValueError as e:
            raise BadInput(f"line {shorten(a.line)!r}: {e}") from None
        try:
            cfg = PerfConfig.parse(a.perf_config) if a.perf_config else None
        except PerfConfigError as e:
            raise BadInput(f"--perf-config {shorten(a.perf_config)!r}: {e}") from None
        try:
            eng = get_engine(a.backend)
        except RuntimeUnavailable as e:
            raise BadInput(f"--backend {a.backend}: needs a GPU ({shorten(str(e), 200)})") from None
        try:
            sol = DgradSolver().find_solution(p, eng.target, perf_config=cfg)
        except ValueError as e:
            what = f"--perf-config {shorten(a.perf_config)!r}" if cfg else f"line {shorten(a.line)!r}"
            raise BadInput(f"{what}: {e}") from None
    except BadInput as e:
        print(f"profile_one.py: {e}", file=sys.stderr)
        return 2
    rng = np.random.default_rng(0)
    dt = storage_dtype(p.dtype)
    dy = rng.uniform(0, 0.01, layouts.dy_shape(p)).astype(dt)          # in the line's own layouts
    w = rng.uniform(-0.005, 0.005, layouts.w_shape(p)).astype(dt)
    eng.run(sol, dy, w)
    print(sol.kernel_name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
