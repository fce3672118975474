// Check: a verdict over the records of related cases (ARCHITECTURE.md, "How one case
// flows"). A check says which cases belong together (group_key) and judges one complete
// group; the runner does the grouping, so each check is only its rule.
//
// Status values: "pass", "fail", "skipped" (the group cannot be judged, e.g. only one
// backend ran; the detail says why) and "not-implemented" (a known check whose issue has
// not landed: recorded, never counted as a pass).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace tpb {

struct CheckResult {
  std::string status;  // "pass" | "fail" | "skipped" | "not-implemented"
  std::string detail;  // what was compared, and on failure where the first difference is
  // A failure whose two records' outputs part names them (case ids), with the rel-L2 budget
  // they were held to (0: bitwise), so that the runner can rerun both at the digests level
  // and say where they part (suite/checks/divergence.h).
  std::vector<std::string> diverging = {};
  double diverging_budget = 0;
  nlohmann::json to_json() const { return {{"status", status}, {"detail", detail}}; }
};

class Check {
 public:
  virtual ~Check() = default;
  virtual std::string name() const = 0;
  // Cases with equal keys are judged together; "" = this check does not apply to the case.
  // `record` is a results record (ARCHITECTURE.md): params, status, digests, ...
  virtual std::string group_key(const nlohmann::json& record) const = 0;
  // Judges one group (every planned case of it has a record), in run order.
  virtual CheckResult evaluate(const std::vector<const nlohmann::json*>& group) const = 0;
};

// The check table (check.cpp): one row per check a scenario may list, with what the rest of
// the suite must do for it. Scenario validation accepts the names, the sweep adds the cases a
// check needs, the runner builds each check and knows which failures it can localize.
struct CheckInfo {
  const char* name;     // as scenarios and results records spell it
  const char* summary;  // what it compares, one line
  bool needs_repeat;    // the sweep follows every case with a repeat of itself (role "repeat")
  bool localizes;       // a failure names two records whose outputs part (CheckResult::diverging):
                        // the runner reruns both at the digests level and says where they part
  // Builds the check; `baseline_section` is the scenario's "baseline" object (tolerances),
  // for checks that judge latency.
  std::unique_ptr<Check> (*make)(const nlohmann::json& baseline_section);
};
// The row named `name`, or nullptr.
const CheckInfo* find_check(std::string_view name);

// Every check name a scenario may list, in table order.
const std::vector<std::string>& known_check_names();
// The check of that name (its row's make); nullptr for unknown names.
std::unique_ptr<Check> make_check(const std::string& name,
                                  const nlohmann::json& baseline_section = nlohmann::json::object());

// Canonical text of the record's params with the named keys removed; shared by checks
// that group "cases differing only in X".
std::string params_key_without(const nlohmann::json& record, const std::vector<std::string>& drop);

}  // namespace tpb
