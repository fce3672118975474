// tpbench __worker: the internal role of one rank process, started by the launcher
// (suite/launch/launcher.h) with its place in the environment. Not listed in --help.
#include "suite/cli/subcommand.h"
#include "suite/workloads/worker.h"

namespace {

constexpr const char* kUsage =
    "usage: tpbench __worker\n"
    "Internal: one rank of a case, started by tpbench run's launcher: fork (RANK, WORLD_SIZE,\n"
    "LOCAL_RANK, TPB_CONTROL_SOCKET), mpirun (OMPI_COMM_WORLD_*) or srun (SLURM_*), with\n"
    "TPB_LAUNCHER, TPB_GROUP_ID and, for mpirun and srun, TPB_CONTROL_ADDR and\n"
    "TPB_CONTROL_TOKEN set. Not meant to be run by hand.\n";

const tpb::cli::Grammar kGrammar = {{}, 0, ""};

int run_worker_cmd(const tpb::cli::Args& /*args*/) { return tpb::run_worker(); }

}  // namespace

TPB_SUBCOMMAND("__worker", "internal: one rank process of a case", kUsage, kGrammar, run_worker_cmd, true);
