"""bench/default_vs_tuned.py: the default-vs-best table of a tuning campaign over the zoo,
from the campaign's log, joined to the suite by the problem key."""

from __future__ import annotations

import json

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
    assert dvt.main([log1, log2, "--suite", str(suite), "--out", str(out), "--json", str(tmp_path / "t.json")]) == 0
    rows = {r["label"]: r for r in json.loads((tmp_path / "t.json").read_text())}
    assert abs(rows["net/a"]["ratio"] - 0.021 / 0.020) < 1e-12 and rows["net/a"]["ok"]
    assert rows["net/b"]["ratio"] == 1.0 and rows["net/b"]["ok"]
    assert rows["net/c"]["ratio"] is None                  # never reached
    text = out.read_text()
    assert "| dense_3x3 | 2 | 1 | 1 | 1.050 | 1.050 |" in text
    assert "| **total** | 3 | 2 | 2 |" in text
    # only the first log: line 0 is 1.5x off the best, flagged
    assert dvt.main([log1, "--suite", str(suite), "--within", "0.1"]) == 0
    shown = capsys.readouterr().out
    assert "| dense_3x3 | 2 | 1 | 0 | 1.500 | 1.500 |" in shown and "1.500 **" in shown


def test_bad_input_is_one_line(tmp_path, capsys):
    suite = tmp_path / "zoo.txt"
    suite.write_text(SUITE)
    assert dvt.main([str(tmp_path / "none.jsonl"), "--suite", str(suite)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "none.jsonl" in err
    log = _log(tmp_path / "l.jsonl", [{"type": "session"}])
    assert dvt.main([log, "--suite", str(tmp_path / "missing.txt")]) == 2
    assert "missing.txt" in capsys.readouterr().err
