"""Our dgrad kernels against cuDNN (and cuBLAS for pointwise lines) on one NVIDIA GPU.

For each line of ``--suite`` (default ``bench/suite.txt``; ``bench/zoo.txt`` is the zoo of
real layers) and each data type: our kernel (the library's default config, or the perf-db
winner with ``--perfdb``) and cuDNN through PyTorch (``aten.convolution_backward`` on
channels_last tensors, ``cudnn.benchmark=True``, TF32 off) are both captured into CUDA graphs
of ``--launches`` launches and replayed ``--replays`` times; the figure is the median
per-launch time, so launch gaps count for neither side. Pointwise lines also time cuBLAS on
the equivalent GEMM ``dX[N*H*W, C] = dY[N*H*W, K] x W[K, C]``.

Ceilings are measured in the same run: the dense matrix rate (8192^3 GEMM in the data type)
and the copy bandwidth (a 2 GiB device-to-device copy). ``floor = max(FLOPs / rate,
min_bytes / bandwidth)``; ``eff = floor / time``; ``ratio = cuDNN time / our time``.

``--dtypes fp16,bf16,fp32`` (default) re-bases every line to each type in turn;
``--dtypes line`` runs each line as written (its base ``convfp16``/``convbfp16``/``conv``
fixes its type), as the zoo wants. Labels may carry a ``class=<name>`` tag (the zoo's do): the
report then has a per-class summary (geometric mean of the ratio, lines at >= 1.0 and
< 0.5, lines with no ratio) and the plot groups the lines by class. A line our solver refuses,
a kernel that fails or a cuDNN failure is a row marked n/a with its reason, not a dead run;
after a failure that leaves the CUDA context unusable the remaining rows are n/a, naming
the row that broke it. ``--json`` keeps every row (rewritten after each one, so a run cut
short keeps what it timed); ``--report a.json[,b.json]`` renders the report from such files
without a GPU (e.g. to merge ``--shard 1/2`` and ``--shard 2/2`` runs; with ``--json`` it writes
the merged rows in the same format; the options of a timing run are refused with it).

Bad input (a flag, a suite or report file, an output that cannot be written, ``--plot``
without matplotlib, a timing run without PyTorch and a CUDA GPU) is one line on stderr and
exit 2; every check that needs no GPU comes before PyTorch is imported.

Usage (on the GPU machine, from the repo root)::

    python bench/compare.py --dtypes fp16,bf16,fp32 --out bench/last_compare.md [--plot bench/compare.png]
    python bench/compare.py --suite bench/zoo.txt --dtypes line --out zoo.md --plot zoo.png --json zoo.json
"""

from __future__ import annotations

import argparse
import datetime
import io
import json
import math
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from miopen_solver.command import parse  # noqa: E402
from miopen_solver.errors import FileError, PerfConfigError, RuntimeUnavailable, shown_path  # noqa: E402
from miopen_solver.fileio import (check_writable, read_text, run_guarding_stdout, stat_regular, write_bytes,  # noqa: E402
                                  write_text)
from miopen_solver.layouts import dy_shape, storage_dtype, w_shape  # noqa: E402
from miopen_solver.text import json_text, shorten  # noqa: E402

BASES = {"fp16": "convfp16", "bf16": "convbfp16", "fp32": "conv"}
DTYPE_OF_BASE = {base: dtype for dtype, base in BASES.items()}
AS_WRITTEN = "line"
"""``--dtypes`` value: run every line in the data type of its own base."""

CLASSES = ("dense_1x1", "dense_3x3", "strided", "asymmetric", "dilated", "grouped", "depthwise",
           "patch", "1d", "small_image_many_channels", "large_image_few_channels", "odd_channels")
"""The zoo's class tags, in report order."""
UNTAGGED = "-"
"""The class of a line whose label has no ``class=`` tag."""


class BadInput(ValueError):
    """A user mistake (a flag, a file): :func:`main` prints it as one line and exits 2."""


class OneLineParser(argparse.ArgumentParser):
    """argparse whose usage errors are one line (``<prog>: message (see --help)``), exit 2."""

    def error(self, message):
        print(f"{self.prog}: {message} (see --help)", file=sys.stderr)
        sys.exit(2)


def number_arg(low: float, high: float, allowed: str):
    """An argparse ``type``: a float with ``low <= value < high`` (so never nan, and never inf
    when ``high`` is inf), else the error ``<text>: allowed: <allowed>``."""
    def check(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not low <= value < high:
            raise argparse.ArgumentTypeError(f"{shorten(text)}: allowed: {allowed}")
        return value
    return check


def positive_number(value) -> bool:
    """Whether ``value`` (from JSON) is a finite number > 0 (a time, a rate; not a bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


# ----------------------------------------------------------------------------- suite files
MAX_SUITE_BYTES = 64 << 20


def read_suite(path):
    """``(label, command)`` per line of a suite file; ``#`` lines and blank lines skipped.

    Raises:
        FileError: the file cannot be read as a UTF-8 text file (no flag named).
    """
    rows = []
    for raw in read_text(path, MAX_SUITE_BYTES, "suite file").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        cmd, _, label = line.partition("#")
        rows.append((label.strip(), cmd.strip()))
    return rows


def split_label(label: str) -> tuple:
    """``(name, class)`` from a label such as ``mobilenet_v2/features.3.dw3x3_c144_56
    class=depthwise``; class is :data:`UNTAGGED` when there is no ``class=`` word."""
    words = label.split()
    tags = [w[len("class="):] for w in words if w.startswith("class=")]
    name = " ".join(w for w in words if not w.startswith("class="))
    return name, (tags[-1] if tags else UNTAGGED)


def network_of(name: str) -> str:
    """``resnet50`` for ``resnet50/layer3.0.conv2...``; ``""`` for a label without a network."""
    return name.split("/", 1)[0] if "/" in name else ""


def plan_rows(rows, dtypes: str) -> list:
    """The runs for ``rows`` (``(label, command)``) under ``--dtypes``: a list of dicts with
    ``label, cls, network, dtype, section, cmd``.

    ``dtypes`` is :data:`AS_WRITTEN` (each line's base fixes its type; one section ``line``)
    or a comma list of ``fp16,bf16,fp32`` (every line re-based to each type; one section per
    type, in the order given).

    Raises:
        ValueError: an unknown data type, or (as written) a line whose base is not one of
            ``convfp16``/``convbfp16``/``conv``.
    """
    try:
        dtypes_arg(dtypes)
    except argparse.ArgumentTypeError as e:
        raise ValueError(f"--dtypes {e}") from None
    plan = []
    passes = [(AS_WRITTEN, None)] if dtypes == AS_WRITTEN else [(d, d) for d in dtypes.split(",")]
    for section, rebase in passes:
        for label, cmd in rows:
            words = cmd.split()
            if rebase is None:
                if words[0] not in DTYPE_OF_BASE:
                    raise ValueError(f"{label}: base {words[0]!r} is not one of {', '.join(DTYPE_OF_BASE)}")
                dtype = DTYPE_OF_BASE[words[0]]
            else:
                dtype, words[0] = rebase, BASES[rebase]
            name, cls = split_label(label)
            plan.append({"label": name, "cls": cls, "network": network_of(name), "dtype": dtype,
                         "section": section, "cmd": " ".join(words)})
    return plan


def dtypes_arg(text: str) -> str:
    """``--dtypes`` checked (an argparse ``type``): :data:`AS_WRITTEN` or a comma list of
    :data:`BASES`' types.

    Raises:
        argparse.ArgumentTypeError: anything else, naming the unknown types.
    """
    bad = [d for d in text.split(",") if d not in BASES] if text != AS_WRITTEN else []
    if bad:
        raise argparse.ArgumentTypeError(f"{shorten(text)!r}: unknown type(s) {shorten(','.join(bad))}; allowed: "
                                         f"{AS_WRITTEN!r} or a comma list of {','.join(BASES)}")
    return text


SHARD_ALLOWED = "K/N with 1 <= K <= N"


def shard_arg(text: str) -> str:
    """``--shard`` checked (an argparse ``type``): ``K/N`` with ``1 <= K <= N``.

    Raises:
        argparse.ArgumentTypeError: anything else.
    """
    m = re.fullmatch(r"\s*(\d{1,9})\s*/\s*(\d{1,9})\s*", text)
    if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
        raise argparse.ArgumentTypeError(f"{shorten(text)!r}: allowed: {SHARD_ALLOWED}")
    return text


def count_arg(text: str) -> int:
    """``--launches``/``--replays`` checked (an argparse ``type``): an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{shorten(text)!r}: allowed: an integer >= 1")
    return value


def select(plan, only: str = "", classes: str = "", shard: str = "") -> list:
    """Rows of ``plan`` whose label contains ``only``, whose class is in the comma list
    ``classes`` (all when empty) and, with ``shard`` ``"i/n"``, every n-th row from the i-th
    (1-based) of those."""
    want = set(classes.split(",")) if classes else None
    out = [r for r in plan if only in r["label"] and (want is None or r["cls"] in want)]
    if shard:
        try:
            i, n = (int(x) for x in shard_arg(shard).split("/"))
        except argparse.ArgumentTypeError as e:
            raise ValueError(f"--shard {e}") from None
        out = out[i - 1::n]
    return out


# ----------------------------------------------------------------------------- summaries
def geomean(xs) -> float:
    xs = list(xs)
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def summarize(results, key: str = "cls") -> list:
    """One dict per group of ``results`` by ``key`` (known classes first, in
    :data:`CLASSES` order), then ``total``: ``group, lines, timed, na, geomean, ge1, lt05,
    min, max``. Only rows with a ``ratio`` count in the geomean and the counts; ``na`` is
    the rest."""
    groups = {}
    for r in results:
        groups.setdefault(r[key], []).append(r)
    order = [c for c in CLASSES if c in groups] + sorted(g for g in groups if g not in CLASSES)
    out = []
    for name, rows in [(g, groups[g]) for g in order] + [("total", list(results))]:
        ratios = [r["ratio"] for r in rows if r.get("ratio") is not None]
        out.append({"group": name, "lines": len(rows), "timed": len(ratios), "na": len(rows) - len(ratios),
                    "geomean": geomean(ratios), "ge1": sum(x >= 1.0 for x in ratios),
                    "lt05": sum(x < 0.5 for x in ratios),
                    "min": min(ratios) if ratios else float("nan"),
                    "max": max(ratios) if ratios else float("nan")})
    return out


def summary_markdown(results, key: str = "cls", title: str = "class") -> list:
    """The per-group table of :func:`summarize` as markdown lines."""
    lines = [f"| {title} | lines | timed | n/a | geomean cuDNN/ours | >= 1.0 | < 0.5 | min | max |",
             "|---|---|---|---|---|---|---|---|---|"]
    for s in summarize(results, key):
        g = f"**{s['group']}**" if s["group"] == "total" else s["group"]
        num = (f"{s['geomean']:.2f} | {s['ge1']} | {s['lt05']} | {s['min']:.2f} | {s['max']:.2f}"
               if s["timed"] else "n/a | 0 | 0 | | ")
        lines.append(f"| {g} | {s['lines']} | {s['timed']} | {s['na']} | {num} |")
    return lines


def dtype_geomean_lines(results) -> list:
    """``<dtype>: geometric-mean ratio cuDNN/ours = **x** over n rows; min y`` per data type
    (the line bench/h200_check.sh greps)."""
    out = []
    for dtype in dict.fromkeys(r["dtype"] for r in results):
        ok = [r["ratio"] for r in results if r["dtype"] == dtype and r.get("ratio") is not None]
        if ok:
            out.append(f"{dtype}: geometric-mean ratio cuDNN/ours = **{geomean(ok):.2f}** over "
                       f"{len(ok)} rows; min {min(ok):.2f}")
    return out


def na_reason(row) -> str:
    """Why a row has no ratio (``""`` when it has one)."""
    return "; ".join(f"{side}: {row[k]}" for side, k in (("ours", "ours_error"), ("cuDNN", "cudnn_error"),
                                                           ("not run", "skipped")) if row.get(k))


def row_markdown(r, tagged: bool, with_dtype: bool) -> str:
    """One results-table row; a side that failed reads ``n/a`` and the reason replaces the
    config column."""
    def us(v):
        return "n/a" if v is None else f"{v * 1e3:.1f}"
    lead = [r["label"]] + ([r["cls"]] if tagged else []) + ([r["dtype"]] if with_dtype else [])
    ours, cudnn, blas, ratio = r.get("ours_ms"), r.get("cudnn_ms"), r.get("cublas_ms"), r.get("ratio")
    cells = [us(ours), us(cudnn), "n/a" if ratio is None else f"{ratio:.2f}",
             "" if ours is None else f"{r['tflops']:.0f}",
             "" if ours is None else f"{r['eff']:.2f}",
             "" if r.get("floor_ms") is None else f"{r['floor_ms'] * 1e3:.1f}",
             "" if blas is None else f"{blas * 1e3:.1f}",
             "" if blas is None or ours is None else f"{blas / ours:.2f}",
             "" if r.get("regs") is None else str(r["regs"]),
             f"`{r['config']}`" if r.get("config") else ""]
    if ratio is None:
        cells[-1] = (cells[-1] + " " if cells[-1] else "") + "n/a: " + na_reason(r).replace("|", "/")
    return "| " + " | ".join(lead + cells) + " |"


def table_head(tagged: bool, with_dtype: bool) -> list:
    cols = (["shape"] + (["class"] if tagged else []) + (["dtype"] if with_dtype else [])
            + ["ours us", "cuDNN us", "ratio", "ours TF/s", "eff", "floor us", "cuBLAS us",
               "ours/cuBLAS", "regs", "config"])
    return ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]


def render_summary(results) -> list:
    """The per-dtype geomean lines and, when the labels carry classes, the per-class and
    per-network tables (markdown lines)."""
    md = dtype_geomean_lines(results)
    if any(r["cls"] != UNTAGGED for r in results):
        md += ["", "### Per class (ratio = cuDNN time / our time; geometric mean over timed lines)", ""]
        md += summary_markdown(results)
        md += ["", "### Per network", ""]
        md += summary_markdown(results, key="network", title="network")
    return md


def render_report(results, header: str, ceilings: dict) -> str:
    """The markdown report: per section (a data type, or ``line`` for as-written runs) its
    measured ceilings and results table, then :func:`render_summary`."""
    tagged = any(r["cls"] != UNTAGGED for r in results)
    md = [header]
    for section in dict.fromkeys(r["section"] for r in results):
        rows = [r for r in results if r["section"] == section]
        with_dtype = section == AS_WRITTEN
        dts = [d for d in dict.fromkeys(r["dtype"] for r in rows) if d in ceilings]
        ceil = (", ".join(f"{d} {ceilings[d][0] / 1e12:.0f}" for d in dts) + " TFLOP/s matrix, "
                f"{ceilings[dts[0]][1] / 1e12:.2f} TB/s copy") if dts else "n/a"
        md.append(f"\n### {'as written' if with_dtype else section}  (measured ceilings: {ceil})\n")
        md += table_head(tagged, with_dtype)
        md += [row_markdown(r, tagged, with_dtype) for r in rows]
    return "\n".join(md + [""] + render_summary(results)) + "\n"


# ----------------------------------------------------------------------------- timing
def rt_graph_time_ms(rt, body, replays: int) -> float:
    """Median ms of one replay of a graph captured from ``body()`` on our runtime ``rt``
    (``body`` launches what it times, e.g. ``launches`` runs: divide by that count)."""
    body()
    graph = rt.capture(body)
    rt.replay(graph)
    rt.synchronize()
    times = []
    for _ in range(replays):
        a, b = rt.event(), rt.event()
        rt.record(a)
        rt.replay(graph)
        rt.record(b)
        times.append(rt.elapsed_ms(a, b))
    return statistics.median(times)


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
    a = b = None
    src = torch.ones(2 ** 29, dtype=torch.float32, device="cuda")  # 2 GiB, vectorised copy
    dst = torch.empty_like(src)
    ms = graph_time_ms(torch, lambda: dst.copy_(src), 5, 5)
    bw = 2 * src.numel() * src.element_size() / (ms * 1e-3)
    src = dst = None
    torch.cuda.empty_cache()
    return rate, bw


class OursRefused(Exception):
    """Our solver does not take the problem (not applicable, or no config validates)."""


def time_ours(eng, p, launches: int, replays: int, config: str | None = None, perfdb=None) -> dict:
    """Our side of one row: the ONLY place compare.py asks the solver library what to run and
    times it, so a library API change (e.g. ``DgradSolver().find_solution(problem, target) ->
    Solution``) is adapted here and nowhere else.

    The library decides (``DgradSolver().find_solution``): ``config`` (``--config``), else the
    perf-db record (``--perfdb``), else the default.

    Returns:
        ``{ours_ms, regs, config, config_source}``.

    Raises:
        OursRefused: the solver refuses the problem (the reason is the message).
        Exception: anything else is a kernel (build, launch or timing) failure.
    """
    from miopen_solver.errors import PerfConfigError
    from miopen_solver.solver import DgradSolver
    solver, target = DgradSolver(), eng.target
    verdict = solver.is_applicable(p, target)
    if not verdict.ok:
        raise OursRefused("not applicable: " + "; ".join(str(r) for r in verdict.reasons))
    try:
        sol = solver.find_solution(p, target, perf_config=config, perfdb=perfdb)
    except PerfConfigError as e:
        raise OursRefused(f"PerfConfigError: {e}") from e
    return {**time_solution(eng, sol, launches, replays),
            "config_source": "--config" if sol.source == "perf-config" else sol.source}


def model_default(p, target) -> str | None:
    """The cost model's config for ``p`` (:func:`miopen_solver.cost_model.model_config` on the
    problem the kernel computes) where the library's default runs a schedule the model
    times; None elsewhere (the default stays: direct, patch, NCHW pointwise, warp-MMA, fp32)."""
    from miopen_solver import cost_model
    from miopen_solver.solver import DgradSolver
    try:
        sol = DgradSolver().find_solution(p, target)
    except ValueError:          # not applicable, no valid default: the row says so itself
        return None
    q = getattr(sol.spec, "problem", None)
    if sol.schedule not in cost_model.MODELLED or q is None or not cost_model.modelled(q, target):
        return None
    cfg = cost_model.model_config(q, target)
    return cfg.serialize() if cfg is not None else None


def ours_or_error(eng, p, launches: int, replays: int, config: str | None = None, perfdb=None) -> dict:
    """:func:`time_ours`'s dict, or ``{"ours_error": "refused: ..."}`` / ``"failed: ..."``:
    one row's failure is recorded in it, never raised (a sweep goes on)."""
    try:
        return time_ours(eng, p, launches, replays, config, perfdb)
    except OursRefused as e:
        return {"ours_error": f"refused: {e}"}
    except Exception as e:  # noqa: BLE001 - a failing kernel, not a dead sweep
        return {"ours_error": f"failed: {_reason(e)}"}


def timing_inputs(p) -> tuple:
    """``(dY, W)``: small random storage arrays of ``p`` in its line's layouts (what a timed
    run reads; the values do not matter to the time)."""
    rng = np.random.default_rng(0)
    dt = storage_dtype(p.dtype)
    dy = (rng.random(dy_shape(p), dtype=np.float32) * 0.01).astype(dt)
    w = ((rng.random(w_shape(p), dtype=np.float32) - 0.5) * 0.01).astype(dt)
    return dy, w


def time_solution(eng, sol, launches: int, replays: int) -> dict:
    """A decided Solution timed from a CUDA graph (every launch of a run: transforms, chunks,
    split-K reductions) on small random inputs in the problem's layouts.

    Returns:
        ``{ours_ms, regs, config}`` (median per-run ms, the dgrad kernel's registers).
    """
    dy, w = timing_inputs(sol.problem)
    ms = eng.time_graph(sol, dy, w, launches, replays).median_ms
    res = eng.build(sol).resources or {}
    return {"ours_ms": ms, "regs": res.get("registers"), "config": sol.perf_config.serialize()}


def _torch_dtype(torch, dtype):
    return {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[dtype]


def cudnn_dgrad(torch, p):
    """A callable running cuDNN's dgrad of ``p`` (``aten.convolution_backward``, dX only) on
    random operands with each tensor in the line's layout (NHWC: channels_last, NCHW:
    contiguous)."""
    tdt = _torch_dtype(torch, p.dtype)

    def fmt(layout):
        return torch.channels_last if layout == "NHWC" else torch.contiguous_format
    dy = torch.randn(p.N, p.K, p.Ho, p.Wo, device="cuda", dtype=tdt).to(memory_format=fmt(p.out_layout))
    x = torch.empty(p.N, p.C, p.Hi, p.Wi, device="cuda", dtype=tdt).to(memory_format=fmt(p.in_layout))
    w = torch.randn(p.K, p.cpg, p.Y, p.X, device="cuda", dtype=tdt).to(memory_format=fmt(p.fil_layout))

    def fn():
        return torch.ops.aten.convolution_backward(
            dy, x, w, None, [p.sH, p.sW], [p.pH, p.pW], [p.dH, p.dW], False, [0, 0], p.G,
            [True, False, False])
    return fn


def time_cudnn(torch, p, launches, replays):
    """cuDNN's dgrad of ``p`` (:func:`cudnn_dgrad`) timed from a CUDA graph, ms per call."""
    return graph_time_ms(torch, cudnn_dgrad(torch, p), launches, replays)


def stream_table(results, header: list, json_path=None, out_path=None) -> None:
    """Print a markdown table as its rows are done: ``results`` yields ``(row dict, table
    lines)``; each line is printed at once, ``json_path`` is rewritten with every row so far
    after each one, ``out_path`` gets the header and all lines at the end."""
    rows, lines = [], list(header)
    for row, new in results:
        rows.append(row)
        lines += new
        for line in new:
            print(line, flush=True)
        if json_path:
            write_text(json_path, json_text(rows, indent=1) + "\n")
    if out_path:
        write_text(out_path, "\n".join(lines) + "\n")


def same_file(a, b) -> bool:
    """Whether the paths ``a`` and ``b`` name one file: ``os.path.samefile`` where both exist
    (another spelling, a symlink, a hard link), else the same real path."""
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return os.path.realpath(a) == os.path.realpath(b)


def check_outputs(inputs=(), **paths) -> None:
    """Each output ``--flag`` (keyword ``flag`` with ``-`` as ``_``) whose path is not None
    is writable, is not the file of one of ``inputs`` (``(flag, path)`` pairs of the files
    the script reads: it would be replaced) and not the file of an earlier output (one
    would be lost); and no file is among ``inputs`` twice (read twice, it would count
    twice). Files are compared whatever the spelling (:func:`same_file`); a missing input
    is left to its reader; stdout and devices are not files.

    Raises:
        BadInput: the first refusal, naming the flag and the path.
    """
    given = [(flag, path) for flag, path in inputs if path is not None and os.path.exists(path)]
    for i, (flag, path) in enumerate(given):
        twice = next(((f, p) for f, p in given[:i] if same_file(p, path)), None)
        if twice:
            raise BadInput(f"{flag} {shown_path(path)}: the same file as {twice[0]} {shown_path(twice[1])} (read twice "
                           f"it would count twice); allowed: each input once")
    files = []
    for name, path in paths.items():
        if path is None:
            continue
        flag = f"--{name.replace('_', '-')}"
        try:
            if check_writable(path) != "file":
                continue
        except FileError as e:
            raise BadInput(f"{flag} {e}") from None
        read = next(((f, p) for f, p in given if same_file(p, path)), None)
        if read:
            raise BadInput(f"{flag} {shown_path(path)}: is the input {read[0]} {shown_path(read[1])} (it would be "
                           "replaced); allowed: a file that is none of the inputs")
        other = next(((f, p) for f, p in files if same_file(p, path)), None)
        if other:
            raise BadInput(f"{flag} {shown_path(path)}: the same file as {other[0]} {shown_path(other[1])} (one would "
                           "replace the other); allowed: a different file for each output")
        files.append((flag, path))


def guarded_main(prog: str, main, argv=None) -> int:
    """``main(argv)`` with stdout guarded as dgrad-driver's is
    (:func:`~miopen_solver.fileio.run_guarding_stdout`): a closed pipe (``| head``) ends
    quietly with exit 141, another failed write (``> /dev/full``) is one line
    ``<prog>: stdout: cannot write (<why>)``, exit 2."""
    return run_guarding_stdout(lambda: main(argv),
                               lambda why: print(f"{prog}: stdout: cannot write ({why}); allowed: a writable stdout "
                                                 "(a file with room, a pipe, a terminal)", file=sys.stderr))


def time_cublas(torch, p, launches, replays):
    tdt = _torch_dtype(torch, p.dtype)
    m = p.N * p.Ho * p.Wo
    a = torch.randn(m, p.K, device="cuda", dtype=tdt)
    b = torch.randn(p.K, p.C, device="cuda", dtype=tdt)
    return graph_time_ms(torch, lambda: torch.matmul(a, b), launches, replays)


def _reason(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:160] if text else ''}"


def context_error(torch) -> str:
    """``""`` when the CUDA context still runs work, else why not (a sticky fault)."""
    try:
        torch.cuda.synchronize()
        torch.ones(1, device="cuda").add_(1).item()
        return ""
    except Exception as e:  # noqa: BLE001 - any failure means the context is gone
        return _reason(e)


def run_row(torch, eng, item, args, db, ceilings) -> dict:
    """Time one planned row on both sides; failures are recorded in the row, never raised."""
    row = {k: item[k] for k in ("label", "cls", "network", "dtype", "section")}
    row["line"] = item["cmd"]
    try:
        p = parse(item["cmd"]).problem
    except Exception as e:  # noqa: BLE001 - a bad line is an n/a row
        row["ours_error"] = f"line does not parse: {_reason(e)}"
        return row
    if getattr(args, "layout", "line") != "line":      # --layout: all three tensors in one layout
        p = p.replace(in_layout=args.layout, out_layout=args.layout, fil_layout=args.layout)
        row["line"] += f" [{args.layout}]"      # read back by row_problem (LAYOUT_TAG)
    config = args.config
    if config is None and getattr(args, "model_defaults", False):
        config = model_default(p, eng.target)
    row.update(ours_or_error(eng, p, args.launches, args.replays, config, db))
    if config is not None and args.config is None and row.get("config_source") == "--config":
        row["config_source"] = "model"
    try:
        row["cudnn_ms"] = time_cudnn(torch, p, args.launches, args.replays)
    except Exception as e:  # noqa: BLE001 - cuDNN has no algorithm, runs out of memory, ...
        row["cudnn_error"] = _reason(e)
        try:
            torch.cuda.empty_cache()  # after an out-of-memory; raises too when the context is gone
        except Exception:  # noqa: BLE001 - main() checks the context after a failed row
            pass
    if p.is_pointwise and "cudnn_error" not in row:
        try:
            row["cublas_ms"] = time_cublas(torch, p, args.launches, args.replays)
        except Exception:  # noqa: BLE001 - cuBLAS is an extra column only
            pass
    rate, bw = ceilings[p.dtype]
    row["floor_ms"] = max(p.flops / rate, p.min_bytes / bw) * 1e3
    if row.get("ours_ms") is not None:
        ours = row["ours_ms"]
        row.update(eff=row["floor_ms"] / ours, tflops=p.flops / ours / 1e9)
        if row.get("cudnn_ms") is not None:
            row["ratio"] = row["cudnn_ms"] / ours
    return row


def git_commit() -> str:
    if os.environ.get("DGRAD_COMMIT"):
        return os.environ["DGRAD_COMMIT"]
    try:
        return subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                                       stderr=subprocess.DEVNULL).strip()
    except Exception:
        return "unknown (pass DGRAD_COMMIT)"


REPORT_ALLOWED = "a compare.py --json file (a JSON object: a meta object and a rows list of row objects)"
MAX_REPORT_BYTES = 256 << 20
ROW_TEXT = ("label", "cls", "network", "dtype", "section", "line")
"""Fields every saved row has, as strings."""
ROW_NUMBERS = ("ours_ms", "cudnn_ms", "cublas_ms", "floor_ms", "eff", "tflops", "ratio")
"""Fields a saved row may have, each a positive finite number or null."""
ROW_OPTIONAL_TEXT = ("config", "config_source", "ours_error", "cudnn_error", "skipped")
LAYOUT_TAG = re.compile(r"\s*\[(NHWC|NCHW)\]$")
"""What ``--layout`` appends to a row's ``line`` (the layout all three tensors ran in)."""


def row_problem(line: str):
    """The problem a saved row timed: its ``line`` parsed, with the layouts of a
    ``--layout`` tag (``... [NCHW]``) applied.

    Raises:
        ValueError: the line is not one dgrad-driver takes.
    """
    m = LAYOUT_TAG.search(line)
    p = parse((line[:m.start()] if m else line).split()).problem
    return p.replace(in_layout=m.group(1), out_layout=m.group(1), fil_layout=m.group(1)) if m else p


def _shown(obj: dict, key: str) -> str:
    return "missing" if key not in obj else shorten(json.dumps(obj[key]))


def read_report(path) -> tuple:
    """``(meta, rows)`` of a ``--json`` file, checked as far as the report needs: rows of
    string ``label, cls, network, dtype, section, line``, times and ratios that are
    positive finite numbers or null (``eff``/``tflops`` with every ``ours_ms``), ``regs`` an
    integer >= 0 or null; ``meta.ceilings`` type -> ``[rate, bandwidth]``.

    Raises:
        FileError: the file cannot be read, is not JSON or is not such a file, naming the
            row at fault (no flag named; :data:`REPORT_ALLOWED` is what is allowed).
    """
    def bad(why):
        return FileError(path, why, REPORT_ALLOWED)
    text = read_text(path, MAX_REPORT_BYTES, "compare.py --json file")
    try:
        data = json.loads(text)
    except ValueError as e:
        raise bad(f"not JSON ({shorten(e)})") from None
    if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
        raise bad("not a JSON object with a rows list" if isinstance(data, dict) else
                  f"a JSON {type(data).__name__}, not an object with a rows list")
    meta = data.get("meta", {})
    if not isinstance(meta, dict) or not isinstance(meta.get("header", ""), str) \
            or not isinstance(meta.get("ceilings", {}), dict):
        raise bad("meta is not an object with a header string and a ceilings object")
    for dtype, v in meta.get("ceilings", {}).items():
        if not (isinstance(v, list) and len(v) == 2 and all(map(positive_number, v))):
            raise bad(f"meta.ceilings.{shorten(dtype)} {_shown(meta['ceilings'], dtype)} is not "
                      "[matrix rate, copy bandwidth] (two positive numbers)")
    for n, r in enumerate(data["rows"], 1):
        if not isinstance(r, dict):
            raise bad(f"row {n} is a JSON {type(r).__name__}, not an object")
        for k in ROW_TEXT:
            if not isinstance(r.get(k), str):
                raise bad(f"row {n}: {k} {_shown(r, k)} is not a string")
        for k in ROW_OPTIONAL_TEXT:
            if r.get(k) is not None and not isinstance(r[k], str):
                raise bad(f"row {n}: {k} {_shown(r, k)} is not a string (or null)")
        for k in ROW_NUMBERS:
            if r.get(k) is not None and not positive_number(r[k]):
                raise bad(f"row {n}: {k} {_shown(r, k)} is not a positive finite number (or null)")
        if r.get("ours_ms") is not None and (r.get("eff") is None or r.get("tflops") is None):
            raise bad(f"row {n}: ours_ms without eff and tflops")
        regs = r.get("regs")
        if regs is not None and (isinstance(regs, bool) or not isinstance(regs, int) or regs < 0):
            raise bad(f"row {n}: regs {_shown(r, 'regs')} is not an integer >= 0 (or null)")
    return meta, data["rows"]


def report_json(meta: dict, results) -> str:
    """What ``--json`` writes: the meta and every row (:func:`read_report` reads it back)."""
    return json_text({"meta": meta, "rows": results}, indent=1) + "\n"


def load_reports(paths) -> tuple:
    """``(header, results, ceilings)`` merged from ``--json`` files (rows in file order).

    Raises:
        FileError: a file :func:`read_report` refuses.
    """
    results, ceilings, heads = [], {}, []
    for path in paths:
        meta, rows = read_report(path)
        results += rows
        for d, v in meta.get("ceilings", {}).items():
            ceilings.setdefault(d, tuple(v))
        first = (meta.get("header") or "").strip().splitlines()
        heads.append(f"- {path}: {first[0].lstrip('# ') if first else ''} ({len(rows)} rows)")
    header = "## compare.py report from saved rows\n\n" + "\n".join(heads) + "\n"
    return header, results, ceilings


def _write(flag: str, path, data) -> None:
    """``data`` (text or bytes) written to ``path`` atomically; a refusal names ``flag``."""
    try:
        write_bytes(path, data) if isinstance(data, bytes) else write_text(path, data)
    except FileError as e:
        raise BadInput(f"{flag} {e}") from None


def finish(text: str, results, args, meta: dict | None = None) -> int:
    """Write ``--out``, ``--json`` (with ``meta``: the merged rows of ``--report``) and ``--plot``."""
    if args.out is not None:
        _write("--out", args.out, text)
    if meta is not None and args.json is not None:
        _write("--json", args.json, report_json(meta, results))
    if args.plot is not None:
        if any(r["cls"] != UNTAGGED for r in results):
            plot_by_class(results, args.plot)
        else:
            plot(results, args.plot)
    return 0


TIMING_ONLY = {"model_defaults": ("--model-defaults", "times on a GPU"),
               "config": ("--config", "times one config on a GPU"),
               "layout": ("--layout", "times in another layout on a GPU"),
               "perfdb": ("--perfdb", "times perf-db winners on a GPU"),
               "launches": ("--launches", "sets the timing on a GPU"),
               "replays": ("--replays", "sets the timing on a GPU"),
               "suite": ("--suite", "picks the lines to time on a GPU"),
               "dtypes": ("--dtypes", "picks the data types to time on a GPU"),
               "only": ("--only", "picks the lines to time on a GPU"),
               "classes": ("--classes", "picks the lines to time on a GPU"),
               "shard": ("--shard", "picks the lines to time on a GPU")}
"""Options of a timing run, refused with ``--report`` (which only renders saved rows)."""
DEFAULTS = {"suite": str(ROOT / "bench" / "suite.txt"), "dtypes": "fp16,bf16,fp32", "only": "", "classes": "",
            "shard": "", "launches": 20, "replays": 15, "layout": "line"}
"""The timing options' values when not given (their argparse default is None: given or not)."""


def parser() -> argparse.ArgumentParser:
    ap = OneLineParser(prog="compare.py", description=__doc__.splitlines()[0])
    ap.add_argument("--suite", help="suite file (default bench/suite.txt; bench/zoo.txt is the zoo)")
    ap.add_argument("--dtypes", type=dtypes_arg,
                    help=f"comma list of {','.join(BASES)} (every line re-based to each; the default), "
                         f"or '{AS_WRITTEN}' (each line in the type of its own base)")
    ap.add_argument("--only", help="substring filter on row labels")
    ap.add_argument("--classes", help="comma list of class tags to run (default all)")
    ap.add_argument("--shard", type=shard_arg, help="K/N: run every N-th selected row from the K-th")
    ap.add_argument("--launches", type=count_arg, help="launches per CUDA graph (default 20)")
    ap.add_argument("--replays", type=count_arg, help="graph replays, the median is taken (default 15)")
    ap.add_argument("--perfdb", default=None, help="use perf-db winners where present")
    ap.add_argument("--config", default=None, help="one perf config for every row (overrides the default)")
    ap.add_argument("--model-defaults", action="store_true",
                    help="where the default runs a warpgroup schedule, run the cost model's pick "
                         "instead (miopen_solver.cost_model; to judge it against the rules)")
    ap.add_argument("--layout", choices=("line", "NHWC", "NCHW"),
                    help="run every line with all three tensors in this layout, both sides "
                         "(default: the line's own flags)")
    ap.add_argument("--out", default=None, help="write the markdown report here")
    ap.add_argument("--plot", default=None, help="write a PNG chart here (needs matplotlib)")
    ap.add_argument("--json", default=None,
                    help="write every row here (rewritten after each row; with --report, the merged rows)")
    ap.add_argument("--report", default=None,
                    help="comma list of --json files: render the report from them (no GPU) and exit")
    return ap


def check_args(args) -> None:
    """The checks that need no file read: ``--report`` without timing options, matplotlib
    for ``--plot``, the outputs writable, ``--config`` a perf config, ``--perfdb`` a file.

    Raises:
        BadInput: the first refusal.
    """
    if args.report is not None:
        for key, (flag, what) in TIMING_ONLY.items():
            if getattr(args, key) not in (None, False):
                raise BadInput(f"--report renders saved rows; {flag} {what} "
                               "(allowed with --report: --out, --json, --plot)")
    for key, value in DEFAULTS.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.plot is not None:
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot  # noqa: F401
        except ImportError:
            raise BadInput("--plot needs matplotlib (pip install matplotlib)") from None
    reads = [("--report", p) for p in args.report.split(",")] if args.report is not None else \
        [("--suite", args.suite), ("--perfdb", args.perfdb)]
    check_outputs(reads, out=args.out, json=args.json, plot=args.plot)
    if args.config is not None:
        from miopen_solver.config import PerfConfig
        try:
            PerfConfig.parse(args.config)
        except PerfConfigError as e:
            raise BadInput(f"--config {shorten(args.config)!r}: {e}") from None
    if args.perfdb is not None:
        try:
            stat_regular(args.perfdb, "perf-db file")
        except FileError as e:
            raise BadInput(f"--perfdb {e}") from None


def suite_plan(suite, dtypes: str) -> list:
    """:func:`plan_rows` of the suite file ``suite`` (``--suite``) under ``dtypes``.

    Raises:
        BadInput: the file cannot be read, has a line that does not plan (another base with
            ``--dtypes line``), or has no lines.
    """
    try:
        plan = plan_rows(read_suite(suite), dtypes)
    except FileError as e:
        raise BadInput(f"--suite {e}") from None
    except ValueError as e:
        raise BadInput(f"--suite {shown_path(suite)}: {e}") from None
    if not plan:
        raise BadInput(f"--suite {shown_path(suite)}: no lines; allowed: a suite file (one MIOpenDriver line a row, "
                       "'# label class=...' after it)")
    return plan


def plan_of(args) -> list:
    """The rows to time: ``--suite`` planned under ``--dtypes`` and selected by ``--only``,
    ``--classes`` and ``--shard``.

    Raises:
        BadInput: the suite cannot be read, has no lines or a line with another base
            (``--dtypes line``), a class no line has, or a selection of no line.
    """
    plan = suite_plan(args.suite, args.dtypes)
    present = [c for c in dict.fromkeys(r["cls"] for r in plan) if c != UNTAGGED]
    unknown = [c for c in args.classes.split(",") if c not in present] if args.classes else []
    if unknown:
        raise BadInput(f"--classes {shorten(args.classes)!r}: no line of {shown_path(args.suite)} has class "
                       f"{shorten(unknown[0])!r}; allowed: " + (f"a comma list of {','.join(present)}" if present
                                                                else "no --classes (its lines have no class= tag)"))
    chosen = select(plan, args.only, args.classes, args.shard)
    if not chosen:
        given = " ".join(f"{flag} {shorten(v)!r}" for flag, v in (("--only", args.only), ("--classes", args.classes),
                                                                  ("--shard", args.shard)) if v)
        raise BadInput(f"{given}: selects no line of {shown_path(args.suite)} ({len(plan)} rows); allowed: a label "
                       f"substring, class list and shard that leave a row (e.g. --only {plan[0]['label']!r})")
    return chosen


def gpu():
    """``(torch, engine)`` for a timing run, with cuDNN set up as every comparison here runs
    it: ``cudnn.benchmark`` on (cuDNN times its algorithms and keeps the fastest, as a
    framework user's training runs it; without it a heuristic pick ran ViT's 3-channel patch
    embedding 7x slower) and TF32 off.

    Raises:
        BadInput: ``needs PyTorch with a CUDA GPU (<why>)``: no torch, no CUDA device, or
            no CUDA runtime for our kernels; or a bad ``MIOPEN_DGRAD_PDL``.
    """
    def need(why):
        return BadInput(f"needs PyTorch with a CUDA GPU ({shorten(why, 200)})")
    try:
        import torch
    except (ImportError, OSError) as e:
        raise need(e) from None
    if not torch.cuda.is_available():
        raise need(f"torch {torch.__version__} sees no CUDA device")
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    from miopen_solver.runtime import get_engine
    try:
        return torch, get_engine("cuda")
    except RuntimeUnavailable as e:
        raise need(e) from None
    except ValueError as e:             # a bad MIOPEN_DGRAD_PDL
        raise BadInput(str(e)) from None


def cuda_engine():
    """Our CUDA engine (no PyTorch) for a script that times only our kernels.

    Raises:
        BadInput: ``needs a CUDA GPU (<why>)``: no CUDA runtime or no device.
    """
    from miopen_solver.runtime import get_engine
    try:
        return get_engine("cuda")
    except RuntimeUnavailable as e:
        raise BadInput(f"needs a CUDA GPU ({shorten(str(e), 200)})") from None
    except ValueError as e:             # a bad MIOPEN_DGRAD_PDL
        raise BadInput(str(e)) from None


def label_filter(flag: str, text: str, labels, where: str, drop_empty: bool = True) -> list:
    """The comma list ``text`` of label substrings of ``flag`` (empty parts dropped unless
    ``drop_empty`` is false, when an empty part matches every label); a label is kept when
    it contains any of them.

    Raises:
        BadInput: ``text`` selects none of ``labels`` (or ``labels`` is empty).
    """
    labels = list(labels)
    wanted = [w for w in text.split(",") if w or not drop_empty]
    if not labels:
        raise BadInput(f"{where}: no lines")
    if not any(any(w in lab for w in wanted) for lab in labels):
        raise BadInput(f"{flag} {shorten(text)!r}: selects no line of {where}; allowed: a comma list of label "
                       f"substrings (e.g. {labels[0]!r})")
    return wanted


def main(argv=None) -> int:
    return guarded_main("compare.py", _main, argv)


def _main(argv=None) -> int:
    args = parser().parse_args(argv)
    command = f"python bench/compare.py {' '.join(argv if argv is not None else sys.argv[1:])}"
    try:
        check_args(args)
        if args.report is not None:
            return report(args)
        return run(args, plan_of(args), command)
    except BadInput as e:
        print(f"compare.py: {e}", file=sys.stderr)
        return 2


def report(args) -> int:
    """``--report``: the report of saved rows, printed and written."""
    try:
        header, results, ceilings = load_reports(args.report.split(","))
    except FileError as e:
        raise BadInput(f"--report {e}") from None
    text = render_report(results, header, ceilings)
    print(text)
    return finish(text, results, args, {"header": header, "ceilings": ceilings})


def run(args, plan, command: str) -> int:
    """Time ``plan`` on the GPU, printing each row; write the outputs."""
    torch, eng = gpu()
    target = eng.target
    db = args.perfdb        # a path: find_solution opens it per lookup

    header = (f"## compare.py run {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC\n\n"
              f"- device: {eng.rt.device_name()} ({target.arch}, {target.num_cus} SMs); torch {torch.__version__}, "
              f"cuDNN {torch.backends.cudnn.version()}\n- commit: {git_commit()}\n"
              f"- command: `{command}`\n"
              f"- timing: CUDA graph of {args.launches} launches, median of {args.replays} replays, per launch\n")
    ceilings = {d: measure_ceilings(torch, d) for d in dict.fromkeys(r["dtype"] for r in plan)}
    meta = {"header": header, "ceilings": ceilings}
    tagged = any(r["cls"] != UNTAGGED for r in plan)
    results, broken = [], ""
    for item in plan:
        if broken:
            row = {k: item[k] for k in ("label", "cls", "network", "dtype", "section")}
            row.update(line=item["cmd"], skipped=broken)
        else:
            row = run_row(torch, eng, item, args, db, ceilings)
            if row.get("ours_error") or row.get("cudnn_error"):
                why = context_error(torch)
                if why:
                    broken = f"CUDA context unusable after {row['label']} ({row['dtype']}): {why}"
        results.append(row)
        print(row_markdown(row, tagged, item["section"] == AS_WRITTEN), flush=True)
        if args.json is not None:
            _write("--json", args.json, report_json(meta, results))

    print("\n".join(render_summary(results)), flush=True)
    return finish(render_report(results, header, ceilings), results, args)


def save_png(fig, path) -> None:
    """``fig`` as PNG bytes written atomically to ``--plot``'s ``path``."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    _write("--plot", path, buf.getvalue())


def plot(results, path):
    """Untagged suites: ours and cuDNN time over the roofline floor, one panel per type."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    dtypes = sorted({r["dtype"] for r in results})
    fig, axes = plt.subplots(len(dtypes), 1, figsize=(14, 4 * len(dtypes)), squeeze=False)
    for ax, dt in zip(axes[:, 0], dtypes):
        rows = [r for r in results if r["dtype"] == dt and r.get("ratio") is not None]
        x = np.arange(len(rows))
        ax.bar(x - 0.2, [r["ours_ms"] / r["floor_ms"] for r in rows], 0.4, label="ours")
        ax.bar(x + 0.2, [r["cudnn_ms"] / r["floor_ms"] for r in rows], 0.4, label="cuDNN")
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_xticks(x, [r["label"] for r in rows], rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("time / roofline floor")
        ax.set_title(f"backward data, {dt}, NHWC (lower is better)")
        ax.legend()
    fig.tight_layout()
    save_png(fig, path)


def plot_by_class(results, path):
    """Tagged suites (the zoo): top, the ratio cuDNN/ours of every line (log scale), grouped
    by class and sorted within it, with the class geomean as a line over its group and n/a
    lines as red crosses at the bottom; bottom, the per-class geomeans."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    summary = [s for s in summarize(results) if s["group"] != "total"]
    groups = [s["group"] for s in summary]
    ordered = []
    for g in groups:
        rows = [r for r in results if r["cls"] == g]
        ordered += sorted(rows, key=lambda r: (r.get("ratio") is None, r.get("ratio") or 0.0))
    n = len(ordered)
    cmap = plt.get_cmap("tab20")
    colour = {g: cmap(i % 20) for i, g in enumerate(groups)}
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(max(14, 0.13 * n), 11),
                                  gridspec_kw={"height_ratios": [3, 1.2]})
    ratios = [r.get("ratio") for r in ordered]
    timed = [x for x in ratios if x is not None]
    low = min(timed + [0.5]) / 1.5
    for i, (r, x) in enumerate(zip(ordered, ratios)):
        if x is None:
            ax.plot(i, low * 1.1, "x", color="red", ms=6)
        else:
            ax.bar(i, x, 0.8, color=colour[r["cls"]], bottom=0)
    start, centres = 0, []
    for s in summary:
        end = start + s["lines"]
        if s["timed"]:
            ax.hlines(s["geomean"], start - 0.4, end - 0.6, color="k", lw=1.5)
        centres.append((start + end - 1) / 2)
        ax.axvline(end - 0.5, color="0.7", lw=0.5)
        start = end
    top = ax.secondary_xaxis("top")
    top.set_xticks(centres, groups, rotation=25, ha="left", fontsize=8)
    ax.axhline(1.0, color="green", lw=0.8, ls="--")
    ax.axhline(0.5, color="red", lw=0.8, ls=":")
    ax.set_yscale("log")
    ax.set_ylim(low, max(timed + [2.0]) * 1.3)
    ax.set_xlim(-0.8, n - 0.2)
    ax.set_xticks(range(n), [f"{r['label']} {r['dtype']}" for r in ordered], rotation=90, fontsize=5)
    ax.set_ylabel("cuDNN time / our time (higher is better)")
    ax.set_title("backward data, NHWC, by class: bars = lines, black = class geomean, "
                 "red x = n/a (green: parity, red dotted: 0.5)")
    x = np.arange(len(summary))
    gms = [s["geomean"] if s["timed"] else 0.0 for s in summary]
    ax2.bar(x, gms, 0.7, color=[colour[g] for g in groups])
    for i, s in enumerate(summary):
        ax2.text(i, gms[i], f"{gms[i]:.2f}\n{s['ge1']}>=1 {s['lt05']}<.5 {s['na']}na",
                 ha="center", va="bottom", fontsize=6)
    ax2.axhline(1.0, color="green", lw=0.8, ls="--")
    total = summarize(results)[-1]
    ax2.set_title(f"per-class geomean (total {total['geomean']:.2f} over {total['timed']} timed lines, "
                  f"{total['na']} n/a)", fontsize=9)
    ax2.set_xticks(x, groups, rotation=20, ha="right", fontsize=8)
    ax2.set_ylabel("geomean ratio")
    ax2.set_ylim(0, max(gms + [1.0]) * 1.35)
    fig.tight_layout()
    save_png(fig, path)


if __name__ == "__main__":
    sys.exit(main())
