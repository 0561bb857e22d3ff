"""Where the direct schedule beats the GEMM schedules: the cpg threshold of the default.

For grouped and depthwise layers across cpg = 1..32 (every grouped/depthwise line of
bench/zoo.txt plus ResNeXt-50 32x4d's four stages, cpg 4/8/16/32, and depthwise
multipliers), time on one NVIDIA GPU, in CUDA graphs as bench/compare.py does:

* ``direct``: :func:`miopen_solver.direct.default_direct_config`;
* ``gemm``: the GEMM default the solver would take without the direct rule
  (:func:`miopen_solver.heuristics.measured_nvidia_config`);
* cuDNN (``aten.convolution_backward``, channels_last).

Prints one markdown row per layer and the geometric mean of gemm/direct per cpg.

Usage (GPU machine, repo root)::

    PYTHONPATH=. python bench/direct_threshold.py [--out FILE]
"""

from __future__ import annotations

import collections
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import compare  # noqa: E402
from miopen_solver.command import parse  # noqa: E402
from miopen_solver.direct import default_direct_config, direct_reason  # noqa: E402
from miopen_solver.heuristics import measured_nvidia_config  # noqa: E402

NHWC = "-F 2 --in_layout NHWC --out_layout NHWC --fil_layout NHWC"
EXTRA = [  # ResNeXt-50 32x4d conv2 of each stage (cpg 4, 8, 16, 32), depthwise multipliers
    ("resnext50/stage1_g32_cpg4", "convfp16 -n 32 -c 128 -H 56 -W 56 -k 128 -g 32 -y 3 -x 3 -p 1 -q 1"),
    ("resnext50/stage2_g32_cpg8", "convfp16 -n 32 -c 256 -H 28 -W 28 -k 256 -g 32 -y 3 -x 3 -p 1 -q 1"),
    ("resnext50/stage3_g32_cpg16", "convfp16 -n 32 -c 512 -H 14 -W 14 -k 512 -g 32 -y 3 -x 3 -p 1 -q 1"),
    ("resnext50/stage4_g32_cpg32", "convfp16 -n 32 -c 1024 -H 7 -W 7 -k 1024 -g 32 -y 3 -x 3 -p 1 -q 1"),
    ("resnext50/stage2_s2_cpg8", "convfp16 -n 32 -c 256 -H 56 -W 56 -k 256 -g 32 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2"),
    ("grouped/cpg2_3x3_56", "convfp16 -n 32 -c 128 -H 56 -W 56 -k 128 -g 64 -y 3 -x 3 -p 1 -q 1"),
    ("dw_mult2/3x3_56_c64k128", "convfp16 -n 32 -c 64 -H 56 -W 56 -k 128 -g 64 -y 3 -x 3 -p 1 -q 1"),
    ("grouped/cpg8_3x3_56_bf16", "convbfp16 -n 32 -c 256 -H 56 -W 56 -k 256 -g 32 -y 3 -x 3 -p 1 -q 1"),
]


def layers():
    """(label, problem) for every zoo line with G > 1 and the extra layers."""
    out = []
    for label, cmd in compare.read_suite(ROOT / "bench" / "zoo.txt"):
        p = parse(cmd.split()).problem
        if p.G > 1:
            out.append((label.split()[0], p))
    out += [(label, parse(f"{cmd} {NHWC}".split()).problem) for label, cmd in EXTRA]
    return out


def main(argv=None) -> int:
    ap = compare.OneLineParser(prog="direct_threshold.py", description=__doc__.splitlines()[0])
    ap.add_argument("--launches", type=compare.count_arg, default=20)
    ap.add_argument("--replays", type=compare.count_arg, default=15)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    try:
        compare.check_outputs(out=args.out)
        torch, eng = compare.gpu()
    except compare.BadInput as e:
        print(f"direct_threshold.py: {e}", file=sys.stderr)
        return 2
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    t = eng.target
    lines = ["| layer | dtype | cpg | kpg | direct us | gemm us | cuDNN us | gemm/direct | cuDNN/direct |",
             "|---|---|---|---|---|---|---|---|---|"]
    by_cpg = collections.defaultdict(list)
    for label, p in layers():
        if direct_reason(p, t) is not None:
            lines.append(f"| {label} | {p.dtype} | {p.cpg} | {p.kpg} | n/a: {direct_reason(p, t)} | | | | |")
            continue
        try:
            d = compare.time_ours(eng, p, args.launches, args.replays,
                                  config=default_direct_config(p, t).serialize())["ours_ms"] * 1e3
            g = compare.time_ours(eng, p, args.launches, args.replays,
                                  config=measured_nvidia_config(p, t).serialize())["ours_ms"] * 1e3
            c = compare.time_cudnn(torch, p, args.launches, args.replays) * 1e3
        except Exception as e:  # noqa: BLE001 - a row that fails is reported, the rest go on
            lines.append(f"| {label} | {p.dtype} | {p.cpg} | {p.kpg} | failed: {compare._reason(e)} | | | | |")
            continue
        by_cpg[p.cpg].append(g / d)
        lines.append(f"| {label} | {p.dtype} | {p.cpg} | {p.kpg} | {d:.1f} | {g:.1f} | {c:.1f} | {g / d:.2f} | "
                     f"{c / d:.2f} |")
        print(lines[-1], flush=True)
    lines += ["", "| cpg | layers | geomean gemm/direct | min | max |", "|---|---|---|---|---|"]
    for cpg in sorted(by_cpg):
        r = by_cpg[cpg]
        gm = math.exp(sum(math.log(x) for x in r) / len(r))
        lines.append(f"| {cpg} | {len(r)} | {gm:.2f} | {min(r):.2f} | {max(r):.2f} |")
    text = "\n".join(lines) + "\n"
    print("\n".join(lines[-(len(by_cpg) + 2):]))
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
