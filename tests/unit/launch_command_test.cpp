// The launchers' pieces that need no job to check (suite/launch/launch_command.h): the mpirun and srun
// command lines the controller runs, --hosts and --launcher parsing, and where a started rank
// reads its place for each launcher. srun is only ever exercised here: no Slurm on CI.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "suite/launch/launch_command.h"
#include "tpb/check.h"

namespace tpb {
namespace {

using Env = std::map<std::string, std::string>;

EnvLookup lookup(const Env& env) {
  return [&env](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
}

JobLaunch job(LauncherKind kind) {
  JobLaunch j;
  j.kind = kind;
  j.world_size = 4;
  j.worker_binary = "/opt/tpbench/bin/tpbench";
  j.forwarded_env = {"TPB_CONTROL_ADDR", "TPB_CONTROL_TOKEN"};
  return j;
}

TEST(LaunchCommand, MpirunOnThisHost) {
  JobLaunch j = job(LauncherKind::mpirun);
  j.extra_args = {"--oversubscribe", "--allow-run-as-root"};
  EXPECT_EQ(job_command(j), (std::vector<std::string>{"mpirun", "-np", "4", "-x", "TPB_CONTROL_ADDR", "-x", "TPB_CONTROL_TOKEN",
                                                      "--oversubscribe", "--allow-run-as-root", "/opt/tpbench/bin/tpbench",
                                                      "__worker"}));
}

TEST(LaunchCommand, MpirunOnTwoHosts) {
  JobLaunch j = job(LauncherKind::mpirun);
  j.hosts = parse_hosts("node1:2,node2:2", "--hosts");
  EXPECT_EQ(job_command(j), (std::vector<std::string>{"mpirun", "-np", "4", "--host", "node1:2,node2:2", "-x", "TPB_CONTROL_ADDR",
                                                      "-x", "TPB_CONTROL_TOKEN", "/opt/tpbench/bin/tpbench", "__worker"}));
}

TEST(LaunchCommand, SrunInAnAllocationAndOnNamedNodes) {
  JobLaunch j = job(LauncherKind::srun);
  j.extra_args = {"--mpi=pmix"};
  EXPECT_EQ(job_command(j), (std::vector<std::string>{"srun", "--ntasks=4", "--kill-on-bad-exit=1", "--export=ALL", "--mpi=pmix",
                                                      "/opt/tpbench/bin/tpbench", "__worker"}));
  j.hosts = parse_hosts("gpu01:2,gpu02:2", "--hosts");
  EXPECT_EQ(job_command(j), (std::vector<std::string>{"srun", "--ntasks=4", "--kill-on-bad-exit=1", "--export=ALL",
                                                      "--nodelist=gpu01,gpu02", "--ntasks-per-node=2", "--mpi=pmix",
                                                      "/opt/tpbench/bin/tpbench", "__worker"}));
  j.hosts = parse_hosts("gpu01:2,gpu02:1", "--hosts");
  try {
    job_command(j);
    ADD_FAILURE() << "srun with unequal slots accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("every host needs the same slot count"), std::string::npos) << e.what();
  }
}

TEST(LaunchCommand, HostsAndLauncherNames) {
  const auto hosts = parse_hosts("a:8,b", "--hosts");
  ASSERT_EQ(hosts.size(), 2u);
  EXPECT_EQ(hosts[1].host, "b");
  EXPECT_EQ(hosts[1].slots, 1);
  EXPECT_EQ(hosts_text(hosts), "a:8,b:1");
  for (const char* bad : {"", "a:", ":4", "a:0", "a:x", "a:4,,b:4", "a b:4"}) {
    try {
      parse_hosts(bad, "run: --hosts");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("run: --hosts: expected HOST[:SLOTS]"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(parse_launcher("srun", "x"), LauncherKind::srun);
  EXPECT_STREQ(launcher_name(LauncherKind::mpirun), "mpirun");
  EXPECT_THROW(parse_launcher("torchrun", "run: --launcher"), InputError);
}

// The launcher's own account of which rank died (launcher.cpp blames it rather than the
// lowest rank whose connection it happened to read closed): the lines as Open MPI 4 and Slurm
// print them.
TEST(LaunchCommand, RankNamedByTheLaunchersOutput) {
  const std::vector<std::string> open_mpi = {
      "--------------------------------------------------------------------------",
      "Primary job  terminated normally, but 1 process returned",
      "a non-zero exit code. Per user-direction, the job has been aborted.",
      "mpirun noticed that process rank 2 with PID 0 on node vm exited on signal 9 (Killed)."};
  EXPECT_EQ(rank_named_by_launcher(LauncherKind::mpirun, open_mpi), 2);
  EXPECT_EQ(rank_named_by_launcher(LauncherKind::mpirun, {"mpirun noticed that process rank 13 with PID 4711 on node "
                                                           "h2 exited on signal 6 (Aborted)."}),
            13);
  EXPECT_EQ(rank_named_by_launcher(LauncherKind::srun, {"srun: error: node07: task 5: Killed",
                                                        "srun: Terminating StepId=42.0"}),
            5);
  EXPECT_EQ(rank_named_by_launcher(LauncherKind::srun, {"srun: error: node07: tasks 0-3: Killed"}), std::nullopt);
  EXPECT_EQ(rank_named_by_launcher(LauncherKind::mpirun, {"mpirun exited", "rank 2 says hello"}), std::nullopt);
  EXPECT_EQ(rank_named_by_launcher(LauncherKind::srun, open_mpi), std::nullopt);  // each launcher its own words
  EXPECT_EQ(rank_named_by_launcher(LauncherKind::fork, open_mpi), std::nullopt);
}

TEST(LaunchedRank, EachLauncherReadsItsOwnVariables) {
  // Under mpirun inside a Slurm allocation the batch step's SLURM_PROCID=0 is inherited:
  // mpirun's ranks must not read it.
  const Env mpirun_in_slurm = {{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                               {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"},
                               {"SLURM_LOCALID", "0"}, {"RANK", "0"}, {"WORLD_SIZE", "1"}, {"LOCAL_RANK", "0"}};
  LaunchedRank r;
  std::string error;
  ASSERT_TRUE(launched_rank(LauncherKind::mpirun, lookup(mpirun_in_slurm), r, error)) << error;
  EXPECT_EQ(r.rank, 3);
  EXPECT_EQ(r.world_size, 4);
  EXPECT_EQ(r.local_rank, 1);
  ASSERT_TRUE(launched_rank(LauncherKind::fork, lookup(mpirun_in_slurm), r, error)) << error;
  EXPECT_EQ(r.rank, 0);
  EXPECT_EQ(r.world_size, 1);

  const Env srun = {{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "1"}, {"SLURM_NODEID", "2"}};
  ASSERT_TRUE(launched_rank(LauncherKind::srun, lookup(srun), r, error)) << error;
  EXPECT_EQ(r.rank, 5);
  EXPECT_EQ(r.world_size, 8);
  EXPECT_EQ(r.local_rank, 1);
  EXPECT_EQ(r.node, 2);

  const Env hydra = {{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}, {"MPI_LOCALRANKID", "1"}};  // MPICH's launcher
  ASSERT_TRUE(launched_rank(LauncherKind::mpirun, lookup(hydra), r, error)) << error;
  EXPECT_EQ(r.rank, 1);
  EXPECT_EQ(r.node, -1);
}

TEST(LaunchedRank, MissingOrMalformedVariablesAreNamed) {
  LaunchedRank r;
  std::string error;
  EXPECT_FALSE(launched_rank(LauncherKind::srun, lookup({{"SLURM_PROCID", "0"}}), r, error));
  EXPECT_EQ(error, "the srun launcher's variables are missing: SLURM_NTASKS, SLURM_LOCALID");
  EXPECT_FALSE(launched_rank(LauncherKind::mpirun, lookup({}), r, error));
  EXPECT_EQ(error,
            "the mpirun launcher's variables are missing: OMPI_COMM_WORLD_RANK or PMI_RANK, OMPI_COMM_WORLD_SIZE or "
            "PMI_SIZE, OMPI_COMM_WORLD_LOCAL_RANK or MPI_LOCALRANKID");
  EXPECT_FALSE(launched_rank(LauncherKind::fork, lookup({{"RANK", "-1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}}), r, error));
  EXPECT_EQ(error, "RANK is '-1', expected a non-negative integer");
  EXPECT_FALSE(launched_rank(LauncherKind::fork, lookup({{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}}), r, error));
  EXPECT_EQ(error, "rank 2, local rank 0 of 2 ranks does not add up");
}

// What every launcher passes on: a value a launcher sets for its ranks never comes through
// from the controller's environment (a nested run's TPB_DEVICE would place a rank on the wrong
// GPU), the rest does, and NCCL_HOSTID only where ranks sharing a device need their own.
TEST(InheritedEnvironment, DropsWhatLaunchersSetAndKeepsTheRest) {
  std::vector<std::string> entries = {"PATH=/usr/bin", "RANK=3", "TPB_DEVICE=1", "TPB_RANKS_PER_GPU=2",
                                      "TPB_PLACEMENT=shared", "TPB_RANK_LOG_DIR=/old", "TPB_GROUP_ID=g", "TPB_HOST_ID=h1",
                                      "TPB_SEED=7", "NCCL_HOSTID=mine", "RANKING=kept"};
  std::vector<char*> envp;
  for (auto& e : entries) envp.push_back(e.data());
  envp.push_back(nullptr);
  EXPECT_EQ(inherited_environment(envp.data(), false),
            (std::vector<std::string>{"PATH=/usr/bin", "TPB_SEED=7", "NCCL_HOSTID=mine", "RANKING=kept"}));
  EXPECT_EQ(inherited_environment(envp.data(), true),
            (std::vector<std::string>{"PATH=/usr/bin", "TPB_SEED=7", "RANKING=kept"}));
  EXPECT_EQ(rank_log_path("/logs", "tpb1-g0", 2), "/logs/tpb1-g0-rank2.log");
}

}  // namespace
}  // namespace tpb
