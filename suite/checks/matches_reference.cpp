#include "suite/checks/matches_reference.h"

namespace tpb {

namespace {

// The reference flag a workload reports, by workload.
const char* reference_key(const std::string& workload) {
  return workload == "allreduce" ? "matches_serial_sum" : "matches_reference";
}

}  // namespace

CheckResult MatchesReferenceCheck::evaluate(const std::vector<const nlohmann::json*>& group) const {
  if (group.empty()) return {"skipped", "no case"};
  const nlohmann::json& r = *group.front();
  const std::string status = r.value("status", "");
  if (status != "ok") return {"skipped", "the case did not run (" + status + ")"};
  const char* key = reference_key(r.value("workload", ""));
  const nlohmann::json metrics = r.value("metrics", nlohmann::json());
  if (!metrics.is_array() || metrics.empty()) return {"fail", "the case recorded no per-rank metrics"};
  for (std::size_t rank = 0; rank < metrics.size(); ++rank) {
    const nlohmann::json& m = metrics[rank];
    if (!m.is_object() || !m.contains(key) || !m[key].is_boolean())
      return {"fail", "rank " + std::to_string(rank) + " reported no metrics." + key};
    if (!m[key].get<bool>()) {
      std::string where;
      if (m.contains("mismatched_elements")) where += ", " + m["mismatched_elements"].dump() + " elements differ";
      if (m.contains("first_mismatch")) where += ", first at index " + m["first_mismatch"].dump();
      return {"fail", "rank " + std::to_string(rank) + ": output differs from the reference" + where};
    }
  }
  return {"pass", "every rank (" + std::to_string(metrics.size()) + ") bitwise equal to the reference"};
}

}  // namespace tpb
