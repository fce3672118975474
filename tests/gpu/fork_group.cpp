// fork_group (see fork_group.h).
#include "fork_group.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "tpb/check.h"
#include "tpb/kernels/device.h"

namespace tpb::test {

namespace {

constexpr int kMaxRanks = 16;
constexpr std::size_t kSlotBytes = 4096;   // one rank's all_gather contribution, bytes
constexpr std::size_t kDetailBytes = 2048;  // one rank's failure text, bytes

// Lives in a MAP_SHARED anonymous mapping inherited by every child. Atomics on shared
// memory are address-free when lock-free, which static_asserts below pin.
struct SharedRegion {
  std::atomic<std::uint32_t> arrived;     // ranks inside the current barrier
  std::atomic<std::uint32_t> generation;  // barriers completed
  std::uint32_t length[kMaxRanks];        // bytes in slot[r]
  char slot[kMaxRanks][kSlotBytes];       // all_gather contributions
  char detail[kMaxRanks][kDetailBytes];   // exception text of a failed rank
  int probe_gpu_count;                    // written by the gpu_count probe child
};
static_assert(std::atomic<std::uint32_t>::is_always_lock_free, "process-shared atomics must be lock-free");

class SharedBootstrap final : public Bootstrap {
 public:
  SharedBootstrap(SharedRegion* region, int rank, int size, double timeout_s, std::string group_id)
      : region_(region), rank_(rank), size_(size), timeout_s_(timeout_s), group_id_(std::move(group_id)) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string group_id() const override { return group_id_; }

  void barrier() override {
    const std::uint32_t gen = region_->generation.load(std::memory_order_acquire);
    if (region_->arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == static_cast<std::uint32_t>(size_)) {
      region_->arrived.store(0, std::memory_order_relaxed);
      region_->generation.fetch_add(1, std::memory_order_acq_rel);
      return;
    }
    const auto t0 = std::chrono::steady_clock::now();
    while (region_->generation.load(std::memory_order_acquire) == gen) {
      TPB_CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < timeout_s_,
                "test bootstrap: rank " << rank_ << " waited " << timeout_s_ << " s at a barrier");
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  std::vector<std::string> all_gather(const std::string& mine) override {
    TPB_CHECK(mine.size() <= kSlotBytes, "test bootstrap: all_gather contribution of " << mine.size() << " bytes");
    std::memcpy(region_->slot[rank_], mine.data(), mine.size());
    region_->length[rank_] = static_cast<std::uint32_t>(mine.size());
    barrier();  // everyone wrote
    std::vector<std::string> all(size_);
    for (int r = 0; r < size_; ++r) all[r].assign(region_->slot[r], region_->length[r]);
    barrier();  // everyone read before the next all_gather overwrites
    return all;
  }

 private:
  SharedRegion* region_;
  int rank_, size_;
  double timeout_s_;
  std::string group_id_;
};

SharedRegion* map_region() {
  void* p = mmap(nullptr, sizeof(SharedRegion), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  TPB_CHECK(p != MAP_FAILED, "mmap of the test bootstrap region failed");
  return new (p) SharedRegion{};
}

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
  o.ranks_per_device = ranks_sharing_device();
  return o;
}

int gpu_count() {
  static const int count = [] {
    SharedRegion* region = map_region();
    region->probe_gpu_count = 0;
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
      int n = 0;
      if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
      region->probe_gpu_count = n;
      _exit(0);
    }
    int status = 0;
    if (pid > 0) waitpid(pid, &status, 0);
    const int n = region->probe_gpu_count;
    munmap(region, sizeof(SharedRegion));
    return n;
  }();
  return count;
}

std::vector<RankOutcome> run_ranks(int world, const std::function<void(Bootstrap&)>& body, double timeout_s) {
  TPB_CHECK(world >= 1 && world <= kMaxRanks, "run_ranks: world " << world);
  const RankPlacement placement = test_rank_placement(world);
  TPB_CHECK(placement.skip_reason.empty(),
            "run_ranks: world " << world << " cannot be placed here (the test should have skipped): " << placement.skip_reason);
  // Unique per call: names the bootstrap's group and, on a shared device, every rank's
  // NCCL_HOSTID (two groups of one test process never pass for one another).
  static int calls = 0;
  const std::string group_id = "tpbtest" + std::to_string(getpid()) + "-" + std::to_string(calls++);
  print_placement(placement);
  SharedRegion* region = map_region();
  std::vector<pid_t> pids(world, -1);
  std::fflush(nullptr);  // nothing buffered in the parent gets printed twice
  for (int r = 0; r < world; ++r) {
    const pid_t pid = fork();
    TPB_CHECK(pid >= 0, "fork failed");
    if (pid == 0) {
      int code = 0;
      try {
        // Before the body: CUDA and NCCL read these when they first start in this process.
        set_environment(rank_environment(placement, r, group_id));
        SharedBootstrap bootstrap(region, r, world, timeout_s, group_id);
        body(bootstrap);
        code = ::testing::Test::HasFailure() ? 1 : 0;
      } catch (const std::exception& e) {
        std::snprintf(region->detail[r], kDetailBytes, "exception: %s", e.what());
        std::fprintf(stderr, "[rank %d] exception: %s\n", r, e.what());
        code = 2;
      }
      std::fflush(nullptr);
      _exit(code);  // no gtest teardown, no atexit handlers of the parent's state
    }
    pids[r] = pid;
  }

  std::vector<RankOutcome> outcomes(world);
  const auto t0 = std::chrono::steady_clock::now();
  int remaining = world;
  while (remaining > 0) {
    for (int r = 0; r < world; ++r) {
      if (pids[r] < 0) continue;
      int status = 0;
      const pid_t done = waitpid(pids[r], &status, WNOHANG);
      if (done != pids[r]) continue;
      pids[r] = -1;
      --remaining;
      RankOutcome& o = outcomes[r];
      o.rank = r;
      o.passed = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      if (WIFEXITED(status))
        o.detail = WEXITSTATUS(status) == 0 ? "passed"
                   : WEXITSTATUS(status) == 1 ? "assertion failures (printed above)"
                                              : std::string(region->detail[r]);
      else if (WIFSIGNALED(status))
        o.detail = "killed by signal " + std::to_string(WTERMSIG(status));
    }
    if (remaining > 0 && std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > timeout_s) {
      for (int r = 0; r < world; ++r) {
        if (pids[r] < 0) continue;
        kill(pids[r], SIGKILL);  // only the children this call forked
        waitpid(pids[r], nullptr, 0);
        pids[r] = -1;
        --remaining;
        outcomes[r] = {r, false, "timed out after " + std::to_string(timeout_s) + " s"};
      }
    }
    if (remaining > 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  munmap(region, sizeof(SharedRegion));
  return outcomes;
}

void expect_all_ranks_passed(const std::vector<RankOutcome>& outcomes) {
  for (const RankOutcome& o : outcomes)
    if (!o.passed) ADD_FAILURE() << "rank " << o.rank << " failed: " << o.detail;
}

}  // namespace tpb::test
