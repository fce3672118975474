// run.json provenance.hosts (suite/launch/host_facts.h): which rank reports its host, and how the
// reports of a run's groups merge: one entry per host id (virtual hosts of one machine apart),
// the first report's facts kept, a later report that differs noted field by field, never
// merged silently. The reports coming from the ranks themselves: launcher_test.cpp and
// tests/cli/mpirun_virtual_hosts.sh.
#include <gtest/gtest.h>

#include <vector>

#include "suite/launch/host_facts.h"
#include "suite/records/provenance.h"

namespace tpb {
namespace {

using nlohmann::json;

std::vector<int> reporters(int world_size, const std::vector<int>& local_rank, int virtual_hosts) {
  std::vector<int> r;
  for (int rank = 0; rank < world_size; ++rank)
    if (reports_host_facts(rank, world_size, local_rank[static_cast<std::size_t>(rank)], virtual_hosts)) r.push_back(rank);
  return r;
}

TEST(HostFacts, OneReporterPerHost) {
  // fork: local rank = rank, one host.
  EXPECT_EQ(reporters(4, {0, 1, 2, 3}, 0), std::vector<int>({0}));
  // mpirun over two hosts of two slots: the local rank 0 of each.
  EXPECT_EQ(reporters(4, {0, 1, 0, 1}, 0), std::vector<int>({0, 2}));
  // Virtual hosts: the first rank of each block, whatever the local ranks say.
  EXPECT_EQ(reporters(4, {0, 1, 2, 3}, 2), std::vector<int>({0, 2}));
  EXPECT_EQ(reporters(8, {0, 1, 2, 3, 4, 5, 6, 7}, 4), std::vector<int>({0, 2, 4, 6}));
  EXPECT_EQ(reporters(1, {0}, 2), std::vector<int>({0}));
}

json facts(const std::string& hostname, const std::string& nccl_debug) {
  return {{"hostname", hostname}, {"cpu_count", 2}, {"gpus", json::array()}, {"nvidia_driver", nullptr},
          {"env", {{"NCCL_DEBUG", nccl_debug}, {"CUDA_MODULE_LOADING", "LAZY"}}}};
}

TEST(HostFacts, FirstReportMakesAnEntryKeyedByHostId) {
  json hosts = json::array();
  EXPECT_TRUE(merge_host_report(hosts, host_report("vhost0", "tpb1-g0", 0, 101, facts("box", "WARN"))));
  EXPECT_TRUE(merge_host_report(hosts, host_report("vhost1", "tpb1-g0", 2, 103, facts("box", "WARN"))));
  ASSERT_EQ(hosts.size(), 2u) << "two virtual hosts of one machine are two entries: " << hosts.dump();
  const json& e = hosts[1];
  EXPECT_EQ(e["host_id"], "vhost1");
  EXPECT_EQ(e["hostname"], "box");
  EXPECT_EQ(e["env"]["NCCL_DEBUG"], "WARN");
  EXPECT_EQ(e["reported_by"], json({{"group", "tpb1-g0"}, {"rank", 2}, {"pid", 103}}));
  EXPECT_EQ(e["reports"], 1);
  EXPECT_EQ(e["differences"], json::array());
}

TEST(HostFacts, SameFactsFromAnotherGroupOnlyCount) {
  json hosts = json::array();
  merge_host_report(hosts, host_report("h1", "tpb1-g0", 0, 101, facts("h1", "WARN")));
  EXPECT_TRUE(merge_host_report(hosts, host_report("h1", "tpb1-g1", 0, 201, facts("h1", "WARN"))));
  ASSERT_EQ(hosts.size(), 1u);
  EXPECT_EQ(hosts[0]["reports"], 2);
  EXPECT_EQ(hosts[0]["reported_by"]["group"], "tpb1-g0") << "the first report stands";
  EXPECT_TRUE(hosts[0]["differences"].empty());
}

TEST(HostFacts, DifferingFactsAreNotedFieldByFieldAndTheFirstKept) {
  json hosts = json::array();
  merge_host_report(hosts, host_report("h1", "tpb1-g0", 0, 101, facts("h1", "WARN")));
  json later = facts("h1", "INFO");
  later["env"].erase("CUDA_MODULE_LOADING");
  later["cpu_count"] = 4;
  merge_host_report(hosts, host_report("h1", "tpb1-g1", 0, 201, later));
  ASSERT_EQ(hosts.size(), 1u);
  const json& e = hosts[0];
  EXPECT_EQ(e["env"]["NCCL_DEBUG"], "WARN");
  EXPECT_EQ(e["cpu_count"], 2);
  EXPECT_EQ(e["reports"], 2);
  ASSERT_EQ(e["differences"].size(), 1u) << e.dump();
  const json& d = e["differences"][0];
  EXPECT_EQ(d["reported_by"]["group"], "tpb1-g1");
  EXPECT_EQ(d["fields"], json({{"env.NCCL_DEBUG", {{"first", "WARN"}, {"now", "INFO"}}},
                               {"env.CUDA_MODULE_LOADING", {{"first", "LAZY"}, {"now", nullptr}}},
                               {"cpu_count", {{"first", 2}, {"now", 4}}}}));
  // A third report equal to the first adds no note.
  merge_host_report(hosts, host_report("h1", "tpb1-g2", 0, 301, facts("h1", "WARN")));
  EXPECT_EQ(hosts[0]["reports"], 3);
  EXPECT_EQ(hosts[0]["differences"].size(), 1u);
}

TEST(HostFacts, MalformedReportsChangeNothing) {
  json hosts = json::array();
  EXPECT_FALSE(merge_host_report(hosts, host_report("", "g", 0, 1, facts("h", "WARN"))));
  EXPECT_FALSE(merge_host_report(hosts, host_report("h", "g", 0, 1, "not an object")));
  EXPECT_FALSE(merge_host_report(hosts, json::object()));
  EXPECT_TRUE(hosts.empty());
}

// The controller's provenance and a rank's report describe a machine with the same function:
// every host fact is in the controller's provenance, with the same value.
TEST(HostFacts, ControllerProvenanceHoldsTheHostFacts) {
  const json host = collect_host_facts(), full = collect_provenance("2026-01-01T00:00:00Z");
  for (const char* key : {"hostname", "os", "cpu_count", "gpus", "cuda_driver", "cuda_runtime", "nvidia_driver",
                          "nccl_version", "env", "git_sha"}) {
    ASSERT_TRUE(host.contains(key)) << key;
    EXPECT_EQ(full[key], host[key]) << key;
  }
}

}  // namespace
}  // namespace tpb
