// Causal MLA prefill attention in the plain form (tpb/kernels/gpu/mla_prefill.h), on CUDA
// cores with fp32 math: correctness first.
//
// One CTA per (query block of kBlockQ, head, sequence); warp w owns queries 4w..4w+3 of the
// block. Keys go through shared memory kBlockK at a time, in increasing order: lane j scores
// key j of the tile against the warp's 4 queries, the warp updates each query's running max
// and sum (online softmax), then every lane accumulates its value columns over the tile's
// keys with the probabilities broadcast by shuffle. Fixed order throughout, no atomics.
#include "tpb/kernels/gpu/mla_prefill.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "tpb/check.h"
#include "tpb/cuda_check.h"

namespace tpb::gpu {

namespace {

constexpr int kThreads = 256;
constexpr int kQueriesPerWarp = 4;
constexpr int kBlockQ = (kThreads / 32) * kQueriesPerWarp;  // 32
constexpr int kBlockK = 32;                                   // one key per lane
constexpr int kMaxQk = 256;
constexpr int kMaxV = 128;                                    // two column pairs per lane
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

}  // namespace

void mla_prefill_attention(const __nv_bfloat16* q, const __nv_bfloat16* k_nope, const __nv_bfloat16* k_rot,
                           const __nv_bfloat16* v, const MlaPrefillShape& s, float scale, __nv_bfloat16* out,
                           cudaStream_t stream) {
  TPB_CHECK(s.batch >= 1 && s.batch <= 65535, "mla_prefill: batch " << s.batch << " outside 1..65535");
  TPB_CHECK(s.heads >= 1 && s.heads <= 65535, "mla_prefill: heads " << s.heads << " outside 1..65535");
  TPB_CHECK(s.q_len >= 1 && s.past >= 0 && s.past + s.q_len <= (1 << 30),
            "mla_prefill: q_len " << s.q_len << ", past " << s.past);
  TPB_CHECK(s.nope >= 2 && s.nope % 2 == 0 && s.rope >= 0 && s.rope % 2 == 0 && s.nope + s.rope <= kMaxQk,
            "mla_prefill: nope " << s.nope << " and rope " << s.rope << " must be even, nope + rope <= " << kMaxQk);
  TPB_CHECK(s.v_dim >= 2 && s.v_dim % 2 == 0 && s.v_dim <= kMaxV,
            "mla_prefill: v_dim " << s.v_dim << " must be even and <= " << kMaxV);
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

}  // namespace tpb::gpu
