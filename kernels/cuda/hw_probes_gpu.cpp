// GPU probes: device copy bandwidth, cuBLAS bf16 GEMM rate, peer copy bandwidth. Timed with
// CUDA events around a batch of repetitions after a warm-up; median over batches.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <random>
#include <vector>

#include "tpb/cuda_check.h"
#include "tpb/dtype.h"
#include "tpb/kernels/hw_probes.h"

#define TPB_CUBLAS_CHECK(expr)                                                      \
  do {                                                                              \
    cublasStatus_t tpb_cublas_st_ = (expr);                                         \
    if (tpb_cublas_st_ != CUBLAS_STATUS_SUCCESS)                                    \
      TPB_DETAIL_FAIL(false, #expr, "cuBLAS error " << cublasGetStatusString(tpb_cublas_st_)); \
  } while (0)

namespace tpb {
namespace {

// RAII device buffer so a failed check frees what was allocated.
struct DeviceBuffer {
  void* ptr = nullptr;
  explicit DeviceBuffer(std::size_t bytes) { TPB_CUDA_CHECK(cudaMalloc(&ptr, bytes)); }
  ~DeviceBuffer() { cudaFree(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

void fill_random_bf16(void* dst, std::size_t count, std::uint32_t seed) {
  std::vector<std::uint16_t> host(count);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (auto& h : host) h = float_to_bf16(u(rng));
  TPB_CUDA_CHECK(cudaMemcpy(dst, host.data(), count * 2, cudaMemcpyHostToDevice));
}

// Runs `launch` (enqueues one repetition on `stream`) in 5 timed batches; median seconds per repetition.
template <typename Launch>
ProbeTiming time_on_stream(cudaStream_t stream, int repetitions, Launch&& launch) {
  TPB_CHECK(repetitions > 0, "repetitions must be positive");
  for (int i = 0; i < 3; ++i) launch();  // warm-up: clocks, handles, first-touch
  TPB_CUDA_CHECK(cudaStreamSynchronize(stream));
  cudaEvent_t start, stop;
  TPB_CUDA_CHECK(cudaEventCreate(&start));
  TPB_CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<double> per_rep;
  for (int batch = 0; batch < 5; ++batch) {
    TPB_CUDA_CHECK(cudaEventRecord(start, stream));
    for (int r = 0; r < repetitions; ++r) launch();
    TPB_CUDA_CHECK(cudaEventRecord(stop, stream));
    TPB_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    TPB_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    per_rep.push_back(ms / 1e3 / repetitions);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(per_rep.begin(), per_rep.end());
  ProbeTiming t;
  t.median_s = per_rep[per_rep.size() / 2];
  t.repetitions = repetitions * 5;
  return t;
}

}  // namespace

ProbeTiming gpu_copy_bandwidth(int device, std::size_t bytes, int repetitions) {
  TPB_CUDA_CHECK(cudaSetDevice(device));
  DeviceBuffer src(bytes), dst(bytes);
  fill_random_bf16(src.ptr, bytes / 2, 3);
  cudaStream_t stream;
  TPB_CUDA_CHECK(cudaStreamCreate(&stream));
  auto t = time_on_stream(stream, repetitions, [&] {
    TPB_CUDA_CHECK(cudaMemcpyAsync(dst.ptr, src.ptr, bytes, cudaMemcpyDeviceToDevice, stream));
  });
  TPB_CUDA_CHECK(cudaStreamDestroy(stream));
  t.value = 2.0 * static_cast<double>(bytes) / t.median_s / 1e9;
  return t;
}

ProbeTiming gpu_bf16_gemm_rate(int device, int m, int n, int k, int repetitions) {
  TPB_CUDA_CHECK(cudaSetDevice(device));
  const std::size_t mk = static_cast<std::size_t>(m) * k, kn = static_cast<std::size_t>(k) * n,
                    mn = static_cast<std::size_t>(m) * n;
  DeviceBuffer a(mk * 2), b(kn * 2), c(mn * 2);
  fill_random_bf16(a.ptr, mk, 4);
  fill_random_bf16(b.ptr, kn, 5);
  cudaStream_t stream;
  TPB_CUDA_CHECK(cudaStreamCreate(&stream));
  cublasHandle_t handle;
  TPB_CUBLAS_CHECK(cublasCreate(&handle));
  TPB_CUBLAS_CHECK(cublasSetStream(handle, stream));
  const float alpha = 1.f, beta = 0.f;
  // Column-major C[m x n] = A[m x k] * B[k x n].
  auto t = time_on_stream(stream, repetitions, [&] {
    TPB_CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, a.ptr, CUDA_R_16BF, m, b.ptr,
                                  CUDA_R_16BF, k, &beta, c.ptr, CUDA_R_16BF, m, CUBLAS_COMPUTE_32F,
                                  CUBLAS_GEMM_DEFAULT));
  });
  cublasDestroy(handle);
  TPB_CUDA_CHECK(cudaStreamDestroy(stream));
  t.value = 2.0 * m * n * static_cast<double>(k) / t.median_s / 1e12;
  return t;
}

bool gpu_can_access_peer(int src, int dst) {
  int can = 0;
  return cudaDeviceCanAccessPeer(&can, src, dst) == cudaSuccess && can != 0;
}

ProbeTiming gpu_peer_bandwidth(int src, int dst, std::size_t bytes, int repetitions) {
  TPB_CUDA_CHECK(cudaSetDevice(dst));
  DeviceBuffer dst_buf(bytes);
  TPB_CUDA_CHECK(cudaSetDevice(src));
  DeviceBuffer src_buf(bytes);
  fill_random_bf16(src_buf.ptr, bytes / 2, 6);
  if (gpu_can_access_peer(src, dst)) {
    const cudaError_t e = cudaDeviceEnablePeerAccess(dst, 0);
    if (e == cudaErrorPeerAccessAlreadyEnabled) (void)cudaGetLastError();
    else TPB_CUDA_CHECK(e);
  }
  cudaStream_t stream;
  TPB_CUDA_CHECK(cudaStreamCreate(&stream));
  auto t = time_on_stream(stream, repetitions, [&] {
    TPB_CUDA_CHECK(cudaMemcpyPeerAsync(dst_buf.ptr, dst, src_buf.ptr, src, bytes, stream));
  });
  TPB_CUDA_CHECK(cudaStreamDestroy(stream));
  t.value = static_cast<double>(bytes) / t.median_s / 1e9;
  return t;
}

}  // namespace tpb
