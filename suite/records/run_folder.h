// A run's folder, <results>/<run-id>/ (docs/results.md), from the moment it exists until a
// --resume reads it back.
//
// A folder named as a run always holds its run.json: the first run.json is written in a hidden
// staging folder (<results>/.<run-id>.new) which is then renamed into place. A run that cannot
// write it (a full disk, a read-only folder) leaves nothing that claims to be a run, and says
// so; a crash in between leaves at most the hidden staging folder. Before, such a run left an
// empty <run-id>/ that `--resume` refused ("not a tpbench run folder") while the error had said
// "run.json is unchanged" (issue 37, finding 6).
//
// Once the folder exists, every later failure leaves it resumable: run.json is replaced
// atomically and results.jsonl is appended a whole record at a time (results.h), so the
// folder keeps the last run.json and every record written, and `tpbench run --resume` finishes
// it. resumable_note() words that for the failure's message.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace tpb {

// Makes the folder of a new run, `run_dir` (its parent, the results root, is created when
// missing), holding `run_json_text` as its run.json, all at once. On failure nothing of the
// run is left (the staging folder is removed) and a tpb::Error says so: "<run_dir>/run.json:
// cannot be written (write failed: No space left on device); the run was not started, and
// nothing of it was left in <results>".
void create_run_folder(const std::string& run_dir, const std::string& run_json_text);

// What a failure after `run_dir` exists leaves, for its message: "; <run_dir> keeps its
// run.json and every record written so far: `tpbench run --resume <run_dir>` finishes the run".
std::string resumable_note(const std::string& run_dir);

// run.json of the run `--resume` names, its shape checked as tpbench writes it, so that a
// damaged or hand-edited one is an InputError naming the file, the JSON path and what was
// expected (once, before anything runs), never a type error deep in the runner: an object;
// run_id a non-empty string; scenario an object with name (string), document (object) and
// source (string, when present); selection null or {case: [string], filter: [string]};
// invocation null or an object whose case_options, when present, are strings; provenance an object
// whose hosts, when present, are objects with a string host_id; resumed and cases arrays,
// launcher and summary objects, when present. A folder without run.json is an InputError
// "not a tpbench run folder".
nlohmann::json read_run_json_for_resume(const std::string& run_dir);

}  // namespace tpb
