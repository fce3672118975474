// The tensor-layout table (see tensor_layout.h) and the walk that turns it into one rank's
// weight requests.
#include "reference_engine/model/tensor_layout.h"

#include <vector>

#include "reference_engine/model/model_weights.h"
#include "tpb/check.h"

namespace tpb {

WeightFormat storage_format(StorageRule rule, Quantization quant) {
  if (quant == Quantization::f32) return WeightFormat::f32;
  switch (rule) {
    case StorageRule::plain: return WeightFormat::bf16;
    case StorageRule::fp32: return WeightFormat::f32;
    case StorageRule::linear: return quant == Quantization::fp8 ? WeightFormat::fp8_block128 : WeightFormat::bf16;
    case StorageRule::routed_expert:
      return quant == Quantization::fp8    ? WeightFormat::fp8_block128
             : quant == Quantization::int4 ? WeightFormat::int4_group32
                                           : WeightFormat::bf16;
  }
  TPB_FAIL("unknown storage rule");
}

TensorLayout tensor_layout(const ModelConfig& c) {
  using S = TensorSlot;
  using Sc = TensorScope;
  using T = TpSplit;
  using R = StorageRule;
  using K = synthetic::InitKind;
  const std::int64_t H = c.hidden_size, heads = c.num_attention_heads, qk = c.qk_head_dim();
  const std::int64_t I = c.intermediate_size, Ie = c.moe_intermediate_size, E = c.n_routed_experts;
  const std::int64_t shared_I = Ie * c.n_shared_experts;  // the shared experts are one fused MLP
  const std::string layer = "model.layers.{layer}.", attn = layer + "self_attn.", mlp = layer + "mlp.";
  const std::string shared = mlp + "shared_experts.", expert = mlp + "experts.{expert}.";

  TensorLayout t{c, {}};
  auto& r = t.rows;
  // slot, scope, name, family, group, rows, cols, split, storage, init
  r.push_back({S::embed, Sc::model, "model.embed_tokens.weight", "embed_tokens", "embedding", c.vocab_size, H, T::column, R::plain, K::embedding});
  r.push_back({S::input_norm, Sc::layer, layer + "input_layernorm.weight", "input_layernorm", "norm", H, 0, T::replicated, R::plain, K::norm});
  r.push_back({S::post_attn_norm, Sc::layer, layer + "post_attention_layernorm.weight", "post_attention_layernorm", "norm", H, 0, T::replicated, R::plain, K::norm});
  if (c.q_lora_rank > 0) {
    r.push_back({S::q_a, Sc::layer, attn + "q_a_proj.weight", "q_a_proj", "attention", c.q_lora_rank, H, T::replicated, R::linear, K::linear});
    r.push_back({S::q_a_norm, Sc::layer, attn + "q_a_layernorm.weight", "q_a_layernorm", "norm", c.q_lora_rank, 0, T::replicated, R::plain, K::norm});
    r.push_back({S::q_b, Sc::layer, attn + "q_b_proj.weight", "q_b_proj", "attention", heads * qk, c.q_lora_rank, T::column, R::linear, K::linear});
  } else {
    r.push_back({S::q_b, Sc::layer, attn + "q_proj.weight", "q_proj", "attention", heads * qk, H, T::column, R::linear, K::linear});
  }
  r.push_back({S::kv_a, Sc::layer, attn + "kv_a_proj_with_mqa.weight", "kv_a_proj_with_mqa", "attention", c.kv_cache_width(), H, T::replicated, R::linear, K::linear});
  r.push_back({S::kv_a_norm, Sc::layer, attn + "kv_a_layernorm.weight", "kv_a_layernorm", "norm", c.kv_lora_rank, 0, T::replicated, R::plain, K::norm});
  r.push_back({S::kv_b, Sc::layer, attn + "kv_b_proj.weight", "kv_b_proj", "attention", heads * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank, T::column, R::linear, K::linear});
  r.push_back({S::o, Sc::layer, attn + "o_proj.weight", "o_proj", "attention", H, heads * c.v_head_dim, T::row, R::linear, K::linear});
  r.push_back({S::gate, Sc::dense_layer, mlp + "gate_proj.weight", "mlp.gate_proj", "dense_mlp", I, H, T::column, R::linear, K::linear});
  r.push_back({S::up, Sc::dense_layer, mlp + "up_proj.weight", "mlp.up_proj", "dense_mlp", I, H, T::column, R::linear, K::linear});
  r.push_back({S::down, Sc::dense_layer, mlp + "down_proj.weight", "mlp.down_proj", "dense_mlp", H, I, T::row, R::linear, K::linear});
  r.push_back({S::router, Sc::moe_layer, mlp + "gate.weight", "mlp.gate", "router", E, H, T::replicated, R::plain, K::linear});
  r.push_back({S::router_bias, Sc::moe_layer, mlp + "gate.e_score_correction_bias", "mlp.gate.e_score_correction_bias", "router", E, 0, T::replicated, R::fp32, K::bias});
  r.push_back({S::gate, Sc::routed_expert, expert + "gate_proj.weight", "experts.gate_proj", "routed_experts", Ie, H, T::column, R::routed_expert, K::linear});
  r.push_back({S::up, Sc::routed_expert, expert + "up_proj.weight", "experts.up_proj", "routed_experts", Ie, H, T::column, R::routed_expert, K::linear});
  r.push_back({S::down, Sc::routed_expert, expert + "down_proj.weight", "experts.down_proj", "routed_experts", H, Ie, T::row, R::routed_expert, K::linear});
  r.push_back({S::gate, Sc::shared_experts, shared + "gate_proj.weight", "shared_experts.gate_proj", "shared_experts", shared_I, H, T::column, R::linear, K::linear});
  r.push_back({S::up, Sc::shared_experts, shared + "up_proj.weight", "shared_experts.up_proj", "shared_experts", shared_I, H, T::column, R::linear, K::linear});
  r.push_back({S::down, Sc::shared_experts, shared + "down_proj.weight", "shared_experts.down_proj", "shared_experts", H, shared_I, T::row, R::linear, K::linear});
  r.push_back({S::final_norm, Sc::model, "model.norm.weight", "norm", "norm", H, 0, T::replicated, R::plain, K::norm});
  // A tied lm_head is the embedding table: nothing more to load or hold.
  if (!c.tie_word_embeddings)
    r.push_back({S::lm_head, Sc::model, "lm_head.weight", "lm_head", "lm_head", c.vocab_size, H, T::column, R::plain, K::linear});
  std::erase_if(r, [&](const TensorLayoutRow& row) { return row_instances(c, row) == 0; });
  return t;
}

std::int64_t row_instances(const ModelConfig& c, const TensorLayoutRow& row) {
  std::int64_t moe_layers = 0;
  for (std::int64_t l = 0; l < c.num_hidden_layers; ++l) moe_layers += c.is_moe_layer(l) ? 1 : 0;
  switch (row.scope) {
    case TensorScope::model: return 1;
    case TensorScope::layer: return c.num_hidden_layers;
    case TensorScope::dense_layer: return c.num_hidden_layers - moe_layers;
    case TensorScope::moe_layer: return moe_layers;
    case TensorScope::shared_experts: return c.n_shared_experts > 0 ? moe_layers : 0;
    case TensorScope::routed_expert: return moe_layers * c.n_routed_experts;
  }
  TPB_FAIL("unknown tensor scope");
}

std::string tensor_name(const TensorLayoutRow& row, std::int64_t layer, std::int64_t expert) {
  std::string name = row.name;
  auto substitute = [&](const std::string& key, std::int64_t value) {
    const auto at = name.find(key);
    if (at == std::string::npos) return;
    TPB_CHECK(value >= 0, row.name << " needs " << key);
    name.replace(at, key.size(), std::to_string(value));
  };
  substitute("{layer}", layer);
  substitute("{expert}", expert);
  return name;
}

namespace {

// This rank's block of one tensor: the whole tensor, or block `rank` of `tp` of its rows or
// columns. The fan-in of the synthetic scale is the global input width.
WeightRequest shard_request(const TensorLayoutRow& row, std::string name, Shard s, Quantization model_quant) {
  std::vector<std::int64_t> shape{row.rows};
  if (row.cols > 0) shape.push_back(row.cols);
  WeightRequest r = full_tensor(std::move(name), std::move(shape), row.init, row.cols > 0 ? row.cols : 1);
  if (storage_format(row.storage, model_quant) == WeightFormat::int4_group32) r.encoding = WeightEncoding::int4_group32;
  if (row.split == TpSplit::column) {
    const std::int64_t count = row.rows / s.tp;
    r.row_begin = s.rank * count;
    r.row_end = r.row_begin + count;
  } else if (row.split == TpSplit::row) {
    const std::int64_t count = row.cols / s.tp;
    r.col_begin = s.rank * count;
    r.col_end = r.col_begin + count;
  }
  return r;
}

bool in_layer(const ModelConfig& c, TensorScope scope, std::int64_t l) {
  switch (scope) {
    case TensorScope::model: return false;
    case TensorScope::layer: return true;
    case TensorScope::dense_layer: return !c.is_moe_layer(l);
    case TensorScope::moe_layer:
    case TensorScope::routed_expert: return c.is_moe_layer(l);
    case TensorScope::shared_experts: return c.is_moe_layer(l) && c.n_shared_experts > 0;
  }
  return false;
}

}  // namespace

void for_each_shard_tensor(const TensorLayout& layout, Shard s, const std::function<void(const ShardTensor&)>& visit) {
  const ModelConfig& c = layout.config;
  shard_dims(c, s);  // validates tp and the rank, with the loaders' messages
  const auto& rows = layout.rows;
  auto one = [&](const TensorLayoutRow& row, std::int64_t layer, std::int64_t expert) {
    visit(ShardTensor{&row, layer, expert, shard_request(row, tensor_name(row, layer, expert), s, c.quant)});
  };
  for (std::size_t i = 0; i < rows.size();) {
    if (rows[i].scope == TensorScope::model) {
      one(rows[i++], -1, -1);
      continue;
    }
    // A run of per-layer rows: layer by layer, and inside it a run of routed_expert rows
    // expert by expert (each expert's gate, up, down together).
    std::size_t end = i;
    while (end < rows.size() && rows[end].scope != TensorScope::model) ++end;
    for (std::int64_t l = 0; l < c.num_hidden_layers; ++l) {
      for (std::size_t k = i; k < end;) {
        if (rows[k].scope != TensorScope::routed_expert) {
          if (in_layer(c, rows[k].scope, l)) one(rows[k], l, -1);
          ++k;
          continue;
        }
        std::size_t run = k;
        while (run < end && rows[run].scope == TensorScope::routed_expert) ++run;
        if (c.is_moe_layer(l))
          for (std::int64_t e = 0; e < c.n_routed_experts; ++e)
            for (std::size_t x = k; x < run; ++x) one(rows[x], l, e);
        k = run;
      }
    }
    i = end;
  }
}

}  // namespace tpb
