// The gated activation of every MLP and expert: out[i] = silu(gate[i]) * up[i],
// silu(g) = g * sigmoid(g) = g / (1 + exp(-g)).
#pragma once

#include <cstdint>

namespace tpb::kernels {

// gate, up, out: [rows, dim] each, contiguous (out may alias gate or up).
void silu_and_mul_ref(const float* gate, const float* up, float* out, std::int64_t rows, std::int64_t dim);

}  // namespace tpb::kernels
