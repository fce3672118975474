// Scenario: one JSON file that says what to run (workload, model, device, mode), which
// axes to sweep, how to measure, which checks to apply and which baseline tolerances hold.
//
// Parsing never stops at the first problem: every unknown key, wrong type and out-of-range
// value is collected as "<file>: <json path>: expected ..., got ..." and thrown together in
// one ScenarioError (exit 2), so a user fixes a file in one round trip.
//
// Format (schema 1):
//   {"schema": 1, "name": "...", "description": "...", "workload": "engine" | "allreduce",
//    "model": {"preset": "tiny-dsv3" | "path": "DIR", "overrides": {...},
//              "weights": "synthetic" | "<checkpoint dir>", "seed": 1234,
//              "layers": 3 | "all"},                // engine only: num_hidden_layers to run
//    "device": "cpu" | "cuda" | "auto", "mode": "prefill" | "decode",
//    "placement": "exclusive" | "shared",            // GPU ranks: one per GPU, or packed (suite/launch/placement.h)
//    "sweep": {"tp": [1, 2], "batch_size": [1, 4], "seq_len": [16], "allreduce": ["shm"],
//              "quant": ["bf16", "int4"] (engine only; in params only when written),
//              "mem_fraction": [0.9], "instrumentation": ["off"], "cuda_graph": [false],
//              "message_bytes": [1024] (allreduce only), "dtype": ["bf16"] (allreduce only)},
//    "exclude": [{"tp": 1, "allreduce": "nccl"}],   // a value may also be a list (any of)
//    "measure": {"warmup": 2, "iterations": 10, "repetitions": 1, "min_duration_s": 0,
//                "timeout_s": 60},
//    "checks": ["equal_across_allreduce", "deterministic"],
//    "baseline": {"latency_rel_tol": 0.05, "memory_rel_tol": 0.02, "kv_tokens_rel_tol": 0.01,
//                 "alpha": 0.05},
//    "control": {"tp": 1, "batch_size": 1},          // axis -> value; unnamed axes take their first value
//    "comm": {"custom_max_bytes": 67108864}}          // engine only: the custom allreduce's largest
//                                                     // message, bytes in [1, 2 GiB] (CommOptions::max_bytes)
// Relative model paths and checkpoint folders are relative to the scenario file's folder.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "suite/launch/placement.h"
#include "tpb/check.h"

namespace tpb {

// Every problem found in one scenario file; what() joins them, one per line.
class ScenarioError : public InputError {
 public:
  explicit ScenarioError(std::vector<std::string> problems);
  const std::vector<std::string>& problems() const { return problems_; }

 private:
  std::vector<std::string> problems_;
};

struct ModelSpec {
  std::string preset;            // preset name (scenarios/models/<preset>.json), or empty
  std::string path;              // HF config.json or its folder as written, or empty
  std::string config_path;       // the resolved config file (absolute path)
  nlohmann::json overrides = nlohmann::json::object();  // applied on top of the config
  std::string weights = "synthetic";  // "synthetic" or a checkpoint folder (resolved, absolute)
  std::uint64_t seed = 1234;     // synthetic weight seed
  std::int64_t num_attention_heads = 0;  // after overrides; what TP must divide
  // "layers": the num_hidden_layers to run, resolved ("all" is the config's own count), in
  // [1, the config's num_hidden_layers]; absent when the scenario does not write it, so that
  // a case's params (and id) carry it only then. The same as overriding num_hidden_layers,
  // which the scenario may then not do as well.
  std::optional<std::int64_t> layers;
};

struct MeasureSpec {
  int warmup = 2;               // untimed iterations before timing, count
  int iterations = 10;          // timed iterations per repetition, count
  int repetitions = 1;          // independent repetitions (statistics need >= 9), count
  double min_duration_s = 0;    // keep iterating until this much time is timed, seconds
  double timeout_s = 60;        // per case, whole group of ranks, seconds
};

// One sweep axis: its name and its values in the order written (already normalised: ints
// are ints, fractions are doubles, dtype names are canonical). An axis without a default
// (quant) is here only when the scenario writes it: its cases' params, and so their ids,
// hold it only then.
struct Axis {
  std::string name;
  std::vector<nlohmann::json> values;
  bool written = true;  // false: the scenario leaves the axis out and values holds its default
};

// The "comm" section: how the GPU engine's communicator is built, as a serving engine's flags
// set it. Unset fields keep CommOptions' defaults and leave case ids as they were.
struct CommSpec {
  std::optional<std::int64_t> custom_max_bytes;  // custom allreduce max message, bytes, in [1, 2 GiB]
                                                 // (vLLM/SGLang's max size; default 8 MiB); its IPC
                                                 // buffers are sized from it, whichever message runs
  std::optional<bool> custom_on_pcie;     // run the custom allreduce on > 2 GPUs no NVLink joins
                                          // (default off, as vLLM and SGLang; CommOptions)
  std::optional<double> custom_timeout_s;  // a custom-allreduce barrier's longest wait, seconds,
                                           // in (0, 3600] (default 60)
  bool written() const { return custom_max_bytes || custom_on_pcie || custom_timeout_s; }
};

// The largest custom allreduce message a scenario may ask for, bytes (inclusive).
inline constexpr std::int64_t kScenarioCustomMaxBytesLimit = std::int64_t{2} << 30;

struct Scenario {
  std::string source;           // the file it came from (as given)
  int schema = 1;
  std::string name;
  std::string description;
  std::string workload;         // "engine" | "allreduce"
  std::string device_requested; // "cpu" | "cuda" | "auto" as written
  std::string device;           // resolved: "cpu" | "cuda"
  std::vector<std::string> modes = {"decode"};  // engine: "prefill" | "decode", one or both (cases per mode, in this order)
  Placement placement = Placement::exclusive;  // where GPU ranks run (suite/launch/placement.h); `tpbench
                                               // run --placement` overrides the file
  std::optional<ModelSpec> model;  // required by the engine workload, optional for allreduce
  std::vector<Axis> axes;       // every axis of the workload, defaults filled in, fixed order;
                                // an axis without a default only when written
  std::vector<nlohmann::json> exclude;  // objects: axis -> value or [values]
  MeasureSpec measure;
  std::vector<std::string> checks;
  // "fail" (the default): NaN or Inf in an output fails the case. "expected": the case must
  // produce some (an overflow drill), and fails when none of its outputs holds one.
  std::string nonfinite = "fail";
  // The validated "baseline" section as written (empty object when absent); suite/records/baseline.h
  // reads the tolerances from it (tolerances_from_json).
  nlohmann::json baseline = nlohmann::json::object();
  nlohmann::json control;       // null, or the full control params (axis -> value)
  CommSpec comm;                // the "comm" section (engine workload); empty when absent
  nlohmann::json document;      // the file as read, for run.json
};

struct ScenarioEnv {
  // Whether CUDA devices are usable (GPUs visible and the build has CUDA); "auto" resolves
  // with it. Unset: detected with tpb::visible_gpus().
  std::optional<bool> cuda_available;
};

// Whether the scenario's sweep names `axis` (rather than leaving it to its default).
bool axis_written(const Scenario& s, const std::string& axis);

// The axis names every scenario may sweep, and those of one workload (common ones included),
// in sweep order, outermost first; both read the axis table in scenario.cpp.
const std::vector<std::string>& common_axis_names();
const std::vector<std::string>& workload_axis_names(const std::string& workload);
// The allreduce backends a scenario may name are the backend table's
// (reference_engine/comm/backends.h), compiled in or not.

// Parses and validates; throws ScenarioError listing every problem.
Scenario parse_scenario(const nlohmann::json& document, const std::string& source,
                        const ScenarioEnv& env = {});
// Reads the file (syntax errors carry line and column) and parses it.
Scenario load_scenario(const std::string& path, const ScenarioEnv& env = {});
// The same for a document already read (`tpbench run -`): `source` names it in messages
// ("<stdin>:3:5: not valid JSON: ...") and in Scenario::source.
Scenario load_scenario_text(const std::string& text, const std::string& source, const ScenarioEnv& env = {});
// The source of a scenario read from stdin. Relative paths in it are relative to the working
// directory; records' `reproduce` reads `tpbench run - --case ID` (the document is in run.json).
inline constexpr const char* kStdinScenarioSource = "<stdin>";

// A path that exists, else scenarios/<subfolder>/<name>.json (or <name> with .json added)
// looked up in each of scenario_search_dirs() (the working directory, $TPB_HOME, the install
// prefix tpbench runs from, the source tree: reference_engine/config/data_home.h): how every
// subcommand finds a file by name.
// `what` names the kind in the error ("scenario", "qualification profile"), an InputError
// listing where it looked.
std::string resolve_in_scenario_dirs(const std::string& name_or_path, const std::string& subfolder,
                                     const std::string& what);
// `tpbench run NAME`: scenarios/<name>.json.
std::string resolve_scenario_path(const std::string& name_or_path);
// `tpbench qualify NAME`: scenarios/qualify/<name>.json.
std::string resolve_qualify_profile_path(const std::string& name_or_path);
// The scenarios/ folders searched, in order (existing ones only): the working directory's,
// $TPB_HOME's, the install prefix's and the source tree's tpbench was built from.
std::vector<std::string> scenario_search_dirs();

}  // namespace tpb
