// What each host of a run had: the facts of the machine (collect_host_facts, provenance.h)
// as a rank on that host saw them, gathered into run.json's provenance.hosts.
//
// One rank per host and group reports (reports_host_facts): right after its hello it sends
// {"type": "host_facts", "pid": its pid, "facts": collect_host_facts()}; the launcher hands
// each report over once, with the case during which it arrived (CaseRun::host_reports). The
// run keeps one entry per host id, not per host name: under --virtual-hosts the ranks of one
// machine claim distinct ids, and a record's `hosts[r].host_id` is the key into the list.
//
// A host reports again with every new group (a group per model and TP). The first report's
// facts stand; a later one that differs is not merged silently: the entry's `differences`
// keeps, per such report, who sent it and each field that differs ("env.NCCL_DEBUG":
// {"first", "now"}; a field missing on one side is null there). Identical reports only count
// (`reports`).
#pragma once

#include <nlohmann/json.hpp>

namespace tpb {

// Whether rank `rank` of `world_size` reports its host's facts: the first rank of its host.
// Under virtual hosts (`virtual_hosts` >= 2) the first rank of its block (virtual_host_id),
// else the rank whose local rank is 0 (one per host under mpirun and srun; rank 0 under fork,
// where local rank = rank).
bool reports_host_facts(int rank, int world_size, int local_rank, int virtual_hosts);

// One report as the launcher hands it over: {"host_id": the host id the launcher knows the
// rank by (as in a record's hosts), "reported_by": {"group": the group id, "rank", "pid": as
// the rank sent it}, "facts": collect_host_facts() of the rank}.
nlohmann::json host_report(const std::string& host_id, const std::string& group, int rank, int pid,
                           const nlohmann::json& facts);

// Merges `report` into `hosts` (run.json provenance.hosts: an array of entries, each the first
// report's facts plus "host_id", "reported_by", "reports" (how many reports merged into it) and
// "differences"). Returns whether `hosts` changed. A report without a host id or facts object
// is ignored.
bool merge_host_report(nlohmann::json& hosts, const nlohmann::json& report);

}  // namespace tpb
