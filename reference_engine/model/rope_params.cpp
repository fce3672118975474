#include "reference_engine/model/rope_params.h"

namespace tpb {

kernels::RopeParams rope_params(const ModelConfig& c) {
  kernels::RopeParams p;
  p.dim = static_cast<int>(c.qk_rope_head_dim);
  p.theta = c.rope.theta;
  p.yarn = c.rope.type == "yarn";
  p.factor = c.rope.factor;
  p.beta_fast = c.rope.beta_fast;
  p.beta_slow = c.rope.beta_slow;
  p.mscale = c.rope.mscale;
  p.mscale_all_dim = c.rope.mscale_all_dim;
  p.original_max_position_embeddings = c.rope.original_max_position_embeddings;
  return p;
}

}  // namespace tpb
