// GPUs that `tpbench plan --gpu NAME` knows: the device memory cudaMemGetInfo reports as
// `total`, an estimate of the CUDA context a process takes on it, and how a box of them usually
// joins its GPUs (the interconnect decides whether the custom allreduce can run, comm_bytes.h).
//
// Three memory figures per board, each with its source in its entry:
//   datasheet_gb   what the vendor's datasheet says ("80 GB"), named in `datasheet`;
//   smi_total_mib  nvidia-smi's memory.total as public logs show it (`smi_source`);
//   total_bytes    cudaMemGetInfo's total = (smi_total_mib - reserved_mib) MiB.
// cudaMemGetInfo's total is NOT nvidia-smi's "Total": the driver keeps a reserve that
// nvidia-smi shows as memory.reserved. Measured on this project's H200 (driver 580.159.04,
// CUDA 13.0, 2026-11-30, scripts/gpu/probe_context_memory.cu): nvidia-smi total 143771 MiB,
// reserved 616 MiB, cudaMemGetInfo total 150,109,880,320 B = 143155.9 MiB ~ 143771 - 616 (the
// table keeps whole MiB). Every other board takes the same 616 MiB reserve, an ASSUMPTION until
// the GPU MemoryMeter records it there. Pass --gpu-mem-gib for other boards.
// The datasheet figures were checked against copies and summaries of the named documents found
// by search (and NVIDIA's DGX B200 user guide, docs.nvidia.com), not the vendor PDFs themselves;
// every nvidia-smi figure was seen in several public logs. The H20 and H20-3e have no public
// NVIDIA datasheet: their entries say so.
//
// CUDA context: the same probe measured 527 MiB used right after cudaFree(0) on an idle H200
// (CUDA 13.0, lazy module loading). An inference process holds more before its weights: the
// tpbench worker's MemoryMeter read 1108.8 MiB used at "before_engine" on that H200 (TP1,
// NCCL communicator and cuBLAS/cuBLASLt handles created, 2026-12-01), 582 MiB above the bare
// context. Without those 582 MiB the plan over-promised the KV pool by 357 MiB at
// mem_fraction 0.55 (plan_matches_measured failed on term kv_pool), so every family's entry
// is its context plus these 582 MiB. Only the H200 is measured (`measured`); every other
// entry is an ESTIMATE: other Hopper boards take the H200's figure, Ampere, Ada and Blackwell
// a family guess (gpu_catalog.cpp).
//
// Interconnect defaults: SXM/HGX boards NVLink; PCIe boards pcie-p2p, the usual state of
// datacenter cards in a server (a public example for the RTX PRO 6000 Blackwell Server Edition:
// vllm-project/vllm issue 56128, 4 of them with PCIe peer-to-peer and no NVLink). P2P depends on
// the platform (PCIe switches, ACS/IOMMU, virtualisation): `nvidia-smi topo -p2p r` says, and
// --interconnect pcie-no-p2p plans a box without it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "reference_engine/memory/comm_bytes.h"

namespace tpb {

struct GpuSpec {
  std::string name;                  // canonical, as `plan` prints it, e.g. "H200"
  std::string product;               // the vendor's product name, e.g. "NVIDIA H200 (SXM)"
  std::vector<std::string> aliases;  // other spellings --gpu accepts, matched as find_gpu says
  std::string family;                // "hopper" | "ampere" | "ada" | "blackwell"
  Interconnect interconnect = Interconnect::nvlink;  // a box of these, unless --interconnect says otherwise
  std::int64_t datasheet_gb = 0;     // memory on the vendor's datasheet, GB as the vendor writes it
  std::string datasheet;             // that document's name, or why there is none
  std::int64_t smi_total_mib = 0;    // nvidia-smi memory.total, MiB
  std::string smi_source;            // where that figure was seen
  std::int64_t reserved_mib = 0;     // driver reserve (nvidia-smi memory.reserved), MiB: assumed but on H200
  std::int64_t total_bytes = 0;      // cudaMemGetInfo total = (smi_total - reserved) MiB, bytes
  std::int64_t cuda_context_bytes = 0;  // context + libraries before the weights, bytes
  bool measured = false;             // true: reserve and context measured on this board (H200);
                                     // false: both are ESTIMATES
  std::string interconnect_note;     // why `interconnect` is this board's default, how sure it is
};

// All known GPUs, in a fixed order.
const std::vector<GpuSpec>& gpu_catalog();

// Looks a GPU up by its name or an alias. Matching ignores case, treats spaces, '-' and '_'
// alike and an "NVIDIA " prefix as absent, so "rtx-pro-6000", "RTX PRO 6000" and nvidia-smi's
// "NVIDIA RTX PRO 6000 Blackwell Server Edition" all find the same entry. Unknown names throw
// InputError listing the known ones.
const GpuSpec& find_gpu(const std::string& name);

// The form find_gpu compares: lower case, runs of ' ', '-', '_' as one '-', "nvidia-" dropped.
std::string gpu_match_key(const std::string& name);

// The known names joined with ", ", for messages and --help.
std::string gpu_names();

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
