// The tensor digest's CPU reference (tpb/kernels/tensor_digest.h), on fresh random inputs:
// equal tensors agree, a one-bit change, two swapped elements or one element more do not; the
// sample reads the documented positions; the test-only scaling rounds as documented.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "tpb/dtype.h"
#include "tpb/kernels/tensor_digest.h"

namespace tpb {
namespace {

using kernels::kTensorSamples;

std::vector<float> random_floats(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

std::vector<std::uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<std::uint16_t> out;
  for (float x : v) out.push_back(float_to_bf16(x));
  return out;
}

TEST(TensorDigest, TellsTensorsApartBitByBitAndByPosition) {
  for (std::size_t n : {1u, 63u, 64u, 1000u, 7171u}) {
    const auto f = random_floats(n, 11 + static_cast<std::uint32_t>(n));
    const std::uint64_t d = kernels::tensor_digest_ref(f.data(), n, DType::f32);
    auto copy = f;
    EXPECT_EQ(kernels::tensor_digest_ref(copy.data(), n, DType::f32), d) << n;
    std::uint32_t bits;
    std::memcpy(&bits, &copy[n / 2], 4);
    bits ^= 1u;  // the lowest mantissa bit of one element
    std::memcpy(&copy[n / 2], &bits, 4);
    EXPECT_NE(kernels::tensor_digest_ref(copy.data(), n, DType::f32), d) << n;
    if (n > 1) {
      auto swapped = f;
      std::swap(swapped[0], swapped[n - 1]);
      EXPECT_NE(kernels::tensor_digest_ref(swapped.data(), n, DType::f32), d) << "order must matter, n " << n;
      EXPECT_NE(kernels::tensor_digest_ref(f.data(), n - 1, DType::f32), d) << "length must matter, n " << n;
    }
    const auto b = to_bf16(f);
    auto b2 = b;
    b2[n - 1] ^= 1u;
    EXPECT_NE(kernels::tensor_digest_ref(b.data(), n, DType::bf16), kernels::tensor_digest_ref(b2.data(), n, DType::bf16));
  }
}

TEST(TensorDigest, SamplesReadEvenlySpacedElements) {
  const auto f = random_floats(1000, 3);
  std::vector<float> s(kTensorSamples);
  kernels::tensor_samples_ref(f.data(), f.size(), DType::f32, s.data());
  for (int i = 0; i < kTensorSamples; ++i) EXPECT_EQ(s[i], f[static_cast<std::size_t>(i) * 1000 / kTensorSamples]) << i;
  // A tensor smaller than the sample: its elements, then NaN.
  kernels::tensor_samples_ref(f.data(), 5, DType::f32, s.data());
  for (int i = 0; i < 5; ++i) EXPECT_EQ(s[i], f[i]);
  for (int i = 5; i < kTensorSamples; ++i) EXPECT_TRUE(std::isnan(s[i])) << i;
  const auto b = to_bf16(f);
  kernels::tensor_samples_ref(b.data(), b.size(), DType::bf16, s.data());
  EXPECT_EQ(s[7], bf16_to_float(b[7 * 1000 / kTensorSamples]));
}

TEST(TensorDigest, ScaleValuesRoundsToTheDtype) {
  const auto f = random_floats(257, 5);
  auto g = f;
  kernels::scale_values_ref(g.data(), g.size(), DType::f32, 1.0625f);
  for (std::size_t i = 0; i < f.size(); ++i) EXPECT_EQ(g[i], f[i] * 1.0625f);
  auto b = to_bf16(f);
  kernels::scale_values_ref(b.data(), b.size(), DType::bf16, 1.0625f);
  for (std::size_t i = 0; i < f.size(); ++i) EXPECT_EQ(b[i], float_to_bf16(bf16_to_float(float_to_bf16(f[i])) * 1.0625f));
}

}  // namespace
}  // namespace tpb
