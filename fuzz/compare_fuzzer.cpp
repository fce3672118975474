// Fuzz target: `tpbench compare OLD NEW` on two results files, the input split at a line
// "----" (without one, a file against itself): read_jsonl, comparable_record_problem on every
// record (a problem is bad input, as compare exits 2 on it), nothing_comparable, then
// compare_runs with the default tolerances and the build comparison.
// Seeds: baselines/**/*.jsonl, tests/data/results_fixture/results.jsonl.
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_support.h"
#include "fuzz/json_mutator.h"
#include "suite/records/baseline.h"
#include "suite/records/jsonl.h"
#include "tpb/check.h"

namespace {

std::vector<nlohmann::json> read_side(const std::string& name, std::string_view bytes) {
  const std::string path = tpb::fuzz::write_scratch_file(name, bytes);
  auto records = tpb::read_jsonl(path);
  for (const auto& r : records) {
    const std::string problem = tpb::comparable_record_problem(r);
    TPB_INPUT_CHECK(problem.empty(), path << ": " << problem);
  }
  return records;
}

}  // namespace

TPB_FUZZ_CUSTOM_MUTATOR(tpb::fuzz::InputFormat::json_lines)

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto [old_bytes, new_bytes] = tpb::fuzz::split_in_two(tpb::fuzz::as_text(data, size));
  tpb::fuzz::expect_only_input_errors([&, old_bytes = old_bytes, new_bytes = new_bytes] {
    const auto old_records = read_side("old.jsonl", old_bytes);
    const auto new_records = read_side("new.jsonl", new_bytes);
    if (!tpb::nothing_comparable(old_records, new_records, "OLD", "NEW").empty()) return;
    const tpb::BaselineTolerances tol;
    for (const auto& v : tpb::compare_runs(old_records, new_records, tol)) {
      (void)tpb::is_regression(v);
      (void)tpb::to_json(v).dump();
    }
    (void)tpb::compare_build_sets(tpb::builds_of(old_records, nullptr), tpb::builds_of(new_records, nullptr))
        .to_json()
        .dump();
  });
  return 0;
}
