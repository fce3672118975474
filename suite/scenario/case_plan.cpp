#include "suite/scenario/case_plan.h"

#include "reference_engine/config/json_text.h"
#include "reference_engine/config/model_config.h"
#include "reference_engine/memory/cpu_engine_bytes.h"
#include "reference_engine/memory/engine_buffers.h"
#include "reference_engine/memory/gpu_catalog.h"
#include "reference_engine/memory/host_memory.h"
#include "reference_engine/memory/planner.h"
#include "reference_engine/memory/weight_bytes.h"
#include "tpb/check.h"
#include "tpb/kernels/device.h"

#include <cmath>
#include <cstdio>

namespace tpb {

CaseModelParams case_model_params(const CaseParams& params) {
  CaseModelParams out;
  if (const auto& v = params.layers.written; v && !v->is_null()) {
    TPB_INPUT_CHECK(v->is_number_integer() && v->get<std::int64_t>() >= 1,
                    "case_spec.params.layers: expected a positive integer, got " << shown_json(*v));
    out.layers = v->get<std::int64_t>();
  }
  if (const auto& v = params.quant.written; v && !v->is_null()) {
    TPB_INPUT_CHECK(v->is_string() && (*v == "bf16" || *v == "int4"),
                    "case_spec.params.quant: expected \"bf16\" or \"int4\", got " << shown_json(*v));
    out.quant = parse_quantization(v->get<std::string>(), "case_spec.params.quant");
  }
  return out;
}

CaseModelParams case_model_params(const nlohmann::json& params) { return case_model_params(CaseParams::from_json(params)); }

ModelConfig case_model_config(const CaseSpec::Model& model, const CaseModelParams& params) {
  ModelConfig config = load_model_config(model.config_path);
  if (!model.overrides.empty()) apply_overrides(config, model.overrides, model.config_path, "$.model.overrides");
  if (const auto layers = params.layers) {
    TPB_INPUT_CHECK(*layers <= config.num_hidden_layers, "case_spec.params.layers: expected 1.."
                                                             << config.num_hidden_layers
                                                             << " (the config's num_hidden_layers), got " << *layers);
    config.num_hidden_layers = *layers;
    config.validate();
  }
  const bool synthetic = model.weights == "synthetic";
  if (const auto quant = params.quant) {
    TPB_INPUT_CHECK(synthetic || *quant == config.quant,
                    "case_spec.params.quant: \"" << quantization_name(*quant) << "\", but the checkpoint " << model.weights
                                                 << " holds " << quantization_name(config.quant)
                                                 << " weights, as its config says; a checkpoint's own quantization wins");
    config.quant = *quant;
  } else if (synthetic) {
    // Synthetic weights are made in the quantization the case names, and a case that names
    // none is bf16, as every case was before the quant axis: its id (which has no quant) keeps
    // meaning what it meant, and its stored baseline stays comparable. A preset's
    // quantization_config (Kimi-K2.5's) describes the released checkpoint, not these weights.
    config.quant = Quantization::bf16;
  }
  return config;
}

std::optional<CasePlan> plan_engine_case(const Scenario& s, const Case& c, const PlanGpu& device) {
  if (s.workload != "engine" || !s.model) return std::nullopt;
  // A rank sharing its GPU owns 1/N of it, and its own reading (tpb/kernels/device.h) sees its
  // own context alone: the plan takes the same share and footprint.
  PlanGpu gpu = device;
  if (c.placement.device_shared()) {
    gpu.total_bytes /= c.placement.ranks_per_gpu;
    gpu.cuda_context_bytes = kSharedRankContextBytes;
  }
  const nlohmann::json& p = c.params;
  const ModelConfig config = case_model_config(*case_spec(s, c).model, case_model_params(p));
  const bool decode = p.value("mode", std::string("decode")) == "decode";
  const std::int64_t batch = p.value("batch_size", std::int64_t{1});
  const std::int64_t seq_len = p.value("seq_len", std::int64_t{16});
  const std::int64_t capacity = decode ? seq_len + 1 : seq_len;  // what the case's cache holds per sequence

  PlanInput in;
  in.config = config;
  in.tp = c.tp;
  in.quant = config.quant;  // what the GPU engine stores: bf16, or int4 routed experts
  in.gpu_total_bytes = gpu.total_bytes;
  in.cuda_context_bytes = gpu.cuda_context_bytes;
  // The GPU engine sizes its KV cache from the case's mem_fraction when the scenario sweeps
  // mem_fraction (a pool of max_tokens) and allocates exactly the case's cache otherwise
  // (planned at the case's fraction, the default 0.9 when the scenario names none).
  const bool has_fraction = p.contains("mem_fraction") && p["mem_fraction"].is_number();
  const bool pooled = has_fraction && axis_written(s, "mem_fraction");
  in.mem_fraction = has_fraction ? p["mem_fraction"].get<double>() : 0.9;
  in.allreduce = p.value("allreduce", std::string("nccl"));
  if (s.comm.custom_max_bytes) in.custom_max_bytes = *s.comm.custom_max_bytes;  // the engine's CommOptions::max_bytes
  // Ranks sharing a GPU reach each other over NCCL's socket transport (suite/launch/placement.h).
  in.nccl_over_sockets = c.placement.device_shared();
  in.requested_tokens = batch * capacity;
  if (decode && p.value("cuda_graph", false)) in.graph_batch_sizes = {batch};
  in.activation_batch = batch;
  in.activation_seq_len = decode ? 1 : seq_len;
  in.include_vision_tower = false;  // tpbench's engine loads the text model only
  const MemoryPlan plan = plan_memory(in);

  CasePlan out;
  out.feasible = plan.feasible;
  out.verdict = plan.verdict;
  out.plan = {{"source", std::string("planner (") + quantization_name(in.quant) + ", tp " + std::to_string(c.tp) +
                             ") for " + gpu.name},
              {"gpu", gpu.name},
              {"mem_fraction", in.mem_fraction},
              {"allreduce", in.allreduce},
              {"custom_max_bytes", in.custom_max_bytes},
              {"nccl_over_sockets", in.nccl_over_sockets},
              {"requested_tokens", in.requested_tokens},
              {"max_tokens", plan.max_tokens},
              {"feasible", plan.feasible},
              {"min_mem_fraction", plan.min_mem_fraction},
              {"min_mem_fraction_requested", plan.min_mem_fraction_requested},
              {"total_bytes", plan.total_bytes},
              {"avail_bytes", plan.avail_bytes},
              {"rest_bytes", plan.rest_bytes},
              {"kv_cell_bytes", plan.kv_cell_bytes},
              {"graph_pool_bytes", plan.graph_pool_bytes},
              {"activation_peak_bytes", plan.activation.peak_bytes},
              {"slack_fits", plan.slack_fits},
              {"verdict", plan.verdict},
              {"breakdown",
               {{"weights", plan.weights.bytes_per_rank}, {"comm_buffers", plan.comm.total()}}}};
  if (pooled)
    out.plan["breakdown"]["kv_pool"] = plan.kv_cache_bytes;  // max_tokens x cell
  else
    out.plan["breakdown"]["kv_cache"] = plan.kv_cell_bytes * in.requested_tokens;
  EngineBufferShape buffers;
  buffers.tp = c.tp;
  buffers.max_batch = batch;
  buffers.max_len = capacity;
  buffers.max_prefill_tokens = gpu_engine_prefill_tokens(decode, batch, seq_len);
  buffers.last_position_logits = gpu_engine_last_position_logits(decode, batch, seq_len, config.vocab_size);
  out.plan["breakdown"]["activations"] = gpu_engine_buffer_bytes(config, buffers);

  // A slice of a model: would the whole of it (the config file's layers; every other input the
  // case's) fit the group?
  const std::int64_t model_layers = load_model_config(s.model->config_path).num_hidden_layers;
  if (config.num_hidden_layers < model_layers) {
    PlanInput whole = in;
    whole.config.num_hidden_layers = model_layers;
    const MemoryPlan full = plan_memory(whole);
    out.plan["full_model"] = {{"layers", model_layers},
                              {"weights_bytes", full.weights.bytes_per_rank},
                              {"max_tokens", full.max_tokens},
                              {"feasible", full.feasible},
                              {"verdict", full.verdict}};
  }
  return out;
}

bool gpu_engine_last_position_logits(bool decode, std::int64_t batch, std::int64_t seq_len, std::int64_t vocab) {
  return decode || batch * seq_len * vocab > kGpuFullLogitsMaxValues;
}

std::int64_t gpu_engine_prefill_tokens(bool decode, std::int64_t batch, std::int64_t seq_len) {
  return !decode || batch * seq_len <= kGpuRealPrefillMaxTokens ? batch * seq_len : batch;
}

namespace {

// "2.27 TiB": bytes in the largest binary unit that keeps the number >= 1.
std::string bytes_text(double bytes) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"};
  int u = 0;
  while (bytes >= 1024 && u < 8) bytes /= 1024, ++u;
  char buf[48];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", bytes, units[u]);
  return buf;
}

}  // namespace

std::optional<CasePlan> plan_cpu_engine_case(const Scenario& s, const Case& c, const PlanHost& host) {
  if (s.workload != "engine" || !s.model || s.device != "cpu") return std::nullopt;
  const nlohmann::json& p = c.params;
  const ModelConfig config = case_model_config(*case_spec(s, c).model, case_model_params(p));
  CpuEngineShape shape;
  shape.tp = c.tp;
  shape.batch = p.value("batch_size", std::int64_t{1});
  shape.seq_len = p.value("seq_len", std::int64_t{16});
  shape.decode = p.value("mode", std::string("decode")) != "prefill";
  const int ranks = (c.tp + std::max(1, host.hosts) - 1) / std::max(1, host.hosts);
  const CpuEngineBytes rank = cpu_engine_bytes(config, shape);
  const double needed = ranks * rank.total(), have = static_cast<double>(host.memory_bytes);

  CasePlan out;
  out.feasible = needed <= have;
  const std::string who = std::to_string(ranks) + (ranks == 1 ? " rank of this case on one host needs " : " ranks of this case on one host need ");
  const std::string has = bytes_text(have) + " (" + host.memory_source + ")";
  if (out.feasible) {
    out.verdict = "fits: " + who + bytes_text(needed) + " of the host's " + has;
  } else {
    // The largest batch that fits at this seq_len (the need grows with the batch), for the sentence.
    std::int64_t lo = 0, hi = shape.batch;
    while (lo < hi) {
      CpuEngineShape tried = shape;
      tried.batch = lo + (hi - lo + 1) / 2;
      if (ranks * cpu_engine_bytes(config, tried).total() <= have) lo = tried.batch;
      else hi = tried.batch - 1;
    }
    out.verdict = "not enough memory: " + who + bytes_text(needed) + " (per rank: weights " +
                  bytes_text(rank.weights) + ", KV cache " + bytes_text(rank.kv_cache) + ", activations " +
                  bytes_text(rank.activations) + ", inputs " + bytes_text(rank.inputs) + "), and the host has " + has +
                  "; at seq_len " + std::to_string(shape.seq_len) +
                  (lo >= 1 ? ", batch_size <= " + std::to_string(lo) + " fits"
                           : ", not even batch_size 1 fits: a smaller seq_len or model does");
  }
  out.plan = {{"source", "planner (f32, tp " + std::to_string(c.tp) + ") for the CPU engine on this host"},
              {"breakdown",
               {{"weights", rank.weights}, {"kv_cache", rank.kv_cache}, {"activations", rank.activations}, {"inputs", rank.inputs}}},
              {"feasible", out.feasible},
              {"verdict", out.verdict},
              {"host_memory_bytes", host.memory_bytes},
              {"host_memory_source", host.memory_source},
              {"ranks_on_host", ranks},
              {"needed_bytes", needed}};
  return out;
}

std::optional<CasePlan> CasePlanner::plan(const Scenario& scenario, const Case& c) const {
  if (!c.skip_reason.empty()) return std::nullopt;
  if (gpu) return plan_engine_case(scenario, c, *gpu);  // a shared rank: its share
  if (host) return plan_cpu_engine_case(scenario, c, *host);
  return std::nullopt;
}

CasePlanner case_planner(const Scenario& s, const std::optional<HostMemory>& cpu_memory, int hosts) {
  CasePlanner planner;
  if (s.workload != "engine") return planner;
  if (s.device == "cuda") {
    const auto gpus = visible_gpus();
    if (!gpus.empty())
      planner.gpu = PlanGpu{gpus.front().name, static_cast<std::int64_t>(gpus.front().memory_bytes),
                            default_cuda_context_bytes()};
  } else if (cpu_memory) {
    planner.host = PlanHost{cpu_memory->bytes, cpu_memory->source, std::max(1, hosts)};
  } else if (const auto memory = available_host_memory()) {
    planner.host = PlanHost{memory->bytes, memory->source, std::max(1, hosts)};
  }
  return planner;
}

}  // namespace tpb
