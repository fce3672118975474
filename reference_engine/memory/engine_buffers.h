// The step buffers tpbench's GPU engine allocates after its KV cache (activations sized for
// max(max_batch, max_prefill_tokens) tokens, the MoE dispatch buffers, the decode attention's
// split-K workspace, the lm_head's logits and their all_gather, cuBLASLt's workspace), in
// bytes per rank: the planner's `activations` term for an engine case, which
// plan_matches_measured holds against the cudaMemGetInfo growth around that allocation.
//
// It mirrors GpuEngine::allocate_buffers (reference_engine/gpu/gpu_engine_buffers.cpp) buffer by
// buffer, because the planner must run without a GPU or CUDA; a buffer added there and not
// here shows up as a plan_matches_measured failure on the term `activations`. Measured on an
// H200 (TP1 Kimi-K2.5 slice; tests/unit/engine_buffers_test.cpp): 1898 MiB at 1024 prefill
// tokens, 15148 MiB at 8192, of which the fp32 logits and their gathered copy are 1.25 MiB per
// token when the engine computes the lm_head at every prefill position; with
// last_position_logits they are max_batch rows.
#pragma once

#include <cstdint>

#include "reference_engine/config/model_config.h"

namespace tpb {

struct EngineBufferShape {
  int tp = 1;
  std::int64_t max_batch = 1;           // sequences
  std::int64_t max_len = 1;             // KV tokens per sequence (the decode workspace's key range)
  std::int64_t max_prefill_tokens = 1;  // batch x tokens of the largest prefill
  bool last_position_logits = false;    // logits buffers of max_batch rows (GpuEngineOptions)
  int sm_count = 132;                   // for the split-K workspace's split count (H100/H200 SXM)
};

// Bytes per rank, as the engine's own accounting (GpuEngine::activation_bytes()) counts them.
std::int64_t gpu_engine_buffer_bytes(const ModelConfig& config, const EngineBufferShape& shape);

}  // namespace tpb
