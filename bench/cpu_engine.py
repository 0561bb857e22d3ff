"""CPU engine time on an MIOpenDriver line next to numpy.matmul of the same GEMM work.

    python bench/cpu_engine.py                      # the main line (convfp16 n32 c64 56x56 k64 3x3)
    python bench/cpu_engine.py "conv -n 2 ... -F 2" --iters 20

The matmul baseline runs one fp32 ``numpy.matmul`` per sub-GEMM and group with the
sub-GEMM's own shape (GemmM x GemmK times GemmK x GemmN), so its total M*N*K equals the
engine's. Engine and baseline are timed alternately in the same process; the script prints
min and median milliseconds of each and the ratio engine/matmul.
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.compare import BadInput, OneLineParser, count_arg  # noqa: E402
from miopen_solver import memory, prng  # noqa: E402
from miopen_solver.applicability import NotApplicableError  # noqa: E402
from miopen_solver.command import parse  # noqa: E402
from miopen_solver.runtime.cpu import CpuEngine  # noqa: E402
from miopen_solver.solver import DgradSolver  # noqa: E402
from miopen_solver.spec import make_spec  # noqa: E402
from miopen_solver.target import get_target  # noqa: E402
from miopen_solver.text import shorten  # noqa: E402

MAIN_LINE = ("convfp16 -n 32 -c 64 -H 56 -W 56 -k 64 -y 3 -x 3 -p 1 -q 1 -u 1 -v 1 -l 1 -j 1 -g 1 "
             "-F 2 -t 1 -V 1 --in_layout NHWC --out_layout NHWC --fil_layout NHWC")


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main(argv=None) -> int:
    ap = OneLineParser(prog="cpu_engine.py", description=__doc__.splitlines()[0])
    ap.add_argument("line", nargs="?", default=MAIN_LINE, help="MIOpenDriver line (-F 2)")
    ap.add_argument("--iters", type=count_arg, default=10, help="timed runs of each (default 10)")
    args = ap.parse_args(argv)

    target = get_target("cpu")
    try:
        try:
            problem = parse(args.line).problem
        except ValueError as e:
            raise BadInput(f"line {shorten(args.line)!r}: {e}") from None
        verdict = DgradSolver().is_applicable(problem, target)
        if not verdict.ok:
            raise BadInput(f"line {shorten(args.line)!r}: {NotApplicableError(verdict)}")
        spec = make_spec(problem, target, DgradSolver().get_default_performance_config(problem, target))
        need = memory.timing_need(problem, memory.engine_plan(spec), "cpu")    # inputs + the engine's arrays
        baseline = 4 * problem.G * sum(s.gemm_m * s.gemm_k + s.gemm_k * s.gemm_n for s in spec.sub_gemms)
        short = memory.shortfall(memory.host_memory(), memory.Peak(need, (("matmul operands", baseline),)), [need])
        if short:
            raise BadInput(f"line {shorten(args.line)!r}: {short}; allowed: a smaller -n")
    except (BadInput, ValueError) as e:
        print(f"cpu_engine.py: {e}", file=sys.stderr)
        return 2
    inputs = prng.generate_inputs(problem)
    engine = CpuEngine()

    rng = np.random.default_rng(0)
    gemms = [(rng.standard_normal((s.gemm_m, s.gemm_k), dtype=np.float32),
              rng.standard_normal((s.gemm_k, s.gemm_n), dtype=np.float32))
             for s in spec.sub_gemms for _ in range(problem.G)]
    macs = sum(a.shape[0] * a.shape[1] * b.shape[1] for a, b in gemms)

    def run_engine():
        engine.run(spec, inputs.dy, inputs.w)

    def run_matmul():
        for a, b in gemms:
            np.matmul(a, b)

    run_engine(), run_matmul()                       # warm-up
    t_engine, t_matmul = [], []
    for _ in range(args.iters):
        for fn, acc in ((run_engine, t_engine), (run_matmul, t_matmul)):
            t0 = time.perf_counter()
            fn()
            acc.append((time.perf_counter() - t0) * 1e3)

    print(f"line: {args.line}")
    print(f"machine: {cpu_name()}, {os.cpu_count()} logical CPUs, python {platform.python_version()}, "
          f"numpy {np.__version__}")
    print(f"spec: {spec.kernel_name}")
    print(f"sub-GEMMs: {len(spec.sub_gemms)} x G={problem.G}, "
          + ", ".join(f"{s.gemm_m}x{s.gemm_n}x{s.gemm_k}" for s in spec.sub_gemms)
          + f"; total M*N*K = {macs}")
    for name, t in (("cpu engine", t_engine), ("numpy.matmul fp32", t_matmul)):
        print(f"{name:18s} min {min(t):9.2f} ms   median {statistics.median(t):9.2f} ms   "
              f"({2 * macs / min(t) / 1e6:.1f} GFLOP/s at min)")
    print(f"ratio engine/matmul: min {min(t_engine) / min(t_matmul):.2f}   "
          f"median {statistics.median(t_engine) / statistics.median(t_matmul):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
