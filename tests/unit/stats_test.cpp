#include <gtest/gtest.h>

#include <random>

#include "suite/measure/stats.h"

namespace tpb {
namespace {

TEST(Stats, PercentilesInterpolate) {
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2.0);
  EXPECT_DOUBLE_EQ(median({4, 1, 2, 3}), 2.5);
  EXPECT_DOUBLE_EQ(percentile({10, 20, 30, 40, 50}, 90), 46.0);
}

// Reference values from the exact null distribution tables (and scipy.stats.mannwhitneyu,
// method="exact"): a = {1,2,3}, b = {4,5,6}: U = 0, two-sided p = 2/20 = 0.1.
TEST(Stats, MannWhitneyExactSmallSample) {
  const auto r = mann_whitney_u({1, 2, 3}, {4, 5, 6});
  EXPECT_TRUE(r.exact);
  EXPECT_DOUBLE_EQ(r.u, 0.0);
  EXPECT_NEAR(r.p_value, 0.1, 1e-12);
  // Fully interleaved samples: no evidence.
  const auto s = mann_whitney_u({1, 3, 5, 7}, {2, 4, 6, 8});
  EXPECT_GT(s.p_value, 0.5);
}

TEST(Stats, MannWhitneyNormalApproximationWithTies) {
  const auto r = mann_whitney_u({1, 1, 2, 2, 3, 3, 4, 4, 5}, {6, 6, 7, 7, 8, 8, 9, 9, 10});
  EXPECT_FALSE(r.exact);
  EXPECT_LT(r.p_value, 0.001);
  const auto same = mann_whitney_u({5, 5, 5}, {5, 5, 5});
  EXPECT_DOUBLE_EQ(same.p_value, 1.0);
}

// Heavy ties: the normal approximation's variance carries the tie correction (and the
// continuity correction), as scipy.stats.mannwhitneyu(method="asymptotic") computes it.
// Worked by hand: average ranks, U = 8, var = 8 * 8 / 12 * (17 - sum(t^3 - t) / 240) = 82.667,
// z = (|8 - 32| - 0.5) / sqrt(82.667), p = erfc(z / sqrt 2) = 0.0097476; without the tie term
// (var 90.667) p would be 0.013587.
TEST(Stats, MannWhitneyTieCorrectionByHand) {
  const auto r = mann_whitney_u({1, 1, 1, 2, 2, 2, 2, 3}, {2, 2, 3, 3, 3, 3, 4, 4});
  EXPECT_FALSE(r.exact);
  EXPECT_DOUBLE_EQ(r.u, 8.0);
  EXPECT_NEAR(r.p_value, 0.0097476366, 1e-8);
}

// The planted-fault pair from issue 7: a series 10 % slower is flagged; a noisy but equal
// one is not.
TEST(Stats, TenPercentSlowerSeriesIsSignificantNoisyEqualSeriesIsNot) {
  std::mt19937_64 rng(42);
  std::normal_distribution<double> noise(0.0, 0.02);
  std::vector<double> base, slower, equal;
  for (int i = 0; i < 15; ++i) {
    base.push_back(100.0 * (1 + noise(rng)));
    slower.push_back(110.0 * (1 + noise(rng)));
    equal.push_back(100.0 * (1 + noise(rng)));
  }
  EXPECT_LT(mann_whitney_u(base, slower).p_value, 0.05);
  EXPECT_GT(mann_whitney_u(base, equal).p_value, 0.05);
  const auto ci = median_ratio_interval(base, slower);
  EXPECT_GT(ci.ratio, 1.05);
  EXPECT_LT(ci.low, ci.ratio);
  EXPECT_GT(ci.high, ci.ratio);
  EXPECT_GT(ci.low, 1.0);
}

}  // namespace
}  // namespace tpb
