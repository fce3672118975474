// INT4-weight routed-expert GEMMs (tpb/kernels/gpu/expert_gemm_int4.h): the grouped decode kernel
// and the variants tpb_bench compares (the tile kernel is expert_gemm_int4_prefill.cu, what both
// share expert_gemm_int4_common.cuh); the CPU reference is kernels/cpu/expert_gemm_int4.cpp.
//
// Dequantization, both kernels: a nibble n masked into the mantissa of bf16 128 (0x4300) is
// the bf16 128 + n exactly; subtracting 136 gives q = n - 8 exactly; one bf16x2 multiply by the
// scale rounds q x scale once to nearest even (mul.rn.bf16x2, or fma.rn.bf16x2 with -0 before
// sm_90): int4::dequant_bf16_bits bit for bit. Two weights per 32-bit instruction, no fp32
// round trip. The MMA then sees the exact bf16 weight; products and sums are fp32.
//
// Grouped kernel (decode). Weights are the MMA's A operand (16 output rows x 16 inputs) and the
// tokens its N = 8 columns, so at 1..8 rows per expert no MMA row is padding and the kernel is
// bound by the weight bytes. The inputs' order inside an MMA is free as long as A and B agree,
// and it is chosen so that the checkpoint's words need no repacking: thread (g, t) of a warp
// owns group t (32 inputs, 4 words, one 16-byte load per row) of each 128-input chunk for rows
// g and g + 8; word w gives it two k16 MMAs, and the magic-number unpack yields the nibble pairs
// (0, 4), (1, 5), (2, 6), (3, 7) that become a0, a2 of the first MMA and a0, a2 of the second.
// The activations (B: token g, inputs of group t) are permuted to match with one byte permute
// per register. A block's 8 warps split the input dimension (warps_k, a function of `in`
// alone) and the rows; each warp sums its chunks in increasing order, and the warps' partial
// tiles meet in shared memory in warp order. Blocks find their expert by scanning the offsets
// (as expert_gemm_grouped does), so the grid depends on (experts, pairs, out) only.
// Two pipelines, the same sums (tuning variants, bitwise equal by the test):
//   registers (the default): each warp keeps 1 or 2 chunks of words, scales and activations
//     in flight in registers, loads issued ahead of their use (measured on one H100: the MoE
//     layer at 0.62 to 0.70 of the copy bandwidth at TP 1, batch 1 to 64);
//   ring: packed words, scales and activations travel with cp.async into a per-warp ring of
//     kRing chunks in shared memory (each thread copies exactly the bytes it later reads, so
//     no barrier guards it, and nothing in flight holds registers), running on across the
//     block's tiles. Compiled only in this form; with the activations one chunk ahead in
//     registers instead it measured slower than the register pipeline (their L2 latency paid
//     once per chunk).
//
// Prefill kernel: expert_gemm_int4_prefill.cu (128 x 128 tiles through a cp.async pipeline).
//
// Numerics: every output is one fixed sequence of fp32 MMA accumulations (ascending inputs in
// the grouped kernel's chunk order, then the warps' partials in warp order; ascending 16-input
// steps in the prefill kernel); no atomics, the same bits on every call.
#include "tpb/kernels/gpu/expert_gemm_int4.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/expert_gemm_int4_common.cuh"
#include "cuda/nonempty_expert.cuh"
#include "cuda/mma_sync.cuh"
#include "cuda/programmatic_launch.cuh"
#include "tpb/check.h"
#include "tpb/cuda_check.h"
#include "tpb/kernels/gpu/device_limits.h"
#include "tpb/kernels/int4_format.h"
#include "tpb/kernels/kernel_paths.h"

namespace tpb::gpu {

namespace {

using namespace int4_kernels;  // NOLINT: the shared block shape and dequantization

// ---- grouped (decode) kernel ----

constexpr int kChunk = 4 * kGroup;  // inputs per warp step: one group per thread of a quad

// acc += one chunk: for each of the group's 4 words, 2 k16 MMAs per (m-tile, n-tile), in
// increasing inputs. w[i][h]: the group's words of row 16 i + 8 h + g; s: their scales; x[j]:
// token 8 j + g's 32 activations of the group.
template <int kMTiles, int kNTiles>
__device__ __forceinline__ void mma_chunk(const uint4 (&w)[kMTiles][2], const std::uint16_t (&s)[kMTiles][2],
                                          const uint4 (&x)[kNTiles][4], float (&acc)[kMTiles][kNTiles][4]) {
  __nv_bfloat162 s2[kMTiles][2];
#pragma unroll
  for (int i = 0; i < kMTiles; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) s2[i][h] = scale_pair(s[i][h]);
#pragma unroll
  for (int k8 = 0; k8 < 4; ++k8) {
    // Nibble pairs (0,4), (1,5), (2,6), (3,7) of rows g and g + 8.
    std::uint32_t a[kMTiles][2][4];
#pragma unroll
    for (int i = 0; i < kMTiles; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const std::uint32_t word = word_of(w[i][h], k8);
#pragma unroll
        for (int k = 0; k < 4; ++k) a[i][h][k] = dequant_pair(word >> (4 * k), s2[i][h]);
      }
#pragma unroll
    for (int j = 0; j < kNTiles; ++j) {
      // x[8 k8 .. +7] of token g as (x0,x4), (x1,x5) for the first MMA, (x2,x6), (x3,x7) for the second.
      const uint4 xv = x[j][k8];
      const std::uint32_t b00 = __byte_perm(xv.x, xv.z, 0x5410), b01 = __byte_perm(xv.x, xv.z, 0x7632);
      const std::uint32_t b10 = __byte_perm(xv.y, xv.w, 0x5410), b11 = __byte_perm(xv.y, xv.w, 0x7632);
#pragma unroll
      for (int i = 0; i < kMTiles; ++i) {
        const std::uint32_t first[4] = {a[i][0][0], a[i][1][0], a[i][0][1], a[i][1][1]};
        const std::uint32_t second[4] = {a[i][0][2], a[i][1][2], a[i][0][3], a[i][1][3]};
        detail::mma_bf16(acc[i][j], first, b00, b01);
        detail::mma_bf16(acc[i][j], second, b10, b11);
      }
    }
  }
}

// Shared memory of the grouped kernel: per warp a ring of kRing chunks, each thread's own
// pieces lane-contiguous (conflict-free 16-byte accesses): packed words (16 bytes per row),
// activations (64 bytes per token) and scale words; then the warps' partial tiles.
template <int kMTiles, int kNTiles, int kRing>
struct GroupedSmem {
  static constexpr int kPieces = kMTiles * 2;  // weight rows per thread per chunk
  static constexpr int kXPieces = kNTiles * 4;  // 16-byte activation pieces per thread per chunk
  static constexpr int kWordsBytes = kWarps * kRing * kPieces * 32 * 16;
  static constexpr int kXBytes = kWarps * kRing * kXPieces * 32 * 16;
  static constexpr int kScalesBytes = kWarps * kRing * kPieces * 32 * 4;
  static constexpr int kPartialBytes = kWarps * kMTiles * kNTiles * 4 * 32 * 4;
  static constexpr int kBytes = kWordsBytes + kXBytes + kScalesBytes + kPartialBytes;
};

// kMTiles 16-row tiles per warp, kNTiles 8-token tiles per pass over the weights, kRing chunks
// of packed words, scales and activations in flight per warp (cp.async into shared memory: no
// registers held while they travel), kMinBlocks resident blocks per SM asked of the compiler.
// None of them changes any output's sum order.
//
// A warp's work is one sequence of items (tile, pass, chunk): its tiles of the block (tiles
// stride over blockIdx.x), each expert row pass of 8 kNTiles tokens, its chunks of the input
// range. The ring runs over the whole sequence, so the next tile's weights are in flight
// while this tile's last chunks are multiplied; at the end of a (tile, pass) the warps'
// partial sums meet (two block barriers, reached by every warp in the same order).
template <int kMTiles, int kNTiles, int kRing, int kMinBlocks>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    expert_gemm_int4_grouped_kernel(const __nv_bfloat16* __restrict__ x, const std::int32_t* __restrict__ offsets,
                                    int experts, const std::uint32_t* __restrict__ packed,
                                    const __nv_bfloat16* __restrict__ scales, int in, int out, int warps_k,
                                    __nv_bfloat16* __restrict__ y) {
  using Smem = GroupedSmem<kMTiles, kNTiles, kRing>;
  constexpr int kRegs = kMTiles * kNTiles * 4;
  detail::chain_after_prior_grids();
  const int e = detail::nth_nonempty_expert<kWarps>(offsets, experts, static_cast<int>(blockIdx.y));
  if (e < 0) return;
  const std::int64_t begin = offsets[e], end = offsets[e + 1];
  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int warps_m = kWarps / warps_k, wm = warp / warps_k, kw = warp % warps_k;
  const int block_rows = warps_m * 16 * kMTiles;
  const int words_per_row = in / int4::kPerWord, groups = in / kGroup, chunks = (groups + 3) / 4;
  const int c_begin = kw * chunks / warps_k, chunks_mine = (kw + 1) * chunks / warps_k - c_begin;  // >= 1
  const std::uint32_t* pe = packed + e * (static_cast<std::int64_t>(out) * words_per_row);
  const __nv_bfloat16* se = scales + e * (static_cast<std::int64_t>(out) * groups);
  const int tiles = (out + block_rows - 1) / block_rows;
  const int my_tiles = static_cast<int>(blockIdx.x) < tiles ? (tiles - 1 - static_cast<int>(blockIdx.x)) / static_cast<int>(gridDim.x) + 1 : 0;
  const int passes = static_cast<int>((end - begin + 8 * kNTiles - 1) / (8 * kNTiles));
  const int items = my_tiles * passes * chunks_mine;

  extern __shared__ __align__(16) unsigned char smem[];
  uint4* ring_words = reinterpret_cast<uint4*>(smem) + warp * kRing * Smem::kPieces * 32;
  uint4* ring_x = reinterpret_cast<uint4*>(smem + Smem::kWordsBytes) + warp * kRing * Smem::kXPieces * 32;
  std::uint32_t* ring_scales = reinterpret_cast<std::uint32_t*>(smem + Smem::kWordsBytes + Smem::kXBytes) +
                               warp * kRing * Smem::kPieces * 32;
  float* partial = reinterpret_cast<float*>(smem + Smem::kWordsBytes + Smem::kXBytes + Smem::kScalesBytes);

  // Item j: chunk c_begin + j % chunks_mine of pass (j / chunks_mine) % passes of the block's
  // (j / chunks_mine / passes)-th tile.
  struct Item {
    int o_first;         // the warp's first row
    std::int64_t p0;     // the pass's first token
    int group;           // this thread's group
  };
  auto item_of = [&](int j) {
    const int tp = j / chunks_mine, pass = tp % passes;
    const int tile = static_cast<int>(blockIdx.x) + (tp / passes) * static_cast<int>(gridDim.x);
    return Item{tile * block_rows + wm * 16 * kMTiles, begin + static_cast<std::int64_t>(pass) * 8 * kNTiles,
                (c_begin + j % chunks_mine) * 4 + t};
  };
  // Token 8 n + g of item `it` (or its pass's end), and whether this thread reads it.
  auto x_ok = [&](const Item& it, int n) { return it.p0 + 8 * n + g < end && it.group < groups; };
  // The packed words, scales and activations of item j into ring slot j % kRing (this
  // thread's own pieces, so its cp.async wait alone makes them visible to it); one commit group
  // per item, empty past the end, so the wait count below is uniform. Tokens past the expert's
  // rows are not copied: the reader substitutes zeros.
  auto issue = [&](int j) {
    if (j < items) {
      const Item it = item_of(j);
      const int slot = j % kRing;
#pragma unroll
      for (int piece = 0; piece < Smem::kPieces; ++piece) {
        const int row = it.o_first + 16 * (piece / 2) + 8 * (piece % 2) + g;
        const bool ok = row < out && it.group < groups;
        const std::int64_t r = ok ? row : 0, gi = ok ? it.group : 0;
        int shift;
        const int idx = (slot * Smem::kPieces + piece) * 32 + lane;
        detail::cp_async16(detail::smem_addr(ring_words + idx), pe + r * words_per_row + gi * 4, ok);
        cp_async4(detail::smem_addr(ring_scales + idx), scale_word(se + r * groups + gi, shift), ok);
      }
#pragma unroll
      for (int n = 0; n < kNTiles; ++n)
        if (x_ok(it, n)) {
          const __nv_bfloat16* src = x + (it.p0 + 8 * n + g) * in + it.group * kGroup;
#pragma unroll
          for (int q = 0; q < 4; ++q)
            detail::cp_async16(detail::smem_addr(ring_x + ((slot * Smem::kXPieces) + n * 4 + q) * 32 + lane),
                               src + 8 * q, true);
        }
    }
    detail::cp_async_commit();
  };

#pragma unroll
  for (int s = 0; s < kRing - 1; ++s) issue(s);
  float acc[kMTiles][kNTiles][4];
#pragma unroll
  for (int i = 0; i < kMTiles; ++i)
#pragma unroll
    for (int n = 0; n < kNTiles; ++n)
#pragma unroll
      for (int k = 0; k < 4; ++k) acc[i][n][k] = 0.f;

  for (int j = 0; j < items; ++j) {
    detail::cp_async_wait<kRing - 2>();  // item j's words, scales and activations have landed
    const Item it = item_of(j);
    const int slot = j % kRing;
    uint4 w[kMTiles][2];
    std::uint16_t sc[kMTiles][2];
#pragma unroll
    for (int piece = 0; piece < Smem::kPieces; ++piece) {
      const int idx = (slot * Smem::kPieces + piece) * 32 + lane;
      const int row = it.o_first + 16 * (piece / 2) + 8 * (piece % 2) + g;
      int shift;  // which half of the word (a padding row or group landed as zeros: either)
      scale_word(se + static_cast<std::int64_t>(row) * groups + it.group, shift);
      w[piece / 2][piece % 2] = ring_words[idx];
      sc[piece / 2][piece % 2] = static_cast<std::uint16_t>(ring_scales[idx] >> shift);
    }
    uint4 xr[kNTiles][4];
#pragma unroll
    for (int n = 0; n < kNTiles; ++n) {
      const bool ok = x_ok(it, n);
#pragma unroll
      for (int q = 0; q < 4; ++q)
        xr[n][q] = ok ? ring_x[((slot * Smem::kXPieces) + n * 4 + q) * 32 + lane] : make_uint4(0, 0, 0, 0);
    }
    mma_chunk(w, sc, xr, acc);
    issue(j + kRing - 1);  // into the slot item j - 1 used

    if ((j + 1) % chunks_mine == 0) {  // the end of this (tile, pass), at the same count in every warp
      if (warps_k > 1) {
        if (kw > 0) {
#pragma unroll
          for (int i = 0; i < kMTiles; ++i)
#pragma unroll
            for (int n = 0; n < kNTiles; ++n)
#pragma unroll
              for (int k = 0; k < 4; ++k) partial[(warp * kRegs + (i * kNTiles + n) * 4 + k) * 32 + lane] = acc[i][n][k];
        }
        __syncthreads();
        if (kw == 0) {  // the partials in warp order
          for (int other = 1; other < warps_k; ++other)
#pragma unroll
            for (int i = 0; i < kMTiles; ++i)
#pragma unroll
              for (int n = 0; n < kNTiles; ++n)
#pragma unroll
                for (int k = 0; k < 4; ++k)
                  acc[i][n][k] += partial[((warp + other) * kRegs + (i * kNTiles + n) * 4 + k) * 32 + lane];
        }
        __syncthreads();  // partial free for the next (tile, pass)
      }
      if (kw == 0) {
        // d0, d1: row g, tokens 2t, 2t + 1; d2, d3: row g + 8, the same tokens.
#pragma unroll
        for (int i = 0; i < kMTiles; ++i)
#pragma unroll
          for (int n = 0; n < kNTiles; ++n)
#pragma unroll
            for (int k = 0; k < 4; ++k) {
              const int row = it.o_first + 16 * i + g + (k >= 2 ? 8 : 0);
              const std::int64_t p = it.p0 + 8 * n + 2 * t + (k & 1);
              if (row < out && p < end) y[p * out + row] = __float2bfloat16_rn(acc[i][n][k]);
            }
      }
#pragma unroll
      for (int i = 0; i < kMTiles; ++i)
#pragma unroll
        for (int n = 0; n < kNTiles; ++n)
#pragma unroll
          for (int k = 0; k < 4; ++k) acc[i][n][k] = 0.f;
    }
  }
  detail::cp_async_wait<0>();
}

// ---- grouped kernel, register pipeline (the first design, kept as variants) ----
//
// The same tiling, warp split and sum order as the ring kernel above, but each warp keeps
// kStages chunks of words, scales and activations in flight in registers (volatile loads
// issued kStages chunks ahead) and restarts its pipeline at every tile and pass. Fewer bytes in
// flight per register than the ring; no shared memory but the partial tiles.

// 16-byte global load kept where it is written (cf. detail::load_early): `no_allocate` for the
// weights (read once), L1-allocating for the activations (read by every row tile).
__device__ __forceinline__ uint4 load16_no_l1(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}
__device__ __forceinline__ uint4 load16_l1(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
__device__ __forceinline__ std::uint16_t load_u16(const __nv_bfloat16* p) {
  std::uint16_t v;
  asm volatile("ld.global.nc.u16 %0, [%1];" : "=h"(v) : "l"(p));
  return v;
}

template <int kMTiles, int kNTiles>
struct ChunkRegs {
  uint4 w[kMTiles][2];
  std::uint16_t s[kMTiles][2];
  uint4 x[kNTiles][4];
};

// What one warp reads in one (tile, pass): its expert's rows from its first, the pass's tokens.
struct WarpView {
  const std::uint32_t* packed;  // row o_first of the expert
  const __nv_bfloat16* scales;  // row o_first of the expert
  const __nv_bfloat16* x;       // token p_first
  int rows_left;                // rows from o_first to out (<= 0: none)
  int tokens_left;              // tokens from p_first to the expert's end
  int words_per_row, groups, in;
};

template <int kMTiles, int kNTiles>
__device__ __forceinline__ void load_chunk(ChunkRegs<kMTiles, kNTiles>& r, const WarpView& v, int chunk, bool live,
                                           int g, int t) {
  const int group = chunk * 4 + t;
  const bool group_ok = live && group < v.groups;
#pragma unroll
  for (int i = 0; i < kMTiles; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = 16 * i + 8 * h + g;
      if (group_ok && row < v.rows_left) {
        r.w[i][h] = load16_no_l1(v.packed + static_cast<std::int64_t>(row) * v.words_per_row + group * 4);
        r.s[i][h] = load_u16(v.scales + static_cast<std::int64_t>(row) * v.groups + group);
      } else {
        r.w[i][h] = make_uint4(0, 0, 0, 0);
        r.s[i][h] = 0;  // q x 0: a padding row or group adds nothing
      }
    }
#pragma unroll
  for (int j = 0; j < kNTiles; ++j) {
    const int token = 8 * j + g;
    const bool ok = group_ok && token < v.tokens_left;
    const uint4* src = reinterpret_cast<const uint4*>(v.x + static_cast<std::int64_t>(token) * v.in + group * kGroup);
#pragma unroll
    for (int q = 0; q < 4; ++q) r.x[j][q] = ok ? load16_l1(src + q) : make_uint4(0, 0, 0, 0);
  }
}

template <int kMTiles, int kNTiles, int kStages, int kMinBlocks>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    expert_gemm_int4_grouped_regs_kernel(const __nv_bfloat16* __restrict__ x, const std::int32_t* __restrict__ offsets,
                                         int experts, const std::uint32_t* __restrict__ packed,
                                         const __nv_bfloat16* __restrict__ scales, int in, int out, int warps_k,
                                         __nv_bfloat16* __restrict__ y) {
  detail::chain_after_prior_grids();
  constexpr int kRegs = kMTiles * kNTiles * 4;
  __shared__ float s_partial[kWarps][kRegs][32];
  const int e = detail::nth_nonempty_expert<kWarps>(offsets, experts, static_cast<int>(blockIdx.y));
  if (e < 0) return;
  const std::int64_t begin = offsets[e], end = offsets[e + 1];
  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int warps_m = kWarps / warps_k, wm = warp / warps_k, kw = warp % warps_k;
  const int block_rows = warps_m * 16 * kMTiles;
  const int groups = in / kGroup, chunks = (groups + 3) / 4;
  const int c_begin = kw * chunks / warps_k, c_end = (kw + 1) * chunks / warps_k;
  const std::int64_t expert_words = static_cast<std::int64_t>(out) * (in / int4::kPerWord);
  const std::int64_t expert_groups = static_cast<std::int64_t>(out) * groups;
  const int tiles = (out + block_rows - 1) / block_rows;

  for (int tile = static_cast<int>(blockIdx.x); tile < tiles; tile += static_cast<int>(gridDim.x)) {
    const int o_first = tile * block_rows + wm * 16 * kMTiles;
    for (std::int64_t p0 = begin; p0 < end; p0 += 8 * kNTiles) {  // block-uniform
      const WarpView v{packed + e * expert_words + static_cast<std::int64_t>(o_first) * (in / int4::kPerWord),
                       scales + e * expert_groups + static_cast<std::int64_t>(o_first) * groups,
                       x + p0 * in,
                       out - o_first,
                       static_cast<int>(end - p0 < 8 * kNTiles ? end - p0 : 8 * kNTiles),
                       in / int4::kPerWord,
                       groups,
                       in};
      float acc[kMTiles][kNTiles][4];
#pragma unroll
      for (int i = 0; i < kMTiles; ++i)
#pragma unroll
        for (int j = 0; j < kNTiles; ++j)
#pragma unroll
          for (int k = 0; k < 4; ++k) acc[i][j][k] = 0.f;
      // Slot s holds chunk c + s; after its MMAs it is refilled with the chunk kStages on.
      ChunkRegs<kMTiles, kNTiles> r[kStages];
#pragma unroll
      for (int s = 0; s < kStages; ++s) load_chunk(r[s], v, c_begin + s, c_begin + s < c_end, g, t);
      for (int c = c_begin; c < c_end; c += kStages) {
#pragma unroll
        for (int s = 0; s < kStages; ++s) {
          if (c + s < c_end) mma_chunk(r[s].w, r[s].s, r[s].x, acc);  // warp-uniform
          const int next = c + s + kStages;
          load_chunk(r[s], v, next, next < c_end, g, t);
        }
      }
      if (warps_k > 1) {  // the warps' partial sums, in warp order
        if (kw > 0) {
#pragma unroll
          for (int i = 0; i < kMTiles; ++i)
#pragma unroll
            for (int j = 0; j < kNTiles; ++j)
#pragma unroll
              for (int k = 0; k < 4; ++k) s_partial[warp][(i * kNTiles + j) * 4 + k][lane] = acc[i][j][k];
        }
        __syncthreads();
        if (kw == 0) {
          for (int other = 1; other < warps_k; ++other)
#pragma unroll
            for (int i = 0; i < kMTiles; ++i)
#pragma unroll
              for (int j = 0; j < kNTiles; ++j)
#pragma unroll
                for (int k = 0; k < 4; ++k) acc[i][j][k] += s_partial[warp + other][(i * kNTiles + j) * 4 + k][lane];
        }
        __syncthreads();
      }
      if (kw == 0) {
#pragma unroll
        for (int i = 0; i < kMTiles; ++i)
#pragma unroll
          for (int j = 0; j < kNTiles; ++j)
#pragma unroll
            for (int k = 0; k < 4; ++k) {
              const int row = 16 * i + g + (k >= 2 ? 8 : 0), token = 8 * j + 2 * t + (k & 1);
              if (row < v.rows_left && token < v.tokens_left)
                y[(p0 + token) * out + o_first + row] = __float2bfloat16_rn(acc[i][j][k]);
            }
      }
    }
  }
}

// Warps that share one tile's input range: enough for every warp to have >= 3 chunks to keep
// in flight. A function of `in` alone, so every variant sums in the same order.
int grouped_warps_k(std::int64_t in) {
  const std::int64_t chunks = (in + kChunk - 1) / kChunk;
  int warps_k = kWarps;
  while (warps_k > 1 && chunks < 3 * warps_k) warps_k /= 2;
  return warps_k;
}

struct GroupedVariant {
  const char* name;
  int m_tiles, n_tiles, min_blocks, smem_bytes;
  void (*kernel)(const __nv_bfloat16*, const std::int32_t*, int, const std::uint32_t*, const __nv_bfloat16*, int, int,
                 int, __nv_bfloat16*);
};

template <int kM, int kN, int kRing, int kMinBlocks>
constexpr GroupedVariant grouped_variant(const char* name) {
  return {name, kM, kN, kMinBlocks, GroupedSmem<kM, kN, kRing>::kBytes,
          expert_gemm_int4_grouped_kernel<kM, kN, kRing, kMinBlocks>};
}

template <int kM, int kN, int kStages, int kMinBlocks>
constexpr GroupedVariant grouped_regs_variant(const char* name) {
  return {name, kM, kN, kMinBlocks, 0, expert_gemm_int4_grouped_regs_kernel<kM, kN, kStages, kMinBlocks>};
}

const GroupedVariant kGroupedVariants[] = {
    grouped_variant<1, 1, 4, 2>("m16_n8_ring4_blocks2"),
    grouped_variant<1, 1, 6, 1>("m16_n8_ring6_blocks1"),
    grouped_variant<1, 1, 2, 3>("m16_n8_ring2_blocks3"),
    grouped_variant<2, 1, 4, 1>("m32_n8_ring4_blocks1"),
    grouped_variant<1, 2, 2, 2>("m16_n16_ring2_blocks2"),
    grouped_variant<2, 2, 2, 1>("m32_n16_ring2_blocks1"),
    grouped_regs_variant<1, 1, 2, 2>("regs_m16_n8_stages2_blocks2"),
    grouped_regs_variant<2, 2, 1, 2>("regs_m32_n16_stages1_blocks2"),
};
constexpr int kGroupedVariantCount = static_cast<int>(sizeof(kGroupedVariants) / sizeof(kGroupedVariants[0]));

void launch_grouped(const GroupedVariant& var, const __nv_bfloat16* x_sorted, const std::int32_t* offsets,
                    std::int64_t experts, std::int64_t pairs, const Int4ExpertWeights& w, __nv_bfloat16* y_sorted,
                    cudaStream_t stream) {
  check_common("expert_gemm_int4_grouped", x_sorted, experts, pairs, w);
  if (experts == 0 || pairs == 0) return;
  const int warps_k = grouped_warps_k(w.in);
  const std::int64_t block_rows = (kWarps / warps_k) * 16 * var.m_tiles;
  // As expert_gemm_grouped: one grid row per expert that can have rows; along x at least two
  // waves of resident blocks in all and at most 4 tiles per block.
  constexpr std::int64_t kMaxTilesPerBlock = 4;
  const std::int64_t slots = experts < pairs ? experts : pairs;
  const std::int64_t tiles = (w.out + block_rows - 1) / block_rows;
  int device = 0, sms = 0;
  TPB_CUDA_CHECK(cudaGetDevice(&device));
  TPB_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const std::int64_t for_occupancy = (2 * var.min_blocks * static_cast<std::int64_t>(sms) + slots - 1) / slots;
  const std::int64_t for_balance = (tiles + kMaxTilesPerBlock - 1) / kMaxTilesPerBlock;
  const std::int64_t per_slot = for_occupancy > for_balance ? for_occupancy : for_balance;
  const dim3 grid(static_cast<unsigned>(tiles < per_slot ? tiles : per_slot), static_cast<unsigned>(slots));
  TPB_CHECK(var.smem_bytes <= kernels::smem_budget_bytes(device_smem_optin_bytes(), kernels::kernels_setting()),
            "expert_gemm_int4_grouped variant " << var.name << ": " << var.smem_bytes
                                                << " bytes of shared memory per block exceed this device's budget");
  // Above the default 48 KiB; a host-side attribute, legal under stream capture.
  TPB_CUDA_CHECK(cudaFuncSetAttribute(var.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, var.smem_bytes));
  detail::launch_chained(var.kernel, grid, kThreads, static_cast<std::size_t>(var.smem_bytes), stream, x_sorted, offsets, static_cast<int>(experts),
                         w.packed, w.scales, static_cast<int>(w.in), static_cast<int>(w.out), warps_k, y_sorted);
  TPB_CUDA_CHECK_LAUNCH();
}

}  // namespace

void expert_gemm_int4_grouped(const __nv_bfloat16* x_sorted, const std::int32_t* offsets, std::int64_t experts,
                              std::int64_t pairs, const Int4ExpertWeights& w, __nv_bfloat16* y_sorted,
                              cudaStream_t stream) {
  // Measured side by side on one H100 (tpb_bench expert_int4_variant/*, Kimi's gate|up and
  // down at 1 / 4 / 16 tokens on one expert): the register pipeline at 8 tokens per pass up to
  // 8 rows per active expert on average, at 32 x 16 per warp above (gate|up 16 tokens 15.3 us
  // against 19.4 us). The ring kernel with the activations one chunk ahead in registers ran
  // slower (gate|up 1 token 16.3 us against 10.7 us; MoE layer TP 1 batch 8 x 1.91 against
  // x 1.46 of the weight-read time).
  const std::int64_t slots = experts < pairs ? experts : pairs;
  const int variant = slots > 0 && pairs > 8 * slots ? 7 : 6;
  launch_grouped(kGroupedVariants[variant], x_sorted, offsets, experts, pairs, w, y_sorted, stream);
}

namespace tuning {

int expert_gemm_int4_grouped_variants() { return kGroupedVariantCount; }

const char* expert_gemm_int4_grouped_variant_name(int variant) {
  TPB_CHECK(variant >= 0 && variant < kGroupedVariantCount, "expert_gemm_int4_grouped variant " << variant);
  return kGroupedVariants[variant].name;
}

bool expert_gemm_int4_grouped_variant_fits(int variant) {
  TPB_CHECK(variant >= 0 && variant < kGroupedVariantCount, "expert_gemm_int4_grouped variant " << variant);
  return kGroupedVariants[variant].smem_bytes <=
         kernels::smem_budget_bytes(device_smem_optin_bytes(), kernels::kernels_setting());
}

void expert_gemm_int4_grouped_variant(int variant, const __nv_bfloat16* x_sorted, const std::int32_t* offsets,
                                      std::int64_t experts, std::int64_t pairs, const Int4ExpertWeights& w,
                                      __nv_bfloat16* y_sorted, cudaStream_t stream) {
  TPB_CHECK(variant >= 0 && variant < kGroupedVariantCount, "expert_gemm_int4_grouped variant " << variant);
  launch_grouped(kGroupedVariants[variant], x_sorted, offsets, experts, pairs, w, y_sorted, stream);
}

}  // namespace tuning

}  // namespace tpb::gpu
