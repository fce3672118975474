// The `digests` instrumentation level's kernels (CPU reference: tpb/kernels/tensor_digest.h):
// a tensor's digest and its even sample, written to device memory on `stream` with no host
// synchronisation and no allocation, so that they can sit inside a captured CUDA graph and
// run at every replay. Same values as the reference, bit for bit.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "tpb/dtype.h"
#include "tpb/kernels/tensor_digest.h"

namespace tpb::gpu {

// Partial sums the digest needs as device scratch (one per block of its first kernel).
constexpr int kTensorDigestBlocks = 256;

// *digest = tensor_digest_ref(data, count, dtype); samples[0..kTensorSamples) =
// tensor_samples_ref(...). `partials`: kTensorDigestBlocks device words of scratch; `digest`
// and `samples` are device memory. data may be in flight on `stream` (ordered after it).
void tensor_digest(const void* data, std::size_t count, DType dtype, std::uint64_t* partials, std::uint64_t* digest,
                   float* samples, cudaStream_t stream);

// TEST ONLY: data[i] *= factor, rounded to dtype (kernels::scale_values_ref).
void scale_values(void* data, std::size_t count, DType dtype, float factor, cudaStream_t stream);

}  // namespace tpb::gpu
