// The tpbench subcommands. Each lives in its own cmd_<name>.cpp and registers itself with
// TPB_SUBCOMMAND, declaring its options as a Grammar (suite/cli/args.h); main.cpp parses the
// command line by it, answers --help with the usage, and dispatches. A subcommand returns the
// process exit status (0 ok, 1 a case or check failed, 2 bad input or usage, 3 nothing ran:
// run and qualify when no case could run on this machine) and may throw tpb::InputError
// (exit 2) or tpb::Error (exit 1); main prints the message as one line in the one format,
// `tpbench <name>: error: <message>` (2) or `tpbench <name>: failed: <message>` (1).
#pragma once

#include <string>
#include <vector>

#include "suite/cli/args.h"

namespace tpb::cli {

struct Subcommand {
  const char* name;     // as typed: "run"
  const char* summary;  // one line for `tpbench --help`
  const char* usage;    // full text for `tpbench <name> --help`
  Grammar grammar;      // its options and positionals (grammar.command: `name`, set on registering)
  int (*run)(const Args& args);  // the command line after the subcommand name, parsed
  bool hidden = false;  // internal roles (the rank worker) are not listed
};

std::vector<Subcommand>& registry();

struct Registrar {
  explicit Registrar(Subcommand s) {
    s.grammar.command = s.name;
    registry().push_back(s);
  }
};

// The process's command line as given (argv[0] included), for the records of a run.
const std::vector<std::string>& process_argv();
void set_process_argv(std::vector<std::string> argv);

// Prints `tpbench <command>: error: <message>` on stderr (the exit-2 line), dropping a
// redundant "<command>: " or "tpbench <command>: " at the start of the message. For the few
// places that print an error and return 2 themselves (after listing a scenario's problems).
void print_error(const std::string& command, const std::string& message);

}  // namespace tpb::cli

#define TPB_SUBCOMMAND_CONCAT2(a, b) a##b
#define TPB_SUBCOMMAND_CONCAT(a, b) TPB_SUBCOMMAND_CONCAT2(a, b)
#define TPB_SUBCOMMAND(...) \
  static ::tpb::cli::Registrar TPB_SUBCOMMAND_CONCAT(tpb_subcommand_, __LINE__){::tpb::cli::Subcommand{__VA_ARGS__}}
