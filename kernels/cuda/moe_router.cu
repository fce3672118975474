// noaux_tc router (tpb/kernels/gpu/moe_router.h), one block per token, the reference's steps
// in the reference's order:
//   s = sigmoid(logit), sel = s + bias          (exp in double rounded to float: correctly
//                                                rounded but in astronomically rare cases, as
//                                                glibc's expf, so s matches the CPU's bits)
//   group score = top1 + top2 of sel per group  (one thread per group, serial scan)
//   keep topk_group groups                       (thread 0, repeated arg-max, lower index wins)
//   top_k experts over the kept groups           (top_k block arg-max rounds)
//   w = s[idx], sum in slot order, w / (sum + 1e-20) * routed_scaling
// The arg-max compares (value, index) under one strict total order, so its result does not
// depend on the reduction tree: ties go to the lower index, as in the reference.
#include "tpb/kernels/gpu/moe_router.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>

#include "tpb/check.h"
#include "tpb/cuda_check.h"
#include "cuda/programmatic_launch.cuh"

namespace tpb::gpu {

namespace {

constexpr int kThreads = 128;
constexpr std::int64_t kMaxBlocks = 1 << 16;

struct Cand {
  float v;
  int i;
};

__device__ inline bool better(const Cand& a, const Cand& b) { return a.v > b.v || (a.v == b.v && a.i < b.i); }

// The block's best candidate; every thread gets it. smem: one Cand per warp + 1.
__device__ Cand block_argmax(Cand c, Cand* smem) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    Cand other;
    other.v = __shfl_xor_sync(0xffffffffu, c.v, o);
    other.i = __shfl_xor_sync(0xffffffffu, c.i, o);
    if (better(other, c)) c = other;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int warps = blockDim.x / 32;
  if (lane == 0) smem[warp] = c;
  __syncthreads();
  if (threadIdx.x == 0) {
    Cand best = smem[0];
    for (int w = 1; w < warps; ++w)
      if (better(smem[w], best)) best = smem[w];
    smem[warps] = best;
  }
  __syncthreads();
  const Cand best = smem[warps];
  __syncthreads();
  return best;
}

// Dynamic shared memory: s[E], sel[E], group_score[G] (floats), taken[E], keep[G] (chars).
__global__ void router_kernel(const float* __restrict__ logits, const float* __restrict__ bias, std::int64_t tokens,
                              int experts, int top_k, int n_group, int topk_group, bool norm_topk_prob,
                              float routed_scaling, std::int32_t* __restrict__ topk_idx,
                              float* __restrict__ topk_w) {
  detail::chain_after_prior_grids();
  extern __shared__ float smem_f[];
  __shared__ Cand red[kThreads / 32 + 1];
  __shared__ int chosen[64];  // top_k <= 64, checked on the host
  float* s = smem_f;
  float* sel = s + experts;
  float* group_score = sel + experts;
  char* taken = reinterpret_cast<char*>(group_score + n_group);
  char* keep = taken + experts;
  const int per_group = experts / n_group;

  for (std::int64_t t = blockIdx.x; t < tokens; t += gridDim.x) {
    const float* lt = logits + t * experts;
    for (int e = threadIdx.x; e < experts; e += blockDim.x) {
      const float ex = static_cast<float>(exp(-static_cast<double>(lt[e])));
      const float se = __fdiv_rn(1.0f, __fadd_rn(1.0f, ex));
      s[e] = se;
      sel[e] = __fadd_rn(se, bias[e]);
      taken[e] = 0;
    }
    __syncthreads();

    if (n_group > 1) {
      for (int g = threadIdx.x; g < n_group; g += blockDim.x) {
        const float* sg = sel + g * per_group;
        float m1 = sg[0], m2 = -INFINITY;
        for (int j = 1; j < per_group; ++j) {
          const float v = sg[j];
          if (v > m1) {
            m2 = m1;
            m1 = v;
          } else if (v > m2) {
            m2 = v;
          }
        }
        group_score[g] = __fadd_rn(m1, m2);
        keep[g] = 0;
      }
      __syncthreads();
      if (threadIdx.x == 0) {
        for (int k = 0; k < topk_group; ++k) {
          int best = -1;
          for (int g = 0; g < n_group; ++g)
            if (!keep[g] && (best < 0 || group_score[g] > group_score[best])) best = g;
          keep[best] = 1;
        }
      }
      __syncthreads();
      for (int e = threadIdx.x; e < experts; e += blockDim.x)
        if (!keep[e / per_group]) sel[e] = -INFINITY;
      __syncthreads();
    }

    for (int k = 0; k < top_k; ++k) {
      Cand c{-INFINITY, INT_MAX};
      for (int e = threadIdx.x; e < experts; e += blockDim.x) {
        const Cand x{sel[e], e};
        if (!taken[e] && better(x, c)) c = x;
      }
      const Cand best = block_argmax(c, red);
      if (threadIdx.x == 0) {
        // No candidate only when every remaining sel is NaN (NaN logits): pick expert 0, whose
        // NaN weight then poisons the output visibly, rather than index out of bounds.
        const int e = best.i == INT_MAX ? 0 : best.i;
        taken[e] = 1;
        chosen[k] = e;
      }
      __syncthreads();
    }

    if (threadIdx.x == 0) {
      float sum = 0.0f;
      for (int k = 0; k < top_k; ++k) sum = __fadd_rn(sum, s[chosen[k]]);
      for (int k = 0; k < top_k; ++k) {
        float w = s[chosen[k]];
        if (norm_topk_prob) w = __fdiv_rn(w, __fadd_rn(sum, 1e-20f));
        topk_idx[t * top_k + k] = chosen[k];
        topk_w[t * top_k + k] = __fmul_rn(w, routed_scaling);
      }
    }
    __syncthreads();
  }
}

}  // namespace

void moe_route_noaux_tc(const float* logits, const float* bias, std::int64_t tokens,
                        const kernels::RouterParams& p, std::int32_t* topk_idx, float* topk_w, cudaStream_t stream) {
  const std::int64_t E = p.experts;
  TPB_CHECK(E > 0 && E <= (1 << 16) && p.n_group > 0 && E % p.n_group == 0,
            "router: experts " << E << " not divisible by n_group " << p.n_group);
  const std::int64_t per_group = E / p.n_group;
  TPB_CHECK(per_group >= 2 || p.n_group == 1, "router: groups need at least 2 experts");
  TPB_CHECK(p.topk_group >= 1 && p.topk_group <= p.n_group, "router: topk_group " << p.topk_group);
  TPB_CHECK(p.top_k >= 1 && p.top_k <= p.topk_group * per_group, "router: top_k " << p.top_k << " exceeds kept experts");
  TPB_CHECK(p.top_k <= 64, "router: top_k " << p.top_k << " above the kernel's 64");
  TPB_CHECK(tokens >= 0, "router: tokens " << tokens);
  if (tokens == 0) return;
  const std::size_t smem = static_cast<std::size_t>(2 * E + p.n_group) * sizeof(float) +
                           static_cast<std::size_t>(E + p.n_group);
  TPB_CHECK(smem <= 48 * 1024, "router: " << E << " experts need " << smem << " bytes of shared memory");
  const unsigned blocks = static_cast<unsigned>(std::min(tokens, kMaxBlocks));
  detail::launch_chained(router_kernel, blocks, kThreads, smem, stream, logits, bias, tokens, static_cast<int>(E),
                         static_cast<int>(p.top_k), static_cast<int>(p.n_group), static_cast<int>(p.topk_group),
                         p.norm_topk_prob, p.routed_scaling, topk_idx, topk_w);
  TPB_CUDA_CHECK_LAUNCH();
}

}  // namespace tpb::gpu
