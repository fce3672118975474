// The decode attention's split plan (tpb/kernels/mla_decode_split.h), a pure function of the
// shape and the resident CTAs: what it picks at the shapes its cost model was fitted on (one
// H200, 132 resident CTAs of the wgmma kernel, 64 heads per CTA), and its bounds.
#include <gtest/gtest.h>

#include <cstdint>

#include "tpb/kernels/mla_decode_split.h"

namespace tpb::kernels {
namespace {

constexpr std::int64_t kSlots = 132;

MlaDecodeSplit plan(std::int64_t batch, std::int64_t context, std::int64_t heads) {
  return mla_decode_split_for(batch, heads, context, true, kSlots);
}

// The sweep's fastest points (docs/performance.md, the fourth pass): batch 1 x 8K two-tile
// splits (18.1 us against 21.2 for one tile), 1 x 32K four tiles, 8 x 8K eight, 1 x 1K one.
TEST(MlaDecodeSplit, PicksTheSweepsFastestPlans) {
  for (std::int64_t heads : {64, 32}) {
    EXPECT_EQ(plan(1, 8192, heads).splits, 64) << heads;
    EXPECT_EQ(plan(1, 8192, heads).chunk, 2 * kMlaDecodeTileKeys) << heads;
    EXPECT_EQ(plan(1, 32768, heads).chunk, 4 * kMlaDecodeTileKeys) << heads;
    EXPECT_EQ(plan(8, 8192, heads).chunk, 8 * kMlaDecodeTileKeys) << heads;
    EXPECT_EQ(plan(1, 1024, heads).splits, 16) << heads;
  }
  // Large batches fill the device without splitting much: 64 x 8K two splits, 256 x 8K one.
  EXPECT_EQ(plan(64, 8192, 64).splits, 2);
  EXPECT_EQ(plan(256, 8192, 64).splits, 1);
}

// Every plan covers the context with whole tiles and stays within the workspace layout's
// splits, however long the context and whatever the batch.
TEST(MlaDecodeSplit, CoversTheContextWithinTheSplitLimit) {
  for (std::int64_t context : {1, 63, 64, 65, 1025, 8193, 32768, 1 << 20})
    for (std::int64_t batch : {1, 2, 7, 64, 1000}) {
      const MlaDecodeSplit p = plan(batch, context, 64);
      EXPECT_EQ(p.chunk % kMlaDecodeTileKeys, 0);
      EXPECT_GE(p.splits, 1);
      EXPECT_LE(p.splits, kMlaDecodeMaxSplits) << batch << " x " << context;
      EXPECT_GE(p.splits * p.chunk, context) << batch << " x " << context;
      EXPECT_LT((p.splits - 1) * p.chunk, context) << "an empty split at " << batch << " x " << context;
    }
}

}  // namespace
}  // namespace tpb::kernels
