// Direct backward-data convolution (dgrad) for depthwise and small-cpg grouped layers,
// NHWC, one source for CUDA and HIP. No GEMM tiles: every thread accumulates its own dX
// values in fp32 on the FMA units.
//
//   dX[n,hi,wi,g*cpg+c] = sum_{k<kpg,y,x} dY[n,ho,wo,g*kpg+k] * W[g*kpg+k,y,x,c]
//   ho = (hi + pH - y*dH)/sH, counted only when exact and 0 <= ho < Ho (wo likewise).
//
// Phases. A dX pixel (hi, wi) belongs to phase (rh, rw) = (hi mod sH, wi mod sW) and has
// phase-local coordinates (qh, qw) = (hi div sH, wi div sW). Within a phase the valid taps
// are fixed: y is valid iff (rh + pH - y*dH) % sH == 0, and then ho = qh + offy(y) with
// offy(y) = (rh + pH - y*dH)/sH (x likewise). So a thread that owns pixels of one phase
// never tests a tap: along W the phase is a template parameter (the valid x list, the
// offsets and the register window are compile-time constants), along H the valid y of
// each (dY row, thread row) pair is one uniform integer computation per dY row.
//
// Work split. grid.x = N * tiles_h * tiles_w * phases * channel_blocks (channel block
// fastest, then phase, then the tile along W, along H, image). A block owns DD_TQH x DD_TQW
// phase-local pixels x DD_TN channels; a thread owns DD_TPH x DD_TPW pixels (consecutive in
// the phase) x DD_V consecutive channels (chunk). Thread index: chunk fastest, then the
// thread column, then the thread row. For each dY row of its window the thread loads
// DD_TPW + spanx dY vectors (DD_NY channels each, fp32 after conversion) into registers
// and applies every (y, x) tap that maps them to its pixels, so each dY value fetched by a
// thread feeds up to X taps from registers. With DD_PREFETCH the next row's raw window is
// loaded while the current row is computed (measured slower on the H200: more registers).
//
// dY comes through the read-only path (DD_STAGE 0: ld.global.nc, reuse between threads in
// L1/L2) or is staged in shared memory first (DD_STAGE 1: the block's whole dY window,
// read from global once per block, zeros outside dY, so the inner loop has no bounds
// test). The block's filter taps are staged in shared memory as fp32, [tap][channel][k]
// with a 4-float pad per tap (16-byte aligned vector reads; fewer bank conflicts on the
// coalesced, tap-major staging writes). Every dX element of the block is written exactly
// once, from registers, converted to the storage type with round-to-nearest-even; pixels
// with no valid tap get 0. No atomics, no zero-fill pass, no workspace.
//
// Every problem value arrives as a DG_* define and every schedule value as a DD_* define
// from miopen_solver/direct.py. No vendor header is included.

// #block vendor
// ------------------------------------------------------------------ vendor layer
#if defined(DG_VENDOR_AMD)
#ifndef __global__
#define __global__ __attribute__((global))
#endif
#ifndef __device__
#define __device__ __attribute__((device))
#endif
#ifndef __shared__
#define __shared__ __attribute__((shared))
#endif
#define DD_GLOBAL extern "C" __global__ __attribute__((amdgpu_flat_work_group_size(DD_THREADS, DD_THREADS)))
#define DD_DEVICE __device__ inline __attribute__((always_inline))
#define DD_SHARED __shared__
#define DD_SYNC()                                                 \
    do {                                                          \
        __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");    \
        __builtin_amdgcn_s_barrier();                             \
        __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");    \
    } while (0)
#define DD_TID() ((int)__builtin_amdgcn_workitem_id_x())
#define DD_BID() ((long long)__builtin_amdgcn_workgroup_id_x())
#define DD_GRID_DEPENDENCY() do { } while (0)
#else
#define DD_GLOBAL extern "C" __global__ __launch_bounds__(DD_THREADS)
#define DD_DEVICE __device__ __forceinline__
#define DD_SHARED __shared__
#define DD_SYNC() __syncthreads()
#define DD_TID() ((int)threadIdx.x)
#define DD_BID() ((long long)blockIdx.x)
// Programmatic dependent launch (PTX ISA "griddepcontrol", sm_90+; runtime/gpu.py): a grid
// launched to overlap the stream's previous kernel waits in DD_GRID_DEPENDENCY(), before any
// global memory access, until that grid has completed and its writes are visible.
// Without the launch attribute (or before sm_90) it does nothing.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define DD_GRID_DEPENDENCY() asm volatile("griddepcontrol.wait;" ::: "memory")
#else
#define DD_GRID_DEPENDENCY() do { } while (0)
#endif
#endif

typedef unsigned short dd_u16;
typedef unsigned int dd_u32;

#if DG_DTYPE == 0
typedef float dd_t;
#define DD_EB 4
#else
typedef dd_u16 dd_t;
#define DD_EB 2
#endif

// Index type: 32-bit where every element offset of every tensor fits (emitted by the
// schedule from the tensor sizes), else 64-bit.
#if DD_IDX64
typedef long long dd_idx;
#else
typedef int dd_idx;
#endif
// #end block vendor

// ------------------------------------------------------------------ rules (mirror direct.py)
static_assert(DD_TN % DD_V == 0, "tile_n must be a multiple of the channel vector");
static_assert(DD_V % DG_CPG == 0 || DG_CPG % DD_V == 0, "vector and cpg must nest");
static_assert(DD_TN % DG_CPG == 0 || DG_CPG % DD_TN == 0, "tile_n and cpg must nest");
static_assert(DG_C % DD_V == 0, "C must be a multiple of the channel vector");
static_assert(DD_TQW % DD_TPW == 0 && DD_TQH % DD_TPH == 0, "thread pixels must tile the block");
static_assert(DD_CT * DD_TWT * DD_THT == DD_THREADS, "thread grid");
static_assert(DD_NY % DD_LY == 0 && DG_K % DD_LY == 0, "dY vector width");
static_assert(DD_V % DD_LX == 0 && DG_C % DD_LX == 0, "dX vector width");
static_assert(DD_LY * DD_EB <= 16 && DD_LX * DD_EB <= 16, "16-byte accesses at most");
static_assert(DD_WSP % 4 == 0, "weight tap pitch keeps 16-byte alignment");
static_assert(DD_PREFETCH == 0 || DD_PREFETCH == 1, "prefetch depth");

// #block moves
// ------------------------------------------------------------------ conversions
DD_DEVICE float dd_bits_f(dd_u32 u) {
    union { dd_u32 u; float f; } c;
    c.u = u;
    return c.f;
}
DD_DEVICE dd_u32 dd_f_bits(float f) {
    union { float f; dd_u32 u; } c;
    c.f = f;
    return c.u;
}

DD_DEVICE float dd_to_f(dd_t v) {
#if DG_DTYPE == 0
    return v;
#elif DG_DTYPE == 1
#if defined(DG_VENDOR_AMD)
    union { dd_u16 u; _Float16 h; } c;
    c.u = v;
    return (float)c.h;
#else
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v));
    return f;
#endif
#else
    return dd_bits_f((dd_u32)v << 16);
#endif
}

// fp32 -> storage type, round to nearest even (NaN stays NaN).
DD_DEVICE dd_t dd_from_f(float f) {
#if DG_DTYPE == 0
    return f;
#elif defined(DG_VENDOR_AMD)
#if DG_DTYPE == 1
    union { _Float16 h; dd_u16 u; } c;
    c.h = (_Float16)f;
    return c.u;
#else
    dd_u32 u = dd_f_bits(f);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) return (dd_u16)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (dd_u16)(u >> 16);
#endif
#else
    dd_u16 h;
#if DG_DTYPE == 1
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
#else
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
#endif
    return h;
#endif
}

// ------------------------------------------------------------------ raw vector moves
struct __attribute__((aligned(8))) dd_b8 { dd_u32 v[2]; };
struct __attribute__((aligned(16))) dd_b16 { dd_u32 v[4]; };
template <int BYTES> struct dd_raw;
template <> struct dd_raw<2> { typedef dd_u16 type; };
template <> struct dd_raw<4> { typedef dd_u32 type; };
template <> struct dd_raw<8> { typedef dd_b8 type; };
template <> struct dd_raw<16> { typedef dd_b16 type; };

// Read-only global loads (NVIDIA: the non-coherent texture path, ld.global.nc).
#if defined(DG_VENDOR_AMD)
template <class R>
DD_DEVICE R dd_ldg(const R* p) { return *p; }
#else
template <class R> DD_DEVICE R dd_ldg(const R* p);
template <> DD_DEVICE dd_u16 dd_ldg<dd_u16>(const dd_u16* p) {
    dd_u16 v;
    asm("ld.global.nc.u16 %0, [%1];" : "=h"(v) : "l"(p));
    return v;
}
template <> DD_DEVICE dd_u32 dd_ldg<dd_u32>(const dd_u32* p) {
    dd_u32 v;
    asm("ld.global.nc.u32 %0, [%1];" : "=r"(v) : "l"(p));
    return v;
}
template <> DD_DEVICE dd_b8 dd_ldg<dd_b8>(const dd_b8* p) {
    dd_b8 v;
    asm("ld.global.nc.v2.u32 {%0, %1}, [%2];" : "=r"(v.v[0]), "=r"(v.v[1]) : "l"(p));
    return v;
}
template <> DD_DEVICE dd_b16 dd_ldg<dd_b16>(const dd_b16* p) {
    dd_b16 v;
    asm("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(v.v[0]), "=r"(v.v[1]), "=r"(v.v[2]), "=r"(v.v[3]) : "l"(p));
    return v;
}
#endif

// L storage elements at p (aligned to L elements) into e[0..L).
template <int L, bool GLOBAL>
DD_DEVICE void dd_load(dd_t* e, const dd_t* p) {
    typedef typename dd_raw<L * DD_EB>::type R;
    union { R r; dd_t e[L]; } u;
    u.r = GLOBAL ? dd_ldg<R>(reinterpret_cast<const R*>(p)) : *reinterpret_cast<const R*>(p);
#pragma unroll
    for (int i = 0; i < L; ++i) e[i] = u.e[i];
}

template <int L>
DD_DEVICE void dd_store(dd_t* p, const dd_t* e) {
    typedef typename dd_raw<L * DD_EB>::type R;
    union { R r; dd_t e[L]; } u;
#pragma unroll
    for (int i = 0; i < L; ++i) u.e[i] = e[i];
    *reinterpret_cast<R*>(p) = u.r;
}

template <int L>
DD_DEVICE void dd_zero(dd_t* e) {
#pragma unroll
    for (int i = 0; i < L; ++i) e[i] = (dd_t)0;
}
// #end block moves
// #section lean|stage32
// L storage elements at p (aligned to L elements, read-only path) into e[0..L), or zeros
// where !ok: the whole vector register is zeroed and the load predicated before the
// elements are taken apart, so an out-of-range column costs one move per vector instead
// of a merge per element.
template <int L>
DD_DEVICE void dd_load_or_zero(dd_t* e, const dd_t* p, bool ok) {
    typedef typename dd_raw<L * DD_EB>::type R;
    union { R r; dd_t e[L]; } u;
    u.r = R{};
    if (ok) u.r = dd_ldg<R>(reinterpret_cast<const R*>(p));
#pragma unroll
    for (int i = 0; i < L; ++i) e[i] = u.e[i];
}
// #end lean|stage32

// N fp32 values from 16-byte aligned shared memory, in the widest aligned vectors.
struct __attribute__((aligned(16))) dd_f4 { float v[4]; };
struct __attribute__((aligned(8))) dd_f2 { float v[2]; };
template <int N>
DD_DEVICE void dd_lds_f(float* out, const float* p) {
    if (N % 4 == 0) {
#pragma unroll
        for (int i = 0; i < N / 4; ++i) {
            dd_f4 t = reinterpret_cast<const dd_f4*>(p)[i];
#pragma unroll
            for (int j = 0; j < 4; ++j) out[4 * i + j] = t.v[j];
        }
    } else if (N % 2 == 0) {
#pragma unroll
        for (int i = 0; i < N / 2; ++i) {
            dd_f2 t = reinterpret_cast<const dd_f2*>(p)[i];
            out[2 * i] = t.v[0];
            out[2 * i + 1] = t.v[1];
        }
    } else {
#pragma unroll
        for (int i = 0; i < N; ++i) out[i] = p[i];
    }
}
// #section stage32

// N fp32 values to 16-byte aligned shared memory, in the widest aligned vectors.
template <int N>
DD_DEVICE void dd_sts_f(float* p, const float* in) {
    if (N % 4 == 0) {
#pragma unroll
        for (int i = 0; i < N / 4; ++i) {
            dd_f4 t;
#pragma unroll
            for (int j = 0; j < 4; ++j) t.v[j] = in[4 * i + j];
            reinterpret_cast<dd_f4*>(p)[i] = t;
        }
    } else if (N % 2 == 0) {
#pragma unroll
        for (int i = 0; i < N / 2; ++i) {
            dd_f2 t;
            t.v[0] = in[2 * i];
            t.v[1] = in[2 * i + 1];
            reinterpret_cast<dd_f2*>(p)[i] = t;
        }
    } else {
#pragma unroll
        for (int i = 0; i < N; ++i) p[i] = in[i];
    }
}
// #end stage32

// Raw dY window registers: 16-bit values two to a 32-bit word where the thread's dY
// channels come in pairs (halves the registers of the prefetched row), else one a register.
#if DG_DTYPE != 0 && DD_NY % 2 == 0
#define DD_RAWN (DD_NY / 2)
typedef dd_u32 dd_rawt;
DD_DEVICE void dd_pack(dd_rawt* out, const dd_t* e) {
#pragma unroll
    for (int i = 0; i < DD_NY / 2; ++i) out[i] = (dd_u32)e[2 * i] | ((dd_u32)e[2 * i + 1] << 16);
}
DD_DEVICE void dd_unpack(float* f, const dd_rawt* raw) {
#pragma unroll
    for (int i = 0; i < DD_NY / 2; ++i) {
        f[2 * i] = dd_to_f((dd_t)(raw[i] & 0xffffu));
        f[2 * i + 1] = dd_to_f((dd_t)(raw[i] >> 16));
    }
}
#else
#define DD_RAWN DD_NY
typedef dd_t dd_rawt;
DD_DEVICE void dd_pack(dd_rawt* out, const dd_t* e) {
#pragma unroll
    for (int i = 0; i < DD_NY; ++i) out[i] = e[i];
}
DD_DEVICE void dd_unpack(float* f, const dd_rawt* raw) {
#pragma unroll
    for (int i = 0; i < DD_NY; ++i) f[i] = dd_to_f(raw[i]);
}
#endif

// ------------------------------------------------------------------ W-axis phase tables
// Compile-time functions of the phase rw (constant-folded once the tap loops unroll).
DD_DEVICE constexpr bool dd_xok(int rw, int x) { return (rw + DG_PW - x * DG_DW) % DG_SW == 0; }
DD_DEVICE constexpr int dd_xoff(int rw, int x) { return (rw + DG_PW - x * DG_DW) / DG_SW; }
DD_DEVICE constexpr int dd_xmin(int rw) {
    int m = 0;
    bool any = false;
    for (int x = 0; x < DG_X; ++x)
        if (dd_xok(rw, x)) { m = (!any || dd_xoff(rw, x) < m) ? dd_xoff(rw, x) : m; any = true; }
    return m;
}
DD_DEVICE constexpr int dd_xmax(int rw) {
    int m = 0;
    bool any = false;
    for (int x = 0; x < DG_X; ++x)
        if (dd_xok(rw, x)) { m = (!any || dd_xoff(rw, x) > m) ? dd_xoff(rw, x) : m; any = true; }
    return m;
}
// Window column m (0 .. DD_TPW + span) is read by some (pixel, tap) pair of phase rw.
DD_DEVICE constexpr bool dd_col_used(int rw, int m) {
    for (int x = 0; x < DG_X; ++x)
        if (dd_xok(rw, x)) {
            int pw = m - (dd_xoff(rw, x) - dd_xmin(rw));
            if (pw >= 0 && pw < DD_TPW) return true;
        }
    return false;
}

// Row r of a thread's dY window: the filter row y that joins it to each thread row j
// (y*dH = rh + pH - sH*(miny + r - j), the same for every thread of the block; -1 where
// none), and, when some j has one and the row lies inside dY, its raw window columns.
// Returns whether the row contributes (false: the row adds nothing; raw is untouched).
template <int RW, int WIN>
DD_DEVICE bool dd_row(dd_rawt (&raw)[WIN][DD_RAWN], const dd_t* __restrict__ dy, const dd_t* ys, dd_idx dy_img,
                      int rh, int miny, int r, int qh_t, int qw_t, int dyc, int dyb, bool cok, int trow, int tcol,
                      int (&yj)[DD_TPH]) {
    constexpr int MINX = dd_xmin(RW);
    bool use = false;
#pragma unroll
    for (int j = 0; j < DD_TPH; ++j) {
        const int t = rh + DG_PH - DG_SH * (miny + r - j);
        const int y = t / DG_DH;
        yj[j] = (t >= 0 && t % DG_DH == 0 && y < DG_Y) ? y : -1;
        use = use || yj[j] >= 0;
    }
    const int ho = qh_t + miny + r;
    if (!use || !cok || !((unsigned)ho < (unsigned)DG_HO)) return false;
#if DD_STAGE
    (void)dy; (void)dy_img; (void)qw_t;
    constexpr int SCW = DD_TQW + dd_xmax(RW) - MINX;
    const dd_t* row = ys + (trow * DD_TPH + r) * (SCW * DD_TNY) + (dyc - dyb);
#pragma unroll
    for (int m = 0; m < WIN; ++m) {
        if (!dd_col_used(RW, m)) continue;
        const dd_t* src = row + (tcol * DD_TPW + m) * DD_TNY;
        dd_t e[DD_NY];
#pragma unroll
        for (int v = 0; v < DD_NY / DD_LYS; ++v) dd_load<DD_LYS, false>(e + v * DD_LYS, src + v * DD_LYS);
        dd_pack(raw[m], e);
    }
#else
    (void)ys; (void)dyb; (void)trow; (void)tcol;
    const dd_t* row = dy + dy_img + (dd_idx)ho * DG_WO * DG_K + dyc;
#pragma unroll
    for (int m = 0; m < WIN; ++m) {
        if (!dd_col_used(RW, m)) continue;
        const int wo = qw_t + MINX + m;
        dd_t e[DD_NY];
// #section !lean
        if ((unsigned)wo < (unsigned)DG_WO) {
            const dd_t* src = row + (dd_idx)wo * DG_K;
#pragma unroll
            for (int v = 0; v < DD_NY / DD_LY; ++v) dd_load<DD_LY, true>(e + v * DD_LY, src + v * DD_LY);
        } else {
            dd_zero<DD_NY>(e);
        }
// #end !lean
// #section lean
        const bool ok = (unsigned)wo < (unsigned)DG_WO;
        const dd_t* src = row + (dd_idx)(qw_t + MINX) * DG_K + m * DG_K;
#pragma unroll
        for (int v = 0; v < DD_NY / DD_LY; ++v) dd_load_or_zero<DD_LY>(e + v * DD_LY, src + v * DD_LY, ok);
// #end lean
        dd_pack(raw[m], e);
    }
#endif
    return true;
}

// acc[j][p][i] += sum over the valid x of phase RW and k < kpg of the dY window row (fp32)
// times the filter taps of row yj[j] (skipped where yj[j] < 0), from shared memory.
template <int RW, int WIN>
DD_DEVICE void dd_apply(float (&acc)[DD_TPH][DD_TPW][DD_V], const float (&win)[WIN][DD_NY], const float* wchunk,
                        const int (&yj)[DD_TPH]) {
    constexpr int MINX = dd_xmin(RW);
#pragma unroll
    for (int j = 0; j < DD_TPH; ++j) {
        if (yj[j] < 0) continue;
        const float* wrow = wchunk + yj[j] * DG_X * DD_WSP;
#pragma unroll
        for (int x = 0; x < DG_X; ++x) {
            if (!dd_xok(RW, x)) continue;
            float wv[DD_V * DG_KPG];
            dd_lds_f<DD_V * DG_KPG>(wv, wrow + x * DD_WSP);
#pragma unroll
            for (int p = 0; p < DD_TPW; ++p) {
                const int m = p + dd_xoff(RW, x) - MINX;
#pragma unroll
                for (int i = 0; i < DD_V; ++i) {
                    // group-local dY channel base of output channel i of the chunk
                    const int gi = (DD_V >= DG_CPG) ? (i / DG_CPG) * DG_KPG : 0;
#pragma unroll
                    for (int k = 0; k < DG_KPG; ++k)
                        acc[j][p][i] += win[m][gi + k] * wv[i * DG_KPG + k];
                }
            }
        }
    }
}

// ------------------------------------------------------------------ per-phase body
// One block's work for W phase RW (compile-time) and H phase rh (runtime, block-uniform).
template <int RW>
DD_DEVICE void dd_phase(const dd_t* __restrict__ dy, const float* ws, dd_t* ys, dd_t* __restrict__ dx,
                        int n, int rh, int qh_blk, int qw_blk, int cb, int tid) {
    constexpr int MINX = dd_xmin(RW);
    constexpr int SPANX = dd_xmax(RW) - MINX;
    constexpr int WIN = DD_TPW + SPANX;   // dY columns one thread row touches
#if DD_STAGE
    constexpr int SCW = DD_TQW + SPANX;   // staged columns of this phase (<= DD_SC)
    static_assert(SCW <= DD_SC, "staged window");
#endif

    // H phase: the valid y are those with (rh + pH - y*dH) % sH == 0; their dY row
    // offsets offy = (rh + pH - y*dH)/sH decrease with y. miny/spany span them.
    int miny = 0, maxy = 0;
    bool anyy = false;
    for (int y = 0; y < DG_Y; ++y) {
        const int t = rh + DG_PH - y * DG_DH;
        if (t % DG_SH == 0) {
            if (!anyy) maxy = t / DG_SH;
            miny = t / DG_SH;
            anyy = true;
        }
    }
    const int nrows = anyy ? DD_TPH + (maxy - miny) : 0;

    const int chunk = tid % DD_CT;
    const int tcol = (tid / DD_CT) % DD_TWT;
    const int trow = tid / (DD_CT * DD_TWT);
    const int c0 = cb * DD_TN + chunk * DD_V;                 // first dX channel of the chunk
    const bool cok = c0 < DG_C;
    const int dyb = (cb * DD_TN / DG_CPG) * DG_KPG;            // first dY channel of the block
    const int dyc = (c0 / DG_CPG) * DG_KPG;                    // first dY channel of the chunk
    (void)dyb;
    const int qh_t = qh_blk + trow * DD_TPH;
    const int qw_t = qw_blk + tcol * DD_TPW;
    const dd_idx dy_img = (dd_idx)n * DG_HO * DG_WO * DG_K;

#if DD_STAGE
// #section stage32
    // Section stage32 (lds_k_outer 2): the window is staged already converted to fp32, one
    // conversion per dY element per block instead of one per overlapping thread window, and
    // the row loop reads it with 128-bit shared loads and no bounds test.
    // The block's dY window in fp32: rows qh_blk + miny + [0, TQH + spany), columns
    // qw_blk + MINX + [0, SCW), its DD_TNY channels, [row][column][channel]; zeros outside
    // dY. Units of DD_LYG channels (16-byte loads where K allows), row-major; a thread's
    // unit index advances by DD_THREADS, so its channel offset is fixed where DD_THREADS is
    // a multiple of the units per pixel and its (row, column) steps by constants.
    {
        static_assert(DD_PREFETCH == 0, "stage32 keeps no raw rows in registers");
        static_assert(DD_TNY % DD_LYG == 0 && DG_K % DD_LYG == 0, "staging vector width");
        const int srows = anyy ? DD_TQH + (maxy - miny) : 0;
        constexpr int VPP = DD_TNY / DD_LYG;                   // units per staged pixel
        constexpr int PSTEP = DD_THREADS / VPP;                // pixels a unit index step moves
        float* ysf = reinterpret_cast<float*>(ys);
        const dd_t* src0 = dy + dy_img + dyb;
        const int ho0 = qh_blk + miny;
        const int wo0 = qw_blk + MINX;
        if constexpr (DD_THREADS % VPP == 0) {
            const int v = tid % VPP;
            const bool chok = dyb + v * DD_LYG < DG_K;
            const int pix = tid / VPP;
            int lc = pix % SCW;
            int lr = pix / SCW;
            const int npix = srows * SCW;
            const int trips = pix < npix ? (npix - 1 - pix) / PSTEP + 1 : 0;
            const dd_t* src = src0 + v * DD_LYG;
            float* dst = ysf + pix * DD_TNY + v * DD_LYG;
#pragma unroll 2
            for (int it = 0; it < trips; ++it) {
                const int ho = ho0 + lr;
                const int wo = wo0 + lc;
                const bool ok = chok && (unsigned)ho < (unsigned)DG_HO && (unsigned)wo < (unsigned)DG_WO;
                dd_t e[DD_LYG];
                dd_load_or_zero<DD_LYG>(e, src + ((dd_idx)ho * DG_WO + wo) * DG_K, ok);
                float f[DD_LYG];
#pragma unroll
                for (int i = 0; i < DD_LYG; ++i) f[i] = dd_to_f(e[i]);
                dd_sts_f<DD_LYG>(dst, f);
                dst += PSTEP * DD_TNY;
                lc += PSTEP % SCW;
                lr += PSTEP / SCW;
                if (lc >= SCW) { lc -= SCW; ++lr; }
            }
        } else {
            const int units = srows * SCW * VPP;
            for (int u = tid; u < units; u += DD_THREADS) {
                const int v = u % VPP;
                const int pix = u / VPP;
                const int ho = ho0 + pix / SCW;
                const int wo = wo0 + pix % SCW;
                const bool ok = dyb + v * DD_LYG < DG_K && (unsigned)ho < (unsigned)DG_HO &&
                                (unsigned)wo < (unsigned)DG_WO;
                dd_t e[DD_LYG];
                dd_load_or_zero<DD_LYG>(e, src0 + ((dd_idx)ho * DG_WO + wo) * DG_K + v * DD_LYG, ok);
                float f[DD_LYG];
#pragma unroll
                for (int i = 0; i < DD_LYG; ++i) f[i] = dd_to_f(e[i]);
                dd_sts_f<DD_LYG>(ysf + pix * DD_TNY + v * DD_LYG, f);
            }
        }
    }
// #end stage32
// #section !stage32
    // The block's dY window: rows qh_blk + miny + [0, TQH + spany), columns
    // qw_blk + MINX + [0, SCW), its DD_TNY channels; zeros outside dY.
    {
        const int srows = anyy ? DD_TQH + (maxy - miny) : 0;
        constexpr int VPP = DD_TNY / DD_LY;                    // vectors per staged pixel
        const int units = srows * SCW * VPP;
        for (int u = tid; u < units; u += DD_THREADS) {
            const int v = u % VPP;
            const int pix = u / VPP;
            const int lc = pix % SCW;
            const int lr = pix / SCW;
            const int ho = qh_blk + miny + lr;
            const int wo = qw_blk + MINX + lc;
            const int ch = dyb + v * DD_LY;
            dd_t e[DD_LY];
            if ((unsigned)ho < (unsigned)DG_HO && (unsigned)wo < (unsigned)DG_WO && ch < DG_K)
                dd_load<DD_LY, true>(e, dy + dy_img + ((dd_idx)ho * DG_WO + wo) * DG_K + ch);
            else
                dd_zero<DD_LY>(e);
            dd_store<DD_LY>(ys + (lr * SCW + lc) * DD_TNY + v * DD_LY, e);
        }
    }
// #end !stage32
    DD_SYNC();
#endif

    // With DD_PREFETCH the rows are software-pipelined: the raw dY window of row r+1 is
    // loaded while row r is computed (with DD_STAGE 0 the first row's loads are in flight
    // across the barrier that publishes the filter taps).
#if DD_PREFETCH
    dd_rawt raw[WIN][DD_RAWN];
    int yj[DD_TPH];
    bool live = nrows > 0 && dd_row<RW, WIN>(raw, dy, ys, dy_img, rh, miny, 0, qh_t, qw_t, dyc, dyb, cok,
                                             trow, tcol, yj);
#endif
#if !DD_STAGE
    DD_SYNC();
#endif

#if DD_PREFETCH
    float acc[DD_TPH][DD_TPW][DD_V];
#pragma unroll
    for (int j = 0; j < DD_TPH; ++j)
#pragma unroll
        for (int p = 0; p < DD_TPW; ++p)
#pragma unroll
            for (int i = 0; i < DD_V; ++i) acc[j][p][i] = 0.0f;

    const float* wchunk = ws + chunk * DD_V * DG_KPG;
    for (int r = 0; r < nrows; ++r) {
        float win[WIN][DD_NY];
        int ycur[DD_TPH];
#if DD_PREFETCH
        const bool cur = live;
#pragma unroll
        for (int j = 0; j < DD_TPH; ++j) ycur[j] = yj[j];
#endif
        if (cur) {
#pragma unroll
            for (int m = 0; m < WIN; ++m)
                if (dd_col_used(RW, m)) dd_unpack(win[m], raw[m]);
        }
#if DD_PREFETCH
        live = r + 1 < nrows && dd_row<RW, WIN>(raw, dy, ys, dy_img, rh, miny, r + 1, qh_t, qw_t, dyc, dyb, cok,
                                                trow, tcol, yj);
#endif
        if (!cur) continue;
        dd_apply<RW, WIN>(acc, win, wchunk, ycur);
    }

#else
    float acc[DD_TPH][DD_TPW][DD_V];
#pragma unroll
    for (int j = 0; j < DD_TPH; ++j)
#pragma unroll
        for (int p = 0; p < DD_TPW; ++p)
#pragma unroll
            for (int i = 0; i < DD_V; ++i) acc[j][p][i] = 0.0f;

    const float* wchunk = ws + chunk * DD_V * DG_KPG;
    for (int r = 0; r < nrows; ++r) {
        // The filter row y that joins dY row (qh_t + miny + r) to thread row j:
        // y*dH = rh + pH - sH*(miny + r - j); the same for every thread of the block.
        int yj[DD_TPH];
        bool use = false;
#pragma unroll
        for (int j = 0; j < DD_TPH; ++j) {
            const int t = rh + DG_PH - DG_SH * (miny + r - j);
            const int y = t / DG_DH;
            yj[j] = (t >= 0 && t % DG_DH == 0 && y < DG_Y) ? y : -1;
            use = use || yj[j] >= 0;
        }
        if (!use) continue;
// #section stage32
        {
            // the thread's window of this row, fp32, 128-bit shared loads, no bounds test
            const float* frow = reinterpret_cast<const float*>(ys) + (trow * DD_TPH + r) * (SCW * DD_TNY) +
                                tcol * DD_TPW * DD_TNY + (dyc - dyb);
            float fwin[WIN][DD_NY];
#pragma unroll
            for (int m = 0; m < WIN; ++m)
                if (dd_col_used(RW, m)) dd_lds_f<DD_NY>(fwin[m], frow + m * DD_TNY);
            dd_apply<RW, WIN>(acc, fwin, wchunk, yj);
            continue;
        }
// #end stage32
        const int ho = qh_t + miny + r;
#if !DD_STAGE
        if (!((unsigned)ho < (unsigned)DG_HO) || !cok) continue;   // contributes zeros
        const dd_t* dyrow = dy + dy_img + (dd_idx)ho * DG_WO * DG_K + dyc;
#else
        const dd_t* dyrow = ys + (trow * DD_TPH + r) * (SCW * DD_TNY) + (dyc - dyb);
#endif
        float win[WIN][DD_NY];
#pragma unroll
        for (int m = 0; m < WIN; ++m) {
            if (!dd_col_used(RW, m)) continue;
            dd_t e[DD_NY];
#if DD_STAGE
            const dd_t* src = dyrow + (tcol * DD_TPW + m) * DD_TNY;
#pragma unroll
            for (int v = 0; v < DD_NY / DD_LYS; ++v) dd_load<DD_LYS, false>(e + v * DD_LYS, src + v * DD_LYS);
#else
            const int wo = qw_t + MINX + m;
// #section !lean
            if ((unsigned)wo < (unsigned)DG_WO) {
                const dd_t* src = dyrow + (dd_idx)wo * DG_K;
#pragma unroll
                for (int v = 0; v < DD_NY / DD_LY; ++v) dd_load<DD_LY, true>(e + v * DD_LY, src + v * DD_LY);
            } else {
                dd_zero<DD_NY>(e);
            }
// #end !lean
// #section lean
            // column m as a compile-time offset from the window's first column (which may
            // lie left of the row: only in-range columns are read)
            const bool ok = (unsigned)wo < (unsigned)DG_WO;
            const dd_t* src = dyrow + (dd_idx)(qw_t + MINX) * DG_K + m * DG_K;
#pragma unroll
            for (int v = 0; v < DD_NY / DD_LY; ++v) dd_load_or_zero<DD_LY>(e + v * DD_LY, src + v * DD_LY, ok);
// #end lean
#endif
#pragma unroll
            for (int v = 0; v < DD_NY; ++v) win[m][v] = dd_to_f(e[v]);
        }
        dd_apply<RW, WIN>(acc, win, wchunk, yj);
    }

#endif

    // Write every owned dX element once (zeros where no tap contributed).
    if (!cok) return;
#pragma unroll
    for (int j = 0; j < DD_TPH; ++j) {
        const int hi = rh + DG_SH * (qh_t + j);
        if (hi >= DG_HI) continue;
#pragma unroll
        for (int p = 0; p < DD_TPW; ++p) {
            const int wi = RW + DG_SW * (qw_t + p);
            if (wi >= DG_WI) continue;
            dd_t e[DD_V];
#pragma unroll
            for (int i = 0; i < DD_V; ++i) e[i] = dd_from_f(acc[j][p][i]);
            dd_t* dst = dx + (((dd_idx)n * DG_HI + hi) * DG_WI + wi) * DG_C + c0;
#pragma unroll
            for (int v = 0; v < DD_V / DD_LX; ++v) dd_store<DD_LX>(dst + v * DD_LX, e + v * DD_LX);
        }
    }
}

template <int RW>
DD_DEVICE void dd_dispatch(int rw, const dd_t* __restrict__ dy, const float* ws, dd_t* ys, dd_t* __restrict__ dx,
                           int n, int rh, int qh_blk, int qw_blk, int cb, int tid) {
    if (rw == RW) {
        dd_phase<RW>(dy, ws, ys, dx, n, rh, qh_blk, qw_blk, cb, tid);
    } else {
        if constexpr (RW + 1 < DD_NPH_W) dd_dispatch<RW + 1>(rw, dy, ws, ys, dx, n, rh, qh_blk, qw_blk, cb, tid);
    }
}

// #block unit
// A block's work unit from its index b: channel block cb fastest, then phase ph = rh *
// DD_NPH_W + rw, tile tw along W, tile th along H, image n.
struct dd_unit { int cb, ph, tw, th, n; };
DD_DEVICE dd_unit dd_unit_of(long long b) {
    dd_unit u;
    u.cb = (int)(b % DD_CB);
    b /= DD_CB;
    u.ph = (int)(b % (DD_NPH_H * DD_NPH_W));
    b /= DD_NPH_H * DD_NPH_W;
    u.tw = (int)(b % DD_TILES_W);
    b /= DD_TILES_W;
    u.th = (int)(b % DD_TILES_H);
    u.n = (int)(b / DD_TILES_H);
    return u;
}
// #end block unit

// ------------------------------------------------------------------ the kernel
DD_GLOBAL void DG_KERNEL_NAME(const dd_t* __restrict__ dy, const dd_t* __restrict__ w, dd_t* __restrict__ dx) {
    extern DD_SHARED __attribute__((aligned(16))) unsigned char dd_smem[];
    DD_GRID_DEPENDENCY();
    float* ws = reinterpret_cast<float*>(dd_smem);                      // [Y*X][DD_WSP] fp32
    dd_t* ys = reinterpret_cast<dd_t*>(dd_smem + DD_WS_BYTES);          // staged dY (DD_STAGE)
    const int tid = DD_TID();
    const dd_unit unit = dd_unit_of(DD_BID());
    const int cb = unit.cb, ph = unit.ph, tw = unit.tw, th = unit.th, n = unit.n;
    const int rh = ph / DD_NPH_W;
    const int rw = ph % DD_NPH_W;

    // Filter taps of the block's channels -> shared memory, fp32, [tap][channel][k]. The
    // block's groups own consecutive W rows; read them in memory order (coalesced).
// #section lean
    // Lean form, where the threads are a multiple of the TN*kpg staged floats of one tap: a
    // thread owns one (channel, k) lane of every DD_THREADS/(TN*kpg)-th tap, so its source
    // and destination advance by compile-time strides (no division per element); the
    // reads are strided by Y*X*cpg elements (the filter is small and L2-resident).
    if constexpr (DD_THREADS % (DD_TN * DG_KPG) == 0) {
        constexpr int TAPS = DG_Y * DG_X;
        constexpr int L = DD_TN * DG_KPG;                          // staged floats per tap
        constexpr int TG = DD_THREADS >= L ? DD_THREADS / L : 1;   // taps staged at once
        const int l = tid % L;
        const int t0 = tid / L;
        const int cl = l / DG_KPG;                                 // block-local dX channel
        const int k = l % DG_KPG;
        const int gl = DD_TN >= DG_CPG ? cl / DG_CPG : 0;
        const int c = DD_TN >= DG_CPG ? cl % DG_CPG : (cb * DD_TN) % DG_CPG + cl;
        const int g = cb * DD_TN / DG_CPG + gl;
        // Lanes of channels past C (the last channel block) stage group G-1's taps: no
        // thread that writes dX reads them (their chunks have cok false), and every load
        // stays in the filter, so the unrolled loads need no predicate.
        const dd_t* src = w + ((dd_idx)(g < DG_G ? g : DG_G - 1) * DG_KPG + k) * TAPS * DG_CPG + c;
        float* dst = ws + l;
#pragma unroll 16
        for (int i = 0; i < TAPS / TG; ++i) dst[(t0 + i * TG) * DD_WSP] = dd_to_f(src[(t0 + i * TG) * DG_CPG]);
        if constexpr (TAPS % TG != 0) {
            const int tap = t0 + (TAPS / TG) * TG;
            if (tap < TAPS) dst[tap * DD_WSP] = dd_to_f(src[tap * DG_CPG]);
        }
    } else
// #end lean
    {
        constexpr int TAPS = DG_Y * DG_X;
        constexpr int NGB = DD_TN >= DG_CPG ? DD_TN / DG_CPG : 1;   // groups in the block
        constexpr int CPB = DD_TN >= DG_CPG ? DG_CPG : DD_TN;       // channels per group here
        const int g0 = cb * DD_TN / DG_CPG;
        const int clo = DD_TN >= DG_CPG ? 0 : (cb * DD_TN) % DG_CPG;
        constexpr int UNITS = NGB * DG_KPG * TAPS * CPB;
        for (int u = tid; u < UNITS; u += DD_THREADS) {
            const int c = u % CPB;
            int t = u / CPB;
            const int tap = t % TAPS;
            t /= TAPS;
            const int k = t % DG_KPG;
            const int gl = t / DG_KPG;
            const int g = g0 + gl;
            const int cl = gl * DG_CPG + c;                   // block-local dX channel
            float v = 0.0f;
            if (g < DG_G)
                v = dd_to_f(w[((dd_idx)(g * DG_KPG + k) * TAPS + tap) * DG_CPG + clo + c]);
            ws[tap * DD_WSP + cl * DG_KPG + k] = v;
        }
    }
    dd_dispatch<0>(rw, dy, ws, ys, dx, n, rh, th * DD_TQH, tw * DD_TQW, cb, tid);
}
