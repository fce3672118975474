// compare_placements (suite/checks/compare_placements.h): exclusive against shared placement of one
// scenario. The records are built here: GPU engine cases cannot run on the CPU, and the rule
// under test (bitwise at TP <= 2, the bf16 budget above for the GPU engine) is about records.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "suite/checks/compare_placements.h"
#include "tpb/check.h"

namespace {

using nlohmann::json;
using tpb::compare_placements;

// A GPU engine decode case: `tp` ranks, logits scaled by (1 + eps), one digest for every rank,
// its placement and id, p50 step time `step_us`.
json engine_case(const std::string& placement, const std::string& id, const std::string& backend, std::int64_t tp,
                 const std::string& digest, double eps = 0, double step_us = 100) {
  std::vector<float> logits = {0.5f, 2.0f, -1.0f, 0.25f, 1.999f, 3.0f, 0.1f, -2.0f, 0.0f, 1.5f};  // 2 rows of 5
  for (float& v : logits) v = static_cast<float>(v * (1.0 + eps));
  json outputs = json::array(), digests = json::array(), metrics = json::array();
  for (std::int64_t r = 0; r < tp; ++r) {
    outputs.push_back({{"logits", logits}});
    digests.push_back({{"logits", digest}});
    metrics.push_back({{"vocab_size", 5}});
  }
  return {{"case_id", id},
          {"label", "decode tp" + std::to_string(tp) + " b8 s1024 graph " + backend},
          {"status", "ok"},
          {"role", "sweep"},
          {"workload", "engine"},
          {"device", "cuda"},
          {"model", {{"preset", "kimi-k2.5"}, {"seed", 1234}}},
          {"params", {{"tp", tp}, {"allreduce", backend}, {"batch_size", 8}, {"cuda_graph", true}}},
          {"placement", {{"placement", placement}}},
          {"latency", {{"p50", step_us}}},
          {"outputs", outputs},
          {"digests", digests},
          {"metrics", metrics}};
}

const tpb::PlacementPair& only_pair(const tpb::PlacementComparison& c) {
  EXPECT_EQ(c.pairs.size(), 1u);
  return c.pairs.at(0);
}

TEST(ComparePlacements, PairsByIdentityWithoutPlacementOrCaseId) {
  const std::vector<json> a = {engine_case("exclusive", "e1", "nccl", 2, "aa"),
                               engine_case("exclusive", "e2", "custom-oneshot", 2, "aa")};
  const std::vector<json> b = {engine_case("shared", "s2", "custom-oneshot", 2, "aa"),
                               engine_case("shared", "s1", "nccl", 2, "aa")};
  const auto c = compare_placements(a, b, "A", "B");
  EXPECT_EQ(c.placement_a, "exclusive");
  EXPECT_EQ(c.placement_b, "shared");
  ASSERT_EQ(c.pairs.size(), 2u);
  EXPECT_EQ(c.pairs[0].case_id_a + c.pairs[0].case_id_b, "e1s1");
  EXPECT_EQ(c.pairs[1].case_id_a + c.pairs[1].case_id_b, "e2s2");
  EXPECT_EQ(c.pairs[1].backend, "custom-oneshot");
  EXPECT_EQ(c.pairs[1].verdict, "equal");
  EXPECT_EQ(c.mismatches, 0);
  EXPECT_TRUE(c.not_paired.empty());
}

TEST(ComparePlacements, BitwiseAtTp2) {
  // 1e-6 of the logits is far inside the bf16 budget: at TP 2 it is a mismatch all the same.
  const auto c = compare_placements({engine_case("exclusive", "e", "nccl", 2, "aa")},
                                    {engine_case("shared", "s", "nccl", 2, "bb", 1e-6)}, "A", "B");
  const auto& p = only_pair(c);
  EXPECT_EQ(p.rule, "bitwise");
  EXPECT_EQ(p.verdict, "mismatch");
  EXPECT_NE(p.detail.find("rank 0 output 'logits'"), std::string::npos) << p.detail;
  EXPECT_EQ(c.mismatches, 1);
}

TEST(ComparePlacements, AboveTp2TheBf16BudgetWithTheSameGreedyTokens) {
  const json a = engine_case("exclusive", "e", "nccl", 4, "aa");
  const auto close = compare_placements({a}, {engine_case("shared", "s", "nccl", 4, "bb", 1e-3)}, "A", "B");
  EXPECT_EQ(only_pair(close).rule, "bitwise, else bf16 budget");
  EXPECT_EQ(only_pair(close).verdict, "within-budget") << only_pair(close).detail;
  EXPECT_NE(only_pair(close).detail.find("rel-L2"), std::string::npos);
  EXPECT_EQ(close.mismatches, 0);

  const auto far = compare_placements({a}, {engine_case("shared", "s", "nccl", 4, "bb", 5e-2)}, "A", "B");
  EXPECT_EQ(only_pair(far).verdict, "mismatch");
  EXPECT_EQ(far.mismatches, 1);

  json flipped = engine_case("shared", "s", "nccl", 4, "bb");
  flipped["outputs"][3]["logits"][4] = 2.001f;  // breaks row 0's near tie on rank 3
  const auto token = compare_placements({a}, {flipped}, "A", "B");
  EXPECT_EQ(only_pair(token).verdict, "mismatch");
  EXPECT_NE(only_pair(token).detail.find("greedy token, row 0 rank 3"), std::string::npos) << only_pair(token).detail;

  // The allreduce workload stays bitwise above TP 2 (its inputs make every sum exact).
  json ar_a = engine_case("exclusive", "e", "nccl", 4, "aa"), ar_b = engine_case("shared", "s", "nccl", 4, "bb", 1e-6);
  ar_a["workload"] = ar_b["workload"] = "allreduce";
  EXPECT_EQ(only_pair(compare_placements({ar_a}, {ar_b}, "A", "B")).verdict, "mismatch");
}

TEST(ComparePlacements, CasesOnOneSideOrNotOkAreListedNotPaired) {
  json skipped = engine_case("exclusive", "e8", "nccl", 8, "");
  skipped["status"] = "skipped";
  skipped["error"] = "needs 8 GPUs, 2 visible";
  skipped.erase("placement");  // a case that could not be placed records none
  const std::vector<json> a = {engine_case("exclusive", "e2", "nccl", 2, "aa"), skipped};
  const std::vector<json> b = {engine_case("shared", "s2", "nccl", 2, "aa"), engine_case("shared", "s8", "nccl", 8, "cc"),
                               engine_case("shared", "s4", "nccl", 4, "dd")};
  const auto c = compare_placements(a, b, "A", "B");
  EXPECT_EQ(c.pairs.size(), 1u);
  ASSERT_EQ(c.not_paired.size(), 2u);
  EXPECT_NE(c.not_paired[0].find("exclusive skipped: needs 8 GPUs"), std::string::npos) << c.not_paired[0];
  EXPECT_NE(c.not_paired[1].find("decode tp4 b8 s1024 graph nccl: shared only"), std::string::npos) << c.not_paired[1];
}

TEST(ComparePlacements, TheLastRecordOfACaseCounts) {
  json failed = engine_case("shared", "s", "nccl", 2, "bb");
  failed["status"] = "failed";
  const auto c = compare_placements({engine_case("exclusive", "e", "nccl", 2, "aa")},
                                    {failed, engine_case("shared", "s", "nccl", 2, "aa")}, "A", "B");
  EXPECT_EQ(only_pair(c).verdict, "equal");
}

TEST(ComparePlacements, CustomAgainstNcclPerPlacement) {
  const std::vector<json> a = {engine_case("exclusive", "e1", "nccl", 2, "aa", 0, 200),
                               engine_case("exclusive", "e2", "custom-oneshot", 2, "aa", 0, 150)};
  const std::vector<json> b = {engine_case("shared", "s1", "nccl", 2, "aa", 0, 400),
                               engine_case("shared", "s2", "custom-oneshot", 2, "aa", 0, 500)};
  const auto c = compare_placements(a, b, "A", "B");
  ASSERT_EQ(c.custom_vs_nccl.size(), 2u);
  EXPECT_EQ(c.custom_vs_nccl[0].placement, "exclusive");
  EXPECT_EQ(c.custom_vs_nccl[0].group, "decode tp2 b8 s1024 graph");
  EXPECT_EQ(c.custom_vs_nccl[0].backend, "custom-oneshot");
  EXPECT_DOUBLE_EQ(c.custom_vs_nccl[0].relative, 150.0 / 200.0 - 1);
  EXPECT_EQ(c.custom_vs_nccl[1].placement, "shared");
  EXPECT_DOUBLE_EQ(c.custom_vs_nccl[1].relative, 500.0 / 400.0 - 1);
  EXPECT_DOUBLE_EQ(c.pairs[1].step_us_a, 150);
  EXPECT_DOUBLE_EQ(c.pairs[1].step_us_b, 500);
}

TEST(ComparePlacements, NothingAboutPlacementToSayIsBadInput) {
  const json e = engine_case("exclusive", "e", "nccl", 2, "aa"), s = engine_case("shared", "s", "nccl", 2, "aa");
  EXPECT_THROW(compare_placements({e}, {e}, "A", "B"), tpb::InputError);  // one placement on both sides
  EXPECT_THROW(compare_placements({e, s}, {s}, "A", "B"), tpb::InputError);  // a side of two placements
  EXPECT_THROW(compare_placements({}, {s}, "A", "B"), tpb::InputError);      // an empty side
  json other = engine_case("shared", "s", "nccl", 2, "aa");
  other["params"]["batch_size"] = 64;
  EXPECT_THROW(compare_placements({e}, {other}, "A", "B"), tpb::InputError);  // no case in common
}

}  // namespace
