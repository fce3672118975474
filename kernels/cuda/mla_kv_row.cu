// The fused MLA latent-KV row (tpb/kernels/gpu/mla_kv_row.h). One block of rmsnorm's
// kRmsNormThreads threads per token (grid-stride over tokens past 65536 blocks): the block
// norms the latent slice with cuda/rmsnorm_row.cuh's pieces, on the path (V = 8 or 1) that
// rmsnorm itself would take for ckv, norm_weight and kvrow, so each thread owns the same
// chunks in the same order and the fixed shuffle tree adds the same partials: the normed
// values are rmsnorm's bits. Thread i < rope / 2 (strided by the block) rotates pair i with
// cuda/rope_pair.cuh, rope_interleaved's arithmetic, on ckv's bf16 rope values (the values
// the copy would have put in kvrow). Every finished value is stored twice, into kvrow and
// into the token's cache row; the cache row's other columns are copied from kvrow.
#include "tpb/kernels/gpu/mla_kv_row.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "tpb/check.h"
#include "tpb/cuda_check.h"
#include "tpb/dtype.h"
#include "tpb/kernels/rmsnorm.h"
#include "cuda/bf16_vectors.cuh"
#include "cuda/rmsnorm_row.cuh"
#include "cuda/rope_pair.cuh"
#include "cuda/programmatic_launch.cuh"

namespace tpb::gpu {

void mla_kv_row_ref(const std::uint16_t* ckv, const std::uint16_t* norm_weight, float eps,
                    const std::int32_t* positions, const kernels::RopeTable& table, const MlaKvRowShape& shape,
                    float* kvrow) {
  const MlaKvRowShape& s = shape;
  TPB_CHECK(static_cast<std::int64_t>(table.inv_freq.size()) * 2 == s.rope,
            "mla_kv_row_ref: rope " << s.rope << " but " << table.inv_freq.size() << " frequencies");
  const std::int64_t width = s.kv_lora + s.rope;
  std::vector<float> x(static_cast<std::size_t>(width)), w(static_cast<std::size_t>(s.kv_lora));
  for (std::int64_t i = 0; i < s.kv_lora; ++i) w[i] = bf16_to_float(norm_weight[i]);
  for (std::int64_t t = 0; t < s.tokens; ++t) {
    for (std::int64_t i = 0; i < width; ++i) x[i] = bf16_to_float(ckv[t * width + i]);
    float* out = kvrow + t * s.row;
    kernels::rmsnorm_ref(x.data(), w.data(), out, 1, s.kv_lora, s.kv_lora, eps);
    std::copy(x.begin() + s.kv_lora, x.end(), out + s.rope_at);
    const std::int64_t position = positions[t];
    kernels::rope_interleaved_ref(out + s.rope_at, 1, s.row, 1, &position, table);
  }
}

namespace {

using detail::block_sum;
using detail::inv_rms;
using detail::norm_chunk;
using detail::row_sum_sq;
using detail::store_bf16;

constexpr int kThreads = detail::kRmsNormThreads;  // rmsnorm's block: the sum's order depends on it
constexpr std::int64_t kMaxBlocks = 1 << 16;

// store_bf16<V> for a destination that may not be 16-byte aligned: the same round-to-nearest
// per element.
template <int V>
__device__ inline void store_bf16_elementwise(__nv_bfloat16* p, const float (&f)[V]) {
#pragma unroll
  for (int k = 0; k < V; ++k) p[k] = __float2bfloat16_rn(f[k]);
}

// cache_vector: the cache rows are 16-byte aligned, so V = 8 chunks store as vectors there too
// (kvrow's are, whenever V = 8).
template <int V>
__global__ void mla_kv_row_kernel(const __nv_bfloat16* __restrict__ ckv, const __nv_bfloat16* __restrict__ norm_weight,
                                  float eps, const std::int32_t* __restrict__ positions,
                                  const float* __restrict__ inv_freq, float attention_factor, MlaKvRowShape s,
                                  bool cache_vector, __nv_bfloat16* __restrict__ kvrow,
                                  __nv_bfloat16* __restrict__ cache) {
  detail::chain_after_prior_grids();
  __shared__ float smem[33];
  const std::int64_t width = s.kv_lora + s.rope, chunks = s.kv_lora / V, half = s.rope / 2;
  for (std::int64_t t = blockIdx.x; t < s.tokens; t += gridDim.x) {
    const __nv_bfloat16* xr = ckv + t * width;
    __nv_bfloat16* out = kvrow + t * s.row;
    const std::int32_t position = positions[t];
    __nv_bfloat16* dst = cache + ((t / s.n) * s.max_len + position) * s.row;

    const float inv = inv_rms(block_sum(row_sum_sq<V>(xr, chunks), smem), s.kv_lora, eps);
    for (std::int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
      float f[V];
      norm_chunk<V>(xr, norm_weight, c, inv, f);
      store_bf16<V>(out + c * V, f);
      if (cache_vector)
        store_bf16<V>(dst + c * V, f);
      else
        store_bf16_elementwise<V>(dst + c * V, f);
    }

    const float pos = static_cast<float>(position);
    for (std::int64_t i = threadIdx.x; i < half; i += blockDim.x) {
      const __nv_bfloat16* p = xr + s.kv_lora + 2 * i;
      __nv_bfloat16 ra, rb;
      detail::rope_rotate_pair(pos, inv_freq[i], attention_factor, __bfloat162float(p[0]), __bfloat162float(p[1]),
                               ra, rb);
      out[s.rope_at + 2 * i] = ra;
      out[s.rope_at + 2 * i + 1] = rb;
      dst[s.rope_at + 2 * i] = ra;
      dst[s.rope_at + 2 * i + 1] = rb;
    }

    // The pads between the parts and after the rope: kvrow's values, as kv_cache_write copies them.
    for (std::int64_t j = s.kv_lora + threadIdx.x; j < s.rope_at; j += blockDim.x) dst[j] = out[j];
    for (std::int64_t j = s.rope_at + s.rope + threadIdx.x; j < s.row; j += blockDim.x) dst[j] = out[j];
  }
}

}  // namespace

void mla_kv_row(const __nv_bfloat16* ckv, const __nv_bfloat16* norm_weight, float eps, const std::int32_t* positions,
                const float* inv_freq, float attention_factor, const MlaKvRowShape& shape, __nv_bfloat16* kvrow,
                __nv_bfloat16* cache, cudaStream_t stream) {
  const MlaKvRowShape& s = shape;
  TPB_CHECK(s.tokens >= 0 && s.n > 0 && s.tokens % s.n == 0 && s.kv_lora > 0 && s.rope > 0 && s.rope % 2 == 0 &&
                s.rope_at >= s.kv_lora && s.row >= s.rope_at + s.rope && s.max_len > 0,
            "mla_kv_row: bad shape (tokens " << s.tokens << ", n " << s.n << ", kv_lora " << s.kv_lora << ", rope "
                                             << s.rope << ", rope_at " << s.rope_at << ", row " << s.row
                                             << ", max_len " << s.max_len << ")");
  if (s.tokens == 0) return;
  const unsigned blocks = static_cast<unsigned>(std::min(s.tokens, kMaxBlocks));
  // The path gpu::rmsnorm(ckv, kv_lora + rope, norm_weight, kvrow, row, tokens, kv_lora) takes.
  if (detail::rmsnorm_vector_path(ckv, s.kv_lora + s.rope, norm_weight, kvrow, s.row, s.kv_lora)) {
    const bool cache_vector = detail::aligned16(cache);  // row % 8 == 0 here: every cache row is aligned too
    detail::launch_chained(mla_kv_row_kernel<8>, blocks, kThreads, 0, stream, ckv, norm_weight, eps, positions,
                           inv_freq, attention_factor, s, cache_vector, kvrow, cache);
  } else {
    detail::launch_chained(mla_kv_row_kernel<1>, blocks, kThreads, 0, stream, ckv, norm_weight, eps, positions,
                           inv_freq, attention_factor, s, false, kvrow, cache);
  }
  TPB_CUDA_CHECK_LAUNCH();
}

}  // namespace tpb::gpu
