// tpbench __worker: the internal role of one rank process, started by the launcher
// (suite/launcher.h) with its place in the environment. Not listed in --help.
#include "suite/cli/subcommand.h"
#include "suite/worker.h"

namespace {

constexpr const char* kUsage =
    "usage: tpbench __worker\n"
    "Internal: one rank of a case, started by the launcher with RANK, WORLD_SIZE, LOCAL_RANK,\n"
    "TPB_CONTROL_SOCKET and TPB_GROUP_ID set. Not meant to be run by hand.\n";

const tpb::cli::Grammar kGrammar = {"__worker", {}, 0, ""};

int run_worker_cmd(const tpb::cli::Args& /*args*/) { return tpb::run_worker(); }

}  // namespace

TPB_SUBCOMMAND("__worker", "internal: one rank process of a case", kUsage, kGrammar, run_worker_cmd, true);
