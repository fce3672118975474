// The fp32 CPU reference engine of the DeepSeek-V3 / Kimi-K2.5 text model (MODEL.md), one
// tensor-parallel rank of it. Every rank runs the same steps; the Communicator joins them:
//   embedding (vocab-parallel)           -> all_reduce
//   per layer: attention o_proj partial  -> all_reduce;  MLP / MoE (routed + shared) -> all_reduce
//   lm_head (vocab-parallel)             -> all_gather  (every rank ends with the full logits)
// So a step makes 2 * layers + 1 allreduces and one all_gather, as MODEL.md counts.
//
// prefill() starts new sequences; decode() appends one token per sequence through the
// absorbed-MLA KV cache. By default prefill uses the plain MLA form (as HF computes it) and
// decode the absorbed form (as serving engines do); `attention` forces one form everywhere,
// which is how the two are compared.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "reference_engine/comm/communicator.h"
#include "reference_engine/config/model_config.h"
#include "reference_engine/kv_cache/mla_kv_cache.h"
#include "reference_engine/model/model_weights.h"
#include "tpb/kernels/rope_yarn.h"

namespace tpb {

enum class AttentionForm { automatic, plain, absorbed };

struct EngineOptions {
  AttentionForm attention = AttentionForm::automatic;  // automatic: prefill plain, decode absorbed
  std::int64_t kv_capacity_tokens = 0;                 // initial KV capacity per sequence (grows on demand)
  // Test hook: expert ids [MoE layer call][token][top_k], consumed in call order, replace the
  // router's choices (weights from this engine's own scores); nullptr = route normally.
  const std::vector<std::int32_t>* pinned_routing = nullptr;
  bool record_routing = false;  // keep every MoE call's chosen ids in EngineStats::routing
  // Called with "before_weights" and "after_weights" around the loading of this rank's
  // weights, nothing else allocated in between (the workload's MemoryMeter marks there, as
  // GpuEngineOptions::on_phase); empty = no calls.
  std::function<void(const char* phase)> on_phase;
};

struct EngineStats {
  std::int64_t all_reduces = 0;    // calls since construction
  std::int64_t all_gathers = 0;    // calls since construction
  std::int64_t tokens = 0;         // tokens processed since construction (batch * new tokens, summed)
  std::vector<std::int64_t> expert_hits;  // [n_routed_experts] (token, layer) pairs routed to each expert
  std::vector<std::int32_t> routing;      // with record_routing: every MoE call's ids [T][top_k], in call order
};

class Engine {
 public:
  // Loads this rank's shard from `weights`. `comm.size()` must equal shard.tp.
  Engine(const ModelConfig& config, Shard shard, Communicator& comm, WeightSource& weights, EngineOptions options = {});

  // Starts `batch` new sequences from tokens [batch, seq_len] (row-major), dropping any
  // cached ones. logits() then holds [batch, seq_len, vocab].
  void prefill(const std::vector<std::int64_t>& tokens, std::int64_t batch);
  // Appends one token per sequence (tokens: [batch]). logits() then holds [batch, 1, vocab].
  void decode(const std::vector<std::int64_t>& tokens);
  // Appends tokens [batch, n] to every sequence in the given attention form (chunked prefill
  // for n > 1); prefill() and decode() are this with the cache reset or n = 1.
  void extend(const std::vector<std::int64_t>& tokens, std::int64_t n, AttentionForm form);

  // Drops every cached token from position `tokens` on (per sequence), so the next step
  // overwrites them: a benchmark repeats a decode step at one fixed context length.
  void rewind(std::int64_t tokens) { cache_.set_length(tokens); }

  // Logits of the last step, fp32 [batch, new tokens, vocab], identical on every rank.
  const std::vector<float>& logits() const { return logits_; }
  std::int64_t batch() const { return cache_.batch(); }
  std::int64_t cached_tokens() const { return cache_.length(); }  // per sequence
  const ModelConfig& config() const { return config_; }
  Shard shard() const { return shard_; }
  std::size_t weight_bytes() const { return weights_.bytes; }
  std::size_t kv_cache_bytes() const { return cache_.bytes(); }
  const EngineStats& stats() const { return stats_; }

 private:
  void attention(std::int64_t layer, const float* x_norm, std::int64_t n, std::int64_t past, AttentionForm form,
                 float* out);
  void ffn(std::int64_t layer, const float* x_norm, std::int64_t tokens, float* out);
  void all_reduce(std::vector<float>& buf);

  ModelConfig config_;
  Shard shard_;
  ShardDims dims_;
  Communicator& comm_;
  EngineOptions options_;
  ModelWeights weights_;
  kernels::RopeTable rope_;
  float attention_scale_ = 1.0f;
  MlaKvCache cache_;
  std::vector<float> logits_;
  EngineStats stats_;
  std::size_t pinned_cursor_ = 0;  // next unread id of options_.pinned_routing
};

}  // namespace tpb
