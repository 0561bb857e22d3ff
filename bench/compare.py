"""Our dgrad kernels against cuDNN (and cuBLAS for pointwise lines) on one NVIDIA GPU.

For each line of ``bench/suite.txt`` and each data type: our kernel (default config, or the
perf-db winner with ``--perfdb``) and cuDNN through PyTorch
(``aten.convolution_backward`` on channels_last tensors, ``cudnn.benchmark=True``, TF32
off) are both captured into CUDA graphs of ``--launches`` launches and replayed
``--replays`` times; the figure is the median per-launch time, so launch gaps count for
neither side. Pointwise lines also time cuBLAS on the equivalent GEMM
``dX[N*H*W, C] = dY[N*H*W, K] x W[K, C]``.

Ceilings are measured in the same run: the dense matrix rate (8192^3 GEMM in the data type)
and the copy bandwidth (a 2 GiB device-to-device copy). ``floor = max(FLOPs / rate,
min_bytes / bandwidth)``; ``eff = floor / time``; ``ratio = cuDNN time / our time``.

Usage (on the GPU machine, from the repo root)::

    python bench/compare.py --dtypes fp16,bf16,fp32 --out bench/last_compare.md [--plot bench/compare.png]
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from miopen_solver.command import parse  # noqa: E402
from miopen_solver.fileio import write_text  # noqa: E402
from miopen_solver.layouts import storage_dtype  # noqa: E402
from miopen_solver.spec import PerfConfig, make_spec  # noqa: E402

BASES = {"fp16": "convfp16", "bf16": "convbfp16", "fp32": "conv"}


def read_suite(path: Path):
    rows = []
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        cmd, _, label = line.partition("#")
        rows.append((label.strip(), cmd.strip()))
    return rows


def default_config(problem, target):
    try:
        from miopen_solver.solver import DgradSolver
        return DgradSolver().get_default_performance_config(problem, target)
    except ImportError:
        return PerfConfig()


def graph_time_ms(torch, fn, launches: int, replays: int) -> float:
    """Median per-call time of ``fn`` replayed from a CUDA graph of ``launches`` calls."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(launches):
            fn()
    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(replays):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / launches)
    return statistics.median(times)


def measure_ceilings(torch, dtype: str):
    tdt = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[dtype]
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=tdt)
    b = torch.randn(n, n, device="cuda", dtype=tdt)
    ms = graph_time_ms(torch, lambda: torch.matmul(a, b), 3, 5)
    rate = 2 * n ** 3 / (ms * 1e-3)
    del a, b
    src = torch.ones(2 ** 29, dtype=torch.float32, device="cuda")  # 2 GiB, vectorised copy
    dst = torch.empty_like(src)
    ms = graph_time_ms(torch, lambda: dst.copy_(src), 5, 5)
    bw = 2 * src.numel() * src.element_size() / (ms * 1e-3)
    del src, dst
    torch.cuda.empty_cache()
    return rate, bw


def time_cudnn(torch, p, launches, replays):
    tdt = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[p.dtype]
    cl = torch.channels_last
    dy = torch.randn(p.N, p.K, p.Ho, p.Wo, device="cuda", dtype=tdt).to(memory_format=cl)
    x = torch.empty(p.N, p.C, p.Hi, p.Wi, device="cuda", dtype=tdt).to(memory_format=cl)
    w = torch.randn(p.K, p.cpg, p.Y, p.X, device="cuda", dtype=tdt).to(memory_format=cl)

    def fn():
        return torch.ops.aten.convolution_backward(
            dy, x, w, None, [p.sH, p.sW], [p.pH, p.pW], [p.dH, p.dW], False, [0, 0], p.G,
            [True, False, False])

    return graph_time_ms(torch, fn, launches, replays)


def time_cublas(torch, p, launches, replays):
    tdt = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[p.dtype]
    m = p.N * p.Ho * p.Wo
    a = torch.randn(m, p.K, device="cuda", dtype=tdt)
    b = torch.randn(p.K, p.C, device="cuda", dtype=tdt)
    return graph_time_ms(torch, lambda: torch.matmul(a, b), launches, replays)


def git_commit() -> str:
    if os.environ.get("DGRAD_COMMIT"):
        return os.environ["DGRAD_COMMIT"]
    try:
        return subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                                       stderr=subprocess.DEVNULL).strip()
    except Exception:
        return "unknown (pass DGRAD_COMMIT)"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", default=str(ROOT / "bench" / "suite.txt"))
    ap.add_argument("--dtypes", default="fp16,bf16,fp32")
    ap.add_argument("--only", default="", help="substring filter on row labels")
    ap.add_argument("--launches", type=int, default=20)
    ap.add_argument("--replays", type=int, default=15)
    ap.add_argument("--perfdb", default=None, help="use perf-db winners where present")
    ap.add_argument("--config", default=None, help="one perf config for every row (overrides the default)")
    ap.add_argument("--out", default=None, help="write the markdown table here")
    ap.add_argument("--plot", default=None, help="write a PNG bar chart here (needs matplotlib)")
    args = ap.parse_args(argv)

    import torch
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    from miopen_solver.runtime import get_engine
    eng = get_engine("cuda")
    target = eng.target
    device = eng.rt.device_name()
    rows = [r for r in read_suite(Path(args.suite)) if args.only in r[0]]
    db = None
    if args.perfdb:
        from miopen_solver.perfdb import PerfDb
        db = PerfDb(args.perfdb)

    results = []
    lines_md = []
    for dtype in args.dtypes.split(","):
        rate, bw = measure_ceilings(torch, dtype)
        lines_md.append(f"\n### {dtype}  (measured ceilings: {rate / 1e12:.0f} TFLOP/s matrix, "
                        f"{bw / 1e12:.2f} TB/s copy)\n")
        lines_md.append("| shape | ours us | cuDNN us | ratio | ours TF/s | eff | floor us | cuBLAS us | "
                        "ours/cuBLAS | regs | config |")
        lines_md.append("|---|---|---|---|---|---|---|---|---|---|---|")
        for label, cmd in rows:
            words = cmd.split()
            words[0] = BASES[dtype]
            p = parse(" ".join(words)).problem
            cfg = PerfConfig.parse(args.config) if args.config else None
            if cfg is None and db is not None:
                hit = db.lookup(p.problem_key(), target.arch)
                cfg = PerfConfig.parse(hit.values) if hit else None
            cfg = cfg or default_config(p, target)
            row = {"label": label, "dtype": dtype, "config": cfg.serialize()}
            try:
                spec = make_spec(p, target, cfg)
                rng = np.random.default_rng(0)
                dt = storage_dtype(dtype)
                dy = rng.uniform(0, 0.01, (p.N, p.Ho, p.Wo, p.K)).astype(dt)
                w = rng.uniform(-0.005, 0.005, (p.K, p.Y, p.X, p.cpg)).astype(dt)
                ours = eng.time_graph(spec, dy, w, args.launches, args.replays).median_ms
                regs = eng.rt.function_registers(eng.build(spec).func)
            except Exception as e:  # a failing row, not a dead sweep
                row.update(error=f"{type(e).__name__}: {str(e).splitlines()[0][:120]}")
                results.append(row)
                lines_md.append(f"| {label} | FAILED: {row['error']} |||||||||")
                continue
            cudnn = time_cudnn(torch, p, args.launches, args.replays)
            blas = time_cublas(torch, p, args.launches, args.replays) if p.is_pointwise else None
            floor = max(p.flops / rate, p.min_bytes / bw) * 1e3
            row.update(ours_ms=ours, cudnn_ms=cudnn, cublas_ms=blas, floor_ms=floor,
                       ratio=cudnn / ours, eff=floor / ours, tflops=p.flops / ours / 1e9, regs=regs)
            results.append(row)
            lines_md.append(
                f"| {label} | {ours * 1e3:.1f} | {cudnn * 1e3:.1f} | {cudnn / ours:.2f} | "
                f"{p.flops / ours / 1e9:.0f} | {floor / ours:.2f} | {floor * 1e3:.1f} | "
                f"{'' if blas is None else f'{blas * 1e3:.1f}'} | "
                f"{'' if blas is None else f'{blas / ours:.2f}'} | {regs} | `{cfg.serialize()}` |")
            print(lines_md[-1], flush=True)
        ok = [r["ratio"] for r in results if r["dtype"] == dtype and "ratio" in r]
        if ok:
            gm = math.exp(sum(math.log(x) for x in ok) / len(ok))
            lines_md.append(f"\n{dtype}: geometric-mean ratio cuDNN/ours = **{gm:.2f}** over {len(ok)} rows; "
                            f"min {min(ok):.2f}")
            print(lines_md[-1], flush=True)

    header = (f"## compare.py run {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC\n\n"
              f"- device: {device} ({target.arch}, {target.num_cus} SMs); torch {torch.__version__}, "
              f"cuDNN {torch.backends.cudnn.version()}\n- commit: {git_commit()}\n"
              f"- command: `python bench/compare.py {' '.join(argv if argv is not None else sys.argv[1:])}`\n"
              f"- timing: CUDA graph of {args.launches} launches, median of {args.replays} replays, per launch\n")
    text = header + "\n".join(lines_md) + "\n"
    if args.out:
        write_text(args.out, text)
    if args.plot:
        plot(results, args.plot)
    return 0


def plot(results, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    dtypes = sorted({r["dtype"] for r in results})
    fig, axes = plt.subplots(len(dtypes), 1, figsize=(14, 4 * len(dtypes)), squeeze=False)
    for ax, dt in zip(axes[:, 0], dtypes):
        rows = [r for r in results if r["dtype"] == dt and "ratio" in r]
        x = np.arange(len(rows))
        ax.bar(x - 0.2, [r["ours_ms"] / r["floor_ms"] for r in rows], 0.4, label="ours")
        ax.bar(x + 0.2, [r["cudnn_ms"] / r["floor_ms"] for r in rows], 0.4, label="cuDNN")
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_xticks(x, [r["label"] for r in rows], rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("time / roofline floor")
        ax.set_title(f"backward data, {dt}, NHWC (lower is better)")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    sys.exit(main())
