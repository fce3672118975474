// MemoryMeter: what one rank's memory actually is at the named phases of a case, to set
// against the planner's prediction (check plan_matches_measured).
//
// On a GPU each mark reads the rank's device memory (tpb/kernels/device.h: cudaMemGetInfo,
// device-wide, for a rank alone on its GPU; its share and its own process's use where ranks
// share one), so it sees what the CUDA context, NCCL and cuBLAS take as well as the engine's
// own allocations, and records the
// engine's own allocation count beside it. A measured term is the growth of device use between
// two phases: weights = used(after_weights) - used(after_comm). On the CPU backend there is no
// device counter: terms come from the engine's and communicator's own accounting.
//
// Phases, in order (a case marks those it has): start, after_context, after_comm,
// after_weights, after_kv, peak (after the timed steps: workspaces and graph pools included).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tpb {

struct MemorySample {
  std::string phase;
  std::int64_t accounted_bytes = 0;  // the engine's own allocations, cumulative
  std::int64_t device_free = -1;     // current_device_memory free (-1: no device)
  std::int64_t device_total = -1;    // current_device_memory total (-1: no device)
  std::int64_t device_used() const { return device_total < 0 ? -1 : device_total - device_free; }
};

class MemoryMeter {
 public:
  // on_device: read current_device_memory at each mark (the caller has set the device).
  explicit MemoryMeter(bool on_device) : on_device_(on_device) {}

  void mark(const std::string& phase, std::int64_t accounted_bytes);

  // Growth between two marked phases: device use on a GPU, the accounting on the CPU.
  // nullopt when either phase was not marked.
  std::optional<std::int64_t> growth(const std::string& from, const std::string& to) const;

  bool on_device() const { return on_device_; }
  const std::vector<MemorySample>& samples() const { return samples_; }

  // A rank's record.memory entry: {"source": device_memory_source() | "accounting",
  //  "<phase>": {"used_bytes", "free_bytes", "total_bytes", "accounted_bytes"}, ...}. used_bytes
  // is device use on a GPU and the accounting on the CPU (what baselines compare per phase).
  nlohmann::json to_json() const;

 private:
  const MemorySample* find(const std::string& phase) const;

  bool on_device_;
  std::vector<MemorySample> samples_;
};

}  // namespace tpb
