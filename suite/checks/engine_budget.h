// Where the numerics policy (docs/numerics.md) lets two records' outputs differ in the last
// bits, and the budget they must then meet: a GPU engine above TP 2, whose NCCL ring rounds
// the partial sums after every hop, so later bf16 activations carry other last bits. There
// the logits must agree within the bf16 engine budget (kTpRelL2Bf16) on every rank, with the
// same greedy tokens. Everywhere else (TP <= 2, the CPU, the allreduce workload) two outputs
// that should agree must be bitwise equal. equal_across_allreduce compares backends this way,
// `tpbench compare --placements` placements.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace tpb {

// True for a GPU engine record above TP 2: its outputs may be held to the bf16 budget.
bool bf16_budget_applies(const nlohmann::json& record);

// "" when `got`'s logits match `ref`'s within the bf16 budget on every rank with the same
// greedy tokens; else why not, naming the sides by `ref_name` and `got_name`. `worst`
// receives the largest rel-L2 seen.
std::string bf16_logits_difference(const nlohmann::json& ref, const nlohmann::json& got, const std::string& ref_name,
                                   const std::string& got_name, double& worst);

}  // namespace tpb
