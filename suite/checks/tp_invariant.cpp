#include "suite/checks/tp_invariant.h"

#include <cmath>
#include <limits>
#include <optional>

#include "suite/checks/record_outputs.h"
#include "suite/checks/tolerance.h"

namespace tpb {

namespace {

using nlohmann::json;

std::int64_t tp_of(const json& record) { return record_tp(record); }

std::string side(const json& record) {
  return "tp=" + std::to_string(tp_of(record)) + " (case " + record.value("case_id", std::string("?")) + ")";
}

}  // namespace

std::string TpInvariantCheck::group_key(const json& record) const {
  if (record.value("role", "sweep") != "sweep") return "";
  if (record.value("workload", "") != "engine") return "";  // only the engine has logits
  if (!record.contains("params") || !record["params"].contains("tp")) return "";
  return params_key_without(record, {"tp", "allreduce"});
}

CheckResult TpInvariantCheck::evaluate(const std::vector<const json*>& group) const {
  std::vector<const json*> ran;
  std::string not_ok;
  for (const auto* r : group) {
    if (r->value("status", "") == "ok")
      ran.push_back(r);
    else
      not_ok += (not_ok.empty() ? "" : ", ") + side(*r) + " " + r->value("status", "?");
  }
  const std::string not_compared = not_ok.empty() ? std::string() : " (not compared: " + not_ok + ")";
  const json* ref = nullptr;
  for (const auto* r : ran)
    if (tp_of(*r) == 1 && !ref) ref = r;
  if (!ref) return {"skipped", "needs the tp=1 case to have run" + not_compared};
  if (ran.size() < 2) return {"skipped", "needs a tp>1 case that ran besides tp=1" + not_compared};

  const auto ref_logits = record_logits(*ref, 0);
  if (!ref_logits)
    return {"fail", side(*ref) + " recorded no outputs.logits (the record's outputs must hold each rank's outputs)"};
  const json dtype = record_rank0_metric(*ref, "compute_dtype");
  const bool fp32 = dtype.is_string() ? dtype.get<std::string>() == "f32" : ref->value("device", "") == "cpu";
  const double budget = fp32 ? kTpRelL2Fp32 : kTpRelL2Bf16;
  const json vocab = record_rank0_metric(*ref, "vocab_size");
  const std::int64_t V = vocab.is_number_integer() ? vocab.get<std::int64_t>() : 0;
  const std::vector<std::int64_t> ref_tokens = greedy_tokens(*ref_logits, V);

  std::string summary;
  for (const auto* r : ran) {
    if (r == ref) continue;
    const std::size_t ranks = r->value("outputs", json::array()).size();
    if (ranks == 0) return {"fail", side(*r) + " recorded no outputs.logits"};
    FloatComparison worst;
    for (std::size_t k = 0; k < ranks; ++k) {
      const auto got = record_logits(*r, k);
      const std::string got_name = side(*r) + " rank " + std::to_string(k);
      if (!got) return {"fail", got_name + " recorded no outputs.logits"};
      const FloatComparison c = compare_rel_l2(*ref_logits, *got, budget);
      const std::vector<std::string> pair = {ref->value("case_id", ""), r->value("case_id", "")};
      if (!c.pass)
        return {"fail",
                describe_comparison(std::string("tp_invariant logits (") + (fp32 ? "fp32" : "bf16") + ")", c, *ref_logits,
                                    *got, side(*ref), got_name),
                pair, budget};
      const std::vector<std::int64_t> tokens = greedy_tokens(*got, V);
      for (std::size_t row = 0; row < std::min(tokens.size(), ref_tokens.size()); ++row)
        if (tokens[row] != ref_tokens[row]) {
          const auto a = static_cast<std::size_t>(static_cast<std::int64_t>(row) * V + ref_tokens[row]);
          const auto b = static_cast<std::size_t>(static_cast<std::int64_t>(row) * V + tokens[row]);
          return {"fail", "tp_invariant greedy token, row " + std::to_string(row) + ": " + side(*ref) + " picks " +
                              std::to_string(ref_tokens[row]) + " (logit " + std::to_string((*ref_logits)[a]) + " vs " +
                              std::to_string((*got)[a]) + "), " + got_name + " picks " + std::to_string(tokens[row]) +
                              " (logit " + std::to_string((*got)[b]) + " vs " + std::to_string((*ref_logits)[b]) +
                              "); " + describe_comparison("logits", c, *ref_logits, *got, side(*ref), got_name),
                  pair, budget};
        }
      if (k == 0 || c.rel_l2 > worst.rel_l2) worst = c;
    }
    char buf[200];
    std::snprintf(buf, sizeof buf, "tp=%lld: rel-L2 %.3g (%.3g%% of budget %.0e), max abs %.3g at index %lld",
                  static_cast<long long>(tp_of(*r)), worst.rel_l2, 100.0 * worst.rel_l2 / budget, budget, worst.max_abs,
                  static_cast<long long>(worst.worst_index));
    summary += (summary.empty() ? "" : "; ") + std::string(buf);
  }
  return {"pass", "vs tp=1 over " + std::to_string(ref_logits->size()) + " logits, every rank, " +
                      std::to_string(ref_tokens.size()) + " greedy tokens equal: " + summary + not_compared};
}

}  // namespace tpb
