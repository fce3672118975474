#include "tpb/kernels/tensor_digest.h"

#include <cmath>
#include <cstring>

namespace tpb::kernels {

namespace {

std::uint32_t bits_at(const void* data, std::size_t i, DType dtype) {
  if (dtype == DType::f32) {
    std::uint32_t u;
    std::memcpy(&u, static_cast<const unsigned char*>(data) + 4 * i, 4);
    return u;
  }
  std::uint16_t u;
  std::memcpy(&u, static_cast<const unsigned char*>(data) + 2 * i, 2);
  return u;
}

float value_at(const void* data, std::size_t i, DType dtype) {
  const std::uint32_t bits = bits_at(data, i, dtype);
  if (dtype == DType::f32) {
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  return dtype == DType::bf16 ? bf16_to_float(static_cast<std::uint16_t>(bits)) : f16_to_float(static_cast<std::uint16_t>(bits));
}

}  // namespace

std::uint64_t tensor_digest_ref(const void* data, std::size_t count, DType dtype) {
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < count; ++i) sum += tensor_digest_mix(i, bits_at(data, i, dtype));
  return tensor_digest_finish(sum, count);
}

void tensor_samples_ref(const void* data, std::size_t count, DType dtype, float* out) {
  for (int s = 0; s < kTensorSamples; ++s)
    out[s] = static_cast<std::size_t>(s) < count ? value_at(data, tensor_sample_index(s, count), dtype)
                                                 : std::nanf("");
}

void scale_values_ref(void* data, std::size_t count, DType dtype, float factor) {
  auto* bytes = static_cast<unsigned char*>(data);
  for (std::size_t i = 0; i < count; ++i) {
    const float v = value_at(data, i, dtype) * factor;
    if (dtype == DType::f32) {
      std::memcpy(bytes + 4 * i, &v, 4);
    } else {
      const std::uint16_t b = dtype == DType::bf16 ? float_to_bf16(v) : float_to_f16(v);
      std::memcpy(bytes + 2 * i, &b, 2);
    }
  }
}

}  // namespace tpb::kernels
