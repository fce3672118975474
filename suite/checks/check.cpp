// The check table: one row per check, saying what the sweep and the runner must do for it;
// every check has its own file pair. (A check named here before its issue lands would record
// "not-implemented", never a pass; none is pending now.)
#include "suite/checks/check.h"

#include "suite/checks/control_drift.h"
#include "suite/checks/deterministic.h"
#include "suite/checks/equal_across_allreduce.h"
#include "suite/checks/matches_reference.h"
#include "suite/checks/observer_invariant.h"
#include "suite/checks/plan_matches_measured.h"
#include "suite/checks/tp_invariant.h"

namespace tpb {

namespace {

template <class C>
std::unique_ptr<Check> make(const nlohmann::json&) {
  return std::make_unique<C>();
}

// The table (check.h). Order: as `tpbench list` prints them and validation messages name them.
const CheckInfo kChecks[] = {
    // name, what it compares; needs_repeat, localizes, make
    {"matches_reference", "each rank's output equals the workload's serial CPU reference", false, false,
     make<MatchesReferenceCheck>},
    {"equal_across_allreduce", "cases differing only in the backend: identical digests", false, true,
     make<EqualAcrossAllreduceCheck>},
    {"deterministic", "the same case run twice: identical digests", true, true, make<DeterministicCheck>},
    {"tp_invariant", "TP=1 vs TP=N logits within the numerics policy", false, true, make<TpInvariantCheck>},
    {"observer_invariant", "instrumentation off vs debug: identical outputs and plan", false, false,
     make<ObserverInvariantCheck>},
    {"plan_matches_measured", "the memory planner's predicted bytes per rank vs the meter's measured ones", false, false, make<PlanMatchesMeasuredCheck>},
    {"control_drift", "the control case run first vs last: latency must not drift, or the run is unstable", false, false,
     [](const nlohmann::json& baseline_section) -> std::unique_ptr<Check> {
       return std::make_unique<ControlDriftCheck>(tolerances_from_json(baseline_section));
     }},
};

}  // namespace

const CheckInfo* find_check(std::string_view name) {
  for (const auto& row : kChecks)
    if (name == row.name) return &row;
  return nullptr;
}

const std::vector<std::string>& known_check_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const auto& row : kChecks) n.push_back(row.name);
    return n;
  }();
  return names;
}

std::unique_ptr<Check> make_check(const std::string& name, const nlohmann::json& baseline_section) {
  const CheckInfo* row = find_check(name);
  return row ? row->make(baseline_section) : nullptr;
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
