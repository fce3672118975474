// tpbench qualify: Qualify hardware against a profile: PASS/FAIL table, JSON and JUnit.
#include "suite/cli/subcommand.h"

namespace {

constexpr const char* kUsage =
    "usage: tpbench qualify [--help]\n"
    "Qualify hardware against a profile: PASS/FAIL table, JSON and JUnit.\n"
    "Not implemented yet: lands with issue #7 (checks, baselines, qualify).\n";

int run_qualify(const std::vector<std::string>& /*args*/) {
  return tpb::cli::not_implemented("qualify", "issue #7 (checks, baselines, qualify)");
}

}  // namespace

TPB_SUBCOMMAND("qualify", "Qualify hardware against a profile: PASS/FAIL table, JSON and JUnit", kUsage, run_qualify);
