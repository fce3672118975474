// tpbench run: Run a scenario: expand its sweep, run every case, check, record, report.
#include "suite/cli/subcommand.h"

namespace {

constexpr const char* kUsage =
    "usage: tpbench run [--help]\n"
    "Run a scenario: expand its sweep, run every case, check, record, report.\n"
    "Not implemented yet: lands with issue #2 (foundation).\n";

int run_run(const std::vector<std::string>& /*args*/) {
  return tpb::cli::not_implemented("run", "issue #2 (foundation)");
}

}  // namespace

TPB_SUBCOMMAND("run", "Run a scenario: expand its sweep, run every case, check, record, report", kUsage, run_run);
