"""``dgrad-driver replay``: table and summary, exit codes 0/1/2, one-line errors,
``--only``, ``--update-golden`` with its diff, GPU-backend guards, registration in the CLI.

Fixture files here are built in a temporary directory from records computed now, so the
tests do not depend on the committed golden being current.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

import driver.replay_cmd as replay_mod
from driver.cli import main
from driver.replay_cmd import replay_cmd
from miopen_solver import fixtures as fx
from miopen_solver.errors import RuntimeUnavailable

NHWC3 = "--in_layout NHWC --out_layout NHWC --fil_layout NHWC"
LINES = {
    "tiny_fp16": f"convfp16 -n 1 -c 8 -H 1 -W 7 -k 4 -y 1 -x 3 -p 0 -q 0 -u 1 -v 1 -l 1 -j 1 -g 1 -F 2 {NHWC3}",
    "s2_nchw_fp32": "conv -n 4 -c 16 -H 9 -W 9 -k 8 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 -l 1 -j 1 -g 1 -F 2",
    "int8": f"convint8 -n 2 -c 8 -H 8 -W 8 -k 8 -y 3 -x 3 -F 2 {NHWC3}",
}
GOLDEN = {k: fx.compute(v) for k, v in LINES.items()}


def make_dir(tmp_path, expect=None, name="t.jsonl"):
    """A fixture file with the three LINES and their golden (``expect`` overrides per id)."""
    expect = {**GOLDEN, **(expect or {})}
    recs = [fx.Fixture(id=k, source=f"test {k}", command=v, expect=expect[k]) for k, v in LINES.items()]
    fx.write_file(tmp_path / name, recs)
    return tmp_path


def tampered(fid, path, value):
    rec = json.loads(json.dumps(GOLDEN[fid]))
    node = rec
    keys = path.split(".")
    for k in keys[:-1]:
        node = node[k]
    node[keys[-1]] = value
    return {fid: rec}


def invoke(*args):
    result = CliRunner().invoke(replay_cmd, [str(a) for a in args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def one_line_error(result, *fragments):
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dgrad-driver: error: "), result.stderr
    for f in fragments:
        assert f in lines[0], lines[0]
    assert "Traceback" not in result.output
    return lines[0]


def test_all_passed(tmp_path):
    r = invoke(make_dir(tmp_path))
    assert r.exit_code == 0, r.output
    rows = r.stdout.splitlines()
    assert rows[0].split() == ["FIXTURE", "STATUS", "SEC", "WHAT", "CHANGED"]
    assert [row.split()[:2] for row in rows[1:4]] == [["tiny_fp16", "passed"], ["s2_nchw_fp32", "passed"],
                                                      ["int8", "passed"]]
    assert "replayed 3 fixtures from 1 file(s) on cpu" in r.stdout
    assert "3 passed, 0 drifted, 0 failed" in r.stdout


def test_a_moved_kernel_name_is_a_drift_with_old_and_new(tmp_path):
    old = GOLDEN["tiny_fp16"]["targets"]["sm_90"]["kernel_name"]
    r = invoke(make_dir(tmp_path, tampered("tiny_fp16", "targets.sm_90.kernel_name", old + "_old")))
    assert r.exit_code == 1
    row = next(line for line in r.stdout.splitlines() if line.startswith("tiny_fp16"))
    assert row.split()[1] == "drifted"
    assert "targets.sm_90.kernel_name: " in row and "_old -> " in row
    assert "1 drifted" in r.stdout and "moved: targets.sm_90.kernel_name (1)" in r.stdout
    assert f"dgrad-driver replay {tmp_path} --update-golden" in r.stdout     # the path given, not fixtures/


def test_only_kernel_text_moved_says_regenerate(tmp_path):
    r = invoke(make_dir(tmp_path, tampered("tiny_fp16", "targets.gfx942.source_sha256", "0" * 64)))
    assert r.exit_code == 1
    assert "targets.gfx942.source_sha256: 000000000000 -> " in r.stdout
    assert "a kernel text (miopen_solver/kernels/*.cu) changed" in r.stdout
    assert f"regenerate the golden with: dgrad-driver replay {tmp_path} --update-golden" in r.stdout


def test_numeric_regression_fails_and_improvement_drifts(tmp_path):
    rms = GOLDEN["s2_nchw_fp32"]["numerics"]["rms_error"]
    r = invoke(make_dir(tmp_path, tampered("s2_nchw_fp32", "numerics.rms_error", fx.round_sig(rms / 10))))
    assert r.exit_code == 1
    row = next(line for line in r.stdout.splitlines() if line.startswith("s2_nchw_fp32"))
    assert row.split()[1] == "failed" and "numerics regressed" in row
    assert "fix it (--update-golden never writes a failed fixture)" in r.stdout
    r = invoke(make_dir(tmp_path, tampered("s2_nchw_fp32", "numerics.rms_error", fx.round_sig(rms * 10))))
    assert r.exit_code == 1
    assert "numerics.rms_error: " in r.stdout and "(outside the band: x4.0 of the golden)" in r.stdout


def test_verification_failure_is_reported(tmp_path, monkeypatch):
    real = fx.numerics_record

    def wrong(problem, engine, perf_config=None):
        rec = real(problem, engine, perf_config)
        if "ok" in rec:
            rec.update(ok=False, rms_error=0.5)
        return rec
    monkeypatch.setattr(fx, "numerics_record", wrong)
    r = invoke(make_dir(tmp_path))
    assert r.exit_code == 1
    row = next(line for line in r.stdout.splitlines() if line.startswith("tiny_fp16"))
    assert "failed" in row and "FAIL numerics do not verify: rms error 0.5 >= tolerance 0.082" in row


def test_only_selects_and_unmatched_is_bad_input(tmp_path):
    d = make_dir(tmp_path)
    r = invoke(d, "--only", "*fp*")
    assert r.exit_code == 0 and "replayed 2 fixtures" in r.stdout
    r = invoke(d, "--only", "int8")
    assert r.exit_code == 0 and "replayed 1 fixtures" in r.stdout
    err = one_line_error(invoke(d, "--only", "nothing*"), "--only 'nothing*': no fixture id matches")
    assert "allowed: a substring of a fixture id, or a shell pattern" in err
    for empty in ("", " "):         # matched every fixture, as if --only were not given
        err = one_line_error(invoke(d, "--only", empty), f"--only {empty!r}: an empty pattern")
        assert err.endswith("or no --only for every fixture")


def test_update_golden_rewrites_and_prints_what_moved(tmp_path):
    old = GOLDEN["tiny_fp16"]["targets"]["sm_90"]["perf_config"]
    d = make_dir(tmp_path, tampered("tiny_fp16", "targets.sm_90.perf_config", "1,2,3"))
    path = d / "t.jsonl"
    r = invoke(d, "--update-golden")
    assert r.exit_code == 0, r.output
    assert "updated the golden of 1 fixture(s):" in r.stdout
    assert f"tiny_fp16 ({path}:1)" in r.stdout
    assert f"targets.sm_90.perf_config: 1,2,3 -> {old}" in r.stdout
    assert "1 updated, 0 failed, 2 unchanged" in r.stdout
    assert fx.load(path)[0].expect == GOLDEN["tiny_fp16"]
    assert invoke(d).exit_code == 0
    r = invoke(d, "--update-golden")
    assert r.exit_code == 0 and "golden up to date" in r.stdout and "nothing moved" in r.stdout


def test_update_golden_writes_a_new_fixture_and_keeps_failures(tmp_path):
    d = make_dir(tmp_path)
    path = d / "t.jsonl"
    recs = fx.load(path)
    bad_rms = fx.round_sig(GOLDEN["s2_nchw_fp32"]["numerics"]["rms_error"] / 10)
    bad = tampered("s2_nchw_fp32", "numerics.rms_error", bad_rms)["s2_nchw_fp32"]
    fx.write_file(path, [recs[0].with_expect(None), recs[1].with_expect(bad), recs[2]])
    r = invoke(d, "--update-golden")
    assert r.exit_code == 1
    assert "tiny_fp16" in r.stdout and "no golden yet" in r.stdout
    assert "NOT updated, 1 fixture(s) failed" in r.stdout and "numerics regressed" in r.stdout
    now = fx.load(path)
    assert now[0].expect == GOLDEN["tiny_fp16"] and now[1].expect == bad


def test_bad_input_is_one_line_exit_2(tmp_path):
    one_line_error(invoke(tmp_path / "missing.jsonl"), "missing.jsonl: no such fixture file or directory")
    one_line_error(invoke(tmp_path), "no *.jsonl fixture files")
    (tmp_path / "bad.jsonl").write_text(fx.dumps({"id": "a", "source": "s", "command": "c"}) + "\n{oops\n")
    one_line_error(invoke(tmp_path / "bad.jsonl"), "bad.jsonl:2: not valid JSON")
    one_line_error(invoke(tmp_path, "--update-golden", "--backend", "cuda"),
                   "--update-golden needs --backend cpu")


def test_unavailable_backend_is_one_line_exit_2(tmp_path, monkeypatch):
    def no_gpu(backend, timeout):
        raise RuntimeUnavailable("no NVIDIA GPU found: cuInit returned CUDA_ERROR_NO_DEVICE")
    monkeypatch.setattr(replay_mod, "WorkerNumerics", no_gpu)
    one_line_error(invoke(make_dir(tmp_path), "--backend", "cuda"), "no NVIDIA GPU found")


def test_failures_only_lists_only_what_did_not_pass(tmp_path):
    r = invoke(make_dir(tmp_path, tampered("int8", "parse_error.flag", "-F")), "--failures-only")
    assert r.exit_code == 1
    rows = [line.split()[0] for line in r.stdout.splitlines()[1:] if line and not line.startswith(" ")]
    assert rows[0] == "int8" and "tiny_fp16" not in rows
    assert "parse_error.flag: -F -> <base>" in r.stdout


def test_registered_in_dgrad_driver(tmp_path, capsys):
    d = make_dir(tmp_path)
    assert main(["replay", str(d), "--only", "tiny"]) == 0
    assert "1 passed, 0 drifted, 0 failed" in capsys.readouterr().out
    assert main(["replay", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no such fixture file or directory" in err[0]


def test_default_path_is_fixtures(tmp_path, monkeypatch):
    (tmp_path / "fixtures").mkdir()
    make_dir(tmp_path / "fixtures")
    monkeypatch.chdir(tmp_path)
    r = invoke("--only", "int8")
    assert r.exit_code == 0 and "from 1 file(s)" in r.stdout


@pytest.mark.parametrize("expected,actual,shown", [
    ("dgrad_sm_90_fp16_t64x16x32_w2x1_a32x16_mma16816_v4v8v8_sk1_ko_s3_tilde1_n1c8h1w7",
     "dgrad_sm_90_fp16_t128x8x16_w4x1_a32x8_mma16816_v4v1v8_sk1_ko_s1_tilde1_n1c8h1w7",
     "..._fp16_t64x16x32_w2x1_a32x16_mma16816_v4v8v8_sk1_ko_s3_tilde1_... -> "
     "..._fp16_t128x8x16_w4x1_a32x8_mma16816_v4v1v8_sk1_ko_s1_tilde1_..."),
    ("short", "other", "short -> other"),
])
def test_long_values_are_cut_to_where_they_differ(expected, actual, shown):
    assert replay_mod._show_pair(expected, actual, "targets.sm_90.kernel_name") == shown


@pytest.mark.parametrize("path,value,why", [
    ("targets", [], "expect.targets must be a JSON object, got a list"),
    ("targets.sm_90", "x", "expect.targets.sm_90 must be a JSON object, got a string"),
    ("targets.sm_90.grid", "1,2,3", "expect.targets.sm_90.grid must be a list of 3 integers >= 1, got a string"),
    ("targets.sm_90.grid", [1, "2", 3], "expect.targets.sm_90.grid must be a list of 3 integers >= 1, got [1, \"2\", 3]"),
    ("targets.sm_90.grid", [1, 2], "expect.targets.sm_90.grid must be a list of 3 integers >= 1, got [1, 2]"),
    ("targets.sm_90.grid", [1, 0, 1], "expect.targets.sm_90.grid must be a list of 3 integers >= 1, got [1, 0, 1]"),
    ("targets.sm_90.block", True, "expect.targets.sm_90.block must be an integer >= 1, got a boolean"),
    ("targets.sm_90.block", 0, "expect.targets.sm_90.block must be an integer >= 1, got 0"),
    ("targets.sm_90.shared_bytes", -5, "expect.targets.sm_90.shared_bytes must be an integer >= 0, got -5"),
    ("targets.sm_90.source_sha256", "abc", "expect.targets.sm_90.source_sha256 must be 64 lower-case hex digits, "
                                           "got \"abc\""),
    ("numerics.nonfinite", -1, "expect.numerics.nonfinite must be an integer >= 0, got -1"),
    ("targets.sm_90.applicable", 1, "expect.targets.sm_90.applicable must be true or false, got a number"),
    ("targets.sm_90.reasons", [None], "expect.targets.sm_90.reasons[0] must be a string, got null"),
    ("numerics", [1], "expect.numerics must be a JSON object, got a list"),
    ("numerics.rms_error", "small", "expect.numerics.rms_error must be a finite number >= 0, got a string"),
    ("numerics.tolerance", {"a": 1}, "expect.numerics.tolerance must be a finite number >= 0, got an object"),
    ("problem_key", 5, "expect.problem_key must be a string, got a number"),
    ("surprise", 1, "unknown key expect.surprise; allowed: parse_error, problem_key, targets, numerics"),
    ("targets.sm_99", {"applicable": False, "reasons": [], "notes": []},
     "unknown key expect.targets.sm_99; allowed: gfx942, sm_90"),
    ("numerics.tolerance", -0.5, "expect.numerics.tolerance must be a finite number >= 0, got -0.5"),
    ("numerics.tolerance", None, "expect.numerics.tolerance must be a finite number >= 0, got null"),
    ("numerics.rms_error", -1, "expect.numerics.rms_error must be a finite number >= 0, got -1"),
])
def test_malformed_golden_is_one_line_exit_2(tmp_path, path, value, why):
    """A golden of the wrong shape is refused when the file is loaded (it gave tracebacks
    and exit 1 from deep inside the comparison)."""
    make_dir(tmp_path, tampered("tiny_fp16", path, value) if "." in path or path in GOLDEN["tiny_fp16"]
             else {"tiny_fp16": {**GOLDEN["tiny_fp16"], path: value}})
    one_line_error(invoke(tmp_path / "t.jsonl"), f"t.jsonl:1: {why}")


CFG = "64,64,32,2,2,32,32,0,0,0,1,-1,2"


@pytest.mark.parametrize("value,why", [
    ("garbage", "perf config field tile_m='garbage' is not an integer; expected 13 to 15 "
                "comma-separated integers: tile_m,"),
    ("1,2,3", "perf config has 3 fields; expected 13 to 15: tile_m,"),
    (CFG + ",0,0,0", "perf config has 16 fields; expected 13 to 15"),
    (CFG.replace("64", "2147483648", 1), "perf config field tile_m=2147483648 is out of range; allowed: an integer "
                                         "from -2147483648 to 2147483647"),
    (CFG + ",99", "perf config field schedule=99 is not a kernel schedule; allowed: 0 (warp-mma), "),
    (CFG + ",0,7", "perf config field split_k_reduce=7 is not a split-K reduction; allowed: 0 (auto), 1 (atomic), "
                   "2 (workspace)"),
    (" " + CFG, "perf config field tile_m=' 64' is not an integer"),
    (CFG.replace(",", ", "), "perf config field tile_n=' 64' is not an integer"),
    ("", "perf_config must be a non-empty string (a serialised PerfConfig)"),
    (12, "perf_config must be a non-empty string (a serialised PerfConfig)"),
])
def test_a_malformed_pinned_perf_config_is_one_line_exit_2(tmp_path, value, why):
    """A fixture whose perf_config is not a perf config was replayed and reported as
    ``FAIL PerfConfigError`` with "the code computes wrong results", exit 1: every kind of
    malformed config is now refused when the file is loaded, naming FILE:line, exit 2."""
    f = tmp_path / "t.jsonl"
    good = {"id": "a", "source": "s", "command": LINES["tiny_fp16"]}
    f.write_text(fx.dumps(good) + "\n" + json.dumps({**good, "id": "b", "perf_config": value}) + "\n")
    one_line_error(invoke(f), f"t.jsonl:2: {why}" if why.startswith("perf_config") else
                   f"t.jsonl:2: perf_config {value!r}: {why}")


def test_malformed_parse_error_and_deep_nesting_are_one_line_exit_2(tmp_path):
    f = tmp_path / "t.jsonl"
    f.write_text(fx.dumps({"id": "a", "source": "s", "command": "conv -F 1",
                           "expect": {"parse_error": {"flag": 1, "message": "m", "value": None}}}) + "\n")
    one_line_error(invoke(f), "t.jsonl:1: expect.parse_error.flag must be a string, got a number")
    f.write_text('{"id": "a", "source": "s", "command": "c", "expect": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    one_line_error(invoke(f), "t.jsonl:1: JSON nested too deeply")
    f.write_text('{"id": "a", "source": "s", "command": "c", "expect": {"targets": ' + '{"x": ' * 50 + "1"
                 + "}" * 50 + "}}\n")
    one_line_error(invoke(f), "t.jsonl:1: unknown key expect.targets.x; allowed: gfx942, sm_90")
    f.write_text(fx.dumps({"id": "a", "source": "s", "command": "c", "expect": {"k" * 10_000: 1}}) + "\n")
    one_line_error(invoke(f), "t.jsonl:1: unknown key expect.kkk", "(10007 characters)")


@pytest.mark.parametrize("path,value,why", [
    ("targets.sm_99", {"applicable": False, "reasons": [], "notes": []},
     "unknown key expect.targets.sm_99; allowed: gfx942, sm_90"),
    ("numerics.tolerance", float("nan"), "expect.numerics.tolerance must be a finite number >= 0, got NaN"),
    ("numerics.tolerance", float("inf"), "expect.numerics.tolerance must be a finite number >= 0, got Infinity"),
    ("numerics.rms_error", float("-inf"), "expect.numerics.rms_error must be a finite number >= 0, got -Infinity"),
])
def test_an_unknown_target_or_a_non_finite_tolerance_is_refused_before_update_golden(tmp_path, path, value, why):
    """A golden target name that is not a golden target (``sm_99``) was a drift that
    ``--update-golden`` then dropped without a word; a ``NaN`` tolerance made every rms error
    drift. Both are refused when the file is loaded, as other unknown keys and wrong types
    are: one line, exit 2, the file left as it was."""
    f = tmp_path / "t.jsonl"
    recs = [{"id": k, "source": f"test {k}", "command": v, "expect": GOLDEN[k]} for k, v in LINES.items()]
    recs[0] = {**recs[0], "expect": tampered("tiny_fp16", path, value)["tiny_fp16"]}
    f.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in recs))     # NaN as a file may spell it
    before = f.read_bytes()
    one_line_error(invoke(f), f"t.jsonl:1: {why}")
    one_line_error(invoke(f, "--update-golden"), f"t.jsonl:1: {why}")
    assert f.read_bytes() == before


def test_every_computed_golden_has_the_checked_shape():
    """What update writes, load accepts: parse errors, applicable and not, numerics run or skipped."""
    for line in list(LINES.values()) + ["conv -n 2 -F 1", "convfp16 -n 1 -c 8 -H 4 -W 4 -k 8 -y 1 -x 1 -F 2"]:
        fx.check_expect(fx.compute(line))


def test_files_without_fixtures_are_named_in_one_line(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    blank = tmp_path / "blank.jsonl"
    blank.write_text("\n\n")
    for paths in ([empty], [empty, blank]):
        one_line_error(invoke(*paths), "no fixtures; allowed: fixture files of JSON Lines", *map(str, paths))


@pytest.mark.parametrize("fault", ["read-only file", "read-only link target", "unwritable directory"])
def test_update_golden_refuses_a_file_it_cannot_replace_before_replaying_anything(tmp_path, monkeypatch, fault):
    """``--update-golden`` found a read-only fixture file only when writing, after the whole
    replay, by then having rewritten the files before it (exit 2, an error line without
    what is allowed). Every file of the chosen fixtures is now checked first: one line
    naming --update-golden and the path, exit 2, nothing replayed and no file written."""
    recs = fx.load(make_dir(tmp_path, {**tampered("tiny_fp16", "targets.sm_90.perf_config", "1,2,3"),
                                       **tampered("int8", "parse_error.flag", "-F")}) / "t.jsonl")
    (tmp_path / "t.jsonl").unlink()
    (tmp_path / "sub").mkdir()
    ok, bad = tmp_path / "a.jsonl", tmp_path / "sub" / "b.jsonl"
    fx.write_file(ok, recs[:2])
    fx.write_file(bad, recs[2:])
    if fault == "read-only file":
        bad.chmod(0o444)
    elif fault == "read-only link target":
        target = tmp_path / "target.txt"
        bad.rename(target)
        target.chmod(0o444)
        bad.symlink_to(target)
    else:   # root writes into a 0555 directory: refuse it the way the OS refuses others
        monkeypatch.setattr(replay_mod, "check_writable", _refuse_in(bad))
    before = {p: p.read_bytes() for p in (ok, bad)}
    monkeypatch.setattr(fx, "replay", lambda *a, **k: pytest.fail("replayed before checking the files"))
    one_line_error(invoke(tmp_path, "--update-golden"), f"--update-golden {bad}: ",
                   "allowed: fixture files that can be replaced")
    assert {p: p.read_bytes() for p in before} == before


def _refuse_in(path):
    """A check_writable that refuses ``path`` as a directory without write permission
    refuses it to a user other than root."""
    from miopen_solver.errors import FileError
    from miopen_solver.fileio import check_writable

    def check(p):
        if str(p) == str(path):
            raise FileError(p, "not writable (Permission denied)", "a writable file")
        return check_writable(p)
    return check


@pytest.mark.parametrize("paths", [[""], ["FIXTURE", ""]])
def test_an_empty_path_is_refused_not_read_as_the_working_directory(tmp_path, paths):
    """``Path('')`` is ``.``: an empty argument replayed every *.jsonl under the working
    directory (a stranger's files in /tmp); it is refused as every command refuses ''."""
    real = str(make_dir(tmp_path) / "t.jsonl")
    one_line_error(invoke(*[real if p == "FIXTURE" else p for p in paths]), "'' is empty (no file named)",
                   "allowed: fixture files")


@pytest.mark.parametrize("make,says", [
    (lambda d: d / "missing_dir", "no such fixture file or directory; allowed: fixture files (*.jsonl)"),
    (lambda d: (d / "empty").mkdir() or d / "empty", "no *.jsonl fixture files in this directory; allowed:"),
    (lambda d: (d / "x.jsonl").write_text("{}\n") and d / "x.jsonl", "missing key(s) command, id, source; allowed:"),
    (lambda d: (d / "y.jsonl").write_text("x\n") and d / "y.jsonl", "not valid JSON (Expecting value"),
])
def test_bad_fixture_paths_and_records_say_what_is_allowed(tmp_path, make, says):
    """A fresh-user trial found these four refusals named the path and the fault but not what
    replay takes."""
    err = one_line_error(invoke(str(make(tmp_path))), says)
    assert "allowed: " in err
