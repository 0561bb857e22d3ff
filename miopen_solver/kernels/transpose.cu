// Batched 2-D transpose: `batch` row-major matrices of rows x cols elements (src) become
// cols x rows (dst). The layout transforms around the NHWC kernel are all of this form
// (miopen_solver/transpose.py): dY NCHW (N, K, Ho*Wo) -> NHWC, W (K, cpg, Y*X) -> KYXC,
// dX NHWC (N, Hi*Wi, C) -> NCHW. Elements are moved as raw bits of DT_EB bytes.
//
// Two kernels, one per shape class (miopen_solver/transpose.py decides which, and its grid):
//
// DT_KERNEL_NAME, the tile form: a block moves one DT_TILE x DT_TILE tile through shared memory: global reads run along
// src's cols and global writes along dst's cols (src's rows), each a whole 128-byte line per
// warp row; pairs of 16-bit elements move as one 4-byte word where the whole tile is inside
// the matrix and the row length is even. Grid: x = tiles of one matrix, y = matrices
// (strided by gridDim.y past 65535). Offsets inside one matrix are 32-bit (rows*cols < 2^31,
// checked by the solver), the matrix base is 64-bit.
//
// DT_BAND_KERNEL_NAME, the band form, for matrices with few columns (a W of Y*X taps, dY of
// small images) or few elements: a block moves a contiguous run of src -- whole matrices where
// one matrix has at most DT_BAND_ELEMS elements (then dst's run is contiguous too), else a
// band of DT_BAND_ROWS(cols) rows of one matrix (dst gets runs of that many elements) -- read
// and written in 16-byte vectors where aligned. With the tile form, a matrix of 9 columns
// used 9 of every 64 lanes and 2-byte accesses.
//
// DT_PAIR_KERNEL_NAME runs two transforms, each in its own form, in one launch (the blocks of
// both grids, one after the other): dY's and W's before the kernel, one launch fewer.

#if defined(DG_VENDOR_AMD)
#ifndef __global__
#define __global__ __attribute__((global))
#endif
#ifndef __shared__
#define __shared__ __attribute__((shared))
#endif
#define DT_GLOBAL extern "C" __global__ __attribute__((amdgpu_flat_work_group_size(256, 256)))
#define DT_GLOBAL_BAND DT_GLOBAL
#ifndef __device__
#define __device__ __attribute__((device))
#endif
#define DT_DEVICE static __device__ inline __attribute__((always_inline))
#define DT_SYNC()                                                 \
    do {                                                          \
        __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");    \
        __builtin_amdgcn_s_barrier();                             \
        __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");    \
    } while (0)
#define DT_TX() ((int)__builtin_amdgcn_workitem_id_x())
#define DT_TY() ((int)__builtin_amdgcn_workitem_id_y())
#define DT_BX() ((long long)__builtin_amdgcn_workgroup_id_x())
#define DT_BY() ((long long)__builtin_amdgcn_workgroup_id_y())
#define DT_NBY() ((long long)(__builtin_amdgcn_grid_size_y() / __builtin_amdgcn_workgroup_size_y()))
#define DT_GRID_DEPENDENCY() do { } while (0)
#define DT_LAUNCH_DEPENDENTS() do { } while (0)
#else
#define DT_GLOBAL extern "C" __global__ __launch_bounds__(256)
// the band and pair entries: at least 4 blocks of 256 threads per SM, 64 registers a thread
// (without a minimum, ptxas 13.0 gave the band body 40 registers and spilled on sm_90)
#define DT_GLOBAL_BAND extern "C" __global__ __launch_bounds__(256, 4)
#define DT_DEVICE static __device__ __forceinline__
#define DT_SYNC() __syncthreads()
#define DT_TX() ((int)threadIdx.x)
#define DT_TY() ((int)threadIdx.y)
#define DT_BX() ((long long)blockIdx.x)
#define DT_BY() ((long long)blockIdx.y)
#define DT_NBY() ((long long)gridDim.y)
// Programmatic dependent launch (PTX ISA "griddepcontrol", sm_90+; runtime/gpu.py): a grid
// launched to overlap the stream's previous kernel waits in DT_GRID_DEPENDENCY(), before any
// global memory access, until that grid has completed and its writes are visible.
// DT_LAUNCH_DEPENDENTS() lets the stream's next grid begin launching at once: called by the
// kernels that prepare the main kernel's inputs (layout transforms, the W' pack), never by the
// main kernel, whose dependents' waiting blocks would share its SMs (bench/RESULTS.md,
// twentieth session). Without the launch attribute (or before sm_90) both do nothing.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define DT_GRID_DEPENDENCY() asm volatile("griddepcontrol.wait;" ::: "memory")
#define DT_LAUNCH_DEPENDENTS() asm volatile("griddepcontrol.launch_dependents;" ::: "memory")
#else
#define DT_GRID_DEPENDENCY() do { } while (0)
#define DT_LAUNCH_DEPENDENTS() do { } while (0)
#endif
#endif

#if DT_EB == 2
typedef unsigned short dt_t;
#define DT_VEC 2      // elements per 4-byte word
#elif DT_EB == 4
typedef unsigned int dt_t;
#define DT_VEC 1
#else
#error "DT_EB must be 2 or 4"
#endif
#define DT_TILE (32 * DT_VEC)      // 32 lanes x one word each = 128 bytes per tile row
#define DT_ROWS_PER_PASS 8         // blockDim = (32, 8)
#define DT_PAD 1                   // odd row pitch: column reads hit distinct banks

static_assert(DT_TILE % DT_ROWS_PER_PASS == 0, "a tile is whole passes of the block's rows");

typedef dt_t dt_tile_row[DT_TILE + DT_PAD];   // one row of the tile form's shared tile

// The tile form's work for block (bx, by) of a grid of nby matrices along y; `tile` is the
// block's shared tile.
DT_DEVICE void dt_tile_body(dt_tile_row* tile, const dt_t* __restrict__ src, dt_t* __restrict__ dst,
                            long long batch, long long rows_ll, long long cols_ll, int bx, long long by,
                            long long nby) {
    const int rows = (int)rows_ll, cols = (int)cols_ll;
    const int tiles_c = (cols + DT_TILE - 1) / DT_TILE;
    const int tr = bx / tiles_c, tc = bx - tr * tiles_c;
    const int r0 = tr * DT_TILE, c0 = tc * DT_TILE;
    const int tx = DT_TX(), ty = DT_TY();
    // Whole tile inside the matrix and even row lengths: 4-byte words (aligned: the matrix
    // base is a multiple of rows*cols elements, each row start a multiple of cols).
    const bool words_in = DT_VEC == 2 && r0 + DT_TILE <= rows && c0 + DT_TILE <= cols && (cols % 2) == 0;
    const bool words_out = DT_VEC == 2 && r0 + DT_TILE <= rows && c0 + DT_TILE <= cols && (rows % 2) == 0;
    for (long long b = by; b < batch; b += nby) {
        const dt_t* s = src + b * rows_ll * cols_ll;
        dt_t* d = dst + b * rows_ll * cols_ll;
#if DT_VEC == 2
        if (words_in) {
#pragma unroll
            for (int i = 0; i < DT_TILE / DT_ROWS_PER_PASS; ++i) {
                const int r = ty + i * DT_ROWS_PER_PASS;
                const unsigned int v = *reinterpret_cast<const unsigned int*>(s + (r0 + r) * cols + c0 + 2 * tx);
                tile[r][2 * tx] = (dt_t)(v & 0xffffu);
                tile[r][2 * tx + 1] = (dt_t)(v >> 16);
            }
        } else
#endif
        {
#pragma unroll 2
            for (int i = 0; i < DT_TILE / DT_ROWS_PER_PASS; ++i) {
                const int r = ty + i * DT_ROWS_PER_PASS;
                const int gr = r0 + r;
#pragma unroll
                for (int e = 0; e < DT_VEC; ++e) {
                    const int gc = c0 + DT_VEC * tx + e;
                    if (gr < rows && gc < cols) tile[r][DT_VEC * tx + e] = s[gr * cols + gc];
                }
            }
        }
        DT_SYNC();
#if DT_VEC == 2
        if (words_out) {
#pragma unroll
            for (int i = 0; i < DT_TILE / DT_ROWS_PER_PASS; ++i) {
                const int c = ty + i * DT_ROWS_PER_PASS;    // dst row = src col
                const unsigned int v = (unsigned int)tile[2 * tx][c] | ((unsigned int)tile[2 * tx + 1][c] << 16);
                *reinterpret_cast<unsigned int*>(d + (c0 + c) * rows + r0 + 2 * tx) = v;
            }
        } else
#endif
        {
#pragma unroll 2
            for (int i = 0; i < DT_TILE / DT_ROWS_PER_PASS; ++i) {
                const int c = ty + i * DT_ROWS_PER_PASS;
                const int gc = c0 + c;
#pragma unroll
                for (int e = 0; e < DT_VEC; ++e) {
                    const int gr = r0 + DT_VEC * tx + e;
                    if (gr < rows && gc < cols) d[gc * rows + gr] = tile[DT_VEC * tx + e][c];
                }
            }
        }
        DT_SYNC();      // the tile is reused by the next matrix
    }
}

DT_GLOBAL void DT_KERNEL_NAME(const dt_t* __restrict__ src, dt_t* __restrict__ dst, long long batch,
                              long long rows, long long cols) {
    __shared__ dt_tile_row tile[DT_TILE];
    DT_GRID_DEPENDENCY();
    DT_LAUNCH_DEPENDENTS();
    dt_tile_body(tile, src, dst, batch, rows, cols, (int)DT_BX(), DT_BY(), DT_NBY());
}

#define DT_BAND_BYTES 8192
#define DT_BAND_ELEMS (DT_BAND_BYTES / DT_EB)
#define DT_V16 (16 / DT_EB)         // elements per 16-byte vector

// Rows (of a band of rows; columns of a band of columns: the argument is the other side) of a
// band: as many as fit, a multiple of 8 (transpose.py's band_width is the same formula; the
// other side is at most DT_BAND_ELEMS / 8).
#define DT_BAND_ROWS(cols) ((DT_BAND_ELEMS / (cols)) & ~7)
typedef struct __attribute__((aligned(16))) { unsigned int w[4]; } dt_v16;   // one 16-byte access
typedef union { dt_v16 v; dt_t e[DT_V16]; } dt_pack;

// The band form's work for block (bx, by) of a grid of nby matrices along y (whole matrices:
// by = 0, nby = 1); `band` is the block's shared band, 16-byte aligned.
DT_DEVICE void dt_band_body(dt_t* band, const dt_t* __restrict__ src, dt_t* __restrict__ dst, long long batch,
                            long long rows_ll, long long cols_ll, int bx, long long by, long long nby) {
    const int rows = (int)rows_ll, cols = (int)cols_ll;
    const int per = rows * cols;     // elements of one matrix (< 2^31, checked by the solver)
    const int tid = DT_TY() * 32 + DT_TX();
    // 0: whole matrices, `mats` to a block (grid x = groups, y = 1); 1: bands of `bw` rows
    // (src runs contiguous); 2: bands of `bw` columns (dst runs contiguous), grid x = bands of
    // one matrix, y = matrices. transpose.py's LayoutTransform.grid mirrors this choice.
    const int mode = per <= DT_BAND_ELEMS ? 0 : (cols <= rows ? 1 : 2);
    const int mats = mode == 0 ? DT_BAND_ELEMS / per : 1;
    const int bw = mode == 1 ? DT_BAND_ROWS(cols) : (mode == 2 ? DT_BAND_ROWS(rows) : 0);
    const int o0 = bx * bw;                       // the band's first row (1) or column (2)
    const int extent = mode == 1 ? rows : cols;
    const int no = mode == 0 ? 0 : (extent - o0 < bw ? extent - o0 : bw);
    const long long b_first = mode == 0 ? (long long)bx * mats : by;
    const long long b_step = mode == 0 ? batch : nby;   // whole: one pass (grid x covers the batch)
    for (long long b0 = b_first; b0 < batch; b0 += b_step) {
        const int nm = mode == 0 ? (int)(batch - b0 < mats ? batch - b0 : mats) : 1;
        const int nr = mode == 0 ? rows : (mode == 1 ? no : rows);
        const int nc = mode == 2 ? no : cols;
        const int n = nm * nr * nc;                            // elements this block moves
        if (mode == 2) {
            // rows runs of nc elements from column o0: band[r*nc + c] = src[b0][r][o0 + c]
            const dt_t* s = src + b0 * rows_ll * cols_ll + o0;
            if (cols % DT_V16 == 0 && nc % DT_V16 == 0 && ((unsigned long long)s & 15) == 0) {
                const int h = nc / DT_V16;
                for (int i = tid; i < rows * h; i += 256) {
                    const int r = i / h, v = i - r * h;
                    reinterpret_cast<dt_v16*>(band)[i] = *reinterpret_cast<const dt_v16*>(s + (long long)r * cols + v * DT_V16);
                }
            } else {
                for (int j = tid; j < n; j += 256) {
                    const int r = j / nc, c = j - r * nc;
                    band[j] = s[(long long)r * cols + c];
                }
            }
        } else {
            // one contiguous run: nm whole matrices, or nr rows from row o0
            const dt_t* s = src + (b0 * rows_ll + o0) * cols_ll;
            if (((unsigned long long)s & 15) == 0 && n % DT_V16 == 0) {
                for (int i = tid; i < n / DT_V16; i += 256)
                    reinterpret_cast<dt_v16*>(band)[i] = reinterpret_cast<const dt_v16*>(s)[i];
            } else {
                for (int i = tid; i < n; i += 256) band[i] = s[i];
            }
        }
        DT_SYNC();
        if (mode == 1) {
            // dst row c of matrix b0 gets src rows o0 .. o0+nr of column c: nr contiguous elements
            dt_t* d = dst + b0 * rows_ll * cols_ll + o0;
            if (rows % DT_V16 == 0 && nr % DT_V16 == 0 && ((unsigned long long)d & 15) == 0) {
                const int h = nr / DT_V16;
                for (int i = tid; i < h * cols; i += 256) {
                    const int c = i / h, r = (i - c * h) * DT_V16;
                    dt_pack u;
#pragma unroll
                    for (int e = 0; e < DT_V16; ++e) u.e[e] = band[(r + e) * cols + c];
                    *reinterpret_cast<dt_v16*>(d + (long long)c * rows + r) = u.v;
                }
            } else {
                for (int j = tid; j < n; j += 256) {
                    const int c = j / nr, r = j - c * nr;
                    d[(long long)c * rows + r] = band[r * cols + c];
                }
            }
        } else {
            // dst's run is contiguous (whole matrices, or dst rows o0 .. o0+nc of matrix b0):
            // its element j = (m, c, r) is band[(m*rows + r)*nc + c]
            dt_t* d = dst + (b0 * cols_ll + (mode == 2 ? o0 : 0)) * rows_ll;
            const int q_per = nr * nc;
            if (((unsigned long long)d & 15) == 0 && n % DT_V16 == 0) {
                for (int i = tid; i < n / DT_V16; i += 256) {
                    const int j = i * DT_V16, m = j / q_per, q = j - m * q_per;
                    int c = q / rows, r = q - c * rows, at = (m * rows + r) * nc + c;   // (m, c, r) of element j
                    dt_pack u;
#pragma unroll
                    for (int e = 0; e < DT_V16; ++e) {      // the next element: r + 1, else c + 1, else m + 1
                        u.e[e] = band[at];
                        if (++r < rows) {
                            at += nc;
                        } else if (++c < nc) {
                            r = 0;
                            at = at - (rows - 1) * nc + 1;
                        } else {
                            r = 0;
                            c = 0;
                            at += 1;                        // (m*rows + rows-1)*nc + nc-1 + 1 = (m+1)*rows*nc
                        }
                    }
                    reinterpret_cast<dt_v16*>(d)[i] = u.v;
                }
            } else {
                for (int j = tid; j < n; j += 256) {
                    const int m = j / q_per, q = j - m * q_per, c = q / rows, r = q - c * rows;
                    d[j] = band[(m * rows + r) * nc + c];
                }
            }
        }
        DT_SYNC();      // the band is reused by the next matrix
    }
}

#ifdef DT_BAND_KERNEL_NAME
DT_GLOBAL_BAND void DT_BAND_KERNEL_NAME(const dt_t* __restrict__ src, dt_t* __restrict__ dst, long long batch,
                                        long long rows, long long cols) {
    __shared__ __attribute__((aligned(16))) dt_t band[DT_BAND_ELEMS];
    DT_GRID_DEPENDENCY();
    DT_LAUNCH_DEPENDENTS();
    dt_band_body(band, src, dst, batch, rows, cols, (int)DT_BX(), DT_BY(), DT_NBY());
}
#endif

#ifdef DT_PAIR_KERNEL_NAME
// Two transforms in one launch (dY's and W's before the kernel: one launch instead of two).
// Each job j is (src, dst, batch, rows, cols, gx, gy, form): the grid its own launch would
// have had, (gx, gy), flattened, and its form (0 tile, 1 band). The grid is (gx0*gy0 +
// gx1*gy1, 1, 1): block L < gx0*gy0 runs job 0's block (L % gx0, L / gx0), the rest job 1's.
// One shared buffer serves either form.
#define DT_TILE_BYTES (DT_TILE * (DT_TILE + DT_PAD) * DT_EB)
#define DT_PAIR_SMEM (DT_TILE_BYTES > DT_BAND_BYTES ? DT_TILE_BYTES : DT_BAND_BYTES)

DT_DEVICE void dt_pair_job(unsigned char* smem, const dt_t* __restrict__ src, dt_t* __restrict__ dst,
                           long long batch, long long rows, long long cols, long long gx, long long gy,
                           long long form, long long l) {
    const long long by = l / gx, bx = l - by * gx;
    if (form == 0)
        dt_tile_body(reinterpret_cast<dt_tile_row*>(smem), src, dst, batch, rows, cols, (int)bx, by, gy);
    else
        dt_band_body(reinterpret_cast<dt_t*>(smem), src, dst, batch, rows, cols, (int)bx, by, gy);
}

DT_GLOBAL_BAND void DT_PAIR_KERNEL_NAME(const dt_t* __restrict__ src0, dt_t* __restrict__ dst0, long long batch0,
                                        long long rows0, long long cols0, long long gx0, long long gy0, long long form0,
                                        const dt_t* __restrict__ src1, dt_t* __restrict__ dst1, long long batch1,
                                        long long rows1, long long cols1, long long gx1, long long gy1, long long form1) {
    __shared__ __attribute__((aligned(16))) unsigned char smem[DT_PAIR_SMEM];
    DT_GRID_DEPENDENCY();
    DT_LAUNCH_DEPENDENTS();
    const long long l = DT_BX(), n0 = gx0 * gy0;
    if (l < n0)
        dt_pair_job(smem, src0, dst0, batch0, rows0, cols0, gx0, gy0, form0, l);
    else
        dt_pair_job(smem, src1, dst1, batch1, rows1, cols1, gx1, gy1, form1, l - n0);
}
#endif
