"""The ``direct`` schedule against cuDNN on real depthwise / small-cpg grouped layers (H200).

For every layer and data type: each named policy of :data:`miopen_solver.direct.POLICIES`
(the default among them) is built through ``CudaRuntime`` + ``GpuEngine.load``, run once
into a NaN-poisoned dX with fresh random inputs (every dX element must be finite = written;
images 0 and N-1 are compared with the float64 numpy reference
``miopen_solver.reference.dgrad_reference``, MIOpen's rms metric and tolerance), then timed:
a CUDA graph of ``--launches`` launches, median of ``--replays`` replays, per launch. cuDNN
is PyTorch's ``aten.convolution_backward`` (channels_last, ``cudnn.benchmark=True``,
output_mask (True, False, False)) timed the same way with ``bench/compare.py``'s
``graph_time_ms``. Both sides rotate over enough dY/dX buffer sets that one graph replay
touches at least ``--rotate-mb`` MB, so layers smaller than the 50 MB L2 are timed from DRAM,
as the floor assumes. The copy bandwidth is ``compare.measure_ceilings``'s 2 GiB
device-to-device copy; ``floor = (bytes of dY + W + dX) / bandwidth``.

``--random N`` first checks N random small problems (strides 1-4, dilations 1-3, odd
channel counts, cpg 1-8, kpg 1-3) with random configs from ``direct_search_space`` on the
GPU against the float64 reference.

Kernels are compiled up front in a process pool (NVRTC, the runtime's own compile and
options, results put in the engine's binary cache), so the timed part only loads cubins.

Usage (GPU machine, repo root): ``PYTHONPATH=. python bench/direct_h200.py --out $OUT``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import multiprocessing as mp
import os
import random
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from compare import BadInput, OneLineParser, count_arg, number_arg, rt_graph_time_ms  # noqa: E402
from miopen_solver import layouts  # noqa: E402
from miopen_solver.errors import FileError, PerfConfigError, RuntimeUnavailable, shown_path  # noqa: E402
from miopen_solver.fileio import check_writable  # noqa: E402
from miopen_solver.spec import PerfConfig  # noqa: E402
from miopen_solver.text import shorten  # noqa: E402
from miopen_solver.direct import (POLICIES, default_direct_config, direct_reason,  # noqa: E402
                                  direct_search_space, is_valid_direct_config, make_direct_spec,
                                  policy_config)
from miopen_solver.problem import ConvProblem  # noqa: E402
from miopen_solver.reference import default_tolerance, dgrad_reference, rms_range  # noqa: E402
from miopen_solver.target import get_target  # noqa: E402

NHWC = dict(in_layout="NHWC", out_layout="NHWC", fil_layout="NHWC")


def dw(N, C, H, W, k, s=1, d=1, p=None, mult=1):
    """Depthwise layer (K = mult*C)."""
    p = (d * (k - 1)) // 2 if p is None else p
    return dict(N=N, C=C, Hi=H, Wi=W, K=C * mult, Y=k, X=k, pH=p, pW=p, sH=s, sW=s, dH=d, dW=d, G=C)


LAYERS = [
    ("mbv2 dw3x3 s1 112 c32 n64", dw(64, 32, 112, 112, 3)),
    ("mbv2 dw3x3 s1 56 c144 n64", dw(64, 144, 56, 56, 3)),
    ("mbv2 dw3x3 s2 112 c96 n64", dw(64, 96, 112, 112, 3, s=2)),
    ("mbv2 dw3x3 s2 56 c144 n64", dw(64, 144, 56, 56, 3, s=2)),
    ("effb0 dw5x5 s1 28 c240 n64", dw(64, 240, 28, 28, 5)),
    ("effb0 dw5x5 s2 28 c240 n64", dw(64, 240, 28, 28, 5, s=2)),
    ("effb0 dw5x5 s1 14 c672 n128", dw(128, 672, 14, 14, 5)),
    ("effb0 dw5x5 s2 14 c672 n128", dw(128, 672, 14, 14, 5, s=2)),
    ("convnext dw7x7 56 c96 n64", dw(64, 96, 56, 56, 7)),
    ("convnext dw7x7 28 c192 n64", dw(64, 192, 28, 28, 7)),
    ("convnext dw7x7 14 c384 n64", dw(64, 384, 14, 14, 7)),
    ("resnext g32 cpg4 3x3 56 c128 n32",
     dict(N=32, C=128, Hi=56, Wi=56, K=128, Y=3, X=3, pH=1, pW=1, G=32)),
    ("odd C3 dw3x3 224 n32", dw(32, 3, 224, 224, 3)),
    ("odd dw4x4 s3 56 c64 n64", dw(64, 64, 56, 56, 4, s=3, p=1)),
    ("odd dw3x3 d2 56 c128 n64", dw(64, 128, 56, 56, 3, d=2)),
]


# ----------------------------------------------------------------------------- pool jobs
def _compile_job(args):
    """NVRTC-compile one KernelSource text with the runtime's own compile method/options and
    store the cubin in the binary cache under the engine's key (no CUDA context needed)."""
    text, name, arch, cache_dir = args
    from miopen_solver.runtime import cuda as cu
    from miopen_solver.runtime.cache import BinaryCache, cache_key
    rt = object.__new__(cu.CudaRuntime)
    rt._drv, rt._nvrtc = cu._import()
    key = cache_key(text, arch, rt.compiler_id(), rt.compile_options(arch))
    cache = BinaryCache(cache_dir)
    if cache.get(key) is not None:
        return name, 0.0, None
    t0 = time.perf_counter()
    try:
        cache.put(key, rt.compile(text, name, arch))
    except Exception as e:  # reported, not fatal
        return name, 0.0, f"{type(e).__name__}: {str(e)[:400]}"
    return name, time.perf_counter() - t0, None


def _ref_job(args):
    key, pdict, dy, w = args
    p = ConvProblem.from_dict(pdict)
    return key, dgrad_reference(p, dy, w)


def _fresh(p: ConvProblem, rng, n_images=None):
    st = layouts.storage_dtype(p.dtype)
    n = p.N if n_images is None else n_images
    dy = rng.uniform(-1, 1, (n, p.Ho, p.Wo, p.K)).astype(np.float32).astype(st)
    w = rng.uniform(-1, 1, (p.K, p.Y, p.X, p.cpg)).astype(np.float32).astype(st)
    return dy, w


def random_problems(count: int, seed: int, target):
    R = random.Random(seed)
    out = []
    while len(out) < count:
        cpg = R.choice([1, 1, 1, 2, 3, 4, 5, 8])
        kpg = R.choice([1, 1, 2, 3])
        G = R.randint(1, 40)
        Y, X = R.randint(1, 7), R.randint(1, 7)
        try:
            p = ConvProblem(N=R.randint(1, 3), C=cpg * G, Hi=R.randint(1, 40), Wi=R.randint(1, 40), K=kpg * G,
                            Y=Y, X=X, pH=R.randint(0, Y), pW=R.randint(0, X), sH=R.randint(1, 4),
                            sW=R.randint(1, 4), dH=R.randint(1, 3), dW=R.randint(1, 3), G=G,
                            dtype=R.choice(["fp16", "bf16", "fp32"]), **NHWC)
        except ValueError:
            continue
        if direct_reason(p, target):
            continue
        cands = list(direct_search_space(p, target))
        cfg = R.choice(cands)
        if not is_valid_direct_config(p, target, cfg)[0]:
            cfg = default_direct_config(p, target)
        out.append((p, cfg))
    return out


# ----------------------------------------------------------------------------- GPU helpers
class Bufs:
    """Device buffers of one problem: W once, ``sets`` dY/dX pairs (set 0 holds the
    verification inputs; the others are copies, for rotation)."""

    def __init__(self, rt, p, dy, w, sets):
        self.rt, self.p = rt, p
        self.dx_bytes = p.dx_elems * p.elem_bytes
        self.w = rt.alloc(w.nbytes)
        rt.copy_to_device(self.w, w)
        self.dy, self.dx = [], []
        for _ in range(sets):
            self.dy.append(rt.alloc(dy.nbytes))
            rt.copy_to_device(self.dy[-1], dy)
            self.dx.append(rt.alloc(self.dx_bytes))

    def free(self):
        for ptr in [self.w] + self.dy + self.dx:
            self.rt.free(ptr)


def run_once(eng, k, bufs):
    rt, p = eng.rt, bufs.p
    rt.memset(bufs.dx[0], 0xFF, bufs.dx_bytes)
    rt.launch(k.func, k.source.grid, k.source.block, k.source.shared_bytes, (bufs.dy[0], bufs.w, bufs.dx[0]))
    rt.synchronize()
    out = np.empty((p.N, p.Hi, p.Wi, p.C), dtype=layouts.storage_dtype(p.dtype))
    rt.copy_to_host(out, bufs.dx[0])
    return out


def time_ours(eng, k, bufs, launches, replays):
    """Median per-launch ms over replays of a captured graph of ``launches`` launches that
    cycle over the buffer sets (as GpuEngine.time_graph, with rotation)."""
    rt = eng.rt
    sets = len(bufs.dy)

    def body():
        for i in range(launches):
            j = i % sets
            rt.launch(k.func, k.source.grid, k.source.block, k.source.shared_bytes, (bufs.dy[j], bufs.w, bufs.dx[j]))

    return rt_graph_time_ms(rt, body, replays) / launches


def time_cudnn(torch, graph_time_ms, p, sets, launches, replays):
    tdt = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[p.dtype]
    cl = torch.channels_last
    dys = [torch.randn(p.N, p.K, p.Ho, p.Wo, device="cuda", dtype=tdt).to(memory_format=cl) for _ in range(sets)]
    x = torch.empty(p.N, p.C, p.Hi, p.Wi, device="cuda", dtype=tdt).to(memory_format=cl)
    w = torch.randn(p.K, p.cpg, p.Y, p.X, device="cuda", dtype=tdt).to(memory_format=cl)

    def fn():
        for dy in dys:
            torch.ops.aten.convolution_backward(dy, x, w, None, [p.sH, p.sW], [p.pH, p.pW], [p.dH, p.dW], False,
                                                [0, 0], p.G, [True, False, False])

    ms = graph_time_ms(torch, fn, launches, replays) / sets
    dys = x = w = None
    return ms


def check(ref_pair, out, p):
    """(ok, err, nonfinite): all of dX finite and images 0 and N-1 within MIOpen's tolerance."""
    o32 = out.astype(np.float32)
    nonfinite = int(out.size - np.count_nonzero(np.isfinite(o32)))
    imgs = [0, p.N - 1] if p.N > 1 else [0]
    err = max(rms_range(ref_pair[i], o32[n:n + 1]) for i, n in enumerate(imgs))
    tol = default_tolerance(p.dtype, implicit_gemm=False) if p.dtype != "fp32" else 1e-5
    return (nonfinite == 0 and err < tol), err, nonfinite


def copy_bw(torch, graph_time_ms) -> float:
    """Bytes read + written per second by a 2 GiB device-to-device copy (as
    compare.measure_ceilings), graph-timed."""
    src = torch.ones(2 ** 29, dtype=torch.float32, device="cuda")
    dst = torch.empty_like(src)
    ms = graph_time_ms(torch, lambda: dst.copy_(src), 5, 5)
    src = dst = None
    torch.cuda.empty_cache()
    return 2 * 2 ** 29 * 4 / (ms * 1e-3)


def driver_copy_bw(rt) -> float:
    """Bytes read + written per second by one 2 GiB cuMemcpyDtoDAsync (best of 5)."""
    n = 2 ** 31
    a, b = rt.alloc(n), rt.alloc(n)
    rt.memset(a, 1, n)
    best = float("inf")
    for _ in range(6):
        e0, e1 = rt.event(), rt.event()
        rt.record(e0)
        rt._ok(rt._drv.cuMemcpyDtoDAsync(b, a, n, rt.stream), "cuMemcpyDtoDAsync")
        rt.record(e1)
        best = min(best, rt.elapsed_ms(e0, e1))
    rt.free(a)
    rt.free(b)
    return 2 * n / (best * 1e-3)


def smi() -> str:
    import subprocess
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=pstate,clocks.sm,clocks.mem,power.draw,temperature.gpu",
                               "--format=csv,noheader"], capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception as e:
        return f"nvidia-smi failed: {e}"


# ----------------------------------------------------------------------------- main
DTYPES = ("fp16", "bf16", "fp32")
MAX_RANDOM = 100_000
MAX_JOBS = 1024


def _int_in(low: int, high: int):
    """An argparse ``type``: an integer with ``low <= value <= high``."""
    def check(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{shorten(text)!r}: allowed: an integer from {low} to {high}")
        return value
    return check


def _megabytes(text: str) -> float:
    """``--rotate-mb``: a finite number > 0."""
    value = number_arg(0, math.inf, "a finite number of MB > 0")(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{shorten(text)}: allowed: a finite number of MB > 0")
    return value


def check_args(args) -> tuple:
    """``(policy names, extra configs, out folder or None)`` from ``args``, every value checked.
    Creates ``--out`` (as the run always did). Raises BadInput naming the flag."""
    dtypes = args.dtypes.split(",")
    if not all(d in DTYPES for d in dtypes):
        raise BadInput(f"--dtypes {shorten(args.dtypes)!r}: allowed: a comma list of {', '.join(DTYPES)}")
    only = args.only.split(",")
    if not any(o in label for label, _ in LAYERS for o in only):
        raise BadInput(f"--only {shorten(args.only)!r}: selects no layer; allowed: comma-separated substrings "
                       f"of layer labels (e.g. {LAYERS[0][0]!r})")
    pols = [x for x in args.policies.split(",") if x]
    unknown = [x for x in pols if x not in POLICIES]
    if unknown:
        raise BadInput(f"--policies {shorten(unknown[0])!r}: unknown; allowed: a comma list of "
                       f"{', '.join(POLICIES)}")
    extra = []
    for c in (c.strip() for c in args.configs.split(";")):
        if c:
            try:
                extra.append(PerfConfig.parse(c))
            except PerfConfigError as e:
                raise BadInput(f"--configs entry {shorten(c)!r}: {e}") from None
    out_dir = Path(args.out) if args.out else None
    if out_dir:
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise BadInput(f"--out {shown_path(args.out)}: cannot make the folder ({e.strerror}); allowed: a "
                           "writable folder") from None
        for name in ("results.json", "table.md"):
            try:
                check_writable(out_dir / name)
            except FileError as e:
                raise BadInput(f"--out {e}") from None
    if not args.dry and importlib.util.find_spec("torch") is None:
        raise BadInput("needs PyTorch with a CUDA GPU (no module named 'torch'); allowed without it: --dry")
    return pols, extra, out_dir


def main(argv=None):
    ap = OneLineParser(prog="direct_h200.py", description=__doc__.splitlines()[0])
    ap.add_argument("--dtypes", default="fp16,bf16")
    ap.add_argument("--only", default="", help="comma-separated substrings of layer labels to keep")
    ap.add_argument("--policies", default=",".join(POLICIES), help="named policies to time")
    ap.add_argument("--configs", default="", help="extra explicit configs 'a,b,...;a,b,...' timed on every layer")
    ap.add_argument("--launches", type=count_arg, default=10)
    ap.add_argument("--replays", type=count_arg, default=10)
    ap.add_argument("--rotate-mb", type=_megabytes, default=200.0)
    ap.add_argument("--random", type=_int_in(0, MAX_RANDOM), default=0,
                    help="random small GPU correctness checks first")
    ap.add_argument("--seed", type=_int_in(0, 2**64 - 1), default=None, help="input seed (default: fresh)")
    ap.add_argument("--jobs", type=_int_in(1, MAX_JOBS), default=max(1, (os.cpu_count() or 2) - 1))
    ap.add_argument("--out", default=None, help="folder for results.json / table.md")
    ap.add_argument("--dry", action="store_true", help="no GPU: emit sources and references only")
    ap.add_argument("--profile", action="store_true",
                    help="only one verified launch per config (for ncu): no ceilings, timing or cuDNN")
    args = ap.parse_args(argv)
    try:
        pols, extra, out_dir = check_args(args)
    except BadInput as e:
        print(f"direct_h200.py: {e}", file=sys.stderr)
        return 2

    t_start = time.time()
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
    rng = np.random.default_rng(seed)
    arch = "sm_90"
    target = get_target(arch)
    cache_dir = os.environ.get("DIRECT_CACHE", "/tmp/direct-kcache")

    # ---- plan: problems, configs, inputs, reference jobs, compile jobs (all before CUDA)
    plan = []
    for dtype in args.dtypes.split(","):
        for label, kw in LAYERS:
            if not any(o in label for o in args.only.split(",")):
                continue
            p = ConvProblem(dtype=dtype, **kw, **NHWC)
            why = direct_reason(p, target)
            cfgs = {}
            if why is None:
                for name in pols:
                    cfgs[name] = policy_config(p, target, POLICIES[name])
                for i, c in enumerate(extra):
                    cfgs[f"cfg{i}"] = c
                cfgs["default"] = default_direct_config(p, target)
            plan.append(dict(label=label, p=p, why=why, cfgs=cfgs))
    rand = random_problems(args.random, seed, target) if args.random else []

    specs = {}
    ref_jobs, inputs = [], {}
    for e in plan:
        p = e["p"]
        for name, cfg in e["cfgs"].items():
            ok, why = is_valid_direct_config(p, target, cfg)
            specs[(e["label"], p.dtype, name)] = make_direct_spec(p, target, cfg) if ok else why
        if e["why"] is None:
            dy, w = _fresh(p, rng)
            inputs[(e["label"], p.dtype)] = (dy, w)
            p1 = p.replace(N=1)
            for i, n in enumerate([0, p.N - 1] if p.N > 1 else [0]):
                ref_jobs.append(((e["label"], p.dtype, i), p1.as_dict(), dy[n:n + 1], w))
    for i, (p, cfg) in enumerate(rand):
        specs[("random", i, "cfg")] = make_direct_spec(p, target, cfg)
        dy, w = _fresh(p, rng)
        inputs[("random", i)] = (dy, w)
        ref_jobs.append((("random", i, 0), p.as_dict(), dy, w))
    sources = {}
    for key, s in specs.items():
        if not isinstance(s, str):
            src = s.emit()
            sources[src.sha256] = src
    print(f"# plan: {len(plan)} layer rows, {len(specs)} specs, {len(sources)} kernels, {len(ref_jobs)} "
          f"reference images, seed {seed}", flush=True)

    refs = {}
    ctx = mp.get_context("fork")
    with ctx.Pool(args.jobs) as pool:
        cjobs = [] if args.dry else [(s.text, s.name, arch, cache_dir) for s in sources.values()]
        comp = pool.map_async(_compile_job, cjobs, chunksize=1)
        for key, ref in pool.imap_unordered(_ref_job, ref_jobs, chunksize=1):
            refs[key] = ref
        comp_res = comp.get()
    fails = [(n, e) for n, _, e in comp_res if e]
    print(f"# compiled {len(comp_res)} kernels ({sum(t for _, t, _ in comp_res):.0f} s of compile in "
          f"{args.jobs} processes), {len(fails)} failed; references done; {time.time() - t_start:.0f} s", flush=True)
    for n, e in fails[:5]:
        print(f"COMPILE FAILED {n}: {e}", flush=True)
    if args.dry:
        return 0

    # ---- GPU
    import torch
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    from compare import graph_time_ms, measure_ceilings
    from miopen_solver.runtime.cache import BinaryCache
    from miopen_solver.runtime.cuda import CudaRuntime
    from miopen_solver.runtime.gpu import GpuEngine
    try:
        if not torch.cuda.is_available():
            raise RuntimeUnavailable(f"torch {torch.__version__} sees no CUDA device")
        torch.zeros(1, device="cuda")
        eng = GpuEngine(CudaRuntime(), BinaryCache(cache_dir))
    except RuntimeUnavailable as e:
        print(f"direct_h200.py: needs PyTorch with a CUDA GPU ({shorten(str(e), 200)})", file=sys.stderr)
        return 2
    dev = eng.rt.device_name()
    tgt = eng.target
    if tgt.arch != arch:
        print(f"# NOTE: device arch {tgt.arch}, kernels planned for {arch}", flush=True)
    bws = []
    if not args.profile:
        print(f"# {smi()}", flush=True)
        rate, bw0 = measure_ceilings(torch, "fp16")
        bws = [bw0] + [copy_bw(torch, graph_time_ms) for _ in range(3)]
        drv_bw = driver_copy_bw(eng.rt)
        print(f"# 2 GiB cuMemcpyDtoDAsync: {drv_bw / 1e12:.2f} TB/s (not used for the floor)", flush=True)
    bw = max(bws) if bws else float("nan")
    print(f"# device {dev} ({tgt.arch}, {tgt.num_cus} SMs), torch {torch.__version__}, cuDNN "
          f"{torch.backends.cudnn.version()}; 2 GiB copy bandwidth (compare.measure_ceilings, then 3 more) "
          f"{', '.join(f'{b / 1e12:.2f}' for b in bws)} TB/s, floor uses the max; {time.time() - t_start:.0f} s",
          flush=True)
    results = dict(device=dev, arch=tgt.arch, bw=bw, seed=seed, rows=[], random=[])

    # random correctness sweep
    nbad = 0
    for i, (p, cfg) in enumerate(rand):
        s = specs[("random", i, "cfg")]
        dy, w = inputs[("random", i)]
        try:
            k = eng.load(s.emit())
            bufs = Bufs(eng.rt, p, dy, w, 1)
            out = run_once(eng, k, bufs)
            bufs.free()
            o32 = out.astype(np.float32)
            nonfinite = int(out.size - np.count_nonzero(np.isfinite(o32)))
            err = rms_range(refs[("random", i, 0)], o32)
            tol = default_tolerance(p.dtype, implicit_gemm=False) if p.dtype != "fp32" else 1e-5
            ok = nonfinite == 0 and err < tol
        except Exception as e:
            ok, err, nonfinite = False, float("nan"), -1
            print(f"RANDOM {i} {p.short_tag()} {p.dtype} {cfg.serialize()} raised {type(e).__name__}: {e}", flush=True)
        results["random"].append(dict(problem=p.short_tag(), dtype=p.dtype, config=cfg.serialize(), ok=ok, err=err,
                                      nonfinite=nonfinite))
        if not ok:
            nbad += 1
            print(f"RANDOM FAIL {p.short_tag()} {p.dtype} {cfg.serialize()} err {err:.3g} nonfinite {nonfinite}",
                  flush=True)
    if rand:
        print(f"# random: {len(rand)} problems, {nbad} failed; {time.time() - t_start:.0f} s", flush=True)

    hdr = "| layer | dtype | ours us | cuDNN us | cuDNN/ours | frac floor | floor us | ok (err) | best policy us |"
    lines = [hdr, "|---|---|---|---|---|---|---|---|---|"]
    print(hdr, flush=True)
    for e in plan:
        p, label = e["p"], e["label"]
        row = dict(label=label, dtype=p.dtype, problem=p.short_tag(), why=e["why"], configs={})
        if e["why"] is not None:
            print(f"| {label} | {p.dtype} | not applicable: {e['why']} |", flush=True)
            results["rows"].append(row)
            continue
        dy, w = inputs[(label, p.dtype)]
        layer_bytes = p.min_bytes
        sets = max(1, min(8, math.ceil(args.rotate_mb * 1e6 / layer_bytes)))
        floor_ms = layer_bytes / bw * 1e3
        bufs = Bufs(eng.rt, p, dy, w, sets)
        refp = [refs[(label, p.dtype, i)] for i in range(2 if p.N > 1 else 1)]
        for name in e["cfgs"]:
            s = specs[(label, p.dtype, name)]
            if isinstance(s, str):
                row["configs"][name] = dict(invalid=s)
                continue
            try:
                k = eng.load(s.emit())
                out = run_once(eng, k, bufs)
                ok, err, nonfinite = check(refp, out, p)
                ms = float("nan") if args.profile else time_ours(eng, k, bufs, args.launches, args.replays)
                regs = eng.rt.function_registers(k.func)
            except Exception as ex:
                row["configs"][name] = dict(config=s.config.serialize(), error=f"{type(ex).__name__}: {str(ex)[:300]}")
                print(f"# {label} {p.dtype} {name} FAILED {type(ex).__name__}: {str(ex)[:300]}", flush=True)
                continue
            row["configs"][name] = dict(config=s.config.serialize(), us=ms * 1e3, ok=ok, err=err,
                                        nonfinite=nonfinite, regs=regs, threads=s.block_threads, lds=s.lds_bytes)
        bufs.free()
        if args.profile:
            print(f"# {label} {p.dtype}: " + ", ".join(f"{n} {'OK' if c.get('ok') else 'FAIL'}"
                                                         for n, c in row["configs"].items()), flush=True)
            continue
        cud = time_cudnn(torch, graph_time_ms, p, sets, args.launches, args.replays)
        row.update(cudnn_us=cud * 1e3, floor_us=floor_ms * 1e3, sets=sets)
        results["rows"].append(row)
        d = row["configs"].get("default", {})
        timed = {n: c for n, c in row["configs"].items() if "us" in c}
        best = min(timed.items(), key=lambda kv: kv[1]["us"]) if timed else None
        if "us" in d:
            ours = d["us"] / 1e3
            line = (f"| {label} | {p.dtype} | {ours * 1e3:.1f} | {cud * 1e3:.1f} | {cud / ours:.2f} | "
                    f"{floor_ms / ours:.2f} | {floor_ms * 1e3:.1f} | {'OK' if d['ok'] else 'FAIL'} ({d['err']:.1e}) | "
                    f"{best[0]} {best[1]['us']:.1f} |")
        else:
            line = f"| {label} | {p.dtype} | FAILED {d} | {cud * 1e3:.1f} |"
        lines.append(line)
        print(line, flush=True)
        pol_line = "    " + "  ".join(f"{n}={c['us']:.1f}{'' if c['ok'] else '!'}" for n, c in timed.items())
        print(pol_line, flush=True)
        if out_dir:
            (out_dir / "results.json").write_text(json.dumps(results, indent=1, default=float))

    # policy summary: geometric mean of (cuDNN / policy) over the rows each policy ran correctly on
    print("\n# policy geomean cuDNN/ours (rows ok), worst row:", flush=True)
    names = sorted({n for r in results["rows"] for n in r["configs"]})
    for n in names:
        rs = [r["cudnn_us"] / r["configs"][n]["us"] for r in results["rows"]
              if n in r["configs"] and r["configs"][n].get("ok")]
        fl = [r["floor_us"] / r["configs"][n]["us"] for r in results["rows"]
              if n in r["configs"] and r["configs"][n].get("ok")]
        bad = sum(1 for r in results["rows"] if n in r["configs"] and "us" in r["configs"][n]
                  and not r["configs"][n]["ok"])
        if rs:
            gm = math.exp(sum(map(math.log, rs)) / len(rs))
            gf = math.exp(sum(map(math.log, fl)) / len(fl))
            print(f"#   {n:24s} geomean {gm:.2f}  min {min(rs):.2f}  floor-frac geomean {gf:.2f}  rows {len(rs)}  "
                  f"wrong {bad}", flush=True)
    if bws:
        bws2 = [copy_bw(torch, graph_time_ms) for _ in range(2)]
        results["bw_all"] = bws + bws2
        print(f"# copy bandwidth at the end: {', '.join(f'{b / 1e12:.2f}' for b in bws2)} TB/s; {smi()}", flush=True)
    if out_dir:
        (out_dir / "results.json").write_text(json.dumps(results, indent=1, default=float))
        (out_dir / "table.md").write_text("\n".join(lines) + "\n")
    print(f"# done in {time.time() - t_start:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
