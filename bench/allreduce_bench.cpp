// Allreduce microbenchmarks: every GPU backend (nccl, custom-oneshot, custom-twoshot, auto),
// bf16, 1 KiB .. max bytes (x2 steps), eager launches and CUDA-graph replay. Timing follows
// the GPU recipe (STYLE.md 12): device events around a batch of `ops` collectives, manual
// time per collective, warm-up first. Counters as nccl-tests defines them:
//   algbw = bytes / mean time,  busbw = algbw * 2(n-1)/n  (GB/s, 1e9 bytes; tpb/bandwidth.h).
// Every rank runs the same benchmarks with fixed iterations so the collectives pair up; a
// bootstrap barrier before each timed loop lines the ranks up on the host.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "bench/bench_ranks.h"
#include "reference_engine/comm/factory.h"
#if TPB_HAVE_NCCL
#include "reference_engine/comm/nccl/nccl_communicator.h"
#endif
#include "tpb/bandwidth.h"
#include "tpb/cuda_check.h"
#include "tpb/kernels/device.h"

namespace tpb::bench {

namespace {

struct AllreduceBenchState {
  RankContext* ctx = nullptr;
  int device = 0;  // this rank's GPU (bench_device)
  std::size_t max_bytes = 0;
  cudaStream_t stream = nullptr;
  void* in = nullptr;
  void* out = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  std::map<std::string, std::unique_ptr<Communicator>> comms;

  Communicator& comm(const std::string& backend) {
    auto it = comms.find(backend);
    if (it != comms.end()) return *it->second;
    CommOptions o;
    o.device = device;
    o.max_bytes = max_bytes;  // custom buffers cover the whole sweep
    o.timeout_s = 120;
    auto& c = comms[backend] = make_communicator(backend, *ctx->bootstrap, o);
    return *c;
  }
};

AllreduceBenchState* g_state = nullptr;  // one per rank process; lives until exit

// Ranks beyond the visible GPUs share them (shared placement, docs/placement.md): rank r on GPU
// r % count, each with an NCCL host id of its own, without which NCCL refuses two ranks on one
// GPU. Timings there compare backends and builds side by side (under MPS), never a GPU per rank.
int bench_device(const RankContext& ctx) {
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus < 1 || ctx.world <= gpus) return ctx.rank;
  ::setenv("NCCL_HOSTID", ("tpb-bench-rank" + std::to_string(ctx.rank)).c_str(), 1);
  return ctx.rank % gpus;
}

// Collectives per timed batch: enough that a batch is >= ~100 us, so event resolution and
// host launch skew between ranks stay small against it.
int ops_per_batch(std::size_t bytes) {
  if (bytes <= (256u << 10)) return 50;
  if (bytes <= (4u << 20)) return 20;
  if (bytes <= (32u << 20)) return 5;
  return 2;
}

void bm_allreduce(benchmark::State& state, const std::string& backend, std::size_t bytes, bool graph) {
  AllreduceBenchState& g = *g_state;
  Communicator& comm = g.comm(backend);
  const std::size_t count = bytes / 2;  // bf16
  const int ops = ops_per_batch(bytes);
  cudaGraphExec_t exec = nullptr;
  if (graph) {
    cudaGraph_t gr;
    TPB_CUDA_CHECK(cudaStreamBeginCapture(g.stream, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < ops; ++i) comm.all_reduce(g.in, g.out, count, DType::bf16, g.stream);
    TPB_CUDA_CHECK(cudaStreamEndCapture(g.stream, &gr));
    TPB_CUDA_CHECK(cudaGraphInstantiate(&exec, gr, 0));
    TPB_CUDA_CHECK(cudaGraphDestroy(gr));
  }
  auto batch = [&] {
    if (graph)
      TPB_CUDA_CHECK(cudaGraphLaunch(exec, g.stream));
    else
      for (int i = 0; i < ops; ++i) comm.all_reduce(g.in, g.out, count, DType::bf16, g.stream);
  };
  for (int w = 0; w < 3; ++w) batch();  // warm-up: first-touch, NCCL lazy setup, graph upload
  TPB_CUDA_CHECK(cudaStreamSynchronize(g.stream));
  g.ctx->bootstrap->barrier();

  double total_s = 0;
  for (auto _ : state) {
    TPB_CUDA_CHECK(cudaEventRecord(g.start, g.stream));
    batch();
    TPB_CUDA_CHECK(cudaEventRecord(g.stop, g.stream));
    TPB_CUDA_CHECK(cudaEventSynchronize(g.stop));
    float ms = 0;
    TPB_CUDA_CHECK(cudaEventElapsedTime(&ms, g.start, g.stop));
    const double per_op_s = ms * 1e-3 / ops;
    state.SetIterationTime(per_op_s);
    total_s += per_op_s;
  }
  if (exec != nullptr) TPB_CUDA_CHECK(cudaGraphExecDestroy(exec));
  const int n = g.ctx->world;
  const double mean_s = total_s / static_cast<double>(state.iterations());
  const double algbw = algbw_GBps(static_cast<double>(bytes), mean_s);  // tpb/bandwidth.h, as the suite's records
  state.counters["bytes"] = static_cast<double>(bytes);
  state.counters["us_per_op"] = mean_s * 1e6;
  state.counters["algbw_GBps"] = algbw;
  state.counters["busbw_GBps"] = algbw * allreduce_bus_factor(n);
  state.counters["ops_per_batch"] = ops;
  std::string label = comm.name();
  if (!comm.fallback_reason().empty()) label += " (" + comm.fallback_reason() + ")";
  state.SetLabel(label);
}

}  // namespace

void register_allreduce_benchmarks(RankContext& ctx, std::size_t max_bytes, const std::string& topology) {
  if (ctx.world < 2) return;  // an allreduce of one rank measures nothing useful
  g_state = new AllreduceBenchState;
  g_state->ctx = &ctx;
  g_state->max_bytes = max_bytes;
  g_state->device = bench_device(ctx);
  TPB_CUDA_CHECK(cudaSetDevice(g_state->device));
  TPB_CUDA_CHECK(cudaStreamCreateWithFlags(&g_state->stream, cudaStreamNonBlocking));
  TPB_CUDA_CHECK(cudaMalloc(&g_state->in, max_bytes));
  TPB_CUDA_CHECK(cudaMalloc(&g_state->out, max_bytes));
  // Non-zero data (zeros can run faster than real data): a bf16 pattern of small values.
  std::vector<std::uint16_t> pattern(1 << 20);
  for (std::size_t i = 0; i < pattern.size(); ++i) pattern[i] = float_to_bf16(static_cast<float>((i * 7919) % 97) / 64.f - 0.75f);
  for (std::size_t off = 0; off < max_bytes; off += pattern.size() * 2)
    TPB_CUDA_CHECK(cudaMemcpy(static_cast<char*>(g_state->in) + off, pattern.data(),
                              std::min(pattern.size() * 2, max_bytes - off), cudaMemcpyHostToDevice));
  TPB_CUDA_CHECK(cudaEventCreate(&g_state->start));
  TPB_CUDA_CHECK(cudaEventCreate(&g_state->stop));

  const auto gpus = visible_gpus();
  benchmark::AddCustomContext("gpu", gpus.empty() ? "none" : gpus[0].name);
  benchmark::AddCustomContext("gpu_count", std::to_string(gpus.size()));
  benchmark::AddCustomContext("ranks", std::to_string(ctx.world));
  benchmark::AddCustomContext("cuda_driver", cuda_driver_version());
  benchmark::AddCustomContext("cuda_runtime", cuda_runtime_version());
#if TPB_HAVE_NCCL
  benchmark::AddCustomContext("nccl", nccl_runtime_version());
#endif
  // Google Benchmark writes context strings into its JSON unescaped: keep printable ASCII
  // (nvidia-smi's table has tabs, newlines and terminal escapes).
  std::string topo;
  for (std::size_t i = 0; i < topology.size(); ++i) {
    const char c = topology[i];
    if (c == '\x1b') {  // skip an escape sequence up to its final letter
      while (i < topology.size() && !std::isalpha(static_cast<unsigned char>(topology[i]))) ++i;
      continue;
    }
    if (c == '\n') topo += " | ";
    else if (c == '\t') topo += ' ';
    else if (c >= 32 && c < 127 && c != '"' && c != '\\') topo += c;
  }
  benchmark::AddCustomContext("topology", topo.empty() ? "unknown" : topo);
  std::string p2p;
  const int gpu_count = static_cast<int>(gpus.size());
  for (int a = 0; a < std::min(ctx.world, gpu_count); ++a)
    for (int b = 0; b < std::min(ctx.world, gpu_count); ++b)
      if (a != b) {
        int can = 0;
        (void)cudaDeviceCanAccessPeer(&can, a, b);
        p2p += std::to_string(a) + "->" + std::to_string(b) + (can ? ":yes " : ":no ");
      }
  benchmark::AddCustomContext("peer_access", p2p);
  for (const char* var : {"NCCL_NVLS_ENABLE", "NCCL_ALGO", "NCCL_PROTO", "TPB_ALLREDUCE_THRESHOLDS"})
    if (const char* v = std::getenv(var)) benchmark::AddCustomContext(var, v);

  std::vector<std::string> backends = backend_names(BackendDevice::gpu);  // the backend table's GPU rows
  if (const char* only = std::getenv("TPB_BENCH_BACKENDS")) {  // comma-separated subset
    backends.clear();
    std::string s = only;
    for (std::size_t pos = 0; pos <= s.size();) {
      const std::size_t comma = s.find(',', pos);
      const std::string b = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
      if (!b.empty()) backends.push_back(b);
      if (comma == std::string::npos) break;
      pos = comma + 1;
    }
  }
  for (const std::string& backend : backends)
    for (bool graph : {false, true})
      for (std::size_t bytes = 1024; bytes <= max_bytes; bytes *= 2) {
        const std::string name = "allreduce/" + backend + "/bf16/" + (graph ? "graph" : "eager") + "/" + std::to_string(bytes);
        benchmark::RegisterBenchmark(name.c_str(), [backend, bytes, graph](benchmark::State& st) { bm_allreduce(st, backend, bytes, graph); })
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond)
            ->Iterations(bytes <= (32u << 20) ? 20 : 8);
      }
}

}  // namespace tpb::bench
