// The rules of reference_engine/config/json_text.h (nesting depth, duplicate keys, NUL,
// numbers out of range), and each reader that takes a user's JSON applying them: scenarios,
// model configs, JSON Lines (report/compare), results.jsonl (--resume) (issue 17, part 7).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "reference_engine/config/json_text.h"
#include "reference_engine/config/model_config.h"
#include "suite/records/jsonl.h"
#include "suite/records/results.h"
#include "suite/scenario/scenario.h"
#include "tpb/check.h"
#include "tpb/message_text.h"
#include "input_test_support.h"

namespace tpb {
namespace {

namespace fs = std::filesystem;
using test::input_error_of;
using test::TempFile;

std::string nested(int depth, const std::string& open, const std::string& close, const std::string& inner = "1") {
  std::string s;
  for (int i = 0; i < depth; ++i) s += open;
  s += inner;
  for (int i = 0; i < depth; ++i) s += close;
  return s;
}


TEST(JsonText, NestingIsBoundedBeforeParsing) {
  EXPECT_EQ(parse_json_text(nested(kJsonMaxDepth, "[", "]")).problem, "");
  const JsonText deep = parse_json_text(nested(kJsonMaxDepth + 1, "[", "]"));
  EXPECT_EQ(deep.problem, "nesting deeper than 64 levels");
  EXPECT_EQ(deep.byte, static_cast<std::size_t>(kJsonMaxDepth + 1));
  EXPECT_TRUE(deep.value.is_null());
  // 100,000 levels: once a stack overflow in the scenario validator's message.
  EXPECT_EQ(parse_json_text(nested(100000, "{\"a\":", "}")).problem, "nesting deeper than 64 levels");
  // Brackets inside strings do not count.
  EXPECT_EQ(parse_json_text("[\"" + std::string(1000, '[') + "\\\"\"]").problem, "");
}

TEST(JsonText, DuplicateKeysAreRefusedWithTheirPath) {
  EXPECT_EQ(parse_json_text(R"({"a": 1, "a": 2})").problem, "$.a: duplicate key \"a\"");
  EXPECT_EQ(parse_json_text(R"({"x": [0, {"k": 1}, {"k": 1, "y": {"z": 1, "z": 2}}]})").problem,
            "$.x[2].y.z: duplicate key \"z\"");
  EXPECT_EQ(parse_json_text(R"([{"k": 1}, {"k": 2}])").problem, "");  // same key, different objects
  EXPECT_EQ(parse_json_text(R"({"a": 1, "\u0061": 2})").problem, "$.a: duplicate key \"a\"");  // escapes decoded
}

TEST(JsonText, NulAndHugeNumbersAreRefused) {
  EXPECT_EQ(parse_json_text(R"({"name": "a\u0000b"})").problem, "a string holds \\u0000 (NUL)");
  EXPECT_EQ(parse_json_text(R"({"name": "a\\u0000b"})").problem, "");  // a backslash, then text
  EXPECT_NE(parse_json_text(std::string("{\"a\": \"x\0y\"}", 12)).problem, "");  // a raw NUL: a syntax error
  EXPECT_EQ(parse_json_text(R"({"x": 1e400})").problem, "the number 1e400 is too large for a double");
  EXPECT_NE(parse_json_text(R"({"x": NaN})").problem, "");
  EXPECT_EQ(line_column("ab\ncd\nef", 5), "2:2");
}

// Problems in tpbench's words (issue 37, finding 10): never nlohmann's exception code, nor its
// own position (the readers say line:column of the file), and what it last read cut.
TEST(JsonText, ProblemsAreInTpbenchsWords) {
  const JsonText bad = parse_json_text("{\"schema\": 1, \"name\": x}");
  EXPECT_EQ(bad.problem, "invalid literal; last read: '\"name\": x'");
  EXPECT_EQ(bad.byte, 23u);
  EXPECT_EQ(parse_json_text("").problem, "unexpected end of input; expected '[', '{', or a literal");
  EXPECT_EQ(parse_json_text("[1, 2}").problem, "unexpected '}'; expected ']'");
  EXPECT_EQ(parse_json_text("{\"a\": \"\xff\"}").problem, "invalid string: ill-formed UTF-8 byte; last read: '\"\\xFF'");
  // An unterminated 5,000-character string: what was read is cut, its length said.
  const std::string open = parse_json_text("{\"a\": \"" + std::string(5000, 'L')).problem;
  EXPECT_LT(open.size(), 160u) << open;
  EXPECT_NE(open.find("... (5001 characters)'"), std::string::npos) << open;
  for (const std::string text : {"{x", "[1,]", "{\"a\" 1}", "nul", "1e400", "\"\\u12\""}) {
    const std::string problem = parse_json_text(text).problem;
    EXPECT_NE(problem, "") << text;
    EXPECT_EQ(problem.find("json.exception"), std::string::npos) << problem;
    EXPECT_EQ(problem.find("parse error at line"), std::string::npos) << problem;
  }
}

TEST(JsonText, ShownValuesAreCutWithTheirLength) {
  EXPECT_EQ(shown_json(nlohmann::json("abc")), "\"abc\"");
  EXPECT_EQ(shown_json(nlohmann::json(std::string(5000, 'L'))),
            "\"" + std::string(kMessageValueChars - 1, 'L') + "... (5002 characters)");
  EXPECT_EQ(shown_json(nlohmann::json(std::string("a\xff"))), "\"a\xEF\xBF\xBD\"");  // invalid UTF-8: U+FFFD, no throw
}

TEST(JsonText, EveryReaderRefusesDeepNesting) {
  const TempFile scenario("deep_scenario.json",
                          "{\"schema\": 1, \"name\": \"deep\",\n \"control\": " + nested(100000, "{\"tp\":", "}") + "}");
  const std::string s = input_error_of([&] { load_scenario(scenario.path()); });
  // The document is level 1; control's 64th '{' (6 bytes each, from column 13 of line 2) is level 65.
  const int column = 13 + (kJsonMaxDepth - 1) * 6;
  EXPECT_NE(s.find(scenario.path() + ":2:" + std::to_string(column) + ": not valid JSON: nesting deeper"),
            std::string::npos)
      << s;

  const TempFile config("deep_config.json", "{\"vision_config\": " + nested(5000, "[", "]") + "}");
  EXPECT_NE(input_error_of([&] { load_model_config(config.path()); }).find(": not valid JSON: nesting deeper"),
            std::string::npos);

  const TempFile results("deep.jsonl", "{\"case_id\": \"a\"}\n{\"x\": " + nested(5000, "[", "]") + "}\n");
  EXPECT_NE(input_error_of([&] { read_jsonl(results.path()); }).find("deep.jsonl:2: not valid JSON (nesting deeper"),
            std::string::npos);
  int damaged = 0;
  EXPECT_EQ(read_results(results.path(), &damaged).size(), 1u);
  EXPECT_EQ(damaged, 1);
  EXPECT_NE(input_error_of([&] { read_json_file(results.path()); }), "");
}

TEST(JsonText, DuplicateKeysInAScenarioAreRefused) {
  const TempFile scenario("dup_scenario.json", R"({"schema": 1, "name": "a", "name": "b"})");
  EXPECT_NE(input_error_of([&] { load_scenario(scenario.path()); }).find("not valid JSON: $.name: duplicate key"),
            std::string::npos);
}

}  // namespace
}  // namespace tpb
