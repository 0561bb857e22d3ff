"""NCHW and mixed NCHW/NHWC problems on GPU targets (issue 16, part 1): layout transforms
through a workspace around the NHWC kernel (dY and W before it; dX after it unless the kernel
stores dX NCHW itself, ``transpose.writes_nchw_dx``: tests/test_nchw_dx.py).

The transforms' shapes are checked by hand, their host form against ``layouts.convert``
(an independent, letter-driven permutation), and whole runs on the GPU engine over a fake
device that executes the transpose from its launch arguments and the dgrad kernel as the
CPU engine (``test_split_n.ComputingRuntime``), against the float64 reference.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from miopen_solver import applicability as ap
from miopen_solver import layouts, transpose
from miopen_solver.command import parse
from miopen_solver.kernels.emit import emit_transpose
from miopen_solver.problem import ConvProblem
from miopen_solver.heuristics import max_stream_k_workspace
from miopen_solver.reference import dgrad_reference, verify
from miopen_solver.runtime.cache import BinaryCache
from miopen_solver.runtime.cpu import CpuEngine
from miopen_solver.runtime.gpu import POISON_BYTE, GpuEngine
from miopen_solver.solver import DgradSolver, Solution
from miopen_solver.target import get_target
from miopen_solver.transpose import LayoutTransform, layout_transforms, memory_order, workspace_bytes

from test_split_n import ComputingRuntime

SOLVER = DgradSolver()
SM90 = get_target("sm_90")
COMBOS = list(itertools.product(("NCHW", "NHWC"), repeat=3))      # (in, out, fil)


def _p(line):
    return parse(line.split()).problem


def _inputs(p, seed=3):
    rng = np.random.default_rng(seed)
    st_ = layouts.storage_dtype(p.dtype)
    return (rng.uniform(-1, 1, layouts.dy_shape(p)).astype(st_), rng.uniform(-1, 1, layouts.w_shape(p)).astype(st_))


# ------------------------------------------------------------------ the plan, by hand
def test_transforms_of_an_nchw_line_by_hand():
    # fp16 N=2, C=24 (G=2: cpg 12), K=16, 9x7 -> 3x3 s2 p1 -> Ho=5, Wo=4
    p = _p("convfp16 -n 2 -c 24 -H 9 -W 7 -k 16 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 -g 2 -F 2")
    dy, w, dx = layout_transforms(p)
    assert (dy.tensor, dy.src, dy.dst, dy.batch, dy.rows, dy.cols) == ("dY", "NCHW", "NHWC", 2, 16, 5 * 4)
    assert (w.tensor, w.batch, w.rows, w.cols) == ("W", 16, 12, 9)            # (K, cpg, Y*X)
    assert (dx.tensor, dx.src, dx.dst, dx.batch, dx.rows, dx.cols) == ("dX", "NHWC", "NCHW", 2, 63, 24)
    # fp16 slots, 256-byte aligned: dY 640 elements = 1280 bytes; W 1728 = 3456 -> 3584;
    # dX 3024 = 6048 -> 6144
    assert (dy.offset, w.offset, dx.offset) == (0, 1280, 1280 + 3584)
    assert workspace_bytes((dy, w, dx)) == 1280 + 3584 + 6144
    assert dy.before and w.before and not dx.before
    # W's 9 taps: the band form, whole matrices to a block (4096 fp16 elements: 37); dY's 20
    # and dX's 24 columns are even: 64x64 tiles
    assert w.kernel_form == "band" and w.grid == (1, 1, 1)
    assert dy.kernel_form == dx.kernel_form == "tile" and dy.grid == (1, 2, 1) and dx.grid == (1, 2, 1)
    tile = {**dx.to_record(), "form": "tile"}
    assert LayoutTransform(**tile).grid == (1, 2, 1)                                      # 64x64 tiles
    assert LayoutTransform(**{**tile, "rows": 65, "elem_bytes": 4}).grid == (3, 2, 1)     # 32x32
    assert LayoutTransform(**{**tile, "batch": 70000}).grid[1] == 65535
    band = {**dx.to_record(), "form": "band"}
    assert LayoutTransform(**{**band, "rows": 65, "elem_bytes": 4}).grid == (2, 1, 1)    # 1560 of 2048
    assert LayoutTransform(**{**band, "rows": 4000, "batch": 70000}).grid == (4000 // 168 + 1, 65535, 1)
    assert LayoutTransform(**{**band, "rows": 9, "cols": 4000, "batch": 70000}).grid == (4000 // 448 + 1, 65535, 1)


def test_nhwc_bytes_need_no_transform():
    """A tensor whose flag is NCHW but whose bytes are NHWC's (1x1 W, C=1 dX, H=W=1) moves
    nothing; the workspace is only what moves."""
    p = _p("convfp16 -n 2 -c 16 -H 6 -W 5 -k 8 -y 1 -x 1 -F 2")          # all NCHW, 1x1
    assert memory_order(p, "W") == "NHWC" and memory_order(p, "dY") == "NCHW"
    assert [t.tensor for t in layout_transforms(p)] == ["dY", "dX"]
    assert layout_transforms(p.replace(in_layout="NHWC", out_layout="NHWC")) == ()
    fc = _p("convfp16 -n 2 -c 16 -H 1 -W 1 -k 8 -y 1 -x 1 -F 2")
    # no copy: the workspace is only what the search's stream-K configs need (flags and
    # slots), none in fp32 (no TMA schedule)
    assert layout_transforms(fc) == () and SOLVER.get_workspace_size(fc, SM90) == max_stream_k_workspace(fc, SM90)
    assert SOLVER.get_workspace_size(fc.replace(dtype="fp32"), SM90) == 0


@pytest.mark.parametrize("line,nchw_dx", [
    ("conv -n 2 -c 8 -H 5 -W 5 -k 4 -y 3 -x 3 -p 1 -q 1 -F 2", True),            # warp-MMA (FFMA)
    ("convfp16 -n 2 -c 16 -H 7 -W 7 -k 16 -y 3 -x 3 -p 1 -q 1 -g 4 -F 2", False),  # direct, cpg 4: dX transform
])
def test_workspace_is_reported_like_miopen(line, nchw_dx):
    p = _p(line)
    sol = SOLVER.find_solution(p, SM90)
    assert sol.spec.nchw_dx is nchw_dx if hasattr(sol.spec, "nchw_dx") else not nchw_dx
    # fp32 dY 2*4*5*5 = 200 elements = 800 bytes -> 1024; W 4*8*9 = 288 = 1152 -> 1280; dX 800 -> 1024
    expect = {True: 1024 + 1280, False: workspace_bytes(layout_transforms(p))}[nchw_dx]
    assert sol.workspace_bytes == expect == SOLVER.get_workspace_size(p, SM90, sol.perf_config) > 0
    # without a config: what any config may need (every NCHW tensor copied), as MIOpen sizes it
    assert SOLVER.get_workspace_size(p, SM90) == workspace_bytes(layout_transforms(p)) >= expect
    assert sol.as_dict()["workspace_bytes"] == expect
    tensors = ["dY", "W"] if nchw_dx else ["dY", "W", "dX"]     # cpg 4: W (16, 4, 3, 3) is moved
    assert [t["tensor"] for t in sol.as_dict()["layout_transforms"]] == tensors
    assert any(n.startswith("Layout: " + ", ".join(t.label for t in sol.transforms)) for n in sol.notes)


def test_nchw_depthwise_default_needs_no_workspace():
    """MIOpen's default NCHW depthwise line runs on the plane schedule in place: its solution
    has no transform and no workspace; without a config the size still covers any config."""
    p = _p("convfp16 -n 2 -c 8 -H 7 -W 7 -k 8 -y 3 -x 3 -p 1 -q 1 -g 8 -F 2")
    sol = SOLVER.find_solution(p, SM90)
    assert sol.spec.schedule.slug == "direct-plane" and sol.transforms == ()
    assert sol.workspace_bytes == 0 == SOLVER.get_workspace_size(p, SM90, sol.perf_config)
    assert SOLVER.get_workspace_size(p, SM90) == workspace_bytes(layout_transforms(p)) > 0


def test_the_key_is_the_problem_s_and_the_kernel_reads_nhwc():
    """The perf-db key is the NCHW problem's; the config is the NHWC problem's; the kernel
    reads the NHWC copies of dY and W and stores dX NCHW (its name says so, dX stored one
    element at a time: vector width 1)."""
    p = _p("convfp16 -n 2 -c 16 -H 6 -W 6 -k 8 -y 3 -x 3 -p 1 -q 1 -F 2")
    nchw, nhwc = SOLVER.find_solution(p, SM90), SOLVER.find_solution(
        p.replace(in_layout="NHWC", out_layout="NHWC", fil_layout="NHWC"), SM90)
    assert nchw.problem.problem_key() == p.problem_key() and p.problem_key().endswith("-NCHW-FP16-B")
    assert nchw.perf_config == nhwc.perf_config and nhwc.spec.vec_c == 8
    assert nchw.spec.kernel_name == nhwc.spec.kernel_name.replace("v8_sk1", "v1_sk1").replace("_n2c16", "_dxnchw_n2c16")
    assert nchw.kernel_name == nchw.spec.kernel_name + "+transpose_dy_w"
    assert nchw.problem.in_layout == "NCHW"
    assert (nchw.spec.problem.in_layout, nchw.spec.problem.out_layout, nchw.spec.problem.fil_layout) == \
        ("NCHW", "NHWC", "NHWC")


def test_the_record_carries_the_transforms():
    p = _p("convbfp16 -n 3 -c 8 -H 5 -W 6 -k 12 -y 3 -x 1 -p 1 -q 0 -F 2 --out_layout NHWC")
    sol = SOLVER.find_solution(p, SM90)
    back = Solution.from_record(sol.to_record())
    assert back.transforms == sol.transforms and back.problem == sol.problem == p
    assert back.kernel_name == sol.kernel_name and back.workspace_bytes == sol.workspace_bytes
    for form in ("", "tile", "band"):           # a forced form is in the record
        t = LayoutTransform("W", "NCHW", "NHWC", 12, 8, 3, 2, 256, form=form)
        assert t.to_record().get("form", "") == form


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 3), st.integers(1, 9), st.integers(1, 9), st.integers(1, 4), st.integers(1, 4),
       st.integers(1, 3), st.sampled_from(COMBOS))
def test_the_host_transform_is_the_layout_conversion(n, c, k, h, w, g, combo):
    """``LayoutTransform.apply`` (what the kernel does) turns each user tensor into its NHWC
    copy exactly as ``layouts.convert`` does, and the dX copy back."""
    p = ConvProblem(N=n, C=c * g, K=k * g, G=g, Hi=h + 2, Wi=w + 2, Y=3, X=2, dtype="fp32",
                    in_layout=combo[0], out_layout=combo[1], fil_layout=combo[2])
    rng = np.random.default_rng(n * 100 + c)
    dy, wt = _inputs(p, int(rng.integers(1 << 30)))
    dx = rng.standard_normal(layouts.dx_shape(p)).astype(np.float32)
    for t in layout_transforms(p):
        if t.tensor == "dY":
            assert np.array_equal(t.apply(dy), layouts.dy_to_nhwc(p, dy).reshape(-1))
        elif t.tensor == "W":
            assert np.array_equal(t.apply(wt), layouts.w_to_kyxc(p, wt).reshape(-1))
        else:
            nhwc = layouts.dx_to_nhwc(p, dx)
            assert np.array_equal(t.apply(nhwc), dx.reshape(-1))


# ------------------------------------------------------------------ whole runs
LINES = [
    "convfp16 -n 2 -c 24 -H 9 -W 7 -k 16 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2",      # strided tilde
    "convbfp16 -n 3 -c 8 -H 5 -W 6 -k 12 -y 1 -x 1",                          # pointwise
    "conv -n 2 -c 6 -H 5 -W 6 -k 12 -y 3 -x 2 -p 1 -q 0 -g 2",                 # grouped, fp32
    "convfp16 -n 2 -c 8 -H 7 -W 7 -k 8 -y 3 -x 3 -p 1 -q 1 -g 8",             # depthwise: direct on sm_90
    "convfp16 -n 2 -c 33 -H 5 -W 7 -k 17 -y 2 -x 3 -p 1 -q 1 -l 2 -j 1",      # odd channels, dilation
]


@pytest.mark.parametrize("combo", COMBOS, ids=lambda c: "-".join(c))
@pytest.mark.parametrize("line", LINES)
def test_gpu_engine_runs_every_layout_combination(tmp_path, line, combo):
    """Every mix of NCHW and NHWC: the user's bytes are uploaded as they are, transposed on
    the (fake) device, and dX comes back in ``in_layout`` matching the float64 reference."""
    p = _p(f"{line} -F 2 --in_layout {combo[0]} --out_layout {combo[1]} --fil_layout {combo[2]}")
    sol = SOLVER.find_solution(p, SM90)
    rt = ComputingRuntime(sol)
    dy, w = _inputs(p)
    dx = GpuEngine(rt, BinaryCache(tmp_path)).run(sol, dy, w)
    assert rt.uploads[:2] == [dy.tobytes(), w.tobytes()]
    assert dx.shape == layouts.dx_shape(p)
    v = verify(p, dx, dgrad_reference(p, dy, w))
    assert v.ok and v.nonfinite == 0, (sol.kernel_name, v)
    names = [c[1] for c in rt.calls if c[0] == "launch"]
    pre = [t for t in sol.transforms if t.before]
    first = [f"dgrad_transpose_pair_b{8 * p.elem_bytes}"] if len(pre) == 2 else [t.kernel_name for t in pre]     # dY and W: one launch
    assert names == first + [sol.spec.kernel_name] + [t.kernel_name for t in sol.transforms if not t.before]
    # the CPU engine runs the same transforms and agrees
    assert np.array_equal(CpuEngine(SM90).run(sol, dy, w), dx)


@pytest.mark.parametrize("line", ["convfp16 -n 2 -c 8 -H 5 -W 5 -k 8 -y 3 -x 3 -p 1 -q 1 -F 2",
                                  "convfp16 -n 2 -c 16 -H 7 -W 7 -k 16 -y 3 -x 3 -p 1 -q 1 -g 4 -F 2",
                                  "convfp16 -n 2 -c 8 -H 7 -W 7 -k 8 -y 3 -x 3 -p 1 -q 1 -g 8 -F 2"])
def test_an_unwritten_nchw_dx_is_nan(tmp_path, line):
    """A kernel that writes nothing gives NaN (no stale zeros): the user's dX is poisoned
    where the kernel stores dX NCHW itself (the GEMM epilogue, the plane schedule), and the
    workspace's dX copy is poisoned too where a transform moves it (the direct schedule at
    cpg 4 here)."""
    p = _p(line)
    sol = SOLVER.find_solution(p, SM90)

    class Idle(ComputingRuntime):
        def launch(self, func, grid, block, shared, args):
            if func[1] == self.sol.spec.kernel_name:
                return                      # the dgrad kernel writes nothing
            super().launch(func, grid, block, shared, args)
    rt = Idle(sol)
    dx = GpuEngine(rt, BinaryCache(tmp_path)).run(sol, *_inputs(p))
    assert np.isnan(dx.astype(np.float32)).all()
    after = [t for t in sol.transforms if not t.before]
    if getattr(sol.spec, "nchw_dx", False) or sol.spec.schedule.nchw_native:
        dx_ptr = [c[1] for c in rt.calls if c[0] == "alloc"][2]          # dY, W, dX
        assert after == [] and ("memset", dx_ptr, POISON_BYTE, dx.nbytes) in rt.calls
        return
    (dxt,) = after
    ws = [c[1] for c in rt.calls if c[0] == "alloc" and c[2] == sol.workspace_bytes]
    assert ("memset", ws[0] + dxt.offset, POISON_BYTE, dxt.nbytes) in rt.calls


@pytest.mark.parametrize("cfg", [None, "64,64,16,2,2,32,32,0,0,0,1,-1,2", "64,64,16,2,2,32,32,0,0,0,2,-1,2"],
                         ids=["direct", "warp-mma", "warp-mma-sk2"])
def test_split_n_and_transforms_together(monkeypatch, tmp_path, cfg):
    """Three chunks of the kernel over the workspace copies, the transforms once over the
    whole batch; dX transposed after the direct kernel, stored NCHW by the warp-MMA one (also
    with split-K's memset per chunk and atomic adds)."""
    p = _p("conv -n 6 -c 4 -H 7 -W 7 -k 4 -y 3 -x 3 -p 1 -q 1 -F 2")            # all NCHW, fp32
    monkeypatch.setattr(ap, "TENSOR_BYTES_LIMIT", 2 * 784)
    sol = SOLVER.find_solution(p, SM90, perf_config=cfg)
    nchw_dx = cfg is not None
    assert sol.n_chunks == 3 and [t.tensor for t in sol.transforms] == ["dY", "W"] + ([] if nchw_dx else ["dX"])
    assert all(t.batch == 6 for t in sol.transforms if t.tensor != "W")
    rt = ComputingRuntime(sol)
    dy, w = _inputs(p)
    dx = GpuEngine(rt, BinaryCache(tmp_path)).run(sol, dy, w)
    assert verify(p, dx, dgrad_reference(p, dy, w)).ok
    names = [c[1] for c in rt.calls if c[0] == "launch"]
    before, after = ([t.kernel_name for t in sol.transform_launches if t.before == b] for b in (True, False))
    assert before == ["dgrad_transpose_pair_b32"] and all(n.startswith("dgrad_transpose_b") for n in after)
    assert names == before + [sol.spec.kernel_name] * 3 + after and len(after) == (0 if nchw_dx else 1)


def test_timing_counts_the_transforms(tmp_path):
    """A timed run and a graph replay hold every transform, as MIOpen's kernel time counts
    every kernel of the invoker."""
    p = _p("convfp16 -n 2 -c 8 -H 5 -W 5 -k 8 -y 3 -x 3 -p 1 -q 1 -F 2")
    sol = SOLVER.find_solution(p, SM90)
    rt = ComputingRuntime(sol)
    rt.elapsed_ms = lambda a, b: 1.0
    eng = GpuEngine(rt, BinaryCache(tmp_path))
    eng.time(sol, *_inputs(p), iters=2, warmup=1)
    assert len(sol.transforms) == 2            # dY, W (one launch); the kernel stores dX NCHW
    assert sum(c[0] == "launch" for c in rt.calls) == 3 * 2


# ------------------------------------------------------------------ the kernel source
def test_transpose_source_depends_only_on_the_width_and_form():
    a = emit_transpose(2, "nvidia", "sm_90", (1, 1, 1), (32, 8, 1))
    b = emit_transpose(2, "nvidia", "sm_90", (9, 4, 1), (32, 8, 1))
    assert a.sha256 == b.sha256 and a.name == "dgrad_transpose_b16"
    assert emit_transpose(4, "nvidia", "sm_90", (1, 1, 1), (32, 8, 1)).name == "dgrad_transpose_b32"
    c = emit_transpose(2, "nvidia", "sm_90", (3, 1, 1), (32, 8, 1), "band")
    assert c.name == "dgrad_transpose_band_b16" and c.sha256 != a.sha256
    with pytest.raises(ValueError, match="allowed: 2, 4"):
        emit_transpose(1, "nvidia", "sm_90", (1, 1, 1), (32, 8, 1))
    d = emit_transpose(2, "nvidia", "sm_90", (3, 1, 1), (32, 8, 1), "pair")
    assert d.name == "dgrad_transpose_pair_b16" and d.sha256 not in (a.sha256, c.sha256)
    with pytest.raises(ValueError, match="allowed: tile, band, pair"):
        emit_transpose(2, "nvidia", "sm_90", (1, 1, 1), (32, 8, 1), "slab")


def test_transform_form_by_shape():
    """An odd number of columns up to 64 (a filter's taps, a 7x7 image) in whole matrices or
    bands of rows: the band form; its grid covers every band (or group of whole matrices) of
    the batch. Even widths of 32 bytes or more and bands of columns: the tile form (measured
    faster on the H200).
    A forced band form it cannot take is refused."""
    w = LayoutTransform("W", "NCHW", "NHWC", 512, 512, 9, 2, 0)          # KCYX -> KYXC, 3x3
    assert w.kernel_form == "band" and w.kernel_name == "dgrad_transpose_band_b16"
    assert w.band_mode == "rows" and w.band_width == 448 and w.grid == (2, 512, 1)   # 4096 // 9 = 455 -> 448
    small = LayoutTransform("W", "NCHW", "NHWC", 64, 64, 9, 4, 0)        # 576 elements: 3 per block
    assert small.kernel_form == "band" and small.band_mode == "whole" and small.grid == (22, 1, 1)
    dy7 = LayoutTransform("dY", "NCHW", "NHWC", 32, 512, 49, 2, 0)         # 80-row bands
    assert dy7.kernel_form == "band" and dy7.grid == (7, 32, 1)
    for batch, rows, cols in ((32, 128, 56 * 56), (32, 64, 56 * 56), (1, 256, 64), (1, 64, 256), (4, 512, 16)):
        t = LayoutTransform("dY", "NCHW", "NHWC", batch, rows, cols, 2, 0)
        assert t.kernel_form == "tile" and t.kernel_name == "dgrad_transpose_b16", (rows, cols)
    assert LayoutTransform("dY", "NCHW", "NHWC", 32, 128, 3136, 2, 0).grid == (98, 32, 1)
    dx = LayoutTransform("dX", "NHWC", "NCHW", 32, 49, 2048, 2, 0)         # a 7x7 image's NHWC dX
    assert dx.kernel_form == "tile" and dx.band_mode == "cols" and dx.band_width == 80
    assert LayoutTransform(**{**dx.to_record(), "form": "band"}).grid == (26, 32, 1)
    w48 = LayoutTransform("W", "NCHW", "NHWC", 8, 48, 49, 4, 0)            # fp32 7x7, cpg 48: bands of columns
    assert w48.band_mode == "cols" and w48.kernel_form == "tile"
    with pytest.raises(ValueError, match="a band must hold 8 rows or columns"):
        LayoutTransform("dY", "NCHW", "NHWC", 1, 640, 4096, 2, 0, form="band")
    with pytest.raises(ValueError, match="allowed: tile, band"):
        LayoutTransform("dY", "NCHW", "NHWC", 1, 64, 64, 2, 0, form="slab")


@pytest.mark.parametrize("form", ["tile", "band", "pair"])
@pytest.mark.parametrize("eb", [2, 4])
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_transpose_compiles_for_nvidia_without_spills(eb, arch, form):
    import shutil
    from miopen_solver.kernels.offline import inspect_nvidia
    if shutil.which("nvcc") is None:
        pytest.skip("no nvcc on this machine")
    src = emit_transpose(eb, "nvidia", arch, (1, 1, 1), (32, 8, 1), form)
    build = inspect_nvidia(src.text, arch, name=src.name)
    assert build.spill_store_bytes == build.spill_load_bytes == build.stack_bytes == 0
    assert build.registers <= 64            # 256 threads: 8 blocks of 256 fit an SM's registers


@pytest.mark.parametrize("form", ["tile", "band", "pair"])
@pytest.mark.parametrize("eb", [2, 4])
@pytest.mark.parametrize("arch", ["gfx90a", "gfx942"])
def test_transpose_compiles_for_amd_without_scratch(eb, arch, form):
    from miopen_solver.kernels.offline import compile_amd, find_amd_clang
    if find_amd_clang() is None:
        pytest.skip("no clang with the amdgcn target")
    src = emit_transpose(eb, "amd", arch, (1, 1, 1), (32, 8, 1), form)
    co = compile_amd(src.text, arch, name=src.name)
    assert co.resources["ScratchSize [bytes/lane]"] == 0 and co.resources["VGPRs Spill"] == 0, co.resources


# Shapes of both transpose forms: whole matrices several to a block (with a short last group),
# bands of rows (a short last band), odd and even sizes (16-byte, 4-byte and scalar paths),
# the filters' KCYX -> KYXC (cols = Y*X; 2, 4 and 6 taps: even rows under a sector), dY of 7x7 and 56x56 images, a 1 x n row, bands of
# columns (an NHWC dX of 7x7 images, odd widths).
TRANSPOSE_SHAPES = [(5, 3, 9), (70, 64, 9), (3, 512, 9), (2, 512, 49), (2, 136, 49), (1, 64, 64), (2, 65, 63),
                    (3, 7, 1), (2, 40, 3136), (1, 1, 4096 * 3), (4, 300, 17), (2, 24, 40), (2, 49, 2048),
                    (3, 9, 1000), (2, 49, 1001), (2, 196, 520), (3, 512, 2), (2, 384, 4), (2, 100, 8), (5, 7, 6)]


@pytest.mark.skipif(not __import__("kernel_emu").available(), reason="clang++ not on PATH")
@pytest.mark.parametrize("eb", [2, 4])
@pytest.mark.parametrize("batch,rows,cols", TRANSPOSE_SHAPES)
def test_transpose_kernels_are_bit_exact_on_the_emulator(tmp_path, eb, batch, rows, cols):
    """Each form the shape takes (the band form only where a band holds 8 rows or whole
    matrices), run on the CPU emulator over random bits into a poisoned dst: dst is exactly
    the transposed src, every element written."""
    import kernel_emu
    forms = ["tile"]
    try:
        LayoutTransform("dY", "NCHW", "NHWC", batch, rows, cols, eb, 0, form="band")
        forms.append("band")
    except ValueError:
        pass
    rng = np.random.default_rng(batch * rows + cols)
    a = rng.integers(0, 1 << (8 * eb), size=batch * rows * cols, dtype=np.uint64).astype(f"u{eb}")
    want = a.reshape(batch, rows, cols).transpose(0, 2, 1).reshape(-1)
    for form in forms:
        t = LayoutTransform("dY", "NCHW", "NHWC", batch, rows, cols, eb, 0, form=form)
        src = t.emit("nvidia", "sm_90")
        out = kernel_emu.launch_transpose(src.text, t.grid, t.block, a.tobytes(), b"\xff" * a.nbytes,
                                          batch, rows, cols, tmp_path, form)
        assert np.array_equal(np.frombuffer(out, dtype=f"u{eb}"), want), (form, t.grid)


def test_the_transforms_before_the_kernel_run_in_one_launch():
    """dY's and W's transforms run as one pair launch whose grid is both their grids' blocks
    and whose arguments are each transform's sizes, own grid and form; dX's runs alone after
    the kernel; a single transform runs in its own form; a pair past PAIR_MAX_BLOCKS runs
    apart."""
    p = _p("convfp16 -n 4 -c 64 -H 14 -W 14 -k 128 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 -F 2")    # dX NHWC -> NCHW too
    sol = SOLVER.find_solution(p, SM90)
    dy, w, dx = sol.transforms
    assert (dy.tensor, w.tensor, dx.tensor) == ("dY", "W", "dX")
    pair, after = sol.transform_launches
    assert pair.transforms == (dy, w) and after.transforms == (dx,)
    assert pair.kernel_name == "dgrad_transpose_pair_b16" and pair.form == "pair" and pair.before
    # the band form for both (odd widths): dY (4, 128, 49) is 6272 > 4096 elements, so bands of
    # 4096 // 49 = 83 -> 80 rows, 2 per matrix; W (128, 64, 9) is 576 elements, 7 whole matrices
    # to a block, 19 blocks
    assert dy.kernel_form == w.kernel_form == "band"
    assert dy.grid == (2, 4, 1) and w.grid == (19, 1, 1) and pair.grid == (2 * 4 + 19, 1, 1)
    assert pair.args([(1, 2), (3, 4)]) == (1, 2, 4, 128, 49, 2, 4, 1, 3, 4, 128, 64, 9, 19, 1, 1)
    assert after.kernel_name == dx.kernel_name and after.grid == dx.grid and not after.before
    assert after.args([(5, 6)]) == (5, 6, 4, 196, 64)
    doc = sol.as_dict()["layout_transforms"]
    assert [(d["tensor"], d["kernel"], d["grid"], d["form"]) for d in doc] == [
        ("dY", "dgrad_transpose_pair_b16", [27, 1, 1], "band"), ("W", "dgrad_transpose_pair_b16", [27, 1, 1], "band"),
        ("dX", dx.kernel_name, list(dx.grid), dx.kernel_form)]
    assert transpose.transform_launches((w,), SM90) == (transpose.TransposeLaunch((w,)),)


@pytest.mark.parametrize("line", [
    "convfp16 -n 8 -c 256 -H 56 -W 56 -k 256 -y 3 -x 3 -p 1 -q 1 -F 2",     # dY + W paired
    "convfp16 -n 32 -c 256 -H 56 -W 56 -k 256 -y 3 -x 3 -p 1 -q 1 -F 2",    # dY too long to pair
    "convfp16 -n 32 -c 256 -H 56 -W 56 -k 512 -y 1 -x 1 -u 2 -v 2 -F 2",    # stride 2: a dX transform after
    "conv -n 4 -c 64 -H 14 -W 14 -k 64 -y 3 -x 3 -p 1 -q 1 -F 2",          # fp32
])
def test_the_report_names_each_transform_launch(line):
    """The run's Layout note and the record's layout_transforms say which launch runs each
    transform: the note lists every launch (its tensors, kernel and grid) in launch order,
    and each JSON entry's ``launch`` is its launch's place in that order -- so a pair shows
    as two entries of one launch, not as two launches with one grid."""
    sol = SOLVER.find_solution(_p(line), SM90)
    launches = transpose.transform_launches(sol.transforms, SM90)
    assert launches == sol.transform_launches and launches
    note = next(n for n in sol.notes if "by batched transposes" in n)
    count = len(launches)
    assert f"in {count} launch{'es' if count != 1 else ''} (" in note
    shown = note.split(" (", 1)[1]
    for x in launches:
        assert f"{' + '.join(t.tensor for t in x.transforms)} {x.kernel_name} grid {'x'.join(map(str, x.grid))}" in shown
    doc = sol.as_dict()["layout_transforms"]
    want = [(i, t.tensor, x.kernel_name, list(x.grid)) for i, x in enumerate(launches) for t in x.transforms]
    assert [(d["launch"], d["tensor"], d["kernel"], d["grid"]) for d in doc] == want
    assert len({d["launch"] for d in doc}) == count


def test_a_pair_with_a_tile_form_transform_fits_four_waves():
    """A tile-form transform pairs only where the pair's blocks fit four waves of 4 resident
    blocks (64 registers x 256 threads of the 64 K an SM holds) on each of the target's
    multiprocessors; two band-form transforms pair at any size up to PAIR_MAX_BLOCKS."""
    assert transpose.pair_resident_blocks(SM90) == 65536 // (64 * 256) == 4
    waves = 4 * 4 * SM90.num_cus                                               # 2112 on the sm_90 preset
    w = LayoutTransform("W", "NCHW", "NHWC", 64, 64, 9, 2, 0)                   # band, 10 blocks
    assert w.kernel_form == "band" and w.grid == (10, 1, 1)

    def paired(dy):
        return [x.transforms for x in transpose.transform_launches((dy, w), SM90)] == [(dy, w)]
    for n in (1, 8, 32, 42, 43, 64):               # dY of 56x56 images, 64 channels: 49 tiles an image
        dy = LayoutTransform("dY", "NCHW", "NHWC", n, 64, 56 * 56, 2, 0)
        assert dy.kernel_form == "tile" and dy.grid == (49, n, 1)
        assert paired(dy) == (49 * n + 10 <= waves) == (n <= 42), n
    dy7 = LayoutTransform("dY", "NCHW", "NHWC", 4096, 512, 49, 2, 0)           # band, 7 x 4096 blocks
    assert dy7.kernel_form == "band" and dy7.grid[0] * dy7.grid[1] > waves and paired(dy7)
    big = LayoutTransform("dY", "NCHW", "NHWC", 65535, 500000, 9, 2, 0)        # 1117 bands x 65535 matrices
    assert big.kernel_form == "band" and big.grid[0] * big.grid[1] > transpose.PAIR_MAX_BLOCKS and not paired(big)
    with pytest.raises(ValueError, match="one transform or two of one element width"):
        transpose.TransposeLaunch((dy, LayoutTransform("W", "NCHW", "NHWC", 1, 1, 9, 4, 0)))


# Pairs of transform shapes: the forms in each order (tile+band, band+tile, tile+tile,
# band+band with whole matrices), grids of several rows of matrices, odd sizes.
PAIR_SHAPES = [((2, 40, 3136), (16, 8, 9)), ((70, 64, 9), (2, 65, 63)), ((2, 65, 63), (1, 64, 64)),
               ((5, 3, 9), (4, 300, 17)), ((2, 512, 49), (3, 7, 1))]


@pytest.mark.skipif(not __import__("kernel_emu").available(), reason="clang++ not on PATH")
@pytest.mark.parametrize("eb", [2, 4])
@pytest.mark.parametrize("shapes", PAIR_SHAPES, ids=lambda s: "+".join("x".join(map(str, x)) for x in s))
def test_the_pair_kernel_is_bit_exact_on_the_emulator(tmp_path, eb, shapes):
    """Two transforms in one launch of the pair kernel, on the CPU emulator over random bits
    into a poisoned buffer holding both outputs (with a gap between them): each output is
    exactly its transposed input, every element written, the gap untouched."""
    import kernel_emu
    rng = np.random.default_rng(sum(map(sum, shapes)))
    ts, srcs, wants = [], [], []
    offset = 0
    for tensor, (batch, rows, cols) in zip(("dY", "W"), shapes):
        t = LayoutTransform(tensor, "NCHW", "NHWC", batch, rows, cols, eb, offset)
        a = rng.integers(0, 1 << (8 * eb), size=batch * rows * cols, dtype=np.uint64).astype(f"u{eb}")
        ts.append(t)
        srcs.append(a.tobytes())
        wants.append(a.reshape(batch, rows, cols).transpose(0, 2, 1).reshape(-1))
        offset += -(-t.nbytes // 256) * 256 + 256
    forms = [t.kernel_form for t in ts]
    launch = transpose.TransposeLaunch(tuple(ts))
    args = launch.args([(0, t.offset) for t in ts])
    jobs = [(ts[0].offset, *args[2:8]), (ts[1].offset, *args[10:16])]
    out = kernel_emu.launch_transpose_pair(launch.emit("nvidia", "sm_90").text, launch.grid, launch.block,
                                           srcs[0], srcs[1], b"\xff" * offset, jobs, tmp_path)
    for t, want in zip(ts, wants):
        got = np.frombuffer(out[t.offset:t.offset + t.nbytes], dtype=f"u{eb}")
        assert np.array_equal(got, want), (t.tensor, forms)
        gap = out[t.offset + t.nbytes:-(-(t.offset + t.nbytes) // 256) * 256 + 256]
        assert gap == b"\xff" * len(gap), "a pair job wrote past its output"


@pytest.mark.parametrize("eb,cols,form", [
    (2, 2, "band"), (2, 4, "band"), (2, 6, "band"), (2, 8, "band"), (2, 14, "band"),     # under a sector
    (2, 16, "tile"), (2, 18, "tile"), (2, 32, "tile"), (2, 64, "tile"),                  # a sector or more
    (2, 9, "band"), (2, 49, "band"), (2, 63, "band"), (2, 65, "tile"), (2, 289, "tile"),  # odd
    (4, 2, "band"), (4, 6, "band"), (4, 8, "tile"), (4, 16, "tile"), (4, 9, "band"), (4, 49, "band")])
def test_transpose_form_follows_row_bytes(eb, cols, form):
    """The default form of a tall batch of rows of ``cols`` elements: bands for rows that are
    odd or shorter than a 32-byte sector (the tile form would read a fraction of every sector
    it touches), up to 64 columns; tiles for even rows of a sector or more and for wider rows.
    Timed on the GPU (bench/RESULTS.md, eleventh and twenty-eighth sessions): W 512x2 and
    384x4 fp16 (band 3.0 / 5.0 us, tile 15.4 / 17.4), W 3x16 fp16 and dY 1280x64 (tile), dY
    384x289 (tile; band 5x slower)."""
    assert LayoutTransform("W", "NCHW", "NHWC", 512, 512, cols, eb, 0).kernel_form == form


def test_transpose_form_of_the_timed_shapes():
    assert LayoutTransform("W", "NCHW", "NHWC", 512, 512, 2, 2, 0).kernel_form == "band"
    assert LayoutTransform("W", "NCHW", "NHWC", 384, 384, 4, 2, 0).kernel_form == "band"
    assert LayoutTransform("W", "NCHW", "NHWC", 96, 3, 16, 2, 0).kernel_form == "tile"
    assert LayoutTransform("dY", "NCHW", "NHWC", 8, 1280, 64, 2, 0).kernel_form == "tile"
    assert LayoutTransform("dY", "NCHW", "NHWC", 64, 384, 289, 2, 0).kernel_form == "tile"
    assert LayoutTransform("dY", "NCHW", "NHWC", 4, 40, 4, 2, 0).band_mode != "cols"   # even narrow: rows
