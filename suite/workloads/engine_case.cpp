// What the engine workload's CPU and GPU paths share (see engine_case.h).
#include "suite/workloads/engine_case.h"

#include <algorithm>
#include <string>

#include "reference_engine/memory/planner.h"
#include "reference_engine/memory/weight_bytes.h"
#include "suite/measure/digest.h"
#include "suite/workloads/engine_workload.h"
#include "suite/workloads/workloads.h"
#include "tpb/check.h"

namespace tpb::engine_case {

using nlohmann::json;

json memory_plan(const ModelConfig& config, int tp, Quantization quant, std::int64_t kv_tokens, std::int64_t kv_dtype_bytes) {
  ModelConfig text = config;
  text.has_vision_tower = false;
  json breakdown = {{"weights", weight_bytes(text, quant, tp).bytes_per_rank}};
  if (kv_tokens > 0) breakdown["kv_cache"] = kv_cell_bytes(config, kv_dtype_bytes) * kv_tokens;
  return {{"source", std::string("planner (") + quantization_name(quant) + ", tp " + std::to_string(tp) + ")"},
          {"breakdown", breakdown}};
}

StepParams step_params(const CaseSpec& spec, const CaseParams& params) {
  StepParams p;
  p.batch = params.batch_size.get(1);
  p.seq_len = params.seq_len.get(16);
  p.counts = spec.measure.counts({/*warmup*/ 1, /*iterations*/ 5, /*repetitions*/ 1});
  TPB_INPUT_CHECK(p.batch >= 1, "case_spec.params.batch_size: expected >= 1, got " << p.batch);
  TPB_INPUT_CHECK(p.seq_len >= 1, "case_spec.params.seq_len: expected >= 1, got " << p.seq_len);
  return p;
}

CaseModel case_model(const CaseSpec& spec) {
  TPB_INPUT_CHECK(spec.model.has_value(), "case_spec.model: the engine workload needs a model section");
  TPB_INPUT_CHECK(!spec.model->config_path.empty(), "case_spec.model.config_path: required");
  return {*spec.model, case_model_params(CaseParams::from_json(spec.params)), spec.model->seed.value_or(1234)};
}

std::size_t collectives_per_forward(const ModelConfig& config) {
  return static_cast<std::size_t>(2 * config.num_hidden_layers + 2);
}

std::pair<std::int64_t, std::string> collective_site(const ModelConfig& config, std::size_t j) {
  const std::size_t last = collectives_per_forward(config) - 1;
  if (j == 0) return {-1, "embedding all_reduce"};
  if (j == last) return {-1, "lm_head all_gather"};
  const auto layer = static_cast<std::int64_t>((j - 1) / 2);
  const bool attention = (j - 1) % 2 == 0;
  return {layer, "layer " + std::to_string(layer) + " " +
                     (attention ? "attention" : config.is_moe_layer(layer) ? "moe" : "mlp") + " all_reduce"};
}

std::string timed_steps_text(std::int64_t timed_steps, const CaseSpec::Measure& measure) {
  return measure.interleave_instrumentation
             ? std::to_string(2 * timed_steps) + " timed step(s) (A and B halves interleaved)"
             : std::to_string(timed_steps) + " timed step(s)";
}

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

std::int64_t workload_token(std::uint64_t seed, std::int64_t seq, std::int64_t pos, std::int64_t vocab) {
  const std::uint64_t h = synthetic::mix64(synthetic::mix64(seed ^ 0x746f6b656e73ull) + static_cast<std::uint64_t>(seq) * 0x9e3779b97f4a7c15ull +
                                           static_cast<std::uint64_t>(pos));
  return static_cast<std::int64_t>(h % static_cast<std::uint64_t>(vocab));
}

StepTokens step_tokens(std::uint64_t seed, std::int64_t batch, std::int64_t seq_len, std::int64_t vocab, bool with_prompt) {
  StepTokens t{std::vector<std::int64_t>(with_prompt ? batch * seq_len : 0), std::vector<std::int64_t>(batch)};
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t i = 0; i < seq_len && with_prompt; ++i) t.prompt[b * seq_len + i] = workload_token(seed, b, i, vocab);
    t.next[b] = workload_token(seed, b, seq_len, vocab);
  }
  return t;
}

std::int64_t prefilled_tokens(std::int64_t prefill, std::int64_t seq) { return (prefill <= 0 || prefill > seq) ? seq : prefill; }

RankResult timed_steps_result(const Measurement& steps, std::int64_t tokens_per_step, const std::vector<float>& logits) {
  StepWork work;
  work.tokens = static_cast<double>(tokens_per_step);
  RankResult result;
  result.set_samples(steps);
  result.work = work;
  // The first values of the last step's logits, for tolerance checks across TP sizes and
  // devices (digests compare bitwise; these compare within a budget).
  const std::size_t sample = std::min<std::size_t>(logits.size(), kOutputSampleValues);
  result.outputs["logits"].assign(logits.begin(), logits.begin() + static_cast<std::ptrdiff_t>(sample));
  result.digests["logits"] = fnv1a64_hex(logits.data(), logits.size() * sizeof(float));
  result.nonfinite = nonfinite_values("logits", logits.data(), logits.size());
  return result;
}

RankResult logits_mode_result(const CaseParams& params, int rank, const std::vector<std::vector<std::int64_t>>& ids,
                              std::int64_t vocab, const std::vector<float>& logits, std::size_t weight_bytes,
                              json comm) {
  const std::string out = params.out.get("");
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

std::vector<std::vector<std::int64_t>> logits_mode_ids(const CaseParams& params) {
  TPB_INPUT_CHECK(params.input_ids.present(), "case_spec.params.input_ids: required in logits mode");
  return read_input_ids(*params.input_ids.written, "case_spec.params.input_ids");
}

}  // namespace tpb::engine_case
