// The timed loop the single-GPU microbenchmarks share: each benchmark iteration runs a batch
// of `ops` operations queued on one stream between two CUDA events, reports the per-operation
// device time to Google Benchmark (UseManualTime), and the mean over iterations is returned
// for the counters.
#pragma once

#include <cuda_runtime_api.h>

#include <benchmark/benchmark.h>

#include "tpb/kernels/event_timing.h"

namespace tpb::bench {

template <class Batch>
double time_per_op_s(benchmark::State& state, cudaStream_t stream, cudaEvent_t start, cudaEvent_t stop, int ops,
                     Batch&& batch) {
  double total_s = 0;
  for (auto _ : state) {
    const double per_op_s = event_elapsed_ms(stream, start, stop, batch) * 1e-3 / ops;
    state.SetIterationTime(per_op_s);
    total_s += per_op_s;
  }
  return total_s / static_cast<double>(state.iterations());
}

}  // namespace tpb::bench
