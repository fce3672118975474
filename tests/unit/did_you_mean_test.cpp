// "Did you mean" (tpb/did_you_mean.h): close names are offered, far ones never.
#include <gtest/gtest.h>

#include "tpb/did_you_mean.h"

namespace tpb {
namespace {

TEST(DidYouMean, OffersTheCloseNamesNearestFirst) {
  const std::vector<std::string> commands = {"run", "plan", "list", "compare", "report", "qualify", "logits"};
  EXPECT_EQ(did_you_mean("rn", commands), "; did you mean 'run'?");
  EXPECT_EQ(did_you_mean("comapre", commands), "; did you mean 'compare'?") << "a swap of neighbours is one edit";
  EXPECT_EQ(did_you_mean("PLAN", commands), "; did you mean 'plan'?") << "names are case-sensitive; the guess is not";
  EXPECT_EQ(did_you_mean("plan", {"plan"}), "") << "a name is never offered for itself";
  EXPECT_EQ(did_you_mean("Plna", commands), "; did you mean 'plan'?");
  EXPECT_EQ(did_you_mean("xyzzy", commands), "") << "nothing close: no guess";
  EXPECT_EQ(did_you_mean("--result-dir", {"--results-dir", "--resume", "--junit"}), "; did you mean '--results-dir'?");
  EXPECT_EQ(did_you_mean("ci-smok", {"ci-smoke", "quickstart-cpu", "decode-1gpu"}), "; did you mean 'ci-smoke'?");
  EXPECT_EQ(did_you_mean("tp", {"tp1", "tp2", "tp4", "tp8"}), "; did you mean 'tp1', 'tp2' or 'tp4'?") << "at most three";
  EXPECT_EQ(did_you_mean("rtx6000", {"H200", "RTX-PRO-6000", "L40S"}), "; did you mean 'RTX-PRO-6000'?") << "an abbreviation";
  EXPECT_EQ(did_you_mean("h2", {"H200", "H20-96GB"}), "") << "too short to abbreviate, and two edits from either";
}

TEST(DidYouMean, TheDistanceCountsEachEditOnce) {
  EXPECT_EQ(name_distance("", "abc"), 3u);
  EXPECT_EQ(name_distance("abc", "abc"), 0u);
  EXPECT_EQ(name_distance("abc", "acb"), 1u);
  EXPECT_EQ(name_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(name_distance("RTX6000", "rtx-6000"), 1u);
}

}  // namespace
}  // namespace tpb
