// deterministic: the same case run twice (the runner repeats each case back to back on the
// same worker processes when this check is listed; the control case also runs twice) must
// produce bitwise-identical outputs on every rank: reductions have a fixed order and use
// no atomics (ARCHITECTURE.md numerics policy).
#pragma once

#include "suite/checks/check.h"

namespace tpb {

class DeterministicCheck : public Check {
 public:
  std::string name() const override { return "deterministic"; }
  std::string group_key(const nlohmann::json& record) const override;
  CheckResult evaluate(const std::vector<const nlohmann::json*>& group) const override;
};

}  // namespace tpb
