// The check table: every check has its own file pair. (A check named here before its issue
// lands would record "not-implemented", never a pass; none is pending now.)
#include "suite/checks/check.h"

#include "suite/checks/control_drift.h"
#include "suite/checks/deterministic.h"
#include "suite/checks/equal_across_allreduce.h"
#include "suite/checks/matches_reference.h"
#include "suite/checks/observer_invariant.h"
#include "suite/checks/plan_matches_measured.h"
#include "suite/checks/tp_invariant.h"

namespace tpb {

const std::vector<std::string>& known_check_names() {
  static const std::vector<std::string> names = {
      "matches_reference",       // each rank's output equals the workload's serial CPU reference
      "equal_across_allreduce",  // cases differing only in the backend: identical digests
      "deterministic",           // the same case run twice: identical digests
      "tp_invariant",            // TP=1 vs TP=N logits within the numerics policy
      "observer_invariant",      // instrumentation off vs debug: identical outputs and plan
      "plan_matches_measured",   // memory planner vs meter
      "control_drift",           // the control case first vs last
  };
  return names;
}

std::unique_ptr<Check> make_check(const std::string& name, const nlohmann::json& baseline_section) {
  if (name == "equal_across_allreduce") return std::make_unique<EqualAcrossAllreduceCheck>();
  if (name == "matches_reference") return std::make_unique<MatchesReferenceCheck>();
  if (name == "deterministic") return std::make_unique<DeterministicCheck>();
  if (name == "observer_invariant") return std::make_unique<ObserverInvariantCheck>();
  if (name == "tp_invariant") return std::make_unique<TpInvariantCheck>();
  if (name == "plan_matches_measured") return std::make_unique<PlanMatchesMeasuredCheck>();
  if (name == "control_drift") return std::make_unique<ControlDriftCheck>(tolerances_from_json(baseline_section));
  return nullptr;
}

std::string params_key_without(const nlohmann::json& record, const std::vector<std::string>& drop) {
  nlohmann::json params = record.value("params", nlohmann::json::object());
  for (const auto& key : drop) params.erase(key);
  // Workload, device and model are part of what makes two cases comparable.
  nlohmann::json key = {{"workload", record.value("workload", "")},
                        {"device", record.value("device", "")},
                        {"model", record.value("model", nlohmann::json())},
                        {"params", params}};
  return key.dump();  // nlohmann objects are key-sorted: a canonical text
}

}  // namespace tpb
