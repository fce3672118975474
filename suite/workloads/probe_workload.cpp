// TEST-ONLY workload "probe": proves the launcher's plumbing and lets tests (and fault
// drills on a real machine) plant a failure in one rank. Every rank first does a bootstrap
// all_gather of a binary payload (its pid and all 256 byte values, NUL and '\n' included),
// checks what came back, and then the chosen rank misbehaves as asked. See workloads.h for
// the parameters.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "suite/workloads/workloads.h"
#include "tpb/check.h"

namespace tpb {
namespace {

using nlohmann::json;

std::string payload_of(int rank, int pid) {
  std::string payload = std::to_string(rank) + ":" + std::to_string(pid) + ":";
  for (int b = 0; b < 256; ++b) payload.push_back(static_cast<char>(b));
  return payload;
}

[[noreturn]] void inject(const json& fault, int rank) {
  const std::string kind = fault.value("kind", std::string());
  const int code = fault.value("code", 3);
  const int signal = fault.value("signal", SIGSEGV);
  std::fprintf(stderr, "probe: rank %d injecting fault '%s'\n", rank, kind.c_str());
  std::fflush(stderr);
  if (kind == "crash") {
    // No core file: a test's planted crash must not litter the working directory.
    const rlimit no_core{0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    std::signal(signal, SIG_DFL);
    std::raise(signal);
    std::_Exit(128 + signal);  // for a signal whose default action is not to terminate
  }
  if (kind == "abort") {
    const rlimit no_core{0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    std::abort();
  }
  if (kind == "hang" || kind == "hang_with_child") {
    // hang_with_child: a grandchild of the launcher, which only a process-group kill reaches.
    if (kind == "hang_with_child" && fork() == 0) {
      for (;;) pause();
    }
    for (;;) pause();
  }
  if (kind == "stop") {
    // As a debugger or `kill -STOP` leaves it: alive, silent, its peers waiting for it.
    std::raise(SIGSTOP);
    for (;;) pause();
  }
  if (kind == "exit") std::_Exit(code);
  if (kind == "throw") TPB_FAIL("probe: injected failure on rank " << rank);
  TPB_INPUT_FAIL("case_spec.params.fault.kind: expected crash, abort, hang, hang_with_child, stop, exit or throw, got '" << kind << "'");
}

// The rank's place as the launcher put it in its environment (suite/launch/placement.h; LOCAL_RANK,
// which a job's rank sets from its launcher's variables; TPB_HOST_ID under virtual hosts):
// what tests check about placement without a GPU. Unset variables are null.
json placement_environment() {
  json env = json::object();
  for (const char* name : {"TPB_DEVICE", "TPB_RANKS_PER_GPU", "TPB_PLACEMENT", "NCCL_HOSTID", "LOCAL_RANK", "TPB_HOST_ID"}) {
    const char* v = std::getenv(name);
    env[name] = v != nullptr ? json(v) : json(nullptr);
  }
  return env;
}

}  // namespace

RankResult run_probe_workload(const CaseSpec& spec, WorkerState& state) {
  const int rank = state.rank();
  const int pid = static_cast<int>(getpid());
  auto& served = state.cache()["probe.cases_served"];
  if (!served) served = std::make_shared<int>(0);
  const int cases_served = ++*std::static_pointer_cast<int>(served);

  const std::vector<std::string> all = state.bootstrap().all_gather(payload_of(rank, pid));
  json pids = json::array();
  bool payload_ok = static_cast<int>(all.size()) == state.world_size();
  for (int r = 0; payload_ok && r < state.world_size(); ++r) {
    const std::string& p = all[static_cast<std::size_t>(r)];
    const std::string prefix = std::to_string(r) + ":";
    const auto colon = p.find(':', prefix.size());
    payload_ok = p.compare(0, prefix.size(), prefix) == 0 && colon != std::string::npos &&
                 p.substr(colon + 1) == payload_of(0, 0).substr(4);
    if (payload_ok) pids.push_back(std::stoi(p.substr(prefix.size(), colon - prefix.size())));
  }
  state.bootstrap().barrier();

  const json& params = spec.params;
  // params.shm_segment: rank 0 leaves a POSIX shared-memory name in /dev/shm, named after the
  // group as the shm communicator names its segments; the launcher must remove it with the group.
  json shm_segment = nullptr;
  if (rank == 0 && params.value("shm_segment", false)) {
    const char* group = std::getenv("TPB_GROUP_ID");
    TPB_CHECK(group != nullptr, "probe: TPB_GROUP_ID is not set");
    std::string name = "/";  // appended, not "/" + ...: GCC 12 warns a false -Wrestrict on that
    name.append(group).append("-probe-shm");
    const int fd = shm_open(name.c_str(), O_CREAT | O_RDWR, 0600);
    TPB_CHECK(fd >= 0, "probe: shm_open(" << name << ") failed: " << std::strerror(errno));
    close(fd);
    shm_segment = name;
  }
  const json* fault = nullptr;
  if (params.contains("fault")) {
    fault = &params["fault"];
    TPB_INPUT_CHECK(fault->is_object() && fault->contains("rank") && (*fault)["rank"].is_number_integer(),
                    "case_spec.params.fault: expected an object with an integer 'rank'");
    if ((*fault)["rank"].get<int>() != rank) fault = nullptr;
  }
  const int collectives = params.value("collectives", 0);
  const int fault_at = fault ? fault->value("at_collective", collectives) : collectives;
  if (collectives > 0) {
    Communicator& comm = state.communicator("shm", CommOptions{});
    for (int k = 0; k < collectives; ++k) {
      if (fault && k == fault_at) inject(*fault, rank);
      comm.barrier();
    }
  }
  if (fault) inject(*fault, rank);
  RankResult result;
  result.metrics = {{"pid", pid},
                    {"gathered_pids", pids},
                    {"payload_ok", payload_ok},
                    {"cases_served", cases_served},
                    {"environment", placement_environment()},
                    {"shm_segment", shm_segment}};
  return result;
}

}  // namespace tpb
