// One-row dense product for decode at batch 1: y[out] = x[in] · w[out, in]^T, bf16 in, fp32
// accumulate, bf16 or fp32 out (the layout of Linear, tpb/kernels/gpu/linear.h; CPU
// reference tpb/kernels/linear.h). At one row cuBLASLt reads the small decode projections at
// 0.2-0.6 of the copy bandwidth; a product of a few MB is bound by how many loads are in
// flight, not by bytes, so this kernel splits `in` over warps as well as `out` over blocks.
//
// Work: a block holds kGemvRowsPerBlock output rows and one warp per kGemvSliceElems-element
// slice of `in`; each lane keeps its 4 x-vectors in registers and has all the rows' weight
// vectors of its slice in flight at once. Sums: each lane over its vectors in order, a warp
// butterfly, then the slices in order by one thread: a fixed order, no atomics, the same bits
// every call and under graph replay.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace tpb::gpu {

constexpr std::int64_t kGemvSliceElems = 1024;   // 32 lanes x 4 vectors of 8 bf16
constexpr std::int64_t kGemvRowsPerBlock = 4;
// 18 warps per block at most (the dense MLP's down projection at TP1: in = 18432), so a
// thread may hold its 16 weight vectors and 4 x vectors in registers.
constexpr std::int64_t kGemvMaxIn = 18 * kGemvSliceElems;

// Whether gemv_* takes this product: in a multiple of 8 up to kGemvMaxIn, x and w 16-byte aligned.
bool gemv_supported(const void* x, const void* w, std::int64_t in);

void gemv_bf16_out(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y, std::int64_t in,
                   std::int64_t out, cudaStream_t stream);
void gemv_f32_out(const __nv_bfloat16* x, const __nv_bfloat16* w, float* y, std::int64_t in, std::int64_t out,
                  cudaStream_t stream);
// y = x · w^T and y2 = x · w2^T in one launch (two decode projections of the same input, e.g.
// q_a and kv_a): each output row the same bits as gemv_bf16_out gives it.
void gemv_bf16_out_pair(const __nv_bfloat16* x, std::int64_t in, const __nv_bfloat16* w, __nv_bfloat16* y,
                        std::int64_t out, const __nv_bfloat16* w2, __nv_bfloat16* y2, std::int64_t out2,
                        cudaStream_t stream);

}  // namespace tpb::gpu
