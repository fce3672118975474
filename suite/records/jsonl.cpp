#include "suite/records/jsonl.h"

#include <fstream>

#include "reference_engine/config/json_text.h"
#include "tpb/check.h"

namespace tpb {

std::vector<nlohmann::json> read_jsonl(const std::string& path, std::vector<int>* line_numbers) {
  std::ifstream in(path);
  TPB_INPUT_CHECK(in.good(), path << ": cannot open (expected a JSON Lines results file)");
  std::vector<nlohmann::json> records;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    // Strict and bounded (json_text.h): syntax, nesting depth, duplicate keys, NUL, 1e400.
    JsonText record = parse_json_text(line);
    TPB_INPUT_CHECK(record.problem.empty(), path << ":" << number << ": not valid JSON (" << record.problem << ")");
    TPB_INPUT_CHECK(record.value.is_object(), path << ":" << number << ": expected a JSON object per line");
    records.push_back(std::move(record.value));
    if (line_numbers) line_numbers->push_back(number);
  }
  return records;
}

}  // namespace tpb
