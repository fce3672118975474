// GPUs that `tpbench plan --gpu NAME` knows: the device memory cudaMemGetInfo reports as
// `total`, and an estimate of the CUDA context a process takes on it.
//
// cudaMemGetInfo's total is NOT nvidia-smi's "Total": the driver keeps a reserve that
// nvidia-smi shows as memory.reserved. Measured on this project's H200 (driver 580.159.04,
// CUDA 13.0, 2026-11-30, scripts/gpu/probe_context_memory.cu): nvidia-smi total 143771 MiB, reserved 616 MiB,
// cudaMemGetInfo total 150,109,880,320 B = 143155.9 MiB ~ 143771 - 616 (the table keeps whole MiB). The other boards
// use their nvidia-smi totals as public logs show them (H100-80GB SXM 81559 MiB, H20
// 97871 MiB, A100-80GB 81920 MiB, B200 183359 MiB) minus the same 616 MiB reserve, an
// ASSUMPTION until the GPU MemoryMeter records them. Pass --gpu-mem-gib for other boards.
//
// CUDA context: the same probe measured 527 MiB used right after cudaFree(0) on an idle H200
// (CUDA 13.0, lazy module loading). An inference process holds more before its weights: the
// tpbench worker's MemoryMeter read 1108.8 MiB used at "before_engine" on that H200 (TP1,
// NCCL communicator and cuBLAS/cuBLASLt handles created, 2026-12-01), 582 MiB above the bare
// context. Without those 582 MiB the plan over-promised the KV pool by 357 MiB at
// mem_fraction 0.55 (plan_matches_measured failed on term kv_pool), so every family's entry
// is its context plus these 582 MiB. Hopper is measured; Ampere and Blackwell are ESTIMATES.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tpb {

struct GpuSpec {
  std::string name;                  // as typed after --gpu, e.g. "H200"
  std::string family;                // "hopper" | "ampere" | "blackwell" | "ada"
  std::int64_t smi_total_mib = 0;    // nvidia-smi memory.total, MiB
  std::int64_t reserved_mib = 0;     // driver reserve (nvidia-smi memory.reserved), MiB
  std::int64_t total_bytes = 0;      // cudaMemGetInfo total = (smi_total - reserved) MiB, bytes
  std::int64_t cuda_context_bytes = 0;  // context + libraries before the weights, bytes
  std::string note;                  // where the numbers come from
};

// All known GPUs, in a fixed order.
const std::vector<GpuSpec>& gpu_catalog();

// Looks a GPU up by name, case-insensitively ("h200", "H100-80GB"); unknown names throw
// InputError listing the known ones.
const GpuSpec& find_gpu(const std::string& name);

// The CUDA-context estimate used when only a memory size is given (--gpu-mem-gib): the
// Hopper value, the hardware tpbench qualifies.
std::int64_t default_cuda_context_bytes();

// The same footprint for a rank that shares its GPU (shared placement), as that rank reads it:
// NVML's per-process use (tpb/kernels/device.h), which leaves out what cudaMemGetInfo's
// device-wide reading adds beside the process's own pages. MEASURED on one H200 (driver
// 580.159.04, CUDA 13.0, NCCL 2.28.9, under MPS, 2026-12-01): 543,162,368 B used at
// "before_engine" minus the NCCL communicator's own 415,236,096 B (TP 2) and 444,596,224 B
// (TP 4) of 958,398,464 and 987,758,592: 518 MiB both times, as scripts/gpu/
// probe_shared_memory.cu's bare context (516-518 MiB with and without MPS).
inline constexpr std::int64_t kSharedRankContextBytes = 543162368;

}  // namespace tpb
