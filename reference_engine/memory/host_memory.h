// The memory this host can give the CPU engine's ranks, as the kernel would let them have it:
// MemAvailable (/proc/meminfo: free memory plus what reclaim frees without swapping), lowered
// to the room left under this process's cgroup limit where one is set (cgroup v2 memory.max
// minus memory.current, v1 memory.limit_in_bytes minus memory.usage_in_bytes): in a container
// MemAvailable is the whole machine's, and the cgroup's OOM killer ends a rank long before.
// The CPU engine's cases are planned against it (suite/scenario/case_plan.h,
// plan_cpu_engine_case), as GPU cases are planned against the device's memory.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tpb {

struct HostMemory {
  std::int64_t bytes = 0;  // available now, bytes
  std::string source;      // where the number comes from, for a verdict: "MemAvailable", "cgroup memory.max"
};

// This host's, read now; nullopt where /proc/meminfo cannot be read (then nothing is planned).
std::optional<HostMemory> available_host_memory();

// The parts, for tests. MemAvailable of a /proc/meminfo text ("MemAvailable:  23885516 kB"),
// in bytes; nullopt when the line is missing or malformed.
std::optional<std::int64_t> meminfo_available_bytes(std::string_view meminfo);
// Room under a cgroup limit from the limit file's and the usage file's texts: limit - usage
// (at least 0); nullopt for no limit ("max", or v1's 2^63 rounded to a page) or text that is
// not a number.
std::optional<std::int64_t> cgroup_room_bytes(std::string_view limit, std::string_view usage);

}  // namespace tpb
