// bf16 <-> fp32 in the 16-byte vectors the memory-bound kernels move (8 bf16 per load or
// store), the alignment test that chooses between the vector and the scalar path, and the
// weight load that stays where it is written (load_early).
// Internal to kernels/cuda.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace tpb::gpu::detail {

inline bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

// A 16-byte read-only load of weights that ptxas keeps where it is written (volatile): a
// memory-bound kernel's loads must all be in flight before the first sum, and plain __ldg
// loads get sunk next to their use, which leaves a fraction of them in flight. Not cached in
// L1 (each weight is read once).
__device__ __forceinline__ uint4 load_early(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// V = 8: one 16-byte load of 8 bf16; V = 1: one element.
template <int V>
__device__ inline void load_bf16(const __nv_bfloat16* p, float (&f)[V]) {
  if constexpr (V == 8) {
    const uint4 u = *reinterpret_cast<const uint4*>(p);
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&u);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const float2 t = __bfloat1622float2(h[k]);
      f[2 * k] = t.x;
      f[2 * k + 1] = t.y;
    }
  } else {
    f[0] = __bfloat162float(*p);
  }
}

// Rounds to nearest even, as float_to_bf16 does on the host.
template <int V>
__device__ inline void store_bf16(__nv_bfloat16* p, const float (&f)[V]) {
  if constexpr (V == 8) {
    uint4 u;
    __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&u);
#pragma unroll
    for (int k = 0; k < 4; ++k) h[k] = __floats2bfloat162_rn(f[2 * k], f[2 * k + 1]);
    *reinterpret_cast<uint4*>(p) = u;
  } else {
    *p = __float2bfloat16_rn(f[0]);
  }
}

}  // namespace tpb::gpu::detail
