"""bench/tf32_h200.py without a GPU: its plan (the suite re-based to fp32, the zoo's fp32 lines),
the -M 0 lines it times, the --dry-run listing on sm_90 (every row's TF32 and IEEE kernels as
the solver picks them), the report on made-up times, bad input refused in one line before any
GPU work; bench/h200_check.sh names the step."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import ROOT, refused_in_one_line
from bench import tf32_h200
from miopen_solver.command import parse

SUITE = Path(ROOT) / "bench" / "suite.txt"
ZOO = Path(ROOT) / "bench" / "zoo.txt"


def test_plan_rows_are_fp32_suite_and_zoo_lines():
    rows = tf32_h200.plan(SUITE, ZOO)
    assert [r["source"] for r in rows].count("suite") == 14
    assert [r["source"] for r in rows].count("zoo") == sum(1 for l in ZOO.read_text().splitlines()
                                                           if l.startswith("conv "))
    for r in rows:
        p = parse(r["cmd"]).problem
        assert p.dtype == "fp32" and not p.tf32
        assert parse(tf32_h200.mode_line(r["cmd"], "tf32")).problem.tf32
        assert not parse(tf32_h200.mode_line(r["cmd"], "ieee")).problem.tf32


def test_dry_run_plans_tf32_and_ieee_kernels(capsys):
    assert tf32_h200.main(["--dry-run"]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = tf32_h200.plan(SUITE, ZOO)
    assert len(out) == 2 * len(rows) and not any("refused" in l for l in out)
    tf32 = [l for l in out if " tf32: " in l]
    ieee = [l for l in out if " ieee: " in l]
    assert all("_cxTF32" in l for l in tf32) and not any("_cxTF32" in l for l in ieee)
    # every GEMM row runs the TF32 atom; the depthwise row keeps the direct schedule (IEEE)
    assert all("math=tf32" in l and "mma1688tf32" in l for l in tf32 if "dgrad_direct_" not in l)
    assert sum("math=fp32" in l for l in tf32) == sum("dgrad_direct_" in l for l in tf32) == 1
    assert all("math=fp32" in l and "tolerance=1.5e-05" in l for l in ieee)


def test_dry_run_with_wgmma_plans_warpgroup_tf32_where_it_applies(capsys):
    """``--wgmma``: rows whose fp16 twin would take warpgroup MMA (cpg > 32, kpg >= 64) run the
    warpgroup TF32 kernel, the others keep their TF32 default; the IEEE rows are unchanged."""
    from miopen_solver.heuristics import tf32_wgmma_config
    from miopen_solver.target import get_target
    from miopen_solver.transpose import native_problem
    assert tf32_h200.main(["--dry-run", "--wgmma"]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = tf32_h200.plan(SUITE, ZOO)
    tf32 = [l for l in out if " tf32: " in l]
    assert len(tf32) == len(rows) and not any("refused" in l for l in out)
    for r, line in zip(rows, tf32):
        p = native_problem(tf32_h200.parse(tf32_h200.mode_line(r["cmd"], "tf32")).problem)
        wg = tf32_wgmma_config(p, get_target("sm_90")) is not None
        assert ("x8tf32_" in line) is wg, line
        assert ("config=" + tf32_wgmma_config(p, get_target("sm_90")).serialize()) in line if wg else True
    assert sum("x8tf32_" in l for l in tf32) >= 10


def test_report_on_made_up_times():
    rows = [{"label": "a", "source": "suite", "line": "conv",
             "tf32": {"ours_ms": 1.0, "cudnn_ms": 2.0, "ratio": 2.0, "config": "x"},
             "ieee": {"ours_ms": 4.0, "cudnn_ms": 2.0, "ratio": 0.5}, "tf32_speedup": 4.0},
            {"label": "b", "source": "zoo", "line": "conv",
             "tf32": {"ours_error": "failed: boom", "cudnn_ms": 1.0},
             "ieee": {"ours_ms": 1.0, "cudnn_ms": 1.0, "ratio": 1.0}, "tf32_speedup": None}]
    text = tf32_h200.render(rows, "## head\n")
    assert "tf32: geometric-mean ratio cuDNN/ours = **2.00** over 1 rows" in text
    assert "ieee: geometric-mean ratio cuDNN/ours = **0.71** over 2 rows" in text
    assert "TF32 speed-up over IEEE fp32, geometric mean **4.00** over 1 rows" in text
    assert "tf32 ours_error: failed: boom" in text


def test_h200_check_has_a_tf32_step():
    text = (Path(ROOT) / "bench" / "h200_check.sh").read_text()
    assert "step tf32 " in text and "tests/test_gpu_tf32.py" in text and "bench/tf32_h200.py" in text
    header = text.split("set -uo pipefail")[0]
    assert "tf32:" in header


@pytest.mark.parametrize("argv,says", [
    (["--suite", "/nonexistent/suite.txt", "--dry-run"], "--suite/--zoo /nonexistent/suite.txt: cannot read"),
    (["--dry-run", "--arch", "nonsense"], "--arch unknown arch 'nonsense'"),
    (["--arch", "nonsense"], "--arch unknown arch 'nonsense'"),                  # before any torch import
    (["--dry-run", "--only", "zzz"], "--only 'zzz': matches no row label"),
    (["--only", "zzz"], "--only 'zzz': matches no row label"),
    (["--dry-run", "--arch", "sm_80", "--wgmma"], "--wgmma: sm_80 has no warpgroup MMA"),
    (["--out", "/nonexistent/dir/t.md"], "--out /nonexistent/dir/t.md"),
    (["--launches", "0"], "--launches 0: allowed: an integer >= 1"),
    (["--launches", "x"], "argument --launches: invalid int value"),
])
def test_bad_input_is_one_line_before_any_gpu_work(capsys, argv, says):
    assert says in refused_in_one_line(capsys, tf32_h200.main, argv, "tf32_h200.py")


def test_a_timing_run_without_torch_says_so_in_one_line(capsys, monkeypatch):
    import builtins
    real_import = builtins.__import__

    def no_torch(name, *a, **k):
        if name == "torch":
            raise ImportError("No module named 'torch'")
        return real_import(name, *a, **k)
    monkeypatch.setattr(builtins, "__import__", no_torch)
    err = refused_in_one_line(capsys, tf32_h200.main, ["--only", "r50_3x3_c64"], "tf32_h200.py")
    assert "needs PyTorch with a CUDA GPU" in err


def test_h200_check_documents_every_step_it_runs():
    """Every ``step NAME`` bench/h200_check.sh can run is named in its STEPS list (the header
    a session reads to plan its device calls), and every bench script a step runs is in the
    tree."""
    import re
    text = (Path(ROOT) / "bench" / "h200_check.sh").read_text()
    listed = re.search(r"# subset of ([\w,\s#]+?);", text).group(1)
    names = {n.strip().lstrip("#").strip() for n in listed.replace("\n", ",").split(",")} - {""}
    steps = set(re.findall(r"\bstep (\w+) \d+", text)) | {"zoo_tune"}
    assert steps <= names, steps - names
    for script in set(re.findall(r"python (bench/\w+\.py)", text)):
        assert (Path(ROOT) / script).is_file(), script


def test_h200_check_stays_inside_its_budget_and_brings_back_its_outputs(tmp_path):
    """CHECK_SECS bounds the whole script: with the budget spent every asked step is skipped
    (and counted as failed) instead of running past the device call, and TAR_TO still packs
    the output folder; a CHECK_SECS that is not whole seconds is one line and exit 2."""
    import subprocess
    import tarfile
    script = str(Path(ROOT) / "bench" / "h200_check.sh")
    out, tgz = tmp_path / "out", tmp_path / "all.tgz"
    env = {**os.environ, "STEPS": "compare,replay", "CHECK_SECS": "0", "TAR_TO": str(tgz)}
    r = subprocess.run(["bash", script, str(out)], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stdout.count("skipped: CHECK_SECS=0 spent") == 2
    assert tarfile.open(tgz).getnames() is not None
    r = subprocess.run(["bash", script, str(out)], env={**env, "CHECK_SECS": "9m"}, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and r.stdout.strip() == "h200_check: CHECK_SECS=9m: allowed: whole seconds, e.g. 540"


def test_h200_check_refuses_a_bad_tar_to_before_any_step_and_never_packs_the_archive(tmp_path):
    """A TAR_TO that cannot be written is one line and exit 2 before any step runs (it was
    found only by tar at the end, and the exit status ignored it); TAR_TO inside OUT_DIR (the
    header's example) does not pack itself; CHECK_SECS with a leading zero is decimal."""
    import subprocess
    import tarfile
    script = str(Path(ROOT) / "bench" / "h200_check.sh")
    out = tmp_path / "out"
    env = {**os.environ, "STEPS": "compare", "CHECK_SECS": "0"}
    for bad in (str(tmp_path / "missing" / "all.tgz"), str(tmp_path)):
        r = subprocess.run(["bash", script, str(out)], env={**env, "TAR_TO": bad}, capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 2, r.stdout + r.stderr
        assert r.stdout.strip().splitlines() == [f"h200_check: TAR_TO={bad}: not a file in an existing, writable "
                                                 f"directory; allowed: a .tgz path, e.g. TAR_TO=$OUT/all.tgz"]
    (out / "a.txt").write_text("x")
    r = subprocess.run(["bash", script, str(out)], env={**env, "TAR_TO": str(out / "all.tgz"), "CHECK_SECS": "08"},
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "skipped: CHECK_SECS=8 spent" in r.stdout, r.stdout + r.stderr
    names = tarfile.open(out / "all.tgz").getnames()
    assert "./a.txt" in names and "./all.tgz" not in names
