// The GPU table; sources and caveats are in gpu_catalog.h.
#include "reference_engine/memory/gpu_catalog.h"

#include <algorithm>
#include <cctype>
#include <sstream>

#include "reference_engine/memory/comm_bytes.h"
#include "tpb/check.h"

namespace tpb {

namespace {

// ESTIMATES of the per-process CUDA context footprint (see gpu_catalog.h).
constexpr std::int64_t kHopperContextBytes = 560 * kMiB;     // ~500-600 MiB, CUDA 12/13
constexpr std::int64_t kAmpereContextBytes = 500 * kMiB;     // a little smaller than Hopper
constexpr std::int64_t kBlackwellContextBytes = 600 * kMiB;  // assumed like Hopper, rounded up

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

}  // namespace

const std::vector<GpuSpec>& gpu_catalog() {
  static const std::vector<GpuSpec> gpus = {
      {"H100-80GB", "hopper", 81559 * kMiB, kHopperContextBytes, "H100 SXM 80 GB HBM3: nvidia-smi total 81559 MiB"},
      {"H200", "hopper", 143771 * kMiB, kHopperContextBytes, "H200 141 GB HBM3e: nvidia-smi total 143771 MiB"},
      {"H20-96GB", "hopper", 97871 * kMiB, kHopperContextBytes, "H20 96 GB HBM3: nvidia-smi total 97871 MiB"},
      {"A100-80GB", "ampere", 81920 * kMiB, kAmpereContextBytes, "A100 80 GB: nvidia-smi total 81920 MiB"},
      {"B200", "blackwell", 183359 * kMiB, kBlackwellContextBytes, "B200 180 GB HBM3e: nvidia-smi total 183359 MiB"},
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
