// The elementwise GPU kernels (embedding, rmsnorm, add_rmsnorm, residual_from_bf16, YaRN
// rope, silu_and_mul) against their CPU references (tpb/kernels/*.h) on fresh random inputs
// from fixed seeds. Inputs are bf16; the references consume the same bf16 values widened to
// fp32, so the only differences are the ones each test names in its tolerance comment.
// Every kernel runs at least once on a size that is not a multiple of its 8-wide vector
// path (the scalar fallback) and once on the model's size (the vector path).
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "gpu_test_support.h"
#include "tpb/check.h"
#include "tpb/cuda_check.h"
#include "tpb/dtype.h"
#include "tpb/kernels/device.h"
#include "tpb/kernels/embedding.h"
#include "tpb/kernels/gpu/embedding.h"
#include "tpb/kernels/gpu/rmsnorm.h"
#include "tpb/kernels/gpu/rope_yarn.h"
#include "tpb/kernels/gpu/silu_and_mul.h"
#include "tpb/kernels/rmsnorm.h"
#include "tpb/kernels/rope_yarn.h"
#include "tpb/kernels/silu_and_mul.h"

namespace tpb::test {
namespace {

// The elements a kernel computed, the reference, and each element's tolerance.
struct Compared {
  std::vector<double> got, want, tol;
  void add(double g, double w, double t) {
    got.push_back(g);
    want.push_back(w);
    tol.push_back(t);
  }
};

// NaN/Inf first, then |got - want| <= tol element-wise and rel-L2 <= rel_l2_max overall. A
// failure names the worst element and the share of its budget it used.
::testing::AssertionResult close(const Compared& c, double rel_l2_max) {
  double num = 0.0, den = 0.0, worst = 0.0;
  std::size_t at = 0;
  for (std::size_t i = 0; i < c.got.size(); ++i) {
    if (!std::isfinite(c.got[i])) return ::testing::AssertionFailure() << "non-finite " << c.got[i] << " at " << i;
    const double err = std::fabs(c.got[i] - c.want[i]);
    num += err * err;
    den += c.want[i] * c.want[i];
    const double use = err == 0.0 ? 0.0 : err / c.tol[i];
    if (use > worst) worst = use, at = i;
  }
  const double rel_l2 = den > 0.0 ? std::sqrt(num / den) : std::sqrt(num);
  if (worst <= 1.0 && rel_l2 <= rel_l2_max) return ::testing::AssertionSuccess();
  ::testing::AssertionResult r = ::testing::AssertionFailure();
  if (!c.got.empty())
    r << "worst element " << at << " of " << c.got.size() << ": got " << c.got[at] << ", want " << c.want[at]
      << ", |err| " << std::fabs(c.got[at] - c.want[at]) << " = " << 100.0 * worst << "% of its tolerance "
      << c.tol[at] << "; ";
  return r << "rel-L2 " << rel_l2 << " (max " << rel_l2_max << ")";
}

// bf16 outputs: the rounding alone has a relative rms near 2^-9 / sqrt(3); 2^-8 leaves room
// for the order noise, while a layout or indexing bug gives O(1). One op against its fp32
// reference, so tighter than the policy's kTpRelL2Bf16 (suite/checks/tolerance.h), which
// covers a whole model's rounding.
constexpr double kBf16RelL2 = 0x1p-8;

constexpr std::uint16_t kSentinel = 0x7f7f;  // a finite bf16 no kernel writes here

// ---------------------------------------------------------------- embedding

// A copy: every element must be the table's bits, or +0 for a token the shard does not own.
void check_embedding(std::int64_t hidden, std::uint32_t seed) {
  const std::int64_t vocab = 1000, begin = 300, end = 650, tokens = 41;
  const auto table = random_bf16(static_cast<std::size_t>((end - begin) * hidden), seed, -1.f, 1.f);
  std::mt19937 rng(seed + 1);
  std::uniform_int_distribution<std::int32_t> id(0, static_cast<std::int32_t>(vocab - 1));
  std::vector<std::int32_t> ids(tokens);
  for (auto& i : ids) i = id(rng);
  ids[0] = static_cast<std::int32_t>(begin);    // the shard's edges and their neighbours
  ids[1] = static_cast<std::int32_t>(end - 1);
  ids[2] = static_cast<std::int32_t>(begin - 1);
  ids[3] = static_cast<std::int32_t>(end);
  std::vector<std::int64_t> ids64(ids.begin(), ids.end());
  std::vector<float> ref(static_cast<std::size_t>(tokens * hidden));
  kernels::embedding_ref(ids64.data(), tokens, widen(table).data(), begin, end, vocab, hidden, ref.data());

  DevBuf<std::int32_t> d_ids(ids.size());
  DevBuf<std::uint16_t> d_table(table.size()), d_out(ref.size());
  d_ids.upload(ids);
  d_table.upload(table);
  d_out.upload(std::vector<std::uint16_t>(ref.size(), kSentinel));
  gpu::embedding_gather(d_ids.p, tokens, bf(d_table.p), begin, end, hidden, bf(d_out.p), nullptr);
  const auto out = d_out.download();
  int owned = 0, foreign = 0;
  for (std::int64_t t = 0; t < tokens; ++t) {
    (ids[t] >= begin && ids[t] < end ? owned : foreign)++;
    for (std::int64_t i = 0; i < hidden; ++i) {
      const std::size_t k = static_cast<std::size_t>(t * hidden + i);
      ASSERT_EQ(out[k], float_to_bf16(ref[k])) << "token " << t << " (id " << ids[t] << ") col " << i;
    }
  }
  EXPECT_GT(owned, 4);
  EXPECT_GT(foreign, 4);
}

TEST(GpuEmbedding, OwnedRowsCopiedForeignRowsZeroVector) {
  TPB_REQUIRE_GPU();
  check_embedding(7168, 11);
}

TEST(GpuEmbedding, OwnedRowsCopiedForeignRowsZeroScalar) {
  TPB_REQUIRE_GPU();
  check_embedding(101, 12);
}

// ---------------------------------------------------------------- rmsnorm

// GPU and reference differ in the order of the fp32 sum of squares (each ordering of `dim`
// positive terms is within (dim - 1) * 2^-24 relative of the exact sum, so the two sums
// within 2 (dim - 1) * 2^-24 of each other), which moves inv_rms by at most half that plus
// the divide/sqrt/add roundings (a few 2^-24), and by the final bf16 rounding of the output
// (at most 2^-8 relative of the GPU's fp32 value). Per element, with slack for the product
// of the two terms:
//   |gpu - ref| <= |ref| * (2^-8 + (2 dim + 8) * 2^-24).
double rms_tol(double ref, std::int64_t dim) { return std::fabs(ref) * (0x1p-8 + (2 * dim + 8) * 0x1p-24); }

void check_rmsnorm(std::int64_t rows, std::int64_t dim, std::int64_t x_stride, std::int64_t out_stride,
                   std::uint32_t seed) {
  SCOPED_TRACE(::testing::Message() << "rows " << rows << ", dim " << dim << ", strides " << x_stride << "/" << out_stride);
  const float eps = 1e-5f;
  const auto x = random_bf16(static_cast<std::size_t>(rows * x_stride), seed, -2.f, 2.f);
  const auto w = random_bf16(static_cast<std::size_t>(dim), seed + 1, 0.5f, 1.5f);
  const auto xf = widen(x);
  std::vector<float> ref(xf.size());
  kernels::rmsnorm_ref(xf.data(), widen(w).data(), ref.data(), rows, dim, x_stride, eps);

  DevBuf<std::uint16_t> d_x(x.size()), d_w(w.size()), d_out(static_cast<std::size_t>(rows * out_stride));
  d_x.upload(x);
  d_w.upload(w);
  d_out.upload(std::vector<std::uint16_t>(d_out.n, kSentinel));
  gpu::rmsnorm(bf(d_x.p), x_stride, bf(d_w.p), bf(d_out.p), out_stride, rows, dim, eps, nullptr);
  const auto out = d_out.download();
  Compared cmp;
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t i = 0; i < out_stride; ++i) {
      const std::uint16_t got = out[static_cast<std::size_t>(r * out_stride + i)];
      if (i >= dim) {
        ASSERT_EQ(got, kSentinel) << "row " << r << " wrote past dim at " << i;
        continue;
      }
      const double want = ref[static_cast<std::size_t>(r * x_stride + i)];
      cmp.add(bf16_to_float(got), want, rms_tol(want, dim));
    }
  }
  EXPECT_TRUE(close(cmp, kBf16RelL2)) << "(element = row * dim + col)";
  // The x buffer is not written.
  EXPECT_TRUE(same(d_x.download(), x));
}

TEST(GpuRmsNorm, StridedRowsVector) {
  TPB_REQUIRE_GPU();
  check_rmsnorm(5, 7168, 7168 + 64, 7168 + 8, 21);  // hidden
  check_rmsnorm(3, 512, 576, 512, 22);              // kv_a's latent slice of a [512 + 64] row
}

TEST(GpuRmsNorm, StridedRowsScalar) {
  TPB_REQUIRE_GPU();
  check_rmsnorm(4, 129, 131, 133, 23);
}

// add_rmsnorm: the residual update is one fp32 add per element on both sides (bitwise the
// same); the normed output has rmsnorm's tolerance.
void check_add_rmsnorm(std::int64_t rows, std::int64_t dim, bool with_delta, std::uint32_t seed) {
  SCOPED_TRACE(::testing::Message() << "rows " << rows << ", dim " << dim << (with_delta ? "" : ", no delta"));
  const float eps = 1e-5f;
  const std::size_t n = static_cast<std::size_t>(rows * dim);
  const auto residual = random_f32(n, seed, -4.f, 4.f);
  const auto delta = random_bf16(n, seed + 1, -1.f, 1.f);
  const auto w = random_bf16(static_cast<std::size_t>(dim), seed + 2, 0.5f, 1.5f);
  std::vector<float> res_ref = residual;
  if (with_delta) {
    const auto df = widen(delta);
    for (std::size_t i = 0; i < n; ++i) res_ref[i] += df[i];
  }
  std::vector<float> ref(n);
  kernels::rmsnorm_ref(res_ref.data(), widen(w).data(), ref.data(), rows, dim, dim, eps);

  DevBuf<float> d_res(n);
  DevBuf<std::uint16_t> d_delta(n), d_w(w.size()), d_out(n);
  d_delta.upload(delta);
  d_w.upload(w);
  std::vector<std::uint16_t> first;
  for (int run = 0; run < 2; ++run) {
    d_res.upload(residual);
    gpu::add_rmsnorm(with_delta ? bf(d_delta.p) : nullptr, d_res.p, bf(d_w.p), bf(d_out.p), rows, dim, eps, nullptr);
    const auto res = d_res.download();
    const auto out = d_out.download();
    Compared cmp;
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(bits(res[i]), bits(res_ref[i])) << "residual " << i;
      cmp.add(bf16_to_float(out[i]), ref[i], rms_tol(ref[i], dim));
    }
    EXPECT_TRUE(close(cmp, kBf16RelL2));
    if (run == 0) first = out;
    else EXPECT_TRUE(same(out, first)) << "two runs on the same inputs differ";
  }
}

TEST(GpuAddRmsNorm, WithDeltaVector) {
  TPB_REQUIRE_GPU();
  check_add_rmsnorm(6, 7168, true, 31);
}

TEST(GpuAddRmsNorm, WithDeltaScalar) {
  TPB_REQUIRE_GPU();
  check_add_rmsnorm(3, 1001, true, 32);
}

// Rows beyond what each thread keeps in registers between the passes (4 chunks of 8 per thread
// of 256) take the general path.
TEST(GpuAddRmsNorm, RowLongerThanTheRegisterCache) {
  TPB_REQUIRE_GPU();
  check_add_rmsnorm(2, 8 * 4 * 256 + 8, true, 35);
  check_add_rmsnorm(2, 4 * 256 + 3, true, 36);
}

TEST(GpuAddRmsNorm, NullDeltaLeavesResidual) {
  TPB_REQUIRE_GPU();
  check_add_rmsnorm(4, 7168, false, 33);
  check_add_rmsnorm(2, 77, false, 34);
}

TEST(GpuResidualFromBf16, ExactWidening) {
  TPB_REQUIRE_GPU();
  const std::size_t n = 3 * 7168 + 5;
  const auto x = random_bf16(n, 41, -3.f, 3.f);
  DevBuf<std::uint16_t> d_x(n);
  DevBuf<float> d_res(n);
  d_x.upload(x);
  gpu::residual_from_bf16(bf(d_x.p), d_res.p, static_cast<std::int64_t>(n), nullptr);
  const auto res = d_res.download();
  const auto want = widen(x);
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(bits(res[i]), bits(want[i])) << i;
}

// ---------------------------------------------------------------- rope

// Kimi-K2.5's rope (scenarios/models/kimi-k2.5.json): 64 rotary dims, theta 5e4, YaRN
// factor 64 over 4096 original positions, mscale = mscale_all_dim = 1.
kernels::RopeParams kimi_rope() {
  kernels::RopeParams p;
  p.dim = 64;
  p.theta = 50000.0;
  p.yarn = true;
  p.factor = 64.0;
  p.beta_fast = 32.0;
  p.beta_slow = 1.0;
  p.mscale = 1.0;
  p.mscale_all_dim = 1.0;
  p.original_max_position_embeddings = 4096;
  return p;
}

// The angle and every product and sum are the same fp32 operations on both sides; cos and
// sin differ by at most 3 fp32 ulps together (CUDA's cosf/sinf within 2, glibc's within 1),
// so c and s are within 4 * 2^-24 * af of each other, and the rotated value within
// (|a| + |b|) * af * 2^-21 plus a few roundings: (|a| + |b|) * af * 2^-20 covers it. Then
// the output rounds to bf16 (2^-8 relative).
void check_rope(const kernels::RopeParams& params, std::int64_t tokens, std::int64_t heads, std::int64_t row,
                std::int64_t offset, std::uint32_t seed) {
  const kernels::RopeTable table = kernels::make_rope_table(params);
  const std::int64_t half = params.dim / 2;
  const std::int64_t n = tokens * heads;
  const auto x = random_bf16(static_cast<std::size_t>(n * row), seed, -1.f, 1.f);
  std::mt19937 rng(seed + 1);
  std::uniform_int_distribution<std::int32_t> pos(0, 32767);
  std::vector<std::int32_t> positions(tokens);
  for (auto& p : positions) p = pos(rng);
  positions[0] = 0;
  positions[tokens - 1] = 32767;
  const std::vector<std::int64_t> pos64(positions.begin(), positions.end());

  const auto xf = widen(x);
  std::vector<float> ref = xf;
  kernels::rope_interleaved_ref(ref.data() + offset, n, row, heads, pos64.data(), table);

  DevBuf<std::uint16_t> d_x(x.size());
  DevBuf<std::int32_t> d_pos(positions.size());
  DevBuf<float> d_freq(table.inv_freq.size());
  d_x.upload(x);
  d_pos.upload(positions);
  d_freq.upload(table.inv_freq);
  gpu::rope_interleaved(bf(d_x.p) + offset, n, row, heads, d_pos.p, d_freq.p, half, table.attention_factor, nullptr);
  const auto out = d_x.download();
  const double af = table.attention_factor;
  Compared cmp;
  for (std::int64_t v = 0; v < n; ++v) {
    for (std::int64_t j = 0; j < row; ++j) {
      const std::size_t k = static_cast<std::size_t>(v * row + j);
      if (j < offset || j >= offset + params.dim) {
        ASSERT_EQ(out[k], x[k]) << "vector " << v << " wrote outside the rotary slice at " << j;
        continue;
      }
      const std::size_t pair = static_cast<std::size_t>(v * row + offset + ((j - offset) & ~std::int64_t{1}));
      const double ab = std::fabs(xf[pair]) + std::fabs(xf[pair + 1]);
      const double tol = std::fabs(ref[k]) * 0x1p-8 + ab * af * 0x1p-20;
      cmp.add(bf16_to_float(out[k]), ref[k], tol);
    }
  }
  EXPECT_TRUE(close(cmp, kBf16RelL2)) << "(element = vector * " << params.dim << " + rotary dim)";
}

TEST(GpuRope, KimiYarnQueryHeadsTo32K) {
  TPB_REQUIRE_GPU();
  kernels::RopeParams plain = kimi_rope();
  plain.yarn = false;
  // YaRN is active: the low frequencies are interpolated (attention_factor is 1 here, as
  // mscale == mscale_all_dim; YarnAttentionFactor covers the other case).
  ASSERT_NE(kernels::make_rope_table(kimi_rope()).inv_freq.back(), kernels::make_rope_table(plain).inv_freq.back());
  check_rope(kimi_rope(), 37, 3, 192, 128, 51);  // q: [tokens, heads, nope 128 | rope 64]
}

TEST(GpuRope, YarnAttentionFactor) {
  TPB_REQUIRE_GPU();
  kernels::RopeParams p = kimi_rope();
  p.theta = 10000.0;
  p.factor = 40.0;
  p.mscale_all_dim = 0.0;  // attention_factor = 0.1 ln(40) + 1
  ASSERT_GT(kernels::make_rope_table(p).attention_factor, 1.3f);
  check_rope(p, 29, 2, 64, 0, 54);
}

TEST(GpuRope, KimiYarnLatentKeyTo32K) {
  TPB_REQUIRE_GPU();
  check_rope(kimi_rope(), 53, 1, 576, 512, 52);  // k_pe after the 512 latent columns
}

TEST(GpuRope, PlainRopeOddPairCount) {
  TPB_REQUIRE_GPU();
  kernels::RopeParams p;
  p.dim = 10;  // 5 pairs
  p.theta = 10000.0;
  check_rope(p, 9, 2, 13, 3, 53);
}

// ---------------------------------------------------------------- silu_and_mul

// Same fp32 operations on both sides except exp (CUDA's expf within 2 ulps, glibc's within
// 1): 1 + e and the quotient move by at most 3 * 2^-24 relative, the product adds nothing
// new; then bf16 rounding: |gpu - ref| <= |ref| * (2^-8 + 2^-20).
void check_silu(std::int64_t rows, std::int64_t inter, std::uint32_t seed) {
  const std::size_t n = static_cast<std::size_t>(rows * inter);
  auto gu = random_bf16(2 * n, seed, -2.f, 2.f);
  // Gates over [-10, 10): both tails of the sigmoid.
  const auto gates = random_bf16(n, seed + 1, -10.f, 10.f);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t i = 0; i < inter; ++i)
      gu[static_cast<std::size_t>(r * 2 * inter + i)] = gates[static_cast<std::size_t>(r * inter + i)];
  const auto guf = widen(gu);
  std::vector<float> g(n), u(n), ref(n);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t i = 0; i < inter; ++i) {
      g[static_cast<std::size_t>(r * inter + i)] = guf[static_cast<std::size_t>(r * 2 * inter + i)];
      u[static_cast<std::size_t>(r * inter + i)] = guf[static_cast<std::size_t>(r * 2 * inter + inter + i)];
    }
  kernels::silu_and_mul_ref(g.data(), u.data(), ref.data(), rows, inter);

  DevBuf<std::uint16_t> d_gu(gu.size()), d_out(n);
  d_gu.upload(gu);
  gpu::silu_and_mul(bf(d_gu.p), bf(d_out.p), rows, inter, nullptr);
  const auto out = d_out.download();
  Compared cmp;
  for (std::size_t i = 0; i < n; ++i) cmp.add(bf16_to_float(out[i]), ref[i], std::fabs(ref[i]) * (0x1p-8 + 0x1p-20));
  EXPECT_TRUE(close(cmp, kBf16RelL2)) << "(element = row * inter + col)";
}

TEST(GpuSiluAndMul, ExpertWidthVector) {
  TPB_REQUIRE_GPU();
  check_silu(7, 2048, 61);
}

TEST(GpuSiluAndMul, OddWidthScalar) {
  TPB_REQUIRE_GPU();
  check_silu(5, 129, 62);
}

}  // namespace
}  // namespace tpb::test
