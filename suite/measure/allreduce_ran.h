// What carried a case's allreduces, as a record states it (record.allreduce_ran), built by the
// runner from each rank's comm result (suite/workloads/workload.h, communicator_result): the backend a
// case asked for is not always the one that ran. A custom allreduce without peer access runs
// NCCL, one whose messages exceed its buffer runs NCCL for those, and auto picks a path per
// message size. Comparing "custom" with NCCL when custom ran NCCL compares NCCL with itself,
// so the record says what ran, and a case whose requested backend carried none of its
// allreduces is recorded with status "fallback", never "ok".
//
// record.allreduce_ran, JSON:
//   requested     string       the case's params.allreduce
//   backend       string       rank 0's communicator name(): "nccl" for a custom backend that
//                              fell back as a whole, "auto" for auto
//   ran           array        [{backend, calls, bytes_min, bytes_max}]: rank 0's all_reduce calls
//                              in this case per path that ran them, smallest messages first
//                              (bytes per rank, inclusive range; calls are host calls: a CUDA
//                              graph's replays are not counted again, see allreduce_calls.h)
//   verdict       string       "as-requested"      every call ran on the requested backend (for
//                                                  auto: on the paths it chose)
//                              "partial-fallback"  some calls ran on another backend (e.g. the
//                                                  messages above a custom backend's buffer)
//                              "fallback"          the requested backend carried none: the case's
//                                                  status is "fallback"
//                              "no-calls"          no allreduce call was counted
//   fallback      string|null  why calls ran elsewhere (the communicator's fallback_reason, else
//                              which backend carried how many); for auto, why it ran NCCL only
//                              (no thresholds for this machine, or the custom path is off)
//   ranks_differ  string       only when another rank's calls differ from rank 0's: which and how
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tpb {

// record.allreduce_ran from the case's params and each rank's comm result; null when the
// case has no allreduce backend (params.allreduce missing) and no rank said which ran.
nlohmann::json allreduce_ran_from_ranks(const nlohmann::json& params, const std::vector<nlohmann::json>& comm_per_rank);

// The backends of allreduce_ran.ran, smallest messages first; empty when none was counted.
std::vector<std::string> ran_backends(const nlohmann::json& allreduce_ran);

// "custom-oneshot 24 calls (14 KiB), nccl 7 calls (14 MiB)"; "no allreduce call counted".
std::string ran_text(const nlohmann::json& ran);

// One line for the terminal, the record's error and JUnit, "" when the case ran as requested:
// "custom-oneshot requested, nccl ran all 31 allreduce calls (no peer access ...)".
std::string allreduce_ran_note(const nlohmann::json& allreduce_ran);

// A message size exactly: "14 MiB", "14 KiB", "1028 B".
std::string bytes_text(std::uint64_t bytes);

}  // namespace tpb
