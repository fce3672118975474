// The block-wide scan the routed-expert kernels (expert_gemm.cu, expert_gemm_int4.cu) find
// their expert by: blocks along grid y take the experts that have rows, in expert order, so an
// empty expert costs nothing and the grid depends only on (experts, pairs, out).
#pragma once

#include <cstdint>

namespace tpb::gpu::detail {

// The expert id of the n-th (from 0) expert with at least one row, or -1 when fewer exist.
// Called by every thread of a block of kWarps warps; the result is the same in all of them.
template <int kWarps>
__device__ int nth_nonempty_expert(const std::int32_t* __restrict__ offsets, int experts, int n) {
  __shared__ int s_found;
  __shared__ int s_warp_count[kWarps];
  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;
  if (tid == 0) s_found = -1;
  int before = 0;  // non-empty experts in earlier chunks
  for (int base = 0; base < experts; base += kWarps * 32) {
    const int e = base + tid;
    const bool nonempty = e < experts && offsets[e + 1] > offsets[e];
    const unsigned ballot = __ballot_sync(0xffffffffu, nonempty);
    if (lane == 0) s_warp_count[warp] = __popc(ballot);
    __syncthreads();  // warp counts (and, the first time, s_found = -1) visible
    int rank = before + __popc(ballot & ((1u << lane) - 1u)), total = 0;
    for (int w = 0; w < kWarps; ++w) {
      if (w < warp) rank += s_warp_count[w];
      total += s_warp_count[w];
    }
    if (nonempty && rank == n) s_found = e;
    before += total;
    __syncthreads();  // s_found visible; s_warp_count free for the next chunk
    if (s_found >= 0) break;  // block-uniform
  }
  return s_found;
}

}  // namespace tpb::gpu::detail
