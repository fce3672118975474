// The absorbed-MLA KV cache: per layer, sequence and token one row of
// [rmsnorm_kva(c) (kv_lora_rank) | rope(k_rot) (qk_rope_head_dim)] = 576 values for Kimi.
// It is the same on every rank (MLA's latent is not split by TP). Layout
// [layer][sequence][position][width], fp32, contiguous per sequence so attention reads one
// block per (layer, sequence).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tpb {

class MlaKvCache {
 public:
  MlaKvCache() = default;
  // Empty cache for `batch` sequences of up to `capacity_tokens` tokens each.
  MlaKvCache(std::int64_t layers, std::int64_t batch, std::int64_t capacity_tokens, std::int64_t width);

  // Row of (layer, seq, pos); pos < capacity().
  float* row(std::int64_t layer, std::int64_t seq, std::int64_t pos);
  const float* row(std::int64_t layer, std::int64_t seq, std::int64_t pos) const;

  std::int64_t layers() const { return layers_; }
  std::int64_t batch() const { return batch_; }
  std::int64_t width() const { return width_; }            // values per row
  std::int64_t capacity() const { return capacity_; }      // tokens per sequence
  std::int64_t length() const { return length_; }          // tokens held per sequence (all equal)
  void set_length(std::int64_t tokens);                    // after a step wrote rows [length, tokens)
  // Grows the capacity to at least `tokens`, keeping what is held.
  void reserve(std::int64_t tokens);
  std::size_t bytes() const { return data_.size() * sizeof(float); }

 private:
  std::int64_t layers_ = 0, batch_ = 0, capacity_ = 0, width_ = 0, length_ = 0;
  std::vector<float> data_;
};

}  // namespace tpb
