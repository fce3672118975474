// Absorbed-MLA decode attention on the GPU (tpb/kernels/gpu/mla_decode.h) against its host
// reference on random bf16 inputs: shapes from one key to past 32K, mixed lengths in a batch,
// head counts that do and do not fill a head group, small latent widths; every split kernel, and
// the mma.sync one in each shared-memory configuration the device can hold (the ones devices of
// 99 KiB or 163 KiB per block take, tpb/kernels/mla_decode_split.h); the same call twice
// gives the same bits; a captured graph replayed with other seq_lens equals eager; and the
// absorbed form, with W_UK / W_UV applied on the host, matches the CPU absorbed reference.
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "gpu_test_support.h"
#include "suite/checks/tolerance.h"
#include "tpb/cuda_check.h"
#include "tpb/dtype.h"
#include "tpb/kernels/device.h"
#include "tpb/kernels/gpu/mla_decode.h"
#include "tpb/kernels/gpu/mla_decode_tuning.h"
#include "tpb/kernels/kernel_paths.h"
#include "tpb/kernels/mla_decode.h"
#include "tpb/kernels/mla_decode_split.h"

namespace tpb::test {
namespace {

// DeepSeek-V3's softmax scale (1/sqrt(192)) times a yarn mscale of about 1.5: with q in
// [-2, 2) and c in [-1, 1) the scores spread over a few units, so the softmax is far from
// uniform and the running max matters.
constexpr float kScale = 0.108f;
constexpr float kQAmp = 2.0f;
constexpr float kCacheAmp = 1.0f;

struct DecodeCase {
  std::string name;
  gpu::MlaDecodeShape shape;
  std::vector<std::int32_t> lens;
};

// Everything one test needs on both sides.
struct DecodeRun {
  gpu::MlaDecodeShape shape;
  std::vector<std::uint16_t> q, cache;
  DeviceBuffer<std::uint16_t> d_q, d_cache, d_out;
  DeviceBuffer<std::int32_t> d_lens;
  DeviceBuffer<unsigned char> d_ws;
  cudaStream_t stream = nullptr;

  DecodeRun(const gpu::MlaDecodeShape& s, std::uint64_t seed)
      : shape(s),
        q(hashed_bf16(seed, static_cast<std::size_t>(s.batch * s.heads * (s.kv_lora + s.rope)), kQAmp)),
        cache(hashed_bf16(seed + 1, static_cast<std::size_t>(s.batch * s.max_len * (s.kv_lora + s.rope)), kCacheAmp)),
        d_q(q.size()),
        d_cache(cache.size()),
        d_out(static_cast<std::size_t>(s.batch * s.heads * s.kv_lora)),
        d_lens(static_cast<std::size_t>(s.batch)),
        d_ws(workspace_for_every_variant(s)) {
    d_q.upload(q.data());
    d_cache.upload(cache.data());
    TPB_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  }
  ~DecodeRun() { cudaStreamDestroy(stream); }

  void set_lens(const std::vector<std::int32_t>& lens) {
    TPB_CUDA_CHECK(cudaMemcpyAsync(d_lens.ptr, lens.data(), lens.size() * 4, cudaMemcpyHostToDevice, stream));
    TPB_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  // variant < 0: mla_decode_attention's choice; else that split kernel (mla_decode_tuning.h),
  // mma_sync in configuration mma_config (< 0: the one the budget picks).
  void launch(int variant = -1, int mma_config = -1) {
    const auto* dq = reinterpret_cast<const __nv_bfloat16*>(d_q.ptr);
    const auto* dc = reinterpret_cast<const __nv_bfloat16*>(d_cache.ptr);
    auto* out = reinterpret_cast<__nv_bfloat16*>(d_out.ptr);
    if (variant < 0)
      gpu::mla_decode_attention(dq, dc, d_lens.ptr, shape, kScale, d_ws.ptr, d_ws.count, out, stream);
    else
      gpu::tuning::mla_decode_variant(variant, dq, dc, d_lens.ptr, shape, kScale, d_ws.ptr, out, stream,
                                      tiles_per_split, mma_config);
  }
  std::int64_t tiles_per_split = 0;  // for a variant: 0 the plan's splits, else each split's tiles
  std::vector<std::uint16_t> output() {
    TPB_CUDA_CHECK(cudaStreamSynchronize(stream));
    std::vector<std::uint16_t> out(d_out.count);
    d_out.download(out.data());
    return out;
  }
  // Output and workspace poisoned first (all-ones bytes: NaN), so that a store a kernel skips
  // cannot pass on another run's numbers.
  std::vector<std::uint16_t> run(const std::vector<std::int32_t>& lens, int variant = -1, int mma_config = -1) {
    set_lens(lens);
    TPB_CUDA_CHECK(cudaMemsetAsync(d_out.ptr, 0xff, d_out.count * sizeof(std::uint16_t), stream));
    TPB_CUDA_CHECK(cudaMemsetAsync(d_ws.ptr, 0xff, d_ws.count, stream));
    launch(variant, mma_config);
    return output();
  }

  // Cache rows at and past each sequence's length set to NaN: no kernel may read them.
  void poison_past_lengths(const std::vector<std::int32_t>& lens) {
    const std::int64_t row = shape.kv_lora + shape.rope;
    std::vector<std::uint16_t> poisoned = cache;
    for (std::int64_t b = 0; b < shape.batch; ++b)
      for (std::int64_t j = lens[static_cast<std::size_t>(b)]; j < shape.max_len; ++j)
        std::fill_n(poisoned.begin() + (b * shape.max_len + j) * row, row, std::uint16_t{0x7fc0});
    d_cache.upload(poisoned.data());
  }

  static std::size_t workspace_for_every_variant(const gpu::MlaDecodeShape& s) {
    std::size_t bytes = 0;
    // One-tile splits: the most splits a sweep makes, where the workspace layout takes them.
    const bool one_tile_splits = kernels::mla_decode_splits_of(s.max_len, 1) <= kernels::kMlaDecodeMaxSplits;
    for (int v = 0; v < gpu::tuning::mla_decode_variants(); ++v)
      if (gpu::tuning::mla_decode_variant_supports(v, s)) {
        bytes = std::max(bytes, gpu::tuning::mla_decode_variant_workspace_bytes(v, s));
        if (one_tile_splits) bytes = std::max(bytes, gpu::tuning::mla_decode_variant_workspace_bytes(v, s, 1));
      }
    for (int c : mma_configs_that_run(s)) bytes = std::max(bytes, gpu::tuning::mla_decode_variant_workspace_bytes(0, s, 0, c));
    return bytes;
  }

  // The mma.sync kernel's configurations this device can hold at the shape (every one on an
  // H100 / H200, whatever TPB_KERNELS says; the smaller ones only on a 99 KiB device).
  static std::vector<int> mma_configs_that_run(const gpu::MlaDecodeShape& s) {
    std::vector<int> configs;
    for (int c = 0; c < kernels::kMlaDecodeMmaConfigCount; ++c)
      if (gpu::tuning::mla_decode_mma_config_runs(c, s)) configs.push_back(c);
    return configs;
  }
};

constexpr int kMmaSync = 0;  // mla_decode_tuning.h's variant 0

int device_sm_count() {
  int dev = 0, sms = 0;
  TPB_CUDA_CHECK(cudaGetDevice(&dev));
  TPB_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  return sms;
}

// GPU bf16 output vs the fp32 reference over the same bf16 inputs. Three error sources:
//  - the output rounding to bf16: at most half an ulp, <= 2^-8 |value| (7 stored mantissa bits);
//  - the scores' fp32 dot products in another order: about 2^-24 * 200 (the rms of the
//    partial sums over 576 terms of these inputs) per score, times scale, which moves an
//    output by about that times the spread of c (<= 1): at most ~1e-6;
//  - the weighted sums in another order (split partials, per-tile rescaling, the merge): a
//    random walk of about sqrt(n) roundings of 2^-24 relative to sum_j p_j |c_j| <= 1.
// The absolute term allows 4 sqrt(n) + 64 roundings of 2^-24 (4e-6 at one key, 1.8e-5 at
// 20K keys): a CPU emulation of these kernels (same fp32 operations, thread by thread) stayed
// within 2e-8 of the reference beyond the bf16 rounding, so this leaves room for the GPU's
// expf (2 ulp) while staying below the bf16 rounding of any output above 0.001.
void expect_close(const std::vector<std::uint16_t>& gpu, const std::vector<float>& ref,
                  const gpu::MlaDecodeShape& s, const std::vector<std::int32_t>& lens) {
  ASSERT_EQ(gpu.size(), ref.size());
  std::size_t bad = 0, worst = 0;
  double worst_excess = -1, max_abs = 0, diff2 = 0, ref2 = 0;
  for (std::size_t i = 0; i < gpu.size(); ++i) {
    const std::int64_t b = static_cast<std::int64_t>(i) / (s.heads * s.kv_lora);
    const double n = lens[static_cast<std::size_t>(b)];
    const double abs_tol = (4.0 * std::sqrt(n) + 64.0) * 0x1.0p-24 * kCacheAmp;
    const double g = bf16_to_float(gpu[i]);
    const double tol = 0x1.0p-8 * std::fabs(ref[i]) + abs_tol;
    const double err = std::fabs(g - ref[i]);
    max_abs = std::max(max_abs, err);
    diff2 += err * err;
    ref2 += static_cast<double>(ref[i]) * ref[i];
    if (!std::isfinite(g) || err > tol) ++bad;
    const double excess = std::isfinite(g) ? err / tol : 1e30;
    if (excess > worst_excess) {
      worst_excess = excess;
      worst = i;
    }
  }
  EXPECT_EQ(bad, 0u) << "mla_decode vs host reference: " << bad << " of " << gpu.size()
                     << " outside tolerance; worst index " << worst << " (batch "
                     << worst / static_cast<std::size_t>(s.heads * s.kv_lora) << ", head "
                     << (worst / static_cast<std::size_t>(s.kv_lora)) % static_cast<std::size_t>(s.heads) << ", col "
                     << worst % static_cast<std::size_t>(s.kv_lora) << "): gpu " << bf16_to_float(gpu[worst])
                     << " ref " << ref[worst] << ", " << worst_excess << " of the budget; max abs error " << max_abs
                     << ", rel-L2 " << std::sqrt(diff2 / std::max(ref2, 1e-300));
}


std::vector<std::int32_t> random_lens(std::uint64_t seed, std::int64_t batch, std::int64_t max_len) {
  std::vector<std::int32_t> lens(static_cast<std::size_t>(batch));
  for (std::size_t b = 0; b < lens.size(); ++b)
    lens[b] = static_cast<std::int32_t>(1 + mix(seed ^ (b * 7919)) % static_cast<std::uint64_t>(max_len));
  lens[0] = static_cast<std::int32_t>(max_len);  // one full sequence in every batch
  return lens;
}

gpu::MlaDecodeShape shape(std::int64_t batch, std::int64_t heads, std::int64_t kv_lora, std::int64_t rope,
                          std::int64_t max_len) {
  gpu::MlaDecodeShape s;
  s.batch = batch;
  s.heads = heads;
  s.kv_lora = kv_lora;
  s.rope = rope;
  s.max_len = max_len;
  return s;
}

std::vector<DecodeCase> cases() {
  return {
      {"b1_h8_len1", shape(1, 8, 512, 64, 64), {1}},
      // Lengths not multiples of any split or tile size, one at the full capacity.
      {"b3_h32_mixed_lens", shape(3, 32, 512, 64, 4100), {1, 777, 4100}},
      {"b1_h32_len20000", shape(1, 32, 512, 64, 20480), {20000}},
      {"b1_h8_len32999_max33000", shape(1, 8, 512, 64, 33000), {32999}},
      // 20 heads: a full group of 16 and a partial one of 4; a narrow latent leaves threads idle.
      {"b5_h20_lora128_rope32", shape(5, 20, 128, 32, 300), {300, 17, 1, 255, 129}},
      {"b64_h16_random_lens", shape(64, 16, 512, 64, 640), random_lens(11, 64, 640)},
      // Heads that fill no group of the heads-as-N kernel (16 and 32 columns, the rest padded).
      {"b3_h12_mixed_lens", shape(3, 12, 512, 64, 2100), {2100, 1, 700}},
      {"b2_h24_mixed_lens", shape(2, 24, 512, 64, 1300), {63, 1300}},
      // A full wgmma group of 64 heads (TP1), and 80 heads: one full group and one of 16.
      {"b2_h64_mixed_lens", shape(2, 64, 512, 64, 3000), {3000, 65}},
      {"b2_h80_two_groups", shape(2, 80, 512, 64, 700), {700, 64}},
      // DeepSeek-V3's 128 heads at TP 1 (two full groups), and a single head (63 padded rows).
      {"b3_h128_mixed_lens", shape(3, 128, 512, 64, 900), {900, 1, 513}},
      {"b2_h1", shape(2, 1, 512, 64, 300), {300, 129}},
      {"b256_h5_lora64_rope8", shape(256, 5, 64, 8, 40), random_lens(12, 256, 40)},
      {"b2_h3_no_rope", shape(2, 3, 24, 0, 50), {50, 33}},
      // The widest row (kv_lora 512 + rope 128): past 608 columns a 99 KiB device takes the
      // one-stage configuration.
      {"b2_h20_lora512_rope128", shape(2, 20, 512, 128, 700), {700, 129}},
      // A row of odd size for the stages (rope 40: 552 columns) at 48 heads (two CTAs of 32 in
      // the first configuration, three of 16 in the small ones).
      {"b2_h48_lora512_rope40", shape(2, 48, 512, 40, 1000), {999, 64}},
  };
}

// gtest prints the case by name, not as bytes.
void PrintTo(const DecodeCase& c, std::ostream* os) { *os << c.name; }

class MlaDecodeTest : public ::testing::TestWithParam<DecodeCase> {};

TEST_P(MlaDecodeTest, MatchesHostReference) {
  TPB_REQUIRE_GPU();
  const DecodeCase& c = GetParam();
  std::uint64_t seed = 1469598103934665603ull;  // FNV-1a of the case name: fixed, distinct per case
  for (char ch : c.name) seed = (seed ^ static_cast<unsigned char>(ch)) * 1099511628211ull;
  DecodeRun run(c.shape, seed);
  run.poison_past_lengths(c.lens);
  std::vector<float> ref(run.d_out.count);
  gpu::mla_decode_attention_ref(run.q.data(), run.cache.data(), c.lens.data(), c.shape, kScale, ref.data());
  // Every split kernel that takes the shape, and mla_decode_attention: the bits of the one it picks.
  const int picked = gpu::tuning::mla_decode_default_variant(c.shape);
  std::vector<std::uint16_t> picked_out;
  for (int v = 0; v < gpu::tuning::mla_decode_variants(); ++v) {
    if (!gpu::tuning::mla_decode_variant_supports(v, c.shape)) continue;
    SCOPED_TRACE(std::string("variant ") + gpu::tuning::mla_decode_variant_name(v));
    const std::vector<std::uint16_t> out = run.run(c.lens, v);
    expect_close(out, ref, c.shape, c.lens);
    if (v == picked) picked_out = out;
  }
  const std::vector<std::uint16_t> dispatched = run.run(c.lens);
  ASSERT_EQ(picked_out.size(), dispatched.size());
  EXPECT_EQ(0, std::memcmp(picked_out.data(), dispatched.data(), dispatched.size() * 2))
      << "mla_decode_attention differs from the variant it picks, " << gpu::tuning::mla_decode_variant_name(picked);

  // The mma.sync kernel in every configuration the device holds, each twice (the same bits),
  // each within the memory planner's split count; the one the budget picks gives mma_sync's bits.
  const int picked_config = gpu::tuning::mla_decode_mma_config(c.shape);
  const std::vector<std::uint16_t> mma_picked = run.run(c.lens, kMmaSync);
  const kernels::MlaDecodeSplit bound = kernels::mla_decode_split_for(
      c.shape.batch, c.shape.heads, c.shape.max_len, kernels::mla_decode_wgmma_shape(c.shape.kv_lora, c.shape.rope),
      device_sm_count());
  for (int config : DecodeRun::mma_configs_that_run(c.shape)) {
    SCOPED_TRACE(std::string("mma_sync configuration ") + kernels::kMlaDecodeMmaConfigs[config].name);
    const std::vector<std::uint16_t> out = run.run(c.lens, kMmaSync, config);
    expect_close(out, ref, c.shape, c.lens);
    const std::vector<std::uint16_t> again = run.run(c.lens, kMmaSync, config);
    EXPECT_EQ(0, std::memcmp(out.data(), again.data(), out.size() * 2)) << "two identical calls differ";
    if (config == picked_config) {
      EXPECT_EQ(0, std::memcmp(out.data(), mma_picked.data(), out.size() * 2))
          << "mma_sync differs from the configuration it picks";
    }
    if (config > 0) {
      EXPECT_LE(gpu::tuning::mla_decode_variant_splits(kMmaSync, c.shape, 0, config), bound.splits)
          << "more splits than the memory planner sizes the workspace for";
    }
  }
}

// tpb_bench's split-count sweep fixes each split's key range (tiles_per_split): every variant
// stays within the budget of the host reference at split sizes that cut the sequences
// anywhere (1, 3 and 7 tiles of 64 keys, lengths not multiples of them), and a split count
// the workspace layout does not take is refused.
TEST(MlaDecode, FixedSplitSizesMatchHostReference) {
  TPB_REQUIRE_GPU();
  // 64 heads (TP 1's share: the 64-head wgmma kernel) and 32 (TP 2's: the heads-as-N one).
  for (std::int64_t heads : {64, 32}) {
    const gpu::MlaDecodeShape s = shape(3, heads, 512, 64, 1500);
    const std::vector<std::int32_t> lens = {1500, 200, 1};
    DecodeRun run(s, 77 + static_cast<std::uint64_t>(heads));
    run.poison_past_lengths(lens);
    std::vector<float> ref(run.d_out.count);
    gpu::mla_decode_attention_ref(run.q.data(), run.cache.data(), lens.data(), s, kScale, ref.data());
    for (int v = 0; v < gpu::tuning::mla_decode_variants(); ++v) {
      if (!gpu::tuning::mla_decode_variant_supports(v, s)) continue;
      for (std::int64_t tiles : {1, 3, 7}) {
        SCOPED_TRACE(std::string("variant ") + gpu::tuning::mla_decode_variant_name(v) + ", " + std::to_string(heads) +
                     " heads, " + std::to_string(tiles) + " tiles per split");
        EXPECT_EQ(gpu::tuning::mla_decode_variant_splits(v, s, tiles), (1500 / 64 + 1 + tiles - 1) / tiles);
        run.tiles_per_split = tiles;
        expect_close(run.run(lens, v), ref, s, lens);
      }
    }
    // The smaller configurations (32-key stages) over split ranges of whole 64-key tiles.
    for (int config : DecodeRun::mma_configs_that_run(s)) {
      for (std::int64_t tiles : {1, 3}) {
        SCOPED_TRACE(std::string("mma_sync configuration ") + kernels::kMlaDecodeMmaConfigs[config].name + ", " +
                     std::to_string(heads) + " heads, " + std::to_string(tiles) + " tiles per split");
        EXPECT_EQ(gpu::tuning::mla_decode_variant_splits(kMmaSync, s, tiles, config), (1500 / 64 + 1 + tiles - 1) / tiles);
        run.tiles_per_split = tiles;
        expect_close(run.run(lens, kMmaSync, config), ref, s, lens);
      }
    }
    run.tiles_per_split = 0;
  }
  EXPECT_THROW(gpu::tuning::mla_decode_variant_splits(0, shape(1, 8, 512, 64, 64 * 257), 1), std::exception);
}

// A workspace smaller than the plan of the call needs is refused before any launch (a variant
// chosen on another device than the one the workspace was sized on would write past it).
TEST(MlaDecode, WorkspaceTooSmallThrows) {
  TPB_REQUIRE_GPU();
  const gpu::MlaDecodeShape s = shape(2, 64, 512, 64, 3000);
  const std::vector<std::int32_t> lens = {3000, 65};
  DecodeRun run(s, 99);
  run.set_lens(lens);
  const std::size_t need = gpu::mla_decode_workspace_bytes(s);
  ASSERT_GE(run.d_ws.count, need);
  auto attend = [&](std::size_t capacity) {
    gpu::mla_decode_attention(reinterpret_cast<const __nv_bfloat16*>(run.d_q.ptr),
                              reinterpret_cast<const __nv_bfloat16*>(run.d_cache.ptr), run.d_lens.ptr, s, kScale,
                              run.d_ws.ptr, capacity, reinterpret_cast<__nv_bfloat16*>(run.d_out.ptr), run.stream);
  };
  EXPECT_THROW(attend(need - 1), std::exception);
  EXPECT_NO_THROW(attend(need));
  TPB_CUDA_CHECK(cudaStreamSynchronize(run.stream));
}

// The Kimi-K2.5 row takes a wgmma kernel by default where the kernel-path registry gives
// mla_decode wgmma (a compute capability 9.0 device, sm_90a code in the build, TPB_KERNELS not
// portable): up to 32 heads the heads-as-N one, above them the 64-head one; other widths, and
// every width elsewhere, the mma.sync one.
TEST(MlaDecode, DefaultVariantByWidth) {
  TPB_REQUIRE_GPU();
  const bool wgmma = kernels::kernel_path(kernels::KernelOp::mla_decode).wgmma();
  auto picked = [](const gpu::MlaDecodeShape& s) {
    return gpu::tuning::mla_decode_variant_name(gpu::tuning::mla_decode_default_variant(s));
  };
  EXPECT_STREQ(wgmma ? "wgmma_heads_n" : "mma_sync", picked(shape(1, 32, 512, 64, 10)));
  EXPECT_STREQ(wgmma ? "wgmma_heads_n" : "mma_sync", picked(shape(1, 1, 512, 64, 10)));
  EXPECT_STREQ(wgmma ? "wgmma" : "mma_sync", picked(shape(1, 33, 512, 64, 10)));
  EXPECT_STREQ(wgmma ? "wgmma" : "mma_sync", picked(shape(1, 64, 512, 64, 10)));
  EXPECT_STREQ("mma_sync", picked(shape(1, 32, 128, 32, 10)));
  EXPECT_FALSE(gpu::tuning::mla_decode_variant_supports(1, shape(1, 32, 512, 32, 10)));
  EXPECT_FALSE(gpu::tuning::mla_decode_variant_supports(2, shape(1, 32, 512, 32, 10)));
  EXPECT_FALSE(gpu::tuning::mla_decode_variant_supports(2, shape(1, 33, 512, 64, 10)));
}

// The budget the launcher applies is the registry's rule (kernel_paths.h) on the device's own
// maximum, and the registry's words (kernel_path's text) give the same where it names one; under
// TPB_KERNELS=portable it is 99 KiB at most, so an H100 / H200 picks what an RTX PRO 6000 picks:
// at Kimi-K2.5's row, 32 heads, the 16-head configuration with two 32-key stages.
TEST(MlaDecode, ConfigurationWithinTheBudget) {
  TPB_REQUIRE_GPU();
  const std::int64_t budget = gpu::tuning::mla_decode_smem_budget_bytes();
  const int cc = current_device_compute_capability();
  EXPECT_EQ(budget, kernels::smem_budget_bytes(kernels::smem_optin_bytes_of_compute_capability(cc),
                                               kernels::kernels_setting()))
      << "the registry's table of maxima disagrees with device " << cc / 10 << "." << cc % 10;
  const kernels::KernelPath& path = kernels::kernel_path(kernels::KernelOp::mla_decode);
  if (!path.wgmma()) {
    EXPECT_EQ(path.smem_budget_bytes, budget) << path.text();
  }
  if (kernels::kernels_setting() == kernels::KernelsSetting::portable) {
    EXPECT_LE(budget, kernels::kPortableSmemBudgetBytes);
  }
  for (std::int64_t heads : {8, 32, 64}) {
    const gpu::MlaDecodeShape s = shape(1, heads, 512, 64, 100);
    const int config = gpu::tuning::mla_decode_mma_config(s);
    EXPECT_EQ(config, kernels::mla_decode_mma_config_for(heads, 512, 64, budget)) << heads;
    EXPECT_LE(kernels::mla_decode_mma_smem_bytes(kernels::kMlaDecodeMmaConfigs[config], heads, 512, 64), budget);
    if (budget == kernels::kPortableSmemBudgetBytes) {
      EXPECT_STREQ(kernels::kMlaDecodeMmaConfigs[config].name, heads <= 16 ? "h32_s2_k32" : "h16_s2_k32") << heads;
    }
    if (budget >= 227 * 1024) {
      EXPECT_EQ(config, 0) << "the tuned configuration wherever it fits";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, MlaDecodeTest, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<DecodeCase>& info) { return info.param.name; });

TEST(MlaDecode, SameInputsSameBits) {
  TPB_REQUIRE_GPU();
  DecodeRun run(shape(3, 32, 512, 64, 9000), 77);
  const std::vector<std::int32_t> lens = {8999, 1, 4097};
  for (int v = 0; v < gpu::tuning::mla_decode_variants(); ++v) {
    if (!gpu::tuning::mla_decode_variant_supports(v, run.shape)) continue;
    const std::vector<std::uint16_t> a = run.run(lens, v);
    const std::vector<std::uint16_t> b = run.run(lens, v);
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 2))
        << "two identical calls of " << gpu::tuning::mla_decode_variant_name(v) << " differ";
  }
  for (int config : DecodeRun::mma_configs_that_run(run.shape)) {
    const std::vector<std::uint16_t> a = run.run(lens, kMmaSync, config);
    const std::vector<std::uint16_t> b = run.run(lens, kMmaSync, config);
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 2))
        << "two identical calls of mma_sync in " << kernels::kMlaDecodeMmaConfigs[config].name << " differ";
  }
}

// A graph captured once serves any seq_lens: replay after changing the lengths on the device
// gives the bits eager launches give for those lengths.
TEST(MlaDecode, GraphReplayWithNewLengthsEqualsEager) {
  TPB_REQUIRE_GPU();
  DecodeRun run(shape(3, 32, 512, 64, 5000), 78);
  const std::vector<std::int32_t> lens_a = {5000, 1, 2049}, lens_b = {3, 4999, 17};
  const std::vector<std::uint16_t> eager_a = run.run(lens_a);
  const std::vector<std::uint16_t> eager_b = run.run(lens_b);

  run.set_lens(lens_a);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  TPB_CUDA_CHECK(cudaStreamBeginCapture(run.stream, cudaStreamCaptureModeGlobal));
  run.launch();
  TPB_CUDA_CHECK(cudaStreamEndCapture(run.stream, &graph));
  TPB_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  TPB_CUDA_CHECK(cudaGraphDestroy(graph));

  run.set_lens(lens_b);
  TPB_CUDA_CHECK(cudaGraphLaunch(exec, run.stream));
  const std::vector<std::uint16_t> replay_b = run.output();
  run.set_lens(lens_a);
  TPB_CUDA_CHECK(cudaGraphLaunch(exec, run.stream));
  const std::vector<std::uint16_t> replay_a = run.output();
  TPB_CUDA_CHECK(cudaGraphExecDestroy(exec));

  EXPECT_EQ(0, std::memcmp(replay_b.data(), eager_b.data(), eager_b.size() * 2)) << "replay with lens_b != eager";
  EXPECT_EQ(0, std::memcmp(replay_a.data(), eager_a.data(), eager_a.size() * 2)) << "replay with lens_a != eager";
  EXPECT_NE(0, std::memcmp(eager_a.data(), eager_b.data(), eager_a.size() * 2)) << "the lengths changed nothing";
}

// End to end in the absorbed form: q_lat = q_nope W_UK and out = W_UV o_lat on the host, the
// attention core on the GPU, against tpb::kernels::mla_decode_absorbed_ref (fp32 throughout).
// Here q_lat is rounded to bf16 before the GPU sees it, so the numerics policy's bf16-vs-fp32
// bound applies (rel-L2 <= 2e-2); this checks conventions (layout, which position is
// visible, what scale multiplies), the tight bound is MatchesHostReference's.
TEST(MlaDecode, AbsorbedFormMatchesCpuReference) {
  TPB_REQUIRE_GPU();
  kernels::MlaShape sh;
  sh.heads = 8;
  sh.nope = 128;
  sh.rope = 64;
  sh.v_dim = 128;
  sh.kv_lora = 512;
  const std::int64_t kv_len = 300, qk = sh.nope + sh.rope, row = sh.kv_lora + sh.rope;
  const float scale = 1.0f / std::sqrt(static_cast<float>(qk));
  auto widen = [](const std::vector<std::uint16_t>& v) {
    std::vector<float> f(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) f[i] = bf16_to_float(v[i]);
    return f;
  };
  const std::vector<float> q = widen(hashed_bf16(91, static_cast<std::size_t>(sh.heads * qk), 1.0f));
  const std::vector<std::uint16_t> cache_bits = hashed_bf16(92, static_cast<std::size_t>(kv_len * row), 1.0f);
  const std::vector<float> cache = widen(cache_bits);
  // kv_b rows scaled like a trained projection (about 1/sqrt(kv_lora)) so q_lat stays O(1).
  const std::vector<float> kv_b =
      widen(hashed_bf16(93, static_cast<std::size_t>(sh.heads * (sh.nope + sh.v_dim) * sh.kv_lora), 0.08f));

  std::vector<float> ref(static_cast<std::size_t>(sh.heads * sh.v_dim));
  kernels::mla_decode_absorbed_ref(q.data(), cache.data(), row, kv_b.data(), ref.data(), 1, kv_len, kv_len - 1, sh,
                                   scale);

  // Device query rows: [q_lat (bf16) | q_rot].
  std::vector<std::uint16_t> q_dev(static_cast<std::size_t>(sh.heads * row));
  for (std::int64_t h = 0; h < sh.heads; ++h) {
    const float* w_uk = kv_b.data() + h * (sh.nope + sh.v_dim) * sh.kv_lora;
    for (std::int64_t l = 0; l < sh.kv_lora; ++l) {
      float acc = 0.0f;
      for (std::int64_t n = 0; n < sh.nope; ++n) acc += q[h * qk + n] * w_uk[n * sh.kv_lora + l];
      q_dev[h * row + l] = float_to_bf16(acc);
    }
    for (std::int64_t r = 0; r < sh.rope; ++r) q_dev[h * row + sh.kv_lora + r] = float_to_bf16(q[h * qk + sh.nope + r]);
  }
  const gpu::MlaDecodeShape s = shape(1, sh.heads, sh.kv_lora, sh.rope, kv_len);
  DeviceBuffer<std::uint16_t> d_q(q_dev.size()), d_cache(cache_bits.size()), d_out(static_cast<std::size_t>(sh.heads * sh.kv_lora));
  DeviceBuffer<std::int32_t> d_lens(1);
  DeviceBuffer<unsigned char> d_ws(gpu::mla_decode_workspace_bytes(s));
  d_q.upload(q_dev.data());
  d_cache.upload(cache_bits.data());
  const std::int32_t len = static_cast<std::int32_t>(kv_len);
  d_lens.upload(&len);
  gpu::mla_decode_attention(reinterpret_cast<const __nv_bfloat16*>(d_q.ptr), reinterpret_cast<const __nv_bfloat16*>(d_cache.ptr),
                            d_lens.ptr, s, scale, d_ws.ptr, d_ws.count, reinterpret_cast<__nv_bfloat16*>(d_out.ptr),
                            nullptr);
  TPB_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<std::uint16_t> o_lat(d_out.count);
  d_out.download(o_lat.data());

  double num = 0, den = 0;
  for (std::int64_t h = 0; h < sh.heads; ++h) {
    const float* w_uv = kv_b.data() + (h * (sh.nope + sh.v_dim) + sh.nope) * sh.kv_lora;
    for (std::int64_t d = 0; d < sh.v_dim; ++d) {
      float out = 0.0f;
      for (std::int64_t l = 0; l < sh.kv_lora; ++l) out += w_uv[d * sh.kv_lora + l] * bf16_to_float(o_lat[h * sh.kv_lora + l]);
      const double r = ref[static_cast<std::size_t>(h * sh.v_dim + d)];
      ASSERT_TRUE(std::isfinite(out)) << "head " << h << " dim " << d;
      num += (out - r) * (out - r);
      den += r * r;
    }
  }
  ASSERT_GT(den, 0.0);
  EXPECT_LE(std::sqrt(num / den), kTpRelL2Bf16) << "absorbed decode vs CPU absorbed reference, rel-L2";
}

}  // namespace
}  // namespace tpb::test
