// The custom allreduce's placement rules (see custom_allreduce_policy.h).
#include "reference_engine/comm/custom_allreduce_policy.h"

#include <algorithm>
#include <set>
#include <sstream>

namespace tpb {

int custom_allreduce_grid_cap(int sms, int blocks_per_sm, int ranks_on_gpu, int max_blocks, std::string* why) {
  const int ranks = std::max(1, ranks_on_gpu);
  const int resident = sms * blocks_per_sm / ranks;  // blocks per rank that fit beside the others
  if (blocks_per_sm < 1 || resident < 1) {
    if (why != nullptr) {
      std::ostringstream os;
      os << ranks << " rank(s) share a GPU whose " << sms << " visible SMs hold " << blocks_per_sm
         << " allreduce block(s) each: fewer than one block per rank can be resident at once";
      *why = os.str();
    }
    return 0;
  }
  return std::max(1, std::min({sms / ranks, resident / 2, max_blocks}));
}

std::string custom_allreduce_pcie_refusal(const std::vector<std::string>& uuids, bool forced, const NvlinkQuery& nvlink) {
  const std::set<std::string> gpus(uuids.begin(), uuids.end());
  if (gpus.size() <= 2 || forced) return {};
  for (auto a = gpus.begin(); a != gpus.end(); ++a)
    for (auto b = std::next(a); b != gpus.end(); ++b) {
      std::string why;
      const int linked = nvlink(*a, *b, &why);
      if (linked == 1) continue;
      std::ostringstream os;
      os << gpus.size() << " GPUs without NVLink between " << *a << " and " << *b
         << (linked < 0 ? " (NVML cannot say: " + why + ")" : "")
         << ": custom allreduce is off on more than two PCIe-only GPUs, as in vLLM and SGLang "
            "(comm.custom_on_pcie forces it)";
      return os.str();
    }
  return {};
}

}  // namespace tpb
