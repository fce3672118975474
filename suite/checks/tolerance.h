// Tolerance comparisons of float outputs, and the one place their budgets live
// (ARCHITECTURE.md, "Numerics policy"). NaN/Inf are looked for first and fail whatever the
// budget; a report names both sides, the max abs error and its index, the rel-L2 error and
// the share of the budget it used (as FlashMLA's test helper prints).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tpb {

// TP=1 vs TP=N on one device. fp32: the CPU reference engine sums in a different order
// across shards (partial sums per rank, then the allreduce), nothing else differs.
constexpr double kTpRelL2Fp32 = 1e-5;
// bf16 engines: activations are rounded to 8 mantissa bits between ops.
constexpr double kTpRelL2Bf16 = 2e-2;
// observer_invariant: the most `timing` may add to the median step latency (ratio - 1).
constexpr double kTimingOverheadMax = 0.01;
// ... enforced only with this many independent samples (repetitions) on both sides.
constexpr std::size_t kTimingOverheadMinRepetitions = 9;

struct FloatComparison {
  std::size_t count = 0;             // values compared (the shorter side; lengths must match to pass)
  bool same_length = true;
  std::size_t nonfinite_ref = 0;     // NaN or Inf in the reference side
  std::size_t nonfinite_got = 0;     // NaN or Inf in the compared side
  std::int64_t first_nonfinite = -1; // index of the first NaN/Inf on either side
  double max_abs = 0;                // max |got - ref|
  std::int64_t worst_index = -1;     // where max_abs is
  double rel_l2 = 0;                 // ||got - ref||_2 / ||ref||_2 (0/0 = 0)
  double budget = 0;                 // the rel-L2 budget it is judged against
  bool pass = false;                 // finite, equal lengths, rel_l2 <= budget
};

FloatComparison compare_rel_l2(const std::vector<float>& ref, const std::vector<float>& got, double rel_l2_budget);

// One paragraph: "<what>: <ref_name> vs <got_name>: rel-L2 ... (..% of budget ...), max abs
// ... at index i (ref_name: x, got_name: y); first values: ref_name [...], got_name [...]".
std::string describe_comparison(const std::string& what, const FloatComparison& c, const std::vector<float>& ref,
                                const std::vector<float>& got, const std::string& ref_name, const std::string& got_name);

// Index of the largest value in each complete row of `row_length` values (first max wins).
std::vector<std::int64_t> greedy_tokens(const std::vector<float>& values, std::int64_t row_length);

}  // namespace tpb
