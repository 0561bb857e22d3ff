"""The nchw-pointwise schedules (7, 8, 18): 1x1 stride-1 unpadded problems with dY and dX NCHW,
run as per-(image, group) GEMMs W_g^T x dY[n, g] straight into NCHW dX.

Rules, the default on GPU targets (NHWC problems keep theirs), the text form, perf-db and
search, the one W^T transform and its workspace, emission (the ``nchw_pw`` section reaches
these kernels only), the CPU engine against the float64 reference over random problems, a
forced split-N, and whole runs of the GPU engine over a fake device that computes each
launch from the bytes at its pointers (``test_split_n.ComputingRuntime``).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from miopen_solver import applicability as ap
from miopen_solver import layouts
from miopen_solver.command import parse
from miopen_solver.heuristics import max_stream_k_workspace
from miopen_solver.heuristics import NCHW_PW_MIN_VECTOR_BYTES, nchw_pw_config, nchw_pw_vector_bytes
from miopen_solver.config import KernelSchedule, PerfConfig
from miopen_solver.errors import PerfConfigError
from miopen_solver.kernels.emit import _read
from miopen_solver.nchw_pw import NchwPwSpec, nchw_pw_reason, patch_vector, virtual_problem, wt_transform
from miopen_solver.perfdb import PerfDb
from miopen_solver.problem import ConvProblem
from miopen_solver.reference import dgrad_reference, verify
from miopen_solver.runtime.cache import BinaryCache
from miopen_solver.runtime.cpu import CpuEngine
from miopen_solver.runtime.gpu import GpuEngine
from miopen_solver.solver import DgradSolver, Solution
from miopen_solver.spec import is_valid_performance_config, make_spec
from miopen_solver.target import get_target

from test_split_n import ComputingRuntime

SOLVER = DgradSolver()
SM90 = get_target("sm_90")
NHWC = "--in_layout NHWC --out_layout NHWC --fil_layout NHWC"
R50 = "convfp16 -n 32 -c 64 -H 56 -W 56 -k 256 -y 1 -x 1 -F 2"          # all NCHW (MIOpen's default)
ODD = "convbfp16 -n 3 -c 12 -H 7 -W 7 -k 18 -y 1 -x 1 -g 3 -F 2"         # P = 49, cpg 4, kpg 6
WG = "128,128,64,2,1,64,128,0,0,0,1,-1,4,8"
MMA = "64,64,32,2,2,32,32,0,0,0,1,-1,3,7"
GPU_ARCHES = ["sm_80", "sm_90", "gfx90a", "gfx942"]



def _pw(p, t=SM90):
    """The NCHW pointwise solution of ``p`` (the family's own default tile: odd H*W lines are
    not the solver's default, see test_narrow_pixel_vectors_keep_the_transposing_default)."""
    return SOLVER.find_solution(p, t, perf_config=nchw_pw_config(p, t))

def _p(line: str) -> ConvProblem:
    return parse(line.split()).problem


def _inputs(p, seed=7):
    rng = np.random.default_rng(seed)
    st_ = layouts.storage_dtype(p.dtype)
    return (rng.uniform(-1, 1, layouts.dy_shape(p)).astype(st_), rng.uniform(-1, 1, layouts.w_shape(p)).astype(st_))


# ------------------------------------------------------------------ rules
@pytest.mark.parametrize("line", [R50, ODD, R50 + " --fil_layout NHWC", R50.replace("-x 1", "-x 1 -l 2 -j 3"),
                                  "conv -n 2 -c 33 -H 3 -W 1 -k 17 -y 1 -x 1 -F 2"])
def test_nchw_1x1_problems_apply(line):
    assert nchw_pw_reason(_p(line), SM90) is None


@pytest.mark.parametrize("flags,why", [
    (NHWC, "dY is NHWC in memory"),
    ("--out_layout NHWC", "dY is NHWC in memory"),
    ("--in_layout NHWC", "dX is NHWC in memory"),
    ("-u 2 -v 2", "neither pointwise"),
    ("-p 1 -q 1", "neither pointwise"),
])
def test_other_problems_are_refused_with_the_reason(flags, why):
    p = _p(f"convfp16 -n 2 -c 8 -H 6 -W 6 -k 8 -y 1 -x 1 -F 2 {flags}")
    assert why in nchw_pw_reason(p, SM90)
    ok, msg = is_valid_performance_config(p, SM90, PerfConfig.parse(MMA))
    assert not ok and msg.startswith("schedule 7 (nchw-pointwise) does not apply") and why in msg


def test_a_3x3_and_a_grid_past_65535_rows_are_refused():
    assert "neither pointwise" in nchw_pw_reason(_p("convfp16 -n 2 -c 8 -H 6 -W 6 -k 8 -y 3 -x 3 -F 2"), SM90)
    p = _p("convfp16 -n 1100 -c 64 -H 2 -W 2 -k 64 -y 1 -x 1 -g 64 -F 2")      # N*G = 70400 block rows
    assert "70400 (image, group) blocks exceed sm_90's grid limit 65535 along y" in nchw_pw_reason(p, SM90)
    sol = SOLVER.find_solution(p, SM90)                           # another schedule still serves it:
    assert not sol.schedule.nchw_pointwise and sol.schedule.slug == "direct-plane"    # depthwise, in place
    dense = _p("convfp16 -n 1100 -c 128 -H 2 -W 2 -k 128 -y 1 -x 1 -g 64 -F 2")       # cpg 2: transposes
    assert "70400 (image, group) blocks" in nchw_pw_reason(dense, SM90)
    sol = SOLVER.find_solution(dense, SM90)
    assert not sol.schedule.nchw_pointwise and [t.tensor for t in sol.transforms] == ["dY", "dX"]


def test_virtual_problem_is_one_image_gemm():
    v = virtual_problem(_p(ODD))
    # GemmM = cpg = 4 rows (pixels of one image), GemmN = P = 49 channels, GemmK = kpg = 6
    assert (v.N, v.Hi, v.Wi, v.C, v.K, v.G, v.cpg, v.kpg) == (1, 1, 4, 49, 6, 1, 49, 6)
    assert v.is_pointwise and v.all_nhwc


def test_split_k_and_main_loop_rules_name_the_field():
    p = _p(R50)
    ok, why = is_valid_performance_config(p, SM90, PerfConfig.parse(MMA.replace(",1,-1,3,7", ",2,-1,3,7")))
    assert not ok and "split_k must be 1 or -1, got 2" in why
    ok, why = is_valid_performance_config(p, get_target("sm_80"), PerfConfig.parse(WG))
    assert not ok and why.startswith("schedule 8 (nchw-pointwise-wgmma) (the wgmma main loop over [cpg, kpg] x "
                                     "[kpg, H*W] per image and group)") and "sm_80" in why


@pytest.mark.parametrize("hw,dtype,vec", [((7, 7), "fp16", 1), ((56, 56), "fp16", 8), ((14, 14), "fp16", 4),
                                          ((14, 14), "fp32", 4), ((3, 5), "fp32", 1), ((28, 28), "bf16", 8)])
def test_pixel_vectors_divide_h_times_w(hw, dtype, vec):
    """dY loads and dX stores run along the pixels: the widest power of two dividing P (and
    16 bytes)."""
    base = {"fp16": "convfp16", "bf16": "convbfp16", "fp32": "conv"}[dtype]
    p = _p(f"{base} -n 2 -c 64 -H {hw[0]} -W {hw[1]} -k 64 -y 1 -x 1 -F 2")
    spec = make_spec(p, SM90, PerfConfig.parse(MMA if dtype != "fp32" else "64,64,16,2,2,32,32,0,0,0,1,-1,3,7"))
    assert spec.vec_b == spec.vec_c == vec and spec.vec_a == (8 if dtype != "fp32" else 4)


# ------------------------------------------------------------------ default, text form, perf-db, search
@pytest.mark.parametrize("line,vbytes", [
    ("convfp16 -n 2 -c 64 -H 7 -W 7 -k 64 -y 1 -x 1 -F 2", 2),      # H*W = 49: 1 element
    ("conv -n 2 -c 64 -H 7 -W 7 -k 64 -y 1 -x 1 -F 2", 4),
    ("convfp16 -n 2 -c 64 -H 14 -W 14 -k 64 -y 1 -x 1 -F 2", 8),    # 196 = 4 * 49
    ("convbfp16 -n 2 -c 64 -H 56 -W 56 -k 64 -y 1 -x 1 -F 2", 16),  # 3136 = 64 * 49: capped
    ("conv -n 2 -c 64 -H 2 -W 3 -k 64 -y 1 -x 1 -F 2", 8),
])
def test_narrow_pixel_vectors_keep_the_transposing_default(line, vbytes):
    """Below 8-byte vectors along the pixels the NCHW pointwise GEMM is not the default (it is
    still in search() and reachable by --perf-config)."""
    p = _p(line)
    assert nchw_pw_vector_bytes(p) == vbytes
    for arch in GPU_ARCHES:
        sol = SOLVER.find_solution(p, get_target(arch))
        assert sol.schedule.nchw_pointwise is (vbytes >= NCHW_PW_MIN_VECTOR_BYTES), arch
    assert any(c.schedule.nchw_pointwise for c in SOLVER.search(p, SM90))


@pytest.mark.parametrize("arch", GPU_ARCHES)
@pytest.mark.parametrize("line", [R50, "convbfp16 -n 3 -c 12 -H 14 -W 14 -k 18 -y 1 -x 1 -g 3 -F 2",
                                  "conv -n 4 -c 2048 -H 7 -W 14 -k 512 -y 1 -x 1 -F 2 --fil_layout NHWC"])
def test_default_on_gpu_targets_is_nchw_pointwise(arch, line):
    p = _p(line)
    assert nchw_pw_vector_bytes(p) >= NCHW_PW_MIN_VECTOR_BYTES
    sol = SOLVER.find_solution(p, get_target(arch))
    assert sol.schedule.nchw_pointwise and sol.spec.kernel_name.startswith(f"dgrad_nchw_pw_{arch}_")
    assert sol.kernel_name == sol.spec.kernel_name + "+transpose_w"
    assert [(t.tensor, t.batch, t.rows, t.cols) for t in sol.transforms] == [("W", p.G, p.kpg, p.cpg)]
    wt_bytes = p.K * p.cpg * p.elem_bytes
    assert sol.workspace_bytes == -(-wt_bytes // 256) * 256
    assert sol.spec.grid == (sol.kernels[0].grid[0], p.N * p.G, 1) == sol.kernels[0].source.grid
    if arch == "sm_90" and line == R50:
        assert sol.schedule is KernelSchedule.NCHW_POINTWISE_WGMMA


def test_nhwc_problems_and_the_cpu_target_keep_their_defaults():
    p = _p(R50)
    nhwc = p.replace(in_layout="NHWC", out_layout="NHWC", fil_layout="NHWC")
    assert not SOLVER.find_solution(nhwc, SM90).schedule.nchw_pointwise
    assert not SOLVER.find_solution(p, get_target("cpu")).schedule.nchw_pointwise
    mixed = p.replace(out_layout="NHWC")
    assert not SOLVER.find_solution(mixed, SM90).schedule.nchw_pointwise


def test_text_form_and_json_name_the_schedule():
    cfg = PerfConfig.parse(WG)
    assert cfg.schedule is KernelSchedule.NCHW_POINTWISE_WGMMA and cfg.serialize() == WG
    assert cfg.schedule.slug == "nchw-pointwise-wgmma" and KernelSchedule.NCHW_POINTWISE.slug == "nchw-pointwise"
    sol = SOLVER.find_solution(_p(R50), SM90, perf_config=WG)
    d = sol.as_dict()
    assert d["spec"]["schedule"] == "nchw-pointwise-wgmma" and d["spec"]["main_loop"] == "wgmma"
    assert d["spec"]["gemm"] == {"m": 64, "n": 3136, "k": 256, "groups": 1} and d["spec"]["grid"] == [25, 32, 1]
    assert [t["tensor"] for t in d["layout_transforms"]] == ["W"] and d["layout_transforms"][0]["from"] == "KC"


def test_settings_the_default_cannot_take_fall_back_to_the_tilde_gemm():
    sol = SOLVER.find_solution(_p(R50), SM90, split_k=2)
    assert not sol.schedule.nchw_pointwise and sol.spec.split_k == 2
    assert sol.spec.nchw_dx and [t.tensor for t in sol.transforms] == ["dY"]      # dX stored NCHW by the kernel
    assert any("using the warp-MMA default" in n for n in sol.notes)


def test_perfdb_record_of_an_nchw_pointwise_config_is_used(tmp_path):
    p = _p(R50)
    with PerfDb(str(tmp_path / "db.sqlite")) as db:
        db.update(p.problem_key(), "sm_90", SOLVER.solver_db_id(), MMA, 0.5)
    sol = SOLVER.find_solution(p, SM90, perfdb=str(tmp_path / "db.sqlite"))
    assert sol.source == "perfdb" and sol.perf_config.serialize() == MMA
    assert sol.schedule is KernelSchedule.NCHW_POINTWISE


def test_search_has_nchw_pointwise_and_transposing_configs_default_first():
    p = _p("convfp16 -n 2 -c 32 -H 8 -W 7 -k 48 -y 1 -x 1 -F 2")       # H*W = 56: 8-byte vectors
    cfgs = list(SOLVER.search(p, SM90))
    assert cfgs[0] == SOLVER.get_default_performance_config(p, SM90) and cfgs[0].schedule.nchw_pointwise
    kinds = {c.schedule for c in cfgs}
    assert {KernelSchedule.NCHW_POINTWISE, KernelSchedule.NCHW_POINTWISE_WGMMA, KernelSchedule.WARP_MMA} <= kinds
    assert all(c.split_k == 1 for c in cfgs if c.schedule.nchw_pointwise)


def test_workspace_size_with_and_without_a_config():
    p = _p(R50)
    wt = -(-(256 * 64 * 2) // 256) * 256
    assert SOLVER.get_workspace_size(p, SM90, PerfConfig.parse(WG)) == wt
    transposing = SOLVER.get_workspace_size(p, SM90, PerfConfig.parse("128,128,64,2,1,64,128,0,0,0,1,-1,3,1"))
    assert transposing == 2 * 32 * 56 * 56 * 256                  # dY (256 ch) copy, fp16; dX stored NCHW
    # without a config: the most any config needs (a TMA config copies dY and dX; every copy
    # plus the largest stream-K flags and slots bounds the stream-K configs)
    copies = 2 * 32 * 56 * 56 * 320
    assert SOLVER.get_workspace_size(p, SM90) == max(wt, copies + max_stream_k_workspace(p, SM90)) > copies
    # W^T can exceed the transposes: 2 pixels, 2048 x 2048 channels (in fp32, where no
    # stream-K config adds its flags and slots, it is the most)
    big = _p("convfp16 -n 1 -c 2048 -H 1 -W 2 -k 2048 -y 1 -x 1 -F 2")
    copies = 2 * 2 * 4096
    assert SOLVER.get_workspace_size(big, SM90) == max(2048 * 2048 * 2, copies + max_stream_k_workspace(big, SM90))
    assert SOLVER.get_workspace_size(big.replace(dtype="fp32"), SM90) == 2048 * 2048 * 4 > 2 * copies


def test_solution_record_round_trip():
    sol = _pw(_p(ODD))
    back = Solution.from_record(sol.to_record())
    assert isinstance(back.spec, NchwPwSpec) and back.kernel_name == sol.kernel_name
    assert back.transforms == sol.transforms and back.workspace_bytes == sol.workspace_bytes
    assert back.problem == sol.problem and back.spec.grid == sol.spec.grid
    assert back.kernels[0].source.sha256 == sol.kernels[0].source.sha256


# ------------------------------------------------------------------ the W^T transform and the kernel source
def test_wt_transform_by_hand():
    p = _p(ODD)
    t = wt_transform(p)
    assert (t.tensor, t.src, t.dst, t.batch, t.rows, t.cols, t.offset) == ("W", "KC", "CK", 3, 6, 4, 0)
    w = np.arange(p.K * p.cpg, dtype=np.float32)
    out = t.apply(w).reshape(p.G, p.cpg, p.kpg)
    for g in range(p.G):
        for c in range(p.cpg):
            for k in range(p.kpg):
                assert out[g, c, k] == w[(g * p.kpg + k) * p.cpg + c]


def test_nchw_pw_section_reaches_nchw_pw_kernels_only():
    plain, own = _read("dgrad.cu"), _read("dgrad.cu", frozenset({"nchw_pw"}))
    assert "const int g = DG_BID_Y();" in plain and "DG_NCHW" not in plain and "#section" not in plain
    assert "const int g = DG_BID_Y();" not in own and "DG_NCHW_G" in own and "#section" not in own
    patch = _read("dgrad.cu", frozenset({"patch"}))
    assert "const int g = DG_BID_Y();" in patch and "DG_NCHW" not in patch
    src = _pw(_p(ODD)).kernels[0].source
    d = dict(src.defines)
    assert (d["DG_N"], d["DG_HI"], d["DG_WI"], d["DG_CPG"], d["DG_KPG"], d["DG_G"]) == (1, 1, 4, 49, 6, 1)
    assert (d["DG_NCHW_N"], d["DG_NCHW_G"], d["DG_NCHW_K"], d["DG_NCHW_C"]) == (3, 3, 18, 12)
    assert not src.pre_memset and src.grid[1] == 9


# ------------------------------------------------------------------ numerics
@settings(max_examples=40, deadline=None)
@given(st.integers(1, 3), st.integers(1, 4), st.integers(1, 19), st.integers(1, 23), st.integers(1, 9),
       st.integers(1, 9), st.sampled_from(["fp16", "bf16", "fp32"]), st.sampled_from(["NCHW", "NHWC"]),
       st.integers(1, 3))
def test_cpu_engine_matches_float64(n, g, cpg, kpg, h, w, dtype, fil, dil):
    """Random problems (odd P, odd cpg/kpg, groups, every dtype, W either layout, any
    dilation) through the solver's default on sm_90 and gfx942; dX is NaN-poisoned by the
    engine, so an unwritten element fails."""
    p = ConvProblem(N=n, C=g * cpg, Hi=h, Wi=w + 1, K=g * kpg, Y=1, X=1, G=g, dH=dil, dW=dil, dtype=dtype,
                    in_layout="NCHW", out_layout="NCHW", fil_layout=fil)
    dy, wt = _inputs(p, n * 1000 + cpg * 10 + kpg)
    ref = dgrad_reference(p, dy, wt)
    for arch in ("sm_90", "gfx942"):
        t = get_target(arch)
        # C = 1 or K = 1 makes dX or dY NHWC in memory too: the NHWC kernel reads it in place
        sol = _pw(p, t) if p.C > 1 and p.K > 1 else SOLVER.find_solution(p, t)
        assert sol.schedule.nchw_pointwise == (p.C > 1 and p.K > 1)
        dx = CpuEngine(t).run(sol, dy, wt)
        assert dx.shape == layouts.dx_shape(p)
        v = verify(p, dx, ref)
        assert v.ok and v.nonfinite == 0, (sol.kernel_name, v)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 3), st.integers(1, 3), st.integers(1, 9), st.integers(1, 17), st.integers(1, 5),
       st.integers(1, 5), st.integers(1, 4), st.integers(1, 4), st.sampled_from(["fp16", "bf16", "fp32"]))
def test_patch_filters_on_the_cpu_engine_match_float64(n, g, cpg, kpg, ho, wo, y, x, dtype):
    """Patch filters (stride = filter, no padding; 1xX, Yx1, YxX, odd channels, groups,
    every dtype) with dY, W and dX NCHW: the NCHW pointwise schedule's per-image GEMM of
    cpg*Y*X rows scattered into the patches, on sm_90 and gfx942, NaN-poisoned dX."""
    if y * x == 1:
        y = 2
    p = ConvProblem(N=n, C=g * cpg, Hi=ho * y, Wi=wo * x, K=g * kpg, Y=y, X=x, G=g, sH=y, sW=x, dtype=dtype,
                    in_layout="NCHW", out_layout="NCHW", fil_layout="NCHW")
    dy, wt = _inputs(p, n * 1000 + cpg * 10 + kpg)
    ref = dgrad_reference(p, dy, wt)
    for arch in ("sm_90", "gfx942"):
        t = get_target(arch)
        why = nchw_pw_reason(p, t)
        if why is not None:     # C = 1, K = 1 or a 1-pixel plane: NHWC bytes too, read in place
            assert "the bytes of NHWC as well as NCHW" in why and min(p.C, p.K, p.Ho * p.Wo) == 1, why
            continue
        sol = _pw(p, t)
        assert sol.schedule.nchw_pointwise and [(x.tensor, x.src, x.dst) for x in sol.transforms] == [
            ("W", "KCYX", "CYXK")]
        assert sol.spec.as_dict()["vector_size_c"] == sol.spec.patch_vector
        dx = CpuEngine(t).run(sol, dy, wt)
        v = verify(p, dx, ref)
        assert v.ok and v.nonfinite == 0, (sol.kernel_name, v)


@pytest.mark.parametrize("line,tile_m,vector", [
    ("convfp16 -n 2 -c 3 -H 32 -W 32 -k 64 -y 16 -x 16 -u 16 -v 16", 64, 8),    # 16 x: two runs of 8
    ("convbfp16 -n 2 -c 3 -H 28 -W 28 -k 64 -y 14 -x 14 -u 14 -v 14", 64, 2),   # 14 x: runs of 2
    ("conv -n 2 -c 8 -H 8 -W 8 -k 16 -y 4 -x 4 -u 4 -v 4", 128, 4),             # fp32: 16 bytes
    ("convfp16 -n 2 -c 8 -H 8 -W 6 -k 16 -y 2 -x 3 -u 2 -v 3", 64, 1),          # odd X
    ("convfp16 -n 2 -c 8 -H 8 -W 8 -k 16 -y 1 -x 1", 64, 1),                    # 1x1: no patch
])
def test_patch_vector_is_the_run_a_tile_row_group_holds(line, tile_m, vector):
    assert patch_vector(_p(f"{line} -F 2"), tile_m) == vector


@pytest.mark.parametrize("line,family", [
    ("convfp16 -n 8 -c 64 -H 56 -W 56 -k 64 -y 2 -x 2 -u 2 -v 2 -g 64 -F 2", "direct-plane"),    # depthwise
    ("convfp16 -n 8 -c 128 -H 56 -W 56 -k 128 -y 2 -x 2 -u 2 -v 2 -g 32 -F 2", "direct"),        # cpg 4
    ("convfp16 -n 8 -c 64 -H 56 -W 56 -k 128 -y 2 -x 2 -u 2 -v 2 -F 2", "nchw-pointwise-wgmma"),  # dense
    ("conv -n 8 -c 64 -H 56 -W 56 -k 128 -y 2 -x 2 -u 2 -v 2 -F 2", "patch-gemm"),               # fp32
    ("convfp16 -n 8 -c 64 -H 14 -W 14 -k 128 -y 2 -x 2 -u 2 -v 2 -F 2", "patch-gemm-pingpong"),   # 49 pixels
])
def test_depthwise_and_small_cpg_patch_filters_keep_their_families(line, family):
    """The NCHW pointwise default of patch filters comes after the plane and direct rules (a
    depthwise or cpg-4 patch layer is not a GEMM of K = kpg = 1 or 4 on 64-row tiles), and
    takes 16-bit lines with 8-byte dY vectors only (fp32 and 2-byte vectors ran slower)."""
    assert SOLVER.find_solution(_p(line), SM90).schedule.slug == family


@pytest.mark.parametrize("line", [
    "convfp16 -n 64 -c 3 -H 224 -W 224 -k 768 -y 16 -x 16 -u 16 -v 16 -F 2",      # 768 rows
    "convbfp16 -n 32 -c 3 -H 224 -W 224 -k 1024 -y 14 -x 14 -u 14 -v 14 -F 2",    # 588 rows
])
@pytest.mark.parametrize("arch", ["sm_90", "gfx942"])
def test_patch_tiles_are_sized_by_the_gemm_rows_not_cpg(line, arch):
    """cpg = 3, but the per-image GEMM has cpg*Y*X rows: the family keeps its GEMM default's
    tile_m rather than halving it for 3 channels."""
    from miopen_solver.heuristics import heuristic_config
    from miopen_solver.nchw_pw import gemm_twin
    p, t = _p(line), get_target(arch)
    base = heuristic_config(gemm_twin(p), t, allow_direct=False, allow_patch=False, allow_nchw_pw=False,
                            allow_pack=False, allow_model=False)
    assert nchw_pw_config(p, t).tile_m == base.tile_m


def test_the_search_past_the_sub_gemm_table_has_both_dense_gemms():
    p = _p("convfp16 -n 2 -c 3 -H 256 -W 256 -k 64 -y 32 -x 32 -u 32 -v 32 -F 2")
    slugs = {c.schedule.slug for c in SOLVER.search(p, SM90)}
    assert SOLVER.find_solution(p, SM90).schedule.nchw_pointwise
    assert {"nchw-pointwise", "nchw-pointwise-wgmma"} <= slugs and any(s.startswith("patch-gemm") for s in slugs)


@pytest.mark.parametrize("line,why", [
    ("convfp16 -n 2 -c 3 -H 16 -W 16 -k 64 -y 16 -x 16 -u 16 -v 16 -F 2",       # Ho = Wo = 1
     "dY has the bytes of NHWC as well as NCHW (one channel or a one-pixel plane)"),
    ("convfp16 -n 2 -c 8 -H 6 -W 6 -k 8 -y 1 -x 1 -F 2 --out_layout NHWC", "allowed: --out_layout NCHW"),
    ("convfp16 -n 2 -c 8 -H 6 -W 6 -k 8 -y 1 -x 1 -F 2 --in_layout NHWC", "allowed: --in_layout NCHW"),
    ("convfp16 -n 2 -c 8 -H 6 -W 6 -k 8 -y 3 -x 3 -p 1 -q 1 -F 2", "allowed: -y/-x 1 with -u/-v 1 and -p/-q 0"),
    ("convfp16 -n 1100 -c 64 -H 2 -W 2 -k 64 -y 1 -x 1 -g 64 -F 2", "allowed: N*G (-n times -g) at most 65535"),
])
def test_refusals_say_what_is_allowed(line, why):
    assert why in nchw_pw_reason(_p(line), SM90)


def test_a_patch_line_past_the_sub_gemm_table_is_told_which_schedules_take_it():
    p = _p("convfp16 -n 1 -c 3 -H 64 -W 64 -k 8 -y 32 -x 32 -u 32 -v 32 -F 2")
    with pytest.raises(PerfConfigError, match=r"the patch GEMM's \(5, 6, 9, 10, 21\) or, with dY and dX NCHW, "
                                              r"the NCHW pointwise ones \(7, 8, 18\)"):
        SOLVER.find_solution(p, SM90, perf_config="128,8,32,4,1,32,8,0,0,0,1,-1,1")


@pytest.mark.parametrize("flags,why", [
    ("-y 2 -x 2 -u 2 -v 2 -H 7 -W 8", "not a whole number of 2x2 (-y/-x) patches"),
    ("-y 2 -x 2 -u 2 -v 2 -H 8 -W 8 --fil_layout NHWC", "W is not NCHW (KCYX)"),
    ("-y 2 -x 2 -u 2 -v 2 -p 1 -q 1 -H 8 -W 8", "neither pointwise"),
    ("-y 2 -x 2 -u 1 -v 1 -H 8 -W 8", "neither pointwise"),
])
def test_patch_filters_the_family_cannot_take_say_why(flags, why):
    assert why in nchw_pw_reason(_p(f"convfp16 -n 2 -c 8 -k 16 {flags} -F 2"), SM90)


def test_forced_split_n_runs_three_chunks(monkeypatch, tmp_path):
    """Three launches of two images each: dY and dX offset per chunk, W^T transposed once."""
    p = _p("conv -n 6 -c 6 -H 5 -W 7 -k 10 -y 1 -x 1 -g 2 -F 2")          # fp32: 1400 bytes of dY per image
    monkeypatch.setattr(ap, "TENSOR_BYTES_LIMIT", 2 * 1400)
    sol = _pw(p)
    assert sol.schedule.nchw_pointwise and sol.n_chunks == 3 and sol.spec.grid[1] == 2 * 2
    dy, w = _inputs(p)
    ref = dgrad_reference(p, dy, w)
    assert verify(p, CpuEngine(SM90).run(sol, dy, w), ref).ok
    rt = ComputingRuntime(sol)
    dx = GpuEngine(rt, BinaryCache(tmp_path)).run(sol, dy, w)
    v = verify(p, dx, ref)
    assert v.ok and v.nonfinite == 0
    launches = [c for c in rt.calls if c[0] == "launch"]
    (wt,) = sol.transforms
    assert wt.kernel_name.endswith("_b32")
    assert [c[1] for c in launches] == [wt.kernel_name] + [sol.spec.kernel_name] * 3


@pytest.mark.parametrize("line", [ODD, R50.replace("-n 32", "-n 2").replace("-H 56 -W 56", "-H 9 -W 13"),
                                  "conv -n 2 -c 33 -H 5 -W 5 -k 17 -y 1 -x 1 -F 2 --fil_layout NHWC"])
def test_gpu_engine_reads_dy_and_writes_nchw_dx_at_the_launch_pointers(tmp_path, line):
    """dY and W are uploaded as they lie; the W^T transform fills the workspace; the kernel's
    arguments are (user dY, the workspace's W^T, user dX) and dX comes back NCHW."""
    p = _p(line)
    sol = _pw(p)
    rt = ComputingRuntime(sol)
    dy, w = _inputs(p)
    dx = GpuEngine(rt, BinaryCache(tmp_path)).run(sol, dy, w)
    assert rt.uploads[:2] == [dy.tobytes(), w.tobytes()]
    v = verify(p, dx, dgrad_reference(p, dy, w))
    assert v.ok and v.nonfinite == 0, (sol.kernel_name, v)
    dyp, wp, dxp, ws = [c[1] for c in rt.calls if c[0] == "alloc"][:4]   # upload order: dY, W, dX, workspace
    (tr,) = [c for c in rt.calls if c[0] == "launch" and c[1].startswith("dgrad_transpose")]
    (kern,) = [c for c in rt.calls if c[0] == "launch" and c[1] == sol.spec.kernel_name]
    assert tr[-1] == (wp, ws, p.G, p.kpg, p.cpg)
    assert kern[-1] == (dyp, ws, dxp)
    assert np.array_equal(CpuEngine(SM90).run(sol, dy, w), dx)


def test_an_unwritten_dx_is_nan(tmp_path):
    p = _p(ODD)
    sol = _pw(p)

    class Idle(ComputingRuntime):
        def launch(self, func, grid, block, shared, args):
            if func[1] == self.sol.spec.kernel_name:
                return
            super().launch(func, grid, block, shared, args)
    dx = GpuEngine(Idle(sol), BinaryCache(tmp_path)).run(sol, *_inputs(p))
    assert np.isnan(dx.astype(np.float32)).all()


def test_an_nchw_pointwise_config_on_an_nhwc_problem_is_an_error():
    p = _p(R50).replace(in_layout="NHWC", out_layout="NHWC", fil_layout="NHWC")
    with pytest.raises(PerfConfigError, match="dY is NHWC in memory"):
        SOLVER.find_solution(p, SM90, perf_config=MMA)


# ------------------------------------------------------------------ schedule 18 (persistent)
PB = "128,256,64,2,1,64,256,0,0,0,1,-1,3,18"


@pytest.mark.parametrize("line,n_rows", [("convfp16 -n 32 -c 256 -H 56 -W 56 -k 64 -y 1 -x 1 -F 2", 32),
                                         ("convfp16 -n 2 -c 256 -H 56 -W 56 -k 64 -y 1 -x 1 -g 2 -F 2", 4),
                                         ("convfp16 -n 300 -c 256 -H 14 -W 14 -k 64 -y 1 -x 1 -F 2", 300)])
def test_persistent_rows_share_the_resident_blocks(line, n_rows):
    """Schedule 18: each of the N*G grid rows holds the device's resident blocks divided by
    the rows (at least one, at most the tiles of its GEMM), the same count in the grid, the
    kernel's ``DG_TILE_BLOCKS`` and its name."""
    p = _p(line)
    sol = SOLVER.find_solution(p, SM90, perf_config=PB)
    spec, src = sol.spec, sol.kernels[0].source
    gemm = spec.gemm
    assert gemm.schedule is KernelSchedule.WGMMA_PERSISTENT and gemm.tile_blocks == min(gemm.tiles_per_group,
                                                                                          SM90.num_cus * gemm.resident_blocks)
    want = max(1, min(gemm.tiles_per_group, SM90.num_cus * gemm.resident_blocks // n_rows))
    assert spec.tile_blocks == want and src.grid == (want, n_rows, 1)
    assert f"#define DG_TILE_BLOCKS {want}\n" in src.text and "#define DG_PERSIST 1\n" in src.text
    assert f"_pb{want}_" in sol.kernel_name and sol.kernel_name.startswith("dgrad_nchw_pw_sm_90_")


def test_a_persistent_gemm_default_runs_on_schedule_18_and_the_search_has_both():
    """The default runs its GEMM default's tile on the NCHW pointwise schedule of the same main
    loop: a persistent tile on 18 (1.23-1.24x faster than 8 on the H200 where it applies), a
    plain warpgroup one on 8; the search lists the persistent tiles as 18 beside 8, and AMD
    refuses 18."""
    from miopen_solver.heuristics import heuristic_config
    from miopen_solver.nchw_pw import gemm_twin
    for line, want in (("convfp16 -n 32 -c 256 -H 56 -W 56 -k 64 -y 1 -x 1 -F 2", KernelSchedule.NCHW_POINTWISE_PERSISTENT),
                       (R50, KernelSchedule.NCHW_POINTWISE_WGMMA)):
        p = _p(line)
        base = heuristic_config(gemm_twin(p), SM90, allow_direct=False, allow_patch=False, allow_nchw_pw=False,
                                allow_pack=False, allow_model=False)
        assert (base.schedule is KernelSchedule.WGMMA_PERSISTENT) == (want is KernelSchedule.NCHW_POINTWISE_PERSISTENT)
        assert SOLVER.get_default_performance_config(p, SM90).schedule is want
        found = {c.schedule for c in SOLVER.search(p, SM90)}
        assert {KernelSchedule.NCHW_POINTWISE_WGMMA, KernelSchedule.NCHW_POINTWISE_PERSISTENT} <= found
    ok, why = is_valid_performance_config(p, get_target("gfx942"), PerfConfig.parse(PB))
    assert not ok and why.startswith("schedule 18 (nchw-pointwise-persistent)")
