// The rank-group kit (rank_group.h) under GoogleTest: a group's verdict as one outcome per
// rank, and rank threads for host-memory backends. GoogleTest assertions inside a body work
// as usual: a forked rank prints them and its exit status says whether any fired
// (tests/gpu/fork_group.h); a rank thread's are the running test's own.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "tests/support/rank_group.h"

namespace tpb::test {

struct RankOutcome {
  int rank = 0;
  bool passed = false;
  std::string detail;  // exit status / signal / exception text / timeout
};

// A forked rank's exit code: 0 passed, 1 GoogleTest failures (printed by the rank), 2 an
// exception (run_forked_ranks).
inline int exit_code_for_test() { return ::testing::Test::HasFailure() ? 1 : 0; }

inline std::vector<RankOutcome> outcomes_of(const std::vector<RankExit>& exits, double timeout_s) {
  std::vector<RankOutcome> outcomes;
  for (const RankExit& e : exits) {
    RankOutcome o{e.rank, e.passed(), "passed"};
    if (e.timed_out)
      o.detail = "timed out after " + std::to_string(timeout_s) + " s";
    else if (!e.exception.empty())
      o.detail = "exception: " + e.exception;
    else if (e.exited && e.code == 1)
      o.detail = "assertion failures (printed above)";
    else if (e.exited && e.code != 0)
      o.detail = "exit status " + std::to_string(e.code);
    else if (e.signal != 0)
      o.detail = "killed by signal " + std::to_string(e.signal);
    outcomes.push_back(o);
  }
  return outcomes;
}

// Runs body on `world` threads sharing the kit's bootstrap (group id "tpbtest<pid>-<n>").
// A rank whose body throws fails with the exception's text; its peers see it as a rank that
// never arrives (their collectives time out).
inline std::vector<RankOutcome> run_thread_ranks(int world, const std::function<void(Bootstrap&)>& body,
                                                 double barrier_timeout_s = 300) {
  RankGroupOptions options;
  options.group_id = unique_group_id("tpbtest");
  options.barrier_timeout_s = barrier_timeout_s;
  return outcomes_of(::tpb::run_thread_ranks(world, options, body), 0);
}

// ADD_FAILURE for every rank that did not pass.
inline void expect_all_ranks_passed(const std::vector<RankOutcome>& outcomes) {
  for (const RankOutcome& o : outcomes)
    if (!o.passed) ADD_FAILURE() << "rank " << o.rank << " failed: " << o.detail;
}

}  // namespace tpb::test
