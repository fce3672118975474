// Absorbed-MLA decode attention over the latent KV cache (tpb/kernels/gpu/mla_decode.h), on
// the tensor cores. Three split kernels, two merges:
//   wgmma (mla_decode_wgmma.cu): Hopper's warpgroup MMA, 64 heads per CTA, for the DeepSeek-V3
//     / Kimi-K2.5 row (kv_lora 512 + rope 64), what mla_decode_attention launches there;
//   wgmma_heads_n (the same file): the heads as the MMA's N dimension, up to 32 per CTA, what
//     mla_decode_attention launches there for a rank's share at TP >= 2;
//   mma.sync (below): m16n8k16, any width the validation takes, 32 heads per CTA.
// All write the same workspace (partial outputs, maxima and sums per split), which the merges
// below reduce; tpb/kernels/gpu/mla_decode_tuning.h launches each by name.
//
// The mma.sync kernel. Pass 1, one CTA per (group of up to 32 heads, split, sequence). Every head of a sequence
// attends over the same cache rows (MQA-style), so the heads are the MMA's M dimension: the
// CTA streams 64-row tiles of the cache through shared memory (cp.async, double-buffered)
// and each tile serves all its heads, read from HBM once. Four warps share each 16-head row
// tile: for the scores S = Q C^T each takes 16 of the tile's 64 keys; they trade their row
// maxima and their probabilities through shared memory, and for O = P C_lat each takes a
// quarter of the latent columns over all 64 keys. A running max and sum per head give the
// unnormalised fp32 partial output of the split's key range.
// Pass 2, for every split kernel: one CTA per (sequence, head, 128 latent columns), or per
// (sequence, head) at most 4 splits, merges the splits in split order.
//
// Precision: P enters the second MMA as bf16 hi + lo (P = hi + lo to about 2^-17 relative),
// two MMAs, so the weighted sum is as close to fp32 as the CUDA-core version it replaced,
// at about half again the MMA work (200 MMAs per warp and tile instead of 136).
// The key ranges are fixed by max_len and the split count (never by seq_lens), so a captured
// graph serves any seq_lens; no atomics, so every call gives the same bits.
#include "tpb/kernels/gpu/device_limits.h"
#include "tpb/kernels/gpu/mla_decode.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <vector>

#include "tpb/check.h"
#include "tpb/cuda_check.h"
#include "tpb/dtype.h"
#include "tpb/kernels/gpu/mla_decode_tuning.h"
#include "tpb/kernels/kernel_paths.h"
#include "tpb/kernels/mla_decode_split.h"
#include "tpb/kernels/mla_widths.h"
#include "cuda/decode_split_range.cuh"
#include "cuda/mla_decode_wgmma.h"
#include "cuda/mma_sync.cuh"

namespace tpb::gpu {

namespace {

using detail::cp_async16;
using detail::cp_async_commit;
using detail::cp_async_wait;
using detail::decode_split_range;
using detail::DecodeSplitRange;
using detail::ldmatrix_x4;
using detail::ldmatrix_x4_trans;
using detail::mma_bf16;
using detail::pack_bf16x2;
using detail::record_empty_split;
using detail::smem_addr;

// The split kernel's shared-memory configurations (kernels::kMlaDecodeMmaConfigs, in the order
// tried): its template parameters kMaxRowTiles (16-head MMA row tiles per CTA), kStages
// (cp.async pipeline depth) and kSlices (warps per row tile, 16 keys each per stage).
template <int kMaxRowTiles, int kStages, int kSlices>
struct MmaConfig {
  static constexpr int kTileKeys = 16 * kSlices;  // cache rows per pipeline stage, 16 per warp
  static constexpr int kMaxThreads = kMaxRowTiles * kSlices * 32;
  // The kernel's static arrays: row maxima (then sums) and P fragments per row tile and slice.
  static constexpr std::size_t kStaticSmem = kMaxRowTiles * kSlices * (16 * sizeof(float) + 2 * 32 * sizeof(uint4));
  static_assert(kernels::kMlaDecodeTileKeys % kTileKeys == 0,
                "a split's keys (whole 64-key tiles of the plan) are whole stages");
};
constexpr int kMaxKvLora = static_cast<int>(kernels::kMlaDecodeMaxKvLora);
constexpr int kMaxRope = static_cast<int>(kernels::kMlaDecodeMaxRope);
constexpr int kMaxSplits = static_cast<int>(kernels::kMlaDecodeMaxSplits);
constexpr int kMergeColumns = 64;  // column pairs (threads) per merge CTA
// Partial outputs each merge thread has in flight, by the sequences' split count: 32 above 16
// splits (small batches, long contexts), else 8. At most kMergeFewSplits splits (large
// batches: many merge CTAs) take mla_decode_merge_few_kernel instead, kMergeFewVecs float4s of
// a row per thread. (Before it, 4 in flight at up to 4 splits: batch 64 x 1K, 2 splits, 64
// heads on an H200 took 46.2 us with 4, 48.6 with 8, the registers of 8 cutting the
// residency of its many CTAs.)
constexpr int kMergeBatchManySplits = 32;
constexpr int kMergeBatchSomeSplits = 8;
constexpr int kMergeFewSplits = 4;
constexpr int kMergeFewVecs = 2;

// Shared-memory geometry of one shape in one configuration (kernels::kMlaDecodeMmaConfigs).
// Rows are padded with zeros: to 16 columns for the score MMA's K steps, to 16 * slices latent
// columns so that each warp owns whole pairs of 8-column tiles, plus 8 columns so that
// consecutive rows start 16 bytes apart modulo 128 (ldmatrix without bank conflicts).
struct Geometry {
  int config = 0;     // index into kernels::kMlaDecodeMmaConfigs
  int row_tiles = 1;  // 16-head row tiles per CTA
  int groups = 1;     // head groups (CTAs per split and sequence)
  int stride = 0;     // shared row stride, bf16
  int threads = 64;
  std::size_t smem = 0;  // dynamic shared memory, bytes (the static arrays come on top)
};

using detail::round_up;

void validate(const MlaDecodeShape& s) {
  TPB_CHECK(s.batch >= 1 && s.batch <= 65535, "mla_decode: batch " << s.batch << " outside 1..65535");
  TPB_CHECK(s.heads >= 1, "mla_decode: heads " << s.heads);
  TPB_CHECK(s.kv_lora >= 8 && s.kv_lora <= kMaxKvLora && s.kv_lora % 8 == 0,
            "mla_decode: kv_lora " << s.kv_lora << " must be a multiple of 8 in 8.." << kMaxKvLora);
  TPB_CHECK(s.rope >= 0 && s.rope <= kMaxRope && s.rope % 8 == 0,
            "mla_decode: rope " << s.rope << " must be a multiple of 8 in 0.." << kMaxRope);
  TPB_CHECK(s.max_len >= 1, "mla_decode: max_len " << s.max_len);
}

// The sizes come from tpb/kernels/mla_decode_split.h, which the launcher's choice of
// configuration and the CPU tests read too.
Geometry make_geometry(const MlaDecodeShape& s, int config) {
  const kernels::MlaDecodeMmaConfig& c = kernels::kMlaDecodeMmaConfigs[config];
  Geometry g;
  g.config = config;
  g.groups = static_cast<int>(kernels::mla_decode_mma_head_groups(s.heads, c.row_tiles));
  g.row_tiles = static_cast<int>(kernels::mla_decode_mma_cta_row_tiles(c, s.heads));  // balanced: 3 tiles run as 2 + 1
  g.stride = static_cast<int>(kernels::mla_decode_mma_row_stride(c, s.kv_lora, s.rope));
  g.threads = g.row_tiles * c.slices * 32;
  g.smem = static_cast<std::size_t>(kernels::mla_decode_mma_dynamic_smem_bytes(c, s.heads, s.kv_lora, s.rope));
  return g;
}


// Workspace layout: o [batch*heads][splits][kv_lora], then m and l [batch*heads][splits], fp32.
struct Workspace {
  float* o;
  float* m;
  float* l;
};

Workspace carve(void* base, const MlaDecodeShape& s, const kernels::MlaDecodeSplit& p) {
  const std::size_t rows = static_cast<std::size_t>(s.batch * s.heads) * static_cast<std::size_t>(p.splits);
  Workspace w;
  w.o = static_cast<float*>(base);
  w.m = w.o + rows * static_cast<std::size_t>(s.kv_lora);
  w.l = w.m + rows;
  return w;
}

std::size_t workspace_bytes(const MlaDecodeShape& s, const kernels::MlaDecodeSplit& p) {
  return static_cast<std::size_t>(kernels::mla_decode_workspace_bytes_for(s.batch, s.heads, s.kv_lora, p.splits));
}

// The kSlices warps of row tile rt trade their maxima and probabilities among themselves only:
// a named barrier (1 + rt) for those warps, so that the other row tile's warps need not wait
// (measured no faster than __syncthreads at batch 64 x 8K; it orders only what needs it). The
// tile's own slot of slice_s and p_s is rewritten only after the next tile's CTA-wide
// barrier, which every warp of the row tile reaches after its reads.
template <int kSlices>
__device__ __forceinline__ void row_tile_barrier(int rt) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(1 + rt), "r"(kSlices * 32) : "memory");
}

// Fragment layouts: cuda/mma_sync.cuh. The A fragment of a 16x16 block is the accumulators of
// its two 8-column halves, so a warp's scores become its part of the second MMA's A operand in
// registers, and the other warps' parts are the same registers of theirs.
template <int kMaxRowTiles, int kStages, int kSlices>
__global__ void __launch_bounds__(MmaConfig<kMaxRowTiles, kStages, kSlices>::kMaxThreads, 1)
    mla_decode_split_kernel(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ cache,
                            const std::int32_t* __restrict__ seq_lens, int heads, int kv_lora, int rope,
                            std::int64_t max_len, int splits, std::int64_t chunk, float scale, int row_tiles,
                            int stride, float* __restrict__ o_part, float* __restrict__ m_part,
                            float* __restrict__ l_part) {
  constexpr int kTileKeys = MmaConfig<kMaxRowTiles, kStages, kSlices>::kTileKeys;
  constexpr int kMaxColTiles = kMaxKvLora / (8 * kSlices);  // 8-column output tiles per warp
  const int cta_heads = row_tiles * 16;
  const int g0 = blockIdx.x * cta_heads;
  const int split = blockIdx.y;
  const int b = blockIdx.z;
  const int row = kv_lora + rope;
  const int row_pad = (row + 15) & ~15;
  const int lora_pad = (kv_lora + 16 * kSlices - 1) / (16 * kSlices) * (16 * kSlices);
  const int tid = threadIdx.x;
  const int nthreads = blockDim.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int rt = warp / kSlices;     // this warp's row tile (heads g0 + 16 rt ..)
  const int slice = warp % kSlices;  // scores: keys 16 slice ..; output: latent columns slice * lora_pad / kSlices ..
  const int quad_row = lane >> 2;
  const int quad_col = 2 * (lane & 3);

  const DecodeSplitRange range = decode_split_range(seq_lens, b, split, splits, chunk, max_len, heads, g0);
  const std::int64_t start = range.start, end = range.end;
  const std::size_t part_row0 = range.part_row0;  // + g * splits
  if (start >= end) {
    record_empty_split(m_part, l_part, range, splits, g0, heads, cta_heads, nthreads);
    return;
  }

  extern __shared__ __align__(16) unsigned char smem[];
  __nv_bfloat16* q_s = reinterpret_cast<__nv_bfloat16*>(smem);  // [cta_heads][stride]
  __nv_bfloat16* c_s = q_s + static_cast<std::size_t>(cta_heads) * stride;  // [kStages][kTileKeys][stride]
  __shared__ float slice_s[kMaxRowTiles][kSlices][16];          // row maxima, then the sums
  __shared__ uint4 p_s[kMaxRowTiles][kSlices][2][32];           // [tile][slice][hi, lo][lane] P fragments
  static_assert(sizeof(slice_s) + sizeof(p_s) == MmaConfig<kMaxRowTiles, kStages, kSlices>::kStaticSmem,
                "the configurations' sizes (tpb/kernels/mla_decode_split.h) count these arrays");

  const int vecs = stride / 8;  // 16-byte vectors per shared row
  const int row_vecs = row / 8;
  // Cache columns past the row are never copied into: zero them once.
  const int pad_vecs = vecs - row_vecs;
  for (int i = tid; i < kStages * kTileKeys * pad_vecs; i += nthreads) {
    const int r = i / pad_vecs;
    reinterpret_cast<uint4*>(c_s)[r * vecs + row_vecs + (i - r * pad_vecs)] = make_uint4(0, 0, 0, 0);
  }

  // Rows past `end` arrive as zeros: p = 0 must not meet garbage that could be NaN.
  const __nv_bfloat16* cache_b = cache + static_cast<std::size_t>(b) * max_len * row;
  auto load_tile = [&](std::int64_t t0, int stage) {
    __nv_bfloat16* dst = c_s + static_cast<std::size_t>(stage) * kTileKeys * stride;
    for (int i = tid; i < kTileKeys * row_vecs; i += nthreads) {
      const int r = i / row_vecs, v = i - r * row_vecs;
      const std::int64_t j = t0 + r;
      const bool valid = j < end;
      cp_async16(smem_addr(dst + r * stride + v * 8), cache_b + (valid ? j : 0) * row + v * 8, valid);
    }
  };

  const int tiles = static_cast<int>((end - start + kTileKeys - 1) / kTileKeys);
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < tiles) load_tile(start + static_cast<std::int64_t>(s) * kTileKeys, s);
    cp_async_commit();  // empty groups too: the wait count stays uniform
  }

  // Queries; heads past the end and columns past the row are zero (their results are dropped).
  // Loaded after the first tiles' copies are issued, so that the two may overlap (measured: no
  // change at batch 1 x 8K, where a CTA has two tiles; the kernel stayed at 13 us).
  for (int i = tid; i < cta_heads * vecs; i += nthreads) {
    const int g = i / vecs, v = i - g * vecs;
    uint4 val = make_uint4(0, 0, 0, 0);
    if (g0 + g < heads && v < row_vecs)
      val = *reinterpret_cast<const uint4*>(q + (static_cast<std::size_t>(b) * heads + g0 + g) * row + v * 8);
    reinterpret_cast<uint4*>(q_s)[i] = val;
  }
  const int col_tiles = lora_pad / (8 * kSlices);  // this warp's 8-column output tiles
  const int col0 = slice * (lora_pad / kSlices);
  const int mi = lane >> 3, r8 = lane & 7;  // ldmatrix: which 8x8 matrix this lane addresses, which row
  const std::uint32_t q_addr = smem_addr(q_s + (rt * 16 + (mi & 1) * 8 + r8) * stride + (mi >> 1) * 8);
  float acc[kMaxColTiles][4];
#pragma unroll
  for (int t = 0; t < kMaxColTiles; ++t) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = 0.0f;
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};  // rows quad_row, quad_row + 8

  for (int it = 0; it < tiles; ++it) {
    if constexpr (kStages == 1) {
      // One stage: the tile is copied while no warp computes (the small configuration of the
      // widest rows on 99 KiB devices).
      __syncthreads();  // tile it - 1 consumed
      load_tile(start + static_cast<std::int64_t>(it) * kTileKeys, 0);
      cp_async_commit();
      cp_async_wait<0>();
      __syncthreads();  // tile `it` landed for all
    } else {
      cp_async_wait<kStages - 2>();
      __syncthreads();  // tile `it` landed for all; tile it - 1's stage is free
      const int next = it + kStages - 1;
      if (next < tiles) load_tile(start + static_cast<std::int64_t>(next) * kTileKeys, next % kStages);
      cp_async_commit();
    }
    const __nv_bfloat16* tile = c_s + static_cast<std::size_t>(it % kStages) * kTileKeys * stride;
    const std::int64_t t0 = start + static_cast<std::int64_t>(it) * kTileKeys;

    // Scores of this warp's 16 keys (two 8-key column tiles) for its 16 heads. Even and odd
    // K steps go to separate accumulators, two dependency chains instead of one, added at
    // the end (a fixed order, the same in every call). (Four chains measured no faster on an
    // H200, at batch 64 x 8K: the tile's time is not the chains' latency.)
    float s[2][4];
    {
      float se[2][4] = {}, so[2][4] = {};
      const std::uint32_t k_addr = smem_addr(tile + (slice * 16 + (mi >> 1) * 8 + r8) * stride + (mi & 1) * 8);
      int k = 0;
      for (; k + 16 < row_pad; k += 32) {
        std::uint32_t a0[4], kb0[4], a1[4], kb1[4];
        ldmatrix_x4(q_addr + k * 2, a0);
        ldmatrix_x4(k_addr + k * 2, kb0);
        ldmatrix_x4(q_addr + (k + 16) * 2, a1);
        ldmatrix_x4(k_addr + (k + 16) * 2, kb1);
        mma_bf16(se[0], a0, kb0[0], kb0[1]);
        mma_bf16(se[1], a0, kb0[2], kb0[3]);
        mma_bf16(so[0], a1, kb1[0], kb1[1]);
        mma_bf16(so[1], a1, kb1[2], kb1[3]);
      }
      if (k < row_pad) {
        std::uint32_t a0[4], kb0[4];
        ldmatrix_x4(q_addr + k * 2, a0);
        ldmatrix_x4(k_addr + k * 2, kb0);
        mma_bf16(se[0], a0, kb0[0], kb0[1]);
        mma_bf16(se[1], a0, kb0[2], kb0[3]);
      }
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[nt][e] = se[nt][e] + so[nt][e];
    }
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const std::int64_t key = t0 + slice * 16 + nt * 8 + quad_col + (e & 1);
        s[nt][e] = key < end ? s[nt][e] * scale : -INFINITY;
        tile_max[e >> 1] = fmaxf(tile_max[e >> 1], s[nt][e]);
      }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
    }
    if ((lane & 3) == 0) {
      slice_s[rt][slice][quad_row] = tile_max[0];
      slice_s[rt][slice][quad_row + 8] = tile_max[1];
    }
    row_tile_barrier<kSlices>(rt);

    // Every warp of the row tile takes the maximum over the slices in slice order, so all
    // hold the same m_run and corrections; the tile's first key is valid, so m_new is finite.
    float corr[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float m_new = m_run[r];
#pragma unroll
      for (int w = 0; w < kSlices; ++w) m_new = fmaxf(m_new, slice_s[rt][w][quad_row + 8 * r]);
      corr[r] = expf(m_run[r] - m_new);  // exp(-inf) = 0 on the first tile
      m_run[r] = m_new;
    }
    std::uint32_t hi[4], lo[4];  // A-fragment registers: (column tile nt, row half r) -> 2 nt + r
    float sum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const float p0 = expf(s[nt][2 * r] - m_run[r]);
        const float p1 = expf(s[nt][2 * r + 1] - m_run[r]);
        sum[r] += p0 + p1;
        const __nv_bfloat16 h0 = __float2bfloat16_rn(p0), h1 = __float2bfloat16_rn(p1);
        hi[2 * nt + r] = pack_bf16x2(h0, h1);
        lo[2 * nt + r] = pack_bf16x2(__float2bfloat16_rn(p0 - __bfloat162float(h0)),
                                     __float2bfloat16_rn(p1 - __bfloat162float(h1)));
      }
#pragma unroll
    for (int r = 0; r < 2; ++r) l_run[r] = l_run[r] * corr[r] + sum[r];
    p_s[rt][slice][0][lane] = make_uint4(hi[0], hi[1], hi[2], hi[3]);
    p_s[rt][slice][1][lane] = make_uint4(lo[0], lo[1], lo[2], lo[3]);
#pragma unroll
    for (int t = 0; t < kMaxColTiles; ++t) {
      acc[t][0] *= corr[0];
      acc[t][1] *= corr[0];
      acc[t][2] *= corr[1];
      acc[t][3] *= corr[1];
    }
    row_tile_barrier<kSlices>(rt);

    // O += P C_lat over the tile's keys: K step ks holds the keys (and the P) of slice ks.
#pragma unroll
    for (int ks = 0; ks < kSlices; ++ks) {
      const uint4 h4 = p_s[rt][ks][0][lane], l4 = p_s[rt][ks][1][lane];
      const std::uint32_t ph[4] = {h4.x, h4.y, h4.z, h4.w}, pl[4] = {l4.x, l4.y, l4.z, l4.w};
      const std::uint32_t v_addr = smem_addr(tile + (ks * 16 + (mi & 1) * 8 + r8) * stride + col0 + (mi >> 1) * 8);
#pragma unroll
      for (int t = 0; t < kMaxColTiles; t += 2) {
        if (t < col_tiles) {
          std::uint32_t vb[4];
          ldmatrix_x4_trans(v_addr + t * 16, vb);  // columns col0 + 8t .. + 16, in bytes 16 t
          mma_bf16(acc[t], ph, vb[0], vb[1]);
          mma_bf16(acc[t], pl, vb[0], vb[1]);
          mma_bf16(acc[t + 1], ph, vb[2], vb[3]);
          mma_bf16(acc[t + 1], pl, vb[2], vb[3]);
        }
      }
    }
  }

  // Partial outputs of the latent columns this warp owns.
#pragma unroll
  for (int t = 0; t < kMaxColTiles; ++t) {
    const int d = col0 + t * 8 + quad_col;
    if (t < col_tiles && d < kv_lora) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int g = rt * 16 + quad_row + 8 * r;
        if (g0 + g < heads)
          *reinterpret_cast<float2*>(o_part + (part_row0 + static_cast<std::size_t>(g) * splits) * kv_lora + d) =
              make_float2(acc[t][2 * r], acc[t][2 * r + 1]);
      }
    }
  }
  // Sums: over the quad's columns, then over the slices' keys in slice order.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 1);
    l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 2);
  }
  __syncthreads();  // the last tile's maxima are read
  if ((lane & 3) == 0) {
    slice_s[rt][slice][quad_row] = l_run[0];
    slice_s[rt][slice][quad_row + 8] = l_run[1];
  }
  __syncthreads();
  if (slice == 0 && (lane & 3) == 0) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int g = rt * 16 + quad_row + 8 * r;
      float l = 0.0f;
#pragma unroll
      for (int w = 0; w < kSlices; ++w) l += slice_s[rt][w][quad_row + 8 * r];
      if (g0 + g < heads) {
        m_part[part_row0 + static_cast<std::size_t>(g) * splits] = m_run[r];
        l_part[part_row0 + static_cast<std::size_t>(g) * splits] = l;
      }
    }
  }
}

// One CTA per (sequence, head, block of kMergeColumns column pairs): out = sum_s w_s o_s /
// sum_s w_s l_s, w_s = exp(m_s - max m) (exp2 where the split kernel keeps its maxima in the
// base-2 domain, kBase2 - the wgmma one), summed in split order by every thread alike. The
// column blocks give a batch-1 step enough CTAs (32 heads x 4). An empty split (w_s = 0) adds
// fmaf(0, 0, sum) = sum, the same bits as skipping it (its o was never written).
//
// Latency, not bytes, bounds it (the partials sit in L2). Each thread has kBatch partial outputs
// in flight at once (volatile loads: main's plain loads of a batch of 32 compiled to 38
// registers, ptxas having sunk them next to their adds), and issues the first batch before the
// weights, whose loops over the splits then run under its latency. (Before: 10.9 us at batch
// 1 x 8K, 64 heads, 129 splits on an H200, Nsight Compute 6 % occupancy, no eligible warp
// 91 %.) The maximum is a tree over the threads: fmaxf's result does not depend on the order
// (a signed zero may differ, which m_s - max m does not see), so the weights, and the output,
// keep their bits.
__device__ __forceinline__ float2 load_partial(const float2* p) {
  float2 v;
  asm volatile("ld.global.cg.v2.f32 {%0, %1}, [%2];" : "=f"(v.x), "=f"(v.y) : "l"(p));
  return v;
}

// Partial outputs s0 .. s0 + kBatch - 1 (those below `splits`) of this thread's column pair.
template <int kBatch>
__device__ __forceinline__ void load_partials(const float2* col, int pairs, int s0, int splits, float2 (&v)[kBatch]) {
#pragma unroll
  for (int j = 0; j < kBatch; ++j)
    if (s0 + j < splits) v[j] = load_partial(col + static_cast<std::size_t>(s0 + j) * pairs);
}

// The merge weights of row bh, the same in every merge CTA of the row: w_s[s] = exp(m_s - max
// m) (0 for an empty split) and l_s[s] (0 for an empty split) in shared memory, and the
// returned 1 / sum_s w_s l_s. Every thread of the CTA calls it (two barriers inside).
template <bool kBase2>
__device__ __forceinline__ float merge_weights(const float* __restrict__ m_part, const float* __restrict__ l_part,
                                               std::size_t bh, int splits, float* w_s, float* l_s, float* warp_max) {
  float m_max = -INFINITY;
  for (int s = threadIdx.x; s < splits; s += blockDim.x) {
    const float m = m_part[bh * splits + s], l = l_part[bh * splits + s];
    w_s[s] = m;
    l_s[s] = l;
    if (l > 0.0f) m_max = fmaxf(m_max, m);
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) m_max = fmaxf(m_max, __shfl_xor_sync(0xffffffffu, m_max, o));
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = m_max;
  __syncthreads();  // the maxima, m and l of every split visible
  m_max = warp_max[0];
#pragma unroll
  for (int w = 1; w < kMergeColumns / 32; ++w) m_max = fmaxf(m_max, warp_max[w]);
  // Each thread turns its own splits' maxima into weights: no other thread reads them before
  // the barrier below.
  for (int s = threadIdx.x; s < splits; s += blockDim.x) {
    const bool live = l_s[s] > 0.0f;
    w_s[s] = live ? (kBase2 ? exp2f(w_s[s] - m_max) : expf(w_s[s] - m_max)) : 0.0f;
    l_s[s] = live ? l_s[s] : 0.0f;
  }
  __syncthreads();
  float denom = 0.0f;
#pragma unroll 8
  for (int s = 0; s < splits; ++s) denom += w_s[s] * l_s[s];
  return denom > 0.0f ? 1.0f / denom : 0.0f;
}

template <bool kBase2, int kBatch>
__global__ void __launch_bounds__(kMergeColumns)
    mla_decode_merge_kernel(const float* __restrict__ o_part, const float* __restrict__ m_part,
                            const float* __restrict__ l_part, int kv_lora, int splits,
                            __nv_bfloat16* __restrict__ o_lat) {
  __shared__ float w_s[kMaxSplits];
  __shared__ float l_s[kMaxSplits];
  __shared__ float warp_max[kMergeColumns / 32];
  const std::size_t bh = blockIdx.x;
  const int pairs = kv_lora / 2;
  const int cp = static_cast<int>(blockIdx.y) * kMergeColumns + static_cast<int>(threadIdx.x);
  const bool has_column = cp < pairs;
  const float2* col = reinterpret_cast<const float2*>(o_part + bh * splits * kv_lora) + cp;
  float2 v[kBatch];
  if (has_column) load_partials(col, pairs, 0, splits, v);
  const float inv = merge_weights<kBase2>(m_part, l_part, bh, splits, w_s, l_s, warp_max);
  if (!has_column) return;

  float2 sum = make_float2(0.0f, 0.0f);
  for (int s0 = 0; s0 < splits; s0 += kBatch) {
    if (s0 > 0) load_partials(col, pairs, s0, splits, v);
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      if (s0 + j < splits) {
        const float w = w_s[s0 + j];
        sum.x = fmaf(w, w != 0.0f ? v[j].x : 0.0f, sum.x);
        sum.y = fmaf(w, w != 0.0f ? v[j].y : 0.0f, sum.y);
      }
    }
  }
  reinterpret_cast<__nv_bfloat162*>(o_lat + bh * kv_lora)[cp] = __floats2bfloat162_rn(sum.x * inv, sum.y * inv);
}

// The merge of at most kMergeFewSplits splits (large batches): the same arithmetic per output
// (the same weights, fmaf in split order, one rounding), with every split's partials of
// kMergeFewVecs float4s per thread in flight at once; a CTA covers kMergeColumns * 4 *
// kMergeFewVecs = 512 columns, a whole row at kv_lora 512, so a quarter of the CTAs of the
// kernel above, each thread with twice the loads and four times the bytes in flight (before: batch 64 x 8K at 32 heads,
// 2 splits, 8192 CTAs of 64 threads, 8.1 us at 1.05 TB/s on an H200, Nsight Compute).
__device__ __forceinline__ float4 load_partial4(const float4* p) {
  float4 v;
  asm volatile("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
  return v;
}

template <bool kBase2>
__global__ void __launch_bounds__(kMergeColumns)
    mla_decode_merge_few_kernel(const float* __restrict__ o_part, const float* __restrict__ m_part,
                                const float* __restrict__ l_part, int kv_lora, int splits,
                                __nv_bfloat16* __restrict__ o_lat) {
  __shared__ float w_s[kMergeFewSplits];
  __shared__ float l_s[kMergeFewSplits];
  __shared__ float warp_max[kMergeColumns / 32];
  const std::size_t bh = blockIdx.x;
  const int quads = kv_lora / 4;
  const float4* row = reinterpret_cast<const float4*>(o_part + bh * splits * kv_lora);
  int q[kMergeFewVecs];
  float4 v[kMergeFewSplits][kMergeFewVecs];
#pragma unroll
  for (int k = 0; k < kMergeFewVecs; ++k)
    q[k] = (static_cast<int>(blockIdx.y) * kMergeFewVecs + k) * kMergeColumns + static_cast<int>(threadIdx.x);
#pragma unroll
  for (int s = 0; s < kMergeFewSplits; ++s)
#pragma unroll
    for (int k = 0; k < kMergeFewVecs; ++k)
      if (s < splits && q[k] < quads) v[s][k] = load_partial4(row + static_cast<std::size_t>(s) * quads + q[k]);
  const float inv = merge_weights<kBase2>(m_part, l_part, bh, splits, w_s, l_s, warp_max);
#pragma unroll
  for (int k = 0; k < kMergeFewVecs; ++k) {
    if (q[k] >= quads) continue;
    float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int s = 0; s < kMergeFewSplits; ++s) {
      if (s < splits) {
        const float w = w_s[s];
        sum.x = fmaf(w, w != 0.0f ? v[s][k].x : 0.0f, sum.x);
        sum.y = fmaf(w, w != 0.0f ? v[s][k].y : 0.0f, sum.y);
        sum.z = fmaf(w, w != 0.0f ? v[s][k].z : 0.0f, sum.z);
        sum.w = fmaf(w, w != 0.0f ? v[s][k].w : 0.0f, sum.w);
      }
    }
    __nv_bfloat162* dst = reinterpret_cast<__nv_bfloat162*>(o_lat + bh * kv_lora) + 2 * q[k];
    dst[0] = __floats2bfloat162_rn(sum.x * inv, sum.y * inv);
    dst[1] = __floats2bfloat162_rn(sum.z * inv, sum.w * inv);
  }
}

// The split kernel of each configuration, in kernels::kMlaDecodeMmaConfigs' order.
using SplitKernel = void (*)(const __nv_bfloat16*, const __nv_bfloat16*, const std::int32_t*, int, int, int,
                             std::int64_t, int, std::int64_t, float, int, int, float*, float*, float*);
template <int kConfig>
constexpr SplitKernel split_kernel_of() {
  constexpr kernels::MlaDecodeMmaConfig c = kernels::kMlaDecodeMmaConfigs[kConfig];
  static_assert(MmaConfig<c.row_tiles, c.stages, c.slices>::kStaticSmem ==
                    static_cast<std::size_t>(kernels::mla_decode_mma_static_smem_bytes(c)),
                "the configurations' sizes (tpb/kernels/mla_decode_split.h) count the kernel's static arrays");
  return mla_decode_split_kernel<c.row_tiles, c.stages, c.slices>;
}
const SplitKernel kSplitKernels[] = {split_kernel_of<0>(), split_kernel_of<1>(), split_kernel_of<2>(),
                                     split_kernel_of<3>()};
static_assert(std::size(kSplitKernels) == kernels::kMlaDecodeMmaConfigCount, "one kernel per configuration");

// The configuration mla_decode_attention takes here: the first within the registry's budget
// (the device's maximum; 99 KiB under TPB_KERNELS=portable, as on an RTX PRO 6000).
int picked_config(const MlaDecodeShape& s) {
  const std::int64_t budget = kernels::smem_budget_bytes(device_smem_optin_bytes(), kernels::kernels_setting());
  const int config = kernels::mla_decode_mma_config_for(s.heads, s.kv_lora, s.rope, budget);
  TPB_CHECK(config >= 0, "mla_decode: no configuration of the mma.sync kernel fits " << budget
                             << " bytes of shared memory per block at kv_lora " << s.kv_lora << " + rope " << s.rope
                             << " (the smallest needs "
                             << kernels::mla_decode_mma_smem_bytes(
                                    kernels::kMlaDecodeMmaConfigs[kernels::kMlaDecodeMmaConfigCount - 1], s.heads,
                                    s.kv_lora, s.rope)
                             << ")");
  return config;
}

// Whether configuration `config` can launch on this device at this shape (forced by a test or
// a sweep it may be larger than the budget, never than the device's maximum).
bool config_fits_device(int config, const MlaDecodeShape& s) {
  return kernels::mla_decode_mma_smem_bytes(kernels::kMlaDecodeMmaConfigs[config], s.heads, s.kv_lora, s.rope) <=
         device_smem_optin_bytes();
}

// Above the default 48 KiB at row 576; a host-side attribute, legal under stream capture.
void set_smem_attribute(const Geometry& g) {
  TPB_CUDA_CHECK(cudaFuncSetAttribute(kSplitKernels[g.config], cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(g.smem)));
}

int device_sm_count() {
  int dev = 0, sms = 0;
  TPB_CUDA_CHECK(cudaGetDevice(&dev));
  TPB_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  return std::max(sms, 1);
}

// Resident split CTAs on the whole device for this geometry: the first configuration's wave size.
std::int64_t resident_ctas(const Geometry& g) {
  int per_sm = 0;
  set_smem_attribute(g);
  TPB_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kSplitKernels[g.config], g.threads, g.smem));
  TPB_CHECK(per_sm >= 1, "mla_decode: the split kernel does not fit on an SM (" << g.smem << " bytes of shared memory)");
  return static_cast<std::int64_t>(per_sm) * device_sm_count();
}

// The merge kernel for the split kernel's domain of maxima (base 2: the wgmma kernels').
template <int kBatch>
auto merge_kernel(bool base2) {
  return base2 ? mla_decode_merge_kernel<true, kBatch> : mla_decode_merge_kernel<false, kBatch>;
}

// The merge for a plan's split count: at most kMergeFewSplits the few-splits kernel, above the
// tiers of kMergeBatch*; and the latent columns one CTA of it covers.
auto merge_kernel_for(std::int64_t splits, bool base2) {
  if (splits <= kMergeFewSplits) return base2 ? mla_decode_merge_few_kernel<true> : mla_decode_merge_few_kernel<false>;
  return splits > 16 ? merge_kernel<kMergeBatchManySplits>(base2) : merge_kernel<kMergeBatchSomeSplits>(base2);
}
int merge_columns_per_cta(std::int64_t splits) {
  return splits <= kMergeFewSplits ? kMergeColumns * 4 * kMergeFewVecs : kMergeColumns * 2;
}

constexpr int kVariantMmaSync = 0;
constexpr int kVariantWgmma = 1;
constexpr int kVariantWgmmaHeadsN = 2;
constexpr const char* kVariantNames[] = {"mma_sync", "wgmma", "wgmma_heads_n"};

// How one variant cuts the work: head groups per (split, sequence) and the split plan.
struct Plan {
  int variant = kVariantMmaSync;
  int config = 0;  // mma.sync: its configuration (kernels::kMlaDecodeMmaConfigs)
  std::int64_t groups = 1;
  kernels::MlaDecodeSplit split;
};

// tiles_per_split > 0: each split's key range fixed at that many tiles (tuning sweeps).
// The first mma.sync configuration plans at its occupancy, as it always has; the smaller ones
// at one CTA per SM, within the memory planner's bound (mla_decode_split_small_config).
Plan make_plan(int variant, const MlaDecodeShape& s, std::int64_t tiles_per_split, int config) {
  Plan p;
  p.variant = variant;
  p.config = config;
  const bool wgmma = variant != kVariantMmaSync;  // both wgmma kernels: one group up to 64 heads
  p.groups = wgmma ? kernels::mla_decode_head_groups(s.heads, true)
                   : kernels::mla_decode_mma_head_groups(s.heads, kernels::kMlaDecodeMmaConfigs[config].row_tiles);
  if (tiles_per_split > 0) {
    p.split.chunk = tiles_per_split * kernels::kMlaDecodeTileKeys;
    p.split.splits = kernels::mla_decode_splits_of(s.max_len, tiles_per_split);
    TPB_CHECK(p.split.splits <= kMaxSplits, "mla_decode: " << tiles_per_split << " tiles per split make "
                                                             << p.split.splits << " splits, above " << kMaxSplits);
    return p;
  }
  if (!wgmma && config > 0) {
    p.split = kernels::mla_decode_split_small_config(s.batch, s.heads, s.kv_lora, s.rope, s.max_len,
                                                     kernels::kMlaDecodeMmaConfigs[config], device_sm_count());
    return p;
  }
  const std::int64_t slots = variant == kVariantWgmmaHeadsN ? detail::mla_decode_wgmma_heads_n_resident_ctas(s.heads)
                             : wgmma                         ? detail::mla_decode_wgmma_resident_ctas()
                                                             : resident_ctas(make_geometry(s, 0));
  p.split = kernels::mla_decode_split_for(s.batch, s.heads, s.max_len, wgmma, slots);
  return p;
}

// The plan of a call: the shape validated and the variant checked against it first. config < 0:
// the mma.sync kernel in the configuration the budget picks; else that one (a test, a sweep).
Plan checked_plan(int variant, const MlaDecodeShape& shape, std::int64_t tiles_per_split, int config) {
  validate(shape);
  TPB_CHECK(variant >= 0 && variant < tuning::mla_decode_variants(), "mla_decode: no variant " << variant);
  TPB_CHECK(config < kernels::kMlaDecodeMmaConfigCount, "mla_decode: no configuration " << config);
  TPB_CHECK(config < 0 || variant == kVariantMmaSync,
            "mla_decode: a configuration is the mma.sync kernel's, not " << kVariantNames[variant] << "'s");
  TPB_CHECK(tuning::mla_decode_variant_supports(variant, shape),
            "mla_decode: variant " << kVariantNames[variant] << " does not take " << shape.heads << " heads at kv_lora "
                                   << shape.kv_lora << " + rope " << shape.rope
                                   << " on this device (its path: "
                                   << kernels::kernel_path(kernels::KernelOp::mla_decode).text()
                                   << "; the wgmma kernels take kv_lora 512 + rope 64, wgmma_heads_n at most "
                                   << kernels::kMlaDecodeHeadsNMax << " heads)");
  if (variant != kVariantMmaSync) return make_plan(variant, shape, tiles_per_split, 0);
  if (config < 0) return make_plan(variant, shape, tiles_per_split, picked_config(shape));
  TPB_CHECK(config_fits_device(config, shape),
            "mla_decode: configuration " << kernels::kMlaDecodeMmaConfigs[config].name << " needs "
                                         << kernels::mla_decode_mma_smem_bytes(kernels::kMlaDecodeMmaConfigs[config],
                                                                               shape.heads, shape.kv_lora, shape.rope)
                                         << " bytes of shared memory per block, the device allows "
                                         << device_smem_optin_bytes());
  return make_plan(variant, shape, tiles_per_split, config);
}

void launch(const Plan& p, const __nv_bfloat16* q, const __nv_bfloat16* cache, const std::int32_t* seq_lens,
            const MlaDecodeShape& shape, float scale, void* workspace, __nv_bfloat16* o_lat, cudaStream_t stream) {
  TPB_CHECK(reinterpret_cast<std::uintptr_t>(q) % 16 == 0 && reinterpret_cast<std::uintptr_t>(cache) % 16 == 0 &&
                reinterpret_cast<std::uintptr_t>(o_lat) % 4 == 0 && reinterpret_cast<std::uintptr_t>(workspace) % 16 == 0,
            "mla_decode: q and cache must be 16-byte aligned, o_lat 4-byte, workspace 16-byte");
  const Workspace w = carve(workspace, shape, p.split);
  if (p.variant != kVariantMmaSync) {
    detail::MlaDecodeWgmmaLaunch l;
    l.q = q;
    l.cache = cache;
    l.seq_lens = seq_lens;
    l.batch = shape.batch;
    l.heads = shape.heads;
    l.max_len = shape.max_len;
    l.groups = p.groups;
    l.splits = p.split.splits;
    l.chunk = p.split.chunk;
    l.scale = scale;
    l.o_part = w.o;
    l.m_part = w.m;
    l.l_part = w.l;
    if (p.variant == kVariantWgmma)
      detail::launch_mla_decode_split_wgmma(l, stream);
    else
      detail::launch_mla_decode_split_wgmma_heads_n(l, stream);
  } else {
    const Geometry g = make_geometry(shape, p.config);
    // Set here as well as in the plan's occupancy query: a plan with fixed split sizes
    // (tiles_per_split), or of a smaller configuration, makes none.
    set_smem_attribute(g);
    // Head groups vary fastest: the groups of one split run side by side and the second read of
    // the same cache rows comes from L2.
    const dim3 grid(static_cast<unsigned>(g.groups), static_cast<unsigned>(p.split.splits),
                    static_cast<unsigned>(shape.batch));
    kSplitKernels[g.config]<<<grid, g.threads, g.smem, stream>>>(
        q, cache, seq_lens, static_cast<int>(shape.heads), static_cast<int>(shape.kv_lora),
        static_cast<int>(shape.rope), shape.max_len, static_cast<int>(p.split.splits), p.split.chunk, scale,
        g.row_tiles, g.stride, w.o, w.m, w.l);
    TPB_CUDA_CHECK_LAUNCH();
  }
  const int columns = merge_columns_per_cta(p.split.splits);
  const dim3 merge_grid(static_cast<unsigned>(shape.batch * shape.heads),
                        static_cast<unsigned>((shape.kv_lora + columns - 1) / columns));
  auto merge = merge_kernel_for(p.split.splits, p.variant != kVariantMmaSync);
  merge<<<merge_grid, kMergeColumns, 0, stream>>>(w.o, w.m, w.l, static_cast<int>(shape.kv_lora),
                                                  static_cast<int>(p.split.splits), o_lat);
  TPB_CUDA_CHECK_LAUNCH();
}

}  // namespace

namespace tuning {

int mla_decode_variants() { return 3; }

const char* mla_decode_variant_name(int variant) {
  TPB_CHECK(variant >= 0 && variant < mla_decode_variants(), "mla_decode: no variant " << variant);
  return kVariantNames[variant];
}

// The wgmma kernels only where the kernel-path registry gives this op wgmma (tpb/kernels/
// kernel_paths.h: a compute capability 9.0 device, sm_90a code in the build, TPB_KERNELS not
// portable; other architectures' images of these kernels are traps), and at the row they take.
bool mla_decode_variant_supports(int variant, const MlaDecodeShape& shape) {
  if (variant == kVariantMmaSync) return true;
  const bool row = kernels::kernel_path(kernels::KernelOp::mla_decode).wgmma() &&
                   kernels::mla_decode_wgmma_shape(shape.kv_lora, shape.rope);
  if (variant == kVariantWgmma) return row;
  return variant == kVariantWgmmaHeadsN && row && shape.heads <= kernels::kMlaDecodeHeadsNMax;
}

// Up to 32 heads the heads-as-N kernel (no padded MMA rows), above them the 64-head one.
int mla_decode_default_variant(const MlaDecodeShape& shape) {
  if (mla_decode_variant_supports(kVariantWgmmaHeadsN, shape)) return kVariantWgmmaHeadsN;
  return mla_decode_variant_supports(kVariantWgmma, shape) ? kVariantWgmma : kVariantMmaSync;
}

std::size_t mla_decode_variant_workspace_bytes(int variant, const MlaDecodeShape& shape,
                                               std::int64_t tiles_per_split, int mma_config) {
  return workspace_bytes(shape, checked_plan(variant, shape, tiles_per_split, mma_config).split);
}

std::int64_t mla_decode_variant_splits(int variant, const MlaDecodeShape& shape, std::int64_t tiles_per_split,
                                       int mma_config) {
  return checked_plan(variant, shape, tiles_per_split, mma_config).split.splits;
}

void mla_decode_variant(int variant, const __nv_bfloat16* q, const __nv_bfloat16* cache, const std::int32_t* seq_lens,
                        const MlaDecodeShape& shape, float scale, void* workspace, __nv_bfloat16* o_lat,
                        cudaStream_t stream, std::int64_t tiles_per_split, int mma_config) {
  launch(checked_plan(variant, shape, tiles_per_split, mma_config), q, cache, seq_lens, shape, scale, workspace, o_lat,
         stream);
}

std::int64_t mla_decode_smem_budget_bytes() {
  return kernels::smem_budget_bytes(device_smem_optin_bytes(), kernels::kernels_setting());
}

int mla_decode_mma_config(const MlaDecodeShape& shape) {
  validate(shape);
  return picked_config(shape);
}

bool mla_decode_mma_config_runs(int mma_config, const MlaDecodeShape& shape) {
  validate(shape);
  TPB_CHECK(mma_config >= 0 && mma_config < kernels::kMlaDecodeMmaConfigCount,
            "mla_decode: no configuration " << mma_config);
  return config_fits_device(mma_config, shape);
}

}  // namespace tuning

std::size_t mla_decode_workspace_bytes(const MlaDecodeShape& shape) {
  return tuning::mla_decode_variant_workspace_bytes(tuning::mla_decode_default_variant(shape), shape);
}

void mla_decode_attention(const __nv_bfloat16* q, const __nv_bfloat16* cache, const std::int32_t* seq_lens,
                          const MlaDecodeShape& shape, float scale, void* workspace,
                          std::size_t workspace_capacity_bytes, __nv_bfloat16* o_lat, cudaStream_t stream) {
  const Plan p = checked_plan(tuning::mla_decode_default_variant(shape), shape, 0, -1);
  const std::size_t need = workspace_bytes(shape, p.split);
  TPB_CHECK(workspace_capacity_bytes >= need,
            "mla_decode: the " << kVariantNames[p.variant] << " kernel's plan (" << p.split.splits << " splits) needs "
                               << need << " bytes of workspace, the buffer holds " << workspace_capacity_bytes);
  launch(p, q, cache, seq_lens, shape, scale, workspace, o_lat, stream);
}

void mla_decode_attention_ref(const std::uint16_t* q_bf16, const std::uint16_t* cache_bf16,
                              const std::int32_t* seq_lens, const MlaDecodeShape& shape, float scale, float* o_lat) {
  validate(shape);
  const std::int64_t row = shape.kv_lora + shape.rope;
  std::vector<float> score;
  for (std::int64_t b = 0; b < shape.batch; ++b) {
    const std::int64_t n = seq_lens[b];
    TPB_CHECK(n >= 1 && n <= shape.max_len, "mla_decode_attention_ref: seq_lens[" << b << "] = " << n);
    const std::uint16_t* cache_b = cache_bf16 + b * shape.max_len * row;
    score.assign(static_cast<std::size_t>(n), 0.0f);
    for (std::int64_t h = 0; h < shape.heads; ++h) {
      const std::uint16_t* qh = q_bf16 + (b * shape.heads + h) * row;
      float m = -INFINITY;
      for (std::int64_t j = 0; j < n; ++j) {
        float dot = 0.0f;
        for (std::int64_t d = 0; d < row; ++d) dot += bf16_to_float(qh[d]) * bf16_to_float(cache_b[j * row + d]);
        score[j] = dot * scale;
        m = std::max(m, score[j]);
      }
      float sum = 0.0f;
      for (std::int64_t j = 0; j < n; ++j) {
        score[j] = std::exp(score[j] - m);
        sum += score[j];
      }
      float* out = o_lat + (b * shape.heads + h) * shape.kv_lora;
      std::fill(out, out + shape.kv_lora, 0.0f);
      for (std::int64_t j = 0; j < n; ++j) {
        const float p = score[j] / sum;
        for (std::int64_t d = 0; d < shape.kv_lora; ++d) out[d] += p * bf16_to_float(cache_b[j * row + d]);
      }
    }
  }
}

}  // namespace tpb::gpu
