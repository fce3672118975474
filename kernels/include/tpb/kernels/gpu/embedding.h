// GPU vocab-parallel embedding gather (CPU reference: tpb/kernels/embedding.h).
// out[t, :] = table_shard[ids[t] - vocab_begin, :] for ids in [vocab_begin, vocab_end), else
// zeros, so the allreduce over ranks gives the full lookup exactly. Ids are validated on the
// host before they reach the device (a kernel cannot report an InputError).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace tpb::gpu {

// ids: device [tokens]; table_shard: device [vocab_end - vocab_begin, hidden]; out: device [tokens, hidden].
void embedding_gather(const std::int32_t* ids, std::int64_t tokens, const __nv_bfloat16* table_shard,
                      std::int64_t vocab_begin, std::int64_t vocab_end, std::int64_t hidden, __nv_bfloat16* out,
                      cudaStream_t stream);

}  // namespace tpb::gpu
