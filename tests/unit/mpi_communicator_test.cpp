// The mpi backend outside an MPI job (reference_engine/comm/mpi/mpi_communicator.h): ranks the
// fork launcher (or this test's rank-group kit) starts are no MPI job, and asking them for mpi
// is an input error that says how to run it, never a world of one rank per process. Its
// collectives run under mpirun in the cpu-*-mpi conformance scenarios and tests/cli/mpirun_*.sh.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "reference_engine/comm/factory.h"
#include "reference_engine/comm/mpi_session.h"
#include "tests/support/rank_group.h"
#include "tpb/check.h"

namespace tpb {
namespace {

TEST(MpiCommunicator, OutsideAnMpiJobItSaysHowToRunIt) {
  if (!mpi_compiled_in()) GTEST_SKIP() << "this tpbench was built without MPI";
  RankGroupOptions options;
  options.group_id = "mpi-outside-a-job";
  options.timeout_s = 60;
  const auto exits = run_forked_ranks(2, options, [](Bootstrap& bootstrap) {
    for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"}) ::unsetenv(name);
    try {
      make_communicator("mpi", bootstrap, CommOptions{});
    } catch (const InputError& e) {
      return std::string(e.what()).find("mpi: this rank was not started by an MPI launcher; run the scenario with "
                                        "--launcher mpirun") != std::string::npos ? 0 : 3;
    }
    return 4;
  });
  for (const auto& e : exits) EXPECT_TRUE(e.passed()) << "rank " << e.rank << ": exit " << e.code << " " << e.exception;
}

TEST(MpiCommunicator, ABuildWithoutMpiSaysSo) {
  if (mpi_compiled_in()) GTEST_SKIP() << "this tpbench has MPI";
  RankGroupOptions options;
  options.group_id = "mpi-not-built";
  const auto exits = run_forked_ranks(1, options, [](Bootstrap& bootstrap) {
    try {
      make_communicator("mpi", bootstrap, CommOptions{});
    } catch (const InputError& e) {
      return std::string(e.what()) == "allreduce backend 'mpi' is not available in this build" ? 0 : 3;
    }
    return 4;
  });
  EXPECT_TRUE(exits[0].passed()) << exits[0].code;
  EXPECT_EQ(mpi_library_version(), "");
}

}  // namespace
}  // namespace tpb
