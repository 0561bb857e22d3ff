"""Defects of a new-user trial, each fixed for its whole kind:

* every JSON the driver writes is strict JSON (a non-finite float is ``null``; ``NaN`` is
  what strict parsers reject): stdout ``--json`` records, results logs, fixture files;
* ``run --json`` and ``tune --json`` rows say which kernel schedule ran (``schedule``, the
  slug ``config --json`` reports as ``spec.schedule``);
* a campaign (``tune --file``) that lost a line to an error exits 1 after the rest, as
  ``batch`` does for the same file;
* a JSON decode error reads ``... starting at column N``, not ``at at column N``.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from conftest import run_cli
from driver import workers
from miopen_solver import fixtures as fx
from miopen_solver import prng
from miopen_solver.perfdb import ENV_VAR as PERFDB_ENV
from miopen_solver.results_log import ResultsLog, read_log
from miopen_solver.text import json_error, json_safe, json_text

NAN_LINE = "convfp16 -n 2 -c 32 -H 14 -W 14 -k 32 -y 3 -x 3 -p 1 -q 1 -F 2"
"""The trial's line: with ``-D`` a dY file of NaNs its verification's rms error is NaN."""
SMALL = "convfp16 -n 1 -c 8 -H 5 -W 5 -k 8 -y 3 -x 3 -p 1 -q 1 -F 2 -i 1"
NHWC3 = "--in_layout NHWC --out_layout NHWC --fil_layout NHWC"
PINGPONG = "128,128,64,1,1,128,128,0,0,0,1,-1,6,20"
"""An sm_90 config of the TMA ping-pong schedule (simulated on the CPU engine)."""


@pytest.fixture(autouse=True)
def env(monkeypatch, tmp_path):
    """MIOpen's default seed, no worker hooks, a perf-db of the test's own, run in tmp_path."""
    monkeypatch.delenv(prng.SEED_ENV, raising=False)
    for name in (workers.CRASH_ENV, workers.PRELOAD_ENV, workers.TIMEOUT_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(PERFDB_ENV, str(tmp_path / "perfdb.sqlite"))
    monkeypatch.chdir(tmp_path)


def _reject(name):
    raise ValueError(f"not strict JSON: {name}")


def strict(text: str):
    """``text`` parsed as a strict JSON parser does: ``NaN``/``Infinity`` refused."""
    return json.loads(text, parse_constant=_reject)


def nan_dy_file(tmp_path, line: str = NAN_LINE):
    from driver.run_cmd import parse_line
    from miopen_solver import layouts
    problem = parse_line(line.split()).problem
    path = tmp_path / "nan.bin"
    np.full(layouts.dy_shape(problem), np.nan, layouts.storage_dtype(problem.dtype)).tofile(path)
    return path


# ------------------------------------------------------------------ 1. strict JSON
def test_json_text_writes_every_non_finite_float_as_null_at_any_depth():
    rec = {"error": math.nan, "top": math.inf, "low": -math.inf, "ok": 1.5, "n": 3, "flag": True, "none": None,
           "nested": {"list": [1.0, math.nan, {"deep": (math.inf, 2.0)}]}, "s": "NaN"}
    text = json_text(rec, sort_keys=True)
    back = strict(text)
    assert back == {"error": None, "top": None, "low": None, "ok": 1.5, "n": 3, "flag": True, "none": None,
                    "nested": {"list": [1.0, None, {"deep": [None, 2.0]}]}, "s": "NaN"}
    assert json_safe(np.float64("nan")) is None and json_safe(np.float64(2.0)) == 2.0
    with pytest.raises(ValueError):           # plain json.dumps writes NaN: the strictness is json_text's
        strict(json.dumps(rec))


def test_run_json_with_a_nan_dy_file_is_strict_json(capsys, tmp_path):
    """The trial's case: ``-D nan.bin`` printed ``"error": NaN``."""
    path = nan_dy_file(tmp_path)
    status, out, err = run_cli(capsys, *NAN_LINE.split(), "-D", path, "-t", "1", "--backend", "cpu", "--json")
    assert status == 1 and len(out) == 1, (out, err)
    rec = strict(out[0])
    assert rec["status"] == "verify_failed" and rec["verify"]["error"] is None
    assert rec["verify"]["nonfinite"] == rec["verify"]["elements"] > 0


def test_tune_json_with_a_nan_dy_file_is_strict_json(capsys, tmp_path):
    path = nan_dy_file(tmp_path)
    status, out, err = run_cli(capsys, "tune", *NAN_LINE.split(), "-D", path, "-i", "1", "--backend", "cpu",
                               "--max-configs", "1", "--verify-top", "1", "--no-perfdb", "--quiet", "--json")
    assert len(out) == 1, (out, err)
    rec = strict(out[0])
    assert status == 1 and rec["winner"] is None
    assert [r["verified"] for r in rec["rows"]] == [False] and rec["rows"][0]["verify_error"] is None


def test_results_log_and_fixture_files_are_strict_json(tmp_path):
    log = tmp_path / "log.jsonl"
    with ResultsLog(log) as out:
        out.append({"type": "session", "x": math.nan, "times_ms": [1.0, math.inf]})
    line = log.read_text().splitlines()[0]
    assert strict(line)["x"] is None and strict(line)["times_ms"] == [1.0, None]
    assert read_log(log).records[0]["x"] is None
    assert strict(fx.dumps({"id": "a", "numerics": {"rms_error": math.nan}}))["numerics"]["rms_error"] is None


# ------------------------------------------------------------------ 2. the schedule
@pytest.mark.parametrize("extra,slug", [
    ((), None),                                                     # the CPU target's default
    (("--arch", "sm_90", "--perf-config", PINGPONG), "wgmma-tma-pingpong"),
])
def test_run_json_names_the_schedule_as_config_json_does(capsys, extra, slug):
    line = f"{SMALL} {NHWC3}".split()
    status, out, err = run_cli(capsys, "config", *line, "--backend", "cpu", *extra, "--json")
    assert status == 0, (out, err)
    want = json.loads("\n".join(out))["spec"]["schedule"]
    assert slug is None or want == slug
    status, out, err = run_cli(capsys, "run", *line, "--backend", "cpu", *extra, "--json")
    assert status == 0 and len(out) == 1, (out, err)
    rec = strict(out[0])
    assert rec["schedule"] == want
    assert {"perf_config", "kernel_name", "arch", "status", "timing"} <= set(rec)       # old keys kept


def test_tune_json_rows_and_winner_name_their_schedule(capsys):
    from miopen_solver.config import PerfConfig
    status, out, err = run_cli(capsys, "tune", *SMALL.split(), *NHWC3.split(), "--backend", "cpu",
                               "--max-configs", "2", "--verify-top", "1", "--no-perfdb", "--quiet", "--json")
    assert status == 0 and len(out) == 1, (out, err)
    rec = strict(out[0])
    assert len(rec["rows"]) == 2 and rec["winner"]["schedule"]
    for row in rec["rows"] + [rec["winner"]]:
        assert row["schedule"] == PerfConfig.parse(row["perf_config"]).schedule.slug


# ------------------------------------------------------------------ 3. campaign exits
@pytest.mark.parametrize("bad,why", [
    ("convfp16 -n 999999999999 -c 8 -H 5 -W 5 -k 8 -y 3 -x 3 -F 2", "-n '999999999999': out of range"),
    (f"{SMALL} -D missing.bin", "missing.bin"),
])
def test_a_campaign_that_lost_a_line_to_an_error_exits_1_after_the_rest(capsys, tmp_path, bad, why):
    """``tune --file`` exited 0 with ``Skipped line 2: error: ...``; ``batch`` exits 1 for
    the same file. Now 1 too, after the good line was tuned."""
    camp = tmp_path / "camp.txt"
    camp.write_text(f"{SMALL} {NHWC3}\n{bad}\n")
    status, out, err = run_cli(capsys, "tune", "--file", camp, "--backend", "cpu", "--gpus", "1",
                               "--max-configs", "1", "--no-perfdb", "--quiet")
    skipped = [line for line in out if line.startswith("Skipped line 2: error: ")]
    assert status == 1 and len(skipped) == 1 and why in skipped[0], (out, err)
    assert any(line.strip().startswith("Winner ") for line in out)       # the rest of the work was done
    assert out[-1].startswith("Lines with errors, not tuned: 2 of ") and out[-1].endswith("exit status 1"), out
    status, _, _ = run_cli(capsys, "batch", camp, "--backend", "cpu", "--no-verify")
    assert status == 1                                                   # the same exit as batch's


def test_a_campaign_whose_skips_are_not_errors_still_exits_0(capsys, tmp_path):
    """Lines that are not -F 2, or repeat a problem, are skipped as batch skips them: exit 0."""
    camp = tmp_path / "camp.txt"
    camp.write_text(f"{SMALL} {NHWC3}\n{SMALL.replace('-F 2', '-F 1')} {NHWC3}\n{SMALL} {NHWC3}\n")
    status, out, err = run_cli(capsys, "tune", "--file", camp, "--backend", "cpu", "--gpus", "1",
                               "--max-configs", "1", "--no-perfdb", "--quiet")
    assert status == 0, (out, err)
    assert sum(line.startswith("Skipped line ") for line in out) == 2
    assert not any(line.startswith("Lines with errors") for line in out)


# ------------------------------------------------------------------ 5. decode messages
@pytest.mark.parametrize("text,want", [
    ('{"id": "abc', "Unterminated string starting at column 8"),
    ('{"id": "a\x01"}', "Invalid control character at column 10"),
    ('{"id" 1}', "Expecting ':' delimiter at column 7"),
])
def test_a_json_decode_error_says_at_column_once(text, want):
    with pytest.raises(json.JSONDecodeError) as e:
        json.loads(text)
    assert json_error(e.value) == want


def test_a_truncated_fixture_names_the_column_without_a_doubled_at(capsys, tmp_path):
    f = tmp_path / "t.jsonl"
    f.write_text('{"id": "a", "source": "s", "command": "convfp16 -n 1\n')
    status, out, err = run_cli(capsys, "replay", f)
    assert status == 2 and out == [] and len(err) == 1, (out, err)
    assert "t.jsonl:1: not valid JSON (Unterminated string starting at column 39); allowed: " in err[0], err
    with pytest.raises(fx.FixtureError, match=r"t\.jsonl:1: not valid JSON \(a number of more than \d+ digits\)"):
        f.write_text('{"id": "a", "source": "s", "command": "c", "x": ' + "1" * 5000 + "}\n")
        fx.load_file(f)


# ------------------------------------------------------------------ --csv onto standard output
@pytest.mark.parametrize("path", ["-", "/dev/stdout", "/dev/fd/1"])
@pytest.mark.parametrize("command", ["batch", "tune", "campaign"])
def test_a_csv_onto_standard_output_is_refused_before_any_work(capsys, tmp_path, command, path):
    """stdout carries each command's report (and --json's one object): a CSV there would
    interleave with it. Refused in one line naming --csv, the path and what is allowed, exit
    2, before a line runs; the same command with a file path writes it."""
    lines = tmp_path / "lines.txt"
    lines.write_text(f"{SMALL} {NHWC3}\n")
    argv = {"batch": ["batch", lines, "--backend", "cpu"],
            "tune": ["tune", *SMALL.split(), *NHWC3.split(), "--backend", "cpu", "--max-configs", "2",
                     "--no-perfdb"],
            "campaign": ["tune", "--file", lines, "--backend", "cpu", "--max-configs", "2", "--no-perfdb",
                         "--results", tmp_path / "log.jsonl"]}[command]
    status, out, err = run_cli(capsys, *argv, "--csv", path)
    assert status == 2 and out == [] and len(err) == 1, (out, err)
    assert err[0].startswith(f"dgrad-driver: error: --csv {path}: standard output carries the ")
    assert err[0].endswith("; allowed: a file path, or /dev/stderr")
    assert not (tmp_path / "log.jsonl").exists()
    status, _, _ = run_cli(capsys, *argv, "--csv", tmp_path / "rows.csv")
    assert status == 0 and (tmp_path / "rows.csv").read_text().count("\n") >= 2
