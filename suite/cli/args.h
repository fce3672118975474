// The one argument grammar of every tpbench subcommand. A subcommand declares its options
// (a Grammar) and reads what was given from Args; the rules, and their error messages, live
// here once, so `run --results-dir=/x` and `plan --tp=8` are read alike:
//
//   --name VALUE and --name=VALUE  an option that takes a value; a separate VALUE that starts
//                                  with "--" is refused as missing (`--results-dir --no-report`
//                                  is a forgotten value, not a folder); --name=--x passes one
//   --name                         a switch; --name=VALUE is refused
//   -h, --help                     anywhere before `--`: Args::help, the rest is not judged
//   --                             every argument after it is a positional ("-" is one too:
//                                  stdin, by the subcommands that read it)
//   anything else                  a positional, at most Grammar::max_positionals of them
//
// Refused, as tpb::InputError naming the subcommand and the option: an undeclared option, a
// missing value, a switch given a value, a non-repeatable option given twice, too many
// positionals. What a value must look like (a number, one of a set) is the subcommand's to
// check: it knows what the value means.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tpb::cli {

struct Option {
  std::string name;          // as typed, dashes included: "--results-dir"
  bool takes_value = false;  // false: a switch
  bool repeatable = false;   // may be given more than once; every value is kept, in order
};

// What a subcommand accepts.
struct Grammar {
  std::vector<Option> options;
  std::size_t max_positionals = 0;  // arguments that are not options, e.g. SCENARIO: 1
  std::string positionals_name;     // how the usage calls them, for messages: "SCENARIO"
  std::string command = "";         // "run": names the subcommand in every message; a registered
                                    // subcommand's is its name (Registrar fills it in)
};

// What one command line gave, read by option name. Asking for an option the grammar does not
// declare is a programming error (tpb::Error): a typo there must not read as "not given".
class Args {
 public:
  bool help = false;  // -h or --help was given

  bool has(const std::string& option) const;  // given at least once (a switch, or with a value)
  // The value of a non-repeatable option; nullopt when it was not given.
  std::optional<std::string> value(const std::string& option) const;
  std::string value_or(const std::string& option, const std::string& fallback) const;
  // Every value of a repeatable option, in the order given (empty when not given).
  const std::vector<std::string>& values(const std::string& option) const;
  const std::vector<std::string>& positionals() const { return positionals_; }

 private:
  friend Args parse_args(const Grammar& grammar, const std::vector<std::string>& args);
  const std::vector<std::string>& given(const std::string& option) const;

  std::map<std::string, std::vector<std::string>> given_;  // option -> values ("" for a switch)
  std::vector<std::string> declared_;
  std::vector<std::string> positionals_;
};

// Reads `args` (the words after the subcommand's name) by `grammar`'s rules; throws
// tpb::InputError "<command>: <problem> (see tpbench <command> --help)".
Args parse_args(const Grammar& grammar, const std::vector<std::string>& args);

// An option's value read whole as an integer >= `min`; else tpb::InputError
// "<command>: <option>: expected an integer, got '...'" (the value cut for the message) or
// "<command>: <option>: expected >= <min>, got <value>".
std::int64_t integer_value(const std::string& command, const std::string& option, const std::string& text,
                           std::int64_t min);

}  // namespace tpb::cli
