"""Host and device memory before anything is allocated (issue: a problem just under the 2 GiB
tensor limit reached 8.2 GB of host memory and died at a 16 GB limit, exit 3).

* the estimate (miopen_solver/memory.py) against numbers worked out by hand, and against
  the peak that ``tracemalloc`` measures when the worker jobs really run (CPU engine: GEMM,
  direct, NCHW, split-K, the blockwise reference): never below, not far above;
* what the host has: MemAvailable, cgroup v2 and v1 limits (ancestors, namespaced mounts,
  page cache), RLIMIT_AS;
* the driver refuses a run, a tune and a batch line that cannot fit before any worker
  starts: one line with the numbers and what fits (a smaller -n, or -V 0); a subprocess
  under a real RLIMIT_AS refuses with exit 2 where the old driver died in a worker.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tracemalloc
import weakref

import pytest

from conftest import ROOT, run_cli
from driver import workers
from miopen_solver import memory, prng, reference
from miopen_solver.command import parse
from miopen_solver.memory import PROCESS_BYTES, HostMemory
from miopen_solver.perfdb import ENV_VAR as PERFDB_ENV
from miopen_solver.runtime.cpu import CpuEngine
from miopen_solver.solver import DgradSolver
from miopen_solver.target import get_target

NHWC = "--in_layout NHWC --out_layout NHWC --fil_layout NHWC"
MiB = 1 << 20


@pytest.fixture(autouse=True)
def env(monkeypatch, tmp_path):
    for name in (prng.SEED_ENV, workers.CRASH_ENV, workers.PRELOAD_ENV, workers.TIMEOUT_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(PERFDB_ENV, str(tmp_path / "perfdb.sqlite"))


def solution(line, arch="cpu"):
    """The problem of ``line`` and its solution on ``arch``; a line ending in ``SPLIT`` is
    split 4 ways through the workspace."""
    split = line.endswith(" SPLIT")
    p = parse(line.removesuffix(" SPLIT") + " -F 2").problem
    kw = dict(split_k=4, split_k_reduce="workspace") if split else {}
    sol = DgradSolver().find_solution(p, get_target(arch), **kw)
    assert not split or sol.reduce is not None
    return p, sol


# ------------------------------------------------------------------ by hand
def test_gpu_worker_needs_by_hand():
    """fp16 NHWC N=2 C=8 16x16 K=4 3x3 pad 1: dY 2*16*16*4 = 2048 elements (4096 bytes),
    W 4*3*3*8 = 288 (576), dX 2*16*16*8 = 4096 (8192)."""
    p, sol = solution(f"convfp16 -n 2 -c 8 -H 16 -W 16 -k 4 -y 3 -x 3 -p 1 -q 1 {NHWC}", "sm_90")
    plan = memory.engine_plan(sol.spec)
    t = memory.timing_need(p, plan, "cuda")
    # generating dY holds 12 bytes per element; afterwards dY + W
    assert t.host == PROCESS_BYTES + 12 * 2048 and t.resident == PROCESS_BYTES + 4096 + 576
    assert t.device == 3 * (2 * MiB) and t.parts == (("generating dY", 12 * 2048),)
    v = memory.verification_need(p, plan, "cuda", "gpu")
    # one block: 512 pixels of 8*8 + 8*max(4+8, 16) = 192 bytes, slab edges 2*256*8*(4+8), one W tap 8*4*8
    block = 512 * 192 + 2 * 256 * 8 * 12 + 8 * 4 * 8
    assert v.host == PROCESS_BYTES + 4096 + 576 + 8192 + 4 * 4096 + block
    assert v.resident == PROCESS_BYTES + 4096 + 576 + 4 * 4096                  # inputs + the GPU reference
    assert v.device == 3 * (2 * MiB)                                            # float32 dX 16 KiB: one page too
    assert v.describe() == ("verification worker: process 128.0 MiB + dY 4.0 KiB + W 576 bytes + dX 8.0 KiB + "
                            f"GPU reference 16.0 KiB + comparison block {memory.format_bytes(block)}")
    # -D and -e files: read as they are, no generation
    assert memory.timing_need(p, plan, "cuda", files=(True, True)).host == PROCESS_BYTES + 4096 + 576


def test_format_bytes():
    assert [memory.format_bytes(n) for n in (12, 1152, 6 * MiB, 10 << 30)] == \
        ["12 bytes", "1.1 KiB", "6.0 MiB", "10.00 GiB"]
    assert memory.format_apart(6 * MiB, 6 * MiB - 1) == ("6.0 MiB (6291456 bytes)", "6.0 MiB (6291455 bytes)")
    assert memory.format_apart(2 * MiB, MiB) == ("2.0 MiB", "1.0 MiB")


# ------------------------------------------------------------------ against what runs
MEASURED = [
    (f"convfp16 -n 4 -c 32 -H 64 -W 64 -k 32 -y 3 -x 3 -p 1 -q 1 {NHWC}", "cpu", None),
    ("convfp16 -n 8 -c 64 -H 40 -W 40 -k 64 -y 3 -x 3 -p 1 -q 1", "cpu", None),                      # NCHW
    ("conv -n 2 -c 64 -H 56 -W 56 -k 16 -y 1 -x 1 -u 2 -v 2", "cpu", 256 << 10),                     # blockwise
    (f"convfp16 -n 8 -c 32 -H 64 -W 64 -k 32 -y 5 -x 5 -p 2 -q 2 -u 2 -v 2 -g 32 {NHWC}", "sm_90", None),  # direct
    (f"convfp16 -n 8 -c 256 -H 14 -W 14 -k 512 -y 3 -x 3 -p 1 -q 1 {NHWC}", "sm_90", 1 << 20),      # split-K
    (f"convfp16 -n 24 -c 3 -H 226 -W 224 -k 96 -y 4 -x 4 -u 4 -v 4 {NHWC}", "sm_90", None),         # patch GEMM
    ("convfp16 -n 8 -c 32 -H 64 -W 64 -k 32 -y 5 -x 5 -p 2 -q 2 -g 32", "sm_90", None),    # direct, NCHW transforms
    ("convfp16 -n 8 -c 64 -H 32 -W 32 -k 128 -y 1 -x 1", "sm_90", None),                   # NCHW pointwise
    ("conv -n 8 -c 64 -H 20 -W 20 -k 64 -y 3 -x 3 -p 1 -q 1", "sm_90", None),              # NCHW dX from the epilogue
    # a big dX of one channel that few pixels of reach (the zero fill's share was int64 index
    # arrays, 16 bytes per pixel: 8x the fp16 dX): GEMM path NCHW and NHWC, a tall and a
    # wide image, the direct schedule, split-K through the workspace
    ("convfp16 -n 1 -c 1 -H 1500 -W 1500 -k 1 -y 1 -x 1 -u 1500 -v 1500", "cpu", None),
    (f"conv -n 1 -c 1 -H 1500 -W 1500 -k 1 -y 1 -x 1 -u 1500 -v 1500 {NHWC}", "sm_90", None),
    ("convfp16 -n 1 -c 1 -H 3 -W 2000000 -k 1 -y 1 -x 1 -u 1 -v 2000000", "cpu", None),
    (f"convfp16 -n 1 -c 1 -H 2000000 -W 3 -k 1 -y 1 -x 1 -u 2000000 -v 1 {NHWC}", "cpu", None),
    (f"convfp16 -n 2 -c 1 -H 1000 -W 1000 -k 1 -y 3 -x 3 -u 5 -v 5 {NHWC}", "cpu", None),
    (f"convfp16 -n 2 -c 1 -H 1000000 -W 3 -k 1 -y 3 -x 3 -u 5 -v 3 {NHWC}", "sm_90", None),      # direct
    (f"conv -n 2 -c 2 -H 900 -W 900 -k 2 -y 2 -x 2 -u 2 -v 2 -l 3 -j 3 {NHWC}", "sm_90", None),    # direct
    ("convfp16 -n 1 -c 8 -H 600 -W 600 -k 64 -y 1 -x 1 -u 7 -v 7 SPLIT", "gfx942", None),  # workspace split-K
]


def _measure(job, state, role):
    tracemalloc.start()
    try:
        workers._HANDLERS[role](job, state)
        return tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("line,arch,budget", MEASURED)
def test_estimate_bounds_the_measured_peak(monkeypatch, line, arch, budget):
    """Each worker job in this process under tracemalloc (numpy reports its buffers to it):
    the estimate is never below the peak and within 1.6x of it (the CPU engine's chunk
    allowance of a few MiB aside)."""
    if budget:
        monkeypatch.setattr(reference, "BLOCK_BYTES", budget)
    p, sol = solution(line, arch)
    plan = memory.engine_plan(sol.spec)
    if budget:
        assert reference.block_shape(p) != (p.N, p.Hi)        # the reference really goes block by block
    if "-u 2 -v 2 -g 32" in line:
        assert plan.direct
    if "-u 4 -v 4" in line:
        assert plan.patch
    for role in ("timing", "verification"):
        state = workers._State()
        state.engines["cpu"] = CpuEngine(get_target(arch))
        job = workers.make_job(role, solution=sol, backend="cpu", iters=1, warmup=0, reference="cpu")
        resident, peak = _measure(job, state, role)
        need = (memory.timing_need(p, plan, "cpu") if role == "timing"
                else memory.verification_need(p, plan, "cpu", "cpu"))
        est = need.host - PROCESS_BYTES
        assert peak <= est + (256 << 10), (role, peak, need)
        assert est <= 1.6 * peak + 8 * MiB, (role, peak, need)
        assert abs(resident - (need.resident - PROCESS_BYTES)) <= 256 << 10, (role, resident, need)


def _engine_peak(p, sol, arch) -> int:
    """Peak bytes tracemalloc sees while the CPU engine runs ``sol`` beside its inputs (made
    before tracing starts), its dX included."""
    inp = prng.generate_inputs(p, 1)
    engine = CpuEngine(get_target(arch))
    tracemalloc.start()
    try:
        engine.run(sol, inp.dy, inp.w)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("line,arch,budget", MEASURED)
def test_the_engine_estimate_bounds_the_engine_peak(line, arch, budget):
    """The CPU engine's own share (``cpu_engine_bytes``), measured alone: a worker's peak can
    sit in its reference, hiding an engine estimate that is too low."""
    p, sol = solution(line, arch)
    peak = _engine_peak(p, sol, arch)
    assert peak <= memory.cpu_engine_bytes(p, memory.engine_plan(sol.spec)) + (64 << 10), peak


@pytest.mark.parametrize("layout", ["", NHWC])
def test_the_estimate_of_a_huge_sparse_dx_bounds_its_extrapolated_peak(layout):
    """The issue's line, -H 30000 -W 30000 -u 30000 -v 30000 -c 1 (2 FLOPs, a 1.8 GB dX):
    5.18 GiB estimated, 16.7 GB reached. The engine's peak at two smaller sizes of the same
    shape, a straight line through them (memory grows with the pixels), must stay under the
    estimate at the issue's size -- per pixel, and in all."""
    def problem(size):
        return solution(f"convfp16 -n 1 -c 1 -H {size} -W {size} -k 1 -y 1 -x 1 -u {size} -v {size} {layout}")

    sizes = (2000, 3000)                        # past the zero fill's band of 1 MiB of mask
    peaks = [_engine_peak(*problem(s), "cpu") for s in sizes]
    per_pixel = (peaks[1] - peaks[0]) / (sizes[1] ** 2 - sizes[0] ** 2)
    p, sol = solution(f"convfp16 -n 1 -c 1 -H 30000 -W 30000 -k 1 -y 1 -x 1 -u 30000 -v 30000 {layout}")
    plan = memory.engine_plan(sol.spec)
    est = memory.cpu_engine_bytes(p, plan)
    assert per_pixel <= est / 30000 ** 2, (per_pixel, est)
    assert peaks[1] + per_pixel * (30000 ** 2 - sizes[1] ** 2) <= est
    # the workers: inputs, the engine, the blockwise reference; never over 2.5x dX (1.8 GB)
    for need in memory.run_needs(p, plan, "cpu", time=True, verify=True, reference_kind="cpu"):
        assert need.host - PROCESS_BYTES >= est and need.host - PROCESS_BYTES <= 2.5 * p.dx_elems * p.elem_bytes


def test_a_worker_frees_the_last_problem_before_the_next(monkeypatch):
    """A worker keeps one problem's inputs (and small reference): a new problem's are made
    after the old ones are let go, so the two never add up."""
    state = workers._State()
    state.engines["cpu"] = CpuEngine()
    big_p, big = solution(f"conv -n 8 -c 32 -H 64 -W 64 -k 32 -y 3 -x 3 -p 1 -q 1 {NHWC}")
    small_p, small = solution(f"conv -n 1 -c 8 -H 8 -W 8 -k 8 -y 3 -x 3 -p 1 -q 1 {NHWC}")
    workers._do_verification(workers.make_job("verification", solution=big, backend="cpu"), state)
    assert state.ref is not None and state.ref.nbytes == 8 * big_p.dx_elems
    old = [weakref.ref(state.inputs.dy), weakref.ref(state.inputs.w), weakref.ref(state.ref)]
    real, seen = prng.generate_inputs, []

    def generate(*a, **k):
        seen.append([r() is None for r in old])
        return real(*a, **k)
    monkeypatch.setattr(prng, "generate_inputs", generate)
    workers._do_verification(workers.make_job("verification", solution=small, backend="cpu"), state)
    assert seen == [[True, True, True]] and state.ref.nbytes == 8 * small_p.dx_elems


def test_blockwise_verification_in_the_worker_keeps_no_reference(monkeypatch):
    monkeypatch.setattr(reference, "BLOCK_BYTES", 256 << 10)
    p, sol = solution(f"conv -n 4 -c 16 -H 32 -W 32 -k 16 -y 3 -x 3 -p 1 -q 1 {NHWC}")
    state = workers._State()
    state.engines["cpu"] = CpuEngine()
    rec = workers._do_verification(workers.make_job("verification", solution=sol, backend="cpu"), state)
    assert state.ref is None and rec["verdict"]["ok"]
    inp = prng.generate_inputs(p, 0)                          # make_job's seed
    want = reference.verify(p, CpuEngine().run(sol, inp.dy, inp.w), reference.dgrad_reference(p, inp.dy, inp.w))
    assert repr(reference.Verdict(**rec["verdict"])) == repr(want)


# ------------------------------------------------------------------ what the host has
def _proc(tmp_path, cgroup_line, meminfo_kb=4 << 20, vmsize_kb=150 << 10, threads=3):
    proc = tmp_path / "proc"
    (proc / "self").mkdir(parents=True)
    (proc / "meminfo").write_text(f"MemTotal:  99999999 kB\nMemAvailable:  {meminfo_kb} kB\n")
    (proc / "self" / "cgroup").write_text(cgroup_line + "\n")
    (proc / "self" / "status").write_text(f"Name:\tpython\nVmPeak:\t 1 kB\nVmSize:\t  {vmsize_kb} kB\n"
                                          f"Threads:\t{threads}\n")
    return str(proc)


def _write(d, **files):
    d.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (d / name.replace("_", ".", 1)).write_text(text)


def test_host_memory_without_a_cgroup_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(resource, "getrlimit", lambda what: (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    host = memory.host_memory(_proc(tmp_path, "0::/"), str(tmp_path / "cg"))
    assert host == HostMemory(4 << 30, "MemAvailable", None, 150 << 20, 3 * memory.THREAD_MAP_BYTES)


def test_host_memory_cgroup_v2_takes_the_tightest_ancestor(tmp_path, monkeypatch):
    monkeypatch.setattr(resource, "getrlimit", lambda what: (3 << 30, resource.RLIM_INFINITY))
    root = tmp_path / "cg"
    _write(root / "a", memory_max="2000000000\n", memory_current="100\n")
    _write(root / "a" / "b", memory_max="max\n", memory_current="5\n")
    _write(root / "a" / "b" / "c", memory_max="1000000000\n", memory_current="700000000\n",
           memory_stat="anon 1\ninactive_file 200000000\nactive_file 3\n")
    host = memory.host_memory(_proc(tmp_path, "0::/a/b/c"), str(root))
    # 1e9 - (7e8 - 2e8 of reclaimable page cache) = 5e8 < 2e9 - 100 < 4 GiB
    assert host.available == 500_000_000 and host.source == f"cgroup limit {root}/a/b/c/memory.max"
    assert host.address_space == 3 << 30 and host.baseline == 150 << 20
    assert host.process == (150 << 20) + 3 * memory.THREAD_MAP_BYTES      # each thread's BLAS buffer, arena


def test_host_memory_cgroup_v1_namespaced(tmp_path, monkeypatch):
    """cgroup v1 with the process's cgroup mounted as the root (a container): the path of
    /proc/self/cgroup is not under the mount; the mount's own files are the limit."""
    root = tmp_path / "cg"
    _write(root / "memory", memory_limit_in_bytes="1073741824\n", memory_usage_in_bytes="73741824\n",
           memory_stat="cache 5\ntotal_inactive_file 0\n")
    host = memory.host_memory(_proc(tmp_path, "4:memory:/process_api/abc\n0::/"), str(root))
    assert host.available == 1_000_000_000 and host.source == f"cgroup limit {root}/memory/memory.limit_in_bytes"
    unlimited = tmp_path / "cg2"
    _write(unlimited / "memory", memory_limit_in_bytes="9223372036854771712\n", memory_usage_in_bytes="1\n")
    assert memory.host_memory(_proc(tmp_path / "x", "4:memory:/"), str(unlimited)).source == "MemAvailable"


def test_shortfall_says_what_and_how_much():
    need = memory.Need("verification", PROCESS_BYTES + 2 * MiB, 0, 0, (("dY", MiB), ("dX", MiB)))
    other = memory.Need("timing", PROCESS_BYTES + MiB, 0, 0, (("dY", MiB),))
    total = need.host
    host = HostMemory(PROCESS_BYTES + MiB, "MemAvailable", None, 0)
    assert memory.shortfall(host, total, [other, need]) == (
        "host memory: needs 130.0 MiB (verification worker: process 128.0 MiB + dY 1.0 MiB + dX 1.0 MiB); "
        "129.0 MiB available (MemAvailable)")
    assert memory.shortfall(host, total, [other, need], held=MiB) is None
    assert memory.shortfall(host, total, [need], held=MiB // 2).endswith(
        "129.5 MiB available (MemAvailable plus 512.0 KiB the workers hold now)")
    limited = HostMemory(None, "MemAvailable", 101 * MiB, 100 * MiB)     # a worker is 100 MiB before its tensors
    assert memory.shortfall(limited, total, [other, need]) == (
        "address space: needs 102.0 MiB (verification worker: process 100.0 MiB + dY 1.0 MiB + dX 1.0 MiB); "
        "RLIMIT_AS (ulimit -v) allows 101.0 MiB")
    assert memory.shortfall(HostMemory(None, "MemAvailable", 102 * MiB, 100 * MiB), total, [need]) is None


UNITS = {"GiB": 1 << 30, "MiB": 1 << 20, "KiB": 1 << 10, "bytes": 1}
HALF_STEP = {"GiB": 0.005 * (1 << 30), "MiB": 0.05 * (1 << 20), "KiB": 0.05 * (1 << 10), "bytes": 0}
"""The most :func:`memory.format_bytes` rounds a value by, per unit (%.2f GiB, %.1f MiB/KiB)."""


def assert_adds_up(line: str) -> list:
    """The ``host memory: needs TOTAL (PART + PART + ...)`` of a refusal: the parts as
    printed add up to the total as printed, within the rounding of each printed number.
    Returns the parts' texts."""
    import re
    m = re.search(r"host memory: needs ([\d.]+) (\w+)(?: \(\d+ bytes\))? \((.*?)\); [\d.]+ \w+.* available", line)
    assert m, line
    total, unit, breakdown = float(m.group(1)) * UNITS[m.group(2)], m.group(2), m.group(3)
    parts = breakdown.split(" + ")
    sizes = [re.fullmatch(r".* ([\d.]+) (GiB|MiB|KiB|bytes)", part).groups() for part in parts]
    printed = sum(float(n) * UNITS[u] for n, u in sizes)
    slack = HALF_STEP[unit] + sum(HALF_STEP[u] for _, u in sizes)
    assert abs(printed - total) <= slack, (line, printed, total)
    return parts


def test_a_peak_lists_every_part_and_they_add_up():
    need = memory.Need("timing", PROCESS_BYTES + 42 * (1 << 30), 0, 0, (("generating dY", 42 * (1 << 30)),))
    peak = memory.Peak(need, (("verification worker between jobs", 7 * (1 << 30)),))
    assert peak.host == PROCESS_BYTES + 49 * (1 << 30) == sum(b for _, b in peak.parts())
    assert peak.describe() == ("timing worker: process 128.0 MiB + generating dY 42.00 GiB + verification worker "
                               "between jobs 7.00 GiB")
    assert memory.side_by_side([peak, memory.Peak(need)]) is peak
    host = HostMemory(1 << 30, "MemAvailable", None, 0)
    assert_adds_up(memory.shortfall(host, peak, [need]))
    # bytes beyond the largest worker's own peak, given as a number, are named, never dropped
    why = memory.shortfall(host, need.host + 5 * MiB, [need])
    assert "+ other memory beside it 5.0 MiB)" in why
    assert_adds_up(why)
    assert "other memory" not in memory.shortfall(host, need.host, [need])


def test_a_batch_line_names_what_the_other_worker_holds(monkeypatch):
    """The trial's row: ``needs 49.32 GiB (timing worker: process 128.0 MiB + generating dY
    42.06 GiB)`` -- the 7 GiB the verification worker still held was missing. Both ways the
    two workers peak side by side are listed with what the other one holds."""
    from driver.batch_cmd import _memory_refusal

    class Device:
        backend = "cpu"
    line = f"convfp16 -n 16 -c 64 -H 56 -W 56 -k 64 -y 3 -x 3 -p 1 -q 1 {NHWC}"
    p, sol = solution(line)
    plan = memory.engine_plan(sol.spec)
    t, v = memory.timing_need(p, plan, "cpu"), memory.verification_need(p, plan, "cpu", "cpu")
    for held_v, worst in ((50 * t.host, "timing"), (0, "verification")):
        held = {"timing": 0, "verification": held_v}
        total = max(t.host + held_v, t.resident + v.host)
        free = total - held_v - 1           # what the workers hold now is given back: counted as available
        monkeypatch.setattr(memory, "host_memory", lambda *a, **k: HostMemory(free, "MemAvailable", None, 0))
        refusal, _, _ = _memory_refusal(p, sol, Device(), "cpu", True, (False, False), held)
        parts = assert_adds_up(refusal)
        assert refusal.startswith(f"host memory: needs {memory.format_apart(total, free + held_v)[0]} ({worst} "
                                  f"worker: process ")
        other = ("verification worker between jobs", held_v) if worst == "timing" else \
            ("timing worker between jobs", t.resident)
        assert parts[-1] == f"{other[0]} {memory.format_bytes(other[1])}"


# ------------------------------------------------------------------ the driver refuses
BIG = f"convfp16 -n 16 -c 64 -H 56 -W 56 -k 64 -y 3 -x 3 -p 1 -q 1 -F 2 -t 1 {NHWC}"


def _host(monkeypatch, available=None, address_space=None, baseline=150 * MiB):
    host = HostMemory(available, "MemAvailable", address_space, baseline)
    monkeypatch.setattr(memory, "host_memory", lambda *a, **k: host)
    return host


def _run_total(line, n=None, verify=True):
    cmd = parse(line.split())
    p = cmd.problem if n is None else cmd.problem.replace(N=n)
    plan = memory.engine_plan(DgradSolver().find_solution(cmd.problem, get_target("cpu")).spec)
    return memory.one_after_another(memory.run_needs(p, plan, "cpu", time=True, verify=verify,
                                                     reference_kind="cpu" if verify else None))


def test_run_refused_with_the_numbers_and_a_smaller_n(capsys, monkeypatch, no_workers):
    total, needs = _run_total(BIG)
    verify_off = _run_total(BIG, verify=False)[0]
    host = _host(monkeypatch, available=(total + verify_off) // 2)      # -V 0 fits, the full run does not
    status, out, err = run_cli(capsys, *BIG.split(), "--backend", "cpu")
    assert status == 2 and out == [] and len(err) == 1
    worst = max(needs, key=lambda n: n.host)
    n = int(err[0].split("allowed: -n ")[1].split()[0])
    assert_adds_up(err[0])
    assert err[0] == (f"dgrad-driver: error: host memory: needs {memory.format_bytes(total)} ({worst.describe()}); "
                      f"{memory.format_bytes(host.available)} available (MemAvailable); allowed: -n {n} or smaller, "
                      f"or -V 0")
    assert _run_total(BIG, n)[0] <= host.available < _run_total(BIG, n + 1)[0]     # the largest -n that fits
    status, out, err = run_cli(capsys, *BIG.split(), "--backend", "cpu", "--json")
    assert status == 2 and out == [] and len(err) == 1 and "allowed: -n " in err[0]


def test_run_refused_when_even_n_1_does_not_fit(capsys, monkeypatch, no_workers):
    _host(monkeypatch, available=PROCESS_BYTES)
    status, out, err = run_cli(capsys, *BIG.split(), "--backend", "cpu", "-V", "0")
    assert status == 2 and out == [] and len(err) == 1
    assert err[0].endswith("allowed: a smaller problem (even -n 1 does not fit)") and "-V 0" not in err[0]


@pytest.mark.parametrize("flags,roles", [("-t 0 -V 0", ["launch"]), ("-t 1 -V 0", ["timing"]),
                                         ("-t 0 -V 1", ["verification"]), ("-t 1 -V 1", ["timing", "verification"]),
                                         ("-t 0 -V 0 -o 1", ["verification"])])
def test_the_needs_are_the_workers_a_run_starts(flags, roles):
    """-V 0 starts no verification worker, so the pre-check counts none (it said
    "verification worker: ..." for -V 0 -n 268435456): -t 0 -V 0 is one untimed launch in
    the timing worker, holding what a timing run holds."""
    cmd = parse((BIG.replace(" -t 1", "") + " " + flags).split())
    p = cmd.problem
    plan = memory.engine_plan(DgradSolver().find_solution(p, get_target("cpu")).spec)
    needs = memory.run_needs(p, plan, "cpu", time=cmd.time, verify=bool(cmd.verify), reference_kind="cpu",
                             dump=int(cmd.flags["dump_output"]) != 0)
    assert [n.role for n in needs] == roles
    if roles == ["launch"]:
        assert needs[0].host == memory.timing_need(p, plan, "cpu").host


def test_a_run_with_v0_refused_names_no_verification_worker(capsys, monkeypatch, no_workers):
    status, out, err = run_cli(capsys, *BIG.replace(" -t 1", "").split(), "-V", "0", "-n", "268435456",
                               "--backend", "cpu")
    assert status == 2 and out == [] and len(err) == 1
    assert "(launch worker: process " in err[0] and "verification" not in err[0] and "-V 0" not in err[0]


def test_tune_refused_before_the_sweep(capsys, monkeypatch, no_workers):
    total, _ = _run_total(BIG)
    _host(monkeypatch, available=PROCESS_BYTES + (total - PROCESS_BYTES) // 2)
    status, out, err = run_cli(capsys, "tune", *BIG.split(), "--backend", "cpu", "--max-configs", "3")
    assert status == 2 and out == [] and len(err) == 1
    assert err[0].startswith("dgrad-driver: error: host memory: needs ") and "allowed: -n " in err[0]
    assert_adds_up(err[0])


def _batch_need(line):
    """A batch line's joint peak: both workers live for the file, so while the line is
    verified the timing worker still holds its inputs."""
    p, sol = solution(line.replace(" -F 2", ""))
    plan = memory.engine_plan(sol.spec)
    t, v = memory.timing_need(p, plan, "cpu"), memory.verification_need(p, plan, "cpu", "cpu")
    return max(t.host, t.resident + v.host)


def test_batch_line_that_cannot_fit_is_an_error_row(capsys, monkeypatch, tmp_path):
    small = f"convfp16 -n 1 -c 4 -H 5 -W 5 -k 8 -y 1 -x 1 -F 2 -t 1 -i 1 {NHWC}"
    path = tmp_path / "lines.txt"
    path.write_text(f"{BIG}\n{small}\n")
    host = _host(monkeypatch, available=_batch_need(small) + 64 * MiB)
    assert _batch_need(BIG) > host.available
    status, out, err = run_cli(capsys, "batch", str(path), "--backend", "cpu")
    assert status == 1 and err == []
    big_row = next(x for x in out if x.split()[0] == "1")
    assert " error " in big_row
    assert (f"host memory: needs {memory.format_bytes(_batch_need(BIG))} (" in big_row
            and f"{memory.format_bytes(host.available)} available (MemAvailable); allowed: --batch-size " in big_row)
    assert_adds_up(big_row)
    n = int(big_row.split("allowed: --batch-size ")[1].split()[0])
    assert _batch_need(BIG.replace("-n 16", f"-n {n}")) <= host.available
    assert _batch_need(BIG.replace("-n 16", f"-n {n + 1}")) > host.available
    small_row = next(x for x in out if x.split()[0] == "2")
    assert small_row.split()[-2:] == ["OK", "ok"]
    assert out[-1] == "Summary: 1 ok, 1 error"


# N = 2^31 - 2: its divisors let the split along N run in 1991 launches (2^31 - 1, a prime, is
# refused first: 2^31 - 1 launches of one image; applicability.MAX_SPLIT_LAUNCHES)
ISSUE = "convfp16 -n 2147483646 -c 8 -H 8 -W 8 -k 8 -y 3 -x 3 -p 1 -q 1 -F 2"


def _line_needs(line, n):
    """``(total, largest worker's host bytes)`` of the run ``line`` with ``-n n``."""
    cmd = parse(line.split())
    plan = memory.engine_plan(DgradSolver().find_solution(cmd.problem, get_target("cpu")).spec)
    total, needs = memory.one_after_another(memory.run_needs(
        cmd.problem.replace(N=n), plan, "cpu", time=bool(cmd.time), verify=bool(cmd.verify), reference_kind="cpu"))
    return total, max(x.host for x in needs)


def _fits(line, n, host) -> bool:
    """Worked out here: -n n fits when the workers' peak is within what is available and the
    largest worker -- what its process maps before its tensors (this process's size and
    THREAD_MAP_BYTES per thread) plus its tensors -- within RLIMIT_AS."""
    total, worker = _line_needs(line, n)
    space = host.baseline + host.mapped + worker - PROCESS_BYTES
    return ((host.available is None or total <= host.available)
            and (host.address_space is None or space <= host.address_space))


def _hint(err_line) -> int:
    return int(err_line.split("allowed: -n ")[1].split()[0])


def test_the_hint_under_rlimit_as_fits_it_and_names_it(capsys, monkeypatch, no_workers):
    """The issue: under ``ulimit -v 8000000`` (7.63 GiB) ISSUE was refused naming MemAvailable
    (22.92 GiB) with the hint -n 1280551, whose workers fitted RLIMIT_AS by this process's size
    alone; the verification worker died in OpenBLAS after 35 s (exit 3). The limit read by
    host_memory (injected here) is now the tighter one named, and the hint leaves a worker room
    for what it maps per thread."""
    avail = memory.host_memory().available or 8 << 30
    limit = min(2 << 30, avail // 4) + (512 << 20)
    monkeypatch.setattr(memory, "address_space_limit", lambda: limit)
    host = memory.host_memory()
    assert host.address_space == limit and host.mapped >= memory.THREAD_MAP_BYTES
    monkeypatch.setattr(memory, "host_memory", lambda *a, **k: host)     # the same numbers for the driver
    status, out, err = run_cli(capsys, *ISSUE.split(), "--backend", "cpu")
    assert status == 2 and out == [] and len(err) == 1
    assert err[0].startswith("dgrad-driver: error: address space: needs ")
    assert f"(verification worker: process {memory.format_bytes(host.baseline + host.mapped)} + dY " in err[0]
    assert f"; RLIMIT_AS (ulimit -v) allows {memory.format_bytes(limit)}; allowed: -n " in err[0]
    n = _hint(err[0])
    assert _fits(ISSUE, n, host) and not _fits(ISSUE, n + 1, host)
    status, out, err = run_cli(capsys, *ISSUE.replace("2147483646", str(n + 1)).split(), "--backend", "cpu")
    assert status == 2 and err[0].startswith("dgrad-driver: error: address space: needs ")


@pytest.mark.parametrize("tighter", ["MemAvailable", "RLIMIT_AS", "MemAvailable only", "RLIMIT_AS only"])
def test_the_refusal_names_the_tighter_limit_and_the_hint_fits_both(capsys, monkeypatch, no_workers, tighter):
    """Both limits exceeded (MemAvailable, RLIMIT_AS): the tighter one is named; one of them
    alone: that one. The hint is the largest -n that fits both, worked out here."""
    (t1, _), (t16, _) = _line_needs(BIG, 1), _line_needs(BIG, 16)     # one worker at a time: total = worker
    small = (t1 + t16) // 2                                  # -n 1 fits, -n 16 does not
    big = (small + t16) // 2                                 # -n 16 does not fit this either
    process = 150 * MiB + 2 * memory.THREAD_MAP_BYTES
    limit = {n: process + n - PROCESS_BYTES for n in (small, big)}     # RLIMIT_AS that leaves a worker n bytes
    room = {"MemAvailable": (small, limit[big]), "RLIMIT_AS": (big, limit[small]),
            "MemAvailable only": (small, None), "RLIMIT_AS only": (None, limit[small])}[tighter]
    host = HostMemory(room[0], "MemAvailable", room[1], 150 * MiB, 2 * memory.THREAD_MAP_BYTES)
    monkeypatch.setattr(memory, "host_memory", lambda *a, **k: host)
    status, out, err = run_cli(capsys, *BIG.split(), "--backend", "cpu")
    assert status == 2 and out == [] and len(err) == 1
    if tighter.startswith("MemAvailable"):
        assert err[0].startswith("dgrad-driver: error: host memory: needs ")
        assert f"; {memory.format_bytes(small)} available (MemAvailable); allowed: -n " in err[0]
    else:
        assert err[0].startswith("dgrad-driver: error: address space: needs ")
        assert f"; RLIMIT_AS (ulimit -v) allows {memory.format_bytes(room[1])}; allowed: -n " in err[0]
    n = _hint(err[0])
    assert 1 <= n < 16 and _fits(BIG, n, host) and not _fits(BIG, n + 1, host)


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs /proc")
def test_a_real_rlimit_as_refuses_before_any_worker(tmp_path):
    """Under ulimit -v 1 GiB a 256-image fp32 line needs about 4 GiB in one worker: the
    driver says so (exit 2) instead of a worker dying (exit 3); a small line still runs."""
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
    env = dict(os.environ, PYTHONPATH=ROOT, **{PERFDB_ENV: str(tmp_path / "p.sqlite")})
    big = "conv -n 256 -c 64 -H 128 -W 128 -k 64 -y 3 -x 3 -p 1 -q 1 -F 2 -t 1 --backend cpu"
    r = subprocess.run([sys.executable, "-m", "driver", *big.split()], env=env, cwd=tmp_path, preexec_fn=limit,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and r.stdout == "", r.stderr
    assert len(r.stderr.splitlines()) == 1
    assert r.stderr.startswith("dgrad-driver: error: address space: needs ")
    assert "RLIMIT_AS (ulimit -v) allows 1.00 GiB; allowed: -n " in r.stderr
    small = f"convfp16 -n 1 -c 4 -H 5 -W 5 -k 8 -y 1 -x 1 -F 2 -t 1 -i 1 {NHWC} --backend cpu"
    r = subprocess.run([sys.executable, "-m", "driver", *small.split()], env=env, cwd=tmp_path, preexec_fn=limit,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1].startswith("Backward Convolution Data Verifies OK")
