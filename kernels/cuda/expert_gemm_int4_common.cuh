// What both INT4 expert kernels (expert_gemm_int4.cu: the grouped decode kernel;
// expert_gemm_int4_prefill.cu: the tile kernel) share: the block shape, the in-register
// dequantization of packed words to the exact bf16 of q x scale, the scale-word loads and the
// argument checks. Included by those two files only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "tpb/check.h"
#include "tpb/kernels/gpu/expert_gemm_int4.h"
#include "tpb/kernels/int4_format.h"

namespace tpb::gpu::int4_kernels {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kGroup = int4::kGroupSize;  // inputs per scale
static_assert(kGroup == 32 && int4::kPerWord == 8, "the kernels' tiling assumes 8 nibbles a word, 32 a group");

// ---- dequantization ----

constexpr std::uint32_t kMagic128 = 0x43004300u;  // bf16 128 in both halves: nibble n -> 128 + n
constexpr std::uint32_t kBias136 = 0x43084308u;   // bf16 136 = 128 + int4::kNibbleOffset

__device__ __forceinline__ __nv_bfloat162 as_bf162(std::uint32_t u) {
  __nv_bfloat162 v;
  static_assert(sizeof v == sizeof u);
  __builtin_memcpy(&v, &u, sizeof v);
  return v;
}
__device__ __forceinline__ std::uint32_t as_u32(__nv_bfloat162 v) {
  std::uint32_t u;
  __builtin_memcpy(&u, &v, sizeof u);
  return u;
}

// bf16x2 of the two weights whose nibbles sit in bits 0-3 and 16-19 of v: q x scale rounded
// once (int4::dequant_bf16_bits).
__device__ __forceinline__ std::uint32_t dequant_pair(std::uint32_t v, __nv_bfloat162 scale2) {
  const __nv_bfloat162 biased = as_bf162((v & 0x000f000fu) | kMagic128);  // 128 + n, exact
  const __nv_bfloat162 q = __hsub2(biased, as_bf162(kBias136));          // n - 8, exact
  return as_u32(__hmul2(q, scale2));
}

__device__ __forceinline__ __nv_bfloat162 scale_pair(std::uint16_t bits) {
  return as_bf162(static_cast<std::uint32_t>(bits) * 0x00010001u);
}

__device__ __forceinline__ std::uint32_t word_of(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// 4 bytes global -> shared through L1 (cp.async's smallest size); with valid == false it
// writes zeros. The scales' 2-byte entries travel as the aligned word that holds them.
__device__ __forceinline__ void cp_async4(std::uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 4 : 0) : "memory");
}

// The scale at `p` as the 4-byte-aligned word holding it and the shift of its half.
__device__ __forceinline__ const void* scale_word(const __nv_bfloat16* p, int& shift) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  shift = static_cast<int>(a & 2u) * 8;  // 0 or 16
  return reinterpret_cast<const void*>(a & ~std::uintptr_t{3});
}

// The checks both launchers make of their arguments (the kernels index in int).
inline void check_common(const char* who, const __nv_bfloat16* x_sorted, std::int64_t experts, std::int64_t pairs,
                         const Int4ExpertWeights& w) {
  TPB_CHECK(w.in > 0 && w.in % kGroup == 0,
            who << ": in = " << w.in << " must be a positive multiple of 32 (the INT4 scale group)");
  TPB_CHECK(w.out > 0, who << ": out = " << w.out << " must be positive");
  TPB_CHECK(experts >= 0 && experts <= 65535 && pairs >= 0,
            who << ": bad shape experts " << experts << " pairs " << pairs);
  TPB_CHECK(w.in <= INT32_MAX / 2 && w.out <= INT32_MAX / 2, who << ": in " << w.in << " or out " << w.out << " too large");
  TPB_CHECK(reinterpret_cast<std::uintptr_t>(x_sorted) % 16 == 0 &&
                reinterpret_cast<std::uintptr_t>(w.packed) % 16 == 0 &&
                reinterpret_cast<std::uintptr_t>(w.scales) % 4 == 0,
            who << ": x_sorted and the packed weights must be 16-byte aligned, the scales 4-byte aligned");
}

}  // namespace tpb::gpu::int4_kernels
