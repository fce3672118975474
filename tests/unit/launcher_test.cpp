// The launcher end to end with real rank processes (the tpbench binary in its __worker
// role): planted faults fail their case with the right text, nothing is left behind in the
// process table, the next case runs; groups are reused by key; the bootstrap relays binary
// payloads; the allreduce workload over shm equals a serial sum in rank order, bitwise.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "suite/measure/digest.h"
#include "suite/launch/launcher.h"
#include "tpb/check.h"
#include "suite/workloads/workloads.h"
#include "tpb/dtype.h"

namespace tpb {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

fs::path log_root() { return fs::temp_directory_path() / ("tpb-launcher-test-" + std::to_string(getpid())); }

// The rank logs matter only while a test runs (failures quote their tails): remove them after.
class RemoveLogs : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(log_root(), ec);
  }
};
[[maybe_unused]] ::testing::Environment* const g_remove_logs = ::testing::AddGlobalTestEnvironment(new RemoveLogs);

LauncherOptions test_options(const std::string& name) {
  LauncherOptions o;
  o.worker_binary = TPB_TPBENCH_BINARY;
  o.log_dir = (log_root() / name).string();
  o.stderr_tail_lines = 5;
  return o;
}

json probe_spec(json fault = nullptr) {
  json spec = {{"case_id", "probe"}, {"workload", "probe"}, {"device", "cpu"}, {"params", json::object()}};
  if (!fault.is_null()) spec["params"]["fault"] = fault;
  return spec;
}

struct ProcInfo {
  int pid, ppid, pgid;
  char state;
};

// Every process in /proc: pid, parent, process group, state (Z = zombie).
std::vector<ProcInfo> process_table() {
  std::vector<ProcInfo> table;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "stat");
    std::string stat;
    if (!std::getline(in, stat)) continue;
    const auto close_paren = stat.rfind(')');  // the command name may hold spaces and parens
    if (close_paren == std::string::npos) continue;
    std::istringstream rest(stat.substr(close_paren + 2));
    ProcInfo p{std::stoi(name), 0, 0, '?'};
    rest >> p.state >> p.ppid >> p.pgid;
    table.push_back(p);
  }
  return table;
}

// Nothing of a group survives: each rank pid is gone (not even a zombie), no process is
// left in the group's process group (grandchildren included), and this test process has
// no children at all (the launcher reaped every one).
void expect_nothing_left(const std::vector<int>& pids) {
  ASSERT_FALSE(pids.empty());
  for (int pid : pids) {
    errno = 0;
    EXPECT_EQ(kill(pid, 0), -1) << "pid " << pid << " still exists";
    EXPECT_EQ(errno, ESRCH) << "pid " << pid;
  }
  int status = 0;
  errno = 0;
  const pid_t w = waitpid(-1, &status, WNOHANG);
  EXPECT_TRUE(w == -1 && errno == ECHILD) << "an unreaped child remains: waitpid returned " << w;
  for (const auto& p : process_table()) {
    EXPECT_NE(p.pgid, pids[0]) << "pid " << p.pid << " (state " << p.state << ") is still in the group's process group";
    EXPECT_NE(p.ppid, getpid()) << "pid " << p.pid << " (state " << p.state << ") is still a child of the test";
  }
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// A planted fault and how the first line of its error must start.
struct FaultCase {
  const char* name;
  json fault;
  const char* expected_first_line;
  double timeout_s;
};

class LauncherFault : public ::testing::TestWithParam<FaultCase> {};

TEST_P(LauncherFault, FailsTheCaseReapsTheGroupAndTheNextCaseRuns) {
  const FaultCase& fc = GetParam();
  Launcher launcher(test_options(fc.name));
  const CaseRun warm = launcher.run_case("g", 3, probe_spec(), 20);
  ASSERT_TRUE(warm.ok) << warm.error;

  const CaseRun failed = launcher.run_case("g", 3, probe_spec(fc.fault), fc.timeout_s);
  ASSERT_FALSE(failed.ok);
  EXPECT_EQ(failed.pids, warm.pids) << "the fault case ran on the live group";
  const std::string first_line = failed.error.substr(0, failed.error.find('\n'));
  EXPECT_TRUE(starts_with(first_line, fc.expected_first_line)) << failed.error;
  const int rank = fc.fault["rank"];
  EXPECT_EQ(failed.failed_ranks, std::vector<int>{rank});
  // The blamed rank's stderr tail is in the message (the probe announces its fault there).
  EXPECT_NE(failed.error.find("stderr"), std::string::npos) << failed.error;
  EXPECT_NE(failed.error.find("probe: rank " + std::to_string(rank) + " injecting fault"), std::string::npos)
      << failed.error;
  EXPECT_TRUE(launcher.worker_pids().empty());
  expect_nothing_left(warm.pids);

  // The sweep goes on: a fresh group runs the next case.
  const CaseRun next = launcher.run_case("g", 3, probe_spec(), 20);
  ASSERT_TRUE(next.ok) << next.error;
  for (int pid : next.pids) EXPECT_EQ(std::count(warm.pids.begin(), warm.pids.end(), pid), 0);
  launcher.shutdown();
  expect_nothing_left(next.pids);
}

INSTANTIATE_TEST_SUITE_P(
    Faults, LauncherFault,
    ::testing::Values(
        FaultCase{"crash_segv", {{"rank", 1}, {"kind", "crash"}}, "rank 1: killed by signal 11 (SIGSEGV)", 20},
        FaultCase{"abort", {{"rank", 2}, {"kind", "abort"}}, "rank 2: killed by signal 6 (SIGABRT)", 20},
        FaultCase{"exit_3", {{"rank", 0}, {"kind", "exit"}, {"code", 3}}, "rank 0: exited with status 3", 20},
        // Timeouts leave the healthy ranks ample time to answer on a loaded 2-core machine.
        FaultCase{"hang", {{"rank", 1}, {"kind", "hang"}}, "timeout after 1.5 s waiting for rank 1", 1.5},
        // The hanging rank has a child of its own: the process-group kill must reach it too.
        FaultCase{"hang_with_child", {{"rank", 2}, {"kind", "hang_with_child"}}, "timeout after 1.5 s waiting for rank 2",
                  1.5},
        FaultCase{"throw", {{"rank", 1}, {"kind", "throw"}},
                  "rank 1: probe: injected failure on rank 1", 20}),
    [](const ::testing::TestParamInfo<FaultCase>& info) { return std::string(info.param.name); });

TEST(Launcher, HangFailsWithinTheTimeoutPlusGrace) {
  Launcher launcher(test_options("hang_timing"));
  const CaseRun run = launcher.run_case("g", 2, probe_spec({{"rank", 0}, {"kind", "hang"}}), 0.5);
  ASSERT_FALSE(run.ok);
  EXPECT_GE(run.wall_s, 0.5);
  EXPECT_LT(run.wall_s, 0.5 + 3.0) << "the kill took too long";
  expect_nothing_left(run.pids);
}

// Issue 17, finding 9: a rank that stops while its peers wait inside a collective left a
// timeout that blamed every rank ("waiting for ranks 0, 1"), which every one of them is. Now
// the group's progress page (suite/launch/collective_progress.h) names the one that did not arrive.
TEST(Launcher, HangInsideACollectiveNamesTheRankThatDidNotArrive) {
  Launcher launcher(test_options("hang_in_collective"));
  json spec = probe_spec({{"rank", 1}, {"kind", "hang"}, {"at_collective", 2}});
  spec["params"]["collectives"] = 5;
  const CaseRun run = launcher.run_case("g", 3, spec, 1.5);
  ASSERT_FALSE(run.ok);
  EXPECT_EQ(run.failed_ranks, std::vector<int>{1}) << run.error;
  const std::string first_line = run.error.substr(0, run.error.find('\n'));
  EXPECT_EQ(first_line,
            "timeout after 1.5 s waiting for rank 1: rank 1 did not arrive at barrier #3 (rank 1: outside any "
            "collective, after #2); ranks 0, 2 wait inside it (no answer from ranks 0, 1, 2)");
  expect_nothing_left(run.pids);
}

TEST(Launcher, StoppedRankIsNamedByItsProcessState) {
  Launcher launcher(test_options("stopped_in_collective"));
  json spec = probe_spec({{"rank", 2}, {"kind", "stop"}, {"at_collective", 1}});
  spec["params"]["collectives"] = 3;
  const CaseRun run = launcher.run_case("g", 3, spec, 1.5);
  ASSERT_FALSE(run.ok);
  EXPECT_EQ(run.failed_ranks, std::vector<int>{2}) << run.error;
  const std::string first_line = run.error.substr(0, run.error.find('\n'));
  EXPECT_EQ(first_line,
            "timeout after 1.5 s waiting for rank 2: rank 2 is stopped (process state T: SIGSTOP or a debugger); "
            "ranks 0, 1 wait inside a collective (no answer from ranks 0, 1, 2)");
  expect_nothing_left(run.pids);
}

TEST(Launcher, CollectivesWithoutAFaultComplete) {
  Launcher launcher(test_options("collectives"));
  json spec = probe_spec();
  spec["params"]["collectives"] = 4;
  const CaseRun run = launcher.run_case("g", 3, spec, 20);
  ASSERT_TRUE(run.ok) << run.error;
  launcher.shutdown();
  expect_nothing_left(run.pids);
}

TEST(Launcher, ReusesTheGroupForTheSameKeyAndReplacesItOtherwise) {
  Launcher launcher(test_options("reuse"));
  const CaseRun a = launcher.run_case("model=x;tp=2", 2, probe_spec(), 20);
  const CaseRun b = launcher.run_case("model=x;tp=2", 2, probe_spec(), 20);
  ASSERT_TRUE(a.ok && b.ok) << a.error << b.error;
  EXPECT_EQ(a.pids, b.pids);
  EXPECT_EQ(launcher.worker_pids(), a.pids);
  EXPECT_EQ(b.ranks[0]["metrics"]["cases_served"], 2) << "the second case ran in the same worker process";
  // A group's host reports once, with its first case (suite/launch/host_facts.h).
  ASSERT_EQ(a.host_reports.size(), 1u);
  EXPECT_EQ(a.host_reports[0]["reported_by"]["pid"], a.pids[0]);
  EXPECT_TRUE(b.host_reports.empty()) << b.host_reports[0].dump();

  const CaseRun c = launcher.run_case("model=y;tp=2", 2, probe_spec(), 20);
  ASSERT_TRUE(c.ok) << c.error;
  EXPECT_NE(c.pids, a.pids);
  EXPECT_EQ(c.ranks[1]["metrics"]["cases_served"], 1);
  EXPECT_EQ(c.host_reports.size(), 1u) << "a new group reports again";
  for (int pid : a.pids) EXPECT_EQ(kill(pid, 0), -1) << "the replaced group's pid " << pid << " is still there";

  const CaseRun d = launcher.run_case("model=y;tp=2", 3, probe_spec(), 20);  // same key, other world size
  ASSERT_TRUE(d.ok) << d.error;
  EXPECT_EQ(d.pids.size(), 3u);
  EXPECT_NE(d.pids[0], c.pids[0]);
  launcher.shutdown();
  EXPECT_TRUE(launcher.worker_pids().empty());
  expect_nothing_left(d.pids);
}

// Under virtual hosts the first rank of each host reports its host's facts, from its own
// process: the pid in the report is that rank's (the controller's own would fail this).
TEST(Launcher, FirstRankOfEachVirtualHostReportsItsFacts) {
  LauncherOptions options = test_options("host_reports");
  options.virtual_hosts = 2;
  Launcher launcher(options);
  const CaseRun run = launcher.run_case("g", 4, probe_spec(), 20);
  ASSERT_TRUE(run.ok) << run.error;
  ASSERT_EQ(run.host_reports.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    const json& report = run.host_reports[i];
    const int rank = 2 * static_cast<int>(i);
    EXPECT_EQ(report["host_id"], "vhost" + std::to_string(i));
    EXPECT_EQ(report["host_id"], run.hosts[static_cast<std::size_t>(rank)]["host_id"]);
    EXPECT_EQ(report["reported_by"]["rank"], rank);
    EXPECT_EQ(report["reported_by"]["pid"], run.pids[static_cast<std::size_t>(rank)]);
    EXPECT_NE(report["reported_by"]["pid"], getpid());
    for (const char* key : {"hostname", "os", "cpu_count", "gpus", "cuda_driver", "cuda_runtime", "nvidia_driver",
                            "nccl_version", "env"})
      EXPECT_TRUE(report["facts"].contains(key)) << key << ": " << report.dump();
  }
  launcher.shutdown();
  expect_nothing_left(run.pids);
}

// A worker killed from outside while its group is idle belongs to no case: the next case
// gets a fresh group and runs, and the dead one is reaped.
// After a rank of `before`'s group died idle: the next case of the same key runs on new
// processes as their first case, and at shutdown nothing is left of either group.
void expect_next_case_runs_afresh(Launcher& launcher, const CaseRun& before, double timeout_s) {
  const CaseRun next = launcher.run_case("g", 2, probe_spec(), timeout_s);
  ASSERT_TRUE(next.ok) << next.error;
  for (int pid : next.pids) EXPECT_EQ(std::count(before.pids.begin(), before.pids.end(), pid), 0);
  EXPECT_EQ(next.ranks[0]["metrics"]["cases_served"], 1);
  launcher.shutdown();
  expect_nothing_left(before.pids);
  expect_nothing_left(next.pids);
}

TEST(Launcher, WorkerDeadBetweenCasesIsReplacedByAFreshGroup) {
  Launcher launcher(test_options("idle_death"));
  const CaseRun a = launcher.run_case("g", 2, probe_spec(), 20);
  ASSERT_TRUE(a.ok) << a.error;
  ASSERT_EQ(kill(a.pids[1], SIGKILL), 0);
  // Dead before the next case starts: wait until it is a zombie awaiting its reaper.
  for (int i = 0; i < 1000; ++i) {
    const auto table = process_table();
    const bool zombie = std::any_of(table.begin(), table.end(), [&](const ProcInfo& p) {
      return p.pid == a.pids[1] && p.state == 'Z';
    });
    if (zombie) break;
    usleep(1000);
  }
  expect_next_case_runs_afresh(launcher, a, 20);
}

// The mpirun launcher (a job per group, TCP with a token): a case runs, each rank says where
// it runs, a rank killed between cases gets the next case a fresh job, and at shutdown nothing
// is left, no zombie either (the launcher reaps mpirun and whatever it orphaned).
TEST(Launcher, JobRankDeadBetweenCasesIsReplacedByAFreshJob) {
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0) GTEST_SKIP() << "mpirun is not installed";
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);  // CI runs as root
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  LauncherOptions options = test_options("job_idle_death");
  options.kind = LauncherKind::mpirun;
  options.launcher_args = {"--oversubscribe"};
  Launcher launcher(options);
  const CaseRun a = launcher.run_case("g", 2, probe_spec(), 60);
  ASSERT_TRUE(a.ok) << a.error;
  ASSERT_EQ(a.command.front(), "mpirun");
  ASSERT_EQ(a.hosts.size(), 2u);
  EXPECT_FALSE(a.hosts[1]["host"].get<std::string>().empty());
  // One host: its local rank 0 reports the host's facts.
  ASSERT_EQ(a.host_reports.size(), 1u);
  EXPECT_EQ(a.host_reports[0]["reported_by"]["pid"], a.pids[0]);
  // A GPU rank of a job finds its device by its local rank on its host (one host here).
  EXPECT_EQ(a.ranks[1]["metrics"]["environment"]["LOCAL_RANK"], "1") << a.ranks[1].dump();
  ASSERT_EQ(kill(a.pids[1], SIGKILL), 0);
  for (int i = 0; i < 2000 && kill(a.pids[1], 0) == 0; ++i) usleep(1000);  // mpirun reaps it
  expect_next_case_runs_afresh(launcher, a, 60);
}

// A shared-memory name the group's ranks left in /dev/shm (a rank killed before its peers
// mapped a shm segment leaves one) goes with the group: after a failed case and at shutdown.
TEST(Launcher, RemovesTheSharedMemoryItsGroupsLeft) {
  Launcher launcher(test_options("shm"));
  json spec = probe_spec();
  spec["params"]["shm_segment"] = true;
  const CaseRun run = launcher.run_case("shm", 2, spec, 20);
  ASSERT_TRUE(run.ok) << run.error;
  const std::string name = run.ranks[0]["metrics"]["shm_segment"].get<std::string>();
  const fs::path path = fs::path("/dev/shm") / name.substr(1);
  EXPECT_TRUE(fs::exists(path)) << path << ": the probe left no segment (the test could not fail)";
  launcher.shutdown();
  EXPECT_FALSE(fs::exists(path)) << path << " outlived its group";

  json failing = spec;
  failing["params"]["fault"] = {{"rank", 1}, {"kind", "crash"}};
  const CaseRun failed = launcher.run_case("shm", 2, failing, 20);
  ASSERT_FALSE(failed.ok);
  for (const auto& entry : fs::directory_iterator("/dev/shm"))
    EXPECT_NE(entry.path().filename().string().rfind("tpb" + std::to_string(getpid()) + "-g", 0), 0u)
        << entry.path() << " outlived its failed group";
}

// A controller killed with SIGKILL cleans nothing up: the next launcher removes the shared
// memory of groups whose controller is dead, and only theirs.
TEST(Launcher, RemovesTheSharedMemoryOfDeadControllersOnly) {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);  // `child` is now a pid no process has
  const std::string dead = "/tpb" + std::to_string(child) + "-g3-shm-test";
  const std::string alive = "/tpb" + std::to_string(getpid()) + "-g9999-shm-test";
  const std::string other = "/tpbench-not-a-group-" + std::to_string(child);
  for (const auto& name : {dead, alive, other}) {
    const int fd = shm_open(name.c_str(), O_CREAT | O_RDWR, 0600);
    ASSERT_GE(fd, 0) << name;
    close(fd);
  }
  { Launcher launcher(test_options("dead_controllers")); }
  EXPECT_FALSE(fs::exists("/dev/shm" + dead)) << "a dead controller's segment was left";
  EXPECT_TRUE(fs::exists("/dev/shm" + alive)) << "a live controller's segment was removed";
  EXPECT_TRUE(fs::exists("/dev/shm" + other)) << "a name that is not a group's was removed";
  shm_unlink(alive.c_str());
  shm_unlink(other.c_str());
  shm_unlink(dead.c_str());
}

TEST(Launcher, DestructorReapsTheLiveGroup) {
  std::vector<int> pids;
  {
    Launcher launcher(test_options("destructor"));
    const CaseRun run = launcher.run_case("g", 2, probe_spec(), 20);
    ASSERT_TRUE(run.ok) << run.error;
    pids = run.pids;
  }
  expect_nothing_left(pids);
}

// The bootstrap relays a binary payload (every byte value, NUL and '\n' included) among
// 1..4 ranks; each rank sees every rank's pid in rank order.
TEST(Launcher, BootstrapAllGatherRelaysBinaryPayloadsInRankOrder) {
  Launcher launcher(test_options("bootstrap"));
  for (int world_size = 1; world_size <= 4; ++world_size) {
    const CaseRun run = launcher.run_case("ws" + std::to_string(world_size), world_size, probe_spec(), 20);
    ASSERT_TRUE(run.ok) << run.error;
    ASSERT_EQ(run.ranks.size(), static_cast<std::size_t>(world_size));
    for (int r = 0; r < world_size; ++r) {
      const json& result = run.ranks[static_cast<std::size_t>(r)];
      EXPECT_EQ(result["rank"], r);
      EXPECT_EQ(result["metrics"]["pid"], run.pids[static_cast<std::size_t>(r)]);
      EXPECT_EQ(result["metrics"]["payload_ok"], true);
      EXPECT_EQ(result["metrics"]["gathered_pids"].get<std::vector<int>>(), run.pids);
    }
  }
}

TEST(Launcher, UnknownWorkloadIsAnErrorNamingTheKnownOnes) {
  Launcher launcher(test_options("unknown"));
  json spec = probe_spec();
  spec["workload"] = "nope";
  const CaseRun run = launcher.run_case("g", 2, spec, 20);
  ASSERT_FALSE(run.ok);
  EXPECT_TRUE(starts_with(run.error, "rank ")) << run.error;
  const std::string first_line = run.error.substr(0, run.error.find('\n'));
  EXPECT_NE(first_line.find("unknown workload 'nope' (known: "), std::string::npos) << run.error;
  for (const auto& name : workload_names()) EXPECT_NE(first_line.find(name), std::string::npos) << name;
  expect_nothing_left(run.pids);
}

TEST(Launcher, MissingWorkerBinaryFailsTheCaseWithTheExecError) {
  LauncherOptions o = test_options("missing_binary");
  o.worker_binary = "/nonexistent/tpbench";
  Launcher launcher(o);
  const CaseRun run = launcher.run_case("g", 2, probe_spec(), 20);
  ASSERT_FALSE(run.ok);
  EXPECT_TRUE(starts_with(run.error, "rank 0: exited with status 127") || starts_with(run.error, "rank 1: exited with status 127"))
      << run.error;
  EXPECT_NE(run.error.find("execve of the worker binary failed"), std::string::npos) << run.error;
  expect_nothing_left(run.pids);
}

// The allreduce workload over shm across real processes: every rank's output equals the
// serial fp32 sum in rank order of all ranks' inputs, bitwise, for sizes that are not a
// multiple of 16 bytes and span several shm slots.
struct AllreduceCase {
  int world_size;
  const char* dtype;
  int count;
};

class LauncherAllreduce : public ::testing::TestWithParam<AllreduceCase> {};

TEST_P(LauncherAllreduce, ShmOutputIsTheSerialSumInRankOrder) {
  const auto [world_size, dtype_text, count] = GetParam();
  const DType dtype = dtype_from_name(dtype_text);
  const int message_bytes = count * static_cast<int>(dtype_size(dtype));
  ASSERT_NE(message_bytes % 16, 0);
  const int slot_bytes = 1024;
  ASSERT_GT(message_bytes, slot_bytes);
  const json spec = {{"case_id", "ar"},
                     {"workload", "allreduce"},
                     {"device", "cpu"},
                     {"params", {{"message_bytes", message_bytes}, {"dtype", dtype_text}, {"allreduce", "shm"},
                                 {"comm_max_bytes", slot_bytes}, {"seed", 1234 + world_size}}},
                     {"measure", {{"warmup", 1}, {"iterations", 3}, {"repetitions", 2}}}};
  Launcher launcher(test_options("allreduce"));
  const CaseRun run = launcher.run_case("ar", world_size, spec, 30);
  ASSERT_TRUE(run.ok) << run.error;

  std::vector<std::vector<unsigned char>> inputs;
  for (int r = 0; r < world_size; ++r) inputs.push_back(allreduce_input(1234 + world_size, r, world_size, count, dtype));
  const auto expected = serial_sum_in_rank_order(inputs, count, dtype);
  const std::string expected_digest = fnv1a64_hex(expected.data(), expected.size());
  for (int r = 0; r < world_size; ++r) {
    const json& result = run.ranks[static_cast<std::size_t>(r)];
    EXPECT_EQ(result["digests"]["output"], expected_digest) << "rank " << r;
    EXPECT_EQ(result["metrics"]["matches_serial_sum"], true) << "rank " << r << ": " << result["metrics"].dump();
    EXPECT_EQ(result["metrics"]["bytes"], message_bytes);
    EXPECT_EQ(result["latency_us"].size(), 6u) << "repetitions x iterations samples";
    EXPECT_EQ(result["comm"]["backend"], "shm");
    // What a step moves, for the record's one algbw/busbw (suite/measure/measure.h): not a rate per rank.
    EXPECT_FALSE(result["metrics"].contains("algbw_GBps")) << result["metrics"].dump();
    EXPECT_EQ(result["work"]["bytes_per_step"], message_bytes);
    EXPECT_DOUBLE_EQ(result["work"]["bus_factor"].get<double>(), world_size > 1 ? 2.0 * (world_size - 1) / world_size : 0.0);
  }

  // Same case again on the same group: the same bits (fixed order, no atomics).
  const CaseRun again = launcher.run_case("ar", world_size, spec, 30);
  ASSERT_TRUE(again.ok) << again.error;
  EXPECT_EQ(again.pids, run.pids);
  for (int r = 0; r < world_size; ++r) {
    EXPECT_EQ(again.ranks[static_cast<std::size_t>(r)]["digests"]["output"], expected_digest) << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Shm, LauncherAllreduce,
                         ::testing::Values(AllreduceCase{1, "f32", 1001}, AllreduceCase{2, "f32", 1001},
                                           AllreduceCase{3, "f32", 1001}, AllreduceCase{4, "f32", 1001},
                                           AllreduceCase{1, "bf16", 3001}, AllreduceCase{2, "bf16", 3001},
                                           AllreduceCase{3, "bf16", 3001}, AllreduceCase{4, "bf16", 3001}),
                         [](const ::testing::TestParamInfo<AllreduceCase>& info) {
                           return std::string(info.param.dtype) + "_" + std::to_string(info.param.world_size) + "ranks";
                         });

// The workload's inputs are a function of the seed, not of the backend or the run.
TEST(AllreduceWorkload, InputsAreReproducibleAndExactInTheirDtype) {
  for (int world : {2, 4, 8})
    for (DType dtype : {DType::f32, DType::bf16, DType::f16}) {
      const auto a = allreduce_input(7, 1, world, 513, dtype);
      EXPECT_EQ(a, allreduce_input(7, 1, world, 513, dtype));
      EXPECT_NE(a, allreduce_input(8, 1, world, 513, dtype));
      EXPECT_NE(a, allreduce_input(7, 0, world, 513, dtype));
    }
}

// Element i of raw `dtype` bytes as fp32, and an fp32 value rounded to `dtype` (tpb/dtype.h).
float element(const std::vector<unsigned char>& bytes, std::size_t i, DType dtype) {
  if (dtype == DType::f32) {
    float v;
    std::memcpy(&v, bytes.data() + i * 4, 4);
    return v;
  }
  std::uint16_t b;
  std::memcpy(&b, bytes.data() + i * 2, 2);
  return dtype == DType::bf16 ? bf16_to_float(b) : f16_to_float(b);
}
float rounded(float v, DType dtype) {
  if (dtype == DType::f32) return v;
  return dtype == DType::bf16 ? bf16_to_float(float_to_bf16(v)) : f16_to_float(float_to_f16(v));
}

// Above 2 ranks the inputs are small non-zero integers: any order of summation, rounding to
// the dtype after every add (as a ring does), gives the one-rounding serial sum bitwise.
TEST(AllreduceWorkload, IntegerInputsAboveTwoRanksSumExactlyInAnyOrder) {
  for (int world : {3, 4, 8})
    for (DType dtype : {DType::f32, DType::bf16, DType::f16}) {
      const std::size_t count = 4097;
      std::vector<std::vector<unsigned char>> inputs;
      for (int r = 0; r < world; ++r) inputs.push_back(allreduce_input(11, r, world, count, dtype));
      const auto serial = serial_sum_in_rank_order(inputs, count, dtype);
      int zeros = 0;
      for (std::size_t i = 0; i < count; ++i) {
        float ring = 0.0f;  // reverse rank order, rounded to the dtype after every hop
        for (int r = world - 1; r >= 0; --r) {
          const float x = element(inputs[static_cast<std::size_t>(r)], i, dtype);
          ASSERT_EQ(x, std::round(x)) << "not an integer: rank " << r << " element " << i;
          ASSERT_LE(std::fabs(x), 128.0f / static_cast<float>(world));
          zeros += x == 0.0f;
          ring = rounded(ring + x, dtype);
        }
        ASSERT_EQ(ring, element(serial, i, dtype)) << "world " << world << " element " << i;
      }
      EXPECT_EQ(zeros, 0);
    }
}

// run.json's "launcher" reads back into the options that wrote it (--resume keeps the run's
// launcher), and a document not as tpbench writes it names the file and the field's JSON path
// (it quoted nlohmann's type_error before: issue 37, finding 10).
TEST(LauncherJson, RoundTripsAndNamesWhatIsWrong) {
  LauncherOptions o;
  o.kind = LauncherKind::mpirun;
  o.hosts = parse_hosts("a:4,b:4", "test");
  o.launcher_args = {"--oversubscribe", "-x", "FOO"};
  o.virtual_hosts = 2;
  o.control_host = "10.0.0.1";
  const nlohmann::json j = launcher_to_json(o);
  const LauncherOptions back = launcher_from_json(j, "run.json");
  EXPECT_EQ(back.kind, o.kind);
  EXPECT_EQ(hosts_text(back.hosts), "a:4,b:4");
  EXPECT_EQ(back.launcher_args, o.launcher_args);
  EXPECT_EQ(back.virtual_hosts, 2);
  EXPECT_EQ(back.control_host, "10.0.0.1");
  auto refused = [](const nlohmann::json& launcher) {
    try {
      launcher_from_json(launcher, "runs/x/run.json");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("read");
  };
  nlohmann::json broken = j;
  broken.erase("virtual_hosts");
  EXPECT_EQ(refused(broken), "runs/x/run.json: $.launcher.virtual_hosts: expected an integer, as tpbench writes it, got nothing");
  broken = j;
  broken["launcher_args"] = {"-x", 7};
  EXPECT_EQ(refused(broken), "runs/x/run.json: $.launcher.launcher_args[1]: expected a string, got 7");
  broken = j;
  broken["kind"] = std::string(5000, 'k');
  const std::string long_kind = refused(broken);
  EXPECT_NE(long_kind.find("runs/x/run.json: $.launcher.kind: expected a launcher (one of fork, mpirun, srun), got 'kkk"),
            std::string::npos) << long_kind;
  EXPECT_NE(long_kind.find("... (5000 characters)'"), std::string::npos) << long_kind;
  EXPECT_EQ(refused("mpirun"),
            "runs/x/run.json: $.launcher: expected an object with kind, hosts, launcher_args, virtual_hosts and "
            "control_host, as tpbench writes it, got \"mpirun\"");
}

}  // namespace
}  // namespace tpb
