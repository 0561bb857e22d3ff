"""The cost model of the warpgroup schedules (miopen_solver.cost_model) and its fit
(bench/fit_cost_model.py): features computed by hand, the fit recovering known weights,
the shipped H200 weights reproduced from the committed H200 data, and the model's pick
always a config the solver builds."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench import fit_cost_model as fit
from conftest import refused_in_one_line
from miopen_solver import cost_model as cm
from miopen_solver import heuristics
from miopen_solver.command import parse
from miopen_solver.config import KernelSchedule, PerfConfig
from miopen_solver.spec import make_spec
from miopen_solver.target import get_target

SM90 = get_target("sm_90")
NHWC = "--in_layout NHWC --out_layout NHWC --fil_layout NHWC"
RESULTS = Path(__file__).resolve().parent.parent / "bench" / "results" / "2026-12-01_s7"
RESULTS8 = RESULTS.parent / "2026-12-02_s8"


def _p(args: str):
    return parse(f"convfp16 {args} -F 2 {NHWC}".split()).problem


def test_features_of_a_pointwise_launch_by_hand():
    # GemmM = 1*16*16 = 256, GemmN = cpg 256, GemmK = kpg 64: 2 x 2 tiles of 128x128, one k-step.
    p = _p("-n 1 -c 256 -H 16 -W 16 -k 64 -y 1 -x 1")
    f = cm.features(make_spec(p, SM90, PerfConfig.parse("128,128,64,2,1,64,128,0,0,0,1,-1,3,1")))
    assert f.schedule is KernelSchedule.WGMMA
    assert math.isclose(f.mma, 2 * 128 * 128 * 64 / (739e12 / 132) * 1e6)        # 4 blocks, 1 each
    assert math.isclose(f.loads, (128 + 128) * 64 * 2 / (2.72e12 / 132) * 1e6)
    assert math.isclose(f.stores, 128 * 128 * 2 / (2.72e12 / 132) * 1e6)
    assert f.waves == 1 and f.atomics == 0
    assert math.isclose(f.traffic, (256 * 256 + 64 * 256 + 64 * 256) * 2 / 2.72e12 * 1e6)
    # 256 threads, 8-element vectors: per k-step (128*64 + 64*128) / 8 = 2048 loads, the C tile
    # 128*128 / 8 = 2048 stores; one k-step; thousands per thread.
    assert math.isclose(f.issue, (2048 + 2048) / 256 / 1e3)


def test_narrow_vectors_multiply_the_issue_and_tma_issues_no_tile_loads():
    cfg = PerfConfig.parse("128,128,64,2,1,64,128,0,0,0,1,-1,3,1")
    wide = cm.features(make_spec(_p("-n 1 -c 256 -H 16 -W 16 -k 256 -y 1 -x 1"), SM90, cfg))
    odd = cm.features(make_spec(_p("-n 1 -c 256 -H 16 -W 16 -k 255 -y 1 -x 1"), SM90, cfg))   # A vector 1
    assert odd.issue > 3 * wide.issue
    p = _p("-n 8 -c 256 -H 16 -W 16 -k 256 -y 3 -x 3 -p 1 -q 1")
    tma = cm.features(make_spec(p, SM90, PerfConfig.parse("128,128,64,1,1,128,128,0,0,0,1,-1,4,3")))
    assert math.isclose(tma.issue * 1e3 * 128, -(-8 * 2 * 2 // 132) * 128 * 128 / 8)      # the dX tile only


def test_one_block_past_a_full_device_doubles_the_busiest_multiprocessor():
    cfg = PerfConfig.parse("128,64,64,2,1,64,64,0,0,0,1,-1,3,1")
    full = _p("-n 1 -c 64 -H 132 -W 128 -k 64 -y 1 -x 1")     # 132*128/128 = 132 tiles
    over = _p("-n 1 -c 64 -H 133 -W 128 -k 64 -y 1 -x 1")     # 133 tiles
    a, b = (cm.features(make_spec(p, SM90, cfg)) for p in (full, over))
    assert math.isclose(b.mma, 2 * a.mma) and math.isclose(b.loads, 2 * a.loads)


def test_split_k_divides_the_k_loop_and_pays_the_atomics():
    p = _p("-n 1 -c 256 -H 8 -W 8 -k 1024 -y 3 -x 3 -p 1 -q 1")
    one, two = (cm.features(make_spec(p, SM90, PerfConfig.parse(f"128,128,64,2,1,64,128,0,0,0,{s},-1,4,1")))
                for s in (1, 2))
    assert one.atomics == 0 and two.atomics > 0
    assert math.isclose(two.mma, one.mma / 2, rel_tol=0.01)     # the same busiest count, half the k


def test_the_tma_schedule_counts_its_pixel_boxes():
    # 3x3 stride 1 on 10x10 images: a TMA tile of 128 rows holds one 100-pixel image (box), so
    # 8 images are 8 tiles per column tile, where flat rows would pack them in 7.
    p = _p("-n 8 -c 128 -H 10 -W 10 -k 128 -y 3 -x 3 -p 1 -q 1")
    tma = make_spec(p, SM90, PerfConfig.parse("128,128,64,1,1,128,128,0,0,0,1,-1,4,3"))
    flat = make_spec(p, SM90, PerfConfig.parse("128,128,64,1,1,128,128,0,0,0,1,-1,4,1"))
    assert cm.features(tma).waves == cm.features(flat).waves == 1
    assert tma.tiles_per_group == 8 and flat.tiles_per_group == 7


def test_unmodelled_schedules_are_refused():
    p = _p("-n 1 -c 64 -H 8 -W 8 -k 64 -y 3 -x 3 -p 1 -q 1")
    spec = make_spec(p, get_target("sm_80"), PerfConfig.parse("128,64,32,2,2,64,32,0,0,0,1,-1,4"))
    with pytest.raises(ValueError, match="not modelled; allowed: WGMMA, WGMMA_PERSISTENT, WGMMA_TMA"):
        cm.features(spec)


def test_weights_are_non_negative_so_more_work_never_looks_cheaper():
    c = cm.H200
    assert all(v >= 0 for v in (*c.intercept.values(), *c.mma.values(), *c.shared))
    assert set(c.intercept) == set(c.mma) == set(cm.MODELLED) and len(c.shared) == len(cm.SHARED)


def _rows(n_layers: int = 6):
    """Rows of real features (specs of real problems) for a synthetic fit."""
    lines = ["-n 8 -c 256 -H 28 -W 28 -k 256 -y 3 -x 3 -p 1 -q 1", "-n 32 -c 512 -H 7 -W 7 -k 512 -y 1 -x 1",
             "-n 16 -c 128 -H 56 -W 56 -k 128 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2", "-n 4 -c 1024 -H 14 -W 14 -k 256 -y 1 -x 1",
             "-n 2 -c 320 -H 64 -W 64 -k 320 -y 3 -x 3 -p 1 -q 1", "-n 64 -c 256 -H 14 -W 14 -k 64 -y 1 -x 1"]
    rows = []
    for i, line in enumerate(lines[:n_layers]):
        p = _p(line)
        for c in cm.candidates(p):
            for cfg in (c, c.replace(stages=7 - c.stages)):
                try:
                    f = cm.features(make_spec(p, SM90, cfg))
                except ValueError:
                    continue
                rows.append({"layer": f"l{i}", "config": cfg, "us": 0.0, "method": "graph", "default": False, "f": f})
                break
    return rows


def test_the_fit_recovers_known_weights():
    truth = cm.Coefficients(
        intercept={KernelSchedule.WGMMA: 3.0, KernelSchedule.WGMMA_PERSISTENT: 5.0, KernelSchedule.WGMMA_TMA: 7.0},
        mma={KernelSchedule.WGMMA: 1.5, KernelSchedule.WGMMA_PERSISTENT: 1.2, KernelSchedule.WGMMA_TMA: 1.1},
        shared=(0.2, 0.4, 1.0, 0.05, 0.3, 0.6, 4.0, 0.3))
    rows = _rows()
    for r in rows:
        r["us"] = truth.time_us(r["f"])
    got = fit.fit(rows)
    for r in rows:
        assert math.isclose(got.time_us(r["f"]), r["us"], rel_tol=1e-6)


SHIPPED_REPORTS = [RESULTS / "zoo_1of2.json", RESULTS / "zoo_2of2.json", RESULTS8 / "zoo_1of2.json",
                   RESULTS8 / "zoo_2of2.json", RESULTS8 / "zoo_model.json", RESULTS8 / "zoo_ebd190c.json"]


def test_the_shipped_h200_weights_are_the_fit_of_the_committed_h200_data(tmp_path):
    """cost_model.H200 is what bench/fit_cost_model.py makes of the H200 timings under
    bench/results/2026-12-01_s7 and 2026-12-02_s8 (a tune campaign slice, the zoo's default
    rows of both sessions, the model's picks of the second)."""
    rows = fit.load([RESULTS / "zoo_tune.jsonl.gz"], "bench/zoo.txt", SHIPPED_REPORTS, SM90)
    assert len(rows) > 550
    got = fit.fit(rows)
    for s in cm.MODELLED:
        assert math.isclose(got.intercept[s], cm.H200.intercept[s], rel_tol=1e-3, abs_tol=1e-3)
        assert math.isclose(got.mma[s], cm.H200.mma[s], rel_tol=1e-3, abs_tol=1e-3)
    for a, b in zip(got.shared, cm.H200.shared):
        assert math.isclose(a, b, rel_tol=1e-3, abs_tol=1e-3)


@settings(max_examples=25, deadline=None)
@given(st.sampled_from((1, 4, 32)), st.sampled_from((64, 96, 256, 640)), st.sampled_from((64, 128, 512)),
       st.sampled_from((7, 14, 28, 33)), st.sampled_from(((1, 0, 1), (3, 1, 1), (3, 1, 2), (1, 0, 2))),
       st.sampled_from(("fp16", "bf16")))
def test_the_model_pick_builds_and_is_the_cheapest_candidate(n, c, k, hw, fps, dtype):
    f, pad, s = fps
    p = parse(f"{'convfp16' if dtype == 'fp16' else 'convbfp16'} -n {n} -c {c} -H {hw} -W {hw} -k {k} "
              f"-y {f} -x {f} -p {pad} -q {pad} -u {s} -v {s} -F 2 {NHWC}".split()).problem
    assert cm.modelled(p, SM90)
    ranking = cm.ranked(p, SM90)
    pick = cm.model_config(p, SM90)
    assert pick == ranking[0][1] and make_spec(p, SM90, pick).schedule in cm.MODELLED
    assert all(a[0] <= b[0] for a, b in zip(ranking, ranking[1:]))
    assert math.isclose(ranking[0][0], cm.estimate_us(p, SM90, pick))


def test_problems_outside_the_warpgroup_tiles_are_not_modelled():
    assert not cm.modelled(_p("-n 1 -c 64 -H 8 -W 8 -k 64 -y 3 -x 3 -p 1 -q 1"), get_target("sm_80"))
    assert not cm.modelled(_p("-n 1 -c 32 -H 8 -W 8 -k 64 -y 3 -x 3 -p 1 -q 1"), SM90)      # cpg 32
    assert not cm.modelled(_p("-n 1 -c 64 -H 8 -W 8 -k 32 -y 3 -x 3 -p 1 -q 1"), SM90)      # kpg 32
    assert not cm.modelled(parse(f"conv -n 1 -c 64 -H 8 -W 8 -k 64 -y 3 -x 3 -F 2 {NHWC}".split()).problem, SM90)


@pytest.mark.parametrize("argv,message", [
    (["--log", "/nonexistent/log.jsonl"], "No such file or directory"),
    (["--suite", "/nonexistent/zoo.txt", "--report", "{bad}"], "--suite '/nonexistent/zoo.txt': read only with --log"),
    (["--report", "{bad}"], "not JSON ("),
    (["--log", "{bad}"], "no complete record (5 bytes without a newline)"),
])
def test_the_fit_script_rejects_bad_input_in_one_line(tmp_path, capsys, argv, message):
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2")
    argv = [a.replace("{bad}", str(bad)) for a in argv]
    assert fit.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_the_fit_script_prints_the_literal_and_the_judgement(tmp_path, capsys):
    out = tmp_path / "fit.md"
    rc = fit.main(["--log", str(RESULTS / "zoo_tune.jsonl.gz"), "--report",
                   ",".join(map(str, SHIPPED_REPORTS)), "--out", str(out)])
    text = capsys.readouterr().out
    assert rc == 0 and "H200 = Coefficients(" in text and "model's pick among the timed configs within 10% of the best timed" in text
    assert "the refit's default:" in text and "untimed" in text
    assert out.read_text() == text


def _refused(capsys, argv) -> str:
    """fit.main(argv) refused in one line (exit 2, one stderr line, no traceback)."""
    return refused_in_one_line(capsys, fit.main, argv, "fit_cost_model.py")


def _ok_timing() -> dict:
    """The first ok timing record of the committed campaign log."""
    with gzip.open(RESULTS / "zoo_tune.jsonl.gz", "rt") as f:
        return next(r for r in map(json.loads, f) if r.get("type") == "timing" and r.get("status") == "ok")


LOG_ALLOWED = "allowed: a dgrad-driver tune --results log (JSON Lines"


def test_bad_logs_are_refused_naming_the_flag_path_and_line(tmp_path, capsys):
    """A truncated gzip (was EOFError), a non-gzip file named .gz, binary data
    (UnicodeDecodeError), a line that is a JSON array, ok timing records whose median_ms is
    null/0/negative/not a number or that lack perf_config/median_ms (TypeError, KeyError):
    one line naming --log, the path, the line and what is allowed. A failed record is
    skipped as before, whatever its times."""
    rec = _ok_timing()
    session = json.dumps({"type": "session"})
    whole = (RESULTS / "zoo_tune.jsonl.gz").read_bytes()
    cases = {"trunc.jsonl.gz": (whole[:len(whole) // 2], "not a whole gzip file (Compressed file ended"),
             "plain.jsonl.gz": (b"{}\n", "named .gz but not gzip data"),
             "binary.jsonl": (b"\x00\xff\xfe\x80garbage\n", "binary data, not JSON Lines text (byte 0x00 at offset 0)"),
             "empty.jsonl": (b"", "no complete record (an empty file)"),
             "nosession.jsonl": (json.dumps(rec).encode() + b"\n", "line 1, its first record, is not a session record"),
             "array.jsonl": (f"{session}\n[1, 2]\n".encode(), "line 2 is a JSON list, not an object")}
    for i, value in enumerate([None, 0, -1.5, "0.1", True, float("inf")]):
        cases[f"ms{i}.jsonl"] = ((session + "\n" + json.dumps({**rec, "median_ms": value}) + "\n").encode(),
                                 f"line 2: an ok timing record without a median_ms time, a finite number > 0 "
                                 f"(median_ms: {json.dumps(value)})")
    for key in ("median_ms", "perf_config", "problem_key"):
        cases[f"no_{key}.jsonl"] = ((session + "\n\n" + json.dumps({k: v for k, v in rec.items() if k != key}) + "\n").encode(),
                                    f"line 3: an ok timing record without a {key} ")
    for name, (data, why) in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        err = _refused(capsys, ["--log", str(path)])
        assert f"--log {path}: {why}" in err and LOG_ALLOWED in err, err
    failed = tmp_path / "failed.jsonl"
    failed.write_text(session + "\n" + json.dumps({**rec, "status": "failed", "median_ms": None}) + "\n")
    err = _refused(capsys, ["--log", str(failed)])
    assert f"--log {failed}: no ok timing record (nothing timed); allowed: " in err   # its failed record skipped
    torn = tmp_path / "torn.jsonl"                 # a campaign killed mid-write: its torn last line is skipped
    torn.write_text(session + "\n" + json.dumps(rec) + "\n" + json.dumps(rec)[:40])
    assert len(fit.load([torn], "bench/zoo.txt", [], SM90)) == 1


def test_a_missing_log_names_the_flag(capsys):
    err = _refused(capsys, ["--log", "/x"])
    assert err.startswith("fit_cost_model.py: --log /x: cannot read (No such file or directory); allowed: ")


def test_bad_report_rows_are_refused_naming_the_flag_path_and_row(tmp_path, capsys):
    """--report rows that are not a list, rows that are not objects, a line that is not a
    string or not a MIOpenDriver line, ours_ms not a positive finite number: one line naming
    --report, the path, the row and what is allowed (were KeyError/AttributeError/TypeError
    tracebacks or a parser message without the file)."""
    good = json.loads((RESULTS / "zoo_1of2.json").read_text())
    row = good["rows"][0]
    cases = {"notlist": ({"rows": {"a": 1}}, "not a JSON object with a rows list"),
             "rowlist": ({"rows": [row, [row]]}, "row 2 is a JSON list, not an object"),
             "linenum": ({"rows": [{**row, "line": 7}]}, "row 1: line 7 is not a string"),
             "linebad": ({"rows": [row, {**row, "line": "convfp16 -n x"}]}, "row 2: line 'convfp16 -n x' does not parse")}
    for i, value in enumerate([0, -1, "0.1", True]):
        cases[f"ms{i}"] = ({"rows": [{**row, "ours_ms": value}]},
                           f"row 1: ours_ms {json.dumps(value)} is not a positive finite number")
    for name, (data, why) in cases.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(data))
        err = _refused(capsys, ["--report", str(path)])
        assert f"--report {path}: {why}" in err and "allowed: a compare.py --json file" in err, err


@pytest.mark.parametrize("value", ["-0.1", "nan", "inf", "abc", "", "10", "1e9"])
def test_within_is_the_range_default_vs_tuned_takes(capsys, value):
    """--within is one definition in both scripts that judge a default against the best
    timed (fit_cost_model took any finite number >= 0, default_vs_tuned 0 <= v < 10)."""
    from bench import default_vs_tuned as dvt
    err = _refused(capsys, ["--within", value])
    assert "--within" in err and "allowed: a number, 0 <= value < 10" in err
    err = refused_in_one_line(capsys, dvt.main, ["l.jsonl", "--within", value], "default_vs_tuned")
    assert "--within" in err and "allowed: a number, 0 <= value < 10" in err
    assert fit.within_arg is dvt.within_arg and fit.WITHIN_DEFAULT == dvt.WITHIN_DEFAULT == 0.10


S13_LOG = RESULTS.parent / "2026-12-02_s13" / "call4" / "zoo_tune.jsonl.gz"


def test_each_input_that_gives_no_row_says_why(tmp_path, capsys):
    """"no modelled rows in the inputs" stood for every cause; each now has its own line
    naming the flag, the value and what is allowed: no input at all, an empty name in a comma
    list, an --arch the cost model does not cover (the archs it does are named), an empty
    log, a log none of whose records is of a --suite line (another suite), and inputs whose
    timed rows are none of them modelled."""
    assert _refused(capsys, []) == "fit_cost_model.py: no inputs; allowed: at least one of --log, --report, --configs\n"
    for flag in ("--report", "--configs"):
        for value in (",", "", f"{RESULTS / 'zoo_1of2.json'},"):
            err = _refused(capsys, [flag, value])
            assert err.startswith(f"fit_cost_model.py: {flag} {value!r}: an empty name in the comma list; allowed: "
                                  "a comma list of paths, each a ")
    covered = ", ".join(n for n in ("sm_80", "sm_90", "gfx90a", "gfx942", "gfx950", "cpu") if get_target(n).wgmma)
    for arch in ("gfx942", "sm_80", "cpu"):
        err = _refused(capsys, ["--arch", arch, "--report", str(RESULTS / "zoo_1of2.json")])
        assert err == (f"fit_cost_model.py: --arch '{arch}': no warpgroup MMA, so no schedule the cost model covers; "
                       f"allowed: {covered}\n")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert f"--log {empty}: no complete record (an empty file)" in _refused(capsys, ["--log", str(empty)])
    err = _refused(capsys, ["--log", str(S13_LOG), "--suite", "bench/suite.txt"])
    assert f"--log {S13_LOG}: none of its " in err and "ok timing records is of a line of --suite bench/suite.txt" in err
    assert "allowed: a --suite that is the suite file the campaign tuned" in err
    fp32 = [{**r, "line": r["line"].replace("convfp16", "conv").replace("convbfp16", "conv")}
            for r in json.loads((RESULTS / "zoo_1of2.json").read_text())["rows"]
            if r.get("ours_ms") is not None and r.get("config") is not None][:5]
    report = tmp_path / "fp32.json"
    report.write_text(json.dumps({"meta": {}, "rows": fp32}))
    err = _refused(capsys, ["--report", str(report)])
    assert err.startswith("fit_cost_model.py: no modelled rows: none of the 5 timed rows of the inputs is an NHWC "
                          "fp16/bf16 problem") and "on sm_90" in err and "allowed: " in err


def test_arch_has_help(capsys):
    with pytest.raises(SystemExit):
        fit.main(["--help"])
    text = capsys.readouterr().out
    assert "--arch ARCH" in text and "the cost model covers sm_90" in " ".join(text.split())


@pytest.mark.parametrize("out, why", [("", "--out '': empty (no file named)"),
                                      ("/nonexistent/dir/fit.md", "--out /nonexistent/dir/fit.md: directory"),
                                      ("{tmp}", "is a directory")])
def test_out_is_checked_before_the_inputs_are_read(tmp_path, capsys, out, why):
    """--out is refused before anything is loaded or fitted (a missing log comes after)."""
    err = _refused(capsys, ["--log", "/nonexistent.jsonl", "--out", out.replace("{tmp}", str(tmp_path))])
    assert why in err and "--log" not in err


def test_the_default_takes_the_pick_only_past_the_margin(monkeypatch):
    p = _p("-n 64 -c 512 -H 7 -W 7 -k 2048 -y 1 -x 1")
    pick = cm.model_config(p, SM90)
    rules = PerfConfig.parse("128,128,64,2,1,64,128,0,0,0,1,-1,3,1")
    gain = cm.estimate_us(p, SM90, rules) / cm.estimate_us(p, SM90, pick) - 1
    assert pick != rules and gain > 0
    monkeypatch.setattr(cm, "MIN_GAIN", gain * 0.99)
    assert cm.default_config(p, SM90, rules) == pick
    monkeypatch.setattr(cm, "MIN_GAIN", gain * 1.01)
    assert cm.default_config(p, SM90, rules) == rules
    assert cm.default_config(p, SM90, pick) == pick
    bad = PerfConfig.parse("128,128,32,2,2,64,64,0,0,0,1,-1,3")           # not a modelled schedule
    assert cm.default_config(p, SM90, bad) == bad


def test_the_solver_default_is_the_model_default_on_modelled_problems():
    from miopen_solver.heuristics import default_performance_config, pingpong_form
    from miopen_solver.transpose import native_problem, writes_nchw_dx
    p = _p("-n 64 -c 512 -H 7 -W 7 -k 2048 -y 1 -x 1")
    rules = default_performance_config(p, SM90, allow_model=False)
    # the model's pick, in its ping-pong form where it is a one-warpgroup TMA tile
    assert default_performance_config(p, SM90) == pingpong_form(p, SM90, cm.default_config(p, SM90, rules))
    # MIOpen's default layout: the model picks for the kernel between the transforms (dY and W
    # NHWC, dX NCHW) among the kernels that store dX NCHW themselves
    nchw = parse("convfp16 -n 64 -c 512 -H 7 -W 7 -k 2048 -y 3 -x 3 -p 1 -q 1 -F 2".split()).problem
    rules = default_performance_config(nchw, SM90, allow_model=False)
    native = native_problem(nchw)
    pick = cm.default_config(native, SM90, rules, nchw_dx=True)
    assert pick != rules and writes_nchw_dx(make_spec(native, SM90, pick))
    assert default_performance_config(nchw, SM90) == pingpong_form(nchw, SM90, pick)
    sm80 = get_target("sm_80")
    assert default_performance_config(p, sm80) == default_performance_config(p, sm80, allow_model=False)


def test_four_warpgroup_blocks_pay_the_capped_mma_again():
    p = _p("-n 8 -c 256 -H 28 -W 28 -k 256 -y 1 -x 1")
    four = cm.features(make_spec(p, SM90, PerfConfig.parse("256,128,64,4,1,64,128,0,0,0,1,-1,3,1")))
    two = cm.features(make_spec(p, SM90, PerfConfig.parse("256,128,64,2,1,128,128,0,0,0,1,-1,3,1")))
    assert four.capped == four.mma > 0 and two.capped == 0


RESULTS9 = Path(__file__).resolve().parent.parent / "bench" / "results" / "2026-12-02_s9"


def test_time_configs_files_are_graph_rows_and_bad_ones_are_refused(tmp_path, capsys):
    """--configs takes bench/time_configs.py --json files (a list of rows, each its own config
    on one line, CUDA-graph times): their modelled rows load as graph rows, the default's
    flagged; a file that is not such a list, a row without line/label strings, a config or
    time of the wrong type, or a line that does not parse is refused in one line naming
    --configs, the path and the row."""
    rows = fit.load([], "bench/zoo.txt", [], SM90, [RESULTS9 / "tmask.json"])
    assert len(rows) > 100 and {r["method"] for r in rows} == {"graph"}
    assert any(r["default"] for r in rows) and any(r["config"].split_k == 3 for r in rows)
    good = json.loads((RESULTS9 / "tmask.json").read_text())[0]
    cases = {"obj.json": ({"rows": []}, "a JSON dict, not a list of rows"),
             "notrow.json": ([1], "row 1 is not an object with line and label strings"),
             "noline.json": ([{**good, "line": None}], "row 1 is not an object with line and label strings"),
             "cfg.json": ([{**good, "config": 5}], "row 1: config 5 / ours_ms"),
             "ms.json": ([good, {**good, "ours_ms": -1}], "row 2: config"),
             "line.json": ([{**good, "line": "convfp16 -n x"}], "row 1: line 'convfp16 -n x' does not parse")}
    for name, (data, why) in cases.items():
        path = tmp_path / name
        path.write_text(json.dumps(data))
        err = _refused(capsys, ["--configs", str(path)])
        assert f"--configs {path}: {why}" in err and "allowed: a time_configs.py --json file" in err, err
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert "not JSON" in _refused(capsys, ["--configs", str(bad)])


def test_a_graph_timed_campaign_log_is_judged_as_a_campaign(tmp_path):
    """A ``-J 1`` campaign's records say ``method: graph``; honouring it made its rows
    indistinguishable from report rows: leave-one-layer-out dropped every layer (it kept
    only event-timed rows) and judge_pairs paired each layer's 40 configs as if two
    compare.py reports had timed them. Rows are sorted by where they came from, not by how
    they were timed: the same log judged as events or as graphs has the same layers, and a
    campaign log alone makes no report pairs."""
    with gzip.open(RESULTS / "zoo_tune.jsonl.gz", "rt") as f:
        recs = [json.loads(x) for x in f if x.strip()]
    graph = tmp_path / "graph.jsonl"
    graph.write_text("".join(json.dumps({**r, "method": "graph"} if r.get("type") == "timing" else r) + "\n"
                             for r in recs))
    ev = fit.load([RESULTS / "zoo_tune.jsonl.gz"], "bench/zoo.txt", [], SM90)
    gr = fit.load([graph], "bench/zoo.txt", [], SM90)
    assert len(ev) == len(gr) and {r["method"] for r in gr} == {"graph"}
    assert {fit.source_of(r) for r in gr} == {"campaign"}
    layers = [t["layer"] for t in fit.judge(ev)]
    assert layers and [t["layer"] for t in fit.judge(gr)] == layers
    assert fit.judge_pairs(gr)["pairs"] == 0


def test_the_judgement_takes_the_refit_default_the_solver_would_make():
    """Each judged layer's ``refit`` is the default the solver would make with the weights
    fitted without the layer: the rules' config unless the model predicts it at least
    MIN_GAIN slower than the model's cheapest candidate (computed here from ranked() and
    estimate_us(), not through default_config), or the short-K tile where that rule applies,
    with the campaign's time of it or None."""
    rows = fit.load([RESULTS / "zoo_tune.jsonl.gz"], "bench/zoo.txt", [], SM90)
    table = fit.judge(rows, target=SM90)
    assert table
    changed = 0
    for t in table[:6]:
        rs = [r for r in rows if r["layer"] == t["layer"]]
        coef = fit.fit([r for r in rows if fit.layer_of(r["layer"]) != fit.layer_of(t["layer"])])
        p = rs[0]["problem"]
        rules = heuristics.heuristic_config(p, SM90, allow_model=False)
        pick = cm.ranked(p, SM90, coef)[0][1]
        want = pick if cm.estimate_us(p, SM90, rules, coef) >= (1 + cm.MIN_GAIN) * cm.estimate_us(p, SM90, pick, coef) \
            else rules
        changed += want != rules
        short = heuristics.short_k_config(p, SM90)
        if short is not None:       # the short-K rule stands before the model, whatever its weights
            want = short
        assert t["refit"] == str(want)
        assert t["refit_us"] == next((r["us"] for r in rs if r["config"] == want), None)
    assert changed         # the margin rule is exercised: some layer takes the pick


def test_nchw_defaults_never_take_a_kernel_that_needs_a_dx_transform():
    """Every zoo line in MIOpen's default layout (all NCHW), as written and with H and W made
    odd (so the NCHW pointwise schedule, whose pixel vectors need even planes, does not take
    the 1x1 lines first, and 16-bit split-K cannot store an odd plane NCHW), whose kernel
    problem the model times and whose kernel can store dX NCHW, gets a default whose kernel
    stores it (no dX transform the model does not time): filtered by schedule only, the
    model gave 9 odd-size lines the persistent schedule and 4 a split-K tile, each then with
    a dX transform (a review found the second)."""
    import re
    from miopen_solver.heuristics import default_performance_config
    from miopen_solver.solver import DgradSolver
    from miopen_solver.transpose import native_problem, nchw_dx_rule, writes_nchw_dx
    layout = re.compile(r"\s--(in|out|fil)_layout\s+\S+")
    zoo = Path(__file__).resolve().parents[1] / "bench" / "zoo.txt"
    seen = 0
    for line in zoo.read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        written = parse(layout.sub("", line.partition("#")[0]).split()).problem
        for problem in (written, written.replace(Hi=written.Hi | 1, Wi=written.Wi | 1)):
            native = native_problem(problem)
            if native.all_nhwc or not cm.modelled(native, SM90) or not nchw_dx_rule(native, KernelSchedule.WGMMA, 1):
                continue
            cfg = default_performance_config(problem, SM90)
            if cfg.schedule in cm.MODELLED or cfg.schedule is KernelSchedule.WGMMA_TMA_PINGPONG:
                seen += 1
                spec = DgradSolver().find_solution(problem, SM90, perf_config=cfg).spec
                assert writes_nchw_dx(spec), (problem.short_tag(), cfg.serialize())
    assert seen >= 100
