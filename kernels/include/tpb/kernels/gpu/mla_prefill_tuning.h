// The kernels behind mla_prefill_attention, one by one, for tpb_bench to time side by side and
// for the test that holds each to the CPU reference. Not an engine interface.
//   0 tensor_core          mma.sync m16n8k16, P enters the P·V MMA as bf16 (flash-attention's
//                          choice)
//   1 tensor_core_split_p  the same with P = bf16 hi + lo, two MMAs (P to 2^-16 relative): what
//                          mla_prefill_attention launches at widths that are multiples of 8
//                          other than Kimi-K2.5's (mla_prefill.cu says why split P)
//   2 cuda_core            fp32 FMA on CUDA cores, any even head dims: the fallback
//   3 wgmma_split_p        Hopper warpgroup MMA (both score operands from shared memory, P from
//                          registers as bf16 hi + lo), Kimi-K2.5's widths only (nope 128, rope 64,
//                          v_dim 128): kernels/cuda/mla_prefill_wgmma.cu
//   4 wgmma_split_p_overlap the same with each warpgroup's P.V of a key tile beside its scores
//                          and softmax of the next (FlashAttention-3's intra-warpgroup
//                          pipelining, three stages of key and value tiles), the same bits; what
//                          mla_prefill_attention launches at Kimi-K2.5's widths
// Each variant is deterministic (fixed sum order, no atomics).
//
// The two mma.sync tensor-core variants run in one of a few shared-memory configurations (128
// query rows and two stages of 64 keys: 134 KiB at Kimi-K2.5's widths, as tuned on an H200;
// 128 rows and 32-key stages; 64 rows and 32-key stages): the first whose block fits the
// device's budget (tpb/kernels/kernel_paths.h: its maximum, 99 KiB under TPB_KERNELS=portable).
// Their bits differ from each other's; each is deterministic and within the same test budget.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>

#include "tpb/kernels/gpu/mla_prefill.h"

namespace tpb::gpu::tuning {

int mla_prefill_variants();
const char* mla_prefill_variant_name(int variant);
// Whether the variant takes these head dims (the tensor-core ones: nope, rope and v_dim
// multiples of 8, nope + rope <= 256, v_dim <= 128; their pointers must be 16-byte aligned).
bool mla_prefill_variant_supports(int variant, const MlaPrefillShape& shape);
// Whether mla_prefill_attention takes the tensor cores where they apply (mla_prefill.cu says
// since when and on what evidence).
bool mla_prefill_tensor_core_by_default();
// The variant mla_prefill_attention launches for this shape with 16-byte aligned pointers.
int mla_prefill_default_variant(const MlaPrefillShape& shape);
// mla_prefill_attention with the given variant's kernel; throws where it does not support the
// shape. tc_config (tensor_core, tensor_core_split_p only) >= 0 forces that shared-memory
// configuration (it must fit the device: mla_prefill_tc_config_runs); < 0 takes the one
// mla_prefill_attention takes (mla_prefill_tc_config).
void mla_prefill_variant(int variant, const __nv_bfloat16* q, const __nv_bfloat16* k_nope, const __nv_bfloat16* k_rot,
                         const __nv_bfloat16* v, const MlaPrefillShape& shape, float scale, __nv_bfloat16* out,
                         cudaStream_t stream, int tc_config = -1);

// The tensor-core variants' configurations, largest first: "q128_k64", "q128_k32", "q64_k32"
// (query rows per CTA, keys per stage).
int mla_prefill_tc_configs();
const char* mla_prefill_tc_config_name(int tc_config);
// The dynamic shared memory of one block of the configuration at these widths, bytes (the
// kernel has no static shared memory).
std::size_t mla_prefill_tc_config_smem_bytes(int tc_config, const MlaPrefillShape& shape);
// The configuration the tensor-core variants take on the calling thread's current device.
int mla_prefill_tc_config(const MlaPrefillShape& shape);
// Whether the tensor cores take the shape and the configuration's block fits this device's own
// maximum (whatever the budget): the ones a test holds to the reference.
bool mla_prefill_tc_config_runs(int tc_config, const MlaPrefillShape& shape);

}  // namespace tpb::gpu::tuning
