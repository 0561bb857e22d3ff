// Direct backward-data convolution (dgrad) on NCHW planes: depthwise and small-cpg grouped
// layers whose dY and dX are NCHW in memory, one source for CUDA and HIP. No GEMM tiles and no
// layout transform: every thread accumulates its own dX values in fp32 on the FMA units.
//
//   dX[n,g*cpg+c,hi,wi] = sum_{k<kpg,y,x} dY[n,g*kpg+k,ho,wo] * W[g*kpg+k,c,y,x]
//   ho = (hi + pH - y*dH)/sH, counted only when exact and 0 <= ho < Ho (wo likewise).
//
// In NCHW each (image, channel) pair is a plane of Hi x Wi dX pixels, rows contiguous, and a
// depthwise plane depends on one dY plane only. A block owns a tile of DP_TH x DP_TW dX pixels
// (real coordinates) in each of DP_PB consecutive planes (n*C + c); a thread owns DP_TPH x
// DP_TPW consecutive pixels of one plane, its columns consecutive in memory, so a warp stores
// whole runs of rows. Thread index: column fastest, then row, then plane.
//
// Steps, for each of the kpg dY planes that reach the block's planes: (1) the plane's Y*X
// filter taps are read into registers (every thread of a plane reads the same addresses) and
// the block's dY window (every dY row and column a tap maps onto the tile, zeros outside dY)
// is loaded, every load issued before the first shared store, and staged in shared memory as
// fp32, DP_WR rows of DP_PITCH floats per plane: row by row (DP_WHOLE 0; each window row as
// aligned DP_LV-element vectors, adjacent threads on adjacent vectors) or, where the tile is
// the whole plane, as one contiguous run of the block's consecutive dY planes (DP_WHOLE 1;
// placed into the zeroed window); (2) each thread walks the DP_RT dY rows its pixels read,
// loads each row's DP_CT columns from shared memory into registers (128-bit loads where its
// first column is 16-byte aligned) and applies every (y, x) tap that maps the row onto its
// pixels; (3) it stores its pixels (DP_WHOLE 0), or they go through a plane-shaped buffer in
// shared memory and the block's consecutive dX planes out as one contiguous run (DP_WHOLE 1).
//
// Strides without tests in the loop. The block's first row and column are multiples of the
// stride and DP_TPH, DP_TPW are multiples of it, so thread row i (column j) is in stride phase
// i mod sH (j mod sW) whatever the thread: whether tap y reaches row i, and the dY window row
// it reads, (i + pH - y*dH)/sH - DP_OR, are compile-time constants of the unrolled loops.
//
// Every dX element of the tile is written once, rounded to the storage type with
// round-to-nearest-even (DP_VS elements per store); pixels no tap reaches get 0. No atomics, no
// zero-fill pass, no workspace.
//
// Every problem value arrives as a DG_* define and every schedule value as a DP_*/DD_* define
// from miopen_solver/direct_plane.py. No vendor header is included.

// #include-block direct.cu vendor

// #include-block direct.cu moves

// ------------------------------------------------------------------ rules (mirror direct_plane.py)
static_assert(DP_TPH % DG_SH == 0 && DP_TPW % DG_SW == 0, "thread pixels cover whole stride phases");
static_assert(DP_TH == DP_THT * DP_TPH && DP_TW == DP_TWT * DP_TPW, "block tile");
static_assert(DD_THREADS == DP_PB * DP_THT * DP_TWT, "thread grid");
static_assert(DP_WR == (DP_THT - 1) * (DP_TPH / DG_SH) + DP_RT, "window rows");
static_assert(DP_WC == (DP_TWT - 1) * (DP_TPW / DG_SW) + DP_CT, "window columns");
static_assert(DP_VR == 1 || DP_VR == 2 || DP_VR == 4, "shared read width");
static_assert((DP_TPW / DG_SW) % DP_VR == 0 && DP_PITCH % DP_VR == 0, "aligned shared reads");
static_assert(DP_PITCH >= (DP_TWT - 1) * (DP_TPW / DG_SW) + DP_CTV && DP_CTV % DP_VR == 0 && DP_CTV >= DP_CT,
              "row pitch holds every thread's reads");
#if DP_WHOLE
static_assert(DG_CPG == 1 && DG_KPG == 1 && DP_TH >= DG_HI && DP_TW >= DG_WI, "whole depthwise planes");
static_assert((DP_PB * DG_HI * DG_WI) % DP_VS == 0 && (DG_C * DG_HI * DG_WI) % DP_VS == 0 &&
              (DP_PB * DG_HO * DG_WO) % DP_LV == 0 && (DG_C * DG_HO * DG_WO) % DP_LV == 0 && DP_VS * DD_EB <= 16 &&
              DP_LV * DD_EB <= 16, "aligned runs of the block's planes (and of an image's, for split-N)");
static_assert(DP_LOADS * DD_THREADS * DP_LV >= DP_PB * DG_HO * DG_WO, "staging loads cover the planes");
static_assert(DP_OUT_OFFSET % 16 == 0 && DP_OUT_OFFSET >= DP_PB * DP_WR * DP_PITCH * 4, "output buffer");
#else
static_assert(DP_TPW % DP_VS == 0 && DG_WI % DP_VS == 0 && DP_VS * DD_EB <= 16, "dX store width");
static_assert(DP_LOADS * DD_THREADS >= DP_PB * DP_WR * DP_NV && DP_NV * DP_LV >= DP_CMOD + DP_WC, "staging loads cover the window");
static_assert(DG_WO % DP_LV == 0 && (DP_TW / DG_SW) % DP_LV == 0 && DP_CMOD == ((DP_OC % DP_LV + DP_LV) % DP_LV) && DP_LV * DD_EB <= 16,
              "aligned dY row vectors");
#endif

// Floor division and remainder by a positive constant (the tap arithmetic; folded at compile time).
DD_DEVICE int dp_fdiv(int a, int b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
DD_DEVICE int dp_fmod(int a, int b) { return a - dp_fdiv(a, b) * b; }

// One storage element through the read-only path, as fp32.
DD_DEVICE float dp_ld(const dd_t* p) {
    dd_t e;
    dd_load<1, true>(&e, p);
    return dd_to_f(e);
}

// DP_CTV floats of a shared-memory row (16-byte aligned for L = 4, 8 for L = 2) in L-float loads.
template <int L> struct __attribute__((aligned(4 * L))) dp_fv { float f[L]; };
template <int L>
DD_DEVICE void dp_read_row(float* r, const float* p) {
#pragma unroll
    for (int q = 0; q < DP_CTV; q += L) {
        const dp_fv<L> v = *reinterpret_cast<const dp_fv<L>*>(p + q);
#pragma unroll
        for (int u = 0; u < L; ++u) r[q + u] = v.f[u];
    }
}

// The plane's Y*X taps of dY channel k of its group, as fp32 (every thread of a plane reads
// the same addresses).
DD_DEVICE void dp_load_taps(float (&wt)[DG_Y][DG_X], const dd_t* __restrict__ w, int g, int ci, int k) {
    const int kw = g * DG_KPG + k;
#pragma unroll
    for (int y = 0; y < DG_Y; ++y)
#pragma unroll
        for (int x = 0; x < DG_X; ++x)
#if DP_W_NCHW
            wt[y][x] = dp_ld(w + ((kw * DG_CPG + ci) * DG_Y + y) * DG_X + x);
#else
            wt[y][x] = dp_ld(w + ((kw * DG_Y + y) * DG_X + x) * DG_CPG + ci);
#endif
}

// (2) the taps, dY row by dY row of the thread's window (win: its first row and column).
DD_DEVICE void dp_apply_taps(float (&acc)[DP_TPH][DP_TPW], const float* win, const float (&wt)[DG_Y][DG_X]) {
#pragma unroll
    for (int r = 0; r < DP_RT; ++r) {
        float row[DP_CTV];
        dp_read_row<DP_VR>(row, win + r * DP_PITCH);
#pragma unroll
        for (int i = 0; i < DP_TPH; ++i)
#pragma unroll
            for (int y = 0; y < DG_Y; ++y) {
                const int ny = i + DG_PH - y * DG_DH;
                if (dp_fmod(ny, DG_SH) != 0 || dp_fdiv(ny, DG_SH) - DP_OR != r) continue;
#pragma unroll
                for (int j = 0; j < DP_TPW; ++j)
#pragma unroll
                    for (int x = 0; x < DG_X; ++x) {
                        const int nx = j + DG_PW - x * DG_DW;
                        if (dp_fmod(nx, DG_SW) != 0) continue;
                        acc[i][j] += row[dp_fdiv(nx, DG_SW) - DP_OC] * wt[y][x];
                    }
            }
    }
}

#if DP_WHOLE
// Planes of plane block b (at most DP_PB; the last block's fewer).
DD_DEVICE int dp_planes(int b) { return DG_N * DG_C - b * DP_PB < DP_PB ? DG_N * DG_C - b * DP_PB : DP_PB; }

// The dY run of plane block b into registers (DP_LV-element loads; the last block's tail by
// single elements).
DD_DEVICE void dp_load_run(dd_t (&v)[DP_LOADS][DP_LV], const dd_t* __restrict__ dy, int b, int tid) {
    const dd_idx base = (dd_idx)b * DP_PB * (DG_HO * DG_WO);
    const int count = dp_planes(b) * (DG_HO * DG_WO);
#pragma unroll
    for (int l = 0; l < DP_LOADS; ++l) {
        const int e0 = (tid + l * DD_THREADS) * DP_LV;
        if (e0 + DP_LV <= count) {
            dd_load<DP_LV, true>(v[l], dy + base + e0);
        } else {
#pragma unroll
            for (int u = 0; u < DP_LV; ++u)
                if (e0 + u < count) dd_load<1, true>(v[l] + u, dy + base + e0 + u);
        }
    }
}

// The loaded run of plane block b into the interior of the window (its halo stays zero).
DD_DEVICE void dp_place_run(float* win, const dd_t (&v)[DP_LOADS][DP_LV], int b, int tid) {
    const int count = dp_planes(b) * (DG_HO * DG_WO);
#pragma unroll
    for (int l = 0; l < DP_LOADS; ++l) {
        const int e0 = (tid + l * DD_THREADS) * DP_LV;
        if (e0 >= count) continue;
#pragma unroll
        for (int u = 0; u < DP_LV; ++u) {
            const int e = e0 + u, pp = e / (DG_HO * DG_WO), rem = e % (DG_HO * DG_WO);
            const int wr = rem / DG_WO - DP_OR, wc = rem % DG_WO - DP_OC;
            if (e < count && wr >= 0 && wr < DP_WR && wc >= 0 && wc < DP_WC)
                win[(pp * DP_WR + wr) * DP_PITCH + wc] = dd_to_f(v[l][u]);
        }
    }
}

// Whole planes: the tile is the whole plane and a plane block's dY and dX planes are
// consecutive. Block b takes plane block b, or with DP_PIPE (a persistent grid of DP_GRID
// blocks) plane blocks b, b + DP_GRID, ...; the next one's dY run and taps are loaded while this one is
// computed.
// Each thread's pixels go into a plane-shaped output buffer, and the block's dX planes out as
// one contiguous run in DP_VS-element stores.
DD_GLOBAL void DG_KERNEL_NAME(const dd_t* __restrict__ dy, const dd_t* __restrict__ w, dd_t* __restrict__ dx) {
    DD_GRID_DEPENDENCY();
    extern DD_SHARED __attribute__((aligned(16))) unsigned char dd_smem[];
    float* dp_win = reinterpret_cast<float*>(dd_smem);          // DP_PB planes x DP_WR rows x DP_PITCH floats
    dd_t* out = reinterpret_cast<dd_t*>(dd_smem + DP_OUT_OFFSET);   // DP_PB planes x Hi x Wi
    const int tid = DD_TID();
    const int tx = tid % DP_TWT;
    const int ty = (tid / DP_TWT) % DP_THT;
    const int tp = tid / (DP_TWT * DP_THT);
    int b = (int)DD_BID();
    float wt[DG_Y][DG_X];                                        // depthwise, kpg 1: the taps of channel c
    dp_load_taps(wt, w, (tp < dp_planes(b) ? b * DP_PB + tp : 0) % DG_C, 0, 0);
    dd_t v[DP_LOADS][DP_LV];
    dp_load_run(v, dy, b, tid);
    for (int e = tid; e < DP_PB * DP_WR * DP_PITCH; e += DD_THREADS) dp_win[e] = 0.f;   // the halo
#if DP_PIPE
    for (; b < DP_PBLOCKS; b += DP_GRID) {
#else
    {                                                            // one plane block: b
#endif
        DD_SYNC();                                               // the window and the buffer are free
        dp_place_run(dp_win, v, b, tid);
#if DP_PIPE
        if (b + DP_GRID < DP_PBLOCKS) dp_load_run(v, dy, b + DP_GRID, tid);   // in flight meanwhile
#endif
        const bool live = tp < dp_planes(b);
        float acc[DP_TPH][DP_TPW];
#pragma unroll
        for (int i = 0; i < DP_TPH; ++i)
#pragma unroll
            for (int j = 0; j < DP_TPW; ++j) acc[i][j] = 0.f;
        DD_SYNC();
        dp_apply_taps(acc, dp_win + (tp * DP_WR + ty * (DP_TPH / DG_SH)) * DP_PITCH + tx * (DP_TPW / DG_SW), wt);
        if (live) {
#pragma unroll
            for (int i = 0; i < DP_TPH; ++i)
#pragma unroll
                for (int j = 0; j < DP_TPW; ++j) {
                    const int hi = ty * DP_TPH + i, wi = tx * DP_TPW + j;
                    if (hi < DG_HI && wi < DG_WI) out[(tp * DG_HI + hi) * DG_WI + wi] = dd_from_f(acc[i][j]);
                }
        }
#if DP_PIPE
        if (b + DP_GRID < DP_PBLOCKS) {                         // the next plane block's taps, in flight
            const int nb = b + DP_GRID;
            dp_load_taps(wt, w, (tp < dp_planes(nb) ? nb * DP_PB + tp : 0) % DG_C, 0, 0);
        }
#endif
        DD_SYNC();
        const dd_idx base = (dd_idx)b * DP_PB * (DG_HI * DG_WI);
        const int count = dp_planes(b) * (DG_HI * DG_WI);
        for (int e0 = tid * DP_VS; e0 < count; e0 += DD_THREADS * DP_VS) {
            if (e0 + DP_VS <= count) {
                dd_t e[DP_VS];
                dd_load<DP_VS, false>(e, out + e0);
                dd_store<DP_VS>(dx + base + e0, e);
            } else {                                              // the last block's tail
                for (int u = 0; e0 + u < count; ++u) dx[base + e0 + u] = out[e0 + u];
            }
        }
    }
}
#else
// Rows: block (tile along W, tile along H, plane block); for each of the kpg dY planes the
// window is staged row by row, each window row as DP_NV aligned DP_LV-element vectors, the
// first starting DP_CMOD columns before the window (each vector wholly inside dY or outside).
DD_GLOBAL void DG_KERNEL_NAME(const dd_t* __restrict__ dy, const dd_t* __restrict__ w, dd_t* __restrict__ dx) {
    DD_GRID_DEPENDENCY();
    extern DD_SHARED __attribute__((aligned(16))) unsigned char dd_smem[];
    float* dp_win = reinterpret_cast<float*>(dd_smem);          // DP_PB planes x DP_WR rows x DP_PITCH floats
    const int tid = DD_TID();
    long long bid = DD_BID();
    const int tile_w = (int)(bid % DP_TILES_W);
    bid /= DP_TILES_W;
    const int tile_h = (int)(bid % DP_TILES_H);
    const int pblock = (int)(bid / DP_TILES_H);
    const int tx = tid % DP_TWT;
    const int ty = (tid / DP_TWT) % DP_THT;
    const int tp = tid / (DP_TWT * DP_THT);
    const int h0 = tile_h * DP_TH, w0 = tile_w * DP_TW;          // multiples of sH, sW
    const int r0 = h0 / DG_SH + DP_OR, c0 = w0 / DG_SW + DP_OC;  // dY row, column of window (0, 0)
    const int plane = pblock * DP_PB + tp;                       // n*C + c of this thread's pixels
    const bool live = plane < DG_N * DG_C;
    const int c = (live ? plane : 0) % DG_C;
    const int g = c / DG_CPG, ci = c % DG_CPG;

    float acc[DP_TPH][DP_TPW];
#pragma unroll
    for (int i = 0; i < DP_TPH; ++i)
#pragma unroll
        for (int j = 0; j < DP_TPW; ++j) acc[i][j] = 0.f;

    for (int k = 0; k < DG_KPG; ++k) {
        if (k) DD_SYNC();                                         // the window is rewritten
        // (1) this plane's taps and the window, every load issued before the first shared store
        float wt[DG_Y][DG_X];
        dp_load_taps(wt, w, g, ci, k);
        dd_t v[DP_LOADS][DP_LV];
#pragma unroll
        for (int l = 0; l < DP_LOADS; ++l) {
            const int e = tid + l * DD_THREADS;
            const int pp = e / (DP_WR * DP_NV), rem = e % (DP_WR * DP_NV);
            const int ho = r0 + rem / DP_NV, wo = c0 - DP_CMOD + rem % DP_NV * DP_LV;
            const int pl = pblock * DP_PB + pp;
            const bool ok = e < DP_PB * DP_WR * DP_NV && pl < DG_N * DG_C && ho >= 0 && ho < DG_HO && wo >= 0 &&
                            wo < DG_WO;
            if (ok) {
                const dd_idx nn = pl / DG_C, kk = (pl % DG_C) / DG_CPG * DG_KPG + k;
                dd_load<DP_LV, true>(v[l], dy + ((nn * DG_K + kk) * DG_HO + ho) * (dd_idx)DG_WO + wo);
            } else {
                dd_zero<DP_LV>(v[l]);
            }
        }
#pragma unroll
        for (int l = 0; l < DP_LOADS; ++l) {
            const int e = tid + l * DD_THREADS;
            if (e < DP_PB * DP_WR * DP_NV) {
                const int pp = e / (DP_WR * DP_NV), rem = e % (DP_WR * DP_NV);
                float* row = dp_win + (pp * DP_WR + rem / DP_NV) * DP_PITCH;
#pragma unroll
                for (int u = 0; u < DP_LV; ++u) {
                    const int wc = rem % DP_NV * DP_LV + u - DP_CMOD;
                    if (wc >= 0 && wc < DP_WC) row[wc] = dd_to_f(v[l][u]);
                }
            }
        }
        DD_SYNC();
        dp_apply_taps(acc, dp_win + (tp * DP_WR + ty * (DP_TPH / DG_SH)) * DP_PITCH + tx * (DP_TPW / DG_SW), wt);
    }
    // (3) store the thread's pixels
    if (!live) return;
#pragma unroll
    for (int i = 0; i < DP_TPH; ++i) {
        const int hi = h0 + ty * DP_TPH + i;
        if (hi >= DG_HI) continue;
        dd_t* out = dx + ((dd_idx)plane * DG_HI + hi) * DG_WI;
#pragma unroll
        for (int q = 0; q < DP_TPW; q += DP_VS) {
            const int wi = w0 + tx * DP_TPW + q;
            if (wi >= DG_WI) continue;                            // DP_VS divides Wi: all or none
            dd_t e[DP_VS];
#pragma unroll
            for (int u = 0; u < DP_VS; ++u) e[u] = dd_from_f(acc[i][q + u]);
            dd_store<DP_VS>(out + wi, e);
        }
    }
}
#endif
