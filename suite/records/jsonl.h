// JSON Lines files (results.jsonl, baselines): one JSON object per line.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tpb {

// Reads every non-empty line; a line that is not a JSON object is an InputError naming
// the file and the line number. A missing file is an InputError. `line_numbers`, when given,
// receives each record's line number (1-based), for messages about a record's content.
std::vector<nlohmann::json> read_jsonl(const std::string& path, std::vector<int>* line_numbers = nullptr);

}  // namespace tpb
