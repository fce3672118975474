// The case spec and the rank result to and from JSON (see case_spec.h).
#include "suite/scenario/case_spec.h"

#include "reference_engine/config/json_text.h"
#include "tpb/check.h"

namespace tpb {

using nlohmann::json;

namespace {

// A value for an error message: a wrongly typed list of samples would fill the screen.
std::string shown(const json& v) { return shown_json(v); }

// The fields of one JSON object at `path` ("case_spec.measure"), read with their types
// checked. A field absent or null is left out: the caller's default applies.
class Fields {
 public:
  Fields(const json& object, std::string path) : object_(object), path_(std::move(path)) {
    TPB_INPUT_CHECK(object.is_object(), path_ << ": expected an object, got " << shown(object));
  }

  const json* find(const char* key) const {
    const auto it = object_.find(key);
    return it == object_.end() || it->is_null() ? nullptr : &*it;
  }
  std::string path(const char* key) const { return path_ + "." + key; }

  std::string string(const char* key, const std::string& fallback) const {
    const json* v = find(key);
    if (v == nullptr) return fallback;
    TPB_INPUT_CHECK(v->is_string(), path(key) << ": expected a string, got " << shown(*v));
    return v->get<std::string>();
  }
  std::optional<std::string> optional_string(const char* key) const {
    if (find(key) == nullptr) return std::nullopt;
    return string(key, "");
  }
  std::optional<std::int64_t> integer(const char* key, std::optional<std::int64_t> least = std::nullopt) const {
    const json* v = find(key);
    if (v == nullptr) return std::nullopt;
    const bool ok = v->is_number_integer() && (!least || v->get<std::int64_t>() >= *least);
    if (least)
      TPB_INPUT_CHECK(ok, path(key) << ": expected an integer >= " << *least << ", got " << shown(*v));
    else
      TPB_INPUT_CHECK(ok, path(key) << ": expected an integer, got " << shown(*v));
    return v->get<std::int64_t>();
  }
  double number(const char* key, double fallback) const {
    const json* v = find(key);
    if (v == nullptr) return fallback;
    TPB_INPUT_CHECK(v->is_number(), path(key) << ": expected a number, got " << shown(*v));
    return v->get<double>();
  }
  bool boolean(const char* key, bool fallback) const {
    const json* v = find(key);
    if (v == nullptr) return fallback;
    TPB_INPUT_CHECK(v->is_boolean(), path(key) << ": expected true or false, got " << shown(*v));
    return v->get<bool>();
  }
  // An object field as JSON (its contents are someone else's to check).
  json object(const char* key, const json& fallback) const {
    const json* v = find(key);
    if (v == nullptr) return fallback;
    TPB_INPUT_CHECK(v->is_object(), path(key) << ": expected an object, got " << shown(*v));
    return *v;
  }
  std::vector<double> numbers(const char* key) const {
    const json* v = find(key);
    if (v == nullptr) return {};
    TPB_INPUT_CHECK(v->is_array(), path(key) << ": expected a list of numbers, got " << shown(*v));
    std::vector<double> out;
    out.reserve(v->size());
    for (std::size_t i = 0; i < v->size(); ++i) {
      TPB_INPUT_CHECK((*v)[i].is_number(), path(key) << "[" << i << "]: expected a number, got " << shown((*v)[i]));
      out.push_back((*v)[i].get<double>());
    }
    return out;
  }
  // Any JSON value, null when absent.
  json any(const char* key) const {
    const auto it = object_.find(key);
    return it == object_.end() ? json(nullptr) : *it;
  }
  // The object at `key` ({} when absent), for its own fields.
  Fields nested(const char* key) const {
    const json* v = find(key);
    return Fields(v != nullptr ? *v : empty(), path(key));
  }

 private:
  static const json& empty() {
    static const json e = json::object();
    return e;
  }
  const json& object_;
  std::string path_;
};

}  // namespace

MeasureCounts CaseSpec::Measure::counts(const MeasureCounts& defaults) const {
  return {warmup.value_or(defaults.warmup), iterations.value_or(defaults.iterations),
          repetitions.value_or(defaults.repetitions)};
}

json CaseSpec::to_json() const {
  json m = {{"interleave_instrumentation", measure.interleave_instrumentation},
            {"min_duration_s", measure.min_duration_s},
            {"timeout_s", measure.timeout_s}};
  if (measure.warmup) m["warmup"] = *measure.warmup;
  if (measure.iterations) m["iterations"] = *measure.iterations;
  if (measure.repetitions) m["repetitions"] = *measure.repetitions;
  json model_json = nullptr;
  if (model) {
    model_json = {{"config_path", model->config_path}, {"overrides", model->overrides}, {"weights", model->weights}};
    if (model->seed) model_json["seed"] = *model->seed;
  }
  json j = {{"case_id", case_id}, {"label", label},     {"workload", workload},    {"device", device},
            {"params", params},   {"kv_pool", kv_pool}, {"model", model_json},     {"measure", m}};
  if (comm.custom_max_bytes) j["comm"]["custom_max_bytes"] = *comm.custom_max_bytes;
  if (comm.custom_on_pcie) j["comm"]["custom_on_pcie"] = *comm.custom_on_pcie;
  if (comm.custom_timeout_s) j["comm"]["custom_timeout_s"] = *comm.custom_timeout_s;
  if (trace_dir) j["trace_dir"] = *trace_dir;
  return j;
}

CaseSpec CaseSpec::from_json(const json& j) {
  const Fields f(j, "case_spec");
  CaseSpec s;
  TPB_INPUT_CHECK(f.find("workload") != nullptr, "case_spec.workload: required (the workload's name), got nothing");
  s.workload = f.string("workload", "");
  s.case_id = f.string("case_id", "");
  s.label = f.string("label", "");
  s.device = f.string("device", s.device);
  s.params = f.object("params", s.params);
  s.kv_pool = f.boolean("kv_pool", s.kv_pool);
  if (f.find("model") != nullptr) {
    const Fields m = f.nested("model");
    Model model;
    model.config_path = m.string("config_path", "");
    model.overrides = m.object("overrides", model.overrides);
    model.weights = m.string("weights", model.weights);
    if (const json* seed = m.find("seed")) {
      // Any integer, its 64 bits kept: a seed written negative seeds as it always did.
      TPB_INPUT_CHECK(seed->is_number_integer(), m.path("seed") << ": expected an integer, got " << shown(*seed));
      model.seed = seed->is_number_unsigned() ? seed->get<std::uint64_t>()
                                              : static_cast<std::uint64_t>(seed->get<std::int64_t>());
    }
    s.model = std::move(model);
  }
  const Fields measure = f.nested("measure");
  s.measure.warmup = measure.integer("warmup", 0);
  s.measure.iterations = measure.integer("iterations", 1);
  s.measure.repetitions = measure.integer("repetitions", 1);
  s.measure.interleave_instrumentation = measure.boolean("interleave_instrumentation", false);
  s.measure.min_duration_s = measure.number("min_duration_s", s.measure.min_duration_s);
  s.measure.timeout_s = measure.number("timeout_s", s.measure.timeout_s);
  s.comm.custom_max_bytes = f.nested("comm").integer("custom_max_bytes", 1);
  const Fields comm = f.nested("comm");
  if (comm.find("custom_on_pcie") != nullptr) s.comm.custom_on_pcie = comm.boolean("custom_on_pcie", false);
  if (comm.find("custom_timeout_s") != nullptr) s.comm.custom_timeout_s = comm.number("custom_timeout_s", 60);
  s.trace_dir = f.optional_string("trace_dir");
  return s;
}

void RankResult::set_samples(const Measurement& m) {
  latency_us = m.latency_us;
  interleaved_off_latency_us = m.interleaved_off_us;
  interleaving = m.interleaved_off_us.empty() ? std::string() : m.halves;
}

json RankResult::to_json() const {
  json j = {{"rank", rank},     {"latency_us", latency_us}, {"digests", digests},
            {"memory", memory}, {"metrics", metrics},       {"comm", comm}};
  if (!interleaved_off_latency_us.empty()) j["interleaved_off_latency_us"] = interleaved_off_latency_us;
  if (!interleaving.empty()) j["interleaving"] = interleaving;
  if (const json w = work.to_json(); !w.empty()) j["work"] = w;
  if (!plan.is_null()) j["plan"] = plan;
  if (!outputs.empty()) j["outputs"] = outputs;
  if (!infeasible.empty()) j["infeasible"] = infeasible;
  if (!nonfinite.empty()) j["nonfinite"] = nonfinite;
  return j;
}

RankResult RankResult::from_json(const json& j) {
  const Fields f(j, "rank_result");
  RankResult r;
  r.rank = static_cast<int>(f.integer("rank", 0).value_or(0));
  r.latency_us = f.numbers("latency_us");
  r.interleaved_off_latency_us = f.numbers("interleaved_off_latency_us");
  r.interleaving = f.string("interleaving", "");
  r.work = StepWork::from_json(f.object("work", json::object()));
  const json digests = f.object("digests", json::object());
  for (const auto& [name, hex] : digests.items()) {
    TPB_INPUT_CHECK(hex.is_string(), "rank_result.digests." << name << ": expected a hex string, got " << shown(hex));
    r.digests[name] = hex.get<std::string>();
  }
  r.memory = f.object("memory", r.memory);
  r.plan = f.any("plan");
  r.metrics = f.any("metrics");
  r.comm = f.object("comm", r.comm);
  const Fields outputs = f.nested("outputs");
  const json output_names = f.object("outputs", json::object());  // named: items() of a temporary would dangle
  for (const auto& [name, values] : output_names.items()) {
    std::vector<float>& out = r.outputs[name];
    for (double v : outputs.numbers(name.c_str())) out.push_back(static_cast<float>(v));  // float values, exactly
  }
  r.infeasible = f.string("infeasible", "");
  r.nonfinite = f.string("nonfinite", "");
  return r;
}

std::vector<RankResult> rank_results_from_json(const std::vector<json>& ranks) {
  std::vector<RankResult> out;
  out.reserve(ranks.size());
  for (const json& r : ranks) out.push_back(RankResult::from_json(r));
  return out;
}

}  // namespace tpb
