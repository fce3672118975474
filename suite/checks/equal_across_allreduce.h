// equal_across_allreduce: cases that differ only in the allreduce backend must produce
// bitwise-identical outputs on every rank (ARCHITECTURE.md numerics policy: every backend
// sums in fp32 in rank order and rounds once). Compares output digests.
//
// One exception, from the same policy: above TP 2 NCCL's ring rounds the partial sums to the
// dtype after every hop, while the custom kernels sum in fp32 and round once, so the two
// agree within TP - 1 ulps per allreduce, not bitwise, and those bits move a GPU engine's
// later bf16 activations. For GPU engine cases above TP 2 whose digests differ, the logits
// must agree within the bf16 engine budget (kTpRelL2Bf16) on every rank with the same greedy
// tokens, and the check says which pairs passed that way. Everywhere else (TP <= 2, the CPU,
// the allreduce workload, whose inputs above 2 ranks are integers) it stays bitwise, with one
// more exception: MPI sums in its own order (reference_engine/comm/mpi/mpi_communicator.h),
// so a CPU engine case above TP 2 with an mpi side is held to the fp32 budget (kTpRelL2Fp32)
// with the same greedy tokens.
//
// Sides are named and told apart by what RAN (record.allreduce_ran, suite/measure/allreduce_ran.h),
// not by what was requested: a case whose requested backend carried none of its allreduces
// (status "fallback": "custom-oneshot requested, nccl ran (no peer access)") fails the check,
// naming it and the backends it was to be compared with, because comparing it would compare
// the other backend with itself. A side that ran partly elsewhere is compared and named so
// ("custom-oneshot (ran custom-oneshot+nccl)"); a group whose sides all ran the same backends
// has nothing to compare and is skipped with the reason.
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
