#include "suite/checks/deterministic.h"

#include "suite/checks/digests.h"

namespace tpb {

std::string DeterministicCheck::group_key(const nlohmann::json& record) const {
  return params_key_without(record, {});
}

CheckResult DeterministicCheck::evaluate(const std::vector<const nlohmann::json*>& group) const {
  std::vector<const nlohmann::json*> ran;
  for (const auto* r : group)
    if (r->value("status", "") == "ok") ran.push_back(r);
  if (ran.size() < 2)
    return {"skipped", "needs the case to have run twice; it ran " + std::to_string(ran.size()) + " time(s)"};
  for (std::size_t i = 1; i < ran.size(); ++i) {
    const std::string diff = digest_difference(*ran.front(), *ran[i]);
    if (!diff.empty())
      return {"fail", "run 1 vs run " + std::to_string(i + 1) + ": " + diff,
              {ran.front()->value("case_id", ""), ran[i]->value("case_id", "")}};
  }
  return {"pass", "identical digests on every rank over " + std::to_string(ran.size()) + " runs"};
}

}  // namespace tpb
