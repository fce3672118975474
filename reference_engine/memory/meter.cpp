#include "reference_engine/memory/meter.h"

#include <malloc.h>

#include "tpb/check.h"
#include "tpb/kernels/device.h"

#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
#define TPB_HAVE_MALLINFO2 1
#else
#define TPB_HAVE_MALLINFO2 0
#endif

// Under AddressSanitizer (the asan preset) malloc is the sanitizer's and glibc's mallinfo2 sees
// none of it (it read 0 bytes grown for 13 MiB allocated): the sanitizer allocator's own count of
// live bytes is read instead.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TPB_ASAN_ALLOCATOR 1
#endif
#endif
#if !defined(TPB_ASAN_ALLOCATOR) && defined(__SANITIZE_ADDRESS__)
#define TPB_ASAN_ALLOCATOR 1
#endif
#ifdef TPB_ASAN_ALLOCATOR
#include <sanitizer/allocator_interface.h>
#endif

namespace tpb {

std::int64_t host_allocated_bytes() {
#if defined(TPB_ASAN_ALLOCATOR)
  return static_cast<std::int64_t>(__sanitizer_get_current_allocated_bytes());
#elif TPB_HAVE_MALLINFO2
  const struct mallinfo2 info = ::mallinfo2();
  return static_cast<std::int64_t>(info.uordblks + info.hblkhd);
#else
  return -1;
#endif
}

std::string host_allocation_source() {
#if defined(TPB_ASAN_ALLOCATOR)
  return std::string(kHostAllocationSource) + " (ASan allocator: __sanitizer_get_current_allocated_bytes)";
#else
  return std::string(kHostAllocationSource) + " (glibc mallinfo2: uordblks + hblkhd)";
#endif
}

MemoryMeter::MemoryMeter(MemorySource source) : source_(source) {
  if (source_ == MemorySource::host_allocations && host_allocated_bytes() < 0) source_ = MemorySource::accounting;
  // The meter's own samples are allocated up front, so a host reading does not see them.
  samples_.reserve(kReservedSamples);
}

void MemoryMeter::mark(const std::string& phase, std::int64_t accounted_bytes) {
  MemorySample s;
  s.phase = phase;
  s.accounted_bytes = accounted_bytes;
  if (source_ == MemorySource::host_allocations) s.host_bytes = host_allocated_bytes();
  if (source_ == MemorySource::device) {
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
  switch (source_) {
    case MemorySource::device: return b->device_used() - a->device_used();
    case MemorySource::host_allocations: return b->host_bytes - a->host_bytes;
    case MemorySource::accounting: break;
  }
  return b->accounted_bytes - a->accounted_bytes;
}

nlohmann::json MemoryMeter::to_json() const {
  const std::string label = source_ == MemorySource::device             ? device_memory_source()
                            : source_ == MemorySource::host_allocations ? host_allocation_source()
                                                                        : std::string("accounting");
  nlohmann::json j = {{"source", label}};
  for (const auto& s : samples_)
    j[s.phase] = {{"used_bytes", source_ == MemorySource::device             ? s.device_used()
                                 : source_ == MemorySource::host_allocations ? s.host_bytes
                                                                             : s.accounted_bytes},
                  {"free_bytes", s.device_free},
                  {"total_bytes", s.device_total},
                  {"accounted_bytes", s.accounted_bytes}};
  return j;
}

}  // namespace tpb
