// Synthetic weights generated on the device with the CPU's function
// (tpb/kernels/synthetic_weights.h), so CPU and GPU engines hold the same model.
// A shard is a 2-D window of a global [rows, cols] tensor: local element (r, c) is global
// element ((row_begin + r) * global_cols + col_begin + c). The fp32 value is rounded to bf16
// (or kept fp32) on the device, exactly as float_to_bf16 rounds it on the host.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "tpb/kernels/synthetic_weights.h"

namespace tpb::gpu {

struct SyntheticWindow {
  std::uint64_t key = 0;            // synthetic::tensor_key(seed, name_hash(global name))
  synthetic::InitKind kind = synthetic::InitKind::linear;
  float scale = 1.0f;               // for InitKind::linear: 1/sqrt(fan_in) rounded to float on the host
  std::int64_t global_cols = 0;     // columns of the global tensor (1 for vectors)
  std::int64_t row_begin = 0, rows = 0;  // window rows
  std::int64_t col_begin = 0, cols = 0;  // window columns
};

// out: device [rows, out_stride] (out_stride >= cols); only the window's columns are written.
void synthetic_fill_bf16(const SyntheticWindow& w, __nv_bfloat16* out, std::int64_t out_stride, cudaStream_t stream);
void synthetic_fill_f32(const SyntheticWindow& w, float* out, std::int64_t out_stride, cudaStream_t stream);

// The synthetic INT4 window (tpb/kernels/int4_format.h, synthetic::int4_q and int4_scale_bits)
// packed for the expert kernels (tpb/kernels/gpu/expert_gemm_int4.h): packed [rows, cols / 8]
// words and scales [rows, cols / 32] bf16, both contiguous. q of local (r, c) is
// int4_q(key, (row_begin + r) * global_cols + col_begin + c); the scale of local group (r, g) is
// int4_scale_bits(key, (row_begin + r) * ceil(global_cols / 32) + col_begin / 32 + g, w.scale).
// col_begin and cols must be multiples of 32 (checked): a window never splits a scale group.
void synthetic_fill_int4(const SyntheticWindow& w, std::uint32_t* packed, __nv_bfloat16* scales, cudaStream_t stream);

// Conversions between the device dtypes (count elements).
void convert_f32_to_bf16(const float* in, __nv_bfloat16* out, std::int64_t count, cudaStream_t stream);
void convert_bf16_to_f32(const __nv_bfloat16* in, float* out, std::int64_t count, cudaStream_t stream);

}  // namespace tpb::gpu
