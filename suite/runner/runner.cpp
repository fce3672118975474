#include "suite/runner/runner.h"

#include "suite/measure/allreduce_ran.h"
#include "suite/records/baseline.h"
#include "suite/records/case_summary.h"
#include "suite/checks/control_drift.h"
#include "suite/records/jsonl.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "suite/scenario/case_plan.h"
#include "suite/scenario/case_selection.h"
#include "suite/launch/host_facts.h"
#include "suite/checks/check.h"
#include "suite/checks/divergence.h"
#include "suite/runner/baseline_section.h"
#include "suite/runner/failure_lines.h"
#include "suite/runner/junit_cases.h"
#include "suite/launch/launcher.h"
#include "suite/runner/progress.h"
#include "suite/records/provenance.h"
#include "suite/records/results.h"
#include "suite/records/run_folder.h"
#include "suite/records/safe_paths.h"
#include "suite/measure/stats.h"
#include "reference_engine/memory/gpu_catalog.h"
#include "tpb/kernels/device.h"
#include "tpb/message_text.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace tpb {

namespace {


struct CheckSet {
  std::vector<std::unique_ptr<Check>> checks;
  // check index -> group key -> planned case ids of the group, in plan order
  std::vector<std::map<std::string, std::vector<std::string>>> groups;
};

CheckSet plan_checks(const Scenario& s, const std::vector<Case>& cases) {
  CheckSet set;
  for (const auto& name : s.checks) {
    auto check = make_check(name, s.baseline);
    if (!check) throw InputError("unknown check '" + name + "'");
    std::map<std::string, std::vector<std::string>> groups;
    for (const auto& c : cases) {
      const std::string key = check->group_key(proto_record(s, c));
      if (!key.empty()) groups[key].push_back(c.id);
    }
    set.checks.push_back(std::move(check));
    set.groups.push_back(std::move(groups));
  }
  return set;
}

// The group's verdict when every member has a record; nullopt otherwise.
std::optional<CheckResult> evaluate_group(const Check& check, const std::vector<std::string>& ids,
                                          const std::map<std::string, json>& records) {
  std::vector<const json*> members;
  for (const auto& id : ids) {
    auto it = records.find(id);
    if (it == records.end()) return std::nullopt;
    members.push_back(&it->second);
  }
  return check.evaluate(members);
}

json group_result_json(const CheckResult& r, const std::vector<std::string>& ids) {
  json j = r.to_json();
  j["cases"] = ids;
  return j;
}

}  // namespace

const char* signal_name(int sig) {
  return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : sig == SIGHUP ? "SIGHUP" : "a signal";
}

namespace {

std::string first_line(const std::string& s) {
  const auto nl = s.find('\n');
  return nl == std::string::npos ? s : s.substr(0, nl);
}

// Runs `spec` (case `c`) on the launcher and fills `record` from what came back: wall_s, the
// rank processes, and the ranks' results (status ok, or infeasible as measured) when every rank
// answered, else status failed with the launcher's error and the failed ranks; an exception is a
// failure to launch. The facts of hosts that reported during the case go into `hosts` (run.json
// provenance.hosts, suite/launch/host_facts.h); *hosts_changed says whether any did. True when the
// ranks answered. The sweep and the localization reruns share it.
bool run_into_record(Launcher& launcher, const Scenario& s, const Case& c, const CaseSpec& spec, json& record,
                     json& hosts, bool* hosts_changed = nullptr) {
  try {
    const CaseRun run = launcher.run_case(c.group_key, c.tp, spec.to_json(), s.measure.timeout_s,
                                          c.placement.device_of_rank.empty() ? nullptr : &c.placement);
    for (const json& report : run.host_reports) {
      const bool changed = merge_host_report(hosts, report);
      if (hosts_changed != nullptr) *hosts_changed = *hosts_changed || changed;
    }
    record["wall_s"] = run.wall_s;
    if (run.ok) {
      record.update(case_record_from_ranks(s, c, rank_results_from_json(run.ranks)));
    } else {
      record["status"] = "failed";
      record["error"] = run.error;
      record["failed_ranks"] = run.failed_ranks;
    }
    record["pids"] = run.pids;  // the rank processes that ran it (reuse across cases shows here)
    record["hosts"] = run.hosts;
    if (!run.command.empty()) record["launch_command"] = run.command;
    return run.ok;
  } catch (const std::exception& e) {
    // The launcher reports rank failures in CaseRun; an exception is a failure to launch.
    record["status"] = "failed";
    record["error"] = std::string("launcher: ") + e.what();
    return false;
  }
}

// The checks whose failure names two records whose outputs part (CheckResult::diverging).
bool localizes(const std::string& check) {
  const CheckInfo* row = find_check(check);
  return row != nullptr && row->localizes;
}

std::string localization_key(const std::string& check, const std::string& group_key) { return check + "|" + group_key; }

}  // namespace

std::string nothing_ran_reason(int cases_that_ran, const std::vector<std::string>& skip_reasons) {
  if (cases_that_ran > 0) return "";
  if (skip_reasons.empty()) return "the sweep has no case";
  std::map<std::string, int> count_by_reason;
  for (const auto& r : skip_reasons) ++count_by_reason[r.empty() ? "no reason recorded" : r];
  const std::string all = "all " + std::to_string(skip_reasons.size()) + " case" + (skip_reasons.size() == 1 ? "" : "s") + " skipped";
  if (count_by_reason.size() == 1) return all + ": " + first_line(count_by_reason.begin()->first);
  // Several reasons (e.g. TP 2, 4 and 8 on a 1-GPU box): the most common one names the
  // machine's shortfall; results.jsonl holds every case's own.
  auto most = count_by_reason.begin();
  for (auto it = count_by_reason.begin(); it != count_by_reason.end(); ++it)
    if (it->second > most->second) most = it;
  return all + ", for " + std::to_string(count_by_reason.size()) + " reasons; the most common (" +
         std::to_string(most->second) + " case" + (most->second == 1 ? "" : "s") + "): " + first_line(most->first);
}

int run_exit_code(const RunSummary& sum, bool with_baselines) {
  if (sum.failed > 0 || sum.fallback > 0 || sum.checks_fail > 0 || sum.regressions > 0 || sum.unlike_baseline_fails ||
      sum.missing_baseline_fails || (with_baselines && sum.stability == "unstable"))
    return kExitFailed;
  if (!sum.nothing_ran.empty()) return kExitNothingRan;
  return kExitOk;
}

void check_run_options(const RunOptions& opt) {
  // Output paths are checked before any case runs: a JUnit file that cannot be written once
  // failed only after the whole sweep had run.
  if (!opt.junit_path.empty()) {
    const std::string why = unwritable_file_reason(opt.junit_path);
    TPB_INPUT_CHECK(why.empty(), "--junit " << opt.junit_path << ": cannot be written (" << why
                                            << "); checked before any case runs");
  }
  // A baseline names the code that made it: a dirty tree names none.
  TPB_INPUT_CHECK(!opt.update_baselines || !build_is_dirty() || !opt.force_dirty_baseline_reason.empty(),
                  "--update-baselines: this build is from a dirty tree ("
                      << describe_build(build_fingerprint(compact_provenance(collect_provenance(""))))
                      << "): no commit names the code a baseline would record; commit and rebuild, or pass "
                         "--force-dirty-baseline REASON");
}

namespace {

// Graceful interrupts while it lives (set_graceful_interrupts, suite/launch/mps.h): the case loop's.
struct GracefulScope {
  GracefulScope() { set_graceful_interrupts(true); }
  ~GracefulScope() { set_graceful_interrupts(false); }
};

// One invocation of run_scenario: the run's state, and its steps in the order run() takes them,
// each a member function over that state (as Google Benchmark's runner hands its results to the
// reporters).
class ScenarioRun {
 public:
  ScenarioRun(const Scenario& s, const std::vector<Case>& cases, const RunOptions& opt) : s(s), cases(cases), opt(opt) {}
  RunSummary run();

 private:
  void open_run_folder();    // a new folder, or the one --resume names (locked, its records read)
  void begin_run_json();     // the records carried over, run.json's first version
  void run_in_folder();      // the rest, once the run folder holds a run.json
  void load_baselines();     // the stored baseline and its build against this one
  void run_cases(Launcher& launcher, ResultsWriter& writer, Progress& progress);  // the case loop
  void localize_divergences(Launcher& launcher, ResultsWriter& writer);            // digests reruns
  void case_verdicts();      // the statuses counted, a JUnit suite per case
  void check_verdicts();     // every check group judged over the whole run
  void judge_run();          // stability, nothing-ran, the exit status
  void store_baseline();     // --update-baselines
  void write_summary();      // run.json's summary
  void write_junit();        // --junit

  const Scenario& s;
  const std::vector<Case>& cases;
  const RunOptions& opt;
  RunSummary sum;
  std::string start_time;
  std::string run_id, run_dir;
  json run_json;                        // run.json as last written
  std::vector<json> earlier;            // the records of earlier invocations (--resume)
  std::optional<RunFolderLock> lock;    // one writer per run folder, for the whole run
  CheckSet checks;
  json provenance, compact;             // this invocation's, in full and as each record holds it
  json case_list;                       // run.json's cases (this invocation's)
  std::map<std::string, json> records;  // case id -> its record (earlier runs included; the last one wins)
  std::set<std::string> finished;       // case ids an earlier invocation finished
  std::vector<std::string> retried;     // planned cases whose last record failed, run again
  BaselineTolerances tol;
  std::vector<json> baseline_records;   // the stored baseline's records (--baselines)
  json stored_provenance, this_build;
  std::vector<json> stored_builds;
  json mps_json;                        // the MPS state, for run.json and each record's placement
  std::map<std::string, double> wall_by_id;
  CasePlanner planner;                  // where engine cases are planned: a GPU, or this host's memory
  LatencyControl run_control;           // this run's control against the baseline's, once it ran
  std::map<std::string, json> localized;  // localization_key -> Divergence::to_json + the reruns' ids
  std::vector<std::string> classnames;    // JUnit classname of each case, in case order
  std::map<std::string, JunitSuite> case_suites;  // case id -> its suite
  JunitSuite scenario_suite;
  json check_summary;                   // check name -> its groups' verdicts
  std::vector<std::string> skip_reasons;
  json control = nullptr;               // the control's drift verdict (first vs last)
  bool untrusted = false;               // the control drifted: the baseline verdicts are not trusted
  bool unlike = false;                  // the stored baseline's build is not like this one
  bool forced_dirty = false;            // a dirty build stored a baseline (--force-dirty-baseline)
};

RunSummary ScenarioRun::run() {
  check_run_options(opt);
  sum.cases = static_cast<int>(cases.size());
  start_time = utc_now_iso8601();
  open_run_folder();
  // A new run's folder appears whole or not at all (create_run_folder says which); once it
  // holds a run.json, a failure leaves it resumable, and the message says so and how.
  const std::string run_json_path = (fs::path(run_dir) / "run.json").string();
  auto resumable = [&] {
    std::error_code ec;
    return fs::is_regular_file(run_json_path, ec) ? resumable_note(run_dir) : std::string();
  };
  try {
    begin_run_json();
    run_in_folder();
  } catch (const InputError& e) {
    throw InputError(e.what() + resumable());
  } catch (const Error& e) {
    throw Error(e.what() + resumable());
  }
  return sum;
}

void ScenarioRun::run_in_folder() {
  load_baselines();
  ResultsWriter writer((fs::path(run_dir) / "results.jsonl").string());
  LauncherOptions lo = opt.launch;
  lo.worker_binary = opt.worker_binary;
  lo.log_dir = (fs::path(run_dir) / "logs").string();
  // Ranks sharing a GPU run at once under an MPS server (or time-slice without one): one for
  // the whole run, stopped when it ends (also on SIGINT/SIGTERM: the handlers below).
  install_cleanup_signal_handlers();
  // The first Ctrl-C in the case loop lets the case in flight finish and ends the run with its
  // summary; a second stops that case too (suite/launch/mps.h); outside the loop signals act at once.
  std::optional<GracefulScope> graceful(std::in_place);
  std::unique_ptr<MpsSession> mps;
  if (std::any_of(cases.begin(), cases.end(), [](const Case& c) { return c.skip_reason.empty() && c.placement.device_shared(); })) {
    MpsOptions mo;
    mo.mode = opt.mps_mode;
    mo.log_dir = (fs::path(run_dir) / "mps-log").string();
    mps = std::make_unique<MpsSession>(mo);
    std::printf("mps: %s%s%s\n", mps->status().state.c_str(), mps->status().detail.empty() ? "" : ": ",
                mps->status().detail.c_str());
    std::fflush(stdout);
  }
  mps_json = mps ? mps->status().to_json() : json({{"state", "not needed (no rank shares a GPU)"}});
  run_json["placement"] = {{"placement", placement_name(s.placement)}, {"mps", mps_json}};
  // How the ranks were started, for every group (each record adds its hosts and job command).
  run_json["launcher"] = launcher_to_json(opt.launch);
  write_file_atomic((fs::path(run_dir) / "run.json").string(), run_json.dump(2) + "\n");
  Launcher launcher(lo);
  Progress progress(static_cast<int>(cases.size()), stdout, opt.tty);
  // Engine cases are planned first, as a serving engine sizes its KV cache (GPU) or against the
  // host's memory (CPU): one the plan says cannot fit is recorded `infeasible` with the
  // planner's sentence, and no rank starts for it.
  planner = case_planner(s, opt.cpu_memory, static_cast<int>(opt.launch.hosts.size()));
  run_cases(launcher, writer, progress);
  progress.done();
  graceful.reset();
  localize_divergences(launcher, writer);
  launcher.shutdown();
  case_verdicts();
  check_verdicts();
  judge_run();
  sum.failures = failure_lines(cases, records, check_summary, sum, !opt.baselines_dir.empty());
  store_baseline();
  write_summary();
  write_junit();
}

void ScenarioRun::open_run_folder() {
  // Everything that can be wrong with the input is checked before anything is written.
  TPB_INPUT_CHECK(!opt.retry_failed || !opt.resume_dir.empty(), "run: --retry-failed needs --resume RUN_DIR");
  int damaged = 0;
  if (!opt.resume_dir.empty()) {
    run_dir = opt.resume_dir;
    std::error_code ec;
    TPB_INPUT_CHECK(fs::is_regular_file(fs::path(run_dir) / "run.json", ec),
                    "--resume " << run_dir << ": no run.json there (not a tpbench run folder)");
    lock.emplace(run_dir);  // before reading: a second --resume must not read what the first is writing
    run_json = read_run_json_for_resume(run_dir);
    run_id = run_json["run_id"].get<std::string>();
    const std::string earlier_name = run_json["scenario"]["name"].get<std::string>();
    TPB_INPUT_CHECK(earlier_name == s.name, "--resume " << run_dir << ": that run is of scenario '"
                                                        << cut_for_message(earlier_name) << "', not '" << s.name << "'");
    earlier = read_results((fs::path(run_dir) / "results.jsonl").string(), &damaged);
  } else {
    run_id = new_run_id();
    run_dir = (fs::path(opt.results_root) / run_id).string();
    TPB_INPUT_CHECK(!fs::exists(run_dir), run_dir << ": already exists");
  }
  checks = plan_checks(s, cases);
  sum.run_dir = run_dir;
  if (damaged > 0) {
    // A record cut short by a crash: out of results.jsonl (kept in results.jsonl.damaged), so
    // that report and compare, which refuse a line that is not JSON, can read the run again.
    const int removed = drop_damaged_lines((fs::path(run_dir) / "results.jsonl").string());
    std::fprintf(stderr, "tpbench: warning: %s/results.jsonl: %d damaged line(s) (a case cut short) moved to "
                 "results.jsonl.damaged; their cases run again\n", run_dir.c_str(), removed);
  }
}

void ScenarioRun::begin_run_json() {
  provenance = collect_provenance(start_time);
  compact = compact_provenance(provenance);
  case_list = json::array();
  for (const auto& c : cases)
    case_list.push_back({{"case_id", c.id}, {"label", c.label}, {"role", c.role}, {"params", c.params},
                         {"skip_reason", c.skip_reason.empty() ? json(nullptr) : json(c.skip_reason)}});
  for (auto& r : earlier)
    if (r.contains("case_id") && is_final_status(r.value("status", ""))) records[r["case_id"].get<std::string>()] = r;
  finished = finished_case_ids(earlier);
  if (opt.retry_failed) {
    const std::set<std::string> failed = failed_case_ids(earlier);
    for (const auto& c : cases)
      if (failed.count(c.id)) {
        finished.erase(c.id);
        retried.push_back(c.id);
        records.erase(c.id);  // its groups wait for the new record, as for a case never run
      }
  }

  if (opt.resume_dir.empty()) {
    // A file as an absolute path; "<stdin>" as it is (the document below is all there is).
    const std::string source = s.source == kStdinScenarioSource ? s.source : fs::absolute(s.source).string();
    run_json = {{"schema", kResultsSchema},
                {"run_id", run_id},
                {"provenance", provenance},
                {"invocation", opt.invocation},
                {"scenario", {{"name", s.name}, {"source", source}, {"document", s.document},
                              {"device_resolved", s.device}}},
                {"selection", opt.selection},
                {"cases", case_list},
                {"resumed", json::array()}};
  } else {
    run_json["resumed"].push_back({{"provenance", provenance}, {"invocation", opt.invocation}, {"cases", case_list},
                                   {"retry_failed", opt.retry_failed}, {"retried", retried}});
  }
  // The hosts the ranks reported from, over every invocation of the run (suite/launch/host_facts.h);
  // the controller's own machine is the rest of provenance.
  if (!run_json["provenance"].contains("hosts")) run_json["provenance"]["hosts"] = json::array();
  if (lock) {  // --resume: the folder is there, and locked
    write_file_atomic((fs::path(run_dir) / "run.json").string(), run_json.dump(2) + "\n");
  } else {
    create_run_folder(run_dir, run_json.dump(2) + "\n");
    lock.emplace(run_dir);
  }
}

void ScenarioRun::load_baselines() {
  // Baselines: stored results of this scenario on this hardware fingerprint.
  tol = tolerances_from_json(s.baseline);
  if (!opt.baselines_dir.empty()) sum.latency_note = latency_judgement_note(tol, s.measure.repetitions);
  if (!opt.baselines_dir.empty()) {
    // Shared placement's timings measure contention: its baselines live apart (h200x1-shared).
    const std::string hw = hardware_dir_name(provenance) + (s.device == "cuda" && s.placement == Placement::shared ? "-shared" : "");
    sum.baseline_file = path_under(opt.baselines_dir, fs::path(hw) / (s.name + ".jsonl"), "baseline file").string();
    if (fs::exists(sum.baseline_file)) baseline_records = read_jsonl(sum.baseline_file);
    // Nothing stored for this scenario on this hardware: every case would read no-baseline and
    // the run would pass having compared nothing (a mistyped folder, another machine's name).
    sum.baseline_missing = !fs::exists(sum.baseline_file);
    sum.missing_baseline_fails = sum.baseline_missing && !opt.update_baselines && !opt.allow_missing_baseline;
    if (sum.baseline_missing && !opt.update_baselines) {
      std::printf("baseline: none stored for this scenario on this hardware at %s%s\n", sum.baseline_file.c_str(),
                  opt.allow_missing_baseline ? " (allowed by --allow-missing-baseline)"
                                             : "; the run will fail (--update-baselines records one, "
                                               "--allow-missing-baseline accepts its absence)");
      std::fflush(stdout);
    }
  }
  // The stored baseline's build(s) against this one, judged before anything runs.
  stored_provenance = baseline_records.empty() ? json(nullptr) : file_provenance_of(sum.baseline_file);
  this_build = build_fingerprint(compact);
  stored_builds = builds_of(baseline_records, stored_provenance);
  sum.baseline_build = compare_build_sets(stored_builds, {this_build}, "stored baseline", "this build");
  for (const auto& b : stored_builds) sum.stored_builds.push_back(describe_build(b));
  sum.this_build = describe_build(this_build);
  if (sum.baseline_build.compared && !sum.baseline_build.like_for_like) {
    std::printf("baseline: not like-for-like: %s%s\n", sum.baseline_build.why().c_str(),
                opt.allow_unlike_baseline ? " (allowed by --allow-unlike-baseline)"
                                          : "; the run will fail (--allow-unlike-baseline accepts it)");
    std::fflush(stdout);
  }
}

void ScenarioRun::run_cases(Launcher& launcher, ResultsWriter& writer, Progress& progress) {
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    if ((sum.interrupted = interrupt_requested()) != 0) break;
    progress.start(static_cast<int>(i), c.id, c.label);
    if (finished.count(c.id)) {
      ++sum.resumed;
      progress.finish("resumed", 0, "");
      continue;
    }
    sum.retried += std::find(retried.begin(), retried.end(), c.id) != retried.end();
    json record = base_record(s, c, run_id, compact, opt.case_options);
    double wall_s = 0;
    std::optional<CasePlan> plan;
    if (!c.placement.device_of_rank.empty()) {
      record["placement"] = placement_json(c.placement);
      record["placement"]["mps"] = mps_json.value("state", "");
    }
    plan = planner.plan(s, c);
    if (!c.skip_reason.empty()) {
      record["status"] = "skipped";
      record["error"] = c.skip_reason;
    } else if (plan && !plan->feasible) {
      record["status"] = "infeasible";
      record["error"] = plan->verdict;
      record["plan"] = plan->plan;
    } else {
      CaseSpec spec = case_spec(s, c);
      spec.trace_dir = (fs::path(run_dir) / "traces").string();  // instrumentation=trace|debug writes here
      bool hosts_changed = false;
      // A GPU case's serving plan replaces the rank's (its breakdown: the same terms); a CPU
      // case keeps the rank's, which plan_matches_measured holds against its heap.
      if (run_into_record(launcher, s, c, spec, record, run_json["provenance"]["hosts"], &hosts_changed) && plan &&
          planner.gpu)
        record["plan"] = plan->plan;
      // A host seen for the first time, or again: run.json says so before the next case.
      if (hosts_changed)
        write_file_atomic((fs::path(run_dir) / "run.json").string(), run_json.dump(2) + "\n");
      wall_s = record.value("wall_s", 0.0);
    }
    // A first signal lets this case finish: it is recorded below, and the loop stops before
    // the next. A second one killed its ranks: no record (a --resume runs it). A case that
    // came through whole before the kill landed is recorded all the same.
    sum.interrupted = interrupt_requested();
    if (sum.interrupted != 0 && interrupt_cut_case_short() && c.skip_reason.empty() && record["status"] != "ok") {
      sum.interrupted_case = c.id + " (" + c.label + ")";
      progress.finish("interrupted", wall_s, "");
      break;
    }
    wall_by_id[c.id] = wall_s;
    records[c.id] = record;
    // Checks whose group this case completes.
    for (std::size_t k = 0; k < checks.checks.size(); ++k) {
      const std::string key = checks.checks[k]->group_key(record);
      if (key.empty()) continue;
      const auto& ids = checks.groups[k][key];
      if (auto result = evaluate_group(*checks.checks[k], ids, records))
        record["checks"][checks.checks[k]->name()] = group_result_json(*result, ids);
    }
    if (!opt.baselines_dir.empty() && record["status"] == "ok") {
      // The control ran first (it is this record when this is the control): the machine's
      // drift since the baseline, measured before any case it normalises.
      std::vector<json> controls;
      for (const auto& [id, r] : records)
        if (r.value("role", "") == "control-start" || r.value("role", "") == "control-end") controls.push_back(r);
      run_control = latency_control(baseline_records, controls, tol);
      record["baseline"] = baseline_section(baseline_records, stored_provenance, record, tol, run_control,
                                            opt.allow_unlike_baseline, sum);
    }
    records[c.id] = record;
    writer.append(record);
    std::string note;
    if (record["status"] != "ok" && record["error"].is_string()) note = first_line(record["error"].get<std::string>());
    // A case that ran partly on another backend (or auto on NCCL alone) says so under its line.
    if (record["status"] == "ok" && record.contains("allreduce_ran")) note = allreduce_ran_note(record["allreduce_ran"]);
    for (const auto& [name, result] : record["checks"].items())
      if (result["status"] == "fail") note += (note.empty() ? "" : "; ") + std::string("check ") + name + " FAILED: " + result["detail"].get<std::string>();
    progress.finish(record["status"].get<std::string>(), wall_s, note, case_key_numbers(record));
  }
}

void ScenarioRun::localize_divergences(Launcher& launcher, ResultsWriter& writer) {
  // Divergence localization: a failing check that names two records whose outputs part has
  // both cases rerun at instrumentation=digests (role "localize", case id <id>.digests, in
  // results.jsonl), and the first collective where they part goes into its verdict.
  for (std::size_t k = 0; k < checks.checks.size() && opt.localize && sum.interrupted == 0; ++k) {
    const Check& check = *checks.checks[k];
    if (!localizes(check.name())) continue;
    for (const auto& [key, ids] : checks.groups[k]) {
      const auto result = evaluate_group(check, ids, records);
      if (!result || result->status != "fail" || result->diverging.size() != 2) continue;
      std::vector<json> reruns;
      std::vector<std::string> names;
      for (const std::string& id : result->diverging) {
        const auto c = std::find_if(cases.begin(), cases.end(), [&](const Case& x) { return x.id == id; });
        if (c == cases.end()) break;
        json record = base_record(s, *c, run_id, compact, opt.case_options);
        record["case_id"] = c->id + ".digests";
        record["label"] = c->label + " [localize: digests]";
        record["role"] = "localize";
        record["params"]["instrumentation"] = "digests";
        record["localizes"] = {{"check", check.name()}, {"case_id", c->id}, {"group", ids}};
        CaseSpec spec = case_spec(s, *c);
        spec.params["instrumentation"] = "digests";
        run_into_record(launcher, s, *c, spec, record, run_json["provenance"]["hosts"]);
        writer.append(record);
        reruns.push_back(record);
        names.push_back(c->label + (c->role == "sweep" ? std::string() : " [" + c->role + "]"));
      }
      if (reruns.size() != 2) continue;
      json where;
      if (reruns[0].value("status", "") != "ok" || reruns[1].value("status", "") != "ok") {
        where = {{"compared", false},
                 {"found", false},
                 {"sentence", "not localized: the digests rerun did not complete (" +
                                  first_line(reruns[0].value("status", "") != "ok" ? reruns[0].value("error", std::string("?"))
                                                                                  : reruns[1].value("error", std::string("?"))) +
                                  ")"}};
      } else {
        where = locate_divergence(reruns[0], reruns[1], names[0], names[1], result->diverging_budget).to_json();
        sum.localized += where.value("found", false);
      }
      where["reruns"] = {reruns[0]["case_id"], reruns[1]["case_id"]};
      std::printf("localize: %s (%s vs %s): %s\n", check.name().c_str(), names[0].c_str(), names[1].c_str(),
                  where["sentence"].get<std::string>().c_str());
      std::fflush(stdout);
      localized[localization_key(check.name(), key)] = where;
    }
  }
}

void ScenarioRun::case_verdicts() {
  // Final verdicts over the whole run (records of earlier invocations included). The JUnit
  // (suite/runner/junit_cases.h): a suite per case, in case order, after one for the scenario.
  classnames = junit_case_classnames(s.name, cases);
  scenario_suite = JunitSuite{s.name, {}, {}};
  check_summary = json::object();
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    auto it = records.find(c.id);
    const json* r = it == records.end() ? nullptr : &it->second;
    const std::string status = r ? r->value("status", "") : "missing";
    sum.ok += status == "ok";
    // A case an interruption left unrun is not a failure: --resume runs it.
    sum.failed += status == "failed" || (status == "missing" && sum.interrupted == 0);
    sum.not_run += status == "missing" && sum.interrupted != 0;
    sum.skipped += status == "skipped";
    sum.infeasible += status == "infeasible";
    if (status == "skipped") skip_reasons.push_back(r->value("error", std::string()));
    sum.fallback += status == "fallback";
    JunitCase jc{classnames[i], "run", wall_by_id.count(c.id) ? wall_by_id[c.id] : (r ? r->value("wall_s", 0.0) : 0.0), "pass", "", ""};
    if (status == "failed" || status == "missing") {
      jc.outcome = "failure";
      jc.message = r ? first_line(r->value("error", std::string("failed"))) : "no record";
      jc.detail = r ? r->value("error", std::string()) : "";
    } else if (status == "fallback") {
      // Its numbers are another backend's: a failure, so it never reads as the requested one ok.
      jc.outcome = "failure";
      jc.message = "fallback: " + first_line(r->value("error", std::string()));
      jc.detail = r->contains("allreduce_ran") ? (*r)["allreduce_ran"].dump(2) : "";
    } else if (status == "skipped" || status == "infeasible") {
      jc.outcome = "skipped";
      jc.message = (status == "infeasible" ? "infeasible: " : "") + r->value("error", std::string());
    }
    case_suites[c.id] = {c.label, junit_case_properties(c.id, r), {jc}};
    for (auto& b : junit_baseline_cases(classnames[i], r)) case_suites[c.id].cases.push_back(std::move(b));
  }
}

void ScenarioRun::check_verdicts() {
  for (std::size_t k = 0; k < checks.checks.size(); ++k) {
    const Check& check = *checks.checks[k];
    json per_check = json::array();
    for (const auto& [key, ids] : checks.groups[k]) {
      auto result = evaluate_group(check, ids, records);
      CheckResult res = result                ? *result
                        : sum.interrupted != 0 ? CheckResult{"skipped", "not judged: the run was interrupted before "
                                                                        "cases of this group ran (--resume runs them)"}
                                               : CheckResult{"fail", "cases of this group have no record"};
      const auto where = localized.find(localization_key(check.name(), key));
      if (where != localized.end()) res.detail += "\nlocalized: " + where->second["sentence"].get<std::string>();
      per_check.push_back(group_result_json(res, ids));
      if (where != localized.end()) per_check.back()["localization"] = where->second;
      for (const auto& id : ids) {
        const auto c = std::find_if(cases.begin(), cases.end(), [&](const Case& x) { return x.id == id; });
        JunitCase jc{classnames[c - cases.begin()], check.name(), 0, "pass", "", res.detail};
        if (res.status == "pass") {
          ++sum.checks_pass;
        } else if (res.status == "fail") {
          ++sum.checks_fail;
          jc.outcome = "failure";
          jc.message = first_line(res.detail);
        } else {
          res.status == "skipped" ? ++sum.checks_skipped : ++sum.checks_not_implemented;
          jc.outcome = "skipped";
          jc.message = res.status + ": " + first_line(res.detail);
        }
        case_suites[id].cases.push_back(jc);
      }
    }
    if (checks.groups[k].empty()) {
      // A check the scenario names but no case can feed (tp_invariant on an allreduce sweep)
      // is said so, once: silence would read as a pass.
      const CheckResult none{"skipped", "applies to no case of this sweep (workload " + s.workload + ")"};
      per_check.push_back(group_result_json(none, {}));
      ++sum.checks_skipped;
      scenario_suite.cases.push_back({junit_scenario_classname(s.name), check.name(), 0, "skipped",
                                      "skipped: " + none.detail, none.detail});
    }
    check_summary[check.name()] = per_check;
  }
}

void ScenarioRun::judge_run() {
  // Stability: the control case first vs last (ARCHITECTURE.md, "Baselines and regressions").
  const json* control_start = nullptr;
  const json* control_end = nullptr;
  for (const auto& [id, r] : records) {
    if (r.value("role", "") == "control-start") control_start = &r;
    if (r.value("role", "") == "control-end") control_end = &r;
  }
  control = nullptr;
  sum.stability = "unknown";
  if (control_start && control_end) {
    const CheckResult drift = control_drift_verdict(*control_start, *control_end, tol);
    sum.stability = drift.status == "fail" ? "unstable" : drift.status == "pass" ? "stable" : "unknown";
    control = drift.to_json();
  }
  // The control against its stored self: beyond the ceiling this is not the machine the
  // baseline measured, and normalising by it would read any slowdown as machine-drift.
  sum.control_ceiling = tol.control_ceiling;
  sum.control_beyond_ceiling = control_beyond_ceiling(run_control, tol);
  if (sum.control_beyond_ceiling) sum.stability = "unstable";
  untrusted = sum.stability == "unstable";
  unlike = sum.baseline_build.compared && !sum.baseline_build.like_for_like;
  sum.unlike_baseline_fails = unlike && !opt.allow_unlike_baseline;
  sum.nothing_ran = nothing_ran_reason(sum.ok + sum.failed + sum.fallback + sum.infeasible, skip_reasons);
  sum.exit_code = run_exit_code(sum, !opt.baselines_dir.empty());
  if (sum.interrupted != 0) sum.exit_code = 128 + sum.interrupted;  // as the shell reports a signal
}

void ScenarioRun::store_baseline() {
  // A run in which nothing ran stores nothing: an empty baseline would erase what an earlier
  // run on this hardware recorded, and every later comparison would read no-baseline.
  sum.baseline_updated = opt.update_baselines && sum.nothing_ran.empty() && sum.interrupted == 0;
  // A dirty build stores a baseline only with a reason (check_run_options): it goes with it.
  forced_dirty = sum.baseline_updated && build_is_dirty();
  if (forced_dirty) sum.forced_dirty_reason = opt.force_dirty_baseline_reason;
  if (sum.baseline_updated) {
    // The stored baseline is this run's ok records: latency samples, memory, plans, digests
    // and the provenance that says which build and machine produced them. The output samples
    // stay in the run's results.jsonl: a comparison reads the digests, and the samples (up to
    // 170 KB a record at TP 8) would make a sweep's baseline tens of megabytes.
    std::string lines;
    for (const auto& c : cases) {
      auto it = records.find(c.id);
      if (it != records.end() && it->second.value("status", "") == "ok") {
        json stored = it->second;
        stored.erase("outputs");
        lines += stored.dump() + "\n";
      }
    }
    write_file_atomic(sum.baseline_file, lines);  // its folder created
    json stored_provenance_doc = {{"scenario", s.name}, {"run_id", run_id}, {"stability", sum.stability},
                                  {"provenance", provenance}};
    if (forced_dirty) stored_provenance_doc["forced_dirty_reason"] = opt.force_dirty_baseline_reason;
    write_file_atomic(fs::path(sum.baseline_file).replace_extension(".provenance.json").string(),
                      stored_provenance_doc.dump(2) + "\n");
  }
}

void ScenarioRun::write_summary() {
  sum.control_vs_baseline = run_control;
  json control_vs_baseline = nullptr;
  if (run_control.ratio > 0)
    control_vs_baseline = {{"case_id", run_control.case_id}, {"ratio", run_control.ratio},
                           {"p_value", run_control.p_value}, {"moved", run_control.moved},
                           {"ceiling", tol.control_ceiling}, {"beyond_ceiling", sum.control_beyond_ceiling}};
  else if (!opt.baselines_dir.empty() && !baseline_records.empty())
    control_vs_baseline = {{"why_none", run_control.why_none}};
  json build_summary = nullptr;
  if (sum.baseline_build.compared) {
    build_summary = sum.baseline_build.to_json();
    build_summary["stored"] = stored_builds;
    build_summary["now"] = this_build;
    if (unlike) build_summary["allowed"] = opt.allow_unlike_baseline;
  }

  run_json["summary"] = {{"cases", sum.cases},       {"ok", sum.ok},
                         {"failed", sum.failed},     {"skipped", sum.skipped},
                         {"infeasible", sum.infeasible}, {"fallback", sum.fallback},
                         {"resumed", sum.resumed},
                         {"checks", check_summary},  {"localized", sum.localized},  {"exit_code", sum.exit_code},
                         {"nothing_ran", sum.nothing_ran.empty() ? json(nullptr) : json(sum.nothing_ran)},
                         {"failures", sum.failures},
                         {"control", control},       {"stability", sum.stability},
                         {"baselines", opt.baselines_dir.empty() ? json(nullptr)
                                                                 : json({{"file", sum.baseline_file},
                                                                         {"regressions", sum.regressions},
                                                                         {"machine_drift", sum.machine_drift},
                                                                         {"control_vs_baseline", control_vs_baseline},
                                                                         {"no_baseline", sum.no_baseline},
                                                                         {"missing", sum.baseline_missing},
                                                                         {"missing_fails", sum.missing_baseline_fails},
                                                                         {"trusted", !untrusted},
                                                                         {"build", build_summary},
                                                                         {"updated", sum.baseline_updated},
                                                                         {"forced_dirty_reason",
                                                                          forced_dirty ? json(opt.force_dirty_baseline_reason)
                                                                                       : json(nullptr)}})},
                         {"interrupted", sum.interrupted == 0 ? json(nullptr)
                                                               : json({{"signal", signal_name(sum.interrupted)},
                                                                       {"case_cut_short", sum.interrupted_case.empty()
                                                                                              ? json(nullptr)
                                                                                              : json(sum.interrupted_case)},
                                                                       {"not_run", sum.not_run},
                                                                       {"resume", "tpbench run --resume " + run_dir}})},
                         {"end_time", utc_now_iso8601()}};
  write_file_atomic((fs::path(run_dir) / "run.json").string(), run_json.dump(2) + "\n");
}

void ScenarioRun::write_junit() {
  if (!opt.junit_path.empty()) {
    if (!sum.nothing_ran.empty()) {
      scenario_suite.cases.insert(scenario_suite.cases.begin(),
                                  junit_nothing_ran_case(junit_scenario_classname(s.name), sum.nothing_ran));
      scenario_suite.properties = {{"tpbench.nothing_ran", sum.nothing_ran},
                                   {"tpbench.exit_code", std::to_string(sum.exit_code)}};
    }
    const auto failures = junit_run_failures(s.name, sum, !opt.baselines_dir.empty());
    scenario_suite.cases.insert(scenario_suite.cases.begin(), failures.begin(), failures.end());
    std::vector<JunitSuite> suites;
    if (!scenario_suite.cases.empty() || !scenario_suite.properties.empty()) suites.push_back(scenario_suite);
    for (const auto& c : cases) suites.push_back(case_suites[c.id]);
    write_file_atomic(opt.junit_path, junit_xml(suites));
  }
}

}  // namespace

RunSummary run_scenario(const Scenario& s, const std::vector<Case>& cases, const RunOptions& opt) {
  return ScenarioRun(s, cases, opt).run();
}

}  // namespace tpb
