// Findings of the fuzz targets (fuzz/, issue 17 part 7), each as it was found and fixed: the
// input, as a record list, and the answer it must now get. Their inputs are also replayed by
// ctest's fuzz.<target> from fuzz/regressions/.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reference_engine/config/model_config.h"
#include "suite/records/baseline.h"
#include "suite/records/results.h"
#include "suite/scenario/scenario.h"
#include "tpb/check.h"

namespace tpb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// compare_fuzzer: {"status": null} passes comparable_record_problem (null is allowed), and
// nothing_comparable and compare_runs read it with json::value(key, ""), which threw
// type_error.302 out of `tpbench compare`. A string field that is null or of another type now
// reads as absent.
TEST(FuzzFindings, CompareReadsANullStatusAsAbsent) {
  const std::vector<json> records = {json::parse(R"({"case_id": "a", "status": null, "label": null, "role": null})")};
  EXPECT_EQ(comparable_record_problem(records[0]), "");
  EXPECT_EQ(nothing_comparable(records, records, "old", "new"), "OLD old holds no ok record (1 record: 1 no status)");
  EXPECT_TRUE(compare_runs(records, records, BaselineTolerances{}).empty());
  const std::vector<json> ok = {json::parse(
      R"({"case_id": "a", "status": "ok", "label": null, "placement": {"placement": 7}, "plan": {"max_tokens": null}})")};
  EXPECT_EQ(comparable_record_problem(ok[0]), "");
  EXPECT_NO_THROW(compare_runs(ok, ok, BaselineTolerances{}));
}

// results_fuzzer: a record whose status is a number (2147483648) made finished_case_ids throw
// type_error.302 out of --resume. read_results now counts such a line as damaged (as
// drop_damaged_lines moves it), and the id functions read a non-string status as none.
TEST(FuzzFindings, ResumeCountsANonStringStatusAsDamaged) {
  const fs::path path = fs::temp_directory_path() / ("tpb_fuzz_findings_" + std::to_string(::getpid()) + ".jsonl");
  std::ofstream(path) << R"({"case_id": "a", "status": "ok"})" << "\n"
                      << R"({"case_id": "b", "status": 2147483648})" << "\n"
                      << R"({"case_id": 5, "status": "failed"})" << "\n";
  int damaged = 0;
  const auto records = read_results(path.string(), &damaged);
  EXPECT_EQ(records.size(), 1u);
  EXPECT_EQ(damaged, 2);
  EXPECT_EQ(drop_damaged_lines(path.string()), 2);
  fs::remove(path);
  fs::remove(path.string() + ".damaged");

  const std::vector<json> given = {json::parse(R"({"case_id": "b", "status": 2147483648})"),
                                   json::parse(R"({"case_id": "c", "status": "failed"})")};
  EXPECT_EQ(finished_case_ids(given), std::set<std::string>{"c"});
  EXPECT_EQ(failed_case_ids(given), std::set<std::string>{"c"});
}

// scenario_fuzzer: a model "weights" (or "path") of 300 bytes made fs::is_directory throw
// filesystem_error (ENAMETOOLONG) out of scenario validation. It is now the scenario problem
// of a missing folder, with its JSON path.
TEST(FuzzFindings, AScenarioPathTooLongForTheOsIsAScenarioProblem) {
  const std::string too_long(300, 'x');
  for (const json& model : {json{{"preset", "tiny-dsv3"}, {"weights", too_long}}, json{{"path", too_long}},
                            json{{"path", "a/" + too_long + "/b"}}}) {
    const json doc = {{"schema", 1}, {"name", "long-paths"}, {"workload", "engine"}, {"device", "cpu"},
                      {"sweep", {{"tp", {1}}}}, {"model", model}};
    try {
      parse_scenario(doc, "long-paths.json", ScenarioEnv{false});
      ADD_FAILURE() << "accepted " << model.dump();
    } catch (const ScenarioError& e) {
      EXPECT_NE(std::string(e.what()).find(model.contains("weights") ? "$.model.weights" : "$.model.path"),
                std::string::npos)
          << e.what();
    }
  }
}

// model_config_fuzzer: vision_config's vt_intermediate_size 2^53 + 1 overflowed int64 in the
// planner's MoonViT count (weight_bytes.cpp, UBSan). The integers it reads have limits now.
TEST(FuzzFindings, VisionConfigIntegersHaveLimits) {
  json config = json::parse(std::ifstream(models_dir() + "/kimi-k2.5.json"));
  EXPECT_NO_THROW(parse_model_config(config, "kimi-k2.5.json"));
  for (const auto& [key, value] : {std::pair<const char*, json>{"vt_intermediate_size", 9007199254740993LL},
                                   {"vt_hidden_size", -1},
                                   {"merge_kernel_size", json::array({2, 1 << 20})}}) {
    json bad = config;
    bad["vision_config"][key] = value;
    try {
      parse_model_config(bad, "kimi-k2.5.json");
      ADD_FAILURE() << "accepted " << key << " = " << value.dump();
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("$.vision_config.") + key + ": expected 0.."), std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace tpb
