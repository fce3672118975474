// GPU RMSNorm and the fused residual-add + RMSNorm every layer starts its two halves with
// (CPU reference: tpb/kernels/rmsnorm.h). The residual stream is kept in fp32 on the device
// (one rounding fewer than SGLang's bf16 residual, the same math); normed outputs are bf16.
// One block per row, a fixed-order tree reduction: deterministic.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace tpb::gpu {

// out[r, :] = weight * x[r, :] * rsqrt(mean(x[r, :]^2) + eps), fp32 math. Rows are `x_stride`
// and `out_stride` elements apart (a norm over a slice of a wider row, e.g. q_a or kv_a's latent).
void rmsnorm(const __nv_bfloat16* x, std::int64_t x_stride, const __nv_bfloat16* weight, __nv_bfloat16* out,
             std::int64_t out_stride, std::int64_t rows, std::int64_t dim, float eps, cudaStream_t stream);

// residual[r, :] += delta[r, :] (fp32; delta == nullptr adds nothing), then
// out[r, :] = rmsnorm(residual[r, :]) in bf16. residual, delta, out: [rows, dim] contiguous.
void add_rmsnorm(const __nv_bfloat16* delta, float* residual, const __nv_bfloat16* weight, __nv_bfloat16* out,
                 std::int64_t rows, std::int64_t dim, float eps, cudaStream_t stream);

// residual[r, :] = float(x[r, :]) (the first layer's residual is the embedding).
void residual_from_bf16(const __nv_bfloat16* x, float* residual, std::int64_t count, cudaStream_t stream);

}  // namespace tpb::gpu
