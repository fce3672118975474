// tpbench: benchmark and conformance suite for tensor-parallel LLM serving.
// Dispatches to the registered subcommands; with no arguments runs the default scenario
// (quickstart-gpu or quickstart-cpu, suite/cli/cmd_run.cpp).
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "suite/cli/subcommand.h"
#include "tpb/check.h"

namespace tpb::cli {

std::vector<Subcommand>& registry() {
  static std::vector<Subcommand> subcommands;
  return subcommands;
}

namespace {
std::vector<std::string>& argv_storage() {
  static std::vector<std::string> argv;
  return argv;
}
}  // namespace

const std::vector<std::string>& process_argv() { return argv_storage(); }
void set_process_argv(std::vector<std::string> argv) { argv_storage() = std::move(argv); }

bool wants_help(const std::vector<std::string>& args) {
  return std::any_of(args.begin(), args.end(),
                     [](const std::string& a) { return a == "--help" || a == "-h"; });
}

int not_implemented(const char* name, const char* issue) {
  std::fprintf(stderr, "tpbench %s: not implemented yet (%s); nothing was run\n", name, issue);
  return 2;
}

namespace {

void print_overview() {
  std::printf(
      "usage: tpbench [<subcommand> [args] | --help]\n"
      "With no arguments, runs the engine on this machine: scenarios/quickstart-gpu.json (the\n"
      "Kimi-K2.5 slice, TP 1 and 2, every GPU allreduce backend) where CUDA is built in and a GPU\n"
      "is visible, else scenarios/quickstart-cpu.json (a tiny DeepSeek-V3, TP 1 and 2, shm).\n"
      "The allreduce sweep: tpbench run allreduce-sweep (GPUs) or ci-smoke (CPU).\n\nsubcommands:\n");
  auto subcommands = registry();
  std::sort(subcommands.begin(), subcommands.end(),
            [](const Subcommand& a, const Subcommand& b) { return std::string(a.name) < b.name; });
  for (const auto& s : subcommands) {
    if (!s.hidden) std::printf("  %-9s %s\n", s.name, s.summary);
  }
  std::printf("\n`tpbench <subcommand> --help` for details. Exit status: 0 ok, 1 failed case or "
              "check, 2 bad input or usage\n(compare: nothing comparable), 3 nothing ran (run, "
              "qualify: no case could run on this machine).\n");
}

int dispatch(std::vector<std::string> args) {
  if (args.empty()) args = {"run", "quickstart"};
  const std::string name = args.front();
  if (name == "--help" || name == "-h" || name == "help") {
    print_overview();
    return 0;
  }
  for (const auto& s : registry()) {
    if (name != s.name) continue;
    std::vector<std::string> rest(args.begin() + 1, args.end());
    if (!s.hidden && wants_help(rest)) {
      std::printf("%s", s.usage);
      return 0;
    }
    return s.run(rest);
  }
  std::fprintf(stderr, "tpbench: unknown subcommand '%s' (see tpbench --help)\n", name.c_str());
  return 2;
}

}  // namespace
}  // namespace tpb::cli

int main(int argc, char** argv) {
  tpb::cli::set_process_argv(std::vector<std::string>(argv, argv + argc));
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    return tpb::cli::dispatch(std::move(args));
  } catch (const tpb::InputError& e) {
    std::fprintf(stderr, "tpbench: error: %s\n", e.what());
    return 2;
  } catch (const nlohmann::json::exception& e) {
    // A JSON value of an unexpected shape that no validator caught: it came from an input
    // file, so it is bad input (2), said plainly, not "failed" (1, which means a failed case).
    std::fprintf(stderr, "tpbench: error: malformed JSON input: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tpbench: failed: %s\n", e.what());
    return 1;
  } catch (...) {
    std::fprintf(stderr, "tpbench: failed: an unknown exception\n");
    return 1;
  }
}
