// Outputs with NaN or Inf fail a case (issue 17, finding 7): the sentence a workload records,
// and that it crosses the process boundary in the rank's result.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "suite/case_spec.h"
#include "suite/digest.h"

namespace tpb {
namespace {

TEST(Nonfinite, NamesTheCountAndTheFirstPosition) {
  std::vector<float> v(100, 1.0f);
  EXPECT_EQ(nonfinite_values("logits", v.data(), v.size()), "");
  v[41] = std::numeric_limits<float>::infinity();
  v[77] = std::nanf("");
  EXPECT_EQ(nonfinite_values("logits", v.data(), v.size()),
            "output 'logits': 2 of 100 values are NaN or Inf, the first at index 41 (inf)");
}

TEST(Nonfinite, TravelsInTheRankResult) {
  RankResult r;
  r.rank = 1;
  r.nonfinite = "output 'logits': 1 of 4 values are NaN or Inf, the first at index 2 (nan)";
  EXPECT_EQ(RankResult::from_json(r.to_json()).nonfinite, r.nonfinite);
  EXPECT_FALSE(RankResult().to_json().contains("nonfinite")) << "written only when set";
}

}  // namespace
}  // namespace tpb
