"""The HIP path of the kernel compiles to real AMD code objects with MFMA instructions.

Needs a clang that targets AMDGPU (CI installs Debian's clang-19 and lld-19); skipped
elsewhere. Nothing here runs on AMD hardware: this checks the code the HIP runtime would
load, up to the launch.
"""

from __future__ import annotations

import os

import pytest

from conftest import FAMILY_LINES, suite_lines
from miopen_solver.command import parse
from miopen_solver.kernels import emit, emit_reference
from miopen_solver.kernels.offline import compile_amd, find_amd_clang
from miopen_solver.spec import PerfConfig, launch_spec, make_spec
from miopen_solver.target import get_target

_REQUIRED = os.environ.get("DGRAD_REQUIRE_AMD_COMPILE") == "1"  # set by .ci/run in CI
if _REQUIRED and find_amd_clang() is None:
    raise RuntimeError("DGRAD_REQUIRE_AMD_COMPILE=1 but no clang with AMDGPU targets was found "
                       "(install clang-19 lld-19 llvm-19)")

pytestmark = [pytest.mark.amdcompile,
              pytest.mark.skipif(find_amd_clang() is None, reason="no clang with AMDGPU targets (install clang-19 lld-19)")]

NHWC = "--in_layout NHWC --out_layout NHWC --fil_layout NHWC -F 2"

# (MIOpenDriver line, config, expected MFMA mnemonic or None for the FFMA fp32 path)
CASES = [
    ("convfp16 -n 32 -c 64 -H 56 -W 56 -k 64 -y 3 -x 3 -p 1 -q 1", PerfConfig(128, 64, 32, 2, 2, 32, 32, stages=2),
     "v_mfma_f32_32x32x8f16"),
    ("convbfp16 -n 32 -c 128 -H 56 -W 56 -k 128 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2",
     PerfConfig(128, 64, 32, 2, 2, 32, 32, stages=2), "v_mfma_f32_32x32x8bf16_1k"),
    ("convfp16 -n 32 -c 256 -H 56 -W 56 -k 64 -y 1 -x 1", PerfConfig(64, 64, 32, 2, 2, 16, 16, stages=1),
     "v_mfma_f32_16x16x16f16"),
    ("convbfp16 -n 8 -c 256 -H 28 -W 28 -k 256 -y 3 -x 3 -p 1 -q 1 -g 32",
     PerfConfig(64, 16, 32, 4, 1, 16, 16, stages=2), "v_mfma_f32_16x16x16bf16_1k"),
    ("convfp16 -n 8 -c 64 -H 28 -W 28 -k 64 -y 3 -x 3 -p 1 -q 1", PerfConfig(64, 64, 32, 2, 2, 32, 32, split_k=2, stages=2),
     "v_mfma_f32_32x32x8f16"),
    ("conv -n 32 -c 256 -H 56 -W 56 -k 512 -y 1 -x 1 -u 2 -v 2", PerfConfig(64, 64, 16, 2, 2, 32, 16, stages=2), None),
]


@pytest.mark.parametrize("arch", ["gfx90a", "gfx942"])
@pytest.mark.parametrize("line,cfg,mfma", CASES)
def test_hip_kernel_compiles_with_mfma(tmp_path, arch, line, cfg, mfma):
    p = parse(f"{line} {NHWC}").problem
    target = get_target(arch)
    spec = make_spec(p, target, cfg)
    co = compile_amd(emit(spec).text, arch, tmp_path, "dgrad")
    assert co.data[:4] == b"\x7fELF"
    if mfma is None:
        assert co.count("v_mfma") == 0
        assert co.count("v_fma") + co.count("v_pk_fma") > 0
    else:
        if arch != "gfx90a":
            mfma = mfma.replace("_1k", "")  # gfx94x spells the bf16 atoms without the suffix
        # one MFMA per atom per k-step of a tile: MMA_M * MMA_N * TILE_K / atom.k, fully unrolled
        expected = spec.mma_m * spec.mma_n * cfg.tile_k // spec.atom.k
        assert co.count(mfma) >= expected


@pytest.mark.parametrize("arch", ["gfx90a", "gfx942"])
def test_naive_reference_compiles(tmp_path, arch):
    p = parse(f"convfp16 -n 2 -c 8 -H 9 -W 9 -k 8 -y 3 -x 3 -u 2 -v 2 {NHWC}").problem
    co = compile_amd(emit_reference(p, "amd", arch).text, arch, tmp_path, "ref")
    assert co.data[:4] == b"\x7fELF"


SUITE = list(suite_lines())


@pytest.mark.parametrize("arch,base", [("gfx942", "convfp16"), ("gfx942", "conv"), ("gfx90a", "convbfp16")])
@pytest.mark.parametrize("label,line", SUITE, ids=[label for label, _ in SUITE])
def test_suite_defaults_compile_without_scratch(tmp_path, arch, base, label, line):
    """The default config of every suite line builds for AMD with MFMA (16-bit) or FMA
    (fp32) and without scratch memory or register spills (clang's kernel resource report):
    what can be checked of the AMD defaults without AMD hardware."""
    from miopen_solver.heuristics import default_performance_config
    p = parse(" ".join([base] + line.split()[1:])).problem
    target = get_target(arch)
    spec = make_spec(p, target, default_performance_config(p, target))
    co = compile_amd(emit(spec).text, arch, tmp_path, "dgrad")
    r = co.resources
    assert r["ScratchSize [bytes/lane]"] == 0 and r["VGPRs Spill"] == 0 and r["SGPRs Spill"] == 0, (spec.kernel_name, r)
    assert r["VGPRs"] <= 512 and r["Occupancy [waves/SIMD]"] >= 1
    if p.dtype == "fp32":
        assert co.count("v_mfma") == 0 and co.count("v_fma") + co.count("v_pk_fma") > 0
    else:
        assert co.count("v_mfma") >= spec.mma_m * spec.mma_n


@pytest.mark.parametrize("arch", ["gfx90a", "gfx942"])
@pytest.mark.parametrize("family,line", FAMILY_LINES)
def test_patch_and_nchw_pw_defaults_compile_without_scratch(tmp_path, arch, family, line):
    """Stride = filter: the default is the patch GEMM; all-NCHW 1x1: the nchw-pointwise GEMMs;
    both on the warp-MMA main loop (MFMA or FMA)."""
    from miopen_solver.heuristics import default_performance_config
    p = parse(line).problem
    target = get_target(arch)
    spec = launch_spec(p, target, default_performance_config(p, target))
    assert spec.schedule.virtual_gemm and f"_{family}_" in spec.kernel_name
    co = compile_amd(emit(spec).text, arch, tmp_path, "dgrad")
    r = co.resources
    assert r["ScratchSize [bytes/lane]"] == 0 and r["VGPRs Spill"] == 0 and r["SGPRs Spill"] == 0, (spec.kernel_name, r)
    if p.dtype == "fp32":
        assert co.count("v_mfma") == 0 and co.count("v_fma") + co.count("v_pk_fma") > 0
    else:
        assert co.count("v_mfma") >= spec.mma_m * spec.mma_n


# TF32 math (-M 0 on fp32 lines): gfx942 runs it on the XF32 MFMA, v_mfma_f32_16x16x8_xf32
# (compile-checked only: nothing has run on AMD hardware); gfx90a has no XF32 instruction, so
# the solver refuses a TF32 problem there (the driver runs the line in IEEE fp32 instead).
@pytest.mark.parametrize("label,line", SUITE, ids=[label for label, _ in SUITE])
def test_tf32_suite_defaults_compile_to_xf32_mfma(tmp_path, label, line):
    from miopen_solver.heuristics import default_performance_config
    p = parse(" ".join(["conv"] + line.split()[1:] + ["-M", "0"])).problem
    target = get_target("gfx942")
    spec = make_spec(p, target, default_performance_config(p, target))
    assert spec.math == "tf32" and spec.atom.name == "mfma16x16x8xf32" and "_tf32_" in spec.kernel_name
    co = compile_amd(emit(spec).text, "gfx942", tmp_path, "dgrad")
    r = co.resources
    assert r["ScratchSize [bytes/lane]"] == 0 and r["VGPRs Spill"] == 0 and r["SGPRs Spill"] == 0, (spec.kernel_name, r)
    assert co.count("v_mfma_f32_16x16x8_xf32") >= spec.mma_m * spec.mma_n * spec.config.tile_k // 8
    assert co.count("v_mfma") == co.count("v_mfma_f32_16x16x8_xf32")


@pytest.mark.parametrize("family,line", FAMILY_LINES)
def test_tf32_patch_and_nchw_pw_compile_to_xf32_mfma(tmp_path, family, line):
    from miopen_solver.heuristics import default_performance_config
    from miopen_solver.nchw_pw import is_patch
    p = parse(" ".join(["conv"] + line.split()[1:] + ["-M", "0"])).problem
    target = get_target("gfx942")
    spec = launch_spec(p, target, default_performance_config(p, target))
    family = "patch_gemm" if is_patch(p) else family      # fp32 patch filters keep the patch GEMM
    assert spec.schedule.virtual_gemm and f"_{family}_" in spec.kernel_name and spec.math == "tf32"
    co = compile_amd(emit(spec).text, "gfx942", tmp_path, "dgrad")
    r = co.resources
    assert r["ScratchSize [bytes/lane]"] == 0 and r["VGPRs Spill"] == 0, (spec.kernel_name, r)
    assert co.count("v_mfma_f32_16x16x8_xf32") >= spec.mma_m * spec.mma_n


def test_tf32_is_refused_on_gfx90a():
    from miopen_solver.solver import DgradSolver
    p = parse(f"conv -n 2 -c 64 -H 14 -W 14 -k 64 -y 3 -x 3 -p 1 -q 1 -M 0 {NHWC}").problem
    verdict = DgradSolver().is_applicable(p, get_target("gfx90a"))
    assert verdict.codes == ("TF32",) and "XF32" in verdict.reasons[0].message
