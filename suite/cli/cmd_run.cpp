// tpbench run: validate a scenario, expand its sweep, run every case, check, record.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "suite/cli/report.h"
#include "suite/mps.h"
#include "suite/placement.h"
#include "suite/cli/subcommand.h"
#include "suite/results.h"
#include "suite/runner.h"
#include "suite/scenario.h"
#include "suite/sweep.h"
#include "tpb/check.h"

namespace fs = std::filesystem;

namespace {

constexpr const char* kUsage =
    "usage: tpbench run [SCENARIO] [--dry-run] [--results-dir ROOT] [--resume RUN_DIR]\n"
    "                   [--junit FILE] [--no-report] [--baselines DIR [--update-baselines]]\n"
    "                   [--placement exclusive|shared] [--mps auto|off|require]\n"
    "Run a scenario: validate it, expand its sweep, run every case, check, record.\n"
    "\n"
    "  SCENARIO          a file, or a name looked up as scenarios/<name>.json in the working\n"
    "                    directory, $TPB_HOME and the source tree (default: quickstart)\n"
    "  --dry-run         validate and list the cases (id, label, skip reason); run nothing\n"
    "  --results-dir R   where runs go: R/<run-id>/results.jsonl, run.json, logs/ (default: results)\n"
    "  --resume RUN_DIR  append to an earlier run, skipping cases that already have a final\n"
    "                    record; SCENARIO defaults to the one the run recorded\n"
    "  --junit FILE      also write JUnit XML: one testcase per case and per case x check\n"
    "  --baselines DIR   compare every ok case with DIR/<hardware>/<scenario>.jsonl (hardware:\n"
    "                    e.g. h200x2, cpu-ref): latency (median ratio beyond the scenario's\n"
    "                    tolerance AND Mann-Whitney p < alpha, >= 9 samples), memory, KV tokens,\n"
    "                    digests; a case with nothing stored reads no-baseline, never a pass.\n"
    "                    The control case (first and last) must not drift, or the run is\n"
    "                    `unstable` and its regressions untrusted (exit 1 either way)\n"
    "  --update-baselines  write this run's ok records as that baseline (+ .provenance.json)\n"
    "  --placement P     where GPU ranks run, overriding the scenario's \"placement\": exclusive\n"
    "                    (one rank per GPU; a group larger than the GPUs is skipped) or shared\n"
    "                    (ranks packed onto the visible GPUs, ceil(tp / gpus) per GPU: every TP\n"
    "                    runs on one GPU; each rank owns 1/N of its GPU's memory; timings then\n"
    "                    measure contention, and baselines are kept apart from exclusive ones)\n"
    "  --mps M           with shared placement, CUDA MPS lets the ranks on one GPU run at once:\n"
    "                    auto (default: use a reachable MPS server, else start a private one for\n"
    "                    the run and stop it at the end, also on Ctrl-C; without one, ranks\n"
    "                    time-slice), off (never), require (fail, exit 2, without one)\n"
    "  --no-report       do not build the report (report.html, summary.md, plots; needs\n"
    "                    python3 + matplotlib; `tpbench report RUN_DIR` makes it later)\n"
    "\n"
    "Exit status: 0 every case ok or skipped and no check failed; 1 a case or check failed,\n"
    "or a case's allreduce backend fell back to another (status fallback);\n"
    "2 bad input (every problem of the scenario is listed, nothing is run or written).\n";

struct Args {
  std::string scenario;
  bool dry_run = false;
  bool no_report = false;
  std::string results_dir = "results";
  std::string resume;
  std::string junit;
  std::string baselines;
  bool update_baselines = false;
  std::string placement;  // empty: the scenario's
  std::string mps = "auto";
};

Args parse_args(const std::vector<std::string>& args) {
  Args a;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    auto value = [&](const char* flag) {
      TPB_INPUT_CHECK(i + 1 < args.size(), "run: " << flag << " needs a value (see tpbench run --help)");
      return args[++i];
    };
    if (arg == "--dry-run") {
      a.dry_run = true;
    } else if (arg == "--no-report") {
      a.no_report = true;
    } else if (arg == "--results-dir") {
      a.results_dir = value("--results-dir");
    } else if (arg == "--resume") {
      a.resume = value("--resume");
    } else if (arg == "--junit") {
      a.junit = value("--junit");
    } else if (arg == "--baselines") {
      a.baselines = value("--baselines");
    } else if (arg == "--update-baselines") {
      a.update_baselines = true;
    } else if (arg == "--placement") {
      a.placement = value("--placement");
      (void)tpb::parse_placement(a.placement, "run: --placement");
    } else if (arg == "--mps") {
      a.mps = value("--mps");
      (void)tpb::parse_mps_mode(a.mps, "run: --mps");
    } else if (arg.starts_with("-")) {
      TPB_INPUT_FAIL("run: unknown option '" << arg << "' (see tpbench run --help)");
    } else {
      TPB_INPUT_CHECK(a.scenario.empty(), "run: one scenario at a time (got '" << a.scenario << "' and '" << arg << "')");
      a.scenario = arg;
    }
  }
  TPB_INPUT_CHECK(!a.update_baselines || !a.baselines.empty(), "run: --update-baselines needs --baselines DIR");
  return a;
}

std::string self_binary() {
  std::error_code ec;
  const auto p = fs::read_symlink("/proc/self/exe", ec);
  TPB_CHECK(!ec, "cannot find the tpbench binary (/proc/self/exe): " << ec.message());
  return p.string();
}

int run_run(const std::vector<std::string>& raw_args) {
  const Args args = parse_args(raw_args);
  tpb::Scenario scenario;
  std::vector<tpb::Case> cases;
  try {
    if (args.scenario.empty() && !args.resume.empty()) {
      // Resume with the scenario the run recorded, as it was then.
      const auto run_json = tpb::read_json_file((fs::path(args.resume) / "run.json").string());
      const auto& sc = run_json.at("scenario");
      scenario = tpb::parse_scenario(sc.at("document"), sc.value("source", std::string("run.json")));
    } else {
      scenario = tpb::load_scenario(tpb::resolve_scenario_path(args.scenario.empty() ? "quickstart" : args.scenario));
    }
    if (!args.placement.empty()) {
      TPB_INPUT_CHECK(scenario.device == "cuda" || args.placement == "exclusive",
                      "run: --placement shared places GPU ranks; scenario " << scenario.name << " runs on device "
                                                                            << scenario.device);
      scenario.placement = tpb::parse_placement(args.placement, "run: --placement");
      scenario.document["placement"] = args.placement;  // run.json records it; --resume keeps it
    }
    cases = tpb::expand_cases(scenario, tpb::detect_machine());
  } catch (const tpb::ScenarioError& e) {
    for (const auto& p : e.problems()) std::fprintf(stderr, "%s\n", p.c_str());
    std::fprintf(stderr, "tpbench: %zu problem(s) in the scenario; nothing was run\n", e.problems().size());
    return 2;
  }

  if (args.dry_run) {
    int skipped = 0;
    for (const auto& c : cases) skipped += !c.skip_reason.empty();
    std::printf("# scenario %s (%s): workload %s, device %s%s, placement %s, %zu cases (%d would be skipped)\n",
                scenario.name.c_str(), scenario.source.c_str(), scenario.workload.c_str(), scenario.device.c_str(),
                scenario.device_requested == "auto" ? " (auto)" : "", tpb::placement_name(scenario.placement),
                cases.size(), skipped);
    for (const auto& c : cases) {
      std::printf("%s  %s", c.id.c_str(), c.label.c_str());
      if (!c.skip_reason.empty()) std::printf("  (skipped: %s)", c.skip_reason.c_str());
      std::printf("\n");
    }
    return 0;
  }

  tpb::RunOptions opt;
  opt.results_root = args.results_dir;
  opt.resume_dir = args.resume;
  opt.junit_path = args.junit;
  opt.worker_binary = self_binary();
  opt.tty = ::isatty(STDOUT_FILENO) == 1;
  opt.baselines_dir = args.baselines;
  opt.update_baselines = args.update_baselines;
  opt.mps_mode = tpb::parse_mps_mode(args.mps, "run: --mps");
  std::printf("tpbench run: scenario %s, workload %s, device %s%s, %zu cases\n", scenario.name.c_str(),
              scenario.workload.c_str(), scenario.device.c_str(), scenario.device_requested == "auto" ? " (auto)" : "",
              cases.size());
  std::fflush(stdout);
  const tpb::RunSummary sum = tpb::run_scenario(scenario, cases, opt);
  std::printf("cases: %d ok, %d failed, %d skipped, %d infeasible (%d resumed from the earlier run)\n", sum.ok,
              sum.failed, sum.skipped, sum.infeasible, sum.resumed);
  if (sum.fallback > 0)
    std::printf("fallback: %d case(s) ran another allreduce backend than requested (not ok; the record's "
                "allreduce_ran says what ran)\n", sum.fallback);
  std::printf("checks (case x check): %d pass, %d fail, %d skipped, %d not implemented\n", sum.checks_pass,
              sum.checks_fail, sum.checks_skipped, sum.checks_not_implemented);
  if (sum.stability != "unknown") std::printf("control: %s\n", sum.stability.c_str());
  if (!args.baselines.empty())
    std::printf("baseline %s: %d regression(s)%s, %d no-baseline%s\n", sum.baseline_file.c_str(), sum.regressions,
                sum.stability == "unstable" ? " (untrusted: the control drifted)" : "", sum.no_baseline,
                args.update_baselines ? "; updated with this run" : "");
  std::printf("results: %s/results.jsonl\n", sum.run_dir.c_str());
  if (!args.junit.empty()) std::printf("junit: %s\n", args.junit.c_str());
  if (!args.no_report) {
    // The report is a view of the results: when it cannot be made (no python3/matplotlib)
    // the run's verdict stands and the message says how to make it later.
    std::fflush(stdout);
    const int rc = tpb::cli::run_report_script({sum.run_dir});
    if (rc == 0)
      std::printf("report: %s/report.html\n", sum.run_dir.c_str());
    else
      std::printf("report: not written (exit %d; see above); retry with `tpbench report %s`\n", rc, sum.run_dir.c_str());
  }
  return sum.exit_code;
}

}  // namespace

TPB_SUBCOMMAND("run", "Run a scenario: expand its sweep, run every case, check, record, report", kUsage, run_run);
