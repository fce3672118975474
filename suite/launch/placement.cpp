#include "suite/launch/placement.h"

#include <cstdlib>

#include "tpb/check.h"

namespace tpb {

namespace {

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  TPB_INPUT_CHECK(end != v && *end == '\0' && n >= 0 && n < (1 << 20),
                  "environment " << name << "=" << v << ": expected a non-negative integer");
  return static_cast<int>(n);
}

}  // namespace

Placement parse_placement(const std::string& text, const std::string& where) {
  if (text == "exclusive") return Placement::exclusive;
  if (text == "shared") return Placement::shared;
  TPB_INPUT_FAIL(where << ": expected \"exclusive\" or \"shared\", got \"" << text << "\"");
}

const char* placement_name(Placement placement) { return placement == Placement::shared ? "shared" : "exclusive"; }

RankPlacement place_ranks(Placement placement, int tp, int visible_gpus) {
  TPB_CHECK(tp >= 1, "place_ranks: tp " << tp);
  RankPlacement p;
  p.placement = placement;
  p.tp = tp;
  p.visible_gpus = visible_gpus;
  if (visible_gpus <= 0) {
    p.skip_reason = "no GPU is visible";
    return p;
  }
  if (placement == Placement::exclusive) {
    if (tp > visible_gpus) {
      p.skip_reason = "needs " + std::to_string(tp) + " GPUs, " + std::to_string(visible_gpus) +
                      " visible (exclusive placement; --placement shared packs the ranks onto fewer GPUs)";
      return p;
    }
    p.ranks_per_gpu = 1;
  } else {
    p.ranks_per_gpu = (tp + visible_gpus - 1) / visible_gpus;
  }
  p.gpus_used = (tp + p.ranks_per_gpu - 1) / p.ranks_per_gpu;
  for (int r = 0; r < tp; ++r) p.device_of_rank.push_back(r / p.ranks_per_gpu);
  return p;
}

std::vector<std::string> rank_environment(const RankPlacement& p, int rank, const std::string& group_id) {
  TPB_CHECK(p.skip_reason.empty() && rank >= 0 && rank < static_cast<int>(p.device_of_rank.size()),
            "rank_environment: rank " << rank << " of a group of " << p.device_of_rank.size());
  std::vector<std::string> env = {"TPB_DEVICE=" + std::to_string(p.device_of_rank[static_cast<std::size_t>(rank)]),
                                  "TPB_RANKS_PER_GPU=" + std::to_string(p.ranks_per_gpu),
                                  std::string("TPB_PLACEMENT=") + placement_name(p.placement)};
  if (p.device_shared()) env.push_back("NCCL_HOSTID=" + group_id + "-rank" + std::to_string(rank));
  return env;
}

int rank_device_from_env(int fallback) {
  const int device = env_int("TPB_DEVICE", -1);
  if (device >= 0) return device;
  return env_int("LOCAL_RANK", fallback);
}

std::string nccl_transport_text(const RankPlacement& p) {
  return p.device_shared() ? "socket (NCCL_HOSTID per rank: ranks share a device)"
                           : "default (NCCL's own choice)";
}

nlohmann::json placement_json(const RankPlacement& p) {
  return {{"placement", placement_name(p.placement)},
          {"ranks_per_gpu", p.ranks_per_gpu},
          {"gpus_used", p.gpus_used},
          {"visible_gpus", p.visible_gpus},
          {"devices", p.device_of_rank},
          {"nccl_transport", nccl_transport_text(p)},
          {"timings", p.device_shared() ? "contention: ranks share a GPU; not an interconnect measurement"
                                        : "one rank per GPU"}};
}

}  // namespace tpb
