"""What the default sm_90 kernels compile to (nvcc on this machine, no GPU needed): the
matrix instructions each path was written for, 16-byte asynchronous copies, and no
register spills, for every bench-suite line. Skipped where nvcc is missing.

The GPU tests check the numbers; these check the instruction mix that the performance
depends on (issue: "check that loads are 16 bytes wide, that mma/ldmatrix/cp.async appear,
that nothing spills"), so a change that silently falls back to slower code fails here.
"""

from __future__ import annotations

import re
import shutil

import pytest

from conftest import FAMILY_LINES, suite_lines
from miopen_solver.command import parse
from miopen_solver.kernels.emit import emit
from miopen_solver.kernels.offline import inspect_nvidia
from miopen_solver.spec import PerfConfig, launch_spec, make_spec
from miopen_solver.heuristics import default_performance_config
from miopen_solver.target import get_target

SM90 = get_target("sm_90")

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc on this machine")


SUITE = list(suite_lines())
MAX_SCALAR_SPILL = 32
CP16 = re.compile(r"cp\.async\.(cg|ca)\.shared\.global\S* \[[^\]]+\], \[[^\]]+\], 16")
ST_GLOBAL = re.compile(r"^\s*(?:@!?%p\d+\s+)?st\.global((?:\.[a-z]+)*?)(?:\.v(\d))?\.[bfsu](\d+)\s", re.M)


def global_store_bytes(b) -> set:
    """The widths in bytes of the PTX's global stores (``st.global.v4.b32``: 16)."""
    return {int(v or 1) * int(bits) // 8 for _, v, bits in ST_GLOBAL.findall(b.ptx)}


def assert_dx_store_width(b, spec, nbytes: int) -> None:
    """Every global store of the kernel is one ``nbytes``-wide instruction: the dX chunks or
    runs the epilogue builds in registers (and the zero fill's) stored whole (nvcc splits a
    struct built member by member into 4-byte stores where it cannot follow the address's
    alignment)."""
    assert global_store_bytes(b) == {nbytes}, (spec.kernel_name, sorted(global_store_bytes(b)))


@pytest.mark.parametrize("base", ["convfp16", "conv"])
@pytest.mark.parametrize("label,line", SUITE, ids=[label for label, _ in SUITE])
def test_default_kernel_instruction_mix(tmp_path, base, label, line):
    p = parse(" ".join([base] + line.split()[1:])).problem
    spec = make_spec(p, SM90, default_performance_config(p, SM90))
    b = inspect_nvidia(emit(spec).text, "sm_90", tmp_path, "k")
    # No accumulator spills: those cost hundreds of bytes (a 512-thread, 128-accumulator
    # wgmma tile spilled 6260). ptxas may still park a few long-lived scalars of the tilde
    # sub-GEMM record in local memory below the register cap (fp32 3x3 stride 2: 12 bytes
    # at 168 registers), which costs a handful of loads per block: allowed up to 32 bytes.
    assert b.spill_store_bytes <= MAX_SCALAR_SPILL and b.spill_load_bytes <= 2 * MAX_SCALAR_SPILL, \
        (spec.kernel_name, b.registers, b.spill_store_bytes)
    if len(spec.sub_gemms) == 1:
        assert b.spill_store_bytes == 0, (spec.kernel_name, b.registers, b.spill_store_bytes)
    assert b.registers <= 255
    if spec.tma:
        # warp-specialised: whole tiles by tensor copies on mbarriers, no per-thread copies;
        # dX in 16-byte stores straight from the (quad-transposed) accumulators, or with
        # split-K work units packed 16-bit atomic adds (workspace: fp32 pairs)
        assert b.count("wgmma.mma_async.sync.aligned.m64n") >= spec.mma_m * spec.config.tile_k // 16
        assert b.count("cp.async.bulk.tensor") >= 2 and b.count("mbarrier.try_wait.parity") >= 2
        assert b.count("mbarrier.arrive.expect_tx") >= 1
        assert b.count("cp.async.cg") + b.count("cp.async.ca") == 0
        if spec.split_k == 1:
            assert b.count("shfl.sync.bfly") >= 1
            assert_dx_store_width(b, spec, 16)
        elif spec.workspace_reduce:
            assert b.count("st.global.v2.f32") >= 1 and b.count("red.global") == 0
        else:
            assert b.count("red.global.add.noftz") >= 1 and b.count("st.global.v4") == 0
        assert b.count("mma.sync") == 0 and b.count("ldmatrix") == 0
        return
    if spec.wgmma:
        assert b.count("wgmma.mma_async.sync.aligned.m64n") >= spec.mma_m * spec.config.tile_k // 16
        assert b.count("wgmma.fence") >= 1 and b.count("fence.proxy.async") >= 1
        assert b.count("mma.sync") == 0 and b.count("ldmatrix") == 0
    elif p.dtype == "fp32":
        assert b.count("fma.rn.f32") >= 1 and b.count("mma.") == 0
    else:
        assert b.count("mma.sync.aligned.m16n8k16") >= 1 and b.count("ldmatrix") >= 1
    # dY and W tiles go through cp.async; 16 bytes wide wherever the clamped widths allow
    assert b.count("cp.async") >= 1
    wide = 16 // p.elem_bytes
    if spec.vec_a == wide or spec.vec_b == wide:
        assert CP16.search(b.ptx), f"{spec.kernel_name}: no 16-byte cp.async"
    if spec.staged_epilogue and spec.vec_c == wide:
        assert b.count("st.global.v4") >= 1, f"{spec.kernel_name}: no 16-byte dX store"


# Patch embeddings (stride = filter): the default is the patch GEMM (one dense GEMM whose
# staged epilogue scatters rows into dX patches); all-NCHW 1x1 lines: the nchw-pointwise
# GEMMs (one per image and group, NCHW dX from the staged epilogue). Both run the warp-MMA
# main loop for sm_80 and fp32, mostly the wgmma one for 16-bit types on sm_90a.
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("family,line", FAMILY_LINES)
def test_patch_and_nchw_pw_default_kernel_instruction_mix(tmp_path, arch, family, line):
    target = get_target(arch)
    p = parse(line).problem
    spec = launch_spec(p, target, default_performance_config(p, target))
    assert spec.schedule.virtual_gemm and f"_{family}_" in spec.kernel_name
    b = inspect_nvidia(emit(spec).text, arch, tmp_path, "k")
    assert b.spill_store_bytes == 0 and b.spill_load_bytes == 0, (spec.kernel_name, b.registers)
    assert b.registers <= 255 and b.count("cp.async") >= 1
    if spec.wgmma:
        assert b.count("wgmma.mma_async.sync.aligned.m64n") >= spec.mma_m * spec.config.tile_k // 16
        assert b.count("mma.sync") == 0
    elif p.dtype == "fp32":
        assert b.count("fma.rn.f32") >= 1 and b.count("mma.") == 0
    else:
        assert b.count("mma.sync.aligned.m16n8k16") >= 1 and b.count("ldmatrix") >= 1
    patch = getattr(spec, "patch", False)      # NCHW patch filters: runs of patch_vector x of a patch row
    if patch and spec.patch_vector * p.elem_bytes in (8, 16):
        assert_dx_store_width(b, spec, spec.patch_vector * p.elem_bytes)
    elif patch:      # runs of 2 or 1 elements
        assert b.count("st.global") >= 1, f"{spec.kernel_name}: no dX store"
    elif spec.staged_epilogue and spec.vec_c == 16 // p.elem_bytes:
        assert b.count("st.global.v4") >= 1, f"{spec.kernel_name}: no 16-byte dX store"
    elif not spec.staged_epilogue and spec.split_k == 1:   # 16-byte chunks from the quad transpose
        assert_dx_store_width(b, spec, 16)
    elif not spec.staged_epilogue:
        assert b.count("st.global") >= 1, f"{spec.kernel_name}: no dX store"


# TF32 math (-M 0 on fp32 lines; miopen_solver.tf32): the default kernel of every suite line
# and of the patch / NCHW pointwise families, for sm_80 and sm_90a. The main loop must be the
# tensor-core TF32 atom (mma.sync m16n8k8 .tf32, operands from cvt.rna.tf32.f32), fed by
# 8-byte shared loads of k pairs, with no FFMA main loop and no spills, within the register
# cap the spec assumed.
def _tf32_line(line: str) -> str:
    return " ".join(["conv"] + line.split()[1:] + ["-M", "0"])


def _check_tf32_binary(b, spec):
    from miopen_solver.spec import register_cap
    assert spec.math == "tf32" and "_tf32_" in spec.kernel_name and spec.atom.name == "mma1688tf32"
    assert b.spill_store_bytes == 0 and b.spill_load_bytes == 0, (spec.kernel_name, b.registers)
    assert b.registers <= register_cap(spec.target, spec.block_threads), (spec.kernel_name, b.registers)
    # one mma per atom per k8 step of a tile, fully unrolled
    assert b.count("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32") >= \
        spec.mma_m * spec.mma_n * spec.config.tile_k // 8, spec.kernel_name
    assert b.count("cvt.rna.tf32.f32") >= 1 and b.count("ld.shared.v2.f32") >= 1
    assert b.count("mma.sync.aligned.m16n8k16") == 0 and b.count("ldmatrix") == 0 and b.count("wgmma") == 0
    assert b.count("cp.async") >= 1


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("label,line", SUITE, ids=[label for label, _ in SUITE])
def test_tf32_default_kernel_instruction_mix(tmp_path, arch, label, line):
    target = get_target(arch)
    p = parse(_tf32_line(line)).problem
    spec = launch_spec(p, target, default_performance_config(p, target))
    _check_tf32_binary(inspect_nvidia(emit(spec).text, arch, tmp_path, "k"), spec)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("family,line", FAMILY_LINES)
def test_tf32_patch_and_nchw_pw_default_kernels(tmp_path, arch, family, line):
    target = get_target(arch)
    from miopen_solver.nchw_pw import is_patch
    p = parse(_tf32_line(line)).problem
    spec = launch_spec(p, target, default_performance_config(p, target))
    family = "patch_gemm" if is_patch(p) else family      # fp32 patch filters keep the patch GEMM
    assert spec.schedule.virtual_gemm and f"_{family}_" in spec.kernel_name
    _check_tf32_binary(inspect_nvidia(emit(spec).text, arch, tmp_path, "k"), spec)


@pytest.mark.parametrize("cfg", [PerfConfig(64, 64, 16, 2, 2, 32, 32, stages=2, lds_k_outer=0),
                                 PerfConfig(64, 64, 32, 2, 2, 32, 32, split_k=2, stages=3),
                                 PerfConfig(32, 16, 8, 1, 1, 32, 16, stages=1)], ids=lambda c: c.serialize())
def test_tf32_search_configs_build(tmp_path, cfg):
    """m-outer B tiles (8-byte B loads too), split-K atomics and one k8 step per tile."""
    p = parse(_tf32_line("conv -n 4 -c 96 -H 14 -W 14 -k 80 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2")
              + " --in_layout NHWC --out_layout NHWC --fil_layout NHWC -F 2").problem
    spec = make_spec(p, SM90, cfg)
    _check_tf32_binary(inspect_nvidia(emit(spec).text, "sm_90", tmp_path, "k"), spec)


# Narrow warpgroup tiles (tile_k 32 and warp_tile_n 32, the 64-byte swizzle) on the three zoo
# layers they are for (bench/zoo.txt: DenseNet-121 3x3 k32 at 56 and 14, the YOLOv5s stem
# 3x3/s2 c32, the MobileNetV2 1x1 c32 expand) and every narrow config of tests/test_gpu.py:
# m64n32k16 where warp_tile_n is 32, one wgmma per m64 per k16 step, 16-byte cp.async of
# both tiles, no spills, within the register cap the spec assumed.
_ZOO_NARROW = {
    "dense56": "-n 64 -c 128 -H 56 -W 56 -k 32 -y 3 -x 3 -p 1 -q 1 -u 1 -v 1",
    "dense14": "-n 64 -c 128 -H 14 -W 14 -k 32 -y 3 -x 3 -p 1 -q 1 -u 1 -v 1",
    "yolo_stem": "-n 16 -c 32 -H 320 -W 320 -k 64 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2",
    "mbv2_expand": "-n 64 -c 32 -H 28 -W 28 -k 192 -y 1 -x 1 -p 0 -q 0 -u 1 -v 1",
}
_NARROW_BUILDS = [(label, cfg) for label in _ZOO_NARROW for cfg in (
    "128,128,32,2,1,64,128,0,0,0,1,-1,4,1", "256,128,32,2,1,128,128,0,0,0,1,-1,4,1",
    "128,128,32,2,1,64,128,0,0,0,1,-1,4,2", "128,128,32,2,1,64,128,0,0,0,3,-1,4,1",
    "128,32,64,2,1,64,32,0,0,0,1,-1,4,1", "256,32,64,2,1,128,32,0,0,0,1,-1,3,1",
    "128,32,64,2,1,64,32,0,0,0,1,-1,3,2", "128,32,32,2,1,64,32,0,0,0,1,-1,4,1",
    "128,64,32,2,2,64,32,0,0,0,1,-1,2,1", "128,32,32,2,1,64,32,0,0,0,2,-1,3,1,2")]


def _warpgroup_build(tmp_path, args: str, cfg: str):
    """``(spec, built)`` of an fp16 NHWC line (``args`` after the base) at ``cfg`` on sm_90,
    checked: no spills, within the register cap, one wgmma of the tile's N per k16 step, no
    warp-MMA instruction. Skips where the config is not valid for the line."""
    from miopen_solver.errors import PerfConfigError
    from miopen_solver.spec import register_cap
    p = parse(f"convfp16 {args} -F 2 --in_layout NHWC --out_layout NHWC --fil_layout NHWC".split()).problem
    try:
        spec = make_spec(p, SM90, PerfConfig.parse(cfg))
    except PerfConfigError:
        pytest.skip("config not valid for this layer")
    c = spec.config
    b = inspect_nvidia(emit(spec).text, "sm_90", tmp_path, "k")
    assert b.spill_store_bytes == 0 and b.spill_load_bytes == 0, (spec.kernel_name, b.registers)
    assert b.registers <= register_cap(SM90, spec.block_threads), (spec.kernel_name, b.registers)
    assert b.count(f"wgmma.mma_async.sync.aligned.m64n{c.warp_tile_n}k16") >= spec.mma_m * c.tile_k // 16
    assert b.count("mma.sync") == 0 and b.count("ldmatrix") == 0
    return spec, b


@pytest.mark.parametrize("label,cfg", _NARROW_BUILDS, ids=[f"narrow-{l}-{c}" for l, c in _NARROW_BUILDS])
def test_narrow_wgmma_configs_build(tmp_path, label, cfg):
    spec, b = _warpgroup_build(tmp_path, _ZOO_NARROW[label], cfg)
    assert b.count("fence.proxy.async") >= 1
    if spec.vec_a == 8 or spec.vec_b == 8:
        assert CP16.search(b.ptx), f"{spec.kernel_name}: no 16-byte cp.async"


# warp_tile_n 96 and 192 (m64n96k16 with 64-byte swizzled W blocks, m64n192k16) on the zoo's
# small-image 1x1 layers they are for (bench/zoo.txt: ResNet-50 layer4.1.conv3 and
# layer3.1.conv3, MobileNetV2 features.18) and a 3x3: 128x96 and 128x192 tiles (two
# warpgroups of 64 x N) on the plain, persistent and TMA schedules, 4 stages and the deepest
# that fits (TMA: 7-8 for 128x96, 5 for 128x192; cp.async: 6); no spills, within the register
# cap, one wgmma per k16 step, TMA boxes and no per-thread copies on the TMA schedule.
_ZOO_N96 = {
    "layer4.1.conv3": "-n 64 -c 512 -H 7 -W 7 -k 2048 -y 1 -x 1 -p 0 -q 0 -u 1 -v 1",
    "layer3.1.conv3": "-n 64 -c 256 -H 14 -W 14 -k 1024 -y 1 -x 1 -p 0 -q 0 -u 1 -v 1",
    "features.18": "-n 64 -c 320 -H 7 -W 7 -k 1280 -y 1 -x 1 -p 0 -q 0 -u 1 -v 1",
    "3x3": "-n 64 -c 256 -H 14 -W 14 -k 256 -y 3 -x 3 -p 1 -q 1 -u 1 -v 1",
}
N96_BUILD_CONFIGS = (
    "128,96,64,2,1,64,96,0,0,0,1,-1,4,1", "128,96,64,2,1,64,96,0,0,0,1,-1,6,1",
    "128,192,64,2,1,64,192,0,0,0,1,-1,4,1", "128,192,64,2,1,64,192,0,0,0,1,-1,5,1",
    "128,96,64,2,1,64,96,0,0,0,1,-1,4,2", "128,192,64,2,1,64,192,0,0,0,1,-1,3,2",
    "128,96,64,2,1,64,96,0,0,0,1,-1,4,3", "128,96,64,2,1,64,96,0,0,0,1,-1,7,3",
    "128,96,64,2,1,64,96,0,0,0,1,-1,8,3", "128,192,64,2,1,64,192,0,0,0,1,-1,4,3",
    "128,192,64,2,1,64,192,0,0,0,1,-1,5,3", "128,96,64,2,1,64,96,0,0,0,2,-1,4,1")
_N96_BUILDS = [(label, cfg) for label in _ZOO_N96 for cfg in N96_BUILD_CONFIGS]


@pytest.mark.parametrize("label,cfg", _N96_BUILDS, ids=[f"n96-{l}-{c}" for l, c in _N96_BUILDS])
def test_n96_n192_wgmma_configs_build(tmp_path, label, cfg):
    spec, b = _warpgroup_build(tmp_path, _ZOO_N96[label], cfg)
    if spec.tma:
        assert b.count("cp.async.bulk.tensor") >= 2 and b.count("cp.async.cg") + b.count("cp.async.ca") == 0
    else:
        assert CP16.search(b.ptx), f"{spec.kernel_name}: no 16-byte cp.async"


# warp_tile_n 160 and 224 (m64n160k16 / m64n224k16, 5 and 7 64-byte swizzled 32-wide W
# blocks) on the zoo layers whose channels they fit (bench/zoo.txt: Inception-v3 Mixed_6c's
# 1x7 at 160 channels, DenseNet-121 denselayer6.conv1 at 224, EfficientNet-B0 features.5.1
# project at 672 = 3 x 224): plain, persistent, TMA and ping-pong, 4 stages and the deepest
# that fits; the same checks as above.
_ZOO_WIDE = {
    "Mixed_6c 1x7": "-n 32 -c 160 -H 17 -W 17 -k 160 -y 1 -x 7 -p 0 -q 3 -u 1 -v 1",
    "denselayer6.conv1": "-n 64 -c 224 -H 56 -W 56 -k 128 -y 1 -x 1 -p 0 -q 0 -u 1 -v 1",
    "features.5.1.project": "-n 64 -c 672 -H 14 -W 14 -k 112 -y 1 -x 1 -p 0 -q 0 -u 1 -v 1",
}
WIDE_BUILD_CONFIGS = (
    "128,160,64,2,1,64,160,0,0,0,1,-1,4,1", "128,160,64,2,1,64,160,0,0,0,1,-1,3,2",
    "128,160,64,2,1,64,160,0,0,0,1,-1,4,3", "128,160,64,2,1,64,160,0,0,0,1,-1,6,3",
    "64,160,64,1,1,64,160,0,0,0,1,-1,8,20", "128,224,64,2,1,64,224,0,0,0,1,-1,4,1",
    "128,224,64,2,1,64,224,0,0,0,1,-1,4,3", "128,224,64,2,1,64,224,0,0,0,1,-1,5,3",
    "64,224,64,1,1,64,224,0,0,0,1,-1,6,20")
_WIDE_BUILDS = [(label, cfg) for label in _ZOO_WIDE for cfg in WIDE_BUILD_CONFIGS]


@pytest.mark.parametrize("label,cfg", _WIDE_BUILDS, ids=[f"wide-{l}-{c}" for l, c in _WIDE_BUILDS])
def test_n160_n224_wgmma_configs_build(tmp_path, label, cfg):
    spec, b = _warpgroup_build(tmp_path, _ZOO_WIDE[label], cfg)
    if spec.tma:
        assert b.count("cp.async.bulk.tensor") >= 1 + spec.config.tile_n // 32
        assert b.count("cp.async.cg") + b.count("cp.async.ca") == 0
    else:
        assert CP16.search(b.ptx), f"{spec.kernel_name}: no 16-byte cp.async"


# The NCHW TMA schedule (13): every tile of its search on an NCHW 1x1, a 7x1 and a 3x3 layer
# (tile_m 64/128 x 1, 2, 4 rows of 64 columns, 3-4 stages; the 3x3's column shifts take the
# shifting producer, one consumer warpgroup, the tiles whose staging rows fit): no spills,
# within the register cap, one wgmma per k16 step, tensor copies and no cp.async.
_NCHW_TMA_LINES = {
    "1x1": "convfp16 -n 64 -c 256 -H 56 -W 56 -k 128 -y 1 -x 1 -F 2",
    "7x1": "convbfp16 -n 32 -c 192 -H 16 -W 16 -k 160 -y 7 -x 1 -p 3 -q 0 -F 2",
    "3x3 shifting": "convfp16 -n 32 -c 64 -H 56 -W 56 -k 64 -y 3 -x 3 -p 1 -q 1 -F 2",
}


@pytest.mark.parametrize("label", sorted(_NCHW_TMA_LINES))
def test_nchw_tma_search_configs_build(tmp_path, label):
    from miopen_solver.config import KernelSchedule
    from miopen_solver.heuristics import search_space
    from miopen_solver.spec import register_cap
    p = parse(_NCHW_TMA_LINES[label].split()).problem
    from miopen_solver.errors import PerfConfigError
    aligned = p.replace(Y=1, X=1, pH=0, pW=0)           # the shifting producer is in no search: the same tiles
    cfgs = [c for c in search_space(aligned, SM90) if c.schedule is KernelSchedule.NCHW_TMA]
    assert len(cfgs) >= 10
    built = 0
    for c in cfgs:
        try:
            spec = launch_spec(p, SM90, c)
        except PerfConfigError:     # the shifting producer takes one consumer warpgroup
            continue
        built += 1
        b = inspect_nvidia(spec.emit().text, "sm_90", tmp_path, "k")
        assert b.spill_store_bytes == 0 and b.spill_load_bytes == 0, (spec.kernel_name, b.registers)
        assert b.registers <= register_cap(SM90, spec.block_threads), (spec.kernel_name, b.registers)
        assert b.count(f"wgmma.mma_async.sync.aligned.m64n{c.warp_tile_n}k16") >= spec.mma_m * c.tile_k // 16
        # A and B (or the shifting producer's staging rows) by tensor copies, no per-thread copies
        assert b.count("cp.async.bulk.tensor.4d") >= 2 and b.count("cp.async.cg") + b.count("cp.async.ca") == 0
        if spec.shifting:       # the producer's shifts: 16-byte shared-memory loads and stores
            assert b.count("ld.shared.v4") > 0 and b.count("st.shared.v4") > 0
    assert built >= 4


WRAPPER_CASES = [(n, dt, "tf32" if dt == "fp32" else dt) for n in (32, 64, 96, 128, 160, 192, 224, 256)
                 for dt in ("fp16", "bf16")] + [(n, "fp32", "tf32") for n in (64, 128, 256)]


@pytest.mark.parametrize("n,dtype,math", WRAPPER_CASES, ids=[f"n{n}_{m}" for n, _, m in WRAPPER_CASES])
def test_generated_wgmma_wrapper_is_one_instruction_of_its_shape(tmp_path, n, dtype, math):
    """emit.wgmma_wrapper's text, called from a kernel, is one wgmma of m64 x n with n/2 fp32
    accumulator registers, the descriptors and the operand forms of its element type."""
    from miopen_solver.kernels.emit import wgmma_wrapper
    text = ("#define DG_DEVICE __device__ __forceinline__\n" + wgmma_wrapper(n, dtype, math) +
            "extern \"C\" __global__ void k(float* out, unsigned long long a, unsigned long long b) {\n"
            f"    float d[{n // 2}];\n"
            f"    for (int i = 0; i < {n // 2}; ++i) d[i] = out[i];\n"
            "    dg_wgmma(d, a, b);\n"
            f"    for (int i = 0; i < {n // 2}; ++i) out[i] = d[i];\n"
            "}\n")
    ptx = inspect_nvidia(text, "sm_90", tmp_path, "w").ptx
    ops = [line.strip() for line in ptx.splitlines() if "wgmma.mma_async" in line]
    assert len(ops) == 1, ops
    k, ab = ("k8", "tf32") if math == "tf32" else ("k16", {"fp16": "f16", "bf16": "bf16"}[dtype])
    m = re.match(rf"wgmma\.mma_async\.sync\.aligned\.m64n{n}{k}\.f32\.{ab}\.{ab}\s*\{{([^}}]*)\}},\s*(.*);", ops[0])
    assert m, ops[0]
    assert len(m.group(1).split(",")) == n // 2
    rest = [x.strip() for x in m.group(2).split(",")]
    # a_desc, b_desc (64-bit), the scale-d predicate, imm-scale-a/-b 1, and for 16-bit types
    # imm-trans-a 0 (A K-major) and imm-trans-b 1 (B MN-major)
    assert rest[3:] == (["1", "1"] if math == "tf32" else ["1", "1", "0", "1"]), rest
    assert rest[0].startswith("%rd") and rest[1].startswith("%rd") and rest[2] == "p"


@pytest.mark.parametrize("n,dtype,math", [(100, "fp16", "fp16"), (264, "bf16", "bf16"), (0, "fp16", "fp16"),
                                          (64, "fp32", "fp32")])
def test_generated_wgmma_wrapper_refuses_shapes_the_isa_has_not(n, dtype, math):
    from miopen_solver.kernels.emit import wgmma_wrapper
    with pytest.raises(ValueError):
        wgmma_wrapper(n, dtype, math)


# Every TMA schedule's direct epilogue (NHWC dX, the patch scatter, the sub-pixel phases, the
# ping-pong warpgroups) builds 16-byte dX chunks in registers: each is one 16-byte store on
# every schedule the search offers, not only on the defaults the tests above build.
STORE_LINES = {
    "patch": "convfp16 -n 8 -c 3 -H 224 -W 224 -k 768 -y 16 -x 16 -u 16 -v 16",
    "strided": "convfp16 -n 8 -c 128 -H 56 -W 56 -k 128 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2",
    "dense": "convbfp16 -n 8 -c 128 -H 28 -W 28 -k 128 -y 3 -x 3 -p 1 -q 1",
}
TMA_STORE_CASES = [("patch", 10), ("patch", 21), ("strided", 3), ("strided", 17), ("strided", 20),
                   ("strided", 22), ("dense", 3), ("dense", 20)]


@pytest.mark.parametrize("kind,schedule", TMA_STORE_CASES, ids=[f"{k}-{s}" for k, s in TMA_STORE_CASES])
def test_tma_schedules_store_whole_dx_chunks(tmp_path, kind, schedule):
    from miopen_solver.solver import DgradSolver
    line = STORE_LINES[kind] + " -F 2 --in_layout NHWC --out_layout NHWC --fil_layout NHWC"
    p, solver = parse(line).problem, DgradSolver()
    cfg = next(c for c in solver.search(p, SM90) if c.schedule.value == schedule and c.split_k == 1)
    spec = solver.find_solution(p, SM90, perf_config=cfg).spec
    assert spec.tma and spec.split_k == 1, spec.kernel_name
    assert_dx_store_width(inspect_nvidia(emit(spec).text, "sm_90", tmp_path, "k"), spec, 16)
