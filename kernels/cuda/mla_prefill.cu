// Causal MLA prefill attention in the plain form (tpb/kernels/gpu/mla_prefill.h), two kernels:
//
// Tensor cores (mma.sync m16n8k16, bf16 in, fp32 accumulate), flash-attention-2 style, where
// nope, rope and v_dim are multiples of 8 (16-byte rows for cp.async; every published model
// and the test presets). One CTA of 8 warps per (128-query block, head, sequence); warp w owns
// queries 16w..16w+15 and holds their Q fragments in registers for the whole key loop. Keys
// stream through shared memory 64 at a time (K = [k_nope of head h | k_rot], V), cp.async
// double-buffered, in increasing order. Per tile a warp computes S = Q K^T (16 x 64) over the
// concatenated head dim zero-padded to a multiple of 16, scales it into log2 units, masks the
// causal diagonal (only on the tiles that cross it; tiles wholly after the warp's last query
// are skipped), updates the running row max in registers (quad shuffles), turns S into P in
// registers (the accumulator layout of S is the A-operand layout of P·V, mma_sync.cuh) and
// adds P·V into 16 x v_dim fp32 accumulators. One division by the row sum at the end.
// Query blocks run latest first: the causal blocks with the most keys start in the first wave.
//
// Precision of P: P enters the P·V MMA as bf16, rounded to nearest (8 significant bits): each
// weight carries a relative error |e_j| <= 2^-8. The row sum l adds the same rounded values,
// so the output is still a convex combination of the value rows, with weights
// w_j (1 + e_j) / (1 + sum_k w_k e_k): an error of sum_j w_j e_j (v_j - out) to first order, at
// most 2^-8 sum_j w_j |v_j - out|, and for independent roundings a few times 2^-8 times the
// root of sum_j (w_j (v_j - out))^2 (the test's budget, tests/gpu/mla_prefill_test.cpp): in rms
// about as large as the bf16 rounding of the output itself (rel-L2 ~2e-3 against ~1e-3 for
// the CUDA-core kernel in a lane-level emulation). Through a whole model that can still move a
// near-tie expert choice (see kEngineTensorCoreVariant below), so the engine takes the split-P
// variant (mla_prefill_tuning.h): P as hi + lo in two MMAs, |e_j| <= 2^-16, at 1.4 x the MMA
// work (Kimi's widths: 96 score + 64 P·V MMAs per warp and tile, + 64).
//
// CUDA cores (fp32 math), any even head dims (the engine pads odd ones to even,
// reference_engine/memory/attention_widths.h): one CTA per (32-query block, head, sequence);
// warp w owns queries 4w..4w+3 of the block. Keys go through shared memory 32 at a time, in
// increasing order: lane j scores key j of the tile against the warp's 4 queries, the warp
// updates each query's running max and sum (online softmax), then every lane accumulates its
// value columns over the tile's keys with the probabilities broadcast by shuffle.
//
// Both: fixed order throughout, no atomics, the same bits on every call.
#include "tpb/kernels/gpu/device_limits.h"
#include "tpb/kernels/gpu/mla_prefill.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <iterator>

#include "tpb/check.h"
#include "tpb/cuda_check.h"
#include "tpb/kernels/gpu/mla_prefill_tuning.h"
#include "tpb/kernels/kernel_paths.h"
#include "tpb/kernels/mla_widths.h"
#include "cuda/bf16_vectors.cuh"
#include "cuda/mla_prefill_wgmma.h"
#include "cuda/mma_sync.cuh"

namespace tpb::gpu {

namespace {

using detail::aligned16;

// ---- CUDA-core kernel ----

constexpr int kThreads = 256;
constexpr int kQueriesPerWarp = 4;
constexpr int kBlockQ = (kThreads / 32) * kQueriesPerWarp;  // 32
constexpr int kBlockK = 32;                                   // one key per lane
constexpr int kMaxQk = static_cast<int>(kernels::kMlaPrefillMaxQk);
constexpr int kMaxV = static_cast<int>(kernels::kMlaPrefillMaxV);  // two column pairs per lane
constexpr int kVPairsPerLane = kMaxV / 64;

__device__ __forceinline__ float2 bf2_to_f2(std::uint32_t bits) {
  return make_float2(__uint_as_float(bits << 16), __uint_as_float(bits & 0xffff0000u));
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o >= 1; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Butterfly: partners add the same two operands, so all lanes end with the same bits.
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o >= 1; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Row stride of the key tile in 32-bit words: odd, so the 32 lanes (one key row each)
// reading the same column hit 32 different banks.
__host__ __device__ constexpr int key_stride_words(int qk) { return (qk / 2) | 1; }

__global__ void __launch_bounds__(kThreads)
    mla_prefill_kernel(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k_nope,
                       const __nv_bfloat16* __restrict__ k_rot, const __nv_bfloat16* __restrict__ v, int q_len,
                       int past, int heads, int nope, int rope, int v_dim, float scale,
                       __nv_bfloat16* __restrict__ out) {
  const int i0 = blockIdx.x * kBlockQ;
  const int h = blockIdx.y;
  const int b = blockIdx.z;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int qk = nope + rope, qk2 = qk / 2, v2 = v_dim / 2;
  const int ks = key_stride_words(qk);
  const int kv_len = past + q_len;

  extern __shared__ __align__(16) unsigned char smem[];
  float* q_s = reinterpret_cast<float*>(smem);                          // [kBlockQ][qk] fp32
  std::uint32_t* k_s = reinterpret_cast<std::uint32_t*>(q_s + kBlockQ * qk);  // [kBlockK][ks] bf16 pairs
  std::uint32_t* v_s = k_s + kBlockK * ks;                              // [kBlockK][v2] bf16 pairs

  // Queries past q_len are zeros: computed like the others (over valid keys only), never stored.
  for (int idx = tid; idx < kBlockQ * qk2; idx += kThreads) {
    const int qi = idx / qk2, dp = idx - qi * qk2;
    const int i = i0 + qi;
    float2 val = make_float2(0.0f, 0.0f);
    if (i < q_len) {
      const std::uint32_t* row = reinterpret_cast<const std::uint32_t*>(
          q + ((static_cast<std::size_t>(b) * q_len + i) * heads + h) * qk);
      val = bf2_to_f2(row[dp]);
    }
    reinterpret_cast<float2*>(q_s)[idx] = val;
  }

  int pos[kQueriesPerWarp];  // absolute position of each of the warp's queries
  float m[kQueriesPerWarp], l[kQueriesPerWarp];
  float2 acc[kQueriesPerWarp][kVPairsPerLane];
#pragma unroll
  for (int r = 0; r < kQueriesPerWarp; ++r) {
    pos[r] = past + i0 + warp * kQueriesPerWarp + r;
    m[r] = -INFINITY;
    l[r] = 0.0f;
#pragma unroll
    for (int c = 0; c < kVPairsPerLane; ++c) acc[r][c] = make_float2(0.0f, 0.0f);
  }

  // The block's last query sees keys up to past + i0 + kBlockQ - 1.
  const int n_keys = min(kv_len, past + i0 + kBlockQ);
  for (int kt = 0; kt < n_keys; kt += kBlockK) {
    __syncthreads();  // previous tile consumed (and q_s written, first time)
    // Rows past kv_len are zeros: masked scores meet no NaN garbage.
    for (int idx = tid; idx < kBlockK * qk2; idx += kThreads) {
      const int jj = idx / qk2, dp = idx - jj * qk2;
      const int j = kt + jj;
      std::uint32_t val = 0;
      if (j < kv_len) {
        const int d = 2 * dp;  // nope is even: a pair never straddles the nope | rope boundary
        if (d < nope)
          val = *reinterpret_cast<const std::uint32_t*>(
              k_nope + ((static_cast<std::size_t>(b) * kv_len + j) * heads + h) * nope + d);
        else
          val = *reinterpret_cast<const std::uint32_t*>(
              k_rot + (static_cast<std::size_t>(b) * kv_len + j) * rope + (d - nope));
      }
      k_s[jj * ks + dp] = val;
    }
    for (int idx = tid; idx < kBlockK * v2; idx += kThreads) {
      const int jj = idx / v2, dp = idx - jj * v2;
      const int j = kt + jj;
      std::uint32_t val = 0;
      if (j < kv_len)
        val = *reinterpret_cast<const std::uint32_t*>(
            v + ((static_cast<std::size_t>(b) * kv_len + j) * heads + h) * v_dim + 2 * dp);
      v_s[jj * v2 + dp] = val;
    }
    __syncthreads();

    float s[kQueriesPerWarp];
#pragma unroll
    for (int r = 0; r < kQueriesPerWarp; ++r) s[r] = 0.0f;
    const std::uint32_t* krow = k_s + lane * ks;
    const float2* qw = reinterpret_cast<const float2*>(q_s + warp * kQueriesPerWarp * qk);
    for (int dp = 0; dp < qk2; ++dp) {
      const float2 kk = bf2_to_f2(krow[dp]);
#pragma unroll
      for (int r = 0; r < kQueriesPerWarp; ++r) {
        const float2 qq = qw[r * qk2 + dp];
        s[r] = fmaf(qq.y, kk.y, fmaf(qq.x, kk.x, s[r]));
      }
    }
    const int j = kt + lane;
    float p[kQueriesPerWarp];
    float corr[kQueriesPerWarp];
#pragma unroll
    for (int r = 0; r < kQueriesPerWarp; ++r) {
      const float sr = (j < kv_len && j <= pos[r]) ? s[r] * scale : -INFINITY;
      // Tile 0 holds key 0, visible to every query: m is finite from the first tile on.
      const float m_new = fmaxf(m[r], warp_max(sr));
      corr[r] = expf(m[r] - m_new);
      p[r] = expf(sr - m_new);
      l[r] = l[r] * corr[r] + warp_sum(p[r]);
      m[r] = m_new;
    }
#pragma unroll
    for (int r = 0; r < kQueriesPerWarp; ++r)
#pragma unroll
      for (int c = 0; c < kVPairsPerLane; ++c) {
        acc[r][c].x *= corr[r];
        acc[r][c].y *= corr[r];
      }
    const int kmax = min(kBlockK, n_keys - kt);  // the zero rows after it carry p = 0
    for (int jj = 0; jj < kmax; ++jj) {
      float pj[kQueriesPerWarp];
#pragma unroll
      for (int r = 0; r < kQueriesPerWarp; ++r) pj[r] = __shfl_sync(0xffffffffu, p[r], jj);
#pragma unroll
      for (int c = 0; c < kVPairsPerLane; ++c) {
        const int pp = lane + 32 * c;
        if (pp < v2) {
          const float2 vv = bf2_to_f2(v_s[jj * v2 + pp]);
#pragma unroll
          for (int r = 0; r < kQueriesPerWarp; ++r) {
            acc[r][c].x = fmaf(pj[r], vv.x, acc[r][c].x);
            acc[r][c].y = fmaf(pj[r], vv.y, acc[r][c].y);
          }
        }
      }
    }
  }

#pragma unroll
  for (int r = 0; r < kQueriesPerWarp; ++r) {
    const int i = i0 + warp * kQueriesPerWarp + r;
    if (i >= q_len) continue;
    const float inv = 1.0f / l[r];
    __nv_bfloat162* orow =
        reinterpret_cast<__nv_bfloat162*>(out + ((static_cast<std::size_t>(b) * q_len + i) * heads + h) * v_dim);
#pragma unroll
    for (int c = 0; c < kVPairsPerLane; ++c) {
      const int pp = lane + 32 * c;
      if (pp < v2) orow[pp] = __floats2bfloat162_rn(acc[r][c].x * inv, acc[r][c].y * inv);
    }
  }
}


// ---- tensor-core kernel ----

// Shared-memory configurations, in the order the launcher tries them: the first whose block
// fits the device's budget (tpb/kernels/kernel_paths.h, smem_budget_bytes) runs. The first is
// the kernel as tuned on an H200, and runs wherever it fits (every 9.0 and 10.x device, 227 KiB
// per block; 8.0's 163 KiB below nope + rope 256); the others serve the devices that allow less
// (8.6, 8.9, 12.x: 99 KiB). warps: 16 query rows each (the CTA's query block); block_k: keys
// per pipeline stage. Every configuration keeps the numerical contract (fp32 accumulation, P as
// the variant says, keys in increasing order, deterministic); a key tile of another size puts
// the per-tile rescaling elsewhere, so the bits differ from the first's.
struct TcConfig {
  const char* name;
  int warps;
  int block_k;
};
constexpr TcConfig kTcConfigs[] = {
    {"q128_k64", 8, 64},  // 134 KiB at Kimi-K2.5's widths, 166 KiB at nope + rope 256
    {"q128_k32", 8, 32},  // 92 KiB at Kimi's, 116 KiB at 256
    {"q64_k32", 4, 32},   // 67 KiB at Kimi's, 83 KiB at 256: every width within 99 KiB
};
constexpr int kTcConfigCount = static_cast<int>(std::size(kTcConfigs));
constexpr int kTcStages = 2;              // cp.async pipeline depth
constexpr int kTcMaxQk = kMaxQk;          // padded nope + rope
constexpr int kTcMaxV = kMaxV;
constexpr int kTcMaxVGroups = kTcMaxV / 16;  // 16-column V groups (one ldmatrix.x4.trans, two MMAs)
// Kimi-K2.5's (and DeepSeek-V3's) widths, compiled with constant loop bounds: nope 128 + rope 64
// (12 score K steps), v_dim 128 (8 V groups). Other widths take the guarded kernel.
constexpr int kKimiNope = 128, kKimiRope = 64, kKimiV = 128;
constexpr int kKimiQkSteps = (kKimiNope + kKimiRope) / 16;
constexpr int kKimiVGroups = kKimiV / 16;
// At those widths each thread copies the same columns of the same rows of every key tile:
// K as threads / 8 rows x 8 column lanes of 16-byte vectors (columns c, c + 8 of k_nope and c of
// k_rot; 256 threads and 64 keys: rows r, r + 32), V as threads / 16 rows x 16 column lanes
// (rows r, r + 16, r + 32, r + 48). One pointer per source then moves by a tile per step: no
// per-vector index arithmetic in the loop.
static_assert(kKimiNope / 8 == 16 && kKimiRope / 8 == 8 && kKimiV / 8 == 16,
              "the exact-width copy mapping covers rows of 16 + 8 K vectors and 16 V vectors");

using detail::round_up;

using detail::exp2_ftz;

// Shared-memory geometry of one shape in one configuration. Rows are zero-padded to 16 columns (the MMA's K step
// for S, two 8-column tiles for P·V), plus 8 columns so that consecutive rows start an odd
// number of 16-byte units apart: the 8 rows one ldmatrix phase reads hit 8 different 16-byte
// bank groups.
struct TcGeometry {
  int config = 0;     // index into kTcConfigs
  int threads = 0;    // 32 per warp
  int block_q = 0;    // query rows per CTA, 16 per warp
  int qk_pad = 0;     // nope + rope rounded up to 16
  int v_pad = 0;      // v_dim rounded up to 16
  int qk_stride = 0;  // shared row stride of Q and K, bf16
  int v_stride = 0;   // shared row stride of V, bf16
  std::size_t smem = 0;
};

TcGeometry tc_geometry(const MlaPrefillShape& s, int config) {
  const TcConfig& c = kTcConfigs[config];
  TcGeometry g;
  g.config = config;
  g.threads = 32 * c.warps;
  g.block_q = 16 * c.warps;
  g.qk_pad = round_up(static_cast<int>(s.nope + s.rope), 16);
  g.v_pad = round_up(static_cast<int>(s.v_dim), 16);
  g.qk_stride = g.qk_pad + 8;
  g.v_stride = g.v_pad + 8;
  g.smem = (static_cast<std::size_t>(g.block_q + kTcStages * c.block_k) * g.qk_stride +
            static_cast<std::size_t>(kTcStages * c.block_k) * g.v_stride) * sizeof(__nv_bfloat16);
  return g;
}

// kMaxQkSteps: the score K steps the registers hold (qk_pad / 16 at most); kVGroups: the
// 16-column V groups the accumulators hold; kExact: Kimi's widths (no padding, constant loop
// bounds, no guards between the MMAs, which would keep the compiler from overlapping one K
// step's loads with the last's MMAs, and the fixed copy mapping above); kSplitP: P as bf16
// hi + lo; kTcWarps, kTcBlockK: the configuration (kTcConfigs). Row tiles past q_len compute
// on zero queries over the valid keys and are never stored; key rows past kv_len arrive as
// zeros (cp.async zero fill) and are masked.
template <int kMaxQkSteps, int kVGroups, bool kExact, bool kSplitP, int kTcWarps, int kTcBlockK>
__global__ void __launch_bounds__(32 * kTcWarps, 1)
    mla_prefill_tc_kernel(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k_nope,
                          const __nv_bfloat16* __restrict__ k_rot, const __nv_bfloat16* __restrict__ v, int q_len,
                          int past, int heads, int nope, int rope, int v_dim, float scale_log2, int qk_stride,
                          int v_stride, __nv_bfloat16* __restrict__ out) {
  constexpr int kTcThreads = 32 * kTcWarps;
  constexpr int kTcBlockQ = 16 * kTcWarps;  // 16 query rows per warp: one MMA row tile
  // Rows of a key tile one pass of the exact-width copy covers, K and V (see above).
  constexpr int kKRowsPerPass = kTcThreads / 8, kVRowsPerPass = kTcThreads / 16;
  static_assert(kTcBlockK % 16 == 0 && kTcBlockK % kKRowsPerPass == 0 && kTcBlockK % kVRowsPerPass == 0,
                "a key tile is whole P.V K steps and whole passes of the exact-width copy");
  const int i0 = static_cast<int>(gridDim.x - 1 - blockIdx.x) * kTcBlockQ;  // latest block first
  const int h = blockIdx.y;
  const int b = blockIdx.z;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int quad_row = lane >> 2, quad_col = 2 * (lane & 3);
  const int mi = lane >> 3, r8 = lane & 7;  // ldmatrix: which 8x8 matrix this lane addresses, which row
  if constexpr (kExact) nope = kKimiNope, rope = kKimiRope, v_dim = kKimiV;
  const int qk = nope + rope;
  const int qk_steps = kExact ? kMaxQkSteps : (qk + 15) / 16;
  const int v_groups = kExact ? kVGroups : (v_dim + 15) / 16;
  // 16-byte vectors per row
  const int qk_vecs = qk / 8, nope_vecs = nope / 8, v_vecs = kExact ? 2 * kVGroups : v_dim / 8;
  const int kv_len = past + q_len;

  extern __shared__ __align__(16) unsigned char smem[];
  __nv_bfloat16* q_s = reinterpret_cast<__nv_bfloat16*>(smem);                // [kTcBlockQ][qk_stride]
  __nv_bfloat16* k_s = q_s + static_cast<std::size_t>(kTcBlockQ) * qk_stride;  // [kTcStages][kTcBlockK][qk_stride]
  __nv_bfloat16* v_s = k_s + static_cast<std::size_t>(kTcStages * kTcBlockK) * qk_stride;  // [..][v_stride]

  // Columns between the row and its 16-column padding are never copied into: zero them once
  // (q_s and k_s are one run of rows of the same stride). Exact widths have none.
  if constexpr (!kExact) {
    const int pad = qk_steps * 2 - qk_vecs;
    for (int i = tid; i < (kTcBlockQ + kTcStages * kTcBlockK) * pad; i += kTcThreads) {
      const int r = i / pad;
      reinterpret_cast<uint4*>(q_s + static_cast<std::size_t>(r) * qk_stride)[qk_vecs + i - r * pad] =
          make_uint4(0, 0, 0, 0);
    }
    const int vpad = v_groups * 2 - v_vecs;
    for (int i = tid; i < kTcStages * kTcBlockK * vpad; i += kTcThreads) {
      const int r = i / vpad;
      reinterpret_cast<uint4*>(v_s + static_cast<std::size_t>(r) * v_stride)[v_vecs + i - r * vpad] =
          make_uint4(0, 0, 0, 0);
    }
  }

  for (int i = tid; i < kTcBlockQ * qk_vecs; i += kTcThreads) {
    const int r = i / qk_vecs, c = i - r * qk_vecs;
    const bool valid = i0 + r < q_len;
    const __nv_bfloat16* src = q + ((static_cast<std::size_t>(b) * q_len + (valid ? i0 + r : 0)) * heads + h) * qk;
    detail::cp_async16(detail::smem_addr(q_s + r * qk_stride + c * 8), src + c * 8, valid);
  }
  // Exact widths: this thread's K and V columns at key 0 of sequence b, and its shared
  // destinations in stage 0 (the mapping above; rows past kv_len read key 0, zero-filled).
  const int r_k = tid >> 3, c_k = tid & 7, r_v = tid >> 4, c_v = tid & 15;
  const std::size_t seq_row0 = static_cast<std::size_t>(b) * kv_len;
  const __nv_bfloat16* nope_src = k_nope + (seq_row0 * heads + h) * nope + c_k * 8;
  const __nv_bfloat16* rope_src = k_rot + seq_row0 * rope + c_k * 8;
  const __nv_bfloat16* v_src = v + (seq_row0 * heads + h) * v_dim + c_v * 8;
  const std::uint32_t k_dst0 = detail::smem_addr(k_s + r_k * qk_stride + c_k * 8);
  const std::uint32_t v_dst0 = detail::smem_addr(v_s + r_v * v_stride + c_v * 8);
  auto load_tile_exact = [&](int t0, int stage) {
    const std::size_t nope_row = static_cast<std::size_t>(heads) * nope;  // elements between key rows
    const std::size_t v_row = static_cast<std::size_t>(heads) * v_dim;
    const std::uint32_t kd = k_dst0 + static_cast<std::uint32_t>(stage * kTcBlockK * qk_stride * 2);
    const std::uint32_t vd = v_dst0 + static_cast<std::uint32_t>(stage * kTcBlockK * v_stride * 2);
#pragma unroll
    for (int m = 0; m < kTcBlockK / kKRowsPerPass; ++m) {  // rows r_k, r_k + 32 (256 threads, 64 keys)
      const int row = t0 + r_k + kKRowsPerPass * m;
      const bool valid = row < kv_len;
      const std::size_t at = valid ? static_cast<std::size_t>(row) : 0;
      const std::uint32_t d = kd + static_cast<std::uint32_t>(kKRowsPerPass * m * qk_stride * 2);
      detail::cp_async16(d, nope_src + at * nope_row, valid);
      detail::cp_async16(d + 128, nope_src + at * nope_row + 64, valid);
      detail::cp_async16(d + 256, rope_src + at * rope, valid);
    }
#pragma unroll
    for (int m = 0; m < kTcBlockK / kVRowsPerPass; ++m) {  // rows r_v + 16 m (256 threads)
      const int row = t0 + r_v + kVRowsPerPass * m;
      const bool valid = row < kv_len;
      const std::size_t at = valid ? static_cast<std::size_t>(row) : 0;
      detail::cp_async16(vd + static_cast<std::uint32_t>(kVRowsPerPass * m * v_stride * 2), v_src + at * v_row, valid);
    }
  };
  auto load_tile = [&](int t0, int stage) {
    if constexpr (kExact) {
      load_tile_exact(t0, stage);
      return;
    }
    __nv_bfloat16* kd = k_s + static_cast<std::size_t>(stage) * kTcBlockK * qk_stride;
    for (int i = tid; i < kTcBlockK * qk_vecs; i += kTcThreads) {
      const int r = i / qk_vecs, c = i - r * qk_vecs;
      const bool valid = t0 + r < kv_len;
      const std::size_t row = static_cast<std::size_t>(b) * kv_len + (valid ? t0 + r : 0);
      const __nv_bfloat16* src = c < nope_vecs ? k_nope + (row * heads + h) * nope + c * 8
                                               : k_rot + row * rope + (c - nope_vecs) * 8;
      detail::cp_async16(detail::smem_addr(kd + r * qk_stride + c * 8), src, valid);
    }
    __nv_bfloat16* vd = v_s + static_cast<std::size_t>(stage) * kTcBlockK * v_stride;
    for (int i = tid; i < kTcBlockK * v_vecs; i += kTcThreads) {
      const int r = i / v_vecs, c = i - r * v_vecs;
      const bool valid = t0 + r < kv_len;
      const std::size_t row = static_cast<std::size_t>(b) * kv_len + (valid ? t0 + r : 0);
      detail::cp_async16(detail::smem_addr(vd + r * v_stride + c * 8), v + (row * heads + h) * v_dim + c * 8, valid);
    }
  };

  // The block's last query sees keys up to past + i0 + kTcBlockQ - 1.
  const int n_keys = min(kv_len, past + i0 + kTcBlockQ);
  const int tiles = (n_keys + kTcBlockK - 1) / kTcBlockK;
  load_tile(0, 0);
  detail::cp_async_commit();
  detail::cp_async_wait<0>();
  __syncthreads();

  // This warp's Q fragments, K step ks: columns 16 ks .. 16 ks + 15 of rows 16 warp ...
  std::uint32_t qf[kMaxQkSteps][4];
  {
    const std::uint32_t q_addr = detail::smem_addr(q_s + (warp * 16 + (mi & 1) * 8 + r8) * qk_stride + (mi >> 1) * 8);
#pragma unroll
    for (int ks = 0; ks < kMaxQkSteps; ++ks)
      if (ks < qk_steps) detail::ldmatrix_x4(q_addr + ks * 32, qf[ks]);
  }

  const int warp_first = past + i0 + warp * 16;  // position of the warp's first query
  const int row_pos = warp_first + quad_row;      // this lane's rows: row_pos and row_pos + 8
  float acc[2 * kVGroups][4];                     // 8-column output tiles
#pragma unroll
  for (int t = 0; t < 2 * kVGroups; ++t) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = 0.0f;
  float m_run[2] = {-INFINITY, -INFINITY};  // running max of the log2-scaled scores
  float l_run[2] = {0.0f, 0.0f};            // this lane's part of the running sum (its columns)

  const std::uint32_t k_addr0 = detail::smem_addr(k_s + ((mi >> 1) * 8 + r8) * qk_stride + (mi & 1) * 8);
  const std::uint32_t v_addr0 = detail::smem_addr(v_s + ((mi & 1) * 8 + r8) * v_stride + (mi >> 1) * 8);
  for (int it = 0; it < tiles; ++it) {
    detail::cp_async_wait<0>();
    __syncthreads();  // tile `it` landed for all; tile it - 1's stage is free
    if (it + 1 < tiles) load_tile((it + 1) * kTcBlockK, (it + 1) % kTcStages);
    detail::cp_async_commit();
    const int t0 = it * kTcBlockK;
    if (t0 > warp_first + 15) continue;  // every key of the tile is after the warp's queries

    // S = Q K^T: 8 tiles of 8 keys, each a chain over the K steps.
    float s[kTcBlockK / 8][4];
#pragma unroll
    for (int nt = 0; nt < kTcBlockK / 8; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
    const std::uint32_t k_addr =
        k_addr0 + static_cast<std::uint32_t>((it % kTcStages) * kTcBlockK * qk_stride * 2);
#pragma unroll
    for (int ks = 0; ks < kMaxQkSteps; ++ks) {
      if (ks < qk_steps) {
#pragma unroll
        for (int np = 0; np < kTcBlockK / 16; ++np) {
          std::uint32_t kb[4];  // keys 16 np .. + 7 (kb[0], kb[1]) and + 8 .. + 15 (kb[2], kb[3])
          detail::ldmatrix_x4(k_addr + (np * 16 * qk_stride + ks * 16) * 2, kb);
          detail::mma_bf16(s[2 * np], qf[ks], kb[0], kb[1]);
          detail::mma_bf16(s[2 * np + 1], qf[ks], kb[2], kb[3]);
        }
      }
    }

    // Scale into log2 units; mask where the tile crosses the diagonal or the end of the keys
    // (a warp-uniform branch; inside it, selects, not a branch per element).
    const bool needs_mask = t0 + kTcBlockK - 1 > warp_first || t0 + kTcBlockK > kv_len;
    if (needs_mask) {
      const int last_key[2] = {min(row_pos, kv_len - 1) - t0, min(row_pos + 8, kv_len - 1) - t0};
#pragma unroll
      for (int nt = 0; nt < kTcBlockK / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = nt * 8 + quad_col + (e & 1);  // within the tile
          s[nt][e] = key <= last_key[e >> 1] ? s[nt][e] * scale_log2 : -INFINITY;
        }
    } else {
#pragma unroll
      for (int nt = 0; nt < kTcBlockK / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[nt][e] *= scale_log2;
    }
    float m_new[2] = {m_run[0], m_run[1]};
#pragma unroll
    for (int nt = 0; nt < kTcBlockK / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) m_new[e >> 1] = fmaxf(m_new[e >> 1], s[nt][e]);
    float corr[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      m_new[r] = fmaxf(m_new[r], __shfl_xor_sync(0xffffffffu, m_new[r], 1));
      m_new[r] = fmaxf(m_new[r], __shfl_xor_sync(0xffffffffu, m_new[r], 2));
      // Tile 0 holds key 0, visible to every row: m_new is finite from the first tile on, and
      // exp2(-inf) = 0 drops the empty start.
      corr[r] = exp2_ftz(m_run[r] - m_new[r]);
      m_run[r] = m_new[r];
    }

    // P, as the A fragments of the four P·V K steps (16 keys each); l adds what the MMA sees.
    std::uint32_t ph[kTcBlockK / 16][4];
    [[maybe_unused]] std::uint32_t pl[kTcBlockK / 16][4];
    float sum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int kk = 0; kk < kTcBlockK / 16; ++kk)
#pragma unroll
      for (int half = 0; half < 2; ++half)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const float p0 = exp2_ftz(s[2 * kk + half][2 * r] - m_run[r]);
          const float p1 = exp2_ftz(s[2 * kk + half][2 * r + 1] - m_run[r]);
          const __nv_bfloat16 h0 = __float2bfloat16_rn(p0), h1 = __float2bfloat16_rn(p1);
          ph[kk][2 * half + r] = detail::pack_bf16x2(h0, h1);
          float f0 = __bfloat162float(h0), f1 = __bfloat162float(h1);
          if constexpr (kSplitP) {
            const __nv_bfloat16 l0 = __float2bfloat16_rn(p0 - f0), l1 = __float2bfloat16_rn(p1 - f1);
            pl[kk][2 * half + r] = detail::pack_bf16x2(l0, l1);
            f0 += __bfloat162float(l0);
            f1 += __bfloat162float(l1);
          }
          sum[r] += f0 + f1;
        }
#pragma unroll
    for (int r = 0; r < 2; ++r) l_run[r] = l_run[r] * corr[r] + sum[r];
#pragma unroll
    for (int t = 0; t < 2 * kVGroups; ++t) {
      acc[t][0] *= corr[0];
      acc[t][1] *= corr[0];
      acc[t][2] *= corr[1];
      acc[t][3] *= corr[1];
    }

    // O += P V: K step kk covers keys 16 kk .. 16 kk + 15 of the tile.
    const std::uint32_t v_addr =
        v_addr0 + static_cast<std::uint32_t>((it % kTcStages) * kTcBlockK * v_stride * 2);
#pragma unroll
    for (int kk = 0; kk < kTcBlockK / 16; ++kk)
#pragma unroll
      for (int vg = 0; vg < kVGroups; ++vg) {
        if (vg < v_groups) {
          std::uint32_t vb[4];  // columns 16 vg .. + 7 (vb[0], vb[1]) and + 8 .. + 15 (vb[2], vb[3])
          detail::ldmatrix_x4_trans(v_addr + (kk * 16 * v_stride + vg * 16) * 2, vb);
          detail::mma_bf16(acc[2 * vg], ph[kk], vb[0], vb[1]);
          detail::mma_bf16(acc[2 * vg + 1], ph[kk], vb[2], vb[3]);
          if constexpr (kSplitP) {
            detail::mma_bf16(acc[2 * vg], pl[kk], vb[0], vb[1]);
            detail::mma_bf16(acc[2 * vg + 1], pl[kk], vb[2], vb[3]);
          }
        }
      }
  }

  // Row sums over the quad's columns (a butterfly: every lane ends with the same bits), then
  // one division per row.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 1);
    l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 2);
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int i = i0 + warp * 16 + quad_row + 8 * r;
    if (i >= q_len) continue;
    const float inv = 1.0f / l_run[r];
    __nv_bfloat16* orow = out + ((static_cast<std::size_t>(b) * q_len + i) * heads + h) * v_dim;
#pragma unroll
    for (int t = 0; t < 2 * kVGroups; ++t) {
      const int d = t * 8 + quad_col;
      if (d < v_dim)
        *reinterpret_cast<__nv_bfloat162*>(orow + d) =
            __floats2bfloat162_rn(acc[t][2 * r] * inv, acc[t][2 * r + 1] * inv);
    }
  }
}

// ---- launchers ----

enum Variant {
  kTensorCore = 0,
  kTensorCoreSplitP = 1,
  kCudaCore = 2,
  kWgmmaSplitP = 3,
  kWgmmaSplitPOverlap = 4,
  kVariants = 5
};

void validate(const MlaPrefillShape& s) {
  TPB_CHECK(s.batch >= 1 && s.batch <= 65535, "mla_prefill: batch " << s.batch << " outside 1..65535");
  TPB_CHECK(s.heads >= 1 && s.heads <= 65535, "mla_prefill: heads " << s.heads << " outside 1..65535");
  TPB_CHECK(s.q_len >= 1 && s.past >= 0 && s.past + s.q_len <= (1 << 30),
            "mla_prefill: q_len " << s.q_len << ", past " << s.past);
  TPB_CHECK(s.nope >= 2 && s.nope % 2 == 0 && s.rope >= 0 && s.rope % 2 == 0 && s.nope + s.rope <= kMaxQk,
            "mla_prefill: nope " << s.nope << " and rope " << s.rope << " must be even, nope + rope <= " << kMaxQk);
  TPB_CHECK(s.v_dim >= 2 && s.v_dim % 2 == 0 && s.v_dim <= kMaxV,
            "mla_prefill: v_dim " << s.v_dim << " must be even and <= " << kMaxV);
}

// Whether mla_prefill_attention launches the tensor cores where they apply, and with P as what.
// On since 2026-12-01: on one H200 every variant matched the CPU reference (MlaPrefill), and the
// one the engine takes ran 11.6-12.4 x the CUDA-core kernel's speed at Kimi-K2.5's widths
// (scripts/gpu_issue20.sh, docs/performance.md). The
// engine takes the split-P variant: with P as one bf16 (2^-8 per weight), `tpbench logits` on
// k25-fused-f16 at TP 2 gave rel-L2 8.2e-2 against HF's fp32 logits, beyond the 2e-2 bf16
// budget (TP 1 and 4 stayed inside: likely a near-tie expert choice that flipped, as
// tests/gpu/logits_cli_test.cpp records for decode steps), where the CUDA-core kernel (fp32 P)
// gave at most 1.25e-2; split P keeps the weights to 2^-16, near fp32, at 0.82 x bf16 P's speed
// (212 vs 259 TFLOP/s at 64 heads x 1 x 8K).
// Turning the tensor cores on changed the engine's prefill bits: the baselines/h200x1 prefill
// digests were re-recorded with them. Since 2026-12-02 Kimi-K2.5's widths take the wgmma
// kernel (the same split P, another sum order: 1.57 x the mma.sync split-P kernel's speed on
// one H200, 335 vs 213 TFLOP/s at 64 heads x 1 x 8K); the digests were re-recorded again.
constexpr bool kTensorCoreByDefault = true;
constexpr int kEngineTensorCoreVariant = kTensorCoreSplitP;

bool tensor_core_supports(const MlaPrefillShape& s) {
  return s.nope % 8 == 0 && s.rope % 8 == 0 && s.v_dim % 8 == 0 && s.nope + s.rope <= kTcMaxQk &&
         s.v_dim <= kTcMaxV;
}

bool tensor_core_aligned(const __nv_bfloat16* q, const __nv_bfloat16* k_nope, const __nv_bfloat16* k_rot,
                         const __nv_bfloat16* v, const MlaPrefillShape& s, const __nv_bfloat16* out) {
  return aligned16(q) && aligned16(k_nope) && (s.rope == 0 || aligned16(k_rot)) && aligned16(v) &&
         reinterpret_cast<std::uintptr_t>(out) % 4 == 0;
}

void launch_cuda_core(const __nv_bfloat16* q, const __nv_bfloat16* k_nope, const __nv_bfloat16* k_rot,
                      const __nv_bfloat16* v, const MlaPrefillShape& s, float scale, __nv_bfloat16* out,
                      cudaStream_t stream) {
  const int qk = static_cast<int>(s.nope + s.rope);
  const std::size_t smem = static_cast<std::size_t>(kBlockQ) * qk * sizeof(float) +
                           static_cast<std::size_t>(kBlockK) * key_stride_words(qk) * 4 +
                           static_cast<std::size_t>(kBlockK) * (s.v_dim / 2) * 4;
  // May exceed the default 48 KiB at the largest head dims; a host-side attribute, legal
  // under stream capture.
  TPB_CUDA_CHECK(cudaFuncSetAttribute(mla_prefill_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(smem)));
  const dim3 grid(static_cast<unsigned>((s.q_len + kBlockQ - 1) / kBlockQ), static_cast<unsigned>(s.heads),
                  static_cast<unsigned>(s.batch));
  mla_prefill_kernel<<<grid, kThreads, smem, stream>>>(q, k_nope, k_rot, v, static_cast<int>(s.q_len),
                                                        static_cast<int>(s.past), static_cast<int>(s.heads),
                                                        static_cast<int>(s.nope), static_cast<int>(s.rope),
                                                        static_cast<int>(s.v_dim), scale, out);
  TPB_CUDA_CHECK_LAUNCH();
}

// The configuration the tensor-core variants take here: the first within the registry's budget
// (the device's maximum; 99 KiB under TPB_KERNELS=portable, as on an RTX PRO 6000).
int picked_tc_config(const MlaPrefillShape& s) {
  const int budget = kernels::smem_budget_bytes(device_smem_optin_bytes(), kernels::kernels_setting());
  for (int c = 0; c < kTcConfigCount; ++c)
    if (tc_geometry(s, c).smem <= static_cast<std::size_t>(budget)) return c;
  TPB_FAIL("mla_prefill: no configuration of the tensor-core kernel fits "
           << budget << " bytes of shared memory per block at nope " << s.nope << " + rope " << s.rope << ", v_dim "
           << s.v_dim << " (the smallest needs " << tc_geometry(s, kTcConfigCount - 1).smem << ")");
}

// The tensor-core kernel of one width class (Kimi's exact widths, up to 12 or 16 score K steps)
// in each configuration.
template <int kMaxQkSteps, int kVGroups, bool kExact, bool kSplitP>
auto* tc_kernel_of(int config) {
  switch (config) {
    case 0: return mla_prefill_tc_kernel<kMaxQkSteps, kVGroups, kExact, kSplitP, kTcConfigs[0].warps, kTcConfigs[0].block_k>;
    case 1: return mla_prefill_tc_kernel<kMaxQkSteps, kVGroups, kExact, kSplitP, kTcConfigs[1].warps, kTcConfigs[1].block_k>;
    default: return mla_prefill_tc_kernel<kMaxQkSteps, kVGroups, kExact, kSplitP, kTcConfigs[2].warps, kTcConfigs[2].block_k>;
  }
}
static_assert(kTcConfigCount == 3, "tc_kernel_of has a case per configuration");

// config < 0: the one the budget picks; else that one (a test, a sweep), which must fit the device.
template <bool kSplitP>
void launch_tensor_core(const __nv_bfloat16* q, const __nv_bfloat16* k_nope, const __nv_bfloat16* k_rot,
                        const __nv_bfloat16* v, const MlaPrefillShape& s, float scale, __nv_bfloat16* out,
                        cudaStream_t stream, int config) {
  TPB_CHECK(tensor_core_aligned(q, k_nope, k_rot, v, s, out),
            "mla_prefill: the tensor-core kernel needs 16-byte aligned q, k_nope, k_rot and v, 4-byte aligned out");
  TPB_CHECK(config < kTcConfigCount, "mla_prefill: no tensor-core configuration " << config);
  if (config < 0) config = picked_tc_config(s);
  const TcGeometry g = tc_geometry(s, config);
  TPB_CHECK(g.smem <= static_cast<std::size_t>(device_smem_optin_bytes()),
            "mla_prefill: configuration " << kTcConfigs[config].name << " needs " << g.smem
                                          << " bytes of shared memory per block, the device allows "
                                          << device_smem_optin_bytes());
  // Kimi's widths with constant bounds; other widths up to 192 in 12 K steps of Q registers,
  // up to 256 in 16.
  const bool kimi = s.nope == kKimiNope && s.rope == kKimiRope && s.v_dim == kKimiV;
  auto* kernel = kimi              ? tc_kernel_of<kKimiQkSteps, kKimiVGroups, true, kSplitP>(config)
                 : g.qk_pad <= 192 ? tc_kernel_of<12, kTcMaxVGroups, false, kSplitP>(config)
                                   : tc_kernel_of<16, kTcMaxVGroups, false, kSplitP>(config);
  // Above the default 48 KiB (134 KiB at Kimi's widths in the first configuration); a
  // host-side attribute, legal under stream capture.
  TPB_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(g.smem)));
  const dim3 grid(static_cast<unsigned>((s.q_len + g.block_q - 1) / g.block_q), static_cast<unsigned>(s.heads),
                  static_cast<unsigned>(s.batch));
  const float scale_log2 = static_cast<float>(static_cast<double>(scale) * 1.4426950408889634);  // log2(e)
  kernel<<<grid, g.threads, g.smem, stream>>>(q, k_nope, k_rot, v, static_cast<int>(s.q_len),
                                               static_cast<int>(s.past), static_cast<int>(s.heads),
                                               static_cast<int>(s.nope), static_cast<int>(s.rope),
                                               static_cast<int>(s.v_dim), scale_log2, g.qk_stride, g.v_stride, out);
  TPB_CUDA_CHECK_LAUNCH();
}

}  // namespace

namespace tuning {

int mla_prefill_variants() { return kVariants; }

const char* mla_prefill_variant_name(int variant) {
  switch (variant) {
    case kTensorCore: return "tensor_core";
    case kTensorCoreSplitP: return "tensor_core_split_p";
    case kCudaCore: return "cuda_core";
    case kWgmmaSplitP: return "wgmma_split_p";
    case kWgmmaSplitPOverlap: return "wgmma_split_p_overlap";
    default: return "?";
  }
}

bool mla_prefill_variant_supports(int variant, const MlaPrefillShape& shape) {
  if (variant == kTensorCore || variant == kTensorCoreSplitP) return tensor_core_supports(shape);
  if (variant == kWgmmaSplitP || variant == kWgmmaSplitPOverlap)
    return detail::mla_prefill_wgmma_supports(shape.nope, shape.rope, shape.v_dim);
  return variant == kCudaCore;
}

bool mla_prefill_tensor_core_by_default() { return kTensorCoreByDefault; }

int mla_prefill_default_variant(const MlaPrefillShape& shape) {
  if (!kTensorCoreByDefault) return kCudaCore;
  // The overlapped wgmma kernel gives wgmma_split_p's bits (MlaPrefill checks) and measured 2-7 %
  // faster on an H200 (docs/performance.md).
  if (mla_prefill_variant_supports(kWgmmaSplitPOverlap, shape)) return kWgmmaSplitPOverlap;
  return tensor_core_supports(shape) ? kEngineTensorCoreVariant : kCudaCore;
}

void mla_prefill_variant(int variant, const __nv_bfloat16* q, const __nv_bfloat16* k_nope, const __nv_bfloat16* k_rot,
                         const __nv_bfloat16* v, const MlaPrefillShape& shape, float scale, __nv_bfloat16* out,
                         cudaStream_t stream, int tc_config) {
  validate(shape);
  TPB_CHECK(variant >= 0 && variant < kVariants, "mla_prefill: variant " << variant);
  TPB_CHECK(tc_config < 0 || variant == kTensorCore || variant == kTensorCoreSplitP,
            "mla_prefill: a configuration is the mma.sync tensor-core kernels', not "
                << mla_prefill_variant_name(variant) << "'s");
  TPB_CHECK(mla_prefill_variant_supports(variant, shape),
            "mla_prefill: variant " << mla_prefill_variant_name(variant) << " does not take nope " << shape.nope
                                    << ", rope " << shape.rope << ", v_dim " << shape.v_dim);
  switch (variant) {
    case kTensorCore: launch_tensor_core<false>(q, k_nope, k_rot, v, shape, scale, out, stream, tc_config); break;
    case kTensorCoreSplitP:
      launch_tensor_core<true>(q, k_nope, k_rot, v, shape, scale, out, stream, tc_config);
      break;
    case kWgmmaSplitP:
    case kWgmmaSplitPOverlap:
      TPB_CHECK(tensor_core_aligned(q, k_nope, k_rot, v, shape, out),
                "mla_prefill: the wgmma kernel needs 16-byte aligned q, k_nope, k_rot and v, 4-byte aligned out");
      detail::launch_mla_prefill_wgmma(q, k_nope, k_rot, v, shape.batch, shape.q_len, shape.past, shape.heads, scale,
                                       out, stream, variant == kWgmmaSplitPOverlap);
      break;
    default: launch_cuda_core(q, k_nope, k_rot, v, shape, scale, out, stream); break;
  }
}

int mla_prefill_tc_configs() { return kTcConfigCount; }

const char* mla_prefill_tc_config_name(int tc_config) {
  TPB_CHECK(tc_config >= 0 && tc_config < kTcConfigCount, "mla_prefill: no tensor-core configuration " << tc_config);
  return kTcConfigs[tc_config].name;
}

std::size_t mla_prefill_tc_config_smem_bytes(int tc_config, const MlaPrefillShape& shape) {
  TPB_CHECK(tc_config >= 0 && tc_config < kTcConfigCount, "mla_prefill: no tensor-core configuration " << tc_config);
  return tc_geometry(shape, tc_config).smem;
}

int mla_prefill_tc_config(const MlaPrefillShape& shape) {
  validate(shape);
  return picked_tc_config(shape);
}

bool mla_prefill_tc_config_runs(int tc_config, const MlaPrefillShape& shape) {
  return tensor_core_supports(shape) &&
         mla_prefill_tc_config_smem_bytes(tc_config, shape) <= static_cast<std::size_t>(device_smem_optin_bytes());
}

}  // namespace tuning

void mla_prefill_attention(const __nv_bfloat16* q, const __nv_bfloat16* k_nope, const __nv_bfloat16* k_rot,
                           const __nv_bfloat16* v, const MlaPrefillShape& s, float scale, __nv_bfloat16* out,
                           cudaStream_t stream) {
  const int variant = tuning::mla_prefill_default_variant(s);
  if (variant != kCudaCore && tensor_core_aligned(q, k_nope, k_rot, v, s, out)) {
    tuning::mla_prefill_variant(variant, q, k_nope, k_rot, v, s, scale, out, stream);  // validates the shape
    return;
  }
  validate(s);
  launch_cuda_core(q, k_nope, k_rot, v, s, scale, out, stream);
}

}  // namespace tpb::gpu
