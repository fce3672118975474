// results.jsonl writing and reading back (resume), run ids, latency summaries, and the
// checks' verdicts on records.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "suite/checks/check.h"
#include "suite/records/results.h"
#include "suite/runner/runner.h"
#include "tpb/check.h"

namespace tpb {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

class Results : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tpb_results_test_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(Results, AppendThenReadBackInOrder) {
  const std::string path = (dir_ / "run" / "results.jsonl").string();
  {
    ResultsWriter w(path);
    w.append({{"case_id", "a"}, {"status", "ok"}});
    w.append({{"case_id", "b"}, {"status", "failed"}, {"error", "rank 1: killed by signal 11\nline two"}});
  }
  {
    ResultsWriter w(path);  // a second writer appends, never truncates
    w.append({{"case_id", "c"}, {"status", "skipped"}});
  }
  const auto records = read_results(path);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0]["case_id"], "a");
  EXPECT_EQ(records[1]["error"], "rank 1: killed by signal 11\nline two");
  EXPECT_EQ(records[2]["case_id"], "c");
  // One record per line.
  std::ifstream in(path);
  int lines = 0;
  for (std::string l; std::getline(in, l);) ++lines;
  EXPECT_EQ(lines, 3);
}

TEST_F(Results, DamagedLastLineIsSkippedAndTheNextRecordStartsClean) {
  const std::string path = (dir_ / "results.jsonl").string();
  {
    ResultsWriter w(path);
    w.append({{"case_id", "a"}, {"status", "ok"}});
  }
  std::ofstream(path, std::ios::app) << R"({"case_id": "b", "stat)";  // a crash mid-write
  int damaged = -1;
  EXPECT_EQ(read_results(path, &damaged).size(), 1u);
  EXPECT_EQ(damaged, 1);
  {
    ResultsWriter w(path);
    w.append({{"case_id", "c"}, {"status", "ok"}});
  }
  const auto records = read_results(path, &damaged);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[1]["case_id"], "c");
  EXPECT_EQ(damaged, 1);
}

TEST_F(Results, FinishedIdsAreThoseWithAFinalStatus) {
  const std::vector<json> records = {{{"case_id", "a"}, {"status", "ok"}},
                                     {{"case_id", "b"}, {"status", "failed"}},
                                     {{"case_id", "c"}, {"status", "running"}},
                                     {{"case_id", "d"}, {"status", "skipped"}},
                                     {{"case_id", "e"}, {"status", "infeasible"}},
                                     {{"case_id", "f"}, {"status", "fallback"}},
                                     {{"status", "ok"}}};
  // A fallback case ran (another backend than asked): final, --resume does not run it again.
  EXPECT_EQ(finished_case_ids(records), (std::set<std::string>{"a", "b", "d", "e", "f"}));
}

TEST_F(Results, MissingFileIsNoRecords) { EXPECT_TRUE(read_results((dir_ / "nope.jsonl").string()).empty()); }

// compare's OLD and NEW: a run folder stands for its results.jsonl; a file is itself.
TEST_F(Results, ResultsFileOfARunFolderOrAFile) {
  const fs::path run = dir_ / "20260101T000000.000Z-abcdef";
  fs::create_directories(run);
  std::ofstream(run / "results.jsonl") << "{}\n";
  EXPECT_EQ(results_file_of(run.string()), (run / "results.jsonl").string());
  EXPECT_EQ(results_file_of((run / "results.jsonl").string()), (run / "results.jsonl").string());
  EXPECT_EQ(results_file_of("/dev/null"), "/dev/null");
  const fs::path empty = dir_ / "empty";
  fs::create_directories(empty);
  try {
    results_file_of(empty.string());
    ADD_FAILURE() << "an empty folder was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no results.jsonl in this folder"), std::string::npos) << e.what();
  }
}

TEST_F(Results, AtomicWriteReplacesWholeFile) {
  const std::string path = (dir_ / "run.json").string();
  write_file_atomic(path, "{\"a\": 1}\n");
  write_file_atomic(path, "{\"b\": 2}\n");
  EXPECT_EQ(read_json_file(path), json({{"b", 2}}));
  int files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir_)) ++files;
  EXPECT_EQ(files, 1);  // no temporary left behind
}

TEST(RunId, UtcStampWithMillisecondsAndRandomSuffix) {
  const std::string a = new_run_id(), b = new_run_id();
  ASSERT_EQ(a.size(), 27u) << a;  // 20261130T224836.123Z-3f9a1c
  EXPECT_EQ(a[8], 'T');
  EXPECT_EQ(a[15], '.');
  EXPECT_EQ(a[19], 'Z');
  EXPECT_EQ(a[20], '-');
  EXPECT_NE(a, b);
  EXPECT_LE(a.substr(0, 20), b.substr(0, 20));  // later runs sort later
}

TEST(LatencySummary, MaxAcrossRanksPerIterationThenPercentiles) {
  const json lat = latency_summary({{1, 5, 3, 4}, {2, 1, 3, 10}}, 1);
  EXPECT_EQ(lat["samples_us"], json({2, 5, 3, 10}));
  EXPECT_EQ(lat["unit"], "us");
  EXPECT_DOUBLE_EQ(lat["p50"].get<double>(), 4.0);  // linear interpolation between 3 and 5
  EXPECT_DOUBLE_EQ(lat["mean"].get<double>(), 5.0);
  EXPECT_DOUBLE_EQ(lat["max"].get<double>(), 10.0);
  EXPECT_FALSE(lat.contains("repetitions_us"));
  const json reps = latency_summary({{1, 3, 10, 20}}, 2);
  EXPECT_EQ(reps["repetitions_us"], json({2.0, 15.0}));
  EXPECT_TRUE(latency_summary({}, 1).is_null());
  EXPECT_TRUE(latency_summary({{}}, 1).is_null());
}

// A rank's result that says the case is infeasible as measured (the GPU engine's KV pool)
// makes the record infeasible with that sentence; results without it make an ok record.
TEST(CaseRecordFromRanks, InfeasibleRankMakesAnInfeasibleRecordWithItsSentence) {
  Scenario s;
  s.workload = "engine";
  Case c;
  c.params = {{"mode", "decode"}, {"batch_size", 2}, {"seq_len", 8}};
  const json ok_rank = {{"rank", 0}, {"latency_us", {10.0, 12.0}}, {"memory", json::object()}};
  const json ok = case_record_from_ranks(s, c, rank_results_from_json({ok_rank, ok_rank}));
  EXPECT_EQ(ok["status"], "ok");
  EXPECT_FALSE(ok.contains("error"));
  const std::string sentence = "rank 1: gpu engine: the KV cache ... Not enough memory: ...";
  const json stopped = {{"rank", 0}, {"infeasible", sentence}, {"latency_us", json::array()},
                        {"memory", {{"kv_pool", {{"tokens", 5}}}}}};
  const json r = case_record_from_ranks(s, c, rank_results_from_json({stopped, stopped}));
  EXPECT_EQ(r["status"], "infeasible");
  EXPECT_EQ(r["error"], sentence);
  EXPECT_TRUE(r["latency"].is_null());
  EXPECT_EQ(r["memory"][1]["kv_pool"]["tokens"], 5);  // the measured pool stays in the record
}

json record(const std::string& id, const std::string& backend, const std::string& digest, const std::string& status = "ok") {
  return {{"case_id", id}, {"status", status}, {"role", "sweep"}, {"workload", "allreduce"}, {"device", "cpu"},
          {"model", nullptr}, {"params", {{"tp", 2}, {"message_bytes", 1024}, {"allreduce", backend}}},
          {"digests", json::array({{{"output", digest}}, {{"output", digest}}})},
          {"metrics", json::array({{{"matches_serial_sum", true}}, {{"matches_serial_sum", digest == "aa"}}})}};
}

TEST(Checks, EqualAcrossAllreduce) {
  auto check = make_check("equal_across_allreduce");
  ASSERT_TRUE(check);
  const json a = record("1", "shm", "aa"), b = record("2", "mpi", "aa"), c = record("3", "mpi", "bb");
  EXPECT_EQ(check->group_key(a), check->group_key(b));
  json other = record("4", "mpi", "aa");
  other["params"]["message_bytes"] = 2048;
  EXPECT_NE(check->group_key(a), check->group_key(other));
  EXPECT_EQ(check->evaluate({&a, &b}).status, "pass");
  const CheckResult fail = check->evaluate({&a, &c});
  EXPECT_EQ(fail.status, "fail");
  EXPECT_NE(fail.detail.find("rank 0"), std::string::npos) << fail.detail;
  EXPECT_EQ(check->evaluate({&a}).status, "skipped");
  const json failed = record("5", "mpi", "aa", "failed");
  EXPECT_EQ(check->evaluate({&a, &failed}).status, "skipped");
  json no_digests = b;
  no_digests["digests"] = json::array();
  EXPECT_EQ(check->evaluate({&a, &no_digests}).status, "fail");
}

// A GPU engine case at `tp` with `ranks` ranks whose logits are `base` scaled by (1 + eps).
json engine_record(const std::string& id, const std::string& backend, std::int64_t tp, const std::string& digest,
                   double eps, const std::string& device = "cuda") {
  const std::int64_t V = 5;
  std::vector<float> logits = {0.5f, 2.0f, -1.0f, 0.25f, 1.999f, 3.0f, 0.1f, -2.0f, 0.0f, 1.5f};  // 2 rows of V, row 0 a near tie
  for (float& v : logits) v = static_cast<float>(v * (1.0 + eps));
  json outputs = json::array(), digests = json::array(), metrics = json::array();
  for (std::int64_t r = 0; r < tp; ++r) {
    outputs.push_back({{"logits", logits}});
    digests.push_back({{"logits", digest}});
    metrics.push_back({{"vocab_size", V}});
  }
  return {{"case_id", id}, {"status", "ok"}, {"role", "sweep"}, {"workload", "engine"}, {"device", device},
          {"params", {{"tp", tp}, {"allreduce", backend}, {"batch_size", 2}}},
          {"outputs", outputs}, {"digests", digests}, {"metrics", metrics}};
}

// Above TP 2 a GPU engine's NCCL and custom runs may differ in the last bits (NCCL rounds
// after each hop): within the bf16 budget with the same greedy tokens they pass, and the
// detail says so; beyond it, or anywhere bitwise is the rule, they fail.
TEST(Checks, EqualAcrossAllreduceAboveTp2AllowsTheBf16Budget) {
  auto check = make_check("equal_across_allreduce");
  ASSERT_TRUE(check);
  const json nccl = engine_record("1", "nccl", 4, "aa", 0.0);
  const json close = engine_record("2", "custom-oneshot", 4, "bb", 1e-3);
  const json same = engine_record("3", "custom-twoshot", 4, "aa", 0.0);
  const CheckResult pass = check->evaluate({&nccl, &close, &same});
  EXPECT_EQ(pass.status, "pass") << pass.detail;
  EXPECT_NE(pass.detail.find("identical digests on every rank: nccl, custom-twoshot"), std::string::npos) << pass.detail;
  EXPECT_NE(pass.detail.find("within the bf16 budget"), std::string::npos) << pass.detail;
  EXPECT_NE(pass.detail.find("custom-oneshot (rel-L2"), std::string::npos) << pass.detail;

  const json far = engine_record("4", "custom-oneshot", 4, "bb", 5e-2);  // above the 2e-2 budget
  EXPECT_EQ(check->evaluate({&nccl, &far}).status, "fail");
  json flipped = engine_record("5", "custom-oneshot", 4, "bb", 0.0);  // a tiny change that breaks the near tie
  flipped["outputs"][1]["logits"][4] = 2.001f;
  const CheckResult token = check->evaluate({&nccl, &flipped});
  EXPECT_EQ(token.status, "fail");
  EXPECT_NE(token.detail.find("greedy token, row 0 rank 1"), std::string::npos) << token.detail;

  // Bitwise everywhere else: TP 2, the CPU engine without an mpi side, the allreduce workload.
  const json tp2a = engine_record("6", "nccl", 2, "aa", 0.0), tp2b = engine_record("7", "custom-oneshot", 2, "bb", 1e-6);
  EXPECT_EQ(check->evaluate({&tp2a, &tp2b}).status, "fail");
  const json cpu_a = engine_record("8", "shm", 4, "aa", 0.0, "cpu"), cpu_b = engine_record("9", "planted", 4, "bb", 1e-6, "cpu");
  EXPECT_EQ(check->evaluate({&cpu_a, &cpu_b}).status, "fail");
  // The CPU engine above TP 2 with an mpi side (MPI sums in its own order): the fp32 budget
  // (1e-5), with the same greedy tokens; bitwise again at TP 2.
  const json cpu_mpi = engine_record("12", "mpi", 4, "bb", 1e-6, "cpu"), cpu_mpi_far = engine_record("13", "mpi", 4, "cc", 1e-3, "cpu");
  const CheckResult mpi_close = check->evaluate({&cpu_a, &cpu_mpi});
  EXPECT_EQ(mpi_close.status, "pass") << mpi_close.detail;
  EXPECT_NE(mpi_close.detail.find("within the fp32 budget of shm with the same greedy tokens (TP 4 > 2: MPI sums in its own order): mpi"),
            std::string::npos) << mpi_close.detail;
  const CheckResult mpi_far = check->evaluate({&cpu_a, &cpu_mpi_far});
  EXPECT_EQ(mpi_far.status, "fail") << mpi_far.detail;
  EXPECT_NE(mpi_far.detail.find("logits (fp32 budget)"), std::string::npos) << mpi_far.detail;
  const json cpu2_a = engine_record("14", "shm", 2, "aa", 0.0, "cpu"), cpu2_mpi = engine_record("15", "mpi", 2, "bb", 1e-6, "cpu");
  EXPECT_EQ(check->evaluate({&cpu2_a, &cpu2_mpi}).status, "fail");
  json ar_a = record("10", "nccl", "aa"), ar_b = record("11", "custom-oneshot", "bb");
  ar_a["params"]["tp"] = 4;
  ar_b["params"]["tp"] = 4;
  ar_a["device"] = ar_b["device"] = "cuda";
  EXPECT_EQ(check->evaluate({&ar_a, &ar_b}).status, "fail");
}

TEST(Checks, Deterministic) {
  auto check = make_check("deterministic");
  ASSERT_TRUE(check);
  json first = record("1", "shm", "aa"), again = record("2", "shm", "aa"), differs = record("3", "shm", "ab");
  again["role"] = "repeat";
  EXPECT_EQ(check->group_key(first), check->group_key(again));
  EXPECT_EQ(check->evaluate({&first, &again}).status, "pass");
  EXPECT_EQ(check->evaluate({&first, &differs}).status, "fail");
  EXPECT_EQ(check->evaluate({&first}).status, "skipped");
}

TEST(Checks, MatchesReference) {
  auto check = make_check("matches_reference");
  const json good = record("1", "shm", "aa"), bad = record("2", "shm", "bb");
  EXPECT_EQ(check->evaluate({&good}).status, "pass");
  const CheckResult r = check->evaluate({&bad});
  EXPECT_EQ(r.status, "fail");
  EXPECT_NE(r.detail.find("rank 1"), std::string::npos) << r.detail;
  json silent = good;
  silent["metrics"] = json::array({json::object()});
  EXPECT_EQ(check->evaluate({&silent}).status, "fail");  // no answer is not a pass
}

TEST(Checks, EveryKnownCheckIsImplementedAndAnEmptyGroupIsNeverAPass) {
  for (const auto& name : known_check_names()) {
    auto check = make_check(name);
    ASSERT_TRUE(check) << name;
    EXPECT_EQ(check->name(), name);
    if (name != "control_drift") {
      EXPECT_NE(check->evaluate({}).status, "pass") << name;  // `tpbench list` asks this
    }
  }
  EXPECT_EQ(make_check("no_such_check"), nullptr);
}

// The checks whose failures the runner localizes (CheckInfo::localizes): those that compare
// two records' outputs.
TEST(Checks, TheTableSaysWhichFailuresAreLocalized) {
  std::vector<std::string> localized;
  for (const auto& name : known_check_names())
    if (find_check(name)->localizes) localized.push_back(name);
  EXPECT_EQ(localized, (std::vector<std::string>{"equal_across_allreduce", "deterministic", "tp_invariant"}));
}

}  // namespace
}  // namespace tpb
