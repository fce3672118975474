// tpbench: benchmark and conformance suite for tensor-parallel LLM serving.
// Dispatches to the registered subcommands; with no arguments runs the default scenario
// (quickstart-gpu or quickstart-cpu, suite/cli/cmd_run.cpp).
#include <csignal>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "suite/cli/subcommand.h"
#include "tpb/check.h"
#include "tpb/did_you_mean.h"
#include "tpb/message_text.h"

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

// The last guard of "a message quotes a value, not the whole of it" (tpb/message_text.h):
// the sources cut what they quote; a line that still runs past this is cut here, its length said.
constexpr std::size_t kMaxErrorLineChars = 1000;

std::string lines_cut(const std::string& message) {
  std::string out;
  for (std::size_t start = 0; start <= message.size();) {
    const std::size_t end = std::min(message.find('\n', start), message.size());
    out += tpb::cut_for_message(std::string_view(message).substr(start, end - start), kMaxErrorLineChars);
    if (end < message.size()) out += '\n';
    start = end + 1;
  }
  return out;
}

}  // namespace

void print_error(const std::string& command, const std::string& message) {
  std::fprintf(stderr, "%s: error: %s\n", who(command).c_str(), lines_cut(without_command_prefix(command, message)).c_str());
}

namespace {

// A library's exception text without its code: "[json.exception.type_error.302] type must be
// string, but is number" -> "type must be string, but is number".
std::string without_library_code(const std::string& what) {
  if (what.rfind("[json.exception.", 0) != 0) return what;
  const auto end = what.find("] ");
  return end == std::string::npos ? what : what.substr(end + 2);
}

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
                 tpb::cli::lines_cut(tpb::cli::without_command_prefix(command, message)).c_str());
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
    // The validators name the file and the path; reaching here is a check missing in tpbench.
    tpb::cli::print_error(command, "an input file holds a JSON value of a shape tpbench does not check for (" +
                                       tpb::cli::without_library_code(e.what()) +
                                       "); please report this with the command line");
    return 2;
  } catch (const std::filesystem::filesystem_error& e) {
    // A folder or file the machine refused (a full or read-only disk), in our words: the path and errno.
    return failed(e.path1().string() + (e.path2().empty() ? "" : " -> " + e.path2().string()) + ": " + e.code().message());
  } catch (const std::exception& e) {
    return failed(e.what());
  } catch (...) {
    return failed("an unknown exception");
  }
}
