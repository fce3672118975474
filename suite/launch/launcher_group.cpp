// The launcher's rank group and the helpers the launcher's files share (see launcher_group.h).
#include "suite/launch/launcher_group.h"
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

namespace tpb {
namespace launch_detail {

using nlohmann::json;

namespace {

std::atomic<unsigned> g_group_counter{0};

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

}  // namespace

std::string next_group_id() { return "tpb" + std::to_string(getpid()) + "-g" + std::to_string(g_group_counter++); }

std::string wait_status_text(int status) {
  if (WIFSIGNALED(status)) return signal_text(WTERMSIG(status));
  if (WIFEXITED(status)) {
    return "exited with status " + std::to_string(WEXITSTATUS(status)) +
           (WEXITSTATUS(status) == 0 ? " before returning a result" : "");
  }
  return "stopped with wait status " + std::to_string(status);
}

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

std::string random_token() {
  std::ifstream urandom("/dev/urandom", std::ios::binary);
  std::string bytes(16, '\0');
  urandom.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  TPB_CHECK(urandom.gcount() == static_cast<std::streamsize>(bytes.size()), "launcher: cannot read /dev/urandom for the control token");
  return control::to_hex(bytes);
}

bool environment_has(int pid, const std::string& entry) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  for (std::string e; std::getline(in, e, '\0');)
    if (e == entry) return true;
  return false;
}

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

}  // namespace launch_detail

using namespace launch_detail;

Launcher::Group::~Group() {
  if (pgid > 0) unregister_cleanup_process_group(pgid);
  for (auto& r : ranks) {
    if (r.fd >= 0) close(r.fd);
  }
  for (auto& p : pending) close(p.fd);
  if (listen_fd >= 0) close(listen_fd);
}

std::vector<int> Launcher::Group::reap_exited() {
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

void Launcher::Group::wait_all(double seconds) {
  const auto start = Clock::now();
  while (!all_reaped() && seconds_since(start) < seconds) {
    reap_exited();
    if (!all_reaped()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void Launcher::Group::kill_all() {
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

void Launcher::Group::kill_job_leftovers() {
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

void Launcher::Group::remove_shared_memory() const {
  std::error_code ec;
  const std::string prefix = id + "-";
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) == 0) shm_unlink(("/" + name).c_str());
  }
}

bool Launcher::Group::flush(Rank& r) {
  while (!r.outbox.empty()) {
    const ssize_t n = send(r.fd, r.outbox.data(), r.outbox.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (n <= 0) return false;
    r.outbox.erase(0, static_cast<std::size_t>(n));
  }
  return true;
}

std::optional<int> Launcher::Group::rank_its_launcher_names() const {
  const std::optional<int> named = rank_named_by_launcher(kind, tail_lines(job_log, 64));
  if (named && *named >= 0 && *named < world_size && !ranks[static_cast<std::size_t>(*named)].result) return named;
  return std::nullopt;
}

}  // namespace tpb
