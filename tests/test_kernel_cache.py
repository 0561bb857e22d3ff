"""The kernel binary cache: every entry is checked (length + sha256 in a header) and a bad
one is deleted and recompiled; an unusable directory or a failed store turns into a
warning returned as data, never a failed build; temporaries of killed writes are removed
when the cache is opened. CPU only: the fake runtime of tests/test_gpu_engine.py compiles."""

from __future__ import annotations

import hashlib
import os
import time

import pytest

from driver import workers
from miopen_solver import fileio
from miopen_solver.errors import FileError
from miopen_solver.runtime import cache as cache_mod
from miopen_solver.runtime.cache import MAGIC, BinaryCache, pack_entry, unpack_entry
from miopen_solver.runtime.gpu import GpuEngine
from test_gpu_engine import FakeRuntime, _inputs, _spec

from miopen_solver.solver import solution_of

LINE = "convfp16 -n 1 -c 16 -H 6 -W 6 -k 16 -y 3 -x 3 -p 1 -q 1"
BINARY = b"\x7fELF" + bytes(range(256)) * 4


def built(directory):
    """``(runtime, engine, BuildInfo)`` after building LINE's kernel with a fresh engine."""
    rt = FakeRuntime()
    eng = GpuEngine(rt, BinaryCache(directory))
    return rt, eng, eng.build(_spec(LINE))


def entry_file(directory):
    (p,) = [p for p in directory.iterdir() if p.suffix == ".bin"]
    return p


# ------------------------------------------------------------------ the entry format
def test_entry_is_header_then_payload():
    raw = pack_entry(BINARY)
    assert raw[:8] == MAGIC and int.from_bytes(raw[8:16], "little") == len(BINARY)
    assert raw[16:48] == hashlib.sha256(BINARY).digest() and raw[48:] == BINARY
    assert unpack_entry(raw) == (BINARY, None)


def corruptions():
    raw = pack_entry(BINARY)
    flipped = bytearray(raw)
    flipped[100] ^= 0xFF
    return {"truncated payload": (raw[:-10], f"truncated: {len(BINARY) - 10} of {len(BINARY)} bytes"),
            "truncated header": (raw[:20], "truncated: 20 bytes, less than its 48-byte header"),
            "empty": (b"", "truncated: 0 bytes"),
            "garbage": (os.urandom(4096), "not a kernel cache entry (no header)"),
            "old format (bare binary)": (BINARY, "not a kernel cache entry (no header)"),
            "flipped byte": (bytes(flipped), "its sha256 does not match its contents"),
            "trailing bytes": (raw + b"x", f"truncated: {len(BINARY) + 1} of {len(BINARY)} bytes")}


@pytest.mark.parametrize("kind", sorted(corruptions()))
def test_a_bad_entry_is_deleted_and_recompiled(tmp_path, kind):
    bad, why = corruptions()[kind]
    rt1, _, first = built(tmp_path)
    assert rt1.compiles == 1 and not first.cache_hit
    entry = entry_file(tmp_path)
    good = entry.read_bytes()
    entry.write_bytes(bad)
    rt2, eng2, second = built(tmp_path)                      # the bad entry is not handed to load
    assert rt2.compiles == 1 and not second.cache_hit
    assert ("load", _spec(LINE).kernel_name) in rt2.calls
    assert entry.read_bytes() == good                         # rewritten whole
    warnings = eng2.take_warnings()
    assert len(warnings) == 1 and f"kernel cache entry {entry} is unusable ({why}" in warnings[0]
    assert warnings[0].endswith("removed, the kernel is compiled again")
    rt3, _, third = built(tmp_path)                           # and it is a hit again
    assert rt3.compiles == 0 and third.cache_hit


def test_an_entry_that_is_not_a_regular_file_is_a_miss(tmp_path):
    cache = BinaryCache(tmp_path)
    os.mkfifo(cache.path("k"))                                # would block a plain read
    assert cache.get("k") is None
    assert not cache.path("k").exists() and "is not a regular file" in cache.warnings[0]


# ------------------------------------------------------------------ unusable directories
def unusable(kind, tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    return {"a regular file": f, "under a regular file": f / "kernels"}[kind]


@pytest.mark.parametrize("kind", ["a regular file", "under a regular file"])
def test_an_unusable_directory_compiles_without_a_cache_and_says_so_once(tmp_path, kind):
    d = unusable(kind, tmp_path)
    rt = FakeRuntime()
    eng = GpuEngine(rt, BinaryCache(d))
    assert not eng.cache.enabled
    spec = _spec(LINE)
    dy, w = _inputs(spec.problem)
    t1 = eng.time(spec, dy, w, iters=2)
    assert rt.compiles == 1 and not t1.cache_hit
    assert len(t1.warnings) == 1 and t1.warnings[0].startswith(f"kernel cache {d} is unusable (")
    assert t1.warnings[0].endswith("compiling without a cache")
    assert eng.time(spec, dy, w, iters=2).warnings == []      # said once
    rt2 = FakeRuntime()
    GpuEngine(rt2, BinaryCache(d)).build(spec)                # nothing was stored: compiled again
    assert rt2.compiles == 1


def test_a_read_only_directory_compiles_without_a_cache(tmp_path, monkeypatch):
    """The probe that decides is a temporary file in the directory (root writes anywhere,
    so its failure is simulated)."""
    def refuse(*a, **k):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(cache_mod.tempfile, "TemporaryFile", refuse)
    cache = BinaryCache(tmp_path)
    assert not cache.enabled and cache.get("k") is None and cache.put("k", BINARY) is None
    assert cache.warnings == [f"kernel cache {tmp_path} is unusable (Permission denied); compiling without a cache"]
    assert list(tmp_path.iterdir()) == []


def test_a_failed_store_is_a_warning_not_a_failed_build(tmp_path, monkeypatch):
    def full(path, data):
        raise FileError(path, "cannot write (No space left on device); no file was created", "x")
    monkeypatch.setattr(cache_mod, "write_bytes", full)
    rt = FakeRuntime()
    eng = GpuEngine(rt, BinaryCache(tmp_path))
    eng.build(_spec(LINE))
    assert rt.compiles == 1 and ("load", _spec(LINE).kernel_name) in rt.calls
    (warning,) = eng.take_warnings()
    assert warning.startswith("kernel cache entry ") and "not stored (cannot write (No space left" in warning


def test_the_timing_worker_passes_the_warnings_on(tmp_path):
    """The record a timing worker sends back carries them (the driver prints them)."""
    spec = _spec(LINE)
    state = workers._State()
    state.engines["cuda"] = GpuEngine(FakeRuntime(), BinaryCache(unusable("a regular file", tmp_path)))
    job = workers.make_job("timing", solution=solution_of(spec), backend="cuda", seed=1, iters=2)
    rec = workers._do_timing(job, state)
    assert len(rec["warnings"]) == 1 and "compiling without a cache" in rec["warnings"][0]


# ------------------------------------------------------------------ stale temporaries
def test_stale_temporaries_are_removed_when_the_cache_is_opened(tmp_path):
    """A write killed between its temporary file and the rename leaves the temporary
    (37 MB were seen); opening the cache removes those older than an hour, and only those."""
    old_tmp = tmp_path / f".{'a' * 64}.bin.0123456789ab{fileio.TEMP_SUFFIX}"
    new_tmp = tmp_path / f".{'b' * 64}.bin.ba9876543210{fileio.TEMP_SUFFIX}"
    entry = tmp_path / f"{'c' * 64}.bin"
    other = tmp_path / "notes.tmp"                            # not ours: no leading dot
    for p in (old_tmp, new_tmp, entry, other):
        p.write_bytes(b"x" * 100)
    two_hours_ago = time.time() - 2 * 3600
    for p in (old_tmp, entry, other):
        os.utime(p, (two_hours_ago, two_hours_ago))
    BinaryCache(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([new_tmp.name, entry.name, other.name])


def test_a_failed_write_leaves_no_temporary(tmp_path, monkeypatch):
    def fail(*a, **k):
        raise OSError(5, "Input/output error")
    monkeypatch.setattr(os, "replace", fail)
    cache = BinaryCache(tmp_path)
    assert cache.put("k", BINARY) is None
    assert list(tmp_path.iterdir()) == [] and "Input/output error" in cache.warnings[0]


# ------------------------------------------------------------------ compile-only builds
FAKE_CLANG = r"""#!/bin/sh
case "$1" in
  --print-targets) echo "    amdgcn     - AMD GCN GPUs"; exit 0;;
  --version) echo "fake clang version 19.0"; exit 0;;
esac
echo compile >> "$FAKE_LOG"
while [ $# -gt 0 ]; do
  if [ "$1" = "-o" ]; then shift; printf 'CODE-OBJECT' > "$1"; fi
  shift
done
echo "k.hip:1:1: remark: VGPRs: 40 [-Rpass-analysis=kernel-resource-usage]" >&2
echo "k.hip:1:1: remark: ScratchSize [bytes/lane]: 0 [-Rpass-analysis=kernel-resource-usage]" >&2
"""

FAKE_NVCC = r"""#!/bin/sh
case "$1" in
  --version) echo "fake nvcc release 13.0"; exit 0;;
esac
echo "compile $*" >> "$FAKE_LOG"
for a in "$@"; do
  if [ "$prev" = "-o" ]; then out="$a"; fi
  prev="$a"
done
case "$*" in
  *-ptx*) printf '.version 8.0\nmma.sync.aligned x;\n' > "$out";;
  *) printf 'CUBIN' > "$out"
     echo "ptxas info    : Used 96 registers" >&2
     echo "ptxas info    : 16 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" >&2;;
esac
"""


@pytest.fixture
def fake_compilers(tmp_path, monkeypatch):
    """A fake clang (``$DGRAD_CLANG``) and nvcc (first on PATH) that log each compile."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("clang", FAKE_CLANG), ("nvcc", FAKE_NVCC)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    log = tmp_path / "compiles.log"
    monkeypatch.setenv("FAKE_LOG", str(log))
    monkeypatch.setenv("DGRAD_CLANG", str(bin_dir / "clang"))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv(cache_mod.ENV_VAR, str(tmp_path / "kcache"))
    return lambda: len(log.read_text().splitlines()) if log.exists() else 0


def test_offline_builds_are_cached(tmp_path, fake_compilers):
    from miopen_solver.kernels.offline import compile_amd, inspect_nvidia
    cache = BinaryCache(tmp_path / "kcache")
    a1 = compile_amd("kernel text", "gfx942", tmp_path / "o1", cache=cache)
    a2 = compile_amd("kernel text", "gfx942", tmp_path / "o2", cache=cache)
    assert fake_compilers() == 1
    assert (a2.data, a2.resources, a2.disassembly) == (a1.data, a1.resources, a1.disassembly) == \
        (b"CODE-OBJECT", {"VGPRs": 40, "ScratchSize [bytes/lane]": 0}, a1.disassembly)
    assert a2.path.read_bytes() == b"CODE-OBJECT"
    compile_amd("other text", "gfx942", tmp_path / "o3", cache=cache)
    compile_amd("kernel text", "gfx90a", tmp_path / "o4", cache=cache)
    assert fake_compilers() == 3                               # text and arch are in the key
    n1 = inspect_nvidia("cuda text", "sm_90", tmp_path / "n1", cache=cache)
    n2 = inspect_nvidia("cuda text", "sm_90", tmp_path / "n2", cache=cache)
    assert fake_compilers() == 5                               # ptx + cubin, once
    assert n1 == n2 and (n2.cubin, n2.registers, n2.stack_bytes) == (b"CUBIN", 96, 16)
    for entry in (tmp_path / "kcache").iterdir():              # a corrupt entry: built again
        entry.write_bytes(entry.read_bytes()[:-1])
    assert compile_amd("kernel text", "gfx942", tmp_path / "o5", cache=cache).data == b"CODE-OBJECT"
    assert fake_compilers() == 6 and any("is unusable (truncated" in w for w in cache.warnings)


def test_compile_only_runs_use_the_cache(capsys, tmp_path, fake_compilers):
    from conftest import run_cli
    if workers.gpu_device_nodes():
        pytest.skip("a GPU is present: --arch runs on it")
    line = ("convfp16 -n 1 -c 64 -H 8 -W 8 -k 64 -y 1 -x 1 -F 2 --in_layout NHWC --out_layout NHWC "
            "--fil_layout NHWC --no-perfdb")
    for arch, compiles_so_far in (("gfx942", 1), ("sm_90", 3)):     # clang once; nvcc ptx + cubin once
        first = run_cli(capsys, *line.split(), "--arch", arch)
        second = run_cli(capsys, *line.split(), "--arch", arch)
        assert first[0] == 0 and first == second and fake_compilers() == compiles_so_far
    status, _, err = run_cli(capsys, *line.split(), "--arch", "gfx90a")
    assert status == 0 and err == []


def test_compile_only_with_an_unusable_cache_still_builds_and_warns(capsys, tmp_path, fake_compilers, monkeypatch):
    from conftest import run_cli
    if workers.gpu_device_nodes():
        pytest.skip("a GPU is present: --arch runs on it")
    monkeypatch.setenv(cache_mod.ENV_VAR, str(unusable("a regular file", tmp_path)))
    line = ("convfp16 -n 1 -c 64 -H 8 -W 8 -k 64 -y 1 -x 1 -F 2 --in_layout NHWC --out_layout NHWC "
            "--fil_layout NHWC --no-perfdb")
    status, out, err = run_cli(capsys, *line.split(), "--arch", "gfx942")
    assert status == 0 and out[3] == "Code object: 11 bytes, 0 MFMA instructions"
    assert err == [f"dgrad-driver: warning: kernel cache {tmp_path / 'file'} is unusable (not a directory); "
                   f"compiling without a cache"]
