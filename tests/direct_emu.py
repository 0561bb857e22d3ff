"""Runs the emitted ``direct.cu`` kernel text on the CPU: g++ compiles the AMD flavour of the
source with the few AMDGPU builtins it uses mapped onto host threads (one std::thread per
GPU thread, a std::barrier for the block barrier, blocks one after another). Slow, for small
problems only; it executes the real kernel's indexing, staging and stores, so tests can
check the GPU code itself on a machine without a GPU."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from miopen_solver import layouts

HARNESS = r"""
#include <barrier>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>
#define __global__
#define __device__
#define __shared__
static thread_local int emu_tid;
static long long emu_bid;
static std::barrier<>* emu_bar;
#define __builtin_amdgcn_workitem_id_x() emu_tid
#define __builtin_amdgcn_workgroup_id_x() emu_bid
#define __builtin_amdgcn_s_barrier() emu_bar->arrive_and_wait()
#define __builtin_amdgcn_fence(a, b) ((void)0)
alignas(16) unsigned char dd_smem[1 << 18];
#include "kernel.cu"

static std::vector<unsigned char> slurp(const char* path) {
    FILE* f = fopen(path, "rb");
    if (!f) { perror(path); exit(2); }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    std::vector<unsigned char> v(n);
    if (fread(v.data(), 1, n, f) != (size_t)n) exit(2);
    fclose(f);
    return v;
}

int main(int argc, char** argv) {
    if (argc != 5) return 2;
    std::vector<unsigned char> dy = slurp(argv[1]), w = slurp(argv[2]);
    long long dx_bytes = atoll(argv[4]);
    std::vector<unsigned char> dx(dx_bytes, 0xFF);
    for (long long b = 0; b < EMU_GRID; ++b) {
        emu_bid = b;
        std::barrier<> bar(DD_THREADS);
        emu_bar = &bar;
        std::vector<std::thread> ts;
        for (int t = 0; t < DD_THREADS; ++t)
            ts.emplace_back([&, t] {
                emu_tid = t;
                DG_KERNEL_NAME((const dd_t*)dy.data(), (const dd_t*)w.data(), (dd_t*)dx.data());
            });
        for (auto& th : ts) th.join();
    }
    FILE* f = fopen(argv[3], "wb");
    fwrite(dx.data(), 1, dx.size(), f);
    fclose(f);
    return 0;
}
"""


def have_gxx() -> bool:
    return shutil.which("g++") is not None


def build(src, workdir: str | os.PathLike) -> Path:
    """Compile the KernelSource ``src`` (emitted for any vendor; the AMD flavour is forced)
    into a host executable; cached by the text's hash inside ``workdir``."""
    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    text = "#define DG_VENDOR_AMD 1\n" + src.text
    key = hashlib.sha256(text.encode()).hexdigest()[:16]
    exe = work / f"emu_{key}"
    if exe.exists():
        return exe
    d = Path(tempfile.mkdtemp(prefix="ddemu-", dir=work))
    (d / "kernel.cu").write_text(text)
    (d / "main.cpp").write_text(HARNESS)
    cmd = ["g++", "-std=c++20", "-O1", "-w", "-pthread", f"-DEMU_GRID={src.grid[0]}",
           "-o", str(exe), str(d / "main.cpp")]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"g++ failed:\n{r.stderr[-4000:]}")
    return exe


def run(spec, dy: np.ndarray, w: np.ndarray, workdir) -> np.ndarray:
    """dX from the emulated kernel for a DirectSpec (NHWC storage arrays in and out)."""
    p = spec.problem
    exe = build(spec.emit(), workdir)
    st = layouts.storage_dtype(p.dtype)
    d = Path(tempfile.mkdtemp(prefix="ddrun-", dir=workdir))
    np.ascontiguousarray(dy).tofile(d / "dy.bin")
    np.ascontiguousarray(w).tofile(d / "w.bin")
    nbytes = p.dx_elems * st.itemsize
    r = subprocess.run([str(exe), str(d / "dy.bin"), str(d / "w.bin"), str(d / "dx.bin"), str(nbytes)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"emulated kernel failed ({r.returncode}): {r.stderr[-2000:]}")
    return np.fromfile(d / "dx.bin", dtype=st).reshape(p.N, p.Hi, p.Wi, p.C)
