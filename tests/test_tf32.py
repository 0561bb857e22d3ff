"""TF32 math for fp32 (MIOpenDriver ``-M 0``; miopen_solver.tf32) without a GPU: the rounding
bit for bit against an independent implementation, the flag, the keys, the perf-db, where it
runs (and where it falls back), the kernels' text, the CPU engine against the reference, and
the driver's output. GPU numerics: tests/test_gpu_tf32.py; compiled kernels:
tests/test_nvidia_build.py and tests/test_amd_compile.py (``-k tf32``)."""

from __future__ import annotations

import json
import math
import os
import struct

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from conftest import draw_problem, run_cli
from miopen_solver import SOLVER_NAME, applicability, prng
from miopen_solver.command import format_command, parse
from miopen_solver.config import KernelSchedule, PerfConfig
from miopen_solver.applicability import NotApplicableError
from miopen_solver.errors import MiopenCommandError, PerfConfigError
from miopen_solver.heuristics import default_performance_config
from miopen_solver.layouts import dy_shape, w_shape
from miopen_solver.miopen_db import key_to_fields, legacy_key_to_key
from miopen_solver.perfdb import ENV_VAR as PERFDB_ENV, PerfDb
from miopen_solver.problem import ConvProblem
from miopen_solver.reference import default_tolerance, dgrad_reference, rms_range, verify
from miopen_solver.runtime.cpu import CpuEngine
from miopen_solver.solver import DgradSolver
from miopen_solver.spec import launch_spec, make_spec
from miopen_solver.target import PRESETS, get_target
from miopen_solver.tf32 import ROUND_CHUNK, resolve, round_tf32, round_tf32_

NHWC = "--in_layout NHWC --out_layout NHWC --fil_layout NHWC"
LINE = f"conv -n 2 -c 64 -H 14 -W 14 -k 64 -y 3 -x 3 -p 1 -q 1 -F 2 {NHWC}"
FP32_TOL, TF32_TOL = default_tolerance("fp32"), default_tolerance("tf32")
CPU = get_target("cpu")


@pytest.fixture(autouse=True)
def env(monkeypatch, tmp_path):
    monkeypatch.delenv(prng.SEED_ENV, raising=False)
    for name in ("MIOPEN_TF32_OVERRIDE", "NVIDIA_TF32_OVERRIDE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(PERFDB_ENV, str(tmp_path / "perfdb.sqlite"))


# ----------------------------------------------------------------------------- the rounding
def independent_tf32(x: np.float32) -> int:
    """cvt.rna.tf32.f32 of one value, computed in exact float64 arithmetic on the value (not
    on its bits): the nearest multiple of the TF32 spacing at x's binade (2^(e-10) for
    2^e <= |x| < 2^(e+1), 2^-136 below 2^-126), ties away from zero, +-inf past the largest
    TF32 value. Returns the float32 bits of the result."""
    v = float(x)
    if math.isnan(v):
        return -1                                          # any NaN
    if math.isinf(v) or v == 0.0:
        return struct.unpack("<I", struct.pack("<f", v))[0]
    a = abs(v)
    step = 2.0 ** -136 if a < 2.0 ** -126 else 2.0 ** (math.frexp(a)[1] - 1 - 10)
    r = math.floor(a / step + 0.5) * step                  # exact: a/step < 2^24, step a power of 2
    if r >= 2.0 ** 128:
        r = math.inf
    return struct.unpack("<I", struct.pack("<f", math.copysign(r, v)))[0]


def _edge_values() -> np.ndarray:
    bits = [0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0xFF800FFF, 0x7FBFFFFF,
            0x7F7FFFFF, 0x7F7FEFFF, 0x7F7FF000, 0xFF7FF000, 0x00000001, 0x80000001, 0x00000FFF, 0x00001000,
            0x00001FFF, 0x007FF000, 0x007FFFFF, 0x00800000, 0x3F800FFF, 0x3F801000, 0x3F801001, 0x3F803000,
            0x3F805000, 0xBF801000, 0xBF803000, 0x3FFFF000, 0x3FFFFFFF, 0x4B7FF000]
    rng = np.random.default_rng()
    mant = rng.integers(0, 1 << 10, 4000, dtype=np.uint32) << 13
    exps = rng.integers(0, 255, 4000, dtype=np.uint32) << 23            # every binade, subnormals too
    sign = rng.integers(0, 2, 4000, dtype=np.uint32) << 31
    ties = sign | exps | mant | 0x1000                                   # exactly halfway
    near = np.concatenate([ties - 1, ties + 1])                         # just either side
    rand = rng.integers(0, 1 << 32, 200_000, dtype=np.uint64).astype(np.uint32)
    return np.concatenate([np.array(bits, dtype=np.uint32), ties, near, rand]).view(np.float32)


def test_rounding_is_cvt_rna_bit_for_bit():
    x = _edge_values()
    got = round_tf32(x).view(np.uint32)
    for xi, gi in zip(x, got):
        want = independent_tf32(xi)
        if want == -1:
            assert (gi & 0x7F800000) == 0x7F800000 and (gi & 0x007FFFFF) and (gi & 0x00400000), hex(gi)
        else:
            assert gi == want, (hex(int(xi.view(np.uint32))), hex(int(gi)), hex(want))
        assert gi & 0x1FFF == 0 or want == -1


def test_rounding_in_place_in_chunks_matches_the_copy():
    rng = np.random.default_rng()
    a = rng.standard_normal(ROUND_CHUNK * 2 + 17).astype(np.float32)
    b = a.copy()
    assert round_tf32_(b) is b
    assert np.array_equal(b.view(np.uint32), round_tf32(a).view(np.uint32))
    assert not np.array_equal(a, b)
    with pytest.raises(ValueError, match="float32"):
        round_tf32_(np.zeros(4))


# ----------------------------------------------------------------------------- the flag
def test_math_type_values():
    assert not parse(LINE).problem.tf32                                  # MIOpen's default -M 1
    assert parse(LINE + " -M 0").problem.tf32
    assert parse(LINE + " --math_type 0").problem.tf32
    assert not parse(LINE + " -M 0 -M 1").problem.tf32                  # the last repeat wins
    assert not parse(LINE.replace("conv ", "convfp16 ") + " -M 0").problem.tf32
    assert not parse(LINE.replace("conv ", "convbfp16 ") + " -M 0").problem.tf32
    p = parse(LINE + " -M 0").problem
    assert parse(format_command(p)).problem == p and " -M 0" in format_command(p)
    assert " -M " not in format_command(parse(LINE).problem)


@pytest.mark.parametrize("value", ["2", "-1", "1.5", "abc", "0x0", "99999999999"])
def test_bad_math_type_is_one_line_exit_2(capsys, value):
    with pytest.raises(MiopenCommandError, match="-M"):
        parse(f"{LINE} -M {value}")
    status, out, err = run_cli(capsys, *LINE.split(), "-M", value, "--backend", "cpu")
    assert status == 2 and out == [] and len(err) == 1, (out, err)
    assert err[0].startswith("dgrad-driver: error: -M ") and "Traceback" not in err[0]
    assert value in err[0] or value == "99999999999"
    if value in ("2", "-1"):
        assert "allowed: 0 (miopenMathDefault" in err[0] and "1 (miopenMathPedantic" in err[0]
    status, _, err = run_cli(capsys, "config", *LINE.split(), "--math_type", value)
    assert status == 2 and err[0].startswith("dgrad-driver: error: --math_type ")


def test_conv_help_lists_math_type(capsys):
    status, out, _ = run_cli(capsys, "conv", "--help")
    assert status == 0 and any("--math_type" in l and "TF32" in l for l in out)


# ----------------------------------------------------------------------------- keys, perf-db
def test_keys_carry_tf32_as_miopen_does():
    ieee, tf32 = parse(LINE).problem, parse(LINE + " -M 0").problem
    assert tf32.problem_key() == ieee.problem_key() + "_cxTF32"
    assert tf32.miopen_db_key() == ieee.miopen_db_key() + "xTF32"
    assert tf32.miopen_db_fields()["compute_datatype"] == "TF32" and "compute_datatype" not in ieee.miopen_db_fields()
    assert tf32.miopen_db_key() == ("2x64x14x14x1x3x3x1x64x2x1x1x0x1x1x0x1x1x0x0x1xNHWCxFP32xBxTF32")
    assert legacy_key_to_key(tf32.problem_key()) == tf32.miopen_db_key()
    grouped = parse(LINE.replace("-c 64", "-c 64 -g 4") + " -M 0").problem
    assert grouped.problem_key().endswith("_g4_cxTF32")
    assert legacy_key_to_key(grouped.problem_key()) == grouped.miopen_db_key()
    assert key_to_fields(tf32.miopen_db_key()) is None          # not a row of MIOpen's 24-column table
    assert key_to_fields(ieee.miopen_db_key()) is not None
    assert legacy_key_to_key(ieee.problem_key().replace("FP32", "FP16") + "_cxTF32") is None
    with pytest.raises(ValueError, match="fp32 data only"):
        ConvProblem(N=1, C=4, Hi=4, Wi=4, K=4, Y=1, X=1, dtype="fp16", tf32=True)
    assert ConvProblem.from_dict(tf32.as_dict()) == tf32
    assert ConvProblem.from_dict({k: v for k, v in ieee.as_dict().items() if k != "tf32"}) == ieee


def test_perfdb_keeps_tf32_records_apart(tmp_path, capsys):
    ieee, tf32 = parse(LINE).problem, parse(LINE + " -M 0").problem
    path = tmp_path / "db.sqlite"
    a, b = "64,64,16,2,2,32,32,0,0,0,1,-1,2", "128,64,16,2,2,64,32,0,0,0,1,-1,2"
    with PerfDb(path) as db:
        db.update(ieee.miopen_db_key(), "cpu", SOLVER_NAME, a, time_ms=1.0)
        db.update(tf32.miopen_db_key(), "cpu", SOLVER_NAME, b, time_ms=0.5)
        assert db.get(ieee.problem_key(), "cpu", SOLVER_NAME).values == a
        assert db.get(tf32.problem_key(), "cpu", SOLVER_NAME).values == b
        text = db.export_text("cpu")
    assert f"{tf32.miopen_db_key()}={SOLVER_NAME}:{b}" in text and f"{ieee.miopen_db_key()}={SOLVER_NAME}:{a}" in text
    for line, want in ((LINE, a), (LINE + " -M 0", b)):
        status, out, _ = run_cli(capsys, "config", *line.split(), "--arch", "cpu", "--perfdb", path, "--json")
        doc = json.loads("\n".join(out))
        assert status == 0 and doc["perf_config"] == want and doc["source"] == "perfdb"


# ----------------------------------------------------------------------------- where it runs
@pytest.mark.parametrize("arch", sorted(PRESETS))
def test_applicability_and_fallback_on_every_target(arch):
    target = get_target(arch)
    p = parse(LINE + " -M 0").problem
    verdict = DgradSolver().is_applicable(p, target)
    resolved, note = resolve(p, target)
    if arch in ("gfx90a", "gfx950"):
        assert verdict.codes == (applicability.TF32,)
        assert not resolved.tf32 and resolved == parse(LINE).problem
        assert "runs IEEE fp32" in note and "falls back" in note
    else:
        assert verdict.ok and resolved is p and note is None
        sol = DgradSolver().get_solution(p, target)
        assert sol.math == "tf32" and sol.tolerance == TF32_TOL and "_tf32_" in sol.kernel_name
        assert sol.spec.atom.name == ("mfma16x16x8xf32" if target.vendor == "amd" else "mma1688tf32")
        assert any(n.startswith("Math: TF32") for n in sol.notes)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90", "gfx942", "cpu"])
def test_defaults_of_suite_and_zoo_fp32_lines_are_tf32(arch):
    from bench.compare import read_suite
    from conftest import ROOT
    target = get_target(arch)
    lines = [c for _, c in read_suite(__import__("pathlib").Path(ROOT) / "bench" / "suite.txt")]
    lines += [c for _, c in read_suite(__import__("pathlib").Path(ROOT) / "bench" / "zoo.txt") if c.startswith("conv ")]
    for cmd in lines:
        p = parse(" ".join(["conv"] + cmd.split()[1:] + ["-M", "0"])).problem
        cfg = default_performance_config(p, target)
        spec = launch_spec(p, target, cfg)
        if cfg.schedule is KernelSchedule.DIRECT:
            assert spec.math == "fp32"                          # no matrix instruction there
        else:
            assert spec.math == "tf32" and spec.atom.name in ("mma1688tf32", "mfma16x16x8xf32"), cmd


def test_search_offers_tf32_tiles():
    target = get_target("sm_90")
    p = parse(LINE + " -M 0").problem
    names = [launch_spec(p, target, c).kernel_name for c in DgradSolver().search(p, target)]
    assert len(names) > 50 and all("_tf32_" in n and ("mma1688tf32" in n or "x8tf32_" in n) for n in names)
    assert any("_wgmma64x" in n and "x8tf32_" in n for n in names)     # the warpgroup TF32 tiles too
    dw = parse(f"conv -n 2 -c 32 -H 14 -W 14 -k 32 -g 32 -y 3 -x 3 -p 1 -q 1 -M 0 -F 2 {NHWC}").problem
    kinds = {launch_spec(dw, target, c).math for c in DgradSolver().search(dw, target)}
    assert kinds == {"tf32", "fp32"}                            # GEMM tiles and the direct schedule


def test_tf32_is_a_different_kernel_and_text():
    target = get_target("sm_90")
    ieee, tf32 = parse(LINE).problem, parse(LINE + " -M 0").problem
    cfg = PerfConfig(128, 64, 16, 2, 2, 64, 32, stages=3)
    s_ieee, s_tf32 = make_spec(ieee, target, cfg), make_spec(tf32, target, cfg)
    t_ieee, t_tf32 = s_ieee.emit().text, s_tf32.emit().text
    assert s_ieee.kernel_name.replace("_fp32_", "_tf32_").replace("fma4x8", "mma1688tf32") == s_tf32.kernel_name
    assert "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in t_tf32 and "cvt.rna.tf32.f32" in t_tf32
    assert "tf32" not in t_ieee and "// #section" not in t_tf32 and "// #end " not in t_tf32
    assert "#define DG_ATOM 5" in t_tf32 and "#define DG_A_ROW (DG_TILE_K + 2 * DG_LDS_PAD)" in t_tf32
    # shared memory: A rows of k padded by 2*pad (8-byte fragment loads), k-outer B rows by pad
    c, pad = cfg, s_tf32.lds_pad
    assert s_tf32.lds_bytes == max(c.stages * (c.tile_m * (c.tile_k + 2 * pad) + c.tile_k * (c.tile_n + pad)) * 4,
                                   c.tile_m * (c.tile_n + pad) * 4)
    amd = make_spec(tf32, get_target("gfx942"), cfg.replace(stages=2)).emit().text
    assert "__builtin_amdgcn_mfma_f32_16x16x8_xf32" in amd and "#define DG_ATOM 6" in amd


# ----------------------------------------------------------------------------- the CPU engine
def _inputs(p, rng):
    return (rng.uniform(-1, 1, dy_shape(p)).astype(np.float32), rng.uniform(-1, 1, w_shape(p)).astype(np.float32))


@given(data=st.data())
def test_cpu_engine_runs_tf32_on_random_problems(data):
    """Strided, dilated, grouped, padded, odd channels, every GEMM schedule on the cpu target:
    no NaN left from the poisoned dX, TF32 tolerance met, and the result is the reference of
    the *rounded* inputs to fp32 accuracy (both operands rounded, exactly as cvt.rna)."""
    p = draw_problem(data, tf32=True, layout=data.draw(st.sampled_from(["NHWC", "NCHW"])), channels=24,
                     filt=5, size=14)
    assume(p is not None)
    cfg = data.draw(st.sampled_from([PerfConfig(64, 32, 16, 2, 2, 32, 16, stages=2),
                                     PerfConfig(32, 16, 8, 1, 1, 32, 16, stages=1, lds_k_outer=0),
                                     PerfConfig(64, 64, 16, 2, 2, 32, 32, split_k=2, stages=2)]))
    try:
        sol = DgradSolver().get_solution(p, CPU, cfg)
    except (PerfConfigError, NotApplicableError):      # a config (or target) this problem refuses
        assume(False)
        return
    assert sol.math == "tf32"
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    dy, w = _inputs(p, rng)
    dx = CpuEngine(CPU).run(sol, dy, w)
    v = verify(p, dx, dgrad_reference(p, dy, w))
    assert v.nonfinite == 0 and v.ok and v.tolerance == TF32_TOL, v
    rounded = dgrad_reference(p, round_tf32(dy), round_tf32(w))
    assert rms_range(rounded, dx.astype(np.float64)) < FP32_TOL


@pytest.mark.parametrize("line,cfg", [
    (f"conv -n 2 -c 6 -H 32 -W 28 -k 96 -y 4 -x 4 -u 4 -v 4 -M 0 -F 2 {NHWC}", "64,64,16,2,2,32,32,0,0,0,1,-1,2,5"),
    ("conv -n 2 -c 24 -H 8 -W 8 -k 40 -y 1 -x 1 -M 0 -F 2", "64,64,16,2,2,32,32,0,0,0,1,-1,2,7"),
])
def test_cpu_engine_rounds_the_patch_and_nchw_pointwise_gemms(line, cfg):
    p = parse(line).problem
    sol = DgradSolver().find_solution(p, CPU, perf_config=cfg)
    assert sol.schedule.virtual_gemm and sol.math == "tf32" and "_tf32_" in sol.kernel_name
    dy, w = _inputs(p, np.random.default_rng())
    dx = CpuEngine(CPU).run(sol, dy, w).astype(np.float64)
    assert rms_range(dgrad_reference(p, round_tf32(dy), round_tf32(w)), dx) < FP32_TOL
    assert FP32_TOL < rms_range(dgrad_reference(p, dy, w), dx) < TF32_TOL


def test_tf32_really_differs_from_ieee_with_fresh_inputs():
    """A problem built to show TF32's rounding (every mantissa bit used, GemmK = 9*128 sums per
    dX element): with fresh random inputs the TF32 run passes MIOpen's TF32 tolerance while
    the fp32 one (1.5e-5) would refuse it; the IEEE run of the same inputs passes 1.5e-5."""
    line = f"conv -n 2 -c 64 -H 12 -W 12 -k 128 -y 3 -x 3 -p 1 -q 1 -F 2 {NHWC}"
    seed = int.from_bytes(os.urandom(4), "little")
    errors = {}
    for math_flag in ("-M 0", "-M 1"):
        p = parse(f"{line} {math_flag}").problem
        sol = DgradSolver().get_solution(p, CPU)
        dy, w = _inputs(p, np.random.default_rng(seed))
        v = verify(p, CpuEngine(CPU).run(sol, dy, w), dgrad_reference(p, dy, w), sol.tolerance)
        assert v.ok and v.nonfinite == 0, (seed, v)
        errors[sol.math] = v.error
    assert errors["tf32"] > FP32_TOL > errors["fp32"], (seed, errors)
    assert errors["tf32"] < TF32_TOL / 10, (seed, errors)          # well inside, not at the edge


def test_direct_schedule_runs_ieee_for_tf32_problems():
    """Depthwise on the direct schedule (the NVIDIA default for cpg <= 4): no matrix
    instruction, so -M 0 computes IEEE fp32 and is verified with the fp32 tolerance."""
    target = get_target("sm_90")
    p = parse(f"conv -n 2 -c 32 -H 14 -W 14 -k 32 -g 32 -y 3 -x 3 -p 1 -q 1 -M 0 -F 2 {NHWC}").problem
    sol = DgradSolver().get_solution(p, target)
    assert sol.schedule is KernelSchedule.DIRECT and sol.math == "fp32" and sol.tolerance == FP32_TOL
    assert p.problem_key().endswith("_cxTF32") and any("no matrix instruction" in n for n in sol.notes)
    dy, w = _inputs(p, np.random.default_rng())
    v = verify(p, CpuEngine(target).run(sol, dy, w), dgrad_reference(p, dy, w), sol.tolerance)
    assert v.ok, v


# ----------------------------------------------------------------------------- the driver
def test_run_names_the_math_and_its_tolerance(capsys):
    status, out, err = run_cli(capsys, *LINE.split(), "-M", "0", "-t", "1", "--backend", "cpu")
    assert status == 0 and err == []
    assert any(l.startswith("Math: TF32 (-M 0, miopenMathDefault)") for l in out)
    assert out[-1].startswith("Backward Convolution Data Verifies OK on CPU reference") and out[-1].endswith("< 0.082)")
    status, out, _ = run_cli(capsys, *LINE.split(), "-M", "0", "--backend", "cpu", "--json")
    rec = json.loads(out[0])
    assert rec["math"] == "tf32" and rec["tolerance"] == TF32_TOL and "_tf32_" in rec["kernel_name"]
    assert rec["problem_key"].endswith("_cxTF32") and rec["verify"]["tolerance"] == TF32_TOL
    assert FP32_TOL < rec["verify"]["error"] < TF32_TOL
    status, out, _ = run_cli(capsys, *LINE.split(), "--backend", "cpu", "--json")
    rec = json.loads(out[0])
    assert rec["math"] == "fp32" and rec["verify"]["tolerance"] == FP32_TOL and "_fp32_" in rec["kernel_name"]
    assert not any("Math:" in n for n in rec["notes"])


def test_run_on_a_target_without_tf32_falls_back_with_a_note(capsys):
    status, out, _ = run_cli(capsys, *LINE.split(), "-M", "0", "--backend", "cpu", "--arch", "gfx90a", "--json")
    rec = json.loads(out[0])
    assert status == 0 and rec["math"] == "fp32" and rec["verify"]["tolerance"] == FP32_TOL
    assert not rec["problem_key"].endswith("_cxTF32") and "_fp32_" in rec["kernel_name"]
    assert rec["notes"][0].startswith("Math: -M 0 (TF32) runs IEEE fp32 here: gfx90a has no TF32")
    status, out, _ = run_cli(capsys, "applicable", *LINE.split(), "-M", "0", "--arch", "gfx950")
    assert status == 0 and any("CDNA4 has no XF32" in l for l in out)


def test_config_json_names_the_math(capsys):
    status, out, _ = run_cli(capsys, "config", *LINE.split(), "-M", "0", "--arch", "sm_90", "--json")
    doc = json.loads("\n".join(out))
    assert status == 0 and doc["math"] == "tf32" and doc["tolerance"] == TF32_TOL
    assert doc["spec"]["math"] == "tf32" and doc["spec"]["atom"] == "mma1688tf32"
    assert doc["problem_key"].endswith("_cxTF32") and "_tf32_" in doc["kernel_name"]
    status, out, _ = run_cli(capsys, "config", *LINE.split(), "-M", "0", "--arch", "sm_90")
    assert any(l == f"math: tf32 (verification tolerance {TF32_TOL:g})" for l in out)


def test_16_bit_lines_ignore_math_type_with_a_note(capsys):
    line = LINE.replace("conv ", "convfp16 ")
    status, out, _ = run_cli(capsys, *line.split(), "-M", "0", "--backend", "cpu")
    assert status == 0 and any(l.startswith("Info: '-M 0' changes nothing for convfp16") for l in out)
    assert not any(l.startswith("Math:") for l in out)


def test_miopen_tf32_environment_is_reported_not_honoured(capsys, monkeypatch):
    monkeypatch.setenv("MIOPEN_TF32_OVERRIDE", "1")
    monkeypatch.setenv("NVIDIA_TF32_OVERRIDE", "1")
    status, out, _ = run_cli(capsys, *LINE.split(), "--backend", "cpu", "--json")
    assert status == 0 and json.loads(out[0])["math"] == "fp32"
    status, out, _ = run_cli(capsys, *LINE.split(), "--backend", "cpu")
    assert any(l.startswith("Info: MIOPEN_TF32_OVERRIDE and NVIDIA_TF32_OVERRIDE set: not honoured") for l in out)


def test_warpgroup_tf32_rules_and_atom():
    """fp32 with TF32 math takes the plain wgmma schedule on sm_90a: k8 atom, tile_k a multiple
    of 32, B read K-major (m-outer), the persistent and TMA forms refused with the reason."""
    from miopen_solver.command import parse
    from miopen_solver.config import PerfConfig
    from miopen_solver.errors import PerfConfigError
    from miopen_solver.spec import make_spec
    from miopen_solver.target import get_target
    p = parse("conv -n 2 -c 128 -H 8 -W 8 -k 128 -y 3 -x 3 -p 1 -q 1 -M 0 -F 2 --in_layout NHWC "
              "--out_layout NHWC --fil_layout NHWC".split()).problem
    t = get_target("sm_90")
    spec = make_spec(p, t, PerfConfig.parse("128,128,32,2,1,64,128,0,0,0,1,-1,4,1"))
    assert spec.atom.name == "wgmma64x128x8tf32" and spec.math == "tf32" and not spec.lds_k_outer
    assert "wgtf32" not in spec.emit().text and "m64n128k8.f32.tf32.tf32" in spec.emit().text
    for cfg, why in [("128,128,16,2,1,64,128,0,0,0,1,-1,4,1", "tile_k a multiple of 32"),
                     ("128,128,32,2,1,64,128,0,0,0,1,1,4,1", "lds_k_outer must be -1 or 0"),
                     ("128,128,64,2,1,64,128,0,0,0,1,-1,4,2", "runs on schedule 1 \\(wgmma\\) only"),
                     ("128,128,64,2,1,64,128,0,0,0,1,-1,4,3", "runs on schedule 1 \\(wgmma\\) only")]:
        with pytest.raises(PerfConfigError, match=why):
            make_spec(p, t, PerfConfig.parse(cfg))
    with pytest.raises(PerfConfigError, match="needs fp16 or bf16 data"):
        make_spec(p.replace(tf32=False), t, PerfConfig.parse("128,128,32,2,1,64,128,0,0,0,1,-1,4,1"))
    # the fp16 wgmma kernel's text has none of the TF32 instruction
    q = p.replace(dtype="fp16", tf32=False)
    assert ".tf32" not in make_spec(q, t, PerfConfig.parse("128,128,64,2,1,64,128,0,0,0,1,-1,4,1")).emit().text
