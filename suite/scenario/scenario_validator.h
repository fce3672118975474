// The scenario parser's Validator and field readers, shared by the files of suite/scenario/
// that read a scenario (scenario.cpp, axes.cpp). A Validator walks the document once,
// collecting every problem with its JSON path; nothing throws until the whole file has been seen.
#pragma once

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "reference_engine/config/json_text.h"

namespace tpb::scenario_parse {

using nlohmann::json;

inline std::string join_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) {
    if (!out.empty()) out += "\n";
    out += l;
  }
  return out;
}

inline std::string join(const std::vector<std::string>& items, const char* sep = ", ") {
  std::string out;
  for (const auto& i : items) {
    if (!out.empty()) out += sep;
    out += i;
  }
  return out;
}

// A value as the user wrote it, cut with its length said so that one problem stays one line.
inline std::string show(const json& v) { return shown_json(v); }

class Validator {
 public:
  explicit Validator(std::string source) : source_(std::move(source)) {}

  void expected(const std::string& path, const std::string& what, const json& got) {
    problems_.push_back(source_ + ": " + path + ": expected " + what + ", got " + show(got));
  }
  void problem(const std::string& path, const std::string& text) {
    problems_.push_back(source_ + ": " + path + ": " + text);
  }
  // Reports every key of `obj` not in `allowed`.
  void only_keys(const json& obj, const std::string& path, const std::vector<std::string>& allowed) {
    for (const auto& [key, value] : obj.items()) {
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end())
        problem(path + "." + key, "unknown key; expected one of " + join(allowed));
    }
  }
  const std::vector<std::string>& problems() const { return problems_; }

 private:
  std::string source_;
  std::vector<std::string> problems_;
};

inline bool is_int(const json& v) { return v.is_number_integer(); }

// Reads an optional integer field >= `min`.
inline void int_field(Validator& val, const json& obj, const char* key, const std::string& path, int min, int& out) {
  auto it = obj.find(key);
  if (it == obj.end()) return;
  if (!is_int(*it) || it->get<long long>() < min || it->get<long long>() > 1'000'000'000) {
    val.expected(path + "." + key, "an integer >= " + std::to_string(min), *it);
    return;
  }
  out = it->get<int>();
}

// Reads an optional number field in [min, max] (exclusive bounds when asked).
inline void number_field(Validator& val, const json& obj, const char* key, const std::string& path, double min,
                  bool min_exclusive, double max, bool max_exclusive, double& out) {
  auto it = obj.find(key);
  if (it == obj.end()) return;
  auto num = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return std::string(buf);
  };
  const std::string range = std::string(min_exclusive ? "(" : "[") + num(min) + ", " +
                            (max == 1e300 ? std::string("inf") : num(max)) + (max_exclusive ? ")" : "]");
  if (!it->is_number()) {
    val.expected(path + "." + key, "a number in " + range, *it);
    return;
  }
  const double v = it->get<double>();
  if (v < min || (min_exclusive && v == min) || v > max || (max_exclusive && v == max)) {
    val.expected(path + "." + key, "a number in " + range, *it);
    return;
  }
  out = v;
}

}  // namespace tpb::scenario_parse
