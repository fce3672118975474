// The run's failures in a few lines, as pytest's short summary prints them, so that a failing
// run says what failed without a reader opening results.jsonl: printed after the run's table
// and kept in run.json (summary.failures) for the report.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "suite/runner/runner.h"
#include "suite/scenario/sweep.h"

namespace tpb {

// One "FAILED <what>: <why>" line per failure, a case's followed by "  reproduce: <command>":
// first what fails the run as a whole (no baseline stored, a baseline not like-for-like, an
// unstable control with baselines, nothing ran), then each failed or fallback case, each
// failing check group (its cases' labels), each regressed metric of a case (ratio, p). Every
// reason run_exit_code fails a run for has its line. `records`: case id -> its last record;
// `check_summary`: check name -> its groups' verdicts ({status, detail, cases}).
std::vector<std::string> failure_lines(const std::vector<Case>& cases, const std::map<std::string, nlohmann::json>& records,
                                       const nlohmann::json& check_summary, const RunSummary& sum, bool with_baselines);

}  // namespace tpb
