// What the engine workload's CPU path (engine_workload.cpp) and GPU path
// (gpu_engine_workload.cpp) share: a case's parameters and model, the tokens of its steps, the
// harness's marked step, the instrumentation summaries, the tensor digests placed by site, and
// the logits mode. Internal to suite/workloads/ (namespace tpb::engine_case).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "reference_engine/comm/communicator.h"
#include "reference_engine/config/model_config.h"
#include "reference_engine/memory/weight_bytes.h"
#include "reference_engine/weights/safetensors.h"
#include "reference_engine/weights/weight_source.h"
#include "suite/measure/instrumentation.h"
#include "suite/measure/measure.h"
#include "suite/measure/tensor_digests.h"
#include "suite/scenario/case_params.h"
#include "suite/scenario/case_plan.h"
#include "suite/scenario/case_spec.h"
#include "suite/workloads/observed_communicator.h"
#include "suite/workloads/workload.h"

namespace tpb::engine_case {

// Logits values returned in `outputs.logits` (a tiny model's whole decode step; a prefix of
// a larger one), enough for a rel-L2 check without bloating results.jsonl.
constexpr std::size_t kOutputSampleValues = 4096;

// The planner's prediction of this case's memory terms per rank (record.plan, checked by
// plan_matches_measured): weights by the TP table in the engine's storage format (f32 on the
// CPU, which holds an int4 model's experts dequantized, exactly, in fp32 too; the model's
// quantization on the GPU: bf16, or packed INT4 routed experts; the vision tower is left out:
// tpbench's engine does not load it), and on the GPU the KV cache the case allocates
// (cell x batch x capacity).
nlohmann::json memory_plan(const ModelConfig& config, int tp, Quantization quant, std::int64_t kv_tokens, std::int64_t kv_dtype_bytes);

// The step shape and the measurement counts of a prefill/decode case, validated (both devices).
struct StepParams {
  std::int64_t batch = 1, seq_len = 16;  // sequences, tokens of context (or prompt)
  MeasureCounts counts;                  // untimed steps, timed steps per repetition, repetitions
};

StepParams step_params(const CaseSpec& spec, const CaseParams& params);

// A case's model section with the engine's defaults: where its config and weights come from,
// how many layers and which quantization (params.quant) it runs, and the key an engine built
// from them is cached under.
struct CaseModel {
  CaseSpec::Model spec;    // config_path, overrides, weights, seed
  CaseModelParams params;  // params.layers and params.quant; absent: the config's own
  std::uint64_t seed = 1234;

  std::string key() const {
    return spec.config_path + "|" + spec.overrides.dump() + "|" + spec.weights + "|" + std::to_string(seed) +
           "|layers=" + (params.layers ? std::to_string(*params.layers) : std::string("config")) +
           "|quant=" + (params.quant ? quantization_name(*params.quant) : "config");
  }
  // The config with overrides, layers and quantization (case_plan.h), as the planner plans it.
  ModelConfig load_config() const { return case_model_config(spec, params); }
  std::unique_ptr<WeightSource> open_weights(const ModelConfig& config) const {
    return spec.weights == "synthetic" ? make_synthetic_weights(seed)
                                       : open_safetensors_weights(spec.weights, config.nested_text_config ? "language_model." : "");
  }
};

CaseModel case_model(const CaseSpec& spec);

// How many of a case's first communicator calls its record spells out (CallSequence); the
// rest count in the digest. 256 cover the prefill and the first steps of the tiny models.
constexpr std::size_t kCallsSpelledOut = 256;

// The collectives of one forward pass of either engine, in order (engine.h): the embedding's
// all_reduce, each layer's attention and MLP/MoE all_reduces, the lm_head's all_gather.
std::size_t collectives_per_forward(const ModelConfig& config);

// Where collective `j` (< collectives_per_forward) of a forward pass sits: {layer or -1, name}.
std::pair<std::int64_t, std::string> collective_site(const ModelConfig& config, std::size_t j);

// "<n> timed step(s)", counting both halves of an interleaved A/B sweep (suite/measure/measure.h).
std::string timed_steps_text(std::int64_t timed_steps, const CaseSpec::Measure& measure);

// The digests level's record (TensorDigests::to_json) with each call placed: its forward pass
// (0, 1, ... in the order the case ran them: `forwards` says what they are) and its site.
nlohmann::json engine_tensor_digests(TensorDigests& digests, const ModelConfig& config, const std::string& forwards);

// The communicator the engine is built on: the backend wrapped in an ObservedCommunicator,
// kept in the worker with the backend so that a cached engine keeps a live reference. Keyed
// like WorkerState::communicator: another max message size is another communicator.
std::string observed_communicator_key(const std::string& backend, const CommOptions& options);

ObservedCommunicator& observed_communicator(WorkerState& state, const std::string& backend, const CommOptions& options,
                                            Communicator& comm);

// The harness's step for either engine: the step between its begin and end marks (index i).
template <class Step>
std::function<void(std::uint32_t)> marked_step(Instrumentation& inst, Step& step) {
  return [&inst, &step](std::uint32_t i) {
    inst.mark(kStepBegin, i);
    step();
    inst.mark(kStepEnd, i);
  };
}

// The record's instrumentation section, the same on the CPU and the GPU: the level, what a
// mark costs on this host, the marks per step and the share of the median step they would
// take, what was recorded and dropped, and what the levels allocated (the same at every level).
nlohmann::json instrumentation_summary(InstrumentationLevel level, const Instrumentation& inst, const AllocationLedger& ledger,
                             std::int64_t marks_per_step, double median_step_us);

// The debug level's statistics of the step's logits: copied into `snapshot` (allocated before
// the timed loop at every level) after the loop, so that reading them cannot change what the
// digest sees (observer_invariant compares it with `off`); the whole tensor, then up to 64 of
// its `rows` rows of `vocab` values with their greedy token.
nlohmann::json debug_logits_summary(const std::vector<float>& logits, std::vector<float>& snapshot, std::int64_t rows,
                          std::int64_t vocab);

std::int64_t workload_token(std::uint64_t seed, std::int64_t seq, std::int64_t pos, std::int64_t vocab);

// A case's input tokens, a pure function of (seed, sequence, position), so every rank,
// backend and TP runs the same: `prompt` the batch x seq_len prompt (empty without
// `with_prompt`), `next` each sequence's token after it (the decoded one).
struct StepTokens {
  std::vector<std::int64_t> prompt, next;
};
StepTokens step_tokens(std::uint64_t seed, std::int64_t batch, std::int64_t seq_len, std::int64_t vocab, bool with_prompt);

// The logits mode's prefill: the first `prefill` of `seq` tokens (0 or more than seq: all).
std::int64_t prefilled_tokens(std::int64_t prefill, std::int64_t seq);

// engine_logits for either engine (the CPU Engine and the GpuEngine have the same step API).
template <class AnyEngine>
std::vector<float> step_logits(AnyEngine& engine, const std::vector<std::vector<std::int64_t>>& ids, std::int64_t prefill) {
  const std::int64_t B = static_cast<std::int64_t>(ids.size()), S = static_cast<std::int64_t>(ids.at(0).size());
  const std::int64_t V = engine.config().vocab_size;
  const std::int64_t K = prefilled_tokens(prefill, S);
  std::vector<float> out(B * S * V);
  std::vector<std::int64_t> first;
  for (const auto& row : ids) first.insert(first.end(), row.begin(), row.begin() + K);
  engine.prefill(first, B);
  for (std::int64_t b = 0; b < B; ++b)
    std::memcpy(out.data() + b * S * V, engine.logits().data() + b * K * V, sizeof(float) * K * V);
  for (std::int64_t i = K; i < S; ++i) {
    std::vector<std::int64_t> step;
    for (const auto& row : ids) step.push_back(row[i]);
    engine.decode(step);
    for (std::int64_t b = 0; b < B; ++b)
      std::memcpy(out.data() + (b * S + i) * V, engine.logits().data() + b * V, sizeof(float) * V);
  }
  return out;
}

// A timed case's result as far as both engines fill it alike: the harness's samples, the step's
// work (tokens per step: the record's tokens/s derives from it and the merged latency's mean,
// suite/measure/measure.h), the first kOutputSampleValues logits for tolerance checks, the
// logits' digest and their NaN/Inf sentence.
RankResult timed_steps_result(const Measurement& steps, std::int64_t tokens_per_step, const std::vector<float>& logits);

// The "logits" mode's result on either device: rank 0 writes params.out, every rank its digest.
RankResult logits_mode_result(const CaseParams& params, int rank, const std::vector<std::vector<std::int64_t>>& ids,
                              std::int64_t vocab, const std::vector<float>& logits, std::size_t weight_bytes,
                              nlohmann::json comm);

std::vector<std::vector<std::int64_t>> logits_mode_ids(const CaseParams& params);

#if TPB_HAVE_CUDA
// device "cuda": the bf16 GpuEngine's case (gpu_engine_workload.cpp).
RankResult run_gpu_engine_workload(const CaseSpec& spec, WorkerState& state);
#endif

}  // namespace tpb::engine_case
