// The online-softmax step shared by the wgmma attention kernels (mla_decode_wgmma.cu,
// mla_prefill_wgmma.cu), over one 64-key tile of scores in the m64n64 accumulator layout
// (wgmma.cuh): thread (warp w, lane) holds row 16 w + lane / 4 in s[4j], s[4j + 1] and row
// + 8 in s[4j + 2], s[4j + 3], keys 8j + 2 (lane % 4) + {0, 1}. The caller passes the scores
// scaled to the base-2 domain (times scale * log2 e) and masked (-inf), with at least one
// visible key per row in the first tile, so that the running max is finite from then on.
// Internal to kernels/cuda.
#pragma once

#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>

namespace tpb::gpu::detail {

// Updates the running max and sum of this thread's two rows (its sum covers its own 16 keys
// per tile; the caller adds the quad's at the end, in a fixed order), and returns the
// corrections exp2(m_old - m_new) for the output and P = exp2(s - m_new) as the A fragments of
// the P.V MMA's four k16 steps (step kk: keys 16 kk ..), bf16 hi + lo with P = hi + lo to about
// 2^-17 relative. exp2: the kernel's base-2 exponential (a callable on float).
template <class Exp2>
__device__ __forceinline__ void softmax_tile_split_p(const float (&s)[32], float (&m_run)[2], float (&l_run)[2],
                                                     float (&corr)[2], std::uint32_t (&hi)[4][4],
                                                     std::uint32_t (&lo)[4][4], Exp2 exp2) {
  float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int i = 0; i < 32; ++i) tile_max[(i >> 1) & 1] = fmaxf(tile_max[(i >> 1) & 1], s[i]);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
    tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
    const float m_new = fmaxf(m_run[r], tile_max[r]);
    corr[r] = exp2(m_run[r] - m_new);  // exp2(-inf) = 0 on the first tile
    m_run[r] = m_new;
  }
  float sum[2] = {0.0f, 0.0f};
#pragma unroll
  for (int j = 0; j < 8; ++j)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float p0 = exp2(s[4 * j + 2 * r] - m_run[r]);
      const float p1 = exp2(s[4 * j + 2 * r + 1] - m_run[r]);
      sum[r] += p0 + p1;
      const __nv_bfloat162 h = __floats2bfloat162_rn(p0, p1);  // .x (low half) = p0
      const float2 hf = __bfloat1622float2(h);
      const __nv_bfloat162 l = __floats2bfloat162_rn(p0 - hf.x, p1 - hf.y);
      hi[j >> 1][2 * (j & 1) + r] = *reinterpret_cast<const std::uint32_t*>(&h);
      lo[j >> 1][2 * (j & 1) + r] = *reinterpret_cast<const std::uint32_t*>(&l);
    }
#pragma unroll
  for (int r = 0; r < 2; ++r) l_run[r] = l_run[r] * corr[r] + sum[r];
}

// An output accumulator in the same layout (o[4j], o[4j + 1]: the first row; o[4j + 2],
// o[4j + 3]: the second) times each row's correction, before the next P.V adds to it.
template <int N>
__device__ __forceinline__ void rescale_rows(float (&o)[N], const float (&corr)[2]) {
#pragma unroll
  for (int j = 0; j < N / 4; ++j) {
    o[4 * j] *= corr[0];
    o[4 * j + 1] *= corr[0];
    o[4 * j + 2] *= corr[1];
    o[4 * j + 3] *= corr[1];
  }
}

}  // namespace tpb::gpu::detail
