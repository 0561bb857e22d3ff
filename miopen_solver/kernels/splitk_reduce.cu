// Split-K reduction (miopen_solver/splitk.py): the second step of a split-K launch through the
// fp32 workspace. The dgrad kernel's split z stored its fp32 partial sums into slice z of the
// workspace (`slice` floats after slice z-1), laid out like the launch's NHWC dX (n, hi, wi, c).
// This kernel sums the slices of each dX element in a fixed order -- slice 0, then + slice 1,
// + slice 2, ... in fp32 -- converts the sum once with the dgrad epilogue's rounding
// (dg_from_float, the same text as dgrad.cu's) and stores dX:
//
//   DR_NCHW 0: dX NHWC, elementwise; 4 channels per thread (16-byte loads) where C % 4 == 0.
//   DR_NCHW 1: dX NCHW (n, c, hi, wi), through a 32 x 32 shared-memory tile per block so that
//              the workspace is read along c and dX written along the pixels, both coalesced.
//
// Pixels no sub-GEMM writes (`cover` != 0: the rows and columns dg_axis_covered says no tilde
// phase reaches, e.g. odd rows of a 1x1 stride-2 problem) are stored as zeros without reading
// the workspace: the dgrad kernel never writes them there. No atomics: every run gives the
// same bits. One binary per dtype (DG_DTYPE) and dX layout; the sizes are arguments, all
// 64-bit (the runtimes pass every argument as 8 bytes). A launch's dX holds fewer than 2^31
// elements (the solver's split-N rule), so offsets inside a slice are 32-bit (no 64-bit
// division); slice offsets (z * slice) are 64-bit.
//
// Arguments: ws, dx, slice, split_k, n, hi, wi, c, cover, then per axis H and W the
// dg_axis_covered terms pad, stride, dilation, gcd(stride, dilation), tilde, filter size.

// The dgrad kernel's vendor layer (DG_GLOBAL, DG_DEVICE, DG_SYNC, DG_TID, DG_BID_*), for blocks
// of 256 threads, and the 2-D indices the NCHW tile needs.
#define DG_BLOCK_THREADS 256
// #include-block dgrad.cu vendor
#if defined(DG_VENDOR_AMD)
#define DR_TY() ((int)__builtin_amdgcn_workitem_id_y())
#define DR_NBX() ((long long)(__builtin_amdgcn_grid_size_x() / __builtin_amdgcn_workgroup_size_x()))
#define DR_NBY() ((long long)(__builtin_amdgcn_grid_size_y() / __builtin_amdgcn_workgroup_size_y()))
#else
#define DR_TY() ((int)threadIdx.y)
#define DR_NBX() ((long long)gridDim.x)
#define DR_NBY() ((long long)gridDim.y)
#endif
#define DR_BX() ((long long)DG_BID_X())
#define DR_BY() ((long long)DG_BID_Y())

static_assert(DR_NCHW == 0 || DR_NCHW == 1, "dX is stored NHWC (0) or NCHW (1)");
static_assert(DG_DTYPE >= 0 && DG_DTYPE <= 2, "dX is fp32 (0), fp16 (1) or bf16 (2)");

typedef unsigned short dg_u16;
typedef unsigned int dg_u32;
#if DG_DTYPE == 0
typedef float dg_t;
#else
typedef dg_u16 dg_t;
#endif

// #include-block dgrad.cu convert
// #include-block dgrad.cu axis_covered

// Where no sub-GEMM writes: the coverage test of the dgrad kernel's zero fill, per axis.
struct dr_cover {
    int on, ph, sh, dh, gh, th, fh, pw, sw, dw, gw, tw, fw;
};

DG_DEVICE bool dr_covered(const dr_cover& k, int hi, int wi) {
    return !k.on || (dg_axis_covered(hi, k.ph, k.sh, k.dh, k.gh, k.th, k.fh) &&
                     dg_axis_covered(wi, k.pw, k.sw, k.dw, k.gw, k.tw, k.fw));
}

// Sum of element e (an offset inside slice 0) over the split_k slices, slice 0 first.
DG_DEVICE float dr_sum(const float* ws, int e, long long slice, int split_k) {
    float s = ws[e];
    for (int z = 1; z < split_k; ++z) s += ws[e + z * slice];
    return s;
}

#define DR_ARGS                                                                                           \
    const float* __restrict__ ws, dg_t* __restrict__ dx, long long slice, long long split_ll, long long n_ll, \
        long long hi_ll, long long wi_ll, long long c_ll, long long cover, long long ph, long long sh,       \
        long long dh, long long gh, long long th, long long fh, long long pw, long long sw, long long dw,     \
        long long gw, long long tw, long long fw

#if DR_NCHW == 0
struct __attribute__((aligned(16))) dr_f32x4 { float v[4]; };
struct __attribute__((aligned(8))) dr_u32x2 { dg_u32 v[2]; };

DG_GLOBAL void DR_KERNEL_NAME(DR_ARGS) {
    DG_GRID_DEPENDENCY();
    const dr_cover k = {(int)cover, (int)ph, (int)sh, (int)dh, (int)gh, (int)th, (int)fh,
                        (int)pw, (int)sw, (int)dw, (int)gw, (int)tw, (int)fw};
    const int split_k = (int)split_ll, wi = (int)wi_ll, c = (int)c_ll, plane = (int)(hi_ll * wi_ll);
    const long long total = n_ll * plane * c_ll;  // < 2^31; the loop counters are 64-bit so
    const long long step = DR_NBX() * 256;        // that the last step past it cannot wrap
    if (c % 4 == 0) {  // 4 channels of one pixel per thread: 16-byte loads, 8- or 16-byte stores
        for (long long e64 = (DR_BX() * 256 + DG_TID()) * 4; e64 < total; e64 += 4 * step) {
            const int e = (int)e64;
            const int p = e / c % plane;
            dr_f32x4 s = {{0.0f, 0.0f, 0.0f, 0.0f}};
            if (dr_covered(k, p / wi, p % wi)) {
                s = *reinterpret_cast<const dr_f32x4*>(ws + e);
                for (int z = 1; z < split_k; ++z) {
                    const dr_f32x4 t = *reinterpret_cast<const dr_f32x4*>(ws + e + z * slice);
#pragma unroll
                    for (int q = 0; q < 4; ++q) s.v[q] += t.v[q];
                }
            }
#if DG_DTYPE == 0
            *reinterpret_cast<dr_f32x4*>(dx + e) = s;
#else
            dr_u32x2 o;
            o.v[0] = (dg_u32)dg_from_float(s.v[0]) | ((dg_u32)dg_from_float(s.v[1]) << 16);
            o.v[1] = (dg_u32)dg_from_float(s.v[2]) | ((dg_u32)dg_from_float(s.v[3]) << 16);
            *reinterpret_cast<dr_u32x2*>(dx + e) = o;
#endif
        }
        return;
    }
    for (long long e64 = DR_BX() * 256 + DG_TID(); e64 < total; e64 += step) {  // one element per thread
        const int e = (int)e64;
        const int p = e / c % plane;
        dx[e] = dg_from_float(dr_covered(k, p / wi, p % wi) ? dr_sum(ws, e, slice, split_k) : 0.0f);
    }
}
#else
#define DR_TILE 32

// Block (32, 8): tile (p0.., c0..) of image n's P x C matrix (P = hi*wi). Tiles run along grid x,
// images along grid y, both strided past the grid.
DG_GLOBAL void DR_KERNEL_NAME(DR_ARGS) {
    __shared__ float tile[DR_TILE][DR_TILE + 1];
    DG_GRID_DEPENDENCY();
    const dr_cover k = {(int)cover, (int)ph, (int)sh, (int)dh, (int)gh, (int)th, (int)fh,
                        (int)pw, (int)sw, (int)dw, (int)gw, (int)tw, (int)fw};
    const int split_k = (int)split_ll, wi = (int)wi_ll, c = (int)c_ll, n_img = (int)n_ll;
    const int plane = (int)(hi_ll * wi_ll);
    const int tiles_c = (c + DR_TILE - 1) / DR_TILE;
    const int tiles = (plane + DR_TILE - 1) / DR_TILE * tiles_c;
    const int tx = DG_TID(), ty = DR_TY();
    for (int n = (int)DR_BY(); n < n_img; n += (int)DR_NBY()) {
        const int img = n * plane * c;  // first element of image n, in dX and in a slice
        for (int t = (int)DR_BX(); t < tiles; t += (int)DR_NBX()) {
            const int p0 = t / tiles_c * DR_TILE, c0 = t % tiles_c * DR_TILE;
#pragma unroll
            for (int i = 0; i < DR_TILE; i += 8) {  // read: rows = pixels, lanes along c
                const int p = p0 + ty + i, ch = c0 + tx;
                float s = 0.0f;
                if (p < plane && ch < c && dr_covered(k, p / wi, p % wi))
                    s = dr_sum(ws, img + p * c + ch, slice, split_k);
                tile[ty + i][tx] = s;
            }
            DG_SYNC();
#pragma unroll
            for (int i = 0; i < DR_TILE; i += 8) {  // write: rows = channels, lanes along the pixels
                const int ch = c0 + ty + i, p = p0 + tx;
                if (p < plane && ch < c) dx[img + ch * plane + p] = dg_from_float(tile[tx][ty + i]);
            }
            DG_SYNC();  // the tile is refilled by the next iteration
        }
    }
}
#endif
