// The wgmma split pass of the absorbed-MLA decode attention (mla_decode_wgmma.cu), for
// mla_decode.cu: it plans the splits, sizes the workspace and merges. Internal to kernels/cuda.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace tpb::gpu::detail {

struct MlaDecodeWgmmaLaunch {
  const __nv_bfloat16* q = nullptr;      // [batch, heads, 576]
  const __nv_bfloat16* cache = nullptr;  // [batch, max_len, 576]
  const std::int32_t* seq_lens = nullptr;
  std::int64_t batch = 0, heads = 0, max_len = 0;
  std::int64_t groups = 0;  // CTAs per (split, sequence): 64 heads each
  std::int64_t splits = 0, chunk = 0;
  float scale = 0.0f;
  float* o_part = nullptr;  // the workspace as mla_decode.cu carves it
  float* m_part = nullptr;
  float* l_part = nullptr;
};

// Resident split CTAs on the current device (the plan's wave size); sets the kernel's shared
// memory attribute.
std::int64_t mla_decode_wgmma_resident_ctas();
void launch_mla_decode_split_wgmma(const MlaDecodeWgmmaLaunch& launch, cudaStream_t stream);
// The kernel with the heads as the MMA's N dimension (up to kMlaDecodeHeadsNMax heads, one
// head group): its resident CTAs for `heads` and its launch, which takes the same workspace.
std::int64_t mla_decode_wgmma_heads_n_resident_ctas(std::int64_t heads);
void launch_mla_decode_split_wgmma_heads_n(const MlaDecodeWgmmaLaunch& launch, cudaStream_t stream);

}  // namespace tpb::gpu::detail
