// visible_gpus() for builds without CUDA: there is nothing to see.
#include "tpb/kernels/device.h"

#if !TPB_HAVE_CUDA
namespace tpb {
std::vector<GpuInfo> visible_gpus() { return {}; }
int current_device_compute_capability() { return 0; }
std::string cuda_driver_version() { return {}; }
std::string cuda_runtime_version() { return {}; }
bool current_device_memory(std::size_t*, std::size_t*) { return false; }
std::string device_memory_source() { return "none (built without CUDA)"; }
long long process_device_memory_bytes(int, std::string* why) {
  if (why != nullptr) *why = "built without CUDA";
  return -1;
}
}  // namespace tpb
#endif
