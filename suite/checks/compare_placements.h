// Exclusive against shared placement of one scenario (`tpbench compare --placements A B`,
// issue 21): placement decides where ranks run, never what they compute, so the same case in
// both placements must give the same outputs.
//
// Pairing: shared placement joins a case's id (suite/scenario/sweep.h), so the two runs share no id.
// Cases pair by the rest of what makes the id: workload, model, device, params and role
// (placement_free_identity). Only ok records pair; the last record of a case counts, as
// everywhere. A case ok on one side only (TP 8 skipped in exclusive placement on 2 GPUs) is
// listed as not paired, with what the other side holds.
//
// Digests, per pair, as the numerics policy (docs/numerics.md) holds backends to each other:
//   TP <= 2, the CPU, the allreduce workload: bitwise, every rank and output.
//   a GPU engine above TP 2: bitwise where the digests agree; else the logits within the bf16
//     budget on every rank with the same greedy tokens (suite/checks/engine_budget.h): NCCL
//     over sockets (shared) and over NVLink (exclusive) may take other algorithms, whose
//     per-hop roundings differ.
// Step times: latency.p50 per pair; and per placement, for every group of sweep cases that
// differ only in the backend and hold an nccl case, each other backend's p50 relative to NCCL's.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tpb {

// The canonical JSON of workload, model, device, params and role: a case's identity without
// its placement.
std::string placement_free_identity(const nlohmann::json& record);
// record.placement.placement, or "none" (CPU records carry no placement, nor do GPU cases
// skipped before they were placed).
std::string placement_of(const nlohmann::json& record);

struct PlacementPair {
  std::string label;              // the case's label (labels never name the placement)
  std::string backend;            // params.allreduce ("" without one)
  long long tp = 1;               // params.tp
  std::string case_id_a, case_id_b;
  double step_us_a = -1, step_us_b = -1;  // latency.p50 (µs); -1 when not recorded
  std::string rule;               // "bitwise" or "bitwise, else bf16 budget"
  std::string verdict;            // "equal" | "within-budget" | "mismatch"
  std::string detail;             // the first difference (mismatch), the rel-L2 (within-budget)
};

// One backend against NCCL in one group of cases that differ only in the backend.
struct CustomVsNccl {
  std::string group;              // the NCCL case's label without its backend
  std::string placement;          // the side's placement
  std::string backend;            // the other backend
  double nccl_step_us = 0, step_us = 0;  // latency.p50 (µs)
  double relative = 0;            // step_us / nccl_step_us - 1 (negative: faster than NCCL)
};

struct PlacementComparison {
  std::string placement_a, placement_b;
  std::vector<PlacementPair> pairs;         // in A's file order
  std::vector<std::string> not_paired;      // "<label>: <placement> only (<other>: skipped: why)"
  std::vector<CustomVsNccl> custom_vs_nccl; // A's groups first, then B's
  int mismatches = 0;
};

// Pairs A's records with B's. Throws InputError when the comparison would say nothing about
// placement: a side holding records of two placements, both sides of one placement, or no
// case ok on both sides (the message says which; `a_name`, `b_name` name the sides).
PlacementComparison compare_placements(const std::vector<nlohmann::json>& a, const std::vector<nlohmann::json>& b,
                                       const std::string& a_name, const std::string& b_name);

nlohmann::json to_json(const PlacementComparison& comparison);

}  // namespace tpb
