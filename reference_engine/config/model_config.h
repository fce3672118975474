// ModelConfig: the DeepSeek-V3 / Kimi-K2.5 text-model hyper-parameters (MODEL.md), read
// from an HF config.json — a plain DeepseekV3 one or K2.5's nested `text_config` — with
// `rope_scaling` or `rope_parameters` for the yarn block. Scenario overrides apply on top.
//
// Read as HF reads it: a field the file leaves out takes DeepseekV3Config's default (so a
// config without n_routed_experts has 256 experts, not none), a null takes the meaning
// DeepSeek's modelling code gives None where it gives one (q_lora_rank: no q low-rank;
// n_routed_experts: dense layers) and is refused elsewhere, and model_type / architectures
// must name a DeepSeek-V3, Kimi-K2 or Kimi-K2.5 model.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tpb {

// How a model's weights are stored. A model is bf16 or int4 (Kimi-K2.5's released checkpoint:
// its routed experts INT4 pack-quantized, group 32, everything else bf16; int4_format.h); the
// planner also sizes fp8 (DeepSeek-V3's checkpoint) and f32 (the CPU engine's storage).
// memory/weight_bytes.h says what each quantizes.
enum class Quantization { bf16, fp8, int4, f32 };

struct RopeConfig {
  std::string type = "default";  // "default" or "yarn"
  double theta = 10000.0;        // rope_theta
  double factor = 1.0;           // yarn scaling factor
  double beta_fast = 32.0;       // yarn: high-frequency boundary (rotations)
  double beta_slow = 1.0;        // yarn: low-frequency boundary (rotations)
  double mscale = 0.0;           // yarn mscale (0 = unset: HF then scales cos/sin by mscale(factor, 1))
  double mscale_all_dim = 0.0;   // yarn mscale_all_dim (0 = unset)
  std::int64_t original_max_position_embeddings = 4096;
};

struct ModelConfig {
  std::string name;                 // preset name or folder the config came from
  std::string model_type;           // the text model's: "deepseek_v3" or "kimi_k2"
  // The fields the file left out, which took HF's default: validation names them, so that
  // "got 256" says where the 256 came from. A scenario override of a field takes it off.
  std::vector<std::string> hf_defaults;
  bool nested_text_config = false;  // came from K2.5's `text_config`: tensor names carry `language_model.`
  bool has_vision_tower = false;    // the top-level config had a `vision_config`
  nlohmann::json vision_config;     // as read, for the memory planner (empty when none)

  std::int64_t vocab_size = 0;
  std::int64_t hidden_size = 0;
  std::int64_t intermediate_size = 0;      // dense MLP (layers < first_k_dense_replace)
  std::int64_t moe_intermediate_size = 0;  // each routed and shared expert
  std::int64_t num_hidden_layers = 0;
  std::int64_t first_k_dense_replace = 0;  // layers [0, k) are dense
  std::int64_t num_attention_heads = 0;
  std::int64_t num_key_value_heads = 0;
  std::int64_t q_lora_rank = 0;            // 0 = no q low-rank (q_proj directly)
  std::int64_t kv_lora_rank = 0;
  std::int64_t qk_nope_head_dim = 0;
  std::int64_t qk_rope_head_dim = 0;
  std::int64_t v_head_dim = 0;
  std::int64_t n_routed_experts = 0;
  std::int64_t n_shared_experts = 0;
  std::int64_t num_experts_per_tok = 0;
  std::int64_t n_group = 1;
  std::int64_t topk_group = 1;
  double routed_scaling_factor = 1.0;
  bool norm_topk_prob = true;
  std::string scoring_func = "sigmoid";
  std::string topk_method = "noaux_tc";
  double rms_norm_eps = 1e-6;
  std::int64_t max_position_embeddings = 0;
  bool tie_word_embeddings = false;
  bool rope_interleave = true;      // GPT-J style interleaved pairs (HF's DeepseekV3 default); false is refused
  RopeConfig rope;
  // The checkpoint's quantization: bf16, or int4 when its `quantization_config` is Kimi-K2.5's
  // (compressed-tensors pack-quantized INT4, symmetric, group 32) or a scenario sets
  // "quant": "int4" for synthetic weights. Routed experts only; bf16 and int4 are the values
  // a model can have.
  Quantization quant = Quantization::bf16;

  std::int64_t qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  // Values per token per layer in the absorbed-MLA KV cache: latent + rotary key.
  std::int64_t kv_cache_width() const { return kv_lora_rank + qk_rope_head_dim; }
  bool is_moe_layer(std::int64_t layer) const { return n_routed_experts > 0 && layer >= first_k_dense_replace; }
  // Total parameter count of the text model (embeddings, attention, MLPs, experts, norms, lm_head).
  std::int64_t parameter_count() const;
  // Softmax scale including yarn's mscale^2 correction.
  double attention_scale() const;

  // Throws InputError naming the field when the config is inconsistent.
  void validate() const;
  // Throws InputError when `tp` does not divide the heads, the intermediate sizes or the vocab.
  void validate_tp(int tp) const;
};

// Parses an HF config.json object. `source` names the file in error messages.
ModelConfig parse_model_config(const nlohmann::json& config, const std::string& source);
// Reads <path>/config.json when `path` is a folder, else `path` itself.
ModelConfig load_model_config(const std::string& path);
// Resolves a preset name (scenarios/models/<name>.json) or a path, then loads it.
ModelConfig load_model_config_by_name(const std::string& name_or_path);
// Applies scenario overrides ({"num_hidden_layers": 3, ...}); unknown keys are InputErrors
// naming `json_path` (e.g. "$.model.overrides").
void apply_overrides(ModelConfig& config, const nlohmann::json& overrides, const std::string& source,
                     const std::string& json_path);
// The folder holding the model presets (scenarios/models), found from the working
// directory, then $TPB_HOME, the install prefix and the source tree (data_home.h).
std::string models_dir();

}  // namespace tpb
