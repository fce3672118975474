// The report step, shared by `tpbench report` and the end of `tpbench run`: it runs the
// Python scripts in report/ (matplotlib) over a results folder. The scripts are found in
// <cwd>/report, then under the data roots (reference_engine/config/data_home.h: $TPB_HOME,
// the install prefix's share/tpbench, the source tree tpbench was built from); the
// interpreter is $TPB_PYTHON, else python3 on PATH.
#pragma once

#include <string>
#include <vector>

namespace tpb::cli {

// Absolute path of report/make_report.py, or "" when none of the places has it; `searched`
// (optional) receives the folders looked in, for the error message.
std::string find_report_script(std::vector<std::string>* searched = nullptr);

// The exit status of the report step when it cannot run on this machine (no python3, no
// matplotlib, no report/ folder): as tpbench's "nothing ran", the report is not made here,
// which is not a failure of what it would have shown.
inline constexpr int kReportUnavailable = 3;

// Runs make_report.py with `args` (RESULTS_DIR [--out DIR]) and returns its exit status:
// 0 written, 1 a file could not be written (or the script died of a signal), 2 bad input,
// 3 (kReportUnavailable) python3, matplotlib or the scripts missing, 128 + a signal when
// interrupted; each but 0 with one line on stderr. With `last_error_line`, the script's stderr
// still reaches ours and its last line is kept there, for run.json.
int run_report_script(const std::vector<std::string>& args, std::string* last_error_line = nullptr);

}  // namespace tpb::cli
