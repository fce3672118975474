// tpb::gpu::Linear over cuBLASLt.
//
// Layout: cuBLASLt is column-major. A row-major matrix M[r, c] with row stride ld is the
// column-major matrix M^T[c, r] with the same ld, so the row-major product
//   y[rows, out] = x[rows, in] · w[out, in]^T
// is, column-major,
//   y^T[out, rows] = op(A) · B,   A = w stored [in, out] (ld w_ld), op = T,
//                                 B = x^T stored [in, rows] (ld x_ld), op = N,
//                                 D = y^T [out, rows] (ld y_ld);  m = out, n = rows, k = in.
// With w_trans (w row-major [in, out]) A is stored [out, in] and op = N.
//
// Determinism: cuBLASLt gives the same bits for the same algorithm, the same workspace size
// and the same SM count (cuBLAS's reproducibility guarantee; none of the default
// reduction schemes use floating-point atomics). The algorithm is chosen once per key and
// cached, and the key carries everything the heuristic sees (shape, strides, dtypes,
// alignment class), so a shape computes the same bits every call, eager or in a graph.
//
// Alignment: any leading dimension and batch stride, pointers aligned to their element. The
// heuristic is told each buffer's alignment (alignment_class) and sees the leading dimensions
// in the layouts, so a model whose widths are multiples of 8 elements gets the algorithms it
// always had, and one whose widths are not (a head dim of 13, a per-rank slice of 25) gets
// cuBLASLt's kernels for narrower alignment instead of an error (tests/gpu/linear_test.cpp).
//
// Not thread-safe, and one workspace per instance: use one Linear per stream.
#include "tpb/kernels/gpu/linear.h"

#include <cublasLt.h>

#include <cstdint>
#include <map>
#include <tuple>

#include "tpb/check.h"
#include "tpb/cuda_check.h"
#include "tpb/kernels/gpu/gemv.h"

#define TPB_CUBLASLT_CHECK(expr)                                                         \
  do {                                                                                   \
    cublasStatus_t tpb_lt_st_ = (expr);                                                  \
    if (tpb_lt_st_ != CUBLAS_STATUS_SUCCESS)                                             \
      TPB_DETAIL_FAIL(false, #expr, "cuBLASLt error " << cublasGetStatusName(tpb_lt_st_) \
                                                      << ": " << cublasGetStatusString(tpb_lt_st_)); \
  } while (0)

namespace tpb::gpu {

namespace {

// Large enough for cuBLASLt's split-K variants at the prefill shapes; fixed so that the
// algorithm choice (which depends on it) never changes.
constexpr std::size_t kWorkspaceBytes = 32u << 20;

// The heuristic's alignment preference for one operand's buffer (cuBLASLt sees the leading
// dimensions in the layouts): 256 (its default, the widest choice of kernels) when the pointer
// allows it, else 16 (the Hopper fast paths), else the pointer's own power of two (2, 4 or 8:
// narrow-alignment kernels for a slice at an odd element offset). Part of the cache key, so an
// algorithm picked for 256-byte pointers never runs on 16-byte ones.
std::uint32_t alignment_class(const void* p) {
  const std::uintptr_t a = reinterpret_cast<std::uintptr_t>(p);
  if (a % 256 == 0) return 256u;
  if (a % 16 == 0) return 16u;
  return static_cast<std::uint32_t>(a & (~a + 1));  // the lowest set bit: 2, 4 or 8
}

struct Key {
  cudaDataType_t d_type;
  bool w_trans;
  std::int64_t rows, in, out, x_ld, w_ld, y_ld, batch, x_bs, w_bs, y_bs;
  std::uint32_t align_x, align_w, align_y;
  auto tie() const {
    return std::tie(d_type, w_trans, rows, in, out, x_ld, w_ld, y_ld, batch, x_bs, w_bs, y_bs, align_x, align_w,
                    align_y);
  }
  bool operator<(const Key& o) const { return tie() < o.tie(); }
};

struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

void destroy(Plan& p) {
  if (p.d) cublasLtMatrixLayoutDestroy(p.d);
  if (p.b) cublasLtMatrixLayoutDestroy(p.b);
  if (p.a) cublasLtMatrixLayoutDestroy(p.a);
  if (p.desc) cublasLtMatmulDescDestroy(p.desc);
}

void set_batch(cublasLtMatrixLayout_t layout, std::int64_t batch, std::int64_t stride) {
  if (batch <= 1) return;
  const std::int32_t count = static_cast<std::int32_t>(batch);
  TPB_CUBLASLT_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                                      sizeof(count)));
  TPB_CUBLASLT_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                      &stride, sizeof(stride)));
}

void check_aligned(const void* p, std::int64_t elem_bytes, const char* what) {
  TPB_CHECK(reinterpret_cast<std::uintptr_t>(p) % static_cast<std::uintptr_t>(elem_bytes) == 0,
            "Linear: " << what << " pointer " << p << " is not aligned to its " << elem_bytes << "-byte elements");
}

}  // namespace

struct Linear::Impl {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  std::map<Key, Plan> plans;
  bool one_row_gemv = true;

  ~Impl() {
    for (auto& [k, p] : plans) destroy(p);
    if (workspace) cudaFree(workspace);
    if (handle) cublasLtDestroy(handle);
  }

  // Builds (once per key) the descriptors and the algorithm. Host-only calls: harmless even
  // inside a graph capture, but the engine runs every shape eagerly first anyway.
  const Plan& plan(const Key& k) {
    auto it = plans.find(k);
    if (it != plans.end()) return it->second;
    Plan p;
    try {
      TPB_CUBLASLT_CHECK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
      const cublasOperation_t op_a = k.w_trans ? CUBLAS_OP_N : CUBLAS_OP_T, op_b = CUBLAS_OP_N;
      TPB_CUBLASLT_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)));
      TPB_CUBLASLT_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)));
      // Stored shapes (before op): A is [in, out] for op T, [out, in] for op N.
      if (k.w_trans)
        TPB_CUBLASLT_CHECK(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_16BF, k.out, k.in, k.w_ld));
      else
        TPB_CUBLASLT_CHECK(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_16BF, k.in, k.out, k.w_ld));
      TPB_CUBLASLT_CHECK(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_16BF, k.in, k.rows, k.x_ld));
      TPB_CUBLASLT_CHECK(cublasLtMatrixLayoutCreate(&p.d, k.d_type, k.out, k.rows, k.y_ld));
      set_batch(p.a, k.batch, k.w_bs);
      set_batch(p.b, k.batch, k.x_bs);
      set_batch(p.d, k.batch, k.y_bs);

      cublasLtMatmulPreference_t pref = nullptr;
      TPB_CUBLASLT_CHECK(cublasLtMatmulPreferenceCreate(&pref));
      const std::uint64_t ws = kWorkspaceBytes;
      // C aliases D (beta = 0), so it has D's alignment.
      const std::uint32_t aligns[4] = {k.align_w, k.align_x, k.align_y, k.align_y};
      cublasLtMatmulHeuristicResult_t result{};
      int found = 0;
      cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                               &ws, sizeof(ws));
      const cublasLtMatmulPreferenceAttributes_t align_attr[4] = {
          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
      for (int i = 0; i < 4 && st == CUBLAS_STATUS_SUCCESS; ++i)
        st = cublasLtMatmulPreferenceSetAttribute(pref, align_attr[i], &aligns[i], sizeof(aligns[i]));
      if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulAlgoGetHeuristic(handle, p.desc, p.a, p.b, p.d, p.d, pref, 1, &result, &found);
      cublasLtMatmulPreferenceDestroy(pref);
      TPB_CUBLASLT_CHECK(st);
      TPB_CHECK(found > 0 && result.state == CUBLAS_STATUS_SUCCESS,
                "Linear: cuBLASLt has no algorithm for rows " << k.rows << " in " << k.in << " out " << k.out
                                                              << " batch " << k.batch << " (ld x " << k.x_ld
                                                              << " w " << k.w_ld << " y " << k.y_ld << ")");
      p.algo = result.algo;
    } catch (...) {
      destroy(p);
      throw;
    }
    return plans.emplace(k, p).first->second;
  }

  void matmul(const Key& k, const void* x, const void* w, void* y, cudaStream_t stream) {
    const Plan& p = plan(k);
    const float alpha = 1.f, beta = 0.f;
    TPB_CUBLASLT_CHECK(cublasLtMatmul(handle, p.desc, &alpha, w, p.a, x, p.b, &beta, y, p.d, y, p.d, &p.algo,
                                      workspace, kWorkspaceBytes, stream));
  }

  // Validates and runs one (possibly batched) product. elem_y: bytes of one output element.
  void run(cudaDataType_t d_type, std::int64_t elem_y, const void* x, std::int64_t x_ld, std::int64_t x_bs,
           const void* w, bool w_trans, std::int64_t w_ld, std::int64_t w_bs, void* y, std::int64_t y_ld,
           std::int64_t y_bs, std::int64_t batch, std::int64_t rows, std::int64_t in, std::int64_t out,
           cudaStream_t stream) {
    TPB_CHECK(rows >= 0 && in > 0 && out > 0 && batch >= 0,
              "Linear: bad shape rows " << rows << " in " << in << " out " << out << " batch " << batch);
    TPB_CHECK(batch <= INT32_MAX, "Linear: batch " << batch << " exceeds cuBLASLt's int32 batch count");
    if (rows == 0 || batch == 0) return;
    TPB_CHECK(x_ld >= in, "Linear: x row stride " << x_ld << " < in " << in);
    TPB_CHECK(y_ld >= out, "Linear: y row stride " << y_ld << " < out " << out);
    TPB_CHECK(w_ld >= (w_trans ? out : in), "Linear: w row stride " << w_ld << " too small");
    check_aligned(x, 2, "x");
    check_aligned(w, 2, "w");
    check_aligned(y, elem_y, "y");
    if (batch <= 1) x_bs = w_bs = y_bs = 0;  // unused: keep them out of the cache key
    if (one_row_gemv && rows == 1 && batch == 1 && !w_trans && w_ld == in && gemv_supported(x, w, in)) {
      if (d_type == CUDA_R_16BF)
        gemv_bf16_out(static_cast<const __nv_bfloat16*>(x), static_cast<const __nv_bfloat16*>(w),
                      static_cast<__nv_bfloat16*>(y), in, out, stream);
      else
        gemv_f32_out(static_cast<const __nv_bfloat16*>(x), static_cast<const __nv_bfloat16*>(w), static_cast<float*>(y),
                     in, out, stream);
      return;
    }
    const Key k{d_type, w_trans, rows, in, out, x_ld, w_ld, y_ld, batch, x_bs, w_bs, y_bs,
                alignment_class(x), alignment_class(w), alignment_class(y)};
    matmul(k, x, w, y, stream);
  }
};

Linear::Linear() : impl_(std::make_unique<Impl>()) {
  TPB_CUBLASLT_CHECK(cublasLtCreate(&impl_->handle));
  TPB_CUDA_CHECK(cudaMalloc(&impl_->workspace, kWorkspaceBytes));
}

Linear::~Linear() = default;

void Linear::bf16_out(const __nv_bfloat16* x, std::int64_t x_stride, const __nv_bfloat16* w, __nv_bfloat16* y,
                      std::int64_t y_stride, std::int64_t rows, std::int64_t in, std::int64_t out,
                      cudaStream_t stream) {
  impl_->run(CUDA_R_16BF, 2, x, x_stride, 0, w, false, in, 0, y, y_stride, 0, 1, rows, in, out, stream);
}

void Linear::f32_out(const __nv_bfloat16* x, std::int64_t x_stride, const __nv_bfloat16* w, float* y,
                     std::int64_t y_stride, std::int64_t rows, std::int64_t in, std::int64_t out,
                     cudaStream_t stream) {
  impl_->run(CUDA_R_32F, 4, x, x_stride, 0, w, false, in, 0, y, y_stride, 0, 1, rows, in, out, stream);
}

void Linear::bf16_out_pair(const __nv_bfloat16* x, std::int64_t rows, std::int64_t in, const __nv_bfloat16* w,
                           __nv_bfloat16* y, std::int64_t out, const __nv_bfloat16* w2, __nv_bfloat16* y2,
                           std::int64_t out2, cudaStream_t stream) {
  if (impl_->one_row_gemv && rows == 1 && gemv_supported(x, w, in) && gemv_supported(x, w2, in) && out > 0 &&
      out2 > 0) {
    gemv_bf16_out_pair(x, in, w, y, out, w2, y2, out2, stream);
    return;
  }
  bf16_out(x, in, w, y, out, rows, in, out, stream);
  bf16_out(x, in, w2, y2, out2, rows, in, out2, stream);
}

void Linear::bf16_out_batched(const __nv_bfloat16* x, std::int64_t x_ld, std::int64_t x_batch_stride,
                              const __nv_bfloat16* w, bool w_trans, std::int64_t w_ld,
                              std::int64_t w_batch_stride, __nv_bfloat16* y, std::int64_t y_ld,
                              std::int64_t y_batch_stride, std::int64_t batch, std::int64_t rows, std::int64_t in,
                              std::int64_t out, cudaStream_t stream) {
  impl_->run(CUDA_R_16BF, 2, x, x_ld, x_batch_stride, w, w_trans, w_ld, w_batch_stride, y, y_ld, y_batch_stride,
             batch, rows, in, out, stream);
}

std::size_t Linear::workspace_bytes() const { return kWorkspaceBytes; }

void Linear::set_one_row_gemv(bool on) { impl_->one_row_gemv = on; }

}  // namespace tpb::gpu
