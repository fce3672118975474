// Comparing the per-rank output digests of two results records (bitwise checks).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace tpb {

// "" when `a` and `b` (records) hold identical, non-empty digests on every rank; otherwise
// one sentence naming the first rank and output that differ (or what is missing).
std::string digest_difference(const nlohmann::json& a, const nlohmann::json& b);

}  // namespace tpb
