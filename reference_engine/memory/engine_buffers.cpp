#include "reference_engine/memory/engine_buffers.h"

#include <algorithm>

#include "reference_engine/memory/attention_widths.h"
#include "reference_engine/model/model_weights.h"
#include "tpb/kernels/mla_decode_split.h"

namespace tpb {

namespace {

constexpr std::int64_t kBf16 = 2, kF32 = 4, kI32 = 4;
constexpr std::int64_t kLinearWorkspaceBytes = std::int64_t{32} << 20;  // kernels/cuda/linear.cpp

// mla_decode's workspace for `batch` sequences with the split count its plan picks, at one
// resident CTA per SM (every split kernel's occupancy at the Kimi/DeepSeek row width; the
// heads-as-N one static_asserts it).
std::int64_t decode_workspace_bytes(std::int64_t batch, std::int64_t heads, std::int64_t lora, std::int64_t rope,
                                    std::int64_t max_len, int sms) {
  const kernels::MlaDecodeSplit split =
      kernels::mla_decode_split_for(batch, heads, max_len, kernels::mla_decode_wgmma_shape(lora, rope), std::max(sms, 1));
  return kernels::mla_decode_workspace_bytes_for(batch, heads, lora, split.splits);
}

}  // namespace

std::int64_t gpu_engine_buffer_bytes(const ModelConfig& c, const EngineBufferShape& s) {
  const ShardDims d = shard_dims(c, Shard{0, s.tp});
  const std::int64_t H = c.hidden_size, qk = c.qk_head_dim(), lora = c.kv_lora_rank, rope = c.qk_rope_head_dim;
  const std::int64_t width = lora + rope, nope = c.qk_nope_head_dim, vd = c.v_head_dim, kvr = nope + vd;
  const AttentionWidths a = attention_widths(c);  // the kernels' (padded) widths
  const std::int64_t heads = d.heads, E = c.n_routed_experts, K = c.num_experts_per_tok;
  const std::int64_t T = std::max(s.max_batch, s.max_prefill_tokens), Tp = s.max_prefill_tokens, B = s.max_batch;
  std::int64_t bytes = (rope / 2) * kF32;                         // inv_freq
  bytes += 2 * T * kI32 + B * kI32;                                // ids, positions, seq_lens
  bytes += T * H * kF32 + 2 * T * H * kBf16;                       // residual, delta, xn
  if (c.q_lora_rank > 0) bytes += 2 * T * c.q_lora_rank * kBf16;  // qa, qa_n
  bytes += T * heads * qk * kBf16;                                 // q
  bytes += T * (width + a.cache_row()) * kBf16;                    // ckv, kvrow
  bytes += Tp * heads * (kvr + a.nope + a.v) * kBf16 + Tp * rope * kBf16;  // kv, k_nope, v, k_rot (prefill)
  if (a.nope != nope) bytes += Tp * heads * (a.nope + rope) * kBf16;  // q_prefill (padded q rows)
  if (a.v != vd) bytes += Tp * heads * a.v * kBf16;                // attn_prefill (padded outputs)
  bytes += B * heads * (a.cache_row() + a.lora) * kBf16;           // qdec, o_lat (decode)
  std::int64_t ws = 0;
  for (std::int64_t b = 1; b <= B; ++b) ws = std::max(ws, decode_workspace_bytes(b, heads, a.lora, a.rope, s.max_len, s.sm_count));
  bytes += ws;
  bytes += T * heads * vd * kBf16;                                 // attn
  const std::int64_t inter_max = std::max(d.intermediate, d.shared_intermediate);
  bytes += 3 * T * inter_max * kBf16;                              // gate_up, act
  if (E > 0) {
    const std::int64_t I = d.moe_intermediate;
    bytes += T * H * kBf16 + T * E * kF32 + T * K * (kI32 + kF32);  // shared_out, router_logits, topk
    bytes += (E + 1) * kI32 + 8 * c.num_hidden_layers + 2 * T * K * kI32;  // offsets, expert_reads (per layer), sorted_pairs, position_of
    bytes += T * K * (2 * H + 3 * I) * kBf16;                       // x_sorted, y_sorted, gu_sorted, act_sorted
  }
  const std::int64_t logits_rows = s.last_position_logits ? B : T;
  bytes += (1 + s.tp) * logits_rows * d.vocab * kF32;              // logits_local, gathered
  return bytes + 2 * kLinearWorkspaceBytes;  // the engine's Linear and its side branch's
}

}  // namespace tpb
