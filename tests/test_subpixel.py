"""The sub-pixel schedules (miopen_solver/subpixel.py): a strided dgrad as one stride-1 GEMM
over dY whose columns are the stride phases. The geometry and W' against brute force from the
dgrad relation, the CPU engine against the float64 reference on random strided problems, the
W' pack kernel and the phase-scattering epilogue on the kernel emulator (a wrong offset
fails), the rules' refusals, the default's domain on the zoo, and the kernels' instruction
mix (nvcc, clang-19 for AMD)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kernel_emu
from miopen_solver import layouts, subpixel
from miopen_solver.command import parse
from miopen_solver.config import KernelSchedule, PerfConfig
from miopen_solver.errors import PerfConfigError
from miopen_solver.problem import ConvProblem
from miopen_solver.reference import dgrad_reference, verify
from miopen_solver.runtime.cpu import CpuEngine
from miopen_solver.solver import DgradSolver
from miopen_solver.spec import make_spec
from miopen_solver.target import get_target

SM90 = get_target("sm_90")
NHWC = "-F 2 --in_layout NHWC --out_layout NHWC --fil_layout NHWC"
ROOT = Path(__file__).resolve().parent.parent


def _problem(N=2, C=16, Hi=11, Wi=9, K=24, Y=3, X=3, pH=1, pW=1, sH=2, sW=2, G=1, dtype="fp32"):
    return ConvProblem(N=N, C=C, Hi=Hi, Wi=Wi, K=K, Y=Y, X=X, pH=pH, pW=pW, sH=sH, sW=sW, G=G, dtype=dtype,
                       in_layout="NHWC", out_layout="NHWC", fil_layout="NHWC")


def _brute_w(p: ConvProblem, w: np.ndarray) -> dict:
    """{(virtual dX row offset a' - a, ry, same for columns): real tap} straight from the dgrad
    relation i = o*s - p + k: dX row i = s*a + ry receives dY row o through tap k."""
    out = {}
    for ry in range(p.sH):
        for ky in range(p.Y):
            if (ry + p.pH - ky) % p.sH:
                continue
            for rx in range(p.sW):
                for kx in range(p.X):
                    if (rx + p.pW - kx) % p.sW == 0:
                        out[((ry + p.pH - ky) // p.sH, ry, (rx + p.pW - kx) // p.sW, rx)] = w[:, ky, kx, :]
    return out


@given(s=st.integers(2, 5), t=st.integers(1, 5), Y=st.integers(1, 9), X=st.integers(1, 9), data=st.data())
@settings(max_examples=200, deadline=None)
def test_w_pack_holds_each_phase_tap_once_and_zeros_elsewhere(s, t, Y, X, data):
    Y, X = max(Y, s), max(X, t)
    pH, pW = data.draw(st.integers(0, Y - 1)), data.draw(st.integers(0, X - 1))
    p = _problem(C=3, K=2, Y=Y, X=X, pH=pH, pW=pW, sH=s, sW=t, Hi=3 * Y, Wi=3 * X)
    w = np.arange(p.K * Y * X * p.cpg, dtype=np.float32).reshape(p.K, Y, X, p.cpg) + 1
    yv, xv, hiH, hiW = subpixel.virtual_filter(p)
    wp = subpixel.pack_w(p, w).reshape(p.K, yv, xv, s, t, p.cpg)
    expect = _brute_w(p, w)
    seen = 0
    for ty in range(yv):
        for tx in range(xv):
            for ry in range(s):
                for rx in range(t):
                    key = (hiH - ty, ry, hiW - tx, rx)       # tap t' reads dY row a' - t' = a + hi - t'
                    if key in expect:
                        np.testing.assert_array_equal(wp[:, ty, tx, ry, rx], expect[key])
                        seen += 1
                    else:
                        assert not wp[:, ty, tx, ry, rx].any()
    assert seen == len(expect) == Y * X, "every real tap lands in exactly one (virtual tap, phase)"


@given(data=st.data())
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_cpu_engine_matches_the_float64_reference(data):
    """Random strided problems (strides 2-5, asymmetric filters and strides, pads, groups, odd
    sizes, every dtype) on a sub-pixel config, NaN-poisoned dX, against float64."""
    sH, sW = data.draw(st.sampled_from([(2, 2), (3, 3), (2, 1), (1, 2), (4, 4), (5, 3)]))
    Y, X = data.draw(st.integers(sH, sH + 4)), data.draw(st.integers(sW, sW + 4))
    G = data.draw(st.sampled_from([1, 1, 2, 3]))
    p = _problem(N=data.draw(st.integers(1, 2)), C=G * data.draw(st.integers(1, 6)), K=G * data.draw(st.integers(1, 6)),
                 Hi=data.draw(st.integers(Y, 23)), Wi=data.draw(st.integers(X, 23)), Y=Y, X=X,
                 pH=data.draw(st.integers(0, Y - 1)), pW=data.draw(st.integers(0, X - 1)), sH=sH, sW=sW, G=G,
                 dtype=data.draw(st.sampled_from(["fp32", "fp16", "bf16"])))
    if subpixel.subpixel_reason(p, SM90) is not None:
        return
    spec = make_spec(p, SM90, PerfConfig.parse("64,32,16,2,1,32,32,0,0,0,1,-1,2,15"))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    st_ = layouts.storage_dtype(p.dtype)
    dy = rng.uniform(-1, 1, layouts.dy_shape(p)).astype(st_)
    w = rng.uniform(-1, 1, layouts.w_shape(p)).astype(st_)
    v = verify(p, CpuEngine(SM90).run(spec, dy, w), dgrad_reference(p, dy, w))
    assert v.ok and v.nonfinite == 0, (p, v)


@given(s=st.integers(2, 5), Y=st.integers(2, 9), H=st.integers(1, 30), data=st.data())
@settings(max_examples=200, deadline=None)
def test_uncovered_is_exactly_rows_no_virtual_row_reaches(s, Y, H, data):
    Y = max(Y, s)
    pad = data.draw(st.integers(0, Y - 1))
    H = max(H, Y - 2 * pad, 1)
    p = _problem(Hi=H, Wi=Y, Y=Y, X=Y, pH=pad, pW=0, sH=s, sW=1)
    v = subpixel.virtual_problem(p)
    _, _, top, _ = subpixel.virtual_filter(p)
    reached = {s * (a - top) + r for a in range(v.Hi) for r in range(s)} & set(range(p.Hi))
    nonzero = {i for i in range(p.Hi) for o in range(p.Ho) for k in range(p.Y) if o * s - pad + k == i}
    assert nonzero <= reached, "every dX row with a tap is computed"
    assert subpixel.uncovered(p) == (len(reached) < p.Hi)      # stride 1 along W covers every column


@pytest.mark.parametrize("change,why", [
    (dict(sH=1, sW=1), "stride 1x1 has one phase"),
    (dict(Y=1, X=1, pH=0, pW=0), "narrower than stride"),
    (dict(Y=2, X=2, pH=0, pW=0, Hi=10, Wi=10), "patch GEMM"),
])
def test_problems_the_schedules_refuse_say_why(change, why):
    p = _problem().replace(**change)
    assert why in subpixel.subpixel_reason(p, SM90)
    with pytest.raises(PerfConfigError, match="schedule 17 \\(subpixel-tma\\) does not apply"):
        make_spec(p.replace(dtype="fp16"), SM90, PerfConfig.parse("128,128,64,2,1,64,128,0,0,0,1,-1,4,17"))


def test_dilation_and_nchw_are_refused_with_their_values():
    p = _problem()
    assert "dilation 2x1" in subpixel.subpixel_reason(p.replace(dH=2), SM90)
    assert "dY NHWC, W NHWC, dX NCHW in memory" in subpixel.subpixel_reason(p.replace(in_layout="NCHW"), SM90)


def test_tma_form_needs_whole_16_byte_chunks_of_one_phase():
    p = _problem(C=12, dtype="fp16")
    with pytest.raises(PerfConfigError, match="cpg 12 is not a multiple of 8"):
        make_spec(p, SM90, PerfConfig.parse("128,128,64,2,1,64,128,0,0,0,1,-1,4,17"))
    with pytest.raises(PerfConfigError, match="split_k must be 1 or -1"):
        make_spec(p.replace(C=16), SM90, PerfConfig.parse("128,128,64,2,1,64,128,0,0,0,2,-1,4,16"))


def _lines(path: str):
    for raw in (ROOT / path).read_text().splitlines():
        if raw.strip() and not raw.startswith("#"):
            cmd, _, label = raw.partition("#")
            yield label.split()[0], parse(cmd.split()).problem


def test_the_default_takes_it_only_for_strided_16_bit_layers_with_32_channel_groups():
    """The cost-model rule (cost_model.subpixel_config) on the zoo and the held-out strided
    lines: exactly the 32-channel (cpg <= 32, kpg >= 64) strided lines move, to schedule 16
    or 17, and no suite line does."""
    moved = {}
    for path in ("bench/zoo.txt", "bench/strided_heldout.txt", "bench/suite.txt"):
        for label, p in _lines(path):
            cfg = DgradSolver().get_default_performance_config(p, SM90)
            if cfg.schedule.subpixel:
                moved[label] = (p, cfg)
    assert set(moved) == {"yolov5s/model.1_3x3s2_c32_k64_320", "yolov3_darknet53/conv1_3x3s2_c32_k64_416",
                          "yolov8n/model.3_3x3s2_c32_k64_160", "nnunet_2d/encoder.stages.1.conv1_3x3s2_c32_k64_512"}
    for p, cfg in moved.values():
        assert p.cpg <= 32 and p.kpg >= 64 and cfg.schedule in (KernelSchedule.SUBPIXEL_WGMMA, KernelSchedule.SUBPIXEL_TMA)
    stem = parse(f"convfp16 -n 16 -c 32 -H 320 -W 320 -k 64 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 {NHWC}".split()).problem
    assert not DgradSolver().get_default_performance_config(stem.replace(dtype="fp32"), SM90).schedule.subpixel
    assert not DgradSolver().get_default_performance_config(stem, get_target("gfx942")).schedule.subpixel
    assert not DgradSolver().get_default_performance_config(stem.replace(in_layout="NCHW", out_layout="NCHW",
                                                                         fil_layout="NCHW"), SM90).schedule.subpixel


def test_a_solution_packs_w_into_the_workspace_before_the_kernel():
    p = parse(f"convfp16 -n 16 -c 32 -H 320 -W 320 -k 64 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 {NHWC}".split()).problem
    sol = DgradSolver().find_solution(p, SM90)
    (pack,) = sol.transform_launches
    assert isinstance(pack, subpixel.PackW) and pack.before and pack.nbytes == 64 * 2 * 2 * 128 * 2
    assert sol.workspace_bytes >= pack.nbytes and sol.kernel_name.endswith("+pack_w")
    assert DgradSolver().get_workspace_size(p, SM90) == sol.workspace_bytes
    assert type(sol).from_record(sol.to_record()) == sol


# ----------------------------------------------------------------------------- emulator
needs_emu = pytest.mark.skipif(not kernel_emu.available(), reason="clang++ not on PATH")


@needs_emu
@pytest.mark.parametrize("line", [
    "convfp16 -n 1 -c 16 -H 9 -W 7 -k 8 -y 5 -x 3 -p 2 -q 1 -u 2 -v 3 -g 2",
    "conv -n 1 -c 6 -H 8 -W 8 -k 4 -y 3 -x 3 -u 2 -v 2",
])
def test_pack_kernel_stores_what_pack_w_computes(tmp_path, line):
    p = parse(f"{line} {NHWC}".split()).problem
    pack = subpixel.PackW(p)
    st_ = layouts.storage_dtype(p.dtype)
    w = np.random.default_rng(5).uniform(-1, 1, layouts.w_shape(p)).astype(st_)
    for vendor, arch in (("nvidia", "sm_90"), ("amd", "gfx942")):
        text = pack.emit(vendor, arch).text
        out = kernel_emu.launch_pack(text, pack.grid, pack.block, w.tobytes(),
                                     np.full(pack.elems, np.nan, dtype=st_).tobytes(), tmp_path / vendor)
        assert out == pack.apply(w).tobytes()


@needs_emu
def test_a_wrong_phase_offset_in_the_epilogue_fails(tmp_path):
    """The emulated kernel verifies, and one whose epilogue shifts the phases' rows by one
    virtual row does not (the emulator tests can fail)."""
    from test_gemm_emu import run_emulated
    p = parse(f"convfp16 -n 2 -c 32 -H 10 -W 12 -k 64 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 {NHWC}".split()).problem
    cfg = "128,128,64,2,1,64,128,0,0,0,1,-1,4,17"
    _, ok = run_emulated(p, "sm_90", tmp_path, perf_config=cfg)
    assert ok.ok and ok.nonfinite == 0
    _, bad = run_emulated(p, "sm_90", tmp_path, perf_config=cfg,
                          mangle=lambda t: t.replace("(av - DG_SP_TOP)", "(av - DG_SP_TOP + 1)"))
    assert not bad.ok


# ----------------------------------------------------------------------------- compiled code
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc on this machine")
@pytest.mark.parametrize("cfg", [None, "128,256,64,2,1,64,256,0,0,0,1,-1,4,17", "128,64,32,2,2,64,32,0,0,0,1,-1,3,15",
                                 "128,128,64,1,1,128,128,0,0,0,1,-1,7,22", "64,256,64,1,1,64,256,0,0,0,1,-1,5,22"])
def test_nvidia_kernels_use_their_matrix_instructions_without_spills(tmp_path, cfg):
    from miopen_solver.kernels.emit import emit
    from miopen_solver.kernels.offline import inspect_nvidia
    p = parse(f"convfp16 -n 16 -c 32 -H 320 -W 320 -k 64 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 {NHWC}".split()).problem
    config = PerfConfig.parse(cfg) if cfg else DgradSolver().get_default_performance_config(p, SM90)
    spec = make_spec(p, SM90, config)
    b = inspect_nvidia(emit(spec).text, "sm_90", tmp_path, "k")
    assert b.spill_store_bytes == 0 and b.spill_load_bytes == 0, (spec.kernel_name, b.registers)
    if spec.wgmma:
        assert b.count("wgmma.mma_async.sync.aligned.m64n") >= spec.mma_m * spec.config.tile_k // 16
    else:
        assert b.count("mma.sync.aligned.m16n8k16") >= 1 and b.count("ldmatrix") >= 1
    pk = inspect_nvidia(subpixel.PackW(p).emit("nvidia", "sm_90").text, "sm_90", tmp_path, "p")
    assert pk.spill_store_bytes == 0


@pytest.mark.amdcompile
@pytest.mark.parametrize("arch", ["gfx90a", "gfx942"])
def test_amd_kernels_compile_to_mfma_without_scratch(tmp_path, arch):
    from miopen_solver.kernels.emit import emit
    from miopen_solver.kernels.offline import compile_amd, find_amd_clang
    if find_amd_clang() is None:
        pytest.skip("no clang with AMDGPU targets (install clang-19 lld-19)")
    p = parse(f"convfp16 -n 16 -c 32 -H 320 -W 320 -k 64 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 {NHWC}".split()).problem
    spec = make_spec(p, get_target(arch), PerfConfig.parse("128,64,32,2,2,64,32,0,0,0,1,-1,2,15"))
    co = compile_amd(emit(spec).text, arch, tmp_path, "dgrad")
    r = co.resources
    assert r["ScratchSize [bytes/lane]"] == 0 and r["VGPRs Spill"] == 0, (spec.kernel_name, r)
    assert co.count("v_mfma") >= spec.mma_m * spec.mma_n
    pk = compile_amd(subpixel.PackW(p).emit("amd", arch).text, arch, tmp_path, "pack")
    assert pk.resources["ScratchSize [bytes/lane]"] == 0


@pytest.mark.parametrize("line", [
    f"convfp16 -n 4 -c 32 -H 40 -W 40 -k 64 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 {NHWC}",
    "convfp16 -n 4 -c 64 -H 14 -W 14 -k 64 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 -F 2",
    "convbfp16 -n 2 -c 64 -H 7 -W 7 -k 256 -y 1 -x 1 -F 2",
    f"conv -n 2 -c 16 -H 20 -W 17 -k 32 -y 5 -x 3 -p 2 -q 1 -u 3 -v 2 -g 2 {NHWC}",
])
def test_the_problem_workspace_covers_every_searched_config(line):
    """MIOpen sizes a solver's workspace per problem: what get_workspace_size answers without
    a config must hold every config the search offers (the sub-pixel W' was missing)."""
    from miopen_solver.heuristics import sample_configs, search_space
    p = parse(line.split()).problem
    solver = DgradSolver()
    whole = solver.get_workspace_size(p, SM90)
    families = set()
    for cfg in sample_configs(list(search_space(p, SM90)), 400):
        try:
            need = solver.get_workspace_size(p, SM90, cfg)
        except PerfConfigError:
            continue
        families.add(cfg.schedule.subpixel)
        assert need <= whole, (cfg.serialize(), need, whole)
    assert families


LAYOUT_COMBOS = [(dx, dy, w) for dx in ("NHWC", "NCHW") for dy in ("NHWC", "NCHW") for w in ("NHWC", "NCHW")]


@pytest.mark.parametrize("dx,dy,w", LAYOUT_COMBOS)
def test_every_layout_combination_is_refused_or_exact(dx, dy, w):
    """A fresh-user trial found mixed-layout lines (NCHW dY or W, NHWC dX) run on the sub-pixel
    schedules without their transposes: wrong dX that fp16's tolerance let pass. Every layout
    combination, in fp32 (a tolerance that catches it), through the whole solution on the CPU
    engine: the sub-pixel config is refused (naming each tensor's memory order) unless all three
    are NHWC, and then it verifies; the sm_90 default of the same line in fp16 is sub-pixel
    only when all three are NHWC."""
    line = f"-n 2 -c 32 -k 64 -H 11 -W 13 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 -F 2 --in_layout {dx} --out_layout {dy} --fil_layout {w}"
    p = parse(f"conv {line}".split()).problem
    all_nhwc = (dx, dy, w) == ("NHWC", "NHWC", "NHWC")
    try:
        sol = DgradSolver().find_solution(p, SM90, perf_config="128,128,32,2,2,64,64,0,0,0,1,-1,2,15")
    except PerfConfigError as e:
        assert not all_nhwc and f"dY {dy}, W {w}, dX {dx} in memory" in str(e)
    else:
        assert all_nhwc and sol.schedule.subpixel
        rng = np.random.default_rng(11)
        dy_, w_ = (rng.uniform(-1, 1, layouts.dy_shape(p)).astype(np.float32),
                   rng.uniform(-1, 1, layouts.w_shape(p)).astype(np.float32))
        v = verify(p, CpuEngine(SM90).run(sol, dy_, w_), dgrad_reference(p, dy_, w_))
        assert v.ok and v.nonfinite == 0, v
    fp16 = parse(f"convfp16 {line}".split()).problem
    assert DgradSolver().get_default_performance_config(fp16, SM90).schedule.subpixel == all_nhwc


# ----------------------------------------------------------------------------- the ping-pong form
def test_pingpong_form_is_searched_and_takes_the_tma_forms_rules():
    """Schedule 22 runs the sub-pixel GEMM on the ping-pong main loop (schedule 20): in the
    search on sm_90a for one-warpgroup tiles, not on sm_80; the TMA forms' 16-byte rule and
    the ping-pong tile rule name themselves; its kernel name says ``tmapp``."""
    p = _problem(C=32, dtype="fp16")
    found = [c for c in DgradSolver().search(p, SM90) if c.schedule is KernelSchedule.SUBPIXEL_PINGPONG]
    assert found and all(c.warp_m == c.warp_n == 1 for c in found)
    assert not any(c.schedule.subpixel and c.schedule.pingpong for c in DgradSolver().search(p, get_target("sm_80")))
    cfg = PerfConfig.parse("128,128,64,1,1,128,128,0,0,0,1,-1,7,22")
    assert "_tmapp" in make_spec(p, SM90, cfg).kernel_name
    with pytest.raises(PerfConfigError, match="cpg 12 is not a multiple of 8"):
        make_spec(p.replace(C=12), SM90, cfg)
    with pytest.raises(PerfConfigError, match="warp_m and warp_n must be 1"):
        make_spec(p, SM90, PerfConfig.parse("128,128,64,2,1,64,128,0,0,0,1,-1,4,22"))

