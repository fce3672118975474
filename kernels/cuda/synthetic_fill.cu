// Synthetic weights on the device (tpb/kernels/gpu/synthetic_fill.h). Each thread computes
// synthetic::value for its elements with the very function the CPU source calls (the
// header is __host__ __device__ under nvcc); the value involves one fp32 multiply at most
// (exact for every kind but linear), so it is the CPU's value bit for bit, and
// __float2bfloat16_rn rounds to nearest even as tpb::float_to_bf16 does. The INT4 fill packs
// synthetic::int4_q and int4_scale_bits (integer hashing and one host-device rounding) the same
// way, so its words and scales are the host's bit for bit too.
#include "tpb/kernels/gpu/synthetic_fill.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "tpb/check.h"
#include "tpb/cuda_check.h"
#include "tpb/kernels/int4_format.h"

namespace tpb::gpu {

namespace {

constexpr int kThreads = 256;
constexpr std::int64_t kMaxBlocks = 1 << 16;

__device__ inline float out_value(float v, float*) { return v; }
__device__ inline __nv_bfloat16 out_value(float v, __nv_bfloat16*) { return __float2bfloat16_rn(v); }

template <class T>
__global__ void fill_kernel(SyntheticWindow w, T* __restrict__ out, std::int64_t out_stride) {
  const std::int64_t total = w.rows * w.cols;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    const std::int64_t r = i / w.cols;
    const std::int64_t c = i - r * w.cols;
    const auto index = static_cast<std::uint64_t>((w.row_begin + r) * w.global_cols + w.col_begin + c);
    out[r * out_stride + c] = out_value(synthetic::value(w.kind, w.scale, w.key, index), out);
  }
}

template <class T>
void fill(const SyntheticWindow& w, T* out, std::int64_t out_stride, cudaStream_t stream) {
  TPB_CHECK(w.rows >= 0 && w.cols >= 0 && w.row_begin >= 0 && w.col_begin >= 0 &&
                w.col_begin + w.cols <= w.global_cols && out_stride >= w.cols,
            "synthetic_fill: window rows [" << w.row_begin << ", +" << w.rows << "), cols [" << w.col_begin << ", +"
                                            << w.cols << ") of " << w.global_cols << " columns, out_stride "
                                            << out_stride);
  const std::int64_t total = w.rows * w.cols;
  if (total == 0) return;
  const unsigned blocks = static_cast<unsigned>(std::min((total + kThreads - 1) / kThreads, kMaxBlocks));
  fill_kernel<T><<<blocks, kThreads, 0, stream>>>(w, out, out_stride);
  TPB_CUDA_CHECK_LAUNCH();
}

__global__ void f32_to_bf16_kernel(const float* __restrict__ in, __nv_bfloat16* __restrict__ out,
                                   std::int64_t count) {
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += step)
    out[i] = __float2bfloat16_rn(in[i]);
}

__global__ void bf16_to_f32_kernel(const __nv_bfloat16* __restrict__ in, float* __restrict__ out,
                                   std::int64_t count) {
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += step)
    out[i] = __bfloat162float(in[i]);
}

// One thread per packed word (8 q of the hash) or per scale: indices below rows * words are
// words, the rest scales. The same host-device functions as the CPU source, so the same bits.
__global__ void fill_int4_kernel(SyntheticWindow w, std::uint32_t* __restrict__ packed,
                                 std::uint16_t* __restrict__ scales) {
  const std::int64_t words = w.cols / int4::kPerWord, groups = w.cols / int4::kGroupSize;
  const std::int64_t global_groups = int4::scale_groups(w.global_cols);
  const std::int64_t total_words = w.rows * words, total = total_words + w.rows * groups;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    if (i < total_words) {
      const std::int64_t r = i / words, c0 = (i - r * words) * int4::kPerWord;
      const std::uint64_t base = static_cast<std::uint64_t>((w.row_begin + r) * w.global_cols + w.col_begin + c0);
      int q[int4::kPerWord];
      for (int j = 0; j < int4::kPerWord; ++j) q[j] = synthetic::int4_q(w.key, base + j);
      packed[i] = int4::pack8(q);
    } else {
      const std::int64_t s = i - total_words, r = s / groups, gi = s - r * groups;
      const auto group_index =
          static_cast<std::uint64_t>((w.row_begin + r) * global_groups + w.col_begin / int4::kGroupSize + gi);
      scales[s] = synthetic::int4_scale_bits(w.key, group_index, w.scale);
    }
  }
}

unsigned elementwise_blocks(std::int64_t count) {
  return static_cast<unsigned>(std::min((count + kThreads - 1) / kThreads, kMaxBlocks));
}

}  // namespace

void synthetic_fill_bf16(const SyntheticWindow& w, __nv_bfloat16* out, std::int64_t out_stride, cudaStream_t stream) {
  fill(w, out, out_stride, stream);
}

void synthetic_fill_f32(const SyntheticWindow& w, float* out, std::int64_t out_stride, cudaStream_t stream) {
  fill(w, out, out_stride, stream);
}

void synthetic_fill_int4(const SyntheticWindow& w, std::uint32_t* packed, __nv_bfloat16* scales, cudaStream_t stream) {
  TPB_CHECK(w.rows >= 0 && w.cols >= 0 && w.row_begin >= 0 && w.col_begin >= 0 &&
                w.col_begin + w.cols <= w.global_cols,
            "synthetic_fill_int4: window rows [" << w.row_begin << ", +" << w.rows << "), cols [" << w.col_begin
                                                 << ", +" << w.cols << ") of " << w.global_cols << " columns");
  TPB_CHECK(w.col_begin % int4::kGroupSize == 0 && w.cols % int4::kGroupSize == 0,
            "synthetic_fill_int4: col_begin " << w.col_begin << " and cols " << w.cols
                                              << " must be multiples of 32 (an INT4 scale group)");
  const std::int64_t total = w.rows * (w.cols / int4::kPerWord + w.cols / int4::kGroupSize);
  if (total == 0) return;
  fill_int4_kernel<<<elementwise_blocks(total), kThreads, 0, stream>>>(w, packed,
                                                                         reinterpret_cast<std::uint16_t*>(scales));
  TPB_CUDA_CHECK_LAUNCH();
}

void convert_f32_to_bf16(const float* in, __nv_bfloat16* out, std::int64_t count, cudaStream_t stream) {
  TPB_CHECK(count >= 0, "convert_f32_to_bf16: count " << count);
  if (count == 0) return;
  f32_to_bf16_kernel<<<elementwise_blocks(count), kThreads, 0, stream>>>(in, out, count);
  TPB_CUDA_CHECK_LAUNCH();
}

void convert_bf16_to_f32(const __nv_bfloat16* in, float* out, std::int64_t count, cudaStream_t stream) {
  TPB_CHECK(count >= 0, "convert_bf16_to_f32: count " << count);
  if (count == 0) return;
  bf16_to_f32_kernel<<<elementwise_blocks(count), kThreads, 0, stream>>>(in, out, count);
  TPB_CUDA_CHECK_LAUNCH();
}

}  // namespace tpb::gpu
