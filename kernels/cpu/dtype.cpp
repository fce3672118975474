#include "tpb/dtype.h"

#include <cmath>

#include "tpb/check.h"

namespace tpb {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
  }
  return "?";
}

DType dtype_from_name(std::string_view name) {
  if (name == "f32" || name == "float32" || name == "F32") return DType::f32;
  if (name == "bf16" || name == "bfloat16" || name == "BF16") return DType::bf16;
  if (name == "f16" || name == "float16" || name == "F16") return DType::f16;
  TPB_INPUT_FAIL("unknown dtype '" << std::string(name) << "' (expected f32, bf16 or f16)");
}

float f16_to_float(std::uint16_t h) {
  const std::uint32_t sign = (h >> 15) & 1u, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  float value;
  if (exp == 0) {
    value = std::ldexp(static_cast<float>(mant), -24);  // subnormal
  } else if (exp == 31) {
    value = mant ? std::nanf("") : INFINITY;
  } else {
    value = std::ldexp(static_cast<float>(mant | 0x400u), static_cast<int>(exp) - 25);
  }
  return sign ? -value : value;
}

std::uint16_t float_to_f16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  const std::uint32_t sign = (u >> 16) & 0x8000u;
  const std::uint32_t abs = u & 0x7fffffffu;
  if (abs >= 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  if (abs >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // overflow to inf
  if (abs < 0x38800000u) {  // subnormal or zero in f16: round to nearest even at 2^-24
    float a;
    std::memcpy(&a, &abs, sizeof a);
    const float scaled = a * 16777216.0f;  // exact: a * 2^24
    return static_cast<std::uint16_t>(sign | static_cast<std::uint32_t>(std::nearbyint(scaled)));
  }
  std::uint32_t r = abs - 0x38000000u;  // rebias 127 -> 15
  r += 0xfffu + ((r >> 13) & 1u);
  return static_cast<std::uint16_t>(sign | (r >> 13));
}

}  // namespace tpb
