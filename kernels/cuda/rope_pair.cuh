// One interleaved pair's rotation, the arithmetic of rope_yarn.cu's kernel, shared with the
// fused MLA latent row (mla_kv_row.cu) so that both rotate bitwise alike: the angle, cos and
// sin times attention_factor, and a*c - b*s, b*c + a*s, each written as an explicit
// round-to-nearest op so that nvcc cannot contract them into FMAs. Internal to kernels/cuda.
#pragma once

#include <cuda_bf16.h>

namespace tpb::gpu::detail {

// (a, b) at position `pos` with frequency inv_freq -> the rotated pair, rounded to bf16.
__device__ inline void rope_rotate_pair(float pos, float inv_freq, float attention_factor, float a, float b,
                                        __nv_bfloat16& out_a, __nv_bfloat16& out_b) {
  const float angle = __fmul_rn(pos, inv_freq);
  const float c = __fmul_rn(cosf(angle), attention_factor);
  const float s = __fmul_rn(sinf(angle), attention_factor);
  out_a = __float2bfloat16_rn(__fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s)));
  out_b = __float2bfloat16_rn(__fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s)));
}

}  // namespace tpb::gpu::detail
