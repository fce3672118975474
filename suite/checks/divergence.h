// Divergence localization (issue 15): where two runs that should agree part. Both sides are
// records of the same case shape rerun at instrumentation `digests`, whose ranks recorded
// every collective's input and output digests and an output sample
// (metrics[r].instrumentation.tensor_digests, suite/measure/tensor_digests.h). Walking the calls in
// order, the first whose output differs names the forward pass, the layer and the op where
// the sides part, and whether its inputs were already different (the compute before the
// collective parted) or equal (the collective itself gave another result).
//
// Bitwise mode (budget 0: equal_across_allreduce at TP <= 2, deterministic) compares output
// digests on every rank. Tolerance mode (tp_invariant, and equal_across_allreduce where the
// policy allows a budget) compares the output samples of the all_reduce calls on rank 0 with
// the rel-L2 budget the outputs were held to: their inputs are partial sums that differ by
// construction across TP, their outputs are full activations on every rank.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace tpb {

struct Divergence {
  bool compared = false;       // both sides carry tensor digests
  std::string why_not;         // when not compared, or compared and nothing found: why
  bool found = false;          // a call's output differs
  int rank = 0;                // where it was seen
  std::int64_t call = -1;      // index among the case's collectives
  std::int64_t forward = -1;   // forward pass of the case (prefill, warm-ups, timed steps)
  std::int64_t layer = -1;     // -1: the embedding or the lm_head
  std::string site;            // e.g. "layer 2 moe all_reduce"
  bool inputs_equal = false;   // bitwise mode: the call's input digests agree
  double max_abs = 0;          // over the output samples
  double max_rel = 0;          // max_abs / the largest |sample| of the first side
  double rel_l2 = 0;           // rel-L2 of the samples
  std::int64_t samples = 0;    // values compared
  std::int64_t calls_agreeing = 0;  // calls before it that agree
  bool budget_mode = false;    // tolerance mode
  double budget = 0;           // its rel-L2 budget
  std::string a_name, b_name;

  std::string sentence() const;
  nlohmann::json to_json() const;
};

// `a`, `b`: the digests-level records. `budget`: 0 bitwise, else the samples' rel-L2 budget.
Divergence locate_divergence(const nlohmann::json& a, const nlohmann::json& b, const std::string& a_name,
                             const std::string& b_name, double budget);

}  // namespace tpb
