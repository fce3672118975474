// A case's record (see case_record.h).
#include "suite/runner/case_record.h"

#include <filesystem>

#include "suite/measure/allreduce_ran.h"
#include "suite/measure/measure.h"
#include "suite/records/results.h"
#include "suite/scenario/case_selection.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace tpb {

json proto_record(const Scenario& s, const Case& c) {
  return {{"case_id", c.id}, {"label", c.label}, {"role", c.role},     {"workload", s.workload},
          {"device", s.device}, {"model", model_identity(s)}, {"params", c.params}};
}


json base_record(const Scenario& s, const Case& c, const std::string& run_id, const json& provenance,
                 const std::vector<std::string>& case_options) {
  json r = proto_record(s, c);
  r["schema"] = kResultsSchema;
  r["run_id"] = run_id;
  r["scenario"] = s.name;
  // The command that reruns just this case (with its repeat and the control, if any).
  // A scenario read from stdin has no file to name: `tpbench run -` again, fed the document
  // that run.json keeps.
  const bool from_stdin = s.source == kStdinScenarioSource;
  r["reproduce"] = reproduce_command(from_stdin ? "-" : fs::absolute(s.source).string(), c.id, case_options);
  r["status"] = nullptr;
  r["error"] = nullptr;
  r["plan"] = nullptr;  // the memory planner lands with its own issue
  r["memory"] = nullptr;
  r["latency"] = nullptr;
  r["throughput"] = nullptr;
  r["digests"] = nullptr;
  r["checks"] = json::object();
  r["baseline"] = nullptr;  // verdicts come from `tpbench compare` / the baseline issue
  r["provenance"] = provenance;
  return r;
}


json case_record_from_ranks(const Scenario& s, const Case& c, const std::vector<RankResult>& ranks) {
  json r = json::object();
  json memory = json::array(), digests = json::array(), comm = json::array(), outputs = json::array();
  bool any_outputs = false;
  for (const RankResult& rank : ranks) {
    memory.push_back(rank.memory);
    digests.push_back(rank.digests);
    comm.push_back(rank.comm);
    outputs.push_back(rank.outputs.empty() ? json(nullptr) : json(rank.outputs));
    any_outputs = any_outputs || !rank.outputs.empty();
  }
  r["memory"] = memory;
  // The memory plan is the same on every rank (a pure function of the case): rank 0's.
  if (!ranks.empty() && !ranks.front().plan.is_null()) r["plan"] = ranks.front().plan;
  r["digests"] = digests;
  r["comm"] = comm;
  // Samples of each rank's outputs (e.g. the engine's first logits) for tolerance checks;
  // null when the workload reports none.
  r["outputs"] = any_outputs ? outputs : json(nullptr);
  json metrics = json::array();
  for (const RankResult& rank : ranks) metrics.push_back(rank.metrics);
  r["metrics"] = metrics;  // per rank: workload-specific numbers and self-checks
  r["latency"] = case_latency(ranks, s.measure.repetitions);
  r["throughput"] = case_throughput(ranks, r["latency"]);
  // What carried the allreduces (suite/measure/allreduce_ran.h); a case whose requested backend
  // carried none of them measured another backend: status "fallback", never "ok".
  std::vector<json> comm_per_rank(comm.begin(), comm.end());
  r["allreduce_ran"] = allreduce_ran_from_ranks(c.params, comm_per_rank);
  r["status"] = "ok";
  if (r["allreduce_ran"].is_object() && r["allreduce_ran"].value("verdict", "") == "fallback") {
    r["status"] = "fallback";
    r["error"] = allreduce_ran_note(r["allreduce_ran"]);
  }
  // A rank that found the case infeasible as measured (the GPU engine's KV pool on the
  // device's real free memory) says so in its result: recorded as an infeasible plan is.
  for (const RankResult& rank : ranks)
    if (!rank.infeasible.empty()) {
      r["status"] = "infeasible";
      r["error"] = rank.infeasible;
      break;
    }
  // An output with NaN or Inf fails the case, whatever the checks would say of its digests;
  // unless the scenario expects them (an overflow drill), when their absence fails it.
  std::string nonfinite;  // the first rank's sentence
  for (const RankResult& rank : ranks)
    if (!rank.nonfinite.empty() && nonfinite.empty()) nonfinite = "rank " + std::to_string(rank.rank) + ": " + rank.nonfinite;
  if (r.value("status", "") == "ok") {
    if (s.nonfinite == "expected" && nonfinite.empty()) {
      r["status"] = "failed";
      r["error"] = "no output holds NaN or Inf on any rank, and the scenario expects them (nonfinite: \"expected\")";
    } else if (s.nonfinite == "expected") {
      r["nonfinite"] = nonfinite;  // as expected: recorded, not a failure
    } else if (!nonfinite.empty()) {
      r["status"] = "failed";
      r["error"] = nonfinite;
    }
  }
  return r;
}


json case_latency(const std::vector<RankResult>& rank_results, int repetitions) {
  std::vector<std::vector<double>> recorded, paused;
  for (const RankResult& rank : rank_results) {
    recorded.push_back(rank.latency_us);
    paused.push_back(rank.interleaved_off_latency_us);
  }
  json lat = latency_summary(recorded, repetitions);
  if (!lat.is_object()) return lat;
  const json off = latency_summary(paused, repetitions);
  if (off.is_object()) {
    lat["interleaved_off_p50"] = off["p50"];
    lat["interleaved_off_mean"] = off["mean"];
    if (off.contains("repetitions_us")) lat["interleaved_off_repetitions_us"] = off["repetitions_us"];
    lat["interleaving"] = rank_results.front().interleaving;
  }
  return lat;
}


json case_throughput(const std::vector<RankResult>& rank_results, const json& latency) {
  if (rank_results.empty() || !latency.is_object() || !latency.contains("mean") || !latency["mean"].is_number())
    return nullptr;
  return throughput_from_mean(rank_results.front().work, latency["mean"].get<double>());
}

}  // namespace tpb
