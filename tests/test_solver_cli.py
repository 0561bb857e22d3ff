"""``applicable`` and ``config`` through click's CliRunner: the same answers as Python for
every line of tests/data/commands.txt, exit codes 0/1/2, one-line errors."""

import json
import shlex

import pytest
from click.testing import CliRunner

from driver.solver_cmds import applicable_cmd, config_cmd, split_own_options
from miopen_solver import SOLVER_NAME
from miopen_solver.applicability import launch_problem
from miopen_solver.command import parse
from miopen_solver.config import KernelSchedule
from miopen_solver.perfdb import ENV_VAR, PerfDb
from miopen_solver.solver import DgradSolver
from miopen_solver.spec import PerfConfig, launch_spec, make_spec
from miopen_solver.target import get_target
from test_applicability import COMMANDS, expected_codes

SUITE_LINE = ("convfp16 -n 32 -c 64 -H 56 -W 56 -k 64 -y 3 -x 3 -p 1 -q 1 -u 1 -v 1 -l 1 -j 1 -g 1 -F 2 "
              "--in_layout NHWC --out_layout NHWC --fil_layout NHWC")
NCHW_LINE = "conv -n 2 -c 256 -H 64 -W 64 -k 512 -y 3 -x 3 -p 1 -q 1 -u 1 -v 1 -l 1 -j 1 -m conv -g 1 -t 1 -F 2 -V 1"
CHWN_LINE = NCHW_LINE + " --in_layout CHWN --out_layout CHWN --fil_layout CHWN"
SOLVER = DgradSolver()


@pytest.fixture(autouse=True)
def _isolated_perfdb(monkeypatch, tmp_path):
    """No test reads or writes the user's real perf-db."""
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "perfdb.sqlite"))


def run(cmd, args):
    result = CliRunner().invoke(cmd, args)
    assert result.exit_code in (0, 1, 2), result.output
    return result


def one_line_error(result):
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dgrad-driver: error: ") and "Traceback" not in result.stderr
    return lines[0]


# ------------------------------------------------------------------ every data line
@pytest.mark.parametrize("arch", ["gfx942", "sm_90"])
@pytest.mark.parametrize("label,cmd,codes", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_applicable_matches_python(label, cmd, codes, arch):
    r = run(applicable_cmd, shlex.split(cmd) + ["--arch", arch, "--json"])
    doc = json.loads(r.stdout)
    dc = parse(cmd, allow_any_direction=True)
    verdict = SOLVER.is_applicable(dc.problem, get_target(arch), forw=dc.flags["forw"])
    assert {k: doc[k] for k in ("applicable", "reasons", "notes")} == verdict.as_dict()
    assert tuple(x["code"] for x in doc["reasons"]) == expected_codes(codes, arch)
    assert doc["arch"] == arch and doc["solver"] == SOLVER_NAME and doc["problem_key"] == dc.problem.problem_key()
    assert r.exit_code == (0 if verdict.ok else 1)
    text = run(applicable_cmd, shlex.split(cmd) + ["--arch", arch])
    assert text.exit_code == r.exit_code
    assert text.stdout.startswith(f"{SOLVER_NAME} on {arch}: {'applicable' if verdict.ok else 'not applicable'}")
    for reason in verdict.reasons:
        assert f"  {reason.code}: {reason.message}" in text.stdout


@pytest.mark.parametrize("arch", ["gfx942", "sm_90"])
@pytest.mark.parametrize("label,cmd,codes", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_config_matches_python(label, cmd, codes, arch):
    dc = parse(cmd, allow_any_direction=True)
    r = run(config_cmd, shlex.split(cmd) + ["--arch", arch, "--json"])
    if dc.flags["forw"] != 2:
        one_line_error(r)                      # config needs a backward-data line
        return
    doc = json.loads(r.stdout)
    t = get_target(arch)
    if expected_codes(codes, arch):
        assert r.exit_code == 1 and doc["applicable"] is False
        return
    assert r.exit_code == 0 and doc["source"] == "default"
    launch = launch_problem(dc.problem)                  # one launch of a split batch
    spec = launch_spec(launch, t, SOLVER.get_default_performance_config(dc.problem, t))
    sol = SOLVER.find_solution(dc.problem, t, perfdb=None, resolve_split_k=False)
    assert doc["kernel_name"] == sol.kernel_name                  # +transpose_* for NCHW tensors
    assert doc["workspace_bytes"] == doc["launch"]["workspace_bytes"] == sol.workspace_bytes
    want = spec.as_dict()
    want["kernel_workspace_bytes"] = want.pop("workspace_bytes")  # the NHWC kernel's own share
    assert doc["spec"] == want
    assert doc["layout_transforms"] == sol.as_dict()["layout_transforms"]
    assert doc["launch"]["grid"] == list(spec.grid)      # G along y for GEMM kernels; direct: x only
    assert doc["split_n"] == {"images": dc.problem.N, "images_per_launch": launch.N,
                              "launches": dc.problem.N // launch.N}


# ------------------------------------------------------------------ options and forms
def test_options_before_after_and_inline():
    line = shlex.split(SUITE_LINE)
    forms = [["--arch", "sm_90", "--json"] + line, line + ["--arch", "sm_90", "--json"],
             line[:5] + ["--arch=sm_90"] + line[5:] + ["--json"], [SUITE_LINE + " --arch sm_90 --json"],
             ["./bin/MIOpenDriver"] + line + ["--json", "--arch", "sm_90"]]
    docs = [json.loads(run(applicable_cmd, f).stdout) for f in forms]
    assert all(d == docs[0] for d in docs) and docs[0]["arch"] == "sm_90" and docs[0]["applicable"]


def test_default_arch_is_gfx942():
    assert json.loads(run(applicable_cmd, shlex.split(SUITE_LINE) + ["--json"]).stdout)["arch"] == "gfx942"


def test_split_own_options():
    rest, opts = split_own_options(["conv", "-n", "2", "--arch", "sm_90", "--perf-config=1,2", "--json"])
    assert rest == ["conv", "-n", "2"] and opts == {"arch": "sm_90", "perf-config": "1,2", "json": True}


@pytest.mark.parametrize("forw", ["1", "4", "5"])
def test_forward_line_is_a_direction_verdict(forw):
    """A line asking for another direction is answered, and the key it shows is said to be
    its backward-data problem's (MIOpen keys a forward problem differently: direction F)."""
    r = run(applicable_cmd, shlex.split(SUITE_LINE.replace("-F 2", f"-F {forw}")))
    assert r.exit_code == 1 and f"  DIRECTION: -F {forw} asks for " in r.stdout
    key = parse(shlex.split(SUITE_LINE)).problem.problem_key()
    assert f"problem key of its backward-data problem (-F 2): {key}\n" in r.stdout
    assert "\nproblem key: " not in r.stdout
    assert f"\nproblem key: {key}\n" in run(applicable_cmd, shlex.split(SUITE_LINE)).stdout


def test_not_applicable_exit_1_lists_all_reasons():
    r = run(applicable_cmd, shlex.split(CHWN_LINE.replace("-F 2", "-F 4")) + ["--arch", "sm_90", "--json"])
    assert r.exit_code == 1
    assert [x["code"] for x in json.loads(r.stdout)["reasons"]] == ["DIRECTION", "LAYOUT"]
    for arch in ("cpu", "sm_90", "gfx942"):          # NCHW: applicable everywhere (transposes)
        assert run(applicable_cmd, shlex.split(NCHW_LINE) + ["--arch", arch]).exit_code == 0


def test_depthwise_note_in_text():
    line = SUITE_LINE.replace("-g 1", "-g 64")
    r = run(applicable_cmd, shlex.split(line))
    assert r.exit_code == 0 and "  note DEPTHWISE:" in r.stdout


@pytest.mark.parametrize("args,needle", [
    ([], "missing the MIOpenDriver line"),
    (shlex.split(SUITE_LINE) + ["--arch", "gfx1100"], "unknown arch 'gfx1100'"),
    (shlex.split(SUITE_LINE) + ["--arch"], "--arch needs a value"),
    (shlex.split(SUITE_LINE) + ["--bogus", "1"], "--bogus"),
    (["convint8", "-n", "1"], "convint8"),
    (shlex.split(SUITE_LINE.replace("-H 56", "-H 0")), "-H"),
    (shlex.split(SUITE_LINE.replace("-g 1", "-g 3")), "-g"),
])
def test_applicable_bad_input_is_one_line_exit_2(args, needle):
    assert needle in one_line_error(run(applicable_cmd, args))


# ------------------------------------------------------------------ config
def test_config_text_and_json_agree():
    j = json.loads(run(config_cmd, shlex.split(SUITE_LINE) + ["--json", "--arch", "sm_90"]).stdout)
    t = run(config_cmd, shlex.split(SUITE_LINE) + ["--arch", "sm_90"])
    assert t.exit_code == 0
    assert t.stdout.splitlines()[0] == f"kernel: {j['kernel_name']}"
    assert f"perf config: {j['perf_config']} (default)" in t.stdout
    assert f"  lds_bytes: {j['spec']['lds_bytes']}" in t.stdout


DW7 = "convfp16 -n 8 -c 96 -H 56 -W 56 -k 96 -y 7 -x 7 -p 3 -q 3 -g 96 -F 2"


@pytest.mark.parametrize("line, extra", [
    (SUITE_LINE, []),                                                                   # wgmma-tma (lists)
    (DW7 + " --in_layout NHWC --out_layout NHWC --fil_layout NHWC", []),                # direct (dicts)
    (DW7, ["--perf-config", "32,16,16,4,1,16,8,2,0,8,1,1,1,14"]),                        # mma body (nested, None)
    ("convfp16 -n 2 -c 3 -H 224 -W 224 -k 768 -y 16 -x 16 -u 16 -v 16 -F 2", []),       # patch GEMM
])
def test_config_text_shows_spec_fields_as_text_not_python_reprs(line, extra):
    """Every spec field of the human ``config`` output is plain text: dicts as key=value pairs,
    lists joined by x, None as '-' (it printed Python reprs: ``{'rows': 16, ...}``, ``None``);
    the JSON keeps the data."""
    t = run(config_cmd, shlex.split(line) + ["--arch", "sm_90"] + extra)
    j = json.loads(run(config_cmd, shlex.split(line) + ["--arch", "sm_90", "--json"] + extra).stdout)
    assert t.exit_code == 0
    fields = [x for x in t.stdout.splitlines() if x.startswith("  ")]
    assert fields and not any(c in x for x in fields for c in ("{", "}", "[", "]", "'", "None", "True,"))
    for key, value in j["spec"].items():
        if isinstance(value, dict):
            assert any(x.startswith(f"  {key}: ") and all(f"{k}=" in x for k in value) for x in fields), key
        elif isinstance(value, list):
            assert f"  {key}: {' x '.join(map(str, value))}" in fields, key
        elif value is None:
            assert f"  {key}: -" in fields, key


def test_config_with_given_perf_config():
    cfg = "64,64,32,2,2,32,32,0,0,0,-1,-1,3"
    r = run(config_cmd, shlex.split(SUITE_LINE) + ["--arch", "sm_90", "--perf-config", cfg, "--json"])
    doc = json.loads(r.stdout)
    spec = make_spec(parse(SUITE_LINE).problem, get_target("sm_90"), PerfConfig.parse(cfg))
    resolved = PerfConfig.parse(cfg).replace(split_k=spec.split_k).serialize()
    assert r.exit_code == 0 and doc["source"] == "given" and doc["perf_config"] == resolved   # as a run shows it
    assert f"Split-K: -1 resolved to {spec.split_k}" in doc["notes"]
    assert doc["spec"]["split_k"] == spec.split_k >= 1           # -1 resolved, never passed on
    assert doc["kernel_name"] == spec.kernel_name


def test_config_invalid_and_malformed_perf_config():
    bad = one_line_error(run(config_cmd, shlex.split(SUITE_LINE) + ["--perf-config", "64,64,32,2,2,32,32,0,0,0,1,1,2"]))
    assert "--perf-config '64,64,32,2,2,32,32,0,0,0,1,1,2': " in bad and "transposing LDS fragment read" in bad
    msg = one_line_error(run(config_cmd, shlex.split(SUITE_LINE) + ["--perf-config", "1,2,x"]))
    assert "field tile_k='x' is not an integer; expected 13" in msg
    msg = one_line_error(run(config_cmd, shlex.split(SUITE_LINE) + ["--perf-config", "1,2,3"]))
    assert "has 3 fields; expected 13" in msg


def test_config_not_applicable_and_strict_direction():
    r = run(config_cmd, shlex.split(CHWN_LINE) + ["--json"])
    assert r.exit_code == 1 and json.loads(r.stdout)["reasons"][0]["code"] == "LAYOUT"
    assert "-F" in one_line_error(run(config_cmd, shlex.split(SUITE_LINE.replace("-F 2", "-F 1"))))


def test_config_reads_the_perfdb(tmp_path, monkeypatch):
    problem = parse(SUITE_LINE).problem
    tuned = "32,32,32,1,2,32,16,0,0,0,1,0,4"
    path = tmp_path / "tuned.sqlite"
    with PerfDb(path) as db:
        db.update(problem.problem_key(), "sm_90", SOLVER_NAME, tuned, 0.1)
    via_flag = json.loads(run(config_cmd, shlex.split(SUITE_LINE) + ["--arch", "sm_90", "--perfdb", str(path),
                                                                     "--json"]).stdout)
    assert via_flag["source"] == "perfdb" and via_flag["perf_config"] == tuned
    monkeypatch.setenv(ENV_VAR, str(path))
    via_env = json.loads(run(config_cmd, shlex.split(SUITE_LINE) + ["--arch", "sm_90", "--json"]).stdout)
    assert via_env["source"] == "perfdb"
    skipped = json.loads(run(config_cmd, shlex.split(SUITE_LINE) + ["--arch", "sm_90", "--no-perfdb",
                                                                    "--json"]).stdout)
    assert skipped["source"] == "default"
    other_arch = json.loads(run(config_cmd, shlex.split(SUITE_LINE) + ["--arch", "gfx942", "--json"]).stdout)
    assert other_arch["source"] == "default"


@pytest.mark.parametrize("value", ["", "  "])
def test_config_takes_an_empty_perfdb_path_as_a_run_does(tmp_path, monkeypatch, value):
    """``--perfdb ''`` is the unusable path a run warns about (and then takes the default):
    config must not fall back to the default perf-db, where a record would answer instead."""
    problem = parse(SUITE_LINE).problem
    path = tmp_path / "tuned.sqlite"
    with PerfDb(path) as db:
        db.update(problem.problem_key(), "sm_90", SOLVER_NAME, "32,32,32,1,2,32,16,0,0,0,1,0,4", 0.1)
    monkeypatch.setenv(ENV_VAR, str(path))          # the default perf-db holds a record
    r = run(config_cmd, shlex.split(SUITE_LINE) + ["--arch", "sm_90", "--perfdb", value, "--json"])
    assert r.exit_code == 0 and json.loads(r.stdout)["source"] == "default"
    assert "--perfdb" in r.stderr and "unusable" in r.stderr and "using the default config" in r.stderr


@pytest.mark.parametrize("typed", ["-64,64,32,1,1,64,64,0,0,0,1,-1,3,0", " 64,0,32,1,1,64,64,0,0,0,1,-1,3,0 "])
def test_config_quotes_a_refused_perf_config_as_typed(typed):
    """A perf config that parses but that the solver refuses is quoted as the user typed it
    (not re-serialised: a trailing schedule 0 or spaces stay), as a run quotes it."""
    msg = one_line_error(run(config_cmd, shlex.split(SUITE_LINE) + ["--arch", "sm_90", "--perf-config", typed]))
    assert f"--perf-config {typed!r}:" in msg


@pytest.mark.parametrize("cmd", [config_cmd, applicable_cmd])
def test_a_quoted_line_takes_flags_after_it(cmd):
    """A quoted line followed by more MIOpenDriver flags and our options reads as the same
    line typed unquoted."""
    unquoted = run(cmd, shlex.split(SUITE_LINE) + ["-t", "1", "--arch", "sm_90", "--json"])
    quoted = run(cmd, [SUITE_LINE, "-t", "1", "--arch", "sm_90", "--json"])
    assert unquoted.exit_code == quoted.exit_code == 0 and json.loads(quoted.stdout) == json.loads(unquoted.stdout)


@pytest.mark.parametrize("cmd", [config_cmd, applicable_cmd])
@pytest.mark.parametrize("opt", [["--warmup", "2"], ["--timeout", "5"], ["--ref", "cpu"], ["--print-name-only"]])
def test_a_run_option_is_named_as_one(cmd, opt):
    msg = one_line_error(run(cmd, shlex.split(SUITE_LINE) + opt))
    assert msg.startswith(f"dgrad-driver: error: {opt[0]}: an option of a run") and "unknown flag" not in msg


def test_backend_decides_the_vendor_config_answers_for():
    """Without --arch, --backend cuda answers for the NVIDIA default (a CUDA run never runs
    gfx942); an --arch of the other vendor than --backend cuda/hip is one error line."""
    cuda = json.loads(run(config_cmd, shlex.split(SUITE_LINE) + ["--backend", "cuda", "--json"]).stdout)
    assert cuda["arch"] == "sm_90"
    assert json.loads(run(config_cmd, shlex.split(SUITE_LINE) + ["--json"]).stdout)["arch"] == "gfx942"
    for cmd in (config_cmd, applicable_cmd):
        for backend, arch, vendor in (("hip", "sm_90", "AMD"), ("cuda", "gfx942", "NVIDIA")):
            msg = one_line_error(run(cmd, shlex.split(SUITE_LINE) + ["--backend", backend, "--arch", arch]))
            assert f"--arch {arch} with --backend {backend}" in msg and f"{vendor} targets only" in msg
        assert run(cmd, shlex.split(SUITE_LINE) + ["--backend", "cpu", "--arch", "sm_90"]).exit_code == 0


def test_commands_are_exported_for_registration():
    for cmd, name in ((applicable_cmd, "applicable"), (config_cmd, "config")):
        assert cmd.name == name
        assert cmd.context_settings["ignore_unknown_options"] is True
        assert cmd.context_settings["allow_interspersed_args"] is False


@pytest.mark.parametrize("opt", [["--perf-config", "128,128,64,2,1,64,128,0,0,0,1,-1,4,1"],
                                 ["--perfdb", "x.sqlite"], ["--no-perfdb"], ["--kouter", "off"],
                                 ["--split-k", "2"]])
def test_applicable_refuses_config_options(opt):
    # applicable answers for the problem; it used to accept and ignore these silently
    err = one_line_error(run(applicable_cmd, shlex.split(SUITE_LINE) + ["--arch", "sm_90"] + opt))
    assert err.startswith(f"dgrad-driver: error: {opt[0]}: ") and "use 'config'" in err


def test_config_says_when_it_ignores_a_perfdb_record(tmp_path):
    """A record that does not validate on the asked target (a wgmma config under sm_80) is
    ignored with a note naming it and the reason, as a run says it; the default is used."""
    db_path = tmp_path / "db.sqlite"
    p = parse(SUITE_LINE).problem
    wg = "128,64,64,2,1,64,64,0,0,0,1,-1,4,1"
    with PerfDb(db_path) as db:
        db.update(p.problem_key(), "sm_80", SOLVER_NAME, wg, 1.0)
        db.update(p.problem_key(), "sm_90", SOLVER_NAME, wg, 1.0)
    r = run(config_cmd, shlex.split(SUITE_LINE) + ["--arch", "sm_80", "--perfdb", str(db_path), "--json"])
    doc = json.loads(r.stdout)
    assert r.exit_code == 0 and doc["source"] == "default"
    assert doc["perf_config"] == SOLVER.get_default_performance_config(p, get_target("sm_80")).serialize()
    note = next(n for n in doc["notes"] if n.startswith(f"Ignoring perf-db config {wg} from {db_path}: "))
    assert "needs warpgroup MMA" in note and r.stderr == ""
    r = run(config_cmd, shlex.split(SUITE_LINE) + ["--arch", "sm_90", "--perfdb", str(db_path), "--json"])
    assert r.exit_code == 0 and json.loads(r.stdout)["source"] == "perfdb" and r.stderr == ""


PW256 = ("convfp16 -n 32 -c 256 -H 56 -W 56 -k 64 -y 1 -x 1 -p 0 -q 0 -F 2 "
         "--in_layout NHWC --out_layout NHWC --fil_layout NHWC")
TMA3X3 = ("convfp16 -n 32 -c 128 -H 28 -W 28 -k 128 -y 3 -x 3 -p 1 -q 1 -F 2 "
          "--in_layout NHWC --out_layout NHWC --fil_layout NHWC")


def test_config_previews_the_run_settings():
    """config takes --kouter/--split-k as a run does and shows the same fallback note, so a
    user can see what a run will launch (second review)."""
    line = shlex.split(TMA3X3)
    dflt = DgradSolver().get_default_performance_config(parse(line).problem, get_target("sm_90"))
    # the TMA default splits K into at most its shortest sub-GEMM's 18 k-tiles (3 chunks of 2
    # x 9 taps): --split-k 32 falls back to the plain warpgroup form, grid z 32
    assert dflt.schedule is KernelSchedule.WGMMA_TMA
    r = run(config_cmd, line + ["--arch", "sm_90", "--no-perfdb", "--split-k", "32", "--json"])
    doc = json.loads(r.stdout)
    assert r.exit_code == 0 and doc["perf_config"] == dflt.replace(schedule=KernelSchedule.WGMMA, split_k=32).serialize()
    assert doc["notes"][0].startswith(f"--split-k 32: not possible with the warpgroup-MMA default {dflt.serialize()}")
    assert doc["spec"]["split_k"] == 32 and doc["launch"]["grid"][2] == 32
    # one it can run stays on TMA: work units, grid z 1
    r = run(config_cmd, line + ["--arch", "sm_90", "--no-perfdb", "--split-k", "2", "--json"])
    doc = json.loads(r.stdout)
    assert r.exit_code == 0 and doc["perf_config"] == dflt.replace(split_k=2).serialize()
    assert doc["spec"]["split_k"] == 2 and doc["launch"]["grid"][2] == 1
    r = run(config_cmd, shlex.split(PW256) + ["--arch", "sm_90", "--no-perfdb", "--kouter", "off"])
    assert r.exit_code == 0 and "note: --kouter off: not possible" in r.stdout and "mma16816" in r.stdout
    # a given config keeps the setting as asked: it is not valid, bad input (exit 2) as in a run
    r = run(config_cmd, shlex.split(PW256) + ["--arch", "sm_90", "--kouter", "off", "--perf-config",
                                             "128,256,64,2,1,64,256,0,0,0,1,-1,3,2"])
    assert "lds_k_outer must be -1 or 1" in one_line_error(r)


@pytest.mark.parametrize("opt,needle", [(["--kouter", "maybe"], "--kouter maybe: allowed: auto, on, off"),
                                        (["--split-k", "x"], "--split-k x: allowed: -1 (choose)"),
                                        (["--split-k", "0"], "--split-k 0: allowed: -1 (choose)"),
                                        (["--split-k", "65"], "--split-k 65: allowed")])
def test_config_settings_bad_values(opt, needle):
    err = one_line_error(run(config_cmd, shlex.split(PW256) + ["--arch", "sm_90"] + opt))
    assert needle in err


@pytest.mark.parametrize("cmd", [applicable_cmd, config_cmd])
@pytest.mark.parametrize("value,ok", [("-1", True), ("0", True), ("1000", True), ("200", True), ("ConvDgradImplicitGemmTilde", True),
                                      ("7", False), ("bogus", False)])
def test_solution_flag_is_checked_like_a_run(cmd, value, ok):
    # third review: applicable/config accepted any -S while run and tune refused it
    r = run(cmd, shlex.split(SUITE_LINE) + ["--arch", "cpu", "-S", value])
    if ok:
        assert r.exit_code in (0, 1)
    else:
        err = one_line_error(r)
        assert f"-S '{value}': not a solution of this solver" in err


def test_config_names_the_config_the_solver_refused():
    """An invalid request names the config the solver refused (the direct default the
    setting was put on), not a default it never tried; like a run, it is bad input: one
    error line, exit 2, nothing on stdout (--json too)."""
    line = ("convfp16 -n 2 -c 32 -H 14 -W 14 -k 32 -y 3 -x 3 -p 1 -q 1 -g 32 -F 2 "
            "--in_layout NHWC --out_layout NHWC --fil_layout NHWC")
    p, t = parse(line).problem, get_target("sm_90")
    default = SOLVER.get_default_performance_config(p, t)
    r = run(config_cmd, shlex.split(line) + ["--arch", "sm_90", "--split-k", "2", "--split-k-reduce", "atomic",
                                             "--no-perfdb", "--json"])
    err = one_line_error(r)
    assert err.startswith(f"dgrad-driver: error: --split-k 2 --split-k-reduce atomic: not possible with the direct "
                          f"default {default.serialize()} (")
    assert "needs an even cpg" in err and err.endswith("(on sm_90)")
    # without asking for atomics: the warp-MMA default splits through the workspace
    r = run(config_cmd, shlex.split(line) + ["--arch", "sm_90", "--split-k", "2", "--no-perfdb", "--json"])
    doc = json.loads(r.stdout)
    assert r.exit_code == 0 and doc["split_k_reduce"]["mode"] == "workspace" and "_skws_" in doc["kernel_name"]


@pytest.mark.parametrize("where", ["after the line", "before the line"])
def test_config_takes_a_runs_backend_and_reads_the_records_that_run_would(tmp_path, where):
    """A run line pastes into config as it is: --backend cpu with --arch sm_90 reads the
    sm_90@cpu record (what such a run reads and tune writes), without it the sm_90 one; no
    device is opened either way."""
    problem = parse(SUITE_LINE).problem
    path = tmp_path / "p.sqlite"
    cpu_cfg, gpu_cfg = "32,32,32,1,2,32,16,0,0,0,1,0,4", "64,64,32,2,2,32,32,0,0,0,1,-1,3"
    with PerfDb(path) as db:
        db.update(problem.problem_key(), "sm_90@cpu", SOLVER_NAME, cpu_cfg, 1.0)
        db.update(problem.problem_key(), "sm_90", SOLVER_NAME, gpu_cfg, 0.5)
    for backend, want in (("cpu", cpu_cfg), ("cuda", gpu_cfg), ("auto", gpu_cfg), (None, gpu_cfg)):
        own = ["--arch", "sm_90", "--perfdb", str(path), "--json"] + (["--backend", backend] if backend else [])
        args = shlex.split(SUITE_LINE) + own if where == "after the line" else own + shlex.split(SUITE_LINE)
        r = run(config_cmd, args)
        doc = json.loads(r.stdout)
        assert r.exit_code == 0 and doc["source"] == "perfdb" and doc["perf_config"] == want, (backend, doc)


@pytest.mark.parametrize("where", ["after the line", "before the line"])
def test_config_with_backend_cpu_and_no_arch_answers_for_the_runs_cpu_target(tmp_path, where):
    """A run with --backend cpu and no --arch runs the cpu target and reads the records
    filed under cpu; the same line pasted into config/applicable answered for gfx942 and read
    gfx942@cpu, showing a kernel and config that run never launches."""
    problem = parse(SUITE_LINE).problem
    path = tmp_path / "p.sqlite"
    tuned = "32,32,32,1,2,32,16,0,0,0,1,0,2"
    with PerfDb(path) as db:
        db.update(problem.problem_key(), "cpu", SOLVER_NAME, tuned, 1.0)          # what tune --backend cpu stores
        db.update(problem.problem_key(), "gfx942@cpu", SOLVER_NAME, "64,64,32,2,2,32,32,0,0,0,1,-1,2", 0.5)
    own = ["--backend", "cpu", "--perfdb", str(path), "--json"]
    args = shlex.split(SUITE_LINE) + own if where == "after the line" else own + shlex.split(SUITE_LINE)
    doc = json.loads(run(config_cmd, args).stdout)
    assert doc["arch"] == "cpu" and doc["source"] == "perfdb" and doc["perf_config"] == tuned, doc
    assert doc["kernel_name"].startswith("dgrad_cpu_")
    doc = json.loads(run(applicable_cmd, shlex.split(SUITE_LINE) + ["--backend", "cpu", "--json"]).stdout)
    assert doc["arch"] == "cpu"
    for backend, arch in (("auto", "gfx942"), ("cuda", "sm_90"), ("hip", "gfx942")):  # no device is opened:
        doc = json.loads(run(config_cmd, shlex.split(SUITE_LINE) + ["--backend", backend, "--json"]).stdout)
        assert doc["arch"] == arch, backend                                           # the vendor's default


@pytest.mark.parametrize("cmd,switch", [(config_cmd, "--json"), (config_cmd, "--no-perfdb"),
                                        (applicable_cmd, "--json")])
def test_a_switch_given_a_value_is_one_line_naming_it(cmd, switch):
    """``--json=1`` was refused as if --json were a MIOpenDriver flag taking a value
    (``allowed: --json VALUE (space-separated)``); it is one of our switches."""
    msg = one_line_error(run(cmd, shlex.split(SUITE_LINE) + [f"{switch}=1"]))
    assert msg == f"dgrad-driver: error: {switch}=1: {switch} takes no value; allowed: {switch} alone"


@pytest.mark.parametrize("cmd", [config_cmd, applicable_cmd])
def test_a_bad_backend_is_one_line_and_exit_2(cmd):
    assert run(cmd, shlex.split(SUITE_LINE) + ["--backend", "cpu"]).exit_code == 0
    msg = one_line_error(run(cmd, shlex.split(SUITE_LINE) + ["--backend", "gpu"]))
    assert "--backend 'gpu': allowed: auto, cpu, cuda, hip" in msg
