// equal_across_allreduce: cases that differ only in the allreduce backend must produce
// bitwise-identical outputs on every rank (ARCHITECTURE.md numerics policy: every backend
// sums in fp32 in rank order and rounds once). Compares output digests.
#pragma once

#include "suite/checks/check.h"

namespace tpb {

class EqualAcrossAllreduceCheck : public Check {
 public:
  std::string name() const override { return "equal_across_allreduce"; }
  std::string group_key(const nlohmann::json& record) const override;
  CheckResult evaluate(const std::vector<const nlohmann::json*>& group) const override;
};

}  // namespace tpb
