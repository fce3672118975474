// Strict, bounded JSON parsing (see json_text.h): a pre-scan for depth and "\u0000", then
// nlohmann's parser with a callback that keeps the keys of each open object.
#include "reference_engine/config/json_text.h"

#include <fstream>
#include <iterator>
#include <set>
#include <vector>

#include "tpb/check.h"

namespace tpb {

namespace {

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
    r.problem = e.what();
    r.byte = e.byte;
  } catch (const nlohmann::json::exception& e) {  // out_of_range for a number like 1e400
    r.problem = e.what();
  }
  if (!r.problem.empty()) r.value = nullptr;
  return r;
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
