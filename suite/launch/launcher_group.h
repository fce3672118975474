// The launcher's rank group (launcher.cpp says how a group lives and dies): its processes,
// sockets, progress page and job, and how they are reaped and killed; the timing constants and
// helpers the launcher's files share. Internal to suite/launch/.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "suite/launch/collective_progress.h"
#include "suite/launch/control_socket.h"
#include "suite/launch/launch_command.h"
#include "suite/launch/launcher.h"

namespace tpb {
namespace launch_detail {

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

// A new group's id, "tpb<controller pid>-g<n>": it names the group's control socket, its shared
// memory and its logs, and remove_shared_memory_of_dead_controllers reads the pid back from it.
std::string next_group_id();

std::string wait_status_text(int status);

// The last `lines` lines of a file (reads at most its last 64 KiB).
std::vector<std::string> tail_lines(const std::string& path, int lines);

double seconds_since(Clock::time_point t);

// 128 random bits as hex: the token a job's rank presents (launcher.h).
std::string random_token();

// Whether process `pid` has `entry` ("TPB_GROUP_ID=...") in its environment: a rank of ours,
// not a process that reused its pid.
bool environment_has(int pid, const std::string& entry);

// POSIX shared memory named after the groups of a controller that is gone
// ("tpb<pid>-g<n>-...", /dev/shm): a controller killed with SIGKILL cleans nothing up, and
// its ranks die with it (PR_SET_PDEATHSIG) leaving their shm communicators' segments. The next
// launcher on the host removes them. A pid that is alive (or not ours to signal: EPERM) keeps
// its names, even if it was reused by another program: only the dead are swept.
void remove_shared_memory_of_dead_controllers();

}  // namespace launch_detail

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
    std::optional<nlohmann::json> result;  // of the current case
    int job_pid_of_rank = -1;    // a job's rank: its pid on its host, from its hello
    std::string host, host_id;   // where it runs (host_id: TPB_HOST_ID's, under virtual hosts)
    nlohmann::json host_report;            // its host's facts, reported and not yet in a CaseRun's host_reports
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

  ~Group();

  std::vector<int> pids() const {
    std::vector<int> p;
    for (const auto& r : ranks) p.push_back(job_pid > 0 ? r.job_pid_of_rank : r.pid);
    return p;
  }

  // Non-blocking reap of whatever has exited. Returns the ranks newly found dead.
  std::vector<int> reap_exited();

  bool all_reaped() const {
    return (job_pid <= 0 || job_reaped) &&
           std::all_of(ranks.begin(), ranks.end(), [](const Rank& r) { return r.reaped || r.pid <= 0; });
  }

  // Waits up to `seconds` for every rank to exit on its own, reaping as they go.
  void wait_all(double seconds);

  // SIGTERM to the whole process group (grandchildren included), grace, SIGKILL, reap all.
  // A job: its ranks' connections close first (they leave on that, suite/workloads/worker.cpp), its
  // launcher gets the longer grace to end them on every host, and what is left of them on
  // this host is killed by pid.
  void kill_all();

  // A job's ranks on this host that outlived their job (a launcher killed before it could
  // end them): SIGKILL by pid, those whose environment names this group only, and to their
  // process groups (Open MPI starts each rank as a group leader: what a rank forked, e.g.
  // LeakSanitizer's tracer in a sanitized build, is in it; a pid in use as a group id is
  // never reused, so the group is the rank's). Then everything of theirs that became this
  // process's children (a child subreaper) is reaped. Ranks on other hosts are their
  // launcher's, and leave by themselves when their connection or their parent goes
  // (suite/workloads/worker.cpp).
  void kill_job_leftovers();

  // POSIX shared memory that the group's ranks named after the group id (the shm
  // communicator's segments, reference_engine/comm/shm/shm_communicator.h) and could not
  // unlink themselves: a rank killed while its peers had not all mapped a segment leaves the
  // name in /dev/shm (16 MiB each, seen after planted-fault runs). Every rank is dead here.
  void remove_shared_memory() const;

  // An ended job's launcher output names the rank that failed (Open MPI's "process rank N",
  // Slurm's "task N:"): that rank, where it is one of this job's and gave no result.
  std::optional<int> rank_its_launcher_names() const;

  void queue(int rank, const nlohmann::json& message) { ranks[static_cast<std::size_t>(rank)].outbox += control::encode(message); }

  // Sends what the socket takes now. False when the peer is gone.
  bool flush(Rank& r);
};

}  // namespace tpb
