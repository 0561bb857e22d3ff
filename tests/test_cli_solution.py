"""-S like MIOpenDriver: -1 not set, 0 immediate mode with the fastest solution (ours), our id
or name; anything else is refused with the list. Unsplittable lines are one-line errors."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from driver.cli import cli

LINE = ["conv", "-n", "1", "-c", "2", "-H", "3", "-W", "3", "-k", "2", "-y", "2", "-x", "2", "-F", "2",
        "-V", "0", "-i", "1"]


@pytest.mark.parametrize("sol", ["-1", "0", "1000", "200", "ConvDgradImplicitGemmTilde"])
def test_accepted_solutions(sol):
    r = CliRunner().invoke(cli, LINE + ["-S", sol, "--backend", "cpu"])
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize("sol", ["1", "86", "ConvDirectNaiveConvBwd", "abc"])
def test_other_solutions_refused_with_the_list(sol):
    r = CliRunner().invoke(cli, LINE + ["-S", sol, "--backend", "cpu"])
    assert r.exit_code == 2
    assert f"-S '{sol}':" in r.output and "0 (fastest)" in r.output and "1000" in r.output


@pytest.mark.parametrize("args", [
    ["conv -n 1 -c 4 -F 2 --in_layout 'NHWC"],
    ["applicable", "conv -n 1 -c 4 -F 2 --in_layout 'NHWC"],
])
def test_unsplittable_line_is_one_error_line(args):
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 2
    assert "cannot split the line" in r.output and "Traceback" not in r.output


CFG_LINE = ["convfp16", "-n", "2", "-c", "64", "-H", "14", "-W", "14", "-k", "256", "-y", "1", "-x", "1", "-F", "2",
            "--in_layout", "NHWC", "--out_layout", "NHWC", "--fil_layout", "NHWC", "--arch", "sm_90"]


GIVEN = ["--perf-config", "128,128,64,2,1,64,128,0,0,0,1,-1,4,3"]


@pytest.mark.parametrize("given,settings,shown", [
    ([], [], "(default)"),
    ([], ["--split-k", "2"], "(default, with --split-k 2)"),
    ([], ["--split-k-reduce", "atomic"], "(default)"),                # split_k 1: nothing changes
    ([], ["--kouter", "off", "--split-k", "4"], "(default, with --kouter off --split-k 4)"),
    (GIVEN, [], "(given)"),
    (GIVEN, ["--split-k", "2"], "(given, with --split-k 2)"),
    (GIVEN, ["--split-k-reduce", "atomic"], "(given)"),
    (GIVEN, ["--kouter", "on", "--split-k", "4"], "(given, with --kouter on --split-k 4)"),
])
def test_config_says_when_settings_changed_the_config(given, settings, shown):
    """``config``'s text names the settings that changed the default or given config it
    shows (its JSON ``source`` stays ``default`` or ``given``); a setting that changes
    nothing leaves it ``(default)`` or ``(given)``."""
    import json
    r = CliRunner().invoke(cli, ["config"] + CFG_LINE + given + settings)
    assert r.exit_code == 0, r.output
    line = next(x for x in r.output.splitlines() if x.startswith("perf config: "))
    assert line.endswith(shown), line
    j = CliRunner().invoke(cli, ["config"] + CFG_LINE + given + settings + ["--json"])
    assert json.loads(j.output)["source"] == ("given" if given else "default")
