"""Which kernels cuDNN (and, for 1x1 layers, cuBLAS) launch for each line of a suite, and how
long each runs: the vendors' tile and algorithm choices, read from their kernel names, as
evidence for our own defaults (NVIDIA GPU with PyTorch)::

    python bench/vendor_kernels.py --suite bench/zoo.txt --out vendor.md --json vendor.json

Each line runs its dgrad through ``torch.ops.aten.convolution_backward`` (cuDNN, the line's
layouts) and, for 1x1 stride-1 lines, ``torch.matmul`` of ``dY[N*Ho*Wo, K] x W[K, C]``
(cuBLAS), a few times warm, then once under ``torch.profiler``; every CUDA kernel of that
launch is listed with its device time in microseconds (the profiler's, not a graph's: for
times against ours use ``compare.py``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.compare import (AS_WRITTEN, BadInput, OneLineParser, _torch_dtype, check_outputs,  # noqa: E402
                           cudnn_dgrad, dtypes_arg, gpu, plan_of, row_problem, shard_arg, stream_table)


def _kernels(torch, fn) -> list:
    """``(name, device us)`` of every CUDA kernel one call of ``fn`` launches."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    out = []
    for e in prof.events():
        if getattr(e, "device_type", None) is not None and "CUDA" in str(e.device_type):
            out.append((e.name, round(e.device_time_total, 2) if hasattr(e, "device_time_total")
                        else round(e.cuda_time_total, 2)))
    return out


def probe(torch, p) -> dict:
    out = {"cudnn": _kernels(torch, cudnn_dgrad(torch, p))}
    if p.Y == p.X == 1 and p.sH == p.sW == 1 and p.G == 1:
        tdt = _torch_dtype(torch, p.dtype)
        a = torch.randn(p.N * p.Ho * p.Wo, p.K, device="cuda", dtype=tdt)
        b = torch.randn(p.K, p.C, device="cuda", dtype=tdt)
        out["cublas"] = _kernels(torch, lambda: torch.matmul(a, b))
    return out


def _probed(torch, plan):
    """``(row, table lines)`` per planned line: its vendor kernels, or the error it raised."""
    for item in plan:
        r = {"label": item["label"], "cls": item["cls"], "dtype": item["dtype"], "line": item["cmd"]}
        try:
            r.update(probe(torch, row_problem(item["cmd"])))
        except Exception as e:  # a vendor refusal is a row, not the end of the run
            r["error"] = f"{type(e).__name__}: {str(e)[:200]}"
        lines = [f"| {item['label']} | {item['dtype']} | {vendor} | "
                 + "; ".join(f"`{n[:150]}` {us}" for n, us in r[vendor]) + " |"
                 for vendor in ("cudnn", "cublas") if vendor in r]
        if "error" in r:
            lines.append(f"| {item['label']} | {item['dtype']} | error | {r['error']} |")
        yield r, lines


def main(argv=None) -> int:
    ap = OneLineParser(prog="vendor_kernels.py", description=__doc__.split("\n\n")[0].rstrip(":") + ".")
    ap.add_argument("--suite", default="bench/zoo.txt")
    ap.add_argument("--dtypes", type=dtypes_arg, default=AS_WRITTEN)
    ap.add_argument("--only", default="")
    ap.add_argument("--shard", type=shard_arg, default=None)
    ap.add_argument("--out", default=None, help="markdown table here")
    ap.add_argument("--json", default=None, help="rows here")
    args = ap.parse_args(argv)
    try:
        check_outputs(out=args.out, json=args.json)
        # compare.py's checks: an empty suite names --suite, an empty selection the flags that made it
        plan = plan_of(argparse.Namespace(suite=args.suite, dtypes=args.dtypes, only=args.only, classes="",
                                          shard=args.shard or ""))
        torch, _ = gpu()
    except BadInput as e:
        print(f"vendor_kernels.py: {e}", file=sys.stderr)
        return 2
    stream_table(_probed(torch, plan), ["| layer | dtype | vendor | kernels (device us) |", "|---|---|---|---|"],
                 args.json, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
