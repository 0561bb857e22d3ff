"""bench/compare.py without a GPU: planning a suite (``--dtypes line`` keeps each line's base,
a dtype list re-bases as before), class tags, the per-class report on made-up times (geomeans
checked against statistics.geometric_mean), n/a rows, the plot, and main()'s loop with fake
timers standing in for torch and the engine (a refused line, a failing kernel, a cuDNN
failure, a lost CUDA context, --json and --report)."""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import types
from pathlib import Path

import pytest

from conftest import ROOT, refused_in_one_line
from bench import compare
from bench.compare import (AS_WRITTEN, CLASSES, UNTAGGED, plan_rows, read_suite, render_report,
                           select, split_label, summarize)
from miopen_solver.command import parse
from miopen_solver.solver import DgradSolver
from miopen_solver.target import get_target

SUITE = Path(ROOT) / "bench" / "suite.txt"
ZOO = Path(ROOT) / "bench" / "zoo.txt"
LINE = ("-n 2 -c 64 -H 8 -W 8 -k 32 -y 3 -x 3 -p 1 -q 1 -u 1 -v 1 -l 1 -j 1 -g 1 -F 2 -t 1 -V 1 "
        "--in_layout NHWC --out_layout NHWC --fil_layout NHWC")


def test_split_label_and_network():
    assert split_label("mobilenet_v2/features.3.dw3x3_c144_56 class=depthwise") == \
        ("mobilenet_v2/features.3.dw3x3_c144_56", "depthwise")
    assert split_label("r50_3x3_c64_56") == ("r50_3x3_c64_56", UNTAGGED)
    assert compare.network_of("unet/outc") == "unet" and compare.network_of("r50_3x3") == ""


def test_line_dtypes_keep_each_base():
    plan = plan_rows(read_suite(ZOO), AS_WRITTEN)
    assert len(plan) == len(read_suite(ZOO))
    for item, (_, cmd) in zip(plan, read_suite(ZOO)):
        assert item["cmd"] == " ".join(cmd.split()) and item["section"] == AS_WRITTEN
        assert parse(item["cmd"]).problem.dtype == item["dtype"]
    assert {i["dtype"] for i in plan} == {"fp16", "bf16", "fp32"}
    assert {i["cls"] for i in plan} == set(CLASSES)


def test_dtype_list_rebases_every_line_as_before():
    rows = read_suite(SUITE)
    plan = plan_rows(rows, "bf16,fp32")
    assert [(i["section"], i["label"]) for i in plan] == \
        [("bf16", label) for label, _ in rows] + [("fp32", label) for label, _ in rows]
    for item in plan:
        cmd = dict(rows)[item["label"]]
        assert item["cmd"].split() == [compare.BASES[item["dtype"]]] + cmd.split()[1:]
        assert item["cls"] == UNTAGGED
    with pytest.raises(ValueError, match="fp8"):
        plan_rows(rows, "fp16,fp8")
    with pytest.raises(ValueError, match="base"):
        plan_rows([("x", "convint8 " + LINE)], AS_WRITTEN)


def test_select_by_label_class_and_shard():
    plan = plan_rows(read_suite(ZOO), AS_WRITTEN)
    dw = select(plan, classes="depthwise,patch")
    assert dw and {i["cls"] for i in dw} == {"depthwise", "patch"}
    assert all("unet/" in i["label"] for i in select(plan, only="unet/"))
    a, b = select(plan, shard="1/2"), select(plan, shard="2/2")
    assert sorted(map(id, a + b)) == sorted(map(id, plan)) and not set(map(id, a)) & set(map(id, b))
    with pytest.raises(ValueError):
        select(plan, shard="3/2")


def fake_results():
    """Made-up rows: per class a few ratios (cuDNN / ours), one n/a row in 'depthwise'."""
    ratios = {"dense_1x1": [1.2, 0.8, 1.0], "depthwise": [0.1, 0.3, 0.45, 2.0],
              "patch": [0.6], "odd_channels": [0.49, 0.5, 3.0]}
    rows = []
    for cls, rs in ratios.items():
        for i, r in enumerate(rs):
            ours = 0.010 * (i + 1)
            rows.append({"label": f"net{i % 2}/{cls}_{i}", "cls": cls, "network": f"net{i % 2}",
                         "dtype": ("fp16", "bf16")[i % 2], "section": AS_WRITTEN, "line": "x",
                         "ours_ms": ours, "cudnn_ms": ours * r, "ratio": r,
                         "floor_ms": ours / 4, "eff": 0.25, "tflops": 100.0, "regs": 128,
                         "config": "a,b", "cublas_ms": None})
    rows.append({"label": "net0/depthwise_na", "cls": "depthwise", "network": "net0", "dtype": "fp32",
                 "section": AS_WRITTEN, "line": "x", "ours_error": "refused: not applicable: LAYOUT: x",
                 "cudnn_ms": 0.02, "floor_ms": 0.01})
    return rows, ratios


def test_per_class_geomeans_and_counts():
    rows, ratios = fake_results()
    summary = {s["group"]: s for s in summarize(rows)}
    assert [s["group"] for s in summarize(rows)] == \
        [c for c in CLASSES if c in ratios] + ["total"]
    for cls, rs in ratios.items():
        s = summary[cls]
        assert s["geomean"] == pytest.approx(statistics.geometric_mean(rs), rel=1e-12)
        assert s["ge1"] == sum(r >= 1.0 for r in rs) and s["lt05"] == sum(r < 0.5 for r in rs)
        assert s["timed"] == len(rs) and s["min"] == pytest.approx(min(rs))
    assert summary["depthwise"]["na"] == 1 and summary["depthwise"]["lines"] == 5
    every = [r for rs in ratios.values() for r in rs]
    t = summary["total"]
    assert t["geomean"] == pytest.approx(statistics.geometric_mean(every), rel=1e-12)
    assert (t["lines"], t["timed"], t["na"]) == (len(every) + 1, len(every), 1)
    assert (t["ge1"], t["lt05"]) == (4, 4)  # 1.2, 1.0, 2.0, 3.0 and 0.1, 0.3, 0.45, 0.49
    by_net = {s["group"]: s for s in summarize(rows, key="network")}
    net1 = [rs[i] for rs in ratios.values() for i in range(len(rs)) if i % 2]
    assert by_net["net1"]["geomean"] == pytest.approx(statistics.geometric_mean(net1))


def test_report_marks_na_rows_and_summarises():
    rows, ratios = fake_results()
    text = render_report(rows, "## header\n", {"fp16": (900e12, 4e12), "bf16": (900e12, 4e12),
                                               "fp32": (50e12, 4e12)})
    na = next(line for line in text.splitlines() if line.startswith("| net0/depthwise_na "))
    assert "| n/a |" in na and "refused: not applicable: LAYOUT" in na
    gm = statistics.geometric_mean(ratios["depthwise"])
    assert f"| depthwise | 5 | 4 | 1 | {gm:.2f} | 1 | 3 |" in text
    assert "### Per class" in text and "### Per network" in text and "### as written" in text
    assert "fp16: geometric-mean ratio cuDNN/ours = **" in text
    assert "fp32: geometric" not in text  # no timed fp32 row


def test_untagged_suite_report_has_no_class_tables():
    rows, _ = fake_results()
    for r in rows:
        r["cls"], r["section"] = UNTAGGED, r["dtype"]
    text = render_report(rows, "", {"fp16": (1e15, 4e12), "bf16": (1e15, 4e12), "fp32": (5e13, 4e12)})
    assert "### Per class" not in text and "### fp16" in text and "| class |" not in text


def test_plot_by_class_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    rows, _ = fake_results()
    compare.plot_by_class(rows, tmp_path / "zoo.png")
    assert (tmp_path / "zoo.png").read_bytes()[:4] == b"\x89PNG"


def test_time_ours_uses_the_default_config_and_refuses_what_the_solver_refuses():
    target = get_target("sm_90")
    seen = {}
    eng = types.SimpleNamespace(
        target=target, build=lambda sol: types.SimpleNamespace(resources={"registers": 96}),
        time_graph=lambda sol, dy, w, launches, replays: (seen.update(sol=sol, dy=dy.shape, w=w.shape)
                                                          or types.SimpleNamespace(median_ms=0.25)))
    p = parse("convfp16 " + LINE).problem
    got = compare.time_ours(eng, p, 20, 15)
    assert got == {"ours_ms": 0.25, "regs": 96, "config_source": "default",
                   "config": DgradSolver().get_default_performance_config(p, target).serialize()}
    assert seen["dy"] == (p.N, p.Ho, p.Wo, p.K) and seen["w"] == (p.K, p.Y, p.X, p.cpg)
    nchw = parse("convfp16 " + LINE.replace("NHWC", "NCHW")).problem      # inputs in the line's layouts
    compare.time_ours(eng, nchw, 20, 15)
    assert seen["dy"] == (p.N, p.K, p.Ho, p.Wo) and seen["w"] == (p.K, p.cpg, p.Y, p.X)
    chwn = parse("convfp16 " + LINE.replace("NHWC", "CHWN")).problem
    with pytest.raises(compare.OursRefused, match="LAYOUT"):
        compare.time_ours(eng, chwn, 20, 15)
    # the row form every bench script records: the times, or the refusal or failure as text
    assert compare.ours_or_error(eng, p, 20, 15) == got
    assert compare.ours_or_error(eng, chwn, 20, 15)["ours_error"].startswith("refused: not applicable")

    def broken(sol, dy, w, launches, replays):
        raise RuntimeError("launch failed")
    eng.time_graph = broken
    assert compare.ours_or_error(eng, p, 20, 15) == {"ours_error": "failed: RuntimeError: launch failed"}


def fake_torch():
    cuda = types.SimpleNamespace(empty_cache=lambda: None, is_available=lambda: True)
    backends = types.SimpleNamespace(cudnn=types.SimpleNamespace(benchmark=False, allow_tf32=True,
                                                                 version=lambda: 90000),
                                     cuda=types.SimpleNamespace(matmul=types.SimpleNamespace(allow_tf32=True)))
    return types.SimpleNamespace(__version__="fake", cuda=cuda, backends=backends)


def test_main_survives_refusals_failures_and_a_lost_context(tmp_path, monkeypatch, capsys):
    suite = tmp_path / "mini.txt"
    suite.write_text(
        "# header\n"
        f"convfp16 {LINE}  # a/ok class=dense_3x3\n"
        f"convbfp16 {LINE.replace('NHWC', 'CHWN')}  # a/refused class=dense_3x3\n"
        f"conv {LINE.replace('-k 32', '-k 48')}  # b/cudnn_fails class=odd_channels\n"
        f"convfp16 {LINE.replace('-g 1', '-g 64').replace('-k 32', '-k 64')}  # b/kernel_fails class=depthwise\n"
        f"convfp16 {LINE.replace('-y 3 -x 3', '-y 1 -x 1').replace('-p 1 -q 1', '-p 0 -q 0')}  # c/after class=dense_1x1\n")
    state = {"context": ""}

    def time_ours(eng, p, launches, replays, config=None, perfdb=None):
        if p.in_layout != "NHWC":
            raise compare.OursRefused("not applicable: LAYOUT: CHWN")
        if p.G > 1:
            state["context"] = "CUDA_ERROR_ILLEGAL_ADDRESS"
            raise RuntimeError("cuLaunchKernel: CUDA_ERROR_ILLEGAL_ADDRESS")
        return {"ours_ms": 0.5, "regs": 100, "config": "cfg", "config_source": "default"}

    def time_cudnn(torch, p, launches, replays):
        if p.K == 48:
            raise RuntimeError("cuDNN error: CUDNN_STATUS_NOT_SUPPORTED")
        return 0.25

    monkeypatch.setitem(sys.modules, "torch", fake_torch())
    monkeypatch.setattr(compare, "time_ours", time_ours)
    monkeypatch.setattr(compare, "time_cudnn", time_cudnn)
    monkeypatch.setattr(compare, "time_cublas", lambda torch, p, l, r: 0.3)
    monkeypatch.setattr(compare, "measure_ceilings", lambda torch, d: (500e12, 4e12))
    monkeypatch.setattr(compare, "context_error", lambda torch: state["context"])
    import miopen_solver.runtime as runtime
    monkeypatch.setattr(runtime, "get_engine", lambda backend: types.SimpleNamespace(
        target=types.SimpleNamespace(arch="sm_90", num_cus=132),
        rt=types.SimpleNamespace(device_name=lambda: "fake H200")))
    out, js, png = tmp_path / "zoo.md", tmp_path / "zoo.json", tmp_path / "zoo.png"
    argv = ["--suite", str(suite), "--dtypes", "line", "--out", str(out), "--json", str(js)]
    assert compare.main(argv) == 0
    rows = {r["label"]: r for r in json.loads(js.read_text())["rows"]}
    assert rows["a/ok"]["ratio"] == pytest.approx(0.5)
    assert rows["a/refused"]["ours_error"].startswith("refused: not applicable: LAYOUT")
    assert "ratio" not in rows["a/refused"] and rows["a/refused"]["dtype"] == "bf16"
    assert "NOT_SUPPORTED" in rows["b/cudnn_fails"]["cudnn_error"] and rows["b/cudnn_fails"]["dtype"] == "fp32"
    assert rows["b/kernel_fails"]["ours_error"].startswith("failed: RuntimeError")
    assert rows["c/after"]["skipped"].startswith("CUDA context unusable after b/kernel_fails")
    text = out.read_text()
    assert "| total | " not in text and "| **total** | 5 | 1 | 4 | 0.50 | 0 | 0 |" in text
    assert "### Per network" in text and "fake H200" in text
    capsys.readouterr()
    plot = ["--plot", str(png)] if importlib.util.find_spec("matplotlib") else []
    assert compare.main(["--report", str(js), "--out", str(tmp_path / "again.md")] + plot) == 0
    again = (tmp_path / "again.md").read_text()
    assert again.split("### as written")[1] == text.split("### as written")[1]
    assert png.exists() == bool(plot)


# ----------------------------------------------------------------------------- bad input
S7 = Path(ROOT) / "bench" / "results" / "2026-12-01_s7"
GOOD = str(S7 / "zoo_1of2.json")


def refused(capsys, argv) -> str:
    """compare.main(argv) refused in one line (exit 2, one stderr line, no traceback)."""
    return refused_in_one_line(capsys, compare.main, argv, "compare.py")


@pytest.fixture
def no_torch(monkeypatch):
    """This process without PyTorch (``import torch`` raises ImportError), whatever is installed."""
    monkeypatch.setitem(sys.modules, "torch", None)


@pytest.mark.parametrize("argv, parts", [
    (["--model-defaults", "--only", "r50"], ["needs PyTorch with a CUDA GPU (", "torch"]),
    (["--suite", str(ZOO), "--dtypes", "line", "--classes", "patch"], ["needs PyTorch with a CUDA GPU ("]),
    (["--only", "zzznomatch"], ["--only 'zzznomatch'", "selects no line of", "allowed"]),
    (["--classes", "dense_1x1"], ["--classes 'dense_1x1'", "no class= tag"]),
    (["--suite", str(ZOO), "--dtypes", "line", "--classes", "dense_1x1,nope"], ["--classes", "'nope'", "allowed: a comma list of dense_1x1,"]),
    (["--suite", "/nonexistent"], ["--suite /nonexistent: cannot read (No such file or directory); allowed: a regular suite file"]),
    (["--shard", "3/2"], ["--shard", "'3/2'", "allowed: K/N with 1 <= K <= N"]),
    (["--shard", "0/2"], ["--shard", "allowed: K/N with 1 <= K <= N"]),
    (["--shard", "x"], ["--shard", "allowed: K/N with 1 <= K <= N"]),
    (["--dtypes", "fp16,fp8"], ["--dtypes", "fp8", "allowed: 'line' or a comma list of fp16,bf16,fp32"]),
    (["--launches", "0"], ["--launches", "allowed: an integer >= 1"]),
    (["--config", "1,2"], ["--config '1,2'", "2 fields"]),
    (["--perfdb", "/nonexistent.db"], ["--perfdb /nonexistent.db", "No such file or directory"]),
    (["--out", "/nonexistent/dir/z.md"], ["--out /nonexistent/dir/z.md", "does not exist", "allowed"]),
    (["--json", "{tmp}"], ["--json", "is a directory", "allowed"]),
    (["--plot", "/nonexistent/dir/z.png"], ["--plot"]),
])
def test_timing_arguments_are_checked_before_torch_in_one_line(capsys, no_torch, tmp_path, argv, parts):
    """Without PyTorch a timing run is refused in one line (was ModuleNotFoundError's
    traceback), after every check that needs no GPU: the suite, the selection, --config,
    --perfdb and the outputs' writability come first (a --plot without matplotlib says that)."""
    err = refused(capsys, [a.replace("{tmp}", str(tmp_path)) for a in argv])
    for part in parts:
        assert part in err
    assert ("needs PyTorch" in err) == ("needs PyTorch" in parts[0])


def test_report_refuses_bad_files_in_one_line(capsys, tmp_path):
    """--report: a missing file, a JSON file that is not a compare.py --json file, a gzip
    file, rows that are not rows: one line naming --report, the path (and the row) and what
    is allowed (was FileNotFoundError, KeyError 'rows', UnicodeDecodeError tracebacks)."""
    good = json.loads(Path(GOOD).read_text())
    row = good["rows"][0]
    cases = {"notreport.json": ('{"a": 1}', "not a JSON object with a rows list"),
             "broken.json": ('{"rows": [', "not JSON ("),
             "list.json": ("[1, 2]", "a JSON list, not an object"),
             "rowint.json": (json.dumps({"meta": {}, "rows": [row, 3]}), "row 2 is a JSON int, not an object"),
             "nolabel.json": (json.dumps({"rows": [{**row, "label": None}]}), "row 1: label null is not a string"),
             "negative.json": (json.dumps({"rows": [{**row, "ours_ms": -1}]}), "row 1: ours_ms -1 is not a positive"),
             "ceil.json": (json.dumps({"meta": {"ceilings": {"fp16": [1]}}, "rows": []}), "meta.ceilings.fp16 [1]")}
    for name, (text, why) in cases.items():
        (tmp_path / name).write_text(text)
        err = refused(capsys, ["--report", f"{GOOD},{tmp_path / name}"])
        assert f"--report {tmp_path / name}: {why}" in err and "allowed: a compare.py --json file" in err
    (tmp_path / "z.json.gz").write_bytes(gzip.compress(Path(GOOD).read_bytes()))
    err = refused(capsys, ["--report", str(tmp_path / "z.json.gz")])
    assert f"--report {tmp_path / 'z.json.gz'}: not UTF-8 text (byte 0x8b at offset 1)" in err
    err = refused(capsys, ["--report", "/nonexistent.json"])
    assert "--report /nonexistent.json: cannot read (No such file or directory); allowed:" in err


def test_report_checks_its_outputs_before_printing(capsys, tmp_path, monkeypatch):
    """--report X --out /nodir/z.md printed the report, then a FileError traceback; --plot
    without matplotlib wrote the .md, then an ImportError traceback. Now: one line, nothing
    printed or written."""
    refused(capsys, ["--report", GOOD, "--out", "/nonexistent/dir/z.md"])
    refused(capsys, ["--report", GOOD, "--json", str(tmp_path)])
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    md = tmp_path / "z.md"
    err = refused(capsys, ["--report", GOOD, "--out", str(md), "--plot", str(tmp_path / "z.png")])
    assert err == "compare.py: --plot needs matplotlib (pip install matplotlib)\n"
    assert not md.exists() and not (tmp_path / "z.png").exists()


@pytest.mark.parametrize("flag", [["--model-defaults"], ["--config", "128,64,64,2,1,64,64,0,0,0,1,-1,4,1"],
                                  ["--layout", "NCHW"], ["--perfdb", "x.db"], ["--launches", "5"],
                                  ["--suite", "bench/zoo.txt"], ["--only", "r50"], ["--shard", "1/2"]])
def test_report_refuses_options_that_only_time(capsys, flag):
    """--report renders saved rows: an option of a timing run was silently ignored."""
    err = refused(capsys, ["--report", GOOD] + flag)
    assert err.startswith(f"compare.py: --report renders saved rows; {flag[0]} ") and "allowed with --report" in err
    if flag == ["--model-defaults"]:
        assert "--report renders saved rows; --model-defaults times on a GPU" in err


def test_report_json_writes_the_merged_rows_which_merge_again(capsys, tmp_path):
    """--report a,b --json m.json wrote nothing; now the merged rows in compare.py's --json
    format (the report of m.json has the same table)."""
    merged, a, b = tmp_path / "m.json", tmp_path / "a.md", tmp_path / "b.md"
    two = f"{GOOD},{S7 / 'zoo_2of2.json'}"
    assert compare.main(["--report", two, "--json", str(merged), "--out", str(a)]) == 0
    data = json.loads(merged.read_text())
    rows = [r for f in (GOOD, S7 / "zoo_2of2.json") for r in json.loads(Path(f).read_text())["rows"]]
    assert data["rows"] == rows and set(data["meta"]) == {"header", "ceilings"}
    assert compare.main(["--report", str(merged), "--out", str(b)]) == 0
    assert a.read_text().split("### as written")[1] == b.read_text().split("### as written")[1]
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]
    capsys.readouterr()


def test_a_row_line_with_a_layout_tag_is_its_problem():
    """--layout runs append ``[NCHW]`` to a row's line; row_problem reads it back."""
    line = "convfp16 " + LINE
    assert compare.row_problem(line) == parse(line).problem
    p = compare.row_problem(line + " [NCHW]")
    assert (p.in_layout, p.out_layout, p.fil_layout) == ("NCHW",) * 3 and p.N == 2
    with pytest.raises(ValueError):
        compare.row_problem("convfp16 -n x")


def test_the_script_refuses_in_one_line_without_a_traceback(tmp_path):
    """As a user runs it: ``python bench/compare.py ...`` with no PyTorch (an import that
    fails, stood in by a torch module that raises ImportError), a bad --shard, a missing
    --report: exit 2, one line on stderr."""
    fake = tmp_path / "site"
    fake.mkdir()
    (fake / "torch.py").write_text("raise ImportError(\"No module named 'torch'\")\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(fake), ROOT])}
    for argv, part in ((["--only", "r50"], "compare.py: needs PyTorch with a CUDA GPU (No module named 'torch')"),
                       (["--shard", "3/2"], "K/N with 1 <= K <= N"),
                       (["--report", "/nonexistent.json"], "--report /nonexistent.json")):
        r = subprocess.run([sys.executable, "bench/compare.py", *argv], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 2 and r.stdout == "" and "Traceback" not in r.stderr
        assert r.stderr.count("\n") == 1 and part in r.stderr


def test_report_json_is_strict_json_with_non_finite_times_as_null():
    """A row whose time is NaN or infinite (a failed or overflowed measurement) is written as
    null, never as the NaN/Infinity strict JSON parsers refuse."""
    def refuse(name):
        raise ValueError(f"non-standard JSON constant {name}")
    rows = [{"label": "a", "ours_ms": float("nan"), "cudnn_ms": float("inf"), "ratio": 1.5}]
    back = json.loads(compare.report_json({"commit": "x"}, rows), parse_constant=refuse)
    assert back["rows"][0]["ours_ms"] is None and back["rows"][0]["cudnn_ms"] is None
    assert back["rows"][0]["ratio"] == 1.5
