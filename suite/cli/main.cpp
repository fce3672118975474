// tpbench: benchmark and conformance suite for tensor-parallel LLM serving.
// Dispatches to the registered subcommands; with no arguments runs the default scenario
// (quickstart-gpu or quickstart-cpu, suite/cli/cmd_run.cpp).
#include <csignal>
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "suite/cli/subcommand.h"
#include "tpb/check.h"
#include "tpb/did_you_mean.h"

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

namespace {

// The message without a leading "<command>: " or "tpbench <command>: ": library code and
// older messages name the subcommand themselves, and the line's prefix already does.
std::string without_command_prefix(const std::string& command, std::string message) {
  for (const std::string& prefix : {"tpbench " + command + ": ", command + ": "})
    if (!command.empty() && message.starts_with(prefix)) return message.substr(prefix.size());
  return message;
}

// "tpbench run" for a subcommand's lines, "tpbench" before one is known.
std::string who(const std::string& command) { return command.empty() ? "tpbench" : "tpbench " + command; }

}  // namespace

void print_error(const std::string& command, const std::string& message) {
  std::fprintf(stderr, "%s: error: %s\n", who(command).c_str(), without_command_prefix(command, message).c_str());
}

namespace {

void print_overview() {
  std::printf(
      "usage: tpbench [<subcommand> [args] | --help]\n"
      "With no arguments, runs the engine on this machine: scenarios/quickstart-gpu.json (the\n"
      "Kimi-K2.5 slice, TP 1 and 2, every GPU allreduce backend) where CUDA is built in and a GPU\n"
      "is visible, else scenarios/quickstart-cpu.json (a tiny DeepSeek-V3, TP 1 and 2, shm).\n"
      "The allreduce sweep: tpbench run allreduce-sweep (GPUs) or ci-smoke (CPU).\n"
      "tpbench --version (-V, version) says what this binary was built from.\n\nsubcommands:\n");
  auto subcommands = registry();
  std::sort(subcommands.begin(), subcommands.end(),
            [](const Subcommand& a, const Subcommand& b) { return std::string(a.name) < b.name; });
  for (const auto& s : subcommands) {
    if (!s.hidden) std::printf("  %-9s %s\n", s.name, s.summary);
  }
  std::printf("\n`tpbench <subcommand> --help` for details. Every option takes `--opt VALUE` or\n"
              "`--opt=VALUE`; `--` ends the options. Errors are one line on stderr, `tpbench\n"
              "<subcommand>: error: ...` (bad input or usage) or `... failed: ...` (a failure).\n"
              "Exit status: 0 ok, 1 failed case or check, 2 bad input or usage\n(compare: nothing "
              "comparable), 3 nothing ran (run, qualify: no case could run on this machine).\n");
}

const Subcommand* find_subcommand(const std::string& name) {
  for (const auto& s : registry())
    if (name == s.name) return &s;
  return nullptr;
}

// Runs the subcommand args name; `command` receives its name as soon as it is known, for
// the error line main prints when it throws.
int dispatch(std::vector<std::string> args, std::string& command) {
  if (args.empty()) args = {"run", "quickstart"};
  std::string name = args.front();
  if (name == "--help" || name == "-h" || name == "help") {
    print_overview();
    return 0;
  }
  if (name == "--version" || name == "-V") name = "version";
  const Subcommand* s = find_subcommand(name);
  if (s == nullptr) {
    std::vector<std::string> names;
    for (const auto& sub : registry())
      if (!sub.hidden) names.emplace_back(sub.name);
    TPB_INPUT_FAIL("unknown subcommand '" << name << "'" << did_you_mean(name, names) << " (see tpbench --help)");
  }
  command = s->name;
  const Args parsed = parse_args(s->grammar, std::vector<std::string>(args.begin() + 1, args.end()));
  if (parsed.help && !s->hidden) {
    std::printf("%s", s->usage);
    return 0;
  }
  return s->run(parsed);
}

}  // namespace
}  // namespace tpb::cli

int main(int argc, char** argv) {
  // `tpbench run ... | head` closes our stdout early: the default SIGPIPE would kill the run
  // mid-sweep and leave run.json without its summary. Ignored, a write to the closed pipe only
  // fails (EPIPE), and the run finishes and records everything (the ranks inherit it).
  std::signal(SIGPIPE, SIG_IGN);
  tpb::cli::set_process_argv(std::vector<std::string>(argv, argv + argc));
  std::vector<std::string> args(argv + 1, argv + argc);
  std::string command;  // the subcommand, once known: every error line names it
  auto failed = [&](const std::string& message) {
    std::fprintf(stderr, "%s: failed: %s\n", tpb::cli::who(command).c_str(),
                 tpb::cli::without_command_prefix(command, message).c_str());
    return 1;
  };
  try {
    return tpb::cli::dispatch(std::move(args), command);
  } catch (const tpb::InputError& e) {
    tpb::cli::print_error(command, e.what());
    return 2;
  } catch (const nlohmann::json::exception& e) {
    // A JSON value of an unexpected shape that no validator caught: it came from an input
    // file, so it is bad input (2), said plainly, not "failed" (1, which means a failed case).
    tpb::cli::print_error(command, std::string("malformed JSON input: ") + e.what());
    return 2;
  } catch (const std::exception& e) {
    return failed(e.what());
  } catch (...) {
    return failed("an unknown exception");
  }
}
