"""Where an NCHW run's time goes (NVIDIA GPU with PyTorch): each launch of our solution
timed alone and the whole run, in CUDA graphs, beside the same problem all-NHWC and two
bandwidth yardsticks on dY's bytes (PyTorch's NCHW -> NHWC ``permute().contiguous()`` and a
plain device copy); each transform alone in both forms, dY's and W's as one pair launch
whether or not the solution pairs them, and where the kernel stores dX NCHW the dX transform
an NHWC-dX kernel would need instead (beside the NHWC column's kernel: the other design)::

    python bench/nchw_breakdown.py --suite bench/suite.txt --only r50_3x3 --out nchw_breakdown.md

Lines are taken with their layout flags removed (MIOpen's default, all NCHW). Times are
microseconds per run (median of the graph replays).
"""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.compare import (BadInput, OneLineParser, _torch_dtype, check_outputs, count_arg, gpu,  # noqa: E402
                           graph_time_ms, read_suite, rt_graph_time_ms, timing_inputs)
from miopen_solver.errors import FileError  # noqa: E402
from miopen_solver.fileio import write_text  # noqa: E402
from miopen_solver.text import shorten  # noqa: E402
from miopen_solver.command import parse  # noqa: E402
from miopen_solver.solver import DgradSolver  # noqa: E402
from miopen_solver.transpose import LayoutTransform, TransposeLaunch, writes_nchw_dx  # noqa: E402

LAYOUT_FLAGS = re.compile(r"\s--(in|out|fil)_layout\s+\S+")


def graph_us(eng, body, launches: int, replays: int) -> float:
    """Median microseconds of one ``body()`` from replays of a graph of ``launches`` bodies."""
    return rt_graph_time_ms(eng.rt, lambda: [body() for _ in range(launches)], replays) / launches * 1e3


def transform_us(eng, t, form: str, launches: int, replays: int) -> float | None:
    """Microseconds of the transform ``t`` (a LayoutTransform) alone in ``form`` (``tile`` or
    ``band``), None where that form does not take its shape."""
    try:
        t = dataclasses.replace(t, form=form)
    except ValueError:
        return None
    k = eng.load(t.emit(eng.rt.vendor, eng.target.arch))
    src, dst = eng.rt.alloc(t.nbytes), eng.rt.alloc(t.nbytes)
    try:
        eng.rt.memset(src, 0, t.nbytes)
        return graph_us(eng, lambda: eng.rt.launch(k.func, t.grid, t.block, 0, (src, dst, t.batch, t.rows, t.cols)),
                        launches, replays)
    finally:
        eng.rt.free(src)
        eng.rt.free(dst)


def pair_us(eng, before, launches: int, replays: int) -> float | None:
    """Microseconds of dY's and W's transforms (``before``) in one pair launch, whether or not
    the solution's rule pairs them; None without two."""
    if len(before) != 2:
        return None
    launch = TransposeLaunch(tuple(before))
    k = eng.load(launch.emit(eng.rt.vendor, eng.target.arch))
    bufs = [eng.rt.alloc(t.nbytes) for t in before for _ in (0, 1)]
    try:
        for b, t in zip(bufs[::2], before):
            eng.rt.memset(b, 0, t.nbytes)
        args = launch.args([(bufs[0], bufs[1]), (bufs[2], bufs[3])])
        return graph_us(eng, lambda: eng.rt.launch(k.func, launch.grid, launch.block, 0, args), launches, replays)
    finally:
        for b in bufs:
            eng.rt.free(b)


def layout_transforms(sol) -> list:
    """The solution's layout transforms (:class:`LayoutTransform`), without the other launches
    among its transforms (a sub-pixel solution's W' pack), which have no tile or band form."""
    return [t for t in sol.transforms if isinstance(t, LayoutTransform)]


def breakdown(eng, p, launches: int, replays: int) -> dict:
    """``{config, total_us, steps: [(name, us, grid)]}`` for the default solution of ``p``."""
    sol = DgradSolver().find_solution(p, eng.target)
    dy, w = timing_inputs(p)
    k = eng._kernel(sol)
    with eng._device_tensors(dy, w, p.dx_elems * p.elem_bytes, workspace=sol.workspace_bytes) as (pdy, pw, pdx, pws):
        steps = eng.launches(sol, k, pdy, pw, pdx, pws)
        total = graph_us(eng, lambda: eng._run_once(steps), launches, replays)
        parts = [(st.kernel.source.name, graph_us(eng, lambda s=st: eng._run_once([s]), launches, replays),
                  tuple(st.grid)) for st in steps]
    forms = [(t.label, t.rows, t.cols, transform_us(eng, t, "tile", launches, replays),
              transform_us(eng, t, "band", launches, replays)) for t in layout_transforms(sol)]
    dx_alt = None
    if writes_nchw_dx(sol.spec):        # the transform an NHWC-dX kernel would need instead of its NCHW stores
        t = LayoutTransform("dX", "NHWC", "NCHW", p.N, p.Hi * p.Wi, p.C, p.elem_bytes, 0)
        dx_alt = transform_us(eng, t, t.kernel_form, launches, replays)
    return {"config": sol.perf_config.serialize(), "total_us": total, "steps": parts, "kernel": k.source.name,
            "forms": forms, "pair_us": pair_us(eng, [t for t in layout_transforms(sol) if t.before], launches, replays),
            "dx_transform_us": dx_alt}


def yardsticks(torch, p, launches: int, replays: int) -> tuple:
    """``(permute_us, copy_us)`` of dY's bytes: NCHW -> NHWC by PyTorch, and a plain copy."""
    tdt = _torch_dtype(torch, p.dtype)
    x = torch.rand((p.N, p.K, p.Ho, p.Wo), device="cuda").to(tdt)
    y = torch.empty((p.N, p.Ho, p.Wo, p.K), device="cuda", dtype=tdt)
    c = torch.empty_like(x)

    def timed(fn):
        return graph_time_ms(torch, fn, launches, replays) * 1e3
    return timed(lambda: y.copy_(x.permute(0, 2, 3, 1))), timed(lambda: c.copy_(x))


def main(argv=None) -> int:
    ap = OneLineParser(prog="nchw_breakdown.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", default="bench/suite.txt")
    ap.add_argument("--only", default="", help="comma list: lines whose label contains one of these")
    ap.add_argument("--launches", type=count_arg, default=20)
    ap.add_argument("--replays", type=count_arg, default=15)
    ap.add_argument("--out", default=None, help="markdown table here")
    a = ap.parse_args(argv)
    wanted = [s for s in a.only.split(",") if s]
    try:
        try:
            suite = read_suite(a.suite)
        except FileError as e:
            raise BadInput(f"--suite {e}") from None
        suite = [(label, cmd) for label, cmd in suite if not wanted or any(w in label for w in wanted)]
        if not suite:
            raise BadInput(f"--only {shorten(a.only)!r}: selects no line of {a.suite}; allowed: comma-separated "
                           "substrings of its labels")
        problems = {}
        for label, cmd in suite:
            try:
                problems[label] = parse(LAYOUT_FLAGS.sub("", cmd).split()).problem
            except ValueError as e:
                raise BadInput(f"--suite {a.suite}: line {shorten(label)!r}: {e}") from None
        check_outputs(out=a.out)
        torch, eng = gpu()
    except BadInput as e:
        print(f"nchw_breakdown.py: {e}", file=sys.stderr)
        return 2
    out = ["| layer | NHWC us | NCHW us | NHWC/NCHW | NCHW steps (us each, alone) "
           "| transforms: tile / band us (dY+W: one pair launch) "
           "| dY permute (torch) us | dY copy us |", "|---|---|---|---|---|---|---|---|"]
    for label, _ in suite:
        p_nchw = problems[label]
        p_nhwc = p_nchw.replace(in_layout="NHWC", out_layout="NHWC", fil_layout="NHWC")
        try:
            b_nchw = breakdown(eng, p_nchw, a.launches, a.replays)
            b_nhwc = breakdown(eng, p_nhwc, a.launches, a.replays)
            perm, copy = yardsticks(torch, p_nchw, a.launches, a.replays)
        except Exception as e:  # noqa: BLE001 - one failing row, not a dead run
            out.append(f"| {label} | failed: {str(e)[:300]} |||||||")
            print(out[-1], flush=True)
            continue
        steps = "; ".join(f"{'kernel' if n == b_nchw['kernel'] else n[:28]} {us:.1f} {g}" for n, us, g in b_nchw["steps"])
        forms = "; ".join(f"{lab} {r}x{c}: {'-' if tile is None else f'{tile:.1f}'} / "
                          f"{'-' if band is None else f'{band:.1f}'}" for lab, r, c, tile, band in b_nchw["forms"])
        if b_nchw["pair_us"] is not None:
            forms += f"; dY+W pair: {b_nchw['pair_us']:.1f}"
        if b_nchw["dx_transform_us"] is not None:
            forms += f"; dX transform if the kernel stored NHWC: {b_nchw['dx_transform_us']:.1f}"
        out.append(f"| {label} | {b_nhwc['total_us']:.1f} | {b_nchw['total_us']:.1f} | "
                   f"{b_nhwc['total_us'] / b_nchw['total_us']:.2f} | {steps} (`{b_nchw['config']}`) | {forms} | "
                   f"{perm:.1f} | {copy:.1f} |")
        print(out[-1], flush=True)
    if a.out:
        write_text(a.out, "\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
