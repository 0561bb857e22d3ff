"""Errors a fresh user met: a mistyped subcommand, values misreported in error lines,
huge integers on integer options, a missing -F, a 3-D line, replay's --timeout on the CPU,
and library arguments that were accepted or failed inside."""

from __future__ import annotations

import pytest

from conftest import run_cli
from driver.cli import cli
from miopen_solver.command import BASE_DTYPES, INT_MAX, MAX_LAUNCHES
from miopen_solver.errors import ArgumentError
from miopen_solver.problem import LAYOUTS_2D, LAYOUTS_3D, ConvProblem
from miopen_solver.solver import DgradSolver

LINE = "conv -n 1 -c 4 -H 7 -W 7 -k 4 -y 3 -x 3 -F 2"


def error(capsys, *args) -> str:
    """The one error line of ``dgrad-driver *args`` (exit 2, nothing on stdout)."""
    status, out, err = run_cli(capsys, *args)
    assert status == 2 and out == [] and len(err) == 1, (status, out, err)
    assert err[0].startswith("dgrad-driver: error: ")
    return err[0][len("dgrad-driver: error: "):]


def cut(text: str) -> str:
    """``text`` as a message shows it past 80 characters (60 kept, then its length)."""
    return text if len(text) <= 80 else f"{text[:60]}... ({len(text)} characters)"


# ================================================================ 6: a mistyped subcommand
@pytest.mark.parametrize("args", [["tnue", *LINE.split()], ["bogus-cmd"], ["--bogus"], ["tnue"],
                                  ["tnue " + LINE], ["foo", "--help"], ["search", "-h"]])
def test_an_unknown_first_word_lists_the_subcommands_and_the_bases(capsys, args):
    commands = sorted(cli.commands)
    assert commands == ["applicable", "batch", "config", "perfdb", "replay", "run", "tune"]
    word = args[0].split()[0]
    assert error(capsys, *args) == (f"<base> '{word}': unknown subcommand or base argument; allowed: a subcommand "
                                    f"({', '.join(commands)}) or an MIOpenDriver base ({', '.join(BASE_DTYPES)})")


def test_after_run_the_first_word_is_a_base_only(capsys):
    assert error(capsys, "run", "tnue") == f"<base> 'tnue': unknown base argument; allowed: {', '.join(BASE_DTYPES)}"


# ================================================================ 7a: empty and blank tokens are quoted
@pytest.mark.parametrize("token", ["", " ", " x", "x ", "\t"])
def test_an_empty_or_blank_token_is_shown_quoted(capsys, token):
    assert error(capsys, "conv", "-n", "1", token, "-F", "2") == (
        f"{token!r}: not a flag (values follow their flag); allowed: -<letter> VALUE or --<long_name> VALUE pairs")


# ================================================================ 7b/7c: seconds as typed, cut as every value
SECONDS = [("9" * 100), ("9" * 70), ("9" * 5000), "inf", "abc", ("-" + "1" * 90)]


@pytest.mark.parametrize("value", SECONDS)
def test_timeout_shows_the_value_cut_by_its_own_length(capsys, value):
    assert error(capsys, *LINE.split(), "--timeout", value) == (
        f"--timeout {cut(value)}: allowed: a finite number of seconds > 0 and <= 1e+06")


@pytest.mark.parametrize("value", [v for v in SECONDS if v not in ("9" * 100, "9" * 70)] + ["0", "nan", "-inf"])
def test_time_budget_shows_the_value_typed(capsys, no_workers, value):
    assert error(capsys, "tune", *LINE.split(), "--list", "--time-budget", value) == (
        f"--time-budget {cut(value)}: allowed: a finite number of seconds > 0")


def test_the_timeout_variable_is_cut_by_its_value_length(capsys, monkeypatch, no_workers):
    from driver import workers
    monkeypatch.setenv(workers.TIMEOUT_ENV, "9" * 100)
    assert error(capsys, *LINE.split()) == (
        f"{workers.TIMEOUT_ENV}={cut('9' * 100)}: allowed: a finite number of seconds > 0 and <= 1e+06")


# ================================================================ 7d: huge integers are out of range
COUNT = "allowed: an integer from {low} to %d" % INT_MAX
INT_OPTIONS = [
    (["run", *LINE.split()], "--split-k", "allowed: -1 (choose) or an integer from 1 to 64"),
    (["run", *LINE.split()], "--warmup", f"allowed: an integer from 0 to {MAX_LAUNCHES}"),
    (["tune", *LINE.split(), "--list"], "--top", COUNT.format(low=1)),
    (["tune", *LINE.split(), "--list"], "--verify-top", COUNT.format(low=0)),
    (["tune", *LINE.split(), "--list"], "--csv-top", COUNT.format(low=1)),
    (["tune", *LINE.split(), "--list"], "--max-configs", COUNT.format(low=1)),
    (["batch", "x.txt"], "--batch-size", COUNT.format(low=1)),
    (["batch", "x.txt"], "--iters", f"allowed: an integer from 1 to {MAX_LAUNCHES}"),
    (["batch", "x.txt"], "--max-lines", COUNT.format(low=1)),
    (["perfdb", "name", "--arch", "gfx942"], "--cus", COUNT.format(low=1)),
]


@pytest.mark.parametrize("digits", [11, 100, 4301, 100_000])
@pytest.mark.parametrize("sign", ["", "-", "+"])
@pytest.mark.parametrize("args,flag,allowed", INT_OPTIONS)
def test_a_huge_integer_is_out_of_range(capsys, no_workers, args, flag, allowed, digits, sign):
    value = sign + "9" * digits
    assert error(capsys, *args, flag, value) == f"{flag} {cut(value)}: {allowed}"


@pytest.mark.parametrize("sign", ["", "-"])
def test_a_huge_compile_pool_is_out_of_range(capsys, monkeypatch, no_workers, sign):
    monkeypatch.setattr("os.cpu_count", lambda: 4)
    value = sign + "9" * 5000
    why = "" if sign else "more compile processes than this host has CPUs; "
    assert error(capsys, "tune", "--file", "x.txt", "--compile-pool", value) == (
        f"--compile-pool {cut(value)}: {why}allowed: an integer from 0 (off) to 4 (the CPU count)")


@pytest.mark.parametrize("zeros", [50, 5000])          # also past Python's 4300-digit conversion limit
def test_leading_zeros_do_not_make_an_integer_huge(capsys, no_workers, zeros):
    assert error(capsys, *LINE.split(), "--split-k", "0" * zeros + "65") == (
        "--split-k 65: allowed: -1 (choose) or an integer from 1 to 64")
    assert error(capsys, "tune", *LINE.split(), "--list", "--top", "-" + "0" * zeros) == (
        f"--top 0: {COUNT.format(low=1)}")
    status, out, _ = run_cli(capsys, "tune", *LINE.split(), "--list", "--max-configs", "0" * zeros + "2")
    assert status == 0 and len(out) == 2


# ================================================================ 7e, 7f: a missing -F, a 3-D line
@pytest.mark.parametrize("base", BASE_DTYPES)
def test_a_missing_direction_says_it_was_not_given(capsys, base):
    assert error(capsys, base, "-n", "1", "-c", "4", "-H", "7", "-W", "7", "-k", "4", "-y", "3", "-x", "3") == (
        "-F: not given: MIOpenDriver's default 0 asks for forward, backward data and backward weights "
        "(-F 0 runs all three); allowed: -F 2 (backward data)")


@pytest.mark.parametrize("mode", [["run"], ["tune", "--list"]])
def test_a_3d_line_says_what_is_allowed(capsys, no_workers, mode):
    line = LINE.split() + ["-_", "3", "-!", "4", "-@", "3", "-$", "1", "--backend", "cpu"]
    assert error(capsys, *mode, *line) == ("not applicable on cpu: SPATIAL_DIM: 3-D convolution; this solver is "
                                           "2-D only; allowed: 2-D lines (-_ 2, or no --spatial_dim)")


# ================================================================ 8: replay's --timeout on the CPU
def test_replay_on_the_cpu_says_timeout_is_ignored(capsys):
    status, out, err = run_cli(capsys, "replay", "fixtures", "--only", "no-such-fixture-*", "--timeout", "0.01")
    assert status == 2 and out == []                      # a bad --only: nothing replayed, no note yet
    status, out, err = run_cli(capsys, "replay", "fixtures", "--only", "boo_", "--timeout", "0.01")
    assert out[0] == ("Info: '--timeout 0.01' is ignored with --backend cpu: the CPU numerics run in this process; "
                      "--timeout bounds the verification worker of --backend cuda or hip, per fixture")
    status, out, _ = run_cli(capsys, "replay", "fixtures", "--only", "boo_")
    assert not any(line.startswith("Info:") for line in out)


# ================================================================ 10: library arguments
P = dict(N=1, C=4, Hi=7, Wi=7, K=4, Y=3, X=3)
ALL_LAYOUTS = f"the letters NCHW or NCDHW, each once, in any order and case (e.g. {', '.join(LAYOUTS_2D + LAYOUTS_3D)})"


@pytest.mark.parametrize("field", ["in_layout", "out_layout", "fil_layout"])
@pytest.mark.parametrize("value,shown", [("XYZW", "'XYZW'"), ("", "''"), ("NHWC ", "'NHWC '"), (None, "None (NoneType)"),
                                         ("NCHWN", "'NCHWN'"), ("NCH", "'NCH'"), ("NCDHWW", "'NCDHWW'"), (4, "4"),
                                         (b"NHWC", "b'NHWC' (bytes)")])
def test_a_layout_is_checked_at_construction(field, value, shown):
    with pytest.raises(ArgumentError) as e:
        ConvProblem(**P, **{field: value})
    assert str(e.value) == f"{field} {shown}: allowed: {ALL_LAYOUTS}"


@pytest.mark.parametrize("value", LAYOUTS_2D + LAYOUTS_3D + ("HWNC", "DNHWC"))
def test_a_layout_in_any_case_is_kept_in_upper_case(value):
    for given in (value, value.lower(), value.title()):
        p = ConvProblem(**P, in_layout=given, out_layout=given, fil_layout=given)
        assert (p.in_layout, p.out_layout, p.fil_layout) == (value,) * 3


@pytest.mark.parametrize("value,shown", [("bogus", "'bogus'"), (None, "None (NoneType)"), ("NCDHW", "'NCDHW'"),
                                         ("", "''"), (7, "7")])
def test_stored_as_names_the_layouts_of_the_problems_rank(value, shown):
    with pytest.raises(ArgumentError) as e:
        ConvProblem(**P).stored_as(value)
    assert str(e.value) == (f"layout {shown}: allowed: the letters NCHW, each once, in any order and case "
                            f"(e.g. NCHW, NHWC, CHWN)")
    assert ConvProblem(**P).stored_as("nchw") and not ConvProblem(**P).stored_as("nhwc")


@pytest.mark.parametrize("kw,message", [
    (dict(perfdb_arch=""), "perf-db arch '': allowed: a non-empty string without any of '=;:' (MIOpen's record "
                           "separators), surrounding whitespace or control characters"),
    (dict(perf_config="1,2", perf_config_label=None), "perf_config_label None (NoneType): allowed: a non-empty string"),
    (dict(perf_config_label=""), "perf_config_label '': allowed: a non-empty string"),
    (dict(perf_config_label=5), "perf_config_label 5: allowed: a non-empty string"),
    (dict(perfdb_label=" "), "perfdb_label ' ': allowed: a non-empty string or None"),
    (dict(resolve_split_k="no"), "resolve_split_k 'no': allowed: True or False"),
    (dict(resolve_split_k=0), "resolve_split_k 0: allowed: True or False"),
])
def test_find_solution_refuses_arguments_of_the_wrong_type(tmp_path, kw, message):
    with pytest.raises(ArgumentError) as e:
        DgradSolver().find_solution(ConvProblem(**P), "cpu", perfdb=str(tmp_path / "db.udb"), **kw)
    assert str(e.value) == message


def test_find_solution_takes_the_documented_values(tmp_path):
    sol = DgradSolver().find_solution(ConvProblem(**P), "cpu", perfdb=str(tmp_path / "db.udb"), perfdb_arch="cpu",
                                      perfdb_label=None, perf_config_label="--perf-config", resolve_split_k=False)
    assert sol is not None


# ================================================================ an option of another command
def _line_commands_and_foreign_options():
    """(command, --option, the commands that take it) for every option of a dgrad-driver
    command that a line-taking command (run, tune, config, applicable) does not take."""
    owners = {}
    for name, c in cli.commands.items():
        for p in c.params:
            for opt in p.opts:
                if opt.startswith("--") and opt != "--help":
                    owners.setdefault(opt, set()).add(name)
    return [(cmd, opt, sorted(names)) for cmd in ("run", "tune", "config", "applicable")
            for opt, names in sorted(owners.items()) if cmd not in names]


FOREIGN = _line_commands_and_foreign_options()


@pytest.mark.parametrize("cmd,opt,owners", FOREIGN, ids=[f"{c}{o}" for c, o, _ in FOREIGN])
def test_an_option_of_another_command_is_named_as_theirs(capsys, cmd, opt, owners):
    # "tune <line> --perf-config X" used to say "--perf-config: unknown flag ... a MIOpenDriver
    # conv flag": the line's parser saw a word it did not know. It names who takes it.
    msg = error(capsys, cmd, *LINE.split(), opt, "1")
    if "unknown flag" not in msg and not msg.startswith(f"{opt}: an option of dgrad-driver "):
        assert msg.startswith(f"{opt}") and "allowed" in msg, msg
        pytest.skip(f"{cmd} gives {opt} its own message: {msg}")
    assert msg == (f"{opt}: an option of dgrad-driver {' and '.join(owners)}, not of {cmd}; allowed: {cmd}'s options "
                   f"(dgrad-driver {cmd} --help) and MIOpenDriver conv flags"), msg
