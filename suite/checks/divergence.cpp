#include "suite/checks/divergence.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

#include "suite/checks/digests.h"
#include "suite/checks/tolerance.h"

namespace tpb {

namespace {

using nlohmann::json;

// metrics[r].instrumentation.tensor_digests.entries of a record, or null.
json rank_entries(const json& record, std::size_t r) {
  const json metrics = record.value("metrics", json::array());
  if (!metrics.is_array() || r >= metrics.size() || !metrics[r].is_object()) return nullptr;
  const json inst = metrics[r].value("instrumentation", json::object());
  const json td = inst.is_object() ? inst.value("tensor_digests", json()) : json();
  return td.is_object() && td.contains("entries") ? td["entries"] : json();
}

std::size_t rank_count(const json& record) {
  const json metrics = record.value("metrics", json::array());
  return metrics.is_array() ? metrics.size() : 0;
}

std::vector<float> samples_of(const json& entry) {
  std::vector<float> v;
  for (const auto& x : entry.value("samples", json::array()))
    v.push_back(x.is_number() ? x.get<float>() : std::numeric_limits<float>::quiet_NaN());
  return v;
}

std::string g(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

// Fills the place and the sample differences of call `ea` (side a) vs `eb` (side b).
void describe_call(Divergence& d, const json& ea, const json& eb, int rank) {
  d.found = true;
  d.rank = rank;
  d.call = ea.value("call", std::int64_t{-1});
  d.forward = ea.value("forward", std::int64_t{-1});
  d.layer = ea.value("layer", json()).is_number() ? ea["layer"].get<std::int64_t>() : -1;
  d.site = ea.value("site", ea.value("op", std::string("collective")));
  d.inputs_equal = ea.value("in", std::string()) == eb.value("in", std::string()) &&
                   ea.value("in_count", json()) == eb.value("in_count", json());
  const std::vector<float> a = samples_of(ea), b = samples_of(eb);
  double largest = 0, num = 0, den = 0;
  d.samples = 0;
  d.max_abs = 0;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;  // past the end of a small tensor
    ++d.samples;
    const double diff = std::fabs(static_cast<double>(a[i]) - b[i]);
    d.max_abs = std::max(d.max_abs, std::isnan(diff) ? std::numeric_limits<double>::infinity() : diff);
    largest = std::max(largest, std::fabs(static_cast<double>(a[i])));
    num += diff * diff;
    den += static_cast<double>(a[i]) * a[i];
  }
  d.max_rel = largest > 0 ? d.max_abs / largest : (d.max_abs > 0 ? std::numeric_limits<double>::infinity() : 0);
  d.rel_l2 = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

}  // namespace

std::string Divergence::sentence() const {
  if (!compared) return "not localized: " + why_not;
  if (!found) return why_not;
  std::string s = "first divergence at " + site + " (collective " + std::to_string(call) + " of the case, forward " +
                  std::to_string(forward) + ", rank " + std::to_string(rank) + "; the " + std::to_string(calls_agreeing) +
                  " before it agree): ";
  if (budget_mode)
    s += "outputs rel-L2 " + g(rel_l2) + " (budget " + g(budget) + ")";
  else
    s += inputs_equal ? "inputs equal, outputs differ: the collective itself returned another result"
                      : "inputs already differ: the compute before it parted";
  return s + ", max abs difference " + g(max_abs) + " (" + g(100 * max_rel) + "% of the largest |value|) over " +
         std::to_string(samples) + " values sampled across the output";
}

json Divergence::to_json() const {
  json j = {{"compared", compared}, {"found", found}, {"sentence", sentence()}, {"sides", {a_name, b_name}}};
  if (!found) return j;
  j.update({{"rank", rank},
            {"call", call},
            {"forward", forward},
            {"layer", layer >= 0 ? json(layer) : json(nullptr)},
            {"site", site},
            {"mode", budget_mode ? "tolerance" : "bitwise"},
            {"inputs_equal", budget_mode ? json(nullptr) : json(inputs_equal)},
            {"max_abs_diff", max_abs},
            {"max_rel_diff", max_rel},
            {"rel_l2", rel_l2},
            {"samples", samples},
            {"calls_agreeing", calls_agreeing}});
  return j;
}

Divergence locate_divergence(const json& a, const json& b, const std::string& a_name, const std::string& b_name,
                             double budget) {
  Divergence d;
  d.a_name = a_name;
  d.b_name = b_name;
  d.budget_mode = budget > 0;
  d.budget = budget;
  if (rank_entries(a, 0).is_null() || rank_entries(b, 0).is_null()) {
    d.why_not = "a side carries no tensor digests (metrics[r].instrumentation.tensor_digests: the workload must run at "
                "instrumentation=digests)";
    return d;
  }
  d.compared = true;
  if (d.budget_mode) {
    // Rank 0 holds every all_reduce's full output; other calls' layouts depend on TP.
    const json ea = rank_entries(a, 0), eb = rank_entries(b, 0);
    std::int64_t agreeing = 0;
    for (std::size_t i = 0; i < std::min(ea.size(), eb.size()); ++i) {
      if (ea[i].value("op", "") != "all_reduce" || eb[i].value("op", "") != "all_reduce") continue;
      const FloatComparison c = compare_rel_l2(samples_of(ea[i]), samples_of(eb[i]), budget);
      if (!c.pass) {
        describe_call(d, ea[i], eb[i], 0);
        d.calls_agreeing = agreeing;
        return d;
      }
      ++agreeing;
    }
    d.why_not = "the rerun did not localize it: every one of " + std::to_string(agreeing) +
                " all_reduce outputs agrees within the budget on rank 0; the outputs part after the last one";
    return d;
  }
  // Bitwise: the earliest call, over the ranks, whose output (or place in the sequence) differs.
  const std::size_t ranks = std::min(rank_count(a), rank_count(b));
  std::int64_t best = -1;
  std::size_t total = 0;
  for (std::size_t r = 0; r < ranks; ++r) {
    const json ea = rank_entries(a, r), eb = rank_entries(b, r);
    if (!ea.is_array() || !eb.is_array()) continue;
    total = std::max(total, std::min(ea.size(), eb.size()));
    for (std::size_t i = 0; i < std::min(ea.size(), eb.size()); ++i) {
      if (best >= 0 && static_cast<std::int64_t>(i) >= best) break;
      const bool same = ea[i].value("op", "") == eb[i].value("op", "") && ea[i].value("out_count", json()) == eb[i].value("out_count", json()) &&
                        ea[i].value("out", "") == eb[i].value("out", "");
      if (same) continue;
      best = static_cast<std::int64_t>(i);
      describe_call(d, ea[i], eb[i], static_cast<int>(r));
      d.calls_agreeing = best;
      if (ea[i].value("op", "") != eb[i].value("op", "") || ea[i].value("out_count", json()) != eb[i].value("out_count", json()))
        d.site += " (the sides' collectives part here: " + ea[i].value("op", std::string("?")) + " of " +
                  ea[i].value("out_count", json()).dump() + " vs " + eb[i].value("op", std::string("?")) + " of " +
                  eb[i].value("out_count", json()).dump() + ")";
      break;
    }
  }
  if (best >= 0) return d;
  const std::string outputs = digest_difference(a, b);
  d.why_not = "every one of " + std::to_string(total) + " collectives agrees bitwise on every rank; " +
              (outputs.empty() ? std::string("the outputs agree as well: the rerun with digests did not reproduce the divergence")
                               : "the outputs part after the last collective (" + outputs + ")");
  return d;
}

}  // namespace tpb
