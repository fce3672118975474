// The widths the GPU engine's attention kernels work in, from the model's: its decode
// attention moves 16-byte latent-cache rows (kv_lora_rank and qk_rope_head_dim each a multiple
// of 8 elements) and its prefill attention reads element pairs (even nope and v head dims).
// A model whose widths do not fit (an HF config with kv_lora_rank 20 or v_head_dim 13) runs on
// buffers padded with zero columns: a zero column adds nothing to any dot product, so the
// padded layout computes the same numbers. Every published DeepSeek-V3 / Kimi model fits
// as it is (no padding, no extra copy). Shared by the engine (reference_engine/gpu) and the
// planner, which counts the same buffers (engine_buffers.cpp, kv_cell_bytes).
#pragma once

#include <cstdint>
#include <string>

#include "reference_engine/config/model_config.h"
#include "tpb/check.h"
#include "tpb/kernels/mla_widths.h"

namespace tpb {

struct AttentionWidths {
  std::int64_t lora = 0, rope = 0;  // the latent cache row's two parts, each padded to 8
  std::int64_t nope = 0, v = 0;     // prefill attention's head dims, padded to even
  std::int64_t cache_row() const { return lora + rope; }
};

inline AttentionWidths attention_widths(const ModelConfig& c) {
  auto up = [](std::int64_t v, std::int64_t m) { return (v + m - 1) / m * m; };
  return {up(c.kv_lora_rank, 8), up(c.qk_rope_head_dim, 8), up(c.qk_nope_head_dim, 2), up(c.v_head_dim, 2)};
}

// The GPU engine's attention kernels hold a head's row in registers and shared memory
// (tpb/kernels/mla_widths.h): the padded kv_lora_rank at most 512 and qk_rope_head_dim at most
// 128 (decode), the padded nope + rope at most 256 and v_head_dim at most 128 (prefill). Published models sit within
// (Kimi-K2.5: 512, 64, 192, 128). A config beyond them is an InputError naming `source` and the
// field, before anything is allocated: validation refuses what would fail later on a shape.
inline void check_gpu_attention_widths(const ModelConfig& c, const std::string& source) {
  using namespace tpb::kernels;
  const AttentionWidths a = attention_widths(c);
  TPB_INPUT_CHECK(a.lora <= kMlaDecodeMaxKvLora, source << ": kv_lora_rank: " << c.kv_lora_rank
                                                        << " exceeds the GPU engine's decode attention (at most "
                                                        << kMlaDecodeMaxKvLora << ")");
  TPB_INPUT_CHECK(a.rope <= kMlaDecodeMaxRope, source << ": qk_rope_head_dim: " << c.qk_rope_head_dim
                                                      << " exceeds the GPU engine's decode attention (at most "
                                                      << kMlaDecodeMaxRope << ")");
  TPB_INPUT_CHECK(a.nope + c.qk_rope_head_dim <= kMlaPrefillMaxQk,
                  source << ": qk_nope_head_dim: " << c.qk_nope_head_dim << " + qk_rope_head_dim " << c.qk_rope_head_dim
                         << " exceeds the GPU engine's prefill attention (at most " << kMlaPrefillMaxQk << ")");
  TPB_INPUT_CHECK(a.v <= kMlaPrefillMaxV, source << ": v_head_dim: " << c.v_head_dim
                                                 << " exceeds the GPU engine's prefill attention (at most "
                                                 << kMlaPrefillMaxV << ")");
}

}  // namespace tpb
