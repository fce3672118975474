// Plain-loop reference of the noaux_tc router (see tpb/kernels/moe_router.h).
#include "tpb/kernels/moe_router.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "tpb/check.h"

namespace tpb::kernels {
namespace {

// Indices of the k largest values, descending, lower index first on ties.
void top_k_indices(const float* v, std::int64_t n, std::int64_t k, std::vector<std::int64_t>& out) {
  out.resize(n);
  std::iota(out.begin(), out.end(), 0);
  std::partial_sort(out.begin(), out.begin() + k, out.end(), [v](std::int64_t a, std::int64_t b) {
    return v[a] > v[b] || (v[a] == v[b] && a < b);
  });
  out.resize(k);
}

}  // namespace

void moe_route_noaux_tc_ref(const float* logits, const float* bias, std::int64_t tokens, const RouterParams& p,
                            std::int32_t* topk_idx, float* topk_w) {
  const std::int64_t E = p.experts;
  TPB_CHECK(E > 0 && p.n_group > 0 && E % p.n_group == 0, "router: experts " << E << " not divisible by n_group " << p.n_group);
  const std::int64_t per_group = E / p.n_group;
  TPB_CHECK(per_group >= 2 || p.n_group == 1, "router: groups need at least 2 experts");
  TPB_CHECK(p.topk_group >= 1 && p.topk_group <= p.n_group, "router: topk_group " << p.topk_group);
  TPB_CHECK(p.top_k >= 1 && p.top_k <= p.topk_group * per_group, "router: top_k " << p.top_k << " exceeds kept experts");
  std::vector<float> s(E), sel(E), group_score(p.n_group);
  std::vector<std::int64_t> order;
  for (std::int64_t t = 0; t < tokens; ++t) {
    const float* lt = logits + t * E;
    for (std::int64_t e = 0; e < E; ++e) {
      s[e] = 1.0f / (1.0f + std::exp(-lt[e]));
      sel[e] = s[e] + bias[e];
    }
    if (p.n_group > 1) {
      for (std::int64_t g = 0; g < p.n_group; ++g) {
        top_k_indices(sel.data() + g * per_group, per_group, 2, order);
        group_score[g] = sel[g * per_group + order[0]] + sel[g * per_group + order[1]];
      }
      top_k_indices(group_score.data(), p.n_group, p.topk_group, order);
      std::vector<char> keep(p.n_group, 0);
      for (std::int64_t g : order) keep[g] = 1;
      for (std::int64_t e = 0; e < E; ++e)
        if (!keep[e / per_group]) sel[e] = -std::numeric_limits<float>::infinity();
    }
    top_k_indices(sel.data(), E, p.top_k, order);
    float sum = 0.0f;
    for (std::int64_t k = 0; k < p.top_k; ++k) {
      topk_idx[t * p.top_k + k] = static_cast<std::int32_t>(order[k]);
      topk_w[t * p.top_k + k] = s[order[k]];
      sum += s[order[k]];
    }
    for (std::int64_t k = 0; k < p.top_k; ++k) {
      float w = topk_w[t * p.top_k + k];
      if (p.norm_topk_prob) w /= (sum + 1e-20f);
      topk_w[t * p.top_k + k] = w * p.routed_scaling;
    }
  }
}

void moe_weights_for_choices_ref(const float* logits, std::int64_t tokens, const RouterParams& p,
                                 const std::int32_t* topk_idx, float* topk_w) {
  for (std::int64_t t = 0; t < tokens; ++t) {
    float sum = 0.0f;
    for (std::int64_t k = 0; k < p.top_k; ++k) {
      const std::int32_t e = topk_idx[t * p.top_k + k];
      TPB_CHECK(e >= 0 && e < p.experts, "router: pinned expert " << e << " outside [0, " << p.experts << ")");
      const float s = 1.0f / (1.0f + std::exp(-logits[t * p.experts + e]));
      topk_w[t * p.top_k + k] = s;
      sum += s;
    }
    for (std::int64_t k = 0; k < p.top_k; ++k) {
      float w = topk_w[t * p.top_k + k];
      if (p.norm_topk_prob) w /= (sum + 1e-20f);
      topk_w[t * p.top_k + k] = w * p.routed_scaling;
    }
  }
}

}  // namespace tpb::kernels
