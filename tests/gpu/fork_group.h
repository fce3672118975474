// Runs a test body in one forked process per rank, placed on the GPUs (CUDA IPC needs one
// process per rank, and a CUDA context must not cross fork, so the parent never touches CUDA).
// The forking and the Bootstrap between the ranks are the rank-group kit's
// (tests/support/rank_group.h); the verdicts, one per rank, are tests/support/test_ranks.h's.
//
// Placement (suite/launch/placement.h): the ranks run one per GPU (exclusive) or packed onto the
// visible GPUs (shared: rank r on device r / ranks_per_gpu), so a machine with one GPU runs
// every TP >= 2 test. TPB_TEST_PLACEMENT=exclusive|shared forces one; unset, a group runs
// exclusive where there are enough GPUs and shared otherwise. Each child gets its place in its
// environment (TPB_DEVICE, TPB_RANKS_PER_GPU, TPB_PLACEMENT and, on a shared device, an
// NCCL_HOSTID of its own) before the body runs; the body reads it back with rank_device()
// and comm_options_for_rank().
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "reference_engine/comm/bootstrap.h"
#include "reference_engine/comm/factory.h"
#include "suite/launch/placement.h"
#include "tests/support/test_ranks.h"

namespace tpb::test {

// CUDA devices visible to a probe child (0 without a driver). Cached; no CUDA call here.
int gpu_count();

// TPB_TEST_PLACEMENT if set (a value other than exclusive|shared is an InputError), else
// exclusive where gpu_count() >= world, else shared.
Placement test_placement(int world);
// place_ranks(test_placement(world), world, gpu_count()): what run_ranks(world, ...) uses.
RankPlacement test_rank_placement(int world);
// Empty when run_ranks(world, ...) can run here; else why not: no GPU is visible, or
// exclusive placement is forced (TPB_TEST_PLACEMENT) and there are too few GPUs.
std::string placement_skip_reason(int world);

// GTEST_SKIP with the reason where a group of `world` ranks cannot be placed here.
#define TPB_SKIP_UNLESS_PLACEABLE(world)                                            \
  do {                                                                              \
    const std::string tpb_skip_reason_ = ::tpb::test::placement_skip_reason(world); \
    if (!tpb_skip_reason_.empty()) GTEST_SKIP() << tpb_skip_reason_;                \
  } while (0)

// In a rank (a run_ranks body): this process's CUDA ordinal (TPB_DEVICE).
int rank_device();
// In a rank: options for make_communicator and the communicator constructors on this rank's
// device (the custom backend counts the ranks sharing a GPU from their UUIDs).
CommOptions comm_options_for_rank(std::size_t max_bytes = 4u << 20, double timeout_s = 60);

// Forks `world` ranks placed by test_rank_placement(world) (which must have no skip reason);
// rank r runs body(bootstrap) with bootstrap.rank() == r, its place in its environment. Prints
// one "[ placement ]" line saying how the group runs. Kills ranks that outlive `timeout_s`.
std::vector<RankOutcome> run_ranks(int world, const std::function<void(Bootstrap&)>& body, double timeout_s = 300);

}  // namespace tpb::test
