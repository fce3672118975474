// Rotary embedding on interleaved pairs with precomputed YaRN frequencies
// (tpb/kernels/gpu/rope_yarn.h). One thread per (vector, pair). The reference computes in
// float: angle = pos * inv_freq[i], c = cos(angle) * attention_factor, then a*c - b*s and
// b*c + a*s. The same operations are spelled here as explicit round-to-nearest ops so that
// nvcc cannot contract them into FMAs; the one remaining difference is cosf/sinf (CUDA's
// full-range versions are within 2 ulp, glibc's within 1), a few fp32 ulps before the final
// bf16 rounding. The pair's arithmetic lives in cuda/rope_pair.cuh, shared with the fused MLA
// latent row; rope_interleaved_copy also writes each rotated vector to a second place (the
// decode query's rope slot), which saves the copy that would follow.
#include "tpb/kernels/gpu/rope_yarn.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "tpb/check.h"
#include "tpb/cuda_check.h"
#include "cuda/rope_pair.cuh"
#include "cuda/programmatic_launch.cuh"

namespace tpb::gpu {

namespace {

constexpr int kThreads = 256;

// out == nullptr: in place only; else each rotated vector v is also written at out + v * out_stride.
__global__ void rope_kernel(__nv_bfloat16* __restrict__ x, std::int64_t n, std::int64_t stride,
                            std::int64_t vectors_per_position, const std::int32_t* __restrict__ positions,
                            const float* __restrict__ inv_freq, std::int64_t half_dim, float attention_factor,
                            __nv_bfloat16* __restrict__ out, std::int64_t out_stride) {
  detail::chain_after_prior_grids();
  const std::int64_t total = n * half_dim;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t idx = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += step) {
    const std::int64_t v = idx / half_dim;
    const std::int64_t i = idx - v * half_dim;
    const float pos = static_cast<float>(positions[v / vectors_per_position]);
    __nv_bfloat16* p = x + v * stride + 2 * i;
    __nv_bfloat16 ra, rb;
    detail::rope_rotate_pair(pos, inv_freq[i], attention_factor, __bfloat162float(p[0]), __bfloat162float(p[1]), ra,
                             rb);
    p[0] = ra;
    p[1] = rb;
    if (out != nullptr) {
      __nv_bfloat16* o = out + v * out_stride + 2 * i;
      o[0] = ra;
      o[1] = rb;
    }
  }
}

void launch_rope(__nv_bfloat16* x, std::int64_t n, std::int64_t stride, std::int64_t vectors_per_position,
                 const std::int32_t* positions, const float* inv_freq, std::int64_t half_dim, float attention_factor,
                 __nv_bfloat16* out, std::int64_t out_stride, cudaStream_t stream) {
  const std::int64_t total = n * half_dim;
  const unsigned blocks = static_cast<unsigned>(std::min((total + kThreads - 1) / kThreads, std::int64_t{1} << 16));
  detail::launch_chained(rope_kernel, blocks, kThreads, 0, stream, x, n, stride, vectors_per_position, positions,
                         inv_freq, half_dim, attention_factor, out, out_stride);
  TPB_CUDA_CHECK_LAUNCH();
}

}  // namespace

void rope_interleaved(__nv_bfloat16* x, std::int64_t n, std::int64_t stride, std::int64_t vectors_per_position,
                      const std::int32_t* positions, const float* inv_freq, std::int64_t half_dim,
                      float attention_factor, cudaStream_t stream) {
  TPB_CHECK(n >= 0 && half_dim > 0 && stride >= 2 * half_dim && vectors_per_position > 0,
            "rope_interleaved: n " << n << ", half_dim " << half_dim << ", stride " << stride
                                   << ", vectors_per_position " << vectors_per_position);
  if (n == 0) return;
  launch_rope(x, n, stride, vectors_per_position, positions, inv_freq, half_dim, attention_factor, nullptr, 0, stream);
}

void rope_interleaved_copy(__nv_bfloat16* x, std::int64_t n, std::int64_t stride, std::int64_t vectors_per_position,
                           const std::int32_t* positions, const float* inv_freq, std::int64_t half_dim,
                           float attention_factor, __nv_bfloat16* out, std::int64_t out_stride, cudaStream_t stream) {
  TPB_CHECK(n >= 0 && half_dim > 0 && stride >= 2 * half_dim && vectors_per_position > 0 && out != nullptr &&
                out_stride >= 2 * half_dim,
            "rope_interleaved_copy: n " << n << ", half_dim " << half_dim << ", stride " << stride
                                        << ", vectors_per_position " << vectors_per_position << ", out_stride "
                                        << out_stride << (out == nullptr ? ", no out" : ""));
  if (n == 0) return;
  launch_rope(x, n, stride, vectors_per_position, positions, inv_freq, half_dim, attention_factor, out, out_stride,
              stream);
}

}  // namespace tpb::gpu
