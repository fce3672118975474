// The GPU engine's device-buffer plan (see device_weights.h). Blocks fill their buffer in
// loading order, so expert e's gate and up land at e x [2 I, H] and its down at e x [H, I].
#include "reference_engine/model/device_weights.h"

#include <map>
#include <tuple>

#include "reference_engine/memory/weight_bytes.h"
#include "tpb/check.h"

namespace tpb {
namespace {

std::int64_t element_bytes(WeightFormat f) {
  TPB_CHECK(f == WeightFormat::bf16 || f == WeightFormat::f32, "a dense device buffer is bf16 or fp32");
  return f == WeightFormat::f32 ? 4 : 2;
}

}  // namespace

std::int64_t DeviceWeightBuffer::bytes() const {
  if (format == WeightFormat::int4_group32) return int4_shapes_offset_bytes() + tensors * kInt4ShapeMetaBytes;
  return elements * element_bytes(format);
}

std::int64_t DeviceWeightPlan::bytes() const {
  std::int64_t total = 0;
  for (const DeviceWeightBuffer& b : buffers) total += b.bytes();
  return total;
}

DeviceWeightPlan plan_device_weights(const TensorLayout& layout, Shard shard) {
  DeviceWeightPlan plan;
  // (scope, layer, slot with up folded onto gate) -> buffer; experts share their layer's.
  std::map<std::tuple<TensorScope, std::int64_t, TensorSlot>, std::size_t> index;
  for_each_shard_tensor(layout, shard, [&](const ShardTensor& t) {
    const TensorLayoutRow& row = *t.row;
    const TensorSlot slot = row.slot == TensorSlot::up ? TensorSlot::gate : row.slot;
    const WeightFormat format =
        storage_format(row.storage, layout.config.quant == Quantization::int4 ? Quantization::int4 : Quantization::bf16);
    if (format == WeightFormat::int4_group32)
      TPB_INPUT_CHECK(t.request.cols() % kInt4GroupSize == 0,
                      layout.config.name << ": " << t.request.name << ": the GPU engine's INT4 kernels need each rank's "
                                         << "input width a multiple of " << kInt4GroupSize << ", got " << t.request.cols()
                                         << " (" << t.request.global_cols() << " at TP " << shard.tp << ")");
    const auto key = std::make_tuple(row.scope, t.layer, slot);
    auto it = index.find(key);
    if (it == index.end()) {
      it = index.emplace(key, plan.buffers.size()).first;
      plan.buffers.push_back({slot, row.scope, t.layer, format, 0});
    }
    DeviceWeightBuffer& buffer = plan.buffers[it->second];
    TPB_CHECK(buffer.format == format, t.request.name << ": one device buffer holds one format");
    plan.blocks.push_back({t, it->second, buffer.elements, buffer.tensors});
    buffer.elements += t.request.rows() * t.request.cols();
    ++buffer.tensors;
  });
  return plan;
}

}  // namespace tpb
