// Element types that cross interfaces (communicators, weights, kernels), and the exact
// bf16/fp16 conversions every CPU reference uses (round to nearest even, as the GPU does).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace tpb {

enum class DType { f32, bf16, f16 };

constexpr std::size_t dtype_size(DType t) { return t == DType::f32 ? 4 : 2; }
std::string_view dtype_name(DType t);
DType dtype_from_name(std::string_view name);  // "f32"|"float32", "bf16"|"bfloat16", "f16"|"float16"; throws InputError

// bf16 stored as its 16 bits: no dependency on cuda_bf16.h in CPU code.
inline float bf16_to_float(std::uint16_t bits) {
  std::uint32_t u = static_cast<std::uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline std::uint16_t float_to_bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) return static_cast<std::uint16_t>((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest, ties to even
  return static_cast<std::uint16_t>(u >> 16);
}

float f16_to_float(std::uint16_t bits);
std::uint16_t float_to_f16(float f);

}  // namespace tpb
