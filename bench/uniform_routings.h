// Routings of a MoE benchmark: each token picks top_k distinct experts uniformly at random, as a
// router with no preference would. One definition for the bf16 and INT4 expert benchmarks.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

namespace tpb::bench {

struct UniformRoutings {
  std::vector<std::int32_t> offsets;  // [routings][experts + 1]: each routing's dispatch offsets
  double mean_experts_touched = 0;    // experts with at least one row, averaged over the routings
};

// Routing r draws from std::mt19937(seed_per_token * tokens + r), so a (tokens, r) pair always
// gives the same offsets.
inline UniformRoutings uniform_routings(int experts, int top_k, int tokens, int routings, std::uint32_t seed_per_token) {
  UniformRoutings out;
  std::vector<int> ids(static_cast<std::size_t>(experts));
  double touched = 0;
  for (int r = 0; r < routings; ++r) {
    std::mt19937 rng(static_cast<std::uint32_t>(seed_per_token * static_cast<std::uint32_t>(tokens) + static_cast<std::uint32_t>(r)));
    std::vector<std::int32_t> off(static_cast<std::size_t>(experts) + 1, 0);
    for (int t = 0; t < tokens; ++t) {
      std::iota(ids.begin(), ids.end(), 0);
      std::shuffle(ids.begin(), ids.end(), rng);
      for (int k = 0; k < top_k; ++k) ++off[static_cast<std::size_t>(ids[static_cast<std::size_t>(k)]) + 1];
    }
    for (int e = 0; e < experts; ++e) touched += off[static_cast<std::size_t>(e) + 1] > 0 ? 1 : 0;
    std::partial_sum(off.begin(), off.end(), off.begin());
    out.offsets.insert(out.offsets.end(), off.begin(), off.end());
  }
  out.mean_experts_touched = touched / routings;
  return out;
}

}  // namespace tpb::bench
