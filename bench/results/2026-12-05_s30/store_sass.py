"""Global store widths in the sm_90 SASS of each zoo line's default kernel (no GPU needed).

For every line of ``--suite``: resolve the default solution (``DgradSolver().find_solution``),
emit its dgrad kernel, build a cubin (nvcc -O3 -arch=sm_90), disassemble it (cuobjdump -sass)
and count the STG instructions by width (``STG.E.128``, ``.64``, 32-bit, ``.U16``), plus the
16-bit pair atomics. Prints one line per zoo line: schedule, kernel name, counts.

Usage: PATH=<dir with cuobjdump>:$PATH python store_sass.py --suite bench/zoo.txt [--only REGEX]
       [--layout NCHW]
"""
import argparse
import collections
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from miopen_solver.command import parse  # noqa: E402
from miopen_solver.solver import DgradSolver  # noqa: E402
from miopen_solver.target import get_target  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--suite", required=True)
ap.add_argument("--only", default="")
ap.add_argument("--arch", default="sm_90")
ap.add_argument("--layout", choices=("line", "NHWC", "NCHW"), default="line",
                help="all three tensors in this layout (as compare.py --layout)")
args = ap.parse_args()
target = get_target(args.arch)
cache = {}
for raw in Path(args.suite).read_text().splitlines():
    line, _, label = raw.partition("#")
    if not line.strip() or (args.only and not re.search(args.only, raw)):
        continue
    p = parse(line.split()).problem
    if args.layout != "line":
        p = p.replace(in_layout=args.layout, out_layout=args.layout, fil_layout=args.layout)
    sol = DgradSolver().find_solution(p, target)
    k = sol.kernels[0]
    src = k.source.text
    if src not in cache:
        d = Path(tempfile.mkdtemp())
        (d / "k.cu").write_text(src)
        arch = args.arch + ("a" if args.arch == "sm_90" else "")  # wgmma/setmaxnreg need sm_90a
        b = subprocess.run(["nvcc", "-cubin", f"-arch={arch}", "-O3", "-Xptxas", "-v", "-o",
                            str(d / "k.cubin"), str(d / "k.cu")], check=True, capture_output=True, text=True)
        sass = subprocess.run(["cuobjdump", "-sass", str(d / "k.cubin")], capture_output=True,
                              text=True, check=True).stdout
        c = collections.Counter()
        for m in re.finditer(r"\b(STG|RED|ATOMG)(\.[A-Z0-9.]+)?", sass):
            op = m.group(1) + (m.group(2) or "")
            op = re.sub(r"\.(E|STRONG\.GPU|STRONG\.SYS|EF|EL|LU|NA)\b", "", op)
            c[op] += 1
        regs = re.findall(r"Used (\d+) registers", b.stderr)
        spill = re.findall(r"(\d+) bytes spill stores", b.stderr)
        c["regs=" + ",".join(regs)] = 1
        if any(int(x) for x in spill):
            c["SPILL=" + ",".join(spill)] = 1
        if "setmaxnreg' ignored" in b.stderr:
            c["SETMAXNREG_IGNORED"] = 1
        cache[src] = c
    c = cache[src]
    print(f"{label.strip()[:60]:60s} sched={sol.spec.schedule} {k.name[:70]:70s} "
          + " ".join(f"{o}:{n}" for o, n in sorted(c.items())), flush=True)
