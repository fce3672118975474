#include <gtest/gtest.h>

#include <random>

#include "suite/checks/control_drift.h"

namespace tpb {
namespace {

nlohmann::json control(const std::string& role, double scale, std::uint64_t seed, const std::string& digest = "d1",
                       int repetitions = 9) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> jitter(0.0, 0.01);
  nlohmann::json reps = nlohmann::json::array();
  for (int i = 0; i < repetitions; ++i) reps.push_back(50.0 * scale * (1.0 + jitter(rng)));
  return {{"case_id", role == "control-start" ? "a" : "b"}, {"role", role}, {"status", "ok"},
          {"latency", {{"repetitions_us", reps}}}, {"digests", nlohmann::json::array({{{"output", digest}}})}};
}

CheckResult judge(const nlohmann::json& start, const nlohmann::json& end) {
  ControlDriftCheck check;
  EXPECT_EQ(check.group_key(start), "control");
  EXPECT_EQ(check.group_key(end), "control");
  return check.evaluate({&start, &end});
}

TEST(ControlDrift, DriftingControlIsCaught) {
  const auto r = judge(control("control-start", 1.0, 1), control("control-end", 1.15, 2));
  EXPECT_EQ(r.status, "fail") << r.detail;
  EXPECT_NE(r.detail.find("control drifted"), std::string::npos);
}

TEST(ControlDrift, ControlTheMachineCannotRunIsSkippedWithTheReason) {
  nlohmann::json start = control("control-start", 1.0, 7), end = control("control-end", 1.0, 8);
  for (auto* r : {&start, &end}) {
    (*r)["status"] = "skipped";
    (*r)["error"] = "device cuda: no GPU is visible";
  }
  const auto skipped = judge(start, end);
  EXPECT_EQ(skipped.status, "skipped") << skipped.detail;
  EXPECT_NE(skipped.detail.find("no GPU is visible"), std::string::npos) << skipped.detail;
  end["status"] = "failed";  // ran once and failed: no judgement of drift can stand
  EXPECT_EQ(judge(start, end).status, "fail");
  start["status"] = "ok";
  end["status"] = "skipped";
  EXPECT_EQ(judge(start, end).status, "fail");
}

TEST(ControlDrift, StableControlPasses) {
  const auto r = judge(control("control-start", 1.0, 3), control("control-end", 1.0, 4));
  EXPECT_EQ(r.status, "pass") << r.detail;
}

TEST(ControlDrift, ChangedOutputIsDrift) {
  const auto r = judge(control("control-start", 1.0, 5), control("control-end", 1.0, 6, "d2"));
  EXPECT_EQ(r.status, "fail") << r.detail;
}

TEST(ControlDrift, TooFewRepetitionsCannotBeJudged) {
  const auto r = judge(control("control-start", 1.0, 7, "d1", 3), control("control-end", 1.3, 8, "d1", 3));
  EXPECT_EQ(r.status, "skipped") << r.detail;
}

TEST(ControlDrift, OtherCasesAreNotInTheGroup) {
  ControlDriftCheck check;
  EXPECT_EQ(check.group_key({{"role", "sweep"}}), "");
}

}  // namespace
}  // namespace tpb
