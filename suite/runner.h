// Runner: scenario → cases → Launcher::run_case → record → checks → results on disk.
//
// Every case ends as exactly one record in results.jsonl, written (and fsync'ed) as soon as
// the case ends: a crash, a hang or a bad result fails that case and the sweep goes on.
// Checks run as soon as every planned case of their group has a record (the result lands
// in the record that completed the group) and once more over the whole run at the end.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "suite/mps.h"
#include "suite/scenario.h"
#include "suite/sweep.h"

namespace tpb {

struct RunOptions {
  std::string results_root = "results";  // new runs go to <results_root>/<run-id>/
  std::string resume_dir;                // non-empty: append to this run, skipping finished case ids
  std::string junit_path;                // non-empty: write JUnit XML here
  std::string worker_binary;             // the tpbench binary the launcher re-executes
  bool tty = false;                      // progress as one in-place line
  std::string baselines_dir;             // non-empty: compare every ok case with
                                         // <baselines_dir>/<hardware>/<scenario>.jsonl
  bool update_baselines = false;         // write this run's ok records there (with provenance)
  MpsMode mps_mode = MpsMode::automatic; // ranks sharing a GPU: MPS server (suite/mps.h)
};

struct RunSummary {
  std::string run_dir;     // results/<run-id>
  int cases = 0;           // planned
  int ok = 0, failed = 0, skipped = 0, infeasible = 0;  // by final status (resumed ones included)
  int fallback = 0;        // cases whose requested allreduce backend carried none of their
                           // allreduces (status "fallback", suite/allreduce_ran.h)
  int resumed = 0;         // finished in an earlier invocation, not run again
  int checks_pass = 0, checks_fail = 0, checks_skipped = 0, checks_not_implemented = 0;  // case x check verdicts
  int regressions = 0;     // baseline verdicts `regression` or `mismatch` (case x metric)
  int no_baseline = 0;     // cases or metrics with nothing stored to compare with
  std::string stability;   // "stable" | "unstable" (the control drifted) | "unknown" (no control judged)
  std::string baseline_file;  // the file compared with / written, when --baselines is given
  int exit_code = 0;       // 0 all ok, 1 a case failed or fell back, a check failed, a regression,
                           // or an unstable run with baselines
};

// Runs the planned `cases` of `scenario`. Throws InputError (before writing anything) when
// --resume names a folder that is not a run of this scenario.
RunSummary run_scenario(const Scenario& scenario, const std::vector<Case>& cases, const RunOptions& options);

// Builds a record's latency object from the ranks' per-iteration samples: p50/p90/p99/mean
// over the per-iteration maximum across ranks (a TP step ends when its slowest rank does).
nlohmann::json latency_summary(const std::vector<std::vector<double>>& samples_us_per_rank, int repetitions);

// One record from the launcher's answer (ranks' JSON as in suite/workload.h). Its status is
// "ok", "fallback" (the requested allreduce backend carried none of the allreduces; error says
// which ran, allreduce_ran the counts) or "infeasible" with the first infeasible rank's
// sentence as error.
nlohmann::json case_record_from_ranks(const Scenario& scenario, const Case& c,
                                      const std::vector<nlohmann::json>& ranks);

}  // namespace tpb
