// Implicit-GEMM backward-data convolution (dgrad), NHWC, one source for CUDA and HIP.
//
//   dX[n,hi,wi,g*cpg+c] = sum_{k,y,x} dY[n,ho,wo,g*kpg+k] * W[g*kpg+k,y,x,c]
//
// Decomposed into tilde sub-GEMMs (CK transform_conv_bwd_data_to_gemm_v1; see tilde.py):
// sub-GEMM s computes dX_s[GemmM, cpg] = dY_s[GemmM, GemmK] x W_s[GemmK, cpg] with
// GemmK = YDotSlice*XDotSlice*kpg: index (ydot, xdot, k), k innermost; when kpg is a
// multiple of TILE_K the K loop visits it channel-chunk outer, tap inner (DG_TAP_UNIFORM).
//
// One launch covers every sub-GEMM: grid = (tiles of all sub-GEMMs [+ zero-fill blocks],
// G, split_k). Each block finds its sub-GEMM in DG_SUB (a compile-time table; folded to
// constants when there is one sub-GEMM), loads A (dY, vectors along k) and B (W, vectors
// along c) tiles into shared memory through a DG_STAGES-deep pipeline, multiplies them on
// the matrix cores (mma.sync m16n8k16 / MFMA; on sm_90a with DG_WGMMA the warpgroup
// instruction wgmma.mma_async m64nNk16 straight from 128-byte-swizzled shared memory, one
// group kept in flight) or on FMA (fp32), and writes dX through a shared-memory staged
// epilogue in DG_VEC_C-wide stores (split_k == 1), or accumulates atomically from the
// registers when split_k > 1 (dX is zeroed before such a launch). With DG_PERSIST the grid
// holds DG_TILE_BLOCKS persistent blocks that walk the tiles and load the next tile during
// the current tile's epilogue.
//
// Every problem and config value arrives as a DG_* define from kernels/emit.py. No vendor
// header is included: the vendor pieces sit in the "vendor layer" section below.

// ------------------------------------------------------------------ schedule guards
// The Python rules of each kernel schedule (miopen_solver/spec.py SCHEDULE_RULES, tma.py),
// mirrored so that a define set the rules would refuse fails to compile instead of
// running wrong.
static_assert(DG_TILE_M % DG_WARP_M == 0 && DG_TILE_N % DG_WARP_N == 0, "warp grid must tile the block tile");
static_assert(DG_SPLIT_K >= 1 && DG_SPLIT_K <= 64, "split_k is resolved to 1..64 before emission");
// #section !skws
static_assert(DG_SPLIT_K == 1 || DG_DTYPE == 0 || DG_CPG % 2 == 0, "16-bit split-K adds packed pairs: cpg must be even");
// #end !skws
// #section skws
// Split-K through the fp32 workspace (miopen_solver/splitk.py; spec.split_k_reduce_mode): split z
// (grid z; on the TMA schedule the work units' z) stores its fp32 partial sums with plain stores into slice z of the workspace (the
// third kernel argument), DG_WS_SLICE floats after slice z-1, laid out like the launch's NHWC
// dX (the split-K epilogue's skws section stores them instead of adding into dX); a reduction
// kernel (kernels/splitk_reduce.cu) then sums the slices in order and stores dX, and zeros
// where no sub-GEMM writes (those pixels are never written here nor read there). No atomics,
// no dX memset.
static_assert(DG_SPLIT_K > 1 && !DG_PERSIST,
              "the workspace reduction serves split-K launches of the warp-MMA, plain wgmma and TMA schedules");
static_assert(DG_ZF_BLOCKS == 0, "the reduction kernel stores the zeros of pixels no sub-GEMM writes");
static_assert(DG_WS_SLICE % 64 == 0 && DG_WS_SLICE >= (long long)DG_N * DG_HI * DG_WI * DG_C,
              "a workspace slice holds the launch's dX in fp32, 256-byte aligned");
static_assert(DG_VEC_C == 1 || (DG_VEC_C == 2 && DG_CPG % 2 == 0), "fp32 pairs of adjacent columns need an even cpg");
#ifdef DG_DX_NCHW
#error "with the workspace reduction the kernel stores NHWC partial sums; the reduction kernel stores an NCHW dX"
#endif
// #end skws
// #section !st8
static_assert(DG_STAGES >= 1 && DG_STAGES <= 6, "stages 1..6");
// #end !st8
// #section st8
static_assert(DG_TMA && DG_STAGES >= 7 && DG_STAGES <= 8,
              "stages 7..8: the TMA schedule only (mbarrier stages, no cp.async group waits)");
// #end st8
#if DG_WGMMA
// #section !wgtf32|wgk32
static_assert(DG_TILE_K % 64 == 0, "warpgroup schedules read 128-byte swizzled rows: tile_k % 64 == 0");
// #end !wgtf32|wgk32
// #section wgk32
static_assert(DG_TILE_K == 32 && DG_DTYPE != 0 && !DG_TMA,
              "a 32-wide k-tile of 16-bit elements is one 64-byte swizzled row (cp.async loaders only)");
// #end wgk32
// #section !wgn32|wgb32|wgn192
static_assert(DG_WG_N == 64 || DG_WG_N == 128 || DG_WG_N == 256, "wgmma N is 64, 128 or 256");
// #end !wgn32|wgb32|wgn192
// #section wgb32
static_assert(DG_WG_N % 64 == 32 && DG_WG_N >= 96 && DG_DTYPE != 0 && DG_TILE_K % 64 == 0,
              "wgmma N 96, 160 or 224: 16-bit W in 64-byte swizzled rows of 32 columns (3, 5 or 7 blocks "
              "per warpgroup)");
// #end wgb32
// #section wgn192
static_assert(DG_WG_N == 192 && DG_DTYPE != 0 && DG_TILE_K % 64 == 0,
              "wgmma N 192: 16-bit W in 128-byte swizzled rows of 64 columns (3 blocks per warpgroup)");
// #end wgn192
// #section wgn32
static_assert(DG_WG_N == 32 && DG_DTYPE != 0 && !DG_TMA,
              "wgmma N 32: a k row of the 16-bit W tile is one 64-byte swizzled row (cp.async loaders only)");
// #end wgn32
static_assert(DG_TILE_N == DG_WARP_N * DG_WG_N, "one wgmma instruction spans a warpgroup's columns");
// #section !wgtf32
static_assert(DG_K_OUTER == 1, "warpgroup schedules read W k-outer");
// #end !wgtf32
#endif
// #section !tmask
#if DG_PERSIST || DG_TMA
static_assert(DG_SPLIT_K == 1 && DG_STAGES >= 2, "persistent schedules store each tile once and prefetch");
#endif
// #end !tmask
// #section tmask
// Split-K on the TMA schedule (spec.SPLIT_PERSISTENT): the persistent blocks walk DG_TILES x
// DG_SPLIT_K work units u = z*DG_TILES + t, k-slice z of tile t (k-tiles [z*kt/S, (z+1)*kt/S)
// of its kt, never empty: split_k <= the shortest sub-GEMM's k-tiles); the split epilogue
// adds the slice's partial sums into dX (packed atomics, dX zeroed first) or stores them
// into workspace slice z (skws). Grid z is 1.
static_assert(DG_TMA && !DG_PERSIST && DG_SPLIT_K > 1 && DG_STAGES >= 2,
              "split-K work units are a TMA-schedule feature");
static_assert(DG_SPLIT_K <= DG_MIN_KTILES,
              "every work unit has a k-tile (an empty one would release a stage it never took)");
// #end tmask
// #section tmsk
// Stream-K on the TMA schedule (spec.split_k_reduce "stream"): the DG_TILES x DG_SK_KT
// k-tiles of the launch, tile-major, are cut into DG_TILE_BLOCKS equal runs, one per
// persistent block (run b = [b*I/B, (b+1)*I/B), I = DG_SK_ITERS, never empty). A block's
// runs of k-tiles form segments of at most two partial tiles (its first and last) and whole
// tiles between. The block that computes a tile's first k-tile owns it: it adds the partial
// sums of the later blocks whose runs start inside the tile (in block order, each waiting on
// that block's flag) and stores dX. A block whose run starts inside a tile stores that first
// segment's fp32 partial sums in its workspace slot and raises its flag; it never waits
// before that, so the waits form no cycle. Every block must be resident at once (the grid
// is at most the blocks that fit: spec.tile_blocks). Workspace (the fourth argument):
// DG_SK_FLAGS words of flags (zeroed before each launch), then DG_TILE_BLOCKS slots of
// DG_SK_SLOT floats.
static_assert(DG_TMA && !DG_PERSIST && DG_SPLIT_K == 1 && DG_STAGES >= 2 && DG_G == 1,
              "stream-K is the TMA schedule's, unsplit, one group");
static_assert(DG_SK_ITERS == (long long)DG_TILES * DG_SK_KT && DG_TILE_BLOCKS <= DG_SK_ITERS,
              "every block's run of k-tiles is non-empty");
// #end tmsk
#if DG_TMA
static_assert(DG_WGMMA && DG_TILE_K == 64 && DG_TILE_M <= 256, "TMA boxes: 64-wide k rows, at most 256 rows");
static_assert(DG_K % 8 == 0 && DG_CPG % 8 == 0, "TMA tensor strides are multiples of 16 bytes");
static_assert(DG_G == 1 || DG_KPG % 64 == 0, "a TMA box must not cross groups");
#endif
// #section patch
// The patch GEMM (miopen_solver/patch.py, stride = filter, no padding): the DG_* problem
// defines describe the virtual pointwise problem whose GEMM it is (dX' of N x Ho x Wo pixels
// of Y*X*cpg channels per group); DG_PATCH_* the real dX its epilogue scatters into.
static_assert(DG_POINTWISE && DG_SPLIT_K == 1 && DG_ZF_BLOCKS == 0,
              "the patch GEMM is the pointwise GEMM, each dX element written once");
static_assert(DG_PATCH_Y * DG_PATCH_X > 1 && DG_CPG == DG_PATCH_Y * DG_PATCH_X * DG_PATCH_CPG,
              "one GEMM column per (y, x, c) of a patch larger than 1x1");
static_assert(DG_HI == DG_HO && DG_WI == DG_WO && DG_PATCH_HI / DG_PATCH_Y == DG_HO &&
              DG_PATCH_WI / DG_PATCH_X == DG_WO, "stride = filter, no padding: Ho = Hi / Y, Wo = Wi / X");
static_assert(DG_G == 1 ? ((DG_PATCH_X * DG_PATCH_CPG) % DG_VEC_C == 0 && (DG_PATCH_WI * DG_PATCH_C) % DG_VEC_C == 0)
                        : DG_PATCH_CPG % DG_VEC_C == 0,
              "a dX vector store stays inside one contiguous, aligned run of a patch row");
// #end patch
// #section subpix
// The sub-pixel GEMM (miopen_solver/subpixel.py, a strided problem's phases as channels): the
// DG_* problem defines describe the virtual stride-1, pad-0 problem over dY (dX' of Hi' x Wi'
// pixels of SH*SW*cpg channels per group, W' packed by subpixel_pack.cu); DG_SP_* the real dX
// its epilogue scatters into: virtual pixel (a', b'), column (ry*SW + rx)*cpg + c is real
// pixel (SH*(a' - TOP) + ry, SW*(b' - LEFT) + rx), stored where it lies inside dX.
static_assert(DG_SPLIT_K == 1 && DG_ZF_BLOCKS == 0 && DG_SH == 1 && DG_SW == 1 && DG_PH == 0 && DG_PW == 0 &&
              DG_DH == 1 && DG_DW == 1, "the sub-pixel GEMM is a stride-1, pad-0 GEMM, each dX element written once");
static_assert(DG_CPG == DG_SP_SH * DG_SP_SW * DG_SP_CPG && DG_SP_SH * DG_SP_SW > 1,
              "one GEMM column per (phase row, phase column, channel)");
static_assert(DG_SP_CPG % DG_VEC_C == 0, "a dX vector store stays inside one phase's channels");
// #end subpix
// #section group_pack
// Group packing (miopen_solver/group_pack.py): the DG_* problem defines describe the virtual
// problem whose groups are DG_CPG / DG_PACK_CPG real groups each; W is the real one (rows of
// DG_PACK_CPG channels) and the B loaders read the block-diagonal W' of the virtual problem,
// zero where a GemmK row's real group is not the column's.
static_assert(DG_CPG % DG_PACK_CPG == 0 && DG_KPG % DG_PACK_KPG == 0 &&
              DG_CPG / DG_PACK_CPG == DG_KPG / DG_PACK_KPG && DG_CPG / DG_PACK_CPG >= 2,
              "a packed group is P >= 2 real groups of cpg and kpg channels");
static_assert(DG_PACK_CPG % DG_VEC_B == 0, "a W vector stays inside one real group");
static_assert(!DG_TMA && DG_SPLIT_K == 1, "W is masked in the cp.async loaders; each dX element written once");
// #end group_pack
// #section nchw_dx
// dX stored NCHW by the epilogues (miopen_solver/transpose.py nchw_dx_rule): the staged
// epilogue of the warp-MMA, wgmma and persistent wgmma schedules (runs of DG_NCHW_VEC
// pixels of one channel) and split-K's atomic one (one element at a time); element
// (pixel, channel) goes to dx[((n*C + g*cpg + c)*Hi + hi)*Wi + wi].
static_assert(DG_DX_NCHW == 1, "the nchw_dx section goes with DG_DX_NCHW");
static_assert(DG_VEC_C == 1 && DG_VEC_Z == 1, "an NCHW dX has no channel vectors: its stores run along the pixels");
static_assert(DG_SPLIT_K == 1 || DG_DTYPE == 0 || (DG_HI * DG_WI) % 2 == 0,
              "16-bit split-K adds each element as half of an aligned pair: Hi*Wi must be even");
#ifdef DG_PATCH_Y
#error "the patch GEMM scatters dX NHWC"
#endif
// #end nchw_dx
// #section nchw_pw
// NCHW pointwise (miopen_solver/nchw_pw.py, 1x1 stride 1, dY and dX NCHW): the DG_* problem
// defines describe one (image, group) GEMM W_g^T [cpg, kpg] x dY[n, g] [kpg, H*W] as the
// pointwise GEMM of cpg pixels (DG_WI) with H*W channels (DG_CPG); DG_NCHW_* the launch's
// real problem, whose N*G GEMMs grid y enumerates (with DG_PERSIST the DG_TILE_BLOCKS blocks of
// a grid row walk the tiles of its GEMM).
static_assert(DG_POINTWISE && DG_SPLIT_K == 1 && !DG_TMA && DG_ZF_BLOCKS == 0,
              "the NCHW pointwise GEMM is the pointwise GEMM with the staged epilogue, each dX element written once");
static_assert(DG_N == 1 && DG_HI == 1 && DG_G == 1 && DG_NCHW_G * DG_KPG == DG_NCHW_K &&
              DG_NCHW_G * DG_WI == DG_NCHW_C, "one (image, group) GEMM: cpg rows of W^T, kpg deep, H*W columns");
static_assert(DG_CPG % DG_VEC_B == 0 && DG_CPG % DG_VEC_C == 0 && DG_KPG % DG_VEC_A == 0,
              "vectors along the pixels divide H*W (aligned at every image and group); along k, kpg");
static_assert(DG_NCHW_N * DG_NCHW_G <= 65535, "grid y holds one block row per (image, group)");
// #end nchw_pw
// #section nchw_patch
// NCHW patch (miopen_solver/nchw_pw.py, stride = filter Y x X, no padding, W KCYX): row m of
// the GEMM is (c, y, x) of W^T with x innermost, column p = (ho, wo) a dY pixel; element
// (m, p) is dX[n, g*cpg + c, ho*Y + y, wo*X + x], so DG_NCHW_PV consecutive rows (x .. x+PV-1
// of one patch row) are PV consecutive dX elements, stored as one vector. DG_NCHW_C counts
// the rows of every group (C*Y*X), so the nchw_pw section's offsets are the patch ones too:
// image n's dX starts n*C*Y*X*Ho*Wo = n*C*Hi*Wi elements in.
static_assert(DG_NCHW_PY * DG_NCHW_PX > 1 && DG_NCHW_WO * DG_NCHW_PX == DG_NCHW_WI && DG_CPG % DG_NCHW_WO == 0 &&
              DG_CPG / DG_NCHW_WO * DG_NCHW_PY == DG_NCHW_HI, "patches tile dX exactly: Hi = Ho*Y, Wi = Wo*X");
static_assert(DG_NCHW_PX % DG_NCHW_PV == 0 && DG_TILE_M % DG_NCHW_PV == 0,
              "a dX vector is PV rows of one patch row, aligned in the tile");
// #end nchw_patch
// #section nchw_tma
// NCHW on the TMA schedule (miopen_solver/nchw_tma.py: stride 1, dY and dX NCHW): per image n
// and group g, dX[n, g] (cpg x Hi*Wi) = sum over taps (y, x) of W_yx^T (cpg x kpg) x the
// (kpg x Hi*Wi) window of dY[n, g] at rows hi + ph - y*dh, columns wi + pw - x*dw: the TMA
// main loop with the operands' roles swapped. The DG_* problem defines describe the virtual
// pointwise GEMM whose tiles the persistent blocks walk (DG_WI = N*DG_NT_MT*TILE_M rows, the
// channel tiles of every image; DG_CPG = DG_NT_PTH*DG_NT_PTW*TILE_N columns, its pixel tiles);
// DG_NT_* the real problem. A (tm_w) is W^T in the workspace: a box of 64 k x TILE_M channels
// of one tap. B (tm_dy) is dY as it lies: per tile row one box of 64 columns x 64 k of one dY
// row, placed at the tap's offset, so TMA's zero fill is the padding. A tile is DG_NT_BH dX
// rows x 64 columns (columns past Wi and rows past Hi are computed and not stored).
static_assert(DG_TMA && DG_POINTWISE && DG_SPLIT_K == 1 && DG_ZF_BLOCKS == 0 && DG_N == 1 && DG_HI == 1,
              "the NCHW TMA GEMM is the pointwise TMA GEMM, each dX element written once");
static_assert(DG_TILE_N == 64 * DG_NT_BH && DG_WG_N % 64 == 0, "a tile row is one 64-wide block of B");
static_assert(DG_NT_WI % 8 == 0 && DG_NT_WO % 8 == 0 && DG_NT_KPG % 8 == 0,
              "16-byte dY and W^T rows, 16-byte runs of dX pixels");
static_assert(DG_WI == DG_NT_N * DG_NT_MT * DG_TILE_M && DG_CPG == DG_NT_PTH * DG_NT_PTW * DG_TILE_N &&
              DG_KPG == DG_NT_KPG && DG_G == DG_NT_G, "the virtual GEMM's tiles are the real problem's");
#ifdef DG_DX_NCHW
#error "the NCHW TMA epilogue stores NCHW dX itself"
#endif
// #end nchw_tma
// #section ntshift
// Column shifts that are not multiples of 8 (miopen_solver/nchw_tma.py shift_loads): a tensor
// copy's first column must be 16-byte aligned, so B cannot be copied straight into place. A
// tensor copy brings each window row's dY columns from the aligned column below it into a
// staging buffer (its own barrier, "staged"); DG_NT_PRODUCERS producer threads (a warpgroup)
// shift them by the tap's column residue (0..7 elements) in registers and store the swizzled
// B rows. Shared memory: the A and B stages, then DG_STAGES staging buffers of DG_NT_S_STAGE
// elements, then the full, empty and staged barriers. The full barrier of a stage counts one
// arrival with A's bytes and one per producer thread after its stores and the async-proxy fence.
static_assert(DG_NT_PRODUCERS == 128, "one producer warpgroup");
static_assert(DG_NT_SW == 72 && DG_NT_S_STAGE == 64 * DG_NT_SW * DG_NT_BH,
              "a staging row is the 64 window columns and the 8 below them, 144 bytes (16-byte chunks)");
static_assert((DG_NT_BH * 512) % DG_NT_PRODUCERS == 0, "the shift's units are whole passes of the producers");
// #end ntshift

// ------------------------------------------------------------------ vendor layer
// Threads per block: the DG_THREADS that load and multiply, plus with DG_TMA one producer
// warp that only issues tensor-memory copies.
#if defined(DG_TMA) && DG_TMA
// #section !ntshift|pwg
#define DG_BLOCK_THREADS (DG_THREADS + 32)
// #end !ntshift|pwg
// #section pwg
// Beside two consumer warpgroups the producer is a whole warpgroup instead (one thread issues
// the copies), so that setmaxnreg can move registers from it to the consumers.
#define DG_BLOCK_THREADS (DG_THREADS + 128)
// #end pwg
// #section ntshift
#define DG_BLOCK_THREADS (DG_THREADS + DG_NT_PRODUCERS)  // the NCHW TMA schedule's shifting producer warpgroup
// #end ntshift
#else
#define DG_BLOCK_THREADS DG_THREADS
#endif
// #block vendor
#if defined(DG_VENDOR_AMD)
// hiprtc predefines these; a plain `clang -x hip -nogpuinc` does not.
#ifndef __global__
#define __global__ __attribute__((global))
#endif
#ifndef __device__
#define __device__ __attribute__((device))
#endif
#ifndef __shared__
#define __shared__ __attribute__((shared))
#endif
#ifndef __constant__
#define __constant__ __attribute__((constant))
#endif
#define DG_GLOBAL extern "C" __global__ __attribute__((amdgpu_flat_work_group_size(DG_BLOCK_THREADS, DG_BLOCK_THREADS)))
#define DG_DEVICE __device__ inline __attribute__((always_inline))
#define DG_SHARED __shared__
#define DG_SYNC()                                                 \
    do {                                                          \
        __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");    \
        __builtin_amdgcn_s_barrier();                             \
        __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");    \
    } while (0)
#define DG_TID() ((int)__builtin_amdgcn_workitem_id_x())
#define DG_BID_X() ((int)__builtin_amdgcn_workgroup_id_x())
#define DG_BID_Y() ((int)__builtin_amdgcn_workgroup_id_y())
#define DG_BID_Z() ((int)__builtin_amdgcn_workgroup_id_z())
#define DG_GRID_DEPENDENCY() do { } while (0)
#define DG_LAUNCH_DEPENDENTS() do { } while (0)
#else
#define DG_GLOBAL extern "C" __global__ __launch_bounds__(DG_BLOCK_THREADS)
#define DG_DEVICE __device__ __forceinline__
#define DG_SHARED __shared__
#define DG_SYNC() __syncthreads()
#define DG_TID() ((int)threadIdx.x)
#define DG_BID_X() ((int)blockIdx.x)
#define DG_BID_Y() ((int)blockIdx.y)
#define DG_BID_Z() ((int)blockIdx.z)
// Programmatic dependent launch (PTX ISA "griddepcontrol", sm_90+; runtime/gpu.py): a grid
// launched to overlap the stream's previous kernel waits in DG_GRID_DEPENDENCY(), before any
// global memory access, until that grid has completed and its writes are visible.
// DG_LAUNCH_DEPENDENTS() lets the stream's next grid begin launching at once: called by the
// kernels that prepare the main kernel's inputs (layout transforms, the W' pack), never by the
// main kernel, whose dependents' waiting blocks would share its SMs (bench/RESULTS.md,
// twentieth session). Without the launch attribute (or before sm_90) both do nothing.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define DG_GRID_DEPENDENCY() asm volatile("griddepcontrol.wait;" ::: "memory")
#define DG_LAUNCH_DEPENDENTS() asm volatile("griddepcontrol.launch_dependents;" ::: "memory")
#else
#define DG_GRID_DEPENDENCY() do { } while (0)
#define DG_LAUNCH_DEPENDENTS() do { } while (0)
#endif
#endif
// #end block vendor

typedef unsigned short dg_u16;
typedef unsigned int dg_u32;

// Storage element: raw bits for 16-bit types (moved, never computed on, until the epilogue).
#if DG_DTYPE == 0
typedef float dg_t;
#define DG_EB 4
#else
typedef dg_u16 dg_t;
#define DG_EB 2
#endif

// Raw copies of 2/4/8/16 bytes.
struct __attribute__((aligned(8))) dg_b8 { dg_u32 v[2]; };
struct __attribute__((aligned(16))) dg_b16 { dg_u32 v[4]; };
template <int BYTES> struct dg_bytes;
template <> struct dg_bytes<2> { typedef dg_u16 type; };
template <> struct dg_bytes<4> { typedef dg_u32 type; };
template <> struct dg_bytes<8> { typedef dg_b8 type; };
template <> struct dg_bytes<16> { typedef dg_b16 type; };

// 16- and 8-byte global stores (p aligned to the width). nvcc lowers an assignment of a
// dg_b16/dg_b8 to 4-byte stores wherever it cannot follow the address's alignment (the patch
// epilogues' offsets), so NVIDIA names the width in PTX.
DG_DEVICE void dg_store16(void* p, const dg_b16& v) {
#if defined(DG_VENDOR_AMD)
    *reinterpret_cast<dg_b16*>(p) = v;
#else
    asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.v[0]), "r"(v.v[1]), "r"(v.v[2]),
                 "r"(v.v[3]) : "memory");
#endif
}
DG_DEVICE void dg_store8(void* p, const dg_b8& v) {
#if defined(DG_VENDOR_AMD)
    *reinterpret_cast<dg_b8*>(p) = v;
#else
    asm volatile("st.global.v2.b32 [%0], {%1, %2};" ::"l"(p), "r"(v.v[0]), "r"(v.v[1]) : "memory");
#endif
}

template <int BYTES>
DG_DEVICE typename dg_bytes<BYTES>::type dg_zero_bytes() {
    typename dg_bytes<BYTES>::type z;
    unsigned char* p = reinterpret_cast<unsigned char*>(&z);
#pragma unroll
    for (int i = 0; i < BYTES; ++i) p[i] = 0;
    return z;
}

// #block convert
// fp32 -> storage conversion (round to nearest even). NVIDIA has the instruction for both
// 16-bit types (cvt.rn.bf16.f32 from sm_80); AMD rounds bf16 in integer arithmetic.
#if defined(DG_VENDOR_AMD)
DG_DEVICE dg_u16 dg_f2bf(float f) {
    union { float f; dg_u32 u; } cvt;
    cvt.f = f;
    dg_u32 u = cvt.u;
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) return (dg_u16)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (dg_u16)(u >> 16);
}
DG_DEVICE dg_u16 dg_f2h(float f) {
    union { _Float16 h; dg_u16 u; } cvt;
    cvt.h = (_Float16)f;
    return cvt.u;
}
#else
DG_DEVICE dg_u16 dg_f2bf(float f) {
    dg_u16 h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}
DG_DEVICE dg_u16 dg_f2h(float f) {
    dg_u16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}
#endif
DG_DEVICE dg_t dg_from_float(float f) {
#if DG_DTYPE == 0
    return f;
#elif DG_DTYPE == 1
    return dg_f2h(f);
#else
    return dg_f2bf(f);
#endif
}
// #end block convert

// Atomic accumulation for split-K (fp32: scalar; fp16/bf16: packed pair, 4-byte aligned).
DG_DEVICE void dg_atomic_add1(float* p, float v) {
#if defined(DG_VENDOR_AMD)
    __hip_atomic_fetch_add(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
#else
    asm volatile("red.global.add.f32 [%0], %1;" ::"l"(p), "f"(v) : "memory");
#endif
}
DG_DEVICE void dg_atomic_add2(dg_u16* p, float lo, float hi) {
#if DG_DTYPE == 1
#if defined(DG_VENDOR_AMD)
    typedef _Float16 h2 __attribute__((ext_vector_type(2)));
    h2 v = {(_Float16)lo, (_Float16)hi};
    __builtin_amdgcn_global_atomic_fadd_v2f16((h2 __attribute__((address_space(1)))*)p, v);
#else
    dg_u32 v = (dg_u32)dg_f2h(lo) | ((dg_u32)dg_f2h(hi) << 16);
    asm volatile("red.global.add.noftz.f16x2 [%0], %1;" ::"l"(p), "r"(v) : "memory");
#endif
#elif DG_DTYPE == 2
#if defined(DG_VENDOR_AMD)
    typedef short s2 __attribute__((ext_vector_type(2)));
    s2 v = {(short)dg_f2bf(lo), (short)dg_f2bf(hi)};
    __builtin_amdgcn_global_atomic_fadd_v2bf16((s2 __attribute__((address_space(1)))*)p, v);
#else
    dg_u32 v = (dg_u32)dg_f2bf(lo) | ((dg_u32)dg_f2bf(hi) << 16);
    asm volatile("red.global.add.noftz.bf16x2 [%0], %1;" ::"l"(p), "r"(v) : "memory");
#endif
#else
    (void)p; (void)lo; (void)hi;
#endif
}

// Global -> shared copies. With DG_ASYNC (sm_80+ cp.async) the copy is asynchronous and
// zero-fills when !valid; otherwise the caller goes through registers.
#if !defined(DG_VENDOR_AMD)
DG_DEVICE dg_u32 dg_smem_addr(const void* p) {
    dg_u32 r;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p));
    return r;
}
#endif
#if defined(DG_ASYNC) && DG_ASYNC
template <int BYTES, bool L1 = false>
DG_DEVICE void dg_cp_async(dg_u32 s, const void* gmem, bool valid) {
    int src_bytes = valid ? BYTES : 0;
    if (BYTES == 16 && !L1) {
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s), "l"(gmem), "r"(src_bytes));
    } else {
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;" ::"r"(s), "l"(gmem), "n"(BYTES), "r"(src_bytes));
    }
}
DG_DEVICE void dg_cp_commit() { asm volatile("cp.async.commit_group;"); }
template <int N>
DG_DEVICE void dg_cp_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N)); }
#else
DG_DEVICE void dg_cp_commit() {}
template <int N>
DG_DEVICE void dg_cp_wait() {}
#endif

// Shared-memory writes by ordinary stores and cp.async become visible to wgmma (which
// reads through the async proxy) only after this fence by the writing thread, before the
// barrier that publishes them (PTX ISA, "Async proxy").
#if DG_WGMMA
DG_DEVICE void dg_publish_smem() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
#else
DG_DEVICE void dg_publish_smem() {}
#endif
// #section wgtf32
// wgmma TF32 (.tf32 operands read from shared memory as fp32 bit patterns): the loaders
// stage both tiles through registers and round each element to TF32 there (to nearest, ties
// away from zero, as cvt.rna and the mma.sync TF32 atom do; miopen_solver.tf32.round_tf32 on
// the host), so the instruction sees TF32 values whatever bits it ignores.
DG_DEVICE float dg_round_tf32(float f) {
    dg_u32 r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(f));
    return __uint_as_float(r);
}
// #end wgtf32

#if DG_TMA
// Tensor-memory copies (sm_90a cp.async.bulk.tensor) completing on shared-memory barriers
// (mbarrier): a tile of A or B lands in one instruction, already in the 128-byte swizzled
// layout wgmma reads (the tensor map's swizzle mode), zero-filled outside the tensor. The
// map itself (CUtensorMap, 128 opaque bytes) is a __grid_constant__ kernel parameter built
// by the host runtime (runtime/cuda.py). PTX ISA: "Tensor copy", "mbarrier".
struct __attribute__((aligned(64))) dg_tmap { unsigned long long opaque[16]; };

DG_DEVICE void dg_mbar_init(dg_u32 bar, dg_u32 count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
// Wait until the barrier's phase of the given parity has completed.
DG_DEVICE void dg_mbar_wait(dg_u32 bar, dg_u32 parity) {
    dg_u32 done;
    do {
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    } while (!done);
}
DG_DEVICE void dg_mbar_arrive(dg_u32 bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
// Arrive and announce `bytes` of copies that will complete on this barrier's phase.
DG_DEVICE void dg_mbar_expect_tx(dg_u32 bar, dg_u32 bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
// The box of `map` at element coordinates (c0 innermost, c1, ...) into shared memory at
// `dst`; coordinates may be negative or past the end (those elements read as zero).
DG_DEVICE void dg_tma_load_2d(dg_u32 dst, const dg_tmap* map, int c0, int c1, dg_u32 bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                 ::"r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(bar)
                 : "memory");
}
DG_DEVICE void dg_tma_load_3d(dg_u32 dst, const dg_tmap* map, int c0, int c1, int c2, dg_u32 bar) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];"
                 ::"r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
                 : "memory");
}
DG_DEVICE void dg_tma_load_4d(dg_u32 dst, const dg_tmap* map, int c0, int c1, int c2, int c3, dg_u32 bar) {
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], [%6];"
                 ::"r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3),
                 "r"(bar)
                 : "memory");
}

#endif

// ------------------------------------------------------------------ sub-GEMM records
struct dg_sub {
    int block_start, n_tiles, gemm_m, gemm_k, h_slice, w_slice, x_dot_slice;
    int dy_h_coeff, dy_w_coeff, y_stride, y_offset, x_stride, x_offset;
    int h_begin, w_begin, dx_h_stride, dx_h_offset, dx_w_stride, dx_w_offset;
};

#if DG_NSUB == 1
DG_DEVICE dg_sub dg_find_sub(int) {
    dg_sub s = {DG_SUB0};
    return s;
}
#else
__constant__ int dg_sub_table[DG_NSUB][19] = {DG_SUB_TABLE};
DG_DEVICE dg_sub dg_find_sub(int bid) {
    int idx = 0;
#pragma unroll
    for (int i = 1; i < DG_NSUB; ++i) idx += (bid >= dg_sub_table[i][0]) ? 1 : 0;
    const int* r = dg_sub_table[idx];
    dg_sub s = {r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9],
                r[10], r[11], r[12], r[13], r[14], r[15], r[16], r[17], r[18]};
    return s;
}
#endif

#if DG_TMA
// Output tiles of the TMA kernel, numbered sub-GEMM by sub-GEMM (block_start), column tile
// fastest. Pointwise (DG_TMA_RECT 0): TILE_M consecutive rows of the GemmM x K dY matrix.
// Otherwise (DG_TMA_RECT 1): a box of DG_BOX_N images x DG_BOX_H x DG_BOX_W of the
// sub-GEMM's (n, htilde, wtilde) pixel grid (DG_BOX_ROWS <= TILE_M GEMM rows, w fastest),
// boxes numbered w fastest, then h, then images. For tap (ydot, xdot) the A tile is the dY
// box at (h_begin + h0 - ydot*dy_h_coeff, w_begin + w0 - xdot*dy_w_coeff): the rows
// dY[n, htilde - ydot*coeff_h, wtilde - xdot*coeff_w, k] of the implicit GEMM (the same
// record fields the cp.async loaders use), zero outside dY, which is the padding.
struct dg_tma_tile {
    dg_sub s;
    int n_tile, n0, h0, w0, taps;
};
DG_DEVICE dg_tma_tile dg_tma_tile_at(int t) {
    dg_tma_tile r;
    r.s = dg_find_sub(t);
    const int local = t - r.s.block_start;
    const int m_tile = local / r.s.n_tiles;
    r.n_tile = local - m_tile * r.s.n_tiles;
    r.taps = r.s.gemm_k / DG_KPG;
#if DG_TMA_RECT
    const int boxes_w = (r.s.w_slice + DG_BOX_W - 1) / DG_BOX_W;
    const int boxes_h = (r.s.h_slice + DG_BOX_H - 1) / DG_BOX_H;
    r.w0 = (m_tile % boxes_w) * DG_BOX_W;
    r.h0 = (m_tile / boxes_w % boxes_h) * DG_BOX_H;
    r.n0 = m_tile / (boxes_w * boxes_h) * DG_BOX_N;
#else
    r.n0 = m_tile * DG_TILE_M;  // first GEMM row
    r.h0 = r.w0 = 0;
#endif
// #section nchw_tma
    // m_tile = image * DG_NT_MT + channel tile; the column tile is DG_NT_BH dX rows x 64 columns
    r.taps = DG_NT_Y * DG_NT_X;
    r.h0 = r.n_tile / DG_NT_PTW * DG_NT_BH;
    r.w0 = r.n_tile % DG_NT_PTW * 64;
    r.n0 = m_tile;
    r.n_tile = 0;
// #end nchw_tma
    return r;
}
// dX pixel of GEMM row `row` (0 .. TILE_M-1) of a tile, or -1 when it lies outside dX.
DG_DEVICE int dg_tma_pixel(const dg_tma_tile& tt, int row) {
// #section nchw_tma
    // the NCHW TMA GEMM's rows are channels of the group: the row's channel, or -1 past cpg
    const int ch = tt.n0 % DG_NT_MT * DG_TILE_M + row;
    return ch < DG_NT_CPG ? ch : -1;
// #end nchw_tma
#if DG_TMA_RECT
    if (row >= DG_BOX_ROWS) return -1;
    const int wt = tt.w0 + row % DG_BOX_W;
    const int ht = tt.h0 + row / DG_BOX_W % DG_BOX_H;
    const int n = tt.n0 + row / (DG_BOX_W * DG_BOX_H);
    if (n >= DG_N || ht >= tt.s.h_slice || wt >= tt.s.w_slice) return -1;
    const int hi = ht * tt.s.dx_h_stride + tt.s.dx_h_offset;
    const int wi = wt * tt.s.dx_w_stride + tt.s.dx_w_offset;
    if ((unsigned)hi >= (unsigned)DG_HI || (unsigned)wi >= (unsigned)DG_WI) return -1;
    return (n * DG_HI + hi) * DG_WI + wi;
#else
    const int m = tt.n0 + row;
    return m < tt.s.gemm_m ? m : -1;
#endif
}
// #section nchw_tma
// Column `col` of an NCHW TMA tile: dX row h0 + col/64, column w0 + col%64 (inside dX or not);
// the dX element of channel `ch` there, NCHW.
DG_DEVICE bool dg_nt_inside(const dg_tma_tile& tt, int col) {
    return tt.h0 + col / 64 < DG_NT_HI && tt.w0 + col % 64 < DG_NT_WI;
}
DG_DEVICE long long dg_nt_offset(const dg_tma_tile& tt, int g, int ch, int col) {
    const long long plane = (long long)(tt.n0 / DG_NT_MT) * DG_NT_C + g * DG_NT_CPG + ch;
    return (plane * DG_NT_HI + tt.h0 + col / 64) * DG_NT_WI + tt.w0 + col % 64;
}
// #end nchw_tma
#endif

// ------------------------------------------------------------------ tile geometry
#if DG_WGMMA
// Warpgroup MMA (sm_90a wgmma) reads both operands from shared memory through matrix
// descriptors, in the 128-byte swizzled layout (PTX ISA, "Matrix Descriptor" and the
// canonical 128B-swizzle layouts): a tile is cut into blocks 64 elements (128 bytes) wide;
// row r of a block is 128 bytes at r*128, and its 16-byte chunk j is stored at chunk
// j ^ (r % 8) (8 rows = one 1024-byte swizzle atom; blocks start 1024-aligned).
//   A (dY, k contiguous, "K-major"):  [TILE_K/64 blocks][TILE_M rows][64 k]
//   B (W, c contiguous, "MN-major"):  [TILE_N/64 blocks][TILE_K rows][64 c]
// #section !wgtf32
DG_DEVICE int dg_sw128(int row, int col) { return row * 64 + ((((col >> 3) ^ row) & 7) << 3) + (col & 7); }
#define DG_A_STAGE (DG_TILE_M * DG_TILE_K)
#define DG_B_STAGE (DG_TILE_K * DG_TILE_N)
// #end !wgtf32
// #section !wgtf32|wgk32
#define DG_A_OFF(row, col) (((col) >> 6) * (DG_TILE_M * 64) + dg_sw128((row), (col) & 63))
// #end !wgtf32|wgk32
// #section !wgtf32|wgn32|wgb32
#define DG_B_OFF(row, col) (((col) >> 6) * (DG_TILE_K * 64) + dg_sw128((row), (col) & 63))
// #end !wgtf32|wgn32|wgb32
// #section wgk32|wgn32|wgb32
// Narrow tiles in the 64-byte swizzle (PTX ISA 9.7.15.5.1.2 "Shared Memory Matrix Layout":
// the 64B swizzle atom is 8 x 4 16-byte units K-major, 4 x 8 MN-major; the swizzle XORs
// address bits 4-5 with bits 7-8, and its pattern repeats every 512 bytes, "Matrix
// Descriptor Format"): a row is 32 16-bit elements (64 bytes) at r*64, and its 16-byte
// chunk j is stored at chunk j ^ ((r / 2) % 4); 8 rows = one 512-byte atom, 512-aligned.
//   tile_k 32 (wgk32):        A (dY, K-major):  [TILE_M rows][32 k]
//   warp_tile_n 32 (wgn32):   B (W, MN-major):  [TILE_N/32 blocks][TILE_K rows][32 c]
DG_DEVICE int dg_sw64(int row, int col) { return row * 32 + ((((col >> 3) ^ (row >> 1)) & 3) << 3) + (col & 7); }
// #end wgk32|wgn32|wgb32
// #section wgk32
#define DG_A_OFF(row, col) dg_sw64((row), (col))
// #end wgk32
// #section wgn32|wgb32
#define DG_B_OFF(row, col) (((col) >> 5) * (DG_TILE_K * 32) + dg_sw64((row), (col) & 31))
// #end wgn32|wgb32
// #section wgb32
// warp_tile_n 96, 160 or 224 (wgb32): B (W, MN-major) in the wgn32 layout, [TILE_N/32 blocks]
// [TILE_K rows][32 c]; a warpgroup's columns are 3, 5 or 7 consecutive blocks (LBO apart), and
// with the TMA schedule each block is one box of a 64-byte-swizzled tensor map.
// #end wgb32
// #section wgtf32
// TF32 (fp32 elements): a 128-byte row holds 32 k, a 16-byte chunk 4. wgmma takes .tf32
// operands K-major only, so B is stored like A, transposed by the register-staged loader:
//   A (dY):  [TILE_K/32 blocks][TILE_M rows][32 k]     B (W): [TILE_K/32 blocks][TILE_N rows][32 k]
DG_DEVICE int dg_sw128(int row, int col) { return row * 32 + ((((col >> 2) ^ row) & 7) << 2) + (col & 3); }
#define DG_A_STAGE (DG_TILE_M * DG_TILE_K)
#define DG_B_STAGE (DG_TILE_K * DG_TILE_N)
#define DG_A_OFF(row, col) (((col) >> 5) * (DG_TILE_M * 32) + dg_sw128((row), (col) & 31))
#define DG_BT_OFF(n, k) (((k) >> 5) * (DG_TILE_N * 32) + dg_sw128((n), (k) & 31))
static_assert(DG_DTYPE == 0 && DG_K_OUTER == 0 && DG_TILE_K % 32 == 0,
              "wgmma TF32: fp32 tiles, K-major B (m-outer), 128-byte rows of k");
// #end wgtf32
#define DG_GROUP 128                                          // threads per MMA unit: a warpgroup
#else
// #section !tf32
#define DG_A_ROW (DG_TILE_K + DG_LDS_PAD)                     // A tile: [TILE_M][TILE_K+pad]
// #end !tf32
// #section tf32
// TF32 atoms read a thread's two k of a row as one 8-byte load: rows of k are padded by
// 2*DG_LDS_PAD, a stride of 8 words modulo the 32 banks, so a half-warp's loads do not collide.
#define DG_A_ROW (DG_TILE_K + 2 * DG_LDS_PAD)                 // A tile: [TILE_M][TILE_K+2*pad]
// #end tf32
#define DG_A_STAGE (DG_TILE_M * DG_A_ROW)
#if DG_K_OUTER
#define DG_B_ROW (DG_TILE_N + DG_LDS_PAD)                     // B tile: [TILE_K][TILE_N+pad]
#define DG_B_STAGE (DG_TILE_K * DG_B_ROW)
#else
// #section !tf32
#define DG_B_ROW (DG_TILE_K + DG_LDS_PAD)                     // B tile: [TILE_N][TILE_K+pad]
// #end !tf32
// #section tf32
#define DG_B_ROW (DG_TILE_K + 2 * DG_LDS_PAD)                 // B tile: [TILE_N][TILE_K+2*pad]
// #end tf32
#define DG_B_STAGE (DG_TILE_N * DG_B_ROW)
#endif
#define DG_A_OFF(row, col) ((row) * DG_A_ROW + (col))
#define DG_B_OFF(row, col) ((row) * DG_B_ROW + (col))         // k-outer: row = k, col = c
#define DG_GROUP DG_WAVE                                      // threads per MMA unit: a warp/wave
#endif
#define DG_A_VECS_PER_ROW (DG_TILE_K / DG_VEC_A)
#define DG_A_LOADS (DG_TILE_M * DG_TILE_K / DG_VEC_A / DG_THREADS)
#define DG_B_VECS_PER_ROW (DG_TILE_N / DG_VEC_B)
#define DG_B_LOADS (DG_TILE_K * DG_TILE_N / DG_VEC_B / DG_THREADS)
#define DG_WARPS (DG_THREADS / DG_WAVE)
#define DG_WARP_ROWS (DG_TILE_M / DG_WARP_M)                  // rows one warp (warpgroup) covers
#define DG_WARP_COLS (DG_TILE_N / DG_WARP_N)

typedef typename dg_bytes<DG_VEC_A * DG_EB>::type dg_va_t;
typedef typename dg_bytes<DG_VEC_B * DG_EB>::type dg_vb_t;

#if defined(DG_ASYNC) && DG_ASYNC && (DG_VEC_A * DG_EB >= 4)
#define DG_A_ASYNC 1
#else
#define DG_A_ASYNC 0
#endif
#if defined(DG_ASYNC) && DG_ASYNC && DG_K_OUTER && (DG_VEC_B * DG_EB >= 4)
#define DG_B_ASYNC 1
#else
#define DG_B_ASYNC 0
#endif
// #section wgtf32
#undef DG_A_ASYNC
#define DG_A_ASYNC 0  // rounded to TF32 on the way through registers
// #end wgtf32

// Per-thread A rows: fixed across the K loop, decoded once.
struct dg_arow {
    int pix;   // pointwise: m (dY row); tilde: n*HO*WO
    int h, w;  // tilde: htilde, wtilde; h = -1<<20 marks a row past GemmM
    int base;  // tilde: pix + h*WO + w, the dY pixel of tap (0, 0)
};

DG_DEVICE void dg_decode_arows(const dg_sub& s, int m_tile, dg_arow (&ar)[DG_A_LOADS]) {
    const int tid = DG_TID();
#pragma unroll
    for (int i = 0; i < DG_A_LOADS; ++i) {
        int v = tid + i * DG_THREADS;
        int m = m_tile * DG_TILE_M + v / DG_A_VECS_PER_ROW;
#if DG_POINTWISE
        ar[i].pix = m;
        ar[i].h = m < s.gemm_m ? 0 : -(1 << 20);
        ar[i].w = 0;
        ar[i].base = m;
#else
        int hw = s.h_slice * s.w_slice;
        int n = m / hw;
        int r = m - n * hw;
        int htl = r / s.w_slice;
        ar[i].pix = n * DG_HO * DG_WO;
        ar[i].h = m < s.gemm_m ? s.h_begin + htl : -(1 << 20);
        ar[i].w = s.w_begin + (r - htl * s.w_slice);
        ar[i].base = m < s.gemm_m ? ar[i].pix + ar[i].h * DG_WO + ar[i].w : 0;
#endif
    }
}

// Address and validity of one A vector (dY) for k-tile kt.
DG_DEVICE const dg_t* dg_a_src(const dg_t* dy, const dg_sub& s, const dg_arow& r, int g, int kg, bool& ok) {
#if DG_POINTWISE
    ok = r.h == 0 && kg < DG_KPG;
    return dy + (r.pix * DG_K + g * DG_KPG + kg);
#else
    int tap = kg / DG_KPG;
    int k = kg - tap * DG_KPG;
    int ydot = tap / s.x_dot_slice;
    int xdot = tap - ydot * s.x_dot_slice;
    int ho = r.h - ydot * s.dy_h_coeff;
    int wo = r.w - xdot * s.dy_w_coeff;
    ok = kg < s.gemm_k && (unsigned)ho < (unsigned)DG_HO && (unsigned)wo < (unsigned)DG_WO;
    return dy + (int)((unsigned)(r.pix + ho * DG_WO + wo) * (unsigned)DG_K + (unsigned)(g * DG_KPG + k));
#endif
}

// Address and validity of one B vector (W) at GemmK row kg, channel c.
DG_DEVICE const dg_t* dg_b_src(const dg_t* w, const dg_sub& s, int g, int kg, int c, bool& ok) {
#if DG_POINTWISE
// #section !group_pack
    ok = kg < DG_KPG && c < DG_CPG;
    return w + ((g * DG_KPG + kg) * DG_CPG + c);
// #end !group_pack
// #section group_pack
    ok = kg < DG_KPG && c < DG_CPG && kg / DG_PACK_KPG == c / DG_PACK_CPG;   // on W's block diagonal
    return w + ((g * DG_KPG + kg) * DG_PACK_CPG + c % DG_PACK_CPG);
// #end group_pack
#else
    int tap = kg / DG_KPG;
    int k = kg - tap * DG_KPG;
    int ydot = tap / s.x_dot_slice;
    int xdot = tap - ydot * s.x_dot_slice;
    int y = ydot * s.y_stride + s.y_offset;
    int x = xdot * s.x_stride + s.x_offset;
// #section !group_pack
    ok = kg < s.gemm_k && c < DG_CPG;
    return w + ((((g * DG_KPG + k) * DG_Y + y) * DG_X + x) * DG_CPG + c);
// #end !group_pack
// #section group_pack
    ok = kg < s.gemm_k && c < DG_CPG && k / DG_PACK_KPG == c / DG_PACK_CPG;
    return w + ((((g * DG_KPG + k) * DG_Y + y) * DG_X + x) * DG_PACK_CPG + c % DG_PACK_CPG);
// #end group_pack
#endif
}

// Register staging for the parts that do not go through cp.async.
struct dg_stage_regs {
#if !DG_A_ASYNC
    dg_va_t a[DG_A_LOADS];
#endif
#if !DG_B_ASYNC
    dg_vb_t b[DG_B_LOADS];
#endif
    int dummy;
};

// When kpg is a multiple of TILE_K (and the path is not pointwise) every k-tile lies inside
// one filter tap, and the K loop runs channel-chunk outer, tap inner: k-tile kt covers
// channels [chunk*TILE_K, +TILE_K) of tap t with (chunk, t) = divmod(kt, taps). The tap
// decode happens once per tile, and consecutive k-tiles read the same dY channels at
// shifted pixels, which the L1-allocating copies (DG_A_L1) then serve from L1 (the halo
// reuse of a direct convolution). Any K order gives the same sum; this one moves less data.
#if !DG_POINTWISE && (DG_KPG % DG_TILE_K == 0)
#define DG_TAP_UNIFORM 1
#else
#define DG_TAP_UNIFORM 0
#endif

DG_DEVICE void dg_fetch(const dg_t* dy, const dg_t* w, const dg_sub& s, const dg_arow (&ar)[DG_A_LOADS],
                        int g, int n_tile, int kt, dg_t* As, dg_t* Bs, dg_stage_regs& regs) {
    const int tid = DG_TID();
#if DG_A_ASYNC
    const dg_u32 a_smem = dg_smem_addr(As);
#endif
#if DG_B_ASYNC
    const dg_u32 b_smem = dg_smem_addr(Bs);
#endif
#if DG_TAP_UNIFORM
    const int taps = s.gemm_k / DG_KPG;
    const int chunk = kt / taps;
    const int tap = kt - chunk * taps;
    const int k0 = chunk * DG_TILE_K;
    const int ydot = tap / s.x_dot_slice;
    const int xdot = tap - ydot * s.x_dot_slice;
    const int dh = ydot * s.dy_h_coeff;
    const int dw = xdot * s.dy_w_coeff;
    const int dpix = dh * DG_WO + dw;
    const dg_t* dy_k = dy + g * DG_KPG + k0;
// #section !group_pack
    const dg_t* w_k = w + ((((g * DG_KPG + k0) * DG_Y + ydot * s.y_stride + s.y_offset) * DG_X +
                            xdot * s.x_stride + s.x_offset) * DG_CPG);
// #end !group_pack
// #section group_pack
    const dg_t* w_k = w + ((((g * DG_KPG + k0) * DG_Y + ydot * s.y_stride + s.y_offset) * DG_X +
                            xdot * s.x_stride + s.x_offset) * DG_PACK_CPG);
// #end group_pack
#endif
#pragma unroll
    for (int i = 0; i < DG_A_LOADS; ++i) {
        int v = tid + i * DG_THREADS;
        int row = v / DG_A_VECS_PER_ROW;
        int col = (v - row * DG_A_VECS_PER_ROW) * DG_VEC_A;
        bool ok;
#if DG_TAP_UNIFORM
        const int ho = ar[i].h - dh;
        const int wo = ar[i].w - dw;
        ok = (unsigned)ho < (unsigned)DG_HO && (unsigned)wo < (unsigned)DG_WO;
        const dg_t* src = dy_k + (ok ? (ar[i].base - dpix) * DG_K + col : 0);
#else
        const dg_t* src = dg_a_src(dy, s, ar[i], g, kt * DG_TILE_K + col, ok);
#endif
#if DG_A_ASYNC
        dg_cp_async<DG_VEC_A * DG_EB, DG_A_L1>(a_smem + DG_A_OFF(row, col) * DG_EB, ok ? src : dy, ok);
#else
        regs.a[i] = ok ? *reinterpret_cast<const dg_va_t*>(src) : dg_zero_bytes<DG_VEC_A * DG_EB>();
#endif
    }
#pragma unroll
    for (int i = 0; i < DG_B_LOADS; ++i) {
        int v = tid + i * DG_THREADS;
        int row = v / DG_B_VECS_PER_ROW;
        int col = (v - row * DG_B_VECS_PER_ROW) * DG_VEC_B;
        bool ok;
#if DG_TAP_UNIFORM
        const int c = n_tile * DG_TILE_N + col;
// #section !group_pack
        ok = c < DG_CPG;
        const dg_t* src = w_k + (row * (DG_Y * DG_X * DG_CPG) + c);
// #end !group_pack
// #section group_pack
        ok = c < DG_CPG && (k0 + row) / DG_PACK_KPG == c / DG_PACK_CPG;
        const dg_t* src = w_k + (row * (DG_Y * DG_X * DG_PACK_CPG) + c % DG_PACK_CPG);
// #end group_pack
#else
        const dg_t* src = dg_b_src(w, s, g, kt * DG_TILE_K + row, n_tile * DG_TILE_N + col, ok);
#endif
#if DG_B_ASYNC
        dg_cp_async<DG_VEC_B * DG_EB>(b_smem + DG_B_OFF(row, col) * DG_EB, ok ? src : w, ok);
#else
        regs.b[i] = ok ? *reinterpret_cast<const dg_vb_t*>(src) : dg_zero_bytes<DG_VEC_B * DG_EB>();
#endif
    }
}

DG_DEVICE void dg_store_regs(dg_t* As, dg_t* Bs, const dg_stage_regs& regs) {
    const int tid = DG_TID();
#if !DG_A_ASYNC
#pragma unroll
    for (int i = 0; i < DG_A_LOADS; ++i) {
        int v = tid + i * DG_THREADS;
        int row = v / DG_A_VECS_PER_ROW;
        int col = (v - row * DG_A_VECS_PER_ROW) * DG_VEC_A;
// #section !wgtf32
        *reinterpret_cast<dg_va_t*>(As + DG_A_OFF(row, col)) = regs.a[i];
// #end !wgtf32
// #section wgtf32
        dg_va_t r = regs.a[i];
        float* e = reinterpret_cast<float*>(&r);
#pragma unroll
        for (int j = 0; j < DG_VEC_A; ++j) e[j] = dg_round_tf32(e[j]);
        *reinterpret_cast<dg_va_t*>(As + DG_A_OFF(row, col)) = r;
// #end wgtf32
    }
#endif
#if !DG_B_ASYNC
#pragma unroll
    for (int i = 0; i < DG_B_LOADS; ++i) {
        int v = tid + i * DG_THREADS;
        int row = v / DG_B_VECS_PER_ROW;
        int col = (v - row * DG_B_VECS_PER_ROW) * DG_VEC_B;
#if DG_K_OUTER
        *reinterpret_cast<dg_vb_t*>(Bs + DG_B_OFF(row, col)) = regs.b[i];
#else
        const dg_t* e = reinterpret_cast<const dg_t*>(&regs.b[i]);
#pragma unroll
// #section !wgtf32
        for (int j = 0; j < DG_VEC_B; ++j) Bs[(col + j) * DG_B_ROW + row] = e[j];
// #end !wgtf32
// #section wgtf32
        for (int j = 0; j < DG_VEC_B; ++j) Bs[DG_BT_OFF(col + j, row)] = dg_round_tf32(e[j]);
// #end wgtf32
#endif
    }
#endif
    (void)As; (void)Bs; (void)regs; (void)tid;
}

// ------------------------------------------------------------------ matrix atoms
// DG_MMA_LAG: matrix-instruction groups a thread may leave in flight past dg_compute
// (wgmma is asynchronous; every other atom completes in order). With a lag of 1 the
// stage read by tile kt is rewritten no earlier than iteration kt+2, so the pipeline
// prefetches DG_STAGES-2 tiles ahead instead of DG_STAGES-1.
#if DG_WGMMA && (DG_STAGES >= 3 || DG_TMA)
#define DG_MMA_LAG 1
#else
#define DG_MMA_LAG 0
#endif
#define DG_AHEAD (DG_STAGES - 1 - DG_MMA_LAG)
// Accumulator fragment per warp: DG_MMA_M x DG_MMA_N atoms, DG_ACC_PER_ATOM floats each.
#if DG_ATOM == 0  // NVIDIA mma.sync.m16n8k16, fp16/bf16 in, fp32 accumulate
#define DG_ACC_PER_ATOM 4

DG_DEVICE void dg_ldmatrix_x4(dg_u32 (&r)[4], dg_u32 p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(p));
}
DG_DEVICE void dg_ldmatrix_x4_t(dg_u32 (&r)[4], dg_u32 p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(p));
}
DG_DEVICE void dg_ldmatrix_x2(dg_u32 (&r)[2], dg_u32 p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];"
                 : "=r"(r[0]), "=r"(r[1]) : "r"(p));
}
DG_DEVICE void dg_ldmatrix_x2_t(dg_u32 (&r)[2], dg_u32 p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
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

DG_DEVICE void dg_compute(const dg_t* As, const dg_t* Bs, float (&acc)[DG_MMA_M][DG_MMA_N][DG_ACC_PER_ATOM],
                          int wm, int wn, int lane) {
    const dg_u32 a_smem = dg_smem_addr(As);
    const dg_u32 b_smem = dg_smem_addr(Bs);
#pragma unroll
    for (int kk = 0; kk < DG_TILE_K; kk += 16) {
        dg_u32 a[DG_MMA_M][4];
#pragma unroll
        for (int i = 0; i < DG_MMA_M; ++i) {
            int row = wm * DG_WARP_ROWS + i * 16 + (lane & 15);
            dg_ldmatrix_x4(a[i], a_smem + (row * DG_A_ROW + kk + (lane >> 4) * 8) * 2);
        }
        dg_u32 b[DG_MMA_N][2];
#pragma unroll
        for (int j = 0; j < DG_MMA_N; j += 2) {
            int nb = wn * DG_WARP_COLS + j * 8;
            if (j + 1 < DG_MMA_N) {
                dg_u32 r[4];
#if DG_K_OUTER
                // matrices: (k0-7,n0-7) (k8-15,n0-7) (k0-7,n8-15) (k8-15,n8-15), rows = k
                int krow = kk + (lane & 7) + ((lane >> 3) & 1) * 8;
                int ncol = nb + (lane >> 4) * 8;
                dg_ldmatrix_x4_t(r, b_smem + (krow * DG_B_ROW + ncol) * 2);
#else
                // rows = n, 8 contiguous k each
                int nrow = nb + (lane & 7) + (lane >> 4) * 8;
                int kcol = kk + ((lane >> 3) & 1) * 8;
                dg_ldmatrix_x4(r, b_smem + (nrow * DG_B_ROW + kcol) * 2);
#endif
                b[j][0] = r[0]; b[j][1] = r[1]; b[j + 1][0] = r[2]; b[j + 1][1] = r[3];
            } else {
                dg_u32 r[2];
#if DG_K_OUTER
                int krow = kk + (lane & 7) + ((lane >> 3) & 1) * 8;
                dg_ldmatrix_x2_t(r, b_smem + (krow * DG_B_ROW + nb) * 2);
#else
                int nrow = nb + (lane & 7);
                int kcol = kk + ((lane >> 3) & 1) * 8;
                dg_ldmatrix_x2(r, b_smem + (nrow * DG_B_ROW + kcol) * 2);
#endif
                b[j][0] = r[0]; b[j][1] = r[1];
            }
        }
#pragma unroll
        for (int i = 0; i < DG_MMA_M; ++i)
#pragma unroll
            for (int j = 0; j < DG_MMA_N; ++j) dg_mma(acc[i][j], a[i], b[j][0], b[j][1]);
    }
}

// Tile coordinates (row, col) of accumulator e of atom (i, j) for this lane.
DG_DEVICE int dg_acc_row(int wm, int i, int lane, int e) { return wm * DG_WARP_ROWS + i * 16 + (lane >> 2) + (e >> 1) * 8; }
DG_DEVICE int dg_acc_col(int wn, int j, int lane, int e) { return wn * DG_WARP_COLS + j * 8 + (lane & 3) * 2 + (e & 1); }
#define DG_ACC_PAIRED 1  // accumulators e, e+1 are adjacent columns of one row

#elif DG_ATOM == 4  // NVIDIA sm_90a wgmma.mma_async m64nNk16, fp16/bf16 from shared memory, fp32 accumulate
// A warpgroup (4 warps) owns a WARP_ROWS x WARP_COLS tile: DG_MMA_M instructions of
// m64 x n(WARP_COLS) per k16 step. Its accumulator fragment (PTX ISA "wgmma D matrix
// fragment") is, per 8-column chunk j, the mma.sync m16n8 C layout of warp w of the group
// on rows 16w .. 16w+15: acc[i][j][0..3], the same register order the instruction takes.
#define DG_ACC_PER_ATOM 4
// The instruction itself, `dg_wgmma(d, a_desc, b_desc)` (d: the 64xN fp32 accumulator
// fragment, N/2 registers; a_desc/b_desc: matrix descriptors), is written into the next line by
// emit.py (wgmma_wrapper) for the kernel's N = warp_tile_n and element type.
// #emit dg_wgmma

// Shared-memory matrix descriptor, 128-byte swizzle: start address, leading-dimension byte
// offset (MN-major: between 64-wide blocks; unused by K-major swizzled operands), stride
// byte offset (between 8-row groups), all in 16-byte units.
DG_DEVICE unsigned long long dg_wg_desc(dg_u32 addr, dg_u32 lbo, dg_u32 sbo) {
    return (unsigned long long)((addr & 0x3FFFFu) >> 4) | ((unsigned long long)(lbo >> 4) << 16) |
           ((unsigned long long)(sbo >> 4) << 32) | (1ull << 62);
}

// #section !wgtf32|wgk32|wgn32|wgb32
DG_DEVICE void dg_compute(const dg_t* As, const dg_t* Bs, float (&acc)[DG_MMA_M][DG_MMA_N][DG_ACC_PER_ATOM],
                          int wm, int wn, int) {
    const dg_u32 a0 = dg_smem_addr(As) + wm * DG_WARP_ROWS * 128;
    const dg_u32 b0 = dg_smem_addr(Bs) + (wn * DG_WARP_COLS / 64) * (DG_TILE_K * 128);
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
    for (int kk = 0; kk < DG_TILE_K; kk += 16) {
        // B: rows kk .. kk+15 of every 64-wide block (two 8-row groups, 1024 bytes apart).
        const unsigned long long bd = dg_wg_desc(b0 + kk * 128, DG_TILE_K * 128, 1024);
#pragma unroll
        for (int i = 0; i < DG_MMA_M; ++i) {
            // A: 64 rows, the 32-byte k slice kk .. kk+15 inside the 128-byte swizzled rows.
            const unsigned long long ad =
                dg_wg_desc(a0 + (kk >> 6) * (DG_TILE_M * 128) + i * 64 * 128 + (kk & 63) * 2, 16, 1024);
            dg_wgmma(&acc[i][0][0], ad, bd);
        }
    }
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    // Leave this tile's group in flight (DG_MMA_LAG = 1): it overlaps the next tile's
    // barrier and copies; the previous tile's group is complete past this wait.
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(DG_MMA_LAG) : "memory");
}
// #end !wgtf32|wgk32|wgn32|wgb32
// #section wgk32|wgn32|wgb32
// Narrow tiles: descriptors with their swizzle mode (1 = 128-byte, 2 = 64-byte; PTX ISA
// "Matrix Descriptor Format"), LBO and SBO as above. A with tile_k 32: 64-byte rows, the
// 32-byte k slice kk .. kk+15 at byte kk*2 of each row, 8-row groups 512 bytes apart. B with
// warp_tile_n 32, 96, 160 or 224: from the warpgroup's first 32-wide block, rows kk .. kk+15
// (two 8-row groups 512 bytes apart); LBO = TILE_K*64 bytes to the next 32-wide block (an n96
// instruction spans 3, n160 5, n224 7, an n32 one none).
DG_DEVICE unsigned long long dg_wg_desc_sw(dg_u32 addr, dg_u32 lbo, dg_u32 sbo, unsigned long long mode) {
    return (unsigned long long)((addr & 0x3FFFFu) >> 4) | ((unsigned long long)(lbo >> 4) << 16) |
           ((unsigned long long)(sbo >> 4) << 32) | (mode << 62);
}
DG_DEVICE void dg_compute(const dg_t* As, const dg_t* Bs, float (&acc)[DG_MMA_M][DG_MMA_N][DG_ACC_PER_ATOM],
                          int wm, int wn, int) {
#if DG_TILE_K == 32
    const dg_u32 a0 = dg_smem_addr(As) + wm * DG_WARP_ROWS * 64;
#define DG_A_DESC(kk, i) dg_wg_desc_sw(a0 + (i) * 64 * 64 + (kk) * 2, 16, 512, 2)
#else
    const dg_u32 a0 = dg_smem_addr(As) + wm * DG_WARP_ROWS * 128;
#define DG_A_DESC(kk, i) \
    dg_wg_desc_sw(a0 + ((kk) >> 6) * (DG_TILE_M * 128) + (i) * 64 * 128 + ((kk) & 63) * 2, 16, 1024, 1)
#endif
#if DG_WG_N % 64 != 0     // 32, 96, 160, 224: 32-wide blocks in the 64-byte swizzle
    const dg_u32 b0 = dg_smem_addr(Bs) + (wn * DG_WARP_COLS / 32) * (DG_TILE_K * 64);
#define DG_B_DESC(kk) dg_wg_desc_sw(b0 + (kk) * 64, DG_TILE_K * 64, 512, 2)
#else
    const dg_u32 b0 = dg_smem_addr(Bs) + (wn * DG_WARP_COLS / 64) * (DG_TILE_K * 128);
#define DG_B_DESC(kk) dg_wg_desc_sw(b0 + (kk) * 128, DG_TILE_K * 128, 1024, 1)
#endif
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
    for (int kk = 0; kk < DG_TILE_K; kk += 16) {
        const unsigned long long bd = DG_B_DESC(kk);
#pragma unroll
        for (int i = 0; i < DG_MMA_M; ++i) dg_wgmma(&acc[i][0][0], DG_A_DESC(kk, i), bd);
    }
#undef DG_A_DESC
#undef DG_B_DESC
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(DG_MMA_LAG) : "memory");
}
// #end wgk32|wgn32|wgb32
// #section wgtf32
// TF32: k8 instructions, 32 bytes of each 128-byte row per step; B K-major like A (its rows
// are the warpgroup's columns, 8-row groups 1024 bytes apart).
DG_DEVICE void dg_compute(const dg_t* As, const dg_t* Bs, float (&acc)[DG_MMA_M][DG_MMA_N][DG_ACC_PER_ATOM],
                          int wm, int wn, int) {
    const dg_u32 a0 = dg_smem_addr(As) + wm * DG_WARP_ROWS * 128;
    const dg_u32 b0 = dg_smem_addr(Bs) + wn * DG_WARP_COLS * 128;
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
    for (int kk = 0; kk < DG_TILE_K; kk += 8) {
        const unsigned long long bd = dg_wg_desc(b0 + (kk >> 5) * (DG_TILE_N * 128) + (kk & 31) * 4, 16, 1024);
#pragma unroll
        for (int i = 0; i < DG_MMA_M; ++i) {
            const unsigned long long ad =
                dg_wg_desc(a0 + (kk >> 5) * (DG_TILE_M * 128) + i * 64 * 128 + (kk & 31) * 4, 16, 1024);
            dg_wgmma(&acc[i][0][0], ad, bd);
        }
    }
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(DG_MMA_LAG) : "memory");
}
// #end wgtf32
DG_DEVICE void dg_mma_drain() { asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory"); }

// lane = thread index inside the warpgroup (0..127).
DG_DEVICE int dg_acc_row(int wm, int i, int lane, int e) {
    return wm * DG_WARP_ROWS + i * 64 + (lane >> 5) * 16 + ((lane & 31) >> 2) + (e >> 1) * 8;
}
DG_DEVICE int dg_acc_col(int wn, int j, int lane, int e) { return wn * DG_WARP_COLS + j * 8 + (lane & 3) * 2 + (e & 1); }
#define DG_ACC_PAIRED 1

#elif DG_ATOM == 1 || DG_ATOM == 2  // AMD MFMA 32x32x8 / 16x16x16, fp16/bf16 in, fp32 accumulate
#if DG_ATOM == 1
#define DG_AM 32
#define DG_AK 8
#define DG_ACC_PER_ATOM 16
#else
#define DG_AM 16
#define DG_AK 16
#define DG_ACC_PER_ATOM 4
#endif
typedef float dg_accv __attribute__((ext_vector_type(DG_ACC_PER_ATOM)));
#if DG_DTYPE == 1
typedef _Float16 dg_opv __attribute__((ext_vector_type(4)));
#else
typedef short dg_opv __attribute__((ext_vector_type(4)));
#endif

DG_DEVICE dg_accv dg_mfma(dg_opv a, dg_opv b, dg_accv c) {
#if DG_ATOM == 1 && DG_DTYPE == 1
    return __builtin_amdgcn_mfma_f32_32x32x8f16(a, b, c, 0, 0, 0);
#elif DG_ATOM == 1
    return __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(a, b, c, 0, 0, 0);
#elif DG_DTYPE == 1
    return __builtin_amdgcn_mfma_f32_16x16x16f16(a, b, c, 0, 0, 0);
#else
    return __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(a, b, c, 0, 0, 0);
#endif
}

DG_DEVICE void dg_compute(const dg_t* As, const dg_t* Bs, float (&acc)[DG_MMA_M][DG_MMA_N][DG_ACC_PER_ATOM],
                          int wm, int wn, int lane) {
    // Lane l feeds A[m = l % AM][k = (l / AM)*4 .. +3] and B[k = (l / AM)*4 .. +3][n = l % AM].
    const int lm = lane % DG_AM;
    const int lk = (lane / DG_AM) * 4;
#pragma unroll
    for (int kk = 0; kk < DG_TILE_K; kk += DG_AK) {
        dg_opv a[DG_MMA_M], b[DG_MMA_N];
#pragma unroll
        for (int i = 0; i < DG_MMA_M; ++i) {
            int row = wm * DG_WARP_ROWS + i * DG_AM + lm;
            a[i] = *reinterpret_cast<const dg_opv*>(As + row * DG_A_ROW + kk + lk);
        }
#pragma unroll
        for (int j = 0; j < DG_MMA_N; ++j) {
            int col = wn * DG_WARP_COLS + j * DG_AM + lm;
#if DG_K_OUTER
            union { dg_u16 t[4]; dg_opv v; } cvt;
#pragma unroll
            for (int q = 0; q < 4; ++q) cvt.t[q] = Bs[(kk + lk + q) * DG_B_ROW + col];
            b[j] = cvt.v;
#else
            b[j] = *reinterpret_cast<const dg_opv*>(Bs + col * DG_B_ROW + kk + lk);
#endif
        }
#pragma unroll
        for (int i = 0; i < DG_MMA_M; ++i)
#pragma unroll
            for (int j = 0; j < DG_MMA_N; ++j) {
                dg_accv c;
#pragma unroll
                for (int e = 0; e < DG_ACC_PER_ATOM; ++e) c[e] = acc[i][j][e];
                c = dg_mfma(a[i], b[j], c);
#pragma unroll
                for (int e = 0; e < DG_ACC_PER_ATOM; ++e) acc[i][j][e] = c[e];
            }
    }
}

// Output element e of a lane: column l % AM; row (e/4)*8 + (l/AM)*4 + e%4 (32x32) or (l/16)*4 + e (16x16).
DG_DEVICE int dg_acc_row(int wm, int i, int lane, int e) {
#if DG_ATOM == 1
    return wm * DG_WARP_ROWS + i * 32 + (e >> 2) * 8 + (lane >> 5) * 4 + (e & 3);
#else
    return wm * DG_WARP_ROWS + i * 16 + (lane >> 4) * 4 + e;
#endif
}
DG_DEVICE int dg_acc_col(int wn, int j, int lane, int e) { return wn * DG_WARP_COLS + j * DG_AM + (lane % DG_AM); }
#define DG_ACC_PAIRED 0

// #section tf32
#elif DG_ATOM == 5  // NVIDIA mma.sync.m16n8k8 TF32 (sm_80+): fp32 tiles, operands rounded by cvt.rna, fp32 accumulate
// Fragments (PTX ISA, mma.m16n8k8 with .tf32), lane = 4*g + t: A a0 (row g, k t), a1 (g+8, t),
// a2 (g, t+4), a3 (g+8, t+4); B b0 (k t, column g), b1 (k t+4, g); C as m16n8k16's. A
// permutation of k applied to A and B alike leaves every sum unchanged, so fragment k t reads
// tile column 2t and k t+4 column 2t+1: a thread's two k of a row are adjacent, one 8-byte load.
// Each element is rounded to TF32 (10-bit mantissa, to nearest, ties away from zero) once,
// as it enters a register (miopen_solver.tf32.round_tf32 is the same rounding on the host).
#define DG_ACC_PER_ATOM 4
struct __attribute__((aligned(8))) dg_f2 { float x, y; };

DG_DEVICE dg_u32 dg_tf32(float f) {
    dg_u32 r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(f));
    return r;
}
DG_DEVICE void dg_mma_tf32(float (&c)[4], const dg_u32 (&a)[4], dg_u32 b0, dg_u32 b1) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

DG_DEVICE void dg_compute(const dg_t* As, const dg_t* Bs, float (&acc)[DG_MMA_M][DG_MMA_N][DG_ACC_PER_ATOM],
                          int wm, int wn, int lane) {
    const int g = lane >> 2;
    const int t2 = (lane & 3) * 2;
#pragma unroll
    for (int kk = 0; kk < DG_TILE_K; kk += 8) {
        dg_u32 a[DG_MMA_M][4];
#pragma unroll
        for (int i = 0; i < DG_MMA_M; ++i) {
            const int row = wm * DG_WARP_ROWS + i * 16 + g;
            const dg_f2 lo = *reinterpret_cast<const dg_f2*>(As + row * DG_A_ROW + kk + t2);
            const dg_f2 hi = *reinterpret_cast<const dg_f2*>(As + (row + 8) * DG_A_ROW + kk + t2);
            a[i][0] = dg_tf32(lo.x); a[i][1] = dg_tf32(hi.x); a[i][2] = dg_tf32(lo.y); a[i][3] = dg_tf32(hi.y);
        }
        dg_u32 b[DG_MMA_N][2];
#pragma unroll
        for (int j = 0; j < DG_MMA_N; ++j) {
            const int col = wn * DG_WARP_COLS + j * 8 + g;
#if DG_K_OUTER
            // rows 2t and 2t+1 of [TILE_K][TILE_N+pad]: a stride of 4 words keeps them conflict-free
            b[j][0] = dg_tf32(Bs[(kk + t2) * DG_B_ROW + col]);
            b[j][1] = dg_tf32(Bs[(kk + t2 + 1) * DG_B_ROW + col]);
#else
            const dg_f2 v = *reinterpret_cast<const dg_f2*>(Bs + col * DG_B_ROW + kk + t2);
            b[j][0] = dg_tf32(v.x); b[j][1] = dg_tf32(v.y);
#endif
        }
#pragma unroll
        for (int i = 0; i < DG_MMA_M; ++i)
#pragma unroll
            for (int j = 0; j < DG_MMA_N; ++j) dg_mma_tf32(acc[i][j], a[i], b[j][0], b[j][1]);
    }
}

DG_DEVICE int dg_acc_row(int wm, int i, int lane, int e) { return wm * DG_WARP_ROWS + i * 16 + (lane >> 2) + (e >> 1) * 8; }
DG_DEVICE int dg_acc_col(int wn, int j, int lane, int e) { return wn * DG_WARP_COLS + j * 8 + (lane & 3) * 2 + (e & 1); }
#define DG_ACC_PAIRED 1

#elif DG_ATOM == 6  // AMD v_mfma_f32_16x16x8_xf32 (gfx942, CDNA3): fp32 tiles rounded to TF32, fp32 accumulate
// Lane l feeds A[m = l % 16][k = (l / 16)*2 .. +1] and B[k = (l / 16)*2 .. +1][n = l % 16]; its
// four results are rows (l / 16)*4 + e of column l % 16, as v_mfma_f32_16x16x16's. The operands
// are rounded to TF32 here, as cvt.rna.tf32.f32 does, so the instruction sees TF32 values
// whatever it does with the low 13 bits.
#define DG_ACC_PER_ATOM 4
typedef float dg_accv __attribute__((ext_vector_type(4)));
typedef float dg_opv __attribute__((ext_vector_type(2)));

DG_DEVICE float dg_tf32(float f) {
    union { float f; dg_u32 u; } c;
    c.f = f;
    if ((c.u & 0x7f800000u) != 0x7f800000u) c.u = (c.u + 0x1000u) & 0xffffe000u;   // finite (inf past the top)
    else if (c.u & 0x007fffffu) c.u = (c.u & 0xffffe000u) | 0x00400000u;           // NaN stays a quiet NaN
    return c.f;
}

DG_DEVICE void dg_compute(const dg_t* As, const dg_t* Bs, float (&acc)[DG_MMA_M][DG_MMA_N][DG_ACC_PER_ATOM],
                          int wm, int wn, int lane) {
    const int lm = lane % 16;
    const int lk = (lane / 16) * 2;
#pragma unroll
    for (int kk = 0; kk < DG_TILE_K; kk += 8) {
        dg_opv a[DG_MMA_M], b[DG_MMA_N];
#pragma unroll
        for (int i = 0; i < DG_MMA_M; ++i) {
            const float* p = As + (wm * DG_WARP_ROWS + i * 16 + lm) * DG_A_ROW + kk + lk;
            a[i].x = dg_tf32(p[0]);
            a[i].y = dg_tf32(p[1]);
        }
#pragma unroll
        for (int j = 0; j < DG_MMA_N; ++j) {
            const int col = wn * DG_WARP_COLS + j * 16 + lm;
#if DG_K_OUTER
            b[j].x = dg_tf32(Bs[(kk + lk) * DG_B_ROW + col]);
            b[j].y = dg_tf32(Bs[(kk + lk + 1) * DG_B_ROW + col]);
#else
            b[j].x = dg_tf32(Bs[col * DG_B_ROW + kk + lk]);
            b[j].y = dg_tf32(Bs[col * DG_B_ROW + kk + lk + 1]);
#endif
        }
#pragma unroll
        for (int i = 0; i < DG_MMA_M; ++i)
#pragma unroll
            for (int j = 0; j < DG_MMA_N; ++j) {
                dg_accv c;
#pragma unroll
                for (int e = 0; e < DG_ACC_PER_ATOM; ++e) c[e] = acc[i][j][e];
                c = __builtin_amdgcn_mfma_f32_16x16x8_xf32(a[i], b[j], c, 0, 0, 0);
#pragma unroll
                for (int e = 0; e < DG_ACC_PER_ATOM; ++e) acc[i][j][e] = c[e];
            }
    }
}

DG_DEVICE int dg_acc_row(int wm, int i, int lane, int e) { return wm * DG_WARP_ROWS + i * 16 + (lane >> 4) * 4 + e; }
DG_DEVICE int dg_acc_col(int wn, int j, int lane, int) { return wn * DG_WARP_COLS + j * 16 + (lane % 16); }
#define DG_ACC_PAIRED 0

// #end tf32
#else  // DG_ATOM == 3: FFMA; the warp is a DG_ATOM_M x DG_ATOM_N lane grid, each lane a TM x TN block
#define DG_TM (DG_WARP_ROWS / DG_ATOM_M)
#define DG_TN (DG_WARP_COLS / DG_ATOM_N)
#define DG_ACC_PER_ATOM 1

DG_DEVICE void dg_compute(const dg_t* As, const dg_t* Bs, float (&acc)[DG_MMA_M][DG_MMA_N][DG_ACC_PER_ATOM],
                          int wm, int wn, int lane) {
    const int r0 = wm * DG_WARP_ROWS + (lane / DG_ATOM_N) * DG_TM;
    const int c0 = wn * DG_WARP_COLS + (lane % DG_ATOM_N) * DG_TN;
#pragma unroll 4
    for (int kk = 0; kk < DG_TILE_K; ++kk) {
        float a[DG_TM], b[DG_TN];
#pragma unroll
        for (int i = 0; i < DG_TM; ++i) a[i] = As[(r0 + i) * DG_A_ROW + kk];
#pragma unroll
        for (int j = 0; j < DG_TN; ++j) {
#if DG_K_OUTER
            b[j] = Bs[kk * DG_B_ROW + c0 + j];
#else
            b[j] = Bs[(c0 + j) * DG_B_ROW + kk];
#endif
        }
#pragma unroll
        for (int i = 0; i < DG_TM; ++i)
#pragma unroll
            for (int j = 0; j < DG_TN; ++j) acc[i][j][0] += a[i] * b[j];
    }
}
DG_DEVICE int dg_acc_row(int wm, int i, int lane, int) { return wm * DG_WARP_ROWS + (lane / DG_ATOM_N) * DG_TM + i; }
DG_DEVICE int dg_acc_col(int wn, int j, int lane, int) { return wn * DG_WARP_COLS + (lane % DG_ATOM_N) * DG_TN + j; }
#define DG_ACC_PAIRED 0
#endif

#if DG_ATOM != 4
DG_DEVICE void dg_mma_drain() {}
#endif

// ------------------------------------------------------------------ epilogue
// dX offset of GEMM row m (this sub-GEMM), or -1 when the pixel lies outside dX.
DG_DEVICE int dg_dx_pixel(const dg_sub& s, int m) {
#if DG_POINTWISE
    return m;
#else
    int hw = s.h_slice * s.w_slice;
    int n = m / hw;
    int r = m - n * hw;
    int htl = r / s.w_slice;
    int wtl = r - htl * s.w_slice;
    int hi = htl * s.dx_h_stride + s.dx_h_offset;
    int wi = wtl * s.dx_w_stride + s.dx_w_offset;
    if ((unsigned)hi >= (unsigned)DG_HI || (unsigned)wi >= (unsigned)DG_WI) return -1;
    return (n * DG_HI + hi) * DG_WI + wi;
#endif
}

// #section nchw_dx
// NCHW dX offset of channel ch (of all C) at pixel pix = (n*Hi + hi)*Wi + wi.
DG_DEVICE long long dg_nchw_offset(int pix, int ch) {
    const int n = pix / (DG_HI * DG_WI);
    return ((long long)n * DG_C + ch) * (DG_HI * DG_WI) + (pix - n * (DG_HI * DG_WI));
}

#if DG_SPLIT_K > 1 && DG_DTYPE != 0
// One 16-bit element added atomically: as half of its 4-byte-aligned pair, the other half +0.
DG_DEVICE void dg_nchw_add16(dg_t* dx, long long o, float v) {
    if (o & 1) dg_atomic_add2(dx + o - 1, 0.0f, v);
    else dg_atomic_add2(dx + o, v, 0.0f);
}
#endif
// #end nchw_dx
// #section skws
static_assert(DG_VEC_C == 1 || DG_ACC_PAIRED, "paired stores need adjacent columns in a lane's accumulators");
DG_DEVICE void dg_store_f32x2(float* p, float x, float y) {  // p 8-byte aligned
#if defined(DG_VENDOR_AMD)
    typedef float f32x2 __attribute__((ext_vector_type(2)));
    f32x2 v = {x, y};
    *reinterpret_cast<f32x2*>(p) = v;
#else
    asm volatile("st.global.v2.f32 [%0], {%1, %2};" ::"l"(p), "f"(x), "f"(y) : "memory");
#endif
}
// #end skws
#if DG_SPLIT_K > 1
// Split-K epilogue: each k-slice adds its partial sums into dX (zeroed before the launch),
// fp32 one element at a time, fp16/bf16 as 4-byte-aligned packed pairs.
DG_DEVICE void dg_epilogue_atomic(dg_t* dx, const dg_sub& s, const float (&acc)[DG_MMA_M][DG_MMA_N][DG_ACC_PER_ATOM],
                                  int g, int m_tile, int n_tile, int wm, int wn, int lane) {
#pragma unroll
    for (int i = 0; i < DG_MMA_M; ++i) {
#pragma unroll
        for (int j = 0; j < DG_MMA_N; ++j) {
#pragma unroll
            for (int e = 0; e < DG_ACC_PER_ATOM; ++e) {
#if DG_ACC_PAIRED
                if (e & 1) continue;
#endif
                int m = m_tile * DG_TILE_M + dg_acc_row(wm, i, lane, e);
                int c = n_tile * DG_TILE_N + dg_acc_col(wn, j, lane, e);
                if (m >= s.gemm_m || c >= DG_CPG) continue;
                int pix = dg_dx_pixel(s, m);
                if (pix < 0) continue;
// #section skws
                {  // split-K through the workspace: this split's fp32 partial sums stored into its
                   // slice (dx is the slices' base), NHWC like dX, each covered element once; pairs
                   // of adjacent columns as one 8-byte store where cpg is even (c even: the offset
                   // is even and the pair stays inside the group)
                    float* p = reinterpret_cast<float*>(dx) +
                               ((long long)DG_BID_Z() * DG_WS_SLICE + (long long)pix * DG_C + g * DG_CPG + c);
#if DG_ACC_PAIRED && DG_VEC_C == 2
                    dg_store_f32x2(p, acc[i][j][e], acc[i][j][e + 1]);
#elif DG_ACC_PAIRED
                    p[0] = acc[i][j][e];
                    if (c + 1 < DG_CPG) p[1] = acc[i][j][e + 1];
#else
                    p[0] = acc[i][j][e];
#endif
                    continue;
                }
// #end skws
// #section nchw_dx
                {  // NCHW dX: channel c + 1 is a plane (Hi*Wi elements) further
                    const long long o = dg_nchw_offset(pix, g * DG_CPG + c);
#if DG_DTYPE == 0
                    dg_atomic_add1(dx + o, acc[i][j][e]);
#if DG_ACC_PAIRED
                    if (c + 1 < DG_CPG) dg_atomic_add1(dx + o + DG_HI * DG_WI, acc[i][j][e + 1]);
#endif
#else
                    dg_nchw_add16(dx, o, acc[i][j][e]);
#if DG_ACC_PAIRED
                    dg_nchw_add16(dx, o + DG_HI * DG_WI, acc[i][j][e + 1]);  // c even, cpg even: c + 1 < cpg
#endif
#endif
                    continue;
                }
// #end nchw_dx
                dg_t* p = dx + (long long)pix * DG_C + g * DG_CPG + c;
#if DG_DTYPE == 0
                dg_atomic_add1(p, acc[i][j][e]);
#if DG_ACC_PAIRED
                if (c + 1 < DG_CPG) dg_atomic_add1(p + 1, acc[i][j][e + 1]);
#endif
#elif DG_ACC_PAIRED
                dg_atomic_add2(p, acc[i][j][e], acc[i][j][e + 1]);  // c even, cpg even: pair in range
#else
                if (c & 1) dg_atomic_add2(p - 1, 0.0f, acc[i][j][e]);
                else dg_atomic_add2(p, acc[i][j][e], 0.0f);
#endif
            }
        }
    }
}
#endif

// #section patch
// dX offset of element (m, j) of the patch GEMM: row m = (n, ho, wo) is a dY pixel, column
// j = (y*X + x)*cpg + c a position of its patch; the X*cpg columns of one y are consecutive
// dX elements when G == 1.
DG_DEVICE long long dg_patch_offset(int m, int g, int j) {
    const int wo = m % DG_WO;
    const int nh = m / DG_WO;
    const int ho = nh % DG_HO;
    const int n = nh / DG_HO;
    const int y = j / (DG_PATCH_X * DG_PATCH_CPG);
    const int r = j - y * (DG_PATCH_X * DG_PATCH_CPG);
    const int x = r / DG_PATCH_CPG;
    const int c = r - x * DG_PATCH_CPG;
    const long long pix = ((long long)n * DG_PATCH_HI + ho * DG_PATCH_Y + y) * DG_PATCH_WI + wo * DG_PATCH_X + x;
    return pix * DG_PATCH_C + g * DG_PATCH_CPG + c;
}

// #end patch
// #section subpix
// dX offset of virtual dX' pixel pix, column j = (ry*SW + rx)*cpg + c of group g, or -1 where
// its real pixel lies outside dX (rows and columns of the last phase past Hi, Wi; the virtual
// rows before the first real one).
DG_DEVICE long long dg_subpix_offset(int pix, int g, int j) {
    const int bv = pix % DG_WI;
    const int nh = pix / DG_WI;
    const int av = nh % DG_HI;
    const int n = nh / DG_HI;
    const int ry = j / (DG_SP_SW * DG_SP_CPG);
    const int r = j - ry * (DG_SP_SW * DG_SP_CPG);
    const int rx = r / DG_SP_CPG;
    const int c = r - rx * DG_SP_CPG;
    const int hi = DG_SP_SH * (av - DG_SP_TOP) + ry;
    const int wi = DG_SP_SW * (bv - DG_SP_LEFT) + rx;
    if (hi < 0 || hi >= DG_SP_HI || wi < 0 || wi >= DG_SP_WI) return -1;
    return ((long long)n * DG_SP_HI + hi) * ((long long)DG_SP_WI * DG_SP_C) + (long long)wi * DG_SP_C + g * DG_SP_CPG + c;
}

// #end subpix
#if DG_SPLIT_K == 1
// Staged epilogue: the block's accumulators go to a TILE_M x TILE_N tile in shared memory
// (storage type, rows padded), then every thread stores whole DG_VEC_C-wide runs of c for
// one dX pixel at a time: coalesced, 16-byte stores where cpg allows.
#define DG_C_ROW (DG_TILE_N + DG_LDS_PAD)
typedef typename dg_bytes<DG_VEC_C * DG_EB>::type dg_vc_t;
// #section nchw_dx
// NCHW dX: the tile is staged transposed, one column of TILE_M pixels per channel
// (DG_CT_ROW apart: 16-byte aligned, and for 16-bit accumulator fragments of 8 rows x 4
// column pairs the padding spreads a warp's stores over distinct banks), and a thread stores
// a run of DG_NCHW_VEC consecutive pixels of one channel (spec.nchw_dx_vector).
#define DG_CT_ROW (DG_TILE_M + DG_LDS_PAD)
static_assert(DG_TILE_M % DG_NCHW_VEC == 0 && (DG_CT_ROW * DG_EB) % 16 == 0, "runs of pixels tile the column");
typedef typename dg_bytes<DG_NCHW_VEC * DG_EB>::type dg_vn_t;

// The dX pixel of GEMM row m0 when rows m0 .. m0 + DG_NCHW_VEC - 1 of this sub-GEMM are
// consecutive pixels of one dX row (so one vector store covers them), else -1.
DG_DEVICE int dg_dx_run(const dg_sub& s, int m0) {
    if (m0 + DG_NCHW_VEC > s.gemm_m) return -1;
#if DG_POINTWISE
    return m0 / (DG_HI * DG_WI) == (m0 + DG_NCHW_VEC - 1) / (DG_HI * DG_WI) ? m0 : -1;
#else
    const int hw = s.h_slice * s.w_slice;
    const int n = m0 / hw;
    const int r = m0 - n * hw;
    const int htl = r / s.w_slice;
    const int wtl = r - htl * s.w_slice;
    const int hi = htl * s.dx_h_stride + s.dx_h_offset;
    const int wi = wtl + s.dx_w_offset;
    if (s.dx_w_stride != 1 || wtl + DG_NCHW_VEC > s.w_slice || (unsigned)hi >= (unsigned)DG_HI || wi < 0 ||
        wi + DG_NCHW_VEC > DG_WI)
        return -1;
    return (n * DG_HI + hi) * DG_WI + wi;
#endif
}
// #end nchw_dx

DG_DEVICE void dg_epilogue_staged(dg_t* dx, const dg_sub& s, const float (&acc)[DG_MMA_M][DG_MMA_N][DG_ACC_PER_ATOM],
                                  int g, int m_tile, int n_tile, int wm, int wn, int lane, dg_t* Cs) {
#if !DG_PERSIST
    dg_cp_wait<0>();  // Cs overlays the A/B stages: no copy may still land there
#endif
    DG_SYNC();  // every warp is done reading the A/B stages (or the last tile's Cs)
// #section nchw_dx
#pragma unroll
    for (int i = 0; i < DG_MMA_M; ++i)
#pragma unroll
        for (int j = 0; j < DG_MMA_N; ++j)
#pragma unroll
            for (int e = 0; e < DG_ACC_PER_ATOM; ++e)
                Cs[dg_acc_col(wn, j, lane, e) * DG_CT_ROW + dg_acc_row(wm, i, lane, e)] = dg_from_float(acc[i][j][e]);
    DG_SYNC();
    {
        // Consecutive threads take consecutive runs of one channel's column: conflict-free
        // 16-byte reads of Cs, and a warp's vector stores cover whole sectors of a dX row.
        // A run that is not DG_NCHW_VEC aligned, consecutive pixels (a row end, a slice
        // border, the last rows) is stored one element at a time.
        constexpr int runs = DG_TILE_M / DG_NCHW_VEC;
#pragma unroll 2
        for (int u = DG_TID(); u < DG_TILE_N * runs; u += DG_THREADS) {
            const int col = u / runs;
            const int r0 = (u - col * runs) * DG_NCHW_VEC;
            const int ch = g * DG_CPG + n_tile * DG_TILE_N + col;
            const int m0 = m_tile * DG_TILE_M + r0;
            if (n_tile * DG_TILE_N + col >= DG_CPG || m0 >= s.gemm_m) continue;
            const dg_t* src = Cs + col * DG_CT_ROW + r0;
            const int pix0 = dg_dx_run(s, m0);
            if (pix0 >= 0) {
                const long long o = dg_nchw_offset(pix0, ch);
                if (o % DG_NCHW_VEC == 0) {
                    *reinterpret_cast<dg_vn_t*>(dx + o) = *reinterpret_cast<const dg_vn_t*>(src);
                    continue;
                }
            }
#pragma unroll
            for (int v = 0; v < DG_NCHW_VEC; ++v) {
                const int pix = m0 + v < s.gemm_m ? dg_dx_pixel(s, m0 + v) : -1;
                if (pix >= 0) dx[dg_nchw_offset(pix, ch)] = src[v];
            }
        }
    }
    return;
// #end nchw_dx
#pragma unroll
    for (int i = 0; i < DG_MMA_M; ++i)
#pragma unroll
        for (int j = 0; j < DG_MMA_N; ++j)
#pragma unroll
            for (int e = 0; e < DG_ACC_PER_ATOM; ++e) {
#if DG_ACC_PAIRED && DG_DTYPE != 0
                if (e & 1) continue;
                dg_u32 v = (dg_u32)dg_from_float(acc[i][j][e]) | ((dg_u32)dg_from_float(acc[i][j][e + 1]) << 16);
                *reinterpret_cast<dg_u32*>(Cs + dg_acc_row(wm, i, lane, e) * DG_C_ROW + dg_acc_col(wn, j, lane, e)) = v;
#else
                Cs[dg_acc_row(wm, i, lane, e) * DG_C_ROW + dg_acc_col(wn, j, lane, e)] = dg_from_float(acc[i][j][e]);
#endif
            }
    DG_SYNC();
    const int tid = DG_TID();
// #section nchw_patch
    // Units of DG_NCHW_PV rows x one column, the column fastest: a warp's lanes store the
    // runs of consecutive dY pixels wo, which lie DG_NCHW_PX elements apart in a dX row.
    static_assert(DG_NCHW_PV * DG_EB <= 16, "a dX vector of at most 16 bytes");
    typedef typename dg_bytes<DG_NCHW_PV * DG_EB>::type dg_vp_t;
#pragma unroll 2
    for (int u = tid; u < DG_TILE_M / DG_NCHW_PV * DG_TILE_N; u += DG_THREADS) {
        const int rg = u / DG_TILE_N;
        const int col = u - rg * DG_TILE_N;
        const int m = m_tile * DG_TILE_M + rg * DG_NCHW_PV;
        const int pix = n_tile * DG_TILE_N + col;
        if (m >= s.gemm_m || pix >= DG_CPG) continue;  // PV divides cpg*Y*X: all rows or none
        const int x = m % DG_NCHW_PX;
        const int cy = m / DG_NCHW_PX;
        const int y = cy % DG_NCHW_PY;
        const int c = cy / DG_NCHW_PY;
        const int ho = pix / DG_NCHW_WO;
        const int wo = pix - ho * DG_NCHW_WO;
        union { dg_vp_t v; dg_t e[DG_NCHW_PV]; } run;
#pragma unroll
        for (int e = 0; e < DG_NCHW_PV; ++e) run.e[e] = Cs[(rg * DG_NCHW_PV + e) * DG_C_ROW + col];
        dg_t* const to = dx + ((long long)c * DG_NCHW_HI + ho * DG_NCHW_PY + y) * DG_NCHW_WI + wo * DG_NCHW_PX + x;
#if DG_NCHW_PV * DG_EB == 16
        dg_store16(to, run.v);
#elif DG_NCHW_PV * DG_EB == 8
        dg_store8(to, run.v);
#else
        *reinterpret_cast<dg_vp_t*>(to) = run.v;
#endif
    }
    return;
// #end nchw_patch
    const int per_row = DG_TILE_N / DG_VEC_C;
#pragma unroll 4
    for (int u = tid; u < DG_TILE_M * per_row; u += DG_THREADS) {
        const int row = u / per_row;
        const int col = (u - row * per_row) * DG_VEC_C;
        const int m = m_tile * DG_TILE_M + row;
        const int c = n_tile * DG_TILE_N + col;
        if (m >= s.gemm_m || c >= DG_CPG) continue;  // DG_VEC_C divides cpg: all or nothing
// #section patch
        *reinterpret_cast<dg_vc_t*>(dx + dg_patch_offset(m, g, c)) = *reinterpret_cast<const dg_vc_t*>(Cs + row * DG_C_ROW + col);
        continue;
// #end patch
// #section subpix
        {
            const int vpix = dg_dx_pixel(s, m);
            const long long o = vpix < 0 ? -1 : dg_subpix_offset(vpix, g, c);
            if (o >= 0) *reinterpret_cast<dg_vc_t*>(dx + o) = *reinterpret_cast<const dg_vc_t*>(Cs + row * DG_C_ROW + col);
            continue;
        }
// #end subpix
        const int pix = dg_dx_pixel(s, m);
        if (pix < 0) continue;
        *reinterpret_cast<dg_vc_t*>(dx + (long long)pix * DG_C + g * DG_CPG + c) =
            *reinterpret_cast<const dg_vc_t*>(Cs + row * DG_C_ROW + col);
    }
}
#endif

#if DG_TMA
// #section ntshift
// The shifting producer's B rows of one k-tile. The stage's staging buffer S holds, per tile
// row b, 64 k rows of DG_NT_SW = 72 dY columns a .. a+71 (a tensor copy, unswizzled; a = the
// window's first column rounded down to a multiple of 8, so the copy starts 16-byte aligned);
// the window starts R columns later (R = the tap's column residue, a template constant). Unit
// u = (b, k, j) of 8 consecutive lanes per row: output chunk j (8 columns) is elements
// R+8j .. R+8j+7 of the staging row, in the aligned 16-byte chunks j (read by the lane) and
// j+1 (the next lane's, by a shuffle; lane j = 7 reads chunk 8), shifted in registers and
// stored into swizzled row k of B's 64-wide block b. Every lane of a warp runs every pass
// (DG_NT_BH * 512 units are whole passes of the producer warpgroup).
template <int R>
DG_DEVICE void dg_nt_shift_smem(const dg_t* S, dg_t* B, int ptid) {
#pragma unroll 2
    for (int u = ptid; u < DG_NT_BH * 64 * 8; u += DG_NT_PRODUCERS) {
        const int j = u % 8, k = u / 8 % 64, b = u / 512;
        const dg_t* row = S + (b * 64 + k) * DG_NT_SW;
        const dg_b16 lo = *reinterpret_cast<const dg_b16*>(row + 8 * j);
        dg_b16 out = lo;
        if (R) {
            dg_b16 hi;
#pragma unroll
            for (int e = 0; e < 4; ++e) hi.v[e] = __shfl_down_sync(0xffffffffu, lo.v[e], 1);
            if (j == 7) hi = *reinterpret_cast<const dg_b16*>(row + 64);
            const dg_u32 in[8] = {lo.v[0], lo.v[1], lo.v[2], lo.v[3], hi.v[0], hi.v[1], hi.v[2], hi.v[3]};
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int w = e + R / 2;   // the word holding element R + 2e
                out.v[e] = (R & 1) ? ((in[w] >> 16) | (in[w + 1] << 16)) : in[w];
            }
        }
        *reinterpret_cast<dg_b16*>(B + b * (DG_TILE_K * 64) + dg_sw128(k, 8 * j)) = out;
    }
}
DG_DEVICE void dg_nt_shift_staged(const dg_t* S, dg_t* B, int r, int ptid) {
    switch (r) {
    case 0: dg_nt_shift_smem<0>(S, B, ptid); break;
    case 1: dg_nt_shift_smem<1>(S, B, ptid); break;
    case 2: dg_nt_shift_smem<2>(S, B, ptid); break;
    case 3: dg_nt_shift_smem<3>(S, B, ptid); break;
    case 4: dg_nt_shift_smem<4>(S, B, ptid); break;
    case 5: dg_nt_shift_smem<5>(S, B, ptid); break;
    case 6: dg_nt_shift_smem<6>(S, B, ptid); break;
    default: dg_nt_shift_smem<7>(S, B, ptid); break;
    }
}
// #end ntshift
// Direct epilogue of the warp-specialised kernel (pointwise, one sub-GEMM): no shared
// memory and no barrier, so the producer warp keeps loading the next tile meanwhile.
// In the accumulator fragment the 4 lanes of a quad hold one row, 2 adjacent columns of
// every 8-column chunk; a 4x4 transpose inside the quad (3 shuffles per 4 chunks) gives
// each lane one whole chunk, 8 columns = 16 bytes, so a warp stores 8 rows x 64 bytes in
// full 32-byte sectors.
DG_DEVICE dg_u32 dg_pick4(dg_u32 a0, dg_u32 a1, dg_u32 a2, dg_u32 a3, int i) {
    return i == 0 ? a0 : i == 1 ? a1 : i == 2 ? a2 : a3;
}

DG_DEVICE void dg_epilogue_direct(dg_t* dx, const float (&acc)[DG_MMA_M][DG_MMA_N][DG_ACC_PER_ATOM],
                                  int g, const dg_tma_tile& tt, int n_tile, int wm, int wn, int lane) {
// #section nchw_dx
    // NCHW dX, element by element from the fragment: for one accumulator register, the 8
    // row groups of a warp are consecutive pixels of 4 channels, so a warp's store covers
    // four 16-byte runs of dX rows.
#pragma unroll
    for (int i = 0; i < DG_MMA_M; ++i)
#pragma unroll
        for (int e = 0; e < DG_ACC_PER_ATOM; ++e) {
            const int pix = dg_tma_pixel(tt, dg_acc_row(wm, i, lane, e));
            if (pix < 0) continue;
#pragma unroll
            for (int j = 0; j < DG_MMA_N; ++j) {
                const int c = n_tile * DG_TILE_N + dg_acc_col(wn, j, lane, e);
                if (c < DG_CPG) dx[dg_nchw_offset(pix, g * DG_CPG + c)] = dg_from_float(acc[i][j][e]);
            }
        }
    return;
// #end nchw_dx
    const int q = lane & 3;  // lane in the quad
#pragma unroll
    for (int i = 0; i < DG_MMA_M; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {  // rows r and r + 8 of the fragment
            const int pix = dg_tma_pixel(tt, dg_acc_row(wm, i, lane, 2 * h));
            dg_t* row = dx + (long long)pix * DG_C + g * DG_CPG + n_tile * DG_TILE_N + wn * DG_WARP_COLS;
#pragma unroll
            for (int j0 = 0; j0 < DG_MMA_N; j0 += 4) {
                dg_u32 in[4], out[4];
#pragma unroll
                for (int y = 0; y < 4; ++y)
                    in[y] = (dg_u32)dg_from_float(acc[i][j0 + y][2 * h]) |
                            ((dg_u32)dg_from_float(acc[i][j0 + y][2 * h + 1]) << 16);
                // out[y] = lane y's pair of chunk j0 + q: sent by lane y as its in[q].
                out[0] = out[1] = out[2] = out[3] = dg_pick4(in[0], in[1], in[2], in[3], q);
#pragma unroll
                for (int r = 1; r < 4; ++r) {
                    const int peer = q ^ r;
                    const dg_u32 got = __shfl_xor_sync(0xffffffffu, dg_pick4(in[0], in[1], in[2], in[3], peer), r);
#pragma unroll
                    for (int y = 0; y < 4; ++y) out[y] = (y == peer) ? got : out[y];
                }
                const int c = n_tile * DG_TILE_N + wn * DG_WARP_COLS + (j0 + q) * 8;
                if (pix >= 0 && c < DG_CPG) {  // cpg % 8 == 0: the chunk is in range
                    dg_b16 v;
                    v.v[0] = out[0]; v.v[1] = out[1]; v.v[2] = out[2]; v.v[3] = out[3];
// #section patch
                    // the patch GEMM: row pix is a dY pixel, the chunk 8 columns of one patch row
                    dg_store16(dx + dg_patch_offset(pix, g, c), v);
                    continue;
// #end patch
// #section subpix
                    {   // the sub-pixel GEMM: the chunk is 8 channels of one phase of virtual pixel pix
                        const long long o = dg_subpix_offset(pix, g, c);
                        if (o >= 0) dg_store16(dx + o, v);
                        continue;
                    }
// #end subpix
// #section nchw_tma
                    // the NCHW TMA GEMM: row pix is a channel, the chunk 8 pixels of one dX row
                    if (dg_nt_inside(tt, c)) dg_store16(dx + dg_nt_offset(tt, g, pix, c), v);
                    continue;
// #end nchw_tma
                    dg_store16(row + (j0 + q) * 8, v);
                }
            }
        }
}
// #section tmask
// Split epilogue of work unit (tile tt, k-slice z): adjacent column pairs of the fragment
// (cpg % 8 == 0: a pair never leaves the group) go as fp32 pairs into workspace slice z
// (skws; dx is the slices' base, NHWC), or are added into dX: packed 16-bit atomics (NHWC),
// or one element at a time as half of its aligned pair (NCHW dX, Hi*Wi even).
DG_DEVICE void dg_epilogue_split(dg_t* dx, const float (&acc)[DG_MMA_M][DG_MMA_N][DG_ACC_PER_ATOM],
                                 int g, const dg_tma_tile& tt, int z, int wm, int wn, int lane) {
#pragma unroll
    for (int i = 0; i < DG_MMA_M; ++i)
#pragma unroll
        for (int e = 0; e < DG_ACC_PER_ATOM; e += 2) {
            const int pix = dg_tma_pixel(tt, dg_acc_row(wm, i, lane, e));
            if (pix < 0) continue;
#pragma unroll
            for (int j = 0; j < DG_MMA_N; ++j) {
                const int c = tt.n_tile * DG_TILE_N + dg_acc_col(wn, j, lane, e);
                if (c >= DG_CPG) continue;
#if defined(DG_WS_SLICE)
                dg_store_f32x2(reinterpret_cast<float*>(dx) + ((long long)z * DG_WS_SLICE + (long long)pix * DG_C + g * DG_CPG + c),
                               acc[i][j][e], acc[i][j][e + 1]);
#elif defined(DG_DX_NCHW)
                const long long o = dg_nchw_offset(pix, g * DG_CPG + c);
                dg_nchw_add16(dx, o, acc[i][j][e]);
                dg_nchw_add16(dx, o + DG_HI * DG_WI, acc[i][j][e + 1]);
#else
                dg_atomic_add2(dx + (long long)pix * DG_C + g * DG_CPG + c, acc[i][j][e], acc[i][j][e + 1]);
#endif
            }
        }
}
// #end tmask
// #section tmsk
// The stream-K fixup. Only the warpgroups take part (named barrier 1; the producer warp has
// returned).
#define DG_SK_SLOT (DG_THREADS * DG_MMA_M * DG_MMA_N * DG_ACC_PER_ATOM)
DG_DEVICE void dg_consumer_sync() { asm volatile("bar.sync 1, %0;" ::"n"(DG_THREADS) : "memory"); }
// Raise flag f once every consumer thread's stores before it are visible device-wide
// (each thread's fence, the barrier, then one release store).
DG_DEVICE void dg_sk_raise(unsigned* f, int tid) {
    asm volatile("fence.acq_rel.gpu;" ::: "memory");
    dg_consumer_sync();
    if (tid == 0) asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(f), "r"(1u) : "memory");
}
// Wait until flag f is raised (one thread acquires it, the barrier passes it on).
DG_DEVICE void dg_sk_wait(const unsigned* f, int tid) {
    if (tid == 0) {
        unsigned v = 0;
        for (;;) {
            asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(f) : "memory");
            if (v) break;
            asm volatile("nanosleep.u32 64;");
        }
    }
    dg_consumer_sync();
}
// A slot holds the 4 accumulators of atom (i, j) of consumer thread tid as one 16-byte vector
// at float4 index (i * DG_MMA_N + j) * DG_THREADS + tid: each warp stores and loads 512
// contiguous bytes, and the loads are ordinary (not volatile) so they issue back to back.
static_assert(DG_ACC_PER_ATOM == 4, "a stream-K slot stores one 16-byte vector per atom");
#define DG_SK_BATCH 4
DG_DEVICE void dg_sk_st4(float* p, const float (&a)[4]) {
    *reinterpret_cast<float4*>(p) = make_float4(a[0], a[1], a[2], a[3]);
}
// Past L1, which other blocks' stores do not update (ld.global.cg); ordered after the
// acquire by dg_sk_wait's barrier.
DG_DEVICE void dg_sk_ld4(const float* p, float (&v)[4]) {
    const float4 t = __ldcg(reinterpret_cast<const float4*>(p));
    v[0] = t.x, v[1] = t.y, v[2] = t.z, v[3] = t.w;
}
// A later segment of a tile: its partial sums into this block's slot, then its flag.
DG_DEVICE void dg_sk_store(float* ws, int b, float (&acc)[DG_MMA_M][DG_MMA_N][DG_ACC_PER_ATOM], int tid) {
    float* slot = ws + DG_SK_FLAGS + (long long)b * DG_SK_SLOT + 4 * tid;
#pragma unroll
    for (int i = 0; i < DG_MMA_M; ++i)
#pragma unroll
        for (int j = 0; j < DG_MMA_N; ++j) dg_sk_st4(slot + (i * DG_MMA_N + j) * 4 * DG_THREADS, acc[i][j]);
    dg_sk_raise(reinterpret_cast<unsigned*>(ws) + b, tid);
}
// The owner of the tile whose k-tiles start at `base` (its run ends inside the tile): add the
// partial sums of blocks bid+1, bid+2, ... whose runs start before the tile ends, in order.
DG_DEVICE void dg_sk_fixup(float* ws, int bid, long long base, float (&acc)[DG_MMA_M][DG_MMA_N][DG_ACC_PER_ATOM],
                           int tid) {
    for (int b = bid + 1; b < DG_TILE_BLOCKS && (long long)b * DG_SK_ITERS / DG_TILE_BLOCKS < base + DG_SK_KT; ++b) {
        dg_sk_wait(reinterpret_cast<const unsigned*>(ws) + b, tid);
        const float* slot = ws + DG_SK_FLAGS + (long long)b * DG_SK_SLOT + 4 * tid;
        float (*a)[4] = reinterpret_cast<float (*)[4]>(&acc[0][0][0]);   // atom q = i * DG_MMA_N + j
#pragma unroll
        for (int q0 = 0; q0 < DG_MMA_M * DG_MMA_N; q0 += DG_SK_BATCH) {   // DG_SK_BATCH loads in flight
            float v[DG_SK_BATCH][4];
#pragma unroll
            for (int u = 0; u < DG_SK_BATCH; ++u)
                if (q0 + u < DG_MMA_M * DG_MMA_N) dg_sk_ld4(slot + (q0 + u) * 4 * DG_THREADS, v[u]);
#pragma unroll
            for (int u = 0; u < DG_SK_BATCH; ++u)
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    if (q0 + u < DG_MMA_M * DG_MMA_N) a[q0 + u][e] += v[u][e];
        }
    }
}
// #end tmsk
#endif

// ------------------------------------------------------------------ zero fill
#if DG_ZF_BLOCKS > 0
// #block axis_covered
// True iff some non-empty sub-GEMM writes dX row hi (resp. column wi): the phase
// i = ((hi + p) / d) mod tilde must satisfy (hi + p) % gcd == 0 and i < filter.
DG_DEVICE bool dg_axis_covered(int v, int pad, int stride, int dil, int gcd_sd, int tilde, int filt) {
    int t = v + pad;
    if (t % gcd_sd) return false;
#pragma unroll 1
    for (int i = 0; i < tilde && i < filt; ++i) {
        int r = t - dil * i;
        if (r >= 0 && r % stride == 0) return true;
    }
    return false;
}
// #end block axis_covered

DG_DEVICE void dg_zero_fill(dg_t* dx, int zb) {
    typedef typename dg_bytes<DG_VEC_Z * DG_EB>::type vz_t;
    const int units_per_pix = DG_C / DG_VEC_Z;
    const int total = DG_N * DG_HI * DG_WI * units_per_pix;
    for (int u = zb * DG_THREADS + DG_TID(); u < total; u += DG_ZF_BLOCKS * DG_THREADS) {
        int pix = u / units_per_pix;
        int wi = pix % DG_WI;
        int hi = (pix / DG_WI) % DG_HI;
// #section nchw_dx
        wi = u % DG_WI;  // NCHW dX (DG_VEC_Z == 1): element u's pixel is its last two axes
        hi = (u / DG_WI) % DG_HI;
// #end nchw_dx
        if (dg_axis_covered(hi, DG_PH, DG_SH, DG_DH, DG_GCD_H, DG_YTILDE, DG_Y) &&
            dg_axis_covered(wi, DG_PW, DG_SW, DG_DW, DG_GCD_W, DG_XTILDE, DG_X))
            continue;
        reinterpret_cast<vz_t*>(dx)[u] = dg_zero_bytes<DG_VEC_Z * DG_EB>();
    }
}
#endif

// ------------------------------------------------------------------ one output tile
// Where block-tile `t` (of this group and k-slice kz) lies: its sub-GEMM, tile coordinates
// and k-tile range.
struct dg_tile {
    dg_sub s;
    int m_tile, n_tile, kt0, kt1;
};

DG_DEVICE dg_tile dg_tile_at(int t, int kz) {
    dg_tile r;
    r.s = dg_find_sub(t);
    const int local = t - r.s.block_start;
    r.m_tile = local / r.s.n_tiles;
    r.n_tile = local - r.m_tile * r.s.n_tiles;
    const int k_tiles = (r.s.gemm_k + DG_TILE_K - 1) / DG_TILE_K;
    const int per_split = (k_tiles + DG_SPLIT_K - 1) / DG_SPLIT_K;
    r.kt0 = kz * per_split;
    r.kt1 = r.kt0 + per_split < k_tiles ? r.kt0 + per_split : k_tiles;
    return r;
}

#if DG_STAGES > 1
// Pipeline prologue: the first DG_AHEAD k-tiles of `tl` in flight (stages 0 .. DG_AHEAD-1).
DG_DEVICE void dg_prologue(const dg_t* dy, const dg_t* w, const dg_tile& tl, const dg_arow (&ar)[DG_A_LOADS],
                           int g, dg_t* As, dg_t* Bs, dg_stage_regs& regs) {
#pragma unroll
    for (int st = 0; st < DG_AHEAD; ++st) {
        if (tl.kt0 + st < tl.kt1) {
            dg_fetch(dy, w, tl.s, ar, g, tl.n_tile, tl.kt0 + st, As + st * DG_A_STAGE, Bs + st * DG_B_STAGE, regs);
            dg_store_regs(As + st * DG_A_STAGE, Bs + st * DG_B_STAGE, regs);
        }
        dg_cp_commit();
    }
}

// Main loop over the k-tiles of `tl` (the prologue has issued the first DG_AHEAD): wait for
// tile kt, publish it, issue tile kt+DG_AHEAD, multiply tile kt. Accumulators are final on
// return.
DG_DEVICE void dg_mainloop(const dg_t* dy, const dg_t* w, const dg_tile& tl, const dg_arow (&ar)[DG_A_LOADS],
                           int g, dg_t* As, dg_t* Bs, dg_stage_regs& regs,
                           float (&acc)[DG_MMA_M][DG_MMA_N][DG_ACC_PER_ATOM], int wm, int wn, int lane) {
    for (int kt = tl.kt0; kt < tl.kt1; ++kt) {
        dg_cp_wait<DG_AHEAD - 1>();  // tile kt has landed
        dg_publish_smem();
        DG_SYNC();
        const int rd = (kt - tl.kt0) % DG_STAGES;
        const int wr = (kt - tl.kt0 + DG_AHEAD) % DG_STAGES;
        const bool more = kt + DG_AHEAD < tl.kt1;
        if (more) dg_fetch(dy, w, tl.s, ar, g, tl.n_tile, kt + DG_AHEAD, As + wr * DG_A_STAGE, Bs + wr * DG_B_STAGE, regs);
        dg_cp_commit();
        dg_compute(As + rd * DG_A_STAGE, Bs + rd * DG_B_STAGE, acc, wm, wn, lane);
        if (more) dg_store_regs(As + wr * DG_A_STAGE, Bs + wr * DG_B_STAGE, regs);
    }
    dg_mma_drain();
}
#endif

DG_DEVICE void dg_zero_acc(float (&acc)[DG_MMA_M][DG_MMA_N][DG_ACC_PER_ATOM]) {
#pragma unroll
    for (int i = 0; i < DG_MMA_M; ++i)
#pragma unroll
        for (int j = 0; j < DG_MMA_N; ++j)
#pragma unroll
            for (int e = 0; e < DG_ACC_PER_ATOM; ++e) acc[i][j][e] = 0.0f;
}

// ------------------------------------------------------------------ the kernel
DG_GLOBAL void DG_KERNEL_NAME(const dg_t* __restrict__ dy, const dg_t* __restrict__ w, dg_t* __restrict__ dx
// #section tmsk
                               , float* __restrict__ ws
// #end tmsk
#if DG_TMA
                               , const __grid_constant__ dg_tmap tm_dy, const __grid_constant__ dg_tmap tm_w
#endif
) {
    extern DG_SHARED __attribute__((aligned(16))) unsigned char dg_smem[];
    DG_GRID_DEPENDENCY();
    const int bid = DG_BID_X();
#if DG_ZF_BLOCKS > 0
    if (bid >= DG_TILE_BLOCKS) {
        if (DG_BID_Y() == 0 && DG_BID_Z() == 0) dg_zero_fill(dx, bid - DG_TILE_BLOCKS);
        return;
    }
#endif
// #section nchw_pw
    // Block row y = image * G + group: A (the dy argument) becomes W^T of the group (the
    // workspace copy, [G][cpg][kpg]), B (the w argument) dY[n, g] (kpg rows of H*W), dX[n, g]
    // (cpg rows of H*W); the virtual GEMM has one group.
    const int g = 0;
    {
        const int img = DG_BID_Y() / DG_NCHW_G;
        const int grp = DG_BID_Y() - img * DG_NCHW_G;
        const dg_t* dy_nchw = dy;
        dy = w + (long long)grp * DG_WI * DG_KPG;
        w = dy_nchw + ((long long)img * DG_NCHW_K + (long long)grp * DG_KPG) * DG_CPG;
        dx += ((long long)img * DG_NCHW_C + (long long)grp * DG_WI) * DG_CPG;
    }
// #end nchw_pw
// #section !nchw_pw
    const int g = DG_BID_Y();
// #end !nchw_pw
    const int kz = DG_BID_Z();
#if !DG_PERSIST && !DG_TMA
    const dg_tile tl = dg_tile_at(bid, kz);
#else
    (void)kz;
#endif

#if DG_WGMMA
    // Swizzle atoms need 1024-byte alignment; the spec reserves 1024 bytes of slack.
    dg_t* As = reinterpret_cast<dg_t*>(dg_smem + ((1024u - (dg_smem_addr(dg_smem) & 1023u)) & 1023u));
#else
    dg_t* As = reinterpret_cast<dg_t*>(dg_smem);
#endif
    dg_t* Bs = As + DG_STAGES * DG_A_STAGE;

    const int tid = DG_TID();
    const int lane = tid % DG_GROUP;  // lane of the warp / thread of the warpgroup
    const int warp = tid / DG_GROUP;
// #section !pingpong
    const int wm = warp / DG_WARP_N;
    const int wn = warp - wm * DG_WARP_N;
// #end !pingpong
// #section pingpong
    // Ping-pong: warpgroup `warp` (0 or 1) owns the block's tiles warp, warp + 2, ... (in the
    // order the producer loads them), each a whole one-warpgroup tile.
    const int wm = 0, wn = 0;
    static_assert(DG_THREADS == 256 && DG_WARP_M == 1 && DG_WARP_N == 1, "ping-pong: two one-warpgroup tiles");
// #end pingpong

    float acc[DG_MMA_M][DG_MMA_N][DG_ACC_PER_ATOM];
    dg_arow ar[DG_A_LOADS];
#if !DG_PERSIST && !DG_TMA
    dg_zero_acc(acc);
    dg_decode_arows(tl.s, tl.m_tile, ar);
#endif
    dg_stage_regs regs;

#if DG_TMA
    // Warp-specialised persistent blocks (every sub-GEMM's tiles, G groups along y). The
    // last warp is the producer: for each k-tile of each tile t = bid, bid + DG_TILE_BLOCKS,
    // ... it waits until consumers have released a stage (empty barrier), then issues the
    // A box (up to TILE_M x 64 of dY) and TILE_N/64 B boxes (64 x 64 of W) onto the stage's
    // full barrier; the K loop runs channel-chunk outer, tap inner. The warpgroups wait on
    // the full barrier, multiply, release the stage once their wgmma group has read it, and
    // store dX straight from the accumulators while the producer already fills the stages
    // with the next tile. Tiles of different sub-GEMMs have different K lengths; the
    // persistent blocks even them out.
    (void)dy; (void)w; (void)regs; (void)ar;
// #section !ntshift
    const dg_u32 full0 = dg_smem_addr(Bs + DG_STAGES * DG_B_STAGE);
// #end !ntshift
// #section ntshift
    dg_t* Ss = Bs + DG_STAGES * DG_B_STAGE;   // staging buffers, then the barriers
    const dg_u32 full0 = dg_smem_addr(Ss + DG_STAGES * DG_NT_S_STAGE);
    const dg_u32 staged0 = full0 + 16 * DG_STAGES;
// #end ntshift
    const dg_u32 empty0 = full0 + 8 * DG_STAGES;
// #section pingpong
    // Turn barriers: warpgroup w's main loop starts once turn0 + 8w has completed, i.e. once the
    // other warpgroup has passed every stage wait of its previous tile. So the warpgroups
    // multiply in turn (one's epilogue runs under the other's main loop), and a warpgroup
    // waits on a stage at most one phase ahead of it (the parity wait stays exact).
    const dg_u32 turn0 = empty0 + 8 * DG_STAGES;
// #end pingpong
    if (tid == 0) {
#pragma unroll
        for (int st = 0; st < DG_STAGES; ++st) {
// #section !ntshift
            dg_mbar_init(full0 + 8 * st, 1);
// #end !ntshift
// #section ntshift
            dg_mbar_init(full0 + 8 * st, 1 + DG_NT_PRODUCERS);  // A's bytes, then every producer's B rows
            dg_mbar_init(staged0 + 8 * st, 1);                   // the staging copy's bytes
// #end ntshift
// #section !pingpong
            dg_mbar_init(empty0 + 8 * st, DG_THREADS / 32);  // one arrival per consumer warp
// #end !pingpong
// #section pingpong
            dg_mbar_init(empty0 + 8 * st, 4);   // one arrival per warp of the stage's warpgroup
// #end pingpong
        }
// #section pingpong
        dg_mbar_init(turn0, 4);
        dg_mbar_init(turn0 + 8, 4);
// #end pingpong
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    DG_SYNC();
    const int chunks = (DG_KPG + DG_TILE_K - 1) / DG_TILE_K;
    if (tid >= DG_THREADS) {
// #section pwg
        // Registers: the producer warpgroup keeps DG_PWG_PRODUCER_REGS a thread, each consumer
        // warpgroup takes DG_PWG_CONSUMER_REGS (PTX ISA "setmaxnreg"; 40 x 128 + 232 x 256 =
        // 64512 of the 65536 a multiprocessor has, one block resident).
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(DG_PWG_PRODUCER_REGS));
// #end pwg
// #section !ntshift
        if (tid == DG_THREADS) {
// #end !ntshift
// #section ntshift
        const int ptid = tid - DG_THREADS;   // every producer thread stores B rows
        {
// #end ntshift
            int it = 0;
// #section !tmask|tmsk
            for (int t = bid; t < DG_TILES; t += DG_TILE_BLOCKS) {
                const dg_tma_tile tt = dg_tma_tile_at(t);
                const int k_tiles = chunks * tt.taps;
                for (int kt = 0; kt < k_tiles; ++kt, ++it) {
// #end !tmask|tmsk
// #section tmsk
            const long long it0 = (long long)bid * DG_SK_ITERS / DG_TILE_BLOCKS;
            const long long it1 = (long long)(bid + 1) * DG_SK_ITERS / DG_TILE_BLOCKS;
            for (int t = (int)(it0 / DG_SK_KT); (long long)t * DG_SK_KT < it1; ++t) {
                const dg_tma_tile tt = dg_tma_tile_at(t);
                const long long base = (long long)t * DG_SK_KT;
                const int kt1 = base + DG_SK_KT < it1 ? DG_SK_KT : (int)(it1 - base);
                for (int kt = it0 > base ? (int)(it0 - base) : 0; kt < kt1; ++kt, ++it) {
// #end tmsk
// #section tmask
            for (int u = bid; u < DG_TILES * DG_SPLIT_K; u += DG_TILE_BLOCKS) {
                const int z = u / DG_TILES;
                const dg_tma_tile tt = dg_tma_tile_at(u - z * DG_TILES);
                const int k_tiles = chunks * tt.taps;
                for (int kt = z * k_tiles / DG_SPLIT_K; kt < (z + 1) * k_tiles / DG_SPLIT_K; ++kt, ++it) {
// #end tmask
                    const int st = it % DG_STAGES;
                    dg_mbar_wait(empty0 + 8 * st, ((it / DG_STAGES) & 1) ^ 1);
                    const dg_u32 full = full0 + 8 * st;
// #section !ntshift
                    dg_mbar_expect_tx(full, (DG_A_BOX_ELEMS + DG_B_STAGE) * DG_EB);
// #end !ntshift
                    const int chunk = kt / tt.taps;
                    const int tap = kt - chunk * tt.taps;
                    const int ydot = tap / tt.s.x_dot_slice;
                    const int xdot = tap - ydot * tt.s.x_dot_slice;
                    const int k0 = g * DG_KPG + chunk * DG_TILE_K;
                    const dg_u32 a_dst = dg_smem_addr(As + st * DG_A_STAGE);
// #section nchw_tma
                    {
                        // A: W^T of tap (y, x), 64 k x TILE_M channels; B: per tile row b the dY
                        // row h0 + b + ph - y*dh, columns from w0 + pw - x*dw, 64 k.
                        const int y = tap / DG_NT_X, x = tap - y * DG_NT_X;
                        const int c0 = tt.n0 % DG_NT_MT * DG_TILE_M;
// #end nchw_tma
// #section ntshift
                        if (ptid == 0) {
                            dg_mbar_expect_tx(full, DG_A_BOX_ELEMS * DG_EB);
// #end ntshift
// #section nchw_tma
#if DG_NT_W_CYX
                        dg_tma_load_4d(a_dst, &tm_w, chunk * DG_TILE_K, tap, c0, g, full);
#else
                        dg_tma_load_4d(a_dst, &tm_w, chunk * DG_TILE_K, c0, tap, g, full);
#endif
// #end nchw_tma
// #section ntshift
                        }
                        const int col0 = tt.w0 + DG_NT_PW - x * DG_NT_DW;   // the window's first dY column
                        const int r = ((col0 % 8) + 8) % 8;
                        dg_t* S = Ss + st * DG_NT_S_STAGE;
                        if (ptid == 0) {
                            dg_mbar_expect_tx(staged0 + 8 * st, DG_NT_S_STAGE * DG_EB);
#pragma unroll
                            for (int b = 0; b < DG_NT_BH; ++b)
                                dg_tma_load_4d(dg_smem_addr(S + b * 64 * DG_NT_SW), &tm_dy, col0 - r,
                                               tt.h0 + b + DG_NT_PH - y * DG_NT_DH, k0, tt.n0 / DG_NT_MT, staged0 + 8 * st);
                        }
                        dg_mbar_wait(staged0 + 8 * st, (it / DG_STAGES) & 1);
                        dg_nt_shift_staged(S, Bs + st * DG_B_STAGE, r, ptid);
                        dg_publish_smem();
                        dg_mbar_arrive(full);
                        continue;
// #end ntshift
// #section nchw_tma
#pragma unroll
                        for (int b = 0; b < DG_NT_BH; ++b)
                            dg_tma_load_4d(dg_smem_addr(Bs + st * DG_B_STAGE + b * (DG_TILE_K * 64)), &tm_dy,
                                           tt.w0 + DG_NT_PW - x * DG_NT_DW, tt.h0 + b + DG_NT_PH - y * DG_NT_DH, k0,
                                           tt.n0 / DG_NT_MT, full);
                        continue;
                    }
// #end nchw_tma
#if DG_TMA_RECT
                    dg_tma_load_4d(a_dst, &tm_dy, k0, tt.s.w_begin + tt.w0 - xdot * tt.s.dy_w_coeff,
                                   tt.s.h_begin + tt.h0 - ydot * tt.s.dy_h_coeff, tt.n0, full);
#else
                    dg_tma_load_2d(a_dst, &tm_dy, k0, tt.n0, full);
#endif
                    const int wtap = (ydot * tt.s.y_stride + tt.s.y_offset) * DG_X + xdot * tt.s.x_stride + tt.s.x_offset;
// #section !wgb32
#pragma unroll
                    for (int b = 0; b < DG_TILE_N / 64; ++b)
                        dg_tma_load_3d(dg_smem_addr(Bs + st * DG_B_STAGE + b * (DG_TILE_K * 64)), &tm_w,
                                       tt.n_tile * DG_TILE_N + b * 64, wtap, k0, full);
// #end !wgb32
// #section wgb32
                    // warp_tile_n 96, 160 or 224: TILE_N/32 boxes of 32 c x 64 k (64-byte swizzled rows)
#pragma unroll
                    for (int b = 0; b < DG_TILE_N / 32; ++b)
                        dg_tma_load_3d(dg_smem_addr(Bs + st * DG_B_STAGE + b * (DG_TILE_K * 32)), &tm_w,
                                       tt.n_tile * DG_TILE_N + b * 32, wtap, k0, full);
// #end wgb32
                }
            }
        }
        return;
    }
// #section pwg
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(DG_PWG_CONSUMER_REGS));
// #end pwg
    int it = 0;
// #section pingpong
    int turn = 0;   // the block's tiles handed out so far
// #end pingpong
// #section !tmask|tmsk
    for (int t = bid; t < DG_TILES; t += DG_TILE_BLOCKS) {
        const dg_tma_tile tt = dg_tma_tile_at(t);
        const int k_tiles = chunks * tt.taps;
// #end !tmask|tmsk
// #section pingpong
        const int round = turn >> 1;     // this warpgroup's main loops before this tile
        if ((turn++ & 1) != warp) {      // the other warpgroup's tile: its k-tiles still use the stages
            it += k_tiles;
            continue;
        }
        // Warpgroup 1's round r follows warpgroup 0's round r (completion r of turn1);
        // warpgroup 0's round r > 0 follows warpgroup 1's round r - 1 (completion r - 1 of turn0).
        if (warp == 1) dg_mbar_wait(turn0 + 8, round & 1);
        else if (round > 0) dg_mbar_wait(turn0, (round - 1) & 1);
// #end pingpong
// #section tmsk
    (void)chunks;
    const long long it0 = (long long)bid * DG_SK_ITERS / DG_TILE_BLOCKS;
    const long long it1 = (long long)(bid + 1) * DG_SK_ITERS / DG_TILE_BLOCKS;
    for (int t = (int)(it0 / DG_SK_KT); (long long)t * DG_SK_KT < it1; ++t) {
        const dg_tma_tile tt = dg_tma_tile_at(t);
        const long long base = (long long)t * DG_SK_KT;
        const int kt0 = it0 > base ? (int)(it0 - base) : 0;
        const int kt1 = base + DG_SK_KT < it1 ? DG_SK_KT : (int)(it1 - base);
        const int k_tiles = kt1 - kt0;
// #end tmsk
// #section tmask
    for (int u = bid; u < DG_TILES * DG_SPLIT_K; u += DG_TILE_BLOCKS) {
        const int z = u / DG_TILES;
        const dg_tma_tile tt = dg_tma_tile_at(u - z * DG_TILES);
        const int k_tiles = (z + 1) * (chunks * tt.taps) / DG_SPLIT_K - z * (chunks * tt.taps) / DG_SPLIT_K;
// #end tmask
        dg_zero_acc(acc);
        for (int kt = 0; kt < k_tiles; ++kt, ++it) {
            const int st = it % DG_STAGES;
            dg_mbar_wait(full0 + 8 * st, (it / DG_STAGES) & 1);
            dg_compute(As + st * DG_A_STAGE, Bs + st * DG_B_STAGE, acc, wm, wn, lane);
            // dg_compute leaves one wgmma group in flight: the previous k-tile's is done.
            if (kt > 0 && (tid & 31) == 0) dg_mbar_arrive(empty0 + 8 * ((it - 1) % DG_STAGES));
        }
// #section pingpong
        if ((tid & 31) == 0) dg_mbar_arrive(turn0 + 8 * (warp ^ 1));   // the other warpgroup's turn
// #end pingpong
        dg_mma_drain();
        if ((tid & 31) == 0) dg_mbar_arrive(empty0 + 8 * ((it - 1) % DG_STAGES));
// #section !tmask|tmsk
        dg_epilogue_direct(dx, acc, g, tt, tt.n_tile, wm, wn, lane);
// #end !tmask|tmsk
// #section tmask
        dg_epilogue_split(dx, acc, g, tt, z, wm, wn, lane);
// #end tmask
// #section tmsk
        if (kt0 > 0) {                   // a later segment of tile t: its partial sums go to the owner
            dg_sk_store(ws, bid, acc, tid);
            continue;
        }
        if (kt1 < DG_SK_KT) dg_sk_fixup(ws, bid, base, acc, tid);   // the tile goes on in later blocks
        dg_epilogue_direct(dx, acc, g, tt, tt.n_tile, wm, wn, lane);
// #end tmsk
    }
#elif DG_PERSIST
    // Persistent blocks (DG_TILE_BLOCKS of them) walk the tiles t = bid, bid + DG_TILE_BLOCKS, ...
    // The next tile's first k-tiles are issued before this tile's epilogue, which stages dX
    // in its own shared-memory tile Cs (after the A/B stages), so the copies overlap it.
    dg_t* Cs = Bs + DG_STAGES * DG_B_STAGE;
    int t = bid;
    dg_tile cur = dg_tile_at(t, kz);
    dg_decode_arows(cur.s, cur.m_tile, ar);
    dg_prologue(dy, w, cur, ar, g, As, Bs, regs);
    for (;;) {
        dg_zero_acc(acc);
        dg_mainloop(dy, w, cur, ar, g, As, Bs, regs, acc, wm, wn, lane);
        DG_SYNC();  // every warpgroup is done reading the stages the prologue refills
        const int next = t + DG_TILE_BLOCKS;
        dg_tile nxt = cur;
        if (next < DG_TILES) {
            nxt = dg_tile_at(next, kz);
            dg_decode_arows(nxt.s, nxt.m_tile, ar);
            dg_prologue(dy, w, nxt, ar, g, As, Bs, regs);
        }
        dg_epilogue_staged(dx, cur.s, acc, g, cur.m_tile, cur.n_tile, wm, wn, lane, Cs);
        if (next >= DG_TILES) break;
        t = next;
        cur = nxt;
    }
#else
#if DG_STAGES == 1
    for (int kt = tl.kt0; kt < tl.kt1; ++kt) {
        DG_SYNC();
        dg_fetch(dy, w, tl.s, ar, g, tl.n_tile, kt, As, Bs, regs);
        dg_store_regs(As, Bs, regs);
        dg_cp_commit();
        dg_cp_wait<0>();
        dg_publish_smem();
        DG_SYNC();
        dg_compute(As, Bs, acc, wm, wn, lane);
    }
#else
    dg_prologue(dy, w, tl, ar, g, As, Bs, regs);
    dg_mainloop(dy, w, tl, ar, g, As, Bs, regs, acc, wm, wn, lane);
#endif
#if DG_SPLIT_K > 1
    dg_epilogue_atomic(dx, tl.s, acc, g, tl.m_tile, tl.n_tile, wm, wn, lane);
#else
    dg_epilogue_staged(dx, tl.s, acc, g, tl.m_tile, tl.n_tile, wm, wn, lane, As);
#endif
#endif
}
