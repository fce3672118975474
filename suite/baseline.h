// Baselines: stored results for one hardware fingerprint, compared metric by metric with a
// new run (ARCHITECTURE.md, "Baselines and regressions").
//
//   latency   regression only when median(new)/median(old) > 1 + latency_rel_tol AND a
//             two-sided Mann–Whitney U test over the per-repetition medians
//             (latency.repetitions_us) rejects at alpha with >= min_repetitions on both
//             sides; beyond tolerance without significance is `noise`; fewer repetitions is
//             `insufficient-data`.
//   memory    per rank and phase, used bytes within memory_rel_tol.
//   kv_tokens the plan's max_tokens within kv_tokens_rel_tol (fewer tokens is a regression).
//   digests   output digests per rank, exactly.
// A case with no stored counterpart reads `no-baseline`, never a pass.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tpb {

struct BaselineTolerances {
  double latency_rel_tol = 0.05;    // allowed relative growth of the median latency
  double memory_rel_tol = 0.02;     // allowed relative change of used bytes per phase
  double kv_tokens_rel_tol = 0.01;  // allowed relative loss of KV-cache tokens
  double alpha = 0.05;              // significance level of the Mann–Whitney U test
  int min_repetitions = 9;          // fewer latency samples on either side: insufficient-data
};

// Reads the scenario's "baseline" section (absent keys keep their defaults).
BaselineTolerances tolerances_from_json(const nlohmann::json& section);

struct MetricVerdict {
  std::string case_id;
  std::string label;
  std::string metric;        // "latency_us", "memory.rank0.after_weights", "kv_tokens", "digest.rank0.logits"
  double old_value = 0;      // median for latency
  double new_value = 0;
  double ratio = 0;          // new / old (0 where not meaningful)
  double p_value = -1;       // latency only, -1 otherwise
  double ci_low = 0, ci_high = 0;  // latency: bootstrap CI of the ratio
  std::string verdict;       // ok | regression | improvement | noise | insufficient-data | no-baseline | mismatch
  std::string detail;
};

bool is_regression(const MetricVerdict& v);  // regression or mismatch

// Compares two records of the same case.
std::vector<MetricVerdict> compare_records(const nlohmann::json& old_record, const nlohmann::json& new_record,
                                           const BaselineTolerances& tol);
// Matches records by case_id (records without status "ok" are not compared); a new case
// with no old counterpart yields one `no-baseline` verdict.
std::vector<MetricVerdict> compare_runs(const std::vector<nlohmann::json>& old_records,
                                        const std::vector<nlohmann::json>& new_records,
                                        const BaselineTolerances& tol);

// Why OLD and NEW have nothing to compare, or "" when some case has an ok record on both
// sides. `old_name` and `new_name` are what the user typed. Reasons, in the order checked:
//   "OLD /dev/null holds no record"
//   "NEW results/B/results.jsonl holds no ok record (18 records: 18 skipped)"
//   "no case id in common: OLD a.jsonl has 4 ok cases, NEW b.jsonl 6, none the same"
// `tpbench compare` exits 2 with it: "0 metrics compared, 0 regressions" would read as a pass.
std::string nothing_comparable(const std::vector<nlohmann::json>& old_records,
                               const std::vector<nlohmann::json>& new_records, const std::string& old_name,
                               const std::string& new_name);

nlohmann::json to_json(const MetricVerdict& v);

// The folder name of a hardware fingerprint: "h200x2" for two "NVIDIA H200", "cpu-ref" on
// the CPU. `provenance` is a results record's or run.json's provenance object.
std::string hardware_dir_name(const nlohmann::json& provenance);
// The full fingerprint that must match for a baseline to apply: GPU model and count,
// topology, driver, CUDA and NCCL versions.
nlohmann::json hardware_fingerprint(const nlohmann::json& provenance);

}  // namespace tpb
