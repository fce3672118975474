// The causal MLA prefill attention on Hopper's warpgroup MMA (wgmma), at Kimi-K2.5's (and
// DeepSeek-V3's) widths: q/k 192 = nope 128 + rope 64, v 128. One of mla_prefill.cu's
// variants (mla_prefill_tuning.h: wgmma_split_p), with the same contract as its mma.sync
// kernels: online softmax over 64-key tiles in a fixed order, fp32 accumulation, P as bf16
// hi + lo (2^-16 relative per weight), deterministic.
//
// One CTA per (128 query rows, head, sequence), two warpgroups of 64 rows each, the latest
// query block first (the causal work is largest there). Shared memory holds each warpgroup's
// queries ([64][192] as three 64-column blocks) and two stages of key and value tiles
// ([64 keys][192] and [64 keys][128]) in the 128-byte-swizzled layout of wgmma.cuh; all 256
// threads copy the next tile with cp.async while the current one is multiplied.
// Per tile and warpgroup: S = Q K^T [64 x 64] in 12 k16 steps (both operands from shared
// memory); the softmax in the base-2 domain (the scores times scale * log2 e, one exp2 per
// weight) with the causal mask; O [64 x 128] += P V with P in registers (the scores'
// accumulator layout is the next MMA's A-fragment layout), V read MN-major, hi then lo per
// k16 step. A warpgroup whose rows see none of a tile's keys skips its MMAs.
#include "cuda/mla_prefill_wgmma.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "tpb/check.h"
#include "tpb/cuda_check.h"
#include "tpb/kernels/kernel_paths.h"
#include "cuda/mma_sync.cuh"
#include "cuda/softmax_split_p.cuh"
#include "cuda/wgmma.cuh"

namespace tpb::gpu::detail {

namespace {

constexpr int kNope = 128, kRope = 64, kQk = kNope + kRope, kV = 128;
constexpr int kBlockQ = 128;  // query rows per CTA: 64 per warpgroup
constexpr int kBlockK = 64;   // keys per tile
constexpr int kThreads = 256;
constexpr int kBlockBytes = 64 * 128;               // [64 rows][64 bf16], swizzled
constexpr int kQPanelBytes = (kQk / 64) * kBlockBytes;  // one warpgroup's queries: 24 KB
constexpr int kKTileBytes = (kQk / 64) * kBlockBytes;   // 24 KB
constexpr int kVTileBytes = (kV / 64) * kBlockBytes;    // 16 KB
constexpr int kStageBytes = kKTileBytes + kVTileBytes;
// Two stages in step; three when a warpgroup's P.V of tile t - 1 overlaps its scores of tile t
// (kOverlap: tiles t - 1 and t are read while t + 1 is copied).
template <bool kOverlap>
constexpr int kStages = kOverlap ? 3 : 2;
template <bool kOverlap>
constexpr int kSmemBytes = 2 * kQPanelBytes + kStages<kOverlap> * kStageBytes + 1024;  // + alignment to 1024
constexpr int kScoreSteps = kQk / 16;  // 12
static_assert(kQk % 64 == 0 && kV == 128 && kBlockK == 64 && kBlockBytes == 8192, "the kernel's geometry");

// Thread t's share of a copy of 64 rows: chunk t % 8 of each 64-column block of rows t / 8 and
// t / 8 + 32, whose swizzled offset within a block is the same for both (32 is a multiple of 8).
struct CopySlot {
  int row;              // t / 8: rows row and row + 32
  int chunk;            // t % 8: elements 8 chunk ..
  std::uint32_t offset; // within a block, for row (row + 32 adds 4096)
};

__device__ __forceinline__ CopySlot copy_slot(int tid) {
  CopySlot c;
  c.row = tid >> 3;
  c.chunk = tid & 7;
  c.offset = c.row * 128 + ((c.chunk ^ (c.row & 7)) << 4);
  return c;
}

// Keeps registers a wgmma reads asynchronously (its A fragments) live up to this point, so that
// the compiler does not give them to newer values while the MMA may still read them.
__device__ __forceinline__ void keep_live(const std::uint32_t (&a)[4][4]) {
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int k = 0; k < 4; ++k) asm volatile("" ::"r"(a[i][k]) : "memory");
}

template <bool kOverlap>
__global__ void __launch_bounds__(kThreads, 1)
    mla_prefill_wgmma_kernel(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k_nope,
                             const __nv_bfloat16* __restrict__ k_rot, const __nv_bfloat16* __restrict__ v, int q_len,
                             int past, int heads, float scale_log2, __nv_bfloat16* __restrict__ out) {
#if TPB_WGMMA_COMPILED
  const int i0 = static_cast<int>(gridDim.x - 1 - blockIdx.x) * kBlockQ;  // latest block first
  const int h = blockIdx.y;
  const int b = blockIdx.z;
  const int tid = threadIdx.x;
  const int wg = tid >> 7;
  const int wt = tid & 127;
  const int warp = wt >> 5;
  const int lane = tid & 31;
  const int r0 = 16 * warp + (lane >> 2);  // this thread's rows of the warpgroup: r0 and r0 + 8
  const int q2 = 2 * (lane & 3);           // and its key / column pair within each 8
  const int kv_len = past + q_len;
  const int row_first = i0 + 64 * wg;      // this warpgroup's first query row

  extern __shared__ unsigned char smem_raw[];
  const std::uint32_t raw = smem_addr(smem_raw);
  const std::uint32_t base = (raw + 1023u) & ~1023u;  // the swizzle pattern starts at 1024
  const std::uint32_t q_addr = base;                  // [2 warpgroups][3 blocks][64][64]
  const std::uint32_t stage_addr = base + 2 * kQPanelBytes;  // [stage]{K: 3 blocks, V: 2 blocks}

  const CopySlot cs = copy_slot(tid);
  // Queries: rows i0 + 64 p + cs.row + 32 hh of panel p; rows past q_len arrive as zeros.
  {
    const std::size_t row_stride = static_cast<std::size_t>(heads) * kQk;
    const __nv_bfloat16* q_bh = q + (static_cast<std::size_t>(b) * q_len * heads + h) * kQk;
#pragma unroll
    for (int p = 0; p < 2; ++p)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int i = i0 + 64 * p + cs.row + 32 * hh;
        const bool valid = i < q_len;
        const __nv_bfloat16* src = q_bh + (valid ? static_cast<std::size_t>(i) * row_stride : 0) + cs.chunk * 8;
#pragma unroll
        for (int blk = 0; blk < kQk / 64; ++blk)
          cp_async16(q_addr + p * kQPanelBytes + blk * kBlockBytes + cs.offset + hh * 4096, src + blk * 64, valid);
      }
  }
  // Keys and values of tile t: rows past kv_len arrive as zeros (and are masked).
  const std::size_t kv_row = static_cast<std::size_t>(heads);
  const __nv_bfloat16* kn_bh = k_nope + static_cast<std::size_t>(b) * kv_len * heads * kNope + static_cast<std::size_t>(h) * kNope;
  const __nv_bfloat16* kr_b = k_rot + static_cast<std::size_t>(b) * kv_len * kRope;
  const __nv_bfloat16* v_bh = v + static_cast<std::size_t>(b) * kv_len * heads * kV + static_cast<std::size_t>(h) * kV;
  auto load_tile = [&](int t, int stage) {
    const std::uint32_t k_dst = stage_addr + stage * kStageBytes + cs.offset;
    const std::uint32_t v_dst = k_dst + kKTileBytes;
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int j = kBlockK * t + cs.row + 32 * hh;
      const bool valid = j < kv_len;
      const std::size_t jj = valid ? static_cast<std::size_t>(j) : 0;
      const __nv_bfloat16* kn = kn_bh + jj * kv_row * kNope + cs.chunk * 8;
      const __nv_bfloat16* vv = v_bh + jj * kv_row * kV + cs.chunk * 8;
      cp_async16(k_dst + hh * 4096, kn, valid);
      cp_async16(k_dst + kBlockBytes + hh * 4096, kn + 64, valid);
      cp_async16(k_dst + 2 * kBlockBytes + hh * 4096, kr_b + jj * kRope + cs.chunk * 8, valid);
      cp_async16(v_dst + hh * 4096, vv, valid);
      cp_async16(v_dst + kBlockBytes + hh * 4096, vv + 64, valid);
    }
  };

  // The CTA's tiles: every key its last row sees; this warpgroup's: those its last row sees.
  const int last_key = min(past + i0 + kBlockQ - 1, kv_len - 1);
  const int tiles = last_key / kBlockK + 1;
  const int wg_last_key = min(past + row_first + 63, kv_len - 1);
  const int wg_tiles = wg_last_key / kBlockK + 1;
  load_tile(0, 0);
  cp_async_commit();

  const std::uint64_t q_desc = sw128_desc(q_addr + wg * kQPanelBytes, 16, 1024);
  float o[64];  // O [64 rows][128], wgmma accumulator layout
#pragma unroll
  for (int i = 0; i < 64; ++i) o[i] = 0.0f;
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};  // rows r0, r0 + 8
  // The last key each of this thread's rows sees (causal), and the first row's index.
  const int see0 = past + row_first + r0, see1 = see0 + 8;

  // S = Q K^T of tile t into s (issued, not waited for).
  auto issue_scores = [&](float (&s)[32], int t) {
    const std::uint32_t k_addr = stage_addr + (t % kStages<kOverlap>) * kStageBytes;
    wgmma_scores_ss<kScoreSteps>(s, q_desc, sw128_desc(k_addr, 16, 1024));
  };
  // Scale to base 2 and mask tile t's scores: s[4j + e] is row r0 + 8 (e >> 1), key 64 t + 8j +
  // q2 + (e & 1). A key is seen when it is at most past + the row (and below kv_len, which a
  // row below q_len implies). Key 0 is seen by every row, so the running max is finite from
  // tile 0 on.
  auto mask_scores = [&](float (&s)[32], int t) {
    const int key0 = kBlockK * t + q2;
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = key0 + 8 * j + (e & 1);
        const bool seen = key <= ((e >> 1) ? see1 : see0) && key < kv_len;
        s[4 * j + e] = seen ? s[4 * j + e] * scale_log2 : -INFINITY;
      }
  };
  // O += P V of tile t: V [64 keys][128] read MN-major, two 64-column blocks (issued, not
  // waited for). fence_o: pin O's registers first; the overlapped loop pins them before the
  // scores it issues ahead, since an instruction defining a wgmma's input registers while
  // another wgmma group is in flight serializes them (ptxas C7513).
  auto pv_desc = [&](int t) {
    const std::uint32_t k_addr = stage_addr + (t % kStages<kOverlap>) * kStageBytes;
    return sw128_desc(k_addr + kKTileBytes, kBlockBytes, 1024);
  };
  auto issue_pv = [&](const std::uint32_t (&hi)[4][4], const std::uint32_t (&lo)[4][4], std::uint64_t v_desc,
                      bool fence_o) {
    if (fence_o) fence_operands(o);
    wgmma_pv_split_p(o, hi, lo, v_desc);
  };

  // Tile t landed for all threads (each thread's cp.async writes made visible to the wgmma, the
  // async proxy, then a barrier), and tile t + 1's copies issued into the stage the barrier
  // freed.
  auto next_tile = [&](int t) {
    cp_async_wait<0>();
    fence_proxy_async();
    __syncthreads();
    if (t + 1 < tiles) load_tile(t + 1, (t + 1) % kStages<kOverlap>);
    cp_async_commit();
  };

  if constexpr (!kOverlap) {
    // Each tile's scores, softmax and P.V in turn.
    for (int t = 0; t < tiles; ++t) {
      next_tile(t);  // every wgmma of tile t - 1 has completed
      if (t >= wg_tiles) continue;  // no row of this warpgroup sees these keys
      float s[32];
      issue_scores(s, t);
      wgmma_wait<0>();
      fence_operands(s);
      mask_scores(s, t);
      float corr[2];
      std::uint32_t hi[4][4], lo[4][4];
      softmax_tile_split_p(s, m_run, l_run, corr, hi, lo, exp2_ftz);
      rescale_rows(o, corr);
      issue_pv(hi, lo, pv_desc(t), true);
      wgmma_wait<0>();
      fence_operands(o);
    }
  } else {
    // FlashAttention-3's intra-warpgroup overlap: the scores of tile t are issued before the
    // P.V of tile t - 1, and the softmax of tile t runs while that P.V does. O is rescaled by
    // tile t's corrections once tile t - 1's P.V has completed (it added weights relative to
    // tile t - 1's max); tile t's P waits in registers for the next round. Peeled into tile 0,
    // the steady state and the last P.V, so that every path leaves no wgmma group outstanding
    // (with issue and wait under per-tile conditions ptxas serialized the wgmma: C7518), and
    // P's registers alternate between two sets instead of being copied (a copy landed inside
    // a pipeline stage: C7513). wg_tiles >= 1: key 0 is seen by every row.
    std::uint32_t hi_a[4][4], lo_a[4][4], hi_b[4][4], lo_b[4][4];
    next_tile(0);
    {
      float s[32];
      issue_scores(s, 0);
      wgmma_wait<0>();
      fence_operands(s);
      mask_scores(s, 0);
      float corr[2];
      softmax_tile_split_p(s, m_run, l_run, corr, hi_a, lo_a, exp2_ftz);
      fence_operands(o);
      rescale_rows(o, corr);
    }
    // Tile t: its scores and tile t - 1's P.V (P in prev_*), its softmax into next_*. Two
    // register sets take turns, so that no copy of P lands inside a wgmma pipeline stage.
    auto step = [&](int t, const std::uint32_t (&prev_hi)[4][4], const std::uint32_t (&prev_lo)[4][4],
                    std::uint32_t (&next_hi)[4][4], std::uint32_t (&next_lo)[4][4]) {
      next_tile(t);  // every wgmma of tile t - 2 has completed
      fence_operands(o);
      const std::uint64_t v_desc = pv_desc(t - 1);
      float s[32];
      issue_scores(s, t);
      issue_pv(prev_hi, prev_lo, v_desc, false);
      wgmma_wait<1>();  // the scores (the older group)
      fence_operands(s);
      mask_scores(s, t);
      float corr[2];
      softmax_tile_split_p(s, m_run, l_run, corr, next_hi, next_lo, exp2_ftz);
      wgmma_wait<0>();
      keep_live(prev_hi);
      keep_live(prev_lo);
      fence_operands(o);
      rescale_rows(o, corr);
    };
    auto last_pv = [&](const std::uint32_t (&hi)[4][4], const std::uint32_t (&lo)[4][4]) {
      issue_pv(hi, lo, pv_desc(wg_tiles - 1), true);
      wgmma_wait<0>();
      keep_live(hi);
      keep_live(lo);
      fence_operands(o);
    };
    int t = 1;
    for (; t + 1 < wg_tiles; t += 2) {
      step(t, hi_a, lo_a, hi_b, lo_b);
      step(t + 1, hi_b, lo_b, hi_a, lo_a);
    }
    // The last seen tile's P.V, completed before this warpgroup reaches the next barrier, after
    // which its stage ((wg_tiles - 1) % 3, refilled at tile wg_tiles + 1) may be overwritten.
    if (t < wg_tiles) {
      step(t, hi_a, lo_a, hi_b, lo_b);
      last_pv(hi_b, lo_b);
    } else {
      last_pv(hi_a, lo_a);
    }
    // The tiles only the other warpgroup's rows see: this one keeps the barriers and the copies.
    for (int t = wg_tiles; t < tiles; ++t) next_tile(t);
  }

  // out[i][h][:] = O / l for this thread's rows below q_len; columns 8j + q2, + 1.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float l = l_run[r];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const int i = row_first + r0 + 8 * r;
    if (i < q_len) {
      const float inv = 1.0f / l;
      __nv_bfloat162* dst = reinterpret_cast<__nv_bfloat162*>(
          out + ((static_cast<std::size_t>(b) * q_len + i) * heads + h) * kV + q2);
#pragma unroll
      for (int j = 0; j < 16; ++j) dst[4 * j] = __floats2bfloat162_rn(o[4 * j + 2 * r] * inv, o[4 * j + 2 * r + 1] * inv);
    }
  }
#else
  __trap();  // not launched outside sm_90a (wgmma.cuh)
#endif
}

}  // namespace

bool mla_prefill_wgmma_supports(std::int64_t nope, std::int64_t rope, std::int64_t v_dim) {
  // Where the kernel-path registry gives this op wgmma (tpb/kernels/kernel_paths.h: a compute
  // capability 9.0 device, sm_90a code in the build, TPB_KERNELS not portable), at Kimi's widths.
  return kernels::kernel_path(kernels::KernelOp::mla_prefill).wgmma() && nope == kNope && rope == kRope && v_dim == kV;
}

void launch_mla_prefill_wgmma(const __nv_bfloat16* q, const __nv_bfloat16* k_nope, const __nv_bfloat16* k_rot,
                              const __nv_bfloat16* v, std::int64_t batch, std::int64_t q_len, std::int64_t past,
                              std::int64_t heads, float scale, __nv_bfloat16* out, cudaStream_t stream, bool overlap) {
  auto* kernel = overlap ? mla_prefill_wgmma_kernel<true> : mla_prefill_wgmma_kernel<false>;
  const int smem = overlap ? kSmemBytes<true> : kSmemBytes<false>;
  // Above the default 48 KiB; a host-side attribute, legal under stream capture.
  TPB_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const dim3 grid(static_cast<unsigned>((q_len + kBlockQ - 1) / kBlockQ), static_cast<unsigned>(heads),
                  static_cast<unsigned>(batch));
  const float scale_log2 = static_cast<float>(static_cast<double>(scale) * 1.4426950408889634);  // log2(e)
  kernel<<<grid, kThreads, smem, stream>>>(q, k_nope, k_rot, v, static_cast<int>(q_len), static_cast<int>(past),
                                          static_cast<int>(heads), scale_log2, out);
  TPB_CUDA_CHECK_LAUNCH();
}

}  // namespace tpb::gpu::detail
