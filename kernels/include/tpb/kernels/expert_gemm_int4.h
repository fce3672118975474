// Routed-expert GEMM with INT4 weights and bf16 activations (W4A16), the CPU reference of
// tpb/kernels/gpu/expert_gemm_int4.h. The weight format is tpb/kernels/int4_format.h
// (compressed-tensors pack-quantized, symmetric, group 32): expert e's projection W_e [out, in]
// is packed words [out, packed_words(in)] and bf16 scales [out, scale_groups(in)], the experts
// one after another, and W_e[o, j] = int4::dequant(q, scale): bf16(q x scale), rounded once.
//
// Expert e multiplies its sorted rows [offsets[e], offsets[e+1]) (the layout of
// tpb/kernels/gpu/moe_dispatch.h):
//   y_sorted[p, o] = sum_j x_sorted[p, j] * W_e[o, j]
// summed in double in increasing j and rounded once to float: the reference every kernel is
// held to, closer to the exact sum than any fp32 order. Any `in` (a ragged last word or group
// is read as the format defines it, with ceil); the GPU kernels ask for in % 32 == 0.
#pragma once

#include <cstdint>

namespace tpb::kernels {

// packed [rows, packed_words(in)] from q [rows, in] (row-major, each q in [-8, 7], checked):
// input j of a row in word j / 8 at bits 4 (j mod 8), nibble q + 8. The nibbles past `in` in
// a row's last word are 0 (no reader uses them).
void pack_int4_rows(const std::int8_t* q, std::int64_t rows, std::int64_t in, std::uint32_t* packed);

// w [rows, in] = int4::dequant(q, scale) of packed [rows, packed_words(in)] and scale_bits
// [rows, scale_groups(in)]: the exact bf16 weight values, held in fp32.
void dequant_int4_rows(const std::uint32_t* packed, const std::uint16_t* scale_bits, std::int64_t rows,
                       std::int64_t in, float* w);

// y_sorted [pairs, out] for x_sorted [pairs, in], offsets [experts + 1] (offsets[0] = 0,
// non-decreasing, pairs = offsets[experts]); expert e's weights at packed + e * out *
// packed_words(in) and scale_bits + e * out * scale_groups(in).
void expert_gemm_int4_ref(const float* x_sorted, const std::int32_t* offsets, std::int64_t experts,
                          const std::uint32_t* packed, const std::uint16_t* scale_bits, std::int64_t in,
                          std::int64_t out, float* y_sorted);

}  // namespace tpb::kernels
