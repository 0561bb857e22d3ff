"""What a fresh user's trial found wrong in the driver's messages, each fixed for its whole kind:

* stdout that cannot be written (``> /dev/full``, a pipe closed early) in every subcommand:
  one line and exit 2, or a quiet exit 141 for a closed pipe -- never a traceback;
* click's own usage errors (unknown option or subcommand, a missing or bad value) in every
  command: one line that also says what is allowed;
* perf-config fields outside MIOpen's 32-bit int, in the parser and in every subcommand
  that takes ``--perf-config`` (exit 2, as every invalid config in ``config`` now is);
* ``INDEX_OVERFLOW`` reasons name the MIOpenDriver flags behind each finding and the limit;
* a refused int flag is echoed as the line typed it (``-n '-0'``, not ``-n '0'``).
"""

from __future__ import annotations

import errno
import io
import os
import re
import subprocess
import sys

import click
import pytest

from conftest import ROOT, run_cli
from driver.cli import EXIT_BROKEN_PIPE, GuardedStdout, StdoutError, cli, main
from miopen_solver import SOLVER_NAME
from miopen_solver import applicability as ap
from miopen_solver.command import FLAGS, INT_MAX, INT_MIN, check_supported, parse
from miopen_solver.config import FIELDS, PerfConfig
from miopen_solver.errors import MiopenCommandError, PerfConfigError
from miopen_solver.perfdb import ENV_VAR as PERFDB_ENV, PerfDb
from miopen_solver.problem import ConvProblem
from miopen_solver.solver import DgradSolver
from miopen_solver.target import get_target

NHWC = "--in_layout NHWC --out_layout NHWC --fil_layout NHWC"
LINE = f"convfp16 -n 1 -c 8 -H 4 -W 4 -k 8 -y 3 -x 3 -p 1 -q 1 -F 2 -t 1 -i 1 {NHWC}"
FULL = "No space left on device"


# ================================================================ 1: stdout that cannot be written
def subcommands(tmp_path) -> dict:
    """Every subcommand the trial found failing, as argv tails that print to stdout on the CPU
    engine within a second or two (the perf-db holds one record, so ``perfdb list`` prints)."""
    lines = tmp_path / "lines.txt"
    lines.write_text(LINE + "\n")
    problem = parse(LINE).problem
    cfg = DgradSolver().get_default_performance_config(problem, get_target("cpu")).serialize()
    with PerfDb(tmp_path / "p.sqlite") as db:
        db.update(problem.problem_key(), "cpu", SOLVER_NAME, cfg, 1.0)
    return {
        "run": [*LINE.split(), "--backend", "cpu"],
        "applicable": ["applicable", *LINE.split()],
        "config": ["config", *LINE.split()],
        "perfdb list": ["perfdb", "list"],
        "batch": ["batch", str(lines), "--backend", "cpu", "--no-verify"],
        "tune": ["tune", *LINE.split(), "--backend", "cpu", "--max-configs", "1", "--verify-top", "0"],
        "tune --list": ["tune", "--list", *LINE.split()],
        "replay": ["replay", os.path.join(ROOT, "fixtures"), "--only", "bench_r50_1x1_c64_k256_56"],
        "convfp16 -h": ["convfp16", "-h"],
        "--help": ["--help"],
        "--version": ["--version"],
        "no arguments": [],
    }


SUBCOMMANDS = ["run", "applicable", "config", "perfdb list", "batch", "tune", "tune --list", "replay", "convfp16 -h",
               "--help", "--version", "no arguments"]


def _driver(tmp_path, args, stdout) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=ROOT, **{PERFDB_ENV: str(tmp_path / "p.sqlite"),
                                              "MIOPEN_DGRAD_CACHE_DIR": str(tmp_path / "kernels")})
    return subprocess.run([sys.executable, "-m", "driver", *args], stdout=stdout, stderr=subprocess.PIPE, env=env,
                          cwd=tmp_path, text=True, timeout=300)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
@pytest.mark.parametrize("name", SUBCOMMANDS)
def test_a_full_stdout_is_one_error_line_and_exit_2(tmp_path, name):
    with open("/dev/full", "w") as full:
        r = _driver(tmp_path, subcommands(tmp_path)[name], full)
    assert r.returncode == 2, r.stderr
    assert r.stderr == f"dgrad-driver: error: stdout: cannot write ({FULL})\n"


@pytest.mark.parametrize("name", SUBCOMMANDS)
def test_a_closed_pipe_ends_quietly_with_141(tmp_path, name):
    """The reader is gone before the driver starts (``| head -c 0``), so every write fails
    with EPIPE, deterministically: nothing on stderr (no traceback, no ``Exception ignored``
    at interpreter exit), exit 128 + SIGPIPE -- never 1, the verification-failed status."""
    read, write = os.pipe()
    os.close(read)
    try:
        r = _driver(tmp_path, subcommands(tmp_path)[name], write)
    finally:
        os.close(write)
    assert (r.returncode, r.stderr) == (EXIT_BROKEN_PIPE, "")
    assert EXIT_BROKEN_PIPE == 128 + 13                   # SIGPIPE is 13 on every POSIX system we run on


@pytest.mark.parametrize("name", ["run", "tune", "batch", "applicable"])
def test_closed_stdout_runs_and_workers_still_report(tmp_path, name):
    """Run with stdout closed (``>&-``): the workers' pipes must not take descriptor 1 (the
    child's stdout redirection overwrote it: exit 3, "exited ... without replying"); the
    command runs, prints nothing and exits 0."""
    env = {**os.environ, "PYTHONPATH": ROOT, "MIOPEN_USER_DB_PATH": str(tmp_path / "db"),
           "MIOPEN_DGRAD_CACHE_DIR": str(tmp_path / "kernels")}
    csv = ["--csv", str(tmp_path / "t.csv")] if name == "tune" else []
    r = subprocess.run([sys.executable, "-m", "driver", *subcommands(tmp_path)[name], *csv],
                       stderr=subprocess.PIPE, env=env, cwd=tmp_path, text=True, timeout=300,
                       preexec_fn=lambda: os.close(1))
    assert (r.returncode, r.stderr) == (0, ""), r.stderr
    if name == "tune":
        assert "failed" not in (tmp_path / "t.csv").read_text()


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
@pytest.mark.parametrize("args,status", [
    ([*LINE.split(), "--backend", "cpu", "--perfdb", "garbage.bin"], 0),     # a warning that cannot be shown
    (["convfp16", "-n", "0", "-F", "2"], 2),                                  # an error line that cannot be
])
def test_an_unwritable_stderr_keeps_the_exit_status(tmp_path, args, status):
    """``2> /dev/full``: what cannot be shown on stderr is dropped; the exit status is the
    command's own (was 1, the verification-failed status, with stdout left empty)."""
    (tmp_path / "garbage.bin").write_bytes(bytes(range(256)) * 4)
    env = {**os.environ, "PYTHONPATH": ROOT, "MIOPEN_USER_DB_PATH": str(tmp_path / "db"),
           "MIOPEN_DGRAD_CACHE_DIR": str(tmp_path / "kernels")}
    with open("/dev/full", "w") as full:
        r = subprocess.run([sys.executable, "-m", "driver", *args], stdout=subprocess.PIPE, stderr=full, env=env,
                           cwd=tmp_path, text=True, timeout=300)
    assert r.returncode == status
    out = r.stdout.splitlines()
    assert bool(out and out[-1].startswith("Backward Convolution Data Verifies OK")) == (status == 0)


class FailingStdout(io.TextIOBase):
    """A text stdout whose every non-empty write fails with ``err`` (no descriptor: the
    driver cannot point one at /dev/null in this process)."""

    encoding, errors = "utf-8", "strict"

    def __init__(self, err: int):
        self.err = err

    def write(self, text):
        if not isinstance(text, str):
            raise TypeError("write() argument must be str")
        if text:
            raise OSError(self.err, os.strerror(self.err))
        return 0


@pytest.mark.parametrize("err", [errno.ENOSPC, errno.EIO, errno.EDQUOT, errno.EFBIG, errno.EPIPE])
@pytest.mark.parametrize("args", [["--help"], ["convfp16", "-h"], ["applicable", *LINE.split()],
                                  ["config", *LINE.split()], ["--version"], []])
def test_every_write_error_of_stdout_is_reported_once(capsys, monkeypatch, err, args):
    monkeypatch.setattr(sys, "stdout", FailingStdout(err))
    status = main(args)
    _, stderr = capsys.readouterr()
    if err == errno.EPIPE:
        assert (status, stderr) == (EXIT_BROKEN_PIPE, "")
    else:
        assert status == 2 and stderr == f"dgrad-driver: error: stdout: cannot write ({os.strerror(err)})\n"
    assert isinstance(sys.stdout, FailingStdout)          # the guard is gone once main returns


def test_the_guard_only_changes_how_stdout_fails():
    buf = io.StringIO()
    guard = GuardedStdout(buf)
    guard.write("a")
    guard.writelines(["b", "c"])
    guard.flush()
    assert buf.getvalue() == "abc" and guard.getvalue() == "abc"       # everything else is the stream's
    with pytest.raises(StdoutError) as info:
        GuardedStdout(FailingStdout(errno.EIO)).write("x")
    assert (info.value.errno, info.value.strerror) == (errno.EIO, os.strerror(errno.EIO))
    assert not isinstance(info.value, OSError)          # click's EPIPE handler (exit 1) must not catch it


# ================================================================ 4: click's usage errors
def walk(group=cli, path=()):
    """``(path, command)`` of every command and group under ``group``."""
    for name, cmd in group.commands.items():
        yield path + (name,), cmd
        if isinstance(cmd, click.Group):
            yield from walk(cmd, path + (name,))


COMMANDS = list(walk())


def usage_cases():
    """Malformed argument lists for every command: an unknown option, each valued option
    without its value or with a value its type refuses, each flag given a value, no
    arguments where some are required, an unknown subcommand of a group."""
    for path, cmd in [((), cli)] + COMMANDS:
        name = " ".join(path) or "(top)"
        yield pytest.param(path, ["--no-such-option"], id=f"{name} --no-such-option")
        for p in cmd.params:
            if not isinstance(p, click.Option):
                continue
            opt = max(p.opts, key=len)
            if p.is_flag:
                yield pytest.param(path, [f"{opt}=3"], id=f"{name} {opt}=3")
                continue
            yield pytest.param(path, [opt], id=f"{name} {opt} (no value)")
            if isinstance(p.type, (click.Choice, click.types.IntParamType, click.types.FloatParamType)):
                yield pytest.param(path, [opt, "?!"], id=f"{name} {opt} ?!")
        if any(p.required for p in cmd.params):
            yield pytest.param(path, [], id=f"{name} (nothing)")
        if isinstance(cmd, click.Group) and path:
            yield pytest.param(path, ["bogus"], id=f"{name} bogus")


CLICK_KINDS = ("No such option", "No such command", "requires an argument", "does not take a value", "Missing ",
               "Invalid value", "Got unexpected")
"""The usage errors click itself raises (the rest say what is allowed in their own words)."""


def command_at(path):
    cmd = cli
    for name in path:
        cmd = cmd.commands[name]
    return cmd


@pytest.mark.parametrize("path,args", list(usage_cases()))
def test_every_usage_error_is_one_line_saying_what_is_allowed(capsys, no_workers, path, args):
    status, out, err = run_cli(capsys, *path, *args)
    assert status == 2 and out == [] and len(err) == 1, (out, err)
    line = err[0]
    assert line.startswith("dgrad-driver: error: ") and "allowed: " in line and "Traceback" not in line
    cmd, shown = command_at(path), " ".join(("dgrad-driver",) + tuple(path))
    if not any(kind in line for kind in CLICK_KINDS):
        return                                  # an MIOpenDriver line or our own check: it says allowed itself
    assert line.endswith(f"(see {shown} --help)")
    if "No such option" in line:                # every option of the command is listed
        for p in cmd.params:
            if isinstance(p, click.Option):
                assert max(p.opts, key=len) in line.split("allowed: ")[1]
    elif "No such command" in line:             # every subcommand of the group is listed
        assert all(f" {n}," in line or f" {n} (" in line for n in cmd.commands)
    elif "requires an argument" in line or "does not take a value" in line or "Invalid value" in line:
        opt = args[0].split("=")[0]
        assert f"; allowed: {opt}" in line


def test_the_trials_usage_errors_read_in_full(capsys, tmp_path):
    small = tmp_path / "small.txt"
    small.write_text(LINE + "\n")
    cases = {
        ("batch", str(small), "--bogus"): "No such option '--bogus'; allowed: the options of dgrad-driver batch: "
                                          "--backend, --arch, --batch-size,",
        ("replay", "--arch"): "No such option '--arch'; allowed: the options of dgrad-driver replay: --backend, "
                              "--only, --update-golden, --failures-only, --timeout, --help (see dgrad-driver replay "
                              "--help)",
        ("perfdb", "bogus"): "No such command 'bogus'; allowed: the commands of dgrad-driver perfdb: export, import, "
                             "list, name (see dgrad-driver perfdb --help)",
        ("perfdb", "export"): "Missing option '--arch'; allowed: --arch TEXT (see dgrad-driver perfdb export --help)",
        ("tune", "--results"): "Option '--results' requires an argument; allowed: --results PATH (see dgrad-driver "
                               "tune --help)",
    }
    for args, text in cases.items():
        status, out, err = run_cli(capsys, *args)
        assert status == 2 and out == [] and len(err) == 1 and err[0].startswith(f"dgrad-driver: error: {text}")


def test_every_command_keeps_its_context_on_usage_errors():
    """click's parser raises some usage errors without a context; every command and group
    of the driver is one of the classes that add it, so every such error can say what its
    command allows (a command added later with plain ``@click.command`` would not)."""
    from driver.options import Command, Group
    assert isinstance(cli, Group)
    for path, cmd in COMMANDS:
        assert isinstance(cmd, Command), path
        if isinstance(cmd, click.Group):
            assert isinstance(cmd, Group), path


# ================================================================ 2: perf-config fields are 32-bit ints
OUT_OF_RANGE = [str(INT_MAX + 1), str(INT_MIN - 1), "9" * 20, "-" + "9" * 20, "1" + "0" * 40, "9" * 5000]


def _config_with(field: str, value: str) -> str:
    values = ["64", "64", "32", "2", "2", "32", "32", "0", "0", "0", "1", "-1", "2", "0", "0"]
    values[FIELDS.index(field)] = value
    return ",".join(values)


@pytest.mark.parametrize("field", FIELDS)
def test_every_field_outside_int32_is_refused_by_the_parser(field):
    for value in OUT_OF_RANGE:
        with pytest.raises(PerfConfigError) as info:
            PerfConfig.parse(_config_with(field, value))
        msg = str(info.value)
        assert msg.startswith(f"perf config field {field}={value[:20]}")
        assert msg.endswith("is out of range; allowed: an integer from -2147483648 to 2147483647 "
                            "(MIOpen's perf-config fields are 32-bit int)")
        assert len(msg) < 200                            # a 5000-digit field is cut
        with pytest.raises(PerfConfigError, match=f"field {field}=.* is out of range; allowed: an integer from "):
            PerfConfig(**{field: int(value) if len(value) < 100 else 10**5000})     # built directly too
    if field not in ("schedule", "split_k_reduce"):      # those two take only their codes
        for value in (INT_MAX, INT_MIN, int("000" + str(INT_MAX))):
            assert getattr(PerfConfig.parse(_config_with(field, str(value))), field) == value
        # leading zeros past Python's 4300-digit int() limit: the value, not a ValueError
        for text, value in (("0" * 10**5 + "7", 7), ("-" + "0" * 10**5 + "7", -7), ("0" * 10**5, 0)):
            assert getattr(PerfConfig.parse(_config_with(field, text)), field) == value
    with pytest.raises(PerfConfigError, match="perf config has 1 fields; expected 13 to 15"):
        PerfConfig.parse("0" * 10**6)


MALFORMED = ["", " 1", "1 ", " 1 ", "\t1", "1\n", "\u00a01", '"1"', "'1'", "+1", "1_0", "\u0661", "\uff11", "0x1",
             "1.0", "1e2", "--1", "-", "1-"]
"""Fields that are not ``-?[0-9]+``: whitespace or quotes around a field (which the parser
stripped, though README says fields are decimal ASCII integers), signs, separators, other
digits, other notations."""


@pytest.mark.parametrize("field", FIELDS)
def test_every_field_must_be_a_bare_decimal_ascii_integer(field):
    for value in MALFORMED:
        with pytest.raises(PerfConfigError) as info:
            PerfConfig.parse(_config_with(field, value))
        assert str(info.value) == (f"perf config field {field}={value!r} is not an integer; expected 13 to 15 "
                                   f"comma-separated integers: tile_m,tile_n,tile_k,warp_m,warp_n,warp_tile_m,"
                                   f"warp_tile_n,vector_size_a,vector_size_b,vector_size_c,split_k,lds_k_outer,"
                                   f"stages[,schedule[,split_k_reduce]]")
    for value in ("-0", "000"):                          # what the pattern takes still parses
        assert getattr(PerfConfig.parse(_config_with(field, value)), field) == 0


@pytest.mark.parametrize("text,says", [
    ("", "perf config is empty; expected 13 to 15 comma-separated integers: tile_m,"),
    (" 64,64,32,2,2,32,32,0,0,0,1,-1,2", "perf config field tile_m=' 64' is not an integer; expected 13 to 15 "),
    ("64,64,32,2,2,32,32,0,0,0,1,-1,2 ", "perf config field stages='2 ' is not an integer; expected 13 to 15 "),
    ("64, 64,32,2,2,32,32,0,0,0,1,-1,2", "perf config field tile_n=' 64' is not an integer"),
    ('"64,64,32,2,2,32,32,0,0,0,1,-1,2"', """perf config field tile_m='"64' is not an integer"""),
])
@pytest.mark.parametrize("mode", ["run", "config"])
def test_a_malformed_perf_config_is_one_line_exit_2(capsys, no_workers, mode, text, says):
    """--perf-config '' said "expected 13 comma-separated integers" where every other
    message says 13 to 15, and ' 64,...' (spaces or quotes around fields) was accepted."""
    args = [*LINE.split(), "--backend", "cpu", "--perf-config", text]
    status, out, err = run_cli(capsys, *(["config"] if mode == "config" else []), *args)
    assert status == 2 and out == [] and len(err) == 1
    assert err[0].startswith(f"dgrad-driver: error: --perf-config {text!r}: {says}")


@pytest.mark.parametrize("mode", ["run", "config"])
@pytest.mark.parametrize("field", FIELDS)
def test_every_subcommand_taking_a_perf_config_refuses_int32_overflow_with_exit_2(capsys, no_workers, mode, field):
    cfg = _config_with(field, str(INT_MAX + 1))
    args = [*LINE.split(), "--backend", "cpu", "--perf-config", cfg]
    status, out, err = run_cli(capsys, *(["config"] if mode == "config" else []), *args)
    assert status == 2 and out == [] and len(err) == 1
    assert err[0] == (f"dgrad-driver: error: --perf-config {cfg!r}: perf config field {field}={INT_MAX + 1} is out "
                      f"of range; allowed: an integer from -2147483648 to 2147483647 (MIOpen's perf-config fields "
                      f"are 32-bit int)")


@pytest.mark.parametrize("cfg", ["64,64,32,2,2,32,32,0,0,0,1,-1,9",          # stages past the target's
                                 "64,64,32,2,2,32,32,0,0,0,1,1,2",           # k-outer where it cannot run
                                 "0,64,32,2,2,64,32,0,0,0,1,-1,2"])          # tile_m 0
def test_config_refuses_an_invalid_config_as_a_run_does(capsys, no_workers, cfg):
    """Every PerfConfigError is exit 2 with one line in both: config's line is the run's,
    with the target it answered for."""
    status, out, run_err = run_cli(capsys, *LINE.split(), "--backend", "cpu", "--perf-config", cfg)
    assert status == 2 and out == [] and len(run_err) == 1
    status, out, err = run_cli(capsys, "config", *LINE.split(), "--backend", "cpu", "--perf-config", cfg, "--json")
    assert status == 2 and out == [] and err == [run_err[0] + " (on cpu)"]


# ================================================================ 3: INDEX_OVERFLOW names its flags
def nhwc(**kw) -> ConvProblem:
    base = dict(N=1, C=8, Hi=8, Wi=8, K=8, Y=3, X=3, pH=1, pW=1, sH=1, sW=1, dH=1, dW=1, G=1, dtype="fp16",
                in_layout="NHWC", out_layout="NHWC", fil_layout="NHWC")
    base.update(kw)
    return ConvProblem(**base)


def findings(problem):
    """``[(finding, past, limit), ...]``: each finding of the problem's INDEX_OVERFLOW reason,
    with the ``past ...`` text and the allowed limit of the group it belongs to (a reason
    is groups of ``<finding>; <finding>: past <limit>, ...; allowed: ... at most <N>``)."""
    v = ap.check(problem, get_target("gfx942"))
    reason = next(r for r in v.reasons if r.code == "INDEX_OVERFLOW")
    parts = re.split(r"; allowed: values of those flags that keep each at most (\d+(?: bytes)?)(?:; |$)",
                     reason.message)
    assert parts[-1] == "", reason.message                 # every group ends with its allowed limit
    out = []
    for group, limit in zip(parts[0::2], parts[1::2]):
        body, _, past = group.rpartition(": past ")
        out += [(finding, past, limit) for finding in body.split("; ")]
    return out


LIMIT = "2147483647"
CASES = [
    # (problem, flags each finding must name, the value it must show)
    (nhwc(Hi=3, sH=INT_MAX), {"coordinates reach 2*(Hi + 2*pH) + sH": ("Hi 3 from -H", "pH 1 from -p",
                                                                        f"sH {INT_MAX} from -u")}),
    (nhwc(Wi=1, pW=2**29, X=1), {"coordinates reach 2*(Wi + 2*pW) + sW": ("Wi 1 from -W", f"pW {2**29} from -q",
                                                                          "sW 1 from -v")}),
    # GemmM counts the rows phases write (at most Hi*Wi: a dilation halo around a pixel that
    # no tap reaches is one placeholder row), so it passes the limit beside dX itself
    (nhwc(N=1, C=1, K=1, Hi=2**16, Wi=2**15, Y=1, X=1, pH=0, pW=0),
     {"GemmM of one image = HTildeSlice*WTildeSlice = 65536*32768": ("-H/-W", "-y/-x", "-p/-q", "-u/-v", "-l/-j")}),
    (nhwc(N=1, C=1, K=1, Hi=1, Wi=2**30, Y=1, X=1, pH=0, pW=0),
     {"dY of one image": ("K*Ho*Wo", "-k", "-H/-W", "-y/-x", "-p/-q", "-u/-v", "-l/-j"),
      "dX of one image": ("C*Hi*Wi", "-c", "-H/-W")}),
    (nhwc(C=2**16, K=2**15, Y=1, X=1, pH=0, pW=0, Hi=1, Wi=1), {"W is": ("K*(C/G)*Y*X", "-k", "-c", "-g", "-y/-x")}),
    (nhwc(C=2**16, K=2**15, Y=1, X=1, pH=0, pW=0, Hi=1, Wi=1, in_layout="NDHWC", out_layout="NDHWC",
          fil_layout="NDHWC", spatial_dim=3, Di=1, Z=1, pD=0, sD=1, dD=1),
     {"W is": ("K*(C/G)*Z*Y*X", "-k", "-c", "-g", "-@/-y/-x")}),
]


@pytest.mark.parametrize("problem,expect", CASES)
def test_every_index_overflow_finding_names_its_flags_and_the_limit(problem, expect):
    found = findings(problem)
    assert found, "no INDEX_OVERFLOW"
    for finding, past, limit in found:
        assert " from -" in finding, finding                          # every finding names flags
        assert past.startswith((f"{LIMIT} (2^31-1)", f"{LIMIT} bytes (2^31-1)")), past
        assert limit.startswith(LIMIT)
    for start, needles in expect.items():
        finding = next(f for f, _, _ in found if f.startswith(start))
        for needle in needles:
            assert needle in finding, (needle, finding)


def test_index_overflow_values_are_the_kernels_arithmetic():
    """The numbers a reason shows, computed here from the problem independently."""
    p = nhwc(Hi=3, Wi=5, pH=2, pW=0, sH=INT_MAX - 4, sW=INT_MAX)
    text = " ".join(f for f, _, _ in findings(p))
    assert f"2*(Hi + 2*pH) + sH = {2 * (3 + 4) + INT_MAX - 4}" in text
    assert f"2*(Wi + 2*pW) + sW = {2 * 5 + INT_MAX}" in text
    big = nhwc(N=1, C=3, K=1, Hi=2**14, Wi=2**15, Y=1, X=1, pH=0, pW=0, dtype="fp32")
    dx = 3 * 2**14 * 2**15
    assert f"dX of one image is {4 * dx} bytes ({dx} elements: C*Hi*Wi, from -c, -H/-W)" in \
        " ".join(f for f, _, _ in findings(big))


def test_the_trials_index_overflow_line_names_the_flags(capsys, no_workers):
    line = "convfp16 -n 1 -c 8 -H 3 -W 3 -k 8 -y 3 -x 3 -u 2147483647 -v 2147483647 -F 2 --backend cpu"
    status, out, err = run_cli(capsys, *line.split())
    assert status == 2 and out == [] and len(err) == 1
    assert "(Hi 3 from -H, pH 0 from -p, sH 2147483647 from -u)" in err[0]
    assert "(Wi 3 from -W, pW 0 from -q, sW 2147483647 from -v)" in err[0]
    assert "past 2147483647 (2^31-1)" in err[0] and "allowed: values of those flags" in err[0]


# ================================================================ 8: values echoed as typed
INT_FLAGS = {f.long: f for f in FLAGS if f.kind == "int"}
BASE = "convfp16 -n 2 -c 8 -H 8 -W 8 -k 8 -y 3 -x 3 -p 1 -q 1 -F 2 -V 0"
TYPED = [
    # (extra tokens, the flag and value as they must be echoed)
    *[([f"-{INT_FLAGS[n].short}", v], f"-{INT_FLAGS[n].short} '{v}'")
      for n in ("batchsize", "in_channels", "out_channels", "in_h", "in_w", "fil_h", "fil_w", "conv_stride_h",
                "conv_stride_w", "dilation_h", "dilation_w", "iter") for v in ("-0", "+0", "000")],
    *[([f"--{n}", "-01"], f"--{n} '-01'") for n in ("pad_h", "pad_w", "batchsize")],
    (["-F", "+1"], "-F '+1'"), (["-F", "02", "-V", "02"], "-V '02'"), (["-t", "+2"], "-t '+2'"),
    (["-s", "-01"], "-s '-01'"), (["-w", "003"], "-w '003'"), (["-_", "+4"], "-_ '+4'"), (["-M", "-0002"], "-M '-0002'"),
    (["-g", "03"], "-g '03'"), (["-_", "03", "-!", "-0"], "-! '-0'"),
    (["-y", "011"], "-H 8 with -y 011, -p 1, -u 1, -l 1"), (["-l", "+5"], "-H 8 with -y 3, -p 1, -u 1, -l +5"),
    (["--in_layout", "ncdhw"], "--in_layout 'ncdhw'"),
]


@pytest.mark.parametrize("extra,shown", TYPED)
def test_a_refused_flag_value_is_echoed_as_typed(extra, shown):
    with pytest.raises(MiopenCommandError) as info:
        parse(BASE.split() + extra)
    assert shown in str(info.value)


@pytest.mark.parametrize("extra,shown", [(["-Z", "01"], "-Z '01'"), (["-L", "+2"], "-L '+2'"),
                                         (["-G", "01", "-V", "1"], "-G '01'"), (["--tensor_vect", "+1"],
                                                                                 "--tensor_vect '+1'")])
def test_a_flag_a_run_refuses_is_echoed_as_typed(extra, shown):
    with pytest.raises(MiopenCommandError) as info:
        check_supported(parse(BASE.split() + extra))
    assert shown in str(info.value)


def test_the_trials_minus_zero(capsys, no_workers):
    status, out, err = run_cli(capsys, *"convfp16 -n -0 -c 16 -H 8 -W 8 -k 16 -y 3 -x 3 -F 2".split())
    assert status == 2 and out == [] and err == ["dgrad-driver: error: -n '-0': allowed: an integer >= 1"]
