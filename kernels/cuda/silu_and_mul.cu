// Gated activation on the fused gate|up rows (tpb/kernels/gpu/silu_and_mul.h). Elementwise:
// 8 outputs per thread from one 16-byte load of the gate and one of the up half where the
// row allows it, one output per thread otherwise. silu is written as the reference writes
// it, g / (1 + exp(-g)) * up, with IEEE division and explicit round-to-nearest ops; expf
// (within 2 ulp, glibc within 1) is the only difference from the CPU.
#include "tpb/kernels/gpu/silu_and_mul.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "tpb/check.h"
#include "tpb/cuda_check.h"
#include "cuda/bf16_vectors.cuh"
#include "cuda/programmatic_launch.cuh"

namespace tpb::gpu {

namespace {

using detail::aligned16;

constexpr int kThreads = 256;

__device__ inline float silu_mul(float g, float u) {
  return __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, expf(-g))), u);
}

// V = 8 (16-byte loads) or 1.
template <int V>
__global__ void silu_and_mul_kernel(const __nv_bfloat16* __restrict__ gate_up, __nv_bfloat16* __restrict__ out,
                                    std::int64_t rows, std::int64_t inter) {
  detail::chain_after_prior_grids();
  const std::int64_t per_row = inter / V;
  const std::int64_t total = rows * per_row;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t idx = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += step) {
    const std::int64_t r = idx / per_row;
    const std::int64_t col = (idx - r * per_row) * V;
    const __nv_bfloat16* g = gate_up + r * 2 * inter + col;
    const __nv_bfloat16* u = g + inter;
    __nv_bfloat16* o = out + r * inter + col;
    if constexpr (V == 8) {
      const uint4 gv = *reinterpret_cast<const uint4*>(g);
      const uint4 uv = *reinterpret_cast<const uint4*>(u);
      const __nv_bfloat162* g2 = reinterpret_cast<const __nv_bfloat162*>(&gv);
      const __nv_bfloat162* u2 = reinterpret_cast<const __nv_bfloat162*>(&uv);
      uint4 ov;
      __nv_bfloat162* o2 = reinterpret_cast<__nv_bfloat162*>(&ov);
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const float2 gf = __bfloat1622float2(g2[k]);
        const float2 uf = __bfloat1622float2(u2[k]);
        o2[k] = __floats2bfloat162_rn(silu_mul(gf.x, uf.x), silu_mul(gf.y, uf.y));
      }
      *reinterpret_cast<uint4*>(o) = ov;
    } else {
      *o = __float2bfloat16_rn(silu_mul(__bfloat162float(*g), __bfloat162float(*u)));
    }
  }
}


}  // namespace

void silu_and_mul(const __nv_bfloat16* gate_up, __nv_bfloat16* out, std::int64_t rows, std::int64_t inter,
                  cudaStream_t stream) {
  TPB_CHECK(rows >= 0 && inter > 0, "silu_and_mul: rows " << rows << ", inter " << inter);
  if (rows == 0) return;
  const bool vec = inter % 8 == 0 && aligned16(gate_up) && aligned16(out);
  const std::int64_t total = rows * (vec ? inter / 8 : inter);
  const unsigned blocks = static_cast<unsigned>(std::min((total + kThreads - 1) / kThreads, std::int64_t{1} << 16));
  if (vec) {
    detail::launch_chained(silu_and_mul_kernel<8>, blocks, kThreads, 0, stream, gate_up, out, rows, inter);
  } else {
    detail::launch_chained(silu_and_mul_kernel<1>, blocks, kThreads, 0, stream, gate_up, out, rows, inter);
  }
  TPB_CUDA_CHECK_LAUNCH();
}

}  // namespace tpb::gpu
