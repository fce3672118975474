#include "reference_engine/comm/host_layout.h"

#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <set>

#include "reference_engine/comm/backends.h"
#include "tpb/check.h"

namespace tpb {

std::string this_host_name() {
  char name[HOST_NAME_MAX + 1] = {};
  TPB_CHECK(gethostname(name, sizeof name - 1) == 0, "gethostname failed");
  return name;
}

std::string this_host_id() {
  const char* id = std::getenv("TPB_HOST_ID");
  if (id != nullptr && *id != '\0') return id;
  return this_host_name();
}

std::string virtual_host_id(int rank, int world_size, int hosts) {
  TPB_CHECK(world_size >= 1 && hosts >= 1 && rank >= 0 && rank < world_size,
            "virtual_host_id(" << rank << ", " << world_size << ", " << hosts << ")");
  return "vhost" + std::to_string(static_cast<long long>(rank) * hosts / world_size);
}

int HostLayout::host_count() const {
  return static_cast<int>(std::set<std::string>(host_of_rank.begin(), host_of_rank.end()).size());
}

std::string HostLayout::describe() const {
  std::string out;
  for (std::size_t first = 0; first < host_of_rank.size();) {
    std::size_t last = first;
    while (last + 1 < host_of_rank.size() && host_of_rank[last + 1] == host_of_rank[first]) ++last;
    out += out.empty() ? "" : ", ";
    out += first == last ? "rank " + std::to_string(first) : "ranks " + std::to_string(first) + "-" + std::to_string(last);
    out += " on " + host_of_rank[first];
    first = last + 1;
  }
  return out;
}

HostLayout gather_host_layout(Bootstrap& bootstrap) { return {bootstrap.all_gather(this_host_id())}; }

BackendAcrossHosts backend_across_hosts(const std::string& requested, const HostLayout& layout) {
  const BackendInfo* row = find_backend(requested);
  TPB_INPUT_CHECK(row != nullptr, "allreduce backend '" << requested << "' is unknown (known: " << backend_list() << ")");
  if (!layout.spans_hosts() || (row->across_hosts != nullptr && row->across_hosts == requested)) return {requested, "", ""};
  const std::string where = std::to_string(layout.host_count()) + " hosts (" + layout.describe() + ")";
  if (row->across_hosts == nullptr) {
    std::string crossing;  // the rows of the same device that may span hosts
    for (const BackendInfo* other : backend_table())
      if (other->runs_on == row->runs_on && other->across_hosts != nullptr && other->across_hosts == std::string_view(other->name))
        crossing += (crossing.empty() ? "" : ", ") + std::string(other->name);
    return {"", "", requested + " works only within one host, and this group of " + std::to_string(layout.host_of_rank.size()) +
                        " ranks spans " + where + "; backends that cross hosts: " + (crossing.empty() ? "none" : crossing)};
  }
  return {row->across_hosts, requested + " works only within one host; the group spans " + where + ": using " + row->across_hosts, ""};
}

}  // namespace tpb
