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
