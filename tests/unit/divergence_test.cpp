// locate_divergence (suite/checks/divergence.h) on digests-level records built here: the
// first collective whose output differs is named with its site, whether its inputs agreed,
// and the sampled differences; tolerance mode skips what differs within the budget.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "suite/checks/divergence.h"

namespace tpb {
namespace {

using nlohmann::json;

json entry(int call, const std::string& site, const std::string& in, const std::string& out, float scale = 1.f,
           const char* op = "all_reduce") {
  json samples = json::array();
  for (int i = 0; i < 64; ++i) samples.push_back(scale * (0.5f + 0.01f * i));
  return {{"call", call}, {"op", op},        {"in_count", 896}, {"out_count", 896},  {"in", in},
          {"out", out},   {"forward", call / 4}, {"layer", call % 4 == 0 ? json(nullptr) : json((call % 4 - 1) / 2)},
          {"site", site}, {"samples", samples}};
}

// A record whose ranks each hold `entries`.
json record(const std::vector<json>& entries, int ranks = 2) {
  json metrics = json::array();
  for (int r = 0; r < ranks; ++r)
    metrics.push_back({{"instrumentation", {{"tensor_digests", {{"entries", entries}}}}}});
  return {{"metrics", metrics}, {"digests", json::array({{{"logits", "aa"}}, {{"logits", "aa"}}})}};
}

const std::vector<json> kClean = {entry(0, "embedding all_reduce", "i0", "o0"), entry(1, "layer 0 attention all_reduce", "i1", "o1"),
                                  entry(2, "layer 0 mlp all_reduce", "i2", "o2"), entry(3, "lm_head all_gather", "i3", "o3", 1.f, "all_gather")};

TEST(Divergence, BitwiseNamesTheFirstCallWhoseOutputDiffersAndWhetherItsInputsAgreed) {
  std::vector<json> b = kClean;
  b[2] = entry(2, "layer 0 mlp all_reduce", "i2", "XX", 1.0625f);
  b[3] = entry(3, "lm_head all_gather", "YY", "ZZ", 1.f, "all_gather");
  const Divergence d = locate_divergence(record(kClean), record(b), "nccl", "custom", 0);
  ASSERT_TRUE(d.compared && d.found) << d.sentence();
  EXPECT_EQ(d.call, 2);
  EXPECT_EQ(d.site, "layer 0 mlp all_reduce");
  EXPECT_EQ(d.layer, 0);
  EXPECT_TRUE(d.inputs_equal);
  EXPECT_EQ(d.calls_agreeing, 2);
  EXPECT_NEAR(d.max_rel, 0.0625, 1e-6);
  EXPECT_NE(d.sentence().find("inputs equal, outputs differ"), std::string::npos) << d.sentence();

  std::vector<json> c = kClean;
  c[1] = entry(1, "layer 0 attention all_reduce", "WW", "VV");
  const Divergence e = locate_divergence(record(kClean), record(c), "a", "b", 0);
  ASSERT_TRUE(e.found);
  EXPECT_EQ(e.call, 1);
  EXPECT_FALSE(e.inputs_equal);
  EXPECT_NE(e.sentence().find("inputs already differ"), std::string::npos) << e.sentence();
}

TEST(Divergence, BitwiseTakesTheEarliestCallOverTheRanks) {
  json a = record(kClean), b = record(kClean);
  b["metrics"][1]["instrumentation"]["tensor_digests"]["entries"][1]["out"] = "changed";
  b["metrics"][0]["instrumentation"]["tensor_digests"]["entries"][3]["out"] = "changed";
  const Divergence d = locate_divergence(a, b, "a", "b", 0);
  ASSERT_TRUE(d.found);
  EXPECT_EQ(d.call, 1);
  EXPECT_EQ(d.rank, 1);
}

TEST(Divergence, SaysWhenNothingDiffersOrNothingWasRecorded) {
  const Divergence same = locate_divergence(record(kClean), record(kClean), "a", "b", 0);
  EXPECT_TRUE(same.compared);
  EXPECT_FALSE(same.found);
  EXPECT_NE(same.sentence().find("did not reproduce"), std::string::npos) << same.sentence();
  json other_logits = record(kClean);
  other_logits["digests"][0]["logits"] = "bb";
  const Divergence after = locate_divergence(record(kClean), other_logits, "a", "b", 0);
  EXPECT_FALSE(after.found);
  EXPECT_NE(after.sentence().find("after the last collective"), std::string::npos) << after.sentence();
  const Divergence none = locate_divergence(json{{"metrics", json::array({json::object()})}}, record(kClean), "a", "b", 0);
  EXPECT_FALSE(none.compared);
  EXPECT_NE(none.sentence().find("instrumentation=digests"), std::string::npos);
}

TEST(Divergence, ToleranceModeSkipsDifferencesWithinTheBudget) {
  std::vector<json> b = kClean;
  b[0] = entry(0, "embedding all_reduce", "x", "y", 1.000001f);  // within 1e-5
  b[2] = entry(2, "layer 0 mlp all_reduce", "x", "z", 1.0625f);
  const Divergence d = locate_divergence(record(kClean), record(b, 4), "tp=1", "tp=4", 1e-5);
  ASSERT_TRUE(d.found) << d.sentence();
  EXPECT_EQ(d.site, "layer 0 mlp all_reduce");
  EXPECT_NEAR(d.rel_l2, 0.0625, 1e-4);
  EXPECT_NE(d.sentence().find("budget"), std::string::npos);
}

}  // namespace
}  // namespace tpb
