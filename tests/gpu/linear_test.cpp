// tpb::gpu::Linear (cuBLASLt) against the CPU reference tpb::kernels::linear_ref.
//
// Inputs are random bf16; the reference consumes the same bf16 values widened to fp32, so
// the GPU and the reference differ only by the order of the fp32 sums and, for bf16 out, the
// final rounding. Tolerance per element (ref = reference sum, absdot = sum |x_i w_i|):
//   bf16 out: 2^-8 |ref| (round to nearest bf16: half an ulp, ulp = 2^-7 of the binade)
//             + in * 2^-22 * absdot (the CPU's fp32 sum is within in * 2^-24 * absdot; tensor
//             cores truncate (round toward zero) when they accumulate, up to one ulp per add:
//             in * 2^-23 * absdot; both fit in in * 2^-22 * absdot)
//   f32 out:  the second term alone.
// and over the whole output rel-L2 <= 2^-8 (bf16: the rounding's rms is ~2^-9/sqrt(3)) or
// 2^-12 (f32: truncation bias of ~in/16 MMA steps of <= 1 ulp each, ~3e-5 at in = 7168).
// Layout bugs (transposes, strides, batch offsets) give O(1) errors and fail both.
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gpu_test_support.h"
#include "tpb/check.h"
#include "tpb/cuda_check.h"
#include "tpb/dtype.h"
#include "tpb/kernels/device.h"
#include "tpb/kernels/gpu/gemv.h"
#include "tpb/kernels/gpu/linear.h"
#include "tpb/kernels/linear.h"

namespace tpb::test {
namespace {

// Reference and |.|-reference of y[rows, out] = x[rows, in] · w[out, in]^T on dense host rows.
struct Ref {
  std::vector<float> y, absdot;
};
Ref reference(const std::vector<float>& x, const std::vector<float>& w, std::int64_t rows, std::int64_t in,
              std::int64_t out) {
  Ref r;
  r.y.resize(static_cast<std::size_t>(rows * out));
  r.absdot.resize(r.y.size());
  kernels::linear_ref(x.data(), w.data(), r.y.data(), rows, in, out);
  std::vector<float> ax(x.size()), aw(w.size());
  for (std::size_t i = 0; i < x.size(); ++i) ax[i] = std::fabs(x[i]);
  for (std::size_t i = 0; i < w.size(); ++i) aw[i] = std::fabs(w[i]);
  kernels::linear_ref(ax.data(), aw.data(), r.absdot.data(), rows, in, out);
  return r;
}

// Compares got[i] with ref.y[i] under the tolerance in the file comment.
void expect_close(const std::vector<float>& got, const Ref& ref, std::int64_t in, bool bf16_out,
                  const std::string& what) {
  ASSERT_EQ(got.size(), ref.y.size());
  double err2 = 0, ref2 = 0;
  int bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double d = std::fabs(static_cast<double>(got[i]) - ref.y[i]);
    const double tol = (bf16_out ? std::ldexp(std::fabs(ref.y[i]), -8) : 0.0) +
                       static_cast<double>(in) * std::ldexp(static_cast<double>(ref.absdot[i]), -22);
    if (!(d <= tol) && ++bad <= 5)
      ADD_FAILURE() << what << ": element " << i << " got " << got[i] << " want " << ref.y[i] << " (tol " << tol
                    << ")";
    err2 += d * d;
    ref2 += static_cast<double>(ref.y[i]) * ref.y[i];
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " elements out of tolerance";
  ASSERT_GT(ref2, 0.0) << what << ": the reference is all zeros, the test would be vacuous";
  EXPECT_LE(std::sqrt(err2 / ref2), std::ldexp(1.0, bf16_out ? -8 : -12)) << what << ": rel-L2";
}

struct Shape {
  std::int64_t rows, in, out;
};
// Odd row counts, sizes that are not multiples of any tile (72, 40, 328), and the Kimi
// kv_a shape at a decode batch.
const Shape kShapes[] = {{3, 72, 40}, {1, 256, 128}, {64, 512, 328}, {257, 1536, 576}, {5, 7168, 576}};

TEST(GpuLinear, Bf16OutMatchesReference) {
  TPB_REQUIRE_GPU();
  gpu::Linear lin;
  std::uint32_t seed = 100;
  for (const Shape& s : kShapes) {
    auto hx = random_bf16(static_cast<std::size_t>(s.rows * s.in), seed++);
    auto hw = random_bf16(static_cast<std::size_t>(s.out * s.in), seed++);
    DevBuf<std::uint16_t> x(hx.size()), w(hw.size()), y(static_cast<std::size_t>(s.rows * s.out));
    x.upload(hx);
    w.upload(hw);
    lin.bf16_out(bf(x.p), s.in, bf(w.p), bf(y.p), s.out, s.rows, s.in, s.out, nullptr);
    TPB_CUDA_CHECK(cudaDeviceSynchronize());
    const Ref ref = reference(widen(hx), widen(hw), s.rows, s.in, s.out);
    expect_close(widen(y.download()), ref, s.in, true,
                 "bf16_out " + std::to_string(s.rows) + "x" + std::to_string(s.in) + "x" + std::to_string(s.out));
  }
}

TEST(GpuLinear, F32OutMatchesReference) {
  TPB_REQUIRE_GPU();
  gpu::Linear lin;
  std::uint32_t seed = 200;
  for (const Shape& s : kShapes) {
    auto hx = random_bf16(static_cast<std::size_t>(s.rows * s.in), seed++);
    auto hw = random_bf16(static_cast<std::size_t>(s.out * s.in), seed++);
    DevBuf<std::uint16_t> x(hx.size()), w(hw.size());
    DevBuf<float> y(static_cast<std::size_t>(s.rows * s.out));
    x.upload(hx);
    w.upload(hw);
    lin.f32_out(bf(x.p), s.in, bf(w.p), y.p, s.out, s.rows, s.in, s.out, nullptr);
    TPB_CUDA_CHECK(cudaDeviceSynchronize());
    const Ref ref = reference(widen(hx), widen(hw), s.rows, s.in, s.out);
    expect_close(y.download(), ref, s.in, false,
                 "f32_out " + std::to_string(s.rows) + "x" + std::to_string(s.in) + "x" + std::to_string(s.out));
  }
}

// x read from a slice of wider rows, y written into columns [8, 8 + out) of wider rows: the
// columns outside the slice must keep their sentinel.
TEST(GpuLinear, StridedRowsWriteOnlyTheirSlice) {
  TPB_REQUIRE_GPU();
  gpu::Linear lin;
  const std::int64_t rows = 7, in = 136, out = 48, x_stride = in + 24, y_stride = out + 32, y_col = 8;
  auto hx_wide = random_bf16(static_cast<std::size_t>(rows * x_stride), 300);
  auto hw = random_bf16(static_cast<std::size_t>(out * in), 301);
  const std::uint16_t sentinel = float_to_bf16(1234.f);
  std::vector<std::uint16_t> hy(static_cast<std::size_t>(rows * y_stride), sentinel);
  std::vector<float> y32_init(static_cast<std::size_t>(rows * y_stride), -777.f);
  DevBuf<std::uint16_t> x(hx_wide.size()), w(hw.size()), y(hy.size());
  DevBuf<float> y32(y32_init.size());
  x.upload(hx_wide);
  w.upload(hw);
  y.upload(hy);
  y32.upload(y32_init);
  lin.bf16_out(bf(x.p), x_stride, bf(w.p), bf(y.p) + y_col, y_stride, rows, in, out, nullptr);
  lin.f32_out(bf(x.p), x_stride, bf(w.p), y32.p + y_col, y_stride, rows, in, out, nullptr);
  TPB_CUDA_CHECK(cudaDeviceSynchronize());

  std::vector<float> hx(static_cast<std::size_t>(rows * in));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t i = 0; i < in; ++i) hx[r * in + i] = bf16_to_float(hx_wide[r * x_stride + i]);
  const Ref ref = reference(hx, widen(hw), rows, in, out);
  const auto gy = y.download();
  const auto gy32 = y32.download();
  std::vector<float> got(ref.y.size()), got32(ref.y.size());
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < y_stride; ++c) {
      const std::size_t i = static_cast<std::size_t>(r * y_stride + c);
      if (c >= y_col && c < y_col + out) {
        got[r * out + c - y_col] = bf16_to_float(gy[i]);
        got32[r * out + c - y_col] = gy32[i];
      } else {
        EXPECT_EQ(gy[i], sentinel) << "bf16 y row " << r << " col " << c << " outside the slice was written";
        EXPECT_EQ(gy32[i], -777.f) << "f32 y row " << r << " col " << c << " outside the slice was written";
      }
    }
  expect_close(got, ref, in, true, "strided bf16_out");
  expect_close(got32, ref, in, false, "strided f32_out");
}

// The absorbed-MLA pattern: x is [rows, heads, x_bs] (per-head slices of a token row), head h's
// weight starts h * w_bs in, [out, in] or (w_trans) [in, out] with row stride w_ld, y is
// [rows, heads, y_bs]; each head checked against the reference alone.
struct Batched {
  std::int64_t heads, rows, in, out;
  std::int64_t x_bs, w_bs, w_ld, y_bs;
  bool w_trans;
};

void run_batched(const Batched& b, std::uint32_t seed, const std::string& what) {
  gpu::Linear lin;
  const std::int64_t x_ld = b.heads * b.x_bs, y_ld = b.heads * b.y_bs;
  auto hx = random_bf16(static_cast<std::size_t>(b.rows * x_ld), seed);
  auto hw = random_bf16(static_cast<std::size_t>(b.heads * b.w_bs), seed + 1);
  DevBuf<std::uint16_t> x(hx.size()), w(hw.size()), y(static_cast<std::size_t>(b.rows * y_ld));
  x.upload(hx);
  w.upload(hw);
  lin.bf16_out_batched(bf(x.p), x_ld, b.x_bs, bf(w.p), b.w_trans, b.w_ld, b.w_bs, bf(y.p), y_ld, b.y_bs, b.heads, b.rows,
                       b.in, b.out, nullptr);
  TPB_CUDA_CHECK(cudaDeviceSynchronize());
  const auto gy = y.download();
  for (std::int64_t h = 0; h < b.heads; ++h) {
    std::vector<float> xh(static_cast<std::size_t>(b.rows * b.in)), wh(static_cast<std::size_t>(b.out * b.in)),
        got(static_cast<std::size_t>(b.rows * b.out));
    for (std::int64_t r = 0; r < b.rows; ++r)
      for (std::int64_t i = 0; i < b.in; ++i) xh[r * b.in + i] = bf16_to_float(hx[r * x_ld + h * b.x_bs + i]);
    for (std::int64_t o = 0; o < b.out; ++o)
      for (std::int64_t i = 0; i < b.in; ++i)  // w_trans: w_h is [in, out]; the reference wants [out, in]
        wh[o * b.in + i] = bf16_to_float(b.w_trans ? hw[h * b.w_bs + i * b.w_ld + o] : hw[h * b.w_bs + o * b.w_ld + i]);
    for (std::int64_t r = 0; r < b.rows; ++r)
      for (std::int64_t o = 0; o < b.out; ++o) got[r * b.out + o] = bf16_to_float(gy[r * y_ld + h * b.y_bs + o]);
    expect_close(got, reference(xh, wh, b.rows, b.in, b.out), b.in, true, what + " head " + std::to_string(h));
  }
}

void run_batched(bool w_trans) {
  const std::int64_t in = 48, out = 24;
  run_batched({5, 9, in, out, in, out * in, w_trans ? out : in, out, w_trans}, w_trans ? 400 : 410,
              std::string("batched w_trans=") + (w_trans ? "1" : "0"));
}

TEST(GpuLinear, BatchedMatchesReference) {
  TPB_REQUIRE_GPU();
  run_batched(false);
}

TEST(GpuLinear, BatchedTransposedWeightMatchesReference) {
  TPB_REQUIRE_GPU();
  run_batched(true);
}

// Widths that are not multiples of 8 elements (an HF config's head dim of 13, a per-rank slice
// of 25) and pointers 2 bytes past a 16-byte boundary: cuBLASLt's narrow-alignment kernels,
// the same numbers as the reference. x and y sit one element into their buffers, at odd row
// strides; the batched form has odd batch strides too.
TEST(GpuLinear, UnalignedWidthsAndPointersMatchReference) {
  TPB_REQUIRE_GPU();
  gpu::Linear lin;
  const Shape shapes[] = {{3, 7, 13}, {1, 52, 25}, {12, 25, 52}, {24, 11, 63}, {2, 100, 41}};
  std::uint32_t seed = 500;
  for (const Shape& s : shapes) {
    const std::int64_t x_stride = s.in + 3, y_stride = s.out + 1;
    auto hx_wide = random_bf16(static_cast<std::size_t>(s.rows * x_stride + 1), seed++);
    auto hw = random_bf16(static_cast<std::size_t>(s.out * s.in), seed++);
    DevBuf<std::uint16_t> x(hx_wide.size()), w(hw.size()), y(static_cast<std::size_t>(s.rows * y_stride + 1));
    DevBuf<float> y32(static_cast<std::size_t>(s.rows * y_stride + 1));
    x.upload(hx_wide);
    w.upload(hw);
    lin.bf16_out(bf(x.p) + 1, x_stride, bf(w.p), bf(y.p) + 1, y_stride, s.rows, s.in, s.out, nullptr);
    lin.f32_out(bf(x.p) + 1, x_stride, bf(w.p), y32.p + 1, y_stride, s.rows, s.in, s.out, nullptr);
    TPB_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> hx(static_cast<std::size_t>(s.rows * s.in));
    for (std::int64_t r = 0; r < s.rows; ++r)
      for (std::int64_t i = 0; i < s.in; ++i) hx[r * s.in + i] = bf16_to_float(hx_wide[1 + r * x_stride + i]);
    const Ref ref = reference(hx, widen(hw), s.rows, s.in, s.out);
    const auto gy = y.download();
    const auto gy32 = y32.download();
    std::vector<float> got(ref.y.size()), got32(ref.y.size());
    for (std::int64_t r = 0; r < s.rows; ++r)
      for (std::int64_t o = 0; o < s.out; ++o) {
        got[r * s.out + o] = bf16_to_float(gy[1 + r * y_stride + o]);
        got32[r * s.out + o] = gy32[1 + r * y_stride + o];
      }
    const std::string what = std::to_string(s.rows) + "x" + std::to_string(s.in) + "x" + std::to_string(s.out);
    expect_close(got, ref, s.in, true, "unaligned bf16_out " + what);
    expect_close(got32, ref, s.in, false, "unaligned f32_out " + what);
  }
  // The absorbed-MLA product of an odd model (heads 4, nope 11, lora 20, rope 6): q rows of
  // nope | rope (17), head h's W_UK = rows [h*24, h*24 + 11) of kv_b [heads * 24, 20] stored
  // [in, out] (w_trans), cache rows of lora | rope (26): odd strides and element offsets.
  run_batched({4, 3, 11, 20, 17, 24 * 20, 20, 26, true}, 520, "unaligned batched");
}

// What no kernel can take must throw, never compute garbage.
TEST(GpuLinear, ImpossibleShapesThrow) {
  TPB_REQUIRE_GPU();
  gpu::Linear lin;
  DevBuf<std::uint16_t> x(4096), w(4096), y(4096);
  DevBuf<float> y32(4096);
  // A bf16 pointer one byte off its element; an f32 output two bytes off.
  const auto* x_odd = reinterpret_cast<const __nv_bfloat16*>(reinterpret_cast<const char*>(x.p) + 1);
  EXPECT_THROW(lin.bf16_out(x_odd, 16, bf(w.p), bf(y.p), 8, 2, 16, 8, nullptr), Error);
  EXPECT_THROW(lin.f32_out(bf(x.p), 16, bf(w.p), reinterpret_cast<float*>(bf(y.p) + 1), 8, 2, 16, 8, nullptr), Error);
  // Strides smaller than the row.
  EXPECT_THROW(lin.bf16_out(bf(x.p), 8, bf(w.p), bf(y.p), 8, 2, 16, 8, nullptr), Error);
  EXPECT_THROW(lin.bf16_out(bf(x.p), 16, bf(w.p), bf(y.p), 7, 2, 16, 8, nullptr), Error);
  TPB_CUDA_CHECK(cudaDeviceSynchronize());
}

TEST(GpuLinear, SameInputsGiveIdenticalBits) {
  TPB_REQUIRE_GPU();
  gpu::Linear lin;
  const std::int64_t rows = 128, in = 2048, out = 1032;
  auto hx = random_bf16(static_cast<std::size_t>(rows * in), 500);
  auto hw = random_bf16(static_cast<std::size_t>(out * in), 501);
  DevBuf<std::uint16_t> x(hx.size()), w(hw.size()), y1(static_cast<std::size_t>(rows * out)),
      y2(static_cast<std::size_t>(rows * out));
  DevBuf<float> z1(static_cast<std::size_t>(rows * out)), z2(static_cast<std::size_t>(rows * out));
  x.upload(hx);
  w.upload(hw);
  lin.bf16_out(bf(x.p), in, bf(w.p), bf(y1.p), out, rows, in, out, nullptr);
  lin.f32_out(bf(x.p), in, bf(w.p), z1.p, out, rows, in, out, nullptr);
  lin.bf16_out(bf(x.p), in, bf(w.p), bf(y2.p), out, rows, in, out, nullptr);
  lin.f32_out(bf(x.p), in, bf(w.p), z2.p, out, rows, in, out, nullptr);
  TPB_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_TRUE(y1.download() == y2.download()) << "bf16_out differs between two identical calls";
  const auto a = z1.download(), b = z2.download();
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << "f32_out differs between two calls";
  // Guard against a vacuous pass (e.g. both calls writing nothing).
  const Ref ref = reference(widen(hx), widen(hw), rows, in, out);
  expect_close(widen(y1.download()), ref, in, true, "determinism shape");
}

// A captured graph replays the eager bits, also on new inputs written into the same buffers.
TEST(GpuLinear, GraphReplayEqualsEager) {
  TPB_REQUIRE_GPU();
  gpu::Linear lin;
  const std::int64_t rows = 64, in = 1536, out = 576;
  auto hx = random_bf16(static_cast<std::size_t>(rows * in), 600);
  auto hx2 = random_bf16(static_cast<std::size_t>(rows * in), 602);
  auto hw = random_bf16(static_cast<std::size_t>(out * in), 601);
  DevBuf<std::uint16_t> x(hx.size()), w(hw.size()), y(static_cast<std::size_t>(rows * out));
  DevBuf<float> z(static_cast<std::size_t>(rows * out));
  x.upload(hx);
  w.upload(hw);
  cudaStream_t s;
  TPB_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  auto step = [&] {
    lin.bf16_out(bf(x.p), in, bf(w.p), bf(y.p), out, rows, in, out, s);
    lin.f32_out(bf(x.p), in, bf(w.p), z.p, out, rows, in, out, s);
  };
  step();  // eager first: chooses and caches the algorithms
  TPB_CUDA_CHECK(cudaStreamSynchronize(s));
  const auto eager_y = y.download();
  const auto eager_z = z.download();

  cudaGraph_t graph;
  cudaGraphExec_t exec;
  TPB_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  step();
  TPB_CUDA_CHECK(cudaStreamEndCapture(s, &graph));
  TPB_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  TPB_CUDA_CHECK(cudaMemsetAsync(y.p, 0, y.n * 2, s));
  TPB_CUDA_CHECK(cudaMemsetAsync(z.p, 0, z.n * 4, s));
  TPB_CUDA_CHECK(cudaGraphLaunch(exec, s));
  TPB_CUDA_CHECK(cudaStreamSynchronize(s));
  EXPECT_TRUE(y.download() == eager_y) << "graph replay bf16_out differs from eager";
  auto gz = z.download();
  EXPECT_EQ(std::memcmp(gz.data(), eager_z.data(), gz.size() * 4), 0) << "graph replay f32_out differs from eager";

  // New inputs in the same buffers: replay vs eager again.
  x.upload(hx2);
  TPB_CUDA_CHECK(cudaGraphLaunch(exec, s));
  TPB_CUDA_CHECK(cudaStreamSynchronize(s));
  const auto replay_y = y.download();
  const auto replay_z = z.download();
  step();
  TPB_CUDA_CHECK(cudaStreamSynchronize(s));
  EXPECT_TRUE(y.download() == replay_y) << "replay on new inputs differs from eager";
  gz = z.download();
  EXPECT_EQ(std::memcmp(gz.data(), replay_z.data(), gz.size() * 4), 0);
  expect_close(widen(replay_y), reference(widen(hx2), widen(hw), rows, in, out), in, true, "graph replay");

  TPB_CUDA_CHECK(cudaGraphExecDestroy(exec));
  TPB_CUDA_CHECK(cudaGraphDestroy(graph));
  TPB_CUDA_CHECK(cudaStreamDestroy(s));
}

// gemv (tpb/kernels/gpu/gemv.h), the one-row product, under the same tolerance (its fp32 sums
// round to nearest): rows that end mid-slice and mid-lane (in 8, 72, 1032), output counts
// that end mid-block (1, 5, 577), the most slices a block takes (in 18432), and the Kimi TP2
// decode shapes q_a and o_proj; bf16 and f32 out; a second call gives the same bits.
TEST(GpuGemv, MatchesReferenceAndRepeatsBitwise) {
  TPB_REQUIRE_GPU();
  const Shape shapes[] = {{1, 8, 1}, {1, 72, 5}, {1, 1032, 577}, {1, 18432, 40}, {1, 7168, 1536}, {1, 4096, 7168}};
  std::uint32_t seed = 700;
  for (const Shape& s : shapes) {
    auto hx = random_bf16(static_cast<std::size_t>(s.in), seed++);
    auto hw = random_bf16(static_cast<std::size_t>(s.out * s.in), seed++);
    DevBuf<std::uint16_t> x(hx.size()), w(hw.size()), y(static_cast<std::size_t>(s.out)), y2(y.n);
    DevBuf<float> y32(static_cast<std::size_t>(s.out)), y32b(y32.n);
    x.upload(hx);
    w.upload(hw);
    ASSERT_TRUE(gpu::gemv_supported(x.p, w.p, s.in));
    gpu::gemv_bf16_out(bf(x.p), bf(w.p), bf(y.p), s.in, s.out, nullptr);
    gpu::gemv_f32_out(bf(x.p), bf(w.p), y32.p, s.in, s.out, nullptr);
    gpu::gemv_bf16_out(bf(x.p), bf(w.p), bf(y2.p), s.in, s.out, nullptr);
    gpu::gemv_f32_out(bf(x.p), bf(w.p), y32b.p, s.in, s.out, nullptr);
    TPB_CUDA_CHECK(cudaDeviceSynchronize());
    const Ref ref = reference(widen(hx), widen(hw), 1, s.in, s.out);
    const std::string what = "gemv " + std::to_string(s.in) + "x" + std::to_string(s.out);
    expect_close(widen(y.download()), ref, s.in, true, what + " bf16_out");
    expect_close(y32.download(), ref, s.in, false, what + " f32_out");
    EXPECT_EQ(y.download(), y2.download()) << what << ": bf16_out differs between two calls";
    const auto a = y32.download(), b = y32b.download();
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << what << ": f32_out differs between two calls";
  }
}

// The pair (q_a and kv_a of one xn at batch 1): each output the same bits as its own gemv, and
// within the reference's tolerance; output counts that end mid-block on both sides.
TEST(GpuGemv, PairIsTwoGemvsInOneLaunch) {
  TPB_REQUIRE_GPU();
  const std::int64_t in = 7168, out = 1536 + 3, out2 = 576 + 1;
  auto hx = random_bf16(static_cast<std::size_t>(in), 720);
  auto hw = random_bf16(static_cast<std::size_t>(out * in), 721);
  auto hw2 = random_bf16(static_cast<std::size_t>(out2 * in), 722);
  DevBuf<std::uint16_t> x(hx.size()), w(hw.size()), w2(hw2.size()), y(static_cast<std::size_t>(out)),
      y2(static_cast<std::size_t>(out2)), single(y.n), single2(y2.n);
  x.upload(hx);
  w.upload(hw);
  w2.upload(hw2);
  gpu::gemv_bf16_out_pair(bf(x.p), in, bf(w.p), bf(y.p), out, bf(w2.p), bf(y2.p), out2, nullptr);
  gpu::gemv_bf16_out(bf(x.p), bf(w.p), bf(single.p), in, out, nullptr);
  gpu::gemv_bf16_out(bf(x.p), bf(w2.p), bf(single2.p), in, out2, nullptr);
  TPB_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_EQ(y.download(), single.download()) << "first product";
  EXPECT_EQ(y2.download(), single2.download()) << "second product";
  expect_close(widen(y2.download()), reference(widen(hx), widen(hw2), 1, in, out2), in, true, "gemv pair, second");
  // Through Linear: the pair at one row; at three rows two cuBLASLt products, as bf16_out gives them.
  gpu::Linear linear;
  DevBuf<std::uint16_t> ly(y.n), ly2(y2.n);
  linear.bf16_out_pair(bf(x.p), 1, in, bf(w.p), bf(ly.p), out, bf(w2.p), bf(ly2.p), out2, nullptr);
  TPB_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_EQ(ly.download(), single.download());
  EXPECT_EQ(ly2.download(), single2.download());
  const std::int64_t rows = 3;
  auto hx3 = random_bf16(static_cast<std::size_t>(rows * in), 723);
  DevBuf<std::uint16_t> x3(hx3.size()), p1(static_cast<std::size_t>(rows * out)), p2(static_cast<std::size_t>(rows * out2)),
      s1(p1.n), s2(p2.n);
  x3.upload(hx3);
  linear.bf16_out_pair(bf(x3.p), rows, in, bf(w.p), bf(p1.p), out, bf(w2.p), bf(p2.p), out2, nullptr);
  linear.bf16_out(bf(x3.p), in, bf(w.p), bf(s1.p), out, rows, in, out, nullptr);
  linear.bf16_out(bf(x3.p), in, bf(w2.p), bf(s2.p), out2, rows, in, out2, nullptr);
  TPB_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_EQ(p1.download(), s1.download());
  EXPECT_EQ(p2.download(), s2.download());
}

TEST(GpuGemv, RefusesWhatItCannotTake) {
  EXPECT_FALSE(gpu::gemv_supported(reinterpret_cast<void*>(256), reinterpret_cast<void*>(256), 12));  // not a multiple of 8
  EXPECT_FALSE(gpu::gemv_supported(reinterpret_cast<void*>(256), reinterpret_cast<void*>(256), gpu::kGemvMaxIn + 8));
  EXPECT_FALSE(gpu::gemv_supported(reinterpret_cast<void*>(258), reinterpret_cast<void*>(256), 64));  // x misaligned
  EXPECT_TRUE(gpu::gemv_supported(reinterpret_cast<void*>(256), reinterpret_cast<void*>(512), gpu::kGemvMaxIn));
}

}  // namespace
}  // namespace tpb::test
