"""Programmatic dependent launch (PDL) on CPU: which launches of a run may overlap the one
before them, that the engine launches exactly those through ``launch_dependent``, and that
every kernel source waits for its predecessor grid before it touches global memory.

A launch overlapping its predecessor is only correct when the kernel's first global access
comes after ``griddepcontrol.wait``; so the static test reads every kernel entry of every
source, and the nvcc test checks the instruction is in the sm_90 binary (and absent before
sm_90, where it does not exist). The GPU tests (tests/test_gpu.py) run the overlapped runs
against the float64 reference.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from miopen_solver import layouts
from miopen_solver.command import parse
from miopen_solver.layouts import storage_dtype
from miopen_solver.runtime.cache import BinaryCache
from miopen_solver.runtime.gpu import PDL_ENV, GpuEngine
from miopen_solver.solver import DgradSolver
from miopen_solver.spec import PerfConfig
from miopen_solver.target import get_target
from test_gpu_engine import FakeRuntime, FakeTmaRuntime

SM90 = get_target("sm_90")
SOLVER = DgradSolver()
KERNELS = Path(__file__).resolve().parents[1] / "miopen_solver" / "kernels"
NHWC = "--in_layout NHWC --out_layout NHWC --fil_layout NHWC"


class PdlRuntime(FakeTmaRuntime):
    """A fake sm_90 runtime that can overlap launches: a dependent launch is recorded as
    ``launch_dep``."""

    programmatic_launch = True

    def launch_dependent(self, func, grid, block, shared, ptrs):
        self.calls.append(("launch_dep", func[1], tuple(grid), tuple(block), shared, tuple(ptrs)))


# (label, line, perf-config or None): a run of one launch, transforms before and after the
# kernel, a split-K memset, a workspace reduction after the kernel, stream-K's cleared flags
CASES = [
    ("nhwc_one_launch", f"convfp16 -n 2 -c 16 -H 6 -W 6 -k 16 -y 3 -x 3 -p 1 -q 1 -F 2 {NHWC}", None),
    ("nchw_transforms_and_dx", "convfp16 -n 2 -c 64 -H 7 -W 7 -k 64 -y 3 -x 3 -p 1 -q 1 -F 2",
     "128,128,64,2,1,64,128,0,0,0,2,-1,4,1"),
    ("nchw_transforms", "convfp16 -n 2 -c 64 -H 7 -W 7 -k 64 -y 3 -x 3 -p 1 -q 1 -F 2",
     "128,128,64,2,1,64,128,0,0,0,1,-1,4,1"),
    ("nchw_strided", "convfp16 -n 2 -c 32 -H 14 -W 14 -k 32 -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 -F 2", None),
    ("split_k_atomic", f"convfp16 -n 1 -c 16 -H 6 -W 6 -k 64 -y 3 -x 3 -p 1 -q 1 -F 2 {NHWC}",
     "64,16,32,2,1,32,16,0,0,0,2,-1,2,0,1"),
    ("split_k_workspace", f"convfp16 -n 1 -c 16 -H 6 -W 6 -k 64 -y 3 -x 3 -p 1 -q 1 -F 2 {NHWC}",
     "64,16,32,2,1,32,16,0,0,0,2,-1,2,0,2"),
    ("nchw_split_k_workspace", "convfp16 -n 1 -c 16 -H 6 -W 6 -k 64 -y 3 -x 3 -p 1 -q 1 -F 2",
     "64,16,32,2,1,32,16,0,0,0,2,-1,2,0,2"),
    ("stream_k", f"convfp16 -n 4 -c 128 -H 7 -W 7 -k 512 -y 1 -x 1 -F 2 {NHWC}",
     "128,128,64,2,1,64,128,0,0,0,1,-1,4,3,3"),
]

CASE = {c[0]: c[1:] for c in CASES}


def _solution(line, cfg):
    p = parse(line).problem
    return SOLVER.find_solution(p, SM90, perf_config=cfg)


def _inputs(p):
    dt = storage_dtype(p.dtype)
    rng = np.random.default_rng(0)
    return (rng.standard_normal(layouts.dy_shape(p)).astype(dt), rng.standard_normal(layouts.w_shape(p)).astype(dt))


def _runs(calls):
    """The launches of each run in ``calls`` as ``[[(kind, name, after_memset), ...], ...]``:
    a run starts after a ``record`` (events) or at the first launch."""
    runs, cur, memset = [], [], False
    for c in calls:
        if c[0] == "record":
            if cur:
                runs.append(cur)
            cur, memset = [], False
        elif c[0] == "memset":
            memset = True
        elif c[0] in ("launch", "launch_dep"):
            cur.append((c[0], c[1], memset))
            memset = False
    if cur:
        runs.append(cur)
    return runs


@pytest.mark.parametrize("label,line,cfg", CASES, ids=[c[0] for c in CASES])
def test_steps_overlap_the_kernel_before_them_unless_a_memset_is_between(tmp_path, label, line, cfg):
    """The rule, read off the step list: a run's first step never overlaps (the stream's
    earlier work is not ours), nor does a step with a memset before it; every other step
    does. The engine launches exactly the overlapping steps through ``launch_dependent``, in
    every run of a timed loop."""
    sol = _solution(line, cfg)
    rt = PdlRuntime()
    eng = GpuEngine(rt, BinaryCache(tmp_path), pdl=True)
    assert eng.pdl
    steps = eng.launches(sol, eng._kernel(sol), 0x1000, 0x2000, 0x3000, 0x4000 if sol.workspace_bytes else 0)
    assert steps and not steps[0].overlap
    for st in steps[1:]:
        assert st.overlap == (not st.memset_bytes and not st.cleared), (label, st.kernel.source.name)
    eng.time(sol, *_inputs(sol.problem), iters=3, warmup=1)
    runs = _runs(rt.calls)
    assert len(runs) == 4                                   # warm-up + 3 timed
    for run in runs:
        assert [name for _, name, _ in run] == [st.kernel.source.name for st in steps]
        assert [kind == "launch_dep" for kind, _, _ in run] == [st.overlap for st in steps]
        assert run[0][0] == "launch" and not any(kind == "launch_dep" and after for kind, _, after in run)
    if label == "nchw_transforms_and_dx":      # dY + W pair; split-K's memset, kernel; dX transform
        assert [kind for kind, _, _ in runs[0]] == ["launch", "launch", "launch_dep"]
    if label == "nchw_transforms":             # dY + W pair; the kernel (stores dX NCHW itself)
        assert [kind for kind, _, _ in runs[0]] == ["launch", "launch_dep"]
    if label in ("split_k_workspace", "nchw_split_k_workspace"):
        assert any(kind == "launch_dep" and name.startswith("dgrad_splitk_reduce_") for kind, name, _ in runs[0])


@pytest.mark.parametrize("how", ["argument", "environment", "runtime"])
def test_without_pdl_every_launch_is_plain(tmp_path, monkeypatch, how):
    """``pdl=False``, ``MIOPEN_DGRAD_PDL=0`` or a runtime that cannot overlap (no
    ``programmatic_launch``: HIP, CUDA before sm_90) launch every step plainly."""
    sol = _solution(*CASE["nchw_transforms_and_dx"])
    rt = PdlRuntime() if how != "runtime" else FakeTmaRuntime()
    if how == "environment":
        monkeypatch.setenv(PDL_ENV, "0")
    eng = GpuEngine(rt, BinaryCache(tmp_path), pdl=False if how == "argument" else None)
    assert not eng.pdl
    eng.run(sol, *_inputs(sol.problem))
    kinds = [c[0] for c in rt.calls if c[0].startswith("launch")]
    assert kinds == ["launch"] * 3


@pytest.mark.parametrize("value,on", [(None, True), ("", True), ("1", True), ("yes", True), ("ON", True),
                                      ("0", False), ("no", False), ("False", False), ("off", False),
                                      (" disabled ", False), ("disable", False)])
def test_the_environment_takes_miopens_boolean_words(tmp_path, monkeypatch, value, on):
    """Unset or a true word: on; a false word in any case (the words MIOpen's boolean
    variables take; the driver refuses others, tests/test_miopen_env.py): off. A runtime that
    cannot overlap is off whatever the variable says."""
    if value is None:
        monkeypatch.delenv(PDL_ENV, raising=False)
    else:
        monkeypatch.setenv(PDL_ENV, value)
    assert GpuEngine(PdlRuntime(), BinaryCache(tmp_path)).pdl is on
    assert not GpuEngine(FakeRuntime(), BinaryCache(tmp_path)).pdl


# ------------------------------------------------------------------ the kernel sources
ENTRY = re.compile(r"^D[GDT]_GLOBAL(?:_BAND)? void (\w+)\(([^)]*)\)\s*\{", re.M)


def _entries():
    for path in sorted(KERNELS.glob("*.cu")):
        if path.name == "naive_ref.cu":        # the reference: always launched alone
            continue
        text = path.read_text()
        for m in ENTRY.finditer(text):
            yield path.name, m.group(1), m.group(2), text[m.end():]


def test_every_kernel_entry_waits_for_its_predecessor_before_global_memory():
    """In every kernel entry the grid-dependency wait is a statement before the first use of
    any pointer argument (a global access), so a launch overlapping its predecessor never
    reads a tensor that grid is still writing, nor writes one it is still reading."""
    seen = 0
    for name, entry, params, body in _entries():
        params = re.sub(r"//[^\n]*", "", params)
        pointers = re.findall(r"\*\s*(?:__restrict__\s*)?(\w+)\s*(?:,|$)", params.replace("\n", " ") + ",")
        wait = re.search(r"\bD[GDT]_GRID_DEPENDENCY\(\);", body)
        assert wait, f"{name} {entry}: no grid-dependency wait"
        if pointers:
            first = min((m.start() for p in pointers for m in re.finditer(rf"\b{p}\b", body)), default=len(body))
            assert wait.start() < first, f"{name} {entry}: a pointer argument is used before the wait"
        before = body[:wait.start()]
        assert "(" not in re.sub(r"__attribute__\(\([^)]*\)\)|\[[^\]]*\]", "", before), \
            f"{name} {entry}: only declarations may come before the wait: {before!r}"
        seen += 1
    assert seen >= 9                              # dgrad, direct, direct_mma, plane, 2 reduce, pack, 3 transpose


def test_the_wait_is_sm90_ptx_and_a_no_op_elsewhere():
    """Each vendor layer defines the wait as ``griddepcontrol.wait`` (and, where the source
    has input-preparing kernels, the early trigger as ``griddepcontrol.launch_dependents``)
    for sm_90+ only, and both as nothing for AMD and older NVIDIA."""
    for path, trigger in (("dgrad.cu", True), ("direct.cu", False), ("transpose.cu", True)):
        text = (KERNELS / path).read_text()
        prefix = {"dgrad.cu": "DG", "direct.cu": "DD", "transpose.cu": "DT"}[path]
        nv = (f'#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900\n'
              f'#define {prefix}_GRID_DEPENDENCY() asm volatile("griddepcontrol.wait;" ::: "memory")\n')
        if trigger:
            nv += f'#define {prefix}_LAUNCH_DEPENDENTS() asm volatile("griddepcontrol.launch_dependents;" ::: "memory")\n'
        assert text.count(nv) == 1, path
        assert text.count(f"#define {prefix}_GRID_DEPENDENCY() do {{ }} while (0)") == 2, path    # AMD; NVIDIA < sm_90
        assert text.count(f"#define {prefix}_LAUNCH_DEPENDENTS() do {{ }} while (0)") == (2 if trigger else 0), path


def test_only_the_kernels_before_the_main_kernel_trigger_their_dependents_early():
    """The layout transforms and the W' pack let the main kernel launch at once; the dgrad,
    direct and reduction kernels never trigger early (their dependents' waiting blocks would
    share the SMs they still run on)."""
    early = {(name, entry) for name, entry, _, body in _entries() if re.search(r"\bD[GDT]_LAUNCH_DEPENDENTS\(\);", body)}
    assert {name for name, _ in early} == {"transpose.cu", "subpixel_pack.cu"}
    assert len(early) == 4                                 # tile, band and pair transposes, the pack
    for name in ("dgrad.cu", "direct.cu", "direct_mma.cu", "direct_plane.cu", "splitk_reduce.cu"):
        assert "LAUNCH_DEPENDENTS();" not in (KERNELS / name).read_text(), name


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc on this machine")
@pytest.mark.parametrize("arch,present", [("sm_90", True), ("sm_80", False)])
def test_nvcc_builds_the_wait_for_sm90_only(tmp_path, arch, present):
    from miopen_solver.kernels.offline import inspect_nvidia
    sol = _solution(*CASE["nchw_split_k_workspace"])   # transforms, the dgrad kernel, the reduction
    launch = sol.transform_launches[0]
    texts = [sol.kernels[0].source.text, launch.emit("nvidia", arch).text, sol.reduce.emit("nvidia", arch).text]
    if arch == "sm_80":
        from miopen_solver.kernels.emit import emit
        from miopen_solver.spec import make_spec
        texts[0] = emit(make_spec(sol.problem, get_target("sm_80"), PerfConfig.parse("64,16,32,2,1,32,16,0,0,0,2,-1,2,0,2"))).text
    for i, text in enumerate(texts):                # the dgrad kernel, the transform, the reduction
        b = inspect_nvidia(text, arch, tmp_path / str(i), "k")
        assert (b.count("griddepcontrol.wait") >= 1) == present
        assert (b.count("griddepcontrol.launch_dependents") >= 1) == (present and i == 1)


def test_a_graph_run_captures_the_runs_and_reads_dx_after_the_replay(tmp_path):
    """``run(graph_runs=3)``: three runs captured (overlapping as plain runs do), one replay,
    then dX copied back from the poisoned buffer (the GPU tests verify it)."""
    sol = _solution(*CASE["nchw_transforms"])
    rt = PdlRuntime()
    out = GpuEngine(rt, BinaryCache(tmp_path), pdl=True).run(sol, *_inputs(sol.problem), graph_runs=3)
    kinds = [c[0] for c in rt.calls]
    launches = [k for k in kinds if k.startswith("launch")]
    assert launches == ["launch", "launch_dep"] * 3
    assert kinds.index("replay") > max(i for i, k in enumerate(kinds) if k.startswith("launch"))
    assert kinds.index("d2h") > kinds.index("replay")
    assert np.isnan(out.astype(np.float32)).all()          # the fake kernels wrote nothing


@pytest.mark.parametrize("value", ["maybe", "2", "-1", "00", "o n"])
def test_a_bad_value_is_an_error_in_the_library_and_in_every_subcommand(tmp_path, monkeypatch, capsys, value):
    """A value that is neither on nor off: the engine raises naming it (``pdl_from_env``;
    the bench scripts print it as their one line), and every dgrad-driver subcommand refuses
    it in one line, exit 2, before doing anything."""
    from miopen_solver.runtime.gpu import pdl_from_env
    from driver.cli import main
    monkeypatch.setenv(PDL_ENV, value)
    with pytest.raises(ValueError, match=rf"^{PDL_ENV} '{re.escape(value)}': allowed: 1, yes, true"):
        pdl_from_env()
    with pytest.raises(ValueError):
        GpuEngine(PdlRuntime(), BinaryCache(tmp_path))
    assert GpuEngine(PdlRuntime(), BinaryCache(tmp_path), pdl=False).pdl is False     # an explicit choice wins
    line = "convfp16 -n 2 -c 16 -H 6 -W 6 -k 16 -y 1 -x 1 -F 2"
    for argv in (line.split() + ["--backend", "cpu"], ["run"] + line.split() + ["--backend", "cpu"],
                 ["config"] + line.split(), ["applicable"] + line.split(),
                 ["tune"] + line.split() + ["--backend", "cpu", "--max-configs", "1", "--no-perfdb"],
                 ["replay", str(tmp_path / "none.jsonl")], ["perfdb", "list", "--perfdb", str(tmp_path / "x.db")]):
        capsys.readouterr()
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"dgrad-driver: error: {PDL_ENV} '{value}': allowed:"), (argv, err)
