#include "suite/qualify/qualify.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <sstream>

#include "reference_engine/config/data_home.h"
#include "reference_engine/config/model_config.h"
#include "reference_engine/memory/gpu_catalog.h"
#include "reference_engine/memory/planner.h"
#include "suite/records/jsonl.h"
#include "suite/launch/placement.h"
#include "suite/records/provenance.h"
#include "suite/records/results.h"
#include "suite/runner/runner.h"
#include "suite/scenario/scenario.h"
#include "suite/scenario/sweep.h"
#include "tpb/check.h"
#include "tpb/kernels/device.h"
#include "tpb/kernels/hw_probes.h"

namespace tpb {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr double kNone = std::numeric_limits<double>::quiet_NaN();

const std::vector<std::string>& probe_kinds() {
  static const std::vector<std::string> kinds = {"memory_bandwidth", "gemm", "peer_bandwidth", "allreduce",
                                                 "engine_decode", "conformance", "planner"};
  return kinds;
}

// Probes that run a scenario through the runner (rank processes, records, checks).
bool runs_scenario(const std::string& kind) {
  return kind == "allreduce" || kind == "engine_decode" || kind == "conformance";
}

// Probes whose rows include latencies judged against thresholds and the baseline.
bool times_scenario(const std::string& kind) { return kind == "allreduce" || kind == "engine_decode"; }

struct Profile {
  std::string path, name, device;
  int gpus = 0;
  std::string baseline_path;  // resolved; empty when the profile names none
  double baseline_tolerance = 0.1;
  json probes;
  std::vector<std::optional<Scenario>> scenarios;  // per probe: the scenario it runs, loaded and validated
};

// A path a profile names (a scenario, its baseline): as it is when absolute or present from
// the working directory, else beside the profile, else under a data root ($TPB_HOME, the
// install prefix, the source tree: reference_engine/config/data_home.h), first where the file
// exists, then where its folder does (a baseline --update-baseline is about to write).
std::string resolve_relative(const std::string& p, const std::string& profile_path) {
  if (p.empty() || fs::path(p).is_absolute() || fs::exists(p)) return p;
  const fs::path beside = fs::path(profile_path).parent_path() / p;
  if (fs::exists(beside)) return beside.string();
  const std::vector<std::string> roots = data_roots();
  for (const auto& root : roots)
    if (fs::exists(fs::path(root) / p)) return (fs::path(root) / p).string();
  for (const auto& root : roots)
    if (fs::exists((fs::path(root) / p).parent_path())) return (fs::path(root) / p).string();
  return p;
}

// Validates the whole profile, collecting every problem with its JSON path.
Profile load_profile(const std::string& path) {
  const json doc = read_json_file(path);
  std::vector<std::string> problems;
  auto problem = [&](const std::string& where, const std::string& what) { problems.push_back(path + ": " + where + ": " + what); };
  static const std::vector<std::string> top_keys = {"schema", "name", "description", "device", "gpus",
                                                    "baseline", "baseline_tolerance", "probes"};
  Profile p;
  p.path = path;
  if (!doc.is_object()) TPB_INPUT_FAIL(path << ": expected a JSON object (a qualification profile)");
  for (const auto& [k, v] : doc.items())
    if (std::find(top_keys.begin(), top_keys.end(), k) == top_keys.end()) problem("$." + k, "unknown key");
  if (doc.value("schema", json()) != json(1)) problem("$.schema", "expected 1");
  p.name = doc.value("name", fs::path(path).stem().string());
  p.device = doc.value("device", std::string("cpu"));
  if (p.device != "cpu" && p.device != "cuda") problem("$.device", "expected \"cpu\" or \"cuda\", got \"" + p.device + "\"");
  const bool gpus_ok = doc.contains("gpus") && doc["gpus"].is_number_integer() && doc["gpus"].get<int>() >= 1;
  if (doc.contains("gpus") && !gpus_ok) problem("$.gpus", "expected a positive integer");
  p.gpus = gpus_ok ? doc["gpus"].get<int>() : (p.device == "cuda" ? 1 : 0);
  if (doc.contains("baseline")) {
    if (!doc["baseline"].is_string()) problem("$.baseline", "expected a path");
    else p.baseline_path = resolve_relative(doc["baseline"].get<std::string>(), path);
  }
  if (doc.contains("baseline_tolerance") &&
      (!doc["baseline_tolerance"].is_number() || doc["baseline_tolerance"].get<double>() < 0 ||
       doc["baseline_tolerance"].get<double>() >= 1))
    problem("$.baseline_tolerance", "expected a number in [0, 1)");
  p.baseline_tolerance = doc.value("baseline_tolerance", 0.1);
  p.probes = doc.value("probes", json());
  if (!p.probes.is_array() || p.probes.empty()) {
    problem("$.probes", "expected a non-empty list of probes");
  } else {
    p.scenarios.resize(p.probes.size());
    for (std::size_t i = 0; i < p.probes.size(); ++i) {
      const auto& pr = p.probes[i];
      const std::string where = "$.probes[" + std::to_string(i) + "]";
      if (!pr.is_object() || !pr.contains("probe") || !pr["probe"].is_string()) {
        problem(where + ".probe",
                "expected one of memory_bandwidth, gemm, peer_bandwidth, allreduce, engine_decode, conformance, planner");
        continue;
      }
      const std::string kind = pr["probe"];
      if (std::find(probe_kinds().begin(), probe_kinds().end(), kind) == probe_kinds().end())
        problem(where + ".probe", "unknown probe \"" + kind + "\"");
      if (runs_scenario(kind)) {
        if (!pr.contains("scenario") || !pr["scenario"].is_string()) {
          problem(where + ".scenario", "expected the scenario file this probe runs");
        } else {
          // Loaded now, so that a bad scenario is bad input before anything is measured.
          const std::string scenario_path = pr["scenario"].get<std::string>();
          try {
            p.scenarios[i] = load_scenario(resolve_scenario_path(resolve_relative(scenario_path, path)));
          } catch (const InputError& e) {
            problem(where + ".scenario", e.what());
          }
          if (p.scenarios[i] && times_scenario(kind) && p.scenarios[i]->placement == Placement::shared)
            problem(where + ".scenario",
                    "\"" + scenario_path + "\" has placement \"shared\": shared placement measures contention, not "
                    "an interconnect: latency thresholds cannot come from it; use a conformance probe");
        }
      }
      if (kind == "conformance")
        for (const auto& [k, v] : pr.items())
          if (k != "probe" && k != "scenario")
            problem(where + "." + k, "a conformance probe judges correctness only; it takes \"scenario\" and nothing else");
      if (kind == "peer_bandwidth" && p.device != "cuda") problem(where, "peer_bandwidth needs device \"cuda\"");
      if (kind == "peer_bandwidth" && p.device == "cuda" && p.gpus < 2)
        problem(where, "peer_bandwidth needs 2 GPUs or more: one GPU has no link to measure ($.gpus is " +
                           std::to_string(p.gpus) + ")");
      for (const auto& [k, v] : pr.items()) {
        if ((k.rfind("min_", 0) == 0) && !v.is_number()) problem(where + "." + k, "expected a number");
        if (k == "max_latency_us" && !v.is_object() && !v.is_number())
          problem(where + "." + k, "expected a number or an object {case label or message bytes: us}");
      }
    }
  }
  if (!problems.empty()) {
    std::ostringstream os;
    os << problems.size() << " problem(s) in the qualification profile:";
    for (const auto& s : problems) os << "\n  " << s;
    TPB_INPUT_FAIL(os.str());
  }
  return p;
}

QualifyRow row(const std::string& probe, const std::string& item, double value, const std::string& unit,
               bool higher_is_better, double threshold, std::string detail = {}) {
  QualifyRow r;
  r.probe = probe;
  r.item = item;
  r.value = value;
  r.unit = unit;
  r.higher_is_better = higher_is_better;
  r.threshold = threshold;
  r.baseline = kNone;
  r.detail = std::move(detail);
  return r;
}

// A pass/fail row with no baseline comparison (correctness, feasibility).
QualifyRow verdict_row(const std::string& probe, const std::string& item, bool ok, std::string detail) {
  QualifyRow r = row(probe, item, ok ? 1 : 0, "bool", true, 1, std::move(detail));
  r.verdict = ok ? "PASS" : "FAIL";
  return r;
}

// Wall time since construction: what a row's measurement took (its JUnit testcase's time).
class Stopwatch {
 public:
  double seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

double threshold_of(const json& probe, const char* key) {
  return probe.contains(key) ? probe[key].get<double>() : kNone;
}

std::string fmt_bytes(std::size_t b) { return std::to_string(b) + " B"; }

void probe_memory_bandwidth(const Profile& p, const json& pr, std::vector<QualifyRow>& rows) {
  const std::size_t bytes = pr.value("bytes", std::size_t(p.device == "cuda" ? 1u << 30 : 64u << 20));
  const int reps = pr.value("repetitions", 10);
  const double min = threshold_of(pr, "min_GBps");
  if (p.device == "cpu") {
    const Stopwatch watch;
    const auto t = cpu_copy_bandwidth(bytes, reps);
    rows.push_back(row("memory_bandwidth", "cpu", t.value, "GB/s", true, min, "memcpy " + fmt_bytes(bytes) + ", read+write counted"));
    rows.back().wall_s = watch.seconds();
    return;
  }
  for (int g = 0; g < p.gpus; ++g) {
    const Stopwatch watch;
    const auto t = gpu_copy_bandwidth(g, bytes, reps);
    rows.push_back(row("memory_bandwidth", "gpu" + std::to_string(g), t.value, "GB/s", true, min,
                       "D2D copy " + fmt_bytes(bytes) + ", read+write counted"));
    rows.back().wall_s = watch.seconds();
  }
}

void probe_gemm(const Profile& p, const json& pr, std::vector<QualifyRow>& rows) {
  const int m = pr.value("m", p.device == "cuda" ? 8192 : 256), n = pr.value("n", m), k = pr.value("k", m);
  const int reps = pr.value("repetitions", p.device == "cuda" ? 20 : 3);
  const std::string shape = std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
  if (p.device == "cpu") {
    const Stopwatch watch;
    const auto t = cpu_gemm_rate(m, n, k, reps);
    rows.push_back(row("gemm", "cpu fp32 " + shape, t.value, "GFLOP/s", true, threshold_of(pr, "min_GFLOPs")));
    rows.back().wall_s = watch.seconds();
    return;
  }
  for (int g = 0; g < p.gpus; ++g) {
    const Stopwatch watch;
    const auto t = gpu_bf16_gemm_rate(g, m, n, k, reps);
    rows.push_back(row("gemm", "gpu" + std::to_string(g) + " bf16 " + shape, t.value, "TFLOP/s", true,
                       threshold_of(pr, "min_TFLOPs"), "cuBLAS, fp32 accumulate, random inputs"));
    rows.back().wall_s = watch.seconds();
  }
}

void probe_peer_bandwidth(const Profile& p, const json& pr, std::vector<QualifyRow>& rows) {
  const std::size_t bytes = pr.value("bytes", std::size_t(256u << 20));
  const int reps = pr.value("repetitions", 10);
  for (int s = 0; s < p.gpus; ++s)
    for (int d = 0; d < p.gpus; ++d) {
      if (s == d) continue;
      const Stopwatch watch;
      const std::string item = "gpu" + std::to_string(s) + "->gpu" + std::to_string(d);
      if (!gpu_can_access_peer(s, d)) {
        rows.push_back(verdict_row("peer_bandwidth", item, false, "no peer access between these GPUs"));
        rows.back().wall_s = watch.seconds();
        continue;
      }
      const auto t = gpu_peer_bandwidth(s, d, bytes, reps);
      rows.push_back(row("peer_bandwidth", item, t.value, "GB/s", true, threshold_of(pr, "min_GBps"),
                         "cudaMemcpyPeerAsync " + fmt_bytes(bytes)));
      rows.back().wall_s = watch.seconds();
    }
}

struct ProbeRun {
  std::vector<json> records;
  json checks;  // run.json summary.checks: name -> [{status, detail, cases}]
};

// Runs a scenario (loaded by load_profile) through the runner, records, checks and all, and
// reads its records back.
ProbeRun run_probe_scenario(const Scenario& scenario, const QualifyOptions& options, const std::string& tag) {
  const auto cases = expand_cases(scenario, detect_machine());
  RunOptions ro;
  ro.results_root = (fs::path(options.out_dir) / ("runs-" + tag)).string();
  ro.worker_binary = options.worker_binary;
  const RunSummary summary = run_scenario(scenario, cases, ro);
  ProbeRun run;
  run.records = read_jsonl((fs::path(summary.run_dir) / "results.jsonl").string());
  run.checks = read_json_file((fs::path(summary.run_dir) / "run.json").string())["summary"].value("checks", json::object());
  return run;
}

double latency_threshold(const json& pr, const json& record) {
  if (!pr.contains("max_latency_us")) return kNone;
  const auto& t = pr["max_latency_us"];
  if (t.is_number()) return t.get<double>();
  const std::string label = record.value("label", "");
  if (t.contains(label)) return t[label].get<double>();
  const auto params = record.value("params", json::object());
  if (params.contains("message_bytes")) {
    const std::string bytes = std::to_string(params["message_bytes"].get<long long>());
    if (t.contains(bytes)) return t[bytes].get<double>();
  }
  return kNone;
}

// Where the case's ranks ran, for a row's detail: what its timings (if any) speak for.
std::string placement_detail(const Scenario& scenario, const json& rec) {
  if (scenario.device != "cuda") return "placement cpu (rank processes)";
  std::string text = std::string("placement ") + placement_name(scenario.placement);
  const json placed = rec.value("placement", json::object());
  const int ranks_per_gpu = placed.is_object() ? placed.value("ranks_per_gpu", 1) : 1;
  if (ranks_per_gpu > 1) text += ", " + std::to_string(ranks_per_gpu) + " ranks per GPU (timings measure contention)";
  return text;
}

struct CaseVerdict {
  bool ok = false;
  std::string detail;  // which checks verified the output, or why the case does not pass
};

// A case's correctness from its record and the run's final check verdicts: it ran ok, no
// check group holding it failed, and at least one check verified its output (a skipped or
// not-implemented check verifies nothing). An allreduce record must also show every rank's
// output equal to the serial rank-order sum, and the same digest on every rank.
CaseVerdict judge_case_output(const ProbeRun& run, const json& rec) {
  const std::string status = rec.value("status", "");
  if (status != "ok") return {false, status + ": " + rec.value("error", std::string())};
  bool correct = true;
  std::string why;
  std::vector<std::string> verified_by;  // checks (and comparisons) that passed on this case
  // Final group verdicts of the run (a group's result is stored once, on the record that
  // completed it; the summary lists every case of every group).
  const std::string id = rec.value("case_id", "");
  for (const auto& [name, groups] : run.checks.items())
    for (const auto& g : groups) {
      const auto ids = g.value("cases", json::array());
      if (std::find(ids.begin(), ids.end(), json(id)) == ids.end()) continue;
      const std::string st = g.value("status", "");
      if (st == "fail") {
        correct = false;
        why += name + " failed: " + g.value("detail", std::string()) + "; ";
      }
      if (st == "pass" && std::find(verified_by.begin(), verified_by.end(), name) == verified_by.end())
        verified_by.push_back(name);
    }
  if (rec.value("workload", "") == "allreduce") {
    // metrics: one object per rank (or a single object); every rank compares its own output.
    json metrics = rec.value("metrics", json());
    if (metrics.is_object()) metrics = json::array({metrics});
    bool all_match = metrics.is_array() && !metrics.empty();
    for (const auto& m : metrics) all_match = all_match && m.is_object() && m.value("matches_serial_sum", false);
    if (!all_match) {
      correct = false;
      why += "a rank's output differs from the serial rank-order sum; ";
    } else {
      verified_by.push_back("serial rank-order sum");
    }
    // Every rank must hold the same bits.
    const auto digests = rec.value("digests", json::array());
    for (const auto& d : digests)
      if (d != digests.front()) {
        correct = false;
        why += "ranks disagree on the output digest; ";
        break;
      }
  }
  if (!correct) return {false, why};
  if (verified_by.empty()) return {false, "no check verified this case's output (name one in the probe's scenario)"};
  std::string by;
  for (const auto& v : verified_by) by += (by.empty() ? "" : ", ") + v;
  return {true, "output verified by " + by};
}

// allreduce / engine_decode: per case a latency row (p50 against the threshold and the
// baseline) and a <kind>_correct row.
void probe_scenario_latency(const Scenario& scenario, const json& pr, const QualifyOptions& options,
                            const std::string& kind, std::vector<QualifyRow>& rows) {
  const ProbeRun run = run_probe_scenario(scenario, options, kind);
  for (const auto& rec : run.records) {
    const std::string label = rec.value("label", rec.value("case_id", "?"));
    const std::string status = rec.value("status", "");
    const std::string placed = placement_detail(scenario, rec);
    const double wall_s = rec.value("wall_s", 0.0);  // none when the case did not run
    if (status != "ok") {
      rows.push_back(verdict_row(kind, label, false, status + ": " + rec.value("error", std::string()) + "; " + placed));
      if (status == "skipped") rows.back().not_run = rec.value("error", std::string("skipped"));
      rows.back().wall_s = wall_s;
      continue;
    }
    const double p50 = rec["latency"].value("p50", kNone);
    rows.push_back(row(kind, label, p50, "us", false, latency_threshold(pr, rec), "p50 over timed iterations; " + placed));
    rows.back().wall_s = wall_s;
    const CaseVerdict v = judge_case_output(run, rec);
    rows.push_back(verdict_row(kind + "_correct", label, v.ok, v.detail + "; " + placed));
    rows.back().wall_s = wall_s;
  }
}

// conformance: one PASS/FAIL row per case, nothing timed. Skipped, failed and infeasible
// cases fail: a conformance probe names only cases this machine must run.
void probe_conformance(const Scenario& scenario, const QualifyOptions& options, std::vector<QualifyRow>& rows) {
  const ProbeRun run = run_probe_scenario(scenario, options, "conformance");
  for (const auto& rec : run.records) {
    const std::string label = rec.value("label", rec.value("case_id", "?"));
    const CaseVerdict v = judge_case_output(run, rec);
    rows.push_back(verdict_row("conformance", label, v.ok, v.detail + "; " + placement_detail(scenario, rec)));
    if (rec.value("status", "") == "skipped") rows.back().not_run = rec.value("error", std::string("skipped"));
    rows.back().wall_s = rec.value("wall_s", 0.0);
  }
}

// Planner feasibility for the target deployment: the same plan `tpbench plan` prints, on
// this machine's GPU memory when it has GPUs (else the catalog's `gpu`), must fit the KV
// tokens the deployment needs. A pure prediction: nothing is allocated.
void probe_planner(const Profile& p, const json& pr, std::vector<QualifyRow>& rows) {
  const Stopwatch watch;
  PlanInput in;
  in.config = load_model_config_by_name(pr.value("model", std::string("kimi-k2.5")));
  if (pr.contains("overrides")) apply_overrides(in.config, pr["overrides"], p.path, "$.probes[].overrides");
  in.tp = pr.value("tp", 8);
  in.quant = parse_quantization(pr.value("quant", std::string("bf16")), p.path + ": $.probes[].quant");
  in.mem_fraction = pr.value("mem_fraction", 0.85);
  in.allreduce = pr.value("allreduce", std::string("auto"));
  in.custom_on_pcie = pr.value("custom_on_pcie", false);
  in.requested_tokens = pr.value("min_tokens", std::int64_t(1));
  const auto gpus = visible_gpus();
  std::string where;
  if (p.device == "cuda" && !gpus.empty() && !pr.contains("gpu")) {
    in.gpu_total_bytes = static_cast<std::int64_t>(gpus.front().memory_bytes);
    in.cuda_context_bytes = default_cuda_context_bytes();
    where = "this machine's " + gpus.front().name;
  } else {
    // Named first: g++ 13 takes a reference bound through a temporary argument for dangling.
    const std::string gpu = pr.value("gpu", std::string("H200"));
    const GpuSpec& spec = find_gpu(gpu);
    in.gpu_total_bytes = spec.total_bytes;
    in.cuda_context_bytes = spec.cuda_context_bytes;
    in.interconnect = spec.interconnect;  // as `tpbench plan --gpu` takes it
    where = "catalog " + spec.name;
  }
  const MemoryPlan plan = plan_memory(in);
  const std::string item = in.config.name + " tp" + std::to_string(in.tp) + " " + quantization_name(in.quant) +
                           " f" + std::to_string(in.mem_fraction).substr(0, 4) + " (" + where + ")";
  QualifyRow r = row("planner", item, static_cast<double>(plan.max_tokens), "tokens", true,
                     static_cast<double>(in.requested_tokens), plan.verdict);
  r.wall_s = watch.seconds();
  rows.push_back(r);
}

}  // namespace

void validate_profile(const std::string& profile_path) { load_profile(profile_path); }

std::string qualify_nothing_ran(const std::vector<QualifyRow>& rows) {
  std::map<std::string, int> count_by_reason;
  for (const auto& r : rows) {
    if (r.not_run.empty()) return "";
    ++count_by_reason[r.not_run];
  }
  if (count_by_reason.empty()) return "the profile has no probe";
  if (count_by_reason.size() == 1) return count_by_reason.begin()->first;
  auto most = count_by_reason.begin();
  for (auto it = count_by_reason.begin(); it != count_by_reason.end(); ++it)
    if (it->second > most->second) most = it;
  return std::to_string(rows.size()) + " rows not run, for " + std::to_string(count_by_reason.size()) +
         " reasons; the most common (" + std::to_string(most->second) + " row" + (most->second == 1 ? "" : "s") +
         "): " + most->first;
}

void judge_row(QualifyRow& r, const json& baseline_values, double tol) {
  if (!r.verdict.empty()) return;  // a pass/fail row is already judged
  std::vector<std::string> why;
  const bool threshold_ok = std::isnan(r.threshold) ||
                            (r.higher_is_better ? r.value >= r.threshold : r.value <= r.threshold);
  if (!threshold_ok) {
    std::ostringstream os;
    os << "threshold " << (r.higher_is_better ? ">= " : "<= ") << r.threshold << " " << r.unit << " not met";
    why.push_back(os.str());
  }
  if (std::isnan(r.value)) why.push_back("no measurement");
  const auto it = baseline_values.find(r.key());
  if (it == baseline_values.end() || !it->is_number()) {
    r.verdict = why.empty() ? "NO-BASELINE" : "FAIL";
  } else {
    r.baseline = it->get<double>();
    // Symmetric in ratio: tol 0.75 allows a quarter of a stored rate or four times a stored latency.
    const bool within = r.higher_is_better ? r.value >= r.baseline * (1.0 - tol) : r.value <= r.baseline / (1.0 - tol);
    if (!within) {
      std::ostringstream os;
      os << "worse than baseline " << r.baseline << " " << r.unit << " beyond the tolerance (factor "
         << 1.0 / (1.0 - tol) << ")";
      why.push_back(os.str());
    }
    r.verdict = why.empty() ? "PASS" : "FAIL";
  }
  for (const auto& w : why) r.detail += (r.detail.empty() ? "" : "; ") + w;
}

std::vector<QualifyRow> run_qualification(const std::string& profile_path, const QualifyOptions& options) {
  const Profile p = load_profile(profile_path);
  fs::create_directories(options.out_dir);
  std::vector<QualifyRow> rows;
  const Stopwatch watch;
  const auto gpus = visible_gpus();
  if (p.device == "cuda") {
    const bool enough = static_cast<int>(gpus.size()) >= p.gpus;
    rows.push_back(verdict_row("hardware", "gpus", enough,
                               "profile needs " + std::to_string(p.gpus) + " GPU(s), found " + std::to_string(gpus.size())));
    rows.back().wall_s = watch.seconds();
    if (!enough) {
      rows.back().not_run = rows.back().detail;  // no probe runs: the profile's verdict is "nothing ran"
      return rows;
    }
  }
  // Rank-process probes first: the in-process GPU probes below create CUDA contexts here.
  for (std::size_t i = 0; i < p.probes.size(); ++i) {
    const std::string kind = p.probes[i]["probe"];
    if (times_scenario(kind)) probe_scenario_latency(*p.scenarios[i], p.probes[i], options, kind, rows);
    else if (kind == "conformance") probe_conformance(*p.scenarios[i], options, rows);
  }
  for (const auto& pr : p.probes) {
    const std::string kind = pr["probe"];
    if (kind == "memory_bandwidth") probe_memory_bandwidth(p, pr, rows);
    else if (kind == "gemm") probe_gemm(p, pr, rows);
    else if (kind == "peer_bandwidth") probe_peer_bandwidth(p, pr, rows);
    else if (kind == "planner") probe_planner(p, pr, rows);
  }
  json baseline_values = json::object();
  if (!p.baseline_path.empty() && fs::exists(p.baseline_path))
    baseline_values = read_json_file(p.baseline_path).value("values", json::object());
  for (auto& r : rows) judge_row(r, baseline_values, p.baseline_tolerance);

  // A profile that measured nothing here has nothing to store: the stored values stay.
  if (options.update_baseline && qualify_nothing_ran(rows).empty()) {
    TPB_INPUT_CHECK(!p.baseline_path.empty(), profile_path << ": $.baseline: --update-baseline needs a baseline path");
    json values = json::object();
    for (const auto& r : rows)
      if (r.unit != "bool") values[r.key()] = r.value;
    const json doc = {{"schema", 1}, {"profile", p.name}, {"values", values},
                      {"provenance", collect_provenance(utc_now_iso8601())}};
    fs::create_directories(fs::path(p.baseline_path).parent_path());
    write_file_atomic(p.baseline_path, doc.dump(2) + "\n");
  }
  return rows;
}

}  // namespace tpb
