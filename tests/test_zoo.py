"""bench/zoo.txt, the zoo of real backward-data layers every default config is judged on:
every line parses with the problem key its flags spell, carries a known class tag that fits
its geometry, gets an answer from ``dgrad-driver applicable``/``config`` for sm_90 (the
not-applicable ones being exactly those the file's header lists) and runs on the CPU engine
in a cropped copy (the full layers are too big for a test); the zoo spans >= 70 lines and
>= 12 networks."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import ROOT
from bench.compare import CLASSES, DTYPE_OF_BASE, read_suite, split_label, network_of
from driver.cli import main
from miopen_solver import fixtures
from miopen_solver.command import parse
from miopen_solver.runtime.cpu import CpuEngine
from miopen_solver.solver import DgradSolver
from miopen_solver.spec import make_spec
from miopen_solver.target import get_target

ZOO = Path(ROOT) / "bench" / "zoo.txt"
ROWS = read_suite(ZOO)
IDS = [split_label(label)[0] for label, _ in ROWS]
KEY_DTYPE = {"fp16": "FP16", "bf16": "BF16", "fp32": "FP32"}

STRUCTURAL = ("patch", "depthwise", "1d", "grouped", "dilated", "asymmetric", "strided")
"""Classes that follow from the geometry, first match wins (the zoo header's order)."""


def flags(cmd: str) -> dict:
    """The line's ``-x value`` pairs, read here independently of miopen_solver.command."""
    words = cmd.split()
    return {k: v for k, v in zip(words[1::2], words[2::2])}


def structural_class(f: dict):
    i = {k: int(v) for k, v in f.items() if k[0] == "-" and k[1:].isalpha() and len(k) == 2}
    if (i["-u"], i["-v"]) == (i["-y"], i["-x"]) and i["-u"] > 1 and i["-p"] == i["-q"] == 0:
        return "patch"
    if i["-g"] > 1 and i["-g"] == i["-c"] == i["-k"]:
        return "depthwise"
    if i["-H"] == 1 < i["-W"]:
        return "1d"
    if i["-g"] > 1:
        return "grouped"
    if i["-l"] > 1 or i["-j"] > 1:
        return "dilated"
    if i["-y"] != i["-x"]:
        return "asymmetric"
    if i["-u"] > 1 or i["-v"] > 1:
        return "strided"
    return None


def declared_not_applicable() -> set:
    """Labels the header lists after ``sm_90 not applicable:`` (``none`` = empty)."""
    m = re.search(r"^# sm_90 not applicable: (.*)$", ZOO.read_text(), re.M)
    assert m, "the zoo header must say which lines are not applicable for sm_90"
    return set() if m.group(1).strip() == "none" else {s.strip() for s in m.group(1).split(",")}


def test_size_networks_classes_and_types():
    names = [split_label(label)[0] for label, _ in ROWS]
    assert len(ROWS) >= 70
    assert len(set(names)) == len(names), "labels must be unique"
    assert all("/" in n for n in names), "label = <network>/<layer-description>"
    assert len({network_of(n) for n in names}) >= 12
    assert {split_label(label)[1] for label, _ in ROWS} == set(CLASSES)
    assert {DTYPE_OF_BASE[cmd.split()[0]] for _, cmd in ROWS} == {"fp16", "bf16", "fp32"}
    for label, cmd in ROWS:
        assert cmd.split()[0] != "convfp16" or not re.search(r"_(bf16|fp32)$", split_label(label)[0])


@pytest.mark.parametrize("label,cmd", ROWS, ids=IDS)
def test_line_parses_to_its_key_and_class(label, cmd):
    f = flags(cmd)
    assert f["-F"] == "2" and f["-t"] == "1" and f["-V"] == "1"
    assert f["--in_layout"] == f["--out_layout"] == f["--fil_layout"] == "NHWC"
    p = parse(cmd).problem
    i = {k: int(v) for k, v in f.items() if len(k) == 2 and k[1].isalpha() and k != "-F"}
    ho = (i["-H"] + 2 * i["-p"] - i["-l"] * (i["-y"] - 1) - 1) // i["-u"] + 1
    wo = (i["-W"] + 2 * i["-q"] - i["-j"] * (i["-x"] - 1) - 1) // i["-v"] + 1
    key = (f"{i['-k']}-{ho}-{wo}-{i['-y']}x{i['-x']}-{i['-c']}-{i['-H']}-{i['-W']}-{i['-n']}-"
           f"{i['-p']}x{i['-q']}-{i['-u']}x{i['-v']}-{i['-l']}x{i['-j']}-0-NHWC-NHWC-NHWC-"
           f"{KEY_DTYPE[DTYPE_OF_BASE[cmd.split()[0]]]}-B" + (f"_g{i['-g']}" if i["-g"] != 1 else ""))
    assert p.problem_key() == key
    assert p.dtype == DTYPE_OF_BASE[cmd.split()[0]]

    name, cls = split_label(label)
    assert cls in CLASSES
    want = structural_class(f)
    if want is not None:
        assert cls == want, f"{name}: geometry says {want}"
        return
    assert cls not in STRUCTURAL and p.Y == p.X
    if cls == "dense_1x1":
        assert p.Y == 1
    elif cls == "dense_3x3":
        assert p.Y == 3
    elif cls == "small_image_many_channels":
        assert p.Hi * p.Wi <= 16 * 16 and max(p.C, p.K) >= 384
    elif cls == "large_image_few_channels":
        assert p.Hi * p.Wi >= 256 * 256 and min(p.C, p.K) <= 256
    else:
        assert cls == "odd_channels" and (p.C % 64 or p.K % 64)


def _cli_json(capsys, *argv):
    status = main(list(argv))
    out = capsys.readouterr().out
    return status, (json.loads(out) if out.strip() else None)


def test_driver_answers_every_line_for_sm_90(capsys):
    """``dgrad-driver applicable``/``config <line> --arch sm_90`` answer every line; the ones
    that are not applicable are exactly the header's list."""
    refused = set()
    for label, cmd in ROWS:
        name = split_label(label)[0]
        status, verdict = _cli_json(capsys, "applicable", *cmd.split(), "--arch", "sm_90", "--json")
        assert status in (0, 1) and verdict["applicable"] == (status == 0), name
        status, cfg = _cli_json(capsys, "config", *cmd.split(), "--arch", "sm_90", "--json", "--no-perfdb")
        if verdict["applicable"]:
            assert status == 0 and cfg["source"] == "default", name
            assert cfg["problem_key"] == parse(cmd).problem.problem_key()
        else:
            assert status == 1, name
            refused.add(name)
    assert refused == declared_not_applicable()


@pytest.mark.parametrize("label,cmd", ROWS, ids=IDS)
def test_full_line_resolves_on_the_cpu_target(label, cmd):
    """The full-size line is applicable on the CPU engine's target with a default config
    (nothing is run at this size)."""
    p, cpu = parse(cmd).problem, get_target("cpu")
    solver = DgradSolver()
    assert solver.is_applicable(p, cpu).ok
    make_spec(p, cpu, solver.get_default_performance_config(p, cpu))


def _crop(size: int, filt: int, stride: int, dil: int) -> int:
    """A small extent with the same filter, stride and dilation and the same size mod stride
    (so the same border cases), never below the dilated filter."""
    base = max(8, dil * (filt - 1) + 1 + 2 * stride)
    return size if size <= base + stride else base + (size - base) % stride


@pytest.mark.parametrize("label,cmd", ROWS, ids=IDS)
def test_cropped_line_runs_on_the_cpu_engine(label, cmd, monkeypatch):
    """A cropped copy of the line (batch 1, spatial size cut by :func:`_crop`, channels
    halved by the fixtures' shrink rule until it is tiny; filter, stride, pad, dilation,
    dtype and the odd/grouped/depthwise structure kept) runs on the CPU engine with the cpu
    target's default config and verifies against the float64 reference."""
    monkeypatch.setattr(fixtures, "FLOP_BUDGET", 20_000_000)
    monkeypatch.setattr(fixtures, "ELEMENT_BUDGET", 100_000)
    p = parse(cmd).problem
    q = p.replace(N=1, Hi=_crop(p.Hi, p.Y, p.sH, p.dH), Wi=_crop(p.Wi, p.X, p.sW, p.dW))
    assert (q.Y, q.X, q.pH, q.pW, q.sH, q.sW, q.dH, q.dW, q.dtype) == \
        (p.Y, p.X, p.pH, p.pW, p.sH, p.sW, p.dH, p.dW, p.dtype)
    rec = fixtures.numerics_record(q, CpuEngine())
    assert rec.get("ok") is True, rec
