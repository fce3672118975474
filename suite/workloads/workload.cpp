// WorkerState's communicators and the workload table. The table is explicit: static
// registrars would be dropped by the linker from the static library.
#include "suite/workloads/workload.h"

#include "suite/launch/collective_progress.h"
#include "suite/workloads/engine_workload.h"
#include "suite/workloads/workloads.h"

namespace tpb {

namespace {

// Options that shape the backend's buffers are part of the key: a case asking for another
// slot size gets its own communicator rather than a silently different one.
std::string communicator_key(const std::string& backend, const CommOptions& options) {
  return backend + "|device=" + std::to_string(options.device) + "|max_bytes=" + std::to_string(options.max_bytes);
}

}  // namespace

void WorkerState::drop_communicators_except(const std::string& backend, const CommOptions& options) {
  const std::string keep = communicator_key(backend, options);
  for (auto it = communicators_.begin(); it != communicators_.end();)
    it = it->first == keep ? std::next(it) : communicators_.erase(it);
}

Communicator& WorkerState::communicator(const std::string& backend, const CommOptions& options) {
  const std::string key = communicator_key(backend, options);
  auto it = communicators_.find(key);
  if (it == communicators_.end()) {
    std::unique_ptr<Communicator> comm = make_communicator(backend, bootstrap_, options);
    // Counted in the group's progress page, so that a timeout can name the rank that did
    // not arrive at a collective (suite/launch/collective_progress.h).
    if (CollectiveProgressSlot* slot = rank_progress_slot(rank(), world_size()))
      comm = std::make_unique<ProgressCommunicator>(std::move(comm), *slot);
    it = communicators_.emplace(key, std::move(comm)).first;
  }
  return *it->second;
}

nlohmann::json communicator_result(const std::string& requested, const Communicator& comm) {
  nlohmann::json calls = nlohmann::json::array();
  for (const AllreduceCalls& c : comm.allreduce_calls())
    calls.push_back({{"backend", c.backend}, {"calls", c.calls}, {"bytes_min", c.bytes_min}, {"bytes_max", c.bytes_max}});
  // A backend that counts nothing (allreduce_calls() empty by default) and one that counted
  // no call read the same here: an empty list. The record says "no calls counted" either way.
  return {{"backend", comm.name()},
          {"requested", requested},
          {"memory_bytes", comm.memory_bytes()},
          {"fallback_reason", comm.fallback_reason()},
          {"allreduce_calls", calls}};
}

namespace {

struct WorkloadEntry {
  const char* name;
  WorkloadFn fn;
};

constexpr WorkloadEntry kWorkloads[] = {
    {"allreduce", run_allreduce_workload},
    {"engine", run_engine_workload},
#if TPB_TEST_HOOKS
    {"probe", run_probe_workload},  // test-only: bootstrap round trip and fault injection
#endif
};

}  // namespace

WorkloadFn find_workload(const std::string& name) {
  for (const auto& w : kWorkloads) {
    if (name == w.name) return w.fn;
  }
  return nullptr;
}

std::vector<std::string> workload_names() {
  std::vector<std::string> names;
  for (const auto& w : kWorkloads) names.emplace_back(w.name);
  return names;
}

}  // namespace tpb
