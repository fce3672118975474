// Plain-loop reference of the vocab-parallel embedding (see tpb/kernels/embedding.h).
#include "tpb/kernels/embedding.h"

#include <cstring>

#include "tpb/check.h"

namespace tpb::kernels {

void embedding_ref(const std::int64_t* tokens, std::int64_t n, const float* table_shard, std::int64_t vocab_begin,
                   std::int64_t vocab_end, std::int64_t vocab_size, std::int64_t hidden, float* out) {
  for (std::int64_t t = 0; t < n; ++t) {
    const std::int64_t id = tokens[t];
    TPB_INPUT_CHECK(id >= 0 && id < vocab_size,
                    "token id " << id << " at position " << t << " is outside the vocabulary [0, " << vocab_size << ")");
    float* row = out + t * hidden;
    if (id >= vocab_begin && id < vocab_end) {
      std::memcpy(row, table_shard + (id - vocab_begin) * hidden, sizeof(float) * hidden);
    } else {
      std::memset(row, 0, sizeof(float) * hidden);
    }
  }
}

}  // namespace tpb::kernels
