// Hardware qualification: a profile names probes (device memory bandwidth, GEMM rate, peer
// bandwidth for every GPU pair, allreduce correctness and latency per backend, engine
// decode latency, planner feasibility for a target deployment) and their thresholds; each
// measured value is checked against its threshold AND against the baseline stored for this
// hardware. The verdict is a PASS/FAIL table, qualify.json and JUnit XML.
//
// Profile (JSON):
//   schema 1, name, description, device "cpu"|"cuda", gpus (count required for cuda),
//   baseline            path of the stored baseline (relative to the profile's folder or the
//                       working directory); rows without a stored value read NO-BASELINE,
//                       which fails (never a pass)
//   baseline_tolerance  how much worse than the baseline a value may be: a rate down to
//                       (1 - tol) x baseline, a latency up to baseline / (1 - tol)
//   probes              list; each {"probe": kind, ...options, thresholds}:
//     memory_bandwidth  bytes, repetitions, min_GBps                (per GPU, or the CPU)
//     gemm              m, n, k, repetitions, min_TFLOPs            (bf16 cuBLAS; CPU: fp32, GFLOP/s as min_GFLOPs)
//     peer_bandwidth    bytes, repetitions, min_GBps                (every ordered GPU pair)
//     allreduce         tp, backends [..], message_bytes [..], dtype, max_latency_us {bytes: us}
//                       (each backend's output must equal the serial rank-order sum bitwise)
//     engine_decode     model {preset, overrides}, tp, batch_size, seq_len, allreduce, max_latency_us
//     planner           model, overrides, tp, quant, allreduce, mem_fraction, min_tokens, gpu
//                       (catalog name; default: this machine's GPU on cuda, else H200)
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
  std::string key() const { return probe + "/" + item; }
};

struct QualifyOptions {
  std::string out_dir;          // qualify.json and qualify.junit.xml go here
  std::string worker_binary;    // tpbench, for probes that need rank processes
  bool update_baseline = false; // write the measured values as the new baseline (with provenance)
};

// Runs every probe of the profile; returns the rows in profile order. Throws InputError for
// a malformed profile (every problem at once, with JSON paths).
std::vector<QualifyRow> run_qualification(const std::string& profile_path, const QualifyOptions& options);

// Applies threshold and baseline rules to a measured row (exposed for tests).
void judge_row(QualifyRow& row, const nlohmann::json& baseline_values, double baseline_tolerance);

}  // namespace tpb
