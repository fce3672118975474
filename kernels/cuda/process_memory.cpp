// process_device_memory_bytes (tpb/kernels/device.h): what this process holds on one GPU, from
// NVML's per-process lists, for shared placement where cudaMemGetInfo is device-wide and moves
// with the neighbours' allocations.
//
// NVML is opened at run time (nvml_library.h). Measured on one H200 (driver 580, 2026-12-01,
// scripts/gpu/probe_shared_memory.cu): a process's entry is its context plus its allocations
// (516 MiB + 1 GiB = 1540 MiB), listed by nvmlDeviceGetComputeRunningProcesses without MPS and
// by both it and nvmlDeviceGetMPSComputeRunningProcesses under MPS.
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <string>

#include "nvml_library.h"
#include "tpb/kernels/device.h"

namespace tpb {

namespace {

// This pid's entry in one of NVML's lists: bytes, or -1 when it is not listed.
long long find_own(NvmlProcesses list, void* handle) {
  if (list == nullptr) return -1;
  NvmlProcessInfo infos[256];
  unsigned int count = 256;
  if (list(handle, &count, infos) != 0) return -1;
  const unsigned int me = static_cast<unsigned int>(getpid());
  for (unsigned int i = 0; i < count; ++i)
    if (infos[i].pid == me) return static_cast<long long>(infos[i].used_gpu_memory);
  return -1;
}

}  // namespace

long long process_device_memory_bytes(int device, std::string* why) {
  const Nvml& n = nvml();
  if (!n.problem.empty()) {
    if (why != nullptr) *why = n.problem;
    return -1;
  }
  // The PCI bus id names the same board for CUDA and NVML whatever CUDA_VISIBLE_DEVICES says.
  char bus[32] = {};
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, device) != cudaSuccess) {
    (void)cudaGetLastError();
    if (why != nullptr) *why = "cudaDeviceGetPCIBusId failed for device " + std::to_string(device);
    return -1;
  }
  void* handle = nullptr;
  if (n.handle_by_pci(bus, &handle) != 0) {
    if (why != nullptr) *why = std::string("NVML does not know the GPU at PCI ") + bus;
    return -1;
  }
  long long own = find_own(n.compute, handle);
  if (own < 0) own = find_own(n.mps, handle);
  if (own < 0 && why != nullptr) *why = "NVML lists no entry for process " + std::to_string(getpid()) + " on GPU " + bus;
  return own;
}

}  // namespace tpb
