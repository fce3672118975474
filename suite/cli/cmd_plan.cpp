// tpbench plan: Predict per-rank memory and KV-cache capacity for a deployment.
#include "suite/cli/subcommand.h"

namespace {

constexpr const char* kUsage =
    "usage: tpbench plan [--help]\n"
    "Predict per-rank memory and KV-cache capacity for a deployment.\n"
    "Not implemented yet: lands with issue #6 (memory planner).\n";

int run_plan(const std::vector<std::string>& /*args*/) {
  return tpb::cli::not_implemented("plan", "issue #6 (memory planner)");
}

}  // namespace

TPB_SUBCOMMAND("plan", "Predict per-rank memory and KV-cache capacity for a deployment", kUsage, run_plan);
