#include "reference_engine/memory/host_memory.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <vector>

namespace tpb {

namespace {

std::string read_small_file(const std::string& path) {
  std::ifstream in(path);
  if (!in.good()) return {};
  std::string text;
  std::getline(in, text, '\0');
  return text.size() > (1 << 20) ? std::string() : text;
}

// A non-negative decimal at the start of `text` (after blanks); nullopt otherwise.
std::optional<std::int64_t> leading_number(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  std::int64_t value = 0;
  std::size_t digits = 0;
  for (; digits < text.size() && text[digits] >= '0' && text[digits] <= '9'; ++digits) {
    if (value > (INT64_MAX - 9) / 10) return std::nullopt;
    value = value * 10 + (text[digits] - '0');
  }
  if (digits == 0) return std::nullopt;
  return value;
}

// The cgroup paths of this process: "0::/path" (v2) and "N:memory:/path" (v1), from /proc/self/cgroup.
struct CgroupPaths {
  std::string v2, v1_memory;
};

CgroupPaths own_cgroups() {
  CgroupPaths out;
  std::istringstream in(read_small_file("/proc/self/cgroup"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("0::", 0) == 0) out.v2 = line.substr(3);
    const auto memory = line.find(":memory:");
    if (memory != std::string::npos) out.v1_memory = line.substr(memory + 8);
  }
  return out;
}

}  // namespace

std::optional<std::int64_t> meminfo_available_bytes(std::string_view meminfo) {
  const std::string_view key = "MemAvailable:";
  const auto at = meminfo.find(key);
  if (at == std::string_view::npos) return std::nullopt;
  const auto kib = leading_number(meminfo.substr(at + key.size()));
  if (!kib || *kib > INT64_MAX / 1024) return std::nullopt;
  return *kib * 1024;
}

std::optional<std::int64_t> cgroup_room_bytes(std::string_view limit, std::string_view usage) {
  const auto max = leading_number(limit), used = leading_number(usage);
  // No limit: v2 writes "max"; v1 writes 2^63 - 1 rounded down to a page.
  if (!max || !used || *max >= (std::int64_t{1} << 62)) return std::nullopt;
  return std::max<std::int64_t>(0, *max - *used);
}

std::optional<HostMemory> available_host_memory() {
  const auto available = meminfo_available_bytes(read_small_file("/proc/meminfo"));
  if (!available) return std::nullopt;
  HostMemory out{*available, "MemAvailable"};
  // The process's own cgroup, and the mounted root (a container's cgroup namespace shows its
  // own cgroup there): the smallest room of those that set a limit.
  const CgroupPaths own = own_cgroups();
  const std::vector<std::pair<std::string, std::string>> candidates = {
      {"/sys/fs/cgroup" + own.v2 + "/memory.max", "/sys/fs/cgroup" + own.v2 + "/memory.current"},
      {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"},
      {"/sys/fs/cgroup/memory" + own.v1_memory + "/memory.limit_in_bytes",
       "/sys/fs/cgroup/memory" + own.v1_memory + "/memory.usage_in_bytes"},
      {"/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"}};
  for (const auto& [limit, usage] : candidates) {
    const auto room = cgroup_room_bytes(read_small_file(limit), read_small_file(usage));
    if (room && *room < out.bytes) out = {*room, "the cgroup's limit (" + limit + ")"};
  }
  return out;
}

}  // namespace tpb
