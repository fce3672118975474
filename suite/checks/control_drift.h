// control_drift: every sweep runs its control case first and last; if the machine changed
// in between (clocks, a noisy neighbour, thermal state), the control's latency moves or its
// output changes, and nothing else in the run can be trusted against a baseline.
// Drift = the median latency moved beyond the latency tolerance AND a Mann–Whitney U test
// rejects (the baseline rule, applied to the run with itself), or the digests differ.
#pragma once

#include "suite/records/baseline.h"
#include "suite/checks/check.h"

namespace tpb {

class ControlDriftCheck : public Check {
 public:
  explicit ControlDriftCheck(BaselineTolerances tol = {}) : tol_(tol) {}
  std::string name() const override { return "control_drift"; }
  std::string group_key(const nlohmann::json& record) const override;
  CheckResult evaluate(const std::vector<const nlohmann::json*>& group) const override;

 private:
  BaselineTolerances tol_;
};

// The verdict on a control run at the start vs the same case at the end.
CheckResult control_drift_verdict(const nlohmann::json& start, const nlohmann::json& end,
                                  const BaselineTolerances& tol);

}  // namespace tpb
