// The split pass of the absorbed-MLA decode attention on Hopper's warpgroup MMA (wgmma), for
// the DeepSeek-V3 / Kimi-K2.5 row: kv_lora 512 + rope 64 (FlashMLA's shape of the problem).
// The merge pass and the split plan are mla_decode.cu's; this file is the kernel that reads the
// cache.
//
// One CTA per (group of 64 heads, split, sequence), two warpgroups. All 64 heads are the wgmma
// M dimension (fewer heads are padded with zero queries whose rows are dropped), so each
// 64-key cache tile is read from HBM once for every head of the group. Shared memory holds the
// queries and two stages of cache tiles, each as nine 64-column blocks in the 128-byte-swizzled
// layout (wgmma.cuh), 72 KB apiece; cp.async fills them, one tile ahead.
//
// Per tile:
//   S = Q C^T [64 heads x 64 keys]: warpgroup w takes half of the 576-wide K dimension (18 k16
//     steps, both operands from shared memory); the halves meet in shared memory and both
//     warpgroups form S = S_0 + S_1 (the same bits in both: addition commutes).
//   Softmax with a running max and sum per head, in both warpgroups alike (each thread holds
//     two heads x 16 keys), in the base-2 domain (scores times scale * log2 e, one exp2 per
//     probability); the maxima go to the merge in that domain.
//   O += P C_lat [64 heads x 512]: warpgroup w owns latent columns 256 w ..; P stays in
//     registers (the scores' accumulator layout is the A-fragment layout of the next MMA) and
//     enters as bf16 hi + lo, P = hi + lo to about 2^-17 relative, as in the mma.sync kernel.
// The half-scores meet in 16 KB: the tile's rope block (no longer read once S is done) and
// 8 KB more, because 3 x 72 KB leave no room for two 16 KB buffers under the 227 KB limit.
#include "cuda/mla_decode_wgmma.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "tpb/check.h"
#include "tpb/cuda_check.h"
#include "tpb/kernels/mla_decode_split.h"
#include "cuda/mma_sync.cuh"
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
constexpr int kHalfSteps = kSteps / 2;        // per warpgroup
constexpr int kStages = 2;
constexpr int kThreads = 256;
constexpr int kScratchBytes = 8192;           // with the tile's rope block: the 16 KB half-score exchange
constexpr int kSmemBytes = (1 + kStages) * kPanelBytes + kScratchBytes + 1024;  // + alignment to 1024
static_assert(kRow % 64 == 0 && kSteps % 2 == 0 && kLora == 2 * 256 && kHeads == 64 && kTileKeys == 64,
              "the kernel's geometry");
static_assert(kSmemBytes <= 227 * 1024, "shared memory per block on sm_90");

__global__ void __launch_bounds__(kThreads, 1)
    mla_decode_split_wgmma_kernel(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ cache,
                                  const std::int32_t* __restrict__ seq_lens, int heads, std::int64_t max_len,
                                  int splits, std::int64_t chunk, float scale, float* __restrict__ o_part,
                                  float* __restrict__ m_part, float* __restrict__ l_part) {
  const int g0 = blockIdx.x * kHeads;
  const int split = blockIdx.y;
  const int b = blockIdx.z;
  const int tid = threadIdx.x;
  const int wg = tid >> 7;          // warpgroup: K half of the scores, latent half of the output
  const int wt = tid & 127;         // thread within the warpgroup
  const int warp = wt >> 5;         // rows 16 warp .. of the M = 64 heads
  const int lane = tid & 31;
  const int r0 = 16 * warp + (lane >> 2);  // this thread's heads: r0 and r0 + 8
  const int q2 = 2 * (lane & 3);           // and its key / column pair within each 8

  const std::int64_t seq_len = min(max(static_cast<std::int64_t>(seq_lens[b]), std::int64_t{0}), max_len);
  const std::int64_t start = static_cast<std::int64_t>(split) * chunk;
  const std::int64_t end = min(start + chunk, seq_len);
  const std::size_t part_row0 = (static_cast<std::size_t>(b) * heads + g0) * splits + split;  // + g * splits
  if (start >= end) {
    // Nothing to attend: the merge skips this split on l == 0 (its o is never read).
    for (int g = tid; g < kHeads; g += kThreads)
      if (g0 + g < heads) {
        m_part[part_row0 + static_cast<std::size_t>(g) * splits] = -INFINITY;
        l_part[part_row0 + static_cast<std::size_t>(g) * splits] = 0.0f;
      }
    return;
  }

  extern __shared__ unsigned char smem_raw[];
  const std::uint32_t raw = smem_addr(smem_raw);
  const std::uint32_t pad = ((raw + 1023u) & ~1023u) - raw;  // the swizzle pattern starts at 1024
  unsigned char* smem = smem_raw + pad;
  const std::uint32_t q_addr = raw + pad;
  const std::uint32_t tiles_addr = q_addr + kPanelBytes;
  float4* scratch = reinterpret_cast<float4*>(smem + (1 + kStages) * kPanelBytes);

  // Queries and tiles by cp.async into the swizzled layout. Thread t copies chunk t % 8 of
  // every 64-column block of rows t / 8 and t / 8 + 32: its swizzled offset within a block is
  // the same for both rows (32 is a multiple of 8), so each copy is an add and a predicate.
  // Heads past `heads` and rows past `end` arrive as zeros (a zero query row gives finite
  // scores, dropped; a zero key row is masked, and p = 0 must not meet garbage that could be NaN).
  const int copy_row = tid >> 3, copy_chunk = tid & 7;
  const std::uint32_t copy_dst = copy_row * 128 + ((copy_chunk ^ (copy_row & 7)) << 4);
  auto load_rows = [&](std::uint32_t dst, const __nv_bfloat16* src0, std::int64_t rows_valid) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = copy_row + 32 * h;
      const bool valid = r < rows_valid;
      const __nv_bfloat16* src = src0 + (valid ? static_cast<std::size_t>(r) * kRow : 0) + copy_chunk * 8;
#pragma unroll
      for (int blk = 0; blk < kBlocks; ++blk) cp_async16(dst + copy_dst + blk * kBlockBytes + h * 4096, src + blk * 64, valid);
    }
  };
  load_rows(q_addr, q + (static_cast<std::size_t>(b) * heads + g0) * kRow, heads - g0);
  const __nv_bfloat16* cache_b = cache + static_cast<std::size_t>(b) * max_len * kRow;
  auto load_tile = [&](std::int64_t t0, int stage) {
    load_rows(tiles_addr + stage * kPanelBytes, cache_b + t0 * kRow, end - t0);
  };
  const int tiles = static_cast<int>((end - start + kTileKeys - 1) / kTileKeys);
  load_tile(start, 0);
  cp_async_commit();

  // Scores in the base-2 domain: s * scale * log2(e), so that each probability is one exp2.
  const float scale_log2 = scale * 1.4426950408889634f;
  const std::uint64_t q_desc = sw128_desc(q_addr, 16, 1024);
  float o[128];  // O[64 heads][256 latent columns of this warpgroup], wgmma accumulator layout
#pragma unroll
  for (int i = 0; i < 128; ++i) o[i] = 0.0f;
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};  // heads r0, r0 + 8

  for (int it = 0; it < tiles; ++it) {
    cp_async_wait<0>();
    fence_proxy_async();  // this thread's cp.async writes, visible to the wgmma (async proxy)
    __syncthreads();      // tile `it` landed for all; every wgmma of tile it - 1 has completed
    if (it + 1 < tiles) load_tile(start + static_cast<std::int64_t>(it + 1) * kTileKeys, (it + 1) % kStages);
    cp_async_commit();
    const std::uint32_t tile_addr = tiles_addr + (it % kStages) * kPanelBytes;
    const int keys = static_cast<int>(min(end - (start + static_cast<std::int64_t>(it) * kTileKeys),
                                          static_cast<std::int64_t>(kTileKeys)));  // valid keys in the tile

    // This warpgroup's half of the scores: the k16 steps 2k + wg (interleaved halves, so that
    // each step's descriptor offset is a constant plus 32 wg bytes). A descriptor's low bits
    // are the start address / 16, so an offset is added to it directly.
    float s[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) s[i] = 0.0f;
    const std::uint64_t t_desc = sw128_desc(tile_addr, 16, 1024) + 2 * wg;
    fence_operands(s);
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < kHalfSteps; ++k) {
      const std::uint32_t off16 = ((k >> 1) * kBlockBytes + 64 * (k & 1)) >> 4;
      wgmma_m64n64k16_ss<0>(s, q_desc + 2 * wg + off16, t_desc + off16, 1);
    }
    wgmma_commit();
    wgmma_wait<0>();
    fence_operands(s);

    // The halves meet in 16 KB: float4 slot i of this thread is scratch[i][wt] for i < 4, else
    // the tile's rope block's.
    __syncthreads();  // both warpgroups' score MMAs have completed: the rope block is free
    float4* rope_block = reinterpret_cast<float4*>(smem + kPanelBytes * (1 + it % kStages) + (kBlocks - 1) * kBlockBytes);
    auto slot = [&](int i) -> float4& { return i < 4 ? scratch[i * 128 + wt] : rope_block[(i - 4) * 128 + wt]; };
    if (wg == 1) {
#pragma unroll
      for (int i = 0; i < 8; ++i) slot(i) = make_float4(s[4 * i], s[4 * i + 1], s[4 * i + 2], s[4 * i + 3]);
    }
    __syncthreads();
    if (wg == 0) {
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const float4 other = slot(i);
        slot(i) = make_float4(s[4 * i], s[4 * i + 1], s[4 * i + 2], s[4 * i + 3]);
        s[4 * i] += other.x;
        s[4 * i + 1] += other.y;
        s[4 * i + 2] += other.z;
        s[4 * i + 3] += other.w;
      }
    }
    __syncthreads();
    if (wg == 1) {
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const float4 other = slot(i);
        s[4 * i] = other.x + s[4 * i];
        s[4 * i + 1] = other.y + s[4 * i + 1];
        s[4 * i + 2] = other.z + s[4 * i + 2];
        s[4 * i + 3] = other.w + s[4 * i + 3];
      }
    }

    // Softmax of the tile: s[4j + e] is head r0 + 8 (e >> 1), key 8j + q2 + (e & 1) of the tile.
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[4 * j + e] = 8 * j + q2 + (e & 1) < keys ? s[4 * j + e] * scale_log2 : -INFINITY;
        tile_max[e >> 1] = fmaxf(tile_max[e >> 1], s[4 * j + e]);
      }
    float corr[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
      const float m_new = fmaxf(m_run[r], tile_max[r]);  // finite: the tile's first key is valid
      corr[r] = exp2f(m_run[r] - m_new);                 // exp2(-inf) = 0 on the first tile
      m_run[r] = m_new;
    }
    // P as the A fragments of the four k16 steps: step kk holds keys 16 kk .. 16 kk + 15.
    std::uint32_t hi[4][4], lo[4][4];
    float sum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const float p0 = exp2f(s[4 * j + 2 * r] - m_run[r]);
        const float p1 = exp2f(s[4 * j + 2 * r + 1] - m_run[r]);
        sum[r] += p0 + p1;
        const __nv_bfloat162 h = __floats2bfloat162_rn(p0, p1);  // .x (low half) = p0
        const float2 hf = __bfloat1622float2(h);
        const __nv_bfloat162 l = __floats2bfloat162_rn(p0 - hf.x, p1 - hf.y);
        hi[j >> 1][2 * (j & 1) + r] = *reinterpret_cast<const std::uint32_t*>(&h);
        lo[j >> 1][2 * (j & 1) + r] = *reinterpret_cast<const std::uint32_t*>(&l);
      }
#pragma unroll
    for (int r = 0; r < 2; ++r) l_run[r] = l_run[r] * corr[r] + sum[r];
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      o[4 * j] *= corr[0];
      o[4 * j + 1] *= corr[0];
      o[4 * j + 2] *= corr[1];
      o[4 * j + 3] *= corr[1];
    }

    // O += P C_lat[:, 256 wg ..]: the tile's blocks 4 wg .. 4 wg + 3, read MN-major.
    const std::uint64_t v_desc = sw128_desc(tile_addr + 4 * wg * kBlockBytes, kBlockBytes, 1024);
    fence_operands(o);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      wgmma_m64n256k16_rs_bmn(o, hi[kk], v_desc + ((2048 * kk) >> 4), 1);
      wgmma_m64n256k16_rs_bmn(o, lo[kk], v_desc + ((2048 * kk) >> 4), 1);
    }
    wgmma_commit();
    wgmma_wait<0>();
    fence_operands(o);
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
  // Sums over the quad's keys; both warpgroups hold the same, the first writes. The maxima are
  // in the base-2 domain (the merge's kBase2).
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
  const dim3 grid(static_cast<unsigned>(l.groups), static_cast<unsigned>(l.splits), static_cast<unsigned>(l.batch));
  mla_decode_split_wgmma_kernel<<<grid, kThreads, kSmemBytes, stream>>>(
      l.q, l.cache, l.seq_lens, static_cast<int>(l.heads), l.max_len, static_cast<int>(l.splits), l.chunk, l.scale,
      l.o_part, l.m_part, l.l_part);
  TPB_CUDA_CHECK_LAUNCH();
}

}  // namespace tpb::gpu::detail
