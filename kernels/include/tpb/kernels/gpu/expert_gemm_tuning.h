// Variants of expert_gemm_grouped's kernel for tpb_bench to compare side by side (rows per
// warp, weight loads in flight per lane, resident blocks per SM). Every variant gives the same
// bits (same sum order); expert_gemm_grouped launches variant 1 for rows of up to 2048 and
// when pairs are at most a third of the experts, else variant 0. Not an engine interface: for
// the benchmark and for the test that holds every variant to expert_gemm_grouped's bits.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace tpb::gpu::tuning {

int expert_gemm_grouped_variants();
const char* expert_gemm_grouped_variant_name(int variant);
// expert_gemm_grouped with the given variant's kernel and launch shape.
void expert_gemm_grouped_variant(int variant, const __nv_bfloat16* x_sorted, const std::int32_t* offsets,
                                 std::int64_t experts, std::int64_t pairs, const __nv_bfloat16* weights,
                                 std::int64_t expert_stride, std::int64_t in, std::int64_t out,
                                 __nv_bfloat16* y_sorted, cudaStream_t stream);

}  // namespace tpb::gpu::tuning
