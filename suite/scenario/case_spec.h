// What crosses the process boundary for one case: the case spec the runner builds
// (suite/scenario/sweep.cpp) and the launcher sends to every rank, and the result each rank sends back.
// JSON is their wire format (suite/launch/control_socket.h); this file is the one place either is
// converted, so that the runner, the worker and the workloads read typed fields and a field
// has one name. The names are those results.jsonl, baselines and tests have always read.
//
// Every field the scenario fixes is typed; the swept axes (`params`) stay JSON here, as the
// case id, the record and the checks read them; a workload reads them typed, as a CaseParams
// (suite/scenario/case_params.h). A field left out of a spec takes the
// default written beside it: specs built by hand (tests, `tpbench logits`) leave out what they
// do not need. from_json refuses a field of the wrong type with an InputError naming its path
// (case_spec.measure.iterations, rank_result.latency_us).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "suite/measure/measure.h"

namespace tpb {

struct CaseSpec {
  // The scenario's model section, resolved (suite/scenario/scenario.h).
  struct Model {
    std::string config_path;  // the config.json the engine loads; the engine refuses "" (hand-built specs)
    nlohmann::json overrides = nlohmann::json::object();  // config fields replaced, as written (apply_overrides)
    std::string weights = "synthetic";                    // "synthetic" or a safetensors checkpoint folder
    std::optional<std::uint64_t> seed;  // synthetic weights' and inputs' seed; absent: the workload's
                                        // default (engine 1234, allreduce 0)
  };

  // How the harness measures (suite/measure/measure.h).
  struct Measure {
    // Absent counts take the workload's defaults (counts() below): the runner always writes them.
    std::optional<std::int64_t> warmup;       // untimed steps before the first sample, >= 0
    std::optional<std::int64_t> iterations;   // timed samples per repetition (per half when interleaved), >= 1
    std::optional<std::int64_t> repetitions;  // repetitions, >= 1; one median each
    // The runner sets it on every case of a scenario that sweeps more than one instrumentation
    // level (suite/scenario/sweep.cpp): each repetition then runs recorded and paused halves (measure.h).
    // Not params.instrumentation's presence: every case carries that key ("off" by default), and
    // a case outside such a sweep has no level to be compared with, so it samples once.
    bool interleave_instrumentation = false;
    double min_duration_s = 0;  // keep iterating until this much time is timed, seconds (read by no workload yet)
    double timeout_s = 60;      // the whole case on every rank, seconds (the launcher enforces it)

    // The counts, each `defaults`' where absent.
    MeasureCounts counts(const MeasureCounts& defaults) const;
  };

  // The scenario's "comm" section: options of the communicator (CommOptions).
  struct Comm {
    std::optional<std::int64_t> custom_max_bytes;  // the custom allreduce's buffer, bytes, >= 1;
                                                   // absent: CommOptions' default
    std::optional<bool> custom_on_pcie;            // CommOptions::custom_on_pcie; absent: false
    std::optional<double> custom_timeout_s;        // CommOptions::timeout_s, seconds; absent: 60
  };

  std::string case_id;                                // stable id of the case (suite/scenario/sweep.h); traces are named after it
  std::string label;                                  // human name, e.g. "decode tp2 b4 s16 shm"
  std::string workload;                               // required: "allreduce" | "engine" | "probe" (suite/workloads/workload.cpp)
  std::string device = "cpu";                         // "cpu" | "cuda"; the workload checks the value
  nlohmann::json params = nlohmann::json::object();   // the swept values: mode, tp, batch_size, seq_len,
                                                      // allreduce, mem_fraction, instrumentation,
                                                      // cuda_graph, + workload axes (message_bytes, ...);
                                                      // engine: quant ("bf16" | "int4") when the scenario
                                                      // sweeps it, layers (num_hidden_layers to run) when it
                                                      // writes model.layers; absent: the config's own
  bool kv_pool = false;  // the engine sizes its KV pool from params.mem_fraction (the scenario sweeps
                         // it); otherwise it allocates exactly the case's cache
  std::optional<Model> model;            // absent: a workload without a model (allreduce, probe)
  Measure measure;
  Comm comm;                             // written to JSON only when it holds something
  std::optional<std::string> trace_dir;  // where instrumentation=trace|debug writes each rank's Chrome
                                         // trace; absent: $TMPDIR or /tmp (suite/measure/instrumentation.h)

  nlohmann::json to_json() const;
  // InputError naming case_spec.<field> on a field of the wrong type or out of range.
  static CaseSpec from_json(const nlohmann::json& j);
};

// One rank's answer for one case (collected by the launcher in rank order).
struct RankResult {
  int rank = 0;
  std::vector<double> latency_us;  // one sample per timed step, microseconds, in the order they ran
                                   // (with interleaved halves: those recorded, A); suite/measure/measure.h
  std::vector<double> interleaved_off_latency_us;  // the halves run with recording paused (B), same
                                                   // shape; empty unless interleaved
  std::string interleaving;                        // the halves' order, "ABBA..."; empty unless interleaved
  StepWork work;  // what one step moves or produces; the record's throughput derives from it
                  // (nothing for the probe, logits mode, an infeasible case)
  std::map<std::string, std::string> digests;  // output name -> FNV-1a 64 hex (bitwise comparisons)
  nlohmann::json memory = nlohmann::json::object();  // phase -> {used_bytes, free_bytes, ...}, breakdown
                                                     // (MemoryMeter::to_json and the workload's terms)
  nlohmann::json plan;     // the memory planner's prediction for this case (record.plan); null: none
  nlohmann::json metrics;  // workload-specific numbers and self-checks; null: none
  nlohmann::json comm = nlohmann::json::object();  // communicator_result (suite/workloads/workload.h); {} without one
  std::map<std::string, std::vector<float>> outputs;  // name -> small float array for tolerance
                                                      // checks; empty: none
  std::string infeasible;  // non-empty: the case cannot run as sized (the GPU engine's KV pool does
                           // not hold it), the sentence; the record's status is then "infeasible"
  std::string nonfinite;   // non-empty: an output holds NaN or Inf (nonfinite_values(), which the
                           // workload runs over its whole outputs), the sentence; the case fails

  // Takes the harness's samples: latency_us, and when interleaved the B samples and the order.
  void set_samples(const Measurement& m);

  nlohmann::json to_json() const;
  // InputError naming rank_result.<field> on a field of the wrong type.
  static RankResult from_json(const nlohmann::json& j);
};

// The launcher's answer (CaseRun::ranks), each parsed once.
std::vector<RankResult> rank_results_from_json(const std::vector<nlohmann::json>& ranks);

}  // namespace tpb
