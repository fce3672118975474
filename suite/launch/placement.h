// Placement: which GPU each rank of a tensor-parallel group runs on.
//
// - exclusive (default): one rank per GPU, rank r on device r. A group larger than the visible
//   GPUs cannot run (the case is recorded skipped). The only placement whose timings speak
//   for an interconnect.
// - shared: ranks packed onto the visible GPUs, consecutive ranks on one GPU:
//   ranks_per_gpu = ceil(tp / gpus), rank r on device r / ranks_per_gpu. Every TP >= 2 code
//   path then runs on a single GPU; timings measure contention, not an interconnect.
//
// A rank learns its place from its environment (rank_environment): TPB_DEVICE (its CUDA
// ordinal), TPB_RANKS_PER_GPU (ranks sharing its device; each owns 1/N of the device's memory
// in every plan and reading, see tpb/kernels/device.h), TPB_PLACEMENT, and, where its device
// is shared, a distinct NCCL_HOSTID: NCCL refuses two ranks on one device of one host, and a
// rank that is its own "host" talks to the others over NCCL's socket transport.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tpb {

enum class Placement { exclusive, shared };

// "exclusive" | "shared"; anything else is an InputError naming `where` and the value.
Placement parse_placement(const std::string& text, const std::string& where);
const char* placement_name(Placement placement);

struct RankPlacement {
  Placement placement = Placement::exclusive;
  int tp = 1;                    // ranks in the group
  int visible_gpus = 0;          // GPUs this machine shows
  int ranks_per_gpu = 1;         // ranks sharing one device (1 in exclusive placement)
  int gpus_used = 0;             // devices the group runs on
  std::vector<int> device_of_rank;  // CUDA ordinal of rank r
  std::string skip_reason;       // non-empty: the group cannot run here (device_of_rank empty)

  bool device_shared() const { return ranks_per_gpu > 1; }
};

// Places `tp` ranks on `visible_gpus` devices.
RankPlacement place_ranks(Placement placement, int tp, int visible_gpus);

// The environment entries ("NAME=value") that tell rank `rank` its place. `group_id` makes each
// rank's NCCL_HOSTID unique to this group (it is set only where the device is shared).
std::vector<std::string> rank_environment(const RankPlacement& placement, int rank, const std::string& group_id);

// This process's place as its environment says (TPB_DEVICE, else LOCAL_RANK, else `fallback`).
int rank_device_from_env(int fallback);

// How NCCL connects a group so placed: "socket (NCCL_HOSTID per rank, device shared)" or
// "default (NCCL's own choice: NVLink/P2P/SHM)".
std::string nccl_transport_text(const RankPlacement& placement);

// record.placement: {"placement", "ranks_per_gpu", "gpus_used", "devices" (per rank),
// "nccl_transport", "timings"}. "timings" says what a latency of this placement measures:
// an interconnect (exclusive), or contention of ranks sharing a GPU (shared, ranks_per_gpu > 1).
nlohmann::json placement_json(const RankPlacement& placement);

}  // namespace tpb
