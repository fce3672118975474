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
// Formats are what the model's quantization gives each row: bf16, fp32 for the fp32 rows, and
// under int4 the routed experts int4_group32. An INT4 buffer holds, for all its tensors,
//   [weight_packed: elements / 8 uint32][weight_scale: elements / 32 bf16][weight_shape: 2 int32 each]
// each region in block order, so expert e's packed words start at e x stride / 8 and its scales
// at e x stride / 32 of their regions. This is the checkpoint's own layout (no repack: the
// W4A16 kernels read it as it is), and its bytes are the planner's int4_group32 bytes exactly.
// The GPU kernels need every INT4 block's input width (cols on this rank) a multiple of 32.
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
  WeightFormat format = WeightFormat::bf16;  // bf16, f32 or int4_group32
  std::int64_t elements = 0;  // the buffer's size in weights (an INT4 buffer's logical weights)
  std::int64_t tensors = 0;   // blocks in it (each INT4 tensor carries its weight_shape)
  std::int64_t bytes() const;
  // INT4 buffers: where the scales and the shapes start, in bytes from the buffer's start.
  std::int64_t int4_scales_offset_bytes() const { return elements / 2; }
  std::int64_t int4_shapes_offset_bytes() const { return elements / 2 + elements / 16; }
};

struct DeviceWeightBlock {
  ShardTensor tensor;        // what to load (its row points into the plan's layout)
  std::size_t buffer = 0;    // index in DeviceWeightPlan::buffers
  std::int64_t offset = 0;   // elements from the buffer's start (a multiple of 32 in an INT4 buffer)
  std::int64_t index = 0;    // which block of its buffer (0, 1, ...): its weight_shape entry
};

struct DeviceWeightPlan {
  std::vector<DeviceWeightBuffer> buffers;  // in allocation order: each before its first block
  std::vector<DeviceWeightBlock> blocks;    // in loading order (for_each_shard_tensor's)
  std::int64_t bytes() const;               // every buffer
};

// The plan of `shard` for the model's quantization (layout.config.quant); it points into
// `layout`, which must outlive it. InputError when an INT4 block's width is not a multiple of 32.
DeviceWeightPlan plan_device_weights(const TensorLayout& layout, Shard shard);

}  // namespace tpb
