// tpbench report: Write plots, report.html and summary.md for a results folder.
#include "suite/cli/subcommand.h"

namespace {

constexpr const char* kUsage =
    "usage: tpbench report [--help]\n"
    "Write plots, report.html and summary.md for a results folder.\n"
    "Not implemented yet: lands with issue #8 (reports).\n";

int run_report(const std::vector<std::string>& /*args*/) {
  return tpb::cli::not_implemented("report", "issue #8 (reports)");
}

}  // namespace

TPB_SUBCOMMAND("report", "Write plots, report.html and summary.md for a results folder", kUsage, run_report);
