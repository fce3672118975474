// tpbench logits: Write a model's logits for given token ids as safetensors.
#include "suite/cli/subcommand.h"

namespace {

constexpr const char* kUsage =
    "usage: tpbench logits [--help]\n"
    "Write a model's logits for given token ids as safetensors.\n"
    "Not implemented yet: lands with issue #3 (CPU reference engine).\n";

int run_logits(const std::vector<std::string>& /*args*/) {
  return tpb::cli::not_implemented("logits", "issue #3 (CPU reference engine)");
}

}  // namespace

TPB_SUBCOMMAND("logits", "Write a model's logits for given token ids as safetensors", kUsage, run_logits);
