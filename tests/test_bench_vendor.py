"""The GPU-only bench scripts of the eighth session (bench/time_configs.py,
bench/vendor_kernels.py) refuse bad input in one line before any GPU work, and need a GPU
(PyTorch with CUDA) only after their input checks."""

from __future__ import annotations

import pytest

from bench import time_configs, vendor_kernels
from miopen_solver.config import KernelSchedule
from conftest import refused_in_one_line

CFG = "128,128,32,2,1,64,128,0,0,0,1,-1,4,1"


@pytest.mark.parametrize("argv,says", [
    (["--only", "k32_", "--configs", "1,2"], "--configs entry '1,2': perf config has 2 fields"),
    (["--only", "k32_", "--configs", f"{CFG};x"], "--configs entry 'x': perf config field tile_m='x'"),
    (["--only", "k32_", "--configs", ";;"], "--configs ';;': allowed: 1 to 64 perf configs"),
    (["--only", "k32_", "--configs", ";".join([CFG] * 65)], "allowed: 1 to 64 perf configs"),
    (["--only", "no_such_layer", "--configs", CFG], "--only 'no_such_layer': selects no line"),
    (["--only", "k32_", "--configs", CFG, "--suite", "/nonexistent/zoo.txt"], "--suite "),
    (["--only", "k32_", "--configs", CFG, "--out", "/nonexistent/dir/x.md"], "--out "),
    (["--only", "k32_", "--configs", CFG, "--launches", "0"], "--launches"),
    (["--configs", CFG], "--only"),
    (["--only", "k32_", "--configs", CFG, "--shard", "3/2"], "--shard"),
    (["--only", "k32_", "--configs", "default+streams"], "--configs entry 'default+streams'"),
    (["--only", "k32_", "--configs", "default@"], "--configs entry 'default@'"),
    (["--only", "k32_", "--configs", "default@123"], "--configs entry 'default@123'"),
    (["--only", "k32_", "--configs", f"default@{len(KernelSchedule)}"],
     f"--configs entry 'default@{len(KernelSchedule)}': allowed: default+stream, default@N with N a kernel schedule "
     f"code (0-{len(KernelSchedule) - 1})"),
    (["--only", "k32_", "--configs", "Default@8"], "allowed: default+stream, default@N"),
    # an output that is the suite read would replace it
    (["--only", "k32_", "--configs", CFG, "--out", "bench/zoo.txt"], "--out bench/zoo.txt: is the input --suite"),
    (["--only", "k32_", "--configs", CFG, "--json", "bench/zoo.txt"], "--json bench/zoo.txt: is the input --suite"),
])
def test_time_configs_refuses_bad_input_in_one_line(capsys, argv, says):
    assert says in refused_in_one_line(capsys, time_configs.main, argv, "time_configs.py")


def test_time_configs_needs_a_gpu_only_after_the_checks(capsys, monkeypatch):
    import bench.compare as compare
    monkeypatch.setattr(time_configs, "gpu", lambda: (_ for _ in ()).throw(compare.BadInput("needs PyTorch")))
    err = refused_in_one_line(capsys, time_configs.main, ["--only", "k32_,c32_k", "--configs", CFG],
                              "time_configs.py")
    assert "needs PyTorch" in err


@pytest.mark.parametrize("argv,says", [
    (["--only", "no_such_layer"], "--only 'no_such_layer': selects no line"),
    (["--shard", "3/2"], "--shard"),
    (["--dtypes", "fp8"], "--dtypes"),
    (["--out", "/nonexistent/dir/x.md"], "--out "),
    (["--suite", "/nonexistent/zoo.txt"], "--suite "),
])
def test_vendor_kernels_refuses_bad_input_in_one_line(capsys, argv, says):
    assert says in refused_in_one_line(capsys, vendor_kernels.main, argv, "vendor_kernels.py")


def test_direct_sass_refuses_an_unknown_policy_in_one_line(capsys):
    """(its other bad input: tests/test_bench_cli.py)"""
    from bench import direct_sass
    err = refused_in_one_line(capsys, direct_sass.main, ["--policies", "v8_nope"], "direct_sass.py")
    assert "--policies 'v8_nope': unknown; allowed: a comma list of v8_p4x2_t256_l1_s1" in err


def test_stream_table_prints_each_row_and_writes_both_outputs(tmp_path, capsys):
    import json
    from bench.compare import stream_table
    rows = iter([({"a": 1}, ["| x |"]), ({"a": 2}, ["| y |", "| z |"])])
    stream_table(rows, ["| h |", "|---|"], tmp_path / "r.json", tmp_path / "r.md")
    assert capsys.readouterr().out == "| x |\n| y |\n| z |\n"
    assert (tmp_path / "r.md").read_text() == "| h |\n|---|\n| x |\n| y |\n| z |\n"
    assert json.loads((tmp_path / "r.json").read_text()) == [{"a": 1}, {"a": 2}]


def test_time_configs_shards_the_selected_lines(monkeypatch):
    """``--shard K/N`` keeps every N-th selected line from the K-th (after the checks, before
    any GPU work): the lines the timing gets, seen by a stub in its place."""
    import bench.compare as compare
    seen = []
    monkeypatch.setattr(time_configs, "gpu", lambda: (None, None))
    monkeypatch.setattr(time_configs, "_timed", lambda torch, eng, chosen, configs, args: seen.extend(chosen) or iter(()))
    monkeypatch.setattr(time_configs, "stream_table", lambda rows, *a: list(rows))
    plan = compare.plan_rows(compare.read_suite("bench/stream_k_lines.txt"), compare.AS_WRITTEN)
    assert time_configs.main(["--suite", "bench/stream_k_lines.txt", "--only", "_", "--configs", "default+stream",
                              "--shard", "2/3"]) == 0
    assert [c["label"] for c in seen] == [r["label"] for r in plan][1::3]


@pytest.mark.parametrize("line,code", [
    ("convfp16 -n 32 -c 256 -H 56 -W 56 -k 64 -y 1 -x 1 -F 2", 18),
    ("convfp16 -n 32 -c 256 -H 56 -W 56 -k 64 -y 1 -x 1 -F 2", 8),
    ("convfp16 -n 32 -c 64 -H 56 -W 56 -k 64 -y 3 -x 3 -p 1 -q 1 -F 2 --in_layout NHWC --out_layout NHWC "
     "--fil_layout NHWC", 3),
])
def test_default_at_a_schedule_is_the_default_tile_with_that_schedule(line, code):
    """``default@N``: each field of the line's default config kept but the schedule (the
    14th), set to N; the 15th (split-K reduction) kept when it is not 0."""
    from miopen_solver.command import parse
    from miopen_solver.solver import DgradSolver
    from miopen_solver.target import get_target
    p, sm90 = parse(line).problem, get_target("sm_90")
    default = DgradSolver().get_default_performance_config(p, sm90).serialize().split(",")
    got = time_configs.default_on_schedule(p, sm90, code)
    assert got.split(",")[:13] == default[:13] and got.split(",")[13:] == [str(code)] + default[14:15]


@pytest.mark.parametrize("argv,says", [
    (["--suite", "{empty}"], "--suite {empty}: no lines"),
    (["--only", "no_such_layer"], "--only 'no_such_layer': selects no line of bench/zoo.txt; allowed: a label substring"),
    (["--shard", "3/2"], "--shard"),
    (["--out", "/nonexistent/dir/x.md"], "--out "),
    (["--suite", "/nonexistent/zoo.txt"], "--suite "),
    ([], "needs PyTorch"),
])
def test_nchw_dx_choice_refuses_bad_input_in_one_line(capsys, monkeypatch, tmp_path, argv, says):
    """bench/nchw_dx_choice.py checks its input first, then needs a GPU (stubbed: no PyTorch)."""
    import bench.compare as compare
    from bench import nchw_dx_choice
    empty = tmp_path / "empty.txt"
    empty.write_text("# nothing\n")
    monkeypatch.setattr(nchw_dx_choice, "gpu", lambda: (_ for _ in ()).throw(compare.BadInput("needs PyTorch")))
    argv = [a.replace("{empty}", str(empty)) for a in argv]
    assert says.replace("{empty}", str(empty)) in refused_in_one_line(capsys, nchw_dx_choice.main, argv,
                                                                       "nchw_dx_choice.py")
