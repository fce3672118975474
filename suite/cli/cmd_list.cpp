// tpbench list: List presets, scenarios and the allreduce backends compiled in.
#include "suite/cli/subcommand.h"

namespace {

constexpr const char* kUsage =
    "usage: tpbench list [--help]\n"
    "List presets, scenarios and the allreduce backends compiled in.\n"
    "Not implemented yet: lands with issue #2 (foundation).\n";

int run_list(const std::vector<std::string>& /*args*/) {
  return tpb::cli::not_implemented("list", "issue #2 (foundation)");
}

}  // namespace

TPB_SUBCOMMAND("list", "List presets, scenarios and the allreduce backends compiled in", kUsage, run_list);
