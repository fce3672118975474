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
// The calling thread's current device's compute capability as major * 10 + minor (90 on an
// H100 / H200), remembered per device ordinal; 0 without CUDA, a driver or a device; any
// other CUDA error throws. Kernels built for one architecture only (sm_90a's wgmma) are offered
// where it is 90.
int current_device_compute_capability();
// Driver and runtime versions as "13.0", empty without CUDA.
std::string cuda_driver_version();
std::string cuda_runtime_version();

// This rank's device memory on the calling thread's current device: the one reading every
// memory meter, the KV-pool formula and the communicators' footprints take. False without
// CUDA or a device.
// - Alone on its GPU (TPB_RANKS_PER_GPU unset or 1): cudaMemGetInfo, free and total.
// - Sharing its GPU with N-1 other ranks (shared placement, TPB_RANKS_PER_GPU=N): the rank owns
//   total = device total / N, and free = that share minus what THIS process holds on the
//   device as NVML lists it per process (context, NCCL, cuBLAS and its own allocations),
//   never a device-wide reading that its neighbours move. Throws when NVML cannot say.
bool current_device_memory(std::size_t* free_bytes, std::size_t* total_bytes);
// Ranks sharing this process's GPU: TPB_RANKS_PER_GPU (shared placement sets it for every
// rank, suite/launch/placement.h), 1 when unset. A malformed value throws: read as 1 it would turn
// a rank's share into a device-wide reading. Any build, with or without CUDA.
int ranks_sharing_device();
// "cudaMemGetInfo" or "NVML per-process use, 1/N of the device" (as current_device_memory reads).
std::string device_memory_source();
// Bytes this process holds on `device` as NVML lists them (-1 when NVML cannot say, with *why set).
long long process_device_memory_bytes(int device, std::string* why);
// CUDA device `device`'s UUID as nvidia-smi -L prints it ("GPU-xxxxxxxx-xxxx-xxxx-xxxx-
// xxxxxxxxxxxx"): the same board in every process, whatever its CUDA_VISIBLE_DEVICES. CUDA builds.
std::string device_uuid(int device);
// Whether the GPUs with these UUIDs are joined by NVLink, as NVML reports it
// (nvmlDeviceGetP2PStatus, NVLink index): 1 yes, 0 no, -1 NVML cannot say (*why set). CUDA builds.
int gpus_nvlink_connected(const std::string& uuid_a, const std::string& uuid_b, std::string* why);

}  // namespace tpb
