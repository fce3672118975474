// One Kimi-K2.5 MoE decoder layer (MLA attention over the latent cache, router, shared expert,
// 8 of 384 routed experts, full width) in decode, as rank 0 of a TP-way group runs it: issue
// 5's decode target is <= 1.5 x the time to read that rank's touched weights at batch 1, TP2.
//
// Method: the layer's time is the difference of two GpuEngines' graph-replayed decode steps,
// Kimi-K2.5 with 2 MoE layers (first_k_dense_replace 0) minus Kimi-K2.5 with 1, the same
// synthetic weights and the same synthetic KV context (fill_kv_synthetic): the embedding,
// the final norm and the lm_head cancel, and what is left is one layer with its norms. The
// weights it read are the same difference of the steps' read bytes (the engine's roofline:
// step_fixed_weight_bytes + routed reads x routed_expert_bytes, the routed experts counted
// on the device as the router chose them). Each step time is the median of kSteps replays,
// each decoding other tokens (so other experts). Measured on an H200 (TP2, batch 1): the
// 2-layer step repeats within 1 % across processes, the 1-layer step by up to 45 us, so
// compare variants within one run (--benchmark_repetitions), not across runs.
//
// TP > 1 on one GPU: rank 0's shard runs alone over a LocalCommunicator of size tp that
// communicates nothing (all_reduce leaves the rank's partial sums, all_gather copies only
// the rank's own slice). The time is therefore the rank's compute alone, without its two
// allreduces of batch x 7168 bf16 per layer (the allreduce benchmarks measure those on a
// multi-GPU machine), and the logits are not a model's: nothing reads them.
//
// At batch 1 each TP size runs twice: dense one-row products through the split-K gemv (the
// engine's default) and through cuBLASLt (name suffix /cublaslt), side by side.
//
// Counters: layer_us, layer_weight_bytes, routed_reads (experts the layer's router touched
// per step), weight_read_us (layer_weight_bytes at the copy bandwidth measured in this
// process), x_weight_read_time = layer_us / weight_read_us, and both engines' step_us.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "bench/gemm_bench.h"
#include "bench/layer_bench.h"
#include "reference_engine/comm/local/local_communicator.h"
#include "reference_engine/config/model_config.h"
#include "reference_engine/gpu/gpu_engine.h"
#include "reference_engine/weights/weight_source.h"
#include "tpb/cuda_check.h"
#include "tpb/kernels/event_timing.h"

namespace tpb::bench {

namespace {

constexpr int kSteps = 60;
constexpr std::int64_t kContext = 8192;

struct StepMeasure {
  double step_us = 0;           // median graph replay
  double weight_bytes = 0;      // read per step (roofline)
  double routed_reads = 0;      // routed experts read per step, all MoE layers
};

StepMeasure measure_decode(int moe_layers, int tp, std::int64_t batch, bool gemv) {
  ModelConfig config = load_model_config_by_name("kimi-k2.5");
  apply_overrides(config, {{"num_hidden_layers", moe_layers}, {"first_k_dense_replace", 0}}, "layer_bench",
                  "$.overrides");
  LocalCommunicator comm(tp);
  auto weights = make_synthetic_weights(1234);
  GpuEngineOptions o;
  o.max_batch = batch;
  o.max_len = kContext + 1;
  o.max_prefill_tokens = batch;
  o.cuda_graph = true;
  o.last_position_logits = true;
  o.one_row_gemv = gemv;
  GpuEngine engine(config, Shard{0, tp}, comm, *weights, o);
  // Each step decodes other tokens (the graph reads them from its input buffers), so the
  // median is over routings: one fixed set of 8 experts per layer made the two engines'
  // difference depend on where those experts happen to sit.
  std::vector<std::int64_t> next(static_cast<std::size_t>(batch));
  int step_index = 0;
  engine.fill_kv_synthetic(batch, kContext, 5);
  auto step = [&] {
    for (std::int64_t b = 0; b < batch; ++b)
      next[static_cast<std::size_t>(b)] = (b * 7919 + 17 + std::int64_t{step_index} * 104729) % config.vocab_size;
    ++step_index;
    engine.rewind(kContext);
    engine.decode(next);
  };
  for (int i = 0; i < 3; ++i) step();  // eager, capture, replay
  engine.synchronize();
  cudaEvent_t start = nullptr, stop = nullptr;
  TPB_CUDA_CHECK(cudaEventCreate(&start));
  TPB_CUDA_CHECK(cudaEventCreate(&stop));
  const std::int64_t reads_before = engine.routed_expert_reads();
  std::vector<double> us;
  for (int i = 0; i < kSteps; ++i) us.push_back(1e3 * event_elapsed_ms(engine.stream(), start, stop, step));
  StepMeasure m;
  m.routed_reads = static_cast<double>(engine.routed_expert_reads() - reads_before) / kSteps;
  TPB_CUDA_CHECK(cudaEventDestroy(start));
  TPB_CUDA_CHECK(cudaEventDestroy(stop));
  std::sort(us.begin(), us.end());
  m.step_us = us[us.size() / 2];
  m.weight_bytes = static_cast<double>(engine.step_fixed_weight_bytes()) +
                   m.routed_reads * static_cast<double>(engine.routed_expert_bytes());
  return m;
}

void bm_moe_layer(benchmark::State& state, int device, int tp, std::int64_t batch, bool gemv) {
  TPB_CUDA_CHECK(cudaSetDevice(device));
  const double copy_GBps = device_limits(device).copy_GBps;
  const StepMeasure one = measure_decode(1, tp, batch, gemv);  // each engine is freed before the next
  const StepMeasure two = measure_decode(2, tp, batch, gemv);
  const double layer_us = two.step_us - one.step_us;
  const double layer_bytes = two.weight_bytes - one.weight_bytes;
  const double read_us = layer_bytes / (copy_GBps * 1e3);
  for (auto _ : state) state.SetIterationTime(layer_us * 1e-6);
  state.counters["tp"] = tp;
  state.counters["batch"] = static_cast<double>(batch);
  state.counters["context"] = static_cast<double>(kContext);
  state.counters["layer_us"] = layer_us;
  state.counters["layer_weight_bytes"] = layer_bytes;
  state.counters["routed_reads"] = two.routed_reads - one.routed_reads;
  state.counters["copy_GBps"] = copy_GBps;
  state.counters["weight_read_us"] = read_us;
  state.counters["x_weight_read_time"] = layer_us / read_us;
  state.counters["step_us_1layer"] = one.step_us;
  state.counters["step_us_2layers"] = two.step_us;
  state.SetLabel(std::string(gemv ? "" : "cuBLASLt at one row; ") +
                 (tp == 1 ? "one GPU" : "rank 0 of TP" + std::to_string(tp) + " alone: compute only, no allreduce"));
}

}  // namespace

void register_layer_benchmarks(RankContext& ctx) {
  const int device = ctx.rank;
  for (int tp : {1, 2, 8})
    for (std::int64_t batch : {std::int64_t{1}, std::int64_t{8}, std::int64_t{64}}) {
      // At batch 1 also with every dense product on cuBLASLt: the one-row gemv's share.
      for (bool gemv : {true, false}) {
        if (!gemv && batch != 1) continue;
        const std::string name = "layer/moe_decode/tp:" + std::to_string(tp) + "/batch:" + std::to_string(batch) +
                                 "/context:8192" + (gemv ? "" : "/cublaslt");
        benchmark::RegisterBenchmark(name.c_str(), [device, tp, batch, gemv](benchmark::State& st) {
          bm_moe_layer(st, device, tp, batch, gemv);
        })
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond)
            ->Iterations(1);
      }
    }
}

}  // namespace tpb::bench
