// The routed experts' GEMMs over the dispatched rows (tpb/kernels/gpu/moe_dispatch.h):
// expert e multiplies its sorted rows [offsets[e], offsets[e+1]) by its own weight,
//   y_sorted[p, :] = x_sorted[p, :] · W_e[out, in]^T,   W_e = weights + e * expert_stride.
// Two paths, the same numbers to the CPU reference's tolerance:
//   grouped    one launch, offsets read on the device, weight-stationary (each weight tile is
//              read from HBM once per step and applied to every row of its expert): decode,
//              CUDA-graph safe, memory-bound at small batch as the roofline says it should be;
//              rows that are not whole 16-byte vectors (in or expert_stride not a multiple of
//              8, a misaligned x or weights) take a scalar kernel with the same properties.
//   per_expert offsets copied to the host, one cuBLASLt GEMM per non-empty expert: prefill,
//              eager only (the copy synchronises the stream).
// fp32 accumulation, bf16 out, fixed reduction order: deterministic.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "tpb/kernels/gpu/linear.h"

namespace tpb::gpu {

// pairs: total sorted rows (tokens * top_k); experts: number of experts in offsets.
void expert_gemm_grouped(const __nv_bfloat16* x_sorted, const std::int32_t* offsets, std::int64_t experts,
                         std::int64_t pairs, const __nv_bfloat16* weights, std::int64_t expert_stride,
                         std::int64_t in, std::int64_t out, __nv_bfloat16* y_sorted, cudaStream_t stream);

void expert_gemm_per_expert(Linear& linear, const __nv_bfloat16* x_sorted, const std::int32_t* offsets,
                            std::int64_t experts, const __nv_bfloat16* weights, std::int64_t expert_stride,
                            std::int64_t in, std::int64_t out, __nv_bfloat16* y_sorted, cudaStream_t stream);

}  // namespace tpb::gpu
