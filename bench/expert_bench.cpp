// Routed-expert GEMM microbenchmarks: tpb::gpu::expert_gemm_grouped at the Kimi-K2.5 TP2
// expert shapes (gate|up fused: out 2·1024, in 7168; down: out 7168, in 1024), all 384
// experts resident, decode batches of 1 / 8 / 64 / 256 tokens routed top-8 uniformly at
// random. "moe" runs gate_up then down, the routed FFN's two GEMMs (SiLU-and-mul omitted).
// Timing as gemm_bench.cpp; a batch cycles over 4 routings so no one set of experts stays
// in L2.
//
// Counters: touched_experts (mean over the routings), touched_weight_bytes (what a step
// must read from HBM), GBps = touched_weight_bytes / time, vs_copy_bw = GBps / measured copy
// bandwidth, and x_weight_read_time = time / (touched_weight_bytes at copy bandwidth): the
// issue's decode target is <= 1.5 for the whole layer. expert_variant/* runs each tuning
// variant of the kernel (expert_gemm_tuning.h) at the same shapes, side by side.
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "bench/device_timing.h"
#include "bench/gemm_bench.h"
#include "bench/uniform_routings.h"
#include "tpb/cuda_check.h"
#include "tpb/kernels/gpu/expert_gemm.h"
#include "tpb/kernels/gpu/expert_gemm_tuning.h"

namespace tpb::bench {

namespace {

constexpr int kExperts = 384;
constexpr int kTopK = 8;
constexpr int kRoutings = 4;
constexpr int kMaxTokens = 256;
constexpr std::int64_t kHidden = 7168;
constexpr std::int64_t kInter = 1024;  // moe_intermediate 2048 / TP2

struct ExpertBenchState {
  int device = 0;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  __nv_bfloat16 *w_gate_up = nullptr, *w_down = nullptr;  // [E, 2I, H], [E, H, I]
  __nv_bfloat16 *x = nullptr, *gu = nullptr, *act = nullptr, *y = nullptr;
  std::int32_t* offsets = nullptr;  // kRoutings x (kExperts + 1)
  bool ready = false;

  void prepare() {
    if (ready) return;
    TPB_CUDA_CHECK(cudaSetDevice(device));
    TPB_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    TPB_CUDA_CHECK(cudaEventCreate(&start));
    TPB_CUDA_CHECK(cudaEventCreate(&stop));
    const std::size_t wgu = std::size_t{kExperts} * 2 * kInter * kHidden, wd = std::size_t{kExperts} * kHidden * kInter;
    const std::size_t pairs = std::size_t{kMaxTokens} * kTopK;
    TPB_CUDA_CHECK(cudaMalloc(&w_gate_up, wgu * 2));
    TPB_CUDA_CHECK(cudaMalloc(&w_down, wd * 2));
    TPB_CUDA_CHECK(cudaMalloc(&x, pairs * kHidden * 2));
    TPB_CUDA_CHECK(cudaMalloc(&gu, pairs * 2 * kInter * 2));
    TPB_CUDA_CHECK(cudaMalloc(&act, pairs * kInter * 2));
    TPB_CUDA_CHECK(cudaMalloc(&y, pairs * kHidden * 2));
    TPB_CUDA_CHECK(cudaMalloc(&offsets, sizeof(std::int32_t) * kRoutings * (kExperts + 1)));
    fill_random_bf16(w_gate_up, wgu, 21);
    fill_random_bf16(w_down, wd, 22);
    fill_random_bf16(x, pairs * kHidden, 23);
    fill_random_bf16(act, pairs * kInter, 24);
    ready = true;
  }
};

ExpertBenchState* g_expert = nullptr;  // lives until exit

enum class Which { gate_up, down, moe };

// Uploads kRoutings random routings of `tokens` tokens; returns the mean number of experts
// with at least one row.
double upload_routings(ExpertBenchState& g, int tokens) {
  const UniformRoutings r = uniform_routings(kExperts, kTopK, tokens, kRoutings, 1000);
  TPB_CUDA_CHECK(cudaMemcpy(g.offsets, r.offsets.data(), r.offsets.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice));
  return r.mean_experts_touched;
}

// variant < 0: expert_gemm_grouped itself; else that tuning variant (expert_gemm_tuning.h).
void bm_expert(benchmark::State& state, Which which, int tokens, int variant = -1) {
  ExpertBenchState& g = *g_expert;
  g.prepare();
  const DeviceLimits& lim = device_limits(g.device);
  const double touched = upload_routings(g, tokens);
  const std::int64_t pairs = std::int64_t{tokens} * kTopK;
  const bool do_gu = which != Which::down, do_down = which != Which::gate_up;
  const double expert_elems = (do_gu ? 2.0 * kInter * kHidden : 0.0) + (do_down ? 1.0 * kHidden * kInter : 0.0);
  const double weight_bytes = 2.0 * touched * expert_elems;
  const double flops = 2.0 * static_cast<double>(pairs) * expert_elems;
  const int ops = static_cast<int>(std::clamp(500e-6 / (weight_bytes / 4e12), 1.0, 32.0));

  auto gemm = [&](const __nv_bfloat16* xs, const std::int32_t* off, const __nv_bfloat16* w, std::int64_t in,
                  std::int64_t out, __nv_bfloat16* ys) {
    if (variant < 0)
      gpu::expert_gemm_grouped(xs, off, kExperts, pairs, w, in * out, in, out, ys, g.stream);
    else
      gpu::tuning::expert_gemm_grouped_variant(variant, xs, off, kExperts, pairs, w, in * out, in, out, ys, g.stream);
  };
  auto one = [&](int i) {
    const std::int32_t* off = g.offsets + (i % kRoutings) * (kExperts + 1);
    if (do_gu) gemm(g.x, off, g.w_gate_up, kHidden, 2 * kInter, g.gu);
    if (do_down) gemm(g.act, off, g.w_down, kInter, kHidden, g.y);
  };
  auto batch = [&] {
    for (int i = 0; i < ops; ++i) one(i);
  };
  batch();  // warm-up
  TPB_CUDA_CHECK(cudaStreamSynchronize(g.stream));

  const double mean_s = time_per_op_s(state, g.stream, g.start, g.stop, ops, batch);
  const double gbps = weight_bytes / mean_s / 1e9;
  state.counters["tokens"] = tokens;
  state.counters["pairs"] = static_cast<double>(pairs);
  state.counters["touched_experts"] = touched;
  state.counters["touched_weight_bytes"] = weight_bytes;
  state.counters["us_per_op"] = mean_s * 1e6;
  state.counters["GBps"] = gbps;
  state.counters["TFLOPs"] = flops / mean_s / 1e12;
  state.counters["copy_GBps"] = lim.copy_GBps;
  state.counters["vs_copy_bw"] = gbps / lim.copy_GBps;
  state.counters["x_weight_read_time"] = lim.copy_GBps / gbps;
  state.counters["ops_per_batch"] = ops;
  state.SetLabel(variant < 0 ? "grouped, top 8 of 384 experts"
                             : std::string("variant ") + gpu::tuning::expert_gemm_grouped_variant_name(variant));
}

}  // namespace

void register_expert_benchmarks(RankContext& ctx) {
  g_expert = new ExpertBenchState;
  g_expert->device = ctx.rank;
  const std::pair<const char*, Which> kinds[] = {{"gate_up", Which::gate_up}, {"down", Which::down}, {"moe", Which::moe}};
  for (const auto& [name, which] : kinds)
    for (int tokens : {1, 8, 16, 32, 64, 256}) {
      const Which w = which;
      const std::string bench_name = std::string("expert/") + name + "/tokens:" + std::to_string(tokens);
      benchmark::RegisterBenchmark(bench_name.c_str(), [w, tokens](benchmark::State& st) { bm_expert(st, w, tokens); })
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond)
          ->Iterations(20);
    }
  // The kernel's tuning variants side by side at decode sizes (ratios within one run).
  for (int v = 0; v < gpu::tuning::expert_gemm_grouped_variants(); ++v)
    for (const auto& [name, which] : kinds) {
      if (which == Which::moe) continue;
      for (int tokens : {1, 8, 16, 32, 64}) {
        const Which w = which;
        const std::string bench_name = std::string("expert_variant/") + gpu::tuning::expert_gemm_grouped_variant_name(v) +
                                       "/" + name + "/tokens:" + std::to_string(tokens);
        benchmark::RegisterBenchmark(bench_name.c_str(),
                                     [w, tokens, v](benchmark::State& st) { bm_expert(st, w, tokens, v); })
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond)
            ->Iterations(20);
      }
    }
}

}  // namespace tpb::bench
