// Direct backward-data convolution on tensor cores: the `mma` body of the direct schedule,
// for depthwise layers (cpg = kpg = 1), NHWC, 16-bit storage, NVIDIA mma.sync (sm_80+).
//
//   dX[n,hi,wi,c] = sum_{y,x} dY[n,ho,wo,c] * W[c,y,x]
//   ho = (hi + pH - y*dH)/sH, counted only when exact and 0 <= ho < Ho (wo likewise).
//
// Phases as in direct.cu: a block owns DD_TQH x DD_TQW phase-local pixels (qh, qw) of one
// phase (rh, rw) x DD_TN channels. In the phase the valid taps of each axis are fixed and
// tap t reads dY at the phase-local index plus off(t) = (r + pad - t*dil)/stride.
//
// The banded-matrix form. For one channel c and one valid filter row y, the 16 dX columns
// qw0+m (m < 16) of 8 dX rows qh0+j (j < 8) are
//
//   dX[m][j] += sum_k A[m][k] * B[k][j],   A[m][k] = W[c,y,x] where k = m + off(x) - min_off,
//                                          B[k][j] = dY[qh0 + j + offy(y)][qw0 + min_off + k],
//
// A is zero off its band (the valid x taps), so one m16n8k16 MMA per 16 columns of k does
// 16 x 8 x 16 multiply-adds of which 16 x 8 x (taps in the band) are useful. K spans
// 16 + spanx columns, DD_KS k-steps of 16. A warp builds A for (c, y) in registers, once,
// and reuses it over its DD_RB x DD_CBW units of 8 rows x 16 columns; B comes from
// shared memory by ldmatrix: the block's dY window is staged channel-major (one plane of
// DD_PR rows x DD_PP elements per channel), so the 8 rows of a B fragment are 8 dY rows of
// one channel and every ldmatrix row address is 16-byte aligned (plane columns start at
// min_off; pitch an odd number of 16-byte units, so the 8 rows hit 8 different bank groups).
//
// Block steps: (1) the block's filter taps to shared memory, [tap][channel]; (2) the dY
// window to the planes, 16-byte global loads of 8 channels, zeros outside dY and outside
// the columns and rows any tap reads; (3) each warp takes channels warp, warp + DD_WARPS,
// ..., sums every valid filter row's MMAs into fp32 accumulators and stores them, rounded
// to the storage type, into the channel's output plane; (4) the output planes go to dX in
// 16-byte stores of 8 channels. Every dX element of the block is written exactly once
// (zeros where no tap reaches); no atomics, no zero-fill pass, no workspace.
//
// Non-finite inputs: A's zeros multiply dY values outside a pixel's taps, so an Inf or NaN
// in dY makes NaN the dX values of its 16-column neighbourhood that the exact sum leaves
// finite or infinite (still non-finite: a loss-scaling check sees them).
//
// Every problem value arrives as a DG_* define and every schedule value as a DD_* define
// from miopen_solver/direct.py. No vendor header is included.

// #include-block direct.cu vendor

// #include-block direct.cu moves

// ------------------------------------------------------------------ rules (mirror direct.py)
#if defined(DG_VENDOR_AMD)
#error "the direct schedule's mma body is NVIDIA-only (mma.sync.m16n8k16)"
#endif
static_assert(DG_DTYPE == 1 || DG_DTYPE == 2, "16-bit storage (fp16, bf16)");
static_assert(DG_CPG == 1 && DG_KPG == 1, "depthwise");
static_assert(DG_C % 8 == 0 && DD_TN % 8 == 0, "channels in 16-byte groups of 8");
static_assert(DD_TQW == 16 * DD_CBW && DD_TQH == 8 * DD_RB, "units of 16 columns x 8 rows");
static_assert(DD_THREADS == 32 * DD_WARPS && DD_WARPS <= DD_TN, "warps");
static_assert(DD_KS >= 1 && DD_PW == DD_TQW + 16 * (DD_KS - 1), "plane columns the k-steps read");
static_assert(DD_PP >= DD_PW && DD_PP % 8 == 0 && (DD_PP / 8) % 2 == 1, "plane pitch: odd 16-byte units");
static_assert(DD_OP >= DD_TQW, "output plane pitch");

// Blocks per multiprocessor that shared memory allows (DD_MIN_BLOCKS, from direct.py): told to
// ptxas, whose default register budget otherwise spills a few bytes in the banded-A loop.
#undef DD_GLOBAL
#define DD_GLOBAL extern "C" __global__ __launch_bounds__(DD_THREADS, DD_MIN_BLOCKS)

// ------------------------------------------------------------------ matrix instructions
#define DG_DEVICE DD_DEVICE
typedef dd_u32 dg_u32;

DG_DEVICE dg_u32 dg_smem_addr(const void* p) {
    dg_u32 r;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p));
    return r;
}
DG_DEVICE void dg_ldmatrix_x4(dg_u32 (&r)[4], dg_u32 p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(p));
}
DG_DEVICE void dg_ldmatrix_x2(dg_u32 (&r)[2], dg_u32 p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];"
                 : "=r"(r[0]), "=r"(r[1]) : "r"(p));
}
DG_DEVICE void dg_mma(float (&c)[4], const dg_u32 (&a)[4], dg_u32 b0, dg_u32 b1) {
#if DG_DTYPE == 1
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
#else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
#endif
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// ------------------------------------------------------------------ phase taps
// Whether tap t is valid along an axis in phase r (its dY index is exact), and its offset.
DD_DEVICE bool dd_tap_ok(int r, int pad, int stride, int dil, int t) {
    return ((r + pad - t * dil) % stride + stride) % stride == 0;
}

// ------------------------------------------------------------------ the kernel
DD_GLOBAL void DG_KERNEL_NAME(const dd_t* __restrict__ dy, const dd_t* __restrict__ w, dd_t* __restrict__ dx) {
    extern DD_SHARED __attribute__((aligned(16))) unsigned char dg_smem[];
    dd_t* ws = reinterpret_cast<dd_t*>(dg_smem);                                     // [Y*X][TN]
    dd_t* planes = reinterpret_cast<dd_t*>(dg_smem + DD_WS_BYTES);                   // [TN][PR][PP]
    dd_t* outp = reinterpret_cast<dd_t*>(dg_smem + DD_WS_BYTES + DD_PLANE_BYTES);    // [TN][TQH][OP]
    const int tid = DD_TID();
    long long b = DD_BID();
    const int cb = (int)(b % DD_CB);
    b /= DD_CB;
    const int ph = (int)(b % (DD_NPH_H * DD_NPH_W));
    b /= DD_NPH_H * DD_NPH_W;
    const int tw = (int)(b % DD_TILES_W);
    b /= DD_TILES_W;
    const int th = (int)(b % DD_TILES_H);
    const int n = (int)(b / DD_TILES_H);
    const int rh = ph / DD_NPH_W;
    const int rw = ph % DD_NPH_W;
    const int c0 = cb * DD_TN;
    const int qh0 = th * DD_TQH;
    const int qw0 = tw * DD_TQW;

    // The phase's tap offsets: the smallest and largest of each axis (none: no tap reaches).
    int ymin = 0, ymax = -1, xmin = 0, xmax = -1;
    for (int t = 0; t < DG_Y; ++t) {
        if (!dd_tap_ok(rh, DG_PH, DG_SH, DG_DH, t)) continue;
        const int off = (rh + DG_PH - t * DG_DH) / DG_SH;
        if (ymax < ymin) ymin = ymax = off;
        else { ymin = off < ymin ? off : ymin; ymax = off > ymax ? off : ymax; }
    }
    for (int t = 0; t < DG_X; ++t) {
        if (!dd_tap_ok(rw, DG_PW, DG_SW, DG_DW, t)) continue;
        const int off = (rw + DG_PW - t * DG_DW) / DG_SW;
        if (xmax < xmin) xmin = xmax = off;
        else { xmin = off < xmin ? off : xmin; xmax = off > xmax ? off : xmax; }
    }
    const bool taps = ymax >= ymin && xmax >= xmin;

    // (1) The block's filter taps, [tap][channel] (zeros past C), read in memory order.
    constexpr int TAPS = DG_Y * DG_X;
    for (int i = tid; i < DD_TN * TAPS; i += DD_THREADS) {
        const int cl = i / TAPS;
        const int tap = i % TAPS;
        ws[tap * DD_TN + cl] = c0 + cl < DG_C ? w[(dd_idx)(c0 + cl) * TAPS + tap] : (dd_t)0;
    }

    // (2) The dY window, channel-major: plane row pr, column pc hold dY row qh0 + ymin + pr,
    // column qw0 + xmin + pc; zeros outside dY and outside what a tap reads.
    constexpr int GROUPS = DD_TN / 8;
    const int rows_read = DD_TQH + (ymax - ymin);
    const int cols_read = DD_TQW + (xmax - xmin);
    for (int i = tid; i < GROUPS * DD_PR * DD_PW; i += DD_THREADS) {
        const int pc = i % DD_PW;
        const int t = i / DD_PW;
        const int pr = t % DD_PR;
        const int g8 = t / DD_PR;
        const int ho = qh0 + ymin + pr;
        const int wo = qw0 + xmin + pc;
        const int c = c0 + 8 * g8;
        dd_t e[8];
        if (taps && pr < rows_read && pc < cols_read && ho >= 0 && ho < DG_HO && wo >= 0 && wo < DG_WO && c < DG_C)
            dd_load<8, true>(e, dy + (((dd_idx)n * DG_HO + ho) * DG_WO + wo) * DG_C + c);
        else
            dd_zero<8>(e);
        dd_t* dst = planes + (8 * g8 * DD_PR + pr) * DD_PP + pc;
#pragma unroll
        for (int k = 0; k < 8; ++k) dst[k * DD_PR * DD_PP] = e[k];
    }
    DD_SYNC();

    // (3) Per channel: every valid filter row's banded A times the staged dY rows.
    const int warp = tid / 32;
    const int lane = tid % 32;
    const int g = lane / 4;
    const int t4 = lane % 4;
    const dg_u32 plane_base = dg_smem_addr(planes);
    for (int cl = warp; cl < DD_TN; cl += DD_WARPS) {
        float acc[DD_RB][DD_CBW][4];
#pragma unroll
        for (int rb = 0; rb < DD_RB; ++rb)
#pragma unroll
            for (int cw = 0; cw < DD_CBW; ++cw)
#pragma unroll
                for (int e = 0; e < 4; ++e) acc[rb][cw][e] = 0.0f;
        if (taps && c0 + cl < DG_C) {
            for (int ty = 0; ty < DG_Y; ++ty) {
                if (!dd_tap_ok(rh, DG_PH, DG_SH, DG_DH, ty)) continue;
                const int row0 = (rh + DG_PH - ty * DG_DH) / DG_SH - ymin;    // plane row of unit row 0
                // A fragment (m16n8k16, row-major): a[s][r] holds A[m][k], A[m][k+1] with
                // m = g + 8*(r&1), k = 16*s + 2*t4 + 8*(r>>1); A[m][k] is the tap x whose
                // offset is k - m + xmin, if that x is valid in this phase.
                dg_u32 a[DD_KS][4];
#pragma unroll
                for (int s = 0; s < DD_KS; ++s)
#pragma unroll
                    for (int r = 0; r < 4; ++r) {
                        dg_u32 pair = 0;
#pragma unroll
                        for (int h = 0; h < 2; ++h) {
                            const int m = g + 8 * (r & 1);
                            const int k = 16 * s + 2 * t4 + 8 * (r >> 1) + h;
                            const int num = rw + DG_PW - (k - m + xmin) * DG_SW;    // = x * dW for a tap x
                            dd_t v = (dd_t)0;
                            if (num >= 0 && num % DG_DW == 0 && num / DG_DW < DG_X)
                                v = ws[(ty * DG_X + num / DG_DW) * DD_TN + cl];
                            pair |= (dg_u32)v << (16 * h);
                        }
                        a[s][r] = pair;
                    }
#pragma unroll
                for (int rb = 0; rb < DD_RB; ++rb)
#pragma unroll
                    for (int cw = 0; cw < DD_CBW; ++cw) {
                        // ldmatrix: lanes 8i..8i+7 address rows 0..7 (dY rows) of matrix i
                        // (8 k-columns from 8*i); x4 covers two k-steps, x2 one.
                        const dg_u32 addr = plane_base +
                            (dg_u32)(((cl * DD_PR + row0 + 8 * rb + (lane & 7)) * DD_PP + 16 * cw + 8 * (lane >> 3)) * 2);
#pragma unroll
                        for (int s = 0; s + 1 < DD_KS; s += 2) {
                            dg_u32 r[4];
                            dg_ldmatrix_x4(r, addr + 32 * s);
                            dg_mma(acc[rb][cw], a[s], r[0], r[1]);
                            dg_mma(acc[rb][cw], a[s + 1], r[2], r[3]);
                        }
                        if constexpr (DD_KS % 2 == 1) {
                            dg_u32 r[2];
                            dg_ldmatrix_x2(r, addr + 32 * (DD_KS - 1));
                            dg_mma(acc[rb][cw], a[DD_KS - 1], r[0], r[1]);
                        }
                    }
            }
        }
        // C fragment: acc[..][e] is dX column m = g + 8*(e>>1), row j = 2*t4 + (e&1) of the unit.
#pragma unroll
        for (int rb = 0; rb < DD_RB; ++rb)
#pragma unroll
            for (int cw = 0; cw < DD_CBW; ++cw)
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    outp[(cl * DD_TQH + 8 * rb + 2 * t4 + (e & 1)) * DD_OP + 16 * cw + g + 8 * (e >> 1)] =
                        dd_from_f(acc[rb][cw][e]);
    }
    DD_SYNC();

    // (4) Output planes -> dX, 16-byte stores of 8 channels (group fastest: one pixel's
    // channels are consecutive in memory).
    for (int i = tid; i < GROUPS * DD_TQH * DD_TQW; i += DD_THREADS) {
        const int g8 = i % GROUPS;
        const int t = i / GROUPS;
        const int qc = t % DD_TQW;
        const int qr = t / DD_TQW;
        const int hi = (qh0 + qr) * DG_SH + rh;
        const int wi = (qw0 + qc) * DG_SW + rw;
        const int c = c0 + 8 * g8;
        if (hi >= DG_HI || wi >= DG_WI || c >= DG_C) continue;
        dd_t e[8];
#pragma unroll
        for (int k = 0; k < 8; ++k) e[k] = outp[((8 * g8 + k) * DD_TQH + qr) * DD_OP + qc];
        dd_store<8>(dx + (((dd_idx)n * DG_HI + hi) * DG_WI + wi) * DG_C + c, e);
    }
}
