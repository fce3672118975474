// The bf16 GPU engine: the same model as the fp32 CPU engine (reference_engine/model/engine.h,
// MODEL.md), one tensor-parallel rank per process on the current CUDA device. Weights and
// activations are bf16 with fp32 accumulation; the residual stream is fp32; router logits,
// router bias and routing weights are fp32. The router weight itself is stored bf16 (so the
// router GEMM runs on cuBLASLt like every other GEMM); HF computes the router in fp32 from
// the same weights, so this is one bf16 rounding of W_gate more than HF, inside the numerics
// policy's 2e-2 budget (a near-tie between two experts may choose the other one).
//
// Allreduces sit exactly where the CPU engine puts them (embedding, o_proj partial, MLP/MoE
// output: 2 per layer + 1), in bf16 as serving engines send them; the vocab-parallel fp32
// logits are all-gathered. Prefill uses the plain MLA form (kv_b expansion) and decode the
// absorbed form over the latent KV cache, as the CPU engine's automatic mode does.
//
// Everything is allocated at construction (KV cache for max_batch x max_len, activations for
// max(max_batch, max_prefill_tokens) tokens), so steps do not allocate. With mem_fraction > 0
// the KV cache is sized as a serving engine sizes it (ARCHITECTURE.md, "Memory planner"): one
// pool of size_kv_pool(total, avail, mem_fraction, cell).max_tokens tokens, from cudaMemGetInfo
// readings (total = free before the weights, avail = free right before the pool), the same
// function the planner predicts with; the per-layer caches are carved from the pool's start in
// exactly the layout of the exact-size cache (max_len fixes the decode split-K partition, so
// the logits do not depend on the pool's size, which changes with the communicator's buffers).
// A pool too small for max_batch x max_len throws KvPoolInfeasible with the planner's
// sentence. With cuda_graph the decode step of each batch size runs eagerly once (cuBLASLt
// picks and caches its algorithms), is captured on its second call, and replayed from then
// on; inputs (token ids, positions, sequence lengths) live in fixed device buffers written
// before every launch. A replay runs the same kernels with the same arguments as the eager
// step: bitwise the same logits.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "reference_engine/comm/communicator.h"
#include "reference_engine/config/model_config.h"
#include "reference_engine/memory/planner.h"
#include "reference_engine/model/model_weights.h"
#include "reference_engine/weights/weight_source.h"

namespace tpb {

struct GpuEngineOptions {
  std::int64_t max_batch = 1;           // sequences the KV cache holds
  std::int64_t max_len = 0;             // KV capacity per sequence, tokens (> 0)
  std::int64_t max_prefill_tokens = 0;  // batch * seq_len of the largest prefill; 0 = max_batch * max_len
  bool cuda_graph = false;              // decode through captured CUDA graphs (one per batch size)
  bool count_expert_hits = false;       // diagnostics: copy each MoE layer's choices to the host (syncs; eager only)
  // Called (when set) as allocation phases complete, so a MemoryMeter can read the device
  // between them: "after_weights" (constructor), then on every (re)allocation of the step
  // buffers "before_buffers", "after_kv" (KV cache) and "after_buffers" (activations, workspaces).
  std::function<void(const char* phase)> on_phase;
  // KV sizing. 0: the cache holds exactly max_batch x max_len tokens. In (0, 1]: the serving
  // formula's pool (see above); every resize() re-derives it from fresh readings, as a server
  // restarted with the communicators now alive would.
  double mem_fraction = 0;
  // With mem_fraction: agrees the pool with the other ranks of the tensor-parallel group, as a
  // serving engine sizes every rank's KV cache alike from the smallest (ranks read different
  // free memory: another process, a communicator's buffers on one GPU only). Called at every
  // sizing with this rank's formula max_tokens (0 when none fit), on every rank alike (a
  // collective), before any rank can throw; returns the group's smallest. The pool is that
  // many tokens; fewer than max_batch x max_len throws KvPoolInfeasible naming the group.
  // Unset: a rank keeps its own formula's pool.
  std::function<std::int64_t(std::int64_t)> agree_kv_tokens;
  // Prefill logits. false: at every position, [batch, seq_len, vocab] (what the conformance
  // tests compare with the CPU engine). true: at each sequence's last position only, as a
  // server computes them before sampling: the lm_head and its all_gather run on batch rows,
  // and their buffers hold max_batch rows instead of max_prefill_tokens (at TP1 on Kimi-K2.5,
  // 1.25 MiB per prefill token). A decode step computes its one position either way, and the
  // KV cache a prefill leaves is the same bits.
  bool last_position_logits = false;
  // One-row dense products through the split-K gemv (gpu::Linear::set_one_row_gemv); off
  // keeps cuBLASLt for every shape, for a side-by-side measurement.
  bool one_row_gemv = true;
};

// The KV pool is smaller than max_batch x max_len tokens: what() is one sentence (the
// planner's verdict on the measured readings, and the readings); size() has the numbers.
class KvPoolInfeasible : public std::runtime_error {
 public:
  KvPoolInfeasible(const std::string& what, KvPoolSize size) : std::runtime_error(what), size_(std::move(size)) {}
  const KvPoolSize& size() const { return size_; }

 private:
  KvPoolSize size_;
};

struct GpuEngineStats {
  std::int64_t all_reduces = 0;        // calls since construction (graph replays count theirs)
  std::int64_t all_reduce_bytes = 0;   // bytes per rank passed to all_reduce, summed
  std::int64_t all_gathers = 0;        // calls since construction
  std::int64_t tokens = 0;             // tokens processed (batch * new tokens, summed)
  std::int64_t graph_captures = 0;     // decode graphs captured
  std::int64_t graph_replays = 0;      // decode steps run as a graph replay
  std::vector<std::int64_t> expert_hits;  // with count_expert_hits: (token, layer) choices per routed expert
  std::vector<std::int32_t> routing;      // with count_expert_hits: every MoE call's ids [T][top_k], in call order
};

class GpuEngine {
 public:
  // Loads this rank's shard from `weights` onto the current device: synthetic sources are
  // generated on the device (the same values as the CPU source, rounded to bf16), other
  // sources are read in fp32 on the host and converted. comm.size() must equal shard.tp;
  // comm must be a GPU backend (device pointers, this engine's stream).
  GpuEngine(const ModelConfig& config, Shard shard, Communicator& comm, WeightSource& weights,
            GpuEngineOptions options);
  ~GpuEngine();
  GpuEngine(const GpuEngine&) = delete;
  GpuEngine& operator=(const GpuEngine&) = delete;

  // Starts `batch` new sequences from tokens [batch, seq_len] (row-major), dropping any
  // cached ones. logits() then holds [batch, seq_len, vocab], or [batch, 1, vocab] with
  // last_position_logits.
  void prefill(const std::vector<std::int64_t>& tokens, std::int64_t batch);
  // Appends one token per sequence (tokens: [batch]). logits() then holds [batch, 1, vocab].
  void decode(const std::vector<std::int64_t>& tokens);
  // Drops every cached token from position `tokens` on, so the next step overwrites them.
  void rewind(std::int64_t tokens);

  // Logits of the last step, fp32 [batch, new tokens, vocab], identical on every rank. Waits
  // for the step and copies them to the host on first use after a step (not inside the step,
  // so a timed step does not include the device-to-host copy).
  const std::vector<float>& logits() const;

  // Reallocates the KV cache and the activations for exactly these sizes (weights stay),
  // unless they already are; drops the cached sequences and the captured graphs then. Exact,
  // not grow-only: max_len fixes the decode attention's split-K partition, so the logits of a
  // case must not depend on the sizes of the cases before it.
  void resize(std::int64_t max_batch, std::int64_t max_len, std::int64_t max_prefill_tokens);
  // Runs later steps on another communicator of the same rank and size (a sweep over
  // allreduce backends keeps one engine with its weights); drops the captured graphs.
  void set_communicator(Communicator& comm);
  // The communicator is about to be destroyed: drops the captured graphs (their kernels hold
  // its buffers) and the reference. set_communicator must come before the next step.
  void forget_communicator();
  // Turns CUDA-graph decode on or off (graphs already captured are kept for later use).
  void set_cuda_graph(bool on) { options_.cuda_graph = on; }
  // Drops the captured graphs: the next graph decode of each batch size runs eagerly once,
  // then captures again. A workload that must see every step's calls (or whose captured
  // kernels write case-owned buffers, as the digests level's do) starts and ends with it.
  void drop_graphs();
  // The KV sizing of the next resize() (GpuEngineOptions::mem_fraction: 0 or in (0, 1]).
  void set_mem_fraction(double mem_fraction);
  // The prefill logits of the steps after the next resize() (GpuEngineOptions::last_position_logits).
  void set_last_position_logits(bool on) { options_.last_position_logits = on; }
  const GpuEngineOptions& options() const { return options_; }

  // Starts `batch` sequences whose first `tokens` cache rows (every layer) hold synthetic
  // values, a pure function of (seed, layer, sequence, position, element), the same on every
  // rank and TP size (the latent cache is replicated): a decode benchmark at a long context
  // without the prefill of batch * tokens tokens. Values are uniform in [-1, 1), the scale of
  // normed latents. No logits until the next step.
  void fill_kv_synthetic(std::int64_t batch, std::int64_t tokens, std::uint64_t seed);

  // The last step's logits at the last new position of each sequence, fp32 [batch, vocab]:
  // what a server samples from, without copying a long prefill's [batch, n, vocab].
  std::vector<float> last_position_logits() const;

  // Blocks until every queued step is done.
  void synchronize() const;
  cudaStream_t stream() const { return stream_; }

  std::int64_t batch() const { return batch_; }
  std::int64_t cached_tokens() const { return length_; }
  const ModelConfig& config() const { return config_; }
  Shard shard() const { return shard_; }
  std::size_t weight_bytes() const { return weight_bytes_; }
  // The weight-read roofline of a step: a step reads step_fixed_weight_bytes() (every weight
  // but the embedding table, which it gathers, and the routed experts) plus
  // routed_expert_bytes() for each routed expert a MoE call sends at least one token to.
  // routed_expert_reads() counts those (call, expert) reads on the device (the dispatch
  // plan's count, graph-safe, no extra launch) since the activations were last allocated
  // (construction, or a resize that reallocated); reading it waits for the stream.
  std::size_t step_fixed_weight_bytes() const { return step_fixed_weight_bytes_; }
  std::size_t routed_expert_bytes() const;
  std::int64_t routed_expert_reads() const;
  // routed_expert_reads() by layer (index = layer, 0 for a dense layer); waits for the stream.
  std::vector<std::int64_t> routed_expert_reads_by_layer() const;
  // The weights layer `layer` reads at every step besides its routed experts: its norms, the
  // attention's projections, and the router and shared experts or the dense MLP. The layers'
  // sum plus the final norm and the lm_head is step_fixed_weight_bytes().
  std::size_t layer_fixed_weight_bytes(std::int64_t layer) const;

  // Phase timing, for benchmarks that time each layer inside one engine (rather than as the
  // difference of two engines' steps, which moves with each process's placement): while on,
  // every step records CUDA events at its phase boundaries (the step's start, after the
  // embedding's allreduce, after each layer's last allreduce, after the logits' all_gather),
  // as event-record nodes of a captured graph. Switching drops the captured graphs.
  struct StepPhases {
    double embed_us = 0;            // embedding gather, its allreduce, the fp32 residual
    std::vector<double> layer_us;   // each layer, its norms and both allreduces
    double head_us = 0;             // final norm, lm_head, all_gather
    double step_us = 0;             // first to last event
  };
  void set_phase_timing(bool on);
  // The last step's phases (waits for the stream); the last step must have run with it on.
  StepPhases last_step_phases() const;

  std::size_t kv_cache_bytes() const { return kv_bytes_; }  // the whole pool (exact: the case's cache)
  // KV tokens the pool holds: max_batch x max_len when exact, the formula's max_tokens else
  // (the group's smallest with agree_kv_tokens).
  std::int64_t kv_pool_tokens() const { return kv_pool_tokens_; }
  // The last sizing: the readings (total, avail, bytes), cell_bytes and requested_tokens
  // always; with mem_fraction > 0 also the formula's rest, max_tokens, verdict (this rank's
  // formula, before any agreement with the group).
  const KvPoolSize& kv_pool_size() const { return kv_pool_; }
  std::int64_t device_total_bytes() const { return device_total_bytes_; }  // cudaMemGetInfo total
  std::size_t activation_bytes() const { return activation_bytes_; }  // activations + workspaces
  const GpuEngineStats& stats() const { return stats_; }
  // The allreduce sizes (elements, bf16) of one step over `tokens` tokens, in call order: what
  // a benchmark replays alone to measure the step's allreduce time.
  std::vector<std::size_t> step_all_reduce_counts(std::int64_t tokens) const;

 private:
  // Device weights and buffers: reference_engine/gpu/gpu_engine_impl.h, private to the files
  // that implement this class (gpu_engine_{weights,buffers,steps,forward}.cpp).
  struct Impl;

  void check_tokens(const std::vector<std::int64_t>& tokens) const;
  void upload_step_inputs(const std::vector<std::int64_t>& tokens, std::int64_t n);
  void forward(std::int64_t n, bool decode_step);
  void attention_prefill(std::int64_t layer, std::int64_t n);
  void attention_decode(std::int64_t layer);
  void ffn(std::int64_t layer, std::int64_t tokens, bool grouped);
  void routed_experts(std::int64_t layer, std::int64_t tokens, bool grouped);
  void all_reduce_bf16(__nv_bfloat16* buf, std::int64_t tokens);
  void phase_mark(std::size_t boundary);  // records phase event `boundary` when phase timing is on
  void allocate_buffers();
  std::int64_t size_kv_pool_now();

  ModelConfig config_;
  Shard shard_;
  ShardDims dims_;
  Communicator* comm_;
  GpuEngineOptions options_;
  std::int64_t max_tokens_ = 0;  // activation rows
  bool buffers_last_position_ = false;  // the logits buffers hold max_batch rows (allocate_buffers)
  std::unique_ptr<Impl> impl_;
  cudaStream_t stream_ = nullptr;
  std::map<std::int64_t, cudaGraphExec_t> graphs_;  // decode graph per batch size
  std::map<std::int64_t, int> decode_runs_;          // eager decode steps per batch size
  std::int64_t batch_ = 0;
  std::int64_t length_ = 0;      // cached tokens per sequence
  std::int64_t last_tokens_ = 0; // tokens of the last step (logits rows)
  float attention_scale_ = 1.0f;
  float rope_factor_ = 1.0f;
  std::vector<float> inv_freq_host_;
  std::size_t weight_bytes_ = 0, kv_bytes_ = 0, activation_bytes_ = 0;
  std::size_t step_fixed_weight_bytes_ = 0;
  std::vector<std::size_t> layer_fixed_weight_bytes_;  // per layer
  std::vector<cudaEvent_t> phase_events_;              // layers + 3 while phase timing is on
  // KV sizing readings: free before the weights (constructor), and what the weights took of
  // it measured (free before - free before the first pool): at a resize, total = free now + this.
  std::int64_t free_before_weights_ = 0, weights_footprint_bytes_ = -1, device_total_bytes_ = 0;
  KvPoolSize kv_pool_;
  std::int64_t kv_pool_tokens_ = 0;
  GpuEngineStats stats_;
  mutable bool logits_valid_ = false;
  mutable std::vector<float> logits_;
};

}  // namespace tpb
