// Dense y[rows, out] = x[rows, in] · w[out, in]^T for a handful of rows (decode), bf16 in,
// fp32 accumulate, bf16 out: the weights streamed from HBM once by warps that each own one
// output row (kernels/cuda/weight_stream.cuh). At one token cuBLAS runs the small projections
// of a decode step (q_a, kv_a, the shared expert) at a fifth to a half of the copy bandwidth;
// this is what Linear::bf16_out runs for them instead. Deterministic, no atomics, graph safe.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace tpb::gpu {

constexpr std::int64_t kGemvMaxRows = 8;

// Whether gemv_bf16 takes these arguments: 1..kGemvMaxRows rows, in and x_stride multiples
// of 8 elements, x and w 16-byte aligned, in < 2^31 * 8.
bool gemv_supported(const void* x, std::int64_t x_stride, const void* w, std::int64_t rows, std::int64_t in);

// y_stride >= out (elements). Throws tpb::Error when !gemv_supported.
void gemv_bf16(const __nv_bfloat16* x, std::int64_t x_stride, const __nv_bfloat16* w, __nv_bfloat16* y,
               std::int64_t y_stride, std::int64_t rows, std::int64_t in, std::int64_t out, cudaStream_t stream);

}  // namespace tpb::gpu
