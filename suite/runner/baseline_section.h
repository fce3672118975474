// A case record's "baseline" section: how the runner compares one new record with the stored
// baseline of its scenario on this hardware (suite/records/baseline.h holds the rules).
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "suite/records/baseline.h"
#include "suite/runner/runner.h"

namespace tpb {

// A record's "baseline" section: metric -> verdict against the stored record of the same
// case, latency relative to `control` (this run's control against its stored record);
// counts regressions, machine drift and missing baselines into `sum`. `stored_provenance`
// is the .provenance.json's (null for a baseline without one).
nlohmann::json baseline_section(const std::vector<nlohmann::json>& stored, const nlohmann::json& stored_provenance,
                                const nlohmann::json& record, const BaselineTolerances& tol,
                                const LatencyControl& control, bool allow_unlike, RunSummary& sum);

}  // namespace tpb
