// tpbench list: what this tpbench can run — model presets, scenarios, allreduce backends
// (compiled in or not), workloads and checks.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "reference_engine/comm/backends.h"
#include "reference_engine/config/model_config.h"
#include "suite/checks/check.h"
#include "suite/cli/subcommand.h"
#include "suite/scenario/scenario.h"

namespace fs = std::filesystem;

namespace {

constexpr const char* kUsage =
    "usage: tpbench list [--json]\n"
    "List model presets, scenarios, allreduce backends (compiled in or not), workloads and checks,\n"
    "each check with what it compares.\n"
    "  --json   one JSON object: presets, scenarios (per folder searched), backends, workloads,\n"
    "           checks (name, description, implemented)\n";

const tpb::cli::Grammar kGrammar = {{{"--json"}}, 0, ""};

// What `tpbench list` shows, gathered once for the text and the JSON.
struct Listing {
  std::vector<std::string> presets;
  std::vector<std::pair<std::string, std::vector<std::string>>> scenarios;  // folder -> names
  struct Workload {
    const char* name;
    const char* description;
  };
  std::vector<Workload> workloads = {{"engine", "the reference engine's prefill or decode"},
                                     {"allreduce", "communicator only: allreduce of the swept message sizes"}};
};

Listing gather() {
  Listing l;
  if (fs::is_directory(tpb::models_dir()))
    for (const auto& e : fs::directory_iterator(tpb::models_dir()))
      if (e.path().extension() == ".json") l.presets.push_back(e.path().stem().string());
  std::sort(l.presets.begin(), l.presets.end());
  for (const auto& dir : tpb::scenario_search_dirs()) {
    std::vector<std::string> names;
    for (const auto& e : fs::recursive_directory_iterator(dir)) {
      if (e.path().extension() != ".json") continue;
      const std::string rel = fs::relative(e.path(), dir).replace_extension().string();
      if (rel.starts_with("models/")) continue;
      names.push_back(rel);
    }
    std::sort(names.begin(), names.end());
    l.scenarios.emplace_back(dir, std::move(names));
  }
  return l;
}

bool check_implemented(const std::string& name) {
  auto check = tpb::make_check(name);
  return check && check->evaluate({}).status != "not-implemented";
}

void print_json(const Listing& l) {
  nlohmann::json out;
  out["models_dir"] = tpb::models_dir();
  out["presets"] = l.presets;
  out["scenarios"] = nlohmann::json::array();
  for (const auto& [dir, names] : l.scenarios) out["scenarios"].push_back({{"dir", dir}, {"names", names}});
  out["allreduce_backends"] = nlohmann::json::array();
  for (const tpb::BackendInfo* b : tpb::backend_table())
    out["allreduce_backends"].push_back({{"name", b->name},
                                         {"runs_on", b->runs_on == tpb::BackendDevice::gpu ? "gpu" : "cpu"},
                                         {"compiled_in", b->compiled_in}});
  out["workloads"] = nlohmann::json::array();
  for (const auto& w : l.workloads) out["workloads"].push_back({{"name", w.name}, {"description", w.description}});
  out["checks"] = nlohmann::json::array();
  for (const auto& name : tpb::known_check_names())
    out["checks"].push_back({{"name", name},
                             {"description", tpb::find_check(name)->summary},
                             {"implemented", check_implemented(name)}});
  std::printf("%s\n", out.dump(2).c_str());
}

int run_list(const tpb::cli::Args& args) {
  const Listing l = gather();
  if (args.has("--json")) {
    print_json(l);
    return 0;
  }
  std::printf("model presets (%s):\n", tpb::models_dir().c_str());
  for (const auto& p : l.presets) std::printf("  %s\n", p.c_str());
  if (l.presets.empty()) std::printf("  (none)\n");
  for (const auto& [dir, names] : l.scenarios) {
    std::printf("scenarios (%s):\n", dir.c_str());
    for (const auto& n : names) std::printf("  %s\n", n.c_str());
  }
  std::printf("allreduce backends:\n");
  for (const tpb::BackendInfo* b : tpb::backend_table())
    std::printf("  %-15s %s%s\n", b->name, b->runs_on == tpb::BackendDevice::gpu ? "gpu" : "cpu",
                b->compiled_in ? "" : "  (not compiled into this build)");
  std::printf("workloads:\n");
  for (const auto& w : l.workloads) std::printf("  %-11s %s\n", w.name, w.description);
  std::printf("checks:\n");
  for (const auto& name : tpb::known_check_names())
    std::printf("  %-24s %s%s\n", name.c_str(), tpb::find_check(name)->summary,
                check_implemented(name) ? "" : "  (not implemented yet)");
  return 0;
}

}  // namespace

TPB_SUBCOMMAND("list", "List presets, scenarios and the allreduce backends compiled in", kUsage, kGrammar, run_list);
