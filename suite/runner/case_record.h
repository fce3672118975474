// A case's record: the fields known before it runs (proto_record, base_record) and those its
// ranks' results fill in (case_record_from_ranks: latency as the slowest rank per sample,
// throughput from the mean, digests and memory per rank, what carried the allreduces, the
// status). Fields and units: docs/results.md; the schema: schemas/record.schema.json.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "suite/scenario/case_spec.h"
#include "suite/scenario/scenario.h"
#include "suite/scenario/sweep.h"

namespace tpb {

// The fields of a record that checks group by, known before the case runs.
nlohmann::json proto_record(const Scenario& s, const Case& c);

// A record before its case runs: proto_record, the run, the command that reruns the case, the
// provenance, and every result field null.
nlohmann::json base_record(const Scenario& s, const Case& c, const std::string& run_id, const nlohmann::json& provenance,
                           const std::vector<std::string>& case_options);

// One record from the ranks' results (suite/scenario/case_spec.h), in rank order. Its status is
// "ok", "fallback" (the requested allreduce backend carried none of the allreduces; error says
// which ran, allreduce_ran the counts) or "infeasible" with the first infeasible rank's
// sentence as error.
nlohmann::json case_record_from_ranks(const Scenario& scenario, const Case& c,
                                      const std::vector<RankResult>& ranks);

// A record's latency from the ranks' results (suite/scenario/case_spec.h): latency_summary of their
// latency_us; when they ran interleaved halves, also interleaved_off_repetitions_us (one
// median per repetition of the B halves, merged across ranks alike), interleaved_off_p50 and
// interleaving (the halves' order, "ABBA..."). null without samples.
nlohmann::json case_latency(const std::vector<RankResult>& rank_results, int repetitions);

// A record's throughput: throughput_from_mean of rank 0's work (every rank does the same
// work per step) and the latency's mean; null when the workload reports no work.
nlohmann::json case_throughput(const std::vector<RankResult>& rank_results, const nlohmann::json& latency);

}  // namespace tpb
