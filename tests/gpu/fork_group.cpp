// fork_group (see fork_group.h).
#include "fork_group.h"

#include <cstdio>
#include <cstdlib>

#include <cuda_runtime_api.h>

#include "tpb/check.h"
#include "tpb/kernels/device.h"
#include "tests/support/rank_group.h"

namespace tpb::test {

namespace {

// Sets every "NAME=value" entry in this process's environment.
void set_environment(const std::vector<std::string>& entries) {
  for (const std::string& entry : entries) {
    const std::size_t eq = entry.find('=');
    TPB_CHECK(eq != std::string::npos && eq > 0, "rank environment entry without a name: \"" << entry << "\"");
    TPB_CHECK(setenv(entry.substr(0, eq).c_str(), entry.c_str() + eq + 1, 1) == 0, "setenv " << entry << " failed");
  }
}

// "[ placement ] world 4 on 1 GPU: shared, 4 ranks per GPU; NCCL transport socket (...)".
void print_placement(const RankPlacement& p) {
  const std::string nccl = p.tp > 1 ? "; NCCL transport " + nccl_transport_text(p) : std::string();
  std::printf("[ placement ] world %d on %d GPU%s: %s, %d rank%s per GPU%s\n", p.tp, p.gpus_used,
              p.gpus_used == 1 ? "" : "s", placement_name(p.placement), p.ranks_per_gpu,
              p.ranks_per_gpu == 1 ? "" : "s", nccl.c_str());
}

}  // namespace

Placement test_placement(int world) {
  const char* forced = std::getenv("TPB_TEST_PLACEMENT");
  if (forced != nullptr && *forced != '\0') return parse_placement(forced, "environment TPB_TEST_PLACEMENT");
  return gpu_count() >= world ? Placement::exclusive : Placement::shared;
}

RankPlacement test_rank_placement(int world) { return place_ranks(test_placement(world), world, gpu_count()); }

std::string placement_skip_reason(int world) {
  const RankPlacement p = test_rank_placement(world);
  if (p.skip_reason.empty()) return {};
  if (gpu_count() == 0) return "no GPU visible";
  return "exclusive placement forced by TPB_TEST_PLACEMENT and too few GPUs: world " + std::to_string(world) +
         " needs " + std::to_string(world) + ", " + std::to_string(gpu_count()) +
         " visible (unset TPB_TEST_PLACEMENT or set it to shared to pack the ranks onto fewer GPUs)";
}

int rank_device() {
  const int device = rank_device_from_env(-1);
  TPB_CHECK(device >= 0, "rank_device: TPB_DEVICE is not set (call it inside a run_ranks body)");
  return device;
}

CommOptions comm_options_for_rank(std::size_t max_bytes, double timeout_s) {
  CommOptions o;
  o.device = rank_device();
  o.max_bytes = max_bytes;
  o.timeout_s = timeout_s;
  return o;
}

int gpu_count() {
  static const int count = value_from_child([] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
    return n;
  });
  return count;
}

std::vector<RankOutcome> run_ranks(int world, const std::function<void(Bootstrap&)>& body, double timeout_s) {
  const RankPlacement placement = test_rank_placement(world);
  TPB_CHECK(placement.skip_reason.empty(),
            "run_ranks: world " << world << " cannot be placed here (the test should have skipped): " << placement.skip_reason);
  // Unique per call: names the bootstrap's group and, on a shared device, every rank's
  // NCCL_HOSTID (two groups of one test process never pass for one another).
  RankGroupOptions options;
  options.group_id = unique_group_id("tpbtest");
  options.barrier_timeout_s = timeout_s;
  options.timeout_s = timeout_s;
  print_placement(placement);
  return outcomes_of(run_forked_ranks(world, options,
                                      [&](Bootstrap& bootstrap) {
                                        // Before the body: CUDA and NCCL read these when they
                                        // first start in this process.
                                        set_environment(rank_environment(placement, bootstrap.rank(), options.group_id));
                                        body(bootstrap);
                                        return exit_code_for_test();
                                      }),
                     timeout_s);
}

}  // namespace tpb::test
