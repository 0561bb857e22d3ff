"""Every place the driver names a solution's kernel or workspace reports the Solution's
(:class:`miopen_solver.solver.Solution`), never the NHWC kernel's spec: NCHW and mixed
tensors run through layout transforms, so the solution's kernel name carries
``+transpose_<tensors>`` and its workspace holds the NHWC copies. Checked over every path
(run text, ``--json``, ``--print-name-only``, immediate mode's ``ws:``, compile-only,
``config`` text and ``--json``, batch, tune) and every layout kind (all NCHW, mixed, NHWC).
"""

from __future__ import annotations

import json
import os
import re

import pytest

from conftest import ROOT, run_cli
from driver import workers
from miopen_solver import prng
from miopen_solver.command import parse
from miopen_solver.perfdb import ENV_VAR as PERFDB_ENV
from miopen_solver.solver import DgradSolver
from miopen_solver.target import get_target

BASE = "conv -n 2 -c 8 -H 6 -W 5 -k 8 -y 3 -x 3 -p 1 -q 1 -F 2"
LAYOUTS = {
    "nchw": "",                                                              # MIOpen's default
    "mixed": " --in_layout NHWC --out_layout NCHW --fil_layout NHWC",    # dY NCHW: transposed
    "nhwc": " --in_layout NHWC --out_layout NHWC --fil_layout NHWC",
}


@pytest.fixture(autouse=True)
def env(monkeypatch, tmp_path):
    for name in (prng.SEED_ENV, workers.TIMEOUT_ENV, workers.STARTUP_ENV, workers.CRASH_ENV, workers.PRELOAD_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(PERFDB_ENV, str(tmp_path / "perfdb.sqlite"))


def line(kind: str) -> str:
    return BASE + LAYOUTS[kind]


def solution(kind: str, arch: str):
    return DgradSolver().find_solution(parse(line(kind)).problem, get_target(arch), perfdb=None)


@pytest.mark.parametrize("kind", sorted(LAYOUTS))
def test_the_solution_differs_from_its_spec_where_tensors_are_nchw(kind):
    sol = solution(kind, "cpu")
    if kind == "nhwc":
        assert sol.kernel_name == sol.spec.kernel_name and sol.workspace_bytes == sol.spec.workspace_bytes
    else:       # what the tests below would not catch if both names were the same
        assert "+transpose_" in sol.kernel_name and sol.workspace_bytes > sol.spec.workspace_bytes


@pytest.mark.parametrize("kind", sorted(LAYOUTS))
def test_print_name_only_names_the_solution(capsys, kind, no_workers):
    want = solution(kind, "gfx942").kernel_name
    status, out, err = run_cli(capsys, *line(kind).split(), "--arch", "gfx942", "--backend", "cpu",
                               "--no-perfdb", "--print-name-only")
    assert (status, out, err) == (0, [want], [])
    status, out, err = run_cli(capsys, *line(kind).split(), "--arch", "gfx942", "--backend", "cpu",
                               "--no-perfdb", "--print-name-only", "--json")
    assert status == 0 and json.loads(out[0]) == {"kernel_name": want}


@pytest.mark.parametrize("kind", sorted(LAYOUTS))
def test_config_text_and_json_name_the_solution_and_its_workspace(capsys, kind):
    sol = solution(kind, "gfx942")
    status, out, _ = run_cli(capsys, "config", *line(kind).split(), "--no-perfdb")
    assert status == 0 and out[0] == f"kernel: {sol.kernel_name}"
    assert any(x.endswith(f"workspace: {sol.workspace_bytes} bytes") for x in out)
    assert f"  kernel_workspace_bytes: {sol.spec.workspace_bytes}" in out
    assert not any(x.strip().startswith("workspace_bytes:") for x in out)     # no unexplained second field
    status, out, _ = run_cli(capsys, "config", *line(kind).split(), "--no-perfdb", "--json")
    doc = json.loads("\n".join(out))
    facts = sol.as_dict()
    assert doc["kernel_name"] == sol.kernel_name
    assert doc["workspace_bytes"] == doc["launch"]["workspace_bytes"] == sol.workspace_bytes
    assert doc["layout_transforms"] == facts["layout_transforms"] and doc["split_n"] == facts["split_n"]
    assert doc["spec"]["kernel_workspace_bytes"] == sol.spec.workspace_bytes and "workspace_bytes" not in doc["spec"]


@pytest.mark.parametrize("kind", sorted(LAYOUTS))
def test_run_json_carries_the_facts_config_json_has(capsys, kind):
    args = [*line(kind).split(), "-t", "1", "-V", "0", "-i", "2", "--backend", "cpu", "--no-perfdb"]
    status, out, err = run_cli(capsys, *args, "--json")
    assert status == 0, err
    rec = json.loads(out[0])
    status, out, _ = run_cli(capsys, "config", *line(kind).split(), "--arch", "cpu", "--no-perfdb", "--json")
    doc = json.loads("\n".join(out))
    for key in ("kernel_name", "workspace_bytes", "notes", "layout_transforms", "split_n", "perf_config"):
        assert rec[key] == doc[key], key
    sol = solution(kind, "cpu")
    assert rec["kernel_name"] == sol.kernel_name and rec["workspace_bytes"] == sol.workspace_bytes
    assert rec["notes"] == list(sol.notes)


@pytest.mark.parametrize("kind", sorted(LAYOUTS))
@pytest.mark.parametrize("solution_flag", ["0", "200", "1000"])
def test_immediate_mode_reports_the_solutions_workspace(capsys, kind, solution_flag):
    ws = solution(kind, "cpu").workspace_bytes
    args = [*line(kind).split(), "-t", "1", "-V", "0", "-i", "2", "-S", solution_flag, "--backend", "cpu",
            "--no-perfdb"]
    status, out, err = run_cli(capsys, *args)
    assert status == 0, err
    (ws_line,) = [x for x in out if x.startswith("- id: ")]
    assert f", ws: {ws}, " in ws_line
    status, out, _ = run_cli(capsys, *args, "--json")
    assert [s["workspace_bytes"] for s in json.loads(out[0])["solutions"]] == [ws]


@pytest.mark.parametrize("kind", sorted(LAYOUTS))
def test_compile_only_names_the_solution(capsys, kind, monkeypatch, no_workers):
    monkeypatch.setattr(workers, "gpu_device_nodes", lambda: [])        # no device: compile only
    monkeypatch.setenv("PATH", "/nonexistent")                          # no compiler: emit only
    want = solution(kind, "gfx942").kernel_name
    status, out, err = run_cli(capsys, *line(kind).split(), "--arch", "gfx942", "--no-perfdb")
    assert status == 0, err
    assert f"Kernel: {want}" in out
    status, out, _ = run_cli(capsys, *line(kind).split(), "--arch", "gfx942", "--no-perfdb", "--json")
    rec = json.loads(out[0])
    assert rec["kernel_name"] == rec["compile_only"]["kernel_name"] == want


def test_batch_and_tune_name_the_solution(capsys, tmp_path):
    path = tmp_path / "lines.txt"
    path.write_text("".join(line(k) + " -i 2 -V 0\n" for k in sorted(LAYOUTS)))
    status, out, err = run_cli(capsys, "batch", path, "--backend", "cpu", "--no-perfdb", "--quiet")
    assert status == 0, err
    for kind in sorted(LAYOUTS):
        assert any(solution(kind, "cpu").kernel_name in x for x in out), kind
    status, out, err = run_cli(capsys, "tune", *line("nchw").split(), "-i", "2", "--backend", "cpu",
                               "--max-configs", "1", "--verify-top", "0", "--no-perfdb", "--quiet", "--json")
    assert status == 0, err
    assert json.loads(out[0])["rows"][0]["kernel_name"] == solution("nchw", "cpu").kernel_name


def test_the_driver_never_names_a_kernel_or_workspace_by_its_spec():
    """A guard for the whole kind: the spec is the NHWC kernel alone; what the driver prints
    about a solution comes from the Solution."""
    hits = []
    for name in sorted(os.listdir(os.path.join(ROOT, "driver"))):
        if name.endswith(".py"):
            with open(os.path.join(ROOT, "driver", name)) as fh:
                for n, text in enumerate(fh, 1):
                    if re.search(r"\bspec\.(kernel_name|workspace_bytes)\b", text):
                        hits.append(f"driver/{name}:{n}: {text.strip()}")
    assert hits == []


# The kernel name's vector tag (``_v<a>v<b>v<c>_``) and ``config``'s vector_size_a/b/c are
# one fact told twice: for every GEMM family, default and searched configs, they agree (the
# NCHW patch runs once named the virtual GEMM's C vector while config gave the store width).
NAME_LINES = [
    "convfp16 -n 4 -c 3 -H 224 -W 224 -k 768 -y 16 -x 16 -u 16 -v 16 -F 2",                 # NCHW patch
    "convbfp16 -n 4 -c 3 -H 224 -W 224 -k 96 -y 4 -x 4 -u 4 -v 4 -F 2",                     # NCHW patch, runs of 4
    "convfp16 -n 4 -c 96 -H 56 -W 56 -k 192 -y 2 -x 2 -u 2 -v 2 -F 2",                      # NCHW patch, runs of 2
    "convfp16 -n 4 -c 64 -H 56 -W 56 -k 256 -y 1 -x 1 -F 2",                                 # NCHW 1x1
    "convfp16 -n 4 -c 3 -H 224 -W 224 -k 768 -y 16 -x 16 -u 16 -v 16 -F 2 --in_layout NHWC --out_layout NHWC "
    "--fil_layout NHWC",                                                                      # NHWC patch GEMM
    "convfp16 -n 4 -c 64 -H 28 -W 28 -k 64 -y 3 -x 3 -p 1 -q 1 -F 2 --in_layout NHWC --out_layout NHWC "
    "--fil_layout NHWC",                                                                      # tilde GEMM
    "conv -n 4 -c 33 -H 7 -W 8 -k 17 -y 1 -x 1 -F 2",                                        # fp32, odd channels
]


@pytest.mark.parametrize("arch", ["sm_90", "sm_80", "gfx942"])
@pytest.mark.parametrize("line", NAME_LINES)
def test_kernel_name_vector_tag_is_configs_vector_sizes(arch, line):
    solver, target = DgradSolver(), get_target(arch)
    p = parse(line).problem
    cfgs = [None] + list(solver.search(p, target))[:12]
    seen = 0
    for cfg in cfgs:
        sol = solver.find_solution(p, target, perf_config=cfg)
        m = re.search(r"_v(\d+)v(\d+)v(\d+)_", sol.kernel_name)
        if m is None:           # the direct families name one vector width
            continue
        d = sol.spec.as_dict()
        assert tuple(map(int, m.groups())) == (d["vector_size_a"], d["vector_size_b"], d["vector_size_c"]), \
            (sol.kernel_name, d["vector_size_a"], d["vector_size_b"], d["vector_size_c"])
        seen += 1
    assert seen >= 1
