"""bench/default_vs_tuned.py: the default-vs-best table of a tuning campaign over the zoo,
from the campaign's log, joined to the suite by the problem key."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from bench import default_vs_tuned as dvt
from miopen_solver.command import parse

SUITE = """# two layers
convfp16 -n 4 -c 64 -H 14 -W 14 -k 64 -y 3 -x 3 -p 1 -q 1 -F 2 --in_layout NHWC --out_layout NHWC --fil_layout NHWC  # net/a class=dense_3x3
convfp16 -n 4 -c 64 -H 14 -W 14 -k 128 -y 1 -x 1 -F 2 --in_layout NHWC --out_layout NHWC --fil_layout NHWC  # net/b class=dense_1x1
conv -n 2 -c 8 -H 7 -W 7 -k 8 -y 3 -x 3 -p 1 -q 1 -F 2 --in_layout NHWC --out_layout NHWC --fil_layout NHWC  # net/c class=dense_3x3
"""


def _key(line):
    return parse(line.split("#")[0].split()).problem.problem_key()


def _log(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def test_the_table_from_a_log(tmp_path, capsys):
    suite = tmp_path / "zoo.txt"
    suite.write_text(SUITE)
    lines = [ln for ln in SUITE.splitlines() if ln and not ln.startswith("#")]
    session = {"type": "session", "log_format": 1}
    first = {"type": "verdict", "problem_key": _key(lines[0]), "ok": 40, "default": "a", "winner": "b",
             "default_median_ms": 0.030, "winner_median_ms": 0.020}
    log1 = _log(tmp_path / "one.jsonl", [session, first])
    # a resumed campaign: its verdict for line 0 replaces the first; line 1 within 10%
    log2 = _log(tmp_path / "two.jsonl", [session,
                                         dict(first, default_median_ms=0.021, winner_median_ms=0.020),
                                         {"type": "verdict", "problem_key": _key(lines[1]), "ok": 12,
                                          "default": "c", "winner": "c", "default_median_ms": 0.010,
                                          "winner_median_ms": 0.010}])
    out = tmp_path / "t.md"
    assert dvt.main([log1, log2, "--suite", str(suite), "--out", str(out), "--json", str(tmp_path / "t.json"), "--defaults", "logged"]) == 0
    rows = {r["label"]: r for r in json.loads((tmp_path / "t.json").read_text())}
    assert abs(rows["net/a"]["ratio"] - 0.021 / 0.020) < 1e-12 and rows["net/a"]["ok"]
    assert rows["net/b"]["ratio"] == 1.0 and rows["net/b"]["ok"]
    assert rows["net/c"]["ratio"] is None                  # never reached
    text = out.read_text()
    assert "| dense_3x3 | 2 | 1 | 1 | 1.050 | 1.050 |" in text
    assert "| **total** | 3 | 2 | 2 |" in text
    # only the first log: line 0 is 1.5x off the best, flagged
    assert dvt.main([log1, "--suite", str(suite), "--within", "0.1", "--defaults", "logged"]) == 0
    shown = capsys.readouterr().out
    assert "| dense_3x3 | 2 | 1 | 0 | 1.500 | 1.500 |" in shown and "1.500 **" in shown


def test_bad_input_is_one_line(tmp_path, capsys):
    suite = tmp_path / "zoo.txt"
    suite.write_text(SUITE)
    assert dvt.main([str(tmp_path / "none.jsonl"), "--suite", str(suite)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "none.jsonl: cannot read (No such file or directory); allowed: a regular" in err
    log = _log(tmp_path / "l.jsonl", [{"type": "session"}])
    assert dvt.main([log, "--suite", str(tmp_path / "missing.txt")]) == 2
    assert "missing.txt" in capsys.readouterr().err


SESSION = '{"type": "session", "log_format": 1}\n'


@pytest.mark.parametrize("content, why", [
    ("garbage {\n", "line 1 is not JSON (Expecting value)"),
    (SESSION + "[1, 2]\n", "line 2 is a JSON list, not an object"),
    ("", "no complete record (an empty file)"),
    ("\n\n", "no complete record (blank lines)"),
    (SESSION[:-5], "no complete record (32 bytes without a newline)"),
    ("\x00\xff binary", "binary data, not JSON Lines text (byte 0x00 at offset 0)"),
    (SESSION + "\xff binary\n", "binary data, not JSON Lines text (byte 0xff at offset 37)"),
    ('{"type": "verdict", "problem_key": "k"}\n', "line 1, its first record, is not a session record"),
    (SESSION + '{"type": "verdict"}\n', "line 2: a verdict without a problem_key"),
    (SESSION + '{"type": "verdict", "problem_key": 7}\n', "line 2: a verdict without a problem_key"),
    (SESSION + '{"type": "verdict", "problem_key": "k", "default_median_ms": "abc"}\n',
     "line 2: default_median_ms abc is not a time"),
    (SESSION + '{"type": "verdict", "problem_key": "k", "winner_median_ms": -1}\n',
     "line 2: winner_median_ms -1 is not a time"),
    (SESSION + '{"type": "verdict", "problem_key": "k", "winner_median_ms": true}\n',
     "line 2: winner_median_ms True is not a time"),
    (SESSION + '{"type": "verdict", "problem_key": "k", "winner_median_ms": NaN}\n',
     "line 2: winner_median_ms nan is not a time"),
])
def test_a_log_that_is_not_a_campaign_log_is_one_line(tmp_path, capsys, content, why):
    """Garbage, a verdict without its key or with a time that is not one: one error line
    naming the log and the line, exit 2 (not a KeyError, not a table of n/a)."""
    suite = tmp_path / "zoo.txt"
    suite.write_text(SUITE)
    log = tmp_path / "l.jsonl"
    log.write_bytes(content.encode("latin-1"))
    assert dvt.main([str(log), "--suite", str(suite)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert "l.jsonl" in err and why in err and "allowed: a dgrad-driver tune --results log" in err


def test_a_read_only_log_with_a_torn_tail_is_read(tmp_path, capsys):
    """The script only reads: a read-only log (fetched from a device) is fine, and a torn
    last line (a killed campaign) is skipped."""
    suite = tmp_path / "zoo.txt"
    suite.write_text(SUITE)
    line = [ln for ln in SUITE.splitlines() if ln and not ln.startswith("#")][0]
    log = tmp_path / "ro.jsonl"
    log.write_text(SESSION + json.dumps({"type": "verdict", "problem_key": _key(line), "ok": 3, "default": "a",
                                         "winner": "a", "default_median_ms": 0.01,
                                         "winner_median_ms": 0.01}) + '\n{"type": "verd')
    log.chmod(0o444)
    assert dvt.main([str(log), "--suite", str(suite), "--defaults", "logged"]) == 0
    assert "| **total** | 3 | 1 | 1 |" in capsys.readouterr().out


def test_a_gzip_log_is_read_as_its_plain_text(tmp_path, capsys):
    """A log fetched from a device as .jsonl.gz (the committed campaign logs) gives the table
    its unpacked text gives (was "line 1 is not a JSON object"); a truncated gzip file, a file
    named .gz that is not gzip data and a binary file are one line saying so, exit 2."""
    logs = Path(__file__).resolve().parent.parent / "bench" / "results"
    packed = logs / "2026-12-02_s13" / "call4" / "zoo_tune.jsonl.gz"
    plain = tmp_path / "zoo_tune.jsonl"
    plain.write_bytes(gzip.decompress(packed.read_bytes()))
    assert dvt.main([str(packed), "--json", str(tmp_path / "a.json")]) == 0
    table = capsys.readouterr().out
    assert dvt.main([str(plain), "--json", str(tmp_path / "b.json")]) == 0
    assert capsys.readouterr().out == table and table.startswith("Timing: ") and "| **total** |" in table
    assert (tmp_path / "a.json").read_text() == (tmp_path / "b.json").read_text()
    whole = packed.read_bytes()
    cases = {"trunc.jsonl.gz": (whole[:len(whole) // 2], "not a whole gzip file (Compressed file ended"),
             "plain.jsonl.gz": (SESSION.encode(), "named .gz but not gzip data"),
             "bin.jsonl": (bytes(range(1, 256)) * 4, "binary data, not JSON Lines text (byte 0x80 at offset 127)")}
    for name, (data, why) in cases.items():
        (tmp_path / name).write_bytes(data)
        assert dvt.main([str(tmp_path / name)]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1 and f"log {tmp_path / name}: {why}" in err, err


@pytest.mark.parametrize("flag", ["--out", "--json"])
@pytest.mark.parametrize("where, why", [
    ("missing/t.md", "does not exist"),
    (".", "is a directory"),
    ("l.jsonl", "is the input"),
    ("zoo.txt", "is the input"),
])
def test_an_output_that_cannot_be_written_is_refused_first(tmp_path, capsys, monkeypatch, flag, where, why):
    """--out/--json that cannot (or must not: a log, the suite) be written: one error line
    naming the flag, before any work, exit 2, the inputs left as they were (was a FileError
    traceback after the table was made, or the log replaced by the table)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "zoo.txt").write_text(SUITE)
    log = _log(tmp_path / "l.jsonl", [{"type": "session", "log_format": 1}])
    before = (tmp_path / "l.jsonl").read_text()
    assert dvt.main([log, "--suite", "zoo.txt", flag, where]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith(f"default_vs_tuned: {flag} ") and why in err
    assert (tmp_path / "l.jsonl").read_text() == before and (tmp_path / "zoo.txt").read_text() == SUITE


@pytest.mark.parametrize("suite, why", [
    (None, "is a directory"),
    ("garbage {\n", "line 1: base 'garbage' is not one of"),
    ("# header\n\nconvfp16 -n abc -F 2  # x\n", "line 3: -n 'abc'"),
    ("conv -n 2 -c 8 -H 7 -W 7 -k 8 -y 3 -x 3 -F 1  # x\n", "line 1: -F '1'"),
    ("# nothing\n\n", "no lines"),
    ("convfp16 -n 9 -c 16 -H 9 -W 9 -k 16 -y 1 -x 1 -F 2  # other\n", "none of its 1 lines has a verdict"),
])
def test_a_bad_or_wrong_suite_is_one_line(tmp_path, capsys, suite, why):
    """A suite that cannot be read or parsed, or that is not the one the campaign tuned
    (no line has a verdict in the logs, which hold some): one line naming --suite (and
    the line), exit 2 -- not a message without the file, nor a table of n/a."""
    path = tmp_path / "zoo.txt"
    if suite is None:
        path.mkdir()
    else:
        path.write_text(suite)
    line = [ln for ln in SUITE.splitlines() if ln and not ln.startswith("#")][0]
    log = _log(tmp_path / "l.jsonl", [{"type": "session", "log_format": 1},
                                      {"type": "verdict", "problem_key": _key(line), "default_median_ms": 0.01,
                                       "winner_median_ms": 0.01}])
    assert dvt.main([log, "--suite", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("default_vs_tuned: --suite ")
    assert why in err and "allowed" in err and "Traceback" not in err


def test_the_zoo_parses():
    zoo = Path(__file__).resolve().parent.parent / "bench" / "zoo.txt"
    assert len(dvt.read_plan(zoo)) == len(
        [ln for ln in zoo.read_text().splitlines() if ln.strip() and not ln.strip().startswith("#")])


@pytest.mark.parametrize("argv, why", [
    ([], "the following arguments are required: logs"),
    (["l.jsonl", "--within", "abc"], "--within: abc: allowed: a number, 0 <= value < 10"),
    (["l.jsonl", "--within", "nan"], "--within: nan: allowed: a number, 0 <= value < 10"),
    (["l.jsonl", "--within", "10"], "--within: 10: allowed"),
    (["l.jsonl", "--within", "-0.5"], "--within: -0.5: allowed"),
    (["l.jsonl", "--within"], "--within: expected one argument"),
    (["l.jsonl", "--bogus"], "unrecognized arguments: --bogus"),
])
def test_a_usage_error_is_one_line(capsys, argv, why):
    """A missing log, an unknown option or a --within that is not a number in range: one
    line naming it and what is allowed, exit 2 (was argparse's usage block, and a float
    error without the range)."""
    with pytest.raises(SystemExit) as e:
        dvt.main(argv)
    assert e.value.code == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("default_vs_tuned: ") and why in err


def test_a_tf32_line_is_a_tf32_row(tmp_path, capsys):
    """A ``conv ... -M 0`` suite line (TF32 math: its own key, kernels and times) was listed
    as ``fp32``, the same as the layer's IEEE fp32 line; its row says ``tf32``."""
    fp32 = "conv -n 2 -c 8 -H 7 -W 7 -k 8 -y 3 -x 3 -p 1 -q 1 -F 2"
    suite = tmp_path / "zoo.txt"
    suite.write_text(f"{fp32}  # n/ieee class=dense_3x3\n{fp32} -M 0  # n/tf32 class=dense_3x3\n"
                     f"{fp32.replace('conv ', 'convfp16 ')} -M 0  # n/half class=dense_3x3\n")
    recs = [{"type": "session", "log_format": 1}] + [
        {"type": "verdict", "problem_key": _key(line), "default_median_ms": t, "winner_median_ms": t}
        for line, t in ((fp32, 0.02), (fp32 + " -M 0", 0.01))]
    js = tmp_path / "t.json"
    assert dvt.main([_log(tmp_path / "l.jsonl", recs), "--suite", str(suite), "--json", str(js), "--defaults", "logged"]) == 0
    rows = {r["label"]: r for r in json.loads(js.read_text())}
    assert (rows["n/ieee"]["dtype"], rows["n/tf32"]["dtype"], rows["n/half"]["dtype"]) == ("fp32", "tf32", "fp16")
    assert rows["n/ieee"]["key"] != rows["n/tf32"]["key"] and rows["n/tf32"]["best_ms"] == 0.01
    assert "| n/tf32 | dense_3x3 | tf32 |" in capsys.readouterr().out


def test_the_table_says_how_its_configs_were_timed(tmp_path, capsys):
    """The table's first line counts the logs' ok timing records by method: graph replays
    (a -J 1 campaign) and single launches read differently below ~30 us, so the table says
    which it is; failed records and other record types are not counted."""
    suite = tmp_path / "zoo.txt"
    suite.write_text(SUITE)
    line0 = [ln for ln in SUITE.splitlines() if ln and not ln.startswith("#")][0]
    t = {"type": "timing", "status": "ok", "problem_key": _key(line0), "perf_config": "a", "median_ms": 0.02}
    log = _log(tmp_path / "l.jsonl", [{"type": "session"}, dict(t, method="graph"), dict(t, method="graph"),
                                      dict(t, method="events"), dict(t, status="failed", method="events"),
                                      {"type": "verdict", "problem_key": _key(line0), "ok": 3, "default": "a",
                                       "winner": "a", "default_median_ms": 0.02, "winner_median_ms": 0.02}])
    assert dvt.main([log, "--suite", str(suite), "--defaults", "logged"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first == "Timing: 2 configs as graph replays (-J 1), 1 configs as single launches (CUDA events)"
    empty = _log(tmp_path / "e.jsonl", [{"type": "session"}])
    assert dvt.main([empty, "--suite", str(suite), "--defaults", "logged"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "Timing: no timed config in the logs"


def test_the_current_default_is_judged_by_the_campaign_s_time_for_it(tmp_path, capsys):
    """``--defaults current`` (the default): after a default changed, the row judges the
    default the solver picks now on the campaign's arch, by the time the campaign recorded
    for that config; a current default the campaign never timed is ``n/a (not timed)``; a
    default that did not change keeps the verdict's own time."""
    from miopen_solver.solver import DgradSolver
    from miopen_solver.target import get_target
    suite = tmp_path / "zoo.txt"
    suite.write_text(SUITE)
    lines = [ln.split("#")[0].split() for ln in SUITE.splitlines() if ln and not ln.startswith("#")]
    now = [DgradSolver().get_default_performance_config(parse(ln).problem, get_target("sm_90")).serialize()
           for ln in lines]
    keys = [_key(" ".join(ln)) for ln in lines]
    old = "64,32,32,2,1,32,32,0,0,0,1,-1,2"
    assert old not in now
    recs = [{"type": "session", "log_format": 1, "arch": "sm_90"},
            # line 0: the campaign ran an older default; it timed today's default at 0.012 ms
            {"type": "timing", "status": "ok", "problem_key": keys[0], "perf_config": now[0], "median_ms": 0.012},
            {"type": "verdict", "problem_key": keys[0], "ok": 40, "default": old, "winner": "w",
             "default_median_ms": 0.030, "winner_median_ms": 0.010},
            # line 1: an older default, today's never timed
            {"type": "verdict", "problem_key": keys[1], "ok": 40, "default": old, "winner": "w",
             "default_median_ms": 0.030, "winner_median_ms": 0.010},
            # line 2: the default did not change
            {"type": "verdict", "problem_key": keys[2], "ok": 40, "default": now[2], "winner": "w",
             "default_median_ms": 0.011, "winner_median_ms": 0.010}]
    log = _log(tmp_path / "l.jsonl", recs)
    js = tmp_path / "t.json"
    assert dvt.main([log, "--suite", str(suite), "--json", str(js)]) == 0
    rows = [r for r in json.loads(js.read_text())]
    assert rows[0]["default"] == now[0] and rows[0]["changed"] and abs(rows[0]["ratio"] - 1.2) < 1e-12
    assert not rows[0]["ok"]
    assert rows[1]["default"] == now[1] and rows[1]["changed"] and rows[1]["ratio"] is None
    assert rows[2]["default"] == now[2] and not rows[2]["changed"] and abs(rows[2]["ratio"] - 1.1) < 1e-12
    out = capsys.readouterr().out
    assert "n/a (not timed)" in out and "(changed since the campaign)" in out
    # the logged default, as the campaign ran it
    assert dvt.main([log, "--suite", str(suite), "--json", str(js), "--defaults", "logged"]) == 0
    rows = json.loads(js.read_text())
    assert [r["default"] for r in rows] == [old, old, now[2]] and abs(rows[0]["ratio"] - 3.0) < 1e-12


@pytest.mark.parametrize("sessions, why", [
    ([{"type": "session", "log_format": 1}], "no session record names an arch"),
    ([{"type": "session", "log_format": 1, "arch": "sm_90"}, {"type": "session", "log_format": 1, "arch": "sm_80"}],
     "the logs name 2 arches: sm_80, sm_90"),
])
def test_current_defaults_need_one_arch(tmp_path, capsys, sessions, why):
    suite = tmp_path / "zoo.txt"
    suite.write_text(SUITE)
    line = [ln for ln in SUITE.splitlines() if ln and not ln.startswith("#")][0]
    verdict = {"type": "verdict", "problem_key": _key(line), "default_median_ms": 0.02, "winner_median_ms": 0.01}
    logs = [_log(tmp_path / f"l{i}.jsonl", [s, verdict]) for i, s in enumerate(sessions)]
    assert dvt.main(logs + ["--suite", str(suite)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and why in err and "--defaults logged" in err


@pytest.mark.parametrize("where, field, value, why", [
    ("timing", "perf_config", [1], "without a perf_config string"),
    ("timing", "problem_key", {"a": 1}, "without a problem_key string"),
    ("timing", "median_ms", -5.0, "without a median_ms time, a finite number > 0"),
    ("timing", "median_ms", float("nan"), "without a median_ms time"),
    ("timing", "median_ms", 1e400, "without a median_ms time"),
    ("timing", "median_ms", True, "without a median_ms time"),
    ("timing", "median_ms", 0, "without a median_ms time"),
    ("verdict", "default", 123, "whose default is not a perf config string"),
    ("verdict", "winner", [1], "whose winner is not a perf config string"),
    ("session", "arch", ["sm_90"], "is not an arch name"),
    ("session", "arch", {"a": 1}, "is not an arch name"),
    ("session", "arch", "", "is not an arch name"),
    ("session", "arch", "sm_99", "is not an arch name"),
])
@pytest.mark.parametrize("defaults", ["current", "logged"])
def test_a_field_of_a_hand_edited_log_is_one_line_naming_it(tmp_path, capsys, where, field, value, why, defaults):
    """A fresh-user trial edited a campaign log: unhashable fields, negative, NaN, infinite and
    boolean times crashed the table with a traceback, 'math domain error', or a nan geomean.
    Every record kind's field is checked (in both --defaults modes where the mode reads it):
    one line naming the log, the line and the field, exit 2."""
    suite = tmp_path / "zoo.txt"
    suite.write_text(SUITE)
    line = [ln for ln in SUITE.splitlines() if ln and not ln.startswith("#")][0]
    key = _key(line)
    session = {"type": "session", "log_format": 1, "arch": "sm_90"}
    timing = {"type": "timing", "status": "ok", "problem_key": key, "perf_config": "c", "median_ms": 0.01}
    verdict = {"type": "verdict", "problem_key": key, "ok": 1, "default": "c", "winner": "c",
               "default_median_ms": 0.01, "winner_median_ms": 0.01}
    rec = {"session": session, "timing": timing, "verdict": verdict}[where]
    rec[field] = value
    path = tmp_path / "l.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in (session, timing, verdict)))
    assert dvt.main([str(path), "--suite", str(suite), "--defaults", defaults]) == (
        0 if defaults == "logged" and where != "verdict" else 2)
    err = capsys.readouterr().err
    if defaults == "logged" and where != "verdict":     # the logged mode reads no timing or arch
        assert err == ""
        return
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert str(path) in err and why in err and "line " in err, err


def test_each_log_is_read_once(tmp_path, monkeypatch):
    """Verdicts, timing methods, the arch and the timed configs all come from one read of
    each log (they were four reads)."""
    zoo = tmp_path / "zoo.txt"
    line = "convfp16 -n 2 -c 64 -H 14 -W 14 -k 64 -y 1 -x 1 -F 2 --in_layout NHWC --out_layout NHWC --fil_layout NHWC"
    zoo.write_text(f"{line}  # net/a class=dense_1x1\n")
    from miopen_solver.command import parse
    key = parse(line.split()).problem.problem_key()
    recs = [{"type": "session", "arch": "sm_90"},
            {"type": "timing", "status": "ok", "problem_key": key, "perf_config": "64,64,64,1,1,64,64,0,0,0,1,-1,4,3",
             "median_ms": 0.01, "method": "graph"},
            {"type": "verdict", "problem_key": key, "default": "64,64,64,1,1,64,64,0,0,0,1,-1,4,3",
             "default_ms": 0.01, "winner": "64,64,64,1,1,64,64,0,0,0,1,-1,4,3", "winner_ms": 0.01}]
    logs = [_log(tmp_path / f"l{i}.jsonl", recs) for i in range(2)]
    reads = []
    real = dvt.log_records
    monkeypatch.setattr(dvt, "log_records", lambda path: reads.append(str(path)) or real(path))
    assert dvt.main(logs + ["--suite", str(zoo)]) == 0
    assert sorted(reads) == sorted(logs)
