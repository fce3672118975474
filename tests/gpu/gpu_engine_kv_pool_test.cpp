// GpuEngineOptions::mem_fraction on one GPU (issue 6, item 3): the engine sizes its KV cache
// as a serving engine does, with the planner's own function (size_kv_pool):
//   the pool is the formula on the engine's device-memory readings (current_device_memory,
//     tpb/kernels/device.h), and those readings are the device's (taken here around the
//     engine, within the allocator's rounding);
//   the logits are bitwise those of the exact-size cache (same layout, same max_len, so the
//     same split-K partition), after a resize too;
//   a fraction too small throws KvPoolInfeasible with the planner's sentence, leaves nothing
//     allocated, and the engine sizes again at a fraction that fits.
// The fractions are chosen from the engine's own readings to leave a small pool (256 MiB past
// the case), so a GPU shared with other tests keeps its memory. The readings are device-wide:
// another process allocating or freeing between them moves the pool (a ctest -j4 run once
// built 65,014 tokens at the "too small" fraction), so these tests run alone, as the
// memory-footprint tests do (scripts/gpu_run.sh runs -R 'MemoryBytes|KvPool' serially).
// A real two-rank group (GpuEngineKvPoolGroup) agrees its pool through the bootstrap and
// allocates the smaller rank's formula on both ranks.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "fork_group.h"
#include "gpu_test_support.h"
#include "reference_engine/comm/factory.h"
#include "reference_engine/config/model_config.h"
#include "reference_engine/gpu/gpu_engine.h"
#include "reference_engine/memory/planner.h"
#include "reference_engine/weights/weight_source.h"
#include "tests/unit/engine_test_support.h"

namespace tpb::test {
namespace {

constexpr std::int64_t kBatch = 2, kMaxLen = 16, kPrefill = 9, kDecodeSteps = 4;
constexpr double kReadingSlackBytes = 64.0 * (1 << 20);  // allocator rounding, handles, lazy module loads

GpuEngineOptions case_options(double mem_fraction) {
  GpuEngineOptions o;
  o.max_batch = kBatch;
  o.max_len = kMaxLen;
  o.max_prefill_tokens = kBatch * kPrefill;
  o.mem_fraction = mem_fraction;
  return o;
}

// Prefill kPrefill tokens per sequence, then kDecodeSteps decode steps: every step's logits
// as their bits, concatenated.
std::vector<std::uint32_t> run_case(GpuEngine& e) {
  const std::int64_t V = e.config().vocab_size;
  std::vector<std::int64_t> prompt(kBatch * kPrefill);
  for (std::size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<std::int64_t>(mix(i) % V);
  std::vector<std::uint32_t> bits;
  auto append = [&] {
    const std::vector<float>& l = e.logits();
    const std::size_t at = bits.size();
    bits.resize(at + l.size());
    std::memcpy(bits.data() + at, l.data(), l.size() * sizeof(float));
  };
  e.prefill(prompt, kBatch);
  append();
  for (std::int64_t s = 0; s < kDecodeSteps; ++s) {
    std::vector<std::int64_t> step(kBatch);
    for (std::int64_t b = 0; b < kBatch; ++b) step[b] = static_cast<std::int64_t>(mix(1000 + s * kBatch + b) % V);
    e.decode(step);
    append();
  }
  return bits;
}

// Free device memory as the engine reads it (current_device_memory: device-wide here, where
// this process is no rank of a shared placement).
std::int64_t free_bytes() {
  std::size_t free_b = 0, total_b = 0;
  TPB_CHECK(current_device_memory(&free_b, &total_b), "cannot read device memory");
  return static_cast<std::int64_t>(free_b);
}

// The pool is the formula on the engine's readings, holds the case, and is what it allocated.
void expect_formula_pool(const GpuEngine& e, double f, std::int64_t cell, const std::string& when) {
  const KvPoolSize& k = e.kv_pool_size();
  EXPECT_EQ(k.mem_fraction, f) << when;
  EXPECT_EQ(k.cell_bytes, cell) << when;
  EXPECT_EQ(k.requested_tokens, e.options().max_batch * e.options().max_len) << when;
  EXPECT_EQ(e.kv_pool_tokens(), kv_max_tokens(k.total_bytes, k.avail_bytes, f, cell)) << when;
  EXPECT_EQ(e.kv_pool_tokens(), k.max_tokens) << when;
  EXPECT_GE(e.kv_pool_tokens(), e.options().max_batch * e.options().max_len) << when;
  EXPECT_EQ(e.kv_cache_bytes(), static_cast<std::size_t>(e.kv_pool_tokens() * cell)) << when;
}

// Every test: the small-dsv3 engine on one GPU, and the case run first with the exact cache
// (mem_fraction 0): its logits are the reference, and its readings (free memory before and
// after the weights) are what the tests choose their fractions from.
class GpuEngineKvPool : public ::testing::Test {
 protected:
  void SetUp() override {
    TPB_REQUIRE_GPU();
    config = load_model_config_by_name(preset("small-dsv3"));
    weights = make_synthetic_weights(1234);
    cell = kv_cell_bytes(config, 2);
    GpuEngine e(config, Shard{0, 1}, comm, *weights, case_options(0));
    exact_pool_tokens = e.kv_pool_tokens();
    exact_cache_bytes = e.kv_cache_bytes();
    exact = run_case(e);
    readings = e.kv_pool_size();
  }
  // The smallest fraction whose pool holds `tokens` on the exact run's readings.
  double fraction_for(std::int64_t tokens) const {
    return kv_min_mem_fraction(readings.total_bytes, readings.avail_bytes, cell, tokens);
  }

  static constexpr std::int64_t need = kBatch * kMaxLen;
  ModelConfig config;
  LocalCommunicator comm;
  std::unique_ptr<WeightSource> weights;
  std::int64_t cell = 0;
  std::int64_t exact_pool_tokens = 0;
  std::size_t exact_cache_bytes = 0;
  std::vector<std::uint32_t> exact;
  KvPoolSize readings;
};

TEST_F(GpuEngineKvPool, PoolIsTheServingFormulaAndLogitsMatchTheExactCache) {
  ASSERT_EQ(cell, 144 * 4 * 2);  // (128 + 16) x 4 layers x bf16
  EXPECT_EQ(exact_pool_tokens, need);
  EXPECT_EQ(exact_cache_bytes, static_cast<std::size_t>(need * cell));
  ASSERT_GT(readings.total_bytes, readings.avail_bytes) << "the weights took no device memory?";
  const std::int64_t extra = (std::int64_t{256} << 20) / cell;
  const double f = fraction_for(need + extra);
  ASSERT_GT(f, 0.0);
  ASSERT_LT(f, 1.0);

  const std::int64_t free_before = free_bytes();
  GpuEngine e(config, Shard{0, 1}, comm, *weights, case_options(f));
  const std::int64_t free_after = free_bytes();
  expect_formula_pool(e, f, cell, "constructed");
  // The readings are the device's: total = free before the engine; avail = free after it plus
  // what it allocated after the reading (the pool and the step buffers; activation_bytes also
  // counts the GEMM workspace, allocated before the weights, so it is within the slack).
  const KvPoolSize& k = e.kv_pool_size();
  EXPECT_NEAR(k.total_bytes, static_cast<double>(free_before), kReadingSlackBytes);
  const double avail_seen = static_cast<double>(free_after) + static_cast<double>(e.kv_cache_bytes()) +
                            static_cast<double>(e.activation_bytes());
  EXPECT_NEAR(k.avail_bytes, avail_seen, kReadingSlackBytes);
  // The formula recomputed from this test's own readings gives the same pool within them.
  const std::int64_t recomputed = kv_max_tokens(static_cast<double>(free_before), avail_seen, f, cell);
  EXPECT_NEAR(static_cast<double>(e.kv_pool_tokens()), static_cast<double>(recomputed),
              2 * kReadingSlackBytes / static_cast<double>(cell));
  // About the 256 MiB past the case it was sized for (same weights, same device).
  EXPECT_NEAR(static_cast<double>(e.kv_pool_tokens()), static_cast<double>(need + extra),
              kReadingSlackBytes / static_cast<double>(cell));

  EXPECT_TRUE(same(run_case(e), exact)) << "pool at mem_fraction " << f << " vs the exact cache";

  // resize re-derives the pool (fresh readings, the same fraction) and keeps the layout.
  e.resize(1, kMaxLen, kPrefill);
  expect_formula_pool(e, f, cell, "resized to batch 1");
  e.resize(kBatch, kMaxLen, kBatch * kPrefill);
  expect_formula_pool(e, f, cell, "resized back");
  EXPECT_TRUE(same(run_case(e), exact)) << "pool after two resizes vs the exact cache";
}

TEST_F(GpuEngineKvPool, TooSmallAFractionThrowsThePlannersSentence) {
  // A quarter of the smallest fraction that gives one token: rest = avail - total (1 - f)
  // is about -3/4 of what the engine takes before its pool (weights, GEMM workspace), tens
  // of MiB below zero, far outside the readings' noise.
  const double f_one = fraction_for(1);
  const double f_small = f_one / 4;
  ASSERT_GT(f_small, 0.0);
  const double f_fits = fraction_for(need + (std::int64_t{256} << 20) / cell);

  auto expect_sentence = [&](const KvPoolInfeasible& err, const std::string& when) {
    const std::string what = err.what();
    EXPECT_NE(what.find("max_batch 2 x max_len 16 = 32 tokens"), std::string::npos) << when << ": " << what;
    EXPECT_NE(what.find("Not enough memory"), std::string::npos) << when << ": " << what;
    EXPECT_NE(what.find("no KV token fits"), std::string::npos) << when << ": " << what;
    EXPECT_NE(what.find("gives the requested 32"), std::string::npos) << when << ": " << what;
    EXPECT_NE(what.find("device total"), std::string::npos) << when << ": " << what;
    // The sentence is the planner's on the engine's readings.
    const KvPoolSize& k = err.size();
    EXPECT_FALSE(k.feasible) << when;
    EXPECT_EQ(k.max_tokens, 0) << when;
    EXPECT_LT(k.rest_bytes, 0.0) << when;
    EXPECT_EQ(k.verdict, kv_verdict(k.total_bytes, k.avail_bytes, f_small, cell, need)) << when;
    EXPECT_NE(what.find(k.verdict), std::string::npos) << when;
    EXPECT_GT(k.min_mem_fraction_requested, f_small) << when;
    EXPECT_LT(k.min_mem_fraction_requested, 1.0) << when;
  };

  // At construction: the throw leaves no device memory behind (weights and stream freed).
  const std::int64_t free_before = free_bytes();
  try {
    GpuEngine e(config, Shard{0, 1}, comm, *weights, case_options(f_small));
    ADD_FAILURE() << "mem_fraction " << f_small << " built a pool of " << e.kv_pool_tokens() << " tokens";
  } catch (const KvPoolInfeasible& err) {
    expect_sentence(err, "constructor");
  }
  EXPECT_NEAR(static_cast<double>(free_bytes()), static_cast<double>(free_before), 16.0 * (1 << 20));

  // At a resize: the engine stays usable and sizes again at a fraction that fits.
  GpuEngine e(config, Shard{0, 1}, comm, *weights, case_options(f_fits));
  e.set_mem_fraction(f_small);
  try {
    e.resize(kBatch, kMaxLen, kBatch * kPrefill);
    ADD_FAILURE() << "resize at mem_fraction " << f_small << " built a pool of " << e.kv_pool_tokens() << " tokens";
  } catch (const KvPoolInfeasible& err) {
    expect_sentence(err, "resize");
  }
  e.set_mem_fraction(f_fits);
  e.resize(kBatch, kMaxLen, kBatch * kPrefill);
  expect_formula_pool(e, f_fits, cell, "after the infeasible resize");
  EXPECT_TRUE(same(run_case(e), exact)) << "after an infeasible resize";
}

// agree_kv_tokens (a tensor-parallel group sizes every rank's pool from the smallest): the
// engine hands its own formula's max_tokens to the agreement and allocates what comes back,
// in the same layout (the logits stay those of the exact cache); a group pool smaller than
// the case throws KvPoolInfeasible naming the group. One GPU plays the rank whose peer has
// less memory: the agreement returns a smaller count than this rank's formula.
TEST_F(GpuEngineKvPool, GroupPoolIsTheSmallestRanks) {
  const double f = fraction_for(need + (std::int64_t{256} << 20) / cell);
  std::vector<std::int64_t> offered;
  std::int64_t peer = need + 3;  // the other rank's pool: just above the case
  GpuEngineOptions o = case_options(f);
  o.agree_kv_tokens = [&](std::int64_t mine) {
    offered.push_back(mine);
    return std::min(mine, peer);
  };
  GpuEngine e(config, Shard{0, 1}, comm, *weights, o);
  ASSERT_EQ(offered.size(), 1u);
  EXPECT_EQ(offered[0], e.kv_pool_size().max_tokens) << "the agreement gets this rank's formula";
  EXPECT_GT(offered[0], peer);
  EXPECT_EQ(e.kv_pool_tokens(), peer);
  EXPECT_EQ(e.kv_cache_bytes(), static_cast<std::size_t>(peer * cell));
  EXPECT_TRUE(same(run_case(e), exact)) << "the group's pool vs the exact cache";

  peer = need - 1;  // the other rank cannot hold the case: every rank refuses it
  try {
    e.resize(kBatch, kMaxLen, kBatch * kPrefill);
    ADD_FAILURE() << "resize with a peer pool of " << peer << " tokens built " << e.kv_pool_tokens();
  } catch (const KvPoolInfeasible& err) {
    const std::string what = err.what();
    EXPECT_NE(what.find("smallest pool of the tensor-parallel group, 31 tokens"), std::string::npos) << what;
    EXPECT_EQ(err.size().max_tokens, peer);
    EXPECT_FALSE(err.size().feasible);
  }
  EXPECT_EQ(offered.size(), 2u) << "one agreement per sizing";
}

// agree_kv_tokens in a real tensor-parallel group: two ranks (one per GPU, or both on one GPU
// in shared placement) agree their pool through the bootstrap (all_gather, then the minimum,
// as the engine workload does), and both allocate the smaller of their own formulas in the
// exact cache's layout. Each rank reads its own device (in shared placement, its own share of
// it: tpb/kernels/device.h), so the two formulas can come out equal and prove nothing about
// the agreement; rank 1 therefore sizes for 64 MiB past the case and rank 0 for 256 MiB, and
// rank 0 must end with rank 1's pool. The formulas are gathered apart from the agreement, so
// a pool other than their minimum, or two ranks with different pools, fails.
TEST(GpuEngineKvPoolGroup, Tp2RanksAllocateTheSmallerFormula) {
  TPB_SKIP_UNLESS_PLACEABLE(2);
  expect_all_ranks_passed(run_ranks(2, [](Bootstrap& bs) {
    TPB_CUDA_CHECK(cudaSetDevice(rank_device()));
    const ModelConfig config = load_model_config_by_name(preset("small-dsv3"));
    auto weights = make_synthetic_weights(1234);
    const std::int64_t cell = kv_cell_bytes(config, 2);
    const std::int64_t need = kBatch * kMaxLen;
    const Shard shard{bs.rank(), bs.size()};
    auto comm = make_communicator("nccl", bs, comm_options_for_rank());
    auto gathered = [&](std::int64_t mine) {
      std::vector<std::int64_t> all;
      for (const std::string& t : bs.all_gather(std::to_string(mine))) all.push_back(std::stoll(t));
      return all;
    };

    // The exact cache (mem_fraction 0): the reference logits, and the readings the fraction
    // is chosen from.
    std::vector<std::uint32_t> exact;
    KvPoolSize readings;
    {
      GpuEngine e(config, shard, *comm, *weights, case_options(0));
      EXPECT_EQ(e.kv_pool_tokens(), need);
      exact = run_case(e);
      readings = e.kv_pool_size();
    }
    const std::int64_t extra_bytes = bs.rank() == 0 ? std::int64_t{256} << 20 : std::int64_t{64} << 20;
    const double f = kv_min_mem_fraction(readings.total_bytes, readings.avail_bytes, cell, need + extra_bytes / cell);
    EXPECT_GT(f, 0.0);
    EXPECT_LT(f, 1.0);

    std::vector<std::int64_t> offered, agreed;
    GpuEngineOptions o = case_options(f);
    o.agree_kv_tokens = [&](std::int64_t mine) {
      offered.push_back(mine);
      const std::vector<std::int64_t> all = gathered(mine);
      agreed.push_back(*std::min_element(all.begin(), all.end()));
      return agreed.back();
    };
    GpuEngine e(config, shard, *comm, *weights, o);

    // Checked after every sizing (the constructor's, then a resize's: fresh readings, a fresh
    // agreement). `sizings`: agreements made so far.
    auto expect_group_pool = [&](std::size_t sizings, const std::string& when) {
      const KvPoolSize& k = e.kv_pool_size();
      EXPECT_EQ(offered.size(), sizings) << when << ": one agreement per sizing";
      EXPECT_EQ(k.max_tokens, kv_max_tokens(k.total_bytes, k.avail_bytes, f, cell)) << when;
      if (!offered.empty()) {
        EXPECT_EQ(offered.back(), k.max_tokens) << when << ": the agreement gets this rank's formula";
      }
      const std::vector<std::int64_t> formulas = gathered(k.max_tokens);
      const std::int64_t least = std::min(formulas[0], formulas[1]);
      EXPECT_GT(formulas[0], formulas[1]) << when << ": rank 1 sized for the smaller pool (64 vs 256 MiB past the case)";
      if (!agreed.empty()) {
        EXPECT_EQ(agreed.back(), least) << when;
      }
      EXPECT_EQ(e.kv_pool_tokens(), least) << when << ": rank " << bs.rank() << "'s formula " << k.max_tokens
                                           << ", the ranks' " << formulas[0] << " and " << formulas[1];
      EXPECT_GE(e.kv_pool_tokens(), need) << when;
      EXPECT_EQ(e.kv_cache_bytes(), static_cast<std::size_t>(e.kv_pool_tokens() * cell)) << when;
      if (bs.rank() == 0) {
        EXPECT_LT(e.kv_pool_tokens(), k.max_tokens) << when << ": rank 0 kept its own formula";
      }
      const std::vector<std::int64_t> pools = gathered(e.kv_pool_tokens());
      EXPECT_EQ(pools[0], pools[1]) << when << ": the ranks allocated different pools";
    };
    expect_group_pool(1, "constructed");
    EXPECT_TRUE(same(run_case(e), exact)) << "rank " << bs.rank() << ": the group's pool vs the exact cache";

    e.resize(1, kMaxLen, kPrefill);
    expect_group_pool(2, "resized to batch 1");
    e.resize(kBatch, kMaxLen, kBatch * kPrefill);
    expect_group_pool(3, "resized back");
    EXPECT_TRUE(same(run_case(e), exact)) << "rank " << bs.rank() << ": the group's pool after two resizes";
    comm->barrier();
  }));
}

}  // namespace
}  // namespace tpb::test
