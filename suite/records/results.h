// Results on disk: results/<run-id>/results.jsonl (one JSON record per case, appended,
// flushed and fsync'ed per record so a crash loses at most the case in flight) and
// run.json (provenance, scenario, case list; replaced atomically).
//
// Record keys (docs/results.md, schemas/record.schema.json): schema, run_id, case_id, label,
// role, workload, device, model, params, status (ok | infeasible | failed | skipped |
// fallback), error, plan, memory, latency, throughput, digests, checks, baseline, provenance
// (compact; the full one is in run.json), and the rest the docs list.
#pragma once

#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tpb {

constexpr int kResultsSchema = 1;

// "20261130T224836.123Z-3f9a1c": UTC start time to the millisecond (run folders sort in time
// order), then 6 random hex digits against collisions.
std::string new_run_id();

// Appends records to one results.jsonl.
class ResultsWriter {
 public:
  explicit ResultsWriter(const std::string& path);  // creates the file when missing
  ~ResultsWriter();
  ResultsWriter(const ResultsWriter&) = delete;
  ResultsWriter& operator=(const ResultsWriter&) = delete;

  // One line, then fsync: when this returns the record is on disk. A failed write (a full
  // disk) removes what it wrote of the line and throws naming errno: never half a record.
  void append(const nlohmann::json& record);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

// Every record of a results.jsonl. A line that does not parse (a crash in mid-write), is not
// an object, or holds a case_id or status that is not a string is skipped and counted in
// `damaged_lines` when given; a missing file is no records.
std::vector<nlohmann::json> read_results(const std::string& path, int* damaged_lines = nullptr);

// Ids of records with a final status (ok, infeasible, failed, skipped, fallback): what --resume skips.
std::set<std::string> finished_case_ids(const std::vector<nlohmann::json>& records);
bool is_final_status(const std::string& status);
// Ids whose last record with a final status is `failed`: what `--resume --retry-failed`
// runs again. results.jsonl is append-only; a later record of a case supersedes an earlier one.
std::set<std::string> failed_case_ids(const std::vector<nlohmann::json>& records);

// The results.jsonl a command line names: a run folder (results/<run-id>/) stands for its
// results.jsonl; any other path is taken as it is. A folder without results.jsonl (an empty
// one, a results root holding many runs) is an InputError saying so.
std::string results_file_of(const std::string& path);

// Writes `content` to `path` through a temporary file, fsync and rename, then fsyncs the
// folder: readers never see half a file, a crash leaves the old or the new one, and an error
// leaves `path` as it was (or absent, as it was) and no temporary file behind. The folders up
// to `path` are created. An error is a tpb::Error naming the path, what failed and errno, and
// whether the file was there before ("... (run.json is as it was)", "... was not written").
void write_file_atomic(const std::string& path, const std::string& content);
// The same, for a caller that words its own message: "" when written, else what failed and
// errno ("write failed: No space left on device").
std::string write_file_atomic_or_reason(const std::string& path, const std::string& content);

// Rewrites a results.jsonl without its damaged lines (a record cut short by a crash), after
// appending them to <path>.damaged; returns how many were removed (0: file untouched). What
// --resume does first, so that report and compare can read the run afterwards.
int drop_damaged_lines(const std::string& path);

// An advisory lock on a run folder (<run_dir>/.tpbench.lock, flock), held while a run or a
// --resume writes it: a second writer is an InputError naming the holder's pid instead of
// running the same cases again. Released when the object goes (or the process dies).
class RunFolderLock {
 public:
  explicit RunFolderLock(const std::string& run_dir);
  ~RunFolderLock();
  RunFolderLock(const RunFolderLock&) = delete;
  RunFolderLock& operator=(const RunFolderLock&) = delete;

 private:
  int fd_ = -1;
};
nlohmann::json read_json_file(const std::string& path);

}  // namespace tpb
