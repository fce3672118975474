// tp_invariant: engine cases that differ only in TP (and the allreduce backend) must give
// the same logits as the TP=1 case within the numerics policy (ARCHITECTURE.md): fp32
// rel-L2 <= kTpRelL2Fp32, bf16 <= kTpRelL2Bf16 (suite/checks/tolerance.h), the same greedy
// token in every complete row of the sample, and no NaN/Inf anywhere.
//
// Reads record.outputs: one object per rank, each with "logits" (the workload's fp32 sample,
// suite/workloads/engine_workload.h; a JSON null stands for a NaN/Inf, which JSON cannot
// hold), and metrics[rank].vocab_size / .compute_dtype ("f32" | "bf16"; without it the
// device decides: cpu = f32, else bf16).
#pragma once

#include "suite/checks/check.h"

namespace tpb {

class TpInvariantCheck : public Check {
 public:
  std::string name() const override { return "tp_invariant"; }
  std::string group_key(const nlohmann::json& record) const override;
  CheckResult evaluate(const std::vector<const nlohmann::json*>& group) const override;
};

}  // namespace tpb
