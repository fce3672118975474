// The custom allreduce's barrier flag word (tpb/kernels/allreduce.h, AllreduceSignal::sync):
// one 64-bit value a block publishes with a single release store and its peer reads with a
// single acquire load. Bits 0..15: the publishing block's barrier count (compared wrap-safely);
// 16..31: the low 16 bits of its call index; 32..34: its shape (algorithm | dtype << 1);
// 35..63: its element count modulo 2^29. The call rides in the flag itself: a separate tag
// store before the flag's release would make every barrier wait for one more (remote) store
// to land. Header-only, shared by the kernels and their CPU test (tests/unit/allreduce_flag_test.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "tpb/dtype.h"
#include "tpb/host_device.h"
#include "tpb/kernels/allreduce.h"

namespace tpb {

constexpr int kAllreduceFlagCountBits = 16;
constexpr int kAllreduceFlagCallBits = 16;
constexpr int kAllreduceFlagShapeBits = 3;
constexpr int kAllreduceFlagElemBits = 29;
static_assert(kAllreduceFlagCountBits + kAllreduceFlagCallBits + kAllreduceFlagShapeBits + kAllreduceFlagElemBits == 64);
constexpr std::uint64_t kAllreduceFlagCountMask = (std::uint64_t{1} << kAllreduceFlagCountBits) - 1;

// A call's shape: bit 0 two-shot, the dtype above it.
TPB_HOST_DEVICE inline std::uint32_t allreduce_shape(bool two_shot, DType dtype) {
  return (two_shot ? 1u : 0u) | (static_cast<std::uint32_t>(dtype) << 1);
}

// The call's part of its flag words (bits 16..63).
TPB_HOST_DEVICE inline std::uint64_t allreduce_flag_tag_bits(std::uint32_t call, std::uint32_t shape, std::uint64_t count) {
  constexpr std::uint64_t kCall = (std::uint64_t{1} << kAllreduceFlagCallBits) - 1;
  constexpr std::uint64_t kShape = (std::uint64_t{1} << kAllreduceFlagShapeBits) - 1;
  constexpr std::uint64_t kElems = (std::uint64_t{1} << kAllreduceFlagElemBits) - 1;
  return ((call & kCall) | (shape & kShape) << kAllreduceFlagCallBits |
          (count & kElems) << (kAllreduceFlagCallBits + kAllreduceFlagShapeBits))
         << kAllreduceFlagCountBits;
}

// The word a block publishes at its barrier `flag` of the call whose tag bits are given.
TPB_HOST_DEVICE inline std::uint64_t allreduce_flag_word(std::uint64_t tag_bits, std::uint32_t flag) {
  return tag_bits | (flag & kAllreduceFlagCountMask);
}

// Whether a peer's word `seen` still lies before barrier `flag` (16-bit wrap-safe).
TPB_HOST_DEVICE inline bool allreduce_flag_before(std::uint64_t seen, std::uint32_t flag) {
  return static_cast<std::int16_t>(static_cast<std::uint16_t>(seen - flag)) < 0;
}

// The call a peer's word names, for the error report: its call index taken as the one nearest
// `mine` with the word's low 16 bits, its bytes from the element count and dtype.
TPB_HOST_DEVICE inline AllreduceCallTag allreduce_flag_call(std::uint64_t word, std::uint32_t mine) {
  const std::uint64_t bits = word >> kAllreduceFlagCountBits;
  const auto call16 = static_cast<std::uint16_t>(bits);
  const std::uint32_t shape = static_cast<std::uint32_t>(bits >> kAllreduceFlagCallBits) & 7u;
  const std::uint64_t elems = bits >> (kAllreduceFlagCallBits + kAllreduceFlagShapeBits);
  AllreduceCallTag t;
  t.call = mine + static_cast<std::uint32_t>(
                      static_cast<std::int32_t>(static_cast<std::int16_t>(call16 - static_cast<std::uint16_t>(mine))));
  t.shape = shape;
  t.bytes = elems * ((shape >> 1) == static_cast<std::uint32_t>(DType::f32) ? 4u : 2u);
  return t;
}

}  // namespace tpb
