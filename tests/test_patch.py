"""The patch-gemm schedules (issue 14, part 2): stride = filter, no padding, one dense GEMM.

Rules and applicability, the default on GPU targets, search, the text form, emission (the
``patch`` section of dgrad.cu reaches patch kernels only) and the CPU engine's GEMM +
scatter against the float64 reference over random patch problems (dX NaN-poisoned by the
engine, so an unwritten element fails).
"""

from __future__ import annotations

import numpy as np
import pytest

from miopen_solver.command import parse
from miopen_solver.config import KernelSchedule, PerfConfig
from miopen_solver.errors import PerfConfigError
from miopen_solver.heuristics import PATCH_PINGPONG_DEFAULT
from miopen_solver.kernels.emit import SECTION, _read
from miopen_solver import layouts
from miopen_solver.layouts import storage_dtype
from miopen_solver.patch import PatchSpec, patch_reason, store_run, virtual_problem
from miopen_solver.problem import ConvProblem
from miopen_solver.reference import dgrad_reference, verify
from miopen_solver.runtime.cpu import CpuEngine
from miopen_solver.solver import DgradSolver, Solution
from miopen_solver.spec import is_valid_performance_config, make_spec
from miopen_solver.target import get_target

NHWC = "-F 2 --in_layout NHWC --out_layout NHWC --fil_layout NHWC"
VIT = f"convfp16 -n 8 -c 3 -H 224 -W 224 -k 768 -y 16 -x 16 -u 16 -v 16 {NHWC}"
STEM = f"convbfp16 -n 4 -c 3 -H 226 -W 223 -k 96 -y 4 -x 4 -u 4 -v 4 {NHWC}"        # borders uncovered
MERGE = f"conv -n 2 -c 96 -H 56 -W 56 -k 192 -y 2 -x 2 -u 2 -v 2 {NHWC}"
PATCH_WG = "128,128,64,2,1,64,128,0,0,0,1,-1,4,6"
PATCH_MMA = "64,64,32,2,2,32,32,0,0,0,1,-1,2,5"


def _p(line: str) -> ConvProblem:
    return parse(line).problem


# ------------------------------------------------------------------ rules
@pytest.mark.parametrize("line", [VIT, STEM, MERGE, f"conv -n 1 -c 8 -H 9 -W 9 -k 8 -y 1 -x 3 -u 1 -v 3 {NHWC}"])
def test_patch_problems_apply(line):
    assert patch_reason(_p(line), get_target("sm_90")) is None


@pytest.mark.parametrize("flags,why", [
    ("-y 4 -x 4 -u 4 -v 4 -p 1 -q 1", "padding"),
    ("-y 4 -x 4 -u 2 -v 2", "stride 2x2 differs"),
    ("-y 2 -x 2 -u 2 -v 2 -l 2 -j 2", "dilation"),
    ("-y 1 -x 1 -u 1 -v 1", "1x1 filter"),
])
def test_other_problems_are_refused_with_the_reason(flags, why):
    p = _p(f"convfp16 -n 2 -c 8 -H 16 -W 16 -k 8 {flags} {NHWC}")
    assert why in patch_reason(p, get_target("sm_90"))
    ok, msg = is_valid_performance_config(p, get_target("sm_90"), PerfConfig.parse(PATCH_MMA))
    assert not ok and msg.startswith("schedule 5 (patch-gemm) does not apply") and why in msg


def test_virtual_problem_is_the_pointwise_gemm():
    p = _p(f"convfp16 -n 3 -c 6 -H 10 -W 11 -k 9 -y 2 -x 3 -u 2 -v 3 -g 3 {NHWC}")
    v = virtual_problem(p)
    assert v.is_pointwise and (v.N, v.Hi, v.Wi, v.K, v.G) == (3, p.Ho, p.Wo, 9, 3)
    assert v.cpg == 2 * 3 * 2 and v.w_elems == p.w_elems and v.dy_elems == p.dy_elems


def test_split_k_and_main_loop_rules_name_the_field():
    p, sm80 = _p(VIT), get_target("sm_80")
    ok, why = is_valid_performance_config(p, sm80, PerfConfig.parse(PATCH_MMA).replace(split_k=2))
    assert not ok and "split_k must be 1 or -1, got 2" in why
    ok, why = is_valid_performance_config(p, sm80, PerfConfig.parse(PATCH_WG))
    assert not ok and "schedule 6 (patch-gemm-wgmma)" in why and "wgmma main loop" in why and "sm_80" in why
    assert make_spec(p, sm80, PerfConfig.parse(PATCH_MMA).replace(split_k=-1)).split_k == 1


@pytest.mark.parametrize("line,cap", [(VIT, 8), (STEM, 1), (MERGE, 4), (STEM.replace("-W 223", "-W 224"), 4),
                                      (f"convfp16 -n 2 -c 6 -H 8 -W 8 -k 8 -y 2 -x 2 -u 2 -v 2 -g 2 {NHWC}", 1),
                                      (f"convfp16 -n 2 -c 3 -H 8 -W 9 -k 8 -y 2 -x 2 -u 2 -v 2 {NHWC}", 1)])
def test_store_width_is_clamped_to_a_contiguous_aligned_run(line, cap):
    p = _p(line)
    spec = make_spec(p, get_target("sm_80"), PerfConfig.parse(PATCH_MMA))
    assert store_run(p) % spec.vec_c == 0 and spec.vec_c == cap


# ------------------------------------------------------------------ default, search, text
@pytest.mark.parametrize("arch", ["sm_80", "sm_90", "gfx90a", "gfx942"])
@pytest.mark.parametrize("line", [VIT, STEM, MERGE])
def test_default_on_gpu_targets_is_a_patch_schedule(arch, line):
    p, t = _p(line), get_target(arch)
    sol = DgradSolver().find_solution(p, t)
    assert sol.schedule.patch and sol.kernel_name.startswith(f"dgrad_patch_gemm_{arch}_")
    assert sol.kernels[0].source.pre_memset == (p.Hi % p.Y != 0 or p.Wi % p.X != 0)
    assert sol.spec.grid[1] == p.G and sol.spec.split_k == 1
    if arch == "sm_90" and p.dtype != "fp32":
        # the ping-pong form where patch rows are whole 16-byte chunks (ViT's 48), else the
        # plain warpgroup one (the ConvNeXt stem's 12)
        pp = store_run(p) % 8 == 0
        assert sol.schedule is (KernelSchedule.PATCH_GEMM_PINGPONG if pp else KernelSchedule.PATCH_GEMM_WGMMA)
        assert (sol.spec.config == PATCH_PINGPONG_DEFAULT) is pp


def test_cpu_target_default_stays_the_tilde_gemm_and_other_problems_keep_theirs():
    assert not DgradSolver().find_solution(_p(VIT), get_target("cpu")).schedule.patch
    p = _p(f"convfp16 -n 2 -c 64 -H 28 -W 28 -k 64 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 {NHWC}")
    assert not DgradSolver().find_solution(p, get_target("sm_90")).schedule.patch


def test_search_has_patch_and_tilde_configs_default_first():
    p, t = _p(MERGE.replace("-n 2", "-n 1")), get_target("sm_90")
    solver = DgradSolver()
    cfgs = list(solver.search(p, t))
    assert cfgs[0] == solver.get_default_performance_config(p, t) and cfgs[0].schedule.patch
    kinds = {c.schedule for c in cfgs}
    assert KernelSchedule.PATCH_GEMM in kinds and KernelSchedule.WARP_MMA in kinds
    assert all(c.split_k == 1 for c in cfgs if c.schedule.patch)


def test_text_form_and_json_name_the_schedule():
    cfg = PerfConfig.parse(PATCH_WG)
    assert cfg.schedule is KernelSchedule.PATCH_GEMM_WGMMA and cfg.serialize() == PATCH_WG
    assert cfg.schedule.slug == "patch-gemm-wgmma" and KernelSchedule.PATCH_GEMM.slug == "patch-gemm"
    spec = make_spec(_p(VIT), get_target("sm_90"), cfg)
    d = spec.as_dict()
    assert d["schedule"] == "patch-gemm-wgmma" and d["main_loop"] == "wgmma" and d["perf_config"] == PATCH_WG
    assert d["gemm"] == {"m": 8 * 14 * 14, "n": 16 * 16 * 3, "k": 768, "groups": 1}
    assert "patch_gemm" in d["kernel_name"]


def test_settings_a_patch_default_cannot_take_fall_back_to_the_tilde_gemm():
    p, t = _p(MERGE), get_target("sm_90")
    sol = DgradSolver().find_solution(p, t, split_k=2)
    assert not sol.schedule.patch and sol.spec.split_k == 2
    assert any("not possible with the patch-gemm default" in n and "the warp-MMA default" in n for n in sol.notes)
    with pytest.raises(PerfConfigError, match="split_k must be 1 or -1, got 2.*needs an even cpg"):
        DgradSolver().find_solution(_p(VIT), t, split_k=2, split_k_reduce="atomic")   # fp16 cpg 3: no atomics
    ws = DgradSolver().find_solution(_p(VIT), t, split_k=2)        # the tilde GEMM through the workspace
    assert not ws.schedule.patch and ws.spec.split_k_reduce == "workspace"
    kept = DgradSolver().find_solution(p, get_target("sm_80"), kouter="off", split_k=-1)
    assert kept.schedule is KernelSchedule.PATCH_GEMM and not kept.spec.lds_k_outer


def test_perfdb_record_of_a_patch_config_is_used(tmp_path):
    from miopen_solver import SOLVER_NAME
    from miopen_solver.perfdb import PerfDb
    p, t = _p(STEM), get_target("sm_90")
    with PerfDb(tmp_path / "db.sqlite") as db:
        db.update(p.problem_key(), "sm_90", SOLVER_NAME, PATCH_MMA, 0.1)
    sol = DgradSolver().find_solution(p, t, perfdb=tmp_path / "db.sqlite")
    assert sol.source == "perfdb" and sol.perf_config.serialize() == PATCH_MMA


def test_solution_record_round_trip():
    sol = DgradSolver().find_solution(_p(STEM), get_target("sm_90"))
    back = Solution.from_record(sol.to_record())
    assert isinstance(back.spec, PatchSpec) and back.kernel_name == sol.kernel_name
    assert back.kernels[0].source.sha256 == sol.kernels[0].source.sha256
    assert back.spec.emit().sha256 == sol.kernels[0].source.sha256


# ------------------------------------------------------------------ emission
def test_patch_section_reaches_patch_kernels_only():
    body = _read("dgrad.cu")
    assert "DG_PATCH" not in body and "#section" not in body and not SECTION.search(body)
    tilde = DgradSolver().find_solution(_p(VIT), get_target("cpu")).kernels[0].source.text
    assert "dg_patch_offset" not in tilde
    src = DgradSolver().find_solution(_p(VIT), get_target("sm_90")).kernels[0].source
    assert "dg_patch_offset(m, g, c)" in src.text and "#section" not in src.text
    assert dict(src.defines)["DG_PATCH_CPG"] == 3 and dict(src.defines)["DG_CPG"] == 768
    assert dict(src.defines)["DG_POINTWISE"] == 1


# ------------------------------------------------------------------ CPU engine vs float64
def _random_patch_problems(count: int, seed: int) -> list:
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < count:
        y = int(rng.choice([2, 3, 4, 5, 14, 16])) if rng.random() < 0.8 else 1
        x = int(rng.choice([2, 3, 4, 5])) if y == 1 else (y if rng.random() < 0.7 else int(rng.integers(1, 6)))
        if y * x == 1:
            continue
        g = int(rng.choice([1, 1, 2, 3]))
        cpg, kpg = int(rng.integers(1, 8)), int(rng.integers(1, 24))
        hi = y * int(rng.integers(1, 4)) + int(rng.integers(0, y))
        wi = x * int(rng.integers(1, 4)) + int(rng.integers(0, x))
        dtype = str(rng.choice(["fp32", "fp16", "bf16"]))
        out.append(ConvProblem(N=int(rng.integers(1, 4)), C=g * cpg, Hi=hi, Wi=wi, K=g * kpg, Y=y, X=x, sH=y, sW=x,
                               G=g, dtype=dtype, in_layout="NHWC", out_layout="NHWC", fil_layout="NHWC"))
    return out


@pytest.mark.parametrize("p", _random_patch_problems(40, 14), ids=lambda p: f"{p.dtype}_{p.short_tag()}")
def test_cpu_engine_patch_gemm_matches_float64(p):
    cfg = PerfConfig.parse(PATCH_MMA).replace(stages=1)     # the cpu target has no async copies
    spec = make_spec(p, get_target("cpu"), cfg)
    assert spec.zero_fill == ("memset" if p.Hi % p.Y or p.Wi % p.X else "none")
    rng = np.random.default_rng(3)
    dt = storage_dtype(p.dtype)
    dy = rng.uniform(-1, 1, (p.N, p.Ho, p.Wo, p.K)).astype(dt)
    w = rng.uniform(-1, 1, (p.K, p.Y, p.X, p.cpg)).astype(dt)
    dx = CpuEngine().run(spec, dy, w)
    ref = dgrad_reference(p, dy, w)
    v = verify(p, dx, ref)
    assert v.nonfinite == 0 and v.ok, (spec.kernel_name, v)
    border = np.ones((p.Hi, p.Wi), bool)
    border[:p.Ho * p.Y, :p.Wo * p.X] = False
    assert not np.asarray(dx, np.float32)[:, border].any()


def test_cpu_engine_patch_nchw_through_the_solver():
    p = _p("conv -n 2 -c 5 -H 13 -W 11 -k 7 -y 3 -x 2 -u 3 -v 2 -F 2")          # NCHW, cpu target
    cfg = PerfConfig.parse(PATCH_MMA).replace(stages=1)
    sol = DgradSolver().find_solution(p, get_target("cpu"), perf_config=cfg)
    rng = np.random.default_rng(1)
    dy = rng.uniform(-1, 1, (p.N, p.K, p.Ho, p.Wo)).astype(np.float32)
    w = rng.uniform(-1, 1, (p.K, p.cpg, p.Y, p.X)).astype(np.float32)
    v = verify(p, CpuEngine().run(sol, dy, w), dgrad_reference(p, dy, w))
    assert v.ok and v.nonfinite == 0


# The fixtures of fixtures/patch.jsonl pin the sm_90 and gfx942 defaults (GOLDEN_TARGETS); these
# pin the sm_80 default kernel of the same lines: its name and the sha256 of its emitted text.
SM80_GOLDEN = [
    ("patch_vit_b16_fp16_c3k768_224",
     "dgrad_patch_gemm_sm_80_fp16_t128x128x64_w2x2_a64x64_mma16816_v8v8v8_sk1_ko_s3_n64c3h224w224k768y16x16p0x0s16x16d1x1g1",
     "0828429c2db641c800baaaf10114b6cca8c5feb9c0d88878d4ed23122e4570fc"),
    ("patch_vit_l14_bf16_c3k1024_224",
     "dgrad_patch_gemm_sm_80_bf16_t128x128x64_w2x2_a64x64_mma16816_v8v4v2_sk1_ko_s3_n32c3h224w224k1024y14x14p0x0s14x14d1x1g1",
     "7bbbd78a52b4b4fd3c481e8d1d587574330b78ebfecca5246e71152a949ca89a"),
    ("patch_convnext_stem_fp32_border_226x230",
     "dgrad_patch_gemm_sm_80_fp32_t64x64x16_w2x2_a32x32_fma4x8_v4v4v2_sk1_ko_s3_zfm_n16c3h226w230k96y4x4p0x0s4x4d1x1g1",
     "2f92ae49d30de2fe7e98dad250bd490d623588886a8c66cedcda3b540eebf376"),
    ("patch_convnext_downsample_fp16_c384k768_14",
     "dgrad_patch_gemm_sm_80_fp16_t128x128x64_w2x2_a64x64_mma16816_v8v8v8_sk1_ko_s3_n64c384h14w14k768y2x2p0x0s2x2d1x1g1",
     "505917c7b7043c0412b04009ba465eadb2b77e378c728f5c907230cb3540506a"),
    ("patch_grouped_2x2_bf16_g2_c384k768_29x28",
     "dgrad_patch_gemm_sm_80_bf16_t128x128x64_w2x2_a64x64_mma16816_v8v8v8_sk1_ko_s3_zfm_n8c384h29w28k768y2x2p0x0s2x2d1x1g2",
     "edf73075030a3b6d23960640cd784c07eed7c75049d9e2dd4d9049f390737731"),
]


@pytest.mark.parametrize("fixture_id,name,sha256", SM80_GOLDEN, ids=[g[0] for g in SM80_GOLDEN])
def test_sm80_patch_defaults_are_pinned(fixture_id, name, sha256):
    from miopen_solver.fixtures import load
    from pathlib import Path
    (fx,) = [f for f in load([Path(__file__).resolve().parents[1] / "fixtures" / "patch.jsonl"]) if f.id == fixture_id]
    sol = DgradSolver().find_solution(parse(fx.command).problem, get_target("sm_80"))
    assert (sol.kernel_name, sol.kernels[0].source.sha256) == (name, sha256)


# ------------------------------------------------------------------ past the sub-GEMM table
@pytest.mark.parametrize("line", [
    "convfp16 -n 2 -c 3 -H 64 -W 64 -k 64 -y 32 -x 32 -u 32 -v 32 -F 2",           # ViT-B/32 embedding, NCHW
    "convbfp16 -n 1 -c 6 -H 62 -W 60 -k 16 -y 30 -x 30 -u 30 -v 30 -g 2 -F 2 --in_layout NHWC "
    "--out_layout NHWC --fil_layout NHWC",                                          # 900 phases, groups, borders
])
def test_patch_problems_past_the_sub_gemm_table_run_on_the_patch_gemm(line):
    """More than 862 tilde sub-GEMMs is TOO_MANY_SUB_GEMMS for the tilde kernel, not for the
    patch GEMM (one dense GEMM, no table): applicable on every target, the patch schedule is
    the default and the only family search() offers, a tilde config is refused with the
    reason, and the CPU engine's run matches the float64 reference. All-NCHW, GPU targets run
    the same dense GEMM on the NCHW pointwise schedules (no dY/dX transform), also tableless."""
    from miopen_solver import applicability as ap
    from miopen_solver.tilde import MAX_SUB_GEMMS, axes, too_many_sub_gemms
    sm90 = get_target("sm_90")
    p = parse(line.split()).problem
    assert p.Y * p.X > MAX_SUB_GEMMS and too_many_sub_gemms(*axes(p))
    for arch in ("sm_90", "sm_80", "gfx942", "gfx90a", "cpu"):
        t = get_target(arch)
        assert ap.is_applicable(p, t).ok, arch
        sol = DgradSolver().find_solution(p, t)
        nchw = p.in_layout == "NCHW"
        assert sol.schedule.patch or (nchw and t.is_gpu and sol.schedule.nchw_pointwise), arch
        assert all(c.schedule.patch or (nchw and c.schedule.nchw_pointwise) for c in DgradSolver().search(p, t))
    with pytest.raises(PerfConfigError, match="at most 862"):
        DgradSolver().find_solution(p, sm90, perf_config="64,64,32,2,2,32,32,0,0,0,1,-1,3")
    sol = DgradSolver().find_solution(p, sm90)
    rng = np.random.default_rng(41)
    st_ = storage_dtype(p.dtype)
    dy = rng.uniform(-1, 1, layouts.dy_shape(p)).astype(st_)
    w = rng.uniform(-1, 1, layouts.w_shape(p)).astype(st_)
    v = verify(p, CpuEngine(sm90).run(sol, dy, w), dgrad_reference(p, dy, w))
    assert v.ok and v.nonfinite == 0, v


def test_past_the_table_without_a_patch_stays_refused():
    """The same filter with padding (no patch GEMM) keeps TOO_MANY_SUB_GEMMS on every target."""
    from miopen_solver import applicability as ap
    p = parse("convfp16 -n 2 -c 3 -H 64 -W 64 -k 64 -y 31 -x 31 -p 1 -q 1 -u 31 -v 31 -F 2".split()).problem
    for arch in ("sm_90", "gfx942", "cpu"):
        v = ap.is_applicable(p, get_target(arch))
        assert v.codes == ("TOO_MANY_SUB_GEMMS",)
        text = str(v)           # names the flags behind the count and the way out (a fresh-user trial)
        assert "-y/-x 31x31" in text and "-u/-v 31x31" in text and "allowed: " in text and "-p 0 -q 0" in text


# ------------------------------------------------------------------ persistent and TMA forms
def test_persistent_and_tma_patch_forms_are_searched_not_defaulted():
    """Schedules 9 and 10 run the patch GEMM on the persistent and TMA main loops: search()
    offers them on sm_90a, the default is the ping-pong form (as measured), and their kernel
    names spell the persistent grid."""
    p = parse("convfp16 -n 8 -c 3 -H 224 -W 224 -k 768 -y 16 -x 16 -u 16 -v 16 -F 2 --in_layout NHWC "
              "--out_layout NHWC --fil_layout NHWC".split()).problem
    t = get_target("sm_90")
    found = {c.schedule for c in DgradSolver().search(p, t)}
    assert {KernelSchedule.PATCH_GEMM_PERSISTENT, KernelSchedule.PATCH_GEMM_TMA} <= found
    assert DgradSolver().get_default_performance_config(p, t).schedule is KernelSchedule.PATCH_GEMM_PINGPONG
    for code, tag in ((9, "_pb"), (10, "_tma")):
        cfg = f"128,256,64,2,1,64,256,0,0,0,1,-1,{3 if code == 9 else 4},{code}"
        sol = DgradSolver().find_solution(p, t, perf_config=cfg)
        assert sol.kernel_name.startswith("dgrad_patch_gemm_sm_90_fp16_t128x256x64") and tag in sol.kernel_name
        assert "#define DG_PATCH_Y 16" in sol.kernels[0].source.text
    assert not any(c.schedule in (KernelSchedule.PATCH_GEMM_PERSISTENT, KernelSchedule.PATCH_GEMM_TMA)
                   for c in DgradSolver().search(p, get_target("sm_80")))


@pytest.mark.parametrize("line,ok", [
    ("convfp16 -n 2 -c 3 -H 32 -W 32 -k 64 -y 16 -x 16 -u 16 -v 16", True),     # X*cpg = 48
    ("convfp16 -n 2 -c 3 -H 16 -W 16 -k 64 -y 4 -x 4 -u 4 -v 4", False),       # X*cpg = 12
    ("convbfp16 -n 2 -c 4 -H 16 -W 16 -k 64 -y 2 -x 2 -u 2 -v 2", True),       # X*cpg = 8
    ("convfp16 -n 2 -c 6 -H 16 -W 16 -k 64 -y 2 -x 2 -u 2 -v 2", False),       # X*cpg = 12
])
def test_tma_patch_needs_whole_16_byte_chunks(line, ok):
    """The TMA form stores 16-byte chunks of a patch row from its accumulators: where a
    contiguous patch row run (store_run) is not a multiple of 8 elements it is refused, with
    the run in the reason."""
    p = parse(f"{line} -F 2 --in_layout NHWC --out_layout NHWC --fil_layout NHWC".split()).problem
    cfg = "128,64,64,2,1,64,64,0,0,0,1,-1,4,10"
    assert (store_run(p) % 8 == 0) == ok
    if ok:
        DgradSolver().find_solution(p, get_target("sm_90"), perf_config=cfg)
    else:
        with pytest.raises(PerfConfigError, match=f"patch row run here is {store_run(p)}"):
            DgradSolver().find_solution(p, get_target("sm_90"), perf_config=cfg)


@pytest.mark.parametrize("line, why", [
    ("convfp16 -n 2 -c 3 -H 16 -W 16 -k 64 -y 4 -x 4 -u 4 -v 4", "12, gcd(X*cpg = 12, Wi*C = 48)"),
    ("convfp16 -n 2 -c 3 -H 33 -W 33 -k 64 -y 16 -x 16 -u 16 -v 16", "3, gcd(X*cpg = 48, Wi*C = 99)"),
    ("convfp16 -n 2 -c 6 -H 32 -W 32 -k 64 -g 2 -y 16 -x 16 -u 16 -v 16", "3, cpg = 3 (G = 2: groups interleave"),
])
def test_the_tma_patch_refusal_says_where_the_run_comes_from(line, why):
    """The refusal named the run and then ``(X*cpg = 48)``, a multiple of 8, where the run was
    3 because of the image width (gcd with Wi*C) or the groups (cpg): the reason shows the
    terms the run is made of."""
    p = parse(f"{line} -F 2 --in_layout NHWC --out_layout NHWC --fil_layout NHWC".split()).problem
    with pytest.raises(PerfConfigError) as e:
        DgradSolver().find_solution(p, get_target("sm_90"), perf_config="128,64,64,2,1,64,64,0,0,0,1,-1,4,10")
    assert f"a contiguous patch row run here is {why}" in str(e.value)


# ------------------------------------------------------------------ the ping-pong form
def test_pingpong_patch_form_is_searched_named_and_refused_like_the_tma_form():
    """Schedule 21 runs the patch GEMM on the ping-pong main loop (schedule 20): search()
    offers it on sm_90a for every one-warpgroup TMA tile, the default takes its 128x128 tile
    at 7 stages, its kernel name says ``tmapp`` (the
    cooperative TMA form of the same tile and depth is another kernel), and it takes the TMA
    form's 16-byte patch row rule and the ping-pong tile rule."""
    p = _p(VIT)
    t = get_target("sm_90")
    pp = [c for c in DgradSolver().search(p, t) if c.schedule is KernelSchedule.PATCH_GEMM_PINGPONG]
    assert pp and all(c.warp_m == c.warp_n == 1 for c in pp)
    assert DgradSolver().get_default_performance_config(p, t) == PATCH_PINGPONG_DEFAULT
    a = DgradSolver().find_solution(p, t, perf_config="128,128,64,1,1,128,128,0,0,0,1,-1,7,21")
    b = DgradSolver().find_solution(p, t, perf_config="128,128,64,1,1,128,128,0,0,0,1,-1,7,10")
    assert "_tmapp" in a.kernel_name and "_tmapp" not in b.kernel_name and "_tma" in b.kernel_name
    assert a.kernels[0].block == (384, 1, 1) and a.spec.gemm.schedule is KernelSchedule.WGMMA_TMA_PINGPONG
    assert a.kernels[0].source.sha256 != b.kernels[0].source.sha256
    with pytest.raises(PerfConfigError, match="warp_m and warp_n must be 1"):
        DgradSolver().find_solution(p, t, perf_config="128,128,64,2,1,64,128,0,0,0,1,-1,4,21")
    stem = _p(f"convfp16 -n 2 -c 3 -H 16 -W 16 -k 64 -y 4 -x 4 -u 4 -v 4 {NHWC}")
    with pytest.raises(PerfConfigError, match="patch row run here is 12"):
        DgradSolver().find_solution(stem, t, perf_config="64,64,64,1,1,64,64,0,0,0,1,-1,4,21")
    assert not any(c.schedule is KernelSchedule.PATCH_GEMM_PINGPONG for c in DgradSolver().search(stem, t))
    assert not any(c.schedule is KernelSchedule.PATCH_GEMM_PINGPONG
                   for c in DgradSolver().search(p, get_target("sm_80")))


@pytest.mark.skipif(__import__("shutil").which("nvcc") is None, reason="no nvcc on this machine")
@pytest.mark.parametrize("line,cfg", [
    (VIT, "128,128,64,1,1,128,128,0,0,0,1,-1,7,21"),
    (f"convbfp16 -n 128 -c 384 -H 56 -W 56 -k 768 -y 2 -x 2 -u 2 -v 2 {NHWC}", "64,256,64,1,1,64,256,0,0,0,1,-1,5,21"),
])
def test_pingpong_patch_kernels_build_without_spills(tmp_path, line, cfg):
    """ptxas: the ping-pong patch kernel keeps the register hand-off (40 producer, 232 per
    consumer warpgroup), no local memory, tensor copies, and the patch epilogue's stores."""
    from miopen_solver.kernels.offline import inspect_nvidia
    sol = DgradSolver().find_solution(_p(line), get_target("sm_90"), perf_config=cfg)
    b = inspect_nvidia(sol.kernels[0].source.text, "sm_90", tmp_path, "k")
    assert b.spill_store_bytes == 0 and b.spill_load_bytes == 0, (sol.kernel_name, b.registers)
    assert "setmaxnreg.dec.sync.aligned.u32 40;" in b.ptx and "setmaxnreg.inc.sync.aligned.u32 232;" in b.ptx
    assert b.count("cp.async.bulk.tensor") >= 2 and b.count("mbarrier.try_wait.parity") >= 3
