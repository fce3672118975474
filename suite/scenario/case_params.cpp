// A case's typed params (see case_params.h).
#include "suite/scenario/case_params.h"

#include "reference_engine/config/json_text.h"
#include "suite/scenario/axes.h"
#include "tpb/check.h"

namespace tpb {

namespace {

// Whether `v` holds a T, and the word its error says a T is.
template <class T>
bool holds(const nlohmann::json& v);
template <>
bool holds<std::int64_t>(const nlohmann::json& v) { return v.is_number_integer(); }
template <>
bool holds<double>(const nlohmann::json& v) { return v.is_number(); }
template <>
bool holds<bool>(const nlohmann::json& v) { return v.is_boolean(); }
template <>
bool holds<std::string>(const nlohmann::json& v) { return v.is_string(); }
template <>
bool holds<nlohmann::json>(const nlohmann::json&) { return true; }

template <class T>
const char* expected_type();
template <>
const char* expected_type<std::int64_t>() { return "an integer"; }
template <>
const char* expected_type<double>() { return "a number"; }
template <>
const char* expected_type<bool>() { return "true or false"; }
template <>
const char* expected_type<std::string>() { return "a string"; }
template <>
const char* expected_type<nlohmann::json>() { return "a value"; }

}  // namespace

template <class T>
T CaseParam<T>::get(const T& fallback) const {
  if (!written || written->is_null()) return fallback;
  return get_written(fallback);
}

template <class T>
T CaseParam<T>::get_written(const T& fallback) const {
  if (!written) return fallback;
  TPB_INPUT_CHECK(holds<T>(*written),
                  "case_spec.params." << key << ": expected " << expected_type<T>() << ", got " << shown_json(*written));
  return written->template get<T>();
}

template struct CaseParam<std::int64_t>;
template struct CaseParam<double>;
template struct CaseParam<bool>;
template struct CaseParam<std::string>;
template struct CaseParam<nlohmann::json>;

InstrumentationLevel CaseParams::instrumentation_level() const {
  return instrumentation.written ? instrumentation_level_of(*instrumentation.written) : InstrumentationLevel::off;
}

bool CaseParams::cuda_graph_on() const {
  return cuda_graph.written && cuda_graph.written->is_boolean() && cuda_graph.written->get<bool>();
}

CaseParams CaseParams::from_json(const nlohmann::json& params) {
  CaseParams p;
  if (!params.is_object()) return p;
  const auto fill = [&params](CaseParamSlot& slot) {
    if (const auto it = params.find(slot.key); it != params.end()) slot.written = *it;
  };
  for (const auto& rule : scenario_parse::axis_table()) fill(rule.case_field(p));
  for (CaseParamSlot* slot : std::initializer_list<CaseParamSlot*>{&p.mode, &p.layers, &p.prefill, &p.out, &p.input_ids,
                                                                  &p.seed, &p.comm_max_bytes})
    fill(*slot);
  return p;
}

}  // namespace tpb
