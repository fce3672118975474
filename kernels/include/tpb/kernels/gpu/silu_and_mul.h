// GPU gated activation on the fused gate|up layout the engine's GEMMs produce (CPU
// reference: tpb/kernels/silu_and_mul.h): out[r, i] = silu(gu[r, i]) * gu[r, inter + i].
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace tpb::gpu {

// gate_up: [rows, 2 * inter] (gate columns first, then up); out: [rows, inter]. fp32 math.
void silu_and_mul(const __nv_bfloat16* gate_up, __nv_bfloat16* out, std::int64_t rows, std::int64_t inter,
                  cudaStream_t stream);

}  // namespace tpb::gpu
