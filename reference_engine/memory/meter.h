// MemoryMeter: what one rank's memory actually is at the named phases of a case, to set
// against the planner's prediction (check plan_matches_measured).
//
// On a GPU each mark reads the rank's device memory (tpb/kernels/device.h: cudaMemGetInfo,
// device-wide, for a rank alone on its GPU; its share and its own process's use where ranks
// share one), so it sees what the CUDA context, NCCL and cuBLAS take as well as the engine's
// own allocations, and records the
// engine's own allocation count beside it. A measured term is the growth of device use between
// two phases: weights = used(after_weights) - used(after_comm). On the CPU there is no device
// counter: the host-allocation source reads the process's live heap from the allocator itself
// (glibc's mallinfo2(): uordblks, the bytes in use in every arena's chunks, plus hblkhd, the
// bytes of chunks served by mmap, page-rounded), so a term is what the process really
// allocated between two phases, chunk headers and rounding included, not what the engine says
// it allocated. Where mallinfo2 is missing (not glibc, or glibc < 2.33) the meter falls back
// to the engine's own accounting and says so in its source.
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

// Where a meter's readings come from.
enum class MemorySource {
  accounting,        // the engine's own allocation count (what the caller passes to mark)
  device,            // current_device_memory at each mark
  host_allocations,  // host_allocated_bytes() at each mark (accounting where unavailable)
};

// The process's live heap in bytes (glibc mallinfo2: uordblks + hblkhd; under ASan, its
// allocator's count of live bytes), or -1 where the allocator cannot say (then the meter uses
// the accounting).
std::int64_t host_allocated_bytes();
// The label of that reading in record.memory[rank].source: begins with kHostAllocationSource.
inline constexpr const char* kHostAllocationSource = "host allocations";
std::string host_allocation_source();

struct MemorySample {
  std::string phase;
  std::int64_t accounted_bytes = 0;  // the engine's own allocations, cumulative
  std::int64_t host_bytes = -1;      // host_allocated_bytes() (-1: not read)
  std::int64_t device_free = -1;     // current_device_memory free (-1: no device)
  std::int64_t device_total = -1;    // current_device_memory total (-1: no device)
  std::int64_t device_used() const { return device_total < 0 ? -1 : device_total - device_free; }
};

class MemoryMeter {
 public:
  // on_device: read current_device_memory at each mark (the caller has set the device);
  // otherwise the accounting.
  explicit MemoryMeter(bool on_device) : source_(on_device ? MemorySource::device : MemorySource::accounting) {}
  // host_allocations degrades to accounting where host_allocated_bytes() cannot read.
  explicit MemoryMeter(MemorySource source);

  void mark(const std::string& phase, std::int64_t accounted_bytes);

  // Growth between two marked phases: device use on a GPU, the process's heap with the
  // host-allocation source, the accounting otherwise.
  // nullopt when either phase was not marked.
  std::optional<std::int64_t> growth(const std::string& from, const std::string& to) const;

  bool on_device() const { return source_ == MemorySource::device; }
  MemorySource source() const { return source_; }
  const std::vector<MemorySample>& samples() const { return samples_; }

  // A rank's record.memory entry: {"source": device_memory_source() | host_allocation_source()
  //  | "accounting", "<phase>": {"used_bytes", "free_bytes", "total_bytes", "accounted_bytes"},
  //  ...}. used_bytes is device use on a GPU, the process's live heap with the host source and
  // the accounting otherwise (what baselines compare per phase).
  nlohmann::json to_json() const;

 private:
  const MemorySample* find(const std::string& phase) const;

  static constexpr std::size_t kReservedSamples = 8;  // phases a case marks, at most (see above)
  MemorySource source_;
  std::vector<MemorySample> samples_;
};

}  // namespace tpb
