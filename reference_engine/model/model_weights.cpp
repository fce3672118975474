// Loads one rank's shard (see model_weights.h). Each request names the canonical global
// tensor, its global shape and the block this rank owns; the synthetic init kind and fan-in
// travel with it so a synthetic source can produce the values without a file.
#include "reference_engine/model/model_weights.h"

#include <string>

#include "tpb/check.h"

namespace tpb {
namespace {

using synthetic::InitKind;

struct Loader {
  WeightSource& source;
  std::size_t bytes = 0;

  std::vector<float> read(WeightRequest req) {
    std::vector<float> out(static_cast<std::size_t>(req.rows() * req.cols()));
    source.read(req, out.data());
    bytes += out.size() * sizeof(float);
    return out;
  }
  std::vector<float> full(const std::string& name, std::vector<std::int64_t> shape, InitKind kind) {
    const std::int64_t fan_in = shape.size() == 2 ? shape[1] : 1;
    return read(full_tensor(name, std::move(shape), kind, fan_in));
  }
  std::vector<float> norm(const std::string& name, std::int64_t dim) { return full(name, {dim}, InitKind::norm); }
  // Rows [begin, begin + count) of a [rows, cols] tensor.
  std::vector<float> rows(const std::string& name, std::int64_t rows, std::int64_t cols, std::int64_t begin,
                          std::int64_t count, InitKind kind = InitKind::linear) {
    WeightRequest r = full_tensor(name, {rows, cols}, kind, cols);
    r.row_begin = begin;
    r.row_end = begin + count;
    return read(r);
  }
  // Columns [begin, begin + count) of a [rows, cols] tensor.
  std::vector<float> cols(const std::string& name, std::int64_t rows, std::int64_t cols, std::int64_t begin,
                          std::int64_t count) {
    WeightRequest r = full_tensor(name, {rows, cols}, InitKind::linear, cols);
    r.col_begin = begin;
    r.col_end = begin + count;
    return read(r);
  }
  MlpWeights mlp(const std::string& prefix, std::int64_t hidden, std::int64_t inter, std::int64_t inter_local,
                 std::int64_t begin) {
    MlpWeights m;
    m.gate = rows(prefix + ".gate_proj.weight", inter, hidden, begin, inter_local);
    m.up = rows(prefix + ".up_proj.weight", inter, hidden, begin, inter_local);
    m.down = cols(prefix + ".down_proj.weight", hidden, inter, begin, inter_local);
    return m;
  }
};

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
  const ShardDims d = shard_dims(c, s);
  const std::int64_t H = c.hidden_size, heads = c.num_attention_heads, qk = c.qk_head_dim();
  const std::int64_t kv_rows = c.qk_nope_head_dim + c.v_head_dim;
  Loader L{source};
  ModelWeights w;
  w.embed = L.rows("model.embed_tokens.weight", c.vocab_size, H, d.vocab_begin, d.vocab, InitKind::embedding);
  w.layers.resize(c.num_hidden_layers);
  for (std::int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l);
    LayerWeights& lw = w.layers[l];
    lw.input_norm = L.norm(p + ".input_layernorm.weight", H);
    lw.post_attn_norm = L.norm(p + ".post_attention_layernorm.weight", H);
    const std::string a = p + ".self_attn";
    if (c.q_lora_rank > 0) {
      lw.q_a = L.full(a + ".q_a_proj.weight", {c.q_lora_rank, H}, InitKind::linear);
      lw.q_a_norm = L.norm(a + ".q_a_layernorm.weight", c.q_lora_rank);
      lw.q_b = L.rows(a + ".q_b_proj.weight", heads * qk, c.q_lora_rank, d.head_begin * qk, d.heads * qk);
    } else {
      lw.q_b = L.rows(a + ".q_proj.weight", heads * qk, H, d.head_begin * qk, d.heads * qk);
    }
    lw.kv_a = L.full(a + ".kv_a_proj_with_mqa.weight", {c.kv_lora_rank + c.qk_rope_head_dim, H}, InitKind::linear);
    lw.kv_a_norm = L.norm(a + ".kv_a_layernorm.weight", c.kv_lora_rank);
    lw.kv_b = L.rows(a + ".kv_b_proj.weight", heads * kv_rows, c.kv_lora_rank, d.head_begin * kv_rows, d.heads * kv_rows);
    lw.o = L.cols(a + ".o_proj.weight", H, heads * c.v_head_dim, d.head_begin * c.v_head_dim, d.heads * c.v_head_dim);
    lw.moe = c.is_moe_layer(l);
    const std::string m = p + ".mlp";
    if (!lw.moe) {
      lw.mlp = L.mlp(m, H, c.intermediate_size, d.intermediate, s.rank * d.intermediate);
      continue;
    }
    lw.router = L.full(m + ".gate.weight", {c.n_routed_experts, H}, InitKind::linear);
    lw.router_bias = L.full(m + ".gate.e_score_correction_bias", {c.n_routed_experts}, InitKind::bias);
    lw.experts.resize(c.n_routed_experts);
    for (std::int64_t e = 0; e < c.n_routed_experts; ++e)
      lw.experts[e] = L.mlp(m + ".experts." + std::to_string(e), H, c.moe_intermediate_size, d.moe_intermediate,
                            s.rank * d.moe_intermediate);
    if (c.n_shared_experts > 0)
      lw.mlp = L.mlp(m + ".shared_experts", H, c.moe_intermediate_size * c.n_shared_experts, d.shared_intermediate,
                     s.rank * d.shared_intermediate);
  }
  w.final_norm = L.norm("model.norm.weight", H);
  w.lm_head = c.tie_word_embeddings ? w.embed : L.rows("lm_head.weight", c.vocab_size, H, d.vocab_begin, d.vocab);
  w.bytes = L.bytes;
  return w;
}

}  // namespace tpb
