// The launcher (controller side), see launcher.h. One group = world_size rank processes in a
// process group of their own, one listening Unix socket (abstract namespace), one connected
// socket per rank. A case is a poll() loop over those sockets with the case's deadline:
// it relays bootstrap all_gathers, collects results, and checks every few milliseconds
// whether a rank has exited (waitpid on our own pids only, never -1: the runner's process
// may have other children). The controller's signal handlers are suite/launch/mps.h's (they kill the
// registered rank groups first); a rank starts with the default ones.
//
// The controller makes itself a child subreaper, so that what a rank forks (a grandchild)
// is reparented to it when the rank dies and is reaped by waitpid(-pgid) after the kill.
//
// Failure handling is deliberately blunt: any failure (a rank's error message, a death, a
// timeout) kills the whole group, because the other ranks may be stuck inside a collective
// with the failed one. SIGTERM to the process group, a short grace, SIGKILL, then waitpid
// on every rank: nothing is left behind, and the next case starts a fresh group.
#include "suite/launch/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <map>
#include <optional>
#include <sstream>
#include <thread>
#include <utility>

#include "reference_engine/comm/host_layout.h"
#include "suite/launch/collective_progress.h"
#include "suite/launch/control_socket.h"
#include "suite/launch/host_facts.h"
#include "suite/launch/mps.h"
#include "tpb/check.h"

extern char** environ;

namespace tpb {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// How long a group gets to leave after SIGTERM (or after "exit") before SIGKILL, seconds.
// Workers hold no state worth saving, so this only lets well-behaved ones exit on their own.
constexpr double kTermGraceS = 0.5;
// Granularity of the child-exit check inside the poll loop, milliseconds.
constexpr int kPollSliceMs = 20;
// A rank whose socket closed gets this long to show up in waitpid with its exit status (a
// job's rank: for the job to notice and end).
constexpr double kExitStatusWaitS = 1.0;
// A job's rank whose connection closed: how long its launcher gets to notice and end the job
// by itself (Open MPI aborts the job when a rank dies, and says how the rank ended).
constexpr double kJobExitWaitS = 3.0;
// How long mpirun/srun get after SIGTERM to end their ranks (on every host) before SIGKILL.
constexpr double kJobTermGraceS = 3.0;
// How long a job's rank processes on this host, killed by pid, get to disappear (together).
constexpr double kLeftoverKillWaitS = 3.0;

std::atomic<unsigned> g_group_counter{0};

// A new group's id, "tpb<controller pid>-g<n>": it names the group's control socket, its shared
// memory and its logs, and remove_shared_memory_of_dead_controllers reads the pid back from it.
std::string next_group_id() { return "tpb" + std::to_string(getpid()) + "-g" + std::to_string(g_group_counter++); }

// Signal names without sigabbrev_np (glibc >= 2.32 only).
const char* signal_name(int sig) {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGHUP: return "SIGHUP";
    case SIGQUIT: return "SIGQUIT";
    case SIGPIPE: return "SIGPIPE";
    case SIGTRAP: return "SIGTRAP";
    case SIGSYS: return "SIGSYS";
    case SIGALRM: return "SIGALRM";
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
    case SIGXCPU: return "SIGXCPU";
    case SIGXFSZ: return "SIGXFSZ";
    default: return nullptr;
  }
}

std::string signal_text(int sig) {
  std::ostringstream os;
  os << "killed by signal " << sig;
  if (const char* name = signal_name(sig)) os << " (" << name << ")";
  return os.str();
}

std::string wait_status_text(int status) {
  if (WIFSIGNALED(status)) return signal_text(WTERMSIG(status));
  if (WIFEXITED(status)) {
    return "exited with status " + std::to_string(WEXITSTATUS(status)) +
           (WEXITSTATUS(status) == 0 ? " before returning a result" : "");
  }
  return "stopped with wait status " + std::to_string(status);
}

// The last `lines` lines of a file (reads at most its last 64 KiB).
std::vector<std::string> tail_lines(const std::string& path, int lines) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  const std::streamoff start = std::max<std::streamoff>(0, size - (64 << 10));
  in.seekg(start);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> all;
  std::istringstream is(text);
  for (std::string line; std::getline(is, line);) all.push_back(line);
  if (start > 0 && !all.empty()) all.erase(all.begin());  // the first line is cut
  if (static_cast<int>(all.size()) > lines) all.erase(all.begin(), all.end() - lines);
  for (auto& l : all) {
    if (l.size() > 400) l = l.substr(0, 400) + " [...]";
  }
  return all;
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// 128 random bits as hex: the token a job's rank presents (launcher.h).
std::string random_token() {
  std::ifstream urandom("/dev/urandom", std::ios::binary);
  std::string bytes(16, '\0');
  urandom.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  TPB_CHECK(urandom.gcount() == static_cast<std::streamsize>(bytes.size()), "launcher: cannot read /dev/urandom for the control token");
  return control::to_hex(bytes);
}

// Whether process `pid` has `entry` ("TPB_GROUP_ID=...") in its environment: a rank of ours,
// not a process that reused its pid.
bool environment_has(int pid, const std::string& entry) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  for (std::string e; std::getline(in, e, '\0');)
    if (e == entry) return true;
  return false;
}

// POSIX shared memory named after the groups of a controller that is gone
// ("tpb<pid>-g<n>-...", /dev/shm): a controller killed with SIGKILL cleans nothing up, and
// its ranks die with it (PR_SET_PDEATHSIG) leaving their shm communicators' segments. The next
// launcher on the host removes them. A pid that is alive (or not ours to signal: EPERM) keeps
// its names, even if it was reused by another program: only the dead are swept.
void remove_shared_memory_of_dead_controllers() {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", ec)) {
    const std::string name = entry.path().filename().string();
    std::size_t digits = 0;
    while (3 + digits < name.size() && std::isdigit(static_cast<unsigned char>(name[3 + digits]))) ++digits;
    if (name.rfind("tpb", 0) != 0 || digits == 0 || digits > 9 || name.compare(3 + digits, 2, "-g") != 0) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(name.substr(3, digits)));
    if (pid > 0 && kill(pid, 0) != 0 && errno == ESRCH) shm_unlink(("/" + name).c_str());
  }
}

}  // namespace

struct Launcher::Group {
  struct Rank {
    pid_t pid = -1;
    int fd = -1;                 // control socket; -1 until the rank connects
    control::LineReader reader;  // bytes read from fd, not yet a full line
    std::string outbox;          // bytes queued for fd
    std::string log_path;        // this rank's stdout + stderr
    bool reaped = false;         // waitpid has returned its status
    int wait_status = 0;         // valid when reaped
    bool eof = false;            // the socket closed
    std::optional<json> result;  // of the current case
    int job_pid_of_rank = -1;    // a job's rank: its pid on its host, from its hello
    std::string host, host_id;   // where it runs (host_id: TPB_HOST_ID's, under virtual hosts)
    json host_report;            // its host's facts, reported and not yet in a CaseRun's host_reports
                                 // (suite/launch/host_facts.h), else null

    // The control connection has ended: seen at a read, or a peek finds the stream closed.
    bool connection_closed() const {
      char byte;
      return eof || (fd >= 0 && recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0);
    }
  };
  // A job's connection that has not presented the token yet.
  struct Pending {
    int fd = -1;
    control::LineReader reader;
  };

  std::string key;
  int world_size = 0;
  std::string id;           // "tpb<controller pid>-g<n>": unique among live groups on the host
  std::string address;      // "@<id>-ctl"
  int listen_fd = -1;
  pid_t pgid = 0;
  std::vector<Rank> ranks;
  std::map<std::uint64_t, std::vector<std::optional<std::string>>> gathers;  // seq -> hex per rank
  std::unique_ptr<ProgressPage> progress;  // the ranks' collective counts (suite/launch/collective_progress.h);
                                           // null for a job (its ranks may be on other hosts)
  // mpirun/srun only:
  LauncherKind kind = LauncherKind::fork;
  pid_t job_pid = -1;         // mpirun/srun, leader of its own process group (pgid)
  bool job_reaped = false;
  int job_status = 0;         // valid when job_reaped
  std::string job_log;        // its stdout + stderr
  std::vector<std::string> command;  // its argv
  std::string token;          // what a rank's hello must carry
  std::vector<Pending> pending;

  ~Group() {
    if (pgid > 0) unregister_cleanup_process_group(pgid);
    for (auto& r : ranks) {
      if (r.fd >= 0) close(r.fd);
    }
    for (auto& p : pending) close(p.fd);
    if (listen_fd >= 0) close(listen_fd);
  }

  std::vector<int> pids() const {
    std::vector<int> p;
    for (const auto& r : ranks) p.push_back(job_pid > 0 ? r.job_pid_of_rank : r.pid);
    return p;
  }

  // Non-blocking reap of whatever has exited. Returns the ranks newly found dead.
  std::vector<int> reap_exited() {
    std::vector<int> dead;
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      auto& r = ranks[i];
      if (r.reaped || r.pid <= 0) continue;
      int status = 0;
      const pid_t w = waitpid(r.pid, &status, WNOHANG);
      if (w == r.pid || (w < 0 && errno == ECHILD)) {
        r.reaped = true;
        r.wait_status = status;
        dead.push_back(static_cast<int>(i));
      }
    }
    if (job_pid > 0 && !job_reaped) {
      int status = 0;
      const pid_t w = waitpid(job_pid, &status, WNOHANG);
      if (w == job_pid || (w < 0 && errno == ECHILD)) {
        job_reaped = true;
        job_status = status;
      }
    }
    return dead;
  }

  bool all_reaped() const {
    return (job_pid <= 0 || job_reaped) &&
           std::all_of(ranks.begin(), ranks.end(), [](const Rank& r) { return r.reaped || r.pid <= 0; });
  }

  // Waits up to `seconds` for every rank to exit on its own, reaping as they go.
  void wait_all(double seconds) {
    const auto start = Clock::now();
    while (!all_reaped() && seconds_since(start) < seconds) {
      reap_exited();
      if (!all_reaped()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  // SIGTERM to the whole process group (grandchildren included), grace, SIGKILL, reap all.
  // A job: its ranks' connections close first (they leave on that, suite/workloads/worker.cpp), its
  // launcher gets the longer grace to end them on every host, and what is left of them on
  // this host is killed by pid.
  void kill_all() {
    if (job_pid > 0) {
      for (auto& r : ranks)
        if (r.fd >= 0) {
          close(r.fd);
          r.fd = -1;
        }
    }
    if (pgid > 0 && !all_reaped()) {
      kill(-pgid, SIGTERM);
      wait_all(job_pid > 0 ? kJobTermGraceS : kTermGraceS);
    }
    if (pgid > 0) kill(-pgid, SIGKILL);  // also whatever a rank left behind in its group
    for (auto& r : ranks) {
      if (r.reaped || r.pid <= 0) continue;
      int status = 0;
      pid_t w;
      do {
        w = waitpid(r.pid, &status, 0);
      } while (w < 0 && errno == EINTR);
      r.reaped = true;
      r.wait_status = status;
    }
    // Orphans of the ranks (their own children) were reparented to this process, a child
    // subreaper (see the constructor), and are dead or dying from the SIGKILL: reap them too.
    if (pgid > 0) {
      int status = 0;
      while (waitpid(-pgid, &status, 0) > 0 || errno == EINTR) {
      }
    }
    if (job_pid > 0 && !job_reaped) {
      int status = 0;
      while (waitpid(job_pid, &status, 0) < 0 && errno == EINTR) {
      }
      job_reaped = true;
      job_status = status;
    }
    kill_job_leftovers();
    remove_shared_memory();
  }

  // A job's ranks on this host that outlived their job (a launcher killed before it could
  // end them): SIGKILL by pid, those whose environment names this group only, and to their
  // process groups (Open MPI starts each rank as a group leader: what a rank forked, e.g.
  // LeakSanitizer's tracer in a sanitized build, is in it; a pid in use as a group id is
  // never reused, so the group is the rank's). Then everything of theirs that became this
  // process's children (a child subreaper) is reaped. Ranks on other hosts are their
  // launcher's, and leave by themselves when their connection or their parent goes
  // (suite/workloads/worker.cpp).
  void kill_job_leftovers() {
    if (job_pid <= 0) return;
    const std::string here = this_host_name(), mark = "TPB_GROUP_ID=" + id;
    std::vector<pid_t> local;
    for (const auto& r : ranks)
      if (r.job_pid_of_rank > 0 && r.host == here) {
        if (environment_has(r.job_pid_of_rank, mark)) kill(r.job_pid_of_rank, SIGKILL);
        kill(-r.job_pid_of_rank, SIGKILL);
        local.push_back(r.job_pid_of_rank);
      }
    const auto start = Clock::now();
    for (bool pending = !local.empty(); pending && seconds_since(start) < kLeftoverKillWaitS;) {
      pending = false;
      for (pid_t pid : local) {
        int status = 0;
        waitpid(pid, &status, WNOHANG);
        pid_t w;
        while ((w = waitpid(-pid, &status, WNOHANG)) > 0) {
        }
        // A child of ours still alive in that group, or the rank not gone yet (still dying,
        // or a zombie about to be ours): look again.
        pending = pending || w == 0 || kill(pid, 0) == 0;
      }
      if (pending) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  // POSIX shared memory that the group's ranks named after the group id (the shm
  // communicator's segments, reference_engine/comm/shm/shm_communicator.h) and could not
  // unlink themselves: a rank killed while its peers had not all mapped a segment leaves the
  // name in /dev/shm (16 MiB each, seen after planted-fault runs). Every rank is dead here.
  void remove_shared_memory() const {
    std::error_code ec;
    const std::string prefix = id + "-";
    for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", ec)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind(prefix, 0) == 0) shm_unlink(("/" + name).c_str());
    }
  }

  void queue(int rank, const json& message) { ranks[static_cast<std::size_t>(rank)].outbox += control::encode(message); }

  // Sends what the socket takes now. False when the peer is gone.
  bool flush(Rank& r) {
    while (!r.outbox.empty()) {
      const ssize_t n = send(r.fd, r.outbox.data(), r.outbox.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
      if (n <= 0) return false;
      r.outbox.erase(0, static_cast<std::size_t>(n));
    }
    return true;
  }
};

nlohmann::json launcher_to_json(const LauncherOptions& o) {
  return {{"kind", launcher_name(o.kind)},
          {"hosts", hosts_text(o.hosts)},
          {"launcher_args", o.launcher_args},
          {"virtual_hosts", o.virtual_hosts},
          {"control_host", o.control_host}};
}

LauncherOptions launcher_from_json(const nlohmann::json& j, const std::string& file) {
  LauncherOptions o;
  try {
    o.kind = parse_launcher(j.at("kind").get<std::string>(), file + ": $.launcher.kind");
    const std::string hosts = j.at("hosts").get<std::string>();
    if (!hosts.empty()) o.hosts = parse_hosts(hosts, file + ": $.launcher.hosts");
    o.launcher_args = j.at("launcher_args").get<std::vector<std::string>>();
    o.virtual_hosts = j.at("virtual_hosts").get<int>();
    o.control_host = j.at("control_host").get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    TPB_INPUT_FAIL(file << ": $.launcher: expected kind, hosts, launcher_args, virtual_hosts and control_host as tpbench "
                           "writes them (" << e.what() << ")");
  }
  return o;
}

Launcher::Launcher(LauncherOptions options) : options_(std::move(options)) {
  if (options_.log_dir.empty()) {
    options_.log_dir =
        (std::filesystem::temp_directory_path() / ("tpbench-logs-" + std::to_string(getpid()))).string();
  }
  std::error_code ec;
  std::filesystem::create_directories(options_.log_dir, ec);
  TPB_CHECK(!ec, "launcher: cannot create log folder '" << options_.log_dir << "': " << ec.message());
  TPB_INPUT_CHECK(!options_.worker_binary.empty(), "launcher: no worker binary given");
  // A rank's own children outlive it when it is killed; as a subreaper this process inherits
  // them and can reap them, instead of leaving zombies to whatever init the machine has.
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  remove_shared_memory_of_dead_controllers();
}

Launcher::~Launcher() {
  try {
    shutdown();
  } catch (...) {
    // A destructor must not throw; shutdown's only throwing paths are allocations.
  }
}

std::vector<int> Launcher::worker_pids() const {
  std::vector<int> pids;
  if (!group_) return pids;
  for (const auto& r : group_->ranks) {
    if (!r.reaped) pids.push_back(r.pid);
  }
  return pids;
}

void Launcher::shutdown() {
  if (!group_) return;
  Group& g = *group_;
  // Ask politely: connected, idle workers leave their loop on "exit" (or on EOF).
  for (std::size_t i = 0; i < g.ranks.size(); ++i) {
    auto& r = g.ranks[i];
    if (r.fd < 0 || r.reaped) continue;
    g.queue(static_cast<int>(i), {{"type", "exit"}});
    g.flush(r);
    ::shutdown(r.fd, SHUT_WR);
  }
  // A job's ranks finalise MPI and its launcher tears down after them: give it the time.
  g.wait_all(g.job_pid > 0 ? kJobExitWaitS : kTermGraceS);
  g.kill_all();
  group_.reset();
}

namespace {

// What a child does between fork and exec: only async-signal-safe calls. A rank (fork
// launcher) keeps `keep_fd`, its progress page, and execs `file` as a path; a job launcher
// (mpirun, srun) keeps nothing (-1) and is looked up on PATH.
[[noreturn]] void exec_child(const char* file, char* const* argv, char* const* envp, int log_fd, int null_fd,
                             int keep_fd, bool search_path, pid_t pgid, pid_t controller, const sigset_t* parent_mask,
                             const char* failure) {
  // The controller's cleanup handlers (suite/launch/mps.h) are the controller's: a rank signalled
  // between fork and exec must die of the signal, not quit the run's MPS daemon. The signals
  // were blocked around fork; default them, then restore the controller's mask.
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigaction(sig, &dfl, nullptr);
  }
  sigprocmask(SIG_SETMASK, parent_mask, nullptr);
  setpgid(0, pgid);  // pgid 0: this child leads a new group
  // If the controller dies without shutting down, its children die with it.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != controller) _exit(125);
  dup2(null_fd, STDIN_FILENO);
  dup2(log_fd, STDOUT_FILENO);
  dup2(log_fd, STDERR_FILENO);
  if (keep_fd >= 0) fcntl(keep_fd, F_SETFD, 0);  // the one descriptor a rank keeps across exec (TPB_PROGRESS_FD)
  if (search_path)
    execvpe(file, argv, envp);
  else
    execve(file, argv, envp);
  (void)!write(STDERR_FILENO, failure, strlen(failure));
  (void)!write(STDERR_FILENO, ": ", 2);
  const char* err = strerror(errno);  // not async-signal-safe in theory; the child ends here anyway
  (void)!write(STDERR_FILENO, err, strlen(err));
  (void)!write(STDERR_FILENO, "\n", 1);
  _exit(127);
}

// fork() with the controller's cleanup signals blocked, so that none lands in the child
// before exec_child defaults them; the child runs child(mask before) and never returns.
// The parent's mask is restored; the pid, or -1 with errno.
template <typename Child>
pid_t fork_child(Child child) {
  sigset_t cleanup_signals, before;
  sigemptyset(&cleanup_signals);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&cleanup_signals, sig);
  sigprocmask(SIG_BLOCK, &cleanup_signals, &before);
  const pid_t pid = fork();
  if (pid == 0) child(&before);
  const int fork_errno = errno;
  sigprocmask(SIG_SETMASK, &before, nullptr);
  errno = fork_errno;
  return pid;
}

}  // namespace

CaseRun Launcher::run_case(const std::string& group_key, int world_size, const json& case_spec, double timeout_s,
                           const RankPlacement* placement) {
  TPB_INPUT_CHECK(world_size >= 1, "launcher: world size must be at least 1, got " << world_size);
  TPB_INPUT_CHECK(timeout_s > 0, "launcher: case timeout must be positive, got " << timeout_s << " s");
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  CaseRun run;

  if (group_ && (group_->key != group_key || group_->world_size != world_size)) shutdown();
  // A worker that died while idle between cases leaves a group that cannot run a case:
  // replace it (its death belonged to no case).
  // (A job's rank on another host is seen dead by its closed connection.)
  if (group_ && (!group_->reap_exited().empty() || group_->job_reaped ||
                 std::any_of(group_->ranks.begin(), group_->ranks.end(),
                             [](const Group::Rank& r) { return r.connection_closed(); }))) {
    group_->kill_all();
    group_.reset();
  }
  if (!group_) start_group(group_key, world_size, placement);
  Group& g = *group_;
  run.command = g.command;
  for (int r = 0; r < world_size; ++r) {
    g.ranks[static_cast<std::size_t>(r)].result.reset();
    g.queue(r, {{"type", "case"}, {"spec", case_spec}});
  }

  // The loop ends with every result in, or with a failure message and the ranks to blame.
  std::string failure;
  std::vector<int> blamed;
  auto fail = [&](std::string message, std::vector<int> ranks) {
    if (failure.empty()) {
      failure = std::move(message);
      blamed = std::move(ranks);
    }
  };
  // An ended job's launcher output names the rank that failed (Open MPI's "process rank N",
  // Slurm's "task N:"): that rank, where it is one of this job's and gave no result.
  auto rank_the_launcher_names = [&]() -> std::optional<int> {
    const std::optional<int> named = rank_named_by_launcher(g.kind, tail_lines(g.job_log, 64));
    if (named && *named >= 0 && *named < world_size && !g.ranks[static_cast<std::size_t>(*named)].result) return named;
    return std::nullopt;
  };

  while (failure.empty()) {
    const bool all_results =
        std::all_of(g.ranks.begin(), g.ranks.end(), [](const Group::Rank& r) { return r.result.has_value(); });
    if (all_results) break;

    const std::vector<int> dead = g.reap_exited();
    if (!dead.empty()) {
      fail("rank " + std::to_string(dead[0]) + ": " + wait_status_text(g.ranks[static_cast<std::size_t>(dead[0])].wait_status),
           {dead[0]});
      break;
    }
    if (g.job_reaped) {
      // The job ended with results missing: blame the rank its launcher names (the one that
      // failed first; it ends the others), else the ranks whose connection closed, else every
      // rank that has not answered.
      std::vector<int> closed, missing;
      for (int r = 0; r < world_size; ++r) {
        auto& rk = g.ranks[static_cast<std::size_t>(r)];
        if (rk.result) continue;
        missing.push_back(r);
        if (rk.fd >= 0 && rk.connection_closed()) closed.push_back(r);
      }
      const std::optional<int> named = rank_the_launcher_names();
      const std::vector<int> blame = named ? std::vector<int>{*named} : closed.empty() ? missing : closed;
      fail(std::string(launcher_name(g.kind)) + " " + wait_status_text(g.job_status) + " with no result from " +
               ranks_text(missing) + (closed.empty() ? "" : " (" + ranks_text(closed) + " closed the control connection)") +
               (named ? "; it names rank " + std::to_string(*named) : ""),
           blame);
      break;
    }
    const double remaining_s = std::chrono::duration<double>(deadline - Clock::now()).count();
    if (remaining_s <= 0 && !g.progress) {
      // A job's ranks keep no progress page here (they may be on other hosts); those on this
      // host can still be seen stopped.
      std::vector<int> missing, unconnected, stopped;
      const std::string here = this_host_name();
      for (int r = 0; r < world_size; ++r) {
        const auto& rk = g.ranks[static_cast<std::size_t>(r)];
        if (!rk.result) missing.push_back(r);
        if (rk.fd < 0) unconnected.push_back(r);
        if (!rk.result && rk.job_pid_of_rank > 0 && rk.host == here && process_state(rk.job_pid_of_rank) == 'T')
          stopped.push_back(r);
      }
      std::ostringstream os;
      os << "timeout after " << std::fixed << std::setprecision(1) << timeout_s << " s waiting for " << ranks_text(missing);
      if (!stopped.empty()) os << ": " << ranks_text(stopped) << (stopped.size() == 1 ? " is" : " are") << " stopped (process state T)";
      if (!unconnected.empty()) os << " (" << ranks_text(unconnected) << " never connected to the controller)";
      fail(os.str(), stopped.empty() ? missing : stopped);
      break;
    }
    if (remaining_s <= 0) {
      // Every silent rank may be waiting inside one collective: name the one that did not
      // arrive there (suite/launch/collective_progress.h), not all of them.
      std::vector<int> missing;
      std::vector<RankProgress> progress;
      for (int r = 0; r < world_size; ++r) {
        const auto& rk = g.ranks[static_cast<std::size_t>(r)];
        if (!rk.result) missing.push_back(r);
        const CollectiveProgressSlot& slot = g.progress->slot(r);
        progress.push_back({r, rk.result.has_value(), process_state(rk.pid), slot.entered.load(), slot.left.load(),
                            static_cast<CollectiveOp>(slot.op.load()), 0});
      }
      for (const auto& [seq, slots] : g.gathers)  // the bootstrap all_gathers not yet answered
        for (std::size_t r = 0; r < slots.size(); ++r)
          if (slots[r]) progress[r].bootstrap_wait = seq + 1;
      const HangDiagnosis hang = diagnose_hang(progress);
      std::ostringstream os;
      os << "timeout after " << std::fixed << std::setprecision(1) << timeout_s << " s waiting for "
         << ranks_text(hang.blamed) << ": " << hang.text;
      if (hang.blamed != missing) os << " (no answer from " << ranks_text(missing) << ")";
      fail(os.str(), hang.blamed);
      break;
    }

    std::vector<pollfd> fds;
    std::vector<int> fd_rank;  // -1 for the listening socket, -2 for a job's connection not yet admitted
    const bool all_connected =
        std::all_of(g.ranks.begin(), g.ranks.end(), [](const Group::Rank& r) { return r.fd >= 0; });
    // A job's port is reachable from the network: strangers are accepted and turned away
    // (admit_pending) for as long as the group lives, not left in the backlog.
    if (!all_connected || g.job_pid > 0) {
      fds.push_back({g.listen_fd, POLLIN, 0});
      fd_rank.push_back(-1);
    }
    for (const auto& p : g.pending) {
      fds.push_back({p.fd, POLLIN, 0});
      fd_rank.push_back(-2);
    }
    for (int r = 0; r < world_size; ++r) {
      const auto& rk = g.ranks[static_cast<std::size_t>(r)];
      if (rk.fd < 0 || rk.eof) continue;
      fds.push_back({rk.fd, static_cast<short>(POLLIN | (rk.outbox.empty() ? 0 : POLLOUT)), 0});
      fd_rank.push_back(r);
    }
    const int wait_ms = std::max(1, std::min(kPollSliceMs, static_cast<int>(remaining_s * 1000) + 1));
    const int n = poll(fds.data(), fds.size(), wait_ms);
    if (n < 0 && errno != EINTR) TPB_FAIL("launcher: poll failed: " << std::strerror(errno));
    if (n <= 0) continue;

    for (std::size_t k = 0; k < fds.size() && failure.empty(); ++k) {
      if (fds[k].revents == 0) continue;
      if (fd_rank[k] == -1) accept_ranks();
      if (fd_rank[k] == -2) admit_pending(fail);
      if (fd_rank[k] < 0) continue;
      const int r = fd_rank[k];
      auto& rk = g.ranks[static_cast<std::size_t>(r)];
      if ((fds[k].revents & POLLOUT) && !g.flush(rk)) rk.eof = true;
      if (fds[k].revents & (POLLIN | POLLHUP | POLLERR)) {
        char buf[65536];
        const ssize_t got = recv(rk.fd, buf, sizeof buf, MSG_DONTWAIT);
        if (got > 0) {
          rk.reader.append(buf, static_cast<std::size_t>(got));
        } else if (got == 0 || (errno != EAGAIN && errno != EINTR && errno != EWOULDBLOCK)) {
          rk.eof = true;
        }
      }
      handle_lines(r, fail, [&] { return !failure.empty(); });
    }
    // A closed socket (seen by a read or a failed send, on any rank) means the rank is
    // exiting: give it a moment to show up in waitpid with its status.
    for (int r = 0; r < world_size && failure.empty(); ++r) {
      auto& rk = g.ranks[static_cast<std::size_t>(r)];
      if (!rk.eof) continue;
      const auto eof_at = Clock::now();
      const bool job = g.job_pid > 0;
      // A forked rank's own exit; for a job's rank, the job's (its launcher ends it).
      const auto ended = [&] { return job ? g.job_reaped : rk.reaped; };
      while (!ended() && seconds_since(eof_at) < (job ? kJobExitWaitS : kExitStatusWaitS)) {
        g.reap_exited();
        if (!ended()) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      if (job) {
        // How the rank ended is in the job's output (appended below) and the rank's log. The
        // launcher ends the other ranks when one dies, so several connections may have closed
        // by now: the rank the launcher names is the one that died first, not the lowest.
        int who = r;
        if (g.job_reaped)
          if (const std::optional<int> named = rank_the_launcher_names()) who = *named;
        fail("rank " + std::to_string(who) + ": closed its control connection" +
                 (g.job_reaped ? "; " + std::string(launcher_name(g.kind)) + " " + wait_status_text(g.job_status) : ""),
             {who});
      } else {
        fail("rank " + std::to_string(r) + ": " + (rk.reaped ? wait_status_text(rk.wait_status) : "closed its control connection"),
             {r});
      }
    }
  }

  run.pids = g.pids();
  run.hosts = json::array();
  for (const auto& r : g.ranks)
    run.hosts.push_back(r.host.empty() ? json(nullptr) : json({{"host", r.host}, {"host_id", r.host_id}}));
  for (auto& r : g.ranks) {
    if (r.host_report.is_null()) continue;
    run.host_reports.push_back(std::exchange(r.host_report, nullptr));  // handed over once
  }
  if (failure.empty()) {
    run.ok = true;
    for (auto& r : g.ranks) run.ranks.push_back(std::move(*r.result));
  } else {
    // Kill first, then read the logs: a dead process has flushed everything it wrote.
    g.kill_all();
    std::ostringstream os;
    os << failure;
    for (int r : blamed) {
      const auto& path = g.ranks[static_cast<std::size_t>(r)].log_path;
      const auto lines = tail_lines(path, options_.stderr_tail_lines);
      if (lines.empty()) {
        os << "\n--- rank " << r << " wrote nothing to stderr (" << path << ") ---";
      } else {
        os << "\n--- last " << lines.size() << " lines of rank " << r << " stderr (" << path << ") ---";
        for (const auto& l : lines) os << "\n" << l;
      }
    }
    if (!g.job_log.empty()) {
      const auto lines = tail_lines(g.job_log, options_.stderr_tail_lines);
      if (!lines.empty()) {
        os << "\n--- last " << lines.size() << " lines of " << launcher_name(g.kind) << " output (" << g.job_log << ") ---";
        for (const auto& l : lines) os << "\n" << l;
      }
    }
    run.error = os.str();
    run.failed_ranks = blamed;
    group_.reset();
  }
  run.wall_s = seconds_since(start);
  return run;
}

void Launcher::handle_message(int rank, const json& message,
                              const std::function<void(std::string, std::vector<int>)>& fail) {
  Group& g = *group_;
  auto& rk = g.ranks[static_cast<std::size_t>(rank)];
  const std::string prefix = "rank " + std::to_string(rank) + ": ";
  if (!message.is_object() || !message.contains("type") || !message["type"].is_string()) {
    fail(prefix + "control message without a type: " + message.dump().substr(0, 200), {rank});
    return;
  }
  const std::string type = message["type"];
  if (type == "hello") return;  // identity comes from the socket's peer credentials
  if (type == "host_facts") {
    if (!message.contains("facts") || !message["facts"].is_object() || !message.contains("pid") ||
        !message["pid"].is_number_integer()) {
      fail(prefix + "malformed host_facts message: " + message.dump().substr(0, 200), {rank});
      return;
    }
    rk.host_report = host_report(rk.host_id, g.id, rank, message["pid"].get<int>(), message["facts"]);
    return;
  }
  if (type == "result") {
    if (!message.contains("result") || !message["result"].is_object()) {
      fail(prefix + "result message without a result object", {rank});
      return;
    }
    rk.result = message["result"];
    return;
  }
  if (type == "error") {
    fail(prefix + message.value("message", std::string("(no message)")), {rank});
    return;
  }
  if (type == "allgather") {
    if (!message.contains("seq") || !message["seq"].is_number_unsigned() || !message.contains("data") ||
        !message["data"].is_string()) {
      fail(prefix + "malformed allgather message: " + message.dump().substr(0, 200), {rank});
      return;
    }
    const auto seq = message["seq"].get<std::uint64_t>();
    auto& slots = g.gathers[seq];
    slots.resize(static_cast<std::size_t>(g.world_size));
    auto& slot = slots[static_cast<std::size_t>(rank)];
    if (slot) {
      fail(prefix + "sent all_gather #" + std::to_string(seq) + " twice", {rank});
      return;
    }
    slot = message["data"].get<std::string>();
    if (std::all_of(slots.begin(), slots.end(), [](const auto& s) { return s.has_value(); })) {
      json data = json::array();
      for (auto& s : slots) data.push_back(std::move(*s));
      const json reply = {{"type", "allgather"}, {"seq", seq}, {"data", std::move(data)}};
      for (int r = 0; r < g.world_size; ++r) {
        g.queue(r, reply);
        auto& other = g.ranks[static_cast<std::size_t>(r)];
        if (other.fd >= 0 && !g.flush(other)) other.eof = true;
      }
      g.gathers.erase(seq);
    }
    return;
  }
  fail(prefix + "unknown control message type '" + type + "'", {rank});
}

void Launcher::accept_ranks() {
  Group& g = *group_;
  for (;;) {
    const int fd = accept4(g.listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;  // EAGAIN: nothing more pending (other errors: retried next round)
    if (g.job_pid > 0) {  // TCP: who it is comes with the token in its hello (admit_pending)
      g.pending.push_back({fd, {}});
      continue;
    }
    // The abstract namespace is visible to every process in the network namespace: accept
    // only our own children, and know which rank each is from its pid.
    ucred cred{};
    socklen_t len = sizeof cred;
    int rank = -1;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
      for (std::size_t i = 0; i < g.ranks.size(); ++i) {
        if (g.ranks[i].pid == cred.pid && g.ranks[i].fd < 0) rank = static_cast<int>(i);
      }
    }
    if (rank < 0) {
      close(fd);
      continue;
    }
    auto& rk = g.ranks[static_cast<std::size_t>(rank)];
    rk.fd = fd;
    if (!g.flush(rk)) rk.eof = true;
  }
}

void Launcher::admit_pending(const std::function<void(std::string, std::vector<int>)>& fail) {
  Group& g = *group_;
  for (std::size_t i = 0; i < g.pending.size();) {
    auto& p = g.pending[i];
    char buf[4096];
    const ssize_t got = recv(p.fd, buf, sizeof buf, MSG_DONTWAIT);
    if (got > 0) p.reader.append(buf, static_cast<std::size_t>(got));
    std::string line;
    const bool closed = got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR && errno != EWOULDBLOCK);
    // Anything but a well-formed hello with the token, for a rank not yet connected, is closed
    // unheard: the port is reachable from the network. A hello has a few hundred bytes.
    if (!p.reader.next_line(line)) {
      if (closed || p.reader.buffered_bytes() > 4096) {
        close(p.fd);
        g.pending.erase(g.pending.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
      continue;
    }
    const json hello = json::parse(line, nullptr, false);
    auto text = [&](const char* key) {
      return hello.is_object() && hello.contains(key) && hello[key].is_string() ? hello[key].get<std::string>() : std::string();
    };
    const bool valid = text("type") == "hello" && text("token") == g.token && hello.contains("rank") && hello["rank"].is_number_integer() && hello.contains("pid") &&
                       hello["pid"].is_number_integer();
    const int rank = valid ? hello["rank"].get<int>() : -1;
    if (!valid || rank < 0 || rank >= g.world_size || g.ranks[static_cast<std::size_t>(rank)].fd >= 0) {
      close(p.fd);
      g.pending.erase(g.pending.begin() + static_cast<std::ptrdiff_t>(i));
      continue;
    }
    auto& rk = g.ranks[static_cast<std::size_t>(rank)];
    rk.fd = p.fd;
    rk.job_pid_of_rank = hello["pid"].get<int>();
    rk.host = text("host");
    rk.host_id = text("host_id").empty() ? rk.host : text("host_id");
    rk.reader = std::move(p.reader);  // whatever followed the hello
    g.pending.erase(g.pending.begin() + static_cast<std::ptrdiff_t>(i));
    if (!g.flush(rk)) rk.eof = true;
    // Messages that came in the same read as the hello.
    if (!handle_lines(rank, fail, [] { return false; })) return;
  }
}

bool Launcher::handle_lines(int rank, const std::function<void(std::string, std::vector<int>)>& fail,
                            const std::function<bool()>& failed) {
  auto& rk = group_->ranks[static_cast<std::size_t>(rank)];
  for (std::string line; !failed() && rk.reader.next_line(line);) {
    const json message = json::parse(line, nullptr, false);
    if (message.is_discarded()) {
      fail("rank " + std::to_string(rank) + ": malformed control message: " + line.substr(0, 200), {rank});
      return false;
    }
    handle_message(rank, message, fail);
  }
  return true;
}

void Launcher::start_job(const std::string& group_key, int world_size) {
  auto g = std::make_unique<Group>();
  g->key = group_key;
  g->world_size = world_size;
  g->kind = options_.kind;
  g->id = next_group_id();
  // Every rank on this host (mpirun without --hosts): loopback only. Otherwise every interface,
  // and the ranks are told this host's name (or --control-host's address).
  const bool local = options_.hosts.empty() && options_.kind == LauncherKind::mpirun;
  const std::string advertised = !options_.control_host.empty() ? options_.control_host : local ? "127.0.0.1" : this_host_name();
  int port = 0;
  g->listen_fd = control::listen_tcp(local ? "127.0.0.1" : "0.0.0.0", world_size + 4, port);
  g->token = random_token();
  g->ranks.resize(static_cast<std::size_t>(world_size));
  for (int r = 0; r < world_size; ++r) g->ranks[static_cast<std::size_t>(r)].log_path = rank_log_path(options_.log_dir, g->id, r);
  g->job_log = (std::filesystem::path(options_.log_dir) / (g->id + "-" + launcher_name(options_.kind) + ".log")).string();

  // The job's environment: this process's (less what launchers set), plus where the controller
  // is. Every TPB_ variable is forwarded to the ranks on every host.
  std::vector<std::string> env = inherited_environment(environ, false);
  env.push_back(std::string("TPB_LAUNCHER=") + launcher_name(options_.kind));
  env.push_back("TPB_CONTROL_ADDR=" + advertised + ":" + std::to_string(port));
  env.push_back("TPB_CONTROL_TOKEN=" + g->token);
  env.push_back("TPB_GROUP_ID=" + g->id);
  env.push_back("TPB_RANK_LOG_DIR=" + options_.log_dir);
  if (options_.virtual_hosts >= 2) env.push_back("TPB_VIRTUAL_HOSTS=" + std::to_string(options_.virtual_hosts));
  JobLaunch job;
  job.kind = options_.kind;
  job.world_size = world_size;
  job.hosts = options_.hosts;
  job.extra_args = options_.launcher_args;
  job.worker_binary = options_.worker_binary;
  for (const auto& e : env)
    if (e.rfind("TPB_", 0) == 0) job.forwarded_env.push_back(e.substr(0, e.find('=')));
  g->command = job_command(job);

  std::vector<std::string> argv_strings = g->command;
  std::vector<char*> argv, envp;
  for (auto& a : argv_strings) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  const int log_fd = open(g->job_log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  TPB_CHECK(log_fd >= 0, "launcher: cannot create log file '" << g->job_log << "': " << std::strerror(errno));
  const int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  const pid_t controller = getpid();
  const pid_t pid = fork_child([&](const sigset_t* before) {
    exec_child(argv[0], argv.data(), envp.data(), log_fd, null_fd, -1, true, 0, controller, before,
               "tpbench launcher: cannot run the job launcher (is it installed and on PATH?)");
  });
  const int fork_errno = errno;
  close(log_fd);
  if (null_fd >= 0) close(null_fd);
  TPB_CHECK(pid > 0, "launcher: fork failed: " << std::strerror(fork_errno));
  setpgid(pid, pid);
  g->job_pid = pid;
  g->pgid = pid;
  register_cleanup_process_group(pid);
  group_ = std::move(g);
}

void Launcher::start_group(const std::string& group_key, int world_size, const RankPlacement* placement) {
  if (options_.kind != LauncherKind::fork) {
    start_job(group_key, world_size);
    return;
  }
  TPB_CHECK(placement == nullptr || static_cast<int>(placement->device_of_rank.size()) == world_size,
            "launcher: a placement of " << (placement ? placement->device_of_rank.size() : 0) << " ranks for a group of "
                                        << world_size);
  auto g = std::make_unique<Group>();
  g->key = group_key;
  g->world_size = world_size;
  // The control socket lives in the abstract namespace: nothing on disk goes stale when a
  // controller is killed. A name already held (a process that outlived an earlier controller
  // of this pid, or a squatter) is skipped for the next group number, which also names the
  // group's shared memory.
  for (int attempt = 0; g->listen_fd < 0; ++attempt) {
    TPB_CHECK(attempt < 64, "launcher: 64 control socket names in a row are taken (last '" << g->address << "')");
    g->id = next_group_id();
    g->address = "@" + g->id + "-ctl";
    g->listen_fd = control::try_listen_unix(g->address, world_size + 4);
  }
  g->ranks.resize(static_cast<std::size_t>(world_size));
  g->progress = std::make_unique<ProgressPage>(world_size);

  // Everything the child needs is built before fork: after it, only async-signal-safe calls.
  // A user's NCCL_HOSTID stands, except where ranks share a device and each needs its own.
  const std::vector<std::string> base_env =
      inherited_environment(environ, placement != nullptr && placement->device_shared());
  const int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  TPB_CHECK(null_fd >= 0, "launcher: cannot open /dev/null: " << std::strerror(errno));
  const pid_t controller = getpid();
  std::string argv0 = options_.worker_binary;
  std::string argv1 = "__worker";
  char* argv[] = {argv0.data(), argv1.data(), nullptr};

  group_ = std::move(g);
  Group& group = *group_;
  const std::string here = this_host_name();  // every forked rank's host
  for (int r = 0; r < world_size; ++r) {
    auto& rk = group.ranks[static_cast<std::size_t>(r)];
    rk.log_path = rank_log_path(options_.log_dir, group.id, r);
    std::vector<std::string> env = base_env;
    env.push_back("RANK=" + std::to_string(r));
    env.push_back("WORLD_SIZE=" + std::to_string(world_size));
    env.push_back("LOCAL_RANK=" + std::to_string(r));  // one host: local rank = rank
    env.push_back("TPB_CONTROL_SOCKET=" + group.address);
    env.push_back("TPB_GROUP_ID=" + group.id);
    env.push_back("TPB_PROGRESS_FD=" + std::to_string(group.progress->fd()));
    env.push_back("TPB_LAUNCHER=fork");
    rk.host = here;
    rk.host_id = rk.host;
    if (options_.virtual_hosts >= 2) {
      env.push_back("TPB_VIRTUAL_HOSTS=" + std::to_string(options_.virtual_hosts));
      rk.host_id = virtual_host_id(r, world_size, options_.virtual_hosts);
    }
    if (placement != nullptr)
      for (std::string& e : rank_environment(*placement, r, group.id)) env.push_back(std::move(e));
    std::vector<char*> envp;
    for (auto& s : env) envp.push_back(s.data());
    envp.push_back(nullptr);

    const int log_fd = open(rk.log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0) {
      const int err = errno;
      close(null_fd);
      group_->kill_all();
      group_.reset();
      TPB_FAIL("launcher: cannot create log file '" << rk.log_path << "': " << std::strerror(err));
    }
    const pid_t pid = fork_child([&](const sigset_t* before) {
      exec_child(argv0.c_str(), argv, envp.data(), log_fd, null_fd, group.progress->fd(), false, group.pgid, controller,
                 before, "tpbench launcher: execve of the worker binary failed");
    });
    const int fork_errno = errno;
    close(log_fd);
    if (pid < 0) {
      close(null_fd);
      group_->kill_all();
      group_.reset();
      TPB_FAIL("launcher: fork failed: " << std::strerror(fork_errno));
    }
    rk.pid = pid;
    if (r == 0) {
      group.pgid = pid;
      // A SIGINT/SIGTERM of the controller kills the group before anything else (suite/launch/mps.h).
      register_cleanup_process_group(pid);
    }
    // Also from this side, so the group exists before the next fork whatever the scheduling.
    setpgid(pid, group.pgid);
  }
  close(null_fd);
}

}  // namespace tpb
