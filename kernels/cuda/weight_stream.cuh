// One warp streaming kRows weight rows once and applying them to up to kTok activation rows:
// the inner loop of the memory-bound GEMMs at decode (expert_gemm.cu, gemv.cu). Internal to
// kernels/cuda.
//
// Numerics: fp32 products and sums. Lane l sums k = 8l + 256i in increasing i (8 products
// per step in index order), then the 32 lane sums meet in a fixed xor butterfly; the order
// depends on no tuning parameter, so every caller and variant gives the same bits.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace tpb::gpu::detail {

constexpr int kStreamVec = 8;  // bf16 per 16-byte load

// 8 bf16 (one 16-byte load) widened to fp32, once per load rather than once per product.
__device__ __forceinline__ void widen8(const uint4& v, float (&f)[kStreamVec]) {
  const __nv_bfloat162* p = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 t = __bfloat1622float2(p[i]);
    f[2 * i] = t.x;
    f[2 * i + 1] = t.y;
  }
}

// The 8-term partial dot product of one step, summed in index order.
__device__ __forceinline__ float dot8(const float (&a)[kStreamVec], const float (&b)[kStreamVec]) {
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < kStreamVec; ++i) s = fmaf(a[i], b[i], s);
  return s;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int m = 16; m >= 1; m >>= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
  return v;
}

// acc[j][t] = this lane's partial of w_row(j) · x_row(t) over k = 8 lane + 256 i, for the
// warp's `rows` (<= kRows) weight rows and `n` (<= kTok, warp-uniform) activation rows.
// wrow: row 0 of the warp's rows, the next `in_vecs` 16-byte vectors further; xrow: token 0,
// the next x_stride_vecs further. kUnroll weight loads per row are in flight per lane, all
// issued before any is used.
template <int kRows, int kUnroll, int kTok>
__device__ __forceinline__ void stream_rows(const uint4* __restrict__ wrow, int in_vecs, int rows,
                                            const uint4* __restrict__ xrow, int x_stride_vecs, int n, int lane,
                                            float (&acc)[kRows][kTok]) {
#pragma unroll
  for (int j = 0; j < kRows; ++j)
#pragma unroll
    for (int t = 0; t < kTok; ++t) acc[j][t] = 0.f;
  for (int v0 = lane; v0 < in_vecs; v0 += 32 * kUnroll) {
    uint4 wv[kUnroll][kRows];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int j = 0; j < kRows; ++j) {
        const int v = v0 + u * 32;
        wv[u][j] = (v < in_vecs && j < rows) ? __ldg(wrow + j * in_vecs + v) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int v = v0 + u * 32;
      if (v < in_vecs) {  // false only in the row's last steps; they would add nothing
#pragma unroll
        for (int t = 0; t < kTok; ++t) {
          if (t < n) {  // warp-uniform
            float xf[kStreamVec];
            widen8(__ldg(xrow + t * x_stride_vecs + v), xf);
#pragma unroll
            for (int j = 0; j < kRows; ++j) {
              float wf[kStreamVec];
              widen8(wv[u][j], wf);
              acc[j][t] += dot8(wf, xf);
            }
          }
        }
      }
    }
  }
}

// Reduces acc over the warp and stores y(t, j) = bf16(sum) at y + t * y_stride + j, for
// j < rows and t < n: every lane ends with every sum, lane j * kTok + t stores one.
template <int kRows, int kTok>
__device__ __forceinline__ void store_rows(const float (&acc)[kRows][kTok], int rows, int n, int lane,
                                           __nv_bfloat16* __restrict__ y, std::int64_t y_stride) {
  static_assert(kRows * kTok <= 32, "one output per lane in the store");
  float mine = 0.f;
#pragma unroll
  for (int j = 0; j < kRows; ++j)
#pragma unroll
    for (int t = 0; t < kTok; ++t)
      if (t < n) {
        const float s = warp_sum(acc[j][t]);
        if (lane == j * kTok + t) mine = s;
      }
  const int j = lane / kTok, t = lane % kTok;
  if (j < rows && t < n) y[t * y_stride + j] = __float2bfloat16(mine);
}

}  // namespace tpb::gpu::detail
