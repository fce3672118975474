// The rank-group kit: runs one body on every rank of a group of `world` ranks, which are
// forked processes (CUDA IPC needs one process per rank, and a CUDA context must not cross
// fork) or threads of this process (host-memory backends), with a Bootstrap between them.
// Tests (tests/gpu/fork_group.h, tests/support/test_ranks.h) and tpb_bench (bench/) share it.
//
// The bootstrap is one region of plain memory holding a barrier (an arrival counter and a
// generation) and one all_gather slot per rank: a MAP_SHARED anonymous mapping that the forked
// children inherit, or an ordinary allocation that the threads share. Atomics on shared memory
// are address-free when lock-free, which rank_group.cpp pins with a static_assert.
// No CUDA and no GoogleTest here: a caller that needs either passes it in through the body.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "reference_engine/comm/bootstrap.h"

namespace tpb {

// How a rank waits at a barrier of the kit's bootstrap.
enum class BarrierWait {
  sleep,  // polls every 50 us: ranks may outnumber the cores (tests on a shared GPU or a small CPU)
  spin,   // yields between polls: ranks leave together, as a benchmark's timed loop needs
};

struct RankGroupOptions {
  std::string group_id;               // what Bootstrap::group_id() returns on every rank
  double barrier_timeout_s = 300;     // a rank that waits longer at a barrier throws tpb::Error
  BarrierWait wait = BarrierWait::sleep;
  double timeout_s = 0;               // forked: ranks still running after this many seconds are
                                      // killed (SIGKILL); 0: no limit
  bool end_peers_on_failure = false;  // forked: SIGTERM the running ranks once one has failed (its
                                      // peers would wait at a barrier until it times out)
};

// How one rank ended.
struct RankExit {
  int rank = 0;
  bool exited = false;     // forked: exited normally (not by a signal, not killed on timeout);
                           // threads: always
  int code = 0;            // forked: its exit code (the body's return value; 2 if it threw)
  int wait_status = 0;     // forked: waitpid's status, for messages that print it raw
  int signal = 0;          // forked: the signal that ended it, 0 if none
  bool timed_out = false;  // forked: killed after RankGroupOptions::timeout_s
  std::string exception;   // what() of an exception that left the body ("" if none)
  bool passed() const { return exited && code == 0 && !timed_out && exception.empty(); }
};

// Forks `world` ranks (1..16); rank r runs body(bootstrap) with bootstrap.rank() == r and exits
// with the body's return value. An exception that leaves the body exits with 2, its what() in
// RankExit::exception and "[rank r] exception: ..." on stderr. Nothing buffered in the parent
// is printed twice, and the children skip the parent's atexit handlers. Returns in rank order.
std::vector<RankExit> run_forked_ranks(int world, const RankGroupOptions& options,
                                       const std::function<int(Bootstrap&)>& body);

// Runs body(bootstrap) on `world` threads (1..16) of this process and joins them; an
// exception that leaves a rank's body is caught and returned in RankExit::exception.
// RankGroupOptions::timeout_s and end_peers_on_failure do not apply to threads.
std::vector<RankExit> run_thread_ranks(int world, const RankGroupOptions& options,
                                       const std::function<void(Bootstrap&)>& body);

// fn() in a forked child, its value returned through shared memory; `if_child_failed` when the
// child could not run or died first. For probes the parent must not run itself (a CUDA device
// count creates no CUDA context in the caller this way).
int value_from_child(const std::function<int()>& fn, int if_child_failed = 0);

// prefix + this process's id + "-" + a counter: unique per call within a machine's processes.
std::string unique_group_id(const std::string& prefix);

}  // namespace tpb
