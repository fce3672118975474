// MLA attention microbenchmarks.
//
// Decode: absorbed-MLA decode attention microbenchmarks: each split kernel of
// tpb::gpu::mla_decode_attention (mla_decode_tuning.h, by name) at Kimi-K2.5 TP 1, 2 and 8
// shapes (64, 32 and 8 heads per rank, kv_lora 512, rope 64) over batch {1, 8, 64, 256}
// x seq_len {1K, 8K, 32K}, every sequence at the full length (max_len = seq_len). Timing as STYLE.md 12:
// device events around a batch of `ops` calls replayed from a CUDA graph (the engine's decode
// mode, and no host launch overhead in the number), manual time per call, warm-up first.
//
// Counters: bytes = the latent cache read (batch * seq_len * 576 * 2, the least any
// implementation reads); GBps = bytes / time; copy_GBps = device-to-device copy bandwidth
// measured in this process (read + write counted, tpb/kernels/hw_probes.h); vs_copy_bw =
// GBps / copy_GBps (1 is the roofline); flops = 2 * batch * heads * seq_len * (576 + 512)
// (scores and the weighted sum, the algorithm's count; the kernel does the weighted sum twice,
// for P = hi + lo, on the tensor cores). Calls rotate over cache copies totalling
// >= 256 MiB so small caches stream from HBM as in a real step, not from the 50 MiB L2.
// attention/mla_decode_splits/...: the engine's kernel at batch 1 and 8, 8K and 32K, with each
// split's key range fixed at 1..16 tiles (counter splits) beside the plan's choice above.
//
// Prefill: causal plain-form MLA prefill attention (tpb::gpu::mla_prefill_attention's kernels,
// each variant of mla_prefill_tuning.h by name) at Kimi-K2.5's widths (q/k 192 = nope 128 +
// rope 64, v 128) for 1 x 8K and 4 x 2K new tokens (past 0), 64 heads (TP1) and 32 (TP2): the
// shapes bench/sdpa_reference.py times torch SDPA's cuDNN backend at. Counter TFLOPs counts
// the useful causal FLOPs, batch * heads * (q_len (q_len + 1) / 2 + past * q_len) * 2 *
// (qk + v): the visible (query, key) pairs, a multiply and an add per width of QK^T and of
// P V; the softmax and the masked work a kernel does anyway are not counted (the convention
// of FlashAttention's and cuDNN's causal numbers). Direct launches, no rotation: the kernel is
// compute-bound and reads each K/V row from L2 once per query block anyway.
#include "bench/device_timing.h"
#include "bench/attention_bench.h"

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "tpb/cuda_check.h"
#include "tpb/dtype.h"
#include "tpb/kernels/gpu/mla_decode.h"
#include "tpb/kernels/gpu/mla_decode_tuning.h"
#include "tpb/kernels/gpu/mla_prefill.h"
#include "tpb/kernels/gpu/mla_prefill_tuning.h"
#include "tpb/kernels/hw_probes.h"
#include "tpb/kernels/mla_decode_split.h"

namespace tpb::bench {

namespace {

constexpr std::int64_t kKvLora = 512, kRope = 64, kRow = kKvLora + kRope;
constexpr std::int64_t kDecodeHeads[] = {64, 32, 8};  // Kimi-K2.5 at TP 1, 2 and 8
constexpr std::int64_t kMaxDecodeHeads = 64;
constexpr std::int64_t kBatches[] = {1, 8, 64, 256};
constexpr std::int64_t kSeqLens[] = {1024, 8192, 32768};
// The split-count sweep (attention/mla_decode_splits/...): the engine's kernel at small batches,
// where the partials (64 heads x 512 fp32 per split) rival the cache they summarise, with each
// split's key range fixed at kSweepTiles 64-key tiles (at most 256 splits).
constexpr std::int64_t kSweepBatches[] = {1, 8};
constexpr std::int64_t kSweepSeqLens[] = {1024, 8192, 32768};
constexpr std::int64_t kSweepTiles[] = {1, 2, 4, 8, 16};
// Whether a split of `tiles` tiles keeps the split count within what the workspace layout takes.
bool sweep_takes(std::int64_t seq_len, std::int64_t tiles) {
  return kernels::mla_decode_splits_of(seq_len, tiles) <= kernels::kMlaDecodeMaxSplits;
}
constexpr double kRotateBytes = 256.0 * (1 << 20);
constexpr std::size_t kHeadroom = std::size_t{2} << 30;  // left free for the workspace, q and the runtime

gpu::MlaDecodeShape decode_shape(std::int64_t heads, std::int64_t batch, std::int64_t seq_len) {
  gpu::MlaDecodeShape s;
  s.batch = batch;
  s.heads = heads;
  s.kv_lora = kKvLora;
  s.rope = kRope;
  s.max_len = seq_len;
  return s;
}

std::size_t cache_bytes(std::int64_t batch, std::int64_t seq_len) {
  return static_cast<std::size_t>(batch * seq_len * kRow) * 2;
}

// Non-zero random bf16 in [-1, 1): a 1 Mi-element block, repeated by doubling device copies.
void fill_random(void* dst, std::size_t count, std::uint32_t seed) {
  const std::size_t block = std::min<std::size_t>(count, std::size_t{1} << 20);
  std::vector<std::uint16_t> h(block);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  for (auto& b : h) {
    const float v = d(rng);
    b = float_to_bf16(v == 0.f ? 0.5f : v);
  }
  char* p = static_cast<char*>(dst);
  TPB_CUDA_CHECK(cudaMemcpy(p, h.data(), block * 2, cudaMemcpyHostToDevice));
  for (std::size_t done = block; done < count;) {
    const std::size_t n = std::min(done, count - done);
    TPB_CUDA_CHECK(cudaMemcpy(p + done * 2, p, n * 2, cudaMemcpyDeviceToDevice));
    done += n;
  }
  TPB_CUDA_CHECK(cudaDeviceSynchronize());
}

struct AttentionBenchState {
  int device = 0;
  bool ready = false;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  __nv_bfloat16* cache = nullptr;
  std::size_t cache_capacity = 0;  // bytes
  __nv_bfloat16* q = nullptr;
  __nv_bfloat16* out = nullptr;
  std::int32_t* seq_lens = nullptr;
  void* workspace = nullptr;
  double copy_GBps = 0;
  bool stream_ready = false;

  // The stream and events the decode and the prefill benchmarks time on, alone: the prefill
  // ones do not need the decode cache, which takes what memory is free.
  void prepare_stream() {
    if (stream_ready) return;
    TPB_CUDA_CHECK(cudaSetDevice(device));
    TPB_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    TPB_CUDA_CHECK(cudaEventCreate(&start));
    TPB_CUDA_CHECK(cudaEventCreate(&stop));
    stream_ready = true;
  }

  // Allocation, fills and the copy probe on first use: a filter excluding every attention
  // benchmark costs nothing.
  void prepare() {
    if (ready) return;
    TPB_CUDA_CHECK(cudaSetDevice(device));
    copy_GBps = gpu_copy_bandwidth(device, std::size_t{1} << 30, 10).value;
    prepare_stream();
    const std::int64_t max_batch = kBatches[std::size(kBatches) - 1];
    std::size_t ws = 0;
    for (std::int64_t h : kDecodeHeads)
      for (std::int64_t b : kBatches)
        for (std::int64_t n : kSeqLens)
          for (int v = 0; v < gpu::tuning::mla_decode_variants(); ++v)
            if (gpu::tuning::mla_decode_variant_supports(v, decode_shape(h, b, n)))
              ws = std::max(ws, gpu::tuning::mla_decode_variant_workspace_bytes(v, decode_shape(h, b, n)));
    for (std::int64_t h : kDecodeHeads)
      for (std::int64_t b : kSweepBatches)
        for (std::int64_t n : kSweepSeqLens)
          for (std::int64_t t : kSweepTiles)
            if (sweep_takes(n, t)) {
              const gpu::MlaDecodeShape s = decode_shape(h, b, n);
              ws = std::max(ws, gpu::tuning::mla_decode_variant_workspace_bytes(
                                    gpu::tuning::mla_decode_default_variant(s), s, t));
            }
    TPB_CUDA_CHECK(cudaMalloc(&workspace, ws));
    TPB_CUDA_CHECK(cudaMalloc(&q, static_cast<std::size_t>(max_batch * kMaxDecodeHeads * kRow) * 2));
    TPB_CUDA_CHECK(cudaMalloc(&out, static_cast<std::size_t>(max_batch * kMaxDecodeHeads * kKvLora) * 2));
    TPB_CUDA_CHECK(cudaMalloc(&seq_lens, static_cast<std::size_t>(max_batch) * sizeof(std::int32_t)));
    fill_random(q, static_cast<std::size_t>(max_batch * kMaxDecodeHeads * kRow), 21);
    // The largest cache of the sweep, or what memory allows; shapes beyond it are skipped.
    std::size_t free_b = 0, total_b = 0;
    TPB_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    const std::size_t want = cache_bytes(max_batch, kSeqLens[std::size(kSeqLens) - 1]);
    cache_capacity = free_b > kHeadroom ? std::min(want, (free_b - kHeadroom) / 256 * 256) : 0;
    if (cache_capacity > 0) {
      TPB_CUDA_CHECK(cudaMalloc(&cache, cache_capacity));
      fill_random(cache, cache_capacity / 2, 22);
    }
    ready = true;
  }
};

AttentionBenchState* g_attn = nullptr;  // lives until exit

// tiles_per_split 0: the plan's split count; else each split's key range fixed at that many tiles.
void bm_decode(benchmark::State& state, int variant, std::int64_t heads, std::int64_t batch, std::int64_t seq_len,
               std::int64_t tiles_per_split = 0) {
  AttentionBenchState& g = *g_attn;
  g.prepare();
  const gpu::MlaDecodeShape shape = decode_shape(heads, batch, seq_len);
  if (!gpu::tuning::mla_decode_variant_supports(variant, shape)) {
    state.SkipWithError("this build, device or head count is not one this kernel takes");
    for (auto _ : state) {
    }
    return;
  }
  const std::size_t bytes = cache_bytes(batch, seq_len);
  if (bytes > g.cache_capacity) {
    state.SkipWithError("not enough device memory for this cache");
    for (auto _ : state) {
    }
    return;
  }
  const std::size_t step = (bytes + 255) / 256 * 256;
  const int copies = static_cast<int>(std::max<std::size_t>(
      1, std::min<std::size_t>(g.cache_capacity / step, static_cast<std::size_t>(std::ceil(kRotateBytes / bytes)))));
  const double flops = 2.0 * static_cast<double>(batch * heads * seq_len) * static_cast<double>(kRow + kKvLora);
  // Calls per timed batch: ~300 us at an H200's copy rate, 1..64.
  const int ops = static_cast<int>(std::clamp(300e-6 / (static_cast<double>(bytes) / 4e12), 1.0, 64.0));

  const std::vector<std::int32_t> lens(static_cast<std::size_t>(batch), static_cast<std::int32_t>(seq_len));
  TPB_CUDA_CHECK(cudaMemcpy(g.seq_lens, lens.data(), lens.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice));
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  TPB_CUDA_CHECK(cudaStreamBeginCapture(g.stream, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < ops; ++i) {
    const char* c = reinterpret_cast<const char*>(g.cache) + static_cast<std::size_t>(i % copies) * step;
    gpu::tuning::mla_decode_variant(variant, g.q, reinterpret_cast<const __nv_bfloat16*>(c), g.seq_lens, shape,
                                    0.1352f, g.workspace, g.out, g.stream, tiles_per_split);
  }
  TPB_CUDA_CHECK(cudaStreamEndCapture(g.stream, &graph));
  TPB_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  TPB_CUDA_CHECK(cudaGraphDestroy(graph));
  for (int wu = 0; wu < 2; ++wu) TPB_CUDA_CHECK(cudaGraphLaunch(exec, g.stream));  // upload, first touch
  TPB_CUDA_CHECK(cudaStreamSynchronize(g.stream));

  const double mean_s = time_per_op_s(state, g.stream, g.start, g.stop, ops,
                                       [&] { TPB_CUDA_CHECK(cudaGraphLaunch(exec, g.stream)); });
  TPB_CUDA_CHECK(cudaGraphExecDestroy(exec));
  const double gbps = static_cast<double>(bytes) / mean_s / 1e9;
  state.counters["batch"] = static_cast<double>(batch);
  state.counters["seq_len"] = static_cast<double>(seq_len);
  state.counters["heads"] = static_cast<double>(heads);
  state.counters["us_per_op"] = mean_s * 1e6;
  state.counters["bytes"] = static_cast<double>(bytes);
  state.counters["GBps"] = gbps;
  state.counters["copy_GBps"] = g.copy_GBps;
  state.counters["vs_copy_bw"] = gbps / g.copy_GBps;
  state.counters["flops"] = flops;
  state.counters["TFLOPs"] = flops / mean_s / 1e12;
  state.counters["cache_copies"] = copies;
  state.counters["ops_per_batch"] = ops;
  state.counters["splits"] =
      static_cast<double>(gpu::tuning::mla_decode_variant_splits(variant, shape, tiles_per_split));
  state.SetLabel(std::string("mla decode, graph replay, ") + gpu::tuning::mla_decode_variant_name(variant));
}

constexpr std::int64_t kPrefillNope = 128, kPrefillRope = 64, kPrefillV = 128;
constexpr std::int64_t kPrefillHeads[] = {64, 32};
struct PrefillSize {
  std::int64_t batch, q_len;
};
constexpr PrefillSize kPrefillSizes[] = {{1, 8192}, {4, 2048}};
constexpr std::int64_t kPrefillMaxTokens = 8192;  // batch * q_len over the sweep
constexpr std::int64_t kPrefillMaxHeads = 64;

// Buffers for the largest prefill shape (about 0.6 GB), filled once, on first use.
struct PrefillBenchState {
  bool ready = false;
  __nv_bfloat16 *q = nullptr, *k_nope = nullptr, *k_rot = nullptr, *v = nullptr, *out = nullptr;

  void prepare() {
    if (ready) return;
    const std::size_t rows = static_cast<std::size_t>(kPrefillMaxTokens * kPrefillMaxHeads);
    const std::size_t counts[] = {rows * (kPrefillNope + kPrefillRope), rows * kPrefillNope,
                                  static_cast<std::size_t>(kPrefillMaxTokens * kPrefillRope), rows * kPrefillV,
                                  rows * kPrefillV};
    __nv_bfloat16** bufs[] = {&q, &k_nope, &k_rot, &v, &out};
    for (int i = 0; i < 5; ++i) {
      TPB_CUDA_CHECK(cudaMalloc(bufs[i], counts[i] * 2));
      fill_random(*bufs[i], counts[i], 31 + static_cast<std::uint32_t>(i));
    }
    ready = true;
  }
};

PrefillBenchState* g_prefill = nullptr;  // lives until exit

void bm_prefill(benchmark::State& state, int variant, std::int64_t heads, PrefillSize size) {
  AttentionBenchState& g = *g_attn;
  g.prepare_stream();
  PrefillBenchState& p = *g_prefill;
  p.prepare();
  gpu::MlaPrefillShape shape;
  shape.batch = size.batch;
  shape.q_len = size.q_len;
  shape.past = 0;
  shape.heads = heads;
  shape.nope = kPrefillNope;
  shape.rope = kPrefillRope;
  shape.v_dim = kPrefillV;
  const double pairs = static_cast<double>(shape.q_len) * static_cast<double>(shape.q_len + 1) / 2.0 +
                       static_cast<double>(shape.past * shape.q_len);
  const double flops = static_cast<double>(shape.batch * heads) * pairs * 2.0 *
                       static_cast<double>(kPrefillNope + kPrefillRope + kPrefillV);
  // Calls per timed batch: ~2 ms at 300 TFLOP/s, 1..16.
  const int ops = static_cast<int>(std::clamp(2e-3 / (flops / 3e14), 1.0, 16.0));
  auto call = [&] {
    gpu::tuning::mla_prefill_variant(variant, p.q, p.k_nope, p.k_rot, p.v, shape, 0.1352f, p.out, g.stream);
  };
  for (int wu = 0; wu < 2; ++wu) call();
  TPB_CUDA_CHECK(cudaStreamSynchronize(g.stream));
  const double mean_s = time_per_op_s(state, g.stream, g.start, g.stop, ops, [&] {
    for (int i = 0; i < ops; ++i) call();
  });
  state.counters["batch"] = static_cast<double>(shape.batch);
  state.counters["q_len"] = static_cast<double>(shape.q_len);
  state.counters["past"] = static_cast<double>(shape.past);
  state.counters["heads"] = static_cast<double>(heads);
  state.counters["us_per_op"] = mean_s * 1e6;
  state.counters["flops"] = flops;
  state.counters["TFLOPs"] = flops / mean_s / 1e12;
  state.counters["ops_per_batch"] = ops;
  state.SetLabel(std::string("mla prefill, causal, ") + gpu::tuning::mla_prefill_variant_name(variant));
}

}  // namespace

void register_attention_benchmarks(RankContext& ctx) {
  g_attn = new AttentionBenchState;
  g_attn->device = ctx.rank;
  // attention/<family>/<variant>/heads:../batch:../seq_len:..[/tiles_per_split:..]
  auto add_decode = [](const char* family, int variant, std::int64_t heads, std::int64_t batch, std::int64_t seq_len,
                       std::int64_t tiles) {
    const std::string name = std::string("attention/") + family + "/" + gpu::tuning::mla_decode_variant_name(variant) +
                             "/heads:" + std::to_string(heads) + "/batch:" + std::to_string(batch) +
                             "/seq_len:" + std::to_string(seq_len) +
                             (tiles > 0 ? "/tiles_per_split:" + std::to_string(tiles) : std::string());
    benchmark::RegisterBenchmark(name.c_str(), [variant, heads, batch, seq_len, tiles](benchmark::State& st) {
      bm_decode(st, variant, heads, batch, seq_len, tiles);
    })
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond)
        ->Iterations(10);
  };
  // The variants of one shape one after another, so that what ran before (a GPU's clocks, its
  // temperature) is the same for them.
  for (std::int64_t heads : kDecodeHeads)
    for (std::int64_t batch : kBatches)
      for (std::int64_t seq_len : kSeqLens)
        for (int variant = 0; variant < gpu::tuning::mla_decode_variants(); ++variant)
          add_decode("mla_decode", variant, heads, batch, seq_len, 0);
  for (std::int64_t heads : kDecodeHeads)
    for (std::int64_t batch : kSweepBatches)
      for (std::int64_t seq_len : kSweepSeqLens)
        for (std::int64_t tiles : kSweepTiles)
          if (sweep_takes(seq_len, tiles)) {
            const int variant = gpu::tuning::mla_decode_default_variant(decode_shape(heads, batch, seq_len));
            add_decode("mla_decode_splits", variant, heads, batch, seq_len, tiles);
          }
  g_prefill = new PrefillBenchState;
  for (int variant = 0; variant < gpu::tuning::mla_prefill_variants(); ++variant)
    for (std::int64_t heads : kPrefillHeads)
      for (PrefillSize size : kPrefillSizes) {
        const std::string name = std::string("attention/mla_prefill/") +
                                 gpu::tuning::mla_prefill_variant_name(variant) + "/heads:" + std::to_string(heads) +
                                 "/batch:" + std::to_string(size.batch) + "/q_len:" + std::to_string(size.q_len);
        benchmark::RegisterBenchmark(name.c_str(), [variant, heads, size](benchmark::State& st) {
          bm_prefill(st, variant, heads, size);
        })
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond)
            ->Iterations(10);
      }
}

}  // namespace tpb::bench
