// Scenario parsing and validation. A Validator walks the document once, collecting every
// problem with its JSON path; nothing throws until the whole file has been seen.
#include "suite/scenario/scenario.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>

#include "reference_engine/comm/backends.h"
#include "reference_engine/config/data_home.h"
#include "reference_engine/config/json_text.h"
#include "reference_engine/config/model_config.h"
#include "reference_engine/memory/attention_widths.h"
#include "reference_engine/memory/weight_bytes.h"
#include "suite/records/baseline.h"
#include "suite/records/build_info.h"
#include "suite/checks/check.h"
#include "suite/records/safe_paths.h"
#include "suite/scenario/axes.h"
#include "tpb/did_you_mean.h"
#include "suite/scenario/scenario_validator.h"
#include "tpb/dtype.h"
#include "tpb/message_text.h"
#include "tpb/kernels/device.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace tpb {

using namespace scenario_parse;

namespace {

// " (looked for <resolved>)" for a path the scenario names, where the value is short enough to
// quote: a longer one is quoted, cut, as the value it is, and its resolved path would repeat it.
std::string looked_for(const std::string& resolved, const json& written) {
  if (!written.is_string() || written.get<std::string>().size() > kMessageValueChars) return "";
  // Built with append: `"literal" + std::string&&` trips a false -Wrestrict in g++ 12 at -O3.
  return std::string(" (looked for ").append(cut_for_message(resolved, kMessagePathChars)).append(")");
}

// The model presets folder: ModelConfig's models_dir() when it exists, else models/ beside
// the scenario folders this binary searches (which include the source tree it was built from).
std::string presets_dir() {
  std::error_code ec;
  if (fs::is_directory(models_dir(), ec)) return models_dir();
  for (const auto& dir : scenario_search_dirs())
    if (fs::is_directory(fs::path(dir) / "models", ec)) return (fs::path(dir) / "models").string();
  return models_dir();
}

std::string scenario_dir(const std::string& source) {
  fs::path p = fs::absolute(fs::path(source)).parent_path();
  return p.string();
}

std::string resolve_relative(const std::string& base_dir, const std::string& p) {
  fs::path path(p);
  if (path.is_absolute()) return path.lexically_normal().string();
  return (fs::path(base_dir) / path).lexically_normal().string();
}

// The model section: which config, which weights; then TP must divide the model.
std::optional<ModelSpec> parse_model(Validator& val, const json& m, const std::string& source,
                                     std::optional<ModelConfig>& config_out) {
  const std::string path = "$.model";
  if (!m.is_object()) {
    val.expected(path, "an object with \"preset\" or \"path\"", m);
    return std::nullopt;
  }
  val.only_keys(m, path, {"preset", "path", "overrides", "weights", "seed", "layers"});
  ModelSpec spec;
  const bool has_preset = m.contains("preset"), has_path = m.contains("path");
  if (has_preset == has_path) {
    val.problem(path, std::string("expected exactly one of \"preset\" and \"path\", got ") +
                          (has_preset ? "both" : "neither"));
    return std::nullopt;
  }
  bool ok = true;
  if (has_preset) {
    const json& p = m["preset"];
    if (!p.is_string() || !safe_name_problem(p.get<std::string>()).empty()) {
      val.expected(path + ".preset", "a preset name (a file in scenarios/models/: letters, digits, '.', '_', '-')", p);
      ok = false;
    } else {
      spec.preset = p.get<std::string>();
      const std::string dir = presets_dir();
      const fs::path file = fs::path(dir) / (spec.preset + ".json");
      // error_code overloads here and below: a path the OS refuses (ENAMETOOLONG, found by
      // fuzz/scenario_fuzzer with a 300-byte "weights") is a missing file, not a filesystem_error.
      std::error_code ec;
      if (!fs::is_regular_file(file, ec)) {
        std::vector<std::string> known;
        if (fs::is_directory(dir, ec))
          for (const auto& e : fs::directory_iterator(dir))
            if (e.path().extension() == ".json") known.push_back(e.path().stem().string());
        std::sort(known.begin(), known.end());
        val.expected(path + ".preset", "a preset in " + dir + " (" + (known.empty() ? "none" : join(known)) + ")", p);
        ok = false;
      } else {
        spec.config_path = fs::absolute(file).lexically_normal().string();
      }
    }
  } else {
    const json& p = m["path"];
    if (!p.is_string() || p.get<std::string>().empty()) {
      val.expected(path + ".path", "a path to an HF config.json or its folder", p);
      ok = false;
    } else {
      spec.path = p.get<std::string>();
      fs::path file = resolve_relative(scenario_dir(source), spec.path);
      std::error_code ec;
      if (fs::is_directory(file, ec)) file /= "config.json";
      if (!fs::is_regular_file(file, ec)) {
        val.expected(path + ".path", std::string("an existing config.json or folder holding one").append(looked_for(file.string(), p)), p);
        ok = false;
      } else {
        spec.config_path = file.string();
      }
    }
  }
  if (m.contains("overrides")) {
    if (!m["overrides"].is_object()) {
      val.expected(path + ".overrides", "an object of config fields", m["overrides"]);
      ok = false;
    } else {
      spec.overrides = m["overrides"];
    }
  }
  if (m.contains("weights")) {
    const json& w = m["weights"];
    if (!w.is_string() || w.get<std::string>().empty()) {
      val.expected(path + ".weights", "\"synthetic\" or a checkpoint folder", w);
    } else if (w.get<std::string>() == "synthetic") {
      spec.weights = "synthetic";
    } else {
      const std::string dir = resolve_relative(scenario_dir(source), w.get<std::string>());
      std::error_code ec;
      if (!fs::is_directory(dir, ec))
        val.expected(path + ".weights", std::string("\"synthetic\" or an existing checkpoint folder").append(looked_for(dir, w)), w);
      else
        spec.weights = dir;
    }
  }
  if (m.contains("seed")) {
    const json& s = m["seed"];
    if (!s.is_number_unsigned() && !(s.is_number_integer() && s.get<long long>() >= 0))
      val.expected(path + ".seed", "a non-negative integer", s);
    else
      spec.seed = s.get<std::uint64_t>();
  }
  // "layers": how many of the model's layers a case runs: num_hidden_layers overridden, named
  // and bounded by the config. A key of the model rather than a sweep axis because it changes
  // the model itself, as overrides do: the model section is read and its config validated
  // once (the override rules, the GPU kernels' limits), then every axis value is checked
  // against that one config; an axis of layer counts would be a model per value, which none
  // of those checks would see, and an engine per value in every worker. The cases carry it
  // in their params (sweep.cpp) so that records say it, and only when written.
  std::optional<json> layers;
  if (m.contains("layers")) {
    const json& l = m["layers"];
    if (spec.overrides.is_object() && spec.overrides.contains("num_hidden_layers"))
      val.problem(path + ".layers", "set together with $.model.overrides.num_hidden_layers, which overrides the same "
                                    "count; expected one of the two");
    else if (l == "all" || (is_int(l) && l.get<long long>() >= 1))
      layers = l;
    else
      val.expected(path + ".layers", "a positive integer (at most the config's num_hidden_layers) or \"all\"", l);
  }
  if (!ok) return std::nullopt;
  // The config itself: its own errors name the config file; overrides name their path.
  try {
    ModelConfig config = load_model_config(spec.config_path);
    config.name = spec.preset.empty() ? spec.path : spec.preset;
    apply_overrides(config, spec.overrides, source, path + ".overrides");
    config.validate();
    spec.num_attention_heads = config.num_attention_heads;
    if (layers) {
      const std::int64_t own = config.num_hidden_layers;
      const std::int64_t n = *layers == "all" ? own : layers->get<std::int64_t>();
      if (n > own) {
        val.expected(path + ".layers",
                     "a positive integer at most " + std::to_string(own) + " (the config's num_hidden_layers) or \"all\"",
                     *layers);
      } else {
        config.num_hidden_layers = n;
        try {
          config.validate();
          spec.layers = n;
        } catch (const InputError& e) {
          val.expected(path + ".layers", std::string("a layer count the model allows (") + e.what() + ")", *layers);
        }
      }
    }
    config_out = std::move(config);
  } catch (const InputError& e) {
    val.problem(path + (has_preset ? ".preset" : ".path"), std::string("invalid model: ") + e.what());
  }
  return spec;
}

}  // namespace

ScenarioError::ScenarioError(std::vector<std::string> problems)
    : InputError(join_lines(problems)), problems_(std::move(problems)) {}

namespace {

// One parse_scenario: the document, the Validator, the Scenario being filled, and the parse's
// steps over them in the order parse() takes them (each section of the file, then the rules
// across sections).
class ScenarioParser {
 public:
  ScenarioParser(const json& doc, const std::string& source, const ScenarioEnv& env)
      : doc(doc), source(source), env(env), val(source) {}
  Scenario parse();

 private:
  void read_identity();         // schema, name, description, nonfinite
  void read_workload();         // workload, device, placement, mode
  void read_model();            // the model section, and what the GPU kernels cannot take
  void read_sweep();            // every axis of the workload, written or defaulted
  void check_message_sizes();   // message sizes that hold whole elements of every dtype
  void read_exclude();          // the exclude rules
  void read_measure();          // the measure counts and timeout
  void read_checks();           // the checks named
  void read_baseline();         // the baseline tolerances
  void read_control();          // the control case
  void read_comm();             // the GPU engine's communicator options

  const json& doc;
  const std::string& source;
  const ScenarioEnv& env;
  Validator val;
  Scenario s;
  bool workload_ok = false;                  // $.workload names a workload
  std::optional<ModelConfig> model_config;   // the model's config, when it loaded
  std::vector<std::string> axis_names;       // the workload's axes, in table order
  json sweep = json::object();               // $.sweep as written (an object), else {}
};

Scenario ScenarioParser::parse() {
  s.source = source;
  s.document = doc;
  if (!doc.is_object()) {
    val.expected("$", "a JSON object (a tpbench scenario)", doc);
    throw ScenarioError(val.problems());
  }
  val.only_keys(doc, "$", {"schema", "name", "description", "workload", "model", "device", "placement", "mode",
                           "sweep", "exclude", "measure", "checks", "baseline", "control", "comm", "nonfinite"});

  read_identity();
  read_workload();
  read_model();
  read_sweep();
  check_message_sizes();
  read_exclude();
  read_measure();
  read_checks();
  read_baseline();
  read_control();
  read_comm();

  if (!val.problems().empty()) throw ScenarioError(val.problems());
  return s;
}

void ScenarioParser::read_identity() {
  if (!doc.contains("schema")) {
    val.problem("$.schema", "missing; expected 1");
  } else if (!is_int(doc["schema"]) || doc["schema"].get<long long>() != 1) {
    val.expected("$.schema", "1 (the only schema this tpbench reads)", doc["schema"]);
  }
  // The name becomes file names (baselines/<hw>/<name>.jsonl): a safe set of characters only.
  const std::string name_rule = "a name of letters, digits, '.', '_' and '-', not starting with '.', at most " +
                                std::to_string(kMaxSafeNameLength) + " characters (it names files)";
  if (doc.contains("name")) {
    if (!doc["name"].is_string() || !safe_name_problem(doc["name"].get<std::string>()).empty())
      val.expected("$.name", name_rule, doc["name"]);
    else
      s.name = doc["name"].get<std::string>();
  } else {
    s.name = fs::path(source).stem().string();
    if (!safe_name_problem(s.name).empty())
      val.problem("$.name", "missing, and the file name '" + s.name + "' cannot stand for it (" +
                                safe_name_problem(s.name) + "): give \"name\", " + name_rule);
  }
  if (doc.contains("description")) {
    if (!doc["description"].is_string())
      val.expected("$.description", "a string", doc["description"]);
    else
      s.description = doc["description"].get<std::string>();
  }

  if (doc.contains("nonfinite")) {
    const json& v = doc["nonfinite"];
    if (!v.is_string() || (v != "fail" && v != "expected"))
      val.expected("$.nonfinite",
                   "\"fail\" (the default: NaN or Inf in an output fails the case) or \"expected\" (every case must "
                   "produce some)",
                   v);
    else
      s.nonfinite = v.get<std::string>();
  }
}

void ScenarioParser::read_workload() {
  if (!doc.contains("workload")) {
    val.problem("$.workload", "missing; expected \"engine\" or \"allreduce\"");
  } else if (!doc["workload"].is_string() ||
             (doc["workload"] != "engine" && doc["workload"] != "allreduce")) {
    val.expected("$.workload", "\"engine\" or \"allreduce\"", doc["workload"]);
  } else {
    s.workload = doc["workload"].get<std::string>();
    workload_ok = true;
  }
  s.device_requested = "auto";
  if (doc.contains("device")) {
    const json& d = doc["device"];
    if (!d.is_string() || (d != "cpu" && d != "cuda" && d != "auto"))
      val.expected("$.device", "\"cpu\", \"cuda\" or \"auto\"", d);
    else
      s.device_requested = d.get<std::string>();
  }
  if (s.device_requested == "auto") {
    const bool cuda = env.cuda_available ? *env.cuda_available
                                         : (build_info().have_cuda && !visible_gpus().empty());
    s.device = cuda ? "cuda" : "cpu";
  } else {
    s.device = s.device_requested;
  }
  if (doc.contains("placement")) {
    const json& p = doc["placement"];
    if (!p.is_string() || (p != "exclusive" && p != "shared"))
      val.expected("$.placement", "\"exclusive\" (one rank per GPU) or \"shared\" (ranks packed onto the visible GPUs)", p);
    else if (s.device_requested == "cpu" && p == "shared")
      val.problem("$.placement", "\"shared\" places GPU ranks; device is \"cpu\"");
    else
      s.placement = parse_placement(p.get<std::string>(), "$.placement");
  }
  if (doc.contains("mode")) {
    const json& m = doc["mode"];
    if (workload_ok && s.workload != "engine")
      val.problem("$.mode", "applies to workload \"engine\" only (workload is \"" + s.workload + "\")");
    else {
      // One mode, or both: the default scenario runs decode and prefill in one sweep.
      const json modes = m.is_array() ? m : json::array({m});
      auto is_mode = [](const json& v) { return v.is_string() && (v == "prefill" || v == "decode"); };
      if (modes.empty() || modes.size() > 2 || !std::all_of(modes.begin(), modes.end(), is_mode) ||
          (modes.size() == 2 && modes[0] == modes[1]))
        val.expected("$.mode", "\"prefill\", \"decode\" or a list of both", m);
      else
        s.modes = modes.get<std::vector<std::string>>();
    }
  }
}

void ScenarioParser::read_model() {
  if (doc.contains("model")) {
    s.model = parse_model(val, doc["model"], source, model_config);
    if (model_config && s.device == "cuda") {
      // What the GPU engine's kernels cannot take is refused here, not on the GPU mid-run.
      try {
        check_gpu_attention_widths(*model_config, "the model");
      } catch (const InputError& e) {
        val.problem(std::string("$.model.") + (doc["model"].contains("preset") ? "preset" : "path"), e.what());
      }
    }
    if (workload_ok && s.workload != "engine" && doc["model"].is_object() && doc["model"].contains("layers")) {
      val.problem("$.model.layers", "applies to workload \"engine\" only (workload is \"" + s.workload + "\")");
      if (s.model) s.model->layers.reset();
    }
  } else if (workload_ok && s.workload == "engine") {
    val.problem("$.model", "missing; the engine workload needs {\"preset\": NAME} or {\"path\": DIR}");
  }
}

void ScenarioParser::read_sweep() {
  axis_names = workload_axis_names(s.workload);
  if (doc.contains("sweep")) {
    if (!doc["sweep"].is_object()) {
      val.expected("$.sweep", "an object: axis -> [values]", doc["sweep"]);
    } else {
      sweep = doc["sweep"];
      if (workload_ok) {
        for (const auto& [key, value] : sweep.items()) {
          if (std::find(axis_names.begin(), axis_names.end(), key) != axis_names.end()) continue;
          const auto& other = workload_axis_names(s.workload == "engine" ? "allreduce" : "engine");
          if (std::find(other.begin(), other.end(), key) != other.end())
            val.problem("$.sweep." + key, "not an axis of workload \"" + s.workload + "\"; expected one of " + join(axis_names));
          else
            val.problem("$.sweep." + key, "unknown axis; expected one of " + join(axis_names));
        }
      }
    }
  }
  for (const auto& axis : axis_names) {
    const AxisRule& rule = axis_rule(axis);
    Axis a{axis, {}};
    const std::string path = "$.sweep." + axis;
    if (!sweep.contains(axis)) {
      if (rule.default_value.is_null()) continue;  // no default: left out of every case
      a.values.push_back(default_axis_value(rule, s.device));
      a.written = false;
    } else if (!sweep[axis].is_array()) {
      val.expected(path, "a list of values", sweep[axis]);
    } else if (sweep[axis].empty()) {
      val.expected(path, "a non-empty list", sweep[axis]);
    } else {
      for (std::size_t i = 0; i < sweep[axis].size(); ++i) {
        const std::string ipath = path + "[" + std::to_string(i) + "]";
        json v = rule.parse(val, sweep[axis][i], ipath, s.device_requested);
        if (v.is_null()) continue;
        if (std::find(a.values.begin(), a.values.end(), v) != a.values.end()) {
          val.expected(ipath, "a value not already listed", sweep[axis][i]);
          continue;
        }
        if (rule.fits_model && model_config && s.model) {
          if (const std::string expected = rule.fits_model(*model_config, *s.model, v); !expected.empty()) {
            val.expected(ipath, expected, sweep[axis][i]);
            continue;
          }
        }
        a.values.push_back(v);
      }
    }
    s.axes.push_back(std::move(a));
  }
}

void ScenarioParser::check_message_sizes() {
  // Cross-axis: every message size must hold a whole number of elements of every dtype.
  if (workload_ok && s.workload == "allreduce") {
    const Axis* bytes_axis = nullptr;
    const Axis* dtype_axis = nullptr;
    for (const auto& a : s.axes) {
      if (a.name == "message_bytes") bytes_axis = &a;
      if (a.name == "dtype") dtype_axis = &a;
    }
    if (bytes_axis && dtype_axis) {
      for (std::size_t i = 0; i < bytes_axis->values.size(); ++i) {
        const long long bytes = bytes_axis->values[i].get<long long>();
        for (const auto& d : dtype_axis->values) {
          const auto elem = static_cast<long long>(dtype_size(dtype_from_name(d.get<std::string>())));
          if (bytes % elem != 0) {
            val.expected(sweep.contains("message_bytes") ? "$.sweep.message_bytes[" + std::to_string(i) + "]" : "$.sweep.message_bytes",
                         "a multiple of " + std::to_string(elem) + " bytes (the size of " + d.get<std::string>() + ")",
                         bytes_axis->values[i]);
            break;
          }
        }
      }
    }
  }
}

void ScenarioParser::read_exclude() {
  // exclude: each rule names axes and the value (or values) it removes.
  if (doc.contains("exclude")) {
    const json& ex = doc["exclude"];
    if (!ex.is_array()) {
      val.expected("$.exclude", "a list of rules ({axis: value or [values]})", ex);
    } else {
      for (std::size_t i = 0; i < ex.size(); ++i) {
        const std::string rpath = "$.exclude[" + std::to_string(i) + "]";
        if (!ex[i].is_object() || ex[i].empty()) {
          val.expected(rpath, "a non-empty object {axis: value or [values]}", ex[i]);
          continue;
        }
        json rule = json::object();
        bool ok = true;
        for (const auto& [key, value] : ex[i].items()) {
          if (key == "mode" && workload_ok && s.workload == "engine") {
            // The engine's modes are not a sweep axis, but a rule may drop one of them for some
            // values of the axes (e.g. custom backends in prefill, whose messages exceed the
            // custom buffer, so every call would run on NCCL).
            json values = value.is_array() ? value : json::array({value});
            const bool modes_ok = !values.empty() && std::all_of(values.begin(), values.end(), [](const json& v) {
              return v.is_string() && (v == "prefill" || v == "decode");
            });
            if (!modes_ok) {
              val.expected(rpath + ".mode", "\"prefill\", \"decode\" or a list of them", value);
              ok = false;
            }
            rule[key] = values;
            continue;
          }
          if (std::find(axis_names.begin(), axis_names.end(), key) == axis_names.end()) {
            if (workload_ok) val.problem(rpath + "." + key, "unknown axis; expected one of " + join(axis_names));
            ok = false;
            continue;
          }
          json values = value.is_array() ? value : json::array({value});
          json normalised = json::array();
          for (std::size_t k = 0; k < values.size(); ++k) {
            const std::string vpath = value.is_array() ? rpath + "." + key + "[" + std::to_string(k) + "]" : rpath + "." + key;
            json v = axis_rule(key).parse(val, values[k], vpath, "auto");
            if (v.is_null()) ok = false;
            normalised.push_back(v);
          }
          rule[key] = normalised;
        }
        if (ok) s.exclude.push_back(rule);
      }
    }
  }
}

void ScenarioParser::read_measure() {
  if (doc.contains("measure")) {
    const json& m = doc["measure"];
    if (!m.is_object()) {
      val.expected("$.measure", "an object", m);
    } else {
      val.only_keys(m, "$.measure", {"warmup", "iterations", "repetitions", "min_duration_s", "timeout_s"});
      int_field(val, m, "warmup", "$.measure", 0, s.measure.warmup);
      int_field(val, m, "iterations", "$.measure", 1, s.measure.iterations);
      int_field(val, m, "repetitions", "$.measure", 1, s.measure.repetitions);
      // Accepted and ignored before (3 s asked, 1 ms run): the ranks would have to agree on a
      // sample count, which no workload does yet. Refused until it is honoured.
      if (m.contains("min_duration_s"))
        val.problem("$.measure.min_duration_s", "not supported yet (every rank must run the same number of steps); "
                                                "set iterations and repetitions instead");
      // A case needs time to start its ranks: a timeout under 0.1 s (5e-324 was accepted) fails every case.
      number_field(val, m, "timeout_s", "$.measure", 0.1, false, 86400, false, s.measure.timeout_s);
    }
  }
}

void ScenarioParser::read_checks() {
  if (doc.contains("checks")) {
    const json& c = doc["checks"];
    if (!c.is_array()) {
      val.expected("$.checks", "a list of check names", c);
    } else {
      const auto& known = known_check_names();
      for (std::size_t i = 0; i < c.size(); ++i) {
        const std::string cpath = "$.checks[" + std::to_string(i) + "]";
        if (!c[i].is_string() || std::find(known.begin(), known.end(), c[i].get<std::string>()) == known.end()) {
          val.expected(cpath, "a check name (one of " + join(known) + ")", c[i]);
        } else if (std::find(s.checks.begin(), s.checks.end(), c[i].get<std::string>()) != s.checks.end()) {
          val.expected(cpath, "a check not already listed", c[i]);
        } else if (c[i].get<std::string>() == "matches_reference" && s.workload == "engine") {
          // It compares an allreduce's output with the serial sum: an engine case has none, and
          // the run would fail every case instead of saying so here.
          val.expected(cpath, "a check that applies to the engine workload (matches_reference checks the "
                              "allreduce workload's output against the serial sum)", c[i]);
        } else {
          s.checks.push_back(c[i].get<std::string>());
        }
      }
    }
  }
}

void ScenarioParser::read_baseline() {
  if (doc.contains("baseline")) {
    const json& b = doc["baseline"];
    if (!b.is_object()) {
      val.expected("$.baseline", "an object of tolerances", b);
    } else {
      val.only_keys(b, "$.baseline",
                    {"latency", "latency_rel_tol", "memory_rel_tol", "kv_tokens_rel_tol", "alpha", "min_repetitions",
                     "control_ceiling"});
      double ignored = 0;
      number_field(val, b, "latency_rel_tol", "$.baseline", 0, false, 10, false, ignored);  // 1000 %: beyond it nothing is judged
      number_field(val, b, "memory_rel_tol", "$.baseline", 0, false, 10, false, ignored);  // 1000 %: beyond it nothing is judged
      number_field(val, b, "kv_tokens_rel_tol", "$.baseline", 0, false, 10, false, ignored);  // 1000 %: beyond it nothing is judged
      number_field(val, b, "alpha", "$.baseline", 0, true, 1, true, ignored);
      number_field(val, b, "control_ceiling", "$.baseline", 1, true, 1e6, false, ignored);  // > 1: a ratio of the control
      int min_reps = BaselineTolerances{}.min_repetitions;
      int_field(val, b, "min_repetitions", "$.baseline", 2, min_reps);
      bool informational = false;
      if (b.contains("latency")) {
        if (b["latency"] == "informational") informational = true;
        else if (b["latency"] != "judged") {
          val.expected("$.baseline.latency", "\"judged\" (the default) or \"informational\"", b["latency"]);
          informational = true;  // unknown intent: the one problem above, not a second below
        }
      }
      // Judged latency needs the test's sample count on each side: with fewer repetitions
      // every verdict would be insufficient-data, a slowdown of any size included.
      if (!informational && s.measure.repetitions < min_reps)
        val.problem("$.measure.repetitions",
                    std::to_string(s.measure.repetitions) + " repetitions cannot judge latency against a baseline (" +
                        "the Mann-Whitney test needs " + std::to_string(min_reps) +
                        " per side, $.baseline.min_repetitions); raise it to " + std::to_string(min_reps) +
                        " or declare \"baseline\": {\"latency\": \"informational\"}");
      s.baseline = b;
    }
  }
}

void ScenarioParser::read_control() {
  // control: a case of the sweep's space (axes not named take their first value).
  if (doc.contains("control") && !doc["control"].is_null()) {
    const json& c = doc["control"];
    if (!c.is_object() || c.empty()) {
      // {} named no case: it silently became the sweep's first, which nobody chose.
      val.expected("$.control", "an object {axis: value} naming at least one axis", c);
    } else {
      json control = json::object();
      bool ok = true;
      for (const auto& [key, value] : c.items()) {
        if (std::find(axis_names.begin(), axis_names.end(), key) == axis_names.end()) {
          if (workload_ok) val.problem("$.control." + key, "unknown axis; expected one of " + join(axis_names));
          ok = false;
          continue;
        }
        const AxisRule& rule = axis_rule(key);
        json v = rule.parse(val, value, "$.control." + key, s.device_requested);
        if (v.is_null()) {
          ok = false;
          continue;
        }
        if (rule.fits_model && model_config && s.model) {
          if (const std::string expected = rule.fits_model(*model_config, *s.model, v); !expected.empty()) {
            val.expected("$.control." + key, expected, value);
            ok = false;
            continue;
          }
        }
        control[key] = v;
      }
      if (ok) {
        for (const auto& a : s.axes)
          if (!control.contains(a.name) && !a.values.empty()) control[a.name] = a.values.front();
        s.control = control;
      }
    }
  }
}

void ScenarioParser::read_comm() {
  // comm: the GPU communicator's options (the engine's; the allreduce workload's but its buffer
  // size, which that workload's comm_max_bytes axis sets).
  if (doc.contains("comm")) {
    const json& c = doc["comm"];
    if (workload_ok && s.workload != "engine" && s.workload != "allreduce") {
      val.problem("$.comm", "applies to workloads \"engine\" and \"allreduce\" only (workload is \"" + s.workload + "\")");
    } else if (workload_ok && s.workload == "allreduce" && c.is_object() && c.contains("custom_max_bytes")) {
      val.problem("$.comm.custom_max_bytes", "applies to workload \"engine\"; the allreduce workload's comm_max_bytes "
                                             "axis sizes its buffer");
    } else if (s.device_requested == "cpu") {
      val.problem("$.comm", "sets the GPU engine's communicator; device is \"cpu\"");
    } else if (!c.is_object()) {
      val.expected("$.comm", "an object {\"custom_max_bytes\": N, \"custom_on_pcie\": B, \"custom_timeout_s\": S}", c);
    } else {
      val.only_keys(c, "$.comm", {"custom_max_bytes", "custom_on_pcie", "custom_timeout_s"});
      if (c.contains("custom_on_pcie")) {
        if (!c["custom_on_pcie"].is_boolean())
          val.expected("$.comm.custom_on_pcie", "true or false", c["custom_on_pcie"]);
        else
          s.comm.custom_on_pcie = c["custom_on_pcie"].get<bool>();
      }
      if (c.contains("custom_timeout_s")) {
        const json& t = c["custom_timeout_s"];
        if (!t.is_number() || !(t.get<double>() > 0) || t.get<double>() > 3600)
          val.expected("$.comm.custom_timeout_s", "a number of seconds in (0, 3600]", t);
        else
          s.comm.custom_timeout_s = t.get<double>();
      }
      if (c.contains("custom_max_bytes")) {
        const json& m = c["custom_max_bytes"];
        if (!is_int(m) || m.get<long long>() < 1 || m.get<long long>() > kScenarioCustomMaxBytesLimit)
          val.expected("$.comm.custom_max_bytes",
                       "an integer number of bytes in [1, " + std::to_string(kScenarioCustomMaxBytesLimit) + "] (2 GiB)", m);
        else
          s.comm.custom_max_bytes = m.get<std::int64_t>();
      }
    }
  }
}

}  // namespace

Scenario parse_scenario(const json& doc, const std::string& source, const ScenarioEnv& env) {
  // A qualification profile (its probes) is no scenario: one line that says what runs it,
  // not a list of the scenario keys it lacks.
  if (doc.is_object() && doc.contains("probes") && !doc.contains("workload"))
    throw ScenarioError({source + ": a qualification profile (it has probes), not a scenario: run it with `tpbench "
                                  "qualify " + source + "`"});
  return ScenarioParser(doc, source, env).parse();
}

Scenario load_scenario(const std::string& path, const ScenarioEnv& env) {
  std::ifstream in(path, std::ios::binary);
  if (!in.good()) throw ScenarioError({path + ": cannot open the scenario file"});
  const std::string text = read_bounded_json_text(in, path);
  return load_scenario_text(text, path, env);
}

Scenario load_scenario_text(const std::string& text, const std::string& source, const ScenarioEnv& env) {
  // Strict and bounded (json_text.h): syntax, nesting depth, duplicate keys, NUL, 1e400.
  JsonText doc = parse_json_text(text);
  if (!doc.problem.empty()) {
    const std::string where = doc.byte > 0 ? source + ":" + line_column(text, doc.byte) : source;
    throw ScenarioError({where + ": not valid JSON: " + doc.problem});
  }
  return parse_scenario(doc.value, source, env);
}

std::vector<std::string> scenario_search_dirs() {
  std::vector<std::string> dirs;
  auto add = [&](const fs::path& p) {
    std::error_code ec;
    if (!fs::is_directory(p, ec)) return;
    const std::string s = fs::absolute(p).lexically_normal().string();
    if (std::find(dirs.begin(), dirs.end(), s) == dirs.end()) dirs.push_back(s);
  };
  add(fs::current_path() / "scenarios");
  for (const auto& root : data_roots()) add(fs::path(root) / "scenarios");  // $TPB_HOME, install prefix, source tree
  return dirs;
}

std::string resolve_in_scenario_dirs(const std::string& name_or_path, const std::string& subfolder,
                                     const std::string& what) {
  std::error_code ec;
  if (fs::is_regular_file(name_or_path, ec)) return name_or_path;
  const std::string file = name_or_path.size() > 5 && name_or_path.ends_with(".json") ? name_or_path : name_or_path + ".json";
  const fs::path relative = subfolder.empty() ? fs::path(file) : fs::path(subfolder) / file;
  std::vector<std::string> looked;
  for (const auto& dir : scenario_search_dirs()) {
    const fs::path p = fs::path(dir) / relative;
    if (fs::is_regular_file(p, ec)) return p.string();
    looked.push_back(p.string());
  }
  // A name longer than a path a message quotes is no scenario's name: where it was looked for would
  // only repeat it.
  TPB_INPUT_CHECK(name_or_path.size() <= kMessagePathChars,
                  what << " '" << cut_for_message(name_or_path, kMessagePathChars) << "': no such file");
  // A path (absolute, or ./x): as given, no scenarios/ folder searched for it.
  if (fs::path(name_or_path).is_absolute() || name_or_path.starts_with("./") || name_or_path.starts_with("../"))
    TPB_INPUT_FAIL(what << " '" << name_or_path << "': no such file");
  // The names a user could have meant: every scenario of the searched folders.
  std::vector<std::string> known;
  for (const auto& dir : scenario_search_dirs())
    for (const auto& e : fs::recursive_directory_iterator(dir, ec))
      if (e.path().extension() == ".json") {
        std::string name = fs::relative(e.path(), fs::path(dir) / subfolder, ec).replace_extension().generic_string();
        if (!name.empty() && !name.starts_with("..")) known.push_back(name);
      }
  const std::string stem = fs::path(relative).replace_extension().generic_string();
  const std::string asked = subfolder.empty() ? stem : fs::relative(fs::path(stem), fs::path(subfolder)).generic_string();
  TPB_INPUT_FAIL(what << " '" << name_or_path << "': no such file, and not found as scenarios/" << relative.string()
                      << did_you_mean(asked, known)
                      << (looked.empty() ? std::string(" (no scenarios/ folder in the working directory, $TPB_HOME, the install prefix or the source tree)")
                                         : " (looked in: " + join(looked) + ")"));
}

std::string resolve_scenario_path(const std::string& name_or_path) {
  return resolve_in_scenario_dirs(name_or_path, "", "scenario");
}

std::string resolve_qualify_profile_path(const std::string& name_or_path) {
  return resolve_in_scenario_dirs(name_or_path, "qualify", "qualification profile");
}

bool axis_written(const Scenario& s, const std::string& axis) {
  for (const Axis& a : s.axes)
    if (a.name == axis) return a.written;
  return false;
}

}  // namespace tpb
