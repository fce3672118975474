#include "suite/jsonl.h"

#include <fstream>

#include "tpb/check.h"

namespace tpb {

std::vector<nlohmann::json> read_jsonl(const std::string& path, std::vector<int>* line_numbers) {
  std::ifstream in(path);
  TPB_INPUT_CHECK(in.good(), path << ": cannot open (expected a JSON Lines results file)");
  std::vector<nlohmann::json> records;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json record;
    try {
      record = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for a number like 1e400
      TPB_INPUT_FAIL(path << ":" << number << ": not valid JSON (" << e.what() << ")");
    }
    TPB_INPUT_CHECK(record.is_object(), path << ":" << number << ": expected a JSON object per line");
    records.push_back(std::move(record));
    if (line_numbers) line_numbers->push_back(number);
  }
  return records;
}

}  // namespace tpb
