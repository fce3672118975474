// Qualification profiles are validated before anything is measured: the shipped profiles
// pass as written; a latency probe over a shared-placement scenario (its timings measure
// ranks contending for one GPU, not an interconnect) and peer_bandwidth on one GPU are
// refused, each problem named by its JSON path, all of them in one error.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "suite/qualify/qualify.h"
#include "suite/scenario/scenario.h"
#include "tpb/check.h"

namespace tpb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kSource = TPB_SOURCE_DIR;
const std::string kSharedEngine = kSource + "/scenarios/qualify/h200x1-engine-shared.json";

json cuda_profile(int gpus, json probes) {
  return {{"schema", 1}, {"name", "t"}, {"device", "cuda"}, {"gpus", gpus}, {"probes", std::move(probes)}};
}

// The validation error's text; "" when the profile is accepted.
std::string problems_of(const std::string& path) {
  try {
    validate_profile(path);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// The same for a profile written to a file of its own (removed afterwards).
std::string problems_of(const json& profile, const std::string& name) {
  const fs::path path = fs::temp_directory_path() / ("tpb_qualify_" + name + "_" + std::to_string(::getpid()) + ".json");
  std::ofstream(path) << profile.dump(2);
  const std::string why = problems_of(path.string());
  fs::remove(path);
  return why;
}

TEST(QualifyProfile, AcceptsH200x1AsWritten) {
  const std::string path = kSource + "/scenarios/qualify/h200x1.json";
  EXPECT_EQ(problems_of(path), "");
  // Its conformance probe is the one-GPU shared scenario, and only a conformance probe runs it.
  const json doc = json::parse(std::ifstream(path));
  int shared_probes = 0;
  for (const auto& pr : doc["probes"]) {
    EXPECT_NE(pr["probe"], "peer_bandwidth") << "one GPU has no link to measure";
    if (!pr.contains("scenario")) continue;
    const Scenario s = load_scenario(kSource + "/" + pr["scenario"].get<std::string>());
    if (s.placement == Placement::shared) {
      EXPECT_EQ(pr["probe"], "conformance");
      ++shared_probes;
    }
  }
  EXPECT_EQ(shared_probes, 1);
}

TEST(QualifyProfile, AcceptsEveryShippedProfile) {
  int profiles = 0;
  for (const auto& e : fs::directory_iterator(kSource + "/scenarios/qualify")) {
    if (e.path().extension() != ".json") continue;
    const json doc = json::parse(std::ifstream(e.path()));
    if (!doc.contains("probes")) continue;  // a probe's scenario, not a profile
    EXPECT_EQ(problems_of(e.path().string()), "") << e.path();
    ++profiles;
  }
  EXPECT_GE(profiles, 6);  // cpu-smoke, h200x1, h200x2, h200x4, h200x8, rtx-pro-6000x8
}

// The seed's box (issue 33): its engine probe is Kimi-K2.5 as deployed (every layer, INT4
// experts, TP 8, one rank per GPU), its planner probe the same model at the same TP and quant.
TEST(QualifyProfile, RtxPro6000RunsTheWholeInt4Model) {
  const std::string path = kSource + "/scenarios/qualify/rtx-pro-6000x8.json";
  EXPECT_EQ(problems_of(path), "");
  const json doc = json::parse(std::ifstream(path));
  bool engine = false, planner = false;
  for (const auto& pr : doc["probes"]) {
    if (pr["probe"] == "planner") {
      planner = true;
      EXPECT_EQ(pr["quant"], "int4");
      EXPECT_EQ(pr["tp"], 8);
      EXPECT_FALSE(pr.contains("overrides")) << "the whole model";
    }
    if (pr["probe"] != "conformance") continue;
    engine = true;
    const Scenario s = load_scenario(kSource + "/" + pr["scenario"].get<std::string>());
    EXPECT_EQ(s.placement, Placement::exclusive);
    const json sc = json::parse(std::ifstream(kSource + "/" + pr["scenario"].get<std::string>()));
    EXPECT_EQ(sc["model"]["layers"], "all");
    EXPECT_EQ(sc["sweep"]["quant"], json::array({"int4"}));
    EXPECT_EQ(sc["sweep"]["tp"], json::array({8}));
  }
  EXPECT_TRUE(engine && planner);
}

// The two probe kinds whose rows carry latency thresholds and baselines.
class QualifyLatencyProbe : public testing::TestWithParam<std::string> {};

TEST_P(QualifyLatencyProbe, RefusesSharedPlacementScenario) {
  const std::string kind = GetParam();
  const json profile = cuda_profile(1, {{{"probe", "memory_bandwidth"}, {"min_GBps", 1}},
                                        {{"probe", kind}, {"scenario", kSharedEngine}, {"max_latency_us", 1000}}});
  const std::string why = problems_of(profile, "shared-" + kind);
  EXPECT_NE(why.find("$.probes[1].scenario: "), std::string::npos) << why;
  EXPECT_NE(why.find("shared placement measures contention, not an interconnect"), std::string::npos) << why;
  EXPECT_NE(why.find("use a conformance probe"), std::string::npos) << why;
  EXPECT_NE(why.find("1 problem(s)"), std::string::npos) << why;
}

TEST_P(QualifyLatencyProbe, AcceptsExclusivePlacementScenario) {
  const std::string scenario = GetParam() == "allreduce" ? "/scenarios/qualify/h200x2-allreduce.json"
                                                         : "/scenarios/conformance/gpu-engine-tp1.json";
  const json profile =
      cuda_profile(2, {{{"probe", GetParam()}, {"scenario", kSource + scenario}, {"max_latency_us", 1000}}});
  EXPECT_EQ(problems_of(profile, "exclusive-" + GetParam()), "");
}

INSTANTIATE_TEST_SUITE_P(Kinds, QualifyLatencyProbe, testing::Values("allreduce", "engine_decode"),
                         [](const testing::TestParamInfo<std::string>& info) { return info.param; });

TEST(QualifyProfile, ConformanceProbeMayRunSharedPlacement) {
  const json profile = cuda_profile(1, {{{"probe", "conformance"}, {"scenario", kSharedEngine}}});
  EXPECT_EQ(problems_of(profile, "conformance-shared"), "");
}

TEST(QualifyProfile, ConformanceProbeTakesNoThresholds) {
  const json profile =
      cuda_profile(1, {{{"probe", "conformance"}, {"scenario", kSharedEngine}, {"max_latency_us", 1000}}});
  const std::string why = problems_of(profile, "conformance-threshold");
  EXPECT_NE(why.find("$.probes[0].max_latency_us: "), std::string::npos) << why;
}

TEST(QualifyProfile, ScenarioProbeNeedsAScenarioThatLoads) {
  const json profile = cuda_profile(1, {{{"probe", "conformance"}},
                                        {{"probe", "conformance"}, {"scenario", "/nonexistent/no-such-scenario.json"}}});
  const std::string why = problems_of(profile, "conformance-missing");
  EXPECT_NE(why.find("$.probes[0].scenario: expected the scenario file"), std::string::npos) << why;
  EXPECT_NE(why.find("$.probes[1].scenario: "), std::string::npos) << why;
  EXPECT_NE(why.find("2 problem(s)"), std::string::npos) << why;
}

TEST(QualifyProfile, RefusesPeerBandwidthOnOneGpu) {
  const json probes = {{{"probe", "peer_bandwidth"}, {"min_GBps", 300}}};
  const std::string why = problems_of(cuda_profile(1, probes), "peer-1gpu");
  EXPECT_NE(why.find("$.probes[0]: "), std::string::npos) << why;
  EXPECT_NE(why.find("one GPU has no link to measure"), std::string::npos) << why;
  EXPECT_EQ(problems_of(cuda_profile(2, probes), "peer-2gpu"), "");
}

TEST(QualifyProfile, ReportsEveryProblemAtOnce) {
  const json profile = cuda_profile(1, {{{"probe", "peer_bandwidth"}},
                                        {{"probe", "allreduce"}, {"scenario", kSharedEngine}},
                                        {{"probe", "engine_decode"}, {"scenario", kSharedEngine}}});
  const std::string why = problems_of(profile, "three-problems");
  EXPECT_NE(why.find("3 problem(s)"), std::string::npos) << why;
  for (const char* where : {"$.probes[0]: ", "$.probes[1].scenario: ", "$.probes[2].scenario: "})
    EXPECT_NE(why.find(where), std::string::npos) << where << " not named in:\n" << why;
}

// A profile in which no probe measured anything is "nothing ran" (exit 3), with the reason.
TEST(QualifyNothingRan, OnlyWhenNoRowMeasuredAnything) {
  auto not_run = [](const std::string& item, const std::string& why) {
    QualifyRow r;
    r.probe = "conformance";
    r.item = item;
    r.verdict = "FAIL";
    r.not_run = why;
    return r;
  };
  QualifyRow gate = not_run("gpus", "profile needs 2 GPU(s), found 0");
  gate.probe = "hardware";
  EXPECT_EQ(qualify_nothing_ran({gate}), "profile needs 2 GPU(s), found 0");
  const QualifyRow a = not_run("decode tp1", "device cuda: no GPU is visible");
  const QualifyRow b = not_run("decode tp8", "needs 8 GPUs, 1 visible");
  EXPECT_EQ(qualify_nothing_ran({a, a}), "device cuda: no GPU is visible");
  EXPECT_EQ(qualify_nothing_ran({a, b, b}), "3 rows not run, for 2 reasons; the most common (2 rows): needs 8 GPUs, 1 visible");
  QualifyRow measured;
  measured.probe = "memory_bandwidth";
  measured.verdict = "PASS";
  EXPECT_EQ(qualify_nothing_ran({a, measured}), "") << "a row measured something: FAIL or PASS, not nothing ran";
}

}  // namespace
}  // namespace tpb
