#include "suite/launch/host_facts.h"

#include <set>
#include <string>

#include "reference_engine/comm/host_layout.h"

namespace tpb {

namespace {

using nlohmann::json;

// The keys an entry of provenance.hosts adds to the facts it keeps.
const std::set<std::string>& bookkeeping_keys() {
  static const std::set<std::string> keys = {"host_id", "reported_by", "reports", "differences"};
  return keys;
}

// Every field where `now` differs from `first`, by path ("env.NCCL_DEBUG"): objects are
// compared key by key, anything else (a GPU list, a version) as a whole.
void add_differences(const json& first, const json& now, const std::string& prefix, json& fields) {
  std::set<std::string> keys;
  for (const auto& [k, v] : first.items()) keys.insert(k);
  for (const auto& [k, v] : now.items()) keys.insert(k);
  for (const std::string& k : keys) {
    const json a = first.contains(k) ? first[k] : json(), b = now.contains(k) ? now[k] : json();
    if (a.is_object() && b.is_object())
      add_differences(a, b, prefix + k + ".", fields);
    else if (a != b)
      fields[prefix + k] = {{"first", a}, {"now", b}};
  }
}

}  // namespace

bool reports_host_facts(int rank, int world_size, int local_rank, int virtual_hosts) {
  if (virtual_hosts >= 2)
    return rank == 0 || virtual_host_id(rank - 1, world_size, virtual_hosts) != virtual_host_id(rank, world_size, virtual_hosts);
  return local_rank == 0;
}

json host_report(const std::string& host_id, const std::string& group, int rank, int pid, const json& facts) {
  return {{"host_id", host_id}, {"reported_by", {{"group", group}, {"rank", rank}, {"pid", pid}}}, {"facts", facts}};
}

bool merge_host_report(json& hosts, const json& report) {
  if (!hosts.is_array()) hosts = json::array();
  if (!report.is_object() || !report.contains("host_id") || !report["host_id"].is_string() ||
      report["host_id"].get<std::string>().empty() || !report.contains("facts") || !report["facts"].is_object())
    return false;
  const json& facts = report["facts"];
  const json reported_by = report.value("reported_by", json::object());
  for (json& entry : hosts) {
    if (entry.value("host_id", std::string()) != report["host_id"].get<std::string>()) continue;
    json kept = entry;
    for (const auto& k : bookkeeping_keys()) kept.erase(k);
    json fields = json::object();
    add_differences(kept, facts, "", fields);
    entry["reports"] = entry.value("reports", 1) + 1;
    if (!fields.empty()) entry["differences"].push_back({{"reported_by", reported_by}, {"fields", fields}});
    return true;
  }
  json entry = facts;
  for (const auto& k : bookkeeping_keys()) entry.erase(k);
  entry["host_id"] = report["host_id"];
  entry["reported_by"] = reported_by;
  entry["reports"] = 1;
  entry["differences"] = json::array();
  hosts.push_back(std::move(entry));
  return true;
}

}  // namespace tpb
