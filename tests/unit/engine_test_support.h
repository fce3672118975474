// Test support for the engine tests: in-process communicators (one rank, or N ranks as
// threads of this process) and error measures. The thread group sums in rank order 0..n-1
// in fp32, as every real backend must, so TP results here are what shm gives.
#pragma once

#include <barrier>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "reference_engine/comm/communicator.h"
#include "tpb/check.h"

namespace tpb::test {

class SingleRankCommunicator : public Communicator {
 public:
  void all_reduce(const void* in, void* out, std::size_t count, DType dtype, void*) override {
    if (in != out) std::memcpy(out, in, count * dtype_size(dtype));
  }
  void all_gather(const void* in, void* out, std::size_t count, DType dtype, void*) override {
    std::memcpy(out, in, count * dtype_size(dtype));
  }
  void barrier() override {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string name() const override { return "single"; }
  std::size_t memory_bytes() const override { return 0; }
};

// Shared state of N thread ranks.
struct ThreadGroup {
  explicit ThreadGroup(int n) : size(n), sync(n), in(n), out(n) {}
  int size;
  std::barrier<> sync;
  std::vector<const void*> in;
  std::vector<void*> out;
};

class ThreadCommunicator : public Communicator {
 public:
  ThreadCommunicator(ThreadGroup& group, int rank) : g_(group), rank_(rank) {}
  void all_reduce(const void* in, void* out, std::size_t count, DType dtype, void*) override {
    TPB_CHECK(dtype == DType::f32, "test communicator sums f32 only");
    g_.in[rank_] = in;
    g_.sync.arrive_and_wait();
    tmp_.resize(count);
    for (std::size_t i = 0; i < count; ++i) {
      float s = static_cast<const float*>(g_.in[0])[i];
      for (int r = 1; r < g_.size; ++r) s += static_cast<const float*>(g_.in[r])[i];
      tmp_[i] = s;
    }
    g_.sync.arrive_and_wait();  // every rank has read every input before any output is written
    std::memcpy(out, tmp_.data(), count * sizeof(float));
  }
  void all_gather(const void* in, void* out, std::size_t count, DType dtype, void*) override {
    g_.in[rank_] = in;
    g_.sync.arrive_and_wait();
    const std::size_t bytes = count * dtype_size(dtype);
    for (int r = 0; r < g_.size; ++r) std::memcpy(static_cast<char*>(out) + r * bytes, g_.in[r], bytes);
    g_.sync.arrive_and_wait();
  }
  void barrier() override { g_.sync.arrive_and_wait(); }
  int rank() const override { return rank_; }
  int size() const override { return g_.size; }
  std::string name() const override { return "threads"; }
  std::size_t memory_bytes() const override { return 0; }

 private:
  ThreadGroup& g_;
  int rank_;
  std::vector<float> tmp_;
};

// Runs fn(comm) on `tp` thread ranks and returns each rank's result. An exception on any
// rank is rethrown (the group must not be left waiting: tests only throw before the first
// collective or not at all).
template <typename R>
std::vector<R> run_ranks(int tp, const std::function<R(Communicator&)>& fn) {
  if (tp == 1) {
    SingleRankCommunicator comm;
    return {fn(comm)};
  }
  ThreadGroup group(tp);
  std::vector<R> results(tp);
  std::vector<std::exception_ptr> errors(tp);
  std::vector<std::thread> threads;
  for (int r = 0; r < tp; ++r)
    threads.emplace_back([&, r] {
      ThreadCommunicator comm(group, r);
      try {
        results[r] = fn(comm);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  return results;
}

// A model preset by file path (scenarios/models/<name>.json in this source tree), so tests
// do not depend on the working directory ctest runs them in.
inline std::string preset(const std::string& name) {
  return std::string(TPB_TEST_DATA_DIR) + "/../../scenarios/models/" + name + ".json";
}

// ||a - b|| / ||b||, computed in double; NaN when either side holds a NaN or Inf.
inline double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  TPB_CHECK(a.size() == b.size(), "rel_l2: sizes " << a.size() << " vs " << b.size());
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) return std::nan("");
    const double d = double(a[i]) - double(b[i]);
    num += d * d;
    den += double(b[i]) * double(b[i]);
  }
  return std::sqrt(num / den);
}

}  // namespace tpb::test
