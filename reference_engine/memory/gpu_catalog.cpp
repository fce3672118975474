// The GPU table; what each figure means and how sure it is are in gpu_catalog.h, where each
// number comes from is in its entry.
#include "reference_engine/memory/gpu_catalog.h"

#include <cctype>
#include <sstream>

#include "tpb/check.h"
#include "tpb/did_you_mean.h"

namespace tpb {

namespace {

// Per-process footprint before the weights (see gpu_catalog.h): the bare CUDA context plus
// what an inference process loads on the device before its model (cuBLAS/cuBLASLt and NCCL
// handles, lazily loaded kernel modules).
constexpr std::int64_t kLibrariesBytes = 582 * kMiB;                        // measured, H200 (see .h)
constexpr std::int64_t kHopperContextBytes = 527 * kMiB + kLibrariesBytes;   // measured, H200, CUDA 13.0
constexpr std::int64_t kAmpereContextBytes = 500 * kMiB + kLibrariesBytes;   // ESTIMATE: a little smaller than Hopper
constexpr std::int64_t kAdaContextBytes = 500 * kMiB + kLibrariesBytes;      // ESTIMATE: as Ampere
constexpr std::int64_t kBlackwellContextBytes = 600 * kMiB + kLibrariesBytes;  // ESTIMATE: Hopper's, rounded up
// Driver reserve between nvidia-smi's total and cudaMemGetInfo's: measured on H200, assumed elsewhere.
constexpr std::int64_t kH200ReservedMiB = 616;

// What one entry states; gpu() derives the rest.
struct Entry {
  const char* name;
  const char* product;
  std::vector<std::string> aliases;
  const char* family;
  Interconnect interconnect;
  std::int64_t datasheet_gb;
  const char* datasheet;
  std::int64_t smi_total_mib;
  const char* smi_source;
  std::int64_t context_bytes;
  bool measured;  // reserve and context
  const char* interconnect_note;
};

GpuSpec gpu(Entry e) {
  GpuSpec g;
  g.name = e.name;
  g.product = e.product;
  g.aliases = std::move(e.aliases);
  g.family = e.family;
  g.interconnect = e.interconnect;
  g.datasheet_gb = e.datasheet_gb;
  g.datasheet = e.datasheet;
  g.smi_total_mib = e.smi_total_mib;
  g.smi_source = e.smi_source;
  g.reserved_mib = kH200ReservedMiB;
  g.total_bytes = (e.smi_total_mib - kH200ReservedMiB) * kMiB;
  g.cuda_context_bytes = e.context_bytes;
  g.measured = e.measured;
  g.interconnect_note = e.interconnect_note;
  return g;
}

constexpr bool kMeasured = true, kEstimate = false;
constexpr Interconnect kNvlink = Interconnect::nvlink, kPcieP2p = Interconnect::pcie_p2p;

}  // namespace

const std::vector<GpuSpec>& gpu_catalog() {
  // smi_total_mib: nvidia-smi's memory.total, each seen in several public logs (nvidia-smi
  // tables in GitHub repositories), under the name given in smi_source.
  static const std::vector<GpuSpec> gpus = {
      gpu({"H100-80GB", "NVIDIA H100 SXM5 80 GB", {"H100-SXM", "H100-SXM5-80GB", "H100 80GB HBM3"}, "hopper",
           kNvlink, 80, "NVIDIA H100 Tensor Core GPU datasheet (H100 SXM: 80 GB)", 81559,
           "public nvidia-smi logs of 'NVIDIA H100 80GB HBM3'", kHopperContextBytes, kEstimate, "HGX H100: NVSwitch"}),
      gpu({"H100-PCIe", "NVIDIA H100 PCIe 80 GB", {"H100-PCIe-80GB"}, "hopper", kPcieP2p, 80,
           "NVIDIA H100 PCIe GPU product brief (PB-11133-001: 80 GB HBM2e)", 81559,
           "public nvidia-smi logs of 'NVIDIA H100 PCIe'", kHopperContextBytes, kEstimate,
           "PCIe card; an NVLink bridge joins pairs at most, so TP 4 and 8 cross PCIe"}),
      gpu({"H100-NVL", "NVIDIA H100 NVL 94 GB", {"H100-NVL-94GB"}, "hopper", kPcieP2p, 94,
           "NVIDIA H100 Tensor Core GPU datasheet (H100 NVL: 94 GB)", 95830,
           "public nvidia-smi logs of 'NVIDIA H100 NVL'", kHopperContextBytes, kEstimate,
           "PCIe card; NVLink bridges join pairs, so TP 4 and 8 cross PCIe"}),
      gpu({"H200", "NVIDIA H200 SXM 141 GB", {"H200-SXM", "H200-141GB"}, "hopper", kNvlink, 141,
           "NVIDIA H200 Tensor Core GPU datasheet (H200 SXM: 141 GB)", 143771,
           "MEASURED on this project's H200 (driver 580.159.04, CUDA 13.0): 143771 MiB, 616 reserved",
           kHopperContextBytes, kMeasured,
           "HGX H200: NVSwitch (the H200 NVL is a PCIe card: --interconnect pcie-p2p)"}),
      gpu({"H20-96GB", "NVIDIA H20 96 GB", {"H20"}, "hopper", kNvlink, 96,
           "no public NVIDIA datasheet found (a China-market board): 96 GB as nvidia-smi and press reports give it",
           97871, "public nvidia-smi logs of 'NVIDIA H20'", kHopperContextBytes, kEstimate,
           "HGX H20 boards: NVLink (reported, not from a datasheet)"}),
      gpu({"H20-141GB", "NVIDIA H20-3e 141 GB", {"H20-3e", "H20-141"}, "hopper", kNvlink, 141,
           "no public NVIDIA datasheet found: 141 GB HBM3e as press reports give it, UNVERIFIED; "
           "the nvidia-smi figure below equals the H200's",
           143771, "public nvidia-smi logs of 'NVIDIA H20-3e' (143771 MiB)", kHopperContextBytes, kEstimate,
           "HGX H20-3e boards: NVLink (reported, not from a datasheet)"}),
      gpu({"A100-80GB", "NVIDIA A100 SXM4 80 GB", {"A100-SXM4-80GB", "A100-SXM-80GB"}, "ampere", kNvlink, 80,
           "NVIDIA A100 Tensor Core GPU datasheet (A100 80GB SXM: 80 GB)", 81920,
           "public nvidia-smi logs of 'NVIDIA A100-SXM4-80GB'", kAmpereContextBytes, kEstimate,
           "HGX A100: NVSwitch"}),
      gpu({"B200", "NVIDIA B200 180 GB (HGX/DGX B200)", {"B200-180GB", "HGX B200"}, "blackwell", kNvlink, 180,
           "NVIDIA DGX B200 datasheet and user guide (8 x B200, 1,440 GB total: 180 GB each)", 183359,
           "public nvidia-smi logs of 'NVIDIA B200'", kBlackwellContextBytes, kEstimate, "HGX/DGX B200: NVSwitch"}),
      gpu({"L40S", "NVIDIA L40S 48 GB", {"L40S-48GB"}, "ada", kPcieP2p, 48,
           "NVIDIA L40S datasheet (48 GB GDDR6 with ECC; NVLink: no)", 46068,
           "public nvidia-smi logs of 'NVIDIA L40S' (ECC on)", kAdaContextBytes, kEstimate,
           "PCIe Gen4 card without NVLink; peer-to-peer ASSUMED (a datacenter board), not checked here"}),
      gpu({"RTX-PRO-6000", "NVIDIA RTX PRO 6000 Blackwell Server Edition 96 GB",
           {"RTX-PRO-6000-BSE", "RTX PRO 6000 Blackwell", "RTX PRO 6000 Blackwell Server Edition"},
           "blackwell", kPcieP2p, 96, "NVIDIA RTX PRO 6000 Blackwell Server Edition datasheet (96 GB GDDR7 with ECC)",
           97887,
           "public nvidia-smi logs of 'NVIDIA RTX PRO 6000 Blackwell Server Edition'; a vLLM test log's "
           "'95.0 GiB each' matches 97887 - 616 MiB",
           kBlackwellContextBytes, kEstimate,
           "PCIe Gen5 card without NVLink; peer-to-peer as in a public 4-GPU report (vllm-project/vllm issue 56128)"}),
  };
  return gpus;
}

std::string gpu_match_key(const std::string& name) {
  std::string key;
  for (unsigned char c : name) {
    if (c == ' ' || c == '-' || c == '_') {
      if (!key.empty() && key.back() != '-') key += '-';
    } else {
      key += static_cast<char>(std::tolower(c));
    }
  }
  if (!key.empty() && key.back() == '-') key.pop_back();
  if (key.rfind("nvidia-", 0) == 0) key.erase(0, 7);
  return key;
}

std::string gpu_names() {
  std::ostringstream known;
  for (const auto& g : gpu_catalog()) known << (known.tellp() > 0 ? ", " : "") << g.name;
  return known.str();
}

const GpuSpec& find_gpu(const std::string& name) {
  const std::string want = gpu_match_key(name);
  for (const auto& g : gpu_catalog()) {
    if (gpu_match_key(g.name) == want) return g;
    for (const auto& alias : g.aliases)
      if (gpu_match_key(alias) == want) return g;
  }
  std::vector<std::string> names;
  for (const auto& g : gpu_catalog()) {
    names.push_back(g.name);
    for (const auto& alias : g.aliases) names.push_back(alias);
  }
  TPB_INPUT_FAIL("--gpu: unknown GPU '" << name << "'" << did_you_mean(name, names) << " (known: " << gpu_names()
                                        << "; or give --gpu-mem-gib with the total cudaMemGetInfo reports)");
}

std::int64_t default_cuda_context_bytes() { return kHopperContextBytes; }

}  // namespace tpb
