// Reads HF config.json files of the DeepSeek-V3 family. Two shapes exist in the wild:
// a plain DeepseekV3 config, and Kimi-K2.5's multimodal wrapper whose text model sits under
// `text_config` (tensor names then carry `language_model.`). The yarn block is called
// `rope_scaling` in older files and `rope_parameters` in transformers >= 5.
#include "reference_engine/config/model_config.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <vector>

#include "reference_engine/config/data_home.h"
#include "reference_engine/config/json_text.h"
#include "tpb/check.h"
#include "tpb/did_you_mean.h"

namespace tpb {
namespace fs = std::filesystem;

namespace {

// How a config reads a field: `null_means` is what a JSON null stands for where DeepSeek's
// modelling code gives None a meaning, absent where it gives none (null is then refused).
struct FieldReader {
  const nlohmann::json& object;  // the object holding the fields
  const std::string& source;     // the file, for messages
  const std::string& prefix;     // its JSON path, "$." or "$.text_config."
  ModelConfig& config;           // collects the fields left out (hf_defaults)

  // `out` holds HF's default on entry; a missing key leaves it there and records it.
  template <typename T>
  void read(const char* key, T& out, std::optional<T> null_means = std::nullopt) const {
    auto it = object.find(key);
    if (it == object.end()) {
      config.hf_defaults.push_back(key);
      return;
    }
    if (it->is_null()) {
      TPB_INPUT_CHECK(null_means.has_value(), source << ": " << prefix << key << ": expected " << kind<T>()
                                                     << ", got null (HF's modelling code has no value for it)");
      out = *null_means;
      return;
    }
    bool ok;
    if constexpr (std::is_same_v<T, bool>) ok = it->is_boolean();
    else if constexpr (std::is_integral_v<T>) ok = it->is_number_integer();
    else if constexpr (std::is_floating_point_v<T>) ok = it->is_number();
    else ok = it->is_string();
    TPB_INPUT_CHECK(ok, source << ": " << prefix << key << ": expected " << kind<T>() << ", got " << shown_json(*it));
    out = it->get<T>();
  }

  template <typename T>
  static const char* kind() {
    if constexpr (std::is_same_v<T, bool>) return "a boolean";
    else if constexpr (std::is_integral_v<T>) return "an integer";
    else if constexpr (std::is_floating_point_v<T>) return "a number";
    else return "a string";
  }
};

// The integer and float fields, shared by parsing and by scenario overrides, with HF's
// DeepseekV3Config defaults (transformers' configuration_deepseek_v3.py; the
// configuration_deepseek.py DeepSeek-V3 and Kimi ship with their checkpoints agrees).
struct IntField {
  const char* key;
  std::int64_t ModelConfig::*member;
  std::int64_t hf_default;
  std::optional<std::int64_t> null_means;  // see FieldReader
};
struct FloatField {
  const char* key;
  double ModelConfig::*member;
  double hf_default;
};

const std::vector<IntField>& int_fields() {
  // A null n_routed_experts builds dense layers throughout in DeepSeek's modelling code, a
  // null n_shared_experts no shared expert, a null q_lora_rank q_proj without the low rank.
  static const std::vector<IntField> fields = {
      {"vocab_size", &ModelConfig::vocab_size, 129280, std::nullopt},
      {"hidden_size", &ModelConfig::hidden_size, 7168, std::nullopt},
      {"intermediate_size", &ModelConfig::intermediate_size, 18432, std::nullopt},
      {"moe_intermediate_size", &ModelConfig::moe_intermediate_size, 2048, std::nullopt},
      {"num_hidden_layers", &ModelConfig::num_hidden_layers, 61, std::nullopt},
      {"first_k_dense_replace", &ModelConfig::first_k_dense_replace, 3, std::nullopt},
      {"num_attention_heads", &ModelConfig::num_attention_heads, 128, std::nullopt},
      // null: num_attention_heads (HF's "backward compatibility"), set once heads are read.
      {"num_key_value_heads", &ModelConfig::num_key_value_heads, 128, std::int64_t{-1}},
      {"q_lora_rank", &ModelConfig::q_lora_rank, 1536, std::int64_t{0}},
      {"kv_lora_rank", &ModelConfig::kv_lora_rank, 512, std::nullopt},
      {"qk_nope_head_dim", &ModelConfig::qk_nope_head_dim, 128, std::nullopt},
      {"qk_rope_head_dim", &ModelConfig::qk_rope_head_dim, 64, std::nullopt},
      {"v_head_dim", &ModelConfig::v_head_dim, 128, std::nullopt},
      {"n_routed_experts", &ModelConfig::n_routed_experts, 256, std::int64_t{0}},
      {"n_shared_experts", &ModelConfig::n_shared_experts, 1, std::int64_t{0}},
      {"num_experts_per_tok", &ModelConfig::num_experts_per_tok, 8, std::int64_t{0}},
      {"n_group", &ModelConfig::n_group, 8, std::nullopt},
      {"topk_group", &ModelConfig::topk_group, 4, std::nullopt},
      {"max_position_embeddings", &ModelConfig::max_position_embeddings, 4096, std::nullopt},
  };
  return fields;
}

const std::vector<FloatField>& float_fields() {
  static const std::vector<FloatField> fields = {
      {"routed_scaling_factor", &ModelConfig::routed_scaling_factor, 2.5},
      {"rms_norm_eps", &ModelConfig::rms_norm_eps, 1e-6},
  };
  return fields;
}

// The models tpbench runs, by the names their config.json files carry: DeepSeek-V3 and
// Kimi-K2 are plain DeepseekV3 configs (Kimi-K2 under its own model_type); Kimi-K2.5 wraps
// one as `text_config` beside its vision tower.
const std::vector<std::string> kTextModelTypes = {"deepseek_v3", "kimi_k2"};
const std::vector<std::string> kTextArchitectures = {"DeepseekV3ForCausalLM", "DeepseekV3Model"};
const std::vector<std::string> kWrapperModelTypes = {"kimi_k25"};
const std::vector<std::string> kWrapperArchitectures = {"KimiK25ForConditionalGeneration"};

std::string one_of(const std::vector<std::string>& names) {
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i)
    out += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + ("\"" + names[i] + "\"");
  return out;
}

// A JSON value in a message, cut where it is long (json_text.h).
std::string shown(const nlohmann::json& value) { return shown_json(value); }

// `object`'s model_type and architectures name one of `types` / `architectures`; `what` says
// which model family that is, for the message.
void check_identity(const nlohmann::json& object, const std::string& source, const std::string& prefix,
                    const std::vector<std::string>& types, const std::vector<std::string>& architectures,
                    const std::string& what) {
  const auto type = object.find("model_type");
  TPB_INPUT_CHECK(type != object.end() && type->is_string() &&
                      std::find(types.begin(), types.end(), type->get<std::string>()) != types.end(),
                  source << ": " << prefix << "model_type: expected " << one_of(types) << " (" << what << "), got "
                         << (type == object.end() ? std::string("nothing (the key is missing)") : shown(*type)));
  const auto arch = object.find("architectures");
  if (arch == object.end() || arch->is_null()) return;  // HF needs none to build the model
  TPB_INPUT_CHECK(arch->is_array() && !arch->empty(),
                  source << ": " << prefix << "architectures: expected a list of " << one_of(architectures) << ", got "
                         << shown(*arch));
  for (std::size_t i = 0; i < arch->size(); ++i) {
    const auto& name = (*arch)[i];
    TPB_INPUT_CHECK(name.is_string() &&
                        std::find(architectures.begin(), architectures.end(), name.get<std::string>()) != architectures.end(),
                    source << ": " << prefix << "architectures[" << i << "]: expected " << one_of(architectures) << " ("
                           << what << "), got " << shown(name));
  }
}

void parse_rope(const FieldReader& text, ModelConfig& c) {
  const std::string& source = text.source;
  const std::string& prefix = text.prefix;
  text.read("rope_theta", c.rope.theta);
  const char* block_key = text.object.contains("rope_scaling") && !text.object["rope_scaling"].is_null() ? "rope_scaling"
                          : text.object.contains("rope_parameters") && !text.object["rope_parameters"].is_null()
                              ? "rope_parameters"
                              : nullptr;
  if (!block_key) return;
  const auto& block = text.object[block_key];
  const std::string bp = prefix + block_key + ".";
  TPB_INPUT_CHECK(block.is_object(), source << ": " << prefix << block_key << ": expected an object");
  // Fields of the block left out are HF's defaults too, but not worth naming: the block is
  // optional as a whole, and each of its defaults is HF's yarn computation's own.
  ModelConfig scratch;
  const FieldReader b{block, source, bp, scratch};
  // transformers >= 5 keeps rope_theta inside rope_parameters.
  if (block.contains("rope_theta")) {
    b.read("rope_theta", c.rope.theta);
    std::erase(c.hf_defaults, std::string("rope_theta"));
  }
  std::string type;
  if (block.contains("rope_type")) b.read("rope_type", type);
  else if (block.contains("type")) b.read("type", type);
  if (type.empty() || type == "default") return;
  TPB_INPUT_CHECK(type == "yarn", source << ": " << bp << "rope_type: expected \"yarn\" or \"default\", got " << shown(type));
  c.rope.type = "yarn";
  TPB_INPUT_CHECK(block.contains("factor"), source << ": " << bp << "factor: missing (yarn needs it; HF has no default)");
  b.read("factor", c.rope.factor);
  b.read("beta_fast", c.rope.beta_fast, std::optional<double>(32.0));
  b.read("beta_slow", c.rope.beta_slow, std::optional<double>(1.0));
  b.read("mscale", c.rope.mscale, std::optional<double>(0.0));
  b.read("mscale_all_dim", c.rope.mscale_all_dim, std::optional<double>(0.0));
  // HF takes max_position_embeddings where the block leaves this out.
  c.rope.original_max_position_embeddings = c.max_position_embeddings;
  b.read("original_max_position_embeddings", c.rope.original_max_position_embeddings,
         std::optional<std::int64_t>(c.max_position_embeddings));
}

double yarn_mscale(double scale, double mscale) {
  return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

}  // namespace

// The vision_config integers the memory planner reads (weight_bytes.cpp, MoonViT's count),
// each within a limit far above MoonViT's (hidden 1152, intermediate 4304, 27 blocks, patch
// 14, pos-emb 64 x 64, merge 2 x 2) that keeps the parameter count below 2^58: fuzz/
// model_config_fuzzer found vt_intermediate_size 2^53 + 1 overflowing int64 there.
namespace {
void check_vision_limits(const nlohmann::json& v, const std::string& source) {
  struct Limit {
    const char* key;
    std::int64_t max;
  };
  static const Limit limits[] = {
      {"vt_hidden_size", 1 << 16},       {"hidden_size", 1 << 16},        {"text_hidden_size", 1 << 16},
      {"vt_intermediate_size", 1 << 18}, {"intermediate_size", 1 << 18},  {"vt_num_hidden_layers", 1024},
      {"num_hidden_layers", 1024},       {"patch_size", 1024},            {"in_channels", 64},
      {"num_channels", 64},              {"init_pos_emb_height", 4096},   {"init_pos_emb_width", 4096},
      {"merge_kernel_size", 64}};
  for (const Limit& l : limits) {
    const auto it = v.find(l.key);
    if (it == v.end()) continue;
    std::vector<nlohmann::json> values = it->is_array() ? it->get<std::vector<nlohmann::json>>()
                                                        : std::vector<nlohmann::json>{*it};
    for (const auto& x : values)
      TPB_INPUT_CHECK(!x.is_number_integer() || (x.get<std::int64_t>() >= 0 && x.get<std::int64_t>() <= l.max),
                      source << ": $.vision_config." << l.key << ": expected 0.." << l.max << " (tpbench's limit), got "
                             << shown(*it));
  }
}
// The checkpoint's quantization_config (MODEL.md): none is bf16; Kimi-K2.5's compressed-tensors
// pack-quantized INT4 (symmetric, group 32, weights only) is int4; anything else is refused
// here, naming the field, rather than read as numbers it does not hold.
Quantization parse_quantization_config(const nlohmann::json& q, const std::string& source, const std::string& path) {
  auto fail_unless = [&](bool ok, const std::string& field, const std::string& expected, const nlohmann::json& got) {
    TPB_INPUT_CHECK(ok, source << ": " << path << field << ": expected " << expected << ", got " << shown(got)
                               << " (tpbench runs Kimi-K2.5's INT4 format: compressed-tensors pack-quantized, "
                                  "4-bit int, symmetric, group 32)");
  };
  fail_unless(q.is_object(), "", "an object", q);
  const nlohmann::json none;
  auto at = [&](const nlohmann::json& o, const char* key) -> const nlohmann::json& {
    return o.is_object() && o.contains(key) ? o[key] : none;
  };
  fail_unless(at(q, "quant_method") == "compressed-tensors", ".quant_method", "\"compressed-tensors\"", at(q, "quant_method"));
  const nlohmann::json& groups = at(q, "config_groups");
  fail_unless(groups.is_object() && groups.size() == 1, ".config_groups", "an object with one group (INT4 weights)", groups);
  const std::string g = ".config_groups." + groups.begin().key();
  const nlohmann::json& group = groups.begin().value();
  // The format is the config's, or (newer compressed-tensors) the group's.
  const nlohmann::json& format = at(q, "format").is_null() ? at(group, "format") : at(q, "format");
  fail_unless(format == "pack-quantized", at(q, "format").is_null() ? g + ".format" : ".format", "\"pack-quantized\"", format);
  const nlohmann::json& w = at(group, "weights");
  fail_unless(w.is_object(), g + ".weights", "an object", w);
  fail_unless(at(w, "num_bits") == 4, g + ".weights.num_bits", "4", at(w, "num_bits"));
  fail_unless(at(w, "type") == "int", g + ".weights.type", "\"int\"", at(w, "type"));
  fail_unless(at(w, "symmetric") == true, g + ".weights.symmetric", "true (no zero point)", at(w, "symmetric"));
  fail_unless(at(w, "strategy") == "group", g + ".weights.strategy", "\"group\"", at(w, "strategy"));
  fail_unless(at(w, "group_size") == 32, g + ".weights.group_size", "32", at(w, "group_size"));
  const nlohmann::json& acts = at(group, "input_activations");
  fail_unless(acts.is_null(), g + ".input_activations", "null (weight-only W4A16)", acts);
  return Quantization::int4;
}

}  // namespace

ModelConfig parse_model_config(const nlohmann::json& config, const std::string& source) {
  TPB_INPUT_CHECK(config.is_object(), source << ": expected a JSON object (an HF config.json)");
  ModelConfig c;
  const nlohmann::json* text = &config;
  std::string prefix = "$.";
  // What the file is comes first: a Llama or Qwen config read as DeepSeek's fields would be
  // a model that exists nowhere.
  if (config.contains("text_config") && !config["text_config"].is_null()) {
    check_identity(config, source, "$.", kWrapperModelTypes, kWrapperArchitectures,
                   "a config with text_config is Kimi-K2.5's, its text model a DeepSeek-V3 one");
    TPB_INPUT_CHECK(config["text_config"].is_object(),
                    source << ": $.text_config: expected an object (Kimi-K2.5's text model), got " << shown(config["text_config"]));
    text = &config["text_config"];
    prefix = "$.text_config.";
    c.nested_text_config = true;
  } else if (config.contains("model_type") && config["model_type"].is_string() &&
             std::find(kWrapperModelTypes.begin(), kWrapperModelTypes.end(), config["model_type"].get<std::string>()) !=
                 kWrapperModelTypes.end()) {
    TPB_INPUT_FAIL(source << ": $.text_config: missing (a " << config["model_type"].get<std::string>()
                          << " config holds its text model there)");
  }
  check_identity(*text, source, prefix, kTextModelTypes, kTextArchitectures, "a DeepSeek-V3 or Kimi-K2 text model");
  c.model_type = (*text)["model_type"].get<std::string>();
  if (config.contains("vision_config") && config["vision_config"].is_object()) {
    c.has_vision_tower = true;
    c.vision_config = config["vision_config"];
    check_vision_limits(c.vision_config, source);
  }
  const FieldReader fields{*text, source, prefix, c};
  for (const auto& f : int_fields()) {
    c.*(f.member) = f.hf_default;
    fields.read(f.key, c.*(f.member), f.null_means);
  }
  if (c.num_key_value_heads == -1) c.num_key_value_heads = c.num_attention_heads;
  for (const auto& f : float_fields()) {
    c.*(f.member) = f.hf_default;
    fields.read(f.key, c.*(f.member));
  }
  c.norm_topk_prob = true;
  fields.read("norm_topk_prob", c.norm_topk_prob);
  c.scoring_func = "sigmoid";
  fields.read("scoring_func", c.scoring_func);
  c.topk_method = "noaux_tc";
  fields.read("topk_method", c.topk_method);
  c.tie_word_embeddings = false;
  fields.read("tie_word_embeddings", c.tie_word_embeddings);
  c.rope_interleave = true;
  fields.read("rope_interleave", c.rope_interleave);
  // The engine implements interleaved (GPT-J style) rotary pairs only; refusing the other
  // layout is better than computing a different model without a word.
  TPB_INPUT_CHECK(c.rope_interleave, source << ": " << prefix << "rope_interleave: expected true (interleaved pairs, "
                                            "the layout DeepSeek-V3 and Kimi use); false is not supported");
  c.rope.theta = 10000.0;
  parse_rope(fields, c);
  // K2.5's nested config may carry it inside text_config or beside it.
  if (text->contains("quantization_config"))
    c.quant = parse_quantization_config((*text)["quantization_config"], source, prefix + "quantization_config");
  else if (c.nested_text_config && config.contains("quantization_config"))
    c.quant = parse_quantization_config(config["quantization_config"], source, "$.quantization_config");
  c.name = source;  // what validate() names in its messages; the caller renames it
  c.validate();
  return c;
}

void ModelConfig::validate() const {
  const std::string src = name.empty() ? std::string("model config") : name;
  // A value in a message, and where it came from when the config left it out.
  auto got = [&](const char* key, std::int64_t value) {
    const bool defaulted = std::find(hf_defaults.begin(), hf_defaults.end(), key) != hf_defaults.end();
    return std::to_string(value) + (defaulted ? std::string(" (HF's default: the config leaves ") + key + " out)" : "");
  };
  auto positive = [&](std::int64_t v, const char* key) {
    TPB_INPUT_CHECK(v > 0, src << ": " << key << ": expected a positive integer, got " << v);
  };
  // Upper bounds far above any released model (Kimi-K2.5: hidden 7168, vocab 163840, 61
  // layers, 384 experts) and below what would overflow the element and byte counts every
  // allocation, the planner and the synthetic generator compute: a config past them was a
  // heap overflow or a hang, not a model.
  auto at_most = [&](std::int64_t v, std::int64_t limit, const char* key) {
    TPB_INPUT_CHECK(v >= 0 && v <= limit, src << ": " << key << ": expected 0.." << limit << " (tpbench's limit), got " << v);
  };
  at_most(vocab_size, std::int64_t{1} << 22, "vocab_size");
  at_most(hidden_size, std::int64_t{1} << 16, "hidden_size");
  at_most(num_hidden_layers, 1024, "num_hidden_layers");
  at_most(num_attention_heads, 1024, "num_attention_heads");
  at_most(kv_lora_rank, std::int64_t{1} << 16, "kv_lora_rank");
  at_most(q_lora_rank, std::int64_t{1} << 16, "q_lora_rank");
  at_most(qk_nope_head_dim, 4096, "qk_nope_head_dim");
  at_most(qk_rope_head_dim, 4096, "qk_rope_head_dim");
  at_most(v_head_dim, 4096, "v_head_dim");
  at_most(intermediate_size, std::int64_t{1} << 20, "intermediate_size");
  at_most(moe_intermediate_size, std::int64_t{1} << 20, "moe_intermediate_size");
  at_most(n_routed_experts, std::int64_t{1} << 14, "n_routed_experts");
  at_most(n_shared_experts, 64, "n_shared_experts");
  at_most(num_experts_per_tok, std::int64_t{1} << 14, "num_experts_per_tok");
  at_most(max_position_embeddings, std::int64_t{1} << 24, "max_position_embeddings");
  // Largest tensors, with overflow-checked products: every layer's routed experts and the
  // embedding, each under 2^44 elements (16 Ti; Kimi-K2.5's experts are ~2^40).
  auto product_at_most = [&](std::initializer_list<std::int64_t> factors, const char* what) {
    std::int64_t p = 1;
    for (std::int64_t f : factors)
      TPB_INPUT_CHECK(!__builtin_mul_overflow(p, f, &p) && p <= (std::int64_t{1} << 44),
                      src << ": " << what << ": more than 2^44 elements (tpbench's limit)");
  };
  product_at_most({num_hidden_layers, n_routed_experts + n_shared_experts, 3, moe_intermediate_size, hidden_size},
                  "the experts (num_hidden_layers x experts x 3 x moe_intermediate_size x hidden_size)");
  product_at_most({vocab_size, hidden_size}, "the embedding (vocab_size x hidden_size)");
  product_at_most({num_hidden_layers, num_attention_heads, qk_nope_head_dim + qk_rope_head_dim + v_head_dim,
                   std::max<std::int64_t>(kv_lora_rank, q_lora_rank) + hidden_size},
                  "the attention weights");
  // A non-finite or absurd scale makes every logit NaN, which no check may call a pass.
  TPB_INPUT_CHECK(std::isfinite(routed_scaling_factor) && routed_scaling_factor > 0 && routed_scaling_factor <= 1000,
                  src << ": routed_scaling_factor: expected a finite number in (0, 1000], got " << routed_scaling_factor);
  TPB_INPUT_CHECK(std::isfinite(rms_norm_eps) && rms_norm_eps > 0 && rms_norm_eps <= 1,
                  src << ": rms_norm_eps: expected a finite number in (0, 1], got " << rms_norm_eps);
  // Below 1 the rotary frequencies grow along the dimension, which no model does; below ~1e-45
  // theta^(-2i/d) overflows and every logit is NaN (issue 37). Released models use 1e4 to 1e7.
  TPB_INPUT_CHECK(std::isfinite(rope.theta) && rope.theta >= 1 && rope.theta <= 1e12,
                  src << ": rope_theta: expected a finite number in [1, 1e12], got " << rope.theta);
  positive(vocab_size, "vocab_size");
  positive(hidden_size, "hidden_size");
  positive(num_hidden_layers, "num_hidden_layers");
  positive(num_attention_heads, "num_attention_heads");
  positive(kv_lora_rank, "kv_lora_rank");
  positive(qk_nope_head_dim, "qk_nope_head_dim");
  positive(qk_rope_head_dim, "qk_rope_head_dim");
  positive(v_head_dim, "v_head_dim");
  TPB_INPUT_CHECK(qk_rope_head_dim % 2 == 0, src << ": qk_rope_head_dim: expected an even number (rope rotates pairs), got " << qk_rope_head_dim);
  TPB_INPUT_CHECK(num_key_value_heads == num_attention_heads,
                  src << ": num_key_value_heads: MLA expects it equal to num_attention_heads = "
                      << got("num_attention_heads", num_attention_heads) << ", got " << got("num_key_value_heads", num_key_value_heads));
  TPB_INPUT_CHECK(first_k_dense_replace >= 0 && first_k_dense_replace <= num_hidden_layers,
                  src << ": first_k_dense_replace: expected 0.." << got("num_hidden_layers", num_hidden_layers) << ", got "
                      << got("first_k_dense_replace", first_k_dense_replace));
  if (first_k_dense_replace > 0) positive(intermediate_size, "intermediate_size");
  if (n_routed_experts > 0 && first_k_dense_replace < num_hidden_layers) {
    positive(moe_intermediate_size, "moe_intermediate_size");
    positive(num_experts_per_tok, "num_experts_per_tok");
    positive(n_group, "n_group");
    positive(topk_group, "topk_group");
    TPB_INPUT_CHECK(num_experts_per_tok <= n_routed_experts,
                    src << ": num_experts_per_tok: expected <= n_routed_experts = " << got("n_routed_experts", n_routed_experts)
                        << ", got " << got("num_experts_per_tok", num_experts_per_tok));
    TPB_INPUT_CHECK(n_routed_experts % n_group == 0,
                    src << ": n_group: expected a divisor of n_routed_experts = " << got("n_routed_experts", n_routed_experts)
                        << ", got " << got("n_group", n_group));
    TPB_INPUT_CHECK(topk_group <= n_group,
                    src << ": topk_group: expected <= n_group = " << got("n_group", n_group) << ", got " << got("topk_group", topk_group));
    TPB_INPUT_CHECK(num_experts_per_tok <= topk_group * (n_routed_experts / n_group),
                    src << ": num_experts_per_tok: expected <= topk_group * experts per group ("
                        << topk_group * (n_routed_experts / n_group) << "), got " << got("num_experts_per_tok", num_experts_per_tok));
    TPB_INPUT_CHECK(n_group == 1 || n_routed_experts / n_group >= 2,
                    src << ": n_group: grouped routing sums the top-2 scores of each group, so a group needs >= 2 experts (n_group "
                        << got("n_group", n_group) << ", n_routed_experts " << got("n_routed_experts", n_routed_experts) << ")");
    TPB_INPUT_CHECK(scoring_func == "sigmoid", src << ": scoring_func: expected \"sigmoid\", got " << shown_json(scoring_func));
    TPB_INPUT_CHECK(topk_method == "noaux_tc", src << ": topk_method: expected \"noaux_tc\", got " << shown_json(topk_method));
  }
  TPB_INPUT_CHECK(q_lora_rank >= 0, src << ": q_lora_rank: expected >= 0, got " << q_lora_rank);
  TPB_INPUT_CHECK(rms_norm_eps > 0, src << ": rms_norm_eps: expected > 0, got " << rms_norm_eps);
  if (rope.type == "yarn") {
    TPB_INPUT_CHECK(rope.factor >= 1.0, src << ": rope_scaling.factor: expected >= 1, got " << rope.factor);
    TPB_INPUT_CHECK(rope.beta_fast > rope.beta_slow,
                    src << ": rope_scaling.beta_fast: expected > beta_slow (" << rope.beta_slow << "), got " << rope.beta_fast);
    TPB_INPUT_CHECK(rope.original_max_position_embeddings > 0,
                    src << ": rope_scaling.original_max_position_embeddings: expected a positive integer");
  }
}

namespace {

// The sizes up to 64 that every width `divides` sends through a TP split: "1, 2, 4, 8".
std::string valid_tp_sizes(const ModelConfig& c) {
  std::string out;
  for (int tp = 1; tp <= 64; ++tp) {
    const bool ok = c.num_attention_heads % tp == 0 && c.vocab_size % tp == 0 &&
                    (c.first_k_dense_replace == 0 || c.intermediate_size % tp == 0) &&
                    (c.n_routed_experts == 0 || c.moe_intermediate_size % tp == 0);
    if (ok) out += (out.empty() ? "" : ", ") + std::to_string(tp);
  }
  return out;
}

}  // namespace

void ModelConfig::validate_tp(int tp) const {
  const std::string src = name.empty() ? std::string("model config") : name;
  TPB_INPUT_CHECK(tp >= 1, "tp: expected >= 1, got " << tp);
  // Each refusal lists the sizes that work, up to 64.
  const auto sizes = [this] { return "; tp sizes this model splits into: " + valid_tp_sizes(*this); };
  TPB_INPUT_CHECK(num_attention_heads % tp == 0,
                  src << ": tp " << tp << " does not divide num_attention_heads " << num_attention_heads << sizes());
  TPB_INPUT_CHECK(vocab_size % tp == 0, src << ": tp " << tp << " does not divide vocab_size " << vocab_size << sizes());
  if (first_k_dense_replace > 0)
    TPB_INPUT_CHECK(intermediate_size % tp == 0,
                    src << ": tp " << tp << " does not divide intermediate_size " << intermediate_size << sizes());
  if (n_routed_experts > 0)
    TPB_INPUT_CHECK(moe_intermediate_size % tp == 0, src << ": tp " << tp << " does not divide moe_intermediate_size "
                                                         << moe_intermediate_size << sizes());
}

std::int64_t ModelConfig::parameter_count() const {
  const std::int64_t h = hidden_size, heads = num_attention_heads;
  std::int64_t attn = 0;
  if (q_lora_rank > 0) attn += h * q_lora_rank + q_lora_rank + q_lora_rank * heads * qk_head_dim();
  else attn += h * heads * qk_head_dim();
  attn += h * (kv_lora_rank + qk_rope_head_dim) + kv_lora_rank;           // kv_a_proj_with_mqa, kv_a_layernorm
  attn += kv_lora_rank * heads * (qk_nope_head_dim + v_head_dim);         // kv_b_proj
  attn += heads * v_head_dim * h;                                         // o_proj
  const std::int64_t norms = 2 * h;                                       // input + post-attention layernorms
  const std::int64_t dense_mlp = 3 * h * intermediate_size;
  const std::int64_t expert = 3 * h * moe_intermediate_size;
  const std::int64_t moe = n_routed_experts * expert + n_shared_experts * expert + n_routed_experts * h  // gate
                           + n_routed_experts;                                                         // bias
  std::int64_t total = vocab_size * h * (tie_word_embeddings ? 1 : 2) + h;  // embed, lm_head, final norm
  for (std::int64_t l = 0; l < num_hidden_layers; ++l) total += attn + norms + (is_moe_layer(l) ? moe : dense_mlp);
  return total;
}

double ModelConfig::attention_scale() const {
  double scale = 1.0 / std::sqrt(static_cast<double>(qk_head_dim()));
  if (rope.type == "yarn" && rope.mscale_all_dim != 0.0) {
    const double m = yarn_mscale(rope.factor, rope.mscale_all_dim);
    scale *= m * m;
  }
  return scale;
}

ModelConfig load_model_config(const std::string& path) {
  fs::path file = path;
  std::error_code ec;  // a path the OS refuses (ENAMETOOLONG) is one that cannot be opened
  if (fs::is_directory(file, ec)) file /= "config.json";
  std::ifstream in(file);
  TPB_INPUT_CHECK(in.good(), file.string() << ": cannot open model config (expected an HF config.json or a folder holding one)");
  in.close();
  // Strict and bounded (json_text.h): syntax, nesting depth, duplicate keys, NUL, 1e400.
  const nlohmann::json j = read_json_text_file(file.string());
  ModelConfig c = parse_model_config(j, file.string());
  c.name = path;
  return c;
}

std::string models_dir() {
  // The working directory first, as for scenarios and the report; then $TPB_HOME, the install
  // prefix and the source tree (data_home.h).
  std::vector<fs::path> candidates = {fs::current_path() / "scenarios" / "models"};
  for (const auto& root : data_roots()) candidates.emplace_back(fs::path(root) / "scenarios" / "models");
  std::error_code ec;
  for (const auto& c : candidates)
    if (fs::is_directory(c, ec)) return c.string();
  return candidates.back().string();
}

ModelConfig load_model_config_by_name(const std::string& name_or_path) {
  std::error_code ec;
  if (fs::exists(name_or_path, ec)) return load_model_config(name_or_path);
  // Not a path: a preset name, which must stay a file name in the presets folder ("../x"
  // would read any .json file).
  TPB_INPUT_CHECK(!name_or_path.empty() && name_or_path.find('/') == std::string::npos && name_or_path.front() != '.',
                  "model '" << name_or_path << "': neither a path nor a preset name (a file name in " << models_dir() << ")");
  const fs::path preset = fs::path(models_dir()) / (name_or_path + ".json");
  if (!fs::exists(preset, ec)) {
    std::vector<std::string> presets;
    for (const auto& e : fs::directory_iterator(models_dir(), ec))
      if (e.path().extension() == ".json") presets.push_back(e.path().stem().string());
    TPB_INPUT_FAIL("model '" << name_or_path << "': neither a path nor a preset in " << models_dir()
                             << did_you_mean(name_or_path, presets));
  }
  ModelConfig c = load_model_config(preset.string());
  c.name = name_or_path;
  return c;
}

void apply_overrides(ModelConfig& config, const nlohmann::json& overrides, const std::string& source,
                     const std::string& json_path) {
  if (overrides.is_null()) return;
  TPB_INPUT_CHECK(overrides.is_object(), source << ": " << json_path << ": expected an object of config fields");
  for (const auto& [key, value] : overrides.items()) {
    const std::string path = json_path + "." + key;
    std::erase(config.hf_defaults, key);
    bool known = false;
    for (const auto& f : int_fields()) {
      if (key != f.key) continue;
      TPB_INPUT_CHECK(value.is_number_integer(), source << ": " << path << ": expected an integer, got " << shown(value));
      config.*(f.member) = value.get<std::int64_t>();
      known = true;
    }
    for (const auto& f : float_fields()) {
      if (key != f.key) continue;
      TPB_INPUT_CHECK(value.is_number(), source << ": " << path << ": expected a number, got " << shown(value));
      config.*(f.member) = value.get<double>();
      known = true;
    }
    if (key == "norm_topk_prob") {
      TPB_INPUT_CHECK(value.is_boolean(), source << ": " << path << ": expected a boolean, got " << shown(value));
      config.norm_topk_prob = value.get<bool>();
      known = true;
    }
    TPB_INPUT_CHECK(known, source << ": " << path << ": unknown model config field (expected an integer or float field of the DeepseekV3 config)");
  }
  config.validate();
}

}  // namespace tpb
