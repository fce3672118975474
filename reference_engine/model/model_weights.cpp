// Loads one rank's shard (see model_weights.h): every tensor of the layout table, in its
// order, into the field its slot names. Each request names the canonical global tensor, its
// global shape and the block this rank owns; the synthetic init kind and fan-in travel with it
// so a synthetic source can produce the values without a file.
#include "reference_engine/model/model_weights.h"

#include "tpb/check.h"

namespace tpb {
namespace {

// The field of `w` that holds tensor `t` (w's layers and experts already sized).
std::vector<float>& field(ModelWeights& w, const ShardTensor& t) {
  const TensorSlot slot = t.row->slot;
  if (t.layer < 0) {
    switch (slot) {
      case TensorSlot::embed: return w.embed;
      case TensorSlot::final_norm: return w.final_norm;
      case TensorSlot::lm_head: return w.lm_head;
      default: TPB_FAIL(t.request.name << ": not a model-level weight");
    }
  }
  LayerWeights& lw = w.layers.at(static_cast<std::size_t>(t.layer));
  MlpWeights& mlp = t.row->scope == TensorScope::routed_expert ? lw.experts.at(static_cast<std::size_t>(t.expert))
                                                               : lw.mlp;  // dense MLP or shared experts
  switch (slot) {
    case TensorSlot::input_norm: return lw.input_norm;
    case TensorSlot::post_attn_norm: return lw.post_attn_norm;
    case TensorSlot::q_a: return lw.q_a;
    case TensorSlot::q_a_norm: return lw.q_a_norm;
    case TensorSlot::q_b: return lw.q_b;
    case TensorSlot::kv_a: return lw.kv_a;
    case TensorSlot::kv_a_norm: return lw.kv_a_norm;
    case TensorSlot::kv_b: return lw.kv_b;
    case TensorSlot::o: return lw.o;
    case TensorSlot::gate: return mlp.gate;
    case TensorSlot::up: return mlp.up;
    case TensorSlot::down: return mlp.down;
    case TensorSlot::router: return lw.router;
    case TensorSlot::router_bias: return lw.router_bias;
    default: TPB_FAIL(t.request.name << ": not a layer weight");
  }
}

std::size_t block_bytes(const WeightRequest& r) { return static_cast<std::size_t>(r.rows() * r.cols()) * sizeof(float); }

}  // namespace

ShardDims shard_dims(const ModelConfig& c, Shard s) {
  c.validate_tp(s.tp);
  TPB_CHECK(s.rank >= 0 && s.rank < s.tp, "rank " << s.rank << " outside tp " << s.tp);
  ShardDims d;
  d.heads = c.num_attention_heads / s.tp;
  d.head_begin = s.rank * d.heads;
  d.vocab = c.vocab_size / s.tp;
  d.vocab_begin = s.rank * d.vocab;
  d.intermediate = c.intermediate_size / s.tp;
  d.moe_intermediate = c.moe_intermediate_size / s.tp;
  d.shared_intermediate = c.moe_intermediate_size * c.n_shared_experts / s.tp;
  return d;
}

ModelWeights load_model_weights(const ModelConfig& c, Shard s, WeightSource& source) {
  ModelWeights w;
  w.layers.resize(static_cast<std::size_t>(c.num_hidden_layers));
  for (std::int64_t l = 0; l < c.num_hidden_layers; ++l) {
    LayerWeights& lw = w.layers[static_cast<std::size_t>(l)];
    lw.moe = c.is_moe_layer(l);
    if (lw.moe) lw.experts.resize(static_cast<std::size_t>(c.n_routed_experts));
  }
  for_each_shard_tensor(tensor_layout(c), s, [&](const ShardTensor& t) {
    std::vector<float>& out = field(w, t);
    out.resize(static_cast<std::size_t>(t.request.rows() * t.request.cols()));
    source.read(t.request, out.data());
    w.bytes += block_bytes(t.request);
  });
  if (c.tie_word_embeddings) w.lm_head = w.embed;  // a copy: not counted in bytes
  return w;
}

std::size_t model_weights_bytes(const ModelConfig& c, Shard s) {
  std::size_t bytes = 0;
  for_each_shard_tensor(tensor_layout(c), s, [&](const ShardTensor& t) { bytes += block_bytes(t.request); });
  return bytes;
}

}  // namespace tpb
