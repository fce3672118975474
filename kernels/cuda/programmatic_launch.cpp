// The process-wide switch of tpb/kernels/gpu/programmatic_launch.h.
#include "tpb/kernels/gpu/programmatic_launch.h"

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace tpb::gpu {

namespace {

// -1: not decided yet (the environment is read on first use), 0 off, 1 on.
std::atomic<int> g_setting{-1};

int from_environment() {
  const char* v = std::getenv("TPB_PROGRAMMATIC_LAUNCH");
  return v != nullptr && std::strcmp(v, "0") == 0 ? 0 : 1;
}

// Compute capability 9.0 or later on the current device, remembered per device ordinal.
bool device_supports() {
  constexpr int kDevices = 64;
  static std::atomic<int> known[kDevices] = {};  // 0 unknown, 1 no, 2 yes
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0) return false;
  if (dev < kDevices && known[dev].load(std::memory_order_relaxed) != 0) return known[dev].load() == 2;
  int major = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) return false;
  if (dev < kDevices) known[dev].store(major >= 9 ? 2 : 1);
  return major >= 9;
}

}  // namespace

bool programmatic_launch() {
  int s = g_setting.load(std::memory_order_relaxed);
  if (s < 0) {
    int expected = -1;
    g_setting.compare_exchange_strong(expected, from_environment());
    s = g_setting.load();
  }
  return s == 1 && device_supports();
}

void set_programmatic_launch(bool on) { g_setting.store(on ? 1 : 0); }

}  // namespace tpb::gpu
