"""Does a change of kernel *text* change the machine code? PTX (nvcc, sm_90a) of one kernel per
(data type, math, warp_tile_n, schedule) found in the default and search configs of a few
lines that reach every warpgroup width and most schedules; written at one commit and
compared with another's (no GPU needed)::

    git stash; python bench/ptx_diff.py --out /tmp/ptx_before; git stash pop
    python bench/ptx_diff.py --out /tmp/ptx_after
    python bench/ptx_diff.py --compare /tmp/ptx_before /tmp/ptx_after

``--out`` writes ``NNN.cu`` (the emitted text), ``NNN.ptx`` and ``index.json`` (what each
kernel is); ``--compare`` exits 1 when the two indexes differ or any PTX differs, naming them.
Identical PTX means identical SASS: the GPU tests need not run again for that change.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.compare import OneLineParser  # noqa: E402

LINES = (
    # 1x1, 672 channels: 160/224-wide and every pointwise width, fp16
    "convfp16 -n 8 -c 672 -H 14 -W 14 -k 112 -y 1 -x 1 -p 0 -q 0 -F 2 "
    "--in_layout NHWC --out_layout NHWC --fil_layout NHWC",
    # 1x7 bf16 with 224/160 channels
    "convbfp16 -n 8 -c 224 -H 17 -W 17 -k 160 -y 1 -x 7 -p 0 -q 3 -F 2 --in_layout NHWC --out_layout NHWC "
    "--fil_layout NHWC",
    # strided 3x3, MIOpen's default NCHW: sub-pixel and NCHW-dX epilogues
    "convfp16 -n 8 -c 256 -H 28 -W 28 -k 256 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 -F 2",
    # fp32 with TF32 math: the .tf32 warpgroup instructions
    "conv -n 8 -c 256 -H 14 -W 14 -k 256 -y 3 -x 3 -p 1 -q 1 -F 2 -M 0 --in_layout NHWC --out_layout NHWC "
    "--fil_layout NHWC",
    # patch embedding
    "convfp16 -n 8 -c 3 -H 224 -W 224 -k 768 -y 16 -x 16 -p 0 -q 0 -u 16 -v 16 -F 2 --in_layout NHWC "
    "--out_layout NHWC --fil_layout NHWC",
    # NCHW 1x1 (the NCHW pointwise schedules), NCHW 3x3 stride 1 (NCHW TMA)
    "convbfp16 -n 8 -c 256 -H 14 -W 14 -k 512 -y 1 -x 1 -F 2",
    "convfp16 -n 8 -c 128 -H 14 -W 14 -k 128 -y 3 -x 3 -p 1 -q 1 -F 2",
    # grouped (group packing), 32-channel tiles
    "convfp16 -n 8 -c 256 -H 14 -W 14 -k 256 -y 3 -x 3 -p 1 -q 1 -g 32 -F 2 --in_layout NHWC --out_layout NHWC "
    "--fil_layout NHWC",
    "convfp16 -n 8 -c 32 -H 28 -W 28 -k 256 -y 3 -x 3 -p 1 -q 1 -F 2 --in_layout NHWC --out_layout NHWC "
    "--fil_layout NHWC",
)


def write(out: Path) -> int:
    """Emit and compile the kernels into ``out``; returns the count."""
    from miopen_solver.command import parse
    from miopen_solver.heuristics import default_performance_config, search_space
    from miopen_solver.spec import make_spec
    from miopen_solver.target import get_target
    from miopen_solver.kernels.emit import emit
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise SystemExit("ptx_diff.py: nvcc not found on PATH")
    out.mkdir(parents=True, exist_ok=True)
    target = get_target("sm_90")
    index = {}
    for line in LINES:
        problem = parse(line.split()).problem
        for cfg in [default_performance_config(problem, target), *search_space(problem, target)]:
            try:
                spec = make_spec(problem, target, cfg)
            except Exception:          # a candidate this problem cannot take
                continue
            key = f"{problem.dtype}/{getattr(spec, 'math', '')}/n{cfg.warp_tile_n}/s{int(cfg.schedule)}"
            if key in index.values():
                continue
            name = f"{len(index) + 1:03d}"
            (out / f"{name}.cu").write_text(emit(spec).text)
            subprocess.run([nvcc, "-arch=sm_90a", "-ptx", "-std=c++17", "-o", str(out / f"{name}.ptx"),
                            str(out / f"{name}.cu")], check=True, capture_output=True)
            index[name] = key
    (out / "index.json").write_text(json.dumps(index, indent=0, sort_keys=True))
    return len(index)


def compare(a: Path, b: Path) -> list:
    """What differs between two ``--out`` directories (empty: the same kernels, the same PTX)."""
    ia, ib = (json.loads((d / "index.json").read_text()) for d in (a, b))
    if ia != ib:
        return [f"the kernel sets differ: {sorted(set(ia.items()) ^ set(ib.items()))[:5]}"]
    return [f"{name} ({key}): PTX differs" for name, key in sorted(ia.items())
            if (a / f"{name}.ptx").read_text() != (b / f"{name}.ptx").read_text()]


def main(argv=None) -> int:
    ap = OneLineParser(prog="ptx_diff.py", description=__doc__.split("\n\n")[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--out", type=Path, help="write the kernels' text and PTX into this directory")
    mode.add_argument("--compare", type=Path, nargs=2, metavar=("A", "B"), help="compare two --out directories")
    args = ap.parse_args(argv)
    if args.out is not None:
        print(f"{write(args.out)} kernels written to {args.out}")
        return 0
    diffs = compare(*args.compare)
    for d in diffs:
        print(d)
    n = len(json.loads((args.compare[0] / "index.json").read_text()))
    print(f"{n} kernels: " + ("PTX identical" if not diffs else f"{len(diffs)} differ"))
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
