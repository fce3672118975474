// Device-event timing of a collective for the suite's allreduce workload (GPU backends), the
// device sample source of the measurement (suite/measure/measure.h): the workload owns the maths and
// the checks, this owns device buffers, warm-up, CUDA graphs and events (STYLE.md 3 and 12).
// CUDA builds only (suite/CMakeLists.txt leaves it out of tpb_suite_measure without CUDA).
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

namespace tpb {

struct DeviceTimingSpec {
  int device = 0;              // CUDA device ordinal of this rank
  std::size_t bytes = 0;       // message size per rank, bytes
  int warmup = 2;              // untimed batches first
  int samples = 10;            // timed batches; one latency per batch
  int ops_per_sample = 20;     // collectives per timed batch (amortises launch skew between ranks)
  bool cuda_graph = false;     // replay a captured graph of the batch instead of eager launches
};

// run(in, out, stream) enqueues one collective on `stream` (device pointers); barrier() lines
// the ranks up on the host before each sample. Copies `input` (host, spec.bytes) to the
// device, times each batch with device events (the first op of a batch is left outside the
// events: it absorbs the ranks' launch skew), and copies the final output to `output` (host).
// Returns microseconds per collective, one value per sample.
std::vector<double> time_device_collective(const DeviceTimingSpec& spec, const void* input, void* output,
                                           const std::function<void(const void*, void*, void*)>& run,
                                           const std::function<void()>& barrier);

}  // namespace tpb
