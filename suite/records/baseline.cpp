#include "suite/records/baseline.h"

#include <algorithm>
#include <cstdint>
#include <cmath>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "reference_engine/config/json_text.h"
#include "suite/records/results.h"
#include "suite/measure/stats.h"
#include "tpb/message_text.h"

namespace tpb {

BaselineTolerances tolerances_from_json(const nlohmann::json& s) {
  BaselineTolerances t;
  if (!s.is_object()) return t;
  t.latency_rel_tol = s.value("latency_rel_tol", t.latency_rel_tol);
  t.memory_rel_tol = s.value("memory_rel_tol", t.memory_rel_tol);
  t.kv_tokens_rel_tol = s.value("kv_tokens_rel_tol", t.kv_tokens_rel_tol);
  t.alpha = s.value("alpha", t.alpha);
  t.min_repetitions = s.value("min_repetitions", t.min_repetitions);
  t.latency_informational = s.value("latency", std::string("judged")) == "informational";
  t.control_ceiling = s.value("control_ceiling", t.control_ceiling);
  return t;
}

std::string latency_judgement_note(const BaselineTolerances& tol, int repetitions) {
  const std::string reps = std::to_string(repetitions) + " repetition" + (repetitions == 1 ? "" : "s") +
                           " per case; the U test needs " + std::to_string(tol.min_repetitions);
  if (tol.latency_informational)
    return "latency: informational ($.baseline.latency): the ratios are recorded, no latency verdict is given (" +
           reps + ")";
  if (repetitions < tol.min_repetitions)
    return "latency: not judged: " + reps + ", so every latency verdict reads insufficient-data; raise "
           "measure.repetitions or declare \"baseline\": {\"latency\": \"informational\"}";
  return "";
}

std::vector<std::string> verdict_notes(const std::vector<MetricVerdict>& verdicts, const BaselineTolerances& tol) {
  int insufficient = 0, noise = 0, informational = 0, no_baseline = 0, drift = 0;
  std::size_t fewest_old = SIZE_MAX, fewest_new = SIZE_MAX;
  for (const auto& v : verdicts) {
    if (v.verdict == "insufficient-data") {
      ++insufficient;
      fewest_old = std::min(fewest_old, v.old_repetitions);
      fewest_new = std::min(fewest_new, v.new_repetitions);
    }
    noise += v.verdict == "noise";
    informational += v.verdict == "informational";
    no_baseline += v.verdict == "no-baseline";
    drift += v.verdict == "machine-drift";
  }
  std::vector<std::string> out;
  const auto rows = [](int n) { return std::to_string(n) + " row" + (n == 1 ? "" : "s"); };
  if (insufficient > 0)
    out.push_back(rows(insufficient) + " insufficient-data: the Mann-Whitney U test needs " +
                  std::to_string(tol.min_repetitions) + " per-repetition medians on each side, these had as few as " +
                  std::to_string(fewest_old) + " (old) and " + std::to_string(fewest_new) +
                  " (new); no latency verdict, so no regression could be found there (raise measure.repetitions, or "
                  "the scenario declares \"baseline\": {\"latency\": \"informational\"})");
  if (noise > 0)
    out.push_back(rows(noise) + " noise: beyond the latency tolerance but not significant at alpha " +
                  std::to_string(tol.alpha).substr(0, 4) + " (the repetitions overlap)");
  if (informational > 0)
    out.push_back(rows(informational) + " informational: the scenario records latency ratios without a verdict");
  if (no_baseline > 0) out.push_back(rows(no_baseline) + " no-baseline: OLD has no ok record of that case, nothing to compare");
  if (drift > 0)
    out.push_back(std::to_string(drift) +
                  " latency verdict(s) machine-drift: slowed alike with the control case, not regressions");
  return out;
}

bool control_beyond_ceiling(const LatencyControl& control, const BaselineTolerances& tol) {
  return control.ratio > 0 && (control.ratio > tol.control_ceiling || control.ratio < 1 / tol.control_ceiling);
}

bool is_regression_verdict(const std::string& verdict) {
  return verdict == "regression" || verdict == "mismatch" || verdict == "not-ok";
}

bool is_regression(const MetricVerdict& v) {
  return is_regression_verdict(v.verdict);
}

namespace {

// A string field of a record, or `absent` where it is missing, null or not a string: records
// are user input, and json::value would throw a type_error on {"status": null}.
std::string text_field(const nlohmann::json& r, const char* key, const char* absent = "") {
  const auto it = r.find(key);
  return it != r.end() && it->is_string() ? it->get<std::string>() : std::string(absent);
}

// Latency samples of a record for the test: one per repetition (the median of that
// repetition's iterations). Repetitions are the independent unit: iterations of one
// repetition share the machine's state and would overstate significance.
std::vector<double> latency_samples(const nlohmann::json& r) {
  const auto lat = r.value("latency", nlohmann::json());
  if (!lat.is_object() || !lat.contains("repetitions_us") || !lat["repetitions_us"].is_array()) return {};
  return lat["repetitions_us"].get<std::vector<double>>();
}

// The iteration samples a record holds (latency.samples_us, else latency.count).
std::size_t iteration_count(const nlohmann::json& r) {
  const auto lat = r.value("latency", nlohmann::json());
  if (!lat.is_object()) return 0;
  if (lat.contains("samples_us") && lat["samples_us"].is_array()) return lat["samples_us"].size();
  return lat.contains("count") && lat["count"].is_number_unsigned() ? lat["count"].get<std::size_t>() : 0;
}

double latency_p50(const nlohmann::json& r) {
  const auto lat = r.value("latency", nlohmann::json());
  return lat.is_object() && lat.contains("p50") && lat["p50"].is_number() ? lat["p50"].get<double>() : 0.0;
}

// Per-rank objects of a field that is either an array (index = rank) or {"0": ..} / {"rank0": ..}.
std::map<std::string, nlohmann::json> per_rank(const nlohmann::json& field) {
  std::map<std::string, nlohmann::json> out;
  if (field.is_array()) {
    for (std::size_t i = 0; i < field.size(); ++i) out["rank" + std::to_string(i)] = field[i];
  } else if (field.is_object()) {
    for (const auto& [k, v] : field.items()) out[k.rfind("rank", 0) == 0 ? k : "rank" + k] = v;
  }
  return out;
}

MetricVerdict base(const nlohmann::json& rec, std::string metric) {
  MetricVerdict v;
  v.case_id = text_field(rec, "case_id");
  v.label = text_field(rec, "label");
  v.metric = std::move(metric);
  return v;
}

void compare_latency(const nlohmann::json& o, const nlohmann::json& n, const BaselineTolerances& tol,
                     const LatencyControl& control, std::vector<MetricVerdict>& out) {
  const auto a = latency_samples(o), b = latency_samples(n);
  const double old_p50 = latency_p50(o), new_p50 = latency_p50(n);
  if (a.empty() && b.empty() && old_p50 == 0 && new_p50 == 0) return;
  MetricVerdict v = base(n, "latency_us");
  v.old_value = a.empty() ? old_p50 : median(a);
  v.new_value = b.empty() ? new_p50 : median(b);
  v.ratio = v.old_value > 0 ? v.new_value / v.old_value : 0;
  v.old_repetitions = a.size();
  v.new_repetitions = b.size();
  v.old_iterations = iteration_count(o);
  v.new_iterations = iteration_count(n);
  if (static_cast<int>(a.size()) < tol.min_repetitions || static_cast<int>(b.size()) < tol.min_repetitions) {
    v.verdict = "insufficient-data";
    // What each side has: a run of one repetition has iteration samples but no
    // per-repetition medians, which "0 vs 0 repetitions" hid.
    const auto has = [](std::size_t reps, std::size_t iterations) {
      return reps > 0 ? std::to_string(reps) + " repetition" + (reps == 1 ? "" : "s")
                      : std::to_string(iterations) + " iteration sample" + (iterations == 1 ? "" : "s") +
                            " in no per-repetition medians";
    };
    v.detail = "OLD has " + has(a.size(), v.old_iterations) + ", NEW " + has(b.size(), v.new_iterations) +
               "; the test needs " + std::to_string(tol.min_repetitions) +
               " repetitions on each side (measure.repetitions)";
    if (tol.latency_informational) v.verdict = "informational";
    out.push_back(v);
    return;
  }
  // The new samples in the old run's machine time: divided by how much the control moved.
  const bool with_control = control.ratio > 0;
  const double c = with_control ? control.ratio : 1.0;
  std::vector<double> b_norm = b;
  for (double& x : b_norm) x /= c;
  const auto test = mann_whitney_u(a, b_norm);
  const auto raw_test = with_control ? mann_whitney_u(a, b) : test;
  const auto ci = median_ratio_interval(a, b);
  v.p_value = test.p_value;
  v.ci_low = ci.low;
  v.ci_high = ci.high;
  if (with_control) {
    v.control_ratio = c;
    v.normalised_ratio = v.ratio / c;
    v.raw_p_value = raw_test.p_value;
    v.control_case_id = control.case_id;
  }
  const double judged = v.ratio / c;
  const bool beyond = std::abs(judged - 1.0) > tol.latency_rel_tol;
  const bool significant = test.p_value < tol.alpha;
  const bool raw_moved = std::abs(v.ratio - 1.0) > tol.latency_rel_tol && raw_test.p_value < tol.alpha;
  if (beyond && significant) v.verdict = judged > 1 ? "regression" : "improvement";
  else if (with_control && control.moved && raw_moved) v.verdict = "machine-drift";
  else if (beyond) v.verdict = "noise";
  else v.verdict = "ok";
  std::ostringstream d;
  d << "median " << v.old_value << " -> " << v.new_value << " us, tolerance " << tol.latency_rel_tol * 100 << " %";
  if (with_control)
    d << ", x" << v.ratio << " raw, control " << control.case_id << " x" << c << ", x" << judged
      << " relative to it";
  d << ", Mann-Whitney p = " << test.p_value << (test.exact ? " (exact)" : " (normal approx.)");
  if (with_control) d << " (raw p = " << raw_test.p_value << ")";
  if (v.verdict == "machine-drift") d << ": the control slowed alike, the machine moved, not this case";
  else if (!with_control && !control.why_none.empty()) d << "; not relative to a control: " << control.why_none;
  v.detail = d.str();
  if (tol.latency_informational) {
    v.detail = "informational (the scenario's baseline.latency), judged " + v.verdict + ": " + v.detail;
    v.verdict = "informational";
  }
  out.push_back(v);
}

void compare_scalar(const std::string& metric, double old_value, double new_value, double rel_tol,
                    bool higher_is_worse, const nlohmann::json& rec, std::vector<MetricVerdict>& out) {
  MetricVerdict v = base(rec, metric);
  v.old_value = old_value;
  v.new_value = new_value;
  v.ratio = old_value != 0 ? new_value / old_value : (new_value == 0 ? 1 : 0);
  const double rel = old_value != 0 ? std::abs(new_value - old_value) / std::abs(old_value) : (new_value == 0 ? 0 : 1);
  if (rel <= rel_tol) v.verdict = "ok";
  else v.verdict = ((new_value > old_value) == higher_is_worse) ? "regression" : "improvement";
  v.detail = "tolerance " + std::to_string(rel_tol * 100) + " %";
  out.push_back(v);
}

void compare_memory(const nlohmann::json& o, const nlohmann::json& n, const BaselineTolerances& tol,
                    std::vector<MetricVerdict>& out) {
  const auto old_ranks = per_rank(o.value("memory", nlohmann::json()));
  for (const auto& [rank, phases] : per_rank(n.value("memory", nlohmann::json()))) {
    if (!phases.is_object()) continue;
    for (const auto& [phase, values] : phases.items()) {
      if (!values.is_object() || !values.contains("used_bytes")) continue;
      const std::string metric = "memory." + rank + "." + phase;
      auto it = old_ranks.find(rank);
      if (it == old_ranks.end() || !it->second.contains(phase) || !it->second[phase].contains("used_bytes")) {
        MetricVerdict v = base(n, metric);
        v.verdict = "no-baseline";
        out.push_back(v);
        continue;
      }
      compare_scalar(metric, it->second[phase]["used_bytes"].get<double>(), values["used_bytes"].get<double>(),
                     tol.memory_rel_tol, true, n, out);
    }
  }
}

void compare_digests(const nlohmann::json& o, const nlohmann::json& n, std::vector<MetricVerdict>& out) {
  const auto old_ranks = per_rank(o.value("digests", nlohmann::json()));
  for (const auto& [rank, digests] : per_rank(n.value("digests", nlohmann::json()))) {
    if (!digests.is_object()) continue;
    for (const auto& [name, value] : digests.items()) {
      MetricVerdict v = base(n, "digest." + rank + "." + name);
      auto it = old_ranks.find(rank);
      if (it == old_ranks.end() || !it->second.is_object() || !it->second.contains(name)) {
        v.verdict = "no-baseline";
      } else if (it->second[name] == value) {
        v.verdict = "ok";
      } else {
        v.verdict = "mismatch";
        v.detail = "digest " + it->second[name].dump() + " -> " + value.dump();
      }
      out.push_back(v);
    }
  }
}

std::string got(const nlohmann::json& v) { return shown_json(v); }

}  // namespace

std::string comparable_record_problem(const nlohmann::json& r) {
  using nlohmann::json;
  if (!r.is_object()) return "$: expected a record object, got " + got(r);
  if (!r.contains("case_id") || !r["case_id"].is_string()) return "$.case_id: expected a string, got " + got(r.value("case_id", json()));
  for (const char* key : {"status", "label", "role"})
    if (r.contains(key) && !r[key].is_string() && !r[key].is_null())
      return std::string("$.") + key + ": expected a string, got " + got(r[key]);
  for (const char* key : {"params", "placement", "provenance", "plan"})
    if (r.contains(key) && !r[key].is_object() && !r[key].is_null())
      return std::string("$.") + key + ": expected an object or null, got " + got(r[key]);
  if (r.contains("params") && r["params"].is_object() && r["params"].contains("tp") && !r["params"]["tp"].is_number_integer())
    return "$.params.tp: expected an integer, got " + got(r["params"]["tp"]);
  if (r.contains("plan") && r["plan"].is_object() && r["plan"].contains("max_tokens") &&
      !r["plan"]["max_tokens"].is_number() && !r["plan"]["max_tokens"].is_null())
    return "$.plan.max_tokens: expected a number, got " + got(r["plan"]["max_tokens"]);
  if (r.contains("latency") && !r["latency"].is_null()) {
    const json& lat = r["latency"];
    if (!lat.is_object()) return "$.latency: expected an object or null, got " + got(lat);
    for (const char* key : {"p50", "p90", "p99", "mean"})
      if (lat.contains(key) && !lat[key].is_number() && !lat[key].is_null())
        return std::string("$.latency.") + key + ": expected a number, got " + got(lat[key]);
    for (const char* key : {"repetitions_us", "samples_us"}) {
      if (!lat.contains(key) || lat[key].is_null()) continue;
      if (!lat[key].is_array()) return std::string("$.latency.") + key + ": expected an array of numbers, got " + got(lat[key]);
      for (std::size_t i = 0; i < lat[key].size(); ++i)
        if (!lat[key][i].is_number() || !std::isfinite(lat[key][i].get<double>()))
          return std::string("$.latency.") + key + "[" + std::to_string(i) + "]: expected a finite number, got " +
                 got(lat[key][i]);
    }
    if (lat.contains("count") && !lat["count"].is_number_unsigned() && !lat["count"].is_null())
      return "$.latency.count: expected a non-negative integer, got " + got(lat["count"]);
  }
  for (const char* key : {"memory", "digests"}) {
    if (!r.contains(key) || r[key].is_null()) continue;
    const json& field = r[key];
    if (!field.is_array() && !field.is_object()) return std::string("$.") + key + ": expected per-rank entries, got " + got(field);
    for (const auto& [rank, entry] : field.items()) {
      const std::string at = std::string("$.") + key + (field.is_array() ? "[" + rank + "]" : "." + rank);
      if (!entry.is_object() && !entry.is_null()) return at + ": expected an object, got " + got(entry);
      if (!entry.is_object()) continue;
      for (const auto& [name, value] : entry.items()) {
        if (std::string(key) == "digests" && !value.is_string() && !value.is_null())
          return at + "." + name + ": expected a digest string, got " + got(value);
        if (std::string(key) == "memory" && value.is_object() && value.contains("used_bytes") && !value["used_bytes"].is_number())
          return at + "." + name + ".used_bytes: expected a number, got " + got(value["used_bytes"]);
      }
    }
  }
  return "";
}

std::vector<MetricVerdict> compare_records(const nlohmann::json& o, const nlohmann::json& n,
                                           const BaselineTolerances& tol, const LatencyControl& control) {
  std::vector<MetricVerdict> out;
  // Shared placement (ranks packed on a GPU) measures contention, exclusive an interconnect:
  // the two never meet (their case ids differ too; this holds for hand-made files).
  const auto placement_of = [](const nlohmann::json& r) {
    const auto p = r.value("placement", nlohmann::json());
    return p.is_object() ? text_field(p, "placement", "exclusive") : std::string("exclusive");
  };
  if (placement_of(o) != placement_of(n)) {
    MetricVerdict v = base(n, "placement");
    v.verdict = "mismatch";
    v.detail = "baseline placement " + placement_of(o) + ", now " + placement_of(n) +
               ": shared-GPU timings measure contention and are never compared with exclusive ones";
    out.push_back(v);
    return out;
  }
  compare_latency(o, n, tol, control, out);
  compare_memory(o, n, tol, out);
  const auto op = o.value("plan", nlohmann::json()), np = n.value("plan", nlohmann::json());
  // A null max_tokens (comparable_record_problem allows it) is no prediction.
  if (np.is_object() && np.contains("max_tokens") && np["max_tokens"].is_number()) {
    if (op.is_object() && op.contains("max_tokens") && op["max_tokens"].is_number()) {
      compare_scalar("kv_tokens", op["max_tokens"].get<double>(), np["max_tokens"].get<double>(),
                     tol.kv_tokens_rel_tol, false, n, out);
    } else {
      MetricVerdict v = base(n, "kv_tokens");
      v.verdict = "no-baseline";
      out.push_back(v);
    }
  }
  compare_digests(o, n, out);
  return out;
}

LatencyControl latency_control(const std::vector<nlohmann::json>& old_records,
                               const std::vector<nlohmann::json>& new_records, const BaselineTolerances& tol) {
  LatencyControl c;
  const nlohmann::json* now = nullptr;
  for (const char* role : {"control-start", "control-end"}) {
    for (const auto& r : new_records)
      if (text_field(r, "role") == role && text_field(r, "status") == "ok") now = &r;
    if (now) break;
  }
  if (!now) {
    c.why_none = "no control case ran ok";
    return c;
  }
  const std::string id = text_field(*now, "case_id");
  const nlohmann::json* stored = nullptr;
  for (const auto& r : old_records)
    if (text_field(r, "case_id") == id && text_field(r, "status") == "ok") stored = &r;
  if (!stored) {
    c.why_none = "no ok record of control " + id + " in the baseline";
    return c;
  }
  const auto a = latency_samples(*stored), b = latency_samples(*now);
  if (static_cast<int>(a.size()) < tol.min_repetitions || static_cast<int>(b.size()) < tol.min_repetitions) {
    c.why_none = "control " + id + " has " + std::to_string(a.size()) + " vs " + std::to_string(b.size()) +
                 " repetitions, need " + std::to_string(tol.min_repetitions);
    return c;
  }
  c.case_id = id;
  c.ratio = median(b) / median(a);
  if (!(c.ratio > 0) || !std::isfinite(c.ratio)) {
    c = LatencyControl{};
    c.why_none = "control " + id + " has no positive median latency";
    return c;
  }
  c.p_value = mann_whitney_u(a, b).p_value;
  c.moved = std::abs(c.ratio - 1.0) > tol.latency_rel_tol && c.p_value < tol.alpha;
  return c;
}

std::vector<MetricVerdict> compare_runs(const std::vector<nlohmann::json>& old_records,
                                        const std::vector<nlohmann::json>& new_records,
                                        const BaselineTolerances& tol) {
  return compare_runs(old_records, new_records, tol, latency_control(old_records, new_records, tol));
}

std::vector<MetricVerdict> compare_runs(const std::vector<nlohmann::json>& old_records,
                                        const std::vector<nlohmann::json>& new_records,
                                        const BaselineTolerances& tol, const LatencyControl& control) {
  // The last record of a case counts, on both sides (a resumed or retried run appends; a case
  // that passed and then failed is failed): an earlier ok record never stands in for it, and a
  // repeated record is compared once. Only a case whose last record is ok is compared.
  const auto last_by_id = [](const std::vector<nlohmann::json>& records) {
    std::map<std::string, const nlohmann::json*> last;
    for (const auto& r : records)
      if (!text_field(r, "case_id").empty()) last[text_field(r, "case_id")] = &r;
    return last;
  };
  const auto old_by_id = last_by_id(old_records), new_by_id = last_by_id(new_records);
  std::vector<MetricVerdict> out;
  std::set<std::string> compared;
  for (const auto& record : new_records) {
    const std::string id = text_field(record, "case_id");
    const auto last = new_by_id.find(id);
    if (last == new_by_id.end() || !compared.insert(id).second) continue;
    const nlohmann::json& n = *last->second;
    auto it = old_by_id.find(id);
    if (text_field(n, "status") != "ok") {
      // A case ok in OLD whose last record in NEW is not: not compared by an earlier record,
      // and said (compare exits 1 on it).
      if (it != old_by_id.end() && text_field(*it->second, "status") == "ok") {
        MetricVerdict v = base(n, "case");
        v.verdict = "not-ok";
        v.detail = "the case's last record in NEW is " + text_field(n, "status", "without a status") +
                   " (ok in OLD): not compared";
        out.push_back(v);
      }
      continue;
    }
    if (it == old_by_id.end() || text_field(*it->second, "status") != "ok") {
      MetricVerdict v = base(n, "case");
      v.verdict = "no-baseline";
      v.detail = it == old_by_id.end() ? "no record of this case in the baseline"
                                       : "the case's last record in the baseline is " +
                                             text_field(*it->second, "status", "without a status") + ", not ok";
      out.push_back(v);
      continue;
    }
    auto verdicts = compare_records(*it->second, n, tol, control);
    out.insert(out.end(), verdicts.begin(), verdicts.end());
  }
  return out;
}

std::string nothing_comparable(const std::vector<nlohmann::json>& old_records,
                               const std::vector<nlohmann::json>& new_records, const std::string& old_name,
                               const std::string& new_name) {
  // Ok case ids of one side, or why that side has none.
  auto ok_ids = [](const std::vector<nlohmann::json>& records, const std::string& side, std::set<std::string>& ids) {
    std::map<std::string, int> by_status;
    for (const auto& r : records) {
      const std::string status = text_field(r, "status", "no status");
      ++by_status[status];
      if (status == "ok") ids.insert(text_field(r, "case_id"));
    }
    if (records.empty()) return side + " holds no record";
    if (!ids.empty()) return std::string();
    std::string counts;
    for (const auto& [status, n] : by_status) counts += (counts.empty() ? "" : ", ") + std::to_string(n) + " " + status;
    return side + " holds no ok record (" + std::to_string(records.size()) + " record" +
           (records.size() == 1 ? "" : "s") + ": " + counts + ")";
  };
  std::set<std::string> old_ids, new_ids;
  const std::string old_side = "OLD " + old_name, new_side = "NEW " + new_name;
  for (const std::string& why : {ok_ids(old_records, old_side, old_ids), ok_ids(new_records, new_side, new_ids)})
    if (!why.empty()) return why;
  for (const auto& id : new_ids)
    if (old_ids.count(id)) return "";
  return "no case id in common: " + old_side + " has " + std::to_string(old_ids.size()) + " ok case" +
         (old_ids.size() == 1 ? "" : "s") + ", " + new_side + " " + std::to_string(new_ids.size()) + ", none the same";
}

nlohmann::json to_json(const MetricVerdict& v) {
  nlohmann::json j = {{"case_id", v.case_id}, {"label", v.label}, {"metric", v.metric},
                      {"old", v.old_value}, {"new", v.new_value}, {"ratio", v.ratio}, {"verdict", v.verdict},
                      {"detail", v.detail}};
  if (v.p_value >= 0) {
    j["p_value"] = v.p_value;
    j["ci_low"] = v.ci_low;
    j["ci_high"] = v.ci_high;
  }
  if (v.metric == "latency_us") {
    j["repetitions"] = {{"old", v.old_repetitions}, {"new", v.new_repetitions}};
    j["iteration_samples"] = {{"old", v.old_iterations}, {"new", v.new_iterations}};
  }
  if (v.control_ratio > 0) {
    j["control"] = {{"case_id", v.control_case_id}, {"ratio", v.control_ratio}};
    j["normalised_ratio"] = v.normalised_ratio;
    j["raw_p_value"] = v.raw_p_value;
  }
  return j;
}

nlohmann::json hardware_fingerprint(const nlohmann::json& p) {
  nlohmann::json gpus = nlohmann::json::array();
  if (p.contains("gpus") && p["gpus"].is_array())
    for (const auto& g : p["gpus"]) gpus.push_back(g.is_object() ? g.value("name", nlohmann::json("")) : g);
  return {{"gpus", gpus},
          {"topology", p.value("topology", nlohmann::json())},
          {"driver", p.value("cuda_driver", nlohmann::json())},
          {"cuda", p.value("cuda_runtime", nlohmann::json())},
          {"nccl", p.value("nccl_version", nlohmann::json())},
          {"build", build_fingerprint(p)}};
}

namespace {

// The provenance keys that describe the build (suite/records/provenance.cpp writes them).
constexpr const char* kBuildKeys[] = {"tpbench_version", "git_sha",    "git_dirty",     "build_type",
                                      "compiler",        "cxx_flags",  "have_cuda",     "cuda_compiler",
                                      "cuda_flags",      "cuda_architectures"};

std::string sha_text(const nlohmann::json& b) {
  std::string sha = b["git_sha"].is_string() ? b["git_sha"].get<std::string>().substr(0, 12) : "?";
  if (b["git_dirty"].is_boolean()) return sha + (b["git_dirty"].get<bool>() ? "+dirty" : "");
  return sha + "+dirty?";
}

// A build field as the comparison quotes it: cut where long (a results file is input too).
std::string value_text(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>().empty() ? "(none)" : cut_for_message(v.get<std::string>());
  return shown_json(v);
}

// Whether a build has CUDA code: have_cuda, else a CUDA compiler named; null when unknown.
nlohmann::json with_cuda(const nlohmann::json& b) {
  if (b["have_cuda"].is_boolean()) return b["have_cuda"];
  if (b["cuda_compiler"].is_string()) return !b["cuda_compiler"].get<std::string>().empty();
  return nullptr;
}

void add_unique(std::vector<std::string>& to, const std::vector<std::string>& from) {
  for (const auto& x : from)
    if (std::find(to.begin(), to.end(), x) == to.end()) to.push_back(x);
}

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

}  // namespace

nlohmann::json build_fingerprint(const nlohmann::json& p) {
  nlohmann::json b = nlohmann::json::object();
  for (const char* key : kBuildKeys) b[key] = p.is_object() && p.contains(key) ? p[key] : nlohmann::json();
  return b;
}

nlohmann::json record_build(const nlohmann::json& record, const nlohmann::json& file_provenance) {
  nlohmann::json own = build_fingerprint(record.value("provenance", nlohmann::json()));
  const nlohmann::json file = build_fingerprint(file_provenance);
  // The file's provenance fills the record's gaps only when it describes the same build:
  // a record of a resumed run may come from another build than the file's first.
  const bool same = (own["git_sha"].is_null() || own["git_sha"] == file["git_sha"]) &&
                    (own["git_dirty"].is_null() || own["git_dirty"] == file["git_dirty"]);
  if (!same) return own;
  for (auto& [key, value] : own.items())
    if (value.is_null()) value = file[key];
  return own;
}

std::vector<nlohmann::json> builds_of(const std::vector<nlohmann::json>& records,
                                      const nlohmann::json& file_provenance) {
  std::vector<nlohmann::json> builds;
  for (const auto& r : records) {
    if (!r.contains("provenance") || !r["provenance"].is_object()) continue;
    const nlohmann::json b = record_build(r, file_provenance);
    if (std::find(builds.begin(), builds.end(), b) == builds.end()) builds.push_back(b);
  }
  if (builds.empty() && file_provenance.is_object()) builds.push_back(build_fingerprint(file_provenance));
  return builds;
}

nlohmann::json file_provenance_of(const std::string& results_path) {
  namespace fs = std::filesystem;
  const fs::path path(results_path);
  for (const fs::path& candidate : {fs::path(path).replace_extension(".provenance.json"), path.parent_path() / "run.json"}) {
    std::error_code ec;
    if (!fs::is_regular_file(candidate, ec)) continue;
    try {
      const nlohmann::json doc = read_json_file(candidate.string());
      if (doc.contains("provenance") && doc["provenance"].is_object()) return doc["provenance"];
    } catch (const std::exception&) {
      // Unreadable: the records' own provenance stands alone.
    }
  }
  return nullptr;
}

std::string describe_build(const nlohmann::json& build) {
  const nlohmann::json b = build_fingerprint(build);
  const auto text = [&](const char* key) {
    return b[key].is_string() ? value_text(b[key]) : std::string("?");
  };
  return "tpbench " + text("tpbench_version") + ", " + sha_text(b) + ", " + text("build_type") + ", " + text("compiler");
}

std::vector<std::string> BuildComparison::notes() const {
  std::vector<std::string> out;
  if (!unknown_old.empty())
    out.push_back(old_name + " predates build fingerprints: " + join(unknown_old, ", ") +
                  " unknown (judged on the fields both sides record)");
  if (!unknown_new.empty())
    out.push_back(new_name + " predates build fingerprints: " + join(unknown_new, ", ") +
                  " unknown (judged on the fields both sides record)");
  return out;
}

std::string BuildComparison::why() const { return join(differences, "; "); }

nlohmann::json BuildComparison::to_json() const {
  return {{"like_for_like", like_for_like},
          {"verdict", like_for_like ? "ok" : "not-like-for-like"},
          {"differences", differences},
          {"unknown", {{"old", unknown_old}, {"new", unknown_new}}},
          {"notes", notes()}};
}

BuildComparison compare_builds(const nlohmann::json& old_in, const nlohmann::json& new_in, const std::string& old_name,
                               const std::string& new_name) {
  // Missing keys read as unknown (a hand-made or partial build object).
  const nlohmann::json o = build_fingerprint(old_in), n = build_fingerprint(new_in);
  BuildComparison c;
  c.old_name = old_name;
  c.new_name = new_name;
  c.compared = true;
  // A dirty tree is code no sha names: never like-for-like, whatever else agrees.
  for (const auto* side : {&o, &n}) {
    const std::string& name = side == &o ? old_name : new_name;
    auto& unknown = side == &o ? c.unknown_old : c.unknown_new;
    if (!(*side)["git_sha"].is_string()) unknown.push_back("git sha");
    if (!(*side)["git_dirty"].is_boolean()) unknown.push_back("dirty flag");
    else if ((*side)["git_dirty"].get<bool>()) c.differences.push_back(name + " is from a dirty tree (" + sha_text(*side) + ")");
    if (!(*side)["tpbench_version"].is_string()) unknown.push_back("tpbench version");
  }
  const auto field = [&](const char* key, const std::string& label) {
    const nlohmann::json &a = o[key], &b = n[key];
    if (a.is_null()) c.unknown_old.push_back(label);
    if (b.is_null()) c.unknown_new.push_back(label);
    if (!a.is_null() && !b.is_null() && a != b)
      c.differences.push_back(label + ": " + value_text(a) + " (" + old_name + ") vs " + value_text(b) + " (" + new_name + ")");
  };
  field("build_type", "build type");
  field("compiler", "compiler");
  field("cxx_flags", "C++ flags");
  // CUDA's compiler, flags and architectures matter only where both builds have CUDA code.
  const nlohmann::json co = with_cuda(o), cn = with_cuda(n);
  if (co != false && cn != false) {
    field("cuda_compiler", "CUDA compiler");
    field("cuda_flags", "CUDA flags");
    field("cuda_architectures", "CUDA architectures");
  }
  c.like_for_like = c.differences.empty();
  return c;
}

BuildComparison compare_build_sets(const std::vector<nlohmann::json>& old_builds,
                                   const std::vector<nlohmann::json>& new_builds, const std::string& old_name,
                                   const std::string& new_name) {
  BuildComparison c;
  c.old_name = old_name;
  c.new_name = new_name;
  if (old_builds.empty() || new_builds.empty()) return c;
  c.compared = true;
  for (const auto* side : {&old_builds, &new_builds}) {
    if (side->size() < 2) continue;
    std::vector<std::string> shas;
    for (const auto& b : *side) shas.push_back(sha_text(build_fingerprint(b)));
    c.differences.push_back((side == &old_builds ? old_name : new_name) + " holds records of " +
                            std::to_string(side->size()) + " builds (" + join(shas, ", ") + ")");
  }
  for (const auto& o : old_builds)
    for (const auto& n : new_builds) {
      const BuildComparison pair = compare_builds(o, n, old_name, new_name);
      add_unique(c.differences, pair.differences);
      add_unique(c.unknown_old, pair.unknown_old);
      add_unique(c.unknown_new, pair.unknown_new);
    }
  c.like_for_like = c.differences.empty();
  return c;
}

std::string hardware_dir_name(const nlohmann::json& p) {
  const auto fp = hardware_fingerprint(p);
  if (fp["gpus"].empty()) return "cpu-ref";
  // "NVIDIA H200" -> "h200"; the count appended: "h200x2".
  std::string model = fp["gpus"][0].get<std::string>();
  model = std::regex_replace(model, std::regex("^NVIDIA\\s+"), "");
  std::string slug;
  for (char c : model) {
    if (std::isalnum(static_cast<unsigned char>(c))) slug += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    else if (!slug.empty() && slug.back() != '-') slug += '-';
  }
  while (!slug.empty() && slug.back() == '-') slug.pop_back();
  return slug + "x" + std::to_string(fp["gpus"].size());
}

}  // namespace tpb
