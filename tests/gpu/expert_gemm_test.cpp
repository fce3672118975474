// Routed-expert GEMMs (tpb/kernels/gpu/expert_gemm.h): the grouped kernel and the
// per-expert cuBLASLt path against a host loop over experts (tpb::kernels::linear_ref on
// each expert's rows). Offsets come from a host counting sort of random routings written
// here, with empty experts (first and last included) and one expert holding many rows.
//
// Inputs are random bf16 and the reference consumes the same values widened to fp32, so
// the paths differ from it only by the order of the fp32 sums and the bf16 output rounding.
// Tolerance per element: 2^-8 |ref| (half a bf16 ulp) + in * 2^-22 * sum|x_i w_i| (the CPU's
// fp32 sum is within in * 2^-24 * sum|x_i w_i|; the per-expert path's tensor cores truncate
// when they accumulate, up to in * 2^-23 * sum|x_i w_i|), and rel-L2 <= 2^-8 overall (the
// bf16 rounding's rms is ~2^-9/sqrt(3)). A wrong expert, row or offset gives O(1) errors.
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gpu_test_support.h"
#include "tpb/check.h"
#include "tpb/cuda_check.h"
#include "tpb/dtype.h"
#include "tpb/kernels/device.h"
#include "tpb/kernels/gpu/expert_gemm.h"
#include "tpb/kernels/gpu/expert_gemm_tuning.h"
#include "tpb/kernels/gpu/linear.h"
#include "tpb/kernels/linear.h"

namespace tpb::test {
namespace {

// Counting sort of a routing (tokens x top_k expert ids) into per-expert offsets, the layout
// moe_dispatch produces. Returns offsets [experts + 1].
std::vector<std::int32_t> offsets_from_routing(const std::vector<int>& expert_of_pair, int experts) {
  std::vector<std::int32_t> off(static_cast<std::size_t>(experts) + 1, 0);
  for (int e : expert_of_pair) ++off[static_cast<std::size_t>(e) + 1];
  std::partial_sum(off.begin(), off.end(), off.begin());
  return off;
}

std::vector<std::int32_t> offsets_from_counts(const std::vector<int>& counts) {
  std::vector<int> pairs;
  for (std::size_t e = 0; e < counts.size(); ++e) pairs.insert(pairs.end(), static_cast<std::size_t>(counts[e]), static_cast<int>(e));
  return offsets_from_routing(pairs, static_cast<int>(counts.size()));
}

// tokens x top_k distinct experts per token, uniformly at random.
std::vector<std::int32_t> random_routing_offsets(int tokens, int top_k, int experts, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int> ids(static_cast<std::size_t>(experts)), pairs;
  std::iota(ids.begin(), ids.end(), 0);
  for (int t = 0; t < tokens; ++t) {
    std::shuffle(ids.begin(), ids.end(), rng);
    pairs.insert(pairs.end(), ids.begin(), ids.begin() + top_k);
  }
  return offsets_from_routing(pairs, experts);
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
  // Empty first and last experts, one expert with 21 rows (more than a chunk, not a multiple
  // of it); in and out not multiples of the kernel's 256-element step or 32-row tile.
  c.push_back({"hand", 200, 40, offsets_from_counts({0, 1, 0, 0, 21, 3, 0, 8, 9, 0, 2, 0})});
  // Decode-like random routing: 16 tokens, top 8 of 64 experts.
  c.push_back({"routed", 1024, 520, random_routing_offsets(16, 8, 64, 7)});
  // Kimi's `in` for gate_up, one expert holding 300 rows.
  c.push_back({"heavy", 7168, 96, offsets_from_counts({2, 0, 300, 1, 0, 5, 0, 9})});
  // More experts than the grouped kernel scans per step (256): rows on both sides of the
  // boundary and in the last expert; 8 pairs, so only 8 grid slots for 300 experts.
  std::vector<int> wide(300, 0);
  wide[3] = 1, wide[255] = 2, wide[256] = 1, wide[257] = 3, wide[299] = 1;
  c.push_back({"wide", 64, 40, offsets_from_counts(wide)});
  // Decode at batch 1: one token, top 8 of 384 experts.
  c.push_back({"decode1", 256, 72, random_routing_offsets(1, 8, 384, 5)});
  // Many 32-row output tiles (129, the last one 8 rows) over 40 grid slots: each block of
  // the grouped kernel loops over several tiles (it launches ~4 blocks per SM in all).
  c.push_back({"tall", 64, 4104, random_routing_offsets(8, 6, 40, 11)});
  return c;
}

struct Data {
  std::vector<std::uint16_t> x, w;  // x_sorted [pairs, in], weights [experts, out, in]
};

Data make_data(const Case& c, std::uint32_t seed) {
  return {random_bf16(static_cast<std::size_t>(c.pairs() * c.in), seed),
          random_bf16(static_cast<std::size_t>(c.experts() * c.out * c.in), seed + 1)};
}

// Host loop over experts; returns the reference and the |.| reference (for the tolerance).
void reference(const Case& c, const Data& d, std::vector<float>& y, std::vector<float>& absdot) {
  std::vector<float> x(d.x.size()), w(d.w.size()), ax(d.x.size()), aw(d.w.size());
  for (std::size_t i = 0; i < x.size(); ++i) ax[i] = std::fabs(x[i] = bf16_to_float(d.x[i]));
  for (std::size_t i = 0; i < w.size(); ++i) aw[i] = std::fabs(w[i] = bf16_to_float(d.w[i]));
  y.assign(static_cast<std::size_t>(c.pairs() * c.out), 0.f);
  absdot.assign(y.size(), 0.f);
  for (std::int64_t e = 0; e < c.experts(); ++e) {
    const std::int64_t b = c.offsets[static_cast<std::size_t>(e)], n = c.offsets[static_cast<std::size_t>(e) + 1] - b;
    if (n == 0) continue;
    kernels::linear_ref(x.data() + b * c.in, w.data() + e * c.out * c.in, y.data() + b * c.out, n, c.in, c.out);
    kernels::linear_ref(ax.data() + b * c.in, aw.data() + e * c.out * c.in, absdot.data() + b * c.out, n, c.in,
                        c.out);
  }
}

void expect_close(const std::vector<std::uint16_t>& got_bits, const std::vector<float>& ref,
                  const std::vector<float>& absdot, std::int64_t in, const std::string& what) {
  ASSERT_EQ(got_bits.size(), ref.size());
  double err2 = 0, ref2 = 0;
  int bad = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double got = bf16_to_float(got_bits[i]);
    const double d = std::fabs(got - ref[i]);
    const double tol = std::ldexp(std::fabs(ref[i]), -8) + static_cast<double>(in) * std::ldexp(static_cast<double>(absdot[i]), -22);
    if (!(d <= tol) && ++bad <= 5)
      ADD_FAILURE() << what << ": element " << i << " got " << got << " want " << ref[i] << " (tol " << tol << ")";
    err2 += d * d;
    ref2 += static_cast<double>(ref[i]) * ref[i];
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " elements out of tolerance";
  ASSERT_GT(ref2, 0.0) << what << ": the reference is all zeros, the test would be vacuous";
  EXPECT_LE(std::sqrt(err2 / ref2), std::ldexp(1.0, -8)) << what << ": rel-L2";
}

// Device copies of one case's inputs and an output filled with a NaN pattern (a row the
// kernel forgets shows up as NaN, which fails every comparison).
struct Dev {
  DevBuf<std::uint16_t> x, w, y;
  DevBuf<std::int32_t> off;
  Dev(const Case& c, const Data& d)
      : x(d.x.size()), w(d.w.size()), y(static_cast<std::size_t>(c.pairs() * c.out)), off(c.offsets.size()) {
    x.upload(d.x);
    w.upload(d.w);
    off.upload(c.offsets);
    poison();
  }
  void poison(cudaStream_t s = nullptr) {
    TPB_CUDA_CHECK(cudaMemsetAsync(y.p, 0xff, y.n * 2, s));
    TPB_CUDA_CHECK(cudaStreamSynchronize(s));
  }
};

TEST(GpuExpertGemm, GroupedMatchesHostLoop) {
  TPB_REQUIRE_GPU();
  std::uint32_t seed = 1000;
  for (const Case& c : cases()) {
    const Data d = make_data(c, seed += 2);
    Dev g(c, d);
    gpu::expert_gemm_grouped(bf(g.x.p), g.off.p, c.experts(), c.pairs(), bf(g.w.p), c.out * c.in,
                             c.in, c.out, bf(g.y.p), nullptr);
    TPB_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> ref, absdot;
    reference(c, d, ref, absdot);
    expect_close(g.y.download(), ref, absdot, c.in, "grouped " + c.name);
  }
}

// Every tuning variant (tpb_bench compares their speed) against the host loop, and bitwise
// against expert_gemm_grouped: they keep its sum order, so a faster one can replace it
// without changing a single output bit.
TEST(GpuExpertGemm, EveryTuningVariantGivesTheSameBits) {
  TPB_REQUIRE_GPU();
  std::uint32_t seed = 5000;
  for (const Case& c : cases()) {
    const Data d = make_data(c, seed += 2);
    Dev g(c, d);
    gpu::expert_gemm_grouped(bf(g.x.p), g.off.p, c.experts(), c.pairs(), bf(g.w.p), c.out * c.in, c.in, c.out,
                             bf(g.y.p), nullptr);
    TPB_CUDA_CHECK(cudaDeviceSynchronize());
    const auto want = g.y.download();
    std::vector<float> ref, absdot;
    reference(c, d, ref, absdot);
    for (int v = 0; v < gpu::tuning::expert_gemm_grouped_variants(); ++v) {
      const std::string name = gpu::tuning::expert_gemm_grouped_variant_name(v);
      g.poison();
      gpu::tuning::expert_gemm_grouped_variant(v, bf(g.x.p), g.off.p, c.experts(), c.pairs(), bf(g.w.p),
                                               c.out * c.in, c.in, c.out, bf(g.y.p), nullptr);
      TPB_CUDA_CHECK(cudaDeviceSynchronize());
      const auto got = g.y.download();
      expect_close(got, ref, absdot, c.in, name + " " + c.name);
      EXPECT_TRUE(got == want) << name << " " << c.name << " differs bitwise from expert_gemm_grouped";
    }
  }
}

TEST(GpuExpertGemm, PerExpertMatchesHostLoop) {
  TPB_REQUIRE_GPU();
  gpu::Linear lin;
  std::uint32_t seed = 2000;
  for (const Case& c : cases()) {
    const Data d = make_data(c, seed += 2);
    Dev g(c, d);
    gpu::expert_gemm_per_expert(lin, bf(g.x.p), g.off.p, c.experts(), bf(g.w.p), c.out * c.in, c.in, c.out,
                                bf(g.y.p), nullptr);
    TPB_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> ref, absdot;
    reference(c, d, ref, absdot);
    expect_close(g.y.download(), ref, absdot, c.in, "per_expert " + c.name);
  }
}

TEST(GpuExpertGemm, GroupedIsDeterministic) {
  TPB_REQUIRE_GPU();
  const Case c = cases()[1];
  const Data d = make_data(c, 3000);
  Dev g(c, d);
  gpu::expert_gemm_grouped(bf(g.x.p), g.off.p, c.experts(), c.pairs(), bf(g.w.p), c.out * c.in, c.in, c.out,
                           bf(g.y.p), nullptr);
  TPB_CUDA_CHECK(cudaDeviceSynchronize());
  const auto first = g.y.download();
  g.poison();
  gpu::expert_gemm_grouped(bf(g.x.p), g.off.p, c.experts(), c.pairs(), bf(g.w.p), c.out * c.in, c.in, c.out,
                           bf(g.y.p), nullptr);
  TPB_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_TRUE(g.y.download() == first) << "grouped expert GEMM differs between two identical calls";
  std::vector<float> ref, absdot;
  reference(c, d, ref, absdot);
  expect_close(first, ref, absdot, c.in, "determinism case");
}

// One graph, captured once, serves different routings (same pairs) and inputs: the
// offsets are read on the device. Replay must equal an eager call bitwise.
TEST(GpuExpertGemm, GroupedGraphReplaysNewRoutingAsEager) {
  TPB_REQUIRE_GPU();
  Case c = cases()[1];
  const Data d = make_data(c, 4000);
  Dev g(c, d);
  cudaStream_t s;
  TPB_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  auto call = [&] {
    gpu::expert_gemm_grouped(bf(g.x.p), g.off.p, c.experts(), c.pairs(), bf(g.w.p), c.out * c.in, c.in, c.out,
                             bf(g.y.p), s);
  };
  call();  // eager first, as the engine does (module loading stays out of the capture)
  TPB_CUDA_CHECK(cudaStreamSynchronize(s));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  TPB_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  call();
  TPB_CUDA_CHECK(cudaStreamEndCapture(s, &graph));
  TPB_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));

  for (int round = 0; round < 2; ++round) {
    if (round == 1) {  // a new routing of the same 16 x 8 pairs, new activations
      c.offsets = random_routing_offsets(16, 8, 64, 99);
      g.off.upload(c.offsets);
      g.x.upload(random_bf16(g.x.n, 4100));
    }
    g.poison(s);
    TPB_CUDA_CHECK(cudaGraphLaunch(exec, s));
    TPB_CUDA_CHECK(cudaStreamSynchronize(s));
    const auto replay = g.y.download();
    g.poison(s);
    call();
    TPB_CUDA_CHECK(cudaStreamSynchronize(s));
    EXPECT_TRUE(g.y.download() == replay) << "graph replay differs from eager, round " << round;
    Data now{std::vector<std::uint16_t>(), d.w};
    now.x.resize(g.x.n);
    TPB_CUDA_CHECK(cudaMemcpy(now.x.data(), g.x.p, g.x.n * 2, cudaMemcpyDeviceToHost));
    std::vector<float> ref, absdot;
    reference(c, now, ref, absdot);
    expect_close(replay, ref, absdot, c.in, "graph replay round " + std::to_string(round));
  }
  TPB_CUDA_CHECK(cudaGraphExecDestroy(exec));
  TPB_CUDA_CHECK(cudaGraphDestroy(graph));
  TPB_CUDA_CHECK(cudaStreamDestroy(s));
}

// The per-expert path synchronises on a host copy: under capture it must refuse clearly
// (and leave the capture usable) instead of invalidating it.
TEST(GpuExpertGemm, PerExpertRefusesCapture) {
  TPB_REQUIRE_GPU();
  gpu::Linear lin;
  DevBuf<std::uint16_t> x(4096), w(4096), y(4096);
  DevBuf<std::int32_t> off(3);
  off.upload({0, 1, 2});
  cudaStream_t s;
  TPB_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  TPB_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  EXPECT_THROW(gpu::expert_gemm_per_expert(lin, bf(x.p), off.p, 2, bf(w.p), 128, 16, 8, bf(y.p), s), Error);
  cudaGraph_t graph = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  if (graph != nullptr) TPB_CUDA_CHECK(cudaGraphDestroy(graph));
  TPB_CUDA_CHECK(cudaStreamDestroy(s));
}

// Rows that are not whole 16-byte vectors (an odd model's hidden 52, per-rank expert widths of
// 5 or 25) and a misaligned x take the narrow kernel: the same numbers as the host loop,
// deterministic, and still one launch that a graph can hold.
TEST(GpuExpertGemm, NarrowRowsMatchHostLoop) {
  TPB_REQUIRE_GPU();
  std::vector<Case> narrow;
  narrow.push_back({"gate_up hidden 52", 52, 10, offsets_from_counts({0, 3, 1, 0, 5, 0, 2, 1})});
  narrow.push_back({"down inter 5", 5, 52, offsets_from_counts({2, 0, 1, 9, 0, 0, 3, 1})});
  narrow.push_back({"decode in 25", 25, 13, random_routing_offsets(1, 2, 8, 3)});
  narrow.push_back({"in 12", 12, 40, random_routing_offsets(16, 8, 64, 9)});
  std::uint32_t seed = 3000;
  for (const Case& c : narrow) {
    const Data d = make_data(c, seed += 2);
    std::vector<float> ref, absdot;
    reference(c, d, ref, absdot);
    Dev g(c, d);
    gpu::expert_gemm_grouped(bf(g.x.p), g.off.p, c.experts(), c.pairs(), bf(g.w.p), c.out * c.in, c.in, c.out,
                             bf(g.y.p), nullptr);
    const auto first = g.y.download();
    expect_close(first, ref, absdot, c.in, "narrow " + c.name);
    g.poison();
    gpu::expert_gemm_grouped(bf(g.x.p), g.off.p, c.experts(), c.pairs(), bf(g.w.p), c.out * c.in, c.in, c.out,
                             bf(g.y.p), nullptr);
    EXPECT_EQ(g.y.download(), first) << "narrow " << c.name << ": a second call gave other bits";
  }
  // x one element past a 16-byte boundary (in = 16: whole vectors, but not aligned ones).
  const Case c{"misaligned x", 16, 24, offsets_from_counts({1, 2, 0, 1})};
  const Data d = make_data(c, 3100);
  std::vector<float> ref, absdot;
  reference(c, d, ref, absdot);
  Dev g(c, d);
  DevBuf<std::uint16_t> x_off(d.x.size() + 1);
  std::vector<std::uint16_t> shifted(1, 0);
  shifted.insert(shifted.end(), d.x.begin(), d.x.end());
  x_off.upload(shifted);
  gpu::expert_gemm_grouped(bf(x_off.p) + 1, g.off.p, c.experts(), c.pairs(), bf(g.w.p), c.out * c.in, c.in, c.out,
                           bf(g.y.p), nullptr);
  expect_close(g.y.download(), ref, absdot, c.in, "narrow misaligned x");
}

TEST(GpuExpertGemm, ImpossibleShapesThrow) {
  TPB_REQUIRE_GPU();
  DevBuf<std::uint16_t> x(4096), w(4096), y(4096);
  DevBuf<std::int32_t> off(3);
  off.upload({0, 1, 2});
  EXPECT_THROW(gpu::expert_gemm_grouped(bf(x.p), off.p, 2, 2, bf(w.p), 96, 0, 8, bf(y.p), nullptr), Error);
  EXPECT_THROW(gpu::expert_gemm_grouped(bf(x.p), off.p, 70000, 2, bf(w.p), 96, 12, 8, bf(y.p), nullptr), Error);
  EXPECT_THROW(gpu::expert_gemm_grouped(bf(x.p), off.p, 2, 2, bf(w.p), 96, 12, 0, bf(y.p), nullptr), Error);
  TPB_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace
}  // namespace tpb::test
