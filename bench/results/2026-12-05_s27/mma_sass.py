"""Issued instructions per thread of one mma-body block, by phase, from sm_90 SASS (no GPU).

For each tile: emit the kernel of ``--tree`` (a checkout's root: the base or this tree) for the
ConvNeXt-T 7x7 depthwise layer (n64 c96 56x56, fp16), build a cubin (nvcc -O3 -arch=sm_90),
disassemble it (cuobjdump -sass) and find its loops (backward branches). Each loop's body
counts once per trip a thread makes: the band table (loop with LDG and STS), the dY staging
(the loop with PRMT and 16-byte STS), the MMA loop (HMMA; one trip per channel the warp
takes), the dX store (the last loop). Trips per thread are computed from the tile, as the
kernel's loops run them; an estimate of issue slots, not a measurement of time.

Usage: PATH=<dir with cuobjdump and nvdisasm>:$PATH python mma_sass.py --tree /path/to/checkout
"""
import argparse
import math
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ap = argparse.ArgumentParser()
ap.add_argument("--tree", required=True)
args = ap.parse_args()
sys.path.insert(0, args.tree)
from miopen_solver.direct import make_direct_spec, mma_config  # noqa: E402
from miopen_solver.problem import ConvProblem  # noqa: E402
from miopen_solver.target import get_target  # noqa: E402

NHWC = dict(in_layout="NHWC", out_layout="NHWC", fil_layout="NHWC")
p = ConvProblem(N=64, C=96, Hi=56, Wi=56, K=96, G=96, Y=7, X=7, pH=3, pW=3, dtype="fp16", **NHWC)
for tile in ((32, 16, 16, 4), (64, 16, 16, 8), (64, 16, 8, 4)):
    s = make_direct_spec(p, get_target("sm_90"), mma_config(*tile))
    d = Path(tempfile.mkdtemp())
    (d / "k.cu").write_text(s.emit().text)
    subprocess.run(["nvcc", "-cubin", "-arch=sm_90", "-O3", "-o", str(d / "k.cubin"), str(d / "k.cu")], check=True)
    sass = subprocess.run(["cuobjdump", "-sass", str(d / "k.cubin")], capture_output=True, text=True,
                          check=True).stdout
    ins = [line for line in sass.splitlines() if re.match(r"\s+/\*[0-9a-f]{4}\*/", line)]
    addr = [int(re.match(r"\s+/\*([0-9a-f]{4})\*/", line).group(1), 16) for line in ins]
    loops = []
    for a, line in zip(addr, ins):
        m = re.search(r"BRA\s+(?:`?\(?\.?L?_?x?_?\d*\)?)?\s*0x([0-9a-f]+)", line)
        if m and int(m.group(1), 16) < a:
            body = [x for b, x in zip(addr, ins) if int(m.group(1), 16) <= b <= a]
            loops.append(body)
    t = s.block_threads
    band_rows = p.Y * s.tn
    band_entries = band_rows * s.ws_pitch
    stage_items = (s.tn // 8) * s.plane_rows * (s.plane_width // 2)
    store_items = (s.tn // 8) * (s.tqh // 2) * s.tqw
    chans = s.tn / s.warps
    out = []
    for body in loops:
        text = " ".join(body)
        n = len(body)
        if "HMMA" in text:
            trips, what = chans, "MMA (per channel)"
        elif "LDG" in text and "STS" in text and "PRMT" not in text:
            old = "ISETP" in text and text.count("LDG") >= 8
            trips = math.ceil(band_entries / (4 * t)) if old else math.ceil(band_rows / t)
            what = "band table"
        elif "PRMT" in text and "STS" in text:
            trips, what = stage_items / (4 * t), "dY staging"
        else:
            trips, what = store_items / t, "dX store"
        out.append((what, n, trips, n * trips))
    total = sum(x[3] for x in out)
    print(f"tile {tile}: " + "; ".join(f"{w} {n} x {tr:.2f} = {tot:.0f}" for w, n, tr, tot in out)
          + f"; loops total {total:.0f} per thread")
