// The decode attention's split plan (tpb/kernels/mla_decode_split.h), a pure function of the
// shape and the resident CTAs: what it picks at the shapes its cost model was fitted on (one
// H200, 132 resident CTAs of the wgmma kernel, 64 heads per CTA), and its bounds; the mma.sync
// kernel's shared-memory configurations, their sizes and which one each budget takes.
#include <gtest/gtest.h>

#include <cstdint>
#include <iostream>
#include <iterator>
#include <utility>

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

// The mma.sync kernel's shared-memory configurations at Kimi-K2.5's row (kv_lora 512 + rope 64,
// 584-column shared rows): the first, as tuned on an H200, needs 191 KiB (182.5 dynamic + 8.5
// static), more than 8.0's 163 KiB and 12.x's 99 KiB; the second fits 8.0, the third 99 KiB.
TEST(MlaDecodeMmaConfigs, SharedMemoryAtKimiWidths) {
  constexpr std::int64_t kKiB = 1024;
  struct Expected {
    std::int64_t dynamic_bytes, static_bytes;
  };
  const Expected expected[] = {{186880, 8704}, {112128, 4352}, {93440, 2176}, {56064, 2176}};
  static_assert(std::size(expected) == kMlaDecodeMmaConfigCount);
  for (int i = 0; i < kMlaDecodeMmaConfigCount; ++i) {
    const MlaDecodeMmaConfig& c = kMlaDecodeMmaConfigs[i];
    EXPECT_EQ(mla_decode_mma_row_stride(c, 512, 64), 584) << c.name;
    EXPECT_EQ(mla_decode_mma_dynamic_smem_bytes(c, 32, 512, 64), expected[i].dynamic_bytes) << c.name;
    EXPECT_EQ(mla_decode_mma_static_smem_bytes(c), expected[i].static_bytes) << c.name;
    std::cout << c.name << ": " << mla_decode_mma_smem_bytes(c, 32, 512, 64) << " bytes ("
              << mla_decode_mma_smem_bytes(c, 32, 512, 64) / static_cast<double>(kKiB) << " KiB) per block at 32 heads, "
              << "kv_lora 512 + rope 64\n";
  }
  // The choice per budget: 227 KiB (9.0, 10.x) the first; 163 KiB (8.0) the second; 99 KiB
  // (8.6, 8.9, 12.x, and any GPU under TPB_KERNELS=portable) the third, or up to 16 heads the
  // second, whose CTA then holds one row tile as the third's does (97792 bytes: the same
  // arithmetic, the same plan).
  for (std::int64_t heads : {8, 16, 17, 32, 64, 128}) {
    EXPECT_EQ(mla_decode_mma_config_for(heads, 512, 64, 227 * kKiB), 0) << heads;
    EXPECT_EQ(mla_decode_mma_config_for(heads, 512, 64, 163 * kKiB), 1) << heads;
    EXPECT_EQ(mla_decode_mma_config_for(heads, 512, 64, 99 * kKiB), heads <= 16 ? 1 : 2) << heads;
  }
  EXPECT_EQ(mla_decode_mma_smem_bytes(kMlaDecodeMmaConfigs[1], 16, 512, 64), 97792);
}

// Every width the kernel takes (kv_lora 8..512, rope 0..128, multiples of 8) has a configuration
// within 99 KiB, the first wherever 227 KiB is the budget (so H100 / H200 / B200 keep the kernel
// they had), and the one picked is the first that fits.
TEST(MlaDecodeMmaConfigs, EveryWidthFitsEveryBudget) {
  constexpr std::int64_t kKiB = 1024;
  for (std::int64_t kv_lora = 8; kv_lora <= 512; kv_lora += 8)
    for (std::int64_t rope = 0; rope <= 128; rope += 8)
      for (std::int64_t heads : {1, 16, 17, 32, 48, 64, 128}) {
        EXPECT_EQ(mla_decode_mma_config_for(heads, kv_lora, rope, 227 * kKiB), 0) << kv_lora << " + " << rope;
        for (std::int64_t budget : {99 * kKiB, 163 * kKiB}) {
          const int c = mla_decode_mma_config_for(heads, kv_lora, rope, budget);
          ASSERT_GE(c, 0) << kv_lora << " + " << rope << " at " << budget;
          EXPECT_LE(mla_decode_mma_smem_bytes(kMlaDecodeMmaConfigs[c], heads, kv_lora, rope), budget);
          for (int before = 0; before < c; ++before)
            EXPECT_GT(mla_decode_mma_smem_bytes(kMlaDecodeMmaConfigs[before], heads, kv_lora, rope), budget);
        }
      }
}

// A smaller configuration's plan never has more splits than the memory planner's for the same
// shape and SM count (so the workspace engine_buffers.cpp sizes stays an upper bound), and
// covers the context with whole 64-key tiles and no empty split, as every plan does.
TEST(MlaDecodeSplit, SmallConfigurationsStayWithinThePlannersBound) {
  for (std::int64_t sms : {1, 2, 46, 84, 108, 132, 188})
    for (std::int64_t context : {1, 63, 64, 65, 129, 700, 1025, 4100, 8192, 20480, 33000, 1 << 20})
      for (std::int64_t batch : {1, 2, 3, 7, 64, 256})
        for (std::int64_t heads : {1, 5, 8, 16, 20, 32, 64, 80, 128})
          for (auto [kv_lora, rope] : {std::pair<std::int64_t, std::int64_t>{512, 64}, {128, 32}, {512, 128}})
            for (int c = 1; c < kMlaDecodeMmaConfigCount; ++c) {
              const MlaDecodeSplit p = mla_decode_split_small_config(batch, heads, kv_lora, rope, context,
                                                                     kMlaDecodeMmaConfigs[c], sms);
              const MlaDecodeSplit bound =
                  mla_decode_split_for(batch, heads, context, mla_decode_wgmma_shape(kv_lora, rope), sms);
              ASSERT_LE(p.splits, bound.splits) << sms << " SMs, " << batch << " x " << context << ", " << heads
                                                << " heads, " << kMlaDecodeMmaConfigs[c].name;
              EXPECT_EQ(p.chunk % kMlaDecodeTileKeys, 0);
              EXPECT_GE(p.splits * p.chunk, context);
              EXPECT_LT((p.splits - 1) * p.chunk, context);
            }
}

}  // namespace
}  // namespace tpb::kernels
