"""Issue 17 item 3: MIOpenDriver-style help for a conv line, and shell completion."""

import os
import subprocess
import sys

import pytest

from driver.cli import main
from miopen_solver.command import FLAGS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("args", [["convfp16", "--help"], ["convfp16", "-h"], ["conv", "-n", "4", "-?"],
                                  ["./bin/MIOpenDriver", "convbfp16", "-h"]])
def test_conv_help_lists_every_flag(capsys, args):
    assert main(args) == 0
    out, err = capsys.readouterr()
    assert err == ""
    rows = {ln.split()[0]: ln.split() for ln in out.splitlines() if ln.startswith("-") and len(ln.split()) > 2}
    for f in FLAGS:
        row = rows[f"-{f.short}"]
        assert row[1] == f"--{f.long}"
        assert row[2] == ('""' if f.default == "" else str(f.default))
        assert " ".join(row[3:]) == f.help
    assert "-h" in rows and rows["-h"][1] == "--help"


def test_help_of_the_run_subcommand_is_still_clicks(capsys):
    assert main(["run", "--help"]) == 0
    assert "--backend" in capsys.readouterr().out


def test_shell_completion_prints_a_script_not_help():
    env = {**os.environ, "PYTHONPATH": ROOT, "_DGRAD_DRIVER_COMPLETE": "bash_source"}
    proc = subprocess.run([sys.executable, "-c", "import sys; from driver.entry import main; sys.exit(main())"],
                          capture_output=True, text=True, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "_dgrad_driver_completion()" in proc.stdout and "complete " in proc.stdout
    assert "Usage:" not in proc.stdout


@pytest.mark.parametrize("args,says", [
    (["foo", "--help"], "<base> 'foo': unknown subcommand or base argument; allowed: a subcommand (applicable, batch, "
                        "config, perfdb, replay, run, tune) or an MIOpenDriver base (conv, convfp32, convfp16, convbfp16)"),
    (["search", "-h"], "<base> 'search': unknown subcommand or base argument"),
    (["./bin/MIOpenDriver", "convfp64", "-?"], "<base> 'convfp64': unknown subcommand or base argument"),
    (["convint8", "--help"], "<base> 'convint8': int8 has no backward-data pass in MIOpen"),
    (["-n", "4", "--help"], "<base> '4': unknown subcommand or base argument"),
])
def test_conv_help_of_a_base_no_line_takes_is_the_lines_error(capsys, args, says):
    """As MIOpenDriver ("Incorrect BaseArg"), help is only for a base argument a line takes:
    any other is the one error line a run of it gives, exit 2, not a flag list under its name."""
    assert main(args) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("dgrad-driver: error: ") and says in err


def test_h_alone_is_the_tools_help(capsys):
    """``dgrad-driver -h`` was read as a line whose base was '-h' (an error); alone it is the
    tool's help, as ``--help`` (inside a line ``-h`` stays the line's own help)."""
    from conftest import run_cli
    status, out, err = run_cli(capsys, "-h")
    assert status == 0 and err == [] and out[0].startswith("Usage: dgrad-driver")
    status, out, err = run_cli(capsys, "convfp16", "-h")
    assert status == 0 and out[0].startswith("MIOpenDriver convfp16")
    for sub in ("config", "applicable", "tune", "replay"):      # a subcommand and -h alone: its help
        status, out, err = run_cli(capsys, sub, "-h")
        assert status == 0 and err == [] and out[0].startswith(f"Usage: dgrad-driver {sub}"), (sub, out[:1], err)
