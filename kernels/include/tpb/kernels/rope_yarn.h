// Rotary position embedding with YaRN frequency scaling, on interleaved pairs (GPT-J style,
// DeepSeek's rope_interleave = true): pair i is (x[2i], x[2i+1]), rotated by the angle
// pos * inv_freq[i], and cos/sin carry YaRN's attention factor.
//
// The frequencies follow HF's _compute_yarn_parameters: inv_freq blends the interpolated
// (1 / (factor * base^(2i/d))) and extrapolated (1 / base^(2i/d)) frequencies with a linear
// ramp between the correction dims of beta_fast and beta_slow over the original context.
// HF outputs the rotated pairs de-interleaved ([evens | odds]); we keep them in place.
// Both q and k get the same layout, so every q·k is the same sum of the same products.
#pragma once

#include <cstdint>
#include <vector>

namespace tpb::kernels {

struct RopeParams {
  int dim = 0;                    // rotary dims per head (qk_rope_head_dim), even
  double theta = 10000.0;         // base
  bool yarn = false;              // false: plain rope (factor, betas, mscales unused)
  double factor = 1.0;            // yarn scaling factor
  double beta_fast = 32.0;        // yarn high-frequency boundary, rotations
  double beta_slow = 1.0;         // yarn low-frequency boundary, rotations
  double mscale = 1.0;            // yarn mscale (0 = unset)
  double mscale_all_dim = 0.0;    // yarn mscale_all_dim (0 = unset)
  std::int64_t original_max_position_embeddings = 4096;  // tokens
};

struct RopeTable {
  std::vector<float> inv_freq;    // [dim / 2], radians per position
  float attention_factor = 1.0f;  // multiplies cos and sin (YaRN's mscale ratio)
};

// The frequencies and attention factor for `params`, rounded to fp32 as HF does.
RopeTable make_rope_table(const RopeParams& params);

// Rotates in place: x holds `n` vectors of `table.inv_freq.size() * 2` values, vector v
// starting at x + v * stride, at position positions[v / vectors_per_position].
void rope_interleaved_ref(float* x, std::int64_t n, std::int64_t stride, std::int64_t vectors_per_position,
                          const std::int64_t* positions, const RopeTable& table);

}  // namespace tpb::kernels
