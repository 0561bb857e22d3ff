// Direct backward-data reference (NHWC), one thread per dX element, fp32 accumulation.
// The role of MIOpen's ConvDirectNaiveConvBwd in MIOpenDriver's GPU verification:
//   dX[n,hi,wi,g*cpg+c] = sum_{k<kpg,y,x} dY[n,ho,wo,g*kpg+k] * W[g*kpg+k,y,x,c]
//   with ho = (hi + pH - y*dH) / sH counted only when exact and in [0, Ho) (wo likewise).
// Independent of the tilde decomposition on purpose. Output: fp32 dX, NHWC.

#if defined(DG_VENDOR_AMD)
#ifndef __global__
#define __global__ __attribute__((global))
#endif
#define DG_GID() ((long long)__builtin_amdgcn_workgroup_id_x() * DG_THREADS + (long long)__builtin_amdgcn_workitem_id_x())
typedef _Float16 dg_half;
__attribute__((device)) inline float dg_h2f(unsigned short u) {
    union { unsigned short u; _Float16 h; } c;
    c.u = u;
    return (float)c.h;
}
#else
#define DG_GID() ((long long)blockIdx.x * DG_THREADS + threadIdx.x)
__device__ __forceinline__ float dg_h2f(unsigned short u) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(u));
    return f;
}
#endif

#if DG_DTYPE == 0
typedef float dg_t;
#define DG_LOAD(v) (v)
#else
typedef unsigned short dg_t;
#if DG_DTYPE == 1
#define DG_LOAD(v) dg_h2f(v)
#else
#define DG_LOAD(v) __uint_as_float_dg((unsigned int)(v) << 16)
#endif
#endif

#if DG_DTYPE == 2
#if defined(DG_VENDOR_AMD)
__attribute__((device)) inline
#else
__device__ __forceinline__
#endif
float __uint_as_float_dg(unsigned int u) {
    union { unsigned int u; float f; } c;
    c.u = u;
    return c.f;
}
#endif

extern "C" __global__ void DG_KERNEL_NAME(const dg_t* __restrict__ dy, const dg_t* __restrict__ w, float* __restrict__ dx) {
    const long long idx = DG_GID();
    if (idx >= (long long)DG_N * DG_HI * DG_WI * DG_C) return;
    const int ch = (int)(idx % DG_C);
    const long long pix = idx / DG_C;
    const int wi = (int)(pix % DG_WI);
    const int hi = (int)((pix / DG_WI) % DG_HI);
    const int n = (int)(pix / ((long long)DG_WI * DG_HI));
    const int g = ch / DG_CPG;
    const int c = ch - g * DG_CPG;
    float acc = 0.0f;
    for (int y = 0; y < DG_Y; ++y) {
        int th = hi + DG_PH - y * DG_DH;
        if (th < 0 || th % DG_SH) continue;
        int ho = th / DG_SH;
        if (ho >= DG_HO) continue;
        for (int x = 0; x < DG_X; ++x) {
            int tw = wi + DG_PW - x * DG_DW;
            if (tw < 0 || tw % DG_SW) continue;
            int wo = tw / DG_SW;
            if (wo >= DG_WO) continue;
            const dg_t* dyp = dy + (((long long)n * DG_HO + ho) * DG_WO + wo) * DG_K + g * DG_KPG;
            const dg_t* wp = w + ((long long)(g * DG_KPG) * DG_Y * DG_X + y * DG_X + x) * DG_CPG + c;
            for (int k = 0; k < DG_KPG; ++k)
                acc += DG_LOAD(dyp[k]) * DG_LOAD(wp[(long long)k * DG_Y * DG_X * DG_CPG]);
        }
    }
    dx[idx] = acc;
}
