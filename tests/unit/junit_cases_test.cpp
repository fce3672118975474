// The JUnit of `tpbench run` (suite/runner/junit_cases.h): classnames per case, unique, and the
// properties of a case: its record's numbers as the record writes them, and nothing else.
#include <gtest/gtest.h>

#include "suite/runner/junit_cases.h"

namespace tpb {
namespace {

using nlohmann::json;

Case labelled(const std::string& id, const std::string& label) {
  Case c;
  c.id = id;
  c.label = label;
  return c;
}

TEST(JunitCases, ClassnamesFromScenarioAndLabel) {
  const auto names = junit_case_classnames("ci-smoke", {labelled("00000000000000a1", "allreduce tp2 64KiB bf16 shm"),
                                                        labelled("00000000000000a2", "allreduce tp2 64KiB bf16 shm [repeat]")});
  EXPECT_EQ(names, (std::vector<std::string>{"tpbench.ci-smoke.allreduce.tp2.64KiB.bf16.shm",
                                             "tpbench.ci-smoke.allreduce.tp2.64KiB.bf16.shm.repeat"}));
  EXPECT_EQ(junit_scenario_classname("ci-smoke"), "tpbench.ci-smoke");
}

// Labels name only some axes: two cases may share one, and their classnames must still differ.
TEST(JunitCases, EqualLabelsGetTheirCaseIds) {
  const auto names = junit_case_classnames("s", {labelled("00000000000000b1", "decode tp1 b1 s64 shm"),
                                                 labelled("00000000000000b2", "decode tp1 b1 s64 shm"),
                                                 labelled("00000000000000b3", "decode tp2 b1 s64 shm")});
  EXPECT_EQ(names, (std::vector<std::string>{"tpbench.s.decode.tp1.b1.s64.shm.00000000000000b1",
                                             "tpbench.s.decode.tp1.b1.s64.shm.00000000000000b2",
                                             "tpbench.s.decode.tp2.b1.s64.shm"}));
}

TEST(JunitCases, PropertiesAreTheRecordsNumbers) {
  const json allreduce = json::parse(R"({"case_id": "00000000000000c1", "status": "ok",
      "latency": {"unit": "us", "p50": 87.38550000000001, "p90": 100, "p99": 760.25, "samples_us": [1, 2]},
      "throughput": {"algbw_GBps": 0.40602344101396826, "busbw_GBps": 0.4060234410139682, "bus_factor": 1.0}})");
  EXPECT_EQ(junit_case_properties("00000000000000c1", &allreduce),
            (JunitProperties{{"case_id", "00000000000000c1"}, {"status", "ok"}, {"latency_p50_us", "87.38550000000001"},
                             {"latency_p99_us", "760.25"}, {"algbw_GBps", "0.40602344101396826"},
                             {"busbw_GBps", "0.4060234410139682"}}));
  const json engine = json::parse(R"({"status": "ok", "latency": {"unit": "us", "p50": 21.5, "p99": 30},
      "throughput": {"tokens_per_s": 46511.6, "tokens_per_step": 1}})");
  EXPECT_EQ(junit_case_properties("00000000000000c2", &engine),
            (JunitProperties{{"case_id", "00000000000000c2"}, {"status", "ok"}, {"latency_p50_us", "21.5"},
                             {"latency_p99_us", "30"}, {"tokens_per_s", "46511.6"}}));
}

TEST(JunitCases, NoNumberTheRecordDoesNotHold) {
  const json failed = json::parse(R"({"status": "failed", "error": "timeout", "latency": null, "throughput": null})");
  EXPECT_EQ(junit_case_properties("00000000000000d1", &failed),
            (JunitProperties{{"case_id", "00000000000000d1"}, {"status", "failed"}}));
  const json in_ms = json::parse(R"({"status": "ok", "latency": {"unit": "ms", "p50": 1, "p99": 2}})");
  EXPECT_EQ(junit_case_properties("00000000000000d2", &in_ms),
            (JunitProperties{{"case_id", "00000000000000d2"}, {"status", "ok"}}))
      << "a property named _us holds microseconds only";
  EXPECT_EQ(junit_case_properties("00000000000000d3", nullptr), (JunitProperties{{"case_id", "00000000000000d3"}}));
}

}  // namespace
}  // namespace tpb
