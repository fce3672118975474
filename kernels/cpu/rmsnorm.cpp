// Plain-loop reference of RMSNorm (see tpb/kernels/rmsnorm.h). The mean of squares uses the
// same fixed-order dot product as the linear layer.
#include "tpb/kernels/rmsnorm.h"

#include <cmath>

#include "tpb/check.h"
#include "tpb/kernels/linear.h"

namespace tpb::kernels {

void rmsnorm_ref(const float* x, const float* weight, float* out, std::int64_t rows, std::int64_t dim,
                 std::int64_t stride, float eps) {
  TPB_CHECK(dim > 0 && stride >= dim, "rmsnorm_ref: dim=" << dim << " stride=" << stride);
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * stride;
    float* yr = out + r * stride;
    const float mean_sq = dot_f32(xr, xr, dim) / static_cast<float>(dim);
    const float inv_rms = 1.0f / std::sqrt(mean_sq + eps);
    for (std::int64_t i = 0; i < dim; ++i) yr[i] = weight[i] * (xr[i] * inv_rms);
  }
}

}  // namespace tpb::kernels
