// Hardware qualification: a profile names probes (device memory bandwidth, GEMM rate, peer
// bandwidth for every GPU pair, allreduce correctness and latency per backend, engine
// decode latency, conformance of a scenario, planner feasibility for a target deployment)
// and their thresholds; each measured value is checked against its threshold AND against the
// baseline stored for this hardware. The verdict is a PASS/FAIL table, qualify.json and
// JUnit XML.
//
// Profile (JSON):
//   schema 1, name, description, device "cpu"|"cuda", gpus (count required for cuda)
//   baseline            path of the stored baseline (relative to the profile's folder or the
//                       working directory); rows without a stored value read NO-BASELINE,
//                       which fails (never a pass). A missing file is no error: every measured
//                       row then reads NO-BASELINE until `--update-baseline` records one.
//   baseline_tolerance  how much worse than the baseline a value may be: a rate down to
//                       (1 - tol) x baseline, a latency up to baseline / (1 - tol)
//   probes              list; each {"probe": kind, ...options, thresholds}:
//     memory_bandwidth  bytes, repetitions, min_GBps                (per GPU, or the CPU)
//     gemm              m, n, k, repetitions, min_TFLOPs            (bf16 cuBLAS; CPU: fp32, GFLOP/s as min_GFLOPs)
//     peer_bandwidth    bytes, repetitions, min_GBps                (every ordered GPU pair; needs gpus >= 2)
//     allreduce         scenario, max_latency_us {bytes or case label: us}
//                       per case: a latency row (p50) and an allreduce_correct row (each rank's
//                       output must equal the serial rank-order sum bitwise; no check may fail)
//     engine_decode     scenario, max_latency_us (us, or {case label: us}); rows as allreduce's
//     conformance       scenario, nothing else: one PASS/FAIL row per case (item: the case
//                       label), PASS when the case ran ok, no check group holding it failed and
//                       at least one check verified it; skipped, failed and infeasible cases
//                       FAIL with their error. No latency rows, no thresholds, no baseline.
//     planner           model, overrides, tp, quant, allreduce, mem_fraction, min_tokens, gpu
//                       (catalog name; default: this machine's GPU on cuda, else H200),
//                       custom_on_pcie (as `tpbench plan --custom-on-pcie`)
//   Scenario-based probes (allreduce, engine_decode, conformance) run their scenario through
//   the runner, records and checks included; each row's detail names the placement.
//
// Timing honesty: a latency threshold or baseline speaks for the hardware only when the ranks
// talk over an interconnect. An allreduce or engine_decode probe whose scenario has
// "placement": "shared" (ranks packed onto one GPU: its timings measure contention) is a
// profile error; run such a scenario as a conformance probe. peer_bandwidth with "gpus": 1
// is an error too (one GPU has no link to measure).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tpb {

struct QualifyRow {
  std::string probe;       // "memory_bandwidth"
  std::string item;        // "gpu0", "gpu0->gpu1", "shm 1048576 B", ...
  double value = 0;        // measured
  std::string unit;        // "GB/s", "TFLOP/s", "us", "tokens"
  bool higher_is_better = true;
  double threshold = 0;    // from the profile; NaN when none
  double baseline = 0;     // stored value; NaN when none
  std::string verdict;     // PASS | FAIL | NO-BASELINE
  std::string detail;      // why it failed / what was measured with
  std::string not_run;     // non-empty: nothing was measured for this row on this machine, and
                           // why (the profile's GPUs are not there; its scenario case was skipped)
  double wall_s = 0;       // wall time of what produced the row, seconds: the probe's measurement,
                           // or the record's wall_s for a scenario case (its latency and _correct
                           // rows come from one run and both carry it); 0 when nothing ran
  std::string key() const { return probe + "/" + item; }
};

struct QualifyOptions {
  std::string out_dir;          // qualify.json and qualify.junit.xml go here
  std::string worker_binary;    // tpbench, for probes that need rank processes
  bool update_baseline = false; // write the measured values as the new baseline (with provenance)
};

// Reads and validates a profile without measuring anything: the profile's own fields, the
// rules above, and every scenario it names (loaded as `tpbench run` would). Throws InputError
// listing every problem at once, each as "<profile>: <JSON path>: what".
void validate_profile(const std::string& profile_path);

// Validates the profile (as validate_profile), then runs every probe; returns the rows in
// profile order (probes that run rank processes first).
std::vector<QualifyRow> run_qualification(const std::string& profile_path, const QualifyOptions& options);

// Why nothing ran, or "" when a row measured something: a profile in which no probe could
// run on this machine (the GPUs it needs are not visible, or every case of its scenarios was
// skipped) is not a pass and not a failure of the hardware measured; `tpbench qualify`
// exits 3 with this reason. One reason: that reason ("profile needs 2 GPU(s), found 0");
// several: "4 rows not run, for 2 reasons; the most common (3 rows): ...".
std::string qualify_nothing_ran(const std::vector<QualifyRow>& rows);

// Applies threshold and baseline rules to a measured row (exposed for tests).
void judge_row(QualifyRow& row, const nlohmann::json& baseline_values, double baseline_tolerance);

}  // namespace tpb
