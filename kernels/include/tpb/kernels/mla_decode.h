// MLA attention in the absorbed form serving engines decode with, reading the latent KV
// cache directly. Per head h, with W_UK[h] = rows [h*(nope+v), h*(nope+v)+nope) and
// W_UV[h] = the next v rows of kv_b_proj ([heads*(nope+v), kv_lora] on this rank):
//   q_lat  = q_nope[h] · W_UK[h]                          (into the kv_lora latent)
//   score  = (q_lat·c_j + q_rot[h]·k_rot_j) * scale       (c_j, k_rot_j: cache row j)
//   o_lat  = sum_j softmax(score)_j * c_j
//   out[h] = W_UV[h] · o_lat                               (v_dim values)
// It equals the plain form because k_nope_j[h] = W_UK[h] · c_j and v_j[h] = W_UV[h] · c_j.
#pragma once

#include <cstdint>

#include "tpb/kernels/mla_attention.h"

namespace tpb::kernels {

// q:     [q_len, heads, nope + rope] (rope part rotated)
// cache: [kv_len, cache_stride] rows of [c (kv_lora) | k_rot (rope)], for one sequence and layer
// kv_b:  [heads * (nope + v_dim), kv_lora], this rank's heads of kv_b_proj
// out:   [q_len, heads, v_dim]. Query i sits at position q_pos0 + i (causal).
void mla_decode_absorbed_ref(const float* q, const float* cache, std::int64_t cache_stride, const float* kv_b,
                             float* out, std::int64_t q_len, std::int64_t kv_len, std::int64_t q_pos0,
                             const MlaShape& shape, float scale);

}  // namespace tpb::kernels
