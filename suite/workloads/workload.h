// Worker side: what a rank does with one case. A workload is a function found by
// name ("allreduce": a communicator-only sweep; "engine": the reference engine's prefill or
// decode). It runs in a rank process, with the state that outlives one case in WorkerState.
//
// The case spec a workload gets and the result it returns are structs with their fields
// documented in suite/scenario/case_spec.h (the one place they are converted to and from JSON); the
// worker parses the spec once and serialises the result. A rank's place on the GPUs is in its
// environment, not in the spec (suite/launch/placement.h).
#pragma once

#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "reference_engine/comm/bootstrap.h"
#include "reference_engine/comm/communicator.h"
#include "reference_engine/comm/factory.h"
#include "suite/scenario/case_spec.h"

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

// Runs one case on this rank. The worker sets the result's rank.
using WorkloadFn = RankResult (*)(const CaseSpec& spec, WorkerState& state);

// A rank's result's comm (RankResult::comm) for the communicator a case ran on, read when the case ends (the
// workload calls comm.reset_allreduce_calls() when it starts):
//   backend          string  comm.name(): the backend running ("nccl" for a custom one that fell back)
//   requested        string  the case's params.allreduce
//   memory_bytes     int     comm.memory_bytes()
//   fallback_reason  string  comm.fallback_reason() ("" when it runs as asked)
//   allreduce_calls  array   [{backend, calls, bytes_min, bytes_max}]: the case's all_reduce calls
//                            per path that ran them (Communicator::allreduce_calls); empty when
//                            none was counted
// The runner turns the ranks' results into the record's allreduce_ran (suite/measure/allreduce_ran.h).
nlohmann::json communicator_result(const std::string& requested, const Communicator& comm);

// The built-in workloads, from an explicit table in suite/workloads/workload.cpp (static registrars
// would be dropped by the linker from a static library). nullptr when unknown.
WorkloadFn find_workload(const std::string& name);

}  // namespace tpb
