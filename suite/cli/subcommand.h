// The tpbench subcommands. Each lives in its own cmd_<name>.cpp and registers itself with
// TPB_SUBCOMMAND; main.cpp only dispatches. A subcommand returns the process exit status
// (0 ok, 1 a case or check failed, 2 bad input or usage, 3 nothing ran: run and qualify
// when no case could run on this machine) and may throw tpb::InputError
// (exit 2) or tpb::Error (exit 1); main prints the message as one line.
#pragma once

#include <string>
#include <vector>

namespace tpb::cli {

struct Subcommand {
  const char* name;     // as typed: "run"
  const char* summary;  // one line for `tpbench --help`
  const char* usage;    // full text for `tpbench <name> --help`
  int (*run)(const std::vector<std::string>& args);  // args after the subcommand name
  bool hidden = false;  // internal roles (the rank worker) are not listed
};

std::vector<Subcommand>& registry();

struct Registrar {
  explicit Registrar(Subcommand s) { registry().push_back(s); }
};

// The process's command line as given (argv[0] included), for the records of a run.
const std::vector<std::string>& process_argv();
void set_process_argv(std::vector<std::string> argv);

// True when args ask for help; the caller prints `usage` and returns 0.
bool wants_help(const std::vector<std::string>& args);

// For subcommands whose issue has not landed: says so on stderr and returns 2.
int not_implemented(const char* name, const char* issue);

}  // namespace tpb::cli

#define TPB_SUBCOMMAND_CONCAT2(a, b) a##b
#define TPB_SUBCOMMAND_CONCAT(a, b) TPB_SUBCOMMAND_CONCAT2(a, b)
#define TPB_SUBCOMMAND(...) \
  static ::tpb::cli::Registrar TPB_SUBCOMMAND_CONCAT(tpb_subcommand_, __LINE__){::tpb::cli::Subcommand{__VA_ARGS__}}
