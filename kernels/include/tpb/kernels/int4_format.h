// Kimi-K2.5's INT4 routed experts: compressed-tensors "pack-quantized", symmetric, 4 bits,
// group 32 along the input dimension. One definition of the format for every reader (the
// checkpoint loader, the synthetic generator, the CPU reference, the CUDA kernels).
//
// A projection W [out, in] is stored as
//   weight_packed  int32 [out, ceil(in / 8)]: input j of a row sits in word j / 8, bits
//                  4 (j mod 8) .. 4 (j mod 8) + 3 (element 0 in the lowest nibble); the
//                  nibble is q + 8 with q in [-8, 7];
//   weight_scale   bf16 [out, ceil(in / 32)]: one scale per 32 consecutive inputs;
//   weight_shape   int32 [2] = {out, in}.
// The weight is W[o, j] = bf16(q × scale[o, j / 32]): the product is exact in fp32 (a 4-bit
// integer times an 8-bit significand) and is rounded once to bf16 (nearest, ties to even), as
// compressed-tensors' decompression computes it in the scale's dtype and as W4A16 kernels do
// in registers. The CPU engine holds that bf16 value in fp32; the GPU kernels multiply it.
//
// Usable from CUDA: include it in a .cu file and the functions become __host__ __device__.
#pragma once

#include <cstdint>

#include "tpb/host_device.h"

namespace tpb::int4 {

inline constexpr int kBits = 4;
inline constexpr int kPerWord = 8;       // nibbles per int32 of weight_packed
inline constexpr int kGroupSize = 32;    // inputs per weight_scale entry
inline constexpr int kNibbleOffset = 8;  // nibble = q + 8

// Words of weight_packed and entries of weight_scale per row of `in` inputs.
TPB_HOST_DEVICE constexpr std::int64_t packed_words(std::int64_t in) { return (in + kPerWord - 1) / kPerWord; }
TPB_HOST_DEVICE constexpr std::int64_t scale_groups(std::int64_t in) { return (in + kGroupSize - 1) / kGroupSize; }

// q in [-8, 7] of input j (0..7) of one packed word.
TPB_HOST_DEVICE inline int unpack(std::uint32_t word, int j) {
  return static_cast<int>((word >> (kBits * j)) & 0xFu) - kNibbleOffset;
}

// The word holding q[0..7] (q[j] in [-8, 7]).
TPB_HOST_DEVICE inline std::uint32_t pack8(const int (&q)[kPerWord]) {
  std::uint32_t w = 0;
  for (int j = 0; j < kPerWord; ++j) w |= static_cast<std::uint32_t>(q[j] + kNibbleOffset) << (kBits * j);
  return w;
}

// bf16 bits of f: round to nearest, ties to even (as __float2bfloat16_rn and
// tpb::float_to_bf16); a NaN stays a (quiet) NaN.
TPB_HOST_DEVICE inline std::uint16_t round_to_bf16_bits(float f) {
  std::uint32_t u;
#if defined(__CUDA_ARCH__)
  u = __float_as_uint(f);
#else
  __builtin_memcpy(&u, &f, sizeof u);
#endif
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) return static_cast<std::uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

// bf16 bits of bf16(q × scale): the product is exact in fp32, rounded once. scale_bits is the
// bf16 scale; a NaN scale stays NaN.
TPB_HOST_DEVICE inline std::uint16_t dequant_bf16_bits(int q, std::uint16_t scale_bits) {
  const std::uint32_t s_u = static_cast<std::uint32_t>(scale_bits) << 16;
  float s;
  static_assert(sizeof(float) == sizeof(std::uint32_t));
#if defined(__CUDA_ARCH__)
  s = __uint_as_float(s_u);
#else
  __builtin_memcpy(&s, &s_u, sizeof s);
#endif
  return round_to_bf16_bits(static_cast<float>(q) * s);  // the product is exact in fp32
}

// The weight's value as fp32 (the CPU engine's storage).
TPB_HOST_DEVICE inline float dequant(int q, std::uint16_t scale_bits) {
  const std::uint32_t u = static_cast<std::uint32_t>(dequant_bf16_bits(q, scale_bits)) << 16;
  float f;
#if defined(__CUDA_ARCH__)
  f = __uint_as_float(u);
#else
  __builtin_memcpy(&f, &u, sizeof f);
#endif
  return f;
}

}  // namespace tpb::int4
