#include "suite/workloads/worker.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <thread>

#include "reference_engine/comm/host_layout.h"
#include "reference_engine/comm/mpi_session.h"
#include "suite/scenario/case_spec.h"
#include "suite/launch/host_facts.h"
#include "suite/launch/launch_command.h"
#include "suite/records/provenance.h"
#include "suite/workloads/workload.h"
#include "suite/workloads/workloads.h"
#include "tpb/check.h"
#include "tpb/test_hooks.h"

namespace tpb {
namespace {

using nlohmann::json;

// Serves cases from the controller until "exit" or the connection's end.
void serve_cases(int fd, control::LineReader& reader, Bootstrap& bootstrap, int rank);

// How long a job's rank stays after the controller's connection closed, seconds: enough for
// a worker told "exit" to finalise MPI and leave on its own, no more.
constexpr double kOrphanGraceS = 2.0;

// A job's rank (mpirun, srun) has no controller watching its pid: it leaves by itself when its
// parent (the job's launcher daemon) dies, and when the controller's connection closes, even
// while its main thread is stuck in a collective with a dead peer.
void leave_with_the_controller(int fd) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  std::thread([fd] {
    pollfd p{fd, POLLRDHUP, 0};
    while (poll(&p, 1, -1) < 0 || (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) == 0) {
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(kOrphanGraceS));
    std::fprintf(stderr, "tpbench __worker: the controller closed its connection; leaving\n");
    std::_Exit(0);
  }).detach();
}

// A job's rank writes its output where the fork launcher would have put it, when that folder
// is reachable from its host (this host, a shared file system); else to the job's output.
void redirect_output_to_log(const char* dir, const char* group_id, int rank) {
  if (dir == nullptr || *dir == '\0') return;
  const std::string path = rank_log_path(dir, group_id, rank);
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  dup2(fd, STDOUT_FILENO);
  dup2(fd, STDERR_FILENO);
  close(fd);
}

// Why this process cannot be a rank ("" when it can), filling `kind` and `place` from its
// launcher's variables (TPB_LAUNCHER names the launcher; fork when unset). A fork rank needs
// the controller's Unix socket, a job's rank its TCP address and the group's token.
std::string why_not_a_rank(LauncherKind& kind, LaunchedRank& place) {
  const char* kind_name = std::getenv("TPB_LAUNCHER");
  const std::string name = kind_name != nullptr ? kind_name : "fork";
  const std::optional<LauncherKind> k = launcher_kind(name);
  if (!k) return "TPB_LAUNCHER is '" + name + "', expected fork, mpirun or srun";
  kind = *k;
  std::string why;
  if (!launched_rank(kind, [](const char* n) { return std::getenv(n); }, place, why)) return why;
  if (std::getenv("TPB_GROUP_ID") == nullptr) return "TPB_GROUP_ID is missing";
  if (kind == LauncherKind::fork) return std::getenv("TPB_CONTROL_SOCKET") != nullptr ? "" : "TPB_CONTROL_SOCKET is missing";
  return std::getenv("TPB_CONTROL_ADDR") != nullptr && std::getenv("TPB_CONTROL_TOKEN") != nullptr
             ? ""
             : "TPB_CONTROL_ADDR or TPB_CONTROL_TOKEN is missing";
}

// TEST-ONLY planted failure: with TPB_TEST_FAIL_CASE=<case id>[,<case id>...] every rank
// fails those cases before their workload runs, as a crash of the case would; the next
// invocation without the variable runs them (tests/cli/reproduce_any_record.sh retries one
// with --resume --retry-failed). run.json records the variable with the environment.
void planted_case_failure_for_tests(const std::string& case_id) {
  const char* v = test_hook("TPB_TEST_FAIL_CASE");
  if (v == nullptr || *v == '\0' || case_id.empty()) return;
  const std::string list = std::string(",") + v + ",";
  if (list.find("," + case_id + ",") != std::string::npos)
    TPB_FAIL("planted failure of case " << case_id << " (TPB_TEST_FAIL_CASE)");
}

}  // namespace

std::vector<std::string> SocketBootstrap::all_gather(const std::string& mine) {
  const std::uint64_t seq = next_seq_++;
  control::write_all(fd_, control::encode({{"type", "allgather"}, {"seq", seq}, {"data", control::to_hex(mine)}}));
  json reply;
  // The controller sends nothing else to a rank that is inside a case, so the next message
  // is the answer; anything else means the two sides disagree about the protocol.
  TPB_CHECK(control::read_message(fd_, reader_, reply),
            "rank " << rank_ << ": the controller closed the control socket during all_gather #" << seq);
  TPB_CHECK(reply["type"] == "allgather" && reply.value("seq", std::uint64_t(-1)) == seq &&
                reply["data"].is_array() && reply["data"].size() == static_cast<std::size_t>(size_),
            "rank " << rank_ << ": expected the answer to all_gather #" << seq << ", got "
                    << reply.dump().substr(0, 200));
  std::vector<std::string> all;
  for (const auto& hex : reply["data"]) all.push_back(control::from_hex(hex.get<std::string>()));
  return all;
}

int run_worker() {
  LauncherKind kind = LauncherKind::fork;
  LaunchedRank place;
  const std::string why = why_not_a_rank(kind, place);
  if (!why.empty()) {
    std::fprintf(stderr,
                 "tpbench __worker: internal role of a rank process, started by `tpbench run` (its fork, mpirun or "
                 "srun launcher), not by hand: %s\n",
                 why.c_str());
    return 2;
  }
  const int rank = place.rank, world_size = place.world_size;
  const char* group_id = std::getenv("TPB_GROUP_ID");
  const bool job = kind != LauncherKind::fork;
  // Virtual hosts (tpbench run --virtual-hosts N): this rank claims its block's host for the
  // host-local rules (reference_engine/comm/host_layout.h).
  int virtual_hosts = 0;
  if (const char* v = std::getenv("TPB_VIRTUAL_HOSTS"); v != nullptr) virtual_hosts = std::atoi(v);
  if (virtual_hosts >= 2) setenv("TPB_HOST_ID", virtual_host_id(rank, world_size, virtual_hosts).c_str(), 1);
  if (job) {
    redirect_output_to_log(std::getenv("TPB_RANK_LOG_DIR"), group_id, rank);
    // What the fork launcher sets, from the job's own variables: a GPU rank takes the device
    // of its local rank on its host (suite/launch/placement.h, rank_device_from_env).
    setenv("RANK", std::to_string(rank).c_str(), 1);
    setenv("WORLD_SIZE", std::to_string(world_size).c_str(), 1);
    setenv("LOCAL_RANK", std::to_string(place.local_rank).c_str(), 1);
  }

  const int fd = job ? control::connect_tcp(std::getenv("TPB_CONTROL_ADDR")) : control::connect_unix(std::getenv("TPB_CONTROL_SOCKET"));
  control::LineReader reader;
  json hello = {{"type", "hello"}, {"rank", rank}, {"pid", static_cast<int>(getpid())}};
  if (job) {
    hello.update({{"token", std::getenv("TPB_CONTROL_TOKEN")}, {"host", this_host_name()}, {"host_id", this_host_id()}});
    leave_with_the_controller(fd);
  }
  control::write_all(fd, control::encode(hello));
  // The first rank of each host says what the host has (suite/launch/host_facts.h): after the hello,
  // which stays small, and before any result, so the controller has it when the case ends.
  if (reports_host_facts(rank, world_size, place.local_rank, virtual_hosts))
    control::write_all(fd, control::encode({{"type", "host_facts"}, {"pid", static_cast<int>(getpid())},
                                            {"facts", collect_host_facts()}}));
  SocketBootstrap bootstrap(fd, reader, rank, world_size, group_id);
  serve_cases(fd, reader, bootstrap, rank);
  // MPI, if a case started it, ends before the process does (a job launcher counts a rank
  // that exits without MPI_Finalize as failed), and after every communicator is gone.
  finalize_mpi();
  close(fd);
  return 0;
}

namespace {

void serve_cases(int fd, control::LineReader& reader, Bootstrap& bootstrap, int rank) {
  WorkerState state(bootstrap);
  json message;
  while (control::read_message(fd, reader, message)) {
    const std::string type = message["type"];
    if (type == "exit") break;
    TPB_CHECK(type == "case", "rank " << rank << ": unexpected control message '" << type << "'");
    json reply;
    try {
      // Parsed once: the workload reads typed fields (suite/scenario/case_spec.h).
      const CaseSpec spec = CaseSpec::from_json(message["spec"]);
      const WorkloadFn fn = find_workload(spec.workload);
      if (fn == nullptr) {
        std::string known;
        for (const auto& n : workload_names()) known += (known.empty() ? "" : ", ") + n;
        TPB_INPUT_FAIL("case_spec: unknown workload '" << spec.workload << "' (known: " << known << ")");
      }
      planted_case_failure_for_tests(spec.case_id);
      RankResult result = fn(spec, state);
      result.rank = rank;
      reply = {{"type", "result"}, {"result", result.to_json()}};
    } catch (const InputError& e) {
      reply = {{"type", "error"}, {"message", e.what()}, {"input_error", true}};
    } catch (const std::exception& e) {
      reply = {{"type", "error"}, {"message", e.what()}, {"input_error", false}};
    }
    if (reply["type"] == "error") std::fprintf(stderr, "rank %d: %s\n", rank, reply["message"].get<std::string>().c_str());
    control::write_all(fd, control::encode(reply));
  }
}

}  // namespace

}  // namespace tpb
