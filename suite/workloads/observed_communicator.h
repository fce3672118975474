// A Communicator that forwards every call to another one and marks the entry and exit of
// each collective in the case's Instrumentation. The engine is built on it at every
// instrumentation level (the engine and its control flow never know the level); the engine
// workload turns the marks into phases (embed, attention, mlp/moe, allreduce, lm_head),
// because the engine's collectives sit exactly at its phase boundaries (engine.h).
//
// It also records every call, at every level (`off` included), into the case's CallSequence:
// op, element count and dtype, as a running digest and count plus the first calls spelled
// out. observer_invariant compares the sequences of `off` and of each level, so a debug path
// that adds or changes a collective is caught even when the outputs come out the same.
// Recording is observer-invariant itself: a fixed buffer sized before the case, the same
// code at every level, and it reads only the call's arguments, never the data.
//
// At the `digests` level it also hands each call's input and output to the case's
// TensorDigests (suite/measure/tensor_digests.h), which reads them and writes nothing the case uses.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reference_engine/comm/communicator.h"
#include "suite/measure/digest.h"
#include "suite/measure/instrumentation.h"
#include "suite/measure/tensor_digests.h"
#include "tpb/fnv1a.h"

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

// The collective calls of one case, in order.
class CallSequence {
 public:
  enum Op : std::uint32_t { kAllReduce = 0, kAllGather = 1, kBarrier = 2 };

  // `keep`: how many of the first calls are kept spelled out (the rest count in the digest).
  explicit CallSequence(std::size_t keep) : first_(keep) {}

  void record(Op op, std::size_t count, DType dtype) noexcept {
    const Call call{op, static_cast<std::uint32_t>(dtype), static_cast<std::uint64_t>(count)};
    digest_ = fnv1a64_append(digest_, &call, sizeof call);
    if (count_ < first_.size()) first_[count_] = call;
    ++count_;
  }

  std::size_t count() const { return count_; }
  std::size_t buffer_bytes() const { return first_.size() * sizeof(Call); }

  // {"count", "digest" (hex), "first": ["all_reduce 896 f32", ...] (up to `keep`)}.
  nlohmann::json to_json() const {
    nlohmann::json first = nlohmann::json::array();
    for (std::size_t i = 0; i < std::min(count_, first_.size()); ++i) first.push_back(describe(first_[i]));
    return {{"count", count_}, {"digest", digest_hex(digest_)}, {"first", first}};
  }

 private:
  struct Call {
    std::uint32_t op;     // Op
    std::uint32_t dtype;  // DType
    std::uint64_t count;  // elements (per rank for all_gather); 0 for a barrier
  };
  static_assert(sizeof(Call) == 16, "the digest hashes the struct's bytes: no padding");

  static std::string describe(const Call& c) {
    if (c.op == kBarrier) return "barrier";
    return std::string(c.op == kAllReduce ? "all_reduce " : "all_gather ") + std::to_string(c.count) + " " +
           std::string(dtype_name(static_cast<DType>(c.dtype)));
  }

  std::vector<Call> first_;
  std::size_t count_ = 0;
  std::uint64_t digest_ = kFnv1a64Basis;  // FNV-1a 64 over every call's bytes
};

// TEST ONLY: one collective of every forward pass returns a wrong result — its output scaled
// by `factor` after the call, as a backend bug at one layer would — so that divergence
// localization (suite/checks/divergence.h) has a real divergence to find
// (tests/cli/divergence_is_located.sh). The engine workload builds it from
// TPB_TEST_PLANT_DIVERGENCE; never set in a measurement.
struct PlantedDivergence {
  std::size_t call_in_forward = 0;    // which collective of a forward pass (all_gather included)
  std::size_t calls_per_forward = 1;  // collectives per forward pass
  float factor = 1.0625f;             // the output is multiplied by it
  // Scales `count` values of `dtype` in place, on `stream` for device memory.
  void (*scale)(void* data, std::size_t count, DType dtype, float factor, void* stream) = nullptr;
  std::size_t seen = 0;  // collectives so far
  bool hits() { return seen++ % calls_per_forward == call_in_forward; }
};

class ObservedCommunicator final : public Communicator {
 public:
  explicit ObservedCommunicator(Communicator& inner) : inner_(inner) {}

  // The case's recorder and call sequence; nullptr between cases (then nothing is marked or
  // recorded). `calls` may be nullptr for a workload that does not record the sequence;
  // `digests` is given at the digests level only; `plant` only in planted-fault tests.
  void observe(Instrumentation* instrumentation, CallSequence* calls = nullptr, TensorDigests* digests = nullptr,
               PlantedDivergence* plant = nullptr) {
    inst_ = instrumentation;
    calls_ = calls;
    digests_ = digests;
    plant_ = plant;
  }

  void all_reduce(const void* in, void* out, std::size_t count, DType dtype, void* stream) override {
    if (calls_) calls_->record(CallSequence::kAllReduce, count, dtype);
    if (digests_) digests_->before(in, count, dtype, stream);
    if (inst_) inst_->mark(kReduceBegin);
    inner_.all_reduce(in, out, count, dtype, stream);
    if (inst_) inst_->mark(kReduceEnd);
    if (plant_ && plant_->hits()) plant_->scale(out, count, dtype, plant_->factor, stream);
    if (digests_) digests_->after("all_reduce", out, count, dtype, stream);
  }
  void all_gather(const void* in, void* out, std::size_t count_per_rank, DType dtype, void* stream) override {
    if (calls_) calls_->record(CallSequence::kAllGather, count_per_rank, dtype);
    if (digests_) digests_->before(in, count_per_rank, dtype, stream);
    if (inst_) inst_->mark(kGatherBegin);
    inner_.all_gather(in, out, count_per_rank, dtype, stream);
    if (inst_) inst_->mark(kGatherEnd);
    const std::size_t gathered = count_per_rank * static_cast<std::size_t>(inner_.size());
    if (plant_ && plant_->hits()) plant_->scale(out, gathered, dtype, plant_->factor, stream);
    if (digests_) digests_->after("all_gather", out, gathered, dtype, stream);
  }
  void barrier() override {
    if (calls_) calls_->record(CallSequence::kBarrier, 0, DType::f32);
    inner_.barrier();
  }
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string name() const override { return inner_.name(); }
  std::size_t memory_bytes() const override { return inner_.memory_bytes(); }
  std::string fallback_reason() const override { return inner_.fallback_reason(); }
  std::vector<AllreduceCalls> allreduce_calls() const override { return inner_.allreduce_calls(); }
  void reset_allreduce_calls() override { inner_.reset_allreduce_calls(); }
  void check_errors() const override { inner_.check_errors(); }

 private:
  Communicator& inner_;
  Instrumentation* inst_ = nullptr;
  CallSequence* calls_ = nullptr;
  TensorDigests* digests_ = nullptr;
  PlantedDivergence* plant_ = nullptr;
};

// Clears the communicator's recorder when the case ends, also on an exception.
class ObserveScope {
 public:
  ObserveScope(ObservedCommunicator& comm, Instrumentation& inst, CallSequence* calls = nullptr,
               TensorDigests* digests = nullptr, PlantedDivergence* plant = nullptr)
      : comm_(comm) {
    comm_.observe(&inst, calls, digests, plant);
  }
  ~ObserveScope() { comm_.observe(nullptr); }
  ObserveScope(const ObserveScope&) = delete;
  ObserveScope& operator=(const ObserveScope&) = delete;

 private:
  ObservedCommunicator& comm_;
};

}  // namespace tpb
