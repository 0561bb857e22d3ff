"""Split-N: tensors past 2 GiB run as launches of whole images (issue 16, part 2).

The solver decides the plan (``applicability.batch_chunks``) and the Solution carries it;
engines loop over it. The 2^31-1 byte limit is ``applicability.TENSOR_BYTES_LIMIT``, which
these tests lower to force 3 and more chunks on small problems (MIOpen's own split-N gave
wrong results past two chunks: rocm-libraries #10627).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from miopen_solver import applicability as ap
from miopen_solver import layouts, memory
from miopen_solver.command import parse
from miopen_solver.layouts import storage_dtype
from miopen_solver.problem import ConvProblem
from miopen_solver.reference import dgrad_reference, verify
from miopen_solver.runtime.cache import BinaryCache
from miopen_solver.runtime.cpu import CpuEngine
from miopen_solver.runtime.gpu import GpuEngine
from miopen_solver.solver import DgradSolver, Solution
from miopen_solver.target import get_target
from miopen_solver.transpose import writes_nchw_dx

from test_gpu_engine import FakeRuntime

NHWC = "-F 2 --in_layout NHWC --out_layout NHWC --fil_layout NHWC"
SOLVER = DgradSolver()
# fp32, 4 channels, 7x7, 3x3 pad 1: dY and dX of one image are 4*7*7*4 = 784 bytes, W
# 4*4*3*3*4 = 576 bytes
SMALL = f"conv -n 6 -c 4 -H 7 -W 7 -k 4 -y 3 -x 3 -p 1 -q 1 {NHWC}"
IMG = 784


def _p(line):
    return parse(line.split()).problem


def _inputs(p, seed=5):
    rng = np.random.default_rng(seed)
    st = storage_dtype(p.dtype)
    return (rng.uniform(-1, 1, layouts.dy_shape(p)).astype(st), rng.uniform(-1, 1, layouts.w_shape(p)).astype(st))


def tap_mask(hi: int, wi: int, h: tuple, w: tuple) -> np.ndarray:
    """``(hi, wi)`` bool: True where some filter tap reaches the pixel -- ``v + pad - t*dil >= 0``
    and divisible by the stride for a tap ``t < filter`` -- per axis ``(pad, stride, dil,
    filter)``: the pixels some tilde sub-GEMM writes, from the convolution's definition."""
    def hit(v, pad, stride, dil, filt):
        return any(v + pad - t * dil >= 0 and (v + pad - t * dil) % stride == 0 for t in range(filt))
    rows = np.array([hit(v, *h) for v in range(hi)], dtype=bool)
    cols = np.array([hit(v, *w) for v in range(wi)], dtype=bool)
    return rows[:, None] & cols[None, :]


class ComputingRuntime(FakeRuntime):
    """A fake device whose kernel is the CPU engine run on the bytes at the launch's
    pointers: a launch reads one chunk's dY (its problem's N images) at ``args[0]`` and W at
    ``args[1]`` and writes that many images of dX at ``args[2]`` (NHWC, or NCHW when the
    kernel stores it so: ``writes_nchw_dx(spec)``) -- so a wrong offset, a missing or extra
    chunk or a missing split-K memset shows up in dX. Pointers may point inside an
    allocation. An NCHW pointwise launch reads NCHW dY and W^T there and writes NCHW dX (its
    grid must hold one block row per image and group). With split-K through the workspace
    the kernel writes each split's fp32 partial sums into its slice at ``args[2]`` (covered
    pixels only), and the reduction launch (:meth:`reduce`) sums the slices from its own
    arguments."""

    def __init__(self, sol: Solution, **kw):
        super().__init__(**kw)
        self.sol = sol
        self.uploads = []

    def _at(self, ptr):
        for base, buf in self.mem.items():
            if base <= ptr < base + max(1, len(buf)):
                return buf, ptr - base
        raise AssertionError(f"pointer {ptr:#x} is in no allocation")

    def copy_to_device(self, p, host):
        data = np.ascontiguousarray(host).tobytes()
        buf, off = self._at(p)
        buf[off:off + len(data)] = data
        self.uploads.append(data)
        self.calls.append(("h2d", p))

    def copy_to_host(self, host, p):
        buf, off = self._at(p)
        host.view(np.uint8).reshape(-1)[:] = np.frombuffer(bytes(buf[off:off + host.nbytes]), dtype=np.uint8)
        self.calls.append(("d2h", p))

    def memset(self, p, byte, n):
        buf, off = self._at(p)
        assert off + n <= len(buf), "memset past its allocation"
        buf[off:off + n] = bytes([byte]) * n
        self.calls.append(("memset", p, byte, n))

    def floats(self, ptr, count):
        """``count`` float32 values at device address ``ptr`` (a copy)."""
        buf, off = self._at(ptr)
        assert off + 4 * count <= len(buf), "a launch reads past its buffer"
        return np.frombuffer(bytes(buf[off:off + 4 * count]), dtype=np.float32).copy()

    def put(self, ptr, arr):
        buf, off = self._at(ptr)
        data = np.ascontiguousarray(arr).tobytes()
        assert off + len(data) <= len(buf), "a launch writes past its buffer"
        buf[off:off + len(data)] = data

    def reduce(self, name, grid, block, args):
        """The split-K reduction from its arguments alone (``splitk_reduce.cu``'s contract):
        ``(ws, dx, slice, split_k, n, hi, wi, c, cover, pH, sH, dH, gcd, tilde, Y, pW, sW, dW,
        gcd, tilde, X)``; dtype and layout from the kernel's name. A pixel is read when some
        filter tap lands on it (:func:`tap_mask`); every value read must be finite (a split
        wrote it over the NaN poison); slices are summed in order in float32."""
        dtype, layout = name[len("dgrad_splitk_reduce_"):].split("_")
        ws, dx, slice_, split_k, n, hi, wi, c, cover, ph, sh, dh, _, _, fh, pw, sw, dw, _, _, fw = args
        parts = self.floats(ws, split_k * slice_).reshape(split_k, slice_)[:, :n * hi * wi * c]
        parts = parts.reshape(split_k, n, hi, wi, c)
        mask = tap_mask(hi, wi, (ph, sh, dh, fh), (pw, sw, dw, fw)) if cover else np.ones((hi, wi), bool)
        assert np.isfinite(parts[:, :, mask]).all(), "the reduction reads a workspace element no split wrote"
        total = np.where(mask[None, :, :, None], parts[0], np.float32(0))
        for z in range(1, split_k):
            total = total + np.where(mask[None, :, :, None], parts[z], np.float32(0))
        out = total.astype(storage_dtype(dtype))
        self.put(dx, out.transpose(0, 3, 1, 2) if layout == "nchw" else out)

    def launch(self, func, grid, block, shared, args):
        super().launch(func, grid, block, shared, args)
        if func[1].startswith("dgrad_splitk_reduce_"):
            self.reduce(func[1], grid, block, args)
            return
        if func[1].startswith("dgrad_transpose_"):      # raw bits
            eb = int(func[1].rsplit("_b", 1)[1]) // 8
            # (src, dst, batch, rows, cols); a pair: (src, dst, batch, rows, cols, gx, gy, form) x 2
            jobs = [args[0:5], args[8:13]] if func[1].startswith("dgrad_transpose_pair_") else [args]
            assert len(args) == (16 if len(jobs) == 2 else 5), args
            for src, dst, batch, rows, cols in jobs:
                n = batch * rows * cols * eb
                sbuf, soff = self._at(src)
                assert soff + n <= len(sbuf), "a transpose reads past its buffer"
                a = np.frombuffer(bytes(sbuf[soff:soff + n]), dtype=f"u{eb}").reshape(batch, rows, cols)
                dbuf, doff = self._at(dst)
                assert doff + n <= len(dbuf), "a transpose writes past its buffer"
                dbuf[doff:doff + n] = np.ascontiguousarray(a.transpose(0, 2, 1)).tobytes()
            return
        spec = self.sol.spec
        if func[1] != spec.kernel_name:
            return
        p, st = spec.problem, storage_dtype(spec.problem.dtype)
        eb = p.elem_bytes

        def read(ptr, count, shape):
            buf, off = self._at(ptr)
            assert off + count * eb <= len(buf), "a launch reads past its buffer"
            return np.frombuffer(bytes(buf[off:off + count * eb]), dtype=st).reshape(shape)
        nchw = writes_nchw_dx(spec)              # the kernel stores dX NCHW at args[2]
        if spec.schedule.nchw_pointwise:
            # NCHW dY of the launch's images at args[0], W^T (G, cpg, kpg) at args[1], NCHW dX
            # at args[2]; one block row per (image, group)
            assert tuple(grid) == (spec.grid[0], p.N * p.G, 1), grid
            shapes = ((p.N, p.K, p.Ho, p.Wo), (p.G, p.cpg, p.kpg), (p.N, p.C, p.Hi, p.Wi))
        else:
            shapes = ((p.N, p.Ho, p.Wo, p.K), (p.K, p.Y, p.X, p.cpg),
                      (p.N, p.C, p.Hi, p.Wi) if nchw else (p.N, p.Hi, p.Wi, p.C))
        dy = read(args[0], p.dy_elems, shapes[0])
        w = read(args[1], p.w_elems, shapes[1])
        if getattr(spec, "workspace_reduce", False):      # partial sums into the slices at args[2]
            ws = self.floats(args[2], spec.split_k * spec.workspace_slice_elems).reshape(spec.split_k, -1)
            before = ws.copy()
            CpuEngine(spec.target).run_partials(spec, dy, w, ws)
            pix = ws[:, :p.dx_elems].reshape(spec.split_k, p.N, p.Hi, p.Wi, p.C)
            mask = tap_mask(p.Hi, p.Wi, (p.pH, p.sH, p.dH, p.Y), (p.pW, p.sW, p.dW, p.X))
            assert np.array_equal(pix[:, :, ~mask], before[:, :p.dx_elems].reshape(pix.shape)[:, :, ~mask],
                                  equal_nan=True), "a split wrote a pixel no sub-GEMM covers"
            assert np.isfinite(pix[:, :, mask]).all(), "a split left a covered pixel unwritten"
            self.put(args[2], ws)
            return
        before = read(args[2], p.dx_elems, shapes[2])
        if nchw:
            before = before.transpose(0, 2, 3, 1)
        out = np.full(before.shape, np.nan, dtype=st)
        CpuEngine(spec.target)._run_launch(spec, dy, w, out)
        if spec.zero_fill == "memset":          # split-K adds into what the memset left
            out = (before.astype(np.float32) + out.astype(np.float32)).astype(st)
        if nchw:
            out = np.ascontiguousarray(out.transpose(0, 3, 1, 2))
        buf, off = self._at(args[2])
        buf[off:off + out.nbytes] = out.tobytes()


# ------------------------------------------------------------------ the plan
def test_the_plan_of_the_issue_line_by_hand():
    """N=128, C=K=512, 256x256 fp16 1x1: one image of dX (and dY) is 512*65536*2 = 2^26 bytes;
    2^31-1 bytes hold 31 of them; the largest divisor of 128 up to 31 is 16: 8 launches."""
    p = _p(f"convfp16 -n 128 -c 512 -H 256 -W 256 -k 512 -y 1 -x 1 {NHWC}")
    assert p.dx_elems == 4294967296
    assert ap.images_per_launch(p) == 31
    assert ap.batch_chunks(p) == tuple((16 * i, 16) for i in range(8))
    for arch in ("sm_90", "gfx942", "gfx90a", "sm_80", "cpu"):
        v = SOLVER.is_applicable(p, get_target(arch))
        assert v.ok, (arch, v)
        sol = SOLVER.find_solution(p, get_target(arch))
        assert (sol.n_chunks, sol.chunk_images, sol.problem, sol.spec.problem.N) == (8, 16, p, 16)
        assert sol.workspace_bytes == 0 and sol.kernel_name.endswith("_n16c512h256w256k512y1x1p0x0s1x1d1x1g1")
        assert any(n.startswith("Split-N: N=128 runs as 8 launches of 16 images") for n in sol.notes)
    # 100 images: 25 per launch (the largest divisor of 100 up to 31), 4 launches
    assert ap.batch_chunks(p.replace(N=100)) == ((0, 25), (25, 25), (50, 25), (75, 25))
    # 31 images fit one launch: no split
    assert ap.batch_chunks(p.replace(N=31)) == ((0, 31),)
    assert SOLVER.find_solution(p.replace(N=31), get_target("sm_90")).n_chunks == 1


@pytest.mark.parametrize("limit,n,chunks", [
    (1568, 6, [(0, 2), (2, 2), (4, 2)]),                  # 2 images fit: 3 launches
    (2351, 6, [(0, 2), (2, 2), (4, 2)]),                  # one byte short of 3
    (2352, 6, [(0, 3), (3, 3)]),                          # 3 fit
    (1568, 5, [(i, 1) for i in range(5)]),                # 2 fit, 5 is prime: one image each
    (784, 4, [(i, 1) for i in range(4)]),                 # exactly one image fits
    (4704, 6, [(0, 6)]),                                  # all fit
])
def test_forced_plans_cover_every_image_once(monkeypatch, limit, n, chunks):
    monkeypatch.setattr(ap, "TENSOR_BYTES_LIMIT", limit)
    p = _p(SMALL).replace(N=n)
    assert list(ap.batch_chunks(p)) == chunks
    covered = [i for n0, c in chunks for i in range(n0, n0 + c)]
    assert covered == list(range(n))
    sol = SOLVER.find_solution(p, get_target("sm_90"))
    assert list(sol.chunks) == chunks and sol.problem == p


def test_one_image_past_the_limit_is_index_overflow(monkeypatch):
    monkeypatch.setattr(ap, "TENSOR_BYTES_LIMIT", 783)
    v = SOLVER.is_applicable(_p(SMALL), get_target("sm_90"))
    assert v.codes == ("INDEX_OVERFLOW",)
    assert v.reasons[0].message.startswith("dY of one image is 784 bytes (196 elements: K*Ho*Wo, from -k, -H/-W, "
                                           "-y/-x, -p/-q, -u/-v, -l/-j); dX of one image is 784 bytes (196 elements: "
                                           "C*Hi*Wi, from -c, -H/-W)")
    assert "past 783 bytes" in v.reasons[0].message and "which no split along N helps" in v.reasons[0].message
    # W does not shrink with N: 16*16*3*3*4 = 9216 bytes (an image is 16*2*2*4 = 256)
    monkeypatch.setattr(ap, "TENSOR_BYTES_LIMIT", 9000)
    v = SOLVER.is_applicable(_p(f"conv -n 4 -c 16 -H 2 -W 2 -k 16 -y 3 -x 3 -p 1 -q 1 {NHWC}"), get_target("gfx942"))
    assert v.codes == ("INDEX_OVERFLOW",) and v.reasons[0].message.startswith(
        "W is 9216 bytes (2304 elements: K*(C/G)*Y*X, from -k, -c, -g, -y/-x): past 9000 bytes, the limit")


@pytest.mark.parametrize("n,limit,refused", [(65537, 2, True), (65536, 2, False), (2 * 65537, 4, True),
                                             (131072, 4, False), (2**31 - 1, 2, True)])
def test_plans_of_more_launches_than_the_cap_are_refused_up_front(monkeypatch, n, limit, refused):
    """Equal chunks must divide N: where every divisor of N that fits a launch is small (a
    prime N, one image a launch) the plan would take up to N launches and as many plan
    entries (N = 2^30 + 3 of 1x1 images grew the driver past 24 GB). Past
    MAX_SPLIT_LAUNCHES it is INDEX_OVERFLOW, decided in time and memory independent of N's
    size; at the cap it runs. One or two 2-byte images fit a launch here."""
    monkeypatch.setattr(ap, "TENSOR_BYTES_LIMIT", limit)
    p = ConvProblem(N=n, C=1, Hi=1, Wi=1, K=1, Y=1, X=1, dtype="fp16",
                    in_layout="NHWC", out_layout="NHWC", fil_layout="NHWC")
    v = SOLVER.is_applicable(p, get_target("sm_90"))
    if refused:
        assert v.codes == ("INDEX_OVERFLOW",)
        assert v.reasons[0].message.startswith(f"the split along N would take {n // ap.chunk_images(p)} launches")
        assert f"allowed: at most {ap.MAX_SPLIT_LAUNCHES} launches" in v.reasons[0].message
    else:
        assert v.ok and SOLVER.find_solution(p, get_target("sm_90")).n_chunks == n // ap.chunk_images(p) <= 65536


def test_a_real_single_image_past_2gib():
    # 1 x 1 x 32768 x 16384 fp32 = 2^31 bytes in one image
    v = SOLVER.is_applicable(_p(f"conv -n 3 -c 1 -H 32768 -W 16384 -k 1 -y 1 -x 1 {NHWC}"), get_target("sm_90"))
    assert v.codes == ("INDEX_OVERFLOW",) and "dX of one image is 2147483648 bytes" in v.reasons[0].message


def test_the_plan_travels_in_the_record(monkeypatch):
    monkeypatch.setattr(ap, "TENSOR_BYTES_LIMIT", 2 * IMG)
    sol = SOLVER.find_solution(_p(SMALL), get_target("gfx942"))
    back = Solution.from_record(sol.to_record())
    assert back.chunks == sol.chunks == ((0, 2), (2, 2), (4, 2)) and back.problem == sol.problem
    assert back.kernels[0].source.text == sol.kernels[0].source.text
    assert sol.as_dict()["split_n"] == {"images": 6, "images_per_launch": 2, "launches": 3}
    monkeypatch.setattr(ap, "TENSOR_BYTES_LIMIT", 2**31 - 1)     # the worker decides nothing
    assert Solution.from_record(sol.to_record()).n_chunks == 3


# ------------------------------------------------------------------ the CPU engine
CPU_CASES = [
    ("sm_90", SMALL, None),
    ("gfx942", SMALL, None),
    ("gfx942", SMALL, "64,64,16,2,2,32,32,0,0,0,2,-1,2"),          # split-K: memset per launch
    ("sm_90", f"convfp16 -n 6 -c 8 -H 5 -W 5 -k 8 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 -g 8 {NHWC}", None),  # direct
    ("gfx942", f"convbfp16 -n 6 -c 8 -H 5 -W 5 -k 8 -y 1 -x 1 -u 2 -v 2 {NHWC}", None),   # zero-fill blocks
    ("sm_90", f"convfp16 -n 6 -c 64 -H 12 -W 12 -k 64 -y 3 -x 3 -p 1 -q 1 -g 8 {NHWC}", None),  # group pack (default)
]


@pytest.mark.parametrize("arch,line,cfg", CPU_CASES)
def test_cpu_engine_runs_three_chunks_and_verifies(monkeypatch, arch, line, cfg):
    p = _p(line)
    dy, w = _inputs(p)
    whole = CpuEngine(get_target(arch)).run(SOLVER.find_solution(p, get_target(arch), perf_config=cfg), dy, w)
    per_image = max(p.dy_elems, p.dx_elems) // p.N * p.elem_bytes
    monkeypatch.setattr(ap, "TENSOR_BYTES_LIMIT", 2 * per_image)
    sol = SOLVER.find_solution(p, get_target(arch), perf_config=cfg)
    assert sol.n_chunks == 3 and sol.spec.problem.N == 2
    assert sol.schedule.group_pack is ("-c 64" in line)
    dx = CpuEngine(get_target(arch)).run(sol, dy, w)
    v = verify(p, dx, dgrad_reference(p, dy, w))
    assert v.ok and v.nonfinite == 0, v
    # The same sums image by image, up to the order in which the CPU engine's BLAS adds the fp32
    # products: its blocking follows the GEMM's size (a chunk of 2 images or the whole 6), so a
    # sum near a rounding boundary may land one storage ulp away (2 of 55296 elements with
    # OpenBLAS 0.3.31 on the group-pack line); nothing further.
    ulp = np.spacing(np.abs(whole).astype(whole.dtype)).astype(np.float64)
    assert np.all(np.abs(dx.astype(np.float64) - whole.astype(np.float64)) <= ulp)


# ------------------------------------------------------------------ the GPU engine's launches
def _forced(monkeypatch, line, arch="sm_90", cfg=None, chunks=3):
    p = _p(line)
    per_image = max(p.dy_elems, p.dx_elems) // p.N * p.elem_bytes
    monkeypatch.setattr(ap, "TENSOR_BYTES_LIMIT", (p.N // chunks) * per_image)
    sol = SOLVER.find_solution(p, get_target(arch), perf_config=cfg)
    assert sol.n_chunks == chunks
    return p, sol


@pytest.mark.parametrize("cfg", [None, "64,64,16,2,2,32,32,0,0,0,2,-1,2"])
def test_gpu_engine_launches_each_chunk_at_its_offset(monkeypatch, tmp_path, cfg):
    p, sol = _forced(monkeypatch, SMALL, cfg=cfg)
    rt = ComputingRuntime(sol)
    dy, w = _inputs(p)
    dx = GpuEngine(rt, BinaryCache(tmp_path)).run(sol, dy, w)
    allocs = [c[1] for c in rt.calls if c[0] == "alloc"]
    assert [c[2] for c in rt.calls if c[0] == "alloc"] == [6 * IMG, w.nbytes, 6 * IMG]   # whole buffers
    launches = [c for c in rt.calls if c[0] == "launch"]
    assert [c[5] for c in launches] == [(allocs[0] + n0 * IMG, allocs[1], allocs[2] + n0 * IMG) for n0 in (0, 2, 4)]
    assert all(c[2] == sol.spec.grid and c[3] == sol.spec.block for c in launches)
    if cfg:                                   # split-K: each launch's own 2 images zeroed just before it
        for c in launches:
            i = rt.calls.index(c)
            assert rt.calls[i - 1] == ("memset", c[5][2], 0, 2 * IMG)
    assert verify(p, dx, dgrad_reference(p, dy, w)).ok
    assert rt.mem == {}


def test_gpu_engine_times_and_graphs_every_chunk(monkeypatch, tmp_path):
    p, sol = _forced(monkeypatch, SMALL)
    dy, w = _inputs(p)
    rt = FakeRuntime()
    eng = GpuEngine(rt, BinaryCache(tmp_path))
    t = eng.time(sol, dy, w, iters=2, warmup=1)
    assert len(t.times_ms) == 2
    kinds = [c[0] for c in rt.calls]
    assert kinds.count("launch") == 3 * 3                              # (warm-up + 2) runs x 3 chunks
    # the events bracket whole runs: 3 launches between consecutive records
    rec = [i for i, k in enumerate(kinds) if k == "record"]
    assert len(rec) == 3 and all(kinds[a:b].count("launch") == 3 for a, b in zip(rec, rec[1:]))
    rt.calls.clear()
    captured = []
    rt.capture = lambda body: (captured.append(len([c for c in rt.calls if c[0] == "launch"])), body(),
                               captured.append(len([c for c in rt.calls if c[0] == "launch"])))[0] or "graph"
    t = eng.time_graph(sol, dy, w, launches=4, replays=2)
    assert captured == [3, 3 + 4 * 3]                                  # one graph holds all 4 x 3 launches
    assert t.times_ms == [0.5, 0.5]                                    # 2 ms per replay / 4 runs


class ComputingTmaRuntime(ComputingRuntime):
    def tensor_map(self, ptr, desc):
        self.calls.append(("tensor_map", ptr, desc.operand, desc.box))
        return (f"{desc.operand}@{ptr:#x}".encode()).ljust(128, b"\0")


def test_tma_maps_are_built_per_chunk_over_the_offset_pointers(monkeypatch, tmp_path):
    line = f"convfp16 -n 6 -c 256 -H 9 -W 9 -k 128 -y 1 -x 1 {NHWC}"
    p, sol = _forced(monkeypatch, line, cfg="128,256,64,2,1,64,256,0,0,0,1,-1,4,3")
    rt = ComputingTmaRuntime(sol)
    dy, w = _inputs(p)
    dx = GpuEngine(rt, BinaryCache(tmp_path)).run(sol, dy, w)
    a_dy, a_w, a_dx = [c[1] for c in rt.calls if c[0] == "alloc"]
    dy_img, dx_img = 9 * 9 * 128 * 2, 9 * 9 * 256 * 2
    maps = [(c[1], c[2]) for c in rt.calls if c[0] == "tensor_map"]
    assert maps == [x for n0 in (0, 2, 4) for x in ((a_dy + n0 * dy_img, "dy"), (a_w, "w"))]
    launches = [c[5] for c in rt.calls if c[0] == "launch"]
    assert [args[:3] for args in launches] == [(a_dy + n0 * dy_img, a_w, a_dx + n0 * dx_img) for n0 in (0, 2, 4)]
    assert all(args[3].startswith(f"dy@{args[0]:#x}".encode()) for args in launches)
    assert verify(p, dx, dgrad_reference(p, dy, w)).ok


def test_the_reference_kernel_is_one_launch_over_the_whole_batch(monkeypatch, tmp_path):
    """The naive GPU reference uses 64-bit offsets: no chunks."""
    p, sol = _forced(monkeypatch, SMALL)
    rt = FakeRuntime()
    GpuEngine(rt, BinaryCache(tmp_path)).reference(sol.problem, *_inputs(p))
    launches = [c for c in rt.calls if c[0] == "launch"]
    assert len(launches) == 1 and launches[0][2] == (-(-p.dx_elems // 256), 1, 1)


# ------------------------------------------------------------------ workers and the driver
def test_worker_verifies_the_whole_batch(monkeypatch):
    from driver import workers
    p, sol = _forced(monkeypatch, SMALL, arch="cpu")
    state = workers._State()
    job = workers.make_job("verification", solution=sol.to_record(), backend="cpu", seed=12345678,
                           verify=True, reference="cpu")
    rec = workers._do_verification(job, state)
    assert rec["verdict"]["ok"] and rec["verdict"]["nonfinite"] == 0


def test_a_run_prints_the_split_and_verifies(monkeypatch):
    from driver import run_cmd
    monkeypatch.setattr(ap, "TENSOR_BYTES_LIMIT", 2 * IMG)
    status, lines = run_cmd.run_line(f"{SMALL} -t 1 -i 2 -V 1".split(), backend="cpu")
    assert status == 0
    assert "Split-N: N=6 runs as 3 launches of 2 images (dY 1568 and dX 1568 bytes each, within 32-bit " \
           "offsets), one kernel, pointers offset per launch" in lines
    assert lines[-1].startswith("Backward Convolution Data Verifies OK on CPU reference")


# ------------------------------------------------------------------ host memory
def test_the_memory_estimate_still_refuses_what_the_host_cannot_hold():
    """The issue's line on a GPU: the timing worker's peak is the PRNG generating dY, 12 bytes
    x 2^32 elements = 48 GiB, plus the process's 128 MiB; a 40 GiB host refuses it, a 64 GiB
    one takes it."""
    p = _p(f"convfp16 -n 128 -c 512 -H 256 -W 256 -k 512 -y 1 -x 1 {NHWC}")
    sol = SOLVER.find_solution(p, get_target("sm_90"))
    plan = memory.engine_plan(sol.spec)
    total, needs = memory.one_after_another(memory.run_needs(sol.problem, plan, "cuda", time=True, verify=True,
                                                             reference_kind="gpu"))
    assert total == 12 * 2**32 + memory.PROCESS_BYTES
    small = memory.HostMemory(available=40 << 30, source="MemAvailable", address_space=None, baseline=0)
    why = memory.shortfall(small, total, needs)
    assert why.startswith("host memory: needs 48.12 GiB") and "40.00 GiB available" in why
    assert memory.shortfall(memory.HostMemory(64 << 30, "MemAvailable", None, 0), total, needs) is None
    # the device holds the whole tensors: dY + W + float32 GPU reference
    assert max(n.device for n in needs) == memory.device_bytes(2**33, 512 * 512 * 2, 4 * 2**32)


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 5000), st.integers(1, 5000))
def test_largest_divisor_at_most_is_the_enumerated_one(n, most):
    """The split-N chunk size: the largest divisor of N that is at most the images one
    launch holds, against enumerating every divisor; on both sides of most = sqrt(n)."""
    from miopen_solver.applicability import _largest_divisor_at_most
    assert _largest_divisor_at_most(n, most) == max(d for d in range(1, min(n, most) + 1) if n % d == 0)


def test_a_huge_prime_batch_is_split_in_bounded_work():
    """N = 2^31 - 1 (a Mersenne prime, the largest N a problem holds: 2^61 - 1 is refused by
    ConvProblem, as MIOpenDriver's int would) through the API: the chunk plan is one image per
    launch, found in O(sqrt(N)) divisor pairs, and the plan's launches pass the cap; the
    count-down from the images a launch holds stays bounded for larger n too (trial division
    up to sqrt(2^61) hung)."""
    from miopen_solver.applicability import _largest_divisor_at_most, chunk_images, images_per_launch
    with pytest.raises(ValueError, match="N 2305843009213693951 is outside a 32-bit int"):
        ConvProblem(N=2**61 - 1, C=8, Hi=8, Wi=8, K=8, Y=3, X=3, pH=1, pW=1)
    p = ConvProblem(N=2**31 - 1, C=8, Hi=8, Wi=8, K=8, Y=3, X=3, pH=1, pW=1, in_layout="NHWC", out_layout="NHWC",
                    fil_layout="NHWC")
    most = images_per_launch(p)
    assert 1 < most < 2**31 and chunk_images(p) == 1
    assert SOLVER.is_applicable(p, get_target("sm_90")).codes == ("INDEX_OVERFLOW",)
    n = 2**61 - 2                                   # composite: the count-down finds its divisor
    assert _largest_divisor_at_most(n, 100) == max(d for d in range(1, 101) if n % d == 0)
