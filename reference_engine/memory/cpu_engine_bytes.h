// What the fp32 CPU engine (reference_engine/model/engine.cpp) and the engine workload's CPU
// path (suite/workloads/engine_workload.cpp) hold on one rank at a case's peak, in bytes, from
// the config alone: the CPU side of the memory planner, so that a CPU case that cannot fit is
// `infeasible` before a rank starts, as a GPU case is (issue 37, finding 7: batch 2^30, inside
// the scenario limits, ended in a rank's std::bad_alloc).
//
// It mirrors the engine buffer by buffer, as engine_buffers.h mirrors the GPU engine's:
//   weights      every tensor of the rank's shard in fp32 (weight_bytes at f32; the engine holds an
//                int4 model's experts dequantized, exactly, in fp32 too).
//   kv_cache     the MLA cache, [layers][batch][capacity][kv_lora_rank + qk_rope_head_dim] fp32, at
//                its peak: a prefill case builds a new cache of seq_len tokens while the last
//                step's is alive (2 x seq_len); a decode case's first step grows the prefilled
//                cache to 2 x seq_len, copying (3 x seq_len while it does).
//   activations  the largest forward, the prefill of batch x seq_len tokens: the residual, the
//                normed input and the layer's partial sum (3 x T x hidden) beside the largest of
//                attention (q, q_a, the latent, the output; the plain form's per-sequence
//                expansion through kv_b), the MoE (router scores, top-k, the routed tokens'
//                inputs and outputs at the average load, the shared experts) or dense MLP, and
//                the lm_head (this rank's vocab slice, the gathered logits, the logits kept).
//   inputs       the workload's: the prompt's token ids (int64) and the logits snapshot the
//                debug level keeps, allocated at every level (tokens of a step x vocab).
// Counted in doubles: batch and seq_len go to 2^40 each, and their product overflows int64.
// An estimate from below where the engine's use depends on the data (the tokens an expert
// gets), so a case planned infeasible does not fit, and one planned feasible may still be
// close: the verdict says how much the host has.
#pragma once

#include <cstdint>

#include "reference_engine/config/model_config.h"

namespace tpb {

struct CpuEngineShape {
  int tp = 1;                  // ranks; the model's split dims divide by it
  std::int64_t batch = 1;      // sequences
  std::int64_t seq_len = 16;   // prompt tokens per sequence (a decode case's context)
  bool decode = true;          // decode: a prefill fills the cache, then one token per step
};

struct CpuEngineBytes {
  double weights = 0;      // bytes per rank, fp32
  double kv_cache = 0;     // bytes per rank at the cache's peak
  double activations = 0;  // bytes per rank, the largest forward's buffers
  double inputs = 0;       // bytes per rank, the workload's token ids and logits snapshot
  double total() const { return weights + kv_cache + activations + inputs; }
};

CpuEngineBytes cpu_engine_bytes(const ModelConfig& config, const CpuEngineShape& shape);

}  // namespace tpb
