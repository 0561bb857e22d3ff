"""The group-pack schedules (miopen_solver.group_pack): narrow groups packed into one tile
with a block-diagonal W. The block-diagonal W' by hand, the CPU engine and the emitted
kernels (the emulator, both vendors, both main loops) against the float64 reference, the
rules and their messages, the kernel text of every other schedule unchanged."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kernel_emu
from miopen_solver.command import parse
from miopen_solver.config import KernelSchedule, PerfConfig
from miopen_solver.errors import PerfConfigError
from miopen_solver.group_pack import packed_w, virtual_problem
from miopen_solver.reference import dgrad_reference, verify
from miopen_solver.runtime.cpu import CpuEngine
from miopen_solver.solver import DgradSolver
from miopen_solver.spec import make_spec
from miopen_solver.target import get_target
from test_gemm_emu import _inputs, run_emulated

SOLVER = DgradSolver()
NHWC = "-F 2 --in_layout NHWC --out_layout NHWC --fil_layout NHWC"


def _p(line: str):
    return parse(f"{line} {NHWC}".split()).problem


def test_packed_w_is_block_diagonal_by_hand():
    # G = 4, kpg = 2, cpg = 3, a 1x1 filter: pack 2 -> two packed groups of 6 columns.
    p = _p("conv -n 1 -c 12 -H 2 -W 2 -k 8 -y 1 -x 1 -g 4")
    w = np.arange(8 * 3, dtype=np.float32).reshape(8, 1, 1, 3) + 1
    got = packed_w(p, 2, w).reshape(8, 6)
    want = np.zeros((8, 6), np.float32)
    for k in range(8):
        block = (k // 2) % 2                     # real group k // kpg, its place in the pack
        want[k, 3 * block:3 * block + 3] = w[k, 0, 0]
    assert np.array_equal(got, want)
    assert virtual_problem(p, 2).G == 2 and virtual_problem(p, 2).cpg == 6 and virtual_problem(p, 2).kpg == 4


@pytest.mark.parametrize("line,cfg,message", [
    ("convfp16 -n 1 -c 64 -H 4 -W 4 -k 64 -y 3 -x 3 -p 1 -q 1 -g 8", "128,48,32,2,2,64,24,0,0,0,1,-1,4,11",
     "packs 6 groups of cpg=8, which do not divide G=8"),
    ("convfp16 -n 1 -c 64 -H 4 -W 4 -k 64 -y 3 -x 3 -p 1 -q 1 -g 8", "128,8,32,4,1,32,8,0,0,0,1,-1,4,11",
     "must be a multiple of cpg=8 and at least 2\\*cpg=16"),
    ("convfp16 -n 1 -c 64 -H 4 -W 4 -k 64 -y 3 -x 3 -p 1 -q 1 -g 8", "128,-64,32,2,2,64,32,0,0,0,1,-1,4,11",
     "tile_n must be >= 1, got -64"),
    ("convfp16 -n 1 -c 64 -H 4 -W 4 -k 64 -y 3 -x 3 -p 1 -q 1 -g 8", "128,64,32,2,2,64,32,0,0,0,2,-1,4,11",
     "writes each dX element once; split_k must be 1 or -1"),
    ("convfp16 -n 1 -c 64 -H 4 -W 4 -k 64 -y 3 -x 3 -p 1 -q 1", "128,64,32,2,2,64,32,0,0,0,1,-1,4,11",
     "does not apply: one group: nothing to pack"),
])
def test_configs_that_do_not_pack_are_refused_with_the_rule(line, cfg, message):
    with pytest.raises(PerfConfigError, match=message):
        make_spec(_p(line), get_target("sm_80"), PerfConfig.parse(cfg))


def test_the_w_vector_is_clamped_to_a_real_group():
    p = _p("convfp16 -n 1 -c 32 -H 4 -W 4 -k 32 -y 3 -x 3 -p 1 -q 1 -g 8")       # cpg 4: 8-byte rows
    spec = make_spec(p, get_target("sm_80"), PerfConfig.parse("128,32,32,4,1,32,32,0,0,0,1,-1,4,11"))
    assert spec.pack == 8 and spec.vec_b == 4 and spec.kernel_name.startswith("dgrad_group_pack8_sm_80_fp16_")


# (line, arch, config): both main loops, both vendors, stride 2 (tilde sub-GEMMs and a zero fill),
# 1x1 (pointwise), kpg % tile_k == 0 (tap-uniform k-tiles) and not, bf16 and fp32.
EMU_CASES = [
    ("convfp16 -n 2 -c 64 -H 6 -W 5 -k 64 -y 3 -x 3 -p 1 -q 1 -g 8", "sm_80", "128,64,32,2,2,64,32,0,0,0,1,-1,4,11"),
    ("convbfp16 -n 2 -c 64 -H 7 -W 6 -k 64 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 -g 8", "sm_90",
     "128,64,64,2,1,64,64,0,0,0,1,-1,4,12"),
    ("convfp16 -n 2 -c 128 -H 5 -W 5 -k 128 -y 1 -x 1 -g 16", "sm_90", "128,64,64,2,1,64,64,0,0,0,1,-1,4,12"),
    ("convfp16 -n 2 -c 64 -H 5 -W 6 -k 32 -y 3 -x 3 -p 1 -q 1 -g 4", "gfx942", "64,32,16,2,1,32,32,0,0,0,1,-1,2,11"),
    ("conv -n 1 -c 32 -H 5 -W 5 -k 32 -y 1 -x 1 -u 2 -v 2 -g 8", "gfx90a", "64,16,16,2,1,32,16,0,0,0,1,-1,2,11"),
]


@pytest.mark.skipif(not kernel_emu.available(), reason="clang++ not on PATH")
@pytest.mark.parametrize("line,arch,cfg", EMU_CASES)
def test_the_packed_kernel_verifies_on_the_emulator(tmp_path, line, arch, cfg):
    p = _p(line)
    sol, v = run_emulated(p, arch, tmp_path, perf_config=cfg, seed=7)
    assert sol.schedule.group_pack and sol.spec.pack == PerfConfig.parse(cfg).tile_n // p.cpg
    assert v.ok and v.nonfinite == 0, (sol.kernel_name, v)


@pytest.mark.skipif(not kernel_emu.available(), reason="clang++ not on PATH")
@pytest.mark.parametrize("line,arch,cfg,mask", [
    # kpg' = 64, a multiple of tile_k: the tap-uniform loader
    (EMU_CASES[0][0], EMU_CASES[0][1], EMU_CASES[0][2], "(k0 + row) / DG_PACK_KPG == c / DG_PACK_CPG"),
    # kpg' = 2*4 = 8 < tile_k 32: the general loader (dg_b_src)
    ("convfp16 -n 2 -c 32 -H 5 -W 6 -k 16 -y 3 -x 3 -p 1 -q 1 -g 4", "sm_80", "64,16,32,2,1,32,16,0,0,0,1,-1,3,11",
     "k / DG_PACK_KPG == c / DG_PACK_CPG"),
])
def test_a_kernel_that_reads_w_densely_fails(tmp_path, line, arch, cfg, mask):
    """Without the mask the packed kernel reads other groups' W rows into the off-diagonal
    blocks: the result is wrong (the emulator runs what is emitted), in either B loader."""
    p = _p(line)
    sol, v = run_emulated(p, arch, tmp_path, perf_config=cfg, seed=3)
    assert v.ok and mask in sol.spec.emit().text
    _, v = run_emulated(p, arch, tmp_path, perf_config=cfg, seed=3, mangle=lambda t: t.replace(mask, "true"))
    assert not v.ok


@settings(max_examples=30, deadline=None)
@given(st.sampled_from((2, 4, 8, 16)), st.sampled_from((2, 4, 8)), st.integers(2, 32), st.sampled_from((1, 3)),
       st.sampled_from((1, 2)), st.integers(1, 3), st.sampled_from(("conv", "convfp16", "convbfp16")),
       st.integers(0, 2 ** 32 - 1), st.sampled_from((1, 2)))
def test_the_cpu_engine_runs_packed_problems_like_the_reference(cpg, kpg, g, f, s, n, kind, seed, d):
    tile_n = next((t for t in (16, 32, 64) if t % cpg == 0 and t >= 2 * cpg and g % (t // cpg) == 0), None)
    if tile_n is None:
        return
    p = _p(f"{kind} -n {n} -c {g * cpg} -H 7 -W 6 -k {g * kpg} -y {f} -x {f} -p {f // 2} -q {f // 2} "
           f"-u {s} -v {s} -l {d} -j {d} -g {g}")
    cfg = f"64,{tile_n},16,2,1,32,{tile_n},0,0,0,1,-1,2,11"
    sol = SOLVER.find_solution(p, get_target("gfx942"), perf_config=cfg)
    dy, w = _inputs(p, np.random.default_rng(seed))
    dx = CpuEngine(sol.target).run(sol, dy, w)
    v = verify(p, dx, dgrad_reference(p, dy, w))
    assert v.ok and v.nonfinite == 0, (sol.kernel_name, v)


def test_every_other_kernel_text_is_unchanged_by_the_section():
    """The group_pack sections replace W's loader lines only where asked: a dense kernel's
    text has none of their names."""
    from miopen_solver.kernels.emit import emit
    spec = make_spec(_p("convfp16 -n 1 -c 64 -H 4 -W 4 -k 64 -y 3 -x 3 -p 1 -q 1 -g 8"), get_target("sm_80"),
                     PerfConfig.parse("128,8,32,4,1,32,8,0,0,0,1,-1,4"))
    assert "DG_PACK_" not in emit(spec).text and "// #" not in emit(spec).text
    packed = make_spec(_p("convfp16 -n 1 -c 64 -H 4 -W 4 -k 64 -y 3 -x 3 -p 1 -q 1 -g 8"), get_target("sm_80"),
                       PerfConfig.parse("128,64,32,2,2,64,32,0,0,0,1,-1,4,11"))
    assert emit(packed).text.count("DG_PACK_CPG") >= 6 and packed.schedule is KernelSchedule.GROUP_PACK


@pytest.mark.skipif(not kernel_emu.available(), reason="clang++ not on PATH")
@pytest.mark.parametrize("arch,line", [
    ("sm_90", "convfp16 -n 2 -c 64 -H 5 -W 6 -k 64 -y 3 -x 3 -p 1 -q 1 -g 8 -F 2"),      # NCHW: dX stored NCHW
    ("gfx942", "convbfp16 -n 2 -c 64 -H 5 -W 5 -k 64 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 -g 8 -F 2"),   # strided: dX transform
])
def test_nchw_lines_run_their_default_pack_through_the_launch_plan(tmp_path, arch, line):
    from miopen_solver.transpose import writes_nchw_dx
    p = parse(line.split()).problem
    sol, v = run_emulated(p, arch, tmp_path, seed=5)
    assert sol.schedule.group_pack
    assert ("dX" in [t.tensor for t in sol.transforms]) is not writes_nchw_dx(sol.spec)
    assert v.ok and v.nonfinite == 0, (sol.kernel_name, v)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(("NCHW", "NHWC")), st.sampled_from(("NCHW", "NHWC")), st.sampled_from((1, 2)),
       st.sampled_from((1, 2)), st.sampled_from(("fp16", "bf16", "fp32")), st.sampled_from(("sm_80", "sm_90", "gfx942")),
       st.booleans())
def test_a_virtual_gemm_kernel_stores_nchw_dx_exactly_when_its_solution_drops_the_dx_transform(
        dx_layout, dy_layout, su, sv, dtype, arch, pack):
    """Every family that runs a main loop on a virtual problem (group packing, the patch
    GEMM, NCHW pointwise): the inner kernel's epilogue stores NCHW dX exactly when the
    solution's rule says so, else a kernel would write NCHW into an NHWC workspace."""
    from miopen_solver.transpose import writes_nchw_dx
    kind = {"fp16": "convfp16", "bf16": "convbfp16", "fp32": "conv"}[dtype]
    line = (f"{kind} -n 2 -c 64 -H 8 -W 8 -k 64 -y 3 -x 3 -p 1 -q 1 -u {su} -v {sv} -g 8" if pack else
            f"{kind} -n 2 -c 3 -H 8 -W 8 -k 64 -y 2 -x 2 -u 2 -v 2")
    p = parse(f"{line} -F 2 --in_layout {dx_layout} --out_layout {dy_layout} --fil_layout NHWC".split()).problem
    sol = SOLVER.find_solution(p, get_target(arch))
    if not sol.schedule.virtual_gemm:
        return
    assert getattr(sol.spec.gemm, "nchw_dx", False) is writes_nchw_dx(sol.spec)
    assert ("dX" in [t.tensor for t in sol.transforms]) is (p.in_layout == "NCHW" and not writes_nchw_dx(sol.spec))


@pytest.mark.skipif(not kernel_emu.available(), reason="clang++ not on PATH")
@settings(max_examples=10, deadline=None)
@given(st.sampled_from(("sm_80", "sm_90", "gfx942")), st.sampled_from((2, 4, 8, 16)), st.sampled_from((4, 8, 16)),
       st.sampled_from(((1, 1, 1), (3, 3, 1), (3, 3, 2), (1, 5, 1), (1, 1, 2))), st.integers(1, 2),
       st.sampled_from(("convfp16", "convbfp16", "conv")), st.integers(0, 2 ** 32 - 1))
def test_random_packed_kernels_verify_on_the_emulator(tmp_path_factory, arch, cpg, kpg, fxs, n, kind, seed):
    """Random packs of random narrow groups on the emitted kernels (strides, 1x1, odd
    sizes), each main loop the target has, against the float64 reference."""
    y, x, s = fxs
    wgmma = arch == "sm_90" and kind != "conv" and 64 % cpg == 0 and (64 // cpg) * kpg >= 64
    tn = 64 if wgmma else max(16, 2 * cpg)
    pack = tn // cpg
    g = pack * 2
    line = (f"{kind} -n {n} -c {g * cpg} -H 7 -W 6 -k {g * kpg} -y {y} -x {x} -p {y // 2} -q {x // 2} "
            f"-u {s} -v {s} -g {g}")
    stages = 4 if arch != "gfx942" else 2
    if wgmma:
        cfg = f"128,64,64,2,1,64,64,0,0,0,1,-1,{stages},12"
    else:
        tk = 16 if kind == "conv" else 32
        cfg = f"64,{tn},{tk},2,1,32,{tn},0,0,0,1,-1,{stages},11"
    sol, v = run_emulated(_p(line), arch, tmp_path_factory.mktemp("emu"), perf_config=cfg, seed=seed)
    assert sol.spec.pack == pack
    assert v.ok and v.nonfinite == 0, (sol.kernel_name, v)


@pytest.mark.parametrize("arch", ["sm_90", "sm_80", "gfx942", "gfx90a"])
@pytest.mark.parametrize("line,packed", [
    ("convfp16 -n 8 -c 256 -H 28 -W 28 -k 256 -y 3 -x 3 -p 1 -q 1 -g 32", 8),       # cpg 8
    ("convbfp16 -n 8 -c 512 -H 14 -W 14 -k 512 -y 3 -x 3 -p 1 -q 1 -g 32", 4),      # cpg 16
    ("convfp16 -n 8 -c 1024 -H 7 -W 7 -k 1024 -y 3 -x 3 -p 1 -q 1 -g 32", 2),       # cpg 32
    ("convfp16 -n 8 -c 96 -H 14 -W 14 -k 96 -y 3 -x 3 -p 1 -q 1 -g 4", 0),          # cpg 24 does not divide 64
    ("convfp16 -n 8 -c 64 -H 14 -W 14 -k 64 -y 3 -x 3 -p 1 -q 1 -g 4", 4),          # cpg 16: 4 packs make G 4
    ("convfp16 -n 8 -c 48 -H 14 -W 14 -k 48 -y 3 -x 3 -p 1 -q 1 -g 6", 0),          # cpg 8: 8 packs do not divide G 6
    ("conv -n 8 -c 256 -H 28 -W 28 -k 256 -y 3 -x 3 -p 1 -q 1 -g 32", 0),           # IEEE fp32 on FFMA
    ("convfp16 -n 8 -c 256 -H 28 -W 28 -k 2048 -y 3 -x 3 -p 1 -q 1 -g 32", 0),      # kpg 64 > 32
])
def test_the_gpu_default_packs_narrow_groups_of_matrix_types(arch, line, packed):
    p = _p(line)
    cfg = SOLVER.get_default_performance_config(p, get_target(arch))
    if packed:
        assert cfg.schedule.group_pack and cfg.tile_n == packed * p.cpg and cfg.tile_n == 64
        assert make_spec(p, get_target(arch), cfg).pack == packed
    else:
        assert not cfg.schedule.group_pack
    assert not SOLVER.get_default_performance_config(p, get_target("cpu")).schedule.group_pack


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(("sm_90", "sm_80", "gfx942", "gfx90a")), st.sampled_from(("convfp16", "convbfp16", "conv")),
       st.sampled_from((1, 2, 4, 8, 16, 32)), st.sampled_from((1, 2, 4, 8, 16, 32)), st.sampled_from((1, 2, 8, 32)),
       st.sampled_from(("1x1", "3x3", "2x2s2", "4x4s4", "3x3s2")), st.sampled_from(("NHWC", "NCHW")),
       st.booleans())
def test_every_family_default_of_a_grouped_problem_is_valid(arch, kind, cpg, kpg, g, shape, layout, tf32):
    """The defaults of the families built on a virtual problem (patch GEMM, NCHW pointwise,
    group packing) each take a main loop's tile from the dense rules; none may take another
    family's schedule there (an NCHW pointwise twin is itself a grouped problem with narrow
    groups). Over grouped patch, 1x1 NCHW and tilde problems on every target: the default
    exists and builds."""
    y, s = {"1x1": (1, 1), "3x3": (3, 1), "2x2s2": (2, 2), "4x4s4": (4, 4), "3x3s2": (3, 2)}[shape]
    pad = 1 if shape.startswith("3x3") else 0
    line = (f"{kind} -n 2 -c {g * cpg} -H 8 -W 8 -k {g * kpg} -y {y} -x {y} -p {pad} -q {pad} -u {s} -v {s} "
            f"-g {g} -F 2 --in_layout {layout} --out_layout {layout} --fil_layout {layout}"
            + (" -M 0" if tf32 and kind == "conv" else ""))
    from miopen_solver.tf32 import resolve
    t = get_target(arch)
    p, _ = resolve(parse(line.split()).problem, t)         # TF32 where the target has it, as a run does
    cfg = SOLVER.get_default_performance_config(p, t)
    sol = SOLVER.find_solution(p, t)
    assert sol.spec is not None and cfg is not None
