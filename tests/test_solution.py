"""The decided Solution: one policy in the library, records that cross process boundaries
intact, and one spec construction per process per config on a run."""

from __future__ import annotations

import collections
import dataclasses
import importlib
import json
import os

import pytest

from conftest import ROOT
from driver import workers
from driver.run_cmd import run_line
from miopen_solver.command import parse
from miopen_solver.config import KernelSchedule, PerfConfig
from miopen_solver.errors import PerfConfigError, RecordError
from miopen_solver.solver import DgradSolver, Solution
from miopen_solver.target import PRESETS, Target, from_device, get_target

LINE = ("convfp16 -n 2 -c 64 -H 9 -W 9 -k 64 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 -F 2 -t 1 -V 1 -i 2 "
        "--in_layout NHWC --out_layout NHWC --fil_layout NHWC")
DEVICE_ARCHS = [("nvidia", "sm_80"), ("nvidia", "sm_90"), ("nvidia", "sm_100"), ("nvidia", "sm_120"),
                ("amd", "gfx90a"), ("amd", "gfx942"), ("amd", "gfx950")]


def _round_trip(t: Target) -> Target:
    return Target.from_record(json.loads(json.dumps(t.to_record())))


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_round_trips(name):
    t = get_target(name)
    back = _round_trip(t)
    assert back == t and back.to_record() == t.to_record() and back.atoms == t.atoms


@pytest.mark.parametrize("vendor,arch", DEVICE_ARCHS)
def test_every_device_target_round_trips(vendor, arch):
    t = from_device(vendor, arch, lds_bytes=101376, max_threads=1024, num_cus=77, wave_size=None)
    back = _round_trip(t)
    assert back == t and back.to_record() == t.to_record()
    assert (back.arch, back.lds_bytes, back.num_cus, back.wgmma) == (arch, 101376, 77, t.wgmma)


def test_sm_100_has_no_wgmma_on_the_other_side():
    """The old boundary sent 7 fields and rebuilt the rest from the sm_90 preset, so an
    sm_100 device's wgmma=False came back True in the worker."""
    t = from_device("nvidia", "sm_100")
    assert not t.wgmma and not _round_trip(t).wgmma
    p = parse(LINE.split()).problem
    sol = DgradSolver().get_solution(p, t)
    assert not sol.schedule.warpgroup
    back = Solution.from_record(json.loads(json.dumps(sol.to_record())))
    assert not back.target.wgmma and back.spec == sol.spec


def test_target_record_refuses_other_fields():
    rec = get_target("sm_90").to_record()
    rec.pop("wgmma")
    with pytest.raises(RecordError, match="target record wgmma <missing>: allowed: a Target.to_record"):
        Target.from_record(rec)


TARGET_FIELDS = [f.name for f in dataclasses.fields(Target)]


@pytest.mark.parametrize("field", TARGET_FIELDS)
def test_target_record_refuses_every_field_missing_or_null(field):
    rec = get_target("sm_90").to_record()
    with pytest.raises(RecordError, match=f"^target record {field} None \\(NoneType\\): allowed: "):
        Target.from_record({**rec, field: None})
    with pytest.raises(RecordError, match=f"^target record {field} <missing>: allowed: "):
        Target.from_record({k: v for k, v in rec.items() if k != field})


@pytest.mark.parametrize("field,value,match", [
    ("vendor", "intel", "vendor 'intel': allowed: 'nvidia', 'amd', 'cpu'"),
    ("wave_size", 48, "wave_size 48: allowed: 32 or 64"),
    ("wave_size", 32.0, "wave_size 32.0 \\(float\\): allowed: 32 or 64"),
    ("lds_bytes", "65536", "lds_bytes '65536': allowed: an int >= 1"),
    ("num_cus", 0, "num_cus 0: allowed: an int >= 1"),
    ("wgmma", 1, "wgmma 1: allowed: true or false"),
    ("max_grid", [1, 2], "max_grid \\[1, 2\\] \\(list\\): allowed: a list of 3 items"),
    ("max_grid", [1, 2, "3"], "max_grid\\[2\\] '3': allowed: an int >= 1"),
    ("atoms", {"fp16": [["mma16816", 16, 8]]}, "atoms.fp16\\[0\\] .*allowed: a dict of data type"),
    ("atoms", {"fp16": [["mma16816", 16, 8, "16"]]}, "atoms.fp16\\[0\\] '16': allowed: a dict of data type"),
    ("atoms", [], "atoms \\[\\] \\(list\\): allowed: a dict of data type"),
    ("bogus", 1, "bogus 1: unknown field; allowed: a Target.to_record"),
])
def test_target_record_refuses_a_field_of_another_type_or_range(field, value, match):
    with pytest.raises(RecordError, match=f"^target record {match}"):
        Target.from_record({**get_target("sm_90").to_record(), field: value})


@pytest.mark.parametrize("arch", ["cpu", "sm_90", "gfx942"])
def test_solution_record_round_trips(arch):
    p = parse(LINE.split()).problem
    sol = DgradSolver().find_solution(p, get_target(arch), split_k=-1 if arch != "sm_90" else None)
    back = Solution.from_record(json.loads(json.dumps(sol.to_record())))
    assert back.spec == sol.spec and back.perf_config == sol.perf_config and back.notes == sol.notes
    assert back.kernels[0].source == sol.kernels[0].source and back.zero_fill == sol.zero_fill


NHWC = "--in_layout NHWC --out_layout NHWC --fil_layout NHWC"
RECORD_CASES = {      # a solution of each kind of record part: transforms, split-K reduction, split-N, ...
    "nchw-split-k-workspace": ("convfp16 -n 2 -c 64 -H 9 -W 9 -k 64 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 -F 2", "gfx942",
                               {"split_k": 4, "split_k_reduce": "workspace"}),
    "split-n": ("convfp16 -n 20000 -c 64 -H 112 -W 112 -k 64 -y 3 -x 3 -p 1 -q 1 -F 2 " + NHWC, "cpu", {}),
    "direct": ("conv -n 2 -c 16 -H 8 -W 8 -k 16 -y 3 -x 3 -p 1 -q 1 -g 16 -F 2 " + NHWC, "sm_90", {}),
    "patch-nchw": ("convfp16 -n 2 -c 3 -H 32 -W 32 -k 64 -y 16 -x 16 -u 16 -v 16 -F 2", "sm_90", {}),
    "nchw-pointwise": ("convbfp16 -n 3 -c 12 -H 7 -W 7 -k 18 -y 1 -x 1 -g 3 -F 2", "sm_90",
                       {"perf_config": "64,64,32,1,2,64,32,0,0,0,1,-1,4,7"}),
}
PROVENANCE = ("source", "notes", "warnings", "tuned_ms", "perfdb_path")
IDENTITY = (("spec", "problem"), ("spec", "target"))
"""Fields that say which problem and target the record is of: another value there may be a
record of another problem that agrees with itself, so only their absence and types count."""


def _record(case):
    line, arch, settings = RECORD_CASES[case]
    sol = DgradSolver().find_solution(parse(line).problem, get_target(arch), **settings)
    return sol, json.loads(json.dumps(sol.to_record()))


def _paths(value, path=()):
    """Every field's path in plain data (containers and leaves), depth first."""
    yield path
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for k, v in items:
        yield from _paths(v, path + (k,))


def _changed(rec, path, change):
    """``rec`` with the part at ``path`` replaced by ``change(part)`` (``DELETE``: removed);
    containers along the path copied, the rest shared."""
    if not path:
        return change(rec)
    top = dict(rec) if isinstance(rec, dict) else list(rec)
    if len(path) == 1 and change is DELETE:
        del top[path[0]]
    else:
        top[path[0]] = _changed(rec[path[0]], path[1:], change)
    return top


def DELETE(_):
    raise AssertionError("handled by _changed")


def _faults(value):
    """Wrong values of the kind ``value`` is: another value, another type, null."""
    if isinstance(value, bool):
        return [not value, int(value), None]
    if isinstance(value, int):
        return [value + 1, float(value), str(value), None]
    if isinstance(value, float):
        return [value + 1, str(value), None]
    if isinstance(value, str):
        return [value + "x", None, 0]
    if value is None:
        return [0, "x"]
    if isinstance(value, dict):
        return [{**value, "bogus": 1}, list(value.values()), None]
    return ([[]] if value else []) + [value + [value[-1] if value else 0], None]


@pytest.mark.parametrize("case", sorted(RECORD_CASES))
def test_every_field_of_a_solution_record_is_checked(case):
    """A record with any field missing, of another type or another value is refused with a
    RecordError naming that field (a record without its transforms ran the NHWC kernel on
    NCHW data: a silently wrong dX; a missing key was a bare KeyError). The problem and
    target fields are checked for absence and type (another value may be another problem's
    consistent record); the provenance fields by type only."""
    sol, rec = _record(case)
    back = Solution.from_record(rec)
    assert back.to_record() == sol.to_record() and back.kernels[0].source == sol.kernels[0].source
    tried = 0
    for path in _paths(rec):
        if not path or path[0] in PROVENANCE:
            continue
        part = rec
        for k in path:
            part = part[k]
        identity = path[:2] in IDENTITY and len(path) > 2
        faults = [None] if identity else _faults(part)
        for fault in faults + ([DELETE] if isinstance(path[-1], str) else []):
            bad = _changed(rec, path, DELETE if fault is DELETE else (lambda _, f=fault: f))
            with pytest.raises(RecordError) as e:
                Solution.from_record(bad)
            named = "solution record " + ("" if path[0] in ("images", "layouts") or path[:2] in IDENTITY
                                          else path[0])          # another problem: where it first differs
            assert str(e.value).startswith(named) and "allowed: " in str(e.value), (path, fault, str(e.value))
            assert "\n" not in str(e.value)
            tried += 1
    assert tried > 100


@pytest.mark.parametrize("name,value,match", [
    ("source", "magic", "source 'magic': allowed: 'default', 'perf-config', 'perfdb'"),
    ("source", None, "source None"),
    ("notes", "one note", "notes 'one note': allowed: a list of strings"),
    ("notes", ["ok", 3], r"notes\[1\] 3: allowed: a string"),
    ("warnings", None, "warnings None"),
    ("tuned_ms", "1.5", "tuned_ms '1.5': allowed: a finite number >= 0 or null"),
    ("tuned_ms", -1.0, "tuned_ms -1.0"),
    ("tuned_ms", float("nan"), "tuned_ms nan"),
    ("tuned_ms", True, "tuned_ms True"),
    ("perfdb_path", 3, "perfdb_path 3: allowed: a string or null"),
])
def test_the_provenance_of_a_solution_record_is_checked_by_type(name, value, match):
    _, rec = _record("direct")
    with pytest.raises(RecordError, match=f"solution record {match}"):
        Solution.from_record({**rec, name: value})
    assert Solution.from_record({**rec, "tuned_ms": 2, "perfdb_path": "db", "source": "perfdb"}).tuned_ms == 2.0


@pytest.mark.parametrize("rec", [None, "record", [], 3])
def test_a_solution_record_that_is_not_a_dict_is_refused(rec):
    with pytest.raises(RecordError, match="solution record .*allowed: a Solution.to_record"):
        Solution.from_record(rec)


def test_a_record_whose_config_is_invalid_for_its_problem_is_refused_saying_why():
    _, rec = _record("nchw-split-k-workspace")
    rec["spec"]["config"] = "64,64,32,2,2,32,32,0,0,0,1,-1,3"          # 3 stages: gfx942 has no cp.async
    with pytest.raises(RecordError, match="spec.config .*: stages 3 > 2 needs asynchronous copies.*allowed: a "
                                          "config valid for spec.problem on spec.target"):
        Solution.from_record(rec)


def test_a_worker_refuses_a_tampered_record_as_data():
    """The worker's answer to a record it refuses is a failure naming the field, not a
    traceback or a run of something else."""
    sol, rec = _record("direct")
    rec = {**rec, "transforms": [{"tensor": "dY", "src": "NCHW", "dst": "NHWC", "batch": 2, "rows": 16, "cols": 64,
                                  "elem_bytes": 4, "offset": 0}]}
    res = workers.run_one(workers.make_job("timing", solution=rec, backend="cpu", iters=1), timeout=60.0)
    assert not res.ok and "solution record transforms" in res.reason


@pytest.mark.parametrize("arch,line,cfg", [
    ("sm_90", "convfp16 -n 1 -c 64 -H 4 -W 4 -k 64 -y 3 -x 3 -p 1 -q 1", None),      # the default splits already
    ("gfx942", "convfp16 -n 1 -c 64 -H 4 -W 4 -k 64 -y 3 -x 3 -p 1 -q 1", None),     # it does not: -1 resolved
    ("sm_90", "convfp16 -n 2 -c 64 -H 14 -W 14 -k 64 -y 3 -x 3 -p 1 -q 1 -g 64", None),   # direct: no K split
    ("gfx942", "convfp16 -n 1 -c 64 -H 4 -W 4 -k 64 -y 3 -x 3 -p 1 -q 1", "64,64,32,2,2,32,32,0,0,0,2,-1,2"),
    ("gfx942", "convfp16 -n 1 -c 64 -H 4 -W 4 -k 64 -y 3 -x 3 -p 1 -q 1", "64,64,32,2,2,32,32,0,0,0,-1,-1,2"),
])
def test_split_k_minus_one_always_says_what_it_resolved_to(arch, line, cfg):
    """--split-k -1 lets the solver choose, and the choice is printed (README): also where
    the config's own split is the choice (a split default, a given split, a schedule that
    splits no K), not only where -1 had to be resolved."""
    p = parse(f"{line} -F 2 {NHWC}".split()).problem
    sol = DgradSolver().find_solution(p, get_target(arch), perf_config=cfg, split_k=-1)
    chosen = getattr(sol.spec, "split_k", 1)
    said = [n for n in sol.notes if n.startswith("Split-K: -1 resolved to ")]
    assert len(said) == 1 and said[0].startswith(f"Split-K: -1 resolved to {chosen}"), sol.notes


def test_find_solution_policy_and_notes(tmp_path):
    """Given config > perf-db > default, each with its note; settings on top."""
    solver, p, t = DgradSolver(), parse(LINE.split()).problem, get_target("sm_90")
    default = solver.find_solution(p, t)
    assert default.source == "default" and default.notes == ()
    assert default.perf_config == solver.get_default_performance_config(p, t)
    given = solver.find_solution(p, t, perf_config="64,64,32,2,2,32,32,0,0,0,1,-1,3")
    assert given.source == "perf-config" and given.notes == ("Using --perf-config 64,64,32,2,2,32,32,0,0,0,1,-1,3",)
    split = solver.find_solution(p, t, perf_config="64,64,32,2,2,32,32,0,0,0,-1,-1,3")
    assert split.perf_config.split_k == split.spec.split_k >= 1
    assert split.notes[-1] == f"Split-K: -1 resolved to {split.spec.split_k}"
    # an unreadable perf-db is a warning, not an error
    bad = tmp_path / "dir.sqlite"
    bad.mkdir()
    warned = solver.find_solution(p, t, perfdb=bad, perfdb_label="--perfdb X")
    assert warned.source == "default" and warned.warnings[0].startswith("--perfdb X unusable: ")


def test_a_warpgroup_default_that_cannot_split_falls_back_with_a_note():
    p = parse("convfp16 -n 64 -c 512 -H 28 -W 28 -k 512 -y 1 -x 1 -F 2 --in_layout NHWC --out_layout NHWC "
              "--fil_layout NHWC".split()).problem
    t = get_target("sm_90")
    base = DgradSolver().find_solution(p, t)
    assert base.schedule in (KernelSchedule.WGMMA_PERSISTENT, KernelSchedule.WGMMA_TMA)
    # the persistent cp.async schedule never splits; the TMA one not into more slices than
    # the shortest sub-GEMM's k-tiles (8 here)
    split = 2 if base.schedule is KernelSchedule.WGMMA_PERSISTENT else 16
    sol = DgradSolver().find_solution(p, t, split_k=split)
    assert sol.spec.split_k == split and sol.schedule is KernelSchedule.WGMMA and "not possible with" in sol.notes[0]
    if base.schedule is KernelSchedule.WGMMA_TMA:       # a split it can run stays on TMA
        two = DgradSolver().find_solution(p, t, split_k=2)
        assert two.spec.split_k == 2 and two.schedule is KernelSchedule.WGMMA_TMA


def _count_constructions(monkeypatch, tmp_path, opts):
    log = tmp_path / "specs.log"
    monkeypatch.setenv("DGRAD_TEST_SPEC_LOG", str(log))
    monkeypatch.setenv(workers.PRELOAD_ENV, os.path.join(ROOT, "tests", "count_specs.py"))
    import miopen_solver.spec as spec_mod
    spec_mod._cached_spec.cache_clear()
    import count_specs
    importlib.reload(count_specs)                 # the driver's process counts too
    try:
        status, out = run_line(LINE.split(), backend="cpu", use_perfdb=False, **opts)
    finally:
        spec_mod.DgradSpec.__init__ = count_specs._real_init
    assert status == 0, out
    per = collections.Counter(tuple(line.split()) for line in log.read_text().splitlines())
    return per


@pytest.mark.parametrize("opts", [{}, {"arch": "sm_90", "split_k": -1}], ids=["default", "sm90-split-k"])
def test_one_spec_construction_per_process_per_config(monkeypatch, tmp_path, opts):
    """The driver validates each config it considers once; each worker makes the decided
    spec once from its record's problem, target and config (and compares the rest); three
    processes in all."""
    per = _count_constructions(monkeypatch, tmp_path, opts)
    assert per and max(per.values()) == 1, per
    pids = {pid for pid, _ in per}
    assert len(pids) == 3 and str(os.getpid()) in pids        # driver, timing and verification workers
    for pid in pids - {str(os.getpid())}:
        assert sum(1 for p, _ in per if p == pid) == 1          # a worker builds the one spec it was sent


def test_a_slow_worker_start_does_not_count_against_the_job(monkeypatch):
    """``--timeout`` bounds the job: a worker that takes 6 s to start still runs a 5 s job."""
    monkeypatch.setenv(workers.PRELOAD_ENV, os.path.join(ROOT, "tests", "slow_start.py"))
    sol = DgradSolver().get_solution(parse(LINE.split()).problem, get_target("cpu"))
    res = workers.run_one(workers.make_job("timing", solution=sol, backend="cpu", iters=1), timeout=5.0)
    assert res.ok, res.reason
    with workers.Worker("timing", timeout=30.0) as w:
        monkeypatch.setenv(workers.STARTUP_ENV, "0.5")
        res = w.run(workers.make_job("timing", solution=sol, backend="cpu", iters=1))
    assert not res.ok and res.failure == "timeout" and "did not start within 0.5 s" in res.reason


def test_replay_numerics_through_a_worker_equal_the_in_process_ones():
    """GPU replays run their numerics in a verification worker; on the CPU backend the same
    path gives the in-process engine's verdict for the same solution and seed."""
    from driver.replay_cmd import WorkerNumerics
    from miopen_solver import fixtures as fx
    from miopen_solver.runtime.cpu import CpuEngine
    sol = DgradSolver().get_solution(parse(LINE.split()).problem, get_target("cpu"))
    runner = WorkerNumerics("cpu", 120.0)
    try:
        remote = runner.verify(sol, fx.NUMERIC_SEED)
        assert remote == CpuEngine().verify(sol, fx.NUMERIC_SEED) and remote.ok
        fixture = fx.load([os.path.join(ROOT, "fixtures")])[0]
        assert fx.replay(fixture, runner).status == fx.PASSED
    finally:
        runner.close()


DW = ("convfp16 -n 2 -c 32 -H 14 -W 14 -k 32 -y 3 -x 3 -p 1 -q 1 -g {g} -F 2 "
      "--in_layout NHWC --out_layout NHWC --fil_layout NHWC")


@pytest.mark.parametrize("settings", [{"split_k": -1}, {"kouter": "auto"}, {"split_k": 1},
                                      {"split_k": -1, "kouter": "auto"}])
def test_settings_a_direct_default_already_is_leave_it_alone(settings):
    """``-1``/``1``/``auto`` ask for what the direct schedule is (one write per dX element, its
    own dY path): the default stays (a regression found in review: rc 2), with no note but
    the choice ``-1`` asked for (README: the choice is printed)."""
    p = parse(DW.format(g=32).split()).problem
    base = DgradSolver().find_solution(p, get_target("sm_90"))
    sol = DgradSolver().find_solution(p, get_target("sm_90"), **settings)
    said = ("Split-K: -1 resolved to 1 (the direct default's own)",) if settings.get("split_k") == -1 else ()
    assert base.schedule is KernelSchedule.DIRECT and sol.perf_config == base.perf_config and sol.notes == said


def test_settings_a_direct_default_cannot_take_move_to_the_gemm_default_or_say_why():
    solver, t = DgradSolver(), get_target("sm_90")
    even = parse(DW.format(g=16).split()).problem               # cpg 2: split-K possible on GEMMs
    sol = solver.find_solution(even, t, split_k=2)
    assert sol.schedule is KernelSchedule.WARP_MMA and sol.spec.split_k == 2
    assert "not possible with the direct default" in sol.notes[0] and "using the warp-MMA default" in sol.notes[0]
    odd = parse(DW.format(g=32).split()).problem                 # cpg 1, fp16: no packed atomic pair,
    sol = solver.find_solution(odd, t, split_k=2)                # split-K through the workspace
    assert sol.schedule is KernelSchedule.WARP_MMA and sol.spec.split_k_reduce == "workspace"
    with pytest.raises(PerfConfigError, match="nor with the warp-MMA default .*needs an even cpg") as e:
        solver.find_solution(odd, t, split_k=2, split_k_reduce="atomic")
    assert e.value.config is not None and e.value.config.split_k == 2


def test_a_setting_that_changes_a_default_or_perfdb_config_says_so():
    p = parse(DW.format(g=32).split()).problem
    base = DgradSolver().find_solution(p, get_target("sm_90"))
    sol = DgradSolver().find_solution(p, get_target("sm_90"), kouter="on")
    assert sol.perf_config == base.perf_config.replace(lds_k_outer=1)
    assert sol.notes == (f"--kouter on: running {sol.perf_config} (the direct default {base.perf_config} "
                         f"with the setting)",)


@pytest.mark.parametrize("bad", [{"split_k": "2"}, {"split_k": True}, {"split_k": 0}, {"split_k": 65},
                                 {"kouter": ["on"]}, {"kouter": "yes"}])
def test_find_solution_refuses_bad_settings_with_its_own_error(bad):
    p = parse(DW.format(g=32).split()).problem
    with pytest.raises(PerfConfigError, match="allowed: "):
        DgradSolver().find_solution(p, get_target("sm_90"), **bad)


@pytest.mark.parametrize("field", ["1_6", "+4", "\u0664", " 4 4", "0x10", "4.0"])
def test_perf_config_fields_are_decimal_ascii_integers(field):
    """MIOpen reads perf-config fields as decimal integers: Python's int() extras
    (underscores, a plus sign, other scripts' digits) are refused."""
    with pytest.raises(PerfConfigError, match="is not an integer"):
        PerfConfig.parse("128,128,64,2,1,64,128,0,0,0,1,-1," + field)
