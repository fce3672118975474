// Plain-loop reference of silu(gate) * up (see tpb/kernels/silu_and_mul.h).
#include "tpb/kernels/silu_and_mul.h"

#include <cmath>

namespace tpb::kernels {

void silu_and_mul_ref(const float* gate, const float* up, float* out, std::int64_t rows, std::int64_t dim) {
  const std::int64_t n = rows * dim;
  for (std::int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = (g / (1.0f + std::exp(-g))) * up[i];
  }
}

}  // namespace tpb::kernels
