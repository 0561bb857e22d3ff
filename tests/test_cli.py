"""dgrad-driver: printed lines, exit codes, one-line errors (CPU engine)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import numpy as np
import pytest
from click.testing import CliRunner

from conftest import ROOT
from driver import report
from driver.cli import cli, main
from miopen_solver import layouts, prng
from miopen_solver.command import parse
from miopen_solver.reference import Verdict
from miopen_solver.runtime.base import Timing
from miopen_solver.runtime.cpu import CpuEngine

NHWC = "--in_layout NHWC --out_layout NHWC --fil_layout NHWC"
MAIN = ("convfp16 -n 32 -c 64 -H 56 -W 56 -k 64 -y 3 -x 3 -p 1 -q 1 -u 1 -v 1 -l 1 -j 1 -g 1 -F 2 "
        f"-t 1 -V 1 {NHWC}")
SMALL = ("convfp16 -n 2 -c 8 -H 9 -W 7 -k 12 -y 3 -x 3 -p 1 -q 1 -u 2 -v 1 -l 1 -j 1 -g 1 -F 2 "
         f"-t 1 -V 1 {NHWC}")
KTIME = re.compile(r"^GPU Kernel Time Backward Data Conv\. Elapsed: \d+\.\d{6} ms \(average\)$")
OK = re.compile(r"^Backward Convolution Data Verifies OK on CPU reference \(\S+ < (\S+)\)$")


def run(capsys, line, *extra, env=None, monkeypatch=None):
    """main() on a line; returns (status, stdout lines, stderr lines)."""
    status = main(line.split() + list(extra))
    out, err = capsys.readouterr()
    return status, out.splitlines(), err.splitlines()


@pytest.fixture(autouse=True)
def default_seed(monkeypatch):
    monkeypatch.delenv(prng.SEED_ENV, raising=False)


def test_small_line_prints_what_miopendriver_prints(capsys):
    status, out, err = run(capsys, SMALL, "--backend", "cpu")
    assert status == 0 and err == []
    assert out[0] == "MIOpenDriver " + SMALL
    assert out[1] == "PRNG seed: 12345678"
    assert out[2] == "MIOpen Backward Data Conv. Algorithm: 5, Solution: 200/ConvDgradImplicitGemmTilde"
    assert KTIME.match(out[3])
    assert out[4] == ("stats: name, n, c, ho, wo, x, y, k, flopCnt, bytesRead, bytesWritten, GFLOPs, "
                      "GB/s, timeMs")
    # values in MIOpen's real order n, c, Y, X, K, Ho, Wo (Ho = 5, Wo = 7 here)
    fields = out[5].split(", ")
    assert fields[:8] == ["stats: bwdd-conv3x3u2", "2", "8", "3", "3", "12", "5", "7"]
    flop = 2 * 2 * 8 * 3 * 3 * 12 * 5 * 7
    assert fields[8] == f" {flop}"                                 # MIOpen prints two spaces
    assert fields[9:11] == [str(2 * 8 * 12 * 2 + 12 * 8 * 9 * 2), str(2 * 12 * 5 * 7 * 2)]
    assert float(fields[13]) == pytest.approx(float(out[3].split()[-3]))
    m = OK.match(out[6])
    assert m and m.group(1) == "0.082"
    assert len(out) == 7


def test_main_line_under_ten_seconds():
    """The issue's headline: the exact main line on the CPU engine, as a user runs it."""
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "driver"] + MAIN.split() + ["--backend", "cpu"],
                          capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})
    elapsed = time.perf_counter() - t0
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "MIOpenDriver " + MAIN and OK.match(lines[-1])
    assert lines[-2].startswith("stats: bwdd-conv3x3u1, 32, 64, 3, 3, 64, 56, 56,  7398752256, ")
    assert elapsed < 10, f"main line took {elapsed:.1f} s"


def test_time_off_prints_no_timing(capsys):
    status, out, _ = run(capsys, SMALL.replace("-t 1", "-t 0"))
    assert status == 0 and len(out) == 3 and OK.match(out[2])


def test_verify_off(capsys):
    status, out, _ = run(capsys, SMALL.replace("-V 1", "-V 0"))
    assert status == 0 and not any("Verif" in x for x in out)


def test_wall_clock(capsys):
    status, out, _ = run(capsys, SMALL, "-w", "1")
    assert status == 0
    assert re.match(r"^Wall-clock Time Backward Data Conv\. Elapsed: \S+ ms, Auxiliary API calls: "
                    r"\S+ ms \(GWSS: 0\)$", out[2])
    status, out, _ = run(capsys, SMALL.replace("-t 1", "-t 0"), "-w", "1")
    assert out[2] == "Info: '--wall 1' is ignored because '--time' is not set"


def test_iterations_are_timed(capsys, monkeypatch):
    seen = {}
    real = CpuEngine.time

    def spy(self, spec, dy, w, iters, warmup=1):
        seen["iters"], seen["warmup"] = iters, warmup
        return real(self, spec, dy, w, iters, warmup)
    monkeypatch.setattr(CpuEngine, "time", spy)
    assert run(capsys, SMALL, "-i", "3")[0] == 0
    assert seen == {"iters": 3, "warmup": 0}


def test_seed_from_environment(capsys, monkeypatch):
    monkeypatch.setenv(prng.SEED_ENV, "42")
    assert run(capsys, SMALL)[1][1] == "PRNG seed: 42"


def test_verification_failure_exits_nonzero(capsys, monkeypatch):
    # MIOpen prints FAILED and still exits 0 (0x200 wraps); we exit 1.
    monkeypatch.setattr(CpuEngine, "run", lambda self, spec, dy, w: np.zeros(
        layouts.dx_shape(spec.problem), layouts.storage_dtype(spec.problem.dtype)))
    status, out, _ = run(capsys, SMALL)
    assert status == 1
    assert re.match(r"^Backward Convolution Data FAILED: \S+ > 0\.082$", out[-1])


def test_unwritten_output_fails_verification(capsys, monkeypatch):
    def leaky(self, spec, dy, w):
        dx = real(self, spec, dy, w)
        dx.reshape(-1)[3] = np.nan
        return dx
    real = CpuEngine.run
    monkeypatch.setattr(CpuEngine, "run", leaky)
    status, out, _ = run(capsys, SMALL)
    assert status == 1 and out[-1].startswith("Backward Convolution Data FAILED: nan > ")


@pytest.mark.parametrize("line,needle", [
    ("conv -n 2 -F 1", "-F '1'"),
    ("conv -n 2", "forward, backward data and backward weights"),
    ("conv -n 2 -F 2 -Q 5", "-Q"),
    ("conv -n 2 -F 2 -n", "missing value"),
    ("conv -n abc -F 2", "an integer"),
    ("conv -n 2 -F 2 -i 0", "-i '0'"),
    ("conv -n 2 -c 6 -k 4 -g 4 -F 2", "-g '4'"),
    ("conv -n 2 -F 2 -H 2 -y 5", "derived Ho=-2"),
    ("convint8 -n 2 -F 2", "int8"),
    ("conv -n 2 -F 2 --out_layout NHWC", "LAYOUT"),                  # mixed layouts
    ("conv -n 2 -F 2 -_ 3", "SPATIAL_DIM"),
    ("conv -n 2 -F 2 -m trans", "-m trans"),
    ("conv -n 2 -F 2 -U fp16", "cast types"),
    ("conv -n 2 -F 2 --backend nope", "--backend"),
    ("conv -n 2 -F 2 --perf-config 1,2,3", "13"),
    ("conv -n 2 -F 2 --perf-config 64,64,32,2,2,32,32,0,0,0,0,-1,2", "split_k"),
    ("conv -n 2 -F 2 --arch gfx1234", "gfx1234"),
    ("conv -n 2 -F 2 -D /nonexistent/dy.bin", "-D"),
    ("", "missing the MIOpenDriver line"),
])
def test_user_errors_are_one_line_exit_2(capsys, line, needle):
    args = ["run"] if line == "" else []
    status = main(args + line.split())
    out, err = capsys.readouterr()
    assert status == 2
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("dgrad-driver: error: ")
    assert needle in lines[0]
    assert "Traceback" not in err


def test_unavailable_gpu_backend_is_a_user_error(capsys):
    from miopen_solver.errors import RuntimeUnavailable
    from miopen_solver.runtime import get_engine
    try:
        get_engine("hip")
    except RuntimeUnavailable:
        status = main(SMALL.split() + ["--backend", "hip"])
        err = capsys.readouterr().err.splitlines()
        assert status == 2 and len(err) == 1 and err[0].startswith("dgrad-driver: error: ")
    else:  # pragma: no cover - a machine with ROCm
        pytest.skip("a HIP device is present")


def test_json_record(capsys):
    status, out, _ = run(capsys, SMALL, "--json")
    assert status == 0 and len(out) == 1
    rec = json.loads(out[0])
    assert rec["status"] == "ok" and rec["backend"] == "cpu" and rec["arch"] == "cpu"
    assert rec["solver"] == "ConvDgradImplicitGemmTilde" and rec["solution_id"] == 200
    assert rec["problem_key"] == parse(SMALL).problem.problem_key()
    assert rec["verify"]["ok"] and rec["timing"]["method"] == "wall"
    assert len(rec["timing"]["times_ms"]) == 10 and rec["seed"] == 12345678
    assert rec["stats"]["flop_count"] == parse(SMALL).problem.flops


def test_print_name_only(capsys):
    status, out, _ = run(capsys, SMALL, "--print-name-only")
    assert status == 0 and len(out) == 1 and out[0].startswith("dgrad_")


def test_arch_and_perf_config(capsys):
    cfg = "64,64,32,2,2,32,32,0,0,0,3,-1,2"                        # split_k 3 on the CPU engine
    status, out, _ = run(capsys, SMALL, "--perf-config", cfg)
    assert status == 0 and OK.match(out[-1])
    status, out, _ = run(capsys, SMALL, "--arch", "gfx942", "--print-name-only")
    assert status == 0 and "gfx942" in out[0]
    status, out, _ = run(capsys, SMALL, "--arch", "gfx942", "--backend", "cpu")
    assert status == 0 and OK.match(out[-1])


def test_program_prefix_and_quoted_line(capsys):
    status, out, _ = run(capsys, "./bin/MIOpenDriver " + SMALL)
    assert status == 0 and out[0] == "MIOpenDriver " + SMALL
    assert main([SMALL]) == 0                                      # the whole line as one argument
    assert capsys.readouterr().out.splitlines()[0] == "MIOpenDriver " + SMALL


def test_options_anywhere(capsys):
    status = main(["--json", "--backend", "cpu"] + SMALL.split())
    assert status == 0 and json.loads(capsys.readouterr().out)["status"] == "ok"


def test_input_files_and_dumps(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = SMALL + " -o 1"
    status, out, _ = run(capsys, line)
    assert status == 0
    assert "Wrote output to file dump_wei.bin" in out and "Wrote output to file dump_bwd_din_gpu.bin" in out
    p = parse(SMALL).problem
    inp = prng.generate_inputs(p)
    assert np.array_equal(np.fromfile("dump_dout.bin", np.float16), inp.dy.ravel())
    # feed W and dY back through -e / -D: same numbers, same result
    status, out2, _ = run(capsys, SMALL, "-e", "dump_wei.bin", "-D", "dump_dout.bin")
    assert status == 0 and out2[-1] == out[-1]
    np.zeros(5, np.float16).tofile("short.bin")
    status, _, err = run(capsys, SMALL, "-e", "short.bin")
    assert status == 2 and "holds 5 elements" in err[0]


def test_help_and_version():
    r = CliRunner().invoke(cli, ["--help"])
    assert r.exit_code == 0 and "run" in r.output
    r = CliRunner().invoke(cli, ["run", "--help"])
    assert r.exit_code == 0 and "--backend" in r.output and "--print-name-only" in r.output
    assert CliRunner().invoke(cli, ["--version"]).exit_code == 0
    assert main([]) == 0


def test_clirunner_routes_miopen_lines_to_run():
    r = CliRunner().invoke(cli, SMALL.split())
    assert r.exit_code == 0 and "Verifies OK" in r.output


def test_solver_subcommands_registered():
    assert {"run", "applicable", "config"} <= set(cli.commands)


def test_console_script_module():
    proc = subprocess.run([sys.executable, "-m", "driver", "conv", "-n", "2", "-F", "1"],
                          capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("dgrad-driver: error: -F")


# ------------------------------------------------------------------ report formats
def test_stats_line_reproduces_miopen_issue_1206():
    p = parse("conv -n 32 -c 256 -H 38 -W 38 -k 256 -y 1 -x 1 -p 0 -q 0 -u 1 -v 1 -l 1 -j 1 -m conv "
              "-g 1 -t 1 -F 2 -i 1").problem
    assert report.stats_lines(p, 0.213032) == [
        report.STATS_HEADER,
        "stats: bwdd-conv1x1u1, 32, 256, 1, 1, 256, 38, 38,  6056574976, 8650752, 47316992, 28430, 263, 0.213032"]


def test_verify_lines_use_iostream_formatting():
    ok = Verdict(ok=True, error=0.0, tolerance=1.5e-6, elements=1, nonfinite=0, max_abs_diff=0.0)
    assert report.verify_line(ok) == "Backward Convolution Data Verifies OK on CPU reference (0 < 1.5e-06)"
    bad = Verdict(ok=False, error=0.220731, tolerance=1.5e-05, elements=1, nonfinite=0, max_abs_diff=1.0)
    assert report.verify_line(bad) == "Backward Convolution Data FAILED: 0.220731 > 1.5e-05"   # #1206
    assert report.cpp_float(1234567.0) == "1.23457e+06" and report.cpp_float(0.000137352) == "0.000137352"


def test_miopen_average():
    assert report.miopen_average_ms([5.0, 1.0, 2.0, 3.0]) == pytest.approx(2.0)
    assert report.miopen_average_ms([4.5]) == 4.5
    assert report.kernel_time_line(0.5) == "GPU Kernel Time Backward Data Conv. Elapsed: 0.500000 ms (average)"
    assert Timing([5.0, 1.0, 2.0, 3.0]).miopen_average_ms == pytest.approx(2.0)


def test_zero_time_rates_are_inf():
    p = parse("conv -n 1 -c 1 -k 1 -H 3 -W 3 -F 2").problem
    assert report.stats_lines(p, 0.0)[1].endswith(", inf, inf, 0.000000")


def test_isolated_timing_runs_in_another_process():
    """GPU backends time in a spawned worker (never the verification's context); the same
    path works for the cpu engine, which is how it is tested without a GPU."""
    from driver.cli import time_engine
    p = parse(SMALL).problem
    from miopen_solver.solver import DgradSolver
    from miopen_solver.spec import make_spec
    from miopen_solver.target import get_target
    t = get_target("cpu")
    spec = make_spec(p, t, DgradSolver().get_default_performance_config(p, t))
    inp = prng.generate_inputs(p)
    timing, wall = time_engine(CpuEngine(), spec, inp.dy, inp.w, 3, isolate=True)
    assert timing.method == "wall" and len(timing.times_ms) == 3 and wall > 0
    assert timing.extra["worker_pid"] != os.getpid()
