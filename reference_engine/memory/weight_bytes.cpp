// Weight bytes by family, format and TP shard. See weight_bytes.h for the formats and for
// which tensors each quantization touches. The families are the rows of the tensor-layout
// table (the engines load the same rows); their element sum equals
// ModelConfig::parameter_count (a unit test holds them together).
#include "reference_engine/memory/weight_bytes.h"

#include <array>
#include <sstream>

#include "tpb/check.h"

namespace tpb {

namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// MoonViT (Kimi-VL / K2.5 vision tower) + K2.5's patch-merger projector, in parameters:
//   patch embed  Conv2d(in_channels, h, p x p) + bias;  learned pos-emb [pos_h, pos_w, h]
//                (the temporal pos-emb is a fixed sin-cos buffer, not a weight)
//   per block    LayerNorm(h) x2 (weight+bias), wqkv h->3h + bias, wo h->h + bias,
//                fc0 h->I + bias, fc1 I->h + bias
//   final        LayerNorm(h)
//   projector    LayerNorm(h), linear_1 (h*kh*kw)^2 + bias, linear_2 (h*kh*kw)->text + bias
std::int64_t moonvit_parameters(std::int64_t h, std::int64_t inter, std::int64_t layers, std::int64_t patch,
                                std::int64_t channels, std::int64_t pos_h, std::int64_t pos_w, std::int64_t merge,
                                std::int64_t text_hidden) {
  const std::int64_t block = 2 * 2 * h + (3 * h * h + 3 * h) + (h * h + h) + (h * inter + inter) + (inter * h + h);
  const std::int64_t patch_embed = channels * patch * patch * h + h + pos_h * pos_w * h;
  const std::int64_t merged = h * merge;
  const std::int64_t projector = 2 * h + (merged * merged + merged) + (merged * text_hidden + text_hidden);
  return patch_embed + layers * block + 2 * h + projector;
}

// Reads an integer from the vision config under the first key present; 0 when none is.
std::int64_t vision_int(const nlohmann::json& v, std::initializer_list<const char*> keys, std::int64_t fallback) {
  for (const char* k : keys) {
    auto it = v.find(k);
    if (it != v.end() && it->is_number_integer()) return it->get<std::int64_t>();
  }
  return fallback;
}

// Assumed size when the vision config does not give its dimensions: MoonViT is a
// SigLIP-so400m-sized encoder (Kimi-VL's report: "MoonViT, 400M").
constexpr std::int64_t kAssumedVisionParameters = 400'000'000;

}  // namespace

const char* quantization_name(Quantization q) {
  switch (q) {
    case Quantization::bf16: return "bf16";
    case Quantization::fp8: return "fp8";
    case Quantization::int4: return "int4";
    case Quantization::f32: return "f32";
  }
  return "?";
}

Quantization parse_quantization(const std::string& name, const std::string& what) {
  if (name == "bf16") return Quantization::bf16;
  if (name == "fp8") return Quantization::fp8;
  if (name == "int4") return Quantization::int4;
  if (name == "f32" || name == "fp32") return Quantization::f32;
  TPB_INPUT_FAIL(what << ": expected bf16, fp8, int4 or f32, got '" << name << "'");
}

const char* weight_format_name(WeightFormat f) {
  switch (f) {
    case WeightFormat::bf16: return "bf16";
    case WeightFormat::f32: return "fp32";
    case WeightFormat::fp8_block128: return "fp8-block128";
    case WeightFormat::int4_group32: return "int4-group32";
  }
  return "?";
}

const char* tp_split_name(TpSplit s) {
  switch (s) {
    case TpSplit::replicated: return "replicated";
    case TpSplit::column: return "column";
    case TpSplit::row: return "row";
  }
  return "?";
}

std::int64_t tensor_bytes(WeightFormat format, std::int64_t rows, std::int64_t cols) {
  TPB_CHECK(rows >= 0 && cols >= 0, "tensor shape [" << rows << ", " << cols << "] must be non-negative");
  if (rows == 0 || cols == 0) return 0;
  switch (format) {
    case WeightFormat::bf16: return rows * cols * 2;
    case WeightFormat::f32: return rows * cols * 4;
    case WeightFormat::fp8_block128:
      return rows * cols + ceil_div(rows, kFp8BlockSize) * ceil_div(cols, kFp8BlockSize) * 4;
    case WeightFormat::int4_group32:
      return rows * ceil_div(cols, kInt4PerInt32) * 4 + rows * ceil_div(cols, kInt4GroupSize) * 2 +
             kInt4ShapeMetaBytes;
  }
  TPB_FAIL("unknown weight format");
}

TensorFamily vision_tower_family(const ModelConfig& config, std::string* note) {
  const nlohmann::json& v = config.vision_config;
  const std::int64_t h = vision_int(v, {"vt_hidden_size", "hidden_size"}, 0);
  const std::int64_t inter = vision_int(v, {"vt_intermediate_size", "intermediate_size"}, 0);
  const std::int64_t layers = vision_int(v, {"vt_num_hidden_layers", "num_hidden_layers"}, 0);
  std::int64_t params = 0;
  std::ostringstream os;
  if (h > 0 && inter > 0 && layers > 0) {
    std::int64_t merge = 4;  // merge_kernel_size [2, 2]
    if (auto it = v.find("merge_kernel_size"); it != v.end()) {
      if (it->is_array() && it->size() == 2 && (*it)[0].is_number_integer() && (*it)[1].is_number_integer())
        merge = (*it)[0].get<std::int64_t>() * (*it)[1].get<std::int64_t>();
      else if (it->is_number_integer())
        merge = it->get<std::int64_t>() * it->get<std::int64_t>();
    }
    const std::int64_t patch = vision_int(v, {"patch_size"}, 14);
    const std::int64_t channels = vision_int(v, {"in_channels", "num_channels"}, 3);
    const std::int64_t pos_h = vision_int(v, {"init_pos_emb_height"}, 64);
    const std::int64_t pos_w = vision_int(v, {"init_pos_emb_width"}, 64);
    const std::int64_t text = vision_int(v, {"text_hidden_size"}, config.hidden_size);
    params = moonvit_parameters(h, inter, layers, patch, channels, pos_h, pos_w, merge, text);
    os << "vision tower sized from vision_config (MoonViT: " << layers << " blocks, hidden " << h
       << ", intermediate " << inter << ", + patch-merger projector): " << params
       << " parameters, bf16, replicated on every rank (assumed: not TP-sharded)";
  } else {
    params = kAssumedVisionParameters;
    os << "ASSUMPTION: vision_config does not give vt_hidden_size/vt_intermediate_size/vt_num_hidden_layers; "
          "vision tower taken as 400 M parameters (MoonViT-400M), bf16, replicated on every rank";
  }
  if (note) *note = os.str();
  return {"vision_tower", "vision", params, 1, 1, TpSplit::replicated, WeightFormat::bf16};
}

std::vector<TensorFamily> tensor_families(const ModelConfig& c, Quantization quant) {
  std::vector<TensorFamily> f;
  for (const TensorLayoutRow& row : tensor_layout(c).rows)
    f.push_back({row.family, row.group, row.rows, row.cols > 0 ? row.cols : 1, row_instances(c, row), row.split,
                 storage_format(row.storage, quant)});
  if (c.has_vision_tower) {
    f.push_back(vision_tower_family(c, nullptr));
    if (quant == Quantization::f32) f.back().format = WeightFormat::f32;
  }
  return f;
}

ShardShape shard_shape(const TensorFamily& family, int tp) {
  TPB_INPUT_CHECK(tp >= 1, "tp: expected >= 1, got " << tp);
  switch (family.split) {
    case TpSplit::replicated: return {family.rows, family.cols};
    case TpSplit::column:
      TPB_INPUT_CHECK(family.rows % tp == 0,
                      family.name << ": tp " << tp << " does not divide its " << family.rows << " output rows");
      return {family.rows / tp, family.cols};
    case TpSplit::row:
      TPB_INPUT_CHECK(family.cols % tp == 0,
                      family.name << ": tp " << tp << " does not divide its " << family.cols << " input columns");
      return {family.rows, family.cols / tp};
  }
  TPB_FAIL("unknown split");
}

std::int64_t family_bytes_per_rank(const TensorFamily& family, int tp) {
  const ShardShape s = shard_shape(family, tp);
  return family.count * tensor_bytes(family.format, s.rows, s.cols);
}

std::int64_t family_bytes_global(const TensorFamily& family) {
  return family.count * tensor_bytes(family.format, family.rows, family.cols);
}

std::int64_t family_elements_global(const TensorFamily& family) { return family.count * family.rows * family.cols; }

WeightBytes weight_bytes(const ModelConfig& config, Quantization quant, int tp) {
  static constexpr std::array<const char*, 9> kGroupOrder = {
      "embedding", "attention", "norm", "dense_mlp", "router", "shared_experts", "routed_experts", "lm_head", "vision"};
  WeightBytes out;
  if (config.has_vision_tower) vision_tower_family(config, &out.vision_note);
  const auto families = tensor_families(config, quant);
  for (const char* group : kGroupOrder) {
    WeightGroupBytes g{group, 0, 0, ""};
    for (const auto& f : families) {
      if (f.group != group) continue;
      g.bytes_per_rank += family_bytes_per_rank(f, tp);
      g.bytes_global += family_bytes_global(f);
      const std::string name = weight_format_name(f.format);
      if (("+" + g.formats + "+").find("+" + name + "+") == std::string::npos)
        g.formats += (g.formats.empty() ? "" : "+") + name;
    }
    if (g.bytes_global == 0) continue;
    out.bytes_per_rank += g.bytes_per_rank;
    out.bytes_global += g.bytes_global;
    out.groups.push_back(g);
  }
  for (const auto& f : families) {
    bool known = false;
    for (const char* group : kGroupOrder) known = known || f.group == group;
    TPB_CHECK(known, "tensor family " << f.name << " has unknown group " << f.group);
    out.elements_global += family_elements_global(f);
  }
  return out;
}

}  // namespace tpb
