// JSON text as tpbench reads it from a user's file: parsed strictly and within limits, so that
// a hostile file is one clear error and never a crash or a silent surprise.
//
//   nesting    deeper than kJsonMaxDepth arrays/objects is refused by a pre-scan before any
//              parsing: nlohmann builds the document iteratively, but dump() (error messages,
//              case ids), copies and comparisons recurse, and a 100,000-deep `control` once
//              blew the stack in the scenario validator's message. tpbench's own files nest
//              at most 6 deep.
//   duplicates an object naming a key twice is refused with its JSON path (nlohmann keeps
//              the last silently, so a file could say one thing and run another).
//   NUL        "\u0000" in a string is refused: names and paths end there in C APIs.
//   numbers    one too large for a double (1e400) is refused; JSON has no NaN or Infinity.
// Where a problem can be placed, `byte` says where (1-based, 0: unknown); line_column turns it
// into "line:column" for messages.
#pragma once

#include <cstddef>
#include <istream>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace tpb {

inline constexpr int kJsonMaxDepth = 64;  // arrays and objects, the outermost counting 1
// The largest JSON text tpbench reads (a scenario, a config.json, a checkpoint's index, a
// scenario on stdin): Kimi-K2.5's index of ~200,000 tensors is ~20 MB. Read with the bound, so
// /dev/zero or an endless pipe is refused after 64 MiB, not read until memory runs out.
inline constexpr std::size_t kJsonMaxBytes = std::size_t{64} << 20;

struct JsonText {
  nlohmann::json value;  // the document (null when there is a problem)
  std::string problem;   // "" when parsed, else e.g. "nesting deeper than 64 levels"
  std::size_t byte = 0;  // where the problem is, 1-based byte offset; 0 when unknown
};

// Parses `text` with the rules above; never throws for bad text. `problem` is in tpbench's
// words: the parser's own message without its exception code and position, what it last
// read cut to a message's length.
JsonText parse_json_text(std::string_view text);

// A JSON value as a message quotes it: its compact text, cut with its length said when it is
// longer than a message holds (tpb/message_text.h); invalid UTF-8 shown as U+FFFD.
std::string shown_json(const nlohmann::json& value);

// "12:5" for a 1-based byte offset in `text` (line and column, both 1-based).
std::string line_column(std::string_view text, std::size_t byte);

// Reads the whole file (InputError "<path>: cannot open" when it cannot) and parses it;
// a problem is an InputError "<path>:<line>:<column>: not valid JSON: <problem>"
// ("<path>: not valid JSON: ..." where there is no position).
nlohmann::json read_json_text_file(const std::string& path);

// The whole of `in`, at most kJsonMaxBytes; more is an InputError "<source>: larger than 64 MiB
// (tpbench's limit for a JSON text)".
std::string read_bounded_json_text(std::istream& in, const std::string& source);

}  // namespace tpb
