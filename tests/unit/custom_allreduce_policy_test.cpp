// The custom allreduce's rules that need no GPU: the grid cap that keeps every rank's blocks
// resident, the PCIe-only refusal, and the agreement the ranks must reach at construction
// (reference_engine/comm/custom_allreduce_policy.h, agreement.h).
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "reference_engine/comm/agreement.h"
#include "reference_engine/comm/custom_allreduce_policy.h"
#include "tests/support/test_ranks.h"
#include "tpb/check.h"

namespace tpb {
namespace {

TEST(CustomAllreduceGridCap, OneBlockPerSmSharedAmongTheRanksWhereTwoFit) {
  // H100: 132 SMs; the TP 2 kernels fit twice per SM.
  EXPECT_EQ(custom_allreduce_grid_cap(132, 2, 1, 256, nullptr), 132);
  EXPECT_EQ(custom_allreduce_grid_cap(132, 2, 2, 256, nullptr), 66);
  EXPECT_EQ(custom_allreduce_grid_cap(132, 4, 8, 256, nullptr), 16);
  EXPECT_EQ(custom_allreduce_grid_cap(300, 2, 1, 256, nullptr), 256) << "the signal's per-block arrays bound it";
}

TEST(CustomAllreduceGridCap, HalfTheResidentCapacityIsLeftToOtherKernels) {
  // One block per SM (the TP 8 one-shot kernel): 8 ranks on one GPU get 8 blocks each, 64
  // of 132 SMs, not 16 each (128 of 132, which one other kernel's blocks would starve).
  EXPECT_EQ(custom_allreduce_grid_cap(132, 1, 8, 256, nullptr), 8);
  EXPECT_EQ(custom_allreduce_grid_cap(132, 1, 1, 256, nullptr), 66);
  // Where half is less than one block, one block (all of them still fit).
  EXPECT_EQ(custom_allreduce_grid_cap(8, 1, 8, 256, nullptr), 1);
}

TEST(CustomAllreduceGridCap, RefusedWithTheReasonWhereNotOneBlockPerRankFits) {
  std::string why;
  EXPECT_EQ(custom_allreduce_grid_cap(6, 1, 8, 256, &why), 0);  // an MPS limit of 6 SMs, 8 ranks
  EXPECT_NE(why.find("8 rank(s) share a GPU whose 6 visible SMs hold 1"), std::string::npos) << why;
  why.clear();
  EXPECT_EQ(custom_allreduce_grid_cap(132, 0, 1, 256, &why), 0);  // the kernel does not fit at all
  EXPECT_NE(why.find("fewer than one block per rank"), std::string::npos) << why;
}

// A box described by its NVLink pairs; every query is counted.
struct Box {
  std::map<std::pair<std::string, std::string>, int> links;  // (a, b) with a < b -> answer
  int queries = 0;
  NvlinkQuery query() {
    return [this](const std::string& a, const std::string& b, std::string* why) {
      ++queries;
      const auto it = links.find(a < b ? std::make_pair(a, b) : std::make_pair(b, a));
      if (it == links.end()) return 0;
      if (it->second < 0 && why != nullptr) *why = "nvmlDeviceGetP2PStatus (NVLink) returned 3";
      return it->second;
    };
  }
};

TEST(CustomAllreducePcieRefusal, TwoGpusOrOneRunWithoutAsking) {
  Box pcie;  // no NVLink anywhere
  EXPECT_EQ(custom_allreduce_pcie_refusal({"GPU-a", "GPU-b"}, false, pcie.query()), "");
  EXPECT_EQ(custom_allreduce_pcie_refusal(std::vector<std::string>(8, "GPU-a"), false, pcie.query()), "")
      << "8 ranks on one GPU (shared placement) use no interconnect";
  EXPECT_EQ(pcie.queries, 0);
}

TEST(CustomAllreducePcieRefusal, MoreThanTwoPcieOnlyGpusRunNcclUnlessForced) {
  Box pcie;
  const std::vector<std::string> four = {"GPU-a", "GPU-b", "GPU-c", "GPU-d"};
  const std::string why = custom_allreduce_pcie_refusal(four, false, pcie.query());
  EXPECT_NE(why.find("4 GPUs without NVLink between GPU-a and GPU-b"), std::string::npos) << why;
  EXPECT_NE(why.find("comm.custom_on_pcie forces it"), std::string::npos) << why;
  EXPECT_EQ(custom_allreduce_pcie_refusal(four, true, pcie.query()), "") << "forced by the scenario";
}

TEST(CustomAllreducePcieRefusal, EveryPairMustBeJoinedAndUnknownIsNotJoined) {
  Box box;
  const std::vector<std::string> gpus = {"GPU-a", "GPU-b", "GPU-c"};
  box.links = {{{"GPU-a", "GPU-b"}, 1}, {{"GPU-a", "GPU-c"}, 1}, {{"GPU-b", "GPU-c"}, 1}};
  EXPECT_EQ(custom_allreduce_pcie_refusal(gpus, false, box.query()), "");
  EXPECT_EQ(box.queries, 3);
  box.links[{"GPU-b", "GPU-c"}] = 0;
  EXPECT_NE(custom_allreduce_pcie_refusal(gpus, false, box.query()).find("between GPU-b and GPU-c"), std::string::npos);
  box.links[{"GPU-b", "GPU-c"}] = -1;
  const std::string why = custom_allreduce_pcie_refusal(gpus, false, box.query());
  EXPECT_NE(why.find("NVML cannot say: nvmlDeviceGetP2PStatus (NVLink) returned 3"), std::string::npos) << why;
}

TEST(CustomAllreduceAgreement, RanksThatAgreePassAndOneThatDiffersIsNamedOnEveryRank) {
  test::expect_all_ranks_passed(test::run_thread_ranks(3, [](Bootstrap& bs) {
    require_agreement(bs, "custom allreduce max_bytes", "8388608");
    try {
      require_agreement(bs, "auto allreduce thresholds", bs.rank() == 2 ? "65536, 262144" : "16384, 262144");
      ADD_FAILURE() << "rank " << bs.rank() << " was not told";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("auto allreduce thresholds: the ranks disagree: rank 0 has 16384, 262144, rank 2 has "
                          "65536, 262144"),
                std::string::npos)
          << what;
    }
  }));
}

}  // namespace
}  // namespace tpb
