// plan_matches_measured: the memory planner's prediction against what the rank measured
// (issue 6). Every term of record.plan.breakdown that a rank also measured
// (record.memory[rank].breakdown: weights, comm_buffers, kv_cache, graph_pool, activations)
// must agree within a budget, plan_budget_bytes: max(2 % of the planned bytes, a floor that
// depends on what measured it; 256 MiB for device readings, kPlanHostAbsTolerance for the CPU
// engine's host-allocation readings and its accounting). So must the KV pool in tokens,
// term 'kv_pool_tokens': record.plan.max_tokens against record.memory[rank].kv_pool.tokens (the
// pool the GPU engine sized from the same mem_fraction on its cudaMemGetInfo readings), both
// times plan.kv_cell_bytes. A failure names the term, the rank, both numbers and the
// difference. Terms planned but not measured are listed, never passed silently; a record
// with nothing to compare is `skipped`.
#pragma once

#include <cstdint>
#include <string>

#include "suite/checks/check.h"

namespace tpb {

inline constexpr double kPlanRelTolerance = 0.02;
// Device readings (cudaMemGetInfo, NVML): device-wide or per-process use moves by what the
// CUDA context, NCCL and cuBLAS take around an allocation, hundreds of MiB.
inline constexpr std::int64_t kPlanAbsTolerance = std::int64_t{256} << 20;  // 256 MiB
// Host allocations (glibc mallinfo2 around the CPU engine's weight loading): what the
// allocator adds to the tensors' own bytes. Each tensor is one chunk: a 16 B header and
// rounding to 16 B on the heap, rounding to a 4 KiB page once mmap serves it (>= 128 KiB),
// plus the engine's per-layer bookkeeping. Measured (glibc 2.36, x86-64) on the conformance
// model tiny-dsv3-grouped: 3728 B over the tensors' bytes at TP 1 (868928 B planned) and at
// TP 2 (465472 B), identical on every run; tests/unit/memory_meter_test.cpp measures a page at
// most per tensor. 64 KiB is 16 pages, about 17x that overhead, and 14 % of the smallest
// conformance model's weights (TP 2): any stray allocation of a tensor's size fails it.
inline constexpr std::int64_t kPlanHostAbsTolerance = std::int64_t{64} << 10;  // 64 KiB

// The floor of a term measured by `source` (record.memory[rank].source): kPlanHostAbsTolerance
// for host allocations and the engine's accounting (exact, or the allocator's own count),
// kPlanAbsTolerance for anything else (device readings; an unknown source gets the wider one).
std::int64_t plan_abs_tolerance(const std::string& source);
// The allowed |measured - planned| of one term: max(kPlanRelTolerance x |planned|, the floor).
double plan_budget_bytes(double planned, const std::string& source);

class PlanMatchesMeasuredCheck : public Check {
 public:
  std::string name() const override { return "plan_matches_measured"; }
  std::string group_key(const nlohmann::json& record) const override;
  CheckResult evaluate(const std::vector<const nlohmann::json*>& group) const override;
};

}  // namespace tpb
