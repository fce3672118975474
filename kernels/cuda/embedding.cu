// Vocab-parallel embedding gather (tpb/kernels/gpu/embedding.h). A pure copy: one block per
// token row, 16-byte loads where the row and both pointers allow it, a scalar path otherwise.
#include "tpb/kernels/gpu/embedding.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "tpb/check.h"
#include "tpb/cuda_check.h"
#include "cuda/bf16_vectors.cuh"
#include "cuda/programmatic_launch.cuh"

namespace tpb::gpu {

namespace {

using detail::aligned16;

constexpr int kThreads = 256;
constexpr std::int64_t kMaxBlocks = 1 << 16;

template <bool kVec>
__global__ void embedding_kernel(const std::int32_t* __restrict__ ids, std::int64_t tokens,
                                 const __nv_bfloat16* __restrict__ table, std::int64_t vocab_begin,
                                 std::int64_t vocab_end, std::int64_t hidden, __nv_bfloat16* __restrict__ out) {
  detail::chain_after_prior_grids();
  for (std::int64_t t = blockIdx.x; t < tokens; t += gridDim.x) {
    const std::int64_t local = static_cast<std::int64_t>(ids[t]) - vocab_begin;
    const bool owned = local >= 0 && local < vocab_end - vocab_begin;
    __nv_bfloat16* dst = out + t * hidden;
    if constexpr (kVec) {
      const std::int64_t n = hidden / 8;
      uint4* d = reinterpret_cast<uint4*>(dst);
      if (owned) {
        const uint4* s = reinterpret_cast<const uint4*>(table + local * hidden);
        for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) d[i] = s[i];
      } else {
        for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) d[i] = make_uint4(0, 0, 0, 0);
      }
    } else {
      if (owned) {
        const __nv_bfloat16* s = table + local * hidden;
        for (std::int64_t i = threadIdx.x; i < hidden; i += blockDim.x) dst[i] = s[i];
      } else {
        for (std::int64_t i = threadIdx.x; i < hidden; i += blockDim.x) dst[i] = __float2bfloat16_rn(0.0f);
      }
    }
  }
}


}  // namespace

void embedding_gather(const std::int32_t* ids, std::int64_t tokens, const __nv_bfloat16* table_shard,
                      std::int64_t vocab_begin, std::int64_t vocab_end, std::int64_t hidden, __nv_bfloat16* out,
                      cudaStream_t stream) {
  TPB_CHECK(tokens >= 0 && hidden > 0 && vocab_end >= vocab_begin,
            "embedding_gather: tokens " << tokens << ", hidden " << hidden << ", vocab [" << vocab_begin << ", "
                                        << vocab_end << ")");
  if (tokens == 0) return;
  const unsigned blocks = static_cast<unsigned>(std::min(tokens, kMaxBlocks));
  if (hidden % 8 == 0 && aligned16(table_shard) && aligned16(out)) {
    detail::launch_chained(embedding_kernel<true>, blocks, kThreads, 0, stream, ids, tokens, table_shard, vocab_begin,
                           vocab_end, hidden, out);
  } else {
    detail::launch_chained(embedding_kernel<false>, blocks, kThreads, 0, stream, ids, tokens, table_shard, vocab_begin,
                           vocab_end, hidden, out);
  }
  TPB_CUDA_CHECK_LAUNCH();
}

}  // namespace tpb::gpu
