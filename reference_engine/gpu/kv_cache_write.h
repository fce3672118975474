// Writes the new latent rows of a step into the engine's KV cache at per-sequence positions
// read on the device, so a captured decode graph writes wherever the current length is:
//   cache[(t / n) * max_len + positions[t], :] = rows[t, :]      t < tokens
// rows: [tokens, width] bf16 (sequence b's n new tokens are rows b*n .. b*n+n-1);
// cache: one layer, [batch, max_len, width] bf16. Positions must be < max_len (the engine
// checks lengths on the host before a step). The engine now writes its rows with the fused
// gpu::mla_kv_row (tpb/kernels/gpu/mla_kv_row.h); this stays as the unfused step its tests
// compare that kernel with, bit for bit.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace tpb::gpu {

void kv_cache_write(const __nv_bfloat16* rows, std::int64_t tokens, std::int64_t n, const std::int32_t* positions,
                    __nv_bfloat16* cache, std::int64_t max_len, std::int64_t width, cudaStream_t stream);

// Host reference on bf16 bits, for the test.
void kv_cache_write_ref(const std::uint16_t* rows, std::int64_t tokens, std::int64_t n, const std::int32_t* positions,
                        std::uint16_t* cache, std::int64_t max_len, std::int64_t width);

}  // namespace tpb::gpu
