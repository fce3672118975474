// The fp32 reference forward pass (see engine.h). Buffers are token-major: [tokens, features]
// with token t = b * n + i for sequence b and new-token index i.
#include "reference_engine/model/engine.h"
#include "reference_engine/model/rope_params.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "tpb/check.h"
#include "tpb/kernels/embedding.h"
#include "tpb/kernels/linear.h"
#include "tpb/kernels/mla_attention.h"
#include "tpb/kernels/mla_decode.h"
#include "tpb/kernels/moe_router.h"
#include "tpb/kernels/rmsnorm.h"
#include "tpb/kernels/silu_and_mul.h"

namespace tpb {
namespace {

// y = down(silu(gate(x)) * up(x)) for `rows` tokens.
void mlp_forward(const MlpWeights& w, const float* x, std::int64_t rows, std::int64_t hidden, std::int64_t inter,
                 float* y) {
  std::vector<float> g(rows * inter), u(rows * inter);
  kernels::linear_ref(x, w.gate.data(), g.data(), rows, hidden, inter);
  kernels::linear_ref(x, w.up.data(), u.data(), rows, hidden, inter);
  kernels::silu_and_mul_ref(g.data(), u.data(), g.data(), rows, inter);
  kernels::linear_ref(g.data(), w.down.data(), y, rows, inter, hidden);
}

}  // namespace

Engine::Engine(const ModelConfig& config, Shard shard, Communicator& comm, WeightSource& weights,
               EngineOptions options)
    : config_(config), shard_(shard), dims_(shard_dims(config, shard)), comm_(comm), options_(options) {
  config_.validate();
  TPB_CHECK(comm.size() == shard.tp && comm.rank() == shard.rank,
            "engine shard (rank " << shard.rank << " of " << shard.tp << ") does not match the communicator (rank "
                                  << comm.rank() << " of " << comm.size() << ")");
  // Refuse a model that cannot fit before allocating any of it (a full Kimi-K2.5 in fp32 is
  // ~4 TB): parameters / tp is a lower bound of this rank's share (replicated parts are not
  // divided).
  const double need_bytes = static_cast<double>(config_.parameter_count()) / shard.tp * sizeof(float);
  const double have_bytes = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGESIZE));
  TPB_INPUT_CHECK(have_bytes <= 0 || need_bytes < have_bytes,
                  (config_.name.empty() ? std::string("the model") : config_.name)
                      << " needs at least " << need_bytes / (1 << 30) << " GiB of fp32 weights per rank at TP "
                      << shard.tp << " but this machine has " << have_bytes / (1 << 30)
                      << " GiB: use a smaller preset or overrides (num_hidden_layers, n_routed_experts)");
  if (options_.on_phase) options_.on_phase("before_weights");
  weights_ = load_model_weights(config_, shard_, weights);
  if (options_.on_phase) options_.on_phase("after_weights");
  rope_ = kernels::make_rope_table(rope_params(config_));
  attention_scale_ = static_cast<float>(config_.attention_scale());
  stats_.expert_hits.assign(config_.n_routed_experts, 0);
}

void Engine::all_reduce(std::vector<float>& buf) {
  comm_.all_reduce(buf.data(), buf.data(), buf.size(), DType::f32, nullptr);
  ++stats_.all_reduces;
}

void Engine::prefill(const std::vector<std::int64_t>& tokens, std::int64_t batch) {
  TPB_INPUT_CHECK(batch > 0 && !tokens.empty() && tokens.size() % batch == 0,
                  "prefill: " << tokens.size() << " tokens do not split into " << batch << " equal sequences");
  const std::int64_t n = static_cast<std::int64_t>(tokens.size()) / batch;
  cache_ = MlaKvCache(config_.num_hidden_layers, batch, std::max(options_.kv_capacity_tokens, n),
                      config_.kv_cache_width());
  extend(tokens, n, options_.attention == AttentionForm::automatic ? AttentionForm::plain : options_.attention);
}

void Engine::decode(const std::vector<std::int64_t>& tokens) {
  TPB_INPUT_CHECK(cache_.batch() > 0, "decode before prefill");
  TPB_INPUT_CHECK(static_cast<std::int64_t>(tokens.size()) == cache_.batch(),
                  "decode: " << tokens.size() << " tokens for " << cache_.batch() << " sequences");
  extend(tokens, 1, options_.attention == AttentionForm::automatic ? AttentionForm::absorbed : options_.attention);
}

void Engine::extend(const std::vector<std::int64_t>& tokens, std::int64_t n, AttentionForm form) {
  const std::int64_t B = cache_.batch();
  TPB_CHECK(B > 0 && n > 0 && static_cast<std::int64_t>(tokens.size()) == B * n,
            "extend: " << tokens.size() << " tokens for " << B << " sequences of " << n);
  TPB_CHECK(form != AttentionForm::automatic, "extend needs a concrete attention form");
  const std::int64_t H = config_.hidden_size, T = B * n, past = cache_.length();
  cache_.reserve(past + n);

  std::vector<float> x(T * H);
  kernels::embedding_ref(tokens.data(), T, weights_.embed.data(), dims_.vocab_begin, dims_.vocab_begin + dims_.vocab,
                         config_.vocab_size, H, x.data());
  all_reduce(x);

  std::vector<float> xn(T * H), partial(T * H);
  const float eps = static_cast<float>(config_.rms_norm_eps);
  for (std::int64_t l = 0; l < config_.num_hidden_layers; ++l) {
    const LayerWeights& lw = weights_.layers[l];
    kernels::rmsnorm_ref(x.data(), lw.input_norm.data(), xn.data(), T, H, H, eps);
    attention(l, xn.data(), n, past, form, partial.data());
    all_reduce(partial);
    for (std::int64_t i = 0; i < T * H; ++i) x[i] += partial[i];
    kernels::rmsnorm_ref(x.data(), lw.post_attn_norm.data(), xn.data(), T, H, H, eps);
    ffn(l, xn.data(), T, partial.data());
    all_reduce(partial);
    for (std::int64_t i = 0; i < T * H; ++i) x[i] += partial[i];
  }
  cache_.set_length(past + n);

  kernels::rmsnorm_ref(x.data(), weights_.final_norm.data(), xn.data(), T, H, H, eps);
  std::vector<float> local(T * dims_.vocab), gathered(T * config_.vocab_size);
  kernels::linear_ref(xn.data(), weights_.lm_head.data(), local.data(), T, H, dims_.vocab);
  comm_.all_gather(local.data(), gathered.data(), local.size(), DType::f32, nullptr);
  ++stats_.all_gathers;
  // gathered is [rank][token][vocab_local]; logits are [token][rank * vocab_local + v].
  logits_.resize(T * config_.vocab_size);
  for (int r = 0; r < shard_.tp; ++r)
    for (std::int64_t t = 0; t < T; ++t)
      std::memcpy(logits_.data() + t * config_.vocab_size + r * dims_.vocab,
                  gathered.data() + (r * T + t) * dims_.vocab, sizeof(float) * dims_.vocab);
  stats_.tokens += T;
}

void Engine::attention(std::int64_t layer, const float* xn, std::int64_t n, std::int64_t past, AttentionForm form,
                       float* out) {
  const ModelConfig& c = config_;
  const LayerWeights& lw = weights_.layers[layer];
  const std::int64_t B = cache_.batch(), T = B * n, H = c.hidden_size, heads = dims_.heads;
  const std::int64_t qk = c.qk_head_dim(), lora = c.kv_lora_rank, rope = c.qk_rope_head_dim, width = lora + rope;
  const float eps = static_cast<float>(c.rms_norm_eps);

  // q: [T, heads, qk]
  std::vector<float> q(T * heads * qk);
  if (c.q_lora_rank > 0) {
    std::vector<float> qa(T * c.q_lora_rank);
    kernels::linear_ref(xn, lw.q_a.data(), qa.data(), T, H, c.q_lora_rank);
    kernels::rmsnorm_ref(qa.data(), lw.q_a_norm.data(), qa.data(), T, c.q_lora_rank, c.q_lora_rank, eps);
    kernels::linear_ref(qa.data(), lw.q_b.data(), q.data(), T, c.q_lora_rank, heads * qk);
  } else {
    kernels::linear_ref(xn, lw.q_b.data(), q.data(), T, H, heads * qk);
  }
  // ckv: [T, kv_lora | rope] -> normalised latent and rotated key, straight into the cache rows.
  std::vector<float> ckv(T * width);
  kernels::linear_ref(xn, lw.kv_a.data(), ckv.data(), T, H, width);
  kernels::rmsnorm_ref(ckv.data(), lw.kv_a_norm.data(), ckv.data(), T, lora, width, eps);
  std::vector<std::int64_t> positions(T);
  for (std::int64_t t = 0; t < T; ++t) positions[t] = past + t % n;
  kernels::rope_interleaved_ref(ckv.data() + lora, T, width, 1, positions.data(), rope_);
  kernels::rope_interleaved_ref(q.data() + c.qk_nope_head_dim, T * heads, qk, heads, positions.data(), rope_);
  for (std::int64_t t = 0; t < T; ++t)
    std::memcpy(cache_.row(layer, t / n, past + t % n), ckv.data() + t * width, sizeof(float) * width);

  kernels::MlaShape shape{heads, c.qk_nope_head_dim, rope, c.v_head_dim, lora};
  const std::int64_t kv_len = past + n;
  std::vector<float> attn(T * heads * c.v_head_dim);
  for (std::int64_t b = 0; b < B; ++b) {
    const float* cache_seq = cache_.row(layer, b, 0);
    const float* qb = q.data() + b * n * heads * qk;
    float* ob = attn.data() + b * n * heads * c.v_head_dim;
    if (form == AttentionForm::absorbed) {
      kernels::mla_decode_absorbed_ref(qb, cache_seq, width, lw.kv_b.data(), ob, n, kv_len, past, shape,
                                       attention_scale_);
      continue;
    }
    // Plain form: expand every cached latent through kv_b_proj, as HF does.
    const std::int64_t kv_rows = c.qk_nope_head_dim + c.v_head_dim;
    std::vector<float> latent(kv_len * lora), k_rot(kv_len * rope), kv(kv_len * heads * kv_rows);
    for (std::int64_t j = 0; j < kv_len; ++j) {
      std::memcpy(latent.data() + j * lora, cache_seq + j * width, sizeof(float) * lora);
      std::memcpy(k_rot.data() + j * rope, cache_seq + j * width + lora, sizeof(float) * rope);
    }
    kernels::linear_ref(latent.data(), lw.kv_b.data(), kv.data(), kv_len, lora, heads * kv_rows);
    std::vector<float> k_nope(kv_len * heads * c.qk_nope_head_dim), v(kv_len * heads * c.v_head_dim);
    for (std::int64_t j = 0; j < kv_len; ++j)
      for (std::int64_t h = 0; h < heads; ++h) {
        const float* src = kv.data() + (j * heads + h) * kv_rows;
        std::memcpy(k_nope.data() + (j * heads + h) * c.qk_nope_head_dim, src, sizeof(float) * c.qk_nope_head_dim);
        std::memcpy(v.data() + (j * heads + h) * c.v_head_dim, src + c.qk_nope_head_dim, sizeof(float) * c.v_head_dim);
      }
    kernels::mla_attention_ref(qb, k_nope.data(), k_rot.data(), v.data(), ob, n, kv_len, past, shape,
                               attention_scale_);
  }
  kernels::linear_ref(attn.data(), lw.o.data(), out, T, heads * c.v_head_dim, H);
}

void Engine::ffn(std::int64_t layer, const float* xn, std::int64_t T, float* out) {
  const ModelConfig& c = config_;
  const LayerWeights& lw = weights_.layers[layer];
  const std::int64_t H = c.hidden_size;
  if (!lw.moe) {
    mlp_forward(lw.mlp, xn, T, H, dims_.intermediate, out);
    return;
  }
  const std::int64_t E = c.n_routed_experts, K = c.num_experts_per_tok;
  std::vector<float> router_logits(T * E);
  kernels::linear_ref(xn, lw.router.data(), router_logits.data(), T, H, E);
  std::vector<std::int32_t> idx(T * K);
  std::vector<float> w(T * K);
  kernels::RouterParams rp{E, K, c.n_group, c.topk_group, c.norm_topk_prob, static_cast<float>(c.routed_scaling_factor)};
  kernels::moe_route_noaux_tc_ref(router_logits.data(), lw.router_bias.data(), T, rp, idx.data(), w.data());
  if (options_.pinned_routing != nullptr) {
    const std::vector<std::int32_t>& pinned = *options_.pinned_routing;
    TPB_CHECK(pinned_cursor_ + idx.size() <= pinned.size(),
              "pinned routing: " << pinned.size() << " ids, but this MoE call needs ids from " << pinned_cursor_
                                 << " to " << pinned_cursor_ + idx.size());
    std::copy(pinned.begin() + pinned_cursor_, pinned.begin() + pinned_cursor_ + idx.size(), idx.begin());
    pinned_cursor_ += idx.size();
    kernels::moe_weights_for_choices_ref(router_logits.data(), T, rp, idx.data(), w.data());
  }
  if (options_.record_routing) stats_.routing.insert(stats_.routing.end(), idx.begin(), idx.end());

  // Routed experts in ascending expert order, each over the tokens that chose it (as HF's
  // loop over hit experts); every token accumulates its experts' outputs in that order.
  std::fill(out, out + T * H, 0.0f);
  std::vector<float> xs, ys;
  std::vector<std::int64_t> tok;
  std::vector<float> tok_w;
  for (std::int64_t e = 0; e < E; ++e) {
    tok.clear();
    tok_w.clear();
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t k = 0; k < K; ++k)
        if (idx[t * K + k] == e) {
          tok.push_back(t);
          tok_w.push_back(w[t * K + k]);
        }
    stats_.expert_hits[e] += static_cast<std::int64_t>(tok.size());
    if (tok.empty()) continue;
    const std::int64_t m = static_cast<std::int64_t>(tok.size());
    xs.resize(m * H);
    ys.resize(m * H);
    for (std::int64_t i = 0; i < m; ++i) std::memcpy(xs.data() + i * H, xn + tok[i] * H, sizeof(float) * H);
    mlp_forward(lw.experts[e], xs.data(), m, H, dims_.moe_intermediate, ys.data());
    for (std::int64_t i = 0; i < m; ++i) {
      float* o = out + tok[i] * H;
      const float* y = ys.data() + i * H;
      for (std::int64_t h = 0; h < H; ++h) o[h] += y[h] * tok_w[i];
    }
  }
  if (c.n_shared_experts > 0) {
    std::vector<float> shared(T * H);
    mlp_forward(lw.mlp, xn, T, H, dims_.shared_intermediate, shared.data());
    for (std::int64_t i = 0; i < T * H; ++i) out[i] += shared[i];
  }
}

}  // namespace tpb
