// visible_gpus() for builds without CUDA: there is nothing to see.
#include "tpb/kernels/device.h"

#if !TPB_HAVE_CUDA
namespace tpb {
std::vector<GpuInfo> visible_gpus() { return {}; }
std::string cuda_driver_version() { return {}; }
std::string cuda_runtime_version() { return {}; }
bool current_device_memory(std::size_t*, std::size_t*) { return false; }
}  // namespace tpb
#endif
