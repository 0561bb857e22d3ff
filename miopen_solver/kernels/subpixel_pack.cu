// W' of the sub-pixel schedules (miopen_solver/subpixel.py): the real filter W (K, Y, X, cpg),
// KYXC, repacked as the virtual stride-1 problem's filter (K, Y', X', SH*SW*cpg): column
// (ry*SW + rx)*cpg + c of virtual tap (ty, tx) is W's tap (ry + PH + SH*(ty - TOP),
// rx + PW + SW*(tx - LEFT)), zero where that lies outside the filter. One W' element a thread
// (a grid-stride loop), moved as raw bits of DP_EB bytes; the sizes are defines (one binary
// per problem: W' is small, its launch a few microseconds).
#define DG_BLOCK_THREADS 256
// #include-block dgrad.cu vendor

#if DP_EB == 2
typedef unsigned short dp_t;
#else
typedef unsigned int dp_t;
#endif

DG_GLOBAL void DP_KERNEL_NAME(const dp_t* __restrict__ w, dp_t* __restrict__ wp) {
    DG_GRID_DEPENDENCY();
    DG_LAUNCH_DEPENDENTS();
    const long long total = (long long)DP_K * DP_YV * DP_XV * DP_SH * DP_SW * DP_CPG;
    const long long step = (long long)DP_BLOCKS * DG_BLOCK_THREADS;
    for (long long e = (long long)DG_BID_X() * DG_BLOCK_THREADS + DG_TID(); e < total; e += step) {
        long long r = e;
        const int c = (int)(r % DP_CPG);
        r /= DP_CPG;
        const int rx = (int)(r % DP_SW);
        r /= DP_SW;
        const int ry = (int)(r % DP_SH);
        r /= DP_SH;
        const int tx = (int)(r % DP_XV);
        r /= DP_XV;
        const int ty = (int)(r % DP_YV);
        const long long k = r / DP_YV;
        const int ky = ry + DP_PH + DP_SH * (ty - DP_TOP);
        const int kx = rx + DP_PW + DP_SW * (tx - DP_LEFT);
        dp_t v = 0;
        if (ky >= 0 && ky < DP_Y && kx >= 0 && kx < DP_X) v = w[((k * DP_Y + ky) * DP_X + kx) * DP_CPG + c];
        wp[e] = v;
    }
}
