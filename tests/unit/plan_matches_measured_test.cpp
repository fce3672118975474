// plan_matches_measured on hand-built records: agreement within max(2 %, 256 MiB) passes,
// a planted difference in one term fails naming that term and rank, and a record without a
// plan or without measurements is skipped, never passed.
#include <gtest/gtest.h>

#include <string>

#include "suite/checks/check.h"
#include "suite/checks/plan_matches_measured.h"

namespace tpb {
namespace {

using nlohmann::json;
constexpr double GiB = 1024.0 * 1024.0 * 1024.0;

json record(double weights_measured_rank1) {
  json r = {{"case_id", "c1"}, {"status", "ok"}};
  r["plan"] = {{"breakdown", {{"weights", 60 * GiB}, {"comm_buffers", 0.5 * GiB}, {"kv_cache", 40 * GiB}}}};
  r["memory"] = json::array(
      {{{"source", "cudaMemGetInfo"}, {"breakdown", {{"weights", 60.3 * GiB}, {"comm_buffers", 0.6 * GiB}, {"kv_cache", 40 * GiB}}}},
       {{"source", "cudaMemGetInfo"},
        {"breakdown", {{"weights", weights_measured_rank1}, {"comm_buffers", 0.6 * GiB}, {"kv_cache", 40 * GiB}}}}});
  return r;
}

TEST(PlanMatchesMeasured, WithinBudgetPasses) {
  const PlanMatchesMeasuredCheck check;
  const json r = record(61 * GiB);  // 1 GiB off 60 GiB: 1.7 %, inside 2 % (1.2 GiB)
  const CheckResult res = check.evaluate({&r});
  EXPECT_EQ(res.status, "pass") << res.detail;
  EXPECT_NE(res.detail.find("weights"), std::string::npos);
}

TEST(PlanMatchesMeasured, PlantedDifferenceFailsNamingTermAndRank) {
  const PlanMatchesMeasuredCheck check;
  const json r = record(62 * GiB);  // 2 GiB off: 3.3 % > 2 %
  const CheckResult res = check.evaluate({&r});
  EXPECT_EQ(res.status, "fail");
  EXPECT_NE(res.detail.find("term 'weights' on rank 1"), std::string::npos) << res.detail;
  EXPECT_NE(res.detail.find("planned 61440.0 MiB"), std::string::npos) << res.detail;
}

TEST(PlanMatchesMeasured, SmallTermsGetTheAbsoluteBudget) {
  const PlanMatchesMeasuredCheck check;
  json r = record(60 * GiB);
  r["memory"][0]["breakdown"]["comm_buffers"] = 0.5 * GiB + 200.0 * (1 << 20);  // +200 MiB < 256 MiB
  EXPECT_EQ(check.evaluate({&r}).status, "pass");
  r["memory"][0]["breakdown"]["comm_buffers"] = 0.5 * GiB + 300.0 * (1 << 20);  // +300 MiB > 256 MiB
  const CheckResult res = check.evaluate({&r});
  EXPECT_EQ(res.status, "fail");
  EXPECT_NE(res.detail.find("comm_buffers"), std::string::npos) << res.detail;
}

TEST(PlanMatchesMeasured, NothingToCompareIsSkippedNotPassed) {
  const PlanMatchesMeasuredCheck check;
  json no_plan = record(60 * GiB);
  no_plan.erase("plan");
  EXPECT_EQ(check.evaluate({&no_plan}).status, "skipped");
  json no_memory = record(60 * GiB);
  no_memory["memory"] = nullptr;
  EXPECT_EQ(check.evaluate({&no_memory}).status, "skipped");
  json other_terms = record(60 * GiB);
  other_terms["plan"]["breakdown"] = {{"graph_pool", 1 * GiB}};
  const CheckResult res = check.evaluate({&other_terms});
  EXPECT_EQ(res.status, "skipped");
  EXPECT_NE(res.detail.find("graph_pool"), std::string::npos);
  json failed = record(60 * GiB);
  failed["status"] = "failed";
  EXPECT_EQ(check.evaluate({&failed}).status, "skipped");
}

// A pool record: planned max_tokens of a 70272 B cell (Kimi-K2.5's, 61 layers) at fraction
// 0.9, and each rank's measured pool.
json pool_record(double tokens_rank0, double tokens_rank1, double measured_fraction = 0.9) {
  json r = {{"case_id", "c2"}, {"status", "ok"}};
  r["plan"] = {{"mem_fraction", 0.9}, {"max_tokens", 1000000}, {"kv_cell_bytes", 70272},
               {"breakdown", {{"weights", 60 * GiB}}}};
  auto rank = [&](double tokens) {
    return json{{"source", "cudaMemGetInfo"},
                {"breakdown", {{"weights", 60 * GiB}}},
                {"kv_pool", {{"tokens", tokens}, {"mem_fraction", measured_fraction}, {"total_bytes", 130 * GiB},
                             {"avail_bytes", 70 * GiB}}}};
  };
  r["memory"] = json::array({rank(tokens_rank0), rank(tokens_rank1)});
  return r;
}

TEST(PlanMatchesMeasured, KvPoolTokensWithinBudgetPass) {
  const PlanMatchesMeasuredCheck check;
  // 1e6 tokens x 70272 B = 65.4 GiB planned: the budget is 2 % = 1.31 GiB = 20000 tokens.
  const json r = pool_record(1000000 - 19000, 1000000 + 19000);
  const CheckResult res = check.evaluate({&r});
  EXPECT_EQ(res.status, "pass") << res.detail;
  EXPECT_NE(res.detail.find("kv_pool_tokens 1000000 tokens"), std::string::npos) << res.detail;
  EXPECT_NE(res.detail.find("981000 tokens"), std::string::npos) << res.detail;
}

TEST(PlanMatchesMeasured, KvPoolTokensOffByMoreThanTheBudgetFailNamingTheTerm) {
  const PlanMatchesMeasuredCheck check;
  const json r = pool_record(1000000, 1000000 - 21000);  // 21000 x 70272 B = 1.37 GiB > 1.31 GiB
  const CheckResult res = check.evaluate({&r});
  EXPECT_EQ(res.status, "fail");
  EXPECT_NE(res.detail.find("term 'kv_pool_tokens' on rank 1"), std::string::npos) << res.detail;
  EXPECT_NE(res.detail.find("measured 979000 tokens"), std::string::npos) << res.detail;
}

TEST(PlanMatchesMeasured, KvPoolAtAnotherFractionFails) {
  const PlanMatchesMeasuredCheck check;
  const json r = pool_record(1000000, 1000000, 0.8);
  const CheckResult res = check.evaluate({&r});
  EXPECT_EQ(res.status, "fail");
  EXPECT_NE(res.detail.find("kv_pool_tokens"), std::string::npos) << res.detail;
  EXPECT_NE(res.detail.find("mem_fraction"), std::string::npos) << res.detail;
}

TEST(PlanMatchesMeasured, ExactKvCacheIsNotComparedWithThePlannedPool) {
  const PlanMatchesMeasuredCheck check;
  json r = pool_record(64, 64);
  for (auto& m : r["memory"]) m["kv_pool"]["mem_fraction"] = 0.0;  // exact cache: no formula
  const CheckResult res = check.evaluate({&r});
  EXPECT_EQ(res.status, "pass") << res.detail;
  EXPECT_NE(res.detail.find("not measured: kv_pool_tokens"), std::string::npos) << res.detail;
}

}  // namespace
}  // namespace tpb
