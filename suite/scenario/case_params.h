// A case's swept values, typed once for the workloads. CaseSpec::params stays their JSON (the
// case id, the record and the checks read it as written); a workload reads a CaseParams filled
// from it: one field per axis of the axis table (suite/scenario/axes.cpp fills those, a row
// naming its field) and one per value a workload takes beside the axes (the engine's mode,
// layers and logits inputs, the allreduce's seed and buffer size).
//
// A field keeps what the case wrote, unjudged: nothing, null, or a JSON value. Its reader says
// the type and the fallback, and judges it where the workload reads it, with the message the
// read by key it replaces gave (case_spec.params.<key>: expected ..., got ...): a value no
// workload reads is never refused, and a case refused before is refused at the same point.
// Two readers, as the workloads always differed on null: get (the engine's: null is left out)
// and get_written (the allreduce's: null is a value of the wrong type).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "suite/measure/instrumentation.h"

namespace tpb {

// The untyped part of a field: its key and what the case wrote (nullopt: the key is absent).
struct CaseParamSlot {
  const char* key;
  std::optional<nlohmann::json> written;
};

template <class T>
struct CaseParam : CaseParamSlot {
  explicit CaseParam(const char* k) : CaseParamSlot{k, std::nullopt} {}
  // The value; `fallback` when the case leaves it out or writes null. InputError
  // "case_spec.params.<key>: expected <what>, got <json>" for a value of another type.
  T get(const T& fallback) const;
  // The same, but null is a value of the wrong type.
  T get_written(const T& fallback) const;
  bool present() const { return written.has_value(); }
};

struct CaseParams {
  // The axes (suite/scenario/axes.cpp), in the table's order.
  CaseParam<std::int64_t> tp{"tp"};                   // ranks in the group
  CaseParam<std::string> quant{"quant"};              // "bf16" | "int4" (case_plan.h reads it)
  CaseParam<double> mem_fraction{"mem_fraction"};     // the KV pool's share of free memory, (0, 1]
  CaseParam<bool> cuda_graph{"cuda_graph"};           // steps replay a captured graph
  CaseParam<nlohmann::json> instrumentation{"instrumentation"};  // a level's name (instrumentation())
  CaseParam<std::int64_t> batch_size{"batch_size"};   // engine: sequences per step
  CaseParam<std::int64_t> seq_len{"seq_len"};         // engine: tokens of context (or prompt)
  CaseParam<std::string> dtype{"dtype"};              // allreduce: element type's name
  CaseParam<std::int64_t> message_bytes{"message_bytes"};  // allreduce: bytes per rank
  CaseParam<std::string> allreduce{"allreduce"};      // the backend's name
  // Beside the axes.
  CaseParam<std::string> mode{"mode"};                // engine: "prefill" | "decode" | "logits"
  CaseParam<std::int64_t> layers{"layers"};           // engine: num_hidden_layers to run (case_plan.h)
  CaseParam<std::int64_t> prefill{"prefill"};         // logits mode: tokens prefilled (0: all)
  CaseParam<std::string> out{"out"};                  // logits mode: rank 0's safetensors file
  CaseParam<nlohmann::json> input_ids{"input_ids"};   // logits mode: [[token, ...], ...]
  CaseParam<std::int64_t> seed{"seed"};               // allreduce: the inputs' seed
  CaseParam<std::int64_t> comm_max_bytes{"comm_max_bytes"};  // allreduce: the communicator's buffer, bytes

  // The instrumentation level (suite/measure/instrumentation.h: absent or null is off).
  InstrumentationLevel instrumentation_level() const;
  // cuda_graph as the workloads read it: true only when written true (another type reads as false).
  bool cuda_graph_on() const;

  // Fills every field from `params` (an object; anything else leaves every field absent).
  static CaseParams from_json(const nlohmann::json& params);
};

}  // namespace tpb
