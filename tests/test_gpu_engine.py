"""GpuEngine up to the launch, on CPU: a recording fake runtime stands in for CUDA/HIP.

Checks the order of operations a real device would see (poison before the launch, the
split-K memset before every launch, buffers freed after errors), the binary cache (a
second engine does not compile), the layout guard and the graph timing arithmetic.
"""

from __future__ import annotations

import re

import numpy as np

from miopen_solver import layouts
import pytest

from miopen_solver.command import parse
from miopen_solver.layouts import storage_dtype
from miopen_solver.runtime.cache import BinaryCache
from miopen_solver.runtime.gpu import POISON_BYTE, GpuEngine
from miopen_solver.spec import PerfConfig, make_spec
from miopen_solver.target import get_target

NHWC = "-F 2 --in_layout NHWC --out_layout NHWC --fil_layout NHWC"


class FakeRuntime:
    """Records every call; device memory is host bytes; a launch does nothing unless told."""

    name = "cuda"
    vendor = "nvidia"

    def __init__(self, fail_launch: bool = False, free: int = 80 << 30, total: int = 80 << 30):
        self.calls = []
        self.mem = {}
        self.next = 0x1000
        self.compiles = 0
        self.fail_launch = fail_launch
        self.free_bytes, self.total_bytes = free, total

    def mem_info(self):
        self.calls.append(("mem_info",))
        return self.free_bytes, self.total_bytes

    def target(self):
        return get_target("sm_90")

    def compiler_id(self):
        return "fake-1.0"

    def compile_options(self, arch):
        return [f"--arch={arch}"]

    def compile(self, text, name, arch):
        self.compiles += 1
        return b"CUBIN" + name.encode()

    def load(self, binary, name, shared_bytes=0):
        self.calls.append(("load", name))
        return ("func", name)

    resources = None

    def function_resources(self, func):
        return self.resources

    def alloc(self, n):
        p = self.next
        self.next += n + 256
        self.mem[p] = bytearray(n)
        self.calls.append(("alloc", p, n))
        return p

    def free(self, p):
        self.calls.append(("free", p))
        del self.mem[p]

    def copy_to_device(self, p, host):
        self.mem[p][:] = np.ascontiguousarray(host).tobytes()
        self.calls.append(("h2d", p))

    def copy_to_host(self, host, p):
        host.view(np.uint8).reshape(-1)[:] = np.frombuffer(bytes(self.mem[p]), dtype=np.uint8)
        self.calls.append(("d2h", p))

    def memset(self, p, byte, n):
        base = max(b for b in self.mem if b <= p)      # may start inside an allocation
        off = p - base
        assert off + n <= len(self.mem[base]), "memset past its allocation"
        self.mem[base][off:off + n] = bytes([byte]) * n
        self.calls.append(("memset", p, byte))

    def synchronize(self):
        self.calls.append(("sync",))

    def launch(self, func, grid, block, shared, ptrs):
        if self.fail_launch:
            raise RuntimeError("fake launch failure")
        self.calls.append(("launch", func[1], tuple(grid), tuple(block), shared, tuple(ptrs)))

    def event(self):
        return object()

    def record(self, ev):
        self.calls.append(("record",))

    def elapsed_ms(self, a, b):
        return 2.0

    def capture(self, body):
        body()
        return "graph"

    def replay(self, g):
        self.calls.append(("replay",))


def _spec(line, cfg=PerfConfig(64, 64, 32, 2, 2, 32, 32, stages=2)):
    return make_spec(parse(f"{line} {NHWC}").problem, get_target("sm_90"), cfg)


def _inputs(p):
    dt = storage_dtype(p.dtype)
    return np.ones((p.N, p.Ho, p.Wo, p.K), dt), np.ones((p.K, p.Y, p.X, p.cpg), dt)


def test_run_poisons_before_launch_and_frees_everything(tmp_path):
    rt = FakeRuntime()
    eng = GpuEngine(rt, BinaryCache(tmp_path))
    s = _spec("convfp16 -n 1 -c 16 -H 6 -W 6 -k 16 -y 3 -x 3 -p 1 -q 1")
    dy, w = _inputs(s.problem)
    out = eng.run(s, dy, w)
    kinds = [c[0] for c in rt.calls]
    dx_ptr = [c for c in rt.calls if c[0] == "launch"][0][5][2]
    assert kinds.index("memset") < kinds.index("launch") < kinds.index("d2h")
    assert ("memset", dx_ptr, POISON_BYTE) in rt.calls
    assert np.isnan(out.astype(np.float32)).all()  # the fake kernel wrote nothing: all poison
    assert rt.mem == {}  # every allocation freed


def test_split_k_zeroes_dx_before_every_launch(tmp_path):
    rt = FakeRuntime()
    s = _spec("convfp16 -n 1 -c 16 -H 6 -W 6 -k 64 -y 3 -x 3 -p 1 -q 1",
              PerfConfig(64, 16, 32, 2, 1, 32, 16, split_k=2, stages=2))
    dy, w = _inputs(s.problem)
    GpuEngine(rt, BinaryCache(tmp_path)).time(s, dy, w, iters=3, warmup=1)
    launches = [i for i, c in enumerate(rt.calls) if c[0] == "launch"]
    assert len(launches) == 4
    for i in launches:
        assert rt.calls[i - 1][0] == "memset" and rt.calls[i - 1][2] == 0
    assert all(c[2] == (s.tiles_per_group, 1, 2) for c in rt.calls if c[0] == "launch")


def test_buffers_freed_when_launch_fails(tmp_path):
    rt = FakeRuntime(fail_launch=True)
    s = _spec("convfp16 -n 1 -c 16 -H 6 -W 6 -k 16 -y 3 -x 3 -p 1 -q 1")
    with pytest.raises(RuntimeError, match="fake launch failure"):
        GpuEngine(rt, BinaryCache(tmp_path)).run(s, *_inputs(s.problem))
    assert rt.mem == {}


def test_second_engine_hits_the_binary_cache(tmp_path):
    s = _spec("convfp16 -n 1 -c 16 -H 6 -W 6 -k 16 -y 3 -x 3 -p 1 -q 1")
    rt1, rt2 = FakeRuntime(), FakeRuntime()
    first = GpuEngine(rt1, BinaryCache(tmp_path)).build(s)
    second = GpuEngine(rt2, BinaryCache(tmp_path)).build(s)
    assert (rt1.compiles, rt2.compiles) == (1, 0)
    assert not first.cache_hit and second.cache_hit and second.compile_ms == 0


def test_graph_timing_divides_by_launches(tmp_path):
    rt = FakeRuntime()
    s = _spec("convfp16 -n 1 -c 16 -H 6 -W 6 -k 16 -y 3 -x 3 -p 1 -q 1")
    t = GpuEngine(rt, BinaryCache(tmp_path)).time_graph(s, *_inputs(s.problem), launches=20, replays=4)
    assert t.times_ms == [0.1] * 4 and t.method == "graph"
    assert sum(1 for c in rt.calls if c[0] == "launch") == 21  # one warm-up + 20 captured


def test_a_spec_of_an_nchw_problem_runs_through_transforms(tmp_path):
    """A spec built for an all-NCHW problem (no solver in between) runs with the layout
    transforms its problem needs: dY and W before the kernel; dX the warp-MMA kernel stores
    NCHW itself."""
    p = parse("convfp16 -n 1 -c 16 -H 6 -W 6 -k 16 -y 3 -x 3 -p 1 -q 1 -F 2").problem  # all NCHW
    s = make_spec(p, get_target("sm_90"), PerfConfig(64, 64, 32, 2, 2, 32, 32, stages=2))
    rt = FakeRuntime()
    dt = storage_dtype(p.dtype)
    GpuEngine(rt, BinaryCache(tmp_path)).run(s, np.ones(layouts.dy_shape(p), dt), np.ones(layouts.w_shape(p), dt))
    launched = [c[1] for c in rt.calls if c[0] == "launch"]
    assert s.nchw_dx and launched == ["dgrad_transpose_pair_b16", s.kernel_name]   # dY and W in one launch
    (pair,) = [c for c in rt.calls if c[0] == "launch" and c[1] == "dgrad_transpose_pair_b16"]
    # dY (1, 16, 36): one 64x64 tile (the tile form); W (16, 16, 9): 2304 elements, one
    # whole-matrix band of 4096 (the band form, 9 odd columns)
    assert pair[5][2:8] == (1, 16, 36, 1, 1, 0) and pair[5][10:16] == (16, 16, 9, 1, 1, 1) and pair[2] == (2, 1, 1)


class FakeTmaRuntime(FakeRuntime):
    """A runtime that builds tensor maps: 128 bytes naming the buffer and the box."""

    def tensor_map(self, ptr, desc):
        self.calls.append(("tensor_map", ptr, desc.operand, desc.box))
        return (f"{desc.operand}@{ptr:#x}:{desc.box}".encode()).ljust(128, b"\0")


TMA_LINE = "convfp16 -n 2 -c 256 -H 9 -W 9 -k 128 -y 1 -x 1 -p 0 -q 0 -u 1 -v 1"
TMA_CFG = PerfConfig(128, 256, 64, 2, 1, 64, 256, stages=4, schedule=3)


def test_tma_kernels_get_their_tensor_maps_after_the_pointers(tmp_path):
    """wgmma=3: dY's and W's maps (in the source's order, over the buffers just uploaded)
    follow the three pointers; built once per buffer set, before any timed launch."""
    rt = FakeTmaRuntime()
    eng = GpuEngine(rt, BinaryCache(tmp_path))
    spec = _spec(TMA_LINE, TMA_CFG)
    dy, w = _inputs(spec.problem)
    eng.time(spec, dy, w, iters=3)
    allocs = [c[1] for c in rt.calls if c[0] == "alloc"]
    maps = [c for c in rt.calls if c[0] == "tensor_map"]
    assert maps == [("tensor_map", allocs[0], "dy", (64, 128)), ("tensor_map", allocs[1], "w", (64, 1, 64))]
    launches = [c for c in rt.calls if c[0] == "launch"]
    # two consumer warpgroups (256 threads) and the producer warpgroup that hands them registers
    assert len(launches) == 4 and all(c[3] == (384, 1, 1) for c in launches)
    args = launches[0][5]
    assert args[:3] == tuple(allocs) and len(args) == 5
    assert args[3].startswith(f"dy@{allocs[0]:#x}".encode()) and args[4].startswith(f"w@{allocs[1]:#x}".encode())
    first_launch = rt.calls.index(launches[0])
    assert all(rt.calls.index(m) < first_launch for m in maps)


def test_tma_kernel_on_a_runtime_without_tensor_maps_is_a_clear_error(tmp_path):
    rt = FakeRuntime()
    eng = GpuEngine(rt, BinaryCache(tmp_path))
    spec = _spec(TMA_LINE, TMA_CFG)
    dy, w = _inputs(spec.problem)
    with pytest.raises(RuntimeError, match="needs TMA tensor maps, which the cuda runtime cannot build"):
        eng.run(spec, dy, w)
    assert not rt.mem  # every buffer freed


def test_kernels_without_tma_take_three_pointers(tmp_path):
    rt = FakeTmaRuntime()
    eng = GpuEngine(rt, BinaryCache(tmp_path))
    spec = _spec(TMA_LINE, TMA_CFG.replace(schedule=1))
    dy, w = _inputs(spec.problem)
    eng.run(spec, dy, w)
    launch = next(c for c in rt.calls if c[0] == "launch")
    assert len(launch[5]) == 3 and not any(c[0] == "tensor_map" for c in rt.calls)


@pytest.mark.parametrize("cfg,resources,message", [
    (PerfConfig(256, 128, 64, 2, 1, 128, 128, 0, 0, 0, 1, -1, 4, 3), {"registers": 200, "static_shared": 0},
     "uses 200 registers per thread; a 384-thread block may use 168"),
    (PerfConfig(64, 64, 64, 1, 1, 64, 64, 0, 0, 0, 1, -1, 2, 3), {"registers": 96, "static_shared": 200000},
     "200000 static + 33824 dynamic bytes of shared memory"),
    (PerfConfig(64, 64, 64, 1, 1, 64, 64, 0, 0, 0, 1, -1, 2, 3), {"registers": 160, "static_shared": 0},
     "sized for 3 resident blocks per multiprocessor; the binary (160 registers per thread) allows 2"),
])
def test_a_binary_that_breaks_the_specs_assumptions_is_an_error(cfg, resources, message):
    """The runtime's register and shared-memory counts are checked against what the spec
    assumed; a mismatch is an error naming both, not a silent slow launch."""
    from miopen_solver.spec import check_binary
    s = _spec("convfp16 -n 8 -c 256 -H 28 -W 28 -k 256 -y 1 -x 1", cfg)
    assert check_binary(s, None) is None and check_binary(s, {"registers": 64, "static_shared": 0}) is None
    rt = FakeRuntime()
    rt.resources = resources
    with pytest.raises(RuntimeError, match=re.escape(message)):
        GpuEngine(rt).build(s)


# ------------------------------------------------------------------ device memory
@pytest.mark.parametrize("call", ["run", "time", "time_graph", "reference"])
def test_device_memory_is_checked_before_anything_is_allocated(tmp_path, call):
    """fp16, N=1, C=K=16, 6x6, 3x3 pad 1: dY 1*6*6*16*2 = 1152 bytes, W 16*3*3*16*2 = 4608,
    dX 1152 (the GPU reference's float32 dX: 2304); each rounded up to a 2 MiB page: 6 MiB."""
    from miopen_solver.runtime.gpu import DeviceMemoryError
    s = _spec("convfp16 -n 1 -c 16 -H 6 -W 6 -k 16 -y 3 -x 3 -p 1 -q 1")
    dy, w = _inputs(s.problem)
    rt = FakeRuntime(free=(6 << 20) - 1, total=80 << 30)
    eng = GpuEngine(rt, BinaryCache(tmp_path))
    work = {"run": lambda: eng.run(s, dy, w), "time": lambda: eng.time(s, dy, w, iters=2),
            "time_graph": lambda: eng.time_graph(s, dy, w), "reference": lambda: eng.reference(s.problem, dy, w)}[call]
    dx = "2.2 KiB" if call == "reference" else "1.1 KiB"
    with pytest.raises(DeviceMemoryError) as e:
        work()
    assert str(e.value) == (f"cuda device memory: needs 6.0 MiB (6291456 bytes) (dY 1.1 KiB + W 4.5 KiB + dX {dx}), "
                            f"6.0 MiB (6291455 bytes) free of 80.00 GiB; allowed: tensors that fit in the free memory "
                            f"(a smaller -n)")
    assert isinstance(e.value, MemoryError) and not any(c[0] == "alloc" for c in rt.calls) and rt.mem == {}
    rt.free_bytes = 6 << 20                                # exactly enough: it runs
    work()
    assert rt.mem == {} and [c[0] for c in rt.calls].count("alloc") == 3


def test_a_worker_job_raises_the_device_memory_error(tmp_path):
    """A timing job on a device without room raises before allocating (the worker's loop
    turns it into the job's reason 'DeviceMemoryError: ...'; a run exits 3)."""
    from driver import workers
    from miopen_solver.runtime import gpu
    s = _spec("convfp16 -n 1 -c 16 -H 6 -W 6 -k 16 -y 3 -x 3 -p 1 -q 1")
    eng = GpuEngine(FakeRuntime(free=0), BinaryCache(tmp_path))
    state = workers._State()
    state.engines["cuda"] = eng
    from miopen_solver.solver import solution_of
    job = workers.make_job("timing", solution=solution_of(s), backend="cuda", iters=1)
    with pytest.raises(gpu.DeviceMemoryError, match=r"^cuda device memory: needs 6\.0 MiB .* 0 bytes free of 80\.00 GiB"):
        workers._do_timing(job, state)

