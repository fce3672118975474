// Dense GEMV for decode (tpb/kernels/gpu/gemv.h): one warp per output row, 8 weight loads
// per lane in flight, every activation row (<= 8) applied to each weight load; eight warps
// per block, blocks over the output rows. Numerics: weight_stream.cuh (the order of
// expert_gemm_grouped, so the two agree bitwise on the same product).
#include "tpb/kernels/gpu/gemv.h"

#include <cuda_bf16.h>

#include <cstdint>

#include "tpb/check.h"
#include "tpb/cuda_check.h"
#include "cuda/weight_stream.cuh"

namespace tpb::gpu {

namespace {

constexpr int kWarps = 8;
constexpr int kUnroll = 8;
constexpr int kTok = static_cast<int>(kGemvMaxRows);

__global__ void __launch_bounds__(kWarps * 32, 3)
    gemv_kernel(const __nv_bfloat16* __restrict__ x, std::int64_t x_stride, const __nv_bfloat16* __restrict__ w,
                __nv_bfloat16* __restrict__ y, std::int64_t y_stride, int rows, std::int64_t in, std::int64_t out) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const std::int64_t o = static_cast<std::int64_t>(blockIdx.x) * kWarps + static_cast<int>(threadIdx.x) / 32;
  if (o >= out) return;  // warp-uniform
  const int in_vecs = static_cast<int>(in / detail::kStreamVec);
  float acc[1][kTok];
  detail::stream_rows<1, kUnroll, kTok>(reinterpret_cast<const uint4*>(w + o * in), in_vecs, 1,
                                        reinterpret_cast<const uint4*>(x),
                                        static_cast<int>(x_stride / detail::kStreamVec), rows, lane, acc);
  detail::store_rows<1, kTok>(acc, 1, rows, lane, y + o, y_stride);
}

}  // namespace

bool gemv_supported(const void* x, std::int64_t x_stride, const void* w, std::int64_t rows, std::int64_t in) {
  return rows >= 1 && rows <= kGemvMaxRows && in > 0 && in % detail::kStreamVec == 0 &&
         x_stride % detail::kStreamVec == 0 && in / detail::kStreamVec < (std::int64_t{1} << 31) &&
         x_stride / detail::kStreamVec < (std::int64_t{1} << 31) &&
         reinterpret_cast<std::uintptr_t>(x) % 16 == 0 && reinterpret_cast<std::uintptr_t>(w) % 16 == 0;
}

void gemv_bf16(const __nv_bfloat16* x, std::int64_t x_stride, const __nv_bfloat16* w, __nv_bfloat16* y,
               std::int64_t y_stride, std::int64_t rows, std::int64_t in, std::int64_t out, cudaStream_t stream) {
  TPB_CHECK(gemv_supported(x, x_stride, w, rows, in) && x_stride >= in && out > 0 && y_stride >= out,
            "gemv_bf16: rows " << rows << " (1.." << kGemvMaxRows << "), in " << in << " and x_stride " << x_stride
                               << " (multiples of 8), out " << out << ", y_stride " << y_stride
                               << ", x and w 16-byte aligned");
  const std::int64_t blocks = (out + kWarps - 1) / kWarps;
  TPB_CHECK(blocks <= INT32_MAX, "gemv_bf16: out " << out << " too large");
  gemv_kernel<<<static_cast<unsigned>(blocks), kWarps * 32, 0, stream>>>(x, x_stride, w, y, y_stride,
                                                                         static_cast<int>(rows), in, out);
  TPB_CUDA_CHECK_LAUNCH();
}

}  // namespace tpb::gpu
