#include "suite/runner/junit_cases.h"

#include <map>

namespace tpb {

using nlohmann::json;

std::string junit_scenario_classname(const std::string& scenario) {
  return std::string("tpbench.").append(junit_identifier(scenario));
}

std::vector<std::string> junit_case_classnames(const std::string& scenario, const std::vector<Case>& cases) {
  const std::string prefix = junit_scenario_classname(scenario) + ".";
  std::vector<std::string> names;
  std::map<std::string, int> uses;
  for (const Case& c : cases) {
    names.push_back(prefix + junit_identifier(c.label));
    ++uses[names.back()];
  }
  for (std::size_t i = 0; i < cases.size(); ++i)
    if (uses[names[i]] > 1) names[i].append(".").append(junit_identifier(cases[i].id));  // not `"." + string&&`: a false g++ 12 -Wrestrict
  return names;
}

namespace {

// Adds `name` = the number at `section`.`key` of the record, as the record writes it.
void add_number(JunitProperties& out, const std::string& name, const json& record, const char* section, const char* key) {
  const auto it = record.find(section);
  if (it == record.end() || !it->is_object()) return;
  const auto value = it->find(key);
  if (value != it->end() && value->is_number()) out.emplace_back(name, value->dump());
}

}  // namespace

JunitProperties junit_case_properties(const std::string& case_id, const json* record) {
  JunitProperties out = {{"case_id", case_id}};
  if (record == nullptr) return out;
  if (record->contains("status") && (*record)["status"].is_string()) out.emplace_back("status", (*record)["status"].get<std::string>());
  // The latency's unit is in the record; a property named _us holds microseconds only.
  const json* latency = record->contains("latency") ? &(*record)["latency"] : nullptr;
  if (latency != nullptr && latency->is_object() && latency->value("unit", "") == "us") {
    add_number(out, "latency_p50_us", *record, "latency", "p50");
    add_number(out, "latency_p99_us", *record, "latency", "p99");
  }
  add_number(out, "algbw_GBps", *record, "throughput", "algbw_GBps");
  add_number(out, "busbw_GBps", *record, "throughput", "busbw_GBps");
  add_number(out, "tokens_per_s", *record, "throughput", "tokens_per_s");
  return out;
}

}  // namespace tpb
