"""Regression fixtures: the corpus, the format, the replay of every fixture on the CPU, and
emission neutrality (every fixture re-emitted and compared with its golden hashes).

When only emission hashes moved (the kernel text changed), the emission test says so and
gives the one command that regenerates the golden:
``dgrad-driver replay fixtures/ --update-golden``.
"""

from __future__ import annotations

import dataclasses
import json
import math
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

from conftest import naive_dgrad, suite_lines
from miopen_solver import fixtures as fx
from miopen_solver import prng
from miopen_solver.command import parse
from miopen_solver.errors import MiopenCommandError
from miopen_solver.problem import ConvProblem
from miopen_solver.runtime.cpu import CpuEngine
from miopen_solver.spec import DgradSpec
from miopen_solver.target import get_target

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
ALL = fx.load(FIXTURES)
BY_ID = {f.id: f for f in ALL}
NHWC3 = "--in_layout NHWC --out_layout NHWC --fil_layout NHWC"


@lru_cache(maxsize=None)
def replayed(fid: str) -> fx.Result:
    """One CPU replay per fixture per session (the replay and emission tests share it)."""
    return fx.replay(BY_ID[fid], CpuEngine())


@lru_cache(maxsize=None)
def fresh(fid: str) -> fx.Fixture:
    """The fixture with a golden computed now (tests of the machinery must not depend on
    the committed golden being current while the kernel text is being edited)."""
    return BY_ID[fid].with_expect(fx.compute(BY_ID[fid].command, CpuEngine()))


def _explain(results) -> str:
    lines = []
    for r in results:
        lines.append(f"{r.fixture.id} ({r.fixture.path}:{r.fixture.line}): {r.status}")
        lines += [f"    FAIL {m}" for m in r.failures]
        lines += [f"    {d.path}: {d.expected!r} -> {d.actual!r}" for d in r.drifts]
    return "\n".join(lines)


# ------------------------------------------------------------------ the corpus
def test_the_readme_counts_the_fixtures_replay_replays():
    """The README said "pins 208 backward-data lines" while ``dgrad-driver replay fixtures/``
    replayed 211: its numbers -- all lines, the backward-data lines with a golden, the lines
    that must be rejected -- are the corpus's."""
    import re
    readme = (FIXTURES.parent / "README.md").read_text()
    m = re.search(r"`fixtures/\*\.jsonl` pins (\d+) lines: (\d+) backward-data lines .*? and (\d+) lines that "
                  r"must be\s+rejected .*?replays all (\d+)\)", readme, re.S)
    assert m, "README's Regression fixtures section no longer says how many lines fixtures/ pins"
    rejected = sum("parse_error" in f.expect for f in ALL)
    assert tuple(map(int, m.groups())) == (len(ALL), len(ALL) - rejected, rejected, len(ALL))


def test_corpus_has_at_least_80_real_lines_each_with_a_source_and_golden():
    assert len(ALL) >= 80
    assert all(f.source.strip() and f.command.strip() for f in ALL)
    missing = [f.id for f in ALL if f.expect is None]
    assert not missing, f"fixtures without golden: {missing}; run {fx.REGENERATE_COMMAND}"
    names = sorted(p.name for p in FIXTURES.glob("*.jsonl"))
    assert len(names) >= 14 and "sub_wave.jsonl" in names


def test_every_fixture_file_is_described_in_the_fixtures_readme():
    """fixtures/README.md's table names every file of the corpus and no other: a new file
    (sub_wave.jsonl) was added to a hard-coded list here instead; the table is the list."""
    import re
    table = re.findall(r"^\| `([^`]+\.jsonl)` \|", (FIXTURES / "README.md").read_text(), re.M)
    assert sorted(table) == sorted(p.name for p in FIXTURES.glob("*.jsonl"))
    assert len(table) == len(set(table))


def test_fixture_files_are_canonical_json_lines():
    for path in FIXTURES.glob("*.jsonl"):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            rec = json.loads(line)
            assert line == json.dumps(rec, sort_keys=True, ensure_ascii=False), f"{path.name}:{n} not canonical"
            assert set(rec) - {"perf_config"} == {"command", "expect", "id", "source"}


def test_bench_suite_is_copied_verbatim():
    lines = [line for _, line in suite_lines()]
    got = [f.command for f in ALL if f.path.endswith("bench_suite.jsonl")]
    assert got == lines


def test_perf_model_lines_name_their_file_and_line():
    pm = [f for f in ALL if f.path.endswith("perf_models.jsonl")]
    assert len(pm) >= 60
    for f in pm:
        assert "test/perf_models/" in f.source and ".txt:" in f.source
        assert "--forw 2" in f.command


def _features(f) -> set:
    """What a line exercises, read from the line itself (lenient parse) and, for rejected
    lines, from how it must be rejected."""
    feats = set()
    exp = f.expect or {}
    if "parse_error" in exp:
        pe = exp["parse_error"]
        feats.add(f"reject:{pe['flag']}={pe['value']}")
    try:
        p = parse(f.command, allow_any_direction=True).problem
    except MiopenCommandError:
        return feats
    feats |= {p.dtype, f"filter:{p.Y}x{p.X}", f"stride:{p.sH}", f"stride:{p.sW}",
              f"dilation:{p.dH}", f"dilation:{p.dW}"}
    lay = {p.in_layout, p.out_layout, p.fil_layout}
    feats.add("layout:" + (lay.pop() if len(lay) == 1 else "mixed"))
    if p.G > 1:
        feats.add("depthwise" if p.is_depthwise else "grouped")
    if p.C % 2 or p.K % 2 or p.cpg % 2:
        feats.add("odd channels")
    if p.Hi == 1 or p.Wi == 1:
        feats.add("H or W of 1")
    for arch, t in exp.get("targets", {}).items():
        feats |= {f"{arch}:{code}" for code in t["reasons"]}
    if p.is_3d:
        feats.add("3-D")
    if p.mode == "trans":
        feats.add("trans")
    return feats


def test_corpus_covers_what_the_issue_asks_for():
    have = set().union(*(_features(f) for f in ALL))
    want = {"fp32", "fp16", "bf16", "layout:NHWC", "layout:NCHW", "layout:mixed",
            "filter:1x1", "filter:3x3", "filter:1x7", "filter:7x1", "filter:5x5",
            "stride:1", "stride:2", "stride:3", "stride:4", "stride:5",
            "dilation:1", "dilation:2", "dilation:3", "dilation:4",
            "grouped", "depthwise", "odd channels", "H or W of 1",
            "reject:<base>=convint8", "reject:-F=1", "reject:-F=0",
            "3-D", "gfx942:SPATIAL_DIM", "sm_90:SPATIAL_DIM",
            "trans", "gfx942:TRANSPOSED_MODE", "sm_90:TRANSPOSED_MODE",
            "gfx942:LAYOUT", "gfx942:INDEX_OVERFLOW"}
    assert want <= have, f"not covered: {sorted(want - have)}"


def test_bug_report_shapes_are_present():
    cmds = {f.id: parse(f.command).problem for f in ALL if "parse_error" not in f.expect}
    ps = list(cmds.values())
    assert any(p.Y == 4 and p.sH == 3 for p in ps)                                   # MIOpen#575
    assert any(p.Y == 8 and p.sH == 5 for p in ps)
    assert any(p.Y == 7 and p.sW == 3 for p in ps)
    assert any(p.Hi == p.Wi == 2 and p.sH == p.sW == 2 for p in ps)                  # MIOpen#1495
    assert any(p.Y == p.X == 1 and p.sH == p.sW == 2 and p.all_nhwc for p in ps)     # CK#105
    assert any(p.G > 1 and not p.is_depthwise and p.Y == p.X == 3 for p in ps)       # CK#824, PR#989
    tiny = cmds["rocmlibs12322_tiny_1x3_fp16"]                                        # rocm-libraries#12322
    assert (tiny.N, tiny.K, tiny.Ho, tiny.Wo, tiny.C, tiny.Hi, tiny.Wi, tiny.Y, tiny.X) == (1, 4, 1, 5, 8, 1, 7, 1, 3)
    assert any(p.Y == p.X == 2 and (p.dH, p.dW) == (2, 1) for p in ps)               # legacy-rocm-build#4606


# ------------------------------------------------------------------ CPU replay (CI)
@pytest.mark.parametrize("fid", [f.id for f in ALL])
def test_replay_cpu(fid):
    """Verdicts, configs, kernel names, launch shapes and numerics match the golden (the
    emission hashes are the next test's)."""
    r = replayed(fid)
    other = [d for d in r.drifts if d.kind != "hash"]
    assert not r.failures and not other, (
        _explain([r]) + f"\nIf the change is intended, regenerate the golden: {fx.REGENERATE_COMMAND}")


def test_emission_matches_golden():
    """Emission neutrality: every fixture re-emitted for gfx942 and sm_90 and its hashes
    compared with the golden."""
    results = [replayed(f.id) for f in ALL]
    moved = [r for r in results if any(d.kind == "hash" for d in r.drifts)]
    if not moved:
        return
    defines = sorted({r.fixture.id for r in moved for d in r.drifts if d.path.endswith("defines_sha256")})
    kernels_moved = sum(d.path.endswith("source_sha256") for r in moved for d in r.drifts)
    if not defines:
        pytest.fail(
            f"Only source_sha256 moved ({kernels_moved} kernels in {len(moved)} fixtures); the emitted "
            f"defines are unchanged, so a kernel text (miopen_solver/kernels/*.cu) changed. If that is intended, "
            f"regenerate the golden with ONE command:\n    {fx.REGENERATE_COMMAND}", pytrace=False)
    pytest.fail(
        f"The emitted defines moved for {len(defines)} of {len(ALL)} fixtures: {', '.join(defines)}.\n"
        f"A change meant for one class of kernels must not move the others; check the list. If it is "
        f"intended, regenerate the golden with:\n    {fx.REGENERATE_COMMAND}", pytrace=False)


def test_a_change_to_one_class_of_kernels_moves_only_that_class(monkeypatch):
    """An emitter change for zero-fill-block kernels moves the hashes of exactly the
    fixtures whose kernel writes zeros with extra blocks, on each target, and nothing else
    (compared with the records computed before the change, not with the golden)."""
    chosen = [f for f in ALL if "parse_error" not in f.expect][::4]
    before = {f.id: fx.compute(f.command, numerics=False) for f in chosen}
    real = DgradSpec.emit

    def emit_with_extra_define(spec):
        src = real(spec)
        if spec.zero_fill != "blocks":
            return src
        return dataclasses.replace(src, defines=src.defines + (("DG_EXTRA", 1),),
                                   text=src.text + "\n// extra", sha256="0" * 64)

    monkeypatch.setattr(DgradSpec, "emit", emit_with_extra_define)
    expected, moved = set(), set()
    for f in chosen:
        for arch, t in before[f.id]["targets"].items():
            if "_zfb_" in t.get("kernel_name", ""):
                expected |= {f"{f.id}:targets.{arch}.defines_sha256", f"{f.id}:targets.{arch}.source_sha256"}
        after = fx.compute(f.command, numerics=False)
        moved |= {f"{f.id}:{d.path}" for d in fx.compare(before[f.id], after, numerics="skip")}
    assert expected, "the sample holds no zero-fill-block kernel"
    assert moved == expected


# ------------------------------------------------------------------ records, by hand
def test_parse_rejected_lines_record_flag_value_and_message():
    rec = fx.compute(f"convint8 -n 2 -c 8 -H 8 -W 8 -k 8 -y 3 -x 3 -F 2 {NHWC3}")
    assert set(rec) == {"parse_error"}
    assert rec["parse_error"]["flag"] == "<base>" and rec["parse_error"]["value"] == "convint8"
    assert "int8" in rec["parse_error"]["message"]
    rec = fx.compute("convfp16 -n 2 -c 8 -H 8 -W 8 -k 8 -y 3 -x 3 -F 1")
    assert (rec["parse_error"]["flag"], rec["parse_error"]["value"]) == ("-F", "1")
    assert "forward" in rec["parse_error"]["message"]
    assert BY_ID["rej_forward_F1"].expect["parse_error"]["flag"] == "-F"
    no_f = BY_ID["rej_no_F_flag"].expect["parse_error"]      # -F not given: no value typed, the default named
    assert no_f["flag"] == "-F" and no_f.get("value") is None and "not given: MIOpenDriver's default 0" in no_f["message"]


def test_tiny_fp16_record_against_a_hand_oracle():
    """rocm-libraries#12322: dy 1x4x1x5, w 4x8x1x3, dx 1x8x1x7 (fp16 NHWC). The key is
    written out by hand; the rms error is recomputed from the textbook loop definition and
    MIOpen's rms formula, independently of the engine and the float64 reference."""
    line = f"convfp16 -n 1 -c 8 -H 1 -W 7 -k 4 -y 1 -x 3 -p 0 -q 0 -u 1 -v 1 -l 1 -j 1 -g 1 -F 2 {NHWC3}"
    rec = fx.compute(line)
    assert rec["problem_key"] == "4-1-5-1x3-8-1-7-1-0x0-1x1-1x1-0-NHWC-NHWC-NHWC-FP16-B"
    for arch in ("gfx942", "sm_90"):
        t = rec["targets"][arch]
        assert t["applicable"] and t["reasons"] == [] and t["kernel_name"].startswith(f"dgrad_{arch}_fp16_")
        assert len(t["source_sha256"]) == 64 and len(t["defines_sha256"]) == 64
    num = rec["numerics"]
    assert num["command"] == ("convfp16 -n 1 -c 8 -H 1 -W 7 -k 4 -y 1 -x 3 -p 0 -q 0 -u 1 -v 1 -l 1 -j 1 "
                              f"-g 1 -m conv -F 2 {NHWC3}")
    assert num["ok"] and num["tolerance"] == pytest.approx(8.2e-2)
    p = parse(line).problem
    inp = prng.generate_inputs(p, prng.DEFAULT_SEED)
    ref = naive_dgrad(p, inp.dy, inp.w)                       # float64, pure loops
    out = ref.astype(np.float16).astype(np.float64)           # 12 products: fp32 sum rounds alike
    diff = ref - out
    rms = math.sqrt(float((diff * diff).sum())) / (math.sqrt(ref.size) * max(abs(ref).max(), abs(out).max()))
    assert num["rms_error"] == pytest.approx(rms, rel=1e-2)


def test_golden_records_hold_hand_checked_facts():
    # MIOpen#1495: 1x1 stride 2 on 2x2 -> Ho = Wo = 1; NCHW by default. dY (H=W=1) and the
    # 1x1 W have NHWC bytes; dX (NCHW, W-stride 2: the kernel's NCHW stores would scatter) goes
    # through the workspace: 256 x 2048 x 2 x 2 fp32 = 8 MiB.
    e = BY_ID["miopen1495_1x1_s2_hw2"].expect
    assert e["problem_key"] == "1024-1-1-1x1-2048-2-2-256-0x0-2x2-1x1-0-NCHW-FP32-B"
    for a in fx.GOLDEN_TARGETS:
        t = e["targets"][a]
        assert t["applicable"] and t["kernel_name"].endswith("_zfb_n256c2048h2w2k1024y1x1p0x0s2x2d1x1g1+transpose_dx")
        assert t["workspace_bytes"] == 256 * 2048 * 2 * 2 * 4
    assert e["numerics"]["ok"]
    assert e["numerics"]["command"].startswith("conv -n 2 -c 2048 -H 2 -W 2 -k 1024 ")
    # > 4 GB gtest shape: 2048*512*1024 fp32 elements of dX, 2 MiB an image: 1023 images fit
    # 2^31-1 bytes, the largest divisor of 2048 up to 1023 is 512 -> 4 launches on both GPUs.
    e = BY_ID["gtest_igemm_1x1_over_4gb_nhwc_fp32"].expect
    assert all(e["targets"][a]["applicable"] and e["targets"][a]["split_n"] == [4, 512] for a in fx.GOLDEN_TARGETS)
    assert all("_n512c1h512w1024k1" in e["targets"][a]["kernel_name"] for a in fx.GOLDEN_TARGETS)
    # one image of 2^31 bytes: no split helps
    e = BY_ID["cov_one_image_over_2gb_fp32"].expect
    assert all(e["targets"][a]["reasons"] == ["INDEX_OVERFLOW"] for a in fx.GOLDEN_TARGETS)
    # Mixed layouts (perf-model lines that set only --out_layout NHWC: dX and W NCHW): W
    # (512 x 512 x 3 x 3 fp16) and dX (256 x 512 x 15 x 15 fp16; stride 2) through the workspace.
    e = BY_ID["resnet50v15_fp16_l115_3x3_s2_p0x0_c512k512_15_outnhwc"].expect
    t = e["targets"]["sm_90"]
    assert t["applicable"] and t["kernel_name"].endswith("_n256c512h15w15k512y3x3p0x0s2x2d1x1g1+transpose_w_dx")
    assert e["numerics"]["ok"] and t["workspace_bytes"] == 512 * 512 * 9 * 2 + 256 * 512 * 15 * 15 * 2
    # Depthwise NHWC: applicable; on gfx942 with the DEPTHWISE note (GEMMs), on sm_90 the
    # direct schedule (no note).
    e = BY_ID["nhwc_mobilenet_fp32_3x3_dw_c32k32_112"].expect
    assert e["targets"]["gfx942"]["applicable"] and e["targets"]["gfx942"]["notes"] == ["DEPTHWISE"]
    assert e["targets"]["sm_90"]["notes"] == [] and e["targets"]["sm_90"]["perf_config"].endswith(",4")
    assert e["targets"]["sm_90"]["kernel_name"].startswith("dgrad_direct_sm_90_fp32_")
    # 3-D: SPATIAL_DIM, numerics skipped.
    e = BY_ID["miopen926_3d_rejected"].expect
    assert "SPATIAL_DIM" in e["targets"]["gfx942"]["reasons"] and "skipped" in e["numerics"]


# ------------------------------------------------------------------ shrinking
def test_halve_keeps_odd_counts_odd():
    assert [fx._halve(x) for x in (64, 419, 3, 5, 2, 1, 194)] == [32, 209, 1, 3, 1, 1, 97]


def test_shrink_examples_worked_by_hand():
    # VGG19 l15: N=2 C=K=64 224x224 3x3 -> flops 2*2*64*64*9*224^2 = 7.40e9 > 1e9:
    # K 64->32 (3.70e9), C 64->32 (1.85e9), K 32->16 (0.92e9).
    q = fx.shrink(parse(BY_ID["vgg19_fp32_l15_3x3_c64k64_224"].command).problem)
    assert (q.N, q.C, q.K, q.G, q.Hi, q.Wi, q.Y, q.X) == (2, 32, 16, 1, 224, 224, 3, 3)
    # iree-turbine 225x225: N=2 C=16 K=64 -> 1.87e9; K 64->32 -> 0.93e9, dY 2*32*225^2 = 3.2M.
    q = fx.shrink(parse(BY_ID["boo_bf16_26_3x3_c16k64_225"].command).problem)
    assert (q.N, q.C, q.K) == (2, 16, 32)
    # odd C=419: 2*2*419*384*48*32 = 0.99e9 fits: only the batch is cut.
    q = fx.shrink(parse(BY_ID["boo_bf16_19_1x1_c419k384_48x32"].command).problem)
    assert (q.N, q.C, q.K) == (2, 419, 384)
    # depthwise G=4096 on 256x256: G halves until flops <= 1e9 (G=256) and dX <= 4M
    # elements: 2*G*65536 <= 4e6 -> G=16 (G=32 gives 4,194,304).
    p = ConvProblem(N=8, C=4096, Hi=256, Wi=256, K=4096, Y=3, X=3, pH=1, pW=1, G=4096,
                    in_layout="NHWC", out_layout="NHWC", fil_layout="NHWC")
    q = fx.shrink(p)
    assert (q.N, q.C, q.K, q.G) == (2, 16, 16, 16) and q.is_depthwise
    # small problems are kept (batch 1 stays 1)
    p = ConvProblem(N=1, C=8, Hi=1, Wi=7, K=4, Y=1, X=3)
    assert fx.shrink(p) == p


# ------------------------------------------------------------------ comparing
def test_round_sig():
    assert fx.round_sig(4.9121096981681246e-08) == 4.91e-08
    assert fx.round_sig(0.00013248582088062262) == 0.000132
    assert fx.round_sig(0.0) == 0.0
    assert math.isnan(fx.round_sig(float("nan")))


def test_rms_band_rule():
    # fp32: ratio 4, floor 1.5e-5 * 1e-5 = 1.5e-10 -> [1.25e-8 - 1.5e-10, 2e-7 + 1.5e-10]
    assert fx.rms_in_band(5e-8, 2.0e-7, 1.5e-5, "fp32")
    assert not fx.rms_in_band(5e-8, 2.01e-7, 1.5e-5, "fp32")
    assert fx.rms_in_band(5e-8, 1.24e-8, 1.5e-5, "fp32")
    assert not fx.rms_in_band(5e-8, 1.2e-8, 1.5e-5, "fp32")
    # fp16: ratio 1.25, floor 8.2e-7 -> upper 1.625e-4 + 8.2e-7 = 1.6332e-4
    assert fx.rms_in_band(1.3e-4, 1.633e-4, 8.2e-2, "fp16")
    assert not fx.rms_in_band(1.3e-4, 1.64e-4, 8.2e-2, "fp16")
    # golden 0 (exact): only the floor is allowed
    assert fx.rms_in_band(0.0, 1e-10, 1.5e-5, "fp32") and not fx.rms_in_band(0.0, 1e-9, 1.5e-5, "fp32")
    assert not fx.rms_in_band(1e-4, float("nan"), 8.2e-2, "fp16")


def test_compare_paths_and_kinds():
    exp = {"problem_key": "k", "targets": {"sm_90": {"applicable": True, "kernel_name": "a",
                                                     "source_sha256": "1" * 64, "reasons": []}},
           "numerics": {"command": "c", "ok": True, "rms_error": 1e-4, "tolerance": 8.2e-2}}
    act = json.loads(json.dumps(exp))
    assert fx.compare(exp, act, dtype="fp16") == []
    act["targets"]["sm_90"]["kernel_name"] = "b"
    act["targets"]["sm_90"]["source_sha256"] = "2" * 64
    act["numerics"]["rms_error"] = 2e-4
    got = fx.compare(exp, act, dtype="fp16")
    assert [(d.path, d.kind) for d in got] == [("numerics.rms_error", "numeric"),
                                               ("targets.sm_90.kernel_name", "value"),
                                               ("targets.sm_90.source_sha256", "hash")]
    # within the fp32 band the same change is no drift; GPU mode ignores the rms entirely
    assert [d.path for d in fx.compare(exp, act, dtype="fp32")] == ["targets.sm_90.kernel_name",
                                                                    "targets.sm_90.source_sha256"]
    act["numerics"]["ok"] = False
    assert "numerics.ok" not in {d.path for d in fx.compare(exp, act, numerics="gpu")}
    # a key that appears or disappears is a drift
    del act["targets"]["sm_90"]["kernel_name"]
    assert fx.Drift("targets.sm_90.kernel_name", "a", None, "value") in fx.compare(exp, act, numerics="skip")
    assert fx.compare(None, act) == [fx.Drift("expect", None, "(computed now; no golden yet)", "missing")]


def test_failures_and_regressions(tmp_path):
    f = fresh("bench_r50_3x3_c64_56")
    assert fx.failures({"numerics": {"ok": False, "rms_error": 0.5, "tolerance": 0.082, "command": "c"}})
    assert fx.failures(f.expect) == []
    # a golden 10x below what the code computes: the error rose above the band -> failed
    exp = json.loads(json.dumps(f.expect))
    exp["numerics"]["rms_error"] = fx.round_sig(exp["numerics"]["rms_error"] / 10)
    r = fx.replay(f.with_expect(exp), CpuEngine())
    assert r.status == fx.FAILED and "regressed" in r.failures[0]
    # a golden 10x above: the error fell below the band -> drifted (an improvement to pin)
    exp["numerics"]["rms_error"] = fx.round_sig(f.expect["numerics"]["rms_error"] * 10)
    r = fx.replay(f.with_expect(exp), CpuEngine())
    assert r.status == fx.DRIFTED and [d.path for d in r.drifts] == ["numerics.rms_error"]


@pytest.mark.parametrize("cfg, arch", [
    ("128,128,64,1,1,128,128,0,0,0,1,-1,4,3", "sm_90"),      # warpgroup TMA: sm_90a only
    ("64,64,32,1,1,64,64,0,0,0,1,-1,3,1", "sm_90"),          # the short-K warpgroup tile
])
def test_a_gpu_only_perf_config_runs_its_numerics_on_a_simulated_target(cfg, arch):
    """A pinned config the cpu target refuses runs its numerics on the first golden target
    taking it, simulated on the CPU engine (as ``run --backend cpu --arch``), and says so; the
    record verifies and replays clean."""
    line = "convfp16 -n 2 -c 64 -H 8 -W 8 -k 64 -y 3 -x 3 -p 1 -q 1 -F 2 --in_layout NHWC --out_layout NHWC --fil_layout NHWC"
    rec = fx.compute(line, CpuEngine(), perf_config=cfg)
    num = rec["numerics"]
    assert num["arch"] == f"{arch}@cpu" and num["ok"] and num["rms_error"] < num["tolerance"]
    assert rec["targets"][arch]["perf_config"] == cfg
    f = fx.Fixture(id="x", command=line, source="t", perf_config=cfg, expect=rec)
    assert fx.replay(f, CpuEngine()).status == fx.PASSED
    # what the cpu target takes keeps the cpu numerics (no arch key)
    assert "arch" not in fx.compute(line, CpuEngine(), perf_config="64,64,32,2,2,32,32,0,0,0,1,0,2")["numerics"]


def test_summaries_of_hash_only_drifts():
    def res(*drifts):
        return fx.Result(fixture=ALL[0], status=fx.DRIFTED if drifts else fx.PASSED, drifts=list(drifts))
    body = [res(fx.Drift("targets.sm_90.source_sha256", "a", "b", "hash")), res()]
    assert fx.only_hashes_moved(body) and fx.only_kernel_body_moved(body)
    emitter = body + [res(fx.Drift("targets.gfx942.defines_sha256", "a", "b", "hash"))]
    assert fx.only_hashes_moved(emitter) and not fx.only_kernel_body_moved(emitter)
    assert fx.moved_fields(emitter) == [("targets.gfx942.defines_sha256", 1), ("targets.sm_90.source_sha256", 1)]
    config = emitter + [res(fx.Drift("targets.sm_90.perf_config", "a", "b"))]
    assert not fx.only_hashes_moved(config)
    assert not fx.only_hashes_moved([res()])


# ------------------------------------------------------------------ loading
def _write(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_load_reports_file_and_line(tmp_path):
    good = fx.dumps({"id": "a", "source": "s", "command": "conv -F 2"})
    cases = {
        "not valid JSON": [good, '{"id": "b", '],
        "a record must be a JSON object": [good, "[1, 2]"],
        "missing key(s) source": [good, '{"id": "b", "command": "c"}'],
        "unknown key(s) comand": [good, '{"id": "b", "source": "s", "command": "c", "comand": "x"}'],
        "duplicate id 'a' (first at line 1)": [good, good],
        "may hold only": [good, '{"id": "b c", "source": "s", "command": "c"}'],
        "expect must be a JSON object": [good, '{"id": "b", "source": "s", "command": "c", "expect": 3}'],
        "source must be a non-empty string": [good, '{"id": "b", "source": " ", "command": "c"}'],
    }
    for message, lines in cases.items():
        path = _write(tmp_path / "f.jsonl", lines)
        with pytest.raises(fx.FixtureError) as e:
            fx.load(path)
        assert str(e.value).startswith(f"{path}:2: ") and message in str(e.value), str(e.value)


def test_load_paths(tmp_path):
    with pytest.raises(fx.FixtureError, match="no such fixture file or directory"):
        fx.load(tmp_path / "nope")
    with pytest.raises(fx.FixtureError, match=r"no \*\.jsonl fixture files"):
        fx.load(tmp_path)
    _write(tmp_path / "b.jsonl", [fx.dumps({"id": "x", "source": "s", "command": "c"})])
    _write(tmp_path / "a.jsonl", ["", fx.dumps({"id": "y", "source": "s", "command": "c"}), ""])
    got = fx.load(tmp_path)
    assert [(f.id, Path(f.path).name, f.line) for f in got] == [("y", "a.jsonl", 2), ("x", "b.jsonl", 1)]
    _write(tmp_path / "c.jsonl", [fx.dumps({"id": "x", "source": "s", "command": "c"})])
    with pytest.raises(fx.FixtureError, match=r"duplicate id 'x' \(also at .*b\.jsonl:1\)"):
        fx.load(tmp_path)


def test_select():
    fs = [fx.Fixture(id=i, source="s", command="c") for i in ("boo_bf16_15", "bench_a", "miopen575_y4")]
    assert [f.id for f in fx.select(fs, "bench")] == ["bench_a"]
    assert [f.id for f in fx.select(fs, "b*")] == ["boo_bf16_15", "bench_a"]
    assert [f.id for f in fx.select(fs, "*575*")] == ["miopen575_y4"]
    assert fx.select(fs, "575") == [fs[2]] and fx.select(fs, None) == fs


# ------------------------------------------------------------------ updating
def test_update_golden_writes_drifted_only_and_keeps_the_band(tmp_path):
    src = [fresh("rocmlibs12322_tiny_1x3_fp16"), fresh("ck105_1x1_s2_nhwc_fp16"), fresh("rej_int8")]
    path = tmp_path / "t.jsonl"
    tampered = json.loads(json.dumps(src[1].expect))
    tampered["targets"]["gfx942"] = {"applicable": False, "reasons": ["LAYOUT"], "notes": []}
    golden_rms = tampered["numerics"]["rms_error"] * 1.1          # inside the fp16 band
    tampered["numerics"]["rms_error"] = golden_rms
    recs = [src[0].with_expect(None), src[1].with_expect(tampered), src[2]]
    fx.write_file(path, recs)
    before = path.read_text().splitlines()
    results = [fx.replay(f, CpuEngine()) for f in fx.load(path)]
    assert [r.status for r in results] == [fx.DRIFTED, fx.DRIFTED, fx.PASSED]
    updated, kept = fx.update_golden(results)
    assert [r.fixture.id for r in updated] == [src[0].id, src[1].id] and kept == []
    after = fx.load(path)
    assert after[0].expect == src[0].expect
    assert after[1].expect["targets"] == src[1].expect["targets"]
    assert after[1].expect["numerics"]["rms_error"] == golden_rms   # in band: not churned
    assert path.read_text().splitlines()[2] == before[2]            # untouched record, same bytes
    assert all(r.status == fx.PASSED for r in (fx.replay(f, CpuEngine()) for f in after))


def test_update_golden_refuses_gpu_results_and_skips_failures(tmp_path):
    f = BY_ID["miopen945_2x2_fp16"]
    gpu = fx.Result(fixture=f, status=fx.DRIFTED, drifts=[fx.Drift("x", 1, 2)], actual={}, engine="cuda")
    with pytest.raises(ValueError, match="CPU numerics"):
        fx.update_golden([gpu])
    path = tmp_path / "t.jsonl"
    fx.write_file(path, [f])
    failed = fx.Result(fixture=fx.load(path)[0], status=fx.FAILED, failures=["x"], actual={"bad": 1})
    assert fx.update_golden([failed]) == ([], [failed])
    assert fx.load(path)[0].expect == f.expect


# ------------------------------------------------------------------ GPU mode (with a stand-in engine)
class StandInGpu(CpuEngine):
    """The CPU engine posing as a CUDA engine on the sm_90 preset (for replay's GPU mode)."""

    name = "cuda"

    def __init__(self):
        super().__init__(get_target("sm_90"))


def test_gpu_mode_skips_non_nhwc_and_judges_by_tolerance():
    eng = StandInGpu()
    r = fx.replay(fresh("miopen575_y4_s3"), eng)                     # NCHW
    assert r.status == fx.PASSED
    assert any("numerics skipped on cuda" in n and "NHWC" in n for n in r.notes)
    f = fresh("bench_r50_3x3_c64_56")
    exp = json.loads(json.dumps(f.expect))
    exp["numerics"]["rms_error"] = 1e-12                             # CPU golden not used on GPUs
    r = fx.replay(f.with_expect(exp), eng)
    assert r.status == fx.PASSED and any(n.startswith("cuda rms error") for n in r.notes)
    assert r.actual["numerics"]["ok"]


@pytest.mark.gpu
def test_replay_on_the_gpu():
    """Every fixture on a real GPU engine (``DGRAD_GPU_BACKEND``, default cuda): NHWC
    numerics within the tolerance; skipped where no GPU runtime exists. The documented
    command is ``dgrad-driver replay fixtures/ --backend cuda``."""
    import os

    from miopen_solver.errors import RuntimeUnavailable
    from miopen_solver.runtime import get_engine
    try:
        engine = get_engine(os.environ.get("DGRAD_GPU_BACKEND", "cuda"))
    except RuntimeUnavailable as e:
        pytest.skip(str(e))
    results = [fx.replay(f, engine) for f in ALL]
    bad = [r for r in results if r.failures or any(d.kind != "hash" for d in r.drifts)]
    assert not bad, _explain(bad)
    ran = [r for r in results if "ok" in (r.actual or {}).get("numerics", {})]
    assert len(ran) >= 50, "fewer NHWC fixtures ran on the GPU than expected"


def test_a_pinned_perf_config_runs_instead_of_the_default():
    """``perf_config`` pins a config no default chooses (split-K through the workspace, a
    group pack no default takes, the sub-pixel GEMM's TMA and warp-MMA forms, stream-K, the TMA
    schedule's split-K by atomics where stream-K became the default, the persistent NCHW
    pointwise schedule, the plane schedule on a grouped line and staged as whole planes, the
    ping-pong schedule): the golden holds its kernel on every target that takes it (the TMA and
    persistent forms: NVIDIA only), the numerics run it, a record keeps the key."""
    pinned = [f for f in ALL if f.perf_config is not None and not f.path.endswith("direct_mma.jsonl")]
    families = {"splitk_ws.jsonl": "_skws_", "group_pack.jsonl": "dgrad_group_pack2_", "subpixel.jsonl": "dgrad_subpixel_",
                "stream_k.jsonl": "_skst_", "tma_split.jsonl": "_sk3_", "nchw_pw.jsonl": "_pb",
                "direct_plane.jsonl": "dgrad_plane_", "pingpong.jsonl": "_tmapp"}
    tma_only = {"dgrad_subpixel_": "schedule 17 (subpixel-tma)", "_skst_": "schedule 3 (wgmma-tma)",
                "_sk3_": "schedule 3 (wgmma-tma)", "_pb": "schedule 18 (nchw-pointwise-persistent)",
                "_tmapp": "schedule 20 (wgmma-tma-pingpong)"}
    assert pinned and all(f.path.endswith(tuple(families)) for f in pinned)
    assert all(any(f.path.endswith(name) for f in pinned) for name in families)
    for f in pinned:
        family = next(v for k, v in families.items() if f.path.endswith(k))
        for arch, rec in f.expect["targets"].items():
            if family in tma_only and "perf_config_refused" in rec:     # the TMA forms: NVIDIA only
                assert arch == "gfx942" and tma_only[family] in rec["perf_config_refused"], f.id
                continue
            assert rec["perf_config"] == f.perf_config and family in rec["kernel_name"], (f.id, arch)
            # the slices, the W' pack, the flags and slots (a pack, atomics and the planes need none)
            assert family in ("dgrad_group_pack2_", "_sk3_", "dgrad_plane_", "_tmapp") or rec["workspace_bytes"] > 0
        assert f.record()["perf_config"] == f.perf_config and f.expect["numerics"]["ok"]
    line = "convfp16 -n 2 -c 33 -H 7 -W 7 -k 16 -y 3 -x 3 -p 1 -q 1 -F 2 --in_layout NHWC --out_layout NHWC --fil_layout NHWC"
    rec = fx.compute(line, numerics=False, perf_config="64,64,32,2,2,32,32,0,0,0,2,-1,2")
    assert rec["targets"]["sm_90"]["kernel_name"].endswith("_tilde1_skws_n2c33h7w7k16y3x3p1x1s1x1d1x1g1")
    # 2*7*7*33 fp32 = 12936 bytes -> 13056 per slice, 2 slices
    assert rec["targets"]["gfx942"]["workspace_bytes"] == 2 * 13056
    assert "_skws" not in fx.compute(line, numerics=False)["targets"]["sm_90"]["kernel_name"]


def test_a_pinned_config_a_target_refuses_pins_the_refusal():
    """The mma body with NVIDIA's 8-row units: sm_90's golden holds its kernel, gfx942's the
    config error (AMD's units are 16 rows; the problem stays applicable there: its default
    would run); the numerics run it."""
    pinned = [f for f in ALL if f.path.endswith("direct_mma.jsonl")]
    assert len(pinned) >= 3
    for f in pinned:
        sm90, gfx = f.expect["targets"]["sm_90"], f.expect["targets"]["gfx942"]
        assert sm90["perf_config"] == f.perf_config and sm90["kernel_name"].startswith("dgrad_direct_mma_sm_90_")
        assert gfx["applicable"] and "kernel_name" not in gfx
        assert gfx["perf_config_refused"] == ("warp_tile_n must be 16 for the direct schedule's mma body on gfx942, "
                                              "got 8")          # its units are 16 rows (v_mfma_f32_16x16x16)
        assert f.expect["numerics"]["ok"]
    line = "convfp16 -n 2 -c 16 -H 7 -W 7 -k 16 -y 3 -x 3 -p 1 -q 1 -g 16 -F 2 --in_layout NHWC --out_layout NHWC --fil_layout NHWC"
    rec = fx.compute(line, numerics=False, perf_config="16,16,8,4,1,16,8,2,0,8,1,1,1,4")
    assert "perf_config_refused" in rec["targets"]["gfx942"] and "perf_config_refused" not in rec["targets"]["sm_90"]
    rec = fx.compute(line, numerics=False, perf_config="16,16,8,4,1,16,8,2,0,4,1,1,1,4")     # refused on both
    assert "vector_size_c must be 0 (auto) or 8" in rec["targets"]["sm_90"]["perf_config_refused"]
    assert "warp_tile_n must be 16" in rec["targets"]["gfx942"]["perf_config_refused"]
    rec = fx.compute(line, numerics=False, perf_config="16,16,16,2,1,16,16,2,0,8,1,1,1,4")    # AMD's unit: refused on sm_90
    assert "warp_tile_n must be 8" in rec["targets"]["sm_90"]["perf_config_refused"]
    assert rec["targets"]["gfx942"]["kernel_name"].startswith("dgrad_direct_mma_gfx942_fp16_t16x16x16_w2_k2_")


def test_a_bad_perf_config_key_is_one_error(tmp_path):
    path = tmp_path / "f.jsonl"
    path.write_text(json.dumps({"command": "conv -n 1 -F 2", "id": "a", "source": "s", "perf_config": 7}) + "\n")
    with pytest.raises(fx.FixtureError, match="perf_config must be a non-empty string"):
        fx.load_file(path)


def test_compare_and_the_band_refuse_unknown_modes_and_dtypes():
    """A typo in numerics= compared by another rule than meant, and an unknown dtype took
    fp32's band: both are refused, naming the argument and what is allowed."""
    exp = {"numerics": {"rms_error": 1e-4, "tolerance": 1e-2}}
    for mode in fx.NUMERICS_MODES:
        assert fx.compare(exp, exp, numerics=mode) == []
    with pytest.raises(ValueError, match=r"^numerics 'xyz'; allowed: band, gpu, skip$"):
        fx.compare(exp, exp, numerics="xyz")
    with pytest.raises(ValueError, match=r"^dtype 'fp64'; allowed: fp32, fp16, bf16, tf32, "):
        fx.compare(exp, exp, dtype="fp64")
    with pytest.raises(ValueError, match=r"^dtype 'xyz'"):
        fx.rms_in_band(1e-4, 1e-4, 1e-2, "xyz")
    assert fx.rms_in_band(1e-4, 1e-4, 1e-2, "int8")       # a problem dtype: fp32's band


def test_load_and_select_refuse_arguments_of_the_wrong_kind():
    for bad in (None, 5, [5]):
        with pytest.raises(fx.FixtureError, match="allowed: a path \\(str or Path\\) or a list of them$"):
            fx.load(bad)
    for bad in (5, ["x"]):
        with pytest.raises(ValueError, match="^fixture pattern .*: allowed: a string or None$"):
            fx.select([], bad)
    assert fx.select([], None) == [] and fx.select([], "") == []
