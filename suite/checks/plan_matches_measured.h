// plan_matches_measured: the memory planner's prediction against what the rank measured
// (issue 6). Every term of record.plan.breakdown that a rank also measured
// (record.memory[rank].breakdown: weights, comm_buffers, kv_cache, graph_pool, activations)
// must agree within max(2 % of the planned bytes, 256 MiB). So must the KV pool in tokens,
// term 'kv_pool_tokens': record.plan.max_tokens against record.memory[rank].kv_pool.tokens (the
// pool the GPU engine sized from the same mem_fraction on its cudaMemGetInfo readings), both
// times plan.kv_cell_bytes. A failure names the term, the rank, both numbers and the
// difference. Terms planned but not measured are listed, never passed silently; a record
// with nothing to compare is `skipped`.
#pragma once

#include <cstdint>

#include "suite/checks/check.h"

namespace tpb {

inline constexpr double kPlanRelTolerance = 0.02;
inline constexpr std::int64_t kPlanAbsTolerance = std::int64_t{256} << 20;  // 256 MiB

class PlanMatchesMeasuredCheck : public Check {
 public:
  std::string name() const override { return "plan_matches_measured"; }
  std::string group_key(const nlohmann::json& record) const override;
  CheckResult evaluate(const std::vector<const nlohmann::json*>& group) const override;
};

}  // namespace tpb
