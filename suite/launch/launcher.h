// Launcher (controller side): one OS process per rank, the tpbench binary re-executed in
// its hidden worker role (`tpbench __worker`). The controller relays the ranks' bootstrap
// traffic, sends each case as JSON and collects one JSON result per rank.
//
// Two ways to start the ranks (LauncherKind, launch_command.h):
//   fork    the controller forks them on this host, RANK / WORLD_SIZE / LOCAL_RANK in their
//           environment; they connect back over an abstract Unix socket, and the controller
//           knows each one by its pid (SO_PEERCRED).
//   mpirun, srun  the controller runs one job per group (`mpirun -np N ... tpbench __worker`),
//           the ranks read their place from the job's environment (OMPI_COMM_WORLD_*,
//           SLURM_*) and connect back over TCP to TPB_CONTROL_ADDR (host:port), presenting
//           TPB_CONTROL_TOKEN, random per group: a connection without it is closed unheard.
//           A rank's death shows as its connection closing (the job's exit status and the
//           rank's log say how); ending a group ends the job (SIGTERM, then SIGKILL, to
//           mpirun/srun, which end their ranks on every host), and a rank on this host that
//           outlives its job is killed by pid. The ranks also leave on their own when the
//           controller's connection closes or their parent dies (suite/workloads/worker.cpp).
//
// The first rank of each host in a group also sends its host's facts once (suite/launch/host_facts.h);
// the launcher hands each report over with the case during which it came (CaseRun::host_reports).
//
// A group of workers stays alive across consecutive cases with the same group key (model,
// TP, device), so only what changes is rebuilt. A rank that crashes, hangs past the case's
// timeout or exits non-zero fails that case: every process of the group is killed and
// reaped, and the next case starts a fresh group. Each group is a process group of its own
// (a kill reaches the ranks' children too), and the controller process becomes a child
// subreaper (PR_SET_CHILD_SUBREAPER) so that it can reap those as well.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "suite/launch/launch_command.h"
#include "suite/launch/placement.h"

namespace tpb {

struct LauncherOptions {
  std::string worker_binary;  // path of the tpbench binary to re-execute
  std::string log_dir;        // each rank's stdout+stderr go to <log_dir>/<group id>-rank<r>.log
                              // (empty: <tmp>/tpbench-logs-<pid>)
  int stderr_tail_lines = 20; // how many of a failed rank's last stderr lines to report
  LauncherKind kind = LauncherKind::fork;
  std::vector<HostSlots> hosts;           // mpirun/srun: where ranks run (empty: the job's default)
  std::vector<std::string> launcher_args; // mpirun/srun: extra arguments, before the binary
  int virtual_hosts = 0;                  // >= 2: the ranks of a group claim that many hosts
                                          // (TPB_VIRTUAL_HOSTS, reference_engine/comm/host_layout.h)
  std::string control_host;               // mpirun/srun: the address ranks connect to; empty:
                                          // 127.0.0.1 when every rank is local (no hosts, mpirun),
                                          // else this host's name
};

// run.json's "launcher": how the ranks were started (kind, hosts, launcher_args,
// virtual_hosts, control_host), and back into the options that made it (`--resume` keeps
// the run's launcher). A document not as tpbench writes it is an InputError naming `file` and
// $.launcher.
nlohmann::json launcher_to_json(const LauncherOptions& o);
LauncherOptions launcher_from_json(const nlohmann::json& j, const std::string& file);

struct CaseRun {
  bool ok = false;                  // every rank returned a result
  // When !ok, first line: "rank 1: killed by signal 11 (SIGSEGV)" | "rank 0: exited with
  // status 3" | "timeout after 30.0 s waiting for ranks 1, 2" | "rank 1: <its error message>";
  // then, per blamed rank, "--- last N lines of rank r stderr (<log path>) ---" and the lines.
  std::string error;
  std::vector<int> failed_ranks;    // when !ok: the ranks the error is about (may be several on a timeout)
  std::vector<nlohmann::json> ranks;  // when ok: one result per rank, in rank order (RankResult::to_json)
  std::vector<int> pids;            // the rank processes that ran the case, in rank order (-1: a
                                    // job's rank that never connected)
  nlohmann::json hosts;             // per rank {"host": name, "host_id": id} (host_id differs from
                                    // the name under virtual hosts); null when a rank never said
  std::vector<std::string> command; // mpirun/srun: the job's argv; empty for fork
  std::vector<nlohmann::json> host_reports;  // the facts of hosts reported during this case (once
                                    // per host and group: suite/launch/host_facts.h, host_report)
  double wall_s = 0;                // controller wall time for the case, seconds
};

class Launcher {
 public:
  explicit Launcher(LauncherOptions options);
  ~Launcher();  // shuts the live group down and reaps every process
  Launcher(const Launcher&) = delete;
  Launcher& operator=(const Launcher&) = delete;

  // Runs `case_spec` (CaseSpec::to_json, suite/scenario/case_spec.h) on `world_size` ranks. Reuses
  // the live group when `group_key` and `world_size` match it; otherwise replaces it. Never
  // throws for a rank's failure: that is a CaseRun with ok = false. With `placement` (GPU cases), each rank
  // of a new group gets its place in its environment (rank_environment: TPB_DEVICE,
  // TPB_RANKS_PER_GPU, and a distinct NCCL_HOSTID where ranks share a device); the group key
  // must then name the placement, since a live group keeps the places it started with.
  CaseRun run_case(const std::string& group_key, int world_size, const nlohmann::json& case_spec,
                   double timeout_s, const RankPlacement* placement = nullptr);

  // Stops the live group (asks the workers to exit, then kills what is left) and reaps it.
  void shutdown();

  // PIDs of the live group, for tests that check nothing is left behind.
  std::vector<int> worker_pids() const;

 private:
  struct Group;
  void start_group(const std::string& group_key, int world_size, const RankPlacement* placement);
  void start_job(const std::string& group_key, int world_size);
  void accept_ranks();
  void admit_pending(const std::function<void(std::string, std::vector<int>)>& fail);
  void handle_message(int rank, const nlohmann::json& message,
                      const std::function<void(std::string, std::vector<int>)>& fail);
  // Every whole line `rank`'s reader holds, in order, to handle_message, until `failed()`; a
  // line that is not JSON fails the case (false).
  bool handle_lines(int rank, const std::function<void(std::string, std::vector<int>)>& fail,
                    const std::function<bool()>& failed);
  // The steps of run_case. A case's failure is reported once, through `fail` (the message and
  // the ranks it blames); `failed()` says whether it has been.
  using FailFn = std::function<void(std::string, std::vector<int>)>;
  // The live group for this key and size: kept, replaced or started.
  Group& group_for(const std::string& group_key, int world_size, const RankPlacement* placement);
  // A job that ended with results missing: the rank its launcher names, else those whose
  // connection closed, else every rank that has not answered.
  void fail_ended_job(Group& g, const FailFn& fail);
  // The deadline passed: the ranks to blame, from the collective-progress page where there is one.
  void fail_timeout(Group& g, double timeout_s, const FailFn& fail);
  // One poll() of the group's sockets, at most `remaining_s`: connections accepted, bytes sent
  // and read, whole messages handled. False when nothing was ready.
  bool poll_group(Group& g, double remaining_s, const FailFn& fail, const std::function<bool()>& failed);
  // A rank whose socket closed is exiting: its exit awaited a moment, and the case failed.
  void fail_closed_ranks(Group& g, const FailFn& fail, const std::function<bool()>& failed);
  // `failure` with the blamed ranks' stderr tails and the job's output (the group killed first).
  std::string failure_report(const Group& g, const std::string& failure, const std::vector<int>& blamed) const;

  LauncherOptions options_;
  std::unique_ptr<Group> group_;
};

}  // namespace tpb
