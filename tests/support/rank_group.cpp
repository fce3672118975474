// The rank-group kit (see rank_group.h).
#include "tests/support/rank_group.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <thread>
#include <utility>

#include "tpb/check.h"

namespace tpb {

namespace {

constexpr int kMaxRanks = 16;
constexpr std::size_t kSlotBytes = 4096;   // one rank's all_gather contribution, bytes
constexpr std::size_t kDetailBytes = 2048;  // one forked rank's exception text, bytes

// Shared by the ranks of one group: a MAP_SHARED mapping (forked ranks) or a heap object
// (threads).
struct SharedRegion {
  std::atomic<std::uint32_t> arrived;     // ranks inside the current barrier
  std::atomic<std::uint32_t> generation;  // barriers completed
  std::uint32_t length[kMaxRanks];        // bytes in slot[r]
  char slot[kMaxRanks][kSlotBytes];       // all_gather contributions
  char detail[kMaxRanks][kDetailBytes];   // exception text of a failed forked rank
  int child_value;                        // written by value_from_child's child
};
static_assert(std::atomic<std::uint32_t>::is_always_lock_free, "process-shared atomics must be lock-free");

class RegionBootstrap final : public Bootstrap {
 public:
  RegionBootstrap(SharedRegion* region, int rank, int size, const RankGroupOptions& options)
      : region_(region), rank_(rank), size_(size), options_(options) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string group_id() const override { return options_.group_id; }

  void barrier() override {
    const std::uint32_t gen = region_->generation.load(std::memory_order_acquire);
    if (region_->arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == static_cast<std::uint32_t>(size_)) {
      region_->arrived.store(0, std::memory_order_relaxed);
      region_->generation.fetch_add(1, std::memory_order_acq_rel);
      return;
    }
    const auto t0 = std::chrono::steady_clock::now();
    while (region_->generation.load(std::memory_order_acquire) == gen) {
      TPB_CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < options_.barrier_timeout_s,
                "rank-group bootstrap: rank " << rank_ << " waited " << options_.barrier_timeout_s << " s at a barrier");
      if (options_.wait == BarrierWait::spin)
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  std::vector<std::string> all_gather(const std::string& mine) override {
    TPB_CHECK(mine.size() <= kSlotBytes,
              "rank-group bootstrap: all_gather contribution of " << mine.size() << " bytes (at most " << kSlotBytes << ")");
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
  const RankGroupOptions& options_;
};

SharedRegion* map_region() {
  void* p = mmap(nullptr, sizeof(SharedRegion), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  TPB_CHECK(p != MAP_FAILED, "mmap of the rank-group bootstrap region failed");
  return new (p) SharedRegion{};
}

void unmap_region(SharedRegion* region) { munmap(region, sizeof(SharedRegion)); }

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

std::vector<RankExit> run_forked_ranks(int world, const RankGroupOptions& options,
                                       const std::function<int(Bootstrap&)>& body) {
  TPB_CHECK(world >= 1 && world <= kMaxRanks, "run_forked_ranks: world " << world << " (1.." << kMaxRanks << ")");
  SharedRegion* region = map_region();
  std::vector<pid_t> pids(world, -1);
  std::fflush(nullptr);  // nothing buffered in the parent gets printed twice
  for (int r = 0; r < world; ++r) {
    const pid_t pid = fork();
    TPB_CHECK(pid >= 0, "fork failed");
    if (pid == 0) {
      int code = 0;
      try {
        RegionBootstrap bootstrap(region, r, world, options);
        code = body(bootstrap);
      } catch (const std::exception& e) {
        std::snprintf(region->detail[r], kDetailBytes, "%s", e.what());
        std::fprintf(stderr, "[rank %d] exception: %s\n", r, e.what());
        code = 2;
      }
      std::fflush(nullptr);
      _exit(code);  // no atexit handlers of the parent's state (nor GoogleTest's teardown)
    }
    pids[r] = pid;
  }

  std::vector<RankExit> exits(world);
  const auto t0 = std::chrono::steady_clock::now();
  int remaining = world;
  bool peers_ended = false;
  while (remaining > 0) {
    bool failed = false;
    for (int r = 0; r < world; ++r) {
      if (pids[r] < 0) continue;
      int status = 0;
      if (waitpid(pids[r], &status, WNOHANG) != pids[r]) continue;
      pids[r] = -1;
      --remaining;
      RankExit& e = exits[r];
      e.rank = r;
      e.wait_status = status;
      e.exited = WIFEXITED(status);
      e.code = e.exited ? WEXITSTATUS(status) : 0;
      e.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
      if (e.exited && e.code == 2) e.exception = region->detail[r];
      failed = failed || !e.passed();
    }
    if (failed && options.end_peers_on_failure && !peers_ended) {
      peers_ended = true;
      for (int r = 0; r < world; ++r)
        if (pids[r] > 0) kill(pids[r], SIGTERM);  // only the children this call forked and not yet reaped
    }
    if (remaining > 0 && options.timeout_s > 0 && seconds_since(t0) > options.timeout_s) {
      for (int r = 0; r < world; ++r) {
        if (pids[r] < 0) continue;
        kill(pids[r], SIGKILL);
        int status = 0;
        waitpid(pids[r], &status, 0);
        pids[r] = -1;
        --remaining;
        exits[r] = RankExit{};
        exits[r].rank = r;
        exits[r].wait_status = status;
        exits[r].signal = SIGKILL;
        exits[r].timed_out = true;
      }
    }
    if (remaining > 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  unmap_region(region);
  return exits;
}

std::vector<RankExit> run_thread_ranks(int world, const RankGroupOptions& options,
                                       const std::function<void(Bootstrap&)>& body) {
  TPB_CHECK(world >= 1 && world <= kMaxRanks, "run_thread_ranks: world " << world << " (1.." << kMaxRanks << ")");
  const auto region = std::make_unique<SharedRegion>();
  std::vector<RankExit> exits(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      RankExit& e = exits[r];
      e.rank = r;
      e.exited = true;
      try {
        RegionBootstrap bootstrap(region.get(), r, world, options);
        body(bootstrap);
      } catch (const std::exception& ex) {
        e.exception = ex.what();
      } catch (...) {
        e.exception = "an exception not derived from std::exception";
      }
    });
  }
  for (std::thread& t : threads) t.join();
  return exits;
}

int value_from_child(const std::function<int()>& fn, int if_child_failed) {
  SharedRegion* region = map_region();
  region->child_value = if_child_failed;
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    region->child_value = fn();
    _exit(0);
  }
  if (pid > 0) waitpid(pid, nullptr, 0);
  const int value = region->child_value;
  unmap_region(region);
  return value;
}

std::string unique_group_id(const std::string& prefix) {
  static std::atomic<int> calls{0};
  return prefix + std::to_string(getpid()) + "-" + std::to_string(calls++);
}

}  // namespace tpb
