#include "suite/checks/plan_matches_measured.h"

#include "reference_engine/memory/meter.h"

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

// MiB, and the exact bytes below 1 GiB (a CPU model's terms are KB to MB: 0.1 MiB steps
// would hide the difference the check is about).
std::string bytes_text(double bytes) {
  if (std::abs(bytes) >= double(1 << 30)) return mib(bytes);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%s (%.0f B)", mib(bytes).c_str(), bytes);
  return buf;
}

}  // namespace

std::int64_t plan_abs_tolerance(const std::string& source) {
  return source.rfind(kHostAllocationSource, 0) == 0 || source == "accounting" ? kPlanHostAbsTolerance
                                                                                : kPlanAbsTolerance;
}

double plan_budget_bytes(double planned, const std::string& source) {
  return std::max(kPlanRelTolerance * std::abs(planned), double(plan_abs_tolerance(source)));
}

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

  std::string compared, unmeasured, failure;
  double worst_share = 0;
  // One term on one rank, in bytes; `planned_text`/`measured_text` describe the two sides.
  auto compare = [&](const std::string& term, std::size_t rank, double planned, double measured,
                     const std::string& planned_text, const std::string& measured_text, const std::string& source) {
    const double budget = plan_budget_bytes(planned, source);
    const double diff = measured - planned;
    const double share = std::abs(diff) / budget;
    if (share > 1.0) {
      failure = "plan_matches_measured: term '" + term + "' on rank " + std::to_string(rank) + ": planned " +
                planned_text + ", measured " + measured_text + ", difference " + bytes_text(diff) + " exceeds the budget " +
                bytes_text(budget) + " (max of 2 % and " + bytes_text(double(plan_abs_tolerance(source))) + "); " + std::to_string(int(std::lround(100 * share))) +
                " % of the budget";
      return false;
    }
    worst_share = std::max(worst_share, share);
    if (rank == 0) compared += (compared.empty() ? "" : ", ") + term + " " + planned_text + " vs " + measured_text;
    return true;
  };

  for (const auto& [term, planned_json] : plan["breakdown"].items()) {
    if (!planned_json.is_number()) continue;
    const double planned = planned_json.get<double>();
    bool measured_somewhere = false;
    for (std::size_t rank = 0; rank < memory.size(); ++rank) {
      const json& m = memory[rank];
      if (!m.is_object() || !m.contains("breakdown") || !m["breakdown"].contains(term) ||
          !m["breakdown"][term].is_number())
        continue;
      measured_somewhere = true;
      const double measured = m["breakdown"][term].get<double>();
      const std::string source = m.value("source", std::string("?"));
      if (!compare(term, rank, planned, measured, bytes_text(planned), bytes_text(measured) + " (" + source + ")", source))
        return {"fail", failure};
    }
    if (!measured_somewhere) unmeasured += (unmeasured.empty() ? "" : ", ") + term;
  }

  // The KV pool in tokens: the plan's max_tokens against the pool each rank sized with the
  // same formula on its own readings (memory[rank].kv_pool, a mem_fraction > 0 only), in
  // bytes (x kv_cell_bytes) against the same budget.
  if (plan.contains("max_tokens") && plan["max_tokens"].is_number() && plan.contains("kv_cell_bytes") &&
      plan["kv_cell_bytes"].is_number()) {
    const double cell = plan["kv_cell_bytes"].get<double>(), planned_tokens = plan["max_tokens"].get<double>();
    bool measured_somewhere = false;
    for (std::size_t rank = 0; rank < memory.size(); ++rank) {
      const json pool = memory[rank].is_object() ? memory[rank].value("kv_pool", json()) : json();
      if (!pool.is_object() || !pool.contains("tokens") || !pool["tokens"].is_number() ||
          pool.value("mem_fraction", 0.0) <= 0)
        continue;
      measured_somewhere = true;
      const double f_measured = pool["mem_fraction"].get<double>(), f_planned = plan.value("mem_fraction", -1.0);
      if (std::abs(f_measured - f_planned) > 1e-12)
        return {"fail", "plan_matches_measured: term 'kv_pool_tokens' on rank " + std::to_string(rank) +
                            ": planned at mem_fraction " + std::to_string(f_planned) +
                            ", but the engine sized its pool at " + std::to_string(f_measured)};
      const double tokens = pool["tokens"].get<double>();
      char planned_text[96], measured_text[224];
      std::snprintf(planned_text, sizeof planned_text, "%.0f tokens (%s)", planned_tokens,
                    mib(planned_tokens * cell).c_str());
      std::snprintf(measured_text, sizeof measured_text, "%.0f tokens (%s; total %s, avail %s as the rank read them)", tokens,
                    mib(tokens * cell).c_str(), mib(pool.value("total_bytes", 0.0)).c_str(),
                    mib(pool.value("avail_bytes", 0.0)).c_str());
      if (!compare("kv_pool_tokens", rank, planned_tokens * cell, tokens * cell, planned_text, measured_text,
                   memory[rank].value("source", std::string("?"))))
        return {"fail", failure};
    }
    if (!measured_somewhere) unmeasured += std::string(unmeasured.empty() ? "" : ", ") + "kv_pool_tokens";
  }

  if (compared.empty())
    return {"skipped", "no planned term was measured (planned: " + unmeasured + ")"};
  char share[64];
  std::snprintf(share, sizeof share, "; worst %.1f %% of the budget", 100 * worst_share);
  return {"pass", "planned vs measured on rank 0: " + compared + share +
                      (unmeasured.empty() ? std::string() : "; not measured: " + unmeasured)};
}

}  // namespace tpb
