// tpbench run: validate a scenario, expand its sweep, run every case, check, record.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "reference_engine/config/json_text.h"
#include "suite/records/build_info.h"
#include "suite/scenario/case_selection.h"
#include "suite/records/case_summary.h"
#include "suite/cli/json_stdout.h"
#include "suite/cli/report.h"
#include "suite/launch/mps.h"
#include "suite/launch/launcher.h"
#include "suite/launch/placement.h"
#include "suite/records/provenance.h"
#include "suite/cli/subcommand.h"
#include "suite/records/results.h"
#include "suite/records/run_folder.h"
#include "suite/runner/runner.h"
#include "suite/scenario/scenario.h"
#include "suite/scenario/sweep.h"
#include "tpb/check.h"
#include "tpb/message_text.h"
#include "tpb/kernels/device.h"
#include "tpb/kernels/kernel_paths.h"

namespace fs = std::filesystem;

namespace {

// What `tpbench` with no arguments (or `run quickstart`) runs: the engine, the product's main
// job, on this machine: the GPU scenario where CUDA is built in and a GPU is visible, else
// the CPU one. Says which, and where the allreduce sweep is (on the CPU: shm, in ci-smoke).
std::string default_scenario() {
  const bool gpu = tpb::build_info().have_cuda && !tpb::visible_gpus().empty();
  const char* name = gpu ? "quickstart-gpu" : "quickstart-cpu";
  std::printf("tpbench: the default scenario here is %s (%s); the allreduce sweep is `tpbench run %s`, every "
              "scenario `tpbench list`\n",
              name, gpu ? "CUDA built in, a GPU visible" : tpb::build_info().have_cuda ? "no GPU visible" : "built without CUDA",
              gpu ? "allreduce-sweep" : "ci-smoke");
  return name;
}

constexpr const char* kUsage =
    "usage: tpbench run [SCENARIO|-] [--dry-run] [--json] [--results-dir ROOT] [--resume RUN_DIR [--retry-failed]]\n"
    "                   [--case ID[,ID...]] [--filter KEY=VALUE]...\n"
    "                   [--junit FILE] [--no-report] [--baselines DIR [--update-baselines]\n"
    "                   [--allow-unlike-baseline] [--allow-missing-baseline]\n"
    "                   [--force-dirty-baseline REASON]]\n"
    "                   [--placement exclusive|shared] [--mps auto|off|require] [--no-localize]\n"
    "                   [--launcher fork|mpirun|srun [--hosts H:N,...] [--launcher-args ARGS]\n"
    "                   [--control-host ADDR]] [--virtual-hosts N] [--cpu-mem-gib G]\n"
    "Run a scenario: validate it, expand its sweep, run every case, check, record.\n"
    "\n"
    "  SCENARIO          a file, or a name looked up as scenarios/<name>.json in the working\n"
    "                    directory, $TPB_HOME, <prefix>/share/tpbench of an installed tpbench\n"
    "                    and the source tree (default: quickstart, i.e. quickstart-gpu where a\n"
    "                    GPU is usable, else quickstart-cpu)\n"
    "  -                 read the scenario JSON from stdin (its source reads <stdin>; relative\n"
    "                    model paths are relative to the working directory; run.json keeps the\n"
    "                    document, so --resume needs no stdin)\n"
    "  --dry-run         validate and list the cases (id, label, skip reason); run nothing\n"
    "  --json            stdout holds one JSON object and nothing else: after the run, run.json's\n"
    "                    summary plus run_dir (with --dry-run: the scenario and its cases); the\n"
    "                    progress, tables and report lines go to stderr\n"
    "  --results-dir R   where runs go: R/<run-id>/results.jsonl, run.json, logs/ (default: results)\n"
    "  --case ID[,ID...] run only these cases of the sweep (ids as --dry-run and the records show\n"
    "                    them; repeatable). A case's deterministic repeat comes with it (either id\n"
    "                    selects both); the control case (first and last) is kept whenever the\n"
    "                    scenario has one, so control_drift still judges; a control id selects\n"
    "                    the control alone. Every record's `reproduce` is such a command\n"
    "  --filter KEY=VALUE  run only the cases whose param KEY (tp, allreduce, dtype, batch_size,\n"
    "                    mem_fraction, ...) equals VALUE, as JSON (2, 0.9, true) or as text (shm);\n"
    "                    repeatable: different keys must all match, one key repeated takes any of\n"
    "                    its values. Repeats and the control come along as with --case.\n"
    "                    Selection happens after the sweep is expanded: case ids are unchanged.\n"
    "                    An unknown id or a filter that matches no case: exit 2, naming it\n"
    "  --resume RUN_DIR  append to an earlier run, skipping cases that already have a final\n"
    "                    record; SCENARIO defaults to the one the run recorded, and the run's\n"
    "                    --case/--filter selection is kept (they cannot be given again)\n"
    "  --retry-failed    with --resume: also run again the cases whose last record is `failed`;\n"
    "                    the new record is appended and supersedes the old one in the verdicts\n"
    "  --junit FILE      also write JUnit XML: a suite per case (its record's numbers as\n"
    "                    properties), its testcases `run` and one per check\n"
    "  --baselines DIR   compare every ok case with DIR/<hardware>/<scenario>.jsonl (hardware:\n"
    "                    e.g. h200x2, cpu-ref): latency (median ratio beyond the scenario's\n"
    "                    tolerance AND Mann-Whitney p < alpha, >= 9 samples), memory, KV tokens,\n"
    "                    digests; a case with nothing stored reads no-baseline, never a pass.\n"
    "                    The control case (first and last) must not drift, or the run is\n"
    "                    `unstable` and its regressions untrusted (exit 1 either way)\n"
    "                    The stored baseline's build and this one are printed; a side built\n"
    "                    from a dirty tree, or a different build type, compiler, flags or CUDA\n"
    "                    architectures, is not like-for-like and fails the run (exit 1)\n"
    "  --allow-unlike-baseline  compare with a baseline that is not like-for-like anyway: the\n"
    "                    verdict is recorded and printed as a warning\n"
    "                    DIR must exist (a mistyped folder is exit 2) unless --update-baselines\n"
    "                    makes it; no baseline stored for this scenario on this hardware fails\n"
    "                    the run (exit 1, the path it looked for printed) unless\n"
    "  --allow-missing-baseline  accepts that (a first run on new hardware): a warning instead\n"
    "  --update-baselines  write this run's ok records as that baseline (+ .provenance.json);\n"
    "                    refused (exit 2) when this build is from a dirty tree; a run in which\n"
    "                    nothing ran leaves the stored baseline as it was\n"
    "  --force-dirty-baseline REASON  store a baseline from a dirty tree anyway; REASON goes into\n"
    "                    its .provenance.json (it still compares as not like-for-like)\n"
    "  --no-localize     a failing equal_across_allreduce, deterministic or tp_invariant check\n"
    "                    reruns its two sides at instrumentation=digests (records with role\n"
    "                    `localize`) and names the layer and op where they part; this skips that\n"
    "  --placement P     where GPU ranks run, overriding the scenario's \"placement\": exclusive\n"
    "                    (one rank per GPU; a group larger than the GPUs is skipped) or shared\n"
    "                    (ranks packed onto the visible GPUs, ceil(tp / gpus) per GPU: every TP\n"
    "                    runs on one GPU; each rank owns 1/N of its GPU's memory; timings then\n"
    "                    measure contention, and baselines are kept apart from exclusive ones)\n"
    "  --mps M           with shared placement, CUDA MPS lets the ranks on one GPU run at once:\n"
    "                    auto (default: use a reachable MPS server, else start a private one for\n"
    "                    the run and stop it at the end, also on Ctrl-C; without one, ranks\n"
    "                    time-slice), off (never), require (fail, exit 2, without one)\n"
    "  --launcher L      how each group of ranks starts: fork (default: forked on this host),\n"
    "                    mpirun (one `mpirun -np TP ... tpbench __worker` job per group) or srun\n"
    "                    (one `srun --ntasks=TP ...` job step, inside a Slurm allocation). Job\n"
    "                    ranks reach this process over TCP with a random per-group token; the\n"
    "                    mpi allreduce backend runs only under mpirun or srun\n"
    "  --hosts H:N,...   mpirun/srun: the hosts and slots per host (node1:8,node2:8)\n"
    "  --launcher-args A mpirun/srun: extra arguments, split at spaces, placed before the binary\n"
    "                    (Open MPI's oversubscribe flag on a machine with fewer cores than\n"
    "                    ranks, srun's MPI plugin choice); write --launcher-args=A when A starts\n"
    "                    with a dash\n"
    "  --control-host H  mpirun/srun: the address ranks connect to (default: 127.0.0.1 for mpirun\n"
    "                    without --hosts, else this host's name)\n"
    "  --virtual-hosts N each group's ranks claim N hosts (blocks of consecutive ranks), to test\n"
    "                    the host-local rules on one machine: shm is refused for a group that\n"
    "                    spans hosts, custom allreduce runs nccl (recorded as a fallback)\n"
    "  --cpu-mem-gib G   what one host gives a CPU engine case's ranks, GiB (default: what it\n"
    "                    has available as the run starts: MemAvailable, within its cgroup's\n"
    "                    limit). A case whose ranks need more (fp32 weights, KV cache,\n"
    "                    activations: the planner's count) is recorded infeasible with the\n"
    "                    planner's sentence, and no rank starts for it. A host holds all of a\n"
    "                    case's ranks, or ceil(tp / hosts) of them with --hosts\n"
    "  --no-report       do not build the report (report.html, summary.md, plots; needs\n"
    "                    python3 + matplotlib; `tpbench report RUN_DIR` makes it later)\n"
    "\n"
    "Every option also takes the form --opt=VALUE; `--` ends the options.\n"
    "\n"
    "Reproducing: run.json records the command line, the working directory and every TPB_*,\n"
    "NCCL_* and CUDA_* variable; every record carries `reproduce`, the one-line command that\n"
    "reruns just its case: tpbench run <scenario file> --case <id> [--placement P] [--mps M].\n"
    "\n"
    "Exit status: 0 no case or check failed and at least one case ran (the others ok,\n"
    "infeasible or skipped); 1 a case or check failed, a case's allreduce backend fell back to\n"
    "another (status fallback), or with --baselines a regression or an unstable control; 2 bad input (every problem of the scenario is listed, nothing is\n"
    "run or written); 3 nothing ran: no case could run on this machine (every case skipped,\n"
    "e.g. a GPU scenario with no GPU visible), said in one line `nothing ran: <why>`, in\n"
    "run.json (summary.nothing_ran) and in the JUnit (a testcase \"nothing ran\").\n";

// The options of one invocation, read and checked.
struct RunArgs {
  std::string scenario;  // a file, a name, "-" (stdin) or empty (the default, or --resume's)
  bool dry_run = false;
  bool no_report = false;
  bool json = false;     // the summary as JSON on stdout, the human lines on stderr
  std::string results_dir = "results";
  std::string resume;
  std::string junit;
  std::string baselines;
  bool update_baselines = false;
  bool allow_unlike_baseline = false;
  bool allow_missing_baseline = false;
  std::string force_dirty_baseline;  // the reason; empty: not forced
  std::string placement;  // empty: the scenario's
  std::string mps;        // empty: auto
  bool retry_failed = false;
  bool no_localize = false;
  tpb::CaseSelection selection;  // --case, --filter
  tpb::LauncherOptions launch;   // --launcher, --hosts, --launcher-args, --virtual-hosts, --control-host
  std::optional<tpb::HostMemory> cpu_memory;  // --cpu-mem-gib, as bytes and as given; unset: the host's available memory
};

const tpb::cli::Grammar kGrammar = {
    {{"--dry-run"}, {"--no-report"}, {"--json"}, {"--results-dir", true}, {"--resume", true}, {"--junit", true},
     {"--baselines", true}, {"--update-baselines"}, {"--allow-unlike-baseline"}, {"--allow-missing-baseline"},
     {"--force-dirty-baseline", true},
     {"--placement", true}, {"--mps", true}, {"--retry-failed"}, {"--no-localize"}, {"--case", true, true},
     {"--filter", true, true}, {"--launcher", true}, {"--hosts", true}, {"--launcher-args", true},
     {"--virtual-hosts", true}, {"--control-host", true}, {"--cpu-mem-gib", true}},
    1,
    "SCENARIO"};

RunArgs read_args(const tpb::cli::Args& given) {
  RunArgs a;
  if (!given.positionals().empty()) a.scenario = given.positionals().front();
  a.dry_run = given.has("--dry-run");
  a.no_report = given.has("--no-report");
  a.json = given.has("--json");
  a.results_dir = given.value_or("--results-dir", "results");
  a.resume = given.value_or("--resume", "");
  a.junit = given.value_or("--junit", "");
  a.baselines = given.value_or("--baselines", "");
  a.update_baselines = given.has("--update-baselines");
  a.allow_unlike_baseline = given.has("--allow-unlike-baseline");
  a.allow_missing_baseline = given.has("--allow-missing-baseline");
  if (auto reason = given.value("--force-dirty-baseline")) {
    a.force_dirty_baseline = *reason;
    TPB_INPUT_CHECK(!a.force_dirty_baseline.empty() && !a.force_dirty_baseline.starts_with("-"),
                    "run: --force-dirty-baseline needs a REASON (it is written beside the baseline)");
  }
  if (auto placement = given.value("--placement")) {
    a.placement = *placement;
    (void)tpb::parse_placement(a.placement, "run: --placement");
  }
  if (auto mps = given.value("--mps")) {
    a.mps = *mps;
    (void)tpb::parse_mps_mode(a.mps, "run: --mps");
  }
  a.retry_failed = given.has("--retry-failed");
  a.no_localize = given.has("--no-localize");
  for (const auto& list : given.values("--case"))
    for (auto& id : tpb::split_case_ids(list)) a.selection.ids.push_back(std::move(id));
  for (const auto& filter : given.values("--filter")) a.selection.filters.push_back(tpb::parse_case_filter(filter));
  if (auto launcher = given.value("--launcher")) a.launch.kind = tpb::parse_launcher(*launcher, "run: --launcher");
  const bool job = a.launch.kind != tpb::LauncherKind::fork;
  if (auto hosts = given.value("--hosts")) {
    TPB_INPUT_CHECK(job, "run: --hosts places the ranks of an mpirun or srun job; it needs --launcher mpirun or srun");
    a.launch.hosts = tpb::parse_hosts(*hosts, "run: --hosts");
  }
  if (auto extra = given.value("--launcher-args")) {
    TPB_INPUT_CHECK(job, "run: --launcher-args are mpirun's or srun's; they need --launcher mpirun or srun");
    std::istringstream words(*extra);
    for (std::string w; words >> w;) a.launch.launcher_args.push_back(w);
  }
  if (auto host = given.value("--control-host")) {
    TPB_INPUT_CHECK(job, "run: --control-host is where an mpirun or srun job's ranks reach the controller; it needs "
                         "--launcher mpirun or srun");
    a.launch.control_host = *host;
  }
  if (auto vh = given.value("--virtual-hosts")) {
    const std::string& v = *vh;
    TPB_INPUT_CHECK(!v.empty() && v.size() <= 3 && v.find_first_not_of("0123456789") == std::string::npos && std::stoi(v) >= 2,
                    "run: --virtual-hosts: expected a number of hosts, at least 2, got '" << tpb::cut_for_message(v) << "'");
    a.launch.virtual_hosts = std::stoi(v);
  }
  if (auto gib = given.value("--cpu-mem-gib")) {
    double v = std::nan("");
    try {
      std::size_t used = 0;
      v = std::stod(*gib, &used);
      if (used != gib->size()) v = std::nan("");
    } catch (const std::exception&) {
    }
    TPB_INPUT_CHECK(std::isfinite(v) && v > 0 && v <= 1 << 24,
                    "run: --cpu-mem-gib: expected a number of GiB in (0, 16777216], got '" << tpb::cut_for_message(*gib) << "'");
    a.cpu_memory = tpb::HostMemory{static_cast<std::int64_t>(std::llround(v * double(1ll << 30))), "--cpu-mem-gib " + *gib};
  }
  TPB_INPUT_CHECK(!a.update_baselines || !a.baselines.empty(), "run: --update-baselines needs --baselines DIR");
  TPB_INPUT_CHECK(!a.retry_failed || !a.resume.empty(), "run: --retry-failed needs --resume RUN_DIR");
  TPB_INPUT_CHECK(a.resume.empty() || a.selection.empty(),
                  "run: --resume keeps the selection the run was started with; --case and --filter start a new run");
  TPB_INPUT_CHECK(!a.allow_unlike_baseline || !a.baselines.empty(), "run: --allow-unlike-baseline needs --baselines DIR");
  TPB_INPUT_CHECK(!a.allow_missing_baseline || !a.baselines.empty(), "run: --allow-missing-baseline needs --baselines DIR");
  // A folder that is not there compares nothing: a typo, not a first run (--update-baselines
  // makes it).
  if (!a.baselines.empty() && !a.update_baselines) {
    std::error_code ec;
    TPB_INPUT_CHECK(fs::is_directory(a.baselines, ec),
                    "run: --baselines " << a.baselines << ": "
                                        << (fs::exists(a.baselines, ec) ? "not a folder" : "no such folder")
                                        << " (--update-baselines makes it and records this run there)");
  }
  TPB_INPUT_CHECK(a.force_dirty_baseline.empty() || a.update_baselines,
                  "run: --force-dirty-baseline needs --update-baselines");
  return a;
}

std::string self_binary() {
  std::error_code ec;
  const auto p = fs::read_symlink("/proc/self/exe", ec);
  TPB_CHECK(!ec, "cannot find the tpbench binary (/proc/self/exe): " << ec.message());
  return p.string();
}

// The value of `option` in an earlier invocation's case_options ("" when absent).
std::string recorded_option(const nlohmann::json& run_json, const std::string& option) {
  // read_run_json_for_resume checked the shape: invocation null or an object, its case_options strings.
  const auto invocation = run_json.find("invocation");
  if (invocation == run_json.end() || !invocation->is_object()) return "";
  const nlohmann::json opts = invocation->value("case_options", nlohmann::json::array());
  for (std::size_t i = 0; i + 1 < opts.size(); ++i)
    if (opts[i] == option) return opts[i + 1].get<std::string>();
  return "";
}

// The outcome of a run's report step, as run.json's summary.report records it.
struct ReportOutcome {
  int exit_code = 0;       // the run's exit status once the report is counted
  nlohmann::json summary;  // {status: written | failed | unavailable, exit_code, message, retry}
};

// The report is a view of the results: one that cannot be made on this machine (no python3
// or matplotlib) leaves the run's verdict as the cases made it, and is made elsewhere with
// `tpbench report`. One that failed (a full or read-only disk, a results file it refuses, an
// interrupt) fails the run: exit 1 where the cases alone would exit 0 or 3, so that a
// pipeline never takes a run without its report for a good one. run.json's summary says
// which, with the script's own line, and its exit_code follows.
ReportOutcome report_step(const std::string& run_dir, int run_exit_code) {
  std::string error_line;
  const int rc = tpb::cli::run_report_script({run_dir, "--quiet"}, &error_line);
  const std::string retry = "tpbench report " + run_dir;
  ReportOutcome out{run_exit_code, {{"exit_code", rc}, {"message", nullptr}, {"retry", nullptr}}};
  if (rc == 0) {
    out.summary["status"] = "written";
    std::printf("report: %s/report.html\n", run_dir.c_str());
  } else if (rc == tpb::cli::kReportUnavailable) {
    out.summary["status"] = "unavailable";
    std::printf("report: not made on this machine (see above); the run's exit status stands; make it where "
                "python3 and matplotlib are with `%s`\n", retry.c_str());
  } else {
    out.summary["status"] = "failed";
    // Interrupted (128 + the signal) says more than "failed", as it does for the cases.
    if (run_exit_code == tpb::kExitOk || run_exit_code == tpb::kExitNothingRan)
      out.exit_code = rc > 128 ? rc : tpb::kExitFailed;
    std::printf("report: failed (exit %d; see above), so the run exits %d; retry with `%s`\n", rc, out.exit_code,
                retry.c_str());
  }
  if (rc != 0) {
    out.summary["message"] = error_line.empty() ? nlohmann::json(nullptr) : nlohmann::json(error_line);
    out.summary["retry"] = retry;
  }
  // The same disk that refused the report may refuse this too: then the exit status alone says it.
  const std::string run_json_path = (fs::path(run_dir) / "run.json").string();
  try {
    nlohmann::json run_json = tpb::read_json_file(run_json_path);
    run_json["summary"]["report"] = out.summary;
    run_json["summary"]["exit_code"] = out.exit_code;
    tpb::write_file_atomic(run_json_path, run_json.dump(2) + "\n");
  } catch (const std::exception& e) {
    std::printf("report: %s not updated with the report's outcome: %s\n", run_json_path.c_str(), e.what());
  }
  return out;
}

// The scenario JSON on stdin (`tpbench run -`), read as strictly as a file.
tpb::Scenario load_stdin_scenario() {
  const std::string text = tpb::read_bounded_json_text(std::cin, tpb::kStdinScenarioSource);
  return tpb::load_scenario_text(text, tpb::kStdinScenarioSource);
}

// What a run will do, from its arguments: the scenario (its file, stdin, or the run resumed),
// its cases and the selection, and how its ranks start.
struct PlannedRun {
  tpb::Scenario scenario;
  std::vector<tpb::Case> all_cases, cases;
  nlohmann::json earlier_run = nlohmann::json::object();  // run.json of the run to resume
  tpb::CaseSelection selection;
  tpb::LauncherOptions launch;
  std::string selected;  // " (3 of 26 selected: --case ...)" when a selection narrowed the sweep
};

// The run resumed (its selection and launcher), and what --update-baselines forbids.
PlannedRun resumed_run(const RunArgs& args, const tpb::cli::Args& given) {
  PlannedRun p;
  p.selection = args.selection;
  p.launch = args.launch;
  if (!args.resume.empty()) {
    const std::string rj = (fs::path(args.resume) / "run.json").string();
    p.earlier_run = tpb::read_run_json_for_resume(args.resume);  // its shape checked, once
    p.selection = tpb::CaseSelection::from_json(p.earlier_run.value("selection", nlohmann::json()));
    // The ranks start as they did in the run resumed, unless --launcher says otherwise.
    if (!given.has("--launcher") && p.earlier_run.contains("launcher")) p.launch = tpb::launcher_from_json(p.earlier_run["launcher"], rj);
  }
  // A stored baseline is one run's records of the whole scenario under one provenance: a
  // selection, given now or kept from the run resumed, would replace it with the selected cases.
  TPB_INPUT_CHECK(!args.update_baselines || p.selection.empty(),
                  "run: --update-baselines stores the whole scenario's records, and "
                      << (args.resume.empty() ? "--case or --filter would leave the other cases out of the stored baseline"
                                              : "the run resumed was started with --case or --filter")
                      << "; record the scenario whole");
  return p;
}

// The scenario read and expanded into cases (a ScenarioError on a problem in it), then selected.
void load_cases(const RunArgs& args, PlannedRun& p) {
  if (args.scenario.empty() && !args.resume.empty()) {
    // Resume with the scenario the run recorded, as it was then.
    const auto& sc = p.earlier_run["scenario"];  // read_run_json_for_resume checked it
    p.scenario = tpb::parse_scenario(sc["document"], sc.value("source", std::string("run.json")));
  } else if (args.scenario == "-") {
    p.scenario = load_stdin_scenario();
  } else {
    const std::string name = args.scenario.empty() || args.scenario == "quickstart" ? default_scenario() : args.scenario;
    p.scenario = tpb::load_scenario(tpb::resolve_scenario_path(name));
  }
  if (!args.placement.empty()) {
    TPB_INPUT_CHECK(p.scenario.device == "cuda" || args.placement == "exclusive",
                    "run: --placement shared places GPU ranks; scenario " << p.scenario.name << " runs on device "
                                                                          << p.scenario.device);
    p.scenario.placement = tpb::parse_placement(args.placement, "run: --placement");
    p.scenario.document["placement"] = args.placement;  // run.json records it; --resume keeps it
  }
  tpb::MachineInfo machine = tpb::detect_machine();
  machine.launcher = p.launch.kind;
  machine.virtual_hosts = p.launch.virtual_hosts;
  p.all_cases = tpb::expand_cases(p.scenario, machine);
  p.cases = tpb::select_cases(p.scenario, p.all_cases, p.selection);
  // " (3 of 26 selected: --case ...)" when a selection narrowed the sweep.
  if (!p.selection.empty()) {
    // Built with append: `"literal" + std::string&&` trips a false -Wrestrict in g++ 12 at -O3.
    std::string how;
    for (const auto& id : p.selection.ids) how.append(how.empty() ? "--case " : ",").append(id);
    for (const auto& f : p.selection.filters) how.append(how.empty() ? "" : " ").append("--filter ").append(f.text());
    p.selected.append(" (").append(std::to_string(p.cases.size())).append(" of ").append(std::to_string(p.all_cases.size()));
    p.selected.append(" selected: ").append(how).append(")");
  }
}

// --dry-run: the cases, as JSON or one line each; nothing runs.
int print_dry_run(const RunArgs& args, const PlannedRun& p, tpb::cli::HumanLinesToStderr& human_lines) {
  if (args.dry_run && args.json) {
    nlohmann::json out = {{"scenario", p.scenario.name},  {"source", p.scenario.source},
                          {"workload", p.scenario.workload}, {"device", p.scenario.device},
                          {"placement", tpb::placement_name(p.scenario.placement)},
                          {"expanded_cases", p.all_cases.size()}, {"cases", nlohmann::json::array()}};
    for (const auto& c : p.cases)
      out["cases"].push_back({{"id", c.id}, {"label", c.label}, {"role", c.role},
                              {"skip_reason", c.skip_reason.empty() ? nlohmann::json() : nlohmann::json(c.skip_reason)}});
    human_lines.restore();
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  int skipped = 0;
  for (const auto& c : p.cases) skipped += !c.skip_reason.empty();
  std::printf("# scenario %s (%s): workload %s, device %s%s, placement %s, %zu cases%s (%d would be skipped)\n",
              p.scenario.name.c_str(), p.scenario.source.c_str(), p.scenario.workload.c_str(), p.scenario.device.c_str(),
              p.scenario.device_requested == "auto" ? " (auto)" : "", tpb::placement_name(p.scenario.placement),
              p.cases.size(), p.selected.c_str(), skipped);
  for (const auto& c : p.cases) {
    std::printf("%s  %s", c.id.c_str(), c.label.c_str());
    if (!c.skip_reason.empty()) std::printf("  (skipped: %s)", c.skip_reason.c_str());
    std::printf("\n");
  }
  return 0;
}

// The runner's options from the arguments and the run resumed.
tpb::RunOptions run_options(const RunArgs& args, const PlannedRun& p) {
  tpb::RunOptions opt;
  opt.results_root = args.results_dir;
  opt.resume_dir = args.resume;
  opt.junit_path = args.junit;
  opt.worker_binary = self_binary();
  opt.launch = p.launch;
  opt.tty = ::isatty(STDOUT_FILENO) == 1;
  opt.baselines_dir = args.baselines;
  opt.update_baselines = args.update_baselines;
  opt.mps_mode = tpb::parse_mps_mode(args.mps.empty() ? "auto" : args.mps, "run: --mps");
  opt.retry_failed = args.retry_failed;
  opt.localize = !args.no_localize;
  opt.cpu_memory = args.cpu_memory;
  // The options that changed the cases, for every record's `reproduce`: this invocation's,
  // else (resuming) the ones the run was started with.
  const std::string placement = !args.placement.empty() ? args.placement : recorded_option(p.earlier_run, "--placement");
  const std::string mps = !args.mps.empty() ? args.mps : recorded_option(p.earlier_run, "--mps");
  if (!placement.empty()) opt.case_options.insert(opt.case_options.end(), {"--placement", placement});
  if (!mps.empty() && mps != "auto") opt.case_options.insert(opt.case_options.end(), {"--mps", mps});
  // How the ranks start changes what a case can run (mpi, host-local backends): a record's
  // reproduce command keeps it.
  if (p.launch.kind != tpb::LauncherKind::fork)
    opt.case_options.insert(opt.case_options.end(), {"--launcher", tpb::launcher_name(p.launch.kind)});
  if (!p.launch.hosts.empty()) opt.case_options.insert(opt.case_options.end(), {"--hosts", tpb::hosts_text(p.launch.hosts)});
  if (p.launch.virtual_hosts >= 2)
    opt.case_options.insert(opt.case_options.end(), {"--virtual-hosts", std::to_string(p.launch.virtual_hosts)});
  opt.invocation = {{"argv", tpb::cli::process_argv()},
                    {"cwd", fs::current_path().string()},
                    {"environment", tpb::reproducibility_environment()},
                    {"case_options", opt.case_options}};
  if (!p.selection.empty()) {
    opt.selection = p.selection.to_json();
    opt.selection["selected_cases"] = p.cases.size();
    opt.selection["expanded_cases"] = p.all_cases.size();
  }
  opt.allow_unlike_baseline = args.allow_unlike_baseline;
  opt.allow_missing_baseline = args.allow_missing_baseline;
  opt.force_dirty_baseline_reason = args.force_dirty_baseline;
  return opt;
}

// After the run: the tables of numbers, the counts, the verdicts and where everything is.
void print_summary(const RunArgs& args, const tpb::RunSummary& sum) {
  // The numbers first, as nccl-tests and serving benchmarks print them: one table per
  // workload, read back from the run's results.jsonl (resumed records included).
  if (!sum.run_dir.empty()) {
    const std::string results = (fs::path(sum.run_dir) / "results.jsonl").string();
    const std::string tables = fs::exists(results) ? tpb::results_tables(tpb::read_results(results)) : "";
    if (!tables.empty()) std::printf("\n%s\n", tables.c_str());
  }
  std::printf("cases: %d ok, %d failed, %d skipped, %d infeasible", sum.ok, sum.failed, sum.skipped, sum.infeasible);
  if (sum.resumed > 0 || !args.resume.empty()) std::printf(" (%d resumed from the earlier run", sum.resumed);
  if (args.retry_failed) std::printf(", %d failed case(s) run again", sum.retried);
  if (sum.resumed > 0 || !args.resume.empty()) std::printf(")");
  std::printf("\n");
  if (sum.fallback > 0)
    std::printf("fallback: %d case(s) ran another allreduce backend than requested (not ok; the record's "
                "allreduce_ran says what ran)\n", sum.fallback);
  std::printf("checks (case x check): %d pass, %d fail, %d skipped, %d not implemented\n", sum.checks_pass,
              sum.checks_fail, sum.checks_skipped, sum.checks_not_implemented);
  if (sum.interrupted != 0)
    std::printf("interrupted by %s: %s%d case(s) not run; run.json's summary says so. Resume with: tpbench run --resume %s\n",
                tpb::signal_name(sum.interrupted),
                sum.interrupted_case.empty() ? "" : ("case " + sum.interrupted_case + " cut short and not recorded, ").c_str(),
                sum.not_run, sum.run_dir.c_str());
  if (sum.localized > 0)
    std::printf("localized: %d failing check group(s) rerun at instrumentation=digests; the first collective where "
                "the sides part is in the check's detail (localize: lines above)\n", sum.localized);
  if (!sum.nothing_ran.empty()) std::printf("nothing ran: %s\n", sum.nothing_ran.c_str());
  if (sum.stability != "unknown") std::printf("control: %s\n", sum.stability.c_str());
  if (!args.baselines.empty() && sum.baseline_build.compared) {
    // Which builds were compared, and whether that means anything.
    for (const auto& b : sum.stored_builds) std::printf("baseline build: %s\n", b.c_str());
    std::printf("this build:     %s\n", sum.this_build.c_str());
    const auto& build = sum.baseline_build;
    if (build.like_for_like)
      std::printf("builds: like-for-like\n");
    else if (args.allow_unlike_baseline)
      std::printf("warning: baseline not like-for-like (allowed by --allow-unlike-baseline): %s\n", build.why().c_str());
    else
      std::printf("FAIL: baseline not like-for-like: %s (--allow-unlike-baseline accepts it)\n", build.why().c_str());
    for (const auto& note : build.notes()) std::printf("note: %s\n", note.c_str());
  }
  if (sum.missing_baseline_fails)
    std::printf("FAIL: no baseline stored for this scenario on this hardware at %s (--update-baselines records one, "
                "--allow-missing-baseline accepts its absence)\n", sum.baseline_file.c_str());
  if (sum.control_beyond_ceiling)
    std::printf("FAIL: the control %s ran x%.3g its stored baseline, beyond the ceiling of x%.3g either way "
                "($.baseline.control_ceiling): this is not the machine the baseline measured (loaded, throttled, "
                "other hardware), so no latency verdict of this run is trusted\n",
                sum.control_vs_baseline.case_id.c_str(), sum.control_vs_baseline.ratio, sum.control_ceiling);
  if (!args.baselines.empty() && sum.control_vs_baseline.ratio > 0)
    std::printf("baseline control %s: x%.3g against the stored run%s; latency judged relative to it\n",
                sum.control_vs_baseline.case_id.c_str(), sum.control_vs_baseline.ratio,
                sum.control_vs_baseline.moved ? " (the machine moved)" : "");
  if (!args.baselines.empty())
    std::printf("baseline %s: %d regression(s)%s, %d machine-drift, %d no-baseline%s%s\n", sum.baseline_file.c_str(),
                sum.regressions, sum.stability == "unstable" ? " (untrusted: the control drifted)" : "",
                sum.machine_drift, sum.no_baseline,
                sum.baseline_updated    ? "; updated with this run"
                : args.update_baselines ? "; not updated: nothing ran"
                                        : "",
                sum.forced_dirty_reason.empty() ? "" : (" from a dirty tree, forced: " + sum.forced_dirty_reason).c_str());
  if (!sum.latency_note.empty()) std::printf("%s\n", sum.latency_note.c_str());
  // What failed, one line each with its reproduce command, as pytest's short summary: a
  // failing run names its case, check or metric without a reader opening results.jsonl.
  if (!sum.failures.empty()) {
    std::printf("\n");
    for (const auto& line : sum.failures) std::printf("%s\n", line.c_str());
    std::printf("\n");
  }
  std::printf("results: %s/results.jsonl\n", sum.run_dir.c_str());
  if (sum.failed > 0)
    std::printf("rerun: each record's `reproduce` reruns its case; `tpbench run --resume %s --retry-failed` the failed ones\n",
                sum.run_dir.c_str());
  if (!args.junit.empty()) std::printf("junit: %s\n", args.junit.c_str());
}

int run_run(const tpb::cli::Args& given) {
  const RunArgs args = read_args(given);
  tpb::cli::HumanLinesToStderr human_lines(args.json);
  PlannedRun p = resumed_run(args, given);
  try {
    load_cases(args, p);
  } catch (const tpb::ScenarioError& e) {
    for (const auto& problem : e.problems()) std::fprintf(stderr, "%s\n", problem.c_str());
    tpb::cli::print_error("run", std::to_string(e.problems().size()) + " problem(s) in the scenario; nothing was run");
    return 2;
  }
  if (args.dry_run) return print_dry_run(args, p, human_lines);
  const tpb::RunOptions opt = run_options(args, p);
  tpb::check_run_options(opt);
  std::printf("tpbench run: scenario %s, workload %s, device %s%s, %zu cases%s\n", p.scenario.name.c_str(),
              p.scenario.workload.c_str(), p.scenario.device.c_str(), p.scenario.device_requested == "auto" ? " (auto)" : "",
              p.cases.size(), p.selected.c_str());
  // The kernels each GPU op takes on this device (tpb/kernels/kernel_paths.h), as provenance
  // records them: "kernel paths: mla_decode wgmma (sm_90a, device 9.0); ...".
  if (p.scenario.device == "cuda")
    std::printf("kernel paths: %s\n", tpb::kernels::describe_kernel_paths(tpb::kernels::kernel_paths()).c_str());
  std::fflush(stdout);
  const tpb::RunSummary sum = tpb::run_scenario(p.scenario, p.cases, opt);
  print_summary(args, sum);
  int exit_code = sum.exit_code;
  nlohmann::json report = nullptr;
  if (!args.no_report) {
    std::fflush(stdout);
    const ReportOutcome outcome = report_step(sum.run_dir, sum.exit_code);
    exit_code = outcome.exit_code;
    report = outcome.summary;
  }
  if (args.json) {
    // run.json's summary as written, and where the run is.
    nlohmann::json out = tpb::read_json_file((fs::path(sum.run_dir) / "run.json").string()).at("summary");
    if (!args.no_report) {  // as run.json has them, also where the disk refused to update it
      out["report"] = report;
      out["exit_code"] = exit_code;
    }
    out["run_dir"] = sum.run_dir;
    human_lines.restore();
    std::printf("%s\n", out.dump(2).c_str());
  }
  return exit_code;
}

}  // namespace

TPB_SUBCOMMAND("run", "Run a scenario: expand its sweep, run every case, check, record, report", kUsage, kGrammar, run_run);
