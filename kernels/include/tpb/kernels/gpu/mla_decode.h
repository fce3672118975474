// GPU absorbed-MLA decode attention over the latent KV cache (CPU reference:
// tpb/kernels/mla_decode.h, the attention core of it). The engine absorbs W_UK into the query
// and W_UV into the output with batched GEMMs (tpb/kernels/gpu/linear.h); this kernel does
//   score_j = (q_lat · c_j + q_rot · k_rot_j) * scale        j < seq_lens[b]
//   o_lat   = sum_j softmax(score)_j * c_j
// for every (sequence, head), over a cache of [batch, max_len, kv_lora + rope] bf16 rows.
// Split-K (flash-decoding): the keys are cut into a number of splits fixed by max_len and the
// device (never by the data), each split keeps a running max and sum, and a second kernel
// merges the splits in split order. No atomics: the same bits every call, graph-safe
// (seq_lens live on the device, so a captured graph serves any length up to max_len).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace tpb::gpu {

struct MlaDecodeShape {
  std::int64_t batch = 0;    // sequences
  std::int64_t heads = 0;    // heads on this rank
  std::int64_t kv_lora = 0;  // latent width (512 for DeepSeek-V3)
  std::int64_t rope = 0;     // rotary width (64)
  std::int64_t max_len = 0;  // cache capacity per sequence, tokens
};

// Workspace bytes mla_decode_attention needs for `shape` (fp32 partial outputs + max/sum).
std::size_t mla_decode_workspace_bytes(const MlaDecodeShape& shape);

// q: [batch, heads, kv_lora + rope] (q_lat | rotated q_rot); cache: [batch, max_len, kv_lora + rope];
// seq_lens: device [batch], 1..max_len; o_lat: [batch, heads, kv_lora] bf16.
// workspace_capacity_bytes: the workspace's size; a plan that needs more throws instead of
// writing past it (the split plan depends on the device the call runs on, which may not be the
// one the workspace was sized on).
void mla_decode_attention(const __nv_bfloat16* q, const __nv_bfloat16* cache, const std::int32_t* seq_lens,
                          const MlaDecodeShape& shape, float scale, void* workspace,
                          std::size_t workspace_capacity_bytes, __nv_bfloat16* o_lat, cudaStream_t stream);

// Host reference over the same bf16 inputs (widened to fp32), for the test: o_lat in fp32.
void mla_decode_attention_ref(const std::uint16_t* q_bf16, const std::uint16_t* cache_bf16,
                              const std::int32_t* seq_lens, const MlaDecodeShape& shape, float scale, float* o_lat);

}  // namespace tpb::gpu
