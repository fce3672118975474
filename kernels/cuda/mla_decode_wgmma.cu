// The split pass of the absorbed-MLA decode attention on Hopper's warpgroup MMA (wgmma), for
// the DeepSeek-V3 / Kimi-K2.5 row: kv_lora 512 + rope 64 (FlashMLA's shape of the problem).
// The merge pass and the split plan are mla_decode.cu's; this file holds the two kernels that
// read the cache: the 64-head one, then (below) the one with the heads as the MMA's N dimension.
//
// One CTA per (group of 64 heads, split, sequence), two warpgroups. All 64 heads are the wgmma
// M dimension (fewer heads are padded with zero queries whose rows are dropped), so each
// 64-key cache tile is read from HBM once for every head of the group. Shared memory holds the
// queries and two stages of cache tiles, each as nine 64-column blocks in the 128-byte-swizzled
// layout (wgmma.cuh), 72 KB apiece.
//
// The warpgroups have different jobs, FlashMLA's split of the work:
//   warpgroup 0: S = Q C^T [64 heads x 64 keys] (36 k16 steps, both operands from shared
//     memory); the softmax with a running max and sum per head, in the base-2 domain (scores
//     times scale * log2 e, one exp2 per probability; the maxima go to the merge in that
//     domain); P as bf16 hi + lo (P = hi + lo to about 2^-17 relative, as in the mma.sync
//     kernel) in registers, where the scores' accumulator layout is the A-fragment layout of
//     the next MMA; O[:, 0:256] += P C_lat.
//   warpgroup 1: the cp.async copies (the queries, then each tile two ahead), and
//     O[:, 256:512] += P C_lat with P and the corrections from shared memory.
// So warpgroup 0's scores and softmax of tile it + 1 run while warpgroup 1 multiplies tile it.
// P hi lives in the tile's rope block, which only the scores read, and P lo in 8 KB more: three
// 72 KB panels leave 11 KB under the 227 KB limit.
#include "cuda/mla_decode_wgmma.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "tpb/check.h"
#include "tpb/cuda_check.h"
#include "tpb/kernels/mla_decode_split.h"
#include "cuda/decode_split_range.cuh"
#include "cuda/mma_sync.cuh"
#include "cuda/softmax_split_p.cuh"
#include "cuda/wgmma.cuh"

namespace tpb::gpu::detail {

namespace {

constexpr int kLora = static_cast<int>(kernels::kMlaDecodeWgmmaKvLora);
constexpr int kRope = static_cast<int>(kernels::kMlaDecodeWgmmaRope);
constexpr int kRow = kLora + kRope;
constexpr int kHeads = static_cast<int>(kernels::kMlaDecodeWgmmaHeadsPerCta);  // the wgmma M
constexpr int kTileKeys = static_cast<int>(kernels::kMlaDecodeTileKeys);
constexpr int kBlocks = kRow / 64;            // 64-column swizzled blocks per row
constexpr int kBlockBytes = 64 * 128;         // [64 rows][64 bf16]
constexpr int kPanelBytes = kBlocks * kBlockBytes;  // the queries, or one cache tile
constexpr int kSteps = kRow / 16;             // k16 steps of the scores
constexpr int kStages = 2;
constexpr int kThreads = 256;
constexpr int kScratchBytes = 8192;           // P lo fragments (P hi goes into the tile's rope block)
constexpr int kCorrBytes = 128 * 8;           // the corrections of each thread's two heads
constexpr int kSmemBytes = (1 + kStages) * kPanelBytes + kScratchBytes + kCorrBytes + 1024;  // + alignment
static_assert(kRow % 64 == 0 && kLora == 2 * 256 && kHeads == 64 && kTileKeys == 64 && kBlockBytes == 8192,
              "the kernel's geometry");
static_assert(kSmemBytes <= 227 * 1024, "shared memory per block on sm_90");

// Named barriers between the two warpgroups (id 0 is __syncthreads): one arrives, the other
// waits, 256 threads in all. Each id's uses alternate between the two sides, so that an arrival
// never meets the previous round's; the stage-free signal alternates between two ids because
// warpgroup 0 could otherwise signal tile it + 1's before warpgroup 1 waited for tile it's.
constexpr int kBarTileReady = 1;   // warpgroup 1 -> 0: the tile's copies landed
constexpr int kBarPReady = 2;      // 0 -> 1: P and the corrections are in shared memory
constexpr int kBarPFree = 3;       // 1 -> 0: warpgroup 1 read them
constexpr int kBarStageFree0 = 4;  // 0 -> 1 (ids 4, 5 by tile parity): warpgroup 0's P.V read the stage
__device__ __forceinline__ void named_sync(int id) { asm volatile("bar.sync %0, 256;\n" ::"r"(id) : "memory"); }
__device__ __forceinline__ void named_arrive(int id) { asm volatile("bar.arrive %0, 256;\n" ::"r"(id) : "memory"); }

// Warpgroup 1's cp.async of `rows_valid` (clamped to 0..64) rows of 576 from src0 into a
// swizzled panel: thread t copies chunk t % 8 of every 64-column block of rows t / 8 + 16 h,
// whose swizzled offset within a block is the same for all four (16 is a multiple of 8), so each
// copy is an add and a predicate. Rows past rows_valid arrive as zeros (a zero query row gives
// finite scores, dropped; a zero key row is masked, and p = 0 must not meet garbage that could
// be NaN).
__device__ __forceinline__ void load_rows(std::uint32_t dst, const __nv_bfloat16* src0, std::int64_t rows_valid,
                                          int wt) {
  const int row0 = wt >> 3, chunk = wt & 7;
  const std::uint32_t dst0 = dst + row0 * 128 + ((chunk ^ (row0 & 7)) << 4);
#pragma unroll
  for (int h = 0; h < 4; ++h) {
    const int r = row0 + 16 * h;
    const bool valid = r < rows_valid;
    const __nv_bfloat16* src = src0 + (valid ? static_cast<std::size_t>(r) * kRow : 0) + chunk * 8;
#pragma unroll
    for (int blk = 0; blk < kBlocks; ++blk) cp_async16(dst0 + blk * kBlockBytes + h * 2048, src + blk * 64, valid);
  }
}

// Warpgroup 1's copy of cache tile `it` of sequence b's split [start, end) into its stage.
__device__ __forceinline__ auto tile_loader(std::uint32_t tiles_addr, const __nv_bfloat16* cache, int b,
                                            std::int64_t max_len, std::int64_t start, std::int64_t end, int wt) {
  const __nv_bfloat16* cache_b = cache + static_cast<std::size_t>(b) * max_len * kRow;
  return [=](int it) {
    const std::int64_t t0 = start + static_cast<std::int64_t>(it) * kTileKeys;
    load_rows(tiles_addr + (it % kStages) * kPanelBytes, cache_b + t0 * kRow, end - t0, wt);
  };
}

// Warpgroup 1's first copies: tiles 0 and 1 (the queries' copies, issued before, go in tile
// 0's group), then the queries and tile 0 handed to warpgroup 0.
template <class LoadTile>
__device__ __forceinline__ void first_tiles_ready(const LoadTile& load_tile, int tiles) {
  load_tile(0);
  cp_async_commit();
  if (tiles > 1) load_tile(1);
  cp_async_commit();  // empty when there is one tile: the wait counts stay the same
  cp_async_wait<1>();
  fence_proxy_async();  // this thread's cp.async writes, visible to the wgmma (async proxy)
  named_arrive(kBarTileReady);
}

// o (this warpgroup's 256 latent columns) = o * corr + P C_lat over the tile's 64 keys: blocks
// 4 wg .. 4 wg + 3 of the tile, read MN-major, P from registers as hi then lo per k16 step.
__device__ __forceinline__ void pv_half(float (&o)[128], const std::uint32_t (&hi)[4][4], const std::uint32_t (&lo)[4][4],
                                        const float (&corr)[2], std::uint32_t tile_addr) {
  const int wg = threadIdx.x >> 7;
  rescale_rows(o, corr);
  const std::uint64_t v_desc = sw128_desc(tile_addr + 4 * wg * kBlockBytes, kBlockBytes, 1024);
  fence_operands(o);
  wgmma_pv_split_p(o, hi, lo, v_desc);
  wgmma_wait<0>();
  fence_operands(o);
}

__global__ void __launch_bounds__(kThreads, 1)
    mla_decode_split_wgmma_kernel(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ cache,
                                  const std::int32_t* __restrict__ seq_lens, int heads, std::int64_t max_len,
                                  int splits, std::int64_t chunk, float scale, float* __restrict__ o_part,
                                  float* __restrict__ m_part, float* __restrict__ l_part) {
#if TPB_WGMMA_COMPILED
  const int g0 = blockIdx.x * kHeads;
  const int split = blockIdx.y;
  const int b = blockIdx.z;
  const int tid = threadIdx.x;
  const int wg = tid >> 7;          // 0: scores, softmax, latent columns 0..255; 1: copies, 256..511
  const int wt = tid & 127;         // thread within the warpgroup
  const int warp = wt >> 5;         // rows 16 warp .. of the M = 64 heads
  const int lane = tid & 31;
  const int r0 = 16 * warp + (lane >> 2);  // this thread's heads: r0 and r0 + 8
  const int q2 = 2 * (lane & 3);           // and its key / column pair within each 8

  const DecodeSplitRange range = decode_split_range(seq_lens, b, split, splits, chunk, max_len, heads, g0);
  const std::int64_t start = range.start, end = range.end;
  const std::size_t part_row0 = range.part_row0;  // + g * splits
  if (start >= end) {
    record_empty_split(m_part, l_part, range, splits, g0, heads, kHeads, kThreads);
    return;
  }

  extern __shared__ unsigned char smem_raw[];
  const std::uint32_t raw = smem_addr(smem_raw);
  const std::uint32_t pad = ((raw + 1023u) & ~1023u) - raw;  // the swizzle pattern starts at 1024
  unsigned char* smem = smem_raw + pad;
  const std::uint32_t q_addr = raw + pad;
  const std::uint32_t tiles_addr = q_addr + kPanelBytes;
  uint4* p_lo_s = reinterpret_cast<uint4*>(smem + (1 + kStages) * kPanelBytes);  // [4][128] P lo fragments
  float2* corr_s = reinterpret_cast<float2*>(smem + (1 + kStages) * kPanelBytes + kScratchBytes);  // [128]
  // P hi fragments [4][128]: the rope block of the tile's stage, which only the scores read.
  auto p_hi_s = [&](int it) {
    return reinterpret_cast<uint4*>(smem + kPanelBytes * (1 + it % kStages) + (kBlocks - 1) * kBlockBytes);
  };
  const int tiles = static_cast<int>((end - start + kTileKeys - 1) / kTileKeys);
  float o[128];  // O[64 heads][256 latent columns of this warpgroup], wgmma accumulator layout
#pragma unroll
  for (int i = 0; i < 128; ++i) o[i] = 0.0f;
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};  // heads r0, r0 + 8 (warpgroup 0)

  if (wg == 0) {
    // Scores, softmax and the first half of the output.
    const float scale_log2 = scale * 1.4426950408889634f;  // base 2: one exp2 per probability
    const std::uint64_t q_desc = sw128_desc(q_addr, 16, 1024);
    for (int it = 0; it < tiles; ++it) {
      const std::uint32_t tile_addr = tiles_addr + (it % kStages) * kPanelBytes;
      const int keys = static_cast<int>(min(end - (start + static_cast<std::int64_t>(it) * kTileKeys),
                                            static_cast<std::int64_t>(kTileKeys)));  // valid keys in the tile
      named_sync(kBarTileReady);
      // S = Q C^T over all 36 k16 steps.
      float s[32];
      wgmma_scores_ss<kSteps>(s, q_desc, sw128_desc(tile_addr, 16, 1024));
      wgmma_wait<0>();
      fence_operands(s);

      // Softmax of the tile: s[4j + e] is head r0 + 8 (e >> 1), key 8j + q2 + (e & 1) of the tile;
      // the tile's first key is valid.
#pragma unroll
      for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[4 * j + e] = 8 * j + q2 + (e & 1) < keys ? s[4 * j + e] * scale_log2 : -INFINITY;
      float corr[2];
      std::uint32_t hi[4][4], lo[4][4];
      softmax_tile_split_p(s, m_run, l_run, corr, hi, lo, [](float x) { return exp2f(x); });

      // Hand P and the corrections to warpgroup 1 (its thread wt holds the same heads).
      if (it > 0) named_sync(kBarPFree);  // warpgroup 1 has read the previous tile's
      uint4* p_hi = p_hi_s(it);
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        p_hi[kk * 128 + wt] = make_uint4(hi[kk][0], hi[kk][1], hi[kk][2], hi[kk][3]);
        p_lo_s[kk * 128 + wt] = make_uint4(lo[kk][0], lo[kk][1], lo[kk][2], lo[kk][3]);
      }
      corr_s[wt] = make_float2(corr[0], corr[1]);
      named_arrive(kBarPReady);

      pv_half(o, hi, lo, corr, tile_addr);
      if (it + 2 < tiles) named_arrive(kBarStageFree0 + it % 2);  // this half is done with the stage
    }
  } else {
    // The copies, and the second half of the output.
    load_rows(q_addr, q + (static_cast<std::size_t>(b) * heads + g0) * kRow, heads - g0, wt);
    const auto load_tile = tile_loader(tiles_addr, cache, b, max_len, start, end, wt);
    first_tiles_ready(load_tile, tiles);
    for (int it = 0; it < tiles; ++it) {
      named_sync(kBarPReady);
      std::uint32_t hi[4][4], lo[4][4];
      const uint4* p_hi = p_hi_s(it);
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        const uint4 h = p_hi[kk * 128 + wt], l = p_lo_s[kk * 128 + wt];
        hi[kk][0] = h.x, hi[kk][1] = h.y, hi[kk][2] = h.z, hi[kk][3] = h.w;
        lo[kk][0] = l.x, lo[kk][1] = l.y, lo[kk][2] = l.z, lo[kk][3] = l.w;
      }
      const float2 c = corr_s[wt];
      const float corr[2] = {c.x, c.y};
      if (it + 1 < tiles) {
        named_arrive(kBarPFree);
        cp_async_wait<0>();  // tile it + 1
        fence_proxy_async();
        named_arrive(kBarTileReady);
      }
      pv_half(o, hi, lo, corr, tiles_addr + (it % kStages) * kPanelBytes);
      if (it + 2 < tiles) {
        named_sync(kBarStageFree0 + it % 2);  // warpgroup 0's half is done with the stage too
        load_tile(it + 2);
        cp_async_commit();
      }
    }
  }

  // Partial outputs: heads r0, r0 + 8; columns 256 wg + 8j + q2, + 1.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int g = r0 + 8 * r;
    if (g0 + g < heads) {
      float* dst = o_part + (part_row0 + static_cast<std::size_t>(g) * splits) * kLora + 256 * wg + q2;
#pragma unroll
      for (int j = 0; j < 32; ++j) *reinterpret_cast<float2*>(dst + 8 * j) = make_float2(o[4 * j + 2 * r], o[4 * j + 2 * r + 1]);
    }
  }
  // Warpgroup 0's sums over the quad's keys; its maxima are in the base-2 domain (the merge's
  // kBase2).
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 1);
    l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 2);
  }
  if (wg == 0 && (lane & 3) == 0) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int g = r0 + 8 * r;
      if (g0 + g < heads) {
        m_part[part_row0 + static_cast<std::size_t>(g) * splits] = m_run[r];
        l_part[part_row0 + static_cast<std::size_t>(g) * splits] = l_run[r];
      }
    }
  }
#else
  __trap();  // not launched outside sm_90a (wgmma.cuh)
#endif
}

// ---------------------------------------------------------------------------------------------
// The same split pass with the heads as the MMA's N dimension, for up to 32 heads per CTA (a
// rank's share at TP >= 2: Kimi-K2.5's 64 heads are 32 at TP 2, 8 at TP 8). The kernel above
// pads the heads to the wgmma's M = 64, so at 32 heads half of its tensor-core work is
// padding, at 8 heads seven eighths. (Its 2.97 us per 64-key tile at batch 64 x 8K, where the
// tile's share of HBM allows 2.3 and its MMAs 2.2 at the tensor cores' peak, is warpgroup 0's
// chain with one tile in flight; halving the MMAs gained 5 %, below.) Here the products are
// transposed:
//   S^T [64 keys x kN heads] = C Q^T: A = the cache tile (K-major), B = the queries (K-major);
//   O^T [512 latent x kN heads] += C_lat^T P^T: A = the tile read MN-major (the layout the
//     kernel above reads V in as B), B = P^T, bf16 hi and lo, stored by warpgroup 0 in shared
//     memory as [kN heads][64 keys] K-major.
// so every MMA row is a key or a latent column and the work scales with the heads. The
// softmax runs down the accumulator's rows (keys): a head's maximum is the max over each
// thread's two keys, the 8 lanes of its column and the 4 warps (through shared memory). The
// warpgroups keep the jobs of the kernel above: warpgroup 0 the scores, the softmax and latent
// blocks 0..3 of O^T; warpgroup 1 the copies and blocks 4..7. P and the corrections are double
// buffered by tile parity, so warpgroup 0 writes tile it + 1's while warpgroup 1 still
// multiplies tile it's. Same numerics as above (base-2 softmax, P as hi + lo, fp32 partials
// in the same workspace for the same merge); the sums run in another order, so the bits differ
// from the kernel above within the same test bound.
// Measured on one H200 beside the kernel above (tpb_bench attention/mla_decode/, one call,
// docs/performance.md's fifth pass): 32 heads, batch 64 x 8K 171.6 vs 180.5 us (0.826 vs 0.785
// of copy bandwidth), 64 x 32K 0.915 vs 0.852, 256 x 8K 0.872 vs 0.817; 8 heads 64 x 8K 0.928 vs
// 0.832; batch 1 within 1 us at 32 heads, 2 us faster at 8. Tried and measured slower: one
// accumulator chain for the scores and 2-byte stores of P (64 x 8K at 32 heads 181 us, no gain
// over the kernel above); warpgroup 0 taking 2 of the 8 latent blocks and warpgroup 1 six, to
// shorten warpgroup 0's chain (184 vs 170 us).
template <int kN>
struct HeadsNGeometry {
  static constexpr int kQBlockBytes = kN * 128;                  // a 64-column block of the queries
  static constexpr int kQPanelBytes = kBlocks * kQBlockBytes;    // the queries, [kN][576] swizzled
  static constexpr int kPBytes = kN * 128;                       // P^T [kN][64 keys], hi or lo
  static constexpr int kTilesOff = 0;
  static constexpr int kQOff = kStages * kPanelBytes;
  static constexpr int kPOff = kQOff + kQPanelBytes;             // [2 parities][hi, lo]
  static constexpr int kMaxOff = kPOff + 4 * kPBytes;            // float [4 warps][kN]: tile maxima, then sums
  static constexpr int kCorrOff = kMaxOff + 4 * kN * 4;          // float [2 parities][kN]
  static constexpr int kSmemBytes = kCorrOff + 2 * kN * 4 + 1024;  // + alignment
  static_assert(kQBlockBytes % 1024 == 0 && kPBytes % 1024 == 0, "every operand starts a swizzle pattern");
  static_assert(kSmemBytes <= 227 * 1024, "shared memory per block on sm_90");
  // One CTA per SM, as the memory planner's split plan assumes (reference_engine/memory/
  // engine_buffers.cpp sizes the workspace at one resident CTA per SM).
  static_assert(2 * (kSmemBytes + 1024) > 228 * 1024, "one CTA per SM");
};
constexpr int kBarWg0 = 6;  // warpgroup 0's own 128 threads
__device__ __forceinline__ void wg0_sync() { asm volatile("bar.sync %0, 128;\n" ::"r"(kBarWg0) : "memory"); }

// Warpgroup 1's cp.async of the kN query rows (rows past rows_valid as zeros) into [kN][64]
// swizzled blocks kQBlockBytes apart.
template <int kN>
__device__ __forceinline__ void load_query_rows(std::uint32_t dst, const __nv_bfloat16* src0, int rows_valid, int wt) {
  for (int i = wt; i < kN * kBlocks * 8; i += 128) {
    const int row = i / (kBlocks * 8), c = i - row * (kBlocks * 8);
    const int blk = c >> 3, chunk = c & 7;
    const bool valid = row < rows_valid;
    cp_async16(dst + blk * HeadsNGeometry<kN>::kQBlockBytes + row * 128 + ((chunk ^ (row & 7)) << 4),
               src0 + (valid ? static_cast<std::size_t>(row) * kRow : 0) + c * 8, valid);
  }
}

// stmatrix .trans of a warp's kN / 4 8x8 bf16 fragments (frag[m]: the m16n8 accumulator
// layout's pair, keys 8 (m & 1) + lane / 4 of the warp's 16, heads 8 (m >> 1) + 2 (lane % 4) ..)
// into P^T [kN heads][64 keys], 128-byte swizzled: lane l addresses row l % 8 (head 8 (m >> 1) +
// l % 8) of fragment m = l / 8 of each instruction, the 16-byte chunk of keys 16 warp + 8 (m & 1).
template <int kN>
__device__ __forceinline__ void store_p_transposed(std::uint32_t base, const std::uint32_t (&frag)[kN / 4], int warp,
                                                   int lane) {
  constexpr int kPerInstr = kN / 4 < 4 ? kN / 4 : 4;
  auto row_addr = [&](int m) {
    const int i = lane & 7, head = 8 * (m >> 1) + i, chunk = 2 * warp + (m & 1);
    return base + static_cast<std::uint32_t>(head * 128 + ((chunk ^ i) << 4));
  };
#pragma unroll
  for (int k = 0; k < kN / 4 / kPerInstr; ++k) {
    const std::uint32_t addr = row_addr(kPerInstr * k + ((lane >> 3) % kPerInstr));
    if constexpr (kPerInstr == 4) {
      TPB_WGMMA_ASM("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr),
                    "r"(frag[4 * k]), "r"(frag[4 * k + 1]), "r"(frag[4 * k + 2]), "r"(frag[4 * k + 3])
                    : "memory");
    } else {
      TPB_WGMMA_ASM("stmatrix.sync.aligned.m8n8.x2.trans.shared.b16 [%0], {%1, %2};\n" ::"r"(addr),
                    "r"(frag[2 * k]), "r"(frag[2 * k + 1])
                    : "memory");
    }
  }
}

// O^T blocks 4 wg .. 4 wg + 3 (latent columns 64 (4 wg + mb) ..) += C_lat^T P^T over the tile's
// 64 keys, hi then lo at each k16 step; waited for.
template <int kN>
__device__ __forceinline__ void pv_heads_n(float (&o)[4][kN / 2], std::uint32_t tile_addr, int wg,
                                           std::uint32_t p_hi_addr, std::uint32_t p_lo_addr) {
#pragma unroll
  for (int mb = 0; mb < 4; ++mb) fence_operands(o[mb]);
  wgmma_fence();
  const std::uint64_t hi_desc = sw128_desc(p_hi_addr, 16, 1024), lo_desc = sw128_desc(p_lo_addr, 16, 1024);
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
#pragma unroll
    for (int mb = 0; mb < 4; ++mb) {
      const std::uint64_t a = sw128_desc(tile_addr + (4 * wg + mb) * kBlockBytes, kBlockBytes, 1024) + ((2048 * kk) >> 4);
      wgmma_m64nNk16_ss<kN, 1>(o[mb], a, hi_desc + ((32 * kk) >> 4));
      wgmma_m64nNk16_ss<kN, 1>(o[mb], a, lo_desc + ((32 * kk) >> 4));
    }
  wgmma_commit();
  wgmma_wait<0>();
#pragma unroll
  for (int mb = 0; mb < 4; ++mb) fence_operands(o[mb]);
}

// O^T times each head's correction, before the next P.V adds to it: this thread's head h is
// accumulator entries 4 (h / 2) + h % 2 and + 2 of every block.
template <int kBlocksHeld, int kAcc, int kHeadsPerThread>
__device__ __forceinline__ void rescale_heads(float (&o)[kBlocksHeld][kAcc], const float (&corr)[kHeadsPerThread]) {
#pragma unroll
  for (int mb = 0; mb < kBlocksHeld; ++mb)
#pragma unroll
    for (int h = 0; h < kHeadsPerThread; ++h) {
      o[mb][4 * (h >> 1) + (h & 1)] *= corr[h];
      o[mb][4 * (h >> 1) + 2 + (h & 1)] *= corr[h];
    }
}

// Accumulator layout of m64nN (wgmma.cuh): thread (warp w, lane) holds rows 16 w + lane / 4
// (+ 8) and columns 8 j + 2 (lane % 4) + e. Its heads are the columns: head index 2 j + e of
// its kN / 4, head 8 j + q2 + e of the CTA.
template <int kN>
__global__ void __launch_bounds__(kThreads, 1)
    mla_decode_split_wgmma_heads_n_kernel(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ cache,
                                          const std::int32_t* __restrict__ seq_lens, int heads, std::int64_t max_len,
                                          int splits, std::int64_t chunk, float scale, float* __restrict__ o_part,
                                          float* __restrict__ m_part, float* __restrict__ l_part) {
#if TPB_WGMMA_COMPILED
  using G = HeadsNGeometry<kN>;
  constexpr int kAcc = kN / 2;   // floats of one m64nN accumulator
  constexpr int kHeadsPerThread = kN / 4;  // heads of this thread
  const int g0 = blockIdx.x * kN;
  const int split = blockIdx.y;
  const int b = blockIdx.z;
  const int tid = threadIdx.x;
  const int wg = tid >> 7;     // 0: scores, softmax, latent blocks 0..3; 1: copies, blocks 4..7
  const int wt = tid & 127;
  const int warp = wt >> 5;    // keys 16 warp (+ 8) of each tile; latent rows likewise
  const int lane = tid & 31;
  const int gq = lane >> 2;    // row within the warp's 8
  const int q2 = 2 * (lane & 3);

  const DecodeSplitRange range = decode_split_range(seq_lens, b, split, splits, chunk, max_len, heads, g0);
  const std::int64_t start = range.start, end = range.end;
  const std::size_t part_row0 = range.part_row0;
  if (start >= end) {
    record_empty_split(m_part, l_part, range, splits, g0, heads, kN, kThreads);
    return;
  }

  extern __shared__ unsigned char smem_raw[];
  const std::uint32_t raw = smem_addr(smem_raw);
  const std::uint32_t pad = ((raw + 1023u) & ~1023u) - raw;
  unsigned char* smem = smem_raw + pad;
  const std::uint32_t base = raw + pad;
  const std::uint32_t tiles_addr = base + G::kTilesOff;
  const std::uint32_t q_addr = base + G::kQOff;
  auto p_addr = [&](int parity, int lo) { return base + G::kPOff + (2 * parity + lo) * G::kPBytes; };
  float* max_s = reinterpret_cast<float*>(smem + G::kMaxOff);    // [4][kN]
  float* corr_s = reinterpret_cast<float*>(smem + G::kCorrOff);  // [2][kN]

  const int tiles = static_cast<int>((end - start + kTileKeys - 1) / kTileKeys);
  float o[4][kAcc];
#pragma unroll
  for (int mb = 0; mb < 4; ++mb)
#pragma unroll
    for (int i = 0; i < kAcc; ++i) o[mb][i] = 0.0f;
  float m_run[kHeadsPerThread], l_run[kHeadsPerThread];  // warpgroup 0; l over this thread's keys
#pragma unroll
  for (int h = 0; h < kHeadsPerThread; ++h) m_run[h] = -INFINITY, l_run[h] = 0.0f;
  auto head_of = [&](int h) { return 8 * (h >> 1) + q2 + (h & 1); };  // the CTA's head of this thread's h

  if (wg == 0) {
    const float scale_log2 = scale * 1.4426950408889634f;
    const std::uint64_t q_desc = sw128_desc(q_addr, 16, 1024);
    const int key0 = 16 * warp + gq;  // and key0 + 8
    for (int it = 0; it < tiles; ++it) {
      const int parity = it % 2;
      const std::uint32_t tile_addr = tiles_addr + (it % kStages) * kPanelBytes;
      const int keys = static_cast<int>(min(end - (start + static_cast<std::int64_t>(it) * kTileKeys),
                                            static_cast<std::int64_t>(kTileKeys)));
      named_sync(kBarTileReady);
      // S^T = C Q^T over the 36 k16 steps, even and odd steps in two accumulators (two
      // dependency chains of short MMAs instead of one), added at the end in a fixed order.
      float s[kAcc], s_odd[kAcc];
#pragma unroll
      for (int i = 0; i < kAcc; ++i) s[i] = s_odd[i] = 0.0f;
      fence_operands(s);
      fence_operands(s_odd);
      wgmma_fence();
      const std::uint64_t c_desc = sw128_desc(tile_addr, 16, 1024);
#pragma unroll
      for (int ks = 0; ks < kSteps; ks += 2) {
        wgmma_m64nNk16_ss<kN, 0>(s, c_desc + k16_step_offset16(ks, kBlockBytes),
                                 q_desc + k16_step_offset16(ks, G::kQBlockBytes));
        wgmma_m64nNk16_ss<kN, 0>(s_odd, c_desc + k16_step_offset16(ks + 1, kBlockBytes),
                                 q_desc + k16_step_offset16(ks + 1, G::kQBlockBytes));
      }
      wgmma_commit();
      wgmma_wait<0>();
      fence_operands(s);
      fence_operands(s_odd);
#pragma unroll
      for (int i = 0; i < kAcc; ++i) s[i] += s_odd[i];

      // s[4j + e]: key key0, head 8j + q2 + e; s[4j + 2 + e]: key key0 + 8. Masked, base 2.
      float tile_max[kHeadsPerThread];
#pragma unroll
      for (int h = 0; h < kHeadsPerThread; ++h) {
        const int j = h >> 1, e = h & 1;
        s[4 * j + e] = key0 < keys ? s[4 * j + e] * scale_log2 : -INFINITY;
        s[4 * j + 2 + e] = key0 + 8 < keys ? s[4 * j + 2 + e] * scale_log2 : -INFINITY;
        float m = fmaxf(s[4 * j + e], s[4 * j + 2 + e]);
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 4));
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 8));
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 16));
        tile_max[h] = m;
      }
      if (gq == 0)
#pragma unroll
        for (int h = 0; h < kHeadsPerThread; ++h) max_s[warp * kN + head_of(h)] = tile_max[h];
      wg0_sync();
      float corr[kHeadsPerThread], p[kAcc];
#pragma unroll
      for (int h = 0; h < kHeadsPerThread; ++h) {
        const int j = h >> 1, e = h & 1, head = head_of(h);
        // Every warp takes the maximum over the 4 warps alike; the tile's first key is valid.
        float m_new = m_run[h];
#pragma unroll
        for (int w = 0; w < 4; ++w) m_new = fmaxf(m_new, max_s[w * kN + head]);
        corr[h] = exp2f(m_run[h] - m_new);  // 0 on the first tile
        m_run[h] = m_new;
        p[4 * j + e] = exp2f(s[4 * j + e] - m_new);
        p[4 * j + 2 + e] = exp2f(s[4 * j + 2 + e] - m_new);
        l_run[h] = l_run[h] * corr[h] + (p[4 * j + e] + p[4 * j + 2 + e]);
      }
      // P^T hi and lo: the pairs (p[2m], p[2m + 1]) are 8x8 fragment m of the warp's [16 keys x
      // kN heads] (keys 8 (m & 1) .., heads 8 (m >> 1) ..), which stmatrix .trans stores as
      // rows of heads, 8 keys (one 16-byte chunk) each.
      std::uint32_t hi[kAcc / 2], lo[kAcc / 2];
#pragma unroll
      for (int m = 0; m < kAcc / 2; ++m) {
        const __nv_bfloat162 h2 = __floats2bfloat162_rn(p[2 * m], p[2 * m + 1]);
        const float2 hf = __bfloat1622float2(h2);
        const __nv_bfloat162 l2 = __floats2bfloat162_rn(p[2 * m] - hf.x, p[2 * m + 1] - hf.y);
        hi[m] = *reinterpret_cast<const std::uint32_t*>(&h2);
        lo[m] = *reinterpret_cast<const std::uint32_t*>(&l2);
      }
      store_p_transposed<kN>(p_addr(parity, 0), hi, warp, lane);
      store_p_transposed<kN>(p_addr(parity, 1), lo, warp, lane);
      if (warp == 0 && gq == 0)
#pragma unroll
        for (int h = 0; h < kHeadsPerThread; ++h) corr_s[parity * kN + head_of(h)] = corr[h];
      fence_proxy_async();  // P, written by ordinary stores, visible to the wgmma
      wg0_sync();           // all of P; and every read of max_s is done before the next tile's writes
      named_arrive(kBarPReady);

      rescale_heads(o, corr);
      pv_heads_n<kN>(o, tile_addr, 0, p_addr(parity, 0), p_addr(parity, 1));
      if (it + 2 < tiles) named_arrive(kBarStageFree0 + it % 2);
    }
  } else {
    load_query_rows<kN>(q_addr, q + (static_cast<std::size_t>(b) * heads + g0) * kRow, heads - g0, wt);
    const auto load_tile = tile_loader(tiles_addr, cache, b, max_len, start, end, wt);
    first_tiles_ready(load_tile, tiles);
    for (int it = 0; it < tiles; ++it) {
      const int parity = it % 2;
      named_sync(kBarPReady);
      float corr[kHeadsPerThread];
#pragma unroll
      for (int h = 0; h < kHeadsPerThread; ++h) corr[h] = corr_s[parity * kN + head_of(h)];
      if (it + 1 < tiles) {
        cp_async_wait<0>();  // tile it + 1
        fence_proxy_async();
        named_arrive(kBarTileReady);
      }
      rescale_heads(o, corr);
      pv_heads_n<kN>(o, tiles_addr + (it % kStages) * kPanelBytes, 1, p_addr(parity, 0), p_addr(parity, 1));
      if (it + 2 < tiles) {
        named_sync(kBarStageFree0 + it % 2);
        load_tile(it + 2);
        cp_async_commit();
      }
    }
  }

  // Partial outputs: o[mb][4j + 2r + e] is latent column 64 (4 wg + mb) + 16 warp + gq + 8 r of
  // head 8j + q2 + e.
#pragma unroll
  for (int h = 0; h < kHeadsPerThread; ++h) {
    const int head = head_of(h);
    if (g0 + head >= heads) continue;
    float* dst = o_part + (part_row0 + static_cast<std::size_t>(head) * splits) * kLora + 16 * warp + gq;
#pragma unroll
    for (int mb = 0; mb < 4; ++mb)
#pragma unroll
      for (int r = 0; r < 2; ++r) dst[64 * (4 * wg + mb) + 8 * r] = o[mb][4 * (h >> 1) + 2 * r + (h & 1)];
  }
  if (wg == 0) {
    // Each head's sum: over the 8 lanes of its column, then over the warps in warp order.
#pragma unroll
    for (int h = 0; h < kHeadsPerThread; ++h) {
      l_run[h] += __shfl_xor_sync(0xffffffffu, l_run[h], 4);
      l_run[h] += __shfl_xor_sync(0xffffffffu, l_run[h], 8);
      l_run[h] += __shfl_xor_sync(0xffffffffu, l_run[h], 16);
    }
    wg0_sync();  // the last tile's maxima are read (the loop's last barrier already ordered them: defensive)
    if (gq == 0)
#pragma unroll
      for (int h = 0; h < kHeadsPerThread; ++h) max_s[warp * kN + head_of(h)] = l_run[h];
    wg0_sync();
    if (warp == 0 && gq == 0)
#pragma unroll
      for (int h = 0; h < kHeadsPerThread; ++h) {
        const int head = head_of(h);
        if (g0 + head >= heads) continue;
        float l = 0.0f;
#pragma unroll
        for (int w = 0; w < 4; ++w) l += max_s[w * kN + head];
        m_part[part_row0 + static_cast<std::size_t>(head) * splits] = m_run[h];
        l_part[part_row0 + static_cast<std::size_t>(head) * splits] = l;
      }
  }
#else
  __trap();  // not launched outside sm_90a (wgmma.cuh)
#endif
}

// The instantiation for `heads` per CTA: 8, 16 or 32 columns.
template <class F>
auto with_heads_n(std::int64_t heads, F f) {
  TPB_CHECK(heads >= 1 && heads <= kernels::kMlaDecodeHeadsNMax,
            "mla_decode (wgmma_heads_n): " << heads << " heads, the kernel takes 1.." << kernels::kMlaDecodeHeadsNMax);
  if (heads <= 8) return f(std::integral_constant<int, 8>{});
  if (heads <= 16) return f(std::integral_constant<int, 16>{});
  return f(std::integral_constant<int, 32>{});
}

// Resident CTAs of a split kernel of kThreads threads and `smem` bytes of dynamic shared memory
// on the current device (the plan's wave size); sets the kernel's shared-memory attribute, a
// host-side attribute, legal under stream capture.
template <class Kernel>
std::int64_t resident_ctas_of(Kernel kernel, int smem, const char* name) {
  int dev = 0, sms = 0, per_sm = 0;
  TPB_CUDA_CHECK(cudaGetDevice(&dev));
  TPB_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  TPB_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  TPB_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, smem));
  TPB_CHECK(per_sm >= 1, "mla_decode (" << name << "): the split kernel does not fit on an SM (" << smem
                                        << " bytes of shared memory)");
  return static_cast<std::int64_t>(per_sm) * std::max(sms, 1);
}

}  // namespace

std::int64_t mla_decode_wgmma_resident_ctas() {
  return resident_ctas_of(mla_decode_split_wgmma_kernel, kSmemBytes, "wgmma");
}

void launch_mla_decode_split_wgmma(const MlaDecodeWgmmaLaunch& l, cudaStream_t stream) {
  // Above the default 48 KiB; a host-side attribute, legal under stream capture.
  TPB_CUDA_CHECK(cudaFuncSetAttribute(mla_decode_split_wgmma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      kSmemBytes));
  const dim3 grid(static_cast<unsigned>(l.groups), static_cast<unsigned>(l.splits), static_cast<unsigned>(l.batch));
  mla_decode_split_wgmma_kernel<<<grid, kThreads, kSmemBytes, stream>>>(
      l.q, l.cache, l.seq_lens, static_cast<int>(l.heads), l.max_len, static_cast<int>(l.splits), l.chunk, l.scale,
      l.o_part, l.m_part, l.l_part);
  TPB_CUDA_CHECK_LAUNCH();
}

std::int64_t mla_decode_wgmma_heads_n_resident_ctas(std::int64_t heads) {
  return with_heads_n(heads, [](auto n) {
    constexpr int kN = decltype(n)::value;
    return resident_ctas_of(mla_decode_split_wgmma_heads_n_kernel<kN>, HeadsNGeometry<kN>::kSmemBytes, "wgmma_heads_n");
  });
}

void launch_mla_decode_split_wgmma_heads_n(const MlaDecodeWgmmaLaunch& l, cudaStream_t stream) {
  with_heads_n(l.heads, [&](auto n) {
    constexpr int kN = decltype(n)::value;
    constexpr int smem = HeadsNGeometry<kN>::kSmemBytes;
    TPB_CUDA_CHECK(cudaFuncSetAttribute(mla_decode_split_wgmma_heads_n_kernel<kN>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    TPB_CHECK(l.groups == 1, "mla_decode (wgmma_heads_n): one head group per split, the plan has " << l.groups);
    const dim3 grid(1u, static_cast<unsigned>(l.splits), static_cast<unsigned>(l.batch));
    mla_decode_split_wgmma_heads_n_kernel<kN><<<grid, kThreads, smem, stream>>>(
        l.q, l.cache, l.seq_lens, static_cast<int>(l.heads), l.max_len, static_cast<int>(l.splits), l.chunk, l.scale,
        l.o_part, l.m_part, l.l_part);
    TPB_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace tpb::gpu::detail
