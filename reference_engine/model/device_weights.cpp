// The GPU engine's device-buffer plan (see device_weights.h). Blocks fill their buffer in
// loading order, so expert e's gate and up land at e x [2 I, H] and its down at e x [H, I].
#include "reference_engine/model/device_weights.h"

#include <map>
#include <tuple>

#include "tpb/check.h"

namespace tpb {
namespace {

std::int64_t element_bytes(WeightFormat f) {
  TPB_CHECK(f == WeightFormat::bf16 || f == WeightFormat::f32, "the GPU engine holds bf16 or fp32 weights only");
  return f == WeightFormat::f32 ? 4 : 2;
}

}  // namespace

std::int64_t DeviceWeightBuffer::bytes() const { return elements * element_bytes(format); }

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
    const WeightFormat format = storage_format(row.storage, Quantization::bf16);
    const auto key = std::make_tuple(row.scope, t.layer, slot);
    auto it = index.find(key);
    if (it == index.end()) {
      it = index.emplace(key, plan.buffers.size()).first;
      plan.buffers.push_back({slot, row.scope, t.layer, format, 0});
    }
    DeviceWeightBuffer& buffer = plan.buffers[it->second];
    TPB_CHECK(buffer.format == format, t.request.name << ": one device buffer holds one format");
    plan.blocks.push_back({t, it->second, buffer.elements});
    buffer.elements += t.request.rows() * t.request.cols();
  });
  return plan;
}

}  // namespace tpb
