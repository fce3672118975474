// The MPS session's async-signal-safe side and the controller's signal handling (see
// mps_cleanup.h and mps.h): the primitives, the handler's tables, the interrupt's three steps
// (finish the case, cut it short, quit) in cleanup_handler.
#include "suite/launch/mps.h"
#include "suite/launch/mps_cleanup.h"

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

namespace tpb {
namespace mps_detail {

namespace fs = std::filesystem;

namespace {

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

// A daemon may be our child: as a child subreaper (the launcher) this process inherits it when
// its launching parent exits. Reap it then, or it stays a zombie.
void reap_if_child(int pid) {
  int status;
  (void)waitpid(pid, &status, WNOHANG);
}

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

}  // namespace

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

bool process_alive(int pid, long long start_ticks) {
  if (pid <= 0) return false;
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  const ProcStat st = read_proc_stat(pid);
  if (!st.ok) return kill(pid, 0) == 0 || errno == EPERM;  // no /proc: trust kill
  if (st.state == 'Z' || st.state == 'X') return false;
  return start_ticks == 0 || st.start_ticks == start_ticks;
}

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

DaemonSlot g_daemon_slots[kMaxDaemonSlots];

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

}  // namespace mps_detail

using namespace mps_detail;

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
