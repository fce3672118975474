// The stress tests' device-side fill and check (see allreduce_stress_kernels.h).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "allreduce_stress_kernels.h"
#include "tpb/cuda_check.h"

namespace tpb::test {
namespace {

// A small integer in [-8, 8]: sums of up to 8 ranks stay exact in bf16 (|sum| <= 64).
__device__ __forceinline__ int value(std::uint32_t seed, int rank, std::size_t i) {
  std::uint32_t x = static_cast<std::uint32_t>(i) * 0x9e3779b9u + seed * 0x85ebca6bu + static_cast<std::uint32_t>(rank) * 0xc2b2ae35u;
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  return static_cast<int>(x % 17u) - 8;
}

__global__ void fill_kernel(__nv_bfloat16* in, std::size_t count, std::uint32_t seed, int rank) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    in[i] = __float2bfloat16_rn(static_cast<float>(value(seed, rank, i)));
}

__global__ void check_kernel(const __nv_bfloat16* out, std::size_t count, std::uint32_t seed, int world,
                             std::uint64_t call, StressCounters* c) {
  unsigned long long wrong = 0, nan = 0;
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    int want = 0;
    for (int r = 0; r < world; ++r) want += value(seed, r, i);
    const float got = __bfloat162float(out[i]);
    if (got != got) ++nan;
    else if (got != static_cast<float>(want)) ++wrong;
  }
  if (wrong != 0) {
    atomicAdd(&c->wrong, wrong);
    atomicCAS(&c->first_wrong_call, 0ull, static_cast<unsigned long long>(call) + 1);
  }
  if (nan != 0) atomicAdd(&c->nan, nan);
  if (threadIdx.x == 0 && blockIdx.x == 0) atomicAdd(&c->checked, static_cast<unsigned long long>(count));
}

__global__ void hold_kernel(const volatile int* release) {
  extern __shared__ char hold[];
  if (threadIdx.x == 0) {
    hold[0] = 1;
    while (*release == 0) __nanosleep(1000);
  }
  __syncthreads();
}

int grid_for(std::size_t count) {
  const std::size_t blocks = (count + 255) / 256;
  return static_cast<int>(blocks < 1 ? 1 : blocks > 1024 ? 1024 : blocks);
}

}  // namespace

void stress_fill(void* in, std::size_t count, std::uint32_t seed, int rank, void* stream) {
  if (count == 0) return;
  fill_kernel<<<grid_for(count), 256, 0, static_cast<cudaStream_t>(stream)>>>(static_cast<__nv_bfloat16*>(in), count,
                                                                               seed, rank);
  TPB_CUDA_CHECK_LAUNCH();
}

void stress_check(const void* out, std::size_t count, std::uint32_t seed, int world, std::uint64_t call,
                  StressCounters* counters, void* stream) {
  if (count == 0) return;
  check_kernel<<<grid_for(count), 256, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<const __nv_bfloat16*>(out), count, seed, world, call, counters);
  TPB_CUDA_CHECK_LAUNCH();
}

void stress_hold_sms(int sms, const volatile int* release, void* stream) {
  int device = 0, smem = 0;
  TPB_CUDA_CHECK(cudaGetDevice(&device));
  TPB_CUDA_CHECK(cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  TPB_CUDA_CHECK(cudaFuncSetAttribute(hold_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  hold_kernel<<<sms, 1024, smem, static_cast<cudaStream_t>(stream)>>>(release);
  TPB_CUDA_CHECK_LAUNCH();
}

}  // namespace tpb::test
