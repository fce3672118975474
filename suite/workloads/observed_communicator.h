// A Communicator that forwards every call to another one and marks the entry and exit of
// each collective in the case's Instrumentation. The engine is built on it at every
// instrumentation level (the engine and its control flow never know the level); the engine
// workload turns the marks into phases (embed, attention, mlp/moe, allreduce, lm_head),
// because the engine's collectives sit exactly at its phase boundaries (engine.h).
#pragma once

#include <cstdint>

#include "reference_engine/comm/communicator.h"
#include "suite/instrumentation.h"

namespace tpb {

// Event codes of the engine workload's marks.
enum EngineMark : std::uint32_t {
  kStepBegin = 1,
  kStepEnd = 2,
  kReduceBegin = 3,
  kReduceEnd = 4,
  kGatherBegin = 5,
  kGatherEnd = 6,
};

class ObservedCommunicator final : public Communicator {
 public:
  explicit ObservedCommunicator(Communicator& inner) : inner_(inner) {}

  // The case's recorder; nullptr between cases (then nothing is marked).
  void observe(Instrumentation* instrumentation) { inst_ = instrumentation; }

  void all_reduce(const void* in, void* out, std::size_t count, DType dtype, void* stream) override {
    if (inst_) inst_->mark(kReduceBegin);
    inner_.all_reduce(in, out, count, dtype, stream);
    if (inst_) inst_->mark(kReduceEnd);
  }
  void all_gather(const void* in, void* out, std::size_t count_per_rank, DType dtype, void* stream) override {
    if (inst_) inst_->mark(kGatherBegin);
    inner_.all_gather(in, out, count_per_rank, dtype, stream);
    if (inst_) inst_->mark(kGatherEnd);
  }
  void barrier() override { inner_.barrier(); }
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string name() const override { return inner_.name(); }
  std::size_t memory_bytes() const override { return inner_.memory_bytes(); }
  std::string fallback_reason() const override { return inner_.fallback_reason(); }
  std::vector<AllreduceCalls> allreduce_calls() const override { return inner_.allreduce_calls(); }
  void reset_allreduce_calls() override { inner_.reset_allreduce_calls(); }

 private:
  Communicator& inner_;
  Instrumentation* inst_ = nullptr;
};

// Clears the communicator's recorder when the case ends, also on an exception.
class ObserveScope {
 public:
  ObserveScope(ObservedCommunicator& comm, Instrumentation& inst) : comm_(comm) { comm_.observe(&inst); }
  ~ObserveScope() { comm_.observe(nullptr); }
  ObserveScope(const ObserveScope&) = delete;
  ObserveScope& operator=(const ObserveScope&) = delete;

 private:
  ObservedCommunicator& comm_;
};

}  // namespace tpb
