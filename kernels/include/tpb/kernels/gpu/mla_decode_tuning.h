// The split kernels behind mla_decode_attention, one by one, for tpb_bench to time side by side
// and for the test that holds each to the host reference. Not an engine interface.
//   0 mma_sync  mma.sync m16n8k16, 32 heads per CTA, any width mla_decode_attention takes; on
//               devices that allow less shared memory per block than its 191 KiB at the
//               Kimi-K2.5 row, a smaller configuration (tpb/kernels/mla_decode_split.h,
//               kMlaDecodeMmaConfigs: 16 heads per CTA, 32-key stages)
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
// count it gives must not pass 256. mma_config (mma_sync only) >= 0 forces that configuration
// of kernels::kMlaDecodeMmaConfigs (it must fit the device: mla_decode_mma_config_runs); < 0
// takes the one mla_decode_attention takes (mla_decode_mma_config). Each configuration plans
// its own splits too.
std::size_t mla_decode_variant_workspace_bytes(int variant, const MlaDecodeShape& shape,
                                               std::int64_t tiles_per_split = 0, int mma_config = -1);
// The number of splits the variant cuts each sequence's keys into (tiles_per_split, mma_config as above).
std::int64_t mla_decode_variant_splits(int variant, const MlaDecodeShape& shape, std::int64_t tiles_per_split = 0,
                                       int mma_config = -1);
// mla_decode_attention with the given variant's split kernel; throws where it does not take the shape.
void mla_decode_variant(int variant, const __nv_bfloat16* q, const __nv_bfloat16* cache, const std::int32_t* seq_lens,
                        const MlaDecodeShape& shape, float scale, void* workspace, __nv_bfloat16* o_lat,
                        cudaStream_t stream, std::int64_t tiles_per_split = 0, int mma_config = -1);

// The mma.sync kernel's configurations on the calling thread's current device.
// This device's shared-memory budget per block: kernels::smem_budget_bytes of its
// cudaDevAttrMaxSharedMemoryPerBlockOptin (asked once per device) under TPB_KERNELS.
std::int64_t mla_decode_smem_budget_bytes();
// The configuration mla_decode_attention's mma.sync kernel takes for `shape`: the first of
// kernels::kMlaDecodeMmaConfigs within the budget.
int mla_decode_mma_config(const MlaDecodeShape& shape);
// Whether configuration mma_config can launch at `shape` on this device (its block within the
// device's own maximum, whatever the budget): the ones a test holds to the reference.
bool mla_decode_mma_config_runs(int mma_config, const MlaDecodeShape& shape);

}  // namespace tpb::gpu::tuning
