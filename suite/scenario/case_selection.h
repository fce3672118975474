// Case selection and reproduction: which of a scenario's expanded cases one `tpbench run`
// runs (`--case ID[,ID...]`, `--filter KEY=VALUE`), and the one-line command every record
// carries (`reproduce`) that reruns just its case.
//
// Selection happens after expansion (suite/scenario/sweep.h), so a selected case keeps the id it has
// in the full sweep, and a record of a partial run compares with the full run's. What a
// selection keeps, so that the checks still judge what they judged:
//   - a case and its deterministic repeat go together: naming either id selects both;
//   - the control case (first and last) is kept whenever the scenario has one, so
//     control_drift still judges the run; naming a control id selects the two controls only;
//   - `--filter` judges the sweep cases (and their repeats) by their params: KEY is a param
//     name (tp, allreduce, batch_size, mem_fraction, ...); VALUE matches the param's JSON
//     value (2, 0.9, true, "shm") or its text (shm). Filters on different keys must all hold;
//     repeating a key accepts any of its values (--filter tp=1 --filter tp=2);
//   - `--case` and `--filter` together select the named cases that pass the filters.
// An id the expansion does not have, or a filter that matches no case, is bad input (exit 2)
// naming it: a reproduction that selects nothing must not read as a pass.
// Checks then judge the groups among the selected cases; a group left with one member is
// skipped with the reason (e.g. equal_across_allreduce: "needs two backends that ran").
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "suite/scenario/scenario.h"
#include "suite/scenario/sweep.h"

namespace tpb {

struct CaseFilter {
  std::string key;    // a param name, e.g. "tp"
  std::string value;  // as typed, e.g. "2"
  std::string text() const { return key + "=" + value; }
};

struct CaseSelection {
  std::vector<std::string> ids;     // --case, in the order given; empty: every case
  std::vector<CaseFilter> filters;  // --filter, in the order given; empty: no filter
  bool empty() const { return ids.empty() && filters.empty(); }
  // {"case": [ids], "filter": ["KEY=VALUE", ...]} for run.json; null when empty. --resume
  // reads it back so that a resumed partial run stays partial.
  nlohmann::json to_json() const;
  static CaseSelection from_json(const nlohmann::json& j);
};

// "KEY=VALUE" -> filter; InputError when there is no '=' or either side is empty.
CaseFilter parse_case_filter(const std::string& text);
// "a,b" -> {"a", "b"} (blanks around ids dropped); InputError on an empty id.
std::vector<std::string> split_case_ids(const std::string& list);
// Whether a param's value matches a filter's VALUE: equal as JSON (2 == 2, 0.9 == 0.90,
// true, "shm") or, for strings, as text (shm).
bool filter_value_matches(const nlohmann::json& param, const std::string& value);

// The selected cases, in expansion order. Throws InputError naming every unknown id, every
// key that is not a param, and every filter (or combination) that matches no case.
std::vector<Case> select_cases(const Scenario& scenario, const std::vector<Case>& cases,
                               const CaseSelection& selection);

// `tpbench run <scenario> --case <id> [options...]`, each word quoted for a POSIX shell when it
// needs to be. `case_options` are the options that changed the case (e.g. --placement shared).
std::string reproduce_command(const std::string& scenario_path, const std::string& case_id,
                              const std::vector<std::string>& case_options);
// The word as a POSIX shell reads it back: unchanged when it holds only safe characters,
// else in single quotes.
std::string shell_quote(const std::string& word);

}  // namespace tpb
