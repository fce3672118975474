// The GPU router, dispatch plan, gather and combine (tpb/kernels/gpu/moe_router.h,
// moe_dispatch.h) against their host references, on fresh random inputs from fixed seeds.
//   router   the same expert ids as moe_route_noaux_tc_ref on the same fp32 logits, in the
//            same order (ties: lower index), weights within a few fp32 ulps
//   plan     bitwise moe_dispatch_plan_ref (a counting sort has exactly one stable answer)
//   gather   bitwise copies; combine bitwise the host loop (same fp32 ops in the same order)
//   all of it twice: bitwise the same.
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "gpu_test_support.h"
#include "tpb/check.h"
#include "tpb/cuda_check.h"
#include "tpb/dtype.h"
#include "tpb/kernels/device.h"
#include "tpb/kernels/gpu/moe_dispatch.h"
#include "tpb/kernels/gpu/moe_router.h"
#include "tpb/kernels/moe_router.h"

namespace tpb::test {
namespace {

// ---------------------------------------------------------------- router

struct RouterOut {
  std::vector<std::int32_t> idx;
  std::vector<float> w;
};

RouterOut route_gpu(const std::vector<float>& logits, const std::vector<float>& bias, std::int64_t tokens,
                    const kernels::RouterParams& p) {
  DevBuf<float> d_logits(logits.size()), d_bias(bias.size()), d_w(static_cast<std::size_t>(tokens * p.top_k));
  DevBuf<std::int32_t> d_idx(static_cast<std::size_t>(tokens * p.top_k));
  d_logits.upload(logits);
  d_bias.upload(bias);
  gpu::moe_route_noaux_tc(d_logits.p, d_bias.p, tokens, p, d_idx.p, d_w.p, nullptr);
  return {d_idx.download(), d_w.download()};
}

// The GPU evaluates the reference's fp32 operations in the reference's order; its sigmoid
// takes exp in double rounded to float (glibc's expf is within 0.502 ulp, so the two s can
// differ by one ulp in rare cases). One ulp of one s moves sum(w) by at most top_k + 1 ulps
// after its roundings and each w by that plus the divide and scale roundings:
//   |w_gpu - w_ref| <= (top_k + 4) * 2^-24 * |w_ref|.
void expect_router_matches(const std::vector<float>& logits, const std::vector<float>& bias, std::int64_t tokens,
                           const kernels::RouterParams& p) {
  const std::size_t n = static_cast<std::size_t>(tokens * p.top_k);
  std::vector<std::int32_t> idx(n);
  std::vector<float> w(n);
  kernels::moe_route_noaux_tc_ref(logits.data(), bias.data(), tokens, p, idx.data(), w.data());
  const RouterOut g = route_gpu(logits, bias, tokens, p);
  for (std::size_t i = 0; i < n; ++i) {
    ASSERT_EQ(g.idx[i], idx[i]) << "token " << i / p.top_k << " slot " << i % p.top_k;
    ASSERT_LE(std::fabs(g.w[i] - w[i]), (p.top_k + 4) * 0x1p-24 * std::fabs(w[i]))
        << "token " << i / p.top_k << " slot " << i % p.top_k;
  }
  const RouterOut again = route_gpu(logits, bias, tokens, p);
  EXPECT_TRUE(same(again.idx, g.idx));
  EXPECT_EQ(std::memcmp(again.w.data(), g.w.data(), n * sizeof(float)), 0) << "two runs differ";
}

void check_router_random(const kernels::RouterParams& p, std::int64_t tokens, std::uint32_t seed) {
  const auto logits = random_f32(static_cast<std::size_t>(tokens * p.experts), seed, -4.f, 4.f);
  const auto bias = random_f32(static_cast<std::size_t>(p.experts), seed + 1, -0.05f, 0.05f);
  expect_router_matches(logits, bias, tokens, p);
}

TEST(GpuRouter, GroupedDeepSeekV3) {
  TPB_REQUIRE_GPU();
  kernels::RouterParams p;
  p.experts = 256;
  p.top_k = 8;
  p.n_group = 8;
  p.topk_group = 4;
  p.routed_scaling = 2.5f;
  check_router_random(p, 67, 101);
}

TEST(GpuRouter, Grouped384Experts) {
  TPB_REQUIRE_GPU();
  kernels::RouterParams p;
  p.experts = 384;
  p.top_k = 8;
  p.n_group = 8;
  p.topk_group = 4;
  p.routed_scaling = 2.827f;
  check_router_random(p, 131, 102);
}

kernels::RouterParams kimi_k25_router() {
  kernels::RouterParams p;  // scenarios/models/kimi-k2.5.json
  p.experts = 384;
  p.top_k = 8;
  p.n_group = 1;
  p.topk_group = 1;
  p.routed_scaling = 2.827f;
  return p;
}

TEST(GpuRouter, UngroupedKimiK25) {
  TPB_REQUIRE_GPU();
  check_router_random(kimi_k25_router(), 129, 103);
}

// One token (a batch-1 decode step), and a few.
TEST(GpuRouter, KimiK25OneTokenAndAFew) {
  TPB_REQUIRE_GPU();
  check_router_random(kimi_k25_router(), 1, 106);
  check_router_random(kimi_k25_router(), 6, 107);
}

TEST(GpuRouter, UnnormalisedOddSizes) {
  TPB_REQUIRE_GPU();
  kernels::RouterParams p;
  p.experts = 72;
  p.top_k = 6;
  p.n_group = 3;
  p.topk_group = 2;
  p.norm_topk_prob = false;
  p.routed_scaling = 1.5f;
  check_router_random(p, 19, 104);
}

// Logits on a coarse grid and one bias for all: many exact ties among experts and among
// group scores (the same values, so exp's last bit cannot matter). Both must break every
// tie towards the lower index.
TEST(GpuRouter, TiesGoToTheLowerIndex) {
  TPB_REQUIRE_GPU();
  kernels::RouterParams p;
  p.experts = 256;
  p.top_k = 8;
  p.n_group = 8;
  p.topk_group = 4;
  p.routed_scaling = 2.5f;
  const std::int64_t tokens = 33;
  std::mt19937 rng(105);
  std::uniform_int_distribution<int> level(-2, 1);
  std::vector<float> logits(static_cast<std::size_t>(tokens * p.experts));
  for (auto& l : logits) l = 0.5f * static_cast<float>(level(rng));
  // Token 0: all equal, so groups 0..3 and experts 0..7 in index order.
  std::fill(logits.begin(), logits.begin() + p.experts, 0.25f);
  const std::vector<float> bias(static_cast<std::size_t>(p.experts), 0.01f);
  expect_router_matches(logits, bias, tokens, p);
  const RouterOut g = route_gpu(logits, bias, tokens, p);
  for (int k = 0; k < 8; ++k) EXPECT_EQ(g.idx[k], k);
}

// ---------------------------------------------------------------- dispatch plan

struct Plan {
  std::vector<std::int32_t> offsets, sorted, position;
  unsigned long long touched = 0;  // plan_gpu: the device counter after the calls
};

Plan plan_ref(const std::vector<std::int32_t>& idx, std::int64_t tokens, std::int64_t top_k, std::int64_t experts) {
  Plan r;
  r.offsets.resize(static_cast<std::size_t>(experts + 1));
  r.sorted.resize(idx.size());
  r.position.resize(idx.size());
  gpu::moe_dispatch_plan_ref(idx.data(), tokens, top_k, experts, r.offsets.data(), r.sorted.data(),
                             r.position.data());
  return r;
}

// `calls` plans of the same ids into one touched-experts counter that starts at 1000 (the
// call adds to it, never resets it).
Plan plan_gpu(const std::vector<std::int32_t>& idx, std::int64_t tokens, std::int64_t top_k, std::int64_t experts,
              int calls = 1) {
  DevBuf<std::int32_t> d_idx(idx.size()), d_off(static_cast<std::size_t>(experts + 1)), d_sorted(idx.size()),
      d_pos(idx.size());
  DevBuf<unsigned long long> d_touched(1);
  d_idx.upload(idx);
  d_touched.upload(std::vector<unsigned long long>{1000});
  for (int i = 0; i < calls; ++i)
    gpu::moe_dispatch_plan(d_idx.p, tokens, top_k, experts, d_off.p, d_sorted.p, d_pos.p, nullptr, d_touched.p);
  return {d_off.download(), d_sorted.download(), d_pos.download(), d_touched.download()[0]};
}

// Random expert ids; `hot` > 0 sends that share of the pairs to expert 5 (long runs of
// one expert inside a warp's chunk and across warps).
std::vector<std::int32_t> random_ids(std::int64_t pairs, std::int64_t experts, double hot, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<std::int32_t> e(0, static_cast<std::int32_t>(experts - 1));
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<std::int32_t> v(static_cast<std::size_t>(pairs));
  for (auto& x : v) x = u(rng) < hot ? 5 : e(rng);
  return v;
}

// The reference itself, without a GPU: sorted by expert, stable, offsets and the inverse map.
TEST(MoeDispatchPlanRef, IsAStableCountingSort) {
  const std::int64_t tokens = 45, top_k = 6, experts = 40;
  const auto idx = random_ids(tokens * top_k, experts, 0.2, 201);
  const Plan r = plan_ref(idx, tokens, top_k, experts);
  ASSERT_EQ(r.offsets.front(), 0);
  ASSERT_EQ(r.offsets.back(), tokens * top_k);
  for (std::int64_t e = 0; e < experts; ++e) {
    const auto count = std::count(idx.begin(), idx.end(), static_cast<std::int32_t>(e));
    ASSERT_EQ(r.offsets[e + 1] - r.offsets[e], count) << "expert " << e;
    for (std::int32_t p = r.offsets[e]; p < r.offsets[e + 1]; ++p) {
      ASSERT_EQ(idx[r.sorted[p]], e) << "row " << p;
      if (p > r.offsets[e]) {
        ASSERT_LT(r.sorted[p - 1], r.sorted[p]) << "not stable at row " << p;
      }
    }
  }
  for (std::size_t p = 0; p < idx.size(); ++p) ASSERT_EQ(r.sorted[r.position[p]], static_cast<std::int32_t>(p));
}

void check_plan(std::int64_t tokens, std::int64_t top_k, std::int64_t experts, double hot, std::uint32_t seed) {
  SCOPED_TRACE(::testing::Message() << "tokens " << tokens << ", top_k " << top_k << ", experts " << experts);
  const auto idx = random_ids(tokens * top_k, experts, hot, seed);
  const Plan r = plan_ref(idx, tokens, top_k, experts);
  const Plan g = plan_gpu(idx, tokens, top_k, experts);
  EXPECT_TRUE(same(g.offsets, r.offsets));
  EXPECT_TRUE(same(g.sorted, r.sorted));
  EXPECT_TRUE(same(g.position, r.position));
  const Plan again = plan_gpu(idx, tokens, top_k, experts, 2);
  EXPECT_TRUE(same(again.sorted, g.sorted));
  // The experts the call reads: those with at least one pair in the reference's offsets.
  unsigned long long touched = 0;
  for (std::int64_t e = 0; e < experts; ++e) touched += r.offsets[e + 1] > r.offsets[e];
  ASSERT_GT(touched, 0u);
  EXPECT_EQ(g.touched, 1000 + touched);
  EXPECT_EQ(again.touched, 1000 + 2 * touched);
}

TEST(GpuMoeDispatchPlan, MatchesReferenceBitwise) {
  TPB_REQUIRE_GPU();
  check_plan(1, 8, 384, 0.0, 211);       // decode of one sequence
  check_plan(67, 8, 384, 0.0, 212);      // fewer pairs than warps * 32
  check_plan(13, 6, 72, 0.5, 213);       // odd sizes, one hot expert
  check_plan(997, 8, 256, 0.3, 214);     // segments not a multiple of 32
  check_plan(8192, 8, 384, 0.0, 215);    // 65536 pairs
  check_plan(8192, 8, 384, 0.9, 216);    // 65536 pairs, nearly all to one expert
  check_plan(300, 8, 1, 0.0, 217);       // a single expert
}

// ---------------------------------------------------------------- gather / combine

// out[t] = bf16( sum over slots in order of w * y, then + shared ), fp32; volatile keeps
// the host compiler from fusing the multiply-add (the kernel uses explicit _rn ops).
std::vector<std::uint16_t> combine_ref(const std::vector<std::uint16_t>& y_sorted, const std::vector<std::int32_t>& pos,
                                       const std::vector<float>& w, const std::vector<std::uint16_t>* shared,
                                       std::int64_t tokens, std::int64_t top_k, std::int64_t hidden) {
  std::vector<std::uint16_t> out(static_cast<std::size_t>(tokens * hidden));
  for (std::int64_t t = 0; t < tokens; ++t)
    for (std::int64_t i = 0; i < hidden; ++i) {
      float acc = 0.0f;
      for (std::int64_t s = 0; s < top_k; ++s) {
        const std::size_t k = static_cast<std::size_t>(t * top_k + s);
        volatile float prod = w[k] * bf16_to_float(y_sorted[static_cast<std::size_t>(pos[k] * hidden + i)]);
        acc = acc + prod;
      }
      if (shared != nullptr) acc = acc + bf16_to_float((*shared)[static_cast<std::size_t>(t * hidden + i)]);
      out[static_cast<std::size_t>(t * hidden + i)] = float_to_bf16(acc);
    }
  return out;
}

void check_gather_combine(std::int64_t tokens, std::int64_t top_k, std::int64_t experts, std::int64_t hidden,
                          std::uint32_t seed) {
  SCOPED_TRACE(::testing::Message() << "tokens " << tokens << ", hidden " << hidden);
  const std::int64_t pairs = tokens * top_k;
  const auto idx = random_ids(pairs, experts, 0.0, seed);
  const Plan r = plan_ref(idx, tokens, top_k, experts);
  const auto x = random_bf16(static_cast<std::size_t>(tokens * hidden), seed + 1, -2.f, 2.f);
  const auto y = random_bf16(static_cast<std::size_t>(pairs * hidden), seed + 2, -2.f, 2.f);
  const auto shared = random_bf16(static_cast<std::size_t>(tokens * hidden), seed + 3, -1.f, 1.f);
  const auto w = random_f32(static_cast<std::size_t>(pairs), seed + 4, 0.05f, 0.6f);

  DevBuf<std::int32_t> d_idx(idx.size()), d_off(static_cast<std::size_t>(experts + 1)), d_sorted(idx.size()),
      d_pos(idx.size());
  DevBuf<std::uint16_t> d_x(x.size()), d_xs(y.size()), d_y(y.size()), d_shared(shared.size()), d_out(x.size());
  DevBuf<float> d_w(w.size());
  d_idx.upload(idx);
  d_x.upload(x);
  d_y.upload(y);
  d_shared.upload(shared);
  d_w.upload(w);
  std::vector<std::uint16_t> first;
  for (int run = 0; run < 2; ++run) {
    gpu::moe_dispatch_plan(d_idx.p, tokens, top_k, experts, d_off.p, d_sorted.p, d_pos.p, nullptr);
    gpu::moe_gather(bf(d_x.p), d_sorted.p, pairs, top_k, hidden, bf(d_xs.p), nullptr);
    const auto xs = d_xs.download();
    for (std::int64_t p = 0; p < pairs; ++p)
      for (std::int64_t i = 0; i < hidden; ++i)
        ASSERT_EQ(xs[static_cast<std::size_t>(p * hidden + i)],
                  x[static_cast<std::size_t>(r.sorted[p] / top_k * hidden + i)])
            << "row " << p << " col " << i;

    gpu::moe_combine(bf(d_y.p), d_pos.p, d_w.p, bf(d_shared.p), tokens, top_k, hidden, bf(d_out.p), nullptr);
    const auto out = d_out.download();
    EXPECT_TRUE(same(out, combine_ref(y, r.position, w, &shared, tokens, top_k, hidden))) << "with shared";
    if (run == 0) first = out;
    else EXPECT_TRUE(same(out, first)) << "two runs differ";

    gpu::moe_combine(bf(d_y.p), d_pos.p, d_w.p, nullptr, tokens, top_k, hidden, bf(d_out.p), nullptr);
    EXPECT_TRUE(same(d_out.download(), combine_ref(y, r.position, w, nullptr, tokens, top_k, hidden))) << "no shared";
  }
}

TEST(GpuMoeGatherCombine, HiddenVector) {
  TPB_REQUIRE_GPU();
  check_gather_combine(37, 8, 384, 7168, 301);
}

// A decode step at batch 1: one row over several blocks of chunks.
TEST(GpuMoeGatherCombine, OneTokenAcrossBlocks) {
  TPB_REQUIRE_GPU();
  check_gather_combine(1, 8, 384, 7168, 303);
  check_gather_combine(1, 8, 384, 7168 + 2, 304);  // scalar path, 57 blocks of 128
}

TEST(GpuMoeGatherCombine, OddHiddenScalar) {
  TPB_REQUIRE_GPU();
  check_gather_combine(11, 6, 20, 100, 302);
}

// More slots than Kimi-K2.5's top 8 (13 and 16, the second on the scalar path): the sums run
// over every slot in slot order, as the host reference's.
TEST(GpuMoeGatherCombine, MoreSlotsThanTopEight) {
  TPB_REQUIRE_GPU();
  check_gather_combine(5, 13, 64, 7168, 305);
  check_gather_combine(3, 16, 40, 7168 + 2, 306);
}

}  // namespace
}  // namespace tpb::test
