// The custom allreduce's barrier flag word (tpb/kernels/allreduce_flag.h), which the kernels
// use on the GPU: the call a peer's word names must come back exactly as the error report
// prints it, any change of call, algorithm, dtype or size must change the word, and the
// barrier count must compare wrap-safely.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>

#include "tpb/kernels/allreduce_flag.h"

namespace tpb {
namespace {

TEST(AllreduceFlag, AWordNamesItsCallExactly) {
  std::mt19937_64 rng(20261206);
  const DType dtypes[] = {DType::bf16, DType::f16, DType::f32};
  for (int i = 0; i < 10000; ++i) {
    const auto call = static_cast<std::uint32_t>(rng());
    const bool two_shot = (rng() & 1) != 0;
    const DType dtype = dtypes[rng() % 3];
    const std::uint64_t count = 1 + rng() % ((std::uint64_t{1} << kAllreduceFlagElemBits) - 1);
    const auto flag = static_cast<std::uint32_t>(rng());
    // A peer up to 32767 calls away from this rank.
    const auto mine = call + static_cast<std::uint32_t>(static_cast<std::int32_t>(rng() % 65535) - 32767);
    const std::uint64_t word = allreduce_flag_word(allreduce_flag_tag_bits(call, allreduce_shape(two_shot, dtype), count), flag);
    const AllreduceCallTag t = allreduce_flag_call(word, mine);
    ASSERT_EQ(t.call, call) << "mine " << mine;
    ASSERT_EQ(t.shape, allreduce_shape(two_shot, dtype));
    ASSERT_EQ(t.bytes, count * dtype_size(dtype));
    ASSERT_EQ(word & kAllreduceFlagCountMask, flag & kAllreduceFlagCountMask) << "the count bits carry the flag";
  }
}

TEST(AllreduceFlag, TheCallIndexIsTakenNearestAcrossTheWraps) {
  const std::uint64_t shape = allreduce_shape(false, DType::bf16);
  const auto call_of = [&](std::uint32_t theirs, std::uint32_t mine) {
    return allreduce_flag_call(allreduce_flag_word(allreduce_flag_tag_bits(theirs, shape, 8), 1), mine).call;
  };
  EXPECT_EQ(call_of(65536 + 5, 65535), 65536u + 5) << "across the 16-bit wrap, ahead";
  EXPECT_EQ(call_of(65530, 65536 + 3), 65530u) << "across the 16-bit wrap, behind";
  EXPECT_EQ(call_of(0xFFFFFFFFu, 2), 0xFFFFFFFFu) << "across the 32-bit wrap";
  EXPECT_EQ(call_of(7, 7), 7u);
}

TEST(AllreduceFlag, EachFieldOfTheCallChangesTheWord) {
  const auto bits = [](std::uint32_t call, bool two_shot, DType dtype, std::uint64_t count) {
    return allreduce_flag_tag_bits(call, allreduce_shape(two_shot, dtype), count);
  };
  const std::uint64_t base = bits(41, false, DType::bf16, 1000);
  EXPECT_NE(bits(42, false, DType::bf16, 1000), base) << "a skipped call";
  EXPECT_NE(bits(41 + 65535, false, DType::bf16, 1000), base);
  EXPECT_NE(bits(41, true, DType::bf16, 1000), base) << "another algorithm";
  EXPECT_NE(bits(41, false, DType::f16, 1000), base) << "another dtype";
  EXPECT_NE(bits(41, false, DType::f32, 1000), base);
  EXPECT_NE(bits(41, false, DType::bf16, 1001), base) << "another size";
  EXPECT_NE(bits(41, false, DType::bf16, 1000 + (1 << 20)), base);
  // The documented limits: calls 2^16 apart and counts 2^29 apart share a word.
  EXPECT_EQ(bits(41 + 65536, false, DType::bf16, 1000), base);
  EXPECT_EQ(bits(41, false, DType::bf16, 1000 + (std::uint64_t{1} << kAllreduceFlagElemBits)), base);
  EXPECT_EQ(base & kAllreduceFlagCountMask, 0u) << "the call's bits leave the count's free";
}

TEST(AllreduceFlag, TheBarrierCountComparesWrapSafely) {
  const std::uint64_t tag = allreduce_flag_tag_bits(3, allreduce_shape(true, DType::f32), 77);
  for (std::uint32_t flag : {2u, 65535u, 65536u, 65537u, 0xFFFFFFFFu, 0x12345678u}) {
    SCOPED_TRACE(flag);
    EXPECT_TRUE(allreduce_flag_before(allreduce_flag_word(tag, flag - 2), flag)) << "the slot's previous flag";
    EXPECT_FALSE(allreduce_flag_before(allreduce_flag_word(tag, flag), flag)) << "this barrier's";
    EXPECT_FALSE(allreduce_flag_before(allreduce_flag_word(tag, flag + 2), flag)) << "a peer ahead: not waited for";
    EXPECT_TRUE(allreduce_flag_before(allreduce_flag_word(tag, flag - 30000), flag));
  }
  // The call bits above the count never count as "ahead".
  EXPECT_TRUE(allreduce_flag_before(allreduce_flag_word(~std::uint64_t{0} << kAllreduceFlagCountBits, 9), 10));
}

}  // namespace
}  // namespace tpb
