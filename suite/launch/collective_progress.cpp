#include "suite/launch/collective_progress.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "tpb/check.h"

namespace tpb {

const char* collective_op_name(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::all_reduce: return "all_reduce";
    case CollectiveOp::all_gather: return "all_gather";
    case CollectiveOp::barrier: return "barrier";
    case CollectiveOp::none: break;
  }
  return "collective";
}

namespace {

std::size_t page_bytes(int world_size) { return sizeof(CollectiveProgressSlot) * static_cast<std::size_t>(world_size); }

// Entered on construction, left on destruction (an exception leaves too: the rank is not
// waiting any more).
class Inside {
 public:
  Inside(CollectiveProgressSlot& slot, CollectiveOp op) : slot_(slot) {
    slot_.op.store(static_cast<std::uint32_t>(op), std::memory_order_relaxed);
    slot_.entered.fetch_add(1, std::memory_order_release);
  }
  ~Inside() { slot_.left.fetch_add(1, std::memory_order_release); }
  Inside(const Inside&) = delete;
  Inside& operator=(const Inside&) = delete;

 private:
  CollectiveProgressSlot& slot_;
};

}  // namespace

ProgressPage::ProgressPage(int world_size) : world_size_(world_size) {
  TPB_CHECK(world_size >= 1, "progress page: world size " << world_size);
  fd_ = memfd_create("tpb-progress", MFD_CLOEXEC);
  TPB_CHECK(fd_ >= 0, "progress page: memfd_create failed: " << std::strerror(errno));
  if (ftruncate(fd_, static_cast<off_t>(page_bytes(world_size))) != 0) {
    const int err = errno;
    close(fd_);
    TPB_FAIL("progress page: ftruncate failed: " << std::strerror(err));
  }
  void* p = mmap(nullptr, page_bytes(world_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    close(fd_);
    TPB_FAIL("progress page: mmap failed: " << std::strerror(err));
  }
  slots_ = new (p) CollectiveProgressSlot[static_cast<std::size_t>(world_size)];
}

ProgressPage::~ProgressPage() {
  munmap(slots_, page_bytes(world_size_));
  close(fd_);
}

CollectiveProgressSlot* rank_progress_slot(int rank, int world_size) {
  // One mapping per process, made on first use; ranks do not change their rank.
  static CollectiveProgressSlot* slots = [&]() -> CollectiveProgressSlot* {
    const char* text = std::getenv("TPB_PROGRESS_FD");
    if (text == nullptr || *text == '\0') return nullptr;
    char* end = nullptr;
    const long fd = std::strtol(text, &end, 10);
    TPB_CHECK(*end == '\0' && fd >= 0, "TPB_PROGRESS_FD: expected a descriptor number, got '" << text << "'");
    void* p = mmap(nullptr, page_bytes(world_size), PROT_READ | PROT_WRITE, MAP_SHARED, static_cast<int>(fd), 0);
    TPB_CHECK(p != MAP_FAILED, "TPB_PROGRESS_FD " << fd << ": mmap failed: " << std::strerror(errno));
    return static_cast<CollectiveProgressSlot*>(p);
  }();
  return slots == nullptr ? nullptr : &slots[rank];
}

void ProgressCommunicator::all_reduce(const void* in, void* out, std::size_t count, DType dtype, void* stream) {
  Inside inside(slot_, CollectiveOp::all_reduce);
  inner_->all_reduce(in, out, count, dtype, stream);
}

void ProgressCommunicator::all_gather(const void* in, void* out, std::size_t count_per_rank, DType dtype,
                                      void* stream) {
  Inside inside(slot_, CollectiveOp::all_gather);
  inner_->all_gather(in, out, count_per_rank, dtype, stream);
}

void ProgressCommunicator::barrier() {
  Inside inside(slot_, CollectiveOp::barrier);
  inner_->barrier();
}

std::string ranks_text(const std::vector<int>& ranks) {
  std::ostringstream os;
  os << (ranks.size() == 1 ? "rank " : "ranks ");
  for (std::size_t i = 0; i < ranks.size(); ++i) os << (i ? ", " : "") << ranks[i];
  return os.str();
}

HangDiagnosis diagnose_hang(const std::vector<RankProgress>& ranks) {
  std::vector<const RankProgress*> silent;
  for (const RankProgress& r : ranks)
    if (!r.answered) silent.push_back(&r);
  HangDiagnosis d;
  if (silent.empty()) return d;
  auto rank_list = [](const std::vector<const RankProgress*>& rs) {
    std::vector<int> out;
    for (const RankProgress* r : rs) out.push_back(r->rank);
    return out;
  };

  auto is_stopped = [](const RankProgress* r) { return r->state == 'T' || r->state == 't'; };
  std::vector<const RankProgress*> stopped, inside, in_bootstrap;
  for (const RankProgress* r : silent) {
    if (is_stopped(r)) stopped.push_back(r);
    if (r->entered > r->left) inside.push_back(r);
    if (r->bootstrap_wait > 0) in_bootstrap.push_back(r);
  }
  auto wait_text = [&](const std::vector<const RankProgress*>& rs, const char* where) {
    std::vector<int> waiting;
    for (const RankProgress* r : rs)
      if (!is_stopped(r)) waiting.push_back(r->rank);
    if (waiting.empty()) return std::string();
    return "; " + ranks_text(waiting) + (waiting.size() == 1 ? " waits " : " wait ") + where;
  };
  std::ostringstream os;
  if (!stopped.empty()) {
    d.blamed = rank_list(stopped);
    os << ranks_text(d.blamed) << (stopped.size() == 1 ? " is" : " are")
       << " stopped (process state T: SIGSTOP or a debugger)" << wait_text(inside, "inside a collective")
       << wait_text(in_bootstrap, "in a bootstrap all_gather");
    d.text = os.str();
    return d;
  }
  if (!in_bootstrap.empty()) {
    // Every rank sends each bootstrap all_gather in turn: those that have not sent the one
    // the others wait in are late.
    std::uint64_t seq = 0;
    for (const RankProgress* r : in_bootstrap) seq = std::max(seq, r->bootstrap_wait);
    std::vector<const RankProgress*> late;
    for (const RankProgress* r : silent)
      if (r->bootstrap_wait != seq) late.push_back(r);
    if (!late.empty()) {
      d.blamed = rank_list(late);
      os << ranks_text(d.blamed) << " did not send bootstrap all_gather #" << seq - 1
         << wait_text(in_bootstrap, "for it");
      d.text = os.str();
      return d;
    }
  }
  if (!inside.empty()) {
    // The furthest collective a silent rank waits in: those that have not entered it are late.
    const RankProgress* front = inside.front();
    for (const RankProgress* r : inside)
      if (r->entered > front->entered) front = r;
    const std::uint64_t k = front->entered;
    const char* op = collective_op_name(front->op);
    std::vector<const RankProgress*> late, waiting;
    for (const RankProgress* r : silent) (r->entered < k ? late : waiting).push_back(r);
    if (!late.empty()) {
      d.blamed = rank_list(late);
      os << ranks_text(d.blamed) << " did" << " not arrive at " << op << " #" << k;
      for (const RankProgress* r : late) {
        os << " (rank " << r->rank << ": ";
        if (r->entered > r->left)
          os << "inside " << collective_op_name(r->op) << " #" << r->entered << ")";
        else
          os << "outside any collective, after #" << r->left << ")";
      }
      os << "; " << ranks_text(rank_list(waiting)) << (waiting.size() == 1 ? " waits" : " wait") << " inside it";
      d.text = os.str();
      return d;
    }
    d.blamed = rank_list(silent);
    os << "every silent rank waits inside " << op << " #" << k << "; no rank is behind";
    d.text = os.str();
    return d;
  }
  d.blamed = rank_list(silent);
  os << "no silent rank is inside a collective";
  d.text = os.str();
  return d;
}

char process_state(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return '?';
  const auto close_paren = stat.rfind(')');  // the command name may hold spaces and parens
  if (close_paren == std::string::npos || close_paren + 2 >= stat.size()) return '?';
  return stat[close_paren + 2];
}

}  // namespace tpb
