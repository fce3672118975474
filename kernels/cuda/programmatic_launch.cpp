// The process-wide switch of tpb/kernels/gpu/programmatic_launch.h.
#include "tpb/kernels/gpu/programmatic_launch.h"

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "tpb/kernels/device.h"

namespace tpb::gpu {

namespace {

// -1: not decided yet (the environment is read on first use), 0 off, 1 on.
std::atomic<int> g_setting{-1};

int from_environment() {
  const char* v = std::getenv("TPB_PROGRAMMATIC_LAUNCH");
  return v != nullptr && std::strcmp(v, "0") == 0 ? 0 : 1;
}

}  // namespace

bool programmatic_launch() {
  int s = g_setting.load(std::memory_order_relaxed);
  if (s < 0) {
    int expected = -1;
    g_setting.compare_exchange_strong(expected, from_environment());
    s = g_setting.load();
  }
  return s == 1 && current_device_compute_capability() >= 90;
}

void set_programmatic_launch(bool on) { g_setting.store(on ? 1 : 0); }

bool kernel_waits_for_prior_grids(const void* kernel) {
  static std::mutex mu;
  static std::unordered_map<const void*, bool> known;
  std::lock_guard<std::mutex> lock(mu);
  const auto it = known.find(kernel);
  if (it != known.end()) return it->second;
  cudaFuncAttributes attr{};
  const bool waits = cudaFuncGetAttributes(&attr, kernel) == cudaSuccess && attr.ptxVersion >= 90;
  if (!waits) (void)cudaGetLastError();  // a failed query leaves the kernel unchained, not an error state
  known.emplace(kernel, waits);
  return waits;
}

}  // namespace tpb::gpu
