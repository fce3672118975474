// matches_reference: every rank of a case compared its output with the workload's plain
// serial reference and found it bitwise equal. The workload does the comparison (it has the
// inputs); this check makes its answer a verdict. The allreduce workload reports
// metrics.matches_serial_sum (the sum in rank order 0..n-1, fp32, rounded once).
#pragma once

#include "suite/checks/check.h"

namespace tpb {

class MatchesReferenceCheck : public Check {
 public:
  std::string name() const override { return "matches_reference"; }
  std::string group_key(const nlohmann::json& record) const override { return record.value("case_id", ""); }
  CheckResult evaluate(const std::vector<const nlohmann::json*>& group) const override;
};

}  // namespace tpb
