// JSON Lines files (results.jsonl, baselines): one JSON object per line.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tpb {

// Reads every non-empty line; a line that is not a JSON object is an InputError naming
// the file and the line number. A missing file is an InputError.
std::vector<nlohmann::json> read_jsonl(const std::string& path);

}  // namespace tpb
