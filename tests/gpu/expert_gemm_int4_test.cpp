// INT4-weight routed-expert GEMMs (tpb/kernels/gpu/expert_gemm_int4.h): the grouped (decode)
// and prefill kernels against the CPU reference (tpb/kernels/expert_gemm_int4.h) on fresh
// random inputs: random q in [-8, 7], positive random bf16 scales, random bf16 activations,
// routings with empty experts (first and last included) and experts of 1, 3, 17 and 200 rows,
// widths 32 / 64 / 96 / 256 / 7168 and out 8 / 24 / 130 / 4096.
//
// Tolerance per element: 2^-8 |ref| (the bf16 output's rounding, half an ulp of 8 significant
// bits) + in * 2^-22 * sum_j |x_j w_j| (the products are exact in fp32, a bf16 times a bf16;
// the sums are fp32, the tensor cores' accumulation truncating: at most in * 2^-23 of the sum
// of magnitudes, doubled for the partial sums' own additions); the reference sums in double.
// Overall rel-L2 <= 2^-8. A wrong nibble, scale, group, row, token or expert gives O(1) errors;
// a weight dequantized with the wrong rounding would hide in that budget, so a separate case
// multiplies one-hot activations, where the kernels must return the bf16 weight exactly.
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "gpu_test_support.h"
#include "tpb/check.h"
#include "tpb/cuda_check.h"
#include "tpb/dtype.h"
#include "tpb/kernels/expert_gemm_int4.h"
#include "tpb/kernels/gpu/expert_gemm_int4.h"
#include "tpb/kernels/int4_format.h"
#include "tpb/kernels/linear.h"

namespace tpb::test {
namespace {

std::vector<std::int32_t> offsets_from_counts(const std::vector<int>& counts) {
  std::vector<std::int32_t> off(counts.size() + 1, 0);
  std::partial_sum(counts.begin(), counts.end(), off.begin() + 1);
  return off;
}

// tokens x top_k distinct experts per token, uniformly at random, counting-sorted.
std::vector<std::int32_t> random_routing_offsets(int tokens, int top_k, int experts, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int> ids(static_cast<std::size_t>(experts)), counts(static_cast<std::size_t>(experts), 0);
  std::iota(ids.begin(), ids.end(), 0);
  for (int t = 0; t < tokens; ++t) {
    std::shuffle(ids.begin(), ids.end(), rng);
    for (int k = 0; k < top_k; ++k) ++counts[static_cast<std::size_t>(ids[static_cast<std::size_t>(k)])];
  }
  return offsets_from_counts(counts);
}

struct Case {
  std::string name;
  std::int64_t in, out;
  std::vector<std::int32_t> offsets;
  std::int64_t experts() const { return static_cast<std::int64_t>(offsets.size()) - 1; }
  std::int64_t pairs() const { return offsets.back(); }
};

std::vector<Case> cases() {
  std::vector<Case> c;
  c.push_back({"in32_out8", 32, 8, offsets_from_counts({0, 1, 3, 0, 17, 200, 0})});
  c.push_back({"in64_out24", 64, 24, offsets_from_counts({1, 0, 3, 17, 0, 2})});
  c.push_back({"in96_out130", 96, 130, offsets_from_counts({0, 3, 1, 200, 0, 17, 0})});
  // Kimi's down projection at TP 8 (in 2048 / 8), decode-sized experts.
  c.push_back({"in256_out4096", 256, 4096, offsets_from_counts({0, 1, 3, 17, 0, 8})});
  // Kimi's gate|up input width: 224 groups, split over the warps of a block.
  c.push_back({"in7168_out130", 7168, 130, offsets_from_counts({1, 3, 0, 17, 200, 0, 5})});
  c.push_back({"in7168_out4096", 7168, 4096, offsets_from_counts({1, 0, 8})});
  // More experts than one scan step (256), only a few with rows; a random decode routing.
  std::vector<int> wide(300, 0);
  wide[3] = 1, wide[255] = 2, wide[256] = 1, wide[257] = 3, wide[299] = 1;
  c.push_back({"wide_in32_out24", 32, 24, offsets_from_counts(wide)});
  c.push_back({"decode8_in256_out130", 256, 130, random_routing_offsets(8, 8, 64, 17)});
  return c;
}

// Host copies of one case's inputs: q per weight, bf16 scales, bf16 activations.
struct Data {
  std::vector<std::int8_t> q;           // [experts, out, in]
  std::vector<std::uint32_t> packed;    // [experts, out, in / 8]
  std::vector<std::uint16_t> scales;    // [experts, out, in / 32]
  std::vector<std::uint16_t> x;         // [pairs, in]
};

Data make_data(const Case& c, std::uint64_t seed) {
  Data d;
  const std::size_t weights = static_cast<std::size_t>(c.experts() * c.out * c.in);
  d.q.resize(weights);
  for (std::size_t i = 0; i < weights; ++i) d.q[i] = static_cast<std::int8_t>(static_cast<int>(mix(seed ^ mix(i)) >> 60) - 8);
  d.packed.resize(weights / 8);
  kernels::pack_int4_rows(d.q.data(), c.experts() * c.out, c.in, d.packed.data());
  // Positive scales over four binades around the checkpoint's (~2^-7).
  d.scales.resize(weights / 32);
  for (std::size_t i = 0; i < d.scales.size(); ++i) {
    const double u = static_cast<double>(mix((seed * 3 + 1) ^ mix(i)) >> 11) * 0x1.0p-53;
    d.scales[i] = float_to_bf16(static_cast<float>(std::exp2(-9.0 + 4.0 * u)));
  }
  d.x = hashed_bf16(seed * 7 + 2, static_cast<std::size_t>(c.pairs() * c.in), 1.0f);
  return d;
}

// The CPU reference and sum_j |x_j w_j| of every output (the tolerance's scale).
void reference(const Case& c, const Data& d, std::vector<float>& y, std::vector<float>& absdot) {
  const std::vector<float> x = widen(d.x);
  y.assign(static_cast<std::size_t>(c.pairs() * c.out), 0.f);
  kernels::expert_gemm_int4_ref(x.data(), c.offsets.data(), c.experts(), d.packed.data(), d.scales.data(), c.in, c.out,
                                y.data());
  std::vector<float> ax(x.size()), aw(static_cast<std::size_t>(c.out * c.in));
  for (std::size_t i = 0; i < x.size(); ++i) ax[i] = std::fabs(x[i]);
  absdot.assign(y.size(), 0.f);
  for (std::int64_t e = 0; e < c.experts(); ++e) {
    const std::int64_t b = c.offsets[static_cast<std::size_t>(e)], n = c.offsets[static_cast<std::size_t>(e) + 1] - b;
    if (n == 0) continue;
    kernels::dequant_int4_rows(d.packed.data() + e * c.out * (c.in / 8), d.scales.data() + e * c.out * (c.in / 32),
                               c.out, c.in, aw.data());
    for (float& v : aw) v = std::fabs(v);
    kernels::linear_ref(ax.data() + b * c.in, aw.data(), absdot.data() + b * c.out, n, c.in, c.out);
  }
}

// NaN/Inf first, then |got - ref| <= 2^-8 |ref| + in 2^-22 absdot per element (the worst
// element, where it is and its share of the budget printed), then rel-L2 <= 2^-8.
void expect_close(const std::vector<std::uint16_t>& got_bits, const std::vector<float>& ref,
                  const std::vector<float>& absdot, const Case& c, const std::string& what) {
  ASSERT_EQ(got_bits.size(), ref.size());
  double err2 = 0, ref2 = 0, worst_share = 0;
  std::size_t worst = 0, bad = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double got = bf16_to_float(got_bits[i]);
    if (!std::isfinite(got)) {
      ADD_FAILURE() << what << ": element " << i << " (pair " << i / c.out << ", out " << i % c.out
                    << ") is not finite: " << got << " (bits " << got_bits[i] << ")";
      return;
    }
    const double err = std::fabs(got - ref[i]);
    const double tol = std::ldexp(std::fabs(ref[i]), -8) + static_cast<double>(c.in) * std::ldexp(absdot[i], -22);
    const double share = err / tol;
    if (share > worst_share) worst_share = share, worst = i;
    if (!(err <= tol)) ++bad;
    err2 += err * err;
    ref2 += static_cast<double>(ref[i]) * ref[i];
  }
  std::ostringstream where;
  where << what << ": max error at element " << worst << " (pair " << worst / c.out << ", out " << worst % c.out
        << "): got " << bf16_to_float(got_bits[worst]) << " want " << ref[worst] << ", " << 100.0 * worst_share
        << " % of its budget";
  EXPECT_EQ(bad, 0u) << bad << " elements out of tolerance; " << where.str();
  ASSERT_GT(ref2, 0.0) << what << ": the reference is all zeros, the test would be vacuous";
  EXPECT_LE(std::sqrt(err2 / ref2), std::ldexp(1.0, -8)) << what << ": rel-L2; " << where.str();
  std::printf("  %-40s %s\n", what.c_str(), where.str().c_str() + what.size() + 2);
}

// Device copies of one case's inputs; y starts as NaN bits (a row the kernel forgets fails).
struct Dev {
  DevBuf<std::uint32_t> packed;
  DevBuf<std::uint16_t> scales, x, y;
  DevBuf<std::int32_t> off;
  std::int64_t in, out;
  Dev(const Case& c, const Data& d)
      : packed(d.packed.size()),
        scales(d.scales.size()),
        x(d.x.size()),
        y(static_cast<std::size_t>(c.pairs() * c.out)),
        off(c.offsets.size()),
        in(c.in),
        out(c.out) {
    packed.upload(d.packed);
    scales.upload(d.scales);
    x.upload(d.x);
    off.upload(c.offsets);
    poison();
  }
  gpu::Int4ExpertWeights weights() const {
    return {packed.p, reinterpret_cast<const __nv_bfloat16*>(scales.p), in, out};
  }
  void poison(cudaStream_t s = nullptr) {
    TPB_CUDA_CHECK(cudaMemsetAsync(y.p, 0xff, y.n * 2, s));
    TPB_CUDA_CHECK(cudaStreamSynchronize(s));
  }
};

using Entry = void (*)(const __nv_bfloat16*, const std::int32_t*, std::int64_t, std::int64_t,
                       const gpu::Int4ExpertWeights&, __nv_bfloat16*, cudaStream_t);

struct Path {
  const char* name;
  Entry entry;
};
const Path kPaths[] = {{"grouped", gpu::expert_gemm_int4_grouped}, {"prefill", gpu::expert_gemm_int4_prefill}};

std::vector<std::uint16_t> run(const Path& path, const Case& c, Dev& g, cudaStream_t s = nullptr) {
  g.poison(s);
  path.entry(bf(g.x.p), g.off.p, c.experts(), c.pairs(), g.weights(), bf(g.y.p), s);
  TPB_CUDA_CHECK(cudaStreamSynchronize(s));
  return g.y.download();
}

TEST(GpuExpertGemmInt4, BothPathsMatchTheReference) {
  TPB_REQUIRE_GPU();
  std::uint64_t seed = 1000;
  for (const Case& c : cases()) {
    const Data d = make_data(c, seed += 2);
    std::vector<float> ref, absdot;
    reference(c, d, ref, absdot);
    Dev g(c, d);
    for (const Path& path : kPaths) expect_close(run(path, c, g), ref, absdot, c, std::string(path.name) + " " + c.name);
  }
}

// One-hot activations: y[p, o] = W_e[o, j_p] exactly (one exact product, fp32 sums of zeros),
// so the kernels' dequantization must give int4::dequant bit for bit, for every nibble position
// (j_p covers all 8 nibbles and every group of a row) and through the inputs' permutation.
TEST(GpuExpertGemmInt4, OneHotRowsReturnTheDequantizedWeightExactly) {
  TPB_REQUIRE_GPU();
  for (std::int64_t in : {32, 96, 256, 7168}) {
    const Case c{"one-hot in" + std::to_string(in), in, 130, offsets_from_counts({0, 17, 3, 0, 200, 1})};
    Data d = make_data(c, 77 + static_cast<std::uint64_t>(in));
    std::vector<std::int64_t> hot(static_cast<std::size_t>(c.pairs()));
    std::fill(d.x.begin(), d.x.end(), std::uint16_t{0});
    for (std::int64_t p = 0; p < c.pairs(); ++p) {
      hot[static_cast<std::size_t>(p)] = static_cast<std::int64_t>(mix(static_cast<std::uint64_t>(p) + 5) % static_cast<std::uint64_t>(in));
      d.x[static_cast<std::size_t>(p * in + hot[static_cast<std::size_t>(p)])] = float_to_bf16(1.0f);
    }
    Dev g(c, d);
    for (const Path& path : kPaths) {
      const auto got = run(path, c, g);
      std::size_t wrong = 0;
      for (std::int64_t e = 0; e < c.experts(); ++e)
        for (std::int64_t p = c.offsets[static_cast<std::size_t>(e)]; p < c.offsets[static_cast<std::size_t>(e) + 1]; ++p)
          for (std::int64_t o = 0; o < c.out; ++o) {
            const std::int64_t j = hot[static_cast<std::size_t>(p)], row = e * c.out + o;
            const int q = d.q[static_cast<std::size_t>(row * in + j)];
            const float want = int4::dequant(q, d.scales[static_cast<std::size_t>(row * (in / 32) + j / 32)]);
            const float have = bf16_to_float(got[static_cast<std::size_t>(p * c.out + o)]);
            if (have != want && ++wrong <= 5)
              ADD_FAILURE() << path.name << " " << c.name << ": pair " << p << " out " << o << " input " << j << " (q "
                            << q << "): got " << have << " want " << want;
          }
      EXPECT_EQ(wrong, 0u) << path.name << " " << c.name;
    }
  }
}

// Every variant of the grouped kernel (tpb_bench compares their speed) shares its sum order:
// the same bits as expert_gemm_int4_grouped.
TEST(GpuExpertGemmInt4, EveryGroupedVariantGivesTheSameBits) {
  TPB_REQUIRE_GPU();
  std::uint64_t seed = 5000;
  for (const Case& c : cases()) {
    const Data d = make_data(c, seed += 2);
    Dev g(c, d);
    const auto want = run(kPaths[0], c, g);
    for (int v = 0; v < gpu::tuning::expert_gemm_int4_grouped_variants(); ++v) {
      // A ring variant past the budget (an RTX PRO 6000's 99 KiB, or TPB_KERNELS=portable) is
      // refused by its launcher; the dispatched kernels always fit.
      if (!gpu::tuning::expert_gemm_int4_grouped_variant_fits(v)) continue;
      g.poison();
      gpu::tuning::expert_gemm_int4_grouped_variant(v, bf(g.x.p), g.off.p, c.experts(), c.pairs(), g.weights(),
                                                    bf(g.y.p), nullptr);
      EXPECT_TRUE(same(g.y.download(), want))
          << gpu::tuning::expert_gemm_int4_grouped_variant_name(v) << " " << c.name;
    }
  }
}

TEST(GpuExpertGemmInt4, RunTwiceGivesTheSameBits) {
  TPB_REQUIRE_GPU();
  for (const Case& c : {cases()[4], cases()[5]}) {
    const Data d = make_data(c, 3000);
    Dev g(c, d);
    for (const Path& path : kPaths) {
      const auto first = run(path, c, g);
      EXPECT_TRUE(same(run(path, c, g), first)) << path.name << " " << c.name << ": two identical calls differ";
    }
  }
}

// Both paths read the offsets on the device: one captured graph serves a new routing of the
// same pairs, and its replay equals an eager call bitwise.
TEST(GpuExpertGemmInt4, GraphReplayOfANewRoutingMatchesEager) {
  TPB_REQUIRE_GPU();
  Case c{"graph", 256, 130, random_routing_offsets(16, 8, 64, 7)};
  const Data d = make_data(c, 4000);
  Dev g(c, d);
  cudaStream_t s;
  TPB_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (const Path& path : kPaths) {
    c.offsets = random_routing_offsets(16, 8, 64, 7);
    g.off.upload(c.offsets);
    run(path, c, g, s);  // eager first, as the engine does (module loading stays out of the capture)
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    TPB_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    path.entry(bf(g.x.p), g.off.p, c.experts(), c.pairs(), g.weights(), bf(g.y.p), s);
    TPB_CUDA_CHECK(cudaStreamEndCapture(s, &graph));
    TPB_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    c.offsets = random_routing_offsets(16, 8, 64, 99);  // same 128 pairs, other experts
    g.off.upload(c.offsets);
    g.poison(s);
    TPB_CUDA_CHECK(cudaGraphLaunch(exec, s));
    TPB_CUDA_CHECK(cudaStreamSynchronize(s));
    const auto replay = g.y.download();
    EXPECT_TRUE(same(replay, run(path, c, g, s))) << path.name << ": graph replay differs from eager";
    std::vector<float> ref, absdot;
    reference(c, d, ref, absdot);
    expect_close(replay, ref, absdot, c, std::string(path.name) + " graph replay");
    TPB_CUDA_CHECK(cudaGraphExecDestroy(exec));
    TPB_CUDA_CHECK(cudaGraphDestroy(graph));
  }
  TPB_CUDA_CHECK(cudaStreamDestroy(s));
}

TEST(GpuExpertGemmInt4, RefusesWidthsThatAreNotWholeGroups) {
  TPB_REQUIRE_GPU();
  DevBuf<std::uint32_t> packed(4096);
  DevBuf<std::uint16_t> scales(4096), x(4096), y(4096);
  DevBuf<std::int32_t> off(3);
  off.upload({0, 1, 2});
  for (const Path& path : kPaths) {
    for (std::int64_t in : {48, 40, 8, 0}) {
      const gpu::Int4ExpertWeights w{packed.p, reinterpret_cast<const __nv_bfloat16*>(scales.p), in, 8};
      try {
        path.entry(bf(x.p), off.p, 2, 2, w, bf(y.p), nullptr);
        ADD_FAILURE() << path.name << " accepted in = " << in;
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("in = " + std::to_string(in)), std::string::npos)
            << path.name << ": the refusal should name the width: " << e.what();
      }
    }
    const gpu::Int4ExpertWeights no_out{packed.p, reinterpret_cast<const __nv_bfloat16*>(scales.p), 32, 0};
    EXPECT_THROW(path.entry(bf(x.p), off.p, 2, 2, no_out, bf(y.p), nullptr), Error) << path.name;
  }
  TPB_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace
}  // namespace tpb::test
