"""Runs emitted kernel texts on the CPU (AMD flavour): clang++ compiles the source for the
host with the AMDGPU builtins it uses mapped onto host threads -- one std::thread per GPU
thread, a std::barrier per block for ``s_barrier`` and one per wave for the matrix
instructions, blocks one after another, atomics as host atomics. Both kernels run:
``dgrad.cu`` (the GEMM schedules, :func:`launch_gemm`) and ``direct.cu`` (:func:`run_direct`).

The MFMA builtins are emulated from AMD's operand layouts (CDNA3 ISA, "Dense matrix
arithmetic"; the AMD Matrix Instruction Calculator), written here independently of the
kernel's fragment code: every lane of the wave deposits its A and B operands, the wave
meets at a barrier, each lane computes its own D elements in fp32, and the wave meets again
before the buffers are reused. So a test executes the kernels' real indexing, shared-memory
staging, zero fill, split-K atomics and every epilogue (NHWC, NCHW dX, patch, NCHW
pointwise) on a machine without a GPU. Slow: for small problems only.

The NVIDIA-only schedules (warpgroup MMA, TMA) have no AMD flavour and are not emulated.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from miopen_solver import layouts

CXX = shutil.which("clang++-19") or shutil.which("clang++")

PREAMBLE = r"""
#include <algorithm>
#include <atomic>
#include <barrier>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>
#define __global__
#define __device__
#define __shared__
#define __restrict__
#define amdgpu_flat_work_group_size(lo, hi) unused
static thread_local int emu_tid;
static int emu_bid[3];
static std::barrier<>* emu_block_bar;
static std::barrier<>* emu_wave_bar[64];
#define __builtin_amdgcn_workitem_id_x() emu_tid
#define __builtin_amdgcn_workgroup_id_x() emu_bid[0]
#define __builtin_amdgcn_workgroup_id_y() emu_bid[1]
#define __builtin_amdgcn_workgroup_id_z() emu_bid[2]
#define __builtin_amdgcn_s_barrier() emu_block_bar->arrive_and_wait()
#define __builtin_amdgcn_fence(a, b) std::atomic_thread_fence(std::memory_order_seq_cst)
#define __hip_atomic_fetch_add(p, v, order, scope) std::atomic_ref<float>(*(p)).fetch_add(v)

// ---- 16-bit values as floats
static float emu_h2f(_Float16 h) { return (float)h; }
static float emu_bf2f(short s) {
    uint32_t u = (uint32_t)(uint16_t)s << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
static uint16_t emu_f2bf(float f) {  // round to nearest even, NaN kept quiet
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

// ---- packed 16-bit atomics: a compare-and-swap loop on the 4-byte pair
typedef _Float16 emu_h2 __attribute__((ext_vector_type(2)));
typedef short emu_s2 __attribute__((ext_vector_type(2)));
static void emu_fadd_v2f16(void* p, emu_h2 v) {
    std::atomic_ref<uint32_t> a(*(uint32_t*)p);
    uint32_t old = a.load();
    for (;;) {
        _Float16 h[2];
        std::memcpy(h, &old, 4);
        h[0] = (_Float16)((float)h[0] + (float)v[0]);
        h[1] = (_Float16)((float)h[1] + (float)v[1]);
        uint32_t nw;
        std::memcpy(&nw, h, 4);
        if (a.compare_exchange_weak(old, nw)) return;
    }
}
static void emu_fadd_v2bf16(void* p, emu_s2 v) {
    std::atomic_ref<uint32_t> a(*(uint32_t*)p);
    uint32_t old = a.load();
    for (;;) {
        uint32_t lo = emu_f2bf(emu_bf2f((short)(old & 0xffffu)) + emu_bf2f(v[0]));
        uint32_t hi = emu_f2bf(emu_bf2f((short)(old >> 16)) + emu_bf2f(v[1]));
        if (a.compare_exchange_weak(old, lo | (hi << 16))) return;
    }
}
#define __builtin_amdgcn_global_atomic_fadd_v2f16(p, v) emu_fadd_v2f16((void*)(p), v)
#define __builtin_amdgcn_global_atomic_fadd_v2bf16(p, v) emu_fadd_v2bf16((void*)(p), v)

// ---- MFMA. Operand layouts (per lane l of a 64-lane wave, 4 operand elements v):
//   32x32x8:   A[i = l%32][k = 4*(l/32) + v], B[k = 4*(l/32) + v][j = l%32];
//              D register r: row 8*(r/4) + 4*(l/32) + r%4, column l%32.
//   16x16x16:  A[i = l%16][k = 4*(l/16) + v], B[k = 4*(l/16) + v][j = l%16];
//              D register r: row 4*(l/16) + r, column l%16.
struct emu_wave_buf { float a[64][4], b[64][4]; };
static emu_wave_buf emu_wave[64];
template <int M, int R, class OP, class CONV>
static void emu_mfma(const OP& a, const OP& b, float* c, CONV conv) {
    const int lane = emu_tid % 64, wave = emu_tid / 64;
    emu_wave_buf& w = emu_wave[wave];
    for (int v = 0; v < 4; ++v) { w.a[lane][v] = conv(a[v]); w.b[lane][v] = conv(b[v]); }
    emu_wave_bar[wave]->arrive_and_wait();
    const int kgroups = 64 / M;  // lanes l and l + M*q hold k-groups q of the same row/column
    float d[R];
    for (int r = 0; r < R; ++r) {
        const int row = M == 32 ? 8 * (r / 4) + 4 * (lane / 32) + r % 4 : 4 * (lane / 16) + r;
        const int col = lane % M;
        float s = c[r];
        for (int q = 0; q < kgroups; ++q)
            for (int v = 0; v < 4; ++v) s += w.a[row + M * q][v] * w.b[col + M * q][v];
        d[r] = s;
    }
    emu_wave_bar[wave]->arrive_and_wait();
    for (int r = 0; r < R; ++r) c[r] = d[r];
}
typedef float emu_f16v __attribute__((ext_vector_type(16)));
typedef float emu_f4v __attribute__((ext_vector_type(4)));
typedef _Float16 emu_h4 __attribute__((ext_vector_type(4)));
typedef short emu_s4 __attribute__((ext_vector_type(4)));
// The builtin NAME on operand vectors OP accumulating into ACC (R floats of an M x M atom).
#define EMU_MFMA(NAME, OP, ACC, M, R, CONV)                          \
    static ACC NAME(OP a, OP b, ACC c, int, int, int) {              \
        float t[R];                                                  \
        for (int r = 0; r < R; ++r) t[r] = c[r];                     \
        emu_mfma<M, R>(a, b, t, CONV);                               \
        for (int r = 0; r < R; ++r) c[r] = t[r];                     \
        return c;                                                    \
    }
EMU_MFMA(__builtin_amdgcn_mfma_f32_32x32x8f16, emu_h4, emu_f16v, 32, 16, emu_h2f)
EMU_MFMA(__builtin_amdgcn_mfma_f32_32x32x8bf16_1k, emu_s4, emu_f16v, 32, 16, emu_bf2f)
EMU_MFMA(__builtin_amdgcn_mfma_f32_16x16x16f16, emu_h4, emu_f4v, 16, 4, emu_h2f)
EMU_MFMA(__builtin_amdgcn_mfma_f32_16x16x16bf16_1k, emu_s4, emu_f4v, 16, 4, emu_bf2f)
// Dynamic shared memory of the two kernels (64 KiB of LDS on gfx90a/gfx942, with room).
extern "C" {
alignas(16) unsigned char dg_smem[1 << 17];
alignas(16) unsigned char dd_smem[1 << 18];
}
"""

MAIN = r"""
static std::vector<unsigned char> slurp(const char* path) {
    FILE* f = fopen(path, "rb");
    if (!f) { perror(path); exit(2); }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    std::vector<unsigned char> v(n + 64);
    if (fread(v.data(), 1, n, f) != (size_t)n) exit(2);
    fclose(f);
    return v;
}

// argv: dy w dx(in/out) gx gy gz threads
int main(int argc, char** argv) {
    if (argc != 8) return 2;
    std::vector<unsigned char> dy = slurp(argv[1]), w = slurp(argv[2]), dx = slurp(argv[3]);
    const int grid[3] = {atoi(argv[4]), atoi(argv[5]), atoi(argv[6])};
    const int threads = atoi(argv[7]);
    for (int z = 0; z < grid[2]; ++z)
        for (int y = 0; y < grid[1]; ++y)
            for (int x = 0; x < grid[0]; ++x) {
                emu_bid[0] = x; emu_bid[1] = y; emu_bid[2] = z;
                std::barrier<> bar(threads);
                emu_block_bar = &bar;
                std::vector<std::barrier<>*> waves;
                for (int i = 0; i * 64 < threads; ++i)  // the last wave may be partial
                    waves.push_back(emu_wave_bar[i] = new std::barrier<>(std::min(64, threads - i * 64)));
                std::vector<std::thread> ts;
                for (int t = 0; t < threads; ++t)
                    ts.emplace_back([&, t] {
                        emu_tid = t;
                        EMU_LAUNCH(dy.data(), w.data(), dx.data());
                    });
                for (auto& th : ts) th.join();
                for (auto* b : waves) delete b;
            }
    FILE* f = fopen(argv[3], "wb");
    fwrite(dx.data(), 1, dx.size() - 64, f);
    fclose(f);
    return 0;
}
"""


def available() -> bool:
    """Whether a clang++ that can build the emulator is on PATH."""
    return CXX is not None


GEMM_LAUNCH = "DG_KERNEL_NAME((const dg_t*)(dy), (const dg_t*)(w), (dg_t*)(dx))"
DIRECT_LAUNCH = "DG_KERNEL_NAME((const dd_t*)(dy), (const dd_t*)(w), (dd_t*)(dx))"


def build(text: str, call: str, workdir: str | os.PathLike) -> Path:
    """Compile an AMD-flavour kernel text (``KernelSource.text``) into a host executable
    whose blocks run ``call`` (:data:`GEMM_LAUNCH`, :data:`DIRECT_LAUNCH`), cached by the
    text's hash inside ``workdir``.

    Raises:
        ValueError: not an AMD-flavour text (the NVIDIA flavour has PTX inside).
        RuntimeError: clang++ failed (its message attached).
    """
    if "#define DG_VENDOR_AMD 1" not in text:
        raise ValueError("only AMD-flavour kernel texts run on the emulator")
    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    text = PREAMBLE + text + f"\n#define EMU_LAUNCH(dy, w, dx) {call}\n" + MAIN
    key = hashlib.sha256(text.encode()).hexdigest()[:16]
    exe = work / f"emu_{key}"
    if exe.exists():
        return exe
    d = Path(tempfile.mkdtemp(prefix="emu-", dir=work))
    (d / "main.cpp").write_text(text)
    cmd = [CXX, "-std=c++20", "-O1", "-w", "-pthread", "-o", str(exe), str(d / "main.cpp")]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{CXX} failed:\n{r.stderr[-4000:]}")
    return exe


def _run(text: str, call: str, grid, threads: int, dy: bytes, w: bytes, dx: bytes, workdir) -> bytes:
    exe = build(text, call, workdir)
    d = Path(tempfile.mkdtemp(prefix="emurun-", dir=workdir))
    for name, data in (("dy", dy), ("w", w), ("dx", dx)):
        (d / f"{name}.bin").write_bytes(data)
    gx, gy, gz = grid
    r = subprocess.run([str(exe), str(d / "dy.bin"), str(d / "w.bin"), str(d / "dx.bin"), str(gx), str(gy),
                        str(gz), str(threads)], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"emulated kernel failed ({r.returncode}): {r.stderr[-2000:]}")
    return (d / "dx.bin").read_bytes()


def launch_gemm(text: str, grid, threads: int, dy: bytes, w: bytes, dx: bytes, workdir) -> bytes:
    """One launch (``grid`` = (x, y, z) blocks of ``threads``) of the ``dgrad.cu`` kernel
    ``text`` over the raw device bytes ``dy``, ``w`` and ``dx`` (what its three pointers
    point at, to the end of their allocations); returns dX's bytes after it."""
    return _run(text, GEMM_LAUNCH, grid, threads, dy, w, dx, workdir)


def run_direct(spec, dy: np.ndarray, w: np.ndarray, workdir) -> np.ndarray:
    """dX from the emulated ``direct.cu`` kernel of a DirectSpec (NHWC storage arrays in and
    out; dX starts as all-ones bytes, a NaN, so an unwritten element shows)."""
    p = spec.problem
    src = spec.emit()      # any target's text: the AMD flavour is forced
    text = src.text if src.vendor == "amd" else "#define DG_VENDOR_AMD 1\n" + src.text
    st = layouts.storage_dtype(p.dtype)
    dx = b"\xff" * (p.dx_elems * st.itemsize)
    out = _run(text, DIRECT_LAUNCH, (src.grid[0], 1, 1), src.block[0], np.ascontiguousarray(dy).tobytes(),
               np.ascontiguousarray(w).tobytes(), dx, workdir)
    return np.frombuffer(out, dtype=st).reshape(p.N, p.Hi, p.Wi, p.C)
