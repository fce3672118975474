// The engine workload on device "cuda" (see engine_workload.h): the bf16 GpuEngine
// (reference_engine/gpu/gpu_engine.h), one rank per GPU, timed by device events. CUDA builds only.
#if TPB_HAVE_CUDA
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <optional>

#include "reference_engine/comm/backends.h"
#include "reference_engine/gpu/gpu_engine.h"
#include "reference_engine/memory/meter.h"
#include "suite/launch/placement.h"
#include "suite/measure/digest.h"
#include "suite/measure/stats.h"
#include "suite/workloads/engine_case.h"
#include "suite/workloads/engine_faults.h"
#include "suite/workloads/workloads.h"
#include "tpb/check.h"
#include "tpb/cuda_check.h"
#include "tpb/kernels/device.h"
#include "tpb/kernels/event_timing.h"
#include "tpb/kernels/gpu/tensor_digest.h"
#include "tpb/kernels/hw_probes.h"

namespace tpb::engine_case {

using nlohmann::json;

namespace {
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
// It owns its two events.
class EventTimer final : public SampleTimer {
 public:
  explicit EventTimer(cudaStream_t stream) : stream_(stream) {
    TPB_CUDA_CHECK(cudaEventCreate(&start_));
    TPB_CUDA_CHECK(cudaEventCreate(&stop_));
  }
  ~EventTimer() override {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  double time_us(const std::function<void()>& step) override { return device_us(stream_, start_, stop_, step); }

 private:
  cudaStream_t stream_;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

// A serving engine runs one backend: the KV pool is sized from what is free with this
// case's buffers alone, not with those of a backend an earlier case of the sweep used (a
// memory-fraction sweep alternating nccl and custom once read the same pool for both).
// The wrappers go first: they refer to the communicators.
void keep_only_this_communicator(WorkerState& state, const std::string& backend, const CommOptions& options) {
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

// The logits mode on the GPU: the KV cache holds exactly the sequences; eager steps, every
// position's logits.
RankResult gpu_logits_case(const CaseSpec& spec, const CaseParams& params, WorkerState& state, Communicator& comm,
                           ObservedCommunicator& observed, int tp, const std::string& backend) {
  const auto ids = logits_mode_ids(params);
  const std::int64_t prefill = params.prefill.get(0);
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

// A case sized from mem_fraction: the verdict of every rank on whether its pool holds the case
// (an empty string: it does), exchanged; the first infeasible rank's result, or nullopt.
std::optional<RankResult> infeasible_result(WorkerState& state, const CachedGpuEngine* cached, const std::string& infeasible,
                                            const KvPoolSize& infeasible_pool, const std::string& mode,
                                            const std::string& backend, Communicator& comm) {
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
  return std::nullopt;
}

// Allreduce share: the step's allreduces (same count, same sizes, same backend, same
// stream) timed alone, eagerly, back to back, on a scratch buffer; the median over as many
// samples as the step has, against the median step. It leaves out what overlapping would
// hide and what graph replay saves on launches, so it is the share the collectives would
// take if nothing else ran: an upper bound for graph mode.
double median_allreduce_alone_us(GpuEngine& engine, Communicator& comm, std::int64_t tokens_per_step,
                                 std::int64_t timed_steps, SampleTimer& timer) {
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
  std::vector<double> allreduce_us = measure_steps(alone, timer, nullptr).latency_us;
  engine.synchronize();
  TPB_CUDA_CHECK(cudaFree(scratch));
  return allreduce_us.empty() ? 0.0 : median(allreduce_us);
}

// Measured memory (the rank's readings around the allocations, current_device_memory): weights when the
// engine was built (the weights stay loaded across the cases of a sweep), the KV cache and
// the step buffers at their latest allocation, and the peak after the timed steps.
json gpu_memory(const CachedGpuEngine& ce) {
  const GpuEngine& engine = *ce.engine;
  MemoryMeter peak(true);
  peak.mark("after_steps", 0);
  json memory = {{"source", device_memory_source()}};
  for (const MemoryMeter* m : std::initializer_list<const MemoryMeter*>{&ce.built, &ce.buffers, &peak}) {
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
  return memory;
}

// A GPU engine case's parameters, validated.
struct GpuCase {
  std::string mode;           // "prefill" | "decode" | "logits"
  int tp = 1;                 // the group's world size
  std::string backend;        // a GPU allreduce backend (default nccl)
  bool cuda_graph = false;    // decode steps replay a captured graph
  StepParams sp;              // batch, seq_len and the measurement counts
  bool decode = false;
  bool real_prefill = true;   // the cache is filled by a real prefill (false: a decode of more than
                              // kGpuRealPrefillMaxTokens tokens fills it synthetically)
  // The KV cache is sized as a serving engine sizes it, from the case's mem_fraction, when the
  // scenario sweeps mem_fraction (case_spec.kv_pool); otherwise exactly the case's cache (0).
  double mem_fraction = 0;
};

GpuCase gpu_case(const CaseSpec& spec, const CaseParams& params, const WorkerState& state) {
  GpuCase c;
  c.mode = params.mode.get("decode");
  TPB_INPUT_CHECK(c.mode == "prefill" || c.mode == "decode" || c.mode == "logits",
                  "case_spec.params.mode: expected \"prefill\", \"decode\" or \"logits\", got \"" << c.mode << "\"");
  c.tp = static_cast<int>(params.tp.get(state.world_size()));
  TPB_INPUT_CHECK(c.tp == state.world_size(), "case_spec.params.tp: " << c.tp << " but the group has " << state.world_size() << " ranks");
  c.backend = params.allreduce.get("nccl");
  TPB_INPUT_CHECK(is_gpu_backend(c.backend), "case_spec.params.allreduce: device cuda needs a GPU backend ("
                                                 << backend_list(BackendDevice::gpu) << "), got '" << c.backend << "'");
  c.cuda_graph = params.cuda_graph_on();
  c.sp = step_params(spec, params);
  c.decode = c.mode == "decode";
  c.real_prefill = !c.decode || c.sp.batch * c.sp.seq_len <= kGpuRealPrefillMaxTokens;
  if (spec.kv_pool) c.mem_fraction = params.mem_fraction.get(0);
  return c;
}

// The communicator options of a case on this rank's device.
CommOptions gpu_comm_options(const CaseSpec& spec, const WorkerState& state) {
  const int device = local_device(state);
  TPB_CUDA_CHECK(cudaSetDevice(device));
  CommOptions options;
  options.device = device;
  // The scenario's comm.custom_max_bytes (suite/scenario/scenario.h), as a serving engine's flag sizes
  // its custom allreduce; CommOptions' default (8 MiB) when the scenario leaves it out.
  if (spec.comm.custom_max_bytes) options.max_bytes = static_cast<std::size_t>(*spec.comm.custom_max_bytes);
  if (spec.comm.custom_on_pcie) options.custom_on_pcie = *spec.comm.custom_on_pcie;
  if (spec.comm.custom_timeout_s) options.timeout_s = *spec.comm.custom_timeout_s;
  return options;
}

// What the digests level's forward passes are, in the order a GPU case ran them.
std::string gpu_forwards_text(const GpuCase& c, std::int64_t warm, std::int64_t timed_steps, const CaseSpec::Measure& measure) {
  return std::string(c.decode && c.real_prefill ? "forward 0 is the prefill that fills the cache, then " : "") +
         std::to_string(warm) + " warm-up step(s), then " + timed_steps_text(timed_steps, measure) +
         (c.decode && c.cuda_graph ? "; graph mode: the first warm-up runs eagerly, the second is captured, and the "
                                     "steps after it are replays that rewrite the captured forward's slots (the last "
                                     "replay's values stay)"
                                   : "");
}

// Weight-read roofline of the step (issue 5's decode target): the weights this rank read,
// with the routed experts actually chosen, at the device copy bandwidth measured in this
// process (once: worker_copy_GBps), against the median step.
json weight_read_roofline(const GpuEngine& engine, double expert_reads_per_step, double median_step_us) {
  const double step_weight_bytes = static_cast<double>(engine.step_fixed_weight_bytes()) +
                                   expert_reads_per_step * static_cast<double>(engine.routed_expert_bytes());
  const double copy_GBps = worker_copy_GBps();
  const double weight_read_us = step_weight_bytes / (copy_GBps * 1e3);
  return {{"step_weight_bytes", step_weight_bytes},
          {"copy_GBps", copy_GBps},
          {"weight_read_us", weight_read_us},
          {"x_weight_read_time", median_step_us / weight_read_us}};
}

// A prefill or decode case on the engine `ce` sized for it (`sizes`): the harness's loop with
// device events as its clock, the allreduce share, then the rank's result.
RankResult timed_gpu_case(const CaseSpec& spec, const CaseParams& params, const GpuCase& c, Communicator& comm,
                          ObservedCommunicator& observed, CachedGpuEngine& ce, const GpuEngineOptions& sizes) {
  const std::string& mode = c.mode;
  const std::string& backend = c.backend;
  const int tp = c.tp;
  const bool cuda_graph = c.cuda_graph, decode = c.decode, real_prefill = c.real_prefill;
  const StepParams& sp = c.sp;
  const std::int64_t batch = sp.batch, seq_len = sp.seq_len;
  GpuEngine& engine = *ce.engine;
  const std::uint64_t seed = case_model(spec).seed;
  const std::int64_t V = ce.config.vocab_size;
  StepTokens tokens = step_tokens(seed, batch, seq_len, V, /*with_prompt=*/real_prefill);
  std::vector<std::int64_t>&prompt = tokens.prompt, &next = tokens.next;
  const InstrumentationLevel level = params.instrumentation_level();
  const std::int64_t timed_steps = sp.counts.repetitions * sp.counts.iterations;
  // A graph is captured on the second decode of a batch size: two warm-up steps at least, so
  // every timed step is a replay.
  const std::int64_t warm = std::max<std::int64_t>(sp.counts.warmup, decode && cuda_graph ? 2 : 1);
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
  if (fault == PlantedDebugFault::value) plant_value_fault(decode ? next[0] : prompt[0], V);
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
  std::optional<PlantedDivergence> plant = planted_divergence(backend, tp, ce.config.num_hidden_layers, collectives_per_forward(ce.config), scale_device_values);
  // Every case captures its own graphs: a graph captured by an earlier case would replay that
  // case's calls unseen (and its digests level's kernels write that case's freed buffers).
  engine.drop_graphs();
  ObserveScope observe(observed, inst, &calls, level == InstrumentationLevel::digests ? &digests : nullptr,
                       plant ? &*plant : nullptr);

  if (decode && real_prefill) engine.prefill(prompt, batch);  // fills the KV cache to seq_len, untimed
  if (decode && !real_prefill) engine.fill_kv_synthetic(batch, seq_len, seed);
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
  EventTimer event_timer(engine.stream());
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

  const double median_allreduce_us = median_allreduce_alone_us(engine, comm, tokens_per_step, timed_steps, event_timer);

  const double mean_us = std::accumulate(latency_us.begin(), latency_us.end(), 0.0) / static_cast<double>(latency_us.size());
  const double median_step_us = median(latency_us);

  std::vector<float> last_rows;
  if (!all_rows) last_rows = engine.last_position_logits();
  const std::vector<float>& logits = all_rows ? engine.logits() : last_rows;
  json instrumentation = instrumentation_summary(level, inst, ledger, marks_per_step, median_step_us);
  if (level == InstrumentationLevel::debug)
    instrumentation["debug"] = debug_logits_summary(logits, debug_snapshot, static_cast<std::int64_t>(logits.size()) / V, V);
  if (level == InstrumentationLevel::digests)
    instrumentation["tensor_digests"] =
        engine_tensor_digests(digests, ce.config, gpu_forwards_text(c, warm, timed_steps, spec.measure));
  engine.drop_graphs();  // its kernels may write this case's digest slots, freed on return
  const GpuEngineStats& st = engine.stats();
  const json memory = gpu_memory(ce);
  const bool pooled = engine.options().mem_fraction > 0;

  RankResult result = timed_steps_result(steps, tokens_per_step, logits);
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
                    {"cuda_graph", cuda_graph},
                    {"graph_replays", st.graph_replays},
                    {"vocab_size", V},
                    {"compute_dtype", "bf16"},
                    {"alloc_bytes", ledger.total_bytes()},
                    {"sequence", {{"communicator", calls.to_json()}, {"allocations", ledger.sequence_json()}}},
                    {"trace_file", nullptr},
                    {"instrumentation", instrumentation},
                    {"weights", ce.weights->describe()}};
  // After the memory readings above, so that they do not see the copy bandwidth's buffers.
  result.metrics.update(weight_read_roofline(engine, expert_reads_per_step, median_step_us));
  result.comm = communicator_result(backend, comm);
  return result;
}

}  // namespace

RankResult run_gpu_engine_workload(const CaseSpec& spec, WorkerState& state) {
  const CaseParams params = CaseParams::from_json(spec.params);
  const GpuCase c = gpu_case(spec, params, state);
  const std::string& mode = c.mode;
  const std::string& backend = c.backend;
  const int tp = c.tp;
  const CommOptions options = gpu_comm_options(spec, state);
  const double mem_fraction = c.mem_fraction;
  const std::int64_t batch = c.sp.batch, seq_len = c.sp.seq_len;
  const bool decode = c.decode;
  if (mem_fraction > 0) keep_only_this_communicator(state, backend, options);
  Communicator& comm = state.communicator(backend, options);
  ObservedCommunicator& observed = observed_communicator(state, backend, options, comm);
  if (mode == "logits") return gpu_logits_case(spec, params, state, comm, observed, tp, backend);
  GpuEngineOptions sizes;
  sizes.max_batch = batch;
  sizes.max_len = decode ? seq_len + 1 : seq_len;
  sizes.max_prefill_tokens = gpu_engine_prefill_tokens(decode, batch, seq_len);
  sizes.last_position_logits =
      gpu_engine_last_position_logits(decode, batch, seq_len, case_model(spec).load_config().vocab_size);
  sizes.cuda_graph = c.cuda_graph;
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
  if (sizes.mem_fraction > 0)
    if (std::optional<RankResult> verdict = infeasible_result(state, cached, infeasible, infeasible_pool, mode, backend, comm))
      return *verdict;
  TPB_CHECK(cached != nullptr, "engine workload: no engine and no infeasible verdict");  // unreachable
  return timed_gpu_case(spec, params, c, comm, observed, *cached, sizes);
}
}  // namespace tpb::engine_case
#endif  // TPB_HAVE_CUDA
