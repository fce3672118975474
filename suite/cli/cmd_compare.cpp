// tpbench compare OLD NEW (run folders or results.jsonl files): every metric of every case
// present in both, with a verdict; exit 1 on any regression (or digest mismatch), so it can
// gate a CI job, and 2 when there is nothing to compare, which would otherwise read as a pass.
// tpbench compare --placements A B: the same scenario run in exclusive and in shared placement,
// case by case, digests held to the numerics policy (suite/checks/compare_placements.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <string>

#include "suite/records/baseline.h"
#include "suite/checks/compare_placements.h"
#include "suite/cli/subcommand.h"
#include "suite/records/jsonl.h"
#include "suite/records/results.h"
#include "tpb/check.h"
#include "tpb/message_text.h"

namespace {

constexpr const char* kUsage =
    "usage: tpbench compare OLD NEW [--json] [--latency-tol F] [--memory-tol F]\n"
    "                       [--kv-tol F] [--alpha A] [--min-repetitions N]\n"
    "       tpbench compare --placements A B [--json]\n"
    "Compares two runs case by case (matched by case id). OLD and NEW are each a run folder\n"
    "(results/<run-id>/, read as its results.jsonl) or a results.jsonl (a baseline file too).\n"
    "  latency    regression when median(new)/median(old) - 1 > --latency-tol (default 0.05)\n"
    "             AND a two-sided Mann-Whitney U test rejects at --alpha (0.05) with at least\n"
    "             --min-repetitions (9) samples per side; else noise / insufficient-data\n"
    "  memory     used bytes per rank and phase within --memory-tol (0.02)\n"
    "  kv_tokens  the plan's max_tokens within --kv-tol (0.01)\n"
    "  digests    output digests, exactly\n"
    "  control    latency relative to the control case (role control-start) of both sides:\n"
    "             the case's ratio divided by the control's; a case slowed alike with the\n"
    "             control reads machine-drift, not regression (column 'vs ctl')\n"
    "Cases missing from OLD read no-baseline. Prints a table by case label (or --json: a list\n"
    "of verdicts); equal digests are counted, not listed; then the geometric mean of new/old\n"
    "per metric over the cases compared, as Google Benchmark's compare.py.\n"
    "First the build of each side (version, git sha, +dirty, build type, compiler; from the\n"
    "records' provenance and the .provenance.json or run.json beside the file) and whether they\n"
    "are like-for-like: not when a side is from a dirty tree, or build type, compiler, flags or\n"
    "CUDA architectures differ (a field one side does not record is listed, not judged).\n"
    "The last record of a case counts on each side (a repeated record is compared once); a case\n"
    "ok in OLD whose last record in NEW is not ok is reported not-ok and counts as a regression.\n"
    "Exit status: 0 no regression, 1 a regression or digest mismatch, 2 bad input (a folder\n"
    "without results.jsonl, e.g. an empty one; a line that is not JSON or a field of the wrong\n"
    "type, named as file:line: $.path; an option out of range: tolerances finite in [0, 100],\n"
    "--alpha in (0, 0.5], --min-repetitions an integer >= 2) or nothing comparable: a side with no ok record\n"
    "(/dev/null, an empty file, a run whose cases were all skipped) or no case id in common,\n"
    "said in one line `tpbench compare: error: nothing comparable: <why>`.\n"
    "\n"
    "--placements A B: one scenario run in exclusive and in shared placement (either order).\n"
    "Cases pair by workload, model, device, params and role (placement changes the case id);\n"
    "each pair's output digests must be equal, every rank: bitwise at TP <= 2, on the CPU and\n"
    "for the allreduce workload; a GPU engine above TP 2 may instead hold its logits within the\n"
    "bf16 budget with the same greedy tokens (docs/numerics.md). Prints each pair (backend, TP,\n"
    "p50 step time per placement, verdict equal / within-budget / mismatch), the cases ok on one\n"
    "side only, and per placement each backend's p50 step time relative to NCCL's in the same\n"
    "group of cases (--json: the same as one object). Exit 0 all equal, 1 a mismatch, 2 bad\n"
    "input, both sides of one placement, or no case ok on both sides.\n";

// A finite number in [lo, hi]: a NaN tolerance or alpha would turn every comparison false
// and a detected regression into exit 0.
double parse_number(const std::string& flag, const std::string& value, double lo, double hi) {
  double v = std::nan("");
  try {
    std::size_t used = 0;
    v = std::stod(value, &used);
    if (used != value.size()) v = std::nan("");
  } catch (const std::exception&) {
  }
  TPB_INPUT_CHECK(std::isfinite(v) && v >= lo && v <= hi,
                  "compare: " << flag << ": expected a number in [" << lo << ", " << hi << "], got '" << tpb::cut_for_message(value) << "'");
  return v;
}

// The records of one side, each checked for the types the comparison reads (file:line: path).
std::vector<nlohmann::json> read_side(const std::string& given) {
  const std::string file = tpb::results_file_of(given);
  std::vector<int> lines;
  auto records = tpb::read_jsonl(file, &lines);
  for (std::size_t i = 0; i < records.size(); ++i) {
    const std::string problem = tpb::comparable_record_problem(records[i]);
    TPB_INPUT_CHECK(problem.empty(), file << ":" << lines[i] << ": " << problem);
  }
  return records;
}

// The case's label, or its id where it has none: a row always names its case (a label from a
// hand-edited file cut, so that one long label does not widen every row).
std::string row_label(const tpb::MetricVerdict& v) { return tpb::cut_for_message(v.label.empty() ? v.case_id : v.label); }

bool is_equal_digest(const tpb::MetricVerdict& v) { return v.metric.rfind("digest.", 0) == 0 && v.verdict == "ok"; }

// The geometric mean of new/old per metric over the cases compared (ratio > 0), as Google
// Benchmark's compare.py prints under its table; for latency also of the ratios relative to
// the control, where every case has one.
struct Geomean {
  std::string metric;
  double ratio = 1;
  int count = 0;
  double normalised = 1;
  int normalised_count = 0;
};

// A row's value in its metric's unit: memory in MiB (7.2767e+06 bytes read as nothing),
// latency in microseconds, counts whole.
std::string value_text(const std::string& metric, double v) {
  char buf[48];
  if (metric.rfind("memory.", 0) == 0)
    std::snprintf(buf, sizeof buf, "%.2f MiB", v / (1024.0 * 1024.0));
  else if (metric == "kv_tokens")
    std::snprintf(buf, sizeof buf, "%.0f", v);
  else if (metric == "latency_us")
    std::snprintf(buf, sizeof buf, "%.6g us", v);
  else
    std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::vector<Geomean> geomeans(const std::vector<tpb::MetricVerdict>& verdicts) {
  std::vector<std::string> order;
  std::map<std::string, std::pair<double, int>> log_sum, log_sum_norm;
  for (const auto& v : verdicts) {
    if (v.metric.rfind("digest.", 0) == 0 || v.metric == "case" || v.metric == "placement" || !(v.ratio > 0) ||
        !std::isfinite(v.ratio))
      continue;
    if (!log_sum.count(v.metric)) order.push_back(v.metric);
    auto& [sum, n] = log_sum[v.metric];
    sum += std::log(v.ratio);
    ++n;
    if (v.normalised_ratio > 0) {
      auto& [sum_norm, n_norm] = log_sum_norm[v.metric];
      sum_norm += std::log(v.normalised_ratio);
      ++n_norm;
    }
  }
  std::vector<Geomean> out;
  for (const auto& metric : order) {
    Geomean g;
    g.metric = metric;
    g.count = log_sum[metric].second;
    g.ratio = std::exp(log_sum[metric].first / g.count);
    if (log_sum_norm.count(metric)) {
      g.normalised_count = log_sum_norm[metric].second;
      g.normalised = std::exp(log_sum_norm[metric].first / g.normalised_count);
    }
    out.push_back(g);
  }
  return out;
}

const tpb::cli::Grammar kGrammar = {
                                    {{"--json"},
                                     {"--placements"},
                                     {"--latency-tol", true},
                                     {"--memory-tol", true},
                                     {"--kv-tol", true},
                                     {"--alpha", true},
                                     {"--min-repetitions", true}},
                                    2,
                                    "paths (OLD NEW)"};

std::string step_text(double us) {
  char buf[32] = "-";
  if (us >= 0) std::snprintf(buf, sizeof buf, "%.1f", us);
  return buf;
}

// --placements A B: pairs, cases not paired, custom vs NCCL per placement; exit 1 on a mismatch.
int run_compare_placements(const std::vector<std::string>& files, bool as_json) {
  const tpb::PlacementComparison c =
      tpb::compare_placements(read_side(files[0]), read_side(files[1]), files[0], files[1]);
  if (as_json) {
    nlohmann::json out = tpb::to_json(c);
    out["a"] = files[0];
    out["b"] = files[1];
    std::cout << out.dump(2) << "\n";
    return c.mismatches > 0 ? 1 : 0;
  }
  std::printf("A: %s (%s placement)\nB: %s (%s placement)\n", files[0].c_str(), c.placement_a.c_str(),
              files[1].c_str(), c.placement_b.c_str());
  std::size_t lw = 4;
  for (const auto& p : c.pairs) lw = std::max(lw, tpb::cut_for_message(p.label).size());
  const int w = static_cast<int>(lw);
  const std::string a_us = c.placement_a + " us", b_us = c.placement_b + " us";
  std::printf("%-*s %-15s %3s %12s %12s  %-25s %s\n", w, "case", "backend", "tp", a_us.c_str(), b_us.c_str(), "rule",
              "digests");
  for (const auto& p : c.pairs) {
    std::printf("%-*s %-15s %3lld %12s %12s  %-25s %s%s%s\n", w, tpb::cut_for_message(p.label).c_str(), p.backend.c_str(), p.tp,
                step_text(p.step_us_a).c_str(), step_text(p.step_us_b).c_str(), p.rule.c_str(), p.verdict.c_str(),
                p.detail.empty() ? "" : ": ", p.detail.c_str());
  }
  for (const auto& line : c.not_paired) std::printf("not paired: %s\n", line.c_str());
  if (!c.custom_vs_nccl.empty()) {
    std::printf("step time (p50) against NCCL in the same cases, per placement:\n");
    for (const auto& v : c.custom_vs_nccl)
      std::printf("  %-10s %s: %s %.1f us vs nccl %.1f us (%+.1f%%)\n", v.placement.c_str(), v.group.c_str(),
                  v.backend.c_str(), v.step_us, v.nccl_step_us, 100 * v.relative);
  }
  int within = 0;
  for (const auto& p : c.pairs) within += p.verdict == "within-budget";
  std::printf("%zu case(s) paired: %zu equal, %d within the bf16 budget, %d mismatch(es)\n", c.pairs.size(),
              c.pairs.size() - within - c.mismatches, within, c.mismatches);
  return c.mismatches > 0 ? 1 : 0;
}

int run_compare(const tpb::cli::Args& args) {
  const std::vector<std::string>& files = args.positionals();
  const bool as_json = args.has("--json");
  if (args.has("--placements")) {
    for (const char* flag : {"--latency-tol", "--memory-tol", "--kv-tol", "--alpha", "--min-repetitions"})
      TPB_INPUT_CHECK(!args.value(flag), "compare: " << flag << " does not apply with --placements (digests and step "
                                                     "times are compared, nothing against a tolerance of latency)");
    TPB_INPUT_CHECK(files.size() == 2, "compare --placements: expected A B (run folders or results.jsonl), got "
                                           << files.size() << " paths");
    return run_compare_placements(files, as_json);
  }
  tpb::BaselineTolerances tol;
  if (auto v = args.value("--latency-tol")) tol.latency_rel_tol = parse_number("--latency-tol", *v, 0, 100);
  if (auto v = args.value("--memory-tol")) tol.memory_rel_tol = parse_number("--memory-tol", *v, 0, 100);
  if (auto v = args.value("--kv-tol")) tol.kv_tokens_rel_tol = parse_number("--kv-tol", *v, 0, 100);
  if (auto v = args.value("--alpha")) tol.alpha = parse_number("--alpha", *v, 1e-12, 0.5);
  if (auto v = args.value("--min-repetitions")) {
    const double n = parse_number("--min-repetitions", *v, 2, 1e6);
    TPB_INPUT_CHECK(n == std::floor(n), "compare: --min-repetitions: expected an integer, got " << n);
    tol.min_repetitions = static_cast<int>(n);
  }
  TPB_INPUT_CHECK(files.size() == 2, "compare: expected OLD NEW (run folders or results.jsonl), got "
                                          << files.size() << " paths");
  const auto old_records = read_side(files[0]);
  const auto new_records = read_side(files[1]);
  const std::string why = tpb::nothing_comparable(old_records, new_records, files[0], files[1]);
  TPB_INPUT_CHECK(why.empty(), "nothing comparable: " << why);
  const auto verdicts = tpb::compare_runs(old_records, new_records, tol);
  int regressions = 0;
  for (const auto& v : verdicts) regressions += tpb::is_regression(v);
  const auto old_builds = tpb::builds_of(old_records, tpb::file_provenance_of(tpb::results_file_of(files[0])));
  const auto new_builds = tpb::builds_of(new_records, tpb::file_provenance_of(tpb::results_file_of(files[1])));
  const tpb::BuildComparison builds = tpb::compare_build_sets(old_builds, new_builds);

  if (as_json) {
    nlohmann::json build_json = builds.to_json();
    build_json["old"] = old_builds;
    build_json["new"] = new_builds;
    if (!builds.compared) build_json["verdict"] = "unknown";
    nlohmann::json out = {{"old", files[0]}, {"new", files[1]}, {"regressions", regressions},
                          {"builds", build_json}, {"verdicts", nlohmann::json::array()}};
    for (const auto& v : verdicts) out["verdicts"].push_back(tpb::to_json(v));
    out["notes"] = tpb::verdict_notes(verdicts, tol);
    out["geomeans"] = nlohmann::json::array();
    for (const auto& g : geomeans(verdicts)) {
      nlohmann::json j = {{"metric", g.metric}, {"ratio", g.ratio}, {"cases", g.count}};
      if (g.normalised_count == g.count) j["normalised_ratio"] = g.normalised;
      out["geomeans"].push_back(j);
    }
    std::cout << out.dump(2) << "\n";
  } else {
    for (const auto& b : old_builds) std::printf("OLD build: %s\n", tpb::describe_build(b).c_str());
    if (old_builds.empty()) std::printf("OLD build: unknown (no provenance)\n");
    for (const auto& b : new_builds) std::printf("NEW build: %s\n", tpb::describe_build(b).c_str());
    if (new_builds.empty()) std::printf("NEW build: unknown (no provenance)\n");
    if (!builds.compared) std::printf("builds: not compared (a side records no build)\n");
    else if (builds.like_for_like) std::printf("builds: like-for-like\n");
    else std::printf("not like-for-like: %s\n", builds.why().c_str());
    for (const auto& note : builds.notes()) std::printf("note: %s\n", note.c_str());
    // Rows name cases by label (the id is in --json); equal digests are counted, not listed.
    std::size_t label_width = 4, metric_width = 6;
    for (const auto& v : verdicts) {
      if (is_equal_digest(v)) continue;
      label_width = std::max(label_width, row_label(v).size());
      metric_width = std::max(metric_width, v.metric.size());
    }
    const int lw = static_cast<int>(label_width), mw = static_cast<int>(metric_width);
    std::printf("%-*s %-*s %14s %14s %8s %8s %9s  %s\n", lw, "case", mw, "metric", "old", "new", "ratio",
                "vs ctl", "p-value", "verdict");
    int equal_digests = 0;
    for (const auto& v : verdicts) {
      if (is_equal_digest(v)) {
        ++equal_digests;
        continue;
      }
      char p[16] = "-", norm[16] = "-";
      if (v.p_value >= 0) std::snprintf(p, sizeof p, "%.3g", v.p_value);
      if (v.control_ratio > 0) std::snprintf(norm, sizeof norm, "%.4f", v.normalised_ratio);
      std::printf("%-*s %-*s %14s %14s %8.4f %8s %9s  %s\n", lw, row_label(v).c_str(), mw, v.metric.c_str(),
                  value_text(v.metric, v.old_value).c_str(), value_text(v.metric, v.new_value).c_str(), v.ratio, norm, p,
                  v.verdict.c_str());
    }
    if (equal_digests > 0) std::printf("%d output digest(s) equal (not listed)\n", equal_digests);
    // Google Benchmark's compare.py ends with the geometric mean of the ratios per metric.
    for (const auto& g : geomeans(verdicts)) {
      std::printf("geomean %s: x%.4f new/old over %d case(s)", g.metric.c_str(), g.ratio, g.count);
      if (g.normalised_count == g.count) std::printf(", x%.4f relative to the control", g.normalised);
      std::printf("\n");
    }
    for (const auto& note : tpb::verdict_notes(verdicts, tol)) std::printf("%s\n", note.c_str());
    std::printf("%zu metrics compared, %d regression(s)\n", verdicts.size(), regressions);
  }
  return regressions > 0 ? 1 : 0;
}

}  // namespace

TPB_SUBCOMMAND("compare", "Compare two results.jsonl files metric by metric", kUsage, kGrammar, run_compare);
