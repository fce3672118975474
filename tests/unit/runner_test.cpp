// The runner end to end through the real launcher and the test-only "probe" workload: a
// rank that crashes, one that hangs past the timeout and one that exits non-zero each fail
// only their own case; the sweep goes on, every case has exactly one record, the records
// before a failure stay intact, no rank process is left behind, and the exit status is 1.
#include <gtest/gtest.h>

#include <utility>

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "suite/records/results.h"
#include "suite/runner/runner.h"

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

// Each reason for exit 1 on its own, beside cases that ran ok: removing any one of them from
// the rule (a fallback case, a failed check, a regression, ...) turns its run green here.
TEST(NothingRan, EveryFailureAloneExitsOne) {
  const std::pair<const char*, void (*)(RunSummary&)> reasons[] = {
      {"a failed case", [](RunSummary& s) { s.failed = 1; }},
      {"a fallback case", [](RunSummary& s) { s.fallback = 1; }},
      {"a failed check", [](RunSummary& s) { s.checks_fail = 1; }},
      {"a regression", [](RunSummary& s) { s.regressions = 1; }},
      {"an unlike baseline", [](RunSummary& s) { s.unlike_baseline_fails = true; }},
      {"a missing baseline", [](RunSummary& s) { s.missing_baseline_fails = true; }},
  };
  for (const auto& [what, plant] : reasons) {
    RunSummary sum;
    sum.ok = 3;
    ASSERT_EQ(run_exit_code(sum, true), kExitOk);
    plant(sum);
    EXPECT_EQ(run_exit_code(sum, false), kExitFailed) << what;
    EXPECT_EQ(run_exit_code(sum, true), kExitFailed) << what << ", with --baselines";
  }
  RunSummary drifted;
  drifted.ok = 3;
  drifted.stability = "unstable";
  EXPECT_EQ(run_exit_code(drifted, true), kExitFailed) << "an unstable control, with --baselines";
  EXPECT_EQ(run_exit_code(drifted, false), kExitOk) << "an unstable control without baselines judges nothing";
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

// "The last record of a case counts" where the runner gathers a resumed run's records: a case
// whose later record failed is failed (exit 1) though an earlier one was ok, and a case whose
// later record is ok (a retry that passed) is ok. Keeping the first record flips both.
TEST(Runner, ResumedRunCountsEachCasesLastRecord) {
  const Scenario s = probe_scenario();
  const std::vector<Case> cases = {probe_case("00000000000000d1", 2, nullptr), probe_case("00000000000000d2", 2, nullptr)};
  const fs::path root = fs::temp_directory_path() / ("tpb_runner_last_record_" + std::to_string(::getpid()));
  fs::remove_all(root);
  RunOptions opt;
  opt.results_root = root.string();
  opt.worker_binary = TPB_TPBENCH_BINARY;
  const RunSummary first = run_scenario(s, cases, opt);
  ASSERT_EQ(first.exit_code, kExitOk);
  const std::string results = (fs::path(first.run_dir) / "results.jsonl").string();
  const auto records = read_results(results);
  ASSERT_EQ(records.size(), 2u);
  json d1_failed = records[0];
  d1_failed["status"] = "failed";
  d1_failed["error"] = "planted by the test";
  const auto resume_with = [&](const std::vector<json>& lines) {
    std::ofstream(results, std::ios::trunc) << [&] {
      std::string text;
      for (const json& r : lines) text += r.dump() + "\n";
      return text;
    }();
    RunOptions again = opt;
    again.resume_dir = first.run_dir;
    return run_scenario(s, cases, again);
  };
  // d1 failed after it had passed: failed, and the run exits 1.
  const RunSummary later_failed = resume_with({records[0], records[1], d1_failed});
  EXPECT_EQ(later_failed.resumed, 2);
  EXPECT_EQ(later_failed.failed, 1) << "d1's last record failed";
  EXPECT_EQ(later_failed.ok, 1);
  EXPECT_EQ(later_failed.exit_code, kExitFailed);
  // d1 passed after it had failed (a retry): ok, and the run exits 0.
  const RunSummary later_passed = resume_with({d1_failed, records[1], records[0]});
  EXPECT_EQ(later_passed.failed, 0) << "d1's last record is ok";
  EXPECT_EQ(later_passed.ok, 2);
  EXPECT_EQ(later_passed.exit_code, kExitOk);
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
