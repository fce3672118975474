// Scaffolding the GPU kernel tests share: device buffers, bf16 views and conversions, and an
// element-wise equality that reports the first difference instead of whole vectors.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "reference_engine/comm/local/local_communicator.h"
#include "tpb/cuda_check.h"
#include "tpb/dtype.h"
#include "tpb/kernels/device.h"

namespace tpb::test {

// Skips the test, with the reason, where no GPU is visible; else runs it on device 0.
#define TPB_REQUIRE_GPU()                                                                   \
  do {                                                                                      \
    if (::tpb::visible_gpus().empty()) GTEST_SKIP() << "needs 1 GPU, none visible";         \
    TPB_CUDA_CHECK(cudaSetDevice(0));                                                       \
  } while (0)

// Device buffer of `n` elements of T, freed on scope exit. 256 bytes of slack past the end
// let tests place data at misaligned offsets and let vector loads read past a ragged tail.
// upload() and download() synchronise the device: a pageable copy on the legacy stream is
// not ordered with a non-blocking stream, and may still be in flight when cudaMemcpy returns.
template <class T>
struct DevBuf {
  T* p = nullptr;
  std::size_t n = 0;
  explicit DevBuf(std::size_t count) : n(count) {
    TPB_CUDA_CHECK(cudaMalloc(&p, std::max<std::size_t>(count, 1) * sizeof(T) + 256));
  }
  ~DevBuf() { cudaFree(p); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  void upload(const std::vector<T>& h) {
    TPB_CUDA_CHECK(cudaMemcpy(p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
    TPB_CUDA_CHECK(cudaDeviceSynchronize());
  }
  std::vector<T> download() const {
    TPB_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<T> h(n);
    TPB_CUDA_CHECK(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }
};

// The same buffer with raw-pointer transfers of all `count` elements (the MLA tests' form).
template <typename T>
struct DeviceBuffer {
  T* ptr = nullptr;
  std::size_t count = 0;
  explicit DeviceBuffer(std::size_t n) : count(n) { TPB_CUDA_CHECK(cudaMalloc(&ptr, std::max<std::size_t>(n, 1) * sizeof(T))); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { cudaFree(ptr); }
  void upload(const void* host) { TPB_CUDA_CHECK(cudaMemcpy(ptr, host, count * sizeof(T), cudaMemcpyHostToDevice)); }
  void download(void* host) const { TPB_CUDA_CHECK(cudaMemcpy(host, ptr, count * sizeof(T), cudaMemcpyDeviceToHost)); }
};

// SplitMix64 step: a counter-based stream, element i of any seed in O(1).
inline std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// bf16 bits of uniform values in [-amp, amp), element i of stream `seed` (never zero-filled).
inline std::vector<std::uint16_t> hashed_bf16(std::uint64_t seed, std::size_t n, float amp) {
  std::vector<std::uint16_t> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double u = static_cast<double>(mix(seed * 0x100000001b3ull ^ mix(i)) >> 11) * 0x1.0p-53;
    v[i] = float_to_bf16(static_cast<float>((2.0 * u - 1.0) * amp));
  }
  return v;
}

// Uniform values in [lo, hi) from std::mt19937(seed): fresh random inputs, never zeros.
inline std::vector<float> random_f32(std::size_t n, std::uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& f : v) f = d(rng);
  return v;
}

// The same values rounded to bf16 (their bits).
inline std::vector<std::uint16_t> random_bf16(std::size_t n, std::uint32_t seed, float lo = -1.f, float hi = 1.f) {
  const std::vector<float> f = random_f32(n, seed, lo, hi);
  std::vector<std::uint16_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = float_to_bf16(f[i]);
  return v;
}

// bf16 bits held as uint16_t on the host, seen as __nv_bfloat16 by the kernels.
inline __nv_bfloat16* bf(std::uint16_t* p) { return reinterpret_cast<__nv_bfloat16*>(p); }

// A float's bit pattern, for bitwise comparisons that print the values.
inline std::uint32_t bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

inline std::vector<float> widen(const std::vector<std::uint16_t>& v) {
  std::vector<float> f(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) f[i] = bf16_to_float(v[i]);
  return f;
}

// Element-wise equality that reports the first difference and the count, not the vectors.
template <class T>
::testing::AssertionResult same(const std::vector<T>& got, const std::vector<T>& want) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "sizes " << got.size() << " vs " << want.size();
  std::size_t first = got.size(), count = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i]) {
      if (count++ == 0) first = i;
    }
  if (count == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << count << " of " << got.size() << " differ, first at " << first << ": "
                                       << +got[first] << " vs " << +want[first];
}

}  // namespace tpb::test
