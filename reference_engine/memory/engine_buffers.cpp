#include "reference_engine/memory/engine_buffers.h"

#include <algorithm>

#include "reference_engine/model/model_weights.h"

namespace tpb {

namespace {

constexpr std::int64_t kBf16 = 2, kF32 = 4, kI32 = 4;
constexpr std::int64_t kLinearWorkspaceBytes = std::int64_t{32} << 20;  // kernels/cuda/linear.cpp

// mla_decode's fp32 split partials for `batch` sequences: batch x heads x splits x (lora + 2),
// with the split count its plan picks (kernels/cuda/mla_decode.cu: 64-key tiles, up to 32 heads
// per CTA, one resident CTA per SM at the Kimi/DeepSeek row width, up to twice the resident
// CTAs, 256 splits at most; ties to fewer splits).
std::int64_t decode_workspace_bytes(std::int64_t batch, std::int64_t heads, std::int64_t lora, std::int64_t max_len,
                                    int sms) {
  const std::int64_t row_tiles_all = (heads + 15) / 16;
  const std::int64_t groups = (row_tiles_all + 1) / 2;
  const std::int64_t work = batch * groups, slots = std::max(sms, 1);
  const std::int64_t max_tiles = (max_len + 63) / 64;
  const std::int64_t cap =
      std::min<std::int64_t>({256, max_tiles, std::max<std::int64_t>(1, (2 * slots + work - 1) / work)});
  std::int64_t best_cost = -1, best_splits = 1;
  for (std::int64_t want = 1; want <= cap; ++want) {
    const std::int64_t per = (max_tiles + want - 1) / want;
    const std::int64_t splits = (max_tiles + per - 1) / per;
    const std::int64_t cost = (work * splits + slots - 1) / slots * per;
    if (best_cost < 0 || cost < best_cost) {
      best_cost = cost;
      best_splits = splits;
    }
  }
  return batch * heads * best_splits * (lora + 2) * kF32;
}

}  // namespace

std::int64_t gpu_engine_buffer_bytes(const ModelConfig& c, const EngineBufferShape& s) {
  const ShardDims d = shard_dims(c, Shard{0, s.tp});
  const std::int64_t H = c.hidden_size, qk = c.qk_head_dim(), lora = c.kv_lora_rank, rope = c.qk_rope_head_dim;
  const std::int64_t width = lora + rope, nope = c.qk_nope_head_dim, vd = c.v_head_dim, kvr = nope + vd;
  const std::int64_t heads = d.heads, E = c.n_routed_experts, K = c.num_experts_per_tok;
  const std::int64_t T = std::max(s.max_batch, s.max_prefill_tokens), Tp = s.max_prefill_tokens, B = s.max_batch;
  std::int64_t bytes = (rope / 2) * kF32;                         // inv_freq
  bytes += 2 * T * kI32 + B * kI32;                                // ids, positions, seq_lens
  bytes += T * H * kF32 + 2 * T * H * kBf16;                       // residual, delta, xn
  if (c.q_lora_rank > 0) bytes += 2 * T * c.q_lora_rank * kBf16;  // qa, qa_n
  bytes += T * heads * qk * kBf16;                                 // q
  bytes += 2 * T * width * kBf16;                                  // ckv, kvrow
  bytes += Tp * heads * (kvr + nope + vd) * kBf16 + Tp * rope * kBf16;  // kv, k_nope, v, k_rot (prefill)
  bytes += B * heads * (width + lora) * kBf16;                     // qdec, o_lat (decode)
  std::int64_t ws = 0;
  for (std::int64_t b = 1; b <= B; ++b) ws = std::max(ws, decode_workspace_bytes(b, heads, lora, s.max_len, s.sm_count));
  bytes += ws;
  bytes += T * heads * vd * kBf16;                                 // attn
  const std::int64_t inter_max = std::max(d.intermediate, d.shared_intermediate);
  bytes += 3 * T * inter_max * kBf16;                              // gate_up, act
  if (E > 0) {
    const std::int64_t I = d.moe_intermediate;
    bytes += T * H * kBf16 + T * E * kF32 + T * K * (kI32 + kF32);  // shared_out, router_logits, topk
    bytes += (E + 1) * kI32 + 8 + 2 * T * K * kI32;                 // offsets, expert_reads, sorted_pairs, position_of
    bytes += T * K * (2 * H + 3 * I) * kBf16;                       // x_sorted, y_sorted, gu_sorted, act_sorted
  }
  bytes += (1 + s.tp) * T * d.vocab * kF32;                        // logits_local, gathered
  return bytes + kLinearWorkspaceBytes;
}

}  // namespace tpb
