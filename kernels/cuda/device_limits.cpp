// Device limits asked once per device (tpb/kernels/gpu/device_limits.h).
#include "tpb/kernels/gpu/device_limits.h"

#include <cuda_runtime_api.h>

#include <atomic>

#include "tpb/cuda_check.h"

namespace tpb::gpu {

int device_smem_optin_bytes() {
  constexpr int kDevices = 64;
  static std::atomic<int> known[kDevices] = {};  // 0: not asked yet
  int dev = 0;
  TPB_CUDA_CHECK(cudaGetDevice(&dev));
  if (dev < kDevices) {
    const int bytes = known[dev].load(std::memory_order_relaxed);
    if (bytes != 0) return bytes;
  }
  int bytes = 0;
  TPB_CUDA_CHECK(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  if (dev < kDevices) known[dev].store(bytes, std::memory_order_relaxed);
  return bytes;
}

}  // namespace tpb::gpu
