// tpbench list: what this tpbench can run — model presets, scenarios, allreduce backends
// (compiled in or not), workloads and checks.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "reference_engine/comm/backends.h"
#include "reference_engine/config/model_config.h"
#include "suite/checks/check.h"
#include "suite/cli/subcommand.h"
#include "suite/scenario.h"

namespace fs = std::filesystem;

namespace {

constexpr const char* kUsage =
    "usage: tpbench list [--help]\n"
    "List model presets, scenarios, allreduce backends (compiled in or not), workloads and checks.\n";

int run_list(const std::vector<std::string>& args) {
  if (!args.empty()) {
    std::fprintf(stderr, "tpbench list: takes no arguments (got '%s')\n", args.front().c_str());
    return 2;
  }
  std::printf("model presets (%s):\n", tpb::models_dir().c_str());
  std::vector<std::string> presets;
  if (fs::is_directory(tpb::models_dir()))
    for (const auto& e : fs::directory_iterator(tpb::models_dir()))
      if (e.path().extension() == ".json") presets.push_back(e.path().stem().string());
  std::sort(presets.begin(), presets.end());
  for (const auto& p : presets) std::printf("  %s\n", p.c_str());
  if (presets.empty()) std::printf("  (none)\n");

  for (const auto& dir : tpb::scenario_search_dirs()) {
    std::printf("scenarios (%s):\n", dir.c_str());
    std::vector<std::string> names;
    for (const auto& e : fs::recursive_directory_iterator(dir)) {
      if (e.path().extension() != ".json") continue;
      const std::string rel = fs::relative(e.path(), dir).replace_extension().string();
      if (rel.starts_with("models/")) continue;
      names.push_back(rel);
    }
    std::sort(names.begin(), names.end());
    for (const auto& n : names) std::printf("  %s\n", n.c_str());
  }

  std::printf("allreduce backends:\n");
  for (const tpb::BackendInfo* b : tpb::backend_table())
    std::printf("  %-15s %s%s\n", b->name, b->runs_on == tpb::BackendDevice::gpu ? "gpu" : "cpu",
                b->compiled_in ? "" : "  (not compiled into this build)");
  std::printf("workloads:\n  engine      the reference engine's prefill or decode\n"
              "  allreduce   communicator only: allreduce of the swept message sizes\n");
  std::printf("checks:\n");
  for (const auto& name : tpb::known_check_names()) {
    auto check = tpb::make_check(name);
    const bool implemented = check && check->evaluate({}).status != "not-implemented";
    std::printf("  %-24s%s\n", name.c_str(), implemented ? "" : "  (not implemented yet)");
  }
  return 0;
}

}  // namespace

TPB_SUBCOMMAND("list", "List presets, scenarios and the allreduce backends compiled in", kUsage, run_list);
