"""The patch GEMM (stride = filter) against cuDNN and cuBLAS on one NVIDIA GPU (H200).

For every ``class=patch`` line of ``bench/zoo.txt`` plus :data:`EXTRA` stems: our default
solution (``DgradSolver().find_solution``, or ``--config``), cuDNN's dgrad through PyTorch
and cuBLAS on the same dense GEMM (``torch.matmul`` of ``[N*Ho*Wo, K] x [K, Y*X*cpg]``, one
per group; the scatter into dX patches is not part of it), each captured in a CUDA graph of
``--launches`` launches, median of ``--replays`` replays per launch -- the timing functions
of ``bench/compare.py``. Prints a markdown table (ours, cuDNN, cuBLAS ms; cuDNN/ours and
cuBLAS/ours speed ratios, > 1 = ours faster) and writes ``--json``. Targets (issue 14):
cuDNN/ours >= 3 on stems with C <= 16, cuBLAS/ours >= 0.9 on every line.

Usage (on the GPU machine, from the repo root; needs torch, cuda-python, numpy)::

    PYTHONPATH=. python bench/patch_h200.py --json bench/results/patch_h200.json
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from compare import (BadInput, OneLineParser, _reason, _torch_dtype, check_outputs, count_arg,  # noqa: E402
                     git_commit, gpu, graph_time_ms, ours_or_error, read_suite, split_label, time_cudnn)
from miopen_solver.command import parse  # noqa: E402
from miopen_solver.config import PerfConfig  # noqa: E402
from miopen_solver.errors import FileError, PerfConfigError, shown_path  # noqa: E402
from miopen_solver.fileio import write_text  # noqa: E402
from miopen_solver.text import json_text, shorten  # noqa: E402

NHWC = "-F 2 --in_layout NHWC --out_layout NHWC --fil_layout NHWC"
EXTRA = [
    ("vit_l_14/stem_14x14s14_c3_k1024_224", f"convfp16 -n 64 -c 3 -H 224 -W 224 -k 1024 -y 14 -x 14 -u 14 -v 14 {NHWC}"),
    ("vit_b_16/stem_16x16s16_c3_k768_224_n128_bf16",
     f"convbfp16 -n 128 -c 3 -H 224 -W 224 -k 768 -y 16 -x 16 -u 16 -v 16 {NHWC}"),
    ("vit_b_16/stem_16x16s16_c3_k768_224_n128_fp32",
     f"conv -n 128 -c 3 -H 224 -W 224 -k 768 -y 16 -x 16 -u 16 -v 16 {NHWC}"),
    ("convnext/stem_4x4s4_c3_k96_226_border", f"convbfp16 -n 64 -c 3 -H 226 -W 226 -k 96 -y 4 -x 4 -u 4 -v 4 {NHWC}"),
    ("swin/patch_merge_2x2s2_c384_k768_28", f"convfp16 -n 64 -c 384 -H 28 -W 28 -k 768 -y 2 -x 2 -u 2 -v 2 {NHWC}"),
    ("swin/patch_merge_2x2s2_c384_k768_28_bf16",
     f"convbfp16 -n 64 -c 384 -H 28 -W 28 -k 768 -y 2 -x 2 -u 2 -v 2 {NHWC}"),
]
"""Stems and merges beside the zoo's patch lines: (label, MIOpenDriver line)."""


def rows(zoo: Path) -> list:
    """``[(label, line)]``: the zoo's ``class=patch`` lines, then :data:`EXTRA`."""
    out = []
    for label, line in read_suite(zoo):
        name, cls = split_label(label)
        if cls == "patch":
            out.append((name, line))
    return out + EXTRA


def time_cublas_patch(torch, p, launches: int, replays: int) -> float:
    """The patch GEMM on cuBLAS: per group ``[N*Ho*Wo, kpg] x [kpg, Y*X*cpg]`` (one matmul,
    batched over groups when G > 1)."""
    tdt = _torch_dtype(torch, p.dtype)
    m, n = p.N * p.Ho * p.Wo, p.Y * p.X * p.cpg
    if p.G == 1:
        a = torch.randn(m, p.K, device="cuda", dtype=tdt)
        b = torch.randn(p.K, n, device="cuda", dtype=tdt)
        return graph_time_ms(torch, lambda: torch.matmul(a, b), launches, replays)
    a = torch.randn(p.G, m, p.kpg, device="cuda", dtype=tdt)
    b = torch.randn(p.G, p.kpg, n, device="cuda", dtype=tdt)
    return graph_time_ms(torch, lambda: torch.bmm(a, b), launches, replays)


def measure(torch, eng, label: str, line: str, args) -> dict:
    """One row; failures are recorded in it, never raised."""
    p = parse(line).problem
    row = {"label": label, "line": line, "dtype": p.dtype, "C": p.C}
    row.update(ours_or_error(eng, p, args.launches, args.replays, args.config))
    for key, fn in (("cudnn_ms", time_cudnn), ("cublas_ms", time_cublas_patch)):
        try:
            row[key] = fn(torch, p, args.launches, args.replays)
        except Exception as e:  # noqa: BLE001 - no algorithm, out of memory, ...
            row[key.replace("_ms", "_error")] = _reason(e)
            torch.cuda.empty_cache()
    ours = row.get("ours_ms")
    if ours:
        for key, ratio in (("cudnn_ms", "vs_cudnn"), ("cublas_ms", "vs_cublas")):
            if row.get(key):
                row[ratio] = row[key] / ours
    return row


def _cell(v, fmt: str) -> str:
    return format(v, fmt) if isinstance(v, (int, float)) else "n/a"


def markdown(results: list) -> str:
    head = ["| layer | dtype | C | config | ours ms | cuDNN ms | cuBLAS ms | cuDNN/ours | cuBLAS/ours |",
            "|---|---|---|---|---|---|---|---|---|"]
    body = []
    for r in results:
        config = r.get("config") or r.get("ours_error", "")
        body.append(f"| {r['label']} | {r['dtype']} | {r['C']} | {config} | {_cell(r.get('ours_ms'), '.4f')} | "
                    f"{_cell(r.get('cudnn_ms'), '.4f')} | {_cell(r.get('cublas_ms'), '.4f')} | "
                    f"{_cell(r.get('vs_cudnn'), '.2f')} | {_cell(r.get('vs_cublas'), '.2f')} |")
    stems = [r for r in results if r["C"] <= 16 and "vs_cudnn" in r]
    tail = ["", f"- stems (C <= 16) at >= 3x cuDNN: {sum(r['vs_cudnn'] >= 3 for r in stems)}/{len(stems)}",
            f"- lines at >= 0.9 of cuBLAS: {sum(r.get('vs_cublas', 0) >= 0.9 for r in results)}/{len(results)}"]
    return "\n".join(head + body + tail) + "\n"


def main(argv=None) -> int:
    ap = OneLineParser(prog="patch_h200.py", description=__doc__.splitlines()[0])
    ap.add_argument("--zoo", default=str(ROOT / "bench" / "zoo.txt"))
    ap.add_argument("--only", default="", help="substring filter on labels")
    ap.add_argument("--config", default=None, help="one perf config for every row (default: the solver's)")
    ap.add_argument("--launches", type=count_arg, default=20)
    ap.add_argument("--replays", type=count_arg, default=15)
    ap.add_argument("--json", default=None, help="write the rows and the run's context here")
    args = ap.parse_args(argv)
    try:
        if args.config is not None:
            try:
                PerfConfig.parse(args.config)
            except PerfConfigError as e:
                raise BadInput(f"--config {shorten(args.config)!r}: {e}") from None
        try:
            planned = rows(args.zoo)
        except FileError as e:
            raise BadInput(f"--zoo {e}") from None
        for label, line in planned:         # every line parses before any timing
            try:
                parse(line)
            except ValueError as e:         # MiopenCommandError: a bad flag or value of the line
                raise BadInput(f"--zoo {shown_path(args.zoo)}: {label}: {e}") from None
        if not any(args.only in label for label, _ in planned):
            raise BadInput(f"--only {shorten(args.only)!r}: selects no line; allowed: a substring of a patch "
                           f"line's label (e.g. {planned[0][0]!r})")
        check_outputs([("--zoo", args.zoo)], json=args.json)
        torch, eng = gpu()
    except BadInput as e:
        print(f"patch_h200.py: {e}", file=sys.stderr)
        return 2
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    results = []
    for label, line in planned:
        if args.only in label:
            results.append(measure(torch, eng, label, line, args))
            print(markdown(results[-1:]).splitlines()[2], flush=True)
    text = markdown(results)
    print(f"\n## patch_h200.py on {eng.rt.device_name()} ({eng.target.arch}), commit {git_commit()}\n\n{text}")
    if args.json:
        meta = {"device": eng.rt.device_name(), "arch": eng.target.arch, "commit": git_commit(),
                "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
                "launches": args.launches, "replays": args.replays}
        try:
            write_text(args.json, json_text({"meta": meta, "rows": results}, indent=1) + "\n")
        except FileError as e:
            print(f"patch_h200.py: --json {e}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
