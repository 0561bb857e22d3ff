"""Offline compilation of emitted kernels, for machines without a GPU.

* AMD: a plain LLVM clang that knows the AMDGPU targets (Debian's ``clang-19``/``lld-19``
  know gfx90a and gfx942) builds a code object from the HIP text with no ROCm installed
  (``-nogpulib -nogpuinc``: the kernel source needs no vendor headers);
  ``llvm-objdump`` disassembles it.
* NVIDIA: ``nvcc -cubin`` for the given ``sm_XX`` (``sm_90`` builds ``sm_90a``).

Used by the CI compile check (tests/test_amd_compile.py) and by
``dgrad-driver ... --arch gfxNNN`` compile-only runs, which pass a
:class:`~miopen_solver.runtime.cache.BinaryCache`: a build's results (code object,
disassembly and resource report; cubin, PTX and ptxas report) are then stored under a key
over the source, arch, the compiler's ``--version`` text and the options, and a second run
of the same kernel does not compile.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import CompileError
from ..target import compile_arch
from ..text import json_text
from ..runtime.cache import cache_key

CLANG_CANDIDATES = ("clang-19", "clang-20", "clang-18", "clang")
OBJDUMP_CANDIDATES = ("llvm-objdump-19", "llvm-objdump-20", "llvm-objdump-18", "llvm-objdump")


def _find(candidates) -> str | None:
    env = os.environ.get("DGRAD_CLANG") if candidates is CLANG_CANDIDATES else None
    if env:
        return env
    for c in candidates:
        if shutil.which(c):
            return c
    return None


def _compiler_id(exe: str) -> str:
    """``exe`` and its ``--version`` text: the compiler part of a cache key."""
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    return f"{exe}: {' '.join(out.split())}"


def _cached(cache, key: str, fields: tuple) -> dict | None:
    """The JSON record stored under ``key`` when it has ``fields``, else None."""
    raw = cache.get(key) if cache is not None else None
    if raw is None:
        return None
    try:
        rec = json.loads(raw)
    except ValueError:
        return None
    return rec if isinstance(rec, dict) and all(f in rec for f in fields) else None


def _store(cache, key: str, rec: dict) -> None:
    if cache is not None:
        cache.put(key, json_text(rec).encode())


def find_amd_clang() -> str | None:
    """A clang on PATH (or ``$DGRAD_CLANG``) that lists gfx942 among its targets, or None."""
    clang = _find(CLANG_CANDIDATES)
    if clang is None:
        return None
    try:
        out = subprocess.run([clang, "--print-targets"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return clang if "amdgcn" in out else None


@dataclass(frozen=True)
class CodeObject:
    """An AMD code object, its disassembly, and the compiler's resource report for the
    kernel (clang ``-Rpass-analysis=kernel-resource-usage``: ``resources`` maps e.g.
    ``VGPRs``, ``AGPRs``, ``ScratchSize [bytes/lane]``, ``VGPRs Spill``, ``Occupancy
    [waves/SIMD]`` to integers)."""

    arch: str
    path: Path
    data: bytes
    disassembly: str
    resources: dict = field(default_factory=dict, compare=False)

    def count(self, mnemonic_prefix: str) -> int:
        """Instructions in the disassembly whose mnemonic starts with the prefix, compared
        without underscores (gfx90a prints ``v_mfma_f32_32x32x8f16``, gfx942
        ``v_mfma_f32_32x32x8_f16``)."""
        want = mnemonic_prefix.replace("_", "")
        n = 0
        for line in self.disassembly.splitlines():
            parts = line.split()
            if parts and parts[0].replace("_", "").startswith(want):
                n += 1
        return n


def compile_amd(text: str, arch: str, out_dir: str | os.PathLike | None = None, name: str = "kernel",
                cache=None) -> CodeObject:
    """Compile HIP kernel text to an AMD code object (ELF) and disassemble it; with a
    ``cache`` (a BinaryCache), a build of the same text, arch, compiler and options is
    taken from it.

    Raises:
        CompileError: no suitable clang, or the compile failed (with its stderr).
    """
    clang = find_amd_clang()
    if clang is None:
        raise CompileError("no clang with AMDGPU targets found (install clang-19 and lld-19)")
    objdump = _find(OBJDUMP_CANDIDATES)
    out = Path(out_dir or tempfile.mkdtemp(prefix="dgrad-amd-"))
    out.mkdir(parents=True, exist_ok=True)
    src = out / f"{name}.hip"
    co = out / f"{name}.{arch}.co"
    flags = ["-x", "hip", f"--offload-arch={arch}", "-nogpulib", "-nogpuinc", "--cuda-device-only",
             "--no-gpu-bundle-output", "-O3", "-std=c++17", "-Rpass-analysis=kernel-resource-usage"]
    key = None
    if cache is not None:
        key = cache_key(text, arch, f"{_compiler_id(clang)} | {objdump and _compiler_id(objdump)}", flags)
        rec = _cached(cache, key, ("data", "disassembly", "resources"))
        if rec is not None:
            co.write_bytes(base64.b64decode(rec["data"]))
            return CodeObject(arch, co, co.read_bytes(), rec["disassembly"], rec["resources"])
    src.write_text(text)
    cmd = [clang, *flags, "-o", str(co), str(src)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise CompileError(f"{' '.join(cmd)} failed:\n{r.stderr}")
    resources = {}
    for m in re.finditer(r"remark:\s+([A-Za-z][^:\n]*?):\s+(\d+)\s+\[-Rpass-analysis", r.stderr):
        resources.setdefault(m.group(1).strip(), int(m.group(2)))
    dis = ""
    if objdump:
        d = subprocess.run([objdump, "-d", f"--mcpu={arch}", str(co)], capture_output=True, text=True)
        dis = d.stdout
    data = co.read_bytes()
    _store(cache, key, {"data": base64.b64encode(data).decode(), "disassembly": dis, "resources": resources})
    return CodeObject(arch, co, data, dis, resources)


@dataclass(frozen=True)
class NvidiaBuild:
    """An nvcc build: the cubin, its PTX and ptxas's resource report (``-Xptxas -v``)."""

    cubin: bytes
    ptx: str
    registers: int
    spill_store_bytes: int
    spill_load_bytes: int
    stack_bytes: int

    def count(self, opcode_prefix: str) -> int:
        """PTX instructions whose opcode starts with ``opcode_prefix`` (e.g. ``wgmma.mma_async``)."""
        n = 0
        for line in self.ptx.splitlines():
            words = line.split()
            if words and words[0].lstrip("@").startswith(opcode_prefix):
                n += 1
            elif len(words) > 1 and words[0].startswith("@") and words[1].startswith(opcode_prefix):
                n += 1
        return n


def _nvcc(text: str, arch: str, out_dir, name: str, ptx: bool, resources: bool, cache=None) -> tuple:
    """Build ``text`` with nvcc for ``arch`` (``sm_90`` builds ``sm_90a``): the cubin bytes,
    the PTX text (or None) and ptxas's resource report (``-Xptxas -v``; or ""); taken from
    ``cache`` (a BinaryCache) when it holds this build.

    Raises:
        CompileError: nvcc missing or a compile failed (with its stderr).
    """
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise CompileError("nvcc not found on PATH")
    gpu = compile_arch(arch)
    out = Path(out_dir or tempfile.mkdtemp(prefix="dgrad-nv-"))
    out.mkdir(parents=True, exist_ok=True)
    src, ptx_path, cubin = out / f"{name}.cu", out / f"{name}.ptx", out / f"{name}.{arch}.cubin"
    cmds = [[nvcc, f"-arch={gpu}", "-ptx", "-std=c++17", "-o", str(ptx_path), str(src)]] if ptx else []
    cmds.append([nvcc, f"-gencode=arch=compute_{gpu[3:]},code={gpu}", "-cubin", "-std=c++17"] +
                (["-Xptxas", "-v"] if resources else []) + ["-o", str(cubin), str(src)])
    key = None
    if cache is not None:
        key = cache_key(text, arch, _compiler_id(nvcc), [" ".join(c[1:-3]) for c in cmds])
        rec = _cached(cache, key, ("cubin", "ptx", "report"))
        if rec is not None:
            return base64.b64decode(rec["cubin"]), rec["ptx"], rec["report"]
    src.write_text(text)
    for cmd in cmds:
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise CompileError(f"{' '.join(cmd)} failed:\n{r.stderr}")
    built = cubin.read_bytes(), ptx_path.read_text() if ptx else None, (r.stdout + r.stderr) if resources else ""
    _store(cache, key, {"cubin": base64.b64encode(built[0]).decode(), "ptx": built[1], "report": built[2]})
    return built


def inspect_nvidia(text: str, arch: str, out_dir: str | os.PathLike | None = None,
                   name: str = "kernel", cache=None) -> NvidiaBuild:
    """PTX and the ptxas resource report of CUDA kernel text (``sm_90`` builds ``sm_90a``):
    registers per thread, spill bytes and stack frame, for checks that a kernel uses the
    instructions it was written for and does not spill.

    Raises:
        CompileError: nvcc missing, the compile failed, or no resource report.
    """
    cubin, ptx, report = _nvcc(text, arch, out_dir, name, ptx=True, resources=True, cache=cache)
    regs = re.search(r"Used (\d+) registers", report)
    spill = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", report)
    if regs is None or spill is None:
        raise CompileError(f"no ptxas resource report in:\n{report}")
    return NvidiaBuild(cubin, ptx, int(regs.group(1)), int(spill.group(2)), int(spill.group(3)),
                       int(spill.group(1)))


def compile_nvidia(text: str, arch: str, out_dir: str | os.PathLike | None = None, name: str = "kernel") -> bytes:
    """Compile CUDA kernel text to a cubin with nvcc (``sm_90`` builds ``sm_90a``).

    Raises:
        CompileError: nvcc missing or the compile failed.
    """
    return _nvcc(text, arch, out_dir, name, ptx=False, resources=False)[0]
