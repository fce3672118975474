// Dense-GEMM microbenchmarks: tpb::gpu::Linear (cuBLASLt) on the Kimi-K2.5 projections at
// TP2, decode rows 1 / 64 / 256 and prefill rows 8192 (lm_head at decode rows only; it runs
// f32_out as the engine does), and at one row the split-K gemv (gemv.h) side by side. Timing as STYLE.md 12: device events around a batch of `ops`
// products, manual time per product, warm-up first.
//
// Counters: flops = 2·rows·out·in; bytes = weights + x + y (each read or written once, the
// least any implementation moves); TFLOPs, GBps; and the ratios to the limits measured in
// this process: vs_cublas_rate = TFLOPs / cuBLAS bf16 rate at 8192^3 (the prefill target is
// >= 0.6), vs_copy_bw = GBps / device copy bandwidth (decode is bound by weight bytes: near
// 1 is the roofline). Decode weights rotate over copies totalling >= 256 MiB so that they
// stream from HBM as in a real step (50 MiB of L2 would otherwise hold them).
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "bench/device_timing.h"
#include "bench/gemm_bench.h"
#include "tpb/cuda_check.h"
#include "tpb/dtype.h"
#include "tpb/kernels/gpu/gemv.h"
#include "tpb/kernels/gpu/linear.h"
#include "tpb/kernels/hw_probes.h"

namespace tpb::bench {

const DeviceLimits& device_limits(int device) {
  static DeviceLimits limits;
  static bool measured = false;
  if (!measured) {
    limits.copy_GBps = gpu_copy_bandwidth(device, std::size_t{1} << 30, 10).value;
    limits.gemm_TFLOPs = gpu_bf16_gemm_rate(device, 8192, 8192, 8192, 10).value;
    measured = true;
    TPB_CUDA_CHECK(cudaSetDevice(device));
  }
  return limits;
}

void fill_random_bf16(void* dst, std::size_t count, std::uint32_t seed) {
  const std::size_t block = std::min<std::size_t>(count, std::size_t{1} << 20);
  std::vector<std::uint16_t> h(block);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  for (auto& b : h) {
    float v = d(rng);
    if (v == 0.f) v = 0.5f;
    b = float_to_bf16(v);
  }
  char* p = static_cast<char*>(dst);
  TPB_CUDA_CHECK(cudaMemcpy(p, h.data(), block * 2, cudaMemcpyHostToDevice));
  for (std::size_t done = block; done < count;) {  // doubling device-to-device copies
    const std::size_t n = std::min(done, count - done);
    TPB_CUDA_CHECK(cudaMemcpy(p + done * 2, p, n * 2, cudaMemcpyDeviceToDevice));
    done += n;
  }
  TPB_CUDA_CHECK(cudaDeviceSynchronize());
}

namespace {

struct GemmShape {
  const char* name;
  std::int64_t out, in;
  bool f32_out;
};

// Kimi-K2.5 at TP2: 64 heads / 2 = 32 per rank, qk 192, v 128, dense intermediate 18432 / 2,
// shared expert 2048 / 2, vocab 163840 / 2.
const GemmShape kShapes[] = {
    {"q_a", 1536, 7168, false},           {"q_b", 32 * 192, 1536, false},
    {"kv_a", 576, 7168, false},           {"o_proj", 7168, 32 * 128, false},
    {"mlp_gate_up", 2 * 9216, 7168, false}, {"mlp_down", 7168, 9216, false},
    {"shared_gate_up", 2 * 1024, 7168, false}, {"shared_down", 7168, 1024, false},
    {"lm_head", 163840 / 2, 7168, true},
};
constexpr std::int64_t kMaxRows = 8192;
constexpr std::int64_t kMaxIn = 9216;
constexpr std::size_t kWeightElems = std::size_t{163840 / 2} * 7168 + (std::size_t{64} << 20);  // lm_head + slack
constexpr std::size_t kYBytes = std::size_t{kMaxRows} * 2 * 9216 * 2;
constexpr double kRotateBytes = 256.0 * (1 << 20);

struct GemmBenchState {
  int device = 0;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  __nv_bfloat16* w = nullptr;
  __nv_bfloat16* x = nullptr;
  void* y = nullptr;
  std::unique_ptr<gpu::Linear> linear;
  bool ready = false;

  // Allocation and fills happen on first use, so that a filter excluding every GEMM
  // benchmark costs nothing.
  void prepare() {
    if (ready) return;
    TPB_CUDA_CHECK(cudaSetDevice(device));
    TPB_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    TPB_CUDA_CHECK(cudaEventCreate(&start));
    TPB_CUDA_CHECK(cudaEventCreate(&stop));
    TPB_CUDA_CHECK(cudaMalloc(&w, kWeightElems * 2));
    TPB_CUDA_CHECK(cudaMalloc(&x, std::size_t{kMaxRows} * kMaxIn * 2));
    TPB_CUDA_CHECK(cudaMalloc(&y, kYBytes));
    fill_random_bf16(w, kWeightElems, 11);
    fill_random_bf16(x, std::size_t{kMaxRows} * kMaxIn, 12);
    linear = std::make_unique<gpu::Linear>();
    linear->set_one_row_gemv(false);  // cuBLASLt at every shape; the gemv variants call gemv directly
    ready = true;
  }
};

GemmBenchState* g_gemm = nullptr;  // lives until exit

void bm_gemm(benchmark::State& state, GemmShape s, std::int64_t rows, bool gemv) {
  GemmBenchState& g = *g_gemm;
  g.prepare();
  const DeviceLimits& lim = device_limits(g.device);
  const std::int64_t out = s.out, in = s.in;
  const std::size_t w_elems = static_cast<std::size_t>(out * in);
  const std::size_t w_step = (w_elems + 127) / 128 * 128;  // 256-byte aligned copies
  const double w_bytes = 2.0 * static_cast<double>(w_elems);
  const int copies = static_cast<int>(std::max<std::size_t>(
      1, std::min<std::size_t>(kWeightElems / w_step, static_cast<std::size_t>(std::ceil(kRotateBytes / w_bytes)))));
  const double flops = 2.0 * static_cast<double>(rows) * static_cast<double>(out) * static_cast<double>(in);
  const double bytes = w_bytes + 2.0 * static_cast<double>(rows * in) +
                       (s.f32_out ? 4.0 : 2.0) * static_cast<double>(rows * out);
  // Products per timed batch: ~300 us of work at H200-class rates, 1..64.
  const double est_s = std::max(flops / 600e12, bytes / 4e12);
  const int ops = static_cast<int>(std::clamp(300e-6 / est_s, 1.0, 64.0));

  auto batch = [&] {
    for (int i = 0; i < ops; ++i) {
      const __nv_bfloat16* w = g.w + static_cast<std::size_t>(i % copies) * w_step;
      if (gemv && s.f32_out)
        gpu::gemv_f32_out(g.x, w, static_cast<float*>(g.y), in, out, g.stream);
      else if (gemv)
        gpu::gemv_bf16_out(g.x, w, static_cast<__nv_bfloat16*>(g.y), in, out, g.stream);
      else if (s.f32_out)
        g.linear->f32_out(g.x, in, w, static_cast<float*>(g.y), out, rows, in, out, g.stream);
      else
        g.linear->bf16_out(g.x, in, w, static_cast<__nv_bfloat16*>(g.y), out, rows, in, out, g.stream);
    }
  };
  for (int wu = 0; wu < 2; ++wu) batch();  // algorithm choice, first touch
  TPB_CUDA_CHECK(cudaStreamSynchronize(g.stream));

  const double mean_s = time_per_op_s(state, g.stream, g.start, g.stop, ops, batch);
  const double tflops = flops / mean_s / 1e12, gbps = bytes / mean_s / 1e9;
  state.counters["rows"] = static_cast<double>(rows);
  state.counters["out"] = static_cast<double>(out);
  state.counters["in"] = static_cast<double>(in);
  state.counters["us_per_op"] = mean_s * 1e6;
  state.counters["flops"] = flops;
  state.counters["bytes"] = bytes;
  state.counters["TFLOPs"] = tflops;
  state.counters["GBps"] = gbps;
  state.counters["cublas_TFLOPs"] = lim.gemm_TFLOPs;
  state.counters["copy_GBps"] = lim.copy_GBps;
  state.counters["vs_cublas_rate"] = tflops / lim.gemm_TFLOPs;
  state.counters["vs_copy_bw"] = gbps / lim.copy_GBps;
  state.counters["weight_copies"] = copies;
  state.counters["ops_per_batch"] = ops;
  state.SetLabel(std::string(rows >= 1024 ? "prefill" : "decode") + (s.f32_out ? " f32_out" : " bf16_out") +
                 (gemv ? " gemv" : " cublasLt"));
}

}  // namespace

void register_gemm_benchmarks(RankContext& ctx) {
  g_gemm = new GemmBenchState;
  g_gemm->device = ctx.rank;
  for (const GemmShape& s : kShapes)
    for (std::int64_t rows : {std::int64_t{1}, std::int64_t{64}, std::int64_t{256}, kMaxRows}) {
      if (s.f32_out && rows == kMaxRows) continue;  // prefill computes logits of the last token only
      const std::string name = std::string("gemm/") + s.name + "/rows:" + std::to_string(rows);
      benchmark::RegisterBenchmark(name.c_str(), [s, rows](benchmark::State& st) { bm_gemm(st, s, rows, false); })
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond)
          ->Iterations(rows >= kMaxRows ? 5 : 20);
      if (rows == 1)  // the one-row kernel beside cuBLASLt, same weights and rotation
        benchmark::RegisterBenchmark((name + "/gemv").c_str(), [s](benchmark::State& st) { bm_gemm(st, s, 1, true); })
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond)
            ->Iterations(20);
    }
}

}  // namespace tpb::bench
