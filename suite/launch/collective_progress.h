// Which rank did not arrive: a page of shared memory, one slot per rank, in which each rank
// counts the collectives it entered and left. When a case times out with every rank waiting
// inside a collective (a shm barrier, a host-synchronous all_reduce), the launcher cannot
// tell the ranks apart from their sockets: all are silent. It reads the page and the ranks'
// process states instead, and blames the rank that is stopped (SIGSTOP, a debugger), or the
// one that has entered fewer collectives than the ranks waiting for it.
//
// The controller creates the page per group (a memfd, so nothing is left in /dev/shm when a
// process dies) and hands its descriptor to each rank in TPB_PROGRESS_FD; a rank wraps every
// communicator it creates in a ProgressCommunicator that updates its slot around each call.
// Counts are host calls: a CUDA graph's replay calls nothing, and an asynchronous GPU
// all_reduce returns before its peers arrive (its wait shows in the stream sync, not here).
// Where the counts cannot tell, the diagnosis says so and blames every silent rank.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "reference_engine/comm/communicator.h"

namespace tpb {

// The collective a slot's rank is in or last was in.
enum class CollectiveOp : std::uint32_t { none = 0, all_reduce = 1, all_gather = 2, barrier = 3 };
const char* collective_op_name(CollectiveOp op);

// One rank's slot: written by the rank only, read by the controller at any time.
struct alignas(64) CollectiveProgressSlot {
  std::atomic<std::uint64_t> entered{0};  // collectives this process has entered
  std::atomic<std::uint64_t> left{0};     // collectives this process has returned from
  std::atomic<std::uint32_t> op{0};       // CollectiveOp of the last one entered
};
static_assert(sizeof(CollectiveProgressSlot) == 64, "one cache line per rank: the page layout is shared");
static_assert(std::atomic<std::uint64_t>::is_always_lock_free, "slots are shared between processes");

// Controller side: the group's page. Not copyable; closes its descriptor and unmaps on destruction.
class ProgressPage {
 public:
  explicit ProgressPage(int world_size);  // throws with the errno when memfd/mmap fail
  ~ProgressPage();
  ProgressPage(const ProgressPage&) = delete;
  ProgressPage& operator=(const ProgressPage&) = delete;

  // The descriptor a rank inherits (close-on-exec: the launcher clears the flag in the child).
  int fd() const { return fd_; }
  const CollectiveProgressSlot& slot(int rank) const { return slots_[rank]; }
  CollectiveProgressSlot& slot(int rank) { return slots_[rank]; }  // a rank's view, in tests
  int world_size() const { return world_size_; }

 private:
  int world_size_;
  int fd_ = -1;
  CollectiveProgressSlot* slots_ = nullptr;
};

// Rank side: this rank's slot in the page TPB_PROGRESS_FD names, nullptr when the variable is
// unset (a rank started by something other than the launcher). Maps once per process.
CollectiveProgressSlot* rank_progress_slot(int rank, int world_size);

// Counts `inner`'s collectives in `slot`; everything else is forwarded unchanged.
class ProgressCommunicator final : public Communicator {
 public:
  ProgressCommunicator(std::unique_ptr<Communicator> inner, CollectiveProgressSlot& slot)
      : inner_(std::move(inner)), slot_(slot) {}
  void all_reduce(const void* in, void* out, std::size_t count, DType dtype, void* stream) override;
  void all_gather(const void* in, void* out, std::size_t count_per_rank, DType dtype, void* stream) override;
  void barrier() override;
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string name() const override { return inner_->name(); }
  std::size_t memory_bytes() const override { return inner_->memory_bytes(); }
  std::string fallback_reason() const override { return inner_->fallback_reason(); }
  std::vector<AllreduceCalls> allreduce_calls() const override { return inner_->allreduce_calls(); }
  void reset_allreduce_calls() override { inner_->reset_allreduce_calls(); }
  void check_errors() const override { inner_->check_errors(); }

 private:
  std::unique_ptr<Communicator> inner_;
  CollectiveProgressSlot& slot_;
};

// What the launcher knows of one rank when a case times out.
struct RankProgress {
  int rank = 0;
  bool answered = false;     // its result (or error) of the case is in
  char state = '?';          // /proc/<pid>/stat state: R, S, D, T (stopped), t (traced), Z, '?' unknown
  std::uint64_t entered = 0;  // from its slot
  std::uint64_t left = 0;
  CollectiveOp op = CollectiveOp::none;
  // The bootstrap all_gather (through the controller, suite/workloads/worker.h) this rank has sent and
  // waits to be answered: its sequence number + 1, 0 when none. Communicator setup (NCCL's
  // unique id, the shm segment's name) goes through it, before any collective is counted.
  std::uint64_t bootstrap_wait = 0;
};

struct HangDiagnosis {
  std::vector<int> blamed;  // the ranks to blame, ascending
  std::string text;         // e.g. "rank 1 did not arrive at all_reduce #93 (it left #92); ranks 0, 2 wait inside it"
};

// Whom a timeout blames: stopped ranks first; else, when silent ranks wait in a bootstrap
// all_gather, the silent ranks that have not sent it; else, when silent ranks wait inside
// collective #k, the silent ranks that have not entered it; else every silent rank ("no
// silent rank is inside a collective" or "every silent rank waits inside all_reduce #k").
// Pure: tested on its own.
HangDiagnosis diagnose_hang(const std::vector<RankProgress>& ranks);

// The state letter of /proc/<pid>/stat, '?' when it cannot be read.
char process_state(int pid);

// "rank 3" or "ranks 0, 2".
std::string ranks_text(const std::vector<int>& ranks);

}  // namespace tpb
