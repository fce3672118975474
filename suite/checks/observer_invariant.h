// observer_invariant: cases that differ only in the instrumentation level must compute the
// same thing (ARCHITECTURE.md, "Observer effect"). Against the `off` case, every other
// level must have bitwise-identical digests on every rank, the same plan, and the same
// metrics.alloc_bytes on every rank (suite/instrumentation.h), and — where the workload
// records them (the CPU engine, at every level) — the same sequence of communicator calls
// (op, element count, dtype) and of allocations (bytes, in order) on every rank
// (metrics.sequence.{communicator,allocations}: count, digest, the first entries spelled
// out). A failure names the first call or allocation where the two sides part.
//
// The cost of `timing` (<= kTimingOverheadMax of a step) is judged twice:
// - its own cost, as each rank measured it (metrics.instrumentation.estimated_timing_overhead:
//   marks per step x the cost of one mark / median step): always enforced, because the
//   neighbours' load on a shared machine cannot blur it;
// - the A/B ratio of median step latencies timing / off: fails only when the ratio of
//   per-repetition medians exceeds 1 + kTimingOverheadMax AND a Mann-Whitney U test rejects at
//   alpha = 0.05, and only with >= kTimingOverheadMinRepetitions repetitions on both sides;
//   otherwise reported. The two cases run one after the other, so on a shared 2-core CI
//   machine this measured 0.91-1.69 for identical work (few samples measure the load, not
//   the marks); on a quiet machine with >= 9 repetitions it is the end-to-end evidence.
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
