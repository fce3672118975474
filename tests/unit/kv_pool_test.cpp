// size_kv_pool (reference_engine/memory/planner.h): the one function the planner and the GPU
// engine size the KV pool with. Hand-computed pools, the feasibility boundary at the fractions
// the sentence names, the sentence itself, and plan_memory agreeing with it on its own readings.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "reference_engine/config/model_config.h"
#include "reference_engine/memory/comm_bytes.h"
#include "reference_engine/memory/planner.h"
#include "tests/unit/engine_test_support.h"
#include "tpb/check.h"

namespace tpb {
namespace {

constexpr double G = static_cast<double>(kGiB);

TEST(KvPool, HandComputedFeasiblePool) {
  // total 80 GiB, avail 20 GiB, fraction 0.85: rest = 20 - 80 x 0.15 = 8 GiB;
  // 8 x 2^30 / 70272 = 122238.37 -> 122238 tokens, enough for 100000.
  const KvPoolSize k = size_kv_pool(80 * G, 20 * G, 0.85, 70272, 100000);
  EXPECT_NEAR(k.rest_bytes, 8 * G, 1.0);
  EXPECT_EQ(k.max_tokens, 122238);
  EXPECT_TRUE(k.feasible);
  EXPECT_EQ(k.total_bytes, 80 * G);
  EXPECT_EQ(k.avail_bytes, 20 * G);
  EXPECT_EQ(k.cell_bytes, 70272);
  EXPECT_EQ(k.requested_tokens, 100000);
  EXPECT_EQ(k.verdict.rfind("Feasible: 122238 KV tokens per rank", 0), 0u) << k.verdict;
  EXPECT_NE(k.verdict.find("enough for the requested 100000"), std::string::npos) << k.verdict;
}

TEST(KvPool, TooFewTokensIsInfeasibleWithTheFractionsThatWork) {
  // The same readings asked for 122239 tokens: one more than the pool holds.
  const KvPoolSize k = size_kv_pool(80 * G, 20 * G, 0.85, 70272, 122239);
  EXPECT_EQ(k.max_tokens, 122238);
  EXPECT_FALSE(k.feasible);
  EXPECT_NE(k.verdict.find("Not enough memory"), std::string::npos) << k.verdict;
  EXPECT_NE(k.verdict.find("only 122238 of the requested 122239 tokens fit"), std::string::npos) << k.verdict;
  EXPECT_NE(k.verdict.find("gives the requested 122239"), std::string::npos) << k.verdict;
  // The fraction it names is the boundary: the pool holds the tokens there and not just below.
  EXPECT_GT(k.min_mem_fraction_requested, 0.85);
  EXPECT_TRUE(size_kv_pool(80 * G, 20 * G, k.min_mem_fraction_requested, 70272, 122239).feasible);
  EXPECT_FALSE(size_kv_pool(80 * G, 20 * G, std::nextafter(k.min_mem_fraction_requested, 0.0), 70272, 122239).feasible);
  EXPECT_TRUE(size_kv_pool(80 * G, 20 * G, k.min_mem_fraction, 70272, 1).feasible);
  EXPECT_EQ(size_kv_pool(80 * G, 20 * G, k.min_mem_fraction, 70272, 1).max_tokens, 1);
}

TEST(KvPool, NegativeRestHoldsNoToken) {
  // avail 10 GiB: rest = 10 - 80 x 0.15 = -2 GiB; no token even when none is requested.
  const KvPoolSize k = size_kv_pool(80 * G, 10 * G, 0.85, 70272, 0);
  EXPECT_NEAR(k.rest_bytes, -2 * G, 1.0);
  EXPECT_EQ(k.max_tokens, 0);
  EXPECT_FALSE(k.feasible);
  EXPECT_EQ(k.min_mem_fraction_requested, 0.0);
  EXPECT_EQ(k.verdict, kv_verdict(80 * G, 10 * G, 0.85, 70272, 0));
  EXPECT_NE(k.verdict.find("no KV token fits"), std::string::npos) << k.verdict;
}

TEST(KvPool, FractionOutsideZeroOneIsAnInputError) {
  EXPECT_THROW(size_kv_pool(80 * G, 20 * G, 0.0, 70272, 1), InputError);
  EXPECT_THROW(size_kv_pool(80 * G, 20 * G, 1.5, 70272, 1), InputError);
  EXPECT_THROW(size_kv_pool(80 * G, 20 * G, 0.5, 70272, -1), InputError);
  EXPECT_NO_THROW(size_kv_pool(80 * G, 20 * G, 1.0, 70272, 1));
}

TEST(KvPool, PlanMemoryIsTheFunctionOnItsPredictedReadings) {
  PlanInput in;
  in.config = load_model_config(test::preset("tiny-dsv3"));
  in.gpu_total_bytes = 8 * kGiB;
  in.cuda_context_bytes = 500 * kMiB;
  in.requested_tokens = 4096;
  for (double f : {0.05, 0.5, 0.9}) {
    in.mem_fraction = f;
    const MemoryPlan p = plan_memory(in);
    const KvPoolSize k = size_kv_pool(static_cast<double>(p.total_bytes), static_cast<double>(p.avail_bytes), f,
                                      p.kv_cell_bytes, in.requested_tokens);
    EXPECT_EQ(p.max_tokens, k.max_tokens) << f;
    EXPECT_EQ(p.feasible, k.feasible) << f;
    EXPECT_EQ(p.rest_bytes, k.rest_bytes) << f;
    EXPECT_EQ(p.min_mem_fraction, k.min_mem_fraction) << f;
    EXPECT_EQ(p.min_mem_fraction_requested, k.min_mem_fraction_requested) << f;
    EXPECT_EQ(p.verdict.substr(0, k.verdict.size()), k.verdict) << f;  // the plan may add a slack warning
  }
}

}  // namespace
}  // namespace tpb
