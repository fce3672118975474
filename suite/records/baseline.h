// Baselines: stored results for one hardware fingerprint, compared metric by metric with a
// new run (ARCHITECTURE.md, "Baselines and regressions").
//
//   latency   regression only when median(new)/median(old) > 1 + latency_rel_tol AND a
//             two-sided Mann–Whitney U test over the per-repetition medians
//             (latency.repetitions_us) rejects at alpha with >= min_repetitions on both
//             sides; beyond tolerance without significance is `noise`; fewer repetitions is
//             `insufficient-data`.
//             Relative to the control: when both runs hold the control case (it runs first
//             and last), the ratio judged is the case's divided by the control's (the
//             normalised ratio) and the test compares the old samples with the new ones
//             divided by the control's ratio, so a machine that slowed as a whole moves
//             nothing. A case whose raw ratio is beyond tolerance and significant while the
//             normalised one is not reads `machine-drift` when the control itself moved
//             (beyond tolerance, significant): the slowdown is the machine's, not the code's.
//             The raw ratio stays in the verdict. The control's ratio is taken as exact (its
//             own noise is not propagated); control_drift judges its first vs last run. A
//             change of code that slows the control as much as every case reads as drift too:
//             the control must be a case the change under test does not touch.
//             Without a control the rule is the plain one above.
//             A scenario that declares "latency": "informational" records the ratios only.
//   memory    per rank and phase, used bytes within memory_rel_tol.
//   kv_tokens the plan's max_tokens within kv_tokens_rel_tol (fewer tokens is a regression).
//   digests   output digests per rank, exactly.
// A case with no stored counterpart reads `no-baseline`, never a pass.
//
// Builds: a baseline says which build produced it (version, git sha, dirty flag, build type,
// compilers, flags, CUDA architectures). Two builds are like-for-like when neither is from a
// dirty tree and their build type, C++ compiler and flags agree, and, where both were built
// with CUDA, their CUDA compiler, flags and architectures agree. A different git sha or
// version is what a baseline exists to compare, not a mismatch. A field one side does not
// record (a baseline stored before builds were fingerprinted) is listed as unknown and is
// not judged: only the fields known on both sides decide.
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
  // "latency": "informational" (a scenario with fewer repetitions than the test needs):
  // latency reads verdict `informational` (what it would have been in the detail), never a
  // regression. Memory, KV tokens and digests are judged as ever.
  bool latency_informational = false;
  // The control's own new/old ratio beyond which (above it or below its inverse) the machine
  // is not the one the baseline measured: loaded, throttled, other hardware. Normalising by
  // such a control would read any slowdown as machine-drift; the run is `unstable` instead.
  double control_ceiling = 1.5;
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
  // Latency against a control (0 / -1 / "" without one): the control's new/old ratio, the
  // case's ratio divided by it, and the test on the raw samples (p_value is the normalised one).
  // Latency: what each side has, per-repetition medians (the test's samples) and iteration
  // samples (latency.samples_us).
  std::size_t old_repetitions = 0, new_repetitions = 0;
  std::size_t old_iterations = 0, new_iterations = 0;
  double control_ratio = 0;
  double normalised_ratio = 0;
  double raw_p_value = -1;
  std::string control_case_id;
  std::string verdict;       // ok | regression | improvement | noise | machine-drift | insufficient-data |
                             // informational | no-baseline | mismatch | not-ok (a case ok in OLD
                             // whose last record in NEW is not ok, compare_runs)
  std::string detail;
};

// The verdicts that fail a run: regression, mismatch, not-ok (a record's "baseline" entries
// carry them as text; the runner, its JUnit and its FAILED lines all read them through this).
bool is_regression_verdict(const std::string& verdict);
bool is_regression(const MetricVerdict& v);  // is_regression_verdict(v.verdict)

// The control case of the new run against its stored counterpart: how much the machine moved.
struct LatencyControl {
  std::string case_id;   // the control case compared ("" when none)
  double ratio = 0;      // median(new)/median(old) of its per-repetition medians; 0: no control
  double p_value = -1;   // Mann–Whitney U, old vs new control samples
  bool moved = false;    // beyond latency_rel_tol and significant at alpha
  std::string why_none;  // why no control normalises ("" when one does)
};

// The control of NEW (its ok `control-start` record, else `control-end`) against the ok
// record of the same case in OLD; none without one, or with fewer than min_repetitions
// latency samples on a side.
LatencyControl latency_control(const std::vector<nlohmann::json>& old_records,
                               const std::vector<nlohmann::json>& new_records, const BaselineTolerances& tol);

// How latency is judged against a baseline, in a sentence for the run's last lines, where it
// is not judged: declared informational, or too few repetitions for the U test (every verdict
// would read insufficient-data). Empty where latency is judged.
std::string latency_judgement_note(const BaselineTolerances& tol, int repetitions);

// Why rows of a comparison carry no decision, one plain sentence per kind present (counted):
// insufficient-data (the repetitions each side had against the test's minimum), noise,
// informational, no-baseline, machine-drift. A reader of `compare` learns why "0
// regression(s)" is not a pass without opening --json.
std::vector<std::string> verdict_notes(const std::vector<MetricVerdict>& verdicts, const BaselineTolerances& tol);

// Whether the control moved beyond tol.control_ceiling against its stored self (false
// without a control ratio).
bool control_beyond_ceiling(const LatencyControl& control, const BaselineTolerances& tol);

// Compares two records of the same case (latency relative to `control` when it has a ratio).
std::vector<MetricVerdict> compare_records(const nlohmann::json& old_record, const nlohmann::json& new_record,
                                           const BaselineTolerances& tol, const LatencyControl& control = {});
// Matches records by case_id (records without status "ok" are not compared); a new case
// with no old counterpart yields one `no-baseline` verdict. Latency is judged relative to
// latency_control(old_records, new_records) unless a control is given (the runner judges
// each record as it completes, against the control that ran first).
std::vector<MetricVerdict> compare_runs(const std::vector<nlohmann::json>& old_records,
                                        const std::vector<nlohmann::json>& new_records,
                                        const BaselineTolerances& tol);
std::vector<MetricVerdict> compare_runs(const std::vector<nlohmann::json>& old_records,
                                        const std::vector<nlohmann::json>& new_records,
                                        const BaselineTolerances& tol, const LatencyControl& control);

// Why OLD and NEW have nothing to compare, or "" when some case has an ok record on both
// sides. `old_name` and `new_name` are what the user typed. Reasons, in the order checked:
//   "OLD /dev/null holds no record"
//   "NEW results/B/results.jsonl holds no ok record (18 records: 18 skipped)"
//   "no case id in common: OLD a.jsonl has 4 ok cases, NEW b.jsonl 6, none the same"
// `tpbench compare` exits 2 with it: "0 metrics compared, 0 regressions" would read as a pass.
// "" when the fields a comparison reads have the types it reads them as (case_id a string;
// latency's p50 a number, its repetitions_us and samples_us arrays of finite numbers; memory's
// used_bytes, plan.max_tokens numbers; digests per rank objects; status, label, role strings;
// params, placement, provenance objects; params.tp an integer), else "<json path>: expected
// ..., got ...". A record that fails is bad input (exit 2), never a silent skip nor a thrown
// type error.
std::string comparable_record_problem(const nlohmann::json& record);

std::string nothing_comparable(const std::vector<nlohmann::json>& old_records,
                               const std::vector<nlohmann::json>& new_records, const std::string& old_name,
                               const std::string& new_name);

nlohmann::json to_json(const MetricVerdict& v);

// The folder name of a hardware fingerprint: "h200x2" for two "NVIDIA H200", "cpu-ref" on
// the CPU. `provenance` is a results record's or run.json's provenance object.
std::string hardware_dir_name(const nlohmann::json& provenance);
// The full fingerprint of a baseline: GPU model and count, topology, driver, CUDA and NCCL
// versions (the hardware, which must match for a baseline to apply), and under "build" the
// build (build_fingerprint), judged by compare_builds.
nlohmann::json hardware_fingerprint(const nlohmann::json& provenance);

// The build a provenance object describes (run.json's, a record's, a baseline's
// .provenance.json): tpbench_version, git_sha, git_dirty, build_type, compiler, cxx_flags,
// have_cuda, cuda_compiler, cuda_flags, cuda_architectures; null where the provenance
// predates the field.
nlohmann::json build_fingerprint(const nlohmann::json& provenance);
// The build of a stored record: its own provenance, gaps filled from the provenance of the
// file it came from (the .provenance.json beside a baseline, a run's run.json; null: none).
nlohmann::json record_build(const nlohmann::json& record, const nlohmann::json& file_provenance);
// The distinct builds of a results file's records, in file order (a resumed run may hold
// two); the file's own provenance alone when no record carries one; empty when neither does.
std::vector<nlohmann::json> builds_of(const std::vector<nlohmann::json>& records,
                                      const nlohmann::json& file_provenance);
// The provenance written beside a results file: "<stem>.provenance.json" (a baseline) or
// run.json in the same folder (a run); null when there is none or it cannot be read.
nlohmann::json file_provenance_of(const std::string& results_path);
// One line: "tpbench 0.1.0, 27adb80bd4eb+dirty, Debug, GNU 12.2.0" ("?" for what is unknown).
std::string describe_build(const nlohmann::json& build);

struct BuildComparison {
  std::string old_name = "OLD", new_name = "NEW";  // how the sides are named in the sentences
  bool compared = false;                 // false: a side has no build at all (nothing stored)
  bool like_for_like = true;             // no entry in `differences`
  std::vector<std::string> differences;  // why not, e.g. "build type: Debug (OLD) vs Release (NEW)"
  std::vector<std::string> unknown_old;  // fields OLD does not record (not judged)
  std::vector<std::string> unknown_new;  // fields NEW does not record (not judged)

  // "OLD predates build fingerprints: C++ flags, CUDA architectures unknown", per side.
  std::vector<std::string> notes() const;
  // "differences joined by '; '" (empty when like-for-like).
  std::string why() const;
  nlohmann::json to_json() const;  // {like_for_like, verdict, differences, unknown: {old, new}, notes}
};

// The like-for-like rule (above) for two builds.
BuildComparison compare_builds(const nlohmann::json& old_build, const nlohmann::json& new_build,
                               const std::string& old_name = "OLD", const std::string& new_name = "NEW");
// Every old build against every new one; a side holding records of several builds is not
// like-for-like either. `compared` is false when a side has no build.
BuildComparison compare_build_sets(const std::vector<nlohmann::json>& old_builds,
                                   const std::vector<nlohmann::json>& new_builds,
                                   const std::string& old_name = "OLD", const std::string& new_name = "NEW");

}  // namespace tpb
