#include "reference_engine/memory/meter.h"

#include "tpb/check.h"
#include "tpb/kernels/device.h"

namespace tpb {

void MemoryMeter::mark(const std::string& phase, std::int64_t accounted_bytes) {
  MemorySample s;
  s.phase = phase;
  s.accounted_bytes = accounted_bytes;
  if (on_device_) {
    std::size_t free_bytes = 0, total_bytes = 0;
    TPB_CHECK(current_device_memory(&free_bytes, &total_bytes),
              "memory meter: cudaMemGetInfo failed at phase '" << phase << "'");
    s.device_free = static_cast<std::int64_t>(free_bytes);
    s.device_total = static_cast<std::int64_t>(total_bytes);
  }
  samples_.push_back(s);
}

const MemorySample* MemoryMeter::find(const std::string& phase) const {
  for (const auto& s : samples_)
    if (s.phase == phase) return &s;
  return nullptr;
}

std::optional<std::int64_t> MemoryMeter::growth(const std::string& from, const std::string& to) const {
  const MemorySample* a = find(from);
  const MemorySample* b = find(to);
  if (!a || !b) return std::nullopt;
  if (on_device_) return b->device_used() - a->device_used();
  return b->accounted_bytes - a->accounted_bytes;
}

nlohmann::json MemoryMeter::to_json() const {
  nlohmann::json j = {{"source", on_device_ ? device_memory_source() : "accounting"}};
  for (const auto& s : samples_)
    j[s.phase] = {{"used_bytes", on_device_ ? s.device_used() : s.accounted_bytes},
                  {"free_bytes", s.device_free},
                  {"total_bytes", s.device_total},
                  {"accounted_bytes", s.accounted_bytes}};
  return j;
}

}  // namespace tpb
