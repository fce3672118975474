// The reference engine on synthetic weights: determinism, TP invariance (TP=1 vs 2 and 4,
// ranks as threads summing in rank order), absorbed vs plain MLA, prefill + decode vs one
// prefill, and the full Kimi-K2.5 preset validating without being allocated.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>

#include "reference_engine/config/model_config.h"
#include "reference_engine/model/engine.h"
#include "reference_engine/weights/weight_source.h"
#include "suite/checks/tolerance.h"
#include "tests/unit/engine_test_support.h"

namespace tpb {
namespace {

std::vector<std::int64_t> test_tokens(std::int64_t batch, std::int64_t seq, std::int64_t vocab, std::uint64_t salt) {
  std::vector<std::int64_t> t(batch * seq);
  for (std::size_t i = 0; i < t.size(); ++i)
    t[i] = static_cast<std::int64_t>(synthetic::mix64(salt * 1000003 + i) % static_cast<std::uint64_t>(vocab));
  return t;
}

struct RunSpec {
  std::string preset = "tiny-dsv3";
  int tp = 1;
  std::int64_t batch = 2;
  std::int64_t seq = 12;
  std::int64_t prefill = 12;  // tokens prefilled; the rest decoded one at a time
  AttentionForm attention = AttentionForm::automatic;
  std::uint64_t seed = 1234;
  Quantization quant = Quantization::bf16;  // int4: routed experts INT4 (exact dequant, fp32)
};

// Logits [batch, seq, vocab] of the run, from rank 0 (and checks every rank agrees bitwise).
std::vector<float> run_logits(const RunSpec& spec) {
  ModelConfig config = load_model_config_by_name(test::preset(spec.preset));
  config.quant = spec.quant;
  const auto tokens = test_tokens(spec.batch, spec.seq, config.vocab_size, 7);
  auto per_rank = test::run_ranks<std::vector<float>>(spec.tp, [&](Communicator& comm) {
    auto weights = make_synthetic_weights(spec.seed);
    EngineOptions options;
    options.attention = spec.attention;
    Engine engine(config, Shard{comm.rank(), spec.tp}, comm, *weights, options);
    const std::int64_t V = config.vocab_size;
    std::vector<float> out(spec.batch * spec.seq * V);
    std::vector<std::int64_t> first(spec.batch * spec.prefill);
    for (std::int64_t b = 0; b < spec.batch; ++b)
      for (std::int64_t i = 0; i < spec.prefill; ++i) first[b * spec.prefill + i] = tokens[b * spec.seq + i];
    engine.prefill(first, spec.batch);
    for (std::int64_t b = 0; b < spec.batch; ++b)
      std::memcpy(out.data() + b * spec.seq * V, engine.logits().data() + b * spec.prefill * V,
                  sizeof(float) * spec.prefill * V);
    for (std::int64_t i = spec.prefill; i < spec.seq; ++i) {
      std::vector<std::int64_t> step(spec.batch);
      for (std::int64_t b = 0; b < spec.batch; ++b) step[b] = tokens[b * spec.seq + i];
      engine.decode(step);
      for (std::int64_t b = 0; b < spec.batch; ++b)
        std::memcpy(out.data() + (b * spec.seq + i) * V, engine.logits().data() + b * V, sizeof(float) * V);
    }
    EXPECT_EQ(engine.stats().all_reduces, (2 * config.num_hidden_layers + 1) * (1 + spec.seq - spec.prefill));
    return out;
  });
  for (int r = 1; r < spec.tp; ++r)
    EXPECT_EQ(0, std::memcmp(per_rank[0].data(), per_rank[r].data(), per_rank[0].size() * sizeof(float)))
        << "rank " << r << " logits differ from rank 0";
  return per_rank[0];
}

// The policy's fp32 budget (suite/checks/tolerance.h): TP=N vs TP=1, and the absorbed and
// decode paths vs the plain prefill, differ in fp32 sum order only.
void expect_close(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  const double err = test::rel_l2(got, want);
  ASSERT_FALSE(std::isnan(err)) << what << ": NaN or Inf in the logits";
  EXPECT_LE(err, kTpRelL2Fp32) << what << ": rel-L2 " << err << " uses " << 100.0 * err / kTpRelL2Fp32 << "% of the budget";
  std::printf("[ measured ] %s: rel-L2 %.3g\n", what, err);
}

TEST(EngineModel, SameCaseTwiceIsBitwiseIdentical) {
  RunSpec s;
  s.prefill = 8;
  const auto a = run_logits(s), b = run_logits(s);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
}

TEST(EngineModel, LogitsAreFiniteAndDependOnInput) {
  RunSpec s;
  const auto a = run_logits(s);
  for (float v : a) ASSERT_TRUE(std::isfinite(v));
  s.seed = 99;  // another model gives other logits
  const auto b = run_logits(s);
  EXPECT_GT(test::rel_l2(a, b), 0.1);
}

class EngineTpInvariance : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(EngineTpInvariance, MatchesTp1PrefillAndDecode) {
  RunSpec s;
  s.preset = std::get<0>(GetParam());
  s.prefill = 7;
  const auto tp1 = run_logits(s);
  s.tp = std::get<1>(GetParam());
  const auto tpn = run_logits(s);
  expect_close(tpn, tp1, ("TP=" + std::to_string(s.tp) + " vs TP=1 " + s.preset).c_str());
}

// An INT4 model (synthetic INT4 routed experts): TP=N holds the same dequantized values, so the
// fp32 budget holds as for bf16; and it is another model than the bf16 one of the same seed.
TEST(EngineModel, Int4IsTpInvariantAndItsOwnModel) {
  RunSpec s;
  s.quant = Quantization::int4;
  s.prefill = 7;
  const auto tp1 = run_logits(s);
  for (float v : tp1) ASSERT_TRUE(std::isfinite(v));
  for (int tp : {2, 4}) {
    RunSpec n = s;
    n.tp = tp;
    expect_close(run_logits(n), tp1, ("int4 TP=" + std::to_string(tp) + " vs TP=1 tiny-dsv3").c_str());
  }
  RunSpec b = s;
  b.quant = Quantization::bf16;
  EXPECT_GT(test::rel_l2(run_logits(b), tp1), 0.05);
}

INSTANTIATE_TEST_SUITE_P(Presets, EngineTpInvariance,
                         ::testing::Combine(::testing::Values("tiny-dsv3", "tiny-dsv3-grouped"), ::testing::Values(2, 4)),
                         [](const auto& info) {
                           std::string n = std::get<0>(info.param) + "_tp" + std::to_string(std::get<1>(info.param));
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

TEST(EngineModel, AbsorbedMatchesPlainAttention) {
  RunSpec s;
  s.preset = "tiny-dsv3-grouped";
  s.attention = AttentionForm::plain;
  const auto plain = run_logits(s);
  s.attention = AttentionForm::absorbed;
  const auto absorbed = run_logits(s);
  expect_close(absorbed, plain, "absorbed vs plain MLA, prefill");
}

TEST(EngineModel, PrefillThenDecodeMatchesFullPrefill) {
  RunSpec s;
  const auto full = run_logits(s);
  s.prefill = 3;
  const auto decoded = run_logits(s);
  expect_close(decoded, full, "prefill 3 + decode 9 vs prefill 12");
  s.tp = 2;
  expect_close(run_logits(s), full, "TP=2 prefill 3 + decode 9 vs TP=1 prefill 12");
}

TEST(EngineModel, RoutingDependsOnTheInput) {
  // If every token chose the same experts the MoE tests above would prove little.
  const ModelConfig c = load_model_config_by_name(test::preset("tiny-dsv3-grouped"));
  auto weights = make_synthetic_weights(1234);
  test::SingleRankCommunicator comm;
  Engine engine(c, Shard{}, comm, *weights);
  const std::int64_t tokens = 32;
  engine.prefill(test_tokens(1, tokens, c.vocab_size, 3), 1);
  const auto& hits = engine.stats().expert_hits;
  ASSERT_EQ(static_cast<std::int64_t>(hits.size()), c.n_routed_experts);
  std::int64_t used = 0, total = 0, most = 0;
  for (auto h : hits) {
    used += h > 0;
    total += h;
    most = std::max(most, h);
  }
  const std::int64_t moe_layers = c.num_hidden_layers - c.first_k_dense_replace;
  EXPECT_EQ(total, tokens * c.num_experts_per_tok * moe_layers);
  EXPECT_EQ(used, c.n_routed_experts) << "some experts never chosen";
  EXPECT_LT(most, tokens * moe_layers) << "one expert took every token";
}

TEST(EngineModel, KvCacheHoldsTheLatentWidth) {
  const ModelConfig c = load_model_config_by_name(test::preset("tiny-dsv3"));
  auto weights = make_synthetic_weights(1);
  test::SingleRankCommunicator comm;
  Engine engine(c, Shard{}, comm, *weights);
  engine.prefill(test_tokens(3, 5, c.vocab_size, 1), 3);
  EXPECT_EQ(engine.cached_tokens(), 5);
  engine.decode({1, 2, 3});
  EXPECT_EQ(engine.cached_tokens(), 6);
  EXPECT_EQ(engine.batch(), 3);
  EXPECT_GE(engine.kv_cache_bytes(),
            std::size_t(c.num_hidden_layers * 3 * 6 * (c.kv_lora_rank + c.qk_rope_head_dim) * sizeof(float)));
}

TEST(EngineModel, BadInputsAreInputErrors) {
  const ModelConfig c = load_model_config_by_name(test::preset("tiny-dsv3"));
  auto weights = make_synthetic_weights(1);
  test::SingleRankCommunicator comm;
  Engine engine(c, Shard{}, comm, *weights);
  EXPECT_THROW(engine.decode({1}), InputError);                   // decode before prefill
  EXPECT_THROW(engine.prefill({1, 2, 3}, 2), InputError);         // unequal sequences
  EXPECT_THROW(engine.prefill({1, c.vocab_size}, 1), InputError);  // token outside the vocab
  EXPECT_THROW({ Engine bad(c, Shard{0, 3}, comm, *weights); }, InputError);  // 4 heads over 3 ranks
}

TEST(EngineModel, KimiPresetValidatesAndCountsParameters) {
  const ModelConfig c = load_model_config_by_name(test::preset("kimi-k2.5"));
  EXPECT_NO_THROW(c.validate());
  EXPECT_TRUE(c.nested_text_config);
  EXPECT_EQ(c.kv_cache_width(), 576);
  for (int tp : {1, 2, 4, 8}) EXPECT_NO_THROW(c.validate_tp(tp));
  const double params = static_cast<double>(c.parameter_count());
  std::printf("[ measured ] kimi-k2.5 parameter_count = %.6g\n", params);
  EXPECT_NEAR(params / 1e12, 1.03, 0.015);  // MODEL.md: ~1.03 T
  // yarn: m = 0.1 * 1 * ln(64) + 1; scale = 192^-0.5 * m^2
  const double m = 0.1 * std::log(64.0) + 1.0;
  EXPECT_NEAR(c.attention_scale(), m * m / std::sqrt(192.0), 1e-12);
  // The engine refuses it on a host that cannot hold it (~4 TB in fp32), before allocating.
  const double host_bytes = double(::sysconf(_SC_PHYS_PAGES)) * double(::sysconf(_SC_PAGESIZE));
  if (host_bytes < params * 4) {
    test::SingleRankCommunicator comm;
    auto weights = make_synthetic_weights(1);
    EXPECT_THROW({ Engine e(c, Shard{}, comm, *weights); }, InputError);
  }
}

}  // namespace
}  // namespace tpb
