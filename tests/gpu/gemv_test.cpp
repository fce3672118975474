// gpu::gemv_bf16 (tpb/kernels/gpu/gemv.h), the decode path of Linear::bf16_out: against the
// host reference (the tolerance of linear_test.cpp: half a bf16 ulp + in * 2^-22 * sum|x w|),
// with strided rows and every row count 1..8; bitwise against expert_gemm_grouped on the same
// product (one expert holding every row: the two share weight_stream.cuh's sum order); and
// what it does not take it refuses by name.
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "gpu_test_support.h"
#include "tpb/check.h"
#include "tpb/cuda_check.h"
#include "tpb/dtype.h"
#include "tpb/kernels/gpu/expert_gemm.h"
#include "tpb/kernels/gpu/gemv.h"
#include "tpb/kernels/linear.h"

namespace tpb::test {
namespace {

TEST(GpuGemv, MatchesReferenceForEveryRowCountWithStrides) {
  TPB_REQUIRE_GPU();
  // Kimi's kv_a (in 7168, out 576), an in that is not a multiple of 256 (the last steps of a
  // row are partial), an out that is not a multiple of the 8 warps of a block.
  const std::int64_t shapes[][2] = {{7168, 576}, {200, 45}, {1536, 130}};
  std::uint32_t seed = 700;
  for (const auto& sh : shapes) {
    const std::int64_t in = sh[0], out = sh[1], x_stride = in + 16, y_stride = out + 3;
    for (std::int64_t rows = 1; rows <= gpu::kGemvMaxRows; ++rows) {
      const std::string what = "rows " + std::to_string(rows) + " in " + std::to_string(in) + " out " + std::to_string(out);
      auto hx = random_bf16(static_cast<std::size_t>(rows * x_stride), seed++);
      auto hw = random_bf16(static_cast<std::size_t>(out * in), seed++);
      const std::uint16_t sentinel = float_to_bf16(4321.f);
      std::vector<std::uint16_t> hy(static_cast<std::size_t>(rows * y_stride), sentinel);
      DevBuf<std::uint16_t> x(hx.size()), w(hw.size()), y(hy.size());
      x.upload(hx);
      w.upload(hw);
      y.upload(hy);
      gpu::gemv_bf16(bf(x.p), x_stride, bf(w.p), bf(y.p), y_stride, rows, in, out, nullptr);
      TPB_CUDA_CHECK(cudaDeviceSynchronize());
      const std::vector<std::uint16_t> got = y.download();

      std::vector<float> xd(static_cast<std::size_t>(rows * in)), ax(xd.size()), wf = widen(hw), aw(wf.size());
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t k = 0; k < in; ++k) xd[r * in + k] = bf16_to_float(hx[r * x_stride + k]);
      for (std::size_t i = 0; i < xd.size(); ++i) ax[i] = std::fabs(xd[i]);
      for (std::size_t i = 0; i < wf.size(); ++i) aw[i] = std::fabs(wf[i]);
      std::vector<float> ref(static_cast<std::size_t>(rows * out)), absdot(ref.size());
      kernels::linear_ref(xd.data(), wf.data(), ref.data(), rows, in, out);
      kernels::linear_ref(ax.data(), aw.data(), absdot.data(), rows, in, out);
      int bad = 0;
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t o = 0; o < y_stride; ++o) {
          const std::uint16_t g = got[r * y_stride + o];
          if (o >= out) {
            if (g != sentinel && ++bad <= 5) ADD_FAILURE() << what << ": wrote outside the slice at " << r << "," << o;
            continue;
          }
          const double want = ref[r * out + o];
          const double tol = std::ldexp(std::fabs(want), -8) + static_cast<double>(in) * std::ldexp(absdot[r * out + o], -22);
          if (!(std::fabs(bf16_to_float(g) - want) <= tol) && ++bad <= 5)
            ADD_FAILURE() << what << ": y[" << r << "," << o << "] = " << bf16_to_float(g) << ", want " << want;
        }
      EXPECT_EQ(bad, 0) << what;
    }
  }
}

TEST(GpuGemv, BitwiseTheGroupedExpertKernelsSum) {
  TPB_REQUIRE_GPU();
  const std::int64_t rows = 5, in = 7168, out = 2048;
  auto hx = random_bf16(static_cast<std::size_t>(rows * in), 801);
  auto hw = random_bf16(static_cast<std::size_t>(out * in), 802);
  DevBuf<std::uint16_t> x(hx.size()), w(hw.size()), y_gemv(static_cast<std::size_t>(rows * out)), y_grouped(y_gemv.n);
  DevBuf<std::int32_t> offsets(2);
  x.upload(hx);
  w.upload(hw);
  offsets.upload(std::vector<std::int32_t>{0, static_cast<std::int32_t>(rows)});
  gpu::gemv_bf16(bf(x.p), in, bf(w.p), bf(y_gemv.p), out, rows, in, out, nullptr);
  gpu::expert_gemm_grouped(bf(x.p), offsets.p, 1, rows, bf(w.p), out * in, in, out, bf(y_grouped.p), nullptr);
  TPB_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_TRUE(y_gemv.download() == y_grouped.download());
}

TEST(GpuGemv, RefusesWhatItDoesNotTake) {
  TPB_REQUIRE_GPU();
  DevBuf<std::uint16_t> x(9 * 64), w(64 * 64), y(9 * 64);
  EXPECT_FALSE(gpu::gemv_supported(x.p, 64, w.p, 9, 64));       // rows above kGemvMaxRows
  EXPECT_FALSE(gpu::gemv_supported(x.p, 64, w.p, 1, 60));       // in not a multiple of 8
  EXPECT_FALSE(gpu::gemv_supported(x.p + 1, 64, w.p, 1, 64));   // x not 16-byte aligned
  EXPECT_TRUE(gpu::gemv_supported(x.p, 64, w.p, 8, 64));
  EXPECT_THROW(gpu::gemv_bf16(bf(x.p), 64, bf(w.p), bf(y.p), 64, 9, 64, 64, nullptr), Error);
  EXPECT_THROW(gpu::gemv_bf16(bf(x.p), 64, bf(w.p), bf(y.p), 10, 1, 64, 64, nullptr), Error);  // y_stride < out
}

}  // namespace
}  // namespace tpb::test
