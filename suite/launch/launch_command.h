// How rank workers are started, in pieces the launcher (launcher.h) and the worker
// (worker.h) share and the unit tests can read without starting anything:
//   - the launcher kinds: fork (tpbench forks its ranks on this host, the default), mpirun
//     and srun (one MPI / Slurm job per rank group, on one host or several);
//   - the job command the controller runs for mpirun and srun;
//   - where a started rank finds its rank, world size, local rank and node in the environment
//     its launcher gave it;
//   - the variables a launcher sets for its ranks, and where a rank's output goes.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace tpb {

enum class LauncherKind { fork, mpirun, srun };

// "fork" | "mpirun" | "srun"; anything else is an InputError naming `what` and the choices.
LauncherKind parse_launcher(const std::string& name, const std::string& what);
// The launcher called `name`, or nullopt (no throw: a rank says what is wrong itself).
std::optional<LauncherKind> launcher_kind(const std::string& name);
const char* launcher_name(LauncherKind kind);

// `--hosts h1:8,h2:8`: host names with a slot count each.
struct HostSlots {
  std::string host;
  int slots = 1;
};
// "h1:8,h2:8" (a host without ":N" has one slot); an InputError naming `what` otherwise.
std::vector<HostSlots> parse_hosts(const std::string& text, const std::string& what);
std::string hosts_text(const std::vector<HostSlots>& hosts);  // back to "h1:8,h2:8"

// The rank a job's launcher names as the one that failed, from its output (the job log's last
// lines): Open MPI's "mpirun noticed that process rank N with PID ... exited on signal ...",
// Slurm's "srun: error: HOST: task N: ...". nullopt when it names none (or for fork). When a
// rank dies, its launcher ends the others, and their control connections may close in the same
// poll as the dead rank's: the controller cannot tell the first one by when it reads them, the
// launcher can.
std::optional<int> rank_named_by_launcher(LauncherKind kind, const std::vector<std::string>& output_lines);

// One job: `world_size` ranks of `worker_binary __worker`.
struct JobLaunch {
  LauncherKind kind = LauncherKind::mpirun;
  int world_size = 1;
  std::vector<HostSlots> hosts;              // empty: the launcher's default (this host, or the allocation)
  std::vector<std::string> extra_args;       // --launcher-args, before the binary
  std::string worker_binary;
  std::vector<std::string> forwarded_env;    // variable names the ranks need on every host
};

// The job's argv:
//   mpirun -np N [--host h1:8,h2:8] -x VAR ... EXTRA... BINARY __worker
//   srun --ntasks=N --kill-on-bad-exit=1 --export=ALL [--nodelist=h1,h2 --ntasks-per-node=8] EXTRA... BINARY __worker
// srun exports the whole environment (--export=ALL); it takes hosts with equal slot counts
// only (an InputError otherwise). Not for fork, which starts no job.
std::vector<std::string> job_command(const JobLaunch& job);

// The controller's environment as every launcher passes it on: less the variables a launcher
// sets for its ranks itself (RANK, TPB_GROUP_ID, TPB_DEVICE, TPB_HOST_ID, ...), which an inherited value
// (a nested run, a user's shell) must never override; less NCCL_HOSTID where
// `drop_nccl_hostid` (ranks sharing a device each get their own).
std::vector<std::string> inherited_environment(char** environ_entries, bool drop_nccl_hostid);

// A rank's log, the same file whoever opens it: the fork launcher for its children, a job's
// rank for itself (when the folder is reachable from its host).
std::string rank_log_path(const std::string& dir, const std::string& group_id, int rank);

// Where a started rank stands. `node` is the launcher's node index (-1 when it gives none).
struct LaunchedRank {
  int rank = -1;
  int world_size = 0;
  int local_rank = -1;
  int node = -1;
};

// Reads the rank's place from its launcher's variables, through `getenv`:
//   fork    RANK, WORLD_SIZE, LOCAL_RANK
//   mpirun  OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK (Open MPI), else PMI_RANK, PMI_SIZE,
//           MPI_LOCALRANKID (MPICH's hydra)
//   srun    SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID
// Each kind reads only its own: under mpirun inside a Slurm allocation, SLURM_PROCID is the
// batch step's and says nothing about the rank. False with `error` naming what is missing or
// malformed.
using EnvLookup = std::function<const char*(const char*)>;
bool launched_rank(LauncherKind kind, const EnvLookup& getenv, LaunchedRank& out, std::string& error);

}  // namespace tpb
