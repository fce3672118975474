// Plain-loop reference of the linear layer (see tpb/kernels/linear.h).
#include "tpb/kernels/linear.h"

#include "tpb/check.h"

namespace tpb::kernels {

float dot_f32(const float* a, const float* b, std::int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) acc[k] += a[i + k] * b[i + k];
  }
  for (int k = 0; i < n; ++i, ++k) acc[k] += a[i] * b[i];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

void linear_ref(const float* x, const float* w, float* y, std::int64_t rows, std::int64_t in,
                std::int64_t out) {
  TPB_CHECK(rows >= 0 && in > 0 && out >= 0, "linear_ref: bad sizes rows=" << rows << " in=" << in << " out=" << out);
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * in;
    float* yr = y + r * out;
    for (std::int64_t o = 0; o < out; ++o) yr[o] = dot_f32(xr, w + o * in, in);
  }
}

}  // namespace tpb::kernels
