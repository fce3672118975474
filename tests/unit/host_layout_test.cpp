// Which ranks share a host, and the host-local rules (reference_engine/comm/host_layout.h):
// shm is refused for a group that spans hosts, custom allreduce runs nccl and says why, the
// backends that cross hosts run as asked. The factory applies them on real ranks: two forked
// ranks claiming two hosts (TPB_HOST_ID, as --virtual-hosts gives them) are refused shm.
#include <gtest/gtest.h>

#include <cstdlib>

#include "reference_engine/comm/factory.h"
#include "reference_engine/comm/host_layout.h"
#include "tests/support/rank_group.h"
#include "tpb/check.h"

namespace tpb {
namespace {

TEST(HostLayout, VirtualHostsAreBlocksOfConsecutiveRanks) {
  HostLayout layout;
  for (int r = 0; r < 4; ++r) layout.host_of_rank.push_back(virtual_host_id(r, 4, 2));
  EXPECT_EQ(layout.host_of_rank, (std::vector<std::string>{"vhost0", "vhost0", "vhost1", "vhost1"}));
  EXPECT_EQ(layout.host_count(), 2);
  EXPECT_EQ(layout.describe(), "ranks 0-1 on vhost0, ranks 2-3 on vhost1");
  EXPECT_EQ(virtual_host_id(0, 1, 2), "vhost0");  // a group of one is on one host
  EXPECT_EQ(virtual_host_id(2, 3, 2), "vhost1");
  EXPECT_EQ((HostLayout{{"a", "b", "a"}}).describe(), "rank 0 on a, rank 1 on b, rank 2 on a");
}

TEST(HostLayout, HostLocalBackendsNeverSpanHosts) {
  const HostLayout one{{"n1", "n1"}}, two{{"n1", "n1", "n2", "n2"}};
  for (const char* backend : {"shm", "mpi", "nccl", "custom-oneshot", "auto"}) {
    const BackendAcrossHosts same = backend_across_hosts(backend, one);
    EXPECT_EQ(same.backend, backend);
    EXPECT_TRUE(same.fallback_reason.empty() && same.refusal.empty()) << backend;
  }
  const BackendAcrossHosts shm = backend_across_hosts("shm", two);
  EXPECT_TRUE(shm.backend.empty());
  EXPECT_EQ(shm.refusal,
            "shm works only within one host, and this group of 4 ranks spans 2 hosts (ranks 0-1 on n1, ranks 2-3 on n2); "
            "backends that cross hosts: mpi");
  for (const char* custom : {"custom-oneshot", "custom-twoshot", "auto"}) {
    const BackendAcrossHosts c = backend_across_hosts(custom, two);
    EXPECT_EQ(c.backend, "nccl") << custom;
    EXPECT_EQ(c.fallback_reason, std::string(custom) + " works only within one host; the group spans 2 hosts (ranks 0-1 on n1, "
                                                       "ranks 2-3 on n2): using nccl");
  }
  for (const char* crossing : {"mpi", "nccl"}) {
    const BackendAcrossHosts c = backend_across_hosts(crossing, two);
    EXPECT_EQ(c.backend, crossing);
    EXPECT_TRUE(c.fallback_reason.empty() && c.refusal.empty());
  }
}

TEST(HostLayout, TheFactoryRefusesShmAcrossHosts) {
  RankGroupOptions options;
  options.group_id = "host-layout-test";
  options.timeout_s = 60;
  const auto exits = run_forked_ranks(2, options, [](Bootstrap& bootstrap) {
    ::setenv("TPB_HOST_ID", bootstrap.rank() == 0 ? "vhost0" : "vhost1", 1);
    try {
      make_communicator("shm", bootstrap, CommOptions{});
    } catch (const InputError& e) {
      const std::string what = e.what();
      return what.find("shm works only within one host, and this group of 2 ranks spans 2 hosts (rank 0 on vhost0, rank 1 on "
                       "vhost1)") != std::string::npos ? 0 : 3;
    }
    return 4;  // built: the rule did not apply
  });
  for (const auto& e : exits) EXPECT_TRUE(e.passed()) << "rank " << e.rank << ": exit " << e.code << " " << e.exception;
  // One host: the same ranks get shm.
  const auto same_host = run_forked_ranks(2, options, [](Bootstrap& bootstrap) {
    ::setenv("TPB_HOST_ID", "vhost0", 1);
    return make_communicator("shm", bootstrap, CommOptions{})->name() == "shm" ? 0 : 3;
  });
  for (const auto& e : same_host) EXPECT_TRUE(e.passed()) << "rank " << e.rank << ": exit " << e.code << " " << e.exception;
}

}  // namespace
}  // namespace tpb
