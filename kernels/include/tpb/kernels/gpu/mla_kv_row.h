// The MLA latent-KV row of a step in one launch: for each new token t,
//   kvrow[t, 0 : kv_lora]              = rmsnorm(ckv[t, 0 : kv_lora]) * norm_weight
//   kvrow[t, rope_at : rope_at + rope] = rope(ckv[t, kv_lora : kv_lora + rope], positions[t])
//   cache[(t / n) * max_len + positions[t], :] = kvrow[t, :]
// which is what gpu::rmsnorm, a strided copy of the rope slice, gpu::rope_interleaved and
// gpu::kv_cache_write (reference_engine/gpu) do in four launches, bitwise: the norm is
// rmsnorm's arithmetic (same block size, same chunks per thread, same reduction tree) and the
// rotation rope_interleaved's (CPU references: tpb/kernels/rmsnorm.h, tpb/kernels/rope_yarn.h).
// kvrow's other columns (the zero pads of a padded layout, attention_widths.h) are not
// written; the cache row gets them from kvrow, as kv_cache_write copies the whole row.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "tpb/kernels/rope_yarn.h"

namespace tpb::gpu {

struct MlaKvRowShape {
  std::int64_t tokens = 0;   // new tokens of the step: batch * n
  std::int64_t n = 0;        // new tokens per sequence: token t belongs to sequence t / n
  std::int64_t kv_lora = 0;  // latent width normed (kv_lora_rank); ckv rows are kv_lora + rope wide
  std::int64_t rope = 0;     // rotary width (qk_rope_head_dim), even
  std::int64_t rope_at = 0;  // column of the rotary part in kvrow and the cache, >= kv_lora
  std::int64_t row = 0;      // kvrow's and the cache's row width, >= rope_at + rope
  std::int64_t max_len = 0;  // cache rows per sequence; positions[t] < max_len
};

// ckv: [tokens, kv_lora + rope] (kv_a's output); norm_weight: [kv_lora]; positions: device
// [tokens]; inv_freq: device [rope / 2]; kvrow: [tokens, row]; cache: one layer,
// [batch, max_len, row]. kvrow and cache must not overlap ckv or each other.
void mla_kv_row(const __nv_bfloat16* ckv, const __nv_bfloat16* norm_weight, float eps, const std::int32_t* positions,
                const float* inv_freq, float attention_factor, const MlaKvRowShape& shape, __nv_bfloat16* kvrow,
                __nv_bfloat16* cache, cudaStream_t stream);

// Host reference on the same bf16 inputs widened to fp32, for the test: writes kvrow's latent
// and rotary columns in fp32 ([tokens, row]) and leaves the others as they are. The cache rows
// are a copy of kvrow's (kv_cache_write_ref).
void mla_kv_row_ref(const std::uint16_t* ckv, const std::uint16_t* norm_weight, float eps,
                    const std::int32_t* positions, const kernels::RopeTable& table, const MlaKvRowShape& shape,
                    float* kvrow);

}  // namespace tpb::gpu
