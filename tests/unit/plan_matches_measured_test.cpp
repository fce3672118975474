// plan_matches_measured on hand-built records: agreement within max(2 %, 256 MiB) passes
// for device readings and within max(2 %, kPlanHostAbsTolerance) for the CPU's host
// allocations (the tolerance rule, plan_budget_bytes),
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

// The tolerance rule: 2 % of the planned bytes, or the measuring source's floor where that
// is larger; the floor is 256 MiB for device readings (and unknown sources), the allocator's
// granularity for host allocations and the accounting.
TEST(PlanTolerance, FloorDependsOnTheSource) {
  EXPECT_EQ(plan_abs_tolerance("cudaMemGetInfo"), kPlanAbsTolerance);
  EXPECT_EQ(plan_abs_tolerance("NVML per-process use, 1/2 of the device"), kPlanAbsTolerance);
  EXPECT_EQ(plan_abs_tolerance("?"), kPlanAbsTolerance);
  EXPECT_EQ(plan_abs_tolerance("host allocations (glibc mallinfo2: uordblks + hblkhd)"), kPlanHostAbsTolerance);
  EXPECT_EQ(plan_abs_tolerance("accounting"), kPlanHostAbsTolerance);
  EXPECT_LT(kPlanHostAbsTolerance, std::int64_t{1} << 20);  // far below a tiny model's MB of weights
}

TEST(PlanTolerance, TwoPercentOrTheFloor) {
  const std::string host = "host allocations (glibc mallinfo2: uordblks + hblkhd)";
  const double floor = double(kPlanHostAbsTolerance);
  // Small terms get the floor; from floor / 2 % up, 2 % of the planned bytes.
  EXPECT_EQ(plan_budget_bytes(0, host), floor);
  EXPECT_EQ(plan_budget_bytes(floor, host), floor);
  EXPECT_EQ(plan_budget_bytes(floor / kPlanRelTolerance, host), floor);
  EXPECT_DOUBLE_EQ(plan_budget_bytes(100 * floor, host), 2 * floor);
  EXPECT_DOUBLE_EQ(plan_budget_bytes(-100 * floor, host), 2 * floor);  // |planned|
  EXPECT_EQ(plan_budget_bytes(1 * GiB, "cudaMemGetInfo"), double(kPlanAbsTolerance));
  EXPECT_DOUBLE_EQ(plan_budget_bytes(60 * GiB, "cudaMemGetInfo"), 0.02 * 60 * GiB);
}

// A CPU record: rank 1's weights measured by host allocations.
json cpu_record(double planned_weights, double measured_rank1) {
  json r = {{"case_id", "cpu"}, {"status", "ok"}};
  r["plan"] = {{"breakdown", {{"weights", planned_weights}}}};
  const std::string host = "host allocations (glibc mallinfo2: uordblks + hblkhd)";
  r["memory"] = json::array({{{"source", host}, {"breakdown", {{"weights", planned_weights + 4096}}}},
                             {{"source", host}, {"breakdown", {{"weights", measured_rank1}}}}});
  return r;
}

TEST(PlanMatchesMeasured, CpuWeightsTripledFailNamingTermRankAndBothNumbers) {
  const PlanMatchesMeasuredCheck check;
  const double planned = 3.0 * (1 << 20);  // a tiny model's MB of weights
  const json clean = cpu_record(planned, planned + 8192);
  const CheckResult pass = check.evaluate({&clean});
  EXPECT_EQ(pass.status, "pass") << pass.detail;
  EXPECT_NE(pass.detail.find("(host allocations"), std::string::npos) << pass.detail;
  // The old floor (256 MiB) would have passed this; the host floor does not.
  const json tripled = cpu_record(planned, 3 * planned);
  const CheckResult res = check.evaluate({&tripled});
  EXPECT_EQ(res.status, "fail");
  EXPECT_NE(res.detail.find("term 'weights' on rank 1"), std::string::npos) << res.detail;
  EXPECT_NE(res.detail.find("planned 3.0 MiB (3145728 B)"), std::string::npos) << res.detail;
  EXPECT_NE(res.detail.find("measured 9.0 MiB (9437184 B)"), std::string::npos) << res.detail;
  // Just past the budget fails, just inside passes.
  const double budget = plan_budget_bytes(planned, "host allocations");
  const json inside = cpu_record(planned, planned + budget - 1);
  EXPECT_EQ(check.evaluate({&inside}).status, "pass");
  const json outside = cpu_record(planned, planned + budget + 1);
  EXPECT_EQ(check.evaluate({&outside}).status, "fail");
}

}  // namespace
}  // namespace tpb
