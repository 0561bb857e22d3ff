"""Runs emitted kernel texts on the CPU (AMD flavour): clang++ compiles the source for the
host with the AMDGPU builtins it uses mapped onto host threads -- one std::thread per GPU
thread, a std::barrier per block for ``s_barrier`` and one per wave for the matrix
instructions, blocks one after another, atomics as host atomics. Both kernels run:
``dgrad.cu`` (the GEMM schedules, :func:`launch_gemm`) and ``direct.cu`` (:func:`run_direct`),
and beside them the layout transpose (:func:`launch_transpose`), the split-K reduction
(:func:`launch_reduce`) and the sub-pixel schedules' W' pack (:func:`launch_pack`).

The MFMA builtins are emulated from AMD's operand layouts (CDNA3 ISA, "Dense matrix
arithmetic"; the AMD Matrix Instruction Calculator), written here independently of the
kernel's fragment code: every lane of the wave deposits its A and B operands, the wave
meets at a barrier, each lane computes its own D elements in fp32, and the wave meets again
before the buffers are reused. So a test executes the kernels' real indexing, shared-memory
staging, zero fill, split-K atomics and every epilogue (NHWC, NCHW dX, patch, NCHW
pointwise) on a machine without a GPU. Slow: for small problems only.

The NVIDIA flavour runs with each PTX wrapper of ``dgrad.cu`` replaced by its emulation
(:data:`NVIDIA_WRAPPERS`): cp.async and TMA copies complete at issue (so a missing wait is
not caught), ldmatrix, mma.sync, shuffles and wgmma's fence/commit/wait are warp-collective
(the lanes of a warp run as threads and meet there, as a warp does), wgmma reads its
swizzled operands through the descriptors, mbarriers keep phases and transaction bytes.
"""

from __future__ import annotations

import hashlib
import os
import re
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
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <vector>
#define __global__
#define __device__
#define __shared__ EMU_SHARED
#define __restrict__
static thread_local int emu_tid, emu_tid_x, emu_tid_y;   // linear, and (x, y) in the block
static int emu_bid[3], emu_grid[3], emu_block_x, emu_block_y;
static int emu_wave;                      // lanes per wave (64) or warp (32)
static std::barrier<>* emu_block_bar;
static std::barrier<>* emu_consumer_bar;   // bar.sync 1 of the warpgroups (stream-K)
static std::vector<float> emu_sk_ws;       // stream-K's workspace: flags, then slots
static std::barrier<>* emu_wave_bar[64];
static void emu_wave_sync() { emu_wave_bar[emu_tid / emu_wave]->arrive_and_wait(); }

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
// Dynamic shared memory of the two kernels (64 KiB of LDS on gfx90a/gfx942, 227 KiB on sm_90).
extern "C" {
alignas(1024) unsigned char dg_smem[1 << 18];
alignas(1024) unsigned char dd_smem[1 << 18];
}
"""

AMD = r"""
#define EMU_WAVE 64
#define EMU_BLOCK_START()
#define EMU_THREAD_START(t)
#define amdgpu_flat_work_group_size(lo, hi) unused
#define __builtin_amdgcn_wave_barrier() emu_wave_sync()
#define __builtin_amdgcn_workitem_id_x() emu_tid_x
#define __builtin_amdgcn_workitem_id_y() emu_tid_y
#define __builtin_amdgcn_grid_size_x() (emu_grid[0] * emu_block_x)
#define __builtin_amdgcn_workgroup_size_x() emu_block_x
#define __builtin_amdgcn_grid_size_y() (emu_grid[1] * emu_block_y)
#define __builtin_amdgcn_workgroup_size_y() emu_block_y
#define __builtin_amdgcn_workgroup_id_x() emu_bid[0]
#define __builtin_amdgcn_workgroup_id_y() emu_bid[1]
#define __builtin_amdgcn_workgroup_id_z() emu_bid[2]
#define __builtin_amdgcn_s_barrier() emu_block_bar->arrive_and_wait()
#define __builtin_amdgcn_fence(a, b) std::atomic_thread_fence(std::memory_order_seq_cst)
#define __hip_atomic_fetch_add(p, v, order, scope) std::atomic_ref<float>(*(p)).fetch_add(v)
#define __builtin_amdgcn_global_atomic_fadd_v2f16(p, v) emu_fadd_v2f16((void*)(p), v)
#define __builtin_amdgcn_global_atomic_fadd_v2bf16(p, v) emu_fadd_v2bf16((void*)(p), v)

// ---- MFMA. Operand layouts (per lane l of a 64-lane wave, 4 operand elements v):
//   32x32x8:   A[i = l%32][k = 4*(l/32) + v], B[k = 4*(l/32) + v][j = l%32];
//              D register r: row 8*(r/4) + 4*(l/32) + r%4, column l%32.
//   16x16x16:  A[i = l%16][k = 4*(l/16) + v], B[k = 4*(l/16) + v][j = l%16];
//              D register r: row 4*(l/16) + r, column l%16.
struct emu_wave_buf { float a[64][4], b[64][4]; };
static emu_wave_buf emu_mfma_buf[64];
//   16x16x8 xf32: as 16x16x16 with 2 operand elements per lane (k = 2*(l/16) + v).
template <int M, int R, int V = 4, class OP, class CONV>
static void emu_mfma(const OP& a, const OP& b, float* c, CONV conv) {
    const int lane = emu_tid % 64, wave = emu_tid / 64;
    emu_wave_buf& w = emu_mfma_buf[wave];
    for (int v = 0; v < V; ++v) { w.a[lane][v] = conv(a[v]); w.b[lane][v] = conv(b[v]); }
    emu_wave_sync();
    const int kgroups = 64 / M;  // lanes l and l + M*q hold k-groups q of the same row/column
    float d[R];
    for (int r = 0; r < R; ++r) {
        const int row = M == 32 ? 8 * (r / 4) + 4 * (lane / 32) + r % 4 : 4 * (lane / 16) + r;
        const int col = lane % M;
        float s = c[r];
        for (int q = 0; q < kgroups; ++q)
            for (int v = 0; v < V; ++v) s += w.a[row + M * q][v] * w.b[col + M * q][v];
        d[r] = s;
    }
    emu_wave_sync();
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
typedef float emu_f2v __attribute__((ext_vector_type(2)));
static float emu_same(float f) { return f; }
static emu_f4v __builtin_amdgcn_mfma_f32_16x16x8_xf32(emu_f2v a, emu_f2v b, emu_f4v c, int, int, int) {
    float t[4];
    for (int r = 0; r < 4; ++r) t[r] = c[r];
    emu_mfma<16, 4, 2>(a, b, t, emu_same);
    for (int r = 0; r < 4; ++r) c[r] = t[r];
    return c;
}
"""

NVIDIA = r"""
#define EMU_WAVE 32
#define EMU_BLOCK_START() (blockIdx = {(unsigned)emu_bid[0], (unsigned)emu_bid[1], (unsigned)emu_bid[2]}, \
                           gridDim = {(unsigned)emu_grid[0], (unsigned)emu_grid[1], (unsigned)emu_grid[2]})
#define EMU_THREAD_START(t) (threadIdx = {(unsigned)emu_tid_x, (unsigned)emu_tid_y, 0u})
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __grid_constant__
#define __constant__
struct emu_dim3 { unsigned x, y, z; };
static thread_local emu_dim3 threadIdx;
static emu_dim3 blockIdx, gridDim;
#define __syncthreads() emu_block_bar->arrive_and_wait()
static float emu_b16_to_f(uint16_t u, int dtype) {
    if (dtype == 2) return emu_bf2f((short)u);
    _Float16 h;
    std::memcpy(&h, &u, 2);
    return (float)h;
}
static uint16_t emu_f2h_bits(float f) {
    _Float16 h = (_Float16)f;
    uint16_t u;
    std::memcpy(&u, &h, 2);
    return u;
}

// ---- warp-collective instructions: each lane deposits its operands, the warp meets, each
// lane computes its own results, the warp meets again before the buffers are reused.
struct emu_warp_buf { uint32_t addr[32]; uint32_t a[32][4]; uint32_t b[32][2]; };
static emu_warp_buf emu_warp[64];

// ldmatrix.m8n8.x{1,2,4}[.trans].b16 (PTX ISA "ldmatrix"): lanes 8i..8i+7 give the row
// addresses of matrix i (8 b16 each); lane l receives, per matrix, row l/4 and columns
// 2(l%4), 2(l%4)+1 -- of the transposed matrix with .trans.
static void emu_ldmatrix(uint32_t* r, int count, bool trans, uint32_t addr) {
    const int lane = emu_tid % 32;
    emu_warp_buf& w = emu_warp[emu_tid / 32];
    w.addr[lane] = addr;
    emu_wave_sync();
    for (int i = 0; i < count; ++i) {
        uint16_t e[2];
        for (int h = 0; h < 2; ++h) {
            const int row = trans ? 2 * (lane % 4) + h : lane / 4;
            const int col = trans ? lane / 4 : 2 * (lane % 4) + h;
            std::memcpy(&e[h], dg_smem + w.addr[8 * i + row] + 2 * col, 2);
        }
        r[i] = (uint32_t)e[0] | ((uint32_t)e[1] << 16);
    }
    emu_wave_sync();
}

// The two mma.sync atoms share their exchange and their C fragment: every lane deposits its
// A and B registers, the warp meets, each lane unpacks the whole A (16 x k) and B (k x 8),
// the warp meets again (the buffers may be reused), and each lane sums its own
// c0,c1 = C[g][2t, 2t+1], c2,c3 = C[g+8][2t, 2t+1] (g = lane/4, t = lane%4).
static emu_warp_buf& emu_warp_exchange(const uint32_t* a, uint32_t b0, uint32_t b1) {
    const int lane = emu_tid % 32;
    emu_warp_buf& w = emu_warp[emu_tid / 32];
    for (int i = 0; i < 4; ++i) w.a[lane][i] = a[i];
    w.b[lane][0] = b0;
    w.b[lane][1] = b1;
    emu_wave_sync();
    return w;
}
static void emu_mma_m16n8(float* c, const float (&A)[16][16], const float (&B)[16][8], int k_len) {
    emu_wave_sync();
    const int lane = emu_tid % 32, g = lane / 4, t = lane % 4;
    for (int e = 0; e < 4; ++e) {
        const int row = g + 8 * (e / 2), col = 2 * t + (e % 2);
        float acc = c[e];
        for (int k = 0; k < k_len; ++k) acc += A[row][k] * B[k][col];
        c[e] = acc;
    }
}

// mma.sync.m16n8k16.row.col.f32.{f16,bf16} (PTX ISA "Matrix fragments for mma.m16n8k16"):
// a0 A[g][2t,2t+1], a1 A[g+8][2t..], a2 A[g][2t+8..], a3 A[g+8][2t+8..]; b0 B[2t,2t+1][g],
// b1 B[2t+8,2t+9][g], two 16-bit values per register, the lower k in the low half.
static void emu_mma16816(float* c, const uint32_t* a, uint32_t b0, uint32_t b1, int dtype) {
    const emu_warp_buf& w = emu_warp_exchange(a, b0, b1);
    float A[16][16], B[16][8];
    for (int l = 0; l < 32; ++l) {
        const int g = l / 4, t = l % 4;
        for (int h = 0; h < 2; ++h) {
            A[g][2 * t + h] = emu_b16_to_f((uint16_t)(w.a[l][0] >> (16 * h)), dtype);
            A[g + 8][2 * t + h] = emu_b16_to_f((uint16_t)(w.a[l][1] >> (16 * h)), dtype);
            A[g][2 * t + 8 + h] = emu_b16_to_f((uint16_t)(w.a[l][2] >> (16 * h)), dtype);
            A[g + 8][2 * t + 8 + h] = emu_b16_to_f((uint16_t)(w.a[l][3] >> (16 * h)), dtype);
            B[2 * t + h][g] = emu_b16_to_f((uint16_t)(w.b[l][0] >> (16 * h)), dtype);
            B[2 * t + 8 + h][g] = emu_b16_to_f((uint16_t)(w.b[l][1] >> (16 * h)), dtype);
        }
    }
    emu_mma_m16n8(c, A, B, 16);
}

// mma.sync.m16n8k8.row.col.f32.tf32 (PTX ISA "Matrix fragments for mma.m16n8k8", .tf32):
// a0 A[g][t], a1 A[g+8][t], a2 A[g][t+4], a3 A[g+8][t+4]; b0 B[t][g], b1 B[t+4][g]; the
// operands are 32-bit TF32 patterns (fp32 with the low 13 bits zero).
static float emu_bits_f(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
static void emu_mma1688_tf32(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
    const emu_warp_buf& w = emu_warp_exchange(a, b0, b1);
    float A[16][16], B[16][8];
    for (int l = 0; l < 32; ++l) {
        const int g = l / 4, t = l % 4;
        A[g][t] = emu_bits_f(w.a[l][0]);
        A[g + 8][t] = emu_bits_f(w.a[l][1]);
        A[g][t + 4] = emu_bits_f(w.a[l][2]);
        A[g + 8][t + 4] = emu_bits_f(w.a[l][3]);
        B[t][g] = emu_bits_f(w.b[l][0]);
        B[t + 4][g] = emu_bits_f(w.b[l][1]);
    }
    emu_mma_m16n8(c, A, B, 8);
}
// cvt.rna.tf32.f32: to nearest, ties away from zero, 10 mantissa bits; NaN stays NaN.
static uint32_t emu_cvt_rna_tf32(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7f800000u) != 0x7f800000u) return (u + 0x1000u) & 0xffffe000u;
    return (u & 0x007fffffu) ? 0x7fffffffu : u;
}

// wgmma.mma_async.m64nNk16.f32 with A K-major and B MN-major in swizzled shared memory
// (PTX ISA 9.7.15.5.1.2 "Shared Memory Matrix Layout" and 9.7.15.5.1.2.2 "Matrix Descriptor
// Format"): descriptor bits 0-13 start address, 16-29 leading-dimension byte offset, 32-45
// stride byte offset (16-byte units), 49-51 base offset (0 here: every pattern starts on its
// repeat boundary), 62-63 swizzle mode: 1 = 128 bytes, 2 = 64 bytes, 3 = 32 bytes. A swizzle
// atom of S bytes (S = 128, 64, 32) is 8 rows of S bytes (8 x S/16 16-byte units K-major,
// S/16 x 8 MN-major), repeating every 8*S bytes; the swizzle XORs the 16-byte unit index,
// address bits 4 .. 3+log2(S/16), with the row bits 7 .. 6+log2(S/16): bits 4-6 with 7-9
// (128B), 4-5 with 7-8 (64B), 4 with 7 (32B). With E-byte elements, A(m, k) = start +
// (m/8)*SBO + (m%8)*S + E*k; B(k, n) = start + (n/(S/E))*LBO + (k/8)*SBO + (k%8)*S +
// E*(n%(S/E)) (LBO: between S-byte-wide column blocks, SBO: between 8-row groups of k).
// Thread T of the warpgroup holds, per 8-column chunk j,
// D[16(T/32) + (T%32)/4 + 8(e/2)][8j + 2(T%4) + e%2] in d[4j + e]. Executed at issue: the
// operands are read when the instruction is issued, the results are final at once.
static uint32_t emu_swz_mode(uint32_t a, int mode) {
    if (mode == 0) return a;                      // no swizzle (a tensor map's SWIZZLE_NONE)
    const uint32_t mask = mode == 1 ? 7u : mode == 2 ? 3u : 1u;
    return a ^ (((a >> 7) & mask) << 4);
}
static uint32_t emu_swz_bytes(int mode) { return mode == 1 ? 128u : mode == 2 ? 64u : 32u; }

// __shfl_xor_sync, __shfl_down_sync: every lane of the warp takes part.
struct emu_shfl_buf { uint32_t v[32]; };
static emu_shfl_buf emu_shfl[64];
static unsigned __shfl_xor_sync(unsigned, unsigned v, int lane_mask) {
    const int lane = emu_tid % 32;
    emu_shfl_buf& b = emu_shfl[emu_tid / 32];
    b.v[lane] = v;
    emu_wave_sync();
    const unsigned r = b.v[lane ^ lane_mask];
    emu_wave_sync();
    return r;
}
// __shfl_down_sync: lane l reads lane l + delta's value (its own where that is past lane 31).
static unsigned __shfl_down_sync(unsigned, unsigned v, unsigned delta) {
    const int lane = emu_tid % 32;
    emu_shfl_buf& b = emu_shfl[emu_tid / 32];
    b.v[lane] = v;
    emu_wave_sync();
    const unsigned r = b.v[lane + (int)delta < 32 ? lane + (int)delta : lane];
    emu_wave_sync();
    return r;
}

// mbarrier (PTX ISA "mbarrier"): a phase completes when its pending arrivals and its
// transaction bytes both reach zero; try_wait.parity(p) succeeds once the phase of parity p
// has completed, i.e. while the current phase's parity differs from p. Kept beside shared
// memory, keyed by the barrier's shared address; a wait that never ends aborts the run.
struct emu_mbar_state { int expected = 0, pending = 0; long long tx = 0; unsigned phase = 0; };
static std::mutex emu_mbar_mu;
static std::map<uint32_t, emu_mbar_state> emu_mbars;
static void emu_mbar_settle(emu_mbar_state& b) {
    if (b.pending == 0 && b.tx == 0) { ++b.phase; b.pending = b.expected; }
}
static void emu_mbar_init(uint32_t bar, int count) {
    std::lock_guard<std::mutex> g(emu_mbar_mu);
    emu_mbars[bar] = emu_mbar_state{count, count, 0, 0};
}
static void emu_mbar_arrive(uint32_t bar, long long tx) {
    std::lock_guard<std::mutex> g(emu_mbar_mu);
    emu_mbar_state& b = emu_mbars.at(bar);
    b.tx += tx;
    --b.pending;
    emu_mbar_settle(b);
}
static void emu_mbar_complete_tx(uint32_t bar, long long bytes) {
    std::lock_guard<std::mutex> g(emu_mbar_mu);
    emu_mbar_state& b = emu_mbars.at(bar);
    b.tx -= bytes;
    emu_mbar_settle(b);
}
static void emu_mbar_wait(uint32_t bar, unsigned parity) {
    const auto start = std::chrono::steady_clock::now();
    for (long long spin = 0;; ++spin) {
        {
            std::lock_guard<std::mutex> g(emu_mbar_mu);
            if ((emu_mbars.at(bar).phase & 1u) != parity) return;
        }
        if (spin < 64) {
            std::this_thread::yield();
            continue;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(50));   // let the other threads run
        static const long long limit_s = getenv("DGRAD_EMU_WAIT_S") ? atoll(getenv("DGRAD_EMU_WAIT_S")) : 300;
        if (std::chrono::steady_clock::now() - start > std::chrono::seconds(limit_s)) {
            std::lock_guard<std::mutex> g(emu_mbar_mu);
            fprintf(stderr, "mbarrier wait never completed (deadlock) at barrier %u, parity %u; barriers:", bar, parity);
            for (auto& [a, b] : emu_mbars)
                fprintf(stderr, " [%u: phase %u, pending %d of %d, tx %lld]", a, b.phase, b.pending, b.expected, b.tx);
            fprintf(stderr, "\n");
            exit(5);
        }
    }
}

// Tensor maps (cuTensorMapEncodeTiled, 128-byte swizzle or the map's own, swz = the
// descriptor mode: 1 = 128 bytes, 2 = 64; zeros outside the tensor): the
// kernel's opaque map holds an index into emu_maps, which the launch fills from the
// solution's TensorMapDesc. A box lands row-major (dim 0 innermost) at dst, swizzled. A box
// whose innermost start is not 16-byte aligned stops the run, as it stops the kernel on the
// H200 (an illegal-instruction error, bench/RESULTS.md tenth session).
struct emu_tmap_info { const unsigned char* base; int rank, eb; long long dims[5], strides[5]; int box[5]; int swz = 1; };
static emu_tmap_info emu_maps[2];
static void emu_tma_load(uint32_t dst, unsigned long long map, const int* c, uint32_t bar) {
    const emu_tmap_info& m = emu_maps[*reinterpret_cast<const unsigned long long*>(map)];
    if (((long long)c[0] * m.eb) % 16 != 0) {     // the H200 stops such a copy: illegal instruction
        fprintf(stderr, "tensor copy: innermost start coordinate %d is not 16-byte aligned\n", c[0]);
        exit(6);
    }
    long long n = 1;
    for (int d = 0; d < m.rank; ++d) n *= m.box[d];
    for (long long e = 0; e < n; ++e) {
        long long rest = e, off = 0;
        bool inside = true;
        for (int d = 0; d < m.rank; ++d) {
            const long long i = c[d] + rest % m.box[d];
            rest /= m.box[d];
            inside = inside && i >= 0 && i < m.dims[d];
            off += i * (d == 0 ? m.eb : m.strides[d - 1]);
        }
        unsigned char* to = dg_smem + emu_swz_mode(dst + (uint32_t)(e * m.eb), m.swz);
        if (inside) std::memcpy(to, m.base + off, m.eb);
        else std::memset(to, 0, m.eb);
    }
    emu_mbar_complete_tx(bar, n * m.eb);
}
// wgmma.mma_async.m64nNk8.f32.tf32.tf32: both operands K-major (the only form .tf32 takes),
// 4-byte elements: A(m, k) = start + (m/8)*SBO + (m%8)*128 + 4k, B(k, n) = start + (n/8)*SBO +
// (n%8)*128 + 4k; each operand read as TF32 (the low 13 mantissa bits ignored).
static float emu_tf32_operand(const unsigned char* p) {
    uint32_t u;
    std::memcpy(&u, p, 4);
    u &= 0xffffe000u;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
// One element (row m, column col) of a wgmma operand pair at k: A K-major; B MN-major for
// 16-bit types, K-major for .tf32 (then A's form with the columns as rows). a_mode/b_mode:
// each descriptor's swizzle mode.
static float emu_wgmma_product(uint32_t a0, uint32_t a_sbo, int a_mode, uint32_t b0, uint32_t b_lbo, uint32_t b_sbo,
                               int b_mode, int m, int col, int k, int dtype) {
    const uint32_t sa = emu_swz_bytes(a_mode), sb = emu_swz_bytes(b_mode);
    if (dtype == 0)
        return emu_tf32_operand(dg_smem + emu_swz_mode(a0 + (m / 8) * a_sbo + (m % 8) * sa + 4 * k, a_mode)) *
               emu_tf32_operand(dg_smem + emu_swz_mode(b0 + (col / 8) * b_sbo + (col % 8) * sb + 4 * k, b_mode));
    const int b_cols = (int)sb / 2;               // 16-bit columns in one S-byte row of B
    uint16_t ua, ub;
    std::memcpy(&ua, dg_smem + emu_swz_mode(a0 + (m / 8) * a_sbo + (m % 8) * sa + 2 * k, a_mode), 2);
    std::memcpy(&ub, dg_smem + emu_swz_mode(b0 + (col / b_cols) * b_lbo + (k / 8) * b_sbo + (k % 8) * sb +
                                                2 * (col % b_cols), b_mode), 2);
    return emu_b16_to_f(ua, dtype) * emu_b16_to_f(ub, dtype);
}
static void emu_wgmma(float* d, unsigned long long ad, unsigned long long bd, int n, int dtype) {
    const int a_mode = (int)(ad >> 62), b_mode = (int)(bd >> 62);
    if (a_mode == 0 || b_mode == 0) { fprintf(stderr, "wgmma: the unswizzled layout is not emulated\n"); exit(4); }
    if (((ad >> 49) & 7) || ((bd >> 49) & 7)) {
        fprintf(stderr, "wgmma: a nonzero base offset is not emulated\n");
        exit(4);
    }
    const uint32_t a0 = (uint32_t)(ad & 0x3FFF) << 4, a_sbo = (uint32_t)((ad >> 32) & 0x3FFF) << 4;
    const uint32_t b0 = (uint32_t)(bd & 0x3FFF) << 4, b_lbo = (uint32_t)((bd >> 16) & 0x3FFF) << 4,
                   b_sbo = (uint32_t)((bd >> 32) & 0x3FFF) << 4;
    const int T = emu_tid % 128;
    const int ksteps = dtype == 0 ? 8 : 16;       // m64nNk8 .tf32, m64nNk16 f16/bf16
    for (int j = 0; j < n / 8; ++j)
        for (int e = 0; e < 4; ++e) {
            const int m = 16 * (T / 32) + (T % 32) / 4 + 8 * (e / 2);
            const int col = 8 * j + 2 * (T % 4) + e % 2;
            float acc = d[4 * j + e];
            for (int k = 0; k < ksteps; ++k)
                acc += emu_wgmma_product(a0, a_sbo, a_mode, b0, b_lbo, b_sbo, b_mode, m, col, k, dtype);
            d[4 * j + e] = acc;
        }
}
"""

# The NVIDIA flavour's PTX wrappers of dgrad.cu and what the emulator runs instead (each
# replaces the whole definition: the name's signature and body; a template header before it
# stays).
NVIDIA_WRAPPERS = {
    "dg_f2bf": "DG_DEVICE dg_u16 dg_f2bf(float f) { return emu_f2bf(f); }",
    "dg_f2h": "DG_DEVICE dg_u16 dg_f2h(float f) { return emu_f2h_bits(f); }",
    "dg_atomic_add1": "DG_DEVICE void dg_atomic_add1(float* p, float v) { std::atomic_ref<float>(*p).fetch_add(v); }",
    "dg_atomic_add2": """DG_DEVICE void dg_atomic_add2(dg_u16* p, float lo, float hi) {
#if DG_DTYPE == 1
    emu_h2 v = {(_Float16)lo, (_Float16)hi};
    emu_fadd_v2f16(p, v);
#elif DG_DTYPE == 2
    emu_s2 v = {(short)emu_f2bf(lo), (short)emu_f2bf(hi)};
    emu_fadd_v2bf16(p, v);
#endif
}""",
    "dg_store_f32x2": "DG_DEVICE void dg_store_f32x2(float* p, float x, float y) { p[0] = x; p[1] = y; }",
    "dg_store16": "DG_DEVICE void dg_store16(void* p, const dg_b16& v) { std::memcpy(p, &v, 16); }",
    "dg_store8": "DG_DEVICE void dg_store8(void* p, const dg_b8& v) { std::memcpy(p, &v, 8); }",
    "dg_smem_addr": "DG_DEVICE dg_u32 dg_smem_addr(const void* p) { return (dg_u32)((const unsigned char*)p - dg_smem); }",
    "dg_cp_async": """DG_DEVICE void dg_cp_async(dg_u32 s, const void* gmem, bool valid) {
    std::memset(dg_smem + s, 0, BYTES);
    if (valid) std::memcpy(dg_smem + s, gmem, BYTES);
}""",
    "dg_cp_commit": "DG_DEVICE void dg_cp_commit() {}",
    "dg_cp_wait": "DG_DEVICE void dg_cp_wait() {}",
    "dg_publish_smem": "DG_DEVICE void dg_publish_smem() {}",
    "dg_ldmatrix_x4": "DG_DEVICE void dg_ldmatrix_x4(dg_u32 (&r)[4], dg_u32 p) { emu_ldmatrix(r, 4, false, p); }",
    "dg_ldmatrix_x4_t": "DG_DEVICE void dg_ldmatrix_x4_t(dg_u32 (&r)[4], dg_u32 p) { emu_ldmatrix(r, 4, true, p); }",
    "dg_ldmatrix_x2": "DG_DEVICE void dg_ldmatrix_x2(dg_u32 (&r)[2], dg_u32 p) { emu_ldmatrix(r, 2, false, p); }",
    "dg_ldmatrix_x2_t": "DG_DEVICE void dg_ldmatrix_x2_t(dg_u32 (&r)[2], dg_u32 p) { emu_ldmatrix(r, 2, true, p); }",
    "dg_mma": """DG_DEVICE void dg_mma(float (&c)[4], const dg_u32 (&a)[4], dg_u32 b0, dg_u32 b1) {
    emu_mma16816(c, a, b0, b1, DG_DTYPE);
}""",
}
NVIDIA_WRAPPERS.update({       # the kernel's warpgroup MMA (emit.wgmma_wrapper), N = DG_WG_N
    "dg_wgmma": """DG_DEVICE void dg_wgmma(float* d, unsigned long long a, unsigned long long b) {
    emu_wgmma(d, a, b, DG_WG_N, DG_DTYPE);
}"""})
NVIDIA_WRAPPERS.update({
    "dg_mbar_init": "DG_DEVICE void dg_mbar_init(dg_u32 bar, dg_u32 count) { emu_mbar_init(bar, (int)count); }",
    "dg_mbar_wait": "DG_DEVICE void dg_mbar_wait(dg_u32 bar, dg_u32 parity) { emu_mbar_wait(bar, parity); }",
    "dg_mbar_arrive": "DG_DEVICE void dg_mbar_arrive(dg_u32 bar) { emu_mbar_arrive(bar, 0); }",
    "dg_mbar_expect_tx": "DG_DEVICE void dg_mbar_expect_tx(dg_u32 bar, dg_u32 bytes) { emu_mbar_arrive(bar, bytes); }",
    "dg_tma_load_2d": """DG_DEVICE void dg_tma_load_2d(dg_u32 dst, const dg_tmap* map, int c0, int c1, dg_u32 bar) {
    const int c[2] = {c0, c1};
    emu_tma_load(dst, reinterpret_cast<unsigned long long>(map), c, bar);
}""",
    "dg_tma_load_3d": """DG_DEVICE void dg_tma_load_3d(dg_u32 dst, const dg_tmap* map, int c0, int c1, int c2, dg_u32 bar) {
    const int c[3] = {c0, c1, c2};
    emu_tma_load(dst, reinterpret_cast<unsigned long long>(map), c, bar);
}""",
    "dg_tma_load_4d": """DG_DEVICE void dg_tma_load_4d(dg_u32 dst, const dg_tmap* map, int c0, int c1, int c2, int c3,
                               dg_u32 bar) {
    const int c[4] = {c0, c1, c2, c3};
    emu_tma_load(dst, reinterpret_cast<unsigned long long>(map), c, bar);
}""",
})
# Stream-K's flags and partial sums (dgrad.cu's tmsk section): the warpgroups' named barrier,
# flags as host atomics (a wait that never ends stops the run), plain loads and stores.
NVIDIA_WRAPPERS.update({
    "dg_consumer_sync": "DG_DEVICE void dg_consumer_sync() { emu_consumer_bar->arrive_and_wait(); }",
    "dg_sk_raise": """DG_DEVICE void dg_sk_raise(unsigned* f, int tid) {
    dg_consumer_sync();
    if (tid == 0) std::atomic_ref<unsigned>(*f).store(1u);
}""",
    "dg_sk_wait": """DG_DEVICE void dg_sk_wait(const unsigned* f, int tid) {
    if (tid == 0) {
        const auto start = std::chrono::steady_clock::now();
        while (!std::atomic_ref<unsigned>(*const_cast<unsigned*>(f)).load()) {
            std::this_thread::sleep_for(std::chrono::microseconds(50));
            if (std::chrono::steady_clock::now() - start > std::chrono::seconds(60)) {
                fprintf(stderr, "stream-K flag %d was never raised (deadlock)\\n", (int)(f - (const unsigned*)emu_sk_ws.data()));
                exit(7);
            }
        }
    }
    dg_consumer_sync();
}""",
    "dg_sk_st4": """DG_DEVICE void dg_sk_st4(float* p, const float (&a)[4]) {
    for (int e = 0; e < 4; ++e) p[e] = a[e];
}""",
    "dg_sk_ld4": """DG_DEVICE void dg_sk_ld4(const float* p, float (&v)[4]) {
    for (int e = 0; e < 4; ++e) v[e] = p[e];
}""",
})
# The TF32 atom (dgrad.cu's tf32 section).
NVIDIA_WRAPPERS.update({
    "dg_tf32": "DG_DEVICE dg_u32 dg_tf32(float f) { return emu_cvt_rna_tf32(f); }",
    "dg_round_tf32": """DG_DEVICE float dg_round_tf32(float f) {
    const uint32_t u = emu_cvt_rna_tf32(f);
    float r;
    std::memcpy(&r, &u, 4);
    return r;
}""",
    "dg_mma_tf32": """DG_DEVICE void dg_mma_tf32(float (&c)[4], const dg_u32 (&a)[4], dg_u32 b0, dg_u32 b1) {
    emu_mma1688_tf32(c, a, b0, b1);
}""",
})
# direct.cu's PTX: the 16-bit conversions (whole functions) and its read-only loads
# (ld.global.nc into `v` from `p`: plain copies).
NVIDIA_WRAPPERS.update({
    "dd_to_f": """DD_DEVICE float dd_to_f(dd_t v) {
#if DG_DTYPE == 0
    return v;
#else
    return emu_b16_to_f(v, DG_DTYPE);
#endif
}""",
    "dd_from_f": """DD_DEVICE dd_t dd_from_f(float f) {
#if DG_DTYPE == 0
    return f;
#elif DG_DTYPE == 1
    return emu_f2h_bits(f);
#else
    return emu_f2bf(f);
#endif
}""",
})
NVIDIA_LDG = re.compile(r'asm\("ld\.global\.nc[^"]*"[^;]*;')
# wgmma's group bookkeeping (.sync.aligned: every lane of the warp executes it together) is a
# warp barrier, so the lanes of a warp stay in step as on the GPU -- a lane that released a
# stage (mbarrier arrive) has all its warp's reads of it behind it; the mbarrier-init fence
# orders nothing when every operation completes at issue, and register reallocation
# (setmaxnreg) nothing on host threads; one launch at a time has no
# predecessor grid to wait for (griddepcontrol).
NVIDIA_WARP_SYNCS = re.compile(r'asm volatile\("(?:wgmma\.(?:fence|commit_group|wait_group)|bar\.warp\.sync)[^"]*"[^;]*;')
NVIDIA_NOOPS = re.compile(r'asm volatile\("(?:fence\.mbarrier_init|setmaxnreg\.)[^"]*"[^;]*;')
NVIDIA_GRID_DEPENDENCY = re.compile(r'asm volatile\("griddepcontrol\.[^"]*"\s*:::\s*"memory"\)')


def _replace_definitions(text: str, name: str, new: str) -> str:
    """``text`` with every definition of function ``name`` (from ``DG_DEVICE`` (``DD_DEVICE``
    in direct.cu) to the brace
    that closes its body; both vendor branches where there are two) replaced by ``new``."""
    for m in reversed(list(re.finditer(r"D[GD]_DEVICE[^;{(]*\b" + re.escape(name) + r"\(", text))):
        open_brace = text.index("{", m.end())
        depth, i = 0, open_brace
        while True:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            if depth == 0:
                break
            i += 1
        text = text[:m.start()] + new + text[i + 1:]
    return text


def nvidia_host_text(text: str) -> str:
    """The NVIDIA-flavour kernel text with every PTX wrapper the kernel defines replaced by
    its emulation.

    Raises:
        ValueError: PTX left over that the emulator does not know.
    """
    for name, new in NVIDIA_WRAPPERS.items():
        text = _replace_definitions(text, name, new)
    text = NVIDIA_LDG.sub("std::memcpy(&v, p, sizeof(v));", text)
    text = NVIDIA_WARP_SYNCS.sub("emu_wave_sync();", text)
    text = NVIDIA_NOOPS.sub(";", text)
    text = NVIDIA_GRID_DEPENDENCY.sub("((void)0)", text)
    left = re.findall(r'asm(?: volatile)?\("[^"]*', text)
    if left:
        raise ValueError(f"PTX the emulator does not know: {left[:3]}")
    return text


MAIN = r"""
#ifdef DG_SK_ITERS
#define EMU_SK_ARG , emu_sk_ws.data()
#else
#define EMU_SK_ARG
#endif
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

// argv: dy w dx(in/out) gx gy gz threads block_x
int main(int argc, char** argv) {
    if (argc != 9) return 2;
    std::vector<unsigned char> dy = slurp(argv[1]), w = slurp(argv[2]), dx = slurp(argv[3]);
    EMU_SETUP(dy.data(), w.data());
    const int grid[3] = {atoi(argv[4]), atoi(argv[5]), atoi(argv[6])};
    const int threads = atoi(argv[7]);
    for (int d = 0; d < 3; ++d) emu_grid[d] = grid[d];
    emu_block_x = atoi(argv[8]);
    emu_block_y = threads / emu_block_x;
    emu_wave = EMU_WAVE;
#ifdef DG_SK_ITERS
    // Stream-K: flags zeroed (as the runtime clears them), slots NaN (a slot read before it
    // was written poisons dX); a block waits for the blocks after it, which on a GPU run at
    // the same time, so here they run first: blocks in descending order.
    emu_sk_ws.assign(DG_SK_FLAGS + (size_t)DG_TILE_BLOCKS * DG_SK_SLOT, __builtin_nanf(""));
    std::fill(emu_sk_ws.begin(), emu_sk_ws.begin() + DG_SK_FLAGS, 0.0f);
    const bool reversed = true;
#else
    const bool reversed = false;
#endif
    for (int z = 0; z < grid[2]; ++z)
        for (int y = 0; y < grid[1]; ++y)
            for (int xi = 0; xi < grid[0]; ++xi) {
                const int x = reversed ? grid[0] - 1 - xi : xi;
                emu_bid[0] = x; emu_bid[1] = y; emu_bid[2] = z;
                EMU_BLOCK_START();
                std::barrier<> bar(threads);
                emu_block_bar = &bar;
#ifdef DG_SK_ITERS
                std::barrier<> consumers(DG_THREADS);
                emu_consumer_bar = &consumers;
#endif
                std::vector<std::barrier<>*> waves;
                for (int i = 0; i * emu_wave < threads; ++i)  // the last wave may be partial
                    waves.push_back(emu_wave_bar[i] = new std::barrier<>(std::min(emu_wave, threads - i * emu_wave)));
                std::vector<std::thread> ts;
                for (int t = 0; t < threads; ++t)
                    ts.emplace_back([&, t] {
                        emu_tid = t;
                        emu_tid_x = t % emu_block_x;
                        emu_tid_y = t / emu_block_x;
                        EMU_THREAD_START(t);
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
    """Whether the emulator's tests run: a clang++ is on PATH, or CI requires them
    (``DGRAD_REQUIRE_AMD_COMPILE``, set by ``.ci/run``, which installs clang-19: a missing
    compiler there fails the tests instead of skipping them)."""
    return CXX is not None or bool(os.environ.get("DGRAD_REQUIRE_AMD_COMPILE"))


GEMM_LAUNCH = "DG_KERNEL_NAME((const dg_t*)(dy), (const dg_t*)(w), (dg_t*)(dx))"
GEMM_TMA_LAUNCH = "DG_KERNEL_NAME((const dg_t*)(dy), (const dg_t*)(w), (dg_t*)(dx) EMU_SK_ARG EMU_MAP_ARGS)"
DIRECT_LAUNCH = "DG_KERNEL_NAME((const dd_t*)(dy), (const dd_t*)(w), (dd_t*)(dx))"


_SWIZZLE_MODE = {128: 1, 64: 2, 32: 3, 0: 0}
"""A tensor map's swizzle in bytes -> the matching wgmma descriptor mode (emu_swz_mode)."""


def _map_setup(maps) -> str:
    """C++ that fills ``emu_maps`` from TensorMapDescs (dY's over the dy buffer, W's over w)
    and passes each kernel its map index, after the kernel's own three pointers."""
    if not maps:
        return "#define EMU_SETUP(dy, w)\n"
    rows = []
    for i, m in enumerate(maps):
        eb = 2 if m.dtype in ("fp16", "bf16") else 4
        fill = lambda v, n=5: "{" + ", ".join(str(x) for x in (list(v) + [0] * n)[:n]) + "}"
        rows.append(f"emu_maps[{i}] = emu_tmap_info{{({m.operand}), {len(m.dims)}, {eb}, {fill(m.dims)}, "
                    f"{fill(m.strides)}, {fill(m.box)}, {_SWIZZLE_MODE[getattr(m, 'swizzle', 128)]}}};")
    args = ", ".join(f"emu_tmap_arg({i})" for i in range(len(maps)))
    return ("static dg_tmap emu_tmap_arg(unsigned long long i) { dg_tmap m = {}; m.opaque[0] = i; return m; }\n"
            "#define EMU_SETUP(dy, w) do { " + " ".join(rows) + " } while (0)\n"
            f"#define EMU_MAP_ARGS , {args}\n")


def build(text: str, call: str, workdir: str | os.PathLike, maps=(), static_shared: bool = False) -> Path:
    """Compile a kernel text (``KernelSource.text``, AMD or NVIDIA flavour: the NVIDIA one
    through :func:`nvidia_host_text`) into a host executable whose blocks run ``call``
    (:data:`GEMM_LAUNCH`, :data:`DIRECT_LAUNCH`), cached by the text's hash inside
    ``workdir``. ``static_shared``: the kernel declares its shared memory as ``__shared__``
    arrays inside the function (transpose.cu), made function statics (one per block, as
    blocks run one after another); the others use the harness's dynamic arrays.

    Raises:
        ValueError: an NVIDIA text the emulator cannot run (TMA, unknown PTX).
        RuntimeError: clang++ failed (its message attached).
    """
    layer = AMD if "#define DG_VENDOR_AMD 1" in text else NVIDIA
    if layer is NVIDIA:
        text = nvidia_host_text(text)
    if CXX is None:
        raise RuntimeError("no clang++ on PATH: the kernel emulator needs clang++ (clang-19)")
    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    shared = "#define EMU_SHARED static\n" if static_shared else "#define EMU_SHARED\n"
    text = (shared + PREAMBLE + layer + text + "\n" + _map_setup(maps) +
            f"#define EMU_LAUNCH(dy, w, dx) {call}\n" + MAIN)
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


def _run(text: str, call: str, grid, block, dy: bytes, w: bytes, dx: bytes, workdir, maps=(),
         static_shared=False) -> bytes:
    exe = build(text, call, workdir, maps, static_shared)
    block = tuple(block) + (1,) * (3 - len(tuple(block)))
    threads = block[0] * block[1] * block[2]
    d = Path(tempfile.mkdtemp(prefix="emurun-", dir=workdir))
    for name, data in (("dy", dy), ("w", w), ("dx", dx)):
        (d / f"{name}.bin").write_bytes(data)
    gx, gy, gz = grid
    r = subprocess.run([str(exe), str(d / "dy.bin"), str(d / "w.bin"), str(d / "dx.bin"), str(gx), str(gy),
                        str(gz), str(threads), str(block[0])], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"emulated kernel failed ({r.returncode}): {r.stderr[-2000:]}")
    return (d / "dx.bin").read_bytes()


def launch_gemm(text: str, grid, threads: int, dy: bytes, w: bytes, dx: bytes, workdir, maps=()) -> bytes:
    """One launch (``grid`` = (x, y, z) blocks of ``threads``) of the ``dgrad.cu`` kernel
    ``text`` over the raw device bytes ``dy``, ``w`` and ``dx`` (what its three pointers
    point at, to the end of their allocations); ``maps``: the TMA kernel's tensor maps
    (``KernelSource.tensor_maps``, over dy and w). Returns dX's bytes after it."""
    call = GEMM_TMA_LAUNCH if maps else GEMM_LAUNCH
    return _run(text, call, grid, (threads,), dy, w, dx, workdir, maps)


def launch_transpose(text: str, grid, block, src: bytes, dst: bytes, batch: int, rows: int, cols: int,
                     workdir, form: str = "tile") -> bytes:
    """One launch of the ``transpose.cu`` kernel ``text``, its ``form``'s entry point
    (``"tile"`` or ``"band"``; ``grid`` blocks of ``block`` threads, (x, y)) from the raw
    bytes ``src`` into ``dst``; returns dst's bytes after it."""
    entry = {"tile": "DT_KERNEL_NAME", "band": "DT_BAND_KERNEL_NAME"}[form]
    call = f"{entry}((const dt_t*)(dy), (dt_t*)(dx), {batch}ll, {rows}ll, {cols}ll)"
    return _run(text, call, grid, block, src, b"", dst, workdir, static_shared=True)


def launch_transpose_pair(text: str, grid, block, src0: bytes, src1: bytes, dst: bytes, jobs, workdir) -> bytes:
    """One launch of the ``transpose.cu`` pair kernel ``text`` (``grid`` blocks of ``block``
    threads): job 0 reads ``src0``, job 1 ``src1``, both write into ``dst``; ``jobs``: per job
    ``(dst byte offset, batch, rows, cols, gx, gy, form)`` (form 0 tile, 1 band). Returns dst's
    bytes after it."""
    def job(src, j):
        off, *sizes = j
        return f"(const dt_t*)({src}), (dt_t*)((dx) + {int(off)}), " + ", ".join(f"{int(v)}ll" for v in sizes)
    call = f"DT_PAIR_KERNEL_NAME({job('dy', jobs[0])}, {job('w', jobs[1])})"
    return _run(text, call, grid, block, src0, src1, dst, workdir, static_shared=True)


def launch_reduce(text: str, grid, block, ws: bytes, dx: bytes, args, workdir) -> bytes:
    """One launch of the split-K reduction ``splitk_reduce.cu`` (``text``; ``grid`` blocks of
    ``block`` threads) from the raw workspace bytes ``ws`` (at its slice 0) into ``dx``;
    ``args``: its 8-byte arguments after the two pointers
    (:meth:`~miopen_solver.splitk.SplitKReduce.args`). Returns dX's bytes after it."""
    call = "DR_KERNEL_NAME((const float*)(dy), (dg_t*)(dx), " + ", ".join(f"{int(a)}ll" for a in args) + ")"
    return _run(text, call, grid, block, ws, b"", dx, workdir, static_shared=True)


def launch_pack(text: str, grid, block, w: bytes, wp: bytes, workdir) -> bytes:
    """One launch of the sub-pixel W' pack ``subpixel_pack.cu`` (``text``; ``grid`` blocks of
    ``block`` threads) from the raw bytes of W into ``wp``; returns W''s bytes after it."""
    call = "DP_KERNEL_NAME((const dp_t*)(dy), (dp_t*)(dx))"
    return _run(text, call, grid, block, w, b"", wp, workdir, static_shared=True)


def run_direct(spec, dy: np.ndarray, w: np.ndarray, workdir, vendor: str = "amd") -> np.ndarray:
    """dX from the emulated ``direct.cu`` kernel of a DirectSpec (NHWC storage arrays in and
    out; dX starts as all-ones bytes, a NaN, so an unwritten element shows), in the
    ``vendor`` flavour of the spec's text."""
    p = spec.problem
    src = spec.emit()
    text = src.text.replace("#define DG_VENDOR_AMD 1\n", "")
    if vendor == "amd":
        text = "#define DG_VENDOR_AMD 1\n" + text
    st = layouts.storage_dtype(p.dtype)
    dx = b"\xff" * (p.dx_elems * st.itemsize)
    out = _run(text, DIRECT_LAUNCH, (src.grid[0], 1, 1), (src.block[0],), np.ascontiguousarray(dy).tobytes(),
               np.ascontiguousarray(w).tobytes(), dx, workdir)
    return np.frombuffer(out, dtype=st).reshape(p.N, p.Hi, p.Wi, p.C)
