// The elementwise GPU kernels (embedding, rmsnorm, add_rmsnorm, residual_from_bf16, YaRN
// rope and its copying form, the fused MLA latent-KV row, silu_and_mul) against their CPU
// references (tpb/kernels/*.h) on fresh random inputs from fixed seeds. The fused ops are
// also compared bitwise with the launches they replace. Inputs are bf16; the references
// consume the same bf16 values widened to fp32, so the only differences are the ones each
// test names in its tolerance comment.
// Every kernel runs at least once on a size that is not a multiple of its 8-wide vector
// path (the scalar fallback) and once on the model's size (the vector path).
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
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
#include "reference_engine/gpu/kv_cache_write.h"
#include "tpb/kernels/gpu/embedding.h"
#include "tpb/kernels/gpu/mla_kv_row.h"
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
double rope_tol(double ref, double a, double b, double attention_factor) {
  return std::fabs(ref) * 0x1p-8 + (std::fabs(a) + std::fabs(b)) * attention_factor * 0x1p-20;
}

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
      cmp.add(bf16_to_float(out[k]), ref[k], rope_tol(ref[k], xf[pair], xf[pair + 1], af));
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

// rope_interleaved_copy, as the decode step uses it: q's rope slices ([tokens, heads, qk] with
// the rope at `offset`) rotated in place and into the absorbed query's rope slots ([tokens,
// heads, out_row] at out_offset). Bitwise the same q as rope_interleaved, and the same slots
// as rope_interleaved followed by the strided copy it replaces; the values within rope's
// tolerance of the reference; every other element of both buffers untouched.
void check_rope_copy(const kernels::RopeParams& params, std::int64_t tokens, std::int64_t heads, std::int64_t qk,
                     std::int64_t offset, std::int64_t out_row, std::int64_t out_offset, std::uint32_t seed) {
  SCOPED_TRACE(::testing::Message() << "tokens " << tokens << ", heads " << heads << ", qk " << qk << ", rope at "
                                    << offset << ", out row " << out_row << " at " << out_offset);
  const kernels::RopeTable table = kernels::make_rope_table(params);
  const std::int64_t half = params.dim / 2, n = tokens * heads;
  const auto q = random_bf16(static_cast<std::size_t>(n * qk), seed, -1.f, 1.f);
  const auto slots = random_bf16(static_cast<std::size_t>(n * out_row), seed + 1, -1.f, 1.f);
  std::mt19937 rng(seed + 2);
  std::uniform_int_distribution<std::int32_t> pos(0, 32767);
  std::vector<std::int32_t> positions(tokens);
  for (auto& p : positions) p = pos(rng);
  const std::vector<std::int64_t> pos64(positions.begin(), positions.end());

  DevBuf<std::uint16_t> d_q_seq(q.size()), d_q_fused(q.size()), d_out_seq(slots.size()), d_out_fused(slots.size());
  DevBuf<std::int32_t> d_pos(positions.size());
  DevBuf<float> d_freq(table.inv_freq.size());
  d_q_seq.upload(q);
  d_q_fused.upload(q);
  d_out_seq.upload(slots);
  d_out_fused.upload(slots);
  d_pos.upload(positions);
  d_freq.upload(table.inv_freq);
  const float af = table.attention_factor;
  constexpr std::size_t kB = sizeof(std::uint16_t);
  // The launches the copying form replaces: rope in place, then the strided copy.
  gpu::rope_interleaved(bf(d_q_seq.p) + offset, n, qk, heads, d_pos.p, d_freq.p, half, af, nullptr);
  TPB_CUDA_CHECK(cudaMemcpy2DAsync(bf(d_out_seq.p) + out_offset, out_row * kB, bf(d_q_seq.p) + offset, qk * kB,
                                   params.dim * kB, n, cudaMemcpyDeviceToDevice, nullptr));
  gpu::rope_interleaved_copy(bf(d_q_fused.p) + offset, n, qk, heads, d_pos.p, d_freq.p, half, af,
                             bf(d_out_fused.p) + out_offset, out_row, nullptr);
  const auto q_fused = d_q_fused.download(), out_fused = d_out_fused.download();
  EXPECT_TRUE(same(q_fused, d_q_seq.download())) << "q";
  EXPECT_TRUE(same(out_fused, d_out_seq.download())) << "the query's rope slots";

  const auto qf = widen(q);
  std::vector<float> ref = qf;
  kernels::rope_interleaved_ref(ref.data() + offset, n, qk, heads, pos64.data(), table);
  Compared cmp;
  for (std::int64_t v = 0; v < n; ++v) {
    for (std::int64_t j = 0; j < out_row; ++j) {
      const std::size_t k = static_cast<std::size_t>(v * out_row + j);
      if (j < out_offset || j >= out_offset + params.dim) {
        ASSERT_EQ(out_fused[k], slots[k]) << "vector " << v << " wrote outside its rope slot at " << j;
        continue;
      }
      const std::int64_t d = j - out_offset;
      const std::size_t src = static_cast<std::size_t>(v * qk + offset + d);
      const std::size_t pair = static_cast<std::size_t>(v * qk + offset + (d & ~std::int64_t{1}));
      cmp.add(bf16_to_float(out_fused[k]), ref[src], rope_tol(ref[src], qf[pair], qf[pair + 1], af));
    }
  }
  EXPECT_TRUE(close(cmp, kBf16RelL2)) << "(element = vector * " << params.dim << " + rotary dim)";
}

TEST(GpuRope, CopyIntoKimiDecodeQuerySlots) {
  TPB_REQUIRE_GPU();
  // q [3 sequences, 4 heads, nope 128 | rope 64] into qdec rows [4 heads, 512 | 64].
  check_rope_copy(kimi_rope(), 3, 4, 192, 128, 576, 512, 55);
}

TEST(GpuRope, CopyIntoPaddedQuerySlotsOddPairCount) {
  TPB_REQUIRE_GPU();
  kernels::RopeParams p;
  p.dim = 10;  // 5 pairs; rows of nope 3 | rope 10 into padded rows of 16 | 16
  p.theta = 10000.0;
  check_rope_copy(p, 3, 2, 13, 3, 32, 16, 56);
}

// ---------------------------------------------------------------- mla_kv_row

// The fused latent-KV row (tpb/kernels/gpu/mla_kv_row.h) against the four launches it
// replaces (rmsnorm, the strided copy of the rope slice, rope_interleaved, kv_cache_write):
// kvrow and the cache bitwise equal. Against the reference: the latent columns within
// rmsnorm's tolerance, the rope columns within rope's, kvrow's pad columns untouched (they hold
// random bits here, not the engine's zeros, so that a stray write shows), and every cache row
// the token's kvrow row at (t / n) * max_len + positions[t], the other rows untouched.
// Sequence b's tokens sit at start_b .. start_b + n - 1, a different start per sequence.
// cache_offset (elements) misaligns the cache, for the element-wise stores to it.
struct KvRowCase {
  std::int64_t batch, n, kv_lora, rope, rope_at, row, max_len, cache_offset;
};

void check_mla_kv_row(const KvRowCase& k, const kernels::RopeParams& params, std::uint32_t seed) {
  const std::int64_t tokens = k.batch * k.n, width = k.kv_lora + k.rope;
  SCOPED_TRACE(::testing::Message() << "batch " << k.batch << ", n " << k.n << ", kv_lora " << k.kv_lora << ", rope "
                                    << k.rope << " at " << k.rope_at << ", row " << k.row << ", cache offset "
                                    << k.cache_offset);
  ASSERT_EQ(params.dim, k.rope);
  const float eps = 1e-6f;
  const kernels::RopeTable table = kernels::make_rope_table(params);
  const float af = table.attention_factor;
  const auto ckv = random_bf16(static_cast<std::size_t>(tokens * width), seed, -2.f, 2.f);
  const auto w = random_bf16(static_cast<std::size_t>(k.kv_lora), seed + 1, 0.5f, 1.5f);
  const auto kvrow0 = random_bf16(static_cast<std::size_t>(tokens * k.row), seed + 2, -1.f, 1.f);
  const std::size_t cache_elems = static_cast<std::size_t>(k.batch * k.max_len * k.row);
  const auto cache0 = random_bf16(cache_elems + static_cast<std::size_t>(k.cache_offset), seed + 3, -1.f, 1.f);
  std::mt19937 rng(seed + 4);
  std::uniform_int_distribution<std::int32_t> start(0, static_cast<std::int32_t>(k.max_len - k.n));
  std::vector<std::int32_t> starts, positions;
  for (std::int64_t b = 0; b < k.batch; ++b) {
    std::int32_t s0 = start(rng);
    while (std::find(starts.begin(), starts.end(), s0) != starts.end()) s0 = start(rng);
    starts.push_back(s0);
    for (std::int64_t i = 0; i < k.n; ++i) positions.push_back(s0 + static_cast<std::int32_t>(i));
  }
  const gpu::MlaKvRowShape shape{tokens, k.n, k.kv_lora, k.rope, k.rope_at, k.row, k.max_len};

  DevBuf<std::uint16_t> d_ckv(ckv.size()), d_w(w.size()), d_kv_seq(kvrow0.size()), d_kv_fused(kvrow0.size());
  DevBuf<std::uint16_t> d_cache_seq(cache0.size()), d_cache_fused(cache0.size());
  DevBuf<std::int32_t> d_pos(positions.size());
  DevBuf<float> d_freq(table.inv_freq.size());
  d_ckv.upload(ckv);
  d_w.upload(w);
  d_kv_seq.upload(kvrow0);
  d_kv_fused.upload(kvrow0);
  d_cache_seq.upload(cache0);
  d_cache_fused.upload(cache0);
  d_pos.upload(positions);
  d_freq.upload(table.inv_freq);
  constexpr std::size_t kB = sizeof(std::uint16_t);
  // The four launches mla_project ran before the fused op.
  __nv_bfloat16* kv_seq = bf(d_kv_seq.p);
  gpu::rmsnorm(bf(d_ckv.p), width, bf(d_w.p), kv_seq, k.row, tokens, k.kv_lora, eps, nullptr);
  TPB_CUDA_CHECK(cudaMemcpy2DAsync(kv_seq + k.rope_at, k.row * kB, bf(d_ckv.p) + k.kv_lora, width * kB, k.rope * kB,
                                   tokens, cudaMemcpyDeviceToDevice, nullptr));
  gpu::rope_interleaved(kv_seq + k.rope_at, tokens, k.row, 1, d_pos.p, d_freq.p, k.rope / 2, af, nullptr);
  gpu::kv_cache_write(kv_seq, tokens, k.n, d_pos.p, bf(d_cache_seq.p) + k.cache_offset, k.max_len, k.row, nullptr);
  gpu::mla_kv_row(bf(d_ckv.p), bf(d_w.p), eps, d_pos.p, d_freq.p, af, shape, bf(d_kv_fused.p),
                  bf(d_cache_fused.p) + k.cache_offset, nullptr);
  const auto kv = d_kv_fused.download(), cache = d_cache_fused.download();
  EXPECT_TRUE(same(kv, d_kv_seq.download())) << "kvrow";
  EXPECT_TRUE(same(cache, d_cache_seq.download())) << "cache";
  EXPECT_TRUE(same(d_ckv.download(), ckv)) << "ckv is not written";

  std::vector<float> ref = widen(kvrow0);
  gpu::mla_kv_row_ref(ckv.data(), w.data(), eps, positions.data(), table, shape, ref.data());
  const auto ckvf = widen(ckv);
  Compared norm, rot;
  for (std::int64_t t = 0; t < tokens; ++t) {
    for (std::int64_t j = 0; j < k.row; ++j) {
      const std::size_t at = static_cast<std::size_t>(t * k.row + j);
      const double got = bf16_to_float(kv[at]);
      if (j < k.kv_lora) {
        norm.add(got, ref[at], rms_tol(ref[at], k.kv_lora));
      } else if (j >= k.rope_at && j < k.rope_at + k.rope) {
        const std::size_t pair = static_cast<std::size_t>(t * width + k.kv_lora + ((j - k.rope_at) & ~std::int64_t{1}));
        rot.add(got, ref[at], rope_tol(ref[at], ckvf[pair], ckvf[pair + 1], af));
      } else {
        ASSERT_EQ(kv[at], kvrow0[at]) << "token " << t << " wrote kvrow's pad column " << j;
      }
    }
  }
  EXPECT_TRUE(close(norm, kBf16RelL2)) << "latent (element = token * " << k.kv_lora << " + col)";
  EXPECT_TRUE(close(rot, kBf16RelL2)) << "rope (element = token * " << k.rope << " + rotary dim)";
  std::vector<std::uint16_t> want(cache0.begin() + k.cache_offset, cache0.end());
  gpu::kv_cache_write_ref(kv.data(), tokens, k.n, positions.data(), want.data(), k.max_len, k.row);
  EXPECT_TRUE(same(std::vector<std::uint16_t>(cache.begin() + k.cache_offset, cache.begin() + k.cache_offset +
                                                   static_cast<std::ptrdiff_t>(cache_elems)),
                   want))
      << "cache rows";
  EXPECT_TRUE(same(std::vector<std::uint16_t>(cache.begin(), cache.begin() + k.cache_offset),
                   std::vector<std::uint16_t>(cache0.begin(), cache0.begin() + k.cache_offset)))
      << "before the cache";
}

// Kimi-K2.5's widths (kv_lora 512 | rope 64, no pads): the 16-byte vector path.
TEST(GpuMlaKvCacheRow, KimiDecodeBatch3) {
  TPB_REQUIRE_GPU();
  check_mla_kv_row({3, 1, 512, 64, 512, 576, 4100, 0}, kimi_rope(), 71);
}

TEST(GpuMlaKvCacheRow, KimiPrefillBatch2Tokens5) {
  TPB_REQUIRE_GPU();
  check_mla_kv_row({2, 5, 512, 64, 512, 576, 4100, 0}, kimi_rope(), 72);
}

// The vector path's norm with a misaligned cache: its stores go element by element.
TEST(GpuMlaKvCacheRow, KimiMisalignedCache) {
  TPB_REQUIRE_GPU();
  check_mla_kv_row({2, 5, 512, 64, 512, 576, 300, 1}, kimi_rope(), 73);
}

// kv_lora 129 (padded to 136, the cache row 136 | 64): rmsnorm's scalar path, a pad of 7
// columns between the parts.
TEST(GpuMlaKvCacheRow, OddLatentPaddedDecodeBatch3) {
  TPB_REQUIRE_GPU();
  check_mla_kv_row({3, 1, 129, 64, 136, 200, 4100, 0}, kimi_rope(), 74);
}

TEST(GpuMlaKvCacheRow, OddLatentPaddedPrefillBatch2Tokens5) {
  TPB_REQUIRE_GPU();
  check_mla_kv_row({2, 5, 129, 64, 136, 200, 4100, 0}, kimi_rope(), 75);
}

// kv_lora 64 but rope 6 (padded to 8): ckv's row of 70 is not a multiple of 8, so rmsnorm
// takes its scalar path although the latent is; a pad of 2 columns after the rope.
TEST(GpuMlaKvCacheRow, OddRopeWidthPrefillBatch2Tokens5) {
  TPB_REQUIRE_GPU();
  kernels::RopeParams p;
  p.dim = 6;
  p.theta = 10000.0;
  check_mla_kv_row({2, 5, 64, 6, 64, 72, 50, 0}, p, 76);
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
