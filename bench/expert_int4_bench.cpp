// INT4 routed-expert GEMM microbenchmarks (tpb/kernels/gpu/expert_gemm_int4.h) at Kimi-K2.5's
// expert shape, group 32: gate|up fused in 7168 -> out 2 x 2048, down in 2048 -> out 7168.
//
// expert_int4/<path>/<proj>/tokens:T   T tokens routed to one expert; successive calls rotate
//   over 8 experts (8 x 24.8 MB of INT4 weights, 8 x 88 MB in bf16: more than L2 holds), so
//   the weights stream from HBM as in a decode step. Paths, side by side in one run:
//     int4_grouped   expert_gemm_int4_grouped (decode kernel)
//     int4_prefill   expert_gemm_int4_prefill (tile kernel)
//     bf16_grouped   expert_gemm_grouped on bf16 weights of the same shape
//     bf16_cublaslt  the cuBLASLt GEMM that expert_gemm_per_expert runs for one expert
//                    (Linear::bf16_out; without the offsets copy and stream synchronisation
//                    that per_expert adds, which a device timer would count as idle time)
// expert_int4_variant/<variant>/<proj>/tokens:T   each grouped variant (expert_gemm_int4.h's
//   tuning namespace) at the same shapes, for choosing among them; the same bits.
// expert_int4/moe/<path>/tp:N/tokens:B   the routed layer's two INT4 GEMMs (gate|up then down,
//   SiLU-and-mul omitted): B tokens routed top 8 of 384 experts uniformly at random, Kimi's
//   widths at TP N (intermediate 2048 / N), all experts resident, 4 routings in turn; decode
//   batches (1, 8, 64) through the grouped kernel, prefill batches (1024, 4096) through both.
//
// Counters: weight_bytes = what the path must read from HBM (INT4: packed words + bf16 scales
// of the touched experts; bf16 paths: their bf16 weights); int4_weight_bytes = the INT4 bytes of
// the same work; GBps = weight_bytes / time; copy_GBps = device-to-device copy bandwidth
// measured in this process (read + write counted, as bench/gemm_bench.cpp); vs_copy_bw =
// GBps / copy_GBps; x_int4_read_time = time / (int4_weight_bytes at copy_GBps): the decode
// target is <= 1.3 at batch 1 and 8 for the MoE layer, and the bf16 paths' value says how much
// faster the INT4 layer is than theirs. Timing as STYLE.md 12 (bench/device_timing.h).
#include "bench/expert_int4_bench.h"

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "bench/device_timing.h"
#include "bench/gemm_bench.h"
#include "bench/uniform_routings.h"
#include "tpb/cuda_check.h"
#include "tpb/kernels/gpu/expert_gemm.h"
#include "tpb/kernels/gpu/expert_gemm_int4.h"
#include "tpb/kernels/gpu/linear.h"

namespace tpb::bench {

namespace {

constexpr std::int64_t kHidden = 7168;
constexpr std::int64_t kInter = 2048;  // moe_intermediate_size at TP 1
constexpr int kRotate = 8;             // experts the single-expert benchmarks rotate over
constexpr int kMoeExperts = 384;
constexpr int kTopK = 8;
constexpr int kRoutings = 4;
constexpr int kMaxTokens = 4096;  // the MoE prefill benchmark's largest batch

enum class Proj { gate_up, down };
enum class Path { int4_grouped, int4_prefill, bf16_grouped, bf16_cublaslt, int4_variant };

const char* path_name(Path p) {
  switch (p) {
    case Path::int4_grouped: return "int4_grouped";
    case Path::int4_prefill: return "int4_prefill";
    case Path::bf16_grouped: return "bf16_grouped";
    case Path::bf16_cublaslt: return "bf16_cublaslt";
    case Path::int4_variant: return "int4_variant";
  }
  return "?";
}

// One projection's INT4 arrays for `experts` experts of [out, in] (the engine's layout).
struct Int4Arrays {
  std::uint32_t* packed = nullptr;
  __nv_bfloat16* scales = nullptr;
  void allocate(std::int64_t experts, std::int64_t out, std::int64_t in, std::uint32_t seed) {
    const std::size_t elems = static_cast<std::size_t>(experts * out * in);
    TPB_CUDA_CHECK(cudaMalloc(&packed, elems / 2));
    TPB_CUDA_CHECK(cudaMalloc(&scales, elems / 32 * 2));
    fill_random_bf16(packed, elems / 4, seed);  // any bits are valid nibbles
    fill_random_bf16(scales, elems / 32, seed + 1);
  }
  // Expert e of [out, in] experts.
  gpu::Int4ExpertWeights expert(std::int64_t e, std::int64_t out, std::int64_t in) const {
    return {packed + e * out * in / 8, scales + e * out * in / 32, in, out};
  }
};

double int4_bytes(std::int64_t out, std::int64_t in) { return static_cast<double>(out * in) * (0.5 + 2.0 / 32); }

struct Int4BenchState {
  int device = 0;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  Int4Arrays gate_up, down;                    // kRotate experts, TP 1 shapes
  __nv_bfloat16 *bf16_gate_up = nullptr, *bf16_down = nullptr;
  Int4Arrays moe_gate_up, moe_down;            // kMoeExperts experts, TP 1 sizes (a TP N view uses a prefix)
  __nv_bfloat16 *x = nullptr, *y = nullptr;    // [kMaxTokens * kTopK, kHidden]
  std::int32_t* single_offsets = nullptr;      // {0, T}
  std::int32_t* moe_offsets = nullptr;         // kRoutings x (kMoeExperts + 1)
  std::unique_ptr<gpu::Linear> linear;
  bool ready = false, moe_ready = false;

  // Allocation and fills on first use: a filter excluding these benchmarks costs nothing.
  void prepare() {
    if (ready) return;
    TPB_CUDA_CHECK(cudaSetDevice(device));
    TPB_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    TPB_CUDA_CHECK(cudaEventCreate(&start));
    TPB_CUDA_CHECK(cudaEventCreate(&stop));
    gate_up.allocate(kRotate, 2 * kInter, kHidden, 31);
    down.allocate(kRotate, kHidden, kInter, 33);
    const std::size_t bgu = std::size_t{kRotate} * 2 * kInter * kHidden, bd = std::size_t{kRotate} * kHidden * kInter;
    TPB_CUDA_CHECK(cudaMalloc(&bf16_gate_up, bgu * 2));
    TPB_CUDA_CHECK(cudaMalloc(&bf16_down, bd * 2));
    fill_random_bf16(bf16_gate_up, bgu, 35);
    fill_random_bf16(bf16_down, bd, 36);
    const std::size_t rows = std::size_t{kMaxTokens} * kTopK;
    TPB_CUDA_CHECK(cudaMalloc(&x, rows * kHidden * 2));
    TPB_CUDA_CHECK(cudaMalloc(&y, rows * kHidden * 2));
    fill_random_bf16(x, rows * kHidden, 37);
    TPB_CUDA_CHECK(cudaMalloc(&single_offsets, 2 * sizeof(std::int32_t)));
    TPB_CUDA_CHECK(cudaMalloc(&moe_offsets, sizeof(std::int32_t) * kRoutings * (kMoeExperts + 1)));
    linear = std::make_unique<gpu::Linear>();
    linear->set_one_row_gemv(false);  // expert_gemm_per_expert's GEMM is cuBLASLt at every row count
    ready = true;
  }
  void prepare_moe() {
    prepare();
    if (moe_ready) return;
    moe_gate_up.allocate(kMoeExperts, 2 * kInter, kHidden, 41);
    moe_down.allocate(kMoeExperts, kHidden, kInter, 43);
    moe_ready = true;
  }
};

Int4BenchState* g_int4 = nullptr;  // lives until exit

// Calls per timed batch: ~300 us at 3 TB/s, 1..64.
int ops_for(double bytes) { return static_cast<int>(std::clamp(300e-6 / (bytes / 3e12), 1.0, 64.0)); }

void set_counters(benchmark::State& state, double mean_s, double weight_bytes, double int4_weight_bytes,
                  double flops, int ops) {
  const DeviceLimits& lim = device_limits(g_int4->device);
  const double gbps = weight_bytes / mean_s / 1e9;
  state.counters["us_per_op"] = mean_s * 1e6;
  state.counters["weight_bytes"] = weight_bytes;
  state.counters["int4_weight_bytes"] = int4_weight_bytes;
  state.counters["GBps"] = gbps;
  state.counters["TFLOPs"] = flops / mean_s / 1e12;
  state.counters["copy_GBps"] = lim.copy_GBps;
  state.counters["vs_copy_bw"] = gbps / lim.copy_GBps;
  state.counters["x_int4_read_time"] = mean_s / (int4_weight_bytes / (lim.copy_GBps * 1e9));
  state.counters["ops_per_batch"] = ops;
}

void bm_single(benchmark::State& state, Path path, Proj proj, int tokens, int variant) {
  Int4BenchState& g = *g_int4;
  g.prepare();
  const std::int64_t in = proj == Proj::gate_up ? kHidden : kInter, out = proj == Proj::gate_up ? 2 * kInter : kHidden;
  const std::int32_t host_offsets[2] = {0, tokens};
  TPB_CUDA_CHECK(cudaMemcpy(g.single_offsets, host_offsets, sizeof host_offsets, cudaMemcpyHostToDevice));
  const Int4Arrays& a = proj == Proj::gate_up ? g.gate_up : g.down;
  const __nv_bfloat16* b = proj == Proj::gate_up ? g.bf16_gate_up : g.bf16_down;
  const bool bf16 = path == Path::bf16_grouped || path == Path::bf16_cublaslt;
  const double int4_weight_bytes = int4_bytes(out, in);
  const double weight_bytes = bf16 ? 2.0 * static_cast<double>(out * in) : int4_weight_bytes;
  const int ops = ops_for(weight_bytes);

  auto one = [&](int i) {
    const std::int64_t e = i % kRotate;
    switch (path) {
      case Path::int4_grouped:
        gpu::expert_gemm_int4_grouped(g.x, g.single_offsets, 1, tokens, a.expert(e, out, in), g.y, g.stream);
        break;
      case Path::int4_prefill:
        gpu::expert_gemm_int4_prefill(g.x, g.single_offsets, 1, tokens, a.expert(e, out, in), g.y, g.stream);
        break;
      case Path::int4_variant:
        gpu::tuning::expert_gemm_int4_grouped_variant(variant, g.x, g.single_offsets, 1, tokens, a.expert(e, out, in),
                                                      g.y, g.stream);
        break;
      case Path::bf16_grouped:
        gpu::expert_gemm_grouped(g.x, g.single_offsets, 1, tokens, b + e * out * in, out * in, in, out, g.y, g.stream);
        break;
      case Path::bf16_cublaslt:
        g.linear->bf16_out(g.x, in, b + e * out * in, g.y, out, tokens, in, out, g.stream);
        break;
    }
  };
  auto batch = [&] {
    for (int i = 0; i < ops; ++i) one(i);
  };
  for (int wu = 0; wu < 2; ++wu) batch();  // module load, cuBLASLt's algorithm choice
  TPB_CUDA_CHECK(cudaStreamSynchronize(g.stream));
  const double mean_s = time_per_op_s(state, g.stream, g.start, g.stop, ops, batch);
  set_counters(state, mean_s, weight_bytes, int4_weight_bytes, 2.0 * tokens * static_cast<double>(out * in), ops);
  state.counters["tokens"] = tokens;
  state.SetLabel(std::string(path_name(path)) +
                 (path == Path::int4_variant ? std::string(" ") + gpu::tuning::expert_gemm_int4_grouped_variant_name(variant)
                                             : std::string()) +
                 ", one expert of 8 in turn");
}

// Uploads kRoutings random routings of `tokens` tokens (top 8 of 384); returns the mean number
// of experts with at least one row.
double upload_moe_routings(Int4BenchState& g, int tokens) {
  const UniformRoutings r = uniform_routings(kMoeExperts, kTopK, tokens, kRoutings, 2000);
  TPB_CUDA_CHECK(cudaMemcpy(g.moe_offsets, r.offsets.data(), r.offsets.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice));
  return r.mean_experts_touched;
}

void bm_moe(benchmark::State& state, Path path, int tp, int tokens) {
  Int4BenchState& g = *g_int4;
  g.prepare_moe();
  const std::int64_t inter = kInter / tp, pairs = std::int64_t{tokens} * kTopK;
  const double touched = upload_moe_routings(g, tokens);
  const double expert_bytes = int4_bytes(2 * inter, kHidden) + int4_bytes(kHidden, inter);
  const double weight_bytes = touched * expert_bytes;
  const int ops = ops_for(weight_bytes);
  const gpu::Int4ExpertWeights gu{g.moe_gate_up.packed, g.moe_gate_up.scales, kHidden, 2 * inter};
  const gpu::Int4ExpertWeights dn{g.moe_down.packed, g.moe_down.scales, inter, kHidden};
  auto batch = [&] {
    for (int i = 0; i < ops; ++i) {
      const std::int32_t* off = g.moe_offsets + (i % kRoutings) * (kMoeExperts + 1);
      const auto gemm = path == Path::int4_prefill ? gpu::expert_gemm_int4_prefill : gpu::expert_gemm_int4_grouped;
      gemm(g.x, off, kMoeExperts, pairs, gu, g.y, g.stream);
      gemm(g.x, off, kMoeExperts, pairs, dn, g.y, g.stream);  // x stands in for SiLU(gate) * up
    }
  };
  for (int wu = 0; wu < 2; ++wu) batch();
  TPB_CUDA_CHECK(cudaStreamSynchronize(g.stream));
  const double mean_s = time_per_op_s(state, g.stream, g.start, g.stop, ops, batch);
  set_counters(state, mean_s, weight_bytes, weight_bytes, 2.0 * static_cast<double>(pairs) * 3.0 * inter * kHidden, ops);
  state.counters["tokens"] = tokens;
  state.counters["touched_experts"] = touched;
  state.SetLabel(std::string(path_name(path)) + " gate_up + down, top 8 of 384 experts, TP " + std::to_string(tp));
}

void add(const std::string& name, std::function<void(benchmark::State&)> fn) {
  benchmark::RegisterBenchmark(name.c_str(), std::move(fn))
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond)
      ->Iterations(20);
}

}  // namespace

void register_expert_int4_benchmarks(RankContext& ctx) {
  g_int4 = new Int4BenchState;
  g_int4->device = ctx.rank;
  const std::pair<const char*, Proj> projs[] = {{"gate_up", Proj::gate_up}, {"down", Proj::down}};
  // Paths of one shape one after another: a fair side-by-side within a run.
  for (const auto& [proj_name, proj] : projs)
    for (int tokens : {1, 4, 16, 64, 256})
      for (Path path : {Path::int4_grouped, Path::int4_prefill, Path::bf16_grouped, Path::bf16_cublaslt}) {
        const Proj pr = proj;
        add(std::string("expert_int4/") + path_name(path) + "/" + proj_name + "/tokens:" + std::to_string(tokens),
            [path, pr, tokens](benchmark::State& st) { bm_single(st, path, pr, tokens, -1); });
      }
  for (int v = 0; v < gpu::tuning::expert_gemm_int4_grouped_variants(); ++v)
    for (const auto& [proj_name, proj] : projs)
      for (int tokens : {1, 4, 16}) {
        const Proj pr = proj;
        add(std::string("expert_int4_variant/") + gpu::tuning::expert_gemm_int4_grouped_variant_name(v) + "/" +
                proj_name + "/tokens:" + std::to_string(tokens),
            [v, pr, tokens](benchmark::State& st) { bm_single(st, Path::int4_variant, pr, tokens, v); });
      }
  for (int tp : {1, 2, 8})
    for (int tokens : {1, 8, 64, 1024, 4096})
      for (Path path : {Path::int4_grouped, Path::int4_prefill}) {
        if (tokens <= 64 && path == Path::int4_prefill) continue;  // decode: the grouped kernel's case
        add(std::string("expert_int4/moe/") + path_name(path) + "/tp:" + std::to_string(tp) + "/tokens:" +
                std::to_string(tokens),
            [path, tp, tokens](benchmark::State& st) { bm_moe(st, path, tp, tokens); });
      }
}

}  // namespace tpb::bench
