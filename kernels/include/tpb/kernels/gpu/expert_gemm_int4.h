// Routed-expert GEMMs with INT4 weights and bf16 activations (W4A16), Kimi-K2.5's routed
// experts. The weight format is tpb/kernels/int4_format.h (compressed-tensors pack-quantized,
// symmetric, group 32) in the checkpoint's own layout, no repacking; the CPU reference is
// tpb/kernels/expert_gemm_int4.h. Expert e multiplies its sorted rows [offsets[e], offsets[e+1])
// (tpb/kernels/gpu/moe_dispatch.h):
//   y_sorted[p, o] = sum_j x_sorted[p, j] * W_e[o, j],   W_e[o, j] = bf16(q x scale),
// the weight dequantized in registers to exactly that bf16 and multiplied on tensor cores
// (mma.sync m16n8k16, sm_80 and later) with fp32 accumulation; bf16 out. Two kernels:
//   grouped  decode (a few rows per expert): weights as the MMA's A operand, the tokens as
//            its N = 8, weight-stationary (each weight byte read from HBM once per 8 rows of
//            its expert), the reduction over `in` split across the warps of a block and
//            summed in warp order.
//   prefill  many rows per expert: 128 x 128 tiles of (rows of one expert) x out, the tokens
//            as M; packed words and activations through a cp.async pipeline, the weights
//            dequantized once per tile into shared memory.
// Both read the offsets on the device, launch a grid that depends on (experts, pairs, out)
// only, never synchronise the stream, and can be captured in a CUDA graph. Fixed reduction
// order and no atomics: the same bits on every call (the two kernels' orders differ).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace tpb::gpu {

// One projection kind of one MoE layer, all experts:
//   packed  expert e's [out, in / 8] row-major words at packed + e * (out * in / 8); input j of
//           a row in word j / 8, nibble j % 8 from the lowest, q + 8;
//   scales  expert e's [out, in / 32] row-major bf16 at scales + e * (out * in / 32).
// in: a multiple of 32 (checked); out: any positive value. Gate and up of an expert are one
// [2I, H] matrix, gate rows first, as in the bf16 path. Both pointers 16-byte aligned.
struct Int4ExpertWeights {
  const std::uint32_t* packed = nullptr;
  const __nv_bfloat16* scales = nullptr;
  std::int64_t in = 0;   // input features, a multiple of 32
  std::int64_t out = 0;  // output features
};

// x_sorted [pairs, in] (16-byte aligned), offsets [experts + 1] on the device (offsets[0] = 0,
// non-decreasing, offsets[experts] = pairs), y_sorted [pairs, out]. experts <= 65535.
// Decode: one launch, CUDA-graph safe, the same semantics as expert_gemm_grouped.
void expert_gemm_int4_grouped(const __nv_bfloat16* x_sorted, const std::int32_t* offsets, std::int64_t experts,
                              std::int64_t pairs, const Int4ExpertWeights& w, __nv_bfloat16* y_sorted,
                              cudaStream_t stream);

// Prefill: the same contract; also one launch on device offsets (no host copy, no stream
// synchronisation, graph safe). pairs / 128 + min(experts, pairs) <= 65535.
void expert_gemm_int4_prefill(const __nv_bfloat16* x_sorted, const std::int32_t* offsets, std::int64_t experts,
                              std::int64_t pairs, const Int4ExpertWeights& w, __nv_bfloat16* y_sorted,
                              cudaStream_t stream);

namespace tuning {

// The grouped kernel's variants, for tpb_bench to compare side by side and for the test that
// holds each to expert_gemm_int4_grouped's bits (they share its sum order; they differ in rows
// per warp, tokens per pass and loads in flight). Not an engine interface.
int expert_gemm_int4_grouped_variants();
const char* expert_gemm_int4_grouped_variant_name(int variant);
// Whether the variant's shared memory fits this device's budget (the device's per-block maximum;
// 99 KiB under TPB_KERNELS=portable, as an RTX PRO 6000 allows): the cp.async ring variants take
// up to 152 KB; the dispatched register-pipeline kernels none.
bool expert_gemm_int4_grouped_variant_fits(int variant);
void expert_gemm_int4_grouped_variant(int variant, const __nv_bfloat16* x_sorted, const std::int32_t* offsets,
                                      std::int64_t experts, std::int64_t pairs, const Int4ExpertWeights& w,
                                      __nv_bfloat16* y_sorted, cudaStream_t stream);

}  // namespace tuning

}  // namespace tpb::gpu
