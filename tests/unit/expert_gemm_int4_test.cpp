// The INT4 format helpers and the INT4 routed-expert GEMM's CPU reference
// (tpb/kernels/int4_format.h, tpb/kernels/expert_gemm_int4.h), on fresh random inputs:
// packing puts element 0 in the lowest nibble as q + 8 and unpack inverts it for every q in
// [-8, 7]; dequant is bf16(q x scale) as float_to_bf16 rounds it, computed here independently;
// the reference equals a naive dequantize-then-matmul, also for widths whose last word or
// group is ragged.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "tpb/check.h"
#include "tpb/dtype.h"
#include "tpb/kernels/expert_gemm_int4.h"
#include "tpb/kernels/int4_format.h"

namespace tpb {
namespace {

std::vector<std::int8_t> random_q(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-8, 7);
  std::vector<std::int8_t> q(n);
  for (auto& v : q) v = static_cast<std::int8_t>(d(rng));
  return q;
}

// Positive bf16 scales spread over a few binades (the checkpoint's are ~1e-3..1e-2).
std::vector<std::uint16_t> random_scales(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-9.f, -5.f);
  std::vector<std::uint16_t> s(n);
  for (auto& v : s) v = float_to_bf16(std::exp2(d(rng)));
  return s;
}

std::vector<float> random_x(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<float> x(n);
  for (auto& v : x) v = bf16_to_float(float_to_bf16(d(rng)));  // bf16 activations
  return x;
}

TEST(Int4Format, PackPutsElementZeroInTheLowestNibbleAsQPlus8) {
  const std::int8_t q[8] = {-8, 7, 0, -1, 1, 3, -5, 6};
  std::uint32_t word = 0;
  kernels::pack_int4_rows(q, 1, 8, &word);
  EXPECT_EQ(word, 0xE3B978F0u);  // nibbles 0, F, 8, 7, 9, B, 3, E from the lowest
  for (int j = 0; j < 8; ++j) EXPECT_EQ((word >> (4 * j)) & 0xFu, static_cast<unsigned>(q[j] + 8)) << j;
  EXPECT_EQ(word & 0xFu, 0u);  // q[0] = -8 -> nibble 0
  int qi[8];
  for (int j = 0; j < 8; ++j) qi[j] = q[j];
  EXPECT_EQ(int4::pack8(qi), word);
}

TEST(Int4Format, UnpackInvertsPackForRandomRowsOfAnyWidth) {
  for (std::int64_t in : {1, 7, 8, 9, 31, 32, 33, 100, 256}) {
    const std::int64_t rows = 5, words = int4::packed_words(in);
    auto q = random_q(static_cast<std::size_t>(rows * in), 100 + static_cast<std::uint32_t>(in));
    q[0] = -8;
    q.back() = 7;
    std::vector<std::uint32_t> packed(static_cast<std::size_t>(rows * words), 0xdeadbeefu);
    kernels::pack_int4_rows(q.data(), rows, in, packed.data());
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t j = 0; j < in; ++j)
        ASSERT_EQ(int4::unpack(packed[static_cast<std::size_t>(r * words + j / 8)], static_cast<int>(j % 8)),
                  q[static_cast<std::size_t>(r * in + j)])
            << "in " << in << " (" << r << ", " << j << ")";
  }
  const std::int8_t bad = 8;
  std::uint32_t w = 0;
  EXPECT_THROW(kernels::pack_int4_rows(&bad, 1, 1, &w), Error);
}

TEST(Int4Format, DequantIsBf16OfTheExactProduct) {
  auto scales = random_scales(4000, 7);
  // Scales whose products land on ties and near the bf16 limits: 0x3f81 (1 + 2^-7) times odd q
  // needs more than 8 significant bits, so the rounding is exercised.
  scales.insert(scales.end(), {0x3f81, 0x3fff, 0x0081, 0x7f7f, 0x3c01});
  for (std::uint16_t s : scales)
    for (int q = -8; q <= 7; ++q) {
      const float want = bf16_to_float(float_to_bf16(static_cast<float>(q) * bf16_to_float(s)));
      ASSERT_EQ(int4::dequant_bf16_bits(q, s), float_to_bf16(want)) << "q " << q << " scale " << s;
      ASSERT_EQ(int4::dequant(q, s), want) << "q " << q << " scale " << s;
    }
  // dequant_int4_rows reads the group of each element.
  const std::int64_t in = 70, words = int4::packed_words(in), groups = int4::scale_groups(in);
  const auto q = random_q(static_cast<std::size_t>(2 * in), 8);
  const auto s = random_scales(static_cast<std::size_t>(2 * groups), 9);
  std::vector<std::uint32_t> packed(static_cast<std::size_t>(2 * words));
  kernels::pack_int4_rows(q.data(), 2, in, packed.data());
  std::vector<float> w(static_cast<std::size_t>(2 * in));
  kernels::dequant_int4_rows(packed.data(), s.data(), 2, in, w.data());
  for (std::int64_t r = 0; r < 2; ++r)
    for (std::int64_t j = 0; j < in; ++j) {
      const float scale = bf16_to_float(s[static_cast<std::size_t>(r * groups + j / 32)]);
      ASSERT_EQ(w[static_cast<std::size_t>(r * in + j)],
                bf16_to_float(float_to_bf16(q[static_cast<std::size_t>(r * in + j)] * scale)))
          << r << ", " << j;
    }
}

// Expert e gets counts[e] rows.
std::vector<std::int32_t> offsets_of(const std::vector<int>& counts) {
  std::vector<std::int32_t> off(counts.size() + 1, 0);
  std::partial_sum(counts.begin(), counts.end(), off.begin() + 1);
  return off;
}

TEST(ExpertGemmInt4Ref, MatchesNaiveDequantizeThenMatmul) {
  const std::vector<int> counts = {0, 1, 3, 0, 17, 2, 0};
  const auto offsets = offsets_of(counts);
  const std::int64_t experts = static_cast<std::int64_t>(counts.size()), pairs = offsets.back();
  std::uint32_t seed = 300;
  for (std::int64_t in : {5, 8, 13, 32, 40, 96, 200}) {
    for (std::int64_t out : {1, 8, 24}) {
      const std::int64_t words = int4::packed_words(in), groups = int4::scale_groups(in);
      const auto q = random_q(static_cast<std::size_t>(experts * out * in), seed++);
      const auto s = random_scales(static_cast<std::size_t>(experts * out * groups), seed++);
      const auto x = random_x(static_cast<std::size_t>(pairs * in), seed++);
      std::vector<std::uint32_t> packed(static_cast<std::size_t>(experts * out * words));
      kernels::pack_int4_rows(q.data(), experts * out, in, packed.data());
      std::vector<float> y(static_cast<std::size_t>(pairs * out), std::nanf(""));
      kernels::expert_gemm_int4_ref(x.data(), offsets.data(), experts, packed.data(), s.data(), in, out, y.data());

      for (std::int64_t e = 0; e < experts; ++e)
        for (std::int64_t p = offsets[static_cast<std::size_t>(e)]; p < offsets[static_cast<std::size_t>(e) + 1]; ++p)
          for (std::int64_t o = 0; o < out; ++o) {
            double want = 0, absdot = 0;
            for (std::int64_t j = 0; j < in; ++j) {
              const std::size_t wi = static_cast<std::size_t>((e * out + o) * in + j);
              const float scale = bf16_to_float(s[static_cast<std::size_t>((e * out + o) * groups + j / 32)]);
              const double w = bf16_to_float(float_to_bf16(q[wi] * scale));
              const double xv = x[static_cast<std::size_t>(p * in + j)];
              want += xv * w;
              absdot += std::fabs(xv * w);
            }
            // Both sum in double in increasing j: only the final rounding to float differs from
            // `want`, by at most half a float ulp.
            const float got = y[static_cast<std::size_t>(p * out + o)];
            ASSERT_LE(std::fabs(got - want), std::ldexp(std::fabs(want), -24) + absdot * 1e-15)
                << "in " << in << " out " << out << " expert " << e << " pair " << p << " row " << o;
          }
    }
  }
}

TEST(ExpertGemmInt4Ref, RefusesBadOffsets) {
  const std::int64_t in = 32, out = 4;
  const auto q = random_q(static_cast<std::size_t>(2 * out * in), 1);
  const auto s = random_scales(static_cast<std::size_t>(2 * out), 2);
  std::vector<std::uint32_t> packed(static_cast<std::size_t>(2 * out * 4));
  kernels::pack_int4_rows(q.data(), 2 * out, in, packed.data());
  const auto x = random_x(static_cast<std::size_t>(3 * in), 3);
  std::vector<float> y(static_cast<std::size_t>(3 * out), 0.f);
  const std::int32_t decreasing[3] = {0, 2, 1};
  EXPECT_THROW(kernels::expert_gemm_int4_ref(x.data(), decreasing, 2, packed.data(), s.data(), in, out, y.data()),
               Error);
  const std::int32_t not_zero[3] = {1, 2, 3};
  EXPECT_THROW(kernels::expert_gemm_int4_ref(x.data(), not_zero, 2, packed.data(), s.data(), in, out, y.data()),
               Error);
}

}  // namespace
}  // namespace tpb
