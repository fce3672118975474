// How the launcher starts a group (see launcher.cpp): forked ranks (the fork launcher), or one
// mpirun/srun job whose ranks connect back over TCP.
#include "suite/launch/launcher.h"
#include "suite/launch/launcher_group.h"

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
#include "tpb/system_check.h"

extern char** environ;

namespace tpb {

using nlohmann::json;
using namespace launch_detail;

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
  TPB_SYSTEM_CHECK(log_fd >= 0, "launcher: cannot create log file '" << g->job_log << "': " << std::strerror(errno));
  const int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  const pid_t controller = getpid();
  const pid_t pid = fork_child([&](const sigset_t* before) {
    exec_child(argv[0], argv.data(), envp.data(), log_fd, null_fd, -1, true, 0, controller, before,
               "tpbench launcher: cannot run the job launcher (is it installed and on PATH?)");
  });
  const int fork_errno = errno;
  close(log_fd);
  if (null_fd >= 0) close(null_fd);
  TPB_SYSTEM_CHECK(pid > 0, "launcher: fork failed: " << std::strerror(fork_errno));
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
  TPB_SYSTEM_CHECK(null_fd >= 0, "launcher: cannot open /dev/null: " << std::strerror(errno));
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
      TPB_SYSTEM_FAIL("launcher: cannot create log file '" << rk.log_path << "': " << std::strerror(err));
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
      TPB_SYSTEM_FAIL("launcher: fork failed: " << std::strerror(fork_errno));
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
