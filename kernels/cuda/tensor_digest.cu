// Tensor digests on the device (tpb/kernels/gpu/tensor_digest.h). Two kernels: every block
// sums its grid-stride share of the element mixes into one partial (a sum mod 2^64 is
// order-free, so the block count and the reduction tree do not change the result); one block
// then adds the partials, finishes the digest and gathers the sample.
#include "tpb/kernels/gpu/tensor_digest.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>

#include "tpb/cuda_check.h"

namespace tpb::gpu {

namespace {

constexpr int kThreads = 256;

__device__ std::uint32_t bits_at(const void* data, std::size_t i, int elem_bytes) {
  return elem_bytes == 4 ? static_cast<const std::uint32_t*>(data)[i] : static_cast<const std::uint16_t*>(data)[i];
}

__device__ float value_at(const void* data, std::size_t i, DType dtype) {
  const std::uint32_t bits = bits_at(data, i, dtype == DType::f32 ? 4 : 2);
  if (dtype == DType::f32) return __uint_as_float(bits);
  if (dtype == DType::bf16) return __bfloat162float(__ushort_as_bfloat16(static_cast<unsigned short>(bits)));
  return __half2float(__ushort_as_half(static_cast<unsigned short>(bits)));
}

__global__ void digest_partials_kernel(const void* data, std::size_t count, int elem_bytes, std::uint64_t* partials) {
  __shared__ unsigned long long sum[kThreads];
  std::uint64_t mine = 0;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(kThreads) + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * kThreads)
    mine += kernels::tensor_digest_mix(i, bits_at(data, i, elem_bytes));
  sum[threadIdx.x] = mine;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) sum[threadIdx.x] += sum[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) partials[blockIdx.x] = sum[0];
}

__global__ void digest_finish_kernel(const void* data, std::size_t count, DType dtype, const std::uint64_t* partials,
                                     int blocks, std::uint64_t* digest, float* samples) {
  const int s = threadIdx.x;  // one thread per sample
  if (s == 0) {
    std::uint64_t sum = 0;
    for (int b = 0; b < blocks; ++b) sum += partials[b];
    *digest = kernels::tensor_digest_finish(sum, count);
  }
  if (s < kernels::kTensorSamples)
    samples[s] = static_cast<std::size_t>(s) < count ? value_at(data, kernels::tensor_sample_index(s, count), dtype) : nanf("");
}

__global__ void scale_values_kernel(void* data, std::size_t count, DType dtype, float factor) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    if (dtype == DType::f32) {
      static_cast<float*>(data)[i] *= factor;
    } else if (dtype == DType::bf16) {
      auto* p = static_cast<__nv_bfloat16*>(data) + i;
      *p = __float2bfloat16_rn(__bfloat162float(*p) * factor);
    } else {
      auto* p = static_cast<__half*>(data) + i;
      *p = __float2half_rn(__half2float(*p) * factor);
    }
  }
}

int blocks_for(std::size_t count) {
  const std::size_t needed = (count + kThreads - 1) / kThreads;
  return static_cast<int>(std::clamp<std::size_t>(needed, 1, kTensorDigestBlocks));
}

}  // namespace

void tensor_digest(const void* data, std::size_t count, DType dtype, std::uint64_t* partials, std::uint64_t* digest,
                   float* samples, cudaStream_t stream) {
  const int blocks = blocks_for(count);
  digest_partials_kernel<<<blocks, kThreads, 0, stream>>>(data, count, static_cast<int>(dtype_size(dtype)), partials);
  TPB_CUDA_CHECK(cudaGetLastError());
  digest_finish_kernel<<<1, kernels::kTensorSamples, 0, stream>>>(data, count, dtype, partials, blocks, digest, samples);
  TPB_CUDA_CHECK(cudaGetLastError());
}

void scale_values(void* data, std::size_t count, DType dtype, float factor, cudaStream_t stream) {
  scale_values_kernel<<<blocks_for(count), kThreads, 0, stream>>>(data, count, dtype, factor);
  TPB_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tpb::gpu
