// The wgmma prefill attention kernel (mla_prefill_wgmma.cu), for mla_prefill.cu's variants.
// Internal to kernels/cuda.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace tpb::gpu::detail {

// Kimi-K2.5's widths only (nope 128, rope 64, v_dim 128), in a build with sm_90a code.
bool mla_prefill_wgmma_supports(std::int64_t nope, std::int64_t rope, std::int64_t v_dim);
// Layouts as mla_prefill_attention's (tpb/kernels/gpu/mla_prefill.h); 16-byte aligned q, k_nope,
// k_rot, v and 4-byte aligned out (the caller checks). overlap: each warpgroup's P.V of one key
// tile runs beside its scores and softmax of the next (three stages; FlashAttention-3's
// intra-warpgroup pipelining), else each tile's phases in turn.
void launch_mla_prefill_wgmma(const __nv_bfloat16* q, const __nv_bfloat16* k_nope, const __nv_bfloat16* k_rot,
                              const __nv_bfloat16* v, std::int64_t batch, std::int64_t q_len, std::int64_t past,
                              std::int64_t heads, float scale, __nv_bfloat16* out, cudaStream_t stream, bool overlap);

}  // namespace tpb::gpu::detail
