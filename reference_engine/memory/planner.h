// MemoryPlanner: predicts, from the model config alone, how a serving engine sizes its KV
// cache at start-up on one rank (ARCHITECTURE.md, "Memory planner"):
//
//   total      = device total - CUDA context - communicator buffers   (free before weights)
//   avail      = total - weights per rank                             (free after weights)
//   rest       = avail - total * (1 - mem_fraction)
//   cell       = (kv_lora_rank + qk_rope_head_dim) * num_layers * kv_dtype_bytes   (MLA, not / TP)
//   max_tokens = floor(rest / cell)      (= floor(rest_gib * 2^30 / cell), SGLang's form)
//   rest <= 0 -> "not enough memory".
//
// The slack total * (1 - mem_fraction) is what the engine leaves for everything it allocates
// later: the CUDA-graph memory pool and the activations of the largest forward pass. The
// planner predicts both and says whether they fit (it does not change `feasible`, which is the
// start-up check alone; `slack_fits` is reported beside it).
//
// Activation model (per rank, bf16 intermediates, T = batch x seq_len tokens in one forward):
//   residual    x and h of the layer: 2 x T x hidden
//   + the largest of
//     attention (prefill, non-absorbed MLA, flash attention so no T x T scores):
//                q_a out + its norm (2 x q_lora), q (H/tp x 192), k with the rope part
//                broadcast (H/tp x 192), kv_a out (576) + normed latent (512),
//                kv_b out (H/tp x 256), attention out (H/tp x 128), o_proj out (hidden)
//     MoE:       router scores fp32 (E x 4 B), top-k ids + weights (k x 8 B), fused-MoE
//                caches as vLLM/SGLang's fused_moe holds them: k x (2 I/tp + I/tp + hidden),
//                shared experts (2 I/tp + I/tp + hidden), combined output (hidden)
//     dense MLP: 2 I/tp + I/tp + hidden
//     logits:    batch x vocab fp32 (after the all-gather) + batch x vocab/tp bf16 (local shard)
// CUDA-graph pool: engines capture decode graphs from the largest batch size down into ONE
// shared memory pool, so the pool is the decode peak (the model above with T = batch size,
// one token per sequence) of the largest captured batch size; each size's own peak is listed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "reference_engine/config/model_config.h"
#include "reference_engine/memory/comm_bytes.h"
#include "reference_engine/memory/weight_bytes.h"

namespace tpb {

struct PlanInput {
  ModelConfig config;                       // the text model (+ vision tower if it has one)
  int tp = 1;                               // tensor-parallel size = ranks
  Quantization quant = Quantization::bf16;  // weight storage
  std::int64_t gpu_total_bytes = 0;         // device total as cudaMemGetInfo reports it, bytes
  std::int64_t cuda_context_bytes = 0;      // context + module footprint per process, bytes (estimate)
  double mem_fraction = 0.85;               // mem_fraction_static, in (0, 1]
  std::string allreduce = "nccl";           // backend name (comm_bytes.h)
  Interconnect interconnect = Interconnect::nvlink;  // how the ranks' GPUs reach each other: whether
                                            // the custom allreduce can run (comm_bytes.h)
  bool custom_on_pcie = false;              // the custom allreduce forced on > 2 PCIe-only GPUs (comm_bytes.h)
  std::int64_t custom_max_bytes = kCustomAllreduceDefaultMaxBytes;  // custom allreduce max message, bytes
  int nccl_channels = kNcclDefaultChannels; // NCCL channels assumed for its buffers (NVLink/P2P only)
  bool nccl_over_sockets = false;           // NCCL reaches its peers over its socket transport (ranks
                                            // sharing a GPU, suite/launch/placement.h): its buffers are
                                            // nccl_socket_buffer_bytes, measured, not the channel estimate
  std::int64_t kv_dtype_bytes = 2;          // bytes per KV element: 2 (bf16) or 1 (fp8)
  std::int64_t requested_tokens = 0;        // KV tokens the deployment needs; 0 = at least one
  std::vector<std::int64_t> graph_batch_sizes;  // captured decode CUDA-graph batch sizes (sequences)
  std::int64_t activation_batch = 1;        // sequences in the largest eager forward
  std::int64_t activation_seq_len = 8192;   // tokens per sequence in that forward (a chunked-prefill size)
  bool include_vision_tower = true;         // count the vision tower when the config has one (a
                                            // serving engine loads it; tpbench's own engine does not)
};

// One line of the breakdown: a term and its bytes on one rank.
struct PlanTerm {
  std::string name;           // e.g. "weights: routed_experts"
  std::int64_t bytes = 0;     // per rank; subtracted terms are positive, `sign` says how they enter
  char sign = '-';            // '=' a subtotal, '-' taken from the line above, ' ' informational
  std::string note;           // where the number comes from
};

struct ActivationPeak {
  std::int64_t tokens = 0;           // T = batch x seq_len
  std::int64_t residual_bytes = 0;   // x and h
  std::int64_t attention_bytes = 0;  // attention intermediates
  std::int64_t moe_bytes = 0;        // MoE intermediates (0 for a model without MoE layers)
  std::int64_t dense_mlp_bytes = 0;  // dense MLP intermediates (0 without dense layers)
  std::int64_t logits_bytes = 0;     // logits of the batch
  std::int64_t peak_bytes = 0;       // residual + the largest of the four
  std::string largest;               // which of the four set the peak
};

// Activation peak of one forward of `batch` sequences of `seq_len` tokens on one rank.
ActivationPeak activation_peak(const ModelConfig& config, int tp, std::int64_t batch, std::int64_t seq_len);

struct GraphPoolEntry {
  std::int64_t batch_size = 0;  // captured decode batch size, sequences
  std::int64_t bytes = 0;       // its decode activation peak, bytes per rank
};

// The serving formula on its own, as engines compute it from two free-memory readings.
std::int64_t kv_cell_bytes(const ModelConfig& config, std::int64_t kv_dtype_bytes);
double kv_rest_bytes(double total_bytes, double avail_bytes, double mem_fraction);
// floor(rest / cell), 0 when rest <= 0.
std::int64_t kv_max_tokens(double total_bytes, double avail_bytes, double mem_fraction, std::int64_t cell_bytes);
// The smallest mem_fraction at which kv_max_tokens >= tokens (tokens >= 1): solves
// 1 - (avail - tokens * cell) / total, then steps up by ulps until the floor agrees.
// Returns a value > 1 when no fraction works (avail < tokens * cell).
double kv_min_mem_fraction(double total_bytes, double avail_bytes, std::int64_t cell_bytes, std::int64_t tokens);

// The KV pool one rank sizes at start-up from its two free-memory readings: the formula,
// whether it holds the requested tokens, and the verdict sentence. plan_memory (predicted
// readings) and the GPU engine (cudaMemGetInfo readings, GpuEngineOptions::mem_fraction) both
// size through this one function, so a plan and a measured pool differ only by the readings.
struct KvPoolSize {
  double total_bytes = 0;             // free before weights: the formula's `total`
  double avail_bytes = 0;             // free after weights: the formula's `avail`
  double mem_fraction = 0;            // mem_fraction_static, in (0, 1]
  std::int64_t cell_bytes = 0;        // KV bytes per token, all layers, one rank (kv_cell_bytes)
  std::int64_t requested_tokens = 0;  // tokens the caller needs; 0 = at least one
  double rest_bytes = 0;              // avail - total * (1 - mem_fraction); may be negative
  std::int64_t max_tokens = 0;        // floor(rest / cell); 0 when rest <= 0
  bool feasible = false;              // max_tokens >= max(1, requested_tokens)
  double min_mem_fraction = 0;        // smallest fraction giving >= 1 token (> 1: none does)
  double min_mem_fraction_requested = 0;  // smallest giving requested_tokens (0 when none requested)
  std::string verdict;                // kv_verdict's sentence
};
KvPoolSize size_kv_pool(double total_bytes, double avail_bytes, double mem_fraction, std::int64_t cell_bytes,
                        std::int64_t requested_tokens);

struct MemoryPlan {
  PlanInput input;                        // what was planned
  std::int64_t gpu_total_bytes = 0;       // device total
  std::int64_t cuda_context_bytes = 0;    // estimate
  CommBytes comm;                         // communicator buffers per rank
  std::string allreduce_planned;          // the backend whose buffers are counted: input.allreduce,
                                          // or "nccl" when the interconnect blocks the custom one
  std::string allreduce_note;             // one sentence when it does (why, what runs), else empty
  WeightBytes weights;                    // weights per rank, by group
  std::int64_t total_bytes = 0;           // free before weights = the formula's `total`
  std::int64_t avail_bytes = 0;           // free after weights = the formula's `avail`
  double slack_bytes = 0;                 // total * (1 - mem_fraction)
  double rest_bytes = 0;                  // avail - slack (may be negative)
  std::int64_t kv_cell_bytes = 0;         // per token, every rank
  std::int64_t max_tokens = 0;            // KV tokens per rank (0 when rest <= 0)
  std::int64_t kv_cache_bytes = 0;        // max_tokens x cell
  bool feasible = false;                  // max_tokens >= max(1, requested_tokens)
  double min_mem_fraction = 0;            // smallest fraction giving >= 1 token (> 1: none does)
  double min_mem_fraction_requested = 0;  // smallest fraction giving requested_tokens (0 when none requested)
  std::vector<GraphPoolEntry> graph_pools;  // per captured batch size
  std::int64_t graph_pool_bytes = 0;      // the shared pool: the largest entry
  ActivationPeak activation;              // eager forward of (activation_batch, activation_seq_len)
  std::int64_t slack_needed_bytes = 0;    // graph pool + activation peak
  bool slack_fits = false;                // slack_bytes >= slack_needed_bytes
  double max_mem_fraction_for_slack = 0;  // largest fraction whose slack holds them (1 - needed / total)
  std::vector<PlanTerm> breakdown;        // every term, top to bottom
  std::vector<std::string> assumptions;   // estimates the numbers rest on
  std::string verdict;                    // one sentence
};

// Throws InputError for an impossible input (tp not dividing the model, fraction outside
// (0, 1], a GPU smaller than context + buffers, ...).
MemoryPlan plan_memory(const PlanInput& input);

// KV tokens against mem_fraction for several allreduce backends (issue 6's sweep, planned):
// one plan per (backend, fraction), every other input as given.
struct FractionSweepPoint {
  std::string allreduce;        // backend
  double mem_fraction = 0;      // the fraction planned
  std::int64_t comm_bytes = 0;  // its buffers per rank
  std::int64_t max_tokens = 0;  // KV tokens per rank
  bool feasible = false;        // as MemoryPlan::feasible
  bool slack_fits = false;      // as MemoryPlan::slack_fits
};
std::vector<FractionSweepPoint> sweep_mem_fraction(const PlanInput& input, const std::vector<std::string>& backends,
                                                   const std::vector<double>& fractions);

// The verdict sentence for raw readings (used by plan_memory and `tpbench plan --from-measured`).
std::string kv_verdict(double total_bytes, double avail_bytes, double mem_fraction, std::int64_t cell_bytes,
                       std::int64_t requested_tokens);

}  // namespace tpb
