// The pieces of one RMSNorm row that every norm kernel shares (rmsnorm.cu, and the fused MLA
// latent row in mla_kv_row.cu): each thread's partial sum of squares over its chunks of the
// row, the block's fixed-order sum, inv_rms and the output products (add_rmsnorm's fp32 rows
// use add_squares and apply_norm too). One definition, so that
// a norm computed inside a fused kernel is bitwise the one rmsnorm computes, as long as the
// kernel runs the same V on a block of kRmsNormThreads threads (the partials, and so the sum,
// depend on both). Internal to kernels/cuda.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "cuda/bf16_vectors.cuh"

namespace tpb::gpu::detail {

constexpr int kRmsNormThreads = 256;  // 8 warps: at hidden 7168 each thread owns 3.5 16-byte chunks

// Sum over the block of one value per thread, in a fixed order; every thread gets the total.
// smem: 33 floats. Ends with a barrier, so the caller may reuse smem at once.
__device__ inline float block_sum(float v, float* smem) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float w = lane < static_cast<int>(blockDim.x / 32) ? smem[lane] : 0.0f;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) w += __shfl_xor_sync(0xffffffffu, w, o);
    if (lane == 0) smem[32] = w;
  }
  __syncthreads();
  const float total = smem[32];
  __syncthreads();
  return total;
}

// The path rmsnorm takes for a call: V = 8 (16-byte chunks) when the row, both strides and
// the three pointers allow it, else V = 1. A kernel that must match rmsnorm bitwise asks this
// with the same arguments rmsnorm would get.
inline bool rmsnorm_vector_path(const void* x, std::int64_t x_stride, const void* weight, const void* out,
                                std::int64_t out_stride, std::int64_t dim) {
  return dim % 8 == 0 && x_stride % 8 == 0 && out_stride % 8 == 0 && aligned16(x) && aligned16(weight) &&
         aligned16(out);
}

__device__ inline float inv_rms(float sum_sq, std::int64_t dim, float eps) {
  return __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(sum_sq, static_cast<float>(dim)), eps)));
}

// sum_sq += the squares of one chunk, in element order.
template <int V>
__device__ inline void add_squares(const float (&f)[V], float& sum_sq) {
#pragma unroll
  for (int k = 0; k < V; ++k) sum_sq += f[k] * f[k];
}

// One chunk of the normed row in place: weight * (x * inv), each product rounded to nearest.
template <int V>
__device__ inline void apply_norm(const float (&w)[V], float inv, float (&f)[V]) {
#pragma unroll
  for (int k = 0; k < V; ++k) f[k] = __fmul_rn(w[k], __fmul_rn(f[k], inv));
}

// This thread's sum of squares over chunks threadIdx.x, + blockDim.x, ... of the row xr
// (`chunks` chunks of V bf16), in that order.
template <int V>
__device__ inline float row_sum_sq(const __nv_bfloat16* xr, std::int64_t chunks) {
  float sum_sq = 0.0f;
  for (std::int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
    float f[V];
    load_bf16<V>(xr + c * V, f);
    add_squares<V>(f, sum_sq);
  }
  return sum_sq;
}

// Chunk c of the normed row in fp32 (apply_norm of x's chunk c).
template <int V>
__device__ inline void norm_chunk(const __nv_bfloat16* xr, const __nv_bfloat16* weight, std::int64_t c, float inv,
                                  float (&f)[V]) {
  float w[V];
  load_bf16<V>(xr + c * V, f);
  load_bf16<V>(weight + c * V, w);
  apply_norm<V>(w, inv, f);
}

}  // namespace tpb::gpu::detail
