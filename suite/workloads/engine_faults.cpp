// The engine workload's TEST-ONLY faults as the TPB_TEST_* variables ask (see engine_faults.h);
// compiled only with -DTPB_TEST_HOOKS=ON.
#include "suite/workloads/engine_faults.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "tpb/check.h"
#include "tpb/test_hooks.h"

namespace tpb {

double planted_weights_factor(int rank) {
  const char* text = test_hook("TPB_TEST_PLANT_WEIGHTS_FACTOR");
  if (rank != 1 || text == nullptr || *text == '\0') return 1.0;
  char* end = nullptr;
  const double factor = std::strtod(text, &end);
  TPB_INPUT_CHECK(end != text && *end == '\0' && std::isfinite(factor) && factor >= 1.0,
                  "TPB_TEST_PLANT_WEIGHTS_FACTOR: expected a number >= 1, got '" << text << "'");
  return factor;
}

PlantedDebugFault requested_debug_fault() {
  const char* text = test_hook("TPB_TEST_ENGINE_DEBUG_FAULT");
  if (text == nullptr || *text == '\0') return PlantedDebugFault::none;
  const std::string v = text;
  TPB_INPUT_CHECK(v == "value" || v == "allreduce" || v == "allocation",
                  "TPB_TEST_ENGINE_DEBUG_FAULT: expected value, allreduce or allocation, got '" << v << "'");
  return v == "value" ? PlantedDebugFault::value : v == "allreduce" ? PlantedDebugFault::allreduce : PlantedDebugFault::allocation;
}

std::optional<PlantedDivergence> planted_divergence(const std::string& backend, int tp, std::int64_t layers,
                                                    std::size_t calls_per_forward,
                                                    void (*scale)(void*, std::size_t, DType, float, void*)) {
  const char* text = test_hook("TPB_TEST_PLANT_DIVERGENCE");
  if (text == nullptr || *text == '\0') return std::nullopt;
  const std::string spec = text;
  std::int64_t layer = -1;
  std::string want_backend;
  int want_tp = 0;
  float factor = 1.0625f;
  std::size_t at = 0;
  while (at <= spec.size()) {
    const std::size_t comma = std::min(spec.find(',', at), spec.size());
    const std::string item = spec.substr(at, comma - at);
    const std::size_t eq = item.find('=');
    const std::string key = item.substr(0, eq), value = eq == std::string::npos ? "" : item.substr(eq + 1);
    char* end = nullptr;
    if (key == "layer") {
      layer = std::strtoll(value.c_str(), &end, 10);
      TPB_INPUT_CHECK(!value.empty() && *end == '\0' && layer >= 0 && layer < layers,
                      "TPB_TEST_PLANT_DIVERGENCE: layer: expected 0.." << layers - 1 << ", got '" << value << "'");
    } else if (key == "backend" && !value.empty()) {
      want_backend = value;
    } else if (key == "tp") {
      want_tp = static_cast<int>(std::strtol(value.c_str(), &end, 10));
      TPB_INPUT_CHECK(!value.empty() && *end == '\0' && want_tp >= 1, "TPB_TEST_PLANT_DIVERGENCE: tp: expected >= 1, got '" << value << "'");
    } else if (key == "factor") {
      factor = std::strtof(value.c_str(), &end);
      TPB_INPUT_CHECK(!value.empty() && *end == '\0' && std::isfinite(factor) && factor > 0 && factor != 1,
                      "TPB_TEST_PLANT_DIVERGENCE: factor: expected a positive number other than 1, got '" << value << "'");
    } else {
      TPB_INPUT_FAIL("TPB_TEST_PLANT_DIVERGENCE: expected layer=L[,backend=B][,tp=N][,factor=F], got '" << spec << "'");
    }
    at = comma + 1;
  }
  TPB_INPUT_CHECK(layer >= 0, "TPB_TEST_PLANT_DIVERGENCE: layer=L is required, got '" << spec << "'");
  if ((!want_backend.empty() && want_backend != backend) || (want_tp != 0 && want_tp != tp)) return std::nullopt;
  PlantedDivergence plant;
  plant.calls_per_forward = calls_per_forward;
  plant.call_in_forward = static_cast<std::size_t>(2 + 2 * layer);
  plant.factor = factor;
  plant.scale = scale;
  return plant;
}

}  // namespace tpb
