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

extern char** environ;

namespace tpb {

using namespace mps_detail;

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

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

}  // namespace tpb
