// The CUDA MPS daemon lifecycle, see mps.h.
//
// Every call of the control program ("-d", "get_server_list", "quit") goes through one
// async-signal-safe routine (run_program: fork, exec, a bounded wait, SIGKILL on timeout), so
// the signal handler and the ordinary path share it. What the handler needs (the program's
// argv and envp, the state folder, the daemon's pid) is written when a session starts into
// fixed-size static tables; the handler allocates nothing.
//
// nvidia-cuda-mps-control -d does not say the daemon's pid. It is looked up in /proc once the
// daemon answers: the process whose environment holds our (unique) CUDA_MPS_PIPE_DIRECTORY and
// that lives in another session than ours (the daemon makes a session of its own). When
// "quit" does not end it in time, SIGKILL goes to its process group, which also holds the MPS
// server it spawned. A pid is trusted only together with its /proc start time, so a recycled
// pid is never killed, and a state folder whose controller pid now names another process is
// recognised as stale.
#include "suite/launch/mps.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "suite/records/provenance.h"
#include "suite/records/results.h"
#include "tpb/check.h"

extern char** environ;

namespace tpb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

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

// ---------------------------------------------------------------------------------------
// Async-signal-safe primitives: system calls and plain loops only, no allocation.

long long now_ms() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<long long>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

void sleep_ms(long ms) {
  timespec ts{ms / 1000, (ms % 1000) * 1000000};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

// fork() takes glibc's malloc locks and runs atfork handlers: a signal that interrupted malloc
// would deadlock it. _Fork (glibc >= 2.34) and a bare clone do neither.
pid_t fork_async_safe() {
#if defined(__GLIBC__) && defined(__GLIBC_PREREQ)
#if __GLIBC_PREREQ(2, 34)
  return _Fork();
#else
  return static_cast<pid_t>(syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0));
#endif
#else
  return static_cast<pid_t>(syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0));
#endif
}

long long parse_decimal(const char* begin, const char* end) {
  long long v = 0;
  bool negative = begin < end && *begin == '-';
  for (const char* p = begin + (negative ? 1 : 0); p < end && *p >= '0' && *p <= '9'; ++p) v = v * 10 + (*p - '0');
  return negative ? -v : v;
}

struct ProcStat {
  bool ok = false;           // /proc/<pid>/stat was read up to the start time
  char state = '?';          // R, S, D, Z (zombie), X (dead), ...
  int pgid = 0;              // process group
  int sid = 0;               // session
  long long start_ticks = 0; // start time, clock ticks since boot (field 22)
};

ProcStat read_proc_stat(int pid) {
  ProcStat st;
  char path[40] = "/proc/";
  char digits[16];
  int n = 0;
  for (unsigned v = static_cast<unsigned>(pid); n == 0 || v > 0; v /= 10) digits[n++] = static_cast<char>('0' + v % 10);
  char* p = path + 6;
  while (n > 0) *p++ = digits[--n];
  std::memcpy(p, "/stat", 6);
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return st;
  char buf[1024];
  ssize_t len;
  do {
    len = read(fd, buf, sizeof buf - 1);
  } while (len < 0 && errno == EINTR);
  close(fd);
  if (len <= 0) return st;
  buf[len] = '\0';
  const char* q = nullptr;  // after the last ')': the command name may hold spaces and parens
  for (const char* c = buf; *c; ++c)
    if (*c == ')') q = c + 1;
  if (q == nullptr) return st;
  int field = 2;
  while (*q) {
    while (*q == ' ') ++q;
    if (!*q) break;
    const char* token = q;
    while (*q && *q != ' ') ++q;
    ++field;
    if (field == 3) st.state = *token;
    else if (field == 5) st.pgid = static_cast<int>(parse_decimal(token, q));
    else if (field == 6) st.sid = static_cast<int>(parse_decimal(token, q));
    else if (field == 22) {
      st.start_ticks = parse_decimal(token, q);
      st.ok = true;
      break;
    }
  }
  return st;
}

// Alive = exists, is not a zombie, and (when start_ticks is given) is the process that started
// then, not a later one with a recycled pid.
bool process_alive(int pid, long long start_ticks) {
  if (pid <= 0) return false;
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  const ProcStat st = read_proc_stat(pid);
  if (!st.ok) return kill(pid, 0) == 0 || errno == EPERM;  // no /proc: trust kill
  if (st.state == 'Z' || st.state == 'X') return false;
  return start_ticks == 0 || st.start_ticks == start_ticks;
}

// A daemon may be our child: as a child subreaper (the launcher) this process inherits it when
// its launching parent exits. Reap it then, or it stays a zombie.
void reap_if_child(int pid) {
  int status;
  (void)waitpid(pid, &status, WNOHANG);
}

struct RunOutcome {
  bool started = false;    // execve succeeded
  int exec_errno = 0;      // when !started: why (fork, pipe or exec failure)
  bool timed_out = false;  // it ran past the timeout and was killed
  int wait_status = 0;     // when started and !timed_out
  bool exited_zero() const {
    return started && !timed_out && WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0;
  }
};

void close_from(int first, int keep) {
#ifdef SYS_close_range
  const bool ranged = keep < first ? syscall(SYS_close_range, first, ~0U, 0) == 0
                                   : (keep == first || syscall(SYS_close_range, first, keep - 1, 0) == 0) &&
                                         syscall(SYS_close_range, keep + 1, ~0U, 0) == 0;
  if (ranged) return;
#endif
  for (int fd = first; fd < 4096; ++fd)
    if (fd != keep) close(fd);
}

constexpr int kCleanupSignals[] = {SIGINT, SIGTERM, SIGHUP};
void cleanup_handler(int sig);

[[noreturn]] void exec_child(const char* path, char* const argv[], char* const envp[], int in_fd, int out_fd,
                             int report_fd, bool own_group) {
  // Its own process group: a second Ctrl-C at the terminal does not cut the cleanup short.
  if (own_group) setpgid(0, 0);
  dup2(in_fd, STDIN_FILENO);
  if (out_fd >= 0) {
    dup2(out_fd, STDOUT_FILENO);
    dup2(out_fd, STDERR_FILENO);
  }
  // A daemon must not inherit the controller's sockets and pipes (it would hold them forever).
  close_from(3, report_fd);
  // Until execve replaces it, a signal would run the cleanup handler here, in a copy of us.
  for (int sig : kCleanupSignals) {
    struct sigaction old {};
    if (sigaction(sig, nullptr, &old) == 0 && old.sa_handler == cleanup_handler) {
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      sigemptyset(&dfl.sa_mask);
      sigaction(sig, &dfl, nullptr);
    }
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);  // a handler's blocked signals would stay blocked
  execve(path, argv, envp);
  const int err = errno;
  (void)!write(report_fd, &err, sizeof err);
  _exit(127);
}

// Runs `path` with `input` (may be null) on its stdin and its stdout+stderr to `out_fd` (-1:
// /dev/null); waits at most timeout_ms, then SIGKILLs it. Async-signal-safe.
RunOutcome run_program(const char* path, char* const argv[], char* const envp[], const char* input, int out_fd,
                       long long timeout_ms, bool own_group) {
  RunOutcome r;
  int in_pipe[2];
  if (pipe2(in_pipe, O_CLOEXEC) != 0) {
    r.exec_errno = errno;
    return r;
  }
  // The input is written before the fork (it is far below the pipe's capacity), while we still
  // hold the read end: no SIGPIPE if the program dies early.
  if (input != nullptr) {
    for (std::size_t done = 0, len = std::strlen(input); done < len;) {
      const ssize_t w = write(in_pipe[1], input + done, len - done);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) break;
      done += static_cast<std::size_t>(w);
    }
  }
  close(in_pipe[1]);
  int report_pipe[2];
  if (pipe2(report_pipe, O_CLOEXEC) != 0) {
    r.exec_errno = errno;
    close(in_pipe[0]);
    return r;
  }
  const int null_fd = out_fd < 0 ? open("/dev/null", O_WRONLY | O_CLOEXEC) : -1;
  const pid_t pid = fork_async_safe();
  if (pid == 0) exec_child(path, argv, envp, in_pipe[0], out_fd < 0 ? null_fd : out_fd, report_pipe[1], own_group);
  const int fork_errno = errno;
  close(in_pipe[0]);
  close(report_pipe[1]);
  if (null_fd >= 0) close(null_fd);
  if (pid < 0) {
    close(report_pipe[0]);
    r.exec_errno = fork_errno;
    return r;
  }
  int child_errno = 0;
  ssize_t got;
  do {
    got = read(report_pipe[0], &child_errno, sizeof child_errno);
  } while (got < 0 && errno == EINTR);
  close(report_pipe[0]);
  r.started = got == 0;  // EOF: the close-on-exec pipe closed in a successful execve
  if (!r.started) r.exec_errno = got == static_cast<ssize_t>(sizeof child_errno) ? child_errno : EIO;
  const long long deadline = now_ms() + timeout_ms;
  for (;;) {
    int status = 0;
    const pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) {
      r.wait_status = status;
      return r;
    }
    if (w < 0 && errno != EINTR) return r;  // ECHILD: SIGCHLD ignored, the status is lost
    if (now_ms() >= deadline) {
      kill(pid, SIGKILL);
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      r.timed_out = true;
      return r;
    }
    sleep_ms(5);
  }
}

bool wait_for_exit(int pid, long long start_ticks, long long timeout_ms) {
  const long long deadline = now_ms() + timeout_ms;
  for (;;) {
    reap_if_child(pid);
    if (!process_alive(pid, start_ticks)) return true;
    if (now_ms() >= deadline) return false;
    sleep_ms(10);
  }
}

// SIGKILL to the daemon's process group (never our own) and to the daemon; true if it is gone.
bool kill_daemon(int pid, int pgid, long long start_ticks) {
  if (!process_alive(pid, start_ticks)) return true;
  if (pgid > 1 && pgid != getpgrp()) kill(-pgid, SIGKILL);
  kill(pid, SIGKILL);
  return wait_for_exit(pid, start_ticks, kKillWaitMs);
}

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
                       long long start_ticks, long long timeout_ms) {
  if (pid > 0) reap_if_child(pid);
  if (pid > 0 && !process_alive(pid, start_ticks)) return StopResult::not_running;
  const long long start = now_ms();
  if (program != nullptr) (void)run_program(program, argv, envp, "quit\n", -1, timeout_ms, true);
  if (pid <= 0) return StopResult::unknown;
  const long long left = std::max(0LL, timeout_ms - (now_ms() - start));
  if (wait_for_exit(pid, start_ticks, program != nullptr ? left : 0)) return StopResult::quit;
  return kill_daemon(pid, pgid, start_ticks) ? StopResult::killed : StopResult::survived;
}

// ---------------------------------------------------------------------------------------
// The signal handler's tables.

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

DaemonSlot g_daemon_slots[kMaxDaemonSlots];
std::atomic<int> g_cleanup_pgids[kMaxCleanupGroups];
std::atomic<int> g_handler_running{0};
std::atomic<int> g_graceful{0};     // set_graceful_interrupts
std::atomic<int> g_interrupted{0};  // the first signal received while graceful
std::atomic<int> g_interrupts{0};   // signals received while graceful
std::atomic<int> g_cut_short{0};    // the second one killed the case in flight
std::atomic<int> g_handlers_installed{0};

bool copy_bounded(char* dst, std::size_t capacity, const std::string& text) {
  if (text.size() + 1 > capacity || text.find('\0') != std::string::npos) return false;
  std::memcpy(dst, text.c_str(), text.size() + 1);
  return true;
}

// An executable on PATH (or `name` itself when it holds a '/'), as an absolute path; "" if none.
std::string resolve_program(const std::string& name) {
  std::error_code ec;
  auto usable = [&](const fs::path& p) { return fs::is_regular_file(p, ec) && access(p.c_str(), X_OK) == 0; };
  if (name.empty()) return "";
  if (name.find('/') != std::string::npos) return usable(name) ? fs::absolute(name, ec).lexically_normal().string() : "";
  const char* path_env = std::getenv("PATH");
  std::stringstream dirs(path_env != nullptr ? path_env : "/usr/local/bin:/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const fs::path candidate = fs::path(dir.empty() ? "." : dir) / name;
    if (usable(candidate)) return fs::absolute(candidate, ec).lexically_normal().string();
  }
  return "";
}

// Fills a free slot for the handler; returns its index, or -1 with `why`.
int acquire_daemon_slot(const std::string& program, const std::string& pipe_dir, const std::string& log_dir,
                        const std::string& state_dir, double timeout_s, std::string* why) {
  for (int i = 0; i < kMaxDaemonSlots; ++i) {
    DaemonSlot& s = g_daemon_slots[i];
    int expected = 0;
    if (!s.state.compare_exchange_strong(expected, 1)) continue;
    s.daemon_pid = 0;
    s.daemon_pgid = 0;
    s.daemon_start_ticks = 0;
    s.timeout_ms = std::min(static_cast<long long>(timeout_s * 1000), kHandlerWaitCapMs);
    const char* path_env = std::getenv("PATH");
    std::string path_entry = std::string("PATH=") + (path_env != nullptr ? path_env : "");
    if (path_entry.size() >= kSlotPathEnvBytes) path_entry = "PATH=/usr/local/bin:/usr/bin:/bin";
    const bool fits = copy_bounded(s.program, kSlotPathBytes, program) &&
                      copy_bounded(s.rm_program, kSlotPathBytes, resolve_program("rm")) &&
                      copy_bounded(s.state_dir, kSlotPathBytes, state_dir) &&
                      copy_bounded(s.env_path, kSlotPathEnvBytes, path_entry) &&
                      copy_bounded(s.env_pipe, kSlotPathBytes, std::string(kPipeEnv) + "=" + pipe_dir) &&
                      copy_bounded(s.env_log, kSlotPathBytes, std::string(kLogEnv) + "=" + log_dir);
    if (!fits) {
      s.state = 0;
      *why = "a path is too long for the signal handler's table (" + std::to_string(kSlotPathBytes) + " bytes)";
      return -1;
    }
    s.argv[0] = s.program;
    s.argv[1] = nullptr;
    s.envp[0] = s.env_path;
    s.envp[1] = s.env_pipe;
    s.envp[2] = s.env_log;
    s.envp[3] = nullptr;
    s.rm_argv[0] = s.arg_rm;
    s.rm_argv[1] = s.arg_rf;
    s.rm_argv[2] = s.arg_end;
    s.rm_argv[3] = s.state_dir;
    s.rm_argv[4] = nullptr;
    s.state = 2;
    return i;
  }
  *why = "more than " + std::to_string(kMaxDaemonSlots) + " private MPS daemons in one process";
  return -1;
}

void release_daemon_slot(int index) {
  if (index >= 0 && index < kMaxDaemonSlots) g_daemon_slots[index].state = 0;
}

void cleanup_handler(int sig) {
  // Graceful (a run's case loop): the first signal is remembered and the case in flight
  // finishes and is recorded; the second kills its ranks (the case stays unrecorded); either
  // way the runner then writes the run's summary. A third signal takes the path below.
  if (g_graceful.load() != 0) {
    const int n = g_interrupts.fetch_add(1);
    if (n == 0) {
      g_interrupted.store(sig);
      static const char msg[] =
          "\ntpbench: interrupted: the case in flight finishes and is recorded, then the run stops "
          "(interrupt again to stop that case now)\n";
      (void)!write(STDERR_FILENO, msg, sizeof msg - 1);
      return;
    }
    if (n == 1) {
      g_cut_short.store(1);
      for (auto& slot : g_cleanup_pgids) {
        const int pgid = slot.load();
        if (pgid > 1 && pgid != getpgrp()) kill(-pgid, SIGKILL);
      }
      static const char msg[] =
          "\ntpbench: interrupted again: the case in flight is stopped, unrecorded (interrupt again to quit "
          "at once)\n";
      (void)!write(STDERR_FILENO, msg, sizeof msg - 1);
      return;
    }
  }
  if (g_handler_running.exchange(1) != 0) return;  // another thread cleans up, then re-raises its signal
  const int saved_errno = errno;
  // Ranks first: a daemon's "quit" waits for its clients.
  for (auto& slot : g_cleanup_pgids) {
    const int pgid = slot.load();
    if (pgid > 1 && pgid != getpgrp()) kill(-pgid, SIGKILL);
  }
  const long long deadline = now_ms() + kGroupReapMs;
  for (auto& slot : g_cleanup_pgids) {
    const int pgid = slot.load();
    if (pgid <= 1) continue;
    for (;;) {
      int status;
      const pid_t w = waitpid(-pgid, &status, WNOHANG);
      if (w > 0 || (w < 0 && errno == EINTR)) continue;
      if (w < 0 || now_ms() >= deadline) break;  // ECHILD: all reaped (or not our children)
      sleep_ms(5);
    }
  }
  for (auto& s : g_daemon_slots) {
    if (s.state.load() != 2) continue;
    (void)stop_daemon(s.program, s.argv, s.envp, s.daemon_pid.load(), s.daemon_pgid.load(),
                      s.daemon_start_ticks.load(), s.timeout_ms);
    if (s.rm_program[0] != '\0') (void)run_program(s.rm_program, s.rm_argv, s.envp, nullptr, -1, s.timeout_ms, true);
  }
  errno = saved_errno;
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, nullptr);
  raise(sig);  // pending until the handler returns and unblocks it; then the default action
}

// ---------------------------------------------------------------------------------------
// The ordinary path.

struct DaemonIdentity {
  int pid = 0;                // the control daemon (0: not found)
  int pgid = 0;               // its process group
  long long start_ticks = 0;  // its /proc start time
};

json identity_json(const DaemonIdentity& d) {
  return {{"pid", d.pid}, {"pgid", d.pgid}, {"start_ticks", d.start_ticks}};
}

DaemonIdentity identity_from_json(const json& j) {
  DaemonIdentity d;
  if (!j.is_object()) return d;
  d.pid = j.value("pid", 0);
  d.pgid = j.value("pgid", 0);
  d.start_ticks = j.value("start_ticks", 0LL);
  return d;
}

// The daemon serving `pipe_dir`: its environment holds CUDA_MPS_PIPE_DIRECTORY=<pipe_dir> and
// it is outside our session (our ranks carry the same entry but share our session). The group
// leader is preferred (the daemon rather than an MPS server or a child of a fake).
DaemonIdentity find_daemon(const std::string& pipe_dir) {
  const std::string needle = std::string(kPipeEnv) + "=" + pipe_dir;
  const ProcStat self = read_proc_stat(getpid());
  DaemonIdentity best;
  std::error_code ec;
  for (fs::directory_iterator it("/proc", ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const int pid = std::atoi(name.c_str());
    if (pid == getpid()) continue;
    std::ifstream in(it->path() / "environ", std::ios::binary);
    std::string entry;
    bool match = false;
    while (!match && std::getline(in, entry, '\0')) match = entry == needle;
    if (!match) continue;
    const ProcStat st = read_proc_stat(pid);
    if (!st.ok || st.state == 'Z' || st.state == 'X') continue;
    if (self.ok && (st.sid == self.sid || st.pgid == self.pgid)) continue;
    const bool leader = st.pgid == pid;
    const bool best_leader = best.pid != 0 && best.pgid == best.pid;
    if (best.pid == 0 || (leader && !best_leader) || (leader == best_leader && pid < best.pid))
      best = {pid, st.pgid, st.start_ticks};
  }
  return best;
}

// This process's environment without the MPS entries, plus ours (log_dir empty: none).
std::vector<std::string> control_environment(const std::string& pipe_dir, const std::string& log_dir) {
  std::vector<std::string> env;
  const std::string pipe_prefix = std::string(kPipeEnv) + "=", log_prefix = std::string(kLogEnv) + "=";
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry = *e;
    if (entry.rfind(pipe_prefix, 0) != 0 && entry.rfind(log_prefix, 0) != 0) env.push_back(entry);
  }
  env.push_back(pipe_prefix + pipe_dir);
  if (!log_dir.empty()) env.push_back(log_prefix + log_dir);
  return env;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> p;
  for (auto& s : strings) p.push_back(s.data());
  p.push_back(nullptr);
  return p;
}

struct ControlCall {
  RunOutcome outcome;
  std::string output;  // its stdout+stderr (the first 4 KiB)
};

ControlCall call_control(const std::string& program, const std::vector<std::string>& args, const std::string& input,
                         const std::string& pipe_dir, const std::string& log_dir, double timeout_s, bool own_group) {
  std::vector<std::string> argv_s = {program};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<std::string> env_s = control_environment(pipe_dir, log_dir);
  auto argv = pointers(argv_s);
  auto envp = pointers(env_s);
  ControlCall call;
  // A memory file, not a pipe: a daemon that keeps the descriptor cannot block our reading.
  const int out_fd = memfd_create("tpbench-mps-output", MFD_CLOEXEC);
  call.outcome = run_program(program.c_str(), argv.data(), envp.data(), input.empty() ? nullptr : input.c_str(),
                             out_fd, static_cast<long long>(timeout_s * 1000), own_group);
  if (out_fd >= 0) {
    char buf[4096];
    const ssize_t n = pread(out_fd, buf, sizeof buf, 0);
    if (n > 0) call.output.assign(buf, static_cast<std::size_t>(n));
    close(out_fd);
  }
  return call;
}

std::string first_line(const std::string& text) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const auto b = line.find_first_not_of(" \t\r");
    if (b == std::string::npos) continue;
    line = line.substr(b, line.find_last_not_of(" \t\r") - b + 1);
    return line.size() > 200 ? line.substr(0, 200) + "..." : line;
  }
  return "";
}

std::string outcome_text(const ControlCall& call, double timeout_s) {
  const RunOutcome& o = call.outcome;
  std::ostringstream os;
  if (!o.started) os << "could not be run: " << std::strerror(o.exec_errno);
  else if (o.timed_out) os << "did not finish within " << timeout_s << " s";
  else if (WIFSIGNALED(o.wait_status)) os << "was killed by signal " << WTERMSIG(o.wait_status);
  else os << "exited with status " << WEXITSTATUS(o.wait_status);
  const std::string said = first_line(call.output);
  if (!said.empty()) os << " (\"" << said << "\")";
  return os.str();
}

bool reachable(const std::string& program, const std::string& pipe_dir, double timeout_s) {
  std::error_code ec;
  if (program.empty() || pipe_dir.empty() || !fs::exists(fs::path(pipe_dir) / "control", ec)) return false;
  return call_control(program, {}, "get_server_list\n", pipe_dir, "", timeout_s, true).outcome.exited_zero();
}

// Polls until the daemon at pipe_dir answers, up to timeout_s.
bool wait_reachable(const std::string& program, const std::string& pipe_dir, double timeout_s) {
  const long long deadline = now_ms() + static_cast<long long>(timeout_s * 1000);
  for (;;) {
    const double left_s = std::max(0.1, static_cast<double>(deadline - now_ms()) / 1000);
    if (reachable(program, pipe_dir, left_s)) return true;
    if (now_ms() >= deadline) return false;
    sleep_ms(50);
  }
}

// The JSON object in `path`; null when it is missing or damaged.
json read_json_or_null(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return nullptr;
  try {
    return json::parse(in);
  } catch (const std::exception&) {
    return nullptr;
  }
}

// Stops the daemon at `pipe_dir` from the ordinary path. `program` may be "" (not found).
StopResult stop_daemon_at(const std::string& program, const std::string& pipe_dir, const DaemonIdentity& daemon,
                          double timeout_s) {
  std::vector<std::string> argv_s = {program};
  std::vector<std::string> env_s = control_environment(pipe_dir, "");
  auto argv = pointers(argv_s);
  auto envp = pointers(env_s);
  std::error_code ec;
  // With nothing listening at the pipe there is no one to tell; a known pid may still be killed.
  const bool can_quit = !program.empty() && fs::exists(fs::path(pipe_dir) / "control", ec);
  return stop_daemon(can_quit ? program.c_str() : nullptr, argv.data(), envp.data(), daemon.pid, daemon.pgid,
                     daemon.start_ticks, static_cast<long long>(timeout_s * 1000));
}

std::string stop_result_text(StopResult r) {
  switch (r) {
    case StopResult::quit: return "stopped (quit)";
    case StopResult::killed: return "did not quit in time: killed";
    case StopResult::survived: return "did not quit and survived SIGKILL";
    case StopResult::unknown: return "was sent quit (its pid is unknown)";
    case StopResult::not_running: return "had already exited";
  }
  return "?";
}

// "<root>/tpbench-mps-<pid>[-<n>]" -> pid; 0 if the name is not one of ours.
int owner_pid_of(const std::string& name) {
  const std::string prefix = kStatePrefix;
  if (name.rfind(prefix, 0) != 0) return 0;
  const std::string rest = name.substr(prefix.size());
  const auto dash = rest.find('-');
  const std::string pid_text = rest.substr(0, dash);
  const std::string suffix = dash == std::string::npos ? "" : rest.substr(dash + 1);
  auto all_digits = [](const std::string& s) {
    return !s.empty() && s.size() <= 9 && s.find_first_not_of("0123456789") == std::string::npos;
  };
  if (!all_digits(pid_text) || (dash != std::string::npos && !all_digits(suffix))) return 0;
  return std::atoi(pid_text.c_str());
}

}  // namespace

MpsMode parse_mps_mode(const std::string& text, const std::string& where) {
  if (text == "auto") return MpsMode::automatic;
  if (text == "off") return MpsMode::off;
  if (text == "require") return MpsMode::require;
  TPB_INPUT_FAIL(where << ": MPS mode must be auto, off or require, got '" << text << "'");
}

const char* mps_mode_name(MpsMode mode) {
  switch (mode) {
    case MpsMode::automatic: return "auto";
    case MpsMode::off: return "off";
    case MpsMode::require: return "require";
  }
  return "?";
}

std::string default_mps_control_program() {
  const char* env = std::getenv("TPB_MPS_CONTROL");
  return env != nullptr && *env != '\0' ? env : kDefaultControlProgram;
}

std::string default_mps_driver_probe() {
  const char* env = std::getenv("TPB_MPS_CONTROL");
  return env != nullptr && *env != '\0' ? "" : kDefaultDriverProbe;
}

json MpsStatus::to_json() const {
  return {{"state", state}, {"pipe_dir", pipe_dir}, {"log_dir", log_dir}, {"detail", detail}, {"reaped", reaped}};
}

MpsSession::MpsSession(const MpsOptions& options) : options_(options) {
  std::error_code ec;
  program_path_ = resolve_program(options_.control_program);
  if (options_.mode == MpsMode::off) {
    drop_dead_configuration();
    status_.state = "off";
    status_.detail = "MPS off: no daemon started or looked for";
    if (const char* p = std::getenv(kPipeEnv); p != nullptr && *p != '\0')
      status_.detail += std::string("; ") + kPipeEnv + "=" + p + " left as it is";
    return;
  }
  if (program_path_.empty()) {
    const bool is_path = options_.control_program.find('/') != std::string::npos;
    become_unavailable(options_.control_program + (is_path ? " not found or not executable" : " not found on PATH"));
    return;
  }
  if (!options_.driver_probe.empty() && !fs::exists(options_.driver_probe, ec)) {
    become_unavailable("no NVIDIA driver (" + options_.driver_probe + " is missing)");
    return;
  }
  const char* env_pipe = std::getenv(kPipeEnv);
  const std::string configured = env_pipe != nullptr ? env_pipe : "";
  const std::string candidate = configured.empty() ? kDefaultPipeDir : configured;
  if (reachable(program_path_, candidate, options_.timeout_s)) {
    status_.state = "external";
    status_.pipe_dir = candidate;
    save_environment();
    status_.log_dir = old_log_env_;
    status_.detail = "a daemon is reachable at " + candidate +
                     (configured.empty() ? " (the default pipe folder)" : " (CUDA_MPS_PIPE_DIRECTORY)") +
                     "; used, not stopped by tpbench";
    setenv(kPipeEnv, candidate.c_str(), 1);
    return;
  }
  const std::string note =
      configured.empty() ? "" : std::string(kPipeEnv) + "=" + configured + " has no reachable daemon; ";
  drop_dead_configuration();  // not to be restored by stop()
  status_.reaped = reap_stale_mps(options_);
  try {
    start_private(note);
  } catch (...) {
    stop();  // a daemon that started must not outlive a failed constructor
    throw;
  }
}

void MpsSession::start_private(const std::string& note) {
  std::error_code ec;
  auto fail = [&](const std::string& reason) {
    stop();  // whatever was started goes, with the state folder
    become_unavailable(note + reason);
  };
  // The state folder: unique per live session, mode 0700.
  fs::create_directories(options_.state_root, ec);
  const std::string base = (fs::path(options_.state_root) / (kStatePrefix + std::to_string(getpid()))).string();
  for (int n = 0; n < 100 && state_dir_.empty(); ++n) {
    const std::string dir = n == 0 ? base : base + "-" + std::to_string(n);
    if (mkdir(dir.c_str(), 0700) == 0) state_dir_ = dir;
    else if (errno != EEXIST) return fail("cannot create " + dir + ": " + std::strerror(errno));
  }
  if (state_dir_.empty()) return fail("no free state folder name under " + options_.state_root);
  const std::string pipe_dir = (fs::path(state_dir_) / "pipe").string();
  const std::string log_dir = options_.log_dir.empty() ? (fs::path(state_dir_) / "log").string() : options_.log_dir;
  status_.state = "private";  // from here stop() cleans up
  status_.pipe_dir = pipe_dir;
  status_.log_dir = log_dir;
  if (pipe_dir.size() > kMaxPipeDirBytes)
    return fail("pipe folder " + pipe_dir + " is longer than a Unix socket path allows (" +
                std::to_string(kMaxPipeDirBytes) + " bytes): use a shorter state root");
  fs::create_directories(pipe_dir, ec);
  if (!ec) fs::create_directories(log_dir, ec);
  if (ec) return fail("cannot create " + pipe_dir + " or " + log_dir + ": " + ec.message());
  const ProcStat self = read_proc_stat(getpid());
  json owner = {{"controller_pid", getpid()}, {"controller_start_ticks", self.start_ticks},
                {"started_at", utc_now_iso8601()}, {"pipe_dir", pipe_dir}, {"log_dir", log_dir},
                {"control_program", program_path_}, {"daemon", identity_json({})}};
  write_file_atomic((fs::path(state_dir_) / kOwnerFile).string(), owner.dump(2) + "\n");

  // The handler's slot is filled before the daemon starts: a signal during the start stops it too.
  std::string why;
  slot_ = acquire_daemon_slot(program_path_, pipe_dir, log_dir, state_dir_, options_.timeout_s, &why);
  if (slot_ < 0) return fail(why);

  const ControlCall started = call_control(program_path_, {"-d"}, "", pipe_dir, log_dir, options_.timeout_s, false);
  if (!started.outcome.exited_zero())
    return fail(options_.control_program + " -d " + outcome_text(started, options_.timeout_s));
  if (!wait_reachable(program_path_, pipe_dir, options_.timeout_s)) {
    std::ostringstream os;
    os << "the daemon started by " << options_.control_program << " -d did not answer at " << pipe_dir
       << " within " << options_.timeout_s << " s (see " << log_dir << "/control.log)";
    return fail(os.str());
  }
  const DaemonIdentity daemon = find_daemon(pipe_dir);
  daemon_pid_ = daemon.pid;
  daemon_pgid_ = daemon.pgid;
  daemon_start_ticks_ = daemon.start_ticks;
  DaemonSlot& slot = g_daemon_slots[slot_];
  slot.daemon_pgid = daemon.pgid;
  slot.daemon_start_ticks = daemon.start_ticks;
  slot.daemon_pid = daemon.pid;
  owner["daemon"] = identity_json(daemon);
  write_file_atomic((fs::path(state_dir_) / kOwnerFile).string(), owner.dump(2) + "\n");

  save_environment();
  setenv(kPipeEnv, pipe_dir.c_str(), 1);
  setenv(kLogEnv, log_dir.c_str(), 1);

  std::ostringstream os;
  os << note << "started a private control daemon";
  if (daemon.pid > 0) os << " (pid " << daemon.pid << ")";
  else os << " (its pid was not found: if it ignores quit it cannot be killed)";
  os << ", pipe folder " << pipe_dir << ", log folder " << log_dir;
  if (!status_.reaped.empty()) os << "; first stopped " << status_.reaped.size() << " stale daemon(s) of dead tpbench runs";
  status_.detail = os.str();
}

void MpsSession::become_unavailable(const std::string& why) {
  if (options_.mode == MpsMode::require) TPB_INPUT_FAIL("MPS is required (--mps require) but unavailable: " << why);
  drop_dead_configuration();
  status_.state = "unavailable";
  status_.pipe_dir.clear();
  status_.log_dir.clear();
  status_.detail = why + "; ranks sharing a GPU time-slice";
}

void MpsSession::drop_dead_configuration() {
  const char* env_pipe = std::getenv(kPipeEnv);
  const std::string configured = env_pipe != nullptr ? env_pipe : "";
  const std::string ours = (fs::path(options_.state_root) / kStatePrefix).string();
  if (!configured.empty() && configured.rfind(ours, 0) == 0 && !reachable(program_path_, configured, options_.timeout_s)) {
    unsetenv(kPipeEnv);
    unsetenv(kLogEnv);
  }
}

void MpsSession::save_environment() {
  const char* pipe = std::getenv(kPipeEnv);
  const char* log = std::getenv(kLogEnv);
  env_saved_ = true;
  had_pipe_env_ = pipe != nullptr;
  old_pipe_env_ = pipe != nullptr ? pipe : "";
  had_log_env_ = log != nullptr;
  old_log_env_ = log != nullptr ? log : "";
}

MpsSession::~MpsSession() { stop(); }

void MpsSession::stop() {
  try {
    if (status_.state == "private" && !state_dir_.empty()) {
      (void)stop_daemon_at(program_path_, status_.pipe_dir, {daemon_pid_, daemon_pgid_, daemon_start_ticks_},
                           options_.timeout_s);
      std::error_code ec;
      fs::remove_all(state_dir_, ec);
      release_daemon_slot(slot_);
      slot_ = -1;
      state_dir_.clear();
    }
    if (env_saved_) {
      if (had_pipe_env_) setenv(kPipeEnv, old_pipe_env_.c_str(), 1);
      else unsetenv(kPipeEnv);
      if (had_log_env_) setenv(kLogEnv, old_log_env_.c_str(), 1);
      else unsetenv(kLogEnv);
      env_saved_ = false;
    }
  } catch (...) {
    // stop() runs in destructors and on failure paths: it must not throw.
  }
}

std::vector<std::string> reap_stale_mps(const MpsOptions& options) {
  std::vector<std::string> lines;
  try {
    std::error_code ec;
    const std::string program = resolve_program(options.control_program);
    for (fs::directory_iterator it(options.state_root, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      const int owner_pid = owner_pid_of(name);
      if (owner_pid <= 0) continue;
      struct stat st {};
      if (lstat(it->path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) continue;
      const json owner = read_json_or_null(it->path() / kOwnerFile);
      const long long owner_ticks = owner.is_object() ? owner.value("controller_start_ticks", 0LL) : 0;
      if (process_alive(owner_pid, owner_ticks)) continue;
      const std::string pipe_dir =
          owner.is_object() ? owner.value("pipe_dir", (it->path() / "pipe").string()) : (it->path() / "pipe").string();
      const DaemonIdentity daemon = owner.is_object() ? identity_from_json(owner.value("daemon", json())) : DaemonIdentity{};
      const bool had_control = fs::exists(fs::path(pipe_dir) / "control", ec);
      std::ostringstream os;
      os << "stale MPS state of dead tpbench pid " << owner_pid;
      if (owner.is_object() && owner.contains("started_at")) os << " (started " << owner["started_at"].get<std::string>() << ")";
      StopResult r = StopResult::not_running;
      if (daemon.pid > 0 || had_control) {
        r = stop_daemon_at(program, pipe_dir, daemon, options.timeout_s);
        os << ": daemon";
        if (daemon.pid > 0) os << " pid " << daemon.pid;
        os << " " << stop_result_text(r);
      } else {
        os << ": no daemon had been started";
      }
      if (r == StopResult::survived) {
        os << "; " << it->path().string() << " kept for the next reap";
      } else {
        fs::remove_all(it->path(), ec);
        os << "; removed " << it->path().string();
      }
      lines.push_back(os.str());
    }
  } catch (...) {
    // Reaping is best effort: a folder that cannot be read is left for the next run.
  }
  return lines;
}

MpsCommandResult start_mps_daemon(const MpsOptions& options, const std::string& pipe_dir, const std::string& given_log_dir) {
  MpsCommandResult r;
  std::error_code ec;
  const std::string program = resolve_program(options.control_program);
  if (program.empty()) {
    r.line = options.control_program + " not found" +
             (options.control_program.find('/') != std::string::npos ? "" : " on PATH") + ": no MPS daemon started";
    return r;
  }
  if (!options.driver_probe.empty() && !fs::exists(options.driver_probe, ec)) {
    r.line = "no NVIDIA driver (" + options.driver_probe + " is missing): no MPS daemon started";
    return r;
  }
  if (pipe_dir.size() > kMaxPipeDirBytes) {
    r.line = "pipe folder " + pipe_dir + " is longer than a Unix socket path allows (" +
             std::to_string(kMaxPipeDirBytes) + " bytes): no MPS daemon started";
    return r;
  }
  if (reachable(program, pipe_dir, options.timeout_s)) {
    r.ok = true;
    r.line = "an MPS daemon is already reachable at " + pipe_dir + ": left as it is";
    return r;
  }
  const bool created = !fs::exists(pipe_dir, ec);
  const std::string log_dir = given_log_dir.empty() ? (fs::path(pipe_dir) / "log").string() : given_log_dir;
  fs::create_directories(pipe_dir, ec);
  if (!ec) fs::create_directories(log_dir, ec);
  if (ec) {
    r.line = "cannot create " + pipe_dir + " or " + log_dir + ": " + ec.message() + ": no MPS daemon started";
    return r;
  }
  // After a successful -d the daemon is ours to stop; after a failed one, whatever runs is not.
  auto give_up = [&](const std::string& why, bool daemon_started) {
    if (daemon_started) (void)stop_daemon_at(program, pipe_dir, find_daemon(pipe_dir), options.timeout_s);
    if (created) fs::remove_all(pipe_dir, ec);
    r.line = why + ": no MPS daemon started";
    return r;
  };
  const ControlCall started = call_control(program, {"-d"}, "", pipe_dir, log_dir, options.timeout_s, false);
  if (!started.outcome.exited_zero()) return give_up(options.control_program + " -d " + outcome_text(started, options.timeout_s), false);
  if (!wait_reachable(program, pipe_dir, options.timeout_s)) {
    std::ostringstream os;
    os << "the daemon did not answer at " << pipe_dir << " within " << options.timeout_s << " s (see " << log_dir
       << "/control.log)";
    return give_up(os.str(), true);
  }
  const DaemonIdentity daemon = find_daemon(pipe_dir);
  const json record = {{"daemon", identity_json(daemon)}, {"log_dir", log_dir}, {"created_pipe_dir", created},
                       {"started_at", utc_now_iso8601()}, {"control_program", program}};
  try {
    write_file_atomic((fs::path(pipe_dir) / kCommandRecord).string(), record.dump(2) + "\n");
  } catch (const std::exception& e) {
    return give_up(std::string("cannot record the daemon: ") + e.what(), true);  // stop could not kill it
  }
  r.ok = true;
  std::ostringstream os;
  os << "started an MPS control daemon";
  if (daemon.pid > 0) os << " (pid " << daemon.pid << ")";
  os << ", pipe folder " << pipe_dir << ", log folder " << log_dir;
  r.line = os.str();
  return r;
}

MpsCommandResult stop_mps_daemon(const MpsOptions& options, const std::string& pipe_dir) {
  MpsCommandResult r;
  std::error_code ec;
  const std::string program = resolve_program(options.control_program);
  const json record = read_json_or_null(fs::path(pipe_dir) / kCommandRecord);
  const DaemonIdentity daemon = record.is_object() ? identity_from_json(record.value("daemon", json())) : DaemonIdentity{};
  const bool was_reachable = reachable(program, pipe_dir, options.timeout_s);
  std::ostringstream os;
  if (!was_reachable && !process_alive(daemon.pid, daemon.start_ticks)) {
    r.ok = true;
    os << "no MPS daemon was running at " << pipe_dir;
  } else {
    const StopResult result = stop_daemon_at(program, pipe_dir, daemon, options.timeout_s);
    r.ok = result == StopResult::quit || result == StopResult::killed || result == StopResult::not_running ||
           (result == StopResult::unknown && !reachable(program, pipe_dir, options.timeout_s));
    os << "MPS daemon at " << pipe_dir;
    if (daemon.pid > 0) os << " (pid " << daemon.pid << ")";
    os << " " << stop_result_text(result);
    if (result == StopResult::unknown) os << (r.ok ? ": no longer reachable" : ": still reachable");
  }
  if (record.is_object() && record.value("created_pipe_dir", false) && r.ok) {
    fs::remove_all(pipe_dir, ec);
    os << "; removed " << pipe_dir;
  } else if (record.is_object() && r.ok) {
    fs::remove(fs::path(pipe_dir) / kCommandRecord, ec);
  }
  r.line = os.str();
  return r;
}

MpsCommandResult query_mps_daemon(const MpsOptions& options, const std::string& pipe_dir) {
  MpsCommandResult r;
  const std::string program = resolve_program(options.control_program);
  if (program.empty()) {
    r.line = options.control_program + " not found: cannot ask the daemon at " + pipe_dir;
    return r;
  }
  r.ok = reachable(program, pipe_dir, options.timeout_s);
  const json record = read_json_or_null(fs::path(pipe_dir) / kCommandRecord);
  const DaemonIdentity daemon = record.is_object() ? identity_from_json(record.value("daemon", json())) : DaemonIdentity{};
  std::ostringstream os;
  os << "MPS daemon at " << pipe_dir << (r.ok ? " is reachable" : " is not reachable");
  if (r.ok && daemon.pid > 0) os << " (pid " << daemon.pid << ")";
  r.line = os.str();
  return r;
}

void install_cleanup_signal_handlers() {
  if (g_handlers_installed.exchange(1) != 0) return;
  struct sigaction sa {};
  sa.sa_handler = cleanup_handler;
  sigemptyset(&sa.sa_mask);
  for (int sig : kCleanupSignals) sigaddset(&sa.sa_mask, sig);  // one cleanup at a time per thread
  sa.sa_flags = SA_RESTART;
  for (int sig : kCleanupSignals) {
    struct sigaction old {};
    if (sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;  // nohup: keep ignoring
    sigaction(sig, &sa, nullptr);
  }
}

void set_graceful_interrupts(bool on) { g_graceful.store(on ? 1 : 0); }

int interrupt_requested() { return g_interrupted.load(); }

bool interrupt_cut_case_short() { return g_cut_short.load() != 0; }

void register_cleanup_process_group(int pgid) {
  TPB_CHECK(pgid > 1, "register_cleanup_process_group: bad process group " << pgid);
  for (auto& slot : g_cleanup_pgids)
    if (slot.load() == pgid) return;
  for (auto& slot : g_cleanup_pgids) {
    int expected = 0;
    if (slot.compare_exchange_strong(expected, pgid)) return;
  }
  TPB_FAIL("register_cleanup_process_group: more than " << kMaxCleanupGroups << " process groups registered");
}

void unregister_cleanup_process_group(int pgid) {
  for (auto& slot : g_cleanup_pgids) {
    int expected = pgid;
    slot.compare_exchange_strong(expected, 0);
  }
}

}  // namespace tpb
