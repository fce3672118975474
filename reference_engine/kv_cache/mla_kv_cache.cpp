// The absorbed-MLA KV cache (see mla_kv_cache.h).
#include "reference_engine/kv_cache/mla_kv_cache.h"

#include <algorithm>

#include "tpb/check.h"

namespace tpb {

MlaKvCache::MlaKvCache(std::int64_t layers, std::int64_t batch, std::int64_t capacity_tokens, std::int64_t width)
    : layers_(layers), batch_(batch), capacity_(capacity_tokens), width_(width) {
  TPB_CHECK(layers > 0 && batch > 0 && capacity_tokens >= 0 && width > 0,
            "kv cache: bad shape layers=" << layers << " batch=" << batch << " width=" << width);
  data_.assign(static_cast<std::size_t>(layers * batch * capacity_tokens * width), 0.0f);
}

float* MlaKvCache::row(std::int64_t layer, std::int64_t seq, std::int64_t pos) {
  return data_.data() + ((layer * batch_ + seq) * capacity_ + pos) * width_;
}

const float* MlaKvCache::row(std::int64_t layer, std::int64_t seq, std::int64_t pos) const {
  return data_.data() + ((layer * batch_ + seq) * capacity_ + pos) * width_;
}

void MlaKvCache::set_length(std::int64_t tokens) {
  TPB_CHECK(tokens >= 0 && tokens <= capacity_, "kv cache: length " << tokens << " exceeds capacity " << capacity_);
  length_ = tokens;
}

void MlaKvCache::reserve(std::int64_t tokens) {
  if (tokens <= capacity_) return;
  const std::int64_t new_capacity = std::max(tokens, 2 * capacity_);
  std::vector<float> grown(static_cast<std::size_t>(layers_ * batch_ * new_capacity * width_), 0.0f);
  for (std::int64_t l = 0; l < layers_; ++l)
    for (std::int64_t s = 0; s < batch_; ++s)
      std::copy_n(row(l, s, 0), length_ * width_, grown.data() + ((l * batch_ + s) * new_capacity) * width_);
  data_.swap(grown);
  capacity_ = new_capacity;
}

}  // namespace tpb
