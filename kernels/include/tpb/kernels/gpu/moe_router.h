// GPU noaux_tc router (CPU reference: tpb/kernels/moe_router.h, same ties rule: the lower
// expert index wins). One block per token; fp32 throughout; no atomics.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "tpb/kernels/moe_router.h"

namespace tpb::gpu {

// logits: device fp32 [tokens, experts]; bias: device fp32 [experts].
// topk_idx: device [tokens, top_k]; topk_w: device fp32 [tokens, top_k], as the reference.
void moe_route_noaux_tc(const float* logits, const float* bias, std::int64_t tokens,
                        const kernels::RouterParams& params, std::int32_t* topk_idx, float* topk_w,
                        cudaStream_t stream);

}  // namespace tpb::gpu
