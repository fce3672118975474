// tpbench list: what this tpbench can run — model presets, scenarios, allreduce backends
// (compiled in or not), workloads and checks.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "reference_engine/comm/backends.h"
#include "reference_engine/config/json_text.h"
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
  std::map<std::string, std::string> summary;  // name -> the first sentence of its description
  std::map<std::string, bool> profile;         // name -> a qualification profile (it has probes)
  struct Workload {
    const char* name;
    const char* description;
  };
  std::vector<Workload> workloads = {{"engine", "the reference engine's prefill or decode"},
                                     {"allreduce", "communicator only: allreduce of the swept message sizes"}};
};

// The first sentence of a file's "description" (cut at 56 characters) and whether it is a
// qualification profile; a file that does not read says so instead.
void describe(const std::string& path, const std::string& name, Listing& l) {
  std::string text;
  try {
    std::ifstream in(path, std::ios::binary);
    const tpb::JsonText doc = tpb::parse_json_text(tpb::read_bounded_json_text(in, path));
    if (!doc.problem.empty() || !doc.value.is_object()) {
      l.summary[name] = "(not valid JSON)";
      return;
    }
    l.profile[name] = doc.value.contains("probes") && !doc.value.contains("workload");
    const auto d = doc.value.find("description");
    if (d != doc.value.end() && d->is_string()) text = d->get<std::string>();
  } catch (const std::exception&) {
    l.summary[name] = "(unreadable)";
    return;
  }
  const std::size_t end = text.find(". ");
  if (end != std::string::npos) text = text.substr(0, end + 1);
  if (text.size() > 56) text = text.substr(0, 53) + "...";  // a line of `list` fits 100 columns
  l.summary[name] = text;
}

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
      describe(e.path().string(), rel, l);
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
  for (const auto& [dir, names] : l.scenarios) {
    nlohmann::json described = nlohmann::json::object();
    std::vector<std::string> profiles;
    for (const auto& n : names) {
      described[n] = l.summary.count(n) ? l.summary.at(n) : "";
      if (l.profile.count(n) && l.profile.at(n)) profiles.push_back(n);
    }
    out["scenarios"].push_back({{"dir", dir}, {"names", names}, {"descriptions", described}, {"profiles", profiles}});
  }
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
  // Scenarios (tpbench run NAME) and qualification profiles (tpbench qualify NAME) apart, each
  // with the first sentence of its description.
  for (const auto& [dir, names] : l.scenarios)
    for (const bool profiles : {false, true}) {
      std::printf(profiles ? "qualification profiles, tpbench qualify NAME (%s):\n" : "scenarios, tpbench run NAME (%s):\n",
                  dir.c_str());
      for (const auto& n : names)
        if ((l.profile.count(n) && l.profile.at(n)) == profiles)
          std::printf("  %-40s %s\n", n.c_str(), l.summary.count(n) ? l.summary.at(n).c_str() : "");
    }
  std::printf("allreduce backends:\n");
  for (const tpb::BackendInfo* b : tpb::backend_table())
    std::printf("  %-15s %s%s\n", b->name, b->runs_on == tpb::BackendDevice::gpu ? "gpu" : "cpu",
                b->compiled_in ? "" : "  (not compiled into this build)");
  std::printf("workloads:\n");
  for (const auto& w : l.workloads) std::printf("  %-11s %s\n", w.name, w.description);
  std::printf("checks:\n");
  for (const auto& name : tpb::known_check_names()) {
    // Wrapped under its column where it would pass 100 columns.
    std::string text = std::string(tpb::find_check(name)->summary) + (check_implemented(name) ? "" : "  (not implemented yet)");
    const std::size_t width = 100 - 27;
    std::string first = text;
    if (text.size() > width) {
      const std::size_t cut = text.rfind(' ', width);
      first = text.substr(0, cut);
      text = text.substr(cut + 1);
    } else {
      text.clear();
    }
    std::printf("  %-24s %s\n", name.c_str(), first.c_str());
    if (!text.empty()) std::printf("%27s%s\n", "", text.c_str());
  }
  return 0;
}

}  // namespace

TPB_SUBCOMMAND("list", "List presets, scenarios and the allreduce backends compiled in", kUsage, kGrammar, run_list);
