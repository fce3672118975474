// The GPU table; sources and caveats are in gpu_catalog.h.
#include "reference_engine/memory/gpu_catalog.h"

#include <algorithm>
#include <cctype>
#include <sstream>

#include "reference_engine/memory/comm_bytes.h"
#include "tpb/check.h"

namespace tpb {

namespace {

// Per-process footprint before the weights (see gpu_catalog.h): the bare CUDA context plus
// what an inference process loads on the device before its model (cuBLAS/cuBLASLt and NCCL
// handles, lazily loaded kernel modules).
constexpr std::int64_t kLibrariesBytes = 582 * kMiB;                        // measured, H200 (see .h)
constexpr std::int64_t kHopperContextBytes = 527 * kMiB + kLibrariesBytes;   // measured, H200, CUDA 13.0
constexpr std::int64_t kAmpereContextBytes = 500 * kMiB + kLibrariesBytes;   // ESTIMATE: a little smaller than Hopper
constexpr std::int64_t kBlackwellContextBytes = 600 * kMiB + kLibrariesBytes;  // ESTIMATE: Hopper's, rounded up
// Driver reserve between nvidia-smi's total and cudaMemGetInfo's: measured on H200, assumed elsewhere.
constexpr std::int64_t kH200ReservedMiB = 616;

GpuSpec gpu(const char* name, const char* family, std::int64_t smi_total_mib, std::int64_t context_bytes,
            const char* note) {
  return {name, family, smi_total_mib, kH200ReservedMiB, (smi_total_mib - kH200ReservedMiB) * kMiB, context_bytes, note};
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

}  // namespace

const std::vector<GpuSpec>& gpu_catalog() {
  static const std::vector<GpuSpec> gpus = {
      gpu("H100-80GB", "hopper", 81559, kHopperContextBytes,
          "H100 SXM 80 GB: nvidia-smi 81559 MiB, reserve assumed = H200's, context = H200's"),
      gpu("H200", "hopper", 143771, kHopperContextBytes,
          "H200 141 GB: total and process baseline MEASURED (143155 MiB; 527 MiB context + 582 MiB libraries; driver 580.159.04, CUDA 13.0)"),
      gpu("H20-96GB", "hopper", 97871, kHopperContextBytes,
          "H20 96 GB: nvidia-smi 97871 MiB, reserve assumed = H200's, context = H200's"),
      gpu("A100-80GB", "ampere", 81920, kAmpereContextBytes,
          "A100 80 GB: nvidia-smi 81920 MiB, reserve assumed = H200's, context estimated"),
      gpu("B200", "blackwell", 183359, kBlackwellContextBytes,
          "B200 180 GB: nvidia-smi 183359 MiB, reserve assumed = H200's, context estimated"),
  };
  return gpus;
}

const GpuSpec& find_gpu(const std::string& name) {
  const std::string want = lower(name);
  for (const auto& g : gpu_catalog())
    if (lower(g.name) == want) return g;
  std::ostringstream known;
  for (const auto& g : gpu_catalog()) known << (known.tellp() > 0 ? ", " : "") << g.name;
  TPB_INPUT_FAIL("--gpu: unknown GPU '" << name << "' (known: " << known.str()
                                        << "; or give --gpu-mem-gib with the total cudaMemGetInfo reports)");
}

std::int64_t default_cuda_context_bytes() { return kHopperContextBytes; }

}  // namespace tpb
