"""The real GEMM kernel (``dgrad.cu``, both vendor flavours) executed on the CPU by the
emulator of ``tests/kernel_emu.py``, through the GPU engine's whole launch plan (poisoned
dX, split-K memsets, split-N chunks, the layout transposes' own kernel), against the
float64 reference.

CI has no GPU: these tests are where the kernel's own indexing, staging, zero fill,
split-K atomics and epilogues (NHWC, NCHW dX, patch scatter, NCHW pointwise) run on every
commit, for the AMD MFMA and FFMA schedules and the NVIDIA mma.sync, warpgroup-MMA,
persistent and TMA warp-specialised ones.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kernel_emu
from miopen_solver import applicability as ap
from miopen_solver import layouts
from miopen_solver.command import parse
from miopen_solver.config import KernelSchedule
from miopen_solver.reference import dgrad_reference, verify
from miopen_solver.runtime.cache import BinaryCache
from miopen_solver.runtime.gpu import GpuEngine
from miopen_solver.solver import DgradSolver
from miopen_solver.target import get_target

from test_split_n import ComputingRuntime

pytestmark = pytest.mark.skipif(not kernel_emu.available(), reason="clang++ not on PATH")

SOLVER = DgradSolver()
NHWC = "-F 2 --in_layout NHWC --out_layout NHWC --fil_layout NHWC"


class EmuRuntime(ComputingRuntime):
    """A device of the solution's target whose launches -- the dgrad kernel and the layout
    transposes -- run the emitted kernel texts on the emulator, over the bytes at the
    launch's pointers; ``mangle`` edits the dgrad kernel's text first (to show a wrong
    kernel fails)."""

    def __init__(self, sol, work, mangle=None, **kw):
        super().__init__(sol, **kw)
        self.vendor = sol.spec.target.vendor
        self.name = "hip" if self.vendor == "amd" else "cuda"
        self.work = work
        self.mangle = mangle
        self.emulated = 0
        self.transposed = 0
        self.reduced = 0

    def target(self):
        return self.sol.spec.target

    def tensor_map(self, ptr, desc):
        return ("tensor_map", ptr, desc)

    def launch(self, func, grid, block, shared, args):
        src = self.sol.spec.emit()
        self.calls.append(("launch", func[1], tuple(grid), tuple(block), shared, tuple(args)))
        if func[1].startswith("dgrad_subpixel_pack_"):  # the sub-pixel W' pack: (w, w')
            launch, tgt = self.sol.transform_launches[self.transposed], self.sol.spec.target
            assert (func[1], tuple(grid), tuple(block)) == (launch.kernel_name, launch.grid, launch.block)
            (sbuf, soff), (dbuf, doff) = self._at(args[0]), self._at(args[1])
            dbuf[doff:] = kernel_emu.launch_pack(launch.emit(tgt.vendor, tgt.arch).text, grid, block,
                                                 bytes(sbuf[soff:]), bytes(dbuf[doff:]), self.work)
            self.transposed += 1
            return
        if func[1].startswith("dgrad_transpose_"):     # the transform launches, in the engine's order
            launch, tgt = self.sol.transform_launches[self.transposed], self.sol.spec.target
            assert (func[1], tuple(grid), tuple(block)) == (launch.kernel_name, launch.grid, launch.block)
            text = launch.emit(tgt.vendor, tgt.arch).text
            if launch.form == "pair":              # (src, dst, batch, rows, cols, gx, gy, form) x 2
                (s0, o0), (d0, p0) = self._at(args[0]), self._at(args[1])
                (s1, o1), (d1, p1) = self._at(args[8]), self._at(args[9])
                assert d0 is d1, "both of a pair's outputs are in the workspace"
                jobs = [(p0, *args[2:8]), (p1, *args[10:16])]
                d0[:] = kernel_emu.launch_transpose_pair(text, grid, block, bytes(s0[o0:]), bytes(s1[o1:]),
                                                         bytes(d0), jobs, self.work)
            else:                                  # (src, dst, batch, rows, cols)
                t = launch.transforms[0]
                assert tuple(args[2:]) == (t.batch, t.rows, t.cols)
                (sbuf, soff), (dbuf, doff) = self._at(args[0]), self._at(args[1])
                dbuf[doff:] = kernel_emu.launch_transpose(text, grid, block, bytes(sbuf[soff:]), bytes(dbuf[doff:]),
                                                          *args[2:], self.work, t.kernel_form)
            self.transposed += 1
            return
        if func[1].startswith("dgrad_splitk_reduce_"):   # (ws, dx, sizes...): its own kernel text
            t, red = self.sol.spec.target, self.sol.reduce
            text = red.emit(t.vendor, t.arch).text
            assert func[1] == red.kernel_name and tuple(grid) == red.grid and tuple(block) == red.block
            (wbuf, woff), (dbuf, doff) = self._at(args[0]), self._at(args[1])
            dbuf[doff:] = kernel_emu.launch_reduce(text, grid, block, bytes(wbuf[woff:]), bytes(dbuf[doff:]),
                                                   args[2:], self.work)
            self.reduced += 1
            return
        assert func[1] == src.name, func
        assert tuple(block) == tuple(src.block) and shared == src.shared_bytes
        text = self.mangle(src.text) if self.mangle else src.text
        bufs = [self._at(a) for a in args[:3]]
        if src.workspace_arg:      # stream-K: the harness keeps its own cleared workspace
            ws, off = self._at(args[3])
            assert len(ws) - off >= src.workspace_arg and off == self.sol.kernel_workspace_offset
            args = args[:3] + args[4:]
        maps = [m[2] for m in args[3:]]
        assert [m[1] for m in args[3:]] == [args[0 if d.operand == "dy" else 1] for d in maps]
        out = kernel_emu.launch_gemm(text, grid, block[0], *(bytes(b[o:]) for b, o in bufs), self.work, maps)
        buf, off = bufs[2]
        buf[off:] = out
        self.emulated += 1


def _inputs(p, rng):
    st_ = layouts.storage_dtype(p.dtype)
    return (rng.uniform(-1, 1, layouts.dy_shape(p)).astype(st_), rng.uniform(-1, 1, layouts.w_shape(p)).astype(st_))


def run_emulated(p, arch, tmp_path, perf_config=None, mangle=None, seed=None, target=None):
    """(Solution, verdict) of one emulated run of ``p`` on ``arch`` (or ``target``) with fresh
    inputs."""
    sol = SOLVER.find_solution(p, target or get_target(arch), perf_config=perf_config)
    rt = EmuRuntime(sol, tmp_path / "emu", mangle=mangle)
    dy, w = _inputs(p, np.random.default_rng(seed))
    dx = GpuEngine(rt, BinaryCache(tmp_path / "cache")).run(sol, dy, w)
    assert rt.emulated == sol.n_chunks, "every chunk's launch ran on the emulator"
    assert rt.transposed == len(sol.transform_launches)
    assert rt.reduced == (sol.n_chunks if sol.reduce is not None else 0), "every chunk's split-K reduction ran"
    return sol, verify(p, dx, dgrad_reference(p, dy, w))


CASES = [
    # (line, arch, perf config or None, schedule expected)
    (f"convfp16 -n 2 -c 16 -H 6 -W 6 -k 16 -y 3 -x 3 -p 1 -q 1 {NHWC}", "gfx942", None, "warp-mma"),
    (f"convbfp16 -n 2 -c 40 -H 5 -W 5 -k 64 -y 1 -x 1 {NHWC}", "gfx942", None, "warp-mma"),
    (f"conv -n 2 -c 12 -H 7 -W 6 -k 20 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 {NHWC}", "gfx90a", None, "warp-mma"),
    (f"convfp16 -n 2 -c 64 -H 6 -W 5 -k 64 -y 3 -x 3 -p 1 -q 1 {NHWC}", "gfx90a", None, "warp-mma"),
    # 1x1 stride 2: a zero-fill pass over the pixels no sub-GEMM writes
    (f"convfp16 -n 2 -c 16 -H 7 -W 8 -k 16 -y 1 -x 1 -u 2 -v 2 {NHWC}", "gfx942", None, "warp-mma"),
    # dilation and stride sharing a factor (gcd > 1: uncovered rows), odd cpg (scalar vectors)
    (f"convbfp16 -n 1 -c 9 -H 9 -W 8 -k 10 -y 3 -x 2 -p 2 -q 1 -u 2 -v 2 -l 2 -j 2 {NHWC}", "gfx942", None,
     "warp-mma"),
    # grouped, m-outer B and a single stage
    (f"convfp16 -n 2 -c 32 -H 5 -W 5 -k 48 -y 3 -x 3 -p 1 -q 1 -g 2 {NHWC}", "gfx942",
     "64,16,32,2,1,32,16,0,0,0,1,0,1", "warp-mma"),
    # split-K: fp32 scalar atomics, fp16 packed-pair atomics (dX zeroed first)
    (f"conv -n 1 -c 8 -H 5 -W 5 -k 64 -y 3 -x 3 -p 1 -q 1 {NHWC}", "gfx942", "64,16,16,2,1,32,16,0,0,0,4,-1,2",
     "warp-mma"),
    (f"convfp16 -n 1 -c 16 -H 5 -W 4 -k 96 -y 3 -x 3 -p 1 -q 1 {NHWC}", "gfx90a", "64,16,32,2,1,32,16,0,0,0,3,-1,2",
     "warp-mma"),
    # dX stored NCHW by the epilogue (dY through a transform), with split-K adding pairs
    ("convfp16 -n 2 -c 24 -H 5 -W 6 -k 32 -y 1 -x 1 -F 2", "gfx942", None, "warp-mma"),
    ("convfp16 -n 2 -c 16 -H 6 -W 5 -k 64 -y 3 -x 3 -p 1 -q 1 -F 2", "gfx942", "64,16,32,2,1,32,16,0,0,0,2,-1,2",
     "warp-mma"),
    # NCHW dX in runs of pixels (spec.nchw_dx_vector): 8 fp16 along Wi = 16; 4 fp32; sub-GEMMs
    # of stride 2 along H; dilation with stride (uncovered columns: element stores)
    ("convfp16 -n 2 -c 16 -H 4 -W 16 -k 16 -y 3 -x 3 -p 1 -q 1 -F 2", "gfx942", None, "warp-mma"),
    ("conv -n 1 -c 8 -H 5 -W 12 -k 8 -y 3 -x 3 -p 0 -q 2 -F 2", "gfx90a", None, "warp-mma"),
    ("convbfp16 -n 2 -c 8 -H 6 -W 8 -k 8 -y 3 -x 3 -p 1 -q 1 -u 2 -v 1 -F 2", "gfx942", None, "warp-mma"),
    ("convfp16 -n 1 -c 8 -H 8 -W 8 -k 8 -y 3 -x 3 -p 2 -q 2 -u 2 -v 2 -l 2 -j 2 -F 2", "gfx942", None, "warp-mma"),
    # NVIDIA: mma.sync with ldmatrix (k-outer B: .trans; m-outer), cp.async stages
    (f"convfp16 -n 2 -c 16 -H 6 -W 6 -k 32 -y 3 -x 3 -p 1 -q 1 {NHWC}", "sm_80", "64,16,32,2,1,32,16,0,0,0,1,-1,2",
     "warp-mma"),
    (f"convfp16 -n 2 -c 24 -H 6 -W 6 -k 32 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 {NHWC}", "sm_80",
     "64,32,32,2,2,32,16,0,0,0,1,0,3", "warp-mma"),
    (f"convbfp16 -n 1 -c 18 -H 5 -W 7 -k 24 -y 2 -x 3 -p 1 -q 1 -l 2 -j 1 {NHWC}", "sm_80", None, "warp-mma"),
    (f"conv -n 2 -c 12 -H 7 -W 6 -k 20 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 {NHWC}", "sm_90", None, "warp-mma"),
    # NVIDIA warpgroup MMA (128-byte swizzled operands): plain, persistent, strided, split-K
    (f"convfp16 -n 2 -c 64 -H 6 -W 6 -k 64 -y 3 -x 3 -p 1 -q 1 {NHWC}", "sm_90",
     "128,64,64,2,1,64,64,0,0,0,1,-1,4,1", "wgmma"),
    (f"convbfp16 -n 2 -c 128 -H 4 -W 8 -k 64 -y 1 -x 1 {NHWC}", "sm_90", "128,128,64,1,1,128,128,0,0,0,1,-1,3,2",
     "wgmma-persistent"),
    (f"convfp16 -n 2 -c 64 -H 6 -W 6 -k 64 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 {NHWC}", "sm_90",
     "128,128,64,1,1,128,128,0,0,0,1,-1,3,1", "wgmma"),
    (f"convfp16 -n 1 -c 64 -H 5 -W 4 -k 128 -y 3 -x 3 -p 1 -q 1 {NHWC}", "sm_90",
     "128,64,64,2,1,64,64,0,0,0,2,-1,4,1", "wgmma"),
    (f"convbfp16 -n 1 -c 256 -H 2 -W 3 -k 64 -y 1 -x 1 {NHWC}", "sm_90", "128,256,64,2,1,64,256,0,0,0,1,-1,3,1",
     "wgmma"),
    ("convfp16 -n 2 -c 64 -H 6 -W 8 -k 64 -y 3 -x 3 -p 1 -q 1 -F 2", "sm_90", "128,64,64,2,1,64,64,0,0,0,1,-1,4,1",
     "wgmma"),
    (f"convfp16 -n 2 -c 16 -H 8 -W 8 -k 64 -y 4 -x 4 -u 4 -v 4 {NHWC}", "sm_90",
     "128,128,64,2,1,64,128,0,0,0,1,-1,4,6", "patch-gemm-wgmma"),
    ("convfp16 -n 2 -c 64 -H 4 -W 8 -k 64 -y 1 -x 1 -F 2", "sm_90", "128,128,64,2,1,64,128,0,0,0,1,-1,4,8",
     "nchw-pointwise-wgmma"),
    # the patch GEMM on the persistent and TMA main loops (ViT-like 16x16/s16 stem, grouped
    # 2x2/s2 merge, a 2x2/s2 merge whose H is not a multiple of the stride)
    (f"convfp16 -n 2 -c 3 -H 32 -W 32 -k 64 -y 16 -x 16 -u 16 -v 16 {NHWC}", "sm_90",
     "128,128,64,2,1,64,128,0,0,0,1,-1,3,9", "patch-gemm-persistent"),
    (f"convfp16 -n 2 -c 3 -H 32 -W 32 -k 64 -y 16 -x 16 -u 16 -v 16 {NHWC}", "sm_90",
     "128,128,64,2,1,64,128,0,0,0,1,-1,4,10", "patch-gemm-tma"),
    (f"convfp16 -n 2 -c 64 -H 8 -W 8 -k 128 -y 2 -x 2 -u 2 -v 2 -g 2 {NHWC}", "sm_90",
     "128,64,64,2,1,64,64,0,0,0,1,-1,3,9", "patch-gemm-persistent"),
    (f"convbfp16 -n 2 -c 16 -H 11 -W 8 -k 64 -y 2 -x 2 -u 2 -v 2 {NHWC}", "sm_90",
     "128,64,64,2,1,64,64,0,0,0,1,-1,4,10", "patch-gemm-tma"),
    # NVIDIA TMA warp-specialised (producer warp, mbarriers, 2-D and 4-D boxes, zeros outside)
    (f"convfp16 -n 2 -c 64 -H 4 -W 8 -k 64 -y 1 -x 1 {NHWC}", "sm_90", "128,64,64,2,1,64,64,0,0,0,1,-1,4,3",
     "wgmma-tma"),
    (f"convfp16 -n 2 -c 128 -H 8 -W 16 -k 64 -y 3 -x 3 -p 1 -q 1 {NHWC}", "sm_90",
     "128,128,64,1,1,128,128,0,0,0,1,-1,4,3", "wgmma-tma"),
    (f"convbfp16 -n 2 -c 128 -H 9 -W 14 -k 64 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 {NHWC}", "sm_90",
     "256,128,64,2,1,128,128,0,0,0,1,-1,4,3", "wgmma-tma"),
    (f"convfp16 -n 2 -c 128 -H 8 -W 8 -k 64 -y 3 -x 3 -p 2 -q 2 -l 2 -j 2 {NHWC}", "sm_90",
     "128,128,64,1,1,128,128,0,0,0,1,-1,4,3", "wgmma-tma"),
    ("convfp16 -n 1 -c 128 -H 6 -W 10 -k 128 -y 3 -x 3 -p 1 -q 1 -g 2 -F 2", "sm_90",
     "128,64,64,1,1,128,64,0,0,0,1,-1,4,3", "wgmma-tma"),
    # the patch GEMM (stride = filter), H not a multiple of the stride (memset tail)
    (f"convfp16 -n 2 -c 16 -H 8 -W 8 -k 32 -y 4 -x 4 -u 4 -v 4 {NHWC}", "gfx942", None, "patch-gemm"),
    (f"convbfp16 -n 1 -c 3 -H 10 -W 8 -k 32 -y 4 -x 4 -u 4 -v 4 {NHWC}", "gfx90a", None, "patch-gemm"),
    # split-K through the fp32 workspace (_skws: plain stores into the slices, then the
    # reduction kernel): odd cpg (fp16, no packed atomic), bf16 on gfx90a/sm_80, fp32 FFMA,
    # zeros by the reduction (1x1 stride 2), NCHW dX stored by the reduction (Hi*Wi odd),
    # warpgroup MMA with paired fp32 stores
    (f"convfp16 -n 2 -c 15 -H 5 -W 5 -k 64 -y 3 -x 3 -p 1 -q 1 {NHWC}", "gfx942", "64,16,32,2,1,32,16,0,0,0,3,-1,2",
     "warp-mma"),
    (f"convbfp16 -n 1 -c 16 -H 7 -W 5 -k 64 -y 1 -x 1 -u 2 -v 2 {NHWC}", "gfx90a",
     "64,16,16,2,1,32,16,0,0,0,2,-1,2", "warp-mma"),
    ("conv -n 2 -c 9 -H 5 -W 7 -k 48 -y 3 -x 3 -p 1 -q 1 -F 2", "gfx942", "64,16,16,2,1,32,16,0,0,0,4,-1,2,0,2",
     "warp-mma"),
    (f"convfp16 -n 2 -c 17 -H 6 -W 5 -k 64 -y 3 -x 3 -p 1 -q 1 {NHWC}", "sm_80", "64,32,32,2,2,32,16,0,0,0,2,-1,3",
     "warp-mma"),
    ("convbfp16 -n 2 -c 16 -H 5 -W 5 -k 64 -y 3 -x 3 -p 1 -q 1 -F 2", "sm_80", "64,16,32,2,1,32,16,0,0,0,3,0,2",
     "warp-mma"),
    (f"convfp16 -n 1 -c 64 -H 5 -W 4 -k 256 -y 3 -x 3 -p 1 -q 1 {NHWC}", "sm_90",
     "128,64,64,2,1,64,64,0,0,0,3,-1,4,1,2", "wgmma"),
    (f"conv -n 2 -c 16 -H 5 -W 6 -k 48 -y 3 -x 3 -p 1 -q 1 -M 0 {NHWC}", "sm_80",
     "64,16,16,2,1,32,16,0,0,0,3,-1,2,0,2", "warp-mma"),                   # TF32 atom, fp32 pairs
    # split-K on the TMA schedule (work units of one k-slice): packed atomics into dX (uneven
    # slices: 4 k-tiles in 3), the workspace with a filter, 4 strided sub-GEMMs of different
    # K with memset zeros, an NCHW dX with groups (element adds)
    (f"convfp16 -n 2 -c 64 -H 4 -W 8 -k 256 -y 1 -x 1 {NHWC}", "sm_90", "128,64,64,2,1,64,64,0,0,0,3,-1,4,3",
     "wgmma-tma"),
    (f"convfp16 -n 2 -c 128 -H 8 -W 16 -k 64 -y 3 -x 3 -p 1 -q 1 {NHWC}", "sm_90",
     "128,128,64,1,1,128,128,0,0,0,2,-1,4,3,2", "wgmma-tma"),
    (f"convbfp16 -n 2 -c 128 -H 9 -W 14 -k 192 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 {NHWC}", "sm_90",
     "256,128,64,2,1,128,128,0,0,0,2,-1,4,3", "wgmma-tma"),
    ("convfp16 -n 1 -c 128 -H 6 -W 10 -k 128 -y 3 -x 3 -p 1 -q 1 -g 2 -F 2", "sm_90",
     "128,64,64,1,1,128,64,0,0,0,4,-1,4,3", "wgmma-tma"),
    # the sub-pixel GEMM (every stride phase as channels of one stride-1 GEMM, W' packed first):
    # 3x3/s2 on the three main loops, odd H (clipped last phase), a 3x3/s2 pad-0 filter, 5x5/s2
    # grouped, stride 3 with uncovered rows (memset), AMD MFMA
    (f"convfp16 -n 2 -c 32 -H 10 -W 12 -k 64 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 {NHWC}", "sm_90",
     "128,128,64,2,1,64,128,0,0,0,1,-1,4,17", "subpixel-tma"),
    (f"convbfp16 -n 2 -c 16 -H 9 -W 11 -k 64 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 {NHWC}", "sm_90",
     "128,64,64,2,1,64,64,0,0,0,1,-1,4,17", "subpixel-tma"),
    (f"convfp16 -n 2 -c 32 -H 9 -W 9 -k 64 -y 3 -x 3 -u 2 -v 2 {NHWC}", "sm_90",
     "128,128,64,2,1,64,128,0,0,0,1,-1,4,16", "subpixel-wgmma"),
    (f"convfp16 -n 1 -c 32 -H 10 -W 10 -k 64 -y 5 -x 5 -p 2 -q 2 -u 2 -v 2 -g 2 {NHWC}", "sm_80",
     "64,64,32,2,2,32,32,0,0,0,1,-1,3,15", "subpixel"),
    (f"conv -n 2 -c 8 -H 10 -W 7 -k 16 -y 3 -x 3 -p 1 -u 3 -v 2 {NHWC}", "gfx942",
     "64,32,16,2,1,32,32,0,0,0,1,-1,2,15", "subpixel"),
    # NCHW pointwise: per-image GEMMs reading dY and writing dX NCHW in place
    ("convfp16 -n 2 -c 24 -H 4 -W 4 -k 32 -y 1 -x 1 -F 2", "gfx942", "64,32,32,2,1,32,32,0,0,0,1,-1,2,7",
     "nchw-pointwise"),
    ("conv -n 2 -c 16 -H 3 -W 4 -k 24 -y 1 -x 1 -g 2 -F 2", "gfx90a", "32,16,16,1,1,32,16,0,0,0,1,-1,2,7",
     "nchw-pointwise"),
    # ... and patch filters (stride = filter): W^T rows (c, y, x) scattered into the patches,
    # runs of 4/2/1 x (16-byte, 4-byte, scalar stores), 1xX (wav2vec2), groups, warpgroup MMA
    ("convfp16 -n 2 -c 3 -H 8 -W 12 -k 32 -y 4 -x 4 -u 4 -v 4 -F 2", "sm_90", "64,64,64,1,1,64,64,0,0,0,1,-1,3,8",
     "nchw-pointwise-wgmma"),
    ("convbfp16 -n 2 -c 8 -H 6 -W 10 -k 16 -y 2 -x 2 -u 2 -v 2 -g 2 -F 2", "sm_80",
     "64,32,32,2,1,32,32,0,0,0,1,-1,3,7", "nchw-pointwise"),
    ("conv -n 2 -c 5 -H 1 -W 12 -k 24 -y 1 -x 2 -u 1 -v 2 -F 2", "gfx942", "32,16,16,1,1,32,16,0,0,0,1,-1,2,7",
     "nchw-pointwise"),
    ("convfp16 -n 1 -c 2 -H 9 -W 6 -k 16 -y 3 -x 3 -u 3 -v 3 -F 2", "sm_90", "64,64,64,1,1,64,64,0,0,0,1,-1,3,8",
     "nchw-pointwise-wgmma"),
    ("convfp16 -n 2 -c 2 -H 32 -W 48 -k 16 -y 16 -x 16 -u 16 -v 16 -F 2", "sm_90",
     "64,64,64,1,1,64,64,0,0,0,1,-1,3,8", "nchw-pointwise-wgmma"),
]


@pytest.mark.parametrize("line,arch,cfg,schedule", CASES, ids=[f"{i}-{c[3]}" for i, c in enumerate(CASES)])
def test_the_emulated_kernel_matches_the_reference(tmp_path, line, arch, cfg, schedule):
    p = parse(line.split()).problem
    sol, v = run_emulated(p, arch, tmp_path, perf_config=cfg)
    assert sol.spec.schedule.slug == schedule
    assert v.ok and v.nonfinite == 0, (sol.kernel_name, v)


@pytest.mark.parametrize("line,cfg", [
    ("convfp16 -n 2 -c 128 -H 8 -W 16 -k 64 -y 3 -x 3 -p 1 -q 1 -F 2", "128,128,64,1,1,128,128,0,0,0,1,-1,4,3"),
    ("convbfp16 -n 2 -c 64 -H 4 -W 8 -k 64 -y 1 -x 1 -F 2", "128,64,64,2,1,64,64,0,0,0,1,-1,4,3"),
    ("convfp16 -n 1 -c 128 -H 6 -W 10 -k 128 -y 3 -x 3 -p 1 -q 1 -g 2 -F 2", "128,64,64,1,1,128,64,0,0,0,1,-1,4,3"),
])
def test_tma_kernel_stores_nchw_dx(tmp_path, line, cfg):
    """The TMA schedule's NCHW dX epilogue: no dX transform, the kernel's stores verify."""
    p = parse(line.split()).problem
    sol, v = run_emulated(p, "sm_90", tmp_path, perf_config=cfg)
    assert sol.spec.tma and sol.spec.nchw_dx and [t.tensor for t in sol.transforms if t.tensor != "W"] == ["dY"]
    assert v.ok and v.nonfinite == 0, (sol.kernel_name, v)


@pytest.mark.parametrize("arch,line,cfg", [
    ("gfx942", f"convfp16 -n 2 -c 15 -H 5 -W 5 -k 64 -y 3 -x 3 -p 1 -q 1 {NHWC}", "64,16,32,2,1,32,16,0,0,0,3,-1,2"),
    ("sm_90", "convbfp16 -n 1 -c 64 -H 5 -W 3 -k 256 -y 3 -x 3 -p 1 -q 1 -F 2", "128,64,64,2,1,64,64,0,0,0,3,-1,4,1,2"),
])
def test_split_k_workspace_is_deterministic_and_every_split_writes_its_slice(tmp_path, arch, line, cfg):
    """Split-K through the workspace on the emulator (the host threads of a block, and the
    splits, run concurrently): two runs give the same bits; a kernel whose splits all store
    into slice 0 leaves the other slices' NaN poison, which the reduction reads."""
    p = parse(line.split()).problem
    sol = SOLVER.find_solution(p, get_target(arch), perf_config=cfg)
    assert sol.reduce is not None and sol.spec.split_k == 3 and "_skws_" in sol.kernel_name
    dy, w = _inputs(p, np.random.default_rng(3))
    outs = [GpuEngine(EmuRuntime(sol, tmp_path / "emu"), BinaryCache(tmp_path / "cache")).run(sol, dy, w)
            for _ in range(2)]
    assert np.array_equal(outs[0].view(np.uint8), outs[1].view(np.uint8))
    assert verify(p, outs[0], dgrad_reference(p, dy, w)).ok
    slice_z = "(long long)DG_BID_Z() * DG_WS_SLICE"
    _, v = run_emulated(p, arch, tmp_path, perf_config=cfg, mangle=lambda t: t.replace(slice_z, "0LL"))
    assert v.nonfinite > 0, "the reduction read every split's slice"


def test_split_n_chunks_on_the_emulator(monkeypatch, tmp_path):
    """Three launches of whole images (split-N), each the real kernel at its own offsets,
    with split-K's memset per chunk."""
    p = parse(f"conv -n 6 -c 4 -H 7 -W 7 -k 4 -y 3 -x 3 -p 1 -q 1 {NHWC}".split()).problem
    monkeypatch.setattr(ap, "TENSOR_BYTES_LIMIT", 2 * 784)
    sol, v = run_emulated(p, "gfx942", tmp_path, perf_config="64,16,16,2,1,32,16,0,0,0,2,-1,2")
    assert sol.n_chunks == 3
    assert v.ok and v.nonfinite == 0, v


def test_split_n_chunks_of_a_group_pack_on_the_emulator(monkeypatch, tmp_path):
    """Three chunks of whole images on the group-pack default (sm_90 wgmma, 8 groups of cpg 8
    as one, an NCHW dX stored by the packed kernel at each chunk's offset)."""
    p = parse("convfp16 -n 6 -c 64 -H 12 -W 12 -k 64 -y 3 -x 3 -p 1 -q 1 -g 8 -F 2".split()).problem
    monkeypatch.setattr(ap, "TENSOR_BYTES_LIMIT", 2 * max(p.dy_elems, p.dx_elems) // p.N * p.elem_bytes)
    sol, v = run_emulated(p, "sm_90", tmp_path)
    assert sol.n_chunks == 3 and sol.schedule.group_pack and sol.spec.nchw_dx
    assert v.ok and v.nonfinite == 0, v


def test_split_n_chunks_with_the_workspace_on_the_emulator(monkeypatch, tmp_path):
    """Three chunks of whole images, each its kernel into the (reused) slices and then its
    reduction into its own images of an NCHW dX."""
    p = parse("convfp16 -n 6 -c 5 -H 7 -W 5 -k 16 -y 3 -x 3 -p 1 -q 1 -F 2".split()).problem
    monkeypatch.setattr(ap, "TENSOR_BYTES_LIMIT", 2 * max(p.dy_elems, p.dx_elems) // p.N * p.elem_bytes)
    sol, v = run_emulated(p, "gfx942", tmp_path, perf_config="64,16,32,2,1,32,16,0,0,0,3,-1,2")
    assert sol.n_chunks == 3 and sol.reduce.layout == "NCHW"
    assert v.ok and v.nonfinite == 0, v


WRONG_ROWS = {  # an accumulator's row off by a few, in each atom's fragment map
    "mfma": ("(lane >> 4) * 4 + e;", "(lane >> 4) * 4;", "(lane >> 5) * 4 + (e & 3);", "(lane >> 5) * 4;"),
    "mma.sync": ("(lane >> 2) + (e >> 1) * 8; }", "(lane >> 2); }"),
    "wgmma": ("((lane & 31) >> 2) + (e >> 1) * 8;", "((lane & 31) >> 2);"),
}


@pytest.mark.parametrize("arch,line,cfg,atom", [
    ("gfx942", f"convfp16 -n 2 -c 16 -H 6 -W 6 -k 16 -y 3 -x 3 -p 1 -q 1 {NHWC}", None, "mfma"),       # 16x16x16
    ("gfx942", f"convfp16 -n 2 -c 64 -H 6 -W 6 -k 64 -y 3 -x 3 -p 1 -q 1 {NHWC}", None, "mfma"),       # 32x32x8
    ("sm_80", f"convfp16 -n 2 -c 16 -H 6 -W 6 -k 32 -y 3 -x 3 -p 1 -q 1 {NHWC}", None, "mma.sync"),
    ("sm_90", f"convfp16 -n 2 -c 64 -H 6 -W 6 -k 64 -y 3 -x 3 -p 1 -q 1 {NHWC}", "128,64,64,2,1,64,64,0,0,0,1,-1,4,1",
     "wgmma"),
])
def test_a_wrong_fragment_row_fails(tmp_path, arch, line, cfg, atom):
    """The emulator's matrix-instruction layouts are independent of the kernel's fragment
    code: a kernel that puts an accumulator in the wrong row does not verify."""
    p = parse(line.split()).problem
    pairs = WRONG_ROWS[atom]

    def mangle(text):
        out = text
        for a, b in zip(pairs[::2], pairs[1::2]):
            out = out.replace(a, b)
        assert out != text
        return out
    sol, v = run_emulated(p, arch, tmp_path, perf_config=cfg, mangle=mangle)
    assert not v.ok, sol.kernel_name


@pytest.mark.parametrize("wrong,right", [
    ("wo * DG_NCHW_PX + x;", "wo * DG_NCHW_PX;"),                     # every x of a run on x = 0
    ("ho * DG_NCHW_PY + y)", "ho * DG_NCHW_PY)"),                     # every patch row on y = 0
    ("const int y = cy % DG_NCHW_PY;", "const int y = cy / DG_NCHW_PY % DG_NCHW_PY;"),   # (c, y) swapped
    ("run.e[e] = Cs[(rg * DG_NCHW_PV + e) * DG_C_ROW + col];", "run.e[e] = Cs[(rg * DG_NCHW_PV) * DG_C_ROW + col];"),
])
def test_nchw_patch_scatter_mistakes_fail(tmp_path, wrong, right):
    """The patch epilogue's dX address is checked element by element: each of these
    mistakes (a lost x or y, the channel and patch row mixed up, one row stored for the
    whole run) fails against the float64 reference."""
    p = parse("convfp16 -n 2 -c 2 -H 32 -W 48 -k 16 -y 16 -x 16 -u 16 -v 16 -F 2".split()).problem

    def mangle(text):
        assert wrong in text
        return text.replace(wrong, right)
    sol, v = run_emulated(p, "sm_90", tmp_path, perf_config="64,64,64,1,1,64,64,0,0,0,1,-1,3,8", mangle=mangle)
    assert sol.spec.patch_vector == 8 and not v.ok, sol.kernel_name      # two runs of 8 a patch row


@pytest.mark.parametrize("line,vector", [
    ("convfp16 -n 2 -c 16 -H 4 -W 16 -k 16 -y 3 -x 3 -p 1 -q 1 -F 2", 8),
    ("conv -n 1 -c 8 -H 5 -W 12 -k 8 -y 3 -x 3 -p 0 -q 2 -F 2", 4),
    ("convfp16 -n 2 -c 24 -H 5 -W 6 -k 32 -y 1 -x 1 -F 2", 2),
])
def test_nchw_dx_runs_are_stored_as_vectors(tmp_path, line, vector):
    """The NCHW dX epilogue stores aligned runs of pixels with one vector store: without
    that store the runs stay NaN."""
    p = parse(line.split()).problem
    assert SOLVER.find_solution(p, get_target("gfx942")).spec.nchw_dx_vector == vector
    store = "*reinterpret_cast<dg_vn_t*>(dx + o) = *reinterpret_cast<const dg_vn_t*>(src);"

    def mangle(text):
        assert store in text
        return text.replace(store, "")
    _, v = run_emulated(p, "gfx942", tmp_path, mangle=mangle)
    assert v.nonfinite > 0
    _, v = run_emulated(p, "gfx942", tmp_path)
    assert v.ok and v.nonfinite == 0


@st.composite
def problems(draw):
    dtype = draw(st.sampled_from(["fp16", "bf16", "fp32"]))
    g = draw(st.sampled_from([1, 1, 2]))
    cpg = draw(st.integers(1, 20))
    kpg = draw(st.integers(1, 24))
    y, x = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    s_h, s_w = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    d_h, d_w = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    p_h, p_w = draw(st.integers(0, y - 1)), draw(st.integers(0, x - 1))
    hi = draw(st.integers(max(1, d_h * (y - 1) + 1 - 2 * p_h), 9))
    wi = draw(st.integers(max(1, d_w * (x - 1) + 1 - 2 * p_w), 9))
    lay = draw(st.sampled_from(["NHWC", "NCHW"]))
    base = {"fp16": "convfp16", "bf16": "convbfp16", "fp32": "conv"}[dtype]
    return (f"{base} -n {draw(st.integers(1, 2))} -c {g * cpg} -H {hi} -W {wi} -k {g * kpg} -y {y} -x {x} "
            f"-p {p_h} -q {p_w} -u {s_h} -v {s_w} -l {d_h} -j {d_w} -g {g} -F 2 --in_layout {lay} "
            f"--out_layout {lay} --fil_layout {lay}")


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(line=problems(), arch=st.sampled_from(["gfx90a", "gfx942", "sm_80", "sm_90"]))
def test_random_problems_on_the_emulated_kernel(tmp_path, line, arch):
    """Random shapes, strides, dilations, pads, groups, odd channels and layouts, each on the
    solver's default for the target, with fresh random inputs and NaN-poisoned dX."""
    p = parse(line.split()).problem
    sol = SOLVER.find_solution(p, get_target(arch))
    if sol.spec.schedule is KernelSchedule.DIRECT:
        return                                   # direct.cu: test_direct.py
    _, v = run_emulated(p, arch, tmp_path)
    assert v.ok and v.nonfinite == 0, (line, sol.kernel_name, v)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(line=problems(), arch=st.sampled_from(["gfx90a", "gfx942", "sm_80", "sm_90"]), pick=st.integers(0, 10 ** 6))
def test_random_search_configs_on_the_emulated_kernel(tmp_path, line, arch, pick):
    """Any config ``search()`` offers (tile shapes, warp grids, vector caps, split-K,
    k-outer, stages, schedules) runs correctly, not just the default."""
    p = parse(line.split()).problem
    configs = [c for c in SOLVER.search(p, get_target(arch)) if c.schedule is not KernelSchedule.DIRECT]
    if not configs:
        return
    cfg = configs[pick % len(configs)]
    sol, v = run_emulated(p, arch, tmp_path, perf_config=str(cfg))
    assert v.ok and v.nonfinite == 0, (line, str(cfg), sol.kernel_name, v)


@pytest.mark.parametrize("line,arch,cfg", [
    (f"conv -n 2 -c 16 -H 6 -W 6 -k 32 -y 3 -x 3 -p 1 -q 1 -M 0 {NHWC}", "sm_80", None),
    (f"conv -n 2 -c 24 -H 7 -W 6 -k 40 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 -M 0 {NHWC}", "sm_90", None),
    ("conv -n 1 -c 20 -H 5 -W 7 -k 24 -y 2 -x 3 -p 1 -q 1 -l 2 -j 1 -g 2 -M 0 -F 2", "sm_90", None),
    (f"conv -n 2 -c 16 -H 6 -W 6 -k 32 -y 3 -x 3 -p 1 -q 1 -M 0 {NHWC}", "gfx942", None),
    # warpgroup TF32 (wgmma m64nNk8 .tf32, K-major B through the rounding loaders): N 64/128/256,
    # two m64 rows per warpgroup, two k blocks of 32, stride 2, 1x1, NCHW dX, split-K
    (f"conv -n 2 -c 64 -H 6 -W 5 -k 64 -y 3 -x 3 -p 1 -q 1 -M 0 {NHWC}", "sm_90", "128,64,32,2,1,64,64,0,0,0,1,-1,3,1"),
    (f"conv -n 2 -c 128 -H 5 -W 7 -k 96 -y 1 -x 1 -M 0 {NHWC}", "sm_90", "128,128,64,1,1,128,128,0,0,0,1,-1,2,1"),
    (f"conv -n 1 -c 256 -H 7 -W 6 -k 72 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 -M 0 {NHWC}", "sm_90",
     "64,256,32,1,1,64,256,0,0,0,1,-1,3,1"),
    ("conv -n 2 -c 64 -H 6 -W 6 -k 128 -y 3 -x 3 -p 1 -q 1 -M 0 -F 2", "sm_90", "128,64,32,2,1,64,64,0,0,0,2,-1,4,1"),
])
def test_tf32_kernels_match_the_cpu_engine_s_tf32(tmp_path, line, arch, cfg):
    """TF32 math (-M 0): the mma.m16n8k8 / xf32 kernels on the emulator give the CPU engine's
    TF32 result (same cvt.rna rounding of dY and W, fp32 sums: within fp32's 1.5e-5) and pass
    MIOpen's TF32 tolerance against the float64 reference of the unrounded inputs."""
    from miopen_solver.reference import rms_range
    from miopen_solver.runtime.cpu import CpuEngine
    p = parse(line.split()).problem
    assert p.tf32
    sol = SOLVER.find_solution(p, get_target(arch), perf_config=cfg)
    assert "tf32" in sol.kernel_name
    rt = EmuRuntime(sol, tmp_path / "emu")
    dy, w = _inputs(p, np.random.default_rng())
    dx = GpuEngine(rt, BinaryCache(tmp_path / "cache")).run(sol, dy, w)
    assert rms_range(CpuEngine(get_target(arch)).run(sol, dy, w).astype(np.float64), dx) < 1.5e-5
    v = verify(p, dx, dgrad_reference(p, dy, w))
    assert v.ok and v.nonfinite == 0, (sol.kernel_name, v)


# ---------------------------------------------------------------- narrow warpgroup tiles
# tile_k 32 (A: 64-byte swizzled dY rows) and warp_tile_n 32 (m64n32k16, B: 64-byte swizzled
# W rows), on the plain (1) and persistent (2) warpgroup schedules. The emulator reads each
# operand through its descriptor's swizzle mode (kernel_emu.py, PTX ISA 9.7.15.5.1.2).
NARROW_CASES = [
    # kpg 32, 3x3 pad 1: one tap per k-tile (tap-uniform K loop), two m64 per warpgroup
    (f"convfp16 -n 2 -c 64 -H 6 -W 6 -k 32 -y 3 -x 3 -p 1 -q 1 {NHWC}", "128,64,32,2,1,64,64,0,0,0,1,-1,4,1"),
    (f"convbfp16 -n 2 -c 128 -H 5 -W 7 -k 32 -y 3 -x 3 -p 1 -q 1 {NHWC}", "128,128,32,1,1,128,128,0,0,0,1,-1,3,1"),
    # cpg 32, 3x3 stride 2 (the YOLOv5 stem's shape: four tilde sub-GEMMs)
    (f"convfp16 -n 2 -c 32 -H 9 -W 8 -k 64 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 {NHWC}", "128,32,64,2,1,64,32,0,0,0,1,-1,4,1"),
    # cpg 32, 1x1 (MobileNetV2's expand): pointwise, three 64-wide k-tiles
    (f"convbfp16 -n 2 -c 32 -H 7 -W 6 -k 192 -y 1 -x 1 {NHWC}", "128,32,64,2,1,64,32,0,0,0,1,-1,3,1"),
    # both narrow; two 32-wide warpgroups side by side (two B blocks); groups
    (f"convfp16 -n 2 -c 32 -H 6 -W 5 -k 32 -y 3 -x 3 -p 1 -q 1 {NHWC}", "128,32,32,2,1,64,32,0,0,0,1,-1,3,1"),
    (f"convfp16 -n 1 -c 128 -H 6 -W 6 -k 64 -y 3 -x 3 -p 1 -q 1 -g 2 {NHWC}", "128,64,32,2,2,64,32,0,0,0,1,-1,4,1"),
    # kpg 48: 32-wide k-tiles straddle taps (per-vector tap decode); odd cpg (register B path)
    (f"convfp16 -n 2 -c 30 -H 5 -W 6 -k 48 -y 3 -x 3 -p 1 -q 1 {NHWC}", "64,32,32,1,1,64,32,0,0,0,1,-1,3,1"),
    # one stage, two stages (no lag), 1x1 stride 2 with zero-fill blocks, NCHW dX
    (f"convbfp16 -n 2 -c 32 -H 6 -W 6 -k 32 -y 3 -x 3 -p 1 -q 1 {NHWC}", "64,32,32,1,1,64,32,0,0,0,1,-1,1,1"),
    (f"convfp16 -n 2 -c 32 -H 7 -W 8 -k 32 -y 1 -x 1 -u 2 -v 2 {NHWC}", "128,32,32,2,1,64,32,0,0,0,1,-1,2,1"),
    ("convfp16 -n 2 -c 32 -H 6 -W 8 -k 32 -y 3 -x 3 -p 1 -q 1 -F 2", "128,32,32,2,1,64,32,0,0,0,1,-1,4,1"),
    # split-K: packed-pair atomics, and the fp32 workspace
    (f"convfp16 -n 1 -c 32 -H 5 -W 4 -k 32 -y 3 -x 3 -p 1 -q 1 {NHWC}", "128,32,32,2,1,64,32,0,0,0,3,-1,4,1"),
    (f"convbfp16 -n 1 -c 64 -H 5 -W 4 -k 96 -y 3 -x 3 -p 1 -q 1 {NHWC}", "128,64,32,2,1,64,64,0,0,0,3,-1,4,1,2"),
    # persistent: tile_k 32, warp_tile_n 32, both (with zero-fill blocks)
    (f"convfp16 -n 2 -c 128 -H 6 -W 6 -k 32 -y 3 -x 3 -p 1 -q 1 {NHWC}", "128,128,32,2,1,64,128,0,0,0,1,-1,3,2"),
    (f"convbfp16 -n 2 -c 32 -H 6 -W 8 -k 64 -y 1 -x 1 {NHWC}", "64,32,64,1,1,64,32,0,0,0,1,-1,2,2"),
    (f"convfp16 -n 2 -c 32 -H 7 -W 7 -k 32 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 {NHWC}",
     "128,32,32,1,1,128,32,0,0,0,1,-1,3,2"),
    # the short-K default (heuristics.SHORT_K_DEFAULT): GemmK 24 (under one k-tile), 80 (two
    # and a half), column and pixel tails
    (f"convfp16 -n 2 -c 72 -H 5 -W 7 -k 24 -y 1 -x 1 {NHWC}", "64,64,32,1,1,64,64,0,0,0,1,-1,3,1"),
    (f"convbfp16 -n 1 -c 40 -H 9 -W 5 -k 80 -y 1 -x 1 {NHWC}", "64,64,32,1,1,64,64,0,0,0,1,-1,3,1"),
]


@pytest.mark.parametrize("line", [
    "convfp16 -n 2 -c 72 -H 5 -W 7 -k 24 -y 1 -x 1 -F 2",                 # NCHW, H*W odd: transposed dY, NCHW dX epilogue
    f"convbfp16 -n 3 -c 48 -H 3 -W 5 -k 80 -y 1 -x 1 {NHWC}",
])
def test_short_k_default_runs_end_to_end_on_the_emulator(tmp_path, line):
    """The short-K default (heuristics.SHORT_K_DEFAULT) as the solver runs it on sm_90, in
    NHWC and in MIOpen's NCHW (dY transposed, dX stored NCHW by the epilogue): float64
    reference, NaN-poisoned dX. These lines are small enough to emulate, so their grids are
    under one wave and their own default is the sub-wave tile: the short-K tile is asked for,
    and the same shapes at a batch that fills a wave are shown to default to it."""
    from miopen_solver.heuristics import SHORT_K_DEFAULT
    p = parse(line.split()).problem
    sol, v = run_emulated(p, "sm_90", tmp_path, seed=5, perf_config=SHORT_K_DEFAULT)
    assert sol.perf_config == SHORT_K_DEFAULT
    assert v.nonfinite == 0 and v.ok, v
    big = p.replace(N=p.N * 256)
    assert SOLVER.find_solution(big, get_target("sm_90")).perf_config == SHORT_K_DEFAULT


@pytest.mark.parametrize("line, split", [
    ("convfp16 -n 5 -c 28 -H 1 -W 1 -k 672 -y 1 -x 1 -F 2", 16),        # an SE fc2 in NCHW (1x1 image: same bytes)
    (f"convbfp16 -n 3 -c 48 -H 1 -W 1 -k 1152 -y 1 -x 1 {NHWC}", 16),   # split slices of 72: k-tiles straddle slices
    (f"convfp16 -n 2 -c 27 -H 1 -W 1 -k 640 -y 1 -x 1 {NHWC}", 1),     # odd cpg: no atomic split, a column tail
    (f"convfp16 -n 1 -c 40 -H 6 -W 5 -k 400 -y 1 -x 1 -u 2 -v 2 {NHWC}", 8),    # 1x1 stride 2: zero-filled rows
])
def test_sub_wave_default_runs_end_to_end_on_the_emulator(tmp_path, line, split):
    """The sub-wave default (miopen_solver.sub_wave: 64x32x32, split_k from its latency model)
    as the solver runs it on sm_90: the split the model picks, packed-pair atomics into a
    zeroed dX, against the float64 reference with NaN-poisoned dX."""
    from miopen_solver.sub_wave import SUB_WAVE_TILE
    p = parse(line.split()).problem
    sol, v = run_emulated(p, "sm_90", tmp_path, seed=7)
    assert sol.perf_config == SUB_WAVE_TILE.replace(split_k=split), sol.perf_config.serialize()
    assert v.nonfinite == 0 and v.ok, v


@pytest.mark.parametrize("line,cfg", NARROW_CASES, ids=[f"narrow{i}-{c[1]}" for i, c in enumerate(NARROW_CASES)])
def test_narrow_wgmma_kernels_match_the_reference(tmp_path, line, cfg):
    p = parse(line.split()).problem
    sol, v = run_emulated(p, "sm_90", tmp_path, perf_config=cfg)
    c = sol.spec.config
    assert sol.spec.wgmma and 32 in (c.tile_k, c.warp_tile_n), sol.kernel_name
    assert v.ok and v.nonfinite == 0, (sol.kernel_name, v)


NARROW_MUTANTS = {
    # each a kernel that disagrees with the documented 64-byte layout somewhere: the store
    # pattern, or the swizzle mode / stride a descriptor announces
    "store pattern": ("((((col >> 3) ^ (row >> 1)) & 3) << 3)", "((((col >> 3) ^ row) & 3) << 3)"),
    "A mode": ("(kk) * 2, 16, 512, 2)", "(kk) * 2, 16, 512, 1)"),
    "A stride": ("(kk) * 2, 16, 512, 2)", "(kk) * 2, 16, 1024, 2)"),
    "B mode": ("DG_TILE_K * 64, 512, 2)", "DG_TILE_K * 64, 512, 1)"),
    "B stride": ("DG_TILE_K * 64, 512, 2)", "DG_TILE_K * 64, 1024, 2)"),
}


@pytest.mark.parametrize("mutant", sorted(NARROW_MUTANTS))
def test_narrow_wgmma_layout_mistakes_fail(tmp_path, mutant):
    """The emulator's 64-byte swizzle is the documented one, not the kernel's: a kernel whose
    store pattern or descriptors differ from it does not verify."""
    a, b = NARROW_MUTANTS[mutant]
    p = parse(f"convfp16 -n 2 -c 32 -H 6 -W 6 -k 32 -y 3 -x 3 -p 1 -q 1 {NHWC}".split()).problem

    def mangle(text):
        assert a in text
        return text.replace(a, b)
    sol, v = run_emulated(p, "sm_90", tmp_path, perf_config="128,32,32,2,1,64,32,0,0,0,1,-1,3,1", mangle=mangle)
    assert not v.ok, sol.kernel_name


def _random_line(draw, dtype: str, g: int, cpg: int, kpg: int, hw_max: int) -> str:
    """An NHWC MIOpenDriver line of ``g`` groups of ``cpg``/``kpg`` channels with a drawn
    geometry: 1-2 images of 3..hw_max pixels a side, a 1x1 or 3x3 filter (3x3 padded 0 or 1
    per side), strides 1-2."""
    y = draw(st.sampled_from([1, 3]))
    s_h, s_w = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    p_h, p_w = (draw(st.integers(0, 1)), draw(st.integers(0, 1))) if y == 3 else (0, 0)
    hi, wi = draw(st.integers(3, hw_max)), draw(st.integers(3, hw_max))
    base = {"fp16": "convfp16", "bf16": "convbfp16"}[dtype]
    return (f"{base} -n {draw(st.integers(1, 2))} -c {g * cpg} -H {hi} -W {wi} -k {g * kpg} -y {y} -x {y} "
            f"-p {p_h} -q {p_w} -u {s_h} -v {s_w} -g {g} {NHWC}")


@st.composite
def narrow_problems(draw):
    """Problems with kpg 32 or cpg 32 (the other side 16..96), 1x1 or 3x3 filters, strides
    1-2, pads, groups, fp16 and bf16."""
    dtype = draw(st.sampled_from(["fp16", "bf16"]))
    g = draw(st.sampled_from([1, 1, 2]))
    side = draw(st.sampled_from(["k", "c", "both"]))
    other = draw(st.sampled_from([16, 24, 32, 40, 64, 96]))
    cpg = 32 if side in ("c", "both") else other
    kpg = 32 if side in ("k", "both") else other
    return _random_line(draw, dtype, g, cpg, kpg, 9)


@settings(max_examples=16, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(line=narrow_problems(), pick=st.integers(0, 10 ** 6))
def test_random_narrow_wgmma_configs_on_the_emulated_kernel(tmp_path, line, pick):
    """Any narrow warpgroup config ``search()`` offers for a random kpg-32 / cpg-32 problem
    (tile shapes, warpgroups, stages, split-K, plain and persistent) runs correctly against
    the float64 reference with NaN-poisoned dX."""
    p = parse(line.split()).problem
    configs = [c for c in SOLVER.search(p, get_target("sm_90"))
               if c.schedule.warpgroup and 32 in (c.tile_k, c.warp_tile_n)]
    assert configs, line
    cfg = configs[pick % len(configs)]
    sol, v = run_emulated(p, "sm_90", tmp_path, perf_config=str(cfg))
    assert v.ok and v.nonfinite == 0, (line, str(cfg), sol.kernel_name, v)


# ---------------------------------------------------------------- warp_tile_n 96, 160, 192, 224
# m64n96k16, m64n160k16, m64n224k16 (B: 64-byte swizzled blocks of 32 W columns, 3, 5 or 7 per
# warpgroup; TMA boxes of 32 columns in a 64-byte-swizzled tensor map) and m64n192k16 (B: three 128-byte swizzled
# blocks of 64), on the plain (1), persistent (2) and TMA (3) schedules, tile_n not a power
# of two and cpg not a multiple of it (column tails), and the TMA schedule's 7-8 stages.
N96_CASES = [
    # 1x1: cpg 200 = 96 + 96 + 8 and 320 = 192 + 128 (column tails), GemmM tails
    (f"convfp16 -n 2 -c 200 -H 5 -W 7 -k 128 -y 1 -x 1 {NHWC}", "128,96,64,2,1,64,96,0,0,0,1,-1,4,1"),
    (f"convbfp16 -n 2 -c 320 -H 5 -W 6 -k 128 -y 1 -x 1 {NHWC}", "128,192,64,2,1,64,192,0,0,0,1,-1,4,1"),
    # 3x3 pad 1, stride 1 and 2 (tilde sub-GEMMs), odd-ish cpg (4-wide B/C vectors)
    (f"convbfp16 -n 2 -c 100 -H 6 -W 6 -k 64 -y 3 -x 3 -p 1 -q 1 {NHWC}", "128,96,64,2,1,64,96,0,0,0,1,-1,3,1"),
    (f"convfp16 -n 2 -c 200 -H 7 -W 6 -k 64 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 {NHWC}",
     "128,192,64,2,1,64,192,0,0,0,1,-1,5,1"),
    # 1x1 stride 2 (zero-fill blocks); one warpgroup; groups, two 96-wide warpgroups side by side
    (f"convfp16 -n 2 -c 96 -H 7 -W 8 -k 64 -y 1 -x 1 -u 2 -v 2 {NHWC}", "64,96,64,1,1,64,96,0,0,0,1,-1,2,1"),
    (f"convfp16 -n 1 -c 384 -H 5 -W 6 -k 128 -y 3 -x 3 -p 1 -q 1 -g 2 {NHWC}", "128,192,64,2,2,64,96,0,0,0,1,-1,4,1"),
    # split-K: packed-pair atomics, the fp32 workspace; NCHW dX
    (f"convfp16 -n 1 -c 200 -H 5 -W 4 -k 192 -y 3 -x 3 -p 1 -q 1 {NHWC}", "128,96,64,2,1,64,96,0,0,0,3,-1,4,1"),
    (f"convbfp16 -n 1 -c 200 -H 5 -W 4 -k 128 -y 3 -x 3 -p 1 -q 1 {NHWC}", "128,192,64,2,1,64,192,0,0,0,2,-1,4,1,2"),
    ("convfp16 -n 2 -c 200 -H 6 -W 8 -k 64 -y 3 -x 3 -p 1 -q 1 -F 2", "128,96,64,2,1,64,96,0,0,0,1,-1,4,1"),
    # persistent
    (f"convfp16 -n 2 -c 200 -H 6 -W 6 -k 128 -y 3 -x 3 -p 1 -q 1 {NHWC}", "128,96,64,2,1,64,96,0,0,0,1,-1,4,2"),
    (f"convbfp16 -n 2 -c 320 -H 5 -W 7 -k 128 -y 1 -x 1 {NHWC}", "128,192,64,2,1,64,192,0,0,0,1,-1,3,2"),
    # TMA: pointwise (2-D boxes) at 7 and 8 stages over 10 k-tiles; 3x3 (4-D boxes) with groups,
    # strided, NCHW dX
    (f"convfp16 -n 2 -c 200 -H 6 -W 7 -k 640 -y 1 -x 1 {NHWC}", "128,96,64,2,1,64,96,0,0,0,1,-1,7,3"),
    (f"convbfp16 -n 2 -c 200 -H 6 -W 7 -k 640 -y 1 -x 1 {NHWC}", "128,96,64,2,1,64,96,0,0,0,1,-1,8,3"),
    (f"convfp16 -n 2 -c 320 -H 5 -W 7 -k 512 -y 1 -x 1 {NHWC}", "128,192,64,2,1,64,192,0,0,0,1,-1,5,3"),
    (f"convfp16 -n 2 -c 384 -H 8 -W 8 -k 128 -y 3 -x 3 -p 1 -q 1 -g 2 {NHWC}", "128,96,64,2,1,64,96,0,0,0,1,-1,8,3"),
    (f"convbfp16 -n 2 -c 200 -H 9 -W 10 -k 64 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 {NHWC}",
     "128,192,64,2,1,64,192,0,0,0,1,-1,4,3"),
    ("convfp16 -n 1 -c 200 -H 6 -W 10 -k 128 -y 3 -x 3 -p 1 -q 1 -F 2", "128,96,64,2,1,64,96,0,0,0,1,-1,7,3"),
    # m64n160k16 and m64n224k16 (5 and 7 32-wide blocks a warpgroup): cpg 160 and 224 in one
    # column tile, cpg 200 = 160 + 40 and 480 = 224 + 224 + 32 (column tails), on the plain,
    # persistent, TMA and ping-pong schedules; two 160-wide warpgroups side by side; NCHW dX
    (f"convfp16 -n 2 -c 160 -H 5 -W 7 -k 128 -y 1 -x 7 -p 0 -q 3 {NHWC}", "128,160,64,2,1,64,160,0,0,0,1,-1,4,1"),
    (f"convbfp16 -n 2 -c 200 -H 6 -W 6 -k 64 -y 3 -x 3 -p 1 -q 1 {NHWC}", "64,160,64,1,1,64,160,0,0,0,1,-1,3,2"),
    (f"convfp16 -n 2 -c 224 -H 6 -W 7 -k 640 -y 1 -x 1 {NHWC}", "128,224,64,2,1,64,224,0,0,0,1,-1,4,3"),
    (f"convbfp16 -n 2 -c 480 -H 5 -W 6 -k 128 -y 3 -x 3 -p 1 -q 1 {NHWC}", "128,224,64,2,1,64,224,0,0,0,1,-1,4,1"),
    (f"convfp16 -n 1 -c 640 -H 5 -W 6 -k 128 -y 3 -x 3 -p 1 -q 1 -g 2 {NHWC}", "128,320,64,2,2,64,160,0,0,0,1,-1,3,1"),
    (f"convfp16 -n 3 -c 160 -H 7 -W 9 -k 192 -y 7 -x 1 -p 3 -q 0 {NHWC}", "64,160,64,1,1,64,160,0,0,0,1,-1,6,20"),
    ("convbfp16 -n 2 -c 224 -H 6 -W 8 -k 64 -y 3 -x 3 -p 1 -q 1 -F 2", "64,224,64,1,1,64,224,0,0,0,1,-1,5,20"),
]


@pytest.mark.parametrize("line,cfg", N96_CASES, ids=[f"n96-{i}-{c[1]}" for i, c in enumerate(N96_CASES)])
def test_n96_n192_wgmma_kernels_match_the_reference(tmp_path, line, cfg):
    p = parse(line.split()).problem
    sol, v = run_emulated(p, "sm_90", tmp_path, perf_config=cfg)
    c = sol.spec.config
    assert sol.spec.wgmma and str(c) == cfg and c.warp_tile_n in (96, 160, 192, 224), sol.kernel_name
    assert v.ok and v.nonfinite == 0, (sol.kernel_name, v)


@pytest.mark.parametrize("cfg", ["128,96,64,2,1,64,96,0,0,0,1,-1,7,3", "128,192,64,2,1,64,192,0,0,0,1,-1,5,3",
                                 "128,96,64,2,1,64,96,0,0,0,1,-1,3,2"])
def test_n96_persistent_blocks_walk_many_tiles(tmp_path, cfg):
    """The persistent and TMA kernels with the grid sized for a 3-SM device: every block
    loops over several tiles, the mbarrier stages wrap across tiles."""
    p = parse(f"convfp16 -n 2 -c 200 -H 14 -W 9 -k 640 -y 1 -x 1 {NHWC}".split()).problem
    small = get_target("sm_90").with_(num_cus=3)
    sol, v = run_emulated(p, "sm_90", tmp_path, perf_config=cfg, target=small)
    assert sol.spec.tiles_per_group > sol.spec.tile_blocks, (sol.kernel_name, sol.spec.tile_blocks)
    assert v.ok and v.nonfinite == 0, (sol.kernel_name, v)


N96_MUTANTS = {
    # kernels that disagree with the documented layouts: the n96 B descriptor's swizzle mode,
    # its 8-row stride or block stride (LBO), its per-warpgroup block offset, the n96 TMA box
    # placement, and the n192 B descriptor's block stride
    "n96 B mode": ("128,96,64,2,1,64,96,0,0,0,1,-1,4,1", "b0 + (kk) * 64, DG_TILE_K * 64, 512, 2)",
                   "b0 + (kk) * 64, DG_TILE_K * 64, 512, 1)"),
    "n96 B stride": ("128,96,64,2,1,64,96,0,0,0,1,-1,4,1", "b0 + (kk) * 64, DG_TILE_K * 64, 512, 2)",
                     "b0 + (kk) * 64, DG_TILE_K * 64, 1024, 2)"),
    "n96 B blocks": ("128,96,64,2,1,64,96,0,0,0,1,-1,4,1", "b0 + (kk) * 64, DG_TILE_K * 64, 512, 2)",
                     "b0 + (kk) * 64, DG_TILE_K * 128, 512, 2)"),
    "n96 warpgroup": ("128,192,64,2,2,64,96,0,0,0,1,-1,4,1", "(wn * DG_WARP_COLS / 32) * (DG_TILE_K * 64)",
                      "(wn * DG_WARP_COLS / 64) * (DG_TILE_K * 64)"),
    "n96 TMA box": ("128,96,64,2,1,64,96,0,0,0,1,-1,7,3", "b * (DG_TILE_K * 32)), &tm_w",
                    "b * (DG_TILE_K * 64)), &tm_w"),
    "n192 B blocks": ("128,192,64,2,1,64,192,0,0,0,1,-1,4,1", "dg_wg_desc(b0 + kk * 128, DG_TILE_K * 128, 1024)",
                      "dg_wg_desc(b0 + kk * 128, DG_TILE_K * 64, 1024)"),
}


@pytest.mark.parametrize("mutant", sorted(N96_MUTANTS))
def test_n96_n192_layout_mistakes_fail(tmp_path, mutant):
    """The emulator reads the documented layouts, not the kernel's: an n96/n192 kernel whose
    descriptors or TMA placement differ from them does not verify."""
    cfg, a, b = N96_MUTANTS[mutant]
    p = parse(f"convfp16 -n 2 -c 384 -H 5 -W 6 -k 128 -y 1 -x 1 {NHWC}".split()).problem

    def mangle(text):
        assert a in text
        return text.replace(a, b)
    sol, v = run_emulated(p, "sm_90", tmp_path, perf_config=cfg, mangle=mangle)
    assert not v.ok, sol.kernel_name


@st.composite
def n96_problems(draw):
    """Problems with many channels for the wide tiles: cpg 72..400 (multiples of 8 and not),
    kpg 64..256, 1x1 or 3x3, strides 1-2, pads, groups, fp16 and bf16."""
    dtype = draw(st.sampled_from(["fp16", "bf16"]))
    g = draw(st.sampled_from([1, 1, 2]))
    cpg = draw(st.sampled_from([72, 96, 100, 192, 200, 320, 400]))
    kpg = draw(st.sampled_from([64, 128, 192, 256]))
    return _random_line(draw, dtype, g, cpg, kpg, 8)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(line=n96_problems(), pick=st.integers(0, 10 ** 6))
def test_random_n96_n192_configs_on_the_emulated_kernel(tmp_path, line, pick):
    """Any warp_tile_n 96/192 config ``search()`` offers for a random many-channel problem
    (tiles, warpgroups, stages up to 8 on TMA, split-K, the three warpgroup schedules) runs
    correctly against the float64 reference with NaN-poisoned dX."""
    p = parse(line.split()).problem
    configs = [c for c in SOLVER.search(p, get_target("sm_90"))
               if c.schedule.warpgroup and c.warp_tile_n in (96, 192)]
    assert configs, line
    cfg = configs[pick % len(configs)]
    sol, v = run_emulated(p, "sm_90", tmp_path, perf_config=str(cfg))
    assert v.ok and v.nonfinite == 0, (line, str(cfg), sol.kernel_name, v)


TMASK_MUTANTS = {
    # each k-slice reads the first k-tiles of its tile (the right count, the wrong range)
    "slice start": ("for (int kt = z * k_tiles / DG_SPLIT_K; kt < (z + 1) * k_tiles / DG_SPLIT_K;",
                    "for (int kt = 0; kt < (z + 1) * k_tiles / DG_SPLIT_K - z * k_tiles / DG_SPLIT_K;"),
    # every unit's partial sums land in workspace slice 0
    "workspace slice": ("(long long)z * DG_WS_SLICE", "(long long)0 * DG_WS_SLICE"),
    # the unit's tile is taken from the wrong end of the index
    "unit tile": ("dg_tma_tile_at(u - z * DG_TILES)", "dg_tma_tile_at(u % DG_SPLIT_K)"),
}


@pytest.mark.parametrize("mutant", sorted(TMASK_MUTANTS))
@pytest.mark.parametrize("reduce", ["1", "2"])
def test_tma_split_k_mistakes_fail(tmp_path, mutant, reduce):
    """A TMA split-K kernel whose work units read the wrong k-slice, land in the wrong
    workspace slice or take the wrong tile does not verify."""
    a, b = TMASK_MUTANTS[mutant]
    if mutant == "workspace slice" and reduce == "1":
        pytest.skip("atomics have no slices")
    p = parse(f"convfp16 -n 2 -c 128 -H 6 -W 8 -k 320 -y 3 -x 3 -p 1 -q 1 {NHWC}".split()).problem

    def mangle(text):
        assert a in text
        return text.replace(a, b)
    sol, v = run_emulated(p, "sm_90", tmp_path, perf_config=f"128,64,64,2,1,64,64,0,0,0,3,-1,4,3,{reduce}",
                          mangle=mangle)
    assert not v.ok, sol.kernel_name


STREAM_K_CASES = [
    # (line, config, SMs): 1x1 with 3 tiles x 4 k-tiles over 5 blocks (every tile cut, runs
    # inside one tile); 3x3 stride 1 with 2 tiles x 54 k-tiles over 15 blocks (two and three
    # contributors per tile); a box of pixels (TMA rect), bf16, 2 stages; more
    # blocks than tiles on 7 SMs; an NCHW dX stored by the same epilogue; 1x1 stride 2 with
    # its zero-fill blocks
    (f"convfp16 -n 2 -c 128 -H 9 -W 10 -k 256 -y 1 -x 1 {NHWC}", "64,128,64,1,1,64,128,0,0,0,1,-1,4,3,3", 5),
    (f"convfp16 -n 1 -c 64 -H 8 -W 12 -k 384 -y 3 -x 3 -p 1 -q 1 {NHWC}", "64,64,64,1,1,64,64,0,0,0,1,-1,3,3,3", 5),
    (f"convbfp16 -n 2 -c 64 -H 8 -W 8 -k 192 -y 3 -x 3 -p 1 -q 1 {NHWC}", "128,64,64,2,1,64,64,0,0,0,-1,-1,2,3,3", 3),
    (f"convfp16 -n 2 -c 64 -H 6 -W 6 -k 128 -y 1 -x 1 {NHWC}", "64,64,64,1,1,64,64,0,0,0,1,-1,4,3,3", 7),
    ("convfp16 -n 2 -c 64 -H 6 -W 8 -k 192 -y 1 -x 1 -F 2 --in_layout NCHW --out_layout NHWC --fil_layout NHWC",
     "64,64,64,1,1,64,64,0,0,0,1,-1,4,3,3", 5),
    (f"convfp16 -n 2 -c 64 -H 9 -W 8 -k 128 -y 1 -x 1 -u 2 -v 2 {NHWC}", "64,64,64,1,1,64,64,0,0,0,1,-1,4,3,3", 3),
]


@pytest.mark.parametrize("line,cfg,sms", STREAM_K_CASES)
def test_stream_k_on_the_emulated_kernel(tmp_path, line, cfg, sms):
    """Stream-K (split_k_reduce 3) on a small device: the k-tiles of all tiles cut into one
    run per block, tiles cut between blocks summed by their owners from the others' slots
    (NaN until written), against the float64 reference with NaN-poisoned dX."""
    p = parse(line.split()).problem
    tgt = get_target("sm_90").with_(num_cus=sms)
    sol, v = run_emulated(p, "sm_90", tmp_path, perf_config=cfg, target=tgt)
    s = sol.spec
    assert s.stream_k and "_skst_" in sol.kernel_name and s.grid[0] == s.tile_blocks + s.zero_fill_blocks
    iters = s.tiles_per_group * s.stream_k_tiles
    starts = [b * iters // s.tile_blocks for b in range(s.tile_blocks)]
    assert s.tile_blocks == min(iters, sms * s.resident_blocks)
    assert any(x % s.stream_k_tiles for x in starts), "some block's run starts inside a tile"
    assert v.ok and v.nonfinite == 0, (sol.kernel_name, v)


@st.composite
def stream_k_problems(draw):
    """One-group problems of 8..136 channels (multiples of 8: TMA strides), kpg 64..256,
    1x1 (strides 1-2) or 3x3 (stride 1, pads 0-1), fp16 and bf16, with a stream-K tile and a
    device of 2-9 SMs."""
    dtype = draw(st.sampled_from(["fp16", "bf16"]))
    cpg = draw(st.sampled_from([8, 24, 64, 72, 136]))
    kpg = draw(st.sampled_from([64, 128, 192, 256]))
    y = draw(st.sampled_from([1, 3]))
    s_ = draw(st.integers(1, 2)) if y == 1 else 1
    pad = draw(st.integers(0, 1)) if y == 3 else 0
    hi, wi = draw(st.integers(3, 10)), draw(st.integers(3, 10))
    base = {"fp16": "convfp16", "bf16": "convbfp16"}[dtype]
    line = (f"{base} -n {draw(st.integers(1, 2))} -c {cpg} -H {hi} -W {wi} -k {kpg} -y {y} -x {y} "
            f"-p {pad} -q {pad} -u {s_} -v {s_} {NHWC}")
    tm, tn = draw(st.sampled_from([(64, 64), (128, 64), (64, 128)]))
    cfg = f"{tm},{tn},64,{tm // 64},1,64,{tn},0,0,0,1,-1,{draw(st.sampled_from([2, 4]))},3,3"
    return line, cfg, draw(st.integers(2, 9))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=stream_k_problems())
def test_random_stream_k_problems_on_the_emulated_kernel(tmp_path, case):
    """Stream-K on random one-group problems, tiles and device sizes (every run split some
    other way) against the float64 reference with NaN-poisoned dX and slots."""
    line, cfg, sms = case
    p = parse(line.split()).problem
    sol, v = run_emulated(p, "sm_90", tmp_path, perf_config=cfg, target=get_target("sm_90").with_(num_cus=sms))
    assert sol.spec.stream_k and v.ok and v.nonfinite == 0, (line, cfg, sms, sol.kernel_name, v)


STREAM_K_MUTANTS = {
    # the owner adds only the first later block's partial sums
    "one contributor": ("b < DG_TILE_BLOCKS && (long long)b * DG_SK_ITERS / DG_TILE_BLOCKS < base + DG_SK_KT; ++b",
                        "b < DG_TILE_BLOCKS && b == bid + 1; ++b"),
    # a block stores its partial sums in the slot of the block before it
    "wrong slot": ("(long long)b * DG_SK_SLOT + 4 * tid;\n#pragma unroll\n    for (int i",
                   "(long long)(b - 1) * DG_SK_SLOT + 4 * tid;\n#pragma unroll\n    for (int i"),
    # a cut tile's later segment stores dX instead of handing its sums on
    "no hand-off": ("if (kt0 > 0) {", "if (false) {"),
}


@pytest.mark.parametrize("mutant", sorted(STREAM_K_MUTANTS))
def test_stream_k_mistakes_fail(tmp_path, mutant):
    """A stream-K kernel that drops a contributor, reads the wrong slot or stores a partial
    tile as dX does not verify (or stops on a flag that is never raised)."""
    a, b = STREAM_K_MUTANTS[mutant]
    line, cfg, sms = STREAM_K_CASES[1]
    p = parse(line.split()).problem

    def mangle(text):
        assert a in text, a
        return text.replace(a, b)
    try:
        sol, v = run_emulated(p, "sm_90", tmp_path, perf_config=cfg, mangle=mangle,
                              target=get_target("sm_90").with_(num_cus=sms))
    except RuntimeError as e:          # the emulator stopped on a wait that never ends
        assert "never raised" in str(e)
        return
    assert not v.ok, sol.kernel_name


@pytest.mark.parametrize("line,cfg", [
    # 4 strided sub-GEMMs of 12/6/6/3 k-tiles; 2 and 3 slices, atomics and the workspace,
    # 4 and 2 stages: one block walks every unit, the stages wrap across units of different
    # lengths
    (f"convbfp16 -n 2 -c 128 -H 9 -W 14 -k 192 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 {NHWC}",
     "128,128,64,1,1,128,128,0,0,0,2,-1,4,3"),
    (f"convfp16 -n 2 -c 128 -H 9 -W 14 -k 192 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 {NHWC}",
     "128,128,64,1,1,128,128,0,0,0,3,-1,2,3,2"),
    # the 96- and 192-column warpgroup tiles (32-wide W boxes / m64n192k16) with 7 and 5 stages
    (f"convfp16 -n 2 -c 192 -H 7 -W 7 -k 256 -y 1 -x 1 {NHWC}", "128,96,64,2,1,64,96,0,0,0,2,-1,7,3"),
    (f"convbfp16 -n 2 -c 384 -H 5 -W 6 -k 256 -y 1 -x 1 {NHWC}", "128,192,64,2,1,64,192,0,0,0,3,-1,5,3,2"),
])
def test_tma_split_k_one_block_walks_every_unit(tmp_path, line, cfg):
    """TMA split-K on a one-SM device: a single persistent block takes every work unit in
    turn (tiles of different sub-GEMMs, all k-slices), its mbarrier phases carried across
    units whose k-loops differ in length."""
    p = parse(line.split()).problem
    one = get_target("sm_90").with_(num_cus=1)
    sol, v = run_emulated(p, "sm_90", tmp_path, perf_config=cfg, target=one)
    assert sol.spec.grid == (1, 1, 1) and sol.spec.tiles_per_group * sol.spec.split_k >= 4
    assert v.ok and v.nonfinite == 0, (sol.kernel_name, v)
