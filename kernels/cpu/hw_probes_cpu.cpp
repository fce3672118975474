// CPU probes, and the GPU probe entry points of builds without CUDA (they throw).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "tpb/check.h"
#include "tpb/kernels/hw_probes.h"

namespace tpb {
namespace {

template <typename Fn>
ProbeTiming time_repetitions(int repetitions, Fn&& fn) {
  TPB_CHECK(repetitions > 0, "repetitions must be positive, got " << repetitions);
  fn();  // warm-up: page faults and first touch stay out of the numbers
  std::vector<double> seconds;
  for (int r = 0; r < repetitions; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::nth_element(seconds.begin(), seconds.begin() + seconds.size() / 2, seconds.end());
  ProbeTiming t;
  t.median_s = seconds[seconds.size() / 2];
  t.repetitions = repetitions;
  return t;
}

}  // namespace

ProbeTiming cpu_copy_bandwidth(std::size_t bytes, int repetitions) {
  std::vector<unsigned char> src(bytes), dst(bytes);
  std::mt19937 rng(1);
  for (auto& b : src) b = static_cast<unsigned char>(rng());
  auto t = time_repetitions(repetitions, [&] { std::memcpy(dst.data(), src.data(), bytes); });
  TPB_CHECK(std::memcmp(dst.data(), src.data(), bytes) == 0, "memcpy probe: copy differs from source");
  t.value = 2.0 * static_cast<double>(bytes) / t.median_s / 1e9;
  return t;
}

ProbeTiming cpu_gemm_rate(int m, int n, int k, int repetitions) {
  TPB_CHECK(m > 0 && n > 0 && k > 0, "gemm probe: sizes must be positive");
  std::vector<float> a(static_cast<std::size_t>(m) * k), b(static_cast<std::size_t>(k) * n), c(static_cast<std::size_t>(m) * n);
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (auto& x : a) x = u(rng);
  for (auto& x : b) x = u(rng);
  constexpr int kBlock = 64;  // keeps a panel of B in L1/L2
  auto t = time_repetitions(repetitions, [&] {
    std::fill(c.begin(), c.end(), 0.f);
    for (int kk = 0; kk < k; kk += kBlock)
      for (int i = 0; i < m; ++i)
        for (int p = kk; p < std::min(k, kk + kBlock); ++p) {
          const float aip = a[static_cast<std::size_t>(i) * k + p];
          const float* brow = &b[static_cast<std::size_t>(p) * n];
          float* crow = &c[static_cast<std::size_t>(i) * n];
          for (int j = 0; j < n; ++j) crow[j] += aip * brow[j];
        }
  });
  // Spot-check one element against a plain dot product, so a broken loop cannot post a rate.
  double ref = 0;
  for (int p = 0; p < k; ++p) ref += static_cast<double>(a[p]) * b[static_cast<std::size_t>(p) * n];
  TPB_CHECK(std::abs(ref - c[0]) <= 1e-3 * (1.0 + std::abs(ref)), "gemm probe: result differs from reference");
  t.value = 2.0 * m * n * static_cast<double>(k) / t.median_s / 1e9;
  return t;
}

#if !TPB_HAVE_CUDA
ProbeTiming gpu_copy_bandwidth(int, std::size_t, int) { TPB_FAIL("GPU probes need a CUDA build"); }
ProbeTiming gpu_bf16_gemm_rate(int, int, int, int, int) { TPB_FAIL("GPU probes need a CUDA build"); }
ProbeTiming gpu_peer_bandwidth(int, int, std::size_t, int) { TPB_FAIL("GPU probes need a CUDA build"); }
bool gpu_can_access_peer(int, int) { return false; }
#endif

}  // namespace tpb
