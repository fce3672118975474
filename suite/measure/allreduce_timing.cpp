// time_device_collective (see suite/measure/allreduce_timing.h).
#include "suite/measure/allreduce_timing.h"

#include <cuda_runtime_api.h>

#include "tpb/cuda_check.h"
#include "tpb/kernels/event_timing.h"

namespace tpb {

std::vector<double> time_device_collective(const DeviceTimingSpec& spec, const void* input, void* output,
                                           const std::function<void(const void*, void*, void*)>& run,
                                           const std::function<void()>& barrier) {
  TPB_CHECK(spec.bytes > 0 && spec.samples >= 1 && spec.ops_per_sample >= 1 && spec.warmup >= 0,
            "time_device_collective: bad spec");
  TPB_CUDA_CHECK(cudaSetDevice(spec.device));
  cudaStream_t stream;
  TPB_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  void* in = nullptr;
  void* out = nullptr;
  cudaEvent_t start, stop;
  TPB_CUDA_CHECK(cudaMalloc(&in, spec.bytes));
  TPB_CUDA_CHECK(cudaMalloc(&out, spec.bytes));
  TPB_CUDA_CHECK(cudaEventCreate(&start));
  TPB_CUDA_CHECK(cudaEventCreate(&stop));
  TPB_CUDA_CHECK(cudaMemcpy(in, input, spec.bytes, cudaMemcpyHostToDevice));

  // The input stays unchanged across ops (out != in), so every op computes the same result.
  cudaGraphExec_t exec = nullptr;
  if (spec.cuda_graph) {
    cudaGraph_t graph;
    TPB_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < spec.ops_per_sample; ++i) run(in, out, stream);
    TPB_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    TPB_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    TPB_CUDA_CHECK(cudaGraphDestroy(graph));
  }
  auto batch = [&] {
    if (exec != nullptr)
      TPB_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    else
      for (int i = 0; i < spec.ops_per_sample; ++i) run(in, out, stream);
  };
  for (int w = 0; w < spec.warmup; ++w) batch();
  TPB_CUDA_CHECK(cudaStreamSynchronize(stream));

  std::vector<double> us;
  for (int s = 0; s < spec.samples; ++s) {
    barrier();
    run(in, out, stream);  // absorbs the launch skew between ranks
    us.push_back(event_elapsed_ms(stream, start, stop, batch) * 1e3 / spec.ops_per_sample);
  }
  TPB_CUDA_CHECK(cudaMemcpy(output, out, spec.bytes, cudaMemcpyDeviceToHost));
  if (exec != nullptr) TPB_CUDA_CHECK(cudaGraphExecDestroy(exec));
  TPB_CUDA_CHECK(cudaEventDestroy(start));
  TPB_CUDA_CHECK(cudaEventDestroy(stop));
  TPB_CUDA_CHECK(cudaFree(in));
  TPB_CUDA_CHECK(cudaFree(out));
  TPB_CUDA_CHECK(cudaStreamDestroy(stream));
  return us;
}

}  // namespace tpb
