// Store-pattern microbenchmark (no GEMM; thirty-first session, bench/RESULTS.md): how fast can a 128-pixel x 256-channel block tile of
// fp16 dX reach memory, NHWC vs NCHW, from the wgmma accumulator fragment or staged through
// shared memory? Two warpgroups a block, each 64 rows (pixels) x 256 columns (channels); lane
// layout of the m64nNk16 fragment: row 16*warp + lane/4 (+8), columns 8j + 2*(lane%4) (+1).
#include <cstdio>
#include <cstdint>
#include <cuda_fp16.h>
#define TM 128
#define TN 256
#define CW 32          // channels staged per round
#define RP (64 + 8)    // staging row pitch, elements

__device__ __forceinline__ float val(int pix, int c) { return (float)((pix * 7 + c * 3) & 1023); }
__device__ __forceinline__ void wg_sync(int wg) { asm volatile("bar.sync %0, 128;" ::"r"(wg + 2) : "memory"); }

// P0: NHWC, 16-byte chunks (each lane 8 channels of one row after the quad transpose): emulate
// with direct 16-byte stores of rows.
__device__ void nhwc(half* dx, int M, int C, int P, int mt, int nt) {
  int tid = threadIdx.x;
  for (int u = tid; u < TM * TN / 8; u += 256) {
    int r = u / (TN / 8), ch = (u % (TN / 8)) * 8;
    int pix = mt * TM + r, c = nt * TN + ch;
    if (pix >= M) continue;
    union { uint4 v; half e[8]; } q;
    for (int e = 0; e < 8; ++e) q.e[e] = __float2half(val(pix, c + e));
    *reinterpret_cast<uint4*>(dx + (long long)pix * C + c) = q.v;
  }
}
// P1: NCHW element by element from the fragment
__device__ void frag(half* dx, int M, int C, int P, int mt, int nt) {
  int tid = threadIdx.x, wg = tid / 128, warp = (tid / 32) % 4, lane = tid % 32;
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    int pix = mt * TM + wg * 64 + warp * 16 + lane / 4 + (e >> 1) * 8;
    if (pix >= M) continue;
    int n = pix / P, p = pix - n * P;
#pragma unroll
    for (int j = 0; j < TN / 8; ++j) {
      int c = nt * TN + 8 * j + 2 * (lane % 4) + (e & 1);
      dx[((long long)n * C + c) * P + p] = __float2half(val(pix, c));
    }
  }
}
// One round of the staged patterns: the warpgroup's fragment columns r0 .. r0+CW-1 into s
// (a row of RP elements a channel), between two warpgroup barriers.
__device__ void stage_round(half* s, int mt, int nt, int wg, int warp, int lane, int r0) {
  wg_sync(wg);
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    int row = warp * 16 + lane / 4 + (e >> 1) * 8, pix = mt * TM + wg * 64 + row;
#pragma unroll
    for (int j = 0; j < CW / 8; ++j) {
      int cl = 8 * j + 2 * (lane % 4) + (e & 1);
      s[cl * RP + row] = __float2half(val(pix, nt * TN + r0 + cl));
    }
  }
  wg_sync(wg);
}
// P2/P3: staged per warpgroup, rounds of CW channels; warp stores whole channel rows of 64 pixels
template <bool PAIRS>
__device__ void staged(half* dx, int M, int C, int P, int mt, int nt) {
  __shared__ __align__(16) half S[2][CW * RP];
  int tid = threadIdx.x, wg = tid / 128, warp = (tid / 32) % 4, lane = tid % 32;
  half* s = S[wg];
  // this lane's rows for the store phase: 2*lane, 2*lane + 1 of the warpgroup's 64
  int pa = mt * TM + wg * 64 + 2 * lane, pb = pa + 1;
  long long ba = -1, bb = -1;
  if (pa < M) { int n = pa / P; ba = (long long)n * C * P + (pa - n * P); }
  if (pb < M) { int n = pb / P; bb = (long long)n * C * P + (pb - n * P); }
  bool adj = ba >= 0 && bb == ba + 1;
  for (int r0 = 0; r0 < TN; r0 += CW) {
    stage_round(s, mt, nt, wg, warp, lane, r0);
#pragma unroll
    for (int k = 0; k < CW / 4; ++k) {
      int cl = warp * (CW / 4) + k, c = nt * TN + r0 + cl;
      __half2 v = *reinterpret_cast<const __half2*>(s + cl * RP + 2 * lane);
      long long oa = ba + (long long)c * P;
      if (PAIRS && adj && !(oa & 1)) { *reinterpret_cast<__half2*>(dx + oa) = v; continue; }
      if (ba >= 0) dx[oa] = v.x;
      if (bb >= 0) dx[bb + (long long)c * P] = v.y;
    }
  }
}
// P4: staged, lanes l and l + 32 (u16, each instruction 64 contiguous bytes)
__device__ void staged16(half* dx, int M, int C, int P, int mt, int nt) {
  __shared__ __align__(16) half S[2][CW * RP];
  int tid = threadIdx.x, wg = tid / 128, warp = (tid / 32) % 4, lane = tid % 32;
  half* s = S[wg];
  int pa = mt * TM + wg * 64 + lane, pb = pa + 32;
  long long ba = -1, bb = -1;
  if (pa < M) { int n = pa / P; ba = (long long)n * C * P + (pa - n * P); }
  if (pb < M) { int n = pb / P; bb = (long long)n * C * P + (pb - n * P); }
  for (int r0 = 0; r0 < TN; r0 += CW) {
    stage_round(s, mt, nt, wg, warp, lane, r0);
#pragma unroll
    for (int k = 0; k < CW / 4; ++k) {
      int cl = warp * (CW / 4) + k, c = nt * TN + r0 + cl;
      if (ba >= 0) dx[ba + (long long)c * P] = s[cl * RP + lane];
      if (bb >= 0) dx[bb + (long long)c * P] = s[cl * RP + lane + 32];
    }
  }
}

// P5: the fragment with a quad-pair exchange (one 32-bit shuffle per 8-column chunk): each
// store instruction covers 2 channels x 16 consecutive rows (a whole 32-byte sector when the
// run is aligned) instead of 4 channels x 8 rows.
__device__ void fragx(half* dx, int M, int C, int P, int mt, int nt) {
  int tid = threadIdx.x, wg = tid / 128, warp = (tid / 32) % 4, lane = tid % 32;
  int q = lane % 4, r = lane / 4, odd = q & 1;
  int row0 = mt * TM + wg * 64 + warp * 16 + r;        // rows r and r + 8
  long long b[2];
  for (int hh = 0; hh < 2; ++hh) {
    int pix = row0 + 8 * hh;
    b[hh] = pix < M ? (long long)(pix / P) * C * P + pix % P : -1;
  }
#pragma unroll
  for (int j = 0; j < TN / 8; ++j) {
    int cb = nt * TN + 8 * j + 2 * q;
    half v[4];   // (r, cb), (r, cb+1), (r+8, cb), (r+8, cb+1)
    for (int e = 0; e < 4; ++e) v[e] = __float2half(val(row0 + (e >> 1) * 8, cb + (e & 1)));
        __half2 send = __halves2half2(v[2], v[3]);   // rows r + 8 go to the partner quad
    unsigned u = __shfl_xor_sync(0xffffffffu, *reinterpret_cast<unsigned*>(&send), 1);
    __half2 got = *reinterpret_cast<__half2*>(&u);
    // instruction k (k = 0, 1: column offset): even quads store row r of column cb + k, odd
    // quads row r + 8 of the even quad's column (cb - 2 + k); then the mirror
    for (int k = 0; k < 2; ++k) {
      if (!odd) {
        if (b[0] >= 0) dx[b[0] + (long long)(cb + k) * P] = v[k];
      } else {
        if (b[1] >= 0) dx[b[1] + (long long)(cb - 2 + k) * P] = k ? got.y : got.x;
      }
    }
    for (int k = 0; k < 2; ++k) {
      if (odd) {
        if (b[0] >= 0) dx[b[0] + (long long)(cb + k) * P] = v[k];
      } else {
        if (b[1] >= 0) dx[b[1] + (long long)(cb + 2 + k) * P] = k ? got.y : got.x;
      }
    }
  }
}

template <int K>
__device__ void one(half* dx, int M, int C, int P, int mt, int nt) {
  if (K == 0) nhwc(dx, M, C, P, mt, nt);
  if (K == 1) frag(dx, M, C, P, mt, nt);
  if (K == 2) staged<false>(dx, M, C, P, mt, nt);
  if (K == 3) staged<true>(dx, M, C, P, mt, nt);
  if (K == 4) staged16(dx, M, C, P, mt, nt);
  if (K == 5) fragx(dx, M, C, P, mt, nt);
}
// grid mode: a block a tile; persistent mode: 132 blocks walk the tiles, the channel tile
// fastest (dgrad.cu's dg_tma_tile_at), as the TMA kernel's one block a multiprocessor does
template <int K>
__global__ void __launch_bounds__(256) run(half* dx, int M, int C, int P, int persistent) {
  const int nt_n = C / TN, tiles = (M + TM - 1) / TM * nt_n;
  if (!persistent) { one<K>(dx, M, C, P, blockIdx.x, blockIdx.y); return; }
  for (int t = blockIdx.x; t < tiles; t += gridDim.x) { __syncthreads(); one<K>(dx, M, C, P, t / nt_n, t % nt_n); }
}

int check(const half* d, int N, int C, int P) {  // NCHW value check on the host
  size_t n = (size_t)N * C * P; half* h = (half*)malloc(n * 2);
  cudaMemcpy(h, d, n * 2, cudaMemcpyDeviceToHost);
  int bad = 0;
  for (size_t i = 0; i < n; i += 97) {
    int p = i % P, c = (i / P) % C, nn = i / ((size_t)P * C);
    int pix = nn * P + p;
    float want = (float)((pix * 7 + c * 3) & 1023);
    if (__half2float(h[i]) != want) ++bad;
  }
  free(h); return bad;
}

int main() {
  struct { int N, C, P; const char* name; } shapes[] = {
      {16, 2048, 33 * 33, "ASPP 1x1 c2048 33x33 n16"}, {16, 1280, 33 * 33, "ASPP proj c1280 33x33"},
      {32, 256, 56 * 56, "c256 56x56 n32"}, {8, 256, 256 * 256, "c256 256x256 n8"},
      {32, 512, 28 * 28, "c512 28x28 n32"}, {64, 256, 73 * 73, "c256 73x73 n64"}};
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  const char* nm[] = {"nhwc16B", "frag", "staged", "stagedPair", "staged16", "fragx"};
  for (int persistent = 0; persistent < 2; ++persistent) {
    printf("--- %s\n", persistent ? "persistent: 132 blocks of 256 threads, 8 store warps a multiprocessor"
                                    : "grid: a block a tile");
    for (auto& sh : shapes) {
      int M = sh.N * sh.P, C = sh.C; size_t bytes = (size_t)M * C * 2;
      half* dx; cudaMalloc(&dx, bytes);
      dim3 grid = persistent ? dim3(132) : dim3((M + TM - 1) / TM, C / TN);
      printf("%-26s %6.1f MB:", sh.name, bytes / 1e6);
      for (int k = 0; k < 6; ++k) {
        cudaMemset(dx, 0xff, bytes);
        auto launch = [&]() {
          if (k == 0) run<0><<<grid, 256>>>(dx, M, C, sh.P, persistent);
          if (k == 1) run<1><<<grid, 256>>>(dx, M, C, sh.P, persistent);
          if (k == 2) run<2><<<grid, 256>>>(dx, M, C, sh.P, persistent);
          if (k == 3) run<3><<<grid, 256>>>(dx, M, C, sh.P, persistent);
          if (k == 4) run<4><<<grid, 256>>>(dx, M, C, sh.P, persistent);
          if (k == 5) run<5><<<grid, 256>>>(dx, M, C, sh.P, persistent);
        };
        launch(); cudaDeviceSynchronize();
        int bad = k ? check(dx, sh.N, C, sh.P) : 0;
        float best = 1e9;
        for (int rep = 0; rep < 5; ++rep) {
          cudaEventRecord(a); for (int it = 0; it < 10; ++it) launch(); cudaEventRecord(b);
          cudaEventSynchronize(b); float ms; cudaEventElapsedTime(&ms, a, b); best = ms / 10 < best ? ms / 10 : best;
        }
        printf("  %s %.1f us%s", nm[k], best * 1e3, bad ? " BAD" : "");
      }
      printf("\n");
      cudaFree(dx);
    }
  }
  printf("err: %s\n", cudaGetErrorString(cudaGetLastError()));
}
