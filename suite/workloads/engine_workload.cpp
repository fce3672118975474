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
#include "reference_engine/config/json_text.h"
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
#include "suite/workloads/engine_case.h"
#include "suite/workloads/engine_faults.h"
#include "suite/workloads/observed_communicator.h"
#include "suite/workloads/workloads.h"
#include "tpb/check.h"
#include "tpb/kernels/device.h"
#include "tpb/kernels/tensor_digest.h"


namespace tpb {
namespace {

using nlohmann::json;
using namespace engine_case;

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

void scale_host_values(void* data, std::size_t count, DType dtype, float factor, void* /*stream*/) {
  kernels::scale_values_ref(data, count, dtype, factor);
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
                      source << ": $[" << b << "][" << i << "]: expected a non-negative integer token id, got " << shown_json(row[i]));
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

namespace {

// The record's instrumentation section on the CPU as far as the marks give it: the summary at
// every level, from timing on the phases of the steps, and at trace and debug a Chrome trace
// (its path into `trace_file`).
json cpu_instrumentation(const CaseSpec& spec, int rank, InstrumentationLevel level, const Instrumentation& inst,
                         const AllocationLedger& ledger, const ModelConfig& config, std::int64_t marks_per_step,
                         double median_step_us, std::int64_t timed_steps, json& trace_file) {
  json instrumentation = instrumentation_summary(level, inst, ledger, marks_per_step, median_step_us);
  if (level != InstrumentationLevel::off) {
    const std::vector<Span> spans = engine_spans(inst, config);
    instrumentation["phases"] = phase_summary(spans, timed_steps, "step");
    if (level == InstrumentationLevel::trace || level == InstrumentationLevel::debug) {
      const std::string path = trace_path(spec.trace_dir, spec.case_id, rank);
      write_chrome_trace(path, spans, rank, spec.label);
      trace_file = path;
    }
  }
  return instrumentation;
}

// On the CPU the measured side is the process's heap growth around the weights' loading
// (host allocations; the engine's own accounting only where the allocator cannot say). The
// KV cache grows on demand inside the steps and is not planned on the CPU: the engine's
// count of it is reported as accounted, not as measured.
json cpu_memory(const CachedEngine& ce) {
  const Engine& engine = *ce.engine;
  json memory = ce.built.to_json();
  const std::optional<std::int64_t> weights_measured = ce.built.growth("before_weights", "after_weights");
  memory["breakdown"] = {{"weights", ce.built.source() == MemorySource::host_allocations && weights_measured
                                         ? *weights_measured
                                         : static_cast<std::int64_t>(engine.weight_bytes())}};
  memory["accounted"] = {{"weights", engine.weight_bytes()}, {"kv_cache", engine.kv_cache_bytes()}};
  return memory;
}

// The CPU path's prefill or decode case on an engine `ce` built for it: the harness's loop
// over its steps, then the rank's result.
RankResult timed_cpu_case(const CaseSpec& spec, const CaseParams& params, WorkerState& state, const std::string& mode,
                          int tp, const std::string& backend, Communicator& comm, ObservedCommunicator& observed,
                          CachedEngine& ce) {
  Engine& engine = *ce.engine;
  const StepParams sp = step_params(spec, params);
  const std::int64_t batch = sp.batch, seq_len = sp.seq_len;
  const MeasureCounts counts = sp.counts;
  const std::int64_t V = ce.config.vocab_size;
  StepTokens tokens = step_tokens(case_model(spec).seed, batch, seq_len, V, /*with_prompt=*/true);
  std::vector<std::int64_t>&prompt = tokens.prompt, &next = tokens.next;

  const bool decode = mode == "decode";
  const InstrumentationLevel level = params.instrumentation_level();
  const PlantedDebugFault fault = planted_debug_fault(level);
  if (fault == PlantedDebugFault::value) plant_value_fault(decode ? next[0] : prompt[0], V);
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
  std::optional<PlantedDivergence> plant = planted_divergence(backend, tp, ce.config.num_hidden_layers, collectives_per_forward(ce.config), scale_host_values);
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
  // The timing level's own cost, estimated at every level (same post-loop work everywhere).
  const double median_step_us = median(latency_us);
  json trace_file = nullptr;
  json instrumentation = cpu_instrumentation(spec, state.rank(), level, inst, ledger, ce.config, marks_per_step,
                                             median_step_us, timed_steps, trace_file);
  if (level == InstrumentationLevel::debug)
    instrumentation["debug"] = debug_logits_summary(logits, debug_snapshot, tokens_per_step, V);
  if (level == InstrumentationLevel::digests)
    instrumentation["tensor_digests"] = engine_tensor_digests(
        digests, ce.config, std::string(decode ? "forward 0 is the prefill that fills the cache, then " : "") +
                                std::to_string(counts.warmup) + " warm-up step(s), then " + timed_steps_text(timed_steps, spec.measure));
  RankResult result = timed_steps_result(measured, tokens_per_step, logits);
  result.memory = cpu_memory(ce);
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

// device "cpu": the fp32 Engine; the logits mode here, the timed modes in timed_cpu_case.
RankResult run_cpu_engine_workload(const CaseSpec& spec, WorkerState& state) {
  const CaseParams params = CaseParams::from_json(spec.params);
  const std::string mode = params.mode.get("decode");
  TPB_INPUT_CHECK(mode == "prefill" || mode == "decode" || mode == "logits",
                  "case_spec.params.mode: expected \"prefill\", \"decode\" or \"logits\", got \"" << mode << "\"");
  const int tp = static_cast<int>(params.tp.get(state.world_size()));
  TPB_INPUT_CHECK(tp == state.world_size(), "case_spec.params.tp: " << tp << " but the group has " << state.world_size() << " ranks");
  const std::string backend = params.allreduce.get("shm");
  TPB_INPUT_CHECK(!is_gpu_backend(backend), "case_spec.params.allreduce: the CPU engine needs a host backend, got '" << backend << "'");
  const CommOptions options{};
  Communicator& comm = state.communicator(backend, options);
  ObservedCommunicator& observed = observed_communicator(state, backend, options, comm);
  CachedEngine& ce = engine_for(spec, state, observed, backend, tp);
  Engine& engine = *ce.engine;
  comm.reset_allreduce_calls();  // this case's calls only: the communicator outlives the case

  if (mode == "logits") {
    const auto ids = logits_mode_ids(params);
    const auto logits = step_logits(engine, ids, params.prefill.get(0));
    return logits_mode_result(params, state.rank(), ids, ce.config.vocab_size, logits, engine.weight_bytes(),
                              communicator_result(backend, comm));
  }

  return timed_cpu_case(spec, params, state, mode, tp, backend, comm, observed, ce);
}

}  // namespace

RankResult run_engine_workload(const CaseSpec& spec, WorkerState& state) {
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
  return run_cpu_engine_workload(spec, state);
}

}  // namespace tpb
