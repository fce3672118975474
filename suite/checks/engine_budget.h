// Where the numerics policy (docs/numerics.md) lets two records' outputs differ in the last
// bits, and the budget they must then meet, on every rank with the same greedy tokens:
// - a GPU engine above TP 2: NCCL's ring rounds the partial sums after every hop, so later
//   bf16 activations carry other last bits (the bf16 engine budget, kTpRelL2Bf16);
// - a CPU engine above TP 2 with an mpi side: MPI sums the ranks in its own order (the fp32
//   budget, kTpRelL2Fp32).
// Everywhere else (TP <= 2, the allreduce workload, the CPU over shm) two outputs that should
// agree must be bitwise equal. equal_across_allreduce compares backends this way, `tpbench
// compare --placements` placements.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace tpb {

struct OutputBudget {
  double rel_l2 = 0;       // 0: bitwise only
  const char* name = "";   // "bf16" | "fp32"
  const char* why = "";    // why the last bits may differ
};

// The budget `got` may differ from `ref` within.
OutputBudget output_budget(const nlohmann::json& ref, const nlohmann::json& got);

// "" when `got`'s logits match `ref`'s within `budget` on every rank with the same greedy
// tokens; else why not, naming the sides by `ref_name` and `got_name`. `worst` receives the
// largest rel-L2 seen.
std::string logits_difference(const nlohmann::json& ref, const nlohmann::json& got, const std::string& ref_name,
                              const std::string& got_name, const OutputBudget& budget, double& worst);

}  // namespace tpb
