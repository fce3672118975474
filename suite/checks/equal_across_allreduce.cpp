#include "suite/checks/equal_across_allreduce.h"

#include "suite/checks/digests.h"

namespace tpb {

std::string EqualAcrossAllreduceCheck::group_key(const nlohmann::json& record) const {
  // Only the sweep's own cases: control and repeat runs are other checks' business.
  if (record.value("role", "sweep") != "sweep") return "";
  if (!record.contains("params") || !record["params"].contains("allreduce")) return "";
  return params_key_without(record, {"allreduce"});
}

CheckResult EqualAcrossAllreduceCheck::evaluate(const std::vector<const nlohmann::json*>& group) const {
  std::vector<const nlohmann::json*> ran;
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
  const nlohmann::json& ref = *ran.front();
  const std::string ref_backend = ref["params"]["allreduce"].get<std::string>();
  std::string compared = ref_backend;
  for (std::size_t i = 1; i < ran.size(); ++i) {
    const std::string diff = digest_difference(ref, *ran[i]);
    const std::string backend = (*ran[i])["params"]["allreduce"].get<std::string>();
    if (!diff.empty()) return {"fail", ref_backend + " vs " + backend + ": " + diff};
    compared += ", " + backend;
  }
  return {"pass", "identical digests on every rank: " + compared +
                      (not_ok.empty() ? std::string() : " (not compared: " + not_ok + ")")};
}

}  // namespace tpb
