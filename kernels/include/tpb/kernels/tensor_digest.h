// A tensor's digest and an even sample of its values, as the `digests` instrumentation level
// records them around every collective (suite/measure/tensor_digests.h), so that two runs that part
// can be told apart op by op. The digest is a sum of one 64-bit mix per element of
// (index, bits): order-free, so a GPU computes it with any grid and gets the CPU's value
// bit for bit (tpb/kernels/gpu/tensor_digest.h). It is for telling tensors apart, not a
// cryptographic hash.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tpb/dtype.h"

// The mixing functions run on both sides (the GPU kernel includes this header).
#if defined(__CUDACC__)
#define TPB_DIGEST_HOST_DEVICE __host__ __device__
#else
#define TPB_DIGEST_HOST_DEVICE
#endif

namespace tpb::kernels {

// How many values a sample holds, evenly spaced over the tensor (tensor_sample_index).
constexpr int kTensorSamples = 64;

// The element sample s (< min(count, kTensorSamples)) reads: s * count / kTensorSamples, or s
// itself in a tensor smaller than the sample.
TPB_DIGEST_HOST_DEVICE inline std::size_t tensor_sample_index(int s, std::size_t count) {
  return count >= static_cast<std::size_t>(kTensorSamples) ? static_cast<std::size_t>(s) * count / kTensorSamples
                                                           : static_cast<std::size_t>(s);
}

// The element's mix: splitmix64's finalizer over (index << 32 | bits), injective for the
// element counts a step has (< 2^32) and bit patterns (<= 32 bits).
TPB_DIGEST_HOST_DEVICE inline std::uint64_t tensor_digest_mix(std::uint64_t index, std::uint32_t bits) {
  std::uint64_t z = (index << 32) ^ bits;
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The final digest of the element mixes' sum (mod 2^64) and the element count.
TPB_DIGEST_HOST_DEVICE inline std::uint64_t tensor_digest_finish(std::uint64_t sum, std::uint64_t count) {
  return tensor_digest_mix(count, 0) ^ sum;
}

// Digest of `count` elements of `dtype` at `data` (host memory).
std::uint64_t tensor_digest_ref(const void* data, std::size_t count, DType dtype);

// out[s] = float(data[tensor_sample_index(s, count)]) for s < min(count, kTensorSamples); the
// rest of out (a tensor smaller than the sample) is NaN.
void tensor_samples_ref(const void* data, std::size_t count, DType dtype, float* out);

// TEST ONLY (planted divergence, suite/workloads/observed_communicator.h): data[i] *= factor,
// rounded to dtype.
void scale_values_ref(void* data, std::size_t count, DType dtype, float factor);

}  // namespace tpb::kernels
