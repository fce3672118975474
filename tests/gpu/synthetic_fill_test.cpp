// Synthetic weights on the device (tpb/kernels/gpu/synthetic_fill.h, built from a
// WeightRequest by reference_engine/gpu/synthetic_window.h) against the CPU synthetic source
// (reference_engine/weights/synthetic.cpp): bitwise, for real tensor names and shard windows.
// The value is one exact draw times a host-rounded scale, so there is nothing to tolerate:
// the f32 fill is the CPU's bits and the bf16 fill is float_to_bf16 of them.
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "reference_engine/gpu/synthetic_window.h"
#include "reference_engine/weights/weight_source.h"
#include "gpu_test_support.h"
#include "tpb/check.h"
#include "tpb/cuda_check.h"
#include "tpb/dtype.h"
#include "tpb/kernels/device.h"
#include "tpb/kernels/gpu/synthetic_fill.h"
#include "tpb/kernels/int4_format.h"
#include "tpb/kernels/synthetic_weights.h"

namespace tpb::test {
namespace {

constexpr std::uint64_t kSeed = 20260301;

WeightRequest block(std::string name, std::vector<std::int64_t> shape, std::int64_t r0, std::int64_t r1,
                    std::int64_t c0, std::int64_t c1, synthetic::InitKind init, std::int64_t fan_in) {
  WeightRequest r = full_tensor(std::move(name), std::move(shape), init, fan_in);
  r.row_begin = r0;
  r.row_end = r1;
  r.col_begin = c0;
  r.col_end = c1;
  return r;
}

// Blocks as the engine requests them: column- and row-parallel shards of real tensors, a
// vocab shard of the embedding, vectors of each init kind, odd widths.
std::vector<WeightRequest> requests() {
  using synthetic::InitKind;
  return {
      block("model.layers.3.mlp.experts.17.gate_proj.weight", {2048, 7168}, 512, 768, 0, 7168, InitKind::linear, 7168),
      block("model.layers.3.self_attn.o_proj.weight", {7168, 8192}, 100, 117, 4096, 8192, InitKind::linear, 8192),
      block("model.layers.0.self_attn.q_b_proj.weight", {12288, 1536}, 6144, 6150, 0, 1536, InitKind::linear, 1536),
      block("model.embed_tokens.weight", {163840, 7168}, 81920, 81925, 0, 7168, InitKind::embedding, 7168),
      block("model.layers.0.self_attn.kv_a_layernorm.weight", {512}, 0, 512, 0, 1, InitKind::norm, 1),
      block("model.layers.5.mlp.gate.e_score_correction_bias", {384}, 0, 384, 0, 1, InitKind::bias, 1),
      block("model.layers.1.self_attn.kv_b_proj.weight", {101, 37}, 3, 50, 5, 36, InitKind::linear, 37),
  };
}

std::vector<float> cpu_block(const WeightRequest& r) {
  std::vector<float> out(static_cast<std::size_t>(r.rows() * r.cols()));
  make_synthetic_weights(kSeed)->read(r, out.data());
  return out;
}

// No GPU needed: the window's key, scale and geometry reproduce the CPU source's values
// when fed to the same host function the kernel calls.
TEST(SyntheticWindow, ReproducesTheCpuSource) {
  for (const WeightRequest& r : requests()) {
    const gpu::SyntheticWindow w = gpu::synthetic_window(r, kSeed);
    EXPECT_EQ(w.key, synthetic::tensor_key(kSeed, synthetic::name_hash(r.name.c_str()))) << r.name;
    EXPECT_EQ(w.kind, r.init);
    EXPECT_EQ(w.global_cols, r.global_cols());
    EXPECT_EQ(w.row_begin, r.row_begin);
    EXPECT_EQ(w.rows, r.rows());
    EXPECT_EQ(w.col_begin, r.col_begin);
    EXPECT_EQ(w.cols, r.cols());
    const auto want = cpu_block(r);
    for (std::int64_t i = 0; i < w.rows; ++i)
      for (std::int64_t j = 0; j < w.cols; ++j) {
        const auto index = static_cast<std::uint64_t>((w.row_begin + i) * w.global_cols + w.col_begin + j);
        ASSERT_EQ(bits(synthetic::value(w.kind, w.scale, w.key, index)),
                  bits(want[static_cast<std::size_t>(i * w.cols + j)]))
            << r.name << " (" << i << ", " << j << ")";
      }
  }
  // A different seed is a different model.
  const WeightRequest r = requests().front();
  EXPECT_NE(gpu::synthetic_window(r, kSeed).key, gpu::synthetic_window(r, kSeed + 1).key);
}

TEST(SyntheticWindow, RejectsWhatTheCpuSourceRejects) {
  WeightRequest r = requests().front();
  r.row_end = r.shape[0] + 1;
  EXPECT_ANY_THROW(gpu::synthetic_window(r, kSeed));
  r = requests().front();
  r.fan_in = 0;
  EXPECT_ANY_THROW(gpu::synthetic_window(r, kSeed));
}

constexpr std::uint16_t kSentinel = 0x7f7f;

TEST(GpuSyntheticFill, Bf16AndF32BitwiseTheCpuSource) {
  TPB_REQUIRE_GPU();
  for (const WeightRequest& r : requests()) {
    const gpu::SyntheticWindow w = gpu::synthetic_window(r, kSeed);
    const auto want = cpu_block(r);
    // bf16 into rows wider than the window: the padding stays untouched.
    const std::int64_t stride = w.cols + 3;
    DevBuf<std::uint16_t> d_bf(static_cast<std::size_t>(w.rows * stride));
    d_bf.upload(std::vector<std::uint16_t>(d_bf.n, kSentinel));
    gpu::synthetic_fill_bf16(w, reinterpret_cast<__nv_bfloat16*>(d_bf.p), stride, nullptr);
    DevBuf<float> d_f(want.size());
    gpu::synthetic_fill_f32(w, d_f.p, w.cols, nullptr);
    const auto got_bf = d_bf.download();
    const auto got_f = d_f.download();
    for (std::int64_t i = 0; i < w.rows; ++i) {
      for (std::int64_t j = 0; j < stride; ++j) {
        const std::uint16_t b = got_bf[static_cast<std::size_t>(i * stride + j)];
        if (j >= w.cols) {
          ASSERT_EQ(b, kSentinel) << r.name << " wrote padding (" << i << ", " << j << ")";
          continue;
        }
        const float v = want[static_cast<std::size_t>(i * w.cols + j)];
        ASSERT_EQ(b, float_to_bf16(v)) << r.name << " bf16 (" << i << ", " << j << ")";
        ASSERT_EQ(bits(got_f[static_cast<std::size_t>(i * w.cols + j)]), bits(v))
            << r.name << " f32 (" << i << ", " << j << ")";
      }
    }
  }
}

// INT4 windows (synthetic_fill_int4) against synthetic::int4_q / int4_scale_bits on the host,
// packed with int4::pack8: bitwise. A column-parallel shard of a gate projection, a row-parallel
// shard of a down projection (col_begin > 0), and a tensor whose width is not a multiple of 32
// (its groups per row are ceil(cols / 32), the window ending before the ragged group).
TEST(GpuSyntheticFill, Int4WordsAndScalesBitwiseTheHostFunctions) {
  TPB_REQUIRE_GPU();
  struct Int4Window {
    const char* name;
    std::int64_t global_rows, global_cols, row_begin, rows, col_begin, cols;
  };
  const Int4Window windows[] = {
      {"model.layers.3.mlp.experts.17.gate_proj.weight", 2048, 7168, 512, 256, 0, 7168},
      {"model.layers.3.mlp.experts.17.down_proj.weight", 7168, 2048, 100, 37, 1024, 256},
      {"model.layers.1.mlp.experts.0.up_proj.weight", 9, 100, 2, 5, 32, 64},
  };
  for (const Int4Window& iw : windows) {
    gpu::SyntheticWindow w;
    w.key = synthetic::tensor_key(kSeed, synthetic::name_hash(iw.name));
    w.kind = synthetic::InitKind::linear;
    w.scale = 1.0f / std::sqrt(static_cast<float>(iw.global_cols));
    w.global_cols = iw.global_cols;
    w.row_begin = iw.row_begin;
    w.rows = iw.rows;
    w.col_begin = iw.col_begin;
    w.cols = iw.cols;
    const std::int64_t words = w.cols / 8, groups = w.cols / 32, global_groups = (w.global_cols + 31) / 32;
    DevBuf<std::uint32_t> d_packed(static_cast<std::size_t>(w.rows * words));
    DevBuf<std::uint16_t> d_scales(static_cast<std::size_t>(w.rows * groups));
    gpu::synthetic_fill_int4(w, d_packed.p, reinterpret_cast<__nv_bfloat16*>(d_scales.p), nullptr);
    const auto packed = d_packed.download();
    const auto scales = d_scales.download();
    for (std::int64_t r = 0; r < w.rows; ++r) {
      for (std::int64_t k = 0; k < words; ++k) {
        int q[8];
        for (int j = 0; j < 8; ++j)
          q[j] = synthetic::int4_q(w.key, static_cast<std::uint64_t>((w.row_begin + r) * w.global_cols + w.col_begin +
                                                                     8 * k + j));
        ASSERT_EQ(packed[static_cast<std::size_t>(r * words + k)], int4::pack8(q)) << iw.name << " word (" << r << ", " << k << ")";
      }
      for (std::int64_t gi = 0; gi < groups; ++gi) {
        const auto index = static_cast<std::uint64_t>((w.row_begin + r) * global_groups + w.col_begin / 32 + gi);
        ASSERT_EQ(scales[static_cast<std::size_t>(r * groups + gi)], synthetic::int4_scale_bits(w.key, index, w.scale))
            << iw.name << " scale (" << r << ", " << gi << ")";
      }
    }
  }
  // A window that would split a scale group is refused.
  gpu::SyntheticWindow bad;
  bad.global_cols = 256;
  bad.rows = 1;
  bad.col_begin = 16;
  bad.cols = 64;
  DevBuf<std::uint32_t> p(64);
  DevBuf<std::uint16_t> s(64);
  EXPECT_THROW(gpu::synthetic_fill_int4(bad, p.p, reinterpret_cast<__nv_bfloat16*>(s.p), nullptr), Error);
  bad.col_begin = 0;
  bad.cols = 48;
  EXPECT_THROW(gpu::synthetic_fill_int4(bad, p.p, reinterpret_cast<__nv_bfloat16*>(s.p), nullptr), Error);
}

// Conversions: bf16 -> f32 is exact; f32 -> bf16 is tpb::float_to_bf16's round to nearest
// even, checked on random finite values over a wide exponent range and on exact ties.
TEST(GpuConvert, F32ToBf16AndBack) {
  TPB_REQUIRE_GPU();
  const std::size_t n = 10001;
  std::mt19937 rng(401);
  std::uniform_int_distribution<std::uint32_t> mant(0, (1u << 23) - 1), expo(90, 164), sign(0, 1);
  std::vector<float> f(n);
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t u = sign(rng) << 31 | expo(rng) << 23 | mant(rng);
    if (i % 7 == 0) u = (u & 0xffff0000u) | 0x8000u;  // exactly halfway: ties to even
    std::memcpy(&f[i], &u, 4);
  }
  DevBuf<float> d_f(n), d_back(n);
  DevBuf<std::uint16_t> d_b(n);
  d_f.upload(f);
  gpu::convert_f32_to_bf16(d_f.p, reinterpret_cast<__nv_bfloat16*>(d_b.p), static_cast<std::int64_t>(n), nullptr);
  gpu::convert_bf16_to_f32(reinterpret_cast<__nv_bfloat16*>(d_b.p), d_back.p, static_cast<std::int64_t>(n), nullptr);
  const auto b = d_b.download();
  const auto back = d_back.download();
  for (std::size_t i = 0; i < n; ++i) {
    ASSERT_EQ(b[i], float_to_bf16(f[i])) << i;
    ASSERT_EQ(bits(back[i]), bits(bf16_to_float(b[i]))) << i;
  }
}

}  // namespace
}  // namespace tpb::test
