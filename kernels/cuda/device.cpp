#include "tpb/kernels/device.h"

#include <cuda_runtime_api.h>

#include <atomic>

#include "tpb/check.h"
#include "tpb/cuda_check.h"

namespace tpb {

std::vector<GpuInfo> visible_gpus() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver or no device: report none, clear the sticky error
    return {};
  }
  std::vector<GpuInfo> gpus;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    gpus.push_back({i, prop.name, prop.totalGlobalMem, prop.multiProcessorCount, prop.major, prop.minor});
  }
  return gpus;
}

int current_device_compute_capability() {
  constexpr int kDevices = 64;
  static std::atomic<int> known[kDevices] = {};  // 0: not asked yet
  int dev = 0;
  const cudaError_t err = cudaGetDevice(&dev);
  if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver) {
    (void)cudaGetLastError();  // no GPU here: nothing runs on one
    return 0;
  }
  // Any other failure throws: read as 0 it would pick other kernels than the ones a workspace
  // was sized for.
  TPB_CUDA_CHECK(err);
  if (dev < kDevices) {
    const int cc = known[dev].load(std::memory_order_relaxed);
    if (cc != 0) return cc;
  }
  int major = 0, minor = 0;
  TPB_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  TPB_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
  const int cc = major * 10 + minor;
  if (dev < kDevices) known[dev].store(cc, std::memory_order_relaxed);
  return cc;
}

static std::string format_cuda_version(int v) {
  if (v <= 0) return {};
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

std::string cuda_driver_version() {
  int v = 0;
  return cudaDriverGetVersion(&v) == cudaSuccess ? format_cuda_version(v) : std::string();
}

std::string cuda_runtime_version() {
  int v = 0;
  return cudaRuntimeGetVersion(&v) == cudaSuccess ? format_cuda_version(v) : std::string();
}

bool current_device_memory(std::size_t* free_bytes, std::size_t* total_bytes) {
  std::size_t f = 0, t = 0;
  if (cudaMemGetInfo(&f, &t) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  const int sharing = ranks_sharing_device();
  if (sharing > 1) {
    int device = 0;
    TPB_CUDA_CHECK(cudaGetDevice(&device));
    std::string why;
    const long long own = process_device_memory_bytes(device, &why);
    TPB_CHECK(own >= 0, "device memory of a rank sharing GPU " << device << " with " << sharing - 1
                            << " other(s): its own use cannot be read (" << why
                            << "), and a device-wide reading would count its neighbours");
    t /= static_cast<std::size_t>(sharing);
    f = static_cast<std::size_t>(own) < t ? t - static_cast<std::size_t>(own) : 0;
  }
  *free_bytes = f;
  *total_bytes = t;
  return true;
}

std::string device_memory_source() {
  const int sharing = ranks_sharing_device();
  return sharing > 1 ? "NVML per-process use, 1/" + std::to_string(sharing) + " of the device" : "cudaMemGetInfo";
}

}  // namespace tpb
