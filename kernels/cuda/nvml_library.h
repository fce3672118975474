// NVML, the driver's management library (libnvidia-ml.so.1, on every machine with the NVIDIA
// driver), opened at run time: the toolkit on build machines need not ship its header, so the
// few entry points tpbench uses are declared here (layouts as nvml.h has them). Internal to
// kernels/cuda: process_memory.cpp (per-process memory) and gpu_links.cpp (NVLink between GPUs).
#pragma once

#include <string>

namespace tpb {

// nvmlProcessInfo_t as the _v3 entry points fill it (nvml.h, "v2" layout).
struct NvmlProcessInfo {
  unsigned int pid;
  unsigned long long used_gpu_memory;  // bytes
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};
using NvmlHandleByString = int (*)(const char*, void**);
using NvmlProcesses = int (*)(void*, unsigned int*, NvmlProcessInfo*);
// nvmlDeviceGetP2PStatus(device1, device2, nvmlGpuP2PCapsIndex_t, nvmlGpuP2PStatus_t*).
using NvmlP2PStatus = int (*)(void*, void*, int, int*);
inline constexpr int kNvmlP2PCapsIndexNvlink = 2;  // NVML_P2P_CAPS_INDEX_NVLINK
inline constexpr int kNvmlP2PStatusOk = 0;         // NVML_P2P_STATUS_OK

struct Nvml {
  NvmlHandleByString handle_by_pci = nullptr;   // nvmlDeviceGetHandleByPciBusId_v2
  NvmlHandleByString handle_by_uuid = nullptr;  // nvmlDeviceGetHandleByUUID (may be absent)
  NvmlProcesses compute = nullptr;              // nvmlDeviceGetComputeRunningProcesses_v3
  NvmlProcesses mps = nullptr;                  // nvmlDeviceGetMPSComputeRunningProcesses_v3 (may be absent)
  NvmlP2PStatus p2p_status = nullptr;           // nvmlDeviceGetP2PStatus (may be absent)
  std::string problem;  // non-empty: NVML is unusable here, and why
};

// Opened and initialised once per process; `problem` says why not where it cannot be.
const Nvml& nvml();

}  // namespace tpb
