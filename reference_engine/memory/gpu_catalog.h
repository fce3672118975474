// GPUs that `tpbench plan --gpu NAME` knows: the device memory cudaMemGetInfo reports as
// `total` (which is what nvidia-smi shows as "Total", a little under the marketing size:
// the driver keeps the rest), and an estimate of the CUDA context a process takes on it.
//
// Sources: the "Total" nvidia-smi prints (the same number cudaMemGetInfo returns as total):
// H200 "143771MiB", H100-80GB SXM "81559MiB", H20 "97871MiB", A100-80GB "81920MiB",
// B200 "183359MiB", as public logs of those boards show them; not measured on this
// project's machines (except where GpuSpec::note says so). The GPU MemoryMeter records the
// real value per run; pass --gpu-mem-gib for any other board.
//
// CUDA context: ESTIMATES (~500-600 MiB on Hopper with CUDA 12/13: the context, the module
// images of cuBLAS/NCCL/our kernels loaded lazily, and the driver's per-context reserves),
// to be replaced by the meter's measurement of "after context" on each family.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tpb {

struct GpuSpec {
  std::string name;                  // as typed after --gpu, e.g. "H200"
  std::string family;                // "hopper" | "ampere" | "blackwell" | "ada"
  std::int64_t total_bytes = 0;      // cudaMemGetInfo total, bytes
  std::int64_t cuda_context_bytes = 0;  // estimated context + module footprint, bytes
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

}  // namespace tpb
