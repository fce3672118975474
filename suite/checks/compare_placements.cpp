// compare_placements (see suite/checks/compare_placements.h).
#include "suite/checks/compare_placements.h"

#include <cstdio>
#include <map>
#include <set>

#include "suite/checks/digests.h"
#include "suite/checks/engine_budget.h"
#include "suite/checks/record_outputs.h"
#include "suite/checks/tolerance.h"
#include "tpb/check.h"

namespace tpb {

using nlohmann::json;

std::string placement_free_identity(const json& record) {
  const json identity = {{"workload", record.value("workload", json())}, {"model", record.value("model", json())},
                         {"device", record.value("device", json())},     {"params", record.value("params", json())},
                         {"role", record.value("role", json())}};
  return identity.dump();  // key-sorted, as case ids are made
}

std::string placement_of(const json& record) {
  const json p = record.value("placement", json());
  return p.is_object() && p.contains("placement") && p["placement"].is_string() ? p["placement"].get<std::string>()
                                                                                  : "none";
}

namespace {

// A text field, or `fallback` where it is absent or null (comparable_record_problem has let
// only strings and null through).
std::string text_of(const json& r, const char* key, const std::string& fallback = "") {
  return r.contains(key) && r[key].is_string() ? r[key].get<std::string>() : fallback;
}

std::string label_of(const json& r) { return text_of(r, "label", text_of(r, "case_id")); }

// The last record of each case in file order, as results.jsonl is read everywhere.
std::vector<const json*> last_records(const std::vector<json>& records) {
  std::map<std::string, std::size_t> last;
  for (std::size_t i = 0; i < records.size(); ++i) last[text_of(records[i], "case_id")] = i;
  std::vector<const json*> out;
  for (std::size_t i = 0; i < records.size(); ++i)
    if (last[text_of(records[i], "case_id")] == i) out.push_back(&records[i]);
  return out;
}

// The one placement of a side's records, of any status: a run is of one placement. A case
// that could not be placed (skipped: more ranks than GPUs) records none, and the CPU's never do.
std::string side_placement(const std::vector<const json*>& records, const std::string& name) {
  TPB_INPUT_CHECK(!records.empty(), "nothing comparable: " << name << " holds no record");
  std::set<std::string> seen;
  for (const json* r : records)
    if (placement_of(*r) != "none") seen.insert(placement_of(*r));
  TPB_INPUT_CHECK(seen.size() <= 1, name << ": records of " << seen.size() << " placements ("
                                         << *seen.begin() << ", " << *seen.rbegin()
                                         << "): expected one run of one placement");
  return seen.empty() ? "none" : *seen.begin();
}

std::string backend_of(const json& r) {
  const json p = r.value("params", json::object());
  return p.contains("allreduce") && p["allreduce"].is_string() ? p["allreduce"].get<std::string>() : "";
}

double step_us(const json& r) {
  const json lat = r.value("latency", json());
  return lat.is_object() && lat.contains("p50") && lat["p50"].is_number() ? lat["p50"].get<double>() : -1;
}

PlacementPair pair_of(const json& a, const json& b, const std::string& placement_a, const std::string& placement_b) {
  PlacementPair p;
  p.label = label_of(a);
  p.backend = backend_of(a);
  p.tp = record_tp(a);
  p.case_id_a = text_of(a, "case_id");
  p.case_id_b = text_of(b, "case_id");
  p.step_us_a = step_us(a);
  p.step_us_b = step_us(b);
  const OutputBudget budget = output_budget(a, b);
  p.rule = budget.rel_l2 > 0 ? std::string("bitwise, else ") + budget.name + " budget" : "bitwise";
  const std::string diff = digest_difference(a, b);
  if (diff.empty()) {
    p.verdict = "equal";
    return p;
  }
  p.verdict = "mismatch";
  p.detail = diff;
  if (budget.rel_l2 == 0) return p;
  double worst = 0;
  const std::string why = logits_difference(a, b, placement_a, placement_b, budget, worst);
  if (!why.empty()) {
    p.detail = diff + std::string("; not within the ") + budget.name + " budget either: " + why;
    return p;
  }
  char buf[160];
  std::snprintf(buf, sizeof buf, "digests differ (%s); logits rel-L2 %.3g, %.3g%% of %.0e, same greedy tokens",
                diff.c_str(), worst, 100.0 * worst / budget.rel_l2, budget.rel_l2);
  p.verdict = "within-budget";
  p.detail = buf;
  return p;
}

// Each group of one side's ok sweep cases that differ only in the backend and hold an nccl
// case: every other backend's p50 against NCCL's.
void add_custom_vs_nccl(const std::vector<const json*>& records, const std::string& placement,
                        std::vector<CustomVsNccl>& out) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<const json*>> groups;
  for (const json* r : records) {
    if (text_of(*r, "status") != "ok" || text_of(*r, "role", "sweep") != "sweep" || backend_of(*r).empty() ||
        step_us(*r) <= 0)
      continue;
    json without = *r;
    without["params"].erase("allreduce");
    const std::string key = placement_free_identity(without);
    if (!groups.count(key)) order.push_back(key);
    groups[key].push_back(r);
  }
  for (const auto& key : order) {
    const json* nccl = nullptr;
    for (const json* r : groups[key])
      if (backend_of(*r) == "nccl") nccl = r;
    if (!nccl) continue;
    std::string group = label_of(*nccl);
    if (group.size() > 5 && group.compare(group.size() - 5, 5, " nccl") == 0) group.resize(group.size() - 5);
    for (const json* r : groups[key]) {
      if (r == nccl) continue;
      CustomVsNccl c;
      c.group = group;
      c.placement = placement;
      c.backend = backend_of(*r);
      c.nccl_step_us = step_us(*nccl);
      c.step_us = step_us(*r);
      c.relative = c.step_us / c.nccl_step_us - 1;
      out.push_back(c);
    }
  }
}

}  // namespace

PlacementComparison compare_placements(const std::vector<json>& a_records, const std::vector<json>& b_records,
                                       const std::string& a_name, const std::string& b_name) {
  const auto a = last_records(a_records), b = last_records(b_records);
  PlacementComparison out;
  out.placement_a = side_placement(a, a_name);
  out.placement_b = side_placement(b, b_name);
  TPB_INPUT_CHECK(out.placement_a != out.placement_b,
                  "nothing comparable: "
                      << (out.placement_a == "none" ? std::string("neither side records a placement (CPU runs have none)")
                                                    : "both sides ran in " + out.placement_a + " placement")
                      << " (" << a_name << ", " << b_name
                      << "): expected one exclusive and one shared run of the same scenario");
  std::map<std::string, const json*> b_by_identity;
  for (const json* r : b) b_by_identity[placement_free_identity(*r)] = r;
  std::set<std::string> paired;
  for (const json* ra : a) {
    const std::string identity = placement_free_identity(*ra);
    const auto it = b_by_identity.find(identity);
    const std::string label = label_of(*ra);
    const std::string status_a = text_of(*ra, "status");
    if (it == b_by_identity.end()) {
      out.not_paired.push_back(label + ": " + out.placement_a + " only (" + status_a + "; no such case in " + b_name + ")");
      continue;
    }
    paired.insert(identity);
    const json& rb = *it->second;
    const std::string status_b = text_of(rb, "status");
    if (status_a != "ok" || status_b != "ok") {
      auto side = [](const std::string& placement, const std::string& status, const json& r) {
        const std::string error = text_of(r, "error");
        return placement + " " + status + (error.empty() ? std::string() : ": " + error);
      };
      out.not_paired.push_back(label + ": not ok on both sides (" + side(out.placement_a, status_a, *ra) + "; " +
                               side(out.placement_b, status_b, rb) + ")");
      continue;
    }
    out.pairs.push_back(pair_of(*ra, rb, out.placement_a, out.placement_b));
    out.mismatches += out.pairs.back().verdict == "mismatch";
  }
  for (const json* rb : b)
    if (!paired.count(placement_free_identity(*rb)))
      out.not_paired.push_back(label_of(*rb) + ": " + out.placement_b + " only (" + text_of(*rb, "status") +
                               "; no such case in " + a_name + ")");
  TPB_INPUT_CHECK(!out.pairs.empty(), "nothing comparable: no case is ok in both " << a_name << " ("
                                          << out.placement_a << ") and " << b_name << " (" << out.placement_b
                                          << ") (" << out.not_paired.size() << " not paired)");
  add_custom_vs_nccl(a, out.placement_a, out.custom_vs_nccl);
  add_custom_vs_nccl(b, out.placement_b, out.custom_vs_nccl);
  return out;
}

json to_json(const PlacementComparison& c) {
  json pairs = json::array(), vs = json::array();
  auto number_or_null = [](double us) { return us < 0 ? json() : json(us); };
  for (const auto& p : c.pairs)
    pairs.push_back({{"label", p.label},
                     {"backend", p.backend},
                     {"tp", p.tp},
                     {"case_id", {{"a", p.case_id_a}, {"b", p.case_id_b}}},
                     {"step_us", {{"a", number_or_null(p.step_us_a)}, {"b", number_or_null(p.step_us_b)}}},
                     {"rule", p.rule},
                     {"verdict", p.verdict},
                     {"detail", p.detail}});
  for (const auto& v : c.custom_vs_nccl)
    vs.push_back({{"group", v.group},
                  {"placement", v.placement},
                  {"backend", v.backend},
                  {"nccl_step_us", v.nccl_step_us},
                  {"step_us", v.step_us},
                  {"relative", v.relative}});
  return {{"placement", {{"a", c.placement_a}, {"b", c.placement_b}}},
          {"mismatches", c.mismatches},
          {"pairs", pairs},
          {"not_paired", c.not_paired},
          {"custom_vs_nccl", vs}};
}

}  // namespace tpb
