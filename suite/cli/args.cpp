#include "suite/cli/args.h"

#include <algorithm>

#include "tpb/check.h"
#include "tpb/did_you_mean.h"
#include "tpb/message_text.h"

namespace tpb::cli {

namespace {

const Option* find_option(const Grammar& grammar, const std::string& name) {
  for (const auto& o : grammar.options)
    if (o.name == name) return &o;
  return nullptr;
}

std::string quoted_list(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out.append(out.empty() ? "'" : ", '").append(cut_for_message(w)).append("'");
  return out;
}

}  // namespace

Args parse_args(const Grammar& grammar, const std::vector<std::string>& args) {
  const std::string see = " (see tpbench " + grammar.command + " --help)";
  auto refuse = [&](const std::string& problem) { TPB_INPUT_FAIL(grammar.command << ": " << problem << see); };
  Args out;
  for (const auto& o : grammar.options) out.declared_.push_back(o.name);
  // Help wins over every other problem of the line: the user is asking how to write it.
  for (const auto& word : args) {
    if (word == "--") break;
    if (word == "-h" || word == "--help") {
      out.help = true;
      return out;
    }
  }
  bool options_ended = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& word = args[i];
    // "-" alone is a positional (stdin); so is everything after "--".
    if (options_ended || word == "-" || !word.starts_with("-")) {
      out.positionals_.push_back(word);
      continue;
    }
    if (word == "--") {
      options_ended = true;
      continue;
    }
    const std::size_t eq = word.find('=');
    const bool inline_value = word.starts_with("--") && eq != std::string::npos;
    const std::string name = inline_value ? word.substr(0, eq) : word;
    const Option* option = find_option(grammar, name);
    if (!option) {
      std::vector<std::string> names;
      for (const auto& o : grammar.options) names.push_back(o.name);
      refuse("unknown option '" + cut_for_message(name) + "'" + did_you_mean(name, names));
    }
    std::string value;
    if (!option->takes_value) {
      if (inline_value) refuse(name + " is a switch and takes no value (got '" + cut_for_message(word) + "')");
    } else if (inline_value) {
      value = word.substr(eq + 1);
    } else {
      if (i + 1 >= args.size()) refuse(name + " needs a value");
      if (args[i + 1].starts_with("--"))
        refuse(name + " needs a value (got the option '" + cut_for_message(args[i + 1]) + "'; write " + name + "=VALUE for a value "
               "that starts with --)");
      value = args[++i];
    }
    auto& values = out.given_[name];
    if (!values.empty() && !option->repeatable) refuse(name + " given twice (it is not repeatable)");
    values.push_back(std::move(value));
  }
  if (out.positionals_.size() > grammar.max_positionals) {
    const std::vector<std::string> extra(out.positionals_.begin() + static_cast<std::ptrdiff_t>(grammar.max_positionals),
                                         out.positionals_.end());
    if (grammar.max_positionals == 0) refuse("takes no arguments but options, got " + quoted_list(extra));
    refuse("expected at most " + std::to_string(grammar.max_positionals) + " " + grammar.positionals_name +
           ", got also " + quoted_list(extra));
  }
  return out;
}

const std::vector<std::string>& Args::given(const std::string& option) const {
  TPB_CHECK(std::find(declared_.begin(), declared_.end(), option) != declared_.end(),
            "the grammar declares no option " << option);
  static const std::vector<std::string> none;
  auto it = given_.find(option);
  return it == given_.end() ? none : it->second;
}

bool Args::has(const std::string& option) const { return !given(option).empty(); }

std::optional<std::string> Args::value(const std::string& option) const {
  const auto& v = given(option);
  if (v.empty()) return std::nullopt;
  return v.back();
}

std::string Args::value_or(const std::string& option, const std::string& fallback) const {
  return value(option).value_or(fallback);
}

const std::vector<std::string>& Args::values(const std::string& option) const { return given(option); }

std::int64_t integer_value(const std::string& command, const std::string& option, const std::string& text,
                           std::int64_t min) {
  std::size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  TPB_INPUT_CHECK(used == text.size() && !text.empty(),
                  command << ": " << option << ": expected an integer, got '" << cut_for_message(text) << "'");
  TPB_INPUT_CHECK(v >= min, command << ": " << option << ": expected >= " << min << ", got " << v);
  return v;
}

}  // namespace tpb::cli
