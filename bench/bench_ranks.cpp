// Fork-per-rank plumbing for tpb_bench (see bench_ranks.h).
#include "bench/bench_ranks.h"

#include <unistd.h>

#include <cstdio>

#include <cuda_runtime_api.h>

#include "tests/support/rank_group.h"
#include "tpb/check.h"

namespace tpb::bench {

int probe_gpu_count() {
  return value_from_child([] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
    return n;
  });
}

std::string command_output(const std::string& cmd) {
  std::string out;
  FILE* f = popen(cmd.c_str(), "r");
  if (f == nullptr) return out;
  char buf[4096];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  pclose(f);
  return out;
}

int run_forked(int world, const std::function<int(RankContext&)>& body) {
  if (world < 1) {
    std::fprintf(stderr, "tpb_bench: no GPU visible; nothing to benchmark\n");
    return 0;
  }
  TPB_CHECK(world <= 16, "tpb_bench: at most 16 ranks");
  RankGroupOptions options;
  options.group_id = "tpb-bench-" + std::to_string(getpid());
  options.barrier_timeout_s = 300;
  options.wait = BarrierWait::spin;  // the barrier before each timed loop lines the ranks up
  options.end_peers_on_failure = true;
  const std::vector<RankExit> exits = run_forked_ranks(world, options, [&](Bootstrap& bootstrap) {
    try {
      RankContext ctx{bootstrap.rank(), world, &bootstrap};
      return body(ctx);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "tpb_bench rank %d: %s\n", bootstrap.rank(), e.what());
      return 1;
    }
  });
  int failed = 0;
  for (const RankExit& e : exits) {
    if (!e.exited || e.code != 0) {
      std::fprintf(stderr, "tpb_bench: rank %d failed (status %d)\n", e.rank, e.wait_status);
      failed = 1;
    }
  }
  return failed;
}

}  // namespace tpb::bench
