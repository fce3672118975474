#include "suite/scenario/sweep.h"

#include <algorithm>
#include <set>

#include "reference_engine/comm/backends.h"
#include "reference_engine/comm/host_layout.h"
#include "suite/records/build_info.h"
#include "suite/checks/check.h"
#include "suite/measure/digest.h"
#include "tpb/fnv1a.h"
#include "tpb/kernels/device.h"

using nlohmann::json;

namespace tpb {

namespace {

std::string format_bytes(long long bytes) {
  if (bytes >= (1LL << 20) && bytes % (1LL << 20) == 0) return std::to_string(bytes >> 20) + "MiB";
  if (bytes >= 1024 && bytes % 1024 == 0) return std::to_string(bytes >> 10) + "KiB";
  return std::to_string(bytes) + "B";
}

const Axis* find_axis(const Scenario& s, const std::string& name) {
  for (const auto& a : s.axes)
    if (a.name == name) return &a;
  return nullptr;
}

bool axis_varies(const Scenario& s, const std::string& name) {
  const Axis* a = find_axis(s, name);
  return a && a->values.size() > 1;
}

// Built with append: `"literal" + std::string&&` trips a false -Wrestrict in g++ 12 at -O3.
std::string make_label(const Scenario& s, const json& p, const std::string& role) {
  std::string label;
  if (s.workload == "engine") {
    label.append(p["mode"].get<std::string>()).append(" tp").append(std::to_string(p["tp"].get<int>()));
    label.append(" b").append(std::to_string(p["batch_size"].get<long long>()));
    label.append(" s").append(std::to_string(p["seq_len"].get<long long>()));
    if (p.contains("layers")) label.append(" L").append(std::to_string(p["layers"].get<long long>()));
    if (p.contains("quant")) label.append(" ").append(p["quant"].get<std::string>());
  } else {
    label.append(s.workload).append(" tp").append(std::to_string(p["tp"].get<int>())).append(" ");
    label.append(format_bytes(p["message_bytes"].get<long long>())).append(" ").append(p["dtype"].get<std::string>());
  }
  if (axis_varies(s, "mem_fraction")) label.append(" mf").append(p["mem_fraction"].dump());
  if (axis_varies(s, "instrumentation")) label.append(" instr=").append(p["instrumentation"].get<std::string>());
  if (p["cuda_graph"].get<bool>()) label.append(" graph");
  label.append(" ").append(p["allreduce"].get<std::string>());
  if (role != "sweep") label.append(" [").append(role).append("]");
  return label;
}

bool rule_matches(const json& rule, const json& params) {
  for (const auto& [axis, values] : rule.items()) {
    const auto value = params.find(axis);
    if (value == params.end() || std::find(values.begin(), values.end(), *value) == values.end()) return false;
  }
  return true;
}

std::string skip_reason(const Scenario& s, const json& p, const MachineInfo& m) {
  const std::string backend = p["allreduce"].get<std::string>();
  const int tp = p["tp"].get<int>();
  if (s.device == "cuda" && !m.cuda)
    return build_info().have_cuda ? "device cuda: no GPU is visible" : "device cuda: this tpbench was built without CUDA";
  const BackendInfo* row = find_backend(backend);
  const bool host_backend = row != nullptr && row->runs_on == BackendDevice::host;
  if (s.device == "cpu" && !host_backend)
    return "backend " + backend + " needs GPUs; device resolved to cpu";
  if (s.device == "cuda" && host_backend)
    return "backend " + backend + " is a CPU backend; device resolved to cuda";
  if (s.device == "cpu" && p["cuda_graph"].get<bool>()) return "CUDA graphs need device cuda; device resolved to cpu";
  if (std::find(m.backends.begin(), m.backends.end(), backend) == m.backends.end()) {
    std::string avail;
    for (const auto& b : m.backends) avail += (avail.empty() ? "" : ", ") + b;
    return "backend " + backend + " is not compiled into this tpbench (available: " + (avail.empty() ? "none" : avail) + ")";
  }
  // MPI's world is the job an MPI launcher started; forked ranks are no MPI job.
  if (backend == "mpi" && m.launcher == LauncherKind::fork)
    return "backend mpi needs ranks started by MPI: run with --launcher mpirun (or srun in a Slurm allocation)";
  if (m.virtual_hosts >= 2) {
    HostLayout layout;
    for (int r = 0; r < tp; ++r) layout.host_of_rank.push_back(virtual_host_id(r, tp, m.virtual_hosts));
    const std::string refusal = backend_across_hosts(backend, layout).refusal;
    if (!refusal.empty()) return refusal;
  }
  if (s.device == "cuda" && m.launcher != LauncherKind::fork) {
    // A job's GPU ranks take the device of their local rank on their own host (one rank per
    // GPU): this host's GPU count says nothing about the others', and packing several ranks
    // onto one GPU needs per-rank settings that only the fork launcher gives.
    if (s.placement == Placement::shared)
      return std::string("shared placement packs the ranks onto this host's GPUs, which only --launcher fork does; --launcher ") +
             launcher_name(m.launcher) + " places one rank per GPU on each host";
    return "";
  }
  if (s.device == "cuda") return place_ranks(s.placement, tp, m.gpu_count).skip_reason;
  return "";
}

// The scenario's "comm" section as the case spec and the case id carry it.
json comm_json(const CommSpec& comm) {
  json j = json::object();
  if (comm.custom_max_bytes) j["custom_max_bytes"] = *comm.custom_max_bytes;
  if (comm.custom_on_pcie) j["custom_on_pcie"] = *comm.custom_on_pcie;
  if (comm.custom_timeout_s) j["custom_timeout_s"] = *comm.custom_timeout_s;
  return j;
}

}  // namespace

MachineInfo detect_machine() {
  MachineInfo m;
  m.gpu_count = build_info().have_cuda ? static_cast<int>(visible_gpus().size()) : 0;
  m.cuda = m.gpu_count > 0;
  m.backends = available_backends();
  return m;
}

json model_identity(const Scenario& s) {
  if (!s.model) return nullptr;
  // As written, so that the id does not depend on where the repository is checked out.
  const json& m = s.document.at("model");
  json id = {{"overrides", s.model->overrides}, {"seed", s.model->seed},
             {"weights", m.value("weights", std::string("synthetic"))}};
  if (!s.model->preset.empty())
    id["preset"] = s.model->preset;
  else
    id["path"] = s.model->path;
  return id;
}

std::string case_id(const Scenario& s, const json& params, const std::string& role) {
  json identity = {{"workload", s.workload}, {"model", model_identity(s)}, {"device", s.device},
                   {"params", params}, {"role", role}};
  if (s.device == "cuda" && s.placement == Placement::shared) identity["placement"] = "shared";
  // Only when written: every case of a scenario without it keeps the id it always had.
  if (s.comm.written()) identity["comm"] = comm_json(s.comm);
  return digest_hex(fnv1a64(identity.dump()));  // dump() of nlohmann objects is key-sorted
}

std::vector<Case> expand_cases(const Scenario& s, const MachineInfo& machine) {
  // The sweep's size before any of it is built (issue 37: 2 x 10^7 cases took 7 GB and ended
  // in bad_alloc): the axes' product times the engine modes, at most kMaxSweepCases.
  {
    std::uint64_t count = s.workload == "engine" ? std::max<std::uint64_t>(s.modes.size(), 1) : 1;
    std::string product = s.workload == "engine" && s.modes.size() > 1 ? std::to_string(s.modes.size()) + " modes" : "";
    bool over = false;
    for (const auto& axis : s.axes) {
      if (axis.values.size() < 2) continue;
      over = over || __builtin_mul_overflow(count, static_cast<std::uint64_t>(axis.values.size()), &count);
      product += (product.empty() ? "" : " x ") + axis.name + " " + std::to_string(axis.values.size());
    }
    if (over || count > kMaxSweepCases)
      throw ScenarioError({s.source + ": $.sweep: " + (over ? std::string("more than 2^64") : std::to_string(count)) +
                           " cases (" + product + "); expected at most " + std::to_string(kMaxSweepCases) +
                           " (tpbench's limit; split the sweep into several scenarios)"});
  }
  std::vector<json> combos = {json::object()};
  for (const auto& axis : s.axes) {
    std::vector<json> next;
    for (const auto& c : combos)
      for (const auto& v : axis.values) {
        json n = c;
        n[axis.name] = v;
        next.push_back(std::move(n));
      }
    combos = std::move(next);
  }
  const json model = model_identity(s);
  const std::string model_hash = digest_hex(fnv1a64(model.dump()));
  auto make = [&](json params, const std::string& role) {
    if (s.workload == "engine" && !params.contains("mode")) params["mode"] = s.modes.front();  // the control's
    // The model's layer count, only when the scenario writes it: ids without it stay as they were.
    if (s.workload == "engine" && s.model && s.model->layers) params["layers"] = *s.model->layers;
    Case c;
    c.params = params;
    c.role = role;
    c.tp = params["tp"].get<int>();
    c.id = case_id(s, params, role);
    c.label = make_label(s, params, role);
    c.group_key = s.workload + "/" + s.device + "/" + model_hash + "/tp" + std::to_string(c.tp);
    c.skip_reason = skip_reason(s, params, machine);
    if (s.device == "cuda") {
      c.placement = place_ranks(s.placement, c.tp, machine.gpu_count);
      c.group_key += std::string("/") + placement_name(s.placement);
    }
    return c;
  };
  const bool repeat = std::any_of(s.checks.begin(), s.checks.end(), [](const std::string& name) {
    const CheckInfo* check = find_check(name);
    return check != nullptr && check->needs_repeat;
  });
  std::vector<Case> cases;
  if (!s.control.is_null()) cases.push_back(make(s.control, "control-start"));
  // Engine modes innermost, in the order the scenario lists them: TP stays outermost, so a
  // worker group (and the engine it keeps) serves both modes of its cases.
  const std::vector<std::string> modes = s.workload == "engine" ? s.modes : std::vector<std::string>{""};
  for (const json& combo : combos) {
    for (const std::string& mode : modes) {
      json params = combo;
      if (!mode.empty()) params["mode"] = mode;
      if (std::any_of(s.exclude.begin(), s.exclude.end(), [&](const json& r) { return rule_matches(r, params); }))
        continue;
      cases.push_back(make(params, "sweep"));
      if (repeat) cases.push_back(make(params, "repeat"));
    }
  }
  if (cases.size() == (s.control.is_null() ? 0u : 1u))
    throw ScenarioError({s.source + ": $.exclude: the rules exclude every case of the sweep; expected at least one case left"});
  if (!s.control.is_null()) cases.push_back(make(s.control, "control-end"));
  std::set<std::string> ids;
  for (const auto& c : cases)
    if (!ids.insert(c.id).second) throw Error("case id collision for " + c.id + " (" + c.label + ")");
  return cases;
}

CaseSpec case_spec(const Scenario& s, const Case& c) {
  CaseSpec spec;
  spec.case_id = c.id;
  spec.label = c.label;
  spec.workload = s.workload;
  spec.device = s.device;
  spec.params = c.params;
  // A serving-style KV pool sized from mem_fraction only when the scenario sweeps mem_fraction;
  // otherwise the engine allocates exactly the case's cache (and does not take most of the
  // device from whatever else runs on it).
  spec.kv_pool = axis_written(s, "mem_fraction");
  if (s.model) spec.model = CaseSpec::Model{s.model->config_path, s.model->overrides, s.model->weights, s.model->seed};
  spec.measure.warmup = s.measure.warmup;
  spec.measure.iterations = s.measure.iterations;
  spec.measure.repetitions = s.measure.repetitions;
  // Every case of an instrumentation sweep (its levels, repeats and controls alike) measures in
  // interleaved recorded / paused halves (suite/measure/measure.h), so that the levels run the same
  // steps and observer_invariant judges timing in one process. Every case carries
  // params.instrumentation ("off" by default): the axis varying is what makes a sweep of levels.
  spec.measure.interleave_instrumentation = axis_varies(s, "instrumentation");
  spec.measure.min_duration_s = s.measure.min_duration_s;
  spec.measure.timeout_s = s.measure.timeout_s;
  spec.comm.custom_max_bytes = s.comm.custom_max_bytes;  // the communicator's options (CommOptions)
  spec.comm.custom_on_pcie = s.comm.custom_on_pcie;
  spec.comm.custom_timeout_s = s.comm.custom_timeout_s;
  return spec;
}

}  // namespace tpb
