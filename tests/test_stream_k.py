"""Stream-K on the TMA schedule (``split_k_reduce`` 3): its rules, its workspace, the kernel
text it adds, the launch plan that clears its flags and passes its workspace, and the driver's
options. The kernel itself runs on the emulator (tests/test_gemm_emu.py, ``-k stream_k``) and
on the GPU (tests/test_gpu.py, ``-k stream_k``)."""

from __future__ import annotations

import dataclasses
import itertools
import json
import shutil
import subprocess

import numpy as np
import pytest

from driver.cli import main
from miopen_solver.command import parse
from miopen_solver.config import SPLIT_K_REDUCE, KernelSchedule, PerfConfig
from miopen_solver.errors import PerfConfigError
from miopen_solver.heuristics import max_stream_k_workspace, search_space
from miopen_solver.reference import dgrad_reference, verify
from miopen_solver.runtime.cache import BinaryCache
from miopen_solver.runtime.gpu import POISON_BYTE, GpuEngine
from miopen_solver.solver import DgradSolver
from miopen_solver.spec import make_spec
from miopen_solver.target import get_target

from test_split_n import ComputingRuntime

SM90 = get_target("sm_90")
NHWC = "-F 2 --in_layout NHWC --out_layout NHWC --fil_layout NHWC"
SOLVER = DgradSolver()
SK = PerfConfig(128, 128, 64, 2, 1, 64, 128, split_k=1, stages=4, schedule=3, split_k_reduce=3)
R50 = f"convfp16 -n 64 -c 512 -H 7 -W 7 -k 2048 -y 1 -x 1 {NHWC}"


def _p(line):
    return parse(line.split()).problem


def test_the_code_is_named_stream():
    assert SPLIT_K_REDUCE[3] == "stream" and SK.reduce == "stream"
    assert SK.serialize() == "128,128,64,2,1,64,128,0,0,0,1,-1,4,3,3"


@pytest.mark.parametrize("line,cfg,needle", [
    (R50, SK.replace(schedule=1), "stream-K (split_k_reduce 3) runs on schedule 3 (wgmma-tma) only"),
    (R50, SK.replace(split_k=2), "split_k must be 1 or -1, got 2"),
    (f"convfp16 -n 2 -c 256 -H 8 -W 8 -k 256 -y 1 -x 1 -g 2 {NHWC}", SK, "stream-K runs one group; the problem has G=2"),
    # 3x3 stride 2: sub-GEMMs of 4, 2, 2 and 1 taps
    (f"convfp16 -n 2 -c 128 -H 16 -W 16 -k 128 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 {NHWC}", SK,
     "the sub-GEMMs have 1, 2, 4 taps"),
])
def test_refusals_name_the_rule(line, cfg, needle):
    with pytest.raises(PerfConfigError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        make_spec(_p(line), SM90, cfg)


@pytest.mark.parametrize("line", [
    R50,
    f"convbfp16 -n 2 -c 128 -H 16 -W 16 -k 128 -y 3 -x 3 -p 1 -q 1 {NHWC}",
    f"convfp16 -n 2 -c 64 -H 14 -W 14 -k 512 -y 1 -x 1 -u 2 -v 2 {NHWC}",      # one sub-GEMM, zero fill
    "convfp16 -n 2 -c 64 -H 14 -W 14 -k 512 -y 3 -x 3 -p 2 -q 2 -l 2 -j 2 -F 2",   # all NCHW, dilated
])
def test_grid_workspace_and_name_by_hand(line):
    """Blocks: every resident block (132 SMs x resident blocks), never more than the k-tiles;
    workspace: one flag per block rounded up to 64, then a 128x128 fp32 slot per block."""
    p = _p(line)
    s = make_spec(SOLVER.get_solution(p, SM90, SK).spec.problem, SM90, SK)
    kt = -(-p.kpg // 64) * (p.Y * p.X if p.sH == 1 else 1)
    tiles = s.tiles_per_group
    assert s.stream_k and s.stream_k_tiles == kt and s.split_k == 1
    assert s.tile_blocks == min(132 * s.resident_blocks, tiles * kt)
    flags = -(-s.tile_blocks // 64) * 64
    assert s.stream_k_flag_words == flags
    assert s.workspace_bytes == flags * 4 + s.tile_blocks * 128 * 128 * 4
    assert "_skst_" in s.kernel_name and f"_tma{s.tile_blocks}_" in s.kernel_name
    assert s.grid == (s.tile_blocks + s.zero_fill_blocks, 1, 1)
    sol = SOLVER.get_solution(p, SM90, SK)
    src = sol.kernels[0].source
    assert (src.workspace_arg, src.workspace_cleared) == (s.workspace_bytes, flags * 4)
    assert sol.workspace_bytes == sol.kernel_workspace_offset + s.workspace_bytes
    assert SOLVER.get_workspace_size(p, SM90, SK) == sol.workspace_bytes


def test_the_text_has_the_sections_only_for_stream_k():
    """The stream-K sections (fixup, fourth argument, runs of k-tiles) are in a stream-K
    kernel's text and nowhere else: the same tile unsplit or split keeps its text."""
    p = _p(R50)
    sk = SOLVER.get_solution(p, SM90, SK).kernels[0].source.text
    assert "dg_sk_fixup(ws, bid, base, acc, tid)" in sk and "float* __restrict__ ws" in sk
    assert "#define DG_SK_KT 32" in sk and "tmsk" not in sk
    for other in (SK.replace(split_k_reduce=0), SK.replace(split_k=2, split_k_reduce=0), SK.replace(split_k=2, split_k_reduce=2)):
        text = SOLVER.get_solution(p, SM90, other).kernels[0].source.text
        assert "dg_sk_" not in text and "__restrict__ ws" not in text and "DG_SK_" not in text


def test_the_problem_workspace_covers_every_stream_k_config():
    """get_workspace_size without a config holds the largest stream-K config search offers,
    and every stream-K candidate of the cost model in either stage count (a default may be one)."""
    from miopen_solver import cost_model as cm
    for line in (R50, "convfp16 -n 8 -c 64 -H 28 -W 28 -k 64 -y 3 -x 3 -p 1 -q 1 -F 2",
                 f"convfp16 -n 8 -c 640 -H 32 -W 32 -k 640 -y 3 -x 3 -p 1 -q 1 {NHWC}"):
        p = _p(line)
        whole = SOLVER.get_workspace_size(p, SM90)
        offered = [c for c in search_space(p, SM90) if c.reduce == "stream"]
        assert offered
        model = [c for c in cm.candidates(p) if c.split_k_reduce == 3]
        offered += model + [c.replace(stages=7 - c.stages) for c in model]
        need = 0
        for cfg in offered:
            try:
                need = max(need, SOLVER.get_workspace_size(p, SM90, cfg))
            except PerfConfigError:
                continue
        assert 0 < need <= whole
        launch = SOLVER.get_solution(p, SM90, offered[0]).spec.problem
        assert max_stream_k_workspace(launch, SM90) >= need - SOLVER.get_solution(p, SM90, offered[0]).kernel_workspace_offset


def test_search_offers_stream_k_only_to_one_group():
    grouped = _p(f"convfp16 -n 2 -c 256 -H 8 -W 8 -k 256 -y 1 -x 1 -g 2 {NHWC}")
    assert not [c for c in search_space(grouped, SM90) if c.reduce == "stream"]
    assert max_stream_k_workspace(grouped, SM90) == 0


class _SkRuntime(ComputingRuntime):
    """The computing fake device with TMA tensor maps (as placeholders naming their buffer)."""

    def tensor_map(self, ptr, desc):
        return ("tensor_map", ptr, desc)


def test_the_launch_clears_the_flags_poisons_the_slots_and_passes_the_workspace(tmp_path):
    """One run: the slots after the flags NaN-poisoned with dX, the flags zeroed right before
    the kernel, the kernel's fourth argument the workspace at the kernel's offset (after the
    NCHW copies), tensor maps after it; dX verifies (the fake device computes it)."""
    p = _p("convfp16 -n 2 -c 64 -H 6 -W 8 -k 192 -y 1 -x 1 -F 2 --in_layout NHWC --out_layout NCHW --fil_layout NHWC")
    sol = SOLVER.find_solution(p, SM90, perf_config=SK.replace(tile_m=64, warp_m=1))
    rt = _SkRuntime(sol)
    rng = np.random.default_rng(3)
    dy = rng.uniform(-1, 1, (2, 192, 6, 8)).astype(np.float16)
    w = rng.uniform(-1, 1, (192, 1, 1, 64)).astype(np.float16)
    dx = GpuEngine(rt, BinaryCache(tmp_path / "cache")).run(sol, dy, w)
    assert verify(p, dx, dgrad_reference(p, dy, w)).ok
    src = sol.kernels[0].source
    ws = next(c[1] for c in rt.calls if c[0] == "alloc" and c[2] == sol.workspace_bytes)
    own = ws + sol.kernel_workspace_offset
    assert sol.kernel_workspace_offset > 0                      # dY's NCHW copy comes first
    memsets = [c for c in rt.calls if c[0] == "memset"]
    assert ("memset", own + src.workspace_cleared, POISON_BYTE, src.workspace_arg - src.workspace_cleared) in memsets
    i = next(k for k, c in enumerate(rt.calls) if c[0] == "launch" and c[1] == src.name)
    assert rt.calls[i - 1] == ("memset", own, 0, src.workspace_cleared)
    args = rt.calls[i][5]
    assert args[3] == own and [a[0] for a in args[4:]] == ["tensor_map", "tensor_map"]


def test_compiles_for_sm90_without_spills(tmp_path):
    """nvcc builds stream-K kernels (a 1x1 and a 3x3 line, 128- and 256-column tiles) with no
    spills or stack."""
    if not shutil.which("nvcc"):
        pytest.skip("nvcc not on PATH")
    for line, cfg in ((R50, SK), (f"convbfp16 -n 2 -c 256 -H 8 -W 8 -k 320 -y 3 -x 3 -p 1 -q 1 {NHWC}",
                                  SK.replace(tile_n=256, warp_tile_n=256))):
        src = SOLVER.get_solution(_p(line), SM90, cfg).kernels[0].source
        cu = tmp_path / "k.cu"
        cu.write_text(src.text)
        r = subprocess.run(["nvcc", "-arch=sm_90a", "-cubin", "-o", str(tmp_path / "k.cubin"), str(cu), "-Xptxas", "-v"],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-2000:]
        assert "0 bytes spill stores, 0 bytes spill loads" in r.stderr and "0 bytes stack frame" in r.stderr


def test_the_driver_takes_split_k_reduce_stream(capsys):
    """``--split-k-reduce stream`` on a TMA config runs stream-K (verified on the CPU engine's
    decomposition); ``config --json`` reports the reduction, the workspace and the name."""
    base = ["convfp16", "-n", "2", "-c", "128", "-H", "9", "-W", "10", "-k", "256", "-y", "1", "-x", "1",
            "-F", "2", "--in_layout", "NHWC", "--out_layout", "NHWC", "--fil_layout", "NHWC"]
    cfg = "64,128,64,1,1,64,128,0,0,0,1,-1,4,3"
    assert main(base + ["--arch", "sm_90", "--backend", "cpu", "--perf-config", cfg, "--split-k-reduce", "stream"]) == 0
    out = capsys.readouterr().out
    assert "Verifies OK" in out
    assert main(["config"] + base + ["--arch", "sm_90", "--perf-config", cfg, "--split-k-reduce", "stream", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["spec"]["split_k_reduce"] == "stream" and "_skst_" in doc["kernel_name"]
    assert doc["workspace_bytes"] == make_spec(_p(" ".join(base)), SM90, PerfConfig.parse(cfg + ",3")).workspace_bytes


def test_a_stream_k_setting_on_a_config_that_cannot_take_it_is_one_line(capsys):
    base = ["convfp16", "-n", "2", "-c", "128", "-H", "9", "-W", "10", "-k", "256", "-y", "1", "-x", "1", "-F", "2",
            "--in_layout", "NHWC", "--out_layout", "NHWC", "--fil_layout", "NHWC"]
    status = main(base + ["--arch", "sm_90", "--backend", "cpu", "--perf-config", "64,128,64,1,1,64,128,0,0,0,1,-1,4,1",
                          "--split-k-reduce", "stream"])
    err = capsys.readouterr().err
    assert status != 0 and "stream-K (split_k_reduce 3) runs on" in err and "Traceback" not in err


def test_the_cost_model_s_features_of_a_stream_k_launch_by_hand():
    """ResNet-50 layer4.1.conv3 (N=64, 1x1, c512 k2048, 7x7) at 128x128 stream-K on the H200:
    25 x 4 = 100 tiles of 32 k-tiles over 132 blocks (one per SM): runs of 25 k-tiles, one
    wave; the features count 25 k-tiles of MMA and loads, and about 2.8 tiles' stores plus two
    fp32 tiles of fixup. Stream-K is among the model's candidates, every TMA tile, and its
    time is the fitted one scaled by ``stream_k_scale`` plus ``stream_k_us``."""
    from miopen_solver import cost_model as cm
    p = _p(R50)
    s = make_spec(p, SM90, SK)
    assert (s.tiles_per_group, s.stream_k_tiles, s.tile_blocks) == (100, 32, 132)
    f = cm.features(s)
    assert f.waves == 1.0 and f.atomics == 0.0 and f.phases == 1
    assert f.mma == pytest.approx(2 * 128 * 128 * 64 * 25 / cm.NOMINAL_SM_FLOPS * 1e6)
    assert f.loads == pytest.approx(256 * 64 * 2 * 25 / cm.NOMINAL_SM_BYTES * 1e6)
    assert f.stores == pytest.approx(128 * 128 * (2 * (25 / 32 + 2) + 8) / cm.NOMINAL_SM_BYTES * 1e6)
    assert f.steps == 25
    plain = cm.features(make_spec(p, SM90, SK.replace(split_k_reduce=0)))
    assert plain.mma == pytest.approx(2 * 128 * 128 * 64 * 32 / cm.NOMINAL_SM_FLOPS * 1e6)   # one tile per SM
    tma = [c for c in cm.candidates(p) if c.schedule is KernelSchedule.WGMMA_TMA and c.split_k == 1]
    assert {c.replace(split_k_reduce=0) for c in tma if c.split_k_reduce == 3} == \
        {c for c in tma if c.split_k_reduce == 0} and len(tma) == 2 * len(cm.TILES)
    base = dataclasses.replace(cm.H200, stream_k_scale=1.0, stream_k_us=0.0)
    assert cm.H200.time_us(f) == pytest.approx(cm.STREAM_K_SCALE * base.time_us(f) + cm.STREAM_K_US)
    assert cm.H200.time_us(plain) == pytest.approx(base.time_us(plain))   # data-parallel: untouched


@pytest.mark.parametrize("schedule", [s for s in KernelSchedule if s is not KernelSchedule.WGMMA_TMA],
                         ids=lambda s: s.slug)
def test_every_other_schedule_refuses_stream_k_naming_itself(schedule):
    """Stream-K is the plain TMA schedule's: every other schedule (the families on the TMA
    main loop too, whose virtual GEMMs would otherwise have taken the field) refuses field 15
    = 3, naming the schedule the config gave."""
    cfg = SK.replace(schedule=schedule)
    with pytest.raises(PerfConfigError) as e:
        make_spec(_p(R50), SM90, cfg)
    assert str(e.value) == ("stream-K (split_k_reduce 3) runs on schedule 3 (wgmma-tma) only; the config's "
                            f"schedule is {schedule.label}")


@pytest.mark.parametrize("line", [
    f"convfp16 -n 1 -c 256 -H 8 -W 8 -k 256 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 {NHWC}",     # sub-pixel TMA
    f"convfp16 -n 2 -c 64 -H 16 -W 16 -k 128 -y 2 -x 2 -u 2 -v 2 {NHWC}",             # patch TMA
    "convfp16 -n 2 -c 64 -H 16 -W 16 -k 64 -y 3 -x 3 -p 1 -q 1 -F 2",                  # NCHW TMA
])
def test_search_offers_stream_k_on_the_tma_schedule_only(line):
    p = _p(line)
    offered = [c for c in SOLVER.search(p, SM90) if c.reduce == "stream"]
    assert all(c.schedule is KernelSchedule.WGMMA_TMA for c in offered)
    whole = SOLVER.get_workspace_size(p, SM90)
    assert all(SOLVER.get_workspace_size(p, SM90, c) <= whole for c in offered)


@pytest.mark.parametrize("config,settings,expect", [
    # any --split-k-reduce replaces a stream-K config's reduction
    (SK, {"split_k_reduce": "atomic"}, SK.replace(split_k_reduce=1)),
    # --split-k N alone makes it a split-K config of the same tile
    (SK, {"split_k": 2}, SK.replace(split_k=2, split_k_reduce=0)),
    # --split-k-reduce stream on a TMA config
    (SK.replace(split_k_reduce=0), {"split_k_reduce": "stream"}, SK),
])
def test_settings_on_stream_k_configs(config, settings, expect):
    sol = SOLVER.find_solution(_p(R50), SM90, perf_config=config.serialize(), **settings)
    assert sol.perf_config == expect


def test_stream_setting_on_a_plain_warpgroup_default_takes_its_tma_form():
    p = _p(f"convfp16 -n 1 -c 64 -H 8 -W 8 -k 64 -y 3 -x 3 -p 1 -q 1 {NHWC}")
    default = SOLVER.get_default_performance_config(p, SM90)
    assert default.schedule is KernelSchedule.WGMMA
    sol = SOLVER.find_solution(p, SM90, split_k_reduce="stream")
    assert sol.perf_config == default.replace(schedule=KernelSchedule.WGMMA_TMA, split_k=1, split_k_reduce=3)
    assert any("using the TMA form with the setting" in n for n in sol.notes)


@pytest.mark.parametrize("split", [2, 3, 4, 5])
def test_a_given_stream_k_config_that_splits_is_refused_everywhere(split, capsys):
    """A perf config asking for stream-K and a split (field 15 = 3, split_k > 1) is invalid:
    find_solution, get_workspace_size and make_spec all refuse it, none rewrites it into a
    split-K config, and `config` says so in one line, exit 2."""
    cfg = SK.replace(split_k=split)
    p = _p(R50)
    for ask in (lambda: SOLVER.find_solution(p, SM90, perf_config=cfg.serialize()),
                lambda: SOLVER.get_workspace_size(p, SM90, cfg), lambda: make_spec(p, SM90, cfg)):
        with pytest.raises(PerfConfigError, match=f"split_k must be 1 or -1, got {split}"):
            ask()
    assert main(["config"] + R50.split() + ["--arch", "sm_90", "--perf-config", cfg.serialize()]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and "--perf-config" in err[0] and f"got {split}" in err[0] and "running" not in captured.out


@pytest.mark.parametrize("line", [
    f"convfp16 -n 8 -c 1280 -H 8 -W 8 -k 1280 -y 3 -x 3 -p 1 -q 1 {NHWC}",      # TMA default, split_k 3
    f"convfp16 -n 1 -c 128 -H 8 -W 8 -k 128 -y 3 -x 3 -p 1 -q 1 {NHWC}",        # plain warpgroup default, split
])
def test_stream_setting_on_a_default_that_splits_runs_its_tile_unsplit(line, capsys):
    """--split-k-reduce stream on a warpgroup default that splits K runs the same tile as
    stream-K on the TMA schedule, unsplit, with a note; with --split-k N > 1 as well it is one
    error line naming only the default (stream-K splits no K; no unrelated fallback)."""
    p = _p(line)
    default = SOLVER.get_default_performance_config(p, SM90)
    assert default.split_k > 1 and default.schedule.warpgroup
    sol = SOLVER.find_solution(p, SM90, split_k_reduce="stream")
    assert sol.perf_config == default.replace(schedule=KernelSchedule.WGMMA_TMA, split_k=1, split_k_reduce=3)
    assert any("with the setting" in n for n in sol.notes)
    assert main(["config"] + line.split() + ["--arch", "sm_90", "--split-k", "2", "--split-k-reduce", "stream"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and default.serialize() in err[0] and "nor with" not in err[0] and "warp-MMA" not in err[0]


def test_tune_stream_lists_the_default_then_stream_k_and_refuses_where_none_runs(capsys):
    base = ["convfp16", "-n", "1", "-c", "64", "-H", "8", "-W", "8", "-k", "64", "-y", "3", "-x", "3", "-p", "1",
            "-q", "1", "-F", "2", "--in_layout", "NHWC", "--out_layout", "NHWC", "--fil_layout", "NHWC"]
    assert main(["tune"] + base + ["--backend", "cpu", "--arch", "sm_90", "--split-k-reduce", "stream", "--list"]) == 0
    listed = [PerfConfig.parse(x) for x in capsys.readouterr().out.split()]
    assert listed[0] == SOLVER.get_default_performance_config(_p(" ".join(base)), SM90)
    assert len(listed) > 1 and all(c.reduce == "stream" for c in listed[1:])
    assert main(["tune"] + base + ["-g", "2", "--backend", "cpu", "--arch", "sm_90", "--split-k-reduce", "stream",
                                   "--list"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no stream-K config is valid for this problem" in err[0] and "G=2" in err[0]


def _fit_stream_k():
    """bench/fit_stream_k.py as a module (bench/ is not a package; the repository root on the
    path finds it)."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from bench import fit_stream_k
    return fit_stream_k


def test_fit_stream_k_recovers_known_terms(tmp_path, capsys):
    """bench/fit_stream_k.py on rows built as 1.25 x the model's base time + 4 us recovers
    both terms; a missing file is one line, exit 2."""
    from miopen_solver import cost_model as cm
    fit_stream_k = _fit_stream_k()
    base = dataclasses.replace(cm.H200, stream_k_scale=1.0, stream_k_us=0.0)
    rows = []
    for line in (R50, f"convfp16 -n 8 -c 640 -H 32 -W 32 -k 640 -y 3 -x 3 -p 1 -q 1 {NHWC}"):
        for cfg in (SK, SK.replace(tile_n=256, warp_tile_n=256), SK.replace(split_k_reduce=0)):
            us = base.time_us(cm.features(make_spec(_p(line), get_target("sm_90a"), cfg)))
            t = 1.25 * us + 4.0 if cfg.split_k_reduce == 3 else us
            rows.append({"line": line, "config": cfg.serialize(), "ours_ms": t / 1e3})
    path = tmp_path / "t.json"
    path.write_text(json.dumps(rows))
    assert fit_stream_k.main([str(path)]) == 0
    out = capsys.readouterr().out
    assert "stream-K rows: 4; fit: measured = 1.250 x base + 4.00 us" in out and "rms log error: 0.000 fitted" in out
    assert fit_stream_k.main([str(tmp_path / "none.json")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "none.json" in err


@pytest.mark.parametrize("content,needle", [
    ('{"line": "x"}', "a JSON list"), ('"str"', "a JSON list"), ("[1, 2]", "row 0: a JSON object"),
    ("[null]", "row 0: a JSON object"), ('[{"ours_ms": 1, "config": "256,128", "line": 5}]', "must be strings"),
    ('[{"ours_ms": -1, "config": "1", "line": "x"}]', "'ours_ms' must be a finite number > 0, got -1"),
    ('[{"ours_ms": "abc", "config": "1", "line": "x"}]', "got 'abc'"),
    ('[{"ours_ms": 1, "config": "1", "line": "convfp16 -n 1 -F 1"}]', "row 0: line:"),
    ("", "not JSON"), (b"\xff\xfe", "cannot read"),
])
def test_fit_stream_k_bad_input_is_one_line_naming_the_file(tmp_path, capsys, content, needle):
    fit_stream_k = _fit_stream_k()
    path = tmp_path / "t.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    assert fit_stream_k.main([str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(path) in err[0] and needle in err[0], err


SETTING_GRID = [dict(zip(("kouter", "split_k", "split_k_reduce"), v))
                for v in itertools.product((None, "auto", "on"), (None, -1, 1, 2, 4),
                                           (None, "auto", "atomic", "workspace", "stream"))]


@pytest.mark.parametrize("line", [
    R50, f"convfp16 -n 8 -c 1280 -H 8 -W 8 -k 1280 -y 3 -x 3 -p 1 -q 1 {NHWC}",
    f"convfp16 -n 1 -c 128 -H 8 -W 8 -k 128 -y 3 -x 3 -p 1 -q 1 {NHWC}",
    f"convbfp16 -n 8 -c 1280 -H 16 -W 16 -k 1280 -y 3 -x 3 -p 1 -q 1 {NHWC}",
])
@pytest.mark.parametrize("given", [None, SK, SK.replace(split_k=2), SK.replace(split_k_reduce=0, split_k=3)],
                         ids=["default", "stream", "stream_split", "tma_split"])
def test_settings_on_any_config_give_a_valid_config_or_one_refusal(line, given):
    """Over every --kouter/--split-k/--split-k-reduce combination, on defaults and on given
    stream-K and TMA split-K configs: the solver either refuses (PerfConfigError) or runs a
    config that builds a spec; a given config runs as given when no setting is asked, and a
    stream-K result never splits K."""
    p = _p(line)
    for settings in SETTING_GRID:
        try:
            sol = SOLVER.find_solution(p, SM90, perf_config=given.serialize() if given else None, **settings)
        except PerfConfigError:
            assert given is not None or any(v is not None for v in settings.values()), settings
            continue
        make_spec(p, SM90, sol.perf_config)
        if given is not None and all(v is None for v in settings.values()):
            assert sol.perf_config == given
        if sol.perf_config.split_k_reduce == 3:
            assert sol.perf_config.split_k in (-1, 1), (settings, sol.perf_config)


def test_a_stream_k_solution_states_its_blocks_and_workspace_by_hand():
    """ResNet-50 layer4.1.conv3 at 128x128 stream-K on 132 SMs: 100 tiles of 32 k-tiles over
    132 blocks; 132 flags round up to 192 words (768 bytes), then 132 slots of 128 x 128
    fp32 (65536 bytes): 768 + 132 x 65536 = 8651520 bytes, in the JSON facts and one note."""
    sol = SOLVER.find_solution(_p(R50), SM90, perf_config=SK.serialize())
    assert sol.split_k_reduce == {"mode": "stream", "blocks": 132, "tiles": 100, "k_tiles_per_tile": 32,
                                  "flag_bytes": 768, "slot_bytes": 65536, "kernel_workspace_bytes": 8651520}
    assert sol.workspace_bytes == 8651520
    notes = [n for n in sol.notes if n.startswith("Stream-K:")]
    assert notes == ["Stream-K: 100 tiles of 32 k-tiles over 132 resident blocks; 8651520 bytes of the workspace: "
                     "768 of flags (zeroed before every launch), then one fp32 slot of 65536 bytes per block"]


def test_stream_and_split_on_a_ping_pong_default_name_the_split_as_the_reason(capsys):
    """--split-k N > 1 with --split-k-reduce stream on a ping-pong default: the error names
    the rule the setting breaks on the tile's cooperative TMA form (stream-K splits no K;
    split_k 1 or -1), not only that stream-K does not run on schedule 20 (which the stream
    setting alone gets past by the TMA form)."""
    line = "convfp16 -n 32 -c 256 -H 14 -W 14 -k 256 -y 3 -x 3 -p 1 -q 1 -F 2"
    p = _p(line)
    default = SOLVER.get_default_performance_config(p, SM90)
    assert default.schedule is KernelSchedule.WGMMA_TMA_PINGPONG
    assert main(["config"] + line.split() + ["--arch", "sm_90", "--split-k", "2", "--split-k-reduce", "stream"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and default.serialize() in err[0], err
    assert "nor with the cooperative TMA form 128,128,64,1,1,128,128,0,0,0,2,-1,4,3,3: stream-K divides the " \
           "k-tiles over the blocks itself; split_k must be 1 or -1, got 2" in err[0], err
