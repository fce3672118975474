// DeepSeek-V3's noaux_tc router (HF DeepseekV3TopkRouter), on router logits x · W_gate^T:
//   s      = sigmoid(logits)                        [T, E]
//   sel    = s + bias                               (selection only)
//   group score = sum of the top-2 of sel in each of n_group groups; keep topk_group groups
//   idx    = top-k of sel over the kept groups (the rest are -inf)
//   w      = s[idx]; if norm: w /= (sum(w) + 1e-20);  w *= routed_scaling
// Ties break towards the lower index (torch.topk's order is unspecified; exact ties do not
// occur with real-valued weights).
#pragma once

#include <cstdint>

namespace tpb::kernels {

struct RouterParams {
  std::int64_t experts = 0;     // n_routed_experts
  std::int64_t top_k = 0;       // num_experts_per_tok
  std::int64_t n_group = 1;     // expert groups; experts % n_group == 0
  std::int64_t topk_group = 1;  // groups kept per token
  bool norm_topk_prob = true;   // renormalise the k weights to sum 1
  float routed_scaling = 1.0f;  // routed_scaling_factor
};

// logits: [tokens, experts] (pre-sigmoid); bias: [experts].
// topk_idx: [tokens, top_k] expert ids in descending order of sel; topk_w: [tokens, top_k].
void moe_route_noaux_tc_ref(const float* logits, const float* bias, std::int64_t tokens, const RouterParams& params,
                            std::int32_t* topk_idx, float* topk_w);

// The routing weights of given choices (topk_idx [tokens, top_k]) from these logits, with the
// same arithmetic as moe_route_noaux_tc_ref: w = sigmoid(logit), normalised, scaled. Used to
// pin an engine's routing to another engine's choices, so that two implementations can be
// compared on their arithmetic alone (a top-k choice flipped by rounding is a discontinuity
// of the model, not an arithmetic error).
void moe_weights_for_choices_ref(const float* logits, std::int64_t tokens, const RouterParams& params,
                                 const std::int32_t* topk_idx, float* topk_w);

}  // namespace tpb::kernels
