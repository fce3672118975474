// Plain-loop reference of absorbed MLA attention over the latent cache
// (see tpb/kernels/mla_decode.h).
#include "tpb/kernels/mla_decode.h"

#include <algorithm>
#include <vector>

#include "tpb/check.h"
#include "tpb/kernels/linear.h"

namespace tpb::kernels {

void mla_decode_absorbed_ref(const float* q, const float* cache, std::int64_t cache_stride, const float* kv_b,
                             float* out, std::int64_t q_len, std::int64_t kv_len, std::int64_t q_pos0,
                             const MlaShape& sh, float scale) {
  TPB_CHECK(kv_len >= q_pos0 + q_len, "mla_decode_absorbed_ref: kv_len " << kv_len << " < " << q_pos0 + q_len);
  TPB_CHECK(cache_stride >= sh.kv_lora + sh.rope, "mla_decode_absorbed_ref: cache stride " << cache_stride);
  const std::int64_t qk = sh.nope + sh.rope;
  const std::int64_t rows_per_head = sh.nope + sh.v_dim;
  std::vector<float> q_lat(sh.kv_lora), o_lat(sh.kv_lora), scores(kv_len);
  for (std::int64_t i = 0; i < q_len; ++i) {
    const std::int64_t visible = q_pos0 + i + 1;
    for (std::int64_t h = 0; h < sh.heads; ++h) {
      const float* qh = q + (i * sh.heads + h) * qk;
      const float* w_uk = kv_b + h * rows_per_head * sh.kv_lora;
      const float* w_uv = w_uk + sh.nope * sh.kv_lora;
      // q_lat[l] = sum_n q_nope[n] * W_UK[n, l], accumulated over n in order.
      std::fill(q_lat.begin(), q_lat.end(), 0.0f);
      for (std::int64_t n = 0; n < sh.nope; ++n) {
        const float qn = qh[n];
        const float* row = w_uk + n * sh.kv_lora;
        for (std::int64_t l = 0; l < sh.kv_lora; ++l) q_lat[l] += qn * row[l];
      }
      for (std::int64_t j = 0; j < visible; ++j) {
        const float* cj = cache + j * cache_stride;
        scores[j] = (dot_f32(q_lat.data(), cj, sh.kv_lora) + dot_f32(qh + sh.nope, cj + sh.kv_lora, sh.rope)) * scale;
      }
      softmax_inplace_ref(scores.data(), visible);
      std::fill(o_lat.begin(), o_lat.end(), 0.0f);
      for (std::int64_t j = 0; j < visible; ++j) {
        const float p = scores[j];
        const float* cj = cache + j * cache_stride;
        for (std::int64_t l = 0; l < sh.kv_lora; ++l) o_lat[l] += p * cj[l];
      }
      float* oh = out + (i * sh.heads + h) * sh.v_dim;
      for (std::int64_t d = 0; d < sh.v_dim; ++d) oh[d] = dot_f32(w_uv + d * sh.kv_lora, o_lat.data(), sh.kv_lora);
    }
  }
}

}  // namespace tpb::kernels
