// The tensor-layout table: every weight tensor of a DeepSeek-V3 / Kimi-K2.5 text model, one
// row per tensor kind, built from the ModelConfig. It is the single statement of MODEL.md's
// "Tensor parallel layout" that the code reads; its three readers are
//   - the CPU engine's loader (model_weights.cpp): every tensor in fp32,
//   - the GPU engine's loader (device_weights.h, gpu/gpu_engine_weights.cpp): bf16, except the
//     fp32 rows, packed into the device buffers its kernels expect,
//   - the memory planner (memory/weight_bytes.cpp): bytes per rank in each --quant format.
// A unit test (tests/unit/tensor_layout_test.cpp) holds the three to the same bytes per rank
// for every preset at TP 1, 2, 4 and 8; adding a tensor is adding a row (and a place in each
// engine that uses it).
//
// A row is a tensor kind that repeats over a scope (the model, every layer, the dense or the
// MoE layers, each routed expert of each MoE layer). Its name is the canonical DeepseekV3
// name (no `language_model.` prefix; routed experts per expert) with `{layer}` and `{expert}`
// standing for the indices. Shapes are global, [rows = out features, cols = in features] as
// nn.Linear stores them, or [rows] for a vector (cols = 0).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "reference_engine/config/model_config.h"
#include "reference_engine/weights/weight_source.h"
#include "tpb/kernels/synthetic_weights.h"

namespace tpb {

struct Shard {
  int rank = 0;  // this rank, 0..tp-1
  int tp = 1;    // tensor-parallel size
};

enum class TpSplit {
  replicated,  // every rank holds the whole tensor
  column,      // rows (output features, heads, vocab) split across ranks: rank r holds block r of tp
  row,         // cols (input features) split across ranks: rank r holds block r of tp
};

// Quantization (the planner's --quant settings, a model's own quantization) is declared with
// the ModelConfig (config/model_config.h); memory/weight_bytes.h says what each quantizes.

// How a tensor is held in memory (memory/weight_bytes.h gives each one's bytes).
enum class WeightFormat { bf16, f32, fp8_block128, int4_group32 };

// A row's dtype rule: which format each quantization gives it. The CPU engine holds every
// tensor in fp32 (Quantization::f32); the GPU engine holds what Quantization::bf16 gives.
enum class StorageRule {
  plain,          // bf16, never quantized: embeddings, norms, router gate, lm_head
  fp32,           // fp32 always: the router's e_score_correction_bias (SGLang and vLLM keep it fp32)
  linear,         // bf16; fp8 block-128 under fp8: attention, dense MLP, shared experts
  routed_expert,  // bf16; fp8 block-128 under fp8, int4 group-32 under int4 (Kimi-K2.5's checkpoint)
};
WeightFormat storage_format(StorageRule rule, Quantization quant);

// Where a row repeats.
enum class TensorScope {
  model,           // once
  layer,           // every layer
  dense_layer,     // layers < first_k_dense_replace (every layer without routed experts)
  moe_layer,       // the other layers
  shared_experts,  // every MoE layer, when n_shared_experts > 0 (one fused MLP of n_shared x I)
  routed_expert,   // every routed expert of every MoE layer
};

// Which weight of the model a row is: the engines' field for it. gate/up/down are the dense
// MLP, the shared experts or a routed expert by the row's scope.
enum class TensorSlot {
  embed, final_norm, lm_head,
  input_norm, post_attn_norm, q_a, q_a_norm, q_b, kv_a, kv_a_norm, kv_b, o,
  gate, up, down, router, router_bias,
};

struct TensorLayoutRow {
  TensorSlot slot;
  TensorScope scope;
  std::string name;          // canonical name with {layer} / {expert}, e.g. "model.layers.{layer}.self_attn.o_proj.weight"
  std::string family;        // the planner's name for the row, e.g. "o_proj", "experts.gate_proj"
  std::string group;         // the planner's group: attention, norm, dense_mlp, router, shared_experts, routed_experts, embedding, lm_head
  std::int64_t rows = 0;     // global output features (elements of a vector)
  std::int64_t cols = 0;     // global input features; 0 for a vector
  TpSplit split = TpSplit::replicated;
  StorageRule storage = StorageRule::plain;
  synthetic::InitKind init = synthetic::InitKind::linear;  // synthetic values; fan-in is cols (1 for a vector)
};

struct TensorLayout {
  ModelConfig config;
  std::vector<TensorLayoutRow> rows;  // in loading order; rows whose scope is empty are left out
};

// The table of `config`. Loading order (the engines load in it): embedding; per layer its
// norms and attention, then its dense MLP or its router, routed experts (expert by expert)
// and shared experts; final norm; lm_head (absent when tied to the embedding).
TensorLayout tensor_layout(const ModelConfig& config);

// Tensors of the model that a row stands for (layers x experts).
std::int64_t row_instances(const ModelConfig& config, const TensorLayoutRow& row);

// The row's name for one layer and expert (-1 where the scope has none).
std::string tensor_name(const TensorLayoutRow& row, std::int64_t layer, std::int64_t expert);

// One tensor of the model as one rank loads it.
struct ShardTensor {
  const TensorLayoutRow* row = nullptr;
  std::int64_t layer = -1;   // -1 for model scope
  std::int64_t expert = -1;  // -1 outside routed_expert scope
  WeightRequest request;     // the global tensor and this rank's block of it
};

// Calls `visit` for every tensor of `shard`, in loading order (layer by layer; a run of
// routed_expert rows expert by expert). Throws InputError when tp does not divide what it
// splits (ModelConfig::validate_tp) or the rank is outside it.
void for_each_shard_tensor(const TensorLayout& layout, Shard shard, const std::function<void(const ShardTensor&)>& visit);

}  // namespace tpb
