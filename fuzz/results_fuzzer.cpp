// Fuzz target: a results.jsonl or baseline file, read both ways tpbench reads one:
// read_results (--resume: damaged lines counted and skipped, then the finished and failed
// case ids) and read_jsonl (report, compare, baselines: a bad line is an InputError naming
// it), then each record's comparable_record_problem and the file's builds.
// Seeds: baselines/**/*.jsonl, tests/data/results_fixture/results.jsonl.
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_support.h"
#include "fuzz/json_mutator.h"
#include "suite/records/baseline.h"
#include "suite/records/jsonl.h"
#include "suite/records/results.h"

TPB_FUZZ_CUSTOM_MUTATOR(tpb::fuzz::InputFormat::json_lines)

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = tpb::fuzz::write_scratch_file("results.jsonl", tpb::fuzz::as_text(data, size));
  tpb::fuzz::expect_only_input_errors([&] {
    int damaged = 0;
    const auto resumed = tpb::read_results(path, &damaged);
    (void)tpb::finished_case_ids(resumed);
    (void)tpb::failed_case_ids(resumed);
  });
  tpb::fuzz::expect_only_input_errors([&] {
    std::vector<int> lines;
    const auto records = tpb::read_jsonl(path, &lines);
    for (const auto& r : records) (void)tpb::comparable_record_problem(r);
    for (const auto& b : tpb::builds_of(records, nullptr)) (void)tpb::describe_build(b);
  });
  return 0;
}
