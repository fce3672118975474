// Linear layer (no bias), the GEMM every projection uses: y[r, o] = sum_i x[r, i] * w[o, i],
// with w in PyTorch's nn.Linear layout [out, in] (row-major). fp32 inputs, fp32 accumulate.
//
// The dot product uses 8 independent partial sums combined in a fixed tree, so the result
// is deterministic (no reassociation is left to the compiler) and still vectorises.
#pragma once

#include <cstdint>

namespace tpb::kernels {

// Deterministic fp32 dot product of length n (the order of the sum is part of the spec).
float dot_f32(const float* a, const float* b, std::int64_t n);

// y [rows, out] = x [rows, in] · w [out, in]^T.
void linear_ref(const float* x, const float* w, float* y, std::int64_t rows, std::int64_t in,
                std::int64_t out);

}  // namespace tpb::kernels
