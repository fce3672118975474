// The split pass of the absorbed-MLA decode attention on Hopper's warpgroup MMA (wgmma), for
// the DeepSeek-V3 / Kimi-K2.5 row: kv_lora 512 + rope 64 (FlashMLA's shape of the problem).
// The merge pass and the split plan are mla_decode.cu's; this file is the kernel that reads the
// cache.
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

#include <cmath>
#include <cstdint>

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
    const __nv_bfloat16* cache_b = cache + static_cast<std::size_t>(b) * max_len * kRow;
    auto load_tile = [&](int it) {
      const std::int64_t t0 = start + static_cast<std::int64_t>(it) * kTileKeys;
      load_rows(tiles_addr + (it % kStages) * kPanelBytes, cache_b + t0 * kRow, end - t0, wt);
    };
    load_tile(0);
    cp_async_commit();
    if (tiles > 1) load_tile(1);
    cp_async_commit();  // empty when there is one tile: the wait counts stay the same
    cp_async_wait<1>();
    fence_proxy_async();  // this thread's cp.async writes, visible to the wgmma (async proxy)
    named_arrive(kBarTileReady);
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
}

}  // namespace

std::int64_t mla_decode_wgmma_resident_ctas() {
  int dev = 0, sms = 0, per_sm = 0;
  TPB_CUDA_CHECK(cudaGetDevice(&dev));
  TPB_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  // A host-side attribute, legal under stream capture.
  TPB_CUDA_CHECK(cudaFuncSetAttribute(mla_decode_split_wgmma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      kSmemBytes));
  TPB_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, mla_decode_split_wgmma_kernel, kThreads,
                                                               kSmemBytes));
  TPB_CHECK(per_sm >= 1, "mla_decode (wgmma): the split kernel does not fit on an SM (" << kSmemBytes
                                                                                       << " bytes of shared memory)");
  return static_cast<std::int64_t>(per_sm) * std::max(sms, 1);
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

}  // namespace tpb::gpu::detail
