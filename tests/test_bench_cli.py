"""The bench scripts a user runs without a GPU refuse bad input as the project asks (exit 2,
nothing on stdout, one stderr line naming the option, the value and what is allowed, no
traceback), before any output or work: bench/direct_sass.py (its CUDA tools included),
bench/cpu_engine.py (its line, --iters, applicability and host memory) and
bench/vendor_kernels.py (its suite and selection). The report scripts (default_vs_tuned.py,
fit_cost_model.py, compare.py --report) refuse a file given twice before any work, end
quietly on a closed pipe and in one line on a stdout that cannot be written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import refused_in_one_line
from bench import cpu_engine, direct_sass, vendor_kernels
from miopen_solver import memory

SMALL = "convfp16 -n 2 -c 16 -H 8 -W 8 -k 16 -y 3 -x 3 -p 1 -q 1 -F 2"


@pytest.fixture
def no_cuda_tools(monkeypatch, tmp_path):
    """Neither nvcc nor cuobjdump anywhere the script looks."""
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CUOBJDUMP", raising=False)
    monkeypatch.delenv("NVCC", raising=False)
    monkeypatch.setattr(direct_sass.sys, "path", [p for p in direct_sass.sys.path if "site-packages" not in p])


@pytest.mark.parametrize("argv,says", [
    ([], "nvcc not found: put it on PATH or set $NVCC"),
    (["--default"], "nvcc not found"),
    (["--configs", "16,32,16,1,1,4,2,1,0,4,1,0,1,4"], "nvcc not found"),
    (["--configs", "abc"], "--configs 'abc': perf config field tile_m='abc' is not an integer"),
    (["--configs", "16,32,16,1,1,4,2,1,0,4,1,0,1,4;1,2"], "--configs '1,2': perf config has 2 fields"),
    (["--dtype", "fp64"], "--dtype 'fp64': allowed: fp16, bf16, fp32"),
    (["--only", "zzz"], "--only 'zzz': selects no layer; allowed: comma-separated substrings of"),
    (["--bogus"], "unrecognized arguments: --bogus"),
])
def test_direct_sass_refuses_in_one_line_before_any_output(capsys, no_cuda_tools, argv, says):
    assert says in refused_in_one_line(capsys, direct_sass.main, argv, "direct_sass.py")


def test_direct_sass_names_a_missing_cuobjdump_and_a_bad_tool_variable(capsys, no_cuda_tools, monkeypatch, tmp_path):
    nvcc = tmp_path / "nvcc"
    nvcc.write_text("#!/bin/sh\nexit 1\n")
    nvcc.chmod(0o755)
    err = refused_in_one_line(capsys, direct_sass.main, [], "direct_sass.py")
    assert "cuobjdump not found: put it on PATH or set $CUOBJDUMP" in err
    monkeypatch.setenv("CUOBJDUMP", str(tmp_path / "missing"))
    err = refused_in_one_line(capsys, direct_sass.main, [], "direct_sass.py")
    assert "$CUOBJDUMP" in err and "missing" in err and "not an executable file" in err


def test_direct_sass_a_failing_tool_is_one_line_exit_3(capsys, no_cuda_tools, tmp_path):
    for name, script in (("nvcc", "echo 'fatal: broken nvcc' >&2\nexit 4"), ("cuobjdump", "exit 0")):
        tool = tmp_path / name
        tool.write_text(f"#!/bin/sh\n{script}\n")
        tool.chmod(0o755)
    assert direct_sass.main(["--only", "mobilenet"]) == 3
    out, err = capsys.readouterr()
    assert out.count("\n") == 1 and out.startswith("layer ")          # the heading only
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("direct_sass.py: mobilenet dw3x3 c144 56 ") and "nvcc exited 4: fatal: broken nvcc" in err


@pytest.mark.parametrize("argv,says", [
    (["--iters", "0", SMALL], "argument --iters: '0': allowed: an integer >= 1"),
    (["--iters", "-3", SMALL], "argument --iters: '-3': allowed: an integer >= 1"),
    (["--iters", "nan", SMALL], "argument --iters: 'nan': allowed: an integer >= 1"),
    (["--iters", "1", "bogus -n 2"], "<base> 'bogus': unknown base argument"),
    (["--iters", "1", "convfp16 -n abc"], "-n 'abc': allowed: an integer"),
    (["--iters", "1", SMALL.replace("-F 2", "-F 1")], "-F '1': the line asks for forward"),
    (["--iters", "1", SMALL + " -I CHWN"], "not applicable: LAYOUT"),
    (["--iters", "1", SMALL.replace("-H 8 -W 8", "-H 99999 -W 99999")], "not applicable: INDEX_OVERFLOW"),
])
def test_cpu_engine_refuses_in_one_line(capsys, argv, says):
    err = refused_in_one_line(capsys, cpu_engine.main, argv, "cpu_engine.py")
    assert says in err


def test_cpu_engine_refuses_a_line_the_host_cannot_hold_before_allocating(capsys, monkeypatch):
    monkeypatch.setattr(memory, "host_memory", lambda: memory.HostMemory(64 << 20, "MemAvailable", None, 0))

    def no_inputs(*a, **k):
        raise AssertionError("inputs were generated")
    monkeypatch.setattr(cpu_engine.prng, "generate_inputs", no_inputs)
    err = refused_in_one_line(capsys, cpu_engine.main, ["--iters", "1", SMALL], "cpu_engine.py")
    assert "host memory: needs" in err and "allowed: a smaller -n" in err


def test_cpu_engine_still_times_a_small_line(capsys):
    assert cpu_engine.main(["--iters", "1", SMALL]) == 0
    assert "ratio engine/matmul" in capsys.readouterr().out


@pytest.mark.parametrize("suite,argv,says", [
    ("", [], "--suite {suite}: no lines; allowed: a suite file"),
    ("# only a comment\n", [], "--suite {suite}: no lines"),
    (SMALL + " # a\n", ["--only", "zzz"], "--only 'zzz': selects no line of {suite} (1 rows)"),
    (SMALL + " # a\n", ["--shard", "2/2"], "--shard '2/2': selects no line of {suite} (1 rows)"),
])
def test_vendor_kernels_names_the_flag_that_left_no_line(capsys, tmp_path, suite, argv, says):
    path = tmp_path / "suite.txt"
    path.write_text(suite)
    err = refused_in_one_line(capsys, vendor_kernels.main, ["--suite", str(path)] + argv, "vendor_kernels.py")
    assert says.format(suite=path) in err


# ----------------------------------------------------------------- the GPU timing scripts
# (bench/sweep.py, profile_one.py, first_launch.py, big_tensors.py, patch_h200.py,
# direct_h200.py, direct_threshold.py, splitk_h200.py): one line, exit 2, before any GPU work.

def _no_gpu_work(monkeypatch, module):
    """Fail the test when ``module`` reaches for a GPU (``gpu()`` or ``cuda_engine()``)."""
    def no(*a, **k):
        raise AssertionError("GPU work started")
    for name in ("gpu", "cuda_engine"):
        if hasattr(module, name):
            monkeypatch.setattr(module, name, no)


@pytest.mark.parametrize("argv,says", [
    ([], "the following arguments are required: --rows"),
    (["--rows", "no_such_row"], "--rows 'no_such_row': selects no line of bench/suite.txt; allowed:"),
    (["--rows", "big_3x3", "--dtype", "fp8"], "argument --dtype: invalid choice: 'fp8'"),
    (["--rows", "big_3x3", "--top", "0"], "argument --top: '0': allowed: an integer >= 1"),
    (["--rows", "big_3x3", "--replays", "nan"], "argument --replays: 'nan': allowed: an integer >= 1"),
    (["--rows", "big_3x3", "--csv", "/nonexistent/dir/x.csv"], "--csv "),
    (["--rows", "big_3x3", "--configs", "/nonexistent/cfgs.txt"], "--configs "),
    (["--rows", "big_3x3", "--bogus"], "unrecognized arguments: --bogus"),
])
def test_sweep_refuses_bad_input_in_one_line(capsys, monkeypatch, argv, says):
    from bench import sweep
    _no_gpu_work(monkeypatch, sweep)
    assert says in refused_in_one_line(capsys, sweep.main, argv, "sweep.py")


@pytest.mark.parametrize("text,says", [("", "no perf configs"), ("1,2\n", "entry '1,2': perf config has 2 fields")])
def test_sweep_refuses_a_bad_config_file(capsys, monkeypatch, tmp_path, text, says):
    from bench import sweep
    _no_gpu_work(monkeypatch, sweep)
    (tmp_path / "c.txt").write_text(text)
    err = refused_in_one_line(capsys, sweep.main, ["--rows", "big_3x3", "--configs", str(tmp_path / "c.txt")],
                              "sweep.py")
    assert "--configs " in err and says in err


LINE = "convfp16 -n 2 -c 16 -H 8 -W 8 -k 16 -y 3 -x 3 -p 1 -q 1 -F 2 --in_layout NHWC --out_layout NHWC --fil_layout NHWC"


@pytest.mark.parametrize("argv,says", [
    ([], "the following arguments are required: line"),
    (["bogus -n 2"], "line 'bogus -n 2': "),
    ([LINE.replace("-F 2", "-F 1")], "-F '1'"),
    ([LINE, "--perf-config", "1,2"], "--perf-config '1,2': perf config has 2 fields"),
    ([LINE, "--backend", "rocm"], "argument --backend: invalid choice: 'rocm'"),
    ([LINE, "--bogus"], "unrecognized arguments: --bogus"),
])
def test_profile_one_refuses_bad_input_in_one_line(capsys, monkeypatch, argv, says):
    from bench import profile_one
    monkeypatch.setattr(profile_one, "get_engine", lambda *a: (_ for _ in ()).throw(AssertionError("GPU")))
    assert says in refused_in_one_line(capsys, profile_one.main, argv, "profile_one.py")


def test_profile_one_refuses_a_config_the_line_cannot_take(capsys):
    from bench import profile_one
    err = refused_in_one_line(capsys, profile_one.main, [LINE, "--backend", "cpu", "--perf-config",
                                                         "16,32,16,1,1,4,2,1,0,4,1,0,1,4"], "profile_one.py")
    assert "--perf-config '16,32,16,1,1,4,2,1,0,4,1,0,1,4': " in err


@pytest.mark.parametrize("argv,says", [
    (["--rows", "no_such_row"], "--rows 'no_such_row': selects no line of bench/suite.txt; allowed:"),
    (["--dtype", "fp8"], "argument --dtype: invalid choice: 'fp8'"),
    (["--bogus"], "unrecognized arguments: --bogus"),
])
def test_first_launch_refuses_bad_input_in_one_line(capsys, monkeypatch, argv, says):
    from bench import first_launch
    monkeypatch.setattr(first_launch.subprocess, "run", lambda *a, **k: (_ for _ in ()).throw(AssertionError("ran")))
    assert says in refused_in_one_line(capsys, first_launch.main, argv, "first_launch.py")


def test_first_launch_without_a_gpu_is_one_line(capsys, monkeypatch):
    import subprocess

    from bench import first_launch
    from miopen_solver import runtime
    from miopen_solver.errors import RuntimeUnavailable

    def no_cuda(*a, **k):
        raise RuntimeUnavailable("no CUDA runtime found (test)")
    monkeypatch.setattr(runtime, "get_engine", no_cuda)
    assert "needs a CUDA GPU (no CUDA runtime found (test))" in refused_in_one_line(
        capsys, first_launch.main, ["--child", LINE], "first_launch.py")
    child_says = "first_launch.py: needs a CUDA GPU (no CUDA runtime found (test))\n"
    monkeypatch.setattr(first_launch.subprocess, "run",
                        lambda argv, **k: subprocess.CompletedProcess(argv, 2, "", child_says))
    assert refused_in_one_line(capsys, first_launch.main, ["--rows", "big_3x3"], "first_launch.py") == child_says


@pytest.fixture
def no_gpu(monkeypatch):
    """No PyTorch and no CUDA runtime, whatever this machine has."""
    import importlib.util
    import sys
    find_spec = importlib.util.find_spec

    from miopen_solver import runtime
    from miopen_solver.errors import RuntimeUnavailable

    def no_cuda(*a, **k):
        raise RuntimeUnavailable("no CUDA runtime found (test)")
    monkeypatch.setitem(sys.modules, "torch", None)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else find_spec(name, *a))
    monkeypatch.setattr(runtime, "get_engine", no_cuda)


@pytest.mark.parametrize("script,argv,says", [
    ("sweep", ["--rows", "big_3x3"], "needs a CUDA GPU (no CUDA runtime found (test))"),
    ("big_tensors", ["--only", "1x1_2^32"], "needs a CUDA GPU (no CUDA runtime found (test))"),
    ("patch_h200", ["--only", "vit"], "needs PyTorch with a CUDA GPU ("),
    ("direct_h200", ["--only", "mbv2", "--random", "0"], "needs PyTorch with a CUDA GPU (no module named 'torch')"),
    ("direct_threshold", [], "needs PyTorch with a CUDA GPU ("),
    ("splitk_h200", ["--max-seconds", "200"], "needs PyTorch with a CUDA GPU ("),
])
def test_a_valid_run_without_a_gpu_is_one_line(capsys, no_gpu, monkeypatch, script, argv, says):
    import importlib
    module = importlib.import_module(f"bench.{script}")
    if hasattr(module, "get_engine"):
        from miopen_solver import runtime
        monkeypatch.setattr(module, "get_engine", runtime.get_engine)
    assert says in refused_in_one_line(capsys, module.main, argv, f"{script}.py")


def test_profile_one_without_a_gpu_is_one_line(capsys, no_gpu, monkeypatch):
    from bench import profile_one
    from miopen_solver import runtime
    monkeypatch.setattr(profile_one, "get_engine", runtime.get_engine)
    err = refused_in_one_line(capsys, profile_one.main, [LINE], "profile_one.py")
    assert "--backend cuda: needs a GPU (no CUDA runtime found (test))" in err


@pytest.mark.parametrize("argv,says", [
    (["--only", "no_such_line"], "--only 'no_such_line': selects no line; allowed: a substring of one of 1x1_2^32"),
    (["--launches", "0"], "argument --launches: '0': allowed: an integer >= 1"),
    (["--replays", "1e9x"], "argument --replays: '1e9x': allowed: an integer >= 1"),
    (["--json", "/nonexistent/dir/x.json"], "--json "),
    (["--bogus"], "unrecognized arguments: --bogus"),
])
def test_big_tensors_refuses_bad_input_in_one_line(capsys, monkeypatch, argv, says):
    from bench import big_tensors
    _no_gpu_work(monkeypatch, big_tensors)
    assert says in refused_in_one_line(capsys, big_tensors.main, argv, "big_tensors.py")


@pytest.mark.parametrize("argv,says", [
    (["--only", "no_such_line"], "--only 'no_such_line': selects no line; allowed: a substring of a patch line"),
    (["--config", "1,2"], "--config '1,2': perf config has 2 fields"),
    (["--zoo", "/nonexistent/zoo.txt"], "--zoo "),
    (["--launches", "-1"], "argument --launches: '-1': allowed: an integer >= 1"),
    (["--replays", "0"], "argument --replays: '0': allowed: an integer >= 1"),
    (["--json", "/nonexistent/dir/x.json"], "--json "),
    (["--bogus"], "unrecognized arguments: --bogus"),
    (["--zoo", ""], "--zoo '': empty (no file named)"),
    (["--json", "bench/zoo.txt"], "--json bench/zoo.txt: is the input --zoo"),
    (["--zoo", "BADZOO"], "bad/stem: <base> 'garbage': unknown base argument"),
])
def test_patch_h200_refuses_bad_input_in_one_line(capsys, monkeypatch, argv, says, tmp_path):
    from bench import patch_h200
    _no_gpu_work(monkeypatch, patch_h200)
    bad = tmp_path / "zoo.txt"          # every line parses before any timing
    bad.write_text("garbage  # bad/stem class=patch\n")
    argv = [str(bad) if a == "BADZOO" else a for a in argv]
    assert says in refused_in_one_line(capsys, patch_h200.main, argv, "patch_h200.py")


@pytest.mark.parametrize("argv,says", [
    (["--policies", "v8_nope"], "--policies 'v8_nope': unknown; allowed: a comma list of "),
    (["--only", "no_such_layer"], "--only 'no_such_layer': selects no layer; allowed:"),
    (["--dtypes", "fp8"], "--dtypes 'fp8': allowed: a comma list of fp16, bf16, fp32"),
    (["--configs", "1,2"], "--configs entry '1,2': perf config has 2 fields"),
    (["--launches", "0"], "argument --launches: '0': allowed: an integer >= 1"),
    (["--replays", "x"], "argument --replays: 'x': allowed: an integer >= 1"),
    (["--rotate-mb", "0"], "argument --rotate-mb: 0: allowed: a finite number of MB > 0"),
    (["--rotate-mb", "inf"], "argument --rotate-mb: inf: allowed: a finite number of MB > 0"),
    (["--rotate-mb", "nan"], "argument --rotate-mb: nan: allowed"),
    (["--random", "-1"], "argument --random: '-1': allowed: an integer from 0 to 100000"),
    (["--seed", "-5"], "argument --seed: '-5': allowed: an integer from 0 to"),
    (["--jobs", "0"], "argument --jobs: '0': allowed: an integer from 1 to 1024"),
    (["--out", "/dev/null/x"], "--out "),
    (["--bogus"], "unrecognized arguments: --bogus"),
])
def test_direct_h200_refuses_bad_input_in_one_line(capsys, monkeypatch, argv, says):
    from bench import direct_h200
    monkeypatch.setattr(direct_h200, "random_problems", lambda *a: (_ for _ in ()).throw(AssertionError("planned")))
    assert says in refused_in_one_line(capsys, direct_h200.main, argv, "direct_h200.py")


@pytest.mark.parametrize("argv,says", [
    (["--launches", "0"], "argument --launches: '0': allowed: an integer >= 1"),
    (["--replays", "inf"], "argument --replays: 'inf': allowed: an integer >= 1"),
    (["--out", "/nonexistent/dir/x.md"], "--out "),
    (["--bogus"], "unrecognized arguments: --bogus"),
])
def test_direct_threshold_refuses_bad_input_in_one_line(capsys, monkeypatch, argv, says):
    from bench import direct_threshold
    monkeypatch.setattr(direct_threshold.compare, "gpu", lambda: (_ for _ in ()).throw(AssertionError("GPU")))
    assert says in refused_in_one_line(capsys, direct_threshold.main, argv, "direct_threshold.py")


@pytest.mark.parametrize("argv,says", [
    (["--only", "no_such_line"], "--only 'no_such_line': selects no line; allowed:"),
    (["--launches", "0"], "argument --launches: '0': allowed: an integer >= 1"),
    (["--replays", "-2"], "argument --replays: '-2': allowed: an integer >= 1"),
    (["--max-seconds", "0"], "argument --max-seconds: 0: allowed: a finite number of seconds > 0"),
    (["--max-seconds", "nan"], "argument --max-seconds: nan: allowed"),
    (["--zoo", "/nonexistent/zoo.txt"], "--zoo "),
    (["--json", "/nonexistent/dir/x.json"], "--json "),
    (["--out", "/nonexistent/dir/x.md"], "--out "),
    (["--bogus"], "unrecognized arguments: --bogus"),
])
def test_splitk_h200_refuses_bad_input_in_one_line(capsys, monkeypatch, argv, says):
    from bench import splitk_h200
    _no_gpu_work(monkeypatch, splitk_h200)
    assert says in refused_in_one_line(capsys, splitk_h200.main, argv, "splitk_h200.py")


@pytest.mark.parametrize("argv,says", [
    (["--only", "no_such_line"], "--only 'no_such_line': selects no line of bench/suite.txt; allowed:"),
    (["--suite", "/nonexistent/suite.txt"], "--suite "),
    (["--suite", "BAD_SUITE"], "--suite BAD_SUITE: line 'bad': "),
    (["--launches", "0"], "argument --launches: '0': allowed: an integer >= 1"),
    (["--out", "/nonexistent/dir/x.md"], "--out "),
    (["--bogus"], "unrecognized arguments: --bogus"),
])
def test_nchw_breakdown_refuses_bad_input_in_one_line(capsys, monkeypatch, tmp_path, argv, says):
    from bench import nchw_breakdown
    monkeypatch.setattr(nchw_breakdown, "gpu", lambda: (_ for _ in ()).throw(AssertionError("GPU")))
    monkeypatch.chdir(Path(__file__).resolve().parent.parent)
    if "BAD_SUITE" in argv:
        bad = tmp_path / "s.txt"
        bad.write_text("convfp16 -n 2 -c 8 -H 4 -W 4 -k 8 -y 3 -x 3 -g 3 -F 2  # bad\n")
        argv = [str(bad) if a == "BAD_SUITE" else a for a in argv]
        says = says.replace("BAD_SUITE", str(bad))
    assert says in refused_in_one_line(capsys, nchw_breakdown.main, argv, "nchw_breakdown.py")


def test_nchw_breakdown_without_a_gpu_is_one_line(capsys, no_gpu):
    from bench import nchw_breakdown
    assert "needs PyTorch with a CUDA GPU (" in refused_in_one_line(capsys, nchw_breakdown.main, ["--only", "r50_3x3_c64"],
                                                                    "nchw_breakdown.py")


@pytest.mark.parametrize("line,pair,dx_alt", [
    ("convfp16 -n 4 -c 64 -H 14 -W 14 -k 64 -y 3 -x 3 -p 1 -q 1 -F 2", True, True),     # dY+W paired, NCHW dX
    ("convfp16 -n 4 -c 64 -H 7 -W 7 -k 64 -y 1 -x 1 -F 2", False, True),                # dY alone
    # a dX transform runs (cpg 32: a warp-MMA default the fake runtime launches; a modelled
    # cpg 64 now takes a TMA tile, whose tensor maps it cannot build)
    ("convfp16 -n 4 -c 32 -H 14 -W 14 -k 128 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 -F 2", True, False),
])
def test_nchw_breakdown_times_every_step_the_pair_and_the_dx_alternative(tmp_path, line, pair, dx_alt):
    """On a recording runtime: every launch of the run is timed alone, the pair launch of dY's
    and W's transforms is timed where two run before the kernel, and the dX transform an
    NHWC-dX kernel would need where the kernel stores dX NCHW."""
    from bench import nchw_breakdown
    from miopen_solver.command import parse
    from miopen_solver.runtime.cache import BinaryCache
    from miopen_solver.runtime.gpu import GpuEngine
    from miopen_solver.transpose import writes_nchw_dx
    from test_gpu_engine import FakeRuntime
    rt = FakeRuntime()
    eng = GpuEngine(rt, BinaryCache(tmp_path))
    p = parse(line.split()).problem
    sol = nchw_breakdown.DgradSolver().find_solution(p, eng.target)
    b = nchw_breakdown.breakdown(eng, p, 2, 2)
    launched = [s[0] for s in b["steps"]]
    assert launched == [x.kernel_name for x in sol.transform_launches if x.before] + [sol.spec.kernel_name] + \
        [x.kernel_name for x in sol.transform_launches if not x.before]
    assert (b["pair_us"] is not None) == pair == (sum(t.before for t in sol.transforms) == 2)
    assert (b["dx_transform_us"] is not None) == dx_alt == writes_nchw_dx(sol.spec)
    timed = [c for c in rt.calls if c[0] == "launch"]
    if pair:
        assert any(c[1] == "dgrad_transpose_pair_b16" and len(c[5]) == 16 for c in timed)
    if dx_alt:     # (src, dst, N, Hi*Wi, C)
        assert any(c[1].startswith("dgrad_transpose_") and c[5][2:] == (p.N, p.Hi * p.Wi, p.C) for c in timed)


# ------------------------------------------------ the files the report scripts read and write
# bench/default_vs_tuned.py, bench/fit_cost_model.py and bench/compare.py --report read logs,
# suites and reports and write --out/--json/--plot; compare.check_outputs refuses, before any
# work: an input given twice (counted twice), an output that is an input (replaced: the trial
# lost a --log to fit_cost_model --out), two outputs one file (one lost) -- whatever the
# spelling of the second path.
SPELLINGS = {"same": lambda name: name, "dot": lambda name: f"./{name}", "updir": lambda name: f"sub/../{name}",
             "symlink": lambda name: _link(name, os.symlink), "hardlink": lambda name: _link(name, os.link)}


def _link(name: str, make) -> str:
    other = f"{make.__name__}_{name}"
    if not os.path.lexists(other):
        make(name, other)
    return other


FILES = {"l.jsonl": '{"type": "session"}\n', "zoo.txt": "convfp16 -n 1  # x\n", "r.json": '{"meta": {}, "rows": []}\n',
         "c.json": "[]\n", "o.md": "old output\n"}
"""Inputs that are never read (the checks come first) and an existing output."""
SAME_FILE = [   # (script, argv with {2} another spelling of the file {1}, what is said)
    ("default_vs_tuned", ["l.jsonl", "{2}"], "log {2}: the same file as log {1}"),
    ("default_vs_tuned", ["l.jsonl", "--out", "{2}"], "--out {2}: is the input log {1}"),
    ("default_vs_tuned", ["l.jsonl", "--suite", "zoo.txt", "--json", "{2}"], "--json {2}: is the input --suite {1}"),
    ("default_vs_tuned", ["l.jsonl", "--out", "o.md", "--json", "{2}"], "--json {2}: the same file as --out {1}"),
    ("fit_cost_model", ["--log", "l.jsonl", "--log", "{2}"], "--log {2}: the same file as --log {1}"),
    ("fit_cost_model", ["--log", "l.jsonl", "--out", "{2}"], "--out {2}: is the input --log {1}"),
    ("fit_cost_model", ["--log", "l.jsonl", "--suite", "zoo.txt", "--out", "{2}"], "--out {2}: is the input --suite {1}"),
    ("fit_cost_model", ["--report", "r.json", "--out", "{2}"], "--out {2}: is the input --report {1}"),
    ("fit_cost_model", ["--configs", "c.json", "--out", "{2}"], "--out {2}: is the input --configs {1}"),
    ("fit_cost_model", ["--report", "r.json,{2}"], "--report {2}: the same file as --report {1}"),
    ("fit_cost_model", ["--report", "r.json", "--configs", "{2}"], "--configs {2}: the same file as --report {1}"),
    ("compare", ["--report", "r.json,{2}"], "--report {2}: the same file as --report {1}"),
    ("compare", ["--report", "r.json", "--json", "{2}"], "--json {2}: is the input --report {1}"),
    ("compare", ["--report", "r.json", "--out", "o.md", "--json", "{2}"], "--json {2}: the same file as --out {1}"),
    ("compare", ["--suite", "zoo.txt", "--out", "{2}"], "--out {2}: is the input --suite {1}"),
]
PROG = {"default_vs_tuned": "default_vs_tuned", "fit_cost_model": "fit_cost_model.py", "compare": "compare.py"}


@pytest.mark.parametrize("spelling", SPELLINGS)
@pytest.mark.parametrize("script, argv, says", SAME_FILE)
def test_one_file_given_twice_is_refused_before_any_work(capsys, monkeypatch, tmp_path, script, argv, says, spelling):
    import importlib
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    for name, text in FILES.items():
        (tmp_path / name).write_text(text)
    where = next(i for i, a in enumerate(argv) if "{2}" in a)
    first = argv[where].split(",")[0] if argv[where] != "{2}" else [a for a in argv[:where] if a in FILES][-1]
    second = SPELLINGS[spelling](first)
    before = sorted(os.listdir(tmp_path))
    module = importlib.import_module(f"bench.{script}")
    err = refused_in_one_line(capsys, module.main, [a.replace("{2}", second) for a in argv], PROG[script])
    assert says.replace("{1}", first).replace("{2}", second) in err and "allowed: " in err, err
    assert sorted(os.listdir(tmp_path)) == before                     # nothing written, no temporary file left
    assert all((tmp_path / name).read_text() == text for name, text in FILES.items())


# ------------------------------------------------ stdout of the report scripts
S7 = Path(__file__).resolve().parent.parent / "bench" / "results" / "2026-12-01_s7"
STDOUT_RUNS = {"default_vs_tuned": ["bench/default_vs_tuned.py", str(S7.parent / "2026-12-02_s13" / "call4" /
                                                                    "zoo_tune.jsonl.gz")],
               "fit_cost_model.py": ["bench/fit_cost_model.py", "--report", str(S7 / "zoo_1of2.json")],
               "compare.py": ["bench/compare.py", "--report", str(S7 / "zoo_1of2.json")]}


def _run_to(stdout, argv):
    import subprocess
    import sys
    from conftest import ROOT
    env = {**os.environ, "PYTHONPATH": ROOT}
    return subprocess.run([sys.executable, *argv], cwd=ROOT, env=env, stdout=stdout, stderr=subprocess.PIPE,
                          text=True, timeout=120)


@pytest.mark.parametrize("prog", STDOUT_RUNS)
@pytest.mark.parametrize("help_", [False, True])
def test_a_closed_pipe_ends_quietly_and_a_full_stdout_is_one_line(prog, help_):
    """``| head`` (the reader gone: EPIPE) ends quietly with 141, as dgrad-driver does (was a
    BrokenPipeError traceback); ``> /dev/full`` is one line naming stdout, exit 2 (was a
    traceback, or ``[Errno 28] ...`` without naming stdout)."""
    argv = STDOUT_RUNS[prog][:1] + ["--help"] if help_ else STDOUT_RUNS[prog]
    read, write = os.pipe()
    os.close(read)
    try:
        r = _run_to(write, argv)
    finally:
        os.close(write)
    assert (r.returncode, r.stderr) == (141, "")
    with open("/dev/full", "w") as full:
        r = _run_to(full, argv)
    assert r.returncode == 2 and r.stderr == (f"{prog}: stdout: cannot write (No space left on device); allowed: a "
                                              "writable stdout (a file with room, a pipe, a terminal)\n")


def _ptx_dir(path: Path, ptx: dict) -> Path:
    import json
    path.mkdir()
    (path / "index.json").write_text(json.dumps({name: f"fp16/fp16/n{64 * i}/s1" for i, name in enumerate(ptx, 1)}))
    for name, text in ptx.items():
        (path / f"{name}.ptx").write_text(text)
    return path


def test_ptx_diff_compare_names_what_differs(tmp_path, capsys):
    """bench/ptx_diff.py --compare: identical PTX is exit 0; a changed kernel (or a different
    kernel set) is exit 1 and named, so a text-only kernel change is checked, not assumed."""
    from bench import ptx_diff
    a = _ptx_dir(tmp_path / "a", {"001": "wgmma m64n64k16", "002": "wgmma m64n128k16"})
    same = _ptx_dir(tmp_path / "same", {"001": "wgmma m64n64k16", "002": "wgmma m64n128k16"})
    moved = _ptx_dir(tmp_path / "moved", {"001": "wgmma m64n64k16", "002": "wgmma m64n128k16 // spill"})
    fewer = _ptx_dir(tmp_path / "fewer", {"001": "wgmma m64n64k16"})
    assert ptx_diff.compare(a, same) == [] and ptx_diff.main(["--compare", str(a), str(same)]) == 0
    assert ptx_diff.compare(a, moved) == ["002 (fp16/fp16/n128/s1): PTX differs"]
    assert ptx_diff.main(["--compare", str(a), str(moved)]) == 1
    assert ptx_diff.compare(a, fewer)[0].startswith("the kernel sets differ")
    capsys.readouterr()


def test_ptx_diff_needs_one_mode(capsys):
    from bench import ptx_diff
    with pytest.raises(SystemExit) as e:
        ptx_diff.main([])
    assert e.value.code == 2 and len(capsys.readouterr().err.strip().splitlines()) == 1


def test_every_timing_script_gets_cudnn_as_compare_runs_it(monkeypatch):
    """bench/compare.gpu() sets cuDNN up for every script that times against it (benchmark
    mode on, TF32 off); time_configs.py ran cuDNN in heuristic mode, 7x slower on ViT's patch
    embedding than compare.py's cuDNN. A stand-in torch shows the settings are made before our
    engine is asked for (here it is unavailable: no GPU)."""
    import sys
    import types
    from bench import compare
    from miopen_solver.errors import RuntimeUnavailable

    def unavailable(name):
        raise RuntimeUnavailable("no GPU here")
    ns = types.SimpleNamespace
    fake = ns(__version__="0", cuda=ns(is_available=lambda: True),
              backends=ns(cudnn=ns(benchmark=False, allow_tf32=True), cuda=ns(matmul=ns(allow_tf32=True))))
    monkeypatch.setitem(sys.modules, "torch", fake)
    monkeypatch.setattr("miopen_solver.runtime.get_engine", unavailable)
    with pytest.raises(compare.BadInput, match="needs PyTorch with a CUDA GPU"):
        compare.gpu()
    assert fake.backends.cudnn.benchmark is True
    assert fake.backends.cudnn.allow_tf32 is False and fake.backends.cuda.matmul.allow_tf32 is False


def test_nchw_breakdown_times_only_layout_transforms():
    """A sub-pixel solution's transforms include its W' pack, which has no tile or band form
    (the breakdown's NHWC column failed on YOLOv5s' 3x3 stride-2 stem, whose NHWC default is
    sub-pixel, with "'PackW' object has no attribute 'rows'"): the form and pair timings
    take the layout transforms only."""
    from bench import nchw_breakdown
    from miopen_solver.command import parse
    from miopen_solver.solver import DgradSolver
    from miopen_solver.target import get_target
    from miopen_solver.transpose import LayoutTransform
    line = ("convfp16 -n 16 -c 32 -H 320 -W 320 -k 64 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 -F 2 --in_layout NHWC "
            "--out_layout NHWC --fil_layout NHWC")
    target = get_target("sm_90")
    sub = DgradSolver().find_solution(parse(line.split()).problem, target,
                                      perf_config="256,128,64,2,1,128,128,0,0,0,1,-1,4,16")
    assert len(sub.transforms) == 1 and nchw_breakdown.layout_transforms(sub) == []     # the pack alone
    nchw = DgradSolver().find_solution(parse(line.split()[:-6]).problem, target)      # MIOpen's default layout
    kept = nchw_breakdown.layout_transforms(nchw)
    assert kept == list(nchw.transforms) and all(isinstance(t, LayoutTransform) for t in kept)
