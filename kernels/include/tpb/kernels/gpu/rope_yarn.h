// GPU rotary embedding on interleaved pairs with YaRN frequencies (CPU reference:
// tpb/kernels/rope_yarn.h, whose make_rope_table gives inv_freq and attention_factor).
// The angle is pos * inv_freq[i] in fp32, cos/sin with full-precision cosf/sinf (not the
// fast intrinsics), times attention_factor, as the CPU reference computes them.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace tpb::gpu {

// Rotates in place: x holds `n` vectors of 2 * half_dim values, vector v at x + v * stride,
// at position positions[v / vectors_per_position]. inv_freq: device [half_dim].
void rope_interleaved(__nv_bfloat16* x, std::int64_t n, std::int64_t stride, std::int64_t vectors_per_position,
                      const std::int32_t* positions, const float* inv_freq, std::int64_t half_dim,
                      float attention_factor, cudaStream_t stream);

// rope_interleaved, which also writes each rotated vector v (its 2 * half_dim values) at
// out + v * out_stride: bitwise the values left in x. The decode step rotates q's rope
// slices in place and into the absorbed query's rope slots in one launch, instead of a
// rope and a strided copy. out must not overlap x.
void rope_interleaved_copy(__nv_bfloat16* x, std::int64_t n, std::int64_t stride, std::int64_t vectors_per_position,
                           const std::int32_t* positions, const float* inv_freq, std::int64_t half_dim,
                           float attention_factor, __nv_bfloat16* out, std::int64_t out_stride, cudaStream_t stream);

}  // namespace tpb::gpu
