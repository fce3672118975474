// The axis table and its value rules (see axes.h).
#include "suite/scenario/axes.h"

#include <algorithm>

#include "reference_engine/comm/backends.h"
#include "reference_engine/memory/weight_bytes.h"
#include "tpb/check.h"
#include "tpb/dtype.h"

namespace tpb {
namespace scenario_parse {

namespace {

const std::vector<std::string>& instrumentation_levels() {
  static const std::vector<std::string> levels = {"off", "timing", "trace", "debug", "digests"};
  return levels;
}

json positive_int(Validator& val, const json& v, const std::string& path, const std::string&) {
  if (!is_int(v) || v.get<long long>() < 1 || v.get<long long>() > (1LL << 40)) {
    val.expected(path, "a positive integer", v);
    return nullptr;
  }
  return v.get<long long>();
}

json tp_size(Validator& val, const json& v, const std::string& path, const std::string& device) {
  json r = positive_int(val, v, path, device);
  if (!r.is_null() && r.get<long long>() > 1024) {
    val.expected(path, "a TP size <= 1024", v);
    return nullptr;
  }
  return r;
}

json fraction(Validator& val, const json& v, const std::string& path, const std::string&) {
  if (!v.is_number() || v.get<double>() <= 0.0 || v.get<double>() > 1.0) {
    val.expected(path, "a fraction in (0, 1]", v);
    return nullptr;
  }
  return v.get<double>();
}

json cuda_graph_flag(Validator& val, const json& v, const std::string& path, const std::string& device) {
  if (!v.is_boolean()) {
    val.expected(path, "true or false", v);
    return nullptr;
  }
  if (v.get<bool>() && device == "cpu") {
    val.expected(path, "false (CUDA graphs need device \"cuda\" or \"auto\"; device is \"cpu\")", v);
    return nullptr;
  }
  return v;
}

json instrumentation_value(Validator& val, const json& v, const std::string& path, const std::string&) {
  const auto& levels = instrumentation_levels();
  if (!v.is_string() || std::find(levels.begin(), levels.end(), v.get<std::string>()) == levels.end()) {
    val.expected(path, "one of " + join(levels), v);
    return nullptr;
  }
  return v;
}

json dtype_value(Validator& val, const json& v, const std::string& path, const std::string&) {
  if (v.is_string()) {
    try {
      return std::string(dtype_name(dtype_from_name(v.get<std::string>())));
    } catch (const InputError&) {
    }
  }
  val.expected(path, "one of f32, bf16, f16", v);
  return nullptr;
}

// A row of the backend table (reference_engine/comm/backends.h) that runs on the device.
json allreduce_backend(Validator& val, const json& v, const std::string& path, const std::string& device) {
  const BackendInfo* backend = v.is_string() ? find_backend(v.get<std::string>()) : nullptr;
  if (backend == nullptr) {
    val.expected(path, "an allreduce backend (one of " + backend_list() + ")", v);
    return nullptr;
  }
  if (device == "cpu" && backend->runs_on != BackendDevice::host) {
    val.expected(path, "a CPU backend (" + backend_list(BackendDevice::host) + ") because device is \"cpu\"", v);
    return nullptr;
  }
  if (device == "cuda" && backend->runs_on != BackendDevice::gpu) {
    val.expected(path, "a GPU backend (" + backend_list(BackendDevice::gpu) + ") because device is \"cuda\"", v);
    return nullptr;
  }
  return v;
}

// A model's quantization: bf16, or int4 (Kimi-K2.5's: the routed experts INT4, everything
// else bf16). parse_quantization also reads the planner's fp8 and f32, which are no model
// tpbench's engines run: refused here by name.
json quant_value(Validator& val, const json& v, const std::string& path, const std::string&) {
  if (v.is_string()) {
    try {
      const Quantization q = parse_quantization(v.get<std::string>(), path);
      if (q == Quantization::bf16 || q == Quantization::int4) return std::string(quantization_name(q));
    } catch (const InputError&) {
    }
  }
  val.expected(path,
               "\"bf16\" or \"int4\" (int4: the routed experts INT4, everything else bf16; fp8 and f32 are "
               "the planner's formats, not a model's)",
               v);
  return nullptr;
}

// TP must divide the model's heads and experts: what a value is expected to be instead, or
// "" when it does.
std::string tp_divides_model(const ModelConfig& model, const ModelSpec&, const json& tp) {
  try {
    model.validate_tp(static_cast<int>(tp.get<long long>()));
    return "";
  } catch (const InputError& e) {
    return std::string("a TP size that divides the model (") + e.what() + ")";
  }
}

// A checkpoint's own quantization wins: a folder of weights is loaded as its config says
// (quantization_config, read into ModelConfig::quant), so a scenario may name that one only.
// Synthetic weights are made in whichever the case asks for.
std::string quant_fits_checkpoint(const ModelConfig& model, const ModelSpec& spec, const json& quant) {
  const std::string own = quantization_name(model.quant);
  if (spec.weights == "synthetic" || quant.get<std::string>() == own) return "";
  return "\"" + own + "\" (the checkpoint " + spec.weights + " holds " + own +
         " weights, as its config says; a checkpoint's own quantization wins: write [\"" + own +
         "\"] or leave quant out)";
}

}  // namespace

const std::vector<AxisRule>& axis_table() {
  static const std::vector<AxisRule> rows = {
      // name             workload     parse                  default  on cuda  model condition        case field
      {"tp",              "",          tp_size,               1,       nullptr, tp_divides_model,      case_field<&CaseParams::tp>},
      // No default: a case without it runs a checkpoint in its own quantization and synthetic
      // weights in bf16 (case_plan.h: case_model_config), and the ids of every scenario
      // written before the axis stay as they were.
      {"quant",           "engine",    quant_value,           nullptr, nullptr, quant_fits_checkpoint, case_field<&CaseParams::quant>},
      {"mem_fraction",    "",          fraction,              0.9,     nullptr, nullptr,               case_field<&CaseParams::mem_fraction>},
      {"cuda_graph",      "",          cuda_graph_flag,       false,   nullptr, nullptr,               case_field<&CaseParams::cuda_graph>},
      {"instrumentation", "",          instrumentation_value, "off",   nullptr, nullptr,               case_field<&CaseParams::instrumentation>},
      {"batch_size",      "engine",    positive_int,          1,       nullptr, nullptr,               case_field<&CaseParams::batch_size>},
      {"seq_len",         "engine",    positive_int,          16,      nullptr, nullptr,               case_field<&CaseParams::seq_len>},
      {"dtype",           "allreduce", dtype_value,           "bf16",  nullptr, nullptr,               case_field<&CaseParams::dtype>},
      {"message_bytes",   "allreduce", positive_int,          65536,   nullptr, nullptr,               case_field<&CaseParams::message_bytes>},
      {"allreduce",       "",          allreduce_backend,     "shm",   "nccl",  nullptr,               case_field<&CaseParams::allreduce>},
  };
  return rows;
}

const AxisRule& axis_rule(const std::string& name) {
  for (const auto& rule : axis_table())
    if (rule.name == name) return rule;
  TPB_FAIL("no row for axis " << name << " in the axis table");
}

json default_axis_value(const AxisRule& rule, const std::string& device) {
  return device == "cuda" && !rule.default_on_cuda.is_null() ? rule.default_on_cuda : rule.default_value;
}

// The names of the rows `keep` selects, in table order.
template <class Keep>
std::vector<std::string> axis_names_where(Keep keep) {
  std::vector<std::string> names;
  for (const auto& rule : axis_table())
    if (keep(rule)) names.push_back(rule.name);
  return names;
}

}  // namespace scenario_parse

using namespace scenario_parse;

const std::vector<std::string>& common_axis_names() {
  static const std::vector<std::string> names = axis_names_where([](const AxisRule& r) { return r.workload.empty(); });
  return names;
}

const std::vector<std::string>& workload_axis_names(const std::string& workload) {
  const auto of = [](const std::string& w) {
    return axis_names_where([&w](const AxisRule& r) { return r.workload.empty() || r.workload == w; });
  };
  static const std::vector<std::string> engine = of("engine"), allreduce = of("allreduce"), none;
  if (workload == "engine") return engine;
  if (workload == "allreduce") return allreduce;
  return none;
}

}  // namespace tpb
