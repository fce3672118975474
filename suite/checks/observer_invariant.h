// observer_invariant: cases that differ only in the instrumentation level must compute the
// same thing (ARCHITECTURE.md, "Observer effect"). Against the `off` case, every other
// level must have bitwise-identical digests on every rank, the same plan, and the same
// metrics.alloc_bytes on every rank (suite/instrumentation.h).
//
// The cost of `timing` is reported as the ratio of median step latencies timing / off. It
// fails the check only when it exceeds 1 + kTimingOverheadMax AND a Mann-Whitney U test over
// the per-repetition medians rejects at alpha = 0.05, and only when both cases have at least
// kTimingOverheadMinRepetitions repetitions: the two cases run one after the other, so on a
// shared CI machine a few samples would mostly measure the neighbours' load.
#pragma once

#include "suite/checks/check.h"

namespace tpb {

class ObserverInvariantCheck : public Check {
 public:
  std::string name() const override { return "observer_invariant"; }
  std::string group_key(const nlohmann::json& record) const override;
  CheckResult evaluate(const std::vector<const nlohmann::json*>& group) const override;
};

}  // namespace tpb
