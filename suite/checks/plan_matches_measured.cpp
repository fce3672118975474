#include "suite/checks/plan_matches_measured.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

namespace tpb {

namespace {

using nlohmann::json;

std::string mib(double bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / double(1 << 20));
  return buf;
}

}  // namespace

std::string PlanMatchesMeasuredCheck::group_key(const json& record) const { return record.value("case_id", ""); }

CheckResult PlanMatchesMeasuredCheck::evaluate(const std::vector<const json*>& group) const {
  if (group.empty()) return {"skipped", "no record"};
  const json& r = *group.front();
  if (r.value("status", "") != "ok") return {"skipped", "the case did not run (" + r.value("status", "?") + ")"};
  const json plan = r.value("plan", json());
  if (!plan.is_object() || !plan.contains("breakdown") || !plan["breakdown"].is_object() || plan["breakdown"].empty())
    return {"skipped", "the record has no plan.breakdown (this workload does not plan memory)"};
  const json memory = r.value("memory", json());
  if (!memory.is_array() || memory.empty()) return {"skipped", "the record has no per-rank memory measurements"};

  std::string compared, unmeasured;
  double worst_share = 0;
  for (const auto& [term, planned_json] : plan["breakdown"].items()) {
    if (!planned_json.is_number()) continue;
    const double planned = planned_json.get<double>();
    const double budget = std::max(kPlanRelTolerance * std::abs(planned), double(kPlanAbsTolerance));
    bool measured_somewhere = false;
    for (std::size_t rank = 0; rank < memory.size(); ++rank) {
      const json& m = memory[rank];
      if (!m.is_object() || !m.contains("breakdown") || !m["breakdown"].contains(term) ||
          !m["breakdown"][term].is_number())
        continue;
      measured_somewhere = true;
      const double measured = m["breakdown"][term].get<double>();
      const double diff = measured - planned;
      const double share = std::abs(diff) / budget;
      if (share > 1.0)
        return {"fail", "plan_matches_measured: term '" + term + "' on rank " + std::to_string(rank) +
                            ": planned " + mib(planned) + ", measured " + mib(measured) + " (" +
                            m.value("source", std::string("?")) + "), difference " + mib(diff) +
                            " exceeds the budget " + mib(budget) + " (max of 2 % and 256 MiB); " +
                            std::to_string(int(std::lround(100 * share))) + " % of the budget"};
      worst_share = std::max(worst_share, share);
      if (rank == 0)
        compared += (compared.empty() ? "" : ", ") + term + " " + mib(planned) + " vs " + mib(measured);
    }
    if (!measured_somewhere) unmeasured += (unmeasured.empty() ? "" : ", ") + term;
  }
  if (compared.empty())
    return {"skipped", "no planned term was measured (planned: " + unmeasured + ")"};
  char share[64];
  std::snprintf(share, sizeof share, "; worst %.1f %% of the budget", 100 * worst_share);
  return {"pass", "planned vs measured on rank 0: " + compared + share +
                      (unmeasured.empty() ? std::string() : "; not measured: " + unmeasured)};
}

}  // namespace tpb
