// gpu_engine_buffer_bytes (reference_engine/memory/engine_buffers.h) against what the GPU
// engine allocated for four cases on an H200 (1 x H200 141 GB, CUDA 13.0, e782409; records of
// scenarios/decode-1gpu.json and memory-fraction-1gpu.json, the Kimi-K2.5 3-layer slice at
// TP1): the engine's own accounting (metrics.activation_bytes) to the byte, and the
// cudaMemGetInfo growth around the allocation (memory.breakdown.activations) within
// plan_matches_measured's budget, max(2 %, 256 MiB). The engine's accounting is 16 bytes above
// those records since e78ab3e, which counts routed-expert reads per layer (3 counters of 8 bytes
// instead of one), and 32 MiB above since the shared experts run on a side branch with its
// own cuBLASLt workspace. Since the wgmma decode attention (64 heads per CTA instead of 32, so
// its split plan cuts a batch's keys into more splits) the decode workspace is larger:
// +16,974,336 bytes at b64 1K and +17,369,088 at b16 8K, both re-measured on 1 x H200 on
// 2026-12-02 (metrics.activation_bytes 234,361,756 in decode-1gpu and 135,075,676 in
// memory-fraction-1gpu, e0ff2c2); +8,421,376 at b1 8K, the planner's workspace difference, not
// re-run (decode-1gpu no longer prefills 8K tokens at once). Since the split plan counts the
// partial outputs' traffic (mla_decode_split.h), fewer splits at small batches: -16,974,336
// bytes at b64 1K and -17,369,088 at b16 8K (the workspace is sized for the largest plan over
// batches 1..max_batch), -8,421,376 at b1 8K.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "reference_engine/config/model_config.h"
#include "reference_engine/memory/engine_buffers.h"
#include "tests/unit/engine_test_support.h"

namespace tpb {
namespace {

struct Measured {
  std::int64_t batch, max_len, max_prefill_tokens;
  std::int64_t accounted;  // metrics.activation_bytes
  std::int64_t device;     // memory[0].breakdown.activations (cudaMemGetInfo)
};

TEST(EngineBuffers, KimiSliceTp1MatchesWhatTheEngineAllocatedOnAnH200) {
  ModelConfig config = load_model_config_by_name(test::preset("kimi-k2.5"));
  apply_overrides(config, {{"num_hidden_layers", 3}}, "kimi-k2.5", "$.model.overrides");
  const Measured cases[] = {
      {1, 1025, 1024, 2053400736, 1990197248},     // decode b1 1K: a real prefill fills the KV
      {1, 8193, 8192, 15947114656, 15883829248},   // decode b1 8K
      {64, 1025, 64, 217387420, 157286400},        // decode b64 1K: synthetic KV, 64-token buffers
      {16, 8193, 16, 117706588, 52428800},          // decode b16 8K (memory-fraction-1gpu)
  };
  for (const Measured& m : cases) {
    EngineBufferShape s;
    s.tp = 1;
    s.max_batch = m.batch;
    s.max_len = m.max_len;
    s.max_prefill_tokens = m.max_prefill_tokens;
    const std::int64_t planned = gpu_engine_buffer_bytes(config, s);
    EXPECT_EQ(planned, m.accounted) << "batch " << m.batch << " max_len " << m.max_len;
    const double budget = std::max(0.02 * static_cast<double>(m.device), 256.0 * (1 << 20));
    EXPECT_LE(std::fabs(static_cast<double>(planned - m.device)), budget) << "batch " << m.batch;
  }
}

// The logits and their gathered copy dominate a long prefill: 4 bytes x vocab x (1 + tp) per
// token, which is why a case that fills its KV with an 8K prefill holds ~15 GiB of buffers.
TEST(EngineBuffers, GrowsWithPrefillTokensByTheLogitsAndActivations) {
  ModelConfig config = load_model_config_by_name(test::preset("kimi-k2.5"));
  apply_overrides(config, {{"num_hidden_layers", 3}}, "kimi-k2.5", "$.model.overrides");
  EngineBufferShape a, b;
  a.max_prefill_tokens = 1024;
  b.max_prefill_tokens = 2048;
  a.max_len = b.max_len = 4096;
  const double per_token = static_cast<double>(gpu_engine_buffer_bytes(config, b) - gpu_engine_buffer_bytes(config, a)) / 1024;
  const double logits = 4.0 * static_cast<double>(config.vocab_size) * 2;  // local + gathered at TP1
  EXPECT_GT(per_token, logits);
  EXPECT_LT(per_token, 2 * logits);
  // At TP2 each rank holds half the vocabulary twice over (local, and the gather of both).
  a.tp = b.tp = 2;
  const double per_token_tp2 = static_cast<double>(gpu_engine_buffer_bytes(config, b) - gpu_engine_buffer_bytes(config, a)) / 1024;
  EXPECT_LT(per_token_tp2, per_token);
}

// With last_position_logits the logits buffers hold max_batch rows: an 8K prefill then costs
// what it costs without its [8192, vocab] fp32 logits (local and gathered), at any TP.
TEST(EngineBuffers, LastPositionLogitsHoldBatchRows) {
  ModelConfig config = load_model_config_by_name(test::preset("kimi-k2.5"));
  apply_overrides(config, {{"num_hidden_layers", 3}}, "kimi-k2.5", "$.model.overrides");
  for (int tp : {1, 2, 8}) {
    EngineBufferShape every;
    every.tp = tp;
    every.max_batch = 2;
    every.max_len = 4097;
    every.max_prefill_tokens = 2 * 4096;
    EngineBufferShape last = every;
    last.last_position_logits = true;
    const std::int64_t vocab_local = config.vocab_size / tp;
    EXPECT_EQ(gpu_engine_buffer_bytes(config, every) - gpu_engine_buffer_bytes(config, last),
              (1 + tp) * (every.max_prefill_tokens - every.max_batch) * vocab_local * 4)
        << "tp " << tp;
  }
}

}  // namespace
}  // namespace tpb
