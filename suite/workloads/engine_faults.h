// The engine workload's TEST-ONLY faults: the one seam between the workload and its test
// hooks (tpb/test_hooks.h). The workload asks here what is planted and carries it out; the
// reading and parsing of the TPB_TEST_* variables live in engine_faults.cpp, compiled only with
// -DTPB_TEST_HOOKS=ON (the builds tests run in). A measuring build compiles
// engine_faults_off.cpp instead: nothing is ever planted, and a set variable is refused by name
// (tpb::test_hook), at the same point of the case as in a test build.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "suite/measure/instrumentation.h"
#include "suite/workloads/observed_communicator.h"

namespace tpb {

// TEST ONLY: TPB_TEST_PLANT_WEIGHTS_FACTOR=F (a number >= 1) makes rank 1 of the CPU engine
// allocate F times its weights while they load (the extra (F - 1) x weights is zero-filled
// heap kept with the engine), so that plan_matches_measured has a real planted fault to find
// (tests/cli/plan_matches_measured_can_fail_on_cpu.sh). Unset: factor 1, nothing planted. Never
// set it in a measurement.
double planted_weights_factor(int rank);

// TEST ONLY: TPB_TEST_ENGINE_DEBUG_FAULT plants a fault in the engine workload's debug level
// (CPU and GPU), so that observer_invariant has real control-flow faults to find
// (tests/cli/observer_sees_control_flow.sh; on a GPU scripts/gpu_issue15_demo.sh). It acts
// only at level debug; unset or empty: nothing planted. Never set it in a measurement.
//   value       the debug path writes into the step's input (the first sequence's next
//               token): the logits change, the control flow does not
//   allreduce   every step at debug ends with an extra 1-element f32 all_reduce on a scratch
//               value (host, or device memory on the GPU, allocated at every level): the
//               outputs stay bitwise equal, the communicator calls do not
//   allocation  the debug level allocates its logits snapshot after the timed loop instead of
//               before it: the same bytes in all, in another order
enum class PlantedDebugFault { none, value, allreduce, allocation };

// The fault TPB_TEST_ENGINE_DEBUG_FAULT asks for, whatever the level (a fault's scratch is
// allocated at every level, so that only what the fault does differs at debug).
PlantedDebugFault requested_debug_fault();

// The value fault carried out: the step's input token (the first sequence's next token) moved
// to the next id of a vocabulary of `vocab`.
inline void plant_value_fault(std::int64_t& token, std::int64_t vocab) { token = (token + 1) % vocab; }

// The fault acting in this case: the requested one at level debug, none elsewhere.
inline PlantedDebugFault planted_debug_fault(InstrumentationLevel level) {
  const PlantedDebugFault requested = requested_debug_fault();
  return level == InstrumentationLevel::debug ? requested : PlantedDebugFault::none;
}

// TEST ONLY: TPB_TEST_PLANT_DIVERGENCE="layer=L[,backend=B][,tp=N][,factor=F]" makes the
// engine's communicator return a wrong sum (scaled by F, default 1.0625) at layer L's MLP/MoE
// all_reduce, in every forward pass of each case whose requested backend is B and whose TP
// is N (any when left out): a backend bug at one layer, for divergence localization to find
// (tests/cli/divergence_is_located.sh). Read by both engines at every instrumentation level;
// unset or empty: nothing planted. Never set it in a measurement.
// `layers` is the model's num_hidden_layers, `calls_per_forward` its collectives per forward pass
// (embedding, two per layer, lm_head), `scale` what multiplies the planted sum on this device.
std::optional<PlantedDivergence> planted_divergence(const std::string& backend, int tp, std::int64_t layers,
                                                    std::size_t calls_per_forward,
                                                    void (*scale)(void*, std::size_t, DType, float, void*));

}  // namespace tpb
