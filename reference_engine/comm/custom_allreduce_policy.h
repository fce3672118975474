// The custom allreduce's placement rules as plain functions of what the ranks exchanged, so
// that the CPU tests pin them (the communicator, reference_engine/comm/custom/, applies them
// with the values it reads from CUDA and NVML).
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace tpb {

// The grid every block of which is resident at once beside the other ranks on the GPU: one
// block per SM shared among the ranks (the tuned shape), and at most half of what the GPU holds
// resident (sms x blocks_per_sm, split among the ranks), the rest left to other kernels.
// 0 with *why set where not even one block per rank fits.
int custom_allreduce_grid_cap(int sms, int blocks_per_sm, int ranks_on_gpu, int max_blocks, std::string* why);

// Answers whether two GPUs (by UUID) are joined by NVLink: 1 yes, 0 no, -1 unknown (*why).
using NvlinkQuery = std::function<int(const std::string&, const std::string&, std::string* why)>;

// Empty where the custom allreduce may run on the group whose ranks hold GPUs `uuids` (one
// entry per rank; ranks on one GPU repeat it); else why not: more than two distinct GPUs and
// some pair of them not joined by NVLink (or not known to be), unless `forced` (the scenario's
// comm.custom_on_pcie) — the rule vLLM and SGLang apply to PCIe-only groups.
std::string custom_allreduce_pcie_refusal(const std::vector<std::string>& uuids, bool forced, const NvlinkQuery& nvlink);

}  // namespace tpb
