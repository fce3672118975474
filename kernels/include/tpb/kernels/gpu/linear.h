// Dense GEMMs through cuBLASLt: y[rows, out] = x[rows, in] · w[out, in]^T, bf16 in, fp32
// accumulate, bf16 or fp32 out (nn.Linear's layout, as the CPU reference tpb/kernels/linear.h);
// one-row products through the split-K gemv (see set_one_row_gemv).
// Deterministic: one algorithm per shape, chosen once and cached, no atomics (cuBLAS's
// default), a fixed workspace, so a shape computes the same bits every call and in a graph.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>

namespace tpb::gpu {

class Linear {
 public:
  // Creates the cuBLASLt handle and a workspace on the current device.
  Linear();
  ~Linear();
  Linear(const Linear&) = delete;
  Linear& operator=(const Linear&) = delete;

  // Row strides in elements: x_stride >= in, y_stride >= out (e.g. writing into a slice of a
  // wider row). Capturable in a CUDA graph once the shape has run eagerly.
  void bf16_out(const __nv_bfloat16* x, std::int64_t x_stride, const __nv_bfloat16* w, __nv_bfloat16* y,
                std::int64_t y_stride, std::int64_t rows, std::int64_t in, std::int64_t out, cudaStream_t stream);
  void f32_out(const __nv_bfloat16* x, std::int64_t x_stride, const __nv_bfloat16* w, float* y,
               std::int64_t y_stride, std::int64_t rows, std::int64_t in, std::int64_t out, cudaStream_t stream);

  // Two products of the same x, y = x · w^T and y2 = x · w2^T (contiguous rows: strides in,
  // out, out2): at one row with the gemv on, one launch (gemv_bf16_out_pair), else two bf16_out.
  void bf16_out_pair(const __nv_bfloat16* x, std::int64_t rows, std::int64_t in, const __nv_bfloat16* w,
                     __nv_bfloat16* y, std::int64_t out, const __nv_bfloat16* w2, __nv_bfloat16* y2, std::int64_t out2,
                     cudaStream_t stream);

  // Batched over `batch` independent products with element strides between them:
  // y_b[rows, out] = x_b[rows, in] · w_b[out, in]^T (w_trans = false) or x_b · w_b[in, out] (w_trans = true).
  // The absorbed-MLA projections are this over heads.
  void bf16_out_batched(const __nv_bfloat16* x, std::int64_t x_ld, std::int64_t x_batch_stride,
                        const __nv_bfloat16* w, bool w_trans, std::int64_t w_ld, std::int64_t w_batch_stride,
                        __nv_bfloat16* y, std::int64_t y_ld, std::int64_t y_batch_stride, std::int64_t batch,
                        std::int64_t rows, std::int64_t in, std::int64_t out, cudaStream_t stream);

  std::size_t workspace_bytes() const;

  // One-row products (bf16_out / f32_out at rows 1, in a multiple of 8 up to kGemvMaxIn,
  // aligned) run the split-K gemv (tpb/kernels/gpu/gemv.h) instead of cuBLASLt, which reads
  // decode-sized weights at a fraction of the copy bandwidth. On by default; off runs
  // cuBLASLt for every shape (the benchmarks' side-by-side comparison).
  void set_one_row_gemv(bool on);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tpb::gpu
