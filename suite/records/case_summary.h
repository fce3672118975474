// What a user reads in the terminal: each case's key numbers on its progress line, and at the
// end of a run one table per workload, in the manner of nccl-tests' rows (size, time, algbw,
// busbw) and of a serving benchmark's (step time, tokens/s, time to first token). Both are
// read from the records (results.jsonl) and from nothing else, so that every number printed
// is one a user can find again in the run folder.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tpb {

// The case's key numbers, "" when its record has no latency (skipped, failed early):
//   allreduce  "mean 164.0 us  p50 87.59 us  algbw 0.400 GB/s  busbw 0.400 GB/s"
//   decode     "step p50 15.9 us  p99 21.3 us  62918 tok/s  x3.21 weight-read"  (the last on GPUs)
//   prefill    "TTFT p50 1.23 ms  p99 1.31 ms  26112 tok/s"
std::string case_key_numbers(const nlohmann::json& record);

// One table per workload (and engine mode) of the records that carry a latency, in record
// order, each row with its status; "" when none does. Throughput columns are from the mean
// step (the record's throughput.basis), latency columns name their statistic.
std::string results_tables(const std::vector<nlohmann::json>& records);

}  // namespace tpb
