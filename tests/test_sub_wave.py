"""miopen_solver.sub_wave: the default for grids under one wave (a three-term latency model)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import ROOT
from miopen_solver import sub_wave
from miopen_solver.command import parse
from miopen_solver.heuristics import default_performance_config
from miopen_solver.solver import DgradSolver
from miopen_solver.target import get_target

SM90 = get_target("sm_90")
NHWC = "--in_layout NHWC --out_layout NHWC --fil_layout NHWC"


def _problem(line):
    return parse(line.split()).problem


def _expected_split(blocks, k_tiles, num_cus, atomics=True):
    """The model's split, by brute force over every degree and the formula written out again."""
    def us(s):
        return 2.02 + 1.46 * (s > 1) + 0.137 * math.ceil(k_tiles / s) * math.ceil(blocks * s / num_cus)
    cands = [1] + ([s for s in (2, 4, 8, 16) if s <= k_tiles] if atomics else [])
    return min(cands, key=lambda s: (round(us(s), 9), s))


@given(blocks=st.integers(1, 131), k_tiles=st.integers(1, 400))
def test_the_pick_is_the_model_s_fastest_split(blocks, k_tiles):
    cands = [s for s in sub_wave.SPLITS if s == 1 or s <= k_tiles]
    pick = min(cands, key=lambda s: (round(sub_wave.estimate_us(blocks, k_tiles, s, 132), 9), s))
    assert pick == _expected_split(blocks, k_tiles, 132)


@given(blocks=st.integers(1, 131), k_tiles=st.integers(1, 400))
def test_short_chains_never_split_and_a_split_never_costs_more_than_it_saves(blocks, k_tiles):
    """The physics the model stands for: a split pays a fixed zero-fill and atomic cost, so a
    chain of a few k-steps (at most 10: 1.46 us against 0.137 us a step) is never cut; where
    the pick splits, the model's time is below split_k 1's."""
    pick = _expected_split(blocks, k_tiles, 132)
    if k_tiles <= 10:
        assert pick == 1
    if pick > 1:
        assert sub_wave.estimate_us(blocks, k_tiles, pick, 132) < sub_wave.estimate_us(blocks, k_tiles, 1, 132)


@pytest.mark.parametrize("line, split", [
    (f"convfp16 -n 64 -c 28 -H 1 -W 1 -k 672 -y 1 -x 1 -F 2 {NHWC}", 16),     # EfficientNet-B0 5.1 SE fc2
    (f"convfp16 -n 64 -c 48 -H 1 -W 1 -k 1152 -y 1 -x 1 -F 2 {NHWC}", 16),
    (f"convfp16 -n 64 -c 1152 -H 1 -W 1 -k 48 -y 1 -x 1 -F 2 {NHWC}", 1),      # 36 blocks, 2 k-tiles
    (f"convfp16 -n 256 -c 168 -H 1 -W 1 -k 672 -y 1 -x 1 -F 2 {NHWC}", 4),     # 24 blocks: 4 x 24 fill one wave
    (f"convbfp16 -n 1 -c 2048 -H 7 -W 7 -k 512 -y 1 -x 1 -F 2 {NHWC}", 1),   # batch 1: 64 blocks, 16 k-tiles
    (f"convfp16 -n 2 -c 64 -H 28 -W 28 -k 640 -y 1 -x 1 -u 2 -v 2 -F 2 {NHWC}", 8),   # 1x1 stride 2
    (f"convfp16 -n 64 -c 27 -H 1 -W 1 -k 640 -y 1 -x 1 -F 2 {NHWC}", 1),       # odd cpg: no atomic split
])
def test_the_default_of_sub_wave_problems(line, split):
    p = _problem(line)
    blocks, k_tiles = sub_wave.grid_shape(p)
    assert blocks < SM90.num_cus
    assert _expected_split(blocks, k_tiles, SM90.num_cus, atomics=p.cpg % 2 == 0) == split
    assert default_performance_config(p, SM90) == sub_wave.SUB_WAVE_TILE.replace(split_k=split)
    assert DgradSolver().get_default_performance_config(p, SM90) == sub_wave.SUB_WAVE_TILE.replace(split_k=split)


@pytest.mark.parametrize("line, arch, why", [
    (f"convfp16 -n 256 -c 1152 -H 1 -W 1 -k 48 -y 1 -x 1 -F 2 {NHWC}", "sm_90", "144 blocks: a wave or more"),
    (f"convfp16 -n 64 -c 16 -H 1 -W 1 -k 672 -y 1 -x 1 -F 2 {NHWC}", "sm_90", "cpg 16: the narrow rules"),
    (f"convfp16 -n 64 -c 64 -H 1 -W 1 -k 8 -y 1 -x 1 -F 2 {NHWC}", "sm_90", "kpg 8: under one MMA step"),
    (f"conv -n 64 -c 48 -H 1 -W 1 -k 1152 -y 1 -x 1 -F 2 {NHWC}", "sm_90", "fp32"),
    (f"conv -n 64 -c 48 -H 1 -W 1 -k 1152 -y 1 -x 1 -M 0 -F 2 {NHWC}", "sm_90", "TF32"),
    (f"convfp16 -n 64 -c 48 -H 1 -W 1 -k 1152 -y 1 -x 1 -F 2 {NHWC}", "sm_80", "no warpgroup MMA"),
    (f"convfp16 -n 64 -c 48 -H 1 -W 1 -k 1152 -y 1 -x 1 -F 2 {NHWC}", "gfx942", "AMD"),
    (f"convfp16 -n 32 -c 64 -H 56 -W 56 -k 64 -y 3 -x 3 -p 1 -q 1 -F 2 {NHWC}", "sm_90", "a large grid"),
    (f"convbfp16 -n 1 -c 512 -H 7 -W 7 -k 512 -y 3 -x 3 -p 1 -q 1 -F 2 {NHWC}", "sm_90", "taps: measured slower"),
    (f"convfp16 -n 16 -c 192 -H 23 -W 1 -k 192 -y 3 -x 1 -F 2 {NHWC}", "sm_90", "a 3x1 filter"),
])
def test_the_rule_stays_out_of_its_domain(line, arch, why):
    p, t = _problem(line), get_target(arch)
    assert not sub_wave.applies(p, t), why
    assert sub_wave.sub_wave_config(p, t) is None
    assert default_performance_config(p, t).serialize() != sub_wave.SUB_WAVE_TILE.serialize()


def _zoo(name):
    for raw in (Path(ROOT) / "bench" / name).read_text().splitlines():
        if raw.strip() and not raw.startswith("#"):
            cmd, _, label = raw.partition("#")
            yield label.split()[0], _problem(cmd)


def test_in_the_zoo_exactly_the_squeeze_and_excitation_layers_take_it():
    """Breadth: the rule moves only the layers whose grid is under one wave (the seven SE
    1x1 convolutions on 1x1 images); every other zoo and suite layer keeps its default."""
    taken = {label for name in ("zoo.txt", "suite.txt") for label, p in _zoo(name)
             if default_performance_config(p, SM90).serialize().startswith("64,32,32,1,1,64,32,0,0,0,")
             and sub_wave.applies(p, SM90)}
    assert taken == {label for label, p in _zoo("zoo.txt") if p.Hi == p.Wi == 1 and p.dtype != "fp32"}
    assert len(taken) == 7


def test_split_k_minus_one_keeps_the_model_s_split():
    """A fresh-user trial: ``--split-k -1`` ("the solver chooses") on the SE fc2 resolved by
    the generic rule to 4 while the default's own model chose 16. A default that already
    splits keeps its split for -1, on every schedule; 1 and N still set it."""
    p = _problem(f"convfp16 -n 64 -c 28 -H 1 -W 1 -k 672 -y 1 -x 1 -F 2 {NHWC}")
    solver = DgradSolver()
    chosen = solver.find_solution(p, SM90)
    assert chosen.spec.split_k == 16
    again = solver.find_solution(p, SM90, split_k=-1)
    assert again.spec.split_k == 16 and again.kernel_name == chosen.kernel_name
    assert solver.find_solution(p, SM90, split_k=1).spec.split_k == 1
    assert solver.find_solution(p, SM90, split_k=4).spec.split_k == 4
