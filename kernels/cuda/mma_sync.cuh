// The warp-level tensor-core building blocks the attention kernels share (mla_decode.cu,
// mla_prefill.cu): 16-byte cp.async copies into shared memory, ldmatrix fragment loads and the
// mma.sync m16n8k16 bf16 MMA with fp32 accumulate. Internal to kernels/cuda.
//
// Fragment layouts (PTX ISA, mma.m16n8k16, g = lane / 4, t = lane % 4):
//   A 16x16 row-major: a0 (row g, cols 2t, 2t+1), a1 (row g+8, same cols), a2 (row g, cols
//     2t+8, 2t+9), a3 (row g+8, cols 2t+8, 2t+9); two bf16 per register, lower column low.
//   B 16x8 column-major: b0 (rows 2t, 2t+1 of column g), b1 (rows 2t+8, 2t+9 of column g).
//   C/D 16x8 fp32: d0, d1 (row g, cols 2t, 2t+1), d2, d3 (row g+8, the same cols).
// So the accumulators of two adjacent 8-column tiles, packed to bf16 pairs, are the A fragment
// of the 16x16 block they form: {tile0 d0d1, tile0 d2d3, tile1 d0d1, tile1 d2d3}.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace tpb::gpu::detail {

// v rounded up to a multiple of m (shared-memory row and tile geometry).
inline int round_up(int v, int m) { return (v + m - 1) / m * m; }

__device__ __forceinline__ std::uint32_t smem_addr(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, bypassing L1; with valid == false it writes 16 zero bytes.
__device__ __forceinline__ void cp_async16(std::uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Four 8x8 bf16 matrices; lanes 8i..8i+7 give the row addresses of matrix i.
__device__ __forceinline__ void ldmatrix_x4(std::uint32_t addr, std::uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t addr, std::uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

// d += a (16x16, row-major fragment) * b (16x8, column-major fragment), fp32 accumulate.
__device__ __forceinline__ void mma_bf16(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                         std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ std::uint32_t pack_bf16x2(__nv_bfloat16 lo, __nv_bfloat16 hi) {
  return static_cast<std::uint32_t>(__bfloat16_as_ushort(lo)) |
         (static_cast<std::uint32_t>(__bfloat16_as_ushort(hi)) << 16);
}

// 2^x in one MUFU.EX2 (flash-attention's exp2f under fast math): results below 2^-126 flush to
// zero, so exp2f's denormal fix-up goes; such weights are below P's bf16 resolution relative to
// the row's largest weight (1) by 118 binades. Deterministic like every instruction here. The
// prefill attention kernels' exponential, mma.sync and wgmma alike.
__device__ __forceinline__ float exp2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace tpb::gpu::detail
