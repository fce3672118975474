// Reading what an engine case recorded, for the checks that compare outputs with a tolerance
// (tp_invariant, equal_across_allreduce above TP 2).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tpb {

// The record's params.tp (1 when absent or not an integer).
std::int64_t record_tp(const nlohmann::json& record);
// outputs[rank].logits as floats, or nullopt when not recorded. A null element (a value JSON
// could not hold: NaN/Inf) reads as NaN, so the comparison fails on it.
std::optional<std::vector<float>> record_logits(const nlohmann::json& record, std::size_t rank);
// metrics[0][key], or null.
nlohmann::json record_rank0_metric(const nlohmann::json& record, const char* key);

}  // namespace tpb
