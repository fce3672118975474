// Worker side: what a rank does with one case. A workload is a function found by
// name ("allreduce": a communicator-only sweep; "engine": the reference engine's prefill or
// decode). It runs in a rank process, with the state that outlives one case in WorkerState.
//
// case_spec (built by the runner, sent by the launcher), JSON:
//   case_id      string   stable id of the case
//   workload     string   "allreduce" | "engine"
//   device       string   "cpu" | "cuda"
//   params       object   the swept values: mode, tp, batch_size, seq_len, allreduce,
//                         mem_fraction, instrumentation, cuda_graph (+ workload-specific
//                         axes such as message_bytes)
//   model        object   resolved model section: config_path, overrides, weights, seed
//   measure      object   warmup, iterations, repetitions, min_duration_s, timeout_s,
//                         interleave_instrumentation (bool: the scenario sweeps instrumentation
//                         levels; the harness then runs interleaved A/B halves, suite/measure.h)
//   kv_pool      bool     the engine sizes its KV pool from mem_fraction (the scenario sweeps it)
//   comm         object   optional: custom_max_bytes, the custom allreduce's buffer (scenario "comm")
//   trace_dir    string   optional: where instrumentation=trace|debug writes each rank's
//                         Chrome trace (default $TMPDIR or /tmp; suite/instrumentation.h)
// A rank's place on the GPUs is in its environment, not here (suite/placement.h).
//
// A rank's result, JSON (one per rank, collected by the launcher):
//   rank         int
//   latency_us   [number] one sample per timed iteration, microseconds (suite/measure.h's loop;
//                         with interleaved halves, those recorded: A)
//   interleaved_off_latency_us  [number] optional: the samples of the halves run with recording
//                         paused (B), same shape; interleaving: the halves' order ("ABBA...")
//   work         object   optional: what one step moves or produces, {bytes_per_step, bus_factor}
//                         or {tokens_per_step}; the record's throughput derives from it (StepWork)
//   digests      object   name -> hex digest of an output (bitwise comparisons)
//   memory       object   phase -> {used_bytes, free_bytes, ...} (MemoryMeter)
//   metrics      object   workload-specific numbers (bytes, tokens/s, comm share, ...)
//   comm         object   backend, memory_bytes, fallback_reason, requested, allreduce_calls
//                         (communicator_result: what carried the case's allreduces)
//   outputs      object   optional: name -> small float array for tolerance checks
//   infeasible   string   optional: the case cannot run as sized (e.g. the GPU engine's KV pool
//                         does not hold it): the sentence; the record's status is "infeasible"
#pragma once

#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "reference_engine/comm/bootstrap.h"
#include "reference_engine/comm/communicator.h"
#include "reference_engine/comm/factory.h"

namespace tpb {

// State a worker keeps across the cases of its group.
class WorkerState {
 public:
  explicit WorkerState(Bootstrap& bootstrap) : bootstrap_(bootstrap) {}
  Bootstrap& bootstrap() { return bootstrap_; }
  int rank() const { return bootstrap_.rank(); }
  int world_size() const { return bootstrap_.size(); }

  // The communicator for `backend`, created on first use (collectively: every rank asks in
  // the same order) and kept for later cases.
  Communicator& communicator(const std::string& backend, const CommOptions& options);
  // Destroys every communicator but the one `communicator(backend, options)` returns, with
  // their device buffers: a case that sizes its KV cache from free memory must not see the
  // buffers of a backend an earlier case of the sweep used. Every rank calls it at the same
  // point (the ranks run the same cases); nothing may use a dropped communicator afterwards.
  void drop_communicators_except(const std::string& backend, const CommOptions& options);

  // Workload-owned objects kept across cases (e.g. an engine with its weights), by key.
  std::map<std::string, std::shared_ptr<void>>& cache() { return cache_; }

 private:
  Bootstrap& bootstrap_;
  std::map<std::string, std::unique_ptr<Communicator>> communicators_;
  std::map<std::string, std::shared_ptr<void>> cache_;
};

using WorkloadFn = nlohmann::json (*)(const nlohmann::json& case_spec, WorkerState& state);

// A rank's "comm" result for the communicator a case ran on, read when the case ends (the
// workload calls comm.reset_allreduce_calls() when it starts):
//   backend          string  comm.name(): the backend running ("nccl" for a custom one that fell back)
//   requested        string  the case's params.allreduce
//   memory_bytes     int     comm.memory_bytes()
//   fallback_reason  string  comm.fallback_reason() ("" when it runs as asked)
//   allreduce_calls  array   [{backend, calls, bytes_min, bytes_max}]: the case's all_reduce calls
//                            per path that ran them (Communicator::allreduce_calls); empty when
//                            none was counted
// The runner turns the ranks' results into the record's allreduce_ran (suite/allreduce_ran.h).
nlohmann::json communicator_result(const std::string& requested, const Communicator& comm);

// The built-in workloads, from an explicit table in suite/workload.cpp (static registrars
// would be dropped by the linker from a static library). nullptr when unknown.
WorkloadFn find_workload(const std::string& name);

}  // namespace tpb
