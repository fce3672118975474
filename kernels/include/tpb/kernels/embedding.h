// Vocab-parallel embedding lookup: each rank holds rows [vocab_begin, vocab_end) of the
// table and writes zeros for tokens outside its range, so an allreduce (sum) over the ranks
// gives the full lookup exactly (one non-zero term per element).
#pragma once

#include <cstdint>

namespace tpb::kernels {

// tokens: [n]; table_shard: [vocab_end - vocab_begin, hidden]; out: [n, hidden].
// A token outside [0, vocab_size) is an InputError naming it.
void embedding_ref(const std::int64_t* tokens, std::int64_t n, const float* table_shard, std::int64_t vocab_begin,
                   std::int64_t vocab_end, std::int64_t vocab_size, std::int64_t hidden, float* out);

}  // namespace tpb::kernels
