#include "suite/scenario/case_selection.h"

#include <algorithm>
#include <set>
#include <string_view>

#include "tpb/check.h"

using nlohmann::json;

namespace tpb {

namespace {

bool is_control(const Case& c) { return c.role == "control-start" || c.role == "control-end"; }

std::string join(const std::vector<std::string>& items, const char* sep = ", ") {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : sep) + s;
  return out;
}

// The distinct values a param takes over the sweep cases, as text, in first-seen order.
std::string values_of(const std::vector<Case>& cases, const std::string& key) {
  std::vector<std::string> seen;
  for (const auto& c : cases) {
    if (is_control(c) || !c.params.contains(key)) continue;
    const json& v = c.params[key];
    const std::string text = v.is_string() ? v.get<std::string>() : v.dump();
    if (std::find(seen.begin(), seen.end(), text) == seen.end()) seen.push_back(text);
  }
  return join(seen);
}

// Filters grouped by key, keys in the order first given: a case passes when, for every
// key, one of that key's values matches.
using FilterGroups = std::vector<std::pair<std::string, std::vector<std::string>>>;

FilterGroups group_filters(const std::vector<CaseFilter>& filters) {
  FilterGroups groups;
  for (const auto& f : filters) {
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == f.key; });
    if (it == groups.end()) {
      groups.push_back({f.key, {f.value}});
    } else if (std::find(it->second.begin(), it->second.end(), f.value) == it->second.end()) {
      it->second.push_back(f.value);
    }
  }
  return groups;
}

bool passes(const Case& c, const std::string& key, const std::vector<std::string>& values) {
  if (!c.params.contains(key)) return false;
  return std::any_of(values.begin(), values.end(), [&](const std::string& v) { return filter_value_matches(c.params[key], v); });
}

std::string filter_text(const std::string& key, const std::vector<std::string>& values) {
  std::string out;
  for (const auto& v : values) out.append(out.empty() ? "" : " ").append("--filter ").append(key).append("=").append(v);
  return out;
}

}  // namespace

json CaseSelection::to_json() const {
  if (empty()) return nullptr;
  json f = json::array();
  for (const auto& x : filters) f.push_back(x.text());
  return {{"case", ids}, {"filter", f}};
}

CaseSelection CaseSelection::from_json(const json& j) {
  CaseSelection s;
  if (!j.is_object()) return s;
  for (const auto& id : j.value("case", json::array())) s.ids.push_back(id.get<std::string>());
  for (const auto& f : j.value("filter", json::array())) s.filters.push_back(parse_case_filter(f.get<std::string>()));
  return s;
}

CaseFilter parse_case_filter(const std::string& text) {
  const auto eq = text.find('=');
  TPB_INPUT_CHECK(eq != std::string::npos && eq > 0 && eq + 1 < text.size(),
                  "run: --filter " << text << ": expected KEY=VALUE, e.g. tp=2 or allreduce=shm");
  return {text.substr(0, eq), text.substr(eq + 1)};
}

std::vector<std::string> split_case_ids(const std::string& list) {
  std::vector<std::string> ids;
  std::size_t start = 0;
  while (true) {
    const auto comma = list.find(',', start);
    std::string id = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    id.erase(0, id.find_first_not_of(" \t"));
    id.erase(id.find_last_not_of(" \t") + 1);
    TPB_INPUT_CHECK(!id.empty(), "run: --case '" << list << "': expected ID[,ID...], got an empty id");
    ids.push_back(id);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return ids;
}

bool filter_value_matches(const json& param, const std::string& value) {
  if (param.is_string() && param.get<std::string>() == value) return true;
  const json parsed = json::parse(value, nullptr, /*allow_exceptions=*/false);
  return !parsed.is_discarded() && parsed == param;
}

std::vector<Case> select_cases(const Scenario& s, const std::vector<Case>& cases, const CaseSelection& sel) {
  if (sel.empty()) return cases;
  std::vector<std::string> problems;

  // --case: every id must be one of the expansion's. A sweep or repeat id names its params
  // (the pair that shares them); a control id names the controls.
  std::vector<json> named_params;
  bool control_named = false;
  std::vector<std::string> unknown;
  for (const auto& id : sel.ids) {
    auto it = std::find_if(cases.begin(), cases.end(), [&](const Case& c) { return c.id == id; });
    if (it == cases.end()) {
      if (std::find(unknown.begin(), unknown.end(), id) == unknown.end()) unknown.push_back(id);
    } else if (is_control(*it)) {
      control_named = true;
    } else {
      named_params.push_back(it->params);
    }
  }
  if (!unknown.empty())
    problems.push_back(std::string("--case: scenario ").append(s.name).append(" has no case with id ").append(join(unknown))
                           .append(" (`tpbench run ").append(shell_quote(s.source)).append(" --dry-run` lists the ids)"));

  // --filter: every key must be a param of the cases, and each key's values must match a case.
  std::set<std::string> keys;
  for (const auto& c : cases)
    for (const auto& [k, v] : c.params.items()) keys.insert(k);
  const FilterGroups groups = group_filters(sel.filters);
  for (const auto& group : groups) {
    const std::string& key = group.first;  // not a structured binding: clang 14 cannot capture one
    const auto& values = group.second;
    if (!keys.count(key)) {
      problems.push_back("--filter " + key + "=" + values.front() + ": '" + key + "' is not a parameter of the cases of " +
                         s.name + " (" + join(std::vector<std::string>(keys.begin(), keys.end())) + ")");
      continue;
    }
    for (const auto& v : values) {
      const bool any = std::any_of(cases.begin(), cases.end(), [&](const Case& c) { return !is_control(c) && passes(c, key, {v}); });
      if (!any) problems.push_back("--filter " + key + "=" + v + " matches no case (" + key + " takes " + values_of(cases, key) + ")");
    }
  }
  if (!problems.empty()) throw InputError(std::string("run: ").append(join(problems, "; ")).append("; nothing was run"));

  std::vector<bool> keep(cases.size(), false);
  bool any_sweep = false;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    if (is_control(c)) continue;
    const bool named = sel.ids.empty() ||
                       std::find(named_params.begin(), named_params.end(), c.params) != named_params.end();
    const bool filtered = std::all_of(groups.begin(), groups.end(), [&](const auto& g) { return passes(c, g.first, g.second); });
    keep[i] = named && filtered;
    any_sweep = any_sweep || keep[i];
  }
  if (!any_sweep && !control_named) {
    std::vector<std::string> parts;
    if (!sel.ids.empty()) parts.push_back(std::string("--case ").append(join(sel.ids, ",")));
    for (const auto& [key, values] : groups) parts.push_back(filter_text(key, values));
    throw InputError(std::string("run: ").append(join(parts, " ")).append(" together select no case; nothing was run"));
  }
  for (std::size_t i = 0; i < cases.size(); ++i)
    if (is_control(cases[i])) keep[i] = true;

  std::vector<Case> out;
  for (std::size_t i = 0; i < cases.size(); ++i)
    if (keep[i]) out.push_back(cases[i]);
  return out;
}

std::string shell_quote(const std::string& word) {
  const bool safe = !word.empty() && std::all_of(word.begin(), word.end(), [](char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           std::string_view("-_./=:,+@%").find(ch) != std::string_view::npos;
  });
  if (safe) return word;
  std::string out = "'";
  for (char ch : word) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return out + "'";
}

std::string reproduce_command(const std::string& scenario_path, const std::string& case_id,
                              const std::vector<std::string>& case_options) {
  std::string cmd = "tpbench run ";
  cmd.append(shell_quote(scenario_path)).append(" --case ").append(shell_quote(case_id));
  for (const auto& o : case_options) cmd.append(" ").append(shell_quote(o));
  return cmd;
}

}  // namespace tpb
