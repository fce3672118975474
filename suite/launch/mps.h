// CUDA MPS for ranks that share a GPU (shared placement). Without MPS, processes on one GPU
// time-slice: one context runs at a time. Under an MPS control daemon their kernels run
// concurrently, as several ranks of one engine on one GPU would want.
//
// A run either uses a daemon already configured in its environment ("external": never
// stopped by us), or starts a private one ("private") whose pipe folder is
// <state_root>/tpbench-mps-<controller pid>/pipe (Unix-socket paths are limited to 108 bytes,
// so it must be short; the log folder may be anywhere), and stops it when the run ends, also
// on SIGINT/SIGTERM/SIGHUP (install_cleanup_signal_handlers). A controller killed by SIGKILL
// cannot clean up: the next session that may start a daemon reaps the daemons of dead
// controllers first (reap_stale_mps), recognised by the pid in the folder name and the
// owner.json inside it: {"controller_pid", "controller_start_ticks" (its /proc start time, so
// that a recycled pid is told apart), "started_at" (UTC), "pipe_dir", "log_dir",
// "control_program", "daemon": {"pid", "pgid", "start_ticks"}} (pid 0: not found).
//
// Rank processes learn the daemon from CUDA_MPS_PIPE_DIRECTORY / CUDA_MPS_LOG_DIRECTORY,
// which a session sets in this process's environment before the launcher forks them.
//
// Environment: TPB_MPS_CONTROL names the control program to use instead of
// nvidia-cuda-mps-control from PATH (tests point it at a fake); when it is set, no check for
// the NVIDIA driver is made either (MpsOptions::driver_probe is empty).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tpb {

enum class MpsMode {
  automatic,  // use a reachable daemon, else start a private one, else time-slice (say so)
  off,        // do nothing about MPS
  require,    // as automatic, but no daemon is an InputError (exit 2)
};

// "auto" | "off" | "require"; anything else is an InputError naming `where` and the value.
MpsMode parse_mps_mode(const std::string& text, const std::string& where);
const char* mps_mode_name(MpsMode mode);

// $TPB_MPS_CONTROL if set and not empty, else "nvidia-cuda-mps-control".
std::string default_mps_control_program();
// "" when TPB_MPS_CONTROL is set (a fake needs no driver), else "/dev/nvidiactl".
std::string default_mps_driver_probe();

struct MpsOptions {
  MpsMode mode = MpsMode::automatic;
  // The control program: a name looked up on PATH, or a path (tests pass a fake script).
  std::string control_program = default_mps_control_program();
  // A file whose absence means there is no NVIDIA driver here, so no daemon can serve the
  // ranks ("unavailable"). Empty: no check.
  std::string driver_probe = default_mps_driver_probe();
  // Private daemons' state folders are <state_root>/tpbench-mps-<controller pid>[-<n>].
  std::string state_root = "/tmp";
  // Log folder of a private daemon (a run passes <run folder>/mps-log). Empty: <state folder>/log,
  // removed with the state folder.
  std::string log_dir;
  // Bound on each wait: a control program call, the daemon becoming reachable, its exit
  // after "quit" (then it is killed), seconds.
  double timeout_s = 10;
};

struct MpsStatus {
  // "private": this session started the daemon and will stop it;
  // "external": a reachable daemon was already configured (CUDA_MPS_PIPE_DIRECTORY, or the
  //             default /var/run/nvidia-mps when that is unset); used, never stopped;
  // "off": mode off, nothing done;
  // "unavailable": mode auto and no daemon could be used or started: ranks time-slice.
  std::string state;
  std::string pipe_dir;  // the daemon's CUDA_MPS_PIPE_DIRECTORY (empty: off/unavailable)
  std::string log_dir;   // its CUDA_MPS_LOG_DIRECTORY (empty: unknown, for an external one)
  std::string detail;    // one line: why this state ("nvidia-cuda-mps-control not found on PATH")
  std::vector<std::string> reaped;  // one line per stale daemon of a dead controller stopped first

  // {"state", "pipe_dir", "log_dir", "detail", "reaped"}
  nlohmann::json to_json() const;
};

// The MPS daemon of one run (RAII, non-copyable). The constructor attaches to a reachable
// daemon or starts a private one as `options.mode` says; mode require without one throws
// tpb::InputError with the reason. For private/external it sets CUDA_MPS_PIPE_DIRECTORY (and
// CUDA_MPS_LOG_DIRECTORY where known) in this process, so that rank processes forked later
// inherit them; stop() (and the destructor) restore the previous values. In every mode, a
// CUDA_MPS_PIPE_DIRECTORY inherited from a dead state folder of ours (no daemon answers there)
// is unset for good.
class MpsSession {
 public:
  explicit MpsSession(const MpsOptions& options);
  ~MpsSession();
  MpsSession(const MpsSession&) = delete;
  MpsSession& operator=(const MpsSession&) = delete;

  // A private daemon: "quit" through the control program, wait for the daemon to exit
  // (bounded; then SIGKILL to its process group), remove the state folder. Restores the
  // environment. Idempotent; never throws.
  void stop();

  const MpsStatus& status() const { return status_; }

 private:
  void start_private(const std::string& note);     // the private daemon, or unavailable
  void become_unavailable(const std::string& why); // throws InputError in mode require
  void drop_dead_configuration();                  // unsets a pipe folder of ours with no daemon
  void save_environment();                         // for stop() to restore

  MpsOptions options_;
  MpsStatus status_;
  std::string state_dir_;       // private: <state_root>/tpbench-mps-<pid>[-<n>]
  std::string program_path_;    // the control program, resolved
  int slot_ = -1;               // private: index in the signal handler's daemon table
  int daemon_pid_ = 0, daemon_pgid_ = 0;  // private: the control daemon (0: not found)
  long long daemon_start_ticks_ = 0;      // its /proc start time, to tell a recycled pid apart
  bool env_saved_ = false;      // the fields below hold the environment before this session
  bool had_pipe_env_ = false, had_log_env_ = false;
  std::string old_pipe_env_, old_log_env_;
};

// Stops the daemons of tpbench controllers that are no longer alive: every folder
// <state_root>/tpbench-mps-<pid>[-<n>] of this user whose <pid> is not a live process (or is
// a different process than owner.json recorded: a recycled pid) gets "quit" through its pipe
// folder (then SIGKILL of the recorded daemon if it stays), and is removed (kept for the next
// reap only if the daemon survives even SIGKILL). Returns one line per folder handled. Never throws. MpsSession calls it before it may start a daemon.
std::vector<std::string> reap_stale_mps(const MpsOptions& options);

// For `tpbench mps` (a daemon that outlives this process, e.g. a ctest fixture's): start,
// query and stop a daemon at a pipe folder of the caller's choosing. The started daemon is
// recorded in <pipe_dir>/tpbench-mps.json so that stop can kill it if "quit" does not work.
struct MpsCommandResult {
  bool ok = false;    // start: a daemon is reachable; stop: none is left; status: reachable
  std::string line;   // one line saying what happened
};
MpsCommandResult start_mps_daemon(const MpsOptions& options, const std::string& pipe_dir, const std::string& log_dir);
MpsCommandResult stop_mps_daemon(const MpsOptions& options, const std::string& pipe_dir);
MpsCommandResult query_mps_daemon(const MpsOptions& options, const std::string& pipe_dir);

// Cleanup on SIGINT, SIGTERM and SIGHUP (those not ignored): SIGKILL every registered process
// group and reap it briefly, send "quit" to every live private daemon of an MpsSession (wait
// a bounded time, then SIGKILL its group), remove its state folder, then re-raise the signal
// with its default action, so the exit status still says which signal ended the process.
// Each wait is bounded by MpsOptions::timeout_s, at most 5 s. Only async-signal-safe calls;
// all it needs is prebuilt in fixed-size static tables. Idempotent.
void install_cleanup_signal_handlers();

// While a run's case loop is on (graceful), the first SIGINT/SIGTERM/SIGHUP is remembered: the
// case in flight finishes (within its timeout) and is recorded, then the runner stops, writes
// run.json's summary as interrupted and prints the resume command. A second signal kills the
// ranks of the case in flight, which stays unrecorded (a --resume runs it). A third, or one
// outside the loop, cleans up and ends the process as before. interrupt_requested(): the
// first signal, 0 when none; interrupt_cut_case_short(): the second came.
void set_graceful_interrupts(bool on);
int interrupt_requested();
bool interrupt_cut_case_short();
// Process groups (the launcher's rank groups) the handler kills first. At most 256 at once;
// registering more is an Error.
void register_cleanup_process_group(int pgid);
void unregister_cleanup_process_group(int pgid);

}  // namespace tpb
