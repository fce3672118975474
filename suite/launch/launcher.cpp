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
#include "suite/launch/launcher_group.h"
#include "suite/launch/mps.h"
#include "reference_engine/config/json_text.h"
#include "tpb/check.h"
#include "tpb/system_check.h"

namespace tpb {

using nlohmann::json;
using namespace launch_detail;

nlohmann::json launcher_to_json(const LauncherOptions& o) {
  return {{"kind", launcher_name(o.kind)},
          {"hosts", hosts_text(o.hosts)},
          {"launcher_args", o.launcher_args},
          {"virtual_hosts", o.virtual_hosts},
          {"control_host", o.control_host}};
}

LauncherOptions launcher_from_json(const nlohmann::json& j, const std::string& file) {
  // Each field checked for the type tpbench writes, so that a damaged run.json names its path.
  auto field = [&](const char* key, bool (nlohmann::json::*is)() const noexcept, const char* what) -> const nlohmann::json& {
    TPB_INPUT_CHECK(j.is_object(), file << ": $.launcher: expected an object with kind, hosts, launcher_args, "
                                           "virtual_hosts and control_host, as tpbench writes it, got " << shown_json(j));
    const auto it = j.find(key);
    TPB_INPUT_CHECK(it != j.end() && ((*it).*is)(), file << ": $.launcher." << key << ": expected " << what
                                                         << ", as tpbench writes it, got "
                                                         << (it == j.end() ? std::string("nothing") : shown_json(*it)));
    return *it;
  };
  LauncherOptions o;
  o.kind = parse_launcher(field("kind", &nlohmann::json::is_string, "a string").get<std::string>(), file + ": $.launcher.kind");
  const std::string hosts = field("hosts", &nlohmann::json::is_string, "a string").get<std::string>();
  if (!hosts.empty()) o.hosts = parse_hosts(hosts, file + ": $.launcher.hosts");
  const nlohmann::json& args = field("launcher_args", &nlohmann::json::is_array, "a list of strings");
  for (std::size_t i = 0; i < args.size(); ++i) {
    TPB_INPUT_CHECK(args[i].is_string(), file << ": $.launcher.launcher_args[" << i << "]: expected a string, got "
                                              << shown_json(args[i]));
    o.launcher_args.push_back(args[i].get<std::string>());
  }
  const nlohmann::json& vh = field("virtual_hosts", &nlohmann::json::is_number_integer, "an integer");
  TPB_INPUT_CHECK(vh.get<std::int64_t>() >= 0 && vh.get<std::int64_t>() <= 1024,
                  file << ": $.launcher.virtual_hosts: expected 0..1024, got " << shown_json(vh));
  o.virtual_hosts = vh.get<int>();
  o.control_host = field("control_host", &nlohmann::json::is_string, "a string").get<std::string>();
  return o;
}

Launcher::Launcher(LauncherOptions options) : options_(std::move(options)) {
  if (options_.log_dir.empty()) {
    options_.log_dir =
        (std::filesystem::temp_directory_path() / ("tpbench-logs-" + std::to_string(getpid()))).string();
  }
  std::error_code ec;
  std::filesystem::create_directories(options_.log_dir, ec);
  TPB_SYSTEM_CHECK(!ec, "launcher: cannot create log folder '" << options_.log_dir << "': " << ec.message());
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

CaseRun Launcher::run_case(const std::string& group_key, int world_size, const json& case_spec, double timeout_s,
                           const RankPlacement* placement) {
  TPB_INPUT_CHECK(world_size >= 1, "launcher: world size must be at least 1, got " << world_size);
  TPB_INPUT_CHECK(timeout_s > 0, "launcher: case timeout must be positive, got " << timeout_s << " s");
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  CaseRun run;
  Group& g = group_for(group_key, world_size, placement);
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
      fail_ended_job(g, fail);
      break;
    }
    const double remaining_s = std::chrono::duration<double>(deadline - Clock::now()).count();
    if (remaining_s <= 0) {
      fail_timeout(g, timeout_s, fail);
      break;
    }

    if (!poll_group(g, remaining_s, fail, [&] { return !failure.empty(); })) continue;
    fail_closed_ranks(g, fail, [&] { return !failure.empty(); });
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
    run.error = failure_report(g, failure, blamed);
    run.failed_ranks = blamed;
    group_.reset();
  }
  run.wall_s = seconds_since(start);
  return run;
}

Launcher::Group& Launcher::group_for(const std::string& group_key, int world_size, const RankPlacement* placement) {
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
  return *group_;
}

void Launcher::fail_ended_job(Group& g, const FailFn& fail) {
  // The job ended with results missing: blame the rank its launcher names (the one that
  // failed first; it ends the others), else the ranks whose connection closed, else every
  // rank that has not answered.
  std::vector<int> closed, missing;
  for (int r = 0; r < g.world_size; ++r) {
    auto& rk = g.ranks[static_cast<std::size_t>(r)];
    if (rk.result) continue;
    missing.push_back(r);
    if (rk.fd >= 0 && rk.connection_closed()) closed.push_back(r);
  }
  const std::optional<int> named = g.rank_its_launcher_names();
  const std::vector<int> blame = named ? std::vector<int>{*named} : closed.empty() ? missing : closed;
  fail(std::string(launcher_name(g.kind)) + " " + wait_status_text(g.job_status) + " with no result from " +
           ranks_text(missing) + (closed.empty() ? "" : " (" + ranks_text(closed) + " closed the control connection)") +
           (named ? "; it names rank " + std::to_string(*named) : ""),
       blame);
}

void Launcher::fail_timeout(Group& g, double timeout_s, const FailFn& fail) {
  if (!g.progress) {
    // A job's ranks keep no progress page here (they may be on other hosts); those on this
    // host can still be seen stopped.
    std::vector<int> missing, unconnected, stopped;
    const std::string here = this_host_name();
    for (int r = 0; r < g.world_size; ++r) {
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
    return;
  }
  // Every silent rank may be waiting inside one collective: name the one that did not
  // arrive there (suite/launch/collective_progress.h), not all of them.
  std::vector<int> missing;
  std::vector<RankProgress> progress;
  for (int r = 0; r < g.world_size; ++r) {
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
}

bool Launcher::poll_group(Group& g, double remaining_s, const FailFn& fail, const std::function<bool()>& failed) {
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
  for (int r = 0; r < g.world_size; ++r) {
    const auto& rk = g.ranks[static_cast<std::size_t>(r)];
    if (rk.fd < 0 || rk.eof) continue;
    fds.push_back({rk.fd, static_cast<short>(POLLIN | (rk.outbox.empty() ? 0 : POLLOUT)), 0});
    fd_rank.push_back(r);
  }
  const int wait_ms = std::max(1, std::min(kPollSliceMs, static_cast<int>(remaining_s * 1000) + 1));
  const int n = poll(fds.data(), fds.size(), wait_ms);
  if (n < 0 && errno != EINTR) TPB_FAIL("launcher: poll failed: " << std::strerror(errno));
  if (n <= 0) return false;

  for (std::size_t k = 0; k < fds.size() && !failed(); ++k) {
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
    handle_lines(r, fail, failed);
  }
  return true;
}

void Launcher::fail_closed_ranks(Group& g, const FailFn& fail, const std::function<bool()>& failed) {
  // A closed socket (seen by a read or a failed send, on any rank) means the rank is
  // exiting: give it a moment to show up in waitpid with its status.
  for (int r = 0; r < g.world_size && !failed(); ++r) {
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
        if (const std::optional<int> named = g.rank_its_launcher_names()) who = *named;
      fail("rank " + std::to_string(who) + ": closed its control connection" +
               (g.job_reaped ? "; " + std::string(launcher_name(g.kind)) + " " + wait_status_text(g.job_status) : ""),
           {who});
    } else {
      fail("rank " + std::to_string(r) + ": " + (rk.reaped ? wait_status_text(rk.wait_status) : "closed its control connection"),
           {r});
    }
  }
}

std::string Launcher::failure_report(const Group& g, const std::string& failure, const std::vector<int>& blamed) const {
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
  return os.str();
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

}  // namespace tpb
