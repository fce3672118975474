// MoE dispatch plan, gather and combine (tpb/kernels/gpu/moe_dispatch.h).
//
// plan: one block of kPlanWarps warps, a counting sort that is stable in pair order. The
// pairs are cut into one contiguous segment per warp. Pass 1 counts each expert per warp;
// then every (warp, expert) gets its first slot, offsets[e] plus the counts of that expert
// in the earlier warps; pass 2 walks each segment in chunks of 32 pairs in order, ranks a
// lane among the lanes of its chunk with the same expert (__match_any_sync), and bumps the
// warp's slot by the group size. Integer counters only, so the result is unique: the
// sorted order is exactly the reference's (by expert, then by pair index). No host sync,
// fixed launch shape: graph safe.
// gather: one block per row; combine: blocks of 128 16-byte chunks of a row (see
// combine_kernel). Both use 16-byte accesses where the row allows; combine sums the slots in
// slot order with explicit round-to-nearest ops, then adds the shared expert.
#include "tpb/kernels/gpu/moe_dispatch.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "tpb/check.h"
#include "tpb/cuda_check.h"
#include "cuda/bf16_vectors.cuh"
#include "cuda/programmatic_launch.cuh"

namespace tpb::gpu {

namespace {

using detail::aligned16;
using detail::load_bf16;
using detail::store_bf16;

constexpr int kPlanWarps = 16;
constexpr int kThreads = 256;
constexpr std::int64_t kMaxBlocks = 1 << 16;
constexpr std::size_t kMaxSmem = 48 * 1024;


__device__ inline int checked_expert(const std::int32_t* topk_idx, int p, int experts) {
  const int e = topk_idx[p];
  if (e < 0 || e >= experts) __trap();  // the router never produces it; never index out of smem
  return e;
}

// Shared memory: base[kPlanWarps][experts], start[experts + 1].
__global__ void __launch_bounds__(kPlanWarps * 32)
    plan_kernel(const std::int32_t* __restrict__ topk_idx, int pairs, int experts, std::int32_t* __restrict__ offsets,
                std::int32_t* __restrict__ sorted_pairs, std::int32_t* __restrict__ position_of,
                unsigned long long* __restrict__ touched_total) {
  detail::chain_after_prior_grids();
  extern __shared__ int smem_i[];
  int* base = smem_i;
  int* start = smem_i + kPlanWarps * experts;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int i = threadIdx.x; i < kPlanWarps * experts; i += blockDim.x) base[i] = 0;
  __syncthreads();

  const int seg = (pairs + kPlanWarps - 1) / kPlanWarps;
  const int seg_begin = min(pairs, warp * seg);
  const int seg_end = min(pairs, seg_begin + seg);
  int* my_base = base + warp * experts;
  for (int p = seg_begin + lane; p < seg_end; p += 32) atomicAdd(&my_base[checked_expert(topk_idx, p, experts)], 1);
  __syncthreads();

  // Per expert: counts -> exclusive prefix over warps; start[e] = the expert's total.
  for (int e = threadIdx.x; e < experts; e += blockDim.x) {
    int run = 0;
    for (int w = 0; w < kPlanWarps; ++w) {
      const int c = base[w * experts + e];
      base[w * experts + e] = run;
      run += c;
    }
    start[e] = run;
  }
  if (touched_total != nullptr) {
    // Experts with at least one pair, added to the running total: integer adds, so the
    // count is exact whatever the order; one thread writes, stream-ordered with other calls.
    __shared__ int touched;
    if (threadIdx.x == 0) touched = 0;
    __syncthreads();
    int mine = 0;
    for (int e = threadIdx.x; e < experts; e += blockDim.x) mine += start[e] > 0;
    atomicAdd(&touched, mine);
    __syncthreads();
    if (threadIdx.x == 0) *touched_total += static_cast<unsigned long long>(touched);
  }
  __syncthreads();

  // Exclusive scan of the totals over experts: lane l of warp 0 owns a contiguous chunk.
  if (warp == 0) {
    const int chunk = (experts + 31) / 32;
    const int b = min(experts, lane * chunk);
    const int en = min(experts, b + chunk);
    int local = 0;
    for (int e = b; e < en; ++e) local += start[e];
    int incl = local;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int n = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += n;
    }
    int run = incl - local;
    for (int e = b; e < en; ++e) {
      const int c = start[e];
      start[e] = run;
      run += c;
    }
    if (lane == 31) start[experts] = incl;
  }
  __syncthreads();
  for (int e = threadIdx.x; e <= experts; e += blockDim.x) offsets[e] = start[e];
  for (int i = threadIdx.x; i < kPlanWarps * experts; i += blockDim.x) base[i] += start[i % experts];
  __syncthreads();

  // Stable placement. The chunk loop is warp-uniform (the segment is the warp's).
  for (int p0 = seg_begin; p0 < seg_end; p0 += 32) {
    const int p = p0 + lane;
    const bool valid = p < seg_end;
    const int e = valid ? checked_expert(topk_idx, p, experts) : -1;
    const unsigned peers = __match_any_sync(0xffffffffu, e);
    const int rank = __popc(peers & ((1u << lane) - 1u));
    const int pos = valid ? my_base[e] + rank : 0;
    __syncwarp();
    if (valid && rank == 0) my_base[e] += __popc(peers);
    __syncwarp();
    if (valid) {
      sorted_pairs[pos] = p;
      position_of[p] = pos;
    }
  }
}

template <int V>
__global__ void gather_kernel(const __nv_bfloat16* __restrict__ x, const std::int32_t* __restrict__ sorted_pairs,
                              std::int64_t pairs, std::int64_t top_k, std::int64_t hidden,
                              __nv_bfloat16* __restrict__ x_sorted) {
  detail::chain_after_prior_grids();
  const std::int64_t chunks = hidden / V;
  for (std::int64_t p = blockIdx.x; p < pairs; p += gridDim.x) {
    const std::int64_t t = sorted_pairs[p] / top_k;
    if constexpr (V == 8) {
      const uint4* s = reinterpret_cast<const uint4*>(x + t * hidden);
      uint4* d = reinterpret_cast<uint4*>(x_sorted + p * hidden);
      for (std::int64_t c = threadIdx.x; c < chunks; c += blockDim.x) d[c] = s[c];
    } else {
      const __nv_bfloat16* s = x + t * hidden;
      __nv_bfloat16* d = x_sorted + p * hidden;
      for (std::int64_t c = threadIdx.x; c < chunks; c += blockDim.x) d[c] = s[c];
    }
  }
}



// grid.x: tokens (strided), grid.y: blocks of kCombineThreads chunks of the row. A row of 7168
// at batch 1 is 7 CTAs rather than one (one CTA walked its 3.5 chunks per thread with 8
// dependent slot loads each: 16 us on an H200); the slots' positions and weights are read
// once per CTA into shared memory. Each chunk's sum is the same operations in the same order
// as before, so the output bits do not depend on the launch shape.
constexpr int kCombineThreads = 128;
constexpr int kCombineMaxTopK = 64;

template <int V>
__global__ void __launch_bounds__(kCombineThreads)
    combine_kernel(const __nv_bfloat16* __restrict__ y_sorted, const std::int32_t* __restrict__ position_of,
                   const float* __restrict__ topk_w, const __nv_bfloat16* __restrict__ shared, std::int64_t tokens,
                   std::int64_t top_k, std::int64_t hidden, __nv_bfloat16* __restrict__ out) {
  detail::chain_after_prior_grids();
  __shared__ std::int64_t pos_s[kCombineMaxTopK];
  __shared__ float w_s[kCombineMaxTopK];
  const std::int64_t chunks = hidden / V;
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  for (std::int64_t t = blockIdx.x; t < tokens; t += gridDim.x) {
    for (std::int64_t slot = threadIdx.x; slot < top_k; slot += blockDim.x) {
      pos_s[slot] = position_of[t * top_k + slot];
      w_s[slot] = topk_w[t * top_k + slot];
    }
    __syncthreads();
    if (c < chunks) {
      float acc[V];
#pragma unroll
      for (int k = 0; k < V; ++k) acc[k] = 0.0f;
      for (std::int64_t slot = 0; slot < top_k; ++slot) {
        const float w = w_s[slot];
        float y[V];
        load_bf16<V>(y_sorted + pos_s[slot] * hidden + c * V, y);
#pragma unroll
        for (int k = 0; k < V; ++k) acc[k] = __fadd_rn(acc[k], __fmul_rn(w, y[k]));
      }
      if (shared != nullptr) {
        float s[V];
        load_bf16<V>(shared + t * hidden + c * V, s);
#pragma unroll
        for (int k = 0; k < V; ++k) acc[k] = __fadd_rn(acc[k], s[k]);
      }
      store_bf16<V>(out + t * hidden + c * V, acc);
    }
    __syncthreads();  // the next token's slots replace these
  }
}

}  // namespace

void moe_dispatch_plan(const std::int32_t* topk_idx, std::int64_t tokens, std::int64_t top_k, std::int64_t experts,
                       std::int32_t* offsets, std::int32_t* sorted_pairs, std::int32_t* position_of,
                       cudaStream_t stream, unsigned long long* touched_total) {
  TPB_CHECK(tokens >= 0 && top_k >= 1 && experts >= 1, "moe_dispatch_plan: tokens " << tokens << ", top_k " << top_k
                                                                                     << ", experts " << experts);
  TPB_CHECK(tokens * top_k <= (std::int64_t{1} << 30), "moe_dispatch_plan: " << tokens * top_k << " pairs above 2^30");
  const std::size_t smem = static_cast<std::size_t>((kPlanWarps + 1) * experts + 1) * sizeof(int);
  TPB_CHECK(smem <= kMaxSmem, "moe_dispatch_plan: " << experts << " experts need " << smem << " bytes of shared memory");
  detail::launch_chained(plan_kernel, 1, kPlanWarps * 32, smem, stream, topk_idx, static_cast<int>(tokens * top_k),
                         static_cast<int>(experts), offsets, sorted_pairs, position_of, touched_total);
  TPB_CUDA_CHECK_LAUNCH();
}

void moe_gather(const __nv_bfloat16* x, const std::int32_t* sorted_pairs, std::int64_t pairs, std::int64_t top_k,
                std::int64_t hidden, __nv_bfloat16* x_sorted, cudaStream_t stream) {
  TPB_CHECK(pairs >= 0 && top_k >= 1 && hidden > 0,
            "moe_gather: pairs " << pairs << ", top_k " << top_k << ", hidden " << hidden);
  if (pairs == 0) return;
  const unsigned blocks = static_cast<unsigned>(std::min(pairs, kMaxBlocks));
  if (hidden % 8 == 0 && aligned16(x) && aligned16(x_sorted)) {
    detail::launch_chained(gather_kernel<8>, blocks, kThreads, 0, stream, x, sorted_pairs, pairs, top_k, hidden,
                           x_sorted);
  } else {
    detail::launch_chained(gather_kernel<1>, blocks, kThreads, 0, stream, x, sorted_pairs, pairs, top_k, hidden,
                           x_sorted);
  }
  TPB_CUDA_CHECK_LAUNCH();
}

void moe_combine(const __nv_bfloat16* y_sorted, const std::int32_t* position_of, const float* topk_w,
                 const __nv_bfloat16* shared, std::int64_t tokens, std::int64_t top_k, std::int64_t hidden,
                 __nv_bfloat16* out, cudaStream_t stream) {
  TPB_CHECK(tokens >= 0 && top_k >= 1 && hidden > 0,
            "moe_combine: tokens " << tokens << ", top_k " << top_k << ", hidden " << hidden);
  TPB_CHECK(top_k <= kCombineMaxTopK, "moe_combine: top_k " << top_k << " above the kernel's " << kCombineMaxTopK);
  if (tokens == 0) return;
  const bool vec = hidden % 8 == 0 && aligned16(y_sorted) && aligned16(out) && (shared == nullptr || aligned16(shared));
  const std::int64_t chunks = vec ? hidden / 8 : hidden;
  TPB_CHECK(chunks <= std::int64_t{65535} * kCombineThreads, "moe_combine: hidden " << hidden << " above the grid");
  const dim3 grid(static_cast<unsigned>(std::min(tokens, kMaxBlocks)),
                  static_cast<unsigned>((chunks + kCombineThreads - 1) / kCombineThreads));
  if (vec) {
    detail::launch_chained(combine_kernel<8>, grid, kCombineThreads, 0, stream, y_sorted, position_of, topk_w, shared,
                           tokens, top_k, hidden, out);
  } else {
    detail::launch_chained(combine_kernel<1>, grid, kCombineThreads, 0, stream, y_sorted, position_of, topk_w, shared,
                           tokens, top_k, hidden, out);
  }
  TPB_CUDA_CHECK_LAUNCH();
}

void moe_dispatch_plan_ref(const std::int32_t* topk_idx, std::int64_t tokens, std::int64_t top_k,
                           std::int64_t experts, std::int32_t* offsets, std::int32_t* sorted_pairs,
                           std::int32_t* position_of) {
  const std::int64_t pairs = tokens * top_k;
  std::vector<std::int32_t> next(static_cast<std::size_t>(experts), 0);
  for (std::int64_t p = 0; p < pairs; ++p) {
    const std::int32_t e = topk_idx[p];
    TPB_CHECK(e >= 0 && e < experts, "moe_dispatch_plan_ref: expert " << e << " of pair " << p << " outside [0, "
                                                                       << experts << ")");
    ++next[e];
  }
  std::int32_t run = 0;
  for (std::int64_t e = 0; e < experts; ++e) {
    offsets[e] = run;
    const std::int32_t c = next[e];
    next[e] = run;
    run += c;
  }
  offsets[experts] = run;
  for (std::int64_t p = 0; p < pairs; ++p) {
    const std::int32_t pos = next[topk_idx[p]]++;
    sorted_pairs[pos] = static_cast<std::int32_t>(p);
    position_of[p] = pos;
  }
}

}  // namespace tpb::gpu
