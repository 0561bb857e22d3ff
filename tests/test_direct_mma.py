"""The direct schedule's mma body (``vector_size_a`` 2, and 3 on persistent blocks;
kernels/direct_mma.cu), CPU only: its rules, its spec and records, the search, offline builds
(no spills), and the emitted kernel run on the emulator (NVIDIA flavour: ldmatrix and mma.sync emulated from their documented
fragment layouts) against the float64 reference with NaN-poisoned dX."""

from __future__ import annotations

import dataclasses
import json
import random

import numpy as np
import pytest

from miopen_solver import layouts
from miopen_solver.direct import (MAX_ACC, MAX_MMA_KSTEPS, MAX_MMA_WARPS, MMA_BODY, MMA_PERSISTENT_BODY, MMA_TILES,
                                  direct_search_space,
                                  is_valid_direct_config, make_direct_spec, mma_config, mma_reason, phase_spans,
                                  run_direct_cpu)
from miopen_solver.errors import PerfConfigError
from miopen_solver.kernels import offline
from miopen_solver.problem import ConvProblem
from miopen_solver.reference import default_tolerance, dgrad_reference, rms_range
from miopen_solver.solver import Solution, solution_of
from miopen_solver.target import get_target

import kernel_emu

SM90, SM80 = get_target("sm_90"), get_target("sm_80")
NHWC = dict(in_layout="NHWC", out_layout="NHWC", fil_layout="NHWC")


def dw(**kw) -> ConvProblem:
    base = dict(N=2, C=16, Hi=9, Wi=21, K=16, G=16, Y=3, X=5, pH=1, pW=2, dtype="fp16")
    base.update(kw)
    if "C" in kw and "K" not in kw:
        base["K"] = base["G"] = kw["C"]
    return ConvProblem(**base, **NHWC)


# ----------------------------------------------------------------------------- rules
@pytest.mark.parametrize("problem, arch, words", [
    (dw(dtype="fp32"), "gfx942", "the mma body takes fp16 or bf16 data; got fp32"),
    (dw(dtype="fp32"), "sm_90", "the mma body takes fp16 or bf16 data; got fp32"),
    (dw(C=32, K=32, G=16), "sm_90", "cpg=2"),
    (dw(C=16, K=32, G=16), "sm_90", "kpg=2"),
    (dw(C=12), "sm_90", "C=12 is not a multiple of 8"),
    (dw(Wi=90, X=9, pW=12, dW=7), "sm_90", "span 56 dY columns; the mma body takes at most 48"),
])
def test_each_reason(problem, arch, words):
    why = mma_reason(problem, get_target(arch))
    assert why is not None and words in why, why
    with pytest.raises(PerfConfigError, match="mma body"):
        make_direct_spec(problem, get_target(arch), mma_config(16, 16, 8, 4))


def test_spans_up_to_four_k_steps_are_served():
    p = dw(Wi=60, X=13, pW=6, dW=3)                      # 16 + 36 columns: 4 k-steps
    assert phase_spans(p)[1] == 36 and mma_reason(p, SM90) is None
    assert make_direct_spec(p, SM90, mma_config(16, 16, 8, 4)).ksteps == MAX_MMA_KSTEPS


@pytest.mark.parametrize("changes, field", [
    (dict(warp_n=2), "warp_n"), (dict(split_k=2), "split_k"), (dict(vector_size_b=4), "vector_size_b"),
    (dict(warp_tile_m=8), "warp_tile_m"), (dict(warp_tile_n=16), "warp_tile_n"),
    (dict(lds_k_outer=0), "lds_k_outer"), (dict(stages=2), "stages"), (dict(vector_size_c=4), "vector_size_c"),
    (dict(tile_m=24), "tile_m"), (dict(tile_k=12), "tile_k"), (dict(tile_n=12), "tile_n"),
    (dict(warp_m=0), "warp_m"), (dict(warp_m=17, tile_n=32), "warp_m"), (dict(warp_m=9, tile_n=8), "warp_m"),
    (dict(tile_m=64, tile_k=48), "accumulators"), (dict(tile_n=1024, warp_m=16), "shared memory"),
])
def test_each_config_rule_names_its_field(changes, field):
    c = mma_config(16, 16, 8, 4).replace(**changes)
    ok, why = is_valid_direct_config(dw(), SM90, c)
    assert not ok and field in why and "\n" not in why, why


def test_limits_hold_at_their_edges():
    p = dw(C=64)
    assert is_valid_direct_config(p, SM90, mma_config(16, 64, 8, MAX_MMA_WARPS))[0]
    assert is_valid_direct_config(p, SM90, mma_config(64, 16, 32, 4))[0]           # 16 units: 64 accumulators
    assert (64 // 16) * (32 // 8) * 4 == MAX_ACC


# ----------------------------------------------------------------------------- spec
def test_spec_fields_name_dict_and_record():
    p = dw()
    s = make_direct_spec(p, SM90, mma_config(32, 16, 8, 4))
    spany, spanx = phase_spans(p)
    assert (spany, spanx) == (2, 4)
    assert s.mma and s.block_threads == 128 and s.ksteps == 2            # 16 + 4 columns: 2 k-steps
    assert s.plane_rows == 8 + 2 and s.plane_width == 32 + 16 and s.plane_pitch == 56
    assert (s.plane_pitch // 8) % 2 == 1
    assert s.lds_bytes == 3 * 16 * 52 * 4 + 16 * 10 * 56 * 2 + 16 * 32 * 24 * 2     # band (48 + 4 pad), dY planes, output planes
    assert not s.out_in_plane                    # 32 columns x 24 > 10 rows x 56: output planes after the dY planes
    s2 = make_direct_spec(p, SM90, mma_config(16, 16, 16, 4))
    assert s2.out_in_plane and s2.lds_bytes == 3 * 16 * 52 * 4 + 16 * 18 * 40 * 2       # 16 x 24 <= 18 x 40
    assert s.kernel_name == f"dgrad_direct_mma_sm_90_fp16_t32x16x8_w4_k2_{p.short_tag()}"
    d = json.loads(json.dumps(s.as_dict()))
    assert d["body"] == "mma" and d["mma"] == {"atom": "m16n8k16", "unit": {"rows": 8, "columns": 16},
                                               "channels_per_warp_pass": 1, "warps": 4, "k_steps": 2,
                                               "persistent_blocks": 0,
                                               "plane_rows": 10, "plane_pitch": 56, "dy_order": "NHWC",
                                               "dx_order": "NHWC"}
    assert d["thread_tile"] is None                  # lanes own fragments of units, not a pixel tile
    assert d["threads"] == 128 and d["accumulators_per_thread"] == 2 * 4 and d["schedule"] == "direct"
    src = s.emit()
    assert src.block == (128, 1, 1) and src.shared_bytes == s.lds_bytes and not src.pre_memset
    assert ("DD_KS", 2) in src.defines and ("DD_MIN_BLOCKS", s.min_blocks) in src.defines
    assert "mma.sync.aligned.m16n8k16" in src.text and "// #" not in src.text
    assert Solution.from_record(solution_of(s).to_record()).spec == s             # a worker's round trip
    names = {make_direct_spec(p, SM90, c).kernel_name for c in
             (mma_config(32, 16, 8, 4), mma_config(32, 16, 8, 8), mma_config(16, 16, 8, 4), mma_config(32, 32, 8, 4),
              mma_config(32, 16, 16, 4))}
    assert len(names) == 5


def test_min_blocks_is_what_shared_memory_and_registers_allow():
    for tile in MMA_TILES:
        s = make_direct_spec(dw(C=96, Hi=56, Wi=56, Y=7, X=7, pH=3, pW=3), SM90, mma_config(*tile))
        fit = SM90.lds_bytes // (s.lds_bytes + 1024)
        assert s.min_blocks == max(1, min(fit, 65536 // (128 * s.block_threads)))
        assert s.min_blocks * s.block_threads * 128 <= 65536 or s.min_blocks == 1


def test_search_reaches_the_mma_body_only_where_it_applies():
    def bodies(p, t):
        return {c.vector_size_a for c in direct_search_space(p, t)}
    assert MMA_BODY in bodies(dw(), SM90) and MMA_BODY in bodies(dw(dtype="bf16"), SM80)
    assert MMA_BODY in bodies(dw(), get_target("gfx90a")) and MMA_BODY in bodies(dw(dtype="bf16"), get_target("gfx942"))
    for p, t in ((dw(dtype="fp32"), get_target("gfx942")), (dw(dtype="fp32"), SM90), (dw(C=12), SM90),
                 (dw(C=32, K=32, G=16), SM90)):
        assert MMA_BODY not in bodies(p, t)


def test_cpu_engine_runs_an_mma_config_against_the_reference():
    """Where no GPU exists the CPU engine runs the same phases and taps for an mma spec."""
    p = dw(dtype="bf16")
    s = make_direct_spec(p, SM90, mma_config(16, 16, 8, 4))
    rng = np.random.default_rng(3)
    dy, w = fresh_inputs(p, rng)
    out = run_direct_cpu(s, dy, w)
    assert rms_range(dgrad_reference(p, dy, w), out) < default_tolerance("bf16", implicit_gemm=False)


# ----------------------------------------------------------------------------- the kernel
def fresh_inputs(p: ConvProblem, rng):
    st = layouts.storage_dtype(p.dtype)
    dy = rng.standard_normal((p.N, p.Ho, p.Wo, p.K)).astype(np.float32).astype(st)
    w = rng.standard_normal((p.K, p.Y, p.X, 1)).astype(np.float32).astype(st)
    return dy, w


def emulated_matches_reference(s, seed: int, vendor: str, tmp_path):
    """Run spec ``s`` on the kernel emulator (``vendor`` flavour) with fresh inputs in the
    problem's own layouts into a NaN-poisoned dX: every element written, within MIOpen's
    tolerance of the float64 reference."""
    p = s.problem
    st = layouts.storage_dtype(p.dtype)
    rng = np.random.default_rng(seed)
    dy = rng.standard_normal(layouts.dy_shape(p)).astype(np.float32).astype(st)
    w = rng.standard_normal(layouts.w_shape(p)).astype(np.float32).astype(st)
    out = kernel_emu.run_direct(s, dy, w, tmp_path, vendor=vendor).reshape(layouts.dx_shape(p))
    tag = (p.short_tag(), p.in_layout, p.out_layout, s.config.serialize())
    assert np.isfinite(out.astype(np.float32)).all(), ("a dX element was not written", *tag)
    assert rms_range(dgrad_reference(p, dy, w), out) < default_tolerance(p.dtype, implicit_gemm=False), tag


def random_mma_problem(R: random.Random) -> ConvProblem | None:
    Y, X = R.randint(1, 7), R.randint(1, 7)
    C = 8 * R.randint(1, 3)
    try:
        p = ConvProblem(N=R.randint(1, 2), C=C, K=C, G=C, Hi=R.randint(1, 20), Wi=R.randint(1, 40), Y=Y, X=X,
                        pH=R.randint(0, Y), pW=R.randint(0, X), sH=R.randint(1, 4), sW=R.randint(1, 4),
                        dH=R.randint(1, 3), dW=R.randint(1, 3), dtype=R.choice(["fp16", "bf16"]), **NHWC)
    except ValueError:            # the filter does not fit the padded input
        return None
    return p if mma_reason(p, SM90) is None else None


SMALL_TILES = ((16, 8, 8, 1), (16, 16, 8, 4), (32, 8, 16, 2), (16, 16, 16, 3), (48, 8, 8, 8), (32, 24, 8, 5))

FIXED = [      # 7x7 s1 (two k-steps), 5x5 s2 (phases), dilation 3 (three k-steps), a partial last channel block
    dw(C=16, Hi=13, Wi=35, Y=7, X=7, pH=3, pW=3),
    dw(C=8, Hi=12, Wi=23, Y=5, X=5, pH=2, pW=2, sH=2, sW=2, dtype="bf16"),
    dw(C=8, Hi=11, Wi=40, Y=3, X=7, pH=3, pW=9, dH=3, dW=3),
    dw(C=24, Hi=9, Wi=17, Y=3, X=3, pH=1, pW=1),
]


def few_cus(n: int):
    """SM90 as a device of ``n`` multiprocessors: persistent blocks walk many tiles."""
    return SM90.with_(num_cus=n)


@pytest.mark.skipif(not kernel_emu.available(), reason="clang++ not on PATH")
@pytest.mark.parametrize("persistent", [False, True], ids=["one_tile", "persistent"])
@pytest.mark.parametrize("case", range(len(FIXED) + 8))
def test_emulated_mma_body_matches_float64_reference(case, persistent, tmp_path):
    """Fixed and random depthwise problems (strides 1-4, dilations 1-3, pads, images smaller
    and larger than a tile), random tiles, dX NaN-poisoned (every element must be written);
    on persistent blocks sized for a device of 1-3 multiprocessors (each walks several
    tiles, across W phases where strided)."""
    R = random.Random(700 + case)
    if case < len(FIXED):
        p = FIXED[case]
        tile = (16, 16, 8, 4) if case != 3 else (32, 16, 8, 3)
    else:
        p = None
        while p is None:
            p = random_mma_problem(R)
        tile = R.choice(SMALL_TILES)
    s = make_direct_spec(p, few_cus(R.randint(1, 3)) if persistent else SM90, mma_config(*tile, persistent=persistent))
    assert s.mma and (s.pblocks > 0) == persistent
    dy, w = fresh_inputs(p, np.random.default_rng(case))
    out = kernel_emu.run_direct(s, dy, w, tmp_path, vendor="nvidia")
    assert np.isfinite(out.astype(np.float32)).all(), ("a dX element was not written", p.short_tag(), tile)
    ref = dgrad_reference(p, dy, w)
    assert rms_range(ref, out) < default_tolerance(p.dtype, implicit_gemm=False), (p.short_tag(), tile)


@pytest.mark.skipif(not kernel_emu.available(), reason="clang++ not on PATH")
def test_a_wrong_band_fails(tmp_path):
    """The check can fail: the kernel with A's band shifted by one column is far off."""
    p = FIXED[0]
    s = make_direct_spec(p, SM90, mma_config(16, 16, 8, 4))
    src = s.emit()
    bad = src.text.replace("const int e = 16 + (rw", "const int e = 17 + (rw")
    assert bad != src.text

    class Bent:                      # run_direct reads the problem and the emitted source
        problem = p

        def emit(self):
            return dataclasses.replace(src, text=bad)
    dy, w = fresh_inputs(p, np.random.default_rng(1))
    out = kernel_emu.run_direct(Bent(), dy, w, tmp_path, vendor="nvidia")
    assert rms_range(dgrad_reference(p, dy, w), out) > 0.1


def runs(s) -> list:
    """The (channel block, W phase) of each dX tile every persistent block of ``s`` takes, in
    its order: the kernel's runs, computed here from the tiles' order (channel block, W phase,
    H phase, image, tile)."""
    per_cb = s.problem.N * s.tiles_h * s.tiles_w * s.nph_h * s.nph_w
    units = per_cb * s.cblocks
    per_w = per_cb // s.nph_w
    return [[(u // per_cb, u % per_cb // per_w) for u in range(b * units // s.pblocks, (b + 1) * units // s.pblocks)]
            for b in range(s.pblocks)]


def test_persistent_blocks_are_the_resident_blocks_each_with_an_even_run():
    p = dw(N=64, C=96, Hi=56, Wi=56, Y=7, X=7, pH=3, pW=3)
    one, walk = (make_direct_spec(p, SM90, mma_config(64, 16, 16, 8, persistent=x)) for x in (False, True))
    assert (one.pblocks, one.config.vector_size_a) == (0, MMA_BODY) and walk.config.vector_size_a == MMA_PERSISTENT_BODY
    assert walk.pblocks == walk.min_blocks * SM90.num_cus == 2 * 132
    assert walk.grid == (264, 1, 1) and one.grid == (64 * 4 * 1 * 6, 1, 1)
    assert ("DD_PBLOCKS", 264) in walk.defines() and ("DD_PBLOCKS", 0) in one.defines()
    assert ("DD_BP", walk.ws_pitch + 4) in walk.defines() and walk.ws_bytes == 7 * 16 * (48 + 4) * 4
    assert "_pb264_" in walk.kernel_name and "_pb" not in one.kernel_name
    assert walk.as_dict()["body"] == "mma-persistent" and one.as_dict()["body"] == "mma"
    assert walk.as_dict()["mma"]["persistent_blocks"] == 264
    assert Solution.from_record(json.loads(json.dumps(solution_of(walk).to_record()))).spec == walk
    for q, cfg in ((p, (64, 16, 16, 8)), (dw(N=2, C=4096, Hi=8, Wi=16), (16, 8, 8, 4)),     # 512 channel blocks
                   (dw(N=1, C=8, Hi=8, Wi=16, Y=3, X=3, pH=1, pW=1), (16, 8, 8, 4)),         # one tile
                   (FIXED[1], (16, 8, 8, 4))):                                               # stride 2: 4 phases
        s = make_direct_spec(q, SM90, mma_config(*cfg, persistent=True))
        tiles = [u for run in runs(s) for u in run]
        lengths = {len(run) for run in runs(s)}
        # every tile once, every block busy, runs within one tile of each other
        assert len(tiles) == q.N * s.tiles_h * s.tiles_w * s.nph_h * s.nph_w * s.cblocks
        assert s.pblocks == min(len(tiles), s.min_blocks * 132) and min(lengths) >= 1 and max(lengths) - min(lengths) <= 1


@pytest.mark.skipif(not kernel_emu.available(), reason="clang++ not on PATH")
def test_a_persistent_block_that_keeps_its_band_across_w_phases_fails(tmp_path):
    """The check can fail: persistent blocks that build the band table only once are wrong
    where a block's run of tiles enters another W phase (stride 2: each has its own taps)."""
    p = FIXED[1].replace(N=1, sH=1, sW=3)      # 3 W phases of 2 tiles, 4 blocks: runs of 1-2 tiles
    s = make_direct_spec(p, few_cus(1), mma_config(16, 8, 8, 4, persistent=True))
    assert any(len({rw for _, rw in run}) > 1 for run in runs(s))
    src = s.emit()
    bad = src.text.replace("if (cb * DD_NPH_W + rw != band_key) {", "if (band_key < 0) {")
    assert bad != src.text

    class Bent:
        problem = p

        def emit(self):
            return dataclasses.replace(src, text=bad)
    dy, w = fresh_inputs(p, np.random.default_rng(2))
    assert rms_range(dgrad_reference(p, dy, w), kernel_emu.run_direct(s, dy, w, tmp_path, vendor="nvidia")) \
        < default_tolerance(p.dtype, implicit_gemm=False)
    assert rms_range(dgrad_reference(p, dy, w), kernel_emu.run_direct(Bent(), dy, w, tmp_path, vendor="nvidia")) > 0.1


LAYERS = [    # the zoo's large-filter depthwise layers (ConvNeXt 7x7, EfficientNet 5x5 s1 and s2)
    dict(N=64, C=96, Hi=56, Wi=56, Y=7, X=7, pH=3, pW=3),
    dict(N=64, C=240, Hi=28, Wi=28, Y=5, X=5, pH=2, pW=2),
    dict(N=64, C=144, Hi=56, Wi=56, Y=5, X=5, pH=2, pW=2, sH=2, sW=2),
]


@pytest.mark.skipif(not offline.shutil.which("nvcc"), reason="nvcc not on PATH")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_nvcc_builds_every_searched_tile_without_spills(arch, dtype, tmp_path):
    t = get_target(arch)
    built = 0
    for kw in LAYERS:
        p = dw(**kw, dtype=dtype)
        for tile in MMA_TILES:
            ok, why = is_valid_direct_config(p, t, mma_config(*tile))
            if not ok:
                assert "shared memory" in why and arch == "sm_80", why
                continue
            for persistent in (False, True) if dtype == "fp16" else (False,):    # the walk: one dtype
                spec = make_direct_spec(p, t, mma_config(*tile, persistent=persistent))
                b = offline.inspect_nvidia(spec.emit().text, arch, tmp_path, "k")
                assert 0 < b.registers <= 255 and b.spill_store_bytes == 0 and b.spill_load_bytes == 0 \
                    and b.stack_bytes == 0, (kw, tile, persistent, b.registers)
                assert b.count("mma.sync.aligned.m16n8k16") > 0 and b.count("ldmatrix") > 0
                built += 1
    assert built >= (3 * len(MMA_TILES) - 3) * (2 if dtype == "fp16" else 1)


# ----------------------------------------------------------------------------- DIRECT_NCHW
from miopen_solver.config import KernelSchedule  # noqa: E402
from miopen_solver.solver import DgradSolver  # noqa: E402

LAYOUT_CASES = [("NCHW", "NCHW", "NCHW"), ("NHWC", "NCHW", "NCHW"), ("NCHW", "NHWC", "NHWC"), ("NCHW", "NHWC", "NCHW"),
                ("NHWC", "NCHW", "NHWC")]
"""(dX, dY, W) layouts DIRECT_NCHW serves: at least one of dY and dX NCHW, W in either."""


def native(tile=(16, 16, 8, 4), persistent=False):
    return mma_config(*tile, persistent=persistent).replace(schedule=KernelSchedule.DIRECT_NCHW)


def laid(p: ConvProblem, lay) -> ConvProblem:
    return p.replace(in_layout=lay[0], out_layout=lay[1], fil_layout=lay[2])


def test_direct_nchw_serves_a_tensor_in_nchw_only():
    p = dw()
    assert "both are NHWC" in mma_reason(p, SM90, native=True)
    assert mma_reason(laid(p, ("NCHW", "NCHW", "NCHW")), SM90, native=True) is None
    assert mma_reason(laid(p, ("NCHW", "NCHW", "NCHW")), get_target("gfx942"), native=True) is None
    assert "fp32" in mma_reason(laid(p.replace(dtype="fp32"), ("NCHW",) * 3), get_target("gfx942"), native=True)
    with pytest.raises(PerfConfigError, match="both are NHWC"):
        make_direct_spec(p, SM90, native())
    with pytest.raises(PerfConfigError, match="vector_size_a must be 2"):
        make_direct_spec(laid(p, ("NCHW", "NCHW", "NCHW")), SM90, native().replace(vector_size_a=1))


@pytest.mark.parametrize("lay", LAYOUT_CASES)
def test_direct_nchw_solution_has_no_transform_and_names_its_layouts(lay):
    p = laid(dw(C=32, Hi=20, Wi=24, Y=7, X=7, pH=3, pW=3), lay)
    solver = DgradSolver()
    cfgs = [c for c in solver.search(p, SM90) if c.schedule is KernelSchedule.DIRECT_NCHW]
    assert len(cfgs) == 2 * len(MMA_TILES) and [c.vector_size_a for c in cfgs] == \
        [MMA_BODY] * len(MMA_TILES) + [MMA_PERSISTENT_BODY] * len(MMA_TILES)
    sol = solver.get_solution(p, SM90, cfgs[0])
    dy_order, dx_order = ("NCHW" if lay[1] == "NCHW" else "NHWC"), ("NCHW" if lay[0] == "NCHW" else "NHWC")
    assert f"_dy{dy_order}_dx{dx_order}_" in sol.kernel_name and "+transpose" not in sol.kernel_name
    assert sol.workspace_bytes == 0 and sol.transforms == ()
    assert any(n.startswith(f"Layout: dY read as {dy_order} and dX written as {dx_order} in place") for n in sol.notes)
    assert solver.get_workspace_size(p, SM90, cfgs[0]) == 0
    assert Solution.from_record(json.loads(json.dumps(sol.to_record()))).spec == sol.spec
    d = sol.spec.as_dict()
    assert d["schedule"] == "direct-nchw" and d["mma"]["dy_order"] == dy_order and d["mma"]["dx_order"] == dx_order
    nhwc = [c for c in solver.search(laid(p, ("NHWC",) * 3), SM90) if c.schedule is KernelSchedule.DIRECT_NCHW]
    assert nhwc == []


@pytest.mark.parametrize("lay", LAYOUT_CASES)
def test_cpu_engine_runs_direct_nchw_in_every_layout(lay):
    from miopen_solver.runtime.cpu import CpuEngine
    from miopen_solver.reference import verify
    p = laid(dw(C=16, Hi=11, Wi=13, Y=5, X=5, pH=2, pW=2, sH=2, sW=2, dtype="bf16"), lay)
    cpu = get_target("cpu")
    sol = DgradSolver().get_solution(p, cpu, native())
    rng = np.random.default_rng(5)
    st = layouts.storage_dtype(p.dtype)
    dy = rng.uniform(-1, 1, layouts.dy_shape(p)).astype(np.float32).astype(st)
    w = rng.uniform(-1, 1, layouts.w_shape(p)).astype(np.float32).astype(st)
    v = verify(p, CpuEngine(cpu).run(sol, dy, w), dgrad_reference(p, dy, w))
    assert v.ok and v.nonfinite == 0, v


@pytest.mark.skipif(not kernel_emu.available(), reason="clang++ not on PATH")
@pytest.mark.parametrize("case", range(len(LAYOUT_CASES) + 6))
def test_emulated_direct_nchw_matches_float64_reference(case, tmp_path):
    """The mma body reading dY and writing dX in their own layouts (each case of
    LAYOUT_CASES on a fixed 7x7 problem, then random problems and tiles, half of them on
    persistent blocks of a 1-3 multiprocessor device), dX NaN-poisoned."""
    R = random.Random(800 + case)
    if case < len(LAYOUT_CASES):
        p, tile, persistent = laid(FIXED[0], LAYOUT_CASES[case]), (16, 16, 8, 4), False
    else:
        p = None
        while p is None or mma_reason(laid(p, ("NCHW",) * 3), SM90, native=True) is not None:
            p = random_mma_problem(R)
        p, tile, persistent = laid(p, R.choice(LAYOUT_CASES)), R.choice(SMALL_TILES), R.random() < 0.5
    s = make_direct_spec(p, few_cus(R.randint(1, 3)) if persistent else SM90, native(tile, persistent))
    emulated_matches_reference(s, case, "nvidia", tmp_path)


@pytest.mark.skipif(not offline.shutil.which("nvcc"), reason="nvcc not on PATH")
@pytest.mark.parametrize("lay", LAYOUT_CASES[:3])
def test_nvcc_builds_direct_nchw_without_spills(lay, tmp_path):
    for kw in LAYERS:
        p = laid(dw(**kw), lay)
        for tile in ((32, 16, 16, 4), (64, 16, 16, 8), (32, 32, 8, 8)):
            b = offline.inspect_nvidia(make_direct_spec(p, SM90, native(tile)).emit().text, "sm_90", tmp_path, "k")
            assert 0 < b.registers <= 255 and b.spill_store_bytes == 0 and b.stack_bytes == 0, (kw, tile)


# ----------------------------------------------------------------------------- AMD (v_mfma_f32_16x16x16)
from miopen_solver.direct import AMD_MMA_TILES, unit_rows  # noqa: E402

GFX942, GFX90A = get_target("gfx942"), get_target("gfx90a")


def test_amd_units_are_16_rows_in_waves_of_64():
    assert unit_rows(GFX942) == unit_rows(GFX90A) == 16 and unit_rows(SM90) == 8
    s = make_direct_spec(dw(), GFX942, mma_config(32, 16, 16, 4, rows=16))
    assert s.block_threads == 256 and s.tph == 16 and s.as_dict()["mma"]["atom"] == "mfma16x16x16"
    assert ("DD_RB", 1) in s.defines() and "__builtin_amdgcn_mfma_f32_16x16x16f16" in s.emit().text
    ok, why = is_valid_direct_config(dw(), GFX942, mma_config(32, 16, 8, 4))
    assert not ok and why == "warp_tile_n must be 16 for the direct schedule's mma body on gfx942, got 8"
    ok, why = is_valid_direct_config(dw(), GFX942, mma_config(32, 16, 8, 4, rows=16))
    assert not ok and "tile_k=8 must be a positive multiple of 16" in why
    assert is_valid_direct_config(dw(C=16), GFX942, mma_config(32, 16, 16, 16, rows=16))[0]     # 1024 threads


@pytest.mark.skipif(not kernel_emu.available(), reason="clang++ not on PATH")
@pytest.mark.parametrize("case", range(len(FIXED) + 6))
def test_emulated_amd_mma_body_matches_float64_reference(case, tmp_path):
    """The AMD flavour (MFMA emulated from its operand layouts) on the fixed problems, then
    random problems, tiles and layouts (NHWC on schedule 4, own layouts on schedule 14)."""
    R = random.Random(900 + case)
    if case < len(FIXED):
        p, tile, nat = FIXED[case], (16, 16, 16, 2), False
    else:
        p = None
        while p is None:
            p = random_mma_problem(R)
        nat = R.random() < 0.5
        p = laid(p, R.choice(LAYOUT_CASES)) if nat else p
    sched = KernelSchedule.DIRECT_NCHW if nat else KernelSchedule.DIRECT
    if case >= len(FIXED):
        tile = R.choice([t for t in AMD_MMA_TILES
                         if is_valid_direct_config(p, GFX942, mma_config(*t, rows=16).replace(schedule=sched))[0]])
    persistent = case % 2 == 1          # persistent blocks of a 2-CU device: each walks several tiles
    t = GFX942.with_(num_cus=2) if persistent else GFX942
    s = make_direct_spec(p, t, mma_config(*tile, rows=16, persistent=persistent).replace(schedule=sched))
    emulated_matches_reference(s, case, "amd", tmp_path)


@pytest.mark.skipif(offline.find_amd_clang() is None, reason="no clang with AMDGPU targets")
@pytest.mark.parametrize("arch", ["gfx90a", "gfx942"])
def test_clang_builds_amd_mma_tiles_without_scratch(arch, tmp_path):
    t = get_target(arch)
    built = 0
    for kw in LAYERS:
        for lay, sched in (("NHWC", KernelSchedule.DIRECT), ("NCHW", KernelSchedule.DIRECT_NCHW)):
            for dtype in ("fp16", "bf16"):
                p = laid(dw(**kw, dtype=dtype), (lay,) * 3)
                for tile in AMD_MMA_TILES:
                    # persistent blocks: fp16 only (the walk does not depend on the type)
                    for persistent in (False, True) if dtype == "fp16" else (False,):
                        cfg = mma_config(*tile, rows=16, persistent=persistent).replace(schedule=sched)
                        ok, why = is_valid_direct_config(p, t, cfg)
                        if not ok:
                            assert "shared memory" in why, why
                            continue
                        co = offline.compile_amd(make_direct_spec(p, t, cfg).emit().text, arch, tmp_path)
                        assert co.data and co.resources.get("ScratchSize [bytes/lane]", 0) == 0, \
                            (kw, tile, persistent, co.resources)
                        built += 1
    assert built >= 3 * 2 * 3 * 4
