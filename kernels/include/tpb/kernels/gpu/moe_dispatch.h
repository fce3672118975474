// GPU MoE token dispatch and combine, deterministic and CUDA-graph safe (no host round trip):
//   plan     counting sort of the (token, slot) pairs by expert, stable in token order:
//            expert e owns sorted rows [offsets[e], offsets[e+1]); sorted_pairs[p] = t * top_k + slot;
//            position_of[t * top_k + slot] = p (the inverse map).
//   gather   x_sorted[p, :] = x[sorted_pairs[p] / top_k, :]
//   combine  out[t, :] = bf16( sum over slot = 0..top_k-1 in that order of
//                              topk_w[t, slot] * y_sorted[position_of[t*top_k+slot], :]
//                              + (shared ? shared[t, :] : 0) )   in fp32
// The CPU reference is the plain loop over tokens and slots (moe_dispatch_ref below).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace tpb::gpu {

// topk_idx: device [tokens, top_k]. offsets: device [experts + 1]; sorted_pairs, position_of:
// device [tokens * top_k]. touched_total, when not null: a device counter to which the call
// adds the number of experts with at least one pair (the experts whose weights this MoE call
// reads), for the weight-read roofline; no extra launch, graph safe.
void moe_dispatch_plan(const std::int32_t* topk_idx, std::int64_t tokens, std::int64_t top_k, std::int64_t experts,
                       std::int32_t* offsets, std::int32_t* sorted_pairs, std::int32_t* position_of,
                       cudaStream_t stream, unsigned long long* touched_total = nullptr);

void moe_gather(const __nv_bfloat16* x, const std::int32_t* sorted_pairs, std::int64_t pairs, std::int64_t top_k,
                std::int64_t hidden, __nv_bfloat16* x_sorted, cudaStream_t stream);

// shared may be nullptr.
void moe_combine(const __nv_bfloat16* y_sorted, const std::int32_t* position_of, const float* topk_w,
                 const __nv_bfloat16* shared, std::int64_t tokens, std::int64_t top_k, std::int64_t hidden,
                 __nv_bfloat16* out, cudaStream_t stream);

// Host reference of the plan (same outputs, host arrays).
void moe_dispatch_plan_ref(const std::int32_t* topk_idx, std::int64_t tokens, std::int64_t top_k,
                           std::int64_t experts, std::int32_t* offsets, std::int32_t* sorted_pairs,
                           std::int32_t* position_of);

}  // namespace tpb::gpu
