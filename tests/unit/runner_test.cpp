// The runner end to end through the real launcher and the test-only "probe" workload: a
// rank that crashes, one that hangs past the timeout and one that exits non-zero each fail
// only their own case; the sweep goes on, every case has exactly one record, the records
// before a failure stay intact, no rank process is left behind, and the exit status is 1.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "suite/results.h"
#include "suite/runner.h"

namespace tpb {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

Case probe_case(const std::string& id, int tp, json fault) {
  Case c;
  c.id = id;
  c.label = "probe " + id;
  c.role = "sweep";
  c.tp = tp;
  c.params = {{"tp", tp}};
  if (!fault.is_null()) c.params["fault"] = fault;
  c.group_key = "probe/tp" + std::to_string(tp);
  return c;
}

bool process_gone(int pid) { return ::kill(pid, 0) != 0 && errno == ESRCH; }

TEST(Runner, FailuresStayInTheirCaseAndNothingIsLeftBehind) {
  Scenario s;
  s.source = "probe.json";
  s.name = "probe";
  s.workload = "probe";
  s.device = s.device_requested = "cpu";
  s.measure.timeout_s = 2;
  s.document = {{"name", "probe"}};
  const std::vector<Case> cases = {
      probe_case("00000000000000a1", 2, nullptr),
      probe_case("00000000000000a2", 2, {{"rank", 1}, {"kind", "crash"}}),
      probe_case("00000000000000a3", 2, nullptr),
      probe_case("00000000000000a4", 3, {{"rank", 2}, {"kind", "hang_with_child"}}),
      probe_case("00000000000000a5", 2, {{"rank", 0}, {"kind", "exit"}, {"code", 7}}),
      probe_case("00000000000000a6", 1, nullptr),
  };
  const fs::path root = fs::temp_directory_path() / ("tpb_runner_test_" + std::to_string(::getpid()));
  fs::remove_all(root);
  RunOptions opt;
  opt.results_root = root.string();
  opt.worker_binary = TPB_TPBENCH_BINARY;
  opt.junit_path = (root / "junit.xml").string();

  const auto t0 = std::chrono::steady_clock::now();
  const RunSummary sum = run_scenario(s, cases, opt);
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(wall_s, 30.0) << "the hang was not cut off by its 2 s timeout";

  EXPECT_EQ(sum.exit_code, 1);
  EXPECT_EQ(sum.ok, 3);
  EXPECT_EQ(sum.failed, 3);
  const auto records = read_results((fs::path(sum.run_dir) / "results.jsonl").string());
  ASSERT_EQ(records.size(), cases.size());
  for (std::size_t i = 0; i < cases.size(); ++i) EXPECT_EQ(records[i]["case_id"], cases[i].id);
  EXPECT_EQ(records[0]["status"], "ok");
  EXPECT_EQ(records[1]["status"], "failed");
  EXPECT_NE(records[1]["error"].get<std::string>().find("rank 1"), std::string::npos) << records[1]["error"];
  EXPECT_NE(records[1]["error"].get<std::string>().find("signal"), std::string::npos) << records[1]["error"];
  EXPECT_EQ(records[2]["status"], "ok");  // the sweep went on with a fresh group
  EXPECT_EQ(records[3]["status"], "failed");
  EXPECT_NE(records[3]["error"].get<std::string>().find("timeout"), std::string::npos) << records[3]["error"];
  EXPECT_EQ(records[4]["status"], "failed");
  EXPECT_NE(records[4]["error"].get<std::string>().find("status 7"), std::string::npos) << records[4]["error"];
  EXPECT_EQ(records[5]["status"], "ok");
  for (const auto& r : records) {
    EXPECT_EQ(r["run_id"], records[0]["run_id"]);
    EXPECT_TRUE(r["provenance"].contains("git_sha"));
  }
  // Every rank process that ran a case has been reaped (the launcher's destructor and the
  // failure paths kill and wait for the whole group).
  for (const auto& r : records)
    for (const auto& pid : r.value("pids", json::array())) EXPECT_TRUE(process_gone(pid.get<int>())) << "pid " << pid;
  EXPECT_TRUE(fs::is_regular_file(opt.junit_path));
  const json run_json = read_json_file((fs::path(sum.run_dir) / "run.json").string());
  EXPECT_EQ(run_json["summary"]["failed"], 3);
  fs::remove_all(root);
}

// Nothing ran is not a pass: the reason names the common skip reason, or counts them.
TEST(NothingRan, ReasonFromTheSkipReasons) {
  EXPECT_EQ(nothing_ran_reason(1, {"device cuda: no GPU is visible"}), "");
  EXPECT_EQ(nothing_ran_reason(0, {}), "the sweep has no case");
  EXPECT_EQ(nothing_ran_reason(0, {"device cuda: no GPU is visible"}), "all 1 case skipped: device cuda: no GPU is visible");
  EXPECT_EQ(nothing_ran_reason(0, std::vector<std::string>(18, "device cuda: no GPU is visible")),
            "all 18 cases skipped: device cuda: no GPU is visible");
  EXPECT_EQ(nothing_ran_reason(0, {"needs 2 GPUs, 1 visible", "needs 8 GPUs, 1 visible", "needs 8 GPUs, 1 visible"}),
            "all 3 cases skipped, for 2 reasons; the most common (2 cases): needs 8 GPUs, 1 visible");
  EXPECT_EQ(nothing_ran_reason(0, {"first line\nsecond"}), "all 1 case skipped: first line");
}

TEST(NothingRan, ExitCodeDecision) {
  RunSummary sum;
  sum.ok = 2;
  EXPECT_EQ(run_exit_code(sum, false), kExitOk);
  sum.ok = 0;
  sum.skipped = 18;
  sum.nothing_ran = "all 18 cases skipped: device cuda: no GPU is visible";
  EXPECT_EQ(run_exit_code(sum, false), kExitNothingRan);
  EXPECT_EQ(run_exit_code(sum, true), kExitNothingRan);
  sum.checks_fail = 1;  // a failure outranks nothing-ran
  EXPECT_EQ(run_exit_code(sum, false), kExitFailed);
  sum.checks_fail = 0;
  sum.stability = "unstable";
  EXPECT_EQ(run_exit_code(sum, false), kExitNothingRan);
  EXPECT_EQ(run_exit_code(sum, true), kExitFailed);
  RunSummary some;  // some cases ran, the rest skipped: today's statuses
  some.ok = 1;
  some.skipped = 5;
  EXPECT_EQ(run_exit_code(some, false), kExitOk);
  some.failed = 1;
  EXPECT_EQ(run_exit_code(some, false), kExitFailed);
}

// A scenario of the test-only probe workload on the CPU (its cases are made by probe_case).
Scenario probe_scenario() {
  Scenario s;
  s.source = "probe.json";
  s.name = "probe";
  s.workload = "probe";
  s.device = s.device_requested = "cpu";
  s.document = {{"name", "probe"}};
  return s;
}

// Every case skipped: exit 3, run.json and the JUnit say why; nothing is launched.
TEST(NothingRan, AllSkippedRunSaysSoEverywhere) {
  const Scenario s = probe_scenario();
  std::vector<Case> cases = {probe_case("00000000000000b1", 2, nullptr), probe_case("00000000000000b2", 4, nullptr)};
  for (auto& c : cases) c.skip_reason = "device cuda: no GPU is visible";
  const fs::path root = fs::temp_directory_path() / ("tpb_runner_nothing_ran_" + std::to_string(::getpid()));
  fs::remove_all(root);
  RunOptions opt;
  opt.results_root = root.string();
  opt.worker_binary = TPB_TPBENCH_BINARY;
  opt.junit_path = (root / "junit.xml").string();
  const RunSummary sum = run_scenario(s, cases, opt);
  EXPECT_EQ(sum.exit_code, kExitNothingRan);
  EXPECT_EQ(sum.skipped, 2);
  EXPECT_EQ(sum.nothing_ran, "all 2 cases skipped: device cuda: no GPU is visible");
  const json run_json = read_json_file((fs::path(sum.run_dir) / "run.json").string());
  EXPECT_EQ(run_json["summary"]["exit_code"], kExitNothingRan);
  EXPECT_EQ(run_json["summary"]["nothing_ran"], sum.nothing_ran);
  std::ifstream in(opt.junit_path);
  const std::string xml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(xml.find("<property name=\"tpbench.nothing_ran\" value=\"all 2 cases skipped: device cuda: no GPU is visible\"/>"),
            std::string::npos) << xml;
  EXPECT_NE(xml.find("classname=\"tpbench.probe\" name=\"nothing ran\""), std::string::npos) << xml;
  EXPECT_NE(xml.find("<skipped message=\"nothing ran: all 2 cases skipped: device cuda: no GPU is visible\"/>"),
            std::string::npos) << xml;
  EXPECT_EQ(xml.find("<failure"), std::string::npos) << xml;
  fs::remove_all(root);
}

// --update-baselines on a run in which nothing ran keeps the stored baseline as it was.
TEST(NothingRan, StoresNoBaseline) {
  const Scenario s = probe_scenario();
  std::vector<Case> cases = {probe_case("00000000000000c1", 2, nullptr)};
  cases[0].skip_reason = "device cuda: no GPU is visible";
  const fs::path root = fs::temp_directory_path() / ("tpb_runner_no_baseline_" + std::to_string(::getpid()));
  fs::remove_all(root);
  RunOptions opt;
  opt.results_root = (root / "runs").string();
  opt.worker_binary = TPB_TPBENCH_BINARY;
  opt.baselines_dir = (root / "baselines").string();
  opt.update_baselines = true;
  opt.force_dirty_baseline_reason = "test: the tree may be dirty while developing";
  const RunSummary sum = run_scenario(s, cases, opt);
  EXPECT_EQ(sum.exit_code, kExitNothingRan);
  EXPECT_FALSE(sum.baseline_updated);
  EXPECT_FALSE(sum.baseline_file.empty());
  EXPECT_FALSE(fs::exists(sum.baseline_file)) << sum.baseline_file;
  const json run_json = read_json_file((fs::path(sum.run_dir) / "run.json").string());
  EXPECT_EQ(run_json["summary"]["baselines"]["updated"], false);
  fs::remove_all(root);
}

}  // namespace
}  // namespace tpb
