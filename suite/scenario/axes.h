// The axis table (axes.cpp): one row per sweep axis with its rules. Internal to
// suite/scenario/ (the public names: common_axis_names and workload_axis_names, scenario.h).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reference_engine/config/model_config.h"
#include "suite/scenario/case_params.h"
#include "suite/scenario/scenario.h"
#include "suite/scenario/scenario_validator.h"

namespace tpb::scenario_parse {

// The value rules of the axis table. Each checks one value written at `path` and returns it
// normalised (ints as ints, fractions as doubles, canonical dtype names), or reports the
// problem and returns null. `device` is the scenario's device as requested ("cpu", "cuda" or
// "auto"; exclude rules pass "auto", since they may name any value).
using AxisParse = json (*)(Validator& val, const json& v, const std::string& path, const std::string& device);

// The axis table: one row per sweep axis, in sweep order, outermost first. TP outermost keeps
// a group of worker processes alive across as many consecutive cases as possible; quant next,
// since another quantization is another engine (its weights made or loaded again); allreduce
// innermost puts the cases that equal_across_allreduce compares next to each other.
// parse_scenario reads every rule of an axis from its row: which workloads sweep it, what a
// value must be and how it is normalised, the value a scenario that leaves it out sweeps,
// and any condition the model puts on it. (The one rule across axes, message sizes that hold
// whole elements of every dtype, stays in parse_scenario.)
struct AxisRule {
  std::string name;
  std::string workload;     // the one workload that sweeps it; "": every workload
  AxisParse parse;          // what a value must be, normalised
  json default_value;       // swept by a scenario that leaves the axis out; null: none, the
                            // axis is in a case's params (and id) only when the scenario writes it
  json default_on_cuda;     // instead on the resolved device "cuda"; null: default_value
  // "" or what is expected instead (the model's config, after overrides and layers, and its
  // section); null: no condition.
  std::string (*fits_model)(const ModelConfig& model, const ModelSpec& spec, const json& value);
  // Its field in a case's typed params (CaseParams::from_json fills it from the case's params).
  CaseParamSlot& (*case_field)(CaseParams& params);
};

// case_field of a row: the CaseParams member `Field`.
template <auto Field>
CaseParamSlot& case_field(CaseParams& params) {
  return params.*Field;
}

const std::vector<AxisRule>& axis_table();

// The row of axis `name` (an internal error when there is none).
const AxisRule& axis_rule(const std::string& name);

// The value a scenario that leaves the axis out sweeps, on the resolved `device`.
json default_axis_value(const AxisRule& rule, const std::string& device);

}  // namespace tpb::scenario_parse
