// Weight bytes of a DeepSeek-V3 / Kimi-K2.5 model by quantization and tensor-parallel
// sharding, tensor family by tensor family (MODEL.md: "Tensor parallel layout").
//
// A family is a set of identical tensors (e.g. the gate_proj of every routed expert in every
// MoE layer). Each has a global 2-D shape [rows = out features, cols = in features], a TP
// split (replicated: every rank holds all of it; column: rows / tp per rank; row: cols / tp
// per rank) and a storage format. The bytes of one rank's shard are computed on the shard's
// own shape, so block-scale and group-scale counts round up per shard as an engine stores them.
//
// Storage formats (what a serving engine holds on the device after loading):
//   bf16          2 B per element.
//   f32           4 B per element (the router's e_score_correction_bias, kept in fp32 by
//                 SGLang's and vLLM's DeepseekV3 MoE gate).
//   fp8_block128  DeepSeek-V3-style fp8 e4m3: 1 B per element + one fp32 scale
//                 (weight_scale_inv) per 128x128 block, ceil-div at ragged edges.
//   int4_group32  compressed-tensors "pack-quantized" INT4, symmetric, group 32 (Kimi-K2.5's
//                 routed experts): int32 weight_packed [rows, ceil(cols/8)] (8 nibbles each),
//                 bf16 weight_scale [rows, ceil(cols/32)], int32 weight_shape [2] (8 B).
//
// Which tensors each --quant setting quantizes (as the released checkpoints and the serving
// engines that load them do):
//   bf16  nothing.
//   fp8   every linear layer of attention (q_a, q_b / q, kv_a_with_mqa, kv_b, o), the dense
//         MLP, the shared experts and the routed experts (DeepSeek-V3's fp8 checkpoint).
//         Embeddings, norms, the router gate and lm_head stay bf16.
//   int4  the routed experts only (Kimi-K2.5: compressed-tensors ignores self_attn,
//         shared_experts, dense mlp, lm_head, vision tower); everything else bf16.
//   f32   every tensor in fp32: tpbench's CPU reference engine, so its plan can be checked
//         against what that engine actually loads.
// The vision tower (K2.5's MoonViT + projector) is never quantized and is replicated on every
// rank (an assumption: it is small next to the text model; see vision_tower_family).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "reference_engine/config/model_config.h"
#include "reference_engine/model/tensor_layout.h"

namespace tpb {

// Quantization, WeightFormat and TpSplit are declared with the tensor-layout table
// (reference_engine/model/tensor_layout.h), whose rows the families come from.
const char* quantization_name(Quantization q);
// "bf16" | "fp8" | "int4" | "f32"; anything else throws InputError naming `what` (e.g. "--quant").
Quantization parse_quantization(const std::string& name, const std::string& what);
const char* weight_format_name(WeightFormat f);
const char* tp_split_name(TpSplit s);

// Constants of the quantized formats (see the file comment).
inline constexpr std::int64_t kFp8BlockSize = 128;       // DeepSeek-V3 weight_block_size [128, 128]
inline constexpr std::int64_t kInt4GroupSize = 32;       // Kimi-K2.5 quantization_config group_size
inline constexpr std::int64_t kInt4PerInt32 = 8;         // nibbles per packed int32
inline constexpr std::int64_t kInt4ShapeMetaBytes = 8;   // weight_shape: two int32

// Bytes of one tensor [rows, cols] stored in `format` (a vector is [n, 1]).
std::int64_t tensor_bytes(WeightFormat format, std::int64_t rows, std::int64_t cols);

struct TensorFamily {
  std::string name;        // e.g. "experts.gate_proj" (one name for every layer / expert)
  std::string group;       // "attention" | "norm" | "dense_mlp" | "shared_experts" | "routed_experts" | "router" | "embedding" | "lm_head" | "vision"
  std::int64_t rows = 0;   // global output features (elements for a vector)
  std::int64_t cols = 1;   // global input features (1 for a vector)
  std::int64_t count = 0;  // identical tensors in the model (layers x experts)
  TpSplit split = TpSplit::replicated;
  WeightFormat format = WeightFormat::bf16;
};

// Every weight tensor family of `config` in the formats `quant` gives them: one per row of
// tensor_layout(config) (count = its tensors), plus the vision tower when the config has one.
std::vector<TensorFamily> tensor_families(const ModelConfig& config, Quantization quant);

// Shape of one rank's shard of one tensor of the family; throws InputError when tp does not
// divide the split dimension.
struct ShardShape {
  std::int64_t rows = 0;  // output features on this rank
  std::int64_t cols = 0;  // input features on this rank
};
ShardShape shard_shape(const TensorFamily& family, int tp);

// Bytes of the whole family on one rank (count x one shard), and in the unsharded model.
std::int64_t family_bytes_per_rank(const TensorFamily& family, int tp);
std::int64_t family_bytes_global(const TensorFamily& family);
std::int64_t family_elements_global(const TensorFamily& family);

struct WeightGroupBytes {
  std::string group;               // as TensorFamily::group
  std::int64_t bytes_per_rank = 0; // summed over the group's families
  std::int64_t bytes_global = 0;   // unsharded model
  std::string formats;             // storage formats in the group, e.g. "int4-group32" or "bf16+fp32"
};

struct WeightBytes {
  std::int64_t bytes_per_rank = 0;  // every rank holds the same (tp divides every split dim)
  std::int64_t bytes_global = 0;    // unsharded model, replicated tensors counted once
  std::int64_t elements_global = 0; // parameters, replicated counted once
  std::vector<WeightGroupBytes> groups;  // in a fixed order, groups with bytes only
  std::string vision_note;          // how the vision tower was sized ("" when there is none)
};

WeightBytes weight_bytes(const ModelConfig& config, Quantization quant, int tp);

// The vision tower as one replicated bf16 family (K2.5's MoonViT encoder + patch-merger
// projector), sized from `config.vision_config` when it names its dimensions, else from an
// assumed 400 M parameters; `note` says which. Only meaningful when config.has_vision_tower.
TensorFamily vision_tower_family(const ModelConfig& config, std::string* note);

}  // namespace tpb
