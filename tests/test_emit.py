"""The emitter: defines, sub-GEMM records, launch geometry, and the binary cache key."""

from __future__ import annotations

import os
import re
import shutil
import threading

import pytest

from miopen_solver.command import parse
from miopen_solver.kernels import emit, emit_reference
from miopen_solver.kernels.emit import SUB_FIELDS, sub_gemm_records
from miopen_solver.runtime.cache import BinaryCache, cache_key
from miopen_solver.spec import PerfConfig, make_spec
from miopen_solver.target import get_target

NHWC = "-F 2 --in_layout NHWC --out_layout NHWC --fil_layout NHWC"
SM90 = get_target("sm_90")


def spec_for(line: str, cfg: PerfConfig = PerfConfig(128, 64, 32, 2, 2, 64, 32), arch: str = "sm_90"):
    return make_spec(parse(f"{line} {NHWC}").problem, get_target(arch), cfg)


def defines(src) -> dict:
    return dict(src.defines)


def test_defines_carry_problem_and_config():
    s = spec_for("convfp16 -n 2 -c 64 -H 9 -W 7 -k 32 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2")
    d = defines(emit(s))
    # Ho = (9 + 2 - 2 - 1)//2 + 1 = 5, Wo = (7 + 2 - 2 - 1)//2 + 1 = 4
    assert (d["DG_HO"], d["DG_WO"], d["DG_CPG"], d["DG_KPG"]) == (5, 4, 64, 32)
    assert (d["DG_TILE_M"], d["DG_TILE_N"], d["DG_TILE_K"], d["DG_THREADS"]) == (128, 64, 32, 128)
    assert d["DG_DTYPE"] == 1 and d["DG_ATOM"] == 0 and d["DG_ASYNC"] == 1
    assert d["DG_YTILDE"] == 2 and d["DG_XTILDE"] == 2 and d["DG_NSUB"] == 4


def test_sub_gemm_records_block_starts_accumulate_tiles():
    s = spec_for("convfp16 -n 2 -c 64 -H 9 -W 7 -k 32 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2")
    recs = sub_gemm_records(s)
    assert len(recs) == len(s.sub_gemms) == 4
    start = SUB_FIELDS.index("block_start")
    expected, acc = [], 0
    for sub in s.sub_gemms:
        expected.append(acc)
        acc += -(-sub.gemm_m // 128) * -(-sub.gemm_n // 64)
    assert [r[start] for r in recs] == expected
    assert acc == s.tiles_per_group
    text = emit(s).text
    assert "#define DG_SUB_TABLE {" in text and "DG_SUB0" not in text.split("\n#if DG_NSUB")[0]


def test_single_sub_gemm_is_folded_into_constants():
    s = spec_for("convfp16 -n 2 -c 64 -H 8 -W 8 -k 32 -y 3 -x 3 -p 1 -q 1")
    text = emit(s).text
    assert re.search(r"^#define DG_SUB0 ", text, re.M)
    assert not re.search(r"^#define DG_SUB_TABLE", text, re.M)


def test_grid_is_tiles_groups_split():
    s = spec_for("convfp16 -n 2 -c 64 -H 8 -W 8 -k 64 -y 3 -x 3 -p 1 -q 1 -g 2",
                 PerfConfig(64, 32, 32, 2, 1, 32, 32, split_k=2, stages=2))
    src = emit(s)
    assert src.grid == (s.tiles_per_group, 2, 2)
    assert src.pre_memset and s.zero_fill == "memset"
    assert src.block == (64, 1, 1) and src.shared_bytes == s.lds_bytes


def test_zero_fill_blocks_only_where_pixels_are_uncovered():
    covered = spec_for("convfp16 -n 2 -c 64 -H 8 -W 8 -k 32 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2")
    assert covered.zero_fill == "none" and covered.zero_fill_blocks == 0
    s = spec_for("convfp16 -n 2 -c 64 -H 8 -W 8 -k 32 -y 1 -x 1 -u 2 -v 2")
    assert s.zero_fill == "blocks"
    # units = N*Hi*Wi*C/8 = 2*8*8*64/8 = 1024 16-byte stores over 128 threads -> 8 blocks
    assert s.zero_fill_blocks == 8
    assert emit(s).grid[0] == s.tiles_per_group + 8


def test_pointwise_flag_and_grouped_pointwise():
    pw = spec_for("convfp16 -n 2 -c 64 -H 8 -W 8 -k 32 -y 1 -x 1 -g 4", PerfConfig(64, 16, 16, 4, 1, 16, 16))
    assert pw.pointwise and defines(emit(pw))["DG_POINTWISE"] == 1
    strided = spec_for("convfp16 -n 2 -c 64 -H 8 -W 8 -k 32 -y 1 -x 1 -u 2 -v 2")
    assert not strided.pointwise and defines(emit(strided))["DG_POINTWISE"] == 0


def test_amd_emission_uses_mfma_and_no_async_copies():
    s = spec_for("convbfp16 -n 2 -c 64 -H 8 -W 8 -k 32 -y 3 -x 3 -p 1 -q 1",
                 PerfConfig(64, 64, 32, 2, 2, 32, 32, stages=2), arch="gfx942")
    src = emit(s)
    d = defines(src)
    assert src.vendor == "amd" and "#define DG_VENDOR_AMD 1" in src.text
    assert d["DG_ATOM"] == 1 and d["DG_ASYNC"] == 0 and d["DG_WAVE"] == 64


def test_kernel_name_is_the_entry_point_and_hash_covers_text():
    s = spec_for("convfp16 -n 2 -c 64 -H 8 -W 8 -k 32 -y 3 -x 3 -p 1 -q 1")
    a, b = emit(s), emit(s)
    assert a.sha256 == b.sha256 and a.name == s.kernel_name
    assert f"#define DG_KERNEL_NAME {s.kernel_name}" in a.text
    other = emit(spec_for("convfp16 -n 2 -c 64 -H 8 -W 8 -k 32 -y 3 -x 3 -p 1 -q 1",
                          PerfConfig(128, 64, 32, 2, 2, 64, 32, stages=4)))
    assert other.sha256 != a.sha256 and other.name != a.name


def test_reference_kernel_covers_every_dx_element():
    p = parse(f"convfp16 -n 3 -c 5 -H 7 -W 9 -k 4 -y 3 -x 3 {NHWC}").problem
    src = emit_reference(p, "nvidia", "sm_90")
    assert src.grid[0] * src.block[0] >= p.dx_elems > (src.grid[0] - 1) * src.block[0]


# ------------------------------------------------------------------ binary cache
def test_cache_key_depends_on_every_input():
    base = cache_key("text", "sm_90", "nvrtc-13.0", ["-O3"])
    assert len({base, cache_key("text2", "sm_90", "nvrtc-13.0", ["-O3"]),
                cache_key("text", "sm_80", "nvrtc-13.0", ["-O3"]),
                cache_key("text", "sm_90", "nvrtc-13.1", ["-O3"]),
                cache_key("text", "sm_90", "nvrtc-13.0", ["-O2"])}) == 5


def test_cache_roundtrip_and_env_override(tmp_path, monkeypatch):
    monkeypatch.setenv("MIOPEN_DGRAD_CACHE_DIR", str(tmp_path / "c"))
    cache = BinaryCache()
    assert cache.dir == tmp_path / "c"
    assert cache.get("k") is None
    cache.put("k", b"\x7fELF" + bytes(100))
    assert cache.get("k") == b"\x7fELF" + bytes(100)
    assert [p.name for p in cache.dir.iterdir()] == ["k.bin"]  # no temporary files left


def test_concurrent_writers_leave_a_whole_binary(tmp_path):
    cache = BinaryCache(tmp_path)
    blobs = [bytes([i]) * 1_000_000 for i in range(8)]
    threads = [threading.Thread(target=cache.put, args=("same", b)) for b in blobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert cache.get("same") in blobs
    assert sorted(os.listdir(tmp_path)) == ["same.bin"]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
@pytest.mark.parametrize("define,value,message", [
    ("DG_TILE_K", 32, "tile_k % 64 == 0"),                   # warpgroup rule
    ("DG_SPLIT_K", 2, "persistent schedules store each tile once"),
    ("DG_CPG", 12, "multiples of 16 bytes"),                # TMA rule
])
def test_kernel_guards_refuse_what_the_rules_refuse(tmp_path, define, value, message):
    """dgrad.cu's static_asserts mirror the schedule rules: a TMA source whose defines the
    rules would refuse does not compile."""
    from miopen_solver.errors import CompileError
    from miopen_solver.kernels.offline import compile_nvidia
    from miopen_solver.solver import DgradSolver
    p = parse(("convfp16 -n 8 -c 128 -H 14 -W 14 -k 128 -y 3 -x 3 -p 1 -q 1 -F 2 " + NHWC).split()).problem
    sol = DgradSolver().get_solution(p, get_target("sm_90"), PerfConfig(128, 128, 64, 1, 1, 128, 128, 0, 0, 0, 1, -1,
                                                                        4, 3))
    text = sol.kernels[0].source.text
    assert f"#define {define} " in text
    bad = re.sub(rf"#define {define} \d+", f"#define {define} {value}", text, count=1)
    with pytest.raises(CompileError, match=re.escape(message)):
        compile_nvidia(bad, "sm_90", tmp_path, "k")
