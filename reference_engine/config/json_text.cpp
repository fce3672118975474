// Strict, bounded JSON parsing (see json_text.h): a pre-scan for depth and "\u0000", then
// nlohmann's parser with a callback that keeps the keys of each open object.
#include "reference_engine/config/json_text.h"

#include <cstdio>
#include <fstream>
#include <iterator>
#include <set>
#include <vector>

#include "tpb/check.h"
#include "tpb/message_text.h"

namespace tpb {

namespace {

// What the parser last read, for a message: control and non-ASCII bytes as \xNN (the text may
// not be valid UTF-8: that may be the problem), cut to a message's length.
std::string shown_snippet(std::string_view raw) {
  std::string out;
  for (const char c : raw) {
    const auto b = static_cast<unsigned char>(c);
    if (b >= 0x20 && b < 0x7f) {
      out += c;
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02X", b);
      out += hex;
    }
  }
  return cut_for_message(out, 40);
}

// nlohmann's message in tpbench's words (issue 37, finding 10): without its
// "[json.exception.parse_error.101]" code and its "parse error at line 1, column 11:" (the
// caller says where, as line:column of the file), and with what it last read cut. E.g.
// "syntax error while parsing value - invalid string: missing closing quote; last read: '"abc'"
// becomes "invalid string: missing closing quote; last read: '"abc'".
std::string parse_problem_text(const std::string& what) {
  std::string s = what;
  if (s.rfind("[json.exception.", 0) == 0) {
    const auto end = s.find("] ");
    if (end != std::string::npos) s.erase(0, end + 2);
  }
  if (s.rfind("parse error", 0) == 0) {
    const auto colon = s.find(": ");
    if (colon != std::string::npos) s.erase(0, colon + 2);
  }
  if (s.rfind("syntax error while parsing ", 0) == 0) {
    const auto dash = s.find(" - ");
    if (dash != std::string::npos) s.erase(0, dash + 3);
  }
  if (s.rfind("number overflow parsing '", 0) == 0 && s.size() > 26 && s.back() == '\'')
    // The report's words for the same rule (report/results_reader.py).
    return "the number " + shown_snippet(std::string_view(s).substr(25, s.size() - 26)) + " is too large for a double";
  const std::string marker = "; last read: '";
  const auto read = s.find(marker);
  if (read != std::string::npos) {
    // The quoted text runs to the last quote (it may hold quotes itself); "; expected ..." may follow.
    const auto close = s.rfind('\'');
    if (close != std::string::npos && close >= read + marker.size()) {
      const std::string rest = s.substr(close + 1);
      s = s.substr(0, read) + marker + shown_snippet(std::string_view(s).substr(read + marker.size(), close - read - marker.size())) +
          "'" + rest;
    }
  }
  return cut_for_message(s, 200);
}

// The first byte (1-based) where nesting exceeds the limit or a string holds "\u0000";
// 0 when neither. Strings are skipped with their escapes; syntax is left to the parser.
JsonText prescan(std::string_view text) {
  JsonText r;
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        if (text.substr(i, 6) == "\\u0000") {
          r.problem = "a string holds \\u0000 (NUL)";
          r.byte = i + 1;
          return r;
        }
        ++i;  // the escaped character
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kJsonMaxDepth) {
        r.problem = "nesting deeper than " + std::to_string(kJsonMaxDepth) + " levels";
        r.byte = i + 1;
        return r;
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return r;
}

// Thrown out of the parser callback on a duplicate key.
struct DuplicateKey {
  std::string path;
};

// The open containers while parsing, for duplicate keys and their JSON path.
class KeyTracker {
 public:
  bool operator()(int /*depth*/, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    switch (event) {
      case E::object_start:
        open_.push_back({true, {}, {}, 0});
        break;
      case E::array_start:
        open_.push_back({false, {}, {}, 0});
        break;
      case E::key: {
        Frame& top = open_.back();
        top.key = parsed.get<std::string>();
        if (!top.keys.insert(top.key).second) throw DuplicateKey{path() + ": duplicate key \"" + top.key + "\""};
        break;
      }
      case E::object_end:
      case E::array_end:
        open_.pop_back();
        next_element();
        break;
      case E::value:
        next_element();
        break;
    }
    return true;
  }

 private:
  struct Frame {
    bool object = false;
    std::set<std::string> keys;  // objects: the keys seen so far
    std::string key;             // objects: the key of the value being parsed
    std::size_t index = 0;       // arrays: the index of the value being parsed
  };
  void next_element() {
    if (!open_.empty() && !open_.back().object) ++open_.back().index;
  }
  std::string path() const {
    std::string p = "$";
    for (const Frame& f : open_) {
      if (f.object) {
        p += '.';
        p += f.key;
      } else {
        p += '[';
        p += std::to_string(f.index);
        p += ']';
      }
    }
    return p;
  }
  std::vector<Frame> open_;
};

}  // namespace

JsonText parse_json_text(std::string_view text) {
  JsonText r = prescan(text);
  if (!r.problem.empty()) return r;
  try {
    r.value = nlohmann::json::parse(text.begin(), text.end(), KeyTracker{}, /*allow_exceptions=*/true,
                                    /*ignore_comments=*/false);
  } catch (const DuplicateKey& d) {
    r.problem = d.path;
  } catch (const nlohmann::json::parse_error& e) {
    r.problem = parse_problem_text(e.what());
    r.byte = e.byte;
  } catch (const nlohmann::json::exception& e) {  // out_of_range for a number like 1e400
    r.problem = parse_problem_text(e.what());
  }
  if (!r.problem.empty()) r.value = nullptr;
  return r;
}

std::string shown_json(const nlohmann::json& value) {
  return cut_for_message(value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

std::string line_column(std::string_view text, std::size_t byte) {
  std::size_t line = 1, column = 1;
  for (std::size_t i = 0; i + 1 < byte && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return std::to_string(line) + ":" + std::to_string(column);
}

std::string read_bounded_json_text(std::istream& in, const std::string& source) {
  std::string text;
  char chunk[1 << 16];
  while (in.read(chunk, sizeof chunk) || in.gcount() > 0) {
    TPB_INPUT_CHECK(text.size() + static_cast<std::size_t>(in.gcount()) <= kJsonMaxBytes,
                    source << ": larger than " << (kJsonMaxBytes >> 20) << " MiB (tpbench's limit for a JSON text)");
    text.append(chunk, static_cast<std::size_t>(in.gcount()));
  }
  return text;
}

nlohmann::json read_json_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TPB_INPUT_CHECK(in.good(), path << ": cannot open");
  const std::string text = read_bounded_json_text(in, path);
  JsonText j = parse_json_text(text);
  if (j.problem.empty()) return std::move(j.value);
  if (j.byte > 0) TPB_INPUT_FAIL(path << ":" << line_column(text, j.byte) << ": not valid JSON: " << j.problem);
  TPB_INPUT_FAIL(path << ": not valid JSON: " << j.problem);
}

}  // namespace tpb
