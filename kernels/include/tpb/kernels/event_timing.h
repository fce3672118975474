// Device time of work queued on one stream, from two CUDA events around it: the one timing
// primitive of the GPU benchmarks, the allreduce timing loop and the engine workload.
// Include only from CUDA-enabled code.
#pragma once

#include <cuda_runtime_api.h>

#include "tpb/cuda_check.h"

namespace tpb {

// Milliseconds between `start` recorded before fn() queues its work on `stream` and `stop`
// recorded after it; waits for `stop`.
template <class F>
double event_elapsed_ms(cudaStream_t stream, cudaEvent_t start, cudaEvent_t stop, F&& fn) {
  TPB_CUDA_CHECK(cudaEventRecord(start, stream));
  fn();
  TPB_CUDA_CHECK(cudaEventRecord(stop, stream));
  TPB_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  TPB_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  return static_cast<double>(ms);
}

}  // namespace tpb
