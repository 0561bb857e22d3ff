"""PerfConfig serialisation, DgradSpec validation and derived values, kernel names, the
default-config heuristic, and the contract "every config that validates builds".

Expected numbers are worked out by hand in the comments (formulas from research
dgrad_kernels.md sections 2 and 3), never read back from the module under test.
"""

import collections
import dataclasses
import hashlib
import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from miopen_solver.config import KernelSchedule
from miopen_solver.errors import PerfConfigError
from miopen_solver.problem import ConvProblem
from miopen_solver.config import FIELDS
from miopen_solver.spec import MAX_SPLIT_K, PerfConfig, is_valid_performance_config, make_spec, split_k_atomics_reason
from miopen_solver.heuristics import FALLBACK_CONFIGS, TMA_DEFAULT, default_performance_config, heuristic_config
from miopen_solver.target import PRESETS, get_target

try:
    from miopen_solver.kernels import emit
except ImportError as e:  # pragma: no cover - the lead's package exists on main
    emit = None
    EMIT_SKIP = f"miopen_solver.kernels.emit is not importable: {e}"
else:
    EMIT_SKIP = ""
needs_emit = pytest.mark.skipif(emit is None, reason=EMIT_SKIP or "emit available")


def nhwc(**kw):
    base = dict(N=2, C=64, Hi=8, Wi=8, K=64, Y=3, X=3, pH=1, pW=1, dtype="fp16",
                in_layout="NHWC", out_layout="NHWC", fil_layout="NHWC")
    base.update(kw)
    return ConvProblem(**base)


SM90, SM80, GFX942, GFX950, GFX90A = (get_target(a) for a in ("sm_90", "sm_80", "gfx942", "gfx950", "gfx90a"))
C64 = PerfConfig(64, 64, 32, 2, 2, 32, 32, 0, 0, 0, 1, -1, 2)


# ------------------------------------------------------------------ PerfConfig text form
def test_serialize_field_order():
    cfg = PerfConfig(128, 64, 32, 2, 2, 64, 32, 8, 4, 2, -1, 0, 3)
    assert cfg.serialize() == "128,64,32,2,2,64,32,8,4,2,-1,0,3"
    assert str(cfg) == cfg.serialize()
    assert FIELDS[0] == "tile_m" and FIELDS[12] == "stages" and FIELDS[13] == "schedule"
    assert FIELDS[-1] == "split_k_reduce" and len(FIELDS) == 15


def test_wgmma_field_is_optional_and_written_only_when_set():
    # The 14th field keeps every 13-field record (perf-db, fixtures) meaning what it meant.
    assert PerfConfig.parse("128,64,32,2,2,64,32,8,4,2,-1,0,3").schedule == 0
    assert PerfConfig.parse("128,64,32,2,2,64,32,8,4,2,-1,0,3,0").serialize() == "128,64,32,2,2,64,32,8,4,2,-1,0,3"
    cfg = PerfConfig.parse("128,128,64,2,1,64,128,0,0,0,1,-1,4,1")
    assert cfg.schedule == 1 and cfg.serialize() == "128,128,64,2,1,64,128,0,0,0,1,-1,4,1"
    for bad in ("1,2,3,4,5,6,7,8,9,10,11,12", "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16"):
        with pytest.raises(PerfConfigError, match="expected 13 to 15"):
            PerfConfig.parse(bad)
    # the 14th field is a KernelSchedule code; an unknown code is refused where it is read
    assert PerfConfig.parse("128,128,64,2,1,64,128,0,0,0,1,-1,4,3").schedule is KernelSchedule.WGMMA_TMA
    for bad in ("-1", str(max(KernelSchedule) + 1), "99"):       # the first code past the last schedule
        with pytest.raises(PerfConfigError, match=f"schedule={bad} is not a kernel schedule; allowed: 0 "):
            PerfConfig.parse("128,128,64,2,1,64,128,0,0,0,1,-1,3," + bad)


def test_split_k_reduce_field_is_optional_and_written_only_when_set():
    # The 15th field: 0 auto, 1 atomic, 2 workspace, 3 stream-K; written (with the schedule, 0
    # or not) only when it is not 0, so 13- and 14-field records read and write as before.
    base = "64,64,32,2,2,32,32,0,0,0,2,-1,2"
    assert PerfConfig.parse(base + ",0,0").serialize() == base
    assert PerfConfig.parse(base + ",1,0").serialize() == base + ",1"
    ws = PerfConfig.parse(base + ",0,2")
    assert (ws.split_k_reduce, ws.reduce, ws.serialize()) == (2, "workspace", base + ",0,2")
    assert PerfConfig.parse(base + ",1,1").reduce == "atomic" and PerfConfig.parse(base).reduce == "auto"
    assert PerfConfig.parse(base + ",3,3").reduce == "stream"
    for bad in ("-1", "4", "9"):
        with pytest.raises(PerfConfigError, match=f"split_k_reduce={bad} is not a split-K reduction; allowed: "
                                                  r"0 \(auto\), 1 \(atomic\), 2 \(workspace\), 3 \(stream\)"):
            PerfConfig.parse(f"{base},0,{bad}")


@given(st.lists(st.integers(-5, 4096), min_size=13, max_size=13),
       st.one_of(st.just(None), st.sampled_from([0, 1, 2, 3])), st.one_of(st.just(None), st.sampled_from([0, 1, 2, 3])))
def test_round_trip(values, schedule, reduce):
    values = values + ([] if schedule is None else [schedule])
    if reduce is not None:
        values = values + ([0] if schedule is None else []) + [reduce]
    cfg = PerfConfig(*values)
    assert PerfConfig.parse(cfg.serialize()) == cfg


@pytest.mark.parametrize("text,match", [
    ("", "perf config is empty; expected 13 to 15 comma-separated integers: tile_m,"),
    ("   ", "tile_m='   ' is not an integer; expected 13 to 15"), ('""', """tile_m='""' is not an integer"""),
    ("1,2,3", "has 3 fields; expected 13 to 15: tile_m,tile_n"),
    ("128,128,32,2,2,64,64,0,0,0,1,-1,3,0,2,9", "has 16 fields"),
    ("128,128,32,2,2,64,64,0,0,0,one,-1,3", "split_k='one' is not an integer"),
    ("128,128,32,2,2,64,64,0,0,0,1,,3", "lds_k_outer='' is not an integer"),
    ("128;128;32", "tile_m='128;128;32' is not an integer; expected 13 to 15 comma-separated integers"),
    ("abc", "tile_m='abc' is not an integer"),         # a field that is no number is named, not counted
    ("1.5,128,32,2,2,64,64,0,0,0,1,-1,3", "tile_m='1.5'"),
])
def test_parse_errors_name_the_problem(text, match):
    with pytest.raises(PerfConfigError, match=re.escape(match) if "'" not in match else match):
        PerfConfig.parse(text)


def test_parse_rejects_non_strings():
    with pytest.raises(PerfConfigError, match="must be a string"):
        PerfConfig.parse(None)


@pytest.mark.parametrize("bad", [1.5, True, "8", None])
def test_fields_must_be_integers(bad):
    with pytest.raises(PerfConfigError, match="tile_k must be an integer"):
        PerfConfig(tile_k=bad)


# ------------------------------------------------------------------ validation rules
def _reason(problem, target, cfg):
    ok, why = is_valid_performance_config(problem, target, cfg)
    assert not ok
    with pytest.raises(PerfConfigError):
        make_spec(problem, target, cfg)
    return why


@pytest.mark.parametrize("cfg,match", [
    (C64.replace(tile_m=96), "tile_m 96 is not a multiple of warp_m\\*warp_tile_m = 64"),
    (C64.replace(tile_n=48), "tile_n 48 is not a multiple of warp_n\\*warp_tile_n = 64"),
    (C64.replace(tile_m=48, warp_tile_m=24, warp_m=2), "not a multiple of any fp16 atom"),
    (C64.replace(tile_k=8), "not a multiple of any fp16 atom"),           # mma k = 16
    (C64.replace(warp_m=0), "warp_m must be >= 1"),
    (C64.replace(stages=0), "stages must be >= 1"),
    (C64.replace(stages=7), "stages must be <= 6"),
    (C64.replace(split_k=0), "split_k must be -1 \\(choose\\) or >= 1, got 0"),
    (C64.replace(split_k=-2), "split_k must be -1"),
    (C64.replace(split_k=MAX_SPLIT_K + 1), "split_k must be <= 64"),
    (C64.replace(lds_k_outer=2), "lds_k_outer must be -1 \\(auto\\), 0 or 1"),
    (C64.replace(vector_size_a=6), "vector_size_a must be 0 \\(auto\\) or a power of two"),
    (C64.replace(vector_size_c=-2), "vector_size_c must be 0"),
])
def test_rule_violations_have_reasons(cfg, match):
    assert re.search(match, _reason(nhwc(), SM90, cfg))


def test_block_size_bound():
    # 4x4 warps of 64 lanes = 1024 threads is the limit on gfx942; 8x4 = 2048 exceeds it.
    ok = PerfConfig(128, 128, 32, 4, 4, 32, 32, 0, 0, 0, 1, -1, 2)
    assert is_valid_performance_config(nhwc(), GFX942, ok)[0]
    bad = PerfConfig(256, 128, 32, 8, 4, 32, 32, 0, 0, 0, 1, -1, 2)
    assert "block of 2048 threads exceeds gfx942's 1024" in _reason(nhwc(), GFX942, bad)


def test_accumulator_bound():
    # A block owns tile_m*tile_n fp32 accumulators spread over its threads:
    # 256*128 / (2*2*32) = 256 per lane > 128 on sm_90; 128*128/128 = 128 is the limit.
    bad = PerfConfig(256, 128, 32, 2, 2, 128, 64, 0, 0, 0, 1, -1, 3)
    assert "256 accumulators per lane exceed sm_90's safe bound 128" in _reason(nhwc(), SM90, bad)
    ok = PerfConfig(128, 128, 32, 2, 2, 64, 64, 0, 0, 0, 1, -1, 3)
    assert make_spec(nhwc(), SM90, ok).accumulators_per_lane == 128
    # AMD: 256*256/(4*64) = 256 per lane is allowed (bound 256); gfx950 has the LDS for
    # the 256x256 epilogue tile (256*(256+8)*2 = 135168 bytes).
    big = PerfConfig(256, 256, 16, 2, 2, 128, 128, 0, 0, 0, 1, -1, 1)
    assert make_spec(nhwc(), GFX950, big).accumulators_per_lane == 256


@pytest.mark.parametrize("target,cfg,k_outer,lds", [
    # fp16 pad = 16 bytes = 8 elements. k-outer B: tile_k x (tile_n + pad); m-outer: tile_n x (tile_k + pad).
    # The staged epilogue's C tile, tile_m x (tile_n + pad), reuses the same memory: the
    # larger of the two counts. Here the main loop is larger (C tiles: 34816, 34816, 5120).
    (SM90, PerfConfig(128, 128, 32, 2, 2, 64, 64, 0, 0, 0, 1, -1, 3), True, 3 * (128 * 40 + 32 * 136) * 2),
    (GFX942, PerfConfig(128, 128, 32, 2, 2, 64, 64, 0, 0, 0, 1, -1, 2), False, 2 * (128 * 40 + 128 * 40) * 2),
    (SM90, PerfConfig(64, 32, 64, 2, 1, 32, 32, 0, 0, 0, 1, 0, 4), False, 4 * (64 * 72 + 32 * 72) * 2),
])
def test_lds_bytes_count_padding_and_stages(target, cfg, k_outer, lds):
    spec = make_spec(nhwc(), target, cfg)
    assert spec.lds_k_outer is k_outer
    assert spec.lds_bytes == lds
    assert spec.lds_pad == 8


def test_lds_epilogue_tile_can_dominate():
    # 128x128x16, one stage, m-outer: main loop (128*24 + 128*24)*2 = 12288 bytes; the C tile
    # 128*(128+8)*2 = 34816 bytes. Split-K adds atomically from registers: no C tile.
    cfg = PerfConfig(128, 128, 16, 2, 2, 64, 64, 0, 0, 0, 1, 0, 1)
    assert make_spec(nhwc(), GFX942, cfg).lds_bytes == 34816
    assert make_spec(nhwc(), GFX942, cfg.replace(split_k=2)).lds_bytes == 12288


def test_fp32_lds_pad_is_four_elements():
    cfg = PerfConfig(64, 64, 16, 2, 2, 32, 32, 0, 0, 0, 1, -1, 2)
    spec = make_spec(nhwc(dtype="fp32"), GFX942, cfg)
    assert spec.lds_pad == 4 and spec.lds_k_outer
    assert spec.lds_bytes == 2 * (64 * 20 + 16 * 68) * 4     # > C tile 64*68*4 = 17408


def test_lds_capacity():
    # 256x256x64 fp16 m-outer, 2 stages: 2*(256*72 + 256*72)*2 = 147456 bytes > 65536.
    cfg = PerfConfig(256, 256, 64, 2, 2, 128, 128, 0, 0, 0, 1, 0, 2)
    assert "147456 bytes of shared memory exceed gfx942's 65536" in _reason(nhwc(), GFX942, cfg)
    assert make_spec(nhwc(), GFX950, cfg).lds_bytes == 147456      # 160 KiB fits


def test_stages_need_async_copy():
    assert "stages 3 > 2 needs asynchronous copies, which gfx942 lacks" in _reason(nhwc(), GFX942, C64.replace(stages=3))
    assert make_spec(nhwc(), SM90, C64.replace(stages=4)).config.stages == 4


def test_problem_level_rejections():
    p3 = ConvProblem(N=1, C=8, Hi=4, Wi=4, K=8, Y=1, X=1, spatial_dim=3, Di=4, Z=1,
                     in_layout="NDHWC", out_layout="NDHWC", fil_layout="NDHWC", dtype="fp16")
    assert "3-D" in _reason(p3, SM90, C64)
    assert "transposed" in _reason(nhwc(mode="trans"), SM90, C64)
    assert "no matrix atom for int8" in _reason(nhwc(dtype="int8"), SM90, C64)


# ------------------------------------------------------------------ split-K
def test_split_k_rules():
    # atomics asked for (split_k_reduce 1) where they are refused: the reason, and the way out
    atomic = C64.replace(split_k=2, split_k_reduce=1)
    odd = nhwc(C=63)
    assert "needs an even cpg" in _reason(odd, SM90, atomic)
    assert "split_k_reduce 2 (workspace) has no such rule" in _reason(odd, SM90, atomic)
    assert "needs an even cpg" in _reason(nhwc(dtype="bf16", C=63), GFX942, atomic)
    assert "gfx90a has no packed bf16 atomic" in _reason(nhwc(dtype="bf16"), GFX90A, atomic)
    assert "sm_80 has no packed bf16 atomic" in _reason(nhwc(dtype="bf16"), SM80, atomic.replace(stages=3))
    fp32 = make_spec(nhwc(dtype="fp32", C=63), GFX942, C64.replace(tile_k=16, split_k=4))
    assert (fp32.split_k, fp32.zero_fill, fp32.vec_c, fp32.split_k_reduce) == (4, "memset", 1, "atomic")
    fp16 = make_spec(nhwc(), GFX90A, C64.replace(split_k=2))
    assert (fp16.split_k, fp16.zero_fill, fp16.vec_c, fp16.split_k_reduce) == (2, "memset", 2, "atomic")
    # auto where atomics are refused: the workspace (any cpg, any target), no memset
    for p, t in ((odd, SM90), (nhwc(dtype="bf16", C=63), GFX942), (nhwc(dtype="bf16"), GFX90A)):
        spec = make_spec(p, t, C64.replace(split_k=2))
        assert (spec.split_k_reduce, spec.zero_fill, spec.workspace_reduce) == ("workspace", "none", True)
        assert "_skws_" in spec.kernel_name and spec.workspace_bytes > 0
        assert "_skws" not in make_spec(p, t, C64).kernel_name                 # split 1: nothing to reduce


def test_split_k_minus_one_is_resolved():
    # Odd cpg with fp16 cannot split: -1 resolves to 1, never to -1.
    assert make_spec(nhwc(C=63), SM90, C64.replace(split_k=-1)).split_k == 1
    # A tiny output (1 tile) with a deep reduction on 304 CUs: 1x1, N*H*W = 64 rows, cpg 64,
    # K = 4096 fp32 -> 4096/16 = 256 k-tiles. Doubling while 2*split tiles <= 304 and each
    # slice keeps >= 4 k-tiles: 2, 4, ..., 64 (256/64 = 4), capped at 64.
    p = ConvProblem(N=1, C=64, Hi=8, Wi=8, K=4096, Y=1, X=1, dtype="fp32",
                    in_layout="NHWC", out_layout="NHWC", fil_layout="NHWC")
    spec = make_spec(p, GFX942, C64.replace(tile_k=16, split_k=-1))
    assert spec.split_k == 64 and spec.zero_fill == "memset" and spec.config.split_k == -1
    assert spec.as_dict()["split_k"] == 64
    # A full machine never splits: 32*56*56/64 = 3136 row tiles.
    big = ConvProblem(N=32, C=64, Hi=56, Wi=56, K=4096, Y=1, X=1, dtype="fp32",
                      in_layout="NHWC", out_layout="NHWC", fil_layout="NHWC")
    assert make_spec(big, GFX942, C64.replace(tile_k=16, split_k=-1)).split_k == 1


# ------------------------------------------------------------------ lds_k_outer policy
@pytest.mark.parametrize("target,dtype,C,want", [
    (GFX942, "fp16", 64, False),   # no transposing LDS read on CDNA3
    (GFX942, "bf16", 64, False),
    (GFX950, "fp16", 64, True),    # ds_read_b64_tr_b16, even cpg
    (GFX950, "bf16", 63, False),   # odd cpg: W loads are scalar, transpose only costs
    (SM90, "fp16", 64, True),      # ldmatrix.trans
    (SM90, "fp16", 65, False),
    (SM80, "bf16", 32, True),
    (GFX942, "fp32", 63, True),    # FFMA reads either layout
    (SM90, "fp32", 64, True),
])
def test_lds_k_outer_auto(target, dtype, C, want):
    cfg = C64.replace(tile_k=16 if dtype == "fp32" else 32)
    assert make_spec(nhwc(dtype=dtype, C=C), target, cfg).lds_k_outer is want


def test_lds_k_outer_forced():
    assert make_spec(nhwc(), SM90, C64.replace(lds_k_outer=0)).lds_k_outer is False
    assert make_spec(nhwc(), GFX950, C64.replace(lds_k_outer=1)).lds_k_outer is True
    assert make_spec(nhwc(C=63), SM90, C64.replace(lds_k_outer=1)).lds_k_outer is True
    why = _reason(nhwc(), GFX942, C64.replace(lds_k_outer=1))
    assert why == "lds_k_outer=1 needs a transposing LDS fragment read for fp16, which gfx942 lacks"
    fp32 = make_spec(nhwc(dtype="fp32"), GFX942, C64.replace(tile_k=16, lds_k_outer=1))
    assert fp32.lds_k_outer is True


# ------------------------------------------------------------------ launch limits
def test_grid_limits():
    small = SM90.with_(max_grid=(100, 65535, 65535))
    # 2*8*8 = 128 rows -> 2 row tiles x 1 column tile; 3x3 s1 -> 1 sub-GEMM: 2 tiles fit.
    assert make_spec(nhwc(), small, C64).tiles_per_group == 2
    assert "3 tiles per group exceed sm_90's grid limit 2 along x" in _reason(
        nhwc(N=3), SM90.with_(max_grid=(2, 65535, 65535)), C64)
    deep = ConvProblem(N=1, C=65536, Hi=1, Wi=1, K=65536, Y=1, X=1, G=65536, dtype="fp16",
                       in_layout="NHWC", out_layout="NHWC", fil_layout="NHWC")
    assert "G=65536 groups exceed sm_90's grid limit 65535 along y" in _reason(deep, SM90, C64)
    # AMD: blocks x threads <= 2^32-1. 1x1 over N*H*W = 2^26*16 = 2^30 rows with 16-row tiles
    # = 2^26 tiles x 64 threads = 2^32 work-items (NVIDIA: 32 threads, 2^31, fine).
    huge = ConvProblem(N=2**26, C=16, Hi=4, Wi=4, K=16, Y=1, X=1, dtype="fp16",
                       in_layout="NHWC", out_layout="NHWC", fil_layout="NHWC")
    tiny = PerfConfig(16, 16, 16, 1, 1, 16, 16, 0, 0, 0, 1, -1, 1)
    assert "67108864 tiles x 64 threads exceed gfx942's 4294967295 work-items" in _reason(huge, GFX942, tiny)
    assert make_spec(huge, SM90, tiny).tiles_per_group == 2**26


def test_a_refused_config_is_not_rebuilt_and_each_refusal_is_a_fresh_exception(monkeypatch):
    """make_spec memoises refusals as well as specs: a config refused by a rule checked on the
    built spec (accumulators, registers, shared memory) or inside a family's virtual GEMM is
    not constructed again, and every call raises its own exception with the same reason."""
    import itertools
    import miopen_solver.spec as spec_mod
    spec_mod._cached_spec.cache_clear()
    built = []
    real = spec_mod.DgradSpec.__init__

    def counting(self, *a, **kw):
        real(self, *a, **kw)
        built.append((self.problem, self.config))
    monkeypatch.setattr(spec_mod.DgradSpec, "__init__", counting)
    strided = nhwc(Hi=20, Wi=20, sH=2, sW=2)
    refused = 0
    for problem, sched in itertools.product((nhwc(), strided), (2, 3, 4, 15, 16, 17)):
        for tm, tn, wm in itertools.product((64, 256), (64, 256), (1, 4)):
            cfg = PerfConfig(tm, tn, 64, wm, 1, tm // wm, tn, 0, 0, 0, 1, -1, 3, sched)
            first = second = None
            for attempt in range(2):
                try:
                    make_spec(problem, SM90, cfg)
                except PerfConfigError as e:
                    if attempt == 0:
                        first = e
                    else:
                        second = e
            assert (first is None) == (second is None)
            if first is not None:
                refused += 1
                assert str(first) == str(second) and first is not second
    counts = collections.Counter(built)
    assert refused and counts and max(counts.values()) == 1, counts.most_common(3)


# ------------------------------------------------------------------ derived values
def test_tiles_per_group_3x3_s2():
    # 3x3 s2 p1 Hi=56: Ho=28, YTilde=2, HTilde=29, shared slice [0,29); each stride phase
    # owns 28 of the 56 dX rows (and columns), so its trimmed slice has 28 rows: four
    # sub-GEMMs of GemmM = N*28*28 (N=2: 1568 rows -> ceil(1568/64) = 25 row tiles), cpg 64 -> 1.
    p = nhwc(Hi=56, Wi=56, sH=2, sW=2)
    spec = make_spec(p, SM90, C64)
    assert len(spec.sub_gemms) == 4
    assert [s.gemm_m for s in spec.sub_gemms] == [1568] * 4
    assert [s.gemm_k for s in spec.sub_gemms] == [4 * 64, 2 * 64, 2 * 64, 1 * 64]
    assert spec.tiles_per_group == 4 * 25
    assert spec.zero_fill == "none" and not spec.pointwise


def test_threads_atom_mma_counts():
    spec = make_spec(nhwc(), GFX942, PerfConfig(128, 64, 32, 2, 2, 64, 32, 0, 0, 0, 1, -1, 2))
    assert spec.threads == 256 and spec.atom.name == "mfma32x32x8"
    assert (spec.mma_m, spec.mma_n) == (2, 1)          # 64/32 rows, 32/32 columns per warp
    assert spec.accumulators_per_lane == 128 * 64 // 256
    small = make_spec(nhwc(), GFX942, PerfConfig(64, 32, 32, 2, 2, 32, 16, 0, 0, 0, 1, -1, 2))
    assert small.atom.name == "mfma16x16x16"           # 16 columns: only the 16x16 atom fits
    assert small.workspace_bytes == 0


def test_as_dict_is_plain_json():
    d = make_spec(nhwc(), SM90, C64).as_dict()
    assert json.loads(json.dumps(d)) == d
    for key in ("kernel_name", "problem_key", "arch", "perf_config", "threads", "atom", "lds_bytes",
                "vector_size_a", "vector_size_b", "vector_size_c", "split_k", "lds_k_outer",
                "stages", "pointwise", "zero_fill", "sub_gemms", "tiles_per_group", "workspace_bytes"):
        assert key in d
    assert d["perf_config"] == "64,64,32,2,2,32,32,0,0,0,1,-1,2"


# ------------------------------------------------------------------ pointwise and 1x1 strided
@pytest.mark.parametrize("G", [1, 4])
def test_pointwise_including_grouped(G):
    p = nhwc(C=64, K=128, Y=1, X=1, pH=0, pW=0, G=G)
    spec = make_spec(p, SM90, C64)
    assert spec.pointwise and len(spec.sub_gemms) == 1
    s = spec.sub_gemms[0]
    assert (s.gemm_m, s.gemm_n, s.gemm_k) == (2 * 8 * 8, 64 // G, 128 // G)
    assert spec.zero_fill == "none"
    assert "_pw_" in spec.kernel_name


@pytest.mark.parametrize("kw", [dict(pH=1, pW=1), dict(sH=2, sW=2), dict(Y=3)])
def test_not_pointwise(kw):
    base = dict(Y=1, X=1, pH=0, pW=0)
    base.update(kw)
    assert not make_spec(nhwc(**base), SM90, C64).pointwise


@pytest.mark.parametrize("Hi,Ho", [(56, 28), (7, 4)])
def test_1x1_stride2_is_one_strided_sub_gemm_plus_zero_fill(Hi, Ho):
    p = nhwc(Hi=Hi, Wi=Hi, Y=1, X=1, pH=0, pW=0, sH=2, sW=2, C=32, K=48)
    spec = make_spec(p, GFX942, C64)
    assert not spec.pointwise and len(spec.sub_gemms) == 1
    s = spec.sub_gemms[0]
    assert s.gemm_m == 2 * Ho * Ho and s.gemm_k == 48 and s.gemm_n == 32
    assert (s.dx_h_stride, s.dx_w_stride, s.dx_h_offset, s.dx_w_offset) == (2, 2, 0, 0)
    assert spec.zero_fill == "blocks" and "_zfb_" in spec.kernel_name


def test_zero_fill_kinds():
    assert make_spec(nhwc(), SM90, C64).zero_fill == "none"
    # s2 d2 3x3: gcd(2,2)=2 -> pixels with odd hi+pH belong to no phase.
    assert make_spec(nhwc(Hi=16, Wi=16, sH=2, sW=2, dH=2, dW=2, pH=2, pW=2), SM90, C64).zero_fill == "blocks"
    assert make_spec(nhwc(), SM90, C64.replace(split_k=2, stages=3)).zero_fill == "memset"


# ------------------------------------------------------------------ kernel names
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def test_name_spells_parameters():
    spec = make_spec(nhwc(), SM90, PerfConfig(128, 64, 32, 2, 2, 64, 32, 0, 0, 0, 1, -1, 3))
    assert spec.kernel_name == ("dgrad_sm_90_fp16_t128x64x32_w2x2_a64x32_mma16816_v8v8v8_sk1_ko_s3_tilde1"
                                "_n2c64h8w8k64y3x3p1x1s1x1d1x1g1")
    assert IDENT.fullmatch(spec.kernel_name)
    odd_arch = get_target("gfx942").with_(arch="gfx942:sramecc+:xnack-")
    name = make_spec(nhwc(), odd_arch, C64).kernel_name
    assert name.startswith("dgrad_gfx942_fp16_") and IDENT.fullmatch(name)


def test_names_differ_across_targets_when_code_does():
    a, b = make_spec(nhwc(), SM80, C64), make_spec(nhwc(), SM90, C64)
    assert a.kernel_name != b.kernel_name
    if emit is not None:
        assert emit(a).sha256 != emit(b).sha256


def _resolved(spec):
    c = spec.config
    return (c.tile_m, c.tile_n, c.tile_k, c.warp_m, c.warp_n, c.warp_tile_m, c.warp_tile_n,
            spec.atom.name, spec.vec_a, spec.vec_b, spec.vec_c, spec.split_k, spec.lds_k_outer, c.stages,
            spec.persistent, spec.tma, type(spec).__name__,     # the family: a sub-pixel spec of a strided problem
            getattr(spec, "split_k_reduce", "none"),             # stream-K: the same tile, another kernel
            spec.config.schedule.pingpong)                       # one warpgroup tile, two warpgroups in turn


PROBLEMS_FOR_NAMES = [
    (nhwc(), "sm_90"), (nhwc(dtype="fp32", C=24, K=40), "gfx942"), (nhwc(dtype="bf16", Hi=12, Wi=12, sH=2, sW=2), "gfx950"),
]


@pytest.mark.parametrize("problem,arch", PROBLEMS_FOR_NAMES)
def test_distinct_configs_give_distinct_names(problem, arch):
    """Over the whole search grid: a name identifies one resolved spec (and one source)."""
    from miopen_solver.heuristics import search_space as _search_space
    t = get_target(arch)
    by_name, by_resolved = {}, {}
    for cfg in _search_space(problem, t):
        if not is_valid_performance_config(problem, t, cfg)[0]:
            continue
        spec = make_spec(problem, t, cfg)
        r = _resolved(spec)
        assert by_name.setdefault(spec.kernel_name, r) == r
        assert by_resolved.setdefault(r, spec.kernel_name) == spec.kernel_name
    assert len(by_name) > 50


def _layout(problem, layout):
    return dataclasses.replace(problem, in_layout=layout, out_layout=layout, fil_layout=layout)


FAMILY_PROBLEMS = [
    nhwc(C=3, Hi=32, Wi=32, Y=8, X=8, pH=0, pW=0, sH=8, sW=8),     # patch GEMM (every main loop)
    _layout(nhwc(Y=1, X=1, pH=0, pW=0), "NCHW"),                   # NCHW pointwise, NCHW TMA
    nhwc(G=16, dtype="bf16"),                                      # group packing, direct
    nhwc(sH=2, sW=2),                                              # sub-pixel, strided tilde
    _layout(nhwc(C=32, K=32, G=32), "NCHW"),                       # depthwise planes, direct NCHW
    _layout(nhwc(), "NCHW"),                                       # transposing paths, NCHW TMA taps
]


@needs_emit
@pytest.mark.parametrize("arch", ["sm_90", "gfx942"])
@pytest.mark.parametrize("problem", FAMILY_PROBLEMS, ids=lambda p: p.short_tag())
def test_every_family_name_identifies_its_source(problem, arch):
    """Over the whole search of problems every kernel family serves: two configs whose kernels
    share a name emit the same source (the compile cache is keyed by the name), on each vendor."""
    from miopen_solver.heuristics import search_space as _search_space
    from miopen_solver.spec import launch_spec
    t = get_target(arch)
    by_name, schedules = {}, set()
    for cfg in _search_space(problem, t):
        try:
            spec = launch_spec(problem, t, cfg)
        except PerfConfigError:
            continue
        schedules.add(cfg.schedule)
        sha = spec.emit().sha256
        assert by_name.setdefault(spec.kernel_name, (sha, cfg))[0] == sha, (
            f"{spec.kernel_name}: {by_name[spec.kernel_name][1].serialize()} and {cfg.serialize()}")
    assert len(by_name) > 100 and schedules


@needs_emit
@pytest.mark.parametrize("problem,arch", PROBLEMS_FOR_NAMES)
def test_same_name_same_source(problem, arch):
    t = get_target(arch)
    a = make_spec(problem, t, C64.replace(tile_k=16, vector_size_a=0, lds_k_outer=-1))
    explicit = C64.replace(tile_k=16, vector_size_a=a.vec_a, lds_k_outer=int(a.lds_k_outer))
    b = make_spec(problem, t, explicit)
    assert a.config != b.config and a.kernel_name == b.kernel_name
    assert emit(a).sha256 == emit(b).sha256


# ------------------------------------------------------------------ default heuristic
@pytest.mark.parametrize("problem,arch,want", [
    # cpg 64 -> tile_n 64, 2x2 warps; 2*8*8 rows = 128 -> 1 tile < CUs -> tile_m 64; 16-bit k 32.
    (nhwc(), "gfx942", "64,64,32,2,2,32,32,0,0,0,1,-1,2"),
    # NVIDIA targets use the H200-measured rules (spec.measured_nvidia_config); sm_80 has
    # no wgmma, so its fp16 rules are the mma.sync ones:
    # cpg 64 -> 128x64x32, 2x2 warps of 64x32, 4 stages; GemmK 576 < 1024 -> no split.
    (nhwc(), "sm_80", "128,64,32,2,2,64,32,0,0,0,1,-1,4"),
    # sm_90 fp16, cpg > 32 and kpg >= 64 -> warpgroup MMA (spec.wgmma_config):
    # cpg 64 -> 128x64x64, 2 warpgroups of 64x64, 4 stages.
    (nhwc(), "sm_90", "128,64,64,2,1,64,64,0,0,0,1,-1,4,1"),
    # cpg 256, 14x14 N32: 98 tiles of 128x128, 2*98 > 132 CUs -> no split; 3x3 -> 4 stages.
    (nhwc(N=32, C=256, K=256, Hi=14, Wi=14), "sm_90", "128,128,64,1,1,128,128,0,0,0,1,-1,4,3"),
    # the same without TMA's 16-byte strides (K % 8 != 0): the cp.async warpgroup kernel
    (nhwc(N=32, C=256, K=252, Hi=14, Wi=14), "sm_90", "128,128,64,2,1,64,128,0,0,0,1,-1,4,1"),
    # cpg 512, 7x7 N32: 13 x 4 = 52 tiles, 2*52 <= 132 and GemmK 4608 >= 1024 -> split_k 2.
    (nhwc(N=32, C=512, K=512, Hi=7, Wi=7), "sm_90", "128,128,64,2,1,64,128,0,0,0,2,-1,4,1"),
    # cpg 256, 64x64 N64: 2048 tiles of 128x256 >= 1.5 waves, GemmK 2304 -> 128x256.
    (nhwc(N=64, C=256, K=256, Hi=64, Wi=64), "sm_90", "128,256,64,2,1,64,256,0,0,0,1,-1,4,3"),
    (nhwc(N=64, C=256, K=252, Hi=64, Wi=64), "sm_90", "128,256,64,2,1,64,256,0,0,0,1,-1,4,1"),
    # a 65-wide image fills 65 of a TMA tile's 128 rows (tma_fill 0.51 < 0.75): flat rows instead
    (nhwc(N=32, C=256, K=256, Hi=65, Wi=65), "sm_90", "128,256,64,2,1,64,256,0,0,0,1,-1,4,1"),
    (nhwc(N=32, C=256, K=64, Hi=9, Wi=9), "sm_90", "128,128,64,2,1,64,128,0,0,0,1,-1,4,1"),  # fill 81/128
    # 1x1 stride 2, cpg 256: 196 tiles of 128x256 < 1.5 waves; strided 1x1 -> 256x128, 4 warpgroups.
    (nhwc(N=32, C=256, K=512, Hi=56, Wi=56, Y=1, X=1, pH=0, pW=0, sH=2, sW=2), "sm_90",
     "256,128,64,4,1,64,128,0,0,0,1,-1,4,1"),
    # 3x3 stride 2 (four tilde sub-GEMMs), cpg 128 -> one warpgroup of 128x128, 3 stages.
    (nhwc(N=32, C=128, K=128, Hi=56, Wi=56, sH=2, sW=2), "sm_90", "256,128,64,2,1,128,128,0,0,0,1,-1,4,3"),
    (nhwc(N=32, C=128, K=124, Hi=56, Wi=56, sH=2, sW=2), "sm_90", "128,128,64,1,1,128,128,0,0,0,1,-1,3,1"),
    # 3x3 stride 2 at any size takes the TMA tile, also where cpg >= 256 and the grid is large
    # (ResNet-50 layer3.0.conv2, SD1.5's downsampler): not the plain 128x256 tile.
    (nhwc(N=64, C=256, K=256, Hi=28, Wi=28, sH=2, sW=2), "sm_90", "256,128,64,2,1,128,128,0,0,0,1,-1,4,3"),
    (nhwc(N=8, C=320, K=320, Hi=64, Wi=64, sH=2, sW=2), "sm_90", "256,128,64,2,1,128,128,0,0,0,1,-1,4,3"),
    (nhwc(N=64, C=256, K=252, Hi=28, Wi=28, sH=2, sW=2), "sm_90", "128,256,64,2,1,64,256,0,0,0,1,-1,4,1"),
    # 1x1 stride 1, cpg 256, GemmK 64 (one k-tile), 784 tiles of 128x256 >= 2 waves ->
    # persistent 128x256x64, 3 stages (wgmma=2).
    (nhwc(N=32, C=256, K=64, Hi=56, Wi=56, Y=1, X=1, pH=0, pW=0), "sm_90", "128,256,64,2,1,64,256,0,0,0,1,-1,3,2"),
    # the same with 8x smaller images: 98 tiles < 2 waves -> not persistent: 128x128x64, 3 stages.
    (nhwc(N=4, C=256, K=64, Hi=56, Wi=56, Y=1, X=1, pH=0, pW=0), "sm_90", "128,128,64,2,1,64,128,0,0,0,1,-1,3,1"),
    # kpg 32 with cpg > 32 -> the narrow warpgroup tile (tile_k 32, one tap per k-tile).
    (nhwc(N=32, C=256, K=32, Hi=56, Wi=56, Y=1, X=1, pH=0, pW=0), "sm_90", "128,128,32,2,1,64,128,0,0,0,1,-1,4,1"),
    # kpg 16 < 32 -> no warpgroup tile: the mma.sync rules.
    (nhwc(N=32, C=256, K=16, Hi=56, Wi=56, Y=1, X=1, pH=0, pW=0), "sm_90", "128,128,32,2,4,64,32,0,0,0,1,-1,4"),
    # ResNet 3x3 c64 56x56 N32: 100352 rows / 128 = 784 tiles >= 304 CUs -> tile_m 128.
    (nhwc(N=32, Hi=56, Wi=56), "gfx942", "128,64,32,2,2,64,32,0,0,0,1,-1,2"),
    # 3x3, cpg 256: 6272 rows -> 49 x 2 = 98 tiles of 128x128 < 2 waves (264) -> 128x64;
    # 49 x 4 = 196 tiles of 128x64 still < 216 (sm_80: 108 CUs) and GemmK 2304 >= 1024 -> split_k 2.
    (nhwc(N=32, C=256, K=256, Hi=14, Wi=14), "sm_80", "128,64,32,2,2,64,32,0,0,0,2,-1,4"),
    # N=64: 98 x 4 = 392 tiles of 128x64 >= 216 -> no split.
    (nhwc(N=64, C=256, K=256, Hi=14, Wi=14), "sm_80", "128,64,32,2,2,64,32,0,0,0,1,-1,4"),
    # depthwise: cpg 1 -> tile_n 16, warps stacked along M; 9 taps fp32 > 8 keeps tile_k 16.
    (nhwc(N=32, C=256, K=256, G=256, Hi=28, Wi=28, dtype="fp32"), "gfx942", "128,16,16,4,1,32,16,0,0,0,1,-1,2"),
    # fp32 1x1, cpg 24, 65536 rows: 512 tiles of 128x128 < 4 waves, stride 1 -> 64x64x16;
    # GemmK 8 < 1024 -> no split.
    (nhwc(N=64, C=24, K=8, Hi=32, Wi=32, Y=1, X=1, pH=0, pW=0, dtype="fp32"), "sm_90", "64,64,16,2,2,32,32,0,0,0,1,-1,3"),
])
def test_heuristic_values(problem, arch, want):
    """The rules (on sm_90 the cost model may replace them: tests/test_cost_model.py)."""
    t = get_target(arch)
    assert heuristic_config(problem, t, allow_model=False).serialize() == want
    assert default_performance_config(problem, t, allow_model=False).serialize() == want


@settings(max_examples=60, deadline=None)
@given(st.sampled_from((2, 3, 4)), st.booleans(), st.sampled_from((3, 5)),
       st.sampled_from((96, 128, 256, 512, 1024)), st.sampled_from((64, 128, 256, 512)),
       st.sampled_from((7, 14, 28, 56, 112)), st.sampled_from((1, 8, 32, 64)), st.sampled_from(("fp16", "bf16")))
def test_strided_filters_with_taps_take_the_tma_tile_where_it_fits(s, both, f, c, k, hw, n, dtype):
    """The sm_90 rule for strided filters with taps holds at every size (H200: the plain
    warpgroup tiles ran large stride-2 3x3 layers at 0.49-0.70 of cuDNN): the TMA strided
    tile wherever its rules and fill hold, whatever cpg and grid size; the warpgroup
    128x128 tile only where they do not; never a tile the layer's cpg cannot use."""
    from miopen_solver.heuristics import TMA_STRIDED_DEFAULT, _tma_fits
    p = nhwc(N=n, C=c, K=k, Hi=hw, Wi=hw, Y=f, X=f, pH=f // 2, pW=f // 2, sH=s, sW=s if both else 1,
             dtype=dtype)
    t = get_target("sm_90")
    cfg = heuristic_config(p, t, allow_model=False)
    if p.cpg <= 64:
        assert cfg.schedule is KernelSchedule.WGMMA and cfg.tile_n == 64
    elif _tma_fits(p, t, TMA_STRIDED_DEFAULT):
        assert cfg == TMA_STRIDED_DEFAULT and default_performance_config(p, t, allow_model=False) == cfg
    else:
        assert cfg.schedule is not KernelSchedule.WGMMA_TMA


def test_fallbacks_used_when_the_heuristic_does_not_fit():
    t = SM90.with_(lds_bytes=20000)   # 64x64x32 s3: 3*(64*40 + 32*72)*2 = 29184 bytes > 20000
    cfg = default_performance_config(nhwc(), t)
    assert cfg == FALLBACK_CONFIGS[0] and make_spec(nhwc(), t, cfg).lds_bytes == 2 * (64 * 40 + 32 * 72) * 2


def test_no_default_raises_with_every_reason():
    t = SM90.with_(lds_bytes=100)
    with pytest.raises(PerfConfigError, match="no default config is valid") as e:
        default_performance_config(nhwc(), t)
    assert str(e.value).count("shared memory exceed") == 1 + len(FALLBACK_CONFIGS)


@pytest.mark.parametrize("target", [GFX942, GFX90A], ids=["gfx942", "gfx90a"])
def test_no_default_gives_a_shared_reason_once(target):
    # Every candidate refused for the same reason (the groups exceed the grid along y): the
    # reason appears once, with the count, so the line stays short whatever the candidates.
    p = nhwc(N=1, C=65536, K=65536, G=65536, Hi=8, Wi=8)
    with pytest.raises(PerfConfigError) as e:
        default_performance_config(p, target)
    msg = str(e.value)
    assert msg.count("grid limit") == 1 and "each of the" in msg and "candidates" in msg, msg
    assert len(msg) < 300, msg


@st.composite
def problems(draw, max_side=24):
    """Random 2-D NHWC problems of the supported dtypes (small enough to decompose fast)."""
    G = draw(st.sampled_from([1, 1, 1, 2, 3, 4, 8]))
    cpg, kpg = draw(st.integers(1, 80)), draw(st.integers(1, 80))
    if draw(st.booleans()) and G > 1:
        cpg = kpg = 1                                  # depthwise
    Y, X = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    sH, sW = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    dH, dW = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    pH, pW = draw(st.integers(0, 4)), draw(st.integers(0, 4))
    Hi = max(draw(st.integers(1, max_side)), dH * (Y - 1) + 1 - 2 * pH)
    Wi = max(draw(st.integers(1, max_side)), dW * (X - 1) + 1 - 2 * pW)
    return ConvProblem(N=draw(st.integers(1, 4)), C=cpg * G, Hi=Hi, Wi=Wi, K=kpg * G, Y=Y, X=X, pH=pH, pW=pW,
                       sH=sH, sW=sW, dH=dH, dW=dW, G=G, dtype=draw(st.sampled_from(["fp16", "bf16", "fp32"])),
                       in_layout="NHWC", out_layout="NHWC", fil_layout="NHWC")


@settings(max_examples=300, deadline=None)
@given(problems(), st.sampled_from(sorted(PRESETS)))
def test_default_config_always_validates(problem, arch):
    t = get_target(arch)
    cfg = default_performance_config(problem, t)
    spec = make_spec(problem, t, cfg)
    assert cfg.split_k >= 1 and spec.split_k == cfg.split_k        # never "-1" in a default
    if spec.split_k > 1:                                            # only the NVIDIA rules split,
        assert t.vendor == "nvidia"                                 # and only where atomics may
        assert split_k_atomics_reason(problem, t) is None


def test_nvidia_default_splits_only_where_atomics_allow():
    # 3x3 cpg 256 on 14x14, N=32: the H200 rules pick split_k 2 (see test_heuristic_values);
    # with odd cpg (fp16 packed atomics impossible) the same shape must not split.
    # Both rule sets: mma.sync (sm_80) and wgmma (sm_90, 3x3 cpg 512 on 7x7).
    even = nhwc(N=32, C=256, K=256, Hi=14, Wi=14)
    odd = nhwc(N=32, C=255, K=256, Hi=14, Wi=14)
    assert default_performance_config(even, SM80).split_k == 2
    assert default_performance_config(odd, SM80).split_k == 1
    assert default_performance_config(even.replace(dtype="bf16"), SM80).split_k == 1   # no bf16x2 atomic
    even90 = nhwc(N=32, C=512, K=512, Hi=7, Wi=7)
    odd90 = nhwc(N=32, C=511, K=512, Hi=7, Wi=7)
    assert default_performance_config(even90, SM90, allow_model=False).split_k == 2      # the rules
    assert default_performance_config(odd90, SM90, allow_model=False).split_k == 1
    for p in (odd90, odd90.replace(N=2), odd90.replace(Hi=3, Wi=3)):    # the model's pick neither
        assert default_performance_config(p, SM90).split_k == 1


# ------------------------------------------------------------------ validates => builds
@st.composite
def configs(draw):
    tm = draw(st.sampled_from([16, 32, 64, 128, 256]))
    tn = draw(st.sampled_from([8, 16, 32, 64, 128, 256]))
    wm = draw(st.sampled_from([1, 2, 4]))
    wn = draw(st.sampled_from([1, 2, 4]))
    shrink_m, shrink_n = draw(st.sampled_from([1, 1, 2])), draw(st.sampled_from([1, 1, 2]))
    return PerfConfig(
        tile_m=tm, tile_n=tn, tile_k=draw(st.sampled_from([4, 8, 16, 32, 64])), warp_m=wm, warp_n=wn,
        warp_tile_m=max(1, tm // wm // shrink_m), warp_tile_n=max(1, tn // wn // shrink_n),
        vector_size_a=draw(st.sampled_from([0, 1, 2, 4, 8, 16, 64])),
        vector_size_b=draw(st.sampled_from([0, 1, 2, 4, 8, 16, 64])),
        vector_size_c=draw(st.sampled_from([0, 1, 2, 4, 8, 16])),
        split_k=draw(st.sampled_from([-1, 1, 1, 2, 3, 4, 8])), lds_k_outer=draw(st.sampled_from([-1, 0, 1])),
        stages=draw(st.sampled_from([1, 2, 3, 4])))


@st.composite
def wgmma_configs(draw):
    wm = draw(st.sampled_from([1, 2, 4]))
    wn = draw(st.sampled_from([1, 1, 2]))
    wtm = draw(st.sampled_from([64, 128, 32]))
    wtn = draw(st.sampled_from([64, 128, 256, 32]))
    return PerfConfig(
        tile_m=wm * wtm * draw(st.sampled_from([1, 1, 2])), tile_n=wn * wtn * draw(st.sampled_from([1, 1, 2])),
        tile_k=draw(st.sampled_from([64, 128, 32])), warp_m=wm, warp_n=wn, warp_tile_m=wtm, warp_tile_n=wtn, vector_size_a=draw(st.sampled_from([0, 1, 2, 4, 8])),
        vector_size_b=draw(st.sampled_from([0, 1, 2, 4, 8])), vector_size_c=draw(st.sampled_from([0, 2, 8])),
        split_k=draw(st.sampled_from([-1, 1, 2, 3])), lds_k_outer=draw(st.sampled_from([-1, 0, 1])),
        stages=draw(st.sampled_from([1, 2, 3, 4, 5])), schedule=1)


@needs_emit
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(max_side=16), st.one_of(configs(), wgmma_configs()),
       st.sampled_from(["sm_80", "sm_90", "gfx90a", "gfx942", "gfx950"]))
def test_every_valid_config_builds(problem, cfg, arch):
    t = get_target(arch)
    ok, why = is_valid_performance_config(problem, t, cfg)
    if not ok:
        assert why
        return
    spec = make_spec(problem, t, cfg)
    assert spec.split_k >= 1 and spec.vec_a >= 1 and spec.vec_b >= 1 and spec.vec_c >= 1
    if spec.wgmma:  # the instructions of the warpgroups tile the block exactly
        assert spec.mma_m * 64 * cfg.warp_m == cfg.tile_m and cfg.warp_tile_n * cfg.warp_n == cfg.tile_n
    src = emit(spec)
    assert src.text and src.sha256 == hashlib.sha256(src.text.encode()).hexdigest()
    assert spec.kernel_name in src.text
    assert tuple(src.grid)[1:] == (problem.G, spec.split_k)


# ------------------------------------------------------------------ validates => compiles
def _offline():
    try:
        from miopen_solver.kernels import offline
    except ImportError:
        return None
    return offline


def _compiler_for(vendor):
    import shutil
    off = _offline()
    if off is None:
        return None
    return shutil.which("nvcc") if vendor == "nvidia" else off.find_amd_clang()


@needs_emit
@pytest.mark.parametrize("arch", [
    "sm_90",
    pytest.param("gfx942", marks=pytest.mark.amdcompile),
])
@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                HealthCheck.function_scoped_fixture])
@given(problem=problems(max_side=12), data=st.data())
def test_valid_configs_compile_offline(tmp_path, arch, problem, data):
    """A few valid configs per vendor through the real compiler (nvcc / clang with AMDGPU);
    skipped where the compiler is missing."""
    t = get_target(arch)
    if _compiler_for(t.vendor) is None:
        pytest.skip(f"no offline compiler for {t.vendor} on this machine")
    from miopen_solver.solver import DgradSolver
    candidates = list(DgradSolver().search(problem, t))
    cfg = data.draw(st.sampled_from(candidates[:1] + candidates[1::37]))
    spec = make_spec(problem, t, cfg)
    off = _offline()
    src = emit(spec)
    if t.vendor == "nvidia":
        assert off.compile_nvidia(src.text, arch, out_dir=tmp_path, name="k")
    else:
        assert off.compile_amd(src.text, arch, out_dir=tmp_path, name="k").data


NARROW_CASES = [
    # (problem, config, sections): tile_k 32 (A in 64-byte swizzled rows), warp_tile_n 32 (B
    # in 64-byte swizzled rows, m64n32k16), both; plain and persistent; 1..4 warpgroups
    (nhwc(N=2, C=128, K=32, Hi=14, Wi=14), "128,128,32,2,1,64,128,0,0,0,1,-1,4,1", {"wgk32"}),
    (nhwc(N=2, C=32, K=64, Hi=14, Wi=14, sH=2, sW=2), "128,32,64,2,1,64,32,0,0,0,1,-1,4,1", {"wgn32"}),
    (nhwc(N=2, C=32, K=192, Hi=9, Wi=9, Y=1, X=1, pH=0, pW=0, dtype="bf16"), "128,32,64,2,1,64,32,0,0,0,1,-1,3,1",
     {"wgn32"}),
    (nhwc(N=2, C=32, K=32, Hi=9, Wi=9), "128,32,32,2,1,64,32,0,0,0,1,-1,3,1", {"wgk32", "wgn32"}),
    (nhwc(N=2, C=64, K=32, Hi=9, Wi=9), "128,64,32,2,2,64,32,0,0,0,1,-1,4,1", {"wgk32", "wgn32"}),
    (nhwc(N=2, C=128, K=32, Hi=9, Wi=9), "256,128,32,2,1,128,128,0,0,0,1,-1,4,2", {"wgk32"}),
    (nhwc(N=2, C=32, K=96, Hi=9, Wi=9, dtype="bf16"), "128,32,32,1,1,128,32,0,0,0,-1,-1,3,2", {"wgk32", "wgn32"}),
]


WGMMA_COMPILE_CASES = [
    # (problem, config): one and two m64 per warpgroup, N 64/128/256, 1..4 warpgroups,
    # tile_k 64 and 128, stages 1..5 (lag-1 pipeline from 3), split-K, odd cpg (register
    # path for B), pointwise and multi-sub-GEMM problems, bf16.
    (nhwc(N=2, C=256, K=256, Hi=14, Wi=14), "128,256,64,2,1,64,256,0,0,0,1,-1,4,1"),
    (nhwc(N=2, C=128, K=128, Hi=14, Wi=14, sH=2, sW=2), "256,128,64,4,1,64,128,0,0,0,1,-1,3,1"),
    (nhwc(N=2, C=96, K=64, Hi=9, Wi=9, Y=1, X=1, pH=0, pW=0), "128,128,128,1,1,128,128,0,0,0,1,-1,2,1"),
    (nhwc(N=2, C=63, K=70, Hi=9, Wi=9), "64,64,64,1,1,64,64,0,0,0,1,-1,1,1"),
    (nhwc(N=2, C=128, K=128, Hi=7, Wi=7, dtype="bf16"), "128,128,64,2,1,64,128,0,0,0,2,-1,5,1"),
    # persistent (wgmma=2): 3 and 2 stages, four sub-GEMMs with zero-fill blocks, N 256
    (nhwc(N=2, C=128, K=128, Hi=14, Wi=14, sH=2, sW=2), "256,128,64,4,1,64,128,0,0,0,1,-1,3,2"),
    (nhwc(N=2, C=256, K=256, Hi=9, Wi=9, Y=1, X=1, pH=0, pW=0), "128,256,64,2,1,64,256,0,0,0,1,-1,3,2"),
    (nhwc(N=2, C=63, K=70, Hi=9, Wi=9, dtype="bf16"), "64,64,64,1,1,64,64,0,0,0,-1,-1,2,2"),
    # warp-specialised TMA (wgmma=3, pointwise): N 256/128/64, one m64 and two per
    # warpgroup, 2..4 stages, row/channel tails, G=2, bf16
    (nhwc(N=2, C=256, K=256, Hi=9, Wi=9, Y=1, X=1, pH=0, pW=0), "128,256,64,2,1,64,256,0,0,0,1,-1,4,3"),
    (nhwc(N=2, C=72, K=40, Hi=5, Wi=7, Y=1, X=1, pH=0, pW=0), "128,128,64,1,1,128,128,0,0,0,1,-1,3,3"),
    (nhwc(N=2, C=128, K=128, G=2, Hi=7, Wi=7, Y=1, X=1, pH=0, pW=0, dtype="bf16"), "64,64,64,1,1,64,64,0,0,0,-1,-1,2,3"),
    # TMA with taps: pixel boxes (rows, whole images), dilation, K tail
    (nhwc(N=2, C=256, K=256, Hi=16, Wi=16), "128,256,64,2,1,64,256,0,0,0,1,-1,4,3"),
    (nhwc(N=3, C=64, K=72, Hi=7, Wi=7, dH=2, dW=2, pH=2, pW=2), "128,64,64,2,1,64,64,0,0,0,1,-1,3,3"),
    # TMA, strided: four tilde sub-GEMMs from the record table; 1x1 stride 2 with zero-fill blocks
    (nhwc(N=2, C=128, K=128, Hi=15, Wi=15, sH=2, sW=2), "128,128,64,1,1,128,128,0,0,0,1,-1,4,3"),
    (nhwc(N=2, C=64, K=64, Hi=14, Wi=14, Y=1, X=1, pH=0, pW=0, sH=2, sW=2), "128,64,64,2,1,64,64,0,0,0,1,-1,3,3"),
    # TMA split-K (tmask): atomics and the workspace, pointwise and strided, 8 stages
    (nhwc(N=2, C=256, K=1024, Hi=7, Wi=7, Y=1, X=1, pH=0, pW=0), "128,128,64,2,1,64,128,0,0,0,4,-1,4,3"),
    (nhwc(N=2, C=256, K=512, Hi=8, Wi=8), "128,256,64,2,1,64,256,0,0,0,3,-1,4,3,2"),
    (nhwc(N=2, C=128, K=256, Hi=15, Wi=15, sH=2, sW=2, dtype="bf16"), "128,64,64,2,1,64,64,0,0,0,2,-1,8,3"),
    # narrow tiles in the 64-byte swizzle (tile_k 32, warp_tile_n 32): plain and persistent
] + [(p, c) for p, c, _ in NARROW_CASES]


@pytest.mark.parametrize("problem,cfg", WGMMA_COMPILE_CASES, ids=[c for _, c in WGMMA_COMPILE_CASES])
def test_wgmma_configs_compile_for_sm90a(tmp_path, problem, cfg):
    """wgmma kernels through nvcc for sm_90a (ptxas checks the wgmma operand rules);
    skipped where nvcc is missing. They ran on the H200 in tests/test_gpu.py."""
    if _compiler_for("nvidia") is None:
        pytest.skip("no nvcc on this machine")
    spec = make_spec(problem, SM90, PerfConfig.parse(cfg))
    assert spec.wgmma and "wgmma64x" in spec.kernel_name
    src = emit(spec)
    assert ("DG_WGMMA", 1) in src.defines and ("DG_TMA", int(spec.tma)) in src.defines
    assert _offline().compile_nvidia(src.text, "sm_90", out_dir=tmp_path, name="k")


@pytest.mark.parametrize("arch", ["sm_80", "gfx90a", "gfx942", "gfx950", "cpu"])
def test_wgmma_needs_a_warpgroup_mma_target(arch):
    ok, why = is_valid_performance_config(nhwc(C=128, K=128), get_target(arch),
                                          PerfConfig.parse("128,128,64,2,1,64,128,0,0,0,1,-1,3,1"))
    assert not ok and "schedule 1 (wgmma) needs warpgroup MMA" in why and arch in why


@pytest.mark.parametrize("cfg,reason", [
    ("128,128,64,3,1,64,128,0,0,0,1,-1,3,1", "tile_m 128 is not a multiple"),
    ("64,128,64,2,1,32,128,0,0,0,1,-1,3,1", "warp_tile_m a multiple of 64"),
    ("128,80,64,2,1,64,80,0,0,0,1,-1,3,1", "warp_tile_n in {64, 128, 256}, or 96, 160, 192, 224 for fp16/bf16"),
    # one instruction per warpgroup spans warp_tile_n columns: tile_n wider than the
    # warpgroups' columns would leave accumulators unwritten (a fresh-user review found
    # these validating): every such shape is rejected
    ("64,256,64,1,1,64,64,0,0,0,1,-1,3,1", "tile_n = warp_n*warp_tile_n"),
    ("128,256,64,2,1,64,128,0,0,0,1,-1,3,1", "tile_n = warp_n*warp_tile_n"),
    ("128,128,64,2,1,64,64,0,0,0,1,-1,3,1", "tile_n = warp_n*warp_tile_n"),
    ("128,256,64,1,2,128,64,0,0,0,1,-1,3,1", "tile_n = warp_n*warp_tile_n"),
    ("128,128,48,2,1,64,128,0,0,0,1,-1,3,1", "tile_k a multiple of 64"),
    ("128,128,16,2,1,64,128,0,0,0,1,-1,3,1", "or 32 (one 64-byte swizzled row)"),
    ("128,32,64,2,1,64,16,0,0,0,1,-1,3,1", "(or 32 for fp16/bf16 on schedules 1 and 2)"),
    ("128,128,64,2,1,64,128,0,0,0,1,0,3,1", "lds_k_outer must be -1 or 1"),
    ("128,128,64,2,1,64,128,0,0,0,2,-1,3,2", "split_k must be 1 or -1"),
    ("128,128,64,2,1,64,128,0,0,0,1,-1,1,2", "stages must be >= 2"),
])
def test_wgmma_shape_rules(cfg, reason):
    ok, why = is_valid_performance_config(nhwc(C=128, K=128), SM90, PerfConfig.parse(cfg))
    assert not ok and reason in why, why


@pytest.mark.parametrize("problem,cfg,sections", NARROW_CASES, ids=[c for _, c, _ in NARROW_CASES])
def test_narrow_wgmma_tiles_validate_and_keep_their_sections(problem, cfg, sections):
    """The narrow warpgroup tiles (tile_k 32, warp_tile_n 32) of the plain and persistent
    schedules validate and emit the 64-byte swizzle sections they need, and no other."""
    spec = make_spec(problem, SM90, PerfConfig.parse(cfg))
    c = spec.config
    assert spec.wgmma and spec.atom.name == f"wgmma64x{c.warp_tile_n}x16"
    assert spec.lds_bytes >= c.stages * (c.tile_m * c.tile_k + c.tile_k * c.tile_n) * 2 + 1024
    text = emit(spec).text
    assert ("dg_sw64(" in text) and ("#section" not in text)
    assert len(re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n(\d+)k16", text)) == 1
    assert (f"m64n{c.warp_tile_n}k16" in text) and (("m64n32k16" in text) == ("wgn32" in sections))
    assert ("#define DG_A_OFF(row, col) dg_sw64" in text) == ("wgk32" in sections)
    assert ("DG_TILE_K % 64 == 0" in text) == ("wgk32" not in sections)
    assert ("wgmma N is 64, 128 or 256" in text) == ("wgn32" not in sections)


@pytest.mark.parametrize("problem,cfg,reason", [
    # the TMA schedule's tensor maps are built for 128-byte rows and 64-wide boxes
    (nhwc(N=2, C=128, K=32, Hi=9, Wi=9, Y=1, X=1, pH=0, pW=0), "128,128,32,2,1,64,128,0,0,0,1,-1,4,3",
     "tile_k must be 64, got 32"),
    (nhwc(N=2, C=32, K=64, Hi=9, Wi=9, Y=1, X=1, pH=0, pW=0), "128,32,64,2,1,64,32,0,0,0,1,-1,4,3",
     "warp_tile_n 32 (64-byte swizzled W rows) only for fp16/bf16 on the plain or persistent"),
    # TF32 (fp32 data, -M 0): K-major .tf32 operands in 128-byte rows only
    (nhwc(N=2, C=32, K=64, Hi=9, Wi=9, dtype="fp32", tf32=True), "128,32,32,2,1,64,32,0,0,0,1,-1,3,1",
     "warp_tile_n 32 (64-byte swizzled W rows) only for fp16/bf16"),
    # one instruction still spans a warpgroup's columns
    (nhwc(N=2, C=64, K=64, Hi=9, Wi=9), "128,64,64,2,1,64,32,0,0,0,1,-1,4,1", "tile_n = warp_n*warp_tile_n"),
])
def test_narrow_wgmma_rules(problem, cfg, reason):
    ok, why = is_valid_performance_config(problem, SM90, PerfConfig.parse(cfg))
    assert not ok and reason in why, why


N96_CASES = [
    # (problem, config, sections): warp_tile_n 96 (B in 64-byte swizzled 32-wide blocks,
    # m64n96k16) and 192 (m64n192k16) on the three warpgroup schedules; 7-8 TMA stages (st8)
    (nhwc(N=2, C=200, K=128, Hi=7, Wi=7, Y=1, X=1, pH=0, pW=0), "128,96,64,2,1,64,96,0,0,0,1,-1,4,1", {"wgb32"}),
    (nhwc(N=2, C=320, K=128, Hi=7, Wi=7), "128,192,64,2,1,64,192,0,0,0,1,-1,5,1", {"wgn192"}),
    (nhwc(N=2, C=192, K=128, Hi=7, Wi=7), "128,192,64,2,2,64,96,0,0,0,1,-1,4,1", {"wgb32"}),
    (nhwc(N=2, C=200, K=128, Hi=7, Wi=7, dtype="bf16"), "128,96,64,2,1,64,96,0,0,0,1,-1,4,2", {"wgb32"}),
    (nhwc(N=2, C=320, K=128, Hi=7, Wi=7, Y=1, X=1, pH=0, pW=0), "128,192,64,2,1,64,192,0,0,0,1,-1,3,2", {"wgn192"}),
    (nhwc(N=2, C=200, K=256, Hi=7, Wi=7, Y=1, X=1, pH=0, pW=0), "128,96,64,2,1,64,96,0,0,0,1,-1,4,3", {"wgb32"}),
    (nhwc(N=2, C=200, K=256, Hi=7, Wi=7, Y=1, X=1, pH=0, pW=0), "128,96,64,2,1,64,96,0,0,0,1,-1,8,3",
     {"wgb32", "st8"}),
    (nhwc(N=2, C=320, K=256, Hi=7, Wi=7), "128,192,64,2,1,64,192,0,0,0,1,-1,5,3", {"wgn192"}),
    (nhwc(N=2, C=256, K=256, Hi=7, Wi=7, Y=1, X=1, pH=0, pW=0), "128,128,64,2,1,64,128,0,0,0,1,-1,7,3", {"st8"}),
    # 160 and 224 (5 and 7 32-wide blocks, m64n160k16 / m64n224k16) on the plain, persistent,
    # TMA and ping-pong schedules
    (nhwc(N=2, C=160, K=128, Hi=7, Wi=7), "128,160,64,2,1,64,160,0,0,0,1,-1,4,1", {"wgb32"}),
    (nhwc(N=2, C=224, K=128, Hi=7, Wi=7, dtype="bf16"), "64,224,64,1,1,64,224,0,0,0,1,-1,3,2", {"wgb32"}),
    (nhwc(N=2, C=160, K=256, Hi=7, Wi=7, Y=1, X=1, pH=0, pW=0), "128,160,64,2,1,64,160,0,0,0,1,-1,5,3",
     {"wgb32"}),
    (nhwc(N=2, C=224, K=256, Hi=7, Wi=7), "64,224,64,1,1,64,224,0,0,0,1,-1,6,20", {"wgb32"}),
]


@pytest.mark.parametrize("problem,cfg,sections", N96_CASES, ids=[c for _, c, _ in N96_CASES])
def test_n96_n192_tiles_validate_and_keep_their_sections(problem, cfg, sections):
    """warp_tile_n 96 / 192 and 7-8 TMA stages validate and emit the sections they need
    (and no other); the n96 TMA kernel's W map has 32-wide boxes in the 64-byte swizzle."""
    spec = make_spec(problem, SM90, PerfConfig.parse(cfg))
    c = spec.config
    assert spec.wgmma and spec.atom.name == f"wgmma64x{c.warp_tile_n}x16"
    src = emit(spec)
    text = src.text
    assert "#section" not in text
    assert re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n(\d+)k16", text) == [str(c.warp_tile_n)]
    assert ("dg_sw64(" in text) == ("wgb32" in sections)
    assert ("wgmma N is 64, 128 or 256" in text) == (c.warp_tile_n in (64, 128, 256))
    assert ("stages 7..8: the TMA schedule only" in text) == ("st8" in sections)
    assert ('"stages 1..6"' in text) == ("st8" not in sections)
    if spec.tma:
        w = src.tensor_maps[1]
        assert (w.box[0], w.swizzle) == ((32, 64) if c.warp_tile_n % 64 == 32 else (64, 128))


@pytest.mark.parametrize("problem,cfg,reason", [
    # TF32 runs m64nNk8 with N 64/128/256 only
    (nhwc(N=2, C=200, K=64, Hi=9, Wi=9, dtype="fp32", tf32=True), "128,96,32,2,1,64,96,0,0,0,1,-1,3,1",
     "warp_tile_n 96 only for fp16/bf16"),
    (nhwc(N=2, C=200, K=32, Hi=9, Wi=9), "128,96,32,2,1,64,96,0,0,0,1,-1,3,1",
     "with warp_tile_n 96 needs tile_k a multiple of 64"),
    (nhwc(N=2, C=200, K=32, Hi=9, Wi=9), "128,192,32,2,1,64,192,0,0,0,1,-1,3,2",
     "with warp_tile_n 192 needs tile_k a multiple of 64"),
    # stages: 7-8 on the TMA schedule only, where shared memory holds them
    (nhwc(N=2, C=200, K=64, Hi=9, Wi=9), "128,96,64,2,1,64,96,0,0,0,1,-1,7,1",
     "stages must be <= 6, got 7 (schedule 3 (wgmma-tma) takes up to 8)"),
    (nhwc(N=2, C=200, K=64, Hi=9, Wi=9), "128,96,64,2,1,64,96,0,0,0,1,-1,9,3", "stages must be <= 8, got 9"),
    (nhwc(N=2, C=320, K=64, Hi=9, Wi=9), "128,192,64,2,1,64,192,0,0,0,1,-1,7,3",
     "7 stages of 40976 bytes (A 128x64, B 64x192 and two mbarriers)"),
    (nhwc(N=2, C=320, K=64, Hi=9, Wi=9), "128,192,64,2,1,64,192,0,0,0,1,-1,6,3", "at most 5 stages of this tile fit"),
    (nhwc(N=2, C=256, K=64, Hi=9, Wi=9), "128,256,64,2,1,64,256,0,0,0,1,-1,8,3", "at most 4 stages of this tile fit"),
])
def test_n96_n192_and_deep_stage_rules(problem, cfg, reason):
    ok, why = is_valid_performance_config(problem, SM90, PerfConfig.parse(cfg))
    assert not ok and reason in why, why


def test_search_offers_n96_n192_and_deep_tma_stages():
    """The warpgroup search space reaches warp_tile_n 96 and 192 on the three schedules and
    7-8 TMA stages (for a many-channel small-image 1x1: ResNet-50 layer4.1.conv3)."""
    from miopen_solver.solver import DgradSolver
    p = nhwc(N=64, C=512, K=2048, Hi=7, Wi=7, Y=1, X=1, pH=0, pW=0)
    got = {str(c) for c in DgradSolver().search(p, SM90)}
    for cfg in ("128,96,64,2,1,64,96,0,0,0,1,-1,4,1", "128,192,64,2,1,64,192,0,0,0,1,-1,4,1",
                "128,96,64,2,1,64,96,0,0,0,1,-1,4,2", "128,96,64,2,1,64,96,0,0,0,1,-1,7,3",
                "128,96,64,2,1,64,96,0,0,0,1,-1,8,3", "128,192,64,2,1,64,192,0,0,0,1,-1,5,3"):
        assert cfg in got, cfg


PW = nhwc(N=2, C=256, K=256, Hi=9, Wi=9, Y=1, X=1, pH=0, pW=0)


@pytest.mark.parametrize("problem,cfg,reason", [
    (PW, "128,256,128,2,1,64,256,0,0,0,1,-1,3,3", "tile_k must be 64"),
    (PW, "128,256,64,2,1,64,256,0,0,0,5,-1,3,3", "split_k 5 exceeds the 4 k-tiles of the shortest sub-GEMM"),
    (nhwc(N=2, C=128, K=128, Hi=15, Wi=15, sH=2, sW=2), "128,128,64,1,1,128,128,0,0,0,3,-1,4,3",
     "split_k 3 exceeds the 2 k-tiles of the shortest sub-GEMM"),
    (PW, "128,256,64,2,1,64,256,0,0,0,1,-1,1,3", "stages must be >= 2"),
    (nhwc(N=2, C=256, K=252, Hi=9, Wi=9, Y=1, X=1, pH=0, pW=0), "128,256,64,2,1,64,256,0,0,0,1,-1,3,3",
     "K and cpg multiples of 8"),
    (nhwc(N=2, C=252, K=256, Hi=9, Wi=9, Y=1, X=1, pH=0, pW=0), "128,128,64,2,1,64,128,0,0,0,1,-1,3,3",
     "K and cpg multiples of 8"),
    (nhwc(N=2, C=256, K=64, G=2, Hi=9, Wi=9, Y=1, X=1, pH=0, pW=0), "128,128,64,2,1,64,128,0,0,0,1,-1,3,3",
     "kpg a multiple of 64"),
    (nhwc(N=2, C=128, K=96, G=2, Hi=9, Wi=9), "128,64,64,2,1,64,64,0,0,0,1,-1,3,3", "kpg a multiple of 64"),
    (PW, "256,256,64,4,1,64,256,0,0,0,1,-1,2,3", "the 96 registers a thread of a 544-thread block"),
    (PW, "256,128,64,4,1,64,128,0,0,0,1,-1,3,3", "the 96 registers a thread of a 544-thread block"),
])
def test_tma_rules(problem, cfg, reason):
    ok, why = is_valid_performance_config(problem, SM90, PerfConfig.parse(cfg))
    assert not ok and reason in why, why


def test_tma_spec_geometry():
    """wgmma=3: a producer on top of the warpgroups (a warpgroup beside two: 128 threads),
    persistent grid, no dX staging
    tile, two 8-byte barriers per stage, and the two tensor maps (dY GemmM x K in
    tile_m x 64 boxes, W K x cpg in 64 x 64 boxes) with byte strides."""
    from miopen_solver.solver import DgradSolver
    p = nhwc(N=64, C=512, K=512, Hi=64, Wi=64, Y=1, X=1, pH=0, pW=0)
    spec = make_spec(p, SM90, PerfConfig.parse("128,256,64,2,1,64,256,0,0,0,-1,-1,4,3"))
    assert spec.tma and not spec.persistent and spec.split_k == 1
    assert (spec.threads, spec.block_threads) == (256, 384) and spec.producer_warpgroup
    assert spec.lds_bytes == 4 * (128 * 64 + 64 * 256) * 2 + 4 * 16 + 1024
    assert spec.tile_blocks == SM90.num_cus and "_tma132_" in spec.kernel_name
    src = emit(spec)
    assert src.grid == (132, 1, 1) and src.block == (384, 1, 1)
    assert ("DG_TMA", 1) in src.defines and ("DG_THREADS", 256) in src.defines
    dy, w = src.tensor_maps
    assert (dy.operand, dy.dims, dy.strides, dy.box) == ("dy", (512, 64 * 64 * 64), (1024,), (64, 128))
    assert (w.operand, w.dims, w.strides, w.box) == ("w", (512, 1, 512), (1024, 1024), (64, 1, 64))
    assert spec.tma_box is None and ("DG_TMA_RECT", 0) in src.defines
    sol = DgradSolver().get_solution(p, SM90, spec.config)
    assert sol.kernels[0].block == (384, 1, 1) and sol.kernels[0].grid == (132, 1, 1)
    # groups: W rows are every group's k, the map's columns one group's cpg
    g = make_spec(nhwc(N=2, C=256, K=128, G=2, Hi=9, Wi=9, Y=1, X=1, pH=0, pW=0, dtype="bf16"), SM90,
                  PerfConfig.parse("64,64,64,1,1,64,64,0,0,0,1,-1,2,3"))
    dy, w = emit(g).tensor_maps
    assert dy.dims == (128, 2 * 81) and w.dims == (128, 1, 128) and w.strides == (256, 256) and dy.dtype == "bf16"
    # every other path takes no tensor maps
    assert emit(make_spec(p, SM90, PerfConfig.parse("128,256,64,2,1,64,256,0,0,0,1,-1,4,1"))).tensor_maps == ()


@pytest.mark.parametrize("block,cap", [(128, 255), (256, 255), (288, 168), (384, 168), (512, 128),
                                       (544, 96), (1024, 64), (96, 255)])
def test_register_cap_follows_the_busiest_sm_partition(block, cap):
    """64 K registers in four 16 K partitions; a block's warps are spread over them, so a
    9-warp block (TMA: 8 + the producer) gets 168 per thread, as ptxas allocated (a review
    found 65536 / 288 = 227 accepting a config that spilled)."""
    from miopen_solver.spec import register_cap
    assert register_cap(SM90, block) == cap


def test_tma_block_size_counts_the_producer_warp():
    ok, why = is_valid_performance_config(PW, SM90, PerfConfig.parse("256,128,64,4,2,64,64,0,0,0,1,-1,3,3"))
    assert not ok and "block of 1056 threads exceeds" in why, why


def test_tma_widths_are_fixed_and_b_tiles_need_not_spread_over_threads():
    """TMA loads boxes, not per-thread vectors: a 3-warpgroup tile whose B tile would not
    spread over 384 threads is valid, and vector caps neither reject nor rename a config."""
    spec = make_spec(PW, SM90, PerfConfig.parse("192,64,64,3,1,64,64,0,0,0,1,-1,3,3"))
    assert (spec.vec_a, spec.vec_b, spec.vec_c) == (8, 8, 8) and spec.block_threads == 416
    capped = make_spec(PW, SM90, PerfConfig.parse("128,256,64,2,1,64,256,1,2,4,1,-1,4,3"))
    assert capped.kernel_name == make_spec(PW, SM90, TMA_DEFAULT).kernel_name


@pytest.mark.parametrize("hi,wi,n,tile_m,box", [
    (64, 64, 4, 128, (1, 2, 64)),     # whole rows, exact
    (56, 56, 4, 128, (1, 2, 56)),     # whole rows, 112 of 128 GEMM rows used
    (14, 14, 4, 128, (1, 9, 14)),
    (7, 7, 4, 128, (2, 7, 7)),        # whole images: two per tile
    (7, 7, 1, 128, (1, 7, 7)),        # never more images than N
    (3, 300, 2, 256, (1, 1, 256)),    # a row wider than the tile: part of a row
    (8, 8, 8, 64, (1, 8, 8)),
])
def test_tma_box_of_a_filter_with_taps(hi, wi, n, tile_m, box):
    """Stride 1 with taps: a tile is a box of dX pixels, at most tile_m of them, and the
    tiles cover dX: ceil(N/bn) * ceil(Hi/bh) * ceil(Wi/bw) boxes per column tile."""
    p = nhwc(N=n, C=128, K=128, Hi=hi, Wi=wi)
    wm = max(1, tile_m // 128)
    spec = make_spec(p, SM90, PerfConfig(tile_m, 128, 64, wm, 1, tile_m // wm, 128, 0, 0, 0, 1, -1, 3, 3))
    assert spec.tma_box == box and box[0] * box[1] * box[2] <= tile_m
    bn, bh, bw = box
    assert spec.tiles_per_group == -(-n // bn) * -(-hi // bh) * -(-wi // bw)
    assert spec.zero_fill == "none"
    dy, w = emit(spec).tensor_maps
    assert dy.dims == (128, p.Wo, p.Ho, n) and dy.box == (64, bw, bh, bn)
    assert dy.strides == (256, 256 * p.Wo, 256 * p.Wo * p.Ho)
    assert w.dims == (128, 9, 128) and w.strides == (256, 9 * 256) and w.box == (64, 1, 64)
    d = dict(emit(spec).defines)
    assert (d["DG_TMA_RECT"], d["DG_BOX_N"], d["DG_BOX_H"], d["DG_BOX_W"]) == (1, bn, bh, bw)
    assert d["DG_A_BOX_ELEMS"] == bn * bh * bw * 64 and d["DG_BOX_ROWS"] == bn * bh * bw


@pytest.mark.parametrize("kw", [
    dict(N=2, C=128, K=128, Hi=56, Wi=56, sH=2, sW=2),              # 4 sub-GEMMs of 29x29 slices
    dict(N=3, C=64, K=72, Hi=17, Wi=17, Y=5, X=5, pH=2, pW=2, sH=3, sW=3),
    dict(N=2, C=64, K=64, Hi=14, Wi=14, Y=1, X=1, pH=0, pW=0, sH=2, sW=2),  # zero-fill blocks
    dict(N=2, C=128, K=128, Hi=16, Wi=16, pH=2, pW=2, sH=2, sW=2, dH=2, dW=2),
])
def test_tma_boxes_cover_every_sub_gemm(kw):
    """Strided problems: one box for all tilde sub-GEMMs (largest slices), each sub-GEMM's
    pixel grid covered by its own boxes; the records' block starts count those boxes and
    the last one ends at tiles_per_group; zero-fill as for the other kernels."""
    from miopen_solver.kernels.emit import sub_gemm_records, SUB_FIELDS
    p = nhwc(**kw)
    spec = make_spec(p, SM90, PerfConfig.parse("128,64,64,2,1,64,64,0,0,0,1,-1,3,3"))
    subs = spec.sub_gemms
    bn, bh, bw = spec.tma_box
    assert bh <= max(s.h_slice for s in subs) and bw <= max(s.w_slice for s in subs) and bn * bh * bw <= 128
    recs = sub_gemm_records(spec)
    start, n_tiles = SUB_FIELDS.index("block_start"), SUB_FIELDS.index("n_tiles")
    total = 0
    for s, r in zip(subs, recs):
        assert r[start] == total
        total += (-(-p.N // bn)) * (-(-s.h_slice // bh)) * (-(-s.w_slice // bw)) * r[n_tiles]
    assert total == spec.tiles_per_group
    assert spec.zero_fill == ("blocks" if spec.decomposition.needs_zero_fill else "none")
    src = emit(spec)
    assert src.grid[0] == spec.tile_blocks + spec.zero_fill_blocks and ("DG_TMA_RECT", 1) in src.defines


def test_tma_needs_an_nvidia_warpgroup_target():
    for arch in ("sm_80", "gfx942"):
        ok, why = is_valid_performance_config(PW, get_target(arch), PerfConfig.parse("128,256,64,2,1,64,256,0,0,0,1,-1,3,3"))
        assert not ok and "schedule 3 (wgmma-tma) needs warpgroup MMA" in why


def test_persistent_grid_fills_the_device_once():
    from miopen_solver.solver import DgradSolver
    # big 1x1: 4096 tiles of 128x256; 3 stages + the 128x264 epilogue tile = 216064 bytes ->
    # one block per SM by shared memory; 256 threads x (128 + 88) registers -> one by registers.
    p = nhwc(N=64, C=512, K=512, Hi=64, Wi=64, Y=1, X=1, pH=0, pW=0)
    spec = make_spec(p, SM90, PerfConfig.parse("128,256,64,2,1,64,256,0,0,0,1,-1,3,2"))
    assert spec.persistent and spec.split_k == 1 and spec.tiles_per_group == 4096
    assert spec.lds_bytes == 3 * (128 * 64 + 64 * 256) * 2 + 128 * 264 * 2 + 1024
    assert spec.tile_blocks == SM90.num_cus and "_pb132_" in spec.kernel_name
    assert emit(spec).grid == (132, 1, 1)
    assert DgradSolver().get_solution(p, SM90, spec.config).kernels[0].grid == (132, 1, 1)
    # 64x64 tiles, 2 stages: 2*(64*64+64*64)*2 + 64*72*2 + 1024 = 42752 bytes -> 5 by shared
    # memory; 128 threads x (32 + 88) registers -> 4 by registers; 4 x 132 = 528 slots, but a
    # small problem has fewer tiles: never more blocks than tiles.
    small = make_spec(nhwc(C=64, K=64), SM90, PerfConfig.parse("64,64,64,1,1,64,64,0,0,0,1,-1,2,2"))
    assert small.tile_blocks == small.tiles_per_group == 2
    big = make_spec(nhwc(N=64, C=64, K=64, Hi=64, Wi=64), SM90, PerfConfig.parse("64,64,64,1,1,64,64,0,0,0,1,-1,2,2"))
    assert big.tile_blocks == 4 * 132 and big.tiles_per_group == 4096
    # groups share the slots: G=4 -> a quarter of them per group
    grouped = make_spec(nhwc(N=64, C=256, K=256, G=4, Hi=64, Wi=64), SM90,
                        PerfConfig.parse("64,64,64,1,1,64,64,0,0,0,1,-1,2,2"))
    assert grouped.tile_blocks == 132 and emit(grouped).grid[:2] == (132, 4)
    # split_k -1 resolves to 1 for a persistent kernel
    assert make_spec(p, SM90, PerfConfig.parse("128,256,64,2,1,64,256,0,0,0,-1,-1,3,2")).split_k == 1


@pytest.mark.parametrize("cfg,ok", [
    # 4 warpgroups = 512 threads -> 128 registers per thread: 128 accumulators do not fit
    # (ptxas C7602, found by a fresh-user review), 64 do
    ("256,256,64,4,1,64,256,0,0,0,1,-1,3,1", False),
    ("256,256,64,2,2,128,128,0,0,0,1,-1,2,1", False),
    ("256,128,64,4,1,64,128,0,0,0,1,-1,4,1", True),
    ("128,256,64,2,1,64,256,0,0,0,1,-1,4,1", True),        # 256 threads: 255 per thread
    # the same rule for warp-level MMA: 16 warps of 64x64 tiles = 128 accumulators
    ("256,256,32,4,4,64,64,0,0,0,1,-1,2", False),
    ("128,128,32,4,4,32,32,0,0,0,1,-1,2", True),            # 32 accumulators, 512 threads
])
def test_registers_per_thread_bound_the_accumulators(cfg, ok):
    p = nhwc(N=8, C=256, K=256, Hi=16, Wi=16)
    valid, why = is_valid_performance_config(p, SM90, PerfConfig.parse(cfg))
    assert valid == ok, why
    if not ok:
        assert "registers a thread of a 512-thread block may use" in why
    else:
        spec = make_spec(p, SM90, PerfConfig.parse(cfg))
        assert spec.accumulators_per_lane + 40 <= min(255, 65536 // spec.threads)


def test_search_offers_no_config_over_the_register_budget():
    from miopen_solver.solver import DgradSolver
    p = nhwc(N=32, C=256, K=64, Hi=56, Wi=56, Y=1, X=1, pH=0, pW=0)
    for cfg in DgradSolver().search(p, SM90):
        spec = make_spec(p, SM90, cfg)
        assert spec.accumulators_per_lane + 40 <= min(255, 65536 // spec.threads), cfg


def test_wgmma_fp32_rejected_and_spec_values():
    ok, why = is_valid_performance_config(nhwc(C=128, K=128, dtype="fp32"), SM90,
                                          PerfConfig.parse("128,128,64,2,1,64,128,0,0,0,1,-1,3,1"))
    assert not ok and "needs fp16 or bf16" in why
    spec = make_spec(nhwc(C=256, K=256), SM90, PerfConfig.parse("128,256,64,2,1,64,256,0,0,0,1,-1,4,1"))
    # 2 warpgroups of 128 threads; a 64x256 fp32 fragment over 128 threads = 128 registers;
    # 4 stages of (128x64 + 64x256) fp16 = 196608 bytes > the 128x(256+8) epilogue, + 1024 slack.
    assert spec.threads == 256 and spec.accumulators_per_lane == 128 and spec.lds_k_outer
    assert spec.lds_bytes == 4 * (128 * 64 + 64 * 256) * 2 + 1024
    assert spec.mma_m == 1 and spec.mma_n == 32


# ------------------------------------------------------------------ zero-fill analysis
def _written_pixels_brute_force(p):
    """dX pixels some phase writes, from the research formulas (dgrad_kernels.md section 2),
    pixel by pixel: phase i of an axis writes coordinate x iff (x + pad - dil*i) is a
    multiple of the stride, htilde = (x + pad - dil*i)/stride lies in [begin, end), and the
    phase has taps (i < filter)."""
    from math import gcd

    def axis(size_in, size_out, filt, pad, stride, dil):
        tilde = stride // gcd(stride, dil)
        htilde = size_out + -(-dil * (filt - 1) // stride)
        begin = max(0, pad - dil * (tilde - 1)) // stride
        end = min(htilde, -(-(pad + size_in - 1) // stride) + 1)
        return {i: {x for x in range(size_in) if (x + pad - dil * i) % stride == 0
                    and begin <= (x + pad - dil * i) // stride < end}
                for i in range(tilde) if i < filt}

    rows = axis(p.Hi, p.Ho, p.Y, p.pH, p.sH, p.dH)
    cols = axis(p.Wi, p.Wo, p.X, p.pW, p.sW, p.dW)
    return {(r, c) for rs in rows.values() for cs in cols.values() for r in rs for c in cs}


@settings(max_examples=300, deadline=None)
@given(problems(max_side=20))
def test_zero_fill_verdict_matches_pixel_enumeration(problem):
    from miopen_solver.tilde import decompose
    written = _written_pixels_brute_force(problem)
    assert decompose(problem).needs_zero_fill == (len(written) < problem.Hi * problem.Wi)


def test_zero_fill_analysis_scales_with_the_image_side():
    import tracemalloc

    from miopen_solver.tilde import decompose
    p = ConvProblem(N=1, C=1, Hi=32767, Wi=32767, K=1, Y=1, X=1, dtype="fp16",
                    in_layout="NHWC", out_layout="NHWC", fil_layout="NHWC")
    tracemalloc.start()
    try:
        assert decompose(p).needs_zero_fill is False
        assert decompose(p.replace(sH=2, sW=2)).needs_zero_fill is True
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20          # 2^30 pixels: rows x columns (KiB), never pixel sets (GiB); measured, not timed


@settings(max_examples=60, deadline=None)
@given(st.sampled_from((16, 32, 48, 64, 96, 128)), st.sampled_from((16, 32, 48, 64, 192)),
       st.sampled_from((1, 2)), st.sampled_from(((1, 0, 1), (3, 1, 1), (3, 1, 2))),
       st.sampled_from((7, 14, 28)), st.sampled_from(("fp16", "bf16", "fp32")))
def test_narrow_warpgroup_default_only_for_32_channels_on_one_side(c, k, g, fps, hw, dtype):
    """sm_90: kpg 32 with cpg > 32 takes the tile_k-32 warpgroup tile, cpg 32 with kpg >= 64 the
    32-wide one (H200: 1.16-1.44x the mma.sync defaults on four zoo layers); every other
    problem keeps the rules it had, and the default always validates."""
    from miopen_solver.heuristics import NARROW_K_DEFAULT, NARROW_N_DEFAULT, narrow_wgmma_config
    f, pad, s = fps
    p = nhwc(N=2, C=c * g, K=k * g, G=g, Hi=hw, Wi=hw, Y=f, X=f, pH=pad, pW=pad, sH=s, sW=s, dtype=dtype)
    got = narrow_wgmma_config(p, SM90)
    if got is not None:
        assert (p.kpg == 32 and p.cpg > 32 and got == NARROW_K_DEFAULT) or \
               (p.cpg == 32 and p.kpg >= 64 and got == NARROW_N_DEFAULT)
        assert is_valid_performance_config(p, SM90, got)[0]
    else:
        assert not ((p.kpg == 32 and p.cpg > 32) or (p.cpg == 32 and p.kpg >= 64)) \
            or not is_valid_performance_config(p, SM90, NARROW_K_DEFAULT if p.kpg == 32 else NARROW_N_DEFAULT)[0]
    dflt = default_performance_config(p, SM90)
    assert is_valid_performance_config(p, SM90, dflt)[0]
    assert narrow_wgmma_config(p, SM80) is None                       # no warpgroup MMA
    if dtype == "fp32":
        assert got is None                                              # FFMA: no warpgroup tile


@settings(max_examples=60, deadline=None)
@given(st.sampled_from((24, 48, 64, 144, 256, 576)), st.sampled_from((8, 16, 24, 32, 40, 64, 80, 96, 112, 128)),
       st.sampled_from((1, 2)), st.sampled_from(((1, 0, 1), (1, 0, 2), (3, 1, 1))),
       st.sampled_from((7, 14, 56)), st.sampled_from(("fp16", "bf16", "fp32")))
def test_short_k_default_only_for_short_pointwise_gemms(c, k, g, fps, hw, dtype):
    """sm_90: a 1x1 stride-1 layer with cpg > 32 and kpg 16-96 (not 32) takes the short-K tile,
    unless the one-k-tile persistent rule applies (or its grid is under one wave: the
    sub-wave rule comes first); nothing else does, no other target, and the default always
    validates."""
    from miopen_solver.heuristics import SHORT_K_DEFAULT, short_k_config, wgmma_config
    from miopen_solver.sub_wave import sub_wave_config
    f, pad, s = fps
    p = nhwc(N=2, C=c * g, K=k * g, G=g, Hi=hw, Wi=hw, Y=f, X=f, pH=pad, pW=pad, sH=s, sW=s, dtype=dtype)
    domain = (dtype != "fp32" and p.is_pointwise and p.cpg > 32 and 16 <= p.kpg <= 96 and p.kpg != 32
              and not (p.kpg >= 64 and wgmma_config(p, SM90).schedule == KernelSchedule.WGMMA_PERSISTENT))
    got = short_k_config(p, SM90)
    assert got == (SHORT_K_DEFAULT if domain else None)
    dflt = default_performance_config(p, SM90)
    assert is_valid_performance_config(p, SM90, dflt)[0]
    if domain:
        assert dflt == (sub_wave_config(p, SM90) or SHORT_K_DEFAULT)
    assert short_k_config(p, SM80) is None and short_k_config(p, get_target("gfx942")) is None


def test_short_k_rule_leaves_the_virtual_gemms_alone():
    """A patch stem whose virtual pointwise GEMM is short (ConvNeXt 4x4/s4: kpg 96, cpg 48) keeps
    the patch default: the short-K tile was not measured on the patch kernels."""
    from miopen_solver.heuristics import SHORT_K_DEFAULT, patch_config
    p = nhwc(N=2, C=3, K=96, Hi=224, Wi=224, Y=4, X=4, pH=0, pW=0, sH=4, sW=4)
    dflt = default_performance_config(p, SM90)
    assert dflt.schedule.patch and dflt == patch_config(p, SM90)
    assert (dflt.tile_m, dflt.tile_n, dflt.tile_k) != (SHORT_K_DEFAULT.tile_m, SHORT_K_DEFAULT.tile_n, SHORT_K_DEFAULT.tile_k)


@needs_emit
def test_tma_split_k_walks_work_units_on_a_grid_of_one_slice():
    """Split-K on the TMA schedule: grid z is 1 and the persistent grid is sized by the work
    units (tiles x split_k), at most what fits on the device; the kernel keeps its tmask
    sections (the split epilogue) and a TMA kernel without a split keeps none."""
    p = nhwc(N=2, C=256, K=1024, Hi=7, Wi=7, Y=1, X=1, pH=0, pW=0)
    plain = make_spec(p, SM90, PerfConfig.parse("128,128,64,2,1,64,128,0,0,0,1,-1,4,3"))
    for split, reduce in ((2, "atomic"), (4, "atomic"), (3, "workspace")):
        cfg = PerfConfig.parse(f"128,128,64,2,1,64,128,0,0,0,{split},-1,4,3,{2 if reduce == 'workspace' else 0}")
        spec = make_spec(p, SM90, cfg)
        assert spec.split_k == split and spec.split_k_reduce == reduce and spec.grid[2] == 1
        assert spec.tile_blocks == min(plain.tiles_per_group * split, SM90.num_cus * spec.resident_blocks)
        assert spec.workspace_bytes == (split * spec.workspace_slice_elems * 4 if reduce == "workspace" else 0)
        assert spec.zero_fill == ("memset" if reduce == "atomic" else "none")
        text = emit(spec).text
        assert "dg_epilogue_split" in text and "u < DG_TILES * DG_SPLIT_K" in text
    assert "dg_epilogue_split" not in emit(plain).text
    # -1 keeps a persistent grid unsplit; the cp.async persistent schedule never splits
    assert make_spec(p, SM90, PerfConfig.parse("128,128,64,2,1,64,128,0,0,0,-1,-1,4,3")).split_k == 1
    ok, why = is_valid_performance_config(p, SM90, PerfConfig.parse("128,128,64,2,1,64,128,0,0,0,2,-1,4,2"))
    assert not ok and "split_k must be 1 or -1" in why


@needs_emit
def test_tma_split_k_rule_counts_the_kernels_k_tiles_and_minus_one_keeps_a_chosen_split():
    """The TMA kernel's K loop is ceil(kpg / 64) channel chunks of each tap: with kpg 32 a
    3x3 sub-GEMM has 9 k-tiles (not ceil(9*32/64) = 5), and the rule, the kernel's
    DG_MIN_KTILES and the refusal say 9. A wrong tile_k is refused for itself first. A run's
    --split-k -1 keeps the split a TMA default chose (the schedule resolves no -1)."""
    from miopen_solver.solver import DgradSolver
    p = nhwc(N=2, C=64, K=32, Hi=8, Wi=8)
    ok9 = make_spec(p, SM90, PerfConfig.parse("128,64,64,2,1,64,64,0,0,0,9,-1,4,3"))
    assert ("DG_MIN_KTILES", 9) in emit(ok9).defines
    ok, why = is_valid_performance_config(p, SM90, PerfConfig.parse("128,64,64,2,1,64,64,0,0,0,10,-1,4,3"))
    assert not ok and "split_k 10 exceeds the 9 k-tiles" in why
    ok, why = is_valid_performance_config(nhwc(N=2, C=256, K=256, Hi=8, Wi=8, Y=1, X=1, pH=0, pW=0), SM90,
                                          PerfConfig.parse("128,256,128,2,1,64,256,0,0,0,3,-1,3,3"))
    assert not ok and "tile_k must be 64" in why
    mid = nhwc(N=8, C=1280, K=1280, Hi=8, Wi=8)
    chosen = DgradSolver().find_solution(mid, SM90)
    assert chosen.spec.tma and chosen.spec.split_k > 1
    # the search holds the model's TMA splits (2, 3, 4: no power of two needed), the default too
    searched = list(DgradSolver().search(mid, SM90))
    assert {c.split_k for c in searched if c.schedule is KernelSchedule.WGMMA_TMA} == {1, 2, 3, 4}
    assert chosen.perf_config in searched
    again = DgradSolver().find_solution(mid, SM90, split_k=-1)
    assert again.spec.split_k == chosen.spec.split_k and again.kernel_name == chosen.kernel_name
    assert DgradSolver().find_solution(mid, SM90, split_k=1).spec.split_k == 1


def test_every_schedule_has_a_rules_entry():
    """A new schedule gets its row in SCHEDULE_RULES (the families with their own spec an
    empty one: their rules run before the main loop's)."""
    from miopen_solver.spec import SCHEDULE_RULES
    assert set(SCHEDULE_RULES) == set(KernelSchedule)
