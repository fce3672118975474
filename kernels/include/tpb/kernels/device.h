// What GPUs this process can see. Safe to call in any build: without CUDA it reports none.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace tpb {

struct GpuInfo {
  int ordinal;              // CUDA device ordinal
  std::string name;         // e.g. "NVIDIA H200"
  std::size_t memory_bytes; // total device memory, bytes
  int sm_count;             // multiprocessors
  int cc_major, cc_minor;   // compute capability
};

// Visible GPUs, or empty when CUDA is absent, no driver is loaded or no device exists.
std::vector<GpuInfo> visible_gpus();
// Driver and runtime versions as "13.0", empty without CUDA.
std::string cuda_driver_version();
std::string cuda_runtime_version();

// cudaMemGetInfo on the calling thread's current device. False without CUDA or a device.
bool current_device_memory(std::size_t* free_bytes, std::size_t* total_bytes);

}  // namespace tpb
