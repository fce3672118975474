// The JUnit of `tpbench run` (suite/records/junit.h writes it): one <testsuite> per case, named by
// the case's label, holding its "run" testcase and one testcase per check that judged it,
// with the key numbers of its record in results.jsonl as the suite's properties.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "suite/records/junit.h"
#include "suite/runner/runner.h"
#include "suite/scenario/sweep.h"

namespace tpb {

// "tpbench.<scenario>" as a dotted identifier: the classname of what belongs to no one case.
std::string junit_scenario_classname(const std::string& scenario);

// Per case, in the order of `cases`: "tpbench.<scenario>.<label>" as a dotted identifier
// ("tpbench.ci-smoke.allreduce.tp2.64KiB.bf16.shm.repeat"). Cases whose labels would give
// the same classname (labels name only some axes) get their case id appended, so that a
// dashboard never merges two cases' histories.
std::vector<std::string> junit_case_classnames(const std::string& scenario, const std::vector<Case>& cases);

// The suite properties of one case: case_id, then from its record (null: none) the status
// and the numbers a dashboard shows, each as results.jsonl writes it and only where the
// record holds it: latency_p50_us, latency_p99_us, algbw_GBps, busbw_GBps, tokens_per_s.
JunitProperties junit_case_properties(const std::string& case_id, const nlohmann::json* record);

// A case's comparison with its stored baseline (its record's "baseline" section, null: none):
// a failing testcase "baseline <metric>" per metric that regressed (regression, mismatch,
// not-ok; its ratio, p and values in the message), else one passing "baseline" testcase;
// nothing when the record was not compared. A CI that reads only the JUnit sees each
// regression, as the exit status does.
std::vector<JunitCase> junit_baseline_cases(const std::string& classname, const nlohmann::json* record);

// What fails a run beside its cases, as testcases of the scenario's suite: no baseline stored
// (unless allowed), a baseline that is not like-for-like (unless allowed), and with baselines
// an unstable control (it drifted within the run, or beyond its ceiling against its baseline).
std::vector<JunitCase> junit_run_failures(const std::string& scenario, const RunSummary& sum, bool with_baselines);

}  // namespace tpb
