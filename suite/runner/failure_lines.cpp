#include "suite/runner/failure_lines.h"

#include <cstdio>

#include "suite/records/baseline.h"

namespace tpb {

using nlohmann::json;

namespace {

std::string first_line_of(const std::string& text) { return text.substr(0, text.find('\n')); }

std::string text_of(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// "<label>: <why>" and the record's reproduce command under it.
void add_case_line(std::vector<std::string>& out, const std::string& label, const std::string& why, const json* record) {
  out.push_back("FAILED " + label + ": " + why);
  const std::string reproduce = record ? text_of(*record, "reproduce") : "";
  if (!reproduce.empty()) out.push_back("  reproduce: " + reproduce);
}

}  // namespace

std::vector<std::string> failure_lines(const std::vector<Case>& cases, const std::map<std::string, json>& records,
                                       const json& check_summary, const RunSummary& sum, bool with_baselines) {
  std::vector<std::string> out;
  char buf[256];
  if (sum.missing_baseline_fails)
    out.push_back("FAILED baseline: none stored for this scenario on this hardware at " + sum.baseline_file);
  if (sum.unlike_baseline_fails) out.push_back("FAILED baseline build: not like-for-like: " + sum.baseline_build.why());
  if (with_baselines && sum.stability == "unstable") {
    if (sum.control_beyond_ceiling) {
      std::snprintf(buf, sizeof buf, "FAILED control: x%.3g its stored baseline, beyond the ceiling of x%.3g",
                    sum.control_vs_baseline.ratio, sum.control_ceiling);
      out.push_back(buf);
    } else {
      out.push_back("FAILED control: drifted between the start and the end of the run (control_drift)");
    }
  }
  if (!sum.nothing_ran.empty()) out.push_back("FAILED nothing ran: " + sum.nothing_ran);
  std::map<std::string, std::string> label_of;
  for (const Case& c : cases) label_of[c.id] = c.label;
  for (const Case& c : cases) {
    const auto it = records.find(c.id);
    const json* r = it == records.end() ? nullptr : &it->second;
    const std::string status = r ? text_of(*r, "status") : "";
    if (status == "failed") add_case_line(out, c.label, "failed: " + first_line_of(text_of(*r, "error")), r);
    if (status == "fallback") add_case_line(out, c.label, "fallback: " + first_line_of(text_of(*r, "error")), r);
  }
  if (check_summary.is_object())
    for (const auto& [check, groups] : check_summary.items())
      for (const auto& g : groups) {
        if (!g.is_object() || text_of(g, "status") != "fail") continue;
        std::string labels;
        if (g.contains("cases") && g["cases"].is_array())
          for (const auto& id : g["cases"])
            if (id.is_string()) labels += (labels.empty() ? "" : ", ") + (label_of.count(id) ? label_of[id] : id.get<std::string>());
        out.push_back("FAILED " + check + " [" + labels + "]: " + first_line_of(text_of(g, "detail")));
      }
  for (const Case& c : cases) {
    const auto it = records.find(c.id);
    if (it == records.end() || !it->second.contains("baseline") || !it->second["baseline"].is_object()) continue;
    for (const auto& [metric, v] : it->second["baseline"].items()) {
      const std::string verdict = v.is_object() ? text_of(v, "verdict") : "";
      if (!is_regression_verdict(verdict)) continue;
      std::snprintf(buf, sizeof buf, " x%.4g", v.value("ratio", 0.0));
      std::string why = metric + " " + verdict + (v.value("ratio", 0.0) > 0 ? buf : "");
      if (v.contains("p_value") && v["p_value"].is_number()) {
        std::snprintf(buf, sizeof buf, " (p %.3g)", v["p_value"].get<double>());
        why += buf;
      }
      add_case_line(out, c.label, why, &it->second);
    }
  }
  return out;
}

}  // namespace tpb
