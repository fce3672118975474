// One rank's shard of the DeepSeek-V3 / Kimi-K2.5 weights, laid out as MODEL.md's TP table
// says (the layout SGLang and vLLM use; tensor_layout.h is its one statement, read here):
//   replicated          q_a_proj, kv_a_proj_with_mqa, every norm, router gate + bias
//   by head (columns)   q_b_proj (or q_proj), kv_b_proj: heads [rank*H/tp, (rank+1)*H/tp)
//   row-parallel        o_proj: its input columns of those heads
//   intermediate / tp   dense MLP, shared experts, every routed expert (gate/up rows, down columns)
//   vocab-parallel      embed_tokens and lm_head rows [rank*V/tp, (rank+1)*V/tp)
// All fp32, [out, in] row-major as nn.Linear stores them.
#pragma once

#include <cstdint>
#include <vector>

#include "reference_engine/config/model_config.h"
#include "reference_engine/model/tensor_layout.h"
#include "reference_engine/weights/weight_source.h"

namespace tpb {

// Per-rank sizes derived from the config and the shard.
struct ShardDims {
  std::int64_t heads = 0;               // attention heads on this rank
  std::int64_t head_begin = 0;          // first global head of this rank
  std::int64_t vocab = 0;               // vocab rows on this rank
  std::int64_t vocab_begin = 0;         // first global vocab row
  std::int64_t intermediate = 0;        // dense MLP intermediate on this rank
  std::int64_t moe_intermediate = 0;    // each routed expert's intermediate on this rank
  std::int64_t shared_intermediate = 0; // shared experts' (fused) intermediate on this rank
};
ShardDims shard_dims(const ModelConfig& config, Shard shard);

struct MlpWeights {
  std::vector<float> gate;  // [inter_local, hidden]
  std::vector<float> up;    // [inter_local, hidden]
  std::vector<float> down;  // [hidden, inter_local]
};

struct LayerWeights {
  std::vector<float> input_norm;      // [hidden]
  std::vector<float> post_attn_norm;  // [hidden]
  std::vector<float> q_a;             // [q_lora, hidden] (q_lora_rank > 0)
  std::vector<float> q_a_norm;        // [q_lora]
  std::vector<float> q_b;             // [heads_local * qk_head_dim, q_lora or hidden] (q_b_proj or q_proj)
  std::vector<float> kv_a;            // [kv_lora + rope, hidden]
  std::vector<float> kv_a_norm;       // [kv_lora]
  std::vector<float> kv_b;            // [heads_local * (nope + v), kv_lora]
  std::vector<float> o;               // [hidden, heads_local * v]
  bool moe = false;                   // MoE layer (else dense `mlp`)
  MlpWeights mlp;                     // dense MLP, or the shared experts of a MoE layer
  std::vector<float> router;          // [experts, hidden]
  std::vector<float> router_bias;     // [experts] e_score_correction_bias
  std::vector<MlpWeights> experts;    // [experts], each sharded on its intermediate dim
};

struct ModelWeights {
  std::vector<float> embed;     // [vocab_local, hidden]
  std::vector<LayerWeights> layers;
  std::vector<float> final_norm;  // [hidden]
  std::vector<float> lm_head;     // [vocab_local, hidden]
  std::size_t bytes = 0;          // total fp32 bytes held by this rank
};

// Reads this rank's shard from `source`, every row of tensor_layout(config). Throws InputError
// naming a missing or mis-shaped tensor.
ModelWeights load_model_weights(const ModelConfig& config, Shard shard, WeightSource& source);
// ModelWeights::bytes of that shard, without loading it.
std::size_t model_weights_bytes(const ModelConfig& config, Shard shard);

}  // namespace tpb
