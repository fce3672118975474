#include "suite/checks/control_drift.h"

#include <sstream>

namespace tpb {

std::string ControlDriftCheck::group_key(const nlohmann::json& record) const {
  const std::string role = record.value("role", "");
  return role == "control-start" || role == "control-end" ? "control" : "";
}

CheckResult ControlDriftCheck::evaluate(const std::vector<const nlohmann::json*>& group) const {
  const nlohmann::json *start = nullptr, *end = nullptr;
  for (const auto* r : group) {
    if (r->value("role", "") == "control-start") start = r;
    if (r->value("role", "") == "control-end") end = r;
  }
  if (!start || !end) return {"skipped", "the scenario has no control case run first and last"};
  return control_drift_verdict(*start, *end, tol_);
}

CheckResult control_drift_verdict(const nlohmann::json& start, const nlohmann::json& end,
                                  const BaselineTolerances& tol_in) {
  // The run against itself is always judged: "latency": "informational" concerns baselines.
  BaselineTolerances tol = tol_in;
  tol.latency_informational = false;
  // A control this machine cannot run at all (no GPU, too few GPUs) says nothing about drift:
  // skipped with the reason, like the cases around it. One that failed or ran only once fails.
  if (start.value("status", "") == "skipped" && end.value("status", "") == "skipped")
    return {"skipped", "the control case was skipped first and last: " +
                           (start.contains("error") && start["error"].is_string() ? start["error"].get<std::string>()
                                                                                 : std::string("no reason recorded"))};
  if (start.value("status", "") != "ok" || end.value("status", "") != "ok")
    return {"fail", "the control case did not run ok first and last (" + start.value("status", std::string("?")) +
                        ", " + end.value("status", std::string("?")) + ")"};
  std::ostringstream detail;
  bool drift = false, judged = false;
  for (const auto& v : compare_records(start, end, tol)) {
    if (v.metric == "latency_us") {
      judged = v.verdict != "insufficient-data";
      detail << "latency median " << v.old_value << " -> " << v.new_value << " us (x" << v.ratio << "), "
             << v.verdict;
      if (v.p_value >= 0) detail << ", p = " << v.p_value;
      if (v.verdict == "regression" || v.verdict == "improvement") drift = true;
    } else if (v.verdict == "mismatch") {
      detail << "; output changed: " << v.metric << " " << v.detail;
      drift = true;
      judged = true;
    }
  }
  if (drift) return {"fail", "control drifted: " + detail.str()};
  if (!judged) return {"skipped", "too few latency samples to judge drift: " + detail.str()};
  return {"pass", "control stable: " + detail.str()};
}

}  // namespace tpb
