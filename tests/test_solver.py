"""DgradSolver: MIOpen's verbs, the Solution record and search."""

import hashlib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from miopen_solver import SOLVER_ID, SOLVER_NAME
from miopen_solver.applicability import NotApplicableError, launch_problem
from miopen_solver.command import parse
from miopen_solver.config import KernelSchedule
from miopen_solver.errors import PerfConfigError, TargetError
from miopen_solver.perfdb import PerfDb
from miopen_solver.problem import ConvProblem
from miopen_solver.solver import ALGORITHM, DgradSolver
from miopen_solver.spec import PerfConfig, launch_spec, make_spec
from miopen_solver.target import PRESETS, get_target
from test_applicability import COMMANDS
from test_spec import problems

SOLVER = DgradSolver()
GFX942, SM90 = get_target("gfx942"), get_target("sm_90")
BASES = ("conv", "convfp16", "convbfp16")


def nhwc(**kw):
    base = dict(N=2, C=32, Hi=10, Wi=10, K=32, Y=3, X=3, pH=1, pW=1, dtype="fp16",
                in_layout="NHWC", out_layout="NHWC", fil_layout="NHWC")
    base.update(kw)
    return ConvProblem(**base)


def test_ids():
    assert SOLVER.solver_db_id() == SOLVER_NAME == "ConvDgradImplicitGemmTilde"
    assert SOLVER.solution_id == SOLVER_ID == 1000


def test_solution_id_is_past_miopens_registry():
    """MIOpen 3.5's SolverRegistrar (rocm-libraries src/solver.cpp, 00a55ad9) ends at 217;
    200 there is TransposedConvWinograd3x3MultipassWrW<3,6>, so we moved off it."""
    from miopen_solver import LEGACY_SOLVER_IDS, MIOPEN_MAX_SOLVER_ID
    assert MIOPEN_MAX_SOLVER_ID == 217 and SOLVER_ID > 4 * MIOPEN_MAX_SOLVER_ID
    assert LEGACY_SOLVER_IDS == (200,) and SOLVER_ID not in LEGACY_SOLVER_IDS
    assert ALGORITHM == "miopenConvolutionBwdDataAlgoImplicitGEMM"


def _line_problems():
    """Every data line that parses as backward data, in all three dtypes (the suite says:
    swap convfp16 for convbfp16 or conv)."""
    out = []
    for label, cmd, _ in COMMANDS:
        for base in BASES:
            tokens = cmd.split()
            tokens[0] = base
            dc = parse(tokens, allow_any_direction=True)
            if dc.flags["forw"] == 2:
                out.append((f"{label}-{base}", dc.problem))
    return out


LINE_PROBLEMS = _line_problems()


@pytest.mark.parametrize("arch", sorted(PRESETS))
def test_default_config_is_valid_for_every_applicable_line(arch):
    t = get_target(arch)
    applicable = 0
    for label, p in LINE_PROBLEMS:
        if not SOLVER.is_applicable(p, t):
            continue
        applicable += 1
        cfg = SOLVER.get_default_performance_config(p, t)
        assert SOLVER.is_valid_performance_config(p, t, cfg) == (True, ""), label
        launch_spec(launch_problem(p), t, cfg)      # a split batch: one launch's problem
    assert applicable >= 3 * (14 + 14 + 1)     # suite + NHWC research lines + depthwise line


@settings(max_examples=200, deadline=None)
@given(problems(), st.sampled_from(sorted(PRESETS)))
def test_applicable_implies_a_valid_default(problem, arch):
    t = get_target(arch)
    v = SOLVER.is_applicable(problem, t)
    assert v.ok                      # random NHWC 2-D fp16/bf16/fp32 problems are all in scope
    cfg = SOLVER.get_default_performance_config(problem, t)
    assert SOLVER.is_valid_performance_config(problem, t, cfg)[0]


def test_workspace_is_zero():
    assert SOLVER.get_workspace_size(nhwc(), GFX942) == 0
    assert SOLVER.get_workspace_size(nhwc(), SM90, PerfConfig(64, 32, 32, 2, 1, 32, 32, 0, 0, 0, 2, -1, 3)) == 0
    with pytest.raises(PerfConfigError):
        SOLVER.get_workspace_size(nhwc(), SM90, PerfConfig(split_k=0))


# ------------------------------------------------------------------ get_solution
def test_solution_plain_tilde():
    # 3x3 s1 p1 on 2x10x10: one sub-GEMM of 200 rows; default on gfx942: tile 64x32
    # (cpg 32 -> tile_n 32, 4 tiles < 304 CUs -> tile_m 64) -> ceil(200/64) = 4 tiles.
    sol = SOLVER.get_solution(nhwc(), GFX942)
    assert sol.solver_id == SOLVER_NAME and sol.solution_id == 1000 and sol.algorithm == ALGORITHM
    assert sol.perf_config.serialize() == "64,32,32,2,1,32,32,0,0,0,1,-1,2"
    (k,) = sol.kernels
    assert k.grid == (4, 1, 1) and k.block == (128, 1, 1)
    assert k.name == sol.spec.kernel_name and k.lds_bytes == sol.spec.lds_bytes
    assert sol.zero_fill.kind == "none" and sol.zero_fill.bytes == 0 and sol.zero_fill.blocks == 0
    assert sol.workspace_bytes == 0
    d = sol.as_dict()
    assert json.loads(json.dumps(d)) == d and d["kernels"][0]["grid"] == [4, 1, 1]


def test_solution_split_k_has_a_memset():
    p = nhwc(G=2, C=32, K=64)
    cfg = PerfConfig(64, 16, 32, 2, 1, 32, 16, 0, 0, 0, 4, -1, 3)
    sol = SOLVER.get_solution(p, SM90, cfg)
    # 200 rows / 64 = 4 row tiles x cpg 16 / 16 = 1 -> x = 4; y = G = 2; z = split 4.
    assert sol.kernels[0].grid == (4, 2, 4)
    assert sol.zero_fill.kind == "memset" and sol.zero_fill.bytes == 2 * 32 * 10 * 10 * 2


def test_solution_zero_fill_blocks_extend_the_grid():
    # 1x1 s2 on 2x12x12: 2*6*6 = 72 rows -> 2 row tiles of 64; 3/4 of dX is written by nobody.
    p = nhwc(Hi=12, Wi=12, Y=1, X=1, pH=0, pW=0, sH=2, sW=2)
    cfg = PerfConfig(64, 32, 32, 2, 1, 32, 32, 0, 0, 0, 1, -1, 2)
    sol = SOLVER.get_solution(p, GFX942, cfg)
    assert sol.zero_fill.kind == "blocks" and sol.zero_fill.blocks >= 1
    assert sol.kernels[0].grid == (2 + sol.zero_fill.blocks, 1, 1)
    assert sol.zero_fill.blocks == sol.spec.zero_fill_blocks


def test_solution_source_is_emitted_lazily():
    pytest.importorskip("miopen_solver.kernels", reason="kernels package not importable")
    sol = SOLVER.get_solution(nhwc(Hi=12, Wi=12, sH=2, sW=2), SM90)
    src = sol.kernels[0].source
    assert src is sol.kernels[0].source                      # emitted once
    assert src.sha256 == hashlib.sha256(src.text.encode()).hexdigest()
    assert src.name == sol.kernels[0].name
    assert tuple(src.grid) == sol.kernels[0].grid and tuple(src.block) == sol.kernels[0].block


def test_get_solution_errors():
    with pytest.raises(NotApplicableError) as e:
        SOLVER.get_solution(nhwc(in_layout="CHWN", out_layout="CHWN", fil_layout="CHWN"), GFX942)
    assert e.value.verdict.codes == ("LAYOUT",)
    with pytest.raises(PerfConfigError, match="split_k"):
        SOLVER.get_solution(nhwc(), GFX942, PerfConfig(split_k=0, stages=2))
    # Every target runs NCHW, through layout transforms around the NHWC kernel.
    for t in (GFX942, get_target("cpu")):
        sol = SOLVER.get_solution(nhwc(in_layout="NCHW", out_layout="NCHW", fil_layout="NCHW"), t)
        assert sol.kernels[0].grid[1] == 1 and [x.tensor for x in sol.transforms] == ["dY", "W"]   # dX: the kernel
        assert sol.spec.nchw_dx


# ------------------------------------------------------------------ search
def test_search_yields_distinct_valid_configs_default_first():
    p = nhwc(dtype="fp32", C=64, K=256, Hi=6, Wi=6)
    configs = list(SOLVER.search(p, GFX942))
    assert configs[0] == SOLVER.get_default_performance_config(p, GFX942)
    specs = [make_spec(p, GFX942, c) for c in configs]
    names = [s.kernel_name for s in specs]
    assert len(names) == len(set(names)) > 100
    assert any(s.split_k > 1 for s in specs)                    # fp32 atomics: split-K explored
    assert {s.config.stages for s in specs} <= {1, 2}           # no async copies on gfx942
    assert all(s.config.tile_n <= 64 for s in specs)            # cpg 64: wider tiles are waste


def test_search_respects_target_and_atomics():
    odd = nhwc(C=33, K=64)
    specs = [make_spec(odd, SM90, c) for c in SOLVER.search(odd, SM90)]
    split = [s for s in specs if s.split_k > 1]                 # fp16 odd cpg: no packed atomic,
    assert split and all(s.split_k_reduce == "workspace" for s in split)    # split-K through the workspace
    assert all(s.config.split_k_reduce == 0 for s in specs)     # chosen by the rule (auto), not pinned
    even = [make_spec(nhwc(), SM90, c) for c in SOLVER.search(nhwc(), SM90)]
    assert {s.split_k_reduce for s in even if s.split_k > 1} == {"atomic"}  # where atomics are allowed
    assert {s.lds_k_outer for s in specs} == {False, True}      # both B layouts on sm_90
    amd = [make_spec(nhwc(), GFX942, c) for c in SOLVER.search(nhwc(), GFX942)]
    assert {s.lds_k_outer for s in amd} == {False}              # no transposing read on gfx942


def test_search_of_a_non_applicable_problem_is_empty():
    assert list(SOLVER.search(nhwc(in_layout="CHWN", out_layout="CHWN", fil_layout="CHWN"), SM90)) == []


# ------------------------------------------------------------------ perf-db lookup
def test_find_solution_looks_up_the_perfdb(tmp_path):
    """find_solution's perf-db step: a valid record of this problem and arch wins; another
    arch, an invalid or a malformed record fall back to the default (MIOpen re-validates db
    hits), the latter two with a note naming the record."""
    p = nhwc()
    key = p.problem_key()
    path = tmp_path / "db.sqlite"
    default = SOLVER.get_default_performance_config(p, SM90)

    def found(target, arch=None):
        sol = SOLVER.find_solution(p, target, perfdb=path, perfdb_arch=arch)
        return sol.perf_config, sol.source, sol.notes
    assert found(SM90)[:2] == (default, "default")
    tuned = PerfConfig(32, 32, 32, 1, 2, 32, 16, 0, 0, 0, 1, 0, 4)
    with PerfDb(path) as db:
        db.update(key, "sm_90", SOLVER_NAME, tuned.serialize(), 0.01)
    cfg, source, notes = found(SM90)
    assert (cfg, source) == (tuned, "perfdb") and notes[0].startswith(f"Using perf-db config {tuned.serialize()}")
    assert found(GFX942)[1] == "default"                       # the record is per arch
    assert found(SM90, arch="sm_90@cpu")[1] == "default"       # and per perf-db arch
    for bad in (tuned.replace(split_k=0).serialize(), "1,2,3"):
        with PerfDb(path) as db:
            db.update(key, "sm_90", SOLVER_NAME, bad, force=True)
        cfg, source, notes = found(SM90)
        assert (cfg, source) == (default, "default") and notes[0].startswith(f"Ignoring perf-db config {bad} ")
    assert SOLVER.find_solution(p, SM90, perfdb=None).source == "default"


@pytest.mark.parametrize("kw,changed", [
    ({"kouter": "off"}, "64,64,32,2,2,32,32,0,0,0,1,0,3"),
    ({"split_k": 2}, "64,64,32,2,2,32,32,0,0,0,2,-1,3"),
    ({"kouter": "auto"}, None),                         # what the given config already says
])
def test_settings_on_a_given_config_say_what_runs(kw, changed):
    """A given --perf-config that --kouter/--split-k change is reported with what runs (as a
    default or perf-db config is), not only as typed."""
    given = "64,64,32,2,2,32,32,0,0,0,1,-1,3"
    sol = SOLVER.find_solution(nhwc(), SM90, perf_config=given, **kw)
    notes = [n for n in sol.notes if "running" in n]
    if changed is None:
        assert notes == []
    else:
        assert sol.perf_config.serialize() == changed
        assert notes == [f"{' '.join(f'--{k.replace(chr(95), chr(45))} {v}' for k, v in kw.items())}: running "
                         f"{changed} (the given config {given} with the setting)"]


@pytest.mark.parametrize("line,family", [
    ("convfp16 -n 2 -c 3 -H 32 -W 32 -k 64 -y 16 -x 16 -u 16 -v 16 -F 2 --in_layout NHWC --out_layout NHWC "
     "--fil_layout NHWC", KernelSchedule.PATCH_GEMM),
    ("convbfp16 -n 2 -c 64 -H 14 -W 14 -k 128 -y 1 -x 1 -F 2", KernelSchedule.NCHW_POINTWISE),
])
def test_kouter_off_on_a_virtual_gemm_wgmma_default_stays_in_its_family(line, family):
    """The patch and NCHW pointwise wgmma defaults cannot take --kouter off (wgmma reads W
    k-outer); the nearest config that can is the same family's warp-MMA default, not the
    tilde GEMM (which for a patch embedding is a GemmN = cpg GEMM per phase)."""
    from miopen_solver.command import parse
    p = parse(line.split()).problem
    default = SOLVER.find_solution(p, SM90)
    assert default.schedule.warpgroup and default.schedule.virtual_gemm
    sol = SOLVER.find_solution(p, SM90, kouter="off")
    assert sol.schedule is family and sol.perf_config.lds_k_outer == 0
    assert any(f"using the {family.slug} default with the setting" in n for n in sol.notes)


def test_a_config_whose_vector_caps_are_narrowed_says_so():
    """vector_size_a/b/c are caps: a wider one than the problem allows is clamped, never
    refused, and the solution says what runs (two configs can be one kernel)."""
    p = nhwc(C=33, K=64)                     # odd cpg: W loads and dX stores one element wide
    sol = SOLVER.find_solution(p, SM90, perf_config="64,64,32,2,2,32,32,8,8,8,1,-1,3")
    assert (sol.spec.vec_a, sol.spec.vec_b, sol.spec.vec_c) == (8, 1, 1)
    assert "Vector widths narrowed to what the problem allows: vector_size_b 8 -> 1, vector_size_c 8 -> 1" in sol.notes
    auto = SOLVER.find_solution(p, SM90, perf_config="64,64,32,2,2,32,32,0,0,0,1,-1,3")
    assert auto.spec.kernel_name == sol.spec.kernel_name
    assert not any(n.startswith("Vector widths") for n in auto.notes)


@pytest.mark.parametrize("arch", sorted(PRESETS))
def test_every_verb_takes_the_target_or_its_name(tmp_path, arch):
    """The README's ``DgradSolver.find_solution(problem, target, ...)`` with ``"gfx942"`` for
    the target raised ``AttributeError: 'str' object has no attribute 'atoms_for'`` from deep
    inside; every verb takes a preset's name as its Target."""
    p, t = nhwc(), get_target(arch)
    cfg = SOLVER.get_default_performance_config(p, t)
    assert SOLVER.is_applicable(p, arch) == SOLVER.is_applicable(p, t)
    assert SOLVER.get_default_performance_config(p, arch) == cfg
    assert SOLVER.is_valid_performance_config(p, arch, cfg) == SOLVER.is_valid_performance_config(p, t, cfg)
    assert SOLVER.get_workspace_size(p, arch) == SOLVER.get_workspace_size(p, t)
    assert SOLVER.get_solution(p, arch).kernel_name == SOLVER.get_solution(p, t).kernel_name
    assert SOLVER.find_solution(p, arch).as_dict() == SOLVER.find_solution(p, t).as_dict()
    assert list(SOLVER.search(p, arch)) == list(SOLVER.search(p, t))
    with PerfDb(tmp_path / "db.sqlite") as db:
        db.update(p.problem_key(), arch, SOLVER_NAME, cfg.serialize(), 1.0)
        assert SOLVER.lookup_performance_config(p, arch, db)[0] == cfg


def test_an_unknown_target_is_named():
    with pytest.raises(ValueError, match="unknown arch 'gfx999'; known: cpu, gfx90a"):
        SOLVER.find_solution(nhwc(), "gfx999")
    with pytest.raises(TargetError, match="target 942: allowed: a miopen_solver.target.Target or an arch name: "
                                          "cpu, gfx90a"):
        SOLVER.is_applicable(nhwc(), 942)


def test_the_readme_lists_every_kernel_schedule_code():
    """The README's perf-config section lists the 14th field's codes and says "any other
    code is refused"; it stopped at 8 after 9 and 10 (the persistent and TMA patch GEMMs)
    were added, so a reader took them for refused codes. Every code must be listed there."""
    from pathlib import Path
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    start = readme.index("The 14th field is the kernel schedule")
    section = " ".join(readme[start:readme.index("any other code is refused", start)].split())
    for s in KernelSchedule:
        assert f"{int(s)} `{s.slug}`" in section, s


# ------------------------------------------------------------------ arguments of the verbs
TEXT_CONFIGS = ["64,64,32,2,2,32,32,0,0,0,1,-1,3", "64,64,32,2,2,32,32,0,0,0,-1,-1,3,0,2"]


@pytest.mark.parametrize("text", TEXT_CONFIGS)
def test_the_verbs_take_a_perf_config_as_text_too(text):
    """is_valid_performance_config, get_solution and get_workspace_size take the text form
    (PerfConfig.parse) as find_solution does; it was an AttributeError."""
    p, cfg = nhwc(), PerfConfig.parse(text)
    assert SOLVER.is_valid_performance_config(p, SM90, text) == SOLVER.is_valid_performance_config(p, SM90, cfg)
    assert SOLVER.is_valid_performance_config(p, SM90, text)[0]
    assert SOLVER.get_solution(p, SM90, text).to_record() == SOLVER.get_solution(p, SM90, cfg).to_record()
    assert SOLVER.get_workspace_size(p, SM90, text) == SOLVER.get_workspace_size(p, SM90, cfg)


@pytest.mark.parametrize("bad", [5, 1.5, True, b"64,64,32,2,2,32,32,0,0,0,1,-1,3", ["64", "64"],
                                 (64, 64, 32, 2, 2, 32, 32, 0, 0, 0, 1, -1, 3), {"tile_m": 64}, object()])
def test_the_verbs_refuse_a_perf_config_of_another_type_naming_it(bad):
    p = nhwc()
    for verb in (SOLVER.is_valid_performance_config, SOLVER.get_solution, SOLVER.get_workspace_size):
        with pytest.raises(PerfConfigError, match=r"^config .*: allowed: a miopen_solver.config.PerfConfig or its "
                                                  r"text \(13 to 15 comma-separated integers"):
            verb(p, SM90, bad)
    with pytest.raises(PerfConfigError, match="^--perf-config .*: allowed: a miopen_solver.config.PerfConfig"):
        SOLVER.find_solution(p, SM90, perf_config=bad)


@pytest.mark.parametrize("text", ["", "64,64", "64,64,32,2,2,32,32,0,0,0,1,-1,x", "a" * 10**5])
def test_malformed_config_text_is_invalid_or_refused(text):
    """Asked whether text is valid, the answer is no with the parser's reason; the verbs that
    need a config refuse it with that reason."""
    ok, why = SOLVER.is_valid_performance_config(nhwc(), SM90, text)
    assert not ok and why.startswith("perf config") and len(why) < 400
    for verb in (SOLVER.get_solution, SOLVER.get_workspace_size):
        with pytest.raises(PerfConfigError, match="^config '.*perf config"):
            verb(nhwc(), SM90, text)


NOT_APPLICABLE = {
    "TRANSPOSED_MODE": nhwc(mode="trans"),
    "SPATIAL_DIM": nhwc(spatial_dim=3, in_layout="NDHWC", out_layout="NDHWC", fil_layout="NDHWC"),
    "LAYOUT": nhwc(in_layout="CHWN"),
    "DTYPE": nhwc(dtype="int8"),
    "TF32": nhwc(dtype="fp32", tf32=True),                        # on gfx90a: no TF32 atom
    "INDEX_OVERFLOW": nhwc(pH=2**30),
}


@pytest.mark.parametrize("code", sorted(NOT_APPLICABLE))
def test_workspace_of_a_problem_that_is_not_applicable_is_refused_naming_why(code):
    """MIOpen asks a solver's workspace only of a problem it is applicable to; here a
    non-applicable problem answered a number (0 for a 3-D one) or crashed deep in the layout
    code. Every verb that needs an applicable problem refuses it with the verdict's reasons."""
    p, t = NOT_APPLICABLE[code], get_target("gfx90a")
    verdict = SOLVER.is_applicable(p, t)
    assert not verdict.ok and code in [r.code for r in verdict.reasons]
    for call in (lambda: SOLVER.get_workspace_size(p, t), lambda: SOLVER.get_workspace_size(p, t, TEXT_CONFIGS[0]),
                 lambda: SOLVER.get_solution(p, t)):
        with pytest.raises(NotApplicableError, match=f"^not applicable: .*{code}: ") as e:
            call()
        assert [r.code for r in e.value.verdict.reasons] == [r.code for r in verdict.reasons]


@pytest.mark.parametrize("bad", [None, 942, 9.42, b"gfx942", ["gfx942"], {"arch": "gfx942"}])
def test_every_verb_refuses_a_target_of_another_type_listing_the_presets(bad):
    known = ", ".join(sorted(PRESETS))
    p = nhwc()
    verbs = [lambda: SOLVER.is_applicable(p, bad), lambda: SOLVER.get_default_performance_config(p, bad),
             lambda: SOLVER.is_valid_performance_config(p, bad, TEXT_CONFIGS[0]),
             lambda: SOLVER.get_workspace_size(p, bad), lambda: SOLVER.get_solution(p, bad),
             lambda: SOLVER.find_solution(p, bad), lambda: list(SOLVER.search(p, bad))]
    for verb in verbs:
        with pytest.raises(TargetError, match=f"^target .*: allowed: a miopen_solver.target.Target or an arch "
                                              f"name: {known}$"):
            verb()


# ------------------------------------------------------------------ arguments of the wrong kind
def _bad_argument_cases():
    import numpy as np
    from miopen_solver import layouts
    from miopen_solver.perfdb import PerfDb
    from miopen_solver.runtime.cpu import CpuEngine
    p = parse("convfp16 -n 2 -c 16 -H 8 -W 8 -k 16 -y 3 -x 3 -p 1 -q 1 -F 2".split()).problem
    s = DgradSolver()
    dy, w = np.zeros(layouts.dy_shape(p), np.float16), np.zeros(layouts.w_shape(p), np.float16)
    sol = s.find_solution(p, "cpu")
    line = "convfp16 -n 2 -c 16"
    return [     # (id, call, exception type, words of the message)
        ("search split_k_reduce list", lambda: list(s.search(p, "sm_90", split_k_reduce=[])), ValueError,
         ["--split-k-reduce []", "allowed: auto"]),
        ("dtype list", lambda: p.replace(dtype=["fp16"]), ValueError, ["dtype ['fp16']", "allowed: fp32"]),
        ("mode list", lambda: p.replace(mode=["conv"]), ValueError, ["mode ['conv']", "allowed: conv, trans"]),
        ("forw text", lambda: s.is_applicable(p, "sm_90", forw="2"), TypeError, ["forw '2'", "allowed: an int"]),
        ("forw None", lambda: s.is_applicable(p, "sm_90", forw=None), TypeError, ["forw None"]),
        *[(f"{verb} on a line of text", call, TypeError, ["problem 'convfp16 -n 2 -c 16'", "ConvProblem"])
          for verb, call in [("is_applicable", lambda: s.is_applicable(line, "sm_90")),
                             ("default", lambda: s.get_default_performance_config(line, "sm_90")),
                             ("valid", lambda: s.is_valid_performance_config(line, "sm_90", "x")),
                             ("workspace", lambda: s.get_workspace_size(line, "sm_90")),
                             ("solution", lambda: s.get_solution(line, "sm_90")),
                             ("find", lambda: s.find_solution(line, "sm_90")),
                             ("search", lambda: list(s.search(line, "sm_90")))]],
        ("run dY list", lambda: CpuEngine().run(sol, dy.tolist(), w), ValueError, ["dY is a list", "numpy array"]),
        ("run W None", lambda: CpuEngine().run(sol, dy, None), ValueError, ["W is a NoneType", "numpy array"]),
        ("perfdb int", lambda: s.find_solution(p, "sm_90", perfdb=5), TypeError, ["perfdb 5", "a path, or None"]),
        ("lookup None", lambda: s.lookup_performance_config(p, "sm_90", None), TypeError, ["perfdb None", "PerfDb"]),
        ("import_text None", lambda: PerfDb(":memory:").import_text(None, "gfx942"), ValueError,
         ["perf-db text is a NoneType"]),
        ("warmup negative", lambda: CpuEngine().time(sol, dy, w, iters=1, warmup=-5), ValueError,
         ["warmup -5", "an integer >= 0"]),
        ("iters float", lambda: CpuEngine().time(sol, dy, w, iters=1.5), ValueError, ["iters 1.5", ">= 1"]),
        ("iters bool", lambda: CpuEngine().time(sol, dy, w, iters=True), ValueError, ["iters True"]),
    ]


@pytest.mark.parametrize("case", _bad_argument_cases(), ids=lambda c: c[0])
def test_arguments_of_the_wrong_kind_are_named(case):
    """A fresh-user trial of the library: wrong-typed arguments gave AttributeError or
    TypeError from deep inside (unhashable list, 'str' has no attribute 'mode'), or (warmup
    < 0) were taken silently. Each is now the documented exception naming the argument, its
    value and what is allowed."""
    _, call, kind, words = case
    with pytest.raises(kind) as e:
        call()
    assert all(word in str(e.value) for word in words), str(e.value)


@pytest.mark.parametrize("name,value,says", [
    ("split_k", 10**5000, "--split-k an int of 16610 bits: allowed: -1 (choose)"),
    ("split_k", 2**64, f"--split-k {2**64}: allowed"),
    ("kouter", "x" * 5000, "--kouter 'xxxx"),
], ids=["10^5000", "2^64", "long-kouter"])
def test_settings_of_any_size_are_refused_in_their_own_words(name, value, says):
    """A setting past what Python turns into text (a 5000-digit int) was Python's ValueError
    from building the message; now the setting's own refusal, the value shortened."""
    p = ConvProblem(N=1, C=8, Hi=4, Wi=4, K=8, Y=1, X=1)
    with pytest.raises(PerfConfigError) as e:
        DgradSolver().find_solution(p, "sm_90", **{name: value})
    assert says in str(e.value) and len(str(e.value)) < 400
