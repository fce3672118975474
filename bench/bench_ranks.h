// Multi-process plumbing for tpb_bench: a GPU-count probe and fork-per-rank with a shared-memory
// Bootstrap (both the rank-group kit's, tests/support/rank_group.h), and the allreduce
// benchmark registration each rank performs.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "reference_engine/comm/bootstrap.h"

namespace tpb::bench {

struct RankContext {
  int rank = 0;                    // this process's rank == its CUDA device
  int world = 1;                   // ranks
  Bootstrap* bootstrap = nullptr;  // shared-memory bootstrap of the forked group
};

int probe_gpu_count();                             // in a forked child; no CUDA in the caller
std::string command_output(const std::string& cmd);  // stdout of a shell command ("" on failure)
// Forks `world` ranks, runs body in each, returns 0 when every rank exited 0.
int run_forked(int world, const std::function<int(RankContext&)>& body);

// Registers allreduce benchmarks for every GPU backend, 1 KiB .. max_bytes, eager and graph.
void register_allreduce_benchmarks(RankContext& ctx, std::size_t max_bytes, const std::string& topology);

}  // namespace tpb::bench
