"""dX stored NCHW by the kernel's own epilogue (issue 16, part 2): no dX transform, no dX
workspace slot, the user's dX pointer handed to the kernel.

The rule (``transpose.nchw_dx_rule``) is checked by hand; whole runs go through the GPU
engine over a fake device that runs the CPU engine on the bytes at the launch's pointers and
writes NCHW bytes where the kernel stores NCHW (``test_split_n.ComputingRuntime``), against
the float64 reference; the CPU engine runs the same solutions. The kernels themselves are
compiled for sm_80/sm_90a (nvcc) and gfx90a/gfx942 (clang) without spills; the GPU tests
are ``tests/test_gpu.py -k nchw_dx``.
"""

from __future__ import annotations

import itertools
from math import gcd
import shutil

import numpy as np
import pytest

from miopen_solver import applicability as ap
from miopen_solver import layouts
from miopen_solver.command import parse
from miopen_solver.config import KernelSchedule, PerfConfig
from miopen_solver.errors import PerfConfigError
from miopen_solver.reference import dgrad_reference, verify
from miopen_solver.runtime.cache import BinaryCache
from miopen_solver.runtime.cpu import CpuEngine
from miopen_solver.runtime.gpu import GpuEngine
from miopen_solver.solver import DgradSolver, Solution
from miopen_solver.spec import make_spec
from miopen_solver.target import get_target
from miopen_solver.transpose import layout_transforms, native_problem, nchw_dx_rule, workspace_bytes, writes_nchw_dx

from test_split_n import ComputingRuntime

SOLVER = DgradSolver()
SM90 = get_target("sm_90")
COMBOS = list(itertools.product(("NCHW", "NHWC"), repeat=3))      # (in, out, fil)
BASE = {"fp16": "convfp16", "bf16": "convbfp16", "fp32": "conv"}

WARP_MMA = "64,64,32,2,2,32,32,0,0,0,1,-1,2"
WARP_MMA_SK3 = "64,64,32,2,2,32,32,0,0,0,3,-1,2"
WGMMA = "128,128,64,2,1,64,128,0,0,0,1,-1,3,1"
WGMMA_SK2 = "128,128,64,2,1,64,128,0,0,0,2,-1,3,1"
PERSISTENT = "64,64,64,1,1,64,64,0,0,0,1,-1,2,2"
FP32 = {WARP_MMA: "64,64,16,2,2,32,32,0,0,0,1,-1,2", WARP_MMA_SK3: "64,64,16,2,2,32,32,0,0,0,3,-1,2"}
"""The fp32 (FFMA, tile_k 16) form of the warp-MMA configs."""


def _p(line, dtype="fp16", combo=("NCHW", "NCHW", "NCHW")):
    return parse(f"{BASE[dtype]} {line} -F 2 --in_layout {combo[0]} --out_layout {combo[1]} "
                 f"--fil_layout {combo[2]}".split()).problem


def _inputs(p, seed=5):
    rng = np.random.default_rng(seed)
    st_ = layouts.storage_dtype(p.dtype)
    return (rng.uniform(-1, 1, layouts.dy_shape(p)).astype(st_), rng.uniform(-1, 1, layouts.w_shape(p)).astype(st_))


def _run_fake(tmp_path, sol, p):
    """dX of ``sol`` on the computing fake device, checked against the float64 reference and
    the CPU engine; returns the device's calls."""
    rt = ComputingRuntime(sol)
    dy, w = _inputs(p)
    dx = GpuEngine(rt, BinaryCache(tmp_path)).run(sol, dy, w)
    assert dx.shape == layouts.dx_shape(p)
    v = verify(p, dx, dgrad_reference(p, dy, w))
    assert v.ok and v.nonfinite == 0, (sol.kernel_name, v)
    assert np.array_equal(CpuEngine(sol.target).run(sol, dy, w), dx)
    return rt.calls


# ------------------------------------------------------------------ the rule, by hand
def test_the_rule_by_hand():
    p = _p("-n 2 -c 8 -H 5 -W 5 -k 8 -y 3 -x 3 -p 1 -q 1")              # Hi*Wi = 25, odd
    for sched in KernelSchedule:
        want = sched in (KernelSchedule.WARP_MMA, KernelSchedule.WGMMA,      # persistent: registers (H200)
                         KernelSchedule.WGMMA_TMA, KernelSchedule.WGMMA_TMA_PINGPONG, KernelSchedule.GROUP_PACK,
                         KernelSchedule.GROUP_PACK_WGMMA)
        assert nchw_dx_rule(p, sched, 1) is want, sched
    assert not nchw_dx_rule(p.replace(in_layout="NHWC"), KernelSchedule.WARP_MMA, 1)
    # split-K: fp32 adds single elements; 16-bit ones add aligned pairs, so Hi*Wi must be even
    assert nchw_dx_rule(p.replace(dtype="fp32"), KernelSchedule.WARP_MMA, 4)
    assert not nchw_dx_rule(p, KernelSchedule.WARP_MMA, 2)
    assert nchw_dx_rule(p.replace(Wi=6), KernelSchedule.WARP_MMA, 2)
    # C = 1: NCHW and NHWC are one order; the kernel stores NHWC, no transform at all
    one = _p("-n 2 -c 1 -H 5 -W 5 -k 8 -y 3 -x 3 -p 1 -q 1")
    assert not nchw_dx_rule(ap.launch_problem(one), KernelSchedule.WARP_MMA, 1)


def test_the_launch_problem_keeps_dx_order():
    p = _p("-n 2 -c 8 -H 5 -W 5 -k 8 -y 3 -x 3 -p 1 -q 1", combo=("NCHW", "NCHW", "NCHW"))
    q = native_problem(ap.launch_problem(p))      # the kernel's problem (launch_spec)
    assert (q.in_layout, q.out_layout, q.fil_layout) == ("NCHW", "NHWC", "NHWC")
    q = native_problem(ap.launch_problem(p.replace(in_layout="NHWC")))
    assert (q.in_layout, q.out_layout, q.fil_layout) == ("NHWC", "NHWC", "NHWC")


def test_spec_name_vectors_and_source():
    """One element per store (vec_c 1, zero_vector 1), a ``_dxnchw`` name, the nchw_dx
    sections and define in the source; the NHWC kernel's source has none of them."""
    p = _p("-n 2 -c 64 -H 14 -W 14 -k 64 -y 1 -x 1 -u 2 -v 1")          # 1x1 stride 2: zero-fill blocks
    spec = make_spec(ap.launch_problem(p), SM90, PerfConfig.parse(WARP_MMA))
    nhwc = make_spec(ap.launch_problem(p.replace(in_layout="NHWC")), SM90, PerfConfig.parse(WARP_MMA))
    assert spec.nchw_dx and not nhwc.nchw_dx and spec.zero_fill == "blocks"
    assert (spec.vec_c, spec.zero_vector, nhwc.vec_c, nhwc.zero_vector) == (1, 1, 8, 8)
    # zero-fill blocks: one element per thread and step over N*Hi*Wi*C = 2*14*14*64 = 25088 / 128 threads
    assert (spec.threads, spec.zero_fill_blocks) == (128, 196)
    assert spec.kernel_name.endswith("_tilde1_zfb_dxnchw_n2c64h14w14k64y1x1p0x0s2x1d1x1g1")
    assert "_v8v8v1_" in spec.kernel_name and "_v8v8v8_" in nhwc.kernel_name
    text, plain = spec.emit().text, nhwc.emit().text
    assert "#define DG_DX_NCHW 1" in text and "dg_nchw_offset" in text and "// #" not in text
    assert "NCHW" not in plain and "nchw" not in plain


@pytest.mark.parametrize("cfg", [PERSISTENT, None], ids=["persistent", "direct"])
def test_other_schedules_keep_the_dx_transform(tmp_path, cfg):
    line = "-n 2 -c 64 -H 6 -W 6 -k 64 -y 1 -x 1" if cfg else "-n 2 -c 16 -H 7 -W 7 -k 16 -y 3 -x 3 -p 1 -q 1 -g 4"
    p = _p(line)
    sol = SOLVER.find_solution(p, SM90, perf_config=cfg)
    assert sol.schedule in (KernelSchedule.WGMMA_PERSISTENT, KernelSchedule.DIRECT)
    assert not writes_nchw_dx(sol.spec) and "_dxnchw" not in sol.kernel_name
    assert sol.transforms[-1].tensor == "dX" and sol.kernel_name.endswith("_dx")
    if sol.schedule is KernelSchedule.DIRECT:          # (one schedule's launch plan is enough here)
        names = [c[1] for c in _run_fake(tmp_path, sol, p) if c[0] == "launch"]
        assert names[-1] == sol.transforms[-1].kernel_name and names[-1].startswith("dgrad_transpose_")


def test_16_bit_split_k_with_odd_planes_keeps_the_dx_transform(tmp_path):
    p = _p("-n 2 -c 8 -H 5 -W 5 -k 8 -y 3 -x 3 -p 1 -q 1")                 # Hi*Wi = 25
    sol = SOLVER.find_solution(p, SM90, perf_config=WARP_MMA_SK3)
    assert sol.spec.split_k == 3 and not sol.spec.nchw_dx
    assert [t.tensor for t in sol.transforms] == ["dY", "W", "dX"]
    _run_fake(tmp_path, sol, p)


# ------------------------------------------------------------------ whole runs
LINES = [
    ("-n 2 -c 24 -H 9 -W 7 -k 16 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2", "fp16"),       # strided tilde (4 sub-GEMMs)
    ("-n 3 -c 8 -H 5 -W 6 -k 12 -y 1 -x 1", "bf16"),                              # pointwise
    ("-n 2 -c 6 -H 5 -W 6 -k 12 -y 3 -x 2 -p 1 -q 0 -g 2", "fp32"),               # grouped
    ("-n 2 -c 34 -H 5 -W 8 -k 18 -y 2 -x 3 -p 1 -q 1 -l 2 -j 1", "fp16"),        # odd cpg, dilation
    ("-n 2 -c 16 -H 9 -W 8 -k 8 -y 1 -x 1 -u 2 -v 1", "fp16"),                    # 1x1 stride 2: zero-fill blocks
    ("-n 2 -c 16 -H 9 -W 8 -k 8 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 -l 2 -j 2", "bf16"),  # gcd(s, d) = 2: zero-fill blocks
]
CONFIGS = [WARP_MMA, WARP_MMA_SK3, WGMMA, WGMMA_SK2, PERSISTENT]


@pytest.mark.parametrize("combo", COMBOS, ids=lambda c: "-".join(c))
@pytest.mark.parametrize("cfg", CONFIGS)
@pytest.mark.parametrize("line,dtype", LINES)
def test_every_layout_combination_and_schedule(tmp_path, line, dtype, cfg, combo):
    """Schedules 0/1/2 (and split-K) over every mix of NCHW and NHWC: where dX is NCHW and
    the rule holds (schedules 0 and 1), the kernel takes the user's dX pointer and no dX
    transform runs; the persistent schedule keeps the dX transform."""
    p = _p(line, dtype, combo)
    cfg = FP32.get(cfg, cfg) if dtype == "fp32" else cfg
    try:
        sol = SOLVER.find_solution(p, SM90, perf_config=cfg)
    except PerfConfigError as e:    # the wgmma schedules take fp16/bf16 only
        assert dtype == "fp32" and "fp16 or bf16" in str(e), e
        pytest.skip(str(e))
    dx_nchw = combo[0] == "NCHW"
    want = dx_nchw and sol.schedule is not KernelSchedule.WGMMA_PERSISTENT and p.sW // gcd(p.sW, p.dW) == 1 \
        and (sol.spec.split_k == 1 or dtype == "fp32" or p.Hi * p.Wi % 2 == 0)
    assert sol.spec.nchw_dx is want
    assert ("_dxnchw" in sol.kernel_name) is want
    assert ("dX" in [t.tensor for t in sol.transforms]) is (dx_nchw and not want)
    assert sol.workspace_bytes == sum(-(-t.nbytes // 256) * 256 for t in sol.transforms)
    calls = _run_fake(tmp_path, sol, p)
    dx_ptr = [c[1] for c in calls if c[0] == "alloc"][2]                  # dY, W, dX
    kernel = [c for c in calls if c[0] == "launch" and c[1] == sol.spec.kernel_name]
    assert len(kernel) == 1 and (kernel[0][-1][2] == dx_ptr) is (not dx_nchw or want)


@pytest.mark.parametrize("cfg", [WARP_MMA, WARP_MMA_SK3, WGMMA])
def test_split_n_three_chunks_store_nchw_at_their_offsets(monkeypatch, tmp_path, cfg):
    """Three launches, each with the user's dX pointer offset by its images (an image of an
    NCHW dX is C*Hi*Wi contiguous elements); split-K's memset clears each chunk's images."""
    p = _p("-n 6 -c 16 -H 6 -W 5 -k 4 -y 3 -x 3 -p 1 -q 1 -u 2 -v 1", "bf16")   # W 1152 bytes
    img = 16 * 6 * 5 * 2
    monkeypatch.setattr(ap, "TENSOR_BYTES_LIMIT", 2 * img)
    sol = SOLVER.find_solution(p, SM90, perf_config=cfg)
    assert sol.n_chunks == 3 and sol.spec.nchw_dx and [t.tensor for t in sol.transforms] == ["dY", "W"]
    calls = _run_fake(tmp_path, sol, p)
    dx_ptr = [c[1] for c in calls if c[0] == "alloc"][2]
    kernel = [c[-1] for c in calls if c[0] == "launch" and c[1] == sol.spec.kernel_name]
    assert [a[2] - dx_ptr for a in kernel] == [0, 2 * img, 4 * img]
    memsets = [c for c in calls if c[0] == "memset" and c[2] == 0]
    assert [(c[1] - dx_ptr, c[3]) for c in memsets] == ([(0, 2 * img), (2 * img, 2 * img), (4 * img, 2 * img)]
                                                        if sol.spec.split_k > 1 else [])


def test_the_record_round_trips_and_the_key_is_unchanged():
    p = _p("-n 3 -c 8 -H 5 -W 6 -k 12 -y 3 -x 1 -p 1 -q 0", "bf16", ("NCHW", "NHWC", "NCHW"))
    sol = SOLVER.find_solution(p, SM90, perf_config=WGMMA)
    back = Solution.from_record(sol.to_record())
    assert sol.spec.nchw_dx and back.spec.nchw_dx and back.spec.kernel_name == sol.spec.kernel_name
    assert back.transforms == sol.transforms and [t.tensor for t in sol.transforms] == ["W"]
    assert back.kernel_name == sol.kernel_name == sol.spec.kernel_name + "+transpose_w"
    assert back.problem == sol.problem == p and back.workspace_bytes == sol.workspace_bytes
    assert sol.problem.problem_key() == p.problem_key()
    assert SOLVER.get_workspace_size(p, SM90, PerfConfig.parse(WGMMA)) == sol.workspace_bytes
    # without a config: what any config may need (dX copied too), as MIOpen sizes it
    assert SOLVER.get_workspace_size(p, SM90) == workspace_bytes(layout_transforms(p)) > sol.workspace_bytes


def test_a_spec_that_stores_nchw_refuses_an_nhwc_dx():
    from miopen_solver.solver import solution_of
    p = _p("-n 2 -c 8 -H 6 -W 6 -k 8 -y 3 -x 3 -p 1 -q 1")
    spec = make_spec(ap.launch_problem(p), SM90, PerfConfig.parse(WARP_MMA))
    assert layout_transforms(p, nchw_dx=True) == layout_transforms(p)[:2]
    with pytest.raises(ValueError, match="stores dX NCHW"):
        solution_of(spec, problem=p.replace(in_layout="NHWC"))


# ------------------------------------------------------------------ the kernels build
BUILD_CASES = [   # (line, dtype, config)
    ("-n 2 -c 64 -H 28 -W 28 -k 64 -y 3 -x 3 -p 1 -q 1", "fp16", "128,64,32,2,2,64,32,0,0,0,1,-1,3"),
    ("-n 2 -c 64 -H 14 -W 14 -k 64 -y 3 -x 3 -p 1 -q 1", "fp16", WARP_MMA_SK3),
    ("-n 2 -c 64 -H 14 -W 14 -k 64 -y 3 -x 3 -p 1 -q 1", "fp32", FP32[WARP_MMA_SK3]),
    ("-n 2 -c 256 -H 14 -W 14 -k 128 -y 1 -x 1 -u 2 -v 1", "bf16", WARP_MMA),          # zero-fill blocks
]
WG_BUILD_CASES = [
    ("-n 2 -c 128 -H 20 -W 20 -k 128 -y 3 -x 3 -p 1 -q 1", "fp16", WGMMA),
    ("-n 2 -c 128 -H 20 -W 20 -k 128 -y 3 -x 3 -p 1 -q 1", "bf16", WGMMA_SK2),
    ("-n 2 -c 256 -H 14 -W 14 -k 256 -y 1 -x 1", "fp16", "128,256,64,2,1,64,256,0,0,0,1,-1,3,1"),
]


def _nchw_spec(line, dtype, cfg, arch):
    spec = make_spec(ap.launch_problem(_p(line, dtype)), get_target(arch), PerfConfig.parse(cfg))
    assert spec.nchw_dx, spec.kernel_name
    return spec


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc on this machine")
@pytest.mark.parametrize("arch,case", [("sm_80", c) for c in BUILD_CASES] + [("sm_90", c) for c in BUILD_CASES + WG_BUILD_CASES])
def test_nchw_dx_kernels_compile_for_nvidia_without_spills(tmp_path, arch, case):
    from miopen_solver.kernels.offline import inspect_nvidia
    spec = _nchw_spec(*case, arch)
    b = inspect_nvidia(spec.emit().text, arch, tmp_path, "k")
    assert b.spill_store_bytes == b.spill_load_bytes == b.stack_bytes == 0, (spec.kernel_name, b.registers)
    assert b.count("st.global.v4") == 0          # dX one element per store, no NHWC vector path
    if spec.split_k > 1:
        assert b.count("red.global.add") + b.count("atom.global.add") >= 1


AMD_BUILD_CASES = [   # (line, dtype, split-K setting) on the default config
    ("-n 2 -c 64 -H 28 -W 28 -k 64 -y 3 -x 3 -p 1 -q 1", "fp16", None),
    ("-n 2 -c 64 -H 14 -W 14 -k 64 -y 3 -x 3 -p 1 -q 1", "fp16", 4),
    ("-n 2 -c 64 -H 14 -W 14 -k 64 -y 3 -x 3 -p 1 -q 1", "fp32", 4),
    ("-n 2 -c 256 -H 14 -W 14 -k 128 -y 1 -x 1 -u 2 -v 1", "bf16", None),          # zero-fill blocks
]


@pytest.mark.parametrize("arch", ["gfx90a", "gfx942"])
@pytest.mark.parametrize("line,dtype,split_k", AMD_BUILD_CASES)
def test_nchw_dx_kernels_compile_for_amd_without_scratch(arch, line, dtype, split_k):
    from miopen_solver.kernels.offline import compile_amd, find_amd_clang
    if find_amd_clang() is None:
        pytest.skip("no clang with the amdgcn target")
    sol = SOLVER.find_solution(_p(line, dtype), get_target(arch), split_k=split_k)
    assert sol.spec.nchw_dx and sol.spec.split_k == (split_k or 1), sol.kernel_name
    src = sol.kernels[0].source
    co = compile_amd(src.text, arch, name=src.name)
    assert co.resources["ScratchSize [bytes/lane]"] == 0 and co.resources["VGPRs Spill"] == 0, co.resources
