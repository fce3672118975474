// tpbench compare: Compare two results.jsonl files metric by metric.
#include "suite/cli/subcommand.h"

namespace {

constexpr const char* kUsage =
    "usage: tpbench compare [--help]\n"
    "Compare two results.jsonl files metric by metric.\n"
    "Not implemented yet: lands with issue #7 (checks, baselines, qualify).\n";

int run_compare(const std::vector<std::string>& /*args*/) {
  return tpb::cli::not_implemented("compare", "issue #7 (checks, baselines, qualify)");
}

}  // namespace

TPB_SUBCOMMAND("compare", "Compare two results.jsonl files metric by metric", kUsage, run_compare);
