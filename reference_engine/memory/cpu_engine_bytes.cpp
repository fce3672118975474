#include "reference_engine/memory/cpu_engine_bytes.h"

#include <algorithm>

#include "reference_engine/memory/weight_bytes.h"

namespace tpb {

CpuEngineBytes cpu_engine_bytes(const ModelConfig& config, const CpuEngineShape& shape) {
  const ModelConfig& c = config;
  const double f32 = 4, tp = shape.tp;
  const double batch = static_cast<double>(shape.batch), seq = static_cast<double>(shape.seq_len);
  const double T = batch * seq;  // the prefill's tokens
  const double H = static_cast<double>(c.hidden_size), V = static_cast<double>(c.vocab_size);
  const double heads = static_cast<double>(c.num_attention_heads) / tp;
  CpuEngineBytes out;

  ModelConfig text = c;
  text.has_vision_tower = false;  // the engine loads the text model only
  out.weights = static_cast<double>(weight_bytes(text, Quantization::f32, shape.tp).bytes_per_rank);

  const double width = static_cast<double>(c.kv_cache_width());
  const double kv_row = static_cast<double>(c.num_hidden_layers) * batch * width * f32;  // one token of every sequence
  out.kv_cache = kv_row * seq * (shape.decode ? 3 : 2);

  // Attention over T tokens of n = seq_len per sequence (the prefill's plain form).
  const double qk = static_cast<double>(c.qk_head_dim()), v_dim = static_cast<double>(c.v_head_dim);
  const double lora = static_cast<double>(c.kv_lora_rank), rope = static_cast<double>(c.qk_rope_head_dim);
  const double attention = T * (heads * qk + static_cast<double>(c.q_lora_rank) + width + 2 /* int64 positions */ +
                                heads * v_dim) +
                           seq * (lora + rope + heads * (static_cast<double>(c.qk_nope_head_dim) + v_dim) * 2);
  // The FFN: a dense layer's MLP, or the MoE's router, routed tokens at the average load (each
  // token goes to num_experts_per_tok of n_routed_experts) and the shared experts.
  const bool has_dense = c.first_k_dense_replace > 0 || c.n_routed_experts == 0;
  const double dense = has_dense ? 2 * T * static_cast<double>(c.intermediate_size) / tp : 0;
  double moe = 0;
  if (c.n_routed_experts > 0 && c.num_hidden_layers > c.first_k_dense_replace) {
    const double E = static_cast<double>(c.n_routed_experts), K = static_cast<double>(c.num_experts_per_tok);
    const double per_expert = T * K / E;
    const double shared = static_cast<double>(c.moe_intermediate_size * c.n_shared_experts) / tp;
    moe = T * (E + 2 * K) + per_expert * (2 * H + 2 * static_cast<double>(c.moe_intermediate_size) / tp) +
          (c.n_shared_experts > 0 ? T * (H + 2 * shared) : 0);
  }
  const double lm_head = T * (V / tp + 2 * V);  // this rank's slice, the gathered logits, the logits kept
  out.activations = f32 * (3 * T * H + std::max({attention, dense, moe, lm_head}));

  const double step_tokens = shape.decode ? batch : T;
  out.inputs = 8 * (T + batch) + f32 * step_tokens * V;
  return out;
}

}  // namespace tpb
