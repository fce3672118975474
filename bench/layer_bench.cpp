// The layers of a Kimi-K2.5 decode step (the 3-layer full-width slice of decode-1gpu: a dense
// layer, then two MoE layers with all 384 experts) as rank 0 of a TP-way group runs them, each
// against the time to read the weights it touches. Issue 20's targets: one MoE layer at the
// TP2 shard <= 1.30 x its weight-read time at batch 1, <= 1.20 x at batch 8 and 64.
//
// Method: one engine, its decode step replayed as a CUDA graph with phase timing on
// (GpuEngine::set_phase_timing: event-record nodes at the step's phase boundaries), so each
// layer is timed inside the step it runs in. (The earlier method subtracted a 1-layer
// engine's step from a 2-layer engine's: the 1-layer step moved by up to 45 us between
// processes.) Each of kSteps replays decodes other tokens, so other experts; each layer's
// weight bytes are its fixed weights (GpuEngine::layer_fixed_weight_bytes) plus the routed
// experts its router chose in that step (counted on the device) x routed_expert_bytes, and
// each ratio is taken per step, then the median over the steps.
//
// TP > 1 on one GPU: rank 0's shard runs alone over a LocalCommunicator of size tp that
// communicates nothing (all_reduce leaves the rank's partial sums, all_gather copies only
// the rank's own slice). The time is therefore the rank's compute alone, without its two
// allreduces of batch x 7168 bf16 per layer (the allreduce benchmarks measure those), and the
// logits are not a model's: nothing reads them.
//
// At batch 1 each TP size runs twice: dense one-row products through the split-K gemv (the
// engine's default) and through cuBLASLt (name suffix /cublaslt), side by side. Every shape
// also runs with INT4 routed experts (suffix /int4, W4A16: Kimi-K2.5 as deployed).
//
// Counters (medians over the steps): moe_layer_us (the MoE layers' mean), moe_x_weight_read_time,
// dense_layer_us (the dense layers' mean), dense_x_weight_read_time, head_us and head_x_weight_read_time (final norm,
// lm_head, all_gather), step_us and step_x_weight_read_time (the whole step, embedding included),
// routed_reads (per MoE layer and step), copy_GBps, and phase_timing_cost: the median step with
// the events over the median step without them, the same engine and tokens (their own cost;
// the steps without them run first, so a drift between the two loops counts in it).
//
// TPB_BENCH_PROFILE_STEP=1: after the timed steps, one more replay between cudaProfilerStart()
// and cudaProfilerStop(), for `ncu --profile-from-start off` (each kernel of one step).
#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
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

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

void bm_decode_layers(benchmark::State& state, int device, int tp, std::int64_t batch, bool gemv, Quantization quant) {
  TPB_CUDA_CHECK(cudaSetDevice(device));
  const double copy_GBps = device_limits(device).copy_GBps;
  const auto read_us = [&](double bytes) { return bytes / (copy_GBps * 1e3); };
  ModelConfig config = load_model_config_by_name("kimi-k2.5");
  apply_overrides(config, {{"num_hidden_layers", 3}}, "layer_bench", "$.overrides");
  config.quant = quant;  // the preset's quantization_config describes its checkpoint: chosen here
  const std::int64_t L = config.num_hidden_layers;
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
  engine.fill_kv_synthetic(batch, kContext, 5);
  std::vector<std::int64_t> next(static_cast<std::size_t>(batch));
  int step_index = 0;
  auto step = [&] {
    for (std::int64_t b = 0; b < batch; ++b)
      next[static_cast<std::size_t>(b)] = (b * 7919 + 17 + std::int64_t{step_index} * 104729) % config.vocab_size;
    ++step_index;
    engine.rewind(kContext);
    engine.decode(next);
  };
  cudaEvent_t start = nullptr, stop = nullptr;
  TPB_CUDA_CHECK(cudaEventCreate(&start));
  TPB_CUDA_CHECK(cudaEventCreate(&stop));
  // The plain step first (graph without the phase events), then the same tokens with them.
  for (int i = 0; i < 3; ++i) step();  // eager, capture, replay
  std::vector<double> plain_us;
  const int first_timed = step_index;
  for (int i = 0; i < kSteps; ++i) plain_us.push_back(1e3 * event_elapsed_ms(engine.stream(), start, stop, step));
  engine.set_phase_timing(true);
  step_index = first_timed - 3;
  for (int i = 0; i < 3; ++i) step();
  std::vector<double> step_us, moe_us, moe_x, dense_us, dense_x, head_us, head_x, step_x, reads_per_layer, timed_us;
  std::vector<std::int64_t> reads = engine.routed_expert_reads_by_layer();
  const double head_bytes = static_cast<double>(engine.step_fixed_weight_bytes());
  double layers_fixed = 0;
  for (std::int64_t l = 0; l < L; ++l) layers_fixed += static_cast<double>(engine.layer_fixed_weight_bytes(l));
  const double head_fixed = head_bytes - layers_fixed;  // final norm + lm_head
  const double expert_bytes = static_cast<double>(engine.routed_expert_bytes());
  for (int i = 0; i < kSteps; ++i) {
    timed_us.push_back(1e3 * event_elapsed_ms(engine.stream(), start, stop, step));
    const GpuEngine::StepPhases p = engine.last_step_phases();
    const std::vector<std::int64_t> now = engine.routed_expert_reads_by_layer();
    double moe_t = 0, moe_b = 0, dense_t = 0, dense_b = 0, step_b = head_fixed;
    int moe_layers = 0, dense_layers = 0;
    for (std::int64_t l = 0; l < L; ++l) {
      const double r = static_cast<double>(now[l] - reads[l]);
      const double bytes = static_cast<double>(engine.layer_fixed_weight_bytes(l)) + r * expert_bytes;
      step_b += bytes;
      if (config.is_moe_layer(l)) {
        moe_t += p.layer_us[l];
        moe_b += bytes;
        ++moe_layers;
        reads_per_layer.push_back(r);
      } else {
        dense_t += p.layer_us[l];
        dense_b += bytes;
        ++dense_layers;
      }
    }
    reads = now;
    step_us.push_back(p.step_us);
    step_x.push_back(p.step_us / read_us(step_b));
    head_us.push_back(p.head_us);
    head_x.push_back(p.head_us / read_us(head_fixed));
    if (moe_layers > 0) {
      moe_us.push_back(moe_t / moe_layers);
      moe_x.push_back(moe_t / read_us(moe_b));
    }
    if (dense_layers > 0) {
      dense_us.push_back(dense_t / dense_layers);
      dense_x.push_back(dense_t / read_us(dense_b));
    }
  }
  if (std::getenv("TPB_BENCH_PROFILE_STEP") != nullptr) {
    engine.synchronize();
    TPB_CUDA_CHECK(cudaProfilerStart());
    step();
    engine.synchronize();
    TPB_CUDA_CHECK(cudaProfilerStop());
  }
  TPB_CUDA_CHECK(cudaEventDestroy(start));
  TPB_CUDA_CHECK(cudaEventDestroy(stop));
  const double moe_layer_us = median(moe_us);
  for (auto _ : state) state.SetIterationTime(moe_layer_us * 1e-6);
  state.counters["tp"] = tp;
  state.counters["batch"] = static_cast<double>(batch);
  state.counters["context"] = static_cast<double>(kContext);
  state.counters["copy_GBps"] = copy_GBps;
  state.counters["moe_layer_us"] = moe_layer_us;
  state.counters["moe_x_weight_read_time"] = median(moe_x);
  state.counters["routed_reads"] = median(reads_per_layer);
  state.counters["dense_layer_us"] = median(dense_us);
  state.counters["dense_x_weight_read_time"] = median(dense_x);
  state.counters["head_us"] = median(head_us);
  state.counters["head_x_weight_read_time"] = median(head_x);
  state.counters["step_us"] = median(step_us);
  state.counters["step_x_weight_read_time"] = median(step_x);
  state.counters["step_us_plain"] = median(plain_us);
  state.counters["phase_timing_cost"] = median(timed_us) / median(plain_us);
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
        // bf16 (the name without a suffix, as recorded before) and INT4 routed experts (/int4:
        // Kimi-K2.5 as deployed; issue 33's targets: its MoE layer <= 1.3 x its weight-read time
        // at batch 1 and 8, its step at TP 1 batch 1 <= 1.15 x).
        for (Quantization quant : {Quantization::bf16, Quantization::int4}) {
          if (quant == Quantization::int4 && !gemv) continue;
          const std::string name = "layer/moe_decode/tp:" + std::to_string(tp) + "/batch:" + std::to_string(batch) +
                                   "/context:8192" + (gemv ? "" : "/cublaslt") +
                                   (quant == Quantization::int4 ? "/int4" : "");
          benchmark::RegisterBenchmark(name.c_str(), [device, tp, batch, gemv, quant](benchmark::State& st) {
            bm_decode_layers(st, device, tp, batch, gemv, quant);
          })
              ->UseManualTime()
              ->Unit(benchmark::kMicrosecond)
              ->Iterations(1);
        }
      }
    }
}

}  // namespace tpb::bench
