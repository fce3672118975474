// Reference of YaRN rope on interleaved pairs (see tpb/kernels/rope_yarn.h). The frequency
// maths mirrors HF's float32 tensor ops (pow, reciprocal, ramp in float32), the correction
// range in double as Python does.
#include "tpb/kernels/rope_yarn.h"

#include <algorithm>
#include <cmath>

#include "tpb/check.h"

namespace tpb::kernels {
namespace {

double yarn_get_mscale(double scale, double mscale) {
  if (scale <= 1.0) return 1.0;
  return 0.1 * mscale * std::log(scale) + 1.0;
}

double correction_dim(double rotations, int dim, double base, double max_pos) {
  return (dim * std::log(max_pos / (rotations * 2.0 * M_PI))) / (2.0 * std::log(base));
}

}  // namespace

RopeTable make_rope_table(const RopeParams& p) {
  TPB_CHECK(p.dim > 0 && p.dim % 2 == 0, "rope dim " << p.dim << " must be positive and even");
  const int half = p.dim / 2;
  RopeTable table;
  table.inv_freq.resize(half);
  for (int i = 0; i < half; ++i) {
    // torch: base ** (arange(0, dim, 2).float() / dim) in float32.
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(p.dim);
    const float pos_freq = std::pow(static_cast<float>(p.theta), exponent);
    const float extrapolation = 1.0f / pos_freq;
    if (!p.yarn) {
      table.inv_freq[i] = extrapolation;
      continue;
    }
    const float interpolation = 1.0f / (static_cast<float>(p.factor) * pos_freq);
    double low = std::floor(correction_dim(p.beta_fast, p.dim, p.theta, double(p.original_max_position_embeddings)));
    double high = std::ceil(correction_dim(p.beta_slow, p.dim, p.theta, double(p.original_max_position_embeddings)));
    low = std::max(low, 0.0);
    high = std::min(high, double(p.dim - 1));
    if (low == high) high += 0.001;  // HF: prevent a division by zero
    const float ramp = std::clamp((static_cast<float>(i) - static_cast<float>(low)) / static_cast<float>(high - low),
                                  0.0f, 1.0f);
    const float extrapolation_factor = 1.0f - ramp;
    table.inv_freq[i] = interpolation * (1.0f - extrapolation_factor) + extrapolation * extrapolation_factor;
  }
  if (p.yarn) {
    const double af = (p.mscale != 0.0 && p.mscale_all_dim != 0.0)
                          ? yarn_get_mscale(p.factor, p.mscale) / yarn_get_mscale(p.factor, p.mscale_all_dim)
                          : yarn_get_mscale(p.factor, 1.0);
    table.attention_factor = static_cast<float>(af);
  }
  return table;
}

void rope_interleaved_ref(float* x, std::int64_t n, std::int64_t stride, std::int64_t vectors_per_position,
                          const std::int64_t* positions, const RopeTable& table) {
  const std::int64_t half = static_cast<std::int64_t>(table.inv_freq.size());
  for (std::int64_t v = 0; v < n; ++v) {
    float* xv = x + v * stride;
    const float pos = static_cast<float>(positions[v / vectors_per_position]);
    for (std::int64_t i = 0; i < half; ++i) {
      const float angle = pos * table.inv_freq[i];  // HF: inv_freq @ position_ids in float32
      const float c = std::cos(angle) * table.attention_factor;
      const float s = std::sin(angle) * table.attention_factor;
      const float a = xv[2 * i];
      const float b = xv[2 * i + 1];
      xv[2 * i] = a * c - b * s;
      xv[2 * i + 1] = b * c + a * s;
    }
  }
}

}  // namespace tpb::kernels
