#include "suite/checks/equal_across_allreduce.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "suite/measure/allreduce_ran.h"
#include "suite/checks/digests.h"
#include "suite/checks/engine_budget.h"
#include "suite/checks/record_outputs.h"
#include "suite/checks/tolerance.h"

namespace tpb {

namespace {

using nlohmann::json;

// One backend's case of the group, named by what ran.
struct Side {
  const json* record = nullptr;
  std::string requested;         // params.allreduce
  std::vector<std::string> ran;  // the backends that carried its allreduces, sorted
  bool fell_back = false;        // a fixed backend that carried none of them
  std::string why;               // allreduce_ran.fallback: why others ran
  std::string name;              // "nccl", or "custom-oneshot (ran custom-oneshot+nccl)"
};

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (const auto& x : v) out += (out.empty() ? "" : sep) + x;
  return out;
}

Side side_of(const json& r) {
  Side s;
  s.record = &r;
  s.requested = r["params"]["allreduce"].get<std::string>();
  const json ar = r.value("allreduce_ran", json());
  if (ar.is_object()) {
    s.ran = ran_backends(ar);
    s.why = ar.value("fallback", json()).is_string() ? ar["fallback"].get<std::string>() : "";
    s.fell_back = r.value("status", "") == "fallback" || ar.value("verdict", "") == "fallback";
  } else {
    // A record from before allreduce_ran: the communicator's name() is all it says (a custom
    // backend that fell back as a whole named "nccl").
    const json comm = r.value("comm", json::array());
    const std::string backend = comm.is_array() && !comm.empty() && comm[0].is_object() ? comm[0].value("backend", "") : "";
    if (!backend.empty()) s.ran = {backend};
    s.fell_back = s.requested != "auto" && !backend.empty() && backend != s.requested;
    if (s.fell_back) s.why = comm[0].value("fallback_reason", "");
  }
  if (s.ran.empty()) s.ran = {s.requested};  // nothing counted: nothing says otherwise
  std::sort(s.ran.begin(), s.ran.end());
  s.name = s.ran == std::vector<std::string>{s.requested} ? s.requested : s.requested + " (ran " + join(s.ran, "+") + ")";
  return s;
}

// The digest (or, where the policy allows, tolerance) comparison of sides that ran as asked.
CheckResult compare_sides(const std::vector<Side>& sides) {
  const json& ref = *sides.front().record;
  const std::string& ref_name = sides.front().name;
  std::string identical = ref_name, tolerated;
  OutputBudget used;  // the budget the tolerated sides were held to
  for (std::size_t i = 1; i < sides.size(); ++i) {
    const std::string& name = sides[i].name;
    const json& got = *sides[i].record;
    const std::string diff = digest_difference(ref, got);
    if (diff.empty()) {
      identical += ", " + name;
      continue;
    }
    const std::vector<std::string> pair = {ref.value("case_id", ""), got.value("case_id", "")};
    const OutputBudget tol = output_budget(ref, got);
    if (tol.rel_l2 == 0) return {"fail", ref_name + " vs " + name + ": " + diff, pair};
    double worst = 0;
    const std::string why = logits_difference(ref, got, ref_name, name, tol, worst);
    if (!why.empty())
      return {"fail",
              ref_name + " vs " + name + " (TP " + std::to_string(record_tp(ref)) + ": not bitwise, and not within tolerance): " + why,
              pair, tol.rel_l2};
    used = tol;
    char buf[160];
    std::snprintf(buf, sizeof buf, " (rel-L2 %.3g, %.3g%% of %.0e)", worst, 100.0 * worst / tol.rel_l2, tol.rel_l2);
    tolerated += (tolerated.empty() ? "" : ", ") + name + buf;
  }
  std::string detail = "identical digests on every rank: " + identical;
  if (!tolerated.empty())
    detail += std::string("; within the ") + used.name + " budget of " + ref_name + " with the same greedy tokens (TP " +
              std::to_string(record_tp(ref)) + " > 2: " + used.why + "): " + tolerated;
  return {"pass", detail};
}

}  // namespace

std::string EqualAcrossAllreduceCheck::group_key(const json& record) const {
  // Only the sweep's own cases: control and repeat runs are other checks' business.
  if (record.value("role", "sweep") != "sweep") return "";
  if (!record.contains("params") || !record["params"].contains("allreduce")) return "";
  return params_key_without(record, {"allreduce"});
}

CheckResult EqualAcrossAllreduceCheck::evaluate(const std::vector<const json*>& group) const {
  std::vector<Side> sides;
  std::string not_ok;
  for (const auto* r : group) {
    const std::string status = r->value("status", "");
    if (status == "ok" || status == "fallback")
      sides.push_back(side_of(*r));
    else
      not_ok += (not_ok.empty() ? "" : ", ") + r->value("case_id", "?") + " " + status;
  }
  const std::string not_compared = not_ok.empty() ? std::string() : " (not compared: " + not_ok + ")";

  // A backend that became another is never compared as itself: "custom equals NCCL" must not
  // pass as NCCL against itself.
  std::vector<Side> genuine;
  std::string fallbacks;
  for (const Side& s : sides) {
    if (!s.fell_back) {
      genuine.push_back(s);
      continue;
    }
    std::vector<std::string> others;
    for (const Side& o : sides)
      if (&o != &s && std::find(others.begin(), others.end(), o.requested) == others.end()) others.push_back(o.requested);
    fallbacks += (fallbacks.empty() ? "" : "; ") + s.requested + " requested, " + join(s.ran, " and ") + " ran" +
                 (s.why.empty() ? std::string() : " (" + s.why + ")") + ": " + s.requested + " is not compared with " +
                 (others.empty() ? std::string("anything") : join(others, ", "));
  }
  if (!fallbacks.empty()) {
    std::string rest;
    if (genuine.size() >= 2) {
      const CheckResult r = compare_sides(genuine);
      rest = "; the others " + std::string(r.status == "pass" ? "agree: " : "FAIL: ") + r.detail;
    }
    return {"fail", fallbacks + rest + not_compared};
  }

  if (sides.size() < 2)
    return {"skipped", "needs two backends that ran; " + std::to_string(sides.size()) + " ran" + not_compared};
  // Sides that ran the same backends compare a backend with itself: at least two must differ.
  std::vector<std::vector<std::string>> distinct;
  for (const Side& s : sides)
    if (std::find(distinct.begin(), distinct.end(), s.ran) == distinct.end()) distinct.push_back(s.ran);
  if (distinct.size() < 2) {
    std::string names, why;
    for (const Side& s : sides) {
      names += (names.empty() ? "" : ", ") + s.name;
      if (!s.why.empty()) why += (why.empty() ? "" : "; ") + s.requested + ": " + s.why;
    }
    return {"skipped", "every backend ran " + join(distinct.front(), "+") + " (" + names +
                           "): no two different backends to compare" + (why.empty() ? std::string() : " (" + why + ")") +
                           not_compared};
  }
  CheckResult r = compare_sides(sides);
  r.detail += not_compared;
  return r;
}

}  // namespace tpb
