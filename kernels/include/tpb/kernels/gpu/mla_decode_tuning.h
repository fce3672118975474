// The split kernels behind mla_decode_attention, one by one, for tpb_bench to time side by side
// and for the test that holds each to the host reference. Not an engine interface.
//   0 mma_sync  mma.sync m16n8k16, 32 heads per CTA, any width mla_decode_attention takes
//   1 wgmma     Hopper warpgroup MMA, 64 heads per CTA, kv_lora 512 + rope 64 only (the
//               DeepSeek-V3 / Kimi-K2.5 row): what mla_decode_attention launches there
//               above 32 heads
//   2 wgmma_heads_n  the same row with the heads as the MMA's N dimension, up to 32 heads (a
//               rank's share at TP >= 2): what mla_decode_attention launches there
// All give P to the P·V product as bf16 hi + lo, merge their splits with the same kernel and
// are deterministic (fixed sum order, no atomics); their sum orders differ, so their bits may.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "tpb/kernels/gpu/mla_decode.h"

namespace tpb::gpu::tuning {

int mla_decode_variants();
const char* mla_decode_variant_name(int variant);
bool mla_decode_variant_supports(int variant, const MlaDecodeShape& shape);
// The variant mla_decode_attention launches for this shape.
int mla_decode_default_variant(const MlaDecodeShape& shape);
// Each variant plans its own splits: the workspace it needs for `shape`. tiles_per_split > 0
// fixes each split's key range at that many 64-key tiles instead of the plan's choice (a tuning
// sweep: how the split count trades the partials' traffic against parallelism); the split
// count it gives must not pass 256.
std::size_t mla_decode_variant_workspace_bytes(int variant, const MlaDecodeShape& shape,
                                               std::int64_t tiles_per_split = 0);
// The number of splits the variant cuts each sequence's keys into (tiles_per_split as above).
std::int64_t mla_decode_variant_splits(int variant, const MlaDecodeShape& shape, std::int64_t tiles_per_split = 0);
// mla_decode_attention with the given variant's split kernel; throws where it does not take the shape.
void mla_decode_variant(int variant, const __nv_bfloat16* q, const __nv_bfloat16* cache, const std::int32_t* seq_lens,
                        const MlaDecodeShape& shape, float scale, void* workspace, __nv_bfloat16* o_lat,
                        cudaStream_t stream, std::int64_t tiles_per_split = 0);

}  // namespace tpb::gpu::tuning
