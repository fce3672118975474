#include "suite/runner/baseline_section.h"

#include "suite/records/provenance.h"

namespace tpb {

using nlohmann::json;

// A record's "baseline" section: metric -> verdict against the stored record of the same
// case, latency relative to `control` (this run's control against its stored record);
// counts regressions, machine drift and missing baselines into `sum`. `stored_provenance`
// is the .provenance.json's (null for a baseline without one).
json baseline_section(const std::vector<json>& stored, const json& stored_provenance, const json& record,
                      const BaselineTolerances& tol, const LatencyControl& control, bool allow_unlike,
                      RunSummary& sum) {
  json out = json::object();
  for (const auto& v : compare_runs(stored, {record}, tol, control)) {
    out[v.metric] = to_json(v);
    sum.regressions += is_regression(v);
    sum.machine_drift += v.verdict == "machine-drift";
    sum.no_baseline += v.verdict == "no-baseline";
  }
  // A baseline from other hardware or software is no baseline: say so next to the verdicts.
  // The build beside it: like-for-like or not, and why.
  const auto hardware_part = [](const json& provenance) {
    json fp = hardware_fingerprint(provenance);
    fp.erase("build");
    return fp;
  };
  for (const auto& old : stored)
    if (old.value("case_id", "") == record.value("case_id", "") && old.value("status", "") == "ok") {
      if (old.contains("provenance")) {
        const json stored_fp = hardware_part(old["provenance"]), now_fp = hardware_part(record["provenance"]);
        if (stored_fp != now_fp) out["fingerprint"] = {{"stored", stored_fp}, {"now", now_fp}, {"verdict", "differs"}};
      }
      const json stored_build = record_build(old, stored_provenance), now_build = build_fingerprint(record["provenance"]);
      json build = compare_builds(stored_build, now_build, "stored baseline", "this build").to_json();
      build["stored"] = stored_build;
      build["now"] = now_build;
      if (!build["like_for_like"].get<bool>()) build["allowed"] = allow_unlike;
      out["build"] = build;
      break;
    }
  return out;
}

}  // namespace tpb
