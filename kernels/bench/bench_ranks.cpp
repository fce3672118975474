// Fork-per-rank plumbing for tpb_bench (see bench_ranks.h).
#include "kernels/bench/bench_ranks.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include <cuda_runtime_api.h>

#include "tpb/check.h"

namespace tpb::bench {

namespace {

constexpr int kMaxRanks = 16;
constexpr std::size_t kSlotBytes = 4096;  // one all_gather contribution, bytes

struct Shared {
  std::atomic<std::uint32_t> arrived;
  std::atomic<std::uint32_t> generation;
  std::uint32_t length[kMaxRanks];
  char slot[kMaxRanks][kSlotBytes];
  int probe;
};
static_assert(std::atomic<std::uint32_t>::is_always_lock_free, "process-shared atomics must be lock-free");

class SharedBootstrap final : public Bootstrap {
 public:
  SharedBootstrap(Shared* s, int rank, int size) : s_(s), rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string group_id() const override { return "tpb-bench-" + std::to_string(getppid()); }
  void barrier() override {
    const std::uint32_t gen = s_->generation.load(std::memory_order_acquire);
    if (s_->arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == static_cast<std::uint32_t>(size_)) {
      s_->arrived.store(0, std::memory_order_relaxed);
      s_->generation.fetch_add(1, std::memory_order_acq_rel);
      return;
    }
    const auto t0 = std::chrono::steady_clock::now();
    while (s_->generation.load(std::memory_order_acquire) == gen) {
      TPB_CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(300),
                "bench bootstrap: rank " << rank_ << " waited 300 s at a barrier");
      std::this_thread::yield();
    }
  }
  std::vector<std::string> all_gather(const std::string& mine) override {
    TPB_CHECK(mine.size() <= kSlotBytes, "bench bootstrap: contribution too large");
    std::memcpy(s_->slot[rank_], mine.data(), mine.size());
    s_->length[rank_] = static_cast<std::uint32_t>(mine.size());
    barrier();
    std::vector<std::string> all(size_);
    for (int r = 0; r < size_; ++r) all[r].assign(s_->slot[r], s_->length[r]);
    barrier();
    return all;
  }

 private:
  Shared* s_;
  int rank_, size_;
};

Shared* map_shared() {
  void* p = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  TPB_CHECK(p != MAP_FAILED, "mmap failed");
  return new (p) Shared{};
}

}  // namespace

int probe_gpu_count() {
  Shared* s = map_shared();
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
    s->probe = n;
    _exit(0);
  }
  if (pid > 0) waitpid(pid, nullptr, 0);
  const int n = s->probe;
  munmap(s, sizeof(Shared));
  return n;
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
  TPB_CHECK(world <= kMaxRanks, "tpb_bench: at most " << kMaxRanks << " ranks");
  Shared* s = map_shared();
  std::vector<pid_t> pids;
  std::fflush(nullptr);
  for (int r = 0; r < world; ++r) {
    const pid_t pid = fork();
    TPB_CHECK(pid >= 0, "fork failed");
    if (pid == 0) {
      int code = 0;
      try {
        SharedBootstrap bs(s, r, world);
        RankContext ctx{r, world, &bs};
        code = body(ctx);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "tpb_bench rank %d: %s\n", r, e.what());
        code = 1;
      }
      std::fflush(nullptr);
      _exit(code);
    }
    pids.push_back(pid);
  }
  int failed = 0;
  for (int r = 0; r < world; ++r) {
    int status = 0;
    waitpid(pids[r], &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::fprintf(stderr, "tpb_bench: rank %d failed (status %d)\n", r, status);
      failed = 1;
      // A dead rank leaves its peers waiting at a barrier that times out; end them now.
      for (int q = 0; q < world; ++q)
        if (q != r && pids[q] > 0) kill(pids[q], SIGTERM);
    }
  }
  munmap(s, sizeof(Shared));
  return failed;
}

}  // namespace tpb::bench
