// Plain-loop reference of non-absorbed MLA attention (see tpb/kernels/mla_attention.h).
#include "tpb/kernels/mla_attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "tpb/check.h"
#include "tpb/kernels/linear.h"

namespace tpb::kernels {

void softmax_inplace_ref(float* s, std::int64_t n) {
  float m = s[0];
  for (std::int64_t j = 1; j < n; ++j) m = std::max(m, s[j]);
  float sum = 0.0f;
  for (std::int64_t j = 0; j < n; ++j) {
    s[j] = std::exp(s[j] - m);
    sum += s[j];
  }
  const float inv = 1.0f / sum;
  for (std::int64_t j = 0; j < n; ++j) s[j] *= inv;
}

void mla_attention_ref(const float* q, const float* k_nope, const float* k_rot, const float* v, float* out,
                       std::int64_t q_len, std::int64_t kv_len, std::int64_t q_pos0, const MlaShape& sh,
                       float scale) {
  TPB_CHECK(kv_len >= q_pos0 + q_len, "mla_attention_ref: kv_len " << kv_len << " < q_pos0 + q_len = " << q_pos0 + q_len);
  const std::int64_t qk = sh.nope + sh.rope;
  std::vector<float> scores(kv_len);
  for (std::int64_t i = 0; i < q_len; ++i) {
    const std::int64_t visible = q_pos0 + i + 1;  // causal: keys 0..q_pos0+i
    for (std::int64_t h = 0; h < sh.heads; ++h) {
      const float* qh = q + (i * sh.heads + h) * qk;
      for (std::int64_t j = 0; j < visible; ++j) {
        const float nope = dot_f32(qh, k_nope + (j * sh.heads + h) * sh.nope, sh.nope);
        const float rot = dot_f32(qh + sh.nope, k_rot + j * sh.rope, sh.rope);
        scores[j] = (nope + rot) * scale;
      }
      softmax_inplace_ref(scores.data(), visible);
      float* oh = out + (i * sh.heads + h) * sh.v_dim;
      std::fill(oh, oh + sh.v_dim, 0.0f);
      for (std::int64_t j = 0; j < visible; ++j) {
        const float* vj = v + (j * sh.heads + h) * sh.v_dim;
        for (std::int64_t d = 0; d < sh.v_dim; ++d) oh[d] += scores[j] * vj[d];
      }
    }
  }
}

}  // namespace tpb::kernels
