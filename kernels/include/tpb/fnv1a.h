// FNV-1a 64 (Fowler-Noll-Vo, 64-bit offset basis and prime): tpbench's one byte hash.
// Case ids, synthetic weights (each tensor's name), output digests (suite/measure/digest.h) and the
// observer's call and allocation sequence digests are all FNV-1a 64, so changing anything
// here changes every stored id, baseline and digest; tests/unit/stable_hashes_test.cpp pins
// the values. Chosen for being tiny, stateless and the same on host and device; it is not a
// cryptographic hash and nothing relies on it being one.
//
// Usable from CUDA: in a file nvcc compiles, the pointer forms are __host__ __device__.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tpb/host_device.h"

namespace tpb {

inline constexpr std::uint64_t kFnv1a64Basis = 0xcbf29ce484222325ull;  // the hash of no bytes
inline constexpr std::uint64_t kFnv1a64Prime = 0x100000001b3ull;

// The running hash `h` after one more byte.
TPB_HOST_DEVICE constexpr std::uint64_t fnv1a64_step(std::uint64_t h, std::uint8_t byte) {
  return (h ^ byte) * kFnv1a64Prime;
}

// The running hash `h` after `n` bytes at `bytes`, in memory order.
TPB_HOST_DEVICE inline std::uint64_t fnv1a64_append(std::uint64_t h, const void* bytes, std::size_t n) {
  const auto* p = static_cast<const unsigned char*>(bytes);
  for (std::size_t i = 0; i < n; ++i) h = fnv1a64_step(h, p[i]);
  return h;
}

// FNV-1a 64 of `n` bytes.
TPB_HOST_DEVICE inline std::uint64_t fnv1a64(const void* bytes, std::size_t n) {
  return fnv1a64_append(kFnv1a64Basis, bytes, n);
}

// FNV-1a 64 of a NUL-terminated string (the terminator is not hashed).
TPB_HOST_DEVICE constexpr std::uint64_t fnv1a64(const char* text) {
  std::uint64_t h = kFnv1a64Basis;
  for (; *text != '\0'; ++text) h = fnv1a64_step(h, static_cast<std::uint8_t>(*text));
  return h;
}

// FNV-1a 64 of a string's bytes (host only).
constexpr std::uint64_t fnv1a64(std::string_view text) {
  std::uint64_t h = kFnv1a64Basis;
  for (const char c : text) h = fnv1a64_step(h, static_cast<std::uint8_t>(c));
  return h;
}

static_assert(fnv1a64("") == kFnv1a64Basis && fnv1a64("a") == 0xaf63dc4c8601ec8cull,
              "FNV-1a 64's published test vectors");

}  // namespace tpb
