// The CPU reference ops (the spec of the later CUDA kernels) against independent double
// precision formulas, on fresh random inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>
#include <vector>

#include "suite/checks/tolerance.h"
#include "tpb/check.h"
#include "tpb/kernels/embedding.h"
#include "tpb/kernels/linear.h"
#include "tpb/kernels/mla_attention.h"
#include "tpb/kernels/mla_decode.h"
#include "tpb/kernels/moe_router.h"
#include "tpb/kernels/rmsnorm.h"
#include "tpb/kernels/rope_yarn.h"
#include "tpb/kernels/silu_and_mul.h"
#include "tpb/kernels/synthetic_weights.h"
#include "tests/unit/engine_test_support.h"

namespace tpb::kernels {
namespace {

std::vector<float> randn(std::size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

TEST(EngineKernels, SyntheticWeightsArePureExactAndSpread) {
  const auto key = synthetic::tensor_key(7, synthetic::name_hash("model.layers.0.mlp.gate_proj.weight"));
  const auto other = synthetic::tensor_key(7, synthetic::name_hash("model.layers.0.mlp.up_proj.weight"));
  const auto reseeded = synthetic::tensor_key(8, synthetic::name_hash("model.layers.0.mlp.gate_proj.weight"));
  double sum = 0, sum_sq = 0;
  int same_other = 0, same_seed = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    const float u = synthetic::uniform(key, i);
    ASSERT_GE(u, -1.0f);
    ASSERT_LT(u, 1.0f);
    ASSERT_EQ(u, synthetic::uniform(key, i));  // pure
    ASSERT_EQ(std::ldexp(u, 23), std::round(std::ldexp(u, 23)));  // a multiple of 2^-23
    same_other += u == synthetic::uniform(other, i);
    same_seed += u == synthetic::uniform(reseeded, i);
    sum += u;
    sum_sq += double(u) * u;
  }
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(sum_sq / n, 1.0 / 3.0, 0.01);  // variance of U[-1, 1)
  EXPECT_LT(same_other, 50);
  EXPECT_LT(same_seed, 50);
  EXPECT_EQ(synthetic::value(synthetic::InitKind::linear, 0.5f, key, 3), synthetic::uniform(key, 3) * 0.5f);
  const float g = synthetic::value(synthetic::InitKind::norm, 1.0f, key, 3);
  EXPECT_NEAR(g, 1.0f, 0.0625f);
  const float b = synthetic::value(synthetic::InitKind::bias, 1.0f, key, 3);
  EXPECT_LE(std::abs(b), 1.0f / 64);
}

TEST(EngineKernels, LinearMatchesDouble) {
  std::mt19937 rng(1);
  const int rows = 5, in = 77, out = 13;
  auto x = randn(rows * in, rng), w = randn(out * in, rng);
  std::vector<float> y(rows * out);
  linear_ref(x.data(), w.data(), y.data(), rows, in, out);
  for (int r = 0; r < rows; ++r)
    for (int o = 0; o < out; ++o) {
      double s = 0;
      for (int i = 0; i < in; ++i) s += double(x[r * in + i]) * w[o * in + i];
      EXPECT_NEAR(y[r * out + o], s, 1e-5 * std::sqrt(double(in)));
    }
}

TEST(EngineKernels, RmsnormMatchesDouble) {
  std::mt19937 rng(2);
  const int rows = 3, dim = 50, stride = 60;
  auto x = randn(rows * stride, rng, 3.0f), w = randn(dim, rng);
  std::vector<float> y(rows * stride, 42.0f);
  rmsnorm_ref(x.data(), w.data(), y.data(), rows, dim, stride, 1e-6f);
  for (int r = 0; r < rows; ++r) {
    double ms = 0;
    for (int i = 0; i < dim; ++i) ms += double(x[r * stride + i]) * x[r * stride + i];
    const double inv = 1.0 / std::sqrt(ms / dim + 1e-6);
    for (int i = 0; i < dim; ++i) EXPECT_NEAR(y[r * stride + i], w[i] * x[r * stride + i] * inv, 1e-5);
    for (int i = dim; i < stride; ++i) EXPECT_EQ(y[r * stride + i], 42.0f);  // outside the row: untouched
  }
}

// A row whose mean square is far below eps is scaled by eps, not by its own tiny RMS: rows
// of 1e-4-sized values (mean square 1e-8 against eps 1e-6) come out ten times smaller than
// 1 / rms would make them, and an all-zero row comes out zero, not 0/0. Dropping eps (or
// adding it after the square root) fails here; rows of ordinary size cannot tell.
TEST(EngineKernels, RmsNormNearZeroRowsAreScaledByEps) {
  const int dim = 64;
  std::mt19937 rng(11);
  std::vector<float> x = randn(2 * dim, rng, 1e-4f), w = randn(dim, rng), y(2 * dim, 42.0f);
  for (int i = dim; i < 2 * dim; ++i) x[i] = 0.0f;  // row 1: all zero
  const float eps = 1e-6f;
  rmsnorm_ref(x.data(), w.data(), y.data(), 2, dim, dim, eps);
  double ms = 0;
  for (int i = 0; i < dim; ++i) ms += double(x[i]) * x[i];
  ms /= dim;
  ASSERT_LT(ms, eps / 50) << "the row must sit far below eps for this test to mean anything";
  const double inv = 1.0 / std::sqrt(ms + eps);
  for (int i = 0; i < dim; ++i) EXPECT_NEAR(y[i], w[i] * x[i] * inv, 1e-6 * std::abs(w[i] * x[i] * inv) + 1e-12) << i;
  for (int i = dim; i < 2 * dim; ++i) EXPECT_EQ(y[i], 0.0f) << "an all-zero row";
}

TEST(EngineKernels, SiluAndMul) {
  const std::vector<float> g = {-3.0f, 0.0f, 0.5f, 4.0f}, u = {2.0f, 5.0f, -1.0f, 0.25f};
  std::vector<float> o(4);
  silu_and_mul_ref(g.data(), u.data(), o.data(), 1, 4);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(o[i], g[i] / (1.0 + std::exp(-double(g[i]))) * u[i], 1e-6);
}

TEST(EngineKernels, EmbeddingShardsSumToTheFullLookup) {
  std::mt19937 rng(3);
  const int vocab = 12, hidden = 5;
  auto table = randn(vocab * hidden, rng);
  const std::vector<std::int64_t> tokens = {0, 11, 5, 6};
  std::vector<float> sum(tokens.size() * hidden, 0.0f), part(tokens.size() * hidden);
  for (int r = 0; r < 3; ++r) {
    embedding_ref(tokens.data(), 4, table.data() + r * 4 * hidden, r * 4, r * 4 + 4, vocab, hidden, part.data());
    for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += part[i];
  }
  for (std::size_t t = 0; t < tokens.size(); ++t)
    for (int h = 0; h < hidden; ++h) EXPECT_EQ(sum[t * hidden + h], table[tokens[t] * hidden + h]);
  const std::int64_t bad = vocab;
  EXPECT_THROW(embedding_ref(&bad, 1, table.data(), 0, vocab, vocab, hidden, part.data()), InputError);
}

TEST(EngineKernels, RopeFrequenciesFollowYarn) {
  RopeParams p;
  p.dim = 8;
  p.theta = 10000.0;
  const RopeTable plain = make_rope_table(p);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(plain.inv_freq[i], std::pow(10000.0, -2.0 * i / 8), 1e-6);
  EXPECT_EQ(plain.attention_factor, 1.0f);

  // Kimi's rope: dim 64, theta 50000, factor 64 over 4096 positions. The correction dims are
  // floor/ceil of d*ln(L/(2*pi*beta)) / (2 ln theta); below `low` pure extrapolation, above
  // `high` pure interpolation (inv_freq / factor), linear in between.
  p = RopeParams{64, 50000.0, true, 64.0, 32.0, 1.0, 1.0, 1.0, 4096};
  const RopeTable yarn = make_rope_table(p);
  auto cdim = [](double rot) { return 64 * std::log(4096 / (rot * 2 * M_PI)) / (2 * std::log(50000.0)); };
  const double low = std::floor(cdim(32)), high = std::ceil(cdim(1));
  for (int i = 0; i < 32; ++i) {
    const double base = std::pow(50000.0, -2.0 * i / 64);
    const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
    const double want = base / 64.0 * ramp + base * (1.0 - ramp);
    EXPECT_NEAR(yarn.inv_freq[i] / want, 1.0, 1e-5) << "i=" << i;
  }
  EXPECT_EQ(yarn.attention_factor, 1.0f);  // mscale == mscale_all_dim
  p.mscale = 0.707;
  const double m = (0.1 * 0.707 * std::log(64.0) + 1) / (0.1 * std::log(64.0) + 1);
  EXPECT_NEAR(make_rope_table(p).attention_factor, m, 1e-6);
}

TEST(EngineKernels, RopeRotatesInterleavedPairs) {
  RopeParams p;
  p.dim = 4;
  const RopeTable t = make_rope_table(p);
  std::vector<float> x = {1.0f, 2.0f, 3.0f, 4.0f, 1.0f, 2.0f, 3.0f, 4.0f};
  const std::vector<std::int64_t> pos = {0, 5};
  rope_interleaved_ref(x.data(), 2, 4, 1, pos.data(), t);
  EXPECT_EQ(x[0], 1.0f);  // position 0: identity
  EXPECT_EQ(x[3], 4.0f);
  for (int i = 0; i < 2; ++i) {
    const double a = 5.0 * t.inv_freq[i], u = 1.0 + 2 * i, v = 2.0 + 2 * i;
    EXPECT_NEAR(x[4 + 2 * i], u * std::cos(a) - v * std::sin(a), 1e-5);
    EXPECT_NEAR(x[5 + 2 * i], v * std::cos(a) + u * std::sin(a), 1e-5);
  }
}

TEST(EngineKernels, AbsorbedMlaEqualsPlainMla) {
  std::mt19937 rng(4);
  const MlaShape sh{3, 16, 8, 12, 24};
  const std::int64_t kv_len = 9, q_len = 4, q_pos0 = 5, width = sh.kv_lora + sh.rope + 3;  // padded rows
  auto q = randn(q_len * sh.heads * (sh.nope + sh.rope), rng);
  auto cache = randn(kv_len * width, rng);
  auto kv_b = randn(sh.heads * (sh.nope + sh.v_dim) * sh.kv_lora, rng, 0.2f);
  // Plain form from the same latent: k_nope / v = kv_b · c.
  const std::int64_t rows = sh.nope + sh.v_dim;
  std::vector<float> latent(kv_len * sh.kv_lora), k_rot(kv_len * sh.rope), kv(kv_len * sh.heads * rows);
  for (std::int64_t j = 0; j < kv_len; ++j) {
    std::copy_n(cache.data() + j * width, sh.kv_lora, latent.data() + j * sh.kv_lora);
    std::copy_n(cache.data() + j * width + sh.kv_lora, sh.rope, k_rot.data() + j * sh.rope);
  }
  linear_ref(latent.data(), kv_b.data(), kv.data(), kv_len, sh.kv_lora, sh.heads * rows);
  std::vector<float> k_nope(kv_len * sh.heads * sh.nope), v(kv_len * sh.heads * sh.v_dim);
  for (std::int64_t j = 0; j < kv_len; ++j)
    for (std::int64_t h = 0; h < sh.heads; ++h) {
      std::copy_n(kv.data() + (j * sh.heads + h) * rows, sh.nope, k_nope.data() + (j * sh.heads + h) * sh.nope);
      std::copy_n(kv.data() + (j * sh.heads + h) * rows + sh.nope, sh.v_dim, v.data() + (j * sh.heads + h) * sh.v_dim);
    }
  std::vector<float> plain(q_len * sh.heads * sh.v_dim), absorbed(plain.size());
  mla_attention_ref(q.data(), k_nope.data(), k_rot.data(), v.data(), plain.data(), q_len, kv_len, q_pos0, sh, 0.2f);
  mla_decode_absorbed_ref(q.data(), cache.data(), width, kv_b.data(), absorbed.data(), q_len, kv_len, q_pos0, sh, 0.2f);
  EXPECT_LE(test::rel_l2(absorbed, plain), kTpRelL2Fp32);  // the same fp32 maths in another sum order

  // Causality: keys after a query's position must not change its output.
  auto cache2 = cache;
  for (std::int64_t c = 0; c < width; ++c) cache2[(kv_len - 1) * width + c] += 1.0f;
  std::vector<float> absorbed2(plain.size());
  mla_decode_absorbed_ref(q.data(), cache2.data(), width, kv_b.data(), absorbed2.data(), q_len, kv_len, q_pos0, sh, 0.2f);
  const std::int64_t per_query = sh.heads * sh.v_dim;
  for (std::int64_t i = 0; i < (q_len - 1) * per_query; ++i) EXPECT_EQ(absorbed[i], absorbed2[i]);
  EXPECT_NE(absorbed[(q_len - 1) * per_query], absorbed2[(q_len - 1) * per_query]);
}

TEST(EngineKernels, RouterKeepsOnlyTheBestGroups) {
  // 8 experts in 4 groups of 2, keep 2 groups, top-2. Expert 6 has the highest single score,
  // but its group (6, 7) has the weakest pair, so it must not be chosen.
  auto logit = [](double s) { return static_cast<float>(std::log(s / (1 - s))); };  // sigmoid^-1
  const std::vector<double> s = {0.70, 0.65, 0.60, 0.62, 0.10, 0.15, 0.95, 0.05};
  std::vector<float> logits(8), bias(8, 0.0f);
  for (int e = 0; e < 8; ++e) logits[e] = logit(s[e]);
  RouterParams p{8, 2, 4, 2, true, 2.5f};
  std::vector<std::int32_t> idx(2);
  std::vector<float> w(2);
  moe_route_noaux_tc_ref(logits.data(), bias.data(), 1, p, idx.data(), w.data());
  // groups: (0,1)=1.35 (2,3)=1.22 (4,5)=0.25 (6,7)=1.00 -> keep 0 and 1 -> experts 0 and 1
  EXPECT_EQ(std::set<int>(idx.begin(), idx.end()), (std::set<int>{0, 1}));
  EXPECT_NEAR(w[0] + w[1], 2.5, 1e-5);  // normalised, then scaled
  EXPECT_NEAR(w[0] / w[1], 0.70 / 0.65, 1e-5);
  // The bias steers selection but not the weights: push expert 3 above 0 and 1.
  bias[3] = 0.2f;
  moe_route_noaux_tc_ref(logits.data(), bias.data(), 1, p, idx.data(), w.data());
  EXPECT_EQ(idx[0], 3);  // descending order of the biased score: 0.82, then 0.70
  EXPECT_EQ(idx[1], 0);
  EXPECT_NEAR(w[0] / w[1], 0.62 / 0.70, 1e-5);  // weights from the unbiased scores
  // Without groups expert 6 wins.
  p = RouterParams{8, 2, 1, 1, false, 1.0f};
  bias.assign(8, 0.0f);
  moe_route_noaux_tc_ref(logits.data(), bias.data(), 1, p, idx.data(), w.data());
  EXPECT_EQ(idx[0], 6);
  EXPECT_EQ(idx[1], 0);
  EXPECT_NEAR(w[0], 0.95, 1e-6);  // not normalised
}

}  // namespace
}  // namespace tpb::kernels
