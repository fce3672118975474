// One-row dense product (tpb/kernels/gpu/gemv.h): blocks of kGemvRowsPerBlock output rows,
// one warp per 1024-element slice of the input row.
#include "tpb/kernels/gpu/gemv.h"

#include <cuda_bf16.h>

#include <cstdint>
#include <string>

#include "tpb/check.h"
#include "tpb/cuda_check.h"
#include "cuda/bf16_vectors.cuh"
#include "cuda/programmatic_launch.cuh"

namespace tpb::gpu {

namespace {

using detail::load_early;

constexpr int kVecsPerLane = static_cast<int>(kGemvSliceElems / (32 * 8));  // 4
constexpr int kRows = static_cast<int>(kGemvRowsPerBlock);

__device__ __forceinline__ float dot8(uint4 w, uint4 x, float acc) {
  const std::uint32_t wv[4] = {w.x, w.y, w.z, w.w}, xv[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    acc = fmaf(__uint_as_float(wv[i] << 16), __uint_as_float(xv[i] << 16), acc);
    acc = fmaf(__uint_as_float(wv[i] & 0xffff0000u), __uint_as_float(xv[i] & 0xffff0000u), acc);
  }
  return acc;
}

__device__ __forceinline__ void store(__nv_bfloat16* y, float v) { *y = __float2bfloat16_rn(v); }
__device__ __forceinline__ void store(float* y, float v) { *y = v; }

// blockDim = 32 x slices. Warp s covers vectors [s * 128, (s + 1) * 128) of the row; lane l
// its vectors s * 128 + l + 32 i, i < 4 (coalesced 512-byte loads).
// Two products of the same x in one launch (gemv_bf16_out_pair): blocks [0, first_blocks) take
// (w, y, out), the others (w2, y2, out2). One product: first_blocks = gridDim.x.
template <class Out>
__global__ void __launch_bounds__(32 * kGemvMaxIn / kGemvSliceElems)
    gemv_kernel(const uint4* __restrict__ x, const uint4* __restrict__ w, Out* __restrict__ y, int in_vecs,
                std::int64_t out, unsigned first_blocks, const uint4* __restrict__ w2, Out* __restrict__ y2,
                std::int64_t out2) {
  __shared__ float partial[kRows][32];
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int slices = static_cast<int>(blockDim.x) / 32;
  unsigned block = blockIdx.x;
  if (block >= first_blocks) {
    block -= first_blocks;
    w = w2;
    y = y2;
    out = out2;
  }
  const std::int64_t row0 = static_cast<std::int64_t>(block) * kRows;
  const int v0 = warp * 32 * kVecsPerLane + lane;
  detail::chain_after_prior_grids();
  // Loads are unconditional (no branch between them, so all are in flight together): a vector
  // past the row's end reads the row's first vector against a zero x (adds +0, no bit
  // changes), and a row past `out` reads row out - 1, whose sum is never stored.
  uint4 xv[kVecsPerLane];
  int vec[kVecsPerLane];
#pragma unroll
  for (int i = 0; i < kVecsPerLane; ++i) {
    const bool live = v0 + 32 * i < in_vecs;
    vec[i] = live ? v0 + 32 * i : 0;
    xv[i] = __ldg(x + vec[i]);
    if (!live) xv[i] = make_uint4(0, 0, 0, 0);
  }
  uint4 wv[kRows][kVecsPerLane];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const std::int64_t row = row0 + r < out ? row0 + r : out - 1;
#pragma unroll
    for (int i = 0; i < kVecsPerLane; ++i) wv[r][i] = load_early(w + row * in_vecs + vec[i]);
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    float acc = 0.0f;
#pragma unroll
    for (int i = 0; i < kVecsPerLane; ++i) acc = dot8(wv[r][i], xv[i], acc);
#pragma unroll
    for (int o = 16; o >= 1; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);  // butterfly: same bits in every lane
    if (lane == 0) partial[r][warp] = acc;
  }
  __syncthreads();
  if (threadIdx.x < kRows && row0 + threadIdx.x < out) {
    float sum = 0.0f;
    for (int s = 0; s < slices; ++s) sum += partial[threadIdx.x][s];
    store(y + row0 + threadIdx.x, sum);
  }
}

// One product (w2 == nullptr) or two of the same x in one launch: the first's blocks, then the second's.
template <class Out>
void launch(const __nv_bfloat16* x, std::int64_t in, const __nv_bfloat16* w, Out* y, std::int64_t out,
            const __nv_bfloat16* w2, Out* y2, std::int64_t out2, cudaStream_t stream) {
  const bool pair = w2 != nullptr;
  TPB_CHECK(gemv_supported(x, w, in) && out > 0 && (!pair || (gemv_supported(x, w2, in) && out2 > 0)),
            "gemv: in " << in << " (a multiple of 8 up to " << kGemvMaxIn << "), out " << out
                        << (pair ? " and " + std::to_string(out2) : std::string()) << ", x and w 16-byte aligned");
  const std::int64_t blocks = (out + kRows - 1) / kRows, blocks2 = pair ? (out2 + kRows - 1) / kRows : 0;
  TPB_CHECK(blocks + blocks2 <= INT32_MAX, "gemv: out " << out << (pair ? " + " + std::to_string(out2) : std::string())
                                                        << " too large");
  const int slices = static_cast<int>((in + kGemvSliceElems - 1) / kGemvSliceElems);
  detail::launch_chained(gemv_kernel<Out>, static_cast<unsigned>(blocks + blocks2), 32 * slices, 0, stream,
                         reinterpret_cast<const uint4*>(x), reinterpret_cast<const uint4*>(w), y,
                         static_cast<int>(in / 8), out, static_cast<unsigned>(blocks),
                         reinterpret_cast<const uint4*>(w2), y2, out2);
  TPB_CUDA_CHECK_LAUNCH();
}

}  // namespace

bool gemv_supported(const void* x, const void* w, std::int64_t in) {
  return in > 0 && in % 8 == 0 && in <= kGemvMaxIn && reinterpret_cast<std::uintptr_t>(x) % 16 == 0 &&
         reinterpret_cast<std::uintptr_t>(w) % 16 == 0;
}

void gemv_bf16_out(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y, std::int64_t in,
                   std::int64_t out, cudaStream_t stream) {
  launch<__nv_bfloat16>(x, in, w, y, out, nullptr, nullptr, 0, stream);
}

void gemv_f32_out(const __nv_bfloat16* x, const __nv_bfloat16* w, float* y, std::int64_t in, std::int64_t out,
                  cudaStream_t stream) {
  launch<float>(x, in, w, y, out, nullptr, nullptr, 0, stream);
}

void gemv_bf16_out_pair(const __nv_bfloat16* x, std::int64_t in, const __nv_bfloat16* w, __nv_bfloat16* y,
                        std::int64_t out, const __nv_bfloat16* w2, __nv_bfloat16* y2, std::int64_t out2,
                        cudaStream_t stream) {
  TPB_CHECK(w2 != nullptr, "gemv pair: no second weight");
  launch<__nv_bfloat16>(x, in, w, y, out, w2, y2, out2, stream);
}

}  // namespace tpb::gpu
