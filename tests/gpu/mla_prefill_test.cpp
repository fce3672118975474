// Causal MLA prefill attention on the GPU (tpb/kernels/gpu/mla_prefill.h) against the CPU
// reference tpb::kernels::mla_attention_ref on the same bf16-rounded inputs widened to fp32:
// with and without cached tokens before the new ones, query lengths off the 128-query and
// 64-key tiles, batches, Kimi-K2.5's widths at its TP1 and TP2 head counts (64, 32), the test
// presets' small widths, the widest the tensor cores take (nope + rope 256), widths only the
// CUDA-core fallback takes (not multiples of 8), one 8K-token sequence (checked on sample rows).
// Every kernel variant (mla_prefill_tuning.h) that takes a shape is checked, each within its
// own budget, the mma.sync tensor-core ones in every shared-memory configuration the device
// can hold (the ones devices of 99 KiB per block take too), and mla_prefill_attention gives the
// bits of the variant it dispatches to; the same call twice gives the same bits.
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
#include "tpb/cuda_check.h"
#include "tpb/dtype.h"
#include "tpb/kernels/device.h"
#include "tpb/kernels/gpu/mla_prefill.h"
#include "tpb/kernels/gpu/mla_prefill_tuning.h"
#include "tpb/kernels/kernel_paths.h"
#include "tpb/kernels/mla_attention.h"

namespace tpb::test {
namespace {

// With q in [-2, 2) and keys in [-1, 1) over 192 dims the scores spread over about one unit
// at this scale (DeepSeek-V3's 1/sqrt(192) times a yarn mscale near 1.5): a softmax far
// from uniform, so the running max and the rescaling are exercised.
constexpr float kScale = 0.108f;
constexpr float kQAmp = 2.0f;
constexpr float kKAmp = 1.0f;
constexpr float kVAmp = 1.0f;

struct PrefillCase {
  std::string name;
  gpu::MlaPrefillShape shape;
  std::vector<std::int64_t> check_rows;  // query rows compared per sequence; empty: all
};

gpu::MlaPrefillShape shape(std::int64_t batch, std::int64_t q_len, std::int64_t past, std::int64_t heads,
                           std::int64_t nope = 128, std::int64_t rope = 64, std::int64_t v_dim = 128) {
  gpu::MlaPrefillShape s;
  s.batch = batch;
  s.q_len = q_len;
  s.past = past;
  s.heads = heads;
  s.nope = nope;
  s.rope = rope;
  s.v_dim = v_dim;
  return s;
}

struct PrefillRun {
  gpu::MlaPrefillShape s;
  std::vector<std::uint16_t> q, k_nope, k_rot, v;
  DeviceBuffer<std::uint16_t> d_q, d_k_nope, d_k_rot, d_v, d_out;

  PrefillRun(const gpu::MlaPrefillShape& sh, std::uint64_t seed)
      : s(sh),
        q(hashed_bf16(seed, static_cast<std::size_t>(sh.batch * sh.q_len * sh.heads * (sh.nope + sh.rope)), kQAmp)),
        k_nope(hashed_bf16(seed + 1, static_cast<std::size_t>(sh.batch * (sh.past + sh.q_len) * sh.heads * sh.nope), kKAmp)),
        k_rot(hashed_bf16(seed + 2, static_cast<std::size_t>(sh.batch * (sh.past + sh.q_len) * sh.rope), kKAmp)),
        v(hashed_bf16(seed + 3, static_cast<std::size_t>(sh.batch * (sh.past + sh.q_len) * sh.heads * sh.v_dim), kVAmp)),
        d_q(q.size()),
        d_k_nope(k_nope.size()),
        d_k_rot(k_rot.size()),
        d_v(v.size()),
        d_out(static_cast<std::size_t>(sh.batch * sh.q_len * sh.heads * sh.v_dim)) {
    d_q.upload(q.data());
    d_k_nope.upload(k_nope.data());
    d_k_rot.upload(k_rot.data());
    d_v.upload(v.data());
  }

  // variant < 0: mla_prefill_attention; else that variant (mla_prefill_tuning.h), a tensor-core
  // one in configuration tc_config (< 0: the one the budget picks).
  std::vector<std::uint16_t> run(int variant = -1, int tc_config = -1) {
    TPB_CUDA_CHECK(cudaMemset(d_out.ptr, 0xff, d_out.count * 2));  // NaN bits: rows never written show up
    const auto* bq = reinterpret_cast<const __nv_bfloat16*>(d_q.ptr);
    const auto* bk = reinterpret_cast<const __nv_bfloat16*>(d_k_nope.ptr);
    const auto* br = reinterpret_cast<const __nv_bfloat16*>(d_k_rot.ptr);
    const auto* bv = reinterpret_cast<const __nv_bfloat16*>(d_v.ptr);
    auto* bo = reinterpret_cast<__nv_bfloat16*>(d_out.ptr);
    if (variant < 0)
      gpu::mla_prefill_attention(bq, bk, br, bv, s, kScale, bo, nullptr);
    else
      gpu::tuning::mla_prefill_variant(variant, bq, bk, br, bv, s, kScale, bo, nullptr, tc_config);
    TPB_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<std::uint16_t> out(d_out.count);
    d_out.download(out.data());
    return out;
  }
};


std::vector<PrefillCase> cases() {
  const std::vector<std::int64_t> tile_edges = {0, 1, 15, 16, 63, 64, 65, 127, 128, 129, 255, 256, 257};
  auto with = [](std::vector<std::int64_t> rows, std::initializer_list<std::int64_t> more) {
    rows.insert(rows.end(), more);
    return rows;
  };
  return {
      {"b1_q1_past0_h2", shape(1, 1, 0, 2), {}},
      {"b1_q1_past300_h2", shape(1, 1, 300, 2), {}},
      {"b2_q37_past0_h4", shape(2, 37, 0, 4), {}},
      {"b2_q100_past29_h3", shape(2, 100, 29, 3), {}},
      {"b1_q333_past1000_h2", shape(1, 333, 1000, 2), {}},
      {"b1_q1025_past0_h2", shape(1, 1025, 0, 2), {}},
      // Narrow heads: lanes idle in the value columns, an even key-row stride padded to odd
      // (CUDA cores); zero columns padding nope + rope 24 to 32 and v 24 to 32 (tensor cores).
      {"b3_q65_past64_h2_small_dims", shape(3, 65, 64, 2, 16, 8, 24), {}},
      {"b1_q8192_past0_h1_sampled", shape(1, 8192, 0, 1), {0, 1, 31, 32, 33, 4095, 4096, 4097, 8158, 8190, 8191}},
      // Kimi-K2.5 at TP1 (64 heads) and TP2 (32): lengths off the tiles, past off the key
      // tile, batches, one new token after a long past.
      {"kimi_tp1_b1_q300_past0_h64", shape(1, 300, 0, 64), {}},
      {"kimi_tp2_b2_q200_past77_h32", shape(2, 200, 77, 32), {}},
      {"kimi_tp1_b1_q2049_past0_h64_sampled", shape(1, 2049, 0, 64), with(tile_edges, {1023, 1024, 2047, 2048})},
      {"kimi_tp2_b4_q600_past700_h32_sampled", shape(4, 600, 700, 32), with(tile_edges, {500, 598, 599})},
      {"kimi_tp1_b1_q1_past8191_h64", shape(1, 1, 8191, 64), {}},
      // The wgmma kernel's edges: q_len a multiple of its 128-row block with past on a key tile;
      // a short chunk after a long past (its second warpgroup's rows all padding); one head.
      {"kimi_b2_q256_past128_h8", shape(2, 256, 128, 8), {}},
      {"kimi_b3_q40_past300_h4", shape(3, 40, 300, 4), {}},
      {"kimi_b1_q130_past0_h1", shape(1, 130, 0, 1), {}},
      // The test presets' widths (scenarios/models: tiny-dsv3 16/8/16, small-dsv3 32/16/32).
      {"tiny_dims_b2_q130_past5_h4", shape(2, 130, 5, 4, 16, 8, 16), {}},
      {"small_dims_b1_q257_past0_h8", shape(1, 257, 0, 8, 32, 16, 32), {}},
      // The widest the tensor cores take (16 K steps of Q), and a v_dim off 16 (pad 56 -> 64).
      {"qk256_b1_q150_past40_h2", shape(1, 150, 40, 2, 192, 64, 128), {}},
      {"v56_b2_q100_past20_h3", shape(2, 100, 20, 3, 40, 24, 56), {}},
      // Widths only the CUDA-core kernel takes (the engine's even padding of an odd config).
      {"odd_widths_b2_q70_past9_h3", shape(2, 70, 9, 3, 12, 6, 14), {}},
  };
}

// gtest prints the case by name, not as bytes.
void PrintTo(const PrefillCase& c, std::ostream* os) { *os << c.name; }

// The CPU side of one case: the reference output of each checked (sequence, row, head) and,
// per output element, the two sizes of the error that rounding each softmax weight w_j by a
// relative e_j adds, sum_j w_j e_j (v_j - out) (mla_prefill.cu): with |e_j| <= u its worst case
// is u * spread_l1, and for independent roundings Hoeffding's inequality gives
// P(|error| > t u spread_l2) <= 2 exp(-t^2 / 2).
struct Expected {
  std::vector<std::int64_t> rows;
  std::vector<float> ref;          // [batch][rows][heads * v_dim]
  std::vector<double> spread_l1;   // sum_j w_j |v_j - out|, same layout
  std::vector<double> spread_l2;   // sqrt(sum_j (w_j (v_j - out))^2)
};

Expected expected(const PrefillRun& run, const std::vector<std::int64_t>& check_rows) {
  const gpu::MlaPrefillShape& s = run.s;
  const std::vector<float> q = widen(run.q), k_nope = widen(run.k_nope), k_rot = widen(run.k_rot), v = widen(run.v);
  kernels::MlaShape sh;
  sh.heads = s.heads;
  sh.nope = s.nope;
  sh.rope = s.rope;
  sh.v_dim = s.v_dim;
  const std::int64_t kv_len = s.past + s.q_len, qk = s.nope + s.rope, hv = s.heads * s.v_dim;
  Expected e;
  e.rows = check_rows;
  if (e.rows.empty())
    for (std::int64_t i = 0; i < s.q_len; ++i) e.rows.push_back(i);
  const std::size_t n_out = static_cast<std::size_t>(s.batch) * e.rows.size() * static_cast<std::size_t>(hv);
  e.ref.resize(n_out);
  e.spread_l1.assign(n_out, 0.0);
  e.spread_l2.assign(n_out, 0.0);
  std::vector<double> w;
  for (std::int64_t b = 0; b < s.batch; ++b)
    for (std::size_t ri = 0; ri < e.rows.size(); ++ri) {
      const std::int64_t i = e.rows[ri], n = s.past + i + 1;
      const std::size_t o0 = (static_cast<std::size_t>(b) * e.rows.size() + ri) * static_cast<std::size_t>(hv);
      // One query row at position past + i sees keys 0..past+i of its sequence.
      kernels::mla_attention_ref(q.data() + ((b * s.q_len + i) * s.heads) * qk,
                                 k_nope.data() + b * kv_len * s.heads * s.nope, k_rot.data() + b * kv_len * s.rope,
                                 v.data() + b * kv_len * hv, e.ref.data() + o0, 1, n, s.past + i, sh, kScale);
      for (std::int64_t h = 0; h < s.heads; ++h) {
        const float* qh = q.data() + ((b * s.q_len + i) * s.heads + h) * qk;
        w.assign(static_cast<std::size_t>(n), 0.0);
        double m = -INFINITY, sum = 0;
        for (std::int64_t j = 0; j < n; ++j) {
          const float* kn = k_nope.data() + ((b * kv_len + j) * s.heads + h) * s.nope;
          const float* kr = k_rot.data() + (b * kv_len + j) * s.rope;
          double dot = 0;
          for (std::int64_t d = 0; d < s.nope; ++d) dot += static_cast<double>(qh[d]) * kn[d];
          for (std::int64_t d = 0; d < s.rope; ++d) dot += static_cast<double>(qh[s.nope + d]) * kr[d];
          w[static_cast<std::size_t>(j)] = dot * kScale;
          m = std::max(m, dot * kScale);
        }
        for (double& x : w) sum += (x = std::exp(x - m));
        for (std::int64_t j = 0; j < n; ++j) {
          const double wj = w[static_cast<std::size_t>(j)] / sum;
          const float* vj = v.data() + ((b * kv_len + j) * s.heads + h) * s.v_dim;
          for (std::int64_t c = 0; c < s.v_dim; ++c) {
            const std::size_t oi = o0 + static_cast<std::size_t>(h * s.v_dim + c);
            const double a = wj * std::fabs(vj[c] - static_cast<double>(e.ref[oi]));
            e.spread_l1[oi] += a;
            e.spread_l2[oi] += a * a;
          }
        }
      }
    }
  for (double& x : e.spread_l2) x = std::sqrt(x);
  return e;
}

// Relative rounding of each softmax weight before it meets V: bf16 P (round to nearest,
// 8 significant bits) 2^-8; split P, hi + lo, 2^-16 (lo rounds the remainder, itself <= 2^-8
// p, to 8 bits); the CUDA-core kernel keeps P in fp32, whose roundings the fp32 term of the
// budget covers. bf16 P against the budget without this term: 46 x over in a lane-level
// emulation of the kernel at Kimi's widths (300 rows); with it, 0.44 of the budget.
double weight_rounding(int variant) {
  const std::string name = gpu::tuning::mla_prefill_variant_name(variant);
  if (name.find("split_p") != std::string::npos) return 0x1.0p-16;
  if (name == "tensor_core") return 0x1.0p-8;
  return 0.0;
}

// One kernel's output against the reference. Budget per element: the bf16 output rounding
// (<= 2^-8 |value|), 4 sqrt(n) + 64 fp32 roundings of 2^-24 * max|v| for the accumulation
// order over the n visible keys and the score dot products (as in mla_decode_test), and the
// weight rounding u: min(u spread_l1, 8 u spread_l2) times 1.01 for the second-order terms
// (8 standard scales: a chance below 3e-14 per element). Globally, rel-L2 <= 2^-8: the output
// rounding and the weight rounding are each about 1e-3 relative in rms (2.1e-3 together for
// bf16 P in the lane-level emulation).
void expect_matches(const PrefillRun& run, const Expected& e, const std::vector<std::uint16_t>& gpu, int variant,
                    const std::string& what) {
  const gpu::MlaPrefillShape& s = run.s;
  const std::int64_t hv = s.heads * s.v_dim;
  const double u = weight_rounding(variant);
  std::size_t bad = 0, checked = 0, nonfinite = 0;
  double worst_excess = -1, max_abs = 0, diff2 = 0, ref2 = 0;
  std::string worst_where;
  for (std::int64_t b = 0; b < s.batch; ++b)
    for (std::size_t ri = 0; ri < e.rows.size(); ++ri) {
      const std::int64_t i = e.rows[ri];
      const double n = static_cast<double>(s.past + i + 1);
      const double abs_tol = (4.0 * std::sqrt(n) + 64.0) * 0x1.0p-24 * kVAmp;
      for (std::int64_t x = 0; x < hv; ++x) {
        const std::size_t oi = (static_cast<std::size_t>(b) * e.rows.size() + ri) * static_cast<std::size_t>(hv) +
                               static_cast<std::size_t>(x);
        const double g = bf16_to_float(gpu[static_cast<std::size_t>((b * s.q_len + i) * hv + x)]);
        const double r = e.ref[oi];
        const double tol = 0x1.0p-8 * std::fabs(r) + abs_tol +
                           1.01 * u * std::min(e.spread_l1[oi], 8.0 * e.spread_l2[oi]);
        const double err = std::fabs(g - r);
        ++checked;
        if (!std::isfinite(g)) {
          ++nonfinite;
          ++bad;
          continue;
        }
        max_abs = std::max(max_abs, err);
        diff2 += err * err;
        ref2 += r * r;
        if (err > tol) ++bad;
        if (err / tol > worst_excess) {
          worst_excess = err / tol;
          worst_where = "batch " + std::to_string(b) + " row " + std::to_string(i) + " head " +
                        std::to_string(x / s.v_dim) + " col " + std::to_string(x % s.v_dim) + ": gpu " +
                        std::to_string(g) + " ref " + std::to_string(r);
        }
      }
    }
  const double rel_l2 = std::sqrt(diff2 / std::max(ref2, 1e-300));
  EXPECT_EQ(bad, 0u) << what << " vs mla_attention_ref: " << bad << " of " << checked << " outside tolerance ("
                     << nonfinite << " not finite); worst at " << worst_where << ", " << worst_excess
                     << " of the budget; max abs error " << max_abs << ", rel-L2 " << rel_l2;
  EXPECT_LE(rel_l2, 0x1.0p-8) << what << ": rel-L2 over " << checked << " outputs";
}

std::uint64_t case_seed(const std::string& name) {
  std::uint64_t seed = 1469598103934665603ull;  // FNV-1a of the case name: fixed, distinct per case
  for (char ch : name) seed = (seed ^ static_cast<unsigned char>(ch)) * 1099511628211ull;
  return seed;
}

class MlaPrefillTest : public ::testing::TestWithParam<PrefillCase> {};

TEST_P(MlaPrefillTest, MatchesCpuReference) {
  TPB_REQUIRE_GPU();
  const PrefillCase& c = GetParam();
  PrefillRun run(c.shape, case_seed(c.name));
  const Expected e = expected(run, c.check_rows);
  const int dispatched = gpu::tuning::mla_prefill_default_variant(c.shape);
  const std::vector<std::uint16_t> out = run.run();
  expect_matches(run, e, out, dispatched, std::string("mla_prefill_attention (") +
                                              gpu::tuning::mla_prefill_variant_name(dispatched) + ")");
  std::vector<std::uint16_t> in_step;  // wgmma_split_p's bits, where it runs (the overlap kernel must match them)
  for (int variant = 0; variant < gpu::tuning::mla_prefill_variants(); ++variant) {
    if (!gpu::tuning::mla_prefill_variant_supports(variant, c.shape)) continue;
    const std::string name = gpu::tuning::mla_prefill_variant_name(variant);
    const std::vector<std::uint16_t> got = run.run(variant);
    expect_matches(run, e, got, variant, name);
    if (variant == dispatched) {
      EXPECT_EQ(0, std::memcmp(got.data(), out.data(), out.size() * 2))
          << "mla_prefill_attention differs from the variant it dispatches to, " << name;
    }
    // The overlapped kernel reorders when operations are issued, not the float operations
    // themselves (O rescaled by tile t's corrections, then tile t's P.V added), so its bits are
    // the in-step kernel's; a difference means a stage read before it landed or after reuse.
    if (name == "wgmma_split_p") in_step = got;
    if (name == "wgmma_split_p_overlap") {
      ASSERT_EQ(in_step.size(), got.size()) << "wgmma_split_p_overlap ran where wgmma_split_p did not";
      EXPECT_EQ(0, std::memcmp(got.data(), in_step.data(), got.size() * 2))
          << "wgmma_split_p_overlap differs from wgmma_split_p";
    }
    // The tensor-core variants in every configuration the device holds, each twice (the same
    // bits); the one the budget picks gives the variant's bits.
    if (name != "tensor_core" && name != "tensor_core_split_p") continue;
    const int picked = gpu::tuning::mla_prefill_tc_config(c.shape);
    for (int config = 0; config < gpu::tuning::mla_prefill_tc_configs(); ++config) {
      if (!gpu::tuning::mla_prefill_tc_config_runs(config, c.shape)) continue;
      const std::string what = name + " in " + gpu::tuning::mla_prefill_tc_config_name(config);
      const std::vector<std::uint16_t> in_config = run.run(variant, config);
      expect_matches(run, e, in_config, variant, what);
      const std::vector<std::uint16_t> again = run.run(variant, config);
      EXPECT_EQ(0, std::memcmp(in_config.data(), again.data(), again.size() * 2)) << what << ": two identical calls differ";
      if (config == picked) {
        EXPECT_EQ(0, std::memcmp(in_config.data(), got.data(), got.size() * 2))
            << name << " differs from the configuration it picks, " << what;
      }
    }
  }
}

// The configuration the tensor-core variants take is the first within the registry's budget
// (kernel_paths.h: the device's maximum, 99 KiB at most under TPB_KERNELS=portable, so that an
// H100 / H200 then takes what an RTX PRO 6000 takes: 128 query rows and 32-key stages at
// Kimi-K2.5's widths, 64 rows at nope + rope 256). Sizes: 134 KiB, 92 KiB and 67 KiB at Kimi's.
TEST(MlaPrefill, ConfigurationWithinTheBudget) {
  TPB_REQUIRE_GPU();
  const gpu::MlaPrefillShape kimi = shape(1, 8, 0, 64), widest = shape(1, 8, 0, 2, 192, 64, 128);
  EXPECT_EQ(gpu::tuning::mla_prefill_tc_config_smem_bytes(0, kimi), 137216u);
  EXPECT_EQ(gpu::tuning::mla_prefill_tc_config_smem_bytes(1, kimi), 94208u);
  EXPECT_EQ(gpu::tuning::mla_prefill_tc_config_smem_bytes(2, kimi), 68608u);
  EXPECT_EQ(gpu::tuning::mla_prefill_tc_config_smem_bytes(2, widest), 84992u);
  const kernels::KernelPath& path = kernels::kernel_path(kernels::KernelOp::mla_prefill);
  const int cc = current_device_compute_capability();
  const int budget = kernels::smem_budget_bytes(kernels::smem_optin_bytes_of_compute_capability(cc),
                                                kernels::kernels_setting());
  if (!path.wgmma()) {
    EXPECT_EQ(path.smem_budget_bytes, budget) << path.text();
  }
  for (const gpu::MlaPrefillShape& s : {kimi, widest}) {
    const int picked = gpu::tuning::mla_prefill_tc_config(s);
    EXPECT_LE(gpu::tuning::mla_prefill_tc_config_smem_bytes(picked, s), static_cast<std::size_t>(budget));
    for (int before = 0; before < picked; ++before)
      EXPECT_GT(gpu::tuning::mla_prefill_tc_config_smem_bytes(before, s), static_cast<std::size_t>(budget));
  }
  if (budget == kernels::kPortableSmemBudgetBytes) {
    EXPECT_STREQ(gpu::tuning::mla_prefill_tc_config_name(gpu::tuning::mla_prefill_tc_config(kimi)), "q128_k32");
    EXPECT_STREQ(gpu::tuning::mla_prefill_tc_config_name(gpu::tuning::mla_prefill_tc_config(widest)), "q64_k32");
  }
  if (budget >= 227 * 1024) {
    EXPECT_EQ(gpu::tuning::mla_prefill_tc_config(kimi), 0) << "the tuned configuration";
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, MlaPrefillTest, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<PrefillCase>& info) { return info.param.name; });

TEST(MlaPrefill, DispatchTakesTensorCoresWhereTheyApply) {
  // Kimi-K2.5 runs on the wgmma kernel and other widths that are multiples of 8 on the mma.sync
  // one (once the tensor cores are the default); the engine's even padding of odd widths
  // (attention_widths.h) on the CUDA-core kernel.
  auto dispatched = [](const gpu::MlaPrefillShape& s) {
    return std::string(gpu::tuning::mla_prefill_variant_name(gpu::tuning::mla_prefill_default_variant(s)));
  };
  const std::string where_they_apply =
      gpu::tuning::mla_prefill_tensor_core_by_default() ? "tensor_core_split_p" : "cuda_core";
  const bool wgmma = kernels::kernel_path(kernels::KernelOp::mla_prefill).wgmma();  // kernel_paths.h
  EXPECT_EQ(gpu::tuning::mla_prefill_tensor_core_by_default() ? (wgmma ? "wgmma_split_p_overlap" : "tensor_core_split_p")
                                                              : "cuda_core",
            dispatched(shape(1, 8, 0, 64)));
  EXPECT_EQ(where_they_apply, dispatched(shape(1, 8, 0, 4, 16, 8, 16)));
  EXPECT_EQ("cuda_core", dispatched(shape(1, 8, 0, 4, 12, 6, 14)));
}

// Every variant, twice on the same inputs: the same bits (several query blocks and key tiles,
// the diagonal crossing tiles, past off the tile); the tensor-core ones in every configuration
// the device holds (MatchesCpuReference runs those twice too).
TEST(MlaPrefill, SameInputsSameBits) {
  TPB_REQUIRE_GPU();
  PrefillRun run(shape(2, 300, 45, 8), 5);
  for (int variant = 0; variant < gpu::tuning::mla_prefill_variants(); ++variant) {
    if (!gpu::tuning::mla_prefill_variant_supports(variant, run.s)) continue;
    const std::vector<std::uint16_t> a = run.run(variant);
    const std::vector<std::uint16_t> b = run.run(variant);
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 2))
        << gpu::tuning::mla_prefill_variant_name(variant) << ": two identical calls differ";
  }
}

}  // namespace
}  // namespace tpb::test
