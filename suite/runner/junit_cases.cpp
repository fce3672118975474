#include "suite/runner/junit_cases.h"

#include <cstdio>
#include <map>

#include "suite/records/baseline.h"

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

std::vector<JunitCase> junit_baseline_cases(const std::string& classname, const json* record) {
  std::vector<JunitCase> out;
  if (record == nullptr || !record->contains("baseline") || !(*record)["baseline"].is_object()) return out;
  int compared = 0;
  for (const auto& [metric, v] : (*record)["baseline"].items()) {
    if (!v.is_object() || !v.contains("verdict") || !v["verdict"].is_string()) continue;  // build, fingerprint
    ++compared;
    const std::string verdict = v["verdict"].get<std::string>();
    if (!is_regression_verdict(verdict)) continue;
    char numbers[160];
    std::snprintf(numbers, sizeof numbers, "x%.4g, old %.6g, new %.6g", v.value("ratio", 0.0), v.value("old", 0.0),
                  v.value("new", 0.0));
    std::string message = metric + ": " + verdict + " (" + numbers;
    if (v.contains("p_value") && v["p_value"].is_number()) {
      std::snprintf(numbers, sizeof numbers, ", p %.3g", v["p_value"].get<double>());
      message += numbers;
    }
    message += ")";
    out.push_back({classname, "baseline " + metric, 0, "failure", message, v.value("detail", std::string())});
  }
  if (out.empty() && compared > 0) out.push_back({classname, "baseline", 0, "pass", "", ""});
  return out;
}

std::vector<JunitCase> junit_run_failures(const std::string& scenario, const RunSummary& sum, bool with_baselines) {
  const std::string classname = junit_scenario_classname(scenario);
  std::vector<JunitCase> out;
  if (sum.missing_baseline_fails)
    out.push_back({classname, "baseline", 0, "failure",
                   "no baseline stored for this scenario on this hardware at " + sum.baseline_file +
                       " (--update-baselines records one, --allow-missing-baseline accepts its absence)",
                   ""});
  if (sum.unlike_baseline_fails)
    out.push_back({classname, "baseline build", 0, "failure",
                   "baseline not like-for-like: " + sum.baseline_build.why() + " (--allow-unlike-baseline accepts it)", ""});
  if (with_baselines && sum.stability == "unstable") {
    char ratio[64] = "";
    if (sum.control_beyond_ceiling)
      std::snprintf(ratio, sizeof ratio, " (x%.3g its stored baseline, ceiling x%.3g)", sum.control_vs_baseline.ratio,
                    sum.control_ceiling);
    out.push_back({classname, "control", 0, "failure",
                   std::string(sum.control_beyond_ceiling ? "the control moved beyond its ceiling against its baseline"
                                                          : "the control drifted between the start and the end of the run") +
                       ratio + ": no latency verdict of this run is trusted",
                   ""});
  }
  return out;
}

}  // namespace tpb
