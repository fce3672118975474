// The engine workload (see engine_workload.h): the harness part (warm-up, barriers, clock,
// digests) mirrors the allreduce workload; the maths is the Engine's.
#include "suite/workloads/engine_workload.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>
#include <optional>
#include <utility>

#include "reference_engine/comm/backends.h"
#include "reference_engine/config/model_config.h"
#include "reference_engine/memory/meter.h"
#include "reference_engine/memory/planner.h"
#include "reference_engine/memory/weight_bytes.h"
#include "reference_engine/weights/safetensors.h"
#include "reference_engine/weights/weight_source.h"
#include "suite/scenario/case_plan.h"
#include "suite/measure/digest.h"
#include "suite/measure/instrumentation.h"
#include "suite/measure/measure.h"
#include "suite/launch/placement.h"
#include "suite/measure/stats.h"
#include "suite/measure/tensor_digests.h"
#include "suite/workloads/observed_communicator.h"
#include "suite/workloads/workloads.h"
#include "tpb/check.h"
#include "tpb/test_hooks.h"
#include "tpb/kernels/device.h"
#include "tpb/kernels/tensor_digest.h"

#if TPB_HAVE_CUDA
#include <cuda_runtime_api.h>

#include <cstdlib>

#include "reference_engine/gpu/gpu_engine.h"
#include "tpb/cuda_check.h"
#include "tpb/kernels/event_timing.h"
#include "tpb/kernels/gpu/tensor_digest.h"
#include "tpb/kernels/hw_probes.h"
#endif

namespace tpb {
namespace {

using nlohmann::json;

// Logits values returned in `outputs.logits` (a tiny model's whole decode step; a prefix of
// a larger one), enough for a rel-L2 check without bloating results.jsonl.
constexpr std::size_t kOutputSampleValues = 4096;

// The planner's prediction of this case's memory terms per rank (record.plan, checked by
// plan_matches_measured): weights by the TP table in the engine's storage format (f32 on the
// CPU, which holds an int4 model's experts dequantized, exactly, in fp32 too; the model's
// quantization on the GPU: bf16, or packed INT4 routed experts; the vision tower is left out:
// tpbench's engine does not load it), and on the GPU the KV cache the case allocates
// (cell x batch x capacity).
json memory_plan(const ModelConfig& config, int tp, Quantization quant, std::int64_t kv_tokens, std::int64_t kv_dtype_bytes) {
  ModelConfig text = config;
  text.has_vision_tower = false;
  json breakdown = {{"weights", weight_bytes(text, quant, tp).bytes_per_rank}};
  if (kv_tokens > 0) breakdown["kv_cache"] = kv_cell_bytes(config, kv_dtype_bytes) * kv_tokens;
  return {{"source", std::string("planner (") + quantization_name(quant) + ", tp " + std::to_string(tp) + ")"},
          {"breakdown", breakdown}};
}

std::int64_t int_param(const json& o, const char* key, std::int64_t fallback, const char* path) {
  if (!o.is_object() || !o.contains(key) || o[key].is_null()) return fallback;
  TPB_INPUT_CHECK(o[key].is_number_integer(), "case_spec." << path << "." << key << ": expected an integer, got " << o[key].dump());
  return o[key].get<std::int64_t>();
}

std::string string_param(const json& o, const char* key, const std::string& fallback, const char* path) {
  if (!o.is_object() || !o.contains(key) || o[key].is_null()) return fallback;
  TPB_INPUT_CHECK(o[key].is_string(), "case_spec." << path << "." << key << ": expected a string, got " << o[key].dump());
  return o[key].get<std::string>();
}

// The step shape and the measurement counts of a prefill/decode case, validated (both devices).
struct StepParams {
  std::int64_t batch = 1, seq_len = 16;  // sequences, tokens of context (or prompt)
  MeasureCounts counts;                  // untimed steps, timed steps per repetition, repetitions
};

StepParams step_params(const CaseSpec& spec) {
  StepParams p;
  p.batch = int_param(spec.params, "batch_size", 1, "params");
  p.seq_len = int_param(spec.params, "seq_len", 16, "params");
  p.counts = spec.measure.counts({/*warmup*/ 1, /*iterations*/ 5, /*repetitions*/ 1});
  TPB_INPUT_CHECK(p.batch >= 1, "case_spec.params.batch_size: expected >= 1, got " << p.batch);
  TPB_INPUT_CHECK(p.seq_len >= 1, "case_spec.params.seq_len: expected >= 1, got " << p.seq_len);
  return p;
}

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

CaseModel case_model(const CaseSpec& spec) {
  TPB_INPUT_CHECK(spec.model.has_value(), "case_spec.model: the engine workload needs a model section");
  TPB_INPUT_CHECK(!spec.model->config_path.empty(), "case_spec.model.config_path: required");
  return {*spec.model, case_model_params(spec.params), spec.model->seed.value_or(1234)};
}

// The engine and what it was built from, kept in WorkerState::cache() across cases.
struct CachedEngine {
  ModelConfig config;
  std::unique_ptr<WeightSource> weights;
  std::unique_ptr<Engine> engine;
  // The process's heap read around the weights' loading (EngineOptions::on_phase): the
  // measured side of plan_matches_measured's 'weights' term on the CPU.
  MemoryMeter built{MemorySource::host_allocations};
  std::vector<char> planted;  // TPB_TEST_PLANT_WEIGHTS_FACTOR's extra allocation (test only)
};

// TEST ONLY: TPB_TEST_PLANT_WEIGHTS_FACTOR=F (a number >= 1) makes rank 1 of the CPU engine
// allocate F times its weights while they load (the extra (F - 1) x weights is zero-filled
// heap kept with the engine), so that plan_matches_measured has a real planted fault to find
// (tests/cli/plan_matches_measured_can_fail_on_cpu.sh). Unset: factor 1, nothing planted. Never
// set it in a measurement.
double planted_weights_factor(int rank) {
  const char* text = test_hook("TPB_TEST_PLANT_WEIGHTS_FACTOR");
  if (rank != 1 || text == nullptr || *text == '\0') return 1.0;
  char* end = nullptr;
  const double factor = std::strtod(text, &end);
  TPB_INPUT_CHECK(end != text && *end == '\0' && std::isfinite(factor) && factor >= 1.0,
                  "TPB_TEST_PLANT_WEIGHTS_FACTOR: expected a number >= 1, got '" << text << "'");
  return factor;
}

// TEST ONLY: TPB_TEST_ENGINE_DEBUG_FAULT plants a fault in the engine workload's debug level
// (CPU and GPU), so that observer_invariant has real control-flow faults to find
// (tests/cli/observer_sees_control_flow.sh; on a GPU scripts/gpu_issue15_demo.sh). It acts
// only at level debug; unset or empty: nothing planted. Never set it in a measurement.
//   value       the debug path writes into the step's input (the first sequence's next
//               token): the logits change, the control flow does not
//   allreduce   every step at debug ends with an extra 1-element f32 all_reduce on a scratch
//               value (host, or device memory on the GPU, allocated at every level): the
//               outputs stay bitwise equal, the communicator calls do not
//   allocation  the debug level allocates its logits snapshot after the timed loop instead of
//               before it: the same bytes in all, in another order
enum class PlantedDebugFault { none, value, allreduce, allocation };

// The fault TPB_TEST_ENGINE_DEBUG_FAULT asks for, whatever the level (a fault's scratch is
// allocated at every level, so that only what the fault does differs at debug).
PlantedDebugFault requested_debug_fault() {
  const char* text = test_hook("TPB_TEST_ENGINE_DEBUG_FAULT");
  if (text == nullptr || *text == '\0') return PlantedDebugFault::none;
  const std::string v = text;
  TPB_INPUT_CHECK(v == "value" || v == "allreduce" || v == "allocation",
                  "TPB_TEST_ENGINE_DEBUG_FAULT: expected value, allreduce or allocation, got '" << v << "'");
  return v == "value" ? PlantedDebugFault::value : v == "allreduce" ? PlantedDebugFault::allreduce : PlantedDebugFault::allocation;
}

// The fault acting in this case: the requested one at level debug, none elsewhere.
PlantedDebugFault planted_debug_fault(InstrumentationLevel level) {
  const PlantedDebugFault requested = requested_debug_fault();
  return level == InstrumentationLevel::debug ? requested : PlantedDebugFault::none;
}

// How many of a case's first communicator calls its record spells out (CallSequence); the
// rest count in the digest. 256 cover the prefill and the first steps of the tiny models.
constexpr std::size_t kCallsSpelledOut = 256;

// The collectives of one forward pass of either engine, in order (engine.h): the embedding's
// all_reduce, each layer's attention and MLP/MoE all_reduces, the lm_head's all_gather.
std::size_t collectives_per_forward(const ModelConfig& config) {
  return static_cast<std::size_t>(2 * config.num_hidden_layers + 2);
}

// Where collective `j` (< collectives_per_forward) of a forward pass sits: {layer or -1, name}.
std::pair<std::int64_t, std::string> collective_site(const ModelConfig& config, std::size_t j) {
  const std::size_t last = collectives_per_forward(config) - 1;
  if (j == 0) return {-1, "embedding all_reduce"};
  if (j == last) return {-1, "lm_head all_gather"};
  const auto layer = static_cast<std::int64_t>((j - 1) / 2);
  const bool attention = (j - 1) % 2 == 0;
  return {layer, "layer " + std::to_string(layer) + " " +
                     (attention ? "attention" : config.is_moe_layer(layer) ? "moe" : "mlp") + " all_reduce"};
}

// TEST ONLY: TPB_TEST_PLANT_DIVERGENCE="layer=L[,backend=B][,tp=N][,factor=F]" makes the
// engine's communicator return a wrong sum (scaled by F, default 1.0625) at layer L's MLP/MoE
// all_reduce, in every forward pass of each case whose requested backend is B and whose TP
// is N (any when left out): a backend bug at one layer, for divergence localization to find
// (tests/cli/divergence_is_located.sh). Read by both engines at every instrumentation level;
// unset or empty: nothing planted. Never set it in a measurement.
std::optional<PlantedDivergence> planted_divergence(const std::string& backend, int tp, const ModelConfig& config,
                                                    void (*scale)(void*, std::size_t, DType, float, void*)) {
  const char* text = test_hook("TPB_TEST_PLANT_DIVERGENCE");
  if (text == nullptr || *text == '\0') return std::nullopt;
  const std::string spec = text;
  std::int64_t layer = -1;
  std::string want_backend;
  int want_tp = 0;
  float factor = 1.0625f;
  std::size_t at = 0;
  while (at <= spec.size()) {
    const std::size_t comma = std::min(spec.find(',', at), spec.size());
    const std::string item = spec.substr(at, comma - at);
    const std::size_t eq = item.find('=');
    const std::string key = item.substr(0, eq), value = eq == std::string::npos ? "" : item.substr(eq + 1);
    char* end = nullptr;
    if (key == "layer") {
      layer = std::strtoll(value.c_str(), &end, 10);
      TPB_INPUT_CHECK(!value.empty() && *end == '\0' && layer >= 0 && layer < config.num_hidden_layers,
                      "TPB_TEST_PLANT_DIVERGENCE: layer: expected 0.." << config.num_hidden_layers - 1 << ", got '" << value << "'");
    } else if (key == "backend" && !value.empty()) {
      want_backend = value;
    } else if (key == "tp") {
      want_tp = static_cast<int>(std::strtol(value.c_str(), &end, 10));
      TPB_INPUT_CHECK(!value.empty() && *end == '\0' && want_tp >= 1, "TPB_TEST_PLANT_DIVERGENCE: tp: expected >= 1, got '" << value << "'");
    } else if (key == "factor") {
      factor = std::strtof(value.c_str(), &end);
      TPB_INPUT_CHECK(!value.empty() && *end == '\0' && std::isfinite(factor) && factor > 0 && factor != 1,
                      "TPB_TEST_PLANT_DIVERGENCE: factor: expected a positive number other than 1, got '" << value << "'");
    } else {
      TPB_INPUT_FAIL("TPB_TEST_PLANT_DIVERGENCE: expected layer=L[,backend=B][,tp=N][,factor=F], got '" << spec << "'");
    }
    at = comma + 1;
  }
  TPB_INPUT_CHECK(layer >= 0, "TPB_TEST_PLANT_DIVERGENCE: layer=L is required, got '" << spec << "'");
  if ((!want_backend.empty() && want_backend != backend) || (want_tp != 0 && want_tp != tp)) return std::nullopt;
  PlantedDivergence plant;
  plant.calls_per_forward = collectives_per_forward(config);
  plant.call_in_forward = static_cast<std::size_t>(2 + 2 * layer);
  plant.factor = factor;
  plant.scale = scale;
  return plant;
}

void scale_host_values(void* data, std::size_t count, DType dtype, float factor, void* /*stream*/) {
  kernels::scale_values_ref(data, count, dtype, factor);
}

// "<n> timed step(s)", counting both halves of an interleaved A/B sweep (suite/measure/measure.h).
std::string timed_steps_text(std::int64_t timed_steps, const CaseSpec::Measure& measure) {
  return measure.interleave_instrumentation
             ? std::to_string(2 * timed_steps) + " timed step(s) (A and B halves interleaved)"
             : std::to_string(timed_steps) + " timed step(s)";
}

// The digests level's record (TensorDigests::to_json) with each call placed: its forward pass
// (0, 1, ... in the order the case ran them: `forwards` says what they are) and its site.
json engine_tensor_digests(TensorDigests& digests, const ModelConfig& config, const std::string& forwards) {
  json j = digests.to_json();
  const std::size_t per = collectives_per_forward(config);
  for (auto& e : j["entries"]) {
    const std::size_t call = e["call"].get<std::size_t>();
    const auto [layer, site] = collective_site(config, call % per);
    e["forward"] = call / per;
    e["layer"] = layer >= 0 ? json(layer) : json(nullptr);
    e["site"] = site;
  }
  j["collectives_per_forward"] = per;
  j["forwards"] = forwards;
  return j;
}

// Keyed by the requested backend, not comm.name(): a backend that fell back names the one it
// runs, and must not be handed the engine built on that other backend's communicator.
CachedEngine& engine_for(const CaseSpec& spec, WorkerState& state, Communicator& comm, const std::string& backend,
                         int tp) {
  const CaseModel m = case_model(spec);
  const std::string key = "engine|" + m.key() + "|" + backend + "|tp=" + std::to_string(tp);
  auto& cache = state.cache();
  auto it = cache.find(key);
  if (it != cache.end()) return *static_cast<CachedEngine*>(it->second.get());
  // One engine per worker at a time: drop the engines of earlier models before loading.
  for (auto i = cache.begin(); i != cache.end();) i = i->first.rfind("engine|", 0) == 0 ? cache.erase(i) : std::next(i);
  auto cached = std::make_shared<CachedEngine>();
  cached->config = m.load_config();
  cached->weights = m.open_weights(cached->config);
  EngineOptions options;
  CachedEngine* raw = cached.get();
  const double factor = planted_weights_factor(comm.rank());
  options.on_phase = [raw, factor](const char* phase) {
    const std::string p = phase;
    if (p == "after_weights" && factor > 1.0) {
      const std::int64_t loaded = host_allocated_bytes() - raw->built.samples().at(0).host_bytes;
      raw->planted.assign(static_cast<std::size_t>(std::max<double>(0, (factor - 1.0) * double(loaded))), 1);
    }
    raw->built.mark(p, 0);
  };
  cached->engine = std::make_unique<Engine>(cached->config, Shard{comm.rank(), tp}, comm, *cached->weights, options);
  CachedEngine& ref = *cached;
  cache[key] = cached;
  return ref;
}

// The communicator the engine is built on: the backend wrapped in an ObservedCommunicator,
// kept in the worker with the backend so that a cached engine keeps a live reference. Keyed
// like WorkerState::communicator: another max message size is another communicator.
std::string observed_communicator_key(const std::string& backend, const CommOptions& options) {
  return "observed-comm|" + backend + "|max_bytes=" + std::to_string(options.max_bytes);
}

ObservedCommunicator& observed_communicator(WorkerState& state, const std::string& backend, const CommOptions& options,
                                            Communicator& comm) {
  const std::string key = observed_communicator_key(backend, options);
  auto& cache = state.cache();
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, std::make_shared<ObservedCommunicator>(comm)).first;
  return *static_cast<ObservedCommunicator*>(it->second.get());
}

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
json instrumentation_summary(InstrumentationLevel level, const Instrumentation& inst, const AllocationLedger& ledger,
                             std::int64_t marks_per_step, double median_step_us) {
  const double cost_ns = mark_cost_ns();
  return {{"level", instrumentation_level_name(level)},
          {"mark_cost_ns", cost_ns},
          {"marks_per_step", marks_per_step},
          {"estimated_timing_overhead", static_cast<double>(marks_per_step) * cost_ns * 1e-3 / median_step_us},
          {"marks", inst.mark_count()},
          {"marks_dropped", inst.dropped()},
          {"alloc", ledger.to_json()}};
}

// The debug level's statistics of the step's logits: copied into `snapshot` (allocated before
// the timed loop at every level) after the loop, so that reading them cannot change what the
// digest sees (observer_invariant compares it with `off`); the whole tensor, then up to 64 of
// its `rows` rows of `vocab` values with their greedy token.
json debug_logits_summary(const std::vector<float>& logits, std::vector<float>& snapshot, std::int64_t rows,
                          std::int64_t vocab) {
  TPB_CHECK(snapshot.size() == logits.size(), "engine workload: the logits have " << logits.size()
                                                  << " values, the debug snapshot " << snapshot.size());
  std::copy(logits.begin(), logits.end(), snapshot.begin());
  json per_row = json::array();
  for (std::int64_t t = 0; t < std::min<std::int64_t>(rows, 64); ++t) {
    const float* row = snapshot.data() + t * vocab;
    json stats = float_stats(row, static_cast<std::size_t>(vocab));
    stats["greedy_token"] = std::max_element(row, row + vocab) - row;
    per_row.push_back(stats);
  }
  return {{"logits", float_stats(snapshot.data(), snapshot.size())}, {"logits_rows", per_row}};
}

// Phases of the timed steps from the marks (see observed_communicator.h). The compute
// between two collectives is named by the collective's index in the step: 0 follows the
// embedding; 1 + 2l the attention of layer l; 2 + 2l its MLP (dense) or MoE; the all_gather
// follows the lm_head; after it the logits are assembled.
std::vector<Span> engine_spans(const Instrumentation& inst, const ModelConfig& config) {
  std::vector<Span> spans;
  std::int64_t step = -1, step_begin = 0, prev_end = 0, coll_begin = 0, coll = 0;
  auto add = [&](const char* name, int tid, std::int64_t b, std::int64_t e, std::int64_t layer) {
    spans.push_back(Span{name, tid, b, e - b, step, layer});
  };
  for (std::size_t i = 0; i < inst.mark_count(); ++i) {
    const Mark& m = inst.marks()[i];
    switch (m.what) {
      case kStepBegin:
        step = m.arg, step_begin = prev_end = m.t_ns, coll = 0;
        break;
      case kReduceBegin: {
        if (coll == 0) {
          add("embed", 1, prev_end, m.t_ns, -1);
        } else {
          const std::int64_t layer = (coll - 1) / 2;
          const bool attention = (coll - 1) % 2 == 0;
          add(attention ? "attention" : (config.is_moe_layer(layer) ? "moe" : "mlp"), 1, prev_end, m.t_ns, layer);
        }
        coll_begin = m.t_ns;
        break;
      }
      case kReduceEnd:
        add("allreduce", 1, coll_begin, m.t_ns, coll == 0 ? -1 : (coll - 1) / 2);
        prev_end = m.t_ns, ++coll;
        break;
      case kGatherBegin:
        add("lm_head", 1, prev_end, m.t_ns, -1);
        coll_begin = m.t_ns;
        break;
      case kGatherEnd:
        add("all_gather", 1, coll_begin, m.t_ns, -1);
        prev_end = m.t_ns;
        break;
      case kStepEnd:
        add("logits", 1, prev_end, m.t_ns, -1);
        add("step", 0, step_begin, m.t_ns, -1);
        break;
      default:
        break;
    }
  }
  return spans;
}

std::int64_t workload_token(std::uint64_t seed, std::int64_t seq, std::int64_t pos, std::int64_t vocab) {
  const std::uint64_t h = synthetic::mix64(synthetic::mix64(seed ^ 0x746f6b656e73ull) + static_cast<std::uint64_t>(seq) * 0x9e3779b97f4a7c15ull +
                                           static_cast<std::uint64_t>(pos));
  return static_cast<std::int64_t>(h % static_cast<std::uint64_t>(vocab));
}

// The logits mode's prefill: the first `prefill` of `seq` tokens (0 or more than seq: all).
std::int64_t prefilled_tokens(std::int64_t prefill, std::int64_t seq) { return (prefill <= 0 || prefill > seq) ? seq : prefill; }

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


// The "logits" mode's result on either device: rank 0 writes params.out, every rank its digest.
RankResult logits_mode_result(const json& params, int rank, const std::vector<std::vector<std::int64_t>>& ids,
                              std::int64_t vocab, const std::vector<float>& logits, std::size_t weight_bytes,
                              json comm) {
  const std::string out = string_param(params, "out", "", "params");
  const std::string nonfinite = nonfinite_values("logits", logits.data(), logits.size());
  if (rank == 0 && !out.empty() && nonfinite.empty()) {  // NaN or Inf logits: no file (the caller fails)
    const std::vector<std::int64_t> shape = {static_cast<std::int64_t>(ids.size()), static_cast<std::int64_t>(ids[0].size()),
                                             vocab};
    write_safetensors_f32(out, {{"logits", shape, logits.data()}});
  }
  RankResult result;
  result.digests["logits"] = fnv1a64_hex(logits.data(), logits.size() * sizeof(float));
  result.nonfinite = nonfinite;
  result.metrics = {{"weight_bytes", weight_bytes}};
  result.comm = std::move(comm);
  return result;
}

std::vector<std::vector<std::int64_t>> logits_mode_ids(const json& params) {
  TPB_INPUT_CHECK(params.contains("input_ids"), "case_spec.params.input_ids: required in logits mode");
  return read_input_ids(params["input_ids"], "case_spec.params.input_ids");
}

#if TPB_HAVE_CUDA
// ---------------------------------------------------------------------------------------
// device "cuda": the bf16 GpuEngine (reference_engine/gpu/gpu_engine.h), one rank per GPU.

// The engine, its weights and what it was built from, kept across cases of one model and TP:
// the backend, CUDA-graph mode and sizes of a case are set on it (set_communicator,
// set_cuda_graph, resize), so a sweep generates the weights once.
struct CachedGpuEngine {
  ModelConfig config;
  std::unique_ptr<WeightSource> weights;
  std::unique_ptr<GpuEngine> engine;
  // Device memory read around the engine's allocations (GpuEngineOptions::on_phase): `built`
  // once when the weights load, `buffers` again at every (re)allocation of the step buffers.
  MemoryMeter built{true};
  MemoryMeter buffers{true};
};

// The launcher's placement (suite/launch/placement.h): TPB_DEVICE, else LOCAL_RANK, else the rank.
int local_device(const WorkerState& state) { return rank_device_from_env(state.rank()); }

CachedGpuEngine& gpu_engine_for(const CaseSpec& spec, WorkerState& state, Communicator& comm, int tp,
                                const GpuEngineOptions& sizes) {
  const CaseModel m = case_model(spec);
  const std::string key = "gpu-engine|" + m.key() + "|tp=" + std::to_string(tp);
  auto& cache = state.cache();
  auto it = cache.find(key);
  if (it != cache.end()) {
    auto& ce = *static_cast<CachedGpuEngine*>(it->second.get());
    ce.engine->set_communicator(comm);
    ce.engine->set_mem_fraction(sizes.mem_fraction);
    ce.engine->set_last_position_logits(sizes.last_position_logits);
    ce.engine->resize(sizes.max_batch, sizes.max_len, sizes.max_prefill_tokens);
    ce.engine->set_cuda_graph(sizes.cuda_graph);
    return ce;
  }
  // One engine per worker at a time: drop every other engine (CPU or GPU) before loading.
  for (auto i = cache.begin(); i != cache.end();)
    i = (i->first.rfind("engine|", 0) == 0 || i->first.rfind("gpu-engine|", 0) == 0) ? cache.erase(i) : std::next(i);
  auto cached = std::make_shared<CachedGpuEngine>();
  cached->config = m.load_config();
  cached->weights = m.open_weights(cached->config);
  GpuEngineOptions metered = sizes;
  // A pool sized from mem_fraction is the group's smallest, as a serving engine's: every rank
  // sizes at the same points (same cases, same sizes), so the exchange pairs up.
  metered.agree_kv_tokens = [&state](std::int64_t mine) {
    std::int64_t least = mine;
    for (const std::string& t : state.bootstrap().all_gather(std::to_string(mine))) least = std::min<std::int64_t>(least, std::stoll(t));
    return least;
  };
  CachedGpuEngine* raw = cached.get();
  metered.on_phase = [raw](const char* phase) {
    const std::string p = phase;
    if (p == "after_weights") {
      raw->built.mark(p, 0);
    } else {
      if (p == "before_buffers") raw->buffers = MemoryMeter(true);
      raw->buffers.mark(p, 0);
    }
  };
  cudaDeviceSynchronize();  // the communicator's setup is done: the engine's growth starts here
  cached->built.mark("before_engine", 0);
  cached->engine = std::make_unique<GpuEngine>(cached->config, Shard{comm.rank(), tp}, comm, *cached->weights, metered);
  CachedGpuEngine& ref = *cached;
  cache[key] = cached;
  return ref;
}

// A rank's KV pool as sized (GpuEngine::kv_pool_size): record.memory[rank].kv_pool, which
// plan_matches_measured sets against the plan's max_tokens. tokens: what the formula gives
// (held when feasible); bytes: the pool allocated (0 when infeasible).
json kv_pool_json(const KvPoolSize& k, std::int64_t bytes) {
  return {{"tokens", k.max_tokens},
          {"bytes", bytes},
          {"cell_bytes", k.cell_bytes},
          {"requested_tokens", k.requested_tokens},
          {"mem_fraction", k.mem_fraction},
          {"total_bytes", k.total_bytes},
          {"avail_bytes", k.avail_bytes},
          {"rest_bytes", k.rest_bytes},
          {"feasible", k.feasible},
          {"source", k.mem_fraction > 0 ? "serving formula on " + device_memory_source() + " readings"
                                        : "exact: max_batch x max_len (no mem_fraction)"}};
}

// Device-to-device copy bandwidth of this process's GPU (read + write counted, 1 GiB, median
// of 10), measured on first use and kept: the roofline every GPU case of the worker divides by.
double worker_copy_GBps() {
  static double measured = 0;
  if (measured <= 0) {
    int device = 0;
    TPB_CUDA_CHECK(cudaGetDevice(&device));
    measured = gpu_copy_bandwidth(device, std::size_t{1} << 30, 10).value;
  }
  return measured;
}

// Device memory a case owns (nullptr when 0 bytes), counted in its ledger.
class DeviceScratch {
 public:
  DeviceScratch(std::size_t bytes, AllocationLedger& ledger) {
    if (bytes == 0) return;
    TPB_CUDA_CHECK(cudaMalloc(&p_, bytes));
    TPB_CUDA_CHECK(cudaMemset(p_, 0, bytes));
    ledger.add("fault_probe", bytes);
  }
  ~DeviceScratch() { cudaFree(p_); }
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;
  float* data() const { return static_cast<float*>(p_); }

 private:
  void* p_ = nullptr;
};

void scale_device_values(void* data, std::size_t count, DType dtype, float factor, void* stream) {
  gpu::scale_values(data, count, dtype, factor, static_cast<cudaStream_t>(stream));
}

// Device time of `fn` (queued on `stream`), microseconds, from events around it.
template <class F>
double device_us(cudaStream_t stream, cudaEvent_t start, cudaEvent_t stop, F&& fn) {
  return 1e3 * event_elapsed_ms(stream, start, stop, fn);
}

// The GPU engine's sample clock for the harness: device events around the step's work on the
// engine's stream (the host waits for the stop event).
class EventTimer final : public SampleTimer {
 public:
  EventTimer(cudaStream_t stream, cudaEvent_t start, cudaEvent_t stop) : stream_(stream), start_(start), stop_(stop) {}
  double time_us(const std::function<void()>& step) override { return device_us(stream_, start_, stop_, step); }

 private:
  cudaStream_t stream_;
  cudaEvent_t start_, stop_;
};

RankResult run_gpu_engine_workload(const CaseSpec& spec, WorkerState& state) {
  const json& params = spec.params;
  const std::string mode = string_param(params, "mode", "decode", "params");
  TPB_INPUT_CHECK(mode == "prefill" || mode == "decode" || mode == "logits",
                  "case_spec.params.mode: expected \"prefill\", \"decode\" or \"logits\", got \"" << mode << "\"");
  const int tp = static_cast<int>(int_param(params, "tp", state.world_size(), "params"));
  TPB_INPUT_CHECK(tp == state.world_size(), "case_spec.params.tp: " << tp << " but the group has " << state.world_size() << " ranks");
  const std::string backend = string_param(params, "allreduce", "nccl", "params");
  TPB_INPUT_CHECK(is_gpu_backend(backend), "case_spec.params.allreduce: device cuda needs a GPU backend ("
                                               << backend_list(BackendDevice::gpu) << "), got '" << backend << "'");
  const bool cuda_graph = params.contains("cuda_graph") && params["cuda_graph"].is_boolean() && params["cuda_graph"].get<bool>();
  const StepParams sp = step_params(spec);
  const std::int64_t batch = sp.batch, seq_len = sp.seq_len;
  const std::int64_t warmup = sp.counts.warmup, iterations = sp.counts.iterations, repetitions = sp.counts.repetitions;
  const bool decode = mode == "decode";
  const bool real_prefill = !decode || batch * seq_len <= kGpuRealPrefillMaxTokens;

  const int device = local_device(state);
  TPB_CUDA_CHECK(cudaSetDevice(device));
  CommOptions options;
  options.device = device;
  // The scenario's comm.custom_max_bytes (suite/scenario/scenario.h), as a serving engine's flag sizes
  // its custom allreduce; CommOptions' default (8 MiB) when the scenario leaves it out.
  if (spec.comm.custom_max_bytes) options.max_bytes = static_cast<std::size_t>(*spec.comm.custom_max_bytes);
  if (spec.comm.custom_on_pcie) options.custom_on_pcie = *spec.comm.custom_on_pcie;
  if (spec.comm.custom_timeout_s) options.timeout_s = *spec.comm.custom_timeout_s;
  // The KV cache is sized as a serving engine sizes it, from the case's mem_fraction, when the
  // scenario sweeps mem_fraction (case_spec.kv_pool); otherwise exactly the case's cache (0).
  double mem_fraction = 0;
  if (spec.kv_pool && params.contains("mem_fraction") && !params["mem_fraction"].is_null()) {
    TPB_INPUT_CHECK(params["mem_fraction"].is_number(),
                    "case_spec.params.mem_fraction: expected a number, got " << params["mem_fraction"].dump());
    mem_fraction = params["mem_fraction"].get<double>();
  }
  if (mem_fraction > 0) {
    // A serving engine runs one backend: the KV pool is sized from what is free with this
    // case's buffers alone, not with those of a backend an earlier case of the sweep used (a
    // memory-fraction sweep alternating nccl and custom once read the same pool for both).
    // The wrappers go first: they refer to the communicators.
    auto& cache = state.cache();
    const std::string keep = observed_communicator_key(backend, options);
    bool dropped = false;
    for (auto i = cache.begin(); i != cache.end();) {
      const bool other = i->first.rfind("observed-comm|", 0) == 0 && i->first != keep;
      dropped = dropped || other;
      i = other ? cache.erase(i) : std::next(i);
    }
    if (dropped)
      for (auto& [key, cached] : cache)
        if (key.rfind("gpu-engine|", 0) == 0) static_cast<CachedGpuEngine*>(cached.get())->engine->forget_communicator();
    state.drop_communicators_except(backend, options);
  }
  Communicator& comm = state.communicator(backend, options);
  ObservedCommunicator& observed = observed_communicator(state, backend, options, comm);
  if (mode == "logits") {
    // The KV cache holds exactly the sequences; eager steps, every position's logits.
    const auto ids = logits_mode_ids(params);
    const std::int64_t prefill = int_param(params, "prefill", 0, "params");
    const std::int64_t B = static_cast<std::int64_t>(ids.size()), S = static_cast<std::int64_t>(ids[0].size());
    GpuEngineOptions exact;
    exact.max_batch = B;
    exact.max_len = S;
    exact.max_prefill_tokens = B * prefilled_tokens(prefill, S);
    comm.reset_allreduce_calls();
    CachedGpuEngine& ce = gpu_engine_for(spec, state, observed, tp, exact);
    const auto logits = step_logits(*ce.engine, ids, prefill);
    return logits_mode_result(params, state.rank(), ids, ce.config.vocab_size, logits, ce.engine->weight_bytes(),
                              communicator_result(backend, comm));
  }
  GpuEngineOptions sizes;
  sizes.max_batch = batch;
  sizes.max_len = decode ? seq_len + 1 : seq_len;
  sizes.max_prefill_tokens = gpu_engine_prefill_tokens(decode, batch, seq_len);
  sizes.last_position_logits =
      gpu_engine_last_position_logits(decode, batch, seq_len, case_model(spec).load_config().vocab_size);
  sizes.cuda_graph = cuda_graph;
  sizes.mem_fraction = mem_fraction;
  comm.reset_allreduce_calls();  // this case's calls only: the communicator outlives the case
  CachedGpuEngine* cached = nullptr;
  std::string infeasible;  // this rank's sentence when its pool does not hold the case
  KvPoolSize infeasible_pool;
  try {
    cached = &gpu_engine_for(spec, state, observed, tp, sizes);
  } catch (const KvPoolInfeasible& e) {
    infeasible = e.what();
    infeasible_pool = e.size();
  }
  if (sizes.mem_fraction > 0) {
    // The ranks agreed on the smallest pool (agree_kv_tokens). The case runs only if it holds
    // the case on every rank: a rank that stopped here alone would leave the others waiting.
    const std::vector<std::string> verdicts = state.bootstrap().all_gather(infeasible);
    for (std::size_t r = 0; r < verdicts.size(); ++r) {
      if (verdicts[r].empty()) continue;
      const KvPoolSize& mine = cached != nullptr ? cached->engine->kv_pool_size() : infeasible_pool;
      const std::int64_t bytes = cached != nullptr ? static_cast<std::int64_t>(cached->engine->kv_cache_bytes()) : 0;
      RankResult result;
      result.infeasible = "rank " + std::to_string(r) + ": " + verdicts[r];
      result.memory = {{"source", device_memory_source()}, {"kv_pool", kv_pool_json(mine, bytes)}};
      result.metrics = {{"mode", mode}};
      result.comm = communicator_result(backend, comm);
      return result;
    }
  }
  TPB_CHECK(cached != nullptr, "engine workload: no engine and no infeasible verdict");  // unreachable
  CachedGpuEngine& ce = *cached;
  GpuEngine& engine = *ce.engine;

  const std::uint64_t seed = case_model(spec).seed;
  const std::int64_t V = ce.config.vocab_size;
  std::vector<std::int64_t> prompt(real_prefill ? batch * seq_len : 0), next(batch);
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t i = 0; i < seq_len && real_prefill; ++i) prompt[b * seq_len + i] = workload_token(seed, b, i, V);
    next[b] = workload_token(seed, b, seq_len, V);
  }
  const InstrumentationLevel level = instrumentation_level(params);
  const std::int64_t timed_steps = repetitions * iterations;
  // A graph is captured on the second decode of a batch size: two warm-up steps at least, so
  // every timed step is a replay.
  const std::int64_t warm = std::max<std::int64_t>(warmup, decode && cuda_graph ? 2 : 1);
  const std::int64_t tokens_per_step = decode ? batch : batch * seq_len;
  const bool all_rows = tokens_per_step * V <= kGpuFullLogitsMaxValues;
  const std::int64_t logits_values = (all_rows ? tokens_per_step : batch) * V;
  // Host-side marks (step begin/end, collectives' entry/exit) at every level as on the CPU;
  // on the GPU they time the host's enqueueing, so no phases are derived from them.
  AllocationLedger ledger;
  ledger.add("prompt_tokens", prompt.size() * sizeof(std::int64_t));
  ledger.add("next_tokens", next.size() * sizeof(std::int64_t));
  const std::int64_t marks_per_step = 2 + 2 * (2 * ce.config.num_hidden_layers + 2);
  Instrumentation inst(level, static_cast<std::size_t>(std::min<std::int64_t>(timed_steps * marks_per_step, 1 << 20)), ledger);
  const PlantedDebugFault fault = planted_debug_fault(level);
  if (fault == PlantedDebugFault::value) {
    std::int64_t& token = decode ? next[0] : prompt[0];
    token = (token + 1) % V;
  }
  std::vector<float> debug_snapshot;
  auto allocate_debug_snapshot = [&] {
    debug_snapshot.assign(static_cast<std::size_t>(logits_values), 0.0f);
    ledger.add("debug_snapshot", debug_snapshot.size() * sizeof(float));
  };
  if (fault != PlantedDebugFault::allocation) allocate_debug_snapshot();
  // The allreduce fault's scratch (one f32 on the device), allocated at every level when asked.
  DeviceScratch fault_probe(requested_debug_fault() == PlantedDebugFault::allreduce ? sizeof(float) : 0, ledger);
  CallSequence calls(kCallsSpelledOut);
  ledger.add("call_sequence", calls.buffer_bytes());
  // The digests level's slots, on the device: every collective the host issues (the prefill,
  // the warm-ups, eager steps and a graph's capture; a replay rewrites its capture's slots).
  const std::int64_t forwards = (decode && real_prefill ? 1 : 0) + warm + (spec.measure.interleave_instrumentation ? 2 : 1) * timed_steps;
  TensorDigests digests(std::min<std::size_t>(collectives_per_forward(ce.config) * static_cast<std::size_t>(forwards), 1 << 16),
                        /*on_device=*/true, ledger);
  std::optional<PlantedDivergence> plant = planted_divergence(backend, tp, ce.config, scale_device_values);
  // Every case captures its own graphs: a graph captured by an earlier case would replay that
  // case's calls unseen (and its digests level's kernels write that case's freed buffers).
  engine.drop_graphs();
  ObserveScope observe(observed, inst, &calls, level == InstrumentationLevel::digests ? &digests : nullptr,
                       plant ? &*plant : nullptr);

  if (decode) {
    if (real_prefill)
      engine.prefill(prompt, batch);  // fills the KV cache to seq_len, untimed
    else
      engine.fill_kv_synthetic(batch, seq_len, seed);
  }
  auto step = [&] {
    if (decode) {
      engine.rewind(seq_len);
      engine.decode(next);
    } else {
      engine.prefill(prompt, batch);
    }
    if (fault == PlantedDebugFault::allreduce)
      observed.all_reduce(fault_probe.data(), fault_probe.data(), 1, DType::f32, engine.stream());
  };
  // The harness's loop (suite/measure/measure.h) with device events as its clock: a barrier before each
  // sample (all ranks present, the device idle), interleaved A/B halves in an instrumentation
  // sweep at every level; `warm` warm-up steps (a graph is captured on the second).
  cudaEvent_t start = nullptr, stop = nullptr;
  TPB_CUDA_CHECK(cudaEventCreate(&start));
  TPB_CUDA_CHECK(cudaEventCreate(&stop));
  EventTimer event_timer(engine.stream(), start, stop);
  MeasureLoop loop;
  loop.counts = sp.counts;
  loop.counts.warmup = warm;
  loop.interleave = spec.measure.interleave_instrumentation;
  loop.barrier = [&] { comm.barrier(); };
  loop.step = marked_step(inst, step);
  std::int64_t reduces_before = 0, expert_reads_before = 0;
  loop.after_warmup = [&] {
    engine.synchronize();
    reduces_before = engine.stats().all_reduces;
    expert_reads_before = engine.routed_expert_reads();  // the engine is idle: no wait
  };
  ledger.add("latency_samples", static_cast<std::size_t>((loop.interleave ? 2 : 1) * timed_steps) * sizeof(double));
  const Measurement steps = measure_steps(loop, event_timer, &inst);
  const std::vector<double>& latency_us = steps.latency_us;
  if (fault == PlantedDebugFault::allocation) allocate_debug_snapshot();
  const std::int64_t reduces_per_step = (engine.stats().all_reduces - reduces_before) / steps.timed_steps;
  const double expert_reads_per_step =
      static_cast<double>(engine.routed_expert_reads() - expert_reads_before) / static_cast<double>(steps.timed_steps);

  // Allreduce share: the step's allreduces (same count, same sizes, same backend, same
  // stream) timed alone, eagerly, back to back, on a scratch buffer; the median over as many
  // samples as the step has, against the median step. It leaves out what overlapping would
  // hide and what graph replay saves on launches, so it is the share the collectives would
  // take if nothing else ran: an upper bound for graph mode.
  const std::vector<std::size_t> counts = engine.step_all_reduce_counts(tokens_per_step);
  const std::size_t max_count = counts.empty() ? 0 : *std::max_element(counts.begin(), counts.end());
  void* scratch = nullptr;
  TPB_CUDA_CHECK(cudaMalloc(&scratch, std::max<std::size_t>(max_count, 1) * 2));
  TPB_CUDA_CHECK(cudaMemsetAsync(scratch, 0, std::max<std::size_t>(max_count, 1) * 2, engine.stream()));
  MeasureLoop alone;
  alone.counts = {/*warmup*/ 1, /*iterations*/ timed_steps, /*repetitions*/ 1};
  alone.barrier = [&] { comm.barrier(); };
  alone.step = [&](std::uint32_t) {
    for (std::size_t c : counts) comm.all_reduce(scratch, scratch, c, DType::bf16, engine.stream());
  };
  alone.after_warmup = [&] { engine.synchronize(); };
  const std::vector<double> allreduce_us = measure_steps(alone, event_timer, nullptr).latency_us;
  engine.synchronize();
  TPB_CUDA_CHECK(cudaFree(scratch));
  TPB_CUDA_CHECK(cudaEventDestroy(start));
  TPB_CUDA_CHECK(cudaEventDestroy(stop));

  const double mean_us = std::accumulate(latency_us.begin(), latency_us.end(), 0.0) / static_cast<double>(latency_us.size());
  const double median_step_us = median(latency_us);
  const double median_allreduce_us = allreduce_us.empty() ? 0.0 : median(allreduce_us);

  std::vector<float> last_rows;
  if (!all_rows) last_rows = engine.last_position_logits();
  const std::vector<float>& logits = all_rows ? engine.logits() : last_rows;
  const std::size_t sample = std::min<std::size_t>(logits.size(), kOutputSampleValues);
  json instrumentation = instrumentation_summary(level, inst, ledger, marks_per_step, median_step_us);
  if (level == InstrumentationLevel::debug)
    instrumentation["debug"] = debug_logits_summary(logits, debug_snapshot, static_cast<std::int64_t>(logits.size()) / V, V);
  if (level == InstrumentationLevel::digests)
    instrumentation["tensor_digests"] = engine_tensor_digests(
        digests, ce.config,
        std::string(decode && real_prefill ? "forward 0 is the prefill that fills the cache, then " : "") +
            std::to_string(warm) + " warm-up step(s), then " + timed_steps_text(timed_steps, spec.measure) +
            (decode && cuda_graph ? "; graph mode: the first warm-up runs eagerly, the second is captured, and the "
                                    "steps after it are replays that rewrite the captured forward's slots (the last "
                                    "replay's values stay)"
                                  : ""));
  engine.drop_graphs();  // its kernels may write this case's digest slots, freed on return
  const GpuEngineStats& st = engine.stats();
  // Measured memory (the rank's readings around the allocations, current_device_memory): weights when the
  // engine was built (the weights stay loaded across the cases of a sweep), the KV cache and
  // the step buffers at their latest allocation, and the peak after the timed steps.
  MemoryMeter peak(true);
  peak.mark("after_steps", 0);
  json memory = {{"source", device_memory_source()}};
  for (const MemoryMeter* m : {&ce.built, &ce.buffers, &peak}) {
    const json phases = m->to_json();  // named: items() of a temporary would dangle
    for (const auto& [phase, value] : phases.items())
      if (phase != "source") memory[phase] = value;
  }
  json measured = json::object();
  const bool pooled = engine.options().mem_fraction > 0;
  if (auto w = ce.built.growth("before_engine", "after_weights")) measured["weights"] = *w;
  // A pool sized by the formula is the plan's kv_pool term; an exact cache its kv_cache term.
  if (auto kv = ce.buffers.growth("before_buffers", "after_kv")) measured[pooled ? "kv_pool" : "kv_cache"] = *kv;
  if (auto act = ce.buffers.growth("after_kv", "after_buffers")) measured["activations"] = *act;
  memory["breakdown"] = measured;
  memory["kv_pool"] = kv_pool_json(engine.kv_pool_size(), static_cast<std::int64_t>(engine.kv_cache_bytes()));

  // Weight-read roofline of the step (issue 5's decode target): the weights this rank read,
  // with the routed experts actually chosen, at the device copy bandwidth measured in this
  // process (once, after the memory readings above, so they do not see its buffers).
  const double step_weight_bytes = static_cast<double>(engine.step_fixed_weight_bytes()) +
                                   expert_reads_per_step * static_cast<double>(engine.routed_expert_bytes());
  const double copy_GBps = worker_copy_GBps();
  const double weight_read_us = step_weight_bytes / (copy_GBps * 1e3);
  // tokens/s is the record's throughput (suite/measure/measure.h, from the merged latency's mean).
  StepWork work;
  work.tokens = static_cast<double>(tokens_per_step);
  RankResult result;
  result.set_samples(steps);
  result.work = work;
  result.outputs["logits"].assign(logits.begin(), logits.begin() + static_cast<std::ptrdiff_t>(sample));
  result.digests["logits"] = fnv1a64_hex(logits.data(), logits.size() * sizeof(float));
  result.nonfinite = nonfinite_values("logits", logits.data(), logits.size());
  result.memory = memory;
  result.plan = memory_plan(ce.config, tp, ce.config.quant, pooled ? 0 : sizes.max_batch * sizes.max_len, 2);
  result.metrics = {{"mode", mode},
                    {"tokens_per_step", tokens_per_step},
                    {"latency_mean_us", mean_us},
                    {"step_us", median_step_us},
                    {"allreduce_us", median_allreduce_us},
                    {"allreduce_share", median_allreduce_us / median_step_us},
                    {"allreduce_method", "the step's allreduce calls alone, eager, same sizes/backend/stream; median vs median step"},
                    {"kv_tokens", decode ? seq_len + 1 : seq_len},
                    {"kv_fill", decode ? (real_prefill ? "prefill" : "synthetic") : "none"},
                    {"logits_rows", all_rows ? "all" : "last"},
                    {"weight_bytes", engine.weight_bytes()},
                    {"kv_cache_bytes", engine.kv_cache_bytes()},
                    {"kv_pool_tokens", engine.kv_pool_tokens()},
                    {"activation_bytes", engine.activation_bytes()},
                    {"allreduces_per_step", reduces_per_step},
                    {"routed_expert_reads_per_step", expert_reads_per_step},
                    {"step_weight_bytes", step_weight_bytes},
                    {"copy_GBps", copy_GBps},
                    {"weight_read_us", weight_read_us},
                    {"x_weight_read_time", median_step_us / weight_read_us},
                    {"cuda_graph", cuda_graph},
                    {"graph_replays", st.graph_replays},
                    {"vocab_size", V},
                    {"compute_dtype", "bf16"},
                    {"alloc_bytes", ledger.total_bytes()},
                    {"sequence", {{"communicator", calls.to_json()}, {"allocations", ledger.sequence_json()}}},
                    {"trace_file", nullptr},
                    {"instrumentation", instrumentation},
                    {"weights", ce.weights->describe()}};
  result.comm = communicator_result(backend, comm);
  return result;
}
#endif  // TPB_HAVE_CUDA

}  // namespace

std::vector<std::vector<std::int64_t>> read_input_ids(const json& ids, const std::string& source) {
  TPB_INPUT_CHECK(ids.is_array() && !ids.empty(), source << ": $: expected a non-empty list of token-id lists");
  std::vector<std::vector<std::int64_t>> out;
  for (std::size_t b = 0; b < ids.size(); ++b) {
    const json& row = ids[b];
    TPB_INPUT_CHECK(row.is_array() && !row.empty(), source << ": $[" << b << "]: expected a non-empty list of token ids");
    TPB_INPUT_CHECK(row.size() == ids[0].size(), source << ": $[" << b << "]: expected " << ids[0].size()
                                                        << " tokens (all sequences equally long), got " << row.size());
    std::vector<std::int64_t> r;
    for (std::size_t i = 0; i < row.size(); ++i) {
      TPB_INPUT_CHECK(row[i].is_number_integer() && row[i].get<std::int64_t>() >= 0,
                      source << ": $[" << b << "][" << i << "]: expected a non-negative integer token id, got " << row[i].dump());
      r.push_back(row[i].get<std::int64_t>());
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<float> engine_logits(Engine& engine, const std::vector<std::vector<std::int64_t>>& ids,
                                 std::int64_t prefill) {
  return step_logits(engine, ids, prefill);
}


RankResult run_engine_workload(const CaseSpec& spec, WorkerState& state) {
  const json& params = spec.params;
  const std::string& device = spec.device;
  TPB_INPUT_CHECK(device == "cpu" || device == "cuda",
                  "case_spec.device: the engine runs on \"cpu\" (fp32 reference) or \"cuda\" (bf16), got '" << device << "'");
  if (device == "cuda") {
#if TPB_HAVE_CUDA
    return run_gpu_engine_workload(spec, state);
#else
    TPB_INPUT_CHECK(false, "device cuda: this tpbench was built without CUDA");
#endif
  }
  const std::string mode = string_param(params, "mode", "decode", "params");
  TPB_INPUT_CHECK(mode == "prefill" || mode == "decode" || mode == "logits",
                  "case_spec.params.mode: expected \"prefill\", \"decode\" or \"logits\", got \"" << mode << "\"");
  const int tp = static_cast<int>(int_param(params, "tp", state.world_size(), "params"));
  TPB_INPUT_CHECK(tp == state.world_size(), "case_spec.params.tp: " << tp << " but the group has " << state.world_size() << " ranks");
  const std::string backend = string_param(params, "allreduce", "shm", "params");
  TPB_INPUT_CHECK(!is_gpu_backend(backend), "case_spec.params.allreduce: the CPU engine needs a host backend, got '" << backend << "'");
  const CommOptions options{};
  Communicator& comm = state.communicator(backend, options);
  ObservedCommunicator& observed = observed_communicator(state, backend, options, comm);
  CachedEngine& ce = engine_for(spec, state, observed, backend, tp);
  Engine& engine = *ce.engine;
  comm.reset_allreduce_calls();  // this case's calls only: the communicator outlives the case

  if (mode == "logits") {
    const auto ids = logits_mode_ids(params);
    const auto logits = step_logits(engine, ids, int_param(params, "prefill", 0, "params"));
    return logits_mode_result(params, state.rank(), ids, ce.config.vocab_size, logits, engine.weight_bytes(),
                              communicator_result(backend, comm));
  }

  const StepParams sp = step_params(spec);
  const std::int64_t batch = sp.batch, seq_len = sp.seq_len;
  const MeasureCounts counts = sp.counts;
  const std::uint64_t seed = case_model(spec).seed;
  const std::int64_t V = ce.config.vocab_size;
  std::vector<std::int64_t> prompt(batch * seq_len), next(batch);
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t i = 0; i < seq_len; ++i) prompt[b * seq_len + i] = workload_token(seed, b, i, V);
    next[b] = workload_token(seed, b, seq_len, V);
  }

  const bool decode = mode == "decode";
  const InstrumentationLevel level = instrumentation_level(params);
  const PlantedDebugFault fault = planted_debug_fault(level);
  if (fault == PlantedDebugFault::value) {
    std::int64_t& token = decode ? next[0] : prompt[0];
    token = (token + 1) % V;
  }
  const std::int64_t timed_steps = counts.repetitions * counts.iterations;  // per side (A, and B when interleaved)
  const std::int64_t tokens_per_step = decode ? batch : batch * seq_len;
  // Everything the levels need is allocated here, at every level: the mark ring (step
  // begin/end + entry/exit of 2L+1 allreduces and one all_gather per step), the debug
  // level's snapshot of the logits and the call sequence's buffer.
  AllocationLedger ledger;
  ledger.add("prompt_tokens", prompt.size() * sizeof(std::int64_t));
  ledger.add("next_tokens", next.size() * sizeof(std::int64_t));
  const std::int64_t marks_per_step = 2 + 2 * (2 * ce.config.num_hidden_layers + 2);
  Instrumentation inst(level, static_cast<std::size_t>(std::min<std::int64_t>(timed_steps * marks_per_step, 1 << 20)), ledger);
  std::vector<float> debug_snapshot;
  auto allocate_debug_snapshot = [&] {
    debug_snapshot.assign(static_cast<std::size_t>(tokens_per_step * V), 0.0f);
    ledger.add("debug_snapshot", debug_snapshot.size() * sizeof(float));
  };
  if (fault != PlantedDebugFault::allocation) allocate_debug_snapshot();
  CallSequence calls(kCallsSpelledOut);
  ledger.add("call_sequence", calls.buffer_bytes());
  // The digests level's slots: every collective of the prefill, the warm-ups and the timed steps.
  const std::int64_t forwards = (decode ? 1 : 0) + counts.warmup + (spec.measure.interleave_instrumentation ? 2 : 1) * timed_steps;
  TensorDigests digests(std::min<std::size_t>(collectives_per_forward(ce.config) * static_cast<std::size_t>(forwards), 1 << 16),
                        /*on_device=*/false, ledger);
  std::optional<PlantedDivergence> plant = planted_divergence(backend, tp, ce.config, scale_host_values);
  ObserveScope observe(observed, inst, &calls, level == InstrumentationLevel::digests ? &digests : nullptr,
                       plant ? &*plant : nullptr);
  if (decode) engine.prefill(prompt, batch);  // fills the KV cache to seq_len, untimed
  auto step = [&] {
    if (decode) {
      engine.rewind(seq_len);
      engine.decode(next);
    } else {
      engine.prefill(prompt, batch);
    }
    if (fault == PlantedDebugFault::allreduce) {
      const float probe_in = 1.0f;
      float probe_out = 0.0f;
      observed.all_reduce(&probe_in, &probe_out, 1, DType::f32, nullptr);
    }
  };
  // The harness's loop (suite/measure/measure.h): warm-up, a barrier before each sample, steady clock;
  // interleaved A/B halves in an instrumentation sweep, at every level (the same steps).
  MeasureLoop loop;
  loop.counts = counts;
  loop.interleave = spec.measure.interleave_instrumentation;
  loop.barrier = [&] { comm.barrier(); };
  loop.step = marked_step(inst, step);
  ledger.add("latency_samples", static_cast<std::size_t>((loop.interleave ? 2 : 1) * timed_steps) * sizeof(double));
  std::int64_t reduces_before = 0;
  loop.after_warmup = [&] { reduces_before = engine.stats().all_reduces; };
  HostTimer timer;
  const Measurement measured = measure_steps(loop, timer, &inst);
  const std::vector<double>& latency_us = measured.latency_us;
  if (fault == PlantedDebugFault::allocation) allocate_debug_snapshot();
  const double mean_us = std::accumulate(latency_us.begin(), latency_us.end(), 0.0) / static_cast<double>(latency_us.size());
  const auto& logits = engine.logits();
  // The first values of the last step's logits, for tolerance checks across TP sizes and
  // devices (digests compare bitwise; these compare within a budget).
  const std::size_t sample = std::min<std::size_t>(logits.size(), kOutputSampleValues);
  // The timing level's own cost, estimated at every level (same post-loop work everywhere).
  const double median_step_us = median(latency_us);
  json instrumentation = instrumentation_summary(level, inst, ledger, marks_per_step, median_step_us);
  json trace_file = nullptr;
  if (level != InstrumentationLevel::off) {
    const std::vector<Span> spans = engine_spans(inst, ce.config);
    instrumentation["phases"] = phase_summary(spans, timed_steps, "step");
    if (level == InstrumentationLevel::trace || level == InstrumentationLevel::debug) {
      const std::string path = trace_path(spec.trace_dir, spec.case_id, state.rank());
      write_chrome_trace(path, spans, state.rank(), spec.label);
      trace_file = path;
    }
  }
  if (level == InstrumentationLevel::debug)
    instrumentation["debug"] = debug_logits_summary(logits, debug_snapshot, tokens_per_step, V);
  if (level == InstrumentationLevel::digests)
    instrumentation["tensor_digests"] = engine_tensor_digests(
        digests, ce.config, std::string(decode ? "forward 0 is the prefill that fills the cache, then " : "") +
                                std::to_string(counts.warmup) + " warm-up step(s), then " + timed_steps_text(timed_steps, spec.measure));
  // On the CPU the measured side is the process's heap growth around the weights' loading
  // (host allocations; the engine's own accounting only where the allocator cannot say). The
  // KV cache grows on demand inside the steps and is not planned on the CPU: the engine's
  // count of it is reported as accounted, not as measured.
  json memory = ce.built.to_json();
  const std::optional<std::int64_t> weights_measured = ce.built.growth("before_weights", "after_weights");
  memory["breakdown"] = {{"weights", ce.built.source() == MemorySource::host_allocations && weights_measured
                                         ? *weights_measured
                                         : static_cast<std::int64_t>(engine.weight_bytes())}};
  memory["accounted"] = {{"weights", engine.weight_bytes()}, {"kv_cache", engine.kv_cache_bytes()}};
  // tokens/s is the record's throughput (suite/measure/measure.h, from the merged latency's mean).
  StepWork work;
  work.tokens = static_cast<double>(tokens_per_step);
  RankResult result;
  result.set_samples(measured);
  result.work = work;
  result.outputs["logits"].assign(logits.begin(), logits.begin() + static_cast<std::ptrdiff_t>(sample));
  result.digests["logits"] = fnv1a64_hex(logits.data(), logits.size() * sizeof(float));
  result.nonfinite = nonfinite_values("logits", logits.data(), logits.size());
  result.memory = memory;
  result.plan = memory_plan(ce.config, tp, Quantization::f32, 0, 4);  // fp32 storage, whatever ce.config.quant
  result.metrics = {{"mode", mode},
                    {"tokens_per_step", tokens_per_step},
                    {"latency_mean_us", mean_us},
                    {"kv_tokens", decode ? seq_len + 1 : seq_len},
                    {"weight_bytes", engine.weight_bytes()},
                    {"kv_cache_bytes", engine.kv_cache_bytes()},
                    {"allreduces_per_step", (engine.stats().all_reduces - reduces_before) / measured.timed_steps},
                    {"vocab_size", V},
                    {"compute_dtype", "f32"},
                    {"alloc_bytes", ledger.total_bytes()},
                    {"sequence", {{"communicator", calls.to_json()}, {"allocations", ledger.sequence_json()}}},
                    {"trace_file", trace_file},
                    {"instrumentation", instrumentation},
                    {"weights", ce.weights->describe()}};
  result.comm = communicator_result(backend, comm);
  return result;
}

}  // namespace tpb
