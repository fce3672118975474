// The `digests` instrumentation level's record of a case (issue 15, "divergence
// localization"): for every collective call, in order, the digest of its input (read before
// the call: the engine reduces in place) and of its output, and an even sample of the output's
// values (tpb/kernels/tensor_digest.h). Two runs that should agree and do not are then compared
// call by call (suite/checks/divergence.h): the first call whose output differs names the
// layer and op where they part, and whether its inputs already differed (the compute before
// it parted) or not (the collective itself did).
//
// Why the collectives: in this engine they sit at every layer's two boundaries (engine.h: the
// embedding, each layer's attention and MLP/MoE outputs, the lm_head's all_gather), and a
// layer's output is the residual stream plus its two all-reduced deltas, so the first delta
// that differs is the first layer whose output differs.
//
// Observer-invariant by construction (suite/measure/instrumentation.h): the buffers are allocated at
// every level (host, or device memory on a GPU case), counted in the case's AllocationLedger;
// only the `digests` level hands the recorder to the ObservedCommunicator, and the recorder
// reads the tensors (device kernels on the call's stream, no host synchronisation, graph
// capturable), never writes them. On the GPU a captured CUDA graph replays the digest kernels
// of the calls it captured, so in graph mode a call's slot holds its last replay.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "suite/measure/instrumentation.h"
#include "tpb/dtype.h"

namespace tpb {

class TensorDigests {
 public:
  // Room for `capacity` calls (later calls are counted as dropped). `on_device`: the tensors
  // are device pointers on the current CUDA device (a CUDA build), else host memory.
  TensorDigests(std::size_t capacity, bool on_device, AllocationLedger& ledger);
  ~TensorDigests();
  TensorDigests(const TensorDigests&) = delete;
  TensorDigests& operator=(const TensorDigests&) = delete;

  // Around one collective: `op` names it ("all_reduce", "all_gather"); `in` has in_count
  // elements, `out` out_count, both of `dtype`; `stream` is the call's (nullptr on the host).
  void before(const void* in, std::size_t in_count, DType dtype, void* stream);
  void after(const char* op, const void* out, std::size_t out_count, DType dtype, void* stream);

  std::size_t calls() const { return next_; }
  // {"calls", "dropped", "samples_per_call", "entries": [{"call", "op", "dtype", "in_count",
  // "out_count", "in", "out" (16 hex digits each), "samples": [floats, NaN as null]}]}. On the
  // device it synchronises the device and copies the slots back first.
  nlohmann::json to_json();

 private:
  struct Meta {
    std::string op;
    DType dtype = DType::f32;
    std::size_t in_count = 0, out_count = 0;
  };
  std::size_t slot() const { return next_ < capacity_ ? next_ : capacity_; }

  std::size_t capacity_;
  bool on_device_;
  std::size_t next_ = 0;
  std::vector<Meta> meta_;
  std::vector<std::uint64_t> in_, out_;  // host copies of the digests (capacity each)
  std::vector<float> samples_;           // capacity x kTensorSamples
  // Device slots (on_device_): in, out digests, samples, and the digest kernel's scratch.
  std::uint64_t* d_in_ = nullptr;
  std::uint64_t* d_out_ = nullptr;
  float* d_samples_ = nullptr;
  std::uint64_t* d_partials_ = nullptr;
};

}  // namespace tpb
