// Sweep expansion: a Scenario's axes → the ordered list of cases to run.
//
// Order: the cartesian product with the first axis of workload_axis_names() outermost (TP,
// so worker groups live across many cases) and allreduce innermost; `exclude` rules drop
// cases; with a check that needs a repeat (CheckInfo::needs_repeat: deterministic) every
// case is followed by a repeat of itself; with a control, the control case runs first and
// last.
//
// Case ids are stable: FNV-1a 64 (tpb/fnv1a.h) over the canonical (key-sorted) JSON of the
// workload, the model as written, the resolved device, the params and the role, printed as
// 16 hex digits; shared placement and the scenario's "comm" section join the identity only
// when present, and so do the params "quant" (an axis without a default) and "layers" (the
// model's layer count, model.layers), so the ids of scenarios without them never changed.
// Measurement settings are not part of the id: more iterations measure the same case.
//
// A case the machine cannot run (a GPU backend on the CPU, more ranks than GPUs in exclusive
// placement, a backend not compiled in, mpi without an MPI launcher, a host-local backend
// whose group spans virtual hosts) is kept with a skip reason: it is recorded `skipped`,
// never silently dropped.
//
// Shared placement (suite/launch/placement.h) is part of a case's identity: its ids, group keys and
// baselines never meet an exclusive run's. Exclusive ids are those of earlier tpbench versions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "suite/scenario/case_spec.h"
#include "suite/launch/launch_command.h"
#include "suite/launch/placement.h"
#include "suite/scenario/scenario.h"

namespace tpb {

// What this machine and build can run.
struct MachineInfo {
  bool cuda = false;                  // CUDA compiled in and at least one GPU visible
  int gpu_count = 0;                  // visible GPUs
  std::vector<std::string> backends;  // allreduce backends compiled in (available_backends())
  LauncherKind launcher = LauncherKind::fork;  // how the run starts its ranks (launch_command.h)
  int virtual_hosts = 0;              // >= 2: each group's ranks claim that many hosts (host_layout.h)
};
MachineInfo detect_machine();

struct Case {
  std::string id;           // 16 hex digits, stable (see above)
  std::string label;        // human name, e.g. "decode tp2 b4 s16 shm"
  std::string role;         // "sweep" | "repeat" | "control-start" | "control-end"
  nlohmann::json params;    // every axis of the workload (+ mode for the engine; + layers when the
                            // scenario writes model.layers; quant only when it sweeps quant)
  int tp = 1;               // ranks, = params.tp
  std::string group_key;    // cases with equal keys may share worker processes
  std::string skip_reason;  // non-empty: recorded `skipped` with this reason, not run
  RankPlacement placement;  // device cuda: where each rank runs (place_ranks with the scenario's
                            // placement and the visible GPUs); CPU cases leave it empty
};

// The model as it identifies a case (preset or path as written, overrides, weights, seed); null without a model.
nlohmann::json model_identity(const Scenario& scenario);
std::string case_id(const Scenario& scenario, const nlohmann::json& params, const std::string& role);

// The most cases one scenario may expand to (the axes' product times the engine modes, before
// exclusions): a larger sweep is refused at expansion, naming the count and the axes.
inline constexpr std::uint64_t kMaxSweepCases = 100000;

std::vector<Case> expand_cases(const Scenario& scenario, const MachineInfo& machine);

// What the launcher sends to the ranks (suite/scenario/case_spec.h); the runner adds trace_dir.
CaseSpec case_spec(const Scenario& scenario, const Case& c);

}  // namespace tpb
