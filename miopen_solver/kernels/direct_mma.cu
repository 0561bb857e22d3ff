// Direct backward-data convolution on tensor cores: the `mma` body of the direct schedule,
// for depthwise layers (cpg = kpg = 1), 16-bit storage, on NVIDIA mma.sync.m16n8k16 (sm_80+)
// or AMD v_mfma_f32_16x16x16 (CDNA: gfx90a, gfx942).
//
//   dX[n,hi,wi,c] = sum_{y,x} dY[n,ho,wo,c] * W[c,y,x]
//   ho = (hi + pH - y*dH)/sH, counted only when exact and 0 <= ho < Ho (wo likewise).
//
// Phases as in direct.cu: a block owns DD_TQH x DD_TQW phase-local pixels (qh, qw) of one
// phase (rh, rw) x DD_TN channels. In the phase the valid taps of each axis are fixed and
// tap t reads dY at the phase-local index plus off(t) = (r + pad - t*dil)/stride.
//
// The banded-matrix form. For one channel c and one valid filter row y, the 16 dX columns
// qw0+m (m < 16) of DD_UNIT_ROWS dX rows qh0+j (8 on NVIDIA, 16 on AMD) are
//
//   dX[m][j] += sum_k A[m][k] * B[k][j],   A[m][k] = W[c,y,x] where k = m + off(x) - min_off,
//                                          B[k][j] = dY[qh0 + j + offy(y)][qw0 + min_off + k],
//
// A is zero off its band (the valid x taps), so one MMA per 16 columns of k does
// 16 x rows x 16 multiply-adds of which 16 x rows x (taps in the band) are useful. K spans
// 16 + spanx columns, DD_KS k-steps of 16. A warp (wave) loads A for (c, y) into registers
// once and reuses it over its DD_RB x DD_CBW units; B comes from shared memory: the block's
// dY window is staged channel-major (one plane of DD_PR rows x DD_PP elements per channel),
// so a B fragment's columns are dY rows of one channel. NVIDIA: ldmatrix, every row address
// 16-byte aligned (plane columns start at min_off; pitch an odd number of 16-byte units, so
// the 8 rows hit 8 different bank groups). AMD: each lane reads its 4 k-columns of one dY
// row as one 8-byte LDS load.
//
// Block steps: (1) the band table: for every filter row y and channel, A's diagonals as
// 32-bit pairs (A[m][k] depends on k - m only), so a warp loads its A fragment with 4*DD_KS
// shared loads at fixed offsets (a thread builds whole rows from the row's X taps; persistent
// blocks build it again only where their run of tiles enters another channel block or W phase); (2) the dY window to the planes, 16-byte global loads of
// 8 channels, zeros outside dY and outside the columns and rows any tap reads; (3) each
// warp takes channels warp, warp + DD_WARPS, ..., sums every valid filter row's MMAs into
// fp32 accumulators and stores them, rounded to the storage type, into the channel's
// output plane (inside the channel's dY plane where it fits: only that warp reads it);
// (4) the output planes go to dX in 16-byte stores of 8 channels. Every dX
// element of the block is written exactly once (zeros where no tap reaches); no atomics,
// no zero-fill pass, no workspace.
//
// Layouts: dY and dX NHWC (schedule DIRECT), or each in its own memory order, NCHW or NHWC
// (DIRECT_NCHW: DD_DY_NCHW, DD_DX_NCHW): the planes are channel-major, so an NCHW dY row is
// copied as it lies and an NCHW dX row stored as it lies (row-major output planes); W of a
// depthwise layer is the same bytes in NCHW and NHWC.
//
// Non-finite inputs: A's zeros multiply dY values outside a pixel's taps, so an Inf or NaN
// in dY makes NaN the dX values of its 16-column neighbourhood that the exact sum leaves
// finite or infinite (still non-finite: a loss-scaling check sees them).
//
// Every problem value arrives as a DG_* define and every schedule value as a DD_* define
// from miopen_solver/direct.py. No vendor header is included.

// #include-block direct.cu vendor

// #include-block direct.cu moves

// #include-block direct.cu unit

// ------------------------------------------------------------------ rules (mirror direct.py)
#if defined(DG_VENDOR_AMD)
#define DD_WAVE 64           // v_mfma_f32_16x16x16: units of 16 dX columns x 16 dX rows
#define DD_UNIT_ROWS 16
#else
#define DD_WAVE 32           // mma.sync.m16n8k16: units of 16 dX columns x 8 dX rows
#define DD_UNIT_ROWS 8
#endif
static_assert(DG_DTYPE == 1 || DG_DTYPE == 2, "16-bit storage (fp16, bf16)");
static_assert(DG_CPG == 1 && DG_KPG == 1, "depthwise");
static_assert(DG_C % 8 == 0 && DD_TN % 8 == 0, "channels in 16-byte groups of 8");
static_assert(DD_TQW == 16 * DD_CBW && DD_TQH == DD_UNIT_ROWS * DD_RB, "units of 16 columns x DD_UNIT_ROWS rows");
static_assert(DD_THREADS == DD_WAVE * DD_WARPS && DD_WARPS <= DD_TN, "warps");
static_assert(DD_KS >= 1 && DD_PW == DD_TQW + 16 * (DD_KS - 1), "plane columns the k-steps read");
static_assert(DD_PP >= DD_PW && DD_PP % 8 == 0 && (DD_PP / 8) % 2 == 1, "plane pitch: odd 16-byte units");
#if DD_DX_NCHW
static_assert(DD_OPR >= DD_TQW && DD_OPR % 8 == 0, "output plane pitch (columns consecutive, 16-byte rows)");
#else
static_assert(DD_OPR >= DD_TQH && DD_OPR % 2 == 0, "output plane pitch (rows consecutive)");
#endif
#if DD_OUT_IN_PLANE
#define DD_OUT_STRIDE (DD_PR * DD_PP)
static_assert((DD_DX_NCHW ? DD_TQH : DD_TQW) * DD_OPR <= DD_PR * DD_PP, "an output plane fits its channel's dY plane");
#else
#define DD_OUT_STRIDE ((DD_DX_NCHW ? DD_TQH : DD_TQW) * DD_OPR)
#endif
static_assert(DD_BW >= 16 * DD_KS + 16 && DD_BW % 4 == 0, "band entries per (row, channel), 16-byte rows");
static_assert(DD_BP == DD_BW + 4, "band row pitch: the entries and 4 words of pad");
#define DD_BATCH 4           // loads a thread issues before it stores any (the dY staging)

// ------------------------------------------------------------------ matrix instructions
#if defined(DG_VENDOR_AMD)
// v_mfma_f32_16x16x16{f16,bf16_1k} (CDNA3 ISA, "Dense matrix arithmetic"): lane l feeds
// A[m = l%16][k = 4*(l/16) .. +3] and B[k = 4*(l/16) .. +3][n = l%16]; its four results are
// C[4*(l/16) + e][l%16].
typedef float dd_accv __attribute__((ext_vector_type(4)));
#if DG_DTYPE == 1
typedef _Float16 dd_opv __attribute__((ext_vector_type(4)));
#else
typedef short dd_opv __attribute__((ext_vector_type(4)));
#endif
DD_DEVICE dd_accv dd_mfma(dd_opv a, dd_opv b, dd_accv c) {
#if DG_DTYPE == 1
    return __builtin_amdgcn_mfma_f32_16x16x16f16(a, b, c, 0, 0, 0);
#else
    return __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(a, b, c, 0, 0, 0);
#endif
}
DD_DEVICE dd_opv dd_opv_of(dd_u32 lo, dd_u32 hi) {
    union { dd_u32 u[2]; dd_opv v; } c;
    c.u[0] = lo;
    c.u[1] = hi;
    return c.v;
}
#define DD_WAVE_SYNC() __builtin_amdgcn_wave_barrier()
#else
// Blocks per multiprocessor that shared memory allows (DD_MIN_BLOCKS, from direct.py): told to
// ptxas, whose default register budget otherwise spills a few bytes in the banded-A loop.
#undef DD_GLOBAL
#define DD_GLOBAL extern "C" __global__ __launch_bounds__(DD_THREADS, DD_MIN_BLOCKS)
// __syncwarp() without a header (NVRTC compiles with none)
#define DD_WAVE_SYNC() asm volatile("bar.warp.sync -1;" ::: "memory");
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
// Not volatile: a pure function of its registers, so the compiler may interleave independent
// units' MMAs (ldmatrix stays volatile: it reads shared memory written before a barrier).
DG_DEVICE void dg_mma(float (&c)[4], const dg_u32 (&a)[4], dg_u32 b0, dg_u32 b1) {
#if DG_DTYPE == 1
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
#else
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
#endif
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
#endif

// ------------------------------------------------------------------ phase taps
// Whether tap t is valid along an axis in phase r (its dY index is exact), and its offset.
DD_DEVICE bool dd_tap_ok(int r, int pad, int stride, int dil, int t) {
    return ((r + pad - t * dil) % stride + stride) % stride == 0;
}

// ------------------------------------------------------------------ the kernel
// A block's work unit: dX tile (th, tw) of image n in phase (rh, rw), for channel block cb.
// One unit per block (DD_PBLOCKS 0: dd_unit_of), or DD_PBLOCKS persistent blocks (as many as
// the device holds at once): the units in the order channel block, W phase, H phase, image,
// tile along H, tile along W (fastest) are cut into DD_PBLOCKS runs of nearly equal length,
// block b taking run b, so a block rebuilds its band table only where its run enters another
// channel block or W phase (once or twice for most runs), every block of the device has work
// until the end, and the blocks of a multiprocessor drift apart (one stages its dY window
// while another multiplies).
#if DD_PBLOCKS
constexpr long long DD_UNITS_PER_PHASE = (long long)DG_N * DD_TILES_H * DD_TILES_W;
constexpr long long DD_UNITS_PER_CB = DD_UNITS_PER_PHASE * DD_NPH_H * DD_NPH_W;
constexpr long long DD_UNITS = DD_UNITS_PER_CB * DD_CB;
#endif

DD_GLOBAL void DG_KERNEL_NAME(const dd_t* __restrict__ dy, const dd_t* __restrict__ w, dd_t* __restrict__ dx) {
    extern DD_SHARED __attribute__((aligned(16))) unsigned char dg_smem[];
    DD_GRID_DEPENDENCY();
    dd_u32* band = reinterpret_cast<dd_u32*>(dg_smem);                              // [Y][TN][BP]
    dd_t* planes = reinterpret_cast<dd_t*>(dg_smem + DD_BAND_BYTES);                 // [TN][PR][PP]
    // Output planes [TN][TQW][OPR], DD_OUT_STRIDE elements apart: in the channel's own dY plane
    // where it fits (DD_OUT_IN_PLANE; only the warp that reads a plane writes it), else after them.
    dd_t* outp = planes + (DD_OUT_IN_PLANE ? 0 : DD_TN * DD_PR * DD_PP);
    const int tid = DD_TID();
#if DD_PBLOCKS
    int band_key = -1;                 // cb * DD_NPH_W + rw of the band table built (-1: none yet)
    const long long run_end = (DD_BID() + 1) * DD_UNITS / DD_PBLOCKS;
    for (long long work = DD_BID() * DD_UNITS / DD_PBLOCKS; work < run_end; ++work) {
        const int cb = (int)(work / DD_UNITS_PER_CB);
        long long b = work % DD_UNITS_PER_CB;
        const int rw = (int)(b / (DD_UNITS_PER_PHASE * DD_NPH_H));
        b %= DD_UNITS_PER_PHASE * DD_NPH_H;
        const int rh = (int)(b / DD_UNITS_PER_PHASE);
        b %= DD_UNITS_PER_PHASE;
        const int tw = (int)(b % DD_TILES_W);
        b /= DD_TILES_W;
        const int th = (int)(b % DD_TILES_H);
        const int n = (int)(b / DD_TILES_H);
#else
    {
        const dd_unit unit = dd_unit_of(DD_BID());
        const int cb = unit.cb, tw = unit.tw, th = unit.th, n = unit.n;
        const int rh = unit.ph / DD_NPH_W, rw = unit.ph % DD_NPH_W;
        const int band_key = -1;
#endif
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

        // (1) The band table: band[y][c][16 + d] holds A[m][k], A[m][k+1] for k - m = d, i.e. the
        // W[c,y,x] of the taps whose offsets are d + xmin (low half) and d + 1 + xmin (high half),
        // 0 where no valid x, so a thread's A fragment is 4*DD_KS 32-bit shared loads at fixed
        // offsets. It depends on the channel block and the W phase only. A thread builds whole
        // rows (y, c), DD_BP words apart (DD_BW entries and 4 words of pad, so the 16-byte stores
        // of 8 neighbouring rows hit 8 different bank groups): the row's X taps loaded together
        // (W[c][y][0..X) lie consecutively), its entries zeroed in 16-byte stores, then each
        // valid tap x, at offset o, added into entries o - xmin (low half) and o - xmin - 1 (high
        // half). Block-uniform condition: the barrier after (2) orders the rows before any warp
        // reads them; every read of the previous table was before the barrier that ends (3).
        if (cb * DD_NPH_W + rw != band_key) {
            for (int t = tid; t < DG_Y * DD_TN; t += DD_THREADS) {
                const int cl = t % DD_TN;
                const int y = t / DD_TN;
                dd_u32 tap[DG_X];
#pragma unroll
                for (int x = 0; x < DG_X; ++x)
                    tap[x] = c0 + cl < DG_C && dd_tap_ok(rw, DG_PW, DG_SW, DG_DW, x)
                                 ? (dd_u32)w[((dd_idx)(c0 + cl) * DG_Y + y) * DG_X + x] : 0u;
                dd_u32* row = band + t * DD_BP;
                dd_b16* row16 = reinterpret_cast<dd_b16*>(row);
                const dd_b16 zero = {{0u, 0u, 0u, 0u}};
#pragma unroll
                for (int i = 0; i < DD_BW / 4; ++i) row16[i] = zero;
#pragma unroll
                for (int x = 0; x < DG_X; ++x) {
                    if (!dd_tap_ok(rw, DG_PW, DG_SW, DG_DW, x)) continue;
                    const int e = 16 + (rw + DG_PW - x * DG_DW) / DG_SW - xmin;
                    row[e] |= tap[x];
                    row[e - 1] |= tap[x] << 16;
                }
            }
#if DD_PBLOCKS
            band_key = cb * DD_NPH_W + rw;
#endif
        }

        // (2) The dY window, channel-major: plane row pr, column pc hold dY row qh0 + ymin + pr,
        // column qw0 + xmin + pc; zeros outside dY and outside what a tap reads.
        constexpr int GROUPS = DD_TN / 8;
        const int rows_read = DD_TQH + (ymax - ymin);
        const int cols_read = DD_TQW + (xmax - xmin);
#if DD_DY_NCHW
        // NCHW dY: a plane row is a piece of a dY row; consecutive threads take consecutive
        // column pairs (coalesced loads, one 32-bit shared store each).
        // 4 * DD_BATCH pairs a thread in flight at once.
        constexpr int STAGE_N = DD_TN * DD_PR * (DD_PW / 2);
        for (int i0 = tid; i0 < STAGE_N; i0 += 4 * DD_BATCH * DD_THREADS) {
            dd_u32 v[4 * DD_BATCH];
#pragma unroll
            for (int u = 0; u < 4 * DD_BATCH; ++u) {
                const int i = i0 + u * DD_THREADS;
                const int pc = 2 * (i % (DD_PW / 2));
                const int t = i / (DD_PW / 2);
                const int pr = t % DD_PR;
                const int cl = t / DD_PR;
                const int ho = qh0 + ymin + pr;
                const int wo = qw0 + xmin + pc;
                const bool row_ok = i < STAGE_N && taps && pr < rows_read && ho >= 0 && ho < DG_HO && c0 + cl < DG_C;
                const dd_t* src = dy + (((dd_idx)n * DG_C + c0 + cl) * DG_HO + ho) * DG_WO + wo;
                const dd_t e0 = row_ok && pc < cols_read && wo >= 0 && wo < DG_WO ? src[0] : (dd_t)0;
                const dd_t e1 = row_ok && pc + 1 < cols_read && wo + 1 >= 0 && wo + 1 < DG_WO ? src[1] : (dd_t)0;
                v[u] = (dd_u32)e0 | ((dd_u32)e1 << 16);
            }
#pragma unroll
            for (int u = 0; u < 4 * DD_BATCH; ++u) {
                const int i = i0 + u * DD_THREADS;
                if (i < STAGE_N)
                    *reinterpret_cast<dd_u32*>(planes + (i / (DD_PW / 2)) * DD_PP + 2 * (i % (DD_PW / 2))) = v[u];
            }
        }
#else
        // NHWC dY: a thread moves two neighbouring pixels of 8 channels: two 16-byte loads,
        // eight 32-bit shared stores. The channel group is the fastest index, so neighbouring
        // threads read neighbouring 16-byte pieces of a pixel (whole 32-byte sectors); DD_BATCH
        // pixel pairs a thread are loaded before any is stored.
        constexpr int STAGE_N = GROUPS * DD_PR * (DD_PW / 2);
        for (int i0 = tid; i0 < STAGE_N; i0 += DD_BATCH * DD_THREADS) {
            dd_t e0[DD_BATCH][8], e1[DD_BATCH][8];
#pragma unroll
            for (int u = 0; u < DD_BATCH; ++u) {
                const int i = i0 + u * DD_THREADS;
                const int g8 = i % GROUPS;
                const int t = i / GROUPS;
                const int pc = 2 * (t % (DD_PW / 2));
                const int pr = t / (DD_PW / 2);
                const int ho = qh0 + ymin + pr;
                const int wo = qw0 + xmin + pc;
                const int c = c0 + 8 * g8;
                const bool row_ok = i < STAGE_N && taps && pr < rows_read && ho >= 0 && ho < DG_HO && c < DG_C;
                const dd_t* src = dy + (((dd_idx)n * DG_HO + ho) * DG_WO + wo) * DG_C + c;
                if (row_ok && pc < cols_read && wo >= 0 && wo < DG_WO) dd_load<8, true>(e0[u], src);
                else dd_zero<8>(e0[u]);
                if (row_ok && pc + 1 < cols_read && wo + 1 >= 0 && wo + 1 < DG_WO) dd_load<8, true>(e1[u], src + DG_C);
                else dd_zero<8>(e1[u]);
            }
#pragma unroll
            for (int u = 0; u < DD_BATCH; ++u) {
                const int i = i0 + u * DD_THREADS;
                if (i >= STAGE_N) continue;
                const int t = i / GROUPS;
                dd_u32* dst = reinterpret_cast<dd_u32*>(
                    planes + (8 * (i % GROUPS) * DD_PR + t / (DD_PW / 2)) * DD_PP + 2 * (t % (DD_PW / 2)));
#pragma unroll
                for (int k = 0; k < 8; ++k) dst[k * (DD_PR * DD_PP / 2)] = (dd_u32)e0[u][k] | ((dd_u32)e1[u][k] << 16);
            }
        }
#endif
        DD_SYNC();

        // (3) Per channel: every valid filter row's banded A times the staged dY rows.
        const int warp = tid / DD_WAVE;
        const int lane = tid % DD_WAVE;
#if defined(DG_VENDOR_AMD)
        const int lm = lane % 16;                  // A's row m, B's column n (a dY row of the unit)
        const int lk = 4 * (lane / 16);            // the lane's 4 k columns
        const int band_lane = 16 + lk - lm;        // band entry of A[m][k], A[m][k+1]
#else
        const int g = lane / 4;
        const int t4 = lane % 4;
        const dg_u32 plane_base = dg_smem_addr(planes);
        // A fragment (m16n8k16, row-major): a[s][r] holds A[m][k], A[m][k+1] with m = g + 8*(r&1),
        // k = 16*s + 2*t4 + 8*(r>>1): band entry 16 + k - m.
        const int band_lane = 16 + 2 * t4 - g;
#endif
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
                    const dd_u32* brow = band + (ty * DD_TN + cl) * DD_BP + band_lane;
#if defined(DG_VENDOR_AMD)
                    dd_opv a[DD_KS];
#pragma unroll
                    for (int s = 0; s < DD_KS; ++s) a[s] = dd_opv_of(brow[16 * s], brow[16 * s + 2]);
#pragma unroll
                    for (int rb = 0; rb < DD_RB; ++rb)
#pragma unroll
                        for (int cw = 0; cw < DD_CBW; ++cw) {
                            // B: 4 consecutive dY columns of plane row row0 + 16*rb + lm (8 bytes)
                            const dd_t* bp = planes + (cl * DD_PR + row0 + 16 * rb + lm) * DD_PP + 16 * cw + lk;
                            dd_accv c = {acc[rb][cw][0], acc[rb][cw][1], acc[rb][cw][2], acc[rb][cw][3]};
#pragma unroll
                            for (int s = 0; s < DD_KS; ++s) {
                                const dd_u32* bw = reinterpret_cast<const dd_u32*>(bp + 16 * s);
                                c = dd_mfma(a[s], dd_opv_of(bw[0], bw[1]), c);
                            }
#pragma unroll
                            for (int e = 0; e < 4; ++e) acc[rb][cw][e] = c[e];
                        }
#else
                    dg_u32 a[DD_KS][4];
#pragma unroll
                    for (int s = 0; s < DD_KS; ++s)
#pragma unroll
                        for (int r = 0; r < 4; ++r) a[s][r] = brow[16 * s + 8 * (r >> 1) - 8 * (r & 1)];
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
#endif
                }
            }
#if DD_OUT_IN_PLANE
            DD_WAVE_SYNC();                 // every lane's reads of this plane are done
#endif
            // The accumulators -> the channel's output plane, rounded to the storage type.
#if defined(DG_VENDOR_AMD)
            // acc[..][e] is dX column m = lk + e, row j = lm of the unit.
#pragma unroll
            for (int rb = 0; rb < DD_RB; ++rb)
#pragma unroll
                for (int cw = 0; cw < DD_CBW; ++cw)
#pragma unroll
                    for (int e = 0; e < 4; ++e)
#if DD_DX_NCHW
                        outp[cl * DD_OUT_STRIDE + (16 * rb + lm) * DD_OPR + 16 * cw + lk + e] = dd_from_f(acc[rb][cw][e]);
#else
                        outp[cl * DD_OUT_STRIDE + (16 * cw + lk + e) * DD_OPR + 16 * rb + lm] = dd_from_f(acc[rb][cw][e]);
#endif
#elif DD_DX_NCHW
            // acc[..][e] is dX column m = g + 8*(e>>1), row j = 2*t4 + (e&1) of the unit; the output
            // plane is row-major (an NCHW dX row as it lies): 16-bit stores.
#pragma unroll
            for (int rb = 0; rb < DD_RB; ++rb)
#pragma unroll
                for (int cw = 0; cw < DD_CBW; ++cw)
#pragma unroll
                    for (int e = 0; e < 4; ++e)
                        outp[cl * DD_OUT_STRIDE + (8 * rb + 2 * t4 + (e & 1)) * DD_OPR + 16 * cw + g + 8 * (e >> 1)] =
                            dd_from_f(acc[rb][cw][e]);
#else
            // acc[..][e] is dX column m = g + 8*(e>>1), row j = 2*t4 + (e&1) of the unit; the output
            // plane is column-major (rows consecutive), so rows j, j+1 are one 32-bit store.
#pragma unroll
            for (int rb = 0; rb < DD_RB; ++rb)
#pragma unroll
                for (int cw = 0; cw < DD_CBW; ++cw)
#pragma unroll
                    for (int e = 0; e < 4; e += 2)
                        *reinterpret_cast<dd_u32*>(outp + cl * DD_OUT_STRIDE + (16 * cw + g + 8 * (e >> 1)) * DD_OPR +
                                                   8 * rb + 2 * t4) =
                            (dd_u32)dd_from_f(acc[rb][cw][e]) | ((dd_u32)dd_from_f(acc[rb][cw][e + 1]) << 16);
#endif
        }
        DD_SYNC();

#if DD_DX_NCHW
        // (4) Output planes -> NCHW dX: a thread takes 8 consecutive columns of one row of one
        // channel (one 16-byte shared load); consecutive threads take consecutive pieces of a row.
        // With W-stride 1 and rows of a multiple of 8 elements the 8 dX elements are one aligned
        // 16-byte store, else 8 stores (W-strided phases scatter).
        for (int i = tid; i < DD_TN * DD_TQH * (DD_TQW / 8); i += DD_THREADS) {
            const int q8 = 8 * (i % (DD_TQW / 8));
            const int t = i / (DD_TQW / 8);
            const int qr = t % DD_TQH;
            const int cl = t / DD_TQH;
            const int hi = (qh0 + qr) * DG_SH + rh;
            const int wi0 = (qw0 + q8) * DG_SW + rw;
            if (hi >= DG_HI || wi0 >= DG_WI || c0 + cl >= DG_C) continue;
            dd_t e[8];
            dd_load<8, false>(e, outp + cl * DD_OUT_STRIDE + qr * DD_OPR + q8);
            dd_t* dst = dx + (((dd_idx)n * DG_C + c0 + cl) * DG_HI + hi) * DG_WI + wi0;
            if (DG_SW == 1 && DG_WI % 8 == 0 && wi0 + 8 <= DG_WI) {
                dd_store<8>(dst, e);
            } else {
#pragma unroll
                for (int k = 0; k < 8; ++k)
                    if (wi0 + k * DG_SW < DG_WI) dst[k * DG_SW] = e[k];
            }
        }
#else
        // (4) Output planes -> dX: a thread takes rows qr, qr+1 of column qc for 8 channels (eight
        // 32-bit shared loads, two 16-byte stores); group fastest, so a pixel's channels are
        // consecutive in memory.
        for (int i = tid; i < GROUPS * (DD_TQH / 2) * DD_TQW; i += DD_THREADS) {
            const int g8 = i % GROUPS;
            const int t = i / GROUPS;
            const int qc = t % DD_TQW;
            const int qr = 2 * (t / DD_TQW);
            const int hi = (qh0 + qr) * DG_SH + rh;
            const int wi = (qw0 + qc) * DG_SW + rw;
            const int c = c0 + 8 * g8;
            if (hi >= DG_HI || wi >= DG_WI || c >= DG_C) continue;
            dd_t e0[8], e1[8];
#pragma unroll
            for (int k = 0; k < 8; ++k) {
                const dd_u32 v =
                    *reinterpret_cast<const dd_u32*>(outp + (8 * g8 + k) * DD_OUT_STRIDE + qc * DD_OPR + qr);
                e0[k] = (dd_t)(v & 0xffffu);
                e1[k] = (dd_t)(v >> 16);
            }
            dd_t* dst = dx + (((dd_idx)n * DG_HI + hi) * DG_WI + wi) * DG_C + c;
            dd_store<8>(dst, e0);
            if (hi + DG_SH < DG_HI) dd_store<8>(dst + (dd_idx)DG_SH * DG_WI * DG_C, e1);
        }
#endif
#if DD_PBLOCKS && DD_OUT_IN_PLANE
        DD_SYNC();      // (4)'s reads of the output planes, inside the dY planes, before (2) refills them
#endif
    }
}
