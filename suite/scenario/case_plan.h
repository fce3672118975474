// The memory plan of one engine case before any rank starts: on a GPU as a serving engine sizes
// its KV cache (below), on the CPU against the host's memory (plan_cpu_engine_case, further
// down); a case that cannot fit is recorded `infeasible` with the planner's sentence.
//
// The memory plan of one engine case on a GPU, as a serving engine would size its KV cache
// for it (ARCHITECTURE.md, "How one case flows": Case -> plan -> MemoryPlan; infeasible cases
// are recorded, not run). The plan is the planner's (reference_engine/memory/planner.h) for
// the case's model, TP, allreduce backend and mem_fraction on the given GPU, with the case's
// own tokens requested: batch x (seq_len + 1) for a decode step, batch x seq_len for a prefill.
// The communicator's buffers are planned as the engine builds it: the custom allreduce for the
// scenario's comm.custom_max_bytes (default 8 MiB), and NCCL's socket-transport buffers
// (comm_bytes.h, measured) when the case's ranks share a GPU, its NVLink estimate otherwise.
//
// The record's plan (record.plan) is what the report and the checks read:
//   max_tokens, feasible, verdict, mem_fraction, allreduce, custom_max_bytes, nccl_over_sockets,
//   requested_tokens, min_mem_fraction, min_mem_fraction_requested, total/avail/rest bytes,
//   kv_cell_bytes, gpu, source, and a breakdown of the terms the engine allocates per rank for
//   this case: weights (in the model's quantization, case_model_config: bf16, or int4 routed
//   experts with everything else bf16; the text model: tpbench's engine loads no vision tower),
//   comm_buffers, and kv_pool (max_tokens x cell: the pool the engine sizes from the case's
//   mem_fraction, GpuEngineOptions) or, for a case without mem_fraction, kv_cache (the case's
//   own cache, cell x batch x capacity), and activations (the engine's step buffers for the
//   case, reference_engine/memory/engine_buffers.h);
//   plan_matches_measured compares them with the meter, and max_tokens with the engine's pool.
// A case that runs fewer layers than its config has (model.layers, or overrides of
// num_hidden_layers) also carries full_model: the same plan (GPU, TP, quantization, fraction,
// backend, the case's tokens) for every layer of the config: layers, weights_bytes per rank,
// max_tokens, feasible and the planner's verdict, so that a slice says whether the model it was
// cut from would fit the group.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "reference_engine/config/model_config.h"
#include "reference_engine/memory/host_memory.h"
#include "suite/scenario/case_params.h"
#include "suite/scenario/case_spec.h"
#include "suite/scenario/scenario.h"
#include "suite/scenario/sweep.h"

namespace tpb {

// What an engine case's params say of its model, each absent unless the scenario writes it
// (then the config's own holds): params.layers, the num_hidden_layers to run (>= 1; the
// scenario's model.layers), and params.quant, "bf16" or "int4" (the quant axis). InputError
// naming case_spec.params.<key> for anything else.
struct CaseModelParams {
  std::optional<std::int64_t> layers;  // layers to run, >= 1
  std::optional<Quantization> quant;   // bf16 or int4
};
CaseModelParams case_model_params(const CaseParams& params);
CaseModelParams case_model_params(const nlohmann::json& params);  // CaseParams::from_json(params)'s

// The model a case runs, one definition for the engine that loads it (engine_workload.cpp) and
// the planner that plans it (plan_engine_case): the config file, the scenario's overrides,
// `layers` as num_hidden_layers (at most the config's), then the quantization: `quant`; without
// it, a checkpoint's own (its config's quantization_config) and bf16 for synthetic weights (as
// every case ran before the quant axis, so that ids without quant keep their meaning). A
// checkpoint's own quantization wins: InputError when `quant` names another for a folder of
// weights (the scenario refuses it when it is read; this holds for specs from elsewhere).
ModelConfig case_model_config(const CaseSpec::Model& model, const CaseModelParams& params);

struct PlanGpu {
  std::string name;                  // e.g. "NVIDIA H200" (as the device reports it) or a catalog name
  std::int64_t total_bytes = 0;      // device total, bytes
  std::int64_t cuda_context_bytes = 0;  // context + modules per process, bytes (estimate)
};

struct CasePlan {
  nlohmann::json plan;  // record.plan
  bool feasible = true;
  std::string verdict;  // the planner's sentence
};

// A decode case fills its KV cache by a real prefill up to this many tokens (batch * seq_len);
// above it the cache rows are synthetic (GpuEngine::fill_kv_synthetic): a 256 x 32K context
// would be an 8M-token prefill. metrics.kv_fill says which.
constexpr std::int64_t kGpuRealPrefillMaxTokens = 8192;

// A GPU engine case digests its logits whole ([batch, tokens, vocab]) up to this many values;
// above it, each sequence's last position only (metrics.logits_rows = "last").
constexpr std::int64_t kGpuFullLogitsMaxValues = 64ll << 20;

// Whether the GPU engine of a case computes prefill logits at each sequence's last position
// only (GpuEngineOptions::last_position_logits), as a server does before sampling: a decode
// case (its prefill only fills the KV cache) and a prefill case digested at the last position.
bool gpu_engine_last_position_logits(bool decode, std::int64_t batch, std::int64_t seq_len, std::int64_t vocab);

// The largest prefill the GPU engine runs for a case (GpuEngineOptions::max_prefill_tokens):
// batch x seq_len for a prefill case and for a decode case whose KV a real prefill fills, else
// batch (the decode step alone).
std::int64_t gpu_engine_prefill_tokens(bool decode, std::int64_t batch, std::int64_t seq_len);

// The plan of an engine case on `gpu` (the device as it reports itself; a rank that shares it,
// shared placement, is planned on its share with its own context footprint); nullopt for other
// workloads.
std::optional<CasePlan> plan_engine_case(const Scenario& scenario, const Case& c, const PlanGpu& gpu);

// The host a CPU engine case is planned on (issue 37, finding 7): the memory one host gives the
// case's ranks, and how the ranks spread over hosts.
struct PlanHost {
  std::int64_t memory_bytes = 0;  // what one host gives the case's ranks, bytes
  std::string memory_source;      // for the verdict: "MemAvailable", "the cgroup's limit (...)", "--cpu-mem-gib 2"
  int hosts = 1;                  // hosts a group's ranks spread over (mpirun/srun --hosts: their count;
                                  // fork, virtual hosts included: 1); each holds ceil(tp / hosts) ranks
};

// The plan of a CPU engine case on `host`: every rank's buffers (weights in fp32, the KV cache,
// the activations of its largest forward, the workload's inputs:
// reference_engine/memory/cpu_engine_bytes.h) times the ranks one host holds, against the
// host's memory. Infeasible when they exceed it, with one sentence: what the ranks need, term by
// term, what the host has and from where, and the largest batch_size that fits at the case's
// seq_len. record.plan of an infeasible case: source, breakdown (one rank's weights, kv_cache,
// activations, inputs), feasible, verdict, host_memory_bytes, host_memory_source, ranks_on_host,
// needed_bytes. nullopt for other workloads and devices.
std::optional<CasePlan> plan_cpu_engine_case(const Scenario& scenario, const Case& c, const PlanHost& host);

// How a run plans its engine cases, chosen once as it starts: GPU cases on the first visible
// GPU, as a serving engine sizes its KV cache; CPU cases on this host's memory (`cpu_memory`
// when set, --cpu-mem-gib; else available_host_memory(), reference_engine/memory/host_memory.h),
// with the ranks of a group spread over `hosts`. Nothing is planned for the allreduce workload,
// or where the memory cannot be read.
struct CasePlanner {
  std::optional<PlanGpu> gpu;
  std::optional<PlanHost> host;
  // The case's plan; nullopt where none is made.
  std::optional<CasePlan> plan(const Scenario& scenario, const Case& c) const;
};
CasePlanner case_planner(const Scenario& scenario, const std::optional<HostMemory>& cpu_memory, int hosts);

}  // namespace tpb
