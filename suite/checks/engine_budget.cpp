#include "suite/checks/engine_budget.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "suite/checks/record_outputs.h"
#include "suite/checks/tolerance.h"

namespace tpb {

using nlohmann::json;

OutputBudget output_budget(const json& ref, const json& got) {
  if (ref.value("workload", json()) != "engine" || record_tp(ref) <= 2) return {};
  if (ref.value("device", json()) == "cuda") return {kTpRelL2Bf16, "bf16", "NCCL rounds after each hop"};
  const auto ran_mpi = [](const json& r) {
    return r.contains("params") && r["params"].is_object() && r["params"].value("allreduce", json()) == "mpi";
  };
  if (ref.value("device", json()) == "cpu" && (ran_mpi(ref) || ran_mpi(got)))
    return {kTpRelL2Fp32, "fp32", "MPI sums in its own order"};
  return {};
}

std::string logits_difference(const json& ref, const json& got, const std::string& ref_name,
                              const std::string& got_name, const OutputBudget& budget, double& worst) {
  const std::size_t ranks = ref.value("outputs", json::array()).size();
  if (ranks == 0 || got.value("outputs", json::array()).size() != ranks)
    return "the records do not both hold every rank's outputs.logits";
  const json vocab = record_rank0_metric(ref, "vocab_size");
  const std::int64_t V = vocab.is_number_integer() ? vocab.get<std::int64_t>() : 0;
  for (std::size_t k = 0; k < ranks; ++k) {
    const auto a = record_logits(ref, k), b = record_logits(got, k);
    const std::string rank = " rank " + std::to_string(k);
    if (!a || !b) return "rank " + std::to_string(k) + " recorded no outputs.logits";
    const FloatComparison c = compare_rel_l2(*a, *b, budget.rel_l2);
    if (!c.pass)
      return describe_comparison(std::string("logits (") + budget.name + " budget)", c, *a, *b, ref_name + rank,
                                 got_name + rank);
    const std::vector<std::int64_t> ta = greedy_tokens(*a, V), tb = greedy_tokens(*b, V);
    for (std::size_t row = 0; row < std::min(ta.size(), tb.size()); ++row)
      if (ta[row] != tb[row])
        return "greedy token, row " + std::to_string(row) + rank + ": " + ref_name + " picks " + std::to_string(ta[row]) +
               ", " + got_name + " picks " + std::to_string(tb[row]);
    worst = std::max(worst, c.rel_l2);
  }
  return "";
}

}  // namespace tpb
