// MLA attention, the plain (non-absorbed) form HF computes, for one sequence and the heads
// of one rank: keys are [k_nope (per head) | k_rot (shared by all heads)], values per head.
//   score[h, i, j] = (q_nope[i, h]·k_nope[j, h] + q_rot[i, h]·k_rot[j]) * scale,  j <= q_pos0 + i
//   out[i, h]      = sum_j softmax_j(score[h, i, :]) * v[j, h]
// Query i sits at position q_pos0 + i; key j at position j (keys 0..kv_len-1 of the sequence).
#pragma once

#include <cstdint>

namespace tpb::kernels {

struct MlaShape {
  std::int64_t heads = 0;  // heads on this rank
  std::int64_t nope = 0;   // qk_nope_head_dim
  std::int64_t rope = 0;   // qk_rope_head_dim
  std::int64_t v_dim = 0;  // v_head_dim
  std::int64_t kv_lora = 0;  // kv_lora_rank (absorbed form only)
};

// q:      [q_len, heads, nope + rope]   (rope part already rotated)
// k_nope: [kv_len, heads, nope];  k_rot: [kv_len, rope] (rotated);  v: [kv_len, heads, v_dim]
// out:    [q_len, heads, v_dim].  Needs kv_len >= q_pos0 + q_len.
void mla_attention_ref(const float* q, const float* k_nope, const float* k_rot, const float* v, float* out,
                       std::int64_t q_len, std::int64_t kv_len, std::int64_t q_pos0, const MlaShape& shape,
                       float scale);

// Softmax over n scores in place, max-subtracted, fp32 (shared by both MLA forms).
void softmax_inplace_ref(float* scores, std::int64_t n);

}  // namespace tpb::kernels
