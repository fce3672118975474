// Which backend carried a communicator's allreduce calls, counted where the call is
// dispatched. A backend that can run a call on more than one path (the custom allreduce's NCCL
// fallback for messages above its buffer or without peer access; auto's size classes) adds
// each call under the path that ran it, so a record can say what ran rather than what was
// asked for (suite/measure/allreduce_ran.h turns the counts into a record's allreduce_ran).
//
// Counts are host calls: a CUDA graph replays its captured calls without calling again, so a
// replayed step is counted once, at capture. The path of a captured call is fixed at capture.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <tuple>
#include <vector>

namespace tpb {

// The all_reduce calls one backend carried.
struct AllreduceCalls {
  std::string backend;        // the path that ran them: "shm", "nccl", "custom-oneshot", ...
  std::size_t calls = 0;      // host calls since construction or the last reset
  std::size_t bytes_min = 0;  // smallest message among them, bytes per rank
  std::size_t bytes_max = 0;  // largest message among them, bytes per rank
};

// Accumulates AllreduceCalls per backend. Not thread-safe: a communicator is used by one
// thread, as the Communicator interface assumes.
class AllreduceCallTally {
 public:
  void add(const std::string& backend, std::size_t bytes) {
    for (AllreduceCalls& e : entries_)
      if (e.backend == backend) {
        ++e.calls;
        e.bytes_min = std::min(e.bytes_min, bytes);
        e.bytes_max = std::max(e.bytes_max, bytes);
        return;
      }
    entries_.push_back({backend, 1, bytes, bytes});
  }
  void clear() { entries_.clear(); }
  const std::vector<AllreduceCalls>& entries() const { return entries_; }

 private:
  std::vector<AllreduceCalls> entries_;
};

// `a` and `b` together, one entry per backend, ordered by message size (smallest first, then
// by name): a size-class breakdown reads from small to large.
inline std::vector<AllreduceCalls> merge_allreduce_calls(std::vector<AllreduceCalls> a, const std::vector<AllreduceCalls>& b) {
  for (const AllreduceCalls& e : b) {
    auto it = std::find_if(a.begin(), a.end(), [&](const AllreduceCalls& x) { return x.backend == e.backend; });
    if (it == a.end()) {
      a.push_back(e);
    } else {
      it->calls += e.calls;
      it->bytes_min = std::min(it->bytes_min, e.bytes_min);
      it->bytes_max = std::max(it->bytes_max, e.bytes_max);
    }
  }
  std::sort(a.begin(), a.end(), [](const AllreduceCalls& x, const AllreduceCalls& y) {
    return std::tie(x.bytes_min, x.bytes_max, x.backend) < std::tie(y.bytes_min, y.bytes_max, y.backend);
  });
  return a;
}

}  // namespace tpb
