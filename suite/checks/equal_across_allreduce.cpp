#include "suite/checks/equal_across_allreduce.h"

#include <algorithm>
#include <cstdio>

#include "suite/checks/digests.h"
#include "suite/checks/record_outputs.h"
#include "suite/checks/tolerance.h"

namespace tpb {

namespace {

using nlohmann::json;

// Where backends may differ in the last bits (see the header): a GPU engine above TP 2.
bool within_tolerance_allowed(const json& record) {
  return record.value("workload", "") == "engine" && record.value("device", "") == "cuda" && record_tp(record) > 2;
}

// "" when `got`'s logits match `ref`'s within the bf16 budget on every rank with the same
// greedy tokens; else why not. `worst` receives the largest rel-L2 seen.
std::string tolerance_difference(const json& ref, const json& got, const std::string& ref_name,
                                 const std::string& got_name, double& worst) {
  const std::size_t ranks = ref.value("outputs", json::array()).size();
  if (ranks == 0 || got.value("outputs", json::array()).size() != ranks)
    return "the records do not both hold every rank's outputs.logits";
  const json vocab = record_rank0_metric(ref, "vocab_size");
  const std::int64_t V = vocab.is_number_integer() ? vocab.get<std::int64_t>() : 0;
  for (std::size_t k = 0; k < ranks; ++k) {
    const auto a = record_logits(ref, k), b = record_logits(got, k);
    const std::string rank = " rank " + std::to_string(k);
    if (!a || !b) return "rank " + std::to_string(k) + " recorded no outputs.logits";
    const FloatComparison c = compare_rel_l2(*a, *b, kTpRelL2Bf16);
    if (!c.pass) return describe_comparison("logits (bf16 budget)", c, *a, *b, ref_name + rank, got_name + rank);
    const std::vector<std::int64_t> ta = greedy_tokens(*a, V), tb = greedy_tokens(*b, V);
    for (std::size_t row = 0; row < std::min(ta.size(), tb.size()); ++row)
      if (ta[row] != tb[row])
        return "greedy token, row " + std::to_string(row) + rank + ": " + ref_name + " picks " + std::to_string(ta[row]) +
               ", " + got_name + " picks " + std::to_string(tb[row]);
    worst = std::max(worst, c.rel_l2);
  }
  return "";
}

}  // namespace

std::string EqualAcrossAllreduceCheck::group_key(const json& record) const {
  // Only the sweep's own cases: control and repeat runs are other checks' business.
  if (record.value("role", "sweep") != "sweep") return "";
  if (!record.contains("params") || !record["params"].contains("allreduce")) return "";
  return params_key_without(record, {"allreduce"});
}

CheckResult EqualAcrossAllreduceCheck::evaluate(const std::vector<const json*>& group) const {
  std::vector<const json*> ran;
  std::string not_ok;
  for (const auto* r : group) {
    if (r->value("status", "") == "ok")
      ran.push_back(r);
    else
      not_ok += (not_ok.empty() ? "" : ", ") + r->value("case_id", "?") + " " + r->value("status", "?");
  }
  if (ran.size() < 2)
    return {"skipped", "needs two backends that ran; " + std::to_string(ran.size()) + " ran" +
                           (not_ok.empty() ? std::string() : " (" + not_ok + ")")};
  const json& ref = *ran.front();
  const std::string ref_backend = ref["params"]["allreduce"].get<std::string>();
  std::string identical = ref_backend, tolerated;
  for (std::size_t i = 1; i < ran.size(); ++i) {
    const std::string backend = (*ran[i])["params"]["allreduce"].get<std::string>();
    const std::string diff = digest_difference(ref, *ran[i]);
    if (diff.empty()) {
      identical += ", " + backend;
      continue;
    }
    if (!within_tolerance_allowed(ref)) return {"fail", ref_backend + " vs " + backend + ": " + diff};
    double worst = 0;
    const std::string why = tolerance_difference(ref, *ran[i], ref_backend, backend, worst);
    if (!why.empty())
      return {"fail", ref_backend + " vs " + backend + " (TP " + std::to_string(record_tp(ref)) +
                          ": not bitwise, and not within tolerance): " + why};
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s (rel-L2 %.3g, %.3g%% of %.0e)", backend.c_str(), worst,
                  100.0 * worst / kTpRelL2Bf16, kTpRelL2Bf16);
    tolerated += (tolerated.empty() ? "" : ", ") + std::string(buf);
  }
  std::string detail = "identical digests on every rank: " + identical;
  if (!tolerated.empty())
    detail += "; within the bf16 budget of " + ref_backend + " with the same greedy tokens (TP " +
              std::to_string(record_tp(ref)) + " > 2: NCCL rounds after each hop): " + tolerated;
  return {"pass", detail + (not_ok.empty() ? std::string() : " (not compared: " + not_ok + ")")};
}

}  // namespace tpb
