// Plain-loop reference of the allreduce arithmetic (see tpb/kernels/allreduce_ref.h).
#include "tpb/kernels/allreduce_ref.h"

#include <cstdint>
#include <cstring>

#include "tpb/check.h"

namespace tpb {

static float load_as_float(const void* base, std::size_t i, DType dtype) {
  if (dtype == DType::f32) {
    float v;
    std::memcpy(&v, static_cast<const char*>(base) + 4 * i, 4);
    return v;
  }
  std::uint16_t bits;
  std::memcpy(&bits, static_cast<const char*>(base) + 2 * i, 2);
  return dtype == DType::bf16 ? bf16_to_float(bits) : f16_to_float(bits);
}

static void store_from_float(void* base, std::size_t i, DType dtype, float v) {
  if (dtype == DType::f32) {
    std::memcpy(static_cast<char*>(base) + 4 * i, &v, 4);
    return;
  }
  std::uint16_t bits = dtype == DType::bf16 ? float_to_bf16(v) : float_to_f16(v);
  std::memcpy(static_cast<char*>(base) + 2 * i, &bits, 2);
}

void allreduce_ref(const std::vector<const void*>& inputs, void* out, std::size_t count, DType dtype) {
  TPB_CHECK(!inputs.empty(), "allreduce_ref needs at least one input");
  for (std::size_t i = 0; i < count; ++i) {
    float acc = load_as_float(inputs[0], i, dtype);
    for (std::size_t r = 1; r < inputs.size(); ++r) acc += load_as_float(inputs[r], i, dtype);
    store_from_float(out, i, dtype, acc);  // after all reads of index i: aliasing is safe
  }
}

}  // namespace tpb
