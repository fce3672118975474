// Outputs with NaN or Inf fail a case (issue 17, finding 7): the sentence a workload records,
// and that it crosses the process boundary in the rank's result.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "suite/scenario/case_spec.h"
#include "suite/measure/digest.h"
#include "suite/runner/runner.h"
#include "suite/scenario/scenario.h"

namespace tpb {
namespace {

TEST(Nonfinite, NamesTheCountAndTheFirstPosition) {
  std::vector<float> v(100, 1.0f);
  EXPECT_EQ(nonfinite_values("logits", v.data(), v.size()), "");
  v[41] = std::numeric_limits<float>::infinity();
  v[77] = std::nanf("");
  EXPECT_EQ(nonfinite_values("logits", v.data(), v.size()),
            "output 'logits': 2 of 100 values are NaN or Inf, the first at index 41 (inf)");
}

TEST(Nonfinite, TravelsInTheRankResult) {
  RankResult r;
  r.rank = 1;
  r.nonfinite = "output 'logits': 1 of 4 values are NaN or Inf, the first at index 2 (nan)";
  EXPECT_EQ(RankResult::from_json(r.to_json()).nonfinite, r.nonfinite);
  EXPECT_FALSE(RankResult().to_json().contains("nonfinite")) << "written only when set";
}

// The runner's record from the ranks' results: NaN fails an ok case naming the first rank
// that saw it; a scenario that expects non-finite outputs records them instead, and fails a
// case that has none.
RankResult rank_result(int rank, const std::string& nonfinite) {
  RankResult r;
  r.rank = rank;
  r.latency_us = {10.0, 11.0};
  r.nonfinite = nonfinite;
  return r;
}

TEST(Nonfinite, FailsTheCaseUnlessTheScenarioExpectsIt) {
  Scenario s;
  s.workload = "allreduce";
  Case c;
  c.tp = 2;
  c.params = {{"tp", 2}, {"allreduce", "shm"}, {"message_bytes", 1024}};
  const std::string nan = "output 'output': 1 of 256 values are NaN or Inf, the first at index 7 (nan)";
  const std::vector<RankResult> clean = {rank_result(0, ""), rank_result(1, "")};
  const std::vector<RankResult> dirty = {rank_result(0, ""), rank_result(1, nan)};

  EXPECT_EQ(case_record_from_ranks(s, c, clean)["status"], "ok");
  nlohmann::json r = case_record_from_ranks(s, c, dirty);
  EXPECT_EQ(r["status"], "failed");
  EXPECT_EQ(r["error"], "rank 1: " + nan);

  s.nonfinite = "expected";
  r = case_record_from_ranks(s, c, dirty);
  EXPECT_EQ(r["status"], "ok");
  EXPECT_EQ(r["nonfinite"], "rank 1: " + nan);
  r = case_record_from_ranks(s, c, clean);
  EXPECT_EQ(r["status"], "failed");
  EXPECT_EQ(r["error"], "no output holds NaN or Inf on any rank, and the scenario expects them (nonfinite: \"expected\")");
}

}  // namespace
}  // namespace tpb
