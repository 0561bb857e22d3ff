"""Issue-slot model of the ``direct`` kernel from its sm_90 SASS, no GPU needed.

For each layer x config: emit ``kernels/direct.cu`` (miopen_solver.direct), build a cubin
with nvcc (``-arch=sm_90``, ptxas ``-v`` for registers and spills), disassemble it with
``cuobjdump -sass`` and estimate the instructions one thread issues per dX element it
owns, by class. The estimate is loop-aware but static:

* a loop is a backward branch and the code between its target and it; a loop holding
  FFMAs is a row loop (one trip per dY row of the thread's window), a loop holding STS and
  no FFMA is the filter staging loop;
* FFMA per thread is exact for an interior thread: ``TPW*TPH*V*kpg`` times the valid
  (y, x) taps of the phase;
* a row loop's other instructions count once per trip: ``nrows`` trips (the phase's dY rows,
  ``TPH + spany``), divided by the loop's unroll factor (its static FFMAs over one row's);
  every instruction of the body is counted as issued (the interior path: all columns in
  bounds, every thread row with a tap), so rows where a thread row has no tap count the
  skipped weight reads too;
* the filter staging loop counts its body per staged unit (``units / threads`` per thread,
  body / STS in the body);
* with a staged dY window (``lds_k_outer`` 1 or 2) a loop holding STS wider than 32 bits is
  the dY staging loop: its body counts once per ``elements / threads`` staged elements per
  thread, divided by the elements its STS store per trip (``elements`` = the block's window,
  ``(TQH + spany) x (TQW + spanx) x TNY``, averaged over the phases; the widest such loop,
  i.e. the unrolled one, stands for all);
* code outside loops counts once; after the first barrier (the filter staging's), divided
  by the W phases compiled (each block runs one of their bodies).

W phases are averaged with the H phases (stride 2: four phases, the row loops matched to
their W phase by their static FFMA count). ``ffma%`` is FFMA over all issued instructions,
the share of issue slots that do math (the FMA pipe's peak is one warp instruction per
SMSP per cycle, as is the issue rate).

``SASS_DEBUG=1`` prints each row loop's static counts and the staging cost per unit.
cuobjdump comes with the CUDA toolkit or the ``nvidia-cuda-cuobjdump`` wheel.

Bad options, and nvcc or cuobjdump missing, are one ``direct_sass.py: ...`` line on stderr,
exit 2, before any output; a tool that fails on a kernel is one line, exit 3.

Usage (repo root; nvcc and cuobjdump on PATH or ``$NVCC``/``$CUOBJDUMP``)::

    PYTHONPATH=. python bench/direct_sass.py                      # the table's layers, defaults
    PYTHONPATH=. python bench/direct_sass.py --configs '16,32,8,1,1,8,1,0,0,4,1,0,1,4' --only dw7x7
    PYTHONPATH=. python bench/direct_sass.py --policies v8_p8x1_t128_l1_s1_lean --default
"""

from __future__ import annotations

import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.compare import BadInput, OneLineParser  # noqa: E402
from miopen_solver.direct import (POLICIES, axis_span, axis_taps, default_direct_config,  # noqa: E402
                                  make_direct_spec, policy_config, tap_phases)
from miopen_solver.problem import ConvProblem  # noqa: E402
from miopen_solver.errors import PerfConfigError  # noqa: E402
from miopen_solver.spec import PerfConfig  # noqa: E402
from miopen_solver.text import shorten  # noqa: E402
from miopen_solver.target import get_target  # noqa: E402

NHWC = dict(in_layout="NHWC", out_layout="NHWC", fil_layout="NHWC")


def dw(N, C, H, W, k, s=1, dtype="fp16"):
    p = (k - 1) // 2
    return ConvProblem(N=N, C=C, Hi=H, Wi=W, K=C, Y=k, X=k, pH=p, pW=p, sH=s, sW=s, G=C, dtype=dtype, **NHWC)


# The layers of the H200 table (label, problem, the config measured there).
LAYERS = [
    ("convnext dw7x7 c96 56", dw(64, 96, 56, 56, 7), "16,32,8,1,1,8,1,0,0,4,1,0,1,4"),
    ("convnext dw7x7 c192 28", dw(64, 192, 28, 28, 7), "8,64,8,1,1,8,1,0,0,4,1,0,1,4"),
    ("convnext dw7x7 c384 14", dw(64, 384, 14, 14, 7), "8,64,8,1,1,8,1,0,0,4,1,0,1,4"),
    ("effnet dw5x5 c240 28", dw(64, 240, 28, 28, 5), "8,64,8,1,1,8,1,0,0,4,1,0,1,4"),
    ("effnet dw5x5 c672 14", dw(64, 672, 14, 14, 5), "8,64,8,1,1,8,1,0,0,4,1,0,1,4"),
    ("effnet dw5x5s2 c144 56", dw(64, 144, 56, 56, 5, s=2), "16,32,8,1,1,8,1,0,0,4,1,0,1,4"),
    ("mobilenet dw3x3 c144 56", dw(64, 144, 56, 56, 3), "16,32,16,1,1,4,2,0,0,4,1,0,1,4"),
]

CLASSES = (
    ("ffma", ("FFMA",)),
    ("cvt", ("HADD2", "F2F", "F2FP", "I2F", "F2I")),
    ("lds", ("LDS",)),
    ("ldg", ("LDG",)),
    ("sts", ("STS",)),
    ("stg", ("STG",)),
    ("bits", ("PRMT", "SHF", "LOP3", "BMSK", "SGXT")),
    ("int", ("IMAD", "IADD3", "LEA", "ISETP", "SEL", "IABS", "IMNMX", "VIADD", "I2I", "LOP", "FSEL", "FSETP",
             "P2R", "R2P", "PLOP3", "S2R", "S2UR", "CS2R", "MOV", "UMOV", "ULEA", "UIADD3", "UIMAD", "ULDC",
             "LDC", "ISCADD", "USHF", "ULOP3", "UISETP", "USEL", "R2UR", "FMUL", "FADD")),
    ("ctl", ("BRA", "BSSY", "BSYNC", "BAR", "EXIT", "NOP", "RET", "CALL", "WARPSYNC", "DEPBAR", "YIELD")),
)


def klass(op: str) -> str:
    base = op.split(".")[0]
    for name, ops in CLASSES:
        if base in ops:
            return name
    return "int"


def find_tool(name: str) -> str:
    """The path of ``name`` (``cuobjdump``, ``nvcc``): ``$NAME``, else PATH, else the CUDA pip
    wheels. Raises BadInput naming what was looked at when there is none (no GPU needed, but
    the CUDA toolkit's binaries are)."""
    var = name.upper()
    env = os.environ.get(var)
    if env:
        if not (os.path.isfile(env) and os.access(env, os.X_OK)):
            raise BadInput(f"${var} {shorten(env)!r}: not an executable file; allowed: the path of {name} "
                           f"(CUDA toolkit)")
        return env
    exe = shutil.which(name)
    if exe:
        return exe
    for base in sys.path:     # the pip wheels nvidia-cuda-cuobjdump / nvidia-cuda-nvdisasm
        for sub in ("nvidia/cu13/bin", "nvidia/cuda_cuobjdump/bin"):
            cand = Path(base) / sub / name
            if cand.exists():
                return str(cand)
    raise BadInput(f"{name} not found: put it on PATH or set ${var} (CUDA toolkit"
                   + (", or the nvidia-cuda-cuobjdump wheel)" if name == "cuobjdump" else ")"))


class ToolFailed(Exception):
    """nvcc or cuobjdump failed on a kernel (the message is one line)."""


def _first_line(text: str) -> str:
    return shorten(next((l.strip() for l in text.splitlines() if l.strip()), "no output"), 200)


def build(text: str, work: Path, tools: dict):
    """(sass lines [(addr, op)], registers, spill bytes, stack bytes). ``tools``: the paths of
    ``nvcc`` and ``cuobjdump`` (:func:`find_tool`). Raises ToolFailed."""
    src, cubin = work / "k.cu", work / "k.cubin"
    src.write_text(text)
    r = subprocess.run([tools["nvcc"], "-cubin", "-arch=sm_90", "-std=c++17", "-Xptxas", "-v", "-o", str(cubin),
                        str(src)], capture_output=True, text=True)
    if r.returncode:
        raise ToolFailed(f"nvcc exited {r.returncode}: {_first_line(r.stderr + r.stdout)}")
    rep = r.stdout + r.stderr
    regs = int(re.search(r"Used (\d+) registers", rep).group(1))
    m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", rep)
    d = subprocess.run([tools["cuobjdump"], "-sass", str(cubin)], capture_output=True, text=True)
    if d.returncode:
        raise ToolFailed(f"cuobjdump exited {d.returncode}: {_first_line(d.stderr + d.stdout)}")
    sass = d.stdout
    ins = []
    for line in sass.splitlines():
        mm = re.match(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?);", line)
        if not mm:
            continue
        words = mm.group(2).split()
        if words[0].startswith("@"):
            words = words[1:]
        target = None
        if words[0].startswith("BRA"):
            t = re.search(r"0x([0-9a-f]+)", " ".join(words[1:]))
            target = int(t.group(1), 16) if t else None
        ins.append((int(mm.group(1), 16), words[0], target))
    return ins, regs, int(m.group(2)) + int(m.group(3)), int(m.group(1))


def loops(ins):
    """Innermost-first list of (lo, hi) address ranges of backward branches."""
    out = []
    for a, op, t in ins:
        if op.startswith("BRA") and t is not None and t <= a:
            out.append((t, a))
    return out


def analyse(spec, ins):
    """Per-thread issued instructions by class (dict) and the outputs one thread owns."""
    p = spec.problem
    per_out = spec.tpw * spec.tph * spec.vec
    macs = per_out * p.kpg
    ph_h = tap_phases(p.pH, p.sH, p.dH, p.Y, p.Hi)
    ph_w = tap_phases(p.pW, p.sW, p.dW, p.X, p.Wi)
    nx = {rw: len(axis_taps(rw, p.pW, p.sW, p.dW, p.X)) for rw in ph_w}
    rows = {rh: spec.tph + axis_span(rh, p.pH, p.sH, p.dH, p.Y)[1] for rh in ph_h}
    ny = {rh: len(axis_taps(rh, p.pH, p.sH, p.dH, p.Y)) for rh in ph_h}
    lps = loops(ins)
    inloop = set()
    row_loops, stage_loops, dy_loops = [], [], []
    for lo, hi in lps:
        body = [(a, op) for a, op, _ in ins if lo <= a <= hi]
        c = collections.Counter(klass(op) for _, op in body)
        if c["ffma"]:
            row_loops.append((lo, hi, c, body))
        elif spec.stage and any(op.startswith("STS.") for _, op in body):
            dy_loops.append((lo, hi, c, body))
        elif any(op.startswith("STS") for _, op in body):
            stage_loops.append((lo, hi, c, body))
    for lo, hi, *_ in row_loops + stage_loops + dy_loops:
        inloop.update(a for a, _, _ in ins if lo <= a <= hi)
    # drop loops nested in others (count the outer one) -- row loops are not nested
    tot = collections.Counter()
    # straight-line code: once per thread, shared among the compiled W phases
    nph_w_compiled = max(1, len(row_loops))
    first_bar = min((a for a, op, _ in ins if op.startswith("BAR")), default=0)
    for a, op, _ in ins:
        if a not in inloop:
            tot[klass(op)] += 1.0 if a <= first_bar else 1.0 / nph_w_compiled
    # filter staging: one body per staged unit
    taps = p.Y * p.X
    ngb = spec.tn // p.cpg if spec.tn >= p.cpg else 1
    cpb = p.cpg if spec.tn >= p.cpg else spec.tn
    units = ngb * p.kpg * taps * cpb / spec.block_threads
    st_best = None
    for lo, hi, c, body in stage_loops:
        n_sts = sum(1 for _, op in body if op.startswith("STS"))
        if st_best is None or n_sts > st_best[0]:
            st_best = (n_sts, c)
    if st_best:
        for k, v in st_best[1].items():
            tot[k] += v * units / st_best[0]
    # dY staging: the loop that stores the most elements per trip, per staged element
    if dy_loops:
        ebytes = 4 if getattr(spec, "stage32", False) else p.elem_bytes
        width = {"STS": 4, "STS.64": 8, "STS.128": 16, "STS.U16": 2, "STS.U8": 1}

        def per_trip(body):
            return sum(width.get(op, 4) for _, op in body if op.startswith("STS")) / ebytes
        best = max(dy_loops, key=lambda L: per_trip(L[3]))
        elems = sum((spec.tqh + axis_span(rh, p.pH, p.sH, p.dH, p.Y)[1])
                    * (spec.tqw + axis_span(rw, p.pW, p.sW, p.dW, p.X)[1])
                    for rh in ph_h for rw in ph_w) / (len(ph_h) * len(ph_w)) * spec.tny / spec.block_threads
        for k, v in best[2].items():
            tot[k] += v * elems / per_trip(best[3])
        if os.environ.get("SASS_DEBUG"):
            print("  dY staging per element", {k: round(v / per_trip(best[3]), 2) for k, v in best[2].items()},
                  "elements/thread", round(elems, 1))
    # row loops: match each to a W phase by its static FFMA count
    phases = sorted(ph_w)
    ffma_thread = 0.0
    loop_other = collections.Counter()
    matched = []
    for i, (lo, hi, c, body) in enumerate(row_loops):
        cands = [rw for rw in phases if c["ffma"] % (spec.tph * nx[rw] * macs // 1 // spec.tph) == 0] or phases
        rw = phases[i] if len(row_loops) == len(phases) else cands[0]
        one_row = spec.tph * nx[rw] * macs
        unroll = max(1, c["ffma"] // one_row)
        matched.append((rw, unroll))
        for rh in ph_h:
            w_ = 1.0 / len(ph_h)
            for k, v in c.items():
                if k != "ffma":
                    loop_other[k] += w_ * v * rows[rh] / unroll
            ffma_thread += w_ * ny[rh] * nx[rw] * macs
    nrl = max(1, len(row_loops))
    if os.environ.get("SASS_DEBUG"):
        print("  once", {k: round(v, 1) for k, v in tot.items()}, "stage/unit",
              st_best and {k: round(v / st_best[0], 1) for k, v in st_best[1].items()}, "units", units)
        for lo, hi, c, body in row_loops:
            print("  rowloop", hex(lo), hex(hi), dict(c))
    for k, v in loop_other.items():
        tot[k] += v / nrl
    tot["ffma"] += ffma_thread / nrl
    return tot, per_out, matched


def report(label, spec, work, tools):
    ins, regs, spill, stack = build(spec.emit().text, work, tools)
    tot, per_out, matched = analyse(spec, ins)
    n = sum(tot.values())
    row = {k: tot.get(k, 0.0) / per_out for k, _ in CLASSES}
    return dict(label=label, config=spec.config.serialize(), regs=regs, spill=spill, stack=stack,
                per_out=row, total=n / per_out, ffma_pct=100.0 * tot["ffma"] / n, loops=matched)


DTYPES = ("fp16", "bf16", "fp32")


def _checked(args) -> tuple:
    """``(layers, configs, tools)`` from the options, every one checked before any output.

    Raises:
        BadInput: a --dtype the direct kernel does not take, a --configs entry that is not a
            perf config, a --policies name that is not one of direct.POLICIES, an --only that selects no layer, or nvcc/cuobjdump missing.
    """
    if args.dtype not in DTYPES:
        raise BadInput(f"--dtype {shorten(args.dtype)!r}: allowed: {', '.join(DTYPES)}")
    configs = []
    for c in (c.strip() for c in args.configs.split(";")):
        if c:
            try:
                configs.append(PerfConfig.parse(c))
            except PerfConfigError as e:
                raise BadInput(f"--configs {shorten(c)!r}: {e}") from None
    unknown = [n for n in args.policies.split(",") if n and n not in POLICIES]
    if unknown:
        raise BadInput(f"--policies {shorten(unknown[0])!r}: unknown; allowed: a comma list of " + ", ".join(POLICIES))
    layers = [(label, p, cfg) for label, p, cfg in LAYERS
              if not args.only or any(o in label for o in args.only.split(",") if o)]
    if not layers:
        raise BadInput(f"--only {shorten(args.only)!r}: selects no layer; allowed: comma-separated substrings of "
                       + ", ".join(repr(label) for label, _, _ in LAYERS))
    tools = {name: find_tool(name) for name in ("nvcc", "cuobjdump")}
    return layers, configs, tools


def main(argv=None) -> int:
    ap = OneLineParser(prog="direct_sass.py", description=__doc__.splitlines()[0])
    ap.add_argument("--configs", default="", help="';'-separated configs to analyse on every layer "
                                                   "(default: the table's config of each layer)")
    ap.add_argument("--default", action="store_true", help="also the layer's default_direct_config")
    ap.add_argument("--policies", default="", help="comma-separated names of direct.POLICIES to analyse on "
                                                    "every layer (their configs for the layer)")
    ap.add_argument("--only", default="", help="comma-separated substrings of layer labels")
    ap.add_argument("--dtype", default="fp16", help=f"{', '.join(DTYPES)} (default fp16)")
    args = ap.parse_args(argv)
    try:
        layers, configs, tools = _checked(args)
    except BadInput as e:
        print(f"direct_sass.py: {e}", file=sys.stderr)
        return 2
    t = get_target("sm_90")
    cols = [k for k, _ in CLASSES]
    print(f"{'layer':26s} {'config':34s} {'regs':>4s} {'spill':>5s} " + " ".join(f"{c:>6s}" for c in cols)
          + f" {'total':>7s} {'ffma%':>6s}", flush=True)
    with tempfile.TemporaryDirectory(prefix="direct-sass-") as tmp:
        work = Path(tmp)
        for label, p, table_cfg in layers:
            p = p.replace(dtype=args.dtype)
            cfgs = list(configs) + [policy_config(p, t, POLICIES[n]) for n in args.policies.split(",") if n]
            cfgs = cfgs or [PerfConfig.parse(table_cfg)]
            if args.default:
                cfgs.append(default_direct_config(p, t))
            for c in cfgs:
                try:
                    s = make_direct_spec(p, t, c)
                except Exception as e:  # invalid for this layer
                    print(f"{label:26s} {c.serialize():34s} invalid: {e}")
                    continue
                try:
                    r = report(label, s, work, tools)
                except ToolFailed as e:
                    print(f"direct_sass.py: {label} {c.serialize()}: {e}", file=sys.stderr)
                    return 3
                print(f"{label:26s} {r['config']:34s} {r['regs']:4d} {r['spill']:5d} "
                      + " ".join(f"{r['per_out'][k]:6.2f}" for k in cols) + f" {r['total']:7.2f} {r['ffma_pct']:5.1f}%",
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
