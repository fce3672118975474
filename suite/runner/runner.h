// Runner: scenario → cases → Launcher::run_case → record → checks → results on disk.
//
// Every case ends as exactly one record in results.jsonl, written (and fsync'ed) as soon as
// the case ends: a crash, a hang or a bad result fails that case and the sweep goes on.
// Checks run as soon as every planned case of their group has a record (the result lands
// in the record that completed the group) and once more over the whole run at the end.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reference_engine/memory/host_memory.h"
#include "suite/records/baseline.h"
#include "suite/scenario/case_spec.h"
#include "suite/launch/launcher.h"
#include "suite/launch/mps.h"
#include "suite/runner/case_record.h"  // case_record_from_ranks: a record from the ranks' results
#include "suite/scenario/scenario.h"
#include "suite/scenario/sweep.h"

namespace tpb {

struct RunOptions {
  std::string results_root = "results";  // new runs go to <results_root>/<run-id>/
  std::string resume_dir;                // non-empty: append to this run, skipping finished case ids
  std::string junit_path;                // non-empty: write JUnit XML here
  std::string worker_binary;             // the tpbench binary the launcher re-executes
  LauncherOptions launch;                // how ranks start: kind, hosts, launcher args, virtual
                                         // hosts (the runner sets its worker_binary and log_dir)
  bool tty = false;                      // progress as one in-place line
  std::string baselines_dir;             // non-empty: compare every ok case with
                                         // <baselines_dir>/<hardware>/<scenario>.jsonl
  bool update_baselines = false;         // write this run's ok records there (with provenance)
  bool allow_unlike_baseline = false;    // a stored baseline of another kind of build is a warning,
                                         // not a failure (suite/records/baseline.h, compare_builds)
  bool allow_missing_baseline = false;   // no stored baseline for this scenario and hardware is a
                                         // warning, not a failure (a first run on new hardware)
  std::string force_dirty_baseline_reason;  // non-empty: --update-baselines from a dirty tree,
                                            // written into the .provenance.json
  MpsMode mps_mode = MpsMode::automatic; // ranks sharing a GPU: MPS server (suite/launch/mps.h)
  bool retry_failed = false;             // with resume_dir: run again the cases whose last record
                                         // is `failed` (the new record supersedes it)
  std::vector<std::string> case_options; // the options that changed the cases (--placement shared,
                                         // --mps require): in every record's `reproduce` command
  nlohmann::json invocation;             // {argv, cwd, environment, case_options}: how this
                                         // invocation was started, for run.json
  nlohmann::json selection;              // --case/--filter (suite/scenario/case_selection.h) with the counts
                                         // selected and expanded; null: every case. For run.json
  std::optional<HostMemory> cpu_memory;  // --cpu-mem-gib: what one host gives a CPU engine case's
                                         // ranks, and the option as given; unset: what the host has
                                         // available now (reference_engine/memory/host_memory.h)
  bool localize = true;                  // a failing equal_across_allreduce, deterministic or
                                         // tp_invariant group has its two sides rerun at
                                         // instrumentation=digests and says where they part
                                         // (suite/checks/divergence.h); --no-localize: not
};

struct RunSummary {
  std::string run_dir;     // results/<run-id>
  int cases = 0;           // planned
  int ok = 0, failed = 0, skipped = 0, infeasible = 0;  // by final status (resumed ones included)
  int fallback = 0;        // cases whose requested allreduce backend carried none of their
                           // allreduces (status "fallback", suite/measure/allreduce_ran.h)
  int resumed = 0;         // finished in an earlier invocation, not run again
  int retried = 0;         // failed in an earlier invocation and run again (--retry-failed)
  int checks_pass = 0, checks_fail = 0, checks_skipped = 0, checks_not_implemented = 0;  // case x check verdicts
  int localized = 0;       // failing check groups whose divergence was located by a digests rerun
  int regressions = 0;     // baseline verdicts `regression` or `mismatch` (case x metric)
  int machine_drift = 0;   // latency verdicts `machine-drift`: slowed alike with the control
  int no_baseline = 0;     // cases or metrics with nothing stored to compare with
  LatencyControl control_vs_baseline;  // this run's control against the stored one (ratio 0: none)
  std::string stability;   // "stable" | "unstable" (the control drifted, or moved beyond the
                           // ceiling against its baseline) | "unknown" (no control judged)
  double control_ceiling = 0;           // the scenario's $.baseline.control_ceiling (0: no baselines)
  bool control_beyond_ceiling = false;  // the control against its stored self beyond
                                        // $.baseline.control_ceiling (BaselineTolerances)
  std::string baseline_file;  // the file compared with / written, when --baselines is given
  BuildComparison baseline_build;          // the stored baseline's build(s) against this one
                                           // (compared: false when nothing was stored)
  std::vector<std::string> stored_builds;  // describe_build of each stored build
  std::string this_build;                  // describe_build of this one
  std::string forced_dirty_reason;         // --force-dirty-baseline's, when it stored a dirty build
  bool unlike_baseline_fails = false;      // a baseline not like-for-like without --allow-unlike-baseline
  bool baseline_missing = false;           // --baselines given, nothing stored at baseline_file
  bool missing_baseline_fails = false;     // baseline_missing without --update-baselines or
                                           // --allow-missing-baseline: a comparison that compared
                                           // nothing is no pass
  bool baseline_updated = false;  // --update-baselines wrote it (never when nothing ran)
  std::string latency_note;  // with --baselines: latency_judgement_note (suite/records/baseline.h)
  std::vector<std::string> failures;  // failure_lines (suite/runner/failure_lines.h): "FAILED ..." lines
  std::string nothing_ran;  // non-empty when no case ran on this machine: why (one line)
  int interrupted = 0;      // the signal (SIGINT, SIGTERM, SIGHUP) that stopped the case loop; 0: none
  std::string interrupted_case;  // the case it cut short (not recorded: --resume runs it)
  int not_run = 0;          // planned cases an interruption left without a record (not failures)
  int exit_code = 0;       // see run_exit_code; 128 + the signal when interrupted
};

// "SIGINT", "SIGTERM", "SIGHUP" (the signals that interrupt a run).
const char* signal_name(int sig);

// Throws InputError for options this build cannot honour: --update-baselines from a dirty
// tree without --force-dirty-baseline REASON. run_scenario checks it too.
void check_run_options(const RunOptions& options);

// Exit statuses of `tpbench run` and `tpbench qualify` (2, bad input, comes from the CLI).
constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitNothingRan = 3;

// Why nothing ran, or "" when a case ran. A case ran when its final status is ok, failed, fallback or
// infeasible (the plan judged it on this machine); `skip_reasons` holds one entry per
// skipped case. No case at all, or every case skipped, is nothing ran:
//   "the sweep has no case"
//   "all 18 cases skipped: device cuda: no GPU is visible"
//   "all 12 cases skipped, for 3 reasons; the most common (6 cases): needs 8 GPUs, 1 visible (...)"
std::string nothing_ran_reason(int cases_that_ran, const std::vector<std::string>& skip_reasons);

// The run's exit status: 1 (kExitFailed) when a case or check failed, a case fell back to
// another allreduce backend, a baseline regressed
// or was not like-for-like (unlike_baseline_fails), or, with baselines, the control drifted;
// else 3 (kExitNothingRan) when nothing ran (a run that checked nothing is not a pass);
// else 0. A failure outranks nothing-ran.
int run_exit_code(const RunSummary& sum, bool with_baselines);

// Runs the planned `cases` of `scenario`. Throws InputError (before writing anything) when
// --resume names a folder that is not a run of this scenario.
RunSummary run_scenario(const Scenario& scenario, const std::vector<Case>& cases, const RunOptions& options);

}  // namespace tpb
