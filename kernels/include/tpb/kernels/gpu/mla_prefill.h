// GPU MLA prefill attention in the plain form (CPU reference: tpb/kernels/mla_attention.h),
// causal, for `batch` sequences of equal length appended after `past` cached tokens:
//   score[h, i, j] = (q_nope[i,h]·k_nope[j,h] + q_rot[i,h]·k_rot[j]) * scale,  j <= past + i
//   out[i, h]      = sum_j softmax_j(score) * v[j, h]
// Online softmax over key blocks in a fixed order (flash-attention style), fp32 accumulate,
// one thread block per (sequence, head, query block): deterministic. On the tensor cores where
// nope, rope and v_dim are multiples of 8 (nope + rope <= 256, v_dim <= 128) and q, k_nope,
// k_rot, v are 16-byte aligned, P rounded to bf16 for the P·V MMA; on CUDA cores in fp32
// otherwise (kernels/cuda/mla_prefill.cu; each kernel alone: mla_prefill_tuning.h).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace tpb::gpu {

struct MlaPrefillShape {
  std::int64_t batch = 0;   // sequences
  std::int64_t q_len = 0;   // new tokens per sequence
  std::int64_t past = 0;    // cached tokens before them (keys: past + q_len per sequence)
  std::int64_t heads = 0;   // heads on this rank
  std::int64_t nope = 0;    // qk_nope_head_dim (128)
  std::int64_t rope = 0;    // qk_rope_head_dim (64)
  std::int64_t v_dim = 0;   // v_head_dim (128)
};

// q:      [batch, q_len, heads, nope + rope] (rope part rotated)
// k_nope: [batch, past + q_len, heads, nope];  k_rot: [batch, past + q_len, rope] (rotated)
// v:      [batch, past + q_len, heads, v_dim];  out: [batch, q_len, heads, v_dim]
void mla_prefill_attention(const __nv_bfloat16* q, const __nv_bfloat16* k_nope, const __nv_bfloat16* k_rot,
                           const __nv_bfloat16* v, const MlaPrefillShape& shape, float scale, __nv_bfloat16* out,
                           cudaStream_t stream);

}  // namespace tpb::gpu
