// What carried a case's allreduces (suite/measure/allreduce_ran.h) and what equal_across_allreduce
// makes of it, from fabricated rank results and records: a custom backend that became NCCL
// (no peer access), one whose large messages ran on NCCL, and auto's size classes, none of
// which a CPU machine can produce (tests/cli/backend_fallback_is_not_custom_ok.sh plants the
// CPU equivalent end to end).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "reference_engine/comm/allreduce_calls.h"
#include "suite/measure/allreduce_ran.h"
#include "suite/checks/check.h"
#include "suite/runner/runner.h"
#include "suite/scenario/scenario.h"
#include "suite/scenario/sweep.h"

namespace tpb {
namespace {

using nlohmann::json;

json calls(const std::string& backend, std::uint64_t n, std::uint64_t lo, std::uint64_t hi) {
  return {{"backend", backend}, {"calls", n}, {"bytes_min", lo}, {"bytes_max", hi}};
}

// A rank's comm result as communicator_result (suite/workloads/workload.h) writes it.
json comm(const std::string& requested, const std::string& backend, const json& allreduce_calls,
          const std::string& reason = "") {
  return {{"backend", backend}, {"requested", requested}, {"memory_bytes", 0}, {"fallback_reason", reason},
          {"allreduce_calls", allreduce_calls}};
}

TEST(AllreduceCallTally, CountsPerBackendAndMergesSmallestFirst) {
  AllreduceCallTally custom, nccl;
  custom.add("custom-oneshot", 4096);
  custom.add("custom-oneshot", 1024);
  custom.add("custom-twoshot", 1 << 20);
  nccl.add("nccl", 16 << 20);
  const auto merged = merge_allreduce_calls(nccl.entries(), custom.entries());
  ASSERT_EQ(merged.size(), 3u);
  EXPECT_EQ(merged[0].backend, "custom-oneshot");
  EXPECT_EQ(merged[0].calls, 2u);
  EXPECT_EQ(merged[0].bytes_min, 1024u);
  EXPECT_EQ(merged[0].bytes_max, 4096u);
  EXPECT_EQ(merged[1].backend, "custom-twoshot");
  EXPECT_EQ(merged[2].backend, "nccl");
  EXPECT_EQ(merge_allreduce_calls(merged, nccl.entries())[2].calls, 2u);
  custom.clear();
  EXPECT_TRUE(custom.entries().empty());
}

TEST(AllreduceRan, AsRequestedWhenEveryCallRanOnTheRequestedBackend) {
  const json c = comm("shm", "shm", json::array({calls("shm", 12, 2048, 2048)}));
  const json ar = allreduce_ran_from_ranks({{"allreduce", "shm"}}, {c, c});
  EXPECT_EQ(ar["requested"], "shm");
  EXPECT_EQ(ar["verdict"], "as-requested");
  EXPECT_TRUE(ar["fallback"].is_null());
  EXPECT_EQ(ar["ran"], json::array({calls("shm", 12, 2048, 2048)}));
  EXPECT_FALSE(ar.contains("ranks_differ"));
  EXPECT_EQ(allreduce_ran_note(ar), "");
}

// The incident: custom-oneshot asked for, no peer access, every call on NCCL.
TEST(AllreduceRan, CustomThatRanNcclIsAFallbackWithTheReason) {
  const json c = comm("custom-oneshot", "nccl", json::array({calls("nccl", 31, 14336, 14680064)}),
                      "no peer access between GPU 0 and GPU 1: using nccl");
  const json ar = allreduce_ran_from_ranks({{"allreduce", "custom-oneshot"}}, {c, c});
  EXPECT_EQ(ar["verdict"], "fallback");
  EXPECT_EQ(ar["backend"], "nccl");
  EXPECT_EQ(ar["fallback"], "no peer access between GPU 0 and GPU 1: using nccl");
  EXPECT_EQ(allreduce_ran_note(ar),
            "custom-oneshot requested, nccl ran all 31 allreduce calls [nccl 31 calls (14 KiB to 14 MiB)] "
            "(no peer access between GPU 0 and GPU 1: using nccl)");
}

// Messages above the custom buffer run on NCCL, the others on the custom kernels: compared,
// but the record and the note say how many went where.
TEST(AllreduceRan, LargeMessagesOnNcclArePartial) {
  const json c = comm("custom-twoshot", "custom-twoshot",
                      json::array({calls("nccl", 7, 14680064, 14680064), calls("custom-twoshot", 24, 14336, 14336)}),
                      "7 message(s) exceeded the registered buffer of 8388608 bytes (largest 14680064 bytes): those ran on nccl");
  const json ar = allreduce_ran_from_ranks({{"allreduce", "custom-twoshot"}}, {c});
  EXPECT_EQ(ar["verdict"], "partial-fallback");
  EXPECT_EQ(ar["ran"][0]["backend"], "custom-twoshot");  // smallest messages first
  EXPECT_EQ(ar["ran"][1]["backend"], "nccl");
  EXPECT_EQ(ran_backends(ar), (std::vector<std::string>{"custom-twoshot", "nccl"}));
  const std::string note = allreduce_ran_note(ar);
  EXPECT_EQ(note.rfind("custom-twoshot requested: nccl ran 7 of 31 allreduce calls [custom-twoshot 24 calls (14 KiB), "
                       "nccl 7 calls (14 MiB)]", 0), 0u) << note;
  // A backend that counted without saying why still gets a reason.
  const json silent = comm("custom-twoshot", "custom-twoshot", c["allreduce_calls"]);
  EXPECT_EQ(allreduce_ran_from_ranks({{"allreduce", "custom-twoshot"}}, {silent})["fallback"],
            "nccl carried 7 of 31 allreduce calls");
}

// Auto's choices per size class are what it was asked for; NCCL for everything says why.
TEST(AllreduceRan, AutoRecordsItsSizeClasses) {
  const json classes = json::array({calls("nccl", 2, 16 << 20, 16 << 20), calls("custom-oneshot", 5, 1024, 65536),
                                    calls("custom-twoshot", 3, 1 << 20, 4 << 20)});
  const json c = comm("auto", "auto", classes, "thresholds from x.json: one-shot <= 65536 B, two-shot <= 4194304 B, nccl above");
  const json ar = allreduce_ran_from_ranks({{"allreduce", "auto"}}, {c, c});
  EXPECT_EQ(ar["verdict"], "as-requested");
  EXPECT_TRUE(ar["fallback"].is_null());
  EXPECT_EQ(ran_backends(ar), (std::vector<std::string>{"custom-oneshot", "custom-twoshot", "nccl"}));
  EXPECT_EQ(ran_text(ar["ran"]), "custom-oneshot 5 calls (1 KiB to 64 KiB), custom-twoshot 3 calls (1 MiB to 4 MiB), "
                                 "nccl 2 calls (16 MiB)");
  EXPECT_EQ(allreduce_ran_note(ar), "");

  const json only_nccl = comm("auto", "auto", json::array({calls("nccl", 9, 2048, 2048)}),
                              "no measured thresholds (x.json was measured on 2 x H200): nccl for every size");
  const json ar2 = allreduce_ran_from_ranks({{"allreduce", "auto"}}, {only_nccl});
  EXPECT_EQ(ar2["verdict"], "as-requested");
  EXPECT_EQ(ar2["fallback"], "no measured thresholds (x.json was measured on 2 x H200): nccl for every size");
  EXPECT_EQ(allreduce_ran_note(ar2).rfind("auto ran nccl for all 9 allreduce calls", 0), 0u) << allreduce_ran_note(ar2);
}

TEST(AllreduceRan, NoCallsAndRanksThatDisagree) {
  const json none = allreduce_ran_from_ranks({{"allreduce", "shm"}}, {comm("shm", "shm", json::array())});
  EXPECT_EQ(none["verdict"], "no-calls");
  EXPECT_TRUE(allreduce_ran_from_ranks(json::object(), {}).is_null());
  const json a = comm("shm", "shm", json::array({calls("shm", 3, 8, 8)}));
  const json b = comm("shm", "shm", json::array({calls("shm", 4, 8, 8)}));
  const json ar = allreduce_ran_from_ranks({{"allreduce", "shm"}}, {a, b});
  ASSERT_TRUE(ar.contains("ranks_differ"));
  EXPECT_EQ(ar["ranks_differ"], "rank 1 ran shm 4 calls (8 B), rank 0 shm 3 calls (8 B)");
  EXPECT_NE(allreduce_ran_note(ar).find("ranks differ"), std::string::npos);
}

TEST(AllreduceRan, BytesText) {
  EXPECT_EQ(bytes_text(1028), "1028 B");
  EXPECT_EQ(bytes_text(14336), "14 KiB");
  EXPECT_EQ(bytes_text(14680064), "14 MiB");
  EXPECT_EQ(bytes_text(0), "0 B");
}

// The runner's record: a requested backend that carried nothing is status "fallback" with the
// note as its error, never "ok"; a partial one stays ok with allreduce_ran saying so.
TEST(AllreduceRan, CaseRecordOfAFallbackIsNotOk) {
  Scenario s;
  s.workload = "allreduce";
  Case c;
  c.tp = 2;
  c.params = {{"tp", 2}, {"allreduce", "custom-oneshot"}, {"message_bytes", 1024}};
  json rank = {{"rank", 0}, {"latency_us", {10.0, 12.0}}, {"digests", {{"output", "aa"}}},
               {"comm", comm("custom-oneshot", "nccl", json::array({calls("nccl", 12, 1024, 1024)}), "no peer access")}};
  const json r = case_record_from_ranks(s, c, rank_results_from_json({rank, rank}));
  EXPECT_EQ(r["status"], "fallback");
  EXPECT_EQ(r["error"], "custom-oneshot requested, nccl ran all 12 allreduce calls [nccl 12 calls (1 KiB)] (no peer access)");
  EXPECT_EQ(r["allreduce_ran"]["verdict"], "fallback");
  rank["comm"] = comm("custom-oneshot", "custom-oneshot",
                      json::array({calls("custom-oneshot", 10, 1024, 1024), calls("nccl", 2, 1 << 24, 1 << 24)}));
  const json partial = case_record_from_ranks(s, c, rank_results_from_json({rank, rank}));
  EXPECT_EQ(partial["status"], "ok");
  EXPECT_EQ(partial["allreduce_ran"]["verdict"], "partial-fallback");
}

// An allreduce-workload record of `requested` whose allreduces ran as `ran` says.
json record(const std::string& id, const std::string& requested, const json& ran_calls, const std::string& digest,
            const std::string& reason = "") {
  const std::string backend = ran_calls.size() == 1 ? ran_calls[0]["backend"].get<std::string>() : requested;
  const json c = comm(requested, backend, ran_calls, reason);
  json params = {{"tp", 2}, {"message_bytes", 1024}, {"allreduce", requested}};
  const json ar = allreduce_ran_from_ranks(params, {c, c});
  return {{"case_id", id},
          {"status", ar["verdict"] == "fallback" ? "fallback" : "ok"},
          {"role", "sweep"},
          {"workload", "allreduce"},
          {"device", "cuda"},
          {"model", nullptr},
          {"params", params},
          {"comm", json::array({c, c})},
          {"allreduce_ran", ar},
          {"digests", json::array({{{"output", digest}}, {{"output", digest}}})}};
}

// "custom equals NCCL" must never pass as NCCL against itself: the fallback fails the check,
// naming what was requested, what ran and what it is not compared with.
TEST(EqualAcrossAllreduce, AFallbackFailsNamingThePair) {
  auto check = make_check("equal_across_allreduce");
  const json nccl = record("1", "nccl", json::array({calls("nccl", 12, 1024, 1024)}), "aa");
  const json custom = record("2", "custom-oneshot", json::array({calls("nccl", 12, 1024, 1024)}), "aa",
                             "no peer access between GPU 0 and GPU 1: using nccl");
  ASSERT_EQ(custom["status"], "fallback");
  const CheckResult r = check->evaluate({&nccl, &custom});
  EXPECT_EQ(r.status, "fail");
  EXPECT_EQ(r.detail, "custom-oneshot requested, nccl ran (no peer access between GPU 0 and GPU 1: using nccl): "
                      "custom-oneshot is not compared with nccl");

  // The backends that did run as asked are still compared, and said to be.
  const json twoshot = record("3", "custom-twoshot", json::array({calls("custom-twoshot", 12, 1024, 1024)}), "aa");
  const CheckResult with_others = check->evaluate({&nccl, &custom, &twoshot});
  EXPECT_EQ(with_others.status, "fail");
  EXPECT_NE(with_others.detail.find("custom-oneshot is not compared with nccl, custom-twoshot"), std::string::npos)
      << with_others.detail;
  EXPECT_NE(with_others.detail.find("the others agree: identical digests on every rank: nccl, custom-twoshot"),
            std::string::npos) << with_others.detail;
}

// A side that ran partly on NCCL is compared, named by what ran; auto that ran NCCL alone next
// to NCCL is NCCL against itself: nothing to compare, skipped with the reason.
TEST(EqualAcrossAllreduce, SidesAreNamedAndToldApartByWhatRan) {
  auto check = make_check("equal_across_allreduce");
  const json nccl = record("1", "nccl", json::array({calls("nccl", 12, 1024, 1024)}), "aa");
  const json partial = record("2", "custom-oneshot",
                              json::array({calls("custom-oneshot", 10, 1024, 1024), calls("nccl", 2, 1 << 24, 1 << 24)}), "aa");
  const json auto_nccl = record("3", "auto", json::array({calls("nccl", 12, 1024, 1024)}), "aa",
                                "no measured thresholds (x.json): nccl for every size");
  const CheckResult r = check->evaluate({&nccl, &partial, &auto_nccl});
  EXPECT_EQ(r.status, "pass") << r.detail;
  EXPECT_EQ(r.detail, "identical digests on every rank: nccl, custom-oneshot (ran custom-oneshot+nccl), auto (ran nccl)");

  const CheckResult same = check->evaluate({&nccl, &auto_nccl});
  EXPECT_EQ(same.status, "skipped");
  EXPECT_EQ(same.detail, "every backend ran nccl (nccl, auto (ran nccl)): no two different backends to compare "
                         "(auto: no measured thresholds (x.json): nccl for every size)");

  const json differs = record("4", "custom-oneshot", json::array({calls("custom-oneshot", 12, 1024, 1024)}), "bb");
  const CheckResult fail = check->evaluate({&nccl, &differs});
  EXPECT_EQ(fail.status, "fail");
  EXPECT_EQ(fail.detail.rfind("nccl vs custom-oneshot: ", 0), 0u) << fail.detail;
}

// Records written before allreduce_ran: comm[0].backend (the communicator's name()) is what
// they say ran; a custom backend that named nccl fell back.
TEST(EqualAcrossAllreduce, RecordsWithoutAllreduceRanUseTheCommunicatorName) {
  auto check = make_check("equal_across_allreduce");
  json nccl = record("1", "nccl", json::array({calls("nccl", 1, 8, 8)}), "aa");
  json custom = record("2", "custom-oneshot", json::array({calls("nccl", 1, 8, 8)}), "aa", "no peer access");
  for (json* r : {&nccl, &custom}) {
    r->erase("allreduce_ran");
    (*r)["status"] = "ok";
  }
  const CheckResult r = check->evaluate({&nccl, &custom});
  EXPECT_EQ(r.status, "fail");
  EXPECT_EQ(r.detail, "custom-oneshot requested, nccl ran (no peer access): custom-oneshot is not compared with nccl");
}

}  // namespace
}  // namespace tpb
