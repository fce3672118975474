// One split of the decode attention's key range (the plan of tpb/kernels/mla_decode_split.h)
// as both split kernels see it (mla_decode.cu's mma.sync one, mla_decode_wgmma.cu), and the
// record of a split that holds no key: m = -inf, l = 0, which the merge skips without reading
// its o. Internal to kernels/cuda.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

namespace tpb::gpu::detail {

struct DecodeSplitRange {
  std::int64_t start, end;  // keys [start, end) of the sequence; empty when start >= end
  std::size_t part_row0;    // the partial row of head g0; head g0 + g's is part_row0 + g * splits
};

// Split `split` of sequence b for the heads from g0: its keys, clamped to the sequence's length
// (itself clamped to 0..max_len), and where its partials go in the workspace.
__device__ __forceinline__ DecodeSplitRange decode_split_range(const std::int32_t* __restrict__ seq_lens, int b,
                                                               int split, int splits, std::int64_t chunk,
                                                               std::int64_t max_len, int heads, int g0) {
  const std::int64_t seq_len = min(max(static_cast<std::int64_t>(seq_lens[b]), std::int64_t{0}), max_len);
  DecodeSplitRange r;
  r.start = static_cast<std::int64_t>(split) * chunk;
  r.end = min(r.start + chunk, seq_len);
  r.part_row0 = (static_cast<std::size_t>(b) * heads + g0) * splits + split;
  return r;
}

// Nothing to attend: the merge skips this split on l == 0 (its o is never read). The CTA's
// nthreads threads write the records of its cta_heads heads below `heads`.
__device__ __forceinline__ void record_empty_split(float* __restrict__ m_part, float* __restrict__ l_part,
                                                   const DecodeSplitRange& r, int splits, int g0, int heads,
                                                   int cta_heads, int nthreads) {
  for (int g = static_cast<int>(threadIdx.x); g < cta_heads; g += nthreads)
    if (g0 + g < heads) {
      m_part[r.part_row0 + static_cast<std::size_t>(g) * splits] = -INFINITY;
      l_part[r.part_row0 + static_cast<std::size_t>(g) * splits] = 0.0f;
    }
}

}  // namespace tpb::gpu::detail
