// Hopper warpgroup MMA (wgmma, sm_90a) building blocks for the attention kernels: shared-memory
// matrix descriptors for the 128-byte-swizzled layout, the fences and commit/wait of the async
// MMA, m64n{8,16,32,64}k16 bf16 -> fp32 with both operands in shared memory and m64n{128,256}k16
// with A in registers. Internal to kernels/cuda.
// tests/gpu/wgmma_test.cu checks the layouts against the CPU.
//
// Layout (PTX ISA, "Shared memory matrix layout" of wgmma): a bf16 tile whose rows are 64
// elements (128 bytes) long, rows stored one after another, with the 128-byte swizzle: the
// 16-byte chunk c of row r is stored at chunk c ^ (r % 8) of that row. Groups of 8 rows (1024
// bytes) repeat it. One such tile [R rows][64 cols] is the operand of every k16 step:
//   K-major (A, or B stored [N][K]): rows are M (or N), the 64 columns are K; the step over
//     K = 16 advances the descriptor's start address by 32 bytes; SBO = 1024 bytes (from one
//     8-row group to the next along M or N); LBO unused (1).
//   MN-major (B stored [K][N], "transposed"): rows are K, the 64 columns are N; the step over
//     K = 16 advances the start address by 16 rows (2048 bytes); SBO = 1024 bytes (8 K rows);
//     LBO = the bytes from one 64-column block of N to the next (unused at N = 64).
// Accumulators of m64nN (fp32, 128 threads): warp w holds rows 16w + g and 16w + g + 8
// (g = lane / 4); d[4j + 0, 1] = row 16w + g, columns 8j + 2(lane % 4) + {0, 1}; d[4j + 2, 3] =
// row 16w + g + 8, the same columns.
#pragma once

#include <cstdint>

// wgmma exists only on the arch-specific target sm_90a, and a build emits other architectures
// too (sm_80, sm_100, sm_120: CMakeLists.txt). A kernel that uses wgmma keeps its body for the
// sm_90a device pass (and the host pass, which compiles no device code) only:
//   __global__ void k(...) {
//   #if TPB_WGMMA_COMPILED
//     ...
//   #else
//     __trap();  // not launched here: see below
//   #endif
//   }
// so the other architectures' images are one trap each, and cost next to no compile time. The
// host never launches them there: the kernel-path registry (tpb/kernels/kernel_paths.h) offers
// the wgmma kernels on a compute capability 9.0 device of a build with sm_90a code only. Each
// instruction below compiles to a trap outside sm_90a as well, should any other code use it.
#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TPB_WGMMA_COMPILED 1
#define TPB_WGMMA_ASM(...) asm volatile(__VA_ARGS__)
#else
#define TPB_WGMMA_COMPILED 0
#define TPB_WGMMA_ASM(...) __trap()
// There the kernels' helpers and constants go unused: "declared but never referenced" (177)
// says nothing in this pass of a file that includes this one.
#pragma nv_diag_suppress 177
#endif

namespace tpb::gpu::detail {

// Byte offset of element (row, col) of a [rows][64] bf16 tile in the 128-byte-swizzled layout.
__host__ __device__ __forceinline__ std::uint32_t sw128_offset(int row, int col) {
  const int chunk = col >> 3;  // 16-byte chunk of the 128-byte row
  return static_cast<std::uint32_t>(row * 128 + ((chunk ^ (row & 7)) << 4) + (col & 7) * 2);
}

// The descriptor of a 128-byte-swizzled operand whose first row starts at shared address
// `addr` (1024-byte aligned for the swizzle pattern to start at row 0), with the byte offsets
// as above.
__device__ __forceinline__ std::uint64_t sw128_desc(std::uint32_t addr, std::uint32_t lbo_bytes,
                                                    std::uint32_t sbo_bytes) {
  std::uint64_t d = 0;
  d |= static_cast<std::uint64_t>((addr >> 4) & 0x3FFF);
  d |= static_cast<std::uint64_t>((lbo_bytes >> 4) & 0x3FFF) << 16;
  d |= static_cast<std::uint64_t>((sbo_bytes >> 4) & 0x3FFF) << 32;
  d |= std::uint64_t{1} << 62;  // 128-byte swizzle
  return d;
}

// Shared memory written by ordinary stores (the generic proxy) becomes visible to wgmma (the
// async proxy); then a barrier, before the first wgmma reads it.
__device__ __forceinline__ void fence_proxy_async() { TPB_WGMMA_ASM("fence.proxy.async.shared::cta;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_fence() { TPB_WGMMA_ASM("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { TPB_WGMMA_ASM("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  TPB_WGMMA_ASM("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// Pins accumulator registers at this point of the program: the compiler sees a wgmma's outputs
// as ready when it is issued, so without this a use of them could be moved above the
// wgmma_wait that makes them so (CUTLASS's warpgroup_fence_operand does the same).
template <int N>
__device__ __forceinline__ void fence_operands(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// d[64 x 64] (+)= A[64 x 16] * B[16 x 64], both from shared memory; scale_d 0 overwrites d.
// TransB 0: B K-major ([N][K] rows); 1: B MN-major ([K][N] rows).
template <int TransB>
__device__ __forceinline__ void wgmma_m64n64k16_ss(float (&d)[32], std::uint64_t a_desc, std::uint64_t b_desc,
                                                   int scale_d) {
  TPB_WGMMA_ASM(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "%32, %33, p, 1, 1, 0, %35;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(a_desc), "l"(b_desc), "r"(scale_d), "n"(TransB));
}

// d[64 x kN] (+)= A[64 x 16] * B[16 x kN], kN in {8, 16, 32}, both from shared memory, always
// accumulating (zero d first for a fresh product). TransA 0: A K-major ([M][K] rows); 1: A
// MN-major ([K][M] rows, as MN-major B above with M for N). B K-major ([N][K] rows). The decode
// attention with few heads per CTA puts the heads in N (mla_decode_wgmma.cu).
template <int kN, int TransA>
__device__ __forceinline__ void wgmma_m64nNk16_ss(float (&d)[kN / 2], std::uint64_t a_desc, std::uint64_t b_desc) {
  static_assert(kN == 8 || kN == 16 || kN == 32, "m64n8, m64n16 or m64n32");
  if constexpr (kN == 8) {
    TPB_WGMMA_ASM(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %6, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0, %1, %2, %3}, %4, %5, p, 1, 1, %7, 0;\n"
        "}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "l"(a_desc), "l"(b_desc), "r"(1), "n"(TransA));
  } else if constexpr (kN == 16) {
    TPB_WGMMA_ASM(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %10, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1, "
        "%11, 0;\n"
        "}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
        : "l"(a_desc), "l"(b_desc), "r"(1), "n"(TransA));
  } else {
    TPB_WGMMA_ASM(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %18, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1, %19, 0;\n"
        "}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
        : "l"(a_desc), "l"(b_desc), "r"(1), "n"(TransA));
  }
}

// The descriptor offset (in 16-byte units) of k16 step ks of a K-major operand stored as
// 64-column swizzled blocks block_bytes apart: block ks / 4, 32 bytes into its rows per step.
__device__ __forceinline__ std::uint32_t k16_step_offset16(int ks, int block_bytes) {
  return static_cast<std::uint32_t>(((ks >> 2) * block_bytes + 32 * (ks & 3)) >> 4);
}

// S[64 x 64] = A B^T over kSteps k16 steps, both operands K-major in shared memory as 64-column
// swizzled blocks of 64 rows one after another (8 KB apart; k16 step ks is block ks / 4, 32
// bytes into its rows per step within it): the attention kernels' scores, Q against a tile of
// keys. Issued and committed, not waited for. A descriptor's low bits are the start address / 16,
// so each step's offset is added to it directly.
template <int kSteps>
__device__ __forceinline__ void wgmma_scores_ss(float (&s)[32], std::uint64_t a_desc, std::uint64_t b_desc) {
#pragma unroll
  for (int i = 0; i < 32; ++i) s[i] = 0.0f;
  fence_operands(s);
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < kSteps; ++ks) {
    const std::uint32_t off16 = k16_step_offset16(ks, 8192);
    wgmma_m64n64k16_ss<0>(s, a_desc + off16, b_desc + off16, 1);
  }
  wgmma_commit();
}

// d[64 x 256] (+)= A[64 x 16] * B[16 x 256]: A from registers (the m16n8k16 A fragment of each
// warp's 16 rows: a[0] row g, k 2q..; a[1] row g + 8; a[2] row g, k 8 + 2q..; a[3] row g + 8,
// k 8 + 2q..), B from shared memory, MN-major ([K][N] rows, four 64-column blocks LBO apart).
__device__ __forceinline__ void wgmma_m64n256k16_rs_bmn(float (&d)[128], const std::uint32_t (&a)[4],
                                                        std::uint64_t b_desc, int scale_d) {
  TPB_WGMMA_ASM(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %133, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
      "{%128, %129, %130, %131}, %132, p, 1, 1, 1;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
        "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
        "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
        "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
        "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
        "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
        "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(scale_d));
}

// d[64 x 128] (+)= A[64 x 16] * B[16 x 128]: A from registers (as wgmma_m64n256k16_rs_bmn),
// B from shared memory, MN-major ([K][N] rows, two 64-column blocks LBO apart).
__device__ __forceinline__ void wgmma_m64n128k16_rs_bmn(float (&d)[64], const std::uint32_t (&a)[4],
                                                        std::uint64_t b_desc, int scale_d) {
  TPB_WGMMA_ASM(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "{%64, %65, %66, %67}, %68, p, 1, 1, 1;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(scale_d));
}

// O (+)= P V over a 64-key tile with P as bf16 hi + lo (the split-P numerics of the attention
// kernels): four k16 steps, hi then lo at each, A from registers (p_hi[kk], p_lo[kk]: keys
// 16 kk ..), V MN-major from shared memory at v_desc, 2048 bytes (16 key rows) per step. O is
// [64 x 128] (float[64]) or [64 x 256] (float[128]). Issued and committed, not waited for;
// the caller fences O's registers first.
template <int N>
__device__ __forceinline__ void wgmma_pv_split_p(float (&o)[N], const std::uint32_t (&p_hi)[4][4],
                                                 const std::uint32_t (&p_lo)[4][4], std::uint64_t v_desc) {
  static_assert(N == 64 || N == 128, "m64n128 or m64n256");
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    if constexpr (N == 64) {
      wgmma_m64n128k16_rs_bmn(o, p_hi[kk], v_desc + ((2048 * kk) >> 4), 1);
      wgmma_m64n128k16_rs_bmn(o, p_lo[kk], v_desc + ((2048 * kk) >> 4), 1);
    } else {
      wgmma_m64n256k16_rs_bmn(o, p_hi[kk], v_desc + ((2048 * kk) >> 4), 1);
      wgmma_m64n256k16_rs_bmn(o, p_lo[kk], v_desc + ((2048 * kk) >> 4), 1);
    }
  }
  wgmma_commit();
}

}  // namespace tpb::gpu::detail
