#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "reference_engine/config/model_config.h"
#include "tpb/check.h"

namespace tpb {
namespace {

// Kimi-K2.5's text model as MODEL.md gives it, in the nested K2.5 form.
nlohmann::json kimi_k25_nested() {
  return nlohmann::json::parse(R"({
    "model_type": "kimi_k25",
    "vision_config": {"hidden_size": 1152},
    "text_config": {
      "model_type": "deepseek_v3", "vocab_size": 163840, "hidden_size": 7168,
      "intermediate_size": 18432, "moe_intermediate_size": 2048, "num_hidden_layers": 61,
      "first_k_dense_replace": 1, "num_attention_heads": 64, "num_key_value_heads": 64,
      "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
      "v_head_dim": 128, "n_routed_experts": 384, "n_shared_experts": 1, "num_experts_per_tok": 8,
      "n_group": 1, "topk_group": 1, "routed_scaling_factor": 2.827, "norm_topk_prob": true,
      "scoring_func": "sigmoid", "topk_method": "noaux_tc", "rms_norm_eps": 1e-5,
      "max_position_embeddings": 262144, "rope_theta": 50000.0, "tie_word_embeddings": false,
      "rope_scaling": {"type": "yarn", "factor": 64.0, "beta_fast": 32.0, "beta_slow": 1.0,
                       "mscale": 1.0, "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096}
    }})");
}

TEST(ModelConfig, ParsesNestedKimiK25) {
  const ModelConfig c = parse_model_config(kimi_k25_nested(), "kimi.json");
  EXPECT_TRUE(c.nested_text_config);
  EXPECT_TRUE(c.has_vision_tower);
  EXPECT_EQ(c.hidden_size, 7168);
  EXPECT_EQ(c.kv_cache_width(), 576);
  EXPECT_EQ(c.rope.type, "yarn");
  EXPECT_DOUBLE_EQ(c.rope.factor, 64.0);
  EXPECT_DOUBLE_EQ(c.rope.theta, 50000.0);
  EXPECT_FALSE(c.is_moe_layer(0));
  EXPECT_TRUE(c.is_moe_layer(1));
  // MODEL.md: about 1.03 T parameters in the text model.
  EXPECT_NEAR(static_cast<double>(c.parameter_count()) / 1e12, 1.03, 0.02);
  // scale = 192^-0.5 * m^2 with m = 0.1 * ln(64) + 1.
  const double m = 0.1 * std::log(64.0) + 1.0;
  EXPECT_NEAR(c.attention_scale(), m * m / std::sqrt(192.0), 1e-12);
}

TEST(ModelConfig, ReadsRopeParametersOfTransformers5) {
  auto j = kimi_k25_nested()["text_config"];
  j.erase("rope_scaling");
  j.erase("rope_theta");
  j["rope_parameters"] = {{"rope_type", "yarn"}, {"rope_theta", 50000.0}, {"factor", 32.0},
                          {"original_max_position_embeddings", 4096}};
  const ModelConfig c = parse_model_config(j, "plain.json");
  EXPECT_FALSE(c.nested_text_config);
  EXPECT_DOUBLE_EQ(c.rope.factor, 32.0);
  EXPECT_DOUBLE_EQ(c.rope.theta, 50000.0);
}

std::string refusal(const nlohmann::json& config) {
  try {
    parse_model_config(config, "cfg.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "no throw";
}

// HF's DeepseekV3Config fills what a config leaves out; so does tpbench (issue 37: a config
// without n_routed_experts was read as a dense model, HF builds 256 experts).
TEST(ModelConfig, MissingFieldTakesHfDefault) {
  auto j = kimi_k25_nested();
  for (const char* key : {"kv_lora_rank", "n_routed_experts", "n_shared_experts", "routed_scaling_factor"})
    j["text_config"].erase(key);
  const ModelConfig c = parse_model_config(j, "cfg.json");
  EXPECT_EQ(c.kv_lora_rank, 512);
  EXPECT_EQ(c.n_routed_experts, 256);
  EXPECT_EQ(c.n_shared_experts, 1);
  EXPECT_DOUBLE_EQ(c.routed_scaling_factor, 2.5);
  EXPECT_EQ(c.hf_defaults,
            (std::vector<std::string>{"kv_lora_rank", "n_routed_experts", "n_shared_experts", "routed_scaling_factor",
                                      "rope_interleave"}));
}

TEST(ModelConfig, CrossFieldRulesNameTheDefaultTheyMet) {
  auto j = kimi_k25_nested();
  j["text_config"].erase("n_routed_experts");
  j["text_config"]["num_experts_per_tok"] = 2000;
  EXPECT_NE(refusal(j).find("cfg.json: num_experts_per_tok: expected <= n_routed_experts = 256 (HF's default: the "
                            "config leaves n_routed_experts out), got 2000"),
            std::string::npos)
      << refusal(j);
  // HF's n_group 8 and topk_group 4 against 384 experts: 48 per group, 192 reachable.
  auto grouped = kimi_k25_nested();
  grouped["text_config"].erase("n_group");
  grouped["text_config"].erase("topk_group");
  EXPECT_EQ(parse_model_config(grouped, "cfg.json").n_group, 8);
  grouped["text_config"]["n_routed_experts"] = 12;
  EXPECT_NE(refusal(grouped).find("n_group: expected a divisor of n_routed_experts = 12, got 8 (HF's default"),
            std::string::npos)
      << refusal(grouped);
  grouped["text_config"]["n_group"] = 2;
  EXPECT_NE(refusal(grouped).find("topk_group: expected <= n_group = 2, got 4 (HF's default"), std::string::npos)
      << refusal(grouped);
  // MLA keeps a key/value head per head; HF's default of 128 meets a 4-head model.
  auto heads = kimi_k25_nested();
  heads["text_config"].erase("num_key_value_heads");
  heads["text_config"]["num_attention_heads"] = 4;
  EXPECT_NE(refusal(heads).find("num_key_value_heads: MLA expects it equal to num_attention_heads = 4, got 128 (HF's default"),
            std::string::npos)
      << refusal(heads);
}

// A null is HF's None: where DeepSeek's modelling code gives it a meaning it has that
// meaning, elsewhere it is refused naming the JSON path.
TEST(ModelConfig, NullIsNoneOrRefused) {
  auto j = kimi_k25_nested();
  j["text_config"]["q_lora_rank"] = nullptr;
  j["text_config"]["num_key_value_heads"] = nullptr;
  const ModelConfig c = parse_model_config(j, "cfg.json");
  EXPECT_EQ(c.q_lora_rank, 0);
  EXPECT_EQ(c.num_key_value_heads, 64);
  j["text_config"]["kv_lora_rank"] = nullptr;
  EXPECT_NE(refusal(j).find("cfg.json: $.text_config.kv_lora_rank: expected an integer, got null"), std::string::npos)
      << refusal(j);
}

// model_type and architectures say what the file is; only the DeepSeek-V3 family is read.
TEST(ModelConfig, ModelTypeAndArchitecturesNameTheFamily) {
  auto plain = kimi_k25_nested()["text_config"];
  plain["architectures"] = {"DeepseekV3ForCausalLM"};
  EXPECT_EQ(refusal(plain), "no throw");
  plain["model_type"] = "kimi_k2";  // Kimi-K2's own name for a DeepseekV3 config
  EXPECT_EQ(refusal(plain), "no throw");
  plain["model_type"] = "llama";
  EXPECT_NE(refusal(plain).find("cfg.json: $.model_type: expected \"deepseek_v3\" or \"kimi_k2\""), std::string::npos)
      << refusal(plain);
  EXPECT_NE(refusal(plain).find("got \"llama\""), std::string::npos) << refusal(plain);
  plain.erase("model_type");
  EXPECT_NE(refusal(plain).find("$.model_type: expected"), std::string::npos) << refusal(plain);
  EXPECT_NE(refusal(plain).find("the key is missing"), std::string::npos) << refusal(plain);
  plain["model_type"] = "deepseek_v3";
  plain["architectures"] = {"DeepseekV3ForCausalLM", "LlamaForCausalLM"};
  EXPECT_NE(refusal(plain).find("$.architectures[1]: expected \"DeepseekV3ForCausalLM\""), std::string::npos)
      << refusal(plain);

  auto nested = kimi_k25_nested();
  nested["text_config"]["model_type"] = "qwen3_moe";
  EXPECT_NE(refusal(nested).find("$.text_config.model_type: expected"), std::string::npos) << refusal(nested);
  nested = kimi_k25_nested();
  nested["model_type"] = "deepseek_v3";
  EXPECT_NE(refusal(nested).find("$.model_type: expected \"kimi_k25\""), std::string::npos) << refusal(nested);
  auto wrapper_alone = kimi_k25_nested()["text_config"];
  wrapper_alone["model_type"] = "kimi_k25";
  EXPECT_NE(refusal(wrapper_alone).find("$.text_config: missing"), std::string::npos) << refusal(wrapper_alone);
}

TEST(ModelConfig, NonInterleavedRopeIsRefused) {
  auto j = kimi_k25_nested();
  j["text_config"]["rope_interleave"] = false;
  EXPECT_THROW(parse_model_config(j, "k.json"), InputError);
}

TEST(ModelConfig, MissingMscaleStaysUnsetAsInHF) {
  auto j = kimi_k25_nested();
  j["text_config"]["rope_scaling"].erase("mscale");
  EXPECT_EQ(parse_model_config(j, "k.json").rope.mscale, 0.0);
}

TEST(ModelConfig, WrongTypeIsNamed) {
  auto j = kimi_k25_nested();
  j["text_config"]["hidden_size"] = "big";
  EXPECT_THROW(parse_model_config(j, "broken.json"), InputError);
}

TEST(ModelConfig, TpMustDivideHeads) {
  const ModelConfig c = parse_model_config(kimi_k25_nested(), "kimi.json");
  EXPECT_NO_THROW(c.validate_tp(8));
  try {
    c.validate_tp(3);
    FAIL() << "no throw";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("does not divide num_attention_heads 64"), std::string::npos) << e.what();
  }
}

TEST(ModelConfig, OverridesApplyAndUnknownKeysFail) {
  ModelConfig c = parse_model_config(kimi_k25_nested(), "kimi.json");
  apply_overrides(c, {{"num_hidden_layers", 3}}, "s.json", "$.model.overrides");
  EXPECT_EQ(c.num_hidden_layers, 3);
  try {
    apply_overrides(c, {{"num_layers", 3}}, "s.json", "$.model.overrides");
    FAIL() << "no throw";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("s.json: $.model.overrides.num_layers: unknown"), std::string::npos) << e.what();
  }
  // An override that breaks the routing (8 experts in 1 group is fine; 6 in 4 groups is not).
  ModelConfig grouped = c;
  grouped.n_group = 4;
  grouped.topk_group = 2;
  EXPECT_THROW(apply_overrides(grouped, {{"n_routed_experts", 6}}, "s.json", "$.model.overrides"), InputError);
}

}  // namespace
}  // namespace tpb
