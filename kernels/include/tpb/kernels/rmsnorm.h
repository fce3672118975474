// RMSNorm as HF's DeepseekV3RMSNorm computes it in fp32:
//   out[r, i] = weight[i] * (x[r, i] * rsqrt(mean_i(x[r, i]^2) + eps))
#pragma once

#include <cstdint>

namespace tpb::kernels {

// x, out: [rows, dim] with row stride `stride` (>= dim; out may equal x). weight: [dim].
void rmsnorm_ref(const float* x, const float* weight, float* out, std::int64_t rows, std::int64_t dim,
                 std::int64_t stride, float eps);

}  // namespace tpb::kernels
