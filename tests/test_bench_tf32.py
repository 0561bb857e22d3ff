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


H200_CHECK = Path(ROOT) / "bench" / "h200_check.sh"
SETTINGS = ("STEPS", "CHECK_SECS", "GPU_TESTS_SECS", "GPU_TESTS_K", "ZOO_TUNE_SECS", "ZOO_TUNE_LOG", "ZOO_ARGS",
            "DGRAD_GPU_EXAMPLES", "TAR_TO", "OUT")


def valid_steps() -> list:
    """The step names bench/h200_check.sh takes: its VALID_STEPS, the one list it checks STEPS against."""
    import re
    return re.search(r"^VALID_STEPS=([\w,]+)$", H200_CHECK.read_text(), re.M).group(1).split(",")


def h200_check(cwd, *args, **settings):
    """bench/h200_check.sh run from ``cwd`` with only ``settings`` of its own (CHECK_SECS 0
    unless given: a check that let a setting through skips every step, never reaching a GPU)."""
    import subprocess
    env = {k: v for k, v in os.environ.items() if k not in SETTINGS}
    env.update({"CHECK_SECS": "0", **settings})
    return subprocess.run(["bash", str(H200_CHECK), *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=60)


def test_h200_check_documents_every_step_it_runs():
    """The step names STEPS takes are one list, VALID_STEPS, which the header names: every
    ``step NAME`` the script can run is in it and every name in it is a step it runs (so
    neither can drift from the other), and every bench script a step runs is in the tree."""
    import re
    text = H200_CHECK.read_text()
    header = text.split("set -uo pipefail")[0]
    assert "# subset of VALID_STEPS, set below this header" in header
    steps = set(re.findall(r"\bstep (\w+) (?:\d+|\"\$\w+\")", text)) | {"zoo_tune"}
    assert steps == set(valid_steps()) and len(valid_steps()) == len(set(valid_steps()))
    assert [name for name in valid_steps() if not re.search(rf"\b{name}\b", header)] == []   # each described
    for script in set(re.findall(r"python (bench/\w+\.py)", text)):
        assert (Path(ROOT) / script).is_file(), script


def test_h200_check_stays_inside_its_budget_and_brings_back_its_outputs(tmp_path):
    """CHECK_SECS bounds the whole script: with the budget spent every asked step is skipped
    (and counted as failed) instead of running past the device call -- zoo_tune too (with
    under 20 s left it ran under ``timeout 0``, which is no bound at all) -- and TAR_TO still
    packs the output folder."""
    import tarfile
    out, tgz = tmp_path / "out", tmp_path / "all.tgz"
    r = h200_check(tmp_path, str(out), STEPS="compare,replay,zoo_tune", TAR_TO=str(tgz))
    assert r.returncode == 3, r.stdout + r.stderr
    assert r.stdout.count("skipped: CHECK_SECS=0 spent") == 3 and r.stderr == ""
    assert tarfile.open(tgz).getnames() is not None


BAD_SETTINGS = [   # (arguments, settings, what the one line says)
    ([], {"STEPS": "bogus"}, "STEPS=bogus: unknown step 'bogus'; allowed: a comma-separated subset of {valid}"),
    ([], {"STEPS": "compare,short_K"}, "STEPS=compare,short_K: unknown step 'short_K'; allowed: a comma-separated "
                                       "subset of {valid}"),
    ([], {"STEPS": "compare,,zoo"}, "STEPS=compare,,zoo: an empty name; allowed: a comma-separated subset of {valid}"),
    ([], {"CHECK_SECS": "9m"}, "CHECK_SECS=9m: allowed: whole seconds, e.g. 540"),
    ([], {"CHECK_SECS": "abc", "TAR_TO": "all.tgz"}, "CHECK_SECS=abc: allowed: whole seconds, e.g. 540"),
    ([], {"CHECK_SECS": "12345678901"}, "CHECK_SECS=12345678901: allowed: whole seconds, e.g. 540"),
    ([], {"GPU_TESTS_SECS": "1e3"}, "GPU_TESTS_SECS=1e3: allowed: whole seconds, e.g. 420"),
    ([], {"ZOO_TUNE_SECS": "-5"}, "ZOO_TUNE_SECS=-5: allowed: whole seconds, e.g. 480"),
    ([], {"DGRAD_GPU_EXAMPLES": "x"}, "DGRAD_GPU_EXAMPLES=x: allowed: a whole number of problems, e.g. 40"),
    ([], {"ZOO_TUNE_LOG": "missing.jsonl.gz"}, "ZOO_TUNE_LOG=missing.jsonl.gz: not a readable file; allowed: "),
    ([], {"ZOO_TUNE_LOG": "sub"}, "ZOO_TUNE_LOG=sub: not a readable file; allowed: "),
    ([], {"TAR_TO": "notes.txt"}, "TAR_TO=notes.txt: an existing file not named .tgz or .tar.gz (the archive would "
                                  "replace it); allowed: a new path or a .tgz/.tar.gz file"),
    ([], {"TAR_TO": "missing/all.tgz"}, "TAR_TO=missing/all.tgz: not a file in an existing, writable directory; "
                                        "allowed: a .tgz path, e.g. TAR_TO=$OUT/all.tgz"),
    ([], {"TAR_TO": "sub"}, "TAR_TO=sub: not a writable file; allowed: "),
    (["notes.txt"], {}, "OUT_DIR {tmp}/notes.txt: cannot be created or written ({tmp}/notes.txt is not a writable "
                        "directory); allowed: a writable directory"),
    (["out", "more"], {}, "2 arguments (out more): allowed: at most one, the OUT_DIR"),
]


@pytest.mark.parametrize("args, settings, says", BAD_SETTINGS)
def test_h200_check_refuses_a_bad_setting_before_anything_runs_or_is_made(tmp_path, args, settings, says):
    """Every setting is checked before any step runs and before OUT_DIR or a TAR_TO file is
    made (a bad CHECK_SECS left a 0-byte TAR_TO and an OUT_DIR; an unknown STEPS name ran
    nothing and exited 0; GPU_TESTS_SECS, ZOO_TUNE_SECS, DGRAD_GPU_EXAMPLES and ZOO_TUNE_LOG
    failed only in their step; TAR_TO replaced any file, bench/h200_check.sh itself in the
    trial): one line on stderr naming the setting, its value and what is allowed, exit 2."""
    (tmp_path / "notes.txt").write_text("keep")
    (tmp_path / "sub").mkdir()
    before = sorted(p.name for p in tmp_path.iterdir())
    r = h200_check(tmp_path, *(args or ["out"]), **settings)
    want = says.replace("{valid}", ",".join(valid_steps())).replace("{tmp}", str(tmp_path))
    assert (r.returncode, r.stdout) == (2, ""), r.stdout + r.stderr
    assert r.stderr.count("\n") == 1 and r.stderr.startswith(f"h200_check: {want}"), r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before and (tmp_path / "notes.txt").read_text() == "keep"
    assert not list((tmp_path / "sub").iterdir())


def test_h200_check_takes_relative_paths_from_the_caller_and_replaces_the_archive_whole(tmp_path):
    """A relative OUT_DIR and TAR_TO are the caller's (they were taken from the repository
    root, where the script works); an existing .tgz is replaced by the new archive, which never
    packs itself or its temporary file, and no temporary file is left; TAR_TO inside OUT_DIR
    (the header's example) with OUT_DIR not made yet is fine; CHECK_SECS with a leading zero is
    decimal."""
    import tarfile
    assert not (Path(ROOT) / "rel_out").exists()
    r = h200_check(tmp_path, "rel_out", STEPS="compare", TAR_TO="rel_out/all.tgz", CHECK_SECS="08")
    assert r.returncode == 1 and "skipped: CHECK_SECS=8 spent" in r.stdout, r.stdout + r.stderr
    assert not (Path(ROOT) / "rel_out").exists() and tarfile.open(tmp_path / "rel_out" / "all.tgz").getnames()
    out = tmp_path / "rel_out"
    (out / "a.txt").write_text("x")
    (tmp_path / "old.tgz").write_text("old")
    for tar_to in ("rel_out/all.tgz", "old.tgz"):
        r = h200_check(tmp_path, "rel_out", STEPS="compare", TAR_TO=tar_to)
        assert r.returncode == 1 and f"outputs: {tmp_path / tar_to}" in r.stdout, r.stdout + r.stderr
        names = tarfile.open(tmp_path / tar_to).getnames()
        assert "./a.txt" in names and not [n for n in names if Path(tar_to).name in n or n.endswith(".tmp")], names
    assert not [p for d in (tmp_path, out) for p in d.iterdir() if p.name.endswith(".tmp")]


FAKE_PYTHON = """#!/bin/sh
case "$*" in
    *"-m driver tune"*) echo tune >> "$FAKE_CALLS"; exit "$FAKE_TUNE_RC" ;;
    *default_vs_tuned*) echo table >> "$FAKE_CALLS"; exit "$FAKE_TABLE_RC" ;;
esac
exit 0
"""


@pytest.mark.parametrize("tune_rc, table_rc, failed", [
    (0, 0, 0), (130, 0, 0), (124, 0, 0),       # done, or stopped by the time bound: resumed by the next call
    (3, 0, 1), (137, 0, 1), (2, 0, 1),         # the tune failed (or would not stop)
    (130, 2, 1), (3, 2, 2),                    # the table failed
])
def test_h200_check_counts_a_failed_zoo_tune(tmp_path, tune_rc, table_rc, failed):
    """The zoo_tune step's failures count in the exit status as every other step's do (they
    were printed and the script exited 0): the tune failing other than by its time bound
    (124 from timeout, 130 from the tune's own SIGINT handling), the default_vs_tuned table
    failing, and a ZOO_TUNE_LOG that cannot be unpacked (the tune is then not run). A stand-in
    python answers for both, no GPU reached."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "python").write_text(FAKE_PYTHON)
    (bindir / "python").chmod(0o755)
    calls = tmp_path / "calls"
    env = {"PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}", "FAKE_CALLS": str(calls), "FAKE_TUNE_RC": str(tune_rc),
           "FAKE_TABLE_RC": str(table_rc), "STEPS": "zoo_tune", "CHECK_SECS": "200", "ZOO_TUNE_SECS": "30"}
    r = h200_check(tmp_path, "out", **env)
    assert r.returncode == failed, r.stdout + r.stderr
    assert calls.read_text().split() == ["tune", "table"]
    assert f"zoo_tune: exit {tune_rc} " in r.stdout and ("!! zoo_tune failed" in r.stdout) == (tune_rc not in (0, 124, 130))
    if tune_rc == 3 and table_rc == 2:
        calls.unlink()
        (tmp_path / "bad.jsonl.gz").write_text("not gzip")
        r = h200_check(tmp_path, "out2", ZOO_TUNE_LOG="bad.jsonl.gz", **env)
        assert r.returncode == 1 and "!! zoo_tune: ZOO_TUNE_LOG=" in r.stdout and not calls.exists()
        assert not (tmp_path / "out2" / "zoo_tune.jsonl").exists()
