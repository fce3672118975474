// The engine workload's faults in a measuring build (-DTPB_TEST_HOOKS=OFF): nothing is
// planted; tpb::test_hook refuses a TPB_TEST_* variable that is set, naming it (engine_faults.h).
#include "suite/workloads/engine_faults.h"

#include "tpb/test_hooks.h"

namespace tpb {

double planted_weights_factor(int /*rank*/) {
  test_hook("TPB_TEST_PLANT_WEIGHTS_FACTOR");
  return 1.0;
}

PlantedDebugFault requested_debug_fault() {
  test_hook("TPB_TEST_ENGINE_DEBUG_FAULT");
  return PlantedDebugFault::none;
}

std::optional<PlantedDivergence> planted_divergence(const std::string& /*backend*/, int /*tp*/, std::int64_t /*layers*/,
                                                    std::size_t /*calls_per_forward*/,
                                                    void (*)(void*, std::size_t, DType, float, void*)) {
  test_hook("TPB_TEST_PLANT_DIVERGENCE");
  return std::nullopt;
}

}  // namespace tpb
