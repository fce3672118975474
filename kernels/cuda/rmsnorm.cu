// RMSNorm, fused residual-add + RMSNorm and the bf16 -> fp32 residual copy
// (tpb/kernels/gpu/rmsnorm.h). One block per row; each thread walks its chunks of the row in
// a fixed order and the block sums the partials with a fixed shuffle tree, so a row's result
// depends only on the row (bitwise the same on every call). The output step is written as
// explicit round-to-nearest products, weight * (x * inv_rms), in the reference's order. The
// row's pieces live in cuda/rmsnorm_row.cuh, shared with the fused MLA latent row.
#include "tpb/kernels/gpu/rmsnorm.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "tpb/check.h"
#include "tpb/cuda_check.h"
#include "cuda/bf16_vectors.cuh"
#include "cuda/rmsnorm_row.cuh"
#include "cuda/programmatic_launch.cuh"

namespace tpb::gpu {

namespace {

using detail::add_squares;
using detail::aligned16;
using detail::apply_norm;
using detail::block_sum;
using detail::inv_rms;
using detail::load_bf16;
using detail::norm_chunk;
using detail::row_sum_sq;
using detail::store_bf16;

constexpr int kThreads = detail::kRmsNormThreads;
constexpr std::int64_t kMaxBlocks = 1 << 16;

template <int V>
__device__ inline void load_f32(const float* p, float (&f)[V]) {
  if constexpr (V == 8) {
    const float4 a = reinterpret_cast<const float4*>(p)[0];
    const float4 b = reinterpret_cast<const float4*>(p)[1];
    f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w, f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
  } else {
    f[0] = *p;
  }
}

template <int V>
__device__ inline void store_f32(float* p, const float (&f)[V]) {
  if constexpr (V == 8) {
    reinterpret_cast<float4*>(p)[0] = make_float4(f[0], f[1], f[2], f[3]);
    reinterpret_cast<float4*>(p)[1] = make_float4(f[4], f[5], f[6], f[7]);
  } else {
    *p = f[0];
  }
}

template <int V>
__global__ void rmsnorm_kernel(const __nv_bfloat16* __restrict__ x, std::int64_t x_stride,
                               const __nv_bfloat16* __restrict__ weight, __nv_bfloat16* __restrict__ out,
                               std::int64_t out_stride, std::int64_t rows, std::int64_t dim, float eps) {
  detail::chain_after_prior_grids();
  __shared__ float smem[33];
  const std::int64_t chunks = dim / V;
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const __nv_bfloat16* xr = x + r * x_stride;
    const float inv = inv_rms(block_sum(row_sum_sq<V>(xr, chunks), smem), dim, eps);
    for (std::int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
      float f[V];
      norm_chunk<V>(xr, weight, c, inv, f);
      store_bf16<V>(out + r * out_stride + c * V, f);
    }
  }
}

// A row of up to kCachedChunks chunks per thread (hidden 7168 at V = 8: 3.5) stays in registers
// between the two passes, and each thread issues all its loads before the first add: at
// batch 1 the kernel is one block, and re-reading the row it had just written, chunk after
// chunk, made it a chain of memory latencies (6 us on an H200). The arithmetic, and so the
// bits, are those of the general path below.
constexpr int kCachedChunks = 4;

template <int V>
__global__ void add_rmsnorm_kernel(const __nv_bfloat16* __restrict__ delta, float* __restrict__ residual,
                                   const __nv_bfloat16* __restrict__ weight, __nv_bfloat16* __restrict__ out,
                                   std::int64_t rows, std::int64_t dim, float eps) {
  detail::chain_after_prior_grids();
  __shared__ float smem[33];
  const std::int64_t chunks = dim / V;
  const bool cached = chunks <= static_cast<std::int64_t>(kCachedChunks) * blockDim.x;
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    float* res = residual + r * dim;
    float sum_sq = 0.0f;
    if (cached) {
      float f[kCachedChunks][V], d[kCachedChunks][V], w[kCachedChunks][V];
#pragma unroll
      for (int j = 0; j < kCachedChunks; ++j) {
        const std::int64_t c = threadIdx.x + static_cast<std::int64_t>(j) * blockDim.x;
        if (c < chunks) {
          load_f32<V>(res + c * V, f[j]);
          if (delta != nullptr) load_bf16<V>(delta + r * dim + c * V, d[j]);
          load_bf16<V>(weight + c * V, w[j]);  // read now, used after the block's sum
        }
      }
#pragma unroll
      for (int j = 0; j < kCachedChunks; ++j) {
        const std::int64_t c = threadIdx.x + static_cast<std::int64_t>(j) * blockDim.x;
        if (c < chunks) {
          if (delta != nullptr) {
#pragma unroll
            for (int k = 0; k < V; ++k) f[j][k] = __fadd_rn(f[j][k], d[j][k]);
            store_f32<V>(res + c * V, f[j]);
          }
          add_squares<V>(f[j], sum_sq);
        }
      }
      const float inv = inv_rms(block_sum(sum_sq, smem), dim, eps);
#pragma unroll
      for (int j = 0; j < kCachedChunks; ++j) {
        const std::int64_t c = threadIdx.x + static_cast<std::int64_t>(j) * blockDim.x;
        if (c < chunks) {
          apply_norm<V>(w[j], inv, f[j]);
          store_bf16<V>(out + r * dim + c * V, f[j]);
        }
      }
      continue;
    }
    for (std::int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
      float f[V];
      load_f32<V>(res + c * V, f);
      if (delta != nullptr) {
        float d[V];
        load_bf16<V>(delta + r * dim + c * V, d);
#pragma unroll
        for (int k = 0; k < V; ++k) f[k] = __fadd_rn(f[k], d[k]);
        store_f32<V>(res + c * V, f);
      }
      add_squares<V>(f, sum_sq);
    }
    const float inv = inv_rms(block_sum(sum_sq, smem), dim, eps);
    // Each thread re-reads only the chunks it wrote itself above: no barrier is needed.
    for (std::int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
      float f[V], w[V];
      load_f32<V>(res + c * V, f);
      load_bf16<V>(weight + c * V, w);
      apply_norm<V>(w, inv, f);
      store_bf16<V>(out + r * dim + c * V, f);
    }
  }
}

__global__ void residual_from_bf16_kernel(const __nv_bfloat16* __restrict__ x, float* __restrict__ residual,
                                          std::int64_t count) {
  detail::chain_after_prior_grids();
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += step)
    residual[i] = __bfloat162float(x[i]);
}

unsigned row_blocks(std::int64_t rows) { return static_cast<unsigned>(std::min(rows, kMaxBlocks)); }

}  // namespace

void rmsnorm(const __nv_bfloat16* x, std::int64_t x_stride, const __nv_bfloat16* weight, __nv_bfloat16* out,
             std::int64_t out_stride, std::int64_t rows, std::int64_t dim, float eps, cudaStream_t stream) {
  TPB_CHECK(rows >= 0 && dim > 0 && x_stride >= dim && out_stride >= dim,
            "rmsnorm: rows " << rows << ", dim " << dim << ", strides " << x_stride << "/" << out_stride);
  if (rows == 0) return;
  if (detail::rmsnorm_vector_path(x, x_stride, weight, out, out_stride, dim)) {
    detail::launch_chained(rmsnorm_kernel<8>, row_blocks(rows), kThreads, 0, stream, x, x_stride, weight, out,
                           out_stride, rows, dim, eps);
  } else {
    detail::launch_chained(rmsnorm_kernel<1>, row_blocks(rows), kThreads, 0, stream, x, x_stride, weight, out,
                           out_stride, rows, dim, eps);
  }
  TPB_CUDA_CHECK_LAUNCH();
}

void add_rmsnorm(const __nv_bfloat16* delta, float* residual, const __nv_bfloat16* weight, __nv_bfloat16* out,
                 std::int64_t rows, std::int64_t dim, float eps, cudaStream_t stream) {
  TPB_CHECK(rows >= 0 && dim > 0, "add_rmsnorm: rows " << rows << ", dim " << dim);
  if (rows == 0) return;
  const bool vec = dim % 8 == 0 && (delta == nullptr || aligned16(delta)) && aligned16(residual) &&
                   aligned16(weight) && aligned16(out);
  if (vec) {
    detail::launch_chained(add_rmsnorm_kernel<8>, row_blocks(rows), kThreads, 0, stream, delta, residual, weight, out,
                           rows, dim, eps);
  } else {
    detail::launch_chained(add_rmsnorm_kernel<1>, row_blocks(rows), kThreads, 0, stream, delta, residual, weight, out,
                           rows, dim, eps);
  }
  TPB_CUDA_CHECK_LAUNCH();
}

void residual_from_bf16(const __nv_bfloat16* x, float* residual, std::int64_t count, cudaStream_t stream) {
  TPB_CHECK(count >= 0, "residual_from_bf16: count " << count);
  if (count == 0) return;
  const unsigned blocks = static_cast<unsigned>(std::min((count + kThreads - 1) / kThreads, std::int64_t{4096}));
  detail::launch_chained(residual_from_bf16_kernel, blocks, kThreads, 0, stream, x, residual, count);
  TPB_CUDA_CHECK_LAUNCH();
}

}  // namespace tpb::gpu
