// The MPS session's async-signal-safe side (mps_cleanup.cpp; mps.cpp's opening comment says
// why there is one): process primitives that allocate nothing, the control program's one runner,
// and the fixed tables the signal handler reads. Internal to suite/launch/.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <string>

namespace tpb::mps_detail {

constexpr const char* kDefaultControlProgram = "nvidia-cuda-mps-control";
// The NVIDIA driver's control device: without it no CUDA process (and no MPS server) can run.
constexpr const char* kDefaultDriverProbe = "/dev/nvidiactl";
// Where CUDA clients look for a daemon when CUDA_MPS_PIPE_DIRECTORY is unset.
constexpr const char* kDefaultPipeDir = "/var/run/nvidia-mps";
constexpr const char* kPipeEnv = "CUDA_MPS_PIPE_DIRECTORY";
constexpr const char* kLogEnv = "CUDA_MPS_LOG_DIRECTORY";
constexpr const char* kStatePrefix = "tpbench-mps-";
constexpr const char* kOwnerFile = "owner.json";          // in a session's state folder
constexpr const char* kCommandRecord = "tpbench-mps.json";  // in a `tpbench mps start` pipe folder
// sun_path holds 108 bytes with the NUL; the daemon's longest socket is <pipe>/control_privileged.
constexpr std::size_t kMaxPipeDirBytes = 107 - (sizeof("/control_privileged") - 1);
// How long the handler waits for a killed rank group to be reaped, milliseconds.
constexpr long long kGroupReapMs = 1000;
// The handler's bound on each of its waits (quit, the daemon's exit, rm), milliseconds: a
// Ctrl-C should end the run within seconds even when the daemon hangs.
constexpr long long kHandlerWaitCapMs = 5000;
// How long a daemon gets to disappear after SIGKILL, milliseconds.
constexpr long long kKillWaitMs = 2000;

long long now_ms();

void sleep_ms(long ms);

struct ProcStat {
  bool ok = false;           // /proc/<pid>/stat was read up to the start time
  char state = '?';          // R, S, D, Z (zombie), X (dead), ...
  int pgid = 0;              // process group
  int sid = 0;               // session
  long long start_ticks = 0; // start time, clock ticks since boot (field 22)
};

ProcStat read_proc_stat(int pid);

// Alive = exists, is not a zombie, and (when start_ticks is given) is the process that started
// then, not a later one with a recycled pid.
bool process_alive(int pid, long long start_ticks);

struct RunOutcome {
  bool started = false;    // execve succeeded
  int exec_errno = 0;      // when !started: why (fork, pipe or exec failure)
  bool timed_out = false;  // it ran past the timeout and was killed
  int wait_status = 0;     // when started and !timed_out
  bool exited_zero() const {
    return started && !timed_out && WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0;
  }
};

// Runs `path` with `input` (may be null) on its stdin and its stdout+stderr to `out_fd` (-1:
// /dev/null); waits at most timeout_ms, then SIGKILLs it. Async-signal-safe.
RunOutcome run_program(const char* path, char* const argv[], char* const envp[], const char* input, int out_fd,
                       long long timeout_ms, bool own_group);

enum class StopResult {
  quit,       // the daemon exited after "quit"
  killed,     // it did not: SIGKILL ended it
  survived,   // not even SIGKILL ended it in time
  unknown,    // its pid is not known: "quit" was sent, nothing more can be said
  not_running // its pid is known and it had already exited
};

// "quit" through the control program, a bounded wait for the daemon, SIGKILL if it stays.
// Async-signal-safe (`program` may be null: no control program, only the kill).
StopResult stop_daemon(const char* program, char* const argv[], char* const envp[], int pid, int pgid,
                       long long start_ticks, long long timeout_ms);

constexpr int kMaxDaemonSlots = 4;        // private daemons alive at once in one process
constexpr int kMaxCleanupGroups = 256;    // rank process groups alive at once
constexpr std::size_t kSlotPathBytes = 1024;
constexpr std::size_t kSlotPathEnvBytes = 8192;

static_assert(std::atomic<int>::is_always_lock_free && std::atomic<long long>::is_always_lock_free,
              "the signal handler reads these atomics");

struct DaemonSlot {
  std::atomic<int> state{0};  // 0 free, 1 being filled, 2 live: the handler stops its daemon
  std::atomic<int> daemon_pid{0};  // 0: not known yet (the handler then only sends quit)
  std::atomic<int> daemon_pgid{0};
  std::atomic<long long> daemon_start_ticks{0};
  long long timeout_ms = 0;              // bound on each wait of the handler
  char program[kSlotPathBytes] = {};     // the control program, an absolute path
  char rm_program[kSlotPathBytes] = {};  // rm, an absolute path ("": none found, the folder stays)
  char state_dir[kSlotPathBytes] = {};   // the session's state folder, removed by the handler
  char env_path[kSlotPathEnvBytes] = {}; // "PATH=..."
  char env_pipe[kSlotPathBytes] = {};    // "CUDA_MPS_PIPE_DIRECTORY=..."
  char env_log[kSlotPathBytes] = {};     // "CUDA_MPS_LOG_DIRECTORY=..."
  char arg_rm[3] = "rm", arg_rf[4] = "-rf", arg_end[3] = "--";
  char* argv[2] = {};
  char* envp[4] = {};
  char* rm_argv[5] = {};
};

// The private daemons the handler stops (acquire_daemon_slot fills one).
extern DaemonSlot g_daemon_slots[kMaxDaemonSlots];

// An executable on PATH (or `name` itself when it holds a '/'), as an absolute path; "" if none.
std::string resolve_program(const std::string& name);

// Fills a free slot for the handler; returns its index, or -1 with `why`.
int acquire_daemon_slot(const std::string& program, const std::string& pipe_dir, const std::string& log_dir,
                        const std::string& state_dir, double timeout_s, std::string* why);

void release_daemon_slot(int index);

}  // namespace tpb::mps_detail
