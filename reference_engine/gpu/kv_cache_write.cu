// See kv_cache_write.h. A pure copy: one block per row, threads over the row's elements.
#include "reference_engine/gpu/kv_cache_write.h"

#include <cstring>

#include "tpb/check.h"
#include "tpb/cuda_check.h"

namespace tpb::gpu {
namespace {

__global__ void kv_cache_write_kernel(const __nv_bfloat16* rows, std::int64_t n, const std::int32_t* positions,
                                      __nv_bfloat16* cache, std::int64_t max_len, std::int64_t width) {
  const std::int64_t t = blockIdx.x;
  const std::int64_t dst_row = (t / n) * max_len + positions[t];
  const __nv_bfloat16* src = rows + t * width;
  __nv_bfloat16* dst = cache + dst_row * width;
  for (std::int64_t i = threadIdx.x; i < width; i += blockDim.x) dst[i] = src[i];
}

}  // namespace

void kv_cache_write(const __nv_bfloat16* rows, std::int64_t tokens, std::int64_t n, const std::int32_t* positions,
                    __nv_bfloat16* cache, std::int64_t max_len, std::int64_t width, cudaStream_t stream) {
  TPB_CHECK(tokens >= 0 && n > 0 && tokens % n == 0 && max_len > 0 && width > 0,
            "kv_cache_write: bad shape (tokens " << tokens << ", n " << n << ", max_len " << max_len << ", width "
                                                  << width << ")");
  TPB_CHECK(tokens <= 0x7fffffff, "kv_cache_write: " << tokens << " rows exceed the grid");
  if (tokens == 0) return;
  kv_cache_write_kernel<<<static_cast<unsigned>(tokens), 128, 0, stream>>>(rows, n, positions, cache, max_len, width);
  TPB_CUDA_CHECK_LAUNCH();
}

void kv_cache_write_ref(const std::uint16_t* rows, std::int64_t tokens, std::int64_t n, const std::int32_t* positions,
                        std::uint16_t* cache, std::int64_t max_len, std::int64_t width) {
  for (std::int64_t t = 0; t < tokens; ++t)
    std::memcpy(cache + ((t / n) * max_len + positions[t]) * width, rows + t * width, sizeof(std::uint16_t) * width);
}

}  // namespace tpb::gpu
