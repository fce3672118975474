// The CPU engine's routing hook: pinned to the choices it recorded itself it reproduces its
// own logits bitwise (the weights of given choices use the router's arithmetic); pinned to a
// choice moved to another expert it does not. This is what lets the GPU tests compare bf16
// arithmetic with fp32 arithmetic under identical top-k decisions.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "reference_engine/model/engine.h"
#include "reference_engine/weights/weight_source.h"
#include "tests/unit/engine_test_support.h"

namespace tpb::test {
namespace {

std::vector<float> prefill_then_decode(const ModelConfig& config, EngineOptions options, std::vector<std::int32_t>* routing) {
  SingleRankCommunicator comm;
  auto weights = make_synthetic_weights(5);
  Engine engine(config, Shard{0, 1}, comm, *weights, options);
  std::vector<std::int64_t> prompt;
  for (std::int64_t i = 0; i < 2 * 7; ++i) prompt.push_back((i * 37 + 11) % config.vocab_size);
  engine.prefill(prompt, 2);
  std::vector<float> out = engine.logits();
  engine.decode({3, 5});
  out.insert(out.end(), engine.logits().begin(), engine.logits().end());
  if (routing != nullptr) *routing = engine.stats().routing;
  return out;
}

TEST(EnginePinnedRouting, OwnChoicesReproduceBitwiseAndAMovedChoiceDoesNot) {
  const ModelConfig config = load_model_config_by_name(preset("tiny-dsv3-grouped"));
  EngineOptions record;
  record.record_routing = true;
  std::vector<std::int32_t> routing;
  const std::vector<float> free_run = prefill_then_decode(config, record, &routing);
  // 2 sequences x (7 prefill + 1 decode) tokens, top_k ids per token, per MoE layer.
  std::int64_t moe_layers = 0;
  for (std::int64_t l = 0; l < config.num_hidden_layers; ++l) moe_layers += config.is_moe_layer(l);
  ASSERT_EQ(static_cast<std::int64_t>(routing.size()), moe_layers * 2 * 8 * config.num_experts_per_tok);

  EngineOptions pinned;
  pinned.pinned_routing = &routing;
  const std::vector<float> same = prefill_then_decode(config, pinned, nullptr);
  ASSERT_EQ(same.size(), free_run.size());
  EXPECT_EQ(std::memcmp(same.data(), free_run.data(), sizeof(float) * same.size()), 0);

  // Token 0 of the first MoE call: its last choice moves to an expert it did not choose.
  std::vector<std::int32_t> moved = routing;
  const std::int64_t K = config.num_experts_per_tok;
  const auto chosen = [&](std::int32_t e) { return std::find(moved.begin(), moved.begin() + K, e) != moved.begin() + K; };
  std::int32_t e = 0;
  while (chosen(e)) ++e;
  moved[K - 1] = e;
  EngineOptions pinned_moved;
  pinned_moved.pinned_routing = &moved;
  const std::vector<float> other = prefill_then_decode(config, pinned_moved, nullptr);
  // Not a budget but a floor: another expert must move the logits far beyond fp32 sum-order
  // noise (kTpRelL2Fp32, 1e-5), so 10x that.
  EXPECT_GT(rel_l2(other, free_run), 1e-4);

  std::vector<std::int32_t> too_short(routing.begin(), routing.begin() + 4);
  EngineOptions pinned_short;
  pinned_short.pinned_routing = &too_short;
  EXPECT_THROW(prefill_then_decode(config, pinned_short, nullptr), Error);
}

}  // namespace
}  // namespace tpb::test
