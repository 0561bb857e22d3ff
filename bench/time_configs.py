"""Time several perf configs on chosen suite lines in one process (NVIDIA GPU with PyTorch):
the default, each ``--configs`` entry the solver takes for the line, and cuDNN once, all in
CUDA graphs as ``bench/compare.py`` times them -- to decide a default between candidates::

    python bench/time_configs.py --suite bench/zoo.txt --only "k32_,c32_k" \\
        --configs "128,128,32,2,1,64,128,0,0,0,1,-1,4,1;128,32,64,2,1,64,32,0,0,0,1,-1,4,1" \\
        --out configs.md --json configs.json

A config the solver refuses for a line is a row saying why (not an error); lines are the
suite's as written (``--dtypes line``). The entry ``default+stream`` is each line's default
tile with stream-K (the TMA schedule, ``split_k_reduce`` 3), to judge stream-K against the
default it would replace; ``default@N`` is each line's default tile on schedule ``N`` (e.g.
``default@8;default@18`` on a suite of 1x1 lines without layout flags, i.e. NCHW: the NCHW
pointwise tile on the plain and the persistent warpgroup main loops), refused with the
solver's reason where schedule ``N`` does not serve the line.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.compare import (AS_WRITTEN, BadInput, OneLineParser, check_outputs, count_arg, gpu,  # noqa: E402
                           ours_or_error, row_problem, select, shard_arg, stream_table, suite_plan, time_cudnn)
from miopen_solver.config import PerfConfig  # noqa: E402
from miopen_solver.errors import PerfConfigError  # noqa: E402
from miopen_solver.text import shorten  # noqa: E402

MAX_CONFIGS = 64
"""At most this many ``--configs`` entries (each is a build and a timing per line)."""


def parse_configs(text: str) -> list:
    """``--configs``: perf-config strings separated by ``;``. Raises BadInput naming the bad
    entry and what is allowed."""
    entries = [c.strip() for c in text.split(";") if c.strip()]
    if not entries or len(entries) > MAX_CONFIGS:
        raise BadInput(f"--configs {shorten(text)!r}: allowed: 1 to {MAX_CONFIGS} perf configs separated by ';'")
    from miopen_solver.config import KernelSchedule
    codes = sorted(int(s) for s in KernelSchedule)
    for c in entries:
        m = DEFAULT_ON.fullmatch(c)
        if c == DEFAULT_STREAM or (m and int(m.group(1)) in codes):
            continue
        if c.lower().startswith("default"):
            raise BadInput(f"--configs entry {shorten(c)!r}: allowed: {DEFAULT_STREAM}, default@N with N a kernel "
                           f"schedule code ({codes[0]}-{codes[-1]}), or a perf config")
        try:
            PerfConfig.parse(c)
        except PerfConfigError as e:
            raise BadInput(f"--configs entry {shorten(c)!r}: {e}") from None
    return entries


DEFAULT_STREAM = "default+stream"
"""The ``--configs`` entry for each line's default tile with stream-K."""
DEFAULT_ON = re.compile(r"default@([0-9]{1,2})")
"""A ``--configs`` entry ``default@N``: each line's default tile on schedule ``N``."""


def default_on_schedule(p, target, code: int) -> str:
    """The default config of ``p`` on ``target`` with its schedule field set to ``code``
    (the solver then runs it or refuses it with its reason)."""
    from miopen_solver.solver import DgradSolver
    cfg = DgradSolver().get_default_performance_config(p, target)
    fields = cfg.serialize().split(",") + ["0"] * 2
    fields[13] = str(code)
    return ",".join(fields[:15]).removesuffix(",0")


def default_with_stream_k(p, target) -> str:
    """The default config of ``p`` on ``target`` as stream-K (the TMA schedule, unsplit,
    ``split_k_reduce`` 3); the default's text when it is not a warpgroup GEMM config (the
    solver then refuses or runs it as asked)."""
    from miopen_solver.config import KernelSchedule
    from miopen_solver.solver import DgradSolver
    cfg = DgradSolver().get_default_performance_config(p, target)
    if cfg.schedule not in (KernelSchedule.WGMMA, KernelSchedule.WGMMA_PERSISTENT, KernelSchedule.WGMMA_TMA):
        return f"{cfg.serialize()} (default, not a warpgroup GEMM: no stream-K form)"
    return cfg.replace(schedule=KernelSchedule.WGMMA_TMA, split_k=1, split_k_reduce=3).serialize()


def _timed(torch, eng, chosen, configs, args):
    """``(row, [table line])`` per line and config: the default first, then ``configs``."""
    for item in chosen:
        p = row_problem(item["cmd"])
        cudnn = time_cudnn(torch, p, args.launches, args.replays)
        for cfg in [None] + configs:
            if cfg == DEFAULT_STREAM:
                cfg = default_with_stream_k(p, eng.target)
            elif cfg and DEFAULT_ON.fullmatch(cfg):
                cfg = default_on_schedule(p, eng.target, int(DEFAULT_ON.fullmatch(cfg).group(1)))
            r = {"label": item["label"], "dtype": item["dtype"], "line": item["cmd"], "asked": cfg or "default",
                 "cudnn_ms": cudnn, **ours_or_error(eng, p, args.launches, args.replays, cfg)}
            if r.get("ours_ms"):
                line = (f"| {r['label']} | {r['dtype']} | `{r['config']}`{'' if cfg else ' (default)'} | "
                        f"{r['ours_ms'] * 1e3:.1f} | {cudnn * 1e3:.1f} | {cudnn / r['ours_ms']:.2f} |")
            else:
                line = f"| {r['label']} | {r['dtype']} | `{r['asked']}` | {r['ours_error'][:120]} | {cudnn * 1e3:.1f} | |"
            yield r, [line]


def main(argv=None) -> int:
    ap = OneLineParser(prog="time_configs.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", default="bench/zoo.txt")
    ap.add_argument("--only", required=True, help="comma list of label substrings (a line matching any is timed)")
    ap.add_argument("--configs", required=True,
                    help="';'-separated entries: perf configs, default+stream (each line's default tile as "
                         "stream-K), default@N (each line's default tile on kernel schedule N)")
    ap.add_argument("--shard", type=shard_arg, default=None, help="K/N: every N-th selected line from the K-th")
    ap.add_argument("--launches", type=count_arg, default=20)
    ap.add_argument("--replays", type=count_arg, default=15)
    ap.add_argument("--out", default=None, help="markdown table here")
    ap.add_argument("--json", default=None, help="rows here")
    args = ap.parse_args(argv)
    try:
        configs = parse_configs(args.configs)
        check_outputs([("--suite", args.suite)], out=args.out, json=args.json)
        plan = suite_plan(args.suite, AS_WRITTEN)
        chosen, seen = [], set()
        for sub in (s for s in args.only.split(",") if s):
            for item in select(plan, sub):
                if item["label"] not in seen:
                    seen.add(item["label"])
                    chosen.append(item)
        if args.shard:
            chosen = select(chosen, shard=args.shard)
        if not chosen:
            raise BadInput(f"--only {shorten(args.only)!r}: selects no line of {args.suite}; allowed: a comma list "
                           f"of label substrings (e.g. {plan[0]['label']!r})")
        torch, eng = gpu()
    except BadInput as e:
        print(f"time_configs.py: {e}", file=sys.stderr)
        return 2
    stream_table(_timed(torch, eng, chosen, configs, args),
                 ["| layer | dtype | config | ours us | cuDNN us | cuDNN/ours |", "|---|---|---|---|---|---|"],
                 args.json, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
