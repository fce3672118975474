// Rotary embedding on interleaved pairs with precomputed YaRN frequencies
// (tpb/kernels/gpu/rope_yarn.h). One thread per (vector, pair). The reference computes in
// float: angle = pos * inv_freq[i], c = cos(angle) * attention_factor, then a*c - b*s and
// b*c + a*s. The same operations are spelled here as explicit round-to-nearest ops so that
// nvcc cannot contract them into FMAs; the one remaining difference is cosf/sinf (CUDA's
// full-range versions are within 2 ulp, glibc's within 1), a few fp32 ulps before the final
// bf16 rounding.
#include "tpb/kernels/gpu/rope_yarn.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "tpb/check.h"
#include "tpb/cuda_check.h"

namespace tpb::gpu {

namespace {

constexpr int kThreads = 256;

__global__ void rope_kernel(__nv_bfloat16* __restrict__ x, std::int64_t n, std::int64_t stride,
                            std::int64_t vectors_per_position, const std::int32_t* __restrict__ positions,
                            const float* __restrict__ inv_freq, std::int64_t half_dim, float attention_factor) {
  const std::int64_t total = n * half_dim;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t idx = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += step) {
    const std::int64_t v = idx / half_dim;
    const std::int64_t i = idx - v * half_dim;
    const float pos = static_cast<float>(positions[v / vectors_per_position]);
    const float angle = __fmul_rn(pos, inv_freq[i]);
    const float c = __fmul_rn(cosf(angle), attention_factor);
    const float s = __fmul_rn(sinf(angle), attention_factor);
    __nv_bfloat16* p = x + v * stride + 2 * i;
    const float a = __bfloat162float(p[0]);
    const float b = __bfloat162float(p[1]);
    p[0] = __float2bfloat16_rn(__fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s)));
    p[1] = __float2bfloat16_rn(__fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s)));
  }
}

}  // namespace

void rope_interleaved(__nv_bfloat16* x, std::int64_t n, std::int64_t stride, std::int64_t vectors_per_position,
                      const std::int32_t* positions, const float* inv_freq, std::int64_t half_dim,
                      float attention_factor, cudaStream_t stream) {
  TPB_CHECK(n >= 0 && half_dim > 0 && stride >= 2 * half_dim && vectors_per_position > 0,
            "rope_interleaved: n " << n << ", half_dim " << half_dim << ", stride " << stride
                                   << ", vectors_per_position " << vectors_per_position);
  if (n == 0) return;
  const std::int64_t total = n * half_dim;
  const unsigned blocks = static_cast<unsigned>(std::min((total + kThreads - 1) / kThreads, std::int64_t{1} << 16));
  rope_kernel<<<blocks, kThreads, 0, stream>>>(x, n, stride, vectors_per_position, positions, inv_freq, half_dim,
                                               attention_factor);
  TPB_CUDA_CHECK_LAUNCH();
}

}  // namespace tpb::gpu
