#include <gtest/gtest.h>

#include <cmath>

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

TEST(ModelConfig, MissingFieldIsNamed) {
  auto j = kimi_k25_nested();
  j["text_config"].erase("kv_lora_rank");
  try {
    parse_model_config(j, "broken.json");
    FAIL() << "no throw";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("broken.json: $.text_config.kv_lora_rank: missing"), std::string::npos) << e.what();
  }
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
