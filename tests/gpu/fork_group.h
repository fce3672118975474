// Runs a test body in one forked process per GPU rank (CUDA IPC needs one process per GPU,
// and a CUDA context must not cross fork, so the parent never touches CUDA). The ranks share
// a MAP_SHARED anonymous region that carries a Bootstrap (all_gather of small strings,
// barrier with a timeout); the parent collects each rank's verdict (exit status) and turns
// failures into GoogleTest failures naming the rank. GoogleTest assertions inside the body
// work as usual: the child prints them and its exit status says whether any fired.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "reference_engine/comm/bootstrap.h"

namespace tpb::test {

// CUDA devices visible to a probe child (0 without a driver). Cached; no CUDA call here.
int gpu_count();

struct RankOutcome {
  int rank = 0;
  bool passed = false;
  std::string detail;  // exit status / signal / exception text / timeout
};

// Forks `world` ranks; rank r runs body(bootstrap) with bootstrap.rank() == r and should use
// CUDA device r. Kills ranks that outlive `timeout_s`.
std::vector<RankOutcome> run_ranks(int world, const std::function<void(Bootstrap&)>& body, double timeout_s = 300);

// ADD_FAILURE for every rank that did not pass.
void expect_all_ranks_passed(const std::vector<RankOutcome>& outcomes);

}  // namespace tpb::test
