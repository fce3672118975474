// tpbench qualify PROFILE.json: measures the hardware against a qualification profile and
// prints a PASS/FAIL table; writes qualify.json and qualify.junit.xml.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "suite/cli/json_stdout.h"
#include "suite/cli/subcommand.h"
#include "suite/records/junit.h"
#include "suite/records/provenance.h"
#include "suite/qualify/qualify.h"
#include "suite/records/results.h"
#include "suite/runner/runner.h"
#include "suite/scenario/scenario.h"
#include "tpb/check.h"

namespace {

namespace fs = std::filesystem;

constexpr const char* kUsage =
    "usage: tpbench qualify PROFILE [--out DIR] [--update-baseline] [--json]\n"
    "Runs the probes of a qualification profile (memory bandwidth, GEMM rate, peer bandwidth\n"
    "for every GPU pair, allreduce correctness and latency per backend, engine decode latency,\n"
    "planner feasibility, engine conformance in any placement: correctness only) and checks\n"
    "each value against the profile's threshold and the\n"
    "baseline stored for this hardware (a row without a stored value reads NO-BASELINE and\n"
    "does not pass). Writes DIR/qualify.json and DIR/qualify.junit.xml (default DIR:\n"
    "results/qualify-<profile>-<run id>).\n"
    "  PROFILE            a file, or a name looked up as scenarios/qualify/<name>.json in the\n"
    "                     working directory, $TPB_HOME and the source tree (as run finds scenarios)\n"
    "  --update-baseline  store the measured values as the profile's baseline (with provenance)\n"
    "  --json             print qualify.json's content on stdout; the table and the progress go\n"
    "                     to stderr\n"
    "Profiles: cpu-smoke (scenarios/qualify/cpu-smoke.json, CI), h200x1.json (one GPU: per-GPU floors and\n"
    "the engine at TP 1-8 in shared placement, correctness only; latency and bandwidth\n"
    "thresholds never come from shared placement, which measures contention), h200x2.json;\n"
    "h200x4.json and h200x8.json (not yet run on such a node) beside them.\n"
    "Exit status: 0 every row PASS, 1 any FAIL or NO-BASELINE, 2 bad input, 3 nothing ran: no\n"
    "probe could run on this machine (the GPUs the profile needs are not visible, or every case\n"
    "of its scenarios was skipped), said in one line `nothing ran: <why>` and in the JUnit.\n";

std::string fmt(double v) {
  if (std::isnan(v)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

// A row's suite properties: its verdict and numbers as qualify.json holds them (a row without
// a threshold or baseline has none to show).
tpb::JunitProperties row_properties(const nlohmann::json& row) {
  tpb::JunitProperties out;
  for (const char* key : {"verdict", "value", "unit", "threshold", "baseline"}) {
    const auto& v = row[key];
    if (v.is_string()) out.emplace_back(key, v.get<std::string>());
    else if (v.is_number()) out.emplace_back(key, v.dump());
  }
  return out;
}

const tpb::cli::Grammar kGrammar = {{{"--out", true}, {"--update-baseline"}, {"--json"}}, 1, "PROFILE"};

int run_qualify(const tpb::cli::Args& args) {
  TPB_INPUT_CHECK(!args.positionals().empty(), "qualify: expected PROFILE (a file or a name; see tpbench qualify --help)");
  const std::string profile = tpb::resolve_qualify_profile_path(args.positionals().front());
  std::string out_dir = args.value_or("--out", "");
  tpb::QualifyOptions options;
  options.update_baseline = args.has("--update-baseline");
  const bool as_json = args.has("--json");
  tpb::cli::HumanLinesToStderr human_lines(as_json);
  if (out_dir.empty()) out_dir = "results/qualify-" + fs::path(profile).stem().string() + "-" + tpb::new_run_id();
  options.out_dir = out_dir;
  std::error_code ec;
  options.worker_binary = fs::read_symlink("/proc/self/exe", ec).string();
  TPB_CHECK(!ec, "cannot find the tpbench binary (/proc/self/exe): " << ec.message());

  const std::string started = tpb::utc_now_iso8601();
  const auto rows = tpb::run_qualification(profile, options);

  int failures = 0;
  std::printf("%-22s %-34s %12s %-8s %12s %12s  %s\n", "probe", "item", "value", "unit", "threshold", "baseline", "verdict");
  nlohmann::json jrows = nlohmann::json::array();
  // JUnit: a suite per row (named by its baseline key, holding its numbers and its one
  // testcase), after one for the qualification as a whole.
  const std::string classname = "tpbench.qualify." + tpb::junit_identifier(fs::path(profile).stem().string());
  std::vector<tpb::JunitSuite> suites;
  for (const auto& r : rows) {
    const bool pass = r.verdict == "PASS";
    failures += !pass;
    std::printf("%-22s %-34s %12s %-8s %12s %12s  %s%s%s\n", r.probe.c_str(), r.item.c_str(),
                r.unit == "bool" ? (r.value != 0 ? "yes" : "no") : fmt(r.value).c_str(), r.unit.c_str(),
                r.unit == "bool" ? "-" : ((r.higher_is_better ? ">=" : "<=") + fmt(r.threshold)).c_str(),
                fmt(r.baseline).c_str(), r.verdict.c_str(), r.detail.empty() || pass ? "" : "  ",
                pass ? "" : r.detail.c_str());
    jrows.push_back({{"probe", r.probe}, {"item", r.item}, {"value", r.value}, {"unit", r.unit},
                     {"higher_is_better", r.higher_is_better},
                     {"threshold", std::isnan(r.threshold) ? nlohmann::json() : nlohmann::json(r.threshold)},
                     {"baseline", std::isnan(r.baseline) ? nlohmann::json() : nlohmann::json(r.baseline)},
                     {"verdict", r.verdict}, {"detail", r.detail}, {"wall_s", r.wall_s}});
    suites.push_back({r.key(), row_properties(jrows.back()),
                      {{classname + "." + r.probe, r.item, r.wall_s, pass ? "pass" : "failure",
                        pass ? "" : r.verdict + ": " + r.detail, r.detail}}});
  }
  // Nothing measured on this machine is neither a pass nor a finding about its hardware.
  const std::string nothing_ran = tpb::qualify_nothing_ran(rows);
  const char* verdict = !nothing_ran.empty() ? "NOTHING RAN" : failures == 0 ? "PASS" : "FAIL";
  if (!nothing_ran.empty())
    suites.insert(suites.begin(), {"qualify",
                                   {{"tpbench.nothing_ran", nothing_ran}, {"tpbench.exit_code", std::to_string(tpb::kExitNothingRan)}},
                                   {tpb::junit_nothing_ran_case(classname, nothing_ran)}});
  const nlohmann::json doc = {{"schema", 1}, {"profile", profile}, {"started", started},
                              {"verdict", verdict}, {"failures", failures},
                              {"nothing_ran", nothing_ran.empty() ? nlohmann::json() : nlohmann::json(nothing_ran)},
                              {"rows", jrows}, {"provenance", tpb::collect_provenance(started)}};
  const std::string qualify_json = doc.dump(2) + "\n";
  tpb::write_file_atomic((fs::path(out_dir) / "qualify.json").string(), qualify_json);
  tpb::write_file_atomic((fs::path(out_dir) / "qualify.junit.xml").string(),
                         tpb::junit_xml(suites));
  std::printf("qualify: %s (%zu rows, %d not passing) -> %s/qualify.json%s\n", verdict, rows.size(), failures,
              out_dir.c_str(), options.update_baseline && nothing_ran.empty() ? " (baseline updated)" : "");
  if (!nothing_ran.empty()) std::printf("nothing ran: %s\n", nothing_ran.c_str());
  if (as_json) {
    human_lines.restore();
    std::printf("%s", qualify_json.c_str());
  }
  if (!nothing_ran.empty()) return tpb::kExitNothingRan;
  return failures == 0 ? tpb::kExitOk : tpb::kExitFailed;
}

}  // namespace

TPB_SUBCOMMAND("qualify", "Qualify hardware against a profile: PASS/FAIL table, JSON and JUnit", kUsage, kGrammar,
               run_qualify);
