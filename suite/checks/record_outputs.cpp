#include "suite/checks/record_outputs.h"

#include <limits>

namespace tpb {

using nlohmann::json;

std::int64_t record_tp(const json& record) {
  const json params = record.value("params", json());
  return params.is_object() && params.contains("tp") && params["tp"].is_number_integer() ? params["tp"].get<std::int64_t>()
                                                                                          : 1;
}

std::optional<std::vector<float>> record_logits(const json& record, std::size_t rank) {
  const json outputs = record.value("outputs", json());
  const json* per_rank = nullptr;
  if (outputs.is_array() && rank < outputs.size()) per_rank = &outputs[rank];
  if (!per_rank || !per_rank->is_object() || !per_rank->contains("logits") || !(*per_rank)["logits"].is_array())
    return std::nullopt;
  std::vector<float> v;
  for (const auto& x : (*per_rank)["logits"])
    v.push_back(x.is_number() ? x.get<float>() : std::numeric_limits<float>::quiet_NaN());
  return v;
}

json record_rank0_metric(const json& record, const char* key) {
  const json m = record.value("metrics", json::array());
  if (m.is_array() && !m.empty() && m[0].is_object() && m[0].contains(key)) return m[0][key];
  return nullptr;
}

}  // namespace tpb
