// How the GPU engine packs one rank's shard into device buffers: which buffers it allocates
// (in order, with their sizes) and where each tensor of the layout table goes. The GPU
// engine's loader (gpu/gpu_engine_weights.cpp) allocates and fills exactly this plan; it is
// CPU code so that the planner test can count the GPU engine's weight bytes without a GPU.
//
// Every tensor is one buffer, except where the GPU kernels want several together:
//   - gate and up of an MLP (dense MLP, shared experts, each routed expert) share one
//     [gate rows | up rows] block: one GEMM computes both, and silu_and_mul reads its halves;
//   - a layer's routed experts are one buffer per kind (gate|up, down), expert after expert:
//     the expert GEMMs find expert e at e x its stride.
// Formats are what Quantization::bf16 gives each row (bf16, or fp32 for the fp32 rows).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "reference_engine/model/tensor_layout.h"

namespace tpb {

struct DeviceWeightBuffer {
  TensorSlot slot;            // the slot of its first tensor (gate for a fused gate|up)
  TensorScope scope;
  std::int64_t layer = -1;    // -1 for model scope
  WeightFormat format = WeightFormat::bf16;  // bf16 or f32
  std::int64_t elements = 0;  // the buffer's size
  std::int64_t bytes() const;
};

struct DeviceWeightBlock {
  ShardTensor tensor;        // what to load (its row points into the plan's layout)
  std::size_t buffer = 0;    // index in DeviceWeightPlan::buffers
  std::int64_t offset = 0;   // elements from the buffer's start
};

struct DeviceWeightPlan {
  std::vector<DeviceWeightBuffer> buffers;  // in allocation order: each before its first block
  std::vector<DeviceWeightBlock> blocks;    // in loading order (for_each_shard_tensor's)
  std::int64_t bytes() const;               // every buffer
};

// The plan of `shard`; it points into `layout`, which must outlive it.
DeviceWeightPlan plan_device_weights(const TensorLayout& layout, Shard shard);

}  // namespace tpb
