"""Schedule 20 (``wgmma-tma-pingpong``): two consumer warpgroups owning whole tiles in turn on
the TMA producer's stages. Its rules and their messages, the spec it resolves (threads,
block, shared memory, name), the emitted text (turn barriers only in its own kernels), the
search, nvcc builds, and the real kernel on the emulator against the float64 reference --
including edits of its turn logic that must fail.

Expected values are worked out by hand in the comments.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kernel_emu
from miopen_solver.command import parse
from miopen_solver.config import KernelSchedule, PerfConfig
from miopen_solver.errors import PerfConfigError
from miopen_solver.heuristics import search_space
from miopen_solver.spec import is_valid_performance_config, launch_spec, make_spec
from miopen_solver.target import get_target

PP = KernelSchedule.WGMMA_TMA_PINGPONG
SM90 = get_target("sm_90")
NHWC = "-F 2 --in_layout NHWC --out_layout NHWC --fil_layout NHWC"


def _problem(args: str, base: str = "convfp16", layout: str = NHWC):
    return parse(f"{base} {args} {layout}".split()).problem


P1X1 = _problem("-n 32 -c 256 -H 14 -W 14 -k 1024 -y 1 -x 1")


def test_the_schedule_is_a_warpgroup_tma_persistent_schedule():
    assert int(PP) == 20 and PP.slug == "wgmma-tma-pingpong"
    assert PP.warpgroup and PP.tma and PP.persistent and PP.pingpong
    # the patch and sub-pixel GEMMs' forms on it (schedules 21 and 22) are the only others
    assert {s for s in KernelSchedule if s.pingpong} == {PP, KernelSchedule.PATCH_GEMM_PINGPONG,
                                                         KernelSchedule.SUBPIXEL_PINGPONG}


def test_the_spec_has_two_consumer_warpgroups_and_two_turn_barriers():
    spec = make_spec(P1X1, SM90, PerfConfig.parse("128,128,64,1,1,128,128,0,0,0,1,-1,6,20"))
    # two warpgroups of 128 threads multiply, a producer warpgroup beside them (setmaxnreg
    # moves registers between whole warpgroups)
    assert spec.threads == 256 and spec.block == (384, 1, 1)
    # 6 stages x (A 128x64 + B 64x128) x 2 bytes = 196608, + 16 bytes of barriers per stage
    # (96), + the two turn barriers (16), + 1024 bytes of alignment slack
    assert spec.lds_bytes == 196608 + 96 + 16 + 1024
    # GemmM 32*14*14 = 6272 rows / 128 = 49 row tiles x 256/128 = 2 column tiles = 98 tiles;
    # one block fits per SM (197 KB), so 98 blocks (fewer tiles than 132 SMs)
    assert spec.tiles_per_group == 98 and spec.grid == (98, 1, 1)
    assert "_pw_tmapp98_" in spec.kernel_name and spec.split_k == 1


BAD = [
    # (config, words the one-line reason holds)
    ("128,128,64,2,1,64,128,0,0,0,1,-1,4,20", ["schedule 20 (wgmma-tma-pingpong)", "warp_m and warp_n must be 1",
                                               "2x1"]),
    ("128,128,64,1,1,64,128,0,0,0,1,-1,4,20", ["schedule 20", "tile_m must equal warp_tile_m", "128 and 64"]),
    ("128,128,64,1,1,128,128,0,0,0,2,-1,4,20", ["schedule 20", "split_k must be 1 or -1", "got 2"]),
    ("128,128,64,1,1,128,128,0,0,0,1,-1,4,20,3", ["stream-K", "schedule 3 (wgmma-tma) only"]),
    ("128,128,64,1,1,128,128,0,0,0,1,-1,1,20", ["schedule 20", "stages must be >= 2"]),
    ("128,128,32,1,1,128,128,0,0,0,1,-1,4,20", ["schedule 20", "tile_k must be 64, got 32"]),
    ("128,128,128,1,1,128,128,0,0,0,1,-1,3,20", ["schedule 20", "tile_k must be 64, got 128"]),
    ("192,64,64,1,1,192,64,0,0,0,1,-1,4,20", ["schedule 20", "tile_m must be 64 or 128", "got 192"]),
    ("256,64,64,1,1,256,64,0,0,0,1,-1,4,20", ["schedule 20", "tile_m must be 64 or 128", "got 256"]),
    ("128,128,64,1,1,128,128,0,0,0,1,-1,9,20", ["schedule 20", "stages must be <= 8"]),
    # 128x256 on one warpgroup: 256 accumulators a thread, past the target bound of 128
    ("128,256,64,1,1,128,256,0,0,0,1,-1,3,20", ["256 accumulators per lane", "safe bound 128",
                                                "warp_tile_m x warp_tile_n = 128x256", "smaller warp tile"]),
]


@pytest.mark.parametrize("cfg,words", BAD, ids=[b[0] for b in BAD])
def test_bad_configs_are_refused_naming_the_rule(cfg, words):
    with pytest.raises(PerfConfigError) as e:
        make_spec(P1X1, SM90, PerfConfig.parse(cfg))
    msg = str(e.value)
    assert "\n" not in msg and all(w in msg for w in words), msg


def test_targets_and_problems_it_does_not_serve_are_named():
    cfg = PerfConfig.parse("128,128,64,1,1,128,128,0,0,0,1,-1,4,20")
    with pytest.raises(PerfConfigError, match=r"schedule 20 \(wgmma-tma-pingpong\) needs warpgroup MMA"):
        make_spec(P1X1, get_target("gfx942"), cfg)
    grouped = _problem("-n 2 -c 256 -H 8 -W 8 -k 96 -y 1 -x 1 -g 2")     # kpg 48: boxes would cross groups
    with pytest.raises(PerfConfigError, match=r"schedule 20 \(wgmma-tma-pingpong\) with G > 1 needs kpg"):
        make_spec(grouped, SM90, cfg)


def test_turn_barriers_are_only_in_its_own_kernels():
    pp = make_spec(P1X1, SM90, PerfConfig.parse("128,128,64,1,1,128,128,0,0,0,1,-1,6,20")).emit().text
    tma = make_spec(P1X1, SM90, PerfConfig.parse("128,128,64,1,1,128,128,0,0,0,1,-1,6,3")).emit().text
    assert "turn0" in pp and "dg_mbar_init(empty0 + 8 * st, 4)" in pp
    assert "turn0" not in tma and "DG_THREADS / 32" in tma and "#section" not in pp + tma


def test_the_search_offers_every_one_warpgroup_tma_tile_in_turn():
    pp = [c for c in search_space(P1X1, SM90) if c.schedule is PP]
    assert all(c.warp_m == c.warp_n == 1 and c.tile_m == c.warp_tile_m and c.split_k == 1 for c in pp)
    assert {c.stages for c in pp} == set(range(3, 9))
    built = {(c.tile_m, c.tile_n, c.stages) for c in pp if is_valid_performance_config(P1X1, SM90, c)[0]}
    assert {(64, 64), (64, 128), (128, 128), (64, 256), (128, 64), (64, 96), (128, 96), (64, 160), (64, 192),
            (64, 224)} == {(m, n) for m, n, _ in built}
    # the deepest pipelines shared memory holds: 64x64 and 64x128 at 8 stages (16 and 24 KB
    # a stage), 128x64 at 8; 128x128 at 7 (7 x 32768 + 7 x 16 + 16 + 1024 = 230528 of sm_90's
    # 232448 bytes), 64x256 at 5 (6 x 40960 = 245760 is over)
    assert {(64, 64, 8), (64, 128, 8), (128, 64, 8), (128, 128, 7), (64, 256, 5)} <= built
    assert (128, 128, 8) not in built and (64, 256, 6) not in built


# ------------------------------------------------------------------ nvcc builds
BUILDS = [
    ("-n 64 -c 256 -H 14 -W 14 -k 1024 -y 1 -x 1", "128,128,64,1,1,128,128,0,0,0,1,-1,6,20"),
    ("-n 64 -c 256 -H 14 -W 14 -k 1024 -y 1 -x 1", "64,256,64,1,1,64,256,0,0,0,1,-1,5,20"),
    ("-n 64 -c 256 -H 14 -W 14 -k 256 -y 3 -x 3 -p 1 -q 1", "64,128,64,1,1,64,128,0,0,0,1,-1,8,20"),
    ("-n 32 -c 128 -H 28 -W 28 -k 256 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2", "128,64,64,1,1,128,64,0,0,0,1,-1,8,20"),
    # dX NCHW stored element by element from the accumulators (the nchw_dx epilogue)
    ("-n 32 -c 256 -H 14 -W 14 -k 256 -y 3 -x 3 -p 1 -q 1", "128,128,64,1,1,128,128,0,0,0,1,-1,7,20", "NCHW"),
]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc on this machine")
@pytest.mark.parametrize("args,cfg,dx", [b if len(b) == 3 else (*b, "NHWC") for b in BUILDS])
def test_kernels_build_with_tensor_copies_and_no_accumulator_spills(tmp_path, args, cfg, dx):
    """ptxas: no local memory and within a 384-thread block's 168 registers at launch, the
    register reallocation (40 for the producer warpgroup, 232 for each consumer warpgroup),
    the tile's wgmma per k16 step, tensor copies and mbarrier waits, no per-thread copies."""
    from miopen_solver.kernels.offline import inspect_nvidia
    from miopen_solver.spec import register_cap
    spec = make_spec(_problem(args, layout=f"{NHWC} --in_layout {dx}"), SM90, PerfConfig.parse(cfg))
    assert spec.nchw_dx is (dx == "NCHW")
    b = inspect_nvidia(spec.emit().text, "sm_90", tmp_path, "k")
    assert b.registers <= register_cap(SM90, 384) == 168, (spec.kernel_name, b.registers)
    assert b.spill_store_bytes == 0 and b.spill_load_bytes == 0, (spec.kernel_name, b.registers)
    assert "setmaxnreg.dec.sync.aligned.u32 40;" in b.ptx and "setmaxnreg.inc.sync.aligned.u32 232;" in b.ptx
    assert b.count(f"wgmma.mma_async.sync.aligned.m64n{spec.config.warp_tile_n}k16") >= spec.mma_m * 4
    assert b.count("cp.async.bulk.tensor") >= 2 and b.count("mbarrier.try_wait.parity") >= 3
    assert b.count("cp.async.cg") + b.count("cp.async.ca") == 0


# ------------------------------------------------------------------ the emulated kernel
EMU_CASES = [
    # (line args, config, SMs): one block walks 16 pointwise tiles (8 turns each warpgroup);
    # 4 strided sub-GEMMs of different k-loops (2 stages wrap across them) and zero-fill
    # blocks on one SM; an odd tile count over 2 blocks (one warpgroup has a turn fewer); an
    # NCHW dX stored by the epilogue, bf16, K tail
    ("-n 2 -c 128 -H 16 -W 16 -k 128 -y 1 -x 1", "64,64,64,1,1,64,64,0,0,0,1,-1,3,20", 1, "convfp16", NHWC),
    ("-n 2 -c 128 -H 9 -W 14 -k 192 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2", "64,128,64,1,1,64,128,0,0,0,1,-1,2,20", 1,
     "convbfp16", NHWC),
    ("-n 3 -c 64 -H 7 -W 9 -k 64 -y 3 -x 3 -p 1 -q 1", "64,64,64,1,1,64,64,0,0,0,1,-1,5,20", 2, "convfp16", NHWC),
    ("-n 2 -c 64 -H 6 -W 8 -k 200 -y 3 -x 3 -p 1 -q 1", "128,64,64,1,1,128,64,0,0,0,1,-1,4,20", 1, "convbfp16",
     "-F 2"),
    # the 96-column warpgroup tile (32-wide W boxes in the 64-byte swizzle, m64n96k16)
    ("-n 2 -c 192 -H 8 -W 8 -k 128 -y 1 -x 1", "128,96,64,1,1,128,96,0,0,0,1,-1,4,20", 1, "convfp16", NHWC),
]


def _emulate(case, mangle=None):
    from test_gemm_emu import run_emulated
    args, cfg, sms, base, layout = case
    p = _problem(args, base, layout)
    return run_emulated(p, "sm_90", Path(tempfile.mkdtemp()), perf_config=cfg, mangle=mangle,
                        target=get_target("sm_90").with_(num_cus=sms))


@pytest.mark.skipif(not kernel_emu.available(), reason="clang++ not on PATH")
@pytest.mark.parametrize("case", EMU_CASES, ids=[c[1] for c in EMU_CASES])
def test_the_emulated_kernel_matches_the_reference(case):
    """NaN-poisoned dX against float64, each block handing several tiles to its two
    warpgroups in turn (mbarrier phases and transaction bytes emulated)."""
    sol, v = _emulate(case)
    s = sol.spec
    assert s.schedule is PP and s.tiles_per_group >= 2 * s.tile_blocks - 1, (s.tiles_per_group, s.tile_blocks)
    # an NCHW dX is stored by the epilogue itself: no dX transform after the kernel
    assert s.nchw_dx is (case[4] == "-F 2") and ("dX" in [t.tensor for t in sol.transforms]) is False
    assert v.ok and v.nonfinite == 0, (sol.kernel_name, v)


FAMILY_EMU = [
    # (line, config, multiprocessors) of the patch and sub-pixel GEMMs on the ping-pong main
    # loop (schedules 21, 22), each block walking several tiles so both warpgroups store.
    # Patch: a ViT-like 16x16/s16 stem (6 column tiles on one block), a grouped bf16 2x2/s2
    # merge with H not a multiple of the stride (memset border, an odd tile count), a 4x4/s4
    # patch with a K tail over 2 blocks.
    (f"convfp16 -n 2 -c 3 -H 32 -W 32 -k 64 -y 16 -x 16 -u 16 -v 16 {NHWC}", "64,128,64,1,1,64,128,0,0,0,1,-1,4,21", 1),
    (f"convbfp16 -n 2 -c 16 -H 11 -W 8 -k 128 -y 2 -x 2 -u 2 -v 2 -g 2 {NHWC}",
     "128,64,64,1,1,128,64,0,0,0,1,-1,3,21", 1),
    (f"convfp16 -n 2 -c 16 -H 8 -W 8 -k 200 -y 4 -x 4 -u 4 -v 4 {NHWC}", "64,64,64,1,1,64,64,0,0,0,1,-1,5,21", 2),
    # Sub-pixel (after the emulated W' pack): 3x3/s2 with odd H/W (4 phases of 32 channels),
    # a grouped bf16 5x5/s2 over 2 blocks, stride 3x2 with uncovered rows (memset).
    (f"convfp16 -n 2 -c 32 -H 13 -W 11 -k 64 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 {NHWC}",
     "64,128,64,1,1,64,128,0,0,0,1,-1,4,22", 1),
    (f"convbfp16 -n 2 -c 32 -H 10 -W 10 -k 128 -y 5 -x 5 -p 2 -q 2 -u 2 -v 2 -g 2 {NHWC}",
     "128,64,64,1,1,128,64,0,0,0,1,-1,3,22", 2),
    (f"convfp16 -n 2 -c 16 -H 10 -W 7 -k 64 -y 3 -x 3 -p 1 -u 3 -v 2 {NHWC}", "64,64,64,1,1,64,64,0,0,0,1,-1,5,22", 1),
]


@pytest.mark.skipif(not kernel_emu.available(), reason="clang++ not on PATH")
@pytest.mark.parametrize("line,cfg,sms", FAMILY_EMU, ids=[c[1] for c in FAMILY_EMU])
def test_the_patch_and_subpixel_gemms_on_it_match_the_reference(line, cfg, sms):
    """The virtual-GEMM families' epilogues (patch scatter, phase scatter) under two
    warpgroups taking tiles in turn: NaN-poisoned dX against float64."""
    from test_gemm_emu import run_emulated
    sol, v = run_emulated(parse(line.split()).problem, "sm_90", Path(tempfile.mkdtemp()), perf_config=cfg,
                          target=get_target("sm_90").with_(num_cus=sms))
    s = sol.spec
    assert s.schedule.pingpong and s.schedule is PerfConfig.parse(cfg).schedule, s.schedule
    assert s.tiles_per_group >= 2 * s.tile_blocks - 1, (s.tiles_per_group, s.tile_blocks)
    assert v.ok and v.nonfinite == 0, (sol.kernel_name, v)


MUTANTS = {
    # a warpgroup skips the other's tiles without counting their k-tiles: it waits on the
    # wrong stages and phases
    "k-tiles not counted": ("            it += k_tiles;\n            continue;", "            continue;"),
    # warpgroup 1 waits for its turn on warpgroup 0's turn barrier, which only its own
    # arrivals complete. (Dropping the wait altogether is a race: on the emulator's host
    # threads whether warpgroup 1 then runs phases ahead depends on how the threads are
    # scheduled, and on a busy machine it did not, so that mutant is not a test.)
    "turn wait on the wrong barrier": ("if (warp == 1) dg_mbar_wait(turn0 + 8, round & 1);",
                                       "if (warp == 1) dg_mbar_wait(turn0, round & 1);"),
    # both warpgroups take every tile
    "no turns": ("if ((turn++ & 1) != warp) {", "if (turn++ < 0) {"),
}


@pytest.mark.skipif(not kernel_emu.available(), reason="clang++ not on PATH")
@pytest.mark.parametrize("mutant", sorted(MUTANTS))
def test_mistakes_in_the_turns_fail(mutant, monkeypatch):
    """A kernel that loses count of the stages, lets a warpgroup run out of turn or gives
    both warpgroups every tile does not verify, or stops on a barrier that never completes
    (a wait of 20 s: every correct run here takes well under a second of waiting)."""
    monkeypatch.setenv("DGRAD_EMU_WAIT_S", "20")
    a, b = MUTANTS[mutant]

    def mangle(text):
        assert a in text, a
        return text.replace(a, b)
    try:
        sol, v = _emulate(EMU_CASES[1], mangle)
    except RuntimeError as e:          # the emulator stopped on a wait that never completes
        assert "never completed" in str(e) or "deadlock" in str(e), str(e)[:300]
        return
    assert not v.ok or v.nonfinite, sol.kernel_name


# ------------------------------------------------------------------ the producer warpgroup
@pytest.mark.parametrize("cfg,block,handoff", [
    ("128,256,64,2,1,64,256,0,0,0,1,-1,4,3", 384, True),       # two consumer warpgroups
    ("256,128,64,2,1,128,128,0,0,0,1,-1,4,3", 384, True),
    ("128,128,64,2,1,64,128,0,0,0,2,-1,4,3", 384, True),       # split-K work units
    ("128,128,64,2,1,64,128,0,0,0,1,-1,4,3,3", 384, True),     # stream-K
    ("128,128,64,1,1,128,128,0,0,0,1,-1,4,3", 160, False),     # one consumer warpgroup: a producer warp
    ("256,64,64,4,1,64,64,0,0,0,1,-1,4,3", 544, False),        # four: a producer warp
    ("128,128,64,1,1,128,128,0,0,0,1,-1,6,20", 384, True),     # ping-pong
])
def test_two_consumer_warpgroups_get_a_producer_warpgroup_and_its_registers(cfg, block, handoff):
    """A TMA block whose threads are two warpgroups has a producer warpgroup that keeps 40
    registers a thread and hands the rest to the consumers (232 each): the block, the rule's
    register cap and the emitted ``setmaxnreg`` pair; other TMA blocks keep one producer warp."""
    spec = make_spec(P1X1, SM90, PerfConfig.parse(cfg))
    text = spec.emit().text
    assert spec.block == (block, 1, 1) and spec.producer_warpgroup is handoff
    assert ("setmaxnreg.inc" in text and "setmaxnreg.dec" in text) is handoff
    if handoff:
        assert "DG_PWG_PRODUCER_REGS 40" in text and "DG_PWG_CONSUMER_REGS 232" in text


def test_the_nchw_tma_schedule_takes_the_hand_off_only_without_its_shifting_producer():
    """The NCHW TMA schedule's kernel takes the producer warpgroup where two warpgroups
    multiply and B arrives by tensor copies (1x1); its shifting producer (a warpgroup that
    stores B rows and needs its registers; one consumer warpgroup at most) never does."""
    from miopen_solver.solver import DgradSolver
    solver = DgradSolver()
    pw = solver.find_solution(_problem("-n 32 -c 256 -H 32 -W 32 -k 128 -y 1 -x 1", layout="-F 2"), SM90,
                              perf_config="128,256,64,2,1,64,256,0,0,0,1,-1,4,13")
    assert pw.spec.block == (384, 1, 1) and "setmaxnreg.inc" in pw.kernels[0].source.text
    shift = solver.find_solution(_problem("-n 32 -c 64 -H 56 -W 56 -k 64 -y 3 -x 3 -p 1 -q 1", layout="-F 2"), SM90,
                                 perf_config="64,128,64,1,1,64,128,0,0,0,1,-1,4,13")
    text = shift.kernels[0].source.text
    assert shift.spec.block == (256, 1, 1) and "setmaxnreg" not in text and "dg_nt_shift_smem" in text


# ------------------------------------------------------------- the default's ping-pong form
def test_pingpong_form_runs_a_one_warpgroup_tma_tile_on_two_warpgroups_at_the_deepest_stages():
    from miopen_solver.heuristics import pingpong_form
    # 64x128 tile: a stage is A 64x64 + B 64x128 halves = 8192 + 16384 = 24576 bytes; 8 stages
    # (196608 + barriers) fit the 227 KB of an sm_90 block, so the deepest, 8, is taken. Its
    # one-warpgroup blocks: 4 stages = 98304 + 64 + 1024 = 99392 bytes, 2 on a multiprocessor
    # (233472 // 100416), as many warpgroups as one ping-pong block multiplies with
    one = PerfConfig.parse("64,128,64,1,1,64,128,0,0,0,1,-1,4,3")
    assert make_spec(P1X1, SM90, one).resident_blocks == 2
    assert pingpong_form(P1X1, SM90, one) == one.replace(schedule=PP, stages=8)
    # 128x128: 32768 bytes a stage; 7 stages = 229376 + 7 x 16 (stage barriers) + 16 (turn
    # barriers) + 1024 (alignment) = 230528 <= 232448 (227 KB); 8 stages (262144) do not fit
    two = PerfConfig.parse("128,128,64,1,1,128,128,0,0,0,1,-1,4,3")
    assert pingpong_form(P1X1, SM90, two) == two.replace(schedule=PP, stages=7)
    from miopen_solver.heuristics import cooperative_form     # and back, for settings ping-pong cannot take
    assert cooperative_form(pingpong_form(P1X1, SM90, two)) == two and cooperative_form(two) == two
    assert make_spec(P1X1, SM90, two.replace(schedule=PP, stages=7)).lds_bytes == 230528
    assert not is_valid_performance_config(P1X1, SM90, two.replace(schedule=PP, stages=8))[0]


def test_pingpong_form_keeps_tiles_of_which_more_warpgroups_fit_and_strided_problems():
    from miopen_solver.heuristics import pingpong_form
    # 64x64 at 4 stages: 4 x 16384 + 64 + 1024 = 66624 bytes, 3 blocks (233472 // 67648): three
    # warpgroups multiply on a multiprocessor, the ping-pong block two -- the tile stays
    small = PerfConfig.parse("64,64,64,1,1,64,64,0,0,0,1,-1,4,3")
    assert make_spec(P1X1, SM90, small).resident_blocks == 3
    assert pingpong_form(P1X1, SM90, small) == small
    # at 6 stages two such blocks fit: ping-pong form again (8 stages)
    assert pingpong_form(P1X1, SM90, small.replace(stages=6)) == small.replace(schedule=PP, stages=8)
    # stride 2 (3x3 and 1x1): the tile stays
    for args in ("-n 32 -c 640 -H 32 -W 32 -k 640 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2",
                 "-n 24 -c 512 -H 28 -W 28 -k 1024 -y 1 -x 1 -u 2 -v 2"):
        one = PerfConfig.parse("64,128,64,1,1,64,128,0,0,0,1,-1,4,3")
        assert pingpong_form(_problem(args), SM90, one) == one


@pytest.mark.parametrize("cfg", [
    "128,256,64,2,1,64,256,0,0,0,1,-1,4,3",       # two warpgroups on one tile: cooperative stays
    "64,128,64,1,1,64,128,0,0,0,2,-1,4,3",        # split-K work units: ping-pong has no split
    "64,128,64,1,1,64,128,0,0,0,1,-1,4,3,3",      # stream-K
    "64,128,64,1,1,64,128,0,0,0,1,-1,4,1",        # plain warpgroup schedule
    "64,128,64,1,1,64,128,0,0,0,1,-1,4,10",       # the patch GEMM's TMA schedule
])
def test_pingpong_form_leaves_every_other_config_alone(cfg):
    from miopen_solver.heuristics import pingpong_form
    c = PerfConfig.parse(cfg)
    assert pingpong_form(P1X1, SM90, c) == c


def test_pingpong_form_keeps_a_tile_no_pingpong_depth_serves():
    from miopen_solver.heuristics import pingpong_form
    # fp32 is not served by the ping-pong schedule (fp16/bf16 only): the config comes back as is
    p = _problem("-n 32 -c 256 -H 14 -W 14 -k 1024 -y 1 -x 1", base="conv")
    c = PerfConfig.parse("64,128,64,1,1,64,128,0,0,0,1,-1,4,3")
    assert pingpong_form(p, SM90, c) == c


# Every default of an NVIDIA sm_90 fp16/bf16 problem that would be a one-warpgroup TMA tile of
# two or fewer blocks a multiprocessor on a stride-1 problem is its ping-pong form: random
# channel counts, images, filters, strides and layouts.
@settings(max_examples=60, deadline=None)
@given(c=st.sampled_from([64, 96, 128, 160, 192, 256, 384, 512, 640, 1024, 2048]),
       k=st.sampled_from([64, 128, 192, 256, 320, 384, 512, 1024, 2048]),
       hw=st.sampled_from([7, 8, 14, 16, 17, 28, 33, 56]), n=st.sampled_from([1, 4, 8, 16, 24, 32, 48, 64, 128]),
       f=st.sampled_from([(1, 1, 1), (3, 3, 1), (3, 3, 2), (1, 7, 1), (7, 1, 1), (1, 1, 2)]),
       dtype=st.sampled_from(["convfp16", "convbfp16"]), layout=st.sampled_from([NHWC, "-F 2"]))
def test_defaults_take_the_pingpong_form_where_it_keeps_the_warpgroups(c, k, hw, n, f, dtype, layout):
    from miopen_solver.heuristics import default_performance_config
    y, x, u = f
    p = _problem(f"-n {n} -c {c} -H {hw} -W {hw} -k {k} -y {y} -x {x} -p {y // 2} -q {x // 2} -u {u} -v {u}",
                 base=dtype, layout=layout)
    cfg = default_performance_config(p, SM90)
    one_wg_tma = (cfg.schedule is KernelSchedule.WGMMA_TMA and cfg.warp_m == cfg.warp_n == 1
                  and cfg.split_k in (1, -1) and cfg.split_k_reduce == 0)
    if one_wg_tma:      # kept only where its blocks outnumber a ping-pong block's 2 warpgroups, or strided
        assert u > 1 or launch_spec(p, SM90, cfg).resident_blocks > 2, cfg.serialize()
    if cfg.schedule is PP:
        assert is_valid_performance_config(p, SM90, cfg)[0]


# A setting a ping-pong default cannot take (split-K, stream-K, k-inner W) moves the default to
# what its cooperative TMA form -- the same tile at the TMA default's 4 stages -- takes with the
# setting, as a given config of that form would run it; the move is a note naming the form.
@pytest.mark.parametrize("settings", [
    dict(split_k=2), dict(split_k=3, split_k_reduce="workspace"), dict(split_k_reduce="stream"),
    dict(kouter="off"), dict(split_k=2, kouter="off"),
])
def test_settings_on_a_pingpong_default_run_what_its_cooperative_form_would(settings):
    from miopen_solver.solver import DgradSolver
    p = _problem("-n 32 -c 256 -H 14 -W 14 -k 256 -y 3 -x 3 -p 1 -q 1")
    solver = DgradSolver()
    default = solver.get_default_performance_config(p, SM90)
    assert default == PerfConfig.parse("128,128,64,1,1,128,128,0,0,0,1,-1,7,20")
    got = solver.find_solution(p, SM90, **settings)
    coop = default.replace(schedule=KernelSchedule.WGMMA_TMA, stages=4)
    if settings.get("kouter") == "off":     # k-inner W: no TMA form; the warp-MMA default, as for the TMA tile
        assert got.spec.config.schedule is KernelSchedule.WARP_MMA
    else:
        want = solver.find_solution(p, SM90, perf_config=coop, **settings).spec.config
        assert got.spec.config == want and want.schedule is KernelSchedule.WGMMA_TMA
        assert any("the cooperative TMA form" in n or "the TMA form" in n for n in got.notes), got.notes


def test_a_pingpong_default_says_why_and_a_given_config_does_not():
    from miopen_solver.solver import DgradSolver
    p = _problem("-n 32 -c 256 -H 14 -W 14 -k 256 -y 3 -x 3 -p 1 -q 1")
    notes = DgradSolver().find_solution(p, SM90).notes
    assert any(n.startswith("Default: the one-warpgroup TMA tile 128x128 runs as ping-pong") and "7 stages" in n
               for n in notes), notes
    given = DgradSolver().find_solution(p, SM90, perf_config="128,128,64,1,1,128,128,0,0,0,1,-1,6,20").notes
    assert not any(n.startswith("Default:") for n in given), given


@pytest.mark.parametrize("cfg", ["128,128,64,1,1,128,128,0,0,0,1,-1,8,20", "64,256,64,1,1,64,256,0,0,0,1,-1,6,20",
                                 "128,256,64,2,1,64,256,0,0,0,1,-1,6,3"])
def test_the_shared_memory_refusal_adds_up_and_names_the_depth_that_fits(cfg):
    """The refusal's parts (stages x bytes, the alignment slack, ping-pong's turn barriers) sum
    to the total it names, and the depth it says fits is the deepest that validates (the turn
    barriers' 16 bytes were in the total but not in the sentence)."""
    import re
    c = PerfConfig.parse(cfg)
    with pytest.raises(PerfConfigError) as e:
        make_spec(P1X1, SM90, c)
    msg = str(e.value)
    stages, per, total, most = (int(x) for x in re.search(
        r"(\d+) stages of (\d+) bytes .* need (\d+) bytes .* at most (\d+) stages", msg).groups())
    assert stages * per + 1024 + (16 if c.schedule.pingpong else 0) == total
    assert ("turn barriers" in msg) is c.schedule.pingpong
    assert is_valid_performance_config(P1X1, SM90, c.replace(stages=most))[0]
    assert not is_valid_performance_config(P1X1, SM90, c.replace(stages=most + 1))[0]
