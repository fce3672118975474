// tpbench compare OLD NEW (run folders or results.jsonl files): every metric of every case
// present in both, with a verdict; exit 1 on any regression (or digest mismatch), so it can
// gate a CI job, and 2 when there is nothing to compare, which would otherwise read as a pass.
#include <cstdio>
#include <iostream>
#include <string>

#include "suite/baseline.h"
#include "suite/cli/subcommand.h"
#include "suite/jsonl.h"
#include "suite/results.h"
#include "tpb/check.h"

namespace {

constexpr const char* kUsage =
    "usage: tpbench compare OLD NEW [--json] [--latency-tol F] [--memory-tol F]\n"
    "                       [--kv-tol F] [--alpha A] [--min-repetitions N]\n"
    "Compares two runs case by case (matched by case id). OLD and NEW are each a run folder\n"
    "(results/<run-id>/, read as its results.jsonl) or a results.jsonl (a baseline file too).\n"
    "  latency    regression when median(new)/median(old) - 1 > --latency-tol (default 0.05)\n"
    "             AND a two-sided Mann-Whitney U test rejects at --alpha (0.05) with at least\n"
    "             --min-repetitions (9) samples per side; else noise / insufficient-data\n"
    "  memory     used bytes per rank and phase within --memory-tol (0.02)\n"
    "  kv_tokens  the plan's max_tokens within --kv-tol (0.01)\n"
    "  digests    output digests, exactly\n"
    "Cases missing from OLD read no-baseline. Prints a table (or --json: a list of verdicts).\n"
    "First the build of each side (version, git sha, +dirty, build type, compiler; from the\n"
    "records' provenance and the .provenance.json or run.json beside the file) and whether they\n"
    "are like-for-like: not when a side is from a dirty tree, or build type, compiler, flags or\n"
    "CUDA architectures differ (a field one side does not record is listed, not judged).\n"
    "Exit status: 0 no regression, 1 a regression or digest mismatch, 2 bad input (a folder\n"
    "without results.jsonl, e.g. an empty one) or nothing comparable: a side with no ok record\n"
    "(/dev/null, an empty file, a run whose cases were all skipped) or no case id in common,\n"
    "said in one line `nothing comparable: <why>`.\n";

double parse_number(const std::string& flag, const std::string& value) {
  try {
    std::size_t used = 0;
    const double v = std::stod(value, &used);
    if (used == value.size()) return v;
  } catch (const std::exception&) {
  }
  TPB_INPUT_FAIL("tpbench compare: " << flag << ": expected a number, got '" << value << "'");
}

int run_compare(const std::vector<std::string>& args) {
  std::vector<std::string> files;
  bool as_json = false;
  tpb::BaselineTolerances tol;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> std::string {
      TPB_INPUT_CHECK(i + 1 < args.size(), "tpbench compare: " << a << " needs a value");
      return args[++i];
    };
    if (a == "--json") as_json = true;
    else if (a == "--latency-tol") tol.latency_rel_tol = parse_number(a, value());
    else if (a == "--memory-tol") tol.memory_rel_tol = parse_number(a, value());
    else if (a == "--kv-tol") tol.kv_tokens_rel_tol = parse_number(a, value());
    else if (a == "--alpha") tol.alpha = parse_number(a, value());
    else if (a == "--min-repetitions") tol.min_repetitions = static_cast<int>(parse_number(a, value()));
    else if (a.rfind("--", 0) == 0) TPB_INPUT_FAIL("tpbench compare: unknown option " << a << " (see --help)");
    else files.push_back(a);
  }
  TPB_INPUT_CHECK(files.size() == 2, "tpbench compare: expected OLD NEW (run folders or results.jsonl), got "
                                          << files.size() << " paths");
  const auto old_records = tpb::read_jsonl(tpb::results_file_of(files[0]));
  const auto new_records = tpb::read_jsonl(tpb::results_file_of(files[1]));
  const std::string why = tpb::nothing_comparable(old_records, new_records, files[0], files[1]);
  if (!why.empty()) {
    std::fprintf(stderr, "tpbench compare: nothing comparable: %s\n", why.c_str());
    return 2;
  }
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
    std::printf("%-18s %-34s %14s %14s %8s %9s  %s\n", "case", "metric", "old", "new", "ratio", "p-value", "verdict");
    for (const auto& v : verdicts) {
      char p[16] = "-";
      if (v.p_value >= 0) std::snprintf(p, sizeof p, "%.3g", v.p_value);
      std::printf("%-18s %-34s %14.6g %14.6g %8.4f %9s  %s\n", v.case_id.c_str(), v.metric.c_str(), v.old_value,
                  v.new_value, v.ratio, p, v.verdict.c_str());
    }
    std::printf("%zu metrics compared, %d regression(s)\n", verdicts.size(), regressions);
  }
  return regressions > 0 ? 1 : 0;
}

}  // namespace

TPB_SUBCOMMAND("compare", "Compare two results.jsonl files metric by metric", kUsage, run_compare);
