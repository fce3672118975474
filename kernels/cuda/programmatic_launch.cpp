// The process-wide switch of tpb/kernels/gpu/programmatic_launch.h.
#include "tpb/kernels/gpu/programmatic_launch.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

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

}  // namespace tpb::gpu
