// The one argument grammar of tpbench's subcommands (suite/cli/args.h): every rule, each
// through a command line that would break if the rule did.
#include "suite/cli/args.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tpb/check.h"

namespace tpb::cli {
namespace {

// A grammar shaped like run's: a valued option, a switch, a repeatable one, one positional.
const Grammar kRun = {{{"--results-dir", true}, {"--dry-run"}, {"--case", true, true}}, 1, "SCENARIO", "run"};

// The InputError message of parsing `args`, or "" when it parsed.
std::string refusal(const Grammar& g, const std::vector<std::string>& args) {
  try {
    parse_args(g, args);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// The refusal names the subcommand, the option and where to read the usage.
void expect_refused(const std::vector<std::string>& args, const std::string& option, const std::string& what) {
  const std::string message = refusal(kRun, args);
  ASSERT_FALSE(message.empty()) << "accepted: " << testing::PrintToString(args);
  EXPECT_EQ(message.rfind("run: ", 0), 0u) << message;
  EXPECT_NE(message.find(option), std::string::npos) << message;
  EXPECT_NE(message.find(what), std::string::npos) << message;
  EXPECT_NE(message.find("see tpbench run --help"), std::string::npos) << message;
}

TEST(CliArgs, ValueAsNextWordOrAfterEquals) {
  EXPECT_EQ(parse_args(kRun, {"--results-dir", "/x"}).value("--results-dir"), "/x");
  EXPECT_EQ(parse_args(kRun, {"--results-dir=/x"}).value("--results-dir"), "/x");
  // Only the first '=' splits: a value may hold more.
  EXPECT_EQ(parse_args(kRun, {"--results-dir=a=b"}).value("--results-dir"), "a=b");
  EXPECT_EQ(parse_args(kRun, {"--results-dir="}).value("--results-dir"), "");
  // A value may start with one dash (a negative number, "-" for stdin).
  EXPECT_EQ(parse_args(kRun, {"--results-dir", "-1"}).value("--results-dir"), "-1");
}

TEST(CliArgs, SwitchesAndAbsentOptions) {
  const Args a = parse_args(kRun, {"--dry-run"});
  EXPECT_TRUE(a.has("--dry-run"));
  EXPECT_FALSE(a.has("--results-dir"));
  EXPECT_EQ(a.value("--results-dir"), std::nullopt);
  EXPECT_EQ(a.value_or("--results-dir", "results"), "results");
  EXPECT_FALSE(parse_args(kRun, {}).has("--dry-run"));
}

TEST(CliArgs, RepeatableKeepsEveryValueInOrder) {
  const Args a = parse_args(kRun, {"--case", "a", "--case=b", "--case", "c"});
  EXPECT_EQ(a.values("--case"), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(parse_args(kRun, {}).values("--case").empty());
}

TEST(CliArgs, Positionals) {
  EXPECT_EQ(parse_args(kRun, {"ci-smoke", "--dry-run"}).positionals(), std::vector<std::string>{"ci-smoke"});
  EXPECT_EQ(parse_args(kRun, {"--dry-run", "ci-smoke"}).positionals(), std::vector<std::string>{"ci-smoke"});
  EXPECT_EQ(parse_args(kRun, {"-"}).positionals(), std::vector<std::string>{"-"});  // stdin
  EXPECT_TRUE(parse_args(kRun, {}).positionals().empty());
}

TEST(CliArgs, DoubleDashEndsOptions) {
  const Args a = parse_args(kRun, {"--dry-run", "--", "--odd-name.json"});
  EXPECT_TRUE(a.has("--dry-run"));
  EXPECT_EQ(a.positionals(), std::vector<std::string>{"--odd-name.json"});
  // After "--", -h is a name too, not a request for help.
  EXPECT_FALSE(parse_args(kRun, {"--", "-h"}).help);
}

TEST(CliArgs, HelpWinsOverEveryOtherProblem) {
  EXPECT_TRUE(parse_args(kRun, {"-h"}).help);
  EXPECT_TRUE(parse_args(kRun, {"--help"}).help);
  EXPECT_TRUE(parse_args(kRun, {"--no-such", "--help"}).help);
  EXPECT_TRUE(parse_args(kRun, {"a", "b", "-h"}).help);
  EXPECT_FALSE(parse_args(kRun, {"--dry-run"}).help);
}

TEST(CliArgs, UnknownOptionRefused) {
  expect_refused({"--no-such"}, "'--no-such'", "unknown option");
  expect_refused({"--no-such=3"}, "'--no-such'", "unknown option");
  expect_refused({"-x"}, "'-x'", "unknown option");
}

TEST(CliArgs, MissingValueRefused) {
  expect_refused({"--results-dir"}, "--results-dir", "needs a value");
  // The next word is an option: the value was forgotten, it is not a folder named --dry-run.
  expect_refused({"--results-dir", "--dry-run"}, "--results-dir", "needs a value");
  // Such a value is still possible, written with '='.
  EXPECT_EQ(parse_args(kRun, {"--results-dir=--dry-run"}).value("--results-dir"), "--dry-run");
}

TEST(CliArgs, SwitchGivenAValueRefused) { expect_refused({"--dry-run=yes"}, "--dry-run", "takes no value"); }

TEST(CliArgs, NonRepeatableGivenTwiceRefused) {
  expect_refused({"--results-dir", "a", "--results-dir", "b"}, "--results-dir", "given twice");
  expect_refused({"--results-dir=a", "--results-dir=a"}, "--results-dir", "given twice");
  expect_refused({"--dry-run", "--dry-run"}, "--dry-run", "given twice");
}

TEST(CliArgs, TooManyPositionalsRefused) {
  expect_refused({"a", "b"}, "'b'", "at most 1 SCENARIO");
  const Grammar none = {{{"--json"}}, 0, "", "list"};
  const std::string message = refusal(none, {"x"});
  EXPECT_EQ(message.rfind("list: ", 0), 0u) << message;
  EXPECT_NE(message.find("'x'"), std::string::npos) << message;
}

TEST(CliArgs, AskingForAnUndeclaredOptionIsAProgrammingError) {
  const Args a = parse_args(kRun, {});
  try {
    a.has("--results-dri");
    FAIL() << "an undeclared option read as absent";
  } catch (const InputError&) {
    FAIL() << "a typo in the code is not the user's bad input";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--results-dri"), std::string::npos);
  }
}

}  // namespace
}  // namespace tpb::cli
